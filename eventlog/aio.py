"""The asyncio API: the same core as the sync store, run in worker threads.

Blocking engine calls (SQLite, LMDB, file I/O) leave the event loop free; concurrent appends
from many tasks reach the backend together, where group commit can share one fsync.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from eventlog.backends.base import Backend, Durability, ForkInfo, SearchHit, StreamInfo
from eventlog.codec import Codec
from eventlog.errors import UsageError
from eventlog.events import Event, EventData, RecordedEvent
from eventlog.store import (
    ANY,
    MAX_SEQ,
    PAGE,
    ExpectedSeq,
    Store,
    VerifyReport,
    check_poll_interval,
)


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
        """Every event with position > after (at most `limit`) as a list (see Store.read_all)."""
        return await asyncio.to_thread(lambda: list(self.sync.read_all(after, limit)))

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

    async def subscribe(
        self, after: int = 0, *, poll_interval: float | None = None
    ) -> AsyncIterator[RecordedEvent]:
        """Catch up from a position, then yield new events as they commit.

        It runs until cancelled, or ends when the store is closed.
        """
        try:
            wait = (
                self.sync.poll_interval
                if poll_interval is None
                else check_poll_interval(poll_interval)
            )
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        sub = self.sync.subscribe(after)
        try:
            while not self.sync.closed:
                for event in await asyncio.to_thread(sub.poll, wait):
                    yield event
        finally:
            sub.close()

    async def close(self) -> None:
        """Close the store."""
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
