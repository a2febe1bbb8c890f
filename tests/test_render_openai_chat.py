"""OpenAI Chat Completions bodies: whole payloads compared exactly."""

from __future__ import annotations

from typing import Any

import orjson

from eventlog.projections.providers.openai_chat import render
from eventlog.projections.providers.render_common import CANCELLED_TEXT
from tests import render_windows as rw

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {"name": "search", "parameters": {"type": "object", "properties": {}}},
    },
]
SYSTEM = {"role": "system", "content": "You are helpful."}


def body(*messages: dict[str, Any], system: bool = True, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "model": "gpt-x",
        "messages": ([SYSTEM] if system else []) + list(messages),
    }
    out["tools"] = TOOLS
    out.update(kw)
    return out


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: str | None, *calls: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        out["tool_calls"] = list(calls)
    return out


def fn(id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool(id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": id, "content": content}


def r(window: rw.Window, **kw: Any) -> dict[str, Any]:
    out = render(window, model="gpt-x", **kw)
    rw.check_openai_chat(out)
    return out


def test_parallel_calls_results_out_of_order() -> None:
    assert r(rw.parallel_out_of_order(rw.OPENAI_CHAT)) == body(
        user("Weather in Paris and Tokyo?"),
        assistant(
            "Checking both.",
            fn("call_1", "get_weather", '{"city": "Paris"}'),
            fn("call_2", "get_weather", '{"city": "Tokyo"}'),
        ),
        tool("call_1", "18C"),
        tool("call_2", "22C"),
        assistant("Paris 18C, Tokyo 22C."),
    )


def test_failed_tool() -> None:
    assert r(rw.failed_tool()) == body(
        user("Search it."),
        assistant(None, fn("c1", "search", '{"q": "x"}')),
        tool("c1", "Error: timeout after 30s"),
    )


def test_unparseable_arguments_sent_raw() -> None:
    assert r(rw.unparseable_arguments()) == body(
        user("Search it."),
        assistant(None, fn("c1", "search", '{"q": "x"')),
        tool("c1", "Error: bad arguments"),
    )


def test_consecutive_inputs_stay_separate_messages() -> None:
    assert r(rw.consecutive_inputs()) == body(
        user("First."), user("Second."), assistant("Both read.")
    )


def test_only_tool_calls_content_null() -> None:
    assert r(rw.only_tool_calls()) == body(
        user("Go."), assistant(None, fn("c1", "search", "{}")), tool("c1", "found")
    )


def test_international_text_is_code_point_identical() -> None:
    out = r(rw.international())
    assert out == body(user(rw.INTL), assistant(rw.INTL), user(rw.INTL + " ?"))
    assert rw.INTL.encode() in orjson.dumps(out)


def test_big_tool_output_is_byte_identical() -> None:
    out = r(rw.big_output())
    assert out["messages"][-1] == tool("c1", rw.BIG)


def test_system_changed_midway_gets_a_new_system_message() -> None:
    assert r(rw.system_changed()) == body(
        {"role": "system", "content": "Answer in English."},
        user("Hi"),
        assistant("Hello!"),
        {"role": "system", "content": "Answer in French."},
        user("Hi again"),
        system=False,
    )
    dev = r(rw.system_changed(), system_role="developer")
    assert [m["role"] for m in dev["messages"]] == [
        "developer",
        "user",
        "assistant",
        "developer",
        "user",
    ]


def test_thinking_never_sent() -> None:
    assert r(rw.thinking_anthropic()) == body(
        user("Think, then look up."),
        assistant("Looking.", fn("toolu_01", "search", '{"q": "x"}')),
        tool("toolu_01", "found"),
    )


def test_image_input_as_data_url() -> None:
    assert r(rw.image_input()) == body(
        user(
            [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + rw.PNG_B64}},
            ]
        )
    )


def test_image_in_tool_result_follows_the_tool_messages() -> None:
    png = rw.Attachment(media_type="image/png", data=rw.PNG)
    w = rw.win(
        rw.text_in("shot"),
        rw.calls_out(rw.call("c1", "search", "{}"), rw.call("c2", "search", "{}")),
        rw.results(rw.ok("c1", "search", "here", attachments=(png,)), rw.ok("c2", "search", "b")),
    )
    assert r(w)["messages"][3:] == [
        tool("c1", "here"),
        tool("c2", "b"),
        user(
            [
                {"type": "text", "text": "Attachments of tool call c1 (search):"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + rw.PNG_B64}},
            ]
        ),
    ]


def test_history_starting_with_model_output() -> None:
    assert r(rw.starts_with_output()) == body(assistant("Welcome back."), user("Thanks."))


def test_unanswered_call() -> None:
    assert r(rw.unanswered()) == body(
        user("Do two things."),
        assistant(None, fn("c1", "search", "{}"), fn("c2", "search", '{"q": 2}')),
        tool("c1", "one"),
        tool("c2", "Error: " + CANCELLED_TEXT),
        user("Stop, never mind."),
    )
    assert r(rw.unanswered(), unanswered="drop") == body(
        user("Do two things."),
        assistant(None, fn("c1", "search", "{}")),
        tool("c1", "one"),
        user("Stop, never mind."),
    )


def test_foreign_artifacts_not_sent() -> None:
    out = r(rw.foreign_artifacts())
    assert out == body(
        user("Q1"),
        assistant("A1"),
        user("Q2"),
        assistant("A2"),
        user("Q3"),
        assistant("A3", fn("search_0", "search", "{}")),
        tool("search_0", "r"),
        assistant("A4"),
    )
    dumped = orjson.dumps(out).decode()
    assert not any(a in dumped for a in rw.ARTIFACTS)


def test_long_ids_rewritten_consistently_and_max_tokens() -> None:
    w = rw.win(
        rw.text_in("q"),
        rw.calls_out(rw.call("z" * 50, "search", "{}")),
        rw.results(rw.ok("z" * 50, "search", "a")),
        system=None,
        tools=(),
    )
    out = r(w, max_tokens=99)
    new_id = out["messages"][1]["tool_calls"][0]["id"]
    assert len(new_id) == 40 and out["messages"][2]["tool_call_id"] == new_id
    assert out == {
        "model": "gpt-x",
        "messages": [user("q"), assistant(None, fn(new_id, "search", "{}")), tool(new_id, "a")],
        "max_completion_tokens": 99,
    }


def test_refusal() -> None:
    w = rw.win(rw.text_in("q"), rw.ModelOutput(parts=(rw.RefusalPart(text="No."),)))
    assert r(w)["messages"][-1] == {"role": "assistant", "content": None, "refusal": "No."}


def test_two_thousand_turns() -> None:
    messages = r(rw.long_conversation(2000))["messages"]
    assert len(messages) == 1 + 8000
    for k in (0, 777, 1999):
        assert messages[1 + 4 * k : 5 + 4 * k] == [
            user(f"question {k}"),
            assistant(None, fn(f"call_{k}", "search", f'{{"q": {k}}}')),
            tool(f"call_{k}", f"result {k}"),
            assistant(f"answer {k}"),
        ]


def test_more_than_128_parallel_calls_go_on_in_another_assistant_message() -> None:
    """The API refuses 'tool_calls: array too long. Expected ... maximum length 128'."""
    calls = [rw.call(f"c{i}", "count", f'{{"f": {i}}}') for i in range(129)]
    w = rw.win(
        rw.text_in("count every file"),
        rw.calls_out(*calls),
        rw.results(*(rw.ok(f"c{i}", "count", str(i)) for i in range(129))),
    )
    messages = render(w, model="m")["messages"]
    rw.check_openai_chat({"messages": messages})
    roles = [m["role"] for m in messages]
    assert roles[-132:] == ["user", "assistant"] + ["tool"] * 128 + ["assistant", "tool"]
    assert [len(m["tool_calls"]) for m in messages if m["role"] == "assistant"] == [128, 1]
    assert messages[-1]["content"] == "128"
