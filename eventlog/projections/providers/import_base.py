"""The event list an imported history becomes, built and checked before anything is written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from eventlog.errors import ProviderMappingError
from eventlog.events import (
    Attachment,
    EventData,
    Invocation,
    ModelInput,
    ModelOutput,
    Part,
    Section,
    SystemInstructionSet,
    ToolCall,
    ToolResult,
    ToolResults,
    ToolsetDefined,
    ToolSpec,
    ToolStatus,
)
from eventlog.projections.providers.common import (
    HistoryImportError,
    b64decode,
    guess_media_type,
    parse_data_url,
)

_T = TypeVar("_T")


class Where:
    """A position in the imported document: message index and field path."""

    def __init__(self, path: str, index: int | None = None):
        self.path = path
        self.index = index

    def __truediv__(self, key: str | int) -> Where:
        step = f"[{key}]" if isinstance(key, int) else f".{key}"
        return Where(self.path + step, self.index)

    def error(self, message: str) -> HistoryImportError:
        """An import error located here."""
        return HistoryImportError(message, path=self.path, index=self.index)


def need(d: Any, key: str, kind: type[_T], at: Where, default: Any = ...) -> _T:
    """`d[key]` checked to be a `kind` (missing/None gives `default` when set), else an error."""
    if not isinstance(d, dict):
        raise at.error(f"expected a JSON object, got {type(d).__name__}")
    value = d.get(key)
    if value is None:
        if default is not ...:
            return default  # type: ignore[no-any-return]
        raise (at / key).error("missing")
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise (at / key).error(f"expected {_kind_name(kind)}, got {type(value).__name__}")
    return value


def _kind_name(kind: type) -> str:
    return {str: "a string", list: "a list", dict: "an object", bool: "a boolean"}.get(
        kind, kind.__name__
    )


def checked(build: Callable[[], _T], at: Where) -> _T:
    """Run an event constructor, turning its ValueError into a located import error."""
    try:
        return build()
    except HistoryImportError:
        raise
    except ProviderMappingError as exc:
        raise at.error(str(exc)) from None
    except (ValueError, TypeError) as exc:
        raise at.error(str(exc)) from None


def custom_tool(tool: Any, at: Where) -> ToolSpec:
    """The ToolSpec of an OpenAI custom tool: name, description, input format (default text).

    A grammar is kept as Responses spells it (`{"type": "grammar", "syntax", "definition"}`);
    Chat Completions nests the last two under `grammar`.
    """
    fmt = need(tool, "format", dict, at, {"type": "text"})
    f_at = at / "format"
    kind = need(fmt, "type", str, f_at)
    if kind == "text":
        fmt = {"type": "text"}
    elif kind == "grammar":
        grammar = need(fmt, "grammar", dict, f_at, fmt)
        g_at = f_at / "grammar" if grammar is not fmt else f_at
        syntax = need(grammar, "syntax", str, g_at)
        if syntax not in ("lark", "regex"):
            raise (g_at / "syntax").error(f"unknown grammar syntax {syntax!r}")
        fmt = {
            "type": "grammar",
            "syntax": syntax,
            "definition": need(grammar, "definition", str, g_at),
        }
    else:
        raise (f_at / "type").error(f"unknown custom tool format {kind!r}")
    return ToolSpec(
        name=need(tool, "name", str, at),
        description=need(tool, "description", str, at, ""),
        format=fmt,
    )


def attachment_from_url(
    url: str, at: Where, *, fallback_type: str, name: str | None = None
) -> Attachment:
    """An attachment from a data URL (inline bytes) or any other URL (a reference)."""
    inline = checked(lambda: parse_data_url(url, at.path), at)
    if inline is not None:
        media_type, data = inline
        return checked(lambda: Attachment(media_type=media_type, data=data, name=name), at)
    return checked(
        lambda: Attachment(media_type=guess_media_type(url, fallback_type), uri=url, name=name), at
    )


def attachment_from_base64(
    data: str, media_type: str, at: Where, name: str | None = None
) -> Attachment:
    """An inline attachment from base64 text."""
    raw = checked(lambda: b64decode(data, at.path), at)
    return checked(lambda: Attachment(media_type=media_type, data=raw, name=name), at)


class HistoryBuilder:
    """Collects events in order and checks every tool result against the calls it answers."""

    def __init__(self, invocation: Invocation) -> None:
        self.invocation = invocation
        self.events: list[EventData] = []
        self._calls: dict[str, tuple[int, ToolCall]] = {}
        self._answered: set[str] = set()
        self._results: list[tuple[int, ToolResult]] = []
        self._system: list[str] = []

    def _flush(self) -> None:
        if self._system:
            self.events.append(SystemInstructionSet(text="\n\n".join(self._system)))
            self._system = []
        if self._results:
            ordered = tuple(r for _, r in sorted(self._results, key=lambda p: p[0]))
            self.events.append(ToolResults(results=ordered))
            self._results = []

    def _close_calls(self) -> None:
        """Results must follow their output directly; anything else ends the window."""
        self._flush()
        self._calls = {}
        self._answered = set()

    def system(self, text: str) -> None:
        """A system / developer instruction; consecutive ones merge into one event."""
        if self._results:
            self._close_calls()
        self._calls = {}
        self._system.append(text)

    def toolset(self, tools: list[ToolSpec], at: Where) -> None:
        """The tools from here on."""
        self._close_calls()
        self.events.append(checked(lambda: ToolsetDefined(tools=tuple(tools)), at))

    def input(self, sections: list[Section], attachments: list[Attachment], at: Where) -> None:
        """A user message."""
        self._close_calls()
        self.events.append(
            checked(
                lambda: ModelInput(sections=tuple(sections), attachments=tuple(attachments)), at
            )
        )

    def output(self, parts: list[Part], calls: list[ToolCall], at: Where) -> None:
        """A model message; its calls are the ones the next results may answer."""
        self._close_calls()
        self.events.append(
            checked(
                lambda: ModelOutput(
                    parts=tuple(parts), tool_calls=tuple(calls), invocation=self.invocation
                ),
                at,
            )
        )
        self._calls = {c.id: (i, c) for i, c in enumerate(calls)}

    def result(
        self,
        call_id: str,
        content: str,
        at: Where,
        *,
        status: ToolStatus = "success",
        attachments: tuple[Attachment, ...] = (),
    ) -> None:
        """A tool result; it must answer a call of the output right before it, once."""
        if self._system:
            raise at.error("a tool result cannot follow a system instruction")
        found = self._calls.get(call_id)
        if found is None:
            raise at.error(f"result for call {call_id!r}, which the previous output never made")
        if call_id in self._answered:
            raise at.error(f"call {call_id!r} already has a result")
        self._answered.add(call_id)
        order, call = found
        self._results.append(
            (
                order,
                ToolResult(
                    call_id=call_id,
                    tool_name=call.name,
                    status=status,
                    content=content,
                    attachments=attachments,
                ),
            )
        )

    def finish(self) -> list[EventData]:
        """Every event, in order."""
        self._flush()
        return self.events


__all__ = [
    "HistoryBuilder",
    "Where",
    "attachment_from_base64",
    "attachment_from_url",
    "checked",
    "need",
]
