"""Shared helpers for provider ingest and import: SSE parsing, field access, errors, usage."""

from __future__ import annotations

import base64
import binascii
import mimetypes
import re
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, ClassVar, NamedTuple, TypeVar

import msgspec
import orjson

from eventlog.errors import ProviderMappingError, ValidationError
from eventlog.events import ModelOutput

_T = TypeVar("_T")

NEUTRAL_STOP_REASONS = (
    "end_turn",
    "tool_use",
    "max_tokens",
    "stop_sequence",
    "content_filter",
    "refusal",
    "pause_turn",
    "other",
)
"""The provider-neutral values of `ModelOutput.stop_reason`."""


class HistoryImportError(ValidationError, ProviderMappingError):
    """An imported history is malformed at a message index and field; nothing was written."""

    def __init__(self, message: str, *, path: str, index: int | None = None):
        super().__init__(message, field=path)
        self.index = index
        self.path = path


def mapping_error(where: str, message: str) -> ProviderMappingError:
    """A ProviderMappingError prefixed with where it happened."""
    return ProviderMappingError(f"{where}: {message}")


def as_dict(obj: Any, where: str) -> dict[str, Any]:
    """A plain dict from a dict or an SDK (pydantic) object; anything else is a mapping error."""
    if isinstance(obj, dict):
        return obj
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        value = dump(mode="python", warnings=False)
        if isinstance(value, dict):
            return value
    raise mapping_error(where, f"expected a JSON object or an SDK object, got {type(obj).__name__}")


def get(d: dict[str, Any], key: str, kind: type[_T], where: str, default: Any = ...) -> _T:
    """`d[key]` checked to be a `kind`; a missing or None value gives `default` when one is set."""
    value = d.get(key)
    if value is None:
        if default is not ...:
            return default  # type: ignore[no-any-return]
        raise mapping_error(f"{where}.{key}", "missing")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return value  # type: ignore[return-value]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise mapping_error(
            f"{where}.{key}", f"expected {kind.__name__}, got {type(value).__name__}"
        )
    return value


def first_of(d: dict[str, Any], *keys: str) -> Any:
    """The first non-None value among `keys` (camelCase and snake_case spellings)."""
    for key in keys:
        value = d.get(key)
        if value is not None:
            return value
    return None


FILE_SCHEMES = {"openai": "openai-file:", "anthropic": "anthropic-file:"}
"""URI prefixes standing for files uploaded to a provider (parts given by file id)."""


def file_uri(provider: str, file_id: str) -> str:
    """The URI an attachment holds for `provider`'s uploaded file `file_id`."""
    return FILE_SCHEMES[provider] + file_id


def dumps(value: Any) -> str:
    """Compact JSON text (key order kept), as raw arguments of object-valued tool inputs."""
    return json_bytes(value).decode()


def json_bytes(value: Any) -> bytes:
    """Compact JSON (key order kept); integers of any size as the digits they are.

    orjson refuses integers past 64 bits, which a provider may send in tool arguments; for a
    value holding one, msgspec writes it instead (its floats spelled `1e16` where orjson writes
    `1e+16`: the same numbers). Anything else orjson refuses is still refused.
    """
    try:
        return orjson.dumps(value)
    except TypeError as exc:
        if "64-bit" not in str(exc):
            raise
        return msgspec.json.encode(value)


def non_negative(value: Any) -> int:
    """An int token count, 0 for None or anything that is not an int."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


# ---------------------------------------------------------------------------------------------
# Server-sent events


class SSEEvent(NamedTuple):
    """One dispatched server-sent event."""

    event: str
    data: str
    line: int
    """1-based line where the event's first field appeared."""


_LINE_BREAK = re.compile(r"\r\n|\r|\n")
"""SSE line ends only; str.splitlines would also split on U+2028 inside JSON strings."""


def parse_sse(text: str) -> list[SSEEvent]:
    """Split SSE text into events (data lines joined by newlines, comments skipped)."""
    events: list[SSEEvent] = []
    event, start = "", 0
    data: list[str] = []
    for number, raw in enumerate(_LINE_BREAK.split(text), start=1):
        if not raw:
            if data:
                events.append(SSEEvent(event or "message", "\n".join(data), start))
            event, data, start = "", [], 0
            continue
        if raw.startswith(":"):
            continue
        name, sep, value = raw.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        start = start or number
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
    if data:
        # A last event without its blank line: keep it; a cut-off JSON payload fails to decode.
        events.append(SSEEvent(event or "message", "\n".join(data), start))
    return events


_decode_json = msgspec.json.Decoder().decode


def decode_json(text: str | bytes, where: str) -> Any:
    """Decode JSON text, naming where it came from when it is not JSON."""
    try:
        return _decode_json(text)  # integers of any size kept (orjson makes floats of them)
    except msgspec.DecodeError as exc:
        raise mapping_error(where, f"not valid JSON ({exc})") from None
    except RecursionError:
        raise mapping_error(where, "JSON nested too deeply") from None


def looks_like_sse(text: str) -> bool:
    """Whether a document is an SSE stream rather than a JSON body."""
    head = text.lstrip()
    return not head.startswith(("{", "["))


class Accumulator(ABC):
    """Folds one provider's stream events into one ModelOutput: `.feed(chunk)`, `.result()`."""

    label: ClassVar[str] = ""
    """The provider format name used in error messages, e.g. `openai-chat`."""

    def __init__(self) -> None:
        self.count = 0
        """How many events were fed."""
        self.body = False
        """Fed one whole response body rather than stream events (Gemini: the same shape)."""
        self._where = f"{self.label} stream"

    def feed(self, chunk: Any) -> None:
        """Fold one stream event: a dict, an SDK event object, or JSON text."""
        self.count += 1
        self._where = (
            f"{self.label} response" if self.body else f"{self.label} stream event #{self.count}"
        )
        if isinstance(chunk, str | bytes):
            chunk = decode_json(chunk, self._where)
        self._feed(as_dict(chunk, self._where), self._where)

    def feed_all(self, chunks: Iterable[Any]) -> None:
        """Fold every event of an iterable (e.g. an SDK stream)."""
        for chunk in chunks:
            self.feed(chunk)

    def feed_sse(self, text: str) -> None:
        """Fold a whole SSE text."""
        for sse in parse_sse(text):
            if sse.data.strip() == "[DONE]":
                self._done_marker()
                continue
            where = f"{self.label} SSE event at line {sse.line}"
            self.feed(decode_json(sse.data, where))

    def _done_marker(self) -> None:  # noqa: B027 - optional hook, most providers send none
        """React to a `data: [DONE]` line (only OpenAI Chat sends one)."""

    @abstractmethod
    def _feed(self, chunk: dict[str, Any], where: str) -> None:
        """Fold one decoded event."""

    @abstractmethod
    def result(self) -> ModelOutput:
        """The finished output; a mapping error when the stream is incomplete."""


# ---------------------------------------------------------------------------------------------
# Attachments


def parse_data_url(url: str, where: str) -> tuple[str, bytes] | None:
    """(media type, bytes) of a base64 `data:` URL, or None for any other URL."""
    if not url.startswith("data:"):
        return None
    header, sep, payload = url[5:].partition(",")
    if not sep:
        raise mapping_error(where, "data URL has no ',' before its payload")
    media_type, _, params = header.partition(";")
    media_type = media_type.strip().lower()
    if "base64" not in (p.strip().lower() for p in params.split(";")):
        return media_type or "text/plain", urllib.parse.unquote_to_bytes(payload)
    return media_type or "application/octet-stream", b64decode(payload, where)


def b64decode(text: str, where: str) -> bytes:
    """Strict base64 decoding with a located error."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise mapping_error(where, f"invalid base64 data ({exc})") from None


def guess_media_type(url: str, fallback: str) -> str:
    """The media type suggested by a URL's file extension, else `fallback`."""
    guessed, _ = mimetypes.guess_type(url.split("?", 1)[0])
    return guessed or fallback


__all__ = [
    "NEUTRAL_STOP_REASONS",
    "Accumulator",
    "HistoryImportError",
    "SSEEvent",
    "as_dict",
    "b64decode",
    "decode_json",
    "file_uri",
    "json_bytes",
    "dumps",
    "first_of",
    "get",
    "guess_media_type",
    "looks_like_sse",
    "mapping_error",
    "non_negative",
    "parse_data_url",
    "parse_sse",
]
