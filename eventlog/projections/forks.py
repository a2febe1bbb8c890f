"""Forks at the API level: fork a conversation at a seq or at a checkpoint label.

A fork is a new stream that reads its parent's events up to the fork point, then its own
(`Store.fork`, no copy). `Store.forks(stream)` lists a stream's direct forks and
`Store.ancestry(stream)` its ancestors with their fork seqs.
"""

from __future__ import annotations

from eventlog.backends.base import StreamInfo
from eventlog.errors import UsageError, ValidationError
from eventlog.events import Checkpoint
from eventlog.store import Store, require_store


def checkpoint_seq(store: Store, stream: str, label: str) -> int:
    """The seq of the last `Checkpoint` with this label in a stream (read newest first)."""
    require_store(store, "checkpoint_seq")
    for event in store.read(stream, backwards=True):
        data = event.data
        if isinstance(data, Checkpoint) and data.label == label:
            return event.seq
    raise ValidationError(f"stream {stream!r} has no checkpoint {label!r}", field="checkpoint")


def fork(
    store: Store,
    source: str,
    new: str,
    *,
    at: int | None = None,
    checkpoint: str | None = None,
) -> StreamInfo:
    """Create `new` from `source`'s first `at` events, or up to its last checkpoint `label`.

    With neither, the fork starts from the whole of `source`. The checkpoint event itself is
    part of the fork.
    """
    require_store(store, "fork")
    if at is not None and checkpoint is not None:
        raise UsageError("fork at a seq or at a checkpoint, not both")
    if checkpoint is not None:
        at = checkpoint_seq(store, source, checkpoint)
    try:
        return store.fork(source, new, at)
    except ValidationError as exc:
        if exc.field != "at_seq":
            raise
        raise ValidationError(exc.detail, field="at") from None  # the name the caller used


__all__ = ["checkpoint_seq", "fork"]
