"""CLI `window` and `render` against a real SQLite store file."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import eventlog as el
from eventlog.cli import cli
from eventlog.events import ModelInput
from eventlog.projections.providers.render import render
from eventlog.projections.window import context_window
from tests import render_windows as rw
from tests.test_window import history


@pytest.fixture
def url(tmp_path: Path) -> str:
    u = f"sqlite:///{tmp_path / 'cli.db'}"
    with el.open(u) as store:
        store.append("conv", history(6))
    return u


def run(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", url, *args])
    return result.exit_code, result.stdout, result.stderr


def test_window_json_matches_the_api(url: str) -> None:
    code, out, err = run(url, "window", "conv", "--budget", "400", "--json")
    assert code == 0, err
    got = orjson.loads(out)
    with el.open(url) as store:
        want = context_window(store, "conv", budget=400)
    assert got["seq"] == want.seq and got["system"] == want.system
    assert [i["seq"] for i in got["items"]] == [i.seq for i in want.items]
    report = got["report"]
    assert report["budget"] == 400 and report["tokens"] == want.report.tokens <= 400  # type: ignore[union-attr]
    assert report["counter"] == "estimate" and report["strategy"] == "summary_aware"
    assert {e["fate"] for e in report["entries"]} >= {"kept", "downgraded"}


def test_window_options(url: str) -> None:
    code, out, err = run(
        url, "window", "conv", "--budget", "100000", "--strategy", "sliding_window",
        "--turns", "1", "--counter", "o200k_base", "--at", "11", "--json",
    )  # fmt: skip
    assert code == 0, err
    got = orjson.loads(out)
    assert got["seq"] == 11 and got["report"]["counter"] == "o200k_base"
    inputs = [i["seq"] for i in got["items"] if i["data"]["type"] == "model_input"]
    assert inputs == [9]


def test_window_table(url: str) -> None:
    code, out, err = run(url, "window", "conv", "--budget", "400")
    assert code == 0, err
    assert "downgraded" in out and "/ 400 tokens" in out and "summary_aware" in out


def test_window_too_small_and_unknown_stream(url: str) -> None:
    code, out, err = run(url, "window", "conv", "--budget", "10")
    assert code == 1 and "WindowTooSmallError" in err and "short by" in err and out == ""
    code, _, err = run(url, "window", "nope", "--budget", "10")
    assert code == 1 and "StreamNotFoundError" in err
    code, _, err = run(url, "window", "conv", "--budget", "10", "--strategy", "newest")
    assert code == 2 and "newest" in err


@pytest.mark.parametrize("provider", ["openai-chat", "openai-responses", "anthropic", "gemini"])
def test_render_prints_the_request_body(url: str, provider: str) -> None:
    code, out, err = run(
        url, "render", "conv", "--provider", provider, "--model", "m",
        "--budget", "400", "--max-tokens", "256",
    )  # fmt: skip
    assert code == 0, err
    body = orjson.loads(out)
    with el.open(url) as store:
        window = context_window(store, "conv", budget=400, entries="window")
    assert body == orjson.loads(orjson.dumps(render(window, provider, model="m", max_tokens=256)))
    rw.CHECKERS[provider](body)


def test_render_whole_history_and_at(url: str) -> None:
    code, out, err = run(
        url, "render", "conv", "--provider", "anthropic", "--model", "m", "--at", "5"
    )
    assert code == 0, err
    body = orjson.loads(out)
    assert body["system"] == "Be brief." and body["max_tokens"] == 4096
    assert len(body["messages"]) == 3  # input, tool_use, tool_result
    with el.open(url) as store:
        store.append("conv", [ModelInput.from_text("more")])
    code, out, err = run(url, "render", "conv", "--provider", "openai-chat", "--model", "m")
    assert code == 0, err
    assert orjson.loads(out)["messages"][-1] == {"role": "user", "content": "more"}
    code, _, err = run(url, "render", "conv", "--provider", "nope", "--model", "m")
    assert code == 2


def test_render_sliding_window_turns_and_options_that_need_a_budget(url: str) -> None:
    base = ("render", "conv", "--provider", "openai-chat", "--model", "m")

    def user_messages(*extra: str) -> int:
        code, out, err = run(url, *base, *extra)
        assert code == 0, err
        return sum(m["role"] == "user" for m in orjson.loads(out)["messages"])

    assert user_messages() == 7  # 6 turns and the final question
    assert user_messages("--strategy", "sliding_window", "--turns", "2") == 2
    code, _, err = run(url, *base, "--turns", "2")
    assert code == 2 and "--turns" in err and "sliding_window" in err
    for extra in (("--counter", "o200k_base"), ("--calibrate",)):
        code, out, err = run(url, *base, *extra)
        assert code == 2 and extra[0] in err and "needs --budget" in err and out == ""
    code, out, err = run(url, *base, "--budget", "100000", "--calibrate")
    assert code == 0, err
