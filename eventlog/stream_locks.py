"""One lock per stream being appended to, so appends to different streams never wait on each other.

A fixed set of striped locks would make two streams that hash to the same stripe take turns:
one writer then always misses the group commit the other is in, and syncs alone.
"""

from __future__ import annotations

import threading


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        """Threads holding or waiting for the lock."""


class StreamLocks:
    """Locks made on demand per stream and dropped when no thread holds or waits for them."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._locks: dict[str, _Entry] = {}

    def acquire(self, stream: str) -> None:
        """Wait for the stream's lock."""
        with self._mutex:
            entry = self._locks.get(stream)
            if entry is None:
                entry = self._locks[stream] = _Entry()
            entry.users += 1
        entry.lock.acquire()

    def release(self, stream: str) -> None:
        """Release the stream's lock (held by this thread)."""
        with self._mutex:
            entry = self._locks[stream]
            entry.lock.release()
            entry.users -= 1
            if not entry.users:
                del self._locks[stream]

    def __len__(self) -> int:
        """Streams whose lock is held or awaited right now."""
        return len(self._locks)
