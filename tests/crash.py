"""Crash harness: SIGKILL a durably appending subprocess at random moments, then check the store.

After each kill: every acknowledged event is there, no batch is partially visible, seqs are
gapless and the hash chain verifies.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import eventlog as el

WORKER = Path(__file__).with_name("crash_worker.py")


def _run_and_kill(
    url: str, stream: str, seed: int, rng: random.Random, durability: str
) -> list[str]:
    """Start a worker, kill it with SIGKILL after a random delay, return acknowledged ids."""
    env = {**os.environ, "PYTHONPATH": str(WORKER.parent.parent)}
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), url, stream, str(seed), durability],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    # Wait for the first acknowledgement so each round kills a writer mid-stream.
    first = proc.stdout.readline()
    if not first:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise AssertionError(f"crash worker died before appending: {err}")
    time.sleep(rng.uniform(0.05, 0.6))
    proc.send_signal(signal.SIGKILL)
    # Read the rest through the same buffered reader: `readline` may have buffered lines past
    # the first (the worker runs ahead under load), and `communicate` would read the pipe's
    # file descriptor directly, skipping them and starting mid-line.
    rest = proc.stdout.read()
    proc.stdout.close()
    if proc.stderr is not None:
        proc.stderr.close()
    proc.wait(timeout=30)
    acked: list[str] = []
    for line in [first, *rest.splitlines(keepends=True)]:
        if not line.endswith(b"\n"):
            continue  # a line cut by the kill was never fully acknowledged
        _batch, _size, ids = line.decode().split()
        acked.extend(ids.split(","))
    return acked


def run_crash_rounds(url: str, rounds: int = 4, seed: int = 0, durability: str = "fsync") -> int:
    """Run kill rounds against one store URL; return how many acknowledged events were checked.

    A process crash must lose nothing acknowledged at any durability (power loss is another
    matter), so the same checks hold for a worker appending at `durability`.
    """
    rng = random.Random(seed)
    stream = "crash"
    acked: list[str] = []
    for r in range(rounds):
        acked.extend(_run_and_kill(url, stream, seed * 100 + r, rng, durability))
        with el.open(url) as store:
            events = list(store.read(stream))
            stored = {e.id for e in events}
            missing = [i for i in acked if i not in stored]
            assert not missing, f"round {r}: {len(missing)} acknowledged events lost"
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            sizes = Counter(e.meta["batch"] for e in events)
            partial = {b: n for b, n in sizes.items() if n != _size_of(events, b)}
            assert not partial, f"round {r}: partially visible batches {partial}"
            report = store.verify()
            assert report.ok, report.problems
    return len(acked)


def _size_of(events: list[el.RecordedEvent], batch: str) -> int:
    return next(int(e.meta["size"]) for e in events if e.meta["batch"] == batch)
