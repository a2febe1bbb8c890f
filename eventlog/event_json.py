"""Events as JSON objects: what `eventlog log --json` prints and `eventlog append` reads.

`event_to_json` gives a stored event's stable JSON object (its envelope, its payload under
`data` with the `type` tag); `event_from_json` reads such an object back into an `Event` to
append, strictly: unknown keys and values of the wrong type are refused, never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from eventlog.errors import ValidationError
from eventlog.events import Event, EventData, RecordedEvent, event_type


def event_to_json(event: RecordedEvent) -> dict[str, Any]:
    """An event as a stable JSON object: its envelope, and its payload under `data`.

    What `eventlog log --json` prints, one per line; `event_from_json` reads it back.
    """
    return {
        "stream": event.stream,
        "seq": event.seq,
        "id": event.id,
        "position": event.position,
        "ts": event.ts,
        "type": event.type,
        "data": msgspec.to_builtins(event.data),
        "meta": msgspec.to_builtins(event.meta),  # bytes as base64 text, as in `data`
        "causation_id": event.causation_id,
        "correlation_id": event.correlation_id,
        "hash": event.hash,
    }


_ENVELOPE = ("id", "meta", "causation_id", "correlation_id")
"""Keys of an event line besides `type` and `data`: what the append keeps."""
_ASSIGNED = ("stream", "seq", "position", "ts", "hash")
"""Keys `log --json` prints that the store assigns on append: accepted and not used."""


def event_from_json(line: str | bytes | Mapping[str, Any], where: str = "event") -> Event:
    """An event to append from its JSON object (text, or already parsed), checked strictly.

    The object has `type` and `data`, and optionally `id`, `meta`, `causation_id` and
    `correlation_id`; the keys the store assigns (`stream`, `seq`, `position`, `ts`, `hash`)
    are accepted and not used, so `event_to_json` output reads back (its bytes are base64 text,
    which a bytes field takes). Unknown keys and values of the wrong type are a
    ValidationError starting with `where`.
    """
    if isinstance(line, Mapping):
        doc: Any = dict(line)
    else:
        try:
            doc = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            raise ValidationError(f"{where}: not JSON: {exc}") from None
    if not isinstance(doc, dict) or "type" not in doc:
        raise ValidationError(f'{where}: needs an object with a "type" and a "data"')
    unknown = sorted(set(doc) - {"type", "data", *_ENVELOPE, *_ASSIGNED})
    if unknown:
        raise ValidationError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))} (an event line has type, "
            f"data, {', '.join(_ENVELOPE)}; {', '.join(_ASSIGNED)} from log --json are ignored)"
        )
    cls = event_type(str(doc["type"]))
    if cls is None:
        raise ValidationError(f"{where}: unknown event type {doc['type']!r}")
    data = doc.get("data", {})
    if not isinstance(data, dict):
        kind = "null" if data is None else type(data).__name__
        raise ValidationError(f'{where}: "data" must be a JSON object, got {kind}')
    if "type" in data and data["type"] != doc["type"]:
        raise ValidationError(
            f'{where}: "data" says type {data["type"]!r} but the line says {doc["type"]!r}'
        )
    extra_fields = sorted(set(data) - {"type", *cls.__struct_encode_fields__})
    if extra_fields:
        raise ValidationError(
            f"{where}: {doc['type']!r} has no field(s) {', '.join(map(repr, extra_fields))}"
        )
    try:
        payload: EventData = msgspec.convert({**data, "type": doc["type"]}, cls)
        envelope = msgspec.convert({k: doc[k] for k in _ENVELOPE if k in doc}, _Envelope)
    except (msgspec.ValidationError, ValueError) as exc:
        raise ValidationError(f"{where}: {exc}") from None
    # Nested objects (results, sections, calls, ...) ignore keys they do not know: compare.
    nested = _unknown_key(data, msgspec.to_builtins(payload, str_keys=True), "$")
    if nested is not None:
        raise ValidationError(f"{where}: {doc['type']!r} has no field {nested}")
    given = {f: getattr(envelope, f) for f in _ENVELOPE}
    return Event(data=payload, **{k: v for k, v in given.items() if v is not msgspec.UNSET})


def _unknown_key(given: Any, kept: Any, path: str) -> str | None:
    """The path of the first key of `given` that its decoded form `kept` does not have."""
    if isinstance(given, dict) and isinstance(kept, dict):
        for key, value in given.items():
            if key not in kept:
                return f"{path}.{key}"
            found = _unknown_key(value, kept[key], f"{path}.{key}")
            if found is not None:
                return found
    elif isinstance(given, list) and isinstance(kept, (list, tuple)) and len(given) == len(kept):
        for i, (value, back) in enumerate(zip(given, kept, strict=True)):
            found = _unknown_key(value, back, f"{path}[{i}]")
            if found is not None:
                return found
    return None


class _Envelope(msgspec.Struct, frozen=True):
    """The envelope keys of an event line, type-checked (UNSET: not given)."""

    id: str | msgspec.UnsetType = msgspec.UNSET
    meta: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET
    causation_id: str | None | msgspec.UnsetType = msgspec.UNSET
    correlation_id: str | None | msgspec.UnsetType = msgspec.UNSET


__all__ = ["event_from_json", "event_to_json"]
