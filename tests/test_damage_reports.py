"""Damaged bytes on disk are reported as CorruptionError with their place, never raw exceptions.

Each test edits a store's files behind eventlog's back (as a bad disk or a careless editor
would), then reads and verifies.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import lmdb
import msgspec
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
        rows = conn.execute("SELECT position, rec FROM events").fetchall()
        for position, data in rows:
            if old in data:
                conn.execute(
                    "UPDATE events SET rec = ? WHERE position = ?",
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


def _lmdb_edit(tmp_path: Path, damage: str) -> None:
    env = lmdb.open(str(tmp_path / "s"), max_dbs=8)
    positions, streams = env.open_db(b"positions"), env.open_db(b"streams")
    with env.begin(write=True) as txn:
        p3 = (3).to_bytes(8, "big")
        if damage == "position lost":
            txn.delete(p3, db=positions)
        elif damage == "position redirected":
            txn.put(p3, txn.get((2).to_bytes(8, "big"), db=positions), db=positions)
        elif damage == "stream unlisted":
            txn.delete(b"chat\x00\x01", db=streams)
        else:  # "listed too long"
            key = b"chat\x00\x01"
            name, _, ts = msgspec.msgpack.decode(txn.get(key, db=streams))
            txn.put(key, msgspec.msgpack.encode((name, 7, ts)), db=streams)
    env.close()


def _sqlite_edit(tmp_path: Path, damage: str) -> None:
    conn = sqlite3.connect(tmp_path / "s.db")
    if damage == "row lost":
        conn.execute("DELETE FROM events WHERE stream = 'chat' AND seq = 3")
    elif damage == "stream stored as a blob":
        conn.execute("UPDATE events SET stream = CAST(stream AS BLOB) WHERE seq = 4")
    elif damage == "position moved":
        conn.execute("UPDATE events SET position = 100 WHERE stream = 'chat' AND seq = 2")
    else:  # "seq column edited": the last row claims seq 7
        conn.execute("UPDATE events SET seq = 7 WHERE stream = 'chat' AND seq = 5")
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("backend", "damage"),
    [
        ("lmdb", "position lost"),
        ("lmdb", "position redirected"),
        ("lmdb", "stream unlisted"),
        ("lmdb", "listed too long"),
        ("sqlite", "row lost"),
        ("sqlite", "seq column edited"),
        ("sqlite", "stream stored as a blob"),
        ("sqlite", "position moved"),
    ],
)
def test_damage_beside_the_events_is_reported_by_verify(
    backend: str, damage: str, tmp_path: Path
) -> None:
    """Indexes, keys and columns no hash covers: verify checks them against the events."""
    url = _url(backend, tmp_path)
    with el.open(url) as store:
        for i in range(1, 6):
            store.append("chat", [el.ModelInput.from_text(f"turn {i}")])
        store.append("notes", [el.ModelInput.from_text("note")])
        assert store.verify().ok
    if backend == "lmdb":
        _lmdb_edit(tmp_path, damage)
    else:
        _sqlite_edit(tmp_path, damage)
    with el.open(url) as store:
        assert not store.verify().ok
        # Reads select by the seq column: they refuse to skip or misplace events.
        if damage == "row lost":
            with pytest.raises(el.CorruptionError, match="seqs"):
                list(store.read("chat"))
            with pytest.raises(el.CorruptionError, match="missing"):
                store.get("chat", 3)
        elif damage == "stream stored as a blob":
            with pytest.raises(el.CorruptionError, match="table events"):
                store.streams()
        elif damage == "seq column edited":  # the envelopes still say 1..5
            assert [e.seq for e in store.read("chat")] == [1, 2, 3, 4, 5]
            with pytest.raises(el.CorruptionError, match="seqs"):
                store.get("chat", 7)


@pytest.mark.parametrize("damage", ["truncated", "layout"])
def test_a_damaged_lmdb_environment_fails_to_open_with_a_corruption_error(
    damage: str, tmp_path: Path
) -> None:
    """In a child process: a truncated data.mdb used to kill it with SIGBUS."""
    url = _url("lmdb", tmp_path)
    with el.open(url) as store:
        store.append("chat", [el.ModelInput.from_text("x" * 3000) for _ in range(200)])
    data = tmp_path / "s" / "data.mdb"
    if damage == "truncated":
        size = data.stat().st_size
        with data.open("r+b") as f:
            f.truncate(size // 2)
    else:
        env = lmdb.open(str(tmp_path / "s"), max_dbs=8)
        meta = env.open_db(b"meta")
        with env.begin(write=True) as txn:
            txn.put(b"layout", b"2x", db=meta)
        env.close()
    code = (
        "import eventlog as el\n"
        "try:\n"
        f"    el.open({url!r})\n"
        "except el.CorruptionError as exc:\n"
        "    print('CorruptionError', exc)\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.startswith("CorruptionError")
    assert ("truncated" if damage == "truncated" else "layout") in child.stdout


@pytest.mark.parametrize("backend", ["sqlite", "lmdb", "jsonl"])
def test_verify_of_a_store_being_written_to_finds_nothing_wrong(
    backend: str, tmp_path: Path
) -> None:
    url = _url(backend, tmp_path)
    with el.open(url, durability="none") as store:
        store.append("a", [el.ModelInput.from_text(f"m{i}") for i in range(3000)])
        stop = threading.Event()

        def write() -> None:
            i = 0
            while not stop.is_set():
                store.append("a" if i % 2 else "b", [el.ModelInput.from_text(f"w{i}")])
                i += 1

        writer = threading.Thread(target=write)
        writer.start()
        try:
            reports = [store.verify() for _ in range(3)]
        finally:
            stop.set()
            writer.join()
        assert [r.problems for r in reports] == [[], [], []]
        assert store.verify().ok


def test_a_damaged_dictionary_is_reported_like_a_missing_one(tmp_path: Path) -> None:
    from eventlog.bench.workload import conversation
    from eventlog.compression import ACTIVE_DICT_BLOB, dict_blob_key, train_dictionary

    url = f"sqlite:///{tmp_path / 's.db'}?compression=zstd&compress_min_bytes=64"
    with el.open(url) as store:
        store.append("chat", conversation(200))
        dict_id = train_dictionary(store, size=4096)
        store.append("after", [el.Event(data=e.data) for e in conversation(20, seed=4)])
        raw = store.backend.get_blob(dict_blob_key(dict_id))
        assert raw is not None and store.backend.get_blob(ACTIVE_DICT_BLOB)
        store.backend.put_blob(dict_blob_key(dict_id), raw[:8] + bytes(32) + raw[40:])
    with el.open(url) as store:  # opens; records needing the dictionary are reported
        with pytest.raises(el.CorruptionError, match="missing or damaged"):
            list(store.read("after"))
        assert [p.stream for p in store.verify().problems] == ["after"]


@pytest.mark.parametrize("damage", ["content", "swapped", "legacy", "legacy-swapped"])
def test_a_dictionary_whose_bytes_changed_is_never_used(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Damage inside a dictionary's content still parses as a dictionary, and would decode
    records into other text without an error (found in review): the blob's SHA-256 catches it.
    A blob written before the checksum (the dictionary alone) still reads, and must at least
    be a dictionary with the id the records name."""
    from eventlog.bench.workload import conversation
    from eventlog.compression import dict_blob_key, dictionary_bytes, train_dictionary

    url = f"sqlite:///{tmp_path / 's.db'}?compression=zstd&compress_min_bytes=64"
    with el.open(url) as store:
        store.append("chat", conversation(200))
        dict_id = train_dictionary(store, size=4096)
        other = train_dictionary(store, size=4096, activate=False)
        after = store.append("after", [el.Event(data=e.data) for e in conversation(20, seed=4)])
        assert {r.codec for r in store.backend.read("after", 1, None)} == {2}
        blob = store.backend.get_blob(dict_blob_key(dict_id))
        assert blob is not None
        raw = dictionary_bytes(blob)
        if damage == "content":  # flip the case of letters near the end, as disk damage would
            tail = bytes(b ^ 0x20 if 97 <= b <= 122 else b for b in blob[-400:])
            store.backend.put_blob(dict_blob_key(dict_id), blob[:-400] + tail)
        elif damage == "swapped":
            store.backend.put_blob(
                dict_blob_key(dict_id), store.backend.get_blob(dict_blob_key(other)) or b""
            )
        elif damage == "legacy":
            store.backend.put_blob(dict_blob_key(dict_id), raw)
        else:
            other_blob = store.backend.get_blob(dict_blob_key(other)) or b""
            store.backend.put_blob(dict_blob_key(dict_id), dictionary_bytes(other_blob))
    with caplog.at_level("WARNING", logger="eventlog.compression"), el.open(url) as store:
        if damage == "legacy":
            assert list(store.read("after")) == after
            assert store.verify().ok
            return
        with pytest.raises(el.CorruptionError, match="missing or damaged"):
            list(store.read("after"))
        assert [p.stream for p in store.verify().problems] == ["after"]
        store.append("new", [el.Event(data=e.data) for e in conversation(5, seed=5)])
        assert 2 not in {r.codec for r in store.backend.read("new", 1, None)}
    assert any(f"zstd dictionary {dict_id} is damaged" in r.getMessage() for r in caplog.records)


def test_invalid_utf8_in_a_jsonl_header_is_a_corruption_error(tmp_path: Path) -> None:
    url = _url("jsonl", tmp_path)
    with el.open(url) as store:
        store.append("chat", [el.ModelInput.from_text("hi")])
    (path,) = (tmp_path / "s" / "streams").glob("*.jsonl")
    path.write_bytes(path.read_bytes().replace(b'"chat"', b'"ch\xfft"', 1))
    with pytest.raises(el.CorruptionError, match="line 1"):
        el.open(url)
