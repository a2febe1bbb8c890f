"""Event kinds: construction rules, schema samples that must keep decoding, upcasting."""

from __future__ import annotations

import enum
from typing import Any

import msgspec
import pytest

import eventlog as el
from eventlog import events
from eventlog.backends.base import Record
from eventlog.codec import Codec
from eventlog.events import event_type, tag_of
from tests.schema_samples import DATA, samples


def _record(tag: str, version: int, data: bytes, codec: int = 0) -> Record:
    return Record("id", "s", 1, 0, tag, version, data, b"", None, None, b"", codec)


@pytest.mark.parametrize("fmt", ["msgpack", "json"])
def test_stored_v1_samples_still_decode(fmt: str) -> None:
    rows = msgspec.msgpack.decode((DATA / f"events_v1.{fmt}").read_bytes())
    codec = Codec(fmt)  # type: ignore[arg-type]
    decoded = [codec.decode_data(_record(tag, version, data)) for tag, version, data in rows]
    assert decoded == samples()
    builtin = {
        tag
        for tag, cls in el.events.registered_event_types().items()
        if cls.__module__ == "eventlog.events"
    }
    assert {el.events.tag_of(type(d)) for d in decoded} == builtin


def test_tool_call_parse_keeps_raw_text_and_records_errors() -> None:
    ok = el.ToolCall.parse("c1", "f", '{"a": 1}')
    assert ok.arguments == {"a": 1} and ok.parse_error is None and ok.raw_arguments == '{"a": 1}'
    bad = el.ToolCall.parse("c2", "f", '{"a": ')
    assert bad.arguments is None and bad.raw_arguments == '{"a": '
    assert bad.parse_error is not None and "invalid JSON" in bad.parse_error
    array = el.ToolCall.parse("c3", "f", "[1]")
    assert array.arguments is None and "not an object" in (array.parse_error or "")
    empty = el.ToolCall.parse("c4", "f", "")
    assert empty.arguments == {} and empty.raw_arguments == ""


@pytest.mark.parametrize(
    "build",
    [
        lambda: el.ModelInput(),
        lambda: el.Attachment(media_type="image/png"),
        lambda: el.Attachment(media_type="image/png", data=b"x", uri="u"),
        lambda: el.Attachment(media_type="png", data=b"x"),
        lambda: el.Compaction(first_seq=5, last_seq=4, summary="s"),
        lambda: el.Compaction(first_seq=0, last_seq=4, summary="s"),
        lambda: el.Checkpoint(label=" "),
        lambda: el.ToolsetDefined(tools=(el.ToolSpec(name="a"), el.ToolSpec(name="a"))),
        lambda: el.ModelOutput(
            tool_calls=(el.ToolCall.parse("x", "f", "{}"), el.ToolCall.parse("x", "g", "{}"))
        ),
    ],
)
def test_invalid_payloads_are_refused_at_construction(build: Any) -> None:
    with pytest.raises(ValueError):
        build()


def test_event_ids_are_uuid7_and_time_ordered() -> None:
    ids = [el.Event(data=el.Checkpoint(label="x")).id for _ in range(100)]
    assert all(el.events.is_event_id(i) and i[14] == "7" for i in ids)
    assert ids == sorted(ids)


def test_register_rejects_conflicts_and_non_events() -> None:
    class Inherited(el.EventData, tag="test.inherited"):
        x: int = 0

    assert Inherited.__struct_config__.frozen  # frozen-ness is inherited from EventData
    with pytest.raises(el.UsageError, match="already registered"):

        @el.register_event_type
        class Clash(el.EventData, frozen=True, tag="checkpoint"):
            label: str

    with pytest.raises(el.UsageError):
        el.register_event_type(int)  # type: ignore[type-var]


class Level(enum.Enum):
    LOW = 0.5


class Unclear(el.EventData, frozen=True, tag="test.unclear"):
    body: bytes | str


class FloatEnum(el.EventData, frozen=True, tag="test.float_enum"):
    level: Level


class Later(el.EventData, frozen=True, tag="test.later"):
    """Names a class defined further down (resolved when first appended)."""

    part: Part | None = None


class Undefined(el.EventData, frozen=True, tag="test.undefined"):
    part: NowhereDefined | None = None  # type: ignore[name-defined]  # noqa: F821


class Part(msgspec.Struct, frozen=True):
    n: int = 0


@pytest.mark.parametrize(("cls", "reason"), [(Unclear, "str-like"), (FloatEnum, "all str")])
def test_a_class_msgspec_cannot_decode_is_refused_when_registered(
    cls: type[el.EventData], reason: str
) -> None:
    with pytest.raises(el.UsageError, match=f"{cls.__name__} cannot be stored: .*{reason}"):
        el.register_event_type(cls)
    assert event_type(tag_of(cls)) is None


def test_a_name_defined_later_is_resolved_on_append(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "_REGISTRY", events.registered_event_types())  # undone after
    el.register_event_type(Later)
    el.register_event_type(Undefined)
    with el.open("memory://") as store:
        assert store.append("s", [Later(part=Part(n=1))])[0].data == Later(part=Part(n=1))
        with pytest.raises(el.ValidationError, match="Undefined cannot be stored: .*Nowhere"):
            store.append("s", [Undefined()])
        assert [e.data for e in store.read("s")] == [Later(part=Part(n=1))]


def test_upcaster_applies_on_read_and_missing_one_is_corruption() -> None:
    @el.register_event_type
    class Renamed(el.EventData, frozen=True, tag="test.renamed"):
        __schema_version__ = 3
        full_name: str
        age: int = 0

    @el.register_upcaster("test.renamed", from_version=1)
    def v1_to_v2(old: dict[str, Any]) -> dict[str, Any]:
        return {"full_name": old["name"], "years": old.get("years", 0)}

    @el.register_upcaster("test.renamed", from_version=2)
    def v2_to_v3(old: dict[str, Any]) -> dict[str, Any]:
        return {"full_name": old["full_name"], "age": old["years"]}

    for fmt, enc in (("msgpack", msgspec.msgpack.encode), ("json", msgspec.json.encode)):
        codec = Codec(fmt)  # type: ignore[arg-type]
        v1 = _record("test.renamed", 1, enc({"type": "test.renamed", "name": "Ada", "years": 36}))
        assert codec.decode_data(v1) == Renamed(full_name="Ada", age=36)
        newer = _record("test.renamed", 4, enc({"full_name": "x"}))
        with pytest.raises(el.SchemaVersionError, match="newer"):
            codec.decode_data(newer)

    @el.register_event_type
    class NoPath(el.EventData, frozen=True, tag="test.nopath"):
        __schema_version__ = 2
        x: int

    with pytest.raises(el.CorruptionError, match="no upcaster"):
        Codec("msgpack").decode_data(_record("test.nopath", 1, msgspec.msgpack.encode({"x": 1})))

    # A damaged old record: read and verify report it, rather than raise what the upcaster hit.
    for fmt, enc in (("msgpack", msgspec.msgpack.encode), ("json", msgspec.json.encode)):
        codec = Codec(fmt)  # type: ignore[arg-type]
        for stored, message in [
            ([1, 2], "at version 1 is a list, not an object"),
            (7, "at version 1 is a int, not an object"),
            ({"type": "test.renamed", "zz": 1}, "from version 1 failed on this record: KeyError"),
            # The upcasters' result, not the stored payload, is what does not fit the class.
            (
                {"name": "Ada", "years": "old"},
                r"upcasters of 'test.renamed' from version 1 made a value that does not match "
                r"Renamed at version 3: Expected `int`, got `str` - at `\$.age`",
            ),
        ]:
            with pytest.raises(el.CorruptionError, match=message) as err:
                codec.decode_data(_record("test.renamed", 1, enc(stored)), "/the/store")
            assert err.value.seq is not None and "/the/store" in str(err.value)


def test_undecodable_records_raise_corruption_naming_place() -> None:
    codec = Codec("msgpack")
    with pytest.raises(el.CorruptionError, match="stream 's', seq 1"):
        codec.decode_data(_record("checkpoint", 1, b"\xc1garbage"))
    with pytest.raises(el.CorruptionError, match="unknown event type"):
        codec.decode_data(_record("nope", 1, b"\x80"))
    with pytest.raises(el.CorruptionError, match="codec 99"):
        codec.decode_data(_record("checkpoint", 1, b"\x80", codec=99))


def test_recorded_event_helpers() -> None:
    with el.open("memory://") as store:
        (rec,) = store.append("s", [el.Checkpoint(label="x")])
    assert rec.type == "checkpoint"
    assert rec.time.tzinfo is not None and abs(rec.time.timestamp() - rec.ts / 1e9) < 1e-3
