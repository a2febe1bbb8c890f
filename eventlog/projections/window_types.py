"""What a context window is: the boundary between window selection and provider rendering.

The window projection chooses what the model sees and hands renderers a `Window`: the current
system instruction and toolset, then the kept items in stream order, each already at its chosen
Level of Detail (a downgraded input or tool result carries its Summary or Gist text in place of
the Live text), with compaction summaries standing in for the ranges they cover. Renderers are
pure functions of a `Window`; they never see what was dropped.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from eventlog.events import (
    Compaction,
    ModelInput,
    ModelOutput,
    SystemInstructionSet,
    ToolResults,
    ToolSpec,
)
from eventlog.projections.tokens import CounterInfo

Level = Literal["live", "summary", "gist"]
Fate = Literal["kept", "downgraded", "summarised", "dropped"]
ItemData = ModelInput | ModelOutput | ToolResults | Compaction | SystemInstructionSet


class WindowItem(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One kept item of the window, in stream order."""

    seq: int
    """Seq of the event it comes from."""
    data: ItemData
    """The event payload, with downgraded text already substituted."""
    level: Level = "live"
    live_screen: tuple[tuple[str, str], ...] = ()
    """(widget, current view) sections shown after this item's content; only on the newest
    input or tool result."""


class EntryReport(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What happened to one entry of the history."""

    seq: int
    kind: str
    fate: Fate
    level: Level = "live"
    tokens: int = 0
    """Tokens it counts for in the window (0 when dropped or summarised)."""
    summarised_by: int | None = None
    """Seq of the compaction that stands in for it."""


class WindowReport(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Tokens used against the budget, the fate of each entry, and how tokens were counted."""

    tokens: int
    budget: int
    counter: str
    """Name of the token counter."""
    calibration: str | None = None
    """Which calibration scaled the counts (provider/model, ratio, samples), if any."""
    strategy: str = "summary_aware"
    entries: tuple[EntryReport, ...] = ()
    complete: bool = True
    """Whether `entries` lists every entry of the history (else only those in the window; the
    counts below still cover the whole history)."""
    kept: int = 0
    """Entries shown at their Live level."""
    downgraded: int = 0
    """Entries shown at a Summary or Gist level."""
    summarised: int = 0
    """Entries a compaction summary stands in for."""
    dropped: int = 0
    """Entries left out."""
    superseded: int = 0
    """Instructions left out because another followed before they took effect (counted in
    `dropped` too): dropped whatever the budget, so no sign the history outgrew it."""
    system_tokens: int = 0
    """Tokens of the current system instruction (included in `tokens`)."""
    tools_tokens: int = 0
    """Tokens of the toolset's definitions (included in `tokens`)."""
    live_screen_tokens: int = 0
    """Tokens of the live-screen section (included in `tokens`)."""
    counter_info: CounterInfo | None = None
    """The counter and calibration used, as a struct."""


class Window(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """The context a model sees for one request."""

    stream: str
    seq: int
    """The history's last seq this window was built at."""
    system: str | None
    """The current system instruction (the latest one at `seq`)."""
    tools: tuple[ToolSpec, ...] = ()
    """The current toolset."""
    items: tuple[WindowItem, ...] = ()
    report: WindowReport | None = None
