"""Following a stream that does not exist yet: the follower waits for it instead of raising.

Agent frameworks start following a conversation before its first event is written. One-shot
reads (`conversation_state`, `Runner.state`) still raise StreamNotFoundError, as documented.
Time is bounded generously, so a loaded machine does not fail these tests.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

import eventlog as el
from eventlog.projections import (
    ConversationProjection,
    ConversationState,
    Runner,
    conversation_state,
    fork,
)
from tests.conftest import BACKENDS
from tests.contract import text_events, texts_of

SLOW = 10.0
"""A timeout that a test must never wait out."""
QUICK = 2.0
"""The bound for what must not wait for a timeout."""


def runner(store: el.Store, snapshot_every: int | None = None) -> Runner[ConversationState]:
    """A conversation runner over `store` (snapshots only when `snapshot_every` is given)."""
    return Runner(store, ConversationProjection(), snapshot_every=snapshot_every)


def later(seconds: float, action: Callable[[], object]) -> threading.Timer:
    """Run `action` in another thread after `seconds` (started; join it)."""
    timer = threading.Timer(seconds, action)
    timer.start()
    return timer


def test_follower_of_a_missing_stream_starts_empty_and_sees_its_first_events(
    make_url: Callable[[], str],
) -> None:
    with el.open(make_url()) as store:
        store.append("other", text_events(3))
        with runner(store).follow("new") as follower:
            assert follower.seq == 0 and follower.state == ConversationState()
            assert follower.poll() == ConversationState()
            timers = [
                later(0.05, lambda: store.append("other", text_events(1, "o"))),
                later(0.2, lambda: store.append("new", text_events(2, "n"))),
            ]
            started = time.monotonic()
            state = follower.poll(timeout=SLOW)
            took = time.monotonic() - started
            for timer in timers:
                timer.join()
            assert 0.15 < took < QUICK  # not ended by the other stream's commit
            assert follower.seq == 2 and state.seq == 2
            assert state == conversation_state(store, "new")
            store.append("new", text_events(1, "again"))
            assert follower.poll(timeout=SLOW).seq == 3
            assert texts_of(store.read("new")) == ["n0", "n1", "again0"]


def test_follower_of_a_missing_stream_folds_many_events_and_snapshots(
    make_url: Callable[[], str],
) -> None:
    with el.open(make_url()) as store:
        r = runner(store, snapshot_every=4)
        with r.follow("new") as follower:
            timer = later(0.05, lambda: store.append("new", text_events(10)))
            state = follower.poll(timeout=SLOW)
            timer.join()
            assert state.seq == 10 and state == r.replay("new")
            assert r.restore("new", 10)[1] == 8


def test_closing_a_follower_that_waits_for_a_missing_stream_ends_its_poll(
    make_url: Callable[[], str],
) -> None:
    with el.open(make_url()) as store:
        follower = runner(store).follow("new")
        outcome: list[BaseException | ConversationState] = []

        def wait() -> None:
            try:
                outcome.append(follower.poll(timeout=SLOW))
            except BaseException as exc:
                outcome.append(exc)

        waiter = threading.Thread(target=wait)
        started = time.monotonic()
        waiter.start()
        time.sleep(0.1)
        follower.close()
        waiter.join(QUICK)
        assert not waiter.is_alive() and time.monotonic() - started < QUICK
        assert follower.closed and len(outcome) == 1
        assert isinstance(outcome[0], el.StoreClosedError)
        assert follower.seq == 0


def test_closing_the_store_ends_a_follower_waiting_for_a_missing_stream(
    make_url: Callable[[], str],
) -> None:
    store = el.open(make_url())
    follower = runner(store).follow("new")
    timer = later(0.1, store.close)
    started = time.monotonic()
    with pytest.raises(el.StoreClosedError):
        follower.poll(timeout=SLOW)
    timer.join()
    assert time.monotonic() - started < QUICK and follower.closed


def test_a_fork_without_own_events_is_followed_from_its_fork_point(
    make_url: Callable[[], str],
) -> None:
    with el.open(make_url()) as store:
        store.append("p", text_events(5))
        fork(store, "p", "f", at=3)
        with runner(store).follow("f") as follower:
            assert follower.seq == 3
            assert follower.state == conversation_state(store, "p", at=3)
        assert conversation_state(store, "f") == conversation_state(store, "p", at=3)


def test_a_fork_created_under_a_follower_is_taken_from_its_fork_point(
    make_url: Callable[[], str],
) -> None:
    """A fork made before the call: even `poll()` without a timeout takes it."""
    with el.open(make_url()) as store:
        store.append("p", text_events(5))
        with runner(store).follow("f") as follower:
            assert follower.seq == 0
            fork(store, "p", "f", at=2)
            assert follower.poll().seq == 2
            assert follower.state == conversation_state(store, "p", at=2)
            store.append("f", text_events(1, "own"))
            store.append("p", text_events(1, "parent"))
            state = follower.poll(timeout=SLOW)
            assert state.seq == 3 and state == conversation_state(store, "f")


@pytest.mark.parametrize("poll_interval", [0.05, 60.0])
def test_a_fork_created_while_a_follower_waits_ends_its_wait(
    make_url: Callable[[], str], poll_interval: float
) -> None:
    """A fork commits no event, yet it creates the stream: the waiting `poll` returns then.

    With a 60 s poll interval only the fork's own wake-up can end the wait in time.
    """
    with el.open(make_url(), poll_interval=poll_interval) as store:
        store.append("p", text_events(5))
        with runner(store).follow("f") as follower:
            timer = later(0.1, lambda: fork(store, "p", "f", at=3))
            started = time.monotonic()
            state = follower.poll(timeout=SLOW)
            took = time.monotonic() - started
            timer.join()
            assert took < QUICK
            assert follower.seq == 3 and state.seq == 3
            assert state == conversation_state(store, "p", at=3)
            store.append("f", text_events(1, "own"))
            assert follower.poll(timeout=SLOW) == conversation_state(store, "f")


def test_a_fork_commit_counts_as_a_commit(make_url: Callable[[], str]) -> None:
    """Waiters on the store's commits (subscriptions, followers) wake at a fork."""
    with el.open(make_url(), poll_interval=60) as store:
        store.append("p", text_events(2))
        seen = store.commit_count
        timer = later(0.1, lambda: fork(store, "p", "f", at=1))
        started = time.monotonic()
        assert store.wait_for_commit(seen, SLOW) == seen + 1
        timer.join()
        assert time.monotonic() - started < QUICK


def test_a_fork_created_and_appended_to_under_a_follower(make_url: Callable[[], str]) -> None:
    """Its first own event arrives at seq at+1: the prefix is read, not skipped."""
    with el.open(make_url()) as store:
        store.append("p", text_events(5))
        with runner(store).follow("f") as follower:
            fork(store, "p", "f", at=4)
            store.append("f", text_events(2, "own"))
            state = follower.poll(timeout=SLOW)
            assert state.seq == 6 and state == conversation_state(store, "f")


@pytest.mark.parametrize("backend_name", [b for b in BACKENDS if b != "memory"])
def test_another_store_object_forking_the_stream_ends_the_wait(
    make_url: Callable[[], str],
) -> None:
    """File stores only: the fork comes from a second store object (as from another process)."""
    url = make_url()
    with el.open(url) as store, el.open(url) as writer:
        writer.append("p", text_events(4))
        with runner(store).follow("f") as follower:
            timer = later(0.1, lambda: fork(writer, "p", "f", at=2))
            started = time.monotonic()
            state = follower.poll(timeout=SLOW)
            timer.join()
            assert time.monotonic() - started < QUICK
            assert state.seq == 2 and state == conversation_state(store, "p", at=2)


@pytest.mark.parametrize("backend_name", [b for b in BACKENDS if b != "memory"])
def test_another_store_object_creating_the_stream_wakes_the_follower(
    make_url: Callable[[], str],
) -> None:
    """File stores only: a memory store cannot be opened by a second store object."""
    url = make_url()
    with el.open(url) as store, el.open(url) as writer, runner(store).follow("new") as follower:
        timer = later(0.05, lambda: writer.append("new", text_events(2)))
        started = time.monotonic()
        state = follower.poll(timeout=SLOW)
        timer.join()
        assert state.seq == 2 and time.monotonic() - started < QUICK


def test_a_follower_in_a_worker_thread_of_an_async_store(make_url: Callable[[], str]) -> None:
    """Projections run on `astore.sync` in a worker thread: follow there waits as well."""

    async def main() -> ConversationState:
        async with el.open_async(make_url()) as astore:
            with runner(astore.sync).follow("new") as follower:
                waiting = asyncio.create_task(asyncio.to_thread(follower.poll, SLOW))
                await asyncio.sleep(0.05)
                await astore.append("new", text_events(2))
                return await asyncio.wait_for(waiting, QUICK)

    assert asyncio.run(main()).seq == 2


def test_one_shot_reads_of_a_missing_stream_still_raise(make_url: Callable[[], str]) -> None:
    with el.open(make_url()) as store:
        store.append("p", text_events(2))
        with pytest.raises(el.StreamNotFoundError, match="'missing' does not exist"):
            conversation_state(store, "missing")
        with pytest.raises(el.StreamNotFoundError, match="'missing' does not exist"):
            runner(store).state("missing")
        with pytest.raises(el.StreamNotFoundError):
            runner(store).replay("missing", 0)


def test_follow_still_refuses_a_bad_stream_name(make_url: Callable[[], str]) -> None:
    with el.open(make_url()) as store, pytest.raises(el.ValidationError):
        runner(store).follow("")
