"""Anthropic Messages ingest: bodies, stream event dicts, SSE text, the official SDK's objects."""

from __future__ import annotations

from typing import Any

import pytest

from eventlog import Invocation, ModelOutput, ProviderMappingError, TextPart, ToolCall, Usage
from eventlog.events import ReasoningPart
from eventlog.projections.providers.ingest_anthropic import (
    AnthropicAccumulator,
    ingest_response,
    ingest_sse,
    ingest_stream,
)
from tests.fake_provider import FakeProvider, anthropic_client, fake_provider_fixture, sse_text

fake_provider = pytest.fixture(fake_provider_fixture)

MODEL = "claude-test-model"
"""A model name no SDK lists as deprecated (its warning would fail the SDK tests by date)."""
THINKING = "The user wants weather for Paris. 東京 too? 🌍"
SIGNATURE = "EqQBCkgIARABGAIiQL+7d9c/Xk1p" + "A" * 300 + "+/=="
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP" + "Q" * 100
TEXT = "I'll check the weather. مرحبا"
ARGS_A = '{"city":"Paris","unit":"°C"}'
ARGS_A_DICT = {"city": "Paris", "unit": "°C"}
MESSAGES = [{"role": "user", "content": "Weather in Paris?"}]
EXPECTED = ModelOutput(
    parts=(
        ReasoningPart(text=THINKING, signature=SIGNATURE),
        ReasoningPart(redacted_data=REDACTED),
        TextPart(text=TEXT),
    ),
    tool_calls=(
        ToolCall.parse("toolu_a", "get_weather", ARGS_A),
        ToolCall.parse("toolu_b", "get_time", "{}"),
    ),
    invocation=Invocation(provider="anthropic", specification="messages", model=MODEL),
    usage=Usage(
        prompt_tokens=30 + 1000 + 200,
        completion_tokens=90,
        cached_prompt_tokens=1000,
        cache_write_tokens=200,
    ),
    stop_reason="tool_use",
    provider_stop_reason="tool_use",
)


def usage(output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": 30,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 200,
        "output_tokens": output_tokens,
    }


def message(content: list[dict[str, Any]], stop: str | None = "tool_use") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage(90 if stop else 1),
    }


def blocks() -> list[dict[str, Any]]:
    return [
        {"type": "thinking", "thinking": THINKING, "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": REDACTED},
        {"type": "text", "text": TEXT, "citations": None},
        {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": ARGS_A_DICT},
        {"type": "tool_use", "id": "toolu_b", "name": "get_time", "input": {}},
    ]


def body() -> dict[str, Any]:
    return message(blocks())


def pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def events(args_a: str = ARGS_A) -> list[dict[str, Any]]:
    def delta(index: int, d: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": index, "delta": d}

    def start(index: int, block: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_start", "index": index, "content_block": block}

    def stop(index: int) -> dict[str, Any]:
        return {"type": "content_block_stop", "index": index}

    out: list[dict[str, Any]] = [{"type": "message_start", "message": message([], None)}]
    out.append(start(0, {"type": "thinking", "thinking": "", "signature": ""}))
    out += [delta(0, {"type": "thinking_delta", "thinking": p}) for p in pieces(THINKING, 6)]
    out += [delta(0, {"type": "signature_delta", "signature": SIGNATURE}), stop(0)]
    out += [start(1, {"type": "redacted_thinking", "data": REDACTED}), stop(1)]
    out.append({"type": "ping"})
    out.append(start(2, {"type": "text", "text": ""}))
    out += [delta(2, {"type": "text_delta", "text": p}) for p in pieces(TEXT, 5)]
    out.append(stop(2))
    tool_a = {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {}}
    out.append(start(3, tool_a))
    out += [delta(3, {"type": "input_json_delta", "partial_json": p}) for p in pieces(args_a, 3)]
    out.append(stop(3))
    out += [
        start(4, {"type": "tool_use", "id": "toolu_b", "name": "get_time", "input": {}}),
        stop(4),
    ]
    out.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 90},
        }
    )
    out.append({"type": "message_stop"})
    return out


@pytest.fixture
def anthropic_fake(fake_provider: FakeProvider) -> FakeProvider:
    fake_provider.reply("/v1/messages", json=message(blocks()), sse=sse_text(events(), named=True))
    return fake_provider


def test_sdk_message_object(anthropic_fake: FakeProvider) -> None:
    client = anthropic_client(anthropic_fake)
    result = client.messages.create(model=MODEL, max_tokens=1024, messages=MESSAGES)
    out = ingest_response(result)
    assert out == EXPECTED
    assert out.parts[0].signature == SIGNATURE  # type: ignore[union-attr]
    assert anthropic_fake.last_body() == {"model": MODEL, "max_tokens": 1024, "messages": MESSAGES}


def test_sdk_stream_objects(anthropic_fake: FakeProvider) -> None:
    client = anthropic_client(anthropic_fake)
    stream = client.messages.create(model=MODEL, max_tokens=1024, messages=MESSAGES, stream=True)
    assert ingest_stream(stream) == EXPECTED


def test_sdk_stream_helper_events_are_not_doubled(anthropic_fake: FakeProvider) -> None:
    client = anthropic_client(anthropic_fake)
    with client.messages.stream(model=MODEL, max_tokens=1024, messages=MESSAGES) as stream:
        seen = list(stream)
    assert {"text", "thinking", "signature", "input_json"} <= {e.type for e in seen}
    assert ingest_stream(seen) == EXPECTED


def test_raw_body_sse_and_dicts() -> None:
    assert ingest_response(message(blocks())) == EXPECTED
    assert ingest_sse(sse_text(events(), named=True)) == EXPECTED
    assert ingest_stream(events()) == EXPECTED


def test_unparseable_streamed_arguments_are_kept() -> None:
    out = ingest_stream(events(args_a='{"city": "Par'))
    call = out.tool_calls[0]
    assert call.raw_arguments == '{"city": "Par'
    assert call.arguments is None and call.parse_error


def test_truncated_and_bad_streams() -> None:
    acc = AnthropicAccumulator()
    acc.feed_all(events()[:-2])
    with pytest.raises(ProviderMappingError, match="truncated.*message_stop"):
        acc.result()
    with pytest.raises(ProviderMappingError, match="before message_start"):
        ingest_stream(events()[1:])
    with pytest.raises(ProviderMappingError, match="event #2: the provider reported an error"):
        ingest_stream([events()[0], {"type": "error", "error": {"type": "overloaded_error"}}])
    with pytest.raises(ProviderMappingError, match="content block 9 before its start"):
        ingest_stream([events()[0], {"type": "content_block_delta", "index": 9, "delta": {}}])


def test_bad_bodies() -> None:
    with pytest.raises(ProviderMappingError, match="not a Messages API response"):
        ingest_response({"object": "chat.completion", "choices": []})
    with pytest.raises(ProviderMappingError, match=r"content\[0\]\.id: missing"):
        ingest_response(message([{"type": "tool_use", "name": "f", "input": {}}]))


def test_stop_reasons() -> None:
    out = ingest_response(message([{"type": "text", "text": "x"}], "model_context_window_exceeded"))
    assert (out.stop_reason, out.provider_stop_reason) == (
        "max_tokens",
        "model_context_window_exceeded",
    )
    assert ingest_response(message([], "refusal")).stop_reason == "refusal"


def test_integers_past_64_bits_keep_their_digits(tmp_path: Any) -> None:
    """orjson made floats of them (silently) or refused them (TypeError): the digits are kept,
    in the raw text only (MessagePack stores cannot hold them parsed), and rendered back."""
    import eventlog as el
    from eventlog.projections.providers.ingest import ingest_text
    from eventlog.projections.providers.render import render_json
    from tests import render_windows as rw

    big = 123456789012345678901234567890
    body = {
        "type": "message", "id": "m", "role": "assistant", "model": "claude-x",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"n": big}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1},
    }  # fmt: skip
    raw = '{"type":"message","id":"m","role":"assistant","model":"claude-x","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{"n":%d}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}'  # noqa: E501
    for out in (ingest_response(body), ingest_text("anthropic", raw % big)):
        (call,) = out.tool_calls
        assert call.raw_arguments == f'{{"n":{big}}}' and call.arguments is None
        assert call.parse_error == el.events.BIG_INT_ERROR
    with el.open(f"jsonl://{tmp_path}/j") as store:
        store.append("s", [el.ModelInput.from_text("go"), out])
        (back,) = store.read("s", 2)
        assert back.data == out
    window = rw.win(el.ModelInput.from_text("go"), out)
    assert f'"input":{{"n":{big}}}'.encode() in render_json(window, "anthropic", model="m")
    with el.open(f"sqlite:///{tmp_path}/s.db") as store:
        store.append("s", [out])
        assert store.get("s", 1).data == out


def test_malformed_nested_fields_are_mapping_errors() -> None:
    """Shapes the SDK types do not allow fail with a located ProviderMappingError."""
    body = message([{"type": "text", "text": "a"}])
    body["usage"] = {**usage(1), "output_tokens_details": "x"}
    with pytest.raises(ProviderMappingError, match=r"usage\.output_tokens_details: expected"):
        ingest_response(body)
    start = {"type": "message_start", "message": {**message([]), "usage": "x"}}
    with pytest.raises(ProviderMappingError, match=r"event #1\.message\.usage: expected dict"):
        ingest_stream([start])
    start = {"type": "message_start", "message": message([])}
    block = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": 1},
    }
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": "a"},
    }
    with pytest.raises(ProviderMappingError, match=r"event #3: content block 0\.text: expected"):
        ingest_stream([start, block, delta])
