"""The asyncio API: the same core as the sync store, run in worker threads.

Blocking engine calls (SQLite, LMDB, file I/O) leave the event loop free; concurrent appends
from many tasks reach the backend together, where group commit can share one fsync. Waiting
subscribers wait in the event loop, not in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from eventlog.backends.base import Backend, Durability, ForkInfo, SearchHit, StreamInfo
from eventlog.codec import Codec
from eventlog.errors import StoreClosedError
from eventlog.events import Event, EventData, RecordedEvent
from eventlog.store import (
    ANY,
    MAX_SEQ,
    PAGE,
    ExpectedSeq,
    Store,
    VerifyReport,
    check_poll_interval,
    read_all_until_erased,
)


class _CatchUp:
    """One catch-up read of a subscription, run in a worker thread.

    Its outcome is kept here, not only in the asyncio future that awaits it, so a read begun
    under one event loop is taken by the next `__anext__` under another (a second
    `asyncio.run`), and the events it read are never lost.
    """

    __slots__ = ("done", "error", "events", "future", "seen")

    def __init__(self, seen: int, poll: Callable[[], list[RecordedEvent]]) -> None:
        self.seen = seen
        """The store's commit count before the read began."""
        self.events: list[RecordedEvent] = []
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.future = asyncio.ensure_future(asyncio.to_thread(self.run, poll))
        """The read, awaited in the event loop that began it."""

    def run(self, poll: Callable[[], list[RecordedEvent]]) -> None:
        try:
            self.events = poll()
        except BaseException as exc:  # handed to the awaiting task, whatever it is
            self.error = exc
        finally:
            self.done.set()


class AsyncSubscription:
    """An async iterator over every event after a position, in position order, each exactly once.

    Idle, it waits in the event loop and holds no thread: a commit of this store object or a
    close wakes it at once, and other processes' commits are looked for every poll interval;
    only the short catch-up reads run in a worker thread. A cancelled `__anext__` (as by
    `asyncio.wait_for`) loses nothing: the next call goes on where it stopped, under the same
    event loop or another one (a second `asyncio.run`). It ends when closed or when its store
    is closed.
    """

    def __init__(self, store: Store, after: int, batch: int, poll_interval: float) -> None:
        self._store = store
        self._sub = store.subscribe(after, batch=batch)
        self._interval = poll_interval
        self._buffer: deque[RecordedEvent] = deque()
        self._reading: _CatchUp | None = None
        """The catch-up read in progress (or done and not yet taken)."""
        self._waker: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        """The loop of the wait in progress and the event that ends it (one per wait)."""
        self._closed = False
        self.position = after
        """Position of the last event delivered."""

    @property
    def closed(self) -> bool:
        """Whether it has ended: closed, or its store closed."""
        return self._closed or self._store.closed

    def __aiter__(self) -> AsyncSubscription:
        return self

    async def __anext__(self) -> RecordedEvent:
        while not self.closed:
            if self._buffer:
                event = self._buffer.popleft()
                self.position = event.position
                return event
            seen, found = await self._read()
            if not found:
                await self._wait(seen)
        self.close()
        raise StopAsyncIteration

    async def _read(self) -> tuple[int, bool]:
        """Read what has committed into the buffer: (commit count before the read, any found).

        The read runs in a worker thread and is not cancelled with its caller: the next call
        takes its result rather than reading the same events again.
        """
        catch_up = self._reading
        if catch_up is None:
            catch_up = self._reading = _CatchUp(self._store.commit_count, self._poll)
        if not catch_up.done.is_set():
            future = catch_up.future
            if future.get_loop() is asyncio.get_running_loop() and not future.cancelled():
                await asyncio.shield(future)
            else:  # begun under another loop, or its task cancelled: the thread finishes it
                await asyncio.to_thread(catch_up.done.wait)
        self._reading = None
        if catch_up.error is not None:
            raise catch_up.error  # a failed read is tried again by the next call
        self._buffer.extend(catch_up.events)
        return catch_up.seen, bool(catch_up.events)

    def _poll(self) -> list[RecordedEvent]:
        """The events committed now ([] once the subscription or its store is closed)."""
        try:
            return self._sub.poll()
        except StoreClosedError:
            return []

    async def _wait(self, seen: int) -> None:
        """Until a commit of this store object after `seen`, a close, or the poll interval."""
        woken = asyncio.Event()
        self._waker = (asyncio.get_running_loop(), woken)
        self._store.watch_commits(self._wake)
        try:
            if self._store.commit_count == seen and not self.closed:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._interval):
                        await woken.wait()
        finally:
            self._store.watch_commits(self._wake, on=False)
            self._waker = None

    def _wake(self) -> None:
        """End a wait (from any thread; a commit calls it holding the store's commit lock)."""
        waker = self._waker
        if waker is not None:
            loop, woken = waker
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
                loop.call_soon_threadsafe(woken.set)

    def close(self) -> None:
        """End it: a waiting `__anext__` stops at once; later ones raise StopAsyncIteration."""
        if not self._closed:
            self._closed = True
            self._sub.close()
            self._wake()

    async def aclose(self) -> None:
        """End it (as `close`, for code written for async generators)."""
        self.close()

    async def __aenter__(self) -> AsyncSubscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class AsyncStore:
    """Asyncio facade over a `Store`."""

    def __init__(self, store: Store) -> None:
        self.sync = store
        """The underlying synchronous store."""

    @property
    def backend(self) -> Backend:
        """The backend the store writes to."""
        return self.sync.backend

    @property
    def codec(self) -> Codec:
        """The store's codec."""
        return self.sync.codec

    @property
    def location(self) -> str:
        """Where the data lives."""
        return self.sync.location

    @property
    def closed(self) -> bool:
        """Whether the store was closed."""
        return self.sync.closed

    async def append(
        self,
        stream: str,
        events: Iterable[Event | EventData],
        *,
        expected_seq: ExpectedSeq = ANY,
        durability: Durability | str | None = None,
    ) -> list[RecordedEvent]:
        """Append events atomically (see Store.append)."""
        batch = list(events)
        return await asyncio.to_thread(
            self.sync.append, stream, batch, expected_seq=expected_seq, durability=durability
        )

    async def read(
        self,
        stream: str,
        first: int = 1,
        last: int | None = None,
        *,
        backwards: bool = False,
        limit: int | None = None,
    ) -> list[RecordedEvent]:
        """Events of a stream as a list (see Store.read)."""

        def run() -> list[RecordedEvent]:
            return list(self.sync.read(stream, first, last, backwards=backwards, limit=limit))

        return await asyncio.to_thread(run)

    def iter(
        self, stream: str, first: int = 1, last: int | None = None
    ) -> AsyncIterator[RecordedEvent]:
        """Events of a stream, fetched a page at a time (bad arguments raise now, as in `read`)."""
        self.sync.read(stream, first, last)
        return self._pages(stream, first, last)

    async def _pages(
        self, stream: str, first: int, last: int | None
    ) -> AsyncIterator[RecordedEvent]:
        cursor = first
        while last is None or cursor <= last:
            stop = min(cursor + PAGE - 1, MAX_SEQ if last is None else last)
            page = await self.read(stream, cursor, stop)
            for event in page:
                yield event
            if len(page) < stop - cursor + 1:
                return
            cursor = stop + 1

    async def read_last(self, stream: str, n: int) -> list[RecordedEvent]:
        """The last n events, oldest first."""
        return await asyncio.to_thread(self.sync.read_last, stream, n)

    async def get(self, stream: str, seq: int) -> RecordedEvent:
        """The event at one seq of a stream (see Store.get)."""
        return await asyncio.to_thread(self.sync.get, stream, seq)

    async def read_all(self, after: int = 0, limit: int | None = None) -> list[RecordedEvent]:
        """Every event with position > after (at most `limit`) as a list (see Store.read_all).

        A list cut short before an erased event holds the events before it; the next call,
        after the last of them, raises the ErasedError (`read_all_until_erased`).
        """
        return await asyncio.to_thread(read_all_until_erased, self.sync, after, limit)

    async def head_position(self) -> int:
        """The highest committed position."""
        return await asyncio.to_thread(self.sync.head_position)

    async def exists(self, stream: str) -> bool:
        """Whether the stream has events or is a fork."""
        return await asyncio.to_thread(self.sync.exists, stream)

    async def ancestry(self, stream: str) -> list[tuple[str, int]]:
        """[(ancestor, fork seq), ...] from the root to the stream's parent."""
        return await asyncio.to_thread(self.sync.ancestry, stream)

    async def search(
        self, query: str, *, stream: str | None = None, limit: int = 50
    ) -> list[SearchHit]:
        """Full-text search over event text (see Store.search)."""
        return await asyncio.to_thread(self.sync.search, query, stream=stream, limit=limit)

    async def streams(self) -> list[StreamInfo]:
        """Every stream (see Store.streams)."""
        return await asyncio.to_thread(self.sync.streams)

    async def stream_info(self, stream: str) -> StreamInfo:
        """One stream's info."""
        return await asyncio.to_thread(self.sync.stream_info, stream)

    async def fork(self, source: str, new: str, at_seq: int | None = None) -> StreamInfo:
        """Fork a stream (see Store.fork)."""
        return await asyncio.to_thread(self.sync.fork, source, new, at_seq)

    async def forks(self, stream: str | None = None) -> list[ForkInfo]:
        """Fork entries."""
        return await asyncio.to_thread(self.sync.forks, stream)

    async def verify(
        self,
        stream: str | None = None,
        *,
        progress: Callable[[int], None] | None = None,
        upto: int | None = None,
    ) -> VerifyReport:
        """Check hash chains (see Store.verify; `progress` is called from a worker thread)."""
        return await asyncio.to_thread(self.sync.verify, stream, progress=progress, upto=upto)

    def subscribe(
        self, after: int = 0, *, batch: int = PAGE, poll_interval: float | None = None
    ) -> AsyncSubscription:
        """Catch up from a position, then yield new events as they commit (`async for`).

        It runs until closed, or ends when the store is closed. Arguments are checked here,
        as by `Store.subscribe`; `poll_interval` (default: the store's) is how often other
        processes' commits are looked for.
        """
        wait = self.sync.poll_interval if poll_interval is None else poll_interval
        return AsyncSubscription(self.sync, after, batch, check_poll_interval(wait))

    async def close(self) -> None:
        """Close the store."""
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
