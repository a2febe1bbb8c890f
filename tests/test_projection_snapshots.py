"""Snapshots, time travel and forks, on every backend."""

from __future__ import annotations

from collections.abc import Callable
from unittest import mock

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eventlog as el
from benchmarks.workload import conversation_events
from eventlog.errors import ConversationError
from eventlog.projections import (
    ConversationProjection,
    ConversationState,
    Projection,
    Runner,
    SnapshotWarning,
    checkpoint_seq,
    fork,
    persistent,
)
from tests.conversations import conversations
from tests.strategies import event_data

NAME, VERSION = ConversationProjection.name, ConversationProjection.version
PROPERTY = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def runner(store: el.Store, **kw: object) -> Runner[ConversationState]:
    return Runner(store, ConversationProjection(), snapshot_every=None, **kw)  # type: ignore[arg-type]


def same(a: ConversationState, b: ConversationState) -> None:
    """Equal skeletons, and every entry's event equal too (loaded from the store if needed)."""
    assert a == b
    assert [e.event for e in a.messages] == [e.event for e in b.messages]


@PROPERTY
@given(conversations)
def test_snapshot_at_k_plus_tail_equals_full_replay(
    make_url: Callable[[], str], events: list[el.EventData]
) -> None:
    with el.open(make_url()) as store, mock.patch.object(persistent, "CHUNK", 4):
        store.append("c", events)
        n = len(events)
        r = runner(store)
        full = r.replay("c")
        backend = store.backend
        for k in range(0, n + 1):
            assert r.save_snapshot("c", k) == k
            if k:
                assert r.restore("c", n)[1] == k
            same(Runner(store, ConversationProjection(), snapshot_every=None).state("c"), full)
            same(r.state("c", k), r.replay("c", k))
            backend.delete_snapshot("c", NAME, VERSION, k)


@PROPERTY
@given(conversations, st.data())
def test_fork_state_equals_parent_state_up_to_the_fork_point(
    make_url: Callable[[], str], events: list[el.EventData], data: st.DataObject
) -> None:
    with el.open(make_url()) as store:
        store.append("p", events)
        n = len(events)
        at = data.draw(st.integers(1, n), label="fork point")
        snap_at = data.draw(st.integers(0, n), label="parent snapshot")
        r = runner(store)
        if snap_at:
            r.save_snapshot("p", snap_at)
        fork(store, "p", "f", at=at)
        store.append("f", [el.ModelInput.from_text("fork only"), el.Checkpoint(label="f")])
        store.append("p", [el.ModelInput.from_text("parent only")])
        for j in range(0, at + 1):
            same(r.state("f", j), r.replay("p", j))
        # A fork uses its parent's snapshots at or before the fork point.
        expected = snap_at if snap_at <= at else 0
        assert r.restore("f", at)[1] == expected
        assert (
            Runner(store, ConversationProjection(), parent_snapshots=False).restore("f", at)[1] == 0
        )
        tail = r.state("f")
        assert tail.seq == at + 2 and tail.messages[-1].event.text == "fork only"  # type: ignore[union-attr]
        assert r.state("p").seq == n + 1


def test_a_long_conversation_across_chunks(make_url: Callable[[], str]) -> None:
    with el.open(make_url()) as store:
        for i, batch in enumerate(_batches(conversation_events(2600, seed=3), 500)):
            store.append("c", batch)
            del i
        r = Runner(store, ConversationProjection(), snapshot_every=1000)
        full = r.replay("c")
        assert r.state("c") == full  # saves a snapshot at 2000 on the way
        assert r.restore("c", 2600)[1] == 2000
        for k in (1023, 1024, 1025, 2047, 2500):
            r.save_snapshot("c", k)
            fresh = Runner(store, ConversationProjection(), snapshot_every=None)
            same(fresh.state("c", k), fresh.replay("c", k))
        same(Runner(store, ConversationProjection()).state("c"), full)


def _batches(xs: list[el.EventData], size: int) -> list[list[el.EventData]]:
    return [xs[i : i + size] for i in range(0, len(xs), size)]


def _events(n: int = 30) -> list[el.EventData]:
    return [el.ModelInput.from_text(f"m{i}") for i in range(n)]


def test_corrupt_snapshot_is_discarded_with_a_warning(make_url: Callable[[], str]) -> None:
    with el.open(make_url()) as store:
        store.append("c", _events())
        r = runner(store)
        r.save_snapshot("c", 10)
        store.backend.save_snapshot("c", NAME, VERSION, 20, b"\x93not a snapshot")
        with pytest.warns(SnapshotWarning, match="corrupt snapshot.*seq 20"):
            st = r.state("c")
        same(st, r.replay("c"))
        assert store.backend.load_snapshot("c", NAME, VERSION, None) == (10, mock.ANY)
        # Falls back to the next older good snapshot.
        assert r.restore("c", 30)[1] == 10


def test_flipped_byte_in_a_snapshot_is_caught(make_url: Callable[[], str]) -> None:
    with el.open(make_url()) as store:
        store.append("c", _events())
        r = runner(store)
        r.save_snapshot("c", 25)
        seq, blob = store.backend.load_snapshot("c", NAME, VERSION, None) or (0, b"")
        payload = msgspec.msgpack.decode(blob)[4]
        damaged = bytearray(blob)
        damaged[blob.index(payload) + len(payload) // 2] ^= 0x01
        store.backend.save_snapshot("c", NAME, VERSION, seq, bytes(damaged))
        with pytest.warns(SnapshotWarning, match="digest"):
            state, base = r.restore("c", 30)
        assert base == 0 and state == ConversationState()
        assert store.backend.load_snapshot("c", NAME, VERSION, None) is None


def test_snapshot_with_a_wrong_envelope_is_discarded(make_url: Callable[[], str]) -> None:
    with el.open(make_url()) as store:
        store.append("c", _events())
        r = runner(store)
        r.save_snapshot("c", 5)
        _, blob = store.backend.load_snapshot("c", NAME, VERSION, 5) or (0, b"")
        store.backend.save_snapshot("c", NAME, VERSION, 7, blob)  # says seq 5 inside
        with pytest.warns(SnapshotWarning, match="expected 'conversation' v1 seq 7"):
            assert r.restore("c", 30)[1] == 5


def test_a_snapshot_of_another_stream_is_discarded(make_url: Callable[[], str]) -> None:
    """A snapshot row moved to another stream's key (by hand, or a bad copy) is never restored:
    its envelope names the stream it was taken of."""
    with el.open(make_url()) as store:
        store.append("a", _events())
        store.append("b", _events()[::-1])
        r = runner(store)
        r.save_snapshot("b", 5)
        _, blob = store.backend.load_snapshot("b", NAME, VERSION, 5) or (0, b"")
        store.backend.save_snapshot("a", NAME, VERSION, 5, blob)
        with pytest.warns(SnapshotWarning, match="taken of stream 'b'"):
            state, base = r.restore("a", 30)
        assert base == 0
        same(r.state("a"), ConversationProjection().fold_many(ConversationState(), store.read("a")))


def test_a_snapshot_of_events_since_replaced_is_discarded(make_url: Callable[[], str]) -> None:
    """A snapshot of other events at the same seqs (a store restored or rebuilt under its
    snapshots, whose lost events were then appended again differently) is found by the hash
    of the event at its seq, and the state is replayed from the events that are there."""
    with el.open(make_url()) as first, el.open(make_url()) as second:
        first.append("c", _events())
        second.append("c", _events()[::-1])
        runner(first).save_snapshot("c", 5)
        _, blob = first.backend.load_snapshot("c", NAME, VERSION, 5) or (0, b"")
        second.backend.save_snapshot("c", NAME, VERSION, 5, blob)
        r = runner(second)
        with pytest.warns(SnapshotWarning, match="the event at seq 5 is not the one"):
            assert r.restore("c", 30)[1] == 0
        assert second.backend.load_snapshot("c", NAME, VERSION, None) is None


def test_a_snapshot_saved_before_streams_and_hashes_were_kept_restores(
    make_url: Callable[[], str],
) -> None:
    """Snapshots of earlier eventlog versions (five envelope fields) still restore."""
    with el.open(make_url()) as store:
        store.append("c", _events())
        r = runner(store)
        r.save_snapshot("c", 5)
        _, blob = store.backend.load_snapshot("c", NAME, VERSION, 5) or (0, b"")
        fields = msgspec.msgpack.decode(blob)
        assert fields[5:] == ["c", store.get("c", 5).hash]
        store.backend.save_snapshot("c", NAME, VERSION, 5, msgspec.msgpack.encode(fields[:5]))
        state, base = r.restore("c", 30)
        assert base == 5
        same(state, r.state("c", 5))


def test_snapshot_of_another_version_is_ignored_and_rebuilt(
    make_url: Callable[[], str],
) -> None:
    class V2(ConversationProjection):
        version = 2

    with el.open(make_url()) as store:
        store.append("c", _events(2500))
        Runner(store, ConversationProjection()).state("c")
        store.backend.save_snapshot("c", NAME, 99, 2400, b"garbage of another version")
        r2 = Runner(store, V2(), snapshot_every=1000)
        assert r2.restore("c", 2500)[1] == 0  # v1 snapshots are invisible to v2
        same(r2.state("c"), runner(store).replay("c"))
        assert r2.restore("c", 2500)[1] == 2000  # rebuilt as v2
        assert store.backend.load_snapshot("c", NAME, 1, None) is not None


def test_strict_runner_refuses_a_snapshot_with_violations(make_url: Callable[[], str]) -> None:
    with el.open(make_url()) as store:
        store.append(
            "c",
            [el.ToolResults(results=(el.ToolResult(call_id="x", tool_name="t"),))] + _events(5),
        )
        Runner(store, ConversationProjection("warn"), snapshot_every=None).save_snapshot("c")
        with pytest.raises(ConversationError, match="seq 1"):
            runner(store).state("c")


def test_snapshots_every_n_events_and_on_demand(make_url: Callable[[], str]) -> None:
    with el.open(make_url()) as store:
        store.append("c", _events(25))
        r = Runner(store, ConversationProjection(), snapshot_every=10)
        r.state("c", 9)
        assert store.backend.load_snapshot("c", NAME, VERSION, None) is None
        r.state("c")
        assert store.backend.load_snapshot("c", NAME, VERSION, None) == (20, mock.ANY)
        assert r.save_snapshot("c", 23) == 23
        assert r.restore("c", 25)[1] == 23
        assert r.save_snapshot("c", 0) == 0
        with pytest.raises(el.UsageError):
            Runner(store, ConversationProjection(), snapshot_every=0)


def test_old_snapshots_are_pruned_and_time_travel_still_works(
    make_url: Callable[[], str],
) -> None:
    with el.open(make_url()) as store:
        store.append("c", _events(60))
        r = Runner(store, ConversationProjection(), snapshot_every=10, keep_snapshots=2)
        for end in range(10, 61, 10):
            r.state("c", end)
        assert store.backend.snapshot_seqs("c", NAME, VERSION) == [50, 60]
        # Below the oldest kept snapshot the state comes from a replay, and is the same.
        assert r.restore("c", 45)[1] == 0
        assert r.state("c", 45) == r.replay("c", 45)
        keep_all = Runner(store, ConversationProjection(), snapshot_every=10, keep_snapshots=None)
        for end in range(10, 41, 10):
            keep_all.state("c", end)
        assert store.backend.snapshot_seqs("c", NAME, VERSION) == [10, 20, 30, 40, 50, 60]
        r.save_snapshot("c", 55)  # saving prunes all but the newest two
        assert store.backend.snapshot_seqs("c", NAME, VERSION) == [55, 60]
        with pytest.raises(el.UsageError, match="keep_snapshots"):
            Runner(store, ConversationProjection(), keep_snapshots=0)


def test_follower_keeps_up_with_new_events(make_url: Callable[[], str]) -> None:
    with el.open(make_url()) as store:
        store.append("c", _events(5))
        store.append("other", _events(3))
        r = Runner(store, ConversationProjection(), snapshot_every=8)
        with r.follow("c") as follower:
            assert follower.state.seq == 5
            assert follower.poll() is follower.state
            store.append("c", _events(4))
            store.append("other", _events(2))
            st = follower.poll(timeout=1.0)
            assert st.seq == 9 and follower.seq == 9
            same(st, r.replay("c"))
            assert store.backend.load_snapshot("c", NAME, VERSION, None) == (8, mock.ANY)
            store.append("c", [el.ModelInput.from_text("last")])
            assert follower.poll(timeout=1.0).messages[-1].event.text == "last"  # type: ignore[union-attr]


def test_follower_of_a_fork_sees_only_its_own_events(make_url: Callable[[], str]) -> None:
    with el.open(make_url()) as store:
        store.append("p", _events(5))
        fork(store, "p", "f", at=3)
        with runner(store).follow("f") as follower:
            store.append("p", _events(2))
            store.append("f", [el.Checkpoint(label="x")])
            st = follower.poll(timeout=1.0)
            assert st.seq == 4 and st.checkpoint("x") is not None


def test_fork_at_a_checkpoint(make_url: Callable[[], str]) -> None:
    with el.open(make_url()) as store:
        store.append(
            "p",
            [
                el.ModelInput.from_text("a"),
                el.Checkpoint(label="plan"),
                el.ModelInput.from_text("b"),
                el.Checkpoint(label="plan"),
                el.ModelInput.from_text("c"),
            ],
        )
        assert checkpoint_seq(store, "p", "plan") == 4
        info = fork(store, "p", "retry", checkpoint="plan")
        assert (info.stream, info.parent, info.at_seq) == ("retry", "p", 4)
        assert [f.stream for f in store.forks("p")] == ["retry"]
        assert store.ancestry("retry") == [("p", 4)]
        assert fork(store, "p", "again", at=2).at_seq == 2
        with pytest.raises(el.ValidationError, match="no checkpoint 'nope'"):
            fork(store, "p", "x", checkpoint="nope")
        with pytest.raises(el.UsageError):
            fork(store, "p", "y", at=1, checkpoint="plan")
        with pytest.raises(el.StreamExistsError):
            fork(store, "p", "retry", at=1)


class Count(msgspec.Struct, frozen=True):
    events: int = 0
    inputs: int = 0


class Counter(Projection[Count]):
    name = "counter"
    version = 1
    state_type = Count

    def initial(self) -> Count:
        return Count()

    def fold(self, state: Count, event: el.RecordedEvent) -> Count:
        is_input = isinstance(event.data, el.ModelInput)
        return Count(state.events + 1, state.inputs + is_input)


def test_a_user_projection_with_default_encoding(make_url: Callable[[], str]) -> None:
    with el.open(make_url()) as store:
        store.append("c", [*_events(7), el.Checkpoint(label="x"), *_events(4)])
        r = Runner(store, Counter(), snapshot_every=5)
        assert r.state("c") == Count(12, 11)
        assert r.restore("c", 12)[1] == 10
        assert r.state("c", 3) == Count(3, 3)
        assert "counter" in repr(Counter())


@PROPERTY
@given(st.lists(event_data, min_size=1, max_size=12))
def test_any_events_under_warn_snapshot_plus_tail_equals_replay(
    make_url: Callable[[], str], events: list[el.EventData]
) -> None:
    # Arbitrary events break the rules at random: the warn policy must still be deterministic.
    with el.open(make_url()) as store, mock.patch.object(persistent, "CHUNK", 2):
        store.append("c", events)
        warn = Runner(store, ConversationProjection("warn"), snapshot_every=None)
        full = warn.replay("c")
        assert full.seq == len(events)
        for k in range(1, len(events) + 1):
            warn.save_snapshot("c", k)
            same(warn.state("c"), full)
            store.backend.delete_snapshot("c", NAME, VERSION, k)
