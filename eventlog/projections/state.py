"""`ConversationState`: what a conversation is at one seq, folded from its events.

The state is a typed, immutable skeleton: the current system instruction and toolset, the
neutral message list (inputs, outputs with their tool calls, tool results; one entry per event,
each with its seq, event id and event), the tool calls still waiting for results, active skills,
widget states, compactions, checkpoints, token usage per (provider, model), and the rule
violations recorded under the `warn` policy.

Message entries keep their event. A state folded from events holds the decoded events it was
given; a state restored from a snapshot loads an entry's event from the store on first access
(snapshots hold the skeleton only, so their size does not grow with tool output, and restoring
a 100k-event state takes milliseconds). Two states are equal when their skeletons are: entries
compare by kind, seq, event id and call ids (an event id names exactly one stored event).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, cast

import msgspec

from eventlog.errors import ConversationError, CorruptionError, UsageError
from eventlog.events import (
    Checkpoint,
    Compaction,
    EventData,
    ModelInput,
    ModelOutput,
    RecordedEvent,
    SkillActivated,
    SystemInstructionSet,
    ToolCall,
    ToolResults,
    ToolsetDefined,
    ToolSpec,
    WidgetUpdated,
)
from eventlog.projections.base import EventSource, Projection
from eventlog.projections.persistent import Log, LogBuilder

Policy = Literal["strict", "warn"]
EntryKind = Literal["input", "output", "tool_results"]

# ---------------------------------------------------------------------------------------------
# Message entries


class Entry(msgspec.Struct, frozen=True, eq=False, gc=False):
    """One entry of the neutral message list: the seq and id of its event, and the event.

    Read the event through the subclass's `event` property: a state restored from a snapshot
    loads it from the store on first access.
    """

    seq: int
    """Seq of the event in the stream."""
    id: str
    """The event's id."""
    call_ids: tuple[str, ...] = ()
    """Output: ids of the calls it made. Tool results: ids of the calls it answered or closed."""
    _event: Any = None
    _source: Any = None

    kind: ClassVar[EntryKind]
    """`input`, `output` or `tool_results`."""
    _code: ClassVar[int]

    def _load(self) -> EventData:
        event: EventData | None = self._event
        if event is None:
            source: EventSource | None = self._source
            if source is None:
                raise UsageError(f"the event of entry seq {self.seq} is not loaded (no source)")
            event = source.data(self.seq)
            if _ENTRY_TYPES.get(type(event)) is not type(self):
                raise CorruptionError(
                    f"expected a {self.kind} event, found {type(event).__name__}", seq=self.seq
                )
            msgspec.structs.force_setattr(self, "_event", event)
        return event

    @property
    def loaded(self) -> bool:
        """Whether the event is in memory (else the first access reads it from the store)."""
        return self._event is not None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Entry):
            return NotImplemented
        return (
            type(self) is type(other)
            and self.seq == other.seq
            and self.id == other.id
            and self.call_ids == other.call_ids
        )

    def __hash__(self) -> int:
        return hash((self.kind, self.seq, self.id))

    def __repr__(self) -> str:
        calls = f", call_ids={self.call_ids!r}" if self.call_ids else ""
        return f"{type(self).__name__}(seq={self.seq}, id={self.id!r}{calls})"


class InputEntry(Entry, frozen=True, eq=False, gc=False):
    """A `ModelInput`."""

    kind: ClassVar[EntryKind] = "input"
    _code: ClassVar[int] = 0

    @property
    def event(self) -> ModelInput:
        """The input event's payload."""
        return cast(ModelInput, self._load())


class OutputEntry(Entry, frozen=True, eq=False, gc=False):
    """A `ModelOutput`, with the ids of the tool calls it made."""

    kind: ClassVar[EntryKind] = "output"
    _code: ClassVar[int] = 1

    @property
    def event(self) -> ModelOutput:
        """The output event's payload."""
        return cast(ModelOutput, self._load())


class ToolResultsEntry(Entry, frozen=True, eq=False, gc=False):
    """A `ToolResults`, with the ids of the calls it closed (in result order)."""

    kind: ClassVar[EntryKind] = "tool_results"
    _code: ClassVar[int] = 2

    @property
    def event(self) -> ToolResults:
        """The results event's payload."""
        return cast(ToolResults, self._load())


MessageEntry = InputEntry | OutputEntry | ToolResultsEntry
_ENTRY_TYPES: dict[type, type[Entry]] = {
    ModelInput: InputEntry,
    ModelOutput: OutputEntry,
    ToolResults: ToolResultsEntry,
}
_BY_CODE: tuple[type[Entry], ...] = (InputEntry, OutputEntry, ToolResultsEntry)

# ---------------------------------------------------------------------------------------------
# Small state items


class SystemInstruction(msgspec.Struct, frozen=True, array_like=True):
    """The system instruction in force, and the seq that set it."""

    seq: int
    text: str


class Toolset(msgspec.Struct, frozen=True, array_like=True):
    """The toolset in force, and the seq that defined it."""

    seq: int
    tools: tuple[ToolSpec, ...]

    def tool(self, name: str) -> ToolSpec | None:
        """The tool with this name, if defined."""
        return next((t for t in self.tools if t.name == name), None)


class OpenCall(msgspec.Struct, frozen=True, array_like=True):
    """A tool call still waiting for its result, and the seq of the output that made it."""

    seq: int
    call: ToolCall


class ActiveSkill(msgspec.Struct, frozen=True, array_like=True):
    """An active skill (the latest activation of that name)."""

    seq: int
    name: str
    instructions: str | None = None


class WidgetState(msgspec.Struct, frozen=True, array_like=True):
    """A widget's current view, and the seq that set it."""

    seq: int
    widget: str
    state: str


class CompactionEntry(msgspec.Struct, frozen=True, array_like=True):
    """A compaction event and its seq."""

    seq: int
    compaction: Compaction


class CheckpointEntry(msgspec.Struct, frozen=True, array_like=True):
    """A checkpoint label and its seq."""

    seq: int
    label: str


class UsageTotal(msgspec.Struct, frozen=True, array_like=True):
    """Token usage summed over the outputs of one (provider, model); '' when not recorded."""

    provider: str
    model: str
    outputs: int = 0
    """Outputs counted (with or without a usage record)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    reasoning_tokens: int = 0


class RuleViolation(msgspec.Struct, frozen=True, array_like=True):
    """A broken conversation rule, recorded instead of raised under the `warn` policy."""

    seq: int
    stream: str
    """The stream that stores the offending event."""
    message: str


# ---------------------------------------------------------------------------------------------
# The state


def _empty_log() -> Log[Any]:
    return Log()


@dataclass(frozen=True, slots=True)
class ConversationState:
    """A conversation at one seq (immutable; equal when folded from the same events)."""

    seq: int = 0
    """The last event folded (0: before any event)."""
    system: SystemInstruction | None = None
    toolset: Toolset | None = None
    messages: Log[MessageEntry] = field(default_factory=_empty_log)
    """Inputs, outputs and tool results in stream order."""
    open_calls: tuple[OpenCall, ...] = ()
    """Calls still waiting for results, in the order they were made."""
    skills: tuple[ActiveSkill, ...] = ()
    """Active skills in first-activation order."""
    widgets: tuple[WidgetState, ...] = ()
    """Each widget's latest state, in first-update order."""
    compactions: Log[CompactionEntry] = field(default_factory=_empty_log)
    checkpoints: Log[CheckpointEntry] = field(default_factory=_empty_log)
    usage: tuple[UsageTotal, ...] = ()
    """Token usage totals per (provider, model), in first-seen order."""
    warnings: Log[RuleViolation] = field(default_factory=_empty_log)
    """Rule violations recorded under the `warn` policy (always empty under `strict`)."""

    def skill(self, name: str) -> ActiveSkill | None:
        """The active skill of this name, if any."""
        return next((s for s in self.skills if s.name == name), None)

    def widget(self, name: str) -> WidgetState | None:
        """A widget's current state, if it was ever updated."""
        return next((w for w in self.widgets if w.widget == name), None)

    def checkpoint(self, label: str) -> CheckpointEntry | None:
        """The last checkpoint with this label, if any."""
        return next((c for c in reversed(self.checkpoints) if c.label == label), None)

    def usage_for(self, provider: str, model: str) -> UsageTotal:
        """Totals for one (provider, model) (zeros when none)."""
        found = next((u for u in self.usage if (u.provider, u.model) == (provider, model)), None)
        return found or UsageTotal(provider, model)

    @property
    def total_usage(self) -> UsageTotal:
        """Totals over every provider and model."""
        return UsageTotal(
            "",
            "",
            sum(u.outputs for u in self.usage),
            sum(u.prompt_tokens for u in self.usage),
            sum(u.completion_tokens for u in self.usage),
            sum(u.cached_prompt_tokens for u in self.usage),
            sum(u.reasoning_tokens for u in self.usage),
        )

    def load_events(self) -> ConversationState:
        """Load every message entry's event now, so the state no longer reads its store; self.

        A state folded from a store keeps only its newest entries' events in memory and reads
        the others on access, which raises StoreClosedError once the store is closed. Call this
        first to keep the state usable on its own (it then holds every event in memory).
        """
        for entry in self.messages:
            entry._load()
        return self

    def to_builtins(self, *, events: bool = True) -> dict[str, Any]:
        """The state as JSON-ready builtins (with each entry's event unless `events=False`)."""
        enc = msgspec.to_builtins

        def entry(e: MessageEntry) -> dict[str, Any]:
            out: dict[str, Any] = {"kind": e.kind, "seq": e.seq, "id": e.id}
            if e.call_ids:
                out["call_ids"] = list(e.call_ids)
            if events:
                out["event"] = enc(e.event)
            return out

        return {
            "seq": self.seq,
            "system": _obj(self.system),
            "toolset": _obj(self.toolset),
            "messages": [entry(e) for e in self.messages],
            "open_calls": [_obj(c) for c in self.open_calls],
            "skills": [_obj(s) for s in self.skills],
            "widgets": [_obj(w) for w in self.widgets],
            "compactions": [_obj(c) for c in self.compactions],
            "checkpoints": [_obj(c) for c in self.checkpoints],
            "usage": [_obj(u) for u in self.usage],
            "warnings": [_obj(w) for w in self.warnings],
        }


def _obj(value: msgspec.Struct | None) -> Any:
    """A struct as a dict (our structs are array_like on the wire; JSON output names fields)."""
    if value is None:
        return None
    out: dict[str, Any] = {}
    for name in value.__struct_fields__:
        v = getattr(value, name)
        out[name] = msgspec.to_builtins(v) if not isinstance(v, (int, str)) else v
    return out


# ---------------------------------------------------------------------------------------------
# The fold


class _Fold:
    """A mutable builder: folds many events with O(1) work each, then freezes a state.

    New message entries go to a plain list (`push`) and join the log when the state freezes.
    With a source, entries more than `keep` from the end drop their event in batches (they
    reload it on access), so a long replay frees event bodies while they are still warm.
    """

    __slots__ = (
        "checkpoints",
        "compactions",
        "evicted",
        "keep",
        "messages",
        "new",
        "open",
        "policy",
        "push",
        "recent",
        "seq",
        "source",
        "skills",
        "system",
        "toolset",
        "usage",
        "warnings",
        "widgets",
    )

    def __init__(
        self,
        state: ConversationState,
        policy: Policy,
        source: EventSource | None = None,
        keep: int = 64,
    ) -> None:
        self.policy = policy
        self.source = source
        self.keep = keep
        n = len(state.messages)
        # Entries of the input state that may still hold their event.
        self.recent: list[MessageEntry] = (
            [state.messages[i] for i in range(max(0, n - keep), n)] if source is not None else []
        )
        self.new: list[MessageEntry] = []
        self.push = self.new.append
        self.evicted = 0
        """How many of `new` were already considered for eviction."""
        self.seq = state.seq
        self.system = state.system
        self.toolset = state.toolset
        self.messages: LogBuilder[MessageEntry] = state.messages.builder()
        self.open = {c.call.id: c for c in state.open_calls}
        self.skills = {s.name: s for s in state.skills}
        self.widgets = {w.widget: w for w in state.widgets}
        self.compactions: LogBuilder[CompactionEntry] = state.compactions.builder()
        self.checkpoints: LogBuilder[CheckpointEntry] = state.checkpoints.builder()
        self.usage = {
            (u.provider, u.model): list(msgspec.structs.astuple(u)[2:]) for u in state.usage
        }
        self.warnings: LogBuilder[RuleViolation] = state.warnings.builder()

    def evict(self, upto: int) -> None:
        """Drop the events of new entries before index `upto` (they reload from the source)."""
        new = self.new
        for i in range(self.evicted, upto):
            _force_setattr(new[i], "_event", None)
        self.evicted = upto
        recent = self.recent
        if recent:
            drop = len(recent) + len(new) - self.keep
            for entry in recent[: max(0, drop)]:
                if entry._source is not None:
                    _force_setattr(entry, "_event", None)
            self.recent = recent[max(0, drop) :]

    def freeze(self) -> ConversationState:
        if self.source is not None:
            self.evict(max(self.evicted, len(self.new) - self.keep))
        messages = self.messages
        messages.extend(self.new)
        self.new.clear()
        self.evicted = 0
        return ConversationState(
            seq=self.seq,
            system=self.system,
            toolset=self.toolset,
            messages=messages.release(),
            open_calls=tuple(self.open.values()),
            skills=tuple(self.skills.values()),
            widgets=tuple(self.widgets.values()),
            compactions=self.compactions.release(),
            checkpoints=self.checkpoints.release(),
            usage=tuple(UsageTotal(p, m, *v) for (p, m), v in self.usage.items()),
            warnings=self.warnings.release(),
        )

    def run(self, events: Iterable[RecordedEvent]) -> None:
        handlers = _HANDLERS
        new = self.new
        batch = self.keep + _EVICT_BATCH if self.source is not None else None
        expected = self.seq + 1
        try:
            for event in events:
                if event.seq != expected:
                    raise ConversationError(
                        f"events must be folded in order: expected seq {expected}, got {event.seq}",
                        stream=event.stream,
                        seq=event.seq,
                    )
                self.seq = expected
                expected += 1
                handler = handlers.get(type(event.data))
                if handler is not None:
                    handler(self, event)
                    if batch is not None and len(new) - self.evicted >= batch:
                        self.evict(len(new) - self.keep)
        finally:
            self.seq = expected - 1

    def violation(self, event: RecordedEvent, message: str) -> None:
        if self.policy == "strict":
            raise ConversationError(message, stream=event.stream, seq=event.seq)
        self.warnings.append(RuleViolation(event.seq, event.stream, message))

    # -- one handler per event kind --------------------------------------------------------

    def on_system(self, event: RecordedEvent) -> None:
        data: SystemInstructionSet = event.data  # type: ignore[assignment]
        self.system = SystemInstruction(event.seq, data.text)

    def on_toolset(self, event: RecordedEvent) -> None:
        data: ToolsetDefined = event.data  # type: ignore[assignment]
        self.toolset = Toolset(event.seq, data.tools)

    def on_input(self, event: RecordedEvent) -> None:
        self.push(InputEntry(event.seq, event.id, (), event.data, self.source))

    def on_output(self, event: RecordedEvent) -> None:
        data: ModelOutput = event.data  # type: ignore[assignment]
        seq = event.seq
        calls = data.tool_calls
        ids: tuple[str, ...] = ()
        if calls:
            ids = tuple([c.id for c in calls])
            for call in calls:
                if call.id in self.open:
                    self.violation(
                        event,
                        f"tool call id {call.id!r} is already waiting for a result "
                        f"(made at seq {self.open[call.id].seq})",
                    )
                self.open[call.id] = OpenCall(seq, call)
        self.push(OutputEntry(seq, event.id, ids, data, self.source))
        inv = data.invocation
        key = (inv.provider, inv.model) if inv is not None else ("", "")
        totals = self.usage.get(key)
        if totals is None:
            totals = self.usage[key] = [0, 0, 0, 0, 0]
        totals[0] += 1
        u = data.usage
        if u is not None:
            totals[1] += u.prompt_tokens
            totals[2] += u.completion_tokens
            totals[3] += u.cached_prompt_tokens
            totals[4] += u.reasoning_tokens

    def on_results(self, event: RecordedEvent) -> None:
        data: ToolResults = event.data  # type: ignore[assignment]
        open_ = self.open
        results = data.results
        if len(results) == len(open_) and results and data.execute_error is None:
            # The usual case: one result per open call, in order.
            for pending, result in zip(open_.values(), results, strict=True):
                call = pending.call
                if call.id != result.call_id or call.name != result.tool_name:
                    break
            else:
                ids = tuple(open_)
                open_.clear()
                self.push(ToolResultsEntry(event.seq, event.id, ids, data, self.source))
                return
        closed: list[str] = []
        order = list(open_)
        last_index = -1
        for result in data.results:
            cid = result.call_id
            if cid in closed:
                self.violation(event, f"duplicate result for tool call {cid!r} in one event")
                continue
            waiting = open_.get(cid)
            if waiting is None:
                self.violation(
                    event,
                    f"result for tool call {cid!r} ({result.tool_name}) that is not waiting "
                    "for a result: it was never made, or was already answered",
                )
                continue
            del open_[cid]
            closed.append(cid)
            if waiting.call.name != result.tool_name:
                self.violation(
                    event,
                    f"result for tool call {cid!r} names tool {result.tool_name!r}, "
                    f"but the call (seq {waiting.seq}) was to {waiting.call.name!r}",
                )
            index = order.index(cid)
            if index < last_index:
                self.violation(
                    event,
                    f"result for tool call {cid!r} is out of order: results must follow "
                    "the order of the calls",
                )
            last_index = max(last_index, index)
        if data.execute_error is not None:
            # The host could not execute the calls at all: nothing is waiting any more.
            closed.extend(open_)
            open_.clear()
        self.push(ToolResultsEntry(event.seq, event.id, tuple(closed), data, self.source))

    def on_compaction(self, event: RecordedEvent) -> None:
        data = cast(Compaction, event.data)
        if data.last_seq >= event.seq:
            self.violation(
                event,
                f"compaction covers seqs {data.first_seq}..{data.last_seq}, "
                f"which do not all come before it",
            )
        self.compactions.append(CompactionEntry(event.seq, data))

    def on_checkpoint(self, event: RecordedEvent) -> None:
        self.checkpoints.append(CheckpointEntry(event.seq, cast(Checkpoint, event.data).label))

    def on_widget(self, event: RecordedEvent) -> None:
        data = cast(WidgetUpdated, event.data)
        self.widgets[data.widget] = WidgetState(event.seq, data.widget, data.state)

    def on_skill(self, event: RecordedEvent) -> None:
        data = cast(SkillActivated, event.data)
        self.skills[data.name] = ActiveSkill(event.seq, data.name, data.instructions)


_force_setattr = msgspec.structs.force_setattr
_EVICT_BATCH = 64

_HANDLERS: dict[type, Callable[[_Fold, RecordedEvent], None]] = {
    SystemInstructionSet: _Fold.on_system,
    ToolsetDefined: _Fold.on_toolset,
    ModelInput: _Fold.on_input,
    ModelOutput: _Fold.on_output,
    ToolResults: _Fold.on_results,
    Compaction: _Fold.on_compaction,
    Checkpoint: _Fold.on_checkpoint,
    WidgetUpdated: _Fold.on_widget,
    SkillActivated: _Fold.on_skill,
}

# ---------------------------------------------------------------------------------------------
# Snapshot encoding


class _Chunks(msgspec.Struct, frozen=True, array_like=True):
    n: int
    chunks: list[bytes]


class _Snapshot(msgspec.Struct, frozen=True, array_like=True):
    seq: int
    system: SystemInstruction | None
    toolset: Toolset | None
    messages: _Chunks
    open_calls: tuple[OpenCall, ...]
    skills: tuple[ActiveSkill, ...]
    widgets: tuple[WidgetState, ...]
    compactions: _Chunks
    checkpoints: _Chunks
    usage: tuple[UsageTotal, ...]
    warnings: _Chunks


_encoder = msgspec.msgpack.Encoder()
_snapshot_decoder = msgspec.msgpack.Decoder(_Snapshot)
_entry_rows = msgspec.msgpack.Decoder(list[tuple[int, int, str, tuple[str, ...]]])
_compaction_rows = msgspec.msgpack.Decoder(list[CompactionEntry])
_checkpoint_rows = msgspec.msgpack.Decoder(list[CheckpointEntry])
_warning_rows = msgspec.msgpack.Decoder(list[RuleViolation])


def _encode_entries(chunk: list[MessageEntry]) -> bytes:
    return _encoder.encode([(e._code, e.seq, e.id, e.call_ids) for e in chunk])


def _entry_decoder(source: EventSource | None) -> Callable[[bytes], list[MessageEntry]]:
    def decode(raw: bytes) -> list[MessageEntry]:
        return [
            cast(MessageEntry, _BY_CODE[code](seq, id_, calls, None, source))
            for code, seq, id_, calls in _entry_rows.decode(raw)
        ]

    return decode


def _chunks(log: Log[Any], encode: Callable[[list[Any]], bytes]) -> _Chunks:
    return _Chunks(len(log), log.encode_chunks(encode))


def encode_state(state: ConversationState) -> bytes:
    """Snapshot bytes of a state (the skeleton: event bodies stay in the store)."""
    snap = _Snapshot(
        state.seq,
        state.system,
        state.toolset,
        _chunks(state.messages, _encode_entries),
        state.open_calls,
        state.skills,
        state.widgets,
        _chunks(state.compactions, _encoder.encode),
        _chunks(state.checkpoints, _encoder.encode),
        state.usage,
        _chunks(state.warnings, _encoder.encode),
    )
    return _encoder.encode(snap)


def decode_state(data: bytes, source: EventSource | None = None) -> ConversationState:
    """A state from snapshot bytes; message events load from `source` on first access."""
    snap = _snapshot_decoder.decode(data)
    return ConversationState(
        seq=snap.seq,
        system=snap.system,
        toolset=snap.toolset,
        messages=Log.from_chunks(snap.messages.chunks, snap.messages.n, _entry_decoder(source)),
        open_calls=snap.open_calls,
        skills=snap.skills,
        widgets=snap.widgets,
        compactions=Log.from_chunks(
            snap.compactions.chunks, snap.compactions.n, _compaction_rows.decode
        ),
        checkpoints=Log.from_chunks(
            snap.checkpoints.chunks, snap.checkpoints.n, _checkpoint_rows.decode
        ),
        usage=snap.usage,
        warnings=Log.from_chunks(snap.warnings.chunks, snap.warnings.n, _warning_rows.decode),
    )


# ---------------------------------------------------------------------------------------------
# The projection


class ConversationProjection(Projection[ConversationState]):
    """Folds a stream into a `ConversationState`; `policy` says what a broken rule does.

    `strict` (default) raises `ConversationError` naming the stream and seq; `warn` records a
    `RuleViolation` in `state.warnings` and goes on.
    """

    name = "conversation"
    version = 1

    def __init__(self, policy: Policy = "strict", *, keep_events: int = 64) -> None:
        if policy not in ("strict", "warn"):
            raise UsageError(f"policy must be 'strict' or 'warn', got {policy!r}")
        if keep_events < 0:
            raise UsageError(f"keep_events must be >= 0, got {keep_events}")
        self.policy: Policy = policy
        self.keep_events = keep_events
        """How many of the newest entries keep their event in memory (given a source)."""

    def initial(self) -> ConversationState:
        """The empty conversation (seq 0)."""
        return ConversationState()

    def fold(self, state: ConversationState, event: RecordedEvent) -> ConversationState:
        """The state after one more event."""
        return self.fold_many(state, (event,))

    def fold_many(
        self,
        state: ConversationState,
        events: Iterable[RecordedEvent],
        source: EventSource | None = None,
    ) -> ConversationState:
        """The state after these events, folded mutably inside and frozen at the end.

        With a `source`, only the newest `keep_events` entries keep their event in memory;
        older ones load it from the source when read.
        """
        fold = _Fold(state, self.policy, source, self.keep_events)
        try:
            fold.run(events)
        except BaseException:
            fold.freeze()  # release the logs' buffers for later folds
            raise
        return fold.freeze()

    def encode(self, state: ConversationState) -> bytes:
        """Snapshot bytes (skeleton only)."""
        return encode_state(state)

    def decode(self, data: bytes, source: EventSource) -> ConversationState:
        """A state from snapshot bytes, loading entry events from `source` when read."""
        return decode_state(data, source)

    def check_restored(self, state: ConversationState, stream: str) -> None:
        """Under `strict`, a snapshot taken under `warn` with violations is an error."""
        if self.policy == "strict" and state.warnings:
            first = state.warnings[0]
            raise ConversationError(first.message, stream=first.stream, seq=first.seq)


def iter_entries(state: ConversationState, *, after: int = 0) -> Iterator[MessageEntry]:
    """Message entries with seq > after (newest last), found by bisection."""
    msgs = state.messages
    lo, hi = 0, len(msgs)
    while lo < hi:
        mid = (lo + hi) // 2
        if msgs[mid].seq <= after:
            lo = mid + 1
        else:
            hi = mid
    for i in range(lo, len(msgs)):
        yield msgs[i]


__all__ = [
    "ActiveSkill",
    "CheckpointEntry",
    "CompactionEntry",
    "ConversationProjection",
    "ConversationState",
    "Entry",
    "EntryKind",
    "InputEntry",
    "MessageEntry",
    "OpenCall",
    "OutputEntry",
    "Policy",
    "RuleViolation",
    "SystemInstruction",
    "ToolResultsEntry",
    "Toolset",
    "UsageTotal",
    "WidgetState",
    "decode_state",
    "encode_state",
    "iter_entries",
]
