"""Background WAL checkpoints for the SQLite backend, so commits that do not sync never wait.

SQLite's default copies the WAL back into the database file inside the commit that fills it
past 1000 pages, and that copy ends with an fsync of the database: a commit at durability
batch or none then waits for the disk after all. Here the writer connection's automatic
checkpoint is raised to a cap, and this thread runs a PASSIVE checkpoint on its own connection
after every ~1000 pages the writer committed. PASSIVE never blocks the writer or readers; the
copy and its fsyncs run on another core while appends go on.

A PASSIVE checkpoint copies the WAL but never restarts it: while appends keep coming, the file
keeps growing. Once the thread finds the WAL `RESTART_FRAMES` long, the writer runs a RESTART
checkpoint before its next commit: it copies the few pages committed since the thread's
checkpoint and waits for readers to leave the WAL, so that the commit writes the WAL from its
start. The writer runs it, between its own transactions, because a checkpoint from the thread
would have to win the write lock from a writer that takes it again at once. Its wait for
readers is bounded by `RESTART_WAIT_MS`: if a reader or another process keeps the WAL busy
longer, writes go on and the restart is tried again once the WAL has grown as much again.

Small commits at durability fsync keep SQLite's inline checkpoint (see `sqlite_writer`): the
WAL is then reset and rewritten in place, and an `fdatasync` over blocks that already exist is
cheaper than one that also grows the file. Measured here with raw sqlite3 at synchronous=FULL
(`eventlog.bench.limits.sqlite_append`): single-row commits 2.6-2.9k/s inline against 2.2-2.4k/s
in the background, 10-row commits about even, 100-row commits 22-25k/s against 30-35k/s.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable

log = logging.getLogger("eventlog.backends.sqlite")

CHECKPOINT_FRAMES = 1000
"""Pages committed between background checkpoints (SQLite's own automatic threshold)."""
WAL_CAP_FRAMES = 8 * CHECKPOINT_FRAMES
"""The writer's own automatic checkpoint while a thread checkpoints: a backstop that bounds the
WAL (about 32 MiB of 4 KiB pages) if the thread's checkpoints fail. At synchronous=OFF, where the
writer must not checkpoint inside a commit, this many pages committed without a restart make one
due instead."""
RESTART_FRAMES = WAL_CAP_FRAMES // 2
"""A WAL this long (pages) is restarted, well before the writer's backstop."""
RESTART_WAIT_MS = 100
"""How long a RESTART checkpoint may hold writes back waiting for readers to leave the WAL."""
_PAGES_PER_COMMIT = 3
"""Pages a commit rewrites besides its rows' (the table's and two indexes' last leaves)."""


def commit_pages(size: int, page_size: int) -> int:
    """About how many WAL pages a commit writing `size` bytes of rows adds (paces checkpoints)."""
    return size // page_size + _PAGES_PER_COMMIT


class Checkpointer:
    """A thread that checkpoints the WAL once the writer has committed enough pages to it.

    Started on first use, so a store that only reads or only syncs never starts it. A failed
    checkpoint is logged and retried after the next pages: nothing is lost by a late one, the
    committed pages stay in the WAL, and the writer's own automatic checkpoint is the backstop.
    """

    def __init__(self, connect: Callable[[], sqlite3.Connection], location: str) -> None:
        self._connect = connect
        self._location = location
        self._cond = threading.Condition(threading.Lock())
        self._pending = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        self._checkpointing = threading.Lock()
        """Held by whoever checkpoints: a second checkpoint at once would fail with SQLITE_BUSY."""
        self._restart_at = RESTART_FRAMES
        self._unrestarted = 0
        """Pages committed since the writer's last restart (the backstop when the thread lags)."""
        self.restart_due = False
        """The thread found the WAL long enough to restart; the writer calls `restart`."""
        self.checkpoints = 0
        """Checkpoints run by this thread."""
        self.restarts = 0
        """RESTART checkpoints run by the writer that restarted the WAL."""
        self.restarts_blocked = 0
        """RESTART checkpoints that gave up waiting for readers to leave the WAL."""

    def committed(self, pages: int) -> None:
        """Count pages the writer just committed; wake the thread when a checkpoint is due."""
        with self._cond:
            if self._closed:
                return
            self._pending += pages
            self._unrestarted += pages
            if self._unrestarted >= WAL_CAP_FRAMES:
                self.restart_due = True
            if self._pending < CHECKPOINT_FRAMES:
                return
            if self._thread is None:
                thread = threading.Thread(
                    target=self._run, name=f"eventlog-checkpoint {self._location}", daemon=True
                )
                try:
                    thread.start()
                except RuntimeError:  # interpreter shutting down: the commit stands regardless
                    self._pending = 0
                    return
                self._thread = thread
            self._cond.notify()

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                with self._cond:
                    while not self._closed and self._pending < CHECKPOINT_FRAMES:
                        self._cond.wait()
                    if self._closed:
                        return
                    self._pending = 0
                try:
                    if conn is None:
                        conn = self._connect()
                    # The GIL is released while SQLite copies and syncs.
                    with self._checkpointing:
                        row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    self.checkpoints += 1
                    # The WAL's length now: what the checkpoint saw, plus what came in since.
                    if row[1] + self._pending >= self._restart_at:
                        self.restart_due = True
                except sqlite3.Error as exc:
                    log.warning(
                        "%s: background checkpoint failed, will retry: %s", self._location, exc
                    )
        finally:
            if conn is not None:
                conn.close()

    def restart(self, conn: sqlite3.Connection) -> None:
        """Restart the WAL from the writer's connection `conn`, outside any transaction.

        Waits for a checkpoint of the thread in progress, then for readers at most
        `RESTART_WAIT_MS`. A failure is logged, never raised: the commits stand either way.
        """
        with self._checkpointing:
            self.restart_due = False
            self._unrestarted = 0
            try:
                wait = conn.execute("PRAGMA busy_timeout").fetchone()[0]
                conn.execute(f"PRAGMA busy_timeout={RESTART_WAIT_MS}")
                try:
                    busy, frames, _ = conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
                finally:
                    conn.execute(f"PRAGMA busy_timeout={wait}")
            except sqlite3.Error as exc:
                log.warning("%s: WAL restart failed, will retry: %s", self._location, exc)
                return
            if busy:  # readers kept the WAL: wait for as much growth before holding writes again
                self._restart_at = frames + RESTART_FRAMES
                self.restarts_blocked += 1
            else:
                self._restart_at = RESTART_FRAMES
                self.restarts += 1

    def close(self) -> None:
        """Stop the thread, letting a checkpoint in progress finish first."""
        with self._cond:
            self._closed = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join()
