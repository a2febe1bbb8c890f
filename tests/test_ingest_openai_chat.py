"""OpenAI Chat Completions ingest: bodies, chunk dicts, SSE text and the official SDK's objects."""

from __future__ import annotations

from typing import Any

import pytest

from eventlog import Invocation, ModelOutput, ProviderMappingError, TextPart, ToolCall, Usage
from eventlog.events import ReasoningPart, RefusalPart
from eventlog.projections.providers.ingest_openai_chat import (
    OpenAIChatAccumulator,
    ingest_response,
    ingest_sse,
    ingest_stream,
)
from tests.fake_provider import FakeProvider, fake_provider_fixture, openai_client, sse_text

fake_provider = pytest.fixture(fake_provider_fixture)

MODEL = "gpt-4.1-2025-04-14"
TEXT = "Let me check. 東京 🌍 مرحبا"
ARGS_A = '{"city": "Paris", "unit": "°C"}'
ARGS_B = '{"city": "Par'
"""Cut off: does not parse, must be kept verbatim with a parse error."""
USAGE = {
    "prompt_tokens": 120,
    "completion_tokens": 40,
    "total_tokens": 160,
    "prompt_tokens_details": {"cached_tokens": 64},
    "completion_tokens_details": {"reasoning_tokens": 8},
}
EXPECTED = ModelOutput(
    parts=(TextPart(text=TEXT),),
    tool_calls=(
        ToolCall.parse("call_a", "get_weather", ARGS_A),
        ToolCall.parse("call_b", "get_weather", ARGS_B),
    ),
    invocation=Invocation(provider="openai", specification="chat.completions", model=MODEL),
    usage=Usage(
        prompt_tokens=120, completion_tokens=40, cached_prompt_tokens=64, reasoning_tokens=8
    ),
    stop_reason="tool_use",
    provider_stop_reason="tool_calls",
)
MESSAGES = [{"role": "user", "content": "Weather in Paris?"}]


def completion() -> dict[str, Any]:
    def call(call_id: str, args: str) -> dict[str, Any]:
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": "get_weather", "arguments": args},
        }

    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "logprobs": None,
                "message": {
                    "role": "assistant",
                    "content": TEXT,
                    "refusal": None,
                    "tool_calls": [call("call_a", ARGS_A), call("call_b", ARGS_B)],
                },
            }
        ],
        "usage": USAGE,
    }


def pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def chunks() -> list[dict[str, Any]]:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": MODEL}

    def c(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            **base,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }

    out = [c({"role": "assistant", "content": ""})]
    out += [c({"content": p}) for p in pieces(TEXT, 3)]
    for index, call_id in enumerate(("call_a", "call_b")):
        first = {"name": "get_weather", "arguments": ""}
        out.append(
            c(
                {
                    "tool_calls": [
                        {"index": index, "id": call_id, "type": "function", "function": first}
                    ]
                }
            )
        )
    a, b = pieces(ARGS_A, 4), pieces(ARGS_B, 2)
    for i in range(max(len(a), len(b))):  # the two calls' argument deltas interleave
        for index, parts in ((0, a), (1, b)):
            if i < len(parts):
                delta = {"index": index, "function": {"arguments": parts[i]}}
                out.append(c({"tool_calls": [delta]}))
    out.append(c({}, "tool_calls"))
    out.append({**base, "choices": [], "usage": USAGE})
    return out


@pytest.fixture
def chat_fake(fake_provider: FakeProvider) -> FakeProvider:
    fake_provider.reply(
        "/v1/chat/completions", json=completion(), sse=sse_text(chunks(), done=True)
    )
    return fake_provider


def test_expected_output_records_the_parse_error() -> None:
    good, bad = EXPECTED.tool_calls
    assert good.arguments == {"city": "Paris", "unit": "°C"} and good.parse_error is None
    assert bad.arguments is None and bad.parse_error and bad.raw_arguments == ARGS_B


def test_sdk_completion_object(chat_fake: FakeProvider) -> None:
    client = openai_client(chat_fake)
    result = client.chat.completions.create(model=MODEL, messages=MESSAGES)
    assert ingest_response(result) == EXPECTED
    assert chat_fake.last_body() == {"model": MODEL, "messages": MESSAGES}


def test_raw_body() -> None:
    assert ingest_response(completion()) == EXPECTED


def test_sdk_stream_objects(chat_fake: FakeProvider) -> None:
    client = openai_client(chat_fake)
    stream = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    assert ingest_stream(stream) == EXPECTED
    assert chat_fake.last_body()["stream"] is True


def test_sdk_stream_helper_events(chat_fake: FakeProvider) -> None:
    client = openai_client(chat_fake)
    with client.chat.completions.stream(model=MODEL, messages=MESSAGES) as stream:
        events = list(stream)
    assert {e.type for e in events} > {"chunk"}  # derived events are ignored, chunks folded
    assert ingest_stream(events) == EXPECTED


def test_raw_sse_text_and_chunk_dicts() -> None:
    assert ingest_sse(sse_text(chunks(), done=True)) == EXPECTED
    assert ingest_stream(chunks()) == EXPECTED


def test_accumulator_feeds_json_text() -> None:
    acc = OpenAIChatAccumulator()
    for chunk in chunks():
        acc.feed(__import__("orjson").dumps(chunk))
    assert acc.result() == EXPECTED
    assert acc.count == len(chunks())


def test_calls_merge_by_index_not_by_last_id() -> None:
    # Only the first delta of each call carries its id; later deltas must not start new calls.
    out = ingest_stream(chunks())
    assert [c.id for c in out.tool_calls] == ["call_a", "call_b"]
    assert [c.raw_arguments for c in out.tool_calls] == [ARGS_A, ARGS_B]


def test_deltas_without_index_from_compatible_servers() -> None:
    def c(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {"object": "chat.completion.chunk", "model": "m", "choices": [choice]}

    stream = [
        c({"tool_calls": [{"id": "x", "function": {"name": "f", "arguments": '{"a"'}}]}),
        c({"tool_calls": [{"function": {"arguments": ": 1}"}}]}),
        c({"tool_calls": [{"id": "y", "function": {"name": "g", "arguments": "{}"}}]}),
        c({}, "tool_calls"),
    ]
    out = ingest_stream(stream)
    assert [(c.id, c.name, c.arguments) for c in out.tool_calls] == [
        ("x", "f", {"a": 1}),
        ("y", "g", {}),
    ]


def test_deltas_without_index_that_repeat_their_call_id() -> None:
    def c(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {"object": "chat.completion.chunk", "model": "m", "choices": [choice]}

    stream = [
        c({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": ""}}]}),
        c({"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": ""}}]}),
        c({"tool_calls": [{"id": "a", "function": {"arguments": '{"x":1}'}}]}),
        c({"tool_calls": [{"id": "b", "function": {"arguments": '{"y":2}'}}]}),
        c({}, "tool_calls"),
    ]
    out = ingest_stream(stream)
    assert [(c.id, c.name, c.arguments) for c in out.tool_calls] == [
        ("a", "f", {"x": 1}),
        ("b", "g", {"y": 2}),
    ]


def test_azure_prompt_filter_chunk_is_skipped() -> None:
    """Azure OpenAI streams start with a chunk of prompt filter results (object '')."""
    first = {
        "id": "",
        "object": "",
        "created": 0,
        "model": "",
        "choices": [],
        "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}],
    }
    out = ingest_sse(sse_text([first, *chunks()], done=True))
    assert [c.id for c in out.tool_calls] == ["call_a", "call_b"]
    with pytest.raises(ProviderMappingError, match="not a chat.completion.chunk: ''"):
        ingest_stream([{**first, "choices": [{"index": 0, "delta": {}}]}, *chunks()])


def test_refusal_and_reasoning_content() -> None:
    body = completion()
    body["choices"][0]["message"] = {
        "role": "assistant",
        "content": None,
        "refusal": "I can't help with that.",
        "reasoning_content": "The user asks for something unsafe.",
    }
    body["choices"][0]["finish_reason"] = "stop"
    out = ingest_response(body)
    assert out.parts == (
        ReasoningPart(text="The user asks for something unsafe."),
        RefusalPart(text="I can't help with that."),
    )
    assert out.tool_calls == ()
    # `finish_reason` says "stop"; the neutral value of a refusal is `refusal`.
    assert (out.stop_reason, out.provider_stop_reason) == ("refusal", "stop")
    streamed = [{**chunks()[0], "choices": [{"index": 0, "delta": {"refusal": "No."}}]}]
    streamed.append(
        {**chunks()[0], "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    )
    assert ingest_stream(streamed).stop_reason == "refusal"


def test_length_stop_reason() -> None:
    body = completion()
    body["choices"][0]["finish_reason"] = "length"
    out = ingest_response(body)
    assert (out.stop_reason, out.provider_stop_reason) == ("max_tokens", "length")


def test_truncated_stream_is_an_error() -> None:
    cut = chunks()[:-2]  # no finish chunk, no usage
    with pytest.raises(ProviderMappingError, match="truncated"):
        ingest_stream(cut)
    with pytest.raises(ProviderMappingError, match=r"truncated.*DONE"):
        ingest_sse(sse_text(chunks()))  # finished, but the [DONE] line never came


def test_sse_cut_mid_event_names_the_line() -> None:
    text = sse_text(chunks(), done=True)
    cut = text[: text.index("call_b") + 3]
    with pytest.raises(
        ProviderMappingError, match=r"openai-chat SSE event at line \d+: not valid JSON"
    ):
        ingest_sse(cut)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"type": "message", "content": []}, "not a Chat Completions response"),
        ({**completion(), "choices": [{"index": 0}]}, r"choices\[0\]\.message: missing"),
        (chunks()[1], "stream chunk"),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_bad_bodies_name_what_and_where(body: Any, message: str) -> None:
    with pytest.raises(ProviderMappingError, match=message):
        ingest_response(body)


def test_provider_error_in_stream() -> None:
    with pytest.raises(ProviderMappingError, match="event #2: the provider reported an error"):
        ingest_stream([chunks()[0], {"error": {"message": "overloaded"}}])


def test_other_choice() -> None:
    body = completion()
    second = {"index": 1, "finish_reason": "stop", "message": {"role": "assistant", "content": "B"}}
    body["choices"].append(second)
    assert ingest_response(body, choice=1).text == "B"


def _with_usage_details(details: Any) -> dict[str, Any]:
    return {**completion(), "usage": {**USAGE, "prompt_tokens_details": details}}


def _call_delta(call: dict[str, Any]) -> list[dict[str, Any]]:
    chunk = chunks()[0]
    return [{**chunk, "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}]


@pytest.mark.parametrize(
    ("ingest", "body", "message"),
    [
        (ingest_response, _with_usage_details("x"), r"usage\.prompt_tokens_details: expected dict"),
        (ingest_stream, _call_delta({"index": 0, "id": "c", "function": "x"}),
         r"tool_calls\[0\]\.function: expected dict"),
        (ingest_stream, _call_delta({"index": 0, "id": "c", "function": {"name": 1}}),
         r"tool_calls\[0\]\.function\.name: expected str"),
    ],
)  # fmt: skip
def test_malformed_nested_fields_are_mapping_errors(ingest: Any, body: Any, message: str) -> None:
    """Shapes the SDK types do not allow fail with a located ProviderMappingError."""
    with pytest.raises(ProviderMappingError, match=message):
        ingest(body)
