"""Catch-up subscriptions: read the store from a position, then follow new commits."""

from __future__ import annotations

import math
import time
from collections import deque
from typing import TYPE_CHECKING

from eventlog.errors import StoreClosedError, ValidationError
from eventlog.events import RecordedEvent
from eventlog.store import as_seconds, read_all_until_erased

if TYPE_CHECKING:
    from eventlog.store import Store


class Subscription:
    """An iterator over every event after a position, in position order, each exactly once.

    Iteration blocks while waiting for new events; `close()` (from any thread) ends it. Commits
    by this store object wake it at once; commits by other processes are seen within the store's
    poll interval.
    """

    def __init__(self, store: Store, after: int, batch: int) -> None:
        self._store = store
        self._batch = batch
        self._fetched = after
        self._buffer: deque[RecordedEvent] = deque()
        self._closed = False
        self.position = after
        """Position of the last event delivered."""

    def _fill(self) -> bool:
        """Read the next page into the buffer; False if there was none (or the store closed)."""
        try:
            page = read_all_until_erased(self._store, self._fetched, self._batch)
        except StoreClosedError:  # closed while this subscriber waited: the end, not an error
            self._closed = True
            return False
        if page:
            self._buffer.extend(page)
            self._fetched = page[-1].position
        return bool(page)

    @property
    def closed(self) -> bool:
        """Whether it has ended: `close()` was called or its store was closed."""
        return self._closed or self._store.closed

    def poll(self, timeout: float = 0.0) -> list[RecordedEvent]:
        """Events available now; wait up to `timeout` seconds for some if there are none.

        A commit of this store object, or `close()`, ends the wait at once; other processes'
        commits are looked for every poll interval, as iteration does. Once the subscription
        has ended and nothing is left to deliver it raises StoreClosedError, so a polling loop
        stops instead of spinning (iteration ends quietly instead).
        """
        wait = check_timeout(timeout)
        if not self._buffer and not self._closed:
            deadline = time.monotonic() + wait
            while not self._closed and not self._store.closed:
                seen = self._store.commit_count
                if self._fill():
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._store.wait_for_commit(
                    seen, min(left, self._store.poll_interval), self._is_closed
                )
        if not self._buffer and self.closed:
            raise StoreClosedError(self._ended())
        out = list(self._buffer)
        self._buffer.clear()
        if out:
            self.position = out[-1].position
        return out

    def __iter__(self) -> Subscription:
        return self

    def __next__(self) -> RecordedEvent:
        while not self._closed and not self._store.closed:
            if self._buffer:
                event = self._buffer.popleft()
                self.position = event.position
                return event
            seen = self._store.commit_count
            if not self._fill():
                self._store.wait_for_commit(seen, self._store.poll_interval, self._is_closed)
        raise StopIteration

    def _is_closed(self) -> bool:
        return self._closed

    def _ended(self) -> str:
        """Why it has ended, for StoreClosedError."""
        if self._store.closed:
            return f"store {self._store.location} is closed"
        return f"subscription to {self._store.location} is closed"

    def close(self) -> None:
        """End it, waking a blocked iterator or `poll` at once (from any thread).

        The flag is set before the wake-up, and waits check it under the wake-up's lock
        (`Store.wait_for_commit`), so a wait that begins meanwhile does not sleep.
        """
        self._closed = True
        self._store.wake_waiters()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_timeout(value: object) -> float:
    """A poll timeout: a non-negative, finite number of seconds (else ValidationError).

    NaN would make `poll` spin and a bool is no duration, as for `check_poll_interval`.
    """
    seconds = as_seconds(value)
    if not 0 <= seconds < math.inf:
        raise ValidationError(
            f"must be a non-negative number of seconds, got {value!r}", field="timeout"
        )
    return seconds
