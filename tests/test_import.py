"""History import: OpenAI Chat, Anthropic and OpenAI Responses histories -> validated events."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import eventlog
from eventlog import (
    Attachment,
    Invocation,
    ModelInput,
    ModelOutput,
    ReasoningPart,
    Section,
    Store,
    SystemInstructionSet,
    TextPart,
    ToolCall,
    ToolResult,
    ToolResults,
    ToolsetDefined,
    ToolSpec,
    UsageError,
    ValidationError,
)
from eventlog.errors import ProviderMappingError
from eventlog.events import RefusalPart
from eventlog.projections.providers.common import HistoryImportError
from eventlog.projections.providers.importers import history_events, import_history

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
PNG_B64 = base64.b64encode(PNG).decode()
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = ToolSpec(name="get_weather", description="Weather for a city.", parameters=SCHEMA)
BIG = "x" * 50_000 + " 東京 🌍 مرحبا"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with eventlog.open(f"sqlite:///{tmp_path}/import.db") as s:
        yield s


def chat_history() -> dict[str, Any]:
    call = {"type": "function", "function": {"name": "get_weather"}}
    return {
        "model": "gpt-4.1",
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather for a city.",
                    "parameters": SCHEMA,
                },
            }
        ],
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather here? 東京 🌍"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}},
                ],
            },
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        **call,
                        "id": "call_a",
                        "function": {**call["function"], "arguments": '{"city": "Paris"}'},
                    },
                    {
                        **call,
                        "id": "call_b",
                        "function": {**call["function"], "arguments": '{"city": "Tok'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_b", "content": "error: bad arguments"},
            {"role": "tool", "tool_call_id": "call_a", "content": BIG},
            {"role": "system", "content": "Now answer in French."},
            {"role": "user", "content": "Thanks"},
            {"role": "assistant", "content": None, "refusal": "Non."},
        ],
    }


def test_openai_chat(store: Store) -> None:
    inv = Invocation(provider="openai", specification="chat.completions", model="gpt-4.1")
    expected = [
        SystemInstructionSet(text="You are terse.\n\nUse tools."),
        ToolsetDefined(tools=(WEATHER,)),
        ModelInput(
            sections=(Section(text="Weather here? 東京 🌍"),),
            attachments=(
                Attachment(media_type="image/png", data=PNG),
                Attachment(media_type="image/jpeg", uri="https://example.com/a.jpg"),
            ),
        ),
        ModelOutput(
            parts=(TextPart(text="Checking."),),
            tool_calls=(
                ToolCall.parse("call_a", "get_weather", '{"city": "Paris"}'),
                ToolCall.parse("call_b", "get_weather", '{"city": "Tok'),
            ),
            invocation=inv,
        ),
        ToolResults(
            results=(
                ToolResult(call_id="call_a", tool_name="get_weather", content=BIG),
                ToolResult(
                    call_id="call_b", tool_name="get_weather", content="error: bad arguments"
                ),
            )
        ),
        SystemInstructionSet(text="Now answer in French."),
        ModelInput(sections=(Section(text="Thanks"),)),
        ModelOutput(parts=(RefusalPart(text="Non."),), invocation=inv),
    ]
    assert history_events("openai-chat", chat_history()) == expected
    records = import_history(store, "chat", "openai-chat", chat_history())
    assert [r.data for r in records] == expected
    assert [r.seq for r in records] == list(range(1, 9))
    assert records[0].meta == {"source": "import:openai-chat"}
    assert [r.data for r in store.read("chat")] == expected


def test_openai_chat_plain_list_and_history_starting_with_output() -> None:
    messages = [
        {"role": "assistant", "content": "Hi, how can I help?"},
        {"role": "user", "content": "Hello"},
    ]
    inv = Invocation(provider="openai", specification="chat.completions", model="")
    assert history_events("openai-chat", messages) == [
        ModelOutput(parts=(TextPart(text="Hi, how can I help?"),), invocation=inv),
        ModelInput(sections=(Section(text="Hello"),)),
    ]


def anthropic_history() -> dict[str, Any]:
    return {
        "model": "claude-opus-4-5",
        "max_tokens": 1024,
        "system": [
            {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "Use tools."},
        ],
        "tools": [
            {"name": "get_weather", "description": "Weather for a city.", "input_schema": SCHEMA}
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather? שלום"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Two cities.", "signature": "c2ln+/=="},
                    {"type": "redacted_thinking", "data": "cmVkYWN0ZWQ="},
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool_use",
                        "id": "toolu_a",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                    {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_b",
                        "content": "city is required",
                        "is_error": True,
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_a",
                        "content": [
                            {"type": "text", "text": "Sunny"},
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": PNG_B64,
                                },
                            },
                        ],
                    },
                    {"type": "text", "text": "Also: be brief."},
                ],
            },
            {"role": "assistant", "content": "Sunny in Paris."},
        ],
    }


def test_anthropic(store: Store) -> None:
    inv = Invocation(provider="anthropic", specification="messages", model="claude-opus-4-5")
    png = Attachment(media_type="image/png", data=PNG)
    expected = [
        SystemInstructionSet(text="You are terse.\n\nUse tools."),
        ToolsetDefined(tools=(WEATHER,)),
        ModelInput(sections=(Section(text="Weather? שלום"),), attachments=(png,)),
        ModelOutput(
            parts=(
                ReasoningPart(text="Two cities.", signature="c2ln+/=="),
                ReasoningPart(redacted_data="cmVkYWN0ZWQ="),
                TextPart(text="Checking."),
            ),
            tool_calls=(
                ToolCall.parse("toolu_a", "get_weather", '{"city":"Paris"}'),
                ToolCall.parse("toolu_b", "get_weather", "{}"),
            ),
            invocation=inv,
        ),
        ToolResults(
            results=(
                ToolResult(
                    call_id="toolu_a", tool_name="get_weather", content="Sunny", attachments=(png,)
                ),
                ToolResult(
                    call_id="toolu_b",
                    tool_name="get_weather",
                    status="failed",
                    content="city is required",
                ),
            )
        ),
        ModelInput(sections=(Section(text="Also: be brief."),)),
        ModelOutput(parts=(TextPart(text="Sunny in Paris."),), invocation=inv),
    ]
    assert history_events("anthropic", anthropic_history()) == expected
    records = import_history(store, "claude", "anthropic", anthropic_history())
    assert [r.data for r in store.read("claude")] == expected == [r.data for r in records]


def responses_history() -> dict[str, Any]:
    return {
        "model": "gpt-5",
        "instructions": "You are terse.",
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Weather for a city.",
                "parameters": SCHEMA,
                "strict": True,
            }
        ],
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Weather?"},
                    {"type": "input_image", "image_url": f"data:image/png;base64,{PNG_B64}"},
                ],
            },
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "Call twice."}],
                "encrypted_content": "ZW5j",
            },
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_1",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
            },
            {
                "type": "function_call",
                "call_id": "call_a",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {"type": "function_call", "call_id": "call_b", "name": "get_weather", "arguments": "{"},
            {"type": "function_call_output", "call_id": "call_b", "output": "bad arguments"},
            {
                "type": "function_call_output",
                "call_id": "call_a",
                "output": [{"type": "input_text", "text": "Sunny"}],
            },
            {"role": "developer", "content": "Answer in French."},
            {"role": "assistant", "content": "Ensoleillé."},
        ],
    }


def test_openai_responses(store: Store) -> None:
    inv = Invocation(provider="openai", specification="responses", model="gpt-5")
    expected = [
        SystemInstructionSet(text="You are terse."),
        ToolsetDefined(tools=(WEATHER,)),
        ModelInput(
            sections=(Section(text="Weather?"),),
            attachments=(Attachment(media_type="image/png", data=PNG),),
        ),
        ModelOutput(
            parts=(
                ReasoningPart(item_id="rs_1", encrypted_content="ZW5j", summary=("Call twice.",)),
                TextPart(text="Checking.", item_id="msg_1"),  # sent back with its id
            ),
            tool_calls=(  # after the reasoning item and the message: two parts before them
                ToolCall.parse("call_a", "get_weather", '{"city":"Paris"}', after=2),
                ToolCall.parse("call_b", "get_weather", "{", after=2),
            ),
            invocation=inv,
        ),
        ToolResults(
            results=(
                ToolResult(call_id="call_a", tool_name="get_weather", content="Sunny"),
                ToolResult(call_id="call_b", tool_name="get_weather", content="bad arguments"),
            )
        ),
        SystemInstructionSet(text="Answer in French."),
        ModelOutput(parts=(TextPart(text="Ensoleillé."),), invocation=inv),
    ]
    assert history_events("openai-responses", responses_history()) == expected
    import_history(store, "resp", "openai-responses", responses_history())
    assert [r.data for r in store.read("resp")] == expected


def test_responses_input_as_a_string() -> None:
    assert history_events("openai-responses", {"input": "Hi"}) == [
        ModelInput(sections=(Section(text="Hi"),))
    ]


def test_responses_instructions_and_leading_developer_messages_are_one_instruction() -> None:
    """With tools, a developer message after the toolset replaced the instructions."""
    tool = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}
    body = {
        "instructions": "Be terse.",
        "tools": [tool],
        "input": [
            {"role": "developer", "content": "Answer in French."},
            {"role": "user", "content": "hi"},
        ],
    }
    events = history_events("openai-responses", body)
    assert [type(e).__name__ for e in events] == [
        "SystemInstructionSet",
        "ToolsetDefined",
        "ModelInput",
    ]
    assert events[0] == SystemInstructionSet(text="Be terse.\n\nAnswer in French.")


def _with(body: dict[str, Any], key: str, index: int, value: Any) -> dict[str, Any]:
    items = list(body[key])
    if value is None:
        del items[index]
    else:
        items[index] = value
    return {**body, key: items}


BAD = [
    pytest.param(
        "openai-chat",
        _with(chat_history(), "messages", 2, {"role": "robot", "content": "hi"}),
        "messages[2].role",
        2,
        "unknown role 'robot'",
        id="chat-unknown-role",
    ),
    pytest.param(
        "openai-chat",
        _with(
            chat_history(), "messages", 4, {"role": "tool", "tool_call_id": "call_z", "content": ""}
        ),
        "messages[4].tool_call_id",
        4,
        "'call_z', which the previous output never made",
        id="chat-result-for-unknown-call",
    ),
    pytest.param(
        "openai-chat",
        _with(
            chat_history(),
            "messages",
            5,
            {"role": "tool", "tool_call_id": "call_b", "content": "again"},
        ),
        "messages[5].tool_call_id",
        5,
        "already has a result",
        id="chat-duplicate-result",
    ),
    pytest.param(
        "openai-chat",
        _with(chat_history(), "messages", 2, {"role": "user", "content": 5}),
        "messages[2].content",
        2,
        "expected a string or a non-empty list",
        id="chat-malformed-content",
    ),
    pytest.param(
        "openai-chat",
        _with(
            chat_history(),
            "messages",
            2,
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}
                ],
            },
        ),
        "messages[2].content[0]",
        2,
        "invalid base64",
        id="chat-bad-image-data",
    ),
    pytest.param(
        "openai-chat",
        _with(
            chat_history(),
            "messages",
            3,
            {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f"}}]},
        ),
        "messages[3].tool_calls[0].id",
        3,
        "missing",
        id="chat-call-without-id",
    ),
    pytest.param(
        "anthropic",
        _with(anthropic_history(), "messages", 0, {"role": "system", "content": "x"}),
        "messages[0].role",
        0,
        "unknown role 'system'",
        id="anthropic-unknown-role",
    ),
    pytest.param(
        "anthropic",
        _with(
            anthropic_history(),
            "messages",
            2,
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_q"}]},
        ),
        "messages[2].content[0].tool_use_id",
        2,
        "never made",
        id="anthropic-result-for-unknown-call",
    ),
    pytest.param(
        "anthropic",
        _with(
            anthropic_history(),
            "messages",
            1,
            {
                "role": "assistant",
                "content": [
                    {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}
                ],
            },
        ),
        "messages[1].content[0].type",
        1,
        "unsupported block type 'server_tool_use'",
        id="anthropic-unsupported-block",
    ),
    pytest.param(
        "anthropic",
        _with(
            anthropic_history(),
            "messages",
            1,
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "x"}],
            },
        ),
        "messages[1].content[0].input",
        1,
        "expected an object",
        id="anthropic-tool-input-not-object",
    ),
    pytest.param(
        "openai-responses",
        _with(
            responses_history(),
            "input",
            5,
            {"type": "function_call_output", "call_id": "call_q", "output": "x"},
        ),
        "input[5].call_id",
        5,
        "never made",
        id="responses-result-for-unknown-call",
    ),
    pytest.param(
        "openai-responses",
        _with(responses_history(), "input", 0, {"type": "item_reference", "id": "x"}),
        "input[0].type",
        0,
        "unsupported item type 'item_reference'",
        id="responses-unknown-item",
    ),
    pytest.param(
        "openai-responses",
        _with(responses_history(), "input", 0, {"role": "critic", "content": "x"}),
        "input[0].role",
        0,
        "unknown role 'critic'",
        id="responses-unknown-role",
    ),
]


@pytest.mark.parametrize(("fmt", "body", "path", "index", "message"), BAD)
def test_bad_input_names_index_and_field_and_writes_nothing(
    store: Store, fmt: str, body: Any, path: str, index: int, message: str
) -> None:
    before = import_history(store, "existing", "openai-chat", [{"role": "user", "content": "x"}])
    with pytest.raises(HistoryImportError) as info:
        import_history(store, "existing", fmt, body)
    assert info.value.field == path and info.value.index == index
    assert path in str(info.value) and message in str(info.value)
    assert isinstance(info.value, ValidationError) and isinstance(info.value, ProviderMappingError)
    assert [r.id for r in store.read("existing")] == [r.id for r in before]
    with pytest.raises(HistoryImportError):
        import_history(store, "fresh", fmt, body)
    assert not store.exists("fresh")


def test_unknown_format() -> None:
    with pytest.raises(UsageError, match="unknown history format"):
        history_events("cohere", [])


def test_empty_history_writes_nothing(store: Store) -> None:
    assert import_history(store, "empty", "openai-chat", []) == []
    assert not store.exists("empty")
