"""Tool names each provider accepts, and the way back to the names a stream uses.

OpenAI (Chat Completions and Responses) and Anthropic take tool names matching
``[A-Za-z0-9_-]{1,64}``; Gemini takes ``[A-Za-z_][A-Za-z0-9_.:-]{0,63}``. A stream may hold any
name (an MCP tool `files.read`, a name imported from Gemini, a long generated one), so renderers
send each invalid name as a valid one: its characters outside the set replaced by `_`, cut to
fit, then `_` and ten hex digits of its SHA-256. The new name depends on the name alone, so a
tool's definition, its calls and its results always agree, across requests too (prompt caches
keep matching). `restore_tool_names` maps a response's calls back to the stream's names.

>>> provider_tool_name("anthropic", "files.read")
'files_read_601e4eb608'
>>> provider_tool_name("gemini", "files.read")
'files.read'
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable

import msgspec

from eventlog.errors import UsageError
from eventlog.events import ModelOutput, ToolSpec
from eventlog.projections.providers.render_common import fix_id, hashed_name

MAX_TOOL_NAME = 64
"""The longest tool name every provider takes."""

_STRICT = re.compile(r"[A-Za-z0-9_-]{1,64}")
_VALID = {
    "openai-chat": _STRICT,
    "openai-responses": _STRICT,
    "anthropic": _STRICT,
    "gemini": re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}"),
}
"""Provider format name -> the tool names it accepts (whole-string match)."""
_GEMINI_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]")
_GEMINI_FIRST = re.compile(r"[A-Za-z_]")


def _provider_rules(provider: str) -> re.Pattern[str]:
    valid = _VALID.get(provider)
    if valid is None:
        raise UsageError(f"unknown provider {provider!r}; use one of {', '.join(_VALID)}")
    return valid


@functools.lru_cache(maxsize=1 << 14)
def provider_tool_name(provider: str, name: str) -> str:
    """The name `provider` accepts for a tool named `name`: `name` itself when valid.

    Rewritten as tool call ids are (`render_common.fix_id`), with Gemini's wider character set
    and its rule for the first character.
    """
    if _provider_rules(provider).fullmatch(name):
        return name
    if provider != "gemini":
        return fix_id(name, MAX_TOOL_NAME)
    base = _GEMINI_UNSAFE.sub("_", name)
    if base and not _GEMINI_FIRST.match(base):
        base = "_" + base  # Gemini: a letter or an underscore first
    return hashed_name(base, name, MAX_TOOL_NAME)


def tool_namer(provider: str) -> Callable[[str], str]:
    """`provider_tool_name` for one provider, with the common case (a valid name) inline."""
    valid = _provider_rules(provider).fullmatch
    return lambda name: name if valid(name) else provider_tool_name(provider, name)


def restore_tool_names(
    output: ModelOutput, provider: str, tools: Iterable[ToolSpec | str]
) -> ModelOutput:
    """`output` with each call of a tool renamed for `provider` given its name in `tools` back.

    For a response to a request rendered from a window with these tools: the model calls them
    by the names it was sent. Calls of other names are kept as they are; `output` itself is
    returned when nothing is renamed.
    """
    namer = tool_namer(provider)
    back: dict[str, str] = {}
    for tool in tools:
        name = tool.name if isinstance(tool, ToolSpec) else tool
        if type(name) is not str:
            raise UsageError(f"tools must be ToolSpecs or names, got {type(tool).__name__}")
        sent = namer(name)
        if sent != name:
            back[sent] = name
    if not back or not any(c.name in back for c in output.tool_calls):
        return output
    calls = tuple(
        msgspec.structs.replace(c, name=back[c.name]) if c.name in back else c
        for c in output.tool_calls
    )
    return msgspec.structs.replace(output, tool_calls=calls)


__all__ = ["MAX_TOOL_NAME", "provider_tool_name", "restore_tool_names", "tool_namer"]
