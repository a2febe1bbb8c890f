"""The codec's batch forms (`encode_events`, `chain_hashes`) are the per-event forms, faster.

The append path uses the batch forms; `verify` and the retry checks use the per-event ones, so
any difference between them would show up as a broken hash chain or a lost validation error.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eventlog as el
from eventlog.backends.base import Record
from eventlog.codec import GENESIS, Codec, chain_hash, chain_hashes
from eventlog.compression import Compression
from tests.strategies import event_data, events

_ID = "0190c0c0-0000-7000-8000-00000000abcd"
batches = st.lists(events | event_data | st.builds(el.Event, data=event_data), max_size=8)


@pytest.mark.parametrize("fmt", ["msgpack", "json"])
@settings(max_examples=60, deadline=None)
@given(batch=batches)
def test_encode_events_is_encode_event_of_each(fmt: Any, batch: list[Any]) -> None:
    codec = Codec(fmt)
    got = codec.encode_events(batch)
    want = [codec.encode_event(e, i) for i, e in enumerate(batch)]
    # A bare payload gets a new id each time it is wrapped in an Event; the rest must match.
    assert [msgspec.structs.replace(g, id=w.id) for g, w in zip(got, want, strict=True)] == want
    assert all(
        g.id == w.id for g, w, e in zip(got, want, batch, strict=True) if isinstance(e, el.Event)
    )


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (lambda: el.Event(data=el.Checkpoint(label="x"), id="0" * 36), "id"),
        (lambda: el.Event(data=el.Checkpoint(label="x"), id=_ID.upper()), "id"),
        (lambda: el.Event(data=el.Custom(kind="k", data=object())), "data"),
        (lambda: el.Event(data=el.Checkpoint(label="x"), meta={1: "v"}), "meta"),
        (lambda: el.Event(data=el.Checkpoint(label="x"), causation_id=""), "causation_id"),
        (lambda: {"type": "checkpoint"}, None),
    ],
)
def test_encode_events_raises_what_encode_event_raises(bad: Any, field: str | None) -> None:
    codec = Codec("msgpack")
    good = el.Event(data=el.Checkpoint(label="ok"))
    with pytest.raises(el.ValidationError) as one:
        codec.encode_event(bad(), 1)
    with pytest.raises(el.ValidationError) as batch:
        codec.encode_events([good, bad()])
    assert str(batch.value) == str(one.value)
    assert "event #1" in str(batch.value)
    assert batch.value.field == field


def test_encode_events_enforces_the_size_limit() -> None:
    codec = Codec("json", max_event_bytes=100)
    small = el.Event(data=el.Checkpoint(label="x"))
    big = el.Event(data=el.Checkpoint(label="x" * 200))
    assert len(codec.encode_events([small])) == 1
    with pytest.raises(el.ValidationError, match="the limit is 100"):
        codec.encode_events([small, big])


@settings(max_examples=60, deadline=None)
@given(batch=st.lists(events, min_size=1, max_size=6), first=st.integers(1, 2**40))
def test_chain_hashes_is_chain_hash_of_each(batch: list[el.Event], first: int) -> None:
    encoded = Codec("msgpack").encode_events(batch)
    ts = 1_700_000_000_000_000_000
    expected, prev = [], GENESIS
    for i, e in enumerate(encoded):
        prev = chain_hash(
            prev,
            "s",
            first + i,
            e.id,
            ts,
            e.type,
            e.version,
            e.causation_id,
            e.correlation_id,
            e.meta,
            e.plain,
        )
        expected.append(prev)
    assert chain_hashes(GENESIS, "s", first, ts, encoded) == expected


@pytest.mark.parametrize("fmt", ["msgpack", "json"])
@settings(max_examples=60, deadline=None)
@given(batch=st.lists(events, min_size=1, max_size=8), compress=st.booleans())
def test_records_to_events_is_to_event_of_each(
    fmt: Any, batch: list[el.Event], compress: bool
) -> None:
    """Plain records take the inline path; meta, compressed and old-version ones `to_event`."""
    codec = Codec(fmt, compression=Compression("zstd", min_bytes=0) if compress else None)
    records = []
    for i, e in enumerate(codec.encode_events(batch)):
        data, packed = codec.compression.pack(e.plain)
        records.append(
            Record(
                e.id,
                "s",
                i + 1,
                5,
                e.type,
                e.version,
                data,
                e.meta,
                e.causation_id,
                e.correlation_id,
                bytes(32),
                packed,
                position=i + 1,
            )  # fmt: skip
        )
    older = msgspec.structs.replace(records[0], version=0)  # upcast (or refused) by to_event
    for recs in (records, [older, *records[1:]]):
        try:
            want = [codec.to_event(r) for r in recs]
        except el.EventlogError as exc:
            with pytest.raises(type(exc)):
                codec.records_to_events(recs)
        else:
            assert codec.records_to_events(recs) == want


@pytest.mark.parametrize("stored", [b"\xc1", "text", 7])
def test_records_to_events_reports_damage_as_to_event_does(stored: Any) -> None:
    codec = Codec("msgpack")
    (e,) = codec.encode_events([el.Checkpoint(label="x")])
    rec = Record(e.id, "s", 1, 5, e.type, e.version, stored, b"", None, None, bytes(32))
    with pytest.raises(el.CorruptionError, match="seq 1|checkpoint"):
        codec.records_to_events([rec])
