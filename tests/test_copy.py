"""Copying a store into another (`eventlog.copy`, `eventlog export`) between all backends."""

from __future__ import annotations

import itertools
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

import eventlog as el
from eventlog.backends.base import Record
from eventlog.codec import GENESIS, chain_hash
from eventlog.copy import CopyReport, copy_store
from tests.conftest import _SCHEMES, BACKENDS
from tests.contract import Versioned

PAIRS = list(itertools.product(BACKENDS, BACKENDS))
FORMAT = {"memory": "msgpack", "sqlite": "msgpack", "lmdb": "msgpack", "jsonl": "json"}


@pytest.fixture
def url_of(tmp_path: Path) -> Callable[[str], str]:
    """A new, empty store URL of a named backend on each call."""
    counter = itertools.count()
    return lambda name: _SCHEMES[name][1](tmp_path, f"{name}{next(counter)}")


def everything(store: el.Store) -> list[tuple[Any, ...]]:
    """Every own event of a store in position order, with all it keeps but hash and position."""
    return [
        (e.id, e.stream, e.seq, e.ts, e.data, e.meta, e.causation_id, e.correlation_id)
        for e in store.read_all()
    ]


def fill(store: el.Store) -> None:
    """Interleaved streams, meta, links, several kinds, a fork of a fork and an empty fork."""
    for turn in range(3):
        store.append("a", [el.ModelInput.from_text(f"a{turn}"), el.Checkpoint(label=f"c{turn}")])
        store.append(
            "b",
            [
                el.Event(
                    data=el.ModelInput.from_text(f"b{turn} 我们需要检查"),
                    meta={"user": "u1", "n": turn, "tags": ["x", "y"]},
                    causation_id=f"cause-{turn}",
                    correlation_id="corr",
                )
            ],
        )
    store.fork("a", "a-fork", at_seq=3)
    store.append("a-fork", [el.ModelInput.from_text("retry")])
    store.fork("a-fork", "a-fork-2", at_seq=4)
    store.append("a-fork-2", [el.ModelInput.from_text("again")])
    store.fork("b", "b-empty-fork", at_seq=2)
    store.append("a", [el.ModelInput.from_text("a after forks")])


@pytest.mark.parametrize(("src", "dst"), PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS])
def test_copy_keeps_every_event_fork_and_order(
    src: str, dst: str, url_of: Callable[[str], str]
) -> None:
    with el.open(url_of(src)) as source, el.open(url_of(dst)) as target:
        fill(source)
        seen: list[tuple[str, int, int]] = []
        report = copy_store(source, target, progress=lambda *p: seen.append(p))
        same = FORMAT[src] == FORMAT[dst]
        assert report == CopyReport(
            streams=5, forks=3, events=source.verify().events, same_hashes=same, upcast=0
        )
        assert everything(target) == everything(source)
        assert target.streams() == source.streams()
        assert target.forks() == source.forks()
        for stream in ("a-fork-2", "b-empty-fork"):
            assert [e.id for e in target.read(stream)] == [e.id for e in source.read(stream)]
        assert target.verify().ok
        hashes = {e.id: e.hash for e in source.read_all()}
        copied = {e.id: e.hash for e in target.read_all()}
        assert (hashes == copied) is same
        assert seen[-1] == ("copy", report.events, report.events)
        assert {p[0] for p in seen} == {"verify", "check", "copy"}
        # The copy is a store like any other: appends chain onto the copied hashes.
        target.append("a", [el.Checkpoint(label="after the copy")])
        target.append("a-fork-2", [el.Checkpoint(label="after the copy")])
        assert target.verify().ok


def test_copy_into_a_searchable_store_indexes_the_text(
    url_of: Callable[[str], str], tmp_path: Path
) -> None:
    with el.open(url_of("sqlite")) as source, el.open(f"sqlite:///{tmp_path}/s.db?search=on") as t:
        fill(source)
        copy_store(source, t)
        assert [(h.stream, h.seq) for h in t.search("retry")] == [("a-fork", 4)]


def test_copy_recompresses_and_decompresses(url_of: Callable[[str], str], tmp_path: Path) -> None:
    pytest.importorskip("zstandard")
    big = [el.ModelInput.from_text("tool output line\n" * 200) for _ in range(5)]
    with el.open(f"sqlite:///{tmp_path}/z.db?compression=zstd") as source:
        source.append("s", big)
        assert {r.codec for r in source.backend.read("s", 1, None)} == {1}
        with el.open(url_of("lmdb")) as plain:
            assert copy_store(source, plain).same_hashes
            assert {r.codec for r in plain.backend.read("s", 1, None)} == {0}
            assert [e.data for e in plain.read("s")] == big
            with el.open(f"jsonl:///{tmp_path}/jz?compression=zstd") as packed:
                copy_store(plain, packed)
                assert {r.codec for r in packed.backend.read("s", 1, None)} == {1}
                assert [e.data for e in packed.read("s")] == big
                assert packed.verify().ok


def _store_v1(store: el.Store) -> str:
    """Append one `Versioned` event at schema version 1, as an older eventlog wrote it."""
    event_id = el.Event(data=el.Checkpoint(label="x")).id
    plain = (msgspec.msgpack if store.codec.format == "msgpack" else msgspec.json).encode(
        {"type": "tests.versioned", "aa": "old"}
    )
    ts = time.time_ns()
    digest = chain_hash(GENESIS, "v", 1, event_id, ts, "tests.versioned", 1, None, None, b"", plain)
    record = Record(event_id, "v", 1, ts, "tests.versioned", 1, plain, b"", None, None, digest)
    store._append_records("v", [record])
    return event_id


@pytest.mark.parametrize("dst", BACKENDS)
def test_older_schema_versions(dst: str, url_of: Callable[[str], str]) -> None:
    """Same format: the stored version-1 bytes are kept. Other format: upcast, then encoded."""
    with el.open(url_of("memory")) as source, el.open(url_of(dst)) as target:
        _store_v1(source)
        assert source.verify().ok
        report = copy_store(source, target)
        (rec,) = target.backend.read("v", 1, None)
        if FORMAT[dst] == "msgpack":
            assert (report.upcast, rec.version) == (0, 1)
        else:
            assert (report.upcast, rec.version) == (1, 2)
        assert [e.data for e in target.read("v")] == [Versioned(bb="old")]
        assert target.verify().ok


def test_non_empty_target_is_refused(url_of: Callable[[str], str]) -> None:
    url = url_of("sqlite")
    with el.open(url) as source, el.open(url_of("jsonl")) as target:
        fill(source)
        target.append("mine", [el.Checkpoint(label="mine")])
        with pytest.raises(el.UsageError, match="not empty"):
            copy_store(source, target)
        assert [s.stream for s in target.streams()] == ["mine"]
        with pytest.raises(el.UsageError, match="into itself"):
            copy_store(source, source)
        with el.open(url) as same, pytest.raises(el.UsageError, match="not empty"):
            copy_store(source, same)
    with el.open("memory://") as a, el.open("memory://") as b:  # two stores, one location
        a.append("s", [el.Checkpoint(label="x")])
        assert copy_store(a, b).events == 1


def test_damaged_source_writes_nothing(url_of: Callable[[str], str]) -> None:
    with el.open(url_of("sqlite")) as source, el.open(url_of("lmdb")) as target:
        fill(source)
        path = source.backend.path  # type: ignore[attr-defined]
        conn = sqlite3.connect(path)
        with conn:  # commits; closing is the caller's (Python 3.13 warns of an unclosed one)
            conn.execute(
                "UPDATE events SET rec = CAST(rec || x'00' AS BLOB) WHERE stream = 'b' AND seq = 2"
            )
        conn.close()
        with pytest.raises(el.CorruptionError, match="does not verify.*nothing was copied"):
            copy_store(source, target)
        assert target.head_position() == 0
        assert target.forks() == []


def test_value_the_target_format_cannot_hold_writes_nothing(url_of: Callable[[str], str]) -> None:
    """JSON has no bytes: meta holding bytes is refused before anything is written."""
    with el.open(url_of("sqlite")) as source, el.open(url_of("jsonl")) as target:
        fill(source)
        source.append("c", [el.Event(data=el.Checkpoint(label="x"), meta={"raw": b"\x00\x01"})])
        with pytest.raises(el.ValidationError, match=r"'c' seq 1 .*nothing was copied") as err:
            copy_store(source, target)
        assert "event #" not in str(err.value)  # the copy's own encode index means nothing here
        assert err.value.field == "meta"
        assert target.head_position() == 0
        assert target.forks() == []


def test_events_appended_during_the_copy_are_left_out(url_of: Callable[[str], str]) -> None:
    with el.open(url_of("sqlite")) as source, el.open(url_of("lmdb")) as target:
        fill(source)
        before = everything(source)

        def append_meanwhile(phase: str, done: int, total: int) -> None:
            if phase == "copy" and done == total:
                source.append("a", [el.Checkpoint(label="late")])
                source.fork("b", "late-fork", at_seq=1)

        report = copy_store(source, target, progress=append_meanwhile)
        assert everything(target) == before
        assert report.events == len(before)
        assert target.verify().ok


def test_writes_during_verification_are_left_out(url_of: Callable[[str], str]) -> None:
    """Appends and forks made while the source is verified: the copy is the store at its start.

    A fork made meanwhile is kept only when the copied events hold its prefix.
    """
    with el.open(url_of("jsonl")) as source, el.open(url_of("sqlite")) as target:
        fill(source)
        before = everything(source)
        done = False

        def write_meanwhile(phase: str, n: int, total: int) -> None:
            nonlocal done
            if phase == "verify" and not done:
                done = True
                source.append("a", [el.Checkpoint(label="late")])
                source.fork("a", "past-the-head", at_seq=source.stream_info("a").last_seq)
                source.fork("past-the-head", "its-fork", at_seq=2)
                source.fork("b", "old-prefix", at_seq=1)
                source.append("old-prefix", [el.Checkpoint(label="late too")])

        report = copy_store(source, target, progress=write_meanwhile)
        assert done
        assert everything(target) == before
        assert report.events == len(before)
        names = {f.stream for f in target.forks()}
        assert "past-the-head" not in names and "its-fork" not in names
        assert "old-prefix" in names and target.stream_info("old-prefix").last_seq == 1
        assert target.verify().ok


def test_events_over_the_targets_size_limit_write_nothing(
    url_of: Callable[[str], str], tmp_path: Path
) -> None:
    with el.open(url_of("sqlite")) as source:
        fill(source)
        source.append("big", [el.ModelInput.from_text("x" * 5000)])
        for target_url in (f"lmdb://{tmp_path}/small", f"jsonl://{tmp_path}/small-json"):
            with el.open(target_url, max_event_bytes=1000) as target:
                with pytest.raises(el.ValidationError, match=r"'big' seq 1 .*limit"):
                    copy_store(source, target)
                assert target.head_position() == 0
                assert target.forks() == []


def test_long_interleaved_store(url_of: Callable[[str], str]) -> None:
    """Several pages, runs longer than one append, and streams alternating event by event."""
    with el.open(url_of("sqlite"), durability="none") as source:
        source.append("long", [el.Checkpoint(label=str(i)) for i in range(2500)])
        for i in range(300):
            source.append(f"s{i % 3}", [el.Checkpoint(label=str(i))])
        with el.open(url_of("jsonl"), durability="none") as target:
            assert copy_store(source, target).events == 2800
            assert everything(target) == everything(source)
            assert target.verify().ok


def test_a_fork_chain_deeper_than_the_recursion_limit(url_of: Callable[[str], str]) -> None:
    """1100 forks, each of the one before; the deepest sorts first by name."""
    with el.open(url_of("memory")) as source, el.open(url_of("memory")) as target:
        source.append("root", [el.Checkpoint(label="r")])
        parent = "root"
        for depth in range(1100):
            name = f"f{1100 - depth:05d}"
            source.fork(parent, name, at_seq=depth + 1)
            source.append(name, [el.Checkpoint(label=name)])
            parent = name
        report = copy_store(source, target)
        assert (report.forks, report.events) == (1100, 1101)
        assert [e.id for e in target.read(parent)] == [e.id for e in source.read(parent)]


def _cli(*args: str, store: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eventlog", "--store", store, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_cli_export(url_of: Callable[[str], str]) -> None:
    src, dst = url_of("sqlite"), url_of("jsonl")
    with el.open(src) as source:
        fill(source)
        expected = everything(source)
    done = _cli("export", dst, store=src)
    assert done.returncode == 0, done.stderr
    assert "copied 12 events in 5 streams (3 forks)" in done.stdout
    assert "hashes: a new chain" in done.stdout
    assert "verify target: ok" in done.stdout
    assert done.stderr == ""  # no progress bar when stderr is not a terminal
    with el.open(dst) as target:
        assert everything(target) == expected
    again = _cli("export", dst, store=src)
    assert again.returncode == 1
    assert "not empty" in again.stderr
    as_json = _cli("export", "--json", "--quiet", url_of("lmdb"), store=dst)
    assert as_json.returncode == 0, as_json.stderr
    assert msgspec.json.decode(as_json.stdout) == {
        "streams": 5,
        "forks": 3,
        "events": 12,
        "same_hashes": False,
        "upcast": 0,
        "encrypted": 0,
        "decrypted": 0,
        "erased": 0,
        "left_out": [],
        "left_out_events": 0,
        "target_verified": True,
    }
