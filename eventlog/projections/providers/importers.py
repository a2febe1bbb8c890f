"""Import an existing provider history into a stream: validate all of it, then one append."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eventlog.errors import UsageError
from eventlog.events import Event, EventData, RecordedEvent
from eventlog.projections.providers.import_anthropic import events_from_anthropic
from eventlog.projections.providers.import_openai_chat import events_from_chat
from eventlog.projections.providers.import_openai_responses import events_from_responses
from eventlog.store import ANY, ExpectedSeq, Store

_FORMATS: dict[str, Callable[[Any], list[EventData]]] = {
    "openai-chat": events_from_chat,
    "anthropic": events_from_anthropic,
    "openai-responses": events_from_responses,
}
FORMATS = tuple(_FORMATS)
"""History formats accepted by `history_events`, `import_history` and the CLI."""


def history_events(fmt: str, body: Any) -> list[EventData]:
    """The events a provider history becomes; a located error when any part is invalid."""
    try:
        build = _FORMATS[fmt]
    except KeyError:
        raise UsageError(
            f"unknown history format {fmt!r}; use one of {', '.join(FORMATS)}"
        ) from None
    return build(body)


def import_history(
    store: Store,
    stream: str,
    fmt: str,
    body: Any,
    *,
    expected_seq: ExpectedSeq = ANY,
    meta: dict[str, Any] | None = None,
) -> list[RecordedEvent]:
    """Append a whole provider history to `stream` atomically; nothing is written on error."""
    tags = {"source": f"import:{fmt}", **(meta or {})}
    events = [Event(data=data, meta=dict(tags)) for data in history_events(fmt, body)]
    if not events:
        return []
    return store.append(stream, events, expected_seq=expected_seq)


__all__ = ["FORMATS", "history_events", "import_history"]
