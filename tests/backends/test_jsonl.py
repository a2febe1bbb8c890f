"""The conformance suite and the crash harness on the JSONL backend, plus its own bad inputs."""

from __future__ import annotations

import errno
import fcntl
import gc
import itertools
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

import eventlog as el
from eventlog.backends import jsonl as jsonl_backend
from eventlog.backends.base import Record
from eventlog.backends.jsonl import JSONLBackend
from eventlog.backends.jsonl_names import is_stem, stem_for
from tests import strategies
from tests.contract import (
    DurableContract,
    FreshURL,
    Versioned,
    concurrent_single_appends,
    conflict_in_one_group,
    text_events,
    wait_for,
)


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


# -- helpers ---------------------------------------------------------------------------------


def _events(n: int, prefix: str = "m") -> list[el.Event]:
    return [el.Event(data=el.ModelInput.from_text(f"{prefix}{i}")) for i in range(n)]


def _texts(store: el.Store, stream: str) -> list[str]:
    return [e.data.text for e in store.read(stream)]  # type: ignore[attr-defined]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


def _open(root: Path, **options: object) -> el.Store:
    return el.open(f"jsonl://{root}", **options)


# -- stream names ----------------------------------------------------------------------------

ESCAPES = [
    "../escape",
    "../../../../etc/passwd",
    "/absolute/path",
    "..",
    ".",
    "a/../../b",
    "C:\\Windows\\system32",
    "\\\\server\\share",
    "CON",
    "nul",
    "com1.txt",
    "LPT9",
    "streams/../index.log",
    "~",
    "x" * 200,
    " leading space",
    "trailing.dot.",
]


def test_stem_shape_for_hostile_names() -> None:
    for name in ESCAPES:
        stem = stem_for(name)
        assert is_stem(stem), stem
        assert "/" not in stem and "\\" not in stem and "." not in stem and "\x00" not in stem
        assert len(stem) < 100
        # Windows reserves CON, CON.txt, ...: a stem always has a `~hash` after the slug
        assert stem.split(".")[0].upper() not in {"CON", "PRN", "AUX", "NUL", "COM1", "LPT9"}


def test_path_escapes_stay_inside_the_directory(root: Path) -> None:
    with _open(root) as store:
        for i, name in enumerate(ESCAPES):
            store.append(name, _events(1, f"e{i}-"))
        for i, name in enumerate(ESCAPES):
            assert _texts(store, name) == [f"e{i}-0"]
        assert sorted(s.stream for s in store.streams()) == sorted(ESCAPES)
    outside = {p for p in root.parent.rglob("*") if root not in p.parents and p != root}
    assert outside == set(), outside
    names = {p.name for p in (root / "streams").iterdir()}
    assert len(names) == len(ESCAPES)
    assert all(is_stem(n.removesuffix(".jsonl")) for n in names)
    with _open(root) as store:
        assert sorted(s.stream for s in store.streams()) == sorted(ESCAPES)


COLLIDING = [
    ["A", "a"],
    ["a/b", "a_b", "a b", "a.b", "a\\b", "A/B"],
    ["会话", "对话", "🙂", "_"],
    ["Chat-1", "chat-1", "CHAT-1", "chat_1"],
]


@pytest.mark.parametrize("names", COLLIDING, ids=["case", "separators", "dropped", "mixed"])
def test_colliding_names_get_distinct_files(root: Path, names: list[str]) -> None:
    stems = [stem_for(n) for n in names]
    # distinct even after case folding (case-insensitive file systems)
    assert len({s.lower() for s in stems}) == len(names)
    with _open(root) as store:
        for i, name in enumerate(names):
            store.append(name, _events(i + 1, f"{i}-"))
    with _open(root) as store:
        for i, name in enumerate(names):
            assert _texts(store, name) == [f"{i}-{k}" for k in range(i + 1)]
        assert sorted(s.stream for s in store.streams()) == sorted(names)
        assert store.verify().ok


def test_file_name_is_readable(root: Path) -> None:
    with _open(root) as store:
        store.append("Chat/42", _events(1))
        path = _backend(store).stream_path("Chat/42")
    assert path.name.startswith("chat_42~") and path.suffix == ".jsonl"
    header, line = path.read_text().splitlines()
    assert '"stream":"Chat/42"' in header
    assert line.startswith('{"seq":1,"pos":1,"id":')
    assert '"data":{"type":"model_input"' in line


def test_file_holding_another_name_is_reported(root: Path) -> None:
    with _open(root) as store:
        store.append("a", _events(1))
        path = _backend(store).stream_path("a")
    path.write_bytes(path.read_bytes().replace(b'"stream":"a"', b'"stream":"b"', 1))
    with pytest.raises(el.CorruptionError, match=r"line 1.*does not match the file name"):
        _open(root)


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under root with its bytes (None for a directory)."""
    return {
        str(p.relative_to(root)): None if p.is_dir() else p.read_bytes() for p in root.rglob("*")
    }


@pytest.mark.parametrize("version", [2, 99])
@pytest.mark.parametrize(
    "damage", ["none", "index.log deleted", "only streams/ kept", "torn index"]
)
def test_a_newer_format_version_is_refused_and_nothing_changes(
    root: Path, version: int, damage: str
) -> None:
    with _open(root) as store:
        store.append("a", _events(1))
        store.append("b", _events(1))
        path = _backend(store).stream_path("b")
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b'"eventlog_jsonl":1', b'"eventlog_jsonl":%d' % version, 1))
    if damage == "index.log deleted":
        (root / "index.log").unlink()
    elif damage == "only streams/ kept":  # as a git checkout of the store has it
        for name in ("index.log", "lock"):
            (root / name).unlink()
        for name in ("blobs", "snapshots"):
            (root / name).rmdir()
    elif damage == "torn index":  # b's append unindexed, a torn line after a's
        index = root / "index.log"
        index.write_bytes(index.read_bytes().splitlines(keepends=True)[0] + b"B 2 1 b~")
    before = _tree(root)
    with pytest.raises(el.SchemaVersionError, match="upgrade eventlog") as caught:
        _open(root)
    assert f"{path} line 1" in str(caught.value)
    assert f"format version {version} is newer" in str(caught.value)
    assert _tree(root) == before


def test_format_version_0_was_never_written_and_is_damage(root: Path) -> None:
    with _open(root) as store:
        store.append("a", _events(1))
        path = _backend(store).stream_path("a")
    path.write_bytes(path.read_bytes().replace(b'"eventlog_jsonl":1', b'"eventlog_jsonl":0', 1))
    before = _tree(root)
    with pytest.raises(el.CorruptionError, match=r"line 1: format version 0") as caught:
        _open(root)
    assert not isinstance(caught.value, el.SchemaVersionError)
    assert _tree(root) == before


def test_the_index_in_memory_stays_small_with_one_event_appends(root: Path) -> None:
    """docs/backends/jsonl.md, "Limits": about 220 B per event (565 B when each index line was
    an object of its own, with its own ids tuple and boxed numbers)."""
    n = 20_000
    with _open(root, durability="none") as store:
        for i in range(n):
            store.append(f"c-{i % 10}", [el.ModelInput.from_text("hi")])
    gc.collect()
    tracemalloc.start()
    try:
        store = _open(root)
        used = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    with store:
        assert store.read_last("c-3", 1)[0].position == n - 6
        assert len(list(store.read_all(after=n - 15))) == 15
    assert used / n < 300, f"{used / n:.0f} B per event"


# -- crash recovery --------------------------------------------------------------------------


def _unindex_last(root: Path) -> None:
    """Drop index.log's last line: the writer of that append died before its commit point."""
    index = root / "index.log"
    index.write_bytes(b"".join(index.read_bytes().splitlines(keepends=True)[:-1]))


def test_torn_tail_is_cut_and_reported(root: Path, caplog: pytest.LogCaptureFixture) -> None:
    with _open(root) as store:
        store.append("s", _events(3))
        store.append("s", _events(1, "last"))
        path = _backend(store).stream_path("s")
    _unindex_last(root)
    size = path.stat().st_size
    with path.open("r+b") as f:  # a crash mid-line: the uncommitted last line loses its end
        f.truncate(size - 40)
    with caplog.at_level("WARNING", logger="eventlog.backends.jsonl"), _open(root) as store:
        repairs = _backend(store).repairs
        assert len(repairs) == 1
        (repair,) = repairs
        assert repair.file == str(path) and repair.line == 5
        assert repair.offset == path.stat().st_size and repair.length == size - 40 - repair.offset
        assert "torn" in repair.reason
        assert _texts(store, "s") == ["m0", "m1", "m2"]
        assert store.verify().ok
        store.append("s", _events(1, "after"), expected_seq=3)
        assert _texts(store, "s") == ["m0", "m1", "m2", "after0"]
    assert any("cut" in r.message and str(path) in r.message for r in caplog.records)
    with _open(root) as store:
        assert _backend(store).repairs == []
        assert store.verify().ok


@pytest.mark.parametrize("cut", [1, 40, 200])
def test_committed_events_are_never_cut(
    root: Path, cut: int, caplog: pytest.LogCaptureFixture
) -> None:
    """A committed append (its index line written) whose lines lost their end was damaged, not
    torn by a crash: opening the store (even for a read) refuses with CorruptionError and
    changes nothing. Deleting index.log is the explicit way to accept the loss."""
    with _open(root) as store:
        store.append("s", _events(3))
        store.append("s", _events(8, "batch"))
        store.append("t", _events(1, "t"))
        path = _backend(store).stream_path("s")
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size - cut)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    with (
        caplog.at_level("INFO", logger="eventlog"),
        pytest.raises(el.CorruptionError, match="lists the stream's events up to seq 11") as err,
    ):
        _open(root)
    notices = [r.getMessage() for r in caplog.records]
    assert any("is shorter than indexed" in m for m in notices), notices
    assert not any(" line 0" in m for m in notices), notices  # no line to name: none named
    assert "Nothing was changed" in str(err.value) and "delete index.log" in str(err.value)
    assert str(path) in str(err.value)
    # Where the damage is (the torn line), and that the cut would take the whole append.
    assert re.search(r"at seq 1[01], in the append that began at seq 4", str(err.value))
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    (root / "index.log").unlink()
    assert el.store_exists(f"jsonl://{root}")  # still a store (read commands open it)
    with _open(root) as store:
        (repair,) = _backend(store).repairs
        assert repair.line == 5  # the whole unfinished batch, seqs 4-11
        assert "in the append that began at seq 4" in repair.reason
        assert _texts(store, "s") == ["m0", "m1", "m2"]
        assert _texts(store, "t") == ["t0"]


@pytest.mark.parametrize("same_length", [True, False])
def test_a_stream_file_from_a_diverged_copy_never_replaces_committed_events(
    tmp_path: Path, same_length: bool
) -> None:
    """A copy of the store went on differently; its file of a stream is copied over the
    original's. The acknowledged events it lacks are never silently swapped for its own:
    reads (and verify) name the line when the file is as long as indexed, and an open that
    would rebuild the index refuses, changing nothing. Deleting index.log accepts the file."""
    original, copy = tmp_path / "original", tmp_path / "copy"
    with _open(original) as store:
        store.append("chat", _events(3))
    shutil.copytree(original, copy)
    with _open(original) as store:
        store.append("chat", _events(1, "acked"))
        path = _backend(store).stream_path("chat")
    with _open(copy) as store:
        store.append("chat", _events(1, "other" if same_length else "longer text"))
    shutil.copyfile(copy / "streams" / path.name, path)
    message = r"seq 4: holds event .*, but index.log lists event .* at this seq as committed"
    if same_length:
        with _open(original) as store:
            assert [e.seq for e in store.read("chat", 1, 3)] == [1, 2, 3]
            with pytest.raises(el.CorruptionError, match=message) as err:
                _texts(store, "chat")
            assert f"{path} line 5" in str(err.value)
            with pytest.raises(el.CorruptionError, match=message):
                list(store.read_all())
            (problem,) = store.verify().problems
            assert problem.seq == 4 and "index.log lists event" in problem.message
        return
    before = {p: p.read_bytes() for p in original.rglob("*") if p.is_file()}
    with pytest.raises(el.CorruptionError, match=message) as err:
        _open(original)
    assert "Nothing was changed" in str(err.value) and f"{path} line 5" in str(err.value)
    assert {p: p.read_bytes() for p in original.rglob("*") if p.is_file()} == before
    (original / "index.log").unlink()
    with _open(original) as store:
        assert _texts(store, "chat") == ["m0", "m1", "m2", "longer text0"]
        assert store.verify().ok


def test_a_rebuild_after_power_loss_damage_in_the_index_accepts_a_torn_last_line(
    root: Path,
) -> None:
    """index.log is not synced: a power loss can zero a block inside it and tear its last
    line, even inside an id. The torn line was never a commit, so it claims nothing: the
    rebuild indexes the files (which hold that append whole) and every event reads back."""
    with _open(root) as store:
        for i in range(6):
            store.append("s" if i % 2 else "t", _events(2, f"e{i}-"))
        expected = [(e.stream, e.seq, e.id) for e in store.read_all()]
    index = root / "index.log"
    lines = index.read_bytes().split(b"\n")[:-1]
    lines[2] = b"\x00" * len(lines[2])  # a zero-filled block: the index must be rebuilt
    index.write_bytes(b"\n".join(lines[:-1]) + b"\n" + lines[-1][:-10])  # torn inside an id
    with _open(root) as store:
        assert [(e.stream, e.seq, e.id) for e in store.read_all()] == expected
        assert store.verify().ok


def test_a_short_write_of_an_index_line_is_finished(
    root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """write(2) may write less than asked (a signal, a nearly full disk): the commit point is
    the whole index line, so the rest is written before the append returns."""
    real_write = os.write
    short = []

    def half_once(fd: int, data: bytes | memoryview) -> int:
        if not short and len(data) > 20:
            short.append(len(data))
            return real_write(fd, bytes(data[: len(data) // 2]))
        return real_write(fd, data)

    with _open(root) as store:
        store.append("s", _events(2))
        monkeypatch.setattr(os, "write", half_once)
        store.append("s", _events(3, "n"))
        store.append("t", _events(1, "t"))
        monkeypatch.undo()
        assert short and _texts(store, "s") == ["m0", "m1", "n0", "n1", "n2"]
    with caplog.at_level("WARNING"), _open(root) as store:
        assert _texts(store, "s") == ["m0", "m1", "n0", "n1", "n2"] and _texts(store, "t") == ["t0"]
        assert store.verify().ok and _backend(store).repairs == []
    assert "rebuilding" not in caplog.text


def test_a_short_index_write_that_then_fails_leaves_no_torn_line(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that stops part way through an index line and then fails (the disk full): the
    append is not committed, and the torn start of its line is cut, so the next append is
    indexed cleanly and the store stays readable."""
    real_write = os.write
    calls: list[int] = []

    def short_then_full(fd: int, data: bytes | memoryview) -> int:
        if fd == index_fd:
            calls.append(len(data))
            if len(calls) == 1:
                return real_write(fd, bytes(data[:10]))
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    with _open(root) as store:
        store.append("a", _events(1, "one"))
        index_fd = _backend(store)._index_fd
        monkeypatch.setattr(os, "write", short_then_full)
        with pytest.raises(el.BackendUnavailableError, match="the append was not written"):
            store.append("a", _events(1, "two"))
        monkeypatch.undo()
        assert (root / "index.log").read_bytes().endswith(b"\n")
        store.append("a", _events(1, "three"))
        assert _texts(store, "a") == ["one0", "three0"]
        assert store.verify().ok


def test_an_interrupt_after_the_index_write_keeps_the_commit(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C landing just after the index line is written: the append is committed, so its
    lines stay (cutting them would leave an index that lists events the file lacks)."""
    store = _open(root)
    store.append("s", _events(1, "first"))
    real = os.write

    def write_then_interrupt(fd: int, data: bytes) -> int:
        done = real(fd, data)
        if bytes(data).startswith(b"B "):
            raise KeyboardInterrupt
        return done

    monkeypatch.setattr(os, "write", write_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        store.append("s", _events(1, "interrupted"))
    monkeypatch.undo()
    assert _texts(store, "s") == ["first0", "interrupted0"]
    store.append("s", _events(1, "after"))
    store.close()
    with _open(root) as again:
        assert _backend(again).repairs == []
        assert _texts(again, "s") == ["first0", "interrupted0", "after0"]
        assert again.verify().ok


def test_a_file_cut_at_an_append_boundary_is_not_silently_shorter(root: Path) -> None:
    with _open(root) as store:
        store.append("s", _events(2))
        first_end = _backend(store).stream_path("s").stat().st_size
        store.append("s", _events(2, "gone"))
        path = _backend(store).stream_path("s")
    with path.open("r+b") as f:
        f.truncate(first_end)
    with pytest.raises(el.CorruptionError, match="holds seqs up to 2 only, but index.log lists"):
        _open(root)


def test_unfinished_batch_is_cut_whole(root: Path) -> None:
    with _open(root) as store:
        store.append("s", _events(1))
        store.append("s", _events(3, "b"))
        path = _backend(store).stream_path("s")
        index = root / "index.log"
    lines = path.read_bytes().splitlines(keepends=True)
    # the crash hit after two of the batch's three lines; its index line was never written
    path.write_bytes(b"".join(lines[:4]))
    index.write_bytes(b"".join(index.read_bytes().splitlines(keepends=True)[:1]))
    with _open(root) as store:
        (repair,) = _backend(store).repairs
        assert repair.line == 3 and "unfinished" in repair.reason
        assert _texts(store, "s") == ["m0"]
        assert store.head_position() == 1


def test_complete_unindexed_append_is_rolled_forward(root: Path) -> None:
    with _open(root) as store:
        store.append("s", _events(2))
        store.append("t", _events(1, "t"))
        first = store.head_position()
    index = root / "index.log"
    # the writer died after its lines were written but before its index line
    index.write_bytes(b"".join(index.read_bytes().splitlines(keepends=True)[:1]))
    with _open(root) as store:
        assert _backend(store).repairs == []
        assert _texts(store, "t") == ["t0"]
        assert store.head_position() == first
        assert [e.position for e in store.read_all()] == [1, 2, 3]


_CRASH_BEFORE_INDEX = """
import os, sys
import eventlog as el
from eventlog.backends import jsonl

def die(self, staged):  # the lines are written and synced; the process dies before indexing
    for item in staged:
        os.fdatasync(self._fd(item.st))
    os._exit(0)

jsonl.JSONLBackend._sync_and_index = die
store = el.open(f"jsonl://{sys.argv[1]}")
store.append(sys.argv[2], [el.Event(data=el.ModelInput.from_text(sys.argv[3]))])
"""


def _crash_before_index(root: Path, stream: str, text: str) -> None:
    """A real process appends to `stream` and dies between its synced lines and its index line."""
    subprocess.run([sys.executable, "-c", _CRASH_BEFORE_INDEX, str(root), stream, text], check=True)


def _where(store: el.Store) -> list[tuple[str, int, int, str]]:
    return [(e.stream, e.seq, e.position, e.data.text) for e in store.read_all()]  # type: ignore[attr-defined]


def test_leftover_at_positions_taken_since_is_cut_and_positions_never_move(root: Path) -> None:
    """A crashed writer's complete, unindexed append keeps the positions its lines name only while
    they are free. Here this store indexed another append at them first: the leftover is cut and
    reported (it was never acknowledged), and a rebuild of the index from the files moves
    nothing."""
    with _open(root) as store:
        store.append("a", _events(1, "a"))  # position 1
        _crash_before_index(root, "b", "crashed")  # lines at position 2, no index line
        store.append("c", _events(1, "c"))  # position 2, this store knows nothing of b's lines
        store.append("b", _events(1, "b"))  # finds b's leftover: its position is taken
        (repair,) = _backend(store).repairs
        assert "taken since" in repair.reason and repair.line == 2
        where = _where(store)
    assert where == [("a", 1, 1, "a0"), ("c", 1, 2, "c0"), ("b", 1, 3, "b0")]
    (root / "index.log").unlink()  # a cache: rebuilt from the stream files on open
    with _open(root) as store:
        assert _where(store) == where
        assert store.verify().ok


def _behind_a_leader(
    store: el.Store, root: Path, appends: list[tuple[str, list[el.Event]]]
) -> None:
    """Run the appends from threads in order while the write lock is held: the first leads a
    group of its own and waits for the lock, the others queue and share the next commit."""
    queue = _backend(store)._appends
    lock = os.open(root / "lock", os.O_RDWR)
    fcntl.flock(lock, fcntl.LOCK_EX)
    threads = [threading.Thread(target=store.append, args=item) for item in appends]
    threads[0].start()
    assert wait_for(lambda: queue._leading)
    for queued, th in enumerate(threads[1:], 1):
        th.start()
        assert wait_for(lambda n=queued: len(queue._queue) == n)
    fcntl.flock(lock, fcntl.LOCK_UN)
    os.close(lock)
    for th in threads:
        th.join(30)


def test_recovery_inside_a_group_commit_keeps_the_index_in_position_order(root: Path) -> None:
    """A job of a group commit that finds a crashed writer's leftover must not index it ahead
    of the jobs staged before it: the index stays in position order, so another store object
    (another process, say) keeps seeing every commit, and reopening moves nothing."""
    store, other = _open(root), _open(root)
    for name in ("x", "a", "b"):
        store.append(name, _events(1, name))
    _crash_before_index(root, "b", "crashed")
    _behind_a_leader(store, root, [(name, _events(1, f"{name}1-")) for name in ("x", "a", "b")])
    index = (root / "index.log").read_text().splitlines()
    positions = [int(line.split()[1]) for line in index if line.startswith("B ")]
    assert positions == sorted(set(positions)), index
    assert _where(other) == _where(store)
    store.append("x", _events(1, "x2-"))
    assert other.head_position() == store.head_position()
    where = _where(store)
    store.close()
    other.close()
    with _open(root) as again:
        assert _where(again) == where
        assert again.verify().ok


_CRASH_IN_A_GROUP = """
import os, sys, threading, time
import eventlog as el
from eventlog.backends import jsonl

index = jsonl.JSONLBackend._sync_and_index

def die(self, staged):  # a group's lines are written and synced; no index line
    if len(staged) < 2:
        return index(self, staged)
    for item in staged:
        os.fdatasync(self._fd(item.st))
    os._exit(0)

jsonl.JSONLBackend._sync_and_index = die
store = el.open(f"jsonl://{sys.argv[1]}")
queue = store.backend._appends
for name in sys.argv[2:]:  # cache each stream's tail: no read waits for the leader's lock
    store._tail(name)
print("open", flush=True)
sys.stdin.readline()  # the parent now holds the write lock
# The parent holds the write lock: the first append leads a group of its own and waits for
# it; the others queue behind it and form the next group, the one that dies.
for i, name in enumerate(sys.argv[2:]):
    threading.Thread(target=store.append, args=(name, [el.ModelInput.from_text(name)])).start()
    while len(queue._queue) + queue._leading < i + 1:
        time.sleep(0.001)
print("queued", flush=True)
time.sleep(60)
"""


def test_a_leftover_met_while_a_group_is_staged_is_cut(root: Path) -> None:
    """Another process commits w at 5, then its group [u, s] leaves lines at 6 and 7 and dies.
    This store's group [t, s] stages t at 6, then meets s's leftover at 7: indexing it there
    would write its index line ahead of t's, so it is cut (it was never acknowledged); the
    index stays in position order, and reopening moves nothing (u's leftover, at a taken
    position by then, is cut on open)."""
    store = _open(root)
    for name in ("u", "s", "t", "x"):
        (first,) = store.append(name, _events(1, name))
    with subprocess.Popen(
        [sys.executable, "-c", _CRASH_IN_A_GROUP, str(root), "w", "u", "s"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as crashing:
        assert crashing.stdin is not None and crashing.stdout is not None
        assert crashing.stdout.readline() == "open\n"
        lock = os.open(root / "lock", os.O_RDWR)
        fcntl.flock(lock, fcntl.LOCK_EX)
        crashing.stdin.write("go\n")
        crashing.stdin.flush()
        assert crashing.stdout.readline() == "queued\n"
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)
        assert crashing.wait(30) == 0  # died between its synced lines and its index line
    retry = el.Event(id=first.id, data=first.data)  # x's event again: takes no position
    _behind_a_leader(
        store, root, [("x", [retry]), ("t", _events(1, "t1-")), ("s", _events(1, "s1-"))]
    )
    (repair,) = _backend(store).repairs
    assert "from 7, met while a group is staged" in repair.reason
    index = (root / "index.log").read_text().splitlines()
    positions = [int(line.split()[1]) for line in index if line.startswith("B ")]
    assert positions == [1, 2, 3, 4, 5, 6, 7], index
    where = _where(store)
    assert where[4:] == [("w", 1, 5, "w"), ("t", 2, 6, "t1-0"), ("s", 2, 7, "s1-0")]
    store.close()
    with _open(root) as again:
        assert _where(again) == where
        assert again.verify().ok


EVENT_ID = "01a20dc7-06de-7377-a29c-9b4d65c228f0"
"""A well-formed event id for index lines written by hand."""


def test_an_index_naming_a_missing_stream_file_stops_the_open(root: Path) -> None:
    """index.log lists committed events in a file that is gone: an error, nothing changed;
    deleting index.log accepts the loss and rebuilds from the files that remain."""
    with _open(root) as store:
        store.append("a", _events(2))
        store.append("b", _events(1, "b"))
        where = _where(store)
    index = root / "index.log"
    index.write_bytes(
        index.read_bytes() + b"B 4 1 zz~0000000000000000 1 34 300 1 " + EVENT_ID.encode() + b"\n"
    )
    damaged = index.read_bytes()
    with pytest.raises(el.CorruptionError, match="zz~0000000000000000.jsonl, which is missing"):
        _open(root)
    assert index.read_bytes() == damaged
    index.unlink()
    with _open(root) as store:
        assert _where(store) == where
        assert store.verify().ok


def test_an_append_whose_sync_failed_is_never_committed_later(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fdatasync failing (EIO: the disk lost the write) fails the append with the store's error,
    and its lines are cut from the file at once: neither the next append to the stream nor the
    next open rolls forward an append its caller was told had failed."""
    with _open(root) as store:
        store.append("s", _events(1, "first"))
        size = _backend(store).stream_path("s").stat().st_size

        def failing(fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(os, "fdatasync", failing)
        with pytest.raises(el.BackendUnavailableError, match="Input/output error"):
            store.append("s", _events(1, "lost"))
        monkeypatch.undo()
        assert _backend(store).stream_path("s").stat().st_size == size
        assert _texts(store, "s") == ["first0"]
        store.append("s", _events(1, "again"))
        assert _texts(store, "s") == ["first0", "again0"]
    with _open(root) as store:
        assert _texts(store, "s") == ["first0", "again0"]
        assert _backend(store).repairs == []
        assert store.verify().ok


def test_torn_index_line_is_cut(root: Path) -> None:
    with _open(root) as store:
        store.append("s", _events(2))
    index = root / "index.log"
    index.write_bytes(index.read_bytes() + b"B 3 1 s~0")
    with _open(root) as store:
        (repair,) = _backend(store).repairs
        assert repair.file == str(index) and "torn index" in repair.reason
        assert _texts(store, "s") == ["m0", "m1"]


@pytest.mark.parametrize("damage", ["missing", "garbage", "stale"])
def test_index_is_rebuilt_from_the_logs(root: Path, damage: str) -> None:
    with _open(root) as store:
        store.append("a", _events(2))
        store.append("b", _events(1, "b"))
        store.fork("a", "f", 1)
        store.append("f", _events(1, "f"))
        store.append("a", _events(1, "a"))
        expected = [(e.stream, e.seq, e.position) for e in store.read_all()]
    index = root / "index.log"
    if damage == "missing":
        index.unlink()
    elif damage == "garbage":
        index.write_bytes(b"not an index\n" + index.read_bytes())
    else:
        index.write_bytes(index.read_bytes().replace(b"B 1 2 ", b"B 1 2 zz~0000000000000000 "))
    with _open(root) as store:
        assert [(e.stream, e.seq, e.position) for e in store.read_all()] == expected
        assert _texts(store, "f") == ["m0", "f0"]
        assert store.forks("a")[0].stream == "f"
        assert store.verify().ok


def _interleaved(root: Path) -> list[tuple[str, int, int]]:
    """Streams a and b, 10 single-event appends each, alternating; their (stream, seq, pos)."""
    with _open(root) as store:
        for i in range(10):
            store.append("a", _events(1, f"a{i}-"))
            store.append("b", _events(1, f"b{i}-"))
        return [(e.stream, e.seq, e.position) for e in store.read_all()]


def test_a_lost_index_never_costs_other_streams_their_events(root: Path) -> None:
    """Without index.log, the files are rebuilt into one: none is cut for a position gap."""
    before = _interleaved(root)
    paths = {s: JSONLBackend(root).stream_path(s) for s in ("a", "b")}
    b_bytes = paths["b"].read_bytes()
    (root / "index.log").unlink()
    paths["a"].unlink()  # lost with it
    with _open(root) as store:
        assert [(s, q, p) for s, q, p in before if s == "b"] == [
            (e.stream, e.seq, e.position) for e in store.read_all()
        ]
        assert store.verify().ok and not _backend(store).repairs
    assert paths["b"].read_bytes() == b_bytes


@pytest.mark.parametrize("damage", ["drop a line", "drop the first line", "edit an offset"])
def test_an_index_line_lost_or_edited_is_caught_and_rebuilt(root: Path, damage: str) -> None:
    before = _interleaved(root)
    index = root / "index.log"
    lines = index.read_bytes().splitlines(keepends=True)
    if damage == "drop a line":
        del lines[7]
    elif damage == "drop the first line":
        del lines[0]
    else:  # the offset field of a line of b
        fields = lines[5].split(b" ")
        fields[4] = str(int(fields[4]) + 1).encode()
        lines[5] = b" ".join(fields)
    index.write_bytes(b"".join(lines))
    with _open(root) as store:
        assert [(e.stream, e.seq, e.position) for e in store.read_all()] == before
        assert [e.seq for e in store.read("a")] == list(range(1, 11))
        assert store.verify().ok


def test_an_index_deleted_while_open_stops_the_store_and_costs_nothing(root: Path) -> None:
    before = _interleaved(root)
    with _open(root) as store:
        (root / "index.log").unlink()
        with pytest.raises(el.CorruptionError, match="deleted while the store was open"):
            store.append("a", _events(1, "late"))
    with _open(root) as store:
        assert [(e.stream, e.seq, e.position) for e in store.read_all()] == before
        assert store.verify().ok and not _backend(store).repairs


def test_a_line_pasted_from_another_stream_cannot_reorder_a_rebuild(root: Path) -> None:
    with _open(root) as store:
        for i in range(6):
            store.append("other", _events(1, f"o{i}-"))
        for i in range(6):
            store.append("chat", _events(1, f"c{i}-"))
        chat, other = (_backend(store).stream_path(s) for s in ("chat", "other"))
    c, o = chat.read_bytes().split(b"\n"), other.read_bytes().split(b"\n")
    c[4] = o[4]  # seq 4 of chat replaced by seq 4 of other (valid JSON, another position)
    chat.write_bytes(b"\n".join(c))
    (root / "index.log").unlink()
    with _open(root) as store:
        assert [e.seq for e in store.read("chat")] == list(range(1, 7))
        positions = [e.position for e in store.read_all()]
        assert positions == sorted(set(positions))
        pasted, original = store.verify().problems
        assert (pasted.stream, pasted.seq) == ("chat", 4) and "hash mismatch" in pasted.message
        # The same id is now in two streams: the index maps it to one of them only.
        assert (original.stream, original.seq, original.event_id) == ("other", 4, pasted.event_id)
        assert "index.log says position" in original.message


def test_zero_filled_tail_is_cut(root: Path) -> None:
    with _open(root) as store:
        store.append("s", _events(2))
        path = _backend(store).stream_path("s")
    with path.open("ab") as f:  # power loss: the size grew, the data never arrived
        f.write(b"\x00" * 300)
    with _open(root) as store:
        (repair,) = _backend(store).repairs
        assert repair.length == 300 and "zero" in repair.reason
        assert _texts(store, "s") == ["m0", "m1"]


# -- damaged and edited files ----------------------------------------------------------------


def test_damaged_middle_line_names_file_and_line(root: Path) -> None:
    with _open(root) as store:
        store.append("s", _events(5))
        path = _backend(store).stream_path("s")
    start, end = _line_span(path, 4)  # seq 3
    data = bytearray(path.read_bytes())
    data[start + 10 : start + 20] = b"#" * 10
    path.write_bytes(bytes(data))
    with _open(root) as store:
        with pytest.raises(el.CorruptionError) as err:
            list(store.read("s"))
        assert f"{path} line 4" in str(err.value) and err.value.seq == 3
        assert [e.seq for e in store.read("s", 1, 2)] == [1, 2]
        with pytest.raises(el.CorruptionError, match="line 4"):
            list(store.read_all())
        report = store.verify()
        (problem,) = report.problems
        assert problem.stream == "s" and problem.seq == 3
        assert f"{path} line 4" in problem.message


def test_damaged_line_found_while_rebuilding(root: Path) -> None:
    with _open(root) as store:
        store.append("s", _events(3))
        path = _backend(store).stream_path("s")
    (root / "index.log").unlink()
    start, _ = _line_span(path, 3)
    data = bytearray(path.read_bytes())
    data[start] = ord("#")
    path.write_bytes(bytes(data))
    with pytest.raises(el.CorruptionError, match=r"line 3"):
        _open(root)


def test_hand_edited_file_is_caught_by_the_hash_chain(root: Path) -> None:
    with _open(root) as store:
        store.append("s", _events(5))
        path = _backend(store).stream_path("s")
    text = path.read_text()
    assert text.count('"text":"m2"') == 1
    path.write_text(text.replace('"text":"m2"', '"text":"m2, edited by hand"'))
    with _open(root) as store:
        report = store.verify()
        (problem,) = report.problems
        assert (problem.stream, problem.seq) == ("s", 3)
        assert "hash mismatch" in problem.message


def test_same_length_edit_while_open_is_caught(root: Path) -> None:
    with _open(root) as store:
        store.append("s", _events(5))
        tamper_file(_backend(store).stream_path("s"), 3)
        (problem,) = store.verify().problems
        assert problem.seq == 2


# -- locks and processes ---------------------------------------------------------------------

HOLDER = """
import fcntl, sys, time
fd = open(sys.argv[1], "a+b")
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold_lock(root: Path, seconds: float) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root / "lock"), str(seconds)], stdout=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"locked\n"
    return proc


def test_lock_held_by_another_process_times_out_clearly(root: Path) -> None:
    with _open(root, lock_timeout=0.3) as store:
        store.append("s", _events(1))
        proc = _hold_lock(root, 30)
        try:
            t0 = time.monotonic()
            with pytest.raises(el.BackendUnavailableError, match="holds the write lock"):
                store.append("s", _events(1, "blocked"))
            assert 0.25 < time.monotonic() - t0 < 5
            with pytest.raises(el.BackendUnavailableError, match="lock_timeout"):
                _open(root, lock_timeout=0.1)
            assert _texts(store, "s") == ["m0"]  # readers do not need the lock
        finally:
            proc.kill()
            proc.communicate()
        store.append("s", _events(1, "after"))
        assert _texts(store, "s") == ["m0", "after0"]


def test_writer_waits_for_a_briefly_held_lock(root: Path) -> None:
    with _open(root) as store:
        store.append("s", _events(1))
        proc = _hold_lock(root, 1.5)  # long enough that a busy machine still finds it held
        try:
            t0 = time.monotonic()
            store.append("s", _events(1, "waited"))
            assert time.monotonic() - t0 > 0.2
        finally:
            proc.communicate()
        assert _texts(store, "s") == ["m0", "waited0"]


WRITER = """
import sys
import eventlog as el
store = el.open(sys.argv[1], durability="none")
for i in range(int(sys.argv[3])):
    store.append(sys.argv[2] if i % 2 else "shared", [el.Checkpoint(label=str(i))] * 1)
store.close()
"""


def test_processes_appending_concurrently(root: Path) -> None:
    url = f"jsonl://{root}"
    el.open(url).close()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, url, f"p{i}", "60"], env=env)
        for i in range(3)
    ]
    seen: list[int] = []
    with _open(root) as store:
        sub = store.subscribe()
        while any(p.poll() is None for p in procs) or len(seen) < 180:
            seen.extend(e.position for e in sub.poll(timeout=0.05))
            assert len(seen) <= 180
        assert all(p.returncode == 0 for p in procs)
        assert seen == list(range(1, 181))
        shared = list(store.read("shared"))
        assert [e.seq for e in shared] == list(range(1, 91))
        assert store.verify().ok


# -- options, durability, compression --------------------------------------------------------


@pytest.mark.parametrize("durability", ["fsync", "batch", "none"])
def test_each_durability_level_round_trips(root: Path, durability: str) -> None:
    with _open(root, durability=durability) as store:
        for i in range(3):
            store.append("s", _events(2, f"{i}-"))
    with _open(root) as store:
        assert len(_texts(store, "s")) == 6 and store.verify().ok


def test_compressed_payloads_are_stored_base64(root: Path) -> None:
    big = el.ModelInput.from_text("compress me " * 400)
    with _open(root, compression="zstd", compress_min_bytes=100) as store:
        store.append("s", [big, el.Checkpoint(label="small")])
        path = _backend(store).stream_path("s")
    _, first, second = path.read_text().splitlines()
    assert '"codec":' in first and '"data_b64":' in first and '"data":' not in first
    assert '"data":{"type":"checkpoint"' in second
    with _open(root) as store:
        assert [e.data for e in store.read("s")] == [big, el.Checkpoint(label="small")]
        assert store.verify().ok


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("jsonl://", "names no directory"),
        ("jsonl:///tmp/x?bogus=1", "unknown option"),
        ("jsonl:///tmp/x?lock_timeout=soon", "lock_timeout"),
    ],
)
def test_bad_urls(url: str, match: str) -> None:
    with pytest.raises(el.UsageError, match=match):
        el.open(url)


def test_url_pointing_at_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(el.UsageError, match="not a directory"):
        el.open(f"jsonl://{target}")


def test_payload_slicing_survives_data_keys_in_meta_and_payload(root: Path) -> None:
    tricky = el.Event(
        data=el.Custom(kind="k", data={"data": {"data": '","data":'}, "x": "}"}),
        meta={"a": {"data": 1}, "data": ',"data":{}'},
    )
    with _open(root) as store:
        store.append("s", [tricky])
    with _open(root) as store:
        (read,) = store.read("s")
        assert read.data == tricky.data and read.meta == tricky.meta
        assert store.verify().ok


def test_line_with_reordered_keys_still_reads(root: Path) -> None:
    with _open(root) as store:
        store.append("s", [el.Event(data=el.Checkpoint(label="x"), meta={"k": 1})])
        path = _backend(store).stream_path("s")
    header, line = path.read_bytes().splitlines()
    fields = orjson.loads(line)
    reordered = {"data": fields.pop("data"), **fields}
    path.write_bytes(header + b"\n" + orjson.dumps(reordered) + b"\n")
    with _open(root) as store:
        (read,) = store.read("s")
        assert read.data == el.Checkpoint(label="x") and read.meta == {"k": 1}
        assert store.verify().ok


def test_multiprocess_writers_and_reader(root: Path) -> None:
    from tests.multiprocess import check_multiprocess

    counts = check_multiprocess(f"jsonl://{root}", writers=4, rounds=40)
    assert counts["events"] == 320


def test_edit_that_moves_a_line_boundary_onto_the_indexed_end(root: Path) -> None:
    with _open(root) as store:
        store.append("s", _events(3))
        path = _backend(store).stream_path("s")
    lines = path.read_bytes().splitlines(keepends=True)
    # lengthen line 2 by exactly the length of the last line: the old end now falls on a newline
    grow = len(lines[3])
    lines[2] = lines[2].replace(b'"text":"m1"', b'"text":"m1' + b"x" * grow + b'"')
    path.write_bytes(b"".join(lines))
    with _open(root) as store:
        (problem,) = store.verify().problems
        assert problem.seq == 2 and "hash mismatch" in problem.message
        assert len(list(store.read("s", 3))) == 1


# -- line encoding: the plain-event template writes exactly what the Line encoder writes ---------

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def _records(draw: st.DrawFn) -> list[Record]:
    n = draw(st.integers(1, 5))
    first = draw(st.integers(1, 2**40))
    out = []
    for i in range(n):
        linked = draw(st.booleans())
        out.append(
            Record(
                el.new_event_id(),
                "s",
                first + i,
                draw(st.integers(0, 2**63 - 1)),
                draw(st.text(min_size=1, max_size=20)),
                draw(st.integers(1, 5)),
                orjson.dumps(draw(_json_values)),
                orjson.dumps(draw(st.dictionaries(st.text(), st.integers(0, 9), max_size=2)))
                if draw(st.booleans())
                else b"",
                draw(st.text(min_size=1, max_size=10)) if linked else None,
                None,
                draw(st.binary(min_size=32, max_size=32)),
                draw(st.sampled_from([0, 0, 1])),
            )
        )
    return out


@given(_records(), st.integers(1, 2**40))
def test_plain_line_template_matches_the_line_encoder(records: list[Record], pos: int) -> None:
    end = records[-1].seq
    expected = b"".join(
        jsonl_backend._line_encoder.encode(jsonl_backend._line(r, pos + i, end)) + b"\n"
        for i, r in enumerate(records)
    )
    assert b"".join(jsonl_backend._line_parts(records, pos)) == expected


# -- group commit ---------------------------------------------------------------------------------


def test_group_commit_shares_syncs_and_loses_nothing(tmp_path: Path) -> None:
    n_threads, per = 8, 25
    with el.open(f"jsonl://{tmp_path}/g", durability="fsync") as store:
        backend = store.backend
        assert isinstance(backend, JSONLBackend)
        acked = concurrent_single_appends(store, n_threads, per)
        stats = backend.stats()
        assert stats["jobs"] == n_threads * per
        assert stats["commits"] < stats["jobs"], stats
        assert sorted(e.id for e in store.read_all()) == sorted(acked)
        assert [e.position for e in store.read_all()] == list(range(1, n_threads * per + 1))
        assert store.verify().ok
    with el.open(f"jsonl://{tmp_path}/g") as store:  # the index on disk says the same
        assert sorted(e.id for e in store.read_all()) == sorted(acked)


def test_group_commit_conflict_fails_only_its_caller(tmp_path: Path) -> None:
    """A conflicting append in a shared group fails alone; the rest of its group commits."""
    with el.open(f"jsonl://{tmp_path}/c", durability="fsync") as store:
        backend = store.backend
        assert isinstance(backend, JSONLBackend)
        for stream in ("y", "z"):
            store.append(stream, text_events(1))
        conflict_in_one_group(store, backend._appends, backend._commit_group)
        assert store.stream_info("y").last_seq == 2
        assert store.stream_info("z").last_seq == 1
        assert store.verify().ok


# -- one-pass reads ----------------------------------------------------------------------------


@el.register_event_type
class _TwinA(el.EventData, frozen=True, tag="tests.jsonl.twin_a"):
    x: int


@el.register_event_type
class _TwinB(el.EventData, frozen=True, tag="tests.jsonl.twin_b"):
    x: int


def _edit_line(path: Path, line_no: int, old: bytes, new: bytes) -> None:
    """Replace the first `old` in one line with `new` of the same length."""
    assert len(old) == len(new)
    start, end = _line_span(path, line_no)
    data = path.read_bytes()
    line = data[start:end]
    assert old in line, line
    path.write_bytes(data[:start] + line.replace(old, new, 1) + data[end:])


@given(st.lists(strategies.events, min_size=1, max_size=6))
def test_one_pass_reads_equal_the_record_path(
    tmp_path_factory: pytest.TempPathFactory, events: list[el.Event]
) -> None:
    """Whatever the events (meta, links, every payload kind), reading a line in one typed pass
    gives the same event as decoding its record, and the event appended."""
    root = tmp_path_factory.mktemp("onepass")
    with _open(root) as store:
        stored = store.append("s", events)
        backend, codec = _backend(store), store.codec
        by_record = [codec.to_event(r) for r in backend.read("s", 1, None)]
        assert backend.read_events("s", 1, None, codec) == by_record == stored
        assert list(store.read("s")) == stored
        assert list(store.read_all()) == stored


def test_old_schema_version_is_upcast_not_decoded_as_current(root: Path) -> None:
    with _open(root) as store:
        store.append("s", [el.Event(data=Versioned(bb="xy"))])
        path = _backend(store).stream_path("s")
    _edit_line(path, 2, b'"v":2', b'"v":1')  # as a version-1 writer stored it
    _edit_line(path, 2, b'"bb":"xy"', b'"aa":"xy"')
    with _open(root) as store:
        (event,) = store.read("s")
        assert event.data == Versioned(bb="xy")  # through the upcaster, not bb=""


def test_envelope_type_that_disagrees_with_the_payload_is_corruption(root: Path) -> None:
    with _open(root) as store:
        store.append("s", [el.Event(data=_TwinA(x=1)), el.Event(data=_TwinA(x=2))])
        path = _backend(store).stream_path("s")
    _edit_line(path, 3, b'"type":"tests.jsonl.twin_a"', b'"type":"tests.jsonl.twin_b"')
    with _open(root) as store:
        with pytest.raises(el.CorruptionError, match="twin_b' does not decode") as info:
            list(store.read("s"))
        assert (info.value.stream, info.value.seq) == ("s", 2)


def test_hash_that_is_not_hex_is_reported(root: Path) -> None:
    with _open(root) as store:
        stored = store.append("s", _events(3))
        path = _backend(store).stream_path("s")
    _edit_line(path, 3, stored[1].hash.encode(), b"g" * 64)
    with _open(root) as store:
        (problem,) = store.verify().problems
        assert problem.seq == 2 and "hash" in problem.message


def test_short_vectored_writes_are_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A vectored write that stops early (as a signal or a full disk can make it) is finished
    with plain writes: every byte lands once, in order."""
    real = os.pwritev

    def short(fd: int, buffers: list[bytes], offset: int) -> int:
        return real(fd, [buffers[0][: max(1, len(buffers[0]) // 2)]], offset)

    parts = [b"alpha ", b"beta ", b"gamma\n"] * 700  # more buffers than one call takes
    expected = b"".join(parts)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        os.pwrite(fd, b"head:", 0)
        monkeypatch.setattr(os, "pwritev", short)
        assert jsonl_backend._write_all(fd, parts, 5) == len(expected)
    finally:
        os.close(fd)
    assert (tmp_path / "f").read_bytes() == b"head:" + expected


def test_other_files_among_the_snapshots_are_not_snapshots(root: Path) -> None:
    """A backup or editor copy beside a snapshot file once broke every state query."""
    from eventlog.projections import ConversationProjection, Runner

    with _open(root) as store:
        store.append("a", [el.ModelInput.from_text(f"t{i}") for i in range(3)])
        runner = Runner(store, ConversationProjection(), snapshot_every=2)
        runner.state("a")
        backend = _backend(store)
        folder = backend._snap_dir("a")
        (saved,) = os.listdir(folder)
        prefix = saved[: -len("2")]
        for junk in (saved + ".bak", prefix + "²", prefix + "02", prefix + "x"):
            (folder / junk).write_bytes(b"not a snapshot")
        assert backend.snapshot_seqs("a", "conversation", 1) == [2]
        assert runner.state("a").seq == 3


def test_a_retried_batch_is_read_back_in_one_pass(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retry looks up every event of its batch: consecutive seqs take one read of the file,
    not one scan of the batch's lines per event (a time growing with the batch's square)."""
    with el.open(f"jsonl://{root}") as store:
        batch = text_events(3000)
        store.append("s", batch)
        store.append("t", text_events(5))
        reads: list[tuple[int, int]] = []
        read_range = JSONLBackend._read_range

        def counted(self: JSONLBackend, st: object, lo: int, hi: int) -> list[Record]:
            reads.append((lo, hi))
            return read_range(self, st, lo, hi)  # type: ignore[arg-type]

        monkeypatch.setattr(JSONLBackend, "_read_range", counted)
        assert [e.seq for e in store.append("s", batch)] == list(range(1, 3001))
        assert reads == [(1, 3000)]
        reads.clear()
        ids = [e.id for e in batch]
        found = _backend(store).get_by_ids([ids[9], ids[2], ids[3], ids[4], "missing", ids[0]])
        assert {i: r.seq for i, r in found.items()} == {
            ids[0]: 1,
            ids[2]: 3,
            ids[3]: 4,
            ids[4]: 5,
            ids[9]: 10,
        }
        assert reads == [(1, 1), (3, 5), (10, 10)]


@pytest.mark.parametrize("then", ["append", "fork"])
def test_a_torn_index_line_is_cut_by_a_writer_that_had_the_store_open(
    root: Path, then: str
) -> None:
    """A writer killed halfway through its index line leaves a torn line. A store that was open
    before cuts it before writing its own: its acknowledged append keeps its position, and
    neither it nor a later open finds the index broken."""
    with _open(root) as live:
        live.append("b", _events(1, "b"))
        with _open(root) as dead:  # another writer, whose index line the crash tears
            dead.append("a", _events(200, "a"))
        index = root / "index.log"
        data = index.read_bytes()
        start = data.rstrip(b"\n").rfind(b"\n") + 1
        index.write_bytes(data[: start + (len(data) - start) // 2])
        if then == "fork":
            live.fork("b", "c", 1)
        (event,) = live.append("b", _events(1, "b2"))
        assert event.position == 2
        assert [e.position for e in live.read("b")] == [1, 2]
        (repair,) = (r for r in _backend(live).repairs if r.file == str(index))
        assert repair.reason == "torn index line" and repair.line == 2
    with _open(root) as reopened:
        assert [e.position for e in reopened.read("b")] == [1, 2]
        assert not reopened.exists("a")  # never acknowledged: cut as positions taken since
        assert reopened.verify().ok


def test_reads_go_on_while_an_append_waits_for_another_process(root: Path) -> None:
    """An append waiting for the write lock another process holds keeps no reader waiting."""
    holder_code = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    with _open(root, lock_timeout=10) as store:
        store.append("s", _events(3))
        with subprocess.Popen(
            [sys.executable, "-c", holder_code, str(root / "lock")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        ) as holder:
            assert holder.stdout is not None and holder.stdin is not None
            assert holder.stdout.readline() == "locked\n"
            waiting = threading.Thread(target=store.append, args=("t", _events(1)))
            waiting.start()
            try:
                time.sleep(0.3)  # the append is waiting for the file lock
                started = time.monotonic()
                assert _texts(store, "s") == ["m0", "m1", "m2"] and store.head_position() == 3
                assert time.monotonic() - started < 1.5
                assert waiting.is_alive()
            finally:
                holder.stdin.write("\n")
                holder.stdin.flush()
                waiting.join(10)
        assert store.head_position() == 4


def test_a_compressed_payload_edited_by_hand_is_damage(root: Path) -> None:
    """Characters that are no base64 in `data_b64` are damage, never skipped: with them gone,
    a lenient decode would read the payload back and hide the edit."""
    with _open(root, compression="zstd", compress_min_bytes=0) as store:
        store.append("s", [el.Custom(kind="k", data={"text": "hello " * 50})])
        path = _backend(store).stream_path("s")
    raw = path.read_bytes()
    start = raw.index(b'"data_b64":"') + len(b'"data_b64":"') + 8
    path.write_bytes(raw[:start] + b"!!" + raw[start:])
    with pytest.raises(el.CorruptionError, match="line 2, stream 's', seq 1: not a valid event"):
        _open(root)
