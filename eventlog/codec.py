"""The one place that encodes, decodes, validates and hashes events; backends see only records.

Binary backends store payloads as MessagePack, text backends as JSON. The hash chain covers the
envelope and the plain (uncompressed) payload bytes, so tampering with either is detected.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Literal

import msgspec

from eventlog.backends.base import Record
from eventlog.compression import Compression
from eventlog.errors import CorruptionError, SchemaVersionError, ValidationError
from eventlog.events import (
    Event,
    EventData,
    RecordedEvent,
    event_type,
    is_event_id,
    tag_of,
    upcaster,
)

Format = Literal["msgpack", "json"]

GENESIS = bytes(32)
"""The previous hash of a stream's first event."""
MAX_META_BYTES = 2048
DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024
MAX_STREAM_NAME = 200

_header_encoder = msgspec.msgpack.Encoder()


def chain_hash(
    prev: bytes,
    stream: str,
    seq: int,
    event_id: str,
    ts: int,
    type_: str,
    version: int,
    causation_id: str | None,
    correlation_id: str | None,
    meta: bytes,
    plain: bytes,
) -> bytes:
    """Hash of one event's envelope and plain payload, chained to the previous hash."""
    h = hashlib.blake2b(prev, digest_size=32)
    h.update(
        _header_encoder.encode(
            (stream, seq, event_id, ts, type_, version, causation_id, correlation_id, len(meta))
        )
    )
    h.update(meta)
    h.update(plain)
    return h.digest()


def validate_stream_name(stream: object) -> str:
    """Check a stream name: 1-200 printable characters, no control characters."""
    if not isinstance(stream, str):
        raise ValidationError(f"must be a str, got {type(stream).__name__}", field="stream")
    if not stream or not stream.strip():
        raise ValidationError("cannot be empty", field="stream")
    if len(stream) > MAX_STREAM_NAME:
        raise ValidationError(
            f"is {len(stream)} characters, the limit is {MAX_STREAM_NAME}", field="stream"
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in stream):
        raise ValidationError(f"{stream!r} contains control characters", field="stream")
    return stream


class Encoded(msgspec.Struct, frozen=True, gc=False):
    """An event encoded and validated, before seq, ts and hash are known."""

    id: str
    type: str
    version: int
    plain: bytes
    meta: bytes
    causation_id: str | None
    correlation_id: str | None
    data: EventData


class Codec:
    """Encodes events for one store format, and decodes records back to events."""

    def __init__(
        self,
        fmt: Format,
        *,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        compression: Compression | None = None,
    ):
        self.format: Format = fmt
        self.max_event_bytes = max_event_bytes
        self.compression = Compression() if compression is None else compression
        """Packs payloads for storage (see eventlog.compression)."""
        if fmt == "msgpack":
            self._encode: Callable[[Any], bytes] = msgspec.msgpack.Encoder().encode
            self._untyped: Callable[[bytes], Any] = msgspec.msgpack.Decoder().decode
        else:
            self._encode = msgspec.json.Encoder().encode
            self._untyped = msgspec.json.Decoder().decode
        self._decoders: dict[str, Callable[[bytes], Any]] = {}
        self._meta_decoder = (
            msgspec.msgpack.Decoder(dict[str, Any])
            if fmt == "msgpack"
            else msgspec.json.Decoder(dict[str, Any])
        )

    # -- encoding --------------------------------------------------------------------------

    def encode_event(self, event: Event | EventData, index: int = 0) -> Encoded:
        """Validate and encode one event to append; raise ValidationError naming the field."""
        if isinstance(event, EventData):
            event = Event(data=event)
        elif not isinstance(event, Event):
            raise ValidationError(
                f"expected an Event or EventData, got {type(event).__name__}", index=index
            )
        data = event.data
        if not isinstance(data, EventData):
            raise ValidationError(
                f"must be an EventData, got {type(data).__name__}", field="data", index=index
            )
        tag = tag_of(type(data))
        if event_type(tag) is not type(data):
            raise ValidationError(
                f"event kind {type(data).__name__} (tag {tag!r}) is not registered; "
                "call eventlog.register_event_type",
                field="data",
                index=index,
            )
        if not is_event_id(event.id):
            raise ValidationError(
                f"{event.id!r} is not a lowercase UUID string", field="id", index=index
            )
        for name in ("causation_id", "correlation_id"):
            value = getattr(event, name)
            if value is not None and (not isinstance(value, str) or not 0 < len(value) <= 128):
                raise ValidationError(
                    "must be a string of 1-128 characters", field=name, index=index
                )
        meta = self._encode_meta(event.meta, index)
        try:
            plain = self._encode(data)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValidationError(f"cannot be encoded: {exc}", field="data", index=index) from exc
        if len(plain) > self.max_event_bytes:
            raise ValidationError(
                f"encodes to {len(plain)} bytes, the limit is {self.max_event_bytes}",
                field="data",
                index=index,
            )
        return Encoded(
            event.id,
            tag,
            type(data).__schema_version__,
            plain,
            meta,
            event.causation_id,
            event.correlation_id,
            data,
        )

    def _encode_meta(self, meta: object, index: int) -> bytes:
        if not isinstance(meta, dict):
            raise ValidationError(
                f"must be a dict, got {type(meta).__name__}", field="meta", index=index
            )
        if not meta:
            return b""
        if not all(isinstance(k, str) for k in meta):
            raise ValidationError("keys must be strings", field="meta", index=index)
        try:
            encoded = self._encode(meta)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValidationError(f"cannot be encoded: {exc}", field="meta", index=index) from exc
        if len(encoded) > MAX_META_BYTES:
            raise ValidationError(
                f"encodes to {len(encoded)} bytes, the limit is {MAX_META_BYTES}",
                field="meta",
                index=index,
            )
        return encoded

    def pack(self, plain: bytes) -> tuple[bytes, int]:
        """Compress a payload for storage; returns (stored bytes, codec id)."""
        return self.compression.pack(plain)

    def unpack(self, rec: Record, location: str = "") -> bytes:
        """The plain payload bytes of a record."""
        if rec.codec == 0:
            return rec.data
        return self.compression.unpack(rec, location)

    # -- decoding --------------------------------------------------------------------------

    def _decoder(self, tag: str) -> Callable[[bytes], Any]:
        dec = self._decoders.get(tag)
        if dec is None:
            cls = event_type(tag)
            if cls is None:
                raise KeyError(tag)
            dec = (
                msgspec.msgpack.Decoder(cls).decode
                if self.format == "msgpack"
                else msgspec.json.Decoder(cls).decode
            )
            self._decoders[tag] = dec
        return dec

    def decode_data(self, rec: Record, location: str = "") -> EventData:
        """Decode (and upcast) a record's payload; raise CorruptionError saying where."""
        plain = self.unpack(rec, location) if rec.codec else rec.data
        try:
            cls = event_type(rec.type)
            if cls is None:
                raise CorruptionError(
                    f"unknown event type {rec.type!r} (register its class before reading)",
                    stream=rec.stream,
                    seq=rec.seq,
                    location=location or None,
                )
            current = cls.__schema_version__
            if rec.version == current:
                result: EventData = self._decoder(rec.type)(plain)
                return result
            if rec.version > current:
                raise SchemaVersionError(
                    f"event type {rec.type!r} has schema version {rec.version}, newer than "
                    f"this eventlog's {current}",
                    stream=rec.stream,
                    seq=rec.seq,
                    location=location or None,
                )
            return self._upcast(rec, cls, plain, current)
        except msgspec.MsgspecError as exc:
            raise CorruptionError(
                f"payload of type {rec.type!r} does not decode: {exc}",
                stream=rec.stream,
                seq=rec.seq,
                location=location or None,
            ) from exc

    def _upcast(self, rec: Record, cls: type[EventData], plain: bytes, current: int) -> EventData:
        value = self._untyped(plain)
        for version in range(rec.version, current):
            fn = upcaster(rec.type, version)
            if fn is None:
                raise CorruptionError(
                    f"no upcaster registered for {rec.type!r} from version {version}",
                    stream=rec.stream,
                    seq=rec.seq,
                )
            value = fn(value)
        value["type"] = rec.type
        result: EventData = msgspec.convert(value, cls, strict=self.format == "msgpack")
        return result

    def decode_meta(self, rec: Record, location: str = "") -> dict[str, Any]:
        """Decode a record's meta map."""
        if not rec.meta:
            return {}
        try:
            meta: dict[str, Any] = self._meta_decoder.decode(rec.meta)
        except msgspec.MsgspecError as exc:
            raise CorruptionError(
                f"meta does not decode: {exc}",
                stream=rec.stream,
                seq=rec.seq,
                location=location or None,
            ) from exc
        return meta

    def to_event(self, rec: Record, location: str = "") -> RecordedEvent:
        """Decode a record to the event users see."""
        return RecordedEvent(
            id=rec.id,
            stream=rec.stream,
            seq=rec.seq,
            position=rec.position,
            ts=rec.ts,
            data=self.decode_data(rec, location),
            meta=self.decode_meta(rec, location) if rec.meta else {},
            causation_id=rec.causation_id,
            correlation_id=rec.correlation_id,
            hash=rec.hash.hex(),
        )
