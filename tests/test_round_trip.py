"""What append refuses because it would read back as something else, and what it keeps.

`eventlog.round_trip.differs` is the comparison; the store tests run on every backend, since
MessagePack and JSON change different values (an aware datetime, a NaN, a Raw JSON value).
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import typing
import uuid
import zoneinfo
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

import eventlog as el
from eventlog.round_trip import MAX_NESTING, differs, plain, too_deep
from eventlog.type_check import fast_check

PARIS = zoneinfo.ZoneInfo("Europe/Paris")
PLUS_2 = datetime.timezone(datetime.timedelta(hours=2))


class Point(typing.NamedTuple):
    x: float


class Level(enum.IntEnum):
    HIGH = 1


class Shade(enum.StrEnum):
    DARK = "dark"


@pytest.mark.parametrize(
    ("original", "decoded", "problem"),
    [
        ([1, (2, 3)], (1, [2, 3]), None),
        (Point(float("nan")), Point(float("nan")), None),
        ({2, 1}, frozenset({1, 2}), None),
        (Level.HIGH, 1.0, None),
        (Shade.DARK, "dark", None),
        (bytearray(b"x"), b"x", None),
        (decimal.Decimal("NaN"), decimal.Decimal("NaN"), None),
        (decimal.Decimal("1.50"), decimal.Decimal("1.5"), "would read back as Decimal('1.5')"),
        (uuid.UUID(int=1), str(uuid.UUID(int=1)), "is a UUID, which would read back as a str"),
        ({"1": "a"}, {1: "a"}, "$ key '1' is a str, which would read back as a int"),
        ({"a": [1, {"b": 2.5}]}, {"a": [1, {"b": 2}]}, "$['a'][1]['b'] is a float"),
        (
            datetime.datetime(2026, 7, 1, 12, tzinfo=PLUS_2),
            datetime.datetime(2026, 7, 1, 10, tzinfo=datetime.UTC),
            "would read back as datetime.datetime(2026, 7, 1, 10, 0",
        ),
        (
            datetime.datetime(2026, 10, 25, 2, 30, fold=1, tzinfo=PARIS),
            datetime.datetime(2026, 10, 25, 2, 30, tzinfo=PARIS),
            "would read back",
        ),
        ([1, 2], [1], "$ would read back with 1 items, not 2"),
        (frozenset({1}), frozenset({1.0}), None),  # an int in a float field, in a set
        (frozenset({1.5}), frozenset({1}), "item 1.5 would not read back as itself"),
        (
            {datetime.datetime(2026, 7, 1, 12, tzinfo=PARIS)},
            {datetime.datetime(2026, 7, 1, 12, tzinfo=PLUS_2)},
            "would not read back as itself",
        ),
        (
            datetime.time(9, tzinfo=datetime.timezone(datetime.timedelta(hours=2), "CEST")),
            datetime.time(9, tzinfo=PLUS_2),
            "would read back",
        ),
        (
            {datetime.datetime(2026, 7, 1, 12, tzinfo=PLUS_2)},
            frozenset({datetime.datetime(2026, 7, 1, 12, tzinfo=PLUS_2)}),
            None,
        ),
    ],
)
def test_differs(original: Any, decoded: Any, problem: str | None) -> None:
    found = differs(original, decoded)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


@dataclasses.dataclass(frozen=True)
class Slot:
    """A set item whose repr hides its time."""

    when: datetime.datetime = dataclasses.field(repr=False)


class Opaque:
    """A set item whose repr fails."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    def __hash__(self) -> int:
        return 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque)


def test_set_items_are_compared_as_values_not_by_repr() -> None:
    aware = datetime.datetime(2026, 1, 1, 9, tzinfo=PLUS_2)
    in_utc = datetime.datetime(2026, 1, 1, 7, tzinfo=datetime.UTC)
    assert differs({Slot(aware)}, {Slot(in_utc)}) is not None
    assert differs({Slot(aware)}, {Slot(aware)}) is None
    assert differs({Opaque()}, {Opaque()}) is None
    assert "(<Opaque>)" in str(differs([1], [Opaque()]))


def test_deep_values_are_compared_without_recursion() -> None:
    deep: Any = "leaf"
    for _ in range(50_000):
        deep = [deep]
    assert plain(deep, limit=50_000) and differs(deep, deep) is None
    assert too_deep(deep) and not plain(deep)  # deeper than MAX_NESTING: readers could not


def test_nesting_is_counted_in_levels_of_values() -> None:
    def nest(n: int) -> Any:
        v: Any = 1
        for _ in range(n):
            v = [v]
        return v

    assert plain(nest(MAX_NESTING)) and not plain(nest(MAX_NESTING + 1))
    assert not too_deep(nest(MAX_NESTING)) and too_deep(nest(MAX_NESTING + 1))
    assert not too_deep({"a": nest(MAX_NESTING - 1)}) and too_deep({"a": nest(MAX_NESTING)})
    assert plain([[], {}], limit=1) and not too_deep([[], {}], limit=1)  # empty: no level below
    record = el.Custom(kind="k", data=nest(MAX_NESTING - 1))
    assert not too_deep(record) and too_deep(el.Custom(kind="k", data=(nest(MAX_NESTING),)))


@el.register_event_type
class Times(el.EventData, frozen=True, tag="tests.round_trip.times"):
    when: datetime.datetime | None = None
    at: datetime.time | None = None
    amount: decimal.Decimal | None = None
    ids: frozenset[int] = frozenset()
    ratio: float = 0.0


class Inner(msgspec.Struct):
    """Mutable, with a `__post_init__` that changes what it is given."""

    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name.strip()


@el.register_event_type
class Box(el.EventData, frozen=True, tag="tests.round_trip.box"):
    item: Inner | None = None


class Strict(msgspec.Struct, frozen=True):
    key: str = "k"

    def __post_init__(self) -> None:
        {"k": 1}[self.key]  # raises KeyError for another key


@el.register_event_type
class Holder(el.EventData, frozen=True, tag="tests.round_trip.holder"):
    strict: Strict = msgspec.field(default_factory=Strict)


def _lower(self: Any) -> None:
    msgspec.structs.force_setattr(self, "name", self.name.lower())


Lowered = msgspec.defstruct(
    "Lowered",
    [("name", str)],
    bases=(el.EventData,),
    frozen=True,
    tag="tests.round_trip.lowered",
    namespace={"__post_init__": _lower},
)
"""Frozen, with a `__post_init__` that normalizes (msgspec's idiom for frozen Structs)."""
el.register_event_type(Lowered)


@el.register_event_type
class Blob(el.EventData, frozen=True, tag="tests.round_trip.blob"):
    data: bytes = b""


Dotted = msgspec.defstruct(
    "tool.call.v2", [("n", int, 0)], bases=(el.EventData,), frozen=True, tag="tests.dotted"
)
el.register_event_type(Dotted)


def test_values_that_read_back_changed_are_refused(
    backend_name: str, make_url: Callable[[], str]
) -> None:
    json = backend_name == "jsonl"
    with el.open(make_url()) as store:
        aware = Times(when=datetime.datetime(2026, 7, 1, 12, tzinfo=PLUS_2))
        if json:  # JSON keeps the offset
            store.append("s", [aware])
            assert next(iter(store.read("s"))).data.when.tzinfo == PLUS_2  # type: ignore[attr-defined]
        else:  # MessagePack keeps the instant, in UTC
            with pytest.raises(el.ValidationError, match=r"\$\.when would read back"):
                store.append("s", [aware])
        with pytest.raises(el.ValidationError, match=r"\$\.at would read back"):
            store.append("s", [Times(at=datetime.time(12, tzinfo=PARIS))])
        inner = Inner(name="x")
        box = Box(item=inner)
        inner.name = "  padded  "  # after construction: decode would strip it
        with pytest.raises(el.ValidationError, match=r"\$\.item\.name would read back"):
            store.append("s", [box])
        assert inner.name == "  padded  "  # the check left the caller's value alone
        lowered = Lowered(name="x")
        msgspec.structs.force_setattr(lowered, "name", "ABC")
        with pytest.raises(el.ValidationError, match=r"\$\.name would read back as 'abc'"):
            store.append("s", [lowered])
        assert lowered.name == "ABC"  # type: ignore[attr-defined]
        unset = Inner(name="x")
        del unset.name  # legal on a mutable Struct: the encoder cannot write it
        with pytest.raises(el.ValidationError, match="cannot be encoded"):
            store.append("s", [Box(item=unset)])
        strided = memoryview(b"abcd")[::2]
        with pytest.raises(el.ValidationError, match="data"):
            store.append("s", [Blob(data=strided)])  # type: ignore[arg-type]
        broken = Holder()
        msgspec.structs.force_setattr(broken.strict, "key", "other")
        with pytest.raises(el.ValidationError, match="raised KeyError"):
            store.append("s", [broken])
        with pytest.raises(el.ValidationError, match="causation_id"):
            store.append("s", [el.Event(data=el.Checkpoint(label="x"), causation_id="\ud800")])
        assert [e.seq for e in store.read_all()] == ([1] if json else [])


def test_values_that_read_back_equal_are_kept(make_url: Callable[[], str]) -> None:
    kept = [
        Times(amount=decimal.Decimal("NaN")),
        Times(amount=decimal.Decimal("1.50")),
        Times(ids={1, 2}),  # type: ignore[arg-type]  # a set in a frozenset field
        Times(ratio=Level.HIGH),
        Times(when=datetime.datetime(2026, 7, 1, 12, tzinfo=datetime.UTC)),
        Dotted(n=3),  # a class name that is no identifier
    ]
    with el.open(make_url()) as store:
        store.append("s", kept)
        back = [e.data for e in store.read("s")]
    for original, read in zip(kept, back, strict=True):
        assert differs(original, read) is None


def test_raw_json_with_a_line_break_is_refused_by_jsonl(tmp_path: Any) -> None:
    @el.register_event_type
    class Carrier(el.EventData, frozen=True, tag="tests.round_trip.raw"):
        body: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"null"))

    with el.open(f"jsonl://{tmp_path}/j") as store:
        store.append("s", [Carrier(body=msgspec.Raw(b'{"a":1}'))])
        with pytest.raises(el.ValidationError, match="line break"):
            store.append("s", [Carrier(body=msgspec.Raw(b'{\n  "a": 1\n}'))])
        # In an untyped field of a class the quick check covers: the check says no.
        assert fast_check(el.Custom) is not None
        for value in (msgspec.Raw(b"[1,\n2]"), {"k": [msgspec.Raw(b"{\n}")]}):
            with pytest.raises(el.ValidationError, match="line break|is a Raw"):
                store.append("s", [el.Custom(kind="k", data=value)])
        store.append("s", [el.Checkpoint(label="after")])
        assert [e.seq for e in store.read("s")] == [1, 2]
    assert fast_check(Carrier) is None  # Raw: left to the decoder


def test_only_validating_post_inits_run_in_the_quick_check() -> None:
    assert fast_check(Lowered) is None
    assert fast_check(el.ModelOutput) is not None  # its __post_init__ only raises
