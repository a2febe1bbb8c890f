"""Gemini generateContent bodies: whole payloads compared exactly."""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from eventlog.events import ModelOutput, ReasoningPart, TextPart, ToolResult
from eventlog.projections.providers.gemini import render
from eventlog.projections.providers.ingest_gemini import ingest_response, ingest_stream
from eventlog.projections.providers.render_common import CANCELLED_TEXT
from tests import render_windows as rw

TOOLS = [
    {
        "functionDeclarations": [
            {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
            {"name": "search", "parameters": {"type": "object", "properties": {}}},
        ]
    }
]


def body(
    *contents: dict[str, Any], system: str | None = "You are helpful.", **kw: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if system is not None:
        out["systemInstruction"] = {"parts": [{"text": system}]}
    out["contents"] = list(contents)
    out["tools"] = TOOLS
    out.update(kw)
    return out


def user(*parts: Any) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": p} if isinstance(p, str) else p for p in parts]}


def model(*parts: Any) -> dict[str, Any]:
    return {"role": "model", "parts": [{"text": p} if isinstance(p, str) else p for p in parts]}


def call(name: str, args: Any, sig: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"functionCall": {"name": name, "args": args}}
    if sig is not None:
        out["thoughtSignature"] = sig
    return out


def resp(name: str, output: str, error: bool = False) -> dict[str, Any]:
    return {
        "functionResponse": {"name": name, "response": {"error" if error else "output": output}}
    }


def r(window: rw.Window, **kw: Any) -> dict[str, Any]:
    out = render(window, model="gemini-x", **kw)
    rw.check_gemini(out)
    return out


def test_parallel_calls_results_out_of_order() -> None:
    assert r(rw.parallel_out_of_order(rw.GOOGLE)) == body(
        user("Weather in Paris and Tokyo?"),
        model(
            "Checking both.",
            call("get_weather", {"city": "Paris"}),
            call("get_weather", {"city": "Tokyo"}),
        ),
        user(resp("get_weather", "18C"), resp("get_weather", "22C")),
        model("Paris 18C, Tokyo 22C."),
    )


def test_failed_tool() -> None:
    assert r(rw.failed_tool()) == body(
        user("Search it."),
        model(call("search", {"q": "x"})),
        user(resp("search", "timeout after 30s", error=True)),
    )


def test_unparseable_arguments_keep_raw_text() -> None:
    assert r(rw.unparseable_arguments()) == body(
        user("Search it."),
        model(call("search", {"_raw_arguments": '{"q": "x"'})),
        user(resp("search", "bad arguments", error=True)),
    )


def test_consecutive_inputs_merge() -> None:
    assert r(rw.consecutive_inputs()) == body(user("First.", "Second."), model("Both read."))


def test_only_tool_calls() -> None:
    assert r(rw.only_tool_calls()) == body(
        user("Go."), model(call("search", {})), user(resp("search", "found"))
    )


def test_international_text_is_code_point_identical() -> None:
    out = r(rw.international())
    assert out == body(user(rw.INTL), model(rw.INTL), user(rw.INTL + " ?"))
    assert rw.INTL.encode() in orjson.dumps(out)


def test_big_tool_output_is_byte_identical() -> None:
    assert r(rw.big_output())["contents"][-1] == user(resp("search", rw.BIG))


def test_system_changed_midway_no_instruction_lost() -> None:
    assert r(rw.system_changed()) == body(
        user("[System instruction from here on]\nAnswer in English.", "Hi"),
        model("Hello!"),
        user("[System instruction from here on]\nAnswer in French.", "Hi again"),
        system="Answer in French.",
    )


def test_thought_signatures_kept_on_their_parts() -> None:
    assert r(rw.thoughts_google()) == body(
        user("Think, then look up."),
        model(
            {"text": "thinking", "thought": True, "thoughtSignature": "gsig1"},
            {"text": "Looking.", "thoughtSignature": "gsig2"},
            call("search", {"q": "x"}, sig="gsig3"),
        ),
        user(resp("search", "found")),
    )


def test_anthropic_thinking_not_sent() -> None:
    assert r(rw.thinking_anthropic()) == body(
        user("Think, then look up."),
        model("Looking.", call("search", {"q": "x"})),
        user(resp("search", "found")),
    )


def test_image_input_inline() -> None:
    assert r(rw.image_input()) == body(
        user("What is this?", {"inlineData": {"mimeType": "image/png", "data": rw.PNG_B64}})
    )


def test_image_in_tool_result_after_responses() -> None:
    png = rw.Attachment(media_type="image/png", data=rw.PNG)
    w = rw.win(
        rw.text_in("shot"),
        rw.calls_out(rw.call("c1", "search", "{}")),
        rw.results(rw.ok("c1", "search", "here", attachments=(png,))),
    )
    assert r(w)["contents"][-1] == user(
        resp("search", "here"), {"inlineData": {"mimeType": "image/png", "data": rw.PNG_B64}}
    )


def test_history_starting_with_model_output() -> None:
    assert r(rw.starts_with_output()) == body(
        user("(continued)"), model("Welcome back."), user("Thanks.")
    )


def test_unanswered_call() -> None:
    assert r(rw.unanswered()) == body(
        user("Do two things."),
        model(call("search", {}), call("search", {"q": 2})),
        user(
            resp("search", "one"), resp("search", CANCELLED_TEXT, error=True), "Stop, never mind."
        ),
    )


def test_foreign_artifacts_not_sent() -> None:
    out = r(rw.foreign_artifacts())
    dumped = orjson.dumps(out).decode()
    assert "GOOG_SIG" in dumped and "GOOG_CALL_SIG" in dumped
    assert not any(a in dumped for a in ("ANTH_SIG", "ANTH_REDACTED", "rs_OAI", "OAI_ENC"))
    assert out["contents"][1] == model("A1")


def test_max_tokens_and_no_system() -> None:
    w = rw.win(rw.text_in("q"), system=None, tools=())
    assert r(w, max_tokens=7) == {
        "contents": [user("q")],
        "generationConfig": {"maxOutputTokens": 7},
    }


def test_two_thousand_turns() -> None:
    contents = r(rw.long_conversation(2000))["contents"]
    assert len(contents) == 8000
    assert contents[-4:] == [
        user("question 1999"),
        model(call("search", {"q": 1999})),
        user(resp("search", "result 1999")),
        model("answer 1999"),
    ]


def test_a_dropped_first_call_hands_its_signature_on() -> None:
    """Gemini signs the first of parallel calls only; dropping it must not drop the signature."""
    w = rw.win(
        rw.text_in("Do two things."),
        rw.calls_out(
            rw.call("c1", "search", "{}", signature="SIG1"),
            rw.call("c2", "search", '{"q": 2}'),
            invocation=rw.GOOGLE,
        ),
        rw.results(rw.ok("c2", "search", "two")),
    )
    assert r(w, unanswered="drop")["contents"][1:] == [
        model(call("search", {"q": 2}, sig="SIG1")),
        user(resp("search", "two")),
    ]
    # Another provider's output keeps no signature, dropped call or not.
    w_other = rw.win(
        rw.text_in("Do two things."),
        rw.calls_out(
            rw.call("c1", "search", "{}", signature="SIG1"),
            rw.call("c2", "search", '{"q": 2}'),
        ),
        rw.results(rw.ok("c2", "search", "two")),
    )
    assert r(w_other, unanswered="drop")["contents"][1] == model(call("search", {"q": 2}))


def test_a_carried_signature_never_lands_on_a_later_call() -> None:
    """When the first call kept has a signature of its own, the dropped one's goes nowhere."""
    w = rw.win(
        rw.text_in("Do three things."),
        rw.calls_out(
            rw.call("c1", "search", "{}", signature="SIG1"),
            rw.call("c2", "search", '{"q": 2}', signature="SIG2"),
            rw.call("c3", "search", '{"q": 3}'),
            invocation=rw.GOOGLE,
        ),
        rw.results(rw.ok("c2", "search", "two"), rw.ok("c3", "search", "three")),
    )
    assert r(w, unanswered="drop")["contents"][1] == model(
        call("search", {"q": 2}, sig="SIG2"), call("search", {"q": 3})
    )


def test_gemini_3_gets_the_placeholder_signature_on_unsigned_calls() -> None:
    """Gemini 3 refuses a turn whose first call has no thoughtSignature; calls another
    provider (or an older Gemini) made have none, so the first carries Google's documented
    placeholder, as Gemini signs only the first of parallel calls. Signed calls keep their
    signature, and other Gemini models get no placeholder."""
    skip = "skip_thought_signature_validator"
    foreign = rw.win(
        rw.text_in("Weather?"),
        rw.calls_out(rw.call("c1", "search", "{}"), rw.call("c2", "search", '{"q": 2}')),
        rw.results(rw.ok("c1", "search", "one"), rw.ok("c2", "search", "two")),
    )
    for name in (
        "gemini-3-pro-preview",
        "models/gemini-3-flash",
        "publishers/google/models/gemini-3-pro",
    ):
        body = render(foreign, model=name)
        rw.check_gemini(body)
        assert body["contents"][1] == model(call("search", {}, sig=skip), call("search", {"q": 2}))
    assert r(foreign)["contents"][1] == model(call("search", {}), call("search", {"q": 2}))
    assert render(foreign, model="gemini-2.5-pro")["contents"][1] == r(foreign)["contents"][1]

    def own(signature: str | None) -> rw.Window:
        return rw.win(
            rw.text_in("Weather?"),
            rw.calls_out(
                rw.call("c1", "search", "{}", signature=signature),
                rw.call("c2", "search", '{"q": 2}'),
                invocation=rw.GOOGLE,
            ),
            rw.results(rw.ok("c1", "search", "one"), rw.ok("c2", "search", "two")),
        )

    signed = render(own("SIG1"), model="gemini-3-pro-preview")["contents"][1]
    assert signed == model(call("search", {}, sig="SIG1"), call("search", {"q": 2}))
    unsigned = render(own(None), model="gemini-3-pro-preview")["contents"][1]  # Gemini 2.5's
    assert unsigned == model(call("search", {}, sig=skip), call("search", {"q": 2}))


INTERLEAVED = [
    {"text": "Two cities, two calls.", "thought": True, "thoughtSignature": "TSIG"},
    {"text": "I'll check Paris."},
    call("get_weather", {"city": "Paris"}, sig="CSIG"),
    {"text": "And Tokyo."},
    call("get_weather", {"city": "Tokyo"}),
    {"text": "Then I compare."},
]
"""Gemini's reply with text between and after its calls: it must go back exactly so."""


def reply(parts: list[dict[str, Any]], finish: bool = False) -> dict[str, Any]:
    """A generateContent response (or stream chunk) holding `parts`."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if finish:
        candidate["finishReason"] = "STOP"
    return {"candidates": [candidate], "modelVersion": "gemini-x"}


STREAMED = [
    reply([INTERLEAVED[0]]),
    reply([{"text": "I'll check "}]),
    reply([{"text": "Paris."}, INTERLEAVED[2]]),
    reply([{"text": "And"}]),
    reply([{"text": " Tokyo."}, INTERLEAVED[4]]),
    reply([INTERLEAVED[5]], finish=True),
]
"""The same reply streamed: texts in pieces, a call in the chunk that ends a text."""


def interleaved(*answers: ToolResult, stream: bool = False) -> rw.Window:
    """A question, the reply ingested (as one body, or streamed), then the calls' results."""
    output = ingest_stream(STREAMED) if stream else ingest_response(reply(INTERLEAVED, True))
    return rw.win(rw.text_in("Weather in Paris and Tokyo?"), output, rw.results(*answers))


PARIS = rw.ok("get_weather_0", "get_weather", "18C")
TOKYO = rw.ok("get_weather_1", "get_weather", "22C")


def test_interleaved_reply_goes_back_in_gemini_order() -> None:
    """Ingest records where each call stood; rendering puts every functionCall back there,
    signatures on the parts they came with, responses in call order whatever their arrival."""
    expected = body(
        user("Weather in Paris and Tokyo?"),
        model(*INTERLEAVED),
        user(resp("get_weather", "18C"), resp("get_weather", "22C")),
    )
    assert r(interleaved(PARIS, TOKYO)) == expected
    assert r(interleaved(TOKYO, PARIS, stream=True)) == expected
    gemini_3 = render(interleaved(PARIS, TOKYO), model="gemini-3-pro-preview")
    assert gemini_3 == expected  # the first call is signed: no placeholder


def test_dropping_the_first_interleaved_call_leaves_no_gap() -> None:
    """`unanswered="drop"` of the first call: the texts around it stay, the next call keeps its
    own place and takes the signature (Gemini signs the first of parallel calls only)."""
    assert r(interleaved(TOKYO), unanswered="drop")["contents"][1:] == [
        model(
            INTERLEAVED[0],
            "I'll check Paris.",
            "And Tokyo.",
            call("get_weather", {"city": "Tokyo"}, sig="CSIG"),
            "Then I compare.",
        ),
        user(resp("get_weather", "22C")),
    ]


def test_call_places_count_the_parts_not_sent() -> None:
    """Blank text and unsigned thoughts are not sent but count in `after`; a place past the
    parts is their end, and one before the previous call's follows it (call order holds)."""
    parts = (
        TextPart(text="\n"),
        TextPart(text="Checking."),
        ReasoningPart(text="unsigned"),
        TextPart(text="  "),
        TextPart(text="Done?"),
    )
    w = rw.win(
        rw.text_in("Go."),
        rw.calls_out(
            rw.call("c1", "search", '{"q": 1}', after=2),
            rw.call("c2", "search", '{"q": 2}', after=4),
            rw.call("c3", "search", '{"q": 3}', after=0),
            rw.call("c4", "search", '{"q": 4}', after=9),
            parts=parts,
            invocation=rw.GOOGLE,
        ),
        rw.results(*(rw.ok(f"c{k}", "search", str(k)) for k in range(1, 5))),
    )
    q = [call("search", {"q": k}) for k in range(1, 5)]
    assert r(w)["contents"][1] == model("Checking.", q[0], q[1], q[2], "Done?", q[3])


def test_only_googles_placed_outputs_are_reordered() -> None:
    """Another provider's output, or one with a kept call whose place is not recorded (an
    earlier version's), goes back as before: text first, then the calls."""
    parts = (TextPart(text="A", signature="S"), TextPart(text="B"))
    calls = (rw.call("c1", "search", "{}", after=1), rw.call("c2", "search", '{"q": 2}', after=1))
    answers = rw.results(rw.ok("c1", "search", "1"), rw.ok("c2", "search", "2"))

    def first_model_turn(output: ModelOutput) -> dict[str, Any]:
        return r(rw.win(rw.text_in("Go."), output, answers))["contents"][1]

    own = ModelOutput(parts=parts, tool_calls=calls, invocation=rw.GOOGLE)
    q1, q2 = call("search", {}), call("search", {"q": 2})
    assert first_model_turn(own) == model({"text": "A", "thoughtSignature": "S"}, q1, q2, "B")
    for invocation in (rw.ANTHROPIC, rw.OPENAI_RESPONSES, None):
        other = msgspec.structs.replace(own, invocation=invocation)
        assert first_model_turn(other) == model("A", "B", q1, q2)
    unplaced = msgspec.structs.replace(
        own, tool_calls=(calls[0], msgspec.structs.replace(calls[1], after=None))
    )
    assert first_model_turn(unplaced) == model({"text": "A", "thoughtSignature": "S"}, "B", q1, q2)
