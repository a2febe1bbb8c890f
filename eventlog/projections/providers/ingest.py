"""Pick a provider's ingest by name: a JSON body or an SSE stream -> one ModelOutput."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from eventlog.errors import UsageError
from eventlog.events import ModelOutput, ToolSpec
from eventlog.projections.providers import (
    ingest_anthropic,
    ingest_gemini,
    ingest_openai_chat,
    ingest_openai_responses,
)
from eventlog.projections.providers.common import Accumulator, decode_json, looks_like_sse
from eventlog.projections.providers.tool_names import restore_tool_names

_MODULES = {
    "openai-chat": ingest_openai_chat,
    "openai-responses": ingest_openai_responses,
    "anthropic": ingest_anthropic,
    "gemini": ingest_gemini,
}
PROVIDERS = tuple(_MODULES)
"""Provider format names accepted by `ingest_text`, `accumulator` and the CLI."""

_ACCUMULATORS: dict[str, Callable[[], Accumulator]] = {
    "openai-chat": ingest_openai_chat.OpenAIChatAccumulator,
    "openai-responses": ingest_openai_responses.OpenAIResponsesAccumulator,
    "anthropic": ingest_anthropic.AnthropicAccumulator,
    "gemini": ingest_gemini.GeminiAccumulator,
}


def _module(provider: str) -> Any:
    try:
        return _MODULES[provider]
    except KeyError:
        raise UsageError(
            f"unknown provider {provider!r}; use one of {', '.join(PROVIDERS)}"
        ) from None


def accumulator(provider: str) -> Accumulator:
    """A fresh stream accumulator for a provider format."""
    _module(provider)
    return _ACCUMULATORS[provider]()


def ingest_response(
    provider: str, body: Any, *, tools: Iterable[ToolSpec | str] = ()
) -> ModelOutput:
    """One ModelOutput from a provider's response body (dict or SDK object).

    `tools`: the tools of the request's window; a call of one the renderer renamed to fit the
    provider's rules gets its own name back (see `tool_names.restore_tool_names`).
    """
    output: ModelOutput = _module(provider).ingest_response(body)
    return restore_tool_names(output, provider, tools)


def ingest_text(provider: str, text: str, *, tools: Iterable[ToolSpec | str] = ()) -> ModelOutput:
    """One ModelOutput from a document holding a JSON response body or an SSE stream.

    `tools` as for `ingest_response`.
    """
    module = _module(provider)
    output: ModelOutput
    if looks_like_sse(text):
        output = module.ingest_sse(text)
    else:
        body = decode_json(text, f"{provider} response")
        if isinstance(body, list) and provider != "gemini":
            output = module.ingest_stream(body)  # a JSON array of stream events
        else:
            output = module.ingest_response(body)
    return restore_tool_names(output, provider, tools)


__all__ = ["PROVIDERS", "accumulator", "ingest_response", "ingest_text"]
