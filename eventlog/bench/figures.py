"""eventlog's own figures: appends, reads, replay, storage and memory, on any backend.

Every function takes the events to use and a fresh path, and returns one number (events/s,
microseconds, bytes per event or MiB); the runner pairs each with its limit and the peers'.
"""

from __future__ import annotations

import os
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec

import eventlog as el
from eventlog.bench.common import (
    disk_bytes,
    optional_module,
    rate,
    sqlite_data_bytes,
    threads_elapsed,
)
from eventlog.bench.limits import postgres_url
from eventlog.compression import train_dictionary
from eventlog.events import EventData
from eventlog.projections.runner import Runner
from eventlog.projections.state import ConversationProjection
from eventlog.projections.window_types import Window, WindowItem

FILE_BACKENDS = ("sqlite", "jsonl", "lmdb")
"""Backends that keep data on disk (durable appends and storage figures apply)."""


def store_url(backend: str, path: Path, **query: str) -> str:
    """The URL of a store of `backend` at `path`.

    `path` is ignored for memory; for PostgreSQL it names a schema of the database the raw
    PostgreSQL limit uses.
    """
    if backend == "memory":
        base = "memory://"
    elif backend.startswith("postgres"):  # a schema of the benchmark database
        url = postgres_url()
        base = f"{url}{'&' if '?' in url else '?'}schema={postgres_schema(path)}"
        return base + "".join(f"&{k}={v}" for k, v in query.items())
    elif backend == "sqlite":
        base = f"sqlite:///{path}.db"
    else:
        base = f"{backend}:///{path}"
    if query:
        base += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    return base


def postgres_schema(path: Path) -> str:
    """The schema of the benchmark's PostgreSQL store for `path` (unique per process and path)."""
    name = "".join(c if c.isalnum() else "_" for c in path.name.lower())
    return f"eventlog_bench_{os.getpid()}_{name}"[:63]


def store_path(backend: str, path: Path) -> Path:
    """The file or directory a store of `backend` at `path` lives in."""
    return path.with_name(path.name + ".db") if backend == "sqlite" else path


def backend_available(backend: str) -> bool:
    """Whether the backend can be opened here (its optional dependency installed)."""
    needs = {"sqlite": "sqlite3", "lmdb": "lmdb", "jsonl": "orjson", "memory": "msgspec"}
    if backend in ("postgres", "postgresql"):
        return optional_module("eventlog.backends.postgres") is not None
    return backend in needs and optional_module(needs[backend]) is not None


# -- appends -------------------------------------------------------------------------------------


def append_rate(
    backend: str, path: Path, data: Sequence[EventData], batch: int, durability: str
) -> float:
    """Events/s appending `data` to one stream in batches of `batch` at `durability`.

    The clock stops once the store is closed, so the checkpoints and syncs a backend leaves for
    later (SQLite's final WAL checkpoint) are part of the work, as in the raw limits.
    """
    events = [el.Event(data=d) for d in data]
    with el.open(store_url(backend, path), durability=el.Durability(durability)) as store:
        append = store.append
        t0 = time.perf_counter()
        for i in range(0, len(events), batch):
            append("s", events[i : i + batch])
        store.close()
        return len(events) / (time.perf_counter() - t0)


def writers_rate(
    backend: str,
    path: Path,
    data: Sequence[EventData],
    threads: int,
    per_thread: int,
    commits: list[tuple[int, int]] | None = None,
) -> float:
    """Events/s of `threads` threads each appending `per_thread` single events durably.

    Each thread writes its own stream; the clock runs from a common start to the last join,
    plus the store's close (as `append_rate`, the figure's limit, counts it).
    When the backend counts its group commits, (commits, appends) is added to `commits`.
    """
    events = [el.Event(data=data[i % len(data)]) for i in range(threads * per_thread)]
    with el.open(store_url(backend, path), durability="fsync") as store:

        def work(t: int) -> None:
            for ev in events[t * per_thread : (t + 1) * per_thread]:
                store.append(f"writer{t}", [ev])

        elapsed = threads_elapsed(threads, work)
        stats = getattr(store.backend, "stats", None)
        if commits is not None and stats is not None:
            counts = stats()
            commits.append((counts["commits"], counts["jobs"]))
        t0 = time.perf_counter()
        store.close()
        return len(events) / (elapsed + time.perf_counter() - t0)


# -- reads ---------------------------------------------------------------------------------------


class Populated:
    """A store holding `data` as stream "s" (appended in batches of 1000, durability none)."""

    def __init__(self, backend: str, path: Path, data: Sequence[EventData]) -> None:
        self.n = len(data)
        events = [el.Event(data=d) for d in data]
        self.store = el.open(store_url(backend, path), durability="none")
        for i in range(0, len(events), 1000):
            self.store.append("s", events[i : i + 1000])

    def read(self) -> float:
        """Events/s reading the stream, decoded to RecordedEvents."""

        def run() -> None:
            out = list(self.store.read("s"))
            assert len(out) == self.n

        return rate(self.n, run)

    def read_all(self) -> float:
        """Events/s reading the whole store by global position."""

        def run() -> None:
            out = list(self.store.read_all())
            assert len(out) == self.n

        return rate(self.n, run)

    def last_n(self, n: int) -> Callable[[], object]:
        """One call: the newest n events of the stream."""
        read_last = self.store.read_last
        return lambda: read_last("s", n)

    def replay(self) -> Callable[[], float]:
        """A measurement: events/s replaying the stream into ConversationState."""
        runner = Runner(self.store, ConversationProjection(), snapshot_every=None)
        return lambda: rate(self.n, lambda: runner.replay("s"))

    def read_peak_mib(self) -> float:
        """Peak MiB traced while reading the stream into a list."""
        return _peak(lambda: list(self.store.read("s")))

    def replay_peak_mib(self) -> float:
        """Peak MiB traced while replaying the stream into ConversationState."""
        return _peak(self.replay())

    def close(self) -> None:
        """Close the store."""
        self.store.close()


def _peak(fn: Callable[[], object]) -> float:
    tracemalloc.start()
    try:
        result = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del result
    return peak / 2**20


# -- storage -------------------------------------------------------------------------------------


def storage_per_event(
    backend: str, path: Path, data: Sequence[EventData], mode: str
) -> float | None:
    """Bytes on disk per event for `data`, with compression `mode`: none | zstd | zstd+dict.

    The events are appended twice, as two streams; the figure is the growth the second stream
    caused, so fixed costs (schema, first pages) do not count. With ``zstd+dict``, a dictionary
    is trained on the first stream (the store's own events) before the second is written.
    """
    query = {} if mode == "none" else {"compression": "zstd"}
    if mode != "none" and optional_module("zstandard") is None:
        return None
    url = store_url(backend, path, **query)
    location = store_path(backend, path)
    with el.open(url, durability="none") as store:
        _append_all(store, "warm", data)
    before = disk_bytes(location)
    with el.open(url, durability="none") as store:
        if mode == "zstd+dict":
            train_dictionary(store)
        _append_all(store, "s", data)
    return (disk_bytes(location) - before) / len(data)


def _append_all(store: el.Store, stream: str, data: Sequence[EventData]) -> None:
    events = [el.Event(data=d) for d in data]
    for i in range(0, len(events), 1000):
        store.append(stream, events[i : i + 1000])


# -- growth (compared with LangGraph and the OpenAI session) --------------------------------------


def turn_growth(
    path: Path, turns: Sequence[Sequence[EventData]], points: Sequence[int], messages: Any
) -> tuple[list[dict[str, float]], float | None]:
    """Append a conversation turn by turn (one durable append per event) to SQLite.

    `messages(turn)` is how many chat messages a turn is (what the peers store). At each history
    length in `points` (messages), records the database's size (`sqlite_data_bytes`: its pages,
    not the WAL, as for the peers) and the latency of the turn that crossed it; also returns the
    milliseconds to read the whole conversation back.
    """
    out: list[dict[str, float]] = []
    targets = list(points)
    total = 0
    location = store_path("sqlite", path)
    with el.open(store_url("sqlite", path), durability="fsync") as store:
        for turn in turns:
            t0 = time.perf_counter()
            for d in turn:
                store.append("conversation", [d])
            elapsed = time.perf_counter() - t0
            total += messages(turn)
            while targets and total >= targets[0]:
                targets.pop(0)
                out.append(
                    {
                        "messages": total,
                        "bytes": sqlite_data_bytes(location),
                        "turn_ms": elapsed * 1e3,
                    }
                )
            if not targets:
                break
        t0 = time.perf_counter()
        list(store.read("conversation"))
        load_ms = (time.perf_counter() - t0) * 1e3
    return out, (load_ms if out else None)


# -- rendering ----------------------------------------------------------------------------------


def tail_window(data: Sequence[EventData], n: int) -> tuple[Window, Callable[[], object]]:
    """A window of the conversation's last `n` events, built by hand (no window projection).

    Returns the window and a call encoding it with msgspec (the reference a renderer is
    compared with).
    """
    start = max(2, len(data) - n)
    while start > 2 and not isinstance(data[start], el.ModelInput):
        start -= 1
    items = tuple(
        WindowItem(seq=i + 1, data=d)
        for i, d in enumerate(data)
        if i >= start and isinstance(d, el.ModelInput | el.ModelOutput | el.ToolResults)
    )
    system = data[0].text if isinstance(data[0], el.SystemInstructionSet) else None
    tools = data[1].tools if isinstance(data[1], el.ToolsetDefined) else ()
    window = Window(stream="s", seq=len(data), system=system, tools=tools, items=items)
    encode = msgspec.json.Encoder().encode
    return window, lambda: encode(window)
