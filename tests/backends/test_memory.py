"""The conformance suite on the memory backend."""

from __future__ import annotations

import itertools

import pytest

import eventlog as el
from eventlog.backends.memory import MemoryBackend
from tests.contract import BackendContract, FreshURL


class TestMemory(BackendContract):
    @pytest.fixture
    def fresh_url(self) -> FreshURL:
        counter = itertools.count()
        return lambda: f"memory://m{next(counter)}"

    def tamper(self, store: el.Store, stream: str, seq: int) -> None:
        backend = store.backend
        assert isinstance(backend, MemoryBackend)
        (rec,) = backend.read(stream, seq, seq)
        backend.tamper(stream, seq, rec.data.replace(b"m", b"M", 1))
