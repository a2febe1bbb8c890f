"""Token-budgeted context windows: what the model sees for one request.

`context_window(source, stream, budget=...)` builds one window from a store, a
`ConversationState` or a list of events, counting only what the window needs (newest first,
until the budget is full); `WindowBuilder` is the incremental form an agent loop keeps: fed
each new event once (its tokens are counted once, at every Level of Detail), it answers
`window()` for the next request in time that follows what changed, not the history's length.
See docs/windows.md.

Rules (every strategy):

- the current system instruction and the toolset always count and are always kept;
- the newest input, the newest input-or-tool-result (which carries the live screen) and the
  newest entry are pinned: always kept, at Live; if they alone do not fit,
  `WindowTooSmallError` says by how much;
- a model output and the results of its tool calls form one unit, kept or dropped together;
- a compaction summary stands in for the units that start inside its range;
- `sliding_window` keeps the last N turns and the compaction summaries whose ranges reach them
  (one starting before the oldest kept turn is kept, and the window starts at it);
- a system instruction followed directly by another (nothing shown between them) never took
  effect: the later one supersedes it, and it is left out;
- `lod_then_drop` and `summary_aware` downgrade older units Live -> Summary -> Gist, oldest
  first, before dropping anything; `summary_aware` (default) also drops compaction summaries
  only after every other unpinned unit;
- the widgets' current views (live screen) show only on the newest input or tool result.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Final, Literal

import msgspec

from eventlog.errors import UsageError, ValidationError, WindowTooSmallError
from eventlog.events import (
    Compaction,
    EventData,
    ModelInput,
    ModelOutput,
    RecordedEvent,
    Section,
    SystemInstructionSet,
    ToolResults,
    ToolsetDefined,
    ToolSpec,
    WidgetUpdated,
)
from eventlog.projections.providers.render_common import live_screen_text
from eventlog.projections.state import ConversationState
from eventlog.projections.tokens import (
    CalibratedCounter,
    Calibration,
    TokenCounter,
    get_counter,
    seq_and_data,
    variant,
)
from eventlog.projections.window_select import (
    EVERYTHING,
    STRATEGIES,
    W_LIVE,
    ZERO,
    Fenwick,
    Plan,
    Strategy,
    Vec,
    plan,
)
from eventlog.projections.window_types import (
    EntryReport,
    ItemData,
    Level,
    Window,
    WindowItem,
    WindowReport,
)
from eventlog.store import Store, require_store

Entries = Literal["all", "window"]
DEFAULT_TURNS: Final = 10
"""Turns `sliding_window` keeps when `turns` is not given."""
_LEVELS: Final[tuple[Level, Level, Level]] = ("live", "summary", "gist")
_LEVEL_INDEX: Final = {"live": 0, "summary": 1, "gist": 2}
_ALL_LIVE: Final[tuple[Level, Level, Level]] = ("live", "live", "live")


class Budget(msgspec.Struct, frozen=True, kw_only=True):
    """How many tokens a window may use: `context_window - reserve`, capped by `max_tokens`.

    `Budget(context_window=128_000, reserve=4_096)` leaves room for a 4k reply;
    `Budget(max_tokens=20_000)` is an explicit maximum. An int budget is `Budget(max_tokens=n)`.
    """

    context_window: int | None = None
    reserve: int = 0
    """Tokens kept free for the model's reply."""
    max_tokens: int | None = None

    @property
    def tokens(self) -> int:
        """The tokens a window may use."""
        for name in ("context_window", "reserve", "max_tokens"):
            value = getattr(self, name)
            if (value is not None or name == "reserve") and (type(value) is not int or value < 0):
                raise UsageError(f"Budget {name} must be a non-negative int, got {value!r}")
        limits = []
        if self.context_window is not None:
            limits.append(self.context_window - self.reserve)
        if self.max_tokens is not None:
            limits.append(self.max_tokens)
        if not limits:
            raise UsageError("a Budget needs context_window or max_tokens")
        return min(limits)


def budget_tokens(budget: int | Budget) -> int:
    """The token count of an int or `Budget` (checked: >= 0)."""
    n = budget.tokens if isinstance(budget, Budget) else budget
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise UsageError(f"budget must be a non-negative number of tokens, got {n!r}")
    return n


# ---------------------------------------------------------------------------------------------
# Entries and units


class _Entry:
    """One event the window may show: its data, counts per level and content level per level.

    A builder counts each entry when it is fed (`counter` given). A one-shot window
    (`context_window`) passes no counter and counts on demand: `count_live` (one count, which
    settles everything for an entry without Summary / Gist variants), `count` (every level).
    `costs` and `eff` are only set once every level is known; `live` as soon as Live is.
    """

    __slots__ = (
        "costs",
        "counted",
        "data",
        "eff",
        "kind",
        "live",
        "pos",
        "seq",
        "unit",
        "variants",
    )

    costs: tuple[int, int, int]
    eff: tuple[Level, Level, Level]

    def __init__(self, seq: int, kind: str, data: ItemData, counter: TokenCounter | None) -> None:
        self.seq = seq
        self.kind = kind
        self.data = data
        self.pos = 2 * seq
        self.unit: _Unit | None = None
        self.variants: dict[Level, ItemData] | None = None
        self.live: int | None = None
        self.counted = False
        if counter is not None:
            self.count(counter)

    def count_live(self, counter: TokenCounter) -> int:
        """The Live count (counting it once; an entry without variants is then fully counted)."""
        live = self.live
        if live is None:
            live = self.live = counter.count_event(self.data)
            if not _has_variants(self.data):
                self.costs = (live, live, live)
                self.eff = _ALL_LIVE
                self.counted = True
        return live

    def count(self, counter: TokenCounter) -> tuple[int, int, int]:
        """The counts at every level (counting what is not known yet)."""
        if self.counted:
            return self.costs
        live = self.count_live(counter)
        if self.counted:
            return self.costs
        data = self.data
        eff: list[Level] = ["live", "live", "live"]
        summary = live
        # A level that shows the same texts as the one above it changes nothing: not a downgrade.
        live_texts = _shown_texts(data, "live")
        summary_texts = _shown_texts(data, "summary")
        if summary_texts != live_texts:
            s = counter.count_event(data, "summary")
            if s <= live:
                summary, eff[1] = s, "summary"
        shown = summary_texts if eff[1] == "summary" else live_texts
        gist, eff[2] = summary, eff[1]
        if _shown_texts(data, "gist") != shown:
            g = counter.count_event(data, "gist")
            # A Gist longer than the Summary: the gist level shows (and costs) the Summary.
            if g <= summary:
                gist, eff[2] = g, "gist"
        self.costs = (live, summary, gist)
        self.eff = (eff[0], eff[1], eff[2])
        self.counted = True
        return self.costs

    def at(self, level: Level) -> ItemData:
        """The data shown at `level` (downgraded text substituted)."""
        eff = self.eff[_LEVEL_INDEX[level]]
        if eff == "live":
            return self.data
        variants = self.variants
        if variants is None:
            variants = self.variants = {}
        found = variants.get(eff)
        if found is None:
            found = variants[eff] = _downgrade(self.data, eff)
        return found


def _shown_texts(data: ItemData, level: Level) -> tuple[str, ...]:
    """The texts an input's sections or a result's contents show at `level`."""
    if isinstance(data, ModelInput):
        return tuple(variant(s.text, s.summary, s.gist, level) for s in data.sections)
    if isinstance(data, ToolResults):
        return tuple(variant(r.content, r.summary, r.gist, level) for r in data.results)
    return ()


def _has_variants(data: ItemData) -> bool:
    if isinstance(data, ModelInput):
        return any(s.summary is not None or s.gist is not None for s in data.sections)
    if isinstance(data, ToolResults):
        return any(r.summary is not None or r.gist is not None for r in data.results)
    return False


def _downgrade(data: ItemData, level: Level) -> ItemData:
    if isinstance(data, ModelInput):
        return ModelInput(
            sections=tuple(
                Section(text=variant(s.text, s.summary, s.gist, level), title=s.title)
                for s in data.sections
            ),
            attachments=data.attachments,
        )
    if isinstance(data, ToolResults):
        return ToolResults(
            results=tuple(
                msgspec.structs.replace(
                    r, content=variant(r.content, r.summary, r.gist, level), summary=None, gist=None
                )
                for r in data.results
            ),
            execute_error=data.execute_error,
        )
    return data


class _Unit:
    """What is kept or dropped as a whole.

    An input, an output and the results of its calls, an earlier system instruction, a
    compaction summary, or results whose call is not in the window.
    """

    __slots__ = (
        "active",
        "applied",
        "costs",
        "counted",
        "covered_by",
        "covers",
        "entries",
        "items",
        "kind",
        "last",
        "pinned",
        "slot",
    )

    costs: tuple[int, int, int]
    """Sums of its entries' counts per level (set while `counted`)."""

    def __init__(self, kind: str, slot: int, first: _Entry, last: int = 0) -> None:
        self.kind = kind
        self.slot = slot
        self.last = last
        """A compaction's last covered seq."""
        self.entries = [first]
        first.unit = self
        self.counted = first.counted
        if first.counted:
            self.costs = first.costs
        self.active = True
        self.pinned = False
        self.applied: Vec = ZERO
        self.covered_by: _Unit | None = None
        """The compaction covering it (or one covering that: see `_root`)."""
        self.covers = 0
        """Entries a compaction stands in for (through the compactions it covers)."""
        self.items: dict[Level, list[tuple[int, WindowItem]]] | None = None
        """Its window items per level, made when first shown (reused until it changes)."""

    def add(self, entry: _Entry) -> None:
        self.entries.append(entry)
        entry.unit = self
        if self.counted and entry.counted:
            c, e = self.costs, entry.costs
            self.costs = (c[0] + e[0], c[1] + e[1], c[2] + e[2])
        else:
            self.counted = False
        self.items = None

    def count_live(self, counter: TokenCounter) -> int:
        """The Live count of its entries (counting only Live where not known yet)."""
        if self.counted:
            return self.costs[0]
        total = 0
        for e in self.entries:
            total += e.count_live(counter)
        return total

    def count(self, counter: TokenCounter) -> tuple[int, int, int]:
        """Its counts at every level (counting its entries where not known yet)."""
        if not self.counted:
            live = summary = gist = 0
            for e in self.entries:
                c = e.count(counter)
                live += c[0]
                summary += c[1]
                gist += c[2]
            self.costs = (live, summary, gist)
            self.counted = True
        return self.costs

    def vector(self) -> Vec:
        """What the unit adds to the selection index when active and unpinned."""
        live, summary, gist = self.costs
        if self.kind == "compaction":
            return (0, 0, 0, gist)
        return (live - summary, summary - gist, gist, 0)

    def items_at(self, level: Level) -> list[tuple[int, WindowItem]]:
        items = self.items
        if items is None:
            items = self.items = {}
        found = items.get(level)
        if found is None:
            found = items[level] = [
                (e.pos, WindowItem(seq=e.seq, data=e.at(level), level=e.eff[_LEVEL_INDEX[level]]))
                for e in self.entries
            ]
        return found


# ---------------------------------------------------------------------------------------------
# The builder


class WindowBuilder:
    """Incremental context windows for one conversation (see module doc and docs/windows.md).

    Feed every event once, in seq order (`feed`, `extend`, or `refresh` from the store it was
    opened on); `window()` then selects for the current budget and strategy. Each event is
    counted once per Level of Detail when fed; `window()` costs O(log n) for the cut plus the
    size of the window it returns, and reuses the previous window's items.

    With `entries="all"` (default) the report lists every entry of the history, which costs
    O(n); an agent loop that does not read per-entry fates should pass `entries="window"`.
    """

    _lazy: ClassVar[bool] = False
    """Count entries when `window()` needs them rather than when fed (`_OneShot`)."""

    def __init__(
        self,
        *,
        budget: int | Budget,
        counter: TokenCounter | str = "estimate",
        strategy: Strategy | str = "summary_aware",
        turns: int | None = None,
        entries: Entries = "all",
        stream: str = "",
    ) -> None:
        self.budget = budget
        self.counter: TokenCounter = _counter(counter, None)
        self.strategy = _check_strategy(strategy)
        self.turns = _check_turns(turns)
        self.entries: Entries = _check_entries(entries)
        self.stream = stream
        self.seq = 0
        """Seq of the last event fed."""
        self._store: Store | None = None
        self._fen = Fenwick()
        self._units: dict[int, _Unit] = {}
        self._active: list[tuple[int, int]] = []  # (slot, unit key), sorted
        self._compactions: list[tuple[int, int]] = []  # active compactions, sorted
        self._all: list[_Entry] = []
        self._inputs: list[int] = []  # seqs of inputs (turn starts)
        self._instruction: _Entry | None = None
        self._instruction_last = False
        """Whether the latest event shown is the current instruction (a next one supersedes it)."""
        self._superseded = 0
        """Instructions left out because another followed before they took effect."""
        self._system_tokens = 0
        self._tools: tuple[ToolSpec, ...] = ()
        self._tools_tokens = 0
        self._widgets: dict[str, str] = {}
        self._screen: tuple[tuple[str, str], ...] = ()
        self._screen_tokens = 0
        self._screen_counted = True
        """Whether `_screen_tokens` counts the current screen (widgets change it when fed)."""
        self._last_input: _Entry | None = None
        self._last_io: _Entry | None = None
        self._last_entry: _Entry | None = None
        self._open: _Unit | None = None
        self._open_ids: set[str] = set()
        self._answered: set[str] = set()
        self._pinned: list[_Unit] = []

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def from_store(
        cls,
        store: Store,
        stream: str,
        *,
        budget: int | Budget,
        counter: TokenCounter | str = "estimate",
        calibrate: bool = False,
        at: int | None = None,
        **options: Any,
    ) -> WindowBuilder:
        """A builder fed with `stream` up to `at` (default: its end); `refresh()` reads more.

        `calibrate=True` scales the counter by the ratio the stream's own reported
        `usage.prompt_tokens` showed for the latest output's provider and model, learnt once
        from the events read here: `refresh()` keeps it (events are counted once), so a new
        builder is needed to learn it again.
        """
        require_store(store, "WindowBuilder.from_store")
        events = _read(store, stream, at)
        counter = _counter(counter, events if calibrate else None)
        builder = cls(budget=budget, counter=counter, stream=stream, **options)
        builder.extend(events)
        if at is None:
            builder._store = store
        return builder

    @classmethod
    def from_state(
        cls, state: ConversationState, *, stream: str = "", **options: Any
    ) -> WindowBuilder:
        """A builder fed from a `ConversationState`.

        A state knows only the current system instruction: earlier changes are not shown.
        """
        builder = cls(stream=stream, **options)
        feed: list[tuple[int, EventData]] = []
        if state.system is not None:
            feed.append((state.system.seq, SystemInstructionSet(text=state.system.text)))
        if state.toolset is not None:
            feed.append((state.toolset.seq, ToolsetDefined(tools=state.toolset.tools)))
        feed.extend((w.seq, WidgetUpdated(widget=w.widget, state=w.state)) for w in state.widgets)
        feed.extend((c.seq, c.compaction) for c in state.compactions)
        feed.extend((e.seq, e.event) for e in state.messages)
        feed.sort(key=lambda x: x[0])
        for seq, data in feed:
            builder.add(seq, data)
        if len(state.widgets) > 1:  # fed by latest update: put back the state's (first) order
            builder._widgets = {w.widget: builder._widgets[w.widget] for w in state.widgets}
            builder._set_screen()
        builder.seq = state.seq
        return builder

    # -- feeding ---------------------------------------------------------------------------

    def feed(self, event: RecordedEvent | EventData) -> None:
        """Take the next event (a bare payload gets the next seq)."""
        if isinstance(event, RecordedEvent):
            self.add(event.seq, event.data)
        else:
            self.add(self.seq + 1, event)

    def extend(self, events: Iterable[RecordedEvent | EventData]) -> None:
        """Take events in order."""
        add = self.add
        for event in events:
            if isinstance(event, RecordedEvent):
                add(event.seq, event.data)
            else:
                add(self.seq + 1, event)

    def refresh(self) -> int:
        """Read and feed the events appended since the last one (builders from `from_store`)."""
        if self._store is None:
            raise UsageError("refresh() needs a builder made by WindowBuilder.from_store(...)")
        n = 0
        for event in self._store.read(self.stream, self.seq + 1):
            self.feed(event)
            n += 1
        return n

    def add(self, seq: int, data: EventData) -> None:
        """Take the event at `seq` (seqs must increase)."""
        _check_fed(seq, data, self.seq)
        self.seq = seq
        counter = None if self._lazy else self.counter
        if isinstance(data, ModelInput):
            entry = _Entry(seq, "input", data, counter)
            self._new_unit("input", entry)
            self._inputs.append(seq)
            self._last_input = self._last_io = self._last_entry = entry
        elif isinstance(data, ModelOutput):
            entry = _Entry(seq, "output", data, counter)
            unit = self._new_unit("group", entry)
            self._open = unit if data.tool_calls else None
            self._open_ids = {c.id for c in data.tool_calls}
            self._answered = set()
            self._last_entry = entry
        elif isinstance(data, ToolResults):
            entry = _Entry(seq, "tool_results", data, counter)
            self._results(entry, data)
            self._last_io = self._last_entry = entry
        elif isinstance(data, SystemInstructionSet):
            entry = _Entry(seq, "system_instruction", data, counter)
            previous = self._instruction
            if self._instruction_last and previous is not None and previous.unit is not None:
                self._supersede(previous.unit)
            self._new_unit("instruction", entry)
            self._instruction = entry
            if counter is not None:
                self._system_tokens = entry.costs[0]
            self._instruction_last = True
            return
        elif isinstance(data, ToolsetDefined):
            # Counted when fed even by a one-shot window: toolsets are few and always shown.
            self._tools = data.tools
            self._tools_tokens = self.counter.count_tools(data.tools)
            return
        elif isinstance(data, WidgetUpdated):
            self._widgets[data.widget] = data.state
            self._set_screen()
            return
        elif isinstance(data, Compaction):
            self._compaction(seq, data)
            instruction = self._instruction
            if instruction is not None and min(data.first_seq, seq) <= instruction.seq:
                return  # its summary sits before the instruction: nothing shown after that yet
        else:
            return  # never shown (checkpoints, skills, custom events)
        self._instruction_last = False

    def _supersede(self, unit: _Unit) -> None:
        """Leave out an instruction that never took effect (another followed it directly).

        Every renderer shows only the later one there (OpenAI Chat replaces the message, the
        others keep the instruction in force when the conversation opens), so the window neither
        shows nor counts it; its report row says dropped.
        """
        if unit.active and unit.covered_by is None:
            self._superseded += 1
        key = (unit.slot, unit.entries[0].seq)
        i = bisect.bisect_left(self._active, key)
        if i < len(self._active) and self._active[i] == key:
            del self._active[i]
        unit.active = False
        self._sync(unit)

    def _set_screen(self) -> None:
        """The live screen: every widget's current view, in the order widgets first appeared.

        Counted when a window needs it (`_screen_count`), not on every widget update: a run of
        updates between two windows costs one count.
        """
        self._screen = tuple(self._widgets.items())
        self._screen_counted = False

    def _screen_count(self) -> int:
        if not self._screen_counted:
            screen = self._screen
            self._screen_tokens = self.counter.count_text(live_screen_text(screen)) if screen else 0
            self._screen_counted = True
        return self._screen_tokens

    def _new_unit(self, kind: str, entry: _Entry, slot: int | None = None, last: int = 0) -> _Unit:
        unit = _Unit(kind, entry.seq if slot is None else slot, entry, last)
        self._all.append(entry)
        self._units[entry.seq] = unit
        key = (unit.slot, entry.seq)
        if not self._active or key > self._active[-1]:
            self._active.append(key)
        else:
            bisect.insort(self._active, key)
        self._sync(unit)
        return unit

    def _results(self, entry: _Entry, data: ToolResults) -> None:
        group = self._open
        if group is not None:
            ids = self._open_ids
            matched = [
                r.call_id
                for r in data.results
                if r.call_id in ids and r.call_id not in self._answered
            ]
            if matched or data.execute_error:
                self._all.append(entry)
                group.add(entry)
                if not group.active:
                    _root(group).covers += 1
                self._sync(group)
                self._answered.update(matched)
                if len(self._answered) == len(ids):
                    self._open = None
                return
        self._new_unit("orphan", entry)

    def _compaction(self, seq: int, data: Compaction) -> None:
        first, last = data.first_seq, min(data.last_seq, seq - 1)
        slot = min(first, seq)
        active = self._active
        lo = bisect.bisect_left(active, (first, -1))
        hi = bisect.bisect_right(active, (last, seq))
        stay: list[tuple[int, int]] = []
        entry = _Entry(seq, "compaction", data, None if self._lazy else self.counter)
        entry.pos = 2 * slot - 1
        covering: list[_Unit] = []
        for key in active[lo:hi]:
            unit = self._units[key[1]]
            if unit.kind == "compaction" and unit.last > last:
                stay.append(key)
                continue
            covering.append(unit)
        active[lo:hi] = stay
        unit = self._new_unit("compaction", entry, slot, last)
        for old in covering:
            old.active = False
            old.covered_by = unit
            unit.covers += len(old.entries) + old.covers
            self._sync(old)
            if old.kind == "compaction":
                self._compactions.remove((old.slot, old.entries[0].seq))
        bisect.insort(self._compactions, (slot, seq))

    def _sync(self, unit: _Unit) -> None:
        want = unit.vector() if unit.active and not unit.pinned else ZERO
        have = unit.applied
        if want != have:
            self._fen.add(
                unit.slot,
                (want[0] - have[0], want[1] - have[1], want[2] - have[2], want[3] - have[3]),
            )
            unit.applied = want

    # -- selecting -------------------------------------------------------------------------

    def window(
        self,
        *,
        budget: int | Budget | None = None,
        strategy: Strategy | str | None = None,
        turns: int | None = None,
        entries: Entries | None = None,
    ) -> Window:
        """The window for the next request (arguments override the builder's for this call)."""
        tokens = budget_tokens(self.budget if budget is None else budget)
        strat = self.strategy if strategy is None else _check_strategy(strategy)
        mode = self.entries if entries is None else _check_entries(entries)
        n_turns = self.turns if turns is None else _check_turns(turns)
        pinned = self._pin()
        self._settle(pinned)
        fixed_pinned, screen, screen_tokens = self._fixed(pinned)
        fixed = self._system_tokens + self._tools_tokens + fixed_pinned + screen_tokens
        if fixed > tokens:
            raise self._too_small(fixed, tokens, fixed_pinned, screen_tokens)
        cut = self._turns_cut(n_turns) if strat == "sliding_window" else 0
        p = self._plan(strat, tokens - fixed, cut)
        kept = self._kept(p, strat, pinned)
        return self._build(kept, p, strat, mode, tokens, screen, screen_tokens, pinned)

    def _settle(self, pinned: list[_Unit]) -> None:
        """Count what every window needs before selecting (a builder has counted it when fed)."""

    def _turns_cut(self, turns: int | None) -> int:
        """The slot `sliding_window` keeps from (0: keep every turn).

        The oldest kept turn starts at the `turns`-th last input; a compaction summary whose
        range reaches that input stands in for turns that are kept, so the window starts at the
        oldest such summary instead (else the summary and the turns it covers are both lost).
        """
        n = DEFAULT_TURNS if turns is None else turns
        if len(self._inputs) < n:
            return 0
        cut = self._inputs[-n]
        if self._units[cut].active:
            return cut  # not covered: no active compaction's range contains it
        return self._reaching(cut)

    def _reaching(self, seq: int) -> int:
        """The slot of the oldest active compaction whose range starts before `seq` and reaches it.

        `seq` itself if none; walks the active compactions that start before it.
        """
        units = self._units
        for slot, key in self._compactions:
            if slot >= seq:
                break
            if units[key].last >= seq:
                return slot
        return seq

    def full_tokens(self) -> int:
        """Tokens of the window with no budget: all the model is shown of this history.

        That is `window(budget=...).report.tokens` for any budget it fits (`summary_aware`,
        compaction summaries standing in for their ranges), in O(1): calibration compares
        it with the prompt tokens a provider reported (`eventlog.projections.tokens`).
        """
        if self._lazy:
            raise UsageError("full_tokens() needs a WindowBuilder, not a one-shot window")
        fixed_pinned, _, screen_tokens = self._fixed(self._pin())
        fixed = self._system_tokens + self._tools_tokens + fixed_pinned + screen_tokens
        return fixed + self._fen.total(W_LIVE)

    def _fixed(self, pinned: list[_Unit]) -> tuple[int, tuple[tuple[str, str], ...], int]:
        """What every window holds besides the instruction and tools.

        (the pinned units' tokens, the live screen shown on the newest input or result, its
        tokens)
        """
        fixed_pinned = sum(u.costs[0] for u in pinned if u.kind != "instruction")
        screen = self._screen if self._last_io is not None else ()
        return fixed_pinned, screen, self._screen_count() if screen else 0

    def _plan(self, strat: Strategy, available: int, cut: int) -> Plan:
        """The strategy's cut, from the selection index (O(log n))."""
        costs = (
            [self._units[k].costs[2] for _, k in self._compactions]
            if strat == "summary_aware"
            else []
        )
        return plan(self._fen, strat, available, cut=cut, compactions=costs)

    def _pin(self) -> list[_Unit]:
        units: list[_Unit] = []
        for entry in (self._instruction, self._last_input, self._last_io, self._last_entry):
            if entry is not None and entry.unit is not None and entry.unit not in units:
                units.append(entry.unit)
        for old in self._pinned:
            if old not in units:
                old.pinned = False
                self._sync(old)
        for unit in units:
            unit.pinned = True
            self._sync(unit)
        self._pinned = units
        return units

    def _kept(self, p: Plan, strat: str, pinned: list[_Unit]) -> list[tuple[_Unit, Level]]:
        out: list[tuple[_Unit, Level]] = [(u, "live") for u in pinned]
        active = self._active
        units = self._units
        start = bisect.bisect_right(active, (p.drop, 1 << 62))
        level = p.level
        for slot, key in active[start:]:
            unit = units[key]
            if not unit.pinned:
                out.append((unit, level(slot)))
        if strat == "summary_aware":
            for slot, key in self._compactions[p.drop_compactions :]:
                if slot > p.drop:
                    break
                unit = units[key]
                if not unit.pinned:
                    out.append((unit, "gist"))
        return out

    def _build(
        self,
        kept: list[tuple[_Unit, Level]],
        p: Plan,
        strat: str,
        mode: Entries,
        budget: int,
        screen: tuple[tuple[str, str], ...],
        screen_tokens: int,
        pinned: list[_Unit],
    ) -> Window:
        keyed: list[tuple[int, WindowItem]] = []
        total = self._system_tokens + self._tools_tokens + screen_tokens
        reports: dict[int, EntryReport] = {}
        n_kept = n_down = 0
        for unit, level in kept:
            keyed.extend(unit.items_at(level))
            i = _LEVEL_INDEX[level]
            if unit.kind != "instruction" or not unit.pinned:
                total += unit.costs[i]
            for e in unit.entries:
                eff = e.eff[i]
                if eff == "live":
                    n_kept += 1
                else:
                    n_down += 1
                if mode == "window":
                    reports[e.seq] = _report(e, eff, self._system_tokens)
        keyed.sort(key=_first)
        items = [item for _, item in keyed]
        io = self._last_io
        if screen and io is not None:
            for i in range(len(items) - 1, -1, -1):
                if items[i].seq == io.seq:
                    it = items[i]
                    items[i] = WindowItem(
                        seq=it.seq, data=it.data, level=it.level, live_screen=screen
                    )
                    break
        # Entries a kept compaction stands in for; a covered unit shown anyway (pinned) is not.
        shown = {id(u) for u, _ in kept}
        summarised = sum(u.covers for u, _ in kept if u.kind == "compaction") - sum(
            len(u.entries) for u in pinned if not u.active and id(_root(u)) in shown
        )
        entry_rows = (
            self._all_rows(kept) if mode == "all" else tuple(reports[s] for s in sorted(reports))
        )
        info = self.counter.info
        report = WindowReport(
            tokens=total,
            budget=budget,
            counter=info.counter,
            calibration=_describe(info.calibration),
            strategy=strat,
            entries=entry_rows,
            complete=mode == "all",
            kept=n_kept,
            downgraded=n_down,
            summarised=summarised,
            dropped=len(self._all) - n_kept - n_down - summarised,
            superseded=self._superseded,
            system_tokens=self._system_tokens,
            tools_tokens=self._tools_tokens,
            live_screen_tokens=screen_tokens,
            counter_info=info,
        )
        system = self._instruction.data if self._instruction is not None else None
        return Window(
            stream=self.stream,
            seq=self.seq,
            system=system.text if isinstance(system, SystemInstructionSet) else None,
            tools=self._tools,
            items=tuple(items),
            report=report,
        )

    def _all_rows(self, kept: list[tuple[_Unit, Level]]) -> tuple[EntryReport, ...]:
        levels = {id(u): lv for u, lv in kept}
        rows: list[EntryReport] = []
        append = rows.append
        for e in self._all:
            unit = e.unit
            assert unit is not None
            level = levels.get(id(unit))
            if level is not None:
                append(_report(e, e.eff[_LEVEL_INDEX[level]], self._system_tokens))
            elif not unit.active and id(root := _root(unit)) in levels:
                by = root.entries[0].seq
                append(EntryReport(seq=e.seq, kind=e.kind, fate="summarised", summarised_by=by))
            else:  # dropped, or covered by a compaction that was dropped itself
                append(EntryReport(seq=e.seq, kind=e.kind, fate="dropped"))
        return tuple(rows)

    def _too_small(self, needed: int, budget: int, pinned: int, screen: int) -> WindowTooSmallError:
        parts = [
            f"system instruction {self._system_tokens}",
            f"tools {self._tools_tokens}",
            f"newest entries {pinned}",
        ]
        if screen:
            parts.append(f"live screen {screen}")
        return WindowTooSmallError(
            f"the newest input does not fit: {' + '.join(parts)} = {needed} tokens "
            f"(counted by {self.counter.name}) > budget {budget}; "
            f"short by {needed - budget} tokens",
            needed=needed,
            budget=budget,
        )


class _OneShot(WindowBuilder):
    """One window from scratch (`context_window`): counts only what the window needs.

    Fed events are sorted into units, compactions and pins without counting anything and
    without a selection index. `window()` then walks the active units newest first: Live
    counts until the budget is full (all `drop_oldest` and `sliding_window` need), every level
    only where `lod_then_drop` / `summary_aware` must downgrade, and the kept entries. Units a
    compaction stands in for and units older than the cut are never counted, so the cost
    follows what fits, not the history's length. The window is the one a `WindowBuilder` fed
    the same events returns (a property test checks it at every step).
    """

    _lazy = True
    _spent = False

    def window(self, **overrides: Any) -> Window:
        """The window; then the entries' links to their units are cut (the builder is done).

        Without the entry <-> unit cycles, the thousands of objects of a long history are freed
        as soon as the builder goes, rather than piling up for a cyclic garbage collection.
        """
        if self._spent:
            raise UsageError("a one-shot window builder makes one window")
        self._spent = True
        try:
            return super().window(**overrides)
        finally:
            for entry in self._all:
                entry.unit = None

    def _sync(self, unit: _Unit) -> None:
        """No selection index: `_plan` walks the units instead."""

    def _settle(self, pinned: list[_Unit]) -> None:
        counter = self.counter
        if self._instruction is not None:
            self._system_tokens = self._instruction.count(counter)[0]
        for unit in pinned:
            unit.count(counter)

    def _plan(self, strat: Strategy, available: int, cut: int) -> Plan:
        """The same cut as `plan` over the index, found by walking the units newest first."""
        counter = self.counter
        units = self._units
        order = [u for u in (units[k] for _, k in reversed(self._active)) if not u.pinned]
        if strat in ("drop_oldest", "sliding_window"):
            base = cut - 1 if strat == "sliding_window" and cut > 1 else 0
            total = 0
            for u in order:
                if u.slot <= base:
                    break
                total += u.count_live(counter)
                if total > available:
                    return Plan(drop=u.slot)
            return Plan(drop=base)
        total = 0
        for u in order:
            total += u.count_live(counter)
            if total > available:
                break
        else:
            return Plan()
        # Over budget at Live: does everything fit at Gist? (every level counted from here)
        total = 0
        for u in order:
            total += u.count(counter)[2]
            if total > available:
                return self._drop_at_gist(strat, order, available, u.slot)
        return _downgrade_cut(order, available)

    def _drop_at_gist(
        self, strat: Strategy, order: list[_Unit], available: int, overflow: int
    ) -> Plan:
        """Drop oldest first, everything kept at Gist (compaction summaries last: summary_aware).

        `overflow` is the slot where the newest-first sum at Gist passed `available`.
        """
        if strat == "lod_then_drop":
            return Plan(summary=EVERYTHING, gist=EVERYTHING, drop=overflow)
        counter = self.counter
        compactions = [self._units[k] for _, k in self._compactions]
        kept = sum(c.count(counter)[2] for c in compactions if not c.pinned)
        if kept <= available:
            room = available - kept
            total = 0
            for u in order:
                if u.kind != "compaction":
                    total += u.count(counter)[2]
                    if total > room:
                        return Plan(summary=EVERYTHING, gist=EVERYTHING, drop=u.slot)
            raise AssertionError("unreachable: all at Gist is over budget")  # pragma: no cover
        n = 0
        for c in compactions:
            if kept <= available:
                break
            kept -= c.count(counter)[2]
            n += 1
        return Plan(summary=EVERYTHING, gist=EVERYTHING, drop=EVERYTHING, drop_compactions=n)

    def _kept(self, p: Plan, strat: str, pinned: list[_Unit]) -> list[tuple[_Unit, Level]]:
        kept = super()._kept(p, strat, pinned)
        counter = self.counter
        for unit, _ in kept:
            unit.count(counter)
        return kept


def _downgrade_cut(order: list[_Unit], available: int) -> Plan:
    """The downgrade cut when everything fits at Gist but not at Live.

    `order`: the unpinned units, every level counted, newest first. Oldest first to Summary,
    then, if everything at Summary is still too much, oldest first to Gist.
    """
    live = sum(u.costs[0] for u in order)
    summary = sum(u.costs[1] for u in order)
    acc = 0
    if summary <= available:
        for u in reversed(order):
            acc += u.costs[0] - u.costs[1]
            if acc >= live - available:
                return Plan(summary=u.slot)
    else:
        for u in reversed(order):
            acc += u.costs[1] - u.costs[2]
            if acc >= summary - available:
                return Plan(summary=EVERYTHING, gist=u.slot)
    raise AssertionError("unreachable: the totals reach the target")  # pragma: no cover


def _root(unit: _Unit) -> _Unit:
    """The compaction standing in for a covered unit now (the unit itself when active).

    Every unit on the way is pointed at it, so chains of superseded compactions are walked
    once, not once per entry of every report.
    """
    root = unit
    while root.covered_by is not None:
        root = root.covered_by
    while unit.covered_by is not None and unit.covered_by is not root:
        unit.covered_by, unit = root, unit.covered_by
    return root


def _first(x: tuple[int, WindowItem]) -> int:
    return x[0]


def _report(e: _Entry, eff: Level, system_tokens: int) -> EntryReport:
    tokens = e.costs[_LEVEL_INDEX[eff]]
    if e.kind == "system_instruction" and e.unit is not None and e.unit.pinned:
        tokens = system_tokens
    return EntryReport(
        seq=e.seq,
        kind=e.kind,
        fate="kept" if eff == "live" else "downgraded",
        level=eff,
        tokens=tokens,
    )


def _describe(cal: Calibration | None) -> str | None:
    if cal is None:
        return None
    return (
        f"{cal.provider}/{cal.model}: x{cal.ratio:.4f} over {cal.samples} outputs "
        f"(spread {cal.spread:.4f}, base {cal.base})"
    )


def _check_strategy(strategy: str) -> Strategy:
    if strategy not in STRATEGIES:
        raise UsageError(
            f"unknown window strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}"
        )
    return strategy  # type: ignore[return-value]


def _check_fed(seq: object, data: object, last: int) -> None:
    """Refuse what `add` cannot take: a seq not after the last one, or no event payload."""
    if type(seq) is not int:
        raise ValidationError(f"must be an int, got {type(seq).__name__}", field="seq")
    if not isinstance(data, EventData):
        raise ValidationError(
            f"must be an EventData payload, got {type(data).__name__}", field="data"
        )
    if seq <= last:
        raise ValidationError(
            f"events must be fed in seq order: got seq {seq} after {last}", field="seq"
        )


_COUNTER_MEMBERS = ("name", "info", "count_text", "count_event", "count_tools")
"""What a `TokenCounter` has (the protocol in eventlog.projections.tokens)."""


def _check_turns(turns: object) -> int | None:
    if turns is not None and (type(turns) is not int or turns < 1):
        raise UsageError(f"turns must be an int >= 1, got {turns!r}")
    return turns


def _check_entries(entries: str) -> Entries:
    if entries not in ("all", "window"):
        raise UsageError(f"entries must be 'all' or 'window', got {entries!r}")
    return entries  # type: ignore[return-value]


def _check_at(at: object) -> None:
    if at is not None and (type(at) is not int or at < 0):
        raise ValidationError(f"must be an int >= 0, got {at!r}", field="at")


def _read(store: Store, stream: str, at: int | None) -> list[RecordedEvent]:
    _check_at(at)
    if at == 0:
        store.stream_info(stream)
        return []
    events = list(store.read(stream, 1, at))
    end = events[-1].seq if events else 0
    if at is not None and end < at:
        raise ValidationError(
            f"must be between 0 and {end} (the end of {stream!r}), got {at}", field="at"
        )
    return events


def _counter(
    counter: TokenCounter | str, history: Sequence[RecordedEvent | EventData] | None
) -> TokenCounter:
    if isinstance(counter, str):
        base = get_counter(counter)
    elif all(hasattr(counter, m) for m in _COUNTER_MEMBERS):
        base = counter
    else:
        raise UsageError(
            f"counter must be a TokenCounter or a counter name, got {type(counter).__name__}"
        )
    if history is None:
        return base
    return CalibratedCounter.from_history(base, history)


# ---------------------------------------------------------------------------------------------
# One-shot entry point and helpers


def context_window(
    source: Store | ConversationState | Iterable[RecordedEvent | EventData],
    stream: str = "",
    *,
    budget: int | Budget,
    counter: TokenCounter | str = "estimate",
    strategy: Strategy | str = "summary_aware",
    turns: int | None = None,
    at: int | None = None,
    calibrate: bool = False,
    entries: Entries = "all",
) -> Window:
    """The context window of a conversation for one request.

    `source` is a `Store` (with `stream`: read up to `at`, default its end), a
    `ConversationState` (`at` must be None; earlier instruction changes are not shown) or
    events in seq order (payloads get seqs 1, 2, ...; `at` keeps seqs <= at). `budget` is a
    token count or a `Budget`; `counter` a `TokenCounter` or a name (`estimate`,
    `o200k_base`, `cl100k_base`); `calibrate=True` scales it by the ratio the history's
    reported prompt usage showed (store and event sources). `strategy`: `drop_oldest`,
    `sliding_window` (last `turns` turns, default 10), `lod_then_drop`, `summary_aware`.
    Raises `WindowTooSmallError` when the pinned entries alone exceed the budget.

    Counts lazily (`_OneShot`): entries a compaction stands in for and units older than the cut
    are never counted. For repeated windows of one conversation keep a `WindowBuilder`.
    """
    options: dict[str, Any] = {"strategy": strategy, "turns": turns, "entries": entries}
    if isinstance(source, Store):
        if not stream:
            raise UsageError("context_window(store, stream, ...) needs a stream name")
        builder = _OneShot.from_store(
            source, stream, budget=budget, counter=counter, calibrate=calibrate, at=at, **options
        )
        return builder.window()
    if isinstance(source, ConversationState):
        if at is not None and at != source.seq:
            raise UsageError(f"a ConversationState is at seq {source.seq}; fold it to {at} first")
        if calibrate:
            raise UsageError("calibrate=True needs the events (pass a store or the events)")
        builder = _OneShot.from_state(
            source, stream=stream, budget=budget, counter=counter, **options
        )
        return builder.window()
    if isinstance(getattr(source, "sync", None), Store):  # an AsyncStore: say what to pass
        require_store(source, "context_window")
    events = list(source)
    if at is not None:
        _check_at(at)
        seqs = [seq for seq, _ in seq_and_data(events)]  # as `extend` numbers them
        end = seqs[-1] if seqs else 0
        if at > end:
            raise ValidationError(
                f"must be between 0 and {end} (the end of the events), got {at}", field="at"
            )
        events = [e for e, seq in zip(events, seqs, strict=True) if seq <= at]
    builder = _OneShot(
        budget=budget,
        counter=_counter(counter, events if calibrate else None),
        stream=stream,
        **options,
    )
    builder.extend(events)
    return builder.window()


def window_tokens(window: Window, counter: TokenCounter | str) -> int:
    """Recount a window with `counter` (or a counter's name), the way the window projection does.

    System instruction + toolset + every item at the level it is shown (the item carrying the
    current instruction counts as the system instruction, once) + the live screen.
    """
    counter = _counter(counter, None)
    total = 0
    system_counted = False
    if window.system is not None:
        total += counter.count_event(SystemInstructionSet(text=window.system))
    total += counter.count_tools(window.tools)
    last_instruction = max(
        (i for i, it in enumerate(window.items) if isinstance(it.data, SystemInstructionSet)),
        default=-1,
    )
    for i, item in enumerate(window.items):
        data = item.data
        if (
            i == last_instruction
            and isinstance(data, SystemInstructionSet)
            and data.text == window.system
            and not system_counted
        ):
            system_counted = True
            continue
        total += counter.count_event(data)
        if item.live_screen:
            total += counter.count_text(live_screen_text(item.live_screen))
    return total


__all__ = [
    "DEFAULT_TURNS",
    "STRATEGIES",
    "Budget",
    "Entries",
    "Strategy",
    "WindowBuilder",
    "budget_tokens",
    "context_window",
    "window_tokens",
]
