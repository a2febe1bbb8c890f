"""Checks that a value survives JSON unchanged: what a JSON-format store (JSONL) can keep.

msgspec writes NaN and the infinities as `null`, and bytes, datetimes, UUIDs and decimals in
untyped places (meta, `Any` fields) as strings: read back, they would differ from what was
appended, and `verify` could not tell. Typed fields are safe (the decoder restores their
types), so only floats and untyped values are checked, by a checker built once per payload
class from its type; a class with neither costs nothing. Paths are only put together for an
error, so a value that passes costs its walk alone.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import inspect as mi

_INLINE_DEPTH = 4
"""Nested struct classes whose checks are inlined into their container's (deeper: a call)."""

Check = Callable[[Any], None]
"""Raises `NotJSON` at the first part of a value that JSON would change."""


class NotJSON(ValueError):
    """A value JSON would store as something else; `path` says where, once complete."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what
        self.steps: list[str] = []

    def at(self, root: str) -> str:
        """The message with the full path from `root`."""
        return f"{root}{''.join(reversed(self.steps))} {self.what}"


def check(value: Any, root: str, value_check: Check) -> None:
    """Run a check; raise ValueError naming the path from `root` of what JSON would change."""
    try:
        value_check(value)
    except NotJSON as exc:
        raise ValueError(exc.at(root)) from None


def check_untyped(value: Any) -> None:
    """A value of no declared type: str, int, bool, None, finite float, lists, str-keyed dicts."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return
    if kind is dict:
        _untyped_dict(value)
    elif kind is list or kind is tuple:
        _untyped_items(value)
    elif kind is float:
        check_float(value)
    elif not isinstance(value, (str, int)):
        raise NotJSON(f"is a {kind.__name__}, which JSON would store as another type")


def _untyped_dict(value: dict[Any, Any]) -> None:
    for key, item in value.items():
        if type(key) is not str and not isinstance(key, str):
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


def check_float(value: float) -> None:
    """A finite float (JSON has no NaN or infinity; they would be stored as null)."""
    if not math.isfinite(value):
        raise NotJSON(f"is {value!r}, which JSON cannot store (it would become null)")


@functools.cache
def checker(cls: type) -> Check | None:
    """The check for instances of a Struct class, or None when it has no float or untyped part.

    Its code is generated from the class's fields, one statement per float or untyped field and
    one loop per container of them: a payload that passes costs little more than its walk.
    """
    info = mi.type_info(cls)
    if not isinstance(info, mi.StructType) or not _needs(info, set()):
        return None
    names: dict[str, Any] = {
        "NotJSON": NotJSON,
        "isfinite": math.isfinite,
        "check_float": check_float,
        "check_untyped": check_untyped,
        "check_struct": _check_struct,
        "check_by_class": _check_by_class,
    }
    lines = ["def check(value):"]
    _emit_fields(lines, info, "value", 1, frozenset({cls}))
    exec("\n".join(lines), names)  # code built from the class's own field names
    built: Check = names["check"]
    return built


def _emit_fields(
    lines: list[str], info: mi.StructType, var: str, depth: int, seen: frozenset[type]
) -> None:
    """Statements checking the fields of struct `var` that hold floats or untyped values."""
    pad = "    " * depth
    for field in info.fields:
        if _needs(field.type, set(seen)):
            name = f"f{depth}"
            lines.append(f"{pad}{name} = {var}.{field.name}")
            _emit(lines, field.type, name, f".{field.name}", depth, seen)


def _emit(
    lines: list[str], t: mi.Type, var: str, step: str, depth: int, seen: frozenset[type]
) -> None:
    """Append statements checking `var` of declared type `t`; an error adds `step` to its path."""
    pad = "    " * depth
    if isinstance(t, mi.UnionType):
        kinds = [x for x in t.types if not isinstance(x, mi.NoneType)]
        if len(kinds) == 1:  # Optional[...]
            lines.append(f"{pad}if {var} is not None:")
            _emit(lines, kinds[0], var, step, depth + 1, seen)
            return
    lines.append(f"{pad}try:")
    lines.extend(_body(t, var, depth, seen) or [f"{pad}    pass"])
    lines.append(f"{pad}except NotJSON as exc:")
    lines.append(f"{pad}    exc.steps.append({step!r})")
    lines.append(f"{pad}    raise")


def _body(t: mi.Type, var: str, depth: int, seen: frozenset[type]) -> list[str]:
    """The statements of `_emit`'s try block (one level deeper than `depth`)."""
    pad = "    " * (depth + 1)
    inner = f"v{depth}"
    if isinstance(t, mi.FloatType):
        return [f"{pad}if not isfinite({var}): check_float({var})"]
    if isinstance(t, mi.AnyType):
        return [f"{pad}check_untyped({var})"]
    if isinstance(t, mi.UnionType):
        untyped = any(isinstance(x, mi.AnyType) for x in t.types)
        return [f"{pad}{'check_untyped' if untyped else 'check_by_class'}({var})"]
    if isinstance(t, mi.StructType):
        if t.cls in seen or len(seen) >= _INLINE_DEPTH:
            return [f"{pad}check_struct({var})"]
        body: list[str] = []
        _emit_fields(body, t, var, depth + 1, seen | {t.cls})
        return body
    if isinstance(t, mi.DictType):
        body = [f"{pad}for k{depth}, {inner} in {var}.items():"]
        _emit_item(body, t.value_type, inner, f"k{depth}", depth + 2, seen)
        return body
    if isinstance(t, mi.TupleType):
        body = []
        for i, item in enumerate(t.item_types):
            if _needs(item, set()):
                body.append(f"{pad}{inner} = {var}[{i}]")
                _emit(body, item, inner, f"[{i}]", depth + 1, seen)
        return body
    body = [f"{pad}for i{depth}, {inner} in enumerate({var}):"]
    _emit_item(body, _parts(t)[0], inner, f"i{depth}", depth + 2, seen)
    return body


def _emit_item(
    lines: list[str], t: mi.Type, var: str, key: str, depth: int, seen: frozenset[type]
) -> None:
    """Statements checking one item of a container; an error adds the item's key to its path."""
    pad = "    " * depth
    lines.append(f"{pad}try:")
    _emit(lines, t, var, "", depth + 1, seen)
    lines.append(f"{pad}except NotJSON as exc:")
    lines.append(
        f"{pad}    exc.steps.append(f'.{{{key}}}' if isinstance({key}, str) else f'[{{{key}}}]')"
    )
    lines.append(f"{pad}    raise")


def _needs(t: mi.Type, seen: set[type]) -> bool:
    if isinstance(t, (mi.FloatType, mi.AnyType)):
        return True
    if isinstance(t, mi.StructType):
        if t.cls in seen:
            return False
        seen.add(t.cls)
        return any(_needs(f.type, seen) for f in t.fields)
    return any(_needs(part, seen) for part in _parts(t))


def _parts(t: mi.Type) -> list[mi.Type]:
    """The types inside a container or union type (none for a scalar)."""
    if isinstance(t, mi.UnionType):
        return list(t.types)
    if isinstance(t, mi.TupleType):
        return list(t.item_types)
    if isinstance(t, mi.DictType):
        return [t.value_type]
    item = getattr(t, "item_type", None)
    return [item] if isinstance(item, mi.Type) else []


def _check_struct(value: msgspec.Struct) -> None:
    cls: type = type(value)
    struct_check = checker(cls)
    if struct_check is not None:
        struct_check(value)


def _check_by_class(value: Any) -> None:
    """A union of several typed kinds (tagged structs, say): check by the value's class."""
    if isinstance(value, msgspec.Struct):
        _check_struct(value)
    elif isinstance(value, float):
        check_float(value)
    elif isinstance(value, dict):
        _each(_check_by_class, value.items())
    elif isinstance(value, (list, tuple)):
        _each(_check_by_class, enumerate(value))


def _each(item_check: Check, pairs: Any) -> None:
    for key, item in pairs:
        try:
            item_check(item)
        except NotJSON as exc:
            exc.steps.append(f".{key}" if isinstance(key, str) else f"[{key}]")
            raise


def _fixed(checks: list[Check | None], value: Any) -> None:
    for i, (item_check, item) in enumerate(zip(checks, value, strict=False)):
        if item_check is not None:
            try:
                item_check(item)
            except NotJSON as exc:
                exc.steps.append(f"[{i}]")
                raise
