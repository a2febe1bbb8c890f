"""`context_window` from scratch counts lazily: the same window as a `WindowBuilder`, in every
regime of every strategy, while counting only what the window needs."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

import eventlog as el
from eventlog.bench.workload import conversation_events
from eventlog.errors import WindowTooSmallError
from eventlog.events import Compaction, EventData, ModelInput, SystemInstructionSet, ToolSpec
from eventlog.projections.tokens import CounterInfo, Detail, get_counter
from eventlog.projections.window import STRATEGIES, WindowBuilder, context_window
from eventlog.projections.window_types import Window

EST = get_counter("estimate")


class Spy:
    """The estimate, recording which events it was asked to count (and at which level)."""

    def __init__(self) -> None:
        self.name = "estimate"
        self.events: list[tuple[int, Detail]] = []

    @property
    def info(self) -> CounterInfo:
        return EST.info

    def count_text(self, text: str) -> int:
        return EST.count_text(text)

    def count_event(self, data: EventData, detail: Detail = "live") -> int:
        self.events.append((id(data), detail))
        return EST.count_event(data, detail)

    def count_tools(self, tools: Sequence[ToolSpec]) -> int:
        return EST.count_tools(tools)


def _builder(events: list[EventData], **options: object) -> Window:
    b = WindowBuilder(**options)  # type: ignore[arg-type]
    b.extend(events)
    return b.window()


def _regime(w: Window) -> str:
    r = w.report
    assert r is not None
    if r.dropped:
        return "drop"
    levels = {e.level for e in r.entries if e.fate == "downgraded"}
    return "gist" if "gist" in levels else "summary" if levels else "live"


@pytest.mark.parametrize("compactions", [True, False])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_one_shot_equals_the_builder_in_every_regime(compactions: bool, strategy: str) -> None:
    events = conversation_events(300)
    if not compactions:
        events = [e for e in events if not isinstance(e, Compaction)]
    everything = _builder(events, budget=10**9, strategy=strategy)
    assert everything.report is not None
    total = everything.report.tokens
    seen: set[str] = set()
    dropped: set[int] = set()
    for budget in [total * k // 16 for k in range(1, 17)] + [200, 900, 3000]:
        options = {"budget": budget, "strategy": strategy, "turns": 7}
        try:
            want = _builder(events, **options)
        except WindowTooSmallError as exc:
            with pytest.raises(WindowTooSmallError) as fresh:
                context_window(events, **options)  # type: ignore[arg-type]
            assert fresh.value.needed == exc.needed
            continue
        got = context_window(events, **options)  # type: ignore[arg-type]
        assert got == want and got.report is not None
        seen.add(_regime(got))
        dropped.add(got.report.dropped)
    # The budgets reached every regime the strategy has (the LOD ones downgrade first;
    # sliding_window always drops the turns before the last 7, then more when over budget).
    if strategy in ("lod_then_drop", "summary_aware"):
        assert seen == {"live", "summary", "gist", "drop"}
    elif strategy == "drop_oldest":
        assert seen == {"live", "drop"}
    else:
        assert seen == {"drop"} and len(dropped) > 2


def test_summary_aware_drops_compaction_summaries_oldest_first_once_they_alone_overflow() -> None:
    events: list[EventData] = [SystemInstructionSet(text="sys")]
    for i in range(4):
        events.append(ModelInput.from_text(f"q{i} " + "word " * 50))
        events.append(ModelInput.from_text(f"p{i} " + "word " * 50))
        n = len(events)
        events.append(Compaction(first_seq=n - 1, last_seq=n, summary="sum " * (10 + 5 * i)))
    events.append(ModelInput.from_text("final"))
    compactions = [seq for seq, e in enumerate(events, 1) if isinstance(e, Compaction)]
    kept_counts = []
    for budget in range(10, 130, 3):
        try:
            want = _builder(events, budget=budget)
        except WindowTooSmallError:
            continue
        got = context_window(events, budget=budget)
        assert got == want and got.report is not None
        assert got.report.tokens <= budget
        fates = {e.seq: e.fate for e in got.report.entries}
        kept = [seq for seq in compactions if fates[seq] == "kept"]
        assert kept == compactions[len(compactions) - len(kept) :]  # the newest ones
        kept_counts.append(len(kept))
    assert kept_counts == sorted(kept_counts) and kept_counts[0] == 0 and kept_counts[-1] == 4


def test_drop_oldest_counts_only_the_kept_suffix_and_one_more_unit() -> None:
    events = [e for e in conversation_events(2_000) if not isinstance(e, Compaction)]
    spy = Spy()
    w = context_window(events, budget=20_000, counter=spy, strategy="drop_oldest")
    assert w == _builder(events, budget=20_000, strategy="drop_oldest")
    assert w.report is not None and w.report.dropped > 1_000
    counted = {key for key, _ in spy.events}
    shown = {id(events[it.seq - 1]) for it in w.items}
    # Everything shown is counted; beyond it at most the unit that did not fit (an output and
    # its results, so two events) and the newest input counted twice (as pinned and as kept).
    assert shown <= counted and len(counted - shown) <= 2
    assert len(spy.events) <= 3 * len(w.items)


def test_entries_a_compaction_stands_in_for_are_never_counted() -> None:
    events = conversation_events(1_000)
    spy = Spy()
    w = context_window(events, budget=100_000, counter=spy)
    assert w.report is not None and w.report.summarised > 900
    counted = {key for key, _ in spy.events}
    summarised = {id(events[e.seq - 1]) for e in w.report.entries if e.fate == "summarised"}
    assert not counted & summarised


def test_store_source_is_lazy_too(tmp_path: object) -> None:
    events = conversation_events(400)
    with el.open("memory://") as store:
        store.append("conv", events)
        spy = Spy()
        w = context_window(store, "conv", budget=5_000, counter=spy, strategy="drop_oldest")
        assert w == context_window(events, "conv", budget=5_000, strategy="drop_oldest")
        assert len(spy.events) < len(events) // 4
