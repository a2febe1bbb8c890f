"""The conformance suite with encryption at rest on: memory, SQLite, JSONL, LMDB (PostgreSQL runs
its encrypted variant in test_postgres.py).

Every store has a key directory (`keys=`), so the suite writes and reads sealed records only
(codec 16; the memory variant compresses every payload too: codec 17). `tamper` flips a byte of
the stored ciphertext, which must then fail to decrypt and be reported where it is.
"""

from __future__ import annotations

import base64
import itertools
import re
from pathlib import Path

import pytest

import eventlog as el
import tests.backends.test_lmdb as lmdb_tests
import tests.backends.test_sqlite as sqlite_tests
from eventlog.backends.jsonl import JSONLBackend
from eventlog.backends.memory import MemoryBackend
from eventlog.backends.sqlite import SQLiteBackend
from eventlog.encryption import ENCRYPTED
from tests.contract import BackendContract, DurableContract, FreshURL, text_events

pytest.importorskip("cryptography")


def flipped(data: bytes) -> bytes:
    """The same bytes with the middle one altered."""
    out = bytearray(data)
    out[len(out) // 2] ^= 0x5A
    return bytes(out)


class _Sealed:
    """Checks every encrypted variant adds to the suite."""

    expected_codec = ENCRYPTED

    def test_payloads_and_meta_are_stored_sealed(self, store: el.Store) -> None:
        events = text_events(2)
        store.append("s", [el.Event(data=events[0].data, meta={"who": "me"}), events[1]])
        records = store.backend.read("s", 1, None)
        assert [r.codec for r in records] == [self.expected_codec] * 2
        assert b"who" not in records[0].meta and records[1].meta == b""
        assert [e.meta for e in store.read("s")] == [{"who": "me"}, {}]


class TestMemoryEncrypted(_Sealed, BackendContract):
    expected_codec = ENCRYPTED | 1

    @pytest.fixture
    def fresh_url(self, tmp_path: Path) -> FreshURL:
        pytest.importorskip("zstandard")
        counter = itertools.count()
        keys = tmp_path / "keys"
        return lambda: (
            f"memory://e{next(counter)}?keys={keys}&compression=zstd&compress_min_bytes=0"
        )

    def tamper(self, store: el.Store, stream: str, seq: int) -> None:
        backend = store.backend
        assert isinstance(backend, MemoryBackend)
        (rec,) = backend.read(stream, seq, seq)
        assert rec.codec == ENCRYPTED | 1
        backend.tamper(stream, seq, flipped(rec.data))


class TestSQLiteEncrypted(_Sealed, DurableContract):
    @pytest.fixture
    def fresh_url(self, tmp_path: Path) -> FreshURL:
        counter = itertools.count()
        keys = tmp_path / "keys"
        return lambda: sqlite_tests.url_for(tmp_path / f"e{next(counter)}.db", keys=str(keys))

    def tamper(self, store: el.Store, stream: str, seq: int) -> None:
        backend = store.backend
        assert isinstance(backend, SQLiteBackend)
        assert backend.read(stream, seq, seq)[0].codec == ENCRYPTED
        sqlite_tests.edit_payload(backend.path, stream, seq, flipped)


class TestJSONLEncrypted(_Sealed, DurableContract):
    test_crash_harness = None  # type: ignore[assignment]  # run with encryption on SQLite only

    @pytest.fixture
    def fresh_url(self, tmp_path: Path) -> FreshURL:
        counter = itertools.count()
        keys = tmp_path / "keys"
        return lambda: f"jsonl://{tmp_path}/e{next(counter)}?keys={keys}"

    def tamper(self, store: el.Store, stream: str, seq: int) -> None:
        backend = store.backend
        assert isinstance(backend, JSONLBackend)
        info = backend.get_fork(stream)
        first = info.at_seq + 1 if info else 1
        path = backend.stream_path(stream)
        lines = path.read_bytes().split(b"\n")
        line = lines[seq - first + 1]
        match = re.search(rb'"data_b64":"([A-Za-z0-9+/=]+)"', line)
        assert match is not None
        new = base64.b64encode(flipped(base64.b64decode(match.group(1))))
        lines[seq - first + 1] = line[: match.start(1)] + new + line[match.end(1) :]
        path.write_bytes(b"\n".join(lines))


class TestLMDBEncrypted(_Sealed, DurableContract):
    test_crash_harness = None  # type: ignore[assignment]  # run with encryption on SQLite only

    @pytest.fixture
    def fresh_url(self, tmp_path: Path) -> FreshURL:
        pytest.importorskip("lmdb")
        counter = itertools.count()
        keys = tmp_path / "keys"
        return lambda: f"lmdb://{tmp_path}/e{next(counter)}?keys={keys}"

    def tamper(self, store: el.Store, stream: str, seq: int) -> None:
        assert store.backend.read(stream, seq, seq)[0].codec == ENCRYPTED
        lmdb_tests.flip_last_byte(store, stream, seq)
