"""The PostgreSQL writer when the server ends its connection, on a real server.

A connection ended while idle is replaced before the next transaction sends anything, so that
write succeeds. One ended inside a transaction fails its writes with BackendUnavailableError:
nothing is stored if the COMMIT was not sent yet; after it, the outcome is unknown, and an
append retried with the same events is stored once. Either way the next write connects again.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable
from contextlib import closing
from typing import Any

import msgspec
import pytest

import eventlog as el
from eventlog.backends.base import Conflict
from eventlog.backends.postgres import PostgresBackend
from eventlog.errors import BackendUnavailableError
from tests.contract import text_events, texts_of, wait_for
from tests.postgres import connect, fresh_schema, require_server, url_for

__all__ = ["fresh_schema"]  # the fixture, used by name
require_server(module=True)

Schemas = Callable[[], str]


def _backend(store: el.Store) -> PostgresBackend:
    backend = store.backend
    assert isinstance(backend, PostgresBackend)
    return backend


def _writer_pid(store: el.Store) -> int:
    """The server process of the store's writer connection."""
    writer = _backend(store)._writer
    assert writer is not None
    return int(writer.info.backend_pid)


def _alive(pid: int) -> bool:
    with closing(connect()) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
        return bool(row.fetchone()[0])


def _waiting_for_a_lock(pid: int) -> bool:
    with closing(connect()) as conn:
        row = conn.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()
    return row is not None and row[0] == "Lock"


def _terminate(pid: int) -> None:
    with closing(connect()) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def _in_thread(write: Callable[[], object]) -> tuple[threading.Thread, list[Any]]:
    """Start `write` in a thread; its result or exception lands in the list."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(write())
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def _hold_commits(other: Any, schema: str, from_position: int) -> None:
    """Make COMMITs that move the head to `from_position` or further wait while `other` holds
    an advisory lock: a deferred constraint trigger on `head`, which runs in the COMMIT."""
    s = f'"{schema}"'
    key = zlib.crc32(schema.encode())
    other.execute(
        f"CREATE FUNCTION {s}.hold() RETURNS trigger LANGUAGE plpgsql AS $$ "
        f"BEGIN PERFORM pg_advisory_xact_lock_shared({key}); RETURN NULL; END $$"
    )
    other.execute(
        f"CREATE CONSTRAINT TRIGGER hold AFTER UPDATE ON {s}.head DEFERRABLE INITIALLY DEFERRED "
        f"FOR EACH ROW WHEN (NEW.position >= {from_position}) EXECUTE FUNCTION {s}.hold()"
    )
    other.execute("SELECT pg_advisory_lock(%s)", (key,))


def _release_commits(other: Any, schema: str) -> None:
    """Undo `_hold_commits`."""
    other.execute(f'DROP TRIGGER hold ON "{schema}".head')
    other.execute("SELECT pg_advisory_unlock(%s)", (zlib.crc32(schema.encode()),))


def _psycopg_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What psycopg logged (it logs errors it ignores while ending a failed operation)."""
    return [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")]


def test_an_idle_writer_connection_ended_is_replaced_for_a_group(fresh_schema: Schemas) -> None:
    """The server ends the idle writer's connection; then 8 threads append at once: every
    append is stored once, in gapless positions, on one new connection."""
    with el.open(url_for(fresh_schema())) as store:
        store.append("s", text_events(1))
        pid = _writer_pid(store)
        _terminate(pid)
        assert wait_for(lambda: not _alive(pid))
        errors: list[BaseException] = []

        def append(t: int) -> None:
            try:
                for i in range(5):
                    store.append(f"t{t}", text_events(1, f"t{t}-{i}-"))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=append, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        assert _writer_pid(store) != pid
        assert [e.position for e in store.read_all()] == list(range(1, 42))
        assert store.verify().ok


def test_a_connection_ended_before_the_commit_stores_nothing(
    fresh_schema: Schemas, caplog: pytest.LogCaptureFixture
) -> None:
    """The writer's connection is ended while its insert waits for another session's lock on
    `events` (the head row held, the COMMIT not sent): BackendUnavailableError saying nothing
    is stored, nothing of the batch is, and the next append works."""
    schema = fresh_schema()
    with el.open(url_for(schema)) as store:
        store.append("s", text_events(2))
        pid = _writer_pid(store)
        with closing(connect()) as other:
            other.execute("BEGIN")
            other.execute(f'LOCK TABLE "{schema}".events IN SHARE MODE')  # blocks inserts only
            thread, outcome = _in_thread(lambda: store.append("s", text_events(3, "lost")))
            assert wait_for(lambda: _waiting_for_a_lock(pid))
            _terminate(pid)
            thread.join(30)
            other.execute("ROLLBACK")
        (error,) = outcome
        assert isinstance(error, BackendUnavailableError), error
        assert "lost before the write committed" in str(error)
        assert "nothing of it is stored" in str(error)
        assert texts_of(store.read("s")) == ["m0", "m1"]
        assert store.head_position() == 2
        stored = store.append("s", text_events(2, "next"), expected_seq=2)
        assert [e.position for e in stored] == [3, 4]
        assert texts_of(store.read("s")) == ["m0", "m1", "next0", "next1"]
        assert store.verify().ok
    assert _psycopg_warnings(caplog) == []


def test_a_connection_ended_while_committing_is_an_unknown_outcome(
    fresh_schema: Schemas, caplog: pytest.LogCaptureFixture
) -> None:
    """The writer's connection is ended in its COMMIT (a deferred trigger makes it wait for a
    lock): BackendUnavailableError saying the append may or may not be stored and that
    retrying the same events is safe. Retried, the batch is stored once, in gapless positions;
    retried again, it is returned as stored."""
    schema = fresh_schema()
    with el.open(url_for(schema)) as store:
        store.append("s", text_events(2))
        pid = _writer_pid(store)
        batch = text_events(3, "retried")
        with closing(connect()) as other:
            _hold_commits(other, schema, from_position=3)
            thread, outcome = _in_thread(lambda: store.append("s", batch))
            assert wait_for(lambda: _waiting_for_a_lock(pid))
            _terminate(pid)
            thread.join(30)
            _release_commits(other, schema)
        (error,) = outcome
        assert isinstance(error, BackendUnavailableError), error
        message = str(error)
        assert "lost while committing" in message
        assert "may or may not be stored" in message
        assert "same events (same ids and content) is safe" in message
        assert store.head_position() == 2  # here the server never finished the COMMIT
        first = store.append("s", batch, expected_seq=2)
        again = store.append("s", batch, expected_seq=2)
        assert [e.position for e in first] == [e.position for e in again] == [3, 4, 5]
        assert texts_of(store.read("s")) == ["m0", "m1", "retried0", "retried1", "retried2"]
        assert [e.position for e in store.read_all()] == [1, 2, 3, 4, 5]
        assert store.verify().ok
    assert _psycopg_warnings(caplog) == []


def test_a_group_run_write_by_write_that_loses_its_connection_fails_whole(
    fresh_schema: Schemas, caplog: pytest.LogCaptureFixture
) -> None:
    """Three writes share a transaction; one takes a stored id, so the group runs again with
    each write in a savepoint, and that run's COMMIT loses its connection: the taken id stays
    a Conflict, the two others raise BackendUnavailableError (the group is not run a third
    time), nothing of them is stored, and retried they are stored once."""
    schema = fresh_schema()
    with el.open(url_for(schema)) as store:
        for stream in ("a", "x", "y"):
            store.append(stream, text_events(1))
        backend = _backend(store)
        queue = backend._queue
        taken = [msgspec.structs.replace(backend.read("a", 1, 1)[0], stream="b", seq=1)]
        batches = {stream: text_events(1, f"{stream}-") for stream in ("x", "y")}
        pid = _writer_pid(store)
        with closing(connect()) as other:
            _hold_commits(other, schema, from_position=5)  # not the lone first write's (4)
            other.execute("BEGIN")
            other.execute(f'SELECT position FROM "{schema}".head FOR UPDATE')
            lead, _ = _in_thread(lambda: store.append("first", text_events(1)))
            assert wait_for(lambda: queue._leading and not queue._queue)
            runs = [
                _in_thread(lambda: store.append("x", batches["x"])),
                _in_thread(lambda: backend.append(taken, el.Durability.FSYNC)),
                _in_thread(lambda: store.append("y", batches["y"])),
            ]
            assert wait_for(lambda: len(queue._queue) == 3)
            other.execute("COMMIT")  # the lone write commits; the three wait in the COMMIT
            assert wait_for(lambda: _waiting_for_a_lock(pid))
            _terminate(pid)
            for thread in [lead, *(t for t, _ in runs)]:
                thread.join(30)
            _release_commits(other, schema)
        (x,), (dup,), (y,) = (outcome for _, outcome in runs)
        assert isinstance(dup, Conflict), dup
        for error in (x, y):
            assert isinstance(error, BackendUnavailableError), error
            assert "lost while committing" in str(error)
        assert store.head_position() == 4
        for stream in ("x", "y"):
            assert texts_of(store.read(stream)) == ["m0"]
            store.append(stream, batches[stream], expected_seq=1)
            assert texts_of(store.read(stream)) == ["m0", f"{stream}-0"]
        assert [e.position for e in store.read_all()] == [1, 2, 3, 4, 5, 6]
        assert store.verify().ok
    assert _psycopg_warnings(caplog) == []
