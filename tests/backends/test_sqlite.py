"""The conformance suite, crash harness and SQLite-specific behaviour on file databases."""

from __future__ import annotations

import asyncio
import fcntl
import itertools
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import msgspec
import pytest

import eventlog as el
from eventlog.backends import sqlite as sqlite_backend
from eventlog.backends import sqlite_schema, sqlite_writer
from eventlog.backends.base import Conflict, Durability, ForkInfo, Record
from eventlog.backends.envelope import pack_record, unpack_record
from eventlog.backends.group_commit import Gather
from eventlog.backends.sqlite import SQLiteBackend
from eventlog.backends.sqlite_checkpoint import (
    CHECKPOINT_FRAMES,
    RESTART_FRAMES,
    WAL_CAP_FRAMES,
    Checkpointer,
)
from eventlog.errors import BackendUnavailableError
from eventlog.stats import store_stats
from tests.contract import (
    DurableContract,
    FreshURL,
    concurrent_single_appends,
    text_events,
    texts_of,
    wait_for,
)


def url_for(path: Path, **options: str) -> str:
    """A sqlite:// URL for an absolute path (four slashes), with options."""
    query = "&".join(f"{k}={v}" for k, v in options.items())
    return f"sqlite:///{path}" + (f"?{query}" if query else "")


def edit_payload(path: Path, stream: str, seq: int, edit: Callable[[bytes], bytes]) -> None:
    """Replace one event's stored payload by `edit(payload)` with a raw sqlite3 connection,
    leaving the rest of its packed record as it was."""
    with closing(sqlite3.connect(path)) as conn, conn:
        position, packed = conn.execute(
            "SELECT position, rec FROM events WHERE stream = ? AND seq = ?", (stream, seq)
        ).fetchone()
        rec = unpack_record(position, stream, packed)
        conn.execute(
            "UPDATE events SET rec = ? WHERE position = ?",
            (pack_record(msgspec.structs.replace(rec, data=edit(rec.data))), position),
        )


def raw_tamper(store: el.Store, stream: str, seq: int) -> None:
    """Flip the stored payload of one event with a separate raw sqlite3 connection."""
    backend = store.backend
    assert isinstance(backend, SQLiteBackend)
    edit_payload(backend.path, stream, seq, lambda data: data.replace(b"m", b"M", 1))


class TestSQLite(DurableContract):
    @pytest.fixture
    def fresh_url(self, tmp_path: Path) -> FreshURL:
        counter = itertools.count()
        return lambda: url_for(tmp_path / f"store{next(counter)}.db")

    def tamper(self, store: el.Store, stream: str, seq: int) -> None:
        raw_tamper(store, stream, seq)


# -- several processes -------------------------------------------------------------------------


@pytest.mark.slow
def test_multiprocess_writers_and_reader(tmp_path: Path) -> None:
    from tests.multiprocess import check_multiprocess

    counts = check_multiprocess(url_for(tmp_path / "mp.db"), writers=4, rounds=40)
    assert counts["events"] == 320


# -- group commit -------------------------------------------------------------------------------


def test_group_commit_shares_commits_and_loses_nothing(tmp_path: Path) -> None:
    n_threads, per = 8, 40
    with el.open(url_for(tmp_path / "g.db"), durability="fsync") as store:
        backend = store.backend
        assert isinstance(backend, SQLiteBackend)
        before = backend.stats()
        acked = concurrent_single_appends(store, n_threads, per)
        stats = backend.stats()
        appends = stats["jobs"] - before["jobs"]
        commits = stats["commits"] - before["commits"]
        assert appends == n_threads * per
        assert commits < appends, stats
        assert sorted(e.id for e in store.read_all()) == sorted(acked)
        assert store.verify().ok


_BASE = dict(ts=1, type="checkpoint", version=1, data=b"\x80", meta=b"", hash=bytes(32))


def _record(stream: str, seq: int, event_id: str | None = None) -> Record:
    return Record(
        event_id or el.new_event_id(), stream, seq, causation_id=None, correlation_id=None, **_BASE
    )


def _in_one_group(
    backend: SQLiteBackend, appends: dict[str, Record | list[Record]]
) -> dict[str, object]:
    """Append each record (or batch) from its own thread, in order, while the writer is held, so
    they queue up and share the next transaction; check they did (one commit), and return each
    result or error."""
    writer = backend._writer
    results: dict[str, object] = {}
    gate = threading.Event()

    def append(name: str, rec: Record | list[Record]) -> None:
        try:
            results[name] = backend.append(
                rec if isinstance(rec, list) else [rec], Durability.FSYNC
            )
        except Exception as exc:
            results[name] = exc

    holder = threading.Thread(target=writer.run, args=(lambda c: gate.wait(30), Durability.NONE))
    holder.start()
    assert wait_for(lambda: writer._leading)
    threads = [threading.Thread(target=append, args=item) for item in appends.items()]
    for queued, th in enumerate(threads, 1):
        th.start()
        assert wait_for(lambda n=queued: len(writer._queue) == n)  # queue in the given order
    commits = writer.commits
    gate.set()
    for th in [holder, *threads]:
        th.join()
    assert writer.commits == commits + 2  # the holder's group, then all of these in one
    return results


def test_a_queue_longer_than_a_group_is_committed_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With more appends queued than one group holds, each leader takes the oldest ones: every
    append lands once, with its own positions, in queue order, over several commits. A thread
    whose job is not in the group it led goes on until its own job is committed (it used to
    return None). Which thread leads after a commit is up to the scheduler: five rounds."""
    monkeypatch.setattr(sqlite_writer, "_MAX_GROUP", 3)
    for round_ in range(5):
        backend = SQLiteBackend(tmp_path / f"g{round_}.db")
        writer = backend._writer
        gate = threading.Event()
        results: dict[int, object] = {}

        def append(i: int, into: dict[int, object] = results, b: SQLiteBackend = backend) -> None:
            into[i] = b.append([_record(f"s{i}", 1)], Durability.FSYNC)

        holder = threading.Thread(
            target=writer.run, args=(lambda c, gate=gate: gate.wait(30), Durability.NONE)
        )
        holder.start()
        assert wait_for(lambda writer=writer: writer._leading)
        threads = [threading.Thread(target=append, args=(i,)) for i in range(8)]
        for queued, th in enumerate(threads, 1):
            th.start()
            assert wait_for(lambda n=queued, writer=writer: len(writer._queue) == n)
        commits = writer.commits
        gate.set()
        for th in [holder, *threads]:
            th.join(30)
        assert results == {i: [i + 1] for i in range(8)}  # positions follow the queue's order
        assert writer.commits == commits + 1 + 3  # the holder's, then groups of 3, 3 and 2
        assert [r.stream for r in backend.read_all(0, 100)] == [f"s{i}" for i in range(8)]
        backend.close()


def test_an_interrupted_leader_leaves_no_stuck_writer_and_no_stray_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KeyboardInterrupt while the leader gathers its group: the writer is not left marked as
    led (every later append would hang), and the interrupted append is never written."""
    interrupts = [KeyboardInterrupt()]

    def gather(self: Gather, queue: object) -> None:
        if interrupts:
            raise interrupts.pop()

    monkeypatch.setattr(Gather, "wait", gather)
    backend = SQLiteBackend(tmp_path / "i.db")
    with pytest.raises(KeyboardInterrupt):
        backend.append([_record("a", 1)], Durability.FSYNC)
    assert backend.append([_record("b", 1)], Durability.FSYNC) == [1]
    assert [r.stream for r in backend.read_all(0, 10)] == ["b"]
    backend.close()


def test_group_commit_conflict_fails_only_its_caller(tmp_path: Path) -> None:
    """A conflicting append inside a shared transaction rolls back alone (savepoint)."""
    backend = SQLiteBackend(tmp_path / "c.db")
    taken = el.new_event_id()
    backend.append([_record("x", 1, taken)], Durability.NONE)
    results = _in_one_group(backend, {"bad": _record("z", 1, taken), "good": _record("y", 1)})
    assert isinstance(results["bad"], Conflict) and results["bad"].kind == "id"
    assert results["good"] == [2]
    assert backend.last("y") is not None and backend.last("z") is None
    backend.close()


def test_group_commit_reruns_the_jobs_before_a_conflict(tmp_path: Path) -> None:
    """A group runs without savepoints; a conflict after good jobs rolls them back and reruns
    them, so they land once, with the positions they report."""
    backend = SQLiteBackend(tmp_path / "r.db")
    taken = el.new_event_id()
    backend.append([_record("x", 1, taken)], Durability.NONE)
    batch = [_record("y", seq) for seq in (1, 2, 3)]
    results = _in_one_group(
        backend, {"first": batch, "bad": _record("z", 1, taken), "last": _record("w", 1)}
    )
    assert results["first"] == [2, 3, 4]
    assert isinstance(results["bad"], Conflict) and results["bad"].kind == "id"
    assert results["last"] == [5]
    assert [r.id for r in backend.read("y", 1, None)] == [r.id for r in batch]
    assert [r.position for r in backend.read("y", 1, None)] == [2, 3, 4]
    assert backend.last("z") is None and backend.head_position() == 5
    backend.close()


def test_a_job_that_fills_the_disk_fails_alone_in_its_group(tmp_path: Path) -> None:
    """A full disk makes SQLite roll back the whole transaction by itself, savepoints and all.
    The job that filled it gets "disk full"; the others, undone with it, commit in a new
    transaction, once each, with the positions they report."""
    backend = SQLiteBackend(tmp_path / "full.db")
    for name in ("a", "b", "c"):
        backend.append([_record(name, 1)], Durability.NONE)
    conn = backend._writer._conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count={pages + 3}")  # room for small rows, not 200 KB
    big = Record(
        el.new_event_id(),
        "big",
        1,
        causation_id=None,
        correlation_id=None,
        **{**_BASE, "data": b"\x80" * 200_000},
    )
    results = _in_one_group(
        backend, {"a": _record("a", 2), "big": big, "b": _record("b", 2), "c": _record("c", 2)}
    )
    assert isinstance(results["big"], BackendUnavailableError), results["big"]
    assert "disk full, nothing written" in str(results["big"])
    assert (results["a"], results["b"], results["c"]) == ([4], [5], [6])
    assert backend.last("big") is None
    assert [backend.last(s).seq for s in "abc"] == [2, 2, 2]  # type: ignore[union-attr]
    assert backend.head_position() == 6
    backend.close()


def test_group_commit_shares_one_transaction_without_conflicts(tmp_path: Path) -> None:
    """Jobs of a group get consecutive positions in queue order, each append's own in a row."""
    backend = SQLiteBackend(tmp_path / "g.db")
    backend.append([_record("x", 1)], Durability.NONE)
    results = _in_one_group(
        backend, {"a": [_record("a", 1), _record("a", 2)], "b": _record("b", 1)}
    )
    assert results == {"a": [2, 3], "b": [4]}
    backend.close()


def test_group_commit_fork_seq1_fails_only_its_caller(tmp_path: Path) -> None:
    """Seq 1 of a fork is refused inside its own savepoint: the job sharing its commit lands."""
    backend = SQLiteBackend(tmp_path / "f.db")
    backend.append([_record("p", 1)], Durability.NONE)
    backend.create_fork(ForkInfo("f", "p", 1, 1))
    results = _in_one_group(backend, {"fork": _record("f", 1), "other": _record("q", 1)})
    assert isinstance(results["fork"], Conflict) and results["fork"].kind == "seq"
    assert results["other"] == [2]
    assert backend.last("f") is None and backend.last("q") is not None
    backend.append([_record("f", 2)], Durability.NONE)  # the fork's own events start at seq 2
    backend.close()


_V2_INSERT = (
    "INSERT INTO events (id, stream, seq, ts, type, version, data, meta, causation_id, "
    "correlation_id, hash, codec) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
"""How schema v1 and v2 stored an event: one column per envelope field."""
_V3_INSERT = (
    "INSERT INTO events (id, stream, seq, ts, type, env, data) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
"""How schema v3 stored an event: the envelope packed in `env`, the payload in `data`."""


ZSTD_ALWAYS = "compression=zstd&compress_min_bytes=0"


def _v3_row(r: Record) -> tuple[object, ...]:
    """A v3 row: the envelope as a MessagePack array of its ten fields, the payload beside it."""
    env = msgspec.msgpack.encode(
        [r.seq, r.id, r.ts, r.type, r.version, r.meta]
        + [r.causation_id, r.correlation_id, r.hash, r.codec]
    )
    return (r.id, r.stream, r.seq, r.ts, r.type, env, r.data)


def _old_store(path: Path, version: int) -> list[el.RecordedEvent]:
    """A store at schema `version` (1, 2 or 3) holding events written through a memory store,
    one of them compressed.

    Returns the events as the memory store reads them, which the migrated store must equal.
    """
    with el.open(f"memory://?{ZSTD_ALWAYS}") as zipped:
        zipped.append("z", text_events(1, "compressed "))
        compressed = zipped.backend.read_all(0, 1)
    assert compressed[0].codec == 1
    with el.open("memory://") as mem:
        mem.append("p", text_events(3))
        mem.append(
            "p",
            [
                el.Event(
                    data=el.ModelInput.from_text("linked"),
                    meta={"user": "u1", "n": 2},
                    causation_id="cause-1",
                    correlation_id="corr-1",
                )
            ],
        )
        mem.fork("p", "f", at_seq=2)
        mem.append("f", text_events(2, "f"))
        records = mem.backend.read_all(0, 100)
        forks = mem.backend.list_forks()
        expected = list(mem.read_all())
    records.append(msgspec.structs.replace(compressed[0], position=len(records) + 1))
    sqlite_schema._create(path, search=False, target=version)
    conn = sqlite3.connect(path, isolation_level=None)
    with conn:
        conn.executemany(
            "INSERT INTO forks (stream, parent, at_seq, ts) VALUES (?, ?, ?, ?)",
            [(f.stream, f.parent, f.at_seq, f.ts) for f in forks],
        )
        if version < 3:
            conn.executemany(
                _V2_INSERT,
                [
                    (r.id, r.stream, r.seq, r.ts, r.type, r.version, r.data, r.meta)
                    + (r.causation_id, r.correlation_id, r.hash, r.codec)
                    for r in records
                ],
            )
        else:
            conn.executemany(_V3_INSERT, [_v3_row(r) for r in records])
    conn.close()
    assert sqlite_schema.inspect(path) == (version, False)
    with el.open(f"memory://?{ZSTD_ALWAYS}") as zipped:
        zipped.append("z", text_events(1, "compressed "))  # the same text, read back
    return expected


@pytest.mark.parametrize("version", [1, 2, 3])
def test_older_store_is_migrated_and_keeps_its_events(
    tmp_path: Path, version: int, caplog: pytest.LogCaptureFixture
) -> None:
    """A v1, v2 or v3 store opens as the current schema with every event, its meta, links,
    hash and compressed payload intact, reads through both read paths, and takes new appends."""
    path = tmp_path / f"v{version}.db"
    expected = _old_store(path, version)
    count = len(expected) + 1  # and the compressed one

    with caplog.at_level("INFO", logger="eventlog.backends.sqlite"), el.open(url_for(path)):
        pass
    if version < 3:
        assert f"packing the envelopes of {count} events" in caplog.text
    assert f"packing the records of {count} events (schema v4)" in caplog.text
    assert f"packed {count} records in" in caplog.text
    with el.open(url_for(path)) as store:
        events = list(store.read_all())
        assert events[:-1] == expected
        assert events[-1].stream == "z" and texts_of([events[-1]]) == ["compressed 0"]
        assert list(store.read("f")) == [e for e in expected if e.stream == "p"][:2] + [
            e for e in expected if e.stream == "f"
        ]
        assert store.verify().ok
        backend = store.backend
        assert isinstance(backend, SQLiteBackend)
        assert [store.codec.to_event(r) for r in backend.read_all(0, 100)] == events
        assert backend.read_all(0, 100)[-1].codec == 1
        seq1 = Record(
            el.new_event_id(), "f", 1, 1, "checkpoint", 1, b"\x80", b"", None, None, bytes(32)
        )
        with pytest.raises(Conflict):
            backend.append([seq1], Durability.NONE)
        store.append("f", text_events(1, "g"))
        assert store.verify().ok
    conn = sqlite3.connect(path)
    triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")}
    columns = [r[1] for r in conn.execute("PRAGMA table_info(events)")]
    conn.close()
    assert sqlite_schema.inspect(path) == (sqlite_schema.SCHEMA_VERSION, False)
    assert "events_fork_guard" not in triggers and "forks_guard" in triggers
    assert columns == ["position", "id", "stream", "seq", "ts", "type", "rec"]


def test_damaged_v3_rows_stay_damaged_after_the_migration(tmp_path: Path) -> None:
    """The v4 migration cannot repack a row whose envelope is damaged: it keeps its bytes, and
    reads and verify report that row as before, while the others migrate."""
    path = tmp_path / "v3.db"
    with el.open("memory://") as mem:
        mem.append("s", text_events(4))
        records = mem.backend.read_all(0, 100)
    rows = [_v3_row(r) for r in records]
    rows[1] = (*rows[1][:5], b"\xc1" + rows[1][5][1:], rows[1][6])  # envelope: invalid byte
    rows[2] = (*rows[2][:5], rows[2][5], "text")  # payload edited in as text
    sqlite_schema._create(path, search=False, target=3)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executemany(_V3_INSERT, rows)
    with el.open(url_for(path)) as store:
        assert [e.seq for e in store.read("s", 1, 1)] == [1]
        with pytest.raises(el.CorruptionError, match=r"v3\.db.*position 2 does not decode"):
            list(store.read("s"))
        with pytest.raises(el.CorruptionError, match="position 3 is stored as str, not bytes"):
            list(store.read("s", 3, 3))
        assert [e.seq for e in store.read("s", 4, 4)] == [4]
        (problem,) = store.verify().problems  # a stream's check stops at its first damage
        assert problem.seq == 2 and "record at position 2 does not decode" in problem.message


def test_damaged_record_is_a_corruption_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "rec.db"
    with el.open(url_for(path)) as store:
        store.append("s", text_events(3))
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE events SET rec = X'c1' WHERE seq = 2")
    conn.close()
    with el.open(url_for(path)) as store:
        with pytest.raises(el.CorruptionError, match=r"rec\.db.*'s'.*position 2"):
            list(store.read("s"))
        with pytest.raises(el.CorruptionError, match=r"rec\.db.*position 2"):
            store.backend.read("s", 1, None)
        with pytest.raises(el.CorruptionError, match="position 2"):
            list(store.read_all())
        assert [e.seq for e in store.read("s", 1, 1)] == [1]


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ("SET rec = 'text' WHERE seq = 2", "stored as str, not bytes"),
        ("SET rec = 42 WHERE seq = 2", "stored as int, not bytes"),
        ("SET rec = substr(rec, 1, 20) WHERE seq = 2", "position 2 does not decode"),
        ("SET rec = CAST(rec || x'ff' AS TEXT) WHERE seq = 2", "not.*UTF-8"),
    ],
    ids=["text", "int", "truncated", "invalid-utf8-text"],
)
def test_values_of_the_wrong_sql_type_are_corruption(
    tmp_path: Path, update: str, message: str
) -> None:
    """A file edited by another tool can hold text or numbers where eventlog keeps bytes."""
    path = tmp_path / "typed.db"
    with el.open(url_for(path)) as store:
        store.append("s", text_events(3))
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(f"UPDATE events {update}")
    with el.open(url_for(path)) as store:
        with pytest.raises(el.CorruptionError, match=message) as err:
            list(store.read("s"))
        assert "typed.db" in str(err.value)
        with pytest.raises(el.CorruptionError, match=message):
            list(store.read_all())
        (problem,) = store.verify().problems
        assert problem.stream == "s" and re.search(message, problem.message)


def test_a_removed_stream_tail_is_found_by_its_position_gap(tmp_path: Path) -> None:
    """Deleting a stream's last row leaves a shorter stream whose hash chain still holds, but
    positions have no gaps in SQLite: verify names the jump. (The store's very last event has
    nothing after it to show its loss: no chain without an outside anchor can.)"""
    path = tmp_path / "tail.db"
    with el.open(url_for(path)) as store:
        store.append("a", text_events(3, "a"))
        store.append("b", text_events(2, "b"))
        assert store.verify().ok
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("DELETE FROM events WHERE stream = 'a' AND seq = 3")
    with el.open(url_for(path)) as store:
        assert [e.seq for e in store.read("a")] == [1, 2]
        (problem,) = store.verify().problems
        assert (problem.stream, problem.seq) == ("b", 1)
        assert "positions jump from 2 to 4" in problem.message
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("DELETE FROM events WHERE stream = 'b' AND seq = 2")  # the store's last
    with el.open(url_for(path)) as store:
        assert "positions jump from 2 to 4" in store.verify().problems[0].message


def test_a_compressed_payload_stored_inline_is_corruption(tmp_path: Path) -> None:
    """A record whose codec says compressed must hold its payload as a bin."""
    pytest.importorskip("zstandard")
    path = tmp_path / "z.db"
    url = url_for(path, compression="zstd", compress_min_bytes="0")
    with el.open(url) as store:
        store.append("s", text_events(2))
    with closing(sqlite3.connect(path)) as conn, conn:
        (packed,) = conn.execute("SELECT rec FROM events WHERE seq = 2").fetchone()
        fields = msgspec.msgpack.decode(packed)
        assert fields[9] == 1 and isinstance(fields[10], bytes)
        fields[10] = {"text": "inline"}
        conn.execute("UPDATE events SET rec = ? WHERE seq = 2", (msgspec.msgpack.encode(fields),))
    with el.open(url) as store:
        with pytest.raises(el.CorruptionError, match="seq 2: .*payload"):
            list(store.read("s"))
        (problem,) = store.verify().problems
        assert problem.seq == 2 and "payload" in problem.message
        assert store_stats(store).events == 2


# -- reader connections ------------------------------------------------------------------------


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_reader_connections_do_not_pile_up_with_threads(tmp_path: Path) -> None:
    """Reads take a pooled connection and give it back. One connection per thread, kept until
    close, leaked two file descriptors per thread that ever read: 1,500 short-lived threads
    reached `ulimit -n 1024`, and each `asyncio.run` (a new executor) added one more."""
    before_open = _open_fds()
    store = el.open(url_for(tmp_path / "r.db"))
    backend = store.backend
    assert isinstance(backend, SQLiteBackend)
    store.append("a", text_events(2))
    assert texts_of(store.read("a")) == ["m0", "m1"]
    before = _open_fds()
    for _ in range(300):
        thread = threading.Thread(target=lambda: list(store.read("a")))
        thread.start()
        thread.join()
    astore = el.AsyncStore(store)
    for _ in range(50):
        assert len(asyncio.run(astore.read("a"))) == 2
    assert _open_fds() <= before + 2
    # Many threads reading at once open as many connections, but only a few stay open.
    start = threading.Barrier(40)
    results: list[int] = []

    def read_many() -> None:
        start.wait()
        for _ in range(20):
            results.append(len(list(store.read("a"))))

    threads = [threading.Thread(target=read_many) for _ in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [2] * 800
    assert len(backend._idle) <= sqlite_backend._IDLE_READERS
    # (SQLite may keep a closed connection's descriptor while another one of the process holds
    # a lock on the file, and reuses it for the next: bounded by the readers at once.)
    assert _open_fds() <= before + 2 * len(threads)
    store.close()
    assert _open_fds() == before_open  # every connection closed
    with pytest.raises(el.StoreClosedError):
        store.read("a")


# -- opening bad files: clear errors, nothing modified ------------------------------------------


def _populated(path: Path) -> None:
    with el.open(url_for(path)) as store:
        store.append("s", text_events(300))


def _corrupt_middle(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for offset in range(4096, len(data) - 4096, 4096):
        data[offset + 8 : offset + 200] = b"\xff" * 192  # smash b-tree page headers
    path.write_bytes(bytes(data))


def _newer_schema(path: Path) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT INTO eventlog_schema (version, applied_at) VALUES (99, 0)")
    conn.close()


def _replace_with_sqlite(path: Path, *statements: str) -> None:
    """Replace the store with a fresh SQLite file made by `statements`."""
    path.unlink()
    conn = sqlite3.connect(path)
    with conn:
        for sql in statements:
            conn.execute(sql)
    conn.close()


def _foreign_sqlite(path: Path) -> None:
    _replace_with_sqlite(
        path,
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)",
        "INSERT INTO notes (body) VALUES ('hello')",
    )


def _text_file(path: Path) -> None:
    path.write_text("this is not a database\n" * 200)


def _truncated_header(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:1000])


def _schema_row_without_tables(path: Path) -> None:
    """A damaged store: its version table says v1, its other tables are gone."""
    _replace_with_sqlite(
        path,
        "CREATE TABLE eventlog_schema (version INTEGER PRIMARY KEY, applied_at INT)",
        "INSERT INTO eventlog_schema VALUES (1, 0)",
    )


@pytest.mark.parametrize(
    ("damage", "error", "message"),
    [
        (_text_file, el.CorruptionError, "not an eventlog database"),
        (_foreign_sqlite, el.SchemaVersionError, "not an eventlog store"),
        (_newer_schema, el.SchemaVersionError, "schema version 99"),
        (_truncated_header, el.CorruptionError, ""),
        (_schema_row_without_tables, el.CorruptionError, "cannot be upgraded from schema v1"),
    ],
)
def test_bad_files_are_refused_untouched(
    tmp_path: Path, damage: Callable[[Path], None], error: type[Exception], message: str
) -> None:
    path = tmp_path / "bad.db"
    _populated(path)
    damage(path)
    before = path.read_bytes()
    files = sorted(tmp_path.iterdir())
    with pytest.raises(error) as err:
        el.open(url_for(path))
    assert str(path) in str(err.value) and message in str(err.value)
    assert path.read_bytes() == before
    if error is el.CorruptionError:  # a damaged file gets no -wal or -shm left behind either
        assert sorted(tmp_path.iterdir()) == files


def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    """An empty file (from tempfile, say) holds nothing yet: the store is made in its place."""
    path = tmp_path / "empty.db"
    path.touch()
    with el.open(url_for(path)) as store:
        store.append("s", text_events(2))
    with el.open(url_for(path)) as store:
        assert texts_of(store.read("s")) == ["m0", "m1"]


def test_an_empty_file_another_process_made_a_store_is_not_replaced(tmp_path: Path) -> None:
    """Two processes may find the file empty at once. The first to lock it makes the store;
    the second, once it has the lock, finds another file there and leaves it (replacing it
    would send the first one's writes to an unlinked file)."""
    path = tmp_path / "race.db"
    path.touch()
    first, second = tmp_path / "first.db", tmp_path / "second.db"
    first.write_bytes(b"the first process's store")
    second.write_bytes(b"the second process's store")
    held = os.open(path, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)  # the first process holds the empty file's lock
    late = threading.Thread(target=sqlite_schema._replace_empty, args=(path, second))
    late.start()
    time.sleep(0.2)  # the second process now waits for the lock on the same empty file
    assert late.is_alive()
    os.replace(first, path)
    os.close(held)
    late.join(10)
    assert path.read_bytes() == b"the first process's store"
    assert second.exists()  # not moved: the caller removes its temporary file


def _sqlite_error(tmp_path: Path, *statements: str) -> sqlite3.Error:
    conn = sqlite3.connect(tmp_path / "errors.db", isolation_level=None)
    try:
        for sql in statements:
            conn.execute(sql)
    except sqlite3.Error as exc:
        return exc
    finally:
        conn.close()
    raise AssertionError("no error")


def test_only_damage_makes_a_failed_upgrade_a_corruption_error(tmp_path: Path) -> None:
    """A migration that fails for want of disk space (or a lock, or a read-only file) leaves a
    healthy store: that is BackendUnavailableError, not CorruptionError (found in review)."""
    full = _sqlite_error(
        tmp_path,
        "CREATE TABLE t (x BLOB)",
        "PRAGMA max_page_count=3",
        "INSERT INTO t VALUES (zeroblob(100000))",
    )
    assert full.sqlite_errorcode == sqlite3.SQLITE_FULL  # type: ignore[attr-defined]
    assert not sqlite_schema._damaged(full)
    missing = _sqlite_error(tmp_path, "SELECT * FROM no_such_table")
    assert sqlite_schema._damaged(missing)
    (tmp_path / "junk.db").write_bytes(b"SQLite format 3\x00" + b"\xff" * 5000)
    junk = sqlite3.connect(tmp_path / "junk.db")
    with pytest.raises(sqlite3.DatabaseError) as err:
        junk.execute("SELECT * FROM sqlite_master")
    junk.close()
    assert sqlite_schema._damaged(err.value)


def test_a_directory_is_not_a_store(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(el.UsageError, match="not a regular file"):
        el.open(url_for(tmp_path / "dir.db"))


def test_an_empty_special_file_is_never_replaced_by_a_store(tmp_path: Path) -> None:
    """A FIFO (or /dev/null) has size 0 like a new empty file, but is not one to fill."""
    fifo = tmp_path / "pipe.db"
    os.mkfifo(fifo)
    with pytest.raises(el.UsageError, match="not a regular file"):
        el.open(url_for(fifo))
    assert fifo.is_fifo()  # (/dev/null is not tried here: a regression would replace it)


def test_a_store_locked_by_another_process_is_unavailable_not_corrupt(tmp_path: Path) -> None:
    """A process holding the file with locking_mode=EXCLUSIVE keeps it unreadable for a while:
    that is BackendUnavailableError (try later), never a CorruptionError (which could get a
    healthy store deleted); the file is left as it was."""
    path = tmp_path / "held.db"
    _populated(path)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_EXCLUSIVE, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        before = path.read_bytes()
        with pytest.raises(el.BackendUnavailableError, match="locked by another process") as err:
            el.open(url_for(path))
        assert str(path) in str(err.value)
        assert path.read_bytes() == before
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    with el.open(url_for(path)) as store:  # once the holder is gone
        assert store.verify().ok


_HOLD_EXCLUSIVE = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA locking_mode=EXCLUSIVE")
conn.execute("BEGIN IMMEDIATE")
conn.execute("INSERT INTO blobs VALUES ('held', x'00')")
conn.execute("COMMIT")
print("held", flush=True)
time.sleep(60)
"""


def _journal_mode(path: Path) -> str:
    with closing(sqlite3.connect(path)) as conn:
        mode: str = conn.execute("PRAGMA journal_mode").fetchone()[0]
        return mode


_DIE_IN_A_TRANSACTION = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA cache_size=2")  # changed pages spill into the file before the commit
conn.execute("BEGIN IMMEDIATE")
for i in range(300):
    conn.execute("INSERT INTO blobs VALUES (?, zeroblob(4000))", (f"lost{i}",))
conn.execute("UPDATE events SET rec = x'00'")
print("held", flush=True)
sys.stdin.readline()
"""


def test_a_crash_in_a_rollback_journal_transaction_is_rolled_back_on_open(
    tmp_path: Path,
) -> None:
    """A store not in WAL mode (a `VACUUM INTO` backup, say) whose writer was killed in a
    transaction has a hot journal, which a read-only connection cannot roll back: every open
    was refused as corrupt though the data was intact. Now the open rolls it back and puts the
    store in WAL mode."""
    source, path = tmp_path / "a.db", tmp_path / "b.db"
    with el.open(url_for(source)) as store:
        store.append("s", text_events(3))
    with closing(sqlite3.connect(source)) as conn:
        conn.execute(f"VACUUM INTO '{path}'")
    assert _journal_mode(path) == "delete"
    size = path.stat().st_size
    child = subprocess.Popen(
        [sys.executable, "-c", _DIE_IN_A_TRANSACTION, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "held\n"
    finally:
        child.kill()
        child.wait()
        for pipe in (child.stdin, child.stdout):
            if pipe is not None:
                pipe.close()
    journal = path.with_name("b.db-journal")
    assert journal.stat().st_size > 0 and path.stat().st_size > size  # a hot journal
    with el.open(url_for(path)) as store:
        assert texts_of(store.read("s")) == ["m0", "m1", "m2"]
        assert store.verify().ok
        assert store.backend.get_blob("lost0") is None
        store.append("s", [el.ModelInput.from_text("m3")])
    assert not journal.exists()
    assert _journal_mode(path) == "wal"
    with el.open(url_for(path)) as store:
        assert texts_of(store.read("s")) == ["m0", "m1", "m2", "m3"]


_NO_DAC = ["--bounding-set=-dac_override,-dac_read_search"]
_NO_DAC += ["--inh-caps=-dac_override,-dac_read_search"]

_OPEN_AND_APPEND = """
import sys, eventlog as el
try:
    with el.open(sys.argv[1]) as store:
        print("read", len(list(store.read("s"))), flush=True)
        store.append("s", [el.ModelInput.from_text("more")])
        print("appended", flush=True)
except el.EventlogError as exc:
    print(type(exc).__name__, exc)
"""


def _open_without_permissions(path: Path) -> list[str]:
    """Lines printed by a process that opens `path` and cannot bypass file permissions."""
    command = [sys.executable, "-c", _OPEN_AND_APPEND, url_for(path)]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root and setpriv (util-linux) is missing to drop the rights")
        command = [setpriv, *_NO_DAC, *command]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_read_only_directory_is_unavailable_not_corrupt(tmp_path: Path) -> None:
    """SQLite cannot create the -shm file in a read-only directory (SQLITE_READONLY_DIRECTORY):
    that was reported as a CorruptionError for a healthy store."""
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "e.db"
    _populated(path)
    before = path.read_bytes()
    folder.chmod(0o555)
    try:
        (line,) = _open_without_permissions(path)
    finally:
        folder.chmod(0o755)
    assert line.startswith("BackendUnavailableError "), line
    assert str(path) in line and "unchanged" in line and "writable" in line
    assert path.read_bytes() == before
    assert sorted(folder.iterdir()) == [path]


def test_a_read_only_file_stays_readable_in_its_journal_mode(tmp_path: Path) -> None:
    """A read-only store is read as it is: not switched to WAL, appends refused."""
    source, path = tmp_path / "a.db", tmp_path / "b.db"
    _populated(source)
    with closing(sqlite3.connect(source)) as conn:
        conn.execute(f"VACUUM INTO '{path}'")
    path.chmod(0o444)
    before = path.read_bytes()
    read, refused = _open_without_permissions(path)
    assert read == "read 300"
    assert refused.startswith("BackendUnavailableError ") and "readonly" in refused
    assert path.read_bytes() == before
    assert _journal_mode(path) == "delete"


def test_corrupt_pages_are_reported_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.db"
    _populated(path)
    _corrupt_middle(path)
    before = path.read_bytes()
    with pytest.raises(el.CorruptionError) as err:
        el.open(url_for(path, check="quick"))
    assert str(path) in str(err.value)
    assert path.read_bytes() == before
    # Without the open-time check, reading the damaged pages reports the same way.
    with pytest.raises(el.CorruptionError) as err, el.open(url_for(path)) as store:
        list(store.read("s"))
    assert str(path) in str(err.value)


# -- search --------------------------------------------------------------------------------------


def test_search_finds_events_per_stream_and_store_wide(tmp_path: Path) -> None:
    with el.open(url_for(tmp_path / "s.db", search="on")) as store:
        store.append("a", [el.ModelInput.from_text("the quick brown fox")])
        store.append("b", [el.ModelInput.from_text("a lazy dog and a quick cat")])
        store.append("b", [el.Checkpoint(label="nothing here")])
        hits = store.search("quick")
        assert {(h.stream, h.seq) for h in hits} == {("a", 1), ("b", 1)}
        assert all("[quick]" in h.snippet for h in hits)
        (hit,) = store.search("quick", stream="b")
        assert hit.id == store.get("b", 1).id and hit.position == 2
        assert store.search("fox OR dog", limit=1)[0].stream in {"a", "b"}
        assert store.search("elephant") == []


def test_search_of_a_fork_covers_what_reading_it_gives(tmp_path: Path) -> None:
    """A fork's search includes the prefix it shares with its ancestors, as `read` does."""
    with el.open(url_for(tmp_path / "f.db", search="on")) as store:
        store.append("chat", [el.ModelInput.from_text(f"build step {i}") for i in range(1, 5)])
        store.fork("chat", "retry", 2)
        store.append("retry", [el.ModelInput.from_text("build again")])
        store.fork("retry", "retry2", 1)
        store.append("retry2", [el.ModelInput.from_text("build once more")])

        def found(stream: str) -> list[tuple[str, int]]:
            return sorted((h.stream, h.seq) for h in store.search("build", stream=stream))

        assert found("chat") == [("chat", 1), ("chat", 2), ("chat", 3), ("chat", 4)]
        assert found("retry") == [("chat", 1), ("chat", 2), ("retry", 3)]
        assert found("retry2") == [("chat", 1), ("retry2", 2)]
        assert [(e.stream, e.seq) for e in store.read("retry2")] == found("retry2")
        assert len(store.search("build")) == 6


def test_search_of_a_fork_with_a_long_ancestry(tmp_path: Path) -> None:
    """Segments are searched in slices: one query over 1,000 of them passes SQLite's depth cap."""
    with el.open(url_for(tmp_path / "deep.db", search="on"), durability="none") as store:
        store.append("s0", [el.ModelInput.from_text("needle 0")])
        for i in range(1, 1051):
            store.fork(f"s{i - 1}", f"s{i}", i)
            store.append(f"s{i}", [el.ModelInput.from_text(f"needle {i}")])
        hits = store.search("needle", stream="s1050", limit=2000)
        assert sorted((h.stream, h.seq) for h in hits) == sorted(
            (e.stream, e.seq) for e in store.read("s1050")
        )
        assert len(store.search("needle", stream="s1050", limit=7)) == 7


def test_search_queries_that_fts5_would_misread_or_refuse(tmp_path: Path) -> None:
    with el.open(url_for(tmp_path / "q.db", search="on")) as store:
        store.append("a", [el.ModelInput.from_text("alpha beta: setup.py fails")])
        with pytest.raises(el.ValidationError, match="NUL"):
            store.search("alpha\x00zzz")  # FTS5 would have searched "alpha" alone
        with pytest.raises(el.ValidationError, match='in double quotes, e.g. "setup.py"'):
            store.search("setup.py")
        assert [h.seq for h in store.search('"setup.py"')] == [1]
        with pytest.raises(el.ValidationError) as err:
            store.search("x-" * 100_000)
        assert len(str(err.value)) < 600 and "(200,000 characters)" in str(err.value)


def test_search_is_chosen_at_creation(tmp_path: Path) -> None:
    path = tmp_path / "plain.db"
    with el.open(url_for(path)) as store:
        store.append("a", text_events(1))
        with pytest.raises(el.UsageError, match="search=on"):
            store.search("m0")
    with pytest.raises(el.UsageError, match="has no full-text index"):
        el.open(url_for(path, search="on"))
    with el.open(url_for(tmp_path / "fts.db", search="on")) as store:
        store.append("a", text_events(1))
    with el.open(url_for(tmp_path / "fts.db")) as store:  # the index stays on when reopened
        store.append("a", text_events(1, "later"))
        assert [h.seq for h in store.search("later0")] == [2]


# -- URLs and options ----------------------------------------------------------------------------


def test_relative_and_absolute_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    for url, file in [
        ("sqlite:///rel.db", tmp_path / "rel.db"),
        ("sqlite://rel2.db", tmp_path / "rel2.db"),
        ("sqlite:///sub/x.db", tmp_path / "sub" / "x.db"),
        (f"sqlite:///{tmp_path}/abs.db", tmp_path / "abs.db"),
    ]:
        with el.open(url) as store:
            store.append("s", text_events(1))
        assert file.exists(), url


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///x.db?colour=blue",
        "sqlite:///x.db?search=maybe",
        "sqlite:///x.db?busy_timeout=soon",
        "sqlite:///x.db?check=full",
        "sqlite://",
        "sqlite://:memory:",
        "sqlite:///missing-dir/x.db",
    ],
)
def test_bad_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(el.UsageError):
        el.open(url)
    assert list(tmp_path.iterdir()) == []


def test_close_releases_files_and_reopen_sees_everything(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    store = el.open(url_for(path))
    store.append("s", text_events(5))
    threads = [threading.Thread(target=lambda: list(store.read("s"))) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    store.close()
    assert not Path(f"{path}-wal").exists()  # the last connection closed checkpoints the WAL
    with el.open(url_for(path)) as again:
        assert texts_of(again.read("s")) == [f"m{i}" for i in range(5)]


def test_opening_and_closing_leaves_no_files_beside_the_store(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    for _ in range(2):  # created, then opened again: nothing read or written either time
        el.open(url_for(path)).close()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["c.db"]
    with el.open(url_for(path)) as store:
        store.append("s", text_events(1))
    with el.open(url_for(path)) as store:
        assert texts_of(store.read("s")) == ["m0"]


def test_single_append_waits_out_another_writer(tmp_path: Path) -> None:
    """A one-row append runs as SQLite's own autocommit statement; when another connection
    holds the write lock past the busy timeout, it retries with BEGIN IMMEDIATE and lands once."""
    url = f"sqlite:///{tmp_path}/x.db?busy_timeout=0.05"
    with el.open(url, durability="fsync") as store:
        store.append("s", text_events(1))  # seq 1 checks for a fork inside a transaction
        other = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        result: list[list[el.RecordedEvent]] = []
        worker = threading.Thread(target=lambda: result.append(store.append("s", text_events(1))))
        worker.start()
        time.sleep(0.2)  # well past the busy timeout: the autocommit insert gave up
        assert worker.is_alive() and store.backend.stats()["commits"] == 1
        other.execute("COMMIT")
        other.close()
        worker.join(10)
        assert [e.seq for e in result[0]] == [2]
        assert [e.seq for e in store.read("s")] == [1, 2]
        assert store.backend.stats() == {
            "commits": 2,
            "jobs": 2,
            "checkpoints": 0,
            "restarts": 0,
            "restarts_blocked": 0,
            "wal_room": 1,  # made in the first synced commit; both wrote inside it
        }


# -- background checkpoints --------------------------------------------------------------------


def _big_events(n: int, size: int = 4000) -> list[el.Event]:
    return [el.Event(data=el.ModelInput.from_text(f"{i} " + "x" * size)) for i in range(n)]


def _checkpoint_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("eventlog-checkpoint")]


def test_batch_appends_are_checkpointed_in_the_background(tmp_path: Path) -> None:
    """Commits that do not sync leave the WAL copy to another thread: the database file grows
    while the store is open, with no commit having checkpointed (the writer's threshold is the
    cap), and closing the store stops the thread."""
    path = tmp_path / "b.db"
    with el.open(url_for(path), durability="batch") as store:
        before = path.stat().st_size
        events = _big_events(1500)  # about 6 MB: 1500 pages, past one checkpoint's worth
        for i in range(0, len(events), 100):
            store.append("s", events[i : i + 100])
        assert wait_for(lambda: store.backend.stats()["checkpoints"] >= 1)
        assert _checkpoint_threads()
        assert wait_for(lambda: path.stat().st_size > before + 2_000_000)  # ~1000 pages copied
        assert [e.seq for e in store.read("s")] == list(range(1, 1501))
    assert not _checkpoint_threads()
    with el.open(url_for(path)) as again:
        assert again.verify().ok
        assert sum(1 for _ in again.read("s")) == 1500


def test_small_fsync_commits_checkpoint_inline(tmp_path: Path) -> None:
    """At durability fsync a small commit checkpoints inline, as SQLite does by default (the WAL
    is then rewritten in place), and no thread is started."""
    path = tmp_path / "f.db"
    with el.open(url_for(path), durability="fsync") as store:
        for event in _big_events(250, 16_000):  # about 1250 pages: past the 1000-page threshold
            store.append("s", [event])
        assert store.backend.stats()["checkpoints"] == 0
        assert not _checkpoint_threads()
        assert path.stat().st_size > 2_000_000  # the inline checkpoint copied pages in


def test_large_fsync_commits_are_checkpointed_in_the_background(tmp_path: Path) -> None:
    """A commit of many pages at durability fsync leaves its checkpoint to the thread: copying
    a thousand pages inside the commit costs more than growing the WAL file."""
    path = tmp_path / "F.db"
    with el.open(url_for(path), durability="fsync") as store:
        events = _big_events(300, 16_000)  # 10 commits of about 120 pages
        for i in range(0, len(events), 30):
            store.append("s", events[i : i + 30])
        assert wait_for(lambda: store.backend.stats()["checkpoints"] >= 1)
        assert store.backend.stats()["commits"] == 10


def _wal_restarts(path: Path) -> int:
    """The WAL header's checkpoint sequence number: SQLite adds one each time the WAL restarts."""
    with open(f"{path}-wal", "rb") as wal:
        return int.from_bytes(wal.read(16)[12:16], "big")


def test_the_wal_stays_bounded_when_appends_outrun_checkpoints(tmp_path: Path) -> None:
    """A PASSIVE checkpoint cannot restart the WAL while the writer keeps appending; the
    writer's RESTART checkpoint does, so a burst twice the writer's backstop never reaches it."""
    path = tmp_path / "w.db"
    wal = Path(f"{path}-wal")
    largest = 0
    with el.open(url_for(path), durability="none") as store:
        events = _big_events(100)
        for _ in range(150):  # 150 x 100 x 4 KB: about 60 MB
            store.append("s", [el.Event(data=e.data) for e in events])
            largest = max(largest, wal.stat().st_size)
        assert store.backend.stats()["restarts"] >= 2
    assert RESTART_FRAMES * 4096 < largest < WAL_CAP_FRAMES * 4096, largest


def test_a_reader_holding_the_wal_delays_its_restart_but_no_append(tmp_path: Path) -> None:
    """A reader in a long transaction keeps the WAL from restarting: the RESTART checkpoint
    gives up after its short wait and appends go on. Once the reader is done, the WAL restarts."""
    path = tmp_path / "r.db"
    events = _big_events(100)
    stats = None
    with el.open(url_for(path), durability="none") as store:
        store.append("s", events[:1])
        with closing(sqlite3.connect(path)) as reader:
            reader.execute("BEGIN")
            assert reader.execute("SELECT count(*) FROM events").fetchone() == (1,)
            held = _wal_restarts(path)
            appends = 0
            while appends < 200:  # until a restart is tried: past RESTART_FRAMES
                store.append("s", [el.Event(data=e.data) for e in events])
                appends += 1
                stats = store.backend.stats()
                if stats["restarts_blocked"]:
                    break
            assert stats is not None and stats["restarts_blocked"] >= 1
            assert stats["restarts"] == 0
            assert _wal_restarts(path) == held
            # Not restarted, so the file holds every frame: a 32-byte header, then page + 24 each.
            assert (Path(f"{path}-wal").stat().st_size - 32) // (4096 + 24) > RESTART_FRAMES
            reader.execute("COMMIT")
        while appends < 400 and _wal_restarts(path) == held:  # once grown as much again
            store.append("s", [el.Event(data=e.data) for e in events])
            appends += 1
        assert _wal_restarts(path) != held
        assert store.head_position() == 1 + appends * 100


def test_the_writer_never_checkpoints_at_synchronous_off(tmp_path: Path) -> None:
    """Appends at durability none commit at synchronous=OFF, where a checkpoint syncs nothing.
    The writer's own checkpoints (inside a commit, its WAL restarts) must not run there: the
    restart is raised to NORMAL and the automatic checkpoint is off while OFF."""
    path = tmp_path / "off.db"
    seen: list[int] = []
    with el.open(url_for(path), durability="none") as store:
        writer = store.backend._writer  # type: ignore[attr-defined]
        checkpointer = writer._checkpointer
        restart = checkpointer.restart

        def watched(conn: sqlite3.Connection) -> None:
            seen.append(conn.execute("PRAGMA synchronous").fetchone()[0])
            restart(conn)

        checkpointer.restart = watched
        events = _big_events(100)
        for _ in range(150):  # about 60 MB: past two restarts, even with the thread late
            store.append("s", [el.Event(data=e.data) for e in events])
            assert writer._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        assert store.backend.stats()["restarts"] >= 2
    assert len(seen) >= 2 and min(seen) >= 1, seen  # 0 = OFF, 1 = NORMAL


def test_a_none_append_never_leaves_fsync_commits_on_unsynced_pages(tmp_path: Path) -> None:
    """End to end, with the system calls as the kernel saw them (strace): appends at durability
    none between fsync appends. Whenever the WAL restarts (its header rewritten at offset 0),
    every page copied into the database file must already be synced; otherwise the fsync
    commits whose frames the restart overwrites would rest on unsynced pages alone."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed: cannot watch SQLite's writes and syncs")
    db = tmp_path / "mixed.db"
    trace = tmp_path / "trace.txt"
    script = f"""
import eventlog as el
store = el.open({url_for(db)!r})
for i in range(400):
    events = [el.ModelInput.from_text("n" * 8000) for _ in range(10)]
    store.append("bulk", events, durability="none")
    if i % 5 == 0:
        store.append("synced", [el.ModelInput.from_text("f" * 150000)], durability="fsync")
store.close()
"""
    run = subprocess.run(
        [strace, "-f", "-y", "-e", "trace=pwrite64,fsync,fdatasync", "-o", str(trace)]
        + [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if run.returncode != 0 and "ptrace" in run.stderr:
        pytest.skip(f"strace cannot trace here: {run.stderr.strip()[:200]}")
    assert run.returncode == 0, run.stderr
    call = re.compile(r"\d+\s+(\w+)\((\d+)<([^>]*)>(.*)")
    unsynced = restarts = 0
    bad: list[int] = []
    for line in trace.read_text().splitlines():
        m = call.match(line.replace(" <unfinished ...>", ")"))
        if not m:
            continue
        name, _, file, rest = m.groups()
        if file == str(db):
            if name == "pwrite64":
                unsynced += int(rest.rsplit(",", 2)[-2])
            elif name in ("fsync", "fdatasync"):
                unsynced = 0
        elif file == f"{db}-wal" and name == "pwrite64":
            size, offset = rest.rsplit(",", 2)[-2:]
            if int(offset.split(")")[0]) == 0 and int(size) == 32:
                restarts += 1
                if unsynced:
                    bad.append(unsynced)
    assert restarts >= 2, trace.read_text()[-2000:]  # the WAL's creation, then restarts
    assert not bad, f"WAL restarts over unsynced database pages (bytes): {bad}"


def test_a_failed_background_checkpoint_is_logged_and_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The checkpoint thread survives an error: it logs it and checkpoints again after the next
    pages. Here its connection is to a file that is not a database."""
    bad = tmp_path / "not-a-db"
    bad.write_bytes(b"not a database at all" * 500)
    connections: list[sqlite3.Connection] = []

    def connect() -> sqlite3.Connection:
        connections.append(sqlite3.connect(bad, check_same_thread=False))
        return connections[-1]

    checkpointer = Checkpointer(connect, str(bad))
    with caplog.at_level("WARNING", logger="eventlog.backends.sqlite"):
        checkpointer.committed(CHECKPOINT_FRAMES)
        assert wait_for(lambda: len(caplog.records) == 1)
        checkpointer.committed(CHECKPOINT_FRAMES)
        assert wait_for(lambda: len(caplog.records) == 2)
    assert "background checkpoint failed" in caplog.records[0].getMessage()
    assert str(bad) in caplog.records[0].getMessage()
    assert checkpointer.checkpoints == 0
    checkpointer.close()
    assert not _checkpoint_threads()
    assert len(connections) == 1  # one connection, reused for the retry


@pytest.mark.slow
def test_crash_at_durability_batch_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """kill -9 of a writer at durability batch, background checkpoints running: a process
    crash loses no acknowledged event (the commit is in the OS before append returns)."""
    from tests.crash import run_crash_rounds

    assert run_crash_rounds(url_for(tmp_path / "crash.db"), rounds=4, durability="batch") > 0
