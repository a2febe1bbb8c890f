"""Shared rendering step: one pass over a Window that pairs every tool call with its result.

`Pairing` walks the window's items once and settles, for every provider, what is hard about a
history; a provider renderer subclasses it and turns each settled turn into its own dicts as it
arrives (no intermediate list of turns, no second pass):

- each output's tool calls get their results right after them, in call order (results that
  arrived out of order, or in several ToolResults events, are gathered); inputs that arrived
  while the calls were open are moved after the results;
- a call that never got a result gets a synthetic failed result (`unanswered="cancel"`, the
  default) or is removed from its output (`unanswered="drop"`);
- a result whose call is not in the window is never a tool result: it becomes user-side text
  (`orphans="text"`, the default) or is dropped (`orphans="drop"`);
- tool call ids are made unique across the window (a repeated id gets `~2`, `~3`, ...), so a
  provider's id rewriting (`fix_id`) keeps every call and its result paired.

`turns(window)` collects the same turns into a list: the neutral view the tests check.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from eventlog.errors import ProviderMappingError, UsageError
from eventlog.events import (
    BIG_INT_ERROR,
    Attachment,
    Compaction,
    ModelInput,
    ModelOutput,
    SystemInstructionSet,
    ToolCall,
    ToolResult,
    ToolResults,
    ToolSpec,
)
from eventlog.projections.providers.common import FILE_SCHEMES, parse_data_url
from eventlog.projections.window_types import Window, WindowItem

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
CUSTOM_INPUT_KEY = "input"
"""The one argument a custom tool's call carries for providers without custom tools."""

Blocks = tuple[str | Attachment, ...]
"""User-side content: non-empty texts and attachments, in order."""
Answer = tuple[ToolCall, str, ToolResult]
"""A kept call, its window-unique id (the id both sides of the pair use) and its result."""

# ---------------------------------------------------------------------------------------------
# The pass


class Pairing:
    """One pass over a window's items; subclasses render the turns it settles, in order.

    Hooks: `user(blocks)` for user-side content, `instruction(text)` where a system instruction
    takes effect, `output(output, seq, answers)` for a model output with its kept calls and
    their results (empty when it has none). Turns are plain tuples and strings, not objects:
    this pass runs over every message of every request.
    """

    def __init__(self, unanswered: Unanswered = "cancel", orphans: Orphans = "text") -> None:
        if unanswered not in ("cancel", "drop"):
            raise UsageError(f"unanswered={unanswered!r}: use 'cancel' or 'drop'")
        if orphans not in ("text", "drop"):
            raise UsageError(f"orphans={orphans!r}: use 'text' or 'drop'")
        self.__drop_unanswered = unanswered == "drop"
        self.__orphans_as_text = orphans == "text"
        self.__calls: list[tuple[ToolCall, str]] | None = None
        """Calls of the last output still waiting for results (None: nothing open)."""
        self.__ids: set[str] = set()
        self.__got: dict[str, ToolResult] = {}
        self.__output: ModelOutput | None = None
        self.__seq = 0
        self.__error: str | None = None
        self.__deferred: list[tuple[Callable[[Any], None], Any]] = []
        self.__seen: dict[str, int] = {}
        self.__issued: set[str] = set()

    # Hooks -------------------------------------------------------------------------------

    def user(self, blocks: Blocks) -> None:
        """User-side content (never empty)."""
        raise NotImplementedError

    def instruction(self, text: str) -> None:
        """A system instruction that takes effect here."""
        raise NotImplementedError

    def output(self, output: ModelOutput, seq: int, answers: Sequence[Answer]) -> None:
        """A model output, its kept calls with their results right after it."""
        raise NotImplementedError

    # The walk ----------------------------------------------------------------------------

    def run(self, items: Iterable[WindowItem]) -> None:
        """Pair and emit every item, then close what is still open."""
        for item in items:
            data = item.data
            # Exact types first (subclasses go the slow way): this runs for every item.
            if type(data) is ModelOutput:
                self.__open(data, item.seq)
            elif type(data) is ModelInput:
                self.__input(data, item)
            elif type(data) is ToolResults:
                self.__results(data, item)
            else:
                self.__other(item)
        self.__close()

    def __other(self, item: WindowItem) -> None:
        """Compactions and instructions, and subclasses of the common kinds."""
        data = item.data
        if isinstance(data, ModelOutput):
            self.__open(data, item.seq)
        elif isinstance(data, ModelInput):
            self.__input(data, item)
        elif isinstance(data, ToolResults):
            self.__results(data, item)
        elif isinstance(data, Compaction):
            self.__user((f"{SUMMARY_HEADING}\n{data.summary}",))
        elif isinstance(data, SystemInstructionSet):
            if self.__calls is None:
                self.instruction(data.text)
            else:
                self.__deferred.append((self.instruction, data.text))
        else:
            raise TypeError(f"not a window item: {type(data).__name__}")

    def __user(self, blocks: Blocks) -> None:
        if self.__calls is None:
            self.user(blocks)
        else:
            self.__deferred.append((self.user, blocks))

    def __input(self, data: ModelInput, item: WindowItem) -> None:
        blocks = input_blocks(data)
        if item.live_screen:
            blocks = (*blocks, live_screen_text(item.live_screen))
        if blocks:
            self.__user(blocks)

    def __open(self, data: ModelOutput, seq: int) -> None:
        if self.__calls is not None:
            self.__close()
        if not data.tool_calls:
            self.output(data, seq, ())
            return
        issued = self.__issued
        calls: list[tuple[ToolCall, str]] = []
        ids: set[str] = set()
        for c in data.tool_calls:
            uid = c.id
            if uid in issued:
                uid = self.__unique(uid)
            else:
                self.__seen[uid] = 1
                issued.add(uid)
            calls.append((c, uid))
            ids.add(c.id)
        self.__calls, self.__ids, self.__got = calls, ids, {}
        self.__output, self.__seq, self.__error = data, seq, None

    def __results(self, data: ToolResults, item: WindowItem) -> None:
        orphans: list[ToolResult] = []
        calls = self.__calls
        ids, got = self.__ids, self.__got
        for r in data.results:
            if calls is not None and r.call_id in ids and r.call_id not in got:
                got[r.call_id] = r
            else:
                orphans.append(r)
        if data.execute_error:
            if calls is not None:
                self.__error = data.execute_error
            else:
                self.__user((f"Tool execution error: {data.execute_error}",))
        if orphans and self.__orphans_as_text:
            self.__user(tuple(orphan_text(r) for r in orphans))
        if item.live_screen:
            self.__user((live_screen_text(item.live_screen),))
        if calls is not None and len(got) == len(calls):
            self.__close()

    def __close(self) -> None:
        calls = self.__calls
        if calls is None:
            return
        self.__calls = None
        got, error = self.__got, self.__error
        answers: list[Answer] = []
        for c, uid in calls:
            result = got.get(c.id)
            if result is None:
                if self.__drop_unanswered:
                    continue
                text = error or CANCELLED_TEXT
                result = ToolResult(call_id=c.id, tool_name=c.name, status="failed", content=text)
            answers.append((c, uid, result))
        assert self.__output is not None
        self.output(self.__output, self.__seq, answers)
        if error and len(got) == len(calls):
            self.user((f"Tool execution error: {error}",))
        if self.__deferred:
            deferred, self.__deferred = self.__deferred, []
            for hook, arg in deferred:
                hook(arg)

    def __unique(self, call_id: str) -> str:
        """`call_id~2`, `~3`, ...: the next one never issued (`call_id` itself was)."""
        n = self.__seen.get(call_id, 0)
        uid = call_id if n == 0 else f"{call_id}~{n + 1}"
        while uid in self.__issued:
            n += 1
            uid = f"{call_id}~{n + 1}"
        self.__seen[call_id] = n + 1
        self.__issued.add(uid)
        return uid


def current_system(window: Window) -> str | None:
    """The instruction in effect: `Window.system`, else the window's last instruction item."""
    if window.system is not None:
        return window.system
    for item in reversed(window.items):
        if isinstance(item.data, SystemInstructionSet):
            return item.data.text
    return None


def opening_system(window: Window) -> str | None:
    """The instruction in force when the window opens.

    The last instruction item before the first other item; without one, the current
    instruction when no item of the window sets it (it was set before the window starts).
    """
    opening: str | None = None
    leading = True
    carried = False
    current = current_system(window)
    for item in window.items:
        if isinstance(item.data, SystemInstructionSet):
            if leading:
                opening = item.data.text
            carried = carried or item.data.text == current
        else:
            leading = False
    if opening is not None:
        return opening
    return None if carried else current


# ---------------------------------------------------------------------------------------------
# The neutral view (tests and debugging)


@dataclass(slots=True, eq=True)
class UserTurn:
    """User-side content: non-empty texts and attachments, in order."""

    blocks: Blocks


@dataclass(slots=True, eq=True)
class InstructionTurn:
    """A system instruction that takes effect at this point."""

    text: str


@dataclass(slots=True, eq=True)
class OutputTurn:
    """A model output; `calls` are the (call, window-unique id) pairs kept."""

    output: ModelOutput
    calls: tuple[tuple[ToolCall, str], ...]
    seq: int


@dataclass(slots=True, eq=True)
class ResultsTurn:
    """The results of the previous OutputTurn's calls, one per call, in call order."""

    answers: tuple[Answer, ...]


Turn = UserTurn | InstructionTurn | OutputTurn | ResultsTurn


class _Collect(Pairing):
    def __init__(self, unanswered: Unanswered, orphans: Orphans) -> None:
        super().__init__(unanswered, orphans)
        self.out: list[Turn] = []

    def user(self, blocks: Blocks) -> None:
        self.out.append(UserTurn(blocks))

    def instruction(self, text: str) -> None:
        self.out.append(InstructionTurn(text))

    def output(self, output: ModelOutput, seq: int, answers: Sequence[Answer]) -> None:
        self.out.append(OutputTurn(output, tuple((c, uid) for c, uid, _ in answers), seq))
        if answers:
            self.out.append(ResultsTurn(tuple(answers)))


def turns(
    window: Window, *, unanswered: Unanswered = "cancel", orphans: Orphans = "text"
) -> list[Turn]:
    """The turns `Pairing` settles for a window, as a list (see module doc)."""
    collect = _Collect(unanswered, orphans)
    collect.run(window.items)
    return collect.out


# ---------------------------------------------------------------------------------------------
# Text helpers


def is_blank(text: str) -> bool:
    """Whether a text is empty or whitespace only (never a text block of its own)."""
    return not text or text.isspace()


def input_blocks(data: ModelInput) -> tuple[str | Attachment, ...]:
    """An input's sections, a text block each, then its attachments.

    A titled section starts with a `# title` line; blank sections are left out. One block per
    section keeps a user message of several text parts as several parts.
    """
    sections = data.sections
    if len(sections) == 1 and not sections[0].title:
        text = sections[0].text
        head: tuple[str | Attachment, ...] = () if is_blank(text) else (text,)
        return head + data.attachments
    texts = (f"# {s.title}\n{s.text}" if s.title else s.text for s in sections)
    return (*(t for t in texts if not is_blank(t)), *data.attachments)


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
    """A result's text for providers without an error flag: an error starts `Error: `.

    Failed and skipped results are errors (`is_error`); a skipped one without text says so.
    """
    if result.status == "success":
        return result.content
    if result.status == "skipped" and not result.content:
        return SKIPPED_TEXT
    return f"{ERROR_PREFIX}{result.content}"


def is_error(result: ToolResult) -> bool:
    """Whether a result reports an error to the model (failed or skipped)."""
    return result.status != "success"


def tool_input(call: ToolCall) -> dict[str, object]:
    """A call's arguments as an object; arguments that are not one keep their raw text.

    A custom tool's input is `{"input": text}`, as `function_parameters` declares it.
    """
    if call.custom:
        return {CUSTOM_INPUT_KEY: call.raw_arguments}
    if call.arguments is not None:
        return call.arguments
    if call.parse_error == BIG_INT_ERROR:  # an object after all: its numbers stay exact
        value = msgspec.json.decode(call.raw_arguments)
        if isinstance(value, dict):
            return value
    return {RAW_ARGUMENTS_KEY: call.raw_arguments}


class SystemSlot(Pairing):
    """A Pairing for providers whose current instruction has a slot of its own (`system`).

    Instructions before the first other turn took effect, if at all, only through the last of
    them: it is in force when the conversation opens. That one is the slot itself when it is the
    current instruction; otherwise it is shown (`show_instruction`) before the first turn. Later
    instructions are shown where they take effect.
    """

    def __init__(self, unanswered: Unanswered, orphans: Orphans, system: str | None) -> None:
        super().__init__(unanswered, orphans)
        self.system = system
        self.leading = True
        """No turn but instructions seen yet."""
        self.__opening: str | None = None

    def show_instruction(self, text: str) -> None:
        """Render an instruction that takes effect here, other than in the slot."""
        raise NotImplementedError

    def instruction(self, text: str) -> None:
        """Before the first turn, remember it (a later one supersedes it); then show it."""
        if self.leading:
            self.__opening = text
        else:
            self.show_instruction(text)

    def start_turn(self) -> None:
        """Call before rendering any turn: ends the leading instructions."""
        if self.leading:
            self.leading = False
            if self.__opening is not None and self.__opening != self.system:
                self.show_instruction(self.__opening)

    def run(self, items: Iterable[WindowItem]) -> None:
        """Pair and emit every item; a window of instructions alone shows the one in force."""
        super().run(items)
        self.start_turn()


def custom_tool_names(tools: Iterable[ToolSpec]) -> frozenset[str]:
    """Names of the custom (free-form) tools among `tools`."""
    return frozenset(t.name for t in tools if t.format is not None)


def custom_input(call: ToolCall, custom_tools: frozenset[str]) -> str | None:
    """The text a call gives a custom tool, or None for a function call.

    A call recorded from a provider without custom tools (Anthropic, Gemini) reached the custom
    tool as the function `function_parameters` declares: arguments `{"input": text}`.
    """
    if call.custom:
        return call.raw_arguments
    args = call.arguments
    if call.name in custom_tools and args is not None and len(args) == 1:
        text = args.get(CUSTOM_INPUT_KEY)
        if isinstance(text, str):
            return text
    return None


def function_parameters(tool: ToolSpec) -> dict[str, Any]:
    """A tool's JSON schema for providers without custom tools (Anthropic, Gemini).

    A custom tool becomes a function of one string, `input`, described by its format.
    """
    if tool.format is None:
        return tool.parameters
    fmt = tool.format
    if fmt.get("type") == "grammar":
        about = (
            f"The tool's input as free text in this {fmt.get('syntax', '')} grammar:\n"
            f"{fmt.get('definition', '')}"
        )
    else:
        about = "The tool's input as free text."
    return {
        "type": "object",
        "properties": {CUSTOM_INPUT_KEY: {"type": "string", "description": about}},
        "required": [CUSTOM_INPUT_KEY],
    }


def raw_arguments(call: ToolCall) -> str:
    """The raw argument text as the model produced it (`{}` when it produced none)."""
    return call.raw_arguments or "{}"


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
    return hashed_name(_ID_UNSAFE.sub("_", uid) if strict_chars else uid, uid, max_length)


def hashed_name(base: str, original: str, max_length: int) -> str:
    """`base` cut to fit `max_length` with `_` and 10 hex digits of `original`'s SHA-256."""
    digest = hashlib.sha256(original.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{base[: max_length - 11]}_{digest}"


def id_rewriter(max_length: int, *, strict_chars: bool = True) -> Callable[[str], str]:
    """`fix_id` for one provider's id format, the common case (a valid id) checked inline."""
    if not strict_chars:
        return lambda uid: (
            uid if len(uid) <= max_length else fix_id(uid, max_length, strict_chars=False)
        )
    valid = re.compile(f"[A-Za-z0-9_-]{{1,{max_length}}}").fullmatch
    return lambda uid: uid if valid(uid) else fix_id(uid, max_length)


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
    if attachment.data is not None and not attachment.data:  # providers refuse empty blocks
        return f"[attachment{name} ({attachment.media_type}) is empty]"
    return f"[attachment{name} ({attachment.media_type}) not supported by {provider}]"


def provider_file(attachment: Attachment, provider: str) -> str | None:
    """The id of `provider`'s uploaded file an attachment stands for, if it is one."""
    uri, scheme = attachment.uri, FILE_SCHEMES.get(provider)
    if uri is None or scheme is None or not uri.startswith(scheme):
        return None
    return uri[len(scheme) :]


def is_fetchable(attachment: Attachment) -> bool:
    """Inline bytes, or a URI any provider can fetch (http, https, data).

    Not another provider's file id, nor a scheme only the application knows (s3:, file:, ...).
    """
    uri = attachment.uri
    return uri is None or uri.partition(":")[0].lower() in ("https", "http", "data")


WEB_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""Image formats OpenAI and Anthropic read from inline bytes."""
_MEDIA_ALIASES = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg"}


def inline(attachment: Attachment) -> Attachment | None:
    """An attachment with a `data:` URI as inline bytes (None if the URL is malformed or empty).

    Providers take inline bytes as base64 of their own, not as a URL to fetch: a `data:` URI
    sent as a URL is refused (Anthropic, Gemini) or sniffed from the wrong media type. Media
    types of inline bytes are lowercased, and `image/jpg` is `image/jpeg`, as APIs spell it.
    """
    uri = attachment.uri
    if uri is None:
        if not attachment.data:  # nothing to send: providers refuse an empty image or document
            return None
        media_type = _canonical(attachment.media_type)
        if media_type == attachment.media_type:
            return attachment
        return Attachment(media_type=media_type, data=attachment.data, name=attachment.name)
    if uri[:5].lower() != "data:":
        return attachment
    try:
        parsed = parse_data_url("data:" + uri[5:], "attachment")
    except ProviderMappingError:
        return None
    assert parsed is not None
    media_type, data = parsed
    if not data:
        return None
    if not uri[5:].partition(",")[0].partition(";")[0].strip():  # the URL names no type
        media_type = attachment.media_type
    return Attachment(media_type=_canonical(media_type), data=data, name=attachment.name)


def _canonical(media_type: str) -> str:
    """A media type as APIs spell it: lowercase, `image/jpg` as `image/jpeg`."""
    lowered = media_type.lower()
    return _MEDIA_ALIASES.get(lowered, lowered)


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


def check_request(provider: str, model: object, max_tokens: object, extra: object) -> None:
    """Reject a bad `model`, `max_tokens` or `extra` before rendering (UsageError).

    A reply limit must be a positive integer: 0, a negative number or a bool would be sent as
    it is (or silently replaced), and the provider would refuse the request or misread it.
    """
    if type(model) is not str or not model.strip():
        raise UsageError(f"{provider} renderer: model must be a non-empty string, got {model!r}")
    if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 1):
        raise UsageError(
            f"{provider} renderer: max_tokens must be a positive integer or None, "
            f"got {max_tokens!r}"
        )
    if extra is not None and (
        not isinstance(extra, Mapping) or not all(type(k) is str for k in extra)
    ):
        raise UsageError(
            f"{provider} renderer: extra must be a mapping of field names to values, "
            f"got {type(extra).__name__}"
        )


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
    "CUSTOM_INPUT_KEY",
    "ERROR_PREFIX",
    "INSTRUCTION_HEADING",
    "LIVE_SCREEN_HEADING",
    "OPENING_TEXT",
    "RAW_ARGUMENTS_KEY",
    "SKIPPED_TEXT",
    "SUMMARY_HEADING",
    "SystemSlot",
    "Answer",
    "Blocks",
    "InstructionTurn",
    "Orphans",
    "OutputTurn",
    "Pairing",
    "ResultsTurn",
    "Turn",
    "Unanswered",
    "UserTurn",
    "attachment_note",
    "b64",
    "check_options",
    "check_request",
    "current_system",
    "custom_input",
    "custom_tool_names",
    "data_url",
    "error_text",
    "fix_id",
    "hashed_name",
    "from_provider",
    "function_parameters",
    "id_rewriter",
    "input_blocks",
    "instruction_text",
    "is_blank",
    "is_error",
    "inline",
    "is_image",
    "WEB_IMAGE_TYPES",
    "live_screen_text",
    "merge_extra",
    "opening_system",
    "orphan_text",
    "raw_arguments",
    "provider_file",
    "is_fetchable",
    "result_text",
    "tool_input",
    "turns",
]
