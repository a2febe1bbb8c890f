"""Anthropic Messages responses and streamed events -> one ModelOutput."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from eventlog.events import (
    Invocation,
    ModelOutput,
    Part,
    ReasoningPart,
    TextPart,
    ToolCall,
    Usage,
)
from eventlog.projections.providers.common import (
    Accumulator,
    as_dict,
    dumps,
    get,
    mapping_error,
    non_negative,
)

PROVIDER = "anthropic"
SPECIFICATION = "messages"

STOP_REASONS = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "pause_turn": "pause_turn",
    "refusal": "refusal",
    "model_context_window_exceeded": "max_tokens",
}
"""Anthropic `stop_reason` -> neutral stop reason."""

_HELPER_EVENTS = {"text", "thinking", "signature", "input_json", "citation", "compaction"}
"""Events the SDK's `.stream()` helper derives from raw deltas (folding them would double)."""


def usage_from(raw: Any, where: str) -> Usage | None:
    """Usage from an Anthropic `usage` object; prompt tokens include cache reads and writes."""
    if raw is None:
        return None
    u = as_dict(raw, where)
    read = non_negative(u.get("cache_read_input_tokens"))
    write = non_negative(u.get("cache_creation_input_tokens"))
    details = get(u, "output_tokens_details", dict, where, {})
    return Usage(
        prompt_tokens=non_negative(u.get("input_tokens")) + read + write,
        completion_tokens=non_negative(u.get("output_tokens")),
        cached_prompt_tokens=read,
        cache_write_tokens=write,
        reasoning_tokens=non_negative(details.get("thinking_tokens")),
    )


def _block(block: dict[str, Any], where: str) -> Part | ToolCall | None:
    kind = block.get("type")
    if kind == "text":
        text = get(block, "text", str, where, "")
        return TextPart(text=text) if text else None
    if kind == "thinking":
        return ReasoningPart(
            text=get(block, "thinking", str, where, ""),
            signature=get(block, "signature", str, where, None),
        )
    if kind == "redacted_thinking":
        return ReasoningPart(redacted_data=get(block, "data", str, where))
    if kind == "tool_use":
        raw = block.get("_raw")
        if not isinstance(raw, str):
            raw = dumps(get(block, "input", dict, where, {}))
        return ToolCall.parse(get(block, "id", str, where), get(block, "name", str, where), raw)
    # Server tool blocks (web search, code execution) are executed and answered by Anthropic.
    return None


def _output(
    blocks: list[dict[str, Any]],
    *,
    model: str,
    stop: str | None,
    usage: Usage | None,
    where: str,
) -> ModelOutput:
    parts: list[Part] = []
    calls: list[ToolCall] = []
    for i, block in enumerate(blocks):
        mapped = _block(block, f"{where}.content[{i}]")
        if isinstance(mapped, ToolCall):
            calls.append(mapped)
        elif mapped is not None:
            parts.append(mapped)
    return ModelOutput(
        parts=tuple(parts),
        tool_calls=tuple(calls),
        invocation=Invocation(provider=PROVIDER, specification=SPECIFICATION, model=model),
        usage=usage,
        stop_reason=STOP_REASONS.get(stop, "other") if stop else None,
        provider_stop_reason=stop,
    )


def ingest_response(body: Any) -> ModelOutput:
    """One ModelOutput from a Messages API response (dict or the SDK's Message)."""
    where = "anthropic response"
    d = as_dict(body, where)
    if d.get("type") == "error":
        raise mapping_error(where, f"the provider reported an error: {d.get('error')}")
    if d.get("type") not in (None, "message") or not isinstance(d.get("content"), list):
        raise mapping_error(where, "not a Messages API response (no 'content' list)")
    blocks = [as_dict(b, f"{where}.content[{i}]") for i, b in enumerate(d["content"])]
    return _output(
        blocks,
        model=get(d, "model", str, where, ""),
        stop=get(d, "stop_reason", str, where, None),
        usage=usage_from(d.get("usage"), f"{where}.usage"),
        where=where,
    )


class AnthropicAccumulator(Accumulator):
    """Folds Messages stream events (message_start ... message_stop) into one output."""

    label = "anthropic"

    def __init__(self) -> None:
        super().__init__()
        self._message: dict[str, Any] | None = None
        self._blocks: dict[int, dict[str, Any]] = {}
        self._usage: dict[str, Any] = {}
        self._stop: str | None = None
        self._stopped = False

    def _feed(self, e: dict[str, Any], where: str) -> None:
        kind = e.get("type")
        if not isinstance(kind, str):
            raise mapping_error(where, "not a Messages stream event (no 'type')")
        if kind == "error":
            raise mapping_error(where, f"the provider reported an error: {e.get('error')}")
        if kind in _HELPER_EVENTS or kind == "ping":
            return
        if kind == "message_start":
            self._message = get(e, "message", dict, where)
            usage = get(self._message, "usage", dict, f"{where}.message", {})
            self._usage.update({k: v for k, v in usage.items() if v is not None})
            return
        if self._message is None:
            raise mapping_error(where, f"{kind!r} before message_start")
        if kind == "content_block_start":
            block = dict(get(e, "content_block", dict, where))
            if block.get("type") == "tool_use":
                block["_raw"] = ""
            self._blocks[get(e, "index", int, where)] = block
        elif kind == "content_block_delta":
            self._delta(e, where)
        elif kind == "message_delta":
            delta = get(e, "delta", dict, where, {})
            self._stop = get(delta, "stop_reason", str, f"{where}.delta", None) or self._stop
            usage = get(e, "usage", dict, where, {})
            self._usage.update({k: v for k, v in usage.items() if v is not None})
        elif kind == "message_stop":
            self._stopped = True

    def _delta(self, e: dict[str, Any], where: str) -> None:
        index = get(e, "index", int, where)
        block = self._blocks.get(index)
        if block is None:
            raise mapping_error(where, f"delta for content block {index} before its start")
        delta = get(e, "delta", dict, where)
        kind = delta.get("type")
        d_where = f"{where}.delta"
        b_where = f"{where}: content block {index}"
        if kind == "text_delta":
            _append(block, "text", get(delta, "text", str, d_where), b_where)
        elif kind == "thinking_delta":
            _append(block, "thinking", get(delta, "thinking", str, d_where), b_where)
        elif kind == "signature_delta":
            _append(block, "signature", get(delta, "signature", str, d_where), b_where)
        elif kind == "input_json_delta":
            _append(block, "_raw", get(delta, "partial_json", str, d_where), b_where)
        # citations_delta: citations are not kept (see docs/providers.md).

    def result(self) -> ModelOutput:
        """The finished output; a mapping error if message_stop never arrived."""
        where = f"{self.label} stream"
        if self._message is None or not self._stopped:
            missing = "message_start" if self._message is None else "message_stop"
            raise mapping_error(
                where, f"truncated: ended after {self.count} events without {missing}"
            )
        blocks = [self._blocks[i] for i in sorted(self._blocks)]
        for block in blocks:
            if block.get("type") == "tool_use" and not block.get("_raw"):
                block["_raw"] = "{}"  # a tool without parameters streams no input_json_delta
        return _output(
            blocks,
            model=get(self._message, "model", str, where, ""),
            stop=self._stop or get(self._message, "stop_reason", str, where, None),
            usage=usage_from(self._usage, f"{where}.usage") if self._usage else None,
            where=where,
        )


def _append(block: dict[str, Any], key: str, text: str, where: str) -> None:
    """Add a delta's text to a started block's field, which must be text (or absent) too."""
    block[key] = get(block, key, str, where, "") + text


def ingest_stream(events: Iterable[Any]) -> ModelOutput:
    """One ModelOutput from an iterable of stream events (dicts, JSON or the SDK's Stream)."""
    acc = AnthropicAccumulator()
    acc.feed_all(events)
    return acc.result()


def ingest_sse(text: str) -> ModelOutput:
    """One ModelOutput from the raw SSE text of a streamed Messages API call."""
    acc = AnthropicAccumulator()
    acc.feed_sse(text)
    return acc.result()


__all__ = [
    "PROVIDER",
    "SPECIFICATION",
    "STOP_REASONS",
    "AnthropicAccumulator",
    "ingest_response",
    "ingest_sse",
    "ingest_stream",
    "usage_from",
]
