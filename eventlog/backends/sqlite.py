"""SQLite backend, the embedded default: one row per event in a WAL-mode file.

Uniqueness of (stream, seq) and of ids is enforced by the schema; the positions of a transaction
are assigned inside it while it holds SQLite's write lock, so they commit in position order and a
reader following positions never skips one. Appends go through a group-commit writer (see
`sqlite_writer`); reads take a connection from a small pool of idle ones, which WAL lets run
beside the writer.
Full-text search over event text (FTS5) is chosen when a store is created (`?search=on`).
A WAL-mode file this process cannot write is read without creating `-wal` or `-shm` files
while none exists (`SQLiteBackend._query_read_only`).
See docs/backends/sqlite.md for the guarantees.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from itertools import starmap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eventlog.backends.base import (
    Conflict,
    Durability,
    ForkInfo,
    PackedBackend,
    Record,
    SearchHit,
    Segment,
    StreamInfo,
    seconds_option,
)
from eventlog.backends.envelope import PackedRow, pack_record, unpack_record
from eventlog.backends.sqlite_schema import (
    FTS_TABLE,
    SNAPSHOT_TRIES,
    TEXT_TABLE,
    database_path,
    file_state,
    in_wal_mode,
    open_schema,
    read_only,
    snapshot_uri,
)
from eventlog.backends.sqlite_writer import GroupWriter
from eventlog.errors import (
    BackendUnavailableError,
    CorruptionError,
    StoreClosedError,
    UsageError,
    ValidationError,
)

if TYPE_CHECKING:
    from eventlog.codec import Codec
    from eventlog.events import RecordedEvent

_SELECT = "SELECT position, stream, rec FROM events"
"""A packed row (see eventlog.backends.envelope): three columns instead of one per field."""
_SELECT_OWN = "SELECT position, rec FROM events"
"""A stream row (`StreamRow`): a packed row of a stream the reader names."""
_INSERT = "INSERT INTO events (id, stream, seq, ts, type, rec) VALUES (?, ?, ?, ?, ?, ?)"
_FORKED = "SELECT 1 FROM forks WHERE stream = ?"
_FORK_TYPES = (str, str, int, int)
"""Types of a forks row: stream, parent, at_seq, ts."""
_INSERT_TEXT = f"INSERT INTO {TEXT_TABLE} (position, text) VALUES (?, ?)"
_STREAM_NAMES = """
WITH RECURSIVE names(stream) AS (
    SELECT min(stream) FROM events
    UNION ALL
    SELECT (SELECT min(stream) FROM events WHERE stream > names.stream)
    FROM names WHERE names.stream IS NOT NULL
)
SELECT stream,
    (SELECT seq FROM events e WHERE e.stream = names.stream ORDER BY seq DESC LIMIT 1),
    (SELECT ts FROM events e WHERE e.stream = names.stream ORDER BY seq DESC LIMIT 1)
FROM names WHERE stream IS NOT NULL
"""
_SEARCH = f"""
SELECT e.stream, e.seq, e.id, e.position,
    snippet({FTS_TABLE}, 0, '[', ']', '…', 16), bm25({FTS_TABLE})
FROM {FTS_TABLE} JOIN events e ON e.position = {FTS_TABLE}.rowid
WHERE {FTS_TABLE} MATCH ? AND {{within}}
ORDER BY bm25({FTS_TABLE}), e.position DESC LIMIT ?
"""
_SEGMENTS_PER_QUERY = 200
"""Fork segments searched in one query (each is one OR'd clause; SQLite's depth limit is 1000)."""
_ID_CHUNK = 500
"""Ids per `IN (...)` query (SQLite's default limit on parameters is 32766; keep them short)."""
_OPTIONS = {"search", "busy_timeout", "check"}
_MMAP_BYTES = 256 * 1024 * 1024
_IDLE_READERS = 16
"""Idle reader connections kept for the next read; one returned beyond these is closed. (One
per thread, kept until `close`, leaked two file descriptors per thread that ever read.)"""
_ROW_BYTES = 120
"""A row's bytes besides its packed record (id, stream, seq, ts, type, index entries)."""
_TRUE = {"on", "true", "1", "yes"}
_FALSE = {"off", "false", "0", "no"}


# -- error translation: the one place sqlite3 errors become eventlog errors -------------------

_QUOTED_QUERY = 200
"""Characters of a refused search query quoted in its error."""


def _bad_query(query: str | None, message: str) -> str:
    """A refused FTS5 query's error: the query (shortened), SQLite's reason, and the usual fix."""
    query = query or ""  # a search always has one (the rule is for searches only)
    shown = repr(query[:_QUOTED_QUERY])
    if len(query) > _QUOTED_QUERY:
        shown += f"... ({len(query):,} characters)"
    return (
        f"{shown} is not a valid search query: {message} (FTS5 syntax: put words with "
        'punctuation such as - . : \' in double quotes, e.g. "setup.py")'
    )


Build = Callable[[str, str, "str | None"], BaseException]

ERROR_RULES: tuple[tuple[str, str, bool, Build], ...] = (
    # (SQLite error name prefix, message fragment, only for search queries, build(msg, loc, q))
    ("SQLITE_CONSTRAINT", "events.stream, events.seq", False, lambda m, loc, q: Conflict("seq", m)),
    ("SQLITE_CONSTRAINT", "events.id", False, lambda m, loc, q: Conflict("id", m)),
    ("SQLITE_CONSTRAINT", "forks.stream", False, lambda m, loc, q: Conflict("fork", m)),
    ("SQLITE_CONSTRAINT", "fork of a stream", False, lambda m, loc, q: Conflict("fork", m)),
    (
        "SQLITE_ERROR",
        "",
        True,
        lambda m, loc, q: ValidationError(_bad_query(q, m), field="query"),
    ),
    (
        "SQLITE_BUSY",
        "",
        False,
        lambda m, loc, q: BackendUnavailableError(f"{loc}: locked by another connection ({m})"),
    ),
    (
        "SQLITE_LOCKED",
        "",
        False,
        lambda m, loc, q: BackendUnavailableError(f"{loc}: locked by another connection ({m})"),
    ),
    ("SQLITE_CORRUPT", "", False, lambda m, loc, q: CorruptionError(m, location=loc)),
    (  # a value edited into a column as text that is not UTF-8 (Python's driver says so)
        "",
        "Could not decode to UTF-8",
        False,
        lambda m, loc, q: CorruptionError(f"a stored value is damaged: {m}", location=loc),
    ),
    ("SQLITE_NOTADB", "", False, lambda m, loc, q: CorruptionError(m, location=loc)),
    (
        "SQLITE_FULL",
        "",
        False,
        lambda m, loc, q: BackendUnavailableError(f"{loc}: disk full, nothing written ({m})"),
    ),
    ("", "closed database", False, lambda m, loc, q: StoreClosedError(f"store {loc} is closed")),
)
"""Checked in order; the first match decides. Anything else is BackendUnavailableError."""


def translate_error(exc: BaseException, location: str, query: str | None = None) -> BaseException:
    """The eventlog error (or backend Conflict) for a sqlite3 error, naming the file."""
    if not isinstance(exc, sqlite3.Error):
        return exc
    name = getattr(exc, "sqlite_errorname", None) or ""
    message = str(exc)
    for prefix, fragment, search_only, build in ERROR_RULES:
        if search_only and query is None:
            continue
        if name.startswith(prefix) and fragment in message:
            error = build(message, location, query)
            error.__cause__ = exc
            return error
    error = BackendUnavailableError(
        f"{location}: SQLite error {name or type(exc).__name__}: {message}"
    )
    error.__cause__ = exc
    return error


# -- the backend --------------------------------------------------------------------------------


class SQLiteBackend(PackedBackend):
    """Events in a SQLite file (WAL), shared safely by threads and processes."""

    format = "msgpack"
    durable = True
    gapless_positions = True  # max(position) + 1 under the write lock; rollbacks reuse them

    def __init__(
        self,
        path: str | Path,
        *,
        search: bool | None = None,
        busy_timeout: float = 10.0,
        check: bool = False,
    ) -> None:
        self.path = Path(path)
        self.location = str(self.path)
        self.busy_timeout = busy_timeout
        has_search = open_schema(self.path, search=search, check=check)
        self.search_enabled = has_search
        # The base declares wants_text per class; whether this file has an index is only known
        # once it is open, so it is set on the instance.
        vars(self)["wants_text"] = has_search
        self._closed = False
        self._lock = threading.Lock()
        self._reading = 0
        """Queries in flight on reader connections (each holds one taken from `_idle`)."""
        self._reads_done = threading.Condition(self._lock)
        self._idle: list[sqlite3.Connection] = []
        """Reader connections no query holds, the most recently used last."""
        read_only_file = read_only(self.path)  # SQLite opens a file this process cannot write
        self._may_snapshot = read_only_file and in_wal_mode(self.path)
        """Readers read the file as an immutable snapshot while `file_state` allows it, so as to
        create no files beside it (`_query_read_only`)."""
        self._snapshots: dict[sqlite3.Connection, tuple[int, ...]] = {}
        """Reader connections reading the file as an immutable snapshot -> its state then."""
        # A read-only file: every write fails (SQLITE_READONLY) on any connection, and an
        # immutable one fails without first creating -wal and -shm files to read the file. No
        # room is made ahead of the WAL: that wrote 1 MiB of zeros into a live writer's -wal
        # (if this process could open it) before the refused write failed.
        self._writer = GroupWriter(
            self._connect(snapshot=read_only_file),
            self._translate,
            self.location,
            self._connect,
            None if read_only_file else f"{self.path}-wal",
        )

    def _connect(self, *, snapshot: bool = False) -> sqlite3.Connection:
        """A connection to the file; `snapshot`: an immutable read-only one (`file_state`)."""
        try:
            conn = sqlite3.connect(
                snapshot_uri(self.path) if snapshot else self.path,
                uri=snapshot,
                isolation_level=None,
                check_same_thread=False,
                timeout=self.busy_timeout,
            )
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc
        return conn

    def _translate(self, exc: BaseException) -> BaseException:
        return translate_error(exc, self.location)

    def _new_reader(self, *, locked: bool = False) -> sqlite3.Connection:
        """A reader connection: a snapshot of a read-only file if it allows (unless `locked`)."""
        state = file_state(self.path) if self._may_snapshot and not locked else None
        conn = self._connect(snapshot=state is not None)
        try:
            conn.execute("PRAGMA query_only=ON")
            # Reading pages through a memory map saves a copy and a syscall per page. Not for
            # a snapshot, which takes no lock: a file another process shrinks under a map
            # would kill this one with SIGBUS, where a read() just comes up short.
            if state is None:
                conn.execute(f"PRAGMA mmap_size={_MMAP_BYTES}")
        except BaseException:
            conn.close()
            raise
        if state is not None:
            self._snapshots[conn] = state
        return conn

    def _query(
        self, sql: str, params: Sequence[Any] = (), *, search: str | None = None
    ) -> list[Any]:
        """Rows of a read on a pooled reader connection (`search`: the query it runs)."""
        if self._may_snapshot:
            return self._query_read_only(sql, params, search)
        conn = self._take_reader()
        try:
            rows: list[Any] = conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            self._return_reader(conn)
            raise translate_error(exc, self.location, search) from exc
        except BaseException:  # interrupted mid-query: its statement may still hold a snapshot
            self._return_reader(conn, keep=False)
            raise
        self._return_reader(conn)
        return rows

    def _query_read_only(self, sql: str, params: Sequence[Any], search: str | None) -> list[Any]:
        """`_query` on a WAL-mode file this process cannot write, creating no files if it can.

        SQLite's read-only connection to a WAL-mode file creates `-wal` and `-shm` files beside
        it if they are missing, and cannot remove them. While no `-wal` exists, no connection is
        open on the file and every commit is in it: readers then read it as an immutable
        snapshot, which creates nothing and takes no locks (`file_state`). A read through a
        snapshot counts only if the file's state (identity, size, times; no `-wal` or
        `-journal`) is the same after it: else another process wrote the file meanwhile, the
        read (and the snapshot's page cache) may be stale or torn, and it is read again,
        through SQLite's locks if a `-wal` exists by then, or through a snapshot of the file as
        it is now. After `SNAPSHOT_TRIES` snapshots the file kept changing under, it is read
        through SQLite's locks.
        """
        for attempt in range(SNAPSHOT_TRIES + 1):
            conn = self._take_reader(locked=attempt == SNAPSHOT_TRIES)
            state = self._snapshots.get(conn)
            try:
                rows: list[Any] = conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                if state is not None and file_state(self.path) != state:
                    self._drop_snapshots(conn)
                    continue
                self._return_reader(conn)
                raise translate_error(exc, self.location, search) from exc
            except BaseException:
                self._return_reader(conn, keep=False)
                raise
            if state is not None and file_state(self.path) != state:
                self._drop_snapshots(conn)
                continue
            self._return_reader(conn)
            return rows
        raise AssertionError("unreachable: the last attempt reads through SQLite's locks")

    def _drop_snapshots(self, conn: sqlite3.Connection) -> None:
        """Close `conn` and the idle snapshots: the file changed since they were taken."""
        with self._lock:
            stale = [c for c in self._idle if c in self._snapshots]
            self._idle = [c for c in self._idle if c not in self._snapshots]
        for old in stale:
            self._snapshots.pop(old, None)
            old.close()
        self._return_reader(conn, keep=False)

    def _take_reader(self, *, locked: bool = False) -> sqlite3.Connection:
        """An idle reader connection (a new one if none is idle), counted as a query in flight.

        `locked`: a new connection through SQLite's locks (not a snapshot, `_query_read_only`).
        `close` waits for the queries in flight (closing a connection in use crashes).
        """
        with self._lock:
            if self._closed:
                raise StoreClosedError(f"store {self.location} is closed")
            self._reading += 1
            if self._idle and not locked:
                return self._idle.pop()
        try:
            return self._new_reader(locked=locked)
        except BaseException:
            self._return_reader(None)
            raise

    def _return_reader(self, conn: sqlite3.Connection | None, *, keep: bool = True) -> None:
        """Give a connection back to the pool (or close it) and end the query's count.

        It is closed if `keep` is false or enough are idle. Once the store is closed, `close`
        closes whatever is idle.
        """
        with self._lock:
            if conn is not None and keep and len(self._idle) < _IDLE_READERS:
                self._idle.append(conn)
                conn = None
            self._reading -= 1
            if self._closed and not self._reading:
                self._reads_done.notify_all()
        if conn is not None:
            self._snapshots.pop(conn, None)
            conn.close()

    def _write(self, work: Callable[[sqlite3.Connection], Any], durability: Durability) -> Any:
        return self._writer.run(work, durability)

    # -- append ----------------------------------------------------------------------------

    def append(self, records: Sequence[Record], durability: Durability) -> list[int]:
        """Insert records in one transaction (shared with concurrent appends); return positions."""
        if not records:
            return []
        search = self.search_enabled

        # Built before taking the write lock, so the transaction only runs SQL.
        rows = [(r.id, r.stream, r.seq, r.ts, r.type, pack_record(r)) for r in records]
        texts = [(i, r.text) for i, r in enumerate(records, 1) if r.text] if search else []
        first = records[0]

        def work(conn: sqlite3.Connection) -> list[int]:
            # Inside BEGIN IMMEDIATE: no other connection can commit until this one does, so
            # the fork check and the positions hold until the commit.
            if first.seq == 1 and conn.execute(_FORKED, (first.stream,)).fetchone():
                raise Conflict("seq", f"{first.stream!r} is a fork: seq 1 is its parent's")
            # position is the rowid: SQLite gives a row max(rowid) + 1, and the write lock held
            # since BEGIN IMMEDIATE makes one append's positions consecutive.
            if len(rows) == 1:
                last = conn.execute(_INSERT, rows[0]).lastrowid
            else:
                conn.executemany(_INSERT, rows)
                last = conn.execute("SELECT last_insert_rowid()").fetchone()[0]
            assert last is not None
            head = last - len(rows)
            if texts:
                conn.executemany(_INSERT_TEXT, [(head + i, text) for i, text in texts])
            return list(range(head + 1, last + 1))

        # One row of a stream past its first event is one INSERT: atomic on its own.
        alone = len(rows) == 1 and not texts and first.seq != 1
        size = sum(len(row[5]) for row in rows) + _ROW_BYTES * len(rows)
        positions: list[int] = self._writer.run(work, durability, one_statement=alone, size=size)
        return positions

    # -- reads -----------------------------------------------------------------------------

    packed_reads = True

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
        return self._range(_SELECT, stream, first, last, backwards, limit)

    def read_events(
        self,
        stream: str,
        first: int,
        last: int | None,
        codec: Codec,
        *,
        backwards: bool = False,
        limit: int | None = None,
    ) -> list[RecordedEvent]:
        """`read_packed` decoded, without fetching the stream's name for every row."""
        rows = self._range(_SELECT_OWN, stream, first, last, backwards, limit)
        return codec.to_events(rows, self.location, stream)

    def _range(
        self,
        select: str,
        stream: str,
        first: int,
        last: int | None,
        backwards: bool,
        limit: int | None,
    ) -> list[Any]:
        """Rows of `select` with first <= seq <= last through the (stream, seq) index."""
        order = "DESC" if backwards else "ASC"
        upper = (1 << 62) if last is None else last
        return self._query(
            f"{select} WHERE stream = ? AND seq >= ? AND seq <= ? ORDER BY seq {order} LIMIT ?",
            (stream, first, upper, -1 if limit is None else limit),
        )

    def read_all_packed(self, after: int, limit: int) -> list[PackedRow]:
        """Packed rows after a position, in position (rowid) order."""
        return self._query(
            f"{_SELECT} WHERE position > ? ORDER BY position LIMIT ?", (after, limit)
        )

    def last(self, stream: str) -> Record | None:
        """The stream's own record with the highest seq."""
        rows = self._query(f"{_SELECT} WHERE stream = ? ORDER BY seq DESC LIMIT 1", (stream,))
        return self._records(rows)[0] if rows else None

    def _records(self, rows: list[PackedRow]) -> list[Record]:
        """Records of packed rows; a damaged one is a CorruptionError saying where."""
        location = self.location
        try:
            return [
                unpack_record(position, stream, rec, location) for position, stream, rec in rows
            ]
        except CorruptionError as exc:
            raise self._with_seq(exc, rows) from exc.__cause__

    def _with_seq(self, exc: CorruptionError, rows: list[PackedRow]) -> CorruptionError:
        """`exc` naming the seq of the damaged row too (its `seq` column is outside the record)."""
        for position, stream, rec in rows:
            try:
                unpack_record(position, stream, rec)
            except CorruptionError as error:
                found = self._query("SELECT seq FROM events WHERE position = ?", (position,))
                if found and isinstance(seq := found[0][0], int):
                    return CorruptionError(
                        error.message, stream=stream, seq=seq, location=self.location
                    )
                break
        return exc

    def get_by_ids(self, ids: Sequence[str]) -> dict[str, Record]:
        """Records for whichever ids exist, via the unique id index."""
        found: dict[str, Record] = {}
        for start in range(0, len(ids), _ID_CHUNK):
            chunk = list(ids[start : start + _ID_CHUNK])
            marks = ", ".join("?" * len(chunk))
            for rec in self._records(self._query(f"{_SELECT} WHERE id IN ({marks})", chunk)):
                found[rec.id] = rec
        return found

    def head_position(self) -> int:
        """The highest committed position."""
        rows = self._query("SELECT max(position) FROM events")
        return int(rows[0][0] or 0)

    def list_streams(self) -> list[StreamInfo]:
        """Streams with own records (found by skipping through the index) or fork entries."""
        rows = self._checked(self._query(_STREAM_NAMES), (str, int, int), "events")
        own = {name: (seq, ts) for name, seq, ts in rows}
        forks = {f.stream: f for f in self.list_forks()}
        out = []
        for name in sorted(own.keys() | forks.keys()):
            fork = forks.get(name)
            seq, ts = own.get(name) or ((fork.at_seq, fork.ts) if fork else (0, 0))
            parent, at_seq = (fork.parent, fork.at_seq) if fork else (None, 0)
            out.append(StreamInfo(name, seq, ts, parent, at_seq))
        return out

    # -- forks -----------------------------------------------------------------------------

    def create_fork(self, fork: ForkInfo) -> None:
        """Insert a fork entry; the schema refuses a stream that has events or a fork."""

        def work(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO forks (stream, parent, at_seq, ts) VALUES (?, ?, ?, ?)",
                (fork.stream, fork.parent, fork.at_seq, fork.ts),
            )

        self._write(work, Durability.FSYNC)

    def get_fork(self, stream: str) -> ForkInfo | None:
        """The fork entry of a stream."""
        rows = self._query(
            "SELECT stream, parent, at_seq, ts FROM forks WHERE stream = ?", (stream,)
        )
        return ForkInfo(*self._checked(rows, _FORK_TYPES, "forks")[0]) if rows else None

    def list_forks(self, parent: str | None = None) -> list[ForkInfo]:
        """Fork entries sorted by stream name."""
        if parent is None:
            rows = self._query("SELECT stream, parent, at_seq, ts FROM forks ORDER BY stream")
        else:
            rows = self._query(
                "SELECT stream, parent, at_seq, ts FROM forks WHERE parent = ? ORDER BY stream",
                (parent,),
            )
        return list(starmap(ForkInfo, self._checked(rows, _FORK_TYPES, "forks")))

    def _checked(self, rows: list[Any], types: tuple[type, ...], table: str) -> list[Any]:
        """`rows`, if each value has its column's type; else CorruptionError naming the table.

        SQLite stores what it is given in any column: an edited file can hold a name as a
        BLOB or a seq as TEXT, which no hash covers.
        """
        for row in rows:
            if any(type(v) is not t for v, t in zip(row, types, strict=True)):
                raise CorruptionError(
                    f"table {table} holds a row of the wrong types: {row!r}",
                    location=self.location,
                )
        return rows

    # -- blobs and snapshots ---------------------------------------------------------------

    def get_blob(self, key: str) -> bytes | None:
        """A store-level value."""
        rows = self._query("SELECT value FROM blobs WHERE key = ?", (key,))
        return bytes(rows[0][0]) if rows else None

    def put_blob(self, key: str, value: bytes) -> None:
        """Set a store-level value, synced to disk."""
        data = bytes(value)

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT OR REPLACE INTO blobs (key, value) VALUES (?, ?)", (key, data))

        self._write(work, Durability.FSYNC)

    def save_snapshot(self, stream: str, name: str, version: int, seq: int, data: bytes) -> None:
        """Store a snapshot (a cache: it can be rebuilt, so it is not synced on its own)."""
        blob = bytes(data)

        def work(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR REPLACE INTO snapshots (stream, name, version, seq, data) "
                "VALUES (?, ?, ?, ?, ?)",
                (stream, name, version, seq, blob),
            )

        self._write(work, Durability.BATCH)

    def load_snapshot(
        self, stream: str, name: str, version: int, max_seq: int | None
    ) -> tuple[int, bytes] | None:
        """The newest snapshot at or below max_seq."""
        rows = self._query(
            "SELECT seq, data FROM snapshots WHERE stream = ? AND name = ? AND version = ? "
            "AND seq <= ? ORDER BY seq DESC LIMIT 1",
            (stream, name, version, (1 << 62) if max_seq is None else max_seq),
        )
        return (int(rows[0][0]), bytes(rows[0][1])) if rows else None

    def delete_snapshot(self, stream: str, name: str, version: int, seq: int) -> None:
        """Drop one snapshot."""

        def work(conn: sqlite3.Connection) -> None:
            conn.execute(
                "DELETE FROM snapshots WHERE stream = ? AND name = ? AND version = ? AND seq = ?",
                (stream, name, version, seq),
            )

        self._write(work, Durability.BATCH)

    def drop_snapshots(self, stream: str) -> int:
        """Remove every snapshot of a stream, synced."""

        def work(conn: sqlite3.Connection) -> int:
            return conn.execute("DELETE FROM snapshots WHERE stream = ?", (stream,)).rowcount

        dropped: int = self._write(work, Durability.FSYNC)
        return dropped

    def snapshot_seqs(self, stream: str, name: str, version: int) -> list[int]:
        """Seqs of the stored snapshots, ascending (through the primary key)."""
        rows = self._query(
            "SELECT seq FROM snapshots WHERE stream = ? AND name = ? AND version = ? ORDER BY seq",
            (stream, name, version),
        )
        return [int(r[0]) for r in rows]

    # -- search ----------------------------------------------------------------------------

    def search(
        self, query: str, *, segments: Sequence[Segment] | None = None, limit: int = 50
    ) -> list[SearchHit]:
        """FTS5 query over event text, best match (bm25) first; within `segments` or store-wide."""
        if not self.search_enabled:
            raise UsageError(
                f"{self.location} has no full-text index: create the store with ?search=on"
            )
        if segments is None:
            rows = self._query(_SEARCH.format(within="1"), (query, limit), search=query)
        else:
            # One clause per segment; SQLite caps an expression's depth at 1000, so a fork
            # with a long ancestry is searched a slice of segments at a time, then merged.
            # bm25 rates a row against the whole index, whatever the filter: ranks compare.
            rows = []
            for i in range(0, len(segments), _SEGMENTS_PER_QUERY):
                rows += self._search_within(query, segments[i : i + _SEGMENTS_PER_QUERY], limit)
            if len(segments) > _SEGMENTS_PER_QUERY:
                rows = sorted(rows, key=lambda r: (r[5], -r[3]))[:limit]
        return [SearchHit(s, q, i, p, snip or "", float(rank)) for s, q, i, p, snip, rank in rows]

    def _search_within(self, query: str, segments: Sequence[Segment], limit: int) -> list[Any]:
        within = " OR ".join(
            "(e.stream = ? AND e.seq >= ?" + (" AND e.seq <= ?)" if hi is not None else ")")
            for _, _, hi in segments
        )
        params: list[object] = [query]
        for origin, lo, hi in segments:
            params += [origin, lo] if hi is None else [origin, lo, hi]
        params.append(limit)
        return self._query(_SEARCH.format(within=f"({within})"), params, search=query)

    # -- lifecycle -------------------------------------------------------------------------

    def disk_paths(self) -> list[Path]:
        """The database file and its write-ahead log."""
        return [self.path, self.path.with_name(self.path.name + "-wal")]

    def stats(self) -> dict[str, int]:
        """Writer counters: commits and jobs (appends share commits under group commit)."""
        return self._writer.stats()

    def close(self) -> None:
        """Finish the commit in progress, then close every connection."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            while self._reading:  # another thread's query: its connection must stay open
                self._reads_done.wait()
            readers, self._idle = self._idle, []
        self._writer.close()
        for conn in readers:
            conn.close()
        self._snapshots.clear()

    @classmethod
    def exists_at(cls, path: str) -> bool:
        """Whether the URL's file exists and is not empty (an empty file becomes a new store)."""
        file = database_path(path)
        return file.is_file() and file.stat().st_size > 0

    @classmethod
    def from_url(cls, url: str, path: str, options: dict[str, str]) -> SQLiteBackend:
        """Open `sqlite:///relative.db` or `sqlite:////absolute.db` (docs/backends/sqlite.md)."""
        unknown = set(options) - _OPTIONS
        if unknown:
            raise UsageError(
                f"unknown option(s) for sqlite://: {', '.join(sorted(unknown))} "
                f"(known: {', '.join(sorted(_OPTIONS))})"
            )
        search = _flag(options, "search")
        check = options.get("check", "none")
        if check not in {"none", "quick"}:
            raise UsageError(f"option check must be 'none' or 'quick', got {check!r}")
        timeout = seconds_option("busy_timeout", options.get("busy_timeout", "10"))
        return cls(database_path(path), search=search, busy_timeout=timeout, check=check == "quick")


def _flag(options: dict[str, str], name: str) -> bool | None:
    value = options.get(name)
    if value is None:
        return None
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise UsageError(f"option {name} must be on or off, got {value!r}")
