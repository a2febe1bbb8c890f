"""Tool names each provider accepts: rewritten when rendered, given back when ingested."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import eventlog as el
from eventlog.cli import cli
from eventlog.errors import UsageError
from eventlog.projections.providers.ingest import ingest_response, ingest_text
from eventlog.projections.providers.render import PROVIDERS, render
from eventlog.projections.providers.tool_names import (
    provider_tool_name,
    restore_tool_names,
    tool_namer,
)
from tests.render_windows import call, calls_out, ok, results, text_in, win

# The rules as the providers document them (written out here, not taken from the module).
OPENAI_ANTHROPIC = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
GEMINI = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$")
RULES = {
    "openai-chat": OPENAI_ANTHROPIC,
    "openai-responses": OPENAI_ANTHROPIC,
    "anthropic": OPENAI_ANTHROPIC,
    "gemini": GEMINI,
}

ODD_NAMES = ["files.read", "mcp:fs/read", "x" * 80, "名前", "", "9lives", "-dash", "a b"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_valid_names_are_kept(provider: str) -> None:
    for name in ["get_weather", "search", "A-b_9", "x" * 64]:
        assert provider_tool_name(provider, name) == name


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("name", ODD_NAMES)
def test_invalid_names_become_valid_ones(provider: str, name: str) -> None:
    sent = provider_tool_name(provider, name)
    assert RULES[provider].match(sent), sent
    if RULES[provider].match(name):
        assert sent == name
    else:
        assert sent != name and re.search(r"_[0-9a-f]{10}$", sent)


def test_gemini_keeps_dots_and_colons_others_do_not() -> None:
    assert provider_tool_name("gemini", "files.read") == "files.read"
    assert provider_tool_name("gemini", "mcp:fs.read") == "mcp:fs.read"
    assert provider_tool_name("anthropic", "files.read").startswith("files_read_")
    assert provider_tool_name("gemini", "9lives").startswith("_9lives_")


@given(st.lists(st.text(max_size=90), min_size=1, max_size=8, unique=True))
def test_any_names_map_to_distinct_valid_names(names: list[str]) -> None:
    for provider, rule in RULES.items():
        namer = tool_namer(provider)
        sent = [namer(n) for n in names]
        assert all(rule.match(s) for s in sent), sent
        assert len(set(sent)) == len(names), (names, sent)
        assert sent == [provider_tool_name(provider, n) for n in names]


def test_unknown_provider_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown provider"):
        provider_tool_name("cohere", "x")


TOOLS = (
    el.ToolSpec(name="files.read", parameters={"type": "object", "properties": {}}),
    el.ToolSpec(name="fs/write", parameters={"type": "object", "properties": {}}),
    el.ToolSpec(name="search"),
)


def _window() -> Any:
    calls = [call("c1", "files.read", "{}"), call("c2", "fs/write", "{}"), call("c3", "search", "")]
    return win(
        text_in("Read then write."),
        calls_out(*calls),
        results(ok("c1", "files.read", "A"), ok("c2", "fs/write", "done"), ok("c3", "search", "-")),
        tools=TOOLS,
    )


def _names(provider: str, body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(tool definition names, names in calls and results) of a rendered body."""
    if provider == "openai-chat":
        defined = [t[t["type"]]["name"] for t in body["tools"]]
        used = [c[c["type"]]["name"] for m in body["messages"] for c in m.get("tool_calls") or []]
    elif provider == "openai-responses":
        defined = [t["name"] for t in body["tools"]]
        used = [i["name"] for i in body["input"] if i.get("type") == "function_call"]
    elif provider == "anthropic":
        defined = [t["name"] for t in body["tools"]]
        used = [
            b["name"] for m in body["messages"] for b in m["content"] if b["type"] == "tool_use"
        ]
    else:
        defined = [d["name"] for t in body["tools"] for d in t["functionDeclarations"]]
        used = [
            p[k]["name"]
            for c in body["contents"]
            for p in c["parts"]
            for k in ("functionCall", "functionResponse")
            if k in p
        ]
    return defined, used


@pytest.mark.parametrize("provider", PROVIDERS)
def test_rendered_definitions_calls_and_results_agree(provider: str) -> None:
    body = render(_window(), provider, model="m", max_tokens=100)
    defined, used = _names(provider, body)
    expected = [provider_tool_name(provider, t.name) for t in TOOLS]
    assert defined == expected
    assert all(RULES[provider].match(n) for n in defined + used), (defined, used)
    assert set(used) == set(expected)  # each call (and Gemini's responses) by its sent name
    if provider != "gemini":
        assert "files.read" not in defined and "search" in defined


def test_anthropic_defines_renamed_history_tools_when_the_window_has_none() -> None:
    window = win(
        text_in("Go."),
        calls_out(call("c1", "files.read", "{}")),
        results(ok("c1", "files.read", "A")),
        tools=(),
    )
    body = render(window, "anthropic", model="m")
    sent = provider_tool_name("anthropic", "files.read")
    assert [t["name"] for t in body["tools"]] == [sent]
    assert body["messages"][1]["content"][0]["name"] == sent


RESPONSES: dict[str, Any] = {
    "anthropic": lambda name: {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    },
    "openai-chat": lambda name: {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-x",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": name, "arguments": "{}"},
                        }
                    ],
                },
            }
        ],
    },
    "openai-responses": lambda name: {
        "id": "resp_1",
        "object": "response",
        "model": "gpt-x",
        "status": "completed",
        "output": [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": name,
                "arguments": "{}",
                "status": "completed",
            }
        ],
    },
    "gemini": lambda name: {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"functionCall": {"name": name, "args": {}}}],
                },
                "finishReason": "STOP",
            }
        ],
        "modelVersion": "gemini-x",
    },
}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_ingest_gives_the_stream_its_names_back(provider: str) -> None:
    sent = provider_tool_name(provider, "fs/write")
    body = RESPONSES[provider](sent)
    assert ingest_response(provider, body).tool_calls[0].name == sent  # no tools: as sent
    assert ingest_response(provider, body, tools=TOOLS).tool_calls[0].name == "fs/write"
    text = orjson.dumps(body).decode()
    assert ingest_text(provider, text, tools=["fs/write"]).tool_calls[0].name == "fs/write"
    # A name no tool was renamed to stays as the model wrote it.
    other = ingest_response(provider, RESPONSES[provider]("search"), tools=TOOLS)
    assert other.tool_calls[0].name == "search"


def test_restore_returns_the_output_itself_when_nothing_is_renamed() -> None:
    output = el.ModelOutput(tool_calls=(call("c1", "search", "{}"),))
    assert restore_tool_names(output, "anthropic", TOOLS) is output
    assert restore_tool_names(output, "anthropic", ()) is output
    with pytest.raises(UsageError, match="ToolSpecs or names"):
        restore_tool_names(output, "anthropic", [3])  # type: ignore[list-item]


def test_cli_ingest_restores_names_from_the_streams_toolset(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    with el.open(url) as store:
        store.append("conv", [el.Event(data=el.ToolsetDefined(tools=TOOLS))])
    response = tmp_path / "response.json"
    sent = provider_tool_name("anthropic", "files.read")
    response.write_bytes(orjson.dumps(RESPONSES["anthropic"](sent)))
    result = CliRunner().invoke(
        cli, ["--store", url, "ingest", "conv", "--provider", "anthropic", str(response)]
    )
    assert result.exit_code == 0, result.stderr
    fresh = tmp_path / "fresh.db"
    result = CliRunner().invoke(
        cli,
        [
            "--store",
            f"sqlite:///{fresh}",
            "ingest",
            "new",
            "--provider",
            "anthropic",
            str(response),
        ],
    )
    assert result.exit_code == 0, result.stderr
    with el.open(url) as store:
        output = store.get("conv", 2).data
        assert isinstance(output, el.ModelOutput)
        assert output.tool_calls[0].name == "files.read"
    with el.open(f"sqlite:///{fresh}") as store:
        output = store.get("new", 1).data
        assert isinstance(output, el.ModelOutput)
        assert output.tool_calls[0].name == sent  # a new stream has no toolset to map to
