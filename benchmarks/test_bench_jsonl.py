"""JSONL backend vs raw JSON-lines file writes and reads on the same events, in the same run.

Run:  .venv/bin/pytest benchmarks/test_bench_jsonl.py --benchmark-enable -s

Each test measures eventlog and the raw baseline alternately (best of a few rounds, so a noisy
neighbour hurts both alike), prints the rates and their ratio, and records them in the
benchmark's `extra_info` (kept by `--benchmark-json`). The raw baseline is what a careful user
would write by hand: one line per event, `{"seq", "id", "data"}` built with orjson around the
payload encoded by one msgspec JSON encoder, appended to one file, `fdatasync` every 100 events
(the JSONL backend syncs with `fdatasync` too); replay iterates the file's lines and decodes each
with one typed msgspec decoder.

Goals (issue 4): 100-event batches with one sync per batch >= 0.7x raw; replay of a 10k-event
stream, decoded, >= 0.7x raw. The figures are printed, not asserted: timing on a shared machine
is too noisy for a pass/fail gate.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import orjson

import eventlog as el
from benchmarks.common import alternate, event_union, replay_rate, report
from eventlog.bench import figures, limits

BATCH = 100
APPEND_EVENTS = 5_000
REPLAY_EVENTS = 10_000
ROUNDS = 3


# -- appends -------------------------------------------------------------------------------------


def _raw_lines(events: list[el.Event]) -> list[bytes]:
    encode = msgspec.json.Encoder().encode
    return [
        orjson.dumps({"seq": j + 1, "id": e.id, "data": orjson.Fragment(encode(e.data))})
        for j, e in enumerate(events)
    ]


def test_batch_appends_vs_raw(
    benchmark: Any, workload: list[el.EventData], fresh_path: Callable[[], Path]
) -> None:
    data = workload[:APPEND_EVENTS]

    def ours_run() -> float:
        return figures.append_rate("jsonl", fresh_path(), data, BATCH, "fsync")

    ours = raw = 0.0
    for _ in range(ROUNDS):
        raw = max(raw, limits.file_append(fresh_path(), data, BATCH))
        ours = max(ours, ours_run())
    benchmark.pedantic(ours_run, rounds=1, iterations=1)
    report(benchmark, f"{BATCH}-event batches, one fdatasync each", ours, raw, 0.7)


# -- replay --------------------------------------------------------------------------------------


def test_replay_vs_raw(
    benchmark: Any, workload: list[el.EventData], fresh_path: Callable[[], Path]
) -> None:
    ours_path, raw_path = fresh_path(), fresh_path()
    events = [el.Event(data=d) for d in workload]
    with el.open(f"jsonl://{ours_path}", durability="none") as store:
        for i in range(0, len(events), 1000):
            store.append("s", events[i : i + 1000])
    raw_path.mkdir()
    (raw_path / "s.jsonl").write_bytes(b"".join(line + b"\n" for line in _raw_lines(events)))
    envelope = msgspec.defstruct("RawLine", [("seq", int), ("id", str), ("data", event_union())])
    decode = msgspec.json.Decoder(envelope).decode

    def raw_replay() -> float:
        t0 = time.perf_counter()
        with open(raw_path / "s.jsonl", "rb") as f:
            out = [decode(line) for line in f]
        assert len(out) == len(events)
        return len(out) / (time.perf_counter() - t0)

    with el.open(f"jsonl://{ours_path}") as store:
        our_replay = replay_rate(store, "s", len(events))
        ours, raw = alternate(raw_replay, our_replay, ROUNDS + 2)
        benchmark.pedantic(our_replay, rounds=3, iterations=1)
    report(benchmark, f"replay of a {REPLAY_EVENTS}-event stream, decoded", ours, raw, 0.7)
    size = sum(p.stat().st_size for p in ours_path.rglob("*") if p.is_file()) / len(events)
    raw_size = (raw_path / "s.jsonl").stat().st_size / len(events)
    print(f"bytes on disk per event: eventlog {size:,.0f}, raw {raw_size:,.0f}")
    benchmark.extra_info["bytes_per_event"] = {"eventlog": size, "raw": raw_size}
