"""Whether a value reads back as itself: what append checks when the quick type check cannot.

A typed decoder is lenient where a store must not be. MessagePack and JSON write UUIDs,
datetimes, decimals and enums as strings, and the decoder of a `str` field takes them back as
plain strings; a `UUID` field parses any string; JSON writes bytes as base64 text and its
decoder of a `str` field keeps the text. So a payload that decodes can still read back as
something else. `differs` compares what was appended with what the store would return, and
names the first place they differ.

Some changes are not differences, as the value reads back equal: a list and a tuple (named or
not) with the same items (a list in a tuple field reads back as a tuple; a tuple in an untyped
place as a list), a set and a frozenset with the same items, any dict as a plain dict, an int
in a float field as the equal float, a str or int subclass (a `StrEnum`, an `IntEnum` member
in a plain field) as the equal str or int, and a bytearray or memoryview as equal bytes. Where
Python's `==` is not strict enough, it is made so: a datetime must keep its tzinfo and fold
(MessagePack reads an aware datetime back in UTC: the same instant, another value), a Decimal
its exact digits.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
from typing import Any

import msgspec

INT_RANGE = (-(1 << 63), (1 << 64) - 1)
"""Integers both formats write and read back as ints (MessagePack: int64 and uint64)."""


MAX_NESTING = 256
"""The deepest a payload's or meta's values may nest (levels of lists, dicts and records).

msgspec decodes nested values recursively, within Python's recursion limit less the frames of
its caller: a value nested 990 deep that decodes at append could not be read by code 40 frames
deeper. A fixed cap, far below the limit, makes what is accepted readable from any caller.
"""


def plain_listed(value: Any, limit: int = MAX_NESTING) -> bool:
    """`plain`, with lists only: a tuple in an untyped place reads back as a list."""
    return plain(value, (list,), limit)


def plain(value: Any, arrays: tuple[type, ...] = (list, tuple), limit: int = MAX_NESTING) -> bool:
    """Whether an untyped value reads back as itself in both formats, by its types alone.

    str, bool, None, 64-bit ints, floats, lists and tuples of them, str-keyed dicts of them,
    nested at most `limit` levels. (JSON's NaN and infinities are refused before this by
    `json_exact`.) Level by level, not recursion: any depth the encoder took is fine.
    """
    level = [value]
    lo, hi = INT_RANGE
    depth = 0
    while level:
        inner: list[Any] = []
        extend = inner.extend
        for item in level:
            kind = type(item)
            if kind is str or kind is bool or item is None or kind is float:
                continue
            if kind is int:
                if not lo <= item <= hi:
                    return False
            elif kind in arrays:
                extend(item)
            elif kind is dict:
                for key in item:
                    if type(key) is not str:
                        return False
                extend(item.values())
            else:
                return False
        if inner:
            depth += 1
            if depth > limit:
                return False
        level = inner
    return True


def too_deep(value: Any, limit: int = MAX_NESTING) -> bool:
    """Whether values nest in `value` more than `limit` levels (lists, dicts, sets, records).

    Level by level, as `plain` counts, over any value the encoder takes.
    """
    level = [value]
    for _ in range(limit + 1):  # pass k finds the values at depth k + 1
        inner: list[Any] = []
        extend = inner.extend
        for item in level:
            if isinstance(item, (str, bytes, int, float)) or item is None:
                continue
            if isinstance(item, (list, tuple, set, frozenset)):
                extend(item)
            elif isinstance(item, dict):
                extend(item)
                extend(item.values())
            elif isinstance(item, msgspec.Struct):
                extend(getattr(item, name, None) for name in item.__struct_fields__)
            elif dataclasses.is_dataclass(item) and not isinstance(item, type):
                extend(getattr(item, f.name, None) for f in dataclasses.fields(item))
        if not inner:
            return False
        level = inner
    return True


def differs(original: Any, decoded: Any) -> str | None:
    """Where `decoded` is not `original` (see the module), or None if it reads back as itself.

    A loop over pairs still to compare, not recursion: any depth the encoder took is fine.
    """
    stack: list[tuple[Any, Any, str]] = [(original, decoded, "$")]
    while stack:
        a, b, path = stack.pop()
        problem = _compare(a, b, path, stack)
        if problem is not None:
            return problem
    return None


class _Unset:
    """An attribute deleted from a mutable record (`del record.field`)."""

    def __repr__(self) -> str:
        return "unset"


_UNSET = _Unset()


def _compare(a: Any, b: Any, path: str, todo: list[tuple[Any, Any, str]]) -> str | None:
    """Compare one pair: a problem, or None after queueing the parts to compare (in `todo`)."""
    ta, tb = type(a), type(b)
    if ta is tb and isinstance(a, msgspec.Struct):
        _fields(a, b, a.__struct_fields__, path, todo)
        return None
    if ta is tb and dataclasses.is_dataclass(a):
        _fields(a, b, tuple(f.name for f in dataclasses.fields(a)), path, todo)
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):  # NamedTuples too
        return _sequence(a, b, path, todo)
    if isinstance(a, dict) and isinstance(b, dict):
        return _items(a, b, path, todo)
    if isinstance(a, (set, frozenset)) and isinstance(b, (set, frozenset)):
        return _sets(a, b, path)
    if ta is tb:
        return _scalar(a, b, path)
    return _converted(a, b, path)


def _converted(a: Any, b: Any, path: str) -> str | None:
    """A value that reads back as another type: fine only as one of the equal normalizations."""
    tb = type(b)
    if isinstance(a, int) and not isinstance(a, bool) and tb is float and a == b:
        return None
    if (tb is str or tb is int) and isinstance(a, tb) and a == b:  # StrEnum, IntEnum members
        return None
    if isinstance(a, (bytearray, memoryview)) and tb is bytes and bytes(a) == b:
        return None
    return f"{path} is a {type(a).__name__}, which would read back as a {tb.__name__} ({_show(b)})"


Todo = list[tuple[Any, Any, str]]


def _scalar(a: Any, b: Any, path: str) -> str | None:
    """Two values of one type that hold no other values to compare."""
    if isinstance(a, float) and a != a and b != b:  # NaN: kept by MessagePack
        return None
    if isinstance(a, decimal.Decimal):  # exact, NaN and sNaN included: 1.50 is not 1.5
        same = a.compare_total(b) == 0
    elif isinstance(a, (datetime.datetime, datetime.time)):
        # Equal instants are not enough: MessagePack reads an aware datetime back in UTC. Nor
        # are equal offsets: a ZoneInfo or a named timezone would lose its name.
        same = a == b and repr(a.tzinfo) == repr(b.tzinfo) and a.fold == b.fold
    else:
        try:
            same = bool(a == b)
        except Exception:  # a value that cannot be compared cannot be shown to read back
            same = False
    return None if same else f"{path} would read back as {_show(b)}, not {_show(a)}"


def _sets(a: Any, b: Any, path: str) -> str | None:
    """Two sets, item by item: each item must read back as one of the other's.

    `==` finds set items equal across types and time zones (1 and 1.0, one instant in two
    zones), so items are paired by hash (equal items hash alike) and compared as any value.
    """
    if len(a) != len(b):
        return f"{path} would read back with {len(b)} items, not {len(a)}"
    buckets: dict[int, list[Any]] = {}
    for y in b:
        buckets.setdefault(hash(y), []).append(y)
    for x in a:
        group = buckets.get(hash(x), [])
        for i, y in enumerate(group):
            if differs(x, y) is None:
                del group[i]
                break
        else:
            return f"{path} item {_show(x)} would not read back as itself"
    return None


def _show(value: Any) -> str:
    """A value for a message (its repr, or its type if that fails)."""
    try:
        shown = repr(value)
    except Exception:  # a user's __repr__
        return f"<{type(value).__name__}>"
    return shown if len(shown) <= 200 else shown[:200] + "..."


def _fields(a: Any, b: Any, names: tuple[str, ...], path: str, todo: Todo) -> None:
    todo.extend(
        (getattr(a, n, _UNSET), getattr(b, n, _UNSET), f"{path}.{n}") for n in reversed(names)
    )


def _items(a: dict[Any, Any], b: dict[Any, Any], path: str, todo: Todo) -> str | None:
    if len(a) != len(b):
        return f"{path} would read back with {len(b)} keys, not {len(a)}"
    pairs = list(zip(a.items(), b.items(), strict=True))
    for (ka, va), (kb, vb) in reversed(pairs):
        todo.append((va, vb, f"{path}[{_show(ka)}]"))
        todo.append((ka, kb, f"{path} key {_show(ka)}"))
    return None


def _sequence(a: Any, b: Any, path: str, todo: Todo) -> str | None:
    if len(a) != len(b):
        return f"{path} would read back with {len(b)} items, not {len(a)}"
    todo.extend(
        (x, y, f"{path}[{i}]") for i, (x, y) in reversed(list(enumerate(zip(a, b, strict=True))))
    )
    return None
