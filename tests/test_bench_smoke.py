"""Smoke test of the benchmark runner: a tiny workload on memory + SQLite, no peers.

Checks the shape of the results (figures present, numbers positive, ratios computed), never the
speed: timing on a shared machine is too noisy for a test.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import lmdb
import msgspec
import orjson
from click.testing import CliRunner

import eventlog as el
from eventlog.bench import limits, raw_writers, runner
from eventlog.bench.common import TINY
from eventlog.bench.workload import conversation_events
from eventlog.cli import cli
from eventlog.codec import GENESIS, chain_hash

EXPECTED = [
    "limit.fsync",
    "limit.decode",
    "append.batch10.memory",
    "append.batch100.memory",
    "append.batch1000.memory",
    "read.stream.memory",
    "read.all.memory",
    "read.last50.memory",
    "append.single.sqlite",
    "append.batch10.sqlite",
    "append.batch100.sqlite",
    "append.batch1000.sqlite",
    "append.batch100_fsync.sqlite",
    "append.writers8.sqlite",
    "read.stream.sqlite",
    "read.all.sqlite",
    "read.last50.sqlite",
    "storage.none.sqlite",
    "storage.zstd.sqlite",
    "storage.zstd_dict.sqlite",
    "memory.read.sqlite",
]
WITH_LIMIT = [
    "append.single.sqlite",
    "append.batch100.sqlite",
    "append.writers8.sqlite",
    "read.stream.sqlite",
    "read.stream.memory",
    "read.last50.sqlite",
    "storage.zstd_dict.sqlite",
]


def test_runner_tiny(tmp_path: Path) -> None:
    lines: list[str] = []
    result = runner.run(
        runner.Options(
            sizes=TINY,
            backends=("memory", "sqlite"),
            peers=False,
            postgres=False,
            progress=lines.append,
            workdir=tmp_path / "work",
        )
    )
    figures = {f["key"]: f for f in result["figures"]}
    assert not [k for k in EXPECTED if k not in figures]
    for key in EXPECTED:
        value = figures[key]["value"] if not key.startswith("limit.") else figures[key]["limit"]
        assert value is not None and value > 0, key
    for key in WITH_LIMIT:
        fig = figures[key]
        assert fig["limit"] > 0, key
        assert fig["ratio"] == fig["value"] / fig["limit"], key
    assert figures["storage.zstd_dict.sqlite"]["goals"], "the storage goal is checked"
    for n in runner.BATCHES:  # raw SQLite checkpoints in its commits, eventlog at close: both timed
        assert "timed until closed" in figures[f"append.batch{n}.sqlite"]["note"]
    assert "without compactions" in figures["window.full_vs_trim"]["label"]
    per_commit, raw_note = figures["append.writers8.sqlite"]["note"].split("; ")
    assert per_commit.endswith(" appends per commit") and float(per_commit.split()[0]) >= 1.0
    assert raw_note.startswith("raw sqlite3 with 8 threads") and raw_note.endswith("x that")
    assert result["machine"]["cpus"] >= 1
    assert result["machine"]["sqlite"]
    assert result["peers"] == {}
    assert len(lines) == len(result["figures"])
    json.dumps(result)  # JSON-ready
    md = runner.to_markdown(result)
    assert md.count("\n") == len(result["figures"]) + 2


def test_reused_workdir(tmp_path: Path) -> None:
    """A second run in the same --workdir measures fresh stores (it used to collide or append)."""
    options = runner.Options(
        sizes=TINY, backends=("sqlite", "jsonl"), peers=False, postgres=False, workdir=tmp_path
    )
    first, second = runner.run(options), runner.run(options)
    assert first["workdir"] != second["workdir"]
    assert {Path(first["workdir"]).parent, Path(second["workdir"]).parent} == {tmp_path}
    assert [f["key"] for f in first["figures"]] == [f["key"] for f in second["figures"]]


def test_cli_bench_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    res = CliRunner().invoke(
        cli,
        [
            "bench",
            "--size",
            "tiny",
            "--backend",
            "memory",
            "--no-peers",
            "--json",
            str(out),
            "--workdir",
            str(tmp_path / "work"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "eventlog bench (tiny)" in res.output
    result = json.loads(out.read_text())
    assert result["command"].startswith("eventlog ")
    assert any(f["key"] == "read.stream.memory" and f["value"] > 0 for f in result["figures"])


def test_jsonl_format_floor_writes_eventlogs_lines(tmp_path: Path) -> None:
    """The floor is only a bound if it does the format's real work: same lines, valid chain."""
    data = conversation_events(25)
    rate = limits.jsonl_format_floor(tmp_path / "floor.jsonl", data, 10)
    assert rate > 0
    lines = (tmp_path / "floor.jsonl").read_bytes().splitlines()
    with el.open(f"jsonl://{tmp_path / 'store'}") as store:
        store.append("s", data[:1])
    stored = (tmp_path / "store" / "streams").glob("*.jsonl")
    ours = next(stored).read_bytes().splitlines()[1]  # after the header line
    assert list(orjson.loads(lines[0])) == list(orjson.loads(ours))
    prev, encode = GENESIS, msgspec.json.Encoder().encode
    for seq, (raw, d) in enumerate(zip(lines, data, strict=True), 1):
        line = orjson.loads(raw)
        assert line["seq"] == seq and line["batch_end"] == min(-(-seq // 10) * 10, 25)
        assert line["data"] == orjson.loads(encode(d))
        prev = chain_hash(
            prev,
            "s",
            seq,
            line["id"],
            line["ts"],
            line["type"],
            line["v"],
            None,
            None,
            b"",
            encode(d),
        )
        assert line["hash"] == prev.hex()


def test_raw_writers_store_every_event(tmp_path: Path) -> None:
    """The raw concurrent limits write what they claim: every event of every thread, in order."""
    data = conversation_events(30)
    assert raw_writers.sqlite_writers(tmp_path / "raw.db", data, 4, 10) > 0
    conn = sqlite3.connect(tmp_path / "raw.db")
    rows = conn.execute("SELECT stream, seq FROM events ORDER BY position").fetchall()
    conn.close()
    assert sorted(rows) == [(f"w{t}", s) for t in range(4) for s in range(1, 11)]
    for t in range(4):
        assert [s for w, s in rows if w == f"w{t}"] == list(range(1, 11))

    assert (raw_writers.lmdb_writers(tmp_path / "lmdb", data, 4, 10) or 0) > 0
    env = lmdb.open(str(tmp_path / "lmdb"), readonly=True, lock=False)
    assert env.stat()["entries"] == 40
    env.close()

    assert raw_writers.file_writers(tmp_path / "files", data, 4, 10) > 0
    for t in range(4):
        lines = (tmp_path / "files" / f"w{t}.jsonl").read_bytes().splitlines()
        assert [json.loads(line)["seq"] for line in lines] == list(range(1, 11))
