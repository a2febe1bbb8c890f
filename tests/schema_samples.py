"""One event of every kind, as encoded by schema version 1 in tests/data/ (must keep decoding).

Run `python -m tests.schema_samples` only to create the files for a NEW schema version; never
regenerate existing files: they are the proof that old data still decodes.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

import eventlog as el

DATA = Path(__file__).with_name("data")


def samples() -> list[el.EventData]:
    """Every built-in kind, with most optional fields set."""
    return [
        el.SystemInstructionSet(text="You are terse."),
        el.ToolsetDefined(
            tools=(el.ToolSpec(name="read", description="Read", parameters={"type": "object"}),)
        ),
        el.ModelInput(
            sections=(el.Section(text="full 全文", title="t", summary="sum", gist="g"),),
            attachments=(
                el.Attachment(media_type="image/png", data=b"\x89PNG"),
                el.Attachment(media_type="application/pdf", uri="s3://b/k.pdf", name="k.pdf"),
            ),
        ),
        el.ModelOutput(
            parts=(
                el.ReasoningPart(text="think", signature="sig", redacted_data=None),
                el.ReasoningPart(item_id="rs_1", encrypted_content="enc", summary=("s",)),
                el.TextPart(text="hello", signature="ts"),
                el.RefusalPart(text="no"),
            ),
            tool_calls=(
                el.ToolCall.parse("call_1", "read", '{"path": "a"}'),
                el.ToolCall.parse("call_2", "read", '{"path": '),
            ),
            invocation=el.Invocation(provider="anthropic", specification="messages", model="m"),
            usage=el.Usage(prompt_tokens=10, completion_tokens=5, cached_prompt_tokens=2),
            stop_reason="tool_use",
        ),
        el.ToolResults(
            results=(
                el.ToolResult(call_id="call_1", tool_name="read", content="A", elapsed_ms=1.5),
                el.ToolResult(call_id="call_2", tool_name="read", status="failed", content="E"),
            ),
            execute_error=None,
        ),
        el.Compaction(first_seq=1, last_seq=3, summary="sum", summarizer="offline"),
        el.Checkpoint(label="cp"),
        el.WidgetUpdated(widget="notebook", state="- a"),
        el.SkillActivated(name="pdf", instructions="use it"),
        el.Custom(kind="k", data={"a": [1, 2.5, None, "x"]}),
    ]


def write(version: int) -> None:
    """Write samples of this schema version in both formats."""
    for fmt, encode in (("msgpack", msgspec.msgpack.encode), ("json", msgspec.json.encode)):
        rows = [[el.events.tag_of(type(s)), version, encode(s)] for s in samples()]
        (DATA / f"events_v{version}.{fmt}").write_bytes(msgspec.msgpack.encode(rows))


if __name__ == "__main__":
    write(1)
