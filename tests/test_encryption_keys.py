"""Key files under crashes, races and bad permissions: real processes, real kill -9, real files.

A crash point is a SIGKILL a process sends itself just before one of its file system calls
(or where an erasure would destroy the key). Key stores without hard links run the same code
a FAT or exFAT key directory would, selected with `FileKeyStore(dir, hard_links=False)`.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import eventlog as el
from eventlog.encryption import FileKeyStore, erase_stream, key_name

pytest.importorskip("cryptography")

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _python(script: str, *args: str, **options: Any) -> subprocess.CompletedProcess[str]:
    """Run a Python script in a new process (this checkout on its path)."""
    done: subprocess.CompletedProcess[str] = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
        **options,
    )
    return done


_CRASH_EVERYWHERE = """
import json, os, signal, sys
from eventlog.encryption import FileKeyStore
keys, links = sys.argv[1], sys.argv[2] == "1"
CALLS = ("open", "write", "fsync", "close", "link", "rename", "replace", "unlink")
real = {name: getattr(os, name) for name in CALLS}

def crash_at(point):
    seen = [0]
    def wrap(name):
        def call(*args, **kwargs):
            seen[0] += 1
            if seen[0] == point:
                os.kill(os.getpid(), signal.SIGKILL)
            return real[name](*args, **kwargs)
        return call
    for name in CALLS:
        setattr(os, name, wrap(name))

def files():
    return {name: open(os.path.join(keys, name), "rb").read() for name in os.listdir(keys)}

points, problems = 0, []
while True:
    FileKeyStore(keys, hard_links=links)  # the directory exists before the crash
    pid = os.fork()
    if pid == 0:
        crash_at(points + 1)
        FileKeyStore(keys, hard_links=links).get_or_create("s")
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    points += 1
    left = sorted(files())
    try:
        store = FileKeyStore(keys, hard_links=links)
        key = store.get_or_create("s")
        store.delete("s")
        copies = [name for name, data in files().items() if key in data]
        if copies:
            problems.append([points, "the erased key survives in", copies, left])
    except Exception as exc:
        problems.append([points, repr(exc), left])
    for name in os.listdir(keys):
        os.unlink(os.path.join(keys, name))
    if os.WIFEXITED(status):
        break
print(json.dumps({"points": points, "problems": problems}))
"""


@pytest.mark.parametrize("links", [True, False], ids=["hard-links", "no-hard-links"])
def test_a_crash_anywhere_in_making_a_key_leaves_a_whole_key_or_none(
    tmp_path: Path, links: bool
) -> None:
    """After a kill -9 at each file system call of `get_or_create`, the stream gets a key
    (never a short one), and erasing it leaves no copy of it in the directory."""
    keys = tmp_path / "keys"
    out = _python(_CRASH_EVERYWHERE, str(keys), "1" if links else "0")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["points"] >= 8  # every call was a crash point, up to the one that finished
    assert report["problems"] == []


_RACER = """
import json, sys, time
from eventlog.encryption import FileKeyStore
keys, start = sys.argv[1], float(sys.argv[2])
store = FileKeyStore(keys, hard_links=False)
while time.time() < start:
    pass
print(json.dumps([store.get_or_create(f"s{i}").hex() for i in range(40)]))
"""


def test_processes_without_hard_links_end_with_one_key_per_stream(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    start = str(time.time() + 1.0)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, str(keys), start],
            stdout=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        for _ in range(4)
    ]
    got = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4
    assert all(keys_of_one == got[0] for keys_of_one in got)
    assert sorted(p.name for p in keys.iterdir()) == sorted(
        [".lock", *(f"{key_name(f's{i}')}.key" for i in range(40))]
    )


_ERASE_AND_DIE = """
import os, signal, sys
import eventlog as el
from eventlog import encryption
url, keys = sys.argv[1:]
store = el.open(url, keys=keys)
encryption._destroy = lambda path: os.kill(os.getpid(), signal.SIGKILL)  # after the marker
encryption.erase_stream(store, "s")
"""


def test_an_erasure_cut_short_stops_appends_of_processes_that_had_the_key(tmp_path: Path) -> None:
    """A kill -9 between the erasure marker and the key's removal leaves both; a process that
    opened the key directory before must not go on sealing new events with that key."""
    url, keys = f"sqlite:///{tmp_path}/s.db", tmp_path / "keys"
    with el.open(url, keys=keys) as store:
        store.append("s", [el.ModelInput.from_text("before")])
        died = _python(_ERASE_AND_DIE, url, str(keys))
        assert died.returncode == -9, died.stderr
        assert (keys / f"{key_name('s')}.key").exists()  # the crash left it
        with pytest.raises(el.ErasedError, match="nothing can be appended"):
            store.append("s", [el.ModelInput.from_text("after")])
        assert store.stream_info("s").last_seq == 1
        assert erase_stream(store, "s").key_deleted  # run again, it finishes
    assert not (keys / f"{key_name('s')}.key").exists()


class _WriterBeforeDeletion(FileKeyStore):
    """A key directory where another writer appends just before the key is deleted."""

    def __init__(self, directory: Path, other: el.Store) -> None:
        super().__init__(directory)
        self.other = other

    def delete(self, stream: str) -> bool:
        self.other.append(stream, [el.ModelInput.from_text("appended meanwhile")])
        return super().delete(stream)


def test_an_erasure_counts_what_another_writer_appended_until_the_key_was_gone(
    tmp_path: Path,
) -> None:
    """Events another process appended with the key before it was deleted are unreadable too:
    the report counts them."""
    url, keys = f"sqlite:///{tmp_path}/s.db", tmp_path / "keys"
    with el.open(url, keys=keys) as other:
        other.append("s", [el.ModelInput.from_text("first")])
        with el.open(url, key_store=_WriterBeforeDeletion(keys, other)) as store:
            report = erase_stream(store, "s")
            assert store.stream_info("s").last_seq == 2
            assert report.encrypted_events == 2
            assert store.verify().erased == ["s"]


_UNREADABLE_KEY = """
import json, sys
import eventlog as el
from eventlog.encryption import erase_stream
url, keys = sys.argv[1:]
out = {}
with el.open(url, keys=keys) as store:
    for what, call in [
        ("read", lambda: store.get("s", 1)),
        ("append", lambda: store.append("s", [el.Checkpoint(label="x")])),
    ]:
        try:
            call()
            out[what] = "no error"
        except Exception as exc:
            out[what] = f"{type(exc).__name__}: {exc}"
    out["verify"] = [p.message for p in store.verify().problems]
    out["erased"] = erase_stream(store, "s").key_deleted
print(json.dumps(out))
"""


def _without_root_override() -> None:
    """In a child process: drop root's right to read and write any file (Linux `prctl`)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


@pytest.mark.skipif(sys.platform != "linux", reason="drops root's file rights with prctl")
def test_a_key_file_this_process_may_not_read(tmp_path: Path) -> None:
    """A key file of mode 000: reads and appends say which file cannot be read (a missing key,
    not a crash), verify reports it as the stream's problem, and erasure still removes it."""
    url, keys = f"sqlite:///{tmp_path}/s.db", tmp_path / "keys"
    with el.open(url, keys=keys) as store:
        store.append("s", [el.ModelInput.from_text("sealed")])
    key_file = keys / f"{key_name('s')}.key"
    key_file.chmod(0)
    out = _python(_UNREADABLE_KEY, url, str(keys), preexec_fn=_without_root_override)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    for what in ("read", "append"):
        assert got[what].startswith("MissingKeyError"), got[what]
        assert f"the key file {key_file} cannot be read: Permission denied" in got[what]
    assert len(got["verify"]) == 1 and "cannot be read" in got["verify"][0]
    assert got["erased"] is True and not key_file.exists()


_READ_ONLY_KEYS = """
import json, os, sys
import eventlog as el
from eventlog.encryption import erase_stream
url, keys = sys.argv[1:]
out = {}
with el.open(url, keys=keys) as store:
    store.append("old", [el.Checkpoint(label="x")])
    os.chmod(keys, 0o500)  # read-only once the store is open
    for what, call in [
        ("append new", lambda: store.append("new", [el.Checkpoint(label="x")])),
        ("append old", lambda: store.append("old", [el.Checkpoint(label="y")])),
        ("erase", lambda: erase_stream(store, "old")),
    ]:
        try:
            call()
            out[what] = "no error"
        except Exception as exc:
            out[what] = f"{type(exc).__name__}: {exc}"
    out["streams"] = sorted(s.stream for s in store.streams())
    out["old"] = [e.seq for e in store.read("old")]
print(json.dumps(out))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="drops root's file rights with prctl")
def test_a_key_directory_made_read_only_after_opening(tmp_path: Path) -> None:
    """A new stream's first key and an erasure marker cannot be written: a UsageError naming
    the directory, nothing appended or erased; streams with keys go on."""
    url, keys = f"sqlite:///{tmp_path}/s.db", tmp_path / "keys"
    out = _python(_READ_ONLY_KEYS, url, str(keys), preexec_fn=_without_root_override)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    said = f"UsageError: the key directory {keys} cannot be written: Permission denied; "
    assert got["append new"] == said + "no key can be made for stream 'new'"
    assert got["erase"] == said + "nothing was erased (stream 'old')"
    assert got["append old"] == "no error"
    assert (got["streams"], got["old"]) == (["old"], [1, 2])
    keys.chmod(0o700)
    assert not list(keys.glob("*.erased"))
