"""Encryption at rest with a key per stream, and erasure by deleting a stream's key.

Real stores on disk (SQLite file and WAL, LMDB environment, JSONL directory), real key files,
real processes where two race for one stream's first key.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

import eventlog as el
from eventlog.backends.memory import MemoryBackend
from eventlog.codec import chain_hash
from eventlog.copy import copy_store
from eventlog.encryption import (
    ENCRYPTED,
    FileKeyStore,
    KeyStore,
    MemoryKeyStore,
    erase_stream,
    key_name,
)
from eventlog.projections import conversation_state
from eventlog.stats import store_stats
from tests.backends.test_sqlite import edit_payload

pytest.importorskip("cryptography")

MARKER = "zq-marker-7f3a9c"
"""A string that must never reach the disk in plain once encryption is on."""
ROOT = Path(__file__).resolve().parent.parent


def _url(scheme: str, tmp_path: Path, name: str = "store") -> str:
    return {
        "memory": f"memory://{tmp_path.name}-{name}",
        "sqlite": f"sqlite:///{tmp_path}/{name}.db",
        "jsonl": f"jsonl://{tmp_path}/{name}",
        "lmdb": f"lmdb://{tmp_path}/{name}",
    }[scheme]


def _disk_bytes(tmp_path: Path, name: str = "store") -> bytes:
    """Every byte of every file of the store `name` under tmp_path (keys are elsewhere)."""
    out = b""
    for path in sorted(tmp_path.rglob(f"{name}*")):
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for f in files:
            out += f.read_bytes()
    return out


def _chat(store: el.Store, stream: str, text: str, n: int = 3) -> list[el.RecordedEvent]:
    events: list[el.Event] = [el.Event(data=el.SystemInstructionSet(text="be brief"))]
    events += [
        el.Event(data=el.ModelInput.from_text(f"{text} {i}"), meta={"user": f"u-{text}-{i}"})
        for i in range(n - 1)
    ]
    return store.append(stream, events)


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    return tmp_path / "keys"


# -- what reaches the disk ---------------------------------------------------------------------


@pytest.mark.parametrize("encrypted", [True, False], ids=["encrypted", "plain"])
@pytest.mark.parametrize("scheme", ["sqlite", "sqlite-search", "lmdb", "jsonl"])
def test_a_marker_in_payload_and_meta_never_reaches_the_disk(
    tmp_path: Path, keys: Path, scheme: str, encrypted: bool
) -> None:
    """With encryption the marker is nowhere in the store's files (SQLite's WAL included, and
    its full-text index); without it, it is there (so this test can fail)."""
    if scheme == "lmdb":
        pytest.importorskip("lmdb")
    options: dict[str, Any] = {"durability": "none"}
    if scheme == "sqlite-search":
        scheme, options["search"] = "sqlite", True
    if encrypted:
        options["keys"] = keys
    store = el.open(_url(scheme, tmp_path), **options)
    payload = el.Event(data=el.ModelInput.from_text(f"say {MARKER} twice"))
    meta = el.Event(data=el.Checkpoint(label="c"), meta={"note": f"meta {MARKER[::-1]}"})
    store.append("chat", [payload, meta])
    assert [e.meta for e in store.read("chat")][1] == {"note": f"meta {MARKER[::-1]}"}
    while_open = _disk_bytes(tmp_path)
    store.close()
    on_disk = while_open + _disk_bytes(tmp_path)
    for text in (MARKER, MARKER[::-1]):
        found = text.encode() in on_disk or base64.b64encode(text.encode()) in on_disk
        assert found is not encrypted, text
    if encrypted:
        assert MARKER.encode() not in b"".join(p.read_bytes() for p in keys.iterdir())


def test_what_stays_visible_without_a_key(tmp_path: Path, keys: Path) -> None:
    """The envelope stays plain: listing, positions, ids and hashes need no key."""
    url = _url("sqlite", tmp_path)
    with el.open(url, keys=keys) as store:
        written = _chat(store, "visible", "hello")
    with el.open(url) as bare:  # no key store
        assert [s.stream for s in bare.streams()] == ["visible"]
        records = bare.backend.read("visible", 1, None)
        assert [(r.id, r.seq, r.type, r.hash.hex()) for r in records] == [
            (e.id, e.seq, e.type, e.hash) for e in written
        ]
        assert all(r.codec == ENCRYPTED for r in records)
        assert bare.head_position() == 3


# -- reading and writing -----------------------------------------------------------------------


def test_mixed_plain_compressed_and_encrypted_records_read_back(tmp_path: Path, keys: Path) -> None:
    pytest.importorskip("zstandard")
    url = _url("lmdb" if _has("lmdb") else "sqlite", tmp_path)
    big = "compressible text " * 100
    with el.open(url) as store:
        store.append("s", [el.ModelInput.from_text("plain"), el.ModelInput.from_text(big)])
    with el.open(url, keys=keys, compression="zstd") as store:
        store.append("s", [el.ModelInput.from_text("sealed"), el.ModelInput.from_text(big)])
        codecs = [r.codec for r in store.backend.read("s", 1, None)]
        assert codecs == [0, 0, ENCRYPTED, ENCRYPTED | 1]
        texts = [e.data.sections[0].text for e in store.read("s")]  # type: ignore[attr-defined]
        assert texts == ["plain", big, "sealed", big]
        assert store.verify().ok
        stats = store_stats(store)
        assert (stats.compressed, stats.encrypted) == (1, 2)


def test_an_unknown_codec_stays_corruption(keys: Path) -> None:
    store = el.open("memory://", keys=keys)
    store.append("s", [el.Checkpoint(label="a")])
    backend = store.backend
    assert isinstance(backend, MemoryBackend)
    (rec,) = backend.read("s", 1, 1)
    with backend._lock:
        backend._streams["s"][0] = msgspec.structs.replace(rec, codec=ENCRYPTED | 7)
    with pytest.raises(el.CorruptionError, match="unknown payload codec 23"):
        list(store.read("s"))
    assert "unknown payload codec 23" in store.verify().problems[0].message


def test_a_retried_append_is_recognised_and_other_content_is_not(keys: Path) -> None:
    store = el.open("memory://", keys=keys)
    batch = [el.Event(data=el.ModelInput.from_text("hi"), meta={"request": "r-1"})]
    first = store.append("s", batch)
    assert store.append("s", batch) == first  # a retry: nothing written
    assert store.head_position() == 1
    other = el.Event(id=batch[0].id, data=el.ModelInput.from_text("hi"), meta={"request": "r-2"})
    with pytest.raises(el.DuplicateEventError, match="other content"):
        store.append("s", [other])


def test_the_hash_covers_the_sealed_bytes(keys: Path) -> None:
    """After erasure no hash confirms a guess of the plain payload."""
    store = el.open("memory://", keys=keys)
    (event,) = store.append("s", [el.Event(data=el.Checkpoint(label="x"), meta={"k": 1})])
    (rec,) = store.backend.read("s", 1, 1)
    args = ("s", 1, rec.id, rec.ts, rec.type, rec.version, None, None)
    assert chain_hash(bytes(32), *args, rec.meta, rec.data).hex() == event.hash
    plain_meta = store.codec.plain_meta(rec)
    plain = chain_hash(bytes(32), *args, plain_meta, store.codec.unpack(rec))
    assert plain.hex() != event.hash


def test_a_custom_key_store_is_used(tmp_path: Path) -> None:
    class Vault(MemoryKeyStore):
        asked: list[str] = []

        def get(self, stream: str) -> bytes | None:
            self.asked.append(stream)
            return super().get(stream)

    vault = Vault()
    assert isinstance(vault, KeyStore)
    with el.open(_url("sqlite", tmp_path), key_store=vault) as store:
        store.append("s", [el.Checkpoint(label="a")])
        assert next(iter(store.read("s"))).data == el.Checkpoint(label="a")
    assert "s" in vault.asked and vault.get("s") is not None


# -- erasure -----------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["memory", "sqlite", "jsonl", "lmdb"])
def test_erasure_makes_a_stream_unreadable_and_nothing_else(
    tmp_path: Path, keys: Path, scheme: str
) -> None:
    if scheme == "lmdb":
        pytest.importorskip("lmdb")
    store = el.open(_url(scheme, tmp_path), keys=keys, durability="none")
    _chat(store, "gone", "secret")
    kept = _chat(store, "kept", "public")
    runner_state = conversation_state(store, "gone")  # noqa: F841 - reads fine before
    store.backend.save_snapshot("gone", "state", 1, 3, b"derived from the events")
    store.fork("gone", "gone-retry", at_seq=2)
    store.append("gone-retry", [el.ModelInput.from_text("own event of the fork")])
    head = store.head_position()

    report = erase_stream(store, "gone")
    assert (report.key_deleted, report.encrypted_events, report.plain_events) == (True, 3, 0)
    assert report.forks == ["gone-retry"] and report.snapshots_dropped == 1
    assert store.backend.load_snapshot("gone", "state", 1, None) is None
    assert not (keys / f"{key_name('gone')}.key").exists()

    for read in (
        lambda: list(store.read("gone")),
        lambda: store.get("gone", 2),
        lambda: list(store.read_all()),
        lambda: store.subscribe().poll(0),
        lambda: conversation_state(store, "gone"),
        lambda: list(store.read("gone-retry")),  # its prefix is the erased stream's
    ):
        with pytest.raises(el.ErasedError, match="'gone'.*its encryption key was deleted") as e:
            read()
        assert e.value.stream == "gone"
        assert not isinstance(e.value, el.CorruptionError)
    # The rest of the store reads as before: other streams, the fork's own events, and a reader
    # of the whole store goes on past the erased event it stopped at.
    assert [e.id for e in store.read("kept")] == [e.id for e in kept]
    assert [e.seq for e in store.read("gone-retry", 3)] == [3]
    with pytest.raises(el.ErasedError) as stopped:
        list(store.read_all())
    assert stopped.value.position == 1
    assert [s.stream for s in store.streams()] == ["gone", "gone-retry", "kept"]

    report_v = store.verify()
    assert report_v.ok and report_v.erased == ["gone"] and report_v.events == 7

    with pytest.raises(el.ErasedError, match="nothing can be appended"):
        store.append("gone", [el.ModelInput.from_text("more")])
    assert store.head_position() == head
    assert store.stream_info("gone").last_seq == 3
    store.close()
    with el.open(_url(scheme, tmp_path) if scheme != "memory" else "memory://", keys=keys) as again:
        if scheme != "memory":  # still erased after reopening: the marker stays
            with pytest.raises(el.ErasedError):
                again.append("gone", [el.ModelInput.from_text("more")])
            assert again.verify().erased == ["gone"]


def test_erasing_reports_events_stored_before_encryption(tmp_path: Path, keys: Path) -> None:
    url = _url("sqlite", tmp_path)
    with el.open(url) as store:
        store.append("s", [el.ModelInput.from_text("written plain")])
    with el.open(url, keys=keys) as store:
        store.append("s", [el.ModelInput.from_text("sealed")])
        report = erase_stream(store, "s")
        assert (report.encrypted_events, report.plain_events) == (1, 1)
        assert store.get("s", 1).data == el.ModelInput.from_text("written plain")
        with pytest.raises(el.ErasedError):
            store.get("s", 2)
        again = erase_stream(store, "s")
        assert not again.key_deleted


def test_erasure_needs_a_key_store_and_an_existing_stream(keys: Path) -> None:
    with el.open("memory://") as bare, pytest.raises(el.UsageError, match="without a key store"):
        erase_stream(bare, "s")
    with el.open("memory://", keys=keys) as store, pytest.raises(el.StreamNotFoundError):
        erase_stream(store, "nope")


def test_erasing_a_fork_leaves_its_ancestor_readable(keys: Path) -> None:
    store = el.open("memory://", keys=keys)
    _chat(store, "root", "shared")
    store.fork("root", "branch", at_seq=2)
    store.append("branch", [el.ModelInput.from_text("branch only")])
    report = erase_stream(store, "branch")
    assert (report.encrypted_events, report.shared_events, report.forks) == (1, 2, [])
    assert len(list(store.read("root"))) == 3
    assert [e.seq for e in store.read("branch", 1, 2)] == [1, 2]  # the ancestor's events
    with pytest.raises(el.ErasedError, match="'branch'"):
        store.get("branch", 3)


def test_another_store_object_sees_an_erasure_at_once(tmp_path: Path, keys: Path) -> None:
    url = _url("sqlite", tmp_path)
    with el.open(url, keys=keys) as writer, el.open(url, keys=keys) as reader:
        _chat(writer, "s", "x")
        assert len(list(reader.read("s"))) == 3
        erase_stream(writer, "s")
        with pytest.raises(el.ErasedError):
            list(reader.read("s"))
        with pytest.raises(el.ErasedError):
            reader.append("s", [el.Checkpoint(label="late")])


# -- damage and the wrong key ------------------------------------------------------------------


def _sqlite_store(tmp_path: Path, keys: Path) -> tuple[str, Path]:
    url = _url("sqlite", tmp_path)
    with el.open(url, keys=keys) as store:
        _chat(store, "a", "alpha", n=3)
        _chat(store, "b", "beta", n=3)
    return url, tmp_path / "store.db"


def _stored(path: Path, stream: str, seq: int) -> bytes:
    got: list[bytes] = []
    edit_payload(path, stream, seq, lambda data: got.append(data) or data)  # type: ignore[func-returns-value]
    return got[0]


@pytest.mark.parametrize(
    ("what", "edit"),
    [
        ("a flipped byte", lambda path: edit_payload(path, "a", 2, _flip)),
        ("another seq's ciphertext", lambda path: _copy_payload(path, ("a", 3), ("a", 2))),
        ("another stream's ciphertext", lambda path: _copy_payload(path, ("b", 2), ("a", 2))),
    ],
)
def test_altered_ciphertext_is_corruption_at_its_place(
    tmp_path: Path, keys: Path, what: str, edit: Callable[[Path], None]
) -> None:
    url, path = _sqlite_store(tmp_path, keys)
    edit(path)
    with el.open(url, keys=keys) as store:
        with pytest.raises(el.CorruptionError, match="does not decrypt") as caught:
            list(store.read("a"))
        assert (caught.value.stream, caught.value.seq) == ("a", 2), what
        assert str(tmp_path) in str(caught.value)
        (problem,) = store.verify().problems
        assert (problem.stream, problem.seq) == ("a", 2)
        assert len(list(store.read("b"))) == 3  # the other stream is untouched


def _flip(data: bytes) -> bytes:
    out = bytearray(data)
    out[-1] ^= 1
    return bytes(out)


def _copy_payload(path: Path, src: tuple[str, int], dst: tuple[str, int]) -> None:
    data = _stored(path, *src)
    edit_payload(path, *dst, lambda _: data)


def test_swapped_meta_and_payload_do_not_decrypt(keys: Path) -> None:
    store = el.open("memory://", keys=keys)
    store.append("s", [el.Event(data=el.Checkpoint(label="c"), meta={"k": "v"})])
    backend = store.backend
    assert isinstance(backend, MemoryBackend)
    (rec,) = backend.read("s", 1, 1)
    with backend._lock:
        backend._streams["s"][0] = msgspec.structs.replace(rec, data=rec.meta, meta=rec.data)
    with pytest.raises(el.CorruptionError, match="does not decrypt"):
        store.get("s", 1)


def test_a_replaced_key_file_is_corruption_and_a_removed_one_a_missing_key(
    tmp_path: Path, keys: Path
) -> None:
    url, _ = _sqlite_store(tmp_path, keys)
    key_file = keys / f"{key_name('a')}.key"
    key_file.write_bytes(os.urandom(32))  # another key
    with el.open(url, keys=keys) as store:
        with pytest.raises(el.CorruptionError, match="not the one it was written with") as e:
            store.get("a", 1)
        assert (e.value.stream, e.value.seq) == ("a", 1)
        assert store.verify().problems[0].stream == "a"
    key_file.unlink()  # removed by hand: not an erasure (no marker)
    with el.open(url, keys=keys) as store:
        with pytest.raises(el.MissingKeyError, match="key is not in"):
            store.get("a", 1)
        (problem,) = store.verify().problems
        assert "key is not in" in problem.message
        with pytest.raises(el.MissingKeyError, match="would mix two keys"):
            store.append("a", [el.Checkpoint(label="new key?")])
        assert not key_file.exists() and store.head_position() == 6
    key_file.write_bytes(b"short")
    with el.open(url, keys=keys) as store, pytest.raises(el.CorruptionError, match="damaged"):
        store.get("a", 1)


def test_without_a_key_store_encrypted_events_need_one(tmp_path: Path, keys: Path) -> None:
    url, _ = _sqlite_store(tmp_path, keys)
    with el.open(url) as bare:
        bare.append("plain", [el.Checkpoint(label="fine")])
        assert len(list(bare.read("plain"))) == 1
        with pytest.raises(el.MissingKeyError, match="open the store with its key store"):
            list(bare.read("a"))
        report = bare.verify()
        assert {p.stream for p in report.problems} == {"a", "b"}
        with pytest.raises(el.MissingKeyError, match="holds encrypted events"):
            bare.append("a", [el.Checkpoint(label="would be plain")])
        assert bare.stream_info("a").last_seq == 3


# -- keys: made once, across threads and processes ---------------------------------------------


def test_threads_making_one_streams_key_end_with_one(keys: Path) -> None:
    store = FileKeyStore(keys)
    got: list[bytes] = []
    start = threading.Barrier(8)

    def make() -> None:
        start.wait()
        got.append(store.get_or_create("s"))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 1
    names = sorted(p.name for p in keys.iterdir())
    assert names == [f"{key_name('s')}.key"]
    assert (keys / names[0]).stat().st_mode & 0o777 == 0o600
    assert keys.stat().st_mode & 0o777 == 0o700


_RACER = """
import sys, time
import eventlog as el
url, keys, start, tag = sys.argv[1:]
store = el.open(url, keys=keys)
while time.time() < float(start):
    pass
for i in range(5):
    store.append("new-stream", [el.ModelInput.from_text(f"{tag} {i}")])
store.close()
"""


def test_two_processes_appending_a_new_streams_first_events_share_one_key(
    tmp_path: Path, keys: Path
) -> None:
    url = _url("sqlite", tmp_path)
    with el.open(url, keys=keys):
        pass  # the store exists before the race: only the key is raced for
    start = str(time.time() + 1.0)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", _RACER, url, str(keys), start, tag], env=env)
        for tag in ("one", "two")
    ]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    assert [p.name for p in keys.iterdir()] == [f"{key_name('new-stream')}.key"]
    with el.open(url, keys=keys) as store:
        texts = sorted(e.data.sections[0].text for e in store.read("new-stream"))  # type: ignore[attr-defined]
        assert texts == sorted(f"{t} {i}" for t in ("one", "two") for i in range(5))
        assert store.verify().ok


# -- options and bad input ---------------------------------------------------------------------


def test_keys_in_the_url_and_as_a_keyword(tmp_path: Path, keys: Path) -> None:
    with el.open(f"{_url('sqlite', tmp_path)}?keys={keys}") as store:
        store.append("s", [el.Checkpoint(label="a")])
        assert store.backend.read("s", 1, 1)[0].codec == ENCRYPTED
    with el.open(_url("sqlite", tmp_path), keys=str(keys)) as store:
        assert store.get("s", 1).data == el.Checkpoint(label="a")
    astore = el.open_async("memory://", key_store=MemoryKeyStore())
    assert astore.sync.codec.encryption is not None
    astore.sync.close()


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl"])
def test_a_key_directory_that_cannot_be_made_is_refused_before_any_write(
    tmp_path: Path, scheme: str
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    for bad in (blocker / "keys", blocker):
        with pytest.raises(el.UsageError, match=f"key directory {bad} cannot be used: Not a dir"):
            el.open(_url(scheme, tmp_path), keys=bad)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # no store made


def test_bad_encryption_options_are_usage_errors(tmp_path: Path) -> None:
    url = _url("jsonl", tmp_path)
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: el.open(url, keys=f"{tmp_path}/store/keys"), "is inside the store"),
        (lambda: el.open(url, key_stor=MemoryKeyStore()), r"unknown option\(s\).*key_stor"),  # type: ignore[call-arg]
        (lambda: el.open(f"{url}?key_store=x"), "key_store is a keyword"),
        (lambda: el.open(url, keys=tmp_path, key_store=MemoryKeyStore()), "not both"),
        (lambda: el.open(url, key_store="dir"), "must be a KeyStore"),  # type: ignore[arg-type]
        (lambda: el.open(url, keys=""), "must name a key directory"),
    ]
    for call, match in cases:
        with pytest.raises(el.UsageError, match=match):
            call()
    assert list(tmp_path.iterdir()) == []


# -- copies --------------------------------------------------------------------------------------


def _everything(store: el.Store) -> list[tuple[str, int, Any, Any]]:
    return [(e.stream, e.seq, e.data, e.meta) for e in store.read_all()]


def _source(tmp_path: Path, keys: Path) -> el.Store:
    store = el.open(_url("sqlite", tmp_path, "source"), keys=keys)
    _chat(store, "a", "alpha")
    _chat(store, "b", "beta")
    store.fork("a", "a-fork", at_seq=2)
    store.append("a-fork", [el.ModelInput.from_text("fork's own")])
    return store


def test_a_copy_with_the_same_keys_keeps_ciphertext_and_hashes(tmp_path: Path, keys: Path) -> None:
    with (
        _source(tmp_path, keys) as source,
        el.open(_url("sqlite", tmp_path, "copy"), keys=keys) as target,
    ):
        report = copy_store(source, target)
        assert report.same_hashes and (report.encrypted, report.decrypted) == (0, 0)
        assert target.backend.read_all(0, 100) == source.backend.read_all(0, 100)
        assert _everything(target) == _everything(source)
        # One key directory, one erasure: both stores lose the stream.
        erase_stream(source, "b")
        with pytest.raises(el.ErasedError):
            list(target.read("b"))


def test_a_copy_with_other_keys_is_encrypted_again_with_new_hashes(
    tmp_path: Path, keys: Path
) -> None:
    other = tmp_path / "other-keys"
    with (
        _source(tmp_path, keys) as source,
        el.open(_url("lmdb" if _has("lmdb") else "sqlite", tmp_path, "copy"), keys=other) as target,
    ):
        report = copy_store(source, target)
        assert not report.same_hashes and report.encrypted == report.events == 7
        assert _everything(target) == _everything(source)
        assert target.verify().ok
        source_hashes = {e.id: e.hash for e in source.read_all()}
        assert not set(source_hashes.values()) & {e.hash for e in target.read_all()}
        erase_stream(source, "a")  # the copy has keys of its own
        assert len(list(target.read("a"))) == 3


def test_a_copy_into_a_store_without_keys_must_be_asked_to_decrypt(
    tmp_path: Path, keys: Path
) -> None:
    from eventlog.connect import rehearsal

    target_url = _url("jsonl", tmp_path, "plain-copy")
    with _source(tmp_path, keys) as source:
        with rehearsal(target_url) as trial, pytest.raises(el.UsageError, match="--decrypt"):
            copy_store(source, lambda: el.open(target_url), rehearse=trial)
        assert not (tmp_path / "plain-copy").exists()  # refused before the target was made
        with el.open(target_url) as target:
            report = copy_store(source, target, decrypt=True)
            assert (report.decrypted, report.same_hashes) == (7, False)
            assert _everything(target) == _everything(source)
            assert target.verify().ok


def test_an_erased_stream_is_copied_as_stored_and_a_plain_store_is_encrypted(
    tmp_path: Path, keys: Path
) -> None:
    with _source(tmp_path, keys) as source:
        erase_stream(source, "b")
        with el.open(_url("sqlite", tmp_path, "copy"), keys=keys) as target:
            report = copy_store(source, target)
            assert report.same_hashes
            assert target.verify().erased == ["b"]
        with (
            el.open(_url("jsonl", tmp_path, "json"), keys=keys) as other_format,
            pytest.raises(el.UsageError, match="'b' is erased.*cannot be converted"),
        ):
            copy_store(source, other_format)
    with el.open(_url("sqlite", tmp_path, "plain")) as plain:
        _chat(plain, "p", "plain")
        with el.open(_url("sqlite", tmp_path, "sealed"), keys=keys) as sealed:
            report = copy_store(plain, sealed)
            assert report.encrypted == 3 and not report.same_hashes
            assert {r.codec for r in sealed.backend.read_all(0, 10)} == {ENCRYPTED}
            assert _everything(sealed) == _everything(plain)


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


@pytest.fixture(autouse=True)
def _no_stray_json(tmp_path: Path) -> Iterator[None]:
    """Every test leaves valid JSON lines in JSONL stores (an encrypted line is one too)."""
    yield
    for path in tmp_path.rglob("streams/*"):
        for line in path.read_bytes().splitlines()[1:]:
            json.loads(line)


def test_an_erasure_cut_short_is_finished_when_the_key_directory_opens(keys: Path) -> None:
    """A crash between the erasure marker and the key's removal leaves both: the next open of
    the directory removes the key."""
    store = FileKeyStore(keys)
    store.get_or_create("s")
    key_file = keys / f"{key_name('s')}.key"
    kept = key_file.read_bytes()
    store.delete("s")
    key_file.write_bytes(kept)  # as if the process died before removing it
    assert FileKeyStore(keys).get("s") is None and not key_file.exists()
    assert FileKeyStore(keys).erased("s")


@pytest.mark.parametrize("scheme", ["memory", "sqlite", "jsonl", "lmdb"])
def test_a_reader_of_the_whole_store_skips_nothing_before_an_erased_event(
    tmp_path: Path, keys: Path, scheme: str
) -> None:
    """Events before the first erased one in a page are delivered before its ErasedError, so
    going on after `exc.position` (as the error says to) skips nothing."""
    if scheme == "lmdb":
        pytest.importorskip("lmdb")
    with el.open(_url(scheme, tmp_path), keys=keys) as store:
        for stream, text in [("a", "a1"), ("a", "a2"), ("gone", "g1"), ("a", "a3")]:
            store.append(stream, [el.ModelInput.from_text(text)])
        erase_stream(store, "gone")

        def texts(events: Iterable[el.RecordedEvent]) -> list[str]:
            return [e.data.text for e in events if isinstance(e.data, el.ModelInput)]

        seen: list[el.RecordedEvent] = []
        with pytest.raises(el.ErasedError) as stopped:
            for event in store.read_all():
                seen.append(event)
        assert texts(seen) == ["a1", "a2"] and stopped.value.position == 3
        assert texts(store.read_all(after=stopped.value.position)) == ["a3"]

        sub = store.subscribe()
        assert texts(sub.poll(0)) == ["a1", "a2"]
        with pytest.raises(el.ErasedError) as at:
            sub.poll(0)
        assert at.value.position == 3
        assert texts(store.subscribe(after=3).poll(0)) == ["a3"]

        async def read_async() -> None:
            astore = el.AsyncStore(store)
            assert texts(await astore.read_all()) == ["a1", "a2"]
            with pytest.raises(el.ErasedError):
                await astore.read_all(after=2)
            assert texts(await astore.read_all(after=3)) == ["a3"]
            sub = astore.subscribe()
            assert texts([await sub.__anext__(), await sub.__anext__()]) == ["a1", "a2"]
            with pytest.raises(el.ErasedError):
                await sub.__anext__()
            sub.close()

        asyncio.run(read_async())
