"""Event kinds as frozen, tagged msgspec Structs, plus the envelope around them.

Tags are persisted: their spelling is frozen. New fields get defaults; existing field types never
change. Older schema versions are upcast on read (see `register_upcaster`), never rewritten.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, TypeVar

import msgspec
import uuid_utils

from eventlog.errors import UsageError
from eventlog.type_check import validating_post_init

# ---------------------------------------------------------------------------------------------
# Payload base and registry


class EventData(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", gc=False):
    """Base of every event payload kind; subclasses set `tag=` (persisted, never renamed).

    Instances are not tracked by the cycle collector (`gc=False`): payloads are immutable
    trees, and replaying 100k events would otherwise make every collection walk them all.
    """

    __schema_version__: ClassVar[int] = 1


_T = TypeVar("_T", bound=type[EventData])
_REGISTRY: dict[str, type[EventData]] = {}
_UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {}


def tag_of(cls: type[EventData]) -> str:
    """The persisted tag of an event kind."""
    tag = cls.__struct_config__.tag
    if not isinstance(tag, str):
        raise UsageError(f"{cls.__name__} needs a string tag (class {cls.__name__}(..., tag='x'))")
    return tag


def register_event_type(cls: _T) -> _T:
    """Register a user-defined payload Struct so the store can decode it (usable as decorator)."""
    if not (isinstance(cls, type) and issubclass(cls, EventData)):
        raise UsageError(f"{cls!r} is not a subclass of eventlog.EventData")
    if not cls.__struct_config__.frozen:
        raise UsageError(f"{cls.__name__} must be frozen (class {cls.__name__}(..., frozen=True))")
    tag = tag_of(cls)
    known = _REGISTRY.get(tag)
    if known is not None and known is not cls:
        raise UsageError(f"tag {tag!r} is already registered by {known.__qualname__}")
    _check_decodable(cls)
    _REGISTRY[tag] = cls
    return cls


def _check_decodable(cls: type) -> None:
    """Raise UsageError if msgspec cannot decode the class (`bytes | str`, an Enum of floats).

    Such a class could never be appended. A name not defined yet (a forward reference to a
    class further down the module) is left for the first append to resolve.
    """
    for decoder in (msgspec.msgpack.Decoder, msgspec.json.Decoder):
        try:
            decoder(cls)
        except TypeError as exc:
            raise UsageError(f"{cls.__qualname__} cannot be stored: {exc}") from None
        except NameError:
            return


def event_type(tag: str) -> type[EventData] | None:
    """The registered payload class for a tag, or None."""
    return _REGISTRY.get(tag)


def registered_event_types() -> dict[str, type[EventData]]:
    """A copy of the tag -> class registry."""
    return dict(_REGISTRY)


Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


def register_upcaster(tag: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Register a function turning a stored payload of `from_version` into `from_version + 1`."""

    def decorate(fn: Upcaster) -> Upcaster:
        _UPCASTERS[(tag, from_version)] = fn
        return fn

    return decorate


def upcaster(tag: str, from_version: int) -> Upcaster | None:
    """The upcaster registered for (tag, version), if any."""
    return _UPCASTERS.get((tag, from_version))


# ---------------------------------------------------------------------------------------------
# Building blocks


class Section(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One titled piece of an input, with optional shorter Level-of-Detail variants."""

    text: str
    """The full (Live) text."""
    title: str = ""
    summary: str | None = None
    """A shorter variant used when the entry is downgraded to Summary."""
    gist: str | None = None
    """The shortest variant used when the entry is downgraded to Gist."""


@validating_post_init
class Attachment(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """An image or file given to the model: inline bytes or a reference, never both."""

    media_type: str
    data: bytes | None = None
    uri: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if (self.data is None) == (self.uri is None):
            raise ValueError("an attachment needs exactly one of `data` or `uri`")
        if "/" not in self.media_type:
            raise ValueError(f"media_type {self.media_type!r} is not a MIME type")


class TextPart(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="text", gc=False):
    """Text the model produced."""

    text: str
    signature: str | None = None
    """Provider artifact attached to this part (Gemini thought signature), sent back verbatim."""
    item_id: str | None = None
    """The provider's id of the message that carried it (OpenAI Responses `msg_...`)."""
    phase: str | None = None
    """That message's phase (OpenAI Responses: `commentary` or `final_answer`), sent back."""


class ReasoningPart(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="reasoning", gc=False
):
    """Reasoning / thinking, with the issuer's opaque artifacts kept byte-identical."""

    text: str = ""
    signature: str | None = None
    """Anthropic thinking signature."""
    redacted_data: str | None = None
    """Anthropic redacted_thinking data."""
    item_id: str | None = None
    """OpenAI reasoning item id."""
    encrypted_content: str | None = None
    """OpenAI encrypted reasoning content."""
    summary: tuple[str, ...] = ()
    """OpenAI reasoning summary texts."""


class RefusalPart(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="refusal", gc=False
):
    """The model declined to answer."""

    text: str


Part = TextPart | ReasoningPart | RefusalPart


BIG_INT_ERROR = "arguments hold an integer past 64 bits: kept exactly in raw_arguments only"
"""`ToolCall.parse_error` for arguments MessagePack stores could not hold as parsed."""


def _fits_64_bits(value: dict[str, Any]) -> bool:
    """Whether every integer in `value` fits MessagePack (64 bits), as the stores need."""
    try:
        msgspec.msgpack.encode(value)
    except OverflowError:
        return False
    return True


class ToolCall(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A tool call as the model produced it: raw argument text kept exactly."""

    id: str
    name: str
    raw_arguments: str
    """The argument text exactly as the model produced it."""
    arguments: dict[str, Any] | None = None
    """The parsed arguments, when `raw_arguments` is a JSON object."""
    parse_error: str | None = None
    """Why `raw_arguments` did not parse into an object, when it did not."""
    signature: str | None = None
    """Provider artifact (Gemini thought signature) issued with this call."""
    item_id: str | None = None
    """The provider's id of the item that carried the call (OpenAI Responses `fc_...`), sent
    back with it: a reasoning item is paired with the item that followed it by this id."""
    custom: bool = False
    """A call of a custom (free-form) tool: `raw_arguments` is its input text, not JSON, and
    OpenAI gets it back as a custom tool call (`custom_tool_call`, `type: custom`)."""
    after: int | None = None
    """How many of the output's `parts` came before this call in the provider's response
    (None: not recorded). OpenAI Responses and Gemini outputs record it, so reasoning and text
    go back to that provider where they stood among the calls."""

    @classmethod
    def parse(cls, id: str, name: str, raw_arguments: str, **kw: Any) -> ToolCall:
        """Build a call from raw argument text, parsing it and recording any parse error.

        The input of a custom call (`custom=True`) is free text: it is kept, never parsed.
        """
        if kw.get("custom"):
            return cls(id=id, name=name, raw_arguments=raw_arguments, **kw)
        arguments: dict[str, Any] | None = None
        error: str | None = None
        try:
            value = msgspec.json.decode(raw_arguments.encode() if raw_arguments else b"{}")
        except msgspec.DecodeError as exc:
            error = f"invalid JSON: {exc}"
        else:
            if not isinstance(value, dict):
                error = f"arguments are a JSON {type(value).__name__}, not an object"
            elif _fits_64_bits(value):
                arguments = value
            else:
                error = BIG_INT_ERROR
        return cls(
            id=id,
            name=name,
            raw_arguments=raw_arguments,
            arguments=arguments,
            parse_error=error,
            **kw,
        )


class Invocation(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Which provider, API specification and model produced an output."""

    provider: str
    """e.g. `openai`, `anthropic`, `google`."""
    specification: str
    """e.g. `chat.completions`, `responses`, `messages`, `generateContent`."""
    model: str


class Usage(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Token usage the provider reported for one response."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0
    """Prompt tokens written to the provider's prompt cache (included in `prompt_tokens`)."""


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A tool the model may call: name, description and JSON schema of its arguments.

    With `format`, a custom (free-form) tool: the model writes its input as text in that format
    (OpenAI's custom tools); `parameters` are then unused.
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    format: dict[str, Any] | None = None
    """A custom tool's input format as OpenAI takes it: `{"type": "text"}` or a grammar
    (`{"type": "grammar", "syntax": "lark" | "regex", "definition": ...}`)."""


ToolStatus = Literal["success", "failed", "skipped"]


class ToolResult(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """The result of one tool call, with optional Level-of-Detail variants."""

    call_id: str
    tool_name: str
    status: ToolStatus = "success"
    content: str = ""
    summary: str | None = None
    gist: str | None = None
    attachments: tuple[Attachment, ...] = ()
    elapsed_ms: float | None = None


# ---------------------------------------------------------------------------------------------
# Event kinds


class SystemInstructionSet(EventData, frozen=True, tag="system_instruction_set"):
    """The system instruction from this point on."""

    text: str


@validating_post_init
class ToolsetDefined(EventData, frozen=True, tag="toolset_defined"):
    """The tools the model may call from this point on."""

    tools: tuple[ToolSpec, ...] = ()

    def __post_init__(self) -> None:
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique, got {names}")


@validating_post_init
class ModelInput(EventData, frozen=True, tag="model_input"):
    """What the user (or the host) gives the model: ordered sections and attachments."""

    sections: tuple[Section, ...] = ()
    attachments: tuple[Attachment, ...] = ()

    def __post_init__(self) -> None:
        if not self.sections and not self.attachments:
            raise ValueError("an input needs at least one section or attachment")

    @classmethod
    def from_text(cls, text: str, *, title: str = "") -> ModelInput:
        """An input with one section."""
        return cls(sections=(Section(text=text, title=title),))

    @property
    def text(self) -> str:
        """The Live text of all sections, joined by blank lines."""
        return "\n\n".join(s.text for s in self.sections)


@validating_post_init
class ModelOutput(EventData, frozen=True, tag="model_output"):
    """One finished model response."""

    parts: tuple[Part, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    invocation: Invocation | None = None
    usage: Usage | None = None
    stop_reason: str | None = None
    """Neutral: end_turn, tool_use, max_tokens, stop_sequence, content_filter, refusal, ..."""
    provider_stop_reason: str | None = None
    """The stop / finish reason exactly as the provider reported it."""

    def __post_init__(self) -> None:
        if len(self.tool_calls) < 2:  # the common case, on every decode too
            return
        ids = [c.id for c in self.tool_calls]
        if len(set(ids)) != len(ids):
            raise ValueError(f"tool call ids must be unique within an output, got {ids}")

    @property
    def text(self) -> str:
        """The text parts, concatenated."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))


class ToolResults(EventData, frozen=True, tag="tool_results"):
    """Results aligned with the previous output's tool calls."""

    results: tuple[ToolResult, ...] = ()
    execute_error: str | None = None
    """Set when the host failed to execute the calls as a whole."""


@validating_post_init
class Compaction(EventData, frozen=True, tag="compaction"):
    """From now on, seqs first_seq..last_seq are represented by `summary` in context windows."""

    first_seq: int
    last_seq: int
    summary: str
    summarizer: str = ""

    def __post_init__(self) -> None:
        if not 1 <= self.first_seq <= self.last_seq:
            raise ValueError(
                f"need 1 <= first_seq <= last_seq, got {self.first_seq}..{self.last_seq}"
            )


@validating_post_init
class Checkpoint(EventData, frozen=True, tag="checkpoint"):
    """A named point in the stream to fork or return to."""

    label: str

    def __post_init__(self) -> None:
        if not self.label.strip():
            raise ValueError("a checkpoint label cannot be empty")


class WidgetUpdated(EventData, frozen=True, tag="widget_updated"):
    """A widget's current view, shown to the model as a live-screen section on the newest input."""

    widget: str
    state: str


class SkillActivated(EventData, frozen=True, tag="skill_activated"):
    """A skill became active."""

    name: str
    instructions: str | None = None


class Custom(EventData, frozen=True, tag="custom"):
    """A user-defined event carried as an untyped value."""

    kind: str
    data: Any = None


for _cls in (
    SystemInstructionSet,
    ToolsetDefined,
    ModelInput,
    ModelOutput,
    ToolResults,
    Compaction,
    Checkpoint,
    WidgetUpdated,
    SkillActivated,
    Custom,
):
    register_event_type(_cls)

# ---------------------------------------------------------------------------------------------
# Envelope

UUID_PATTERN = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
"""A canonical lowercase UUID string."""


def new_event_id() -> str:
    """A fresh UUIDv7 string (time-ordered)."""
    return str(uuid_utils.uuid7())


def is_event_id(value: object) -> bool:
    """Whether a value is a canonical lowercase UUID string."""
    return isinstance(value, str) and len(value) == 36 and UUID_PATTERN.match(value) is not None


class Event(msgspec.Struct, frozen=True, kw_only=True):
    """An event to append: its id is made now, so a retry of the same object is idempotent."""

    data: EventData
    id: str = msgspec.field(default_factory=new_event_id)
    meta: dict[str, Any] = msgspec.field(default_factory=dict)
    causation_id: str | None = None
    correlation_id: str | None = None


class RecordedEvent(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """An event as stored: placed in its stream (seq) and in the store (position)."""

    id: str
    stream: str
    """The stream that stored it (for a fork's prefix: the ancestor's name)."""
    seq: int
    position: int
    ts: int
    """Time of recording, UTC, in nanoseconds since the Unix epoch."""
    data: EventData
    meta: dict[str, Any]
    causation_id: str | None
    correlation_id: str | None
    hash: str
    """Hex digest chaining this event to the previous one in its stream."""

    @property
    def type(self) -> str:
        """The event kind's tag."""
        return tag_of(type(self.data))

    @property
    def time(self) -> datetime:
        """`ts` as an aware UTC datetime."""
        return datetime.fromtimestamp(self.ts / 1e9, UTC)


__all__ = [
    "Attachment",
    "Checkpoint",
    "Compaction",
    "Custom",
    "Event",
    "EventData",
    "Invocation",
    "ModelInput",
    "ModelOutput",
    "Part",
    "ReasoningPart",
    "RecordedEvent",
    "RefusalPart",
    "Section",
    "SkillActivated",
    "SystemInstructionSet",
    "TextPart",
    "ToolCall",
    "ToolResult",
    "ToolResults",
    "ToolSpec",
    "ToolStatus",
    "ToolsetDefined",
    "Usage",
    "WidgetUpdated",
    "event_type",
    "is_event_id",
    "new_event_id",
    "register_event_type",
    "register_upcaster",
    "registered_event_types",
    "tag_of",
]
