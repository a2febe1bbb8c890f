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

Encryption (see eventlog.encryption and docs/encryption.md). An encrypted event whose stream has
the same key in the target's key store (the same key directory) is copied as stored: ciphertext
and hash are the source's. Otherwise it is decrypted, and sealed again with the target's key (a
new ciphertext, so a new hash chain from that event on), or, with `decrypt=True` only, stored
unencrypted in a target without a key store. Unencrypted events copied into a target with a
key store are encrypted (a new chain too). `CopyReport.encrypted` and `.decrypted` count them.

Erased streams (their key deleted; see `eventlog.encryption.erase_stream`) are copied as stored:
their sealed events stay unreadable and keep their ciphertext (and their hashes, unless the
chain they continue was sealed anew: an erased fork of an ancestor encrypted again), and the
events they held from before encryption was turned on stay plain. The target's key store
must say they are erased: one that shares the source's key directory does, another one is
told (an erasure marker, no key), and a target without a key store, or one holding a live
key for such a stream, is refused, as is another payload format for a stream with sealed
events. With `leave_out_erased`, the erased streams and every fork descending from one are left out
instead (`CopyReport.left_out`), which is how an erased store is exported for an auditor. A
stream erased while the copy runs is taken as erased too, where the target can hold it so.
Sealed payloads kept as stored that were compressed with a trained dictionary bring that
dictionary into the target.

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
from eventlog.codec import GENESIS, Encoded, chain_hash
from eventlog.compression import ZSTD_DICT, dict_blob_key
from eventlog.encryption import ENCRYPTED, OVERHEAD, Encryption
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
    """True when every hash is the source's: source and target share a payload format, and no
    event was encrypted or decrypted anew."""
    upcast: int
    """Events stored at a newer schema version than the source's (copies between formats)."""
    encrypted: int = 0
    """Events sealed with the target's key: unencrypted in the source, or encrypted there with
    another key than the target's (their ciphertext and hash are new)."""
    decrypted: int = 0
    """Encrypted events stored unencrypted in the target (`decrypt=True`)."""
    erased: int = 0
    """Erased streams copied as stored (marked erased in the target's key store)."""
    left_out: tuple[str, ...] = ()
    """Streams not copied (`leave_out_erased`): the erased ones and the forks descending from
    them, sorted."""
    left_out_events: int = 0
    """The events of those streams' own, not copied."""


def copy_store(
    source: Store,
    target: Store | Callable[[], Store],
    *,
    progress: Progress | None = None,
    rehearse: Store | None = None,
    decrypt: bool = False,
    leave_out_erased: bool = False,
) -> CopyReport:
    """Copy every event and fork of `source` into the empty store `target`; see the module.

    `target` may be a function that opens it: it is called once the source has verified, so a
    source that does not verify leaves no new store behind. With `rehearse`, an empty store of
    the target's format and limits (`eventlog.connect.rehearsal(url)`), the checks run on it
    before that call too, so a copy the target would refuse leaves no new store either.
    Encrypted events go into a target without a key store only with `decrypt` (UsageError
    otherwise): they would be stored there unencrypted. `leave_out_erased`: see the module.
    """
    if isinstance(target, Store):
        _check_target(source, target)
    head = source.head_position()  # the copy is the store up to here
    total, erased = _verify(source, head, progress)
    erased |= _marked_erased(source)
    left_out = _with_descendants(erased, source.forks()) if leave_out_erased else set()
    erased -= left_out
    forks = {
        name: fork for name, fork in _forks_within(source, head).items() if name not in left_out
    }
    checked_on: Store | None = None  # a stand-in the checks already passed on
    if not isinstance(target, Store):
        if rehearse is not None:
            same = source.codec.format == rehearse.codec.format
            skipped = _check(
                source, rehearse, head, forks, same, total, progress, erased, decrypt, left_out
            )
            _check_target_keys(source, rehearse, erased, left_out)
            checked_on = rehearse
        target = target()
        _check_target(source, target)
    same = source.codec.format == target.codec.format
    if checked_on is None or not _same_codec(checked_on, target):
        skipped = _check(
            source, target, head, forks, same, total, progress, erased, decrypt, left_out
        )
    _check_target_keys(source, target, erased, left_out)
    for fork in sorted(forks.values(), key=lambda f: (f.ts, f.stream)):
        target.backend.create_fork(fork)
    copy = _Copy(source, target, same, erased, left_out)
    copied, streams = copy.events(head, total - skipped, progress)
    if copied + skipped != total:  # `_check` counted the same records: only a bug gets here
        raise CorruptionError(
            f"copied {copied} events and left out {skipped}, but verified {total}",
            location=source.location,
        )
    kept = streams | set(forks)
    # Only now: an erasure marker is for good, and a key directory may be shared with others.
    copied_erased = _mark_erased(target, copy.erased & kept)
    return CopyReport(
        len(kept),
        len(forks),
        copied,
        same and not copy.rechained,
        copy.upcast,
        copy.encrypted,
        copy.decrypted,
        len(copied_erased),
        tuple(sorted(left_out)),
        skipped,
    )


def _same_codec(a: Store, b: Store) -> bool:
    """Whether `_check` on one says what it would say on the other (format, size limit, keys)."""
    return (
        a.codec.format == b.codec.format
        and a.codec.max_event_bytes == b.codec.max_event_bytes
        and (a.codec.encryption is None) == (b.codec.encryption is None)
    )


_LEAVE_OUT = (
    "leave erased streams and their forks out (leave_out_erased=True, eventlog export "
    "--leave-out-erased)"
)
"""What a copy refused for an erased stream can do instead."""


def _marked_erased(source: Store) -> set[str]:
    """The source's streams its key store marks erased.

    Forks without events of their own and streams of plain events included: `verify` cannot
    tell those erased.
    """
    encryption = source.codec.encryption
    if encryption is None:
        return set()
    return {info.stream for info in source.streams() if encryption.keys.erased(info.stream)}


def _with_descendants(erased: set[str], forks: list[ForkInfo]) -> set[str]:
    """The erased streams and every fork descending from one, at any depth."""
    parents = {fork.stream: fork.parent for fork in forks}
    found = set(erased)
    for name in parents:
        chain: list[str] = []
        link: str | None = name
        while link is not None and link not in found and len(chain) <= len(parents):
            chain.append(link)
            link = parents.get(link)
        if link is not None and link in found:
            found.update(chain)
    return found


def _check_target_keys(source: Store, target: Store, erased: set[str], left_out: set[str]) -> None:
    """UsageError unless the target's key store can take the streams the copy writes.

    A stream the copy must seal may not be erased there; an erased stream needs a key store
    that says so, or can be told (no key there for a stream of that name).
    """
    encryption = target.codec.encryption
    hint = f"or {_LEAVE_OUT}; nothing was copied"
    for name in sorted(erased):
        if encryption is None:
            raise UsageError(
                f"stream {name!r} is erased (its key was deleted): {target.location} has no "
                "key store to keep it erased in; give the target a key directory (keys=DIR; "
                f"the source's keeps its events as they are), {hint}"
            )
        if encryption.keys.get(name) is not None:
            raise UsageError(
                f"stream {name!r} is erased, but the target's key store "
                f"{encryption.keys.location} holds a key for it (another store's stream of "
                f"that name?): copy with another key directory, {hint}"
            )
    if encryption is None:
        return
    for info in source.streams():
        if info.stream in erased or info.stream in left_out:
            continue
        if encryption.keys.erased(info.stream):
            raise UsageError(
                f"stream {info.stream!r} is erased in the target's key store "
                f"{encryption.keys.location}: its events cannot be encrypted there; nothing "
                "was copied"
            )


def _mark_erased(target: Store, copied: set[str]) -> set[str]:
    """Tell the target's key store that the erased streams copied there are erased."""
    if not copied:
        return copied
    encryption: Encryption | None = target.codec.encryption
    assert encryption is not None  # `_check_target_keys` refused a target without one
    for name in sorted(copied):
        if not encryption.keys.erased(name):
            encryption.keys.delete(name)  # no key there (checked): leaves the marker only
    return copied


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


def _verify(source: Store, head: int, progress: Progress | None) -> tuple[int, set[str]]:
    """Verify the source up to `head`: (its number of events, its erased streams).

    CorruptionError if it does not verify. Its progress counts towards `head` (positions are
    dense, so about the number of events).
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
    return report.events, set(report.erased)


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
    erased: set[str],
    decrypt: bool,
    left_out: set[str],
) -> int:
    """Refuse, before anything is written, what the target cannot take or the copy would break.

    Every event must fit the target's size limit (and, between formats, encode in the target's
    format); every stream must start at seq 1, or right after its fork point; and the events up
    to `head` must be the ones verified. Encrypted events need a target with a key store, or
    `decrypt`; an erased stream's sealed events cannot change payload format. Returns the
    number of events of the streams `left_out`.
    """
    limit = target.codec.max_event_bytes
    sealing = target.codec.encryption is not None
    next_seq: dict[str, int] = {}
    checked = skipped = 0
    for page in _pages(source, head):
        for rec in page:
            if rec.stream in left_out:
                skipped += 1
                continue
            _check_seq(source, rec, next_seq, forks)
            if rec.codec & ENCRYPTED:
                _check_sealed(source, target, rec, same, sealing, erased, decrypt)
                if rec.stream in erased:  # copied as stored: its plain size is known uncompressed
                    if rec.codec == ENCRYPTED and len(rec.data) - OVERHEAD > limit:
                        _too_large(rec, len(rec.data) - OVERHEAD, target)
                    continue
            if not same:
                _convert(source, target, rec)
            elif rec.codec or len(rec.data) > limit:
                size = len(source.codec.unpack(rec, source.location))
                if size > limit:
                    _too_large(rec, size, target)
        checked += len(page)
        if progress is not None:
            progress("check", checked, total)
    if checked != total:
        raise CorruptionError(
            f"found {checked} events up to position {head}, but verified {total}: the source "
            "changed under the copy; nothing was copied",
            location=source.location,
        )
    return skipped


def _too_large(rec: Record, size: int, target: Store) -> None:
    """ValidationError: the record's payload is over the target's size limit."""
    raise ValidationError(
        f"{rec.stream!r} seq {rec.seq} ({rec.id}) encodes to {size} bytes, the limit of "
        f"{target.location} is {target.codec.max_event_bytes}; nothing was copied",
        field="data",
    )


def _check_seq(
    source: Store, rec: Record, next_seq: dict[str, int], forks: dict[str, ForkInfo]
) -> None:
    """CorruptionError unless `rec` is its stream's next record (from seq 1 or its fork point)."""
    expected = next_seq.get(rec.stream)
    if expected is None:
        fork = forks.get(rec.stream)
        expected = 1 if fork is None else fork.at_seq + 1
    if rec.seq != expected:
        raise CorruptionError(
            f"expected seq {expected} next: the source changed under the copy; nothing was copied",
            stream=rec.stream,
            seq=rec.seq,
            location=source.location,
        )
    next_seq[rec.stream] = expected + 1


def _check_sealed(
    source: Store,
    target: Store,
    rec: Record,
    same: bool,
    sealing: bool,
    erased: set[str],
    decrypt: bool,
) -> None:
    """Refuse an encrypted record the copy could not take (see `_check`)."""
    if rec.stream in erased:
        if not same:
            raise UsageError(
                f"stream {rec.stream!r} is erased: its events cannot be converted to the "
                f"{target.codec.format} payload format of {target.location}; {_LEAVE_OUT}; "
                "nothing was copied"
            )
        return
    if not sealing and not decrypt:
        raise UsageError(
            f"{source.location} holds encrypted events (stream {rec.stream!r}, seq {rec.seq}) "
            f"and the target {target.location} has no key store: open the target with keys=DIR "
            "(the same key directory keeps ciphertext and hashes), or decrypt them on purpose "
            "(decrypt=True, eventlog export --decrypt); nothing was copied"
        )


class _Copy:
    """Appends the source's records to the target, each as the target must store it."""

    def __init__(
        self, source: Store, target: Store, same: bool, erased: set[str], left_out: set[str]
    ) -> None:
        self.source, self.target, self.same, self.erased = source, target, same, erased
        self.left_out = left_out
        self.upcast = self.encrypted = self.decrypted = 0
        self.rechained = False
        """Whether some hash differs from the source's (events encrypted or decrypted anew)."""
        self._keep: dict[str, bool] = {}
        self._aeads: dict[str, object] = {}
        self._dictionaries: set[str] = set()
        """Dictionary blobs known to be in the target."""

    def events(self, head: int, total: int, progress: Progress | None) -> tuple[int, set[str]]:
        """Append the records up to `head`, in runs of one stream: (events copied, streams)."""
        source, target = self.source, self.target
        copied = 0
        tails: dict[str, tuple[bytes, bytes]] = {}
        """stream -> (last hash in the target, last hash in the source)."""
        left_out = self.left_out
        for page in _pages(source, head):
            if left_out:
                page = [rec for rec in page if rec.stream not in left_out]
            start = 0
            while start < len(page):
                stream = page[start].stream
                end = start + 1
                while end < len(page) and end - start < RUN and page[end].stream == stream:
                    end += 1
                prev, source_prev = tails.get(stream) or self._tails(page[start])
                records: list[Record] = []
                for rec in page[start:end]:
                    new = self.record(rec, prev, prev == source_prev)
                    prev, source_prev = new.hash, rec.hash
                    records.append(new)
                target._append_records(stream, records)
                tails[stream] = (prev, source_prev)
                start = end
            copied += len(page)
            if progress is not None:
                progress("copy", copied, total)
        return copied, set(tails)

    def _tails(self, rec: Record) -> tuple[bytes, bytes]:
        """(target, source) hash before a stream's first copied record: genesis or a fork's."""
        self._erased_meanwhile(rec.stream)
        target_prev = self.target._tail(rec.stream, fresh=True)[1]
        if rec.seq == 1:
            return target_prev, GENESIS
        return target_prev, self.source._record_at(rec.stream, rec.seq - 1).hash

    def _erased_meanwhile(self, stream: str) -> None:
        """Take a stream erased in the source since the checks (a race) as erased too.

        It is copied as stored, like those found erased before; CorruptionError if the target
        cannot hold it so (the copy is then incomplete).
        """
        mine = self.source.codec.encryption
        if stream in self.erased or mine is None or not mine.keys.erased(stream):
            return
        theirs = self.target.codec.encryption
        if not self.same or theirs is None or theirs.keys.get(stream) is not None:
            raise CorruptionError(
                f"stream {stream!r} was erased while the copy ran, and "
                f"{self.target.location} cannot hold it erased: the copy there is incomplete; "
                "delete it and copy again",
                stream=stream,
                location=self.source.location,
            )
        self.erased.add(stream)
        self._keep.pop(stream, None)

    def _with_dictionary(self, rec: Record) -> None:
        """Copy the zstd dictionary a kept sealed record was compressed with, if needed.

        Its id is inside the ciphertext, so the record is opened to read it (an erased one
        cannot be, and needs none: it is unreadable anyway).
        """
        if not rec.codec & ZSTD_DICT or rec.stream in self.erased:
            return
        packed = self.source.codec.open_payload(rec, self.source.location)
        key = dict_blob_key(int.from_bytes(packed[:4], "big"))
        if key in self._dictionaries:
            return
        blob = self.source.backend.get_blob(key)
        theirs = self.target.backend.get_blob(key)
        if blob is None or (theirs is not None and theirs != blob):
            raise CorruptionError(
                f"the zstd dictionary {key} its payload was compressed with is "
                + ("missing" if blob is None else f"another one in {self.target.location}"),
                stream=rec.stream,
                seq=rec.seq,
                location=self.source.location,
            )
        if theirs is None:
            self.target.backend.put_blob(key, blob)
        self._dictionaries.add(key)

    def keeps(self, rec: Record) -> bool:
        """Whether an encrypted record goes into the target as stored (ciphertext kept)."""
        keep = self._keep.get(rec.stream)
        if keep is None:
            if rec.stream in self.erased:
                keep = True
            else:
                mine = self.source.codec.encryption
                theirs = self.target.codec.encryption
                keep = (
                    self.same
                    and mine is not None
                    and theirs is not None
                    and (key := mine.keys.get(rec.stream)) is not None
                    and theirs.keys.get(rec.stream) == key
                )
            self._keep[rec.stream] = keep
        return keep

    def record(self, rec: Record, prev: bytes, intact: bool) -> Record:
        """The target's record of `rec`, chained to `prev`.

        `intact`: `prev` is the source's hash before `rec`, so a record stored as it is must
        get the source's hash (checked).
        """
        source, target = self.source, self.target
        location = source.location
        wants_text = target.backend.wants_text
        data = None
        erased = rec.stream in self.erased  # its plain events stay plain: no key to seal with
        if rec.codec & ENCRYPTED and self.keeps(rec):
            self._with_dictionary(rec)
            stored, meta, codec_id, hashed = rec.data, rec.meta, rec.codec, rec.data
            type_, version = rec.type, rec.version
        else:
            if self.same:
                plain = source.codec.unpack(rec, location)
                type_, version = rec.type, rec.version
                meta = source.codec.plain_meta(rec, location)
                data = source.codec.decode_data(rec) if wants_text else None
            else:
                enc = _convert(source, target, rec)
                plain, type_, version, meta, data = (
                    enc.plain,
                    enc.type,
                    enc.version,
                    enc.meta,
                    enc.data,
                )
            self.upcast += version != rec.version
            if target.codec.encryption is not None and not erased:
                stored, meta, codec_id = target.codec.seal(
                    self._aead(rec.stream), rec.stream, rec.seq, rec.id, plain, meta
                )
                hashed, data = stored, None  # no searchable text of a sealed event
                self.encrypted += 1
            else:
                stored, codec_id = target.codec.pack(plain)
                hashed = plain
                self.decrypted += bool(rec.codec & ENCRYPTED)
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
            hashed,
        )
        if digest != rec.hash:
            if self.same and intact and hashed == source.codec.hashed_payload(rec, location):
                raise CorruptionError(
                    "hash differs from the source's after the copy: the source changed under it",
                    stream=rec.stream,
                    seq=rec.seq,
                    location=location,
                )
            self.rechained = True
        return Record(
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
            event_text(data) if data is not None and wants_text else "",
        )

    def _aead(self, stream: str) -> object:
        """The target's cipher for a stream (its key made there if it has none)."""
        aead = self._aeads.get(stream)
        if aead is None:
            encryption = self.target.codec.encryption
            assert encryption is not None
            backend = self.target.backend
            aead = self._aeads[stream] = encryption.sealing_key(
                stream, lambda: backend.last(stream)
            )
        return aead


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
