"""Room kept ahead of the SQLite WAL for synced commits: made, ignored by SQLite, crash-safe."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import eventlog as el
from eventlog.backends.sqlite_wal_room import ROOM_BYTES, WalRoom
from tests.contract import text_events, texts_of


def _wal(db: Path) -> Path:
    return db.with_name(db.name + "-wal")


def test_synced_appends_write_inside_the_room(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with el.open(f"sqlite:///{db}", durability="fsync") as store:
        for i in range(300):
            store.append("s", text_events(1, f"e{i}-"))
        rooms = store.backend.stats()["wal_room"]
        size = _wal(db).stat().st_size
        assert size >= 2 * ROOM_BYTES
        tail = _wal(db).read_bytes()[-4096:]
        assert store.verify().ok
    # 300 appends of a few frames each: more than one mebibyte of WAL, so room was made again
    # as the commits filled it, and the file ends in zeros SQLite has not written over yet.
    assert rooms >= 2
    assert tail == bytes(4096)
    with el.open(f"sqlite:///{db}") as store:
        assert texts_of(store.read("s")) == [f"e{i}-0" for i in range(300)]


def test_sessions_sharing_a_wal_do_not_each_add_room(tmp_path: Path) -> None:
    """A store object that opens a WAL others keep finds the room they made, and uses it."""
    db = tmp_path / "shared.db"
    with el.open(f"sqlite:///{db}") as holder:  # keeps the WAL: the last close would remove it
        holder.append("s", text_events(1))
        for i in range(12):
            with el.open(f"sqlite:///{db}", durability="fsync") as writer:
                writer.append("s", text_events(2, f"w{i}-"))
                writer.append("s", text_events(2, f"x{i}-"))
        size = _wal(db).stat().st_size
        assert len(list(holder.read("s"))) == 1 + 12 * 4
    # 12 sessions of 2 small commits need well under a mebibyte of frames: at most the room
    # made once, not one more mebibyte per session.
    assert size <= 2 * ROOM_BYTES


def test_unsynced_commits_make_no_room(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    with el.open(f"sqlite:///{db}", durability="batch") as store:
        for _ in range(50):
            store.append("s", text_events(2))
        assert store.backend.stats()["wal_room"] == 0


def test_a_process_killed_with_room_in_its_wal_loses_no_acknowledged_event(
    tmp_path: Path,
) -> None:
    db = tmp_path / "k.db"
    script = textwrap.dedent(
        f"""
        import os, sys
        import eventlog as el
        store = el.open("sqlite:///{db}", durability="fsync")
        for i in range(400):
            store.append("s", [el.Event(data=el.ModelInput.from_text(f"m{{i}}"))])
            print(i, flush=True)
        assert store.backend.stats()["wal_room"] >= 1
        os.kill(os.getpid(), 9)  # no close: the WAL, zeros and all, is what recovery finds
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == -9, proc.stderr
    assert proc.stdout.split() == [str(i) for i in range(400)]
    assert _wal(db).stat().st_size >= ROOM_BYTES  # left behind as the process died
    with sqlite3.connect(db) as conn:  # SQLite alone recovers the WAL and finds it sound
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    with el.open(f"sqlite:///{db}") as store:
        assert [e.data.text for e in store.read("s")] == [f"m{i}" for i in range(400)]  # type: ignore[attr-defined]
        assert store.verify().ok


def test_room_without_a_wal_file_or_on_a_failing_one_changes_nothing(tmp_path: Path) -> None:
    missing = WalRoom(str(tmp_path / "none.db-wal"))
    missing.make()
    assert not missing.due and missing.extensions == 0
    assert not (tmp_path / "none.db-wal").exists()
    missing.committed()
    assert not missing.due  # no file: nothing grew

    wal = tmp_path / "x.db-wal"
    wal.write_bytes(b"w" * 100)
    room = WalRoom(str(wal))
    room.make()
    assert wal.read_bytes() == b"w" * 100 + bytes(ROOM_BYTES) and room.extensions == 1
    room.committed()
    assert not room.due  # written inside the room
    with wal.open("ab") as f:
        f.write(b"more")
    room.committed()
    assert room.due  # a commit wrote past the room: make more before the next
