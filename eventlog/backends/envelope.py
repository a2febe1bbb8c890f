"""The packed record: every field of a record but its stream and position, in one blob.

Backends that store it (SQLite) read one value per event instead of a column per field, and the
core decodes it with one msgspec call straight into the event users see, payload included
(`Codec.to_events`), without building a `Record` in between. The blob is a MessagePack array in
`Packed`'s field order; the payload comes last and inline when it is plain MessagePack (so a
typed decoder reads it in the same pass), or as a bin when it is compressed (or JSON, on the
generic path of backends that store fields separately).
"""

from __future__ import annotations

import functools
from typing import Any, Generic, TypeVar

import msgspec

from eventlog.backends.base import STORED_VALUE_ERRORS, Record
from eventlog.errors import CorruptionError
from eventlog.events import RecordedEvent


class _Head(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """The fields of a packed record before its payload (schema v3's whole envelope)."""

    seq: int
    id: str
    ts: int
    type: str
    version: int
    meta: bytes
    causation_id: str | None
    correlation_id: str | None
    hash: bytes
    codec: int


class Packed(_Head, frozen=True, gc=False):
    """A packed record as stored: seq, id, time, kind, links, hash, payload codec, payload.

    `data` is the payload's MessagePack value as stored: the plain payload itself, or a bin
    holding the stored bytes (a compressed payload, or a JSON one).
    """

    data: msgspec.Raw


P = TypeVar("P")


class TypedPacked(_Head, Generic[P], frozen=True, gc=False):
    """A packed record decoded in one pass with its payload typed.

    `P` is the registered payload classes' union (`eventlog.codec.PayloadTypes`); a compressed
    payload (a bin) decodes as bytes.
    """

    data: P | bytes


PackedRow = tuple[int, str, bytes]
"""(position, stream, packed record): one event as a packing backend reads it."""
StreamRow = tuple[int, bytes]
"""(position, packed record): a `PackedRow` read from a stream known to all."""

_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(Packed).decode
_decode_bin = msgspec.msgpack.Decoder(bytes).decode
_BIN_MARKERS = (b"\xc4", b"\xc5", b"\xc6")
"""First bytes of a MessagePack bin."""


@functools.lru_cache(maxsize=4)
def typed_decoder(union: Any) -> msgspec.msgpack.Decoder[TypedPacked[Any]]:
    """The one-pass decoder of packed records for a union of payload classes."""
    return msgspec.msgpack.Decoder(TypedPacked[union])


def pack_record(rec: Record, inline: bool = True) -> bytes:
    """The packed record of a record: a plain payload inline, a compressed one as a bin.

    `inline=False` keeps every payload a bin: for payloads that are not MessagePack (JSON).
    """
    return _encode(
        (
            rec.seq,
            rec.id,
            rec.ts,
            rec.type,
            rec.version,
            rec.meta,
            rec.causation_id,
            rec.correlation_id,
            rec.hash,
            rec.codec,
            msgspec.Raw(rec.data) if inline and not rec.codec else rec.data,
        )
    )


def unpack_record(position: int, stream: str, packed: bytes, location: str = "") -> Record:
    """The record of a packed row; CorruptionError, saying where, if it is damaged."""
    if not isinstance(packed, bytes):  # a value edited in as text or a number
        raise CorruptionError(
            f"record at position {position} is stored as {type(packed).__name__}, not bytes",
            stream=stream,
            location=location or None,
        )
    try:
        p = _decode(packed)
        raw = bytes(p.data)
        # A payload stored inline is a map or an array, never a bin. (A compressed one that is
        # not a bin is kept as it is: decompressing it then says what is wrong, and where.)
        data = _decode_bin(raw) if raw[:1] in _BIN_MARKERS else raw
    except STORED_VALUE_ERRORS as exc:
        raise CorruptionError(
            f"record at position {position} does not decode: {exc}",
            stream=stream,
            location=location or None,
        ) from exc
    return Record(
        p.id,
        stream,
        p.seq,
        p.ts,
        p.type,
        p.version,
        data,
        p.meta,
        p.causation_id,
        p.correlation_id,
        p.hash,
        p.codec,
        position,
    )


def pack_rows(records: list[Record]) -> list[PackedRow]:
    """Packed rows of records (the generic path for backends that store fields separately)."""
    return [(r.position, r.stream, pack_record(r, inline=False)) for r in records]


def exact_event(
    r: Any,
    current: dict[str, tuple[type, int]],
    stream: str,
    position: int,
) -> RecordedEvent | None:
    """The event of a record decoded with its payload typed, if that decode is exact.

    `r` is a `TypedPacked` or a backend's own typed record with the same fields (LMDB's).

    It is when the payload is plain, has no meta, and its class is the one the record's type
    names at its current schema version (`PayloadTypes.current`); otherwise None, and the caller
    takes the codec's path, which upcasts or raises the CorruptionError that says where.
    """
    if (
        r.codec
        or r.meta
        or (kind := current.get(r.type)) is None
        or kind[0] is not type(r.data)
        or kind[1] != r.version
    ):
        return None
    return RecordedEvent(
        id=r.id,
        stream=stream,
        seq=r.seq,
        position=position,
        ts=r.ts,
        data=r.data,  # type: ignore[arg-type]  # a payload class: its kind was checked
        meta={},
        causation_id=r.causation_id,
        correlation_id=r.correlation_id,
        hash=r.hash.hex(),
    )
