"""Schema of an eventlog SQLite file: creation, version table, migrations and open-time checks.

Tables are created with sqlite-utils. A new store is built in a temporary file beside the target
and linked into place, so no process ever sees a half-created schema and two processes creating
the same store at once end up sharing one of them. Existing files are inspected through a
read-only connection first: a file that is corrupt, not an eventlog store, or written by a newer
eventlog is reported by name and never modified. A transaction a crash left in a rollback journal
is rolled back first, and a store in another journal mode (a `VACUUM INTO` copy, say) is put in
WAL mode.

A WAL-mode store this process cannot write, with no `-wal` beside it, is read as an immutable
snapshot (`file_state`): SQLite's ordinary connections would create `-wal` and `-shm` files to
read it and could not remove them.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sqlite3
import stat
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import sqlite_utils

from eventlog.backends.base import DECODE_ERRORS
from eventlog.errors import (
    BackendUnavailableError,
    CorruptionError,
    SchemaVersionError,
    UsageError,
)

log = logging.getLogger("eventlog.backends.sqlite")

SCHEMA_VERSION = 4
"""The schema version this eventlog writes and reads."""
APPLICATION_ID = 0x45564C47
"""`PRAGMA application_id` of eventlog files ("EVLG")."""
SQLITE_HEADER = b"SQLite format 3\x00"
_WAL_VERSIONS = slice(18, 20)
"""Header bytes holding the file format's write and read versions: 2 and 2 in WAL mode."""
SNAPSHOT_TRIES = 4
"""Reads of a read-only store as a snapshot before one through SQLite's locks (see
`file_state`), while another process keeps changing the file under them."""

VERSION_TABLE = "eventlog_schema"
REQUIRED_TABLES = ("events", "forks", "blobs", "snapshots", VERSION_TABLE)
TEXT_TABLE = "event_text"
FTS_TABLE = "event_text_fts"

# Forks are guarded by the schema too: seq 1 of a fork is taken by its parent's prefix, and a
# stream that already has events cannot become a fork. RAISE(ABORT) surfaces as IntegrityError,
# translated with the other constraint failures. Schema v2 drops the first trigger (see `_v2`).
_TRIGGERS = (
    """CREATE TRIGGER events_fork_guard BEFORE INSERT ON events
    WHEN NEW.seq = 1 AND EXISTS (SELECT 1 FROM forks WHERE stream = NEW.stream)
    BEGIN SELECT RAISE(ABORT, 'eventlog: seq 1 of a fork'); END""",
    """CREATE TRIGGER forks_guard BEFORE INSERT ON forks
    WHEN EXISTS (SELECT 1 FROM events WHERE stream = NEW.stream)
    BEGIN SELECT RAISE(ABORT, 'eventlog: fork of a stream with events'); END""",
)


def _v1(db: sqlite_utils.Database, search: bool) -> None:
    """Events (one row each, position = rowid), forks, blobs, snapshots, optional text index."""
    db.table("events").create(
        {
            "position": int,
            "id": str,
            "stream": str,
            "seq": int,
            "ts": int,
            "type": str,
            "version": int,
            "codec": int,
            "data": bytes,
            "meta": bytes,
            "causation_id": str,
            "correlation_id": str,
            "hash": bytes,
        },
        pk="position",
        not_null={"id", "stream", "seq", "ts", "type", "version", "codec", "data", "meta", "hash"},
    )
    db.table("events").create_index(["id"], index_name="events_id", unique=True)
    db.table("events").create_index(["stream", "seq"], index_name="events_stream_seq", unique=True)
    db.table("forks").create(
        {"stream": str, "parent": str, "at_seq": int, "ts": int},
        pk="stream",
        not_null={"parent", "at_seq", "ts"},
    )
    db.table("forks").create_index(["parent"], index_name="forks_parent")
    db.table("blobs").create({"key": str, "value": bytes}, pk="key", not_null={"value"})
    db.table("snapshots").create(
        {"stream": str, "name": str, "version": int, "seq": int, "data": bytes},
        pk=("stream", "name", "version", "seq"),
        not_null={"data"},
    )
    for sql in _TRIGGERS:
        db.execute(sql)
    if search:
        db.table(TEXT_TABLE).create(
            {"position": int, "text": str}, pk="position", not_null={"text"}
        )
        # The trigger sqlite-utils creates keeps the index in step inside the same transaction.
        db.table(TEXT_TABLE).enable_fts(
            ["text"], fts_version="FTS5", create_triggers=True, tokenize="unicode61"
        )


def _v2(db: sqlite_utils.Database, search: bool) -> None:
    """Drop the per-row fork trigger on events (about 13% of an insert's work).

    It ran for every inserted row to catch one rare case, which the backend now checks once per
    append inside the same write transaction (see `SQLiteBackend.append`).
    """
    db.execute("DROP TRIGGER IF EXISTS events_fork_guard")


_PACKED_FIELDS = ("version", "meta", "causation_id", "correlation_id", "hash", "codec")
"""Columns of schema v2 that v3 keeps only inside the packed envelope."""
_MIGRATE_CHUNK = 5000
_V3_FIELDS = 10
"""Elements of a schema v3 envelope (seq, id, ts, type, version, meta, links, hash, codec)."""
_encode = msgspec.msgpack.Encoder().encode
_decode_list = msgspec.msgpack.Decoder(list[Any]).decode


def _v3(db: sqlite_utils.Database, search: bool) -> None:
    """Keep the envelope packed in one blob (`env`, see eventlog.backends.envelope).

    A read then fetches four columns (position, stream, env, data) instead of thirteen, which
    was most of what reading cost over the raw engine. id, stream, seq, ts and type stay columns
    for the indexes, `list_streams` and people querying the file with SQL.
    """
    conn = db.conn
    conn.execute("ALTER TABLE events ADD COLUMN env BLOB NOT NULL DEFAULT X''")
    _rewrite(
        conn,
        "seq, id, ts, type, version, meta, causation_id, correlation_id, hash, codec",
        "env",
        lambda row: _encode(row),
        "envelopes",
        3,
    )
    for column in _PACKED_FIELDS:
        conn.execute(f"ALTER TABLE events DROP COLUMN {column}")


def _v4(db: sqlite_utils.Database, search: bool) -> None:
    """Keep envelope and payload in one packed record (`rec`, see eventlog.backends.envelope).

    A read then fetches one blob per event and decodes envelope and typed payload with one
    msgspec call. The v3 envelope is the record's head: its array grows by one element, the
    payload, inline if plain and as a bin if compressed. A row whose envelope no longer decodes
    keeps its bytes (envelope, then payload), so reads and `verify` still report it as damaged.
    """
    conn = db.conn
    conn.execute("ALTER TABLE events RENAME COLUMN data TO rec")
    _rewrite(conn, "env, rec", "rec", lambda row: _v4_record(*row), "records", 4)
    conn.execute("ALTER TABLE events DROP COLUMN env")


def _rewrite(
    conn: sqlite3.Connection,
    columns: str,
    target: str,
    pack: Callable[[tuple[Any, ...]], object],
    what: str,
    version: int,
) -> None:
    """Set `target` of every event row to `pack(its columns)`, in chunks, logging progress."""
    count = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    started = time.perf_counter()
    if count:
        log.info("packing the %s of %d events (schema v%d)", what, count, version)
    after = done = 0
    while True:
        rows = conn.execute(
            f"SELECT position, {columns} FROM events WHERE position > ? ORDER BY position LIMIT ?",
            (after, _MIGRATE_CHUNK),
        ).fetchall()
        if not rows:
            break
        conn.executemany(
            f"UPDATE events SET {target} = ? WHERE position = ?",
            [(pack(row[1:]), row[0]) for row in rows],
        )
        after, done = rows[-1][0], done + len(rows)
        log.debug("packed %d of %d %s", done, count, what)
    if count:
        log.info("packed %d %s in %.1f s", count, what, time.perf_counter() - started)


def _v4_record(env: object, data: object) -> object:
    """The v4 record of a v3 row's envelope and stored payload (damage kept as it is)."""
    if not isinstance(env, bytes):
        return env  # text or a number where bytes belong: reads still report it
    if not isinstance(data, bytes):
        return data
    try:
        fields = _decode_list(env)
    except DECODE_ERRORS:
        return env + data
    if len(fields) != _V3_FIELDS or not isinstance(codec := fields[-1], int):
        return env + data
    return _encode([*fields, data if codec else msgspec.Raw(data)])


Migration = Callable[[sqlite_utils.Database, bool], None]
MIGRATIONS: dict[int, Migration] = {1: _v1, 2: _v2, 3: _v3, 4: _v4}
"""Schema version -> function upgrading a store from the version before it."""


def database_path(path: str) -> Path:
    """The file of a `sqlite://` URL path: `/rel.db` is relative, `//abs.db` absolute."""
    if not path or path in {"/", "//"}:
        raise UsageError("sqlite:// needs a file: sqlite:///relative.db or sqlite:////abs.db")
    if path.startswith("/"):
        # sqlite:///x.db gives "/x.db": the third slash only ends the empty host (SQLAlchemy's
        # convention), so one leading slash is dropped; sqlite:////tmp/x.db keeps "/tmp/x.db".
        path = path[1:]
    if path in {":memory:", ""}:
        raise UsageError("sqlite:// needs a file; use memory:// for an in-process store")
    return Path(path).expanduser()


def open_schema(path: Path, *, search: bool | None, check: bool) -> bool:
    """Create or check the store at `path`, migrating it if older; return whether it has search."""
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(
            f"cannot open {str(path)!r}: directory {str(parent)!r} does not exist "
            "(sqlite:///relative/path.db or sqlite:////absolute/path.db)"
        )
    if path.exists() and not path.is_file():  # /dev/null, a FIFO: never replaced by a store
        raise UsageError(f"cannot open {str(path)!r}: it is not a regular file")
    if not path.exists() or path.stat().st_size == 0:
        _create(path, search=bool(search))
    version, has_search = inspect(path, check=check)
    if search is not None and search != has_search:
        state = "has a" if has_search else "has no"
        raise UsageError(
            f"{path} {state} full-text index; search is chosen when a store is created "
            "(export the events into a new store to change it)"
        )
    if version < SCHEMA_VERSION:
        if read_only(path):  # the upgrade could not write it; its connection would leave files
            raise BackendUnavailableError(
                f"{path}: cannot be upgraded from schema v{version}: the file is read-only; the "
                "store is unchanged"
            )
        try:
            migrate(path, version, has_search)
        except sqlite3.Error as exc:  # rolled back: the file is as it was
            if not _damaged(exc):  # busy, disk full, read-only, I/O: the store is fine
                raise BackendUnavailableError(
                    f"{path}: cannot be upgraded from schema v{version} now ({exc}); the "
                    "store is unchanged"
                ) from exc
            raise CorruptionError(
                f"cannot be upgraded from schema v{version}: {exc}", location=str(path)
            ) from exc
    _use_wal(path)  # last: a store refused above is left as it was
    return has_search


def _damaged(exc: sqlite3.Error) -> bool:
    """Whether an error says the file is damaged or not the schema it claims (not the disk)."""
    return _primary_code(exc) in (
        sqlite3.SQLITE_CORRUPT,
        sqlite3.SQLITE_NOTADB,
        sqlite3.SQLITE_ERROR,
    )


def _corrupt(exc: sqlite3.Error) -> bool:
    """Whether an error of an open-time read says the file is damaged.

    Not locked, unwritable or unreadable: READONLY, CANTOPEN, PERM, IOERR, AUTH and the rest
    leave a healthy store.
    """
    return _primary_code(exc) in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def _busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite gave up waiting for another connection's lock (not a damaged file)."""
    return _primary_code(exc) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _primary_code(exc: sqlite3.Error) -> int:
    """SQLite's primary result code of an error (its extended code's low byte)."""
    return _code(exc) & 0xFF


def _code(exc: sqlite3.Error) -> int:
    """SQLite's extended result code of an error (0 for the driver's own errors)."""
    code: int = getattr(exc, "sqlite_errorcode", 0)
    return code


def _create(path: Path, *, search: bool, target: int = SCHEMA_VERSION) -> None:
    """Build a new store in a temporary file, then move it into place atomically.

    `target` below the current version builds an older store (for migration tests).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        try:
            conn = sqlite3.connect(tmp, isolation_level=None)
        except sqlite3.Error as exc:  # an unwritable directory, say
            raise BackendUnavailableError(
                f"cannot create a store at {path}: {exc} (is {path.parent} writable?)"
            ) from exc
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            db = sqlite_utils.Database(conn)
            db.table(VERSION_TABLE).create(
                {"version": int, "applied_at": int}, pk="version", not_null={"applied_at"}
            )
            _apply(db, 0, search, target)
        finally:
            conn.close()
        if path.exists():
            _replace_empty(path, tmp)
        else:
            with contextlib.suppress(FileExistsError):
                # Another process may create the same store at the same moment: first one wins.
                os.link(tmp, path)
    finally:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{tmp}{suffix}")


def _replace_empty(path: Path, new: Path) -> None:
    """Move `new` over `path` if `path` is still the empty file it was (e.g. from tempfile).

    Two processes may find it empty at once: each takes a lock on the empty file and replaces
    it only if it is still that file, so the second never replaces the store the first made
    (whose connections would then write to an unlinked file).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        info = os.fstat(fd)
        if same and info.st_size == 0 and stat.S_ISREG(info.st_mode):
            os.replace(new, path)
    finally:
        os.close(fd)


def _apply(
    db: sqlite_utils.Database, current: int, search: bool, target: int = SCHEMA_VERSION
) -> None:
    """Run the migrations after `current` up to `target` (tests build older stores with it)."""
    for version in range(current + 1, target + 1):
        MIGRATIONS[version](db, search)
        db.execute(
            f"INSERT INTO {VERSION_TABLE}(version, applied_at) VALUES (?, ?)",
            [version, time.time_ns()],
        )


def inspect(path: Path, *, check: bool = False) -> tuple[int, bool]:
    """(schema version, has search) of an existing store; raise naming the file if it is bad.

    A damaged file is left as it was found: the -wal and -shm files SQLite makes on connecting
    are removed again if they were not there before. (Not for a busy, foreign or newer
    database, which another program may be opening at this moment.)
    """
    before = {p for p in _siblings(path) if p.exists()}
    try:
        return _inspect(path, check)
    except CorruptionError:  # (not when unavailable: another process may be opening it now)
        for sibling in _siblings(path):
            if sibling not in before:
                with contextlib.suppress(OSError):
                    if sibling.name.endswith("-shm") or sibling.stat().st_size == 0:
                        sibling.unlink()
        raise


def _siblings(path: Path) -> list[Path]:
    return [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]


def _inspect(path: Path, check: bool) -> tuple[int, bool]:
    if not path.is_file():
        raise UsageError(f"{path} is not a regular file (a directory?); a store is one file")
    try:
        with path.open("rb") as f:
            header = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise BackendUnavailableError(f"{path}: cannot be read: {exc}") from exc
    if header != SQLITE_HEADER:
        raise CorruptionError(
            "is not an eventlog database (no SQLite header: corrupt, or another kind of file)",
            location=str(path),
        )
    try:
        return _inspect_read_only(path, check)
    except sqlite3.Error as exc:
        if _code(exc) != sqlite3.SQLITE_READONLY_ROLLBACK:
            raise refusal(path, exc) from exc
    # A hot journal: a writer in rollback-journal mode died in a transaction, and only a
    # connection that can write rolls it back. Until then no read-only one reads the file.
    _roll_back(path)
    try:
        return _inspect_read_only(path, check)
    except sqlite3.Error as exc:
        raise refusal(path, exc) from exc


def _inspect_read_only(path: Path, check: bool) -> tuple[int, bool]:
    """`_inspect_conn` on a read-only connection: a snapshot if the store allows (no files)."""
    if read_only(path) and in_wal_mode(path):
        for _ in range(SNAPSHOT_TRIES):
            state = file_state(path)
            if state is None:
                break
            conn = sqlite3.connect(snapshot_uri(path), uri=True)
            try:
                found = _inspect_conn(conn, path, check)
            except Exception:
                if file_state(path) == state:  # about the file as it is: not a torn read
                    raise
                continue
            finally:
                conn.close()
            if file_state(path) == state:
                return found
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return _inspect_conn(conn, path, check)
    finally:
        conn.close()


def read_only(path: Path) -> bool:
    """Whether this process cannot write the file (SQLite then opens it read-only)."""
    return not os.access(path, os.W_OK)


def snapshot_uri(path: Path) -> str:
    """The URI of an immutable read-only connection: no locks, no `-wal` or `-shm` files."""
    return f"{path.resolve().as_uri()}?mode=ro&immutable=1"


def file_state(path: Path) -> tuple[int, ...] | None:
    """The state of a store that may be read as an immutable snapshot now, else None.

    For a WAL-mode store this process cannot write (`read_only`, `in_wal_mode`). With no `-wal`
    beside the file, every commit is in the file and no connection is open on it: SQLite's
    ordinary read-only connection would create `-wal` and `-shm` files to read it, and could
    not remove them (that needs a write lock on the file). An immutable connection
    (`snapshot_uri`) reads the file alone, without locks, so it cannot tell when another
    process writes it: a read through it counts only if the state is the same after it.

    The state is the file's identity, size and change times, taken while neither a `-wal` nor
    a `-journal` is beside it. A WAL-mode writer creates the `-wal` before it writes anything,
    a rollback-mode one the `-journal`, and a checkpoint copying commits into the file changes
    its times. Only stat calls: closing a descriptor of the file would drop the locks this
    process's other SQLite connections hold on it.
    """
    if os.path.lexists(f"{path}-wal") or os.path.lexists(f"{path}-journal"):
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def in_wal_mode(path: Path) -> bool:
    """Whether the file's header says WAL mode (False if it cannot be read).

    At open time only: closing the descriptor drops the locks of this process's connections.
    """
    try:
        return _header_says_wal(path)
    except OSError:
        return False


def _header_says_wal(path: Path) -> bool:
    """Whether the file's header says WAL mode; OSError if it cannot be read."""
    with path.open("rb") as f:
        return f.read(_WAL_VERSIONS.stop)[_WAL_VERSIONS] == b"\x02\x02"


def refusal(path: Path, exc: sqlite3.Error, doing: str = "cannot be opened") -> Exception:
    """The error for a store that an open-time read or write could not use.

    Only an error saying the file is damaged is a CorruptionError; a lock, a read-only file or
    directory, a missing permission or an I/O error leaves a healthy store that may open later.
    """
    if _busy(exc):
        return BackendUnavailableError(f"{path}: locked by another process ({doing}: {exc})")
    if _corrupt(exc):
        return CorruptionError(f"is corrupt: {exc}", location=str(path))
    name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    hint = ""
    if _code(exc) == sqlite3.SQLITE_READONLY_DIRECTORY or _primary_code(exc) in (
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PERM,
    ):
        hint = (
            f"; SQLite needs to read {path.name} and to create {path.name}-wal and "
            f"{path.name}-shm beside it: are {path.parent} and the file readable and writable?"
        )
    return BackendUnavailableError(f"{path}: {doing}: {exc} ({name}){hint}; the store is unchanged")


def _roll_back(path: Path) -> None:
    """Roll back the transaction a crash left in `path`'s rollback journal (a hot journal)."""
    log.warning(
        "%s: rolling back a transaction interrupted by a crash (%s-journal)", path, path.name
    )
    doing = (
        f"holds a transaction interrupted by a crash ({path.name}-journal), which only a "
        "connection that can write the file and its directory can roll back"
    )
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=30)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise refusal(path, exc, doing) from exc


def _use_wal(path: Path) -> None:
    """Put a store that is not in WAL mode (a `VACUUM INTO` copy, say) in WAL mode for good.

    A read-only file stays as it is (nothing can be appended to it). In rollback-journal mode
    readers would block the writer, a crash would leave a journal that read-only connections
    cannot roll back, and synchronous=NORMAL would not be safe against power loss.
    """
    try:
        if _header_says_wal(path):
            return
    except OSError as exc:
        raise BackendUnavailableError(f"{path}: cannot be read: {exc}") from exc
    if read_only(path):
        log.info("%s: read-only, left in its journal mode", path)
        return
    doing = "is not in WAL mode and could not be put in it now"
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=30)
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        if _primary_code(exc) == sqlite3.SQLITE_READONLY:
            log.info("%s: read-only, left in its journal mode", path)
            return
        raise refusal(path, exc, doing) from exc
    if mode != "wal":
        log.info("%s: left in journal mode %s (read-only?)", path, mode)
        return
    log.info("%s: put in WAL mode", path)


def _inspect_conn(conn: sqlite3.Connection, path: Path, check: bool) -> tuple[int, bool]:
    db = sqlite_utils.Database(conn)
    tables = set(db.table_names())
    if VERSION_TABLE not in tables:
        raise SchemaVersionError(
            "is a SQLite database but not an eventlog store (no eventlog_schema table)",
            location=str(path),
        )
    row = conn.execute(f"SELECT max(version) FROM {VERSION_TABLE}").fetchone()
    version = int(row[0] or 0)
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"has schema version {version}, newer than this eventlog's {SCHEMA_VERSION}: "
            "upgrade eventlog to open it",
            location=str(path),
        )
    missing = [t for t in REQUIRED_TABLES if t not in tables]
    if version == SCHEMA_VERSION and missing:
        raise CorruptionError(f"lacks table(s) {', '.join(missing)}", location=str(path))
    if check:
        problems = [r[0] for r in conn.execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            raise CorruptionError(f"fails quick_check: {'; '.join(problems)}", location=str(path))
    return version, FTS_TABLE in tables


def migrate(path: Path, version: int, search: bool) -> None:
    """Upgrade an older store in one write transaction (a no-op if another process did it)."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute(f"SELECT max(version) FROM {VERSION_TABLE}").fetchone()
        current = int(row[0] or 0)
        if current < SCHEMA_VERSION:
            _apply(sqlite_utils.Database(conn), current, search)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    finally:
        conn.close()
