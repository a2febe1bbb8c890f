"""In-process backend for tests and throwaway runs: dicts and lists under one lock."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import msgspec

from eventlog.backends.base import (
    Backend,
    Conflict,
    Durability,
    ForkInfo,
    Record,
    StreamInfo,
)
from eventlog.errors import UsageError


class MemoryBackend(Backend):
    """Keeps records in memory; nothing survives the process."""

    format = "msgpack"
    durable = False
    gapless_positions = True

    def __init__(self, name: str = "") -> None:
        self.location = f"memory://{name}"
        self._lock = threading.Lock()
        self._log: list[Record] = []
        self._streams: dict[str, list[Record]] = {}
        self._ids: dict[str, Record] = {}
        self._forks: dict[str, ForkInfo] = {}
        self._blobs: dict[str, bytes] = {}
        self._snapshots: dict[tuple[str, str, int], dict[int, bytes]] = {}

    def append(self, records: Sequence[Record], durability: Durability) -> list[int]:
        """Insert atomically under the lock; positions follow the log's length."""
        if not records:
            return []
        stream = records[0].stream
        with self._lock:
            own = self._streams.get(stream)
            first_seq = records[0].seq
            if own and own[-1].seq >= first_seq:
                raise Conflict("seq", f"{stream!r} seq {first_seq}")
            if first_seq == 1 and stream in self._forks:
                raise Conflict("seq", f"{stream!r} is a fork")
            if any(r.id in self._ids for r in records):
                raise Conflict("id")
            base = len(self._log)
            stored = [
                msgspec.structs.replace(r, position=base + i + 1) for i, r in enumerate(records)
            ]
            self._log.extend(stored)
            self._streams.setdefault(stream, []).extend(stored)
            for r in stored:
                self._ids[r.id] = r
            return [r.position for r in stored]

    def _own(self, stream: str) -> list[Record]:
        return self._streams.get(stream, [])

    def read(
        self,
        stream: str,
        first: int,
        last: int | None,
        *,
        backwards: bool = False,
        limit: int | None = None,
    ) -> list[Record]:
        """Slice the stream's own list by seq."""
        with self._lock:
            own = self._own(stream)
            if not own:
                return []
            base = own[0].seq
            lo = max(first - base, 0)
            hi = len(own) if last is None else max(min(last - base + 1, len(own)), 0)
            if lo >= hi:
                return []
            if not backwards:
                end = hi if limit is None else min(hi, lo + limit)
                return own[lo:end]
            start = lo if limit is None else max(lo, hi - limit)
            return own[start:hi][::-1]

    def read_all(self, after: int, limit: int) -> list[Record]:
        """Positions are list indexes + 1."""
        with self._lock:
            return self._log[max(after, 0) : max(after, 0) + limit]

    def last(self, stream: str) -> Record | None:
        """The last own record."""
        with self._lock:
            own = self._own(stream)
            return own[-1] if own else None

    def get_by_ids(self, ids: Sequence[str]) -> dict[str, Record]:
        """Look ids up in the id map."""
        with self._lock:
            return {i: self._ids[i] for i in ids if i in self._ids}

    def create_fork(self, fork: ForkInfo) -> None:
        """Add a fork entry unless the stream exists."""
        with self._lock:
            if fork.stream in self._streams or fork.stream in self._forks:
                raise Conflict("fork", fork.stream)
            self._forks[fork.stream] = fork

    def get_fork(self, stream: str) -> ForkInfo | None:
        """The fork entry, if any."""
        with self._lock:
            return self._forks.get(stream)

    def list_forks(self, parent: str | None = None) -> list[ForkInfo]:
        """Fork entries sorted by stream name."""
        with self._lock:
            forks = sorted(self._forks.values(), key=lambda f: f.stream)
        return [f for f in forks if parent is None or f.parent == parent]

    def list_streams(self) -> list[StreamInfo]:
        """Streams with own records or fork entries."""
        with self._lock:
            names = sorted(set(self._streams) | set(self._forks))
            out = []
            for name in names:
                own = self._streams.get(name)
                last = (own[-1].seq, own[-1].ts) if own else None
                out.append(StreamInfo.of(name, last, self._forks.get(name)))
            return out

    def head_position(self) -> int:
        """The log's length."""
        with self._lock:
            return len(self._log)

    def get_blob(self, key: str) -> bytes | None:
        """A store-level value."""
        with self._lock:
            return self._blobs.get(key)

    def put_blob(self, key: str, value: bytes) -> None:
        """Set a store-level value."""
        with self._lock:
            self._blobs[key] = bytes(value)

    def save_snapshot(self, stream: str, name: str, version: int, seq: int, data: bytes) -> None:
        """Keep a snapshot in a dict keyed by (stream, name, version) then seq."""
        with self._lock:
            self._snapshots.setdefault((stream, name, version), {})[seq] = bytes(data)

    def load_snapshot(
        self, stream: str, name: str, version: int, max_seq: int | None
    ) -> tuple[int, bytes] | None:
        """The newest snapshot at or below max_seq."""
        with self._lock:
            snaps = self._snapshots.get((stream, name, version), {})
            seqs = [s for s in snaps if max_seq is None or s <= max_seq]
            if not seqs:
                return None
            best = max(seqs)
            return best, snaps[best]

    def delete_snapshot(self, stream: str, name: str, version: int, seq: int) -> None:
        """Drop one snapshot."""
        with self._lock:
            self._snapshots.get((stream, name, version), {}).pop(seq, None)

    def snapshot_seqs(self, stream: str, name: str, version: int) -> list[int]:
        """Seqs of the stored snapshots, ascending."""
        with self._lock:
            return sorted(self._snapshots.get((stream, name, version), {}))

    def drop_snapshots(self, stream: str) -> int:
        """Remove every snapshot of a stream."""
        with self._lock:
            keys = [k for k in self._snapshots if k[0] == stream]
            return sum(len(self._snapshots.pop(k)) for k in keys)

    def tamper(self, stream: str, seq: int, data: bytes) -> None:
        """Replace a stored payload underneath the store (for tamper-detection tests)."""
        with self._lock:
            own = self._streams[stream]
            idx = seq - own[0].seq
            old = own[idx]
            new = msgspec.structs.replace(old, data=data)
            own[idx] = new
            self._log[old.position - 1] = new
            self._ids[old.id] = new

    @classmethod
    def from_url(cls, url: str, path: str, options: dict[str, str]) -> MemoryBackend:
        """`memory://` or `memory://name` (each open is a new, empty store)."""
        if options:
            raise UsageError(f"unknown option(s) for memory://: {', '.join(sorted(options))}")
        return cls(path)
