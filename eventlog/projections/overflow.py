"""Recognising a provider's "the request is too long for this model" answer.

`context_overflow(error)` reads an error the way a provider or its SDK reports it (an
`openai`/`anthropic` SDK exception, a raw error body, a failed Responses object, or the
message text) and says whether it is a context overflow, with the token counts the provider
stated when it stated them. It never imports an SDK: it reads the attributes they all carry
(`status_code`, `body`, `code`, `message`), so it works with any version and with gateways that
relay the same bodies.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec

OVERFLOW_CODES = frozenset({"context_length_exceeded", "request_too_large"})
"""Error codes (OpenAI `error.code`, Anthropic `error.type`) that mean the request is too long."""

_OVERFLOW_STATUSES = (400, 413, 422)
"""HTTP statuses an overflow comes with (422: some gateways); any other status is not one."""

_PHRASES = (
    "maximum context length",  # OpenAI Chat: "This model's maximum context length is N tokens"
    "exceeds the context window",  # OpenAI Responses
    "prompt is too long",  # Anthropic: "prompt is too long: N tokens > M maximum"
    "exceed context limit",  # Anthropic: "input length and `max_tokens` exceed context limit"
    "exceeds the maximum number of tokens allowed",  # Gemini: "The input token count (N) ..."
    "request exceeds the maximum size",  # Anthropic 413 request_too_large
)

_COUNTS = (
    # OpenAI Chat: "maximum context length is 4097 tokens. However, you requested 4222 tokens
    # (1222 in the messages, 3000 in the completion)" (older: "1222 in your prompt; 3000 for
    # the completion"): the prompt's part, and the reply's.
    re.compile(
        r"maximum context length is (?P<limit>\d+) tokens.*?requested \d+ tokens \("
        r"(?P<tokens>\d+) in (?:the messages|your prompt)[,;] (?P<reply>\d+) (?:in|for) the "
        r"completion",
        re.S,
    ),
    # OpenAI Chat: "maximum context length is 8192 tokens. However, your messages resulted in
    # 8227 tokens".
    re.compile(
        r"maximum context length is (?P<limit>\d+) tokens.*?(?:resulted in|requested) "
        r"(?P<tokens>\d+) tokens",
        re.S,
    ),
    # Anthropic: "prompt is too long: 208310 tokens > 200000 maximum".
    re.compile(r"prompt is too long: (?P<tokens>\d+) tokens > (?P<limit>\d+) maximum"),
    # Anthropic: "input length and `max_tokens` exceed context limit: 199000 + 8000 > 200000".
    re.compile(r"exceed context limit: (?P<tokens>\d+) \+ (?P<reply>\d+) > (?P<limit>\d+)"),
    # Gemini: "The input token count (1300000) exceeds the maximum number of tokens allowed
    # (1048575)."
    re.compile(
        r"input token count \((?P<tokens>\d+)\) exceeds the maximum number of tokens allowed "
        r"\((?P<limit>\d+)\)"
    ),
)


class ContextOverflow(msgspec.Struct, frozen=True, kw_only=True):
    """A provider's answer that the request does not fit the model's context."""

    message: str
    """The provider's own words."""
    tokens: int | None = None
    """The request's size in tokens as the provider counted it, when it said so."""
    limit: int | None = None
    """The most the provider takes for that part, when it said so."""
    reply_tokens: int | None = None
    """The reply room it counted on top of `tokens`, when it said so (Anthropic's `max_tokens`
    form, OpenAI's "N in the completion")."""

    def scale(self) -> float | None:
        """`(limit - reply_tokens) / tokens`: what the prompt must shrink by, if stated.

        The reply's room stays what it was: only the prompt can give way.
        """
        if self.tokens is None or self.limit is None or self.tokens <= 0:
            return None
        return max(self.limit - (self.reply_tokens or 0), 0) / self.tokens


def context_overflow(error: object) -> ContextOverflow | None:
    """The overflow `error` reports, or None when it reports something else.

    `error` may be an SDK exception (`openai.BadRequestError`, `anthropic.BadRequestError`,
    `anthropic.APIStatusError` with status 413, ...), a provider's error body as a dict (with or
    without the outer `{"error": ...}`), a Responses object or dict whose `status` is `failed`,
    or the error message as a string. Rate limits, authentication errors and other 4xx answers
    are not overflows, even when their text mentions tokens. An exception raised from or while
    handling another (its `__cause__`, or `__context__` unless raised `from None`) is an
    overflow if that one is.
    """
    if not isinstance(error, BaseException):
        return _overflow(error)
    seen: set[int] = set()
    chained: BaseException | None = error
    while chained is not None and id(chained) not in seen:
        seen.add(id(chained))
        found = _overflow(chained)
        if found is not None:
            return found
        if chained.__cause__ is not None:
            chained = chained.__cause__
        else:  # `raise ... from None` cuts the chain on purpose
            chained = None if chained.__suppress_context__ else chained.__context__
    return None


def _overflow(error: object) -> ContextOverflow | None:
    """The overflow `error` itself reports (not the errors it was raised from)."""
    status = getattr(error, "status_code", None)
    if isinstance(status, int) and status not in _OVERFLOW_STATUSES:
        return None
    code, message = _code_and_message(error)
    if status == 413 and not message:
        message = "request too large"
    lowered = message.lower()
    if (code in OVERFLOW_CODES) or status == 413 or any(p in lowered for p in _PHRASES):
        return _with_counts(message or str(code))
    return None


def _code_and_message(error: object) -> tuple[str | None, str]:
    """The error's code (or type) and message, from whichever shape it came in."""
    if isinstance(error, str):
        return None, error
    body: Any = getattr(error, "body", None) if not isinstance(error, Mapping) else error
    if body is None and hasattr(error, "model_dump"):  # an SDK response object
        body = error.model_dump()
    code, message = _from_body(body)
    if code is None:
        attr = getattr(error, "code", None)
        code = attr if isinstance(attr, str) else None
    if not message:
        attr = getattr(error, "message", None)
        message = attr if isinstance(attr, str) else ""
    if not message and isinstance(error, BaseException):
        message = str(error)
    return code, message


def _from_body(body: Any) -> tuple[str | None, str]:
    """Code and message from an error body or a failed response, in the providers' shapes."""
    if not isinstance(body, Mapping):
        return None, ""
    inner: Any = body
    if isinstance(body.get("error"), Mapping):  # {"error": {...}}, or a failed response's
        inner = body["error"]
    code = inner.get("code")
    if not isinstance(code, str):
        kind = inner.get("type")  # Anthropic: {"type": "request_too_large", ...}
        code = kind if isinstance(kind, str) else None
    message = inner.get("message")
    return code, message if isinstance(message, str) else ""


def _with_counts(message: str) -> ContextOverflow:
    for pattern in _COUNTS:
        found = pattern.search(message)
        if found is not None:
            groups = found.groupdict()
            reply = groups.get("reply")
            return ContextOverflow(
                message=message,
                tokens=int(groups["tokens"]),
                limit=int(groups["limit"]),
                reply_tokens=int(reply) if reply is not None else None,
            )
    return ContextOverflow(message=message)


__all__ = ["OVERFLOW_CODES", "ContextOverflow", "context_overflow"]
