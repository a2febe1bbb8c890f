"""Reading a SQLite store this process cannot write leaves its directory as it was found.

SQLite's read-only connection to a WAL-mode file creates `-wal` and `-shm` files beside it and
cannot remove them: audit and replay tools that opened a `chmod 444` store left both behind.
The reader here runs in a subprocess that cannot bypass file permissions (as root, through
`setpriv` without CAP_DAC_OVERRIDE, as tests/backends/test_sqlite.py does); writers run in
other subprocesses with the usual rights.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

import eventlog as el
from eventlog.backends import sqlite_schema
from eventlog.backends.sqlite import SQLiteBackend
from tests.contract import text_events, texts_of

ROOT = Path(__file__).parents[1]
_NO_DAC = ["--bounding-set=-dac_override,-dac_read_search"]
_NO_DAC += ["--inh-caps=-dac_override,-dac_read_search"]
_ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
_REPLY_SECONDS = 60

_READER = """
import json, sys, eventlog as el
try:
    store = el.open(sys.argv[1])
except el.EventlogError as exc:
    print(json.dumps(f"{type(exc).__name__} {exc}"), flush=True)
    sys.exit()
print(json.dumps("open"), flush=True)
for line in sys.stdin:
    command = line.strip()
    if command == "read":
        reply = [e.data.text for e in store.read("s")]
    elif command == "append":
        try:
            store.append("s", [el.ModelInput.from_text("refused")])
            reply = "appended"
        except el.EventlogError as exc:
            reply = f"{type(exc).__name__} {exc}"
    else:
        store.close()
        reply = "closed"
    print(json.dumps(reply), flush=True)
    if reply == "closed":
        break
"""

_WRITER = """
import json, sys, eventlog as el
store = el.open(sys.argv[1])
print(json.dumps("open"), flush=True)
for line in sys.stdin:
    command, _, arg = line.strip().partition(" ")
    if command == "append":
        first = len(list(store.read("s")))
        store.append("s", [el.ModelInput.from_text(f"m{first + i}") for i in range(int(arg))])
        reply = "appended"
    else:
        store.close()
        reply = "closed"
    print(json.dumps(reply), flush=True)
    if reply == "closed":
        break
"""


def url_for(path: Path) -> str:
    return f"sqlite:///{path}"


class Child:
    """A subprocess answering one JSON line per command line."""

    def __init__(self, script: str, path: Path, *, unprivileged: bool) -> None:
        command = [sys.executable, "-c", script, url_for(path)]
        if unprivileged and os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.skip("running as root and setpriv (util-linux) is missing to drop rights")
            command = [setpriv, *_NO_DAC, *command]
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_ENV,
        )
        self.first = self._reply()

    def ask(self, command: str) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._reply()

    def _reply(self) -> Any:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], _REPLY_SECONDS)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.proc.kill()
            _, err = self.proc.communicate()
            raise AssertionError(f"no reply from the subprocess: {err}")
        return json.loads(line)

    def finish(self) -> None:
        """Close the store (if open) and wait for the process to end."""
        if self.proc.poll() is None and self.first == "open":
            assert self.ask("close") == "closed"
        _, err = self.proc.communicate(timeout=_REPLY_SECONDS)
        assert self.proc.returncode == 0, err


@contextmanager
def running(script: str, path: Path, *, unprivileged: bool) -> Iterator[Child]:
    child = Child(script, path, unprivileged=unprivileged)
    try:
        yield child
    finally:
        if child.proc.poll() is None:
            child.proc.kill()
            child.proc.communicate()


def listing(folder: Path) -> dict[str, tuple[int, int, int, int]]:
    """Each file's name -> (size, mode, mtime, ctime): what reading must leave as it was."""
    return {
        p.name: (s.st_size, s.st_mode, s.st_mtime_ns, s.st_ctime_ns)
        for p in sorted(folder.iterdir())
        if (s := p.stat())
    }


def populated(folder: Path, count: int = 5) -> Path:
    folder.mkdir()
    path = folder / "events.db"
    with el.open(url_for(path)) as store:
        store.append("s", text_events(count))
    assert sorted(p.name for p in folder.iterdir()) == ["events.db"]
    return path


def read_only_read(path: Path) -> tuple[list[str], str]:
    """(texts of stream s, the refusal of an append) from an unprivileged reader, then closed."""
    with running(_READER, path, unprivileged=True) as reader:
        assert reader.first == "open", reader.first
        texts = reader.ask("read")
        refused = reader.ask("append")
        assert reader.ask("read") == texts
        reader.finish()
    return texts, refused


@pytest.mark.parametrize("directory", ["writable", "read-only"])
def test_reading_a_read_only_store_leaves_its_directory_as_it_was(
    tmp_path: Path, directory: str
) -> None:
    """A `chmod 444` WAL-mode store, closed cleanly (no -wal): read as it is, nothing created.
    Its open-time inspection (`?mode=ro`) and reader connections left an empty -wal and a 32
    KiB -shm; in a read-only directory the store could not be opened at all."""
    folder = tmp_path / "store"
    path = populated(folder)
    path.chmod(0o444)
    if directory == "read-only":
        folder.chmod(0o555)
    try:
        before = listing(folder)
        texts, refused = read_only_read(path)
        after = listing(folder)
    finally:
        folder.chmod(0o755)
    assert texts == ["m0", "m1", "m2", "m3", "m4"]
    assert refused.startswith("BackendUnavailableError ") and "readonly" in refused, refused
    assert after == before


def test_a_read_only_store_in_rollback_journal_mode_is_left_as_it_was(tmp_path: Path) -> None:
    """A `VACUUM INTO` copy (journal mode delete) that cannot be written: read in its mode."""
    source = populated(tmp_path / "source")
    folder = tmp_path / "copy"
    folder.mkdir()
    path = folder / "events.db"
    with closing(sqlite3.connect(source)) as conn:
        conn.execute(f"VACUUM INTO '{path}'")
    path.chmod(0o444)
    before = listing(folder)
    texts, refused = read_only_read(path)
    assert texts == ["m0", "m1", "m2", "m3", "m4"]
    assert refused.startswith("BackendUnavailableError ") and "readonly" in refused, refused
    assert listing(folder) == before


def test_an_older_read_only_store_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    """A store of an older schema needs an upgrade, which cannot write it: refused, unchanged
    (the upgrade's connection left -wal and -shm behind before failing)."""
    folder = tmp_path / "old"
    folder.mkdir()
    path = folder / "events.db"
    sqlite_schema._create(path, search=False, target=3)
    path.chmod(0o444)
    before = listing(folder)
    with running(_READER, path, unprivileged=True) as reader:
        refusal = reader.first
        reader.finish()
    assert listing(folder) == before
    assert refusal.startswith("BackendUnavailableError "), refusal
    assert "cannot be upgraded from schema v3" in refusal and "read-only" in refusal


def test_a_live_writers_commits_in_its_wal_are_read(tmp_path: Path) -> None:
    """A writer in another process holds the store open with commits only in its -wal: the
    read-only reader sees them through the -wal and -shm the writer made (SQLite's shared
    memory, as for any reader), creates no file, and changes neither the file nor the -wal."""
    folder = tmp_path / "live"
    path = populated(folder)
    with running(_WRITER, path, unprivileged=False) as writer:
        assert writer.first == "open"
        assert writer.ask("append 3") == "appended"
        wal = folder / "events.db-wal"
        assert wal.stat().st_size > 0  # the writer's commits wait in its WAL
        path.chmod(0o444)
        before = listing(folder)
        texts, refused = read_only_read(path)
        after = listing(folder)
        assert texts == [f"m{i}" for i in range(8)]
        assert refused.startswith("BackendUnavailableError "), refused
        assert after.keys() == before.keys() == {"events.db", "events.db-wal", "events.db-shm"}
        for name in ("events.db", "events.db-wal"):
            # (size, mode, mtime); SQLite running as root fchowns a -wal it opens to its own
            # owner, which moves the ctime
            assert after[name][:3] == before[name][:3], name
        assert after["events.db-shm"][0] == before["events.db-shm"][0]
        writer.finish()
    path.chmod(0o644)
    with el.open(url_for(path)) as store:
        assert texts_of(store.read("s")) == [f"m{i}" for i in range(8)]


def test_a_writer_that_starts_after_the_reader_opened_is_seen(tmp_path: Path) -> None:
    """A reader of a read-only store reads it as a snapshot (no -wal, no locks). A writer that
    starts later writes the -wal: the reader's next read goes through the writer's -wal and
    -shm and sees its commits."""
    folder = tmp_path / "later"
    path = populated(folder)
    path.chmod(0o444)
    with running(_READER, path, unprivileged=True) as reader:
        assert reader.first == "open", reader.first
        assert reader.ask("read") == [f"m{i}" for i in range(5)]
        with running(_WRITER, path, unprivileged=False) as writer:
            assert writer.first == "open"
            assert writer.ask("append 3") == "appended"
            assert reader.ask("read") == [f"m{i}" for i in range(8)]
            assert writer.ask("append 2") == "appended"
            assert reader.ask("read") == [f"m{i}" for i in range(10)]
            writer.finish()
        assert reader.ask("read") == [f"m{i}" for i in range(10)]
        reader.finish()
    path.chmod(0o644)
    with el.open(url_for(path)) as store:
        assert texts_of(store.read("s")) == [f"m{i}" for i in range(10)]


def test_a_writer_that_came_and_went_while_the_reader_was_open_is_seen(tmp_path: Path) -> None:
    """A writer that opens, commits and closes between two reads checkpoints its commits into
    the file and removes its -wal and -shm (the snapshot reader holds no lock that keeps them):
    the reader's next read finds the file changed and reads it again, and the directory is
    left as the writer left it."""
    folder = tmp_path / "went"
    path = populated(folder)
    path.chmod(0o444)
    with running(_READER, path, unprivileged=True) as reader:
        assert reader.first == "open", reader.first
        assert reader.ask("read") == [f"m{i}" for i in range(5)]
        with running(_WRITER, path, unprivileged=False) as writer:
            assert writer.first == "open"
            assert writer.ask("append 3") == "appended"
            writer.finish()
        left = listing(folder)
        assert left.keys() == {"events.db"}
        assert reader.ask("read") == [f"m{i}" for i in range(8)]
        reader.finish()
    assert listing(folder) == left


def test_a_writable_store_is_read_and_written_through_its_wal_as_before(tmp_path: Path) -> None:
    """Nothing changes for a store this process can write: WAL and shared memory while open,
    room kept ahead of the WAL for synced commits, both files gone once the store is closed."""
    folder = tmp_path / "rw"
    path = populated(folder)
    with el.open(url_for(path)) as store, el.open(url_for(path)) as other:
        for i in range(5, 8):
            store.append("s", [el.ModelInput.from_text(f"m{i}")])
            assert texts_of(other.read("s"))[-1] == f"m{i}"  # another connection sees it
        names = {p.name for p in folder.iterdir()}
        assert {"events.db", "events.db-wal", "events.db-shm"} <= names
        backend = store.backend
        assert isinstance(backend, SQLiteBackend) and backend.stats()["wal_room"] >= 1
    assert sorted(p.name for p in folder.iterdir()) == ["events.db"]
    with el.open(url_for(path)) as store:
        assert texts_of(store.read("s")) == [f"m{i}" for i in range(8)]
