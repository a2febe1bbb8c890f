"""The conformance suite with zstd compression on, for backends other than LMDB (which runs its
compressed variants in test_lmdb.py).

Every payload is compressed (`compress_min_bytes=0`), so the suite reads and writes codec 1
records only; `tamper` flips a byte of the compressed bytes.
"""

from __future__ import annotations

import itertools

import pytest

import eventlog as el
from eventlog.backends.memory import MemoryBackend
from tests.contract import BackendContract, FreshURL

ZSTD_ALWAYS = "compression=zstd&compress_min_bytes=0"


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
