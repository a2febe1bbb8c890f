"""OpenAI Responses bodies: whole payloads compared exactly."""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from eventlog.events import SystemInstructionSet
from eventlog.projections.providers.openai_responses import message_id, render
from eventlog.projections.providers.render_common import CANCELLED_TEXT
from tests import render_windows as rw

TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        "strict": False,
    },
    {
        "type": "function",
        "name": "search",
        "parameters": {"type": "object", "properties": {}},
        "strict": False,
    },
]


def body(
    *items: dict[str, Any], instructions: str | None = "You are helpful.", **kw: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"model": "gpt-x"}
    if instructions is not None:
        out["instructions"] = instructions
    out["input"] = list(items)
    out["tools"] = TOOLS
    out.update(kw)
    return out


def user(*texts: Any, role: str = "user") -> dict[str, Any]:
    content = [{"type": "input_text", "text": t} if isinstance(t, str) else t for t in texts]
    return {"type": "message", "role": role, "content": content}


def assistant(seq: int, *texts: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "id": message_id("conv", seq),
        "status": "completed",
        "content": [{"type": "output_text", "text": t, "annotations": []} for t in texts],
    }


def fc(id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": id, "name": name, "arguments": arguments}


def out(id: str, output: Any) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": id, "output": output}


def r(window: rw.Window, **kw: Any) -> dict[str, Any]:
    body = render(window, model="gpt-x", **kw)
    rw.check_openai_responses(body)
    return body


def test_parallel_calls_results_out_of_order() -> None:
    assert r(rw.parallel_out_of_order(rw.OPENAI_RESPONSES)) == body(
        user("Weather in Paris and Tokyo?"),
        assistant(2, "Checking both."),
        fc("call_1", "get_weather", '{"city": "Paris"}'),
        fc("call_2", "get_weather", '{"city": "Tokyo"}'),
        out("call_1", "18C"),
        out("call_2", "22C"),
        assistant(4, "Paris 18C, Tokyo 22C."),
    )


def test_failed_tool() -> None:
    assert r(rw.failed_tool()) == body(
        user("Search it."), fc("c1", "search", '{"q": "x"}'), out("c1", "Error: timeout after 30s")
    )


def test_unparseable_arguments_sent_raw() -> None:
    assert r(rw.unparseable_arguments()) == body(
        user("Search it."), fc("c1", "search", '{"q": "x"'), out("c1", "Error: bad arguments")
    )


def test_consecutive_inputs() -> None:
    assert r(rw.consecutive_inputs()) == body(
        user("First."), user("Second."), assistant(3, "Both read.")
    )


def test_only_tool_calls_no_message_item() -> None:
    assert r(rw.only_tool_calls()) == body(
        user("Go."), fc("c1", "search", "{}"), out("c1", "found")
    )


def test_international_text_is_code_point_identical() -> None:
    b = r(rw.international())
    assert b == body(user(rw.INTL), assistant(2, rw.INTL), user(rw.INTL + " ?"))
    assert rw.INTL.encode() in orjson.dumps(b)


def test_big_tool_output_is_byte_identical() -> None:
    assert r(rw.big_output())["input"][-1] == out("c1", rw.BIG)


def test_system_changed_midway_as_developer_messages() -> None:
    """`instructions` is the one in force at the start: the prefix stays put as turns go by."""
    assert r(rw.system_changed()) == body(
        user("Hi"),
        assistant(3, "Hello!"),
        user("Answer in French.", role="developer"),
        user("Hi again"),
        instructions="Answer in English.",
    )


def test_instructions_set_before_the_window_are_the_opening_one() -> None:
    """No item sets the current instruction: it was in force before the window starts."""
    w = rw.win(rw.text_in("Hi"), system="Be terse.", tools=())
    assert r(w)["instructions"] == "Be terse."
    w = rw.win(rw.text_in("Hi"), SystemInstructionSet(text="Be terse."), system="Be terse.")
    got = r(w)
    assert "instructions" not in got
    assert got["input"][1] == user("Be terse.", role="developer")


def test_openai_reasoning_items_passed_back() -> None:
    assert r(rw.reasoning_openai()) == body(
        user("Think, then look up."),
        {
            "type": "reasoning",
            "id": "rs_123",
            "summary": [{"type": "summary_text", "text": "Plan."}],
            "encrypted_content": "ENC==",
        },
        {"type": "function_call", "id": "fc_9", **fc("call_9", "search", '{"q": "x"}')},
        out("call_9", "found"),
    )


def test_item_ids_go_back_to_openai_only() -> None:
    """A call's `fc_` id is sent back with an OpenAI output, never with another provider's."""
    w = rw.reasoning_openai()
    other = rw.win(
        rw.text_in("q"),
        rw.calls_out(rw.call("call_9", "search", "{}", item_id="fc_9")),  # Anthropic's
        rw.results(rw.ok("call_9", "search", "found")),
    )
    assert r(w)["input"][2]["id"] == "fc_9"
    assert "id" not in r(other)["input"][1]


def test_anthropic_thinking_not_sent() -> None:
    assert r(rw.thinking_anthropic()) == body(
        user("Think, then look up."),
        assistant(2, "Looking."),
        fc("toolu_01", "search", '{"q": "x"}'),
        out("toolu_01", "found"),
    )


def test_image_input() -> None:
    image = {
        "type": "input_image",
        "image_url": "data:image/png;base64," + rw.PNG_B64,
        "detail": "auto",
    }
    assert r(rw.image_input()) == body(user("What is this?", image))


def test_image_in_tool_result() -> None:
    png = rw.Attachment(media_type="image/png", data=rw.PNG)
    w = rw.win(
        rw.text_in("shot"),
        rw.calls_out(rw.call("c1", "search", "{}")),
        rw.results(rw.ok("c1", "search", "here", attachments=(png,))),
    )
    image = {
        "type": "input_image",
        "image_url": "data:image/png;base64," + rw.PNG_B64,
        "detail": "auto",
    }
    assert r(w)["input"][-1] == out("c1", [{"type": "input_text", "text": "here"}, image])


def test_history_starting_with_model_output() -> None:
    assert r(rw.starts_with_output()) == body(assistant(1, "Welcome back."), user("Thanks."))


def test_unanswered_call() -> None:
    assert r(rw.unanswered()) == body(
        user("Do two things."),
        fc("c1", "search", "{}"),
        fc("c2", "search", '{"q": 2}'),
        out("c1", "one"),
        out("c2", "Error: " + CANCELLED_TEXT),
        user("Stop, never mind."),
    )


def test_foreign_artifacts_not_sent() -> None:
    b = r(rw.foreign_artifacts())
    dumped = orjson.dumps(b).decode()
    assert "rs_OAI" in dumped and "OAI_ENC" in dumped
    assert not any(a in dumped for a in ("ANTH_SIG", "ANTH_REDACTED", "GOOG_SIG", "GOOG_CALL_SIG"))
    assert [i.get("type") for i in b["input"]].count("reasoning") == 1


def test_reasoning_alone_is_not_sent() -> None:
    w = rw.win(
        rw.text_in("q"),
        rw.ModelOutput(
            parts=rw.reasoning_openai().items[1].data.parts, invocation=rw.OPENAI_RESPONSES
        ),
    )
    assert r(w)["input"] == [user("q")]


def test_max_output_tokens() -> None:
    w = rw.win(rw.text_in("q"), system=None, tools=())
    assert r(w, max_tokens=5) == {"model": "gpt-x", "input": [user("q")], "max_output_tokens": 5}


def test_two_thousand_turns() -> None:
    items = r(rw.long_conversation(2000))["input"]
    assert len(items) == 8000
    k = 1999
    assert items[-4:] == [
        user(f"question {k}"),
        fc(f"call_{k}", "search", f'{{"q": {k}}}'),
        out(f"call_{k}", f"result {k}"),
        assistant(4 * k + 4, f"answer {k}"),
    ]


def _rs(item_id: str) -> dict[str, Any]:
    return {"type": "reasoning", "id": item_id, "summary": []}


def test_reasoning_items_keep_their_place_among_the_messages() -> None:
    """Reasoning between messages (a preamble, then more reasoning, then a call) is passed back
    where it came, each item before the one it preceded, not all of it first."""
    R, T = rw.ReasoningPart, rw.TextPart
    parts = (R(item_id="rs_1"), T(text="Let me check."), R(item_id="rs_2"), T(text="Checking."))
    w = rw.win(
        rw.text_in("q"),
        rw.calls_out(
            rw.call("call_1", "search", "{}"), invocation=rw.OPENAI_RESPONSES, parts=parts
        ),
        rw.results(rw.ok("call_1", "search", "found")),
    )
    second = {**assistant(2, "Checking."), "id": message_id("conv", 2, 1)}
    assert r(w)["input"] == [
        user("q"),
        _rs("rs_1"),
        assistant(2, "Let me check."),
        _rs("rs_2"),
        second,
        fc("call_1", "search", "{}"),
        out("call_1", "found"),
    ]
    assert second["id"] != assistant(2)["id"]
    # Without calls, reasoning after the last message preceded nothing: not sent.
    no_call = rw.win(
        rw.text_in("q"), rw.ModelOutput(parts=parts[:3], invocation=rw.OPENAI_RESPONSES)
    )
    assert r(no_call)["input"] == [user("q"), _rs("rs_1"), assistant(2, "Let me check.")]


def test_ingested_interleaving_renders_back_in_order() -> None:
    """A response's output items, ingested then rendered: reasoning, message, reasoning, call."""
    from eventlog.projections.providers.ingest_openai_responses import ingest_response

    text = [{"type": "output_text", "text": "Looking.", "annotations": []}]
    body_in = {
        "object": "response", "id": "resp_1", "model": "gpt-x", "status": "completed",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "message", "id": "msg_x", "role": "assistant", "status": "completed",
             "content": text},
            {"type": "reasoning", "id": "rs_2", "summary": []},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "search",
             "arguments": "{}"},
        ],
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }  # fmt: skip
    output = ingest_response(body_in)
    w = rw.win(rw.text_in("q"), output, rw.results(rw.ok("call_1", "search", "found")))
    kinds = [(i["type"], i.get("id")) for i in r(w)["input"][1:]]
    assert kinds == [
        ("reasoning", "rs_1"),
        ("message", "msg_x"),  # the provider's own id
        ("reasoning", "rs_2"),
        ("function_call", "fc_1"),  # the id pairs it with the reasoning before it
        ("function_call_output", None),
    ]


def test_messages_keep_the_providers_ids_and_phase() -> None:
    """Text of OpenAI's own output goes back in the messages it came in, with their ids and
    phase; another provider's text gets derived ids and no phase."""
    T = rw.TextPart
    parts = (
        T(text="Checking.", item_id="msg_a", phase="commentary"),
        T(text="Done.", item_id="msg_b", phase="final_answer"),
    )
    own = rw.win(rw.text_in("q"), rw.ModelOutput(parts=parts, invocation=rw.OPENAI_RESPONSES))
    assert r(own)["input"][1:] == [
        {**assistant(2, "Checking."), "id": "msg_a", "phase": "commentary"},
        {**assistant(2, "Done."), "id": "msg_b", "phase": "final_answer"},
    ]
    other = rw.win(rw.text_in("q"), rw.ModelOutput(parts=parts, invocation=rw.ANTHROPIC))
    assert r(other)["input"][1:] == [assistant(2, "Checking.", "Done.")]
    from tests.test_render_sdk import RESPONSES_PARAMS, validate

    validate(RESPONSES_PARAMS, r(own))  # the SDK's request types take `phase`


def _ingested(*output: dict[str, Any]) -> rw.ModelOutput:
    """A Responses body with these output items, ingested as an application records it."""
    from eventlog.projections.providers.ingest_openai_responses import ingest_response

    return ingest_response(
        {
            "object": "response",
            "id": "resp_1",
            "model": "gpt-x",
            "status": "completed",
            "output": list(output),
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )


def _rs_enc(item_id: str) -> dict[str, Any]:
    return {**_rs(item_id), "encrypted_content": f"ENC-{item_id}"}


def _fc_item(n: int) -> dict[str, Any]:
    return {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": "search",
            "arguments": "{}", "status": "completed"}  # fmt: skip


def _ws_item() -> dict[str, Any]:
    """A built-in web search call, which ingest does not keep."""
    return {"type": "web_search_call", "id": "ws_1", "status": "completed",
            "action": {"type": "search", "query": "x"}}  # fmt: skip


def _msg(n: int, text: str = "") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text or f"m{n}", "annotations": []}]
    return {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
            "content": content}  # fmt: skip


def test_reasoning_before_a_dropped_builtin_call_is_not_sent() -> None:
    """`[rs_1, web_search_call, rs_2, msg_1]`: ingest keeps no built-in call, and a reasoning
    item followed by another is refused: rs_1 (whose item is gone) is left out."""
    output = _ingested(
        _rs_enc("rs_1"),
        _ws_item(),
        _rs_enc("rs_2"),
        _msg(1, "Answer"),
    )
    w = rw.win(rw.text_in("q"), output, rw.text_in("more?"))
    assert r(w)["input"] == [
        user("q"),
        _rs_enc("rs_2"),
        {**assistant(2, "Answer"), "id": "msg_1"},
        user("more?"),
    ]


def test_reasoning_between_calls_goes_back_between_them() -> None:
    """`[rs_1, fc_1, rs_2, fc_2]` (parts and calls are kept apart): each reasoning item goes
    back before a call, in order, never two in a row; a lone one before all the calls."""
    output = _ingested(_rs_enc("rs_1"), _fc_item(1), _rs_enc("rs_2"), _fc_item(2))
    answers = rw.results(rw.ok("call_1", "search", "r1"), rw.ok("call_2", "search", "r2"))
    w = rw.win(rw.text_in("q"), output, answers)
    items = r(w)["input"][1:]
    assert [(i["type"], i.get("id") or i["call_id"]) for i in items] == [
        ("reasoning", "rs_1"),
        ("function_call", "fc_1"),
        ("reasoning", "rs_2"),
        ("function_call", "fc_2"),
        ("function_call_output", "call_1"),
        ("function_call_output", "call_2"),
    ]
    one = _ingested(_rs_enc("rs_1"), _fc_item(1), _fc_item(2))
    items = r(rw.win(rw.text_in("q"), one, answers))["input"][1:4]
    assert [i.get("id") for i in items] == ["rs_1", "fc_1", "fc_2"]
    # More reasoning items than calls: the last ones, each before a call.
    many = _ingested(_rs_enc("rs_0"), _rs_enc("rs_1"), _fc_item(1))
    w = rw.win(rw.text_in("q"), many, rw.results(rw.ok("call_1", "search", "r1")))
    assert [i.get("id") for i in r(w)["input"][1:3]] == ["rs_1", "fc_1"]


def test_an_ingested_output_goes_back_in_the_order_openai_sent_it() -> None:
    """Ingest records where each call stood among the parts (`ToolCall.after`), so
    `[rs_1, fc_1, rs_2, msg_1]` goes back as it came, each reasoning item before its item;
    the call's output follows its run of calls (strict servers want them adjacent)."""
    output = _ingested(
        _rs_enc("rs_1"),
        _fc_item(1),
        _rs_enc("rs_2"),
        _msg(1, "Calling"),
    )
    assert [c.after for c in output.tool_calls] == [1]
    w = rw.win(rw.text_in("q"), output, rw.results(rw.ok("call_1", "search", "r1")))
    body = r(w)
    items = body["input"][1:]
    assert [(i["type"], i.get("id") or i["call_id"]) for i in items] == [
        ("reasoning", "rs_1"),
        ("function_call", "fc_1"),
        ("function_call_output", "call_1"),
        ("reasoning", "rs_2"),
        ("message", "msg_1"),
    ]
    rw.CHECKERS["openai-responses"](body)


def test_a_call_recorded_without_its_place_uses_the_spare_reasoning() -> None:
    """Outputs recorded before `ToolCall.after` existed: the reasoning that can only have
    preceded the call goes before it (see `_OutputItems`)."""
    ingested = _ingested(
        _rs_enc("rs_1"),
        _fc_item(1),
        _rs_enc("rs_2"),
        _msg(1, "Calling"),
    )
    calls = tuple(msgspec.structs.replace(c, after=None) for c in ingested.tool_calls)
    output = msgspec.structs.replace(ingested, tool_calls=calls)
    w = rw.win(rw.text_in("q"), output, rw.results(rw.ok("call_1", "search", "r1")))
    items = r(w)["input"][1:]
    assert [(i["type"], i.get("id") or i["call_id"]) for i in items] == [
        ("reasoning", "rs_2"),
        ("message", "msg_1"),
        ("reasoning", "rs_1"),
        ("function_call", "fc_1"),
        ("function_call_output", "call_1"),
    ]


def test_reasoning_after_the_last_message_leads_the_calls() -> None:
    """`[rs_a, web_search_call, rs_b, msg_1, rs_c, fc_1, fc_2]`: rs_c preceded the calls and
    goes before the first; rs_a (whose built-in call ingest drops) is not moved onto one."""
    output = _ingested(
        _rs_enc("rs_a"),
        _ws_item(),
        _rs_enc("rs_b"),
        _msg(1, "Two lookups."),
        _rs_enc("rs_c"),
        _fc_item(1),
        _fc_item(2),
    )
    answers = rw.results(rw.ok("call_1", "search", "r1"), rw.ok("call_2", "search", "r2"))
    body = r(rw.win(rw.text_in("q"), output, answers))
    assert [i.get("id") for i in body["input"][1:6]] == ["rs_b", "msg_1", "rs_c", "fc_1", "fc_2"]


def _in_order_ids(*output: dict[str, Any], results: Any, **kw: Any) -> list[str]:
    """The input items after the first user message, as ids (outputs as `out:<call_id>`)."""
    body = r(rw.win(rw.text_in("q"), _ingested(*output), results, rw.text_in("next")), **kw)
    rw.CHECKERS["openai-responses"](body)
    return [
        f"out:{i['call_id']}" if i["type"].endswith("_output") else i.get("id") or i["role"]
        for i in body["input"][1:]
    ]


def test_a_message_after_calls_keeps_each_call_next_to_its_output() -> None:
    """`[fc_1, rs_1, fc_2, msg_1]`: a message follows the calls, so each run of calls gets its
    outputs before anything else, reasoning included (strict servers want only calls
    between a call and its output); reasoning still comes right before its call."""
    both = rw.results(rw.ok("call_1", "search", "r1"), rw.ok("call_2", "search", "r2"))
    ids = _in_order_ids(_fc_item(1), _rs_enc("rs_1"), _fc_item(2), _msg(1), results=both)
    assert ids == ["fc_1", "out:call_1", "rs_1", "fc_2", "out:call_2", "msg_1", "user"]


def test_reasoning_before_a_call_the_window_drops_is_not_sent() -> None:
    """`[fc_0, rs_1, fc_1, msg_2]` with fc_1 unanswered and dropped: rs_1 preceded fc_1, so it
    is not moved onto the message."""
    only_first = rw.results(rw.ok("call_0", "search", "r0"))
    output = (_fc_item(0), _rs_enc("rs_1"), _fc_item(1), _msg(2))
    ids = _in_order_ids(*output, results=only_first, unanswered="drop")
    assert ids == ["fc_0", "out:call_0", "msg_2", "user"]


def test_a_call_position_out_of_range_loses_nothing() -> None:
    """`after` is kept within the parts: a hand-built negative or too large value puts the
    call first or last, never drops it."""
    ingested = _ingested(_rs_enc("rs_1"), _fc_item(1), _rs_enc("rs_2"), _fc_item(2))
    calls = (
        msgspec.structs.replace(ingested.tool_calls[0], after=-1),
        msgspec.structs.replace(ingested.tool_calls[1], after=99),
    )
    output = msgspec.structs.replace(ingested, tool_calls=calls)
    both = rw.results(rw.ok("call_1", "search", "r1"), rw.ok("call_2", "search", "r2"))
    body = r(rw.win(rw.text_in("q"), output, both))
    rw.CHECKERS["openai-responses"](body)
    kinds = [i.get("id") or i["call_id"] for i in body["input"][1:]]
    assert kinds == ["fc_1", "rs_2", "fc_2", "call_1", "call_2"]
