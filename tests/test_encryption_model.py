"""A property: appends (with and without the key store), forks and erasures of an SQLite store,
checked against a plain model of what each seq holds and who may read it.

The model says, for every seq of every stream, which stream stored it (a fork's prefix is its
ancestors') and whether it was sealed; an erased owner's sealed events raise ErasedError, and
nothing else does. Erasure reports and `verify` are checked against the same model.
"""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eventlog as el
from eventlog.encryption import erase_stream

pytest.importorskip("cryptography")

NAMES = ["a", "b", "c", "d", "e"]
Op = tuple[str, int, int, bool]
"""(what, stream index, a number, keyed): append n events, fork at a seq, or erase."""

ops = st.lists(
    st.tuples(
        st.sampled_from(["append", "append", "fork", "fork", "erase"]),
        st.integers(0, len(NAMES) - 1),
        st.integers(1, 3),
        st.booleans(),
    ),
    min_size=4,
    max_size=16,
)


@dataclass
class Model:
    """What each stream's own events are (text, sealed), its fork point, and the erasures."""

    prefix: str
    """Of this example's stream names."""
    own: dict[str, list[tuple[str, bool]]] = field(default_factory=dict)
    fork: dict[str, tuple[str, int]] = field(default_factory=dict)
    erased: set[str] = field(default_factory=set)

    def names(self) -> list[str]:
        return [self.prefix + name for name in NAMES]

    def base(self, stream: str) -> int:
        return self.fork[stream][1] if stream in self.fork else 0

    def length(self, stream: str) -> int:
        return self.base(stream) + len(self.own.get(stream, []))

    def at(self, stream: str, seq: int) -> tuple[str, str, bool]:
        """(owner, text, sealed) of one seq of a stream."""
        if seq <= self.base(stream):
            return self.at(self.fork[stream][0], seq)
        text, sealed = self.own[stream][seq - self.base(stream) - 1]
        return stream, text, sealed


def _apply(model: Model, keyed: el.Store, bare: el.Store, op: Op, step: int) -> None:
    """Do one operation on the store and on the model (expected refusals change neither)."""
    what, index, n, with_keys = op
    name = model.prefix + NAMES[index]
    if what == "fork":
        parents = [s for s in model.names() if model.length(s) and s != name]
        if name in model.own or name in model.fork or not parents:
            return
        parent = parents[(n - 1) % len(parents)]  # often the first: forks of forks, siblings
        at = min(step % 3 + 1, model.length(parent))
        keyed.fork(parent, name, at)
        model.fork[name] = (parent, at)
    elif what == "erase":
        existing = [s for s in model.names() if s in model.own or s in model.fork]
        if existing:
            _erase(model, keyed, existing[index % len(existing)])
    else:
        _append(model, keyed if with_keys else bare, name, n, with_keys, step)


def _append(model: Model, store: el.Store, name: str, n: int, sealed: bool, step: int) -> None:
    texts = [f"step {step} event {i}" for i in range(n)]
    own = model.own.get(name, [])
    refused: type[Exception] | None = None
    if sealed and name in model.erased:
        refused = el.ErasedError
    elif not sealed and own and own[-1][1]:
        refused = el.MissingKeyError  # its new events would be stored unencrypted
    if refused is not None:
        with pytest.raises(refused):
            store.append(name, [el.ModelInput.from_text(t) for t in texts])
        return
    stored = store.append(name, [el.ModelInput.from_text(t) for t in texts])
    assert [e.seq for e in stored] == list(
        range(model.length(name) + 1, model.length(name) + n + 1)
    )
    model.own.setdefault(name, []).extend((t, sealed) for t in texts)


def _erase(model: Model, store: el.Store, name: str) -> None:
    own = model.own.get(name, [])
    report = erase_stream(store, name)
    sealed = sum(s for _, s in own)
    assert (report.encrypted_events, report.plain_events) == (sealed, len(own) - sealed)
    assert report.shared_events == model.base(name)
    assert report.forks == sorted(
        f for f in model.fork if any(model.at(f, q)[0] == name for q in range(1, model.base(f) + 1))
    )
    model.erased.add(name)


def _check(model: Model, store: el.Store) -> None:
    """Every seq reads as the model says; verify agrees on what is erased."""
    for name in model.names():
        for seq in range(1, model.length(name) + 1):
            owner, text, sealed = model.at(name, seq)
            if sealed and owner in model.erased:
                with pytest.raises(el.ErasedError) as raised:
                    store.get(name, seq)
                assert raised.value.stream == owner
            else:
                assert store.get(name, seq).data == el.ModelInput.from_text(text)
    erased: set[str] = set()
    for name in model.names():
        if model.length(name):  # verified one by one: the store holds other examples' too
            report = store.verify(name)
            assert report.ok, report.problems
            erased.update(report.erased)
    assert erased == {s for s in model.erased if any(sealed for _, sealed in model.own.get(s, []))}


def test_reads_erasures_and_verify_follow_the_model() -> None:
    """Each example works on streams of its own in one store (opened once: a new SQLite
    store per example would take most of the time)."""
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/s.db"
        keyed = el.open(url, keys=f"{tmp}/keys", durability="none")
        bare = el.open(url, durability="none")
        examples = itertools.count()

        @settings(max_examples=60, deadline=None)
        @given(ops)
        def follows(steps: list[Op]) -> None:
            model = Model(prefix=f"x{next(examples)}-")
            for step, op in enumerate(steps):
                _apply(model, keyed, bare, op, step)
            _check(model, keyed)

        with keyed, bare:
            follows()
