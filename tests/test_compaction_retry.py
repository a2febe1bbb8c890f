"""Context overflow answers, read from the official SDKs' errors, and compact-and-retry.

The SDKs talk to a local fake of the provider APIs (tests/fake_provider.py) that answers a
request longer than a limit with the provider's own overflow error body, so the exceptions
are the ones the SDKs raise for real.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import openai
import orjson
import pytest

import eventlog as el
from eventlog.errors import ContextOverflowError
from eventlog.projections.compaction import (
    CompactionPolicy,
    compact_and_retry,
    compact_and_retry_async,
)
from eventlog.projections.overflow import context_overflow
from eventlog.projections.providers.render import render
from eventlog.projections.window_types import Window
from tests.fake_provider import (
    ANTHROPIC_REPLY,
    CHAT_REPLY,
    FakeProvider,
    Recorded,
    Reply,
    anthropic_client,
    fake_provider_fixture,
    openai_client,
)

server = pytest.fixture(scope="module")(fake_provider_fixture)


@pytest.fixture
def fake_provider(server: FakeProvider) -> FakeProvider:
    """The module's fake, with no requests, replies or handlers left from an earlier test."""
    server.requests.clear()
    server.replies.clear()
    server.handlers.clear()
    return server


def anthropic_overflow(tokens: int, limit: int) -> dict[str, Any]:
    message = f"prompt is too long: {tokens} tokens > {limit} maximum"
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def openai_overflow(tokens: int, limit: int) -> dict[str, Any]:
    message = (
        f"This model's maximum context length is {limit} tokens. However, your messages "
        f"resulted in {tokens} tokens. Please reduce the length of the messages."
    )
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def limited(limit: int, ok: Any, overflow: Any) -> Any:
    """A handler: the overflow error when the body's "tokens" (bytes / 4) exceed `limit`."""

    def handle(request: Recorded) -> Reply:
        tokens = len(request.raw) // 4
        if tokens > limit:
            return Reply(status=400, json=overflow(tokens, limit))
        return Reply(json=ok)

    return handle


def _history(store: el.Store, stream: str, turns: int, words: int = 150) -> None:
    store.append(stream, [el.SystemInstructionSet(text="Be brief.")])
    for i in range(turns):
        store.append(
            stream,
            [
                el.ModelInput.from_text(f"question {i} " + "word " * words),
                el.ModelOutput(parts=(el.TextPart(text=f"answer {i} " + "blah " * words),)),
            ],
        )
    store.append(stream, [el.ModelInput.from_text("and now?")])


def _compactions(store: el.Store, stream: str) -> list[el.Compaction]:
    return [e.data for e in store.read(stream) if isinstance(e.data, el.Compaction)]


# -- recognising an overflow -------------------------------------------------------------------


def _sdk_error(fake: FakeProvider, path: str, status: int, body: Any) -> Exception:
    fake.reply(path, json=body, status=status)
    try:
        if path == "/v1/messages":
            anthropic_client(fake).messages.create(
                model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
        elif path == "/v1/responses":
            openai_client(fake).responses.create(model="gpt-x", input="hi")
        else:
            openai_client(fake).chat.completions.create(
                model="gpt-x", messages=[{"role": "user", "content": "hi"}]
            )
    except Exception as exc:
        return exc
    raise AssertionError("the SDK did not raise")


@pytest.mark.parametrize(
    ("path", "status", "body", "tokens", "limit"),
    [
        ("/v1/chat/completions", 400, openai_overflow(130000, 128000), 130000, 128000),
        (
            "/v1/chat/completions",
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 4097 tokens. However, "
                    "you requested 4222 tokens (1222 in the messages, 3000 in the completion). "
                    "Please reduce the length of the messages or completion.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            },
            1222,  # the messages' part; the completion's 3000 is `reply_tokens`
            4097,
        ),
        (
            "/v1/responses",
            400,
            {
                "error": {
                    "message": "Your input exceeds the context window of this model. Please "
                    "adjust your input and try again.",
                    "type": "invalid_request_error",
                    "param": "input",
                    "code": "context_length_exceeded",
                }
            },
            None,
            None,
        ),
        ("/v1/messages", 400, anthropic_overflow(208310, 200000), 208310, 200000),
        (
            "/v1/messages",
            413,
            {
                "type": "error",
                "error": {
                    "type": "request_too_large",
                    "message": "Request exceeds the maximum size",
                },
            },
            None,
            None,
        ),
    ],
)
def test_sdk_overflow_errors_are_recognised(
    fake_provider: FakeProvider,
    path: str,
    status: int,
    body: Any,
    tokens: int | None,
    limit: int | None,
) -> None:
    exc = _sdk_error(fake_provider, path, status, body)
    assert isinstance(exc, (openai.APIStatusError, anthropic.APIStatusError))
    overflow = context_overflow(exc)
    assert overflow is not None
    assert (overflow.tokens, overflow.limit) == (tokens, limit)


@pytest.mark.parametrize(
    ("path", "status", "body"),
    [
        (  # a rate limit on tokens is not an overflow
            "/v1/chat/completions",
            429,
            {
                "error": {
                    "message": "Rate limit reached: Limit 30000 tokens per min, Used 29000.",
                    "type": "tokens",
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            },
        ),
        (  # another invalid request, with "tokens" and "maximum" in it
            "/v1/messages",
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "max_tokens: 10000 > 4096, which is the maximum allowed number "
                    "of output tokens for claude-x",
                },
            },
        ),
        (
            "/v1/messages",
            401,
            {
                "type": "error",
                "error": {"type": "authentication_error", "message": "invalid x-api-key"},
            },
        ),
    ],
)
def test_other_sdk_errors_are_not_overflows(
    fake_provider: FakeProvider, path: str, status: int, body: Any
) -> None:
    assert context_overflow(_sdk_error(fake_provider, path, status, body)) is None


def test_raw_bodies_and_texts() -> None:
    gemini = {
        "error": {
            "code": 400,
            "message": "The input token count (1300000) exceeds the maximum number of tokens "
            "allowed (1048575).",
            "status": "INVALID_ARGUMENT",
        }
    }
    found = context_overflow(gemini)
    assert found is not None and (found.tokens, found.limit) == (1300000, 1048575)
    failed_response = {
        "id": "resp_1",
        "status": "failed",
        "error": {
            "code": "context_length_exceeded",
            "message": "Your input exceeds the context window",
        },
    }
    assert context_overflow(failed_response) is not None
    both = context_overflow(
        "input length and `max_tokens` exceed context limit: 199000 + 8000 > 200000"
    )
    assert both is not None
    assert (both.tokens, both.reply_tokens, both.limit) == (199000, 8000, 200000)
    assert both.scale() == pytest.approx((200000 - 8000) / 199000)  # the reply keeps its room
    assert context_overflow(anthropic_overflow(5, 4)["error"]) is not None
    assert context_overflow("connection reset by peer") is None
    assert context_overflow({"error": {"message": "model not found"}}) is None
    assert context_overflow(ValueError("maximum context length is 10 tokens")) is not None
    assert context_overflow(42) is None


# -- compact and retry -------------------------------------------------------------------------


def _call_anthropic(client: Any) -> Any:
    def call(window: Window) -> Any:
        return client.messages.create(
            **render(window, "anthropic", model="claude-x", max_tokens=50)
        )

    return call


def test_an_overflow_compacts_and_the_retry_succeeds(fake_provider: FakeProvider) -> None:
    fake_provider.respond("/v1/messages", limited(2500, ANTHROPIC_REPLY, anthropic_overflow))
    client = anthropic_client(fake_provider)
    with el.open("memory://") as store:
        _history(store, "c", 12)
        reply = compact_and_retry(
            store,
            "c",
            _call_anthropic(client),
            budget=100_000,
            policy=CompactionPolicy(keep_last=4),
        )
        assert reply.content[0].text == "ok"
        sizes = [len(r.raw) // 4 for r in fake_provider.requests]
        assert len(sizes) == 2 and sizes[0] > 2500 >= sizes[1]
        [compaction] = _compactions(store, "c")
        assert compaction.summarizer == "extractive-v1"
        last_body = fake_provider.last_body()
        assert "Summary of seqs 1-" in orjson.dumps(last_body).decode()


def test_with_nothing_left_to_compact_the_budget_shrinks(fake_provider: FakeProvider) -> None:
    fake_provider.respond("/v1/chat/completions", limited(1500, CHAT_REPLY, openai_overflow))
    client = openai_client(fake_provider)

    def call(window: Window) -> Any:
        return client.chat.completions.create(**render(window, "openai-chat", model="gpt-x"))

    with el.open("memory://") as store:
        _history(store, "c", 8)
        reply = compact_and_retry(
            store,
            "c",
            call,
            budget=100_000,
            policy=CompactionPolicy(keep_last=6),
            max_attempts=4,
        )
        assert reply.choices[0].message.content == "ok"
        sizes = [len(r.raw) // 4 for r in fake_provider.requests]
        # 1: everything; 2: compacted, still too long; 3: the budget shrunk by the ratio given
        assert len(sizes) == 3 and sizes[1] > 1500 >= sizes[2], sizes
        assert len(_compactions(store, "c")) == 1


def test_giving_up_says_why_and_keeps_the_cause(fake_provider: FakeProvider) -> None:
    fake_provider.respond("/v1/messages", limited(10, ANTHROPIC_REPLY, anthropic_overflow))
    client = anthropic_client(fake_provider)
    with el.open("memory://") as store:
        _history(store, "c", 3)
        with pytest.raises(ContextOverflowError, match="after 2 attempt") as info:
            compact_and_retry(
                store,
                "c",
                _call_anthropic(client),
                budget=100_000,
                max_attempts=2,
                policy=CompactionPolicy(keep_last=2),
            )
        assert isinstance(info.value.__cause__, anthropic.BadRequestError)
        assert info.value.overflow.limit == 10 and info.value.attempts == 2
        assert len(fake_provider.requests) == 2


def test_other_errors_propagate_at_once(fake_provider: FakeProvider) -> None:
    fake_provider.reply(
        "/v1/messages",
        status=429,
        json={"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
    )
    client = anthropic_client(fake_provider)
    with el.open("memory://") as store:
        _history(store, "c", 12)
        with pytest.raises(anthropic.RateLimitError):
            compact_and_retry(store, "c", _call_anthropic(client), budget=100_000)
        assert _compactions(store, "c") == []
        assert len(fake_provider.requests) == 1


def test_a_window_that_is_due_is_compacted_before_the_call(fake_provider: FakeProvider) -> None:
    fake_provider.reply("/v1/messages", json=ANTHROPIC_REPLY)
    client = anthropic_client(fake_provider)
    with el.open("memory://") as store:
        _history(store, "c", 12)
        compact_and_retry(
            store, "c", _call_anthropic(client), budget=3000, policy=CompactionPolicy(keep_last=4)
        )
        assert len(fake_provider.requests) == 1
        assert len(_compactions(store, "c")) == 1


def test_compact_and_retry_async(fake_provider: FakeProvider) -> None:
    fake_provider.respond("/v1/messages", limited(2500, ANTHROPIC_REPLY, anthropic_overflow))

    async def main() -> None:
        client = anthropic.AsyncAnthropic(base_url=fake_provider.url, api_key="t", max_retries=0)
        async with el.open_async("memory://") as store:
            _history(store.sync, "c", 12)

            async def summarize(request: Any) -> str:
                await asyncio.sleep(0)
                return f"{len(request.events)} events about questions"

            async def call(window: Window) -> Any:
                body = render(window, "anthropic", model="claude-x", max_tokens=50)
                return await client.messages.create(**body)

            reply = await compact_and_retry_async(
                store,
                "c",
                call,
                budget=100_000,
                summarizer=summarize,
                policy=CompactionPolicy(keep_last=4),
            )
            assert reply.content[0].text == "ok"
            [compaction] = _compactions(store.sync, "c")
            assert compaction.summarizer == "summarize"
            assert compaction.summary.endswith("events about questions")
        await client.close()

    asyncio.run(main())
    assert len(fake_provider.requests) == 2


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/chat/completions"])
def test_the_shrink_leaves_the_reply_its_room(fake_provider: FakeProvider, path: str) -> None:
    """The provider counts like the window and needs REPLY of LIMIT tokens for the reply."""
    limit, reply = 2000, 1600

    def body(prompt: int) -> Any:
        if path == "/v1/messages":
            message = (
                "input length and `max_tokens` exceed context limit: "
                f"{prompt} + {reply} > {limit}, decrease input length or `max_tokens`"
            )
            return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        message = (
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{prompt + reply} tokens ({prompt} in the messages, {reply} in the completion). "
            "Please reduce the length of the messages or completion."
        )
        error = {
            "message": message,
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
        return {"error": error}

    sizes: list[int] = []

    def call(window: Window) -> Any:
        assert window.report is not None
        prompt = window.report.tokens
        sizes.append(prompt)
        if prompt + reply > limit:
            fake_provider.reply(path, status=400, json=body(prompt))
        else:
            fake_provider.reply(
                path, json=ANTHROPIC_REPLY if path == "/v1/messages" else CHAT_REPLY
            )
        if path == "/v1/messages":
            return anthropic_client(fake_provider).messages.create(
                model="claude-x", max_tokens=reply, messages=[{"role": "user", "content": "hi"}]
            )
        return openai_client(fake_provider).chat.completions.create(
            model="gpt-x", messages=[{"role": "user", "content": "hi"}]
        )

    with el.open("memory://") as store:
        _history(store, "c", 20, words=8)
        compact_and_retry(  # keep_last=100: nothing to compact, so the budget must shrink
            store, "c", call, budget=100_000, policy=CompactionPolicy(keep_last=100)
        )
    assert len(sizes) == 2 and sizes[1] + reply <= limit < sizes[0] + reply, sizes


def test_a_window_that_cannot_shrink_enough_gives_up_with_the_providers_error(
    fake_provider: FakeProvider,
) -> None:
    fake_provider.respond("/v1/messages", limited(5, ANTHROPIC_REPLY, anthropic_overflow))
    client = anthropic_client(fake_provider)
    with el.open("memory://") as store:
        _history(store, "c", 2)
        with pytest.raises(ContextOverflowError, match="cannot shrink") as info:
            compact_and_retry(
                store, "c", _call_anthropic(client), budget=100_000, max_attempts=5,
                policy=CompactionPolicy(keep_last=2),
            )  # fmt: skip
        assert isinstance(info.value.__cause__, anthropic.BadRequestError)
        assert "WindowTooSmallError" not in type(info.value).__name__


def test_an_overflow_raised_from_another_error_is_recognised() -> None:
    try:
        try:
            raise ValueError("prompt is too long: 5 tokens > 4 maximum")
        except ValueError as inner:
            raise RuntimeError("the model call failed") from inner
    except RuntimeError as outer:
        found = context_overflow(outer)
    assert found is not None and (found.tokens, found.limit) == (5, 4)
    try:
        try:
            raise ValueError("prompt is too long: 5 tokens > 4 maximum")
        except ValueError:
            raise RuntimeError("while handling it") from None
    except RuntimeError as suppressed:
        assert context_overflow(suppressed) is None  # `from None`: the chain was cut on purpose
