"""A scripted agent conversation, recorded by `eventlog demo` to show the store at work."""

from __future__ import annotations

from eventlog.events import (
    Checkpoint,
    EventData,
    Invocation,
    ModelInput,
    ModelOutput,
    ReasoningPart,
    SystemInstructionSet,
    TextPart,
    ToolCall,
    ToolResult,
    ToolResults,
    ToolsetDefined,
    ToolSpec,
    Usage,
    WidgetUpdated,
)
from eventlog.store import NO_STREAM, Store

CLAUDE = Invocation(provider="anthropic", specification="messages", model="claude-sonnet-4-5")


def script() -> list[EventData]:
    """The demo conversation: a coding agent reads two files in parallel and answers."""
    return [
        SystemInstructionSet(text="You are a careful coding agent. Cite the files you read."),
        ToolsetDefined(
            tools=(
                ToolSpec(
                    name="read_file",
                    description="Read a file from the workspace",
                    parameters={
                        "type": "object",
                        "properties": {"path": {"type": "string"}},
                        "required": ["path"],
                    },
                ),
            )
        ),
        ModelInput.from_text("Why does the build fail? 构建为什么失败？"),
        ModelOutput(
            parts=(
                ReasoningPart(text="I should read the config and the log.", signature="sig-demo"),
                TextPart(text="Let me read the build config and the last log."),
            ),
            tool_calls=(
                ToolCall.parse("call_1", "read_file", '{"path": "pyproject.toml"}'),
                ToolCall.parse("call_2", "read_file", '{"path": "build.log"}'),
            ),
            invocation=CLAUDE,
            usage=Usage(prompt_tokens=812, completion_tokens=64),
            stop_reason="tool_use",
        ),
        ToolResults(
            results=(
                ToolResult(
                    call_id="call_1",
                    tool_name="read_file",
                    content='[project]\nname = "app"\nrequires-python = ">=3.13"',
                ),
                ToolResult(
                    call_id="call_2",
                    tool_name="read_file",
                    content="ERROR: Package 'app' requires a different Python: 3.11.7",
                ),
            )
        ),
        WidgetUpdated(widget="notebook", state="- build fails: python version mismatch"),
        ModelOutput(
            parts=(
                TextPart(
                    text="pyproject.toml requires Python >= 3.13 but the build runs 3.11.7 "
                    "(build.log). Lower `requires-python` or upgrade the interpreter."
                ),
            ),
            invocation=CLAUDE,
            usage=Usage(prompt_tokens=1020, completion_tokens=48, cached_prompt_tokens=812),
            stop_reason="end_turn",
        ),
        Checkpoint(label="answered"),
    ]


def record_demo(store: Store) -> str:
    """Record the demo conversation in a new stream `demo-N`; return its name."""
    existing = {info.stream for info in store.streams()}
    n = 1
    while f"demo-{n}" in existing:
        n += 1
    stream = f"demo-{n}"
    store.append(stream, script(), expected_seq=NO_STREAM)
    store.fork(stream, f"{stream}-retry", at_seq=3)
    store.append(
        f"{stream}-retry",
        [ModelInput.from_text("Answer in one sentence.")],
        expected_seq=3,
    )
    return stream
