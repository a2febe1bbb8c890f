"""Group commit for the SQLite backend: concurrent writes share one transaction and one sync.

Every write (an append, a fork, a blob, a snapshot) is a `Job` run on the one writer connection.
The first thread to find no commit in progress becomes the leader: it takes every job waiting at
that moment and runs them in one transaction. If one fails, the transaction is rolled back and
the group rerun with one savepoint per job, so a conflict fails only its own job. The leader
commits once with the strictest durability any of them asked for, then wakes the others. A
thread returns only after the commit that holds its job, so an acknowledged event is as durable
as its caller asked. While a leader waits for its sync, the next callers queue up and form the
next group: under load, one sync serves many appends.

Commits that do not sync, and large ones that do, leave WAL checkpoints to a background thread
(see `sqlite_checkpoint`); small commits at durability fsync checkpoint inline, as SQLite does
by default. Commits at durability fsync keep room ahead of the WAL (see `sqlite_wal_room`).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from eventlog.backends.base import Durability
from eventlog.backends.group_commit import Turns
from eventlog.backends.sqlite_checkpoint import (
    CHECKPOINT_FRAMES,
    WAL_CAP_FRAMES,
    Checkpointer,
    commit_pages,
)
from eventlog.backends.sqlite_wal_room import WalRoom
from eventlog.errors import BackendUnavailableError, StoreClosedError

log = logging.getLogger("eventlog.backends.sqlite")

_SYNC = {Durability.FSYNC: "FULL", Durability.BATCH: "NORMAL", Durability.NONE: "OFF"}
_RANK = {Durability.NONE: 0, Durability.BATCH: 1, Durability.FSYNC: 2}
_MAX_GROUP = 512
"""At most this many jobs share one transaction (bounds its size and the leader's latency)."""
_BUSY_RETRIES = 5
BIG_COMMIT_PAGES = 32
"""A commit at durability fsync this large (pages) leaves its checkpoint to the thread too:
copying a thousand pages costs more than the growth of the WAL file it saves (see
`sqlite_checkpoint`)."""

Work = Callable[[sqlite3.Connection], Any]
Translate = Callable[[BaseException], BaseException]


class Job:
    """One write waiting for (or done by) a group commit."""

    __slots__ = ("done", "durability", "error", "one_statement", "result", "size", "work")

    def __init__(
        self, work: Work, durability: Durability, one_statement: bool = False, size: int = 0
    ) -> None:
        self.work = work
        self.durability = durability
        self.one_statement = one_statement
        """The work is one statement: atomic by itself when no other job shares its commit."""
        self.size = size
        """Bytes the work writes, about (paces the background checkpoints)."""
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False


def _level_and_size(group: list[Job]) -> tuple[Durability, int]:
    """The strictest durability any job of a group asked for, and the bytes they write."""
    if len(group) == 1:
        return group[0].durability, group[0].size
    return max((j.durability for j in group), key=_RANK.__getitem__), sum(j.size for j in group)


class GroupWriter(Turns):
    """Runs jobs on one connection, several per transaction when callers overlap."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        translate: Translate,
        location: str,
        connect: Callable[[], sqlite3.Connection],
        wal_path: str | None = None,
    ) -> None:
        super().__init__()
        self._conn = conn
        self._room = None if wal_path is None else WalRoom(wal_path)
        """Room ahead of the WAL for commits at durability fsync (None: not kept)."""
        self._page_size: int = conn.execute("PRAGMA page_size").fetchone()[0]
        # A read opens the WAL on this connection, so closing it last checkpoints the WAL and
        # removes -wal and -shm even if nothing was written: the read-only connection that
        # checked the schema on open made them and, read-only, could not remove them.
        conn.execute("PRAGMA schema_version").fetchone()
        # A WAL reset keeps at most this much file: room for the cap, without keeping a burst's.
        conn.execute(f"PRAGMA journal_size_limit={2 * WAL_CAP_FRAMES * self._page_size}")
        self._checkpointer = Checkpointer(connect, location)
        self._translate = translate
        self._location = location
        self._closed = False
        self._sync = ""
        self._autocheckpoint = CHECKPOINT_FRAMES
        self.commits = 0
        """Transactions committed by this writer (appends share them under load)."""
        self.jobs = 0
        """Jobs run by this writer."""

    def run(
        self, work: Work, durability: Durability, *, one_statement: bool = False, size: int = 0
    ) -> Any:
        """Run `work(conn)` in a write transaction; return its result once durable.

        `one_statement` says the work runs a single statement: alone in its group, it then runs
        as SQLite's own autocommit transaction, which saves a BEGIN and a COMMIT round. `size`
        is about how many bytes it writes.
        """
        job = Job(work, durability, one_statement, size)
        self._enqueue(job)
        self._take_turns(job, durability is Durability.FSYNC, self._commit)
        if job.error is not None:
            raise job.error
        return job.result

    def _cap(self) -> int:
        return _MAX_GROUP

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self._location} is closed")

    def _commit(self, group: list[Job]) -> None:
        """Run the group in one transaction; every job ends with a result or an error."""
        conn = self._conn
        level, size = _level_and_size(group)
        pages = commit_pages(size, self._page_size)
        background = level is not Durability.FSYNC or pages >= BIG_COMMIT_PAGES
        room = self._room if level is Durability.FSYNC else None
        alone = len(group) == 1 and group[0].one_statement and not (room and room.due)
        try:
            if self._checkpointer.restart_due:
                self._sync_checkpoints()
                self._checkpointer.restart(conn)
            self._configure(level, background)
            if not (alone and self._run_alone(group[0])):
                self._transaction(group, room)
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            error = self._translate(exc) if isinstance(exc, sqlite3.Error) else exc
            for job in group:
                if job.error is None:
                    job.error = error
            if not isinstance(exc, Exception):
                raise
            return
        self.commits += 1
        self.jobs += len(group)
        if room is not None:
            room.committed()
        if background:
            self._checkpointer.committed(pages)

    def _transaction(self, group: list[Job], room: WalRoom | None) -> None:
        """Run the group in BEGIN IMMEDIATE ... COMMIT, making room ahead of the WAL if due."""
        conn = self._conn
        self._begin()
        if room is not None and room.due:
            room.make()  # holding the write lock: no other connection writes the WAL
        if len(group) == 1:
            group[0].result = group[0].work(conn)
        elif not self._run_straight(group):
            self._run_each(group)
        if conn.in_transaction:  # not when every job failed (see `_run_each`)
            conn.execute("COMMIT")

    def _run_alone(self, job: Job) -> bool:
        """Run a one-statement job as its own autocommit transaction.

        False if the database stayed busy (another process writing) through the busy timeout:
        nothing was written, and the caller retries with BEGIN IMMEDIATE and its back-off.
        """
        try:
            job.result = job.work(self._conn)
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                raise
            return False
        return True

    def _run_straight(self, group: list[Job]) -> bool:
        """Run every job in the open transaction without savepoints; False if one failed.

        Conflicts are rare, and two statements fewer per job keep the write lock (and the GIL
        hand-offs around each statement) short. On a failure the transaction is rolled back and
        a new one begun, so the caller can rerun the jobs one savepoint each.
        """
        conn = self._conn
        try:
            for job in group:
                job.result = job.work(conn)
        except Exception:
            for job in group:
                job.result = None
            if conn.in_transaction:  # SQLite may have rolled back already (disk full, I/O)
                conn.execute("ROLLBACK")
            self._begin()
            return False
        return True

    def _run_each(self, group: list[Job]) -> None:
        """Run each job in its own savepoint, so a failure undoes only its own job.

        Some failures (a full disk, an I/O error) make SQLite roll back the whole transaction
        by itself. That job gets its error, and the jobs run so far, undone with it, run again
        with the rest in a new transaction. If no job is left, no transaction is open.
        """
        conn = self._conn
        runnable = group
        while runnable:
            lost = False
            for job in runnable:
                conn.execute("SAVEPOINT job")
                try:
                    job.result = job.work(conn)
                except Exception as exc:
                    job.result = None
                    job.error = self._translate(exc) if isinstance(exc, sqlite3.Error) else exc
                    if not conn.in_transaction:
                        lost = True
                        break
                    conn.execute("ROLLBACK TO job")
                    conn.execute("RELEASE job")
                else:
                    conn.execute("RELEASE job")
            if not lost:
                return
            runnable = [job for job in runnable if job.error is None]
            for job in runnable:
                job.result = None
            if runnable:
                self._begin()

    def _configure(self, level: Durability, background: bool) -> None:
        """Set the commit's `synchronous` and its checkpoint: inline, left to the thread, or none.

        At synchronous=OFF SQLite syncs nothing, not even in a checkpoint; a checkpoint that
        completed there would let the next commit overwrite the WAL frames of earlier fsync
        commits while their only other copy is unsynced pages of the database file. So the
        writer never checkpoints at OFF: the thread (its own connection) and the writer's WAL
        restarts (at NORMAL or above, see `_sync_checkpoints`) do.
        """
        mode = _SYNC[level]
        if mode != self._sync:
            self._conn.execute(f"PRAGMA synchronous={mode}")
            self._sync = mode
        frames = WAL_CAP_FRAMES if background else CHECKPOINT_FRAMES
        if mode == "OFF":
            frames = 0
        if frames != self._autocheckpoint:
            self._conn.execute(f"PRAGMA wal_autocheckpoint={frames}")
            self._autocheckpoint = frames

    def _sync_checkpoints(self) -> None:
        """Raise the writer from synchronous=OFF to NORMAL before it checkpoints.

        At NORMAL a checkpoint syncs the WAL before copying it and the database file after, so
        no acknowledged commit ever rests on unsynced pages alone.
        """
        if self._sync == "OFF":
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._sync = "NORMAL"

    def _begin(self) -> None:
        """BEGIN IMMEDIATE: take the write lock now, waiting (busy timeout) for other processes."""
        for attempt in range(_BUSY_RETRIES):
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                    raise
                # The busy handler already waited the full timeout; back off and try again.
                time.sleep(0.01 * (attempt + 1))
        raise BackendUnavailableError(
            f"{self._location}: another process holds the write lock for too long "
            f"(busy after {_BUSY_RETRIES} attempts)"
        )

    def close(self) -> None:
        """Refuse new jobs and wait for the commit in progress, then close the connection."""
        with self._lock:
            self._closed = True
            while self._leading:
                self._wait()
            for job in self._queue:
                job.error = StoreClosedError(f"store {self._location} is closed")
                job.done = True
            self._queue.clear()
            self._cond.notify_all()
        self._checkpointer.close()
        try:
            self._sync_checkpoints()  # closing the last connection checkpoints the WAL
        except sqlite3.Error as exc:
            log.warning("%s: could not raise synchronous before closing: %s", self._location, exc)
        self._conn.close()

    def stats(self) -> dict[str, int]:
        """Commits, jobs (jobs > commits when callers shared one), checkpoints, WAL restarts.

        `restarts_blocked` counts the restarts that gave up because a reader held the WAL;
        `wal_room` the times room was made ahead of it.
        """
        return {
            "commits": self.commits,
            "jobs": self.jobs,
            "checkpoints": self._checkpointer.checkpoints,
            "restarts": self._checkpointer.restarts,
            "restarts_blocked": self._checkpointer.restarts_blocked,
            "wal_room": 0 if self._room is None else self._room.extensions,
        }
