"""The conformance suite on LMDB, plain, zstd-compressed and with a trained dictionary; plus what
is particular to LMDB: key layout, map growth (in this process and by another), shared handles,
error translation and URL options."""

from __future__ import annotations

import fcntl
import functools
import itertools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import lmdb
import msgspec
import pytest

import eventlog as el
from eventlog.backends import lmdb as lmdb_backend
from eventlog.backends.lmdb import LMDBBackend, event_key, pack_row, unpack_row
from eventlog.compression import ACTIVE_DICT_BLOB, dict_blob_key
from tests.contract import (
    DurableContract,
    FreshURL,
    Versioned,
    concurrent_single_appends,
    conflict_in_one_group,
    text_events,
    texts_of,
)

ROOT = Path(__file__).resolve().parents[2]


def raw_rewrite(store: el.Store, stream: str, seq: int, /, **changes: object) -> None:
    """Rewrite one stored record underneath the store, with raw lmdb access."""
    backend = store.backend
    assert isinstance(backend, LMDBBackend)
    env = backend.env
    key = event_key(stream, seq)
    with env.begin(write=True) as txn:
        events = env.open_db(b"events", txn=txn)
        rec = unpack_row(txn.get(key, db=events))
        txn.put(key, pack_row(msgspec.structs.replace(rec, **changes), rec.position), db=events)


def flip_last_byte(store: el.Store, stream: str, seq: int) -> None:
    """Alter the stored payload bytes of one event."""
    (rec,) = store.backend.read(stream, seq, seq)
    data = bytearray(rec.data)
    data[-1] ^= 0x5A
    raw_rewrite(store, stream, seq, data=bytes(data))


class TestLMDB(DurableContract):
    @pytest.fixture
    def fresh_url(self, tmp_path: Path) -> FreshURL:
        counter = itertools.count()
        return lambda: f"lmdb://{tmp_path}/l{next(counter)}"

    def tamper(self, store: el.Store, stream: str, seq: int) -> None:
        flip_last_byte(store, stream, seq)


class TestLMDBZstd(TestLMDB):
    """Every payload zstd-compressed (threshold 0), so the suite runs on codec 1 records."""

    @pytest.fixture
    def fresh_url(self, tmp_path: Path) -> FreshURL:
        counter = itertools.count()
        return lambda: f"lmdb://{tmp_path}/z{next(counter)}?compression=zstd&compress_min_bytes=0"


@functools.cache
def trained_dictionary() -> tuple[int, bytes]:
    """A dictionary trained on events like the suite's, made once per session."""
    import zstandard

    from eventlog.bench.workload import conversation_events

    encode = msgspec.msgpack.Encoder().encode
    samples = [encode(e.data) for e in text_events(300)]
    samples += [encode(e) for e in conversation_events(300)]
    trained = zstandard.train_dictionary(8192, samples, dict_id=4242, level=3)
    return trained.dict_id(), trained.as_bytes()


class TestLMDBZstdDictionary(TestLMDB):
    """Each fresh store already holds an active dictionary, so the suite runs on codec 2."""

    @pytest.fixture
    def fresh_url(self, tmp_path: Path) -> FreshURL:
        counter = itertools.count()
        dict_id, raw = trained_dictionary()

        def make() -> str:
            path = f"{tmp_path}/d{next(counter)}"
            backend = LMDBBackend(path)
            backend.put_blob(dict_blob_key(dict_id), raw)
            backend.put_blob(ACTIVE_DICT_BLOB, str(dict_id).encode())
            backend.close()
            return f"lmdb://{path}?compression=zstd&compress_min_bytes=0"

        return make

    def test_records_use_the_dictionary(self, store: el.Store) -> None:
        store.append("s", text_events(3))
        assert {r.codec for r in store.backend.read("s", 1, None)} == {2}


# -- LMDB specifics --------------------------------------------------------------------------


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"lmdb://{tmp_path}/store"


@pytest.fixture
def store(url: str) -> Iterator[el.Store]:
    with el.open(url, durability="none") as s:
        yield s


@pytest.mark.parametrize("how", ["stream", "all"])
def test_a_dictionary_is_loaded_outside_the_read_transaction(tmp_path: Path, how: str) -> None:
    """Decoding a dictionary-compressed record may load the dictionary, a blob read in a
    transaction of its own. Loaded inside the scan's read transaction, that nested transaction
    deadlocked against a map resize waiting for the first to end (found in review). Records
    the scan cannot decode exactly are decoded after it, outside any transaction."""
    dict_id, raw = trained_dictionary()
    path = tmp_path / "d"
    backend = LMDBBackend(str(path))
    backend.put_blob(dict_blob_key(dict_id), raw)
    backend.put_blob(ACTIVE_DICT_BLOB, str(dict_id).encode())
    backend.close()
    with el.open(f"lmdb://{path}?compression=zstd&compress_min_bytes=0") as writer:
        written = writer.append("s", text_events(3))
    with el.open(f"lmdb://{path}") as store:  # reads the dictionary on first use
        assert isinstance(store.backend, LMDBBackend)
        gate, compression = store.backend._gate, store.codec.compression
        load = compression._blobs
        assert load is not None
        open_transactions: list[int] = []

        def watched(key: str) -> bytes | None:
            open_transactions.append(gate._active)
            return load(key)

        compression._blobs = watched
        events = list(store.read("s")) if how == "stream" else list(store.read_all())
    assert [e.id for e in events] == [e.id for e in written]
    assert open_transactions == [0]


def test_stream_keys_are_prefix_free_and_isolated(store: el.Store) -> None:
    cjk = "会" * 200  # 600 UTF-8 bytes: longer than an LMDB key
    names = ["a", "a b", "ab", "a~", "b", cjk, cjk[:-1] + "话", "x" * 200]
    for name in names:
        store.append(name, text_events(3, f"{name}-"))
    for name in names:
        assert texts_of(store.read(name)) == [f"{name}-{i}" for i in range(3)]
        assert texts_of(store.read(name, backwards=True, limit=2)) == [f"{name}-2", f"{name}-1"]
        assert store.read_last(name, 1)[0].seq == 3
    assert [s.stream for s in store.streams()] == sorted(names)
    assert all(len(event_key(n, 1)) <= 511 for n in names)
    keys = [lmdb_backend.stream_key(n) for n in names]
    assert not any(a != b and b.startswith(a) for a in keys for b in keys)
    assert [e.stream for e in store.read_all()] == [n for n in names for _ in range(3)]


def test_group_commit_shares_commits_and_loses_nothing(url: str) -> None:
    n_threads, per = 8, 30
    with el.open(url, durability="fsync") as store:
        backend = store.backend
        assert isinstance(backend, LMDBBackend)
        before = backend.stats()
        acked = concurrent_single_appends(store, n_threads, per)
        stats = backend.stats()
        assert stats["jobs"] - before["jobs"] == n_threads * per
        assert stats["commits"] - before["commits"] < n_threads * per, stats
        assert sorted(e.id for e in store.read_all()) == sorted(acked)
        assert [e.position for e in store.read_all()] == list(range(1, n_threads * per + 1))
        assert store.verify().ok


def test_group_commit_conflict_fails_only_its_caller(url: str) -> None:
    """A conflicting append in a shared group fails alone; the rest of its group commits."""
    with el.open(url, durability="fsync") as store:
        backend = store.backend
        assert isinstance(backend, LMDBBackend)
        for stream in ("y", "z"):
            store.append(stream, text_events(1))
        conflict_in_one_group(store, backend._shared.appends, backend._commit_group)
        assert store.stream_info("y").last_seq == 2
        assert store.stream_info("z").last_seq == 1
        assert store.verify().ok


def test_map_grows_when_full_and_readers_never_see_map_full(tmp_path: Path) -> None:
    url = f"lmdb://{tmp_path}/small?map_size=65536"
    stop = threading.Event()
    errors: list[BaseException] = []
    with el.open(url, durability="none") as store:
        store.append("r", text_events(1))

        def reader() -> None:
            try:
                while not stop.is_set():
                    list(store.read("r"))
                    list(store.read_all(limit=50))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            for i in range(40):
                store.append("big", [el.Checkpoint(label=f"{i}" + "x" * 20_000)])
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert not errors
        backend = store.backend
        assert isinstance(backend, LMDBBackend)
        assert backend.map_size > 65536
        assert store.stream_info("big").last_seq == 40
        assert store.verify().ok


_GROW_SCRIPT = """
import sys
import eventlog as el
with el.open(sys.argv[1], durability="none") as store:
    for i in range(60):
        store.append("other", [el.Checkpoint(label=str(i) + "y" * 30000)])
    print(store.backend.map_size)
"""


def test_map_grown_by_another_process_is_adopted(tmp_path: Path) -> None:
    url = f"lmdb://{tmp_path}/shared?map_size=65536"
    with el.open(url, durability="none") as store:
        store.append("mine", text_events(2))
        out = subprocess.run(
            [sys.executable, "-c", _GROW_SCRIPT, url],
            capture_output=True,
            check=True,
            cwd=ROOT,
            text=True,
        )
        assert int(out.stdout) > 65536
        store.append("mine", text_events(1, "after"), expected_seq=2)
        assert store.stream_info("other").last_seq == 60
        assert len(list(store.read("other"))) == 60
        assert texts_of(store.read("mine")) == ["m0", "m1", "after0"]


_GROW_UNTIL_STOPPED = """
import os, sys
import eventlog as el
with el.open(sys.argv[1], durability="none") as store:
    print("writing", flush=True)
    while not os.path.exists(sys.argv[2]):
        store.append("w", [el.Checkpoint(label=os.urandom(1500).hex())])
    print(store.backend.map_size, flush=True)
"""


def test_opening_while_another_process_grows_the_map(tmp_path: Path) -> None:
    """Another process growing the map between the opener's reading of its size and its first
    transaction made open fail with MDB_MAP_RESIZED, about one open in two (found in review):
    the opener adopts the new size and goes on."""
    url = f"lmdb://{tmp_path}/growing?map_size=65536"
    el.open(url).close()
    stop = tmp_path / "stop"
    with subprocess.Popen(
        [sys.executable, "-c", _GROW_UNTIL_STOPPED, url, str(stop)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    ) as writer:
        assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
        opens = 0
        try:
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                with el.open(url) as store:
                    assert store.head_position() >= 0
                opens += 1
        finally:
            stop.touch()
            grown = int(writer.stdout.readline())
    assert writer.returncode == 0 and grown > 65536 and opens > 50


def _script_prints(script: str, url: str, expected: str) -> None:
    """Run a Python script in a fresh process on `url`; it must succeed and print `expected`."""
    out = subprocess.run(
        [sys.executable, "-c", script, url], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert out.returncode == 0 and out.stdout == expected, (out.stdout, out.stderr[-2000:])


_FORK_AND_EXIT = """
import os, sys
import eventlog as el
store = el.open(sys.argv[1])
store.append("s", [el.Checkpoint(label=str(i)) for i in range(3)])
for _ in range(20):  # fill the environment's cache of read transactions
    list(store.read("s"))
pid = os.fork()
if pid == 0:
    store.close()  # refused in a child: leaves the parent's store alone
    store.backend.close()  # so does the backend's own close
    sys.exit(0)  # a normal exit: the interpreter finalizes what the child inherited
os.waitpid(pid, 0)
for _ in range(20):
    assert len(list(store.read("s"))) == 3
store.append("s", [el.Checkpoint(label="after")])
store.close()
print("ok")
"""


def test_a_forked_child_exiting_leaves_the_parents_readers_alone(tmp_path: Path) -> None:
    """A forked child that exits normally finalized the inherited environment, which freed the
    parent's reader slots: the parent's next reads failed with MDB_BAD_RSLOT (found in review).
    The child now never closes the parent's environments."""
    _script_prints(_FORK_AND_EXIT, f"lmdb://{tmp_path}/forked", "ok\n")


_FORK_WHILE_OPENING = """
import os, signal, sys, threading, time
import eventlog as el
from eventlog.backends import lmdb as backend

held = threading.Event()

def hold():  # another thread holds the registry lock at the moment of the fork
    with backend._OPEN_LOCK:
        held.set()
        time.sleep(3)

threading.Thread(target=hold, daemon=True).start()
held.wait()
pid = os.fork()
if pid == 0:
    signal.alarm(10)  # a deadlock ends the child with SIGALRM
    with el.open(sys.argv[1]) as store:
        store.append("child", [el.Checkpoint(label="x")])
    os._exit(0)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_opens_while_another_thread_held_the_registry(tmp_path: Path) -> None:
    """A lock held by another thread at fork time is never released in the child: opening an
    LMDB store there deadlocked (found in review). The child makes its registry lock anew."""
    _script_prints(_FORK_WHILE_OPENING, f"lmdb://{tmp_path}/registry", "0\n")  # the child's exit


def test_one_environment_per_process_and_path(url: str) -> None:
    a = el.open(url)
    b = el.open(url)
    assert isinstance(a.backend, LMDBBackend) and isinstance(b.backend, LMDBBackend)
    assert a.backend.env is b.backend.env
    a.append("s", text_events(1))
    a.close()
    assert texts_of(b.read("s")) == ["m0"]
    b.close()
    with el.open(url) as c:
        assert c.stream_info("s").last_seq == 1


def test_damaged_record_names_stream_and_seq(store: el.Store) -> None:
    store.append("s", text_events(3))
    backend = store.backend
    assert isinstance(backend, LMDBBackend)
    with backend.env.begin(write=True) as txn:
        txn.put(event_key("s", 2), b"\xc1garbage", db=backend.env.open_db(b"events", txn=txn))
    with pytest.raises(el.CorruptionError) as err:
        list(store.read("s"))
    assert err.value.stream == "s" and err.value.seq == 2
    assert "store" in str(err.value)
    with pytest.raises(el.CorruptionError):
        list(store.read_all())
    report = store.verify()
    assert [(p.stream, p.seq) for p in report.problems] == [("s", 2)]


@pytest.mark.parametrize("edit", ["deleted", "elsewhere"])
def test_verify_finds_an_id_index_entry_lost_or_moved(tmp_path: Path, edit: str) -> None:
    """The id index makes a retried append idempotent: an entry lost (or pointing at another
    record) would let the retry store the event twice, so verify checks every entry."""
    path = str(tmp_path / "ids")
    with el.open(f"lmdb://{path}") as store:
        events = store.append("s", text_events(3))
        assert store.verify().ok
    env = lmdb.open(path, max_dbs=8)
    with env.begin(write=True) as txn:
        ids = env.open_db(b"ids", txn=txn)
        key = events[1].id.encode()
        if edit == "deleted":
            assert txn.delete(key, db=ids)
        else:
            txn.put(key, txn.get(events[0].id.encode(), db=ids), db=ids)
    env.close()
    with el.open(f"lmdb://{path}") as store:
        (problem,) = store.verify().problems
        assert (problem.stream, problem.seq, problem.event_id) == ("s", 2, events[1].id)
        what = "has no entry" if edit == "deleted" else "points to another record"
        assert f"the id index {what} for event {events[1].id}" in problem.message


def test_newer_layout_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "future")
    LMDBBackend(path).close()
    env = lmdb.open(path, max_dbs=8)
    with env.begin(write=True) as txn:
        txn.put(b"layout", b"99", db=env.open_db(b"meta", txn=txn))
    env.close()
    with pytest.raises(el.SchemaVersionError, match="99"):
        el.open(f"lmdb://{path}")


def _foreign_environment(path: Path, how: str) -> None:
    """Another program's LMDB environment."""
    env = lmdb.open(str(path), max_dbs=4)
    with env.begin(write=True) as txn:
        if how == "named database":
            txn.put(b"alice", b"1", db=env.open_db(b"users", txn=txn))
        elif how == "main database":
            txn.put(b"alice", b"1")
        else:  # a plain key named like one of eventlog's databases
            txn.put(b"events", b"1")
    env.close()


@pytest.mark.parametrize("how", ["named database", "main database", "plain key 'events'"])
def test_another_programs_environment_is_refused_and_left_alone(tmp_path: Path, how: str) -> None:
    path = tmp_path / "foreign"
    _foreign_environment(path, how)
    before = (path / "data.mdb").read_bytes()
    with pytest.raises(el.SchemaVersionError, match="not an eventlog store") as caught:
        el.open(f"lmdb://{path}")
    assert str(path) in str(caught.value)
    assert (path / "data.mdb").read_bytes() == before
    with pytest.raises(el.SchemaVersionError):  # again: nothing was half-created
        el.open(f"lmdb://{path}")
    assert (path / "data.mdb").read_bytes() == before


@pytest.mark.parametrize("edit", ["layout deleted", "meta dropped"])
def test_a_store_that_lost_its_layout_is_damaged_not_new(tmp_path: Path, edit: str) -> None:
    path = tmp_path / "lost"
    with el.open(f"lmdb://{path}") as store:
        store.append("s", text_events(2))
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True) as txn:
        meta = env.open_db(b"meta", txn=txn)
        if edit == "layout deleted":
            txn.delete(b"layout", db=meta)
        else:
            txn.drop(meta, delete=True)
    env.close()
    before = (path / "data.mdb").read_bytes()
    with pytest.raises(el.CorruptionError, match="damaged.*missing") as caught:
        el.open(f"lmdb://{path}")
    assert not isinstance(caught.value, el.SchemaVersionError)
    assert str(path) in str(caught.value)
    assert (path / "data.mdb").read_bytes() == before


def _layout_1(path: str) -> None:
    """Rewrite an environment as layout 1 wrote it: every payload a bin, layout number 1."""
    env = lmdb.open(path, max_dbs=8)
    with env.begin(write=True) as txn:
        events = env.open_db(b"events", txn=txn)
        rows = [(bytes(k), unpack_row(v)) for k, v in txn.cursor(db=events)]
        for key, rec in rows:
            old = (*msgspec.structs.astuple(rec)[:13],)  # data stays bytes: a bin
            txn.put(key, msgspec.msgpack.encode(old), db=events)
        txn.put(b"layout", b"1", db=env.open_db(b"meta", txn=txn))
    env.close()


def test_layout_1_store_reads_unchanged_and_is_raised_to_2(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = str(tmp_path / "old")
    with el.open(f"lmdb://{path}?compression=zstd&compress_min_bytes=64") as store:
        stored = store.append("s", text_events(3))
        stored += store.append(
            "s",
            [
                el.Event(data=el.ModelInput.from_text("z" * 3000)),  # compressed
                el.Event(data=el.Checkpoint(label="c"), meta={"k": 1}, causation_id="x"),
            ],
        )
    _layout_1(path)
    with caplog.at_level("INFO", logger="eventlog.backends.lmdb"):
        store = el.open(f"lmdb://{path}")
    with store:
        assert "layout b'1' raised to 2" in caplog.text
        assert list(store.read("s")) == stored
        assert list(store.read("s", backwards=True)) == stored[::-1]
        assert list(store.read_all()) == stored
        assert store.verify().ok
        stored += store.append("s", text_events(2, "new"))  # layout 2 beside layout 1
        assert list(store.read("s")) == stored
        assert store.verify().ok
        backend = store.backend
        assert isinstance(backend, LMDBBackend)
        with backend.env.begin() as txn:
            assert txn.get(b"layout", db=backend.env.open_db(b"meta", txn=txn)) == b"2"


def test_old_schema_version_is_upcast_not_decoded_as_current(store: el.Store) -> None:
    store.append("s", [el.Event(data=Versioned(bb="xy"))])
    v1 = msgspec.msgpack.encode({"type": "tests.versioned", "aa": "xy"})
    raw_rewrite(store, "s", 1, version=1, data=v1)
    assert [e.data for e in store.read("s")] == [Versioned(bb="xy")]  # not bb=""
    assert [e.data for e in store.read_all()] == [Versioned(bb="xy")]


def test_record_type_that_disagrees_with_the_payload_is_corruption(store: el.Store) -> None:
    store.append("s", [el.Event(data=el.Checkpoint(label="c"))])
    raw_rewrite(store, "s", 1, type="model_input")
    with pytest.raises(el.CorruptionError, match="'model_input' does not decode") as err:
        list(store.read("s"))
    assert (err.value.stream, err.value.seq) == ("s", 1)


@pytest.mark.parametrize("backwards", [False, True])
def test_record_filed_under_another_stream_is_corruption(store: el.Store, backwards: bool) -> None:
    """The error names the record's own seq (the scan takes the key from the cursor)."""
    store.append("s", text_events(3))
    raw_rewrite(store, "s", 2, stream="t")
    with pytest.raises(el.CorruptionError, match="names stream 't'") as err:
        list(store.read("s", backwards=backwards))
    assert (err.value.stream, err.value.seq) == ("s", 2)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (lmdb.CorruptedError, el.CorruptionError),
        (lmdb.PageNotFoundError, el.CorruptionError),
        (lmdb.InvalidError, el.CorruptionError),
        (lmdb.VersionMismatchError, el.CorruptionError),
        (lmdb.ReadersFullError, el.BackendUnavailableError),
        (lmdb.DiskError, el.BackendUnavailableError),
        (lmdb.LockError, el.BackendUnavailableError),
        (lmdb.Error, el.BackendUnavailableError),
    ],
)
def test_error_translation(error: type[lmdb.Error], expected: type[Exception]) -> None:
    translated = lmdb_backend._translate(error("boom"), "/some/dir")
    assert type(translated) is expected
    assert "/some/dir" in str(translated)


def test_not_an_lmdb_directory(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("not a directory")
    with pytest.raises(el.UsageError, match="is not a directory"):
        el.open(f"lmdb://{target}")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "data.mdb").write_bytes(b"\x00" * 16384)
    with pytest.raises(el.CorruptionError):
        el.open(f"lmdb://{bad}")


@pytest.mark.parametrize(
    "query",
    [
        "?map_size=lots",
        "?map_size=0",
        "?max_readers=-1",
        "?colour=blue",
        "?compression=gzip",
        "?lock_timeout=-1",
        "?lock_timeout=nan",
        "?lock_timeout=soon",
    ],
)
def test_bad_options_are_usage_errors(tmp_path: Path, query: str) -> None:
    with pytest.raises(el.UsageError):
        el.open(f"lmdb://{tmp_path}/o{query}")
    assert not (tmp_path / "o").exists()  # refused before anything was made


def test_empty_path_is_a_usage_error() -> None:
    with pytest.raises(el.UsageError):
        el.open("lmdb://")


def test_snapshot_keys_with_long_names(store: el.Store) -> None:
    b = store.backend
    long_name = "p" * 1000
    b.save_snapshot("s", long_name, 1, 5, b"five")
    b.save_snapshot("s", long_name, 1, 7, b"seven")
    b.save_snapshot("s", long_name + "x", 1, 6, b"other")
    assert b.load_snapshot("s", long_name, 1, 6) == (5, b"five")
    assert b.load_snapshot("s", long_name, 1, None) == (7, b"seven")
    assert b.load_snapshot("s", long_name, -3, None) is None


@pytest.mark.slow
@pytest.mark.parametrize("query", ["", "?compression=zstd&compress_min_bytes=0"])
def test_multiprocess_writers_and_reader(tmp_path: Path, query: str) -> None:
    from tests.multiprocess import check_multiprocess

    counts = check_multiprocess(f"lmdb://{tmp_path}/mp{query}", writers=4, rounds=40)
    assert counts["events"] == 320


# -- a stopped writer, a dead reader ---------------------------------------------------------

_STOP_IN_COMMIT = """
import os, signal, sys
import eventlog as el
from eventlog.backends.lmdb import LMDBBackend

run_jobs = LMDBBackend._run_jobs

def stop_then_run(self, group, nested, txn):  # stopped inside the write transaction
    os.kill(os.getpid(), signal.SIGSTOP)
    run_jobs(self, group, nested, txn)

LMDBBackend._run_jobs = stop_then_run
with el.open(sys.argv[1]) as store:
    store.append("w", [el.Checkpoint(label="never")])
"""

_READ_ONLY = """
import sys
import eventlog as el
s = el.open(sys.argv[1])
print(len(list(s.read_all())))
"""


_APPEND_ONE = """
import sys, time
import eventlog as el
with el.open(sys.argv[1]) as store:
    t0 = time.monotonic()
    try:
        store.append("s", [el.Checkpoint(label="blocked")])
    except el.BackendUnavailableError as exc:
        waited = time.monotonic() - t0
        print("refused", 0.4 < waited < 5, "writer.lock" in str(exc), "lock_timeout" in str(exc))
    else:
        print("appended")
    print(len(list(store.read_all())))
"""


_APPEND_AND_COUNT = """
import sys
import eventlog as el
with el.open(sys.argv[1]) as store:
    store.append("s", [el.Checkpoint(label="after")], expected_seq=5)
    print(len(list(store.read_all())), store.verify().ok)
"""


def _stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal (its state in /proc is T)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] in ("T", "t")


@pytest.mark.parametrize(
    ("script", "query", "expected"),
    [
        (_READ_ONLY, "", "5\n"),
        (_APPEND_ONE, "?lock_timeout=0.5", "refused True True True\n5\n"),
    ],
    ids=["a reader opens", "a writer gives up after lock_timeout"],
)
def test_a_writer_stopped_mid_commit(
    tmp_path: Path, script: str, query: str, expected: str
) -> None:
    """A process's writer stopped (SIGSTOP) inside its commit holds LMDB's writer mutex,
    which has no time limit. A process that only reads opened with a write transaction and
    waited for ever (found in review): opening now takes no write lock. Another process's
    append waited for ever too: eventlog's writers now take a file lock with a limit first,
    so it raises BackendUnavailableError after `lock_timeout`, having written nothing. Both
    write again once the stopped writer is gone."""
    url = f"lmdb://{tmp_path}/stopped"
    with el.open(url) as store:
        store.append("s", text_events(5))
    with subprocess.Popen([sys.executable, "-c", _STOP_IN_COMMIT, url], cwd=ROOT) as writer:
        try:
            deadline = time.monotonic() + 20
            while not _stopped(writer.pid):
                assert writer.poll() is None and time.monotonic() < deadline
                time.sleep(0.02)
            out = subprocess.run(
                [sys.executable, "-c", script, url + query],
                capture_output=True,
                text=True,
                cwd=ROOT,
                timeout=30,
            )
            assert (out.returncode, out.stdout) == (0, expected), out.stderr[-2000:]
        finally:
            writer.kill()  # its flock and LMDB's robust mutex are released with it
    _script_prints(_APPEND_AND_COUNT, url, "6 True\n")


def test_the_writer_lock_is_released_after_every_write(tmp_path: Path) -> None:
    """Each write takes the lock and gives it back: another process may write between two."""
    url = f"lmdb://{tmp_path}/turns?lock_timeout=0"
    with el.open(url) as store:
        store.append("s", text_events(5))
        lock = tmp_path / "turns" / "writer.lock"
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free between writes
            with pytest.raises(el.BackendUnavailableError, match="holds the write lock"):
                store.append("s", text_events(1))
            with pytest.raises(el.BackendUnavailableError, match="holds the write lock"):
                store.fork("s", "f", 2)
            assert [e.seq for e in store.read("s")] == [1, 2, 3, 4, 5]  # reads need no lock
        finally:
            os.close(fd)
        store.append("s", text_events(1))
        assert store.stream_info("s").last_seq == 6


_DIE_MID_READ = """
import sys, time
import eventlog as el
store = el.open(sys.argv[1])
txn = store.backend.env.begin()  # a snapshot this process never gives back: it is killed
print("reading", flush=True)
time.sleep(60)
"""


def _kill_a_reader(url: str) -> int:
    """Run a process that begins a read transaction on `url`, SIGKILL it; its pid."""
    with subprocess.Popen(
        [sys.executable, "-c", _DIE_MID_READ, url], stdout=subprocess.PIPE, text=True, cwd=ROOT
    ) as reader:
        assert reader.stdout is not None and reader.stdout.readline() == "reading\n"
        reader.kill()
    return reader.pid


def _reader_pids(store: el.Store) -> set[int]:
    """The pids of the reader table's slots (`env.readers()`: a header line, then a row each)."""
    backend = store.backend
    assert isinstance(backend, LMDBBackend)
    return {int(row.split()[0]) for row in backend.env.readers().splitlines()[1:]}


class AfterAppends(NamedTuple):
    """What `_appends_after_a_reader_died` saw when its appends were done."""

    file_size: int
    map_size: int
    dead: int
    """The killed reader's pid, or 0."""
    readers: set[int]
    """The reader slots' pids after the appends."""


def _appends_after_a_reader_died(
    path: Path, query: str, appends: int, *, kill: bool
) -> AfterAppends:
    """Append one event at a time with a writer opened before a reader process was killed."""
    url = f"lmdb://{path}{query}"
    with el.open(url, durability="none") as store:
        assert isinstance(store.backend, LMDBBackend)
        store.append("s", text_events(1))
        dead = _kill_a_reader(url) if kill else 0
        assert not kill or dead in _reader_pids(store)  # open's reader_check came before
        for i in range(appends):
            store.append("s", [el.Checkpoint(label=str(i))])
        size = (path / "data.mdb").stat().st_size
        return AfterAppends(size, store.backend.map_size, dead, _reader_pids(store))


def test_a_reader_killed_mid_read_does_not_make_data_mdb_grow(tmp_path: Path) -> None:
    """Only open freed the reader slots of dead processes: a writer open before a reader was
    SIGKILLed mid-read could reuse no page freed since that snapshot, and data.mdb grew with
    every commit (to 1 GB over 20,000 appends, found in review). Writers now free them every
    few commits."""
    plain = _appends_after_a_reader_died(tmp_path / "plain", "", 400, kill=False)
    after = _appends_after_a_reader_died(tmp_path / "dead", "", 400, kill=True)
    assert after.dead not in after.readers
    # 16 MB without the reader check (40 kB per append), 0.3 MB with it or without the kill
    assert after.file_size < 2 * plain.file_size, (after.file_size, plain.file_size)


def test_a_full_map_frees_dead_readers_before_growing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A map full only because a dead reader's snapshot keeps freed pages from reuse doubled:
    the writer now frees dead readers' slots first, and grows only if the map is still full."""
    monkeypatch.setattr(lmdb_backend, "_READER_CHECK_EVERY", 10**9)  # only the full map checks
    after = _appends_after_a_reader_died(tmp_path / "small", "?map_size=262144", 200, kill=True)
    assert after.dead not in after.readers and after.map_size == 262144
    with el.open(f"lmdb://{tmp_path}/small") as store:
        assert len(list(store.read("s"))) == 201 and store.verify().ok


_HOLD_THE_WRITER = """
import sys, time
import lmdb
env = lmdb.open(sys.argv[1])
txn = env.begin(write=True)  # LMDB's writer mutex, held until this process is killed
print("holding", flush=True)
time.sleep(60)
"""


def _append_one(url: str) -> None:
    with el.open(url) as store:
        store.append("s", text_events(1))


def test_an_open_waiting_for_another_process_writer_blocks_no_other_open(tmp_path: Path) -> None:
    """Creating a store's databases takes LMDB's writer mutex; open waited for it holding the
    process-wide registry lock, so every other open in the process waited too (found in review).
    Only opens of the same path wait now."""
    path = tmp_path / "held"
    with subprocess.Popen(
        [sys.executable, "-c", _HOLD_THE_WRITER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    ) as holder:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        opened: list[el.Store] = []
        waiting = threading.Thread(target=lambda: opened.append(el.open(f"lmdb://{path}")))
        waiting.start()
        try:
            time.sleep(0.2)  # the thread waits for the writer mutex
            other = threading.Thread(target=_append_one, args=(f"lmdb://{tmp_path}/other",))
            other.start()
            other.join(timeout=5)
            assert not other.is_alive() and not opened
        finally:
            holder.kill()  # its mutex is released: the waiting open goes on
            waiting.join(timeout=10)
    (store,) = opened
    with store:
        store.append("s", text_events(2))
        assert store.stream_info("s").last_seq == 2 and store.verify().ok
