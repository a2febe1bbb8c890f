"""Copy every event of one store into a new, empty store: across backends, formats and settings.

What it is for: moving conversations to another backend (SQLite to LMDB, anything to JSONL for
an auditor), or changing what is fixed when a store is created (SQLite's full-text index,
compression of old events). Ids, streams, seqs, times, meta, links and forks are kept, and the
events keep their order by position. Projection snapshots are not copied (they are rebuilt on
demand), nor compression dictionaries (the target packs payloads with its own settings).

Hashes. Between stores of one payload format (MessagePack: SQLite, LMDB, memory; JSON: JSONL) the
payload bytes are copied as they are, so every hash is the same as the source's, and the copy
checks that it is. Between formats each payload is decoded (upcast to its current schema version
if it is older) and encoded in the target's format; the hash covers the stored bytes, so the
copy has a hash chain of its own.

Nothing is written unless all of it can be: the source is verified first, every event is checked
against the target's size limit (and, between formats, encoded once) before any is written (a
value the target cannot hold is a `ValidationError` naming the event), and the target must be
empty. The copy holds the events committed when it started (up to the head position read then),
and the forks whose prefix those events hold: events appended while it runs are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Literal

import msgspec

from eventlog.backends.base import ForkInfo, Record
from eventlog.codec import Encoded, chain_hash
from eventlog.errors import CorruptionError, UsageError, ValidationError
from eventlog.events import Event
from eventlog.store import PAGE, Store
from eventlog.text import event_text

Phase = Literal["verify", "check", "copy"]
Progress = Callable[[Phase, int, int], None]
"""Called as (phase, events done, events in all) after each page."""

RUN = 1000
"""At most this many consecutive events of one stream go into one append of the target."""


class CopyReport(msgspec.Struct, frozen=True):
    """What `copy_store` copied."""

    streams: int
    forks: int
    events: int
    same_hashes: bool
    """True when source and target share a payload format: every hash is the source's."""
    upcast: int
    """Events stored at a newer schema version than the source's (copies between formats)."""


def copy_store(
    source: Store,
    target: Store | Callable[[], Store],
    *,
    progress: Progress | None = None,
    rehearse: Store | None = None,
) -> CopyReport:
    """Copy every event and fork of `source` into the empty store `target`; see the module.

    `target` may be a function that opens it: it is called once the source has verified, so a
    source that does not verify leaves no new store behind. With `rehearse`, an empty store of
    the target's format and limits (`eventlog.connect.rehearsal(url)`), the checks run on it
    before that call too, so a copy the target would refuse leaves no new store either.
    """
    if isinstance(target, Store):
        _check_target(source, target)
    head = source.head_position()  # the copy is the store up to here
    total = _verify(source, head, progress)
    forks = _forks_within(source, head)
    checked_on: Store | None = None  # a stand-in the checks already passed on
    if not isinstance(target, Store):
        if rehearse is not None:
            same = source.codec.format == rehearse.codec.format
            _check(source, rehearse, head, forks, same, total, progress)
            checked_on = rehearse
        target = target()
        _check_target(source, target)
    same = source.codec.format == target.codec.format
    if checked_on is None or not _same_codec(checked_on, target):
        _check(source, target, head, forks, same, total, progress)
    for fork in sorted(forks.values(), key=lambda f: (f.ts, f.stream)):
        target.backend.create_fork(fork)
    copied, upcast, streams = _copy_events(source, target, head, same, total, progress)
    if copied != total:  # `_check` counted the same records: only a bug gets here
        raise CorruptionError(
            f"copied {copied} events, but verified {total}", location=source.location
        )
    return CopyReport(len(streams | set(forks)), len(forks), copied, same, upcast)


def _same_codec(a: Store, b: Store) -> bool:
    """Whether `_check` on one says what it would say on the other (format and size limit)."""
    return a.codec.format == b.codec.format and a.codec.max_event_bytes == b.codec.max_event_bytes


def _check_target(source: Store, target: Store) -> None:
    """Raise UsageError unless `target` is another, empty store."""
    if source is target or source.backend is target.backend:
        raise UsageError(f"cannot copy {source.location} into itself")
    # Another handle on the source's own files is not empty (unless the source is): refused.
    if target.head_position() or target.forks():
        raise UsageError(
            f"the target {target.location} is not empty: copy into a new store "
            "(events would otherwise mix with what is there)"
        )


def _verify(source: Store, head: int, progress: Progress | None) -> int:
    """Verify the source up to `head`; return its number of events, or raise CorruptionError.

    Its progress counts towards `head` (positions are dense, so about the number of events).
    """
    tick = None if progress is None else (lambda done: progress("verify", done, head))
    report = source.verify(progress=tick, upto=head)
    if not report.ok:
        first = report.problems[0]
        raise CorruptionError(
            f"the source does not verify ({len(report.problems)} stream(s) with problems, "
            f"first: {first.message}); nothing was copied",
            stream=first.stream,
            seq=first.seq,
            location=source.location,
        )
    return report.events


def _forks_within(source: Store, head: int) -> dict[str, ForkInfo]:
    """The forks whose prefix the events up to `head` hold, by stream.

    A fork made after the copy started is left out when its fork point (or a parent fork's)
    lies past `head`: its prefix is not in the copy. One with events of its own up to `head`
    was made before them, so its prefix was committed earlier still and it is kept.
    """
    every = {f.stream: f for f in source.forks()}
    kept: dict[str, bool] = {}
    for fork in every.values():
        chain = []  # this fork and its unresolved fork ancestors, nearest first (a loop: any depth)
        link: ForkInfo | None = fork
        while link is not None and link.stream not in kept:
            chain.append(link)
            link = every.get(link.parent)
            if len(chain) > len(every):
                raise CorruptionError("fork ancestry loops", stream=fork.stream)
        for link in reversed(chain):  # the oldest ancestor first
            parent_kept = kept.get(link.parent, True)  # a root parent is no fork: kept
            kept[link.stream] = (
                parent_kept and source._record_at(link.parent, link.at_seq).position <= head
            )
    return {name: fork for name, fork in every.items() if kept[name]}


def _check(
    source: Store,
    target: Store,
    head: int,
    forks: dict[str, ForkInfo],
    same: bool,
    total: int,
    progress: Progress | None,
) -> None:
    """Refuse, before anything is written, what the target cannot take or the copy would break.

    Every event must fit the target's size limit (and, between formats, encode in the target's
    format); every stream must start at seq 1, or right after its fork point; and the events up
    to `head` must be the ones verified.
    """
    limit = target.codec.max_event_bytes
    next_seq: dict[str, int] = {}
    checked = 0
    for page in _pages(source, head):
        for rec in page:
            expected = next_seq.get(rec.stream)
            if expected is None:
                fork = forks.get(rec.stream)
                expected = 1 if fork is None else fork.at_seq + 1
            if rec.seq != expected:
                raise CorruptionError(
                    f"expected seq {expected} next: the source changed under the copy; "
                    "nothing was copied",
                    stream=rec.stream,
                    seq=rec.seq,
                    location=source.location,
                )
            next_seq[rec.stream] = expected + 1
            if not same:
                _convert(source, target, rec)
            elif rec.codec or len(rec.data) > limit:
                size = len(source.codec.unpack(rec, source.location))
                if size > limit:
                    raise ValidationError(
                        f"{rec.stream!r} seq {rec.seq} ({rec.id}) encodes to {size} bytes, the "
                        f"limit of {target.location} is {limit}; nothing was copied",
                        field="data",
                    )
        checked += len(page)
        if progress is not None:
            progress("check", checked, total)
    if checked != total:
        raise CorruptionError(
            f"found {checked} events up to position {head}, but verified {total}: the source "
            "changed under the copy; nothing was copied",
            location=source.location,
        )


def _copy_events(
    source: Store, target: Store, head: int, same: bool, total: int, progress: Progress | None
) -> tuple[int, int, set[str]]:
    """Append the source's records up to `head` to the target, in runs of one stream.

    Returns (events copied, events upcast, streams written).
    """
    copied = upcast = 0
    tails: dict[str, bytes] = {}
    for page in _pages(source, head):
        start = 0
        while start < len(page):
            stream = page[start].stream
            end = start + 1
            while end < len(page) and end - start < RUN and page[end].stream == stream:
                end += 1
            prev = tails.get(stream)
            if prev is None:  # the stream's tail in the target: genesis, or a fork's parent
                prev = target._tail(stream, fresh=True)[1]
            records: list[Record] = []
            for rec in page[start:end]:
                new, older = _record(source, target, rec, prev, same)
                prev = new.hash
                records.append(new)
                upcast += older
            target._append_records(stream, records)
            tails[stream] = prev
            start = end
        copied += len(page)
        if progress is not None:
            progress("copy", copied, total)
    return copied, upcast, set(tails)


def _pages(source: Store, head: int) -> Iterator[list[Record]]:
    """The source's own records in position order, up to `head`."""
    after = 0
    while after < head:
        page = [r for r in source.backend.read_all(after, PAGE) if r.position <= head]
        if not page:
            return
        yield page
        after = page[-1].position


def _convert(source: Store, target: Store, rec: Record) -> Encoded:
    """A source record decoded (upcast if older) and encoded in the target's format."""
    location = source.location
    event = Event(
        id=rec.id,
        data=source.codec.decode_data(rec, location),
        meta=source.codec.decode_meta(rec, location),
        causation_id=rec.causation_id,
        correlation_id=rec.correlation_id,
    )
    try:
        return target.codec.encode_event(event)
    except ValidationError as exc:
        raise ValidationError(
            f"{rec.stream!r} seq {rec.seq} ({rec.id}) cannot be stored in {target.location}: "
            f"{exc.detail}; nothing was copied",
            field=exc.field,
        ) from None


def _record(
    source: Store, target: Store, rec: Record, prev: bytes, same: bool
) -> tuple[Record, bool]:
    """(the target's record of `rec`, chained to `prev`; whether it was upcast)."""
    if same:
        plain = source.codec.unpack(rec, source.location)
        type_, version, meta = rec.type, rec.version, rec.meta
        data = source.codec.decode_data(rec) if target.backend.wants_text else None
    else:
        enc = _convert(source, target, rec)
        plain, type_, version, meta, data = enc.plain, enc.type, enc.version, enc.meta, enc.data
    digest = chain_hash(
        prev,
        rec.stream,
        rec.seq,
        rec.id,
        rec.ts,
        type_,
        version,
        rec.causation_id,
        rec.correlation_id,
        meta,
        plain,
    )
    if same and digest != rec.hash:
        raise CorruptionError(
            "hash differs from the source's after the copy: the source changed under it",
            stream=rec.stream,
            seq=rec.seq,
            location=source.location,
        )
    stored, codec_id = target.codec.pack(plain)
    new = Record(
        rec.id,
        rec.stream,
        rec.seq,
        rec.ts,
        type_,
        version,
        stored,
        meta,
        rec.causation_id,
        rec.correlation_id,
        digest,
        codec_id,
        0,
        event_text(data) if data is not None and target.backend.wants_text else "",
    )
    return new, version != rec.version
