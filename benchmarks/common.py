"""Helpers shared by the per-backend pytest-benchmark files: rates, alternation, the report."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import eventlog as el
from eventlog.events import registered_event_types


def best(fn: Callable[[], float], rounds: int) -> float:
    """The best events/s of a few rounds (fn returns its own rate)."""
    return max(fn() for _ in range(rounds))


def report(
    benchmark: Any, name: str, ours: float, raw: float, goal: float, baseline: str = "baseline"
) -> None:
    """Print eventlog vs its baseline with the goal's verdict; keep both in extra_info."""
    ratio = ours / raw
    verdict = "ok" if ratio >= goal else "MISSED"
    print(
        f"\n{name}: eventlog {ours:,.0f}/s, {baseline} {raw:,.0f}/s, "
        f"ratio {ratio:.2f} (goal >= {goal}) {verdict}"
    )
    benchmark.extra_info.update(
        {"eventlog_per_s": ours, "baseline_per_s": raw, "ratio": ratio, "goal": goal}
    )


def event_union(types: tuple[type[el.EventData], ...] | None = None) -> Any:
    """The union of event kinds (all registered ones by default), for one typed decoder."""
    kinds = tuple(registered_event_types().values()) if types is None else types
    union: Any = kinds[0]
    for t in kinds[1:]:
        union = union | t
    return union


def replay_rate(store: el.Store, stream: str, n: int) -> Callable[[], float]:
    """A call reading the whole stream through eventlog, returning events/s."""

    def run() -> float:
        t0 = time.perf_counter()
        out = list(store.read(stream))
        assert len(out) == n
        return len(out) / (time.perf_counter() - t0)

    return run


def alternate(
    raw: Callable[[], float], ours: Callable[[], float], rounds: int
) -> tuple[float, float]:
    """Best (ours, raw) rates, measured alternately so a noisy neighbour hurts both alike."""
    best_ours = best_raw = 0.0
    for _ in range(rounds):
        best_raw = max(best_raw, raw())
        best_ours = max(best_ours, ours())
    return best_ours, best_raw
