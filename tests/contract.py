"""The conformance suite every backend runs unchanged.

A backend's test module subclasses `BackendContract` (or `DurableContract` for backends whose data
survives the process) and provides:

- a fixture `fresh_url` returning a zero-argument function that gives a NEW, empty store URL on
  each call (the same URL opened twice is the same store);
- a method `tamper(store, stream, seq)` that alters the stored payload of one event underneath the
  store, with raw engine access, so that `verify` must catch it.

The classes are not named Test*, so pytest only collects them through a backend's subclass.
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import enum
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import eventlog as el
from eventlog.codec import Codec
from eventlog.round_trip import MAX_NESTING
from tests.strategies import events as event_strategy

FreshURL = Callable[[], str]
C1_NAMES = ("a\x85b", "\x9b")
"""Names with C1 controls: refused in new streams, readable where earlier versions stored them."""


@el.register_event_type
class Rated(el.EventData, frozen=True, tag="test.rated"):
    """A user-defined event kind."""

    score: int
    note: str = ""


@el.register_event_type
class Bounded(el.EventData, frozen=True, tag="tests.bounded"):
    """A user-defined event kind with a constraint its decoder enforces."""

    score: Annotated[int, msgspec.Meta(ge=0)]


@el.register_event_type
class Typed(el.EventData, frozen=True, tag="tests.typed"):
    """Fields both formats write as strings or numbers, whose decoders parse what they get."""

    ident: uuid.UUID | None = None
    when: datetime.datetime | None = None
    amount: decimal.Decimal | None = None
    names: dict[int, str] = msgspec.field(default_factory=dict)
    either: bytes | int = 0
    note: str = ""


class Color(enum.Enum):
    RED = "red"


class Shade(enum.StrEnum):
    DARK = "dark"


@el.register_event_type
class Versioned(el.EventData, frozen=True, tag="tests.versioned"):
    """Schema version 2: field `bb` was `aa` in version 1 (the default hides a wrong decode).

    Backend tests store it as version 1 underneath the store to show reads upcast it.
    """

    __schema_version__ = 2
    bb: str = ""


@el.register_upcaster("tests.versioned", from_version=1)
def _versioned_v1_to_v2(old: dict[str, object]) -> dict[str, object]:
    return {"bb": old["aa"]}


def _nested(depth: int) -> list[Any]:
    """A list inside a list, `depth` deep."""
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def text_events(n: int, prefix: str = "m") -> list[el.Event]:
    """n small input events with distinct texts."""
    return [el.Event(data=el.ModelInput.from_text(f"{prefix}{i}")) for i in range(n)]


def concurrent_single_appends(
    store: el.Store,
    threads: int,
    per: int,
    stream: Callable[[int, int], str] = lambda t, i: f"t{t}",
) -> list[str]:
    """`threads` threads, released together, each append `per` single events (thread t's i-th
    to `stream(t, i)`, by default its own stream); the ids of the events acknowledged."""
    barrier = threading.Barrier(threads)
    acked: list[str] = []
    lock = threading.Lock()

    def worker(t: int) -> None:
        barrier.wait()
        for i in range(per):
            (rec,) = store.append(stream(t, i), text_events(1, f"{t}-{i}-"))
            with lock:
                acked.append(rec.id)

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    return acked


def wait_for(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll `check` until it holds (True) or `timeout` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def conflict_in_one_group(store: el.Store, queue: Any, commit: Any) -> el.RecordedEvent:
    """Hold a group-commit queue's lead, queue a duplicate-id append to stream "z" and a good one
    to "y" so they share the next commit, and check only the duplicate fails; the good event.

    `queue` is the backend's `GroupQueue`, `commit` its group commit; "y" and "z" must already
    have events (so the store goes straight to the backend for them).
    """
    taken = store.append("x", text_events(1))[0].id
    stats = store.backend.stats  # type: ignore[attr-defined]
    gate = threading.Event()
    results: dict[str, Any] = {}

    def append(name: str, stream: str, event: el.Event) -> None:
        try:
            results[name] = store.append(stream, [event])
        except el.EventlogError as exc:
            results[name] = exc

    # A job that writes nothing and holds the lead until the gate opens.
    holder = threading.Thread(
        target=queue.run, args=(lambda _: None if gate.wait(30) else None, False, commit)
    )
    holder.start()
    assert wait_for(lambda: queue._leading)
    bad = el.Event(data=el.ModelInput.from_text("dup"), id=taken)
    good = el.Event(data=el.ModelInput.from_text("ok"))
    threads = [
        threading.Thread(target=append, args=("bad", "z", bad)),
        threading.Thread(target=append, args=("good", "y", good)),
    ]
    for th in threads:
        th.start()
    assert wait_for(lambda: len(queue._queue) == 2)  # both wait for the next commit
    commits = stats()["commits"]
    gate.set()
    for th in [holder, *threads]:
        th.join()
    assert isinstance(results["bad"], el.DuplicateEventError)
    (stored,) = results["good"]
    assert stored.id == good.id
    assert stats()["commits"] == commits + 2  # the holder's, then bad+good in one
    return stored


def texts_of(events: Any) -> list[str]:
    """The input texts of a sequence of recorded events."""
    return [e.data.text for e in events]


class BackendContract:
    """Behaviour every backend must show."""

    # -- fixtures --------------------------------------------------------------------------

    @pytest.fixture
    def store(self, fresh_url: FreshURL) -> Iterator[el.Store]:
        store = el.open(fresh_url(), durability="none")
        yield store
        store.close()

    def tamper(self, store: el.Store, stream: str, seq: int) -> None:
        raise NotImplementedError

    # -- append, seq, position -------------------------------------------------------------

    def test_append_assigns_gapless_seqs_in_order(self, store: el.Store) -> None:
        first = store.append("s", text_events(3))
        second = store.append("s", text_events(2, "n"))
        assert [e.seq for e in first + second] == [1, 2, 3, 4, 5]
        assert texts_of(store.read("s")) == ["m0", "m1", "m2", "n0", "n1"]
        assert all(e.stream == "s" for e in store.read("s"))

    def test_positions_strictly_increase_across_streams(self, store: el.Store) -> None:
        for i in range(6):
            store.append(f"s{i % 3}", text_events(2, f"x{i}-"))
        positions = [e.position for e in store.read_all()]
        assert len(positions) == 12
        assert positions == sorted(positions)
        assert len(set(positions)) == 12
        assert store.head_position() == positions[-1]

    def test_append_returns_what_is_stored(self, store: el.Store) -> None:
        ev = el.Event(
            data=el.ModelInput.from_text("hello"),
            meta={"source": "test", "n": 3},
            causation_id="c-1",
            correlation_id="r-1",
        )
        (recorded,) = store.append("s", [ev])
        (read,) = store.read("s")
        assert recorded == read
        assert read.id == ev.id and read.meta == {"source": "test", "n": 3}
        assert read.causation_id == "c-1" and read.correlation_id == "r-1"
        assert read.type == "model_input"
        assert abs(read.ts - time.time_ns()) < 60 * 10**9

    def test_append_returns_values_as_reads_give_them(self, store: el.Store) -> None:
        """Equal values in another container come back from `append` as reads give them.

        A tuple in an untyped field reads back as a list, a list in a tuple field as a tuple;
        the append, a retry of it and a read return the same event.
        """
        batch = [
            el.Event(data=el.Custom(kind="k", data=(1, (2, 3)))),
            el.Event(data=el.ModelInput(sections=[el.Section(text="hi")])),  # type: ignore[arg-type]
        ]
        first = store.append("s", batch)
        assert first[0].data == el.Custom(kind="k", data=[1, [2, 3]])
        assert type(first[1].data.sections) is tuple  # type: ignore[attr-defined]
        assert first == list(store.read("s")) == store.append("s", batch)

    def test_bare_event_data_is_wrapped(self, store: el.Store) -> None:
        (rec,) = store.append("s", [el.Checkpoint(label="start")])
        assert el.events.is_event_id(rec.id)
        assert rec.data == el.Checkpoint(label="start")

    def test_empty_append_writes_nothing(self, store: el.Store) -> None:
        assert store.append("s", []) == []
        assert not store.exists("s")

    # -- expected_seq ----------------------------------------------------------------------

    def test_expected_no_stream(self, store: el.Store) -> None:
        store.append("s", text_events(1), expected_seq=el.NO_STREAM)
        with pytest.raises(el.ConcurrencyError) as err:
            store.append("s", text_events(1), expected_seq=el.NO_STREAM)
        assert err.value.actual == 1 and err.value.stream == "s"
        store.append("t", text_events(1), expected_seq=0)
        assert store.stream_info("s").last_seq == 1

    def test_expected_exact(self, store: el.Store) -> None:
        store.append("s", text_events(2), expected_seq=0)
        store.append("s", text_events(1), expected_seq=2)
        for wrong in (0, 1, 2, 4, 10):
            with pytest.raises(el.ConcurrencyError) as err:
                store.append("s", text_events(1, "bad"), expected_seq=wrong)
            assert err.value.expected == wrong and err.value.actual == 3
        assert texts_of(store.read("s")) == ["m0", "m1", "m0"]

    def test_expected_any(self, store: el.Store) -> None:
        store.append("s", text_events(1), expected_seq=el.ANY)
        store.append("s", text_events(1), expected_seq="any")
        assert store.stream_info("s").last_seq == 2

    def test_expected_seq_rejects_nonsense(self, store: el.Store) -> None:
        for bad in (-1, "latest", 1.5, True):
            with pytest.raises(el.ValidationError):
                store.append("s", text_events(1), expected_seq=bad)  # type: ignore[arg-type]
        assert not store.exists("s")

    # -- validation: nothing written -------------------------------------------------------

    @pytest.mark.parametrize(
        "bad",
        [
            pytest.param(
                lambda: el.Event(data=el.Checkpoint(label="x"), meta={"k": "v" * 3000}),
                id="meta-too-big",
            ),
            pytest.param(
                lambda: el.Event(data=el.Checkpoint(label="x"), id="not-a-uuid"), id="bad-id"
            ),
            pytest.param(
                lambda: el.Event(data=el.Checkpoint(label="x"), meta={1: "v"}), id="meta-key"
            ),
            pytest.param(lambda: el.Event(data="text"), id="data-not-event"),  # type: ignore[arg-type]
            pytest.param(lambda: {"type": "checkpoint"}, id="dict"),
            pytest.param(
                lambda: el.Event(data=el.Custom(kind="k", data=object())), id="unencodable"
            ),
            # Structs do not check types on construction: these encode, but would not decode.
            pytest.param(lambda: el.SystemInstructionSet(text=123), id="wrong-type"),  # type: ignore[arg-type]
            pytest.param(
                lambda: el.ModelInput(sections=(el.Section(text=None),)),  # type: ignore[arg-type]
                id="wrong-type-nested",
            ),
            pytest.param(lambda: Rated(score="5"), id="wrong-type-user-class"),  # type: ignore[arg-type]
            pytest.param(lambda: Bounded(score=-1), id="constraint"),
            pytest.param(lambda: el.Custom(kind="k", data=_nested(5000)), id="nested-too-deep"),
            # Values a decoder would take, but return as something else:
            pytest.param(lambda: Typed(note=uuid.UUID(int=1)), id="uuid-in-str"),  # type: ignore[arg-type]
            pytest.param(lambda: Typed(note=b"\x01sig"), id="bytes-in-str"),  # type: ignore[arg-type]
            pytest.param(lambda: Typed(note=Color.RED), id="enum-in-str"),  # type: ignore[arg-type]
            pytest.param(
                lambda: Typed(note=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)),  # type: ignore[arg-type]
                id="datetime-in-str",
            ),
            pytest.param(lambda: Typed(ident=str(uuid.UUID(int=1))), id="str-in-uuid"),  # type: ignore[arg-type]
            pytest.param(lambda: Typed(when="2026-01-01T00:00:00Z"), id="str-in-datetime"),  # type: ignore[arg-type]
            pytest.param(lambda: Typed(amount="1.5"), id="str-in-decimal"),  # type: ignore[arg-type]
            pytest.param(lambda: Typed(names={"1": "a"}), id="str-key-in-int-dict"),  # type: ignore[dict-item]
            pytest.param(lambda: Typed(either="aGVsbG8="), id="str-in-bytes-or-int"),  # type: ignore[arg-type]
            pytest.param(
                lambda: el.ModelOutput(parts=(el.ReasoningPart(signature=b"\x01sig"),)),  # type: ignore[arg-type]
                id="bytes-in-builtin-str",
            ),
            pytest.param(
                lambda: el.Event(data=el.Checkpoint(label="x"), meta={"id": uuid.UUID(int=1)}),
                id="uuid-in-meta",
            ),
            pytest.param(
                lambda: el.Event(data=el.Checkpoint(label="x"), meta={"c": Color.RED}),
                id="enum-in-meta",
            ),
        ],
    )
    def test_invalid_event_in_batch_writes_nothing(
        self, store: el.Store, bad: Callable[[], Any]
    ) -> None:
        store.append("s", text_events(1))
        batch = [*text_events(2, "ok"), bad()]
        with pytest.raises(el.ValidationError) as err:
            store.append("s", batch)
        assert "event #2" in str(err.value)
        assert texts_of(store.read("s")) == ["m0"]
        assert store.head_position() == 1

    def test_values_of_the_right_types_read_back_as_appended(self, store: el.Store) -> None:
        """The counterpart of the refusals above; a StrEnum member reads back as its str."""
        typed = Typed(
            ident=uuid.UUID(int=1),
            when=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
            amount=decimal.Decimal("1.50"),
            names={1: "a"},
            either=b"raw",
            note=Shade.DARK,
        )
        store.append("s", [el.Event(data=typed, meta={"shade": Shade.DARK, "n": (1, 2)})])
        (event,) = store.read("s")
        assert event.data == typed and type(event.data.ident) is uuid.UUID
        assert type(event.data.note) is str and event.meta == {"shade": "dark", "n": [1, 2]}

    def test_wrongly_typed_payload_error_says_where(self, store: el.Store) -> None:
        with pytest.raises(el.ValidationError, match=r"declared types.*\$\.sections\[0\]\.text"):
            store.append("s", [el.ModelInput(sections=(el.Section(text=7),))])  # type: ignore[arg-type]
        assert not store.exists("s")
        store.append("s", [Bounded(score=0)])
        assert [e.data for e in store.read("s")] == [Bounded(score=0)]

    def test_duplicate_id_in_one_batch_is_rejected(self, store: el.Store) -> None:
        ev = el.Event(data=el.Checkpoint(label="x"))
        with pytest.raises(el.ValidationError, match="event #2, field 'id'.* of event #0") as err:
            store.append("s", [ev, el.Checkpoint(label="y"), ev])
        assert err.value.index == 2
        assert not store.exists("s")

    @pytest.mark.parametrize(
        "batch",
        [el.Checkpoint(label="x"), el.Event(data=el.Checkpoint(label="x")), None, "text", b"x"],
        ids=["payload", "event", "none", "str", "bytes"],
    )
    def test_a_batch_that_is_no_list_of_events_is_refused(
        self, store: el.Store, batch: Any
    ) -> None:
        with pytest.raises(el.ValidationError, match="field 'events'.*a list"):
            store.append("s", batch)
        assert not store.exists("s")

    def test_values_nested_deeper_than_readers_can_decode_are_refused(
        self, store: el.Store
    ) -> None:
        """A payload or meta nested more than MAX_NESTING levels is refused, whatever the format;
        one at the limit reads back from code running hundreds of frames deeper."""

        def nest(n: int) -> Any:
            v: Any = 1
            for _ in range(n):
                v = [v]
            return v

        def deeper(frames: int, call: Callable[[], Any]) -> Any:
            return deeper(frames - 1, call) if frames else call()

        limit = MAX_NESTING
        for too_deep in (
            el.Custom(kind="k", data=nest(limit)),  # the record is a level too
            el.Custom(kind="k", data=(nest(limit),)),  # decoded, not vouched for
            el.Event(data=el.Checkpoint(label="x"), meta={"m": nest(limit)}),
        ):
            with pytest.raises(el.ValidationError, match=f"more than {limit} levels"):
                store.append("s", [too_deep])
        assert not store.exists("s")
        store.append("s", [el.Custom(kind="k", data=nest(limit - 1))])
        store.append("s", [el.Event(data=el.Checkpoint(label="x"), meta={"m": nest(limit - 2)})])
        got = deeper(500, lambda: list(store.read("s")))
        assert got[0].data == el.Custom(kind="k", data=nest(limit - 1))
        assert deeper(500, store.verify).ok

    def test_unregistered_event_type_is_rejected(self, store: el.Store) -> None:
        class Unregistered(el.EventData, frozen=True, tag="test.unregistered"):
            x: int

        with pytest.raises(el.ValidationError, match="not registered"):
            store.append("s", [Unregistered(x=1)])

    @pytest.mark.parametrize(
        "name",
        [
            "",
            "   ",
            "a\x00b",
            "tab\there",
            "a\x7fb",
            "end\x1f",
            *C1_NAMES,  # NEL among them, a line break to str.splitlines()
            "x" * 201,
            None,
            "a\ud800",
            "\udfff",
        ],
    )
    def test_bad_stream_names_are_rejected(self, store: el.Store, name: Any) -> None:
        with pytest.raises(el.ValidationError):
            store.append(name, text_events(1))
        store.append("ok", text_events(1))
        with pytest.raises(el.ValidationError):
            store.fork("ok", name)
        if name in C1_NAMES:  # readable if stored (test_names_stored_by_earlier_versions...)
            assert not store.exists(name)
            with pytest.raises(el.StreamNotFoundError):
                list(store.read(name))
            return
        for call in (
            lambda: list(store.read(name)),
            lambda: store.exists(name),
            lambda: store.stream_info(name),
            lambda: store.ancestry(name),
            *([lambda: store.forks(name)] if name is not None else []),  # None: every fork
            *([lambda: store.verify(name)] if name is not None else []),  # None: every stream
        ):
            with pytest.raises(el.ValidationError):
                call()

    def test_a_checked_name_does_not_vouch_for_lookalikes(self, store: el.Store) -> None:
        """`append` remembers names it checked; an object merely equal to one is still refused."""

        class Lookalike:
            def __eq__(self, other: object) -> bool:
                return other == "s"

            def __hash__(self) -> int:
                return hash("s")

        store.append("s", text_events(1))
        store.append("s", text_events(1))  # the remembered name
        with pytest.raises(el.ValidationError, match="must be a str"):
            store.append(Lookalike(), text_events(1))  # type: ignore[arg-type]
        assert [e.seq for e in store.read("s")] == [1, 2]

    def test_user_registered_event_type_round_trips(self, store: el.Store) -> None:
        store.append("s", [Rated(score=5, note="good")])
        (read,) = store.read("s")
        assert read.data == Rated(score=5, note="good")
        assert read.type == "test.rated"

    # -- idempotency -----------------------------------------------------------------------

    @pytest.mark.parametrize("expected", [el.NO_STREAM, el.ANY])
    def test_retry_returns_stored_events(self, store: el.Store, expected: Any) -> None:
        batch = text_events(3)
        first = store.append("s", batch, expected_seq=expected)
        again = store.append("s", batch, expected_seq=expected)
        assert again == first
        assert store.stream_info("s").last_seq == 3
        assert len(list(store.read_all())) == 3

    def test_retry_after_later_appends_returns_stored_events(self, store: el.Store) -> None:
        batch = text_events(2)
        first = store.append("s", batch, expected_seq=0)
        store.append("s", text_events(2, "later"), expected_seq=2)
        assert store.append("s", batch, expected_seq=0) == first
        assert store.stream_info("s").last_seq == 4

    def test_same_id_other_content_raises(self, store: el.Store) -> None:
        ev = el.Event(data=el.ModelInput.from_text("original"))
        store.append("s", [ev])
        forged = el.Event(data=el.ModelInput.from_text("forged"), id=ev.id)
        with pytest.raises(el.DuplicateEventError) as err:
            store.append("s", [forged])
        assert err.value.event_id == ev.id
        assert texts_of(store.read("s")) == ["original"]

    def test_same_id_other_meta_raises(self, store: el.Store) -> None:
        ev = el.Event(data=el.Checkpoint(label="a"), meta={"v": 1})
        store.append("s", [ev])
        with pytest.raises(el.DuplicateEventError):
            store.append("s", [el.Event(data=ev.data, id=ev.id, meta={"v": 2})])

    def test_same_id_in_another_stream_raises(self, store: el.Store) -> None:
        ev = el.Event(data=el.Checkpoint(label="a"))
        store.append("s", [ev])
        with pytest.raises(el.DuplicateEventError, match="'s'"):
            store.append("t", [ev])
        assert not store.exists("t")

    def test_partially_stored_batch_raises(self, store: el.Store) -> None:
        stored = text_events(1)
        store.append("s", stored)
        with pytest.raises(el.DuplicateEventError):
            store.append("s", [*stored, *text_events(1, "new")])
        assert store.stream_info("s").last_seq == 1

    # -- reads -----------------------------------------------------------------------------

    def test_read_ranges_backwards_and_last(self, store: el.Store) -> None:
        store.append("s", text_events(10))
        assert texts_of(store.read("s", 3, 5)) == ["m2", "m3", "m4"]
        assert texts_of(store.read("s", 8)) == ["m7", "m8", "m9"]
        assert texts_of(store.read("s", backwards=True, limit=3)) == ["m9", "m8", "m7"]
        assert texts_of(store.read("s", 2, 4, backwards=True)) == ["m3", "m2", "m1"]
        assert texts_of(store.read("s", limit=2)) == ["m0", "m1"]
        assert texts_of(store.read_last("s", 3)) == ["m7", "m8", "m9"]
        assert texts_of(store.read_last("s", 50)) == [f"m{i}" for i in range(10)]
        assert list(store.read("s", 11)) == []
        assert list(store.read("s", 5, 4)) == []
        assert store.get("s", 4).data.text == "m3"  # type: ignore[attr-defined]

    def test_reads_page_through_long_streams(self, store: el.Store) -> None:
        n = el.store.PAGE * 2 + 17
        store.append("long", text_events(n))
        assert [e.seq for e in store.read("long")] == list(range(1, n + 1))
        assert [e.seq for e in store.read("long", backwards=True)] == list(range(n, 0, -1))
        assert [e.position for e in store.read_all()] == list(range(1, n + 1))
        assert len(list(store.read_all(after=n - 5))) == 5
        assert len(list(store.read_all(limit=1500))) == 1500

        async def async_read_all() -> int:
            return len(await el.AsyncStore(store).read_all())

        assert asyncio.run(async_read_all()) == n  # every event, as the sync read_all gives

    def test_reads_without_a_payload_union_give_the_same_events(
        self, store: el.Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """When the registered payload classes cannot form one tagged union (an application
        class with a tag field of its own), every read takes the per-record path, with the
        same result as the one-pass decoders."""
        store.append("s", text_events(5))
        store.append("s", [el.Event(data=el.ModelInput.from_text("m"), meta={"k": 1})])
        store.append("t", text_events(2, "t"))
        expected = (list(store.read("s")), list(store.read("s", backwards=True)))
        everything = list(store.read_all())
        monkeypatch.setattr(Codec, "payload_types", lambda self: None)
        assert (list(store.read("s")), list(store.read("s", backwards=True))) == expected
        assert list(store.read_all()) == everything

    def test_packed_and_record_reads_agree(self, store: el.Store) -> None:
        """`read_packed` / `read_all_packed` (the fast path of packing backends, generic on the
        others) give the same records and events as `read` / `read_all`."""
        from msgspec.structs import astuple

        from eventlog.backends.envelope import unpack_record

        store.append("s", text_events(5))
        store.append(
            "s",
            [
                el.Event(
                    data=el.ModelInput.from_text("x" * 5000),
                    meta={"k": [1, 2]},
                    causation_id="c1",
                    correlation_id="c2",
                )
            ],
        )
        store.append("t", text_events(2, "t"))
        backend, codec = store.backend, store.codec
        for backwards, limit in [(False, None), (True, None), (False, 3), (True, 2)]:
            records = backend.read("s", 2, None, backwards=backwards, limit=limit)
            rows = backend.read_packed("s", 2, None, backwards=backwards, limit=limit)
            assert [astuple(unpack_record(*row)) for row in rows] == list(map(astuple, records))
            assert codec.to_events(rows) == [codec.to_event(r) for r in records]
        rows = backend.read_all_packed(1, 100)
        assert [astuple(unpack_record(*row)) for row in rows] == list(
            map(astuple, backend.read_all(1, 100))
        )
        events = codec.to_events(rows)
        assert [(e.stream, e.seq, e.position) for e in events] == [
            ("s", seq, seq) for seq in range(2, 7)
        ] + [("t", 1, 7), ("t", 2, 8)]
        assert events[4].meta == {"k": [1, 2]} and events[4].causation_id == "c1"

    def test_read_events_agrees_with_decoding_each_record(self, store: el.Store) -> None:
        """`read_events` / `read_all_events` (what the store reads through; one-pass on some
        backends) give exactly the events `to_event` makes of `read` / `read_all`."""
        store.append("s", text_events(4))
        store.append(
            "s",
            [
                el.Event(data=el.Custom(kind="k", data={"data": '","data":'}), meta={"m": [1]}),
                el.Event(data=el.Checkpoint(label="c"), causation_id="a", correlation_id="b"),
                el.Event(data=el.ModelInput.from_text("x" * 5000)),
            ],
        )
        store.append("t", text_events(3, "t"))
        backend, codec = store.backend, store.codec
        for backwards, first, limit in [
            (False, 1, None),
            (True, 1, None),
            (False, 3, 2),
            (True, 2, 3),
        ]:
            records = backend.read("s", first, None, backwards=backwards, limit=limit)
            events = backend.read_events("s", first, None, codec, backwards=backwards, limit=limit)
            assert events == [codec.to_event(r) for r in records]
            assert events  # the comparison above is over something
        for after, limit in [(0, 100), (2, 3), (6, 100), (10, 5)]:
            records = backend.read_all(after, limit)
            events = backend.read_all_events(after, limit, codec)
            assert events == [codec.to_event(r) for r in records]
        assert [e.position for e in backend.read_all_events(0, 100, codec)] == list(range(1, 11))

    def test_missing_stream(self, store: el.Store) -> None:
        for read in (
            lambda: list(store.read("nope")),
            lambda: list(store.read("nope", 2)),
            lambda: list(store.read("nope", 2, backwards=True)),
            lambda: store.get("nope", 2),
            lambda: store.read_last("nope", 3),
            lambda: store.stream_info("nope"),
        ):
            with pytest.raises(el.StreamNotFoundError):
                read()
        assert not store.exists("nope")

    @pytest.mark.parametrize("bad", [1.5, 2.0, True, "2", None, -1, 2**63, 2**64])
    def test_bad_seqs_counts_and_positions_are_refused(self, store: el.Store, bad: Any) -> None:
        """Every backend answers a float, bool, str or out-of-range int the same way."""
        store.append("s", text_events(3))
        calls: list[Callable[[], object]] = [
            lambda: list(store.read("s", bad)),
            lambda: store.get("s", bad),
            lambda: store.read_last("s", bad),
            lambda: list(store.read_all(bad)),
            lambda: store.subscribe(bad),
        ]
        if bad is not None:  # None means "no bound" for these
            calls += [
                lambda: list(store.read("s", 1, bad)),
                lambda: list(store.read("s", limit=bad)),
                lambda: list(store.read_all(0, bad)),
                lambda: store.append("s", text_events(1), expected_seq=bad),
                lambda: store.fork("s", "f", bad),
            ]
        for call in calls:
            with pytest.raises(el.ValidationError):
                call()
        assert [e.seq for e in store.read("s")] == [1, 2, 3]
        assert not store.exists("f") and store.head_position() == 3

    def test_an_empty_append_still_checks_expected_seq(self, store: el.Store) -> None:
        store.append("s", text_events(2))
        assert store.append("s", [], expected_seq=2) == []
        assert store.append("new", [], expected_seq=el.NO_STREAM) == []
        with pytest.raises(el.ConcurrencyError):
            store.append("s", [], expected_seq=5)
        with pytest.raises(el.ConcurrencyError):
            store.append("s", [], expected_seq=el.NO_STREAM)
        assert store.head_position() == 2 and not store.exists("new")

    def test_list_streams(self, store: el.Store) -> None:
        store.append("b", text_events(2))
        store.append("a", text_events(3))
        store.fork("a", "c", 2)
        infos = {i.stream: i for i in store.streams()}
        assert sorted(infos) == ["a", "b", "c"]
        assert infos["a"].last_seq == 3 and infos["b"].last_seq == 2
        assert infos["c"].parent == "a" and infos["c"].at_seq == 2 and infos["c"].last_seq == 2
        assert infos["a"].last_ts >= infos["b"].last_ts > 0

    def test_names_stored_by_earlier_versions_stay_readable(
        self, store: el.Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Earlier versions accepted C1 controls in names: such a stream is still reachable."""
        import eventlog.codec

        earlier_rule = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]").search
        with monkeypatch.context() as m:
            m.setattr(eventlog.codec, "_bad_char", earlier_rule)
            for name in C1_NAMES:
                store.append(name, text_events(2, name))
        for name in C1_NAMES:
            assert store.exists(name)
            assert texts_of(store.read(name)) == [f"{name}0", f"{name}1"]
            assert store.stream_info(name).last_seq == 2
            assert store.ancestry(name) == []
            assert store.verify(name).ok
            store.append(name, text_events(1, "more"), expected_seq=2)  # it exists: goes on
            assert store.read_last(name, 1)[0].seq == 3
            store.fork(name, f"fork-{ord(name[-1])}", 2)  # a new name of today's rule
            assert len(list(store.read(f"fork-{ord(name[-1])}"))) == 2
            with pytest.raises(el.ValidationError):  # a new name: today's rule
                store.fork(name, name + "x", 1)
        assert set(C1_NAMES) <= {i.stream for i in store.streams()}
        with pytest.raises(el.ValidationError):  # a new stream: today's rule
            store.append("new\x85", text_events(1))
        assert not store.exists("new\x85")

    def test_unicode_stream_names(self, store: el.Store) -> None:
        for name in ["会话/1", "A", "a", "../etc", "x y", "emoji-🙂"]:
            store.append(name, text_events(1, name))
        for name in ["会话/1", "A", "a", "../etc", "x y", "emoji-🙂"]:
            assert texts_of(store.read(name)) == [f"{name}0"]
        assert {"A", "a", "../etc"} <= {i.stream for i in store.streams()}

    @settings(
        max_examples=20,
        deadline=None,
        # One test run by each backend's subclass: the executor differs by design.
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.differing_executors,
        ],
    )
    @given(batch=st.lists(event_strategy, min_size=1, max_size=6, unique_by=lambda e: e.id))
    def test_round_trip_any_event(self, fresh_url: FreshURL, batch: list[el.Event]) -> None:
        with el.open(fresh_url(), durability="none") as store:
            store.append("s", batch)
            read = list(store.read("s"))
        assert [e.data for e in read] == [e.data for e in batch]
        assert [e.meta for e in read] == [e.meta for e in batch]
        assert [e.id for e in read] == [e.id for e in batch]

    # -- forks -----------------------------------------------------------------------------

    def test_fork_reads_through_parent_and_is_isolated(self, store: el.Store) -> None:
        store.append("p", text_events(5, "p"))
        info = store.fork("p", "f", 3)
        assert (info.parent, info.at_seq, info.last_seq) == ("p", 3, 3)
        assert texts_of(store.read("f")) == ["p0", "p1", "p2"]
        store.append("p", text_events(1, "later"))
        assert texts_of(store.read("f")) == ["p0", "p1", "p2"]
        store.append("f", text_events(2, "f"), expected_seq=3)
        assert [e.seq for e in store.read("f")] == [1, 2, 3, 4, 5]
        assert texts_of(store.read("f")) == ["p0", "p1", "p2", "f0", "f1"]
        assert texts_of(store.read("p")) == ["p0", "p1", "p2", "p3", "p4", "later0"]
        assert texts_of(store.read("f", 2, 4)) == ["p1", "p2", "f0"]
        assert texts_of(store.read("f", backwards=True, limit=4)) == ["f1", "f0", "p2", "p1"]
        assert texts_of(store.read_last("f", 3)) == ["p2", "f0", "f1"]
        assert store.verify().ok

    def test_fork_of_fork(self, store: el.Store) -> None:
        store.append("p", text_events(4, "p"))
        store.fork("p", "f1", 2)
        store.append("f1", text_events(3, "f"))
        store.fork("f1", "f2", 4)
        store.append("f2", text_events(1, "g"))
        assert texts_of(store.read("f2")) == ["p0", "p1", "f0", "f1", "g0"]
        assert store.ancestry("f2") == [("p", 2), ("f1", 4)]
        assert store.ancestry("p") == []
        assert [f.stream for f in store.forks("f1")] == ["f2"]
        assert store.verify().ok

    def test_fork_of_fork_below_the_parents_fork_point(self, store: el.Store) -> None:
        store.append("p", text_events(4, "p"))
        store.fork("p", "f1", 3)
        store.append("f1", text_events(2, "f"))
        store.fork("f1", "f2", 1)
        assert texts_of(store.read("f2")) == ["p0"]
        store.append("f2", text_events(1, "g"), expected_seq=1)
        assert texts_of(store.read("f2")) == ["p0", "g0"]
        assert texts_of(store.read("f2", backwards=True)) == ["g0", "p0"]
        assert store.verify().ok

    def test_fork_expected_seq_and_idempotency(self, store: el.Store) -> None:
        store.append("p", text_events(3))
        store.fork("p", "f", 2)
        with pytest.raises(el.ConcurrencyError):
            store.append("f", text_events(1), expected_seq=el.NO_STREAM)
        batch = text_events(1, "f")
        first = store.append("f", batch, expected_seq=2)
        assert store.append("f", batch, expected_seq=2) == first

    def test_fork_errors(self, store: el.Store) -> None:
        store.append("p", text_events(3))
        store.append("other", text_events(1))
        with pytest.raises(el.ValidationError):
            store.fork("p", "f", 4)
        with pytest.raises(el.ValidationError):
            store.fork("p", "f", 0)
        with pytest.raises(el.StreamNotFoundError):
            store.fork("missing", "f", 1)
        with pytest.raises(el.StreamExistsError):
            store.fork("p", "other", 1)
        store.fork("p", "f")
        with pytest.raises(el.StreamExistsError):
            store.fork("p", "f", 1)
        assert store.stream_info("f").last_seq == 3

    def test_fork_copies_nothing(self, store: el.Store) -> None:
        store.append("p", text_events(50))
        head = store.head_position()
        store.fork("p", "f", 50)
        assert store.head_position() == head
        assert len(list(store.read_all())) == 50

    # -- verify ----------------------------------------------------------------------------

    def test_verify_passes(self, store: el.Store) -> None:
        store.append("a", text_events(5))
        store.append("b", [el.Event(data=el.Checkpoint(label="x"), meta={"k": 1})])
        report = store.verify()
        assert report.ok and report.events == 6 and report.streams == 2

    def test_verify_detects_altered_event(self, store: el.Store) -> None:
        store.append("a", text_events(5))
        store.append("b", text_events(2))
        self.tamper(store, "a", 3)
        report = store.verify()
        assert not report.ok
        (problem,) = report.problems
        assert problem.stream == "a" and problem.seq == 3
        assert store.verify("b").ok

    def test_verify_of_a_fork_checks_the_history_it_inherits(self, store: el.Store) -> None:
        """A fork's history is its ancestors' events up to each fork point, then its own:
        verifying the fork alone catches an edit there, and not one after the fork point."""
        store.append("a", text_events(6))
        store.fork("a", "f", at_seq=4)
        store.fork("f", "g", at_seq=3)
        store.append("g", text_events(2, "g"))
        report = store.verify("g")
        assert report.ok and report.events == 5 and report.streams == 1, report
        self.tamper(store, "a", 5)  # past both fork points: not in g's history
        assert store.verify("g").ok
        assert not store.verify("a").ok
        self.tamper(store, "a", 2)
        (problem,) = store.verify("g").problems
        assert (problem.stream, problem.seq) == ("a", 2)

    # -- concurrency -----------------------------------------------------------------------

    def test_threads_racing_on_expected_seq(self, store: el.Store) -> None:
        n_threads, rounds = 6, 15
        barrier = threading.Barrier(n_threads)
        wins: list[list[str]] = [[] for _ in range(rounds)]
        losses = [0] * rounds
        lock = threading.Lock()

        def worker(t: int) -> None:
            for r in range(rounds):
                barrier.wait()
                ev = el.Event(data=el.ModelInput.from_text(f"r{r}t{t}"))
                try:
                    store.append("race", [ev], expected_seq=r)
                except el.ConcurrencyError:
                    with lock:
                        losses[r] += 1
                else:
                    with lock:
                        wins[r].append(ev.id)
                barrier.wait()

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert all(len(w) == 1 for w in wins), wins
        assert all(n == n_threads - 1 for n in losses)
        stored = list(store.read("race"))
        assert [e.seq for e in stored] == list(range(1, rounds + 1))
        assert [e.id for e in stored] == [w[0] for w in wins]
        assert store.verify().ok

    def test_threads_appending_any_lose_nothing(self, store: el.Store) -> None:
        ids = concurrent_single_appends(store, 4, 25, lambda t, i: "shared" if i % 2 else f"own{t}")
        stored = [e.id for e in store.read_all()]
        assert sorted(stored) == sorted(ids)
        shared = list(store.read("shared"))
        assert [e.seq for e in shared] == list(range(1, len(shared) + 1))
        assert store.verify().ok

    def test_subscription_delivers_everything_once_in_order(self, store: el.Store) -> None:
        store.append("before", text_events(5, "b"))
        n_writers, per = 4, 30
        total = 5 + n_writers * per
        seen: list[el.RecordedEvent] = []
        sub = store.subscribe(after=0)

        def consume() -> None:
            for event in sub:
                seen.append(event)
                if len(seen) >= total:
                    sub.close()

        consumer = threading.Thread(target=consume)
        consumer.start()

        def writer(w: int) -> None:
            for i in range(per):
                stream = "shared" if i % 3 == 0 else f"w{w}"
                store.append(stream, text_events(1, f"w{w}-{i}-"))

        writers = [threading.Thread(target=writer, args=(w,)) for w in range(n_writers)]
        for th in writers:
            th.start()
        for th in writers:
            th.join()
        consumer.join(timeout=30)
        sub.close()
        assert not consumer.is_alive()
        positions = [e.position for e in seen]
        assert positions == sorted(set(positions))
        assert [e.id for e in seen] == [e.id for e in store.read_all()]
        assert len(seen) == total

    def test_subscription_from_a_position_and_poll(self, store: el.Store) -> None:
        store.append("s", text_events(4))
        sub = store.subscribe(after=2)
        assert [e.seq for e in sub.poll()] == [3, 4]
        assert sub.poll(timeout=0.05) == []
        threading.Timer(0.05, lambda: store.append("s", text_events(1, "late"))).start()
        late = sub.poll(timeout=5)
        assert texts_of(late) == ["late0"] and sub.position == 5
        sub.close()
        assert list(sub) == []

    # -- blobs, snapshots, lifecycle -------------------------------------------------------

    def test_blobs(self, store: el.Store) -> None:
        backend = store.backend
        assert backend.get_blob("k") is None
        backend.put_blob("k", b"\x00value")
        backend.put_blob("k", b"value2")
        assert backend.get_blob("k") == b"value2"

    def test_snapshots(self, store: el.Store) -> None:
        b = store.backend
        assert b.load_snapshot("s", "state", 1, None) is None
        b.save_snapshot("s", "state", 1, 10, b"ten")
        b.save_snapshot("s", "state", 1, 20, b"twenty")
        b.save_snapshot("s", "state", 2, 30, b"v2")
        b.save_snapshot("t", "state", 1, 40, b"other stream")
        assert b.load_snapshot("s", "state", 1, None) == (20, b"twenty")
        assert b.load_snapshot("s", "state", 1, 19) == (10, b"ten")
        assert b.load_snapshot("s", "state", 1, 5) is None
        assert b.load_snapshot("s", "state", 2, None) == (30, b"v2")
        b.save_snapshot("s", "state", 1, 20, b"twenty again")
        assert b.load_snapshot("s", "state", 1, None) == (20, b"twenty again")
        b.delete_snapshot("s", "state", 1, 20)
        assert b.load_snapshot("s", "state", 1, None) == (10, b"ten")

    def test_snapshot_seqs(self, store: el.Store) -> None:
        b = store.backend
        assert b.snapshot_seqs("s", "state", 1) == []
        for seq in (300, 7, 1000, 20):
            b.save_snapshot("s", "state", 1, seq, b"x%d" % seq)
        b.save_snapshot("s", "state", 2, 5, b"other version")
        b.save_snapshot("s", "stats", 1, 6, b"other projection")
        b.save_snapshot("s2", "state", 1, 8, b"other stream")
        assert b.snapshot_seqs("s", "state", 1) == [7, 20, 300, 1000]
        assert b.snapshot_seqs("s", "state", 2) == [5]
        assert b.snapshot_seqs("s", "stats", 1) == [6]
        assert b.snapshot_seqs("s2", "state", 1) == [8]
        b.delete_snapshot("s", "state", 1, 20)
        assert b.snapshot_seqs("s", "state", 1) == [7, 300, 1000]

    def test_snapshots_of_long_stream_and_projection_names(self, store: el.Store) -> None:
        """The longest stream name (200 characters, 400 bytes of UTF-8) with a long projection
        name: LMDB's 511-byte keys once refused it as damage (found in review)."""
        b = store.backend
        stream, other = "é" * 200, "é" * 199 + "e"
        name = "projection-" + "ü" * 120
        b.save_snapshot(stream, name, 1, 5, b"five")
        b.save_snapshot(stream, name, 1, 9, b"nine")
        b.save_snapshot(other, name, 1, 7, b"other stream")
        b.save_snapshot(stream, name + "x", 1, 8, b"other name")
        assert b.load_snapshot(stream, name, 1, None) == (9, b"nine")
        assert b.load_snapshot(stream, name, 1, 6) == (5, b"five")
        assert b.snapshot_seqs(stream, name, 1) == [5, 9]
        assert b.snapshot_seqs(other, name, 1) == [7]
        b.delete_snapshot(stream, name, 1, 9)
        assert b.snapshot_seqs(stream, name, 1) == [5]

    def test_closed_store_refuses_calls(self, fresh_url: FreshURL) -> None:
        store = el.open(fresh_url())
        store.append("s", text_events(1))
        store.close()
        store.close()
        with pytest.raises(el.StoreClosedError):
            store.append("s", text_events(1))
        with pytest.raises(el.StoreClosedError):
            list(store.read("s"))

    def test_a_read_begun_before_close_ends_with_the_store(self, fresh_url: FreshURL) -> None:
        """Pages not yet read when the store closes are refused, on every backend alike."""
        store = el.open(fresh_url())
        store.append("s", text_events(2500))
        events, everything = store.read("s"), store.read_all()
        assert next(events).seq == 1 and next(everything).position == 1
        store.close()
        for rest in (events, everything):
            with pytest.raises(el.StoreClosedError):
                list(rest)

    def test_a_forked_child_must_open_the_store_again(self, fresh_url: FreshURL) -> None:
        """A store inherited across os.fork() refuses every call in the child (UsageError), and
        closing it there leaves the parent's store alone. On disk, a store the child opens itself
        works, and the parent sees what it appended."""
        url = fresh_url()
        store = el.open(url)
        store.append("s", text_events(1))
        durable = store.backend.durable
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report through the pipe, and never return into pytest
            try:
                try:
                    store.append("s", text_events(1))
                    outcome = "appended"
                except el.UsageError:
                    outcome = "refused"
                store.close()
                if durable:
                    with el.open(url) as own:
                        own.append("s", text_events(1, "child"))
                os.write(write_fd, outcome.encode())
            finally:
                os._exit(0)
        os.close(write_fd)
        os.waitpid(pid, 0)
        with os.fdopen(read_fd, "rb") as pipe:
            assert pipe.read() == b"refused"
        store.append("s", text_events(1, "parent"))
        expected = ["m0", "child0", "parent0"] if durable else ["m0", "parent0"]
        assert texts_of(store.read("s")) == expected
        store.close()

    def test_async_api(self, fresh_url: FreshURL) -> None:
        async def scenario() -> list[int]:
            async with el.open_async(fresh_url(), durability="none") as store:
                await asyncio.gather(
                    *(store.append(f"s{i % 2}", text_events(2, f"a{i}-")) for i in range(6))
                )
                await store.fork("s0", "f", 2)
                got = []
                async for event in store.subscribe(after=0):
                    got.append(event.position)
                    if len(got) == 12:
                        break
                assert len(await store.read("s0")) == 6
                assert len([e async for e in store.iter("s1")]) == 6
                assert len(await store.read_last("f", 1)) == 1
                assert (await store.verify()).ok
                assert len(await store.read_all()) == 12 == await store.head_position()
                assert (await store.get("f", 2)).seq == 2
                assert await store.exists("f") and await store.ancestry("f") == [("s0", 2)]
                with pytest.raises(el.ValidationError):
                    store.iter("bad\nname", 2, 1)  # at the call, as read does
                with pytest.raises(el.ValidationError):
                    store.iter("s0", 0)
                ticks: list[int] = []
                report = await store.verify(progress=ticks.append, upto=6)
                assert report.ok and report.events == 6 and ticks
                assert store.location and store.backend is store.sync.backend
                assert store.codec is store.sync.codec and not store.closed
                return got

        assert asyncio.run(scenario()) == list(range(1, 13))

    # -- model-based -----------------------------------------------------------------------

    def test_state_machine_against_reference_model(self, fresh_url: FreshURL) -> None:
        run_state_machine_as_test(
            lambda: StoreMachine(fresh_url),
            settings=settings(max_examples=15, stateful_step_count=25, deadline=None),
        )


class StoreMachine(RuleBasedStateMachine):
    """Appends, forks and reads checked against a dict-of-lists reference model."""

    streams = Bundle("streams")

    def __init__(self, fresh_url: FreshURL) -> None:
        super().__init__()
        self.store = el.open(fresh_url(), durability="none")
        self.model: dict[str, list[str]] = {}
        self.log: list[str] = []
        self.counter = 0

    @initialize(target=streams)
    def first_stream(self) -> str:
        self._append("s0", 1)
        return "s0"

    def _append(self, stream: str, n: int) -> list[el.RecordedEvent]:
        batch = text_events(n, f"e{self.counter}-")
        self.counter += 1
        out = self.store.append(stream, batch, expected_seq=len(self.model.get(stream, [])))
        self.model.setdefault(stream, []).extend(e.id for e in batch)
        self.log.extend(e.id for e in batch)
        return out

    @rule(target=streams, name=st.sampled_from(["s1", "s2", "s3"]), n=st.integers(1, 3))
    def new_stream(self, name: str, n: int) -> str:
        if name in self.model:
            with pytest.raises(el.ConcurrencyError):
                self.store.append(name, text_events(1), expected_seq=el.NO_STREAM)
        else:
            self._append(name, n)
        return name

    @rule(stream=streams, n=st.integers(1, 4))
    def append(self, stream: str, n: int) -> None:
        self._append(stream, n)

    @rule(stream=streams, wrong=st.integers(1, 5))
    def stale_append(self, stream: str, wrong: int) -> None:
        expected = len(self.model[stream]) + wrong
        with pytest.raises(el.ConcurrencyError):
            self.store.append(stream, text_events(1), expected_seq=expected)

    @rule(target=streams, source=streams, data=st.data())
    def fork(self, source: str, data: st.DataObject) -> str:
        name = f"f{self.counter}"
        self.counter += 1
        at = data.draw(st.integers(1, len(self.model[source])))
        self.store.fork(source, name, at)
        self.model[name] = self.model[source][:at]
        return name

    @precondition(lambda self: bool(self.model))
    @rule(stream=streams, data=st.data())
    def read_range(self, stream: str, data: st.DataObject) -> None:
        ids = self.model[stream]
        first = data.draw(st.integers(1, len(ids) + 1))
        last = data.draw(st.integers(first - 1, len(ids) + 1))
        got = [e.id for e in self.store.read(stream, first, last)]
        assert got == ids[first - 1 : last]
        back = [e.id for e in self.store.read(stream, first, last, backwards=True)]
        assert back == ids[first - 1 : last][::-1]

    @rule(stream=streams, n=st.integers(1, 5))
    def read_last(self, stream: str, n: int) -> None:
        assert [e.id for e in self.store.read_last(stream, n)] == self.model[stream][-n:]

    @invariant()
    def whole_store_matches(self) -> None:
        assert [e.id for e in self.store.read_all()] == self.log
        infos = {i.stream: i.last_seq for i in self.store.streams()}
        assert infos == {s: len(ids) for s, ids in self.model.items()}

    def teardown(self) -> None:
        assert self.store.verify().ok
        self.store.close()


class DurableContract(BackendContract):
    """Extra behaviour of backends whose data outlives the process."""

    def test_reopen_after_close(self, fresh_url: FreshURL) -> None:
        url = fresh_url()
        with el.open(url) as store:
            store.append("p", text_events(3, "p"))
            store.fork("p", "f", 2)
            store.append("f", text_events(1, "f"))
            store.backend.put_blob("dict", b"blob")
            store.backend.save_snapshot("p", "state", 1, 3, b"snap")
            head = store.head_position()
        with el.open(url) as store:
            assert texts_of(store.read("p")) == ["p0", "p1", "p2"]
            assert texts_of(store.read("f")) == ["p0", "p1", "f0"]
            assert store.head_position() == head
            assert store.backend.get_blob("dict") == b"blob"
            assert store.backend.load_snapshot("p", "state", 1, None) == (3, b"snap")
            store.append("p", text_events(1, "again"), expected_seq=3)
            assert store.verify().ok

    def test_poll_sees_another_writer_within_the_poll_interval(self, fresh_url: FreshURL) -> None:
        """A commit by another store object (as by another process) ends `poll(timeout)` within
        the poll interval, not at the timeout."""
        url = fresh_url()
        with el.open(url) as reader, el.open(url) as writer:
            writer.append("s", text_events(1))
            sub = reader.subscribe(after=reader.head_position())
            threading.Timer(0.2, lambda: writer.append("s", text_events(1, "late"))).start()
            started = time.monotonic()
            late = sub.poll(timeout=10)
            assert texts_of(late) == ["late0"]
            assert time.monotonic() - started < 5  # 10 s before the fix

    def test_closing_the_store_ends_its_subscriptions_quietly(self, fresh_url: FreshURL) -> None:
        store = el.open(fresh_url())
        store.append("s", text_events(1))
        seen: list[object] = []

        def follow() -> None:
            try:
                seen.extend(e.seq for e in store.subscribe())
            except BaseException as exc:  # pragma: no cover - the failure reported below
                seen.append(exc)

        follower = threading.Thread(target=follow)
        follower.start()
        assert wait_for(lambda: seen == [1])
        store.close()
        follower.join(10)
        assert not follower.is_alive() and seen == [1]

        async def consume() -> list[int]:
            async with el.open_async(fresh_url()) as astore:
                await astore.append("s", text_events(1))
                got: list[int] = []

                async def read() -> None:
                    async for event in astore.subscribe():
                        got.append(event.seq)

                task = asyncio.create_task(read())
                await asyncio.sleep(0.2)
                await astore.close()
                await asyncio.wait_for(task, 10)  # ends; no StoreClosedError
                return got

        assert asyncio.run(consume()) == [1]

    def test_two_store_objects_see_each_other(self, fresh_url: FreshURL) -> None:
        url = fresh_url()
        with el.open(url) as a, el.open(url) as b:
            a.append("s", text_events(2))
            assert texts_of(b.read("s")) == ["m0", "m1"]
            b.append("s", text_events(1, "b"), expected_seq=2)
            with pytest.raises(el.ConcurrencyError):
                a.append("s", text_events(1, "stale"), expected_seq=2)
            a.append("s", text_events(1, "a"), expected_seq=3)
            assert [e.seq for e in b.read("s")] == [1, 2, 3, 4]
            sub = b.subscribe()
            assert len(sub.poll()) == 4

    @pytest.mark.slow
    def test_crash_harness(self, fresh_url: FreshURL) -> None:
        from tests.crash import run_crash_rounds

        run_crash_rounds(fresh_url(), rounds=4)
