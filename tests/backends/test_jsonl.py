"""The conformance suite and the crash harness on the JSONL backend, plus its own bad inputs."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

import eventlog as el
from eventlog.backends.jsonl import JSONLBackend
from tests.contract import DurableContract, FreshURL


def _backend(store: el.Store) -> JSONLBackend:
    backend = store.backend
    assert isinstance(backend, JSONLBackend)
    return backend


def _line_span(path: Path, line_no: int) -> tuple[int, int]:
    """Byte range [start, end) of a 1-based line, newline excluded."""
    data = path.read_bytes()
    start = 0
    for _ in range(line_no - 1):
        start = data.index(b"\n", start) + 1
    return start, data.index(b"\n", start)


def tamper_file(path: Path, line_no: int) -> None:
    """Change one character of a string value in a line's payload, keeping its length."""
    start, end = _line_span(path, line_no)
    data = bytearray(path.read_bytes())
    line = bytes(data[start:end])
    payload = line.index(b'"data":')
    for m in re.finditer(rb'"(\w+)":"([^"\\])', line[payload + 7 :]):
        if m.group(1) != b"type":
            at = start + payload + 7 + m.start(2)
            data[at] = ord("X") if data[at] != ord("X") else ord("Y")
            path.write_bytes(bytes(data))
            return
    raise AssertionError(f"no string value to alter in {line!r}")


class TestJSONL(DurableContract):
    @pytest.fixture
    def fresh_url(self, tmp_path: Path) -> FreshURL:
        counter = itertools.count()
        return lambda: f"jsonl://{tmp_path}/j{next(counter)}"

    def tamper(self, store: el.Store, stream: str, seq: int) -> None:
        backend = _backend(store)
        info = backend.get_fork(stream)
        first = info.at_seq + 1 if info else 1
        tamper_file(backend.stream_path(stream), seq - first + 2)
