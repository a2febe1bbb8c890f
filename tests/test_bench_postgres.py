"""The benchmark runner on PostgreSQL: every append and read figure against raw psycopg, and
nothing left in the database afterwards. Shapes only, never speed (see test_bench_smoke)."""

from __future__ import annotations

import os

import pytest

from eventlog.bench import runner
from eventlog.bench.common import TINY
from tests.postgres import DATABASE, connect, require_server

POSTGRES_FIGURES = [
    "append.single.postgres",
    "append.batch10.postgres",
    "append.batch100.postgres",
    "append.batch1000.postgres",
    "append.writers8.postgres",
    "read.stream.postgres",
    "read.all.postgres",
    "read.last50.postgres",
    "replay.state.postgres",
]


def _leftovers() -> list[str]:
    """Schemas and tables of this process's benchmark figures still in the database."""
    pattern = f"eventlog\\_bench\\_{os.getpid()}\\_%"
    with connect() as conn:
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s "
            "UNION ALL SELECT tablename FROM pg_tables WHERE tablename LIKE %s",
            (pattern, pattern),
        ).fetchall()
    return [r[0] for r in rows]


def test_every_postgres_figure_has_its_raw_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    require_server()
    monkeypatch.setenv("EVENTLOG_BENCH_POSTGRES", DATABASE)
    lines: list[str] = []
    result = runner.run(
        runner.Options(sizes=TINY, backends=("postgres",), peers=False, progress=lines.append)
    )
    figures = {f["key"]: f for f in result["figures"]}
    for key in POSTGRES_FIGURES:
        fig = figures[key]
        assert fig["value"] > 0 and fig["limit"] > 0, key
        assert fig["ratio"] == fig["value"] / fig["limit"], key
    assert figures["append.single.postgres"]["limit_label"] == "psycopg autocommit INSERT"
    assert "synchronous_commit=on" in figures["append.batch100.postgres"]["note"]
    assert [g["goal"] for g in figures["append.batch100.postgres"]["goals"]] == ["x limit >= 0.8"]
    raw_note = figures["append.writers8.postgres"]["note"]
    assert "raw psycopg, 8 threads each autocommitting INSERTs" in raw_note
    assert not any(line.startswith("skipping postgres") for line in lines)
    assert _leftovers() == []


def test_postgres_is_skipped_with_the_reason_when_no_server_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EVENTLOG_BENCH_POSTGRES", "postgresql://127.0.0.1:1/none")
    lines: list[str] = []
    result = runner.run(
        runner.Options(sizes=TINY, backends=("postgres",), peers=False, progress=lines.append)
    )
    assert not [f for f in result["figures"] if f["key"].endswith(".postgres")]
    said = "skipping postgres: no server answers at postgresql://127.0.0.1:1/none"
    assert any(line.startswith(said) for line in lines), lines
