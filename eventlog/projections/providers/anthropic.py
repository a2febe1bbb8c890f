"""Anthropic Messages request bodies from a Window (pure, deterministic; see docs/rendering.md).

Rules held by construction: the system instruction at top level; strict user/assistant
alternation (consecutive user-side turns merge into one message, in order); each assistant
`tool_use` answered in the very next user message, all results of one output in that message
and first in it; `is_error` on failed and skipped results; no empty or whitespace-only text
blocks; `input` always an object; thinking and redacted-thinking blocks of Anthropic outputs
byte-identical and first in their message; `max_tokens` always set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, assert_never

from eventlog.events import (
    Attachment,
    ReasoningPart,
    RefusalPart,
    TextPart,
    ToolResult,
)
from eventlog.projections.providers.render_common import (
    OPENING_TEXT,
    InstructionTurn,
    Orphans,
    OutputTurn,
    ResultsTurn,
    Turn,
    Unanswered,
    UserTurn,
    attachment_note,
    b64,
    fix_id,
    from_provider,
    is_blank,
    is_error,
    merge_extra,
    result_text,
    single_system,
    tool_input,
    turns,
)
from eventlog.projections.window_types import Window

PROVIDER = "anthropic"
DEFAULT_MAX_TOKENS = 4096
"""`max_tokens` when none is given (the API requires one)."""
MAX_ID_LENGTH = 64
"""Longest tool_use id kept as is; longer ones, or ids outside `[A-Za-z0-9_-]`, are rewritten."""
MAX_BREAKPOINTS = 4
"""The API's limit on `cache_control` breakpoints per request."""
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
UNAVAILABLE_TOOL = "(not available in this request)"
"""Description of a tool defined only because the history uses it (see `render`)."""

Block = dict[str, Any]
Message = dict[str, Any]


def render(
    window: Window,
    *,
    model: str,
    max_tokens: int | None = None,
    unanswered: Unanswered = "cancel",
    orphans: Orphans = "text",
    cache: bool = False,
    cache_every: int = 8,
    cache_ttl: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The `messages.create` body for a window.

    `cache=True` places prompt-cache breakpoints on the stable prefix: the last tool, the
    system text, then the last block of every `cache_every`-th message, newest boundaries
    first, at most 4 in all. `extra` adds other top-level fields (`temperature`, `thinking`).
    """
    system, items = single_system(window, turns(window, unanswered=unanswered, orphans=orphans))
    messages, used = _messages(items)
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens or DEFAULT_MAX_TOKENS}
    if system is not None and not is_blank(system):
        body["system"] = system
    if window.tools:
        body["tools"] = [_tool(t.name, t.description, t.parameters) for t in window.tools]
    elif used:
        # The API refuses tool blocks without tool definitions: define the tools the history
        # used, and forbid calling them.
        body["tools"] = [_tool(name, UNAVAILABLE_TOOL, {"type": "object"}) for name in used]
        body["tool_choice"] = {"type": "none"}
    body["messages"] = messages
    if cache:
        _breakpoints(body, cache_every, cache_ttl)
    return merge_extra(body, extra, PROVIDER)


def _tool(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": name}
    if description:
        tool["description"] = description
    tool["input_schema"] = schema
    return tool


# ---------------------------------------------------------------------------------------------
# Messages


class _Messages:
    """Messages under construction; same-role turns merge, thinking blocks stay first."""

    def __init__(self) -> None:
        self.list: list[Message] = []
        self.lead: list[int] = []
        """Number of leading thinking blocks of each message."""
        self.tools: dict[str, None] = {}

    def add(self, role: str, blocks: list[Block], thinking: list[Block] | None = None) -> None:
        if not blocks and not thinking:
            return
        if self.list and self.list[-1]["role"] == role:
            content = self.list[-1]["content"]
            if thinking:
                k = self.lead[-1]
                content[k:k] = thinking
                self.lead[-1] += len(thinking)
            content.extend(blocks)
            return
        self.list.append({"role": role, "content": (thinking or []) + blocks})
        self.lead.append(len(thinking or ()))


def _messages(items: list[Turn]) -> tuple[list[Message], list[str]]:
    """(messages, tool names used by tool blocks, in first-use order)."""
    m = _Messages()
    for t in items:
        match t:
            case UserTurn():
                m.add("user", _user_blocks(t.blocks))
            case OutputTurn():
                thinking, blocks = _output_blocks(t)
                for c in t.calls:
                    m.tools[c.call.name] = None
                m.add("assistant", blocks, thinking)
            case ResultsTurn():
                m.add(
                    "user",
                    [_result_block(fix_id(a.call.uid, MAX_ID_LENGTH), a.result) for a in t.answers],
                )
            case InstructionTurn():  # single_system turned these into user text already
                m.add("user", [_text(t.text)])
            case _:
                assert_never(t)
    messages = m.list
    if messages and messages[0]["role"] == "assistant":
        messages.insert(0, {"role": "user", "content": [_text(OPENING_TEXT)]})
    _trim_final_assistant(messages)
    return messages, list(m.tools)


def _text(text: str) -> Block:
    return {"type": "text", "text": text}


def _user_blocks(blocks: tuple[str | Attachment, ...]) -> list[Block]:
    return [_text(b) if isinstance(b, str) else _attachment(b) for b in blocks]


def _output_blocks(t: OutputTurn) -> tuple[list[Block], list[Block]]:
    """(thinking blocks, other blocks) of one output."""
    own = from_provider(t.output, PROVIDER)
    thinking: list[Block] = []
    blocks: list[Block] = []
    for part in t.output.parts:
        match part:
            case TextPart() | RefusalPart():
                if not is_blank(part.text):
                    blocks.append(_text(part.text))
            case ReasoningPart():
                if own:
                    block = _thinking(part)
                    if block is not None:
                        thinking.append(block)
            case _:
                assert_never(part)
    for c in t.calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": fix_id(c.uid, MAX_ID_LENGTH),
                "name": c.call.name,
                "input": tool_input(c.call),
            }
        )
    return thinking, blocks


def _thinking(part: ReasoningPart) -> Block | None:
    """The block Anthropic issued, byte-identical; reasoning without its artifact is dropped."""
    if part.redacted_data is not None:
        return {"type": "redacted_thinking", "data": part.redacted_data}
    if part.signature is not None:
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    return None


def _result_block(tool_use_id: str, result: ToolResult) -> Block:
    block: Block = {"type": "tool_result", "tool_use_id": tool_use_id}
    text = result_text(result)
    if result.attachments:
        content = [] if is_blank(text) else [_text(text)]
        content += [_attachment(a) for a in result.attachments]
        block["content"] = content
    elif not is_blank(text):
        block["content"] = text
    if is_error(result):
        block["is_error"] = True
    return block


def _attachment(a: Attachment) -> Block:
    """Images as image blocks, PDFs and plain text as documents, anything else as a note."""
    if a.media_type in IMAGE_TYPES:
        return {"type": "image", "source": _source(a)}
    if a.media_type == "application/pdf":
        return {"type": "document", "source": _source(a)}
    if a.media_type == "text/plain" and a.data is not None:
        text = a.data.decode("utf-8", errors="replace")
        source = {"type": "text", "media_type": "text/plain", "data": text}
        return {"type": "document", "source": source}
    return _text(attachment_note(a, PROVIDER))


def _source(a: Attachment) -> dict[str, str]:
    if a.uri is not None:
        return {"type": "url", "url": a.uri}
    return {"type": "base64", "media_type": a.media_type, "data": b64(a)}


def _trim_final_assistant(messages: list[Message]) -> None:
    """A final assistant message (a prefill) may not end with whitespace: the API refuses it."""
    if not messages or messages[-1]["role"] != "assistant":
        return
    content = messages[-1]["content"]
    last = content[-1]
    if last["type"] == "text" and last["text"] != last["text"].rstrip():
        content[-1] = _text(last["text"].rstrip())


# ---------------------------------------------------------------------------------------------
# Prompt caching


def _breakpoints(body: dict[str, Any], every: int, ttl: str | None) -> None:
    """Mark the stable prefix: tools, system, then fixed message-count boundaries.

    A boundary is a multiple of `every` messages, so a breakpoint stays on the same message
    from one turn to the next until the history grows past the next multiple; the newest
    boundaries are used, and the one before the newest keeps the previous turn's cache hit.
    """
    if every < 1:
        raise ValueError(f"cache_every must be >= 1, got {every}")
    mark: dict[str, str] = {"type": "ephemeral"}
    if ttl is not None:
        mark["ttl"] = ttl
    left = MAX_BREAKPOINTS
    if "tools" in body:
        body["tools"][-1] = {**body["tools"][-1], "cache_control": mark}
        left -= 1
    if "system" in body:
        body["system"] = [{"type": "text", "text": body["system"], "cache_control": mark}]
        left -= 1
    messages = body["messages"]
    for boundary in range(len(messages) // every * every, 0, -every):
        if left == 0:
            break
        if _mark_message(messages[boundary - 1], mark):
            left -= 1


def _mark_message(message: Message, mark: dict[str, str]) -> bool:
    content = message["content"]
    for i in range(len(content) - 1, -1, -1):
        if content[i]["type"] not in ("thinking", "redacted_thinking"):
            content[i] = {**content[i], "cache_control": mark}
            return True
    return False


__all__ = ["DEFAULT_MAX_TOKENS", "MAX_ID_LENGTH", "PROVIDER", "render"]
