"""LMDB backend vs raw `lmdb` on the same events, in the same run; storage with compression
(issue 5 goals).

Run:  .venv/bin/pytest benchmarks/test_bench_lmdb.py --benchmark-enable -s

Each test measures eventlog and the raw baseline alternately (best of a few rounds, so a noisy
neighbour hurts both alike), prints the rates and their ratio, and records them in the benchmark's
`extra_info` (kept by `--benchmark-json`). The raw baseline is what a careful user would write by
hand (`eventlog.bench.limits`, the same the `eventlog bench` runner uses): one LMDB environment
with fully synced commits, keys stream + big-endian seq, each event's payload encoded with one
msgspec MessagePack encoder inside the timed loop.

Goals: 100-event batches at durability=fsync >= 0.8x raw puts of 100 per transaction with sync
on; replay of a 10k-event stream, decoded, >= 0.8x a raw cursor range scan + typed decode.
Storage: bytes per event with no compression, zstd, and zstd + a dictionary trained on another
conversation of the same workload. The figures are printed, not asserted: timing on a shared
machine is too noisy for a pass/fail gate.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lmdb
import msgspec

import eventlog as el
from benchmarks.common import alternate, best, event_union, replay_rate, report
from eventlog.backends.lmdb import LMDBBackend
from eventlog.bench import figures, limits
from eventlog.bench.workload import conversation_events
from eventlog.compression import train_dictionary

BATCH_EVENTS = 5_000
REPLAY_EVENTS = 10_000
ROUNDS = 3
_U64 = struct.Struct(">Q")
_MAP = 1 << 30


def _url(path: Path, query: str = "") -> str:
    return f"lmdb://{path}" + (f"?{query}" if query else "")


# -- appends ------------------------------------------------------------------------------------


def test_batch_appends_vs_raw(
    benchmark: Any, workload: list[el.EventData], fresh_path: Callable[[], Path]
) -> None:
    data = workload[:BATCH_EVENTS]
    ours = raw = 0.0
    for _ in range(ROUNDS):
        raw = max(raw, limits.lmdb_append(fresh_path(), data, 100) or 0.0)
        ours = max(ours, figures.append_rate("lmdb", fresh_path(), data, 100, "fsync"))
    benchmark.pedantic(
        lambda: figures.append_rate("lmdb", fresh_path(), data, 100, "fsync"),
        rounds=1,
        iterations=1,
    )
    report(benchmark, "100-event batches, durability=fsync", ours, raw, 0.8, "raw lmdb")
    batch = best(lambda: figures.append_rate("lmdb", fresh_path(), data, 100, "batch"), ROUNDS)
    print(f"  same at durability=batch (no meta-page flush): {batch:,.0f}/s")
    benchmark.extra_info["batch_level_per_s"] = batch


# -- replay -------------------------------------------------------------------------------------


def test_replay_vs_raw(
    benchmark: Any, workload: list[el.EventData], fresh_path: Callable[[], Path]
) -> None:
    ours_path, raw_path = fresh_path(), fresh_path()
    events = [el.Event(data=d) for d in workload]
    with el.open(_url(ours_path), durability="none") as store:
        for i in range(0, len(events), 1000):
            store.append("s", events[i : i + 1000])
    env = lmdb.open(str(raw_path), map_size=_MAP, max_dbs=2)
    db = env.open_db(b"events")
    encode = msgspec.msgpack.Encoder().encode
    prefix = b"s\x00\x01"
    with env.begin(write=True, db=db) as txn:
        for i, e in enumerate(events):
            txn.put(prefix + _U64.pack(i + 1), encode(e.data))
    typed = msgspec.msgpack.Decoder(event_union()).decode
    lo, hi = prefix + _U64.pack(1), prefix + _U64.pack(2**64 - 1)

    def raw_replay() -> float:
        t0 = time.perf_counter()
        out = []
        with env.begin(db=db) as txn:
            cur = txn.cursor()
            cur.set_range(lo)
            for k, v in cur:
                if k > hi:
                    break
                out.append(typed(v))
        assert len(out) == len(events)
        return len(out) / (time.perf_counter() - t0)

    with el.open(_url(ours_path)) as store:
        our_replay = replay_rate(store, "s", len(events))
        ours, raw = alternate(raw_replay, our_replay, ROUNDS + 2)
        benchmark.pedantic(our_replay, rounds=3, iterations=1)
    env.close()
    report(
        benchmark, f"replay of a {REPLAY_EVENTS}-event stream, decoded", ours, raw, 0.8, "raw lmdb"
    )


# -- storage ------------------------------------------------------------------------------------


def _used_bytes(store: el.Store) -> int:
    """Bytes of the LMDB file in use (pages up to the last one written)."""
    backend = store.backend
    assert isinstance(backend, LMDBBackend)
    info, stat = backend.env.info(), backend.env.stat()
    return int((info["last_pgno"] + 1) * stat["psize"])


def test_storage_bytes_per_event(
    benchmark: Any, workload: list[el.EventData], fresh_path: Callable[[], Path]
) -> None:
    encode = msgspec.msgpack.Encoder().encode
    sizes = [len(encode(d)) for d in workload]
    small = [i for i, n in enumerate(sizes) if n < 1024]
    results: dict[str, dict[str, float]] = {}

    def measure(label: str, query: str, train_on: list[el.EventData] | None) -> None:
        with el.open(_url(fresh_path(), query), durability="none") as store:
            if train_on is not None:
                store.append("training", train_on)
                train_dictionary(store)
                base = _used_bytes(store)
            else:
                base = _used_bytes(store)
            for i in range(0, len(workload), 1000):
                store.append("s", workload[i : i + 1000])
            stored = [len(r.data) for r in store.backend.read("s", 1, None)]
            file_per_event = (_used_bytes(store) - base) / len(workload)
        payload = sum(stored) / len(stored)
        small_ratio = sum(sizes[i] for i in small) / sum(stored[i] for i in small)
        results[label] = {
            "payload_bytes": payload,
            "file_bytes": file_per_event,
            "ratio": sum(sizes) / sum(stored),
            "small_ratio": small_ratio,
        }

    benchmark.pedantic(lambda: measure("none", "", None), rounds=1, iterations=1)
    measure("zstd", "compression=zstd", None)
    measure("zstd+dict", "compression=zstd", conversation_events(3000, seed=1))
    print(
        f"\nstorage on the benchmark conversation ({len(workload)} events, "
        f"{sum(sizes) / len(sizes):,.0f} B msgpack each, {len(small)} under 1 KB):"
    )
    for label, r in results.items():
        print(
            f"  {label:10} payload {r['payload_bytes']:7,.0f} B/event "
            f"(x{r['ratio']:.2f}; events < 1 KB x{r['small_ratio']:.2f}), "
            f"LMDB file {r['file_bytes']:7,.0f} B/event"
        )
    benchmark.extra_info["storage"] = results
