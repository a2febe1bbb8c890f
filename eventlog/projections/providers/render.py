"""Render a context window to a provider's request body, by provider format name.

>>> from eventlog.events import ModelInput
>>> from eventlog.projections.window_types import Window, WindowItem
>>> w = Window(stream="s", seq=1, system="Be brief.",
...            items=(WindowItem(seq=1, data=ModelInput.from_text("Hi")),))
>>> body = render(w, "anthropic", model="claude-sonnet-4-5", max_tokens=256)
>>> body["system"], body["messages"]
('Be brief.', [{'role': 'user', 'content': [{'type': 'text', 'text': 'Hi'}]}])
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from eventlog.errors import UsageError
from eventlog.projections.providers import anthropic, gemini, openai_chat, openai_responses
from eventlog.projections.providers.common import json_bytes
from eventlog.projections.providers.render_common import check_options
from eventlog.projections.window_types import Window

Renderer = Callable[..., dict[str, Any]]

RENDERERS: dict[str, Renderer] = {
    "openai-chat": openai_chat.render,
    "openai-responses": openai_responses.render,
    "anthropic": anthropic.render,
    "gemini": gemini.render,
}
"""Provider format name -> renderer (the names `ingest` and the CLI use too)."""
PROVIDERS = tuple(RENDERERS)

_OPTIONS = {
    name: tuple(p for p in inspect.signature(fn).parameters if p not in ("window", "model"))
    for name, fn in RENDERERS.items()
}


def render(
    window: Window, provider: str, *, model: str, max_tokens: int | None = None, **options: Any
) -> dict[str, Any]:
    """The exact JSON request body of `provider` for `window` (plain dicts and lists).

    Options common to every provider: `unanswered="cancel"|"drop"`, `orphans="text"|"drop"`,
    `extra={...}` (more top-level fields). Provider options: `system_role` (openai-chat);
    `cache`, `cache_every`, `cache_ttl` (anthropic). See docs/rendering.md.
    """
    fn = RENDERERS.get(provider)
    if fn is None:
        raise UsageError(f"unknown provider {provider!r}; use one of {', '.join(PROVIDERS)}")
    check_options(provider, options, _OPTIONS[provider])
    return fn(window, model=model, max_tokens=max_tokens, **options)


def render_json(
    window: Window, provider: str, *, model: str, max_tokens: int | None = None, **options: Any
) -> bytes:
    """`render`, dumped as compact JSON bytes (deterministic: same window, same bytes)."""
    body = render(window, provider, model=model, max_tokens=max_tokens, **options)
    return json_bytes(body)


__all__ = ["PROVIDERS", "RENDERERS", "render", "render_json"]
