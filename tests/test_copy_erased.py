"""Copying a store that holds erased streams: kept as they are, marked erased in the target's
key store, or left out on request; refused before anything is written otherwise.

Real SQLite, JSONL and LMDB stores on disk with real key directories, and the `export` command
in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import eventlog as el
from eventlog.connect import rehearsal
from eventlog.copy import CopyReport, copy_store
from eventlog.encryption import ENCRYPTED, FileKeyStore, erase_stream

pytest.importorskip("cryptography")


def _chat(store: el.Store, stream: str, n: int = 3) -> None:
    store.append(stream, [el.ModelInput.from_text(f"{stream} {i}") for i in range(n)])


def _source(tmp_path: Path, keys: Path) -> str:
    """An SQLite store: "mixed" (2 plain events, then 2 sealed; erased), "kept" (3 sealed),
    "mixed-fork" (a fork of "mixed" with 1 own event), "kept-fork" (event-less fork; erased),
    "kept-fork-2" (a fork of "kept-fork" with 1 own event). 9 events."""
    url = f"sqlite:///{tmp_path}/source.db"
    with el.open(url) as plain:  # before encryption was turned on
        _chat(plain, "mixed", 2)
    with el.open(url, keys=keys) as store:
        _chat(store, "mixed", 2)
        _chat(store, "kept", 3)
        store.fork("mixed", "mixed-fork", at_seq=3)
        _chat(store, "mixed-fork", 1)
        store.fork("kept", "kept-fork", at_seq=2)
        store.fork("kept-fork", "kept-fork-2", at_seq=2)
        _chat(store, "kept-fork-2", 1)
        erase_stream(store, "mixed")
        erase_stream(store, "kept-fork")
    return url


def _records(store: el.Store) -> list[tuple[object, ...]]:
    return [
        (r.stream, r.seq, r.id, r.hash, r.codec, bytes(r.data))
        for r in store.backend.read_all(0, 1000)
    ]


def _copy_via_rehearsal(source: el.Store, target_url: str, **options: bool) -> CopyReport:
    """As `eventlog export` copies into a new store: checked on a stand-in before it is made."""
    made: list[el.Store] = []

    def open_target() -> el.Store:
        made.append(el.open(target_url))
        return made[0]

    try:
        with rehearsal(target_url) as trial:
            return copy_store(source, open_target, rehearse=trial, **options)
    finally:
        for store in made:
            store.close()


def test_same_keys_keep_every_record_of_an_erased_stream_as_stored(tmp_path: Path) -> None:
    """The plain events an erased stream held from before encryption are copied as they are
    (they were sealed, with a key the erased stream may not have, and the copy broke off)."""
    keys = tmp_path / "keys"
    with el.open(_source(tmp_path, keys), keys=keys) as source:
        target_url = f"sqlite:///{tmp_path}/copy.db?keys={keys}"
        report = _copy_via_rehearsal(source, target_url)
        assert (report.events, report.same_hashes, report.erased) == (9, True, 2)
        with el.open(target_url) as target:
            assert _records(target) == _records(source)
            check = target.verify()
            assert check.ok and check.erased == ["mixed"]
            plain = list(target.read("mixed", 1, 2))
            assert [e.data.text for e in plain] == ["mixed 0", "mixed 1"]
            with pytest.raises(el.ErasedError):
                list(target.read("mixed"))
            with pytest.raises(el.ErasedError):
                target.append("kept-fork", [el.ModelInput.from_text("no")])
            assert [e.data.text for e in target.read("kept-fork-2")][-1] == "kept-fork-2 0"


@pytest.mark.parametrize("scheme", ["sqlite", "lmdb"])
def test_another_key_directory_is_told_the_streams_are_erased(tmp_path: Path, scheme: str) -> None:
    pytest.importorskip(scheme) if scheme == "lmdb" else None
    keys, other = tmp_path / "keys", tmp_path / "other-keys"
    with el.open(_source(tmp_path, keys), keys=keys) as source:
        target_url = (
            f"sqlite:///{tmp_path}/copy.db?keys={other}"
            if scheme == "sqlite"
            else f"lmdb://{tmp_path}/copy?keys={other}"
        )
        report = _copy_via_rehearsal(source, target_url)
        assert (report.events, report.erased, report.encrypted) == (9, 2, 5)
        assert FileKeyStore(other).erased("mixed") and FileKeyStore(other).erased("kept-fork")
        with el.open(target_url) as target:
            check = target.verify()
            assert check.ok and check.erased == ["mixed"]
            assert target.stream_info("kept-fork").parent == "kept"
            with pytest.raises(el.ErasedError):
                target.append("kept-fork", [el.ModelInput.from_text("no")])
            assert [e.data.text for e in target.read("kept")] == [f"kept {i}" for i in range(3)]
            sealed = {r.stream for r in target.backend.read_all(0, 100) if r.codec & ENCRYPTED}
            assert sealed == {"mixed", "kept", "mixed-fork", "kept-fork-2"}


def test_a_key_directory_with_a_live_key_for_an_erased_stream_is_refused_first(
    tmp_path: Path,
) -> None:
    keys, other = tmp_path / "keys", tmp_path / "other-keys"
    FileKeyStore(other).get_or_create("mixed")  # another store's live "mixed" stream
    before = sorted(p.name for p in other.iterdir())
    with (
        el.open(_source(tmp_path, keys), keys=keys) as source,
        pytest.raises(el.UsageError, match="'mixed' is erased.*holds a key for it"),
    ):
        _copy_via_rehearsal(source, f"sqlite:///{tmp_path}/copy.db?keys={other}")
    assert not (tmp_path / "copy.db").exists()
    assert sorted(p.name for p in other.iterdir()) == before


def test_a_stream_erased_only_in_the_target_key_directory_is_refused_first(
    tmp_path: Path,
) -> None:
    keys, other = tmp_path / "keys", tmp_path / "other-keys"
    FileKeyStore(other).delete("kept")
    with (
        el.open(_source(tmp_path, keys), keys=keys) as source,
        pytest.raises(el.UsageError, match="'kept' is erased in the target's key store"),
    ):
        _copy_via_rehearsal(source, f"sqlite:///{tmp_path}/copy.db?keys={other}")
    assert not (tmp_path / "copy.db").exists()


@pytest.mark.parametrize("target", ["plain-sqlite", "jsonl"])
def test_erased_streams_block_a_copy_they_cannot_go_into_unless_left_out(
    tmp_path: Path, target: str
) -> None:
    """A target without a key store cannot mark a stream erased, and another payload format
    cannot take its sealed events: refused before the target is made, or left out on request
    with every fork that descends from them."""
    keys = tmp_path / "keys"
    target_url = (
        f"sqlite:///{tmp_path}/copy.db" if target == "plain-sqlite" else f"jsonl://{tmp_path}/copy"
    )
    with el.open(_source(tmp_path, keys), keys=keys) as source:
        with pytest.raises(el.UsageError, match="leave_out_erased"):
            _copy_via_rehearsal(source, target_url, decrypt=True)
        assert not list(tmp_path.glob("copy*"))
        report = _copy_via_rehearsal(source, target_url, decrypt=True, leave_out_erased=True)
        assert report.left_out == ("kept-fork", "kept-fork-2", "mixed", "mixed-fork")
        assert (report.events, report.left_out_events, report.streams) == (3, 6, 1)
        with el.open(target_url) as target:
            assert target.verify().ok and [s.stream for s in target.streams()] == ["kept"]
            assert [e.data.text for e in target.read("kept")] == [f"kept {i}" for i in range(3)]


def test_export_leaves_erased_streams_out_only_when_asked(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    source = _source(tmp_path, keys) + f"?keys={keys}"

    def export(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "eventlog", "--store", source, "export", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "COLUMNS": "200"},
        )

    target = f"jsonl://{tmp_path}/audit"
    refused = export(target, "--decrypt", "--quiet")
    assert refused.returncode == 1, refused.stderr
    assert "--leave-out-erased" in refused.stderr and not (tmp_path / "audit").exists()
    with el.open(f"jsonl://{tmp_path}/existing"):
        pass  # an empty store that exists: refused the same way, and no key directory made
    existing = export(f"jsonl://{tmp_path}/existing?keys={tmp_path}/new-keys", "--quiet")
    assert existing.returncode == 1 and "cannot be converted" in existing.stderr
    assert not (tmp_path / "new-keys").exists()
    done = export(target, "--decrypt", "--leave-out-erased", "--quiet")
    assert done.returncode == 0, done.stderr
    assert (
        "left out 4 streams, erased or forked from one (6 events): kept-fork, kept-fork-2"
        in done.stdout
    )
    assert "verify target: ok" in done.stdout
    as_json = json.loads(
        export(f"jsonl://{tmp_path}/audit-2", "--decrypt", "--leave-out-erased", "--json").stdout
    )
    assert as_json["left_out"] == ["kept-fork", "kept-fork-2", "mixed", "mixed-fork"]
    assert (as_json["events"], as_json["target_verified"]) == (3, True)


def test_a_rehearsal_reads_the_key_store_and_writes_nothing_to_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-keys-yet"
    with rehearsal(f"sqlite:///{tmp_path}/a.db?keys={missing}") as trial:
        trial.append("s", [el.ModelInput.from_text("sealed in memory")])
        assert trial.backend.read_all(0, 10)[0].codec & ENCRYPTED
    assert not missing.exists() and not (tmp_path / "a.db").exists()

    keys = tmp_path / "keys"
    FileKeyStore(keys).get_or_create("live")
    FileKeyStore(keys).delete("gone")
    before = sorted(p.name for p in keys.iterdir())
    with rehearsal(f"sqlite:///{tmp_path}/b.db?keys={keys}") as trial:
        ks = trial.codec.encryption.keys  # type: ignore[union-attr]
        assert ks.get("live") == FileKeyStore(keys).get("live") and ks.erased("gone")
        with pytest.raises(el.ErasedError):
            trial.append("gone", [el.ModelInput.from_text("no")])
        trial.append("new", [el.ModelInput.from_text("key made in memory")])
        assert ks.delete("live") and ks.erased("live")
    assert sorted(p.name for p in keys.iterdir()) == before


def test_a_rehearsal_refuses_a_key_path_that_is_a_file_as_the_store_would(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not keys")
    with pytest.raises(el.UsageError, match="key directory .*afile cannot be used: Not a dir"):
        rehearsal(f"sqlite:///{tmp_path}/a.db?keys={tmp_path}/afile")


def test_an_erasure_cut_short_in_the_target_key_directory_is_no_live_key(tmp_path: Path) -> None:
    """Opening the directory finishes the erasure (the key file goes): the rehearsal agrees."""
    keys, other = tmp_path / "keys", tmp_path / "other-keys"
    with el.open(_source(tmp_path, keys), keys=keys) as source:
        FileKeyStore(other).get_or_create("mixed")
        key_file = next(other.glob("*.key"))
        kept = key_file.read_bytes()
        FileKeyStore(other).delete("mixed")
        key_file.write_bytes(kept)  # as if the erasure had crashed before removing the key
        report = _copy_via_rehearsal(source, f"sqlite:///{tmp_path}/copy.db?keys={other}")
        assert report.erased == 2 and not key_file.exists()


def test_a_stream_erased_while_the_copy_runs_is_copied_as_erased(tmp_path: Path) -> None:
    keys, other = tmp_path / "keys", tmp_path / "other-keys"
    with el.open(_source(tmp_path, keys), keys=keys) as source:
        erased_now: list[str] = []

        def progress(phase: str, done: int, total: int) -> None:
            if phase == "check" and not erased_now:  # after the checks saw "kept" readable
                erase_stream(source, "kept")
                erased_now.append("kept")

        target_url = f"sqlite:///{tmp_path}/copy.db?keys={other}"
        with el.open(target_url) as target:
            report = copy_store(source, target, progress=progress)
            assert (report.events, report.erased) == (9, 3)
            assert target.verify().erased == ["kept", "mixed"]
            assert FileKeyStore(other).erased("kept") and FileKeyStore(other).get("kept") is None


def test_an_erased_events_size_is_checked_against_the_target_limit(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    url = f"sqlite:///{tmp_path}/source.db"
    with el.open(url, keys=keys) as store:
        store.append("big", [el.ModelInput.from_text("x" * 20_000)])
        erase_stream(store, "big")
        target_url = f"sqlite:///{tmp_path}/copy.db?keys={keys}&max_event_bytes=10000"
        with pytest.raises(el.ValidationError, match="'big' seq 1 .* the limit of .* is 10000"):
            _copy_via_rehearsal(store, target_url)
    assert not (tmp_path / "copy.db").exists()


def test_leaving_out_reports_progress_up_to_the_events_copied(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    seen: list[tuple[str, int, int]] = []
    with (
        el.open(_source(tmp_path, keys), keys=keys) as source,
        el.open(f"jsonl://{tmp_path}/copy") as target,
    ):
        copy_store(
            source,
            target,
            decrypt=True,
            leave_out_erased=True,
            progress=lambda *args: seen.append(args),
        )
    assert [s for s in seen if s[0] == "copy"][-1] == ("copy", 3, 3)


def test_same_keys_copy_the_dictionary_of_sealed_dictionary_compressed_events(
    tmp_path: Path,
) -> None:
    """A sealed payload compressed with a trained dictionary is kept as stored: the target
    gets the dictionary blob it needs (its id is inside the ciphertext)."""
    from eventlog.bench.workload import conversation_events
    from eventlog.compression import train_dictionary

    keys = tmp_path / "keys"
    url = f"sqlite:///{tmp_path}/source.db?compression=zstd"
    with el.open(url) as plain:
        plain.append("train", conversation_events(600, 0))
        train_dictionary(plain)
    with el.open(url, keys=keys) as source:
        source.append("live", conversation_events(20, 1))
        assert {r.codec for r in source.backend.read("live", 1, None)} == {ENCRYPTED | 2}
        target_url = (
            f"lmdb://{tmp_path}/copy?keys={keys}"
            if _has_lmdb()
            else (f"sqlite:///{tmp_path}/copy.db?keys={keys}")
        )
        _copy_via_rehearsal(source, target_url)
        with el.open(target_url) as target:
            assert target.verify().ok
            assert [e.data for e in target.read("live")] == [e.data for e in source.read("live")]
            live = [r for r in target.backend.read_all(0, 1000) if r.stream == "live"]
            assert {r.codec for r in live} == {ENCRYPTED | 2}
            assert [r.hash for r in live] == [r.hash for r in source.backend.read("live", 1, None)]


def _has_lmdb() -> bool:
    import importlib.util

    return importlib.util.find_spec("lmdb") is not None
