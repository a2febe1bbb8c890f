"""Gemini ingest: generateContent bodies, stream chunk dicts, SSE text, JSON arrays, snake_case."""

from __future__ import annotations

import base64
import enum
from typing import Any

import orjson
import pytest

from eventlog import Invocation, ModelOutput, ProviderMappingError, TextPart, ToolCall, Usage
from eventlog.events import ReasoningPart
from eventlog.projections.providers.ingest import ingest_text
from eventlog.projections.providers.ingest_gemini import ingest_response, ingest_sse, ingest_stream
from tests.fake_provider import sse_text

MODEL = "gemini-2.5-pro"
THOUGHT = "Two cities, two calls. 東京 🌍"
TEXT = "Checking the weather. مرحبا"
SIG = base64.b64encode(bytes(range(256))).decode()
USAGE = {
    "promptTokenCount": 100,
    "candidatesTokenCount": 20,
    "thoughtsTokenCount": 15,
    "cachedContentTokenCount": 50,
    "totalTokenCount": 135,
}
EXPECTED = ModelOutput(
    parts=(ReasoningPart(text=THOUGHT), TextPart(text=TEXT)),
    tool_calls=(
        ToolCall.parse("get_weather_0", "get_weather", '{"city":"Paris"}', signature=SIG, after=2),
        ToolCall.parse("call-7", "get_time", "{}", after=2),
    ),
    invocation=Invocation(provider="google", specification="generateContent", model=MODEL),
    usage=Usage(
        prompt_tokens=100, completion_tokens=35, cached_prompt_tokens=50, reasoning_tokens=15
    ),
    stop_reason="tool_use",
    provider_stop_reason="STOP",
)
CALL_A = {
    "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
    "thoughtSignature": SIG,
}
CALL_B = {"functionCall": {"name": "get_time", "args": {}, "id": "call-7"}}


def chunk(
    parts: list[dict[str, Any]], finish: str | None = None, usage: bool = False
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    out: dict[str, Any] = {"candidates": [candidate], "modelVersion": MODEL, "responseId": "r1"}
    if usage:
        out["usageMetadata"] = USAGE
    return out


def body() -> dict[str, Any]:
    parts = [{"text": THOUGHT, "thought": True}, {"text": TEXT}, CALL_A, CALL_B]
    return chunk(parts, "STOP", usage=True)


def chunks() -> list[dict[str, Any]]:
    out = [
        chunk([{"text": THOUGHT[i : i + 5], "thought": True}]) for i in range(0, len(THOUGHT), 5)
    ]
    out += [chunk([{"text": TEXT[i : i + 4]}]) for i in range(0, len(TEXT), 4)]
    out.append(chunk([CALL_A, CALL_B], "STOP", usage=True))
    return out


def test_body_stream_sse_and_json_array() -> None:
    assert ingest_response(body()) == EXPECTED
    assert ingest_stream(chunks()) == EXPECTED
    assert ingest_sse(sse_text(chunks()).replace("\n", "\r\n")) == EXPECTED
    assert ingest_text("gemini", orjson.dumps(chunks()).decode()) == EXPECTED
    assert ingest_text("gemini", sse_text(chunks())) == EXPECTED


THOUGHT_SIG = "dGhvdWdodA=="
INTERLEAVED = [
    {"text": THOUGHT, "thought": True, "thoughtSignature": THOUGHT_SIG},
    {"text": "I'll check Paris. "},
    CALL_A,
    {"text": "And the time."},
    CALL_B,
]
"""A reply whose text stands between its calls, as Gemini sends it."""
INTERLEAVED_OUTPUT = ModelOutput(
    parts=(
        ReasoningPart(text=THOUGHT, signature=THOUGHT_SIG),
        TextPart(text="I'll check Paris. "),
        TextPart(text="And the time."),
    ),
    tool_calls=(
        ToolCall.parse("get_weather_0", "get_weather", '{"city":"Paris"}', signature=SIG, after=2),
        ToolCall.parse("call-7", "get_time", "{}", after=3),
    ),
    invocation=Invocation(provider="google", specification="generateContent", model=MODEL),
    stop_reason="tool_use",
    provider_stop_reason="STOP",
)


def test_interleaved_calls_record_their_place() -> None:
    """Each call records how many parts came before it (`after`), so text between calls can go
    back where it stood; REST camelCase and google-genai snake_case alike."""
    assert ingest_response(chunk(INTERLEAVED, "STOP")) == INTERLEAVED_OUTPUT
    sig = bytes(range(256))
    dumped = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": THOUGHT, "thought": True, "thought_signature": b"thought"},
                        {"text": "I'll check Paris. "},
                        {
                            "function_call": {"name": "get_weather", "args": {"city": "Paris"}},
                            "thought_signature": sig,
                        },
                        {"text": "And the time."},
                        {"function_call": {"name": "get_time", "args": {}, "id": "call-7"}},
                    ],
                },
                "finish_reason": "STOP",
            }
        ],
        "model_version": MODEL,
    }
    assert ingest_response(dumped) == INTERLEAVED_OUTPUT


def test_streamed_interleaved_calls_count_the_parts_as_stored() -> None:
    """Text of one kind accumulates across chunks into one part: a call's place counts the
    merged parts, not the chunks' pieces (nor a closing empty part holding a signature)."""
    stream = [
        chunk([{"text": THOUGHT[:5], "thought": True}]),
        chunk([{"text": THOUGHT[5:], "thought": True, "thoughtSignature": THOUGHT_SIG}]),
        chunk([{"text": "I'll check "}]),
        chunk([{"text": "Paris. "}, CALL_A]),
        chunk([{"text": "And the "}]),
        chunk([{"text": "time."}, CALL_B], "STOP"),
    ]
    assert ingest_stream(stream) == INTERLEAVED_OUTPUT
    assert ingest_sse(sse_text(stream)) == INTERLEAVED_OUTPUT
    signed = [
        *stream[:-1],
        chunk([{"text": "time."}]),
        chunk([{"text": "", "thoughtSignature": "c2ln"}]),
    ]
    out = ingest_stream([*signed, chunk([CALL_B], "STOP")])
    assert out.parts[2] == TextPart(text="And the time.", signature="c2ln")
    assert [c.after for c in out.tool_calls] == [2, 3]


def test_signature_in_a_last_empty_text_part() -> None:
    stream = [
        chunk([{"text": "Hel"}]),
        chunk([{"text": "lo"}]),
        chunk([{"text": "", "thoughtSignature": "c2ln"}], "STOP"),
    ]
    out = ingest_stream(stream)
    assert out.parts == (TextPart(text="Hello", signature="c2ln"),)
    assert (out.stop_reason, out.usage) == ("end_turn", None)


def test_a_signature_closes_its_part() -> None:
    out = ingest_response(chunk([{"text": "a", "thoughtSignature": "s1"}, {"text": "b"}], "STOP"))
    assert out.parts == (TextPart(text="a", signature="s1"), TextPart(text="b"))


def test_parts_of_one_response_are_not_merged() -> None:
    """Two text parts of one response stay two (a signed part is never merged with another);
    across a stream's chunks, the pieces of one part are joined as before."""
    parts = [{"text": "Intro. "}, {"text": "Answer.", "thoughtSignature": "s1"}]
    assert ingest_response(chunk(parts, "STOP")).parts == (
        TextPart(text="Intro. "),
        TextPart(text="Answer.", signature="s1"),
    )
    stream = [chunk([{"text": "Intro. "}]), chunk([parts[1]], "STOP")]
    assert ingest_stream(stream).parts == (TextPart(text="Intro. Answer.", signature="s1"),)


def test_snake_case_from_the_google_genai_sdk() -> None:
    dumped = {
        "candidates": [
            {
                "content": {"parts": [{"text": "hi", "thought_signature": bytes(range(256))}]},
                "finish_reason": "MAX_TOKENS",
            }
        ],
        "usage_metadata": {"prompt_token_count": 3, "candidates_token_count": 1},
        "model_version": MODEL,
    }
    out = ingest_response(dumped)
    assert out.parts == (TextPart(text="hi", signature=SIG),)
    assert (out.stop_reason, out.provider_stop_reason) == ("max_tokens", "MAX_TOKENS")
    assert out.usage == Usage(prompt_tokens=3, completion_tokens=1)


def test_blocked_prompt() -> None:
    out = ingest_response({"promptFeedback": {"blockReason": "SAFETY"}, "modelVersion": MODEL})
    assert (out.parts, out.stop_reason, out.provider_stop_reason) == (
        (),
        "content_filter",
        "SAFETY",
    )


def test_errors() -> None:
    with pytest.raises(ProviderMappingError, match="truncated"):
        ingest_stream(chunks()[:-1])
    with pytest.raises(ProviderMappingError, match="^gemini response: not a GenerateContent"):
        ingest_response({"choices": []})  # a body, not "stream event #1"
    with pytest.raises(ProviderMappingError, match="gemini response: no candidate has a finish"):
        ingest_response(chunks()[0])
    with pytest.raises(ProviderMappingError, match="reported an error"):
        ingest_response({"error": {"code": 429, "message": "quota"}})
    with pytest.raises(ProviderMappingError, match=r"functionCall\.name: missing"):
        ingest_response(chunk([{"functionCall": {"args": {}}}], "STOP"))
    candidate = {"content": "x", "finishReason": "STOP"}
    with pytest.raises(ProviderMappingError, match=r"candidates\[0\]\.content: expected dict"):
        ingest_response({"candidates": [candidate]})


class FinishReason(str, enum.Enum):  # noqa: UP042 - not StrEnum: str() must give the name
    """As google-genai's `CaseInSensitiveEnum` members: `str()` gives `FinishReason.STOP`."""

    STOP = "STOP"
    SAFETY = "SAFETY"


def test_reasons_as_the_sdks_enum_members() -> None:
    """google-genai's `model_dump()` keeps enum members in finish and block reasons."""
    b = body()
    b["candidates"][0]["finishReason"] = FinishReason.STOP
    out = ingest_response(b)
    assert (out.stop_reason, out.provider_stop_reason) == ("tool_use", "STOP")
    blocked = ingest_response({"promptFeedback": {"blockReason": FinishReason.SAFETY}})
    assert (blocked.stop_reason, blocked.provider_stop_reason) == ("content_filter", "SAFETY")
