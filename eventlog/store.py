"""The store facade: append, read, fork, subscribe and verify over one backend.

The core decides seqs, timestamps and hashes, checks `expected_seq` and resolves idempotent
retries; the backend only stores records atomically and enforces uniqueness, so every backend
behaves the same.
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from typing import TYPE_CHECKING, Literal

import msgspec

from eventlog.backends.base import (
    Backend,
    Conflict,
    Durability,
    ForkInfo,
    Record,
    SearchHit,
    Segment,
    StreamInfo,
)
from eventlog.codec import (
    GENESIS,
    Codec,
    Encoded,
    chain_hash,
    chain_hashes,
    validate_stream_name,
)
from eventlog.compression import Compression
from eventlog.encryption import ENCRYPTED, Encryption, FileKeyStore, KeyStore
from eventlog.errors import (
    ConcurrencyError,
    CorruptionError,
    DuplicateEventError,
    ErasedError,
    MissingKeyError,
    StoreClosedError,
    StreamExistsError,
    StreamNotFoundError,
    UsageError,
    ValidationError,
)
from eventlog.events import Event, EventData, RecordedEvent
from eventlog.stream_locks import StreamLocks
from eventlog.text import event_text

if TYPE_CHECKING:
    from eventlog.subscription import Subscription

ExpectedSeq = int | Literal["any", "no_stream"]
ANY: Literal["any"] = "any"
"""Append whatever the stream's current seq is."""
NO_STREAM: Literal["no_stream"] = "no_stream"
"""Append only if the stream does not exist yet."""
_VALID_NAMES_KEPT = 10_000
"""At most this many checked stream names are remembered (bounds the set's memory)."""
_TAILS_KEPT = 65_536
"""Stream tails cached at most (about 200 B each); the oldest entry goes first."""
_FORKS_KEPT = 65_536
"""Fork entries cached at most (they never change once made)."""
_LINEAGE_KEPT = 100_000
"""Segments of fork lineages cached at most, all streams together (a chain D forks deep has
D segments per stream, so caching every stream's would take D^2 / 2)."""

PAGE = 1000
MAX_SEQ = 2**63 - 1
"""The largest seq, position or count an argument may be (stores keep 64-bit integers)."""
_MAX_ANY_RETRIES = 1000

_open_stores: weakref.WeakSet[Store] = weakref.WeakSet()
"""Stores of this process, marked unusable in a child made by os.fork()."""


def _after_fork_in_child() -> None:
    # A store's connections, file locks, memory maps and threads belong to the process that
    # opened it: used from a forked child, two processes would write as one (lost and duplicated
    # positions in JSONL, SQLite locks the child does not hold, an LMDB environment LMDB forbids
    # after fork). The child must open the store again.
    for store in list(_open_stores):
        store._forked = True


os.register_at_fork(after_in_child=_after_fork_in_child)


class Problem(msgspec.Struct, frozen=True):
    """One integrity problem found by verify."""

    stream: str
    seq: int
    event_id: str | None
    message: str


class VerifyReport(msgspec.Struct, frozen=True):
    """What verify checked and the first problem of each damaged stream."""

    streams: int
    events: int
    problems: list[Problem]
    erased: list[str] = []
    """Streams found erased (their key deleted): their hash chain was checked, their
    encrypted payloads could not be decoded. Not a problem."""

    @property
    def ok(self) -> bool:
        """True when no problem was found (erased streams are none)."""
        return not self.problems


class Store:
    """A synchronous, thread-safe event store over one backend."""

    def __init__(
        self,
        backend: Backend,
        *,
        durability: Durability | str = Durability.FSYNC,
        max_event_bytes: int | None = None,
        poll_interval: float = 0.05,
        compression: str = "none",
        compress_min_bytes: int | None = None,
        zstd_level: int | None = None,
        key_store: KeyStore | None = None,
        keys: str | os.PathLike[str] | None = None,
    ) -> None:
        self._backend = backend
        packer = Compression(
            compression, min_bytes=compress_min_bytes, level=zstd_level, blobs=backend.get_blob
        )
        encryption = _encryption(key_store, keys)
        self._codec = (
            Codec(backend.format, compression=packer, encryption=encryption)
            if max_event_bytes is None
            else Codec(
                backend.format,
                max_event_bytes=max_event_bytes,
                compression=packer,
                encryption=encryption,
            )
        )
        self.durability = _durability(durability)
        self.poll_interval = check_poll_interval(poll_interval)
        self._closed = False
        self._forked = False
        _open_stores.add(self)
        self._tails: dict[str, tuple[int, bytes]] = {}
        self._valid_names: set[str] = set()
        """Stream names `append` has checked (a regex search less per append)."""
        self._existing: set[str] = set()
        """Streams seen to exist (a read past a stream's end need not ask the backend again)."""
        self._sealed: set[str] = set()
        """Streams whose last event was found encrypted, in a store opened without a key
        store: appending to them is refused (their new events would be stored plain)."""
        self._lineage: dict[str, list[Segment]] = {}
        self._lineage_segments = 0
        """Segments held by `_lineage` (bounded by `_LINEAGE_KEPT`)."""
        self._fork_entries: dict[str, ForkInfo] = {}
        """Fork entries read from the backend: a stream's entry never changes once made."""
        self._stream_locks = StreamLocks()
        # Entered as the plain lock, and notified only while someone waits (see `_committed`).
        self._commit_lock = threading.Lock()
        self._commits = threading.Condition(self._commit_lock)
        self._commit_waiters = 0
        self._commit_count = 0
        self._wakers: set[Callable[[], None]] = set()
        """Called under the commit lock after each commit and at close (async subscribers)."""
        self._remote_watched = False
        """Whether the backend was asked to report other processes' commits (`_watch_remote`)."""

    # -- properties ------------------------------------------------------------------------

    @property
    def backend(self) -> Backend:
        """The backend this store writes to."""
        return self._backend

    @property
    def codec(self) -> Codec:
        """The codec that encodes this store's events."""
        return self._codec

    @property
    def location(self) -> str:
        """Where the data lives."""
        return self._backend.location

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self.location} is closed")
        if self._forked:
            raise UsageError(
                f"store {self.location} was opened before os.fork(); a forked process must "
                "open the store again (eventlog.open) and use that"
            )

    # -- append ----------------------------------------------------------------------------

    def append(
        self,
        stream: str,
        events: Iterable[Event | EventData],
        *,
        expected_seq: ExpectedSeq = ANY,
        durability: Durability | str | None = None,
    ) -> list[RecordedEvent]:
        """Append events atomically to a stream; return them as stored.

        `expected_seq` is the stream's current last seq (0 or NO_STREAM for a new stream), or ANY.
        Retrying an append whose events (same ids, same content) are already stored returns the
        stored events instead of appending them twice.
        """
        self._check_open()
        if type(stream) is not str or stream not in self._valid_names:
            self._check_new_name(stream)
            if len(self._valid_names) < _VALID_NAMES_KEPT:
                self._valid_names.add(stream)
        _check_expected(expected_seq)
        level = self.durability if durability is None else _durability(durability)
        encoded = self._codec.encode_events(events)
        if not encoded:
            if expected_seq != ANY:  # nothing to write, but the expectation still holds or not
                tail_seq = self._tail(stream, fresh=True)[0]
                if not _matches(expected_seq, tail_seq):
                    raise ConcurrencyError(stream, expected_seq, tail_seq)
            return []
        if len(encoded) > 1 and len({e.id for e in encoded}) != len(encoded):
            raise _repeated_id(encoded)
        locks = self._stream_locks
        locks.acquire(stream)
        try:
            return self._append_locked(stream, encoded, expected_seq, level)
        finally:
            locks.release(stream)

    def _check_new_name(self, stream: object) -> None:
        """Validate the name of a stream appended to: a new name must follow today's rule.

        A stream stored under a name earlier versions accepted (C1 controls) can still be
        appended to; only a new stream is refused such a name.
        """
        try:
            validate_stream_name(stream)
        except ValidationError:
            if not isinstance(stream, str):
                raise
            validate_stream_name(stream, stored=True)
            if not self.exists(stream):
                raise

    def _append_locked(
        self, stream: str, encoded: list[Encoded], expected: ExpectedSeq, level: Durability
    ) -> list[RecordedEvent]:
        fresh = False
        encryption = self._codec.encryption
        aead = None
        if encryption is not None:  # the stream's key, made now for its first sealed event
            aead = encryption.sealing_key(stream, lambda: self._backend.last(stream))
        for _ in range(_MAX_ANY_RETRIES):
            tail_seq, tail_hash = self._tail(stream, fresh=fresh)
            if self._sealed and stream in self._sealed:
                raise MissingKeyError(
                    "the stream holds encrypted events: open the store with its key store "
                    "(keys=DIR or key_store=) to append to it; nothing was appended (its new "
                    "events would be stored unencrypted)",
                    stream=stream,
                    location=self.location,
                )
            if not _matches(expected, tail_seq):
                if not fresh:
                    fresh = True
                    continue
                stored = self._already_stored(stream, encoded)
                if stored is not None:
                    return stored
                raise ConcurrencyError(stream, expected, tail_seq)
            records = (
                self._records(stream, encoded, tail_seq, tail_hash)
                if aead is None
                else self._sealed_records(stream, encoded, tail_seq, tail_hash, aead)
            )
            try:
                positions = self._backend.append(records, level)
            except Conflict:
                self._tails.pop(stream, None)
                stored = self._already_stored(stream, encoded)
                if stored is not None:
                    return stored
                if expected != ANY and fresh:
                    actual = self._tail(stream, fresh=True)[0]
                    raise ConcurrencyError(stream, expected, actual) from None
                fresh = True
                continue
            self._committed(stream, records[-1])
            return [
                RecordedEvent(
                    id=r.id,
                    stream=stream,
                    seq=r.seq,
                    position=p,
                    ts=r.ts,
                    data=e.data,
                    meta=self._codec.meta_map(e.meta) if e.meta else {},
                    causation_id=r.causation_id,
                    correlation_id=r.correlation_id,
                    hash=r.hash.hex(),
                )
                for r, e, p in zip(records, encoded, positions, strict=True)
            ]
        raise ConcurrencyError(stream, expected, self._tail(stream, fresh=True)[0])

    def _append_records(self, stream: str, records: list[Record]) -> None:
        """Append records made elsewhere (a copy from another store: `eventlog.copy`).

        They carry their own seqs, times and hashes; the caller has chained them to the
        stream's tail. A conflict means another writer got there first: ConcurrencyError.
        """
        self._check_open()
        locks = self._stream_locks
        locks.acquire(stream)
        try:
            try:
                self._backend.append(records, self.durability)
            except Conflict:
                self._tails.pop(stream, None)
                actual = self._tail(stream, fresh=True)[0]
                raise ConcurrencyError(stream, records[0].seq - 1, actual) from None
            self._committed(stream, records[-1])
        finally:
            locks.release(stream)

    def _committed(self, stream: str, last: Record) -> None:
        """After an append commits: cache the stream's new tail and wake waiting subscribers."""
        self._cache_tail(stream, (last.seq, last.hash))
        self._count_commit()

    def _records(
        self, stream: str, encoded: list[Encoded], tail_seq: int, prev: bytes
    ) -> list[Record]:
        ts = time.time_ns()
        first = tail_seq + 1
        hashes = chain_hashes(prev, stream, first, ts, encoded)
        pack = self._codec.pack
        wants_text = self._backend.wants_text
        records: list[Record] = []
        add = records.append
        for i, e in enumerate(encoded):
            data, codec_id = pack(e.plain)
            add(
                Record(
                    e.id,
                    stream,
                    first + i,
                    ts,
                    e.type,
                    e.version,
                    data,
                    e.meta,
                    e.causation_id,
                    e.correlation_id,
                    hashes[i],
                    codec_id,
                    0,
                    event_text(e.data) if wants_text else "",
                )
            )
        return records

    def _sealed_records(
        self, stream: str, encoded: list[Encoded], tail_seq: int, prev: bytes, aead: object
    ) -> list[Record]:
        """`_records` with payloads and meta sealed; the hashes cover the sealed bytes."""
        ts = time.time_ns()
        first = tail_seq + 1
        seal = self._codec.seal
        sealed = [
            seal(aead, stream, first + i, e.id, e.plain, e.meta) for i, e in enumerate(encoded)
        ]
        stored = [
            msgspec.structs.replace(e, plain=data, meta=meta)
            for e, (data, meta, _) in zip(encoded, sealed, strict=True)
        ]
        hashes = chain_hashes(prev, stream, first, ts, stored)
        return [
            Record(
                e.id,
                stream,
                first + i,
                ts,
                e.type,
                e.version,
                data,
                meta,
                e.causation_id,
                e.correlation_id,
                hashes[i],
                codec_id,
                0,
                "",  # no searchable text: a full-text index would hold it unencrypted
            )
            for i, (e, (data, meta, codec_id)) in enumerate(zip(encoded, sealed, strict=True))
        ]

    def _already_stored(self, stream: str, encoded: list[Encoded]) -> list[RecordedEvent] | None:
        """The stored events if this batch was stored before (a retry), else None."""
        found = self._backend.get_by_ids([e.id for e in encoded])
        if not found:
            return None
        location = self.location
        for i, e in enumerate(encoded):
            rec = found.get(e.id)
            if rec is None:
                some = next(iter(found.values()))
                raise DuplicateEventError(
                    f"event {some.id} of this batch is already stored (stream {some.stream!r} "
                    f"seq {some.seq}) but event #{i} ({e.id}) is not: a retry must resend the "
                    "same batch",
                    event_id=some.id,
                    stream=some.stream,
                )
            if rec.stream != stream:
                raise DuplicateEventError(
                    f"event id {e.id} is already stored in stream {rec.stream!r} seq {rec.seq}",
                    event_id=e.id,
                    stream=rec.stream,
                )
            same = (
                rec.type == e.type
                and rec.version == e.version
                and self._codec.plain_meta(rec, location) == e.meta
                and rec.causation_id == e.causation_id
                and rec.correlation_id == e.correlation_id
                and self._codec.unpack(rec, location) == e.plain
            )
            if not same:
                raise DuplicateEventError(
                    f"event id {e.id} is already stored in stream {stream!r} seq {rec.seq} "
                    "with other content",
                    event_id=e.id,
                    stream=stream,
                )
            if i and rec.seq != found[encoded[i - 1].id].seq + 1:
                raise DuplicateEventError(
                    f"event id {e.id} is stored at seq {rec.seq}, not right after the batch's "
                    "previous event",
                    event_id=e.id,
                    stream=stream,
                )
        return [self._codec.to_event(found[e.id], location) for e in encoded]

    def _tail(self, stream: str, *, fresh: bool = False) -> tuple[int, bytes]:
        """(last seq, last hash) of a stream, from the cache unless `fresh`."""
        if not fresh:
            cached = self._tails.get(stream)
            if cached is not None:
                return cached
        rec = self._backend.last(stream)
        if rec is not None:
            tail = (rec.seq, rec.hash)
            self._cache_tail(stream, tail)
            if rec.codec & ENCRYPTED and self._codec.encryption is None:
                self._sealed.add(stream)
            elif self._sealed:
                self._sealed.discard(stream)
            return tail
        fork = self._fork_entry(stream)
        if fork is None:
            return 0, GENESIS
        return fork.at_seq, self._record_at(fork.parent, fork.at_seq).hash

    def _cache_tail(self, stream: str, tail: tuple[int, bytes]) -> None:
        """Remember a stream's tail; past `_TAILS_KEPT` streams, forget the oldest entry.

        A tail is only a hint: a stale or forgotten one costs a read of the stream's last
        record (a stale one is caught by the backend's conflict and read afresh).
        """
        tails = self._tails
        tails[stream] = tail
        if len(tails) > _TAILS_KEPT:
            del tails[next(iter(tails))]

    def _fork_entry(self, stream: str) -> ForkInfo | None:
        """The stream's fork entry, if it is a fork (cached: an entry never changes)."""
        fork = self._fork_entries.get(stream)
        if fork is None:
            fork = self._backend.get_fork(stream)
            if fork is not None and len(self._fork_entries) < _FORKS_KEPT:
                self._fork_entries[stream] = fork
        return fork

    def _record_at(self, stream: str, seq: int) -> Record:
        """The record a stream reads at `seq`: its own, or an ancestor's below a fork point.

        Walks up the fork entries rather than building the stream's whole lineage: verifying
        or copying a chain of forks asks this of every fork's parent.
        """
        current, seen = stream, set()
        while (fork := self._fork_entry(current)) is not None and seq <= fork.at_seq:
            seen.add(current)
            current = fork.parent
            if current in seen:
                raise CorruptionError("fork ancestry loops", stream=stream)
        page = self._backend.read(current, seq, seq, limit=1)
        if page:
            return page[0]
        raise CorruptionError(
            "record is missing (a fork points past its parent's end)",
            stream=stream,
            seq=seq,
            location=self.location,
        )

    # -- reads -----------------------------------------------------------------------------

    def _segments(self, stream: str) -> list[Segment]:
        """Where a stream's seqs live: [(origin stream, first seq, last seq or None)]."""
        cached = self._lineage.get(stream)
        if cached is not None:
            return cached
        chain: list[Segment] = []
        current, upper, seen = stream, None, set()
        while True:
            fork = self._fork_entry(current)
            if fork is None:
                chain.append((current, 1, upper))
                break
            chain.append((current, fork.at_seq + 1, upper))
            # An ancestor is visible only up to the lowest fork point below it.
            seen.add(current)
            current = fork.parent
            upper = fork.at_seq if upper is None else min(upper, fork.at_seq)
            if current in seen:
                raise CorruptionError("fork ancestry loops", stream=stream)
        chain.reverse()
        if len(chain) > 1:
            if self._lineage_segments + len(chain) > _LINEAGE_KEPT:
                self._lineage.clear()  # rebuilt on demand from the cached fork entries
                self._lineage_segments = 0
            if len(chain) <= _LINEAGE_KEPT:
                self._lineage[stream] = chain
                self._lineage_segments += len(chain)
        return chain

    def read(
        self,
        stream: str,
        first: int = 1,
        last: int | None = None,
        *,
        backwards: bool = False,
        limit: int | None = None,
    ) -> Iterator[RecordedEvent]:
        """Events of a stream with first <= seq <= last, oldest first (or newest first).

        A fork's prefix is read through its ancestors. Raises StreamNotFoundError for a stream
        that does not exist.
        """
        self._check_open()
        validate_stream_name(stream, stored=True)
        _check_int(first, "first", 1)
        if last is not None:
            _check_int(last, "last", 0)
            if last < first:
                if not self.exists(stream):  # as for any other range
                    raise StreamNotFoundError(stream)
                return iter(())
        if limit is not None:
            _check_int(limit, "limit", 0)
        return chain.from_iterable(self._pages(stream, first, last, backwards, limit))

    def _pages(
        self, stream: str, first: int, last: int | None, backwards: bool, limit: int | None
    ) -> Iterator[list[RecordedEvent]]:
        """The events of `read` page by page (chained in C: cheaper than a yield per event)."""
        ranges = []
        for origin, lo, hi in self._segments(stream):
            lo2 = max(lo, first)
            hi2 = hi if last is None else (last if hi is None else min(hi, last))
            if hi2 is None or lo2 <= hi2:
                ranges.append((origin, lo2, hi2))
        if backwards:
            ranges.reverse()
        remaining = limit
        yielded = False
        read_page = self._read_page
        for origin, lo, hi in ranges:
            cursor_lo, cursor_hi = lo, hi
            while remaining is None or remaining > 0:
                n = PAGE if remaining is None else min(PAGE, remaining)
                page = read_page(origin, cursor_lo, cursor_hi, backwards, n)
                if page:
                    self._check_page(origin, page, cursor_lo, backwards)
                yield page
                yielded = yielded or bool(page)
                if remaining is not None:
                    remaining -= len(page)
                if len(page) < n:
                    break
                if backwards:
                    cursor_hi = page[-1].seq - 1
                else:
                    cursor_lo = page[-1].seq + 1
        if not yielded and stream not in self._existing and not self.exists(stream):
            raise StreamNotFoundError(stream)

    def _check_page(
        self, stream: str, page: list[RecordedEvent], first: int, backwards: bool
    ) -> None:
        """Raise CorruptionError unless a page holds consecutive seqs (from `first` forwards).

        Backends select by seq columns or keys that no hash covers: damage there (a row lost,
        a key's seq changed) would otherwise skip, repeat or misplace events without a word.
        """
        head, tail = page[0].seq, page[-1].seq
        step = -1 if backwards else 1
        if (not backwards and head != first) or tail - head != step * (len(page) - 1):
            expected = first if not backwards and head != first else head
            raise CorruptionError(
                f"a read of seqs from {expected} found seqs {head}..{tail} in {len(page)} "
                "events: the stored seqs are damaged",
                stream=stream,
                seq=expected,
                location=self.location,
            )

    def _read_page(
        self, stream: str, first: int, last: int | None, backwards: bool, n: int
    ) -> list[RecordedEvent]:
        """One page of a stream's own events, decoded (whole pages: cheaper than a yield each).

        A read begun before `close` is refused its next page, on every backend alike.
        """
        self._check_open()
        return self._backend.read_events(
            stream, first, last, self._codec, backwards=backwards, limit=n
        )

    def read_last(self, stream: str, n: int) -> list[RecordedEvent]:
        """The last n events of a stream, oldest first."""
        _check_int(n, "n", 0)
        out = list(self.read(stream, backwards=True, limit=n))
        out.reverse()
        return out

    def get(self, stream: str, seq: int) -> RecordedEvent:
        """The event at one seq of a stream."""
        _check_int(seq, "seq", 1)
        for event in self.read(stream, seq, seq):
            return event  # its seq was checked with its page
        last = self._tail(stream, fresh=True)[0]
        if seq <= last:
            raise CorruptionError(
                f"seq {seq} is missing, below the stream's last seq {last}",
                stream=stream,
                seq=seq,
                location=self.location,
            )
        raise ValidationError(f"stream {stream!r} has no seq {seq}", field="seq")

    def read_all(self, after: int = 0, limit: int | None = None) -> Iterator[RecordedEvent]:
        """Every stored event with position > after, in position order."""
        self._check_open()
        _check_int(after, "after", 0)
        if limit is not None:
            _check_int(limit, "limit", 0)
        return chain.from_iterable(self._all_pages(after, limit))

    def _all_pages(self, after: int, limit: int | None) -> Iterator[list[RecordedEvent]]:
        """The events of `read_all` page by page."""
        remaining = limit
        backend = self._backend
        codec = self._codec
        while remaining is None or remaining > 0:
            n = PAGE if remaining is None else min(PAGE, remaining)
            self._check_open()  # as in `_read_page`
            try:
                page = backend.read_all_events(after, n, codec)
            except ErasedError as exc:
                # the events before the erased one first: a reader that goes on after
                # `exc.position` (as ErasedError says to) must not have skipped them
                if exc.position is not None and exc.position > after + 1:
                    before = [r for r in backend.read_all(after, n) if r.position < exc.position]
                    yield codec.records_to_events(before, backend.location)
                raise
            yield page
            if remaining is not None:
                remaining -= len(page)
            if len(page) < n:
                return
            after = page[-1].position

    def head_position(self) -> int:
        """The highest committed position."""
        self._check_open()
        return self._backend.head_position()

    # -- streams and forks -----------------------------------------------------------------

    def streams(self) -> list[StreamInfo]:
        """Every stream: last seq (length), last time, and fork parent if any."""
        self._check_open()
        return self._backend.list_streams()

    def stream_info(self, stream: str) -> StreamInfo:
        """One stream's info; StreamNotFoundError if it does not exist."""
        self._check_open()
        validate_stream_name(stream, stored=True)
        rec = self._backend.last(stream)
        fork = self._backend.get_fork(stream)
        if rec is None and fork is None:
            raise StreamNotFoundError(stream)
        return StreamInfo.of(stream, (rec.seq, rec.ts) if rec else None, fork)

    def exists(self, stream: str) -> bool:
        """Whether the stream has events or is a fork."""
        self._check_open()
        validate_stream_name(stream, stored=True)
        if stream in self._existing:
            return True
        found = self._backend.last(stream) is not None or self._backend.get_fork(stream) is not None
        if found and len(self._existing) < _VALID_NAMES_KEPT:
            self._existing.add(stream)  # streams are never deleted: it stays true
        return found

    def fork(self, source: str, new: str, at_seq: int | None = None) -> StreamInfo:
        """Create `new` as a stream whose first `at_seq` events are `source`'s (no copy)."""
        self._check_open()
        validate_stream_name(source, stored=True)
        validate_stream_name(new)
        tail_seq, _ = self._tail(source, fresh=True)
        if tail_seq == 0:
            raise StreamNotFoundError(source)
        at = tail_seq if at_seq is None else at_seq
        _check_int(at, "at_seq", 1)
        if not 1 <= at <= tail_seq:
            raise ValidationError(
                f"must be between 1 and {tail_seq} (the end of {source!r}), got {at}",
                field="at_seq",
            )
        info = ForkInfo(new, source, at, time.time_ns())
        try:
            self._backend.create_fork(info)
        except Conflict:
            raise StreamExistsError(new) from None
        self._count_commit()  # followers waiting for `new` (a fork commits no event) look again
        return StreamInfo(new, at, info.ts, source, at)

    def forks(self, stream: str | None = None) -> list[ForkInfo]:
        """Fork entries: all, or the direct forks of one stream (StreamNotFoundError if none)."""
        self._check_open()
        if stream is not None:
            validate_stream_name(stream, stored=True)
            if not self.exists(stream):
                raise StreamNotFoundError(stream)
        return self._backend.list_forks(stream)

    def ancestry(self, stream: str) -> list[tuple[str, int]]:
        """[(ancestor, fork seq), ...] from the root to the stream's parent."""
        self._check_open()
        validate_stream_name(stream, stored=True)
        if not self.exists(stream):
            raise StreamNotFoundError(stream)
        segments = self._segments(stream)
        return [(origin, hi) for origin, _, hi in segments[:-1] if hi is not None]

    # -- search ----------------------------------------------------------------------------

    def search(self, query: str, *, stream: str | None = None, limit: int = 50) -> list[SearchHit]:
        """Full-text search over event text, best match first (backends with an index).

        With `stream`, the events `read(stream)` gives: a fork's own events and the prefix it
        shares with its parent (hits name the stream that stored them). StreamNotFoundError if
        it does not exist.
        """
        self._check_open()
        if stream is not None:
            validate_stream_name(stream, stored=True)
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("cannot be empty", field="query")
        if "\x00" in query:  # FTS5 would read the query only up to it
            raise ValidationError("cannot contain a NUL character", field="query")
        _check_int(limit, "limit", 1)
        segments = None
        if stream is not None:
            if not self.exists(stream):
                raise StreamNotFoundError(stream)
            segments = self._segments(stream)
        return self._backend.search(query, segments=segments, limit=limit)

    # -- subscriptions ---------------------------------------------------------------------

    def subscribe(self, after: int = 0, *, batch: int = PAGE) -> Subscription:
        """Catch up from a position, then follow new events as they commit."""
        self._check_open()
        _check_int(after, "after", 0)
        _check_int(batch, "batch", 1)
        from eventlog.subscription import Subscription

        return Subscription(self, after, batch)

    def wait_for_commit(
        self, seen: int, timeout: float, stop: Callable[[], bool] | None = None
    ) -> int:
        """Wait until a local commit happens after `seen` (a commit count) or timeout.

        `stop` is checked under the lock `wake_waiters` takes, so a caller whose flag is set
        before a `wake_waiters` call never sleeps through that wake-up.
        """
        self._watch_remote()
        with self._commit_lock:
            if self._commit_count == seen and not self._closed and not (stop and stop()):
                self._commit_waiters += 1
                try:
                    self._commits.wait(timeout)
                finally:
                    self._commit_waiters -= 1
            return self._commit_count

    def wake_waiters(self) -> None:
        """Wake every `wait_for_commit` and waker now, as a commit would (for close())."""
        with self._commit_lock:
            self._commits.notify_all()
            for wake in self._wakers:
                wake()

    def watch_commits(self, wake: Callable[[], None], on: bool = True) -> None:
        """Call `wake()` after each commit of this store object and at close (on=False: stop).

        It runs in the committing thread holding the commit lock, so it must be quick and must
        not call the store (an event loop's `call_soon_threadsafe` is what it is for).
        """
        if on:
            self._watch_remote()
        with self._commit_lock:
            if on:
                self._wakers.add(wake)
            else:
                self._wakers.discard(wake)

    def _watch_remote(self) -> None:
        """Have the backend wake waiters at other processes' commits, once someone waits.

        PostgreSQL's LISTEN/NOTIFY does; other backends' waiters poll.
        """
        if not self._remote_watched and not self._closed:
            self._backend.watch_remote_commits(self._count_commit)
            self._remote_watched = True

    def _count_commit(self) -> None:
        """Count a commit and wake whoever waits for one.

        The commit is this store's, or another process's that its backend reported. Waiters
        compare counts, so one that read just before a remote commit's notice does not sleep
        through it.
        """
        with self._commit_lock:
            self._commit_count += 1
            if self._commit_waiters:
                self._commits.notify_all()
            for wake in self._wakers:
                wake()

    @property
    def commit_count(self) -> int:
        """Commits this store object made, or heard of from other processes.

        For waiting subscribers: a count that moved means something may have been committed.
        """
        return self._commit_count

    # -- verify ----------------------------------------------------------------------------

    def verify(
        self,
        stream: str | None = None,
        *,
        progress: Callable[[int], None] | None = None,
        upto: int | None = None,
    ) -> VerifyReport:
        """Check every stream's hash chain, seqs and decoding; report the first problem of each.

        With `stream`, that stream's whole history is checked: for a fork, its ancestors'
        events up to the fork points too. `progress`, if given, is called with the number of
        events checked so far after each page (for a progress bar over a large store). `upto`
        checks only the events at positions up to it: the store as it was when its head
        position was `upto`.

        Without `upto`, what backends keep beside the events (stream lengths, positions) is
        checked against them too, when no append lands during the verify (on a store being
        written to, those checks would compare two moments).
        """
        self._check_open()
        if stream is not None:
            validate_stream_name(stream, stored=True)
        if upto is not None:
            _check_int(upto, "upto", 0)
        damage = self._backend.check_storage()
        if damage is not None:
            message = f"{damage}: the storage engine could not read it safely; no event checked"
            return VerifyReport(0, 0, [Problem("", 0, None, message)])
        head = self.head_position()
        try:
            infos = [self.stream_info(stream)] if stream is not None else self.streams()
        except CorruptionError as exc:  # the listing itself is damaged: nothing to walk
            return VerifyReport(
                0, 0, [Problem(exc.stream or stream or "", exc.seq or 0, None, str(exc))]
            )
        problems: list[Problem] = []
        erased: list[str] = []
        total = 0
        # One stream's history includes its ancestors' events up to each fork point.
        walks = [(origin, hi) for origin, _, hi in self._segments(stream)[:-1]] if stream else []
        walks += [(info.stream, None) for info in infos]
        for name, last in walks:
            count, problem, was_erased = self._verify_stream(name, total, progress, upto, last)
            total += count
            if problem is not None:
                problems.append(problem)
            if was_erased:
                erased.append(name)
        if upto is None:
            damaged = {p.stream for p in problems}
            clean = [i for i in infos if i.stream not in damaged]
            problems += self._check_indexes(clean, stream is None and not problems, total, head)
        return VerifyReport(len(infos), total, problems, erased)

    def _check_indexes(
        self, infos: list[StreamInfo], positions: bool, total: int, head: int
    ) -> list[Problem]:
        """Problems of the stream listing (and, with `positions`, of reading by position).

        None if the head position moved since `head`: an append landed while checking.
        """
        found: list[Problem] = []
        for info in infos:
            problem = self._check_listing(info)  # (a stream's own walk found nothing wrong)
            if problem is not None:
                found.append(problem)
        if positions and not found:
            problem = self._check_positions({i.stream for i in infos}, total)
            if problem is not None:
                found.append(problem)
        return found if self.head_position() == head else []

    def _check_positions(self, listed: set[str], total: int) -> Problem | None:
        """A problem if reading by position does not give every verified event once, in order.

        Positions live in an index or column no hash covers: a lost or redirected entry would
        make subscribers skip or repeat events. Records are read, not decoded events.
        """
        seen, last = 0, 0
        gapless = self._backend.gapless_positions
        try:
            while True:
                page = self._backend.read_all(last, PAGE)
                for rec in page:
                    why = ""
                    if rec.position <= last:
                        why = f"position {rec.position} comes after position {last}"
                    elif gapless and rec.position != last + 1:
                        why = (
                            f"positions jump from {last} to {rec.position}: this store's "
                            "positions have no gaps, so the event(s) between were removed"
                        )
                    elif rec.stream not in listed:
                        why = "is read by position but its stream is not listed"
                    if why:
                        return Problem(rec.stream, rec.seq, rec.id, why)
                    last = rec.position
                    seen += 1
                if len(page) < PAGE:
                    break
        except CorruptionError as exc:
            return Problem(exc.stream or "", exc.seq or 0, None, str(exc))
        if seen != total:
            return Problem(
                "", 0, None, f"reading by position gives {seen} events, the streams hold {total}"
            )
        return None

    def _check_listing(self, info: StreamInfo) -> Problem | None:
        """A problem if the stream's listed length is not where its verified events end.

        The listing comes from what backends keep beside the events (an index, a column, a
        table), which no hash covers.
        """
        last = self._backend.last(info.stream)
        fork = self._backend.get_fork(info.stream)
        end = last.seq if last is not None else (fork.at_seq if fork is not None else 0)
        if info.last_seq == end:
            return None
        return Problem(
            info.stream,
            min(info.last_seq, end) + 1,
            None,
            f"the stream is listed with {info.last_seq} events but its events end at seq {end}",
        )

    def _verify_stream(
        self,
        stream: str,
        done: int = 0,
        progress: Callable[[int], None] | None = None,
        upto: int | None = None,
        last: int | None = None,
    ) -> tuple[int, Problem | None, bool]:
        """(events checked, first problem, whether erased) of a stream's events up to `last`.

        An erased stream's chain is checked in full; its encrypted payloads are not decoded.
        """
        fork = self._backend.get_fork(stream)
        prev_seq, prev_hash, prev_position = 0, GENESIS, 0
        if fork is not None:
            prev_seq = fork.at_seq
            try:
                prev_hash = self._record_at(fork.parent, fork.at_seq).hash
            except CorruptionError as exc:
                return 0, Problem(stream, fork.at_seq, None, str(exc)), False
        count = 0
        erased = False
        while True:
            try:
                page = self._backend.read(stream, prev_seq + 1, last, limit=PAGE)
            except CorruptionError as exc:
                # A record the backend cannot even read (a damaged line) is a problem to report.
                return count, Problem(stream, exc.seq or prev_seq + 1, None, str(exc)), erased
            for rec in page:
                if upto is not None and rec.position > upto:
                    return count, None, erased  # a stream's positions grow with its seqs
                count += 1
                try:
                    problem = self._check_record(
                        rec, prev_seq, prev_hash, prev_position, decode=not erased
                    )
                except ErasedError:
                    erased = True
                    problem = self._check_record(
                        rec, prev_seq, prev_hash, prev_position, decode=False
                    )
                if problem is not None:
                    return count, problem, erased
                prev_seq, prev_hash, prev_position = rec.seq, rec.hash, rec.position
            unindexed = self._backend.id_index_problem(page)
            if unindexed is not None:
                rec, why = unindexed
                return count, Problem(stream, rec.seq, rec.id, why), erased
            if progress is not None:
                progress(done + count)
            if len(page) < PAGE:
                return count, None, erased

    def _check_record(
        self,
        rec: Record,
        prev_seq: int,
        prev_hash: bytes,
        prev_position: int,
        *,
        decode: bool = True,
    ) -> Problem | None:
        """The problem of one stored record, given the one before it in its stream, if any.

        ErasedError if it is sealed with an erased key (and `decode`): without `decode`, a
        sealed record's hash is checked but its payload is not opened.
        """
        if rec.seq != prev_seq + 1:
            return Problem(rec.stream, prev_seq + 1, None, "seq is missing (gap)")
        if rec.position <= prev_position:  # positions grow with seqs in a stream
            return Problem(
                rec.stream,
                rec.seq,
                rec.id,
                f"position {rec.position} is not after the previous seq's {prev_position}: "
                "the stored position was altered",
            )
        location = self.location
        codec = self._codec
        try:
            if decode or not rec.codec & ENCRYPTED:
                codec.decode_data(rec, location)
                codec.decode_meta(rec, location)
            else:
                codec.check_codec(rec, location)
            hashed = codec.hashed_payload(rec, location)
        except (CorruptionError, MissingKeyError) as exc:
            return Problem(rec.stream, rec.seq, rec.id, str(exc))
        expected = chain_hash(
            prev_hash,
            rec.stream,
            rec.seq,
            rec.id,
            rec.ts,
            rec.type,
            rec.version,
            rec.causation_id,
            rec.correlation_id,
            rec.meta,
            hashed,
        )
        if expected != rec.hash:
            return Problem(
                rec.stream,
                rec.seq,
                rec.id,
                "hash mismatch: this event (or its stored hash) was altered",
            )
        return None

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the backend; further calls raise StoreClosedError."""
        if self._closed:
            return
        self._closed = True
        if self._forked:  # the parent's connections, locks and files stay as the parent left them
            return
        self.wake_waiters()
        self._backend.close()

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return self._closed

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def require_store(obj: object, call: str) -> None:
    """Raise UsageError unless `obj` is a (sync) `Store`; an AsyncStore is told what to pass."""
    if isinstance(obj, Store):
        return
    if isinstance(getattr(obj, "sync", None), Store):
        raise UsageError(
            f"{call} takes a Store, not an AsyncStore: pass its .sync from a worker thread, "
            f"e.g. await asyncio.to_thread({call}, astore.sync, ...), so the event loop is "
            "not blocked"
        )
    raise UsageError(f"{call} takes a Store, got {type(obj).__name__}")


def read_all_until_erased(store: Store, after: int, limit: int | None) -> list[RecordedEvent]:
    """`store.read_all(after, limit)` as a list, cut short before an erased event.

    The next read, from the last event's position, raises the ErasedError. A caller handed
    the error at once would lose the events before it, since ErasedError tells it to go on
    after `exc.position`. (An erased event first in line raises at once.)
    """
    out: list[RecordedEvent] = []
    try:
        for page in store._all_pages(after, limit):
            out.extend(page)
    except ErasedError:
        if not out:
            raise
    return out


def as_seconds(value: object) -> float:
    """A duration given as an int or float, as a float; callers check the range.

    NaN for anything else (a bool is no duration), infinity for an int too big for a float.
    """
    if type(value) not in (int, float):
        return math.nan
    try:
        return float(value)  # type: ignore[arg-type]
    except OverflowError:
        return math.inf


def check_poll_interval(value: object) -> float:
    """A subscription's poll interval: a positive, finite number of seconds (else ValidationError).

    Zero or less would make every waiting subscriber spin a CPU core.
    """
    seconds = as_seconds(value)
    if not 0 < seconds < math.inf:
        raise ValidationError(
            f"must be a positive number of seconds, got {value!r}", field="poll_interval"
        )
    return seconds


def _encryption(
    key_store: KeyStore | None, keys: str | os.PathLike[str] | None
) -> Encryption | None:
    """What seals the store's new events: from a key store, or a key directory (or None)."""
    if key_store is not None and keys is not None:
        raise UsageError("give keys (a key directory) or key_store, not both")
    if keys is not None:
        if not isinstance(keys, (str, os.PathLike)) or not os.fspath(keys):
            raise UsageError(f"keys must name a key directory, got {keys!r}")
        key_store = FileKeyStore(keys)
    if key_store is None:
        return None
    if not isinstance(key_store, KeyStore):
        raise UsageError(
            f"key_store must be a KeyStore (get, get_or_create, delete, erased, location), got "
            f"{type(key_store).__name__}"
        )
    return Encryption(key_store)


def _repeated_id(encoded: list[Encoded]) -> ValidationError:
    """The error for a batch holding one event id twice, naming both events."""
    first: dict[str, int] = {}
    for i, e in enumerate(encoded):
        j = first.setdefault(e.id, i)
        if j != i:
            return ValidationError(
                f"repeats the id {e.id} of event #{j} in the same batch", field="id", index=i
            )
    raise AssertionError("no id is repeated")


def _check_expected(expected: object) -> None:
    if expected in (ANY, NO_STREAM):
        return
    if type(expected) is not int or not 0 <= expected <= MAX_SEQ:
        raise ValidationError(
            f"must be an int from 0 to 2**63 - 1, 'any' or 'no_stream', got {expected!r}",
            field="expected_seq",
        )


def _durability(value: Durability | str) -> Durability:
    """A durability level; ValidationError naming the choices for anything else."""
    try:
        return Durability(value)
    except ValueError:
        choices = ", ".join(d.value for d in Durability)
        raise ValidationError(
            f"must be one of {choices}, got {value!r}", field="durability"
        ) from None


def _check_int(value: object, field: str, low: int) -> None:
    """Raise ValidationError unless `value` is an int (not a bool) from `low` to MAX_SEQ.

    Seqs, positions and counts are stored as 64-bit integers: a larger one, a float or a bool
    would reach each backend differently (or not at all).
    """
    if type(value) is not int or not low <= value <= MAX_SEQ:
        raise ValidationError(f"must be an int from {low} to 2**63 - 1, got {value!r}", field=field)


def _matches(expected: ExpectedSeq, tail_seq: int) -> bool:
    if expected == ANY:
        return True
    if expected == NO_STREAM:
        return tail_seq == 0
    return expected == tail_seq


__all__ = ["ANY", "NO_STREAM", "ExpectedSeq", "Problem", "Store", "VerifyReport"]
