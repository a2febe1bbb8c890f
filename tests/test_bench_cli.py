"""`eventlog bench` front end and the benchmark suite's measuring rules, without a full run.

The command's checks and its table are tested with `runner.run` replaced by a canned result, so
these tests take milliseconds; the runner itself is smoke-tested in test_bench_smoke.py.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import eventlog as el
from eventlog.bench import peers, runner
from eventlog.bench.common import (
    Figure,
    check_same_tokens,
    rate_until_closed,
    sqlite_data_bytes,
)
from eventlog.bench.workload import conversation_events, without_compactions
from eventlog.cli import cli

LONG_LABEL = "sqlite: append 100-event batches, durability=batch"


def _canned(options: runner.Options) -> dict[str, Any]:
    """A result shaped like runner.run's, with two figures (one carrying peers)."""
    figs = [
        Figure(
            "append.batch100.sqlite",
            "append",
            LONG_LABEL,
            "events/s",
            True,
            value=40_000.0,
            limit=50_000.0,
            limit_label="sqlite3 executemany 100/txn, WAL, NORMAL",
            goal=">= 0.8",
            peers={"eventsourcing": 9_000.0, "openai-agents": 8_000.0},
            peer_goals={"best": ">= 1.2"},
            note="each side timed until closed (its final WAL checkpoint included)",
        ),
        Figure("limit.fsync", "limit", "fsync", "us", False, limit=150.0),
    ]
    return {
        "command": options.command,
        "sizes": asdict(options.sizes),
        "machine": runner.machine_info(),
        "load_before": [0.1, 0.1, 0.1],
        "load_after": [0.1, 0.1, 0.1],
        "backends": list(options.backends),
        "peers": {},
        "figures": [f.to_json() for f in figs],
        "series": {},
    }


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[runner.Options]:
    """runner.run replaced by `_canned`; the options it was called with."""
    calls: list[runner.Options] = []

    def fake(options: runner.Options) -> dict[str, Any]:
        calls.append(options)
        return _canned(options)

    monkeypatch.setattr(runner, "run", fake)
    return calls


def _bench(*args: str) -> Any:
    return CliRunner().invoke(cli, ["bench", "--size", "tiny", "--no-peers", *args])


def test_table_is_wide_when_piped(ran: list[runner.Options]) -> None:
    """Not a terminal (CliRunner): the table is laid out wide, one line per row."""
    res = _bench("--backend", "sqlite")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert max(len(line) for line in lines) > 80
    assert any(LONG_LABEL in line for line in lines), res.output
    assert len([line for line in lines if "│" in line]) == 2  # one line per figure


def test_output_path_that_is_a_directory_is_refused_before_the_run(
    ran: list[runner.Options], tmp_path: Path
) -> None:
    for option in ("--json", "--markdown", "--plot"):
        res = _bench(option, str(tmp_path))
        assert res.exit_code == 2, (option, res.output)
        assert "is a directory" in res.output
    res = _bench("--json", str(tmp_path / "missing" / "x.json"))
    assert res.exit_code == 2 and "does not exist" in res.output
    assert ran == []


def test_plot_without_matplotlib_is_refused_before_the_run(
    ran: list[runner.Options], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # an import of it now fails
    res = _bench("--plot", str(tmp_path / "p.png"))
    assert res.exit_code == 2 and "matplotlib is not installed" in res.output
    assert ran == []


def test_a_backend_given_twice_is_measured_once(ran: list[runner.Options]) -> None:
    res = _bench("--backend", "memory", "--backend", "memory", "--backend", "sqlite")
    assert res.exit_code == 0, res.output
    assert tuple(ran[0].backends) == ("memory", "sqlite")
    assert ran[0].command.count("--backend memory") == 1


def test_reused_workdir_gets_a_fresh_directory_per_run(tmp_path: Path) -> None:
    """A second run never opens the first run's stores (they would collide or be appended to)."""
    with runner._workdir(tmp_path) as first:
        (first / "001-fsync").write_bytes(b"x")
    with runner._workdir(tmp_path) as second:
        assert second != first and second.parent == tmp_path
        assert list(second.iterdir()) == []
    assert (first / "001-fsync").exists()  # a given workdir is kept for inspection


def test_value_goal_is_checked_besides_the_ratio_goal() -> None:
    fig = Figure("w", "window", "w", "ms", False, value=1.5, limit=1.0, goal="<= 2")
    fig.value_goal = "<= 1"
    assert fig.verdicts() == [("x limit <= 2", True), ("<= 1 ms", False)]
    assert fig.to_json()["value_goal"] == "<= 1"


def test_size_goal_only_at_its_history_length() -> None:
    series: dict[str, Any] = {"eventlog": [], "langgraph": []}
    assert runner._size_goals(series, 404) == {}
    assert "not checked at 404" in runner._size_note(series, 404)
    assert runner._size_goals(series, 2_003) == {"langgraph": runner.SIZE_GOAL}
    assert "not checked" not in runner._size_note(series, 2_003)


def test_check_same_tokens() -> None:
    check_same_tokens(97_852, 99_500, "w")
    with pytest.raises(RuntimeError, match="unlike work"):
        check_same_tokens(33_000, 99_500, "w")


def test_window_comparison_history_has_no_compactions() -> None:
    data = conversation_events(2_000)
    assert any(isinstance(d, el.Compaction) for d in data)
    kept = without_compactions(data)
    assert not any(isinstance(d, el.Compaction) for d in kept)
    assert len(kept) == len(data) - sum(isinstance(d, el.Compaction) for d in data)


def test_last_n_peer_asks_for_the_items_of_the_last_events() -> None:
    """The OpenAI session stores items; the last 50 events are more than 50 of them."""
    tail = conversation_events(1_000)[-50:]
    assert peers.items_in(tail) == sum(len(peers.openai_items(d)) for d in tail)
    assert peers.items_in(tail) > 50


def test_rate_until_closed_counts_the_close() -> None:
    assert rate_until_closed(1_000.0, 100, lambda: time.sleep(0.1)) < 1_000 / 2


def test_sqlite_data_bytes_leaves_out_the_wal(tmp_path: Path) -> None:
    """The size of an open WAL store is its pages, which is what it keeps once closed."""
    path = tmp_path / "s.db"
    with el.open(f"sqlite:///{path}", durability="fsync") as store:
        for d in conversation_events(300):
            store.append("s", [d])
        wal = path.with_name(path.name + "-wal")
        assert wal.exists() and wal.stat().st_size > 0
        open_size = sqlite_data_bytes(path)
    assert not wal.exists() or wal.stat().st_size == 0
    assert open_size == path.stat().st_size


def test_saved_paths_print_as_written(ran: list[runner.Options], tmp_path: Path) -> None:
    where = tmp_path / "[b]runs"
    where.mkdir()
    res = _bench("--json", str(where / "[red]x.json"))
    assert res.exit_code == 0, res.output
    assert f"results saved to {where / '[red]x.json'}" in " ".join(res.stderr.split())
    assert (where / "[red]x.json").exists()
