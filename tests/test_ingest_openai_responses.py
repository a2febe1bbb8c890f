"""OpenAI Responses ingest: bodies, stream event dicts, SSE text and the official SDK's objects."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from eventlog import Invocation, ModelOutput, ProviderMappingError, TextPart, ToolCall, Usage
from eventlog.events import ReasoningPart, RefusalPart
from eventlog.projections.providers.ingest_openai_responses import (
    ingest_response,
    ingest_sse,
    ingest_stream,
)
from tests.fake_provider import FakeProvider, fake_provider_fixture, openai_client, sse_text

fake_provider = pytest.fixture(fake_provider_fixture)

MODEL = "gpt-5-2025-08-07"
TEXT = "Checking both cities. 東京 🌍 שלום"
SUMMARY = "Plan: call the weather tool twice."
ENCRYPTED = "gAAAAABo-opaque+/==" * 20
ARGS_A = '{"city": "Paris"}'
ARGS_B = '{"city": "Tok'
USAGE = {
    "input_tokens": 200,
    "input_tokens_details": {"cached_tokens": 128, "cache_write_tokens": 0},
    "output_tokens": 50,
    "output_tokens_details": {"reasoning_tokens": 20},
    "total_tokens": 250,
}
EXPECTED = ModelOutput(
    parts=(
        ReasoningPart(item_id="rs_1", encrypted_content=ENCRYPTED, summary=(SUMMARY,)),
        TextPart(text=TEXT, item_id="msg_1"),
    ),
    tool_calls=(
        # Both calls came after the reasoning item and the message: two parts before them.
        ToolCall.parse("call_a", "get_weather", ARGS_A, item_id="fc_1", after=2),
        ToolCall.parse("call_b", "get_weather", ARGS_B, item_id="fc_2", after=2),
    ),
    invocation=Invocation(provider="openai", specification="responses", model=MODEL),
    usage=Usage(
        prompt_tokens=200, completion_tokens=50, cached_prompt_tokens=128, reasoning_tokens=20
    ),
    stop_reason="tool_use",
    provider_stop_reason="completed",
)


def reasoning(done: bool) -> dict[str, Any]:
    item: dict[str, Any] = {"id": "rs_1", "type": "reasoning", "summary": []}
    if done:
        item["summary"] = [{"type": "summary_text", "text": SUMMARY}]
        item["encrypted_content"] = ENCRYPTED
    return item


def message(text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if text else []
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": content,
    }


def call(n: int, call_id: str, args: str, status: str = "completed") -> dict[str, Any]:
    return {
        "id": f"fc_{n}",
        "type": "function_call",
        "call_id": call_id,
        "name": "get_weather",
        "arguments": args,
        "status": status,
    }


def response(output: list[dict[str, Any]], status: str = "completed") -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": MODEL,
        "status": status,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": USAGE if status != "in_progress" else None,
        "error": None,
        "incomplete_details": None,
    }


def final_output() -> list[dict[str, Any]]:
    return [reasoning(True), message(TEXT), call(1, "call_a", ARGS_A), call(2, "call_b", ARGS_B)]


def pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def events(*, with_done: bool = True) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"type": "response.created", "response": response([], "in_progress")},
        {"type": "response.output_item.added", "output_index": 0, "item": reasoning(False)},
        {
            "type": "response.reasoning_summary_part.added",
            "item_id": "rs_1",
            "output_index": 0,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": ""},
        },
    ]
    out += [
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs_1",
            "output_index": 0,
            "summary_index": 0,
            "delta": p,
        }
        for p in pieces(SUMMARY, 5)
    ]
    if with_done:
        out.append(
            {"type": "response.output_item.done", "output_index": 0, "item": reasoning(True)}
        )
    out.append(
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": message("", "in_progress"),
        }
    )
    out.append(
        {
            "type": "response.content_part.added",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "part": {"type": "output_text", "text": "", "annotations": []},
        }
    )
    out += [
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "delta": p,
            "logprobs": [],
        }
        for p in pieces(TEXT, 4)
    ]
    out.append(
        {
            "type": "response.output_text.done",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "text": TEXT,
            "logprobs": [],
        }
    )
    for n, call_id in ((1, "call_a"), (2, "call_b")):
        out.append(
            {
                "type": "response.output_item.added",
                "output_index": n + 1,
                "item": call(n, call_id, "", "in_progress"),
            }
        )
    a, b = pieces(ARGS_A, 3), pieces(ARGS_B, 2)
    for i in range(max(len(a), len(b))):
        for index, parts in ((2, a), (3, b)):
            if i < len(parts):
                out.append(
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": f"fc_{index - 1}",
                        "output_index": index,
                        "delta": parts[i],
                    }
                )
    if with_done:
        for index, item in enumerate(final_output()[1:], start=1):
            out.append({"type": "response.output_item.done", "output_index": index, "item": item})
        out.append({"type": "response.completed", "response": response(final_output())})
    else:
        out.append({"type": "response.completed", "response": response([])})
    for seq, e in enumerate(out):
        e["sequence_number"] = seq
    return out


@pytest.fixture
def responses_fake(fake_provider: FakeProvider) -> FakeProvider:
    fake_provider.reply(
        "/v1/responses", json=response(final_output()), sse=sse_text(events(), named=True)
    )
    return fake_provider


def test_sdk_response_object(responses_fake: FakeProvider) -> None:
    result = openai_client(responses_fake).responses.create(model=MODEL, input="Weather?")
    assert ingest_response(result) == EXPECTED
    assert responses_fake.last_body() == {"model": MODEL, "input": "Weather?"}


def test_sdk_stream_objects(responses_fake: FakeProvider) -> None:
    stream = openai_client(responses_fake).responses.create(
        model=MODEL, input="Weather?", stream=True
    )
    assert ingest_stream(stream) == EXPECTED


def test_sdk_stream_helper(responses_fake: FakeProvider) -> None:
    client = openai_client(responses_fake)
    with client.responses.stream(model=MODEL, input="Weather?") as stream:
        assert ingest_stream(list(stream)) == EXPECTED


def test_raw_body_sse_and_dicts() -> None:
    assert ingest_response(response(final_output())) == EXPECTED
    assert ingest_sse(sse_text(events(), named=True)) == EXPECTED
    assert ingest_stream(events()) == EXPECTED


def test_deltas_alone_build_the_output() -> None:
    # Without the *.done items and with an empty final list, everything comes from deltas;
    # the encrypted content only ever arrives in a done item, so it is absent here.
    expected = copy.deepcopy(EXPECTED)
    reasoning_part = ReasoningPart(item_id="rs_1", summary=(SUMMARY,))
    expected = ModelOutput(
        parts=(reasoning_part, TextPart(text=TEXT, item_id="msg_1")),
        tool_calls=expected.tool_calls,
        invocation=expected.invocation,
        usage=expected.usage,
        stop_reason="tool_use",
        provider_stop_reason="completed",
    )
    assert ingest_stream(events(with_done=False)) == expected


def test_incomplete_and_refusal() -> None:
    body = response(
        [{**message(""), "content": [{"type": "refusal", "refusal": "No."}]}], "incomplete"
    )
    body["incomplete_details"] = {"reason": "max_output_tokens"}
    out = ingest_response(body)
    assert out.parts == (RefusalPart(text="No."),)
    assert (out.stop_reason, out.provider_stop_reason) == ("max_tokens", "max_output_tokens")


def test_completed_refusal_stops_with_refusal() -> None:
    refused = {**message(""), "content": [{"type": "refusal", "refusal": "No."}]}
    out = ingest_response(response([refused]))
    assert (out.stop_reason, out.provider_stop_reason) == ("refusal", "completed")
    assert ingest_response(response([message("ok")])).stop_reason == "end_turn"


@pytest.mark.parametrize(
    ("body", "message_re"),
    [
        ({**response([]), "usage": {**USAGE, "input_tokens_details": "x"}},
         r"usage\.input_tokens_details: expected dict"),
        ({**response([]), "usage": {**USAGE, "output_tokens_details": 3}},
         r"usage\.output_tokens_details: expected dict"),
        (response([{**message(""), "content": ["x"]}]), r"output\[0\]\.content\[0\]: expected"),
        (response([{**reasoning(False), "summary": ["x"]}]), r"\[0\]\.summary\[0\]: expected"),
        (response([{**reasoning(False), "content": [1]}]), r"\[0\]\.content\[0\]: expected"),
        (response([{**message("a"), "type": ["message"]}]), r"\[0\]\.type: expected str"),
        ({**response([], "incomplete"), "incomplete_details": "x"}, "incomplete_details: expected"),
    ],
)  # fmt: skip
def test_malformed_nested_fields_are_mapping_errors(body: Any, message_re: str) -> None:
    """Shapes the SDK types do not allow fail with a located ProviderMappingError."""
    with pytest.raises(ProviderMappingError, match=message_re):
        ingest_response(body)


def test_malformed_stream_targets_are_mapping_errors() -> None:
    added = {"type": "response.output_item.added", "output_index": 0, "item": message("")}
    bad_list = {**added, "item": {**message(""), "content": ["x"]}}
    delta = {"type": "response.output_text.delta", "output_index": 0, "content_index": 0}
    with pytest.raises(ProviderMappingError, match=r"event #2: the item's content\[0\]"):
        ingest_stream([bad_list, {**delta, "delta": "hi"}])
    part = {"type": "response.content_part.added", "output_index": 0, "content_index": 0,
            "part": {"type": "output_text", "text": 5}}  # fmt: skip
    with pytest.raises(ProviderMappingError, match=r"event #3: the delta's target\.text"):
        ingest_stream([added, part, {**delta, "delta": "hi"}])


def test_reasoning_text_content_is_kept() -> None:
    item = {**reasoning(True), "content": [{"type": "reasoning_text", "text": "step 1"}]}
    out = ingest_response(response([item, message("ok")]))
    assert out.parts[0] == ReasoningPart(
        text="step 1", item_id="rs_1", encrypted_content=ENCRYPTED, summary=(SUMMARY,)
    )
    assert out.stop_reason == "end_turn"


def test_failures() -> None:
    failed = {**response([], "failed"), "error": {"code": "server_error", "message": "boom"}}
    with pytest.raises(ProviderMappingError, match="failed"):
        ingest_response(failed)
    with pytest.raises(ProviderMappingError, match="event #3: the provider reported an error"):
        ingest_stream([*events()[:2], {"type": "error", "message": "boom", "sequence_number": 2}])
    with pytest.raises(ProviderMappingError, match="truncated"):
        ingest_stream(events()[:-1])
    with pytest.raises(ProviderMappingError, match="not a Responses API response"):
        ingest_response({"choices": []})
    delta = {
        "type": "response.output_text.delta",
        "output_index": 7,
        "content_index": 0,
        "delta": "x",
    }
    with pytest.raises(ProviderMappingError, match="output_index 7 before its item"):
        ingest_stream([events()[0], delta])


@pytest.mark.parametrize(
    "kind",
    ["computer_call", "local_shell_call", "shell_call", "apply_patch_call", "mcp_approval_request"],
)
def test_items_the_host_must_act_on_are_refused_not_dropped(kind: str) -> None:
    """A call only the host can carry out, dropped, would record a finished turn: refused."""
    item = {"type": kind, "id": "x_1", "call_id": "call_9", "status": "completed"}
    with pytest.raises(ProviderMappingError, match=f"output\\[1\\].*{kind}.*asks the host"):
        ingest_response(response([message("running it"), item]))
    # Built-in tools OpenAI ran itself leave nothing for the host: still skipped.
    searched = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    assert ingest_response(response([searched, message("found")])).parts == (
        TextPart(text="found", item_id="msg_1"),
    )


def test_a_compaction_item_is_refused_not_dropped() -> None:
    """Server-side compaction's item carries context the next request must send back."""
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-compacted"}
    with pytest.raises(ProviderMappingError, match="output\\[0\\].*'compaction' item"):
        ingest_response(response([item, message("Done.")]))


def test_message_ids_and_phase_are_kept() -> None:
    preamble = {**message("Checking."), "id": "msg_a", "phase": "commentary"}
    answer = {**message("Done."), "id": "msg_b", "phase": "final_answer"}
    out = ingest_response(response([reasoning(True), preamble, answer]))
    assert out.parts[1:] == (
        TextPart(text="Checking.", item_id="msg_a", phase="commentary"),
        TextPart(text="Done.", item_id="msg_b", phase="final_answer"),
    )
