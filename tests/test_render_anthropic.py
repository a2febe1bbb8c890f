"""Anthropic Messages bodies: whole payloads compared exactly."""

from __future__ import annotations

from typing import Any

import orjson

from eventlog.projections.providers.anthropic import ATTACHED_TEXT, NO_OUTPUT_TEXT, render
from eventlog.projections.providers.ingest_anthropic import ingest_response
from eventlog.projections.providers.render_common import CANCELLED_TEXT, SKIPPED_TEXT
from tests import render_windows as rw

TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
    {"name": "search", "input_schema": {"type": "object", "properties": {}}},
]


def body(*messages: dict[str, Any], system: Any = "You are helpful.", **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"model": "claude-x", "max_tokens": 4096}
    if system is not None:
        out["system"] = system
    out["tools"] = TOOLS
    out["messages"] = list(messages)
    out.update(kw)
    return out


def user(*blocks: Any) -> dict[str, Any]:
    return {"role": "user", "content": [text(b) if isinstance(b, str) else b for b in blocks]}


def assistant(*blocks: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": [text(b) if isinstance(b, str) else b for b in blocks]}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def use(id: str, name: str, input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def result(id: str, content: Any = None, error: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": id}
    if content is not None:
        out["content"] = content
    if error:
        out["is_error"] = True
    return out


def r(window: rw.Window, **kw: Any) -> dict[str, Any]:
    out = render(window, model="claude-x", **kw)
    rw.check_anthropic(out)
    return out


def test_parallel_calls_results_out_of_order() -> None:
    assert r(rw.parallel_out_of_order()) == body(
        user("Weather in Paris and Tokyo?"),
        assistant(
            "Checking both.",
            use("call_1", "get_weather", {"city": "Paris"}),
            use("call_2", "get_weather", {"city": "Tokyo"}),
        ),
        user(result("call_1", "18C"), result("call_2", "22C")),
        assistant("Paris 18C, Tokyo 22C."),
    )


def test_failed_tool() -> None:
    assert r(rw.failed_tool()) == body(
        user("Search it."),
        assistant(use("c1", "search", {"q": "x"})),
        user(result("c1", "timeout after 30s", error=True)),
    )


def test_unparseable_arguments_keep_raw_text_in_an_object() -> None:
    assert r(rw.unparseable_arguments()) == body(
        user("Search it."),
        assistant(use("c1", "search", {"_raw_arguments": '{"q": "x"'})),
        user(result("c1", "bad arguments", error=True)),
    )


def test_consecutive_inputs_merge_in_order() -> None:
    assert r(rw.consecutive_inputs()) == body(user("First.", "Second."), assistant("Both read."))


def test_only_tool_calls_no_empty_text() -> None:
    assert r(rw.only_tool_calls()) == body(
        user("Go."), assistant(use("c1", "search", {})), user(result("c1", "found"))
    )


def test_international_text_is_code_point_identical() -> None:
    out = r(rw.international())
    assert out == body(user(rw.INTL), assistant(rw.INTL), user(rw.INTL + " ?"))
    assert rw.INTL.encode() in orjson.dumps(out)


def test_big_tool_output_is_byte_identical() -> None:
    out = r(rw.big_output())
    assert out["messages"][2] == user(result("c1", rw.BIG))
    assert len(rw.BIG.encode()) > 50_000
    assert orjson.loads(orjson.dumps(out))["messages"][2]["content"][0]["content"] == rw.BIG


def test_system_changed_midway_no_instruction_lost() -> None:
    assert r(rw.system_changed()) == body(
        user("[System instruction from here on]\nAnswer in English.", "Hi"),
        assistant("Hello!"),
        user("[System instruction from here on]\nAnswer in French.", "Hi again"),
        system="Answer in French.",
    )


def test_thinking_with_signatures_byte_identical_and_first() -> None:
    assert r(rw.thinking_anthropic()) == body(
        user("Think, then look up."),
        assistant(
            {"type": "thinking", "thinking": "Let me think\u2026 ü", "signature": "sig+/=A1"},
            {"type": "redacted_thinking", "data": "RED/ACTED=="},
            "Looking.",
            use("toolu_01", "search", {"q": "x"}),
        ),
        user(result("toolu_01", "found")),
    )


def test_thinking_stays_first_when_outputs_merge() -> None:
    w = rw.win(rw.text_in("q"), rw.text_out("part one"), rw.thinking_anthropic().items[1].data)
    out = r(w)
    assert [b["type"] for b in out["messages"][1]["content"]] == [
        "thinking",
        "redacted_thinking",
        "text",
        "text",
        "tool_use",
    ]


def test_image_input_as_base64_block() -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": rw.PNG_B64},
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
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": rw.PNG_B64},
    }
    assert r(w)["messages"][2] == user(result("c1", [text("here"), image]))


def test_history_starting_with_model_output() -> None:
    assert r(rw.starts_with_output()) == body(
        user("(continued)"), assistant("Welcome back."), user("Thanks.")
    )


def test_unanswered_call_gets_a_cancelled_result_first() -> None:
    assert r(rw.unanswered()) == body(
        user("Do two things."),
        assistant(use("c1", "search", {}), use("c2", "search", {"q": 2})),
        user(result("c1", "one"), result("c2", CANCELLED_TEXT, error=True), "Stop, never mind."),
    )
    assert r(rw.unanswered(), unanswered="drop") == body(
        user("Do two things."),
        assistant(use("c1", "search", {})),
        user(result("c1", "one"), "Stop, never mind."),
    )


def test_foreign_artifacts_not_sent() -> None:
    out = r(rw.foreign_artifacts())
    assert out == body(
        user("Q1"),
        assistant({"type": "thinking", "thinking": "a-think", "signature": "ANTH_SIG"}, "A1"),
        user("Q2"),
        assistant("A2"),
        user("Q3"),
        assistant("A3", use("search_0", "search", {})),
        user(result("search_0", "r")),
        assistant("A4"),
    )
    dumped = orjson.dumps(out).decode()
    assert not any(a in dumped for a in ("OAI_ENC", "rs_OAI", "GOOG_SIG", "GOOG_CALL_SIG"))
    assert "ANTH_REDACTED" not in dumped  # that output has no invocation: issuer unknown


def test_compaction_and_live_screen() -> None:
    assert r(rw.compaction_and_screen()) == body(
        user(
            "Summary of earlier conversation:\nWe planned a trip.",
            "Where next?",
            "[LiveScreen]\n## notebook\n- Paris\n- Tokyo\n\n## clock\n12:00",
        )
    )


def test_bad_ids_rewritten_consistently() -> None:
    w = rw.win(
        rw.text_in("q"),
        rw.calls_out(rw.call("call.1/ü", "search", "{}"), rw.call("y" * 90, "search", "{}")),
        rw.results(rw.ok("y" * 90, "search", "b"), rw.ok("call.1/ü", "search", "a")),
    )
    out = r(w)
    ids = [b["id"] for b in out["messages"][1]["content"]]
    assert ids[0].startswith("call_1__") and len(ids[1]) == 64
    assert [b["tool_use_id"] for b in out["messages"][2]["content"]] == ids
    assert r(w) == out


def test_max_tokens_system_none_and_last_prefill_trimmed() -> None:
    w = rw.win(rw.text_in("q"), rw.text_out("Sure:  \n"), system=None, tools=())
    assert r(w, max_tokens=10) == {
        "model": "claude-x",
        "max_tokens": 10,
        "messages": [user("q"), assistant("Sure:")],
    }


def test_tool_blocks_without_toolset_define_used_tools_and_forbid_calls() -> None:
    w = rw.win(rw.text_in("q"), rw.calls_out(rw.call("c1", "search", "{}")), tools=())
    out = r(w)
    assert out["tools"] == [
        {
            "name": "search",
            "description": "(not available in this request)",
            "input_schema": {"type": "object"},
        }
    ]
    assert out["tool_choice"] == {"type": "none"}


def test_cache_breakpoints_on_stable_prefix() -> None:
    mark = {"type": "ephemeral"}
    w = rw.long_conversation(5)  # 20 messages: boundaries 8 and 16
    out = r(w, cache=True, cache_every=8)
    assert out["tools"][-1]["cache_control"] == mark
    assert out["system"] == [{"type": "text", "text": "You are helpful.", "cache_control": mark}]
    marked = [
        i for i, m in enumerate(out["messages"]) if any("cache_control" in b for b in m["content"])
    ]
    n = len(out["messages"])
    assert marked == [7, 15] and n >= 16
    # one more round: the same positions stay marked until the next multiple is reached
    later = r(rw.long_conversation(6), cache=True, cache_every=8)
    later_marked = [
        i
        for i, m in enumerate(later["messages"])
        if any("cache_control" in b for b in m["content"])
    ]
    assert later_marked == [15, 23]  # the newest breakpoint of the last turn stays put
    assert later["messages"][15] == out["messages"][15]
    assert r(rw.long_conversation(5), cache=True, cache_every=8) == out


def test_cache_off_by_default_and_ttl() -> None:
    out = r(rw.parallel_out_of_order())
    assert "cache_control" not in orjson.dumps(out).decode()
    ttl = r(rw.parallel_out_of_order(), cache=True, cache_ttl="1h")
    assert ttl["tools"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_two_thousand_turns() -> None:
    out = r(rw.long_conversation(2000))
    messages = out["messages"]
    assert len(messages) == 8000
    for k in (0, 1234, 1999):
        assert messages[4 * k : 4 * k + 4] == [
            user(f"question {k}"),
            assistant(use(f"call_{k}", "search", {"q": k})),
            user(result(f"call_{k}", f"result {k}")),
            assistant(f"answer {k}"),
        ]


def _thinking(text: str = "plan", signature: str = "SIG") -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": signature}


def _reply(*content: dict[str, Any], stop: str = "end_turn") -> rw.ModelOutput:
    """An Anthropic response body, ingested as an application records it."""
    return ingest_response(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "stop_reason": stop,
            "content": list(content),
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )


def test_thinking_alone_never_ends_an_assistant_message() -> None:
    """The API refuses an assistant message whose final block is thinking: an output left with
    thinking only (server tool blocks not kept, a blank text, its calls dropped) renders
    nothing, and the user turns around it merge."""
    paused = _reply(
        _thinking("I should search."),
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
        stop="pause_turn",
    )
    blank = _reply(_thinking("hm"), {"type": "text", "text": "\n\n"})
    for output in (paused, blank):
        w = rw.win(rw.text_in("q"), output, rw.text_in("next"))
        assert r(w) == body(user("q", "next"))
    called = rw.calls_out(
        rw.call("toolu_1", "search", "{}"), parts=(rw.ReasoningPart(text="p", signature="S"),)
    )
    w = rw.win(rw.text_in("do it"), called, rw.text_in("stop"))
    assert r(w, unanswered="drop") == body(user("do it", "stop"))
    assert r(rw.win(rw.text_in("q"), blank)) == body(user("q"))  # nothing after it


def test_thinking_alone_leads_the_next_output_it_merges_with() -> None:
    w = rw.win(
        rw.text_in("q"),
        _reply(_thinking("a", "S1")),
        _reply(_thinking("b", "S2"), {"type": "text", "text": "B"}),
    )
    assert r(w) == body(user("q"), assistant(_thinking("a", "S1"), _thinking("b", "S2"), "B"))


def test_failed_result_without_text_says_it_failed() -> None:
    """The API refuses `is_error: true` with empty content."""
    w = rw.win(
        rw.text_in("run"),
        rw.calls_out(rw.call("c1", "search", "{}"), rw.call("c2", "search", "{}")),
        rw.results(
            rw.ok("c1", "search", "", status="failed"), rw.ok("c2", "search", " ", status="skipped")
        ),
    )
    assert r(w)["messages"][2] == user(
        result("c1", NO_OUTPUT_TEXT, error=True), result("c2", SKIPPED_TEXT, error=True)
    )


def test_a_failed_result_keeps_text_only_and_its_attachments_follow() -> None:
    """The API refuses `is_error: true` with image or document content."""
    png = rw.Attachment(media_type="image/png", data=b"\x89PNG")
    w = rw.win(
        rw.text_in("shoot"),
        rw.calls_out(rw.call("c1", "screenshot", "{}"), rw.call("c2", "screenshot", "{}")),
        rw.results(
            rw.ok("c1", "screenshot", "page crashed", status="failed", attachments=(png,)),
            rw.ok("c2", "screenshot", "", status="failed", attachments=(png,)),
        ),
    )
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="},
    }
    assert r(w)["messages"][2] == user(
        result("c1", "page crashed", error=True),
        result("c2", ATTACHED_TEXT, error=True),
        "[attachments of the failed screenshot call]",
        image,
        "[attachments of the failed screenshot call]",
        image,
    )


def test_at_most_100_images_and_documents_the_oldest_become_notes() -> None:
    """The API refuses 'too many images and documents: 104 + 1 > 100'."""
    png = rw.Attachment(media_type="image/png", data=b"\x89PNG")
    pdf = rw.Attachment(media_type="application/pdf", data=b"%PDF")
    events: list[Any] = [rw.ModelInput(sections=(rw.Section(text="go"),), attachments=(pdf,))]
    for i in range(101):
        events.append(rw.calls_out(rw.call(f"c{i}", "screenshot", "{}")))
        events.append(rw.results(rw.ok(f"c{i}", "screenshot", f"shot {i}", attachments=(png,))))
    body = r(rw.win(*events))
    first = body["messages"][0]["content"]
    assert first[1] == text("[document left out: a request takes at most 100 images and documents]")
    images = [
        b["content"][1]["type"]
        for m in body["messages"]
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert images == ["text"] + ["image"] * 100  # the first screenshot's too
