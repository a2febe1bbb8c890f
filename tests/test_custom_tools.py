"""OpenAI custom (free-form) tools: kept as custom from ingest and import, sent back as custom.

A custom tool takes free text (optionally in a grammar) instead of JSON arguments. Its calls are
`custom_tool_call` items (Responses) or `type: custom` tool calls (Chat), and the API pairs them
with custom tool definitions: a custom call sent back as a `function_call` names a tool that is
not a function. Providers without custom tools see a function of one string, `input`.
"""

from __future__ import annotations

from typing import Any

import pytest

from eventlog import ToolCall, ToolSpec
from eventlog.events import ModelOutput, ToolsetDefined
from eventlog.projections.providers import ingest_openai_chat, ingest_openai_responses
from eventlog.projections.providers.common import HistoryImportError
from eventlog.projections.providers.importers import history_events
from eventlog.projections.providers.render import render
from eventlog.projections.tokens import EstimateCounter
from eventlog.projections.window import context_window
from tests import render_windows as rw

PATCH_FORMAT = rw.PATCH.format


def test_a_custom_call_keeps_its_input_unparsed() -> None:
    call = ToolCall.parse("c1", "run_shell", "ls -la", custom=True)
    assert (call.raw_arguments, call.arguments, call.parse_error) == ("ls -la", None, None)
    assert ToolCall.parse("c1", "run_shell", "ls -la").parse_error is not None


def _responses_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in body["input"] if i.get("type") != "message"]


def test_responses_renders_custom_calls_outputs_and_tools() -> None:
    body = render(rw.custom_tools(), "openai-responses", model="gpt-x")
    assert _responses_items(body) == [
        {
            "type": "custom_tool_call",
            "id": "ctc_1",
            "call_id": "call_c1",
            "name": "apply_patch",
            "input": "*** Begin Patch\n+fix\n",
        },
        {
            "type": "function_call",
            "id": "fc_2",
            "call_id": "call_f2",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        },
        {"type": "custom_tool_call_output", "call_id": "call_c1", "output": "applied"},
        {"type": "function_call_output", "call_id": "call_f2", "output": "18C"},
        # From Chat Completions: no Responses item id, and an empty input stays empty.
        {"type": "custom_tool_call", "call_id": "call_c3", "name": "run_shell", "input": ""},
        {"type": "custom_tool_call_output", "call_id": "call_c3", "output": "Error: exit 1"},
    ]
    assert body["tools"][1:] == [
        {
            "type": "custom",
            "name": "apply_patch",
            "description": "Apply a patch to the repository.",
            "format": PATCH_FORMAT,
        },
        {"type": "custom", "name": "run_shell", "format": {"type": "text"}},
    ]


def test_chat_renders_custom_calls_and_nests_the_grammar() -> None:
    body = render(rw.custom_tools(), "openai-chat", model="gpt-x")
    calls = [c for m in body["messages"] for c in m.get("tool_calls", ())]
    assert calls[0] == {
        "id": "call_c1",
        "type": "custom",
        "custom": {"name": "apply_patch", "input": "*** Begin Patch\n+fix\n"},
    }
    assert calls[1]["type"] == "function"
    assert calls[2] == {
        "id": "call_c3",
        "type": "custom",
        "custom": {"name": "run_shell", "input": ""},
    }
    assert body["tools"][1:] == [
        {
            "type": "custom",
            "custom": {
                "name": "apply_patch",
                "description": "Apply a patch to the repository.",
                "format": {
                    "type": "grammar",
                    "grammar": {"syntax": "lark", "definition": PATCH_FORMAT["definition"]},
                },
            },
        },
        {"type": "custom", "custom": {"name": "run_shell", "format": {"type": "text"}}},
    ]


def test_providers_without_custom_tools_see_a_function_of_one_string() -> None:
    anthropic = render(rw.custom_tools(), "anthropic", model="claude-x")
    uses = [b for m in anthropic["messages"] for b in m["content"] if b["type"] == "tool_use"]
    assert [u["input"] for u in uses] == [
        {"input": "*** Begin Patch\n+fix\n"},
        {"city": "Paris"},
        {"input": ""},
    ]
    patch_tool = anthropic["tools"][1]
    assert patch_tool["name"] == "apply_patch"
    schema = patch_tool["input_schema"]
    assert schema["required"] == ["input"] and schema["properties"]["input"]["type"] == "string"
    assert PATCH_FORMAT["definition"] in schema["properties"]["input"]["description"]

    gemini = render(rw.custom_tools(), "gemini", model="gemini-x")
    args = [
        p["functionCall"]["args"]
        for c in gemini["contents"]
        for p in c["parts"]
        if "functionCall" in p
    ]
    assert args == [{"input": "*** Begin Patch\n+fix\n"}, {"city": "Paris"}, {"input": ""}]
    declarations = gemini["tools"][0]["functionDeclarations"]
    assert declarations[2]["parameters"]["properties"]["input"]["type"] == "string"


def test_responses_ingest_keeps_a_custom_call_custom() -> None:
    output = ingest_openai_responses.ingest_response(
        {
            "id": "resp_1",
            "object": "response",
            "model": "gpt-x",
            "status": "completed",
            "output": [
                {
                    "type": "custom_tool_call",
                    "id": "ctc_9",
                    "call_id": "call_9",
                    "name": "apply_patch",
                    "input": "*** Begin Patch\n",
                    "status": "completed",
                }
            ],
        }
    )
    assert output.tool_calls == (
        ToolCall(
            id="call_9",
            name="apply_patch",
            raw_arguments="*** Begin Patch\n",
            item_id="ctc_9",
            custom=True,
            after=0,
        ),
    )


def test_chat_ingest_keeps_a_custom_call_custom() -> None:
    output = ingest_openai_chat.ingest_response(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
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
                                "type": "custom",
                                "custom": {"name": "run_shell", "input": "make test"},
                            }
                        ],
                    },
                }
            ],
        }
    )
    assert output.tool_calls == (
        ToolCall(id="call_1", name="run_shell", raw_arguments="make test", custom=True),
    )


def _calls_and_tools(events: list[Any]) -> tuple[list[ToolCall], list[ToolSpec]]:
    calls = [c for e in events if isinstance(e, ModelOutput) for c in e.tool_calls]
    tools = [t for e in events if isinstance(e, ToolsetDefined) for t in e.tools]
    return calls, tools


def test_render_then_import_keeps_custom_calls_and_formats() -> None:
    window = rw.custom_tools()
    for fmt in ("openai-responses", "openai-chat"):
        body = render(window, fmt, model="gpt-x")
        calls, tools = _calls_and_tools(history_events(fmt, body))
        assert [(c.name, c.custom, c.raw_arguments) for c in calls] == [
            ("apply_patch", True, "*** Begin Patch\n+fix\n"),
            ("get_weather", False, '{"city": "Paris"}'),
            ("run_shell", True, ""),
        ], fmt
        assert tools == [rw.WEATHER, rw.PATCH, rw.SHELL], fmt
        # ... and a window of the imported events renders the same calls again.
        again = render(
            context_window(history_events(fmt, body), "conv", budget=10**9), fmt, model="gpt-x"
        )
        assert again == body, fmt


@pytest.mark.parametrize(
    ("fmt", "tool"),
    [
        ("openai-responses", {"type": "custom", "name": "t", "format": {"type": "xml"}}),
        (
            "openai-responses",
            {"type": "custom", "name": "t", "format": {"type": "grammar", "syntax": "peg"}},
        ),
        ("openai-chat", {"type": "custom", "custom": {"name": "t", "format": {"type": "grammar"}}}),
    ],
)
def test_import_refuses_bad_custom_formats(fmt: str, tool: dict[str, Any]) -> None:
    body: dict[str, Any] = {"tools": [tool]}
    body["input" if fmt == "openai-responses" else "messages"] = (
        "hi" if fmt == "openai-responses" else [{"role": "user", "content": "hi"}]
    )
    with pytest.raises(HistoryImportError, match="format"):
        history_events(fmt, body)


def test_custom_tool_formats_count_as_tool_tokens() -> None:
    counter = EstimateCounter()
    small = ToolSpec(name="t", format={"type": "text"})
    big = ToolSpec(name="t", format={**PATCH_FORMAT, "definition": "rule: " + "x " * 500})
    assert counter.count_tools([big]) > counter.count_tools([small]) + 100


def test_a_call_recorded_from_gemini_reaches_openai_as_custom() -> None:
    """Gemini called the custom tool as the function of one string it was shown."""
    window = rw.win(
        rw.text_in("Patch it."),
        rw.calls_out(
            rw.call("g1", "apply_patch", '{"input": "*** Begin Patch\\n"}'),
            rw.call("g2", "apply_patch", '{"input": "x", "extra": 1}'),  # not that shape
            invocation=rw.GOOGLE,
        ),
        rw.results(rw.ok("g1", "apply_patch", "ok"), rw.ok("g2", "apply_patch", "ok")),
        tools=(rw.PATCH,),
    )
    items = _responses_items(render(window, "openai-responses", model="gpt-x"))
    assert [(i["type"], i.get("input", i.get("arguments"))) for i in items] == [
        ("custom_tool_call", "*** Begin Patch\n"),
        ("function_call", '{"input": "x", "extra": 1}'),
        ("custom_tool_call_output", None),
        ("function_call_output", None),
    ]
    chat = render(window, "openai-chat", model="gpt-x")
    calls = [c for m in chat["messages"] for c in m.get("tool_calls", ())]
    assert [c["type"] for c in calls] == ["custom", "function"]
    assert calls[0]["custom"] == {"name": "apply_patch", "input": "*** Begin Patch\n"}
    # Without the custom tool in the window, the same call stays a function call.
    plain = render(rw.win(*[i.data for i in window.items]), "openai-responses", model="gpt-x")
    assert [i["type"] for i in _responses_items(plain)][:2] == ["function_call", "function_call"]
