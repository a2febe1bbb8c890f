"""Context windows: each strategy, the too-small error, compactions, live screen, calibration,
store / state / event sources, incremental use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import eventlog as el
from eventlog.errors import UsageError, ValidationError, WindowTooSmallError
from eventlog.events import (
    Checkpoint,
    Compaction,
    Custom,
    EventData,
    Invocation,
    ModelInput,
    ModelOutput,
    Section,
    SystemInstructionSet,
    TextPart,
    ToolCall,
    ToolResult,
    ToolResults,
    ToolsetDefined,
    Usage,
    WidgetUpdated,
)
from eventlog.projections.providers.render import PROVIDERS, render
from eventlog.projections.runner import conversation_state
from eventlog.projections.tokens import CalibratedCounter, get_counter
from eventlog.projections.window import (
    Budget,
    WindowBuilder,
    budget_tokens,
    context_window,
    window_tokens,
)
from tests.window_cases import TOOLS

EST = get_counter("estimate")
WORDS = "the model reads the file and runs the tests then reports which assertion failed "


def turn(i: int, size: int = 20) -> list[EventData]:
    """Input (with Summary and Gist), output with one call, its result (with LOD variants)."""
    body = (WORDS * size).strip()
    return [
        ModelInput(sections=(Section(text=f"q{i} " + body, summary=f"q{i} short", gist=f"q{i}"),)),
        ModelOutput(
            parts=(TextPart(text=f"looking {i}"),),
            tool_calls=(ToolCall.parse(f"c{i}", "search", '{"q": 1}'),),
        ),
        ToolResults(
            results=(
                ToolResult(
                    call_id=f"c{i}",
                    tool_name="search",
                    content=f"r{i} " + body,
                    summary=f"r{i} short",
                    gist=f"r{i}",
                ),
            )
        ),
    ]


def history(turns: int = 6, size: int = 20) -> list[EventData]:
    out: list[EventData] = [SystemInstructionSet(text="Be brief."), ToolsetDefined(tools=TOOLS)]
    for i in range(turns):
        out.extend(turn(i, size))
    out.append(ModelInput.from_text("final question"))
    return out


def fates(w: el.Window | object) -> dict[int, tuple[str, str]]:
    report = w.report  # type: ignore[attr-defined]
    return {e.seq: (e.fate, e.level) for e in report.entries}


def full_cost(events: list[EventData]) -> int:
    return context_window(events, budget=10**9).report.tokens  # type: ignore[union-attr]


def test_everything_fits_everything_live() -> None:
    events = history()
    w = context_window(events, "conv", budget=10**6)
    assert w.stream == "conv" and w.seq == len(events) and w.system == "Be brief."
    assert w.tools == TOOLS
    assert [it.seq for it in w.items] == [1, *range(3, len(events) + 1)]
    assert all(it.level == "live" and it.data is events[it.seq - 1] for it in w.items)
    r = w.report
    assert r is not None
    assert (r.kept, r.downgraded, r.summarised, r.dropped) == (len(events) - 1, 0, 0, 0)
    assert r.counter == "estimate" and r.calibration is None and r.strategy == "summary_aware"
    assert r.tokens == window_tokens(w, EST) == window_tokens(w, "estimate") == full_cost(events)
    with pytest.raises(el.UsageError, match="unknown detail 'bogus'"):
        EST.count_event(events[1], "bogus")  # type: ignore[arg-type]
    with pytest.raises(el.UsageError, match="unknown token counter"):
        window_tokens(w, "o300k")
    assert r.system_tokens == EST.count_event(events[0]) and r.tools_tokens == EST.count_tools(
        TOOLS
    )


def test_drop_oldest_keeps_a_contiguous_newest_suffix_at_live() -> None:
    events = history()
    budget = full_cost(events) // 2
    w = context_window(events, budget=budget, strategy="drop_oldest")
    f = fates(w)
    dropped = sorted(s for s, (fate, _) in f.items() if fate == "dropped")
    kept = sorted(s for s, (fate, _) in f.items() if fate == "kept" and s > 1)
    assert dropped and kept and max(dropped) < min(kept)
    assert all(level == "live" for _, level in f.values())
    assert w.report is not None and w.report.tokens <= budget


def test_sliding_window_keeps_the_last_n_turns() -> None:
    events = history()
    w = context_window(events, budget=10**6, strategy="sliding_window", turns=2)
    inputs = [it.seq for it in w.items if isinstance(it.data, ModelInput)]
    assert inputs == [len(events) - 3, len(events)]  # turn 5 and the final question
    assert [it.seq for it in w.items] == [1, *range(len(events) - 3, len(events) + 1)]
    with pytest.raises(UsageError, match="turns must be an int >= 1"):
        context_window(events, budget=10**6, strategy="sliding_window", turns=0)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"budget": Budget(context_window=100, reserve=-50)}, UsageError, "reserve"),
        ({"budget": Budget(context_window=-1)}, UsageError, "context_window"),
        ({"budget": Budget(max_tokens=1.5)}, UsageError, "max_tokens"),
        ({"budget": Budget(context_window=100, reserve=None)}, UsageError, "reserve"),  # type: ignore[arg-type]
        ({"counter": object()}, UsageError, "counter must be"),
        ({"turns": "3", "strategy": "sliding_window"}, UsageError, "turns"),
        ({"turns": True}, UsageError, "turns"),
        ({"counter": None}, UsageError, "counter must be"),
        ({"at": -1}, ValidationError, "at"),
        ({"at": "2"}, ValidationError, "at"),
        ({"at": 99}, ValidationError, "between 0 and"),
    ],
)
def test_bad_options_are_refused_with_a_clear_error(
    kwargs: dict[str, object], error: type[Exception], match: str
) -> None:
    options: dict[str, object] = {"budget": 10**6, **kwargs}
    with pytest.raises(error, match=match):
        context_window(history(1), **options)  # type: ignore[arg-type]


def test_items_that_are_not_events_are_refused() -> None:
    with pytest.raises(ValidationError, match="must be an EventData payload, got dict"):
        context_window([{"type": "model_input"}], budget=1000)  # type: ignore[list-item]
    builder = WindowBuilder(budget=1000)
    with pytest.raises(ValidationError, match="must be an int"):
        builder.add("1", ModelInput.from_text("hi"))  # type: ignore[arg-type]


def test_lod_downgrades_oldest_first_before_dropping() -> None:
    events = history()
    total = full_cost(events)
    w = context_window(events, budget=total - 50, strategy="lod_then_drop")
    f = fates(w)
    assert f[3] == ("downgraded", "summary")  # oldest input first
    assert f[len(events)] == ("kept", "live")  # newest stays live
    assert not any(fate == "dropped" for fate, _ in f.values())
    down = next(it for it in w.items if it.seq == 3)
    assert isinstance(down.data, ModelInput) and down.data.text == "q0 short"
    # Tighter: everything older at Gist, still nothing dropped.
    gist_total = (
        sum(EST.count_event(e, "gist") for e in events[2:-1])
        + EST.count_event(events[0])
        + EST.count_tools(TOOLS)
        + EST.count_event(events[-1])
    )
    w = context_window(events, budget=gist_total, strategy="lod_then_drop")
    levels = {lv for s, (fate, lv) in fates(w).items() if 3 <= s < len(events) and fate != "kept"}
    assert levels == {"gist"} and w.report is not None and w.report.dropped == 0
    # Tighter still: drops start, oldest first, only once everything is at Gist.
    w = context_window(events, budget=gist_total - 30, strategy="lod_then_drop")
    f = fates(w)
    assert f[3][0] == "dropped" and f[4][0] == "dropped" and f[5][0] == "dropped"
    assert all(lv == "gist" for s, (fate, lv) in f.items() if fate == "downgraded")


def test_each_section_keeps_its_text_when_its_variant_is_longer() -> None:
    big = WORDS * 20
    wordy = "a much longer summary of the word ok " * 10
    inp = ModelInput(
        sections=(Section(text=big, summary="short A"), Section(text="ok", summary=wordy))
    )
    events: list[EventData] = [inp, ModelOutput(parts=(TextPart(text="a"),))]
    events.append(ModelInput.from_text("next"))
    summary_cost = EST.count_event(inp, "summary")
    assert summary_cost < 20  # 'short A' and 'ok': the wordy summary is not counted
    w = context_window(events, budget=summary_cost + 30, strategy="lod_then_drop")
    first = w.items[0]
    assert first.level == "summary" and isinstance(first.data, ModelInput)
    assert [sec.text for sec in first.data.sections] == ["short A", "ok"]
    assert w.report is not None and w.report.tokens == window_tokens(w, EST)


def test_a_level_that_changes_no_text_is_not_a_downgrade() -> None:
    """An input whose only summary is longer than its text stays Live (docs/windows.md)."""
    wordy = ModelInput(sections=(Section(text="ok", summary="a much longer summary of ok " * 5),))
    long = ModelInput(sections=(Section(text="long text " * 60, summary="short"),))
    events: list[EventData] = [wordy, ModelOutput(parts=(TextPart(text="a"),)), long]
    events += [ModelOutput(parts=(TextPart(text="b"),)), ModelInput.from_text("final")]
    full = context_window(events, budget=10**6).report
    assert full is not None
    w = context_window(events, budget=full.tokens - 20, strategy="lod_then_drop")
    assert fates(w)[1] == ("kept", "live") and fates(w)[3] == ("downgraded", "summary")


def test_summary_aware_drops_compaction_summaries_last() -> None:
    events = history()
    events.insert(-1, Compaction(first_seq=3, last_seq=8, summary="turns 0 and 1 happened"))
    n = len(events)
    comp_seq = n - 1
    # The tightest budgets where lod_then_drop drops the (oldest-placed) summary...
    budgets = [
        b
        for b in range(150, 400, 5)
        if fates(context_window(events, budget=b, strategy="lod_then_drop"))[comp_seq][0]
        == "dropped"
    ]
    assert budgets
    for b in budgets:
        # ... summary_aware keeps it and drops newer entries instead.
        aware = context_window(events, budget=b, strategy="summary_aware")
        assert fates(aware)[comp_seq][0] == "kept"
        assert fates(aware)[9][0] == "dropped"
    # The compaction stands in for its range, placed where the range starts.
    w = context_window(events, budget=10**6)
    assert [it.seq for it in w.items][:2] == [1, comp_seq]
    assert all(fates(w)[s] == ("summarised", "live") for s in range(3, 9))
    assert w.report is not None
    assert {e.summarised_by for e in w.report.entries if e.fate == "summarised"} == {comp_seq}


def test_nested_compactions_supersede() -> None:
    events = history()
    events.insert(9, Compaction(first_seq=3, last_seq=5, summary="turn 0"))  # seq 10
    events.insert(-1, Compaction(first_seq=3, last_seq=12, summary="turns 0-2"))
    w = context_window(events, budget=10**6)
    comps = [it for it in w.items if isinstance(it.data, Compaction)]
    assert [c.data.summary for c in comps] == ["turns 0-2"]  # type: ignore[union-attr]
    f = w.report.entries  # type: ignore[union-attr]
    assert {e.summarised_by for e in f if e.fate == "summarised"} == {len(events) - 1}


def test_too_small_says_by_how_much() -> None:
    events = history()
    need = EST.count_event(events[0]) + EST.count_tools(TOOLS) + EST.count_event(events[-1])
    context_window(events, budget=need)
    with pytest.raises(WindowTooSmallError) as info:
        context_window(events, budget=need - 7)
    err = info.value
    assert (err.needed, err.budget, err.shortfall) == (need, need - 7, 7)
    assert "short by 7 tokens" in str(err) and "newest input does not fit" in str(err)
    assert isinstance(err, el.EventlogError)


def test_budget_forms() -> None:
    assert budget_tokens(Budget(context_window=1000, reserve=200)) == 800
    assert budget_tokens(Budget(context_window=1000, reserve=200, max_tokens=500)) == 500
    assert budget_tokens(300) == 300
    with pytest.raises(UsageError):
        budget_tokens(-1)
    with pytest.raises(UsageError):
        Budget().tokens  # noqa: B018
    with pytest.raises(UsageError, match="unknown window strategy"):
        context_window(history(), budget=100, strategy="newest")


def test_live_screen_only_on_the_newest_input_or_result() -> None:
    events = history(2)
    events.insert(3, WidgetUpdated(widget="notes", state="- a"))
    events.append(WidgetUpdated(widget="notes", state="- a\n- b"))
    events.append(WidgetUpdated(widget="clock", state="12:00"))
    w = context_window(events, budget=10**6)
    screens = [(it.seq, it.live_screen) for it in w.items if it.live_screen]
    assert screens == [(len(events) - 2, (("notes", "- a\n- b"), ("clock", "12:00")))]
    assert w.report is not None and w.report.live_screen_tokens > 0
    assert w.report.tokens == window_tokens(w, EST)
    # After a tool result, the screen moves to it.
    events += turn(9)[:3]
    w = context_window(events, budget=10**6)
    assert [it.seq for it in w.items if it.live_screen] == [len(events)]


def test_instruction_changes_stay_at_their_place() -> None:
    events = history(2)
    events.insert(5, SystemInstructionSet(text="Answer in French."))
    w = context_window(events, budget=10**6)
    instr = [(it.seq, it.data.text) for it in w.items if isinstance(it.data, SystemInstructionSet)]
    assert instr == [(1, "Be brief."), (6, "Answer in French.")]
    assert w.system == "Answer in French."
    assert w.report is not None and w.report.tokens == window_tokens(w, EST)


def test_an_instruction_followed_directly_by_another_is_left_out() -> None:
    events = history(2)
    long = SystemInstructionSet(text="Never shown. " * 40)
    events[0:0] = [long, Checkpoint(label="start")]  # a checkpoint is not shown: still direct
    events.insert(7, SystemInstructionSet(text="Also never in force. " * 10))
    events.insert(8, SystemInstructionSet(text="Answer in French."))
    w = context_window(events, budget=10**6)
    assert w.report is not None
    instr = [(it.seq, it.data.text) for it in w.items if isinstance(it.data, SystemInstructionSet)]
    assert instr == [(3, "Be brief."), (9, "Answer in French.")]
    fates = {e.seq: e.fate for e in w.report.entries}
    assert fates[1] == fates[8] == "dropped" and fates[3] == fates[9] == "kept"
    assert w.report.tokens == window_tokens(w, EST)
    for provider in PROVIDERS:
        assert "never" not in json.dumps(render(w, provider, model="m")).lower()


def test_a_compaction_between_two_instructions_separates_them_only_if_shown_there() -> None:
    """A compaction's summary sits where its range starts (review of compaction, finding 2)."""
    events = history(2)  # seqs 1..5: instruction, input, output, input, output
    n = len(events)
    draft = SystemInstructionSet(text="Draft, never in force.")
    final = SystemInstructionSet(text="Answer in French.")
    before = Compaction(first_seq=2, last_seq=3, summary="earlier")  # sits at 2: before the draft
    after = Compaction(first_seq=n + 2, last_seq=n + 2, summary="the note")  # sits after it
    note = Custom(kind="note", data=1)
    for compaction, draft_fate in ((before, "dropped"), (after, "kept")):
        w = context_window([*events, draft, note, compaction, final], budget=10**6)
        assert w.report is not None
        fates = {e.seq: e.fate for e in w.report.entries}
        assert fates[n + 1] == draft_fate, compaction
        assert w.report.tokens == window_tokens(w, EST)
        builder = WindowBuilder(budget=10**6)  # the incremental form agrees
        builder.extend([*events, draft, note, compaction, final])
        assert builder.window() == w


def test_calibration_is_used_and_reported() -> None:
    inv = Invocation(provider="openai", specification="chat.completions", model="gpt-x")
    events: list[EventData] = [SystemInstructionSet(text="Be brief.")]
    counted = 0
    for i in range(6):
        events.append(ModelInput.from_text(f"question {i} " + WORDS * 5))
        counted = sum(EST.count_event(e) for e in events)
        events.append(
            ModelOutput(
                parts=(TextPart(text=f"answer {i}"),),
                invocation=inv,
                usage=Usage(prompt_tokens=round(counted * 1.2)),
            )
        )
    events.append(ModelInput.from_text("last"))
    plain = context_window(events, budget=10**6)
    cal = context_window(events, budget=10**6, calibrate=True)
    assert cal.report is not None and plain.report is not None
    assert cal.report.counter == "estimate+calibrated"
    assert cal.report.calibration is not None and "openai/gpt-x: x1.2" in cal.report.calibration
    assert cal.report.counter_info is not None
    assert cal.report.counter_info.calibration is not None
    assert cal.report.counter_info.calibration.samples == 6
    assert abs(cal.report.tokens / plain.report.tokens - 1.2) < 0.02
    counter = CalibratedCounter.from_history(EST, events)
    assert window_tokens(cal, counter) == cal.report.tokens


def test_a_store_builder_keeps_the_calibration_it_started_with() -> None:
    """Documented: `refresh()` keeps the ratio learnt by `from_store`; a new builder relearns."""
    inv = Invocation(provider="openai", specification="chat.completions", model="gpt-x")
    store = el.open("memory://")

    def turn(text: str, reported: int) -> list[EventData]:
        out = ModelOutput(
            parts=(TextPart(text="ok"),), invocation=inv, usage=Usage(prompt_tokens=reported)
        )
        return [ModelInput.from_text(text), out]

    store.append("c", [SystemInstructionSet(text="Be brief."), *turn(WORDS * 3, 100)])
    builder = WindowBuilder.from_store(store, "c", budget=10**6, calibrate=True)
    first = builder.window().report
    store.append("c", turn(WORDS * 5, 5_000))
    assert builder.refresh() == 2
    kept, fresh = (
        builder.window().report,
        context_window(store, "c", budget=10**6, calibrate=True).report,
    )
    assert first is not None and kept is not None and fresh is not None
    assert kept.calibration == first.calibration != fresh.calibration
    again = WindowBuilder.from_store(store, "c", budget=10**6, calibrate=True).window()
    assert again == context_window(store, "c", budget=10**6, calibrate=True)


def test_a_state_window_shows_widgets_in_the_order_they_first_appeared(tmp_path: Path) -> None:
    """The live screen lists widgets in first-update order, however the window was built."""
    events = [
        WidgetUpdated(widget="notes", state="- a"),
        WidgetUpdated(widget="clock", state="12:00"),
        WidgetUpdated(widget="notes", state="- a\n- b"),
        ModelInput.from_text("hi"),
    ]
    with el.open(f"sqlite:///{tmp_path / 'w.db'}") as store:
        store.append("conv", events)
        from_state = context_window(conversation_state(store, "conv"), "conv", budget=10**6)
    from_events = context_window(events, "conv", budget=10**6)
    assert from_events.items[-1].live_screen == (("notes", "- a\n- b"), ("clock", "12:00"))
    assert from_state == from_events


def test_exact_counter_by_name() -> None:
    w = context_window(history(2), budget=10**6, counter="o200k_base")
    assert w.report is not None and w.report.counter == "o200k_base"
    assert w.report.tokens == window_tokens(w, get_counter("o200k_base"))


def test_store_state_and_events_agree(tmp_path: Path) -> None:
    events = history(4)
    with el.open(f"sqlite:///{tmp_path / 'w.db'}") as store:
        store.append("conv", events)
        from_store = context_window(store, "conv", budget=1500)
        from_events = context_window(events, "conv", budget=1500)
        state = conversation_state(store, "conv")
        from_state = context_window(state, "conv", budget=1500)
        assert from_store == from_events == from_state
        at = context_window(store, "conv", budget=10**6, at=8)
        assert at.seq == 8 and at == context_window(events[:8], "conv", budget=10**6)
        with pytest.raises(ValidationError, match="at"):
            context_window(store, "conv", budget=100, at=99)
        with pytest.raises(el.StreamNotFoundError):
            context_window(store, "nope", budget=100)
        # A builder opened on the store follows it.
        b = WindowBuilder.from_store(store, "conv", budget=1500, entries="window")
        store.append("conv", turn(7))
        assert b.refresh() == 3
        assert b.window(entries="all") == context_window(store, "conv", budget=1500)


def test_incremental_reuses_items_and_window_mode_reports() -> None:
    events = history(30)
    b = WindowBuilder(budget=2000, entries="window")
    b.extend(events)
    first = b.window()
    for e in turn(31):
        b.feed(e)
    second = b.window()
    shared = {id(it) for it in first.items} & {id(it) for it in second.items}
    assert shared  # unchanged items are the same objects
    r = second.report
    assert r is not None and not r.complete
    assert len(r.entries) == len(second.items)
    assert r.kept + r.downgraded + r.summarised + r.dropped == len(events) + 2
    full = b.window(entries="all")
    assert full.items == second.items and full.report is not None and full.report.complete
    assert (full.report.kept, full.report.dropped) == (r.kept, r.dropped)


def test_feeding_out_of_order_is_refused() -> None:
    b = WindowBuilder(budget=100)
    b.add(3, ModelInput.from_text("x"))
    with pytest.raises(ValidationError, match="seq order"):
        b.add(2, ModelInput.from_text("y"))
    with pytest.raises(UsageError, match="from_store"):
        b.refresh()


def test_gist_longer_than_summary_costs_no_more_than_the_summary() -> None:
    """Found by hypothesis: a Gist longer than the Summary made the report overcount."""
    from eventlog.projections.tokens import get_counter
    from eventlog.projections.window import context_window, window_tokens

    events = [
        el.SystemInstructionSet(text="the"),
        el.ToolsetDefined(tools=(el.ToolSpec(name="search", description="Search the web."),)),
        el.ModelInput(sections=(el.Section(text="the the", summary="th", gist="the t"),)),
        el.SystemInstructionSet(text="the"),
        el.ModelInput.from_text("the"),
    ]
    for budget in range(40, 80):
        try:
            w = context_window(events, budget=budget, strategy="lod_then_drop")
        except el.EventlogError:
            continue
        assert w.report is not None
        assert w.report.tokens == window_tokens(w, get_counter("estimate")) <= budget
        for item in w.items:
            if item.seq == 3 and item.level != "live":
                assert item.data.sections[0].text == "th"  # type: ignore[union-attr]
