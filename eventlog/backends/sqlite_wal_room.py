"""Room ahead of SQLite's WAL writes, so a synced commit overwrites the file in place.

A commit at synchronous=FULL appends frames to the WAL and syncs it. While the frames extend
the file, each sync must also make the new file size durable: on ext4 that is a journal commit,
and it doubles the sync's latency (here 270 us against 122 us for an overwrite of the same
bytes). SQLite grows the WAL until its first checkpoint restarts it, so every synced commit of
a freshly opened store, and all of a short-lived process's, pays it.

`WalRoom` keeps a mebibyte of zeros past the end of the WAL: when a synced commit has grown the
file, the next one, holding the write lock (no other connection writes the WAL then), appends
zeros from the file's end before it writes. SQLite finds the frames it wrote by their salts and
checksums, so zeros past the last valid frame are ignored as the stale frames a restarted WAL
keeps are; the room's blocks reach the disk with the next sync, once per mebibyte.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("eventlog.backends.sqlite")

ROOM_BYTES = 1 << 20
"""Zeros appended at a time (256 frames of 4 KiB pages)."""
_ZEROS = bytes(ROOM_BYTES)


class WalRoom:
    """Tracks a WAL file's size across synced commits and extends it when they grew it."""

    def __init__(self, wal_path: str) -> None:
        self.path = wal_path
        self.due = False
        """The last synced commit grew the file: make room before the next."""
        self._end = _size(wal_path)
        """The file's size after the last commit or extension seen (at first: as found).

        A WAL that another connection keeps may end in room already, ahead of the frames
        SQLite writes next: room is made only once a commit is seen to grow the file, never
        just because this connection is new (each one would add a mebibyte while the WAL is
        shared, as by a reader that keeps it from being reset)."""
        self.extensions = 0
        """Times room was made."""

    def make(self) -> None:
        """Append `ROOM_BYTES` of zeros at the file's end. Only while holding the write lock.

        An error (a full disk) is logged and leaves the file as SQLite would have it: the
        commit goes on without room.
        """
        self.due = False
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            return  # no WAL yet: SQLite makes it with the first frame
        try:
            size = os.fstat(fd).st_size
            os.pwrite(fd, _ZEROS, size)
            self._end = size + ROOM_BYTES
            self.extensions += 1
        except OSError as exc:
            log.debug("%s: no room made ahead of the WAL: %s", self.path, exc)
        finally:
            os.close(fd)

    def committed(self) -> None:
        """After a synced commit: room is due if the commit wrote past the end seen."""
        size = _size(self.path)
        if size > self._end:
            self.due = True
        self._end = size


def _size(path: str) -> int:
    """The file's size (0 if it does not exist, or cannot be looked at)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
