"""Subscriptions, sync and async: waiting without threads, cancelling, closing, checking.

Each test bounds time generously ("within 2 s where it used to take 10 s"), so a loaded
machine does not fail them.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import eventlog as el
from eventlog import aio
from eventlog.projections import ConversationProjection, Runner
from tests.conftest import BACKENDS
from tests.contract import text_events, texts_of

URLS: dict[str, Callable[[Path], str]] = {
    "memory": lambda d: f"memory://sub-{d.name}",
    "sqlite": lambda d: f"sqlite:///{d}/s.db",
    "jsonl": lambda d: f"jsonl:///{d}/j",
    "lmdb": lambda d: f"lmdb:///{d}/l",
}
FILE_BACKENDS = [name for name in BACKENDS if name != "memory"]
"""Backends that a second store object can open (as another process would)."""
SLOW = 10.0
"""A poll interval that a test must never wait out."""
QUICK = 2.0
"""The bound for what must not wait for the poll interval."""


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new store URL of each local backend in turn."""
    return URLS[request.param](tmp_path)


@pytest.fixture(params=FILE_BACKENDS)
def file_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new store URL of each backend that two store objects can share."""
    return URLS[request.param](tmp_path)


def _pool_size() -> int:
    """The threads of asyncio's default executor on this machine."""
    return min(32, (os.cpu_count() or 1) + 4)


# -- async: waiting holds no thread ---------------------------------------------------------


def test_idle_async_subscribers_leave_the_thread_pool_free(url: str) -> None:
    """More waiting subscribers than the pool has threads: append and close stay quick (each
    took about the poll interval when every subscriber waited in a pool thread)."""

    async def scenario() -> None:
        store = el.open_async(url, durability="none", poll_interval=SLOW)
        n = _pool_size() + 4
        got: list[list[int]] = [[] for _ in range(n)]

        async def follow(i: int) -> None:
            async for event in store.subscribe():
                got[i].append(event.position)

        tasks = [asyncio.create_task(follow(i)) for i in range(n)]
        await asyncio.sleep(0.2)  # every subscriber has caught up and waits
        started = time.monotonic()
        await store.append("s", text_events(1))
        assert time.monotonic() - started < QUICK
        while any(g != [1] for g in got) and time.monotonic() - started < QUICK:
            await asyncio.sleep(0.01)
        assert got == [[1]] * n  # a local commit wakes each at once
        started = time.monotonic()
        await store.close()
        await asyncio.wait_for(asyncio.gather(*tasks), QUICK)  # each ends, quietly
        assert time.monotonic() - started < QUICK

    asyncio.run(scenario())


def test_cancelling_an_async_subscriber_lets_the_loop_exit_at_once(url: str) -> None:
    """No worker thread is left waiting out the poll interval when asyncio.run ends (the store
    stays open until after it)."""
    store = el.open_async(url, poll_interval=SLOW)

    async def scenario() -> None:
        await store.append("s", text_events(1))

        async def follow() -> None:
            async for _ in store.subscribe():
                pass

        task = asyncio.create_task(follow())
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    started = time.monotonic()
    asyncio.run(scenario())
    took = time.monotonic() - started
    store.sync.close()
    assert took < 0.2 + QUICK  # 10 s when a thread waited


# -- async: cancellation loses nothing ------------------------------------------------------


def test_a_timed_out_anext_does_not_end_the_subscription(url: str) -> None:
    async def scenario() -> None:
        async with el.open_async(url, durability="none") as store:
            sub = store.subscribe()
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(anext(sub), 0.1)
            await store.append("s", text_events(3))
            got = [await asyncio.wait_for(anext(sub), 5) for _ in range(3)]
            assert [e.seq for e in got] == [1, 2, 3] and sub.position == 3
            assert not sub.closed
            await sub.aclose()
            assert sub.closed
            with pytest.raises(StopAsyncIteration):
                await anext(sub)

    asyncio.run(scenario())


def test_cancelling_anext_at_any_moment_loses_and_repeats_nothing(url: str) -> None:
    """Cancelled while it reads, waits or is about to deliver: each event exactly once."""

    async def scenario() -> None:
        async with el.open_async(url, durability="none") as store:
            sub = store.subscribe(batch=3)
            with pytest.raises(TimeoutError):  # cancelled while it waits: nothing has committed
                await asyncio.wait_for(anext(sub), 0.05)
            total = 40

            async def write() -> None:
                for i in range(total):
                    await store.append(f"s{i % 3}", text_events(1, f"e{i}-"))

            writer = asyncio.create_task(write())
            got: list[el.RecordedEvent] = []
            limits = (0.0001, 0.0002, 0.0005, 0.001, 0.003, 0.05)  # some end mid-read
            attempts = 0
            deadline = time.monotonic() + 20
            while len(got) < total and time.monotonic() < deadline:
                attempts += 1
                with contextlib.suppress(TimeoutError):
                    got.append(await asyncio.wait_for(anext(sub), limits[attempts % 6]))
            await writer
            assert [e.position for e in got] == list(range(1, total + 1))
            assert [e.id for e in got] == [e.id for e in await store.read_all()]
            assert sub.position == total
            sub.close()

    asyncio.run(scenario())


def test_an_async_subscription_goes_on_under_a_second_event_loop(url: str) -> None:
    """A subscription kept across `asyncio.run` calls (as a test harness or a framework that
    runs each turn in its own loop does): its idle wait under the first loop bound an
    asyncio.Event to that loop, and every `__anext__` under the next one raised RuntimeError
    (found in review)."""
    store = el.open_async(url, durability="none")
    sub = store.subscribe()

    async def first() -> None:
        await store.append("s", text_events(1, "a"))
        assert (await anext(sub)).seq == 1
        with pytest.raises(TimeoutError):  # an idle wait under this loop
            await asyncio.wait_for(anext(sub), 0.1)

    async def second() -> list[int]:
        async def later() -> None:
            await asyncio.sleep(0.1)
            await store.append("s", text_events(2, "b"))

        writer = asyncio.create_task(later())
        got = [(await asyncio.wait_for(anext(sub), 5)).seq for _ in range(2)]
        await writer
        return got

    try:
        asyncio.run(first())
        assert asyncio.run(second()) == [2, 3]
        assert sub.position == 3
    finally:
        sub.close()
        asyncio.run(store.close())


def test_a_read_cut_off_with_its_event_loop_is_delivered_under_the_next(url: str) -> None:
    """The first loop ends while the subscription's catch-up read runs in a worker thread:
    the events that read took are delivered under the next loop, once each (they were lost,
    and every later `__anext__` raised CancelledError: found in review)."""
    store = el.open_async(url, durability="none")
    sub = store.subscribe()
    poll = sub._sub.poll
    reading = threading.Event()

    def slow_poll(timeout: float = 0.0) -> list[el.RecordedEvent]:
        reading.set()
        time.sleep(0.3)  # the loop is gone by the time this read returns
        return poll(timeout)

    async def first() -> None:
        await store.append("s", text_events(2, "a"))
        sub._sub.poll = slow_poll  # type: ignore[method-assign]
        task = asyncio.create_task(anext(sub))
        await asyncio.to_thread(reading.wait)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def second() -> list[int]:
        sub._sub.poll = poll  # type: ignore[method-assign]
        got = [(await asyncio.wait_for(anext(sub), 5)).seq for _ in range(2)]
        await store.append("s", text_events(1, "b"))
        got.append((await asyncio.wait_for(anext(sub), 5)).seq)
        return got

    try:
        asyncio.run(first())
        assert asyncio.run(second()) == [1, 2, 3]
        assert sub.position == 3
    finally:
        sub.close()
        asyncio.run(store.close())


# -- async: arguments are checked at the call -----------------------------------------------


def test_async_subscribe_checks_its_arguments_at_the_call() -> None:
    async def scenario() -> None:
        store = el.open_async("memory://", poll_interval=0.05)
        for bad in (-1, 1.5, True, "2"):
            with pytest.raises(el.ValidationError):
                store.subscribe(bad)  # type: ignore[arg-type]
        with pytest.raises(el.ValidationError):
            store.subscribe(batch=0)
        for interval in (0, -1, math.nan, True):
            with pytest.raises(el.ValidationError, match="poll_interval"):
                store.subscribe(poll_interval=interval)
        sub = store.subscribe(after=5, batch=2, poll_interval=0.5)
        assert isinstance(sub, aio.AsyncSubscription) and sub.position == 5
        sub.close()
        await store.close()
        with pytest.raises(el.StoreClosedError):
            store.subscribe()

    asyncio.run(scenario())


# -- async: every event once, in order, local and foreign commits ---------------------------


def test_async_subscriber_gets_commits_of_another_store_object_once_in_order(
    file_url: str,
) -> None:
    """Commits through the subscriber's store wake it; another store object's (as another
    process's) are found by polling; none is lost or repeated."""

    async def scenario() -> list[el.RecordedEvent]:
        async with el.open_async(file_url, durability="none", poll_interval=0.02) as local:
            with el.open(file_url, durability="none") as other:
                sub = local.subscribe()
                per = 15

                def foreign() -> None:
                    for i in range(per):
                        other.append("theirs", text_events(1, f"o{i}-"))
                        time.sleep(0.003)

                async def mine() -> None:
                    for i in range(per):
                        await local.append("mine", text_events(1, f"m{i}-"))
                        await asyncio.sleep(0.003)

                got: list[el.RecordedEvent] = []

                async def consume() -> None:
                    async for event in sub:
                        got.append(event)
                        if len(got) == 2 * per:
                            break

                await asyncio.wait_for(
                    asyncio.gather(consume(), mine(), asyncio.to_thread(foreign)), 20
                )
                assert [e.id for e in got] == [e.id for e in await local.read_all()]
                return got

    got = asyncio.run(scenario())
    assert [e.position for e in got] == list(range(1, 31))
    assert sorted(e.stream for e in got) == ["mine"] * 15 + ["theirs"] * 15


# -- sync: close wakes, a closed subscription says so --------------------------------------


def test_closing_a_subscription_wakes_a_waiting_poll_at_once(url: str) -> None:
    with el.open(url, poll_interval=SLOW) as store:
        sub = store.subscribe()
        outcome: list[object] = []

        def wait() -> None:
            try:
                outcome.append(sub.poll(timeout=SLOW))
            except el.StoreClosedError as exc:
                outcome.append(exc)

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.2)
        started = time.monotonic()
        sub.close()
        waiter.join(SLOW + 5)
        assert time.monotonic() - started < QUICK  # the poll interval before the fix
        assert len(outcome) == 1 and isinstance(outcome[0], el.StoreClosedError)


@pytest.mark.parametrize("how", ["poll", "iterate"])
def test_a_close_just_before_the_wait_is_not_slept_through(
    url: str, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """close() landing after the closed-check but before the wait began cost a poll interval."""
    with el.open(url, poll_interval=SLOW) as store:
        sub = store.subscribe()
        fill = sub._fill

        def fill_then_close() -> bool:  # close() from elsewhere, in the gap
            found = fill()
            sub.close()
            return found

        monkeypatch.setattr(sub, "_fill", fill_then_close)
        started = time.monotonic()
        if how == "poll":
            with pytest.raises(el.StoreClosedError):
                sub.poll(timeout=SLOW)
        else:
            assert list(sub) == []
        assert time.monotonic() - started < QUICK


def test_closing_a_subscription_ends_a_blocked_iteration_at_once(url: str) -> None:
    with el.open(url, poll_interval=SLOW) as store:
        store.append("s", text_events(1))
        sub = store.subscribe()
        seen: list[int] = []
        follower = threading.Thread(target=lambda: seen.extend(e.seq for e in sub))
        follower.start()
        time.sleep(0.2)
        started = time.monotonic()
        sub.close()
        follower.join(SLOW + 5)
        assert time.monotonic() - started < QUICK and seen == [1]


def test_poll_on_an_ended_subscription_raises_instead_of_spinning(url: str) -> None:
    """`while True: sub.poll(5)` returned [] at once forever once the store was closed."""
    store = el.open(url)
    store.append("s", text_events(3))
    sub = store.subscribe()
    assert next(sub).seq == 1  # 2 and 3 are read and buffered
    assert not sub.closed
    store.close()
    assert sub.closed
    assert [e.seq for e in sub.poll(5)] == [2, 3]  # what was buffered is still delivered
    started = time.monotonic()
    with pytest.raises(el.StoreClosedError, match="is closed"):
        sub.poll(5)
    assert time.monotonic() - started < QUICK
    assert list(sub) == []  # iteration ends quietly


def test_poll_on_a_closed_subscription_raises(url: str) -> None:
    with el.open(url) as store:
        store.append("s", text_events(2))
        sub = store.subscribe()
        assert len(sub.poll()) == 2
        sub.close()
        assert sub.closed and not store.closed
        with pytest.raises(el.StoreClosedError, match="subscription"):
            sub.poll(5)
        assert list(sub) == []


@pytest.mark.parametrize(
    "bad", [math.nan, math.inf, -0.5, -1, None, "1", True, False, 10**400, [1]]
)
def test_poll_refuses_a_timeout_that_is_no_duration(bad: object) -> None:
    """NaN spun, None and "1" raised a bare TypeError, True waited a second."""
    with el.open("memory://") as store:
        store.append("c", text_events(1))
        sub = store.subscribe(after=1)
        with pytest.raises(el.ValidationError, match="timeout") as info:
            sub.poll(bad)  # type: ignore[arg-type]
        assert info.value.field == "timeout"
        follower = Runner(store, ConversationProjection()).follow("c")
        with pytest.raises(el.ValidationError, match="timeout"):
            follower.poll(bad)  # type: ignore[arg-type]
        assert sub.poll(0) == [] and sub.poll(0.0) == [] and follower.poll(0) is follower.state


# -- Follower ------------------------------------------------------------------------------


def test_follower_poll_waits_for_its_own_stream(url: str) -> None:
    """A commit to another stream used to end `poll(timeout)` with nothing new."""
    with el.open(url, durability="none") as store:
        store.append("mine", text_events(1))
        with Runner(store, ConversationProjection()).follow("mine") as follower:
            later = [
                threading.Timer(0.05, lambda: store.append("other", text_events(1, "o"))),
                threading.Timer(0.4, lambda: store.append("mine", text_events(1, "late"))),
            ]
            for timer in later:
                timer.start()
            started = time.monotonic()
            state = follower.poll(timeout=SLOW)
            took = time.monotonic() - started
            for timer in later:
                timer.join()
            assert follower.seq == 2 and state.seq == 2
            assert 0.3 < took < 0.4 + QUICK
            assert texts_of(store.read("mine"))[-1] == "late0"


def test_follower_poll_times_out_when_only_other_streams_commit(url: str) -> None:
    with el.open(url, durability="none") as store:
        store.append("mine", text_events(1))
        with Runner(store, ConversationProjection()).follow("mine") as follower:
            timer = threading.Timer(0.05, lambda: store.append("other", text_events(1)))
            timer.start()
            started = time.monotonic()
            state = follower.poll(timeout=0.3)
            took = time.monotonic() - started
            timer.join()
            assert state.seq == 1 and 0.3 <= took < 0.3 + QUICK


def test_follower_poll_raises_once_closed(url: str) -> None:
    store = el.open(url)
    store.append("mine", text_events(1))
    follower = Runner(store, ConversationProjection()).follow("mine")
    assert not follower.closed
    follower.close()
    assert follower.closed
    with pytest.raises(el.StoreClosedError):
        follower.poll(5)
    other = Runner(store, ConversationProjection()).follow("mine")
    store.close()
    assert other.closed
    with pytest.raises(el.StoreClosedError):
        other.poll(5)
