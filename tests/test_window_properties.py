"""Window rules as properties over random conversations and budgets (every strategy)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog.errors import WindowTooSmallError
from eventlog.events import Compaction, EventData, ModelInput, SystemInstructionSet
from eventlog.projections.providers.render import PROVIDERS, render
from eventlog.projections.tokens import get_counter
from eventlog.projections.window import STRATEGIES, WindowBuilder, context_window, window_tokens
from eventlog.projections.window_types import Window
from tests import render_windows as rw
from tests.window_cases import conversations, oracle

COUNTER = get_counter("estimate")
BUDGETS = st.one_of(st.integers(0, 300), st.integers(300, 1500))
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _window(events: list[EventData], budget: int, strategy: str) -> Window | None:
    try:
        return context_window(events, "s", budget=budget, strategy=strategy, turns=2)
    except WindowTooSmallError as exc:
        assert exc.shortfall == exc.needed - budget > 0
        assert f"short by {exc.shortfall} tokens" in str(exc)
        # The shortfall is exact: that many more tokens and the window fits.
        fits = context_window(events, "s", budget=exc.needed, strategy=strategy, turns=2)
        assert fits.report is not None and fits.report.tokens <= exc.needed
        return None


def _covered(events: list[EventData]) -> set[int]:
    """Unit starts some compaction stands in for (by the rule: the unit starts in its range)."""
    out: set[int] = set()
    for seq, data in enumerate(events, 1):
        if isinstance(data, Compaction):
            out.update(range(data.first_seq, min(data.last_seq, seq - 1) + 1))
    return out


@SETTINGS
@given(conversations(), BUDGETS, st.sampled_from(STRATEGIES))
def test_window_rules(events: list[EventData], budget: int, strategy: str) -> None:
    w = _window(events, budget, strategy)
    o = oracle(events)
    if w is None:
        # Only when the pinned entries alone do not fit: with an unlimited budget they are
        # exactly what the error said was needed.
        return
    assert w.report is not None
    # Never over budget, by the counter used; the report says the same total.
    assert window_tokens(w, COUNTER) == w.report.tokens <= budget
    # System instruction and newest input kept (at Live).
    assert w.system == o.system
    by_seq = {it.seq: it for it in w.items}
    newest = by_seq[o.newest_input]
    assert newest.level == "live" and newest.data is events[o.newest_input - 1]
    # A unit is all in or all out (results never without their call, nor calls without them),
    # unless a compaction stands in for it.
    for start in set(o.groups.values()):
        members = [s for s, g in o.groups.items() if g == start]
        shown = [s in by_seq for s in members]
        assert all(shown) or not any(shown), (start, members, shown)
    for start in o.pinned:
        assert start in by_seq
    # Order preserved (a compaction sits where its range starts).
    keys = [
        2 * it.data.first_seq - 1 if isinstance(it.data, Compaction) else 2 * it.seq
        for it in w.items
    ]
    assert keys == sorted(keys)
    # The live screen only on the newest input or tool result.
    screens = [it for it in w.items if it.live_screen]
    assert len(screens) <= 1
    # Report: one row per entry, counts add up.
    r = w.report
    assert r.kept + r.downgraded + r.summarised + r.dropped == len(r.entries)
    assert [e.seq for e in r.entries] == sorted(e.seq for e in r.entries)
    fates = [e.fate for e in r.entries]
    assert (r.kept, r.downgraded, r.summarised, r.dropped) == tuple(
        fates.count(f) for f in ("kept", "downgraded", "summarised", "dropped")
    )
    # A summarised entry names the compaction in the window that stands in for it.
    compactions = {it.seq for it in w.items if isinstance(it.data, Compaction)}
    assert all(e.summarised_by in compactions for e in r.entries if e.fate == "summarised")
    # An instruction another followed directly never took effect: left out, reported dropped.
    assert not o.superseded & set(by_seq)
    assert all(e.fate == "dropped" for e in r.entries if e.seq in o.superseded)
    if strategy in ("lod_then_drop", "summary_aware"):
        _downgrade_before_drop(events, w, o.pinned, o.groups, o.superseded)
    else:
        assert r.downgraded == 0


def _downgrade_before_drop(
    events: list[EventData],
    w: Window,
    pinned: set[int],
    groups: dict[int, int],
    superseded: set[int],
) -> None:
    assert w.report is not None
    dropped = [e.seq for e in w.report.entries if e.fate == "dropped" and e.seq not in superseded]
    if not dropped:
        return
    oldest_drop = min(dropped)
    for it in w.items:
        if it.seq < oldest_drop or groups.get(it.seq, it.seq) in pinned:
            continue
        if it.level == "live" and not isinstance(it.data, Compaction | SystemInstructionSet):
            data = events[it.seq - 1]
            live = COUNTER.count_event(data)
            assert COUNTER.count_event(data, "summary") >= live, it
            assert COUNTER.count_event(data, "gist") >= live, it


@SETTINGS
@given(conversations(), BUDGETS, st.sampled_from(STRATEGIES), st.data())
def test_incremental_equals_from_scratch(
    events: list[EventData], budget: int, strategy: str, data: st.DataObject
) -> None:
    b = WindowBuilder(budget=budget, strategy=strategy, turns=2, stream="s")
    checks = data.draw(st.sets(st.integers(1, len(events)), max_size=4))
    for n, event in enumerate(events, 1):
        b.feed(event)
        if n in checks or n == len(events):
            try:
                got = b.window()
            except WindowTooSmallError as exc:
                with pytest.raises(WindowTooSmallError) as fresh:
                    context_window(events[:n], "s", budget=budget, strategy=strategy, turns=2)
                assert fresh.value.needed == exc.needed
                continue
            want = context_window(events[:n], "s", budget=budget, strategy=strategy, turns=2)
            assert got == want


@SETTINGS
@given(conversations())
def test_full_tokens_is_the_window_with_no_budget(events: list[EventData]) -> None:
    """What calibration compares with reported usage is what an unbudgeted window counts."""
    b = WindowBuilder(budget=10**9, stream="s")
    for event in events:
        b.feed(event)
        w = b.window()
        assert w.report is not None
        assert b.full_tokens() == w.report.tokens == window_tokens(w, COUNTER)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.integers(200, 3000), st.sampled_from(STRATEGIES))
def test_rendered_windows_pass_the_renderer_checks(
    events: list[EventData], budget: int, strategy: str
) -> None:
    w = _window(events, budget, strategy)
    if w is None:
        return
    for provider in PROVIDERS:
        rw.CHECKERS[provider](render(w, provider, model="m"))


def test_entries_of_a_dropped_compaction_are_dropped_not_summarised() -> None:
    """Nothing in the window stands in for them once their summary is dropped too."""
    events: list[EventData] = [
        ModelInput.from_text("first question"),
        ModelInput.from_text("first answer"),
        Compaction(first_seq=1, last_seq=2, summary="We discussed it at length. " * 20),
        Compaction(first_seq=1, last_seq=3, summary="Long ago. " * 20),
        ModelInput.from_text("second question"),
    ]
    for strategy in STRATEGIES:
        w = context_window(events, budget=30, strategy=strategy, turns=1)
        assert w.report is not None and [it.seq for it in w.items] == [5]
        assert [e.fate for e in w.report.entries] == ["dropped"] * 4 + ["kept"]
        assert (w.report.summarised, w.report.dropped) == (0, 4)
    # With room for the newer summary, it stands in for all three before it.
    w = context_window(events, budget=10_000)
    assert w.report is not None and [it.seq for it in w.items] == [4, 5]
    assert [(e.fate, e.summarised_by) for e in w.report.entries[:3]] == [("summarised", 4)] * 3
    assert w.report.summarised == 3


def test_newest_input_is_kept_even_inside_a_compaction() -> None:
    events: list[EventData] = [
        SystemInstructionSet(text="sys"),
        ModelInput.from_text("first"),
        ModelInput.from_text("second"),
        Compaction(first_seq=2, last_seq=3, summary="both inputs"),
    ]
    w = context_window(events, budget=1000)
    assert [it.seq for it in w.items] == [1, 4, 3]
    assert w.report is not None
    assert [(e.seq, e.fate) for e in w.report.entries] == [
        (1, "kept"),
        (2, "summarised"),
        (3, "kept"),
        (4, "kept"),
    ]
