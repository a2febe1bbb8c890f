"""Run a projection over a stream: from scratch, from a snapshot plus the tail, or live.

Snapshots live in the backend, keyed by (stream, projection name, version, seq). Each is wrapped
in an envelope with the name, version, seq, stream, the hash of the event at that seq and a
CRC-32 of the payload, so a snapshot that does not decode or does not match (another stream's,
or one of events since replaced) is found before it is used: it is discarded with a
`SnapshotWarning`, deleted, and the next older one (or a full replay) is used instead.
A fork also uses its ancestors' snapshots taken at or before its fork point.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
import zlib
from collections import OrderedDict
from collections.abc import Iterable
from typing import Generic

import msgspec

from eventlog.encryption import SNAPSHOT_MAGIC, open_snapshot, seal_snapshot
from eventlog.errors import (
    ErasedError,
    MissingKeyError,
    StreamNotFoundError,
    UsageError,
    ValidationError,
)
from eventlog.events import EventData, RecordedEvent
from eventlog.projections.base import Projection, S
from eventlog.projections.state import ConversationProjection, ConversationState, Policy
from eventlog.store import Store, require_store
from eventlog.subscription import check_timeout

log = logging.getLogger("eventlog.projections")

DEFAULT_SNAPSHOT_EVERY = 1000
DEFAULT_KEEP_SNAPSHOTS = 3
"""Snapshots kept per stream and projection version: older ones are deleted on each save."""
_MAX_SOURCES = 16


class SnapshotWarning(UserWarning):
    """A stored snapshot was corrupt or did not match, and was discarded."""


class _Envelope(msgspec.Struct, frozen=True, array_like=True):
    name: str
    version: int
    seq: int
    digest: bytes
    payload: bytes
    stream: str | None = None
    """The stream it was taken of (None in snapshots saved before eventlog kept it)."""
    event_hash: str | None = None
    """The hash of the event at `seq` when it was taken (None, as for `stream`)."""


_envelope_decoder = msgspec.msgpack.Decoder(_Envelope)


def _digest(payload: bytes) -> bytes:
    # CRC-32 catches accidental damage (torn writes, flipped bits) at ~2 GB/s; snapshots are a
    # cache derived from the hash-chained events, not evidence, so no cryptographic hash.
    return zlib.crc32(payload).to_bytes(4, "big")


class StoreSource:
    """Event payloads of one stream by seq, read a page at a time (a small LRU of pages)."""

    PAGE = 256

    def __init__(self, store: Store, stream: str, *, pages: int = 8) -> None:
        self.store = store
        self.stream = stream
        self._pages: OrderedDict[int, list[RecordedEvent]] = OrderedDict()
        self._max_pages = pages
        self._lock = threading.Lock()

    def data(self, seq: int) -> EventData:
        """The payload at `seq` (reads and caches its page on a miss)."""
        number, offset = divmod(seq - 1, self.PAGE)
        with self._lock:
            page = self._pages.get(number)
            if page is not None:
                self._pages.move_to_end(number)
        if page is None or offset >= len(page):
            first = number * self.PAGE + 1
            page = list(self.store.read(self.stream, first, first + self.PAGE - 1))
            with self._lock:
                self._pages[number] = page
                while len(self._pages) > self._max_pages:
                    self._pages.popitem(last=False)
        if offset >= len(page):
            raise ValidationError(f"stream {self.stream!r} has no seq {seq}", field="seq")
        return page[offset].data


class Runner(Generic[S]):
    """Computes one projection over streams of a store, with snapshots every N events."""

    def __init__(
        self,
        store: Store,
        projection: Projection[S],
        *,
        snapshot_every: int | None = DEFAULT_SNAPSHOT_EVERY,
        parent_snapshots: bool = True,
        keep_snapshots: int | None = DEFAULT_KEEP_SNAPSHOTS,
    ) -> None:
        require_store(store, "Runner")
        if snapshot_every is not None and snapshot_every < 1:
            raise UsageError(f"snapshot_every must be >= 1 or None, got {snapshot_every}")
        if keep_snapshots is not None and keep_snapshots < 1:
            raise UsageError(f"keep_snapshots must be >= 1 or None, got {keep_snapshots}")
        self.store = store
        self.projection = projection
        self.snapshot_every = snapshot_every
        """Save a snapshot at each multiple of N reached (None: only on demand)."""
        self.parent_snapshots = parent_snapshots
        """Let a fork start from its ancestors' snapshots at or before the fork point."""
        self.keep_snapshots = keep_snapshots
        """After saving, keep only this many newest snapshots of the stream (None: all).

        A state is a whole conversation, so keeping every snapshot would grow storage with the
        square of a stream's length; a query below the oldest kept one replays from the start.
        """
        self._sources: OrderedDict[str, StoreSource] = OrderedDict()

    # -- computing states ------------------------------------------------------------------

    def end(self, stream: str, at: int | None = None) -> int:
        """The seq a query resolves to: `at`, checked against the stream, or its last seq."""
        last = self.store.stream_info(stream).last_seq
        if at is None:
            return last
        if type(at) is not int or not 0 <= at <= last:
            raise ValidationError(
                f"must be between 0 and {last} (the end of {stream!r}), got {at}", field="at"
            )
        return at

    def replay(self, stream: str, at: int | None = None) -> S:
        """The state at `at` (default: the end) by a full replay, ignoring snapshots."""
        end = self.end(stream, at)
        return self._fold(stream, self.projection.initial(), 0, end)

    def state(self, stream: str, at: int | None = None, *, snapshots: bool = True) -> S:
        """The state at `at` (default: the end): latest usable snapshot at or below it + tail.

        With `snapshot_every` set, also saves a snapshot at the last multiple of N on the way.
        StreamNotFoundError for a stream that does not exist (`follow` waits for one instead).
        """
        end = self.end(stream, at)
        if not snapshots:
            return self._fold(stream, self.projection.initial(), 0, end)
        state, base = self._restore(stream, end)
        return self._advance(stream, state, base, end)

    def save_snapshot(self, stream: str, at: int | None = None) -> int:
        """Compute the state at `at` (default: the end) and store a snapshot of it; its seq."""
        end = self.end(stream, at)
        state, base = self._restore(stream, end)
        state = self._fold(stream, state, base, end)
        if end > 0:
            self._save(stream, end, state)
        return end

    def follow(self, stream: str) -> Follower[S]:
        """A live follower: the state at the end now, kept up to date as events arrive.

        A stream that does not exist yet is waited for: the initial state (seq 0) until it does.
        """
        return Follower(self, stream)

    def source(self, stream: str) -> StoreSource:
        """The event source that states restored for `stream` load event bodies from."""
        sources = self._sources
        src = sources.get(stream)
        if src is None:
            src = sources[stream] = StoreSource(self.store, stream)
            while len(sources) > _MAX_SOURCES:
                sources.popitem(last=False)  # states already made keep theirs alive
        else:
            sources.move_to_end(stream)
        return src

    # -- internals -------------------------------------------------------------------------

    def _fold(self, stream: str, state: S, base: int, end: int) -> S:
        if end <= base:
            return state
        return self.projection.fold_many(
            state, self.store.read(stream, base + 1, end), self.source(stream)
        )

    def _advance(self, stream: str, state: S, base: int, end: int) -> S:
        """Fold base+1..end, saving a snapshot at the last multiple of N in that range."""
        every = self.snapshot_every
        if every is not None:
            mark = end - end % every
            if mark > base:
                state = self._fold(stream, state, base, mark)
                self._save(stream, mark, state)
                base = mark
        return self._fold(stream, state, base, end)

    def _save(self, stream: str, seq: int, state: S) -> None:
        proj = self.projection
        payload = proj.encode(state)
        event_hash = self.store.get(stream, seq).hash
        blob = msgspec.msgpack.encode(
            _Envelope(proj.name, proj.version, seq, _digest(payload), payload, stream, event_hash)
        )
        encryption = self.store.codec.encryption
        if encryption is not None:  # state made from sealed events is sealed as well
            lineage = self._lineage(stream)
            blob = seal_snapshot(encryption, lineage, seq, proj.name, blob, self.store.backend.last)
        backend = self.store.backend
        backend.save_snapshot(stream, proj.name, proj.version, seq, blob)
        keep = self.keep_snapshots
        if keep is not None:
            for old in backend.snapshot_seqs(stream, proj.name, proj.version)[:-keep]:
                backend.delete_snapshot(stream, proj.name, proj.version, old)

    def _lineage(self, stream: str) -> list[str]:
        """The stream and its ancestors: whose events a snapshot of it was made from."""
        return [stream, *(name for name, _ in self.store.ancestry(stream))]

    def _candidates(self, stream: str, end: int) -> dict[str, int]:
        """Streams whose snapshots are valid for `stream` at seqs <= their limit."""
        limits = {stream: end}
        if self.parent_snapshots:
            for ancestor, fork_seq in self.store.ancestry(stream):
                limits[ancestor] = min(end, fork_seq)
        return limits

    def restore(self, stream: str, end: int) -> tuple[S, int]:
        """(state, seq) from the newest usable snapshot at or below `end`, else (initial, 0).

        `end` is a seq of the stream, as `at` is for `state` (ValidationError otherwise;
        StreamNotFoundError for a stream that does not exist).
        """
        return self._restore(stream, self.end(stream, end))

    def _restore(self, stream: str, end: int) -> tuple[S, int]:
        proj = self.projection
        backend = self.store.backend
        limits = self._candidates(stream, end) if end > 0 else {}
        while True:
            best: tuple[str, int, bytes] | None = None
            for origin, limit in limits.items():
                if limit < 1:
                    continue
                found = backend.load_snapshot(origin, proj.name, proj.version, limit)
                if found is not None and (best is None or found[0] > best[1]):
                    best = (origin, found[0], found[1])
            if best is None:
                return proj.initial(), 0
            origin, seq, blob = best
            try:
                state = self._decode(blob, origin, stream, seq)
            except (ErasedError, MissingKeyError):
                raise  # as reading the events themselves would
            except Exception as exc:  # anything that does not decode is never trusted
                message = (
                    f"discarded corrupt snapshot of projection {proj.name!r} v{proj.version} "
                    f"for stream {origin!r} at seq {seq}: {type(exc).__name__}: {exc}"
                )
                log.warning(message)
                warnings.warn(message, SnapshotWarning, stacklevel=3)
                backend.delete_snapshot(origin, proj.name, proj.version, seq)
                limits[origin] = seq - 1
                continue
            proj.check_restored(state, stream)
            return state, seq

    def _decode(self, blob: bytes, origin: str, stream: str, seq: int) -> S:
        """The state in a snapshot of `origin` at `seq`, restored for `stream`.

        Raises if it does not match: another projection, stream or seq, damage, or events
        replaced since it was taken.
        """
        proj = self.projection
        if blob.startswith(SNAPSHOT_MAGIC):
            encryption = self.store.codec.encryption
            blob = open_snapshot(encryption, self._lineage(origin), seq, proj.name, blob)
        env = _envelope_decoder.decode(blob)
        if (env.name, env.version, env.seq) != (proj.name, proj.version, seq):
            raise ValueError(
                f"envelope says {env.name!r} v{env.version} seq {env.seq}, "
                f"expected {proj.name!r} v{proj.version} seq {seq}"
            )
        if env.stream is not None and env.stream != origin:
            raise ValueError(f"it was taken of stream {env.stream!r}")
        if _digest(env.payload) != env.digest:
            raise ValueError("payload digest mismatch")
        if env.event_hash is not None and env.event_hash != self.store.get(stream, seq).hash:
            raise ValueError(f"the event at seq {seq} is not the one it was taken after")
        return proj.decode(env.payload, self.source(stream))


class Follower(Generic[S]):
    """A projection kept up to date with one stream as events commit (see `Runner.follow`).

    Its stream need not exist yet: until it does, `seq` is 0 and `state` the initial state.
    """

    def __init__(self, runner: Runner[S], stream: str) -> None:
        self.runner = runner
        self.stream = stream
        store = runner.store
        # Subscribe first, so nothing committed while the state is computed is missed.
        self._sub = store.subscribe(after=store.head_position())
        self.seq = 0
        """The last seq folded (0 while the stream does not exist)."""
        self.state: S = runner.projection.initial()
        """The state at `seq`."""
        try:
            self._load()
        except BaseException:  # a bad stream name, a closed store: leave no subscription open
            self._sub.close()
            raise

    @property
    def closed(self) -> bool:
        """Whether it has ended: `close()` was called or the store was closed."""
        return self._sub.closed

    def poll(self, timeout: float = 0.0) -> S:
        """Fold events committed since the last call (waiting up to `timeout` for some).

        Commits to other streams do not end the wait. StoreClosedError once it has ended.
        While the stream does not exist, it waits for its first events, or for a fork creating
        it: the call then returns the state at the fork point.
        """
        mine = self._mine(check_timeout(timeout))
        if self.seq == 0:  # not there at the last look: take it whole, with any snapshots
            self._load()
            return self.state
        if not mine:
            return self.state
        end = mine[-1].seq
        if [e.seq for e in mine] == list(range(self.seq + 1, end + 1)):
            self._apply(mine, end)
        else:
            self._apply(self.runner.store.read(self.stream, self.seq + 1, end), end)
        return self.state

    def _load(self) -> None:
        """Take the state at the stream's end now; keep seq 0 if the stream does not exist yet.

        An existing stream ends at seq 1 or more (a fork at its fork point), so 0 means missing.
        """
        runner = self.runner
        try:
            end = runner.end(self.stream)
        except StreamNotFoundError:
            return
        self.state = runner.state(self.stream, end)
        self.seq = end

    def _mine(self, timeout: float) -> list[RecordedEvent]:
        """New events of this stream, polling until some come or `timeout` seconds pass.

        While the stream is missing, a fork creating it ends the wait too: it commits no event,
        so the wait is on the store's commits (a fork counts as one), looking for the stream.
        """
        deadline = time.monotonic() + timeout
        store = self.runner.store
        while True:
            left = max(0.0, deadline - time.monotonic())
            missing = self.seq == 0
            seen = store.commit_count
            events = self._sub.poll(0.0 if missing else left)
            mine = [e for e in events if e.stream == self.stream and e.seq > self.seq]
            if mine or left == 0.0 or (missing and store.exists(self.stream)):
                return mine
            if missing:
                store.wait_for_commit(seen, min(left, store.poll_interval), self._ended)

    def _ended(self) -> bool:
        return self._sub.closed

    def _apply(self, events: Iterable[RecordedEvent], end: int) -> None:
        runner = self.runner
        proj = runner.projection
        batch = list(events)
        state = self.state
        every = runner.snapshot_every
        if every is not None:
            mark = end - end % every
            if mark > self.seq:
                cut = mark - self.seq
                state = proj.fold_many(state, batch[:cut], runner.source(self.stream))
                runner._save(self.stream, mark, state)
                batch = batch[cut:]
        self.state = proj.fold_many(state, batch, runner.source(self.stream))
        self.seq = end

    def close(self) -> None:
        """Stop following."""
        self._sub.close()

    def __enter__(self) -> Follower[S]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def conversation_state(
    store: Store,
    stream: str,
    at: int | None = None,
    *,
    policy: Policy = "strict",
    snapshot_every: int | None = DEFAULT_SNAPSHOT_EVERY,
    keep_snapshots: int | None = DEFAULT_KEEP_SNAPSHOTS,
) -> ConversationState:
    """The `ConversationState` of a stream at `at` (default: its end), using snapshots.

    StreamNotFoundError for a stream that does not exist; `Runner.follow` waits for one instead.
    """
    runner = Runner(
        store,
        ConversationProjection(policy),
        snapshot_every=snapshot_every,
        keep_snapshots=keep_snapshots,
    )
    return runner.state(stream, at)


__all__ = [
    "DEFAULT_SNAPSHOT_EVERY",
    "Follower",
    "Runner",
    "SnapshotWarning",
    "StoreSource",
    "conversation_state",
]
