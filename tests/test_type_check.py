"""`eventlog.type_check`: whenever the quick check says a payload decodes, the decoder agrees.

The check lets append skip the typed decode that proves a payload can be read back. A yes that
the decoder would contradict would let an unreadable event be acknowledged, so the check is
tested against the decoder itself, in both formats, on valid payloads with one field of one
nested record set to a value of another type.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import uuid
import zoneinfo
from typing import Annotated, Any, Literal

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eventlog as el
from eventlog.events import registered_event_types
from eventlog.json_exact import NotJSON
from eventlog.json_exact import checker as json_checker
from eventlog.round_trip import differs
from eventlog.type_check import fast_check, validating_post_init
from tests.contract import Bounded
from tests.strategies import event_data

ODD_VALUES: list[Any] = [
    None,
    0,
    -1,
    2**63,
    2**64,
    -(2**63) - 1,
    True,
    1.5,
    float("nan"),
    "",
    "text",
    "success",
    b"raw",
    bytearray(b"raw"),
    [],
    ["x"],
    [1],
    (),
    ("x",),
    (1,),
    {},
    {"k": 1},
    {1: "v"},
    el.TextPart(text="t"),
    el.Section(text="s"),
    el.ToolCall(id="c", name="n", raw_arguments="{}"),
    el.Usage(),
    el.Invocation(provider="p", specification="s", model="m"),
    el.Checkpoint(label="x"),
    uuid.UUID(int=1),
    datetime.datetime(2026, 1, 1),
    decimal.Decimal("1.5"),
    {"k": uuid.UUID(int=2)},
    [b"x"],
    ("t", 1.5),
]


def _records(value: Any) -> list[msgspec.Struct]:
    """Every Struct inside a payload, the payload first."""
    found: list[msgspec.Struct] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, msgspec.Struct):
            found.append(item)
            stack.extend(getattr(item, f) for f in item.__struct_fields__)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return found


def _agrees(payload: el.EventData) -> None:
    """If the check says yes, both formats' typed decoders read the payload back unchanged."""
    check = fast_check(type(payload))
    assert check is not None
    vouched = check(payload)
    for fmt in (msgspec.msgpack, msgspec.json):
        try:
            encoded = fmt.encode(payload)
        except (TypeError, ValueError, OverflowError):
            continue  # append refuses it before the check
        if not vouched:
            continue
        try:
            decoded = fmt.decode(encoded, type=type(payload))
        except msgspec.ValidationError as exc:
            pytest.fail(f"check said yes, {fmt.__name__} decode says {exc}: {payload!r}")
        if fmt is msgspec.json and json_checker(type(payload)) is not None:
            try:
                json_checker(type(payload))(payload)  # type: ignore[misc]
            except NotJSON:
                continue  # a JSON store refuses it before the check
            except (TypeError, AttributeError, IndexError, KeyError):
                pass  # the JSON check trips on a wrong type: the store goes on to this check
        where = differs(payload, decoded)
        assert where is None, f"check said yes, {fmt.__name__} reads back changed: {where}"


@settings(max_examples=400)
@given(event_data, st.data())
def test_a_yes_is_never_contradicted_by_the_decoder(
    data: el.EventData, draw: st.DataObject
) -> None:
    assert fast_check(type(data)) is not None
    assert fast_check(type(data))(data)  # type: ignore[misc]  # valid payloads: the fast path
    _agrees(data)
    record = draw.draw(st.sampled_from(_records(data)), label="record")
    field = draw.draw(st.sampled_from(record.__struct_fields__), label="field")
    odd = draw.draw(st.sampled_from(ODD_VALUES), label="value")
    if isinstance(odd, (list, dict, bytearray)):
        odd = type(odd)(odd)  # a copy per example
    msgspec.structs.force_setattr(record, field, odd)
    _agrees(data)


def test_every_built_in_kind_has_a_check() -> None:
    for tag, cls in registered_event_types().items():
        if cls.__module__.startswith("eventlog"):
            assert fast_check(cls) is not None, tag


Wide = msgspec.defstruct(
    "Wide", [(f"f{i}", "str | None", None) for i in range(30)], frozen=True, kw_only=True
)
"""A record whose check is too long to inline: checked by a function of its own."""


@el.register_event_type
class Shapes(el.EventData, frozen=True, tag="tests.type_check.shapes"):
    """Plain types in the shapes the check knows."""

    ratio: float = 0.0
    flags: list[bool] = msgspec.field(default_factory=list)
    status: Literal["a", "b", 3] = "a"
    table: dict[str, list[int]] = msgspec.field(default_factory=dict)
    part: el.TextPart | el.RefusalPart | None = None
    blob: bytes | None = None
    described: Annotated[str, msgspec.Meta(description="no constraint")] = ""
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    anything: Any = None
    wide: Wide | None = None  # type: ignore[valid-type]
    wides: tuple[Wide, ...] = ()  # type: ignore[valid-type]


@pytest.mark.parametrize(
    ("value", "vouched"),
    [
        (Shapes(), True),
        (Shapes(ratio=1), False),  # an int reads back as a float: left to the decoder
        (Shapes(flags=[True, 1]), False),  # type: ignore[list-item]
        (Shapes(flags=(True,)), False),  # type: ignore[arg-type]  # a tuple in a list field
        (Shapes(status="c"), False),  # type: ignore[arg-type]
        (Shapes(status=3), True),
        (Shapes(status=True), False),  # type: ignore[arg-type]  # True == 1, but not a Literal 3
        (Shapes(table={"k": [1, 2**64]}), False),
        (Shapes(table={"k": [1, 2]}), True),
        (Shapes(part=el.RefusalPart(text="no")), True),
        (Shapes(part=el.Section(text="s")), False),  # type: ignore[arg-type]
        (Shapes(part=el.TextPart(text=1)), False),  # type: ignore[arg-type]
        (Shapes(blob=bytearray(b"x")), False),  # type: ignore[arg-type]
        (Shapes(described=b"x"), False),  # type: ignore[arg-type]
        (Shapes(extra={"a": "x", "b": 1, "c": None, "d": 1.5, "e": True, "f": [{"g": 1}]}), True),
        (Shapes(extra={"a": "x", "b": 2**64}), False),
        (Shapes(extra={"a": "x", 1: "y"}), False),
        (Shapes(extra={"a": {"b": [uuid.UUID(int=1)]}}), False),
        (Shapes(anything=["x", {"y": [1]}]), True),
        # A tuple in an untyped place reads back as an equal list: decoded, so that an append
        # returns what reads return.
        (Shapes(anything=("x", {"y": [1]})), False),
        (Shapes(anything=["x", {"y": (1,)}]), False),
        (Shapes(anything=b"x"), False),
        (Shapes(wide=Wide(f29="z"), wides=(Wide(), Wide(f0="a"))), True),
        (Shapes(wide=Wide(f29=1)), False),
        (Shapes(wides=(Wide(), Wide(f3=b"x"))), False),
        (Shapes(wides=(el.Section(text="s"),)), False),
    ],
)
def test_shapes(value: Shapes, vouched: bool) -> None:
    check = fast_check(Shapes)
    assert check is not None and check(value) is vouched
    _agrees(value)


@el.register_event_type
class Recursive(el.EventData, frozen=True, tag="tests.type_check.recursive"):
    children: tuple[Recursive, ...] = ()


@dataclasses.dataclass
class Point:
    x: int


@el.register_event_type
class WithDataclass(el.EventData, frozen=True, tag="tests.type_check.dataclass"):
    point: Point | None = None


def test_types_left_to_the_decoder() -> None:
    """Constraints, recursion and other types: no check, so every payload is decoded."""
    assert fast_check(Bounded) is None  # Meta(ge=0)
    assert fast_check(Recursive) is None
    assert fast_check(WithDataclass) is None


def test_a_store_still_refuses_what_the_check_leaves_to_the_decoder(tmp_path: Any) -> None:
    with el.open(f"sqlite:///{tmp_path}/s.db") as store:
        with pytest.raises(el.ValidationError, match=r"\$\.flags\[1\]"):
            store.append("s", [Shapes(flags=[True, 1])])  # type: ignore[list-item]
        store.append("s", [Shapes(ratio=1)])  # decoded, and fine
        assert [e.data for e in store.read("s")] == [Shapes(ratio=1.0)]


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Perm(enum.Flag):
    R = 1
    W = 2


class TaggedUUID(uuid.UUID):
    """A UUID subclass: reads back as a plain UUID, so the check leaves it to the decoder."""


class LaterDatetime(datetime.datetime):
    """A datetime subclass (as libraries like pendulum make)."""


@el.register_event_type
class Timely(el.EventData, frozen=True, tag="tests.type_check.timely"):
    """The time, id and enum types the check vouches for, as fields and inside containers."""

    at: datetime.datetime = datetime.datetime(2026, 1, 1)
    day: datetime.date = datetime.date(2026, 1, 1)
    clock: datetime.time = datetime.time(12, 0)
    ref: uuid.UUID = uuid.UUID(int=0)
    color: Color = Color.RED
    level: Level = Level.LOW
    history: tuple[datetime.datetime, ...] = ()
    maybe: uuid.UUID | None = None


@el.register_event_type
class WithFlag(el.EventData, frozen=True, tag="tests.type_check.flag"):
    perm: Perm = Perm.R


_UTC = datetime.UTC
_PLUS2 = datetime.timezone(datetime.timedelta(hours=2))
_BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
_ZONE_UTC = zoneinfo.ZoneInfo("UTC")  # the same instant as timezone.utc, another tzinfo
_NOON = datetime.datetime(2026, 3, 29, 12, 0, 0, 123456)


@pytest.mark.parametrize(
    ("value", "vouched"),
    [
        (Timely(), True),
        (Timely(at=_NOON.replace(tzinfo=_UTC), history=(_NOON, _NOON.replace(tzinfo=_UTC))), True),
        (Timely(ref=uuid.uuid4(), maybe=uuid.uuid4(), color=Color.BLUE, level=Level.HIGH), True),
        (Timely(at=datetime.datetime.min, day=datetime.date.max, clock=datetime.time.max), True),
        (Timely(at=_NOON.replace(tzinfo=_PLUS2)), False),  # MessagePack: back in UTC
        (Timely(at=_NOON.replace(tzinfo=_BERLIN)), False),  # JSON: back as a fixed offset
        (Timely(at=_NOON.replace(tzinfo=_ZONE_UTC)), False),  # another tzinfo object
        (Timely(at=_NOON.replace(fold=1)), False),  # fold is not stored
        (Timely(history=(_NOON.replace(tzinfo=_PLUS2),)), False),
        (Timely(at=LaterDatetime(2026, 1, 1)), False),
        (Timely(at=datetime.date(2026, 1, 1)), False),  # type: ignore[arg-type]
        (Timely(day=_NOON), False),  # a datetime is a date, but reads back as another type
        (Timely(clock=datetime.time(12, 0, tzinfo=_UTC)), False),
        (Timely(clock=datetime.time(12, 0, fold=1)), False),
        (Timely(ref=str(uuid.UUID(int=5))), False),  # type: ignore[arg-type]
        (Timely(ref=TaggedUUID(int=5)), False),
        (Timely(maybe=uuid.UUID(int=5).bytes), False),  # type: ignore[arg-type]
        (Timely(color="red"), False),  # type: ignore[arg-type]
        (Timely(level=1), False),  # type: ignore[arg-type]
        (Timely(level=Color.RED), False),  # type: ignore[arg-type]
    ],
)
def test_times_ids_and_enums(value: Timely, vouched: bool) -> None:
    check = fast_check(Timely)
    assert check is not None and check(value) is vouched
    _agrees(value)


def test_flag_enums_are_left_to_the_decoder() -> None:
    assert fast_check(WithFlag) is None  # Perm.R | Perm.W is a value, not a member


_zones = st.sampled_from([None, _UTC, _PLUS2, _BERLIN, _ZONE_UTC])


@settings(max_examples=300)
@given(
    at=st.datetimes(timezones=_zones, allow_imaginary=True),
    day=st.dates(),
    clock=st.times(timezones=st.sampled_from([None, _UTC])),
    fold=st.sampled_from([0, 1]),
    ref=st.uuids(),
)
def test_a_yes_on_times_is_never_contradicted(
    at: datetime.datetime, day: datetime.date, clock: datetime.time, fold: int, ref: uuid.UUID
) -> None:
    value = Timely(at=at.replace(fold=fold), day=day, clock=clock, ref=ref, history=(at,))
    check = fast_check(Timely)
    assert check is not None
    naive_or_utc = at.tzinfo is None or at.tzinfo is _UTC
    if naive_or_utc and not fold and not at.fold and clock.tzinfo is None and not clock.fold:
        assert check(value), "a naive or UTC datetime and a naive time take the fast path"
    _agrees(value)


# -- what a review's fuzzer found (each was a yes the decoder contradicts, or a crash) ----------


class Mode(enum.Enum):
    """Keeps unknown values as pseudo-members, which are no member: decode refuses them."""

    FAST = "fast"

    @classmethod
    def _missing_(cls, value: object) -> Mode:
        made = object.__new__(cls)
        made._name_, made._value_ = f"UNKNOWN_{value}", value
        return made


@el.register_event_type
class WithMode(el.EventData, frozen=True, tag="tests.type_check.mode"):
    mode: Mode = Mode.FAST


def test_an_enum_pseudo_member_is_left_to_the_decoder(tmp_path: Any) -> None:
    check = fast_check(WithMode)
    assert check is not None
    assert check(WithMode(mode=Mode("fast"))) and check(WithMode())
    for odd in (Mode(3), Mode("slow")):
        value = WithMode(mode=odd)
        assert not check(value)
        _agrees(value)
        with el.open(f"sqlite:///{tmp_path}/m.db") as store, pytest.raises(el.ValidationError):
            store.append("s", [value])


# Field names Python rewrites in source (NFKC): generated `v.\ufb01` would read `v.fi`.
Ligature = msgspec.defstruct(
    "Ligature", [("\ufb01", int), ("fi", int)], bases=(el.EventData,), tag="tests.type_check.lig"
)
Micro = msgspec.defstruct(
    "Micro", [("\u00b5s", float)], bases=(el.EventData,), tag="tests.type_check.micro"
)
el.register_event_type(Ligature)
el.register_event_type(Micro)


def test_field_names_python_would_rewrite_are_read_as_written(tmp_path: Any) -> None:
    assert fast_check(Ligature) is None and fast_check(Micro) is None  # left to the decoder
    with el.open(f"jsonl://{tmp_path}/j") as store:
        with pytest.raises(el.ValidationError):
            store.append("s", [Ligature("not an int", 5)])
        with pytest.raises(el.ValidationError, match="NaN|nan"):
            store.append("s", [Micro(float("nan"))])  # JSON would write null
        store.append("s", [Ligature(1, 2), Micro(1.5)])
        assert [e.data for e in store.read("s")] == [Ligature(1, 2), Micro(1.5)]


@validating_post_init
class Pair(msgspec.Struct, frozen=True, kw_only=True):
    """Refuses a list of more than two items: it must see what decode gives it."""

    value: Any = None

    def __post_init__(self) -> None:
        if isinstance(self.value, list) and len(self.value) > 2:
            raise ValueError("at most two list items")


@el.register_event_type
class WithPair(el.EventData, frozen=True, tag="tests.type_check.pair"):
    pair: Pair = msgspec.field(default_factory=Pair)
    loose: Any = None  # no __post_init__ sees this one, but a tuple still reads back a list


def test_a_validating_post_init_sees_lists_where_decode_gives_lists(tmp_path: Any) -> None:
    check = fast_check(WithPair)
    assert check is not None
    assert check(WithPair(pair=Pair(value=[1, 2]), loose=[1, 2, 3]))
    assert not check(WithPair(pair=Pair(value=[1, 2]), loose=(1, 2, 3)))
    value = WithPair(pair=Pair(value=(1, 2, 3)))  # its __post_init__ accepts a tuple
    assert not check(value)
    _agrees(value)
    with el.open(f"sqlite:///{tmp_path}/p.db") as store, pytest.raises(el.ValidationError):
        store.append("s", [value])
