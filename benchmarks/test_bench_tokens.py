"""Token counters: the CJK-aware estimate vs exact o200k_base (tiktoken), on the same texts.

Run:  .venv/bin/pytest benchmarks/test_bench_tokens.py --benchmark-enable -s

The texts are every string a model would see in `conversation_events(2000)` (inputs with about
15% CJK, outputs, tool-call arguments, tool results of 200 B to 20 KB, compaction summaries).
`test_count_text[...]` / `test_count_event[...]` time each counter with pytest-benchmark and
record characters per second in `extra_info`. `test_estimate_speedup` times both counters
alternately (best of a few rounds, so a noisy neighbour hurts both alike), prints characters per
second and the ratio, and asserts the estimate is at least 2x faster (the goal is "several
times"; the gate is lower because shared machines are noisy).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

import eventlog as el
from benchmarks.workload import conversation_events
from eventlog.projections.tokens import TokenCounter, get_counter
from eventlog.text import event_text

EVENTS = 2_000
ROUNDS = 5
MIN_SPEEDUP = 2.0


@pytest.fixture(scope="module")
def events() -> list[el.EventData]:
    return conversation_events(EVENTS)


@pytest.fixture(scope="module")
def texts(events: list[el.EventData]) -> list[str]:
    return [t for t in (event_text(e) for e in events) if t]


def _count_all(counter: TokenCounter, texts: list[str]) -> Callable[[], int]:
    count = counter.count_text
    return lambda: sum(count(t) for t in texts)


def _best(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@pytest.mark.benchmark(group="tokens: count_text")
@pytest.mark.parametrize("name", ["estimate", "o200k_base", "cl100k_base"])
def test_count_text(benchmark: BenchmarkFixture, texts: list[str], name: str) -> None:
    counter = get_counter(name)
    counter.count_text("warm up")
    total = benchmark(_count_all(counter, texts))
    assert total > 0
    chars = sum(map(len, texts))
    stats = benchmark.stats
    if stats is not None:
        benchmark.extra_info["chars_per_s"] = chars / stats.stats.min
    benchmark.extra_info["chars"] = chars
    benchmark.extra_info["tokens"] = total


@pytest.mark.benchmark(group="tokens: count_event")
@pytest.mark.parametrize("name", ["estimate", "o200k_base"])
def test_count_event(benchmark: BenchmarkFixture, events: list[el.EventData], name: str) -> None:
    counter = get_counter(name)
    count = counter.count_event
    total = benchmark(lambda: sum(count(e) for e in events))
    assert total > 0


def test_estimate_speedup(texts: list[str]) -> None:
    estimate, exact = get_counter("estimate"), get_counter("o200k_base")
    run_estimate, run_exact = _count_all(estimate, texts), _count_all(exact, texts)
    run_exact()  # warm tiktoken's caches
    est_s, exact_s = float("inf"), float("inf")
    for _ in range(ROUNDS):
        est_s = min(est_s, _best(run_estimate))
        exact_s = min(exact_s, _best(run_exact))
    chars = sum(map(len, texts))
    tokens_est, tokens_exact = run_estimate(), run_exact()
    ratio = exact_s / est_s
    print(
        f"\n{len(texts)} texts, {chars / 1e6:.1f} M chars: "
        f"estimate {chars / est_s / 1e6:.1f} M chars/s, "
        f"o200k_base {chars / exact_s / 1e6:.1f} M chars/s, estimate {ratio:.1f}x faster; "
        f"tokens estimate {tokens_est} vs exact {tokens_exact} "
        f"({(tokens_est - tokens_exact) / tokens_exact:+.1%})"
    )
    assert ratio >= MIN_SPEEDUP
    assert abs(tokens_est - tokens_exact) / tokens_exact <= 0.15
