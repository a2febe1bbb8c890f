"""ConversationState: full replay vs the raw decode rate, and state from a snapshot (issue 6).

Run:  .venv/bin/pytest benchmarks/test_bench_state.py --benchmark-enable -s

On the memory backend and on SQLite (when `eventlog/backends/sqlite.py` exists), with one
100k-event conversation from `benchmarks/workload.py`:

- full replay into `ConversationState` (events/s), and its ratio to the raw decode rate of the
  same backend in the same run (`store.read` over the whole stream, every event decoded and
  dropped). Goal: >= 0.5x. Both are measured alternately after one warm-up, best of 5 rounds,
  in wall time and in process CPU time (the CPU ratio is the steadier one on a shared machine);
- the state at the last seq with a snapshot 100 events back (restore + fold the tail), with a
  fresh runner each time. Goal: < 20 ms. Also with the events of the newest 50 entries read (what
  a context window touches first).

Figures are printed and kept in `extra_info` (`--benchmark-json`); only correctness is asserted,
since timing on a shared 2-core machine is too noisy for a pass/fail gate.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import eventlog as el
from benchmarks.workload import conversation_events
from eventlog.projections import ConversationProjection, ConversationState, Runner

N = 100_000
SNAPSHOT_BACK = 100
ROUNDS = 5

BACKENDS = ["memory"] + (["sqlite"] if importlib.util.find_spec("eventlog.backends.sqlite") else [])


@pytest.fixture(scope="module", params=BACKENDS)
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[el.Store]:
    name: str = request.param
    if name == "memory":
        url = "memory://bench"
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('state')}/state.db?durability=none"
    events = conversation_events(N, seed=6)
    with el.open(url) as s:
        for i in range(0, N, 1000):
            s.append("conv", events[i : i + 1000])
        yield s


def _timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, value


def test_full_replay_vs_raw_decode(benchmark: Any, store: el.Store) -> None:
    def raw() -> int:
        return sum(1 for _ in store.read("conv"))

    runner = Runner(store, ConversationProjection(), snapshot_every=None)

    def replay() -> ConversationState:
        return runner.replay("conv")

    raw()  # warm-up: first-touch allocation of the interpreter's memory arenas
    replay()
    raw_wall, raw_cpu, rep_wall, rep_cpu = [], [], [], []
    for _ in range(ROUNDS):
        w, c, n = _timed(raw)
        assert n == N
        raw_wall.append(w)
        raw_cpu.append(c)
        w, c, state = _timed(replay)
        assert state.seq == N
        rep_wall.append(w)
        rep_cpu.append(c)
        del state
    state = benchmark.pedantic(replay, rounds=1, iterations=1)
    assert state.seq == N and state.open_calls == ()
    figures = {
        "backend": type(store.backend).__name__,
        "raw_decode_events_per_s": N / min(raw_wall),
        "replay_events_per_s": N / min(rep_wall),
        "ratio_wall": min(raw_wall) / min(rep_wall),
        "raw_decode_events_per_s_cpu": N / min(raw_cpu),
        "replay_events_per_s_cpu": N / min(rep_cpu),
        "ratio_cpu": min(raw_cpu) / min(rep_cpu),
    }
    benchmark.extra_info.update(figures)
    print(
        f"\n{figures['backend']}: raw decode {figures['raw_decode_events_per_s']:,.0f} ev/s, "
        f"replay {figures['replay_events_per_s']:,.0f} ev/s, ratio {figures['ratio_wall']:.2f} "
        f"(CPU time: {figures['raw_decode_events_per_s_cpu']:,.0f} vs "
        f"{figures['replay_events_per_s_cpu']:,.0f} ev/s, ratio {figures['ratio_cpu']:.2f}; "
        "goal >= 0.5)"
    )


def test_state_at_end_from_snapshot_100_back(benchmark: Any, store: el.Store) -> None:
    seed = Runner(store, ConversationProjection(), snapshot_every=None)
    assert seed.save_snapshot("conv", N - SNAPSHOT_BACK) == N - SNAPSHOT_BACK

    def state_at_end() -> ConversationState:
        runner = Runner(store, ConversationProjection(), snapshot_every=None)
        return runner.state("conv")

    def with_recent_events() -> ConversationState:
        state = state_at_end()
        for entry in state.messages[-50:]:
            _ = entry.event
        return state

    best_plain = min(_timed(state_at_end)[0] for _ in range(5))
    best_recent = min(_timed(with_recent_events)[0] for _ in range(5))
    state = benchmark(state_at_end)
    assert state.seq == N
    restored = Runner(store, ConversationProjection(), snapshot_every=None).restore("conv", N)
    assert restored[1] == N - SNAPSHOT_BACK
    assert state == seed.replay("conv")
    benchmark.extra_info.update(
        {
            "backend": type(store.backend).__name__,
            "best_ms": best_plain * 1e3,
            "best_ms_with_50_recent_events": best_recent * 1e3,
            "snapshot_bytes": len(
                (store.backend.load_snapshot("conv", "conversation", 1, None) or (0, b""))[1]
            ),
        }
    )
    print(
        f"\n{type(store.backend).__name__}: state at seq {N} from a snapshot at "
        f"{N - SNAPSHOT_BACK}: best {best_plain * 1e3:.1f} ms "
        f"({best_recent * 1e3:.1f} ms reading the newest 50 entries' events); "
        f"snapshot {benchmark.extra_info['snapshot_bytes']:,} bytes; goal < 20 ms"
    )
