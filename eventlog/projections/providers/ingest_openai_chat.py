"""OpenAI Chat Completions responses and streamed chunks -> one ModelOutput."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from eventlog.events import (
    Invocation,
    ModelOutput,
    Part,
    ReasoningPart,
    RefusalPart,
    TextPart,
    ToolCall,
    Usage,
)
from eventlog.projections.providers.common import (
    Accumulator,
    as_dict,
    get,
    mapping_error,
    non_negative,
)

PROVIDER = "openai"
SPECIFICATION = "chat.completions"

STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "content_filter",
}
"""OpenAI `finish_reason` -> neutral stop reason."""

_REASONING_KEYS = ("reasoning_content", "reasoning")
"""Non-standard reasoning text fields sent by OpenAI-compatible servers (DeepSeek, vLLM...)."""


class _Call(msgspec.Struct):
    """A tool call being assembled from deltas."""

    id: str = ""
    name: str = ""
    arguments: list[str] = msgspec.field(default_factory=list)


def usage_from(raw: Any, where: str) -> Usage | None:
    """Usage from a Chat Completions `usage` object (cached and reasoning tokens included)."""
    if raw is None:
        return None
    u = as_dict(raw, where)
    prompt = get(u, "prompt_tokens_details", dict, where, {})
    completion = get(u, "completion_tokens_details", dict, where, {})
    return Usage(
        prompt_tokens=non_negative(u.get("prompt_tokens")),
        completion_tokens=non_negative(u.get("completion_tokens")),
        cached_prompt_tokens=non_negative(prompt.get("cached_tokens")),
        cache_write_tokens=non_negative(prompt.get("cache_write_tokens")),
        reasoning_tokens=non_negative(completion.get("reasoning_tokens")),
    )


def _reasoning_text(d: dict[str, Any]) -> str | None:
    for key in _REASONING_KEYS:
        value = d.get(key)
        if isinstance(value, str):
            return value
    return None


def _output(
    *,
    model: str,
    reasoning: str,
    text: str,
    refusal: str,
    calls: list[ToolCall],
    finish: str | None,
    usage: Usage | None,
) -> ModelOutput:
    parts: list[Part] = []
    if reasoning:
        parts.append(ReasoningPart(text=reasoning))
    if text:
        parts.append(TextPart(text=text))
    if refusal:
        parts.append(RefusalPart(text=refusal))
    return ModelOutput(
        parts=tuple(parts),
        tool_calls=tuple(calls),
        invocation=Invocation(provider=PROVIDER, specification=SPECIFICATION, model=model),
        usage=usage,
        stop_reason=_stop_reason(finish, refusal),
        provider_stop_reason=finish,
    )


def _stop_reason(finish: str | None, refusal: str) -> str | None:
    """The neutral stop reason; a refusal ends with `stop`, the neutral value is `refusal`."""
    if not finish:
        return None
    if finish == "stop" and refusal:
        return "refusal"
    return STOP_REASONS.get(finish, "other")


def _message_call(raw: Any, where: str) -> ToolCall:
    call = as_dict(raw, where)
    call_id = get(call, "id", str, where)
    if call.get("type") == "custom":
        custom = get(call, "custom", dict, where)
        return ToolCall.parse(
            call_id,
            get(custom, "name", str, f"{where}.custom"),
            get(custom, "input", str, f"{where}.custom"),
            custom=True,
        )
    function = get(call, "function", dict, where)
    return ToolCall.parse(
        call_id,
        get(function, "name", str, f"{where}.function"),
        get(function, "arguments", str, f"{where}.function", ""),
    )


def ingest_response(body: Any, *, choice: int = 0) -> ModelOutput:
    """One ModelOutput from a `chat.completion` body (dict or the SDK's ChatCompletion)."""
    where = "openai-chat response"
    d = as_dict(body, where)
    kind = d.get("object")
    if kind == "chat.completion.chunk":
        raise mapping_error(
            where, "this is a stream chunk; use OpenAIChatAccumulator or ingest_sse"
        )
    if kind not in (None, "chat.completion") or not isinstance(d.get("choices"), list):
        raise mapping_error(where, "not a Chat Completions response (no 'choices' list)")
    if "error" in d and not d["choices"]:
        raise mapping_error(where, f"the provider reported an error: {d['error']}")
    chosen = [c for c in d["choices"] if isinstance(c, dict) and c.get("index", 0) == choice]
    if not chosen:
        raise mapping_error(f"{where}.choices", f"no choice with index {choice}")
    c_where = f"{where}.choices[{d['choices'].index(chosen[0])}]"
    message = get(chosen[0], "message", dict, c_where)
    m_where = f"{c_where}.message"
    calls = [
        _message_call(call, f"{m_where}.tool_calls[{i}]")
        for i, call in enumerate(get(message, "tool_calls", list, m_where, []))
    ]
    legacy = message.get("function_call")
    if isinstance(legacy, dict) and not calls:
        calls.append(
            ToolCall.parse(
                "function_call",
                get(legacy, "name", str, f"{m_where}.function_call"),
                get(legacy, "arguments", str, f"{m_where}.function_call", ""),
            )
        )
    return _output(
        model=get(d, "model", str, where, ""),
        reasoning=_reasoning_text(message) or "",
        text=get(message, "content", str, m_where, ""),
        refusal=get(message, "refusal", str, m_where, ""),
        calls=calls,
        finish=get(chosen[0], "finish_reason", str, c_where, None),
        usage=usage_from(d.get("usage"), f"{where}.usage"),
    )


class OpenAIChatAccumulator(Accumulator):
    """Folds `chat.completion.chunk` events; tool calls merge by their `index`."""

    label = "openai-chat"

    def __init__(self, *, choice: int = 0) -> None:
        super().__init__()
        self._choice = choice
        self._model = ""
        self._reasoning: list[str] = []
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, _Call] = {}
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._chunks = 0
        self.saw_done = False
        """Whether a `data: [DONE]` line was seen (SSE input only)."""

    def _done_marker(self) -> None:
        self.saw_done = True

    def _feed(self, chunk: dict[str, Any], where: str) -> None:
        if chunk.get("type") == "chunk" and isinstance(chunk.get("chunk"), dict):
            chunk = chunk["chunk"]  # the SDK's `.stream()` helper wraps raw chunks
        elif isinstance(chunk.get("type"), str) and "choices" not in chunk:
            return  # the helper's derived events (content.delta, ...) repeat the raw chunks
        if isinstance(chunk.get("error"), dict):
            raise mapping_error(where, f"the provider reported an error: {chunk['error']}")
        if chunk.get("object") == "" and chunk.get("choices") == []:
            return  # Azure OpenAI's first chunk: its prompt filter results, nothing generated
        if chunk.get("object") not in (None, "chat.completion.chunk"):
            raise mapping_error(where, f"not a chat.completion.chunk: {chunk.get('object')!r}")
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            raise mapping_error(where, "not a chat.completion.chunk (no 'choices' list)")
        self._chunks += 1
        self._model = chunk.get("model") or self._model
        if chunk.get("usage") is not None:
            self._usage = usage_from(chunk["usage"], f"{where}.usage")
        for i, raw in enumerate(choices):
            c = as_dict(raw, f"{where}.choices[{i}]")
            if c.get("index", 0) == self._choice:
                self._choice_delta(c, f"{where}.choices[{i}]")

    def _choice_delta(self, c: dict[str, Any], where: str) -> None:
        delta = get(c, "delta", dict, where, {})
        reasoning = _reasoning_text(delta)
        if reasoning:
            self._reasoning.append(reasoning)
        if isinstance(delta.get("content"), str):
            self._text.append(delta["content"])
        if isinstance(delta.get("refusal"), str):
            self._refusal.append(delta["refusal"])
        for j, raw in enumerate(get(delta, "tool_calls", list, where, [])):
            c_where = f"{where}.delta.tool_calls[{j}]"
            self._call_delta(as_dict(raw, c_where), c_where)
        legacy = delta.get("function_call")
        if isinstance(legacy, dict):
            legacy_call = {"index": 0, "id": "function_call", "function": legacy}
            self._call_delta(legacy_call, f"{where}.delta.function_call")
        if c.get("finish_reason") is not None:
            self._finish = get(c, "finish_reason", str, where)

    def _call_delta(self, d: dict[str, Any], where: str) -> None:
        """Fold one tool call delta (`where`: its place in the stream)."""
        index = d.get("index")
        if not isinstance(index, int):
            # Some compatible servers omit `index`: a known id continues its call, a new id opens
            # one, a delta without an id continues the last.
            by_id = {c.id: i for i, c in self._calls.items() if c.id}
            call_id = d.get("id")
            if call_id and call_id in by_id:
                index = by_id[call_id]
            elif call_id or not self._calls:
                index = len(self._calls)
            else:
                index = max(self._calls)
        call = self._calls.setdefault(index, _Call())
        if d.get("id") and not call.id:
            call.id = d["id"]
        function = get(d, "function", dict, where, {})
        name = get(function, "name", str, f"{where}.function", "")
        if name:
            # Name arrives once; a few servers repeat it on every delta.
            call.name = call.name if call.name == name else call.name + name
        if isinstance(function.get("arguments"), str):
            call.arguments.append(function["arguments"])

    def result(self) -> ModelOutput:
        """The finished output; a mapping error if the stream never finished."""
        where = f"{self.label} stream"
        if not self._chunks:
            raise mapping_error(where, "no chat.completion.chunk events")
        if self._finish is None:
            raise mapping_error(
                where, f"truncated: ended after {self.count} events without a finish_reason"
            )
        calls = []
        for index in sorted(self._calls):
            call = self._calls[index]
            if not call.id or not call.name:
                missing = "id" if not call.id else "name"
                raise mapping_error(f"{where} tool call index {index}", f"no {missing} received")
            calls.append(ToolCall.parse(call.id, call.name, "".join(call.arguments)))
        return _output(
            model=self._model,
            reasoning="".join(self._reasoning),
            text="".join(self._text),
            refusal="".join(self._refusal),
            calls=calls,
            finish=self._finish,
            usage=self._usage,
        )


def ingest_stream(chunks: Iterable[Any], *, choice: int = 0) -> ModelOutput:
    """One ModelOutput from an iterable of chunks (dicts, JSON text or the SDK's Stream)."""
    acc = OpenAIChatAccumulator(choice=choice)
    acc.feed_all(chunks)
    return acc.result()


def ingest_sse(text: str, *, choice: int = 0) -> ModelOutput:
    """One ModelOutput from the raw SSE text of a streamed Chat Completions response."""
    acc = OpenAIChatAccumulator(choice=choice)
    acc.feed_sse(text)
    output = acc.result()
    if not acc.saw_done:
        raise mapping_error(f"{acc.label} SSE", "truncated: no 'data: [DONE]' line at the end")
    return output


__all__ = [
    "PROVIDER",
    "SPECIFICATION",
    "STOP_REASONS",
    "OpenAIChatAccumulator",
    "ingest_response",
    "ingest_sse",
    "ingest_stream",
    "usage_from",
]
