"""OpenAI Responses API responses and streamed events -> one ModelOutput."""

from __future__ import annotations

import copy
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
SPECIFICATION = "responses"

HOST_ACTIONS = frozenset(
    {"computer_call", "local_shell_call", "shell_call", "apply_patch_call", "mcp_approval_request"}
)
"""Output items the host must act on (run, apply, approve) that a `ToolCall` cannot stand for."""

INCOMPLETE_REASONS = {"max_output_tokens": "max_tokens", "content_filter": "content_filter"}
"""`incomplete_details.reason` -> neutral stop reason."""

_TERMINAL = {"response.completed", "response.incomplete"}
_RESPONSE_EVENTS = {"response.created", "response.in_progress", "response.queued", *_TERMINAL}
_PART_ADDED = {
    "response.content_part.added": ("content", "content_index"),
    "response.reasoning_summary_part.added": ("summary", "summary_index"),
}
_DeltaRule = tuple[str | None, str | None, str, str | None]
_DELTAS: dict[str, _DeltaRule] = {
    "response.output_text.delta": ("content", "content_index", "text", "output_text"),
    "response.reasoning_text.delta": ("content", "content_index", "text", "reasoning_text"),
    "response.refusal.delta": ("content", "content_index", "refusal", "refusal"),
    "response.reasoning_summary_text.delta": ("summary", "summary_index", "text", "summary_text"),
    "response.function_call_arguments.delta": (None, None, "arguments", None),
    "response.custom_tool_call_input.delta": (None, None, "input", None),
}
"""Stream delta event -> (item list key, index key, text field, new part type)."""


def usage_from(raw: Any, where: str) -> Usage | None:
    """Usage from a Responses `usage` object (cached and reasoning tokens included)."""
    if raw is None:
        return None
    u = as_dict(raw, where)
    inp = get(u, "input_tokens_details", dict, where, {})
    out = get(u, "output_tokens_details", dict, where, {})
    return Usage(
        prompt_tokens=non_negative(u.get("input_tokens")),
        completion_tokens=non_negative(u.get("output_tokens")),
        cached_prompt_tokens=non_negative(inp.get("cached_tokens")),
        cache_write_tokens=non_negative(inp.get("cache_write_tokens")),
        reasoning_tokens=non_negative(out.get("reasoning_tokens")),
    )


def _item_parts(item: dict[str, Any], where: str) -> tuple[list[Part], list[ToolCall]]:
    kind = get(item, "type", str, where, None)
    if kind == "reasoning":
        return [
            ReasoningPart(
                text="".join(_texts(item, "content", where)),
                item_id=get(item, "id", str, where, None),
                encrypted_content=get(item, "encrypted_content", str, where, None),
                summary=tuple(_texts(item, "summary", where)),
            )
        ], []
    if kind == "message":
        parts: list[Part] = []
        item_id = get(item, "id", str, where, None)
        phase = get(item, "phase", str, where, None)
        for i, raw in enumerate(get(item, "content", list, where, [])):
            c_where = f"{where}.content[{i}]"
            c = as_dict(raw, c_where)
            if c.get("type") == "output_text":
                text = get(c, "text", str, c_where, "")
                if text:
                    parts.append(TextPart(text=text, item_id=item_id, phase=phase))
            elif c.get("type") == "refusal":
                parts.append(RefusalPart(text=get(c, "refusal", str, c_where, "")))
            else:
                raise mapping_error(c_where, f"unknown message content type {c.get('type')!r}")
        return parts, []
    if kind == "function_call":
        raw = get(item, "arguments", str, where, "")
        call_id, name = get(item, "call_id", str, where), get(item, "name", str, where)
        return [], [ToolCall.parse(call_id, name, raw, item_id=get(item, "id", str, where, None))]
    if kind == "custom_tool_call":
        raw = get(item, "input", str, where, "")
        call_id, name = get(item, "call_id", str, where), get(item, "name", str, where)
        item_id = get(item, "id", str, where, None)
        return [], [ToolCall.parse(call_id, name, raw, item_id=item_id, custom=True)]
    if kind in HOST_ACTIONS:
        raise mapping_error(
            where,
            f"a {kind!r} item asks the host to act, and eventlog records function and custom "
            "tool calls only: dropping it would hide the call (the output is not ingested)",
        )
    if kind == "compaction":
        raise mapping_error(
            where,
            "a 'compaction' item (server-side context management) carries the compacted "
            "context the next request must send back, and eventlog cannot record it: dropping "
            "it would lose that context (the output is not ingested; compact with "
            "eventlog's Compaction events instead)",
        )
    # Built-in tools run by OpenAI (web search, file search, ...) leave no call for the host.
    return [], []


def _texts(item: dict[str, Any], key: str, where: str) -> list[str]:
    """The `text` of each entry of a reasoning item's `content` or `summary` list."""
    entries = get(item, key, list, where, [])
    return [
        get(as_dict(e, f"{where}.{key}[{i}]"), "text", str, f"{where}.{key}[{i}]", "")
        for i, e in enumerate(entries)
    ]


def _completed_stop(parts: list[Part], calls: list[ToolCall]) -> str:
    """The neutral stop reason of a completed response: a refusal part makes it `refusal`."""
    if calls:
        return "tool_use"
    if any(isinstance(p, RefusalPart) and p.text for p in parts):
        return "refusal"
    return "end_turn"


def _output(
    items: list[dict[str, Any]], response: dict[str, Any], where: str, usage: Any
) -> ModelOutput:
    status = response.get("status")
    if status == "failed" or response.get("error"):
        raise mapping_error(where, f"the response failed: {response.get('error')}")
    parts: list[Part] = []
    calls: list[ToolCall] = []
    for i, item in enumerate(items):
        item_parts, item_calls = _item_parts(item, f"{where}.output[{i}]")
        calls += [msgspec.structs.replace(c, after=len(parts)) for c in item_calls]
        parts += item_parts
    if status == "incomplete":
        details = get(response, "incomplete_details", dict, where, {})
        raw_reason = get(details, "reason", str, f"{where}.incomplete_details", "") or "incomplete"
        stop = INCOMPLETE_REASONS.get(raw_reason, "other")
    elif status in (None, "completed"):
        raw_reason = status or "completed"
        stop = _completed_stop(parts, calls)
    else:
        raise mapping_error(f"{where}.status", f"the response is still {status!r}")
    return ModelOutput(
        parts=tuple(parts),
        tool_calls=tuple(calls),
        invocation=Invocation(
            provider=PROVIDER,
            specification=SPECIFICATION,
            model=get(response, "model", str, where, ""),
        ),
        usage=usage_from(usage, f"{where}.usage"),
        stop_reason=stop,
        provider_stop_reason=raw_reason,
    )


def ingest_response(body: Any) -> ModelOutput:
    """One ModelOutput from a Responses API `response` object (dict or the SDK's Response)."""
    where = "openai-responses response"
    d = as_dict(body, where)
    if d.get("object") not in (None, "response") or not isinstance(d.get("output"), list):
        raise mapping_error(where, "not a Responses API response (no 'output' list)")
    items = [as_dict(item, f"{where}.output[{i}]") for i, item in enumerate(d["output"])]
    return _output(items, d, where, d.get("usage"))


class OpenAIResponsesAccumulator(Accumulator):
    """Folds Responses stream events (`response.*`) into one output, items by `output_index`."""

    label = "openai-responses"

    def __init__(self) -> None:
        super().__init__()
        self._items: dict[int, dict[str, Any]] = {}
        self._response: dict[str, Any] = {}
        self._final: dict[str, Any] | None = None

    def _item(self, e: dict[str, Any], where: str) -> dict[str, Any]:
        index = get(e, "output_index", int, where)
        if index not in self._items:
            raise mapping_error(where, f"delta for output_index {index} before its item was added")
        return self._items[index]

    def _slot(
        self, item: dict[str, Any], key: str, index: int, blank: dict[str, Any], where: str
    ) -> dict[str, Any]:
        """Entry `index` of an item's `content` or `summary` list, made when missing."""
        seq = item.get(key)
        if not isinstance(seq, list):
            seq = item[key] = []
        while len(seq) <= index:
            seq.append(dict(blank))
        return as_dict(seq[index], f"{where}: the item's {key}[{index}]")

    def _feed(self, e: dict[str, Any], where: str) -> None:
        kind = e.get("type")
        if not isinstance(kind, str):
            raise mapping_error(where, "not a Responses stream event (no 'type')")
        if kind == "error":
            raise mapping_error(where, f"the provider reported an error: {e.get('message')!r}")
        if kind == "response.failed":
            raise mapping_error(where, f"the response failed: {e.get('response')}")
        if kind in _RESPONSE_EVENTS:
            self._response = get(e, "response", dict, where)
            if kind in _TERMINAL:
                self._final = self._response
        elif kind in ("response.output_item.added", "response.output_item.done"):
            item = copy.deepcopy(get(e, "item", dict, where))
            self._items[get(e, "output_index", int, where)] = item
        elif kind in _PART_ADDED:
            key, index_key = _PART_ADDED[kind]
            index = get(e, index_key, int, where)
            part = self._slot(self._item(e, where), key, index, {}, where)
            part.update(copy.deepcopy(get(e, "part", dict, where)))
        elif kind in _DELTAS:
            self._delta(e, _DELTAS[kind], where)
        # Other events (*.done, annotations, built-in tool progress) add nothing new.

    def _delta(self, e: dict[str, Any], rule: _DeltaRule, where: str) -> None:
        key, index_key, field, blank = rule
        target = self._item(e, where)
        if key is not None and index_key is not None:
            index = get(e, index_key, int, where)
            target = self._slot(target, key, index, {"type": blank}, where)
        text = get(target, field, str, f"{where}: the delta's target", "")
        target[field] = text + get(e, "delta", str, where)

    def result(self) -> ModelOutput:
        """The finished output; a mapping error if no response.completed/incomplete arrived."""
        where = f"{self.label} stream"
        if self._final is None:
            raise mapping_error(
                where,
                f"truncated: ended after {self.count} events without response.completed "
                "or response.incomplete",
            )
        final_items = get(self._final, "output", list, where, [])
        items = dict(enumerate(final_items))
        items.update(self._items)  # what the stream built wins; the final list fills gaps
        ordered = [as_dict(items[i], f"{where}.output[{i}]") for i in sorted(items)]
        return _output(ordered, self._final, where, self._final.get("usage"))


def ingest_stream(events: Iterable[Any]) -> ModelOutput:
    """One ModelOutput from an iterable of stream events (dicts, JSON or the SDK's Stream)."""
    acc = OpenAIResponsesAccumulator()
    acc.feed_all(events)
    return acc.result()


def ingest_sse(text: str) -> ModelOutput:
    """One ModelOutput from the raw SSE text of a streamed Responses API call."""
    acc = OpenAIResponsesAccumulator()
    acc.feed_sse(text)
    return acc.result()


__all__ = [
    "PROVIDER",
    "SPECIFICATION",
    "OpenAIResponsesAccumulator",
    "ingest_response",
    "ingest_sse",
    "ingest_stream",
    "usage_from",
]
