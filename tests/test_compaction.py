"""Compaction: planning the range, rolling summaries, the default summarizer, races, bad input."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import eventlog as el
from eventlog.errors import StreamNotFoundError, UsageError, ValidationError
from eventlog.projections.compaction import (
    CompactionPolicy,
    ExtractiveSummarizer,
    SummaryRequest,
    _Range,
    compact,
    compact_async,
    plan_compaction,
    shown_ranges,
    summarizer_name,
)
from eventlog.projections.tokens import get_counter
from eventlog.projections.window import context_window
from tests.conversations import conversations

COUNTER = get_counter("estimate")
HUGE = 10**9


def _turns(store: el.Store, stream: str, n: int, *, words: int = 30) -> None:
    for i in range(n):
        store.append(
            stream,
            [
                el.ModelInput.from_text(f"question {i} " + "word " * words),
                el.ModelOutput(parts=(el.TextPart(text=f"answer {i} " + "blah " * words),)),
            ],
        )


class Recording:
    """A summarizer that keeps every request it was given."""

    name = "recording"

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def __call__(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        return f"summary of {request.first_seq}-{request.last_seq}"


@pytest.fixture
def store() -> Any:
    with el.open("memory://") as s:
        yield s


# -- the range ---------------------------------------------------------------------------------


def test_keeps_the_newest_messages_and_summarizes_the_rest(store: el.Store) -> None:
    store.append("c", [el.SystemInstructionSet(text="Be brief.")])
    _turns(store, "c", 6)  # seqs 2..13: inputs at even seqs
    rec = Recording()
    result = compact(store, "c", rec, policy=CompactionPolicy(keep_last=4))
    assert result.compacted and result.plan is not None and result.event is not None
    # the 4 newest messages are seqs 10..13; everything before is summarized
    assert (result.plan.first_seq, result.plan.last_seq) == (1, 9)
    assert [e.seq for e in rec.requests[0].events] == list(range(1, 10))
    data = result.event.data
    assert isinstance(data, el.Compaction)
    assert (data.first_seq, data.last_seq, data.summarizer) == (1, 9, "recording")
    assert result.event.seq == 14
    window = context_window(store, "c", budget=HUGE)
    assert window.report is not None
    fates = {e.seq: (e.fate, e.summarised_by) for e in window.report.entries}
    assert all(fates[s] == ("summarised", 14) for s in range(2, 10))
    assert all(fates[s][0] == "kept" for s in range(10, 14))
    assert [i.seq for i in window.items][:1] == [14]  # the summary sits where its range starts


def test_too_few_messages_means_nothing_to_compact(store: el.Store) -> None:
    _turns(store, "c", 2)
    result = compact(store, "c", policy=CompactionPolicy(keep_last=4))
    assert result.outcome == "nothing_to_compact" and not result.compacted
    assert len(list(store.read("c"))) == 4


def test_keep_last_zero_compacts_everything(store: el.Store) -> None:
    _turns(store, "c", 2)
    rec = Recording()
    result = compact(store, "c", rec, policy=CompactionPolicy(keep_last=0))
    assert result.plan is not None and (result.plan.first_seq, result.plan.last_seq) == (1, 4)


def test_an_output_and_its_results_stay_together(store: el.Store) -> None:
    call = el.ToolCall.parse("call_1", "search", '{"q": "x"}')
    store.append(
        "c",
        [
            el.ModelInput.from_text("find x"),  # 1
            el.ModelOutput(tool_calls=(call,)),  # 2
            el.ModelInput.from_text("hurry up"),  # 3: the user speaks before the result
            el.ToolResults(  # 4: still answers the call at seq 2
                results=(el.ToolResult(call_id="call_1", tool_name="search", content="x!"),)
            ),
            el.ModelOutput(parts=(el.TextPart(text="found x"),)),  # 5
        ],
    )
    # keep_last=2 would cut at seq 3, between the call and its result: the cut moves to 2
    plan = plan_compaction(list(store.read("c")), keep_last=2)
    assert plan is not None and (plan.first_seq, plan.last_seq) == (1, 1)


def test_never_cuts_through_an_earlier_compaction(store: el.Store) -> None:
    _turns(store, "c", 5)  # seqs 1..10
    store.append("c", [el.Compaction(first_seq=1, last_seq=8, summary="old")])  # 11
    _turns(store, "c", 1)  # 12, 13
    events = list(store.read("c"))
    # keep_last=6 cuts at seq 7: without the compaction, 1..6 would be compacted
    unsummarized = [e for e in events if not isinstance(e.data, el.Compaction)]
    plan = plan_compaction(unsummarized, keep_last=6, stream="c")
    assert plan is not None and plan.last_seq == 6
    # with it, the cut at 7 falls inside its range, which already covers everything before 7
    assert plan_compaction(events, keep_last=6) is None
    # one message more kept out of the earlier range: 9 is summarized, with the old summary
    plan = plan_compaction(events, keep_last=3)
    assert plan is not None and (plan.first_seq, plan.last_seq) == (1, 9)
    assert [e.seq for e in plan.events] == [9]
    assert [e.seq for e in plan.previous] == [11]


def test_rolling_compactions_summarize_each_event_once(store: el.Store) -> None:
    _turns(store, "c", 6)  # 1..12
    rec = Recording()
    policy = CompactionPolicy(keep_last=2)
    first = compact(store, "c", rec, policy=policy)
    assert first.event is not None and first.event.seq == 13
    assert compact(store, "c", rec, policy=policy).outcome == "nothing_to_compact"
    _turns(store, "c", 2)  # 14..17
    second = compact(store, "c", rec, policy=policy)
    assert second.plan is not None and second.event is not None
    request = rec.requests[-1]
    # the earlier summary stands in for 1..10; only what it does not cover is passed raw
    assert [c.summary for c in request.previous] == ["summary of 1-10"]
    assert [e.seq for e in request.events] == [11, 12, 14, 15]
    assert (request.first_seq, request.last_seq) == (1, 15)
    assert [e.seq for e in second.plan.previous] == [13]
    seen = [e.seq for r in rec.requests for e in r.events]
    assert len(seen) == len(set(seen))
    window = context_window(store, "c", budget=HUGE)
    assert [type(i.data).__name__ for i in window.items] == [
        "Compaction",
        "ModelInput",
        "ModelOutput",
    ]
    assert window.items[0].seq == second.event.seq


def test_the_summary_is_asked_to_be_at_most_half_of_what_it_replaces(store: el.Store) -> None:
    _turns(store, "c", 6, words=100)
    rec = Recording()
    result = compact(
        store, "c", rec, policy=CompactionPolicy(keep_last=2, max_summary_tokens=10**6)
    )
    assert result.replaced_tokens > 0
    assert rec.requests[0].max_tokens == result.replaced_tokens // 2
    small = CompactionPolicy(keep_last=2, max_summary_tokens=50)
    _turns(store, "c", 6, words=100)
    compact(store, "c", rec, policy=small)
    assert rec.requests[-1].max_tokens == 50


def test_a_fork_compacts_its_own_view(store: el.Store) -> None:
    _turns(store, "p", 4)  # 1..8
    store.fork("p", "f", 6)
    _turns(store, "f", 2)  # 7..10 in f
    rec = Recording()
    result = compact(store, "f", rec, policy=CompactionPolicy(keep_last=2))
    assert result.plan is not None and result.plan.last_seq == 8
    assert [e.seq for e in rec.requests[0].events] == list(range(1, 9))
    assert [e.data.__class__.__name__ for e in store.read("p")][-1] == "ModelOutput"  # p as was


# -- property: every raw event is summarized once, and windows agree with the plan ----------------


def _window_fates(events: list[el.RecordedEvent]) -> dict[int, tuple[str, str, int | None]]:
    window = context_window(events, "s", budget=HUGE, strategy="drop_oldest")
    assert window.report is not None
    return {e.seq: (e.kind, e.fate, e.summarised_by) for e in window.report.entries}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations, st.lists(st.tuples(st.integers(2, 6), st.integers(0, 3)), max_size=4))
def test_property_each_event_is_summarized_from_its_text_once(
    history: list[el.EventData], rounds: list[tuple[int, int]]
) -> None:
    with el.open("memory://") as store:
        store.append("s", history)
        summarized: list[int] = []

        def short(request: SummaryRequest) -> str:
            return "s"

        for keep_last, more in rounds:
            # a fresh exchange at the end: the pinned entries are newer than any cut
            _turns(store, "s", max(1, more), words=3)
            events = list(store.read("s"))
            plan = plan_compaction(events, keep_last=keep_last, stream="s")
            before = _window_fates(events)
            result = compact(store, "s", short, policy=CompactionPolicy(keep_last=keep_last))
            event(result.outcome)
            if plan is None:
                assert result.outcome == "nothing_to_compact"
                continue
            if result.outcome == "not_shorter":  # nothing appended: it may be tried again later
                assert result.replaced_tokens <= result.summary_tokens
                assert list(store.read("s")) == events
                continue
            assert result.plan == plan and result.event is not None
            summarized.extend(e.seq for e in plan.events)
            cut = plan.last_seq + 1
            raw = {e.seq for e in plan.events}
            current = max(
                (e.seq for e in events if isinstance(e.data, el.SystemInstructionSet)), default=0
            )
            for seq, (kind, fate, _) in before.items():
                if seq >= cut or kind == "compaction" or seq == current or fate == "dropped":
                    continue  # (dropped: an instruction that never took effect, never shown)
                # passed raw exactly when no earlier compaction stood in for it
                assert (seq in raw) == (fate != "summarised"), (seq, kind, fate)
            after = _window_fates(list(store.read("s")))
            new = result.event.seq
            superseded = {  # every earlier compaction inside the range, directly or not
                e.seq
                for e in events
                if isinstance(e.data, el.Compaction) and min(e.data.last_seq, e.seq - 1) < cut
            }
            assert {e.seq for e in plan.previous} <= superseded
            for seq, (kind, fate, by) in after.items():
                if seq in (current, new) or fate == "dropped":
                    continue
                if seq < cut or seq in superseded:
                    assert (fate, by) == ("summarised", new), (seq, kind, fate, by)
                elif seq < new:
                    assert by != new, (seq, kind, fate, by)
            again = compact(store, "s", short, policy=CompactionPolicy(keep_last=keep_last))
            assert again.outcome == "nothing_to_compact"
        assert len(summarized) == len(set(summarized))


# -- the default summarizer --------------------------------------------------------------------


def _request(store: el.Store, max_tokens: int) -> SummaryRequest:
    plan = plan_compaction(list(store.read("c")), keep_last=2)
    assert plan is not None
    return plan.request(max_tokens)


def test_extractive_summary_fits_and_is_deterministic(store: el.Store) -> None:
    call = el.ToolCall.parse("call_1", "read_file", '{"path": "a.py"}')
    store.append(
        "c",
        [
            el.ModelInput.from_text("请帮我看看这个文件有什么问题 " * 20),
            el.ModelOutput(parts=(el.TextPart(text="Let me look."),), tool_calls=(call,)),
            el.ToolResults(
                results=(
                    el.ToolResult(call_id="call_1", tool_name="read_file", content="x = 1\n" * 300),
                )
            ),
        ],
    )
    _turns(store, "c", 3)
    summarizer = ExtractiveSummarizer()
    for limit in (40, 120, 400, 5000):
        request = _request(store, limit)
        text = summarizer(request)
        assert COUNTER.count_text(text) <= limit
        assert text == summarizer(request)
        assert text.startswith(f"Summary of seqs 1-{request.last_seq}")
    roomy = summarizer(_request(store, 5000))
    assert "User: 请帮我看看" in roomy
    assert 'Assistant called read_file: {"path": "a.py"}' in roomy
    assert "Tool read_file (success): x = 1" in roomy
    tight = summarizer(_request(store, 40))
    assert "earlier lines left out" in tight


def test_extractive_summary_carries_the_earlier_summary(store: el.Store) -> None:
    _turns(store, "c", 4)
    policy = CompactionPolicy(keep_last=2)
    compact(store, "c", policy=policy)
    earlier = store.read_last("c", 1)[0].data
    assert isinstance(earlier, el.Compaction)
    _turns(store, "c", 2)
    result = compact(store, "c", policy=policy)
    assert result.event is not None
    data = result.event.data
    assert isinstance(data, el.Compaction) and data.summarizer == "extractive-v1"
    # the earlier summary's lines come first, in order (clipped to the new width)
    carried = data.summary.splitlines()[1:4]
    assert [line[:12] for line in carried] == [
        line[:12] for line in earlier.summary.splitlines()[1:4]
    ]
    assert data.summary.count("Summary of seqs") == 1


def test_transcript_lists_earlier_summaries_and_messages(store: el.Store) -> None:
    _turns(store, "c", 3)
    compact(store, "c", Recording(), policy=CompactionPolicy(keep_last=2))
    _turns(store, "c", 2)
    plan = plan_compaction(list(store.read("c")), keep_last=2)
    assert plan is not None
    lines = plan.request(100).transcript().splitlines()
    assert lines[0] == "Earlier summary (seqs 1-4): summary of 1-4"
    assert lines[1].startswith("User: question 2")


def test_summarizer_names() -> None:
    def my_summary(request: SummaryRequest) -> str:
        return "x"

    assert summarizer_name(my_summary) == "my_summary"
    assert summarizer_name(Recording()) == "recording"
    assert summarizer_name(lambda r: "x") == "<lambda>"


# -- bad input: nothing written ----------------------------------------------------------------


@pytest.mark.parametrize("summary", ["", "  \n", None, 42])
def test_a_summarizer_returning_no_text_writes_nothing(store: el.Store, summary: Any) -> None:
    _turns(store, "c", 4)
    with pytest.raises(ValidationError, match="non-empty text"):
        compact(store, "c", lambda r: summary, policy=CompactionPolicy(keep_last=2))
    assert len(list(store.read("c"))) == 8


def test_an_async_summarizer_needs_compact_async(store: el.Store) -> None:
    _turns(store, "c", 4)

    async def summarize(request: SummaryRequest) -> str:
        return "x"

    with pytest.raises(UsageError, match="compact_async"):
        compact(store, "c", summarize, policy=CompactionPolicy(keep_last=2))
    assert len(list(store.read("c"))) == 8


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"trigger": 0}, "trigger"),
        ({"trigger": 1.5}, "trigger"),
        ({"keep_last": -1}, "keep_last"),
        ({"max_summary_tokens": 0}, "max_summary_tokens"),
    ],
)
def test_bad_policies_are_refused(options: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        CompactionPolicy(**options)


def test_other_bad_calls(store: el.Store) -> None:
    with pytest.raises(StreamNotFoundError):
        compact(store, "missing")
    _turns(store, "c", 3)
    with pytest.raises(UsageError, match="callable"):
        compact(store, "c", "not a summarizer")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="keep_last"):
        plan_compaction(list(store.read("c")), keep_last=-2)
    assert len(list(store.read("c"))) == 6


# -- several writers ---------------------------------------------------------------------------


def test_two_writers_compacting_at_once_store_one_compaction(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    with el.open(url) as setup:
        _turns(setup, "c", 6)
    both_planned = threading.Barrier(2)
    outcomes: list[str] = []

    def summarize(request: SummaryRequest) -> str:
        both_planned.wait(timeout=10)  # each has read the same history before either appends
        return f"summary by {threading.current_thread().name}"

    def run() -> None:
        with el.open(url) as store:
            outcomes.append(compact(store, "c", summarize).outcome)

    threads = [threading.Thread(target=run, name=f"w{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(outcomes) == ["already_compacted", "compacted"]
    with el.open(url) as store:
        kinds = [type(e.data).__name__ for e in store.read("c")]
    assert kinds.count("Compaction") == 1


def test_a_writer_appending_meanwhile_gets_a_fresh_plan(store: el.Store) -> None:
    _turns(store, "c", 6)
    appended = False

    def summarize(request: SummaryRequest) -> str:
        nonlocal appended
        if not appended:  # another writer's turn lands while the summary is being made
            appended = True
            _turns(store, "c", 1)
        return f"summary of {request.first_seq}-{request.last_seq}"

    result = compact(store, "c", summarize, policy=CompactionPolicy(keep_last=2))
    assert result.compacted and result.plan is not None and result.event is not None
    assert result.plan.at == 14 and result.event.seq == 15
    assert result.plan.last_seq == 12


def test_compact_async_awaits_an_async_summarizer() -> None:
    async def main() -> None:
        async with el.open_async("memory://") as store:
            for i in range(4):
                await store.append(
                    "c",
                    [
                        el.ModelInput.from_text(f"q{i}"),
                        el.ModelOutput(parts=(el.TextPart(text=f"a{i}"),)),
                    ],
                )

            async def summarize(request: SummaryRequest) -> str:
                await asyncio.sleep(0)
                return "async summary"

            result = await compact_async(
                store, "c", summarize, policy=CompactionPolicy(keep_last=2)
            )
            assert result.event is not None
            data = result.event.data
            assert isinstance(data, el.Compaction)
            assert (data.summary, data.summarizer, data.last_seq) == (
                "async summary",
                "summarize",
                6,
            )
            again = await compact_async(store, "c", policy=CompactionPolicy(keep_last=2))
            assert again.outcome == "nothing_to_compact"

    asyncio.run(main())


def test_policy_due_reads_the_window(store: el.Store) -> None:
    _turns(store, "c", 4)
    policy = CompactionPolicy(trigger=0.5)
    roomy = context_window(store, "c", budget=HUGE)
    assert not policy.due(roomy)
    assert roomy.report is not None
    tokens = roomy.report.tokens
    assert policy.due(context_window(store, "c", budget=tokens + 1))  # over half of it
    assert not policy.due(context_window(store, "c", budget=2 * tokens + 2))
    assert policy.due(context_window(store, "c", budget=tokens - 40))  # something dropped


def test_a_writer_appending_every_time_wins_with_a_concurrency_error(store: el.Store) -> None:
    _turns(store, "c", 6)

    def summarize(request: SummaryRequest) -> str:
        _turns(store, "c", 1)  # someone appends while every summary is being made
        return "summary"

    with pytest.raises(el.ConcurrencyError):
        compact(store, "c", summarize, policy=CompactionPolicy(keep_last=2))
    assert not any(isinstance(e.data, el.Compaction) for e in store.read("c"))


# -- found by review -----------------------------------------------------------------------------


def test_results_still_to_come_keep_their_output_out_of_the_range(store: el.Store) -> None:
    """Results arriving after a compaction would be paired with a covered output: hidden, and
    never summarized."""
    call = el.ToolCall.parse("call_1", "search", '{"q": "x"}')
    store.append("c", [el.ModelInput.from_text("find x " + "word " * 60)])  # 1
    store.append("c", [el.ModelOutput(tool_calls=(call,))])  # 2: the tool is still running
    store.append("c", [el.ModelInput.from_text("hurry " * 60)])  # 3
    result = compact(store, "c", Recording(), policy=CompactionPolicy(keep_last=0))
    assert result.plan is not None and result.plan.last_seq == 1  # not 3: the call waits
    store.append(
        "c",
        [
            el.ToolResults(
                results=(el.ToolResult(call_id="call_1", tool_name="search", content="x is 42"),)
            ),
            el.ModelOutput(parts=(el.TextPart(text="x is 42 " + "blah " * 60),)),
        ],
    )
    window = context_window(store, "c", budget=HUGE)
    assert 5 in {i.seq for i in window.items}  # the results are shown
    rec = Recording()
    assert compact(store, "c", rec, policy=CompactionPolicy(keep_last=0)).compacted
    assert [e.seq for e in rec.requests[0].events] == [2, 3, 5, 6]


def test_a_compaction_placed_after_its_range_is_handed_on(store: el.Store) -> None:
    """A hand-made compaction whose range starts after its own seq sits at its own seq; the
    new compaction hides it, so its summarizer gets it."""
    store.append(
        "c",
        [
            el.ModelInput.from_text("q0 " + "word " * 40),  # 1
            el.Compaction(first_seq=5, last_seq=9, summary="note A"),  # 2
            el.Compaction(first_seq=5, last_seq=9, summary="note B"),  # 3: does not hide A
            el.ModelInput.from_text("q1 " + "word " * 40),  # 4
            el.ModelOutput(parts=(el.TextPart(text="a1 " + "blah " * 40),)),  # 5
            el.ModelInput.from_text("q2"),  # 6
        ],
    )
    before = context_window(store, "c", budget=HUGE)
    assert {"note A", "note B"} <= {getattr(i.data, "summary", None) for i in before.items}
    rec = Recording()
    result = compact(store, "c", rec, policy=CompactionPolicy(keep_last=1))
    assert result.compacted
    assert [c.summary for c in rec.requests[0].previous] == ["note A", "note B"]
    after = context_window(store, "c", budget=HUGE)
    assert {"note A", "note B"}.isdisjoint(getattr(i.data, "summary", None) for i in after.items)


def test_a_summary_no_shorter_than_its_range_is_not_appended(store: el.Store) -> None:
    store.append(
        "c", [el.ModelInput.from_text("hi"), el.ModelOutput(parts=(el.TextPart(text="yo"),))]
    )
    store.append("c", [el.ModelInput.from_text("and?")])
    result = compact(store, "c", policy=CompactionPolicy(keep_last=1))
    assert result.outcome == "not_shorter" and not result.compacted
    assert 0 < result.replaced_tokens <= result.summary_tokens
    assert len(list(store.read("c"))) == 3


def test_extractive_summary_fits_a_tiny_budget(store: el.Store) -> None:
    _turns(store, "c", 1000, words=2)
    request = _request(store, 16)
    text = ExtractiveSummarizer()(request)
    assert COUNTER.count_text(text) <= 16, text
    assert "lines left out" in text


def test_transcript_tells_of_instruction_changes(store: el.Store) -> None:
    store.append("c", [el.SystemInstructionSet(text="Be brief.")])
    _turns(store, "c", 1)
    store.append("c", [el.SystemInstructionSet(text="Answer in French.")])
    _turns(store, "c", 2)
    lines = _request(store, 1000).transcript().splitlines()
    assert lines[0] == "Instructions set: Be brief."
    assert "Instructions set: Answer in French." in lines


def test_a_new_plan_of_the_same_range_reuses_the_summary(store: el.Store) -> None:
    _turns(store, "c", 6)
    calls = 0

    def summarize(request: SummaryRequest) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:  # another writer appends something that changes nothing in the range
            store.append("c", [el.Checkpoint(label="meanwhile")])
        return "summary"

    result = compact(store, "c", summarize, policy=CompactionPolicy(keep_last=2))
    assert result.compacted and result.plan is not None and result.plan.at == 13
    assert calls == 1


def test_due_ignores_what_is_left_out_by_design(store: el.Store) -> None:
    store.append(
        "c", [el.SystemInstructionSet(text="draft"), el.SystemInstructionSet(text="final")]
    )
    _turns(store, "c", 6)
    policy = CompactionPolicy()
    window = context_window(store, "c", budget=HUGE)
    assert window.report is not None and window.report.dropped == 1  # the draft instruction
    assert not policy.due(window)
    sliding = context_window(store, "c", budget=HUGE, strategy="sliding_window", turns=2)
    assert sliding.report is not None and sliding.report.dropped > 1
    assert not policy.due(sliding)
    tight = context_window(store, "c", budget=300, strategy="drop_oldest")
    assert tight.report is not None and tight.report.dropped > 1
    assert policy.due(tight)


def test_due_ignores_a_draft_instruction_whatever_the_report_lists(store: el.Store) -> None:
    store.append(
        "c", [el.SystemInstructionSet(text="draft"), el.SystemInstructionSet(text="final")]
    )
    _turns(store, "c", 6)
    policy = CompactionPolicy()
    for entries in ("window", "all"):
        window = context_window(store, "c", budget=HUGE, entries=entries)
        assert window.report is not None
        assert (window.report.dropped, window.report.superseded) == (1, 1)
        assert not policy.due(window), entries


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations, st.integers(0, 3000), st.sampled_from(["drop_oldest", "summary_aware"]))
def test_property_due_does_not_depend_on_the_rows_listed(
    history: list[el.EventData], budget: int, strategy: str
) -> None:
    with el.open("memory://") as store:
        store.append("s", history)
        events = list(store.read("s"))
    policy = CompactionPolicy(trigger=1.0)
    roomy = context_window(events, "s", budget=HUGE, strategy=strategy, entries="all")
    assert roomy.report is not None
    # with room for everything, only instructions that never took effect are left out
    assert roomy.report.dropped == roomy.report.superseded
    never = [e for e in roomy.report.entries if e.fate == "dropped"]
    assert all(e.kind == "system_instruction" for e in never)
    try:
        full = context_window(events, "s", budget=budget, strategy=strategy, entries="all")
        listed = context_window(events, "s", budget=budget, strategy=strategy, entries="window")
    except el.WindowTooSmallError:
        return
    assert full.report is not None and listed.report is not None
    assert full.report.superseded == listed.report.superseded == roomy.report.superseded
    assert policy.due(full) == policy.due(listed)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.integers(0, 15), st.booleans()), max_size=30))
def test_property_shown_ranges_are_the_ones_no_later_range_supersedes(
    spans: list[tuple[int, int, bool]],
) -> None:
    history: list[el.EventData] = []
    for first, length, message_before in spans:
        if message_before:
            history.append(el.ModelInput.from_text("hi"))
        history.append(el.Compaction(first_seq=first, last_seq=first + length, summary="s"))
    with el.open("memory://") as store:
        if history:
            store.append("s", history)
            events = list(store.read("s"))
        else:
            events = []
    ranges = [_Range(e) for e in events if isinstance(e.data, el.Compaction)]
    naive = [r for r in ranges if not any(o.supersedes(r) for o in ranges)]
    assert shown_ranges(ranges) == naive
