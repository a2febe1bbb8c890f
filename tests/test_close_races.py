"""Closing a store while other threads read and append: they end with StoreClosedError, no crash.

Closing SQLite reader connections or LMDB transactions that another thread still used crashed
the process (SIGSEGV, SIGBUS); a JSONL append racing the close took a lock on its closed file
descriptor (whose number may already name another file) and failed with OSError. Each backend
runs the race in a subprocess, round after round, so a crash fails the test instead of ending
the run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROUNDS = 40


@pytest.mark.parametrize("backend", ["sqlite", "lmdb", "jsonl", "memory"])
def test_close_while_threads_read_and_append(backend: str, tmp_path: Path) -> None:
    prefix = {
        "sqlite": f"sqlite:///{tmp_path}/s{{i}}.db",
        "lmdb": f"lmdb:///{tmp_path}/l{{i}}",
        "jsonl": f"jsonl:///{tmp_path}/j{{i}}",
        "memory": "memory://",
    }[backend]
    done = subprocess.run(
        [sys.executable, "-m", "tests.close_race_worker", prefix, str(ROUNDS)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parent.parent,
    )
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert done.stdout.strip() == f"ok {ROUNDS}"
