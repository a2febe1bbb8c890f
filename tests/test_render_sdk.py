"""Rendered payloads go through the official SDKs unchanged and match the SDKs' own param types.

Each payload is sent with `chat.completions.create`, `responses.create` or `messages.create` to
a local fake endpoint (tests/fake_provider.py); the body the SDK sent must equal the payload.
Each payload is also validated against the SDK's request TypedDicts with pydantic.
"""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import orjson
import pytest
from anthropic.types import message_create_params
from openai.types.chat import completion_create_params
from openai.types.responses import response_create_params
from pydantic import TypeAdapter, ValidationError

from eventlog.projections.providers.render import render
from tests import render_windows as rw
from tests.fake_provider import (
    ANTHROPIC_REPLY,
    CHAT_REPLY,
    RESPONSES_REPLY,
    FakeProvider,
    anthropic_client,
    fake_provider_fixture,
    openai_client,
)

fake_provider = pytest.fixture(scope="module")(fake_provider_fixture)

WINDOWS = {
    **{name: make() for name, make in rw.SCENARIOS.items()},
    "long_conversation": rw.long_conversation(50),
}
OPTIONS: dict[str, list[dict[str, Any]]] = {
    "openai-chat": [{}, {"system_role": "developer", "max_tokens": 100}],
    "openai-responses": [{}, {"max_tokens": 100}],
    "anthropic": [{}, {"cache": True, "cache_every": 2, "max_tokens": 100}],
}

CHAT_PARAMS: TypeAdapter[Any] = TypeAdapter(
    completion_create_params.CompletionCreateParamsNonStreaming
)
RESPONSES_PARAMS: TypeAdapter[Any] = TypeAdapter(
    response_create_params.ResponseCreateParamsNonStreaming
)
ANTHROPIC_PARAMS: TypeAdapter[Any] = TypeAdapter(
    message_create_params.MessageCreateParamsNonStreaming
)


def validate(adapter: TypeAdapter[Any], payload: dict[str, Any]) -> Any:
    """Validate, then walk the result: the SDKs type lists as `Iterable`, which pydantic
    validates lazily, item by item as they are iterated."""
    return _force(adapter.validate_python(payload))


def _force(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _force(v) for k, v in value.items()}
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return value
    if isinstance(value, list | tuple) or hasattr(value, "__next__"):
        return [_force(v) for v in value]
    return value


def _send(fake: FakeProvider, provider: str, payload: dict[str, Any]) -> Any:
    if provider == "openai-chat":
        fake.reply("/v1/chat/completions", json=CHAT_REPLY)
        with openai_client(fake) as client:
            return client.chat.completions.create(**payload)
    if provider == "openai-responses":
        fake.reply("/v1/responses", json=RESPONSES_REPLY)
        with openai_client(fake) as client:
            return client.responses.create(**payload)
    fake.reply("/v1/messages", json=ANTHROPIC_REPLY)
    with anthropic_client(fake) as client:
        return client.messages.create(**payload)


@pytest.mark.parametrize("name", sorted(WINDOWS))
@pytest.mark.parametrize("provider", sorted(OPTIONS))
def test_sdk_sends_the_payload_unchanged(
    fake_provider: FakeProvider, provider: str, name: str
) -> None:
    for options in OPTIONS[provider]:
        payload = render(WINDOWS[name], provider, model="test-model", **options)
        reply = _send(fake_provider, provider, payload)
        assert reply is not None
        sent = fake_provider.requests[-1]
        assert sent.body == payload
        assert orjson.loads(orjson.dumps(payload)) == sent.body


@pytest.mark.parametrize("name", sorted(WINDOWS))
def test_payloads_match_sdk_param_types(name: str) -> None:
    window = WINDOWS[name]
    for options in OPTIONS["openai-chat"]:
        validate(CHAT_PARAMS, render(window, "openai-chat", model="m", **options))
    for options in OPTIONS["openai-responses"]:
        validate(RESPONSES_PARAMS, render(window, "openai-responses", model="m", **options))
    for options in OPTIONS["anthropic"]:
        validate(ANTHROPIC_PARAMS, render(window, "anthropic", model="m", **options))


def test_param_types_reject_a_broken_payload() -> None:
    """The type check has teeth: a tool_use without `input` fails it."""
    payload = render(rw.only_tool_calls(), "anthropic", model="m")
    del payload["messages"][1]["content"][0]["input"]
    with pytest.raises(ValidationError, match="input"):
        validate(ANTHROPIC_PARAMS, payload)


def test_sdk_versions_are_the_official_clients() -> None:
    assert openai.OpenAI.__module__.startswith("openai")
    assert anthropic.Anthropic.__module__.startswith("anthropic")
