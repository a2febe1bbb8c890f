"""SQLite backend vs raw `sqlite3` on the same events, in the same run (issue 3 goals).

Run:  .venv/bin/pytest benchmarks/test_bench_sqlite.py --benchmark-enable -s

Each test measures eventlog and the raw baseline alternately (best of a few rounds, so a noisy
neighbour hurts both alike), prints the rates and their ratio, and records them in the benchmark's
`extra_info` (kept by `--benchmark-json`). The raw baseline is what a careful user would write by
hand: a WAL table `(position INTEGER PRIMARY KEY, id UNIQUE, stream, seq, data,
UNIQUE(stream, seq))`, events encoded with one msgspec MessagePack encoder.

Goals: batch >= 0.8x raw; single durable >= 0.8x raw; 8 threads >= 3x the single-writer durable
rate; replay >= 0.8x raw. The figures are printed, not asserted: timing on a shared machine is too
noisy for a pass/fail gate.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

import eventlog as el
from benchmarks.common import alternate, event_union, replay_rate, report
from eventlog.bench import figures, limits, raw_writers
from eventlog.events import registered_event_types

BATCH_EVENTS = 5_000
SINGLE_EVENTS = 600
THREADS = 8
PER_THREAD = 150
REPLAY_EVENTS = 10_000
ROUNDS = 3

_RAW_SCHEMA = """
CREATE TABLE events (
    position INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, stream TEXT NOT NULL,
    seq INTEGER NOT NULL, data BLOB NOT NULL, UNIQUE (stream, seq)
)
"""
_RAW_INSERT = "INSERT INTO events (id, stream, seq, data) VALUES (?, ?, ?, ?)"


def _url(path: Path) -> str:
    return f"sqlite:///{path}"


def _raw_db(path: Path, synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute(_RAW_SCHEMA)
    return conn


def _disk_bytes(path: Path) -> int:
    return sum(
        os.path.getsize(f"{path}{suffix}")
        for suffix in ("", "-wal")
        if os.path.exists(f"{path}{suffix}")
    )


# -- appends ------------------------------------------------------------------------------------


def test_batch_appends_vs_raw(
    benchmark: Any, workload: list[el.EventData], fresh_path: Callable[[], Path]
) -> None:
    data = workload[:BATCH_EVENTS]
    ours = raw = 0.0
    for _ in range(ROUNDS):
        raw = max(raw, limits.sqlite_append(fresh_path(), data, 100, "NORMAL"))
        ours = max(ours, figures.append_rate("sqlite", fresh_path(), data, 100, "batch"))
    benchmark.pedantic(
        lambda: figures.append_rate("sqlite", fresh_path(), data, 100, "batch"),
        rounds=1,
        iterations=1,
    )
    report(benchmark, "100-event batches, durability=batch", ours, raw, 0.8)


def test_single_durable_appends_vs_raw(
    benchmark: Any, workload: list[el.EventData], fresh_path: Callable[[], Path]
) -> None:
    data = workload[:SINGLE_EVENTS]
    ours = raw = 0.0
    for _ in range(ROUNDS):
        raw = max(raw, limits.sqlite_append(fresh_path(), data, 1, "FULL"))
        ours = max(ours, figures.append_rate("sqlite", fresh_path(), data, 1, "fsync"))
    benchmark.pedantic(
        lambda: figures.append_rate("sqlite", fresh_path(), data, 1, "fsync"),
        rounds=1,
        iterations=1,
    )
    report(benchmark, "single durable appends (fsync)", ours, raw, 0.8)


def test_group_commit_8_threads_vs_single_writer(
    benchmark: Any, workload: list[el.EventData], fresh_path: Callable[[], Path]
) -> None:
    data = workload[:SINGLE_EVENTS]
    single = threaded = 0.0
    commits: list[tuple[int, int]] = []

    def eight_writers() -> float:
        return figures.writers_rate("sqlite", fresh_path(), data, THREADS, PER_THREAD, commits)

    raw_threaded = 0.0
    for _ in range(ROUNDS):
        single = max(single, figures.append_rate("sqlite", fresh_path(), data, 1, "fsync"))
        threaded = max(threaded, eight_writers())
        raw_threaded = max(
            raw_threaded, raw_writers.sqlite_writers(fresh_path(), data, THREADS, PER_THREAD)
        )
    benchmark.pedantic(eight_writers, rounds=1, iterations=1)
    stats = dict(zip(("commits", "jobs"), commits[-1], strict=True))
    print(f"\ngroup commit: {stats['jobs']} appends in {stats['commits']} commits")
    print(
        f"raw sqlite3, {THREADS} threads sharing multi-row INSERTs: {raw_threaded:,.0f}/s; "
        f"eventlog {threaded / raw_threaded:.2f}x that"
    )
    benchmark.extra_info["commits"] = stats
    benchmark.extra_info["raw_threads_rate"] = raw_threaded
    report(benchmark, f"{THREADS} threads durable vs one writer durable", threaded, single, 3.0)


# -- replay and size ----------------------------------------------------------------------------


def test_replay_vs_raw(
    benchmark: Any, workload: list[el.EventData], fresh_path: Callable[[], Path]
) -> None:
    ours_path, raw_path = fresh_path(), fresh_path()
    events = [el.Event(data=d) for d in workload]
    with el.open(_url(ours_path), durability="none") as store:
        for i in range(0, len(events), 1000):
            store.append("s", events[i : i + 1000])
    conn = _raw_db(raw_path, "OFF")
    encode = msgspec.msgpack.Encoder().encode
    conn.execute("BEGIN")
    conn.executemany(
        _RAW_INSERT, [(e.id, "s", i + 1, encode(e.data)) for i, e in enumerate(events)]
    )
    conn.execute("COMMIT")
    typed = msgspec.msgpack.Decoder(event_union(tuple(registered_event_types().values()))).decode

    def raw_replay() -> float:
        t0 = time.perf_counter()
        rows = conn.execute("SELECT data FROM events WHERE stream = ? ORDER BY seq", ("s",))
        out = [typed(r[0]) for r in rows]
        assert len(out) == len(events)
        return len(out) / (time.perf_counter() - t0)

    with el.open(_url(ours_path)) as store:
        our_replay = replay_rate(store, "s", len(events))
        ours, raw = alternate(raw_replay, our_replay, ROUNDS + 2)
        benchmark.pedantic(our_replay, rounds=3, iterations=1)
    conn.close()
    report(benchmark, f"replay of a {REPLAY_EVENTS}-event stream", ours, raw, 0.8)
    ours_size = _disk_bytes(ours_path) / len(events)
    raw_size = _disk_bytes(raw_path) / len(events)
    payload = sum(len(encode(e.data)) for e in events) / len(events)
    print(
        f"bytes on disk per event: eventlog {ours_size:,.0f}, baseline {raw_size:,.0f}, "
        f"payload {payload:,.0f}"
    )
    benchmark.extra_info["bytes_per_event"] = {
        "eventlog": ours_size,
        "baseline": raw_size,
        "payload": payload,
    }
