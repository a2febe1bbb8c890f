"""The projection protocol: a name, a version, an initial state and a pure fold of one event.

A projection turns a stream into a state. The runner (`eventlog.projections.runner`) computes it
from scratch, from the latest usable snapshot plus the tail, or incrementally as events arrive;
snapshots are tagged with the projection's `name` and `version`, so bumping `version` whenever
the state's meaning or encoding changes makes older snapshots invisible (they are rebuilt).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import msgspec

from eventlog.events import EventData, RecordedEvent

S = TypeVar("S")


class EventSource(Protocol):
    """Where a state restored from a snapshot loads event bodies it did not keep (by seq)."""

    def data(self, seq: int) -> EventData:
        """The payload of the event at `seq` of the state's stream."""
        ...


class Projection(ABC, Generic[S]):
    """A fold of a stream's events into a state of type S.

    Subclasses set `name` and `version`, implement `initial` and `fold`, and either set
    `state_type` (a msgspec-encodable type: the default `encode`/`decode` use MessagePack) or
    override `encode`/`decode`. `fold` must be pure: it returns a new state and never changes the
    one it was given, so any state can be kept, compared and folded further.
    """

    name: ClassVar[str]
    """Identifies the projection in snapshot keys."""
    version: ClassVar[int] = 1
    """Bump when the state's meaning or encoding changes: older snapshots are then ignored."""
    state_type: ClassVar[Any] = None
    """The state's type for the default msgspec snapshot encoding."""

    @abstractmethod
    def initial(self) -> S:
        """The state before any event (seq 0)."""

    @abstractmethod
    def fold(self, state: S, event: RecordedEvent) -> S:
        """The state after one more event (pure: `state` is not changed)."""

    def fold_many(
        self, state: S, events: Iterable[RecordedEvent], source: EventSource | None = None
    ) -> S:
        """The state after these events, in order (override to fold faster in bulk).

        `source` can reload events of the same stream by seq: a projection may drop event
        bodies it keeps and load them again when read, to bound its memory.
        """
        for event in events:
            state = self.fold(state, event)
        return state

    def encode(self, state: S) -> bytes:
        """Snapshot bytes of a state."""
        return msgspec.msgpack.encode(state)

    def decode(self, data: bytes, source: EventSource) -> S:
        """A state from snapshot bytes; raise on anything that does not decode."""
        if self.state_type is None:
            raise NotImplementedError(f"{type(self).__name__} must set state_type or decode")
        state: S = msgspec.msgpack.decode(data, type=self.state_type)
        return state

    def check_restored(self, state: S, stream: str) -> None:
        """Called on a state restored from a snapshot; raise if this projection rejects it."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, version={self.version})"


__all__ = ["EventSource", "Projection", "S"]
