"""What a store holds: streams, forks, events by kind, stored bytes, compression, size on disk.

One pass over the stored records in position order, without decoding payloads (about a
microsecond per event), so it is cheap enough to run on a large store with a progress bar.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import msgspec

from eventlog.encryption import ENCRYPTED
from eventlog.store import PAGE, Store


class KindStats(msgspec.Struct, frozen=True):
    """The events of one kind (type tag)."""

    type: str
    events: int
    stored_bytes: int
    """Payload bytes as stored (after compression)."""


class StoreStats(msgspec.Struct, frozen=True):
    """`store_stats`'s report."""

    location: str
    format: str
    """Payload encoding: msgpack or json."""
    streams: int
    forks: int
    events: int
    """Events stored (a fork's prefix counts once, in the stream that stored it)."""
    head_position: int
    first_ts: int | None
    last_ts: int | None
    compressed: int
    """Events whose payload is stored compressed."""
    encrypted: int
    """Events whose payload and meta are stored encrypted (docs/encryption.md)."""
    stored_bytes: int
    """Payload bytes as stored, all events."""
    disk_bytes: int | None
    """Bytes the store's files take on disk (allocated blocks; None for the memory backend)."""
    longest_stream: str | None
    longest_events: int
    kinds: list[KindStats]
    """Most events first."""


def store_stats(store: Store, *, progress: Callable[[int, int], None] | None = None) -> StoreStats:
    """Count what `store` holds; `progress(events done, head position)` after each page."""
    infos = store.streams()
    forks = store.forks()
    head = store.head_position()
    counts: dict[str, list[int]] = {}
    first_ts: int | None = None
    last_ts: int | None = None
    events = compressed = encrypted = stored = 0
    after = 0
    while True:
        page = store.backend.read_all(after, PAGE)
        if not page:
            break
        for rec in page:
            data = rec.data
            size = len(data) if isinstance(data, (bytes, str)) else 0  # damage: verify says so
            entry = counts.get(rec.type)
            if entry is None:
                counts[rec.type] = [1, size]
            else:
                entry[0] += 1
                entry[1] += size
            stored += size
            if rec.codec:
                compressed += rec.codec & ~ENCRYPTED != 0  # compression, under encryption too
                encrypted += rec.codec & ENCRYPTED != 0
            if first_ts is None or rec.ts < first_ts:
                first_ts = rec.ts
            if last_ts is None or rec.ts > last_ts:
                last_ts = rec.ts
        events += len(page)
        after = page[-1].position
        if progress is not None:
            progress(events, head)
    own = {info.stream: info.last_seq - (info.at_seq or 0) for info in infos}
    longest = max(own, key=lambda name: (own[name], name), default=None)
    paths = store.backend.disk_paths()
    return StoreStats(
        location=store.location,
        format=store.codec.format,
        streams=len(infos),
        forks=len(forks),
        events=events,
        head_position=head,
        first_ts=first_ts,
        last_ts=last_ts,
        compressed=compressed,
        encrypted=encrypted,
        stored_bytes=stored,
        disk_bytes=sum(map(allocated_bytes, paths)) if paths else store.backend.server_bytes(),
        longest_stream=longest,
        longest_events=own[longest] if longest is not None else 0,
        kinds=sorted(
            (KindStats(kind, n, size) for kind, (n, size) in counts.items()),
            key=lambda k: (-k.events, k.type),
        ),
    )


def allocated_bytes(path: Path) -> int:
    """Bytes allocated to a file, or to every file under a directory (0 if there is none).

    Allocated, not apparent: an LMDB data file is sparse up to its map size.
    """
    if path.is_file():
        return path.stat().st_blocks * 512
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):  # removed meanwhile (a temporary file)
                total += os.stat(os.path.join(root, name)).st_blocks * 512
    return total
