"""CLI `compact` against a real SQLite store file."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import eventlog as el
from eventlog.cli import cli
from eventlog.projections.window import context_window


@pytest.fixture
def url(tmp_path: Path) -> str:
    u = f"sqlite:///{tmp_path / 'cli.db'}"
    with el.open(u) as store:
        store.append("conv", [el.SystemInstructionSet(text="Be brief.")])
        for i in range(10):
            store.append(
                "conv",
                [
                    el.ModelInput.from_text(f"question {i} " + "word " * 40),
                    el.ModelOutput(parts=(el.TextPart(text=f"answer {i} " + "blah " * 40),)),
                ],
            )
    return u


def run(url: str, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", url, *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def _events(url: str) -> list[el.RecordedEvent]:
    with el.open(url) as store:
        return list(store.read("conv"))


def test_compact_appends_a_compaction_and_says_what_it_did(url: str) -> None:
    code, out, err = run(url, "compact", "conv", "--keep-last", "4")
    assert code == 0, err
    assert "compacted 'conv' seqs 1..17" in out and "into seq 22" in out
    last = _events(url)[-1]
    assert isinstance(last.data, el.Compaction)
    assert (last.data.first_seq, last.data.last_seq) == (1, 17)
    assert last.data.summarizer == "extractive-v1"
    with el.open(url) as store:
        window = context_window(store, "conv", budget=10**6)
    assert window.report is not None and window.report.summarised == 17 - 1  # all but the system
    code, out, err = run(url, "compact", "conv", "--keep-last", "4")
    assert code == 0, err
    assert "nothing to compact" in out
    assert len(_events(url)) == 22


def test_dry_run_writes_nothing(url: str) -> None:
    code, out, err = run(url, "compact", "conv", "--dry-run", "--max-summary-tokens", "60")
    assert code == 0, err
    assert out.startswith("would compact seqs 1..13 (13 events) as seq 22")
    assert "Summary of seqs 1-13" in out
    code, out, err = run(url, "compact", "conv", "--dry-run", "--json")
    assert code == 0, err
    got = orjson.loads(out)
    assert got["outcome"] == "dry_run" and got["plan"]["last_seq"] == 13
    assert len(_events(url)) == 21


def test_json_outcome(url: str) -> None:
    code, out, err = run(url, "compact", "conv", "--keep-last", "2", "--json")
    assert code == 0, err
    got = orjson.loads(out)
    assert got["outcome"] == "compacted" and got["seq"] == 22
    assert got["plan"] == {"first_seq": 1, "last_seq": 19, "at": 21, "supersedes": [], "events": 19}
    assert 0 < got["summary_tokens"] <= got["replaced_tokens"] // 2 + 20


def test_budget_compacts_only_when_due(url: str) -> None:
    code, out, err = run(url, "compact", "conv", "--budget", "100000", "--json")
    assert code == 0, err
    assert orjson.loads(out)["outcome"] == "not_due"
    assert len(_events(url)) == 21
    code, out, err = run(url, "compact", "conv", "--budget", "800")
    assert code == 0, err
    assert "compacted" in out and len(_events(url)) == 22


def test_summary_from_a_file_or_stdin(url: str, tmp_path: Path) -> None:
    code, out, err = run(url, "compact", "conv", "--summary", "-", stdin="We talked about x.\n")
    assert code == 0, err
    last = _events(url)[-1].data
    assert isinstance(last, el.Compaction)
    assert (last.summary, last.summarizer) == ("We talked about x.\n", "cli")


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["compact", "conv", "--summary", "-"], "  \n", "the summary is empty"),
        (["compact", "conv", "--keep-last", "-1"], None, "--keep-last"),
        (["compact", "conv", "--trigger", "0"], None, "--trigger"),
        (["compact", "nope"], None, "stream 'nope' does not exist"),
    ],
)
def test_bad_input_writes_nothing(
    url: str, args: list[str], stdin: str | None, message: str
) -> None:
    code, out, err = run(url, *args, stdin=stdin)
    assert code != 0
    assert message in out + err
    assert len(_events(url)) == 21


def test_no_store_is_created(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'missing.db'}"
    code, out, err = run(url, "compact", "conv")
    assert code != 0 and "no store at" in err
    assert not (tmp_path / "missing.db").exists()


def test_dry_run_shows_the_summary_that_is_then_written(url: str) -> None:
    code, out, err = run(url, "compact", "conv", "--dry-run", "--json")
    assert code == 0, err
    shown = orjson.loads(out)["summary"]
    code, out, err = run(url, "compact", "conv")
    assert code == 0, err
    written = _events(url)[-1].data
    assert isinstance(written, el.Compaction) and written.summary == shown
