"""Shared fixtures: a fresh store URL for each backend that exists in this checkout."""

from __future__ import annotations

import importlib.util
import itertools
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

# No per-example deadline: many properties write real files with fsync, and a busy disk makes
# one example slow without making it wrong (speed is measured in benchmarks/, not here).
# CI runs a fixed, reproducible set of examples; local runs keep exploring new ones (and keep
# what they find in .hypothesis/), so a bug found there is pinned with an explicit test.
settings.register_profile("local", deadline=None)
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "local")

_SCHEMES = {
    "memory": ("eventlog.backends.memory", lambda d, n: f"memory://t{n}"),
    "sqlite": ("eventlog.backends.sqlite", lambda d, n: f"sqlite:///{d}/s{n}.db"),
    "jsonl": ("eventlog.backends.jsonl", lambda d, n: f"jsonl:///{d}/j{n}"),
    "lmdb": ("eventlog.backends.lmdb", lambda d, n: f"lmdb:///{d}/l{n}"),
}
BACKENDS = [name for name, (mod, _) in _SCHEMES.items() if importlib.util.find_spec(mod)]
"""Backends present in this checkout (local engines; PostgreSQL has its own fixture)."""


@pytest.fixture(params=BACKENDS)
def backend_name(request: pytest.FixtureRequest) -> str:
    """Each local backend in turn."""
    name: str = request.param
    return name


@pytest.fixture
def make_url(backend_name: str, tmp_path: Path) -> Callable[[], str]:
    """A function giving a new, empty store URL of the current backend on each call."""
    counter = itertools.count()
    build = _SCHEMES[backend_name][1]
    return lambda: build(tmp_path, next(counter))
