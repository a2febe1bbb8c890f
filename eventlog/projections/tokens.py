"""Token counters: a fast CJK-aware estimate, exact OpenAI encodings, and calibration.

Every counter implements `TokenCounter`: a `name`, `count_text`, `count_event` (one event as the
model sees it, with per-message and per-tool-call overheads, at a Level of Detail) and
`count_tools` (a toolset's definitions). `get_counter("estimate" | "o200k_base" | "cl100k_base")`
builds one. `CalibratedCounter` scales a base counter by the ratio a provider's reported
`usage.prompt_tokens` showed on earlier outputs of the stream (`learn_calibrations`).

The estimate (`EstimateCounter`) is pure Python and reads each string in a handful of C-level
passes (`bytes.translate` / `bytes.count`, no regular expressions). Measured against
`o200k_base` on a held-out mix of English prose, Chinese / Japanese / Korean text, Python code,
JSON and agent tool output: see `ESTIMATE_ERROR` and docs/tokens.md.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Sequence
from statistics import median
from typing import TYPE_CHECKING, Final, Literal, Protocol, runtime_checkable

import msgspec

from eventlog.errors import UsageError
from eventlog.events import (
    Attachment,
    Compaction,
    EventData,
    ModelInput,
    ModelOutput,
    ReasoningPart,
    RecordedEvent,
    RefusalPart,
    Section,
    SkillActivated,
    SystemInstructionSet,
    TextPart,
    ToolResult,
    ToolResults,
    ToolsetDefined,
    ToolSpec,
    WidgetUpdated,
)

if TYPE_CHECKING:
    from eventlog.projections.tokens_exact import ExactCounter

Detail = Literal["live", "summary", "gist"]
DETAILS: tuple[Detail, ...] = ("live", "summary", "gist")
"""Level of Detail an entry is rendered at: full text, its summary, or its gist."""

COUNTER_NAMES: Final = ("estimate", "o200k_base", "cl100k_base")
"""Names `get_counter` accepts."""

# ---------------------------------------------------------------------------------------------
# Report structs


class Calibration(msgspec.Struct, frozen=True, kw_only=True):
    """A ratio learnt from a stream: provider-reported prompt tokens / the base counter's count."""

    provider: str
    model: str
    base: str
    """Name of the counter whose counts the ratio scales."""
    ratio: float
    """Median of the per-output ratios (robust to a few odd samples)."""
    samples: int
    """How many outputs with a reported `usage.prompt_tokens` the median was taken over."""
    spread: float = 0.0
    """Median absolute deviation of the per-output ratios (0 with one sample)."""


class CounterInfo(msgspec.Struct, frozen=True, kw_only=True):
    """Which counter produced a count, and which calibration scaled it (for window reports)."""

    counter: str
    """The counter's `name` (e.g. `estimate`, `o200k_base`, `estimate+calibrated`)."""
    base: str
    """The uncalibrated counter underneath (equal to `counter` without calibration)."""
    calibration: Calibration | None = None


class Overheads(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens a provider adds around texts: message framing, tool calls, tool definitions.

    The defaults follow OpenAI's published counting recipe for chat messages (3-4 tokens a
    message) and function definitions; calibration corrects what they miss for other providers.
    """

    per_message: int = 4
    """Role and framing of one message (an input, an output, a system instruction)."""
    per_tool_call: int = 8
    """Id, name and wrapper of one tool call, on top of its name and argument text."""
    per_tool_result: int = 6
    """Framing of one tool result (OpenAI: one message per result), on top of its content."""
    per_tool_definition: int = 8
    """Wrapper of one tool definition, on top of its name, description and schema text."""
    per_toolset: int = 12
    """Framing of the whole tool list, once when it is not empty."""
    per_image: int = 765
    """One image (OpenAI high detail at 1024x1024; Anthropic: about 1.2k for a 1 MP image)."""
    per_file: int = 1000
    """A non-image, non-text attachment (PDF, audio, ...): a flat guess."""


DEFAULT_OVERHEADS: Final = Overheads()

# ---------------------------------------------------------------------------------------------
# The protocol and how events are counted


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of texts, events and toolsets for one tokenizer (or an estimate of one)."""

    @property
    def name(self) -> str:
        """Short name shown in reports (`estimate`, `o200k_base`, ...)."""
        ...

    @property
    def info(self) -> CounterInfo:
        """Which counter and calibration this is."""
        ...

    def count_text(self, text: str) -> int:
        """Tokens of a bare text."""
        ...

    def count_event(self, data: EventData, detail: Detail = "live") -> int:
        """Tokens of one event as the model sees it, overheads included (0 if never shown)."""
        ...

    def count_tools(self, tools: Sequence[ToolSpec]) -> int:
        """Tokens of a toolset's definitions."""
        ...


TextCounter = Callable[[str], int]


def variant(text: str, summary: str | None, gist: str | None, detail: Detail) -> str:
    """The text shown at a Level of Detail: the shortest of the text and its variants down to it.

    A missing variant falls back to the next longer one; a variant longer (in characters) than
    a longer level's text is never chosen over it, so a downgrade never grows a section.
    """
    if detail == "live":
        return text
    best = text
    if summary is not None and len(summary) <= len(best):
        best = summary
    if detail == "gist" and gist is not None and len(gist) <= len(best):
        best = gist
    return best


def _attachment(count: TextCounter, oh: Overheads, att: Attachment) -> int:
    if att.media_type.startswith("image/"):
        return oh.per_image
    if att.data is not None and (
        att.media_type.startswith("text/") or att.media_type == "application/json"
    ):
        return count(att.data.decode("utf-8", "replace"))
    return oh.per_file


def _section(count: TextCounter, s: Section, detail: Detail) -> int:
    body = count(variant(s.text, s.summary, s.gist, detail))
    return body + count(s.title) + 1 if s.title else body


def _result(count: TextCounter, oh: Overheads, r: ToolResult, detail: Detail) -> int:
    n = oh.per_tool_result + count(variant(r.content, r.summary, r.gist, detail))
    return n + sum(_attachment(count, oh, a) for a in r.attachments)


def _output(count: TextCounter, oh: Overheads, data: ModelOutput) -> int:
    n = oh.per_message
    for p in data.parts:
        if isinstance(p, TextPart | RefusalPart | ReasoningPart) and p.text:
            n += count(p.text)
    for c in data.tool_calls:
        n += oh.per_tool_call + count(c.name) + count(c.raw_arguments)
    return n


def count_event_with(
    count: TextCounter, oh: Overheads, data: EventData, detail: Detail = "live"
) -> int:
    """Tokens of one event given a text counter and overheads (shared by every counter).

    Inputs count their sections at `detail` and their attachments; outputs their text, refusal
    and reasoning parts and each tool call (name + raw arguments); tool results their content at
    `detail`; a toolset its definitions; compactions their summary; a widget its state (as a
    live-screen section). Checkpoints and custom events are never shown: 0.
    """
    if detail not in DETAILS:
        raise UsageError(f"unknown detail {detail!r}; choose one of {', '.join(DETAILS)}")
    match data:
        case ModelInput():
            n = oh.per_message + sum(_section(count, s, detail) for s in data.sections)
            return n + sum(_attachment(count, oh, a) for a in data.attachments)
        case ModelOutput():
            return _output(count, oh, data)
        case ToolResults():
            n = sum(_result(count, oh, r, detail) for r in data.results)
            if data.execute_error:
                n += oh.per_tool_result + count(data.execute_error)
            return n
        case SystemInstructionSet():
            return oh.per_message + count(data.text)
        case ToolsetDefined():
            return count_tools_with(count, oh, data.tools)
        case Compaction():
            return oh.per_message + count(data.summary)
        case WidgetUpdated():
            return count(data.widget) + 1 + count(data.state)
        case SkillActivated():
            return count(data.name) + (count(data.instructions) if data.instructions else 0)
    return 0


def count_tools_with(count: TextCounter, oh: Overheads, tools: Sequence[ToolSpec]) -> int:
    """Tokens of tool definitions: name, description, compact JSON schema, plus overheads."""
    if not tools:
        return 0
    n = oh.per_toolset
    for t in tools:
        schema = msgspec.json.encode(t.parameters if t.format is None else t.format).decode()
        n += oh.per_tool_definition + count(t.name) + count(t.description) + count(schema)
    return n


# ---------------------------------------------------------------------------------------------
# The estimate

# One class byte per character: the text is UTF-8 encoded, continuation bytes are deleted, and
# every remaining byte (ASCII, or the lead byte of a multi-byte character) maps to its class.
# A UTF-8 lead byte says enough about the script: E4-E9 start U+4000-U+9FFF (Han), E3 starts
# U+3000-U+3FFF (kana, CJK punctuation), EA-ED start U+A000-U+DFFF (Hangul syllables).
_CLASS = bytearray(b"." * 256)
for _b in range(ord("a"), ord("z") + 1):
    _CLASS[_b] = ord("a")
for _b in range(ord("A"), ord("Z") + 1):
    _CLASS[_b] = ord("A")
for _b in range(ord("0"), ord("9") + 1):
    _CLASS[_b] = ord("0")
_CLASS[ord(" ")] = _CLASS[ord("\t")] = ord(" ")
_CLASS[ord("\n")] = _CLASS[ord("\r")] = ord("\n")
for _b in range(0xC0, 0xCA):
    _CLASS[_b] = ord("o")  # 2-byte, U+0000-U+027F: accented Latin
for _b in range(0xCA, 0xE0):
    _CLASS[_b] = ord("r")  # 2-byte, U+0280-U+07FF: Greek, Cyrillic, Hebrew, Arabic, ...
for _b in (*range(0xE0, 0xE3), 0xEE, 0xEF):
    _CLASS[_b] = ord("p")  # other 3-byte: general punctuation, symbols, full-width forms
_CLASS[0xE3] = ord("K")
for _b in range(0xE4, 0xEA):
    _CLASS[_b] = ord("H")
for _b in range(0xEA, 0xEE):
    _CLASS[_b] = ord("G")
for _b in range(0xF0, 0x100):
    _CLASS[_b] = ord("q")  # 4-byte: emoji, rare Han
_CLASS_TABLE: Final = bytes(_CLASS)
_CONTINUATION: Final = bytes(range(0x80, 0xC0))


def _table(marks: dict[bytes, int]) -> bytes:
    table = bytearray(b" " * 256)
    for members, mark in marks.items():
        for b in members:
            table[b] = mark
    return bytes(table)


# Second passes: word characters vs the rest, ASCII punctuation vs the rest; a run then starts
# wherever its mark follows a space, so one `bytes.count` of a pair counts the runs.
_WORDS: Final = _table({b"aAor": ord("a")})
_PUNCTUATION: Final = _table({b".": ord(".")})
_CJK: Final = _table({b"HKG": ord("H")})
_NO_SCRIPTS: Final = (0, 0, 0, 0, 0, 0, 0, 0)


def features(text: str) -> tuple[int, ...]:
    """The measurements the estimate weighs (see `ESTIMATE_WEIGHTS` for their order).

    Ten C-level passes over an ASCII text, nine more when it has other characters; no
    regular expressions, so no input can make it slow.
    """
    c = text.encode("utf-8", "surrogatepass").translate(_CLASS_TABLE, _CONTINUATION)
    w = c.translate(_WORDS)
    p = c.translate(_PUNCTUATION)
    ascii_part = (
        w.count(b" a") + (w[:1] == b"a"),  # words
        w.count(b"a"),  # letters
        c.count(b"aA"),  # camelCase humps
        c.count(b"0"),  # digits
        c.count(b"."),  # ASCII punctuation
        p.count(b" .") + (p[:1] == b"."),  # punctuation runs
        c.count(b"\n"),  # line breaks
    )
    if text.isascii():
        return ascii_part + _NO_SCRIPTS
    k = c.translate(_CJK)
    return (
        ascii_part
        + (
            c.count(b"H"),  # Han
            c.count(b"K"),  # kana, CJK punctuation
            c.count(b"G"),  # Hangul
            k.count(b" H") + (k[:1] == b"H"),  # CJK runs
            c.count(b"o"),  # accented Latin
            c.count(b"r"),  # Greek, Cyrillic, Hebrew, Arabic, ...
            c.count(b"p"),  # other 3-byte characters
            c.count(b"q"),  # 4-byte characters
        )
    )


ESTIMATE_WEIGHTS: Final[tuple[float, ...]] = (
    0.7374,  # words
    0.0428,  # letters
    0.8224,  # camelCase humps
    0.6773,  # digits
    0.1188,  # ASCII punctuation
    0.8340,  # punctuation runs
    1.0192,  # line breaks
    0.7510,  # Han
    0.7092,  # kana, CJK punctuation
    0.5571,  # Hangul
    0.5219,  # CJK runs
    0.6965,  # accented Latin
    0.1245,  # Greek, Cyrillic, Hebrew, Arabic, ...
    0.2316,  # other 3-byte characters
    1.6477,  # 4-byte characters
)
"""Tokens per unit of each of `features`, fitted to `o200k_base` (see docs/tokens.md)."""

ESTIMATE_ERROR: Final = (
    "vs o200k_base, held-out texts of 40-3,000 characters (docs/tokens.md): mean |error| 5.2%, "
    "90% of texts within 11.2%, totals per kind within 6.1% (prose +1.2%, code -1.9%, JSON -6.1%, "
    "Chinese/Japanese/Korean +4.5%, agent tool output -2.7%); other scripts (Cyrillic, Greek, "
    "Arabic, emoji) only roughly, +-30%"
)
"""Measured error of the estimate against o200k_base."""


_SHORT: Final = 64
_SHORT_ENTRIES: Final = 8192


class EstimateCounter:
    """A fast, CJK-aware token estimate, fitted to `o200k_base`.

    Words, their length and camelCase humps, digits, punctuation runs, line breaks and
    indentation, Han, kana and Hangul characters and other scripts each cost their own fitted
    number of tokens. See `ESTIMATE_ERROR` for its measured accuracy.
    """

    def __init__(
        self,
        *,
        weights: Sequence[float] = ESTIMATE_WEIGHTS,
        overheads: Overheads = DEFAULT_OVERHEADS,
        name: str = "estimate",
    ) -> None:
        if len(weights) != len(ESTIMATE_WEIGHTS):
            raise UsageError(f"weights: need {len(ESTIMATE_WEIGHTS)} numbers, got {len(weights)}")
        self._weights = tuple(float(w) for w in weights)
        self.overheads = overheads
        self.name = name
        self._short: dict[str, int] = {}

    @property
    def info(self) -> CounterInfo:
        """Which counter this is (no calibration)."""
        return CounterInfo(counter=self.name, base=self.name)

    def count_text(self, text: str) -> int:
        """Estimated tokens of `text` (at least 1 for a non-empty text)."""
        if len(text) <= _SHORT:
            # Names, titles and ids repeat all the time: remember them (bounded, GIL-atomic).
            cached = self._short.get(text)
            if cached is None:
                if len(self._short) >= _SHORT_ENTRIES:
                    self._short.clear()
                cached = self._short[text] = self._estimate(text) if text else 0
            return cached
        return self._estimate(text)

    def _estimate(self, text: str) -> int:
        total = sum(map(operator.mul, self._weights, features(text)))
        return max(1, int(total + 0.5))

    def count_event(self, data: EventData, detail: Detail = "live") -> int:
        """Estimated tokens of one event, with message and tool-call overheads."""
        return count_event_with(self.count_text, self.overheads, data, detail)

    def count_tools(self, tools: Sequence[ToolSpec]) -> int:
        """Estimated tokens of a toolset's definitions."""
        return count_tools_with(self.count_text, self.overheads, tools)

    def __repr__(self) -> str:
        return f"EstimateCounter(name={self.name!r})"


# ---------------------------------------------------------------------------------------------
# Calibration


def seq_and_data(history: Iterable[RecordedEvent | EventData]) -> Iterable[tuple[int, EventData]]:
    """Each event with its seq: a bare payload takes the previous event's seq + 1 (as `extend`)."""
    seq = 0
    for item in history:
        if isinstance(item, RecordedEvent):
            seq = item.seq
            yield seq, item.data
        else:
            seq += 1
            yield seq, item


def prompt_samples(
    history: Iterable[RecordedEvent | EventData], counter: TokenCounter
) -> Iterable[tuple[str, str, int, int]]:
    """(provider, model, reported prompt tokens, counted prompt tokens) for each usable output.

    The counted prompt is what a window with no budget shows of everything before the output
    (`WindowBuilder.full_tokens`: the current system instruction and toolset, compaction
    summaries standing in for their ranges, the live screen), so a ratio learnt here scales
    exactly what windows count. Outputs without an invocation or with no reported
    `prompt_tokens` are skipped. `prompt_tokens` is taken as the whole prompt, cached tokens
    included (OpenAI's convention).
    """
    from eventlog.projections.window import WindowBuilder  # the window module imports this one

    builder = WindowBuilder(budget=0, counter=counter, entries="window")
    for seq, data in seq_and_data(history):
        if isinstance(data, ModelOutput) and data.invocation and data.usage:
            reported = data.usage.prompt_tokens
            counted = builder.full_tokens() if reported > 0 else 0
            if counted > 0:
                inv = data.invocation
                yield inv.provider, inv.model, reported, counted
        builder.add(seq, data)


def learn_calibrations(
    history: Iterable[RecordedEvent | EventData],
    counter: TokenCounter,
    *,
    recent: int | None = 64,
) -> dict[tuple[str, str], Calibration]:
    """One `Calibration` per (provider, model) seen in the history with reported usage.

    The ratio is the median of reported / counted over the `recent` latest outputs of that
    model (all of them with `recent=None`), so a few odd samples and old drift do not move it.
    """
    ratios: dict[tuple[str, str], list[float]] = {}
    for provider, model, reported, counted in prompt_samples(history, counter):
        ratios.setdefault((provider, model), []).append(reported / counted)
    out: dict[tuple[str, str], Calibration] = {}
    for (provider, model), values in ratios.items():
        if recent is not None:
            values = values[-recent:]
        mid = median(values)
        spread = median(abs(v - mid) for v in values)
        out[(provider, model)] = Calibration(
            provider=provider,
            model=model,
            base=counter.name,
            ratio=mid,
            samples=len(values),
            spread=spread,
        )
    return out


class CalibratedCounter:
    """A base counter scaled by a learnt ratio for one provider and model.

    Without a calibration (no usable samples) it counts exactly as its base and says so in
    `info`. Each count is rounded on its own, so sums of many counts stay unbiased.
    """

    def __init__(self, base: TokenCounter, calibration: Calibration | None) -> None:
        if calibration is not None and not (
            math.isfinite(calibration.ratio) and calibration.ratio > 0
        ):
            raise UsageError(
                f"calibration ratio must be a positive number, got {calibration.ratio}"
            )
        self.base = base
        self.calibration = calibration
        self._ratio = 1.0 if calibration is None else calibration.ratio
        self.name = base.name if calibration is None else f"{base.name}+calibrated"

    @classmethod
    def from_history(
        cls,
        base: TokenCounter,
        history: Iterable[RecordedEvent | EventData],
        *,
        provider: str | None = None,
        model: str | None = None,
        recent: int | None = 64,
    ) -> CalibratedCounter:
        """Learn from `history` for (provider, model); default: the latest output's invocation."""
        events = list(history)
        if provider is None or model is None:
            for item in reversed(events):
                data = item.data if isinstance(item, RecordedEvent) else item
                if isinstance(data, ModelOutput) and data.invocation is not None:
                    provider = data.invocation.provider if provider is None else provider
                    model = data.invocation.model if model is None else model
                    break
        calibrations = learn_calibrations(events, base, recent=recent)
        return cls(base, calibrations.get((provider or "", model or "")))

    @property
    def ratio(self) -> float:
        """The factor applied to the base counter's counts (1.0 without calibration)."""
        return self._ratio

    @property
    def info(self) -> CounterInfo:
        """The base counter and the calibration used."""
        return CounterInfo(counter=self.name, base=self.base.name, calibration=self.calibration)

    def scale(self, tokens: int) -> int:
        """A base count scaled by the ratio, rounded to the nearest integer."""
        return int(tokens * self._ratio + 0.5)

    def count_text(self, text: str) -> int:
        """Calibrated tokens of a text."""
        return self.scale(self.base.count_text(text))

    def count_event(self, data: EventData, detail: Detail = "live") -> int:
        """Calibrated tokens of one event."""
        return self.scale(self.base.count_event(data, detail))

    def count_tools(self, tools: Sequence[ToolSpec]) -> int:
        """Calibrated tokens of a toolset's definitions."""
        return self.scale(self.base.count_tools(tools))

    def __repr__(self) -> str:
        return f"CalibratedCounter({self.base!r}, ratio={self._ratio:.4f})"


# ---------------------------------------------------------------------------------------------
# Registry


def get_counter(
    name: str = "estimate", *, overheads: Overheads = DEFAULT_OVERHEADS
) -> TokenCounter:
    """A counter by name: `estimate`, `o200k_base` or `cl100k_base` (exact, loaded offline)."""
    if name == "estimate":
        return EstimateCounter(overheads=overheads)
    if name in ("o200k_base", "cl100k_base"):
        return exact_counter(name, overheads=overheads)
    raise UsageError(f"unknown token counter {name!r}; choose one of {', '.join(COUNTER_NAMES)}")


def exact_counter(name: str, *, overheads: Overheads = DEFAULT_OVERHEADS) -> ExactCounter:
    """An exact counter for an OpenAI encoding (needs the `tokens` extra)."""
    from eventlog.projections.tokens_exact import ExactCounter

    return ExactCounter(name, overheads=overheads)


__all__ = [
    "COUNTER_NAMES",
    "DEFAULT_OVERHEADS",
    "ESTIMATE_ERROR",
    "ESTIMATE_WEIGHTS",
    "CalibratedCounter",
    "Calibration",
    "CounterInfo",
    "Detail",
    "EstimateCounter",
    "Overheads",
    "TokenCounter",
    "count_event_with",
    "count_tools_with",
    "exact_counter",
    "features",
    "get_counter",
    "learn_calibrations",
    "prompt_samples",
    "seq_and_data",
    "variant",
]
