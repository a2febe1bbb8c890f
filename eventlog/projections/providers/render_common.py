"""Shared rendering steps: a Window becomes a neutral list of turns every provider renderer maps.

`turns(window)` settles, once and for every provider, what is hard about a history:

- each output's tool calls get their results right after them, in call order (results that
  arrived out of order, or in several ToolResults events, are gathered); inputs that arrived
  while the calls were open are moved after the results;
- a call that never got a result gets a synthetic failed result (`unanswered="cancel"`, the
  default) or is removed from its output (`unanswered="drop"`);
- a result whose call is not in the window is never a tool result: it becomes user-side text
  (`orphans="text"`, the default) or is dropped (`orphans="drop"`);
- tool call ids are made unique across the window (a repeated id gets `~2`, `~3`, ...), so a
  provider's id rewriting (`fix_id`) keeps every call and its result paired.

Renderers then only map turns to their provider's shapes and apply its ordering rules.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, assert_never

from eventlog.errors import UsageError
from eventlog.events import (
    Attachment,
    Compaction,
    ModelInput,
    ModelOutput,
    SystemInstructionSet,
    ToolCall,
    ToolResult,
    ToolResults,
)
from eventlog.projections.window_types import Window

Unanswered = Literal["cancel", "drop"]
Orphans = Literal["text", "drop"]

CANCELLED_TEXT = "Cancelled: this tool call got no result (the run was interrupted)."
"""Content of the synthetic failed result rendered for an unanswered call."""
SKIPPED_TEXT = "Skipped: the tool was not run."
"""Content rendered for a skipped result that carries no text of its own."""
ERROR_PREFIX = "Error: "
"""Start of a failed result's text for providers without an error flag (OpenAI)."""
SUMMARY_HEADING = "Summary of earlier conversation:"
"""First line of the user-side text a Compaction renders as."""
INSTRUCTION_HEADING = "[System instruction from here on]"
"""First line of a midway instruction change, where a provider has one system slot only."""
LIVE_SCREEN_HEADING = "[LiveScreen]"
"""First line of the live-screen text block closing the newest user turn."""
OPENING_TEXT = "(continued)"
"""User text opening a history that starts with a model output, for providers needing a user
turn first (Anthropic, Gemini)."""
RAW_ARGUMENTS_KEY = "_raw_arguments"
"""Key of the object standing in for tool arguments that are not a JSON object."""

# ---------------------------------------------------------------------------------------------
# Turns


@dataclass(slots=True, eq=True)
class Call:
    """A tool call with its window-unique id (`uid`), the id both sides of the pair use."""

    call: ToolCall
    uid: str


@dataclass(slots=True, eq=True)
class Answer:
    """A call and its result (possibly synthetic), rendered together."""

    call: Call
    result: ToolResult


@dataclass(slots=True, eq=True)
class UserTurn:
    """User-side content: non-empty texts and attachments, in order."""

    blocks: tuple[str | Attachment, ...]


@dataclass(slots=True, eq=True)
class InstructionTurn:
    """A system instruction that takes effect at this point."""

    text: str


@dataclass(slots=True, eq=True)
class OutputTurn:
    """A model output; `calls` are the calls kept (all, unless `unanswered="drop"`)."""

    output: ModelOutput
    calls: tuple[Call, ...]
    seq: int


@dataclass(slots=True, eq=True)
class ResultsTurn:
    """The results of the previous OutputTurn's calls, one per call, in call order."""

    answers: tuple[Answer, ...]


Turn = UserTurn | InstructionTurn | OutputTurn | ResultsTurn


@dataclass(slots=True)
class _Open:
    """The calls of the last output still waiting for results, and what arrived meanwhile."""

    index: int
    """Where the OutputTurn sits in the turn list."""
    output: ModelOutput
    seq: int
    calls: list[Call]
    ids: set[str]
    results: dict[str, ToolResult] = field(default_factory=dict)
    error: str | None = None
    deferred: list[Turn] = field(default_factory=list)


class _Builder:
    def __init__(self, unanswered: Unanswered, orphans: Orphans) -> None:
        if unanswered not in ("cancel", "drop"):
            raise UsageError(f"unanswered={unanswered!r}: use 'cancel' or 'drop'")
        if orphans not in ("text", "drop"):
            raise UsageError(f"orphans={orphans!r}: use 'text' or 'drop'")
        self.unanswered = unanswered
        self.orphans = orphans
        self.out: list[Turn] = []
        self.open: _Open | None = None
        self.seen_ids: dict[str, int] = {}
        self.issued: set[str] = set()

    def user(self, turn: Turn) -> None:
        if self.open is not None:
            self.open.deferred.append(turn)
        else:
            self.out.append(turn)

    def output(self, data: ModelOutput, seq: int) -> None:
        if self.open is not None:
            self.close()
        if not data.tool_calls:
            self.out.append(OutputTurn(data, (), seq))
            return
        calls = [Call(c, self._uid(c.id)) for c in data.tool_calls]
        self.out.append(OutputTurn(data, tuple(calls), seq))
        self.open = _Open(len(self.out) - 1, data, seq, calls, {c.id for c in data.tool_calls})

    def results(self, data: ToolResults, live_screen: str | None) -> None:
        orphans: list[ToolResult] = []
        pending = self.open
        for r in data.results:
            if (
                pending is not None
                and r.call_id in pending.ids
                and r.call_id not in pending.results
            ):
                pending.results[r.call_id] = r
            else:
                orphans.append(r)
        if pending is not None and data.execute_error:
            pending.error = data.execute_error
        elif data.execute_error:
            self.user(UserTurn((f"Tool execution error: {data.execute_error}",)))
        if orphans and self.orphans == "text":
            self.user(UserTurn(tuple(orphan_text(r) for r in orphans)))
        if live_screen is not None:
            self.user(UserTurn((live_screen,)))
        if pending is not None and len(pending.results) == len(pending.calls):
            self.close()

    def close(self) -> None:
        pending, self.open = self.open, None
        if pending is None:
            return
        answers, kept = [], []
        for c in pending.calls:
            result = pending.results.get(c.call.id)
            if result is None and self.unanswered == "drop":
                continue
            if result is None:
                text = pending.error or CANCELLED_TEXT
                result = ToolResult(
                    call_id=c.call.id, tool_name=c.call.name, status="failed", content=text
                )
            kept.append(c)
            answers.append(Answer(c, result))
        if len(kept) != len(pending.calls):
            self.out[pending.index] = OutputTurn(pending.output, tuple(kept), pending.seq)
        if answers:
            self.out.append(ResultsTurn(tuple(answers)))
        if pending.error and len(pending.results) == len(pending.calls):
            self.out.append(UserTurn((f"Tool execution error: {pending.error}",)))
        self.out.extend(pending.deferred)

    def _uid(self, call_id: str) -> str:
        """`call_id` the first time, then `call_id~2`, `~3`, ...: never one already issued."""
        n = self.seen_ids.get(call_id, 0)
        uid = call_id if n == 0 else f"{call_id}~{n + 1}"
        while uid in self.issued:
            n += 1
            uid = f"{call_id}~{n + 1}"
        self.seen_ids[call_id] = n + 1
        self.issued.add(uid)
        return uid


def turns(
    window: Window, *, unanswered: Unanswered = "cancel", orphans: Orphans = "text"
) -> list[Turn]:
    """The window's items as neutral turns, with every tool call paired (see module doc)."""
    b = _Builder(unanswered, orphans)
    for item in window.items:
        data = item.data
        screen = live_screen_text(item.live_screen) if item.live_screen else None
        match data:
            case ModelInput():
                blocks = input_blocks(data)
                if screen is not None:
                    blocks = (*blocks, screen)
                if blocks:
                    b.user(UserTurn(blocks))
            case ModelOutput():
                b.output(data, item.seq)
            case ToolResults():
                b.results(data, screen)
            case Compaction():
                b.user(UserTurn((f"{SUMMARY_HEADING}\n{data.summary}",)))
            case SystemInstructionSet():
                b.user(InstructionTurn(data.text))
            case _:
                assert_never(data)
    b.close()
    return b.out


# ---------------------------------------------------------------------------------------------
# Text helpers


def is_blank(text: str) -> bool:
    """Whether a text is empty or whitespace only (never a text block of its own)."""
    return not text or text.isspace()


def input_blocks(data: ModelInput) -> tuple[str | Attachment, ...]:
    """An input's text (sections joined, titles as `# title` lines), then its attachments."""
    text = input_text(data)
    head: tuple[str | Attachment, ...] = () if is_blank(text) else (text,)
    return head + data.attachments


def input_text(data: ModelInput) -> str:
    """Sections joined by blank lines; a titled section starts with a `# title` line."""
    sections = data.sections
    if len(sections) == 1 and not sections[0].title:
        return sections[0].text
    return "\n\n".join(f"# {s.title}\n{s.text}" if s.title else s.text for s in sections)


def live_screen_text(sections: Sequence[tuple[str, str]]) -> str:
    """The `[LiveScreen]` block: one `## widget` section per widget view."""
    body = "\n\n".join(f"## {widget}\n{view}" for widget, view in sections)
    return f"{LIVE_SCREEN_HEADING}\n{body}"


def orphan_text(result: ToolResult) -> str:
    """User-side text for a result whose call is not in the window."""
    return (
        f"[Result of tool {result.tool_name!r} (call {result.call_id}, {result.status}); "
        f"its call is not in this conversation]\n{result.content}"
    )


def instruction_text(text: str) -> str:
    """User-side text for a midway instruction change (providers with one system slot)."""
    return f"{INSTRUCTION_HEADING}\n{text}"


def result_text(result: ToolResult) -> str:
    """A result's text; a skipped result without text says it was skipped."""
    if result.status == "skipped" and not result.content:
        return SKIPPED_TEXT
    return result.content


def error_text(result: ToolResult) -> str:
    """A result's text for providers without an error flag: a failed one starts `Error: `."""
    if result.status == "failed":
        return f"{ERROR_PREFIX}{result.content}"
    return result_text(result)


def is_error(result: ToolResult) -> bool:
    """Whether a result reports an error to the model (failed or skipped)."""
    return result.status != "success"


def tool_input(call: ToolCall) -> dict[str, object]:
    """A call's arguments as an object; arguments that are not one keep their raw text."""
    if call.arguments is not None:
        return call.arguments
    return {RAW_ARGUMENTS_KEY: call.raw_arguments}


def raw_arguments(call: ToolCall) -> str:
    """The raw argument text as the model produced it (`{}` when it produced none)."""
    return call.raw_arguments or "{}"


def single_system(
    window: Window, items: list[Turn], *, as_text: bool = True
) -> tuple[str | None, list[Turn]]:
    """For providers with one system slot: (system text, turns with instructions as user text).

    The slot holds the current instruction. Leading instruction turns equal to it are dropped
    (they are the slot); every other instruction turn stays at its place, as user-side text
    (or as is, when `as_text` is false), so no instruction is lost and the point where it
    changed stays visible.
    """
    system = window.system
    if system is None:
        texts = [t.text for t in items if isinstance(t, InstructionTurn)]
        system = texts[-1] if texts else None
    out: list[Turn] = []
    leading = True
    for t in items:
        if isinstance(t, InstructionTurn):
            if not (leading and t.text == system):
                out.append(UserTurn((instruction_text(t.text),)) if as_text else t)
            continue
        leading = False
        out.append(t)
    return system, out


# ---------------------------------------------------------------------------------------------
# Ids and attachments

_ID_SAFE = re.compile(r"[A-Za-z0-9_-]+\Z")
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@functools.lru_cache(maxsize=1 << 16)
def fix_id(uid: str, max_length: int, *, strict_chars: bool = True) -> str:
    """A provider-valid id for `uid`: unchanged when valid, else sanitized + a short hash.

    Deterministic (depends on `uid` only), so a call and its result always agree.
    """
    if len(uid) <= max_length and (not strict_chars or _ID_SAFE.match(uid)):
        return uid
    digest = hashlib.sha256(uid.encode()).hexdigest()[:10]
    base = _ID_UNSAFE.sub("_", uid) if strict_chars else uid
    return f"{base[: max_length - 11]}_{digest}"


def b64(attachment: Attachment) -> str:
    """Inline attachment bytes as base64 text."""
    assert attachment.data is not None
    return base64.b64encode(attachment.data).decode("ascii")


def data_url(attachment: Attachment) -> str:
    """An attachment as a URL: its own `uri`, or a base64 `data:` URL of its bytes."""
    if attachment.uri is not None:
        return attachment.uri
    return f"data:{attachment.media_type};base64,{b64(attachment)}"


def attachment_note(attachment: Attachment, provider: str) -> str:
    """Text standing in for an attachment a provider cannot take."""
    name = f" {attachment.name!r}" if attachment.name else ""
    return f"[attachment{name} ({attachment.media_type}) not supported by {provider}]"


def is_image(attachment: Attachment) -> bool:
    """Whether an attachment is an image."""
    return attachment.media_type.startswith("image/")


def from_provider(output: ModelOutput, provider: str) -> bool:
    """Whether an output was produced by `provider` (its artifacts may go back to it)."""
    inv = output.invocation
    return inv is not None and inv.provider == provider


def merge_extra(
    body: dict[str, Any], extra: Mapping[str, Any] | None, provider: str
) -> dict[str, Any]:
    """Add caller-chosen top-level fields; a field the renderer sets cannot be overridden."""
    if not extra:
        return body
    clash = sorted(set(extra) & set(body))
    if clash:
        raise UsageError(f"{provider} renderer: extra sets {', '.join(clash)}, which it renders")
    body.update(extra)
    return body


def check_options(provider: str, options: dict[str, object], known: Iterable[str]) -> None:
    """Reject renderer options a provider does not know (typos fail loudly)."""
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise UsageError(
            f"{provider} renderer: unknown option(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(known))}"
        )


__all__ = [
    "CANCELLED_TEXT",
    "ERROR_PREFIX",
    "INSTRUCTION_HEADING",
    "LIVE_SCREEN_HEADING",
    "OPENING_TEXT",
    "RAW_ARGUMENTS_KEY",
    "SKIPPED_TEXT",
    "SUMMARY_HEADING",
    "Answer",
    "Call",
    "InstructionTurn",
    "Orphans",
    "OutputTurn",
    "ResultsTurn",
    "Turn",
    "Unanswered",
    "UserTurn",
    "attachment_note",
    "b64",
    "check_options",
    "data_url",
    "error_text",
    "fix_id",
    "from_provider",
    "input_blocks",
    "input_text",
    "instruction_text",
    "is_blank",
    "is_error",
    "is_image",
    "live_screen_text",
    "merge_extra",
    "orphan_text",
    "raw_arguments",
    "result_text",
    "single_system",
    "tool_input",
    "turns",
]
