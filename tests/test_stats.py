"""`eventlog.stats.store_stats` and `eventlog stats` on every backend."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

import eventlog as el
from eventlog.stats import store_stats


def _fill(store: el.Store) -> None:
    store.append("a", [el.ModelInput.from_text(f"a{i}") for i in range(5)])
    store.append("b", [el.Checkpoint(label="b0"), el.ModelInput.from_text("b1")])
    store.fork("a", "a-fork", at_seq=2)
    store.append("a-fork", [el.Checkpoint(label="f")])


def test_counts(backend_name: str, make_url: Callable[[], str]) -> None:
    with el.open(make_url()) as store:
        empty = store_stats(store)
        assert (empty.events, empty.streams, empty.first_ts, empty.longest_stream) == (
            0,
            0,
            None,
            None,
        )
        _fill(store)
        stats = store_stats(store)
        events = list(store.read_all())
        assert (stats.streams, stats.forks, stats.events, stats.head_position) == (3, 1, 8, 8)
        assert (stats.longest_stream, stats.longest_events) == ("a", 5)
        assert stats.first_ts == min(e.ts for e in events)
        assert stats.last_ts == max(e.ts for e in events)
        assert [(k.type, k.events) for k in stats.kinds] == [("model_input", 6), ("checkpoint", 2)]
        assert stats.stored_bytes == sum(k.stored_bytes for k in stats.kinds) > 0
        assert stats.compressed == 0
        assert stats.format == ("json" if backend_name == "jsonl" else "msgpack")
        if backend_name == "memory":
            assert stats.disk_bytes is None
        else:
            assert stats.disk_bytes is not None and stats.disk_bytes > 0
            before = stats.disk_bytes
            # 2.4 MB: more than the room a SQLite store keeps ahead of its WAL (1 MiB, counted
            # in disk_bytes as the blocks it is), so the files must grow by most of it.
            store.append("big", [el.ModelInput.from_text(os.urandom(1_200_000).hex())])
            grown = store_stats(store).disk_bytes
            assert grown is not None and grown >= before + 1_200_000


def test_compressed_payloads_are_counted(tmp_path: Path) -> None:
    pytest.importorskip("zstandard")
    with el.open(f"sqlite:///{tmp_path}/z.db?compression=zstd") as store:
        store.append("s", [el.ModelInput.from_text("line of tool output\n" * 100)] * 3)
        store.append("s", [el.Checkpoint(label="small")])
        stats = store_stats(store)
        assert stats.compressed == 3
        big = next(k for k in stats.kinds if k.type == "model_input")
        assert big.stored_bytes < 3 * len("line of tool output\n" * 100) / 5


def test_progress_reaches_the_head(tmp_path: Path) -> None:
    with el.open(f"sqlite:///{tmp_path}/p.db", durability="none") as store:
        store.append("s", [el.Checkpoint(label=str(i)) for i in range(2500)])
        seen: list[tuple[int, int]] = []
        store_stats(store, progress=lambda done, head: seen.append((done, head)))
        assert seen == [(1000, 2500), (2000, 2500), (2500, 2500)]


def test_cli_stats(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path}/j"
    with el.open(url) as store:
        _fill(store)
        expected = msgspec.to_builtins(store_stats(store))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "eventlog", "--store", url, "stats", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "COLUMNS": "200"},
        )

    as_json = run("--json")
    assert as_json.returncode == 0, as_json.stderr
    assert msgspec.json.decode(as_json.stdout) == expected
    text = run()
    assert text.returncode == 0, text.stderr
    assert "8 events in 3 streams (1 fork)" in text.stdout
    assert "longest stream: a (5 own events)" in text.stdout
    assert "model_input" in text.stdout and "checkpoint" in text.stdout
