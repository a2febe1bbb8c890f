"""The contract every backend implements, and the records backends store.

Backends never encode, hash or decide seqs: the core hands them finished `Record`s. A backend
stores them atomically, enforces uniqueness of (stream, seq) and of id, assigns positions in
commit order, and reads them back. Forks are a small table of (stream, parent, at_seq); the core
resolves reads through ancestors.
"""

from __future__ import annotations

import enum
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

import msgspec

from eventlog.errors import UsageError

if TYPE_CHECKING:
    from eventlog.backends.envelope import PackedRow
    from eventlog.codec import Codec
    from eventlog.events import RecordedEvent


DECODE_ERRORS: tuple[type[Exception], ...] = (msgspec.MsgspecError, UnicodeDecodeError)
"""What decoding stored bytes raises when they are damaged (msgspec lets invalid UTF-8 in a
string through as UnicodeDecodeError)."""
STORED_VALUE_ERRORS: tuple[type[Exception], ...] = (*DECODE_ERRORS, TypeError)
"""`DECODE_ERRORS`, and the TypeError of a value stored as another type (text in a blob)."""


Segment = tuple[str, int, int | None]
"""Where some of a stream's seqs live: (origin stream, first seq, last seq or None)."""


class Durability(enum.StrEnum):
    """How hard a commit is pushed to disk before append returns."""

    FSYNC = "fsync"
    """Each commit is synced to stable storage: survives power loss."""
    BATCH = "batch"
    """Survives a process crash; the last commits may be lost on power loss."""
    NONE = "none"
    """No sync: fastest; a crash of the machine may lose recent commits."""


class Record(msgspec.Struct, frozen=True, gc=False):
    """One stored event: encoded payload and envelope, exactly as a backend keeps it."""

    id: str
    stream: str
    seq: int
    ts: int
    type: str
    version: int
    data: bytes
    """Encoded payload (the store's format), possibly compressed (see `codec`)."""
    meta: bytes
    """Encoded meta map in the store's format; empty when there is no meta."""
    causation_id: str | None
    correlation_id: str | None
    hash: bytes
    codec: int = 0
    """How `data` is packed: 0 plain; other values name a compression (see eventlog.codec)."""
    position: int = 0
    """Store-wide position, assigned at commit (0 before)."""
    text: str = ""
    """Searchable text, filled at append only for backends with `wants_text` (not stored)."""


class SearchHit(msgspec.Struct, frozen=True):
    """A reference to an event matching a full-text query."""

    stream: str
    seq: int
    id: str
    position: int
    snippet: str
    rank: float


class ForkInfo(msgspec.Struct, frozen=True):
    """A stream that starts from its parent's prefix up to `at_seq`."""

    stream: str
    parent: str
    at_seq: int
    ts: int


class StreamInfo(msgspec.Struct, frozen=True):
    """What a backend knows of one stream's own records (forks excluded from counts)."""

    stream: str
    last_seq: int
    """Seq of the last own record, or the fork point when it has none."""
    last_ts: int
    parent: str | None = None
    at_seq: int = 0

    @classmethod
    def of(cls, stream: str, last: tuple[int, int] | None, fork: ForkInfo | None) -> StreamInfo:
        """Info from the (seq, ts) of the stream's last own record, if any, and its fork entry."""
        if last is not None:
            seq, ts = last
        else:
            seq, ts = (fork.at_seq, fork.ts) if fork else (0, 0)
        return cls(stream, seq, ts, fork.parent if fork else None, fork.at_seq if fork else 0)


class Conflict(Exception):
    """Raised by a backend when (stream, seq) or an id is already taken; nothing was written."""

    def __init__(self, kind: Literal["seq", "id", "fork"], detail: str = ""):
        self.kind = kind
        super().__init__(f"{kind} conflict {detail}".strip())


def seconds_option(name: str, raw: str) -> float:
    """A URL option that is a number of seconds: finite and not negative, or a UsageError."""
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise UsageError(f"option {name} must be a number of seconds (>= 0), got {raw!r}")
    return seconds


STORE_FILES: dict[str, frozenset[str]] = {
    "jsonl": frozenset({"index.log", "streams", "blobs", "snapshots", "lock"}),
    "lmdb": frozenset({"data.mdb", "lock.mdb", "writer.lock"}),
}
"""Names each directory backend keeps in its directory: the first ones mark a store."""
_MARKERS = {"jsonl": frozenset({"index.log", "streams"}), "lmdb": frozenset({"data.mdb"})}


def holds_store(path: Path, scheme: str) -> bool:
    """Whether the directory at `path` holds a `scheme` store (one of its marker files)."""
    return any((path / name).exists() for name in _MARKERS[scheme])


def check_store_directory(path: Path, scheme: str) -> None:
    """Raise UsageError unless `path` can hold a `scheme` store: missing, empty, or one already.

    Opening a directory makes a store in it, so a mistyped URL must not turn another backend's
    store, or a directory of other files, into one.
    """
    if not path.exists():
        return
    if not path.is_dir():
        raise UsageError(f"{path} is not a directory ({scheme}:// stores are directories)")
    names = {p.name for p in path.iterdir()}
    if names & _MARKERS[scheme]:
        return
    for other, markers in _MARKERS.items():
        if other != scheme and names & markers:
            raise UsageError(f"{path} holds a {other} store, not a {scheme} one (use {other}://)")
    # Dot files (.git, .gitignore, .DS_Store) do not make a directory someone else's.
    # lost+found: a freshly made file system's root.
    ignored = STORE_FILES[scheme] | {"lost+found"}
    strangers = sorted(n for n in names - ignored if not n.startswith("."))
    if strangers:
        shown = ", ".join(strangers[:3]) + (", ..." if len(strangers) > 3 else "")
        raise UsageError(
            f"{path} is not empty ({shown}) and holds no {scheme} store: choose a new or empty "
            "directory"
        )


class Backend(ABC):
    """Storage engine behind a store."""

    format: ClassVar[Literal["msgpack", "json"]] = "msgpack"
    """Which encoding the core uses for this backend's payloads."""
    durable: ClassVar[bool] = True
    """Whether data survives close and reopen."""
    location: str = ""
    """Where the data lives (file, directory, URL), for messages."""
    wants_text: ClassVar[bool] = False
    """Whether append should fill `Record.text` (backends with a full-text index)."""
    gapless_positions: ClassVar[bool] = False
    """Whether committed positions are 1, 2, 3, ... with no gaps, so that `verify` can take a
    missing one for a removed event (JSONL's can have gaps after recovery from lost files)."""
    packed_reads: ClassVar[bool] = False
    """Whether the store should read through `read_packed` / `read_all_packed`: true for
    backends that store the packed envelope (see eventlog.backends.envelope), whose rows the
    core decodes straight to events."""

    @classmethod
    def exists_at(cls, path: str) -> bool:
        """Whether a store of this backend is at a URL's `path` (False: opening creates one)."""
        return True

    @classmethod
    def exists_at_url(cls, url: str, path: str, options: dict[str, str]) -> bool:
        """`exists_at` for backends whose store is named by more than the path (a server's)."""
        return cls.exists_at(path)

    def check_storage(self) -> str | None:
        """Damage in the backend's files that its engine could not read safely (or None).

        `verify` asks before it reads any event: an engine that trusts its pages (LMDB) would
        crash the process on such damage instead of raising.
        """
        return None

    def id_index_problem(self, records: Sequence[Record]) -> tuple[Record, str] | None:
        """The first record its backend's id index does not point back to, and why (or None).

        `verify` asks for each page of records it checks. The index is what makes a retried
        append idempotent: an entry lost or pointing elsewhere would let the retry store the
        event twice. Backends whose engine enforces unique ids itself (SQLite) keep None.
        """
        return None

    @abstractmethod
    def append(self, records: Sequence[Record], durability: Durability) -> list[int]:
        """Insert records of one stream atomically; return their positions, or raise Conflict.

        Seq 1 of a stream that is a fork, a taken (stream, seq) or a taken id is a Conflict.
        """

    @abstractmethod
    def read(
        self,
        stream: str,
        first: int,
        last: int | None,
        *,
        backwards: bool = False,
        limit: int | None = None,
    ) -> list[Record]:
        """Own records of a stream with first <= seq <= last, in seq order (or reversed)."""

    @abstractmethod
    def read_all(self, after: int, limit: int) -> list[Record]:
        """Records with position > after, in position order, at most `limit`."""

    def read_packed(
        self,
        stream: str,
        first: int,
        last: int | None,
        *,
        backwards: bool = False,
        limit: int | None = None,
    ) -> list[PackedRow]:
        """`read` as packed rows; this generic version packs the records `read` returns."""
        from eventlog.backends.envelope import pack_rows

        return pack_rows(self.read(stream, first, last, backwards=backwards, limit=limit))

    def read_all_packed(self, after: int, limit: int) -> list[PackedRow]:
        """`read_all` as packed rows; this generic version packs the records it returns."""
        from eventlog.backends.envelope import pack_rows

        return pack_rows(self.read_all(after, limit))

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
        """`read`, decoded to events by `codec` (what the store reads through).

        This generic version decodes what `read_packed` (with `packed_reads`) or `read` returns;
        a backend whose stored form allows it decodes envelope and payload in one pass instead.
        """
        if self.packed_reads:
            rows = self.read_packed(stream, first, last, backwards=backwards, limit=limit)
            return codec.to_events(rows, self.location)
        records = self.read(stream, first, last, backwards=backwards, limit=limit)
        return codec.records_to_events(records, self.location)

    def read_all_events(self, after: int, limit: int, codec: Codec) -> list[RecordedEvent]:
        """`read_all`, decoded to events by `codec` (see `read_events`)."""
        if self.packed_reads:
            return codec.to_events(self.read_all_packed(after, limit), self.location)
        return codec.records_to_events(self.read_all(after, limit), self.location)

    @abstractmethod
    def last(self, stream: str) -> Record | None:
        """The stream's own record with the highest seq, if any."""

    @abstractmethod
    def get_by_ids(self, ids: Sequence[str]) -> dict[str, Record]:
        """Stored records for whichever of these ids exist."""

    @abstractmethod
    def create_fork(self, fork: ForkInfo) -> None:
        """Record a fork; Conflict("fork") if the stream already has records or a fork entry."""

    @abstractmethod
    def get_fork(self, stream: str) -> ForkInfo | None:
        """The fork entry of a stream, if it is a fork."""

    @abstractmethod
    def list_forks(self, parent: str | None = None) -> list[ForkInfo]:
        """Fork entries, all or those of one parent."""

    @abstractmethod
    def list_streams(self) -> list[StreamInfo]:
        """Every stream with own records or a fork entry, sorted by name."""

    @abstractmethod
    def head_position(self) -> int:
        """The highest committed position (0 when empty)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release files, connections and locks."""

    def watch_remote_commits(self, wake: Callable[[], None]) -> None:  # noqa: B027
        """Call `wake()` when another process commits, where the engine can tell.

        PostgreSQL's LISTEN/NOTIFY can; by default a backend never calls it: waiters poll.
        """

    def disk_paths(self) -> list[Path]:
        """The files and directories holding the store's data, for size reports (none in memory)."""
        return []

    def server_bytes(self) -> int | None:
        """Bytes a server says the store takes, for backends without local files (or None)."""
        return None

    # -- store-level blobs and snapshots (shared by every backend) ---------------------------

    @abstractmethod
    def get_blob(self, key: str) -> bytes | None:
        """A store-level value (compression dictionary, settings), or None."""

    @abstractmethod
    def put_blob(self, key: str, value: bytes) -> None:
        """Set a store-level value durably (overwrites)."""

    @abstractmethod
    def save_snapshot(self, stream: str, name: str, version: int, seq: int, data: bytes) -> None:
        """Store a projection snapshot taken at `seq` (overwrites the same key)."""

    @abstractmethod
    def load_snapshot(
        self, stream: str, name: str, version: int, max_seq: int | None
    ) -> tuple[int, bytes] | None:
        """The snapshot (seq, data) with the highest seq <= max_seq, or None."""

    @abstractmethod
    def delete_snapshot(self, stream: str, name: str, version: int, seq: int) -> None:
        """Drop one snapshot (e.g. found corrupt, or older than the ones kept)."""

    @abstractmethod
    def snapshot_seqs(self, stream: str, name: str, version: int) -> list[int]:
        """Seqs of the stored snapshots of one projection version on a stream, ascending."""

    def drop_snapshots(self, stream: str) -> int:
        """Remove every projection snapshot of a stream, durably; how many were removed.

        For erasure (eventlog.encryption): snapshots hold state made from the events. They
        are caches, so a backend that cannot tell a stream's snapshots from others' may drop
        those too (they are rebuilt on demand).
        """
        from eventlog.errors import UsageError

        raise UsageError(f"{type(self).__name__} cannot drop a stream's snapshots")

    def search(
        self, query: str, *, segments: Sequence[Segment] | None = None, limit: int = 50
    ) -> list[SearchHit]:
        """Full-text search over event text, within `segments` or store-wide.

        Backends without an index raise UsageError.
        """
        from eventlog.errors import UsageError

        raise UsageError(f"full-text search is not supported by {type(self).__name__}")


class PackedBackend(Backend):
    """A backend that stores packed rows: its record reads are its packed reads, unpacked."""

    @abstractmethod
    def read_packed(
        self,
        stream: str,
        first: int,
        last: int | None,
        *,
        backwards: bool = False,
        limit: int | None = None,
    ) -> list[PackedRow]:
        """Own packed rows of a stream with first <= seq <= last (see `Backend.read`)."""

    @abstractmethod
    def read_all_packed(self, after: int, limit: int) -> list[PackedRow]:
        """Packed rows after a position, in position order (see `Backend.read_all`)."""

    @abstractmethod
    def _records(self, rows: list[PackedRow]) -> list[Record]:
        """Records of packed rows; a damaged one is a CorruptionError saying where."""

    def read(
        self,
        stream: str,
        first: int,
        last: int | None,
        *,
        backwards: bool = False,
        limit: int | None = None,
    ) -> list[Record]:
        """Own records with first <= seq <= last."""
        return self._records(
            self.read_packed(stream, first, last, backwards=backwards, limit=limit)
        )

    def read_all(self, after: int, limit: int) -> list[Record]:
        """Records after a position, in position order."""
        return self._records(self.read_all_packed(after, limit))
