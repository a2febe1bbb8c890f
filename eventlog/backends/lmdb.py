r"""LMDB backend: the fastest local engine, one memory-mapped B+tree file shared by processes.

Layout (named sub-databases of one environment directory):

- ``events``: stream key + 8-byte big-endian seq -> the record as a MessagePack array, so one
  stream's records are one contiguous, seq-ordered key range. A plain payload is an element of
  that array as the MessagePack it is (layout 2), so a read decodes the record and the typed
  payload in one call; a compressed one is a bin (as every payload was in layout 1);
- ``positions``: 8-byte big-endian position -> event key (commit order, appended only);
- ``ids``: event id -> event key (idempotent retries, uniqueness of ids);
- ``streams``: stream key -> (name, last seq, last ts);
- ``forks``: stream key -> (name, parent, at_seq, ts);
- ``blobs`` and ``snapshots``: store-level values and projection snapshots;
- ``meta``: the layout version.

A stream key is the UTF-8 name with NUL escaped (``00`` -> ``00 ff``) and a terminator
(``00 01``), so no stream's keys are a prefix of another's ("a" vs "a\x00b") and byte order is
name order. Names too long for LMDB's 511-byte keys keep a 200-byte prefix and end with
``00 02`` + a 16-byte BLAKE2b digest of the whole name.

Durability (see docs/backends/lmdb.md): the environment is opened with ``sync=True,
metasync=False``: every commit flushes its data pages before writing the meta page; the meta
page of level ``fsync`` commits is flushed too (``env.sync``) before append returns.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import logging
import os
import struct
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import lmdb
import msgspec

from eventlog.backends import file_lock
from eventlog.backends.base import (
    DECODE_ERRORS,
    Backend,
    Conflict,
    Durability,
    ForkInfo,
    Record,
    StreamInfo,
    check_store_directory,
    holds_store,
)
from eventlog.backends.envelope import exact_event
from eventlog.backends.group_commit import GroupQueue, Job, commit_group
from eventlog.backends.lmdb_pages import check_file
from eventlog.errors import (
    BackendUnavailableError,
    CorruptionError,
    SchemaVersionError,
    StoreClosedError,
    UsageError,
)
from eventlog.events import RecordedEvent

if TYPE_CHECKING:
    from eventlog.codec import Codec

log = logging.getLogger("eventlog.backends.lmdb")

LAYOUT_VERSION = 2
"""2: plain payloads inline in the record array. Layout 1 (every payload a bin) reads unchanged,
so a layout-1 environment is upgraded on open by raising the number alone."""
WRITER_LOCK = "writer.lock"
"""The file eventlog's writers `flock` before LMDB's writer mutex (see `_Shared.writer_turn`)."""
DEFAULT_MAP_SIZE = 256 * 1024 * 1024
"""Initial map size; the map doubles whenever it is full."""
_MAX_NAME_KEY = 400
_MAX_KEY = 511
"""LMDB's longest key (its default build)."""
_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")
_SEQ_MAX = _U64.pack(2**64 - 1)
_DBS = ("events", "positions", "ids", "streams", "forks", "blobs", "snapshots", "meta")
_DB_KEYS = frozenset(n.encode() for n in _DBS)
"""eventlog's databases as keys of the main database: an environment holding any other key is
not an eventlog store."""

T = TypeVar("T")
Txn = Any
"""A py-lmdb transaction. Its stubs type values as ``bytes | memoryview``: values are ``bytes``
except in the read transactions opened with ``buffers=True`` (see `LMDBBackend._run`)."""


class StoredRecord(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A record as the ``events`` sub-database keeps it: `Record`'s fields but `text`, in order.

    `data` is the payload's own MessagePack when plain (layout 2) or a bin holding the stored
    bytes (compressed payloads; every payload in layout 1); `_payload` tells them apart.
    """

    id: str
    stream: str
    seq: int
    ts: int
    type: str
    version: int
    data: msgspec.Raw
    meta: bytes
    causation_id: str | None
    correlation_id: str | None
    hash: bytes
    codec: int
    position: int


P = TypeVar("P")


class _TypedRecord(msgspec.Struct, Generic[P], frozen=True, array_like=True, gc=False):
    """A stored record decoded in one pass with its payload typed.

    `P` is the registered payload classes' union (`eventlog.codec.PayloadTypes`); a bin payload
    (compressed, or layout 1) decodes as bytes.
    """

    id: str
    stream: str
    seq: int
    ts: int
    type: str
    version: int
    data: P | bytes
    meta: bytes
    causation_id: str | None
    correlation_id: str | None
    hash: bytes
    codec: int
    position: int


@functools.lru_cache(maxsize=4)
def _typed_decoder(union: Any) -> msgspec.msgpack.Decoder[_TypedRecord[Any]]:
    return msgspec.msgpack.Decoder(_TypedRecord[union])


_encode = msgspec.msgpack.Encoder().encode
_decode_row = msgspec.msgpack.Decoder(StoredRecord).decode
_decode_bin = msgspec.msgpack.Decoder(bytes).decode
_decode_stream = msgspec.msgpack.Decoder(tuple[str, int, int]).decode
_decode_fork = msgspec.msgpack.Decoder(tuple[str, str, int, int]).decode


def _stream_entry(value: bytes, location: str) -> tuple[str, int, int]:
    """A streams-table entry (name, last seq, last ts); CorruptionError if damaged."""
    try:
        return _decode_stream(value)
    except DECODE_ERRORS as exc:
        raise CorruptionError(
            f"an entry of the streams table does not decode: {exc}", location=location
        ) from exc


def _fork_entry(value: bytes, location: str) -> ForkInfo:
    """A forks-table entry; CorruptionError if damaged."""
    try:
        return ForkInfo(*_decode_fork(value))
    except DECODE_ERRORS as exc:
        raise CorruptionError(
            f"an entry of the forks table does not decode: {exc}", location=location
        ) from exc


_BIN_MARKERS = (0xC4, 0xC5, 0xC6)
"""First bytes of a MessagePack bin (a payload is a map or an array, never a bin)."""


def key_part(raw: bytes) -> bytes:
    """A prefix-free, order-preserving encoding of a name, at most 420 bytes."""
    escaped = raw.replace(b"\x00", b"\x00\xff")
    if len(escaped) <= _MAX_NAME_KEY:
        return escaped + b"\x00\x01"
    head = raw[: _MAX_NAME_KEY // 2].replace(b"\x00", b"\x00\xff")
    return head + b"\x00\x02" + hashlib.blake2b(raw, digest_size=16).digest()


def stream_key(stream: str) -> bytes:
    """The key prefix of a stream's records in the ``events`` sub-database."""
    return key_part(stream.encode())


def event_key(stream: str, seq: int) -> bytes:
    """The ``events`` key of one record."""
    return key_part(stream.encode()) + _U64.pack(seq)


def pack_row(rec: Record, position: int) -> bytes:
    """The stored value of a record (for this module and for tests that tamper with data)."""
    return _encode(
        (
            rec.id,
            rec.stream,
            rec.seq,
            rec.ts,
            rec.type,
            rec.version,
            rec.data if rec.codec else msgspec.Raw(rec.data),
            rec.meta,
            rec.causation_id,
            rec.correlation_id,
            rec.hash,
            rec.codec,
            position,
        )
    )


def unpack_row(value: bytes | memoryview) -> Record:
    """A record from its stored value (either layout); msgspec.DecodeError if it is damaged."""
    r = _decode_row(value)
    raw = bytes(r.data)
    data = _decode_bin(raw) if raw[:1] and raw[0] in _BIN_MARKERS else raw
    return Record(
        r.id,
        r.stream,
        r.seq,
        r.ts,
        r.type,
        r.version,
        data,
        r.meta,
        r.causation_id,
        r.correlation_id,
        r.hash,
        r.codec,
        r.position,
    )


class _Gate:
    """Many transactions at once, or one map resize alone.

    LMDB's ``mdb_env_set_mapsize`` requires that no transaction of this process is open and
    does not check it; every transaction passes this gate, and a resize waits until none is.
    """

    def __init__(self) -> None:
        # Every transaction enters the plain lock (C), not the Condition (Python-level).
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._active = 0
        self._exclusive = False

    def enter(self) -> None:
        with self._lock:
            while self._exclusive:
                self._cond.wait()
            self._active += 1

    def leave(self) -> None:
        with self._lock:
            self._active -= 1
            if not self._active and self._exclusive:
                self._cond.notify_all()

    def alone(self, fn: Callable[[], object]) -> None:
        with self._cond:
            while self._exclusive:
                self._cond.wait()
            self._exclusive = True
            while self._active:
                self._cond.wait()
        try:
            fn()
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


class _Shared:
    """One open environment of this process, shared by every backend object on its path.

    LMDB forbids opening one environment twice in a process (closing the second handle would
    drop the first one's file locks), so backends on the same directory share this object.

    A complete store is opened read-only: py-lmdb keeps the named databases' handles only from a
    write transaction or a read-only environment, and a write transaction waits for any other
    process's writer (for ever, if that one is stopped). The first write reopens it writable.
    """

    def __init__(self, path: str, map_size: int, max_readers: int, lock_timeout: float) -> None:
        self.path = path
        self.map_size = map_size
        self.max_readers = max_readers
        self.refs = 0
        self.inherited = False
        """Opened by the parent of this forked process: never closed here."""
        self.gate = _Gate()
        self.write_lock = threading.Lock()
        """One write transaction per environment and process at a time (LMDB's rule; py-lmdb
        1.x raises instead of waiting when a second thread begins one)."""
        self.appends = GroupQueue()
        """Appends of every backend object on this environment, committed in groups."""
        self.writes = 0
        """Write transactions begun, for the periodic `reader_check` (see `before_write`)."""
        self.writable = not _holds_data(path)
        self.env = _open_env(path, map_size, max_readers, readonly=not self.writable)
        self.dbs: list[Any] = []
        self.writer_fd = -1
        """`WRITER_LOCK` as this process opened it (at its first write)."""
        self.writer_closed = False
        """Set once the environment closed: no write may take a turn (see `writer_turn`)."""
        self.data_fd = -1
        """data.mdb as this process opened it, for `lmdb_pages` (a path could name another file
        by the time it is read: the working directory changed, the directory was moved)."""
        try:
            self.data_fd = os.open(os.path.join(path, "data.mdb"), os.O_RDONLY | os.O_CLOEXEC)
            _check_size(self.env, path)
            # Readers of processes killed mid-transaction hold pages until their slot is freed.
            self.env.reader_check()
            stored = None if self.writable else self._open_existing(path)
            if stored is None or int(stored) < LAYOUT_VERSION:
                with self.writer_turn(lock_timeout):
                    stored = self._become_writable(path)
        except BaseException:
            self.close()
            self.close_files()
            raise
        if stored is not None and int(stored) > LAYOUT_VERSION:
            self.close()
            self.close_files()
            raise SchemaVersionError(
                f"LMDB layout version {int(stored)} is newer than this eventlog's {LAYOUT_VERSION}",
                location=path,
            )

    def close(self) -> None:
        """Close the environment, then this process's own handle on data.mdb.

        The writer lock file is closed apart (`close_writer_lock`): a thread may be in its
        turn to write, outside the environment's gate, until it finds the store closed.
        """
        self.env.close()
        if self.data_fd >= 0:
            os.close(self.data_fd)
            self.data_fd = -1

    def close_writer_lock(self) -> None:
        """Refuse writes from now on, then close the writer lock file.

        Waits for the write in its turn, if any, to give the lock back first.
        """
        with self.write_lock:
            self.writer_closed = True
            self.close_files()

    def close_files(self) -> None:
        """Close this process's handles on data.mdb and the writer lock file, as they are.

        Takes no lock: for a forked child, whose copies of the parent's locks may be held by
        threads that do not exist in it, and for an environment no other thread has yet.
        """
        for name in ("data_fd", "writer_fd"):
            fd = getattr(self, name)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)

    @contextlib.contextmanager
    def writer_turn(self, timeout: float) -> Iterator[None]:
        """Hold the writer lock while writing, waiting for it at most `timeout` seconds.

        LMDB's own writer mutex has no time limit, so eventlog's writers take this `flock`
        first: one stopped mid-commit (SIGSTOP, a debugger) makes the others raise
        BackendUnavailableError after `timeout` instead of waiting for ever. Call it with
        `write_lock` held, or before the environment is shared.
        """
        if self.writer_closed:
            raise StoreClosedError(f"LMDB store {self.path} is closed")
        lock_path = Path(self.path) / WRITER_LOCK
        if self.writer_fd < 0:
            try:
                self.writer_fd = file_lock.open_lock_file(lock_path)
            except OSError as exc:
                raise BackendUnavailableError(
                    f"cannot open the writer lock {lock_path}: {exc}"
                ) from exc
        file_lock.acquire(self.writer_fd, timeout, lock_path, self.path)
        try:
            yield
        finally:
            file_lock.release(self.writer_fd)

    def _open_existing(self, path: str) -> bytes | None:
        """Open the named databases of the read-only environment; the stored layout.

        None in an empty environment (a store another process is creating: `_open_dbs` makes
        the databases), or in one with eventlog's databases, all empty, and no layout.
        Another program's environment, or an eventlog store missing a database or its
        layout, raises (see `_checked_store`) before anything is written.
        """
        while True:
            try:
                with self.env.begin() as txn:
                    present = _present_dbs(txn, path)
                if not present:
                    return None
                self.dbs = _named_dbs(self.env, present, path, None)
                with self.env.begin() as txn:
                    return _checked_store(txn, self.dbs, present, path)
            except lmdb.MapResizedError:
                _resize(self.env, None)

    def _become_writable(self, path: str) -> bytes | None:
        """Reopen the environment writable and open its named databases; the stored layout.

        Waits for any other process's writer. Call it with no transaction of this process open.
        """
        if not self.writable:
            self.env.close()
            try:
                self.env = _open_env(path, self.map_size, self.max_readers, readonly=False)
            except BaseException:  # data.mdb not writable, say: reads go on
                self.env = _open_env(path, self.map_size, self.max_readers, readonly=True)
                self._open_existing(path)
                raise
        stored = self._open_dbs(path)
        self.env.sync(True)
        self.writable = True  # only now: a failure above reopens it again at the next write
        return stored

    def before_write(self) -> None:
        """Call it before each write transaction, with `write_lock` held.

        Reopens a read-only environment writable (once); every `_READER_CHECK_EVERY` writes,
        frees the reader slots of processes that died mid-read: a dead reader's snapshot keeps
        every page freed since from reuse, and data.mdb would grow with each commit.
        """
        if not self.writable:
            self.gate.alone(functools.partial(self._become_writable, self.path))
        self.writes += 1
        if not self.writes % _READER_CHECK_EVERY:
            self.env.reader_check()

    def _open_dbs(self, path: str) -> bytes | None:
        """Open the named databases (create them in an empty environment) and raise the layout.

        Returns the stored layout (None for a new store).

        Another process may grow the map between `lmdb.open` and this transaction (LMDB then
        refuses it until this process adopts the new size), or the map may be full: adopt or
        grow, and try again, as appends do.
        """
        while True:
            try:
                with self.env.begin(write=True) as txn:
                    present = _present_dbs(txn, path)
                    if present:  # checked as by `_open_existing`, in case it changed since
                        self.dbs = _named_dbs(self.env, present, path, txn)
                        stored = _checked_store(txn, self.dbs, present, path)
                    else:  # an empty environment: a new store
                        self.dbs = [
                            self.env.open_db(n.encode(), txn=txn, create=True) for n in _DBS
                        ]
                        stored = None
                    meta = self.dbs[-1]
                    if stored is None or int(stored) < LAYOUT_VERSION:
                        if stored is not None:
                            log.info(
                                "LMDB store %s: layout %s raised to %d",
                                path,
                                stored,
                                LAYOUT_VERSION,
                            )
                        txn.put(b"layout", str(LAYOUT_VERSION).encode(), db=meta)
                return stored
            except lmdb.MapResizedError:  # no transaction of this process is open yet
                _resize(self.env, None)
            except lmdb.MapFullError:
                _resize(self.env, self.env.info()["map_size"])


def _present_dbs(txn: Txn, path: str) -> list[str]:
    """The names of eventlog's databases the environment's main database holds.

    Empty for an empty environment (a new store). A key of any other name means the
    environment is another program's: SchemaVersionError. At most one key more than eventlog's
    databases is read, however large the main database is.
    """
    present: list[str] = []
    for key in txn.cursor().iternext(values=False):
        name = bytes(key)
        if name not in _DB_KEYS:
            raise _not_eventlog(path, f"its main database holds the key {name[:64]!r}")
        present.append(name.decode())
    return present


def _named_dbs(env: lmdb.Environment, present: list[str], path: str, txn: Txn | None) -> list[Any]:
    """Handles of eventlog's databases, in `_DBS` order (None for one the environment lacks)."""
    dbs: list[Any] = []
    for name in _DBS:
        try:
            dbs.append(
                env.open_db(name.encode(), txn=txn, create=False) if name in present else None
            )
        except lmdb.IncompatibleError:  # a plain value, not a database, under that key
            raise _not_eventlog(path, f"its main database holds {name!r} as a plain key") from None
    return dbs


def _not_eventlog(path: str, why: str) -> SchemaVersionError:
    return SchemaVersionError(
        f"is an LMDB environment but not an eventlog store ({why}); nothing was changed",
        location=path,
    )


def _checked_store(txn: Txn, dbs: list[Any], present: list[str], path: str) -> bytes | None:
    """The stored layout of an environment holding some of eventlog's databases.

    eventlog creates every database and the layout in one transaction, so a missing one, or a
    missing layout, is damage (or an edit by hand): CorruptionError when any of the databases
    holds data, never new, empty databases or a guessed layout in their place. Without data:
    None (a layout to write) when every database is there, else the environment is not an
    eventlog store (SchemaVersionError).
    """
    missing = [n for n in _DBS if n not in present]
    stored = None if missing else _checked_layout(txn.get(b"layout", db=dbs[-1]), path)
    if stored is not None:
        return stored
    what = (
        f"the database(s) {', '.join(missing)} are missing"
        if missing
        else "the layout version (key 'layout' of database 'meta') is missing"
    )
    holding = [
        n for n, db in zip(_DBS, dbs, strict=True) if db is not None and txn.stat(db)["entries"]
    ]
    if holding:
        raise CorruptionError(
            f"the eventlog store is damaged: {what}, while {', '.join(holding)} hold data; "
            "nothing was changed",
            location=path,
        )
    if missing:
        raise _not_eventlog(path, what)
    return None


def _checked_layout(stored: bytes | None, path: str) -> bytes | None:
    """The stored layout version; CorruptionError if it is not a number."""
    if stored is not None and not stored.isdigit():
        raise CorruptionError(f"the layout version {stored!r} is damaged", location=path)
    return stored


def _holds_data(path: str) -> bool:
    """Whether the directory holds a data.mdb with content (a store to open read-only)."""
    try:
        return os.path.getsize(os.path.join(path, "data.mdb")) > 0
    except OSError:
        return False


def _check_size(env: lmdb.Environment, path: str) -> None:
    """Raise CorruptionError if data.mdb ends before its last page (a truncated copy, say).

    LMDB maps the file and would touch the missing pages: the process dies of SIGBUS.
    """
    data = os.path.join(path, "data.mdb")
    need = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
    size = os.path.getsize(data)
    if size < need:
        raise CorruptionError(
            f"{data} is {size} bytes but its pages reach {need}: the file was truncated",
            location=path,
        )


def _resize(env: lmdb.Environment, seen: int | None) -> None:
    """Adopt the size another process grew the map to (`seen` None), or double a full map.

    Call it with no transaction of this process open. A map already larger than `seen` was
    grown by another thread meanwhile.
    """
    if seen is None:
        env.set_mapsize(0)
        return
    current = env.info()["map_size"]
    if current == seen:
        env.set_mapsize(current * 2)


def _open_env(path: str, map_size: int, max_readers: int, *, readonly: bool) -> lmdb.Environment:
    """`lmdb.open`, again if another process grew the map while it read the old size."""
    for attempt in range(_OPEN_ATTEMPTS):
        try:
            return lmdb.open(
                path,
                readonly=readonly,
                map_size=map_size,
                max_dbs=len(_DBS),
                max_readers=max_readers,
                max_spare_txns=16,
                sync=True,
                metasync=False,
                readahead=False,
                # Zero the unused parts of fresh pages: LMDB would otherwise write whatever the
                # process's memory held there (an encrypted store's plain payloads, say) into
                # the file. It costs nothing measurable (appends of 100 events, benchmark data).
                meminit=True,
            )
        except lmdb.MapResizedError:
            if attempt == _OPEN_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


_OPEN_ATTEMPTS = 20
_READER_CHECK_EVERY = 16
"""Write transactions between two `reader_check` calls (each scans the reader table: about
0.05 us, plus one fcntl per other process with a reader slot)."""
_OPEN: dict[tuple[int, str], _Shared] = {}
_BUSY: dict[tuple[int, str], threading.Event] = {}
"""Paths a thread of this process is opening or closing: other threads wait for it without
`_OPEN_LOCK` (creating a store waits for any other process's writer)."""


def _keep_inherited_open() -> None:
    """After os.fork(), in the child: never finalize the parent's environments.

    Closing one (at the child's exit, say) would abort its cached read transactions, which
    frees the parent's reader slots in the shared lock file: the parent's next reads would fail
    with MDB_BAD_RSLOT. The child opens its own environment if it uses the store.
    """
    global _OPEN_LOCK
    # Another thread of the parent may have held the lock at the fork: it never lets go here.
    _OPEN_LOCK = threading.Lock()
    for shared in _OPEN.values():
        shared.inherited = True
        # The parent's descriptions stay open in the parent: closing them here only drops
        # this process's references (a held flock stays the parent's).
        shared.close_files()
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(shared.env))  # survives interpreter exit
    _OPEN.clear()
    _BUSY.clear()  # the parent's threads: none of them runs here


_OPEN_LOCK = threading.Lock()
os.register_at_fork(after_in_child=_keep_inherited_open)


def _acquire(path: str, map_size: int, max_readers: int, lock_timeout: float) -> _Shared:
    """The process's environment on `path`, opened if it is not yet, with one more reference."""
    # A forked child must not use its parent's handle: key by pid.
    key = (os.getpid(), os.path.realpath(path))
    while True:
        with _OPEN_LOCK:
            busy = _BUSY.get(key)
            shared = _OPEN.get(key)
            if busy is None and shared is not None:
                shared.refs += 1
                return shared
            if busy is None:
                busy = _BUSY[key] = threading.Event()
                break
        busy.wait()  # another thread opens or closes this path
    try:
        shared = _open_shared(path, map_size, max_readers, lock_timeout)
        with _OPEN_LOCK:
            shared.refs = 1
            _OPEN[key] = shared
        return shared
    finally:
        _done(key, busy)


def _open_shared(path: str, map_size: int, max_readers: int, lock_timeout: float) -> _Shared:
    """A new `_Shared` on `path`, LMDB's and the system's errors translated."""
    check_store_directory(Path(path), "lmdb")
    try:
        os.makedirs(path, exist_ok=True)
        return _Shared(path, map_size, max_readers, lock_timeout)
    except OSError as exc:
        raise BackendUnavailableError(f"cannot open LMDB store {path}: {exc}") from exc
    except lmdb.Error as exc:
        raise _translate(exc, path) from exc


def _done(key: tuple[int, str], busy: threading.Event) -> None:
    """Mark `key` as opened or closed by this thread: wake the threads waiting on it."""
    with _OPEN_LOCK:
        del _BUSY[key]
    busy.set()


def _release(shared: _Shared) -> None:
    """Drop one reference; the last one closes the environment."""
    if shared.inherited:
        return  # the parent's environment, in a forked child: never closed here
    with _OPEN_LOCK:
        shared.refs -= 1
        if shared.refs:
            return
        key = next(k for k, v in _OPEN.items() if v is shared)
        del _OPEN[key]
        # No new handle opens this path before this one is closed.
        busy = _BUSY[key] = threading.Event()
    try:
        shared.gate.alone(shared.close)  # waits for this process's transactions to end
        shared.close_writer_lock()
    finally:
        _done(key, busy)


class _Db:
    """A named database's handle, read from the shared environment at each use.

    The handles change when a read-only environment is reopened writable (`_Shared`).
    """

    def __init__(self, index: int) -> None:
        self.index = index

    def __get__(self, backend: LMDBBackend, owner: object = None) -> Any:
        return backend._shared.dbs[self.index]


class LMDBBackend(Backend):
    """Records in one LMDB environment (a directory with data.mdb and lock.mdb)."""

    format = "msgpack"
    durable = True
    gapless_positions = True  # the position index's last key + 1, in the write transaction
    _events, _positions, _ids, _streams = _Db(0), _Db(1), _Db(2), _Db(3)
    _forks, _blobs, _snapshots, _meta = _Db(4), _Db(5), _Db(6), _Db(7)

    def __init__(
        self,
        path: str,
        *,
        map_size: int = DEFAULT_MAP_SIZE,
        max_readers: int = 256,
        lock_timeout: float = file_lock.DEFAULT_LOCK_TIMEOUT,
    ) -> None:
        self.location = path
        self._closed = False
        self.lock_timeout = lock_timeout
        """Seconds a write waits for another process's writer (see `_Shared.writer_turn`)."""
        self._shared = _acquire(path, map_size, max_readers, lock_timeout)
        self._gate = self._shared.gate

    @property
    def _env(self) -> lmdb.Environment:
        """The shared environment (read-only until this process's first write)."""
        return self._shared.env

    # -- transactions ----------------------------------------------------------------------

    def _run(
        self,
        fn: Callable[[Txn], T],
        *,
        write: bool = False,
        sync: bool = False,
        buffers: bool = False,
    ) -> T:
        """Run fn in a transaction; grow the map when full, adopt another process's growth.

        With `buffers`, keys and values are memoryviews into the map, valid only inside fn:
        decoding straight from them saves copying every value once.
        """
        if write:
            with self._turn_to_write():
                return self._attempts(fn, write=True, sync=sync, buffers=False)
        return self._attempts(fn, write=False, sync=False, buffers=buffers)

    @contextlib.contextmanager
    def _turn_to_write(self) -> Iterator[None]:
        """Hold this process's turn to write: `write_lock`, then `_Shared.writer_turn`.

        `_Shared.before_write` runs first, its LMDB errors translated.
        """
        shared = self._shared
        with shared.write_lock, shared.writer_turn(self.lock_timeout):
            try:
                shared.before_write()
            except lmdb.Error as exc:
                raise _translate(exc, self.location) from exc
            yield

    def _attempts(self, fn: Callable[[Txn], T], *, write: bool, sync: bool, buffers: bool) -> T:
        """Run fn until it commits without hitting a full (or remotely grown) map."""
        while True:
            self._gate.enter()
            txn: Txn | None = None
            try:
                if self._closed:
                    raise StoreClosedError(f"LMDB store {self.location} is closed")
                txn = self._env.begin(buffers=True) if buffers else self._env.begin(write=write)
                try:
                    result = fn(txn)
                except BaseException as exc:
                    txn.abort()
                    # The traceback keeps fn's frames, and their cursors, past the gate:
                    # their locals go now (the lines stay).
                    traceback.clear_frames(exc.__traceback__)
                    raise
                if write:
                    txn.commit()
                    if sync:
                        self._env.sync(True)
                else:
                    txn.abort()
                return result
            except lmdb.MapFullError:
                if self._env.reader_check():
                    continue  # dead readers held the pages: they are free now
                grow_from: int | None = self._env.info()["map_size"]
            except lmdb.MapResizedError:
                grow_from = None
            except lmdb.Error as exc:
                raise _translate(exc, self.location) from exc
            finally:
                # Freed while the gate still holds a close off: a transaction object that
                # outlives its environment's close crashes the process when it goes.
                txn = None
                self._gate.leave()
            self._gate.alone(functools.partial(_resize, self._env, grow_from))

    def disk_paths(self) -> list[Path]:
        """The environment's directory."""
        return [Path(self.location)]

    def stats(self) -> dict[str, int]:
        """Group-commit counters of this environment: commits and the appends they held."""
        queue = self._shared.appends
        return {"commits": queue.commits, "jobs": queue.jobs}

    @property
    def map_size(self) -> int:
        """The current map size in bytes (grows by doubling when full)."""
        size: int = self._env.info()["map_size"]
        return size

    @property
    def env(self) -> lmdb.Environment:
        """The underlying LMDB environment (for tooling and tests; do not resize it).

        Writable: a read-only one is reopened first, as for a write of the backend.
        """
        with self._turn_to_write():
            pass
        return self._env

    def _damaged(self, txn: Txn, key: bytes, message: str) -> CorruptionError:
        """A CorruptionError for the record at an ``events`` key, naming its stream and seq."""
        info = txn.get(bytes(key[:-8]), db=self._streams)
        try:
            stream = _decode_stream(info)[0] if info is not None else None
        except DECODE_ERRORS:
            stream = None
        return CorruptionError(
            message, stream=stream, seq=_U64.unpack(key[-8:])[0], location=self.location
        )

    def _row(self, txn: Txn, key: bytes, value: bytes, stream: str | None = None) -> Record:
        """Decode a stored record; CorruptionError if damaged or not of the expected stream."""
        try:
            rec = unpack_row(value)
        except DECODE_ERRORS as exc:
            raise self._damaged(txn, key, f"stored record does not decode: {exc}") from exc
        if stream is not None and rec.stream != stream:
            raise self._damaged(txn, key, f"stored record names stream {rec.stream!r}")
        return rec

    # -- append ----------------------------------------------------------------------------

    def append(self, records: Sequence[Record], durability: Durability) -> list[int]:
        """Insert the records in one write transaction; positions follow the position index."""
        if not records:
            return []
        stream = records[0].stream
        skey = stream_key(stream)

        def write(txn: Txn) -> list[int]:
            first = records[0].seq
            info = txn.get(skey, db=self._streams)
            if info is not None and _stream_entry(info, self.location)[1] >= first:
                raise Conflict("seq", f"{stream!r} seq {first}")
            if first == 1 and txn.get(skey, db=self._forks) is not None:
                raise Conflict("seq", f"{stream!r} is a fork")
            cur = txn.cursor(db=self._positions)
            head = _U64.unpack(cur.key())[0] if cur.last() else 0
            keys = [skey + _U64.pack(r.seq) for r in records]
            positions = list(range(head + 1, head + 1 + len(records)))
            ids = [(r.id.encode(), k) for r, k in zip(records, keys, strict=True)]
            if txn.cursor(db=self._ids).putmulti(ids, overwrite=False)[1] != len(ids):
                raise Conflict("id")
            rows = [(k, pack_row(r, p)) for r, k, p in zip(records, keys, positions, strict=True)]
            if txn.cursor(db=self._events).putmulti(rows, overwrite=False)[1] != len(rows):
                raise Conflict("seq", f"{stream!r}")
            cur.putmulti(
                [(_U64.pack(p), k) for p, k in zip(positions, keys, strict=True)], append=True
            )
            last = records[-1]
            txn.put(skey, _encode((stream, last.seq, last.ts)), db=self._streams)
            return positions

        positions: list[int] = self._shared.appends.run(
            write, durability == Durability.FSYNC, self._commit_group
        )
        return positions

    def _commit_group(self, group: list[Job]) -> bool:
        """Run queued appends in one write transaction; commit and sync once.

        The jobs run straight in the transaction; if one of several fails (a Conflict), the
        transaction is dropped and the group reruns with each job in a nested transaction, so
        the failure undoes only that job. A full map aborts everything, grows the map and
        reruns. Returns whether it committed.
        """
        sync = any(j.sync for j in group)
        return commit_group(
            group,
            lambda nested: self._run(
                functools.partial(self._run_jobs, group, nested), write=True, sync=sync
            ),
        )

    def _run_jobs(self, group: list[Job], nested: bool, txn: Txn) -> None:
        """Each job in `txn`, or each in its own child of it (a failure then stays its own)."""
        for job in group:
            job.result = job.error = None
            if not nested:
                job.result = job.fn(txn)
                continue
            child = self._env.begin(write=True, parent=txn)
            try:
                job.result = job.fn(child)
            except (lmdb.MapFullError, lmdb.MapResizedError):
                child.abort()
                raise
            except Exception as exc:
                child.abort()
                job.error = exc
            else:
                child.commit()

    # -- reads -----------------------------------------------------------------------------

    def read(
        self,
        stream: str,
        first: int,
        last: int | None,
        *,
        backwards: bool = False,
        limit: int | None = None,
    ) -> list[Record]:
        """A cursor walk over the stream's key range."""
        if limit == 0 or (last is not None and last < first):
            return []
        skey = stream_key(stream)
        lo = skey + _U64.pack(max(first, 0))
        hi = skey + (_SEQ_MAX if last is None else _U64.pack(last))

        def scan(txn: Txn) -> list[Record]:
            cur = txn.cursor(db=self._events)
            if backwards:
                return self._backward(txn, stream, cur, lo, hi, limit)
            return self._forward(txn, stream, cur, lo, hi, limit)

        return self._run(scan, buffers=True)

    def _forward(
        self, txn: Txn, stream: str, cur: Any, lo: bytes, hi: bytes, limit: int | None
    ) -> list[Record]:
        out: list[Record] = []
        if not cur.set_range(lo):
            return out
        decode = unpack_row
        key = lo
        try:
            for key, value in cur.iternext():
                if bytes(key) > hi:
                    break
                rec = decode(value)
                if rec.stream != stream:
                    return [self._row(txn, key, value, stream)]  # raises
                out.append(rec)
                if limit is not None and len(out) >= limit:
                    break
        except DECODE_ERRORS:
            self._row(txn, key, cur.value(), stream)  # raises, saying where
            raise
        return out

    def _backward(
        self, txn: Txn, stream: str, cur: Any, lo: bytes, hi: bytes, limit: int | None
    ) -> list[Record]:
        out: list[Record] = []
        pairs = _positioned(cur, lo, hi, backwards=True)
        if pairs is None:
            return out
        row = self._row
        for k, v in pairs:
            if bytes(k) < lo:
                break
            out.append(row(txn, k, v, stream))
            if limit is not None and len(out) >= limit:
                break
        return out

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
        """`read` decoded to events, each record in one typed decode when that is exact.

        That is when the payload is plain, of its type's current schema version, with no meta;
        any other record goes through `_row` and the codec, which upcast or raise the
        CorruptionError that says where. A record of the stream ends the range by its seq; the
        key is only compared when the record is not plainly the stream's.
        """
        types = codec.payload_types()
        if types is None or limit == 0 or (last is not None and last < first):
            return super().read_events(stream, first, last, codec, backwards=backwards, limit=limit)
        skey = stream_key(stream)
        lo = skey + _U64.pack(max(first, 0))
        hi = skey + (_SEQ_MAX if last is None else _U64.pack(last))
        end = (2**64 - 1) if last is None else last
        decode, current = _typed_decoder(types.union).decode, types.current
        location = self.location
        to_event, row = codec.to_event, self._row

        slow: list[int] = []  # indexes of records left for the codec, after the transaction

        def scan(txn: Txn) -> list[RecordedEvent | Record]:
            out: list[RecordedEvent | Record] = []
            slow.clear()
            cur = txn.cursor(db=self._events)
            values = _positioned(cur, lo, hi, backwards, keys=False)
            if values is None:
                return out
            append = out.append
            for value in values:  # the cursor stays on the yielded record: cur.key() is its key
                try:
                    r = decode(value)
                except DECODE_ERRORS:
                    r = None
                if r is not None and r.stream == stream:
                    if r.seq > end if not backwards else r.seq < first:
                        break
                    event = exact_event(r, current, stream, r.position)
                    if event is None:
                        slow.append(len(out))
                        append(row(txn, bytes(cur.key()), value, stream))
                    else:
                        append(event)
                else:
                    k = bytes(cur.key())
                    if (k < lo) if backwards else (k > hi):
                        break
                    slow.append(len(out))
                    append(row(txn, k, value, stream))  # raises if damaged
                if limit is not None and len(out) >= limit:
                    break
            return out

        return _decoded(self._run(scan, buffers=True), slow, to_event, location)

    def read_all_events(self, after: int, limit: int, codec: Codec) -> list[RecordedEvent]:
        """`read_all` decoded to events, each record in one typed decode when that is exact."""
        types = codec.payload_types()
        if types is None or limit <= 0:
            return super().read_all_events(after, limit, codec)
        decode, current = _typed_decoder(types.union).decode, types.current
        location = self.location
        to_event, row = codec.to_event, self._row

        slow: list[int] = []  # as in `read_events`

        def scan(txn: Txn) -> list[RecordedEvent | Record]:
            out: list[RecordedEvent | Record] = []
            slow.clear()
            cur = txn.cursor(db=self._positions)
            if not cur.set_range(_U64.pack(max(after, 0) + 1)):
                return out
            get, events, append = txn.get, self._events, out.append
            for _, ekey in cur.iternext():
                value = get(ekey, db=events)
                if value is None:
                    raise self._damaged(txn, ekey, "position index points to a missing record")
                try:
                    r = decode(value)
                except DECODE_ERRORS:
                    event = None
                else:
                    event = exact_event(r, current, r.stream, r.position)
                if event is None:
                    slow.append(len(out))
                    append(row(txn, bytes(ekey), value))
                else:
                    append(event)
                if len(out) >= limit:
                    break
            return out

        return _decoded(self._run(scan, buffers=True), slow, to_event, location)

    def read_all(self, after: int, limit: int) -> list[Record]:
        """Walk the position index and fetch each record."""
        if limit <= 0:
            return []

        def scan(txn: Txn) -> list[Record]:
            out: list[Record] = []
            cur = txn.cursor(db=self._positions)
            if not cur.set_range(_U64.pack(max(after, 0) + 1)):
                return out
            get = txn.get
            events = self._events
            row = self._row
            for _, ekey in cur.iternext():
                value = get(ekey, db=events)
                if value is None:
                    raise self._damaged(txn, ekey, "position index points to a missing record")
                out.append(row(txn, ekey, value))
                if len(out) >= limit:
                    break
            return out

        return self._run(scan, buffers=True)

    def last(self, stream: str) -> Record | None:
        """The record before the end of the stream's key range."""
        skey = stream_key(stream)

        def find(txn: Txn) -> Record | None:
            cur = txn.cursor(db=self._events)
            found = cur.prev() if cur.set_range(skey + _SEQ_MAX) else cur.last()
            if not found:
                return None
            key = bytes(cur.key())
            if len(key) != len(skey) + 8 or not key.startswith(skey):
                return None
            return self._row(txn, key, cur.value(), stream)

        return self._run(find, buffers=True)

    def id_index_problem(self, records: Sequence[Record]) -> tuple[Record, str] | None:
        """The first record whose id the ``ids`` sub-database does not map to its own key."""

        def check(txn: Txn) -> tuple[Record, str] | None:
            for rec in records:
                key = txn.get(rec.id.encode(), db=self._ids)
                if key != event_key(rec.stream, rec.seq):
                    where = "has no entry" if key is None else "points to another record"
                    return rec, f"the id index {where} for event {rec.id}"
            return None

        return self._run(check)

    def get_by_ids(self, ids: Sequence[str]) -> dict[str, Record]:
        """Look each id up in the id index, then its record."""

        def find(txn: Txn) -> dict[str, Record]:
            out: dict[str, Record] = {}
            for event_id in ids:
                ekey = txn.get(event_id.encode(), db=self._ids)
                if ekey is None:
                    continue
                value = txn.get(ekey, db=self._events)
                if value is None:
                    raise self._damaged(txn, ekey, f"id index points to a missing {event_id}")
                out[event_id] = self._row(txn, ekey, value)
            return out

        return self._run(find)

    # -- streams and forks -----------------------------------------------------------------

    def create_fork(self, fork: ForkInfo) -> None:
        """Add a fork entry unless the stream has records or one already."""
        skey = stream_key(fork.stream)

        def write(txn: Txn) -> None:
            if (
                txn.get(skey, db=self._streams) is not None
                or txn.get(skey, db=self._forks) is not None
            ):
                raise Conflict("fork", fork.stream)
            value = _encode((fork.stream, fork.parent, fork.at_seq, fork.ts))
            txn.put(skey, value, db=self._forks)

        self._run(write, write=True, sync=True)

    def get_fork(self, stream: str) -> ForkInfo | None:
        """The fork entry, if any."""
        value = self._run(lambda txn: txn.get(stream_key(stream), db=self._forks))
        return None if value is None else _fork_entry(value, self.location)

    def list_forks(self, parent: str | None = None) -> list[ForkInfo]:
        """Fork entries sorted by stream name."""

        def scan(txn: Txn) -> list[bytes]:
            return [v for _, v in txn.cursor(db=self._forks).iternext()]

        forks = [_fork_entry(v, self.location) for v in self._run(scan)]
        forks.sort(key=lambda f: f.stream)
        return [f for f in forks if parent is None or f.parent == parent]

    def list_streams(self) -> list[StreamInfo]:
        """Streams with own records or fork entries, sorted by name."""

        def scan(txn: Txn) -> tuple[list[bytes], list[bytes]]:
            own = [v for _, v in txn.cursor(db=self._streams).iternext()]
            forks = [v for _, v in txn.cursor(db=self._forks).iternext()]
            return own, forks

        own_values, fork_values = self._run(scan)
        own = {t[0]: t for t in (_stream_entry(v, self.location) for v in own_values)}
        forks = {f.stream: f for f in (_fork_entry(v, self.location) for v in fork_values)}
        out = []
        for name in sorted(own.keys() | forks.keys()):
            mine = own.get(name)
            last = (mine[1], mine[2]) if mine else None
            out.append(StreamInfo.of(name, last, forks.get(name)))
        return out

    def check_storage(self) -> str | None:
        """Walk the B-trees of the current snapshot without liblmdb (see `lmdb_pages`)."""
        fd = self._shared.data_fd
        return self._run(lambda txn: check_file(fd, txn.id()))

    def head_position(self) -> int:
        """The last key of the position index."""

        def find(txn: Txn) -> int:
            cur = txn.cursor(db=self._positions)
            return _U64.unpack(cur.key())[0] if cur.last() else 0

        return self._run(find)

    # -- blobs and snapshots ---------------------------------------------------------------

    def get_blob(self, key: str) -> bytes | None:
        """A store-level value."""
        bkey = _blob_key(key)
        value: bytes | None = self._run(lambda txn: txn.get(bkey, db=self._blobs))
        return value

    def put_blob(self, key: str, value: bytes) -> None:
        """Set a store-level value, synced to disk."""
        bkey, data = _blob_key(key), bytes(value)
        self._run(lambda txn: txn.put(bkey, data, db=self._blobs), write=True, sync=True)

    def _snapshot_prefix(self, stream: str, name: str, version: int) -> bytes:
        """(stream, name, version) as a key prefix, a seq after it within LMDB's 511 bytes.

        A long stream name and a long projection name may not both fit: such a pair is keyed
        by a digest of both, after a NUL (no stream key starts with one), so it never collides
        with a plain key.
        """
        pair = stream_key(stream) + key_part(name.encode())
        if len(pair) > _MAX_KEY - 16:
            pair = b"\x00\x03" + hashlib.blake2b(pair, digest_size=32).digest()
        return pair + _I64.pack(version)

    def save_snapshot(self, stream: str, name: str, version: int, seq: int, data: bytes) -> None:
        """Keep a snapshot under (stream, name, version, seq)."""
        key = self._snapshot_prefix(stream, name, version) + _U64.pack(seq)
        value = bytes(data)
        self._run(lambda txn: txn.put(key, value, db=self._snapshots), write=True)

    def load_snapshot(
        self, stream: str, name: str, version: int, max_seq: int | None
    ) -> tuple[int, bytes] | None:
        """The snapshot with the highest seq <= max_seq."""
        prefix = self._snapshot_prefix(stream, name, version)
        if max_seq is not None and max_seq < 0:
            return None
        bound = prefix + (_SEQ_MAX if max_seq is None else _U64.pack(max_seq))

        def find(txn: Txn) -> tuple[int, bytes] | None:
            cur = txn.cursor(db=self._snapshots)
            found = (cur.key() == bound or cur.prev()) if cur.set_range(bound) else cur.last()
            if not found:
                return None
            key = cur.key()
            if len(key) != len(prefix) + 8 or not key.startswith(prefix):
                return None
            return _U64.unpack(key[-8:])[0], bytes(cur.value())

        return self._run(find)

    def delete_snapshot(self, stream: str, name: str, version: int, seq: int) -> None:
        """Drop one snapshot."""
        key = self._snapshot_prefix(stream, name, version) + _U64.pack(seq)
        self._run(lambda txn: txn.delete(key, db=self._snapshots), write=True)

    def drop_snapshots(self, stream: str) -> int:
        """Remove every snapshot of a stream, synced.

        Snapshots keyed by a digest (a long stream name with a long projection name, see
        `_snapshot_prefix`) cannot be told apart by stream: they are all dropped (caches).
        """
        prefixes = (stream_key(stream), b"\x00\x03")

        def drop(txn: Txn) -> int:
            cur = txn.cursor(db=self._snapshots)
            doomed: list[bytes] = []
            for prefix in prefixes:
                if not cur.set_range(prefix):
                    continue
                for key in cur.iternext(keys=True, values=False):
                    if not bytes(key).startswith(prefix):
                        break
                    doomed.append(bytes(key))
            for key in doomed:
                txn.delete(key, db=self._snapshots)
            return len(doomed)

        return self._run(drop, write=True, sync=True)

    def snapshot_seqs(self, stream: str, name: str, version: int) -> list[int]:
        """Seqs of the stored snapshots, ascending (a cursor walk over the key prefix)."""
        prefix = self._snapshot_prefix(stream, name, version)

        def scan(txn: Txn) -> list[int]:
            cur = txn.cursor(db=self._snapshots)
            seqs: list[int] = []
            if not cur.set_range(prefix):
                return seqs
            for key in cur.iternext(keys=True, values=False):
                if len(key) != len(prefix) + 8 or not key.startswith(prefix):
                    break
                seqs.append(_U64.unpack(key[-8:])[0])
            return seqs

        return self._run(scan)

    # -- lifecycle -------------------------------------------------------------------------

    def sync(self) -> None:
        """Flush everything committed so far to stable storage."""
        self._run(lambda txn: None)
        if self._shared.writable:
            self._env.sync(True)
        else:  # LMDB refuses to sync a read-only environment; what it would do is this
            os.fsync(self._shared.data_fd)

    def close(self) -> None:
        """Release this handle; the environment closes with the process's last handle."""
        with _OPEN_LOCK:
            if self._closed:
                return
            self._closed = True
        _release(self._shared)

    @classmethod
    def exists_at(cls, path: str) -> bool:
        """Whether the directory holds an LMDB environment."""
        return bool(path) and holds_store(Path(path), "lmdb")

    @classmethod
    def from_url(cls, url: str, path: str, options: dict[str, str]) -> LMDBBackend:
        """`lmdb:///dir`; options `map_size` (bytes), `max_readers`, `lock_timeout` (seconds)."""
        if not path:
            raise UsageError(f"{url!r} names no directory (use lmdb:///path/to/dir)")
        opts = dict(options)
        lock_timeout = file_lock.timeout_option(opts.pop("lock_timeout", None))
        kwargs: dict[str, int] = {}
        for name in ("map_size", "max_readers"):
            if name in opts:
                raw = opts.pop(name)
                try:
                    kwargs[name] = int(raw)
                except ValueError:
                    raise UsageError(f"option {name} must be an integer, got {raw!r}") from None
                if not 1 <= kwargs[name] <= _OPTION_MAX[name]:
                    raise UsageError(
                        f"option {name} must be between 1 and {_OPTION_MAX[name]}, got {raw!r}"
                    )
        if opts:
            raise UsageError(f"unknown option(s) for lmdb://: {', '.join(sorted(opts))}")
        return cls(path, lock_timeout=lock_timeout, **kwargs)


_OPTION_MAX = {"map_size": 2**62, "max_readers": 2**31 - 1}
"""What LMDB takes (a size_t, an unsigned int): larger values overflow."""


def _decoded(
    rows: list[Any],
    slow: list[int],
    to_event: Callable[[Record, str], RecordedEvent],
    where: str,
) -> list[RecordedEvent]:
    """A scan's events, with the records at the `slow` indexes decoded by the codec.

    They are decoded here, after the read transaction: the codec may load a compression
    dictionary, which takes a transaction of its own, and a map resize waiting for the first
    one would wait for ever on the second (the gate is not re-entrant).
    """
    for i in slow:
        rows[i] = to_event(rows[i], where)
    return rows


def _positioned(cur: Any, lo: bytes, hi: bytes, backwards: bool, *, keys: bool = True) -> Any:
    """An iterator of (key, value), or of values, from `lo` up (or from `hi` down); or None."""
    if not backwards:
        return cur.iternext(keys=keys) if cur.set_range(lo) else None
    if cur.set_range(hi):
        if bytes(cur.key()) != hi and not cur.prev():
            return None
    elif not cur.last():
        return None
    return cur.iterprev(keys=keys)


def _blob_key(key: str) -> bytes:
    raw = key.encode()
    if not raw or len(raw) > _MAX_NAME_KEY:
        raise UsageError(f"blob key must be 1-{_MAX_NAME_KEY} bytes, got {len(raw)}")
    return raw


_CORRUPT = (
    lmdb.CorruptedError,
    lmdb.PageNotFoundError,
    lmdb.InvalidError,
    lmdb.VersionMismatchError,
    lmdb.PageFullError,
    lmdb.IncompatibleError,
)


def _translate(exc: lmdb.Error, location: str) -> Exception:
    """The one place LMDB's errors become eventlog's."""
    if isinstance(exc, _CORRUPT):
        return CorruptionError(f"LMDB reports damage: {exc}", location=location)
    if isinstance(exc, lmdb.BadValsizeError):  # a key too long: a bug here, not damage
        return UsageError(f"LMDB store {location}: a key is too long for LMDB ({exc})")
    return BackendUnavailableError(f"LMDB store {location}: {exc}")
