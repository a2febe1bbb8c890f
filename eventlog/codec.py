"""The one place that encodes, decodes, validates and hashes events; backends see only records.

Binary backends store payloads as MessagePack, text backends as JSON. The hash chain covers the
envelope and the plain (uncompressed) payload bytes, so tampering with either is detected. For
an encrypted record (see eventlog.encryption) it covers the stored, sealed payload and meta
instead: once a stream's key is erased its hashes confirm no guess of what it held, and
`verify` still checks its chain.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, NamedTuple

import msgspec

from eventlog.backends.base import DECODE_ERRORS, STORED_VALUE_ERRORS, Record
from eventlog.backends.envelope import (
    PackedRow,
    StreamRow,
    exact_event,
    typed_decoder,
    unpack_record,
)
from eventlog.compression import Compression
from eventlog.encryption import CODECS, ENCRYPTED, Encryption, no_key_store
from eventlog.errors import CorruptionError, SchemaVersionError, ValidationError
from eventlog.events import (
    UUID_PATTERN,
    Event,
    EventData,
    RecordedEvent,
    event_type,
    registered_event_types,
    tag_of,
    upcaster,
)
from eventlog.json_exact import Check, NotJSON, check_untyped
from eventlog.json_exact import checker as json_checker
from eventlog.round_trip import MAX_NESTING, differs, too_deep
from eventlog.round_trip import plain as plain_value
from eventlog.type_check import Check as TypeCheck
from eventlog.type_check import fast_check

Format = Literal["msgpack", "json"]

_uuid_match = UUID_PATTERN.match
_bad_char = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]").search
_bad_stored_char = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]").search
"""`_bad_char` without C1 controls, which names written before they were refused may hold."""
_surrogate = re.compile(r"[\ud800-\udfff]").search
"""Control characters, and lone surrogates (no UTF-8 form: no file name, key or column)."""
GENESIS = bytes(32)
"""The previous hash of a stream's first event."""
MAX_META_BYTES = 2048
DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024
MAX_STREAM_NAME = 200

_header_encoder = msgspec.msgpack.Encoder()
_sha256 = hashlib.sha256


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
    """SHA-256 of one event's envelope and plain payload, chained to the previous hash.

    SHA-256 rather than BLAKE2: CPUs with SHA extensions hash a 2 KB payload several times
    faster, and the hash is computed for every event on append and on verify.
    """
    h = _sha256(
        prev
        + _header_encoder.encode(
            (stream, seq, event_id, ts, type_, version, causation_id, correlation_id, len(meta))
        )
        + meta
    )
    h.update(plain)
    return h.digest()


def chain_hashes(
    prev: bytes, stream: str, first_seq: int, ts: int, encoded: Sequence[Encoded]
) -> list[bytes]:
    """`chain_hash` of each event of one append (seqs from `first_seq`, one `ts`), in one loop.

    One SHA-256 call per event over the concatenated input: the same digest as `chain_hash`'s
    update in two steps, with fewer Python calls on the append path.
    """
    header, sha = _header_encoder.encode, _sha256
    out: list[bytes] = []
    append = out.append
    seq = first_seq
    for e in encoded:
        meta = e.meta
        prev = sha(
            prev
            + header(
                (
                    stream,
                    seq,
                    e.id,
                    ts,
                    e.type,
                    e.version,
                    e.causation_id,
                    e.correlation_id,
                    len(meta),
                )
            )
            + meta
            + e.plain
        ).digest()
        append(prev)
        seq += 1
    return out


def validate_stream_name(stream: object, *, stored: bool = False) -> str:
    """Check a stream name: 1-200 printable characters, no control characters.

    `stored`: the name of a stream that may exist already (a read). C1 controls (U+0080-U+009F)
    are refused only in new names: earlier versions of eventlog accepted them, and a stream
    stored under such a name stays readable by it.
    """
    if not isinstance(stream, str):
        raise ValidationError(f"must be a str, got {type(stream).__name__}", field="stream")
    if not stream or not stream.strip():
        raise ValidationError("cannot be empty", field="stream")
    if len(stream) > MAX_STREAM_NAME:
        raise ValidationError(
            f"is {len(stream)} characters, the limit is {MAX_STREAM_NAME}", field="stream"
        )
    bad = (_bad_stored_char if stored else _bad_char)(stream)
    if bad:
        if "\ud800" <= bad.group() <= "\udfff":
            raise ValidationError(
                f"{stream!r} contains a lone surrogate (not valid Unicode)", field="stream"
            )
        raise ValidationError(f"{stream!r} contains control characters", field="stream")
    return stream


class PayloadTypes(NamedTuple):
    """Every registered payload class as one tagged union, for one-pass decoding.

    A backend whose stored form holds the payload inline (JSONL lines) can decode the envelope
    and the typed payload in one call; `current` then says whether the result may be used as
    is: the envelope's type must name the decoded class, and the stored schema version must be
    that class's current one.
    """

    union: Any
    current: dict[str, tuple[type, int]]
    """tag -> (payload class, current schema version)."""


_payload_types: tuple[int, PayloadTypes | None] = (-1, None)


def _registered_union() -> PayloadTypes | None:
    """The registered payload classes as a `PayloadTypes`, rebuilt when a class is registered.

    None if they cannot form a msgspec tagged union (a class with a tag field of its own):
    callers then decode each payload with its own class.
    """
    global _payload_types
    classes = registered_event_types()
    count, types = _payload_types
    if count == len(classes):  # tags are never re-bound, so the count says when this changes
        return types
    current = {tag: (cls, cls.__schema_version__) for tag, cls in classes.items()}
    union: Any = None
    for cls in classes.values():
        union = cls if union is None else union | cls
    try:
        msgspec.json.Decoder(union)
    except (TypeError, NameError):  # NameError: a class names a type not defined (yet)
        types = None
    else:
        types = PayloadTypes(union, current)
    _payload_types = (len(classes), types)
    return types


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


class _Kind(NamedTuple):
    """What encoding one registered payload class needs, cached per class."""

    tag: str
    version: int
    json_check: Check | None
    """The class's `json_exact` check in a JSON-format store, if it has floats or untyped
    fields."""
    decode: Callable[[bytes], Any]
    """The class's typed decoder: every payload is decoded once on append, so one whose fields
    hold what their types do not allow (Structs do not check on construction) is refused then
    rather than acknowledged and found unreadable later."""
    decodes: TypeCheck | None
    """The class's `type_check` check, when it has one: a payload it vouches for is not
    decoded (it looks at types only, without copying strings: 10-18% of a batch append)."""


class Codec:
    """Encodes events for one store format, and decodes records back to events."""

    def __init__(
        self,
        fmt: Format,
        *,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        compression: Compression | None = None,
        encryption: Encryption | None = None,
    ):
        self.format: Format = fmt
        if type(max_event_bytes) is not int or max_event_bytes < 1:
            raise ValueError(f"max_event_bytes must be a positive integer, got {max_event_bytes!r}")
        self.max_event_bytes = max_event_bytes
        self.compression = Compression() if compression is None else compression
        """Packs payloads for storage (see eventlog.compression)."""
        self.encryption = encryption
        """Seals new payloads and meta with their stream's key (None: stored plain)."""
        if fmt == "msgpack":
            self._encode: Callable[[Any], bytes] = msgspec.msgpack.Encoder().encode
            self._untyped: Callable[[bytes], Any] = msgspec.msgpack.Decoder().decode
        else:
            self._encode = msgspec.json.Encoder().encode
            self._untyped = msgspec.json.Decoder().decode
        self._decoders: dict[str, tuple[int, Callable[[bytes], Any]]] = {}
        """tag -> (current schema version, typed decoder), filled on first use."""
        self._kinds: dict[type, _Kind] = {}
        """payload class -> what encoding it needs, for classes found registered."""
        self._meta_decoder = (
            msgspec.msgpack.Decoder(dict[str, Any])
            if fmt == "msgpack"
            else msgspec.json.Decoder(dict[str, Any])
        )

    # -- encoding --------------------------------------------------------------------------

    def encode_events(self, events: Iterable[Event | EventData]) -> list[Encoded]:
        """`encode_event` for each event of one append (its index names it in errors)."""
        if type(events) is not list and (
            isinstance(events, (Event, EventData, str, bytes, bytearray, dict))
            or not hasattr(type(events), "__iter__")
        ):
            one = isinstance(events, (Event, EventData))
            raise ValidationError(
                f"must be a list of events, got {type(events).__name__}"
                + (" (for one event, pass [event])" if one else ""),
                field="events",
            )
        encode = self.encode_event
        return [encode(e, i) for i, e in enumerate(events)]

    def encode_event(self, event: Event | EventData, index: int = 0) -> Encoded:
        """Validate and encode one event to append; raise ValidationError naming the field."""
        if type(event) is not Event:
            if isinstance(event, EventData):
                event = Event(data=event)
            elif not isinstance(event, Event):
                raise ValidationError(
                    f"expected an Event or EventData, got {type(event).__name__}", index=index
                )
        data = event.data
        kind = self._kinds.get(type(data))
        if kind is None:
            kind = self._kind(data, index)
        if kind.json_check is not None:  # JSON format: floats and untyped values must survive it
            _check_json(data, "data", kind.json_check, index)
        event_id = event.id
        if type(event_id) is not str or len(event_id) != 36 or not _uuid_match(event_id):
            raise ValidationError(
                f"{event_id!r} is not a lowercase UUID string", field="id", index=index
            )
        causation, correlation = event.causation_id, event.correlation_id
        if causation is not None or correlation is not None:
            _check_link(causation, "causation_id", index)
            _check_link(correlation, "correlation_id", index)
        meta_map = event.meta
        meta = (
            b"" if type(meta_map) is dict and not meta_map else self._encode_meta(meta_map, index)
        )
        plain, data = self._encode_payload(data, kind, index)
        return Encoded(event_id, kind.tag, kind.version, plain, meta, causation, correlation, data)

    def _encode_payload(self, data: EventData, kind: _Kind, index: int) -> tuple[bytes, EventData]:
        """A payload's bytes, once it is known to read back as itself (see `_Kind.decode`).

        With them the payload as reads will give it: `data` itself, or its decoded copy when
        that holds equal values in other containers or number types (a list where `data` has
        a tuple), so an append returns exactly what reading the event returns later.
        """
        try:
            plain: bytes = self._encode(data)
        except (TypeError, ValueError, OverflowError, BufferError, AttributeError) as exc:
            raise ValidationError(f"cannot be encoded: {exc}", field="data", index=index) from exc
        except RecursionError:
            raise ValidationError(
                "is nested too deeply to encode", field="data", index=index
            ) from None
        if len(plain) > self.max_event_bytes:
            raise ValidationError(
                f"encodes to {len(plain)} bytes, the limit is {self.max_event_bytes}",
                field="data",
                index=index,
            )
        try:
            # A yes also rules out msgspec.Raw, the only way to a line break in JSON output.
            if kind.decodes is not None and kind.decodes(data):
                return plain, data
        except RecursionError:
            pass  # too deep for the quick check: the decoder and the comparison decide
        if self.format == "json" and b"\n" in plain:
            raise _line_break("data", index)
        _check_depth(data, "data", index)
        try:
            decoded = kind.decode(plain)
        except msgspec.MsgspecError as exc:
            raise ValidationError(
                f"does not match its declared types, so it could not be read back: {exc}",
                field="data",
                index=index,
            ) from None
        except Exception as exc:  # a __post_init__ raising something else on these values
            raise ValidationError(
                f"could not be read back: decoding it raised {type(exc).__name__}: {exc}",
                field="data",
                index=index,
            ) from None
        _check_reads_back(data, decoded, "data", index)
        return plain, decoded

    def _kind(self, data: object, index: int) -> _Kind:
        """How to encode a payload class (tag, version, checks), checking it is registered."""
        if not isinstance(data, EventData):
            raise ValidationError(
                f"must be an EventData, got {type(data).__name__}", field="data", index=index
            )
        cls = type(data)
        tag = tag_of(cls)
        if event_type(tag) is not cls:
            raise ValidationError(
                f"event kind {cls.__name__} (tag {tag!r}) is not registered; "
                "call eventlog.register_event_type",
                field="data",
                index=index,
            )
        try:
            version, decode = self._decoders.get(tag) or self._decoder_for(tag, cls)
        except (TypeError, NameError) as exc:  # a field type msgspec cannot decode, or undefined
            raise ValidationError(
                f"event kind {cls.__name__} cannot be stored: {exc}", field="data", index=index
            ) from None
        json_check = json_checker(cls) if self.format == "json" else None
        fast = fast_check(cls)
        kind = _Kind(tag, version, json_check, decode, fast)
        self._kinds[cls] = kind
        return kind

    def _encode_meta(self, meta: object, index: int) -> bytes:
        if not isinstance(meta, dict):
            raise ValidationError(
                f"must be a dict, got {type(meta).__name__}", field="meta", index=index
            )
        if not meta:
            return b""
        if not all(isinstance(k, str) for k in meta):
            raise ValidationError("keys must be strings", field="meta", index=index)
        if self.format == "json":
            _check_json(meta, "meta", check_untyped, index)
        try:
            encoded = self._encode(meta)
        except (TypeError, ValueError, OverflowError, BufferError, AttributeError) as exc:
            raise ValidationError(f"cannot be encoded: {exc}", field="meta", index=index) from exc
        except RecursionError:
            raise ValidationError(
                "is nested too deeply to encode", field="meta", index=index
            ) from None
        if len(encoded) > MAX_META_BYTES:
            raise ValidationError(
                f"encodes to {len(encoded)} bytes, the limit is {MAX_META_BYTES}",
                field="meta",
                index=index,
            )
        if self.format == "json" and b"\n" in encoded:
            raise _line_break("meta", index)
        if not plain_value(meta):  # a UUID, an enum, a datetime...: does it read back?
            _check_depth(meta, "meta", index)
            try:
                decoded = self._meta_decoder.decode(encoded)
            except msgspec.MsgspecError as exc:  # an Ext or a Raw value, say
                raise ValidationError(
                    f"could not be read back: {exc}", field="meta", index=index
                ) from None
            _check_reads_back(meta, decoded, "meta", index)
        return encoded

    def payload_types(self) -> PayloadTypes | None:
        """The registered payload classes as one union, for one-pass decoders (or None)."""
        return _registered_union()

    def pack(self, plain: bytes) -> tuple[bytes, int]:
        """Compress a payload for storage; returns (stored bytes, codec id)."""
        return self.compression.pack(plain)

    def unpack(self, rec: Record, location: str = "") -> bytes:
        """The plain payload bytes of a record (decrypted and decompressed)."""
        if rec.codec == 0:
            return rec.data
        if rec.codec & ENCRYPTED:
            plain = self._open(rec, "data", rec.data, location)
            inner = rec.codec & ~ENCRYPTED
            if not inner:
                return plain
            rec = msgspec.structs.replace(rec, data=plain, codec=inner)
        return self.compression.unpack(rec, location)

    def open_payload(self, rec: Record, location: str = "") -> bytes:
        """A sealed record's payload as compressed before sealing (its codec without 16)."""
        return self._open(rec, "data", rec.data, location)

    def seal(
        self, aead: Any, stream: str, seq: int, event_id: str, plain: bytes, meta: bytes
    ) -> tuple[bytes, bytes, int]:
        """(stored payload, stored meta, codec id) of an event sealed with `aead`.

        `aead` is the stream's cipher (`Encryption.sealing_key`); the payload is compressed
        first, as without encryption. Empty meta stays empty.
        """
        encryption = self.encryption
        assert encryption is not None
        packed, inner = self.compression.pack(plain)
        codec = inner | ENCRYPTED
        data = encryption.seal(aead, "data", stream, seq, event_id, codec, packed)
        if meta:
            meta = encryption.seal(aead, "meta", stream, seq, event_id, codec, meta)
        return data, meta, codec

    def check_codec(self, rec: Record, location: str = "") -> None:
        """Raise CorruptionError if a record's codec id is not one eventlog writes."""
        if rec.codec not in CODECS:
            raise CorruptionError(
                f"unknown payload codec {rec.codec!r}",
                stream=rec.stream,
                seq=rec.seq,
                location=location or None,
            )

    def _open(self, rec: Record, part: str, sealed: bytes, location: str) -> bytes:
        """The plain bytes of a sealed payload or meta (MissingKeyError without a key store)."""
        self.check_codec(rec, location)
        encryption = self.encryption
        if encryption is None:
            raise no_key_store(rec, location)
        return encryption.open(rec, part, sealed, location)

    def _opened(self, rec: Record, location: str) -> tuple[Record, dict[str, Any]]:
        """A sealed record with its payload opened (its compression left), and its meta map.

        Both are opened with one look-up of the stream's key.
        """
        self.check_codec(rec, location)
        encryption = self.encryption
        if encryption is None:
            raise no_key_store(rec, location)
        aead = encryption.opening_key(rec, location)
        data = encryption.open(rec, "data", rec.data, location, aead)
        meta = (
            self._meta(rec, encryption.open(rec, "meta", rec.meta, location, aead), location)
            if rec.meta
            else {}
        )
        return msgspec.structs.replace(rec, data=data, codec=rec.codec & ~ENCRYPTED), meta

    def hashed_payload(self, rec: Record, location: str = "") -> bytes:
        """The payload bytes a record's hash covers: plain, or as stored when encrypted."""
        if rec.codec & ENCRYPTED:
            return rec.data
        return self.unpack(rec, location) if rec.codec else rec.data

    def plain_meta(self, rec: Record, location: str = "") -> bytes:
        """A record's encoded meta map, decrypted if it is sealed."""
        if rec.meta and rec.codec & ENCRYPTED:
            return self._open(rec, "meta", rec.meta, location)
        return rec.meta

    # -- decoding --------------------------------------------------------------------------

    def _decoder(self, rec: Record, location: str) -> tuple[int, Callable[[bytes], Any]]:
        cls = event_type(rec.type)
        if cls is None:
            raise CorruptionError(
                f"unknown event type {rec.type!r} (register its class before reading; on the "
                "command line, import the module that does: eventlog --import MODULE)",
                stream=rec.stream,
                seq=rec.seq,
                location=location or None,
            )
        return self._decoder_for(rec.type, cls)

    def _decoder_for(self, tag: str, cls: type[EventData]) -> tuple[int, Callable[[bytes], Any]]:
        """(current schema version, typed decoder) of a registered class, cached by tag."""
        dec = (
            msgspec.msgpack.Decoder(cls).decode
            if self.format == "msgpack"
            else msgspec.json.Decoder(cls).decode
        )
        entry = (cls.__schema_version__, dec)
        self._decoders[tag] = entry
        return entry

    def decode_data(self, rec: Record, location: str = "") -> EventData:
        """Decode (and upcast) a record's payload; raise CorruptionError saying where."""
        plain = self.unpack(rec, location) if rec.codec else rec.data
        entry = self._decoders.get(rec.type)
        if entry is None:
            entry = self._decoder(rec, location)
        try:
            if rec.version == entry[0]:
                result: EventData = entry[1](plain)
                return result
            if rec.version > entry[0]:
                raise SchemaVersionError(
                    f"event type {rec.type!r} has schema version {rec.version}, newer than "
                    f"this eventlog's {entry[0]}",
                    stream=rec.stream,
                    seq=rec.seq,
                    location=location or None,
                )
            cls = event_type(rec.type)
            assert cls is not None
            return self._upcast(rec, cls, plain, entry[0], location)
        except DECODE_ERRORS as exc:
            raise CorruptionError(
                f"payload of type {rec.type!r} does not decode: {exc}",
                stream=rec.stream,
                seq=rec.seq,
                location=location or None,
            ) from exc
        except TypeError:
            if isinstance(plain, (bytes, bytearray, memoryview)):
                raise  # not the stored value's fault (an upcaster's, say)
            # A file edited by another tool can hold text or a number where bytes belong.
            raise CorruptionError(
                f"payload of type {rec.type!r} is stored as {type(plain).__name__}, not bytes",
                stream=rec.stream,
                seq=rec.seq,
                location=location or None,
            ) from None

    def _upcast(
        self, rec: Record, cls: type[EventData], plain: bytes, current: int, location: str = ""
    ) -> EventData:
        """The payload of an older schema version, brought to `current` by its upcasters.

        What cannot be upcast (a stored value that is not an object, an upcaster that fails on
        it or returns something else) is a CorruptionError naming the record, so `verify`
        reports it as the stream's problem.
        """

        def corrupt(message: str) -> CorruptionError:
            return CorruptionError(
                message, stream=rec.stream, seq=rec.seq, location=location or None
            )

        value = self._untyped(plain)
        for version in range(rec.version, current):
            if not isinstance(value, dict):
                raise corrupt(
                    f"payload of type {rec.type!r} at version {version} is a "
                    f"{type(value).__name__}, not an object"
                )
            fn = upcaster(rec.type, version)
            if fn is None:
                raise corrupt(f"no upcaster registered for {rec.type!r} from version {version}")
            try:
                value = fn(value)
            except Exception as exc:
                raise corrupt(
                    f"the upcaster of {rec.type!r} from version {version} failed on this "
                    f"record: {type(exc).__name__}: {exc}"
                ) from exc
        if not isinstance(value, dict):
            raise corrupt(
                f"the upcasters of {rec.type!r} made a {type(value).__name__}, not an object"
            )
        value["type"] = rec.type
        try:
            result: EventData = msgspec.convert(value, cls, strict=self.format == "msgpack")
        except msgspec.ValidationError as exc:  # the stored payload was fine; what it became not
            raise corrupt(
                f"the upcasters of {rec.type!r} from version {rec.version} made a value that "
                f"does not match {cls.__name__} at version {current}: {exc}"
            ) from exc
        return result

    def meta_map(self, meta: bytes) -> dict[str, Any]:
        """Decode an encoded (plain) meta map this codec made."""
        result: dict[str, Any] = self._meta_decoder.decode(meta)
        return result

    def decode_meta(self, rec: Record, location: str = "") -> dict[str, Any]:
        """Decode a record's meta map (decrypted if it is sealed)."""
        if not rec.meta:
            return {}
        raw = self._open(rec, "meta", rec.meta, location) if rec.codec & ENCRYPTED else rec.meta
        return self._meta(rec, raw, location)

    def _meta(self, rec: Record, raw: bytes, location: str) -> dict[str, Any]:
        """A record's meta map decoded from its plain bytes."""
        try:
            meta: dict[str, Any] = self._meta_decoder.decode(raw)
        except DECODE_ERRORS as exc:
            raise CorruptionError(
                f"meta does not decode: {exc}",
                stream=rec.stream,
                seq=rec.seq,
                location=location or None,
            ) from exc
        return meta

    def to_event(self, rec: Record, location: str = "") -> RecordedEvent:
        """Decode a record to the event users see."""
        if rec.codec & ENCRYPTED:
            rec, meta = self._opened(rec, location)
        else:
            meta = self.decode_meta(rec, location) if rec.meta else {}
        return RecordedEvent(
            id=rec.id,
            stream=rec.stream,
            seq=rec.seq,
            position=rec.position,
            ts=rec.ts,
            data=self.decode_data(rec, location),
            meta=meta,
            causation_id=rec.causation_id,
            correlation_id=rec.correlation_id,
            hash=rec.hash.hex(),
        )

    def records_to_events(
        self, records: Sequence[Record], location: str = ""
    ) -> list[RecordedEvent]:
        """`to_event` for each record, with plain current-version payloads decoded inline.

        Compressed, upcast, meta-carrying or undecodable records go through `to_event` and its
        checks and messages.
        """
        out: list[RecordedEvent] = []
        append = out.append
        decoders = self._decoders
        for rec in records:
            entry = decoders.get(rec.type)
            if entry is not None and not rec.codec and not rec.meta and rec.version == entry[0]:
                try:
                    value = entry[1](rec.data)
                except STORED_VALUE_ERRORS:
                    pass  # to_event below raises the CorruptionError that says where
                else:
                    append(
                        RecordedEvent(
                            id=rec.id,
                            stream=rec.stream,
                            seq=rec.seq,
                            position=rec.position,
                            ts=rec.ts,
                            data=value,
                            meta={},
                            causation_id=rec.causation_id,
                            correlation_id=rec.correlation_id,
                            hash=rec.hash.hex(),
                        )
                    )
                    continue
            append(self.to_event(rec, location))
        return out

    def to_events(
        self,
        rows: Sequence[PackedRow] | Sequence[StreamRow],
        location: str = "",
        stream: str | None = None,
    ) -> list[RecordedEvent]:
        """Decode packed rows to events: record and payload in one msgspec call each.

        With `stream`, the rows are `StreamRow`s of that stream (a reader that knows the stream
        need not fetch its name for every row). Plain payloads of the current schema version take
        the one-pass path; compressed, upcast, meta-carrying or undecodable ones go through
        `to_event` and its checks and messages.
        """
        types = self.payload_types()
        decode = typed_decoder(types.union).decode if types is not None else None
        current = types.current if types is not None else {}
        out: list[RecordedEvent] = []
        append = out.append
        to_event = self.to_event
        for row in rows:
            if stream is None:
                position, row_stream, packed = row  # type: ignore[misc]
            else:
                position, packed = row  # type: ignore[misc]
                row_stream = stream
            if decode is None:  # no union of the payload classes (see PayloadTypes)
                event = None
            else:
                try:
                    event = exact_event(decode(packed), current, row_stream, position)
                except STORED_VALUE_ERRORS:  # TypeError: stored as non-bytes
                    event = None  # unpack_record below raises the CorruptionError that says where
            if event is None:
                event = to_event(unpack_record(position, row_stream, packed, location), location)
            append(event)
        return out


def _check_json(value: object, field: str, check: Check, index: int) -> None:
    """Raise ValidationError if JSON would store part of `value` as something else.

    A check that trips on a field holding what its type does not allow (Structs do not check
    on construction) leaves it to the decode and comparison on append, which name the path.
    """
    try:
        check(value)
    except NotJSON as exc:
        raise ValidationError(exc.at(""), field=field, index=index) from None
    except (TypeError, AttributeError, IndexError, KeyError):
        pass
    except RecursionError:
        raise ValidationError(
            "is nested too deeply for a JSON store", field=field, index=index
        ) from None


def _check_reads_back(value: object, decoded: object, field: str, index: int) -> None:
    """Raise ValidationError if the store would return `decoded` for `value` (a UUID as text)."""
    try:
        where = differs(value, decoded)
    except RecursionError:
        raise ValidationError(
            "is nested too deeply to check it reads back unchanged", field=field, index=index
        ) from None
    if where is not None:
        raise ValidationError(f"would not read back as appended: {where}", field=field, index=index)


def _check_depth(value: object, field: str, index: int) -> None:
    """Raise ValidationError if values nest in `value` deeper than any reader could decode."""
    if too_deep(value):
        raise ValidationError(
            f"nests more than {MAX_NESTING} levels deep (lists, dicts, records); deeper values "
            "could not be read back by code running deeper in the call stack",
            field=field,
            index=index,
        )


def _line_break(field: str, index: int) -> ValidationError:
    """The error for JSON text holding a raw line break (a `msgspec.Raw` value, say).

    msgspec escapes line breaks inside strings; only JSON given as is can hold one, and in a
    JSONL store it would split the event's line in two.
    """
    return ValidationError(
        "holds JSON text with a line break (a msgspec.Raw value?), which would split its line "
        "in a JSONL store",
        field=field,
        index=index,
    )


def _check_link(value: object, name: str, index: int) -> None:
    if value is not None and (
        type(value) is not str or not 0 < len(value) <= 128 or _surrogate(value)
    ):
        raise ValidationError(
            "must be a str of 1-128 characters (no lone surrogates)", field=name, index=index
        )
