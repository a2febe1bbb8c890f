"""The packed envelope: every field of a record but its stream, position and payload, in one blob.

Backends that store it (SQLite) read one blob per event instead of a column per field, and the
core decodes it with one msgspec call straight into the event users see (`Codec.to_events`),
without building a `Record` in between. The blob is a MessagePack array in `Envelope`'s field
order; the payload stays a separate value so it is never copied into or out of the envelope.
"""

from __future__ import annotations

import msgspec

from eventlog.backends.base import Record
from eventlog.errors import CorruptionError


class Envelope(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """A record's envelope as stored: seq, id, time, kind, links, hash and payload codec."""

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


PackedRow = tuple[int, str, bytes, bytes]
"""(position, stream, packed envelope, stored payload): one event as a packing backend reads it."""
StreamRow = tuple[int, bytes, bytes]
"""(position, packed envelope, stored payload): a `PackedRow` read from a stream known to all."""

_encode = msgspec.msgpack.Encoder().encode
decode_envelope = msgspec.msgpack.Decoder(Envelope).decode
"""Packed bytes -> Envelope; raises msgspec.DecodeError on damaged bytes."""


def damaged(exc: Exception, position: int, stream: str, location: str) -> CorruptionError:
    """The error for an envelope that does not decode, naming where it is stored."""
    return CorruptionError(
        f"envelope at position {position} does not decode: {exc}",
        stream=stream,
        location=location or None,
    )


def pack_fields(fields: tuple[object, ...]) -> bytes:
    """The packed envelope of its fields, given in `Envelope`'s order (e.g. a table row)."""
    return _encode(fields)


def pack_envelope(rec: Record) -> bytes:
    """The packed envelope of a record."""
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
        )
    )


def unpack_record(position: int, stream: str, env: bytes, data: bytes) -> Record:
    """The record of a packed row; raises msgspec.DecodeError on a damaged envelope."""
    return to_record(position, stream, decode_envelope(env), data)


def to_record(position: int, stream: str, e: Envelope, data: bytes) -> Record:
    """The record of a decoded envelope, its stream, position and stored payload."""
    return Record(
        e.id,
        stream,
        e.seq,
        e.ts,
        e.type,
        e.version,
        data,
        e.meta,
        e.causation_id,
        e.correlation_id,
        e.hash,
        e.codec,
        position,
    )


def pack_rows(records: list[Record]) -> list[PackedRow]:
    """Packed rows of records (the generic path for backends that store fields separately)."""
    return [(r.position, r.stream, pack_envelope(r), r.data) for r in records]
