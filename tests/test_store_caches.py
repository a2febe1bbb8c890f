"""The store's caches stay bounded, and fork chains of any depth stay readable and verifiable."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import eventlog as el
from eventlog import store as store_module
from eventlog.backends.base import ForkInfo
from tests.contract import text_events, texts_of


def _chain(store: el.Store, depth: int) -> str:
    """f0 <- f1 <- ... <- f{depth}, each with one event, forked at its parent's end."""
    store.append("f0", text_events(1, "root"))
    for i in range(1, depth + 1):
        store.fork(f"f{i - 1}", f"f{i}")
        store.append(f"f{i}", text_events(1, f"f{i}-"))
    return f"f{depth}"


def test_a_fork_chain_deeper_than_ten_thousand_reads_and_verifies() -> None:
    """Fork and append accepted a chain past 10,000, whose reads then said "ancestry loops"."""
    with el.open("memory://") as store:
        deepest = _chain(store, 10_050)
        texts = texts_of(store.read(deepest))
        assert len(texts) == 10_051 and texts[0] == "root0" and texts[-1] == "f10050-0"
        assert len(store.ancestry(deepest)) == 10_050
        assert store.verify(deepest).ok


def test_verifying_a_deep_chain_keeps_the_lineage_cache_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each fork's lineage was cached whole: D^2 / 2 segments (77 MiB for 1,000 forks)."""
    monkeypatch.setattr(store_module, "_LINEAGE_KEPT", 5_000)
    with el.open("memory://") as store:
        deepest = _chain(store, 400)
        started = time.monotonic()
        report = store.verify()
        assert report.ok and report.events == 401  # each stream's own events
        assert time.monotonic() - started < 30  # 2 s for 1,000 forks on memory:// before
        for i in range(0, 401, 7):
            assert len(list(store.read(f"f{i}"))) == i + 1
        assert sum(map(len, store._lineage.values())) <= 5_000
        assert store._lineage_segments == sum(map(len, store._lineage.values()))
        assert texts_of(store.read(deepest))[-1] == "f400-0"


def test_a_fork_loop_in_damaged_storage_is_reported() -> None:
    with el.open("memory://") as store:
        store.append("a", text_events(2))
        store.fork("a", "b", 1)
        store.fork("b", "c", 1)
        forks = store.backend._forks  # type: ignore[attr-defined]
        forks["b"] = ForkInfo(stream="b", parent="c", at_seq=1, ts=forks["b"].ts)  # b <-> c
        store._fork_entries.clear()  # as a store opened after the damage would start
        store._lineage.clear()
        with pytest.raises(el.CorruptionError, match="ancestry loops"):
            list(store.read("c"))
        with pytest.raises(el.CorruptionError, match="ancestry loops"):
            store._record_at("c", 1)


def test_the_tail_cache_forgets_the_oldest_streams(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It held one entry per stream ever appended to, for the store's lifetime."""
    monkeypatch.setattr(store_module, "_TAILS_KEPT", 50)
    with el.open(f"sqlite:///{tmp_path}/s.db") as store:
        for i in range(120):
            store.append(f"c-{i}", text_events(1))
        assert len(store._tails) == 50
        assert "c-0" not in store._tails and "c-119" in store._tails
        # A forgotten tail is read again; expectations still hold.
        assert store.append("c-0", text_events(1, "again"), expected_seq=1)[0].seq == 2
        with pytest.raises(el.ConcurrencyError):
            store.append("c-1", text_events(1), expected_seq=0)
        assert len(store._tails) == 50


def test_another_store_object_appending_meanwhile_is_still_caught(tmp_path: Path) -> None:
    """The caches are hints: a tail made stale by another writer is read afresh."""
    url = f"sqlite:///{tmp_path}/s.db"
    with el.open(url) as one, el.open(url) as two:
        one.append("s", text_events(1))
        one.fork("s", "f")
        two.append("f", text_events(1, "two"))
        assert one.append("f", text_events(1, "one"))[0].seq == 3
        assert texts_of(two.read("f")) == ["m0", "two0", "one0"]
        assert one.verify().ok and two.verify().ok
