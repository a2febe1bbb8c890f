"""The one mapping from sqlite3 errors to eventlog errors, checked row by row."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import eventlog as el
from eventlog.backends import sqlite_schema
from eventlog.backends.base import Conflict, Durability, ForkInfo, Record
from eventlog.backends.sqlite import SQLiteBackend, translate_error

LOC = "/data/store.db"


def sqlite_error(cls: type[sqlite3.Error], name: str, message: str) -> sqlite3.Error:
    """A sqlite3 exception as the driver raises it (error name attribute included)."""
    exc = cls(message)
    exc.sqlite_errorname = name  # type: ignore[attr-defined]
    return exc


CASES = [
    # (driver error class, SQLite error name, message, query, expected type, expected kind/text)
    (
        sqlite3.IntegrityError,
        "SQLITE_CONSTRAINT_UNIQUE",
        "UNIQUE constraint failed: events.stream, events.seq",
        None,
        Conflict,
        "seq",
    ),
    (
        sqlite3.IntegrityError,
        "SQLITE_CONSTRAINT_UNIQUE",
        "UNIQUE constraint failed: events.id",
        None,
        Conflict,
        "id",
    ),
    (
        sqlite3.IntegrityError,
        "SQLITE_CONSTRAINT_PRIMARYKEY",
        "UNIQUE constraint failed: forks.stream",
        None,
        Conflict,
        "fork",
    ),
    (
        sqlite3.IntegrityError,
        "SQLITE_CONSTRAINT_TRIGGER",
        "eventlog: fork of a stream with events",
        None,
        Conflict,
        "fork",
    ),
    (
        sqlite3.OperationalError,
        "SQLITE_ERROR",
        'fts5: syntax error near "AND"',
        "AND",
        el.ValidationError,
        "'AND' is not a valid search query",
    ),
    (
        sqlite3.OperationalError,
        "SQLITE_ERROR",
        "no such table: x",
        None,
        el.BackendUnavailableError,
        "no such table",
    ),
    (
        sqlite3.OperationalError,
        "SQLITE_BUSY",
        "database is locked",
        None,
        el.BackendUnavailableError,
        "locked",
    ),
    (
        sqlite3.OperationalError,
        "SQLITE_LOCKED_SHAREDCACHE",
        "database table is locked",
        None,
        el.BackendUnavailableError,
        "locked",
    ),
    (
        sqlite3.DatabaseError,
        "SQLITE_CORRUPT",
        "database disk image is malformed",
        None,
        el.CorruptionError,
        LOC,
    ),
    (
        sqlite3.DatabaseError,
        "SQLITE_NOTADB",
        "file is not a database",
        None,
        el.CorruptionError,
        LOC,
    ),
    (
        sqlite3.OperationalError,
        "",
        "Could not decode to UTF-8 column 'data' with text 'x'",
        None,
        el.CorruptionError,
        "a stored value is damaged",
    ),
    (
        sqlite3.OperationalError,
        "SQLITE_FULL",
        "database or disk is full",
        None,
        el.BackendUnavailableError,
        "disk full",
    ),
    (
        sqlite3.OperationalError,
        "SQLITE_IOERR_FSYNC",
        "disk I/O error",
        None,
        el.BackendUnavailableError,
        "SQLITE_IOERR_FSYNC",
    ),
    (
        sqlite3.ProgrammingError,
        "",
        "Cannot operate on a closed database.",
        None,
        el.StoreClosedError,
        "closed",
    ),
]


@pytest.mark.parametrize(("cls", "name", "message", "query", "expected", "detail"), CASES)
def test_translation_table(
    cls: type[sqlite3.Error],
    name: str,
    message: str,
    query: str | None,
    expected: type[BaseException],
    detail: str,
) -> None:
    exc = sqlite_error(cls, name, message)
    got = translate_error(exc, LOC, query)
    assert type(got) is expected
    assert got.__cause__ is exc
    if isinstance(got, Conflict):
        assert got.kind == detail
    else:
        assert detail in str(got)


def test_non_sqlite_errors_pass_through() -> None:
    exc = ValueError("x")
    assert translate_error(exc, LOC) is exc


# -- the same rows, provoked for real through the backend ----------------------------------------


def record(stream: str, seq: int, event_id: str | None = None) -> Record:
    return Record(
        event_id or el.new_event_id(),
        stream,
        seq,
        1,
        "checkpoint",
        1,
        b"\x80",
        b"",
        None,
        None,
        bytes(32),
    )


@pytest.fixture
def backend(tmp_path: Path) -> SQLiteBackend:
    b = SQLiteBackend(tmp_path / "e.db", search=True)
    yield b  # type: ignore[misc]
    b.close()


def test_real_seq_conflict_writes_nothing(backend: SQLiteBackend) -> None:
    backend.append([record("s", 1)], Durability.NONE)
    with pytest.raises(Conflict) as err:
        backend.append([record("s", 2), record("s", 1)], Durability.NONE)
    assert err.value.kind == "seq"
    assert [r.seq for r in backend.read("s", 1, None)] == [1]
    assert backend.head_position() == 1


def test_real_id_conflict(backend: SQLiteBackend) -> None:
    first = record("s", 1)
    backend.append([first], Durability.NONE)
    with pytest.raises(Conflict) as err:
        backend.append([record("t", 1, first.id)], Durability.NONE)
    assert err.value.kind == "id"
    assert backend.last("t") is None


def test_real_fork_conflicts(backend: SQLiteBackend) -> None:
    backend.append([record("p", 1)], Durability.NONE)
    backend.create_fork(ForkInfo("f", "p", 1, 1))
    with pytest.raises(Conflict) as err:
        backend.append([record("f", 1)], Durability.NONE)
    assert err.value.kind == "seq"
    with pytest.raises(Conflict) as err:
        backend.create_fork(ForkInfo("f", "p", 1, 1))
    assert err.value.kind == "fork"
    with pytest.raises(Conflict) as err:
        backend.create_fork(ForkInfo("p", "f", 1, 1))
    assert err.value.kind == "fork"
    backend.append([record("f", 2)], Durability.NONE)


@pytest.mark.parametrize("query", ['"unterminated', "AND", "nocolumn:word", "(a OR"])
def test_real_bad_search_query(backend: SQLiteBackend, query: str) -> None:
    with pytest.raises(el.ValidationError) as err:
        backend.search(query)
    assert repr(query) in str(err.value)
    assert err.value.field == "query"


def test_real_closed_connection(backend: SQLiteBackend) -> None:
    backend.close()
    with pytest.raises(el.StoreClosedError):
        backend.read("s", 1, None)
    with pytest.raises(el.StoreClosedError):
        backend.append([record("s", 1)], Durability.NONE)


# -- errors of the open-time checks: only damage is corruption ------------------------------------


def coded_error(code: int, name: str) -> sqlite3.Error:
    exc = sqlite_error(sqlite3.OperationalError, name, f"message of {name}")
    exc.sqlite_errorcode = code  # type: ignore[attr-defined]
    return exc


OPEN_CASES = [
    (sqlite3.SQLITE_CORRUPT, "SQLITE_CORRUPT", el.CorruptionError, "is corrupt"),
    (sqlite3.SQLITE_NOTADB, "SQLITE_NOTADB", el.CorruptionError, "is corrupt"),
    (sqlite3.SQLITE_BUSY, "SQLITE_BUSY", el.BackendUnavailableError, "locked by another"),
    (sqlite3.SQLITE_LOCKED, "SQLITE_LOCKED", el.BackendUnavailableError, "locked by another"),
    (sqlite3.SQLITE_READONLY, "SQLITE_READONLY", el.BackendUnavailableError, "unchanged"),
    (
        sqlite3.SQLITE_READONLY_DIRECTORY,
        "SQLITE_READONLY_DIRECTORY",
        el.BackendUnavailableError,
        "writable?",
    ),
    (
        sqlite3.SQLITE_READONLY_ROLLBACK,
        "SQLITE_READONLY_ROLLBACK",
        el.BackendUnavailableError,
        "unchanged",
    ),
    (sqlite3.SQLITE_CANTOPEN, "SQLITE_CANTOPEN", el.BackendUnavailableError, "writable?"),
    (sqlite3.SQLITE_PERM, "SQLITE_PERM", el.BackendUnavailableError, "writable?"),
    (sqlite3.SQLITE_IOERR_READ, "SQLITE_IOERR_READ", el.BackendUnavailableError, "unchanged"),
    (sqlite3.SQLITE_AUTH, "SQLITE_AUTH", el.BackendUnavailableError, "unchanged"),
]


@pytest.mark.parametrize(("code", "name", "expected", "detail"), OPEN_CASES)
def test_open_time_errors_are_corruption_only_for_damage(
    code: int, name: str, expected: type[BaseException], detail: str
) -> None:
    """A read-only directory (SQLITE_READONLY_DIRECTORY) made a healthy store a CorruptionError:
    every error of the open-time checks but a damaged file's leaves the store as it was."""
    got = sqlite_schema.refusal(Path(LOC), coded_error(code, name))
    assert type(got) is expected
    assert LOC in str(got) and detail in str(got)
