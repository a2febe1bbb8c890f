"""Anthropic Messages request bodies from a Window (pure, deterministic; see docs/rendering.md).

Rules held by construction: the system instruction at top level; strict user/assistant
alternation (consecutive user-side turns merge into one message, in order); each assistant
`tool_use` answered in the very next user message, all results of one output in that message
and first in it; `is_error` on failed and skipped results; no empty or whitespace-only text
blocks; `input` always an object; thinking and redacted-thinking blocks of Anthropic outputs
byte-identical and first in their message, never last (a message of thinking alone is dropped);
failed results never without content; `max_tokens` always set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eventlog.errors import UsageError
from eventlog.events import Attachment, ModelOutput, ReasoningPart, ToolResult
from eventlog.projections.providers.render_common import (
    OPENING_TEXT,
    SKIPPED_TEXT,
    WEB_IMAGE_TYPES,
    Answer,
    Blocks,
    Orphans,
    SystemSlot,
    Unanswered,
    attachment_note,
    b64,
    check_request,
    current_system,
    from_provider,
    function_parameters,
    id_rewriter,
    inline,
    instruction_text,
    is_blank,
    is_error,
    is_fetchable,
    is_image,
    merge_extra,
    provider_file,
    result_text,
    tool_input,
)
from eventlog.projections.providers.tool_names import tool_namer
from eventlog.projections.window_types import Window

PROVIDER = "anthropic"
_tool_name = tool_namer("anthropic")
DEFAULT_MAX_TOKENS = 4096
"""`max_tokens` when none is given (the API requires one)."""
MAX_ID_LENGTH = 64
"""Longest tool_use id kept as is; longer ones, or ids outside `[A-Za-z0-9_-]`, are rewritten."""
MAX_BREAKPOINTS = 4
"""The API's limit on `cache_control` breakpoints per request."""
IMAGE_TYPES = WEB_IMAGE_TYPES
UNAVAILABLE_TOOL = "(not available in this request)"
"""Description of a tool defined only because the history uses it (see `render`)."""
NO_OUTPUT_TEXT = "The tool failed with no output."
"""Content of a failed result without text or attachments (the API refuses an empty error)."""
ATTACHED_TEXT = "The tool failed; its attachments follow the results."
"""Content of a failed result with attachments but no text (they go after the results)."""

Block = dict[str, Any]
Message = dict[str, Any]

_tool_use_id = id_rewriter(MAX_ID_LENGTH)


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
    check_request("anthropic", model, max_tokens, extra)
    _check_cache(cache, cache_every, cache_ttl)
    m = _Messages(unanswered, orphans, current_system(window))
    m.run(window.items)
    messages = m.messages
    if messages and messages[0]["role"] == "assistant":
        messages.insert(0, {"role": "user", "content": [_text(OPENING_TEXT)]})
    _trim_final_assistant(messages)
    _cap_media(messages)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens,
    }
    if m.system is not None and not is_blank(m.system):
        body["system"] = m.system
    if window.tools:
        body["tools"] = [_tool(t.name, t.description, function_parameters(t)) for t in window.tools]
    elif m.tools:
        # The API refuses tool blocks without tool definitions: define the tools the history
        # used, and forbid calling them.
        body["tools"] = [_tool(name, UNAVAILABLE_TOOL, {"type": "object"}) for name in m.tools]
        body["tool_choice"] = {"type": "none"}
    body["messages"] = messages
    if cache:
        _breakpoints(body, cache_every, cache_ttl)
    return merge_extra(body, extra, PROVIDER)


MAX_MEDIA = 100
"""Images and documents the API takes in one request ('too many images and documents')."""


def _cap_media(messages: list[Message]) -> None:
    """Keep the newest `MAX_MEDIA` image and document blocks; older ones become notes.

    A long computer-use loop fits hundreds of screenshots in a token budget, but the API
    refuses a request with more than 100 images and documents in all.
    """
    found: list[tuple[list[Block], int]] = []
    for message in messages:
        content = message["content"]
        if not isinstance(content, list):
            continue
        for i, block in enumerate(content):
            if block["type"] in ("image", "document"):
                found.append((content, i))
            elif block["type"] == "tool_result" and isinstance(block.get("content"), list):
                inner = block["content"]
                found += [
                    (inner, j) for j, b in enumerate(inner) if b["type"] in ("image", "document")
                ]
    for content, i in found[: max(0, len(found) - MAX_MEDIA)]:
        kind = content[i]["type"]
        content[i] = _text(
            f"[{kind} left out: a request takes at most {MAX_MEDIA} images and documents]"
        )


def _tool(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": _tool_name(name)}
    if description:
        tool["description"] = description
    tool["input_schema"] = schema
    return tool


# ---------------------------------------------------------------------------------------------
# Messages


class _Messages(SystemSlot):
    """Messages built in the pairing pass; same-role turns merge, thinking blocks stay first.

    An assistant message never ends with thinking (the API refuses it): thinking of an output
    with no other block waits in `pending` for the next output's blocks, and is dropped when a
    user turn comes first.

    The current instruction is the `system` slot (see `SystemSlot` for the ones before the
    first turn); every other one stays at its place as user text.
    """

    def __init__(self, unanswered: Unanswered, orphans: Orphans, system: str | None) -> None:
        super().__init__(unanswered, orphans, system)
        self.messages: list[Message] = []
        self.role = ""
        """Role of the last message."""
        self.content: list[Block] = []
        """Content of the last message."""
        self.lead = 0
        """Number of leading thinking blocks of the last message."""
        self.pending: list[Block] = []
        """Thinking of outputs with no other block, since the last message (see class doc)."""
        self.tools: dict[str, None] = {}
        """Names of the tools the history called, in first-use order."""

    def user(self, blocks: Blocks) -> None:
        self.start_turn()
        if len(blocks) == 1 and isinstance(blocks[0], str):
            self._user([{"type": "text", "text": blocks[0]}])
        else:
            self._user([_text(b) if isinstance(b, str) else _attachment(b) for b in blocks])

    def show_instruction(self, text: str) -> None:
        self._user([_text(instruction_text(text))])

    def output(self, output: ModelOutput, seq: int, answers: Sequence[Answer]) -> None:
        self.start_turn()
        own = from_provider(output, PROVIDER)
        thinking: list[Block] = []
        blocks: list[Block] = []
        for part in output.parts:
            if isinstance(part, ReasoningPart):
                if own:
                    block = _thinking(part)
                    if block is not None:
                        thinking.append(block)
            elif part.text and not part.text.isspace():
                blocks.append({"type": "text", "text": part.text})
        if not answers:
            self._assistant(blocks, thinking)
            return
        results: list[Block] = []
        attached: list[Block] = []  # an error's attachments: after every result
        tools = self.tools
        for call, uid, result in answers:
            tool_use_id = _tool_use_id(uid)
            blocks.append(
                {
                    "type": "tool_use",
                    "id": tool_use_id,
                    "name": _tool_name(call.name),
                    "input": tool_input(call),
                }
            )
            tools[call.name] = None
            results.append(_result_block(tool_use_id, result))
            if is_error(result) and result.attachments:
                attached.append(_text(f"[attachments of the failed {_tool_name(call.name)} call]"))
                attached += [_attachment(a) for a in result.attachments]
        self._assistant(blocks, thinking)
        self._user(results + attached)  # a new message: the assistant one has the tool_use blocks

    def _user(self, blocks: list[Block]) -> None:
        self.pending = []  # thinking with nothing after it before a user turn: dropped
        if self.role == "user":
            self.content.extend(blocks)
        else:
            self.messages.append({"role": "user", "content": blocks})
            self.role, self.content, self.lead = "user", blocks, 0

    def _assistant(self, blocks: list[Block], thinking: list[Block]) -> None:
        if self.role == "assistant":
            if thinking:
                k = self.lead
                self.content[k:k] = thinking
                self.lead += len(thinking)
            self.content.extend(blocks)
        elif not blocks:
            self.pending += thinking  # alone it would end its message: wait for blocks
        else:
            thinking = self.pending + thinking if self.pending else thinking
            self.pending = []
            content = thinking + blocks if thinking else blocks
            self.messages.append({"role": "assistant", "content": content})
            self.role, self.content, self.lead = "assistant", content, len(thinking)


def _text(text: str) -> Block:
    return {"type": "text", "text": text}


def _thinking(part: ReasoningPart) -> Block | None:
    """The block Anthropic issued, byte-identical; reasoning without its artifact is dropped."""
    if part.redacted_data is not None:
        return {"type": "redacted_thinking", "data": part.redacted_data}
    if part.signature is not None:
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    return None


def _result_block(tool_use_id: str, result: ToolResult) -> Block:
    """`is_error` on failed and skipped results; no content rather than a blank one.

    An error's content is text only (the API refuses anything else with `is_error`): its
    attachments follow the results (see `output`). An error with no text says it failed with
    no output: the API refuses an empty error result.
    """
    block: Block = {"type": "tool_result", "tool_use_id": tool_use_id}
    text = result_text(result)
    error = is_error(result)
    if error and is_blank(text):
        if result.status == "skipped":
            text = SKIPPED_TEXT
        else:
            text = ATTACHED_TEXT if result.attachments else NO_OUTPUT_TEXT
    if result.attachments and not error:
        content = [] if is_blank(text) else [_text(text)]
        content += [_attachment(a) for a in result.attachments]
        block["content"] = content
    elif not is_blank(text):
        block["content"] = text
    if is_error(result):
        block["is_error"] = True
    return block


def _attachment(a: Attachment) -> Block:
    """Images as image blocks, PDFs and text as documents, Anthropic file ids by `file_id`.

    Anything else (another provider's file, a URI Anthropic cannot fetch, an image format it
    does not read) becomes a note.
    """
    file_id = provider_file(a, PROVIDER)
    if file_id is not None:
        kind = "image" if is_image(a) else "document"
        return {"type": kind, "source": {"type": "file", "file_id": file_id}}
    bytes_or_url = inline(a)
    if bytes_or_url is None or not is_fetchable(a):
        return _text(attachment_note(a, PROVIDER))
    a = bytes_or_url
    if a.media_type in IMAGE_TYPES or (a.uri is not None and is_image(a)):  # a URL: any image/*
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


CACHE_TTLS = ("5m", "1h")
"""The lifetimes a cache breakpoint may ask for (`cache_control.ttl`)."""


def _check_cache(cache: object, every: object, ttl: object) -> None:
    """Reject bad prompt-cache options (UsageError) before rendering."""
    if type(cache) is not bool:
        raise UsageError(f"anthropic renderer: cache must be True or False, got {cache!r}")
    if type(every) is not int or every < 1:
        raise UsageError(f"anthropic renderer: cache_every must be an integer >= 1, got {every!r}")
    if ttl is not None and ttl not in CACHE_TTLS:
        raise UsageError(
            f"anthropic renderer: cache_ttl must be one of {', '.join(CACHE_TTLS)} or None, "
            f"got {ttl!r}"
        )


def _breakpoints(body: dict[str, Any], every: int, ttl: str | None) -> None:
    """Mark the stable prefix: tools, system, then fixed message-count boundaries.

    A boundary is a multiple of `every` messages, so a breakpoint stays on the same message
    from one turn to the next until the history grows past the next multiple; the newest
    boundaries are used, and the one before the newest keeps the previous turn's cache hit.
    """
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


__all__ = ["DEFAULT_MAX_TOKENS", "MAX_ID_LENGTH", "NO_OUTPUT_TEXT", "PROVIDER", "render"]
