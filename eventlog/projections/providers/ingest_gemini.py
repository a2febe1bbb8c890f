"""Google Gemini `generateContent` responses and streamed chunks -> one ModelOutput.

Accepts the REST spelling (camelCase) and the google-genai SDK's `model_dump()` (snake_case).
"""

from __future__ import annotations

import base64
import enum
from collections.abc import Iterable
from typing import Any

import msgspec

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
    first_of,
    get,
    mapping_error,
    non_negative,
)

PROVIDER = "google"
SPECIFICATION = "generateContent"

STOP_REASONS = {
    "STOP": "end_turn",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "LANGUAGE": "content_filter",
}
"""Gemini `finishReason` -> neutral stop reason (anything else: `other`)."""


class _Text(msgspec.Struct):
    """A text or thought part being assembled across chunks."""

    thought: bool
    text: list[str]
    signature: str | None = None
    chunk: int = 0
    """The chunk (response) that started it: only a later chunk's text continues it."""


def _reason(value: Any) -> str:
    """A finish or block reason as Google spells it: `STOP`, also from the SDK's enum members.

    google-genai's `model_dump()` keeps `FinishReason.STOP`, a str enum whose `str()` is
    `FinishReason.STOP`, not `STOP`.
    """
    return str(value.value if isinstance(value, enum.Enum) else value)


def usage_from(raw: Any, where: str) -> Usage | None:
    """Usage from `usageMetadata`; completion tokens include thinking tokens."""
    if raw is None:
        return None
    u = as_dict(raw, where)
    thoughts = non_negative(first_of(u, "thoughtsTokenCount", "thoughts_token_count"))
    return Usage(
        prompt_tokens=non_negative(first_of(u, "promptTokenCount", "prompt_token_count"))
        + non_negative(first_of(u, "toolUsePromptTokenCount", "tool_use_prompt_token_count")),
        completion_tokens=non_negative(
            first_of(u, "candidatesTokenCount", "candidates_token_count")
        )
        + thoughts,
        cached_prompt_tokens=non_negative(
            first_of(u, "cachedContentTokenCount", "cached_content_token_count")
        ),
        reasoning_tokens=thoughts,
    )


class GeminiAccumulator(Accumulator):
    """Folds GenerateContentResponse chunks; consecutive text of one kind forms one part."""

    label = "gemini"

    def __init__(self, *, candidate: int = 0) -> None:
        super().__init__()
        self._candidate = candidate
        self._items: list[_Text | ToolCall] = []
        self._model = ""
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._responses = 0

    def _feed(self, chunk: dict[str, Any], where: str) -> None:
        if isinstance(chunk.get("error"), dict):
            raise mapping_error(where, f"the provider reported an error: {chunk['error']}")
        candidates = chunk.get("candidates")
        feedback = first_of(chunk, "promptFeedback", "prompt_feedback")
        usage = first_of(chunk, "usageMetadata", "usage_metadata")
        if candidates is None and feedback is None and usage is None:
            raise mapping_error(where, "not a GenerateContentResponse (no 'candidates')")
        self._responses += 1
        self._model = first_of(chunk, "modelVersion", "model_version") or self._model
        if usage is not None:
            self._usage = usage_from(usage, f"{where}.usageMetadata")
        if isinstance(feedback, dict) and first_of(feedback, "blockReason", "block_reason"):
            self._finish = _reason(first_of(feedback, "blockReason", "block_reason"))
        if not isinstance(candidates, list):
            return
        for i, raw in enumerate(candidates):
            c = as_dict(raw, f"{where}.candidates[{i}]")
            if c.get("index", 0) == self._candidate:
                self._fold_candidate(c, f"{where}.candidates[{i}]")

    def _fold_candidate(self, c: dict[str, Any], where: str) -> None:
        content = get(c, "content", dict, where, {})
        parts = get(content, "parts", list, f"{where}.content", [])
        for j, raw in enumerate(parts):
            self._fold_part(as_dict(raw, f"{where}.content.parts[{j}]"), f"{where}.parts[{j}]")
        finish = first_of(c, "finishReason", "finish_reason")
        if finish is not None:
            self._finish = _reason(finish)

    def _fold_part(self, p: dict[str, Any], where: str) -> None:
        signature = first_of(p, "thoughtSignature", "thought_signature")
        if isinstance(signature, bytes):  # google-genai decodes it; REST sends base64 text
            signature = base64.b64encode(signature).decode()
        call = first_of(p, "functionCall", "function_call")
        if isinstance(call, dict):
            name = call.get("name")
            if not isinstance(name, str):
                raise mapping_error(f"{where}.functionCall.name", "missing")
            args = call.get("args")
            raw = dumps(args if args is not None else {})
            call_id = call.get("id") or f"{name}_{len(self._calls())}"
            self._items.append(ToolCall.parse(call_id, name, raw, signature=signature))
            return
        text = p.get("text")
        if not isinstance(text, str):
            return  # inline data, executable code: not kept (see docs/providers.md)
        thought = bool(p.get("thought"))
        last = self._items[-1] if self._items else None
        # A stream sends one part in pieces, one per chunk, its signature on the last; two parts
        # of one response are two parts (Gemini: a signed part is never merged with another).
        if (
            isinstance(last, _Text)
            and last.thought == thought
            and last.signature is None
            and last.chunk < self._responses
        ):
            last.text.append(text)
            last.signature = signature
            last.chunk = self._responses
        elif text or signature:
            self._items.append(
                _Text(thought=thought, text=[text], signature=signature, chunk=self._responses)
            )

    def _calls(self) -> list[ToolCall]:
        return [i for i in self._items if isinstance(i, ToolCall)]

    def _parts_and_calls(self) -> tuple[list[Part], list[ToolCall]]:
        """The finished parts, and the calls with how many of those parts came before each.

        Each `_Text` item is one part (pieces merged across chunks already), so a call's place
        (`ToolCall.after`) counts the parts as they are stored.
        """
        parts: list[Part] = []
        calls: list[ToolCall] = []
        for item in self._items:
            if isinstance(item, ToolCall):
                calls.append(msgspec.structs.replace(item, after=len(parts)))
            elif item.thought:
                parts.append(ReasoningPart(text="".join(item.text), signature=item.signature))
            else:
                parts.append(TextPart(text="".join(item.text), signature=item.signature))
        return parts, calls

    def result(self) -> ModelOutput:
        """The finished output; a mapping error if no chunk carried a finishReason."""
        where = f"{self.label} response" if self.body else f"{self.label} stream"
        if not self._responses:
            raise mapping_error(where, "no GenerateContentResponse chunks")
        if self._finish is None:
            if self.body:
                raise mapping_error(where, "no candidate has a finishReason (unfinished?)")
            raise mapping_error(
                where, f"truncated: ended after {self.count} chunks without a finishReason"
            )
        parts, calls = self._parts_and_calls()
        stop = STOP_REASONS.get(self._finish, "other")
        if stop == "end_turn" and calls:
            stop = "tool_use"
        return ModelOutput(
            parts=tuple(parts),
            tool_calls=tuple(calls),
            invocation=Invocation(
                provider=PROVIDER, specification=SPECIFICATION, model=self._model
            ),
            usage=self._usage,
            stop_reason=stop,
            provider_stop_reason=self._finish,
        )


def ingest_response(body: Any, *, candidate: int = 0) -> ModelOutput:
    """One ModelOutput from a `generateContent` response (or a JSON array of stream chunks)."""
    acc = GeminiAccumulator(candidate=candidate)
    if isinstance(body, list):
        acc.feed_all(body)
    else:
        acc.body = True
        acc.feed(body)
    return acc.result()


def ingest_stream(chunks: Iterable[Any], *, candidate: int = 0) -> ModelOutput:
    """One ModelOutput from an iterable of `streamGenerateContent` chunks."""
    acc = GeminiAccumulator(candidate=candidate)
    acc.feed_all(chunks)
    return acc.result()


def ingest_sse(text: str, *, candidate: int = 0) -> ModelOutput:
    """One ModelOutput from the raw SSE text of `streamGenerateContent?alt=sse`."""
    acc = GeminiAccumulator(candidate=candidate)
    acc.feed_sse(text)
    return acc.result()


__all__ = [
    "PROVIDER",
    "SPECIFICATION",
    "STOP_REASONS",
    "GeminiAccumulator",
    "ingest_response",
    "ingest_sse",
    "ingest_stream",
    "usage_from",
]
