"""JSONL backend: a directory of human-readable logs, one file per stream, one event per line.

Layout of `jsonl:///dir`:

    dir/streams/<slug>~<hash>.jsonl   header line (exact stream name, fork), then one event a line
    dir/index.log                     one line per committed append (and per fork): the commit log
    dir/lock                          fcntl lock taken by writers
    dir/blobs/, dir/snapshots/        one file per value, replaced atomically

The stream files are the truth; `index.log` is a cache that says which bytes are committed, at
which store-wide positions, with which ids. It is rebuilt from the stream files when missing or
stale, and complete batches a crashed writer left unindexed are rolled forward into it. An append
is committed when its index line is written: readers never look past the indexed end of a file.
See docs/backends/jsonl.md for durability levels, recovery and locking.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import functools
import heapq
import logging
import os
import threading
import time
from array import array
from binascii import hexlify
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Generic, NamedTuple, TypeVar

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
from eventlog.backends.group_commit import GroupQueue, Job
from eventlog.backends.jsonl_names import is_stem, stem_for
from eventlog.encryption import ENCRYPTED
from eventlog.errors import (
    BackendUnavailableError,
    CorruptionError,
    SchemaVersionError,
    StoreClosedError,
    UsageError,
)
from eventlog.events import RecordedEvent, is_event_id

if TYPE_CHECKING:
    from eventlog.codec import Codec

log = logging.getLogger("eventlog.backends.jsonl")

FORMAT_VERSION = 1
BATCH_SYNC_INTERVAL = 1.0
"""With durability "batch", written files are fsynced when this many seconds have passed."""
_MAX_OPEN_FILES = 256
_NO_JSON = msgspec.Raw()


class Line(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    """One event as stored on a line (key order is the field order)."""

    seq: int
    pos: int
    id: str
    ts: int
    type: str
    v: int
    batch_end: int
    """Seq of the last event of the append this line belongs to (a torn batch is detectable)."""
    causation_id: str | None = None
    correlation_id: str | None = None
    hash: str
    codec: int = 0
    meta: msgspec.Raw = _NO_JSON
    meta_b64: str | None = None
    """An encrypted meta map (`codec` has the ENCRYPTED flag), base64."""
    data_b64: str | None = None
    """A compressed or encrypted payload (`codec` != 0), base64."""
    data: msgspec.Raw = _NO_JSON
    """The payload JSON exactly as encoded by the core (the hash covers these bytes); last, so
    a reader can slice it out of the line instead of parsing it twice (see `_decode_line`)."""


class _Staged(NamedTuple):
    """An append whose lines are written, waiting for its group's sync and index line."""

    st: _Stream
    batch: Batch
    durability: Durability


class Header(msgspec.Struct, kw_only=True, omit_defaults=True):
    """First line of a stream file: the exact stream name and its fork point."""

    eventlog_jsonl: int
    stream: str
    parent: str | None = None
    at_seq: int = 0
    fork_ts: int = 0


class Repair(msgspec.Struct, frozen=True):
    """Bytes cut from a file on recovery (a torn or unfinished append left by a crash)."""

    file: str
    line: int
    offset: int
    length: int
    reason: str


class Batch(NamedTuple):
    """One committed append: `n` events of a stream from `seq`, at byte range [offset, end)."""

    pos: int
    n: int
    stem: str
    seq: int
    offset: int
    end: int
    ts: int
    ids: tuple[str, ...]


class _Stream:
    """What the backend knows of one stream file, and its committed appends.

    The appends (index lines) are kept in flat arrays rather than as one object each: for the
    i-th append, `seqs[i]` is its first seq, `offsets[i]` its byte offset and `positions[i]`
    the position of its first event; it ends where the next one starts (appends of a file are
    contiguous, `_follows`), the last at `end`. `ids` holds every event's id by seq (the same
    string objects as the backend's id map), from `seqs[0]` on.
    """

    __slots__ = (
        "end",
        "fd",
        "folder",
        "fork",
        "header_end",
        "ids",
        "last_seq",
        "last_ts",
        "name",
        "offsets",
        "positions",
        "seqs",
        "stem",
    )

    def __init__(self, stem: str, folder: Path, header: Header, header_end: int) -> None:
        self.stem = stem
        self.folder = folder
        self.seqs = array("q")
        self.offsets = array("q")
        self.positions = array("q")
        self.ids: list[str] = []
        self.last_ts = 0
        """Time of the last committed event (0 when none)."""
        self.fd: int | None = None
        self.name = ""
        self.fork: ForkInfo | None = None
        self.header_end = self.end = self.last_seq = 0
        """`end`: the byte offset just past the last committed line; `last_seq`: the seq of
        the last committed own line (first_seq - 1 when none)."""
        self.set_header(header, header_end)

    @property
    def path(self) -> Path:
        """The stream file (made when asked: a path object per stream costs memory)."""
        return self.folder / f"{self.stem}.jsonl"

    @property
    def first_seq(self) -> int:
        """Seq of the first own line."""
        return self.fork.at_seq + 1 if self.fork else 1

    def add(self, b: Batch) -> None:
        """Record a committed append."""
        self.seqs.append(b.seq)
        self.offsets.append(b.offset)
        self.positions.append(b.pos)
        self.ids.extend(b.ids)
        self.end = b.end
        self.last_seq = b.seq + b.n - 1
        self.last_ts = b.ts

    def set_header(self, header: Header, header_end: int) -> None:
        """Take the header of the file as (re)written, keeping the appends known of it."""
        self.name = header.stream
        self.fork = (
            ForkInfo(header.stream, header.parent, header.at_seq, header.fork_ts)
            if header.parent is not None
            else None
        )
        self.header_end = header_end
        if not self.seqs:
            self.end = header_end
            self.last_seq = self.first_seq - 1

    def append_end(self, i: int) -> int:
        """Byte offset just past the i-th append."""
        return self.offsets[i + 1] if i + 1 < len(self.offsets) else self.end

    def line_no(self, seq: int) -> int:
        """1-based line number of a seq in the file (line 1 is the header)."""
        return seq - self.first_seq + 2


_line_encoder = msgspec.json.Encoder()
_line_decoder = msgspec.json.Decoder(Line)
_header_decoder = msgspec.json.Decoder(Header)


def _corrupt(path: Path, line: int, what: str) -> CorruptionError:
    """An error naming a file and line (a header, or a line of no known stream)."""
    return CorruptionError(what, location=f"{path} line {line}")


def _damaged(st: _Stream, seq: int, what: str) -> CorruptionError:
    """An error naming the file, line, stream and seq of a stream line."""
    return CorruptionError(
        what, stream=st.name, seq=seq, location=f"{st.path} line {st.line_no(seq)}"
    )


def _replaced(st: _Stream, seq: int, found: str, listed: str) -> CorruptionError:
    """The error for a line holding another event than the one index.log lists at its seq."""
    return _damaged(
        st,
        seq,
        f"holds event {found}, but index.log lists event {listed} at this seq as committed: "
        "the file was replaced or edited (a copy from another store?)",
    )


_SYNC_POOL: list[ThreadPoolExecutor] = []
_SYNC_POOL_LOCK = threading.Lock()


def _sync_pool() -> ThreadPoolExecutor:
    """Threads for parallel fdatasync calls (made on first use, shared by every store)."""
    with _SYNC_POOL_LOCK:
        if not _SYNC_POOL:
            _SYNC_POOL.append(ThreadPoolExecutor(8, thread_name_prefix="eventlog-jsonl-sync"))
        return _SYNC_POOL[0]


P = TypeVar("P")
_HexHash = Annotated[str, msgspec.Meta(min_length=64, max_length=64)]
"""A SHA-256 hex digest's length (a pattern would cost a regex match per line; `verify` checks
the digest itself)."""


class _TypedLine(msgspec.Struct, Generic[P], kw_only=True, gc=False):
    """A line decoded in one pass with its payload typed: the read path's form of `Line`.

    `P` is the tagged union of the registered payload classes (`eventlog.codec.PayloadTypes`).
    A compressed line has no `data` (None here); such lines, and any this form rejects, are
    read through `Line` and the codec, which raise the errors that say what is wrong.
    """

    seq: int
    pos: int
    id: str
    ts: int
    type: str
    v: int
    batch_end: int
    causation_id: str | None = None
    correlation_id: str | None = None
    hash: _HexHash
    codec: int = 0
    meta: dict[str, Any] = {}
    data: P | None = None


@functools.lru_cache(maxsize=4)
def _typed_line_decoder(union: Any) -> msgspec.json.Decoder[_TypedLine[Any]]:
    return msgspec.json.Decoder(_TypedLine[union])


def _line_parts(records: Sequence[Record], first_pos: int) -> list[bytes]:
    """The lines of one append as buffers to write in order (`_write_all`), newline-terminated.

    A plain event (no links, no meta, uncompressed) is formatted directly: its envelope from a
    template, then its stored payload as is (not copied into the line), then the closing brace;
    the same bytes as encoding its `Line`, at about a third of the cost. Ids are canonical UUIDs
    (the codec checks them) and types go through the JSON encoder once each, so nothing in the
    template needs escaping.
    """
    end = records[-1].seq
    out: list[bytes] = []
    add = out.append
    for i, r in enumerate(records):
        if r.codec == 0 and not r.meta and r.causation_id is None and r.correlation_id is None:
            kind = _TYPE_JSON.get(r.type)
            if kind is None:
                kind = _TYPE_JSON[r.type] = _line_encoder.encode(r.type)
            add(
                PLAIN_HEAD
                % (r.seq, first_pos + i, r.id.encode(), r.ts, kind, r.version, end, hexlify(r.hash))
            )
            add(r.data)
            add(b"}\n")
        else:
            add(_line_encoder.encode(_line(r, first_pos + i, end)) + b"\n")
    return out


def _write_all(fd: int, parts: list[bytes], offset: int) -> int:
    """Write the buffers in order at `offset` with as few calls as the system allows."""
    total = 0
    i = 0
    while i < len(parts):
        chunk = parts[i : i + _IOV_MAX]
        want = sum(map(len, chunk))
        done = os.pwritev(fd, chunk, offset + total)
        total += done
        if done < want:  # a short write: finish it as one buffer
            rest = b"".join(chunk)[done:]
            while rest:
                n = os.pwrite(fd, rest, offset + total)
                total += n
                rest = rest[n:]
        i += _IOV_MAX
    return total


def _append(fd: int, data: bytes) -> None:
    """Append all of `data` to a file (a short write is finished; ENOSPC and the like raise).

    An index line is the commit point: returning after part of it would acknowledge an append
    whose line is torn.
    """
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


_IOV_MAX = min(os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in os.sysconf_names else 16, 1024)
PLAIN_HEAD = (
    b'{"seq":%d,"pos":%d,"id":"%s","ts":%d,"type":%s,"v":%d,"batch_end":%d,"hash":"%s","data":'
)
"""A plain event's line up to its payload (also written by the benchmark's format floor)."""
_TYPE_JSON: dict[str, bytes] = {}
"""Event type -> its JSON string literal, for `PLAIN_HEAD`."""


def _line(r: Record, pos: int, end: int) -> Line:
    return Line(
        seq=r.seq,
        pos=pos,
        id=r.id,
        ts=r.ts,
        type=r.type,
        v=r.version,
        batch_end=end,
        data=msgspec.Raw(r.data) if r.codec == 0 else _NO_JSON,
        codec=r.codec,
        data_b64=base64.b64encode(r.data).decode() if r.codec else None,
        meta=msgspec.Raw(r.meta) if r.meta and not r.codec & ENCRYPTED else _NO_JSON,
        meta_b64=base64.b64encode(r.meta).decode() if r.meta and r.codec & ENCRYPTED else None,
        causation_id=r.causation_id,
        correlation_id=r.correlation_id,
        hash=r.hash.hex(),
    )


_DATA_KEY = b',"data":'


def _decode_line(raw: bytes) -> tuple[Line, bytes]:
    """Decode a line and its stored payload bytes, parsing the payload JSON only once (later).

    The payload is the line's last value, so it is the bytes between the envelope's `,"data":`
    and the closing brace. That key is the first `,"data":` whose prefix closes into a valid
    envelope: one inside `meta` leaves an object open, and none can occur inside a string.
    Lines of another shape (edited by hand, compressed payloads) take the full decode.
    """
    cut = raw.find(_DATA_KEY)
    while cut >= 0 and raw[-1:] == b"}":
        try:
            line = _line_decoder.decode(raw[:cut] + b"}")
        except msgspec.DecodeError:
            cut = raw.find(_DATA_KEY, cut + 1)
            continue
        return line, raw[cut + len(_DATA_KEY) : -1]
    line = _line_decoder.decode(raw)
    data = base64.b64decode(line.data_b64 or "", validate=True) if line.codec else line.data
    return line, bytes(data)


def _to_record(line: Line, data: bytes, meta: bytes, stream: str, position: int) -> Record:
    return Record(
        line.id,
        stream,
        line.seq,
        line.ts,
        line.type,
        line.v,
        data,
        meta,
        line.causation_id,
        line.correlation_id,
        bytes.fromhex(line.hash),
        line.codec,
        position,
    )


def _index_line(b: Batch) -> bytes:
    return (
        f"B {b.pos} {b.n} {b.stem} {b.seq} {b.offset} {b.end} {b.ts} {','.join(b.ids)}\n"
    ).encode()


def _parse_index_line(raw: bytes) -> Batch | str:
    """A batch, or the stem named by a fork line; ValueError when malformed."""
    parts = raw.decode().split(" ")
    if parts[0] == "F" and len(parts) == 2 and is_stem(parts[1]):
        return parts[1]
    if parts[0] != "B" or len(parts) != 9 or not is_stem(parts[3]):
        raise ValueError("not an index line")
    pos, count, seq, offset, end, ts = (int(parts[i]) for i in (1, 2, 4, 5, 6, 7))
    ids = tuple(parts[8].split(","))
    if count < 1 or len(ids) != count or end <= offset:
        raise ValueError("inconsistent index line")
    return Batch(pos, count, parts[3], seq, offset, end, ts, ids)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(path: Path, data: bytes) -> None:
    """Replace a file with new content durably (temp file, fsync, rename, fsync the folder)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class _Scan(NamedTuple):
    """Committed-looking batches found in a file region, and where the good bytes end."""

    batches: list[Batch]
    good_end: int
    good_seq: int
    """Seq the first cut line would have had."""
    reason: str


def _scan_region(st: _Stream, data: bytes, start: int, first_seq: int) -> _Scan:
    """Parse lines found at `start`: complete appends, and where a torn tail begins."""
    batches: list[Batch] = []
    pending: list[Line] = []
    pending_off = start
    off = 0
    seq = first_seq
    while off < len(data):
        nl = data.find(b"\n", off)
        raw = data[off:] if nl < 0 else data[off:nl]
        if not raw.strip(b"\x00"):
            reason = "zero-filled tail"  # the size reached disk, the data did not (power loss)
            break
        if nl < 0:
            reason = "torn last line (no newline)"
            break
        try:
            line, _ = _decode_line(raw)
        except (msgspec.DecodeError, ValueError) as exc:
            raise _damaged(st, seq, f"not a valid event line: {exc}") from exc
        if line.seq != seq:
            raise _damaged(st, seq, f"has seq {line.seq}, expected {seq}")
        if not pending:
            pending_off = start + off
        pending.append(line)
        off = nl + 1
        seq += 1
        if line.seq == line.batch_end:
            first = pending[0]
            batches.append(
                Batch(
                    first.pos,
                    len(pending),
                    st.stem,
                    first.seq,
                    pending_off,
                    start + off,
                    line.ts,
                    tuple(x.id for x in pending),
                )
            )
            pending = []
    else:
        reason = "unfinished append (batch cut short)"
    good_end = pending_off if pending else start + off
    good_seq = pending[0].seq if pending else seq
    if good_end == start + len(data):
        return _Scan(batches, good_end, good_seq, "")
    # Say where the damage is, and that the cut starts earlier when it takes a whole append.
    reason += f" at seq {seq}"
    if good_seq != seq:
        reason += f", in the append that began at seq {good_seq}"
    return _Scan(batches, good_end, good_seq, reason)


def _read_header(path: Path) -> tuple[Header, int]:
    """A stream file's header and its length.

    CorruptionError if it is damaged; SchemaVersionError if a newer eventlog wrote it.
    """
    with open(path, "rb") as f:
        raw = f.readline(64 * 1024)
    if not raw.endswith(b"\n"):
        raise _corrupt(path, 1, "missing or torn header line")
    try:
        header = _header_decoder.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise _corrupt(path, 1, f"not a valid header: {exc}") from exc
    if header.eventlog_jsonl > FORMAT_VERSION:
        raise SchemaVersionError(
            f"format version {header.eventlog_jsonl} is newer than this eventlog's "
            f"{FORMAT_VERSION}: upgrade eventlog to open the store",
            location=f"{path} line 1",
        )
    if header.eventlog_jsonl < 1:  # never written: 1 is the first version
        raise _corrupt(path, 1, f"format version {header.eventlog_jsonl} does not exist")
    if stem_for(header.stream) != path.stem:
        raise _corrupt(path, 1, f"stream name {header.stream!r} does not match the file name")
    return header, len(raw)


def _stream_files(folder: Path) -> list[Path]:
    """The stream files in streams/, sorted (other files there are not the store's)."""
    return sorted(p for p in folder.glob("*.jsonl") if is_stem(p.stem))


class JSONLBackend(Backend):
    """One JSON Lines file per stream plus a commit index, safe across threads and processes."""

    format = "json"
    durable = True

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        lock_timeout: float = file_lock.DEFAULT_LOCK_TIMEOUT,
    ) -> None:
        self.root = Path(directory)
        self.location = f"jsonl://{self.root}"
        self.lock_timeout = lock_timeout
        self.repairs: list[Repair] = []
        """Everything cut from files on recovery by this backend object (also logged)."""
        self._streams_dir = self.root / "streams"
        self._index_path = self.root / "index.log"
        self._mutex = threading.RLock()
        self._writing = threading.Lock()
        """Held by the thread writing (a commit, a fork, close) from before the file lock on:
        `_mutex` is taken only once the file lock is, so this process's readers never wait
        while its writer waits for another process's."""
        self._closed = False
        self._open_fds = 0
        self._dirty: set[int] = set()
        self._appends = GroupQueue()
        """Appends of this backend object, committed in groups."""
        self._staged = 0
        """Appends of the group being committed staged so far (index lines still to write)."""
        self._index_start = self._index_end = 0
        """Where index.log ends before and after the group being committed writes its lines."""
        self._last_sync = time.monotonic()
        check_store_directory(self.root, "jsonl")
        subs = (self.root, self._streams_dir, self.root / "blobs", self.root / "snapshots")
        made = (*subs, self.root / "lock", self._index_path)
        if self._streams_dir.is_dir() and not all(p.exists() for p in made):
            # Refuse a store this eventlog cannot open before making its missing parts (an
            # index.log deleted, or directories git does not keep), as `_recover` would.
            for path in _stream_files(self._streams_dir):
                _read_header(path)
        for sub in subs:
            sub.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        self._index_fd = -1
        self._reset()
        try:
            with self._write_lock():
                self._recover()
        except BaseException:
            self.close()
            raise

    # -- in-memory state ---------------------------------------------------------------------

    def _reset(self) -> None:
        """Forget everything loaded from the index (before a full reload)."""
        for st in getattr(self, "_streams", {}).values():
            self._close_fd(st)
        self._streams: dict[str, _Stream] = {}
        # Every committed append in position order, one entry per array: its first position,
        # stream, first seq and number of events.
        self._positions = array("q")
        self._batch_streams: list[_Stream] = []
        self._batch_seqs = array("q")
        self._batch_ns = array("q")
        self._ids: dict[str, int] = {}
        self._head = 0
        self._seen = 0
        if self._index_fd >= 0:
            os.close(self._index_fd)
        self._index_fd = os.open(
            self._index_path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644
        )
        self._index_ino = os.fstat(self._index_fd).st_ino

    def _stream_by_stem(self, stem: str) -> _Stream:
        st = self._streams.get(stem)
        if st is None:
            header, end = _read_header(self._streams_dir / f"{stem}.jsonl")
            st = _Stream(stem, self._streams_dir, header, end)
            self._streams[stem] = st
        return st

    def _stream(self, name: str, *, on_disk: bool = False) -> _Stream | None:
        """The stream's state if it has a file this backend knows of (or any file: `on_disk`)."""
        stem = stem_for(name)
        st = self._streams.get(stem)
        if st is None and on_disk and (self._streams_dir / f"{stem}.jsonl").exists():
            st = self._stream_by_stem(stem)
        if st is not None and st.name != name:
            raise CorruptionError(f"{st.path}: holds stream {st.name!r}, not {name!r}")
        return st

    def _apply(self, b: Batch) -> None:
        st = self._stream_by_stem(b.stem)
        if b.n == 1:
            self._ids[b.ids[0]] = b.pos
        else:
            self._ids.update(zip(b.ids, range(b.pos, b.pos + b.n), strict=True))
        st.add(b)
        self._positions.append(b.pos)
        self._batch_streams.append(st)
        self._batch_seqs.append(b.seq)
        self._batch_ns.append(b.n)
        self._head = b.pos + b.n - 1

    def _follows(self, b: Batch) -> bool:
        """Whether an index line's append starts where its stream's indexed part ends.

        A line that does not (a lost or edited index line) would make reads skip or misplace
        events: the index is stale.
        """
        st = self._stream_by_stem(b.stem)
        return b.offset == st.end and b.seq == st.last_seq + 1

    def _apply_fork(self, stem: str) -> None:
        st = self._streams.get(stem)
        if st is None:
            self._stream_by_stem(stem)
            return
        self._close_fd(st)  # the file was replaced: the descriptor holds the old one
        st.set_header(*_read_header(st.path))

    def _refresh(self) -> None:
        """Pick up index lines other processes (or a repair) wrote since we last looked."""
        if self._closed:
            raise StoreClosedError(f"store {self.location} is closed")
        try:
            info = os.stat(self._index_path)
        except FileNotFoundError:
            # Never go on from an empty index: the next append would take the files' lines
            # for a crash's leftovers and cut them. Opening the store again rebuilds it.
            raise CorruptionError(
                "index.log was deleted while the store was open; open the store again to "
                "rebuild it from the stream files",
                location=str(self._index_path),
            ) from None
        if info.st_ino != self._index_ino or info.st_size < self._seen:
            self._reset()
            info = os.fstat(self._index_fd)
        if info.st_size > self._seen and not self._load_index(info.st_size):
            # Never go on with a partial view (it would miss commits, and a write from it could
            # index the same positions twice). Opening the store rebuilds the index.
            raise CorruptionError(
                "a line is malformed, out of position order or names a missing stream file; "
                "open the store again to rebuild the index from the stream files",
                location=str(self._index_path),
            )

    def _load_index(self, size: int) -> bool:
        """Apply complete index lines up to `size`; False when one is malformed or stale."""
        data = os.pread(self._index_fd, size - self._seen, self._seen)
        cut = data.rfind(b"\n") + 1
        for raw in data[:cut].split(b"\n")[:-1]:
            try:
                entry = _parse_index_line(raw)
            except (ValueError, UnicodeDecodeError):
                return False
            try:
                if isinstance(entry, str):
                    self._apply_fork(entry)
                elif entry.pos <= self._head or not self._follows(entry):
                    return False
                else:
                    self._apply(entry)
            except FileNotFoundError:  # a line naming a stream file that is gone
                return False
            self._seen += len(raw) + 1
        return True

    # -- locking and files -------------------------------------------------------------------

    def _write_lock(self) -> _FileLock:
        return _FileLock(self, self._lock_fd, self.lock_timeout)

    def _fd(self, st: _Stream) -> int:
        if st.fd is None:
            if self._open_fds >= _MAX_OPEN_FILES:
                for other in self._streams.values():
                    self._close_fd(other)
            st.fd = os.open(st.path, os.O_RDWR | os.O_CLOEXEC)
            self._open_fds += 1
        return st.fd

    def _close_fd(self, st: _Stream) -> None:
        if st.fd is not None:
            if st.fd in self._dirty:
                os.fsync(st.fd)
                self._dirty.discard(st.fd)
            os.close(st.fd)
            st.fd = None
            self._open_fds -= 1

    def _cut(self, path: Path, fd: int, line: int, offset: int, reason: str) -> None:
        """Truncate a file's uncommitted tail, reporting what was cut."""
        size = os.fstat(fd).st_size
        if size <= offset:
            return
        os.ftruncate(fd, offset)
        os.fsync(fd)
        self.repairs.append(Repair(str(path), line, offset, size - offset, reason))
        log.warning(
            "%s: cut %d bytes at offset %d (line %d): %s", path, size - offset, offset, line, reason
        )

    # -- recovery ----------------------------------------------------------------------------

    def _recover(self) -> None:
        """On open, under the write lock: load the index, check every file, repair or rebuild.

        Appends past a file's indexed end are what a crashed writer left: one per file, at the
        positions after the index's head (or at positions taken since: those are cut, never
        acknowledged). Anything else, such as several appends in one file or a gap in the
        positions (a deleted index, or an index tail lost with the power, which index.log is
        not synced against), is indexed again from the files by a rebuild, which cuts nothing
        but torn tails.
        """
        size = os.fstat(self._index_fd).st_size
        on_disk = {p.stem for p in _stream_files(self._streams_dir)}
        for stem in sorted(on_disk):  # every header first: a refused open changes nothing
            self._stream_by_stem(stem)
        if not self._load_index(size):
            self._rebuild("index has a malformed or inconsistent line")
            return
        self._cut_torn_index()
        if set(self._streams) - on_disk:
            self._rebuild("index names stream files that do not exist")
            return
        scans: list[tuple[_Stream, _Scan]] = []
        for stem in sorted(on_disk):
            st = self._stream_by_stem(stem)
            size = os.fstat(self._fd(st)).st_size
            try:
                if size < st.end or not self._ends_with_newline(st):
                    raise CorruptionError(
                        "is shorter than indexed or was edited", location=str(st.path)
                    )
                scan = self._scan_tail(st)
            except CorruptionError as exc:
                # An edit that moved lines: the files are the truth, index them again.
                self._rebuild(f"{st.path} does not match the index ({exc})")
                return
            if len(scan.batches) > 1:
                n = len(scan.batches)
                self._rebuild(f"{st.path} holds {n} appends the index does not list")
                return
            scans.append((st, scan))
        found: list[Batch] = []
        for st, scan in scans:
            self._cut_torn(st, scan)
            found.extend(scan.batches)
        head = self._head
        for b in sorted(found, key=lambda b: b.pos):
            if b.pos > head + 1:
                self._rebuild(f"unindexed appends at positions from {b.pos}, after {head}")
                return
            head = max(head, b.pos + b.n - 1)
        self._roll_forward(found)

    def _cut_torn_index(self) -> None:
        """Cut (and report) the torn index line a killed writer left past the complete ones.

        Called with the write lock held, after the complete lines are loaded: no live writer is
        halfway through a line, so the rest is a dead one's, never acknowledged. Left there, the
        next index line would be glued onto it, and every process would find the index broken.
        """
        size = os.fstat(self._index_fd).st_size
        if size > self._seen:
            line = len(os.pread(self._index_fd, self._seen, 0).splitlines()) + 1
            self._cut(self._index_path, self._index_fd, line, self._seen, "torn index line")

    def _ends_with_newline(self, st: _Stream) -> bool:
        return os.pread(self._fd(st), 1, st.end - 1) == b"\n"

    def _tail(self, st: _Stream) -> list[Batch]:
        """Complete appends past the indexed end of a file; cut (and report) a torn remainder."""
        scan = self._scan_tail(st)
        self._cut_torn(st, scan)
        return scan.batches

    def _scan_tail(self, st: _Stream) -> _Scan:
        """What lies past the indexed end of a file (nothing cut)."""
        fd = self._fd(st)
        size = os.fstat(fd).st_size
        if size == st.end:
            return _Scan([], st.end, st.last_seq + 1, "")
        data = os.pread(fd, size - st.end, st.end)
        return _scan_region(st, data, st.end, st.last_seq + 1)

    def _cut_torn(self, st: _Stream, scan: _Scan) -> None:
        """Cut (and report) the torn remainder a scan found, if any."""
        if scan.reason:
            self._cut(st.path, self._fd(st), st.line_no(scan.good_seq), scan.good_end, scan.reason)

    def _roll_forward(self, found: list[Batch], *, cut: bool = False) -> None:
        """Index complete appends a crashed writer left unindexed, if their positions are free.

        Their lines carry the positions they were written with, the next ones after the index
        of the time. If other appends were indexed since, those positions are taken: the batch
        is cut instead, with the rest of its file (reported like a torn tail). It was never
        acknowledged (the index line is the commit point); indexing it at positions other than
        its lines say would let a later rebuild of the index move it, and writing its index
        line while appends staged before it await theirs would put the index out of order:
        with `cut`, every leftover is cut.
        """
        found.sort(key=lambda b: (b.pos, b.stem))
        gone: set[str] = set()
        for b in found:
            if b.stem in gone:
                continue
            st = self._streams[b.stem]
            if cut or b.pos != self._head + 1:
                if b.pos <= self._head:
                    why = "taken since"
                elif cut:
                    why = "met while a group is staged"
                else:
                    why = "after positions left unindexed"
                reason = f"unindexed append of {b.n} event(s) at positions from {b.pos}, {why}"
                self._cut(st.path, self._fd(st), st.line_no(b.seq), b.offset, reason)
                gone.add(b.stem)
                continue
            os.fdatasync(self._fd(st))  # a crashed writer's lines may not have reached the disk
            line = _index_line(b)
            _append(self._index_fd, line)
            self._seen += len(line)
            self._apply(b)
            log.warning("%s: rolled forward an unindexed append of %d event(s)", b.stem, b.n)

    def _rebuild(self, why: str) -> None:
        """Rewrite the index from the stream files (they are the truth).

        Never at the cost of what index.log lists as committed: a file that no longer holds
        those events (shorter, torn or zero-filled inside them, or gone) stops the open with
        `CorruptionError`, and nothing is cut. Only a torn tail past them is cut.
        """
        log.warning("%s: rebuilding index.log: %s", self.root, why)
        claimed = self._claimed()
        self._reset()
        per_file: list[list[Batch]] = []
        forks: list[str] = []
        for path in _stream_files(self._streams_dir):
            st = self._stream_by_stem(path.stem)
            if st.fork is not None:
                forks.append(st.stem)
            scan = self._scan_tail(st)
            listed = claimed.pop(st.stem, {})
            need = max(listed, default=0)
            if scan.good_seq - 1 < need:
                raise self._lost_committed(st, scan, need)
            self._check_ids(st, scan, listed)
            self._cut_torn(st, scan)
            per_file.append(scan.batches)
        if claimed:
            stem = min(claimed)
            raise CorruptionError(
                f"index.log lists committed events in {stem}.jsonl, which is missing; nothing "
                "was changed. If it is gone for good, delete index.log: the next open rebuilds "
                "it from the files that remain",
                location=str(self._streams_dir / f"{stem}.jsonl"),
            )
        lines = [f"F {stem}\n".encode() for stem in forks]
        # Merge the files by the positions their lines carry, each file in its own order (a
        # line with a wrong position, pasted from elsewhere, say, cannot reorder its stream).
        merged = heapq.merge(*per_file, key=lambda b: b.pos)
        head = 0
        fixed = []
        for b in merged:
            fixed.append(b._replace(pos=max(b.pos, head + 1)))
            head = fixed[-1].pos + b.n - 1
        lines.extend(_index_line(b) for b in fixed)
        _write_atomic(self._index_path, b"".join(lines))
        self._reset()
        self._load_index(os.fstat(self._index_fd).st_size)

    def _claimed(self) -> dict[str, dict[int, str]]:
        """Stem -> {seq: id} of the events index.log lists as committed.

        Only whole lines that parse, with well-formed ids, count: a torn last line (its write
        never finished, so nothing it lists was acknowledged) or a line zero-filled in part
        by a power loss claims nothing.
        """
        claimed: dict[str, dict[int, str]] = {}
        data = os.pread(self._index_fd, os.fstat(self._index_fd).st_size, 0)
        for raw in data[: data.rfind(b"\n") + 1].split(b"\n"):
            try:
                entry = _parse_index_line(raw)
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(entry, str):
                claimed.setdefault(entry, {})
            elif not all(map(is_event_id, entry.ids)):
                continue
            else:
                ids = claimed.setdefault(entry.stem, {})
                ids.update(zip(range(entry.seq, entry.seq + entry.n), entry.ids, strict=True))
        return claimed

    @staticmethod
    def _check_ids(st: _Stream, scan: _Scan, listed: dict[int, str]) -> None:
        """Raise CorruptionError if the file holds other events than index.log lists at seqs.

        A rebuild trusts the files, but not at the price of committed events: a stream file
        replaced by another copy of the stream (from a copy of the store that went on
        differently) would otherwise swap acknowledged events for others without a word.
        """
        for b in scan.batches:
            for seq, found in zip(range(b.seq, b.seq + b.n), b.ids, strict=True):
                expected = listed.get(seq)
                if expected is not None and found != expected:
                    raise CorruptionError(
                        f"holds event {found}, but index.log lists event {expected} at this "
                        "seq as committed: the file was replaced or edited (a copy from "
                        "another store?). Nothing was changed. To keep the file as it is, "
                        "delete index.log: the next open rebuilds it from the files",
                        stream=st.name,
                        seq=seq,
                        location=f"{st.path} line {st.line_no(seq)}",
                    )

    @staticmethod
    def _lost_committed(st: _Stream, scan: _Scan, need: int) -> CorruptionError:
        """The error for a file that no longer holds events index.log lists as committed."""
        what = scan.reason or f"the file holds seqs up to {scan.good_seq - 1} only"
        return CorruptionError(
            f"{what}, but index.log lists the stream's events up to seq "
            f"{need} as committed: the file was damaged or cut (or, at durability batch or "
            "none, lost its tail with the power). Nothing was changed. To keep what the file "
            "holds, delete index.log: the next open rebuilds it from the files, cutting the "
            "damaged append",
            stream=st.name,
            seq=scan.good_seq,
            location=f"{st.path} line {st.line_no(scan.good_seq)}",
        )

    # -- append ------------------------------------------------------------------------------

    def append(self, records: Sequence[Record], durability: Durability) -> list[int]:
        """Write the lines of one append, sync, then its index line (the commit point).

        Appends from several threads are committed in groups (`group_commit`): the leader
        writes every waiting append's lines, syncs each file written once, then writes their
        index lines, so concurrent durable appends share the file system's journal commit.
        """
        if not records:
            return []
        positions: list[int] = self._appends.run(
            functools.partial(self._stage, records, durability),
            durability is Durability.FSYNC,
            self._commit_group,
        )
        return positions

    def _stage(self, records: Sequence[Record], durability: Durability, _: object) -> _Staged:
        """Check and write one append's lines (under the locks); index it in memory only."""
        name = records[0].stream
        # A file the index does not know of, or bytes past its indexed end, are what a
        # crashed writer left: complete appends are rolled forward, a torn rest is cut.
        st = self._stream(name, on_disk=True)
        if st is not None:
            # Once an append of this group is staged, its index line is still to come: an index
            # line written now for a leftover would go ahead of it, out of position order.
            self._roll_forward(self._tail(st), cut=self._staged > 0)
        self._check_conflicts(st, records)
        if st is None:
            st = self._create(Header(eventlog_jsonl=FORMAT_VERSION, stream=name))
        pos = self._head + 1
        size = _write_all(self._fd(st), _line_parts(records, pos), st.end)
        batch = Batch(
            pos,
            len(records),
            st.stem,
            records[0].seq,
            st.end,
            st.end + size,
            records[-1].ts,
            tuple(r.id for r in records),
        )
        # Readers of this process wait for the mutex held until the commit; other processes
        # see the append only once its index line is written, after the sync.
        self._apply(batch)
        self._staged += 1
        return _Staged(st, batch, durability)

    def _commit_group(self, group: list[Job]) -> bool:
        """Stage every append of the group, sync the files written once each, index them."""
        with self._writing, self._write_lock(), self._mutex:
            self._refresh()
            self._cut_torn_index()
            self._staged = 0
            done: list[tuple[Job, _Staged]] = []
            for job in group:
                job.result = job.error = None
                try:
                    item = job.fn(None)
                except Exception as exc:
                    job.error = exc
                else:
                    if item is not None:  # None: a job that wrote nothing
                        done.append((job, item))
            self._index_start = self._index_end = self._seen
            try:
                self._sync_and_index([item for _, item in done])
            except BaseException as exc:
                return self._group_failed(group, done, exc)
        for job, item in done:
            b = item.batch
            job.result = list(range(b.pos, b.pos + b.n))
        return True

    def _group_failed(
        self, group: list[Job], done: list[tuple[Job, _Staged]], exc: BaseException
    ) -> bool:
        """Settle a group whose sync or index write raised; re-raise an interrupt.

        If its index lines are in index.log after all, it is committed: its callers get their
        positions. Otherwise nothing of it is: its lines are cut from the files, so that no
        later append or open rolls forward an append that failed, and what was indexed in
        memory is forgotten.
        """
        if self._indexed():
            self._seen = self._index_end
            for job, item in done:
                job.result = list(range(item.batch.pos, item.batch.pos + item.batch.n))
                job.kept = True
            if not isinstance(exc, Exception):
                raise exc
            return True
        self._unwrite([item for _, item in done])
        self._unindex()
        self._reset()
        self._refresh()
        error: BaseException = exc
        if isinstance(exc, OSError):
            error = BackendUnavailableError(f"{self.location}: {exc}; the append was not written")
            error.__cause__ = exc
        for job in group:
            if job.error is None:
                job.error = error
        if not isinstance(exc, Exception):
            raise exc
        return False

    def _unindex(self) -> None:
        """Cut the torn start of index lines a failed write left (best effort).

        The write lock is held, so what lies past `_index_start` is this group's.
        """
        try:
            if os.fstat(self._index_fd).st_size > self._index_start:
                os.ftruncate(self._index_fd, self._index_start)
                os.fsync(self._index_fd)
        except OSError as exc:
            log.error(
                "%s: could not cut a failed append's torn index line (%s); the next open cuts it",
                self._index_path,
                exc,
            )

    def _unwrite(self, staged: list[_Staged]) -> None:
        """Truncate each file back to where the failed group's lines began (best effort)."""
        starts: dict[str, tuple[_Stream, int]] = {}
        for item in staged:
            seen = starts.get(item.st.stem)
            if seen is None or item.batch.offset < seen[1]:
                starts[item.st.stem] = (item.st, item.batch.offset)
        for st, offset in starts.values():
            try:
                fd = self._fd(st)
                os.ftruncate(fd, offset)
                os.fsync(fd)
            except OSError as exc:
                log.error(
                    "%s: could not cut a failed append's lines at offset %d (%s); the next "
                    "append to the stream or the next open may commit them",
                    st.path,
                    offset,
                    exc,
                )

    def _sync_and_index(self, staged: list[_Staged]) -> None:
        """Sync each file written (once: a sync covers the whole file), then index the appends.

        Several files are synced in parallel: the file system then folds their journal commits
        into one (on ext4 here, 8 files in 0.7 ms in parallel against 1.8 ms one after another).
        """
        durable: dict[str, int] = {}
        for item in staged:
            if item.durability is Durability.FSYNC:
                durable[item.st.stem] = self._fd(item.st)
            else:
                self._sync(self._fd(item.st), item.durability)
        fds = list(durable.values())
        if len(fds) > 1:
            list(_sync_pool().map(os.fdatasync, fds))
        elif fds:
            os.fdatasync(fds[0])
        lines = b"".join(_index_line(item.batch) for item in staged)
        if lines:
            self._index_end = self._seen + len(lines)
            _append(self._index_fd, lines)
            self._seen += len(lines)

    def _indexed(self) -> bool:
        """Whether the group's index lines reached index.log (its commit point was passed).

        Asked when committing failed or was interrupted (a KeyboardInterrupt can land just
        after the write): the file's size says, whatever Python got to record.
        """
        try:
            return self._index_end > self._index_start and (
                os.fstat(self._index_fd).st_size >= self._index_end
            )
        except OSError:
            return False

    def _check_conflicts(self, st: _Stream | None, records: Sequence[Record]) -> None:
        first = records[0].seq
        if st is not None:
            if st.seqs and st.last_seq >= first:
                raise Conflict("seq", f"{st.name!r} seq {first}")
            if first == 1 and st.fork is not None:
                raise Conflict("seq", f"{st.name!r} is a fork")
            if first != st.last_seq + 1:
                raise Conflict("seq", f"{st.name!r} seq {first} after {st.last_seq}")
        elif first != 1:
            raise Conflict("seq", f"{records[0].stream!r} seq {first} of a new stream")
        if any(r.id in self._ids for r in records):
            raise Conflict("id")

    def _create(self, header: Header) -> _Stream:
        """Create (or replace an empty) stream file holding just its header, durably."""
        stem = stem_for(header.stream)
        raw = msgspec.json.encode(header) + b"\n"
        old = self._streams.pop(stem, None)
        if old is not None:
            self._close_fd(old)
        _write_atomic(self._streams_dir / f"{stem}.jsonl", raw)
        return self._stream_by_stem(stem)

    def _sync(self, fd: int, durability: Durability) -> None:
        if durability is Durability.FSYNC:
            os.fdatasync(fd)
        elif durability is Durability.BATCH:
            self._dirty.add(fd)
            if time.monotonic() - self._last_sync >= BATCH_SYNC_INTERVAL:
                self._sync_dirty()

    def _sync_dirty(self) -> None:
        for fd in self._dirty:
            os.fdatasync(fd)
        self._dirty.clear()
        self._last_sync = time.monotonic()

    # -- reads -------------------------------------------------------------------------------

    def _range_start(self, st: _Stream, lo: int, hi: int) -> tuple[int, bytes, int, int, int]:
        """Where reading seqs lo..hi of a stream starts.

        Returns the index of the append holding lo, the bytes of every append holding lo..hi
        (one pread: appends are the seek unit, so lines of the first append before lo are
        skipped), lo's offset in them, and that append's `_next_append`.
        """
        seqs = st.seqs
        i = bisect.bisect_right(seqs, lo) - 1
        first = seqs[i]
        start = st.offsets[i]
        shift, nxt = self._next_append(st, i)
        # Most reads stay within one append: a second search only when they do not.
        j = i if hi < nxt else bisect.bisect_right(seqs, hi, i + 1) - 1
        buf = os.pread(self._fd(st), st.append_end(j) - start, start)
        off = 0
        for _ in range(lo - first):
            off = buf.find(b"\n", off) + 1
        return i, buf, off, shift, nxt

    @staticmethod
    def _next_append(st: _Stream, i: int) -> tuple[int, int]:
        """(position - seq within the i-th append, the first seq after it)."""
        seqs = st.seqs
        nxt = seqs[i + 1] if i + 1 < len(seqs) else st.last_seq + 1
        return st.positions[i] - seqs[i], nxt

    def _read_range(self, st: _Stream, lo: int, hi: int) -> list[Record]:
        """Committed records lo..hi of a stream, read with one pread and decoded in place."""
        i, buf, off, shift, nxt = self._range_start(st, lo, hi)
        seqs, positions, count = st.seqs, st.positions, len(st.seqs)
        ids, base = st.ids, st.seqs[0]
        find, seq = buf.find, lo
        out = []
        while seq <= hi:
            nl = find(b"\n", off)
            if nl <= off:
                raise _damaged(st, seq, "line is missing or empty (was the file modified?)")
            line, payload = self._decode_at(st, seq, buf, off, nl)
            if seq >= nxt:  # the next append starts at this seq
                i += 1
                shift = positions[i] - seq
                nxt = seqs[i + 1] if i + 1 < count else hi + 1
            if line.id != ids[seq - base]:
                raise _replaced(st, seq, line.id, ids[seq - base])
            out.append(self._record(st, line, payload, seq + shift))
            off = nl + 1
            seq += 1
        return out

    @staticmethod
    def _record(st: _Stream, line: Line, payload: bytes, position: int) -> Record:
        """The record of a decoded line; CorruptionError if its hash is not hex."""
        meta = bytes(line.meta)
        if line.meta_b64 is not None:  # an encrypted meta map
            try:
                meta = base64.b64decode(line.meta_b64, validate=True)
            except ValueError as exc:
                raise _damaged(st, line.seq, f"meta_b64 is not base64: {exc}") from exc
        try:
            return _to_record(line, payload, meta, st.name, position)
        except ValueError as exc:
            raise _damaged(st, line.seq, f"hash is not hex: {exc}") from exc

    @staticmethod
    def _decode_at(st: _Stream, seq: int, buf: bytes, off: int, nl: int) -> tuple[Line, bytes]:
        """The line at buf[off:nl]: the fast path of `_decode_line` without copying the line."""
        try:
            cut = buf.find(_DATA_KEY, off, nl)
            if cut > 0 and buf[nl - 1] == 0x7D:  # "}"
                try:
                    line = _line_decoder.decode(buf[off:cut] + b"}")
                    payload = buf[cut + len(_DATA_KEY) : nl - 1]
                except msgspec.DecodeError:
                    line, payload = _decode_line(buf[off:nl])
            else:
                line, payload = _decode_line(buf[off:nl])
        except (msgspec.DecodeError, ValueError) as exc:
            raise _damaged(st, seq, f"damaged line: {exc}") from exc
        if line.seq != seq:
            raise _damaged(st, seq, f"has seq {line.seq}, not {seq}")
        return line, payload

    def _event_range(self, st: _Stream, lo: int, hi: int, codec: Codec) -> list[RecordedEvent]:
        """Events lo..hi of a stream: `_read_range` with each line decoded in one pass.

        A line takes one typed decode straight to its event when it is plain (uncompressed)
        and of its type's current schema version; any other line, or one the typed form
        rejects, goes through `_decode_at` and the codec, as `_read_range` + `to_event` would.
        """
        types = codec.payload_types()
        if types is None:
            return codec.records_to_events(self._read_range(st, lo, hi), self.location)
        decode = _typed_line_decoder(types.union).decode
        current = types.current
        i, buf, off, shift, nxt = self._range_start(st, lo, hi)
        seqs, positions, count = st.seqs, st.positions, len(st.seqs)
        ids, base = st.ids, st.seqs[0]
        view, find, name, seq = memoryview(buf), buf.find, st.name, lo
        out: list[RecordedEvent] = []
        append = out.append
        while seq <= hi:
            nl = find(b"\n", off)
            if nl <= off:
                raise _damaged(st, seq, "line is missing or empty (was the file modified?)")
            if seq >= nxt:  # the next append starts at this seq
                i += 1
                shift = positions[i] - seq
                nxt = seqs[i + 1] if i + 1 < count else hi + 1
            try:
                line = decode(view[off:nl])
            except DECODE_ERRORS:
                line = None
            if (
                line is not None
                and line.seq == seq
                and line.id == ids[seq - base]
                and not line.codec
                and (data := line.data) is not None
                and (kind := current.get(line.type)) is not None
                and kind[0] is type(data)
                and kind[1] == line.v
            ):
                append(
                    RecordedEvent(
                        id=line.id,
                        stream=name,
                        seq=seq,
                        position=seq + shift,
                        ts=line.ts,
                        data=data,  # type: ignore[arg-type]  # its class was checked
                        meta=line.meta,
                        causation_id=line.causation_id,
                        correlation_id=line.correlation_id,
                        hash=line.hash,
                    )
                )
            else:
                slow, payload = self._decode_at(st, seq, buf, off, nl)
                if slow.id != ids[seq - base]:
                    raise _replaced(st, seq, slow.id, ids[seq - base])
                rec = self._record(st, slow, payload, seq + shift)
                append(codec.to_event(rec, self.location))
            off = nl + 1
            seq += 1
        view.release()
        return out

    def _bounds(
        self, stream: str, first: int, last: int | None, backwards: bool, limit: int | None
    ) -> tuple[_Stream, int, int] | None:
        """The stream and the committed seq range a read covers (call with the mutex held)."""
        self._refresh()
        st = self._stream(stream)
        if st is None or not st.seqs or (limit is not None and limit <= 0):
            return None
        lo = max(first, st.first_seq)
        hi = st.last_seq if last is None else min(last, st.last_seq)
        if limit is not None:
            if backwards:
                lo = max(lo, hi - limit + 1)
            else:
                hi = min(hi, lo + limit - 1)
        return None if lo > hi else (st, lo, hi)

    def read(
        self,
        stream: str,
        first: int,
        last: int | None,
        *,
        backwards: bool = False,
        limit: int | None = None,
    ) -> list[Record]:
        """Own records of a stream by seq range, read from the file's committed bytes."""
        with self._mutex:
            found = self._bounds(stream, first, last, backwards, limit)
            out = [] if found is None else self._read_range(*found)
        if backwards:
            out.reverse()
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
        """`read` decoded to events, each plain line in one pass (see `_event_range`)."""
        with self._mutex:
            found = self._bounds(stream, first, last, backwards, limit)
            out = [] if found is None else self._event_range(*found, codec)
        if backwards:
            out.reverse()
        return out

    def _ranges(self, after: int, limit: int) -> list[tuple[_Stream, int, int]]:
        """(stream, lo, hi) runs holding the records with position > after, at most `limit`."""
        runs: list[tuple[_Stream, int, int]] = []
        positions, ns, seqs = self._positions, self._batch_ns, self._batch_seqs
        i = max(bisect.bisect_right(positions, after) - 1, 0)
        while i < len(positions) and limit > 0:
            n = ns[i]
            skip = max(after + 1 - positions[i], 0)
            if skip < n:
                take = min(n - skip, limit)
                first = seqs[i] + skip
                runs.append((self._batch_streams[i], first, first + take - 1))
                limit -= take
            i += 1
        return runs

    def read_all(self, after: int, limit: int) -> list[Record]:
        """Records with position > after, batch by batch from the commit index."""
        with self._mutex:
            self._refresh()
            out: list[Record] = []
            for run in self._ranges(after, limit):
                out.extend(self._read_range(*run))
            return out

    def read_all_events(self, after: int, limit: int, codec: Codec) -> list[RecordedEvent]:
        """`read_all` decoded to events, each plain line in one pass (see `_event_range`)."""
        with self._mutex:
            self._refresh()
            out: list[RecordedEvent] = []
            for run in self._ranges(after, limit):
                out.extend(self._event_range(*run, codec))
            return out

    def last(self, stream: str) -> Record | None:
        """The stream's last own record."""
        with self._mutex:
            self._refresh()
            st = self._stream(stream)
            if st is None or not st.seqs:
                return None
            return self._read_range(st, st.last_seq, st.last_seq)[0]

    def id_index_problem(self, records: Sequence[Record]) -> tuple[Record, str] | None:
        """The first record whose id the index does not map to its position."""
        with self._mutex:
            for rec in records:
                pos = self._ids.get(rec.id)
                if pos != rec.position:
                    where = "has no entry" if pos is None else f"says position {pos}"
                    return rec, f"index.log {where} for event {rec.id}"
        return None

    def get_by_ids(self, ids: Sequence[str]) -> dict[str, Record]:
        """Look ids up in the index, then read their lines: consecutive seqs with one read.

        A retry of a batch asks for every event of it; one read per event would scan the
        batch's lines up to each of them, a time that grows with the square of its size.
        """
        with self._mutex:
            self._refresh()
            wanted: dict[str, tuple[_Stream, list[tuple[int, str]]]] = {}
            for event_id in ids:
                pos = self._ids.get(event_id)
                if pos is None:
                    continue
                k = bisect.bisect_right(self._positions, pos) - 1
                st = self._batch_streams[k]
                seq = self._batch_seqs[k] + pos - self._positions[k]
                wanted.setdefault(st.stem, (st, []))[1].append((seq, event_id))
            out = {}
            for st, found in wanted.values():
                found.sort()
                start = 0
                for end in range(1, len(found) + 1):
                    if end < len(found) and found[end][0] - found[end - 1][0] <= 1:
                        continue
                    lo = found[start][0]
                    records = self._read_range(st, lo, found[end - 1][0])
                    for seq, event_id in found[start:end]:
                        out[event_id] = records[seq - lo]
                    start = end
            return out

    def head_position(self) -> int:
        """The highest committed position."""
        with self._mutex:
            self._refresh()
            return self._head

    # -- forks and streams -------------------------------------------------------------------

    def create_fork(self, fork: ForkInfo) -> None:
        """Write the fork into the stream file's header, then an index line announcing it."""
        with self._writing, self._write_lock(), self._mutex:
            self._refresh()
            self._cut_torn_index()
            st = self._stream(fork.stream, on_disk=True)
            if st is not None:
                self._roll_forward(self._tail(st))
                if st.seqs or st.fork is not None:
                    raise Conflict("fork", fork.stream)
            header = Header(
                eventlog_jsonl=FORMAT_VERSION,
                stream=fork.stream,
                parent=fork.parent,
                at_seq=fork.at_seq,
                fork_ts=fork.ts,
            )
            self._create(header)
            line = f"F {stem_for(fork.stream)}\n".encode()
            _append(self._index_fd, line)
            os.fsync(self._index_fd)
            self._seen += len(line)

    def get_fork(self, stream: str) -> ForkInfo | None:
        """The fork entry, from the stream file's header."""
        with self._mutex:
            self._refresh()
            st = self._stream(stream)
            return st.fork if st is not None else None

    def list_forks(self, parent: str | None = None) -> list[ForkInfo]:
        """Fork entries sorted by stream name."""
        with self._mutex:
            self._refresh()
            forks = [st.fork for st in self._streams.values() if st.fork is not None]
        forks.sort(key=lambda f: f.stream)
        return [f for f in forks if parent is None or f.parent == parent]

    def list_streams(self) -> list[StreamInfo]:
        """Streams with committed lines or a fork header, sorted by exact name."""
        with self._mutex:
            self._refresh()
            out = []
            for st in self._streams.values():
                if not st.seqs and st.fork is None:
                    continue
                last = (st.last_seq, st.last_ts) if st.seqs else None
                out.append(StreamInfo.of(st.name, last, st.fork))
        out.sort(key=lambda s: s.stream)
        return out

    # -- blobs and snapshots -----------------------------------------------------------------

    def get_blob(self, key: str) -> bytes | None:
        """A store-level value from blobs/."""
        try:
            return (self.root / "blobs" / stem_for(key)).read_bytes()
        except FileNotFoundError:
            return None

    def put_blob(self, key: str, value: bytes) -> None:
        """Replace a store-level value atomically and durably."""
        _write_atomic(self.root / "blobs" / stem_for(key), bytes(value))

    def _snap_dir(self, stream: str) -> Path:
        return self.root / "snapshots" / stem_for(stream)

    @staticmethod
    def _snap_prefix(name: str, version: int) -> str:
        return f"{stem_for(name)}.v{version}."

    def save_snapshot(self, stream: str, name: str, version: int, seq: int, data: bytes) -> None:
        """Write snapshots/<stream>/<name>.v<version>.<seq> atomically."""
        folder = self._snap_dir(stream)
        folder.mkdir(exist_ok=True)
        _write_atomic(folder / f"{self._snap_prefix(name, version)}{seq}", bytes(data))

    def load_snapshot(
        self, stream: str, name: str, version: int, max_seq: int | None
    ) -> tuple[int, bytes] | None:
        """The newest snapshot file at or below max_seq."""
        folder = self._snap_dir(stream)
        prefix = self._snap_prefix(name, version)
        seqs = [
            s for s in self.snapshot_seqs(stream, name, version) if max_seq is None or s <= max_seq
        ]
        for seq in reversed(seqs):
            try:
                return seq, (folder / f"{prefix}{seq}").read_bytes()
            except FileNotFoundError:
                continue  # deleted by another process meanwhile
        return None

    def delete_snapshot(self, stream: str, name: str, version: int, seq: int) -> None:
        """Remove one snapshot file."""
        path = self._snap_dir(stream) / f"{self._snap_prefix(name, version)}{seq}"
        path.unlink(missing_ok=True)

    def drop_snapshots(self, stream: str) -> int:
        """Remove a stream's snapshot folder (its files, then the folder; synced)."""
        folder = self._snap_dir(stream)
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            return 0
        for name in names:
            (folder / name).unlink(missing_ok=True)
        with contextlib.suppress(FileNotFoundError, OSError):
            folder.rmdir()
        fd = os.open(folder.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return len(names)

    def snapshot_seqs(self, stream: str, name: str, version: int) -> list[int]:
        """Seqs of the snapshot files, ascending.

        Other files in the folder (an editor's or a backup's copy, `...v1.12.bak`) are not
        snapshots: only a name ending in a seq written as `save_snapshot` writes it counts.
        """
        prefix = self._snap_prefix(name, version)
        try:
            names = os.listdir(self._snap_dir(stream))
        except FileNotFoundError:
            return []
        tails = (n[len(prefix) :] for n in names if n.startswith(prefix))
        return sorted(int(t) for t in tails if t.isascii() and t.isdigit() and str(int(t)) == t)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Sync files written with durability "batch", then close every file."""
        with self._writing, self._mutex:
            if self._closed:
                return
            self._closed = True
            for st in getattr(self, "_streams", {}).values():
                self._close_fd(st)
            for fd in (self._index_fd, self._lock_fd):
                if fd >= 0:
                    os.close(fd)

    def disk_paths(self) -> list[Path]:
        """The store's directory."""
        return [self.root]

    def stats(self) -> dict[str, int]:
        """Group-commit counters: commits and the appends they held."""
        return {"commits": self._appends.commits, "jobs": self._appends.jobs}

    def stream_path(self, stream: str) -> Path:
        """The file holding a stream's own events (for tools and tests)."""
        return self._streams_dir / f"{stem_for(stream)}.jsonl"

    @classmethod
    def exists_at(cls, path: str) -> bool:
        """Whether the directory holds a JSONL store (its index, or its stream files)."""
        # streams/ alone: a store whose index.log was deleted (the next open rebuilds it)
        return bool(path) and holds_store(Path(path), "jsonl")

    @classmethod
    def from_url(cls, url: str, path: str, options: dict[str, str]) -> JSONLBackend:
        """`jsonl:///path/to/dir` (`?lock_timeout=seconds`)."""
        opts = dict(options)
        timeout = opts.pop("lock_timeout", None)
        if opts:
            raise UsageError(f"unknown option(s) for jsonl://: {', '.join(sorted(opts))}")
        if not path:
            raise UsageError(f"{url!r} names no directory (use jsonl:///path/to/dir)")
        seconds = file_lock.timeout_option(timeout)
        try:
            return cls(path, lock_timeout=seconds)
        except (NotADirectoryError, FileExistsError) as exc:
            raise UsageError(f"{url!r}: {path} is not a directory") from exc


class _FileLock:
    """The store-wide write lock: `flock` on dir/lock, waiting at most `timeout` seconds."""

    def __init__(self, backend: JSONLBackend, fd: int, timeout: float) -> None:
        self._backend = backend
        self._fd = fd
        self._timeout = timeout

    def __enter__(self) -> None:
        # Checked holding the backend's `_writing` lock, as close() closes the fd holding it: a
        # closed fd's number may already belong to another file.
        if self._backend._closed:
            raise StoreClosedError(f"store {self._backend.location} is closed")
        file_lock.acquire(
            self._fd, self._timeout, self._backend.root / "lock", str(self._backend.root)
        )

    def __exit__(self, *exc: object) -> None:
        file_lock.release(self._fd)
