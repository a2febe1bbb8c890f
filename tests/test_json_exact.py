"""What a JSON-format store accepts it reads back unchanged; the rest is refused, naming where.

msgspec writes NaN and infinities as null, and bytes or datetimes in untyped places as strings:
a JSONL store would return something other than what was appended. The checks run only where a
payload class has floats, untyped fields or typed fields JSON writes as strings.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import math
import uuid
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import msgspec
import pytest

import eventlog as el
from eventlog.json_exact import NotJSON, check_untyped, checker
from eventlog.round_trip import differs


def _result(elapsed: float | None) -> el.ToolResult:
    return el.ToolResult(call_id="c1", tool_name="t", content="ok", elapsed_ms=elapsed)


def _call(arguments: dict[str, Any]) -> el.ToolCall:
    return el.ToolCall(id="c1", name="t", raw_arguments="{}", arguments=arguments)


REFUSED: list[tuple[str, el.EventData, dict[str, Any], str, str]] = [
    ("inf elapsed", el.ToolResults(results=(_result(1.5), _result(math.inf))), {}, "data",
     ".results[1].elapsed_ms is inf"),
    ("nan in arguments", el.ModelOutput(tool_calls=(_call({"n": [1, {"z": math.nan}]}),)), {},
     "data", ".tool_calls[0].arguments.n[1].z is nan"),
    ("bytes in custom data", el.Custom(kind="k", data={"raw": b"\x01"}), {}, "data",
     ".data.raw is a bytes"),
    ("bytes in meta", el.ModelInput.from_text("x"), {"raw": b"\x01\x02"}, "meta",
     ".raw is a bytes"),
    ("datetime in meta", el.ModelInput.from_text("x"), {"at": datetime.datetime(2026, 1, 1)},
     "meta", ".at is a datetime"),
    ("uuid in meta", el.ModelInput.from_text("x"), {"id": uuid.UUID(int=1)}, "meta",
     ".id is a UUID"),
    ("nan in meta", el.ModelInput.from_text("x"), {"score": [0.5, -math.inf]}, "meta",
     ".score[1] is -inf"),
]  # fmt: skip


@pytest.mark.parametrize(("data", "meta", "field", "where"), [c[1:] for c in REFUSED],
                         ids=[c[0] for c in REFUSED])  # fmt: skip
def test_a_jsonl_store_refuses_what_json_would_change(
    tmp_path: Path, data: el.EventData, meta: dict[str, Any], field: str, where: str
) -> None:
    with el.open(f"jsonl://{tmp_path}/j") as store:
        store.append("other", [el.ModelInput.from_text("before")])
        with pytest.raises(el.ValidationError) as info:
            store.append("s", [el.Event(data=data, meta=meta)])
        assert info.value.field == field and where in str(info.value)
        assert not store.exists("s") and store.head_position() == 1  # nothing written


MSGPACK_TEXT = {"datetime in meta", "uuid in meta"}
"""MessagePack has no UUID type, nor one for a datetime without a time zone: both are written
as strings, and would read back as such."""


@pytest.mark.parametrize(("name", "data", "meta"), [c[:3] for c in REFUSED],
                         ids=[c[0] for c in REFUSED])  # fmt: skip
def test_a_msgpack_store_keeps_what_it_can_exactly_and_refuses_the_rest(
    tmp_path: Path, name: str, data: el.EventData, meta: dict[str, Any]
) -> None:
    """MessagePack keeps NaN, infinities and bytes: the SQLite store takes them as they are."""
    with el.open(f"sqlite:///{tmp_path}/s.db") as store:
        if name in MSGPACK_TEXT:
            with pytest.raises(el.ValidationError, match=r"meta.*would read back as a str"):
                store.append("s", [el.Event(data=data, meta=meta)])
            assert not store.exists("s")
            return
        store.append("s", [el.Event(data=data, meta=meta)])
        (read,) = store.read("s")
    assert differs(data, read.data) is None
    assert differs(meta, read.meta) is None


ACCEPTED: list[tuple[str, el.EventData, dict[str, Any]]] = [
    ("finite floats", el.ToolResults(results=(_result(0.0), _result(-2.5e300), _result(None))), {}),
    ("json arguments", el.ModelOutput(tool_calls=(_call({"a": [1, "x", None, True, 2.5]}),)), {}),
    ("tuples in meta", el.ModelInput.from_text("x"), {"pair": (1, 2), "nested": {"k": [1.5]}}),
    ("custom json", el.Custom(kind="k", data=[{"a": 1}, "s", 3.25, None]), {"n": -0.0}),
]  # fmt: skip


@pytest.mark.parametrize(("data", "meta"), [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_what_a_jsonl_store_accepts_reads_back_equal(
    tmp_path: Path, data: el.EventData, meta: dict[str, Any]
) -> None:
    with el.open(f"jsonl://{tmp_path}/j") as store:
        store.append("s", [el.Event(data=data, meta=meta)])
    with el.open(f"jsonl://{tmp_path}/j") as store:
        (read,) = store.read("s")
    assert msgspec.json.encode(read.data) == msgspec.json.encode(data)
    assert read.meta == msgspec.json.decode(msgspec.json.encode(meta))


def test_classes_without_floats_or_untyped_fields_are_not_checked() -> None:
    assert checker(el.SystemInstructionSet) is None
    assert checker(el.Compaction) is None
    assert checker(el.ToolResults) is not None
    assert checker(el.ModelInput) is not None  # attachments hold bytes


def test_a_recursive_untyped_value_names_the_path() -> None:
    with pytest.raises(NotJSON) as info:
        check_untyped({"a": [{"b": {"c": (1, {"d": math.nan})}}]})
    assert (
        info.value.at("meta")
        == "meta.a[0].b.c[1].d is nan, which JSON cannot store (it would become null)"
    )


# -- payload shapes a user may register -------------------------------------------------------


class Node(msgspec.Struct, frozen=True):
    value: float
    children: tuple[Node, ...] = ()


@dataclasses.dataclass(frozen=True)
class Point:
    x: float
    y: float


class Tagged(NamedTuple):
    x: float
    tag: Any = None


@dataclasses.dataclass(frozen=True)
class Extra:
    x: float
    extra: Any = None


@el.register_event_type
class Shapes(el.EventData, frozen=True, tag="tests.json_exact.shapes"):
    """Floats and untyped values in the shapes msgspec supports."""

    tree: Node | None = None
    point: Point | None = None
    either: int | list[Any] = 0
    bounded: Annotated[float, msgspec.Meta(ge=-1e300, description="a described float")] = 0.0
    table: dict[str, list[float]] = msgspec.field(default_factory=dict)
    pair: Tagged | int = 0
    record: Extra | int = 0
    unset: float | msgspec.UnsetType = msgspec.UNSET
    values: list[float] = msgspec.field(default_factory=list)
    blob: bytes = b""
    when: datetime.datetime | None = None
    ident: uuid.UUID | None = None
    amount: decimal.Decimal | None = None
    stamps: tuple[datetime.date, ...] = ()


Keyword = msgspec.defstruct(
    "Keyword",
    [("class", float, 0.0)],
    bases=(el.EventData,),
    frozen=True,
    kw_only=True,
    tag="tests.json_exact.keyword",
)
el.register_event_type(Keyword)


SHAPES_REFUSED: list[tuple[str, el.EventData, str]] = [
    ("recursive struct", Shapes(tree=Node(1.0, (Node(2.0), Node(math.nan)))),
     ".tree.children[1].value is nan"),
    ("dataclass field", Shapes(point=Point(0.5, math.inf)), ".point.y is inf"),
    ("union with Any inside", Shapes(either=[1, b"raw"]), ".either[1] is a bytes"),
    ("annotated float", Shapes(bounded=-math.inf), ".bounded is -inf"),
    ("dict of lists", Shapes(table={"k": [1.0, math.nan]}), ".table.k[1] is nan"),
    ("str in a float field", Shapes(point=Point("1.5", 2.0)),  # type: ignore[arg-type]
     ".point.x is a str in a float field"),
    ("huge int in a float field", Shapes(bounded=10**400),  # type: ignore[arg-type]
     ".bounded is an int a float field cannot hold exactly"),
    ("inexact int in a float field", Shapes(bounded=2**53 + 1),
     ".bounded is an int a float field cannot hold exactly"),
    ("named tuple in a union", Shapes(pair=Tagged(1.0, b"raw")), ".pair.tag is a bytes"),
    ("dataclass in a union", Shapes(record=Extra(1.0, {"t": uuid.UUID(int=3)})),
     ".record.extra.t is a UUID"),
    ("keyword field name", Keyword(**{"class": math.nan}), ".class is nan"),
    ("wrong type", Shapes(values=None),  # type: ignore[arg-type]
     "does not match its declared types, so it could not be read back: Expected `array`, got "
     "`null` - at `$.values`"),
    ("wrong type the check trips on", Shapes(table=[1.0]),  # type: ignore[arg-type]
     "Expected `object`, got `array` - at `$.table`"),
    # Typed fields JSON writes as strings parse any string on read: base64, ISO 8601, ...
    ("str in a bytes field", Shapes(blob="abcd"),  # type: ignore[arg-type]
     ".blob is a str in a bytes field, which JSON would read back as another value"),
    ("str in a datetime field", Shapes(when="2026-01-01T00:00:00Z"),  # type: ignore[arg-type]
     ".when is a str in a datetime field"),
    ("str in a uuid field", Shapes(ident=str(uuid.UUID(int=5))),  # type: ignore[arg-type]
     ".ident is a str in a uuid field"),
    ("float in a decimal field", Shapes(amount=0.1),  # type: ignore[arg-type]
     ".amount is a float in a decimal field"),
    ("str in a tuple of dates", Shapes(stamps=(datetime.date(2026, 1, 1), "2026-01-02")),  # type: ignore[arg-type]
     ".stamps[1] is a str in a date field"),
]  # fmt: skip


@pytest.mark.parametrize(("data", "where"), [c[1:] for c in SHAPES_REFUSED],
                         ids=[c[0] for c in SHAPES_REFUSED])  # fmt: skip
def test_every_shape_of_payload_is_checked(tmp_path: Path, data: el.EventData, where: str) -> None:
    with el.open(f"jsonl://{tmp_path}/j") as store:
        with pytest.raises(el.ValidationError) as info:
            store.append("s", [data])
        assert info.value.field == "data" and where in str(info.value)
        assert not store.exists("s")


def test_payload_shapes_that_survive_json_are_accepted(tmp_path: Path) -> None:
    data = Shapes(
        tree=Node(1.0, (Node(2.5, (Node(-0.0),)),)),
        point=Point(1, 2.5),  # an int in a float field reads back as an equal float
        either=[1, "x", {"k": [None, 2.5]}],
        bounded=1e300,
        table={"k": [0.0, 1.5]},
        pair=Tagged(2.5, ["x", 1]),
        record=Extra(0.5, {"k": None}),
        values=[1.0, 2**53],
        blob=b"\x00\xff",
        when=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
        ident=uuid.UUID(int=7),
        amount=decimal.Decimal("0.10"),
        stamps=(datetime.date(2026, 1, 1),),
    )
    meta = {"ordered": collections.OrderedDict(a=1), "counts": collections.defaultdict(int, b=2)}
    with el.open(f"jsonl://{tmp_path}/j") as store:
        store.append("s", [el.Event(data=data, meta=meta)])
    with el.open(f"jsonl://{tmp_path}/j") as store:
        (read,) = store.read("s")
    assert read.data == data and read.meta == {"ordered": {"a": 1}, "counts": {"b": 2}}


def test_a_keyword_field_that_survives_is_accepted(tmp_path: Path) -> None:
    with el.open(f"jsonl://{tmp_path}/j") as store:
        store.append("s", [Keyword(**{"class": 1.5})])
        (read,) = store.read("s")
    assert getattr(read.data, "class") == 1.5


def test_values_too_deep_to_check_are_refused_not_a_crash(tmp_path: Path) -> None:
    """The JSON check's walk cannot take a list 600 deep, and says so (MessagePack stores
    refuse it too: deeper than any reader could be sure to decode)."""
    value: list[Any] = []
    for _ in range(600):
        value = [value]
    with (
        el.open(f"sqlite:///{tmp_path}/s.db") as store,
        pytest.raises(el.ValidationError, match="more than 256 levels"),
    ):
        store.append("s", [el.Custom(kind="deep", data=value)])
    with el.open(f"jsonl://{tmp_path}/j") as store:
        with pytest.raises(el.ValidationError, match="nested too deeply for a JSON store"):
            store.append("s", [el.Custom(kind="deep", data=value)])
        assert not store.exists("s")
