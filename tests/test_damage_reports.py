"""Damaged bytes on disk are reported as CorruptionError with their place, never raw exceptions.

Each test edits a store's files behind eventlog's back (as a bad disk or a careless editor
would), then reads and verifies.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest

import eventlog as el

OLD, NEW = b"hello world", b"hello \xfforld"  # same length; 0xff is never valid UTF-8


def _url(backend: str, tmp_path: Path) -> str:
    return {
        "sqlite": f"sqlite:///{tmp_path / 's.db'}",
        "lmdb": f"lmdb:///{tmp_path / 's'}",
        "jsonl": f"jsonl:///{tmp_path / 's'}",
    }[backend]


def _replace_bytes(backend: str, tmp_path: Path, old: bytes, new: bytes) -> None:
    """Replace `old` by `new` in the stored payloads (same length)."""
    if backend == "sqlite":
        conn = sqlite3.connect(tmp_path / "s.db")
        rows = conn.execute("SELECT position, data FROM events").fetchall()
        for position, data in rows:
            if old in data:
                conn.execute(
                    "UPDATE events SET data = ? WHERE position = ?",
                    (data.replace(old, new), position),
                )
        conn.commit()
        conn.close()
    elif backend == "jsonl":
        for path in (tmp_path / "s" / "streams").glob("*.jsonl"):
            path.write_bytes(path.read_bytes().replace(old, new))
    else:
        env = lmdb.open(str(tmp_path / "s"), max_dbs=8)
        events = env.open_db(b"events")
        with env.begin(write=True) as txn:
            for key, value in list(txn.cursor(db=events)):
                if old in value:
                    txn.put(key, value.replace(old, new), db=events)
        env.close()


@pytest.mark.parametrize("backend", ["sqlite", "lmdb", "jsonl"])
def test_invalid_utf8_in_a_payload_is_a_located_corruption(backend: str, tmp_path: Path) -> None:
    url = _url(backend, tmp_path)
    with el.open(url) as store:
        store.append(
            "chat", [el.SystemInstructionSet(text="hello world"), el.ModelInput.from_text("hi")]
        )
    _replace_bytes(backend, tmp_path, OLD, NEW)
    with el.open(url) as store:
        for read in (lambda: list(store.read("chat")), lambda: list(store.read_all())):
            with pytest.raises(el.CorruptionError, match="seq 1"):
                read()
        report = store.verify()
        assert [(p.stream, p.seq) for p in report.problems] == [("chat", 1)]
    cli = subprocess.run(
        [sys.executable, "-m", "eventlog", "--store", url, "verify"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert cli.returncode == 1 and "Traceback" not in cli.stderr, cli.stderr
    assert "seq 1" in cli.stdout + cli.stderr
