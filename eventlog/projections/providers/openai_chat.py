"""OpenAI Chat Completions request bodies from a Window (pure, deterministic; docs/rendering.md).

Rules held by construction: the system (or developer) message first, and one more where the
instruction changed midway; one assistant message with all of an output's `tool_calls`
(arguments as the raw JSON text), then one `tool` message per call and nothing in between;
assistant `content` is text or null; images as `image_url` parts with data URLs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, assert_never

from eventlog.events import Attachment, RefusalPart, TextPart
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
    is_image,
    merge_extra,
    raw_arguments,
    turns,
)
from eventlog.projections.window_types import Window

PROVIDER = "openai"
MAX_ID_LENGTH = 40
"""Longest tool call id the API accepts; longer ids are rewritten (any characters are kept)."""

Message = dict[str, Any]
SystemRole = Literal["system", "developer"]


def render(
    window: Window,
    *,
    model: str,
    max_tokens: int | None = None,
    unanswered: Unanswered = "cancel",
    orphans: Orphans = "text",
    system_role: SystemRole = "system",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The `chat.completions.create` body for a window.

    `system_role="developer"` sends instructions as developer messages (o-series models).
    `max_tokens` becomes `max_completion_tokens`; `extra` adds other top-level fields.
    """
    if system_role not in ("system", "developer"):
        raise ValueError(f"system_role must be 'system' or 'developer', got {system_role!r}")
    items = turns(window, unanswered=unanswered, orphans=orphans)
    messages: list[Message] = []
    for t in items:
        _add(messages, t, system_role)
    system = window.system
    if system is not None and not any(
        m["role"] == system_role and m["content"] == system for m in messages
    ):
        messages.insert(0, {"role": system_role, "content": system})
    body: dict[str, Any] = {"model": model, "messages": messages}
    if window.tools:
        body["tools"] = [_tool(t.name, t.description, t.parameters) for t in window.tools]
    if max_tokens is not None:
        body["max_completion_tokens"] = max_tokens
    return merge_extra(body, extra, PROVIDER)


def _tool(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name}
    if description:
        function["description"] = description
    function["parameters"] = parameters
    return {"type": "function", "function": function}


def _add(messages: list[Message], t: Turn, system_role: SystemRole) -> None:
    match t:
        case UserTurn():
            messages.append({"role": "user", "content": _user_content(t.blocks)})
        case InstructionTurn():
            messages.append({"role": system_role, "content": t.text})
        case OutputTurn():
            message = _assistant(t)
            if message is not None:
                messages.append(message)
        case ResultsTurn():
            _results(messages, t)
        case _:
            assert_never(t)


def _user_content(blocks: tuple[str | Attachment, ...]) -> str | list[dict[str, Any]]:
    if len(blocks) == 1 and isinstance(blocks[0], str):
        return blocks[0]
    return [{"type": "text", "text": b} if isinstance(b, str) else _attachment(b) for b in blocks]


def _attachment(a: Attachment) -> dict[str, Any]:
    """Images as `image_url` parts, inline PDFs as `file` parts, anything else as a note."""
    if is_image(a):
        return {"type": "image_url", "image_url": {"url": data_url(a)}}
    if a.media_type == "application/pdf" and a.data is not None:
        return {
            "type": "file",
            "file": {"file_data": data_url(a), "filename": a.name or "file.pdf"},
        }
    return {"type": "text", "text": attachment_note(a, "OpenAI Chat")}


def _assistant(t: OutputTurn) -> Message | None:
    """One assistant message: text (or null), refusal, all tool calls; None when empty.

    Reasoning is never sent: the Chat API takes no reasoning input.
    """
    texts: list[str] = []
    refusals: list[str] = []
    for part in t.output.parts:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, RefusalPart) and part.text:
            refusals.append(part.text)
    text = "".join(texts)
    if not text and not refusals and not t.calls:
        return None
    message: Message = {"role": "assistant", "content": text or None}
    if refusals:
        message["refusal"] = "".join(refusals)
    if t.calls:
        message["tool_calls"] = [
            {
                "id": fix_id(c.uid, MAX_ID_LENGTH, strict_chars=False),
                "type": "function",
                "function": {"name": c.call.name, "arguments": raw_arguments(c.call)},
            }
            for c in t.calls
        ]
    return message


def _results(messages: list[Message], t: ResultsTurn) -> None:
    """One `tool` message per call; attachments follow in one user message.

    Tool messages take text only, so images of results go to the user message after them.
    """
    attached: list[dict[str, Any]] = []
    for a in t.answers:
        call_id = fix_id(a.call.uid, MAX_ID_LENGTH, strict_chars=False)
        messages.append({"role": "tool", "tool_call_id": call_id, "content": error_text(a.result)})
        if a.result.attachments:
            label = f"Attachments of tool call {call_id} ({a.call.call.name}):"
            attached.append({"type": "text", "text": label})
            attached += [_attachment(x) for x in a.result.attachments]
    if attached:
        messages.append({"role": "user", "content": attached})


__all__ = ["MAX_ID_LENGTH", "PROVIDER", "render"]
