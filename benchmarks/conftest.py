"""Fixtures shared by the benchmark files: the workload and fresh scratch paths."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

import eventlog as el
from eventlog.bench.workload import conversation_events

REPLAY_EVENTS = 10_000


@pytest.fixture(scope="session")
def workload() -> list[el.EventData]:
    """The benchmark conversation (10k events, seed 0)."""
    return conversation_events(REPLAY_EVENTS)


@pytest.fixture
def fresh_path(tmp_path: Path) -> Callable[[], Path]:
    """A new scratch path on each call."""
    counter = itertools.count()
    return lambda: tmp_path / f"b{next(counter)}"
