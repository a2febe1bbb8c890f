"""Projection snapshots of encrypted streams are sealed too, with their lineage's keys.

A snapshot holds state made from the events (the conversation's messages), so it is sealed
with a key derived from the keys of its stream and of every ancestor whose events it was made
from: erasing any of them leaves a copy of the snapshot unreadable.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import eventlog as el
from eventlog.encryption import SNAPSHOT_MAGIC, erase_stream
from eventlog.projections import ConversationProjection, Runner, SnapshotWarning

pytest.importorskip("cryptography")

MARKER = "zq-snapshot-marker-41c"
PROJ = ConversationProjection()


def _conversation(store: el.Store, stream: str, turns: int = 3) -> None:
    """`turns` exchanges after an instruction and a widget: 2 + 2 * turns events.

    A state keeps the instruction's and the widget's text (messages are read from the store).
    """
    store.append(
        stream,
        [
            el.SystemInstructionSet(text=f"{MARKER} be brief"),
            el.WidgetUpdated(widget="notes", state=f"{MARKER} notes"),
        ],
    )
    for i in range(turns):
        store.append(
            stream,
            [
                el.ModelInput.from_text(f"{MARKER} question {i}"),
                el.ModelOutput(parts=(el.TextPart(text=f"{MARKER} answer {i}"),)),
            ],
        )


def _blob(store: el.Store, stream: str) -> bytes:
    found = store.backend.load_snapshot(stream, PROJ.name, PROJ.version, None)
    assert found is not None
    return found[1]


@pytest.mark.parametrize("keys", [True, False])
def test_a_snapshot_is_sealed_when_the_store_encrypts(tmp_path: Path, keys: bool) -> None:
    options = {"keys": str(tmp_path / "keys")} if keys else {}
    with el.open(f"sqlite:///{tmp_path / 's.db'}", **options) as store:  # type: ignore[arg-type]
        _conversation(store, "c")
        runner = Runner(store, PROJ, snapshot_every=None)
        assert runner.save_snapshot("c") == 8
        blob = _blob(store, "c")
        assert (MARKER.encode() in blob) is not keys
        assert blob.startswith(SNAPSHOT_MAGIC) is keys
        state, seq = runner.restore("c", 8)  # restored from the snapshot itself
        assert seq == 8 and len(state.messages) == 6
        assert state.system is not None and state.system.text.startswith(MARKER)
    if keys:
        disk = b"".join(p.read_bytes() for p in tmp_path.glob("s.db*"))
        assert MARKER.encode() not in disk


def test_a_copy_of_a_forks_snapshot_is_unreadable_once_its_ancestor_is_erased(
    tmp_path: Path,
) -> None:
    with el.open(f"sqlite:///{tmp_path / 's.db'}", keys=str(tmp_path / "keys")) as store:
        _conversation(store, "p")
        store.fork("p", "f", 6)
        _conversation(store, "f", turns=1)
        runner = Runner(store, PROJ, snapshot_every=None)
        runner.save_snapshot("f")
        kept = _blob(store, "f")  # a copy someone kept (a backup, a page not yet reused)
        report = erase_stream(store, "p")
        assert report.forks == ["f"] and report.snapshots_dropped == 1
        store.backend.save_snapshot("f", PROJ.name, PROJ.version, 10, kept)
        with pytest.raises(el.ErasedError, match="'p'"):
            runner.restore("f", 10)


def test_a_damaged_or_moved_sealed_snapshot_is_discarded(tmp_path: Path) -> None:
    with el.open(f"sqlite:///{tmp_path / 's.db'}", keys=str(tmp_path / "keys")) as store:
        _conversation(store, "a")
        _conversation(store, "b")
        runner = Runner(store, PROJ, snapshot_every=None)
        runner.save_snapshot("a")
        sealed = _blob(store, "a")
        flipped = sealed[:-1] + bytes([sealed[-1] ^ 1])
        store.backend.save_snapshot("a", PROJ.name, PROJ.version, 8, flipped)
        with pytest.warns(SnapshotWarning, match="does not decrypt"):
            assert runner.restore("a", 8)[1] == 0  # discarded: replayed from the start
        store.backend.save_snapshot("b", PROJ.name, PROJ.version, 8, sealed)  # a's, under b
        with pytest.warns(SnapshotWarning, match="does not decrypt"):
            assert runner.restore("b", 8)[1] == 0
        assert len(runner.state("b").messages) == 6


def test_a_sealed_snapshot_without_the_key_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with el.open(url, keys=str(tmp_path / "keys")) as store:
        _conversation(store, "c")
        Runner(store, PROJ, snapshot_every=None).save_snapshot("c")
    with el.open(url) as store, pytest.raises(el.MissingKeyError, match="key store"):
        Runner(store, PROJ, snapshot_every=None).restore("c", 8)


def test_a_snapshot_of_a_fork_taken_before_its_first_own_event_stays_usable(
    tmp_path: Path,
) -> None:
    with el.open(f"sqlite:///{tmp_path / 's.db'}", keys=tmp_path / "keys") as store:
        _conversation(store, "a")
        store.fork("a", "b", at_seq=4)
        runner = Runner(store, PROJ, snapshot_every=None)
        assert runner.save_snapshot("b") == 4  # "b" has no event of its own yet
        store.append("b", [el.ModelInput.from_text("its own")])
        with warnings.catch_warnings():
            warnings.simplefilter("error", SnapshotWarning)  # a discarded snapshot warns
            _, seq = runner.restore("b", 5)  # from the snapshot, not from scratch
            state = runner.state("b")
        assert seq == 4 and state.seq == 5 and state.messages[-1].seq == 5
        assert store.backend.load_snapshot("b", PROJ.name, PROJ.version, None) is not None


def test_a_forks_snapshot_stays_usable_when_a_plain_ancestor_gets_its_key(
    tmp_path: Path,
) -> None:
    """An ancestor whose events were all stored before encryption was turned on has no key
    when the fork's snapshot is sealed: its first sealed event must not change the snapshot's
    lineage key."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    with el.open(url) as plain:
        _conversation(plain, "a")
    with el.open(url, keys=tmp_path / "keys") as store:
        store.fork("a", "b", at_seq=4)
        store.append("b", [el.ModelInput.from_text("its own")])
        runner = Runner(store, PROJ, snapshot_every=None)
        assert runner.save_snapshot("b") == 5
        store.append("a", [el.ModelInput.from_text("the ancestor's first sealed event")])
        with warnings.catch_warnings():
            warnings.simplefilter("error", SnapshotWarning)  # a discarded snapshot warns
            _, seq = runner.restore("b", 5)
        assert seq == 5
