"""CLI `import` and `ingest` against real SQLite store files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import eventlog
from eventlog.cli import cli
from eventlog.projections.providers.importers import history_events
from tests import test_import as import_samples
from tests import test_ingest_anthropic as anthropic_samples
from tests import test_ingest_gemini as gemini_samples
from tests import test_ingest_openai_chat as chat_samples
from tests import test_ingest_openai_responses as responses_samples
from tests.fake_provider import sse_text


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/cli.db"


def run(url: str, *args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", url, *args], input=input)
    return result.exit_code, result.stdout, result.stderr


def test_import_then_ingest_json_and_sse(url: str, tmp_path: Path) -> None:
    history = tmp_path / "history.json"
    history.write_bytes(orjson.dumps(import_samples.chat_history()))
    code, out, err = run(url, "import", "conv", "--format", "openai-chat", str(history))
    assert code == 0, err
    written = orjson.loads(out)
    assert written["stream"] == "conv" and written["count"] == 8
    assert [e["seq"] for e in written["events"]] == list(range(1, 9))
    assert written["events"][0]["type"] == "system_instruction_set"

    body = tmp_path / "response.json"
    body.write_bytes(orjson.dumps(chat_samples.completion()))
    code, out, err = run(url, "ingest", "conv", "--provider", "openai-chat", str(body))
    assert code == 0, err
    assert [(e["seq"], e["type"]) for e in orjson.loads(out)["events"]] == [(9, "model_output")]

    sse = sse_text(chat_samples.chunks(), done=True)
    code, out, err = run(url, "ingest", "conv", "--provider", "openai-chat", "-", input=sse)
    assert code == 0, err
    event_id = orjson.loads(out)["events"][0]["id"]

    with eventlog.open(url) as store:
        records = list(store.read("conv"))
        assert [r.data for r in records[:8]] == history_events(
            "openai-chat", import_samples.chat_history()
        )
        assert records[8].data == records[9].data == chat_samples.EXPECTED
        assert records[9].id == event_id
        assert records[9].meta == {"source": "ingest:openai-chat"}


@pytest.mark.parametrize(
    ("provider", "text", "expected"),
    [
        (
            "openai-responses",
            sse_text(responses_samples.events(), named=True),
            responses_samples.EXPECTED,
        ),
        ("anthropic", sse_text(anthropic_samples.events(), named=True), anthropic_samples.EXPECTED),
        ("anthropic", orjson.dumps(anthropic_samples.body()).decode(), anthropic_samples.EXPECTED),
        ("gemini", sse_text(gemini_samples.chunks()), gemini_samples.EXPECTED),
        ("gemini", orjson.dumps(gemini_samples.body()).decode(), gemini_samples.EXPECTED),
    ],
)  # fmt: skip
def test_ingest_each_provider(url: str, provider: str, text: str, expected: object) -> None:
    code, out, err = run(url, "ingest", "s", "--provider", provider, "-", input=text)
    assert code == 0, err
    with eventlog.open(url) as store:
        assert store.get("s", 1).data == expected


@pytest.mark.parametrize("fmt", ["anthropic", "openai-responses"])
def test_import_other_formats(url: str, fmt: str) -> None:
    body = (
        import_samples.anthropic_history()
        if fmt == "anthropic"
        else import_samples.responses_history()
    )
    code, out, err = run(
        url, "import", "s", "--format", fmt, "-", input=orjson.dumps(body).decode()
    )
    assert code == 0, err
    assert orjson.loads(out)["count"] == 7


def test_a_second_import_into_the_stream_is_refused(url: str, tmp_path: Path) -> None:
    """An import makes a new stream: the same history again would repeat it."""
    history = tmp_path / "history.json"
    history.write_bytes(orjson.dumps(import_samples.chat_history()))
    args = ("import", "conv", "--format", "openai-chat", str(history))
    assert run(url, *args)[0] == 0
    code, _, err = run(url, *args)
    assert code == 1 and "ConcurrencyError" in err
    with eventlog.open(url) as store:
        assert store.stream_info("conv").last_seq == 8
    code, out, err = run(url, *args, "--expected-seq", "8")  # asked for: appended after seq 8
    assert code == 0, err
    assert orjson.loads(out)["events"][0]["seq"] == 9
    body = orjson.dumps(chat_samples.completion()).decode()
    ingest = ("ingest", "conv", "--provider", "openai-chat", "-", "--expected-seq", "3")
    code, _, err = run(url, *ingest, input=body)
    assert code == 1 and "ConcurrencyError" in err
    for bad in ("soon", "\u00b2", "-1"):  # "²".isdigit() is True, int("²") fails
        code, _, err = run(url, *args, "--expected-seq", bad)
        assert code == 2 and "must be a seq, 'any' or 'no_stream'" in err


def test_bad_import_fails_cleanly_and_writes_nothing(url: str) -> None:
    body = import_samples.chat_history()
    body["messages"][4] = {"role": "tool", "tool_call_id": "nope", "content": ""}
    code, out, err = run(
        url, "import", "s", "--format", "openai-chat", "-", input=orjson.dumps(body).decode()
    )
    assert code == 1 and out == ""
    assert "messages[4].tool_call_id" in err and "never made" in err
    code, out, _ = run(url, "import", "s", "--format", "openai-chat", "-", input="{not json")
    assert code == 1
    with eventlog.open(url) as store:
        assert not store.exists("s")


def test_truncated_stream_fails_cleanly(url: str) -> None:
    sse = sse_text(anthropic_samples.events()[:-3], named=True)
    code, out, err = run(url, "ingest", "s", "--provider", "anthropic", "-", input=sse)
    assert code == 1 and out == ""
    assert "ProviderMappingError" in err and "truncated" in err


def test_console_script_in_a_subprocess(url: str, tmp_path: Path) -> None:
    history = tmp_path / "h.json"
    history.write_bytes(orjson.dumps(import_samples.anthropic_history()))
    cmd = [str(Path(sys.executable).parent / "eventlog"), "--store", url]
    done = subprocess.run(
        [*cmd, "import", "c", "--format", "anthropic", str(history)],
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert orjson.loads(done.stdout)["count"] == 7
    with eventlog.open(url) as store:
        assert store.stream_info("c").last_seq == 7


def test_help_documents_both_commands() -> None:
    for command in ("import", "ingest"):
        result = CliRunner().invoke(cli, [command, "--help"])
        assert result.exit_code == 0 and "FILE" in result.output
