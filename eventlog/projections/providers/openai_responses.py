"""OpenAI Responses request bodies from a Window (pure, deterministic; see docs/rendering.md).

Rules held by construction: the current instruction as `instructions`, earlier or midway ones
as developer messages where they took effect; user text as `input_text`; assistant text as
`output_text` in an assistant `message`; `function_call` and `function_call_output` items
paired by `call_id`, outputs right after their calls; reasoning items (id, summary, encrypted
content) only for outputs OpenAI produced, and only followed by the item they preceded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, assert_never

from eventlog.events import Attachment, ReasoningPart, RefusalPart, TextPart
from eventlog.projections.providers.render_common import (
    InstructionTurn,
    Orphans,
    OutputTurn,
    ResultsTurn,
    Turn,
    Unanswered,
    UserTurn,
    attachment_note,
    data_url,
    error_text,
    fix_id,
    from_provider,
    is_blank,
    is_image,
    merge_extra,
    raw_arguments,
    single_system,
    turns,
)
from eventlog.projections.window_types import Window

PROVIDER = "openai"
MAX_ID_LENGTH = 64
"""Longest call id kept as is; longer ones are rewritten (any characters are kept)."""

Item = dict[str, Any]


def render(
    window: Window,
    *,
    model: str,
    max_tokens: int | None = None,
    unanswered: Unanswered = "cancel",
    orphans: Orphans = "text",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The `responses.create` body for a window.

    `max_tokens` becomes `max_output_tokens`; `extra` adds other top-level fields (`store`,
    `reasoning`, `include`).
    """
    items = turns(window, unanswered=unanswered, orphans=orphans)
    system, items = single_system(window, items, as_text=False)
    body: dict[str, Any] = {"model": model}
    if system is not None:
        body["instructions"] = system
    out: list[Item] = []
    for t in items:
        _add(out, t, window.stream)
    body["input"] = out
    if window.tools:
        body["tools"] = [_tool(t.name, t.description, t.parameters) for t in window.tools]
    if max_tokens is not None:
        body["max_output_tokens"] = max_tokens
    return merge_extra(body, extra, PROVIDER)


def _tool(name: str, description: str, parameters: dict[str, Any]) -> Item:
    tool: Item = {"type": "function", "name": name}
    if description:
        tool["description"] = description
    tool["parameters"] = parameters
    tool["strict"] = False  # Responses defaults to strict schemas; arbitrary schemas break them
    return tool


def _add(out: list[Item], t: Turn, stream: str) -> None:
    match t:
        case UserTurn():
            out.append({"type": "message", "role": "user", "content": _content(t.blocks)})
        case InstructionTurn():
            content = [{"type": "input_text", "text": t.text}]
            out.append({"type": "message", "role": "developer", "content": content})
        case OutputTurn():
            _output(out, t, stream)
        case ResultsTurn():
            for a in t.answers:
                out.append(
                    {
                        "type": "function_call_output",
                        "call_id": fix_id(a.call.uid, MAX_ID_LENGTH, strict_chars=False),
                        "output": _result_output(error_text(a.result), a.result.attachments),
                    }
                )
        case _:
            assert_never(t)


def _content(blocks: tuple[str | Attachment, ...]) -> list[dict[str, Any]]:
    return [
        {"type": "input_text", "text": b} if isinstance(b, str) else _attachment(b) for b in blocks
    ]


def _attachment(a: Attachment) -> dict[str, Any]:
    """Images as `input_image`, PDFs as `input_file`, anything else as a note."""
    if is_image(a):
        return {"type": "input_image", "image_url": data_url(a), "detail": "auto"}
    if a.media_type == "application/pdf":
        if a.data is None:
            return {"type": "input_file", "file_url": data_url(a)}
        return {"type": "input_file", "file_data": data_url(a), "filename": a.name or "file.pdf"}
    return {"type": "input_text", "text": attachment_note(a, "OpenAI Responses")}


def _result_output(text: str, attachments: tuple[Attachment, ...]) -> str | list[dict[str, Any]]:
    if not attachments:
        return text
    head = [] if is_blank(text) else [{"type": "input_text", "text": text}]
    return head + [_attachment(a) for a in attachments]


def _output(out: list[Item], t: OutputTurn, stream: str) -> None:
    """Reasoning items (OpenAI's own), one assistant message, then the function calls."""
    content: list[dict[str, Any]] = []
    for part in t.output.parts:
        if isinstance(part, TextPart) and part.text:
            content.append({"type": "output_text", "text": part.text, "annotations": []})
        elif isinstance(part, RefusalPart) and part.text:
            content.append({"type": "refusal", "refusal": part.text})
    if not content and not t.calls:
        return  # reasoning alone must not be sent: the API wants the item it preceded
    if from_provider(t.output, PROVIDER):
        out += [_reasoning(p) for p in t.output.parts if _is_openai_reasoning(p)]
    if content:
        out.append(
            {
                "type": "message",
                "role": "assistant",
                "id": message_id(stream, t.seq),
                "status": "completed",
                "content": content,
            }
        )
    for c in t.calls:
        out.append(
            {
                "type": "function_call",
                "call_id": fix_id(c.uid, MAX_ID_LENGTH, strict_chars=False),
                "name": c.call.name,
                "arguments": raw_arguments(c.call),
            }
        )


def _is_openai_reasoning(part: object) -> bool:
    return isinstance(part, ReasoningPart) and part.item_id is not None


def _reasoning(part: object) -> Item:
    assert isinstance(part, ReasoningPart) and part.item_id is not None
    item: Item = {
        "type": "reasoning",
        "id": part.item_id,
        "summary": [{"type": "summary_text", "text": s} for s in part.summary],
    }
    if part.encrypted_content is not None:
        item["encrypted_content"] = part.encrypted_content
    return item


def message_id(stream: str, seq: int) -> str:
    """A stable `msg_` id for an assistant message (the input item type requires one)."""
    digest = hashlib.sha256(f"{stream}\x00{seq}".encode()).hexdigest()[:32]
    return f"msg_{digest}"


__all__ = ["MAX_ID_LENGTH", "PROVIDER", "message_id", "render"]
