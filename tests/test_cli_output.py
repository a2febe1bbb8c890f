"""CLI output as scripts read it: whole lines at any width, names as written, and options that
mean nothing on their own refused rather than ignored."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import eventlog as el
from eventlog.cli import cli
from tests.backends import test_jsonl
from tests.test_cli_core import _on_a_terminal

NARROW = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | {"COLUMNS": "40"}
"""A width every line below is longer than (rich wraps at 80 when output is not a terminal)."""


def narrow(*args: str, store: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a subprocess whose stdout and stderr are pipes 40 columns wide."""
    return subprocess.run(
        [sys.executable, "-m", "eventlog", "--store", store, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=NARROW,
    )


def invoke(url: str, *args: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of one in-process CLI call."""
    result = CliRunner().invoke(cli, ["--store", url, *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_lines_are_never_broken_at_the_width(tmp_path: Path) -> None:
    """Errors, verify's problems, search hits and one-line reports stay one line each when
    piped: `grep`, `head` and a script's line reader see whole messages."""
    url = f"jsonl://{tmp_path}/j"
    with el.open(url) as store:
        store.append("a-long-stream-name", [el.ModelInput.from_text(f"m{i}") for i in range(3)])
        test_jsonl.TestJSONL().tamper(store, "a-long-stream-name", 2)
    done = narrow("verify", store=url)
    assert done.returncode == 1
    assert re.search(r"^a-long-stream-name seq 2 \(.+\): .+ altered$", done.stdout, re.M)
    assert len(done.stdout.splitlines()) == 2, done.stdout
    failed = narrow("replay", "a-long-stream-name", "--at", "99", store=url)
    assert failed.returncode == 1
    assert failed.stderr.count("\n") == 1, failed.stderr
    assert "must be between 0 and 3 (the end of 'a-long-stream-name'), got 99" in failed.stderr


def test_search_prints_one_line_per_hit(tmp_path: Path) -> None:
    """A snippet spanning lines of the event's text is shown on one line."""
    url = f"sqlite:///{tmp_path}/s.db?search=on"
    with el.open(url) as store:
        store.append("s", [el.ModelInput.from_text("the first line\nthe build fails here")])
        store.append("s", [el.ModelInput.from_text("another build, " + "word " * 30)])
    done = narrow("search", "build", store=url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all(re.match(r"s@[12]  ", line) for line in lines), lines
    assert "the first line the [build] fails here" in done.stdout


def test_a_connection_error_over_several_lines_is_one_line(tmp_path: Path) -> None:
    """libpq's messages end with a hint on a line of its own: the error stays one line."""
    pytest.importorskip("psycopg")
    done = narrow("streams", store="postgresql://127.0.0.1:1/test?connect_timeout=2")
    assert done.returncode == 1
    assert done.stderr.startswith("error: BackendUnavailableError: ")
    assert done.stderr.count("\n") == 1, done.stderr


def test_compact_prints_stream_names_as_written(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/c.db"
    names = ["[red]x", "a\\[b]", "it's"]
    with el.open(url) as store:
        for name in names:
            store.append(
                name,
                [
                    el.ModelInput.from_text("a question " * 10),
                    el.ModelOutput(parts=(el.TextPart(text="an answer " * 10),)),
                    el.ModelInput.from_text("again"),
                ],
            )
    for name in names:
        code, out, err = invoke(url, "compact", name, "--keep-last", "1")
        assert code == 0, err
        assert out.startswith(f"compacted {name!r} seqs 1..2 "), out
        code, out, err = invoke(url, "compact", name, "--keep-last", "1")
        assert code == 0 and out.startswith(f"nothing to compact in {name!r}: "), out


def test_options_that_need_another_are_refused(tmp_path: Path) -> None:
    """--trigger only applies with --budget, as --keep-snapshots with --save-snapshot."""
    url = f"sqlite:///{tmp_path}/c.db"
    with el.open(url) as store:
        store.append("s", [el.ModelInput.from_text(f"q{i}") for i in range(3)])
    code, _, err = invoke(url, "compact", "s", "--trigger", "0.5")
    assert code == 2 and "--trigger" in err and "--budget" in err
    code, _, err = invoke(url, "compact", "s", "--trigger", "0.5", "--budget", "100000", "--json")
    assert code == 0, err


@pytest.mark.parametrize("limit", ["0", "-1", str(2**63)])
def test_search_limit_is_checked_as_an_option(tmp_path: Path, limit: str) -> None:
    """A bad --limit is a usage error (exit 2) naming the option, as for every other option."""
    url = f"sqlite:///{tmp_path}/s.db?search=on"
    with el.open(url) as store:
        store.append("s", [el.ModelInput.from_text("the build fails")])
    code, _, err = invoke(url, "search", "build", "--limit", limit)
    assert code == 2 and "'--limit'" in err, err
    assert invoke(url, "search", "build", "--limit", "1")[0] == 0


def test_export_shows_progress_while_it_verifies_the_copy(tmp_path: Path) -> None:
    """The target is read again after the copy (as long as the copy itself): the bar says so."""
    source = f"sqlite:///{tmp_path}/src.db"
    with el.open(source) as store:
        store.append("s", [el.ModelInput.from_text(f"m{i}") for i in range(2000)])
    code, _, terminal = _on_a_terminal("export", f"lmdb://{tmp_path}/copy", store=source)
    assert code == 0
    assert "copying" in terminal and "verifying the copy" in terminal
    assert "2000/2000" in terminal.split("verifying the copy", 1)[1]


def test_erase_warns_on_one_line(tmp_path: Path) -> None:
    """Events stored before encryption was turned on stay readable: said on one line."""
    plain, keyed = f"sqlite:///{tmp_path}/e.db", f"sqlite:///{tmp_path}/e.db?keys={tmp_path}/k"
    with el.open(plain) as store:
        store.append("s", [el.ModelInput.from_text("before")])
    with el.open(keyed) as store:
        store.append("s", [el.ModelInput.from_text("after")])
    done = narrow("erase", "s", "--yes", store=keyed)
    assert done.returncode == 1
    assert done.stderr.startswith("warning: 1 event of 's' was stored unencrypted")
    assert done.stderr.count("\n") == 1, done.stderr
