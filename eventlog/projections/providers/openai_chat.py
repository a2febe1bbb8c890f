"""OpenAI Chat Completions request bodies from a Window (pure, deterministic; docs/rendering.md).

Rules held by construction: the system (or developer) message first, and one more where the
instruction changed midway; one assistant message with all of an output's `tool_calls`
(arguments as the raw JSON text), then one `tool` message per call and nothing in between;
assistant `content` is text or null; images as `image_url` parts with data URLs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from eventlog.errors import UsageError
from eventlog.events import Attachment, ModelOutput, RefusalPart, TextPart, ToolSpec
from eventlog.projections.providers.render_common import (
    WEB_IMAGE_TYPES,
    Answer,
    Blocks,
    Orphans,
    Pairing,
    Unanswered,
    attachment_note,
    check_request,
    custom_input,
    custom_tool_names,
    data_url,
    error_text,
    id_rewriter,
    inline,
    is_fetchable,
    is_image,
    merge_extra,
    provider_file,
    raw_arguments,
)
from eventlog.projections.providers.tool_names import tool_namer
from eventlog.projections.window_types import Window

PROVIDER = "openai"
_tool_name = tool_namer("openai-chat")
MAX_ID_LENGTH = 40
"""Longest tool call id the API accepts; longer ids are rewritten (any characters are kept)."""

Message = dict[str, Any]
SystemRole = Literal["system", "developer"]
MAX_TOOL_CALLS = 128
"""`tool_calls` one assistant message may hold ('array too long ... maximum length 128')."""

_call_id = id_rewriter(MAX_ID_LENGTH, strict_chars=False)


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
    check_request("openai-chat", model, max_tokens, extra)
    if system_role not in ("system", "developer"):
        raise UsageError(
            f"openai-chat renderer: system_role must be 'system' or 'developer', "
            f"got {system_role!r}"
        )
    m = _Messages(unanswered, orphans, system_role, window.system, custom_tool_names(window.tools))
    m.run(window.items)
    messages = m.messages
    if window.system is not None and not m.has_system:
        messages.insert(0, {"role": system_role, "content": window.system})
    body: dict[str, Any] = {"model": model, "messages": messages}
    if window.tools:
        body["tools"] = [_tool(t) for t in window.tools]
    if max_tokens is not None:
        body["max_completion_tokens"] = max_tokens
    return merge_extra(body, extra, PROVIDER)


def _tool(spec: ToolSpec) -> dict[str, Any]:
    """A function tool, or a custom one (`format`) taking free text."""
    definition: dict[str, Any] = {"name": _tool_name(spec.name)}
    if spec.description:
        definition["description"] = spec.description
    if spec.format is not None:
        definition["format"] = _chat_format(spec.format)
        return {"type": "custom", "custom": definition}
    definition["parameters"] = spec.parameters
    return {"type": "function", "function": definition}


def _chat_format(fmt: dict[str, Any]) -> dict[str, Any]:
    """A custom tool's format as Chat Completions takes it: a grammar nested under `grammar`."""
    if fmt.get("type") != "grammar" or "grammar" in fmt:
        return fmt
    grammar = {k: v for k, v in fmt.items() if k != "type"}
    return {"type": "grammar", "grammar": grammar}


class _Messages(Pairing):
    """Messages built in the pairing pass; consecutive inputs stay separate user messages."""

    def __init__(
        self,
        unanswered: Unanswered,
        orphans: Orphans,
        system_role: SystemRole,
        system: str | None,
        custom_tools: frozenset[str],
    ) -> None:
        super().__init__(unanswered, orphans)
        self.custom_tools = custom_tools
        self.messages: list[Message] = []
        self.system_role = system_role
        self.system = system
        self.instructions: list[int] = []
        """Indexes of the instruction messages in `messages`."""

    @property
    def has_system(self) -> bool:
        """Whether an instruction message already carries the current instruction."""
        return any(self.messages[i]["content"] == self.system for i in self.instructions)

    def user(self, blocks: Blocks) -> None:
        if len(blocks) == 1 and isinstance(blocks[0], str):
            self.messages.append({"role": "user", "content": blocks[0]})
        else:
            content = [
                {"type": "text", "text": b} if isinstance(b, str) else _attachment(b)
                for b in blocks
            ]
            self.messages.append({"role": "user", "content": content})

    def instruction(self, text: str) -> None:
        """An instruction message; one right after another supersedes it (it never acted)."""
        message = {"role": self.system_role, "content": text}
        if self.instructions and self.instructions[-1] == len(self.messages) - 1:
            self.messages[-1] = message
        else:
            self.instructions.append(len(self.messages))
            self.messages.append(message)

    def output(self, output: ModelOutput, seq: int, answers: Sequence[Answer]) -> None:
        """One assistant message: text (or null), refusal, all tool calls; nothing when empty.

        Then one `tool` message per call; images of results follow in one user message (tool
        messages take text only). More than `MAX_TOOL_CALLS` calls go on in further assistant
        messages, each followed by its tool messages. Reasoning is never sent: the Chat API
        takes none.
        """
        texts: list[str] = []
        refusals: list[str] = []
        for part in output.parts:
            if isinstance(part, TextPart):
                texts.append(part.text)
            elif isinstance(part, RefusalPart) and part.text:
                refusals.append(part.text)
        text = "".join(texts)
        if not text and not refusals and not answers:
            return
        message: Message = {"role": "assistant", "content": text or None}
        if refusals:
            message["refusal"] = "".join(refusals)
        self.messages.append(message)
        if not answers:
            return
        calls: list[dict[str, Any]] = []
        message["tool_calls"] = calls
        attached: list[dict[str, Any]] = []
        for k, (call, uid, result) in enumerate(answers):
            if k and k % MAX_TOOL_CALLS == 0:  # the API takes 128 calls a message: go on in another
                calls = []
                self.messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            call_id = _call_id(uid)
            free_text = custom_input(call, self.custom_tools)
            if free_text is not None:
                custom = {"name": _tool_name(call.name), "input": free_text}
                calls.append({"id": call_id, "type": "custom", "custom": custom})
            else:
                function = {"name": _tool_name(call.name), "arguments": raw_arguments(call)}
                calls.append({"id": call_id, "type": "function", "function": function})
            self.messages.append(
                {"role": "tool", "tool_call_id": call_id, "content": error_text(result)}
            )
            if result.attachments:
                label = f"Attachments of tool call {call_id} ({_tool_name(call.name)}):"
                attached.append({"type": "text", "text": label})
                attached += [_attachment(x) for x in result.attachments]
        if attached:
            self.messages.append({"role": "user", "content": attached})


def _attachment(a: Attachment) -> dict[str, Any]:
    """Images as `image_url` parts, inline PDFs and OpenAI file ids as `file` parts.

    Anything else (an image by file id, another provider's file, a URI OpenAI cannot fetch,
    inline bytes of an image format it does not read) becomes a note.
    """
    file_id = provider_file(a, PROVIDER)
    if file_id is not None and not is_image(a):  # Chat takes images by URL only
        return {"type": "file", "file": {"file_id": file_id}}
    bytes_or_url = inline(a)
    if file_id is not None or bytes_or_url is None or not is_fetchable(a):
        return {"type": "text", "text": attachment_note(a, "OpenAI Chat")}
    a = bytes_or_url
    if is_image(a) and a.data is not None and a.media_type not in WEB_IMAGE_TYPES:
        return {"type": "text", "text": attachment_note(a, "OpenAI Chat")}
    if is_image(a):
        return {"type": "image_url", "image_url": {"url": data_url(a)}}
    if a.media_type == "application/pdf" and a.data is not None:
        return {
            "type": "file",
            "file": {"file_data": data_url(a), "filename": a.name or "file.pdf"},
        }
    return {"type": "text", "text": attachment_note(a, "OpenAI Chat")}


__all__ = ["MAX_ID_LENGTH", "PROVIDER", "render"]
