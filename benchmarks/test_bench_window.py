"""Context windows: a new turn's window (incremental) at 1k / 10k / 100k events, and a full window
from scratch over 10k messages vs LangChain's `trim_messages`.

Run:  .venv/bin/pytest benchmarks/test_bench_window.py --benchmark-enable -s
Peer: .venv-bench/bin/pytest benchmarks/test_bench_window.py --benchmark-enable -s
      (langchain-core is installed there only; in .venv the peer comparison is skipped)

Incremental: a `WindowBuilder` (estimate counter, 100k-token budget, summary_aware,
`entries="window"`) holds the workload history (`conversation_events(n)`: a compaction every
40 turns); each round feeds one new user input and builds the next window. `..._turn` feeds a
whole turn (output with calls, results, next input), which adds counting the new tool output.
`test_incremental_scales` times 1k and 100k alternately (best of rounds) and checks the 100k
figure is within the goal (<= 2x the 1k one, <= 1 ms), with a gate of 3x / 2 ms for noise.
`..._no_compactions` is the same history without its compactions: the window then holds
thousands of entries at Gist and its cost follows the window's size, not the history's.

Full window: `context_window(events, budget=100_000, strategy="drop_oldest")` from scratch vs
`trim_messages(strategy="last", max_tokens=100_000)` over the same messages with the same estimate
(`count_text` + 4 per message); goal >= 10x faster. Both are given the history without its
compactions (`without_compactions`): with them, drop_oldest keeps the last summary and the events
after it (about a third of the budget) while trim_messages keeps the newest 100k tokens of every
message, which is not the same window. The test checks both windows hold about the same tokens
(within 10%), prints the ratio and gates at 7x for noise. A window from scratch counts lazily:
nothing while the events are sorted into units, then newest first at Live until the budget is
full; units older than the cut are never counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

import eventlog as el
from benchmarks.workload import conversation_events
from eventlog.bench import peers
from eventlog.bench.common import check_same_tokens
from eventlog.bench.workload import without_compactions
from eventlog.projections.tokens import get_counter
from eventlog.projections.window import WindowBuilder, context_window

BUDGET = 100_000
SIZES = (1_000, 10_000, 100_000)
NEW_INPUT = el.ModelInput.from_text("Now run the tests again and tell me which ones still fail.")
ROUNDS = 300
"""Rounds per incremental figure (each adds events to the history, so not unbounded)."""
FULL_EVENTS = 8_200  # about 10k messages (tool results count one message each)

_builders: dict[tuple[int, bool], WindowBuilder] = {}


def builder(n: int, compactions: bool = True) -> WindowBuilder:
    found = _builders.get((n, compactions))
    if found is None:
        events = conversation_events(n)
        if not compactions:
            events = [e for e in events if not isinstance(e, el.Compaction)]
        found = WindowBuilder(budget=BUDGET, entries="window")
        found.extend(events)
        found.window()
        _builders[(n, compactions)] = found
    return found


def new_turn(b: WindowBuilder) -> Callable[[], object]:
    def one() -> object:
        b.feed(NEW_INPUT)
        return b.window()

    return one


@pytest.mark.benchmark(group="window-incremental")
@pytest.mark.parametrize("n", SIZES)
def test_window_new_input(benchmark: BenchmarkFixture, n: int) -> None:
    b = builder(n)
    w = benchmark.pedantic(new_turn(b), rounds=ROUNDS, warmup_rounds=10)
    benchmark.extra_info.update(events=n, items=len(w.items), tokens=w.report.tokens)  # type: ignore[attr-defined]


@pytest.mark.benchmark(group="window-incremental")
@pytest.mark.parametrize("n", SIZES)
def test_window_new_turn(benchmark: BenchmarkFixture, n: int) -> None:
    b = builder(n)
    turn = conversation_events(n + 40)[n : n + 40]
    start = next(i for i, e in enumerate(turn) if isinstance(e, el.ModelOutput))
    events = [*turn[start : start + 2], NEW_INPUT]
    assert isinstance(events[1], el.ToolResults)

    def one() -> object:
        for e in events:
            b.feed(e)
        return b.window()

    benchmark.pedantic(one, rounds=ROUNDS, warmup_rounds=10)


@pytest.mark.benchmark(group="window-incremental")
def test_window_new_input_no_compactions(benchmark: BenchmarkFixture) -> None:
    b = builder(100_000, compactions=False)
    w = benchmark.pedantic(new_turn(b), rounds=ROUNDS, warmup_rounds=10)
    benchmark.extra_info.update(items=len(w.items))


def _best(fn: Callable[[], object], calls: int = 200) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def test_incremental_scales() -> None:
    small, large = new_turn(builder(1_000)), new_turn(builder(100_000))
    a = b = float("inf")
    for _ in range(7):
        a = min(a, _best(small))
        b = min(b, _best(large))
    print(
        f"\nnew-input window: 1k events {a * 1e3:.3f} ms, 100k events {b * 1e3:.3f} ms, "
        f"ratio {b / a:.2f} (goal <= 2, <= 1 ms)"
    )
    assert b <= 3 * a and b <= 2e-3


@pytest.fixture(scope="module")
def full_events() -> list[el.EventData]:
    return conversation_events(FULL_EVENTS)


@pytest.mark.benchmark(group="window-full")
@pytest.mark.parametrize("strategy", ["drop_oldest", "summary_aware"])
def test_full_window(
    benchmark: BenchmarkFixture, full_events: list[el.EventData], strategy: str
) -> None:
    messages = sum(len(e.results) if isinstance(e, el.ToolResults) else 1 for e in full_events)
    w = benchmark(lambda: context_window(full_events, budget=BUDGET, strategy=strategy))
    benchmark.extra_info.update(messages=messages, items=len(w.items))


def test_full_window_vs_trim_messages(full_events: list[el.EventData]) -> None:
    pytest.importorskip("langchain_core", reason="peer: run from .venv-bench")
    counter = get_counter("estimate")
    history = without_compactions(full_events)  # the same window on both sides
    ours = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        w = context_window(history, budget=BUDGET, counter=counter, strategy="drop_oldest")
        ours = min(ours, time.perf_counter() - t0)
    trimmed = peers.trim_messages_timed(history, counter.count_text, BUDGET)
    assert trimmed is not None and w.report is not None
    theirs, kept = trimmed
    check_same_tokens(w.report.tokens, kept, "full window vs trim_messages")
    ratio = theirs / (ours * 1e3)
    print(
        f"\nfull window over {len(history)} events (no compactions): eventlog {ours * 1e3:.1f} ms "
        f"({w.report.tokens:,} tokens), trim_messages {theirs:.1f} ms ({kept:,} tokens), "
        f"{ratio:.1f}x (goal >= 10x)"
    )
    assert ratio >= 7
