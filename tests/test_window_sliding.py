"""`sliding_window` and compactions: a summary whose range reaches the oldest kept turn is kept.

The defect this guards against: a compaction whose range starts before the cut (the oldest kept
turn) sat at a slot older than the cut and was dropped, while the turns of its range inside the
last N were covered by it, so neither the summary nor those turns reached the model.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eventlog as el
from eventlog.events import Compaction, EventData, ModelInput
from eventlog.projections.window import WindowBuilder, context_window
from eventlog.projections.window_types import Window
from tests.window_cases import conversations, oracle

TURNS = 6


def _turn(i: int) -> list[EventData]:
    """One turn: a question and its answer (two events)."""
    return [el.ModelInput.from_text(f"q{i}"), el.ModelOutput(parts=(el.TextPart(text=f"a{i}"),))]


def _store(first: int, last: int) -> el.Store:
    """An instruction, turns 1-8 (turn i's input at seq 2i), a compaction of seqs
    `first`..`last` at seq 18, then turns 9-12 (inputs at 19, 21, 23, 25)."""
    store = el.open("memory://")
    events: list[EventData] = [el.SystemInstructionSet(text="sys")]
    for i in range(1, 9):
        events += _turn(i)
    store.append("c", events)
    store.append("c", [Compaction(first_seq=first, last_seq=last, summary="earlier turns")])
    for i in range(9, 13):
        store.append("c", _turn(i))
    return store


def _sliding(store: el.Store, budget: int = 10**6) -> Window:
    """The 6-turn sliding window of stream "c"."""
    return context_window(store, "c", budget=budget, strategy="sliding_window", turns=TURNS)


def _fates(w: Window) -> dict[int, tuple[str, int | None]]:
    assert w.report is not None
    return {e.seq: (e.fate, e.summarised_by) for e in w.report.entries}


# The last 6 turns are turns 7-12: the cut is turn 7's input, seq 14.
AFTER_CUT = [16, 17, *range(19, 27)]
"""Turns 8-12: after the cut and outside every compaction below."""


def test_a_compaction_starting_before_the_cut_is_kept_in_place_of_its_range() -> None:
    with _store(2, 15) as store:  # turns 1-7: from before the cut into the kept turns
        w = _sliding(store)
    # The summary sits where its range starts; turn 7 (seqs 14, 15) shows only through it.
    assert [it.seq for it in w.items] == [1, 18, *AFTER_CUT]
    f = _fates(w)
    assert all(f[s] == ("summarised", 18) for s in range(2, 16))
    assert f[18] == ("kept", None)
    assert w.report is not None and w.report.summarised == 14 and w.report.dropped == 0


def test_a_compaction_entirely_before_the_cut_is_dropped_with_its_range() -> None:
    with _store(2, 7) as store:  # turns 1-3: older than the last 6 turns
        w = _sliding(store)
    assert [it.seq for it in w.items] == [1, 14, 15, *AFTER_CUT]
    f = _fates(w)
    assert all(f[s] == ("dropped", None) for s in range(2, 14))
    assert f[18] == ("dropped", None)


def test_a_compaction_after_the_cut_stands_in_for_its_range() -> None:
    with _store(16, 17) as store:  # turn 8, inside the kept turns
        w = _sliding(store)
    assert [it.seq for it in w.items] == [1, 14, 15, 18, *range(19, 27)]
    f = _fates(w)
    assert f[16] == f[17] == ("summarised", 18)
    assert all(f[s] == ("dropped", None) for s in range(2, 14))


def test_a_compaction_ending_at_the_cut_is_kept() -> None:
    """The range reaches the oldest kept turn by its first event (turn 7's input)."""
    with _store(10, 14) as store:
        w = _sliding(store)
    assert [it.seq for it in w.items] == [1, 18, 15, *AFTER_CUT]
    assert _fates(w)[14] == ("summarised", 18)


def test_over_budget_the_summary_is_dropped_first_as_the_oldest_unit() -> None:
    """After the turns, `sliding_window` is `drop_oldest`: the summary is its oldest unit."""
    with _store(2, 15) as store:
        full = _sliding(store)
        assert full.report is not None
        w = _sliding(store, budget=full.report.tokens - 1)
    assert [it.seq for it in w.items] == [1, *AFTER_CUT]
    assert _fates(w)[18] == ("dropped", None) and _fates(w)[14] == ("dropped", None)


def test_incremental_equals_from_scratch_at_every_step() -> None:
    """A builder refreshed after every append gives the from-scratch window at that seq."""
    for first, last in [(2, 15), (2, 7), (16, 17), (10, 14), (4, 12)]:
        with el.open("memory://") as store:
            store.append("c", [el.SystemInstructionSet(text="sys")])
            builders = [
                WindowBuilder.from_store(
                    store, "c", budget=budget, strategy="sliding_window", turns=turns
                )
                for budget in (10**6, 40)
                for turns in (1, 3, TURNS)
            ]
            events: list[EventData] = [e for i in range(1, 9) for e in _turn(i)]
            events.append(Compaction(first_seq=first, last_seq=last, summary="earlier"))
            events += [e for i in range(9, 13) for e in _turn(i)]
            for data in events:
                store.append("c", [data])
                for b in builders:
                    b.refresh()
                    budget, turns = b.budget, b.turns
                    want = context_window(
                        store, "c", budget=budget, strategy="sliding_window", turns=turns
                    )
                    assert b.window() == want, (first, last, budget, turns, b.seq)
            # At the end, the summary is in the unlimited 6-turn window iff it reaches seq 14.
            shown = [it.seq for it in builders[2].window().items]
            assert (18 in shown) == (last >= 14), (first, last, shown)


def _cut(events: list[EventData], turns: int) -> int:
    """Seq of the oldest kept turn's input (0: fewer turns than that)."""
    inputs = [seq for seq, d in enumerate(events, 1) if isinstance(d, ModelInput)]
    return inputs[-turns] if len(inputs) >= turns else 0


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.data())
def test_no_kept_turn_is_lost(events: list[EventData], data: st.DataObject) -> None:
    """With room for everything, every entry of the last turns is shown or summarised by a
    summary in the window, and every compaction whose range reaches them is shown."""
    n_inputs = sum(isinstance(d, ModelInput) for d in events)
    turns = data.draw(st.integers(1, max(1, n_inputs)), label="turns")
    w = context_window(events, "s", budget=10**9, strategy="sliding_window", turns=turns)
    b = WindowBuilder(budget=10**9, strategy="sliding_window", turns=turns, stream="s")
    b.extend(events)
    assert b.window() == w
    cut = _cut(events, turns)
    o = oracle(events)
    f = _fates(w)
    for seq, start in o.groups.items():
        if start >= cut and seq not in o.superseded:
            assert f[seq][0] != "dropped", (seq, cut)
    for seq, event in enumerate(events, 1):
        if not isinstance(event, Compaction) or f[seq][0] == "summarised":
            continue  # not a compaction, or superseded by a later one
        if min(event.last_seq, seq - 1) >= max(cut, event.first_seq):
            assert f[seq][0] == "kept", (seq, cut)
