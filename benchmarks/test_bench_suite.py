"""The `eventlog bench` suite as pytest-benchmark groups: append, read, replay, storage, peers.

Run (out of the default test run, which only collects tests/):

    .venv-bench/bin/pytest benchmarks/test_bench_suite.py --benchmark-enable \\
        --benchmark-json bench.json

`EVENTLOG_BENCH_SIZE=quick|full|tiny` picks the workload (default quick). The whole runner runs
once per session (`eventlog.bench.runner.run`, peers included when installed); each group's test
then times one representative eventlog operation with pytest-benchmark and attaches every figure
of the group (eventlog, limit, ratio, peers, goals) to the benchmark's `extra_info`, which
`--benchmark-json` keeps. Nothing asserts speed: the machines are shared and noisy.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import eventlog as el
from eventlog.bench import figures as ours
from eventlog.bench import runner
from eventlog.bench.common import SIZES
from eventlog.bench.workload import conversation_events

SIZE = SIZES[os.environ.get("EVENTLOG_BENCH_SIZE", "quick")]


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    lines: list[str] = []
    return runner.run(
        runner.Options(
            sizes=SIZE,
            progress=lines.append,
            workdir=tmp_path_factory.mktemp("suite"),
            command="pytest benchmarks/test_bench_suite.py",
        )
    )


@pytest.fixture
def fresh(tmp_path: Path) -> Callable[[], Path]:
    counter = itertools.count()
    return lambda: tmp_path / f"s{next(counter)}"


def _attach(benchmark: Any, suite: dict[str, Any], group: str) -> None:
    figs = [f for f in suite["figures"] if f["group"] == group]
    benchmark.extra_info["figures"] = figs
    benchmark.extra_info["machine"] = suite["machine"]
    for f in figs:
        print(f"\n{f['label']}: {runner.fmt(f['value'], f['unit'])}", end="")
        if f["ratio"] is not None:
            print(f"  x{f['ratio']:.2f} of limit", end="")
        for peer, ratio in f["peer_ratios"].items():
            if ratio is not None:
                print(f"  x{ratio:.2f} of {peer}", end="")


@pytest.mark.benchmark(group="append")
def test_append(benchmark: Any, suite: dict[str, Any], fresh: Callable[[], Path]) -> None:
    data = conversation_events(SIZE.batch_events)
    benchmark.pedantic(
        lambda: ours.append_rate("sqlite", fresh(), data, 100, "batch"), rounds=3, iterations=1
    )
    _attach(benchmark, suite, "append")


@pytest.mark.benchmark(group="read")
def test_read(benchmark: Any, suite: dict[str, Any], tmp_path: Path) -> None:
    store = ours.Populated("sqlite", tmp_path / "read", conversation_events(SIZE.read_events))
    try:
        benchmark.pedantic(lambda: list(store.store.read("s")), rounds=5, iterations=1)
    finally:
        store.close()
    _attach(benchmark, suite, "read")


@pytest.mark.benchmark(group="replay")
def test_replay(benchmark: Any, suite: dict[str, Any], tmp_path: Path) -> None:
    store = ours.Populated("sqlite", tmp_path / "replay", conversation_events(SIZE.read_events))
    try:
        benchmark.pedantic(store.replay(), rounds=3, iterations=1)
    finally:
        store.close()
    _attach(benchmark, suite, "replay")


@pytest.mark.benchmark(group="storage")
def test_storage(benchmark: Any, suite: dict[str, Any], fresh: Callable[[], Path]) -> None:
    data = conversation_events(SIZE.batch_events)
    benchmark.pedantic(
        lambda: ours.storage_per_event("sqlite", fresh(), data, "zstd+dict"), rounds=1, iterations=1
    )
    _attach(benchmark, suite, "storage")


@pytest.mark.benchmark(group="peers")
def test_peers(benchmark: Any, suite: dict[str, Any], fresh: Callable[[], Path]) -> None:
    if not any(suite["peers"].values()):
        pytest.skip("no peer installed (pip install 'agent-eventlog[benchmarks]')")
    data = conversation_events(SIZE.single_events)

    def one_by_one() -> None:
        with el.open(f"sqlite:///{fresh()}.db", durability="fsync") as store:
            for d in data:
                store.append("s", [d])

    benchmark.pedantic(one_by_one, rounds=1, iterations=1)
    _attach(benchmark, suite, "peers")
    benchmark.extra_info["peer_versions"] = suite["peers"]
