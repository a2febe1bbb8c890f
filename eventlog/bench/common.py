"""Shared pieces of the benchmark suite: sizes, figures, timing and disk helpers."""

from __future__ import annotations

import functools
import importlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec

from eventlog.events import EventData, registered_event_types
from eventlog.stats import allocated_bytes


@dataclass(frozen=True)
class Sizes:
    """How much work each figure does (events per measurement, rounds per figure)."""

    name: str
    batch_events: int
    """Events appended per batch-append measurement."""
    single_events: int
    """Events appended one per durable append."""
    writer_events: int
    """Events per writer thread in the concurrent-writers figure."""
    read_events: int
    """Events in the stream read and replayed."""
    last_n_calls: int
    """Calls timed for the last-N figure."""
    rounds: int
    """Rounds per figure; the best is kept (eventlog and its limit alternate)."""
    growth_messages: int
    """History length the peers' growth curves (LangGraph, OpenAI session) go up to."""
    growth_points: tuple[int, ...]
    """History lengths (messages) where size and latency are sampled."""


FULL = Sizes("full", 5_000, 500, 150, 10_000, 2_000, 3, 2_000, (100, 250, 500, 1000, 1500, 2000))
QUICK = Sizes("quick", 2_000, 100, 40, 10_000, 500, 2, 400, (100, 200, 300, 400))
TINY = Sizes("tiny", 200, 20, 5, 300, 20, 1, 0, ())
SIZES = {s.name: s for s in (FULL, QUICK, TINY)}

THREADS = 8
LAST_N = 50


@dataclass
class Figure:
    """One row of the table: eventlog's value, its limit and the peers', with the goals."""

    key: str
    """Stable id, e.g. ``append.batch100.sqlite``."""
    group: str
    """append | read | replay | storage | memory | window | render | peers | limit."""
    label: str
    unit: str
    """events/s, ms, us, B/event, MiB, MB."""
    higher_is_better: bool
    value: float | None = None
    """eventlog's figure (None: not measured, see `note`)."""
    limit: float | None = None
    limit_label: str = ""
    goal: str = ""
    """Goal on value/limit, e.g. ``>= 0.8`` or ``<= 0.6`` (empty: none)."""
    value_goal: str = ""
    """Goal on the value itself, in its unit, e.g. ``<= 1`` (ms) (empty: none)."""
    peers: dict[str, float] = field(default_factory=dict)
    peer_goals: dict[str, str] = field(default_factory=dict)
    """Goals on value/peer, by peer name (``best``: the best peer), e.g. ``{"best": ">= 1.2"}``."""
    note: str = ""

    @property
    def ratio(self) -> float | None:
        """The ratio eventlog / limit."""
        return _ratio(self.value, self.limit)

    def peer_ratio(self, peer: str) -> float | None:
        """The ratio eventlog / peer."""
        return _ratio(self.value, self.peers.get(peer))

    def best_peer(self) -> str | None:
        """The peer with the best figure (highest rate, lowest latency or size)."""
        if not self.peers:
            return None
        pick = max if self.higher_is_better else min
        return pick(self.peers, key=lambda p: self.peers[p])

    def verdicts(self) -> list[tuple[str, bool]]:
        """(goal text, met) for each goal this figure carries and could check."""
        out = []
        if self.goal and self.ratio is not None:
            out.append((f"x limit {self.goal}", check_goal(self.ratio, self.goal)))
        if self.value_goal and self.value is not None:
            out.append((f"{self.value_goal} {self.unit}", check_goal(self.value, self.value_goal)))
        for peer, goal in self.peer_goals.items():
            name = self.best_peer() if peer == "best" else peer
            ratio = self.peer_ratio(name) if name is not None else None
            if ratio is not None:
                out.append((f"x {name} {goal}", check_goal(ratio, goal)))
        return out

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict with the ratios and verdicts."""
        return {
            "key": self.key,
            "group": self.group,
            "label": self.label,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "value": self.value,
            "limit": self.limit,
            "limit_label": self.limit_label,
            "ratio": self.ratio,
            "goal": self.goal,
            "value_goal": self.value_goal,
            "peers": dict(self.peers),
            "peer_ratios": {p: self.peer_ratio(p) for p in self.peers},
            "peer_goals": dict(self.peer_goals),
            "goals": [{"goal": g, "met": met} for g, met in self.verdicts()],
            "note": self.note,
        }


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def check_goal(ratio: float, goal: str) -> bool:
    """Whether a ratio meets a goal such as ``>= 0.8`` or ``<= 0.6``."""
    op, _, number = goal.partition(" ")
    bound = float(number)
    return ratio >= bound if op == ">=" else ratio <= bound


WINDOW_TOKENS_TOLERANCE = 0.1
"""How far apart (relative) the tokens of two windows compared with each other may be."""


def check_same_tokens(ours: int, theirs: int, what: str) -> None:
    """Raise unless two windows hold about the same tokens (within `WINDOW_TOKENS_TOLERANCE`).

    A timing of two window builders means nothing if one of them kept much less.
    """
    if abs(ours - theirs) > WINDOW_TOKENS_TOLERANCE * max(ours, theirs, 1):
        raise RuntimeError(
            f"{what}: the windows differ, eventlog {ours:,} tokens against {theirs:,}: "
            "the figure would compare unlike work"
        )


# -- timing --------------------------------------------------------------------------------------


def rate(n: int, fn: Callable[[], object]) -> float:
    """Rate: n / the seconds fn() took."""
    t0 = time.perf_counter()
    fn()
    return n / (time.perf_counter() - t0)


def best_of(rounds: int, *fns: Callable[[], float]) -> list[float]:
    """Run the measurements alternately `rounds` times; the best (highest) result of each.

    Alternating means a noisy neighbour hurts every contender alike.
    """
    best = [0.0] * len(fns)
    for _ in range(max(1, rounds)):
        for i, fn in enumerate(fns):
            best[i] = max(best[i], fn())
    return best


def rate_until_closed(rate: float, n: int, close: Callable[[], object]) -> float:
    """`rate` (events/s over `n` events) with the time `close()` takes added to its clock.

    Appends are timed until the store is closed, so work a store defers (SQLite's final WAL
    checkpoint) is counted on every side alike.
    """
    t0 = time.perf_counter()
    close()
    return n / (n / rate + time.perf_counter() - t0)


def per_call_us(calls: int, fn: Callable[[], object]) -> float:
    """Median-free mean microseconds per call over `calls` calls (after one warm-up call)."""
    fn()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


# -- disk ----------------------------------------------------------------------------------------


def sqlite_data_bytes(path: Path) -> int:
    """Bytes of an SQLite database's pages (page_count x page_size), read through its WAL.

    The file's size once the WAL is checkpointed. The files of an open WAL database also hold
    the WAL's high-water mark, which follows when the last checkpoint ran, not the data.
    """
    conn = sqlite3.connect(path)
    try:
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        (size,) = conn.execute("PRAGMA page_size").fetchone()
    finally:
        conn.close()
    return int(pages) * int(size)


def disk_bytes(path: Path) -> int:
    """Bytes allocated on disk by a file (and its -wal/-shm siblings) or a directory's files."""
    if path.is_dir():
        return allocated_bytes(path)
    return sum(allocated_bytes(p) for p in path.parent.glob(path.name + "*") if p.is_file())


def file_bytes(path: Path) -> int:
    """Apparent size of a file (and its -wal/-shm siblings) or of every file under a directory."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


# -- codecs --------------------------------------------------------------------------------------


@functools.cache
def event_union() -> Any:
    """The tagged union of every registered event type (for typed raw decoders)."""
    types = tuple(registered_event_types().values())
    union: Any = types[0]
    for t in types[1:]:
        union = union | t
    return union


def msgpack_encoder() -> Callable[[EventData], bytes]:
    """One msgspec MessagePack encoder's encode."""
    return msgspec.msgpack.Encoder().encode


def msgpack_decoder() -> Callable[[bytes], Any]:
    """A typed msgspec MessagePack decoder of event data."""
    return msgspec.msgpack.Decoder(event_union()).decode


def optional_module(name: str) -> ModuleType | None:
    """The module if it imports, else None (peers and plotting are optional)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def threads_elapsed(threads: int, work: Callable[[int], None]) -> float:
    """Seconds for `threads` threads to run `work(t)` each, from a common start to the last join.

    The first error a thread raised is raised here once all have ended.
    """
    barrier = threading.Barrier(threads + 1)
    errors: list[BaseException] = []

    def run(t: int) -> None:
        barrier.wait()
        try:
            work(t)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    pool = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    barrier.wait()
    t0 = time.perf_counter()
    for th in pool:
        th.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return elapsed
