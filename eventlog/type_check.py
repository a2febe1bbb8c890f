"""A quick answer to "will this payload read back as itself?", exact whenever it says yes.

Structs do not check their fields' types when they are built, so every payload is decoded once
on append with its class's decoder (see `eventlog.codec`) and compared with what was appended
(`eventlog.round_trip`): a payload that would not read back as itself is refused. That decode
copies every string of the payload. For classes made of plain types (str, int, float, bool,
None, bytes, `Any`, tuples and lists, str-keyed dicts, Structs, tagged unions of Structs,
Literals, Optional, UUIDs, dates, naive or UTC datetimes, naive times, members of a plain
Enum), a check generated from the class answers first by looking at types alone: when it says
yes, the decode could neither fail nor change a value, and is skipped (untyped values must be
`round_trip.plain_listed`: a tuple there reads back as a list, equal but not the same, and an
append returns its events as reads will give them). When it says no, or when the class holds
anything else (constraints, Decimals, timedeltas, Flag enums, other unions), the decode and the
comparison run and give the answer and its message. So the check only ever saves time.

Why a yes is exact: the value was just encoded by msgspec (so its strings are valid UTF-8 and
its ints fit the format), every field holds exactly the type its decoder accepts (a tuple in a
tuple field, not a list, and lists only in the untyped values a `__post_init__` can see: the
values it sees are the ones decode gives it), an Enum field holds one of its members (by
identity: a `_missing_` can make others), and
each record's `__post_init__` runs again in the check, as decode would run it (a field may have
been changed since the record was built, with `force_setattr` or in a mutable nested Struct).
That is only done for classes whose `__post_init__` is known to check and never change the
record (`validating_post_init`): any other is left to the decoder, which runs it on a copy, as
the check must not change the caller's payload. Fields are read by name in the generated code,
so a class with a name Python would rewrite there (NFKC: `\ufb01` reads as `fi`) gets no check.
The check looks at types only: NaN and infinities, which JSON cannot store, are refused before
it, in JSON stores, by `json_exact`.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from datetime import UTC, date, datetime, time
from typing import Any, TypeVar
from uuid import UUID

from msgspec import inspect as mi

from eventlog.json_exact import attribute_name
from eventlog.round_trip import INT_RANGE, MAX_NESTING, plain_listed

Check = Callable[[Any], bool]
"""True when the value's typed decode cannot fail nor change it; False when it must run."""


_SCALARS: dict[type[mi.Type], tuple[str, tuple[str, ...]]] = {
    mi.StrType: ("type({v}) is not str", ("min_length", "max_length", "pattern")),
    mi.BoolType: ("type({v}) is not bool", ()),
    mi.IntType: (
        "type({v}) is not int or not INT_LO <= {v} <= INT_HI",
        ("gt", "ge", "lt", "le", "multiple_of"),
    ),
    # An int in a float field reads back as a float: left to decode.
    mi.FloatType: ("type({v}) is not float", ("gt", "ge", "lt", "le", "multiple_of")),
    mi.NoneType: ("{v} is not None", ()),
    mi.BytesType: ("type({v}) is not bytes", ("min_length", "max_length")),
    # Naive or UTC (timezone.utc itself), fold 0: what both formats read back as it was.
    # MessagePack reads any other aware datetime back in UTC; JSON a zone as a fixed offset.
    mi.DateTimeType: (
        "type({v}) is not datetime or {v}.fold or {v}.tzinfo is not None and {v}.tzinfo is not UTC",
        ("tz",),
    ),
    mi.DateType: ("type({v}) is not date", ()),
    mi.TimeType: ("type({v}) is not time or {v}.fold or {v}.tzinfo is not None", ("tz",)),
    mi.UUIDType: ("type({v}) is not UUID", ()),
}
"""Scalar types -> (the test that fails the check, the constraints that rule the type out)."""


_VALIDATING: set[type] = set()
"""Struct classes whose `__post_init__` only raises, never changes the record."""

S = TypeVar("S", bound=type)


def validating_post_init(cls: S) -> S:
    """Mark a Struct class whose `__post_init__` only checks (raises), never changes, the record.

    The quick check may then run it on the caller's payload, and keep its fast path for the
    class; for any other class with a `__post_init__`, payloads are decoded on append.
    """
    _VALIDATING.add(cls)
    fast_check.cache_clear()
    return cls


class _Unsupported(Exception):
    """A type the generator does not vouch for: the class's payloads are always decoded."""


@functools.cache
def fast_check(cls: type) -> Check | None:
    """The generated check for a Struct class, or None if it holds a type left to the decoder."""
    try:
        return _Builder().build(cls)
    except Exception:  # _Unsupported, or a class the generator trips on: decode always
        return None


class _Builder:
    """Generates one function per root class, with the checks of nested Structs inlined.

    Inlining (rather than a call per nested record, as a first version did) halves the check's
    cost on eventlog's own events: a Python call costs as much as a dozen field tests.
    """

    def __init__(self) -> None:
        self.names: dict[str, Any] = {"INT_LO": INT_RANGE[0], "INT_HI": INT_RANGE[1]}
        self.names.update(plain_listed=plain_listed, UTC=UTC, UUID=UUID)
        self.names.update(datetime=datetime, date=date, time=time)
        self.building: list[type] = []
        self.counter = 0
        self.functions: dict[type, str] = {}
        """Classes too big to inline -> the name of the function checking one."""
        self.source: list[str] = []

    def build(self, cls: type) -> Check:
        # An untyped value may nest as deep as leaves the whole payload within MAX_NESTING from
        # its root (as the decode path counts it), wherever in the record it sits.
        self.names["LIMIT"] = MAX_NESTING - _reach(mi.type_info(cls), set())
        lines = ["def check(v):", *self.struct(cls, "v", 1), "    return True"]
        exec("\n".join(self.source + lines), self.names)  # code from field names and types
        check: Check = self.names["check"]
        return check

    def nested(self, cls: type, var: str, depth: int) -> list[str]:
        """`struct`'s statements for a record inside another: inlined, or a call if long."""
        name = self.functions.get(cls)
        if name is None:
            body = self.struct(cls, var, depth)
            if len(body) <= _INLINE_LINES:
                return body
            name = self.functions[cls] = self.fresh("check_")
            self.source += [f"def {name}(v):", *self.struct(cls, "v", 1), "    return True"]
        return [f"{'    ' * depth}if not {name}({var}): return False"]

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def const(self, value: Any) -> str:
        """A name for `value` in the generated code's namespace."""
        name = self.fresh("K")
        self.names[name] = value
        return name

    def struct(self, cls: type, var: str, depth: int) -> list[str]:
        """Statements that `return False` unless `var`'s fields (a `cls`) hold their types."""
        if cls in self.building:
            raise _Unsupported(f"{cls.__name__} refers to itself")
        if len(self.building) > _MAX_NESTING:
            raise _Unsupported("Structs nested too deeply to inline")
        info = mi.type_info(cls)
        if not isinstance(info, mi.StructType) or info.array_like:
            raise _Unsupported(f"{cls!r} is not a plain Struct")
        post_init = hasattr(cls, "__post_init__")
        if post_init and cls not in _VALIDATING:
            # It may change the record (force_setattr normalizes even frozen ones), and the
            # check must not change the caller's payload: decode runs it on a copy instead.
            raise _Unsupported(f"{cls.__name__} has a __post_init__ not known to only check")
        self.building.append(cls)
        pad = "    " * depth
        lines: list[str] = []
        for field in info.fields:
            key = field.name
            if not attribute_name(key):
                raise _Unsupported(f"field name {key!r}")
            x = self.fresh("x")
            body = self.value(field.type, x, depth)
            if body:
                lines += [f"{pad}{x} = {var}.{key}", *body]
        if post_init:  # as decode will: a field may have been changed since (force_setattr)
            lines += [f"{pad}try:", f"{pad}    {var}.__post_init__()", f"{pad}except Exception:"]
            lines += [f"{pad}    return False"]
        self.building.pop()
        return lines

    def value(self, t: mi.Type, var: str, depth: int) -> list[str]:
        """Statements that `return False` unless `var` holds exactly what type `t` decodes."""
        pad = "    " * depth
        if isinstance(t, mi.Metadata):
            return self.value(t.type, var, depth)  # titles, descriptions: no constraint
        if isinstance(t, mi.AnyType):  # untyped: what reads back as itself (see round_trip)
            test = f"{_NOT_SCALAR.format(v=var)} and not plain_listed({var}, LIMIT)"
            return [f"{pad}if {test}: return False"]
        scalar = _SCALARS.get(type(t))
        if scalar is not None:
            test, constraints = scalar
            _no_constraints(t, *constraints)
            return [f"{pad}if {test.format(v=var)}: return False"]
        if isinstance(t, mi.EnumType):
            return self.enum(t, var, pad)
        if isinstance(t, mi.LiteralType):
            return self.literal(t, var, pad)
        if isinstance(t, (mi.ListType, mi.VarTupleType)):
            return self.array(t, var, depth)
        if isinstance(t, mi.DictType):
            return self.mapping(t, var, depth)
        if isinstance(t, mi.StructType):
            return [
                f"{pad}if type({var}) is not {self.const(t.cls)}: return False",
                *self.nested(t.cls, var, depth),
            ]
        if isinstance(t, mi.UnionType):
            return self.union(t, var, depth)
        raise _Unsupported(type(t).__name__)

    def enum(self, t: mi.EnumType, var: str, pad: str) -> list[str]:
        """One of the members of the field's Enum class (aliases are the same objects)."""
        if issubclass(t.cls, enum.Flag):  # a combination of flags is no member: decode
            raise _Unsupported("a Flag enum")
        # By identity: a `_missing_` may make instances that are no member (decode fails).
        members = self.const(frozenset(id(m) for m in t.cls.__members__.values()))
        return [f"{pad}if id({var}) not in {members}: return False"]

    def literal(self, t: mi.LiteralType, var: str, pad: str) -> list[str]:
        """One of a Literal's str or int values, of exactly its type (True is not 1)."""
        if not all(type(v) in (str, int) for v in t.values):
            raise _Unsupported("a Literal of other than str or int values")
        values = self.const(frozenset((type(v), v) for v in t.values))
        return [
            f"{pad}if type({var}) is not str and type({var}) is not int "
            f"or (type({var}), {var}) not in {values}: return False"
        ]

    def array(self, t: mi.ListType | mi.VarTupleType, var: str, depth: int) -> list[str]:
        """A list or a tuple of one item type.

        The exact container type: a list in a tuple field reads back as a tuple, which a
        `__post_init__` could treat otherwise. Left to decode, which takes it.
        """
        pad = "    " * depth
        _no_constraints(t, "min_length", "max_length")
        kind = "list" if isinstance(t, mi.ListType) else "tuple"
        if isinstance(t.item_type, mi.AnyType):
            # One walk over the items, not a call each (a tuple's items walked as a list's).
            items = var if kind == "list" else f"list({var})"
            test = f"not plain_listed({items}, LIMIT + 1)"  # counted from their container
            return [f"{pad}if type({var}) is not {kind} or {test}: return False"]
        item = self.fresh("i")
        body = self.value(t.item_type, item, depth + 1)
        lines = [f"{pad}if type({var}) is not {kind}: return False"]
        if body:
            lines += [f"{pad}for {item} in {var}:", *body]
        return lines

    def mapping(self, t: mi.DictType, var: str, depth: int) -> list[str]:
        """A dict with str keys (unconstrained) and values of one type."""
        pad = "    " * depth
        _no_constraints(t, "min_length", "max_length")
        key_type = t.key_type
        if not isinstance(key_type, mi.StrType):
            raise _Unsupported("dict keys other than str")
        _no_constraints(key_type, "min_length", "max_length", "pattern")
        k, item = self.fresh("k"), self.fresh("i")
        body = self.value(t.value_type, item, depth + 1)
        return [
            f"{pad}if type({var}) is not dict: return False",
            f"{pad}for {k}, {item} in {var}.items():",
            f"{pad}    if type({k}) is not str: return False",
            *body,
        ]

    def union(self, t: mi.UnionType, var: str, depth: int) -> list[str]:
        """Optional[X], and unions of tagged Structs (with or without None)."""
        pad = "    " * depth
        members = [m for m in t.types if not isinstance(m, mi.NoneType)]
        optional = len(members) < len(t.types)
        if len(members) == 1:
            body = self.value(members[0], var, depth + 1)
            if not optional:
                return self.value(members[0], var, depth)
            return [f"{pad}if {var} is not None:", *body] if body else []
        if not all(isinstance(m, mi.StructType) for m in members):
            raise _Unsupported("a union of other than tagged Structs")
        lines: list[str] = []
        if optional:
            lines.append(f"{pad}if {var} is not None:")
            depth += 1
            pad += "    "
        kind = self.fresh("t")
        lines.append(f"{pad}{kind} = type({var})")
        for n, member in enumerate(members):
            cls: type = member.cls  # type: ignore[attr-defined]
            test = f"{'if' if n == 0 else 'elif'} {kind} is {self.const(cls)}:"
            lines += [f"{pad}{test}", *self.nested(cls, var, depth + 1), f"{pad}    pass"]
        lines.append(f"{pad}else: return False")
        return lines


_NOT_SCALAR = (
    "type({v}) is not str and {v} is not None and type({v}) is not bool and type({v}) is not float"
)
"""True unless `{v}` is a scalar that reads back as itself whatever it is: then `plain` need not
be called (a call costs more than the tests)."""
_MAX_NESTING = 20
"""Structs nested this deep at most: a deeper class is left to the decoder."""
_INLINE_LINES = 40
"""A nested record's check this long or shorter is inlined; a longer one is a function (the
generated code stays linear in the size of the type graph)."""


def _reach(t: mi.Type, seen: set[type]) -> int:
    """How many levels below a value of type `t` its deepest untyped value can sit (0 if none).

    Types the generator does not take count 0: their classes get no check anyway.
    """
    if isinstance(t, mi.Metadata):
        return _reach(t.type, seen)
    if isinstance(t, (mi.ListType, mi.VarTupleType)):
        return 1 + _reach(t.item_type, seen)
    if isinstance(t, mi.DictType):
        return 1 + _reach(t.value_type, seen)
    if isinstance(t, mi.UnionType):
        return max(_reach(m, seen) for m in t.types)
    if isinstance(t, mi.StructType):
        if t.cls in seen:  # refers to itself: no check is generated
            return 0
        seen.add(t.cls)
        deepest = max((_reach(f.type, seen) for f in t.fields), default=0)
        seen.discard(t.cls)
        return 1 + deepest
    return 0


def _no_constraints(t: mi.Type, *attributes: str) -> None:
    for attribute in attributes:
        if getattr(t, attribute, None) is not None:
            raise _Unsupported(f"a {attribute} constraint")
