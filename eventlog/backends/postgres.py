"""PostgreSQL backend: one store per schema, shared by any number of processes and machines.

Every write transaction first locks the one row of the `head` table, which holds the highest
position. So positions are handed out in commit order: a reader following positions never skips
an event that commits late, and (stream, seq), id and fork checks hold until the commit. Appends
of one process go through a group commit (concurrent appends share a transaction and one WAL
flush); commits wake other processes' subscribers through LISTEN/NOTIFY. Reads take connections
from a `psycopg_pool` pool. See docs/backends/postgresql.md for the guarantees.
"""

from __future__ import annotations

import contextlib
import select
import threading
from collections.abc import Callable, Sequence
from itertools import starmap
from typing import Any

import psycopg
import psycopg_pool
from psycopg import pq

from eventlog.backends.base import (
    Conflict,
    Durability,
    ForkInfo,
    PackedBackend,
    Record,
    StreamInfo,
    seconds_option,
)
from eventlog.backends.envelope import PackedRow, pack_record, unpack_record
from eventlog.backends.group_commit import GroupQueue, Job, commit_group
from eventlog.backends.postgres_schema import (
    SCHEMA_TABLES,
    Target,
    connect,
    open_schema,
    parse_url,
)
from eventlog.backends.postgres_schema import translate_error as _translate_error
from eventlog.errors import (
    BackendUnavailableError,
    CorruptionError,
    EventlogError,
    StoreClosedError,
    UsageError,
)

_ID_CHUNK = 1000
"""Ids per `= ANY(%s)` lookup."""
_SEQ_MAX = 1 << 62
_LISTEN_SECONDS = 0.5
"""How often the listener thread looks whether its store was closed."""
_RELISTEN_SECONDS = 1.0
"""How long the listener waits before making a lost connection again."""


_NO_FLUSH_WAIT = "SET LOCAL synchronous_commit TO off"
"""What a transaction no write of which asked for fsync says first: its commit does not wait
for the WAL flush."""
_IN_TRANSACTION = (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR)
_COPY_ROWS = 16
"""A group inserting at least this many events sends them with one COPY (two round trips, but
cheaper per row on the server), fewer with one multi-row INSERT."""
_EVENT_TYPES = ("int8", "text", "text", "int8", "int8", "text", "bytea")
"""Types of an events row as COPY sends it: position, id, stream, seq, ts, type, rec."""


class _Txn:
    """One group's write transaction: its cursor and the head position (each append moves it).

    With `rows` (a group run straight), appends leave their events there, inserted together
    once every write of the group has run; otherwise each append inserts its own.
    """

    __slots__ = ("cur", "position", "rows")

    def __init__(
        self, cur: psycopg.Cursor[Any], position: int, rows: list[tuple[Any, ...]] | None
    ) -> None:
        self.cur = cur
        self.position = position
        self.rows = rows


class _Commit:
    """Whether a group's transaction has sent its COMMIT.

    A connection lost before that left nothing stored (the server rolls the transaction back);
    one lost after may have stored it.
    """

    __slots__ = ("sent",)

    def __init__(self) -> None:
        self.sent = False


class PostgresBackend(PackedBackend):
    """Events in PostgreSQL tables of one schema; any number of processes may share them."""

    format = "msgpack"
    durable = True
    gapless_positions = True  # the head row is advanced in the appending transaction
    packed_reads = True

    def __init__(
        self,
        target: Target,
        *,
        pool_size: int = 8,
        connect_timeout: float = 10.0,
        lock_timeout: float = 10.0,
    ) -> None:
        self.target = target
        self.location = target.location
        self._timeout = connect_timeout
        self._lock_timeout_ms = round(lock_timeout * 1000)
        self._closed = False
        self._lock = threading.Lock()
        """Guards the writer connection between groups, the listener, and `_closed`."""
        self._sql = _Statements(target.quoted, target.channel)
        writer = connect(target, connect_timeout)
        try:
            open_schema(writer, target)
            self._set_up_writer(writer)
        except psycopg.Error as exc:
            writer.close()
            raise _translate_error(exc, self.location) from exc
        except BaseException:
            writer.close()
            raise
        self._writer: psycopg.Connection[Any] | None = writer
        self._queue = GroupQueue()
        try:
            self._pool = psycopg_pool.ConnectionPool(
                target.conninfo,
                min_size=0,
                max_size=pool_size,
                num_workers=1,
                kwargs={"autocommit": True, "connect_timeout": max(1, round(connect_timeout))},
                timeout=connect_timeout,
                name=f"eventlog-{target.schema}",
                open=True,
            )
        except BaseException:
            writer.close()
            raise
        self._wakers: list[Callable[[], None]] = []
        self._listener: threading.Thread | None = None
        self._stopping = threading.Event()
        """Set by `close`: ends the listener's wait before it connects again."""

    # -- connections -----------------------------------------------------------------------

    def _translate(self, exc: BaseException) -> BaseException:
        if self._closed and isinstance(exc, psycopg.Error | psycopg_pool.PoolClosed):
            return self._closed_error()
        if isinstance(exc, psycopg_pool.PoolTimeout):
            return BackendUnavailableError(f"{self.location}: no connection available: {exc}")
        return _translate_error(exc, self.location)

    def _query(self, query: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of one read on a pooled connection (bytea comes back as bytes)."""
        if self._closed:
            raise self._closed_error()
        for attempt in range(2):
            try:
                with self._pool.connection() as conn:
                    return conn.execute(query.encode(), params, binary=True).fetchall()
            except psycopg.OperationalError as exc:
                # The server restarted or ended the connection: the pool drops it, checks
                # the idle ones (all may be gone), and the read, safe to repeat, runs again.
                if attempt or self._closed or not _connection_lost(exc):
                    raise self._translate(exc) from exc
                self._pool.check()
            except (psycopg.Error, psycopg_pool.PoolTimeout, psycopg_pool.PoolClosed) as exc:
                raise self._translate(exc) from exc
        raise AssertionError("unreachable")

    def _writer_conn(self) -> psycopg.Connection[Any]:
        """The writer connection, made again if the last one broke (called by the leader).

        A connection the server ended while it was idle (a restart, an idle timeout,
        `pg_terminate_backend`) is found here, before anything of the next transaction is
        sent, so that transaction runs on a new connection instead of failing.
        """
        with self._lock:
            if self._closed:
                raise self._closed_error()
            conn = self._writer
            if conn is None or conn.closed or conn.broken or _ended_while_idle(conn):
                if conn is not None:
                    conn.close()
                self._writer = conn = connect(self.target, self._timeout)
                try:
                    self._set_up_writer(conn)
                except psycopg.Error as exc:
                    conn.close()
                    raise self._translate(exc) from exc
            return conn

    def _set_up_writer(self, conn: psycopg.Connection[Any]) -> None:
        """Set the writer's session up: durable commits, bounded waits.

        Commits wait for their WAL flush, whatever the server's default (commits that need not
        wait say so with SET LOCAL); a write waits at most `lock_timeout` for another's.
        """
        conn.execute(b"SET synchronous_commit TO on")
        conn.execute(f"SET lock_timeout = {self._lock_timeout_ms}".encode())

    # -- writes: every write transaction holds the head row ---------------------------------

    def _write(self, fn: Callable[[_Txn], Any], sync: bool) -> Any:
        """Run fn in a write transaction shared with concurrent writes of this backend."""
        return self._queue.run(fn, sync, self._commit_group)

    def _commit_group(self, group: list[Job]) -> bool:
        """Run queued writes in one transaction, committed once.

        The commit waits for the WAL flush if any write asked for it. If one of several fails
        (a conflict, a value PostgreSQL refuses), the group reruns with each write in a
        savepoint, so the failure undoes only its own write.
        """
        if self._closed:  # settle what was queued before close: only close's own job passes
            for job in group:
                job.result = None
                job.error = None if job.fn is _close_mark else self._closed_error()
            return False
        sync = any(j.sync for j in group)

        def attempt(nested: bool) -> None:
            conn = self._writer_conn()
            commit = _Commit()
            try:
                self._run_group(conn, group, nested, sync, commit)
            except psycopg.Error as exc:
                raise self._translate_write(exc, commit.sent) from exc

        return commit_group(group, attempt, alone=_one_writes_own)

    def _translate_write(self, exc: psycopg.Error, commit_sent: bool) -> BaseException:
        """The eventlog error for a failed write transaction.

        A lost connection says whether the write may be stored: not if the COMMIT was never
        sent, perhaps if it was (the server may have committed before the connection ended).
        """
        if self._closed or not (
            isinstance(exc, psycopg.OperationalError) and _connection_lost(exc)
        ):
            return self._translate(exc)
        cause = f"{exc.sqlstate or type(exc).__name__}: {_first_line(exc)}"
        if commit_sent:
            return BackendUnavailableError(
                f"{self.location}: the connection to PostgreSQL was lost while committing "
                f"({cause}): the write may or may not be stored. Retrying an append with the "
                "same events (same ids and content) is safe: it stores them once or returns "
                "them as stored"
            )
        return BackendUnavailableError(
            f"{self.location}: the connection to PostgreSQL was lost before the write "
            f"committed ({cause}): nothing of it is stored; the next write connects again"
        )

    def _run_group(
        self,
        conn: psycopg.Connection[Any],
        group: list[Job],
        nested: bool,
        sync: bool,
        commit: _Commit,
    ) -> None:
        """Run the group's writes in one transaction holding the head row; commit it.

        Straight (not `nested`), the transaction takes three steps besides the writes' own
        reads: BEGIN with the head's lock and read (one round trip), the group's events in one
        insert (`_insert`), and the new head, its NOTIFY and the COMMIT (one round trip). A
        write that fails rolls all of it back, and `commit_group` reruns the group nested: each
        write in a savepoint of its own, so a failure is its own write's. `commit` records when
        the COMMIT is sent.
        """
        if nested:
            self._run_nested(conn, group, sync, commit)
            return
        sql = self._sql
        try:
            with conn.cursor() as text, conn.cursor(binary=True) as cur:
                # Several statements in one simple query: one round trip (text results).
                text.execute(sql.begin_sync if sync else sql.begin_async)
                while text.nextset():  # to the last statement's result: the head's row
                    pass
                row = text.fetchone()
                txn = _Txn(cur, self._head_of(row), [])
                start = txn.position
                for job in group:
                    job.error = None
                    job.result = job.fn(txn)
                _insert(cur, sql, txn.rows or [])
                commit.sent = True
                if txn.position != start:
                    update, notify = sql.commit_head
                    text.execute(b"%b%d%b" % (update, txn.position, notify))
                else:
                    text.execute(b"COMMIT")
        except BaseException:
            if conn.info.transaction_status in _IN_TRANSACTION:
                with contextlib.suppress(psycopg.Error):  # a lost connection is made again
                    conn.execute(b"ROLLBACK")
            raise

    def _run_nested(
        self, conn: psycopg.Connection[Any], group: list[Job], sync: bool, commit: _Commit
    ) -> None:
        """Run the group with each write in a savepoint: a failure undoes only its own write."""
        sql = self._sql
        with conn.transaction(), conn.cursor(binary=True) as cur:
            if not sync:
                cur.execute(_NO_FLUSH_WAIT.encode())
            txn = _Txn(cur, self._head_of(cur.execute(sql.lock_head).fetchone()), None)
            start = txn.position
            for job in group:
                job.result = job.error = None
                before = txn.position
                try:
                    with conn.transaction():
                        job.result = job.fn(txn)
                except psycopg.Error as exc:
                    txn.position = before
                    job.error = self._translate(exc)
                except Exception as exc:
                    txn.position = before
                    job.error = exc
            if txn.position != start:
                cur.execute(sql.set_head, (txn.position,))
                cur.execute(sql.notify)
            commit.sent = True  # leaving the block commits

    def _head_of(self, row: tuple[Any, ...] | None) -> int:
        """The head position the locking read returned; CorruptionError if the row is gone."""
        if row is None:
            raise CorruptionError("the head row is missing", location=self.location)
        return int(row[0])

    def append(self, records: Sequence[Record], durability: Durability) -> list[int]:
        """Insert one stream's records in one transaction; return their positions."""
        if not records:
            return []
        first = records[0]
        rows = [(r.id, r.stream, r.seq, r.ts, r.type, pack_record(r)) for r in records]
        sql = self._sql

        def work(txn: _Txn) -> list[int]:
            cur = txn.cur
            if first.seq == 1 and cur.execute(sql.forked, (first.stream,)).fetchone():
                raise Conflict("seq", f"{first.stream!r} is a fork: seq 1 is its parent's")
            base = txn.position
            placed = [(base + i, *row) for i, row in enumerate(rows, 1)]
            if txn.rows is None:
                _insert(cur, sql, placed)
            else:
                txn.rows += placed
            txn.position = base + len(rows)
            return list(range(base + 1, txn.position + 1))

        positions: list[int] = self._write(work, durability == Durability.FSYNC)
        return positions

    def create_fork(self, fork: ForkInfo) -> None:
        """Insert a fork entry, unless the stream has events or is a fork already."""
        sql = self._sql

        def work(txn: _Txn) -> None:
            cur = txn.cur
            if cur.execute(sql.has_events, (fork.stream,)).fetchone():
                raise Conflict("fork", f"{fork.stream!r} has events")
            cur.execute(sql.insert_fork, (fork.stream, fork.parent, fork.at_seq, fork.ts))
            cur.execute(sql.notify)  # wakes other processes' followers waiting for the stream

        self._write(work, True)

    def put_blob(self, key: str, value: bytes) -> None:
        """Set a store-level value, flushed to the WAL before returning."""
        data = bytes(value)
        self._write(lambda txn: txn.cur.execute(self._sql.put_blob, (key, data)), True)

    def save_snapshot(self, stream: str, name: str, version: int, seq: int, data: bytes) -> None:
        """Store a snapshot (a cache that can be rebuilt: its commit does not wait for a flush)."""
        params = (stream, name, version, seq, bytes(data))
        self._write(lambda txn: txn.cur.execute(self._sql.put_snapshot, params), False)

    def delete_snapshot(self, stream: str, name: str, version: int, seq: int) -> None:
        """Drop one snapshot."""
        params = (stream, name, version, seq)
        self._write(lambda txn: txn.cur.execute(self._sql.delete_snapshot, params), False)

    def drop_snapshots(self, stream: str) -> int:
        """Remove every snapshot of a stream (committed with the WAL flushed)."""

        def work(txn: _Txn) -> int:
            txn.cur.execute(self._sql.drop_snapshots, (stream,))
            return txn.cur.rowcount

        dropped: int = self._write(work, True)
        return dropped

    # -- reads -----------------------------------------------------------------------------

    def read_packed(
        self,
        stream: str,
        first: int,
        last: int | None,
        *,
        backwards: bool = False,
        limit: int | None = None,
    ) -> list[PackedRow]:
        """Own packed rows with first <= seq <= last through the (stream, seq) index."""
        query = self._sql.range_desc if backwards else self._sql.range_asc
        upper = _SEQ_MAX if last is None else last
        return self._query(query, (stream, first, upper, limit))

    def read_all_packed(self, after: int, limit: int) -> list[PackedRow]:
        """Packed rows after a position, in position order."""
        return self._query(self._sql.after, (after, limit))

    def last(self, stream: str) -> Record | None:
        """The stream's own record with the highest seq."""
        rows = self.read_packed(stream, 0, None, backwards=True, limit=1)
        return self._records(rows)[0] if rows else None

    def _records(self, rows: list[PackedRow]) -> list[Record]:
        """Records of packed rows; a damaged one is a CorruptionError saying where."""
        location = self.location
        return [unpack_record(position, stream, rec, location) for position, stream, rec in rows]

    def get_by_ids(self, ids: Sequence[str]) -> dict[str, Record]:
        """Records for whichever ids exist, via the unique id index."""
        found: dict[str, Record] = {}
        for start in range(0, len(ids), _ID_CHUNK):
            chunk = list(ids[start : start + _ID_CHUNK])
            for rec in self._records(self._query(self._sql.by_ids, (chunk,))):
                found[rec.id] = rec
        return found

    def head_position(self) -> int:
        """The highest committed position."""
        rows = self._query(self._sql.head)
        if not rows:
            raise CorruptionError("the head row is missing", location=self.location)
        return int(rows[0][0])

    def list_streams(self) -> list[StreamInfo]:
        """Streams with own records (found by skipping through the index) or fork entries."""
        own = {name: (seq, ts) for name, seq, ts in self._query(self._sql.streams)}
        forks = {f.stream: f for f in self.list_forks()}
        return [
            StreamInfo.of(name, own.get(name), forks.get(name))
            for name in sorted(own.keys() | forks.keys())
        ]

    def get_fork(self, stream: str) -> ForkInfo | None:
        """The fork entry of a stream."""
        rows = self._query(self._sql.fork, (stream,))
        return ForkInfo(*rows[0]) if rows else None

    def list_forks(self, parent: str | None = None) -> list[ForkInfo]:
        """Fork entries sorted by stream name."""
        if parent is None:
            return list(starmap(ForkInfo, self._query(self._sql.forks)))
        return list(starmap(ForkInfo, self._query(self._sql.forks_of, (parent,))))

    def get_blob(self, key: str) -> bytes | None:
        """A store-level value."""
        rows = self._query(self._sql.get_blob, (key,))
        return bytes(rows[0][0]) if rows else None

    def load_snapshot(
        self, stream: str, name: str, version: int, max_seq: int | None
    ) -> tuple[int, bytes] | None:
        """The newest snapshot at or below max_seq."""
        upper = _SEQ_MAX if max_seq is None else max_seq
        rows = self._query(self._sql.get_snapshot, (stream, name, version, upper))
        return (int(rows[0][0]), bytes(rows[0][1])) if rows else None

    def snapshot_seqs(self, stream: str, name: str, version: int) -> list[int]:
        """Seqs of the stored snapshots, ascending (through the primary key)."""
        rows = self._query(self._sql.snapshot_seqs, (stream, name, version))
        return [int(r[0]) for r in rows]

    # -- other processes' commits -----------------------------------------------------------

    def watch_remote_commits(self, wake: Callable[[], None]) -> None:
        """Call `wake()` when any connection commits to the store (LISTEN/NOTIFY).

        The listening connection and its thread start with the first watcher.
        """
        with self._lock:
            if self._closed:
                return
            self._wakers.append(wake)
            if self._listener is not None:
                return
            conn = self._listening()
            self._listener = threading.Thread(
                target=self._listen, args=(conn,), name="eventlog-pg-listen", daemon=True
            )
            self._listener.start()

    def _listening(self) -> psycopg.Connection[Any]:
        """A new connection listening on the store's channel."""
        conn = connect(self.target, self._timeout)
        try:
            conn.execute(f"LISTEN {self.target.channel}".encode())
        except psycopg.Error as exc:
            conn.close()
            raise self._translate(exc) from exc
        return conn

    def _listen(self, conn: psycopg.Connection[Any] | None) -> None:
        """Wake the watchers at each notification until the store closes.

        A lost connection is made again (every `_RELISTEN_SECONDS` until it works); the
        watchers are woken once it is back, for the commits missed meanwhile, and poll until
        then.
        """
        try:
            while not self._closed:
                try:
                    if conn is None:
                        conn = self._listening()
                        self._wake_watchers()
                    got = False
                    for _ in conn.notifies(timeout=_LISTEN_SECONDS, stop_after=1):
                        got = True
                    if got:
                        self._wake_watchers()
                except (psycopg.Error, EventlogError):
                    if conn is not None:
                        conn.close()
                        conn = None
                    self._stopping.wait(_RELISTEN_SECONDS)
        finally:
            if conn is not None:
                conn.close()

    def _wake_watchers(self) -> None:
        if not self._closed:
            for wake in list(self._wakers):
                wake()

    # -- lifecycle -------------------------------------------------------------------------

    def server_bytes(self) -> int | None:
        """What the store's tables take on the server, indexes and TOAST included."""
        rows = self._query(self._sql.size, (self.target.schema,))
        return int(rows[0][0] or 0) if rows else 0

    def stats(self) -> dict[str, int]:
        """Writer counters: commits and jobs (appends share commits under group commit)."""
        return {"commits": self._queue.commits, "jobs": self._queue.jobs}

    def close(self) -> None:
        """Finish the commit in progress, then close every connection."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            listener = self._listener
        self._stopping.set()
        try:
            # A leader commits without holding `_lock`: wait for its group to end. Whoever
            # leads the group holding `_close_mark` settles it (`_commit_group` on a closed
            # store fails every other job queued meanwhile with StoreClosedError).
            with contextlib.suppress(StoreClosedError):  # a leader found it closed first
                self._queue.run(_close_mark, False, self._commit_group)
        finally:
            with self._lock:
                writer, self._writer = self._writer, None
            if writer is not None:
                if listener is not None:  # its wait ends at once, not at its next timeout
                    with contextlib.suppress(psycopg.Error):
                        writer.execute(self._sql.notify)
                writer.close()
            self._pool.close()
            if listener is not None:
                listener.join(2 * _LISTEN_SECONDS + 1)

    def _closed_error(self) -> StoreClosedError:
        return StoreClosedError(f"store {self.location} is closed")

    @classmethod
    def exists_at_url(cls, url: str, path: str, options: dict[str, str]) -> bool:
        """Whether the URL's schema holds a store (False: opening creates one)."""
        target, ours = parse_url(url, options)
        timeout = seconds_option("connect_timeout", ours.get("connect_timeout", "10"))
        conn = connect(target, timeout)
        try:
            row = conn.execute(
                f"SELECT count(*) FROM ({SCHEMA_TABLES}) t".encode(), (target.schema,)
            ).fetchone()
        except psycopg.Error as exc:
            raise _translate_error(exc, target.location) from exc
        finally:
            conn.close()
        return bool(row and row[0])

    @classmethod
    def from_url(cls, url: str, path: str, options: dict[str, str]) -> PostgresBackend:
        """Open `postgresql://user@host:port/db?schema=NAME` (docs/backends/postgresql.md)."""
        target, ours = parse_url(url, options)
        pool_size = ours.get("pool_size", "8")
        if not pool_size.isdigit() or not 1 <= int(pool_size) <= 1000:
            raise UsageError(
                f"option pool_size must be an integer from 1 to 1000, got {pool_size!r}"
            )
        timeout = seconds_option("connect_timeout", ours.get("connect_timeout", "10"))
        lock_timeout = seconds_option("lock_timeout", ours.get("lock_timeout", "10"))
        return cls(
            target, pool_size=int(pool_size), connect_timeout=timeout, lock_timeout=lock_timeout
        )


def _close_mark(txn: object) -> None:
    """The job `close` queues to wait for the group in progress (it writes nothing)."""


def _insert(cur: psycopg.Cursor[Any], sql: _Statements, rows: list[tuple[Any, ...]]) -> None:
    """Insert events rows: with COPY when there are many, else with one multi-row INSERT.

    Not `executemany`: its implicit pipeline, left by a unique violation while later rows are
    still in flight, has psycopg log "error ignored terminating Pipeline" to stderr.
    """
    if len(rows) >= _COPY_ROWS:
        with cur.copy(sql.copy_events) as copy:
            copy.set_types(list(_EVENT_TYPES))
            for row in rows:
                copy.write_row(row)
    elif rows:
        cur.execute(sql.inserts[len(rows)], [value for row in rows for value in row])


def _ended_while_idle(conn: psycopg.Connection[Any]) -> bool:
    """Whether the server sent anything to an idle connection: its end (an error, then EOF).

    The writer asks nothing between transactions (it LISTENs to nothing), so input waiting
    there means the server ended it; replacing it then is safe, as nothing was sent yet.
    """
    fd = conn.fileno()
    if hasattr(select, "poll"):  # no limit on descriptor numbers, unlike select()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])


def _first_line(exc: BaseException) -> str:
    """The first line of an error's message (libpq adds lines of advice)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _one_writes_own(exc: Exception) -> bool:
    """Whether an error of a group's transaction may be one write's own.

    If so, the group reruns with each write in a savepoint; anything but the connection or the
    store going away may be.
    """
    return not isinstance(exc, BackendUnavailableError | StoreClosedError)


def _connection_lost(exc: psycopg.OperationalError) -> bool:
    """Whether an error says the connection is gone (not a query's own failure)."""
    state = exc.sqlstate or ""
    return not state or state.startswith(("08", "57P"))


class _Statements:
    """The SQL of one store, with its schema name filled in (encoded once)."""

    def __init__(self, s: str, channel: str) -> None:
        packed = f"SELECT position, stream, rec FROM {s}.events"
        lock_head = f"SELECT position FROM {s}.head FOR UPDATE"
        self.lock_head = lock_head.encode()
        self.begin_sync = f"BEGIN; {lock_head}".encode()
        self.begin_async = f"BEGIN; {_NO_FLUSH_WAIT}; {lock_head}".encode()
        self.commit_head = (
            f"UPDATE {s}.head SET position = ".encode(),
            f"; NOTIFY {channel}; COMMIT".encode(),
        )
        """The statements that end a transaction that appended, around the new head."""
        self.copy_events = (
            f"COPY {s}.events (position, id, stream, seq, ts, type, rec) FROM STDIN (FORMAT BINARY)"
        ).encode()
        self.set_head = f"UPDATE {s}.head SET position = %s".encode()
        self.head = f"SELECT position FROM {s}.head"
        self.size = (
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'"
        )
        self.notify = f"NOTIFY {channel}".encode()
        row = "(%s, %s, %s, %s, %s, %s, %s)"
        self.inserts = (b"",) + tuple(
            f"INSERT INTO {s}.events (position, id, stream, seq, ts, type, rec) VALUES "
            f"{', '.join([row] * n)}".encode()
            for n in range(1, _COPY_ROWS)
        )
        """The INSERT of n events rows at index n (from 1 to `_COPY_ROWS` - 1)."""
        self.forked = f"SELECT 1 FROM {s}.forks WHERE stream = %s".encode()
        self.has_events = f"SELECT 1 FROM {s}.events WHERE stream = %s LIMIT 1".encode()
        self.insert_fork = (
            f"INSERT INTO {s}.forks (stream, parent, at_seq, ts) VALUES (%s, %s, %s, %s)"
        ).encode()
        self.range_asc = (
            f"{packed} WHERE stream = %s AND seq >= %s AND seq <= %s ORDER BY seq LIMIT %s"
        )
        self.range_desc = (
            f"{packed} WHERE stream = %s AND seq >= %s AND seq <= %s ORDER BY seq DESC LIMIT %s"
        )
        self.after = f"{packed} WHERE position > %s ORDER BY position LIMIT %s"
        self.by_ids = f"{packed} WHERE id = ANY(%s)"
        self.streams = f"""
            WITH RECURSIVE names(stream) AS (
                (SELECT stream FROM {s}.events ORDER BY stream LIMIT 1)
                UNION ALL
                SELECT (SELECT e.stream FROM {s}.events e WHERE e.stream > n.stream
                        ORDER BY e.stream LIMIT 1)
                FROM names n WHERE n.stream IS NOT NULL
            )
            SELECT n.stream, l.seq, l.ts FROM names n CROSS JOIN LATERAL (
                SELECT seq, ts FROM {s}.events e WHERE e.stream = n.stream
                ORDER BY seq DESC LIMIT 1
            ) l WHERE n.stream IS NOT NULL"""
        forks = f"SELECT stream, parent, at_seq, ts FROM {s}.forks"
        self.fork = f"{forks} WHERE stream = %s"
        self.forks = f"{forks} ORDER BY stream"
        self.forks_of = f"{forks} WHERE parent = %s ORDER BY stream"
        self.get_blob = f"SELECT value FROM {s}.blobs WHERE key = %s"
        self.put_blob = (
            f"INSERT INTO {s}.blobs (key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
        ).encode()
        self.put_snapshot = (
            f"INSERT INTO {s}.snapshots (stream, name, version, seq, data) "
            "VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (stream, name, version, seq) DO UPDATE SET data = EXCLUDED.data"
        ).encode()
        self.delete_snapshot = (
            f"DELETE FROM {s}.snapshots WHERE stream = %s AND name = %s AND version = %s "
            "AND seq = %s"
        ).encode()
        self.drop_snapshots = f"DELETE FROM {s}.snapshots WHERE stream = %s".encode()
        self.get_snapshot = (
            f"SELECT seq, data FROM {s}.snapshots WHERE stream = %s AND name = %s "
            "AND version = %s AND seq <= %s ORDER BY seq DESC LIMIT 1"
        )
        self.snapshot_seqs = (
            f"SELECT seq FROM {s}.snapshots WHERE stream = %s AND name = %s AND version = %s "
            "ORDER BY seq"
        )
