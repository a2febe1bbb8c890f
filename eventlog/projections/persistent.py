"""`Log`: an immutable, append-only sequence that states at different seqs share.

A conversation's lists (messages, compactions, checkpoints) only ever grow. A `Log` is a view of
the first `n` items of a shared, chunked buffer, like a slice: freezing a state after a fold is
O(1), and a later state appends to the same buffer without copying the earlier items. Appending
to a view that is not at the buffer's end (folding twice from the same older state) copies the
view first, so every `Log` a caller holds is immutable.

Full chunks are encoded once and cached, and chunks loaded from a snapshot are decoded only when
an item in them is first read: restoring a 100k-event state costs O(chunks), not O(items).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")

CHUNK = 1024
"""Items per chunk: the unit of sharing, snapshot encoding and lazy decoding."""

_claim_lock = threading.Lock()


class _Buffer(Generic[T]):
    """Chunked storage behind one or more `Log` views; only its last chunk grows."""

    __slots__ = ("chunks", "claimed", "decode", "encoded", "size")

    def __init__(self, decode: Callable[[bytes], list[T]] | None = None) -> None:
        self.chunks: list[list[T] | None] = []
        """Decoded chunks; None for a chunk still only in `encoded`."""
        self.encoded: list[bytes | None] = []
        """Encoded form of full chunks (cache for snapshots, source for lazy decoding)."""
        self.size = 0
        self.claimed = False
        """A builder is appending to this buffer."""
        self.decode = decode

    def chunk(self, index: int) -> list[T]:
        found = self.chunks[index]
        if found is None:
            raw = self.encoded[index]
            assert raw is not None and self.decode is not None
            found = self.decode(raw)
            if len(found) != CHUNK:
                raise ValueError(f"chunk {index} has {len(found)} items, expected {CHUNK}")
            self.chunks[index] = found
        return found


class Log(Sequence[T]):
    """An immutable sequence of the first `len(self)` items of a shared append-only buffer."""

    __slots__ = ("_buf", "_n")

    def __init__(self, buf: _Buffer[T] | None = None, n: int = 0) -> None:
        self._buf: _Buffer[T] = buf if buf is not None else _Buffer()
        self._n = n

    @classmethod
    def of(cls, items: Sequence[T]) -> Log[T]:
        """A log holding these items."""
        builder: LogBuilder[T] = LogBuilder(cls())
        for item in items:
            builder.append(item)
        return builder.freeze()

    # -- Sequence --------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._n))]
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError("Log index out of range")
        return self._buf.chunk(index // CHUNK)[index % CHUNK]

    def __iter__(self) -> Iterator[T]:
        # Never more than `remaining` of a chunk, even while iterating it: a newer state folded
        # from this one meanwhile appends to the same shared chunk.
        remaining = self._n
        buf = self._buf
        for c in range(len(buf.chunks)):
            if remaining <= 0:
                return
            chunk = buf.chunk(c)
            take = min(remaining, len(chunk))
            yield from islice(chunk, take)
            remaining -= take

    def __reversed__(self) -> Iterator[T]:
        for i in range(self._n - 1, -1, -1):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Log):
            if other._buf is self._buf and other._n == self._n:
                return True
            return self._n == other._n and all(a == b for a, b in zip(self, other, strict=True))
        if isinstance(other, (list, tuple)):
            return self._n == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if self._n <= 6:
            return f"Log({list(self)!r})"
        head = ", ".join(repr(x) for x in self[:3])
        return f"Log([{head}, ... {self._n - 3} more])"

    @property
    def last(self) -> T | None:
        """The last item, or None when empty."""
        return self[self._n - 1] if self._n else None

    # -- snapshots -------------------------------------------------------------------------

    def encode_chunks(self, encode: Callable[[list[T]], bytes]) -> list[bytes]:
        """The items as encoded chunks (full chunks are encoded once, then cached)."""
        buf = self._buf
        out: list[bytes] = []
        full, rest = divmod(self._n, CHUNK)
        for c in range(full):
            raw = buf.encoded[c]
            if raw is None:
                raw = encode(buf.chunk(c))
                buf.encoded[c] = raw
            out.append(raw)
        if rest:
            out.append(encode(buf.chunk(full)[:rest]))
        return out

    @classmethod
    def from_chunks(
        cls, chunks: Sequence[bytes], n: int, decode: Callable[[bytes], list[T]]
    ) -> Log[T]:
        """A log over encoded chunks, decoded lazily on first access."""
        full, rest = divmod(n, CHUNK)
        if n < 0 or len(chunks) != full + (1 if rest else 0):
            raise ValueError(f"{len(chunks)} chunks cannot hold {n} items")
        buf: _Buffer[T] = _Buffer(decode)
        buf.encoded = [bytes(c) for c in chunks[:full]] + [None] * (len(chunks) - full)
        buf.chunks = [None] * full
        if full < len(chunks):
            tail = decode(chunks[full])
            if len(tail) != rest:
                raise ValueError(f"last chunk has {len(tail)} items, expected {rest}")
            buf.chunks.append(tail)
        buf.size = n
        return cls(buf, n)

    # -- building --------------------------------------------------------------------------

    def builder(self) -> LogBuilder[T]:
        """A builder that appends after this log's items (never changing this log)."""
        return LogBuilder(self)

    def appended(self, item: T) -> Log[T]:
        """A new log with one more item."""
        b = LogBuilder(self)
        b.append(item)
        return b.freeze()


class LogBuilder(Generic[T]):
    """Appends to a log's buffer in place when the log is at its end, else to a copy."""

    __slots__ = ("_buf", "_last")

    def __init__(self, base: Log[T]) -> None:
        buf = base._buf
        n = base._n
        with _claim_lock:
            mine = buf.size == n and not buf.claimed
            if mine:
                buf.claimed = True
        if not mine:
            buf = _copy_prefix(buf, n)
            buf.claimed = True
        self._buf: _Buffer[T] = buf
        chunks = buf.chunks
        if not chunks or len(buf.chunk(len(chunks) - 1)) == CHUNK:
            chunks.append([])
            buf.encoded.append(None)
        self._last: list[T] = buf.chunk(len(buf.chunks) - 1)

    def append(self, item: T) -> None:
        """Add one item at the end."""
        last = self._last
        last.append(item)
        if len(last) >= CHUNK:
            self._roll()

    def extend(self, items: list[T]) -> None:
        """Add many items at the end (chunk by chunk)."""
        start = 0
        total = len(items)
        while start < total:
            last = self._last
            room = CHUNK - len(last)
            last.extend(items[start : start + room])
            start += room
            if len(last) >= CHUNK:
                self._roll()

    def _roll(self) -> None:
        buf = self._buf
        buf.size = len(buf.chunks) * CHUNK
        self._last = []
        buf.chunks.append(self._last)
        buf.encoded.append(None)

    def _sync(self) -> _Buffer[T]:
        buf = self._buf
        buf.size = (len(buf.chunks) - 1) * CHUNK + len(self._last)
        return buf

    def __len__(self) -> int:
        return self._sync().size

    def __getitem__(self, index: int) -> T:
        buf = self._sync()
        if not 0 <= index < buf.size:
            raise IndexError("LogBuilder index out of range")
        return buf.chunk(index // CHUNK)[index % CHUNK]

    def freeze(self) -> Log[T]:
        """The log of everything appended so far; the builder stays usable."""
        buf = self._sync()
        return Log(buf, buf.size)

    def release(self) -> Log[T]:
        """Freeze and let later builders append to the buffer in place."""
        log = self.freeze()
        self._buf.claimed = False
        return log


def _copy_prefix(buf: _Buffer[Any], n: int) -> _Buffer[Any]:
    """A new buffer with the first n items; full chunks are shared, not copied."""
    new: _Buffer[Any] = _Buffer(buf.decode)
    full, rest = divmod(n, CHUNK)
    new.chunks = list(buf.chunks[:full])
    new.encoded = list(buf.encoded[:full])
    if rest:
        new.chunks.append(list(buf.chunk(full)[:rest]))
        new.encoded.append(None)
    new.size = n
    return new


__all__ = ["CHUNK", "Log", "LogBuilder"]
