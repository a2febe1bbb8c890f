"""Checks that a value survives JSON unchanged: what a JSON-format store (JSONL) can keep.

msgspec writes NaN and the infinities as `null`, and bytes, datetimes, UUIDs and decimals in
untyped places (meta, `Any` fields) as strings: read back, they would differ from what was
appended, and `verify` could not tell. Fields typed as one of those are written as strings too,
and their decoder parses any string it is given: a str in a `bytes` field would read back as
the bytes its base64 spells. So floats, untyped values and string-encoded typed fields are
checked, by a checker built once per payload class from its type; a class with none costs
nothing. Paths are only put together for an error, so a value that passes costs its walk alone.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import keyword
import math
import unicodedata
import uuid
from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import inspect as mi

_INLINE_DEPTH = 4
"""Nested struct classes whose checks are inlined into their container's (deeper: a call)."""

Check = Callable[[Any], None]
"""Raises `NotJSON` at the first part of a value that JSON would change."""

_CLASSED = (mi.StructType, mi.DataclassType, mi.NamedTupleType)
"""Types with named fields whose values are instances of the type's class."""
_RECORDS = (*_CLASSED, mi.TypedDictType)
"""Types with named fields (a TypedDict's values are plain dicts)."""
_ARRAYS = (
    mi.ListType,
    mi.VarTupleType,
    mi.TupleType,
    mi.SetType,
    mi.FrozenSetType,
    mi.NamedTupleType,
)
"""Types encoded as JSON arrays (a union has at most one)."""
_STRINGS: dict[type[mi.Type], tuple[type, ...]] = {
    mi.BytesType: (bytes, bytearray, memoryview),
    mi.ByteArrayType: (bytes, bytearray, memoryview),
    mi.MemoryViewType: (bytes, bytearray, memoryview),
    mi.DateTimeType: (datetime.datetime,),
    mi.DateType: (datetime.date,),
    mi.TimeType: (datetime.time,),
    mi.TimeDeltaType: (datetime.timedelta,),
    mi.UUIDType: (uuid.UUID,),
    mi.DecimalType: (decimal.Decimal,),
}
"""Typed fields JSON stores as strings -> what they must hold: a plain string in one of them
would be parsed on read (base64, ISO 8601, ...) into another value."""


class NotJSON(ValueError):
    """A value JSON would store as something else; `path` says where, once complete."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what
        self.steps: list[str] = []

    def at(self, root: str) -> str:
        """The message with the full path from `root`."""
        where = root + "".join(reversed(self.steps))
        return f"{where} {self.what}" if where else self.what


def check_untyped(value: Any) -> None:
    """A value of no declared type: str, int, bool, None, finite float, lists, str-keyed dicts."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return
    if kind is float:
        check_float(value)
    elif isinstance(value, dict):
        _untyped_dict(value)
    elif isinstance(value, (list, tuple)):
        _untyped_items(value)
    elif not isinstance(value, (str, int)):
        raise NotJSON(f"is a {kind.__name__}, which JSON would store as another type")


def _untyped_dict(value: dict[Any, Any]) -> None:
    for key, item in value.items():
        if not isinstance(key, str):
            raise NotJSON(f"has a {type(key).__name__} key; JSON keys are strings")
        if type(item) is not str:
            try:
                check_untyped(item)
            except NotJSON as exc:
                exc.steps.append(f".{key}")
                raise


def _untyped_items(value: list[Any] | tuple[Any, ...]) -> None:
    for i, item in enumerate(value):
        if type(item) is not str:
            try:
                check_untyped(item)
            except NotJSON as exc:
                exc.steps.append(f"[{i}]")
                raise


def check_float(value: Any) -> None:
    """A value of a float field: a finite float, or an int a float can hold."""
    kind = type(value)
    if kind is float:
        if not math.isfinite(value):
            raise NotJSON(f"is {value!r}, which JSON cannot store (it would become null)")
        return
    if isinstance(value, int) and kind is not bool:
        try:
            exact = float(value) == value
        except OverflowError:
            exact = False
        if not exact:
            raise NotJSON(
                "is an int a float field cannot hold exactly (it would read back changed)"
            )
        return
    raise NotJSON(f"is a {kind.__name__} in a float field, which would not read back")


@functools.cache
def checker(cls: type) -> Check | None:
    """The check for a record class's instances, or None when nothing in them can change.

    A record class is a Struct, a dataclass or a NamedTuple. Its check is code generated from
    the class's fields, one statement per float or untyped field and one loop per container of
    them: a payload that passes costs little more than its walk.
    """
    info = mi.type_info(cls)
    if not isinstance(info, _CLASSED) or not _needs(info, set()):
        return None
    return _compile(info, frozenset({cls}), root_fields=True)


def _compile(t: mi.Type, seen: frozenset[type], *, root_fields: bool = False) -> Check:
    """Generate the check of a value of type `t` (its fields' checks for a record root)."""
    helpers: list[Check] = []
    lines = ["def check(value):"]
    if root_fields:
        _emit_fields(lines, t, "value", 1, seen, helpers)
    else:
        _emit(lines, t, "value", "", 1, seen, helpers)
    if len(lines) == 1:
        lines.append("    pass")
    names: dict[str, Any] = {
        "NotJSON": NotJSON,
        "UNSET": msgspec.UNSET,
        "isfinite": math.isfinite,
        "check_float": check_float,
        "check_untyped": check_untyped,
        "check_record": _check_record,
        "helpers": helpers,
    }
    exec("\n".join(lines), names)  # code built from field names and types
    built: Check = names["check"]
    return built


def _emit_fields(
    lines: list[str],
    t: mi.Type,
    var: str,
    depth: int,
    seen: frozenset[type],
    helpers: list[Check],
) -> None:
    """Statements checking the fields of record `var` that hold floats or untyped values."""
    pad = "    " * depth
    keyed = isinstance(t, mi.TypedDictType)
    for field in getattr(t, "fields", ()):
        if not _needs(field.type, set()):
            continue
        name, key, at, inner = f"f{depth}", field.name, pad, depth + 1
        if keyed:  # a missing key reads back missing; a present one must survive
            lines.append(f"{pad}if {key!r} in {var}:")
            at, inner = pad + "    ", depth + 2
            lines.append(f"{at}{name} = {var}[{key!r}]")
        elif attribute_name(key):
            lines.append(f"{at}{name} = {var}.{key}")
        else:
            lines.append(f"{at}{name} = getattr({var}, {key!r})")
        # msgspec.UNSET is left out of the encoding: nothing to check
        lines.append(f"{at}if {name} is not UNSET:")
        _emit(lines, field.type, name, f".{key}", inner, seen, helpers)


def _emit(
    lines: list[str],
    t: mi.Type,
    var: str,
    step: str,
    depth: int,
    seen: frozenset[type],
    helpers: list[Check],
) -> None:
    """Append statements checking `var` of declared type `t`; an error adds `step` to its path."""
    t = _unwrap(t)
    pad = "    " * depth
    if isinstance(t, mi.UnionType):
        kinds = [x for x in t.types if not isinstance(_unwrap(x), mi.NoneType)]
        if len(kinds) == 1:  # Optional[...]
            lines.append(f"{pad}if {var} is not None:")
            _emit(lines, kinds[0], var, step, depth + 1, seen, helpers)
            return
    lines.append(f"{pad}try:")
    lines.extend(_body(t, var, depth, seen, helpers) or [f"{pad}    pass"])
    lines.append(f"{pad}except NotJSON as exc:")
    lines.append(f"{pad}    exc.steps.append({step!r})")
    lines.append(f"{pad}    raise")


def _body(
    t: mi.Type, var: str, depth: int, seen: frozenset[type], helpers: list[Check]
) -> list[str]:
    """The statements of `_emit`'s try block (one level deeper than `depth`)."""
    pad = "    " * (depth + 1)
    inner = f"v{depth}"
    if isinstance(t, mi.FloatType):
        return [f"{pad}if type({var}) is not float or not isfinite({var}): check_float({var})"]
    if isinstance(t, mi.AnyType):
        return [f"{pad}if type({var}) is not str: check_untyped({var})"]
    kinds = _STRINGS.get(type(t))
    if kinds is not None:
        helpers.append(_instance_check(kinds, type(t).__name__.removesuffix("Type").lower()))
        return [f"{pad}helpers[{len(helpers) - 1}]({var})"]
    if isinstance(t, mi.UnionType):
        helpers.append(_union_check(t, seen))
        return [f"{pad}helpers[{len(helpers) - 1}]({var})"]
    if isinstance(t, _RECORDS):
        cls: type = t.cls
        if cls in seen or len(seen) >= _INLINE_DEPTH:
            if isinstance(t, _CLASSED):
                return [f"{pad}check_record({var})"]
            helpers.append(_later(t))  # a TypedDict: compiled on first use (it may recur)
            return [f"{pad}helpers[{len(helpers) - 1}]({var})"]
        body: list[str] = []
        _emit_fields(body, t, var, depth + 1, seen | {cls}, helpers)
        return body
    if isinstance(t, mi.DictType):
        body = [f"{pad}for k{depth}, {inner} in {var}.items():"]
        _emit_item(body, t.value_type, inner, f"k{depth}", depth + 2, seen, helpers)
        return body
    if isinstance(t, mi.TupleType):
        body = []
        for i, item in enumerate(t.item_types):
            if _needs(item, set()):
                body.append(f"{pad}{inner} = {var}[{i}]")
                _emit(body, item, inner, f"[{i}]", depth + 1, seen, helpers)
        return body
    body = [f"{pad}for i{depth}, {inner} in enumerate({var}):"]
    _emit_item(body, _parts(t)[0], inner, f"i{depth}", depth + 2, seen, helpers)
    return body


def _emit_item(
    lines: list[str],
    t: mi.Type,
    var: str,
    key: str,
    depth: int,
    seen: frozenset[type],
    helpers: list[Check],
) -> None:
    """Statements checking one item of a container; an error adds the item's key to its path."""
    pad = "    " * depth
    lines.append(f"{pad}try:")
    _emit(lines, t, var, "", depth + 1, seen, helpers)
    lines.append(f"{pad}except NotJSON as exc:")
    lines.append(
        f"{pad}    exc.steps.append(f'.{{{key}}}' if isinstance({key}, str) else f'[{{{key}}}]')"
    )
    lines.append(f"{pad}    raise")


def _union_check(t: mi.UnionType, seen: frozenset[type]) -> Check:
    """A union's check: the value's class picks the member it was encoded as.

    msgspec allows one array-like and one dict-like member besides tagged structs; untyped
    values are checked as such when the union takes `Any`.
    """
    kinds = [_unwrap(x) for x in t.types]
    untyped = any(isinstance(k, mi.AnyType) for k in kinds)
    floats = untyped or any(isinstance(k, mi.FloatType) for k in kinds)
    array = next((k for k in kinds if isinstance(k, _ARRAYS) and _needs(k, set())), None)
    mapping = next(
        (k for k in kinds if isinstance(k, (mi.DictType, mi.TypedDictType)) and _needs(k, set())),
        None,
    )
    array_check = _compile(array, seen) if array is not None else None
    mapping_check = _compile(mapping, seen) if mapping is not None else None

    classes = {k.cls for k in kinds if isinstance(k, (mi.StructType, mi.DataclassType))}

    def check_member(value: Any) -> None:
        if value is msgspec.UNSET:
            return
        if type(value) in classes or isinstance(value, msgspec.Struct):
            _check_record(value)
        elif isinstance(value, float) and floats:
            check_float(value)
        elif isinstance(value, (list, tuple, set, frozenset)) and array_check is not None:
            array_check(value)
        elif isinstance(value, dict) and mapping_check is not None:
            mapping_check(value)
        elif untyped:
            check_untyped(value)

    return check_member


def _instance_check(kinds: tuple[type, ...], label: str) -> Check:
    """The check of a string-encoded typed field: it must hold one of `kinds`."""

    def check_instance(value: Any) -> None:
        if not isinstance(value, kinds):
            raise NotJSON(
                f"is a {type(value).__name__} in a {label} field, which JSON would read back "
                "as another value"
            )

    return check_instance


def _later(t: mi.Type) -> Check:
    """A check compiled from `t` on its first call (a recursive TypedDict refers to itself)."""
    built: list[Check] = []

    def check_later(value: Any) -> None:
        if not built:
            built.append(_compile(t, frozenset(), root_fields=True))
        built[0](value)

    return check_later


def _unwrap(t: mi.Type) -> mi.Type:
    """The type inside `Annotated[...]` constraints or metadata."""
    while isinstance(t, mi.Metadata):
        t = t.type
    return t


def _needs(t: mi.Type, seen: set[type]) -> bool:
    """Whether a value of type `t` may hold a float, an untyped value or a string-encoded one."""
    t = _unwrap(t)
    if isinstance(t, (mi.FloatType, mi.AnyType)) or type(t) in _STRINGS:
        return True
    if isinstance(t, _RECORDS):
        if t.cls in seen:
            return False
        seen.add(t.cls)
    return any(_needs(part, seen) for part in _parts(t))


def _parts(t: mi.Type) -> list[mi.Type]:
    """The types inside a container, record or union type (none for a scalar)."""
    t = _unwrap(t)
    if isinstance(t, mi.UnionType):
        return list(t.types)
    if isinstance(t, mi.TupleType):
        return list(t.item_types)
    if isinstance(t, mi.DictType):
        return [t.value_type]
    if isinstance(t, _RECORDS):
        return [field.type for field in t.fields]
    item = getattr(t, "item_type", None)
    return [item] if isinstance(item, mi.Type) else []


def _check_record(value: Any) -> None:
    """A Struct, dataclass or NamedTuple instance, by its own class's check."""
    cls: type = type(value)
    record_check = checker(cls)
    if record_check is not None:
        record_check(value)


def attribute_name(key: str) -> bool:
    """Whether `v.key` in generated source reads the attribute named `key`.

    Python normalizes identifiers in source (NFKC): `v.\ufb01` would read `v.fi`.
    """
    return (
        key.isidentifier()
        and not keyword.iskeyword(key)
        and unicodedata.normalize("NFKC", key) == key
    )
