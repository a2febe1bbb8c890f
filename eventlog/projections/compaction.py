"""Compaction: a summary that stands in for the older part of a conversation in context windows.

Nothing is deleted. `compact(store, stream)` appends one `Compaction` event whose summary
stands in, in every later context window, for everything before the newest `keep_last`
messages (docs/windows.md says how windows use it). Compactions roll: a new one covers the
whole older part again, and its summarizer is handed the earlier summaries in place of the
events they cover, so each event is summarized from its own text once, and every window shows
one summary. `compact_and_retry` wraps a model call: when the provider answers that the
request is too long, it compacts (or, with nothing left to compact, shrinks the budget) and
calls again. See docs/compaction.md.
"""

from __future__ import annotations

import bisect
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar

import msgspec

from eventlog.errors import (
    ConcurrencyError,
    ContextOverflowError,
    DuplicateEventError,
    EventlogError,
    UsageError,
    ValidationError,
    WindowTooSmallError,
)
from eventlog.events import (
    Compaction,
    Event,
    ModelInput,
    ModelOutput,
    RecordedEvent,
    SystemInstructionSet,
    ToolResults,
)
from eventlog.projections.overflow import ContextOverflow, context_overflow
from eventlog.projections.tokens import TokenCounter, get_counter
from eventlog.projections.window import Budget, budget_tokens, context_window
from eventlog.projections.window_types import Window
from eventlog.store import Store, require_store

if TYPE_CHECKING:
    from eventlog.aio import AsyncStore

T = TypeVar("T")
log = logging.getLogger("eventlog.compaction")

_ID_NAMESPACE = uuid.UUID("6f1c9a52-3f0e-4c47-9d55-2b8e7f0a61c3")
"""Namespace of compaction event ids: one id per (stream, range), so retries are idempotent."""
_REPLANS = 3
"""Plans made again when another writer appended between reading and appending."""


class CompactionPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """When to compact, and how much to keep as it is."""

    trigger: float = 0.8
    """Compact when a window uses more than this share of its budget (or had to downgrade or
    drop anything to fit)."""
    keep_last: int = 8
    """Messages (model inputs and outputs, each output with its tool results) kept verbatim
    after the compacted range."""
    max_summary_tokens: int = 1024
    """Length asked of the summarizer, in the counter's tokens."""

    def __post_init__(self) -> None:
        if not isinstance(self.trigger, (int, float)) or not 0 < self.trigger <= 1:
            raise ValidationError(f"must be in (0, 1], got {self.trigger!r}", field="trigger")
        if not isinstance(self.keep_last, int) or self.keep_last < 0:
            raise ValidationError(f"must be >= 0, got {self.keep_last!r}", field="keep_last")
        if not isinstance(self.max_summary_tokens, int) or self.max_summary_tokens < 1:
            raise ValidationError(
                f"must be >= 1, got {self.max_summary_tokens!r}", field="max_summary_tokens"
            )

    def due(self, window: Window) -> bool:
        """Whether `window` shows the conversation outgrowing its budget: time to compact.

        That is when it uses more than `trigger` of its budget, or downgraded or dropped
        anything to fit (not counting what `sliding_window` leaves out by its turn count, nor
        an instruction that never took effect).
        """
        report = window.report
        if report is None:
            raise UsageError("CompactionPolicy.due needs a window with its report")
        if report.tokens > self.trigger * report.budget or report.downgraded:
            return True
        if report.strategy == "sliding_window":  # it drops older turns by design, not to fit
            return False
        # an instruction that never took effect is dropped whatever the budget: not a sign
        return report.dropped > report.superseded


class SummaryRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What a summarizer is asked to summarize: one compaction's range."""

    stream: str
    first_seq: int
    last_seq: int
    previous: tuple[Compaction, ...]
    """Earlier compactions inside the range, oldest first: their summaries stand for the events
    they cover, which are not in `events`."""
    events: tuple[RecordedEvent, ...]
    """The range's events that no earlier compaction covers, in seq order."""
    max_tokens: int
    """How long the summary may be, in the compacting counter's tokens."""

    def transcript(self) -> str:
        """The range as plain text, for a summarizing model's prompt.

        Earlier summaries, then user, assistant and tool lines, in stream order.
        """
        return "\n".join(_lines(self, None))


class Summarizer(Protocol):
    """Turns a `SummaryRequest` into the summary text (sync, or async in `compact_async`).

    Any callable works (a function, a lambda, an object); its `name` attribute (else its
    `__name__`, else its class name) is recorded in the `Compaction` event.
    """

    def __call__(self, request: SummaryRequest, /) -> str | Awaitable[str]:
        """The summary of `request`'s range."""
        ...


class ExtractiveSummarizer:
    """The default summarizer: deterministic, offline, no model.

    It writes one line per user input, assistant reply, tool call and tool result of the range,
    with the lines of earlier summaries where their ranges start, each line clipped to the same
    width: the widest that fits `max_tokens` by the counter. If even 16 characters a line do
    not fit, the oldest lines go (the summary says how many); if not even the heading fits,
    the summary is one line saying how many lines were left out.
    """

    name = "extractive-v1"
    _MIN_WIDTH = 16

    def __init__(self, counter: TokenCounter | str = "estimate") -> None:
        self.counter = get_counter(counter) if isinstance(counter, str) else counter

    def __call__(self, request: SummaryRequest) -> str:
        """The extract of `request`'s range, within `request.max_tokens`."""
        count, limit = self.counter.count_text, request.max_tokens
        head = f"Summary of seqs {request.first_seq}-{request.last_seq} (extract, no model):"

        def text(lines: Sequence[str]) -> str:
            return "\n".join([head, *lines])

        def fits(width: int | None) -> bool:
            return count(text(_lines(request, width, carry=True))) <= limit

        widest = max((len(line) for line in _lines(request, None, carry=True)), default=0)
        if fits(None):
            return text(_lines(request, None, carry=True))
        if fits(self._MIN_WIDTH):
            lo, hi = self._MIN_WIDTH, widest
            while lo < hi:  # the widest clip that fits
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
            return text(_lines(request, lo, carry=True))
        lines = _lines(request, self._MIN_WIDTH, carry=True)

        def without(n: int) -> list[str]:
            return [f"({n} earlier lines left out)", *lines[n:]]

        lo, hi = 1, len(lines)
        while lo < hi:  # the fewest oldest lines to leave out
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if count(text(without(mid))) <= limit else (mid + 1, hi)
        if count(text(without(lo))) <= limit:
            return text(without(lo))
        return f"(seqs {request.first_seq}-{request.last_seq}: {len(lines)} lines left out)"


def _clip(text: str, width: int | None) -> str:
    text = " ".join(text.split())
    if width is None or len(text) <= width:
        return text
    return text[: max(width - 1, 0)] + "…"


_OWN_HEAD = "Summary of seqs "


def _lines(request: SummaryRequest, width: int | None, *, carry: bool = False) -> list[str]:
    """One line per input, reply, tool call and result, clipped to `width`, in stream order.

    Each earlier summary sits where its range starts: as one line saying so, or with `carry`,
    as its own lines, each clipped to `width` (an extract's heading line left out).
    """
    merged: list[tuple[int, int, Compaction | RecordedEvent]] = [
        (c.first_seq, 0, c) for c in request.previous
    ]
    merged.extend((e.seq, 1, e) for e in request.events)
    merged.sort(key=lambda item: item[:2])
    out: list[str] = []
    for _, _, item in merged:
        if isinstance(item, Compaction):
            if carry:
                kept = item.summary.splitlines()
                if kept and kept[0].startswith(_OWN_HEAD):
                    kept = kept[1:]
                out.extend(_clip(line, width) for line in kept if line.strip())
            else:
                out.append(
                    f"Earlier summary (seqs {item.first_seq}-{item.last_seq}): "
                    f"{_clip(item.summary, width)}"
                )
            continue
        out.extend(_event_lines(item.data, width))
    return out


def _event_lines(data: object, width: int | None) -> list[str]:
    """The lines of one event: what the user, the assistant and the tools said."""
    if isinstance(data, ModelInput):
        extra = f" [{len(data.attachments)} attachment(s)]" if data.attachments else ""
        return [f"User: {_clip(data.text, width)}{extra}"]
    if isinstance(data, ModelOutput):
        out = [f"Assistant: {_clip(data.text, width)}"] if data.text else []
        out.extend(
            f"Assistant called {call.name}: {_clip(call.raw_arguments, width)}"
            for call in data.tool_calls
        )
        return out
    if isinstance(data, ToolResults):
        out = [f"Tool {r.tool_name} ({r.status}): {_clip(r.content, width)}" for r in data.results]
        if data.execute_error:
            out.append(f"Tool execution failed: {_clip(data.execute_error, width)}")
        return out
    if isinstance(data, SystemInstructionSet):
        return [f"Instructions set: {_clip(data.text, width)}"]
    return []


def summarizer_name(summarizer: object) -> str:
    """The name recorded for a summarizer: its `name`, `__name__` or class name."""
    name = getattr(summarizer, "name", None)
    if not isinstance(name, str) or not name:
        name = getattr(summarizer, "__name__", None)
    if not isinstance(name, str) or not name:
        name = type(summarizer).__name__
    return name


# -- planning --------------------------------------------------------------------------------


class CompactionPlan(msgspec.Struct, frozen=True, kw_only=True):
    """The compaction a stream is due: its range, and what its summarizer gets."""

    stream: str
    at: int
    """The stream's last seq when planned: the compaction is appended right after it."""
    first_seq: int
    last_seq: int
    previous: tuple[RecordedEvent, ...]
    """The earlier compaction events the new one supersedes (their ranges lie inside its own)."""
    events: tuple[RecordedEvent, ...]
    """The range's events that no earlier compaction covers."""

    @property
    def event_id(self) -> str:
        """The event id: one per stream and range, so a retried compaction is stored once."""
        key = f"{self.stream}\n{self.first_seq}\n{self.last_seq}"
        return str(uuid.uuid5(_ID_NAMESPACE, key))

    def request(self, max_tokens: int) -> SummaryRequest:
        """The summarizer's request for this plan."""
        previous = tuple(e.data for e in self.previous if isinstance(e.data, Compaction))
        return SummaryRequest(
            stream=self.stream,
            first_seq=self.first_seq,
            last_seq=self.last_seq,
            previous=previous,
            events=self.events,
            max_tokens=max_tokens,
        )


_MESSAGE_TYPES = (ModelInput, ModelOutput)
_ENTRY_TYPES = (ModelInput, ModelOutput, ToolResults)


def plan_compaction(
    events: Sequence[RecordedEvent], *, keep_last: int = 8, stream: str = ""
) -> CompactionPlan | None:
    """The compaction due for a stream's events (all of them, in seq order), or None.

    The range ends right before the `keep_last`-th newest message (input or output), or
    before the output whose tool results that message would separate from it (results
    already given, or still to come for calls not yet answered); it starts at the first event
    it summarizes. None when that cut falls inside an earlier compaction's range, or when the
    range holds no input, output or tool result that an earlier compaction does not already
    cover: a range is never summarized from its events twice.
    """
    if not isinstance(keep_last, int) or isinstance(keep_last, bool) or keep_last < 0:
        raise ValidationError(f"must be >= 0, got {keep_last!r}", field="keep_last")
    if not events:
        return None
    head = events[-1].seq
    starts = [e.seq for e in events if isinstance(e.data, _MESSAGE_TYPES)]
    if keep_last == 0:
        cut = head + 1
    elif len(starts) <= keep_last:
        return None
    else:
        cut = starts[-keep_last]
    ranges = [_Range(e) for e in events if isinstance(e.data, Compaction)]
    unit, waiting = _unit_starts(events)
    # never split an output from its results, given or still to come: keep the whole exchange
    cut = min([cut, *(start for seq, start in unit.items() if seq >= cut and start < cut)])
    if waiting:
        cut = min(cut, waiting)
    if any(r.first < cut <= r.last for r in ranges):
        return None  # a cut through an earlier range: it already covers what is before the cut
    inside = [r for r in ranges if r.slot < cut and r.last < cut]
    spans = _merged([(r.first, r.last) for r in inside if r.first <= r.last])
    span_starts = [first for first, _ in spans]

    def covered(seq: int) -> bool:
        i = bisect.bisect_right(span_starts, seq) - 1
        return i >= 0 and seq <= spans[i][1]

    raw = tuple(
        e
        for e in events
        if e.seq < cut
        and not isinstance(e.data, Compaction)
        and not covered(unit.get(e.seq, e.seq))
    )
    if not any(isinstance(e.data, _ENTRY_TYPES) for e in raw):
        return None
    # the ones a window shows now (no later one supersedes them), oldest range first
    shown = sorted(shown_ranges(inside), key=_slot)
    first = min([raw[0].seq, *(r.slot for r in shown)])
    return CompactionPlan(
        stream=stream or events[-1].stream,
        at=head,
        first_seq=first,
        last_seq=cut - 1,
        previous=tuple(r.event for r in shown),
        events=raw,
    )


class _Range:
    """A compaction event as a window places it: its slot, and its range capped before it."""

    __slots__ = ("event", "first", "last", "seq", "slot")

    def __init__(self, event: RecordedEvent) -> None:
        data = event.data
        assert isinstance(data, Compaction)
        self.event, self.seq, self.first = event, event.seq, data.first_seq
        self.last = min(data.last_seq, event.seq - 1)
        self.slot = min(data.first_seq, event.seq)
        """Where its summary sits (docs/windows.md): where its range starts."""

    def supersedes(self, other: _Range) -> bool:
        """Whether this later compaction hides `other` in windows (as `WindowBuilder` does)."""
        return (
            self.seq > other.seq
            and self.first <= other.slot <= self.last
            and other.last <= self.last
        )


def shown_ranges(ranges: Sequence[_Range]) -> list[_Range]:
    """The ranges no later one supersedes (`_Range.supersedes`), in O(n log n).

    Later ranges go first into a tree of the largest `last` per `first`, so each range asks
    once whether a later one starts at or before its slot and reaches past both its slot and
    its end; thousands of compactions in one stream stay cheap to plan.
    """
    firsts = sorted({r.first for r in ranges})
    tree = [-1] * (len(firsts) + 1)  # prefix maxima of `last` over `firsts`, 1-based
    shown: list[_Range] = []
    for r in sorted(ranges, key=_seq, reverse=True):
        i, reach = bisect.bisect_right(firsts, r.slot), -1
        while i > 0:
            reach = max(reach, tree[i])
            i &= i - 1
        if reach < max(r.slot, r.last):
            shown.append(r)
        i = bisect.bisect_left(firsts, r.first) + 1
        while i < len(tree):
            tree[i] = max(tree[i], r.last)
            i += i & -i
    shown.reverse()  # in seq order, as given
    return shown


def _seq(r: _Range) -> int:
    return r.seq


def _slot(r: _Range) -> int:
    return r.slot


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive seq ranges merged into disjoint ones, in order."""
    out: list[tuple[int, int]] = []
    for first, last in sorted(spans):
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return out


def _unit_starts(events: Sequence[RecordedEvent]) -> tuple[dict[int, int], int]:
    """Which output each tool-results event answers, and which output still waits for results.

    The map is tool-results seq -> output seq; the second value the seq of the latest output
    if some of its calls are not answered yet (0 if none).

    A window keeps an output and its results together (results pair with the latest output's
    calls not yet answered, even after an input) and covers them by where the output starts
    (docs/windows.md, "Units"); the plan pairs them the same way, and keeps an output whose
    results are still to come out of the range, or they would arrive hidden and unsummarized.
    """
    out: dict[int, int] = {}
    open_seq, ids, answered = 0, frozenset[str](), set[str]()
    for e in events:
        data = e.data
        if isinstance(data, ModelOutput):
            open_seq = e.seq if data.tool_calls else 0
            ids, answered = frozenset(c.id for c in data.tool_calls), set()
        elif isinstance(data, ToolResults) and open_seq:
            matched = [
                r.call_id for r in data.results if r.call_id in ids and r.call_id not in answered
            ]
            if matched or data.execute_error:
                out[e.seq] = open_seq
                answered.update(matched)
                if len(answered) == len(ids):
                    open_seq = 0
    return out, open_seq


# -- compacting ------------------------------------------------------------------------------

Outcome = Literal["compacted", "nothing_to_compact", "already_compacted", "not_shorter"]


class CompactionResult(msgspec.Struct, frozen=True, kw_only=True):
    """What `compact` did."""

    outcome: Outcome
    """`compacted`; `nothing_to_compact`; `already_compacted` (another writer did, meanwhile);
    `not_shorter` (the summary was no shorter than what it would replace: nothing written)."""
    plan: CompactionPlan | None = None
    event: RecordedEvent | None = None
    """The appended `Compaction` event (when `outcome` is `compacted`)."""
    summary_tokens: int = 0
    replaced_tokens: int = 0
    """Tokens (Live, by the counter) of what the summary replaces: the events and earlier
    summaries of the range."""

    @property
    def compacted(self) -> bool:
        """Whether a compaction was appended."""
        return self.outcome == "compacted"


def replaced_tokens(plan: CompactionPlan, counter: TokenCounter) -> int:
    """Tokens (Live, by `counter`) a window spends today on what the plan's summary replaces."""
    total = sum(
        counter.count_event(e.data)
        for e in plan.events
        if isinstance(e.data, (*_ENTRY_TYPES, SystemInstructionSet))
    )
    return total + sum(counter.count_event(e.data) for e in plan.previous)


def summary_room(policy: CompactionPolicy, replaced: int) -> int:
    """The summary's length asked for: the policy's, and at most half of what it replaces."""
    return max(1, min(policy.max_summary_tokens, replaced // 2))


def _check_summarizer(summarizer: object) -> None:
    if not callable(summarizer):
        raise UsageError(f"a summarizer must be callable, got {type(summarizer).__name__}")


class _Compactor:
    """One `compact` call's state, shared by the sync and async forms."""

    def __init__(
        self,
        summarizer: Summarizer | None,
        policy: CompactionPolicy | None,
        counter: TokenCounter | str,
    ) -> None:
        self.policy = policy or CompactionPolicy()
        if summarizer is not None:
            _check_summarizer(summarizer)
        self.counter = get_counter(counter) if isinstance(counter, str) else counter
        self.summarizer = (
            summarizer if summarizer is not None else ExtractiveSummarizer(self.counter)
        )
        self.name = summarizer_name(self.summarizer)
        self.raced: EventlogError | None = None
        self._made: tuple[tuple[object, ...], str] | None = None
        """The last summary made, with what it summarized: reused if a new plan is the same."""
        self._counted: tuple[CompactionPlan, int] | None = None
        self._summary_tokens = 0
        """Tokens of the last summary `event` made (the one `done` reports)."""

    def plan(self, events: Sequence[RecordedEvent], stream: str) -> CompactionPlan | None:
        return plan_compaction(events, keep_last=self.policy.keep_last, stream=stream)

    def nothing(self) -> CompactionResult:
        return CompactionResult(outcome="already_compacted" if self.raced else "nothing_to_compact")

    def made(self, plan: CompactionPlan) -> str | None:
        """The summary made for an earlier plan of the same range and inputs, if any."""
        if self._made is not None and self._made[0] == _inputs(plan):
            return self._made[1]
        return None

    def replaced(self, plan: CompactionPlan) -> int:
        """`replaced_tokens` of a plan, counted once per plan."""
        if self._counted is None or self._counted[0] is not plan:
            self._counted = (plan, replaced_tokens(plan, self.counter))
        return self._counted[1]

    def ask(self, plan: CompactionPlan) -> SummaryRequest:
        return plan.request(summary_room(self.policy, self.replaced(plan)))

    def event(self, plan: CompactionPlan, summary: object) -> Event | CompactionResult:
        """The compaction event to append, or the result saying why there is none."""
        if not isinstance(summary, str) or not summary.strip():
            raise ValidationError(
                f"a summarizer must return non-empty text, {self.name} returned {summary!r:.80}",
                field="summary",
            )
        self._made = (_inputs(plan), summary)
        data = Compaction(
            first_seq=plan.first_seq, last_seq=plan.last_seq, summary=summary, summarizer=self.name
        )
        tokens, replaced = self.counter.count_event(data), self.replaced(plan)
        self._summary_tokens = tokens
        if tokens >= replaced:
            return CompactionResult(
                outcome="not_shorter", plan=plan, summary_tokens=tokens, replaced_tokens=replaced
            )
        return Event(data=data, id=plan.event_id)

    def done(self, plan: CompactionPlan, event: RecordedEvent) -> CompactionResult:
        data = event.data
        assert isinstance(data, Compaction)
        result = CompactionResult(
            outcome="compacted",
            plan=plan,
            event=event,
            summary_tokens=self._summary_tokens,
            replaced_tokens=self.replaced(plan),
        )
        log.debug(
            "stream %r: compacted seqs %d..%d (%d tokens) into seq %d (%d tokens)",
            plan.stream,
            plan.first_seq,
            plan.last_seq,
            result.replaced_tokens,
            event.seq,
            result.summary_tokens,
        )
        return result

    def lost(self) -> EventlogError:
        assert self.raced is not None
        return self.raced  # other writers kept appending: the caller decides when to try again


def _inputs(plan: CompactionPlan) -> tuple[object, ...]:
    """What a summary of the plan depends on: its range and what it summarizes."""
    return (
        plan.first_seq,
        plan.last_seq,
        tuple(e.id for e in plan.previous),
        tuple(e.id for e in plan.events),
    )


def compact(
    store: Store,
    stream: str,
    summarizer: Summarizer | None = None,
    *,
    policy: CompactionPolicy | None = None,
    counter: TokenCounter | str = "estimate",
) -> CompactionResult:
    """Append the compaction `stream` is due, summarized by `summarizer` (default: extractive).

    It compacts whether or not the policy's trigger is reached (use `policy.due(window)` to
    decide); the policy gives `keep_last` and `max_summary_tokens`. A summary no shorter than
    what it replaces is not appended (`not_shorter`). The append expects the stream's last seq
    as read, so a compaction never lands on a history it did not read: another writer's append
    in between means a new plan (up to 3 times, then its `ConcurrencyError`), which reuses the
    summary if it covers the same range and events; another writer's compaction of the range
    means `already_compacted`.
    """
    require_store(store, "compact")
    job = _Compactor(summarizer, policy, counter)
    for _ in range(_REPLANS + 1):
        plan = job.plan(list(store.read(stream)), stream)
        if plan is None:
            return job.nothing()
        summary: object = job.made(plan)
        if summary is None:
            summary = job.summarizer(job.ask(plan))
            if inspect.isawaitable(summary):
                _close(summary)
                raise UsageError(f"summarizer {job.name} is async: use compact_async")
        event = job.event(plan, summary)
        if isinstance(event, CompactionResult):
            return event
        try:
            stored = store.append(stream, [event], expected_seq=plan.at)
        except (ConcurrencyError, DuplicateEventError) as exc:
            job.raced = exc
            continue
        return job.done(plan, stored[0])
    raise job.lost()


async def compact_async(
    store: AsyncStore,
    stream: str,
    summarizer: Summarizer | None = None,
    *,
    policy: CompactionPolicy | None = None,
    counter: TokenCounter | str = "estimate",
) -> CompactionResult:
    """`compact` for an `AsyncStore`; `summarizer` may be async (its result is awaited)."""
    job = _Compactor(summarizer, policy, counter)
    for _ in range(_REPLANS + 1):
        plan = job.plan(await store.read(stream), stream)
        if plan is None:
            return job.nothing()
        summary: object = job.made(plan)
        if summary is None:
            summary = job.summarizer(job.ask(plan))
            if inspect.isawaitable(summary):
                summary = await summary
        event = job.event(plan, summary)
        if isinstance(event, CompactionResult):
            return event
        try:
            stored = await store.append(stream, [event], expected_seq=plan.at)
        except (ConcurrencyError, DuplicateEventError) as exc:
            job.raced = exc
            continue
        return job.done(plan, stored[0])
    raise job.lost()


def _close(awaitable: Awaitable[object]) -> None:
    """Close a coroutine that will never be awaited (no 'never awaited' warning)."""
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()


# -- compact and retry -----------------------------------------------------------------------

_SHRINK_MARGIN = 0.97
"""Share of the provider-stated ratio a shrunk budget takes (room for counting error)."""
_SHRINK_BLIND = 0.85
"""What a budget shrinks to when the provider stated no counts."""


def _shrunk(tokens: int, overflow: ContextOverflow) -> int:
    scale = overflow.scale()
    factor = _SHRINK_BLIND if scale is None or scale >= 1 else scale * _SHRINK_MARGIN
    return min(int(tokens * factor), tokens - 1)


class _Attempts:
    """The retry loop's state, shared by the sync and async forms."""

    def __init__(self, budget: int | Budget, max_attempts: int) -> None:
        if not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValidationError(f"must be >= 1, got {max_attempts!r}", field="max_attempts")
        self.tokens = budget_tokens(budget)
        self.max_attempts = max_attempts
        self.overflows: list[ContextOverflow] = []
        self.last_error: Exception | None = None
        """The provider's last overflow error (the cause of a ContextOverflowError)."""

    def failed(self, exc: Exception, stream: str) -> ContextOverflow:
        """Record an overflow answer (re-raise anything else)."""
        overflow = context_overflow(exc)
        if overflow is None:
            raise exc
        self.overflows.append(overflow)
        self.last_error = exc
        log.info("stream %r: provider says the request is too long: %s", stream, overflow.message)
        return overflow

    def after(
        self, stream: str, overflow: ContextOverflow, result: CompactionResult, sent: Window
    ) -> None:
        """Say what was compacted; with nothing left to compact, shrink the budget instead.

        The budget shrinks from what the window `sent` held (its tokens by the counter), not
        from the budget it was allowed, which it may not have filled.
        """
        if result.compacted and result.plan is not None and result.event is not None:
            log.info(
                "stream %r: compacted seqs %d..%d into seq %d",
                stream,
                result.plan.first_seq,
                result.plan.last_seq,
                result.event.seq,
            )
            return
        report = sent.report
        held = min(self.tokens, report.tokens) if report is not None else self.tokens
        shrunk = max(_shrunk(held, overflow), 0)
        log.info("stream %r: nothing left to compact; budget %d -> %d", stream, self.tokens, shrunk)
        self.tokens = shrunk

    def cannot_shrink(self, stream: str, small: WindowTooSmallError) -> ContextOverflowError:
        """The budget shrank below what a window must always hold: give up, saying both."""
        last = self.overflows[-1]
        return ContextOverflowError(
            f"stream {stream!r}: too long for the provider ({last.message}), and the window "
            f"cannot shrink to {self.tokens} tokens: {small}",
            overflow=last,
            attempts=len(self.overflows),
        )

    def give_up(self, stream: str) -> ContextOverflowError:
        last = self.overflows[-1]
        return ContextOverflowError(
            f"stream {stream!r}: still too long for the provider after {self.max_attempts} "
            f"attempt(s) (last budget {self.tokens} tokens): {last.message}",
            overflow=last,
            attempts=self.max_attempts,
        )


def compact_and_retry(
    store: Store,
    stream: str,
    call: Callable[[Window], T],
    *,
    budget: int | Budget,
    summarizer: Summarizer | None = None,
    policy: CompactionPolicy | None = None,
    counter: TokenCounter | str = "estimate",
    strategy: str = "summary_aware",
    calibrate: bool = False,
    max_attempts: int = 3,
) -> T:
    """`call(window)` on the stream's context window, compacting when the provider says so.

    Before the first call, the stream is compacted if `policy.due(window)`. When `call` raises
    an error that `context_overflow` recognises, the stream is compacted and the call made
    again on a new window; when there is nothing left to compact, the budget shrinks instead,
    to the tokens the rejected window held times the ratio of the provider's stated limit to
    its count, less 3% (times 0.85 when it stated no counts). After `max_attempts` calls, or
    when the window cannot shrink that far (`WindowTooSmallError`), `ContextOverflowError`
    (the last overflow error as its cause). Any other error from `call`
    propagates at once.
    """
    require_store(store, "compact_and_retry")
    policy = policy or CompactionPolicy()
    state = _Attempts(budget, max_attempts)

    def window() -> Window:
        return context_window(
            store,
            stream,
            budget=state.tokens,
            counter=counter,
            strategy=strategy,
            calibrate=calibrate,
        )

    current = window()
    if (
        policy.due(current)
        and compact(store, stream, summarizer, policy=policy, counter=counter).compacted
    ):
        current = window()
    for attempt in range(1, max_attempts + 1):
        try:
            return call(current)
        except Exception as exc:
            overflow = state.failed(exc, stream)
            if attempt == max_attempts:
                raise state.give_up(stream) from exc
        result = compact(store, stream, summarizer, policy=policy, counter=counter)
        state.after(stream, overflow, result, current)
        try:
            current = window()
        except WindowTooSmallError as small:
            raise state.cannot_shrink(stream, small) from state.last_error
    raise AssertionError("unreachable")  # pragma: no cover


async def compact_and_retry_async(
    store: AsyncStore,
    stream: str,
    call: Callable[[Window], Awaitable[T]],
    *,
    budget: int | Budget,
    summarizer: Summarizer | None = None,
    policy: CompactionPolicy | None = None,
    counter: TokenCounter | str = "estimate",
    strategy: str = "summary_aware",
    calibrate: bool = False,
    max_attempts: int = 3,
) -> T:
    """`compact_and_retry` for an `AsyncStore` and an async `call` (the summarizer may be async)."""
    import asyncio

    policy = policy or CompactionPolicy()
    state = _Attempts(budget, max_attempts)

    async def window() -> Window:
        return await asyncio.to_thread(
            context_window,
            store.sync,
            stream,
            budget=state.tokens,
            counter=counter,
            strategy=strategy,
            calibrate=calibrate,
        )

    async def compacted() -> CompactionResult:
        return await compact_async(store, stream, summarizer, policy=policy, counter=counter)

    current = await window()
    if policy.due(current) and (await compacted()).compacted:
        current = await window()
    for attempt in range(1, max_attempts + 1):
        try:
            return await call(current)
        except Exception as exc:
            overflow = state.failed(exc, stream)
            if attempt == max_attempts:
                raise state.give_up(stream) from exc
        state.after(stream, overflow, await compacted(), current)
        try:
            current = await window()
        except WindowTooSmallError as small:
            raise state.cannot_shrink(stream, small) from state.last_error
    raise AssertionError("unreachable")  # pragma: no cover


__all__ = [
    "CompactionPlan",
    "CompactionPolicy",
    "CompactionResult",
    "ExtractiveSummarizer",
    "SummaryRequest",
    "Summarizer",
    "compact",
    "compact_and_retry",
    "compact_and_retry_async",
    "compact_async",
    "plan_compaction",
    "replaced_tokens",
    "summarizer_name",
    "summary_room",
]
