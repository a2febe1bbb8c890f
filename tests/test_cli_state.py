"""CLI: replay, fork and log against a real, durable store."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import eventlog as el
from eventlog.cli import cli
from tests.conftest import BACKENDS

DURABLE = next(b for b in ("sqlite", "lmdb", "jsonl") if b in BACKENDS)


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = {
        "sqlite": f"sqlite:///{tmp_path}/cli.db",
        "lmdb": f"lmdb:///{tmp_path}/cli-lmdb",
        "jsonl": f"jsonl:///{tmp_path}/cli-jsonl",
    }[DURABLE]
    with el.open(url) as store:
        call = el.ToolCall.parse("c1", "read_file", '{"path": "a [b].py"}')
        store.append(
            "chat",
            [
                el.SystemInstructionSet(text="be brief"),
                el.ToolsetDefined(tools=(el.ToolSpec(name="read_file"),)),
                el.ModelInput.from_text("read a [b].py"),
                el.ModelOutput(
                    tool_calls=(call,),
                    invocation=el.Invocation(provider="openai", specification="chat", model="m"),
                    usage=el.Usage(prompt_tokens=10, completion_tokens=2),
                ),
                el.ToolResults(results=(el.ToolResult(call_id="c1", tool_name="read_file"),)),
                el.Checkpoint(label="read"),
                el.ModelOutput(parts=(el.TextPart(text="done"),)),
                el.Custom(kind="note", data={"x": 1}),
            ],
        )
    return url


def run(url: str, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--store", url, *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def fail(url: str, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--store", url, *args])
    assert result.exit_code != 0
    return " ".join(result.output.split())  # the error console wraps long lines


def test_log_human_and_json_lines(url: str) -> None:
    out = run(url, "log", "chat")
    lines = out.splitlines()
    assert len(lines) == 8
    assert "model_input" in lines[2] and "read a [b].py" in lines[2]
    assert "read_file#c1" in lines[3]
    docs = [orjson.loads(line) for line in run(url, "log", "chat", "--json").splitlines()]
    assert [d["seq"] for d in docs] == list(range(1, 9))
    assert docs[3]["type"] == "model_output"
    assert docs[3]["data"]["tool_calls"][0]["raw_arguments"] == '{"path": "a [b].py"}'
    assert set(docs[0]) >= {"stream", "seq", "id", "position", "ts", "type", "data", "meta", "hash"}
    some = [
        orjson.loads(x)
        for x in run(url, "log", "chat", "--from", "3", "--to", "4", "--json").splitlines()
    ]
    assert [d["seq"] for d in some] == [3, 4]


def test_replay_json_is_complete(url: str) -> None:
    doc = orjson.loads(run(url, "replay", "chat", "--json"))
    assert doc["stream"] == "chat" and doc["seq"] == 8
    assert doc["system"] == {"seq": 1, "text": "be brief"}
    assert [m["kind"] for m in doc["messages"]] == ["input", "output", "tool_results", "output"]
    assert doc["messages"][1]["call_ids"] == ["c1"]
    assert doc["messages"][2]["event"]["results"][0]["call_id"] == "c1"
    assert doc["usage"][0]["prompt_tokens"] == 10
    assert doc["checkpoints"] == [{"seq": 6, "label": "read"}]
    assert doc["open_calls"] == [] and doc["warnings"] == []
    at4 = orjson.loads(run(url, "replay", "chat", "--at", "4", "--json"))
    assert at4["seq"] == 4 and at4["open_calls"][0]["call"]["id"] == "c1"


def test_replay_human_output(url: str) -> None:
    out = run(url, "replay", "chat")
    assert "chat at seq 8" in out and "be brief" in out and "read@6" in out
    assert "tool_results" in out


def test_replay_saves_a_snapshot_on_request(url: str) -> None:
    run(url, "replay", "chat", "--at", "6", "--save-snapshot")
    with el.open(url) as store:
        assert store.backend.load_snapshot("chat", "conversation", 1, None) is not None
    assert orjson.loads(run(url, "replay", "chat", "--json"))["seq"] == 8


def test_replay_keeps_the_newest_snapshots(url: str) -> None:
    for at in ("2", "4", "6", "8"):
        run(url, "replay", "chat", "--at", at, "--save-snapshot", "--keep-snapshots", "2")
    with el.open(url) as store:
        assert store.backend.snapshot_seqs("chat", "conversation", 1) == [6, 8]
    run(url, "replay", "chat", "--at", "3", "--save-snapshot", "--keep-snapshots", "0")
    with el.open(url) as store:
        assert store.backend.snapshot_seqs("chat", "conversation", 1) == [3, 6, 8]


def test_replay_errors(url: str) -> None:
    assert "between 0 and 8" in fail(url, "replay", "chat", "--at", "9")
    assert "does not exist" in fail(url, "replay", "nope")


def test_replay_policy_on_a_broken_stream(url: str) -> None:
    with el.open(url) as store:
        store.append("bad", [el.ToolResults(results=(el.ToolResult(call_id="x", tool_name="t"),))])
    assert "ConversationError" in fail(url, "replay", "bad")
    doc = orjson.loads(run(url, "replay", "bad", "--policy", "warn", "--json"))
    assert doc["warnings"][0]["seq"] == 1 and "never made" in doc["warnings"][0]["message"]


def test_fork_at_seq_and_checkpoint(url: str) -> None:
    doc = orjson.loads(run(url, "fork", "chat", "retry", "--checkpoint", "read", "--json"))
    assert doc == {"stream": "retry", "parent": "chat", "at_seq": 6}
    assert "at seq 3" in run(url, "fork", "chat", "early", "--at", "3")
    assert orjson.loads(run(url, "replay", "early", "--json"))["seq"] == 3
    lines = run(url, "log", "retry").splitlines()
    assert len(lines) == 6 and "(chat)" in lines[0]
    assert "no checkpoint 'nope'" in fail(url, "fork", "chat", "x", "--checkpoint", "nope")
    assert "not both" in fail(url, "fork", "chat", "x", "--at", "1", "--checkpoint", "read")
    assert "already exists" in fail(url, "fork", "chat", "retry", "--at", "1")
    assert "field 'at': must be between 1 and" in fail(url, "fork", "chat", "late", "--at", "99")
    with el.open(url) as store:
        with pytest.raises(el.StreamNotFoundError):
            store.ancestry("missing")
        with pytest.raises(el.StreamNotFoundError):
            store.forks("missing")
        assert store.ancestry("retry") == [("chat", 6)] and store.forks("early") == []
