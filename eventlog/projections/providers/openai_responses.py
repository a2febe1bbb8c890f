"""OpenAI Responses request bodies from a Window (pure, deterministic; see docs/rendering.md).

Rules held by construction: the current instruction as `instructions`, earlier or midway ones
as developer messages where they took effect; user text as `input_text`; assistant text as
`output_text` in an assistant `message`; `function_call` and `function_call_output` items
paired by `call_id`, outputs right after their calls; reasoning items (id, summary, encrypted
content) only for outputs OpenAI produced, each directly followed by a message or call item.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from eventlog.events import (
    Attachment,
    ModelOutput,
    Part,
    ReasoningPart,
    RefusalPart,
    TextPart,
    ToolCall,
    ToolResult,
    ToolSpec,
)
from eventlog.projections.providers.render_common import (
    WEB_IMAGE_TYPES,
    Answer,
    Blocks,
    Orphans,
    SystemSlot,
    Unanswered,
    attachment_note,
    check_request,
    custom_input,
    custom_tool_names,
    data_url,
    error_text,
    from_provider,
    id_rewriter,
    inline,
    is_blank,
    is_fetchable,
    is_image,
    merge_extra,
    opening_system,
    provider_file,
    raw_arguments,
)
from eventlog.projections.providers.tool_names import tool_namer
from eventlog.projections.window_types import Window

PROVIDER = "openai"
_tool_name = tool_namer("openai-responses")
MAX_ID_LENGTH = 64
"""Longest call id kept as is; longer ones are rewritten (any characters are kept)."""

Item = dict[str, Any]

_call_id = id_rewriter(MAX_ID_LENGTH, strict_chars=False)


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
    check_request("openai-responses", model, max_tokens, extra)
    items = _Items(
        unanswered,
        orphans,
        opening_system(window),
        window.stream,
        custom_tool_names(window.tools),
    )
    items.run(window.items)
    body: dict[str, Any] = {"model": model}
    if items.system is not None:
        body["instructions"] = items.system
    body["input"] = items.out
    if window.tools:
        body["tools"] = [_tool(t) for t in window.tools]
    if max_tokens is not None:
        body["max_output_tokens"] = max_tokens
    return merge_extra(body, extra, PROVIDER)


def _tool(spec: ToolSpec) -> Item:
    """A function tool, or a custom one (`format`) taking free text."""
    tool: Item = {
        "type": "function" if spec.format is None else "custom",
        "name": _tool_name(spec.name),
    }
    if spec.description:
        tool["description"] = spec.description
    if spec.format is not None:
        tool["format"] = spec.format
        return tool
    tool["parameters"] = spec.parameters
    tool["strict"] = False  # Responses defaults to strict schemas; arbitrary schemas break them
    return tool


class _Items(SystemSlot):
    """Input items built in the pairing pass.

    The instruction in force when the window opens is `instructions` (a prefix that stays
    put as the history grows); every change after it is a developer message at its place.
    """

    def __init__(
        self,
        unanswered: Unanswered,
        orphans: Orphans,
        system: str | None,
        stream: str,
        custom_tools: frozenset[str],
    ) -> None:
        super().__init__(unanswered, orphans, system)
        self.stream = stream
        self.custom_tools = custom_tools
        self.out: list[Item] = []

    def user(self, blocks: Blocks) -> None:
        self.start_turn()
        if len(blocks) == 1 and isinstance(blocks[0], str):
            content = [{"type": "input_text", "text": blocks[0]}]
        else:
            content = _content(blocks)
        self.out.append({"type": "message", "role": "user", "content": content})

    def show_instruction(self, text: str) -> None:
        content = [{"type": "input_text", "text": text}]
        self.out.append({"type": "message", "role": "developer", "content": content})

    def output(self, output: ModelOutput, seq: int, answers: Sequence[Answer]) -> None:
        """The output's items in the order of its parts, then its calls and their outputs.

        Reasoning items (OpenAI's own) stay where they came, each right before the item it
        preceded (the API refuses one followed by anything else): runs of text between them
        become assistant messages, and the reasoning after the last message goes before the
        calls (see `_OutputItems`). Reasoning with nothing after it is not sent.
        """
        self.start_turn()
        own = from_provider(output, PROVIDER)
        run = _OutputItems(self.stream, seq)
        if own and answers and all(call.after is not None for call, _, _ in answers):
            self._in_order(output, answers, run)
            return
        for part in output.parts:
            self._part(part, own, run)
        run.close()
        if not run.messages and not answers:
            return
        self.out += run.items
        if not answers:
            return  # reasoning after the last message preceded nothing that is sent
        # Reasoning after the last message preceded the calls. Reasoning that could only have
        # preceded a call among the parts (`spare`) stands in only when there is none.
        lead = (run.pending or run.spare)[-len(answers) :]
        outputs: list[Item] = []
        for k, (call, uid, result) in enumerate(answers):
            if k < len(lead):
                self.out.append(lead[k])
            call_id = _call_id(uid)
            custom = custom_input(call, self.custom_tools)
            self.out.append(_call_item(call, call_id, own, custom))
            outputs.append(_output_item(call_id, custom, result))
        self.out += outputs

    def _part(self, part: Part, own: bool, run: _OutputItems) -> None:
        """One part of an output into the items being built."""
        if isinstance(part, TextPart) and part.text:
            run.text(part, own)
        elif isinstance(part, RefusalPart) and part.text:
            run.add({"type": "refusal", "refusal": part.text})
        elif own and _is_openai_reasoning(part):
            run.reasoning(_reasoning(part))

    def _in_order(self, output: ModelOutput, answers: Sequence[Answer], run: _OutputItems) -> None:
        """Parts and calls of OpenAI's own output in the order OpenAI sent them.

        Its calls say where they stood (`ToolCall.after`, kept within the parts), so each
        reasoning item goes right before the item it preceded; reasoning that preceded a call
        the window left out is not sent. When a message follows a call, each run of calls
        gets its outputs before anything else (see `_OutputItems.call`).
        """
        n = len(output.parts)
        kept = {answer[0].id: answer for answer in answers}
        at: dict[int, list[tuple[ToolCall, Answer | None]]] = {}
        for call in output.tool_calls:
            place = n if call.after is None else max(0, min(call.after, n))
            at.setdefault(place, []).append((call, kept.get(call.id)))
        first = min(at, default=n)
        strict = any(_is_message_part(part) for part in output.parts[first:])
        for i in range(n + 1):
            for call, answer in at.get(i, ()):
                if answer is None:
                    run.drop()
                    continue
                _, uid, result = answer
                call_id = _call_id(uid)
                custom = custom_input(call, self.custom_tools)
                item = _call_item(call, call_id, True, custom)
                run.call(item, _output_item(call_id, custom, result), strict)
            if i < n:
                self._part(output.parts[i], True, run)
        run.close()
        run.flush()
        self.out += run.items


def _is_message_part(part: Part) -> bool:
    """Whether a part goes back in an assistant message (text or a refusal)."""
    return isinstance(part, (TextPart, RefusalPart)) and bool(part.text)


class _OutputItems:
    """An output's message and reasoning items, in the order of its parts.

    Text of OpenAI's own outputs keeps the message it came in (its id and phase); a message
    without one gets a derived id (`message_id`).

    Of reasoning items in a row before a message, only the last goes before it: the ones before
    it preceded a function call (kept apart from the parts, so its place among them is not
    known) or an item ingest does not keep (a built-in tool call); they wait in `spare`.
    Reasoning after the last message waits in `pending`. The renderer puts `pending` before the
    calls, one item per call, in order; only an output with no reasoning after its last message
    gives its calls the `spare` ones instead (the rest of `spare` is not sent).
    """

    def __init__(self, stream: str, seq: int) -> None:
        self.stream, self.seq = stream, seq
        self.items: list[Item] = []
        self.pending: list[Item] = []
        """Reasoning items since the last message, in order."""
        self.spare: list[Item] = []
        """Reasoning items that preceded others before a message (see the class doc)."""
        self.waiting: list[Item] = []
        """Outputs of the run of calls just placed (`call`), put after it."""
        self.messages = 0
        self.content: list[dict[str, Any]] = []
        self.source: tuple[str | None, str | None] = (None, None)
        """(item id, phase) of the message being built."""

    def text(self, part: TextPart, own: bool) -> None:
        source = (part.item_id, part.phase) if own else (None, None)
        if self.content and source[0] is not None and source != self.source:
            self.close()  # the provider sent it in another message
        if not self.content:
            self.source = source
        self.add({"type": "output_text", "text": part.text, "annotations": []})

    def add(self, block: dict[str, Any]) -> None:
        self.content.append(block)

    def call(self, item: Item, output: Item, strict: bool) -> None:
        """A call's item where it stood, after the message before it.

        The reasoning that preceded it goes first (the last of a run: the others preceded
        items ingest does not keep). The outputs come after the output's last call, as an
        agent loop sends them; with `strict` (a message follows a call) each run of calls
        gets its outputs before anything else, reasoning included, since servers that pair
        calls and outputs strictly want nothing but calls between them.
        """
        self.close()
        if self.pending:
            if strict:
                self._put(self.pending[-1])
            else:
                self.items.append(self.pending[-1])
            self.pending = []
        self.items.append(item)
        self.waiting.append(output)

    def drop(self) -> None:
        """Where a call the window left out stood: the reasoning that preceded it goes too."""
        self.close()
        self.pending = []

    def flush(self) -> None:
        """The outputs of the last run of calls."""
        self.items += self.waiting
        self.waiting = []

    def _put(self, item: Item) -> None:
        """An item that is not a call: the run of calls before it (if any) gets its outputs."""
        if self.waiting:
            self.flush()
        self.items.append(item)

    def reasoning(self, item: Item) -> None:
        """A reasoning item: it ends the message being built and waits for the next one."""
        self.close()
        self.pending.append(item)

    def close(self) -> None:
        """End the message being built (if any), after the last reasoning item before it."""
        if self.content:
            if self.pending:
                self.spare += self.pending[:-1]
                self._put(self.pending[-1])
                self.pending = []
            item_id, phase = self.source
            item = _message(
                item_id or message_id(self.stream, self.seq, self.messages), self.content
            )
            if phase is not None:
                item["phase"] = phase
            self._put(item)
            self.messages += 1
            self.content = []
        self.source = (None, None)


def _output_item(call_id: str, custom: str | None, result: ToolResult) -> Item:
    """A call's result as a `function_call_output` (or `custom_tool_call_output`) item."""
    text = error_text(result)
    value = _result_output(text, result.attachments) if result.attachments else text
    kind = "function_call_output" if custom is None else "custom_tool_call_output"
    return {"type": kind, "call_id": call_id, "output": value}


def _call_item(call: ToolCall, call_id: str, own: bool, custom: str | None) -> Item:
    """A call's item, with the item id OpenAI gave it (pairing it with the reasoning before it).

    A custom tool's call (`custom`: its text) is a `custom_tool_call` with that `input`.
    """
    item: Item = {"type": "function_call" if custom is None else "custom_tool_call"}
    if own and call.item_id is not None and call.custom == (custom is not None):
        item["id"] = call.item_id  # (an fc_ id never goes on a custom call, nor the reverse)
    if custom is None:
        item.update(call_id=call_id, name=_tool_name(call.name), arguments=raw_arguments(call))
    else:
        item.update(call_id=call_id, name=_tool_name(call.name), input=custom)
    return item


def _content(blocks: tuple[str | Attachment, ...]) -> list[dict[str, Any]]:
    return [
        {"type": "input_text", "text": b} if isinstance(b, str) else _attachment(b) for b in blocks
    ]


def _attachment(a: Attachment) -> dict[str, Any]:
    """Images as `input_image`, PDFs as `input_file`, OpenAI file ids as either by `file_id`.

    Anything else (another provider's file, a URI OpenAI cannot fetch, inline bytes of an image
    format it does not read) becomes a note.
    """
    file_id = provider_file(a, PROVIDER)
    if file_id is not None:
        if is_image(a):
            return {"type": "input_image", "file_id": file_id, "detail": "auto"}
        return {"type": "input_file", "file_id": file_id}
    bytes_or_url = inline(a)
    if bytes_or_url is None or not is_fetchable(a):
        return {"type": "input_text", "text": attachment_note(a, "OpenAI Responses")}
    a = bytes_or_url
    if is_image(a) and a.data is not None and a.media_type not in WEB_IMAGE_TYPES:
        return {"type": "input_text", "text": attachment_note(a, "OpenAI Responses")}
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


def message_id(stream: str, seq: int, index: int = 0) -> str:
    """A stable `msg_` id for an assistant message (the input item type requires one).

    `index` numbers the messages of one output (reasoning between them splits its text).
    """
    key = f"{stream}\x00{seq}" if index == 0 else f"{stream}\x00{seq}\x00{index}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    return f"msg_{digest}"


def _message(item_id: str, content: list[dict[str, Any]]) -> Item:
    return {
        "type": "message",
        "role": "assistant",
        "id": item_id,
        "status": "completed",
        "content": content,
    }


__all__ = ["MAX_ID_LENGTH", "PROVIDER", "message_id", "render"]
