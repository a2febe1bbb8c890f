"""The conformance suite with zstd compression on: memory, SQLite, JSONL (LMDB runs its
compressed variants in test_lmdb.py).

Every payload is compressed (`compress_min_bytes=0`), so the suite reads and writes codec 1
records only; `tamper` flips a byte of the compressed bytes.
"""

from __future__ import annotations

import base64
import itertools
import re
from pathlib import Path

import pytest

import eventlog as el
import tests.backends.test_jsonl as jsonl_tests
import tests.backends.test_sqlite as sqlite_tests
from eventlog.backends.jsonl import JSONLBackend
from eventlog.backends.memory import MemoryBackend
from eventlog.backends.sqlite import SQLiteBackend
from tests.contract import BackendContract, FreshURL

ZSTD_ALWAYS = sqlite_tests.ZSTD_ALWAYS


def flipped(data: bytes) -> bytes:
    """The same bytes with the middle one altered."""
    out = bytearray(data)
    out[len(out) // 2] ^= 0x5A
    return bytes(out)


class TestMemoryCompressed(BackendContract):
    @pytest.fixture
    def fresh_url(self) -> FreshURL:
        counter = itertools.count()
        return lambda: f"memory://c{next(counter)}?{ZSTD_ALWAYS}"

    def tamper(self, store: el.Store, stream: str, seq: int) -> None:
        backend = store.backend
        assert isinstance(backend, MemoryBackend)
        (rec,) = backend.read(stream, seq, seq)
        assert rec.codec == 1
        backend.tamper(stream, seq, flipped(rec.data))


class TestSQLiteCompressed(sqlite_tests.TestSQLite):
    @pytest.fixture
    def fresh_url(self, tmp_path: Path) -> FreshURL:
        counter = itertools.count()
        return lambda: f"sqlite:///{tmp_path}/c{next(counter)}.db?{ZSTD_ALWAYS}"

    def tamper(self, store: el.Store, stream: str, seq: int) -> None:
        backend = store.backend
        assert isinstance(backend, SQLiteBackend)
        codecs = []

        def flip(data: bytes) -> bytes:
            codecs.append(backend.read(stream, seq, seq)[0].codec)
            return flipped(data)

        sqlite_tests.edit_payload(backend.path, stream, seq, flip)
        assert codecs == [1]


class TestJSONLCompressed(jsonl_tests.TestJSONL):
    @pytest.fixture
    def fresh_url(self, tmp_path: Path) -> FreshURL:
        counter = itertools.count()
        return lambda: f"jsonl://{tmp_path}/c{next(counter)}?{ZSTD_ALWAYS}"

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
        raw = base64.b64decode(match.group(1))
        new = base64.b64encode(flipped(raw))
        lines[seq - first + 1] = line[: match.start(1)] + new + line[match.end(1) :]
        path.write_bytes(b"\n".join(lines))
