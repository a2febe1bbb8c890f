"""The error tree: one root, caller mistakes apart from runtime failures.

Every message names what it is about: the stream, the seq, the field, the file and offset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from eventlog.projections.overflow import ContextOverflow


def _where(location: str | None, stream: str | None, seq: int | None) -> str:
    """`location, stream 'x', seq N: ` for the parts given ('' when none is)."""
    where = [] if location is None else [location]
    if stream is not None:
        where.append(f"stream {stream!r}")
    if seq is not None:
        where.append(f"seq {seq}")
    return f"{', '.join(where)}: " if where else ""


class EventlogError(Exception):
    """Root of every error eventlog raises."""


class UsageError(EventlogError):
    """The caller asked for something that cannot work (bad URL, bad option)."""


class ValidationError(EventlogError, ValueError):
    """An event, a batch or an argument breaks the rules; nothing was written."""

    def __init__(self, message: str, *, field: str | None = None, index: int | None = None):
        self.field = field
        self.index = index
        self.detail = message
        """The message without the event and field it names."""
        where = []
        if index is not None:
            where.append(f"event #{index}")
        if field is not None:
            where.append(f"field {field!r}")
        prefix = f"{', '.join(where)}: " if where else ""
        super().__init__(f"{prefix}{message}")


class ConcurrencyError(EventlogError):
    """The stream's last seq was not the one the append expected; nothing was written."""

    def __init__(self, stream: str, expected: int | Literal["any", "no_stream"], actual: int):
        self.stream = stream
        self.expected = expected
        """The seq the append expected (an int, or "no_stream"; "any" never conflicts)."""
        self.actual = actual
        super().__init__(
            f"stream {stream!r}: expected seq {expected}, but the stream is at seq {actual}"
        )


class DuplicateEventError(EventlogError):
    """An event id is already stored with other content or at another place."""

    def __init__(self, message: str, *, event_id: str, stream: str | None = None):
        self.event_id = event_id
        self.stream = stream
        super().__init__(message)


class StreamNotFoundError(EventlogError, LookupError):
    """The stream does not exist."""

    def __init__(self, stream: str):
        self.stream = stream
        super().__init__(f"stream {stream!r} does not exist")


class StreamExistsError(EventlogError):
    """A stream that must be new (a fork target) already exists."""

    def __init__(self, stream: str):
        self.stream = stream
        super().__init__(f"stream {stream!r} already exists")


class CorruptionError(EventlogError):
    """Stored data cannot be decoded or fails its hash check; says where."""

    def __init__(
        self,
        message: str,
        *,
        stream: str | None = None,
        seq: int | None = None,
        location: str | None = None,
    ):
        self.message = message
        """What is wrong, without the place (which `stream`, `seq` and `location` give)."""
        self.stream = stream
        self.seq = seq
        self.location = location
        prefix = _where(location, stream, seq)
        super().__init__(f"{prefix}{message}")


class SchemaVersionError(CorruptionError):
    """The store was written by a newer eventlog (or is not an eventlog store)."""


class ErasedError(EventlogError):
    """A stream was erased: its encryption key was deleted, so its events cannot be read.

    Raised by reads (`read`, `get`, `read_all`, subscriptions, projections) when they reach an
    encrypted event of an erased stream, and by `append` to an erased stream. `position` is the
    store position of the event reached, when a read raised it: a reader of the whole store
    goes on past it with `read_all(after=position)` (or `subscribe(after=position)`).
    """

    def __init__(
        self,
        stream: str,
        *,
        seq: int | None = None,
        position: int | None = None,
        location: str | None = None,
        message: str | None = None,
    ):
        self.stream = stream
        self.seq = seq
        self.position = position or None
        self.location = location
        text = message or (
            "the stream was erased: its encryption key was deleted, so its events cannot be read"
        )
        super().__init__(f"{_where(location or None, stream, seq)}{text}")


class MissingKeyError(EventlogError):
    """An encrypted event cannot be read or written: no key store, or its key is not in it.

    Not damage (a `CorruptionError`): the store is opened without its key store (`keys=DIR`
    or `key_store=`), or with another one than the events were written with.
    """

    def __init__(
        self,
        message: str,
        *,
        stream: str | None = None,
        seq: int | None = None,
        location: str | None = None,
    ):
        self.stream = stream
        self.seq = seq
        self.location = location
        super().__init__(f"{_where(location or None, stream, seq)}{message}")


class BackendUnavailableError(EventlogError):
    """The backend's engine, server or driver cannot be reached or imported."""


class StoreClosedError(EventlogError):
    """The store was closed."""


class ConversationError(EventlogError):
    """A stream's events break the conversation's rules (e.g. a result for a call never made)."""

    def __init__(self, message: str, *, stream: str | None = None, seq: int | None = None):
        self.stream = stream
        self.seq = seq
        where = []
        if stream is not None:
            where.append(f"stream {stream!r}")
        if seq is not None:
            where.append(f"seq {seq}")
        prefix = f"{', '.join(where)}: " if where else ""
        super().__init__(f"{prefix}{message}")


class ProviderMappingError(EventlogError):
    """A history cannot be rendered for, or imported from, a provider's format."""


class WindowTooSmallError(EventlogError):
    """The context window's budget cannot hold what must always be kept (says by how much)."""

    def __init__(self, message: str, *, needed: int, budget: int):
        self.needed = needed
        self.budget = budget
        self.shortfall = needed - budget
        """Tokens missing: `needed - budget`."""
        super().__init__(message)


class ContextOverflowError(EventlogError):
    """A provider kept answering that the request is too long, after compacting and retrying."""

    def __init__(self, message: str, *, overflow: ContextOverflow, attempts: int):
        self.overflow = overflow
        """The last `ContextOverflow` the provider reported (its words and counts)."""
        self.attempts = attempts
        super().__init__(message)


__all__ = [
    "BackendUnavailableError",
    "ConcurrencyError",
    "ConversationError",
    "CorruptionError",
    "DuplicateEventError",
    "ErasedError",
    "EventlogError",
    "MissingKeyError",
    "ProviderMappingError",
    "SchemaVersionError",
    "StoreClosedError",
    "StreamExistsError",
    "StreamNotFoundError",
    "UsageError",
    "ValidationError",
    "WindowTooSmallError",
]
