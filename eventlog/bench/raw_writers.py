"""Raw engines under concurrent durable writers: the bound for eventlog's group commit figure.

`threads` threads each append single events to their own stream, durably, as in
`figures.writers_rate`, with no eventlog code on the path. SQLite and LMDB take one writer at a
time, so the threads share commits through the simplest group commit a careful user would write
(`_Grouped`: the first thread to find no commit running commits every row queued, as one
multi-row INSERT or one write transaction, after waiting at most 1 ms for as many rows as the
last commit held). Files need no grouping: each thread writes its own file and calls
`fdatasync` itself, and the kernel runs those calls in parallel. PostgreSQL needs none either:
each thread has its own connection and autocommits its INSERTs, and the server's WAL flush
covers every commit that is waiting for it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from eventlog.bench.common import msgpack_encoder, rate_until_closed, threads_elapsed
from eventlog.bench.limits import (
    json_line,
    lmdb_env,
    postgres_connect,
    postgres_table,
    postgres_url,
    sqlite_table,
)
from eventlog.events import EventData, new_event_id

_GATHER_SECONDS = 0.001

Row = tuple[str, str, int, bytes]
"""(event id, stream, seq, encoded event)."""


class _Grouped:
    """Leader/follower group commit of rows through `commit(rows)`."""

    def __init__(self, commit: Callable[[list[Row]], None]) -> None:
        self._commit = commit
        self._cond = threading.Condition()
        self._queue: list[list[Any]] = []
        self._leading = False
        self._expected = 1

    def append(self, row: Row) -> None:
        """Return once a commit holding `row` has ended."""
        job: list[Any] = [row, False]
        cond = self._cond
        with cond:
            self._queue.append(job)
            if len(self._queue) >= self._expected:
                cond.notify_all()
            while True:
                while self._leading and not job[1]:
                    cond.wait()
                if job[1]:
                    return
                self._leading = True
                deadline = time.monotonic() + _GATHER_SECONDS
                while len(self._queue) < self._expected:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    cond.wait(remaining)
                group, self._queue = self._queue, []
                cond.release()
                try:
                    self._commit([j[0] for j in group])
                finally:
                    cond.acquire()
                for j in group:
                    j[1] = True
                self._expected = len(group) + len(self._queue)
                self._leading = False
                cond.notify_all()


def _run(
    threads: int,
    per_thread: int,
    data: Sequence[EventData],
    write: Callable[[int, int, EventData, str], None],
) -> float:
    """Events/s of `threads` threads each calling `write(thread, seq, event, id)` per event."""
    events = [data[i % len(data)] for i in range(threads * per_thread)]
    ids = [new_event_id() for _ in events]

    def work(t: int) -> None:
        for k in range(per_thread):
            i = t * per_thread + k
            write(t, k + 1, events[i], ids[i])

    return len(events) / threads_elapsed(threads, work)


def _grouped_rate(
    commit: Callable[[list[Row]], None],
    data: Sequence[EventData],
    threads: int,
    per_thread: int,
) -> float:
    """Events/s of the threads appending MessagePack rows through one `_Grouped(commit)`."""
    encode = msgpack_encoder()
    grouped = _Grouped(commit)

    def write(t: int, seq: int, event: EventData, event_id: str) -> None:
        grouped.append((event_id, f"w{t}", seq, encode(event)))

    return _run(threads, per_thread, data, write)


def sqlite_writers(path: Path, data: Sequence[EventData], threads: int, per_thread: int) -> float:
    """Events/s: autocommit multi-row INSERTs at synchronous=FULL, one per group."""
    conn = sqlite_table(path, "FULL")
    statements: dict[int, str] = {}

    def commit(rows: list[Row]) -> None:
        n = len(rows)
        sql = statements.get(n)
        if sql is None:
            values = ", ".join(["(?, ?, ?, ?)"] * n)
            sql = statements[n] = f"INSERT INTO events (id, stream, seq, data) VALUES {values}"
        conn.execute(sql, [v for row in rows for v in row])

    try:
        value = _grouped_rate(commit, data, threads, per_thread)
        return rate_until_closed(value, threads * per_thread, conn.close)
    finally:
        conn.close()


def lmdb_writers(
    path: Path, data: Sequence[EventData], threads: int, per_thread: int
) -> float | None:
    """Events/s: one synced write transaction per group (None without lmdb)."""
    env = lmdb_env(path)
    if env is None:
        return None

    def commit(rows: list[Row]) -> None:
        with env.begin(write=True) as txn:
            for _, stream, seq, blob in rows:
                txn.put(stream.encode() + b"\x00" + seq.to_bytes(8, "big"), blob)

    try:
        value = _grouped_rate(commit, data, threads, per_thread)
        return rate_until_closed(value, threads * per_thread, env.close)
    finally:
        env.close()


def file_writers(path: Path, data: Sequence[EventData], threads: int, per_thread: int) -> float:
    """Events/s: each thread appends orjson lines to its own file, `fdatasync` after each."""
    path.mkdir(parents=True, exist_ok=True)
    encode = msgspec.json.Encoder().encode
    files = [open(path / f"w{t}.jsonl", "ab") for t in range(threads)]  # noqa: SIM115

    def write(t: int, seq: int, event: EventData, event_id: str) -> None:
        f = files[t]
        f.write(json_line(seq - 1, event_id, event, encode))
        f.flush()
        os.fdatasync(f.fileno())

    def close() -> None:
        for f in files:
            f.close()

    try:
        value = _run(threads, per_thread, data, write)
        return rate_until_closed(value, threads * per_thread, close)
    finally:
        close()


def postgres_writers(
    path: Path, data: Sequence[EventData], threads: int, per_thread: int, url: str | None = None
) -> float | None:
    """Events/s: each thread autocommits single-row INSERTs on its own connection.

    None without a server. `path` is not used: the table is in the benchmark database.
    """
    url = url or postgres_url()
    admin = postgres_connect(url)
    if admin is None:
        return None
    table = postgres_table(admin, "writers")
    conns = [postgres_connect(url) for _ in range(threads)]
    encode = msgpack_encoder()
    sql = f"INSERT INTO {table} (id, stream, seq, data) VALUES (%s, %s, %s, %s)"

    def write(t: int, seq: int, event: EventData, event_id: str) -> None:
        conns[t].execute(sql, (event_id, f"w{t}", seq, encode(event)))

    try:
        if any(c is None for c in conns):
            return None
        return _run(threads, per_thread, data, write)
    finally:
        for conn in conns:
            if conn is not None:
                conn.close()
        admin.execute(f"DROP TABLE IF EXISTS {table}")
        admin.close()
