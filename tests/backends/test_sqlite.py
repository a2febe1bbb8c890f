"""The conformance suite, crash harness and SQLite-specific behaviour on file databases."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path

import pytest

import eventlog as el
from eventlog.backends.sqlite import SQLiteBackend
from tests.contract import DurableContract, FreshURL


def url_for(path: Path, **options: str) -> str:
    """A sqlite:// URL for an absolute path (four slashes), with options."""
    query = "&".join(f"{k}={v}" for k, v in options.items())
    return f"sqlite:///{path}" + (f"?{query}" if query else "")


def raw_tamper(store: el.Store, stream: str, seq: int) -> None:
    """Flip the stored payload of one event with a separate raw sqlite3 connection."""
    backend = store.backend
    assert isinstance(backend, SQLiteBackend)
    conn = sqlite3.connect(backend.path)
    with conn:
        (data,) = conn.execute(
            "SELECT data FROM events WHERE stream = ? AND seq = ?", (stream, seq)
        ).fetchone()
        conn.execute(
            "UPDATE events SET data = ? WHERE stream = ? AND seq = ?",
            (data.replace(b"m", b"M", 1), stream, seq),
        )
    conn.close()


class TestSQLite(DurableContract):
    @pytest.fixture
    def fresh_url(self, tmp_path: Path) -> FreshURL:
        counter = itertools.count()
        return lambda: url_for(tmp_path / f"store{next(counter)}.db")

    def tamper(self, store: el.Store, stream: str, seq: int) -> None:
        raw_tamper(store, stream, seq)
