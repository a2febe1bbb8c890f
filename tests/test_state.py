"""ConversationState: the fold, the rules policy, immutability and equality."""

from __future__ import annotations

from collections.abc import Iterator
from unittest import mock

import orjson
import pytest
from hypothesis import given, settings

import eventlog as el
from eventlog.errors import ConversationError
from eventlog.projections import (
    ConversationProjection,
    ConversationState,
    InputEntry,
    Log,
    OutputEntry,
    Runner,
    ToolResultsEntry,
    conversation_state,
    persistent,
)
from eventlog.projections.persistent import LogBuilder
from eventlog.projections.state import decode_state, encode_state, iter_entries
from tests.conversations import conversations


@pytest.fixture
def store() -> Iterator[el.Store]:
    with el.open("memory://") as s:
        yield s


def call(cid: str, name: str = "read_file") -> el.ToolCall:
    return el.ToolCall.parse(cid, name, '{"path": "a.py"}')


def result(cid: str, name: str = "read_file", content: str = "ok") -> el.ToolResult:
    return el.ToolResult(call_id=cid, tool_name=name, content=content)


CLAUDE = el.Invocation(provider="anthropic", specification="messages", model="claude")


def test_fold_collects_every_part_of_the_conversation(store: el.Store) -> None:
    store.append(
        "c",
        [
            el.SystemInstructionSet(text="be brief"),
            el.ToolsetDefined(tools=(el.ToolSpec(name="read_file"), el.ToolSpec(name="grep"))),
            el.ModelInput.from_text("read a.py and grep b"),
            el.ModelOutput(
                tool_calls=(call("c1"), call("c2", "grep")),
                invocation=CLAUDE,
                usage=el.Usage(prompt_tokens=100, completion_tokens=20, cached_prompt_tokens=5),
            ),
            el.SkillActivated(name="pptx", instructions="use slides"),
            el.WidgetUpdated(widget="notes", state="v1"),
            el.ToolResults(results=(result("c1"),)),
            el.Checkpoint(label="half"),
            el.WidgetUpdated(widget="notes", state="v2"),
            el.ModelOutput(parts=(el.TextPart(text="hi"),), invocation=CLAUDE),
            el.Compaction(first_seq=3, last_seq=7, summary="read a.py"),
            el.SystemInstructionSet(text="be briefer"),
        ],
    )
    st = conversation_state(store, "c")
    assert st.seq == 12
    assert st.system is not None and st.system.text == "be briefer" and st.system.seq == 12
    assert st.toolset is not None and [t.name for t in st.toolset.tools] == ["read_file", "grep"]
    assert st.toolset.tool("grep") is not None and st.toolset.tool("x") is None
    assert [(type(e), e.seq) for e in st.messages] == [
        (InputEntry, 3),
        (OutputEntry, 4),
        (ToolResultsEntry, 7),
        (OutputEntry, 10),
    ]
    out = st.messages[1]
    assert isinstance(out, OutputEntry) and out.call_ids == ("c1", "c2")
    assert out.event.tool_calls[1].name == "grep"
    res = st.messages[2]
    assert isinstance(res, ToolResultsEntry) and res.call_ids == ("c1",)
    assert [(c.seq, c.call.id) for c in st.open_calls] == [(4, "c2")]
    assert st.skill("pptx") is not None and st.skill("pptx").instructions == "use slides"  # type: ignore[union-attr]
    assert [(w.widget, w.state, w.seq) for w in st.widgets] == [("notes", "v2", 9)]
    assert st.widget("notes") is not None and st.widget("nope") is None
    assert st.checkpoint("half") is not None and st.checkpoint("half").seq == 8  # type: ignore[union-attr]
    assert [c.seq for c in st.compactions] == [11]
    assert st.compactions[0].compaction.summary == "read a.py"
    totals = st.usage_for("anthropic", "claude")
    assert (totals.outputs, totals.prompt_tokens, totals.completion_tokens) == (2, 100, 20)
    assert totals.cached_prompt_tokens == 5
    assert st.usage_for("openai", "x").outputs == 0
    assert st.total_usage.prompt_tokens == 100
    assert not st.warnings
    # JSON output is complete and serialisable.
    doc = st.to_builtins()
    orjson.dumps(doc)
    assert doc["messages"][1]["event"]["tool_calls"][0]["id"] == "c1"
    assert doc["open_calls"][0]["call"]["id"] == "c2"


def test_time_travel_gives_the_state_at_each_seq(store: el.Store) -> None:
    store.append(
        "c",
        [
            el.SystemInstructionSet(text="one"),
            el.ModelInput.from_text("hi"),
            el.SystemInstructionSet(text="two"),
        ],
    )
    assert conversation_state(store, "c", 0) == ConversationState()
    assert conversation_state(store, "c", 1).system.text == "one"  # type: ignore[union-attr]
    assert conversation_state(store, "c", 2).system.text == "one"  # type: ignore[union-attr]
    assert conversation_state(store, "c", 3).system.text == "two"  # type: ignore[union-attr]
    with pytest.raises(el.ValidationError, match="between 0 and 3"):
        conversation_state(store, "c", 4)
    with pytest.raises(el.StreamNotFoundError):
        conversation_state(store, "missing")


def test_execute_error_closes_every_open_call(store: el.Store) -> None:
    store.append(
        "c",
        [
            el.ModelOutput(tool_calls=(call("a"), call("b"))),
            el.ToolResults(results=(result("a"),), execute_error="crashed"),
        ],
    )
    st = conversation_state(store, "c")
    assert st.open_calls == ()
    assert st.messages[1].call_ids == ("a", "b")


def test_results_can_arrive_in_several_events(store: el.Store) -> None:
    store.append(
        "c",
        [
            el.ModelOutput(tool_calls=(call("a"), call("b"))),
            el.ToolResults(results=(result("a"),)),
            el.ToolResults(results=(result("b"),)),
        ],
    )
    st = conversation_state(store, "c")
    assert st.open_calls == () and not st.warnings


BAD = [
    (
        "never made",
        [el.ModelInput.from_text("x"), el.ToolResults(results=(result("ghost"),))],
        2,
        "'ghost'.*never made",
    ),
    (
        "already answered",
        [
            el.ModelOutput(tool_calls=(call("a"),)),
            el.ToolResults(results=(result("a"),)),
            el.ToolResults(results=(result("a"),)),
        ],
        3,
        "already answered",
    ),
    (
        "duplicate in one event",
        [
            el.ModelOutput(tool_calls=(call("a"), call("b"))),
            el.ToolResults(results=(result("a"), result("a"), result("b"))),
        ],
        2,
        "duplicate result for tool call 'a'",
    ),
    (
        "wrong tool name",
        [
            el.ModelOutput(tool_calls=(call("a"),)),
            el.ToolResults(results=(result("a", "grep"),)),
        ],
        2,
        "names tool 'grep'.*'read_file'",
    ),
    (
        "out of order",
        [
            el.ModelOutput(tool_calls=(call("a"), call("b"))),
            el.ToolResults(results=(result("b"), result("a"))),
        ],
        2,
        "out of order",
    ),
    (
        "call id reused while open",
        [el.ModelOutput(tool_calls=(call("a"),)), el.ModelOutput(tool_calls=(call("a"),))],
        2,
        "already waiting",
    ),
    (
        "compaction of the future",
        [el.ModelInput.from_text("x"), el.Compaction(first_seq=1, last_seq=5, summary="s")],
        2,
        "do not all come before it",
    ),
]


@pytest.mark.parametrize(
    ("events", "seq", "pattern"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_strict_policy_raises_naming_stream_and_seq(
    store: el.Store, events: list[el.EventData], seq: int, pattern: str
) -> None:
    store.append("bad", events)
    with pytest.raises(ConversationError, match=pattern) as info:
        conversation_state(store, "bad")
    assert info.value.stream == "bad" and info.value.seq == seq
    assert f"stream 'bad', seq {seq}" in str(info.value)


@pytest.mark.parametrize(
    ("events", "seq", "pattern"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_warn_policy_records_the_violation(
    store: el.Store, events: list[el.EventData], seq: int, pattern: str
) -> None:
    store.append("bad", events)
    st = conversation_state(store, "bad", policy="warn")
    assert st.warnings, "a broken rule must never give a silent state"
    first = st.warnings[0]
    assert (first.seq, first.stream) == (seq, "bad")
    import re

    assert re.search(pattern, first.message)
    assert st.seq == len(events)


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(el.UsageError):
        ConversationProjection("lenient")  # type: ignore[arg-type]


def test_fold_is_pure_and_states_share_history(store: el.Store) -> None:
    recs = store.append(
        "c",
        [el.ModelInput.from_text("a"), el.ModelInput.from_text("b"), el.ModelInput.from_text("c")],
    )
    proj = ConversationProjection()
    s1 = proj.fold(proj.initial(), recs[0])
    s2a = proj.fold(s1, recs[1])
    s2b = proj.fold(s1, recs[2].__class__(**{**_fields(recs[2]), "seq": 2}))
    assert len(s1.messages) == 1
    assert [e.id for e in s2a.messages] == [recs[0].id, recs[1].id]
    assert [e.id for e in s2b.messages] == [recs[0].id, recs[2].id]
    assert s2a != s2b
    s3 = proj.fold(s2a, recs[2])
    assert len(s2a.messages) == 2 and len(s3.messages) == 3
    with pytest.raises(AttributeError):
        s1.seq = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        s1.messages[0].seq = 5  # type: ignore[misc]


def _fields(rec: el.RecordedEvent) -> dict[str, object]:
    return {f: getattr(rec, f) for f in rec.__struct_fields__}


def test_events_must_be_folded_in_order(store: el.Store) -> None:
    recs = store.append("c", [el.ModelInput.from_text("a"), el.ModelInput.from_text("b")])
    proj = ConversationProjection()
    with pytest.raises(ConversationError, match="expected seq 1, got 2"):
        proj.fold(proj.initial(), recs[1])


@settings(max_examples=60, deadline=None)
@given(conversations)
def test_one_by_one_equals_bulk_equals_snapshot_round_trip(events: list[el.EventData]) -> None:
    with el.open("memory://") as store, mock.patch.object(persistent, "CHUNK", 4):
        recs = store.append("c", events)
        proj = ConversationProjection()
        bulk = proj.fold_many(proj.initial(), recs)
        st = proj.initial()
        for r in recs:
            st = proj.fold(st, r)
        assert st == bulk
        again = decode_state(encode_state(bulk))
        assert again == bulk
        assert again.seq == len(events)
        # Message entries keep their events.
        by_seq = {r.seq: r for r in recs}
        for e in bulk.messages:
            assert e.event == by_seq[e.seq].data and e.id == by_seq[e.seq].id
        # Every call is answered in a valid conversation.
        assert bulk.open_calls == ()


def test_old_entries_reload_their_event_from_the_store(store: el.Store) -> None:
    events = [el.ModelInput.from_text(f"m{i}") for i in range(300)]
    store.append("c", events)
    runner = Runner(store, ConversationProjection(keep_events=10), snapshot_every=None)
    st = runner.state("c")
    assert [e.loaded for e in st.messages].count(True) == 10
    assert [e.event.text for e in st.messages] == [f"m{i}" for i in range(300)]


def test_a_restored_state_without_source_says_so() -> None:
    with el.open("memory://") as store:
        recs = store.append("c", [el.ModelInput.from_text("x")])
        proj = ConversationProjection()
        st = decode_state(encode_state(proj.fold_many(proj.initial(), recs)))
    with pytest.raises(el.UsageError, match="not loaded"):
        _ = st.messages[0].event  # type: ignore[union-attr]


def test_iter_entries_after_a_seq(store: el.Store) -> None:
    store.append("c", [el.ModelInput.from_text(str(i)) for i in range(10)])
    st = conversation_state(store, "c")
    assert [e.seq for e in iter_entries(st, after=7)] == [8, 9, 10]
    assert len(list(iter_entries(st))) == 10


def test_log_copy_on_write_and_chunks() -> None:
    with mock.patch.object(persistent, "CHUNK", 3):
        log = Log.of(range(7))
        a = log.appended(7)
        b = log.appended(70)
        assert list(log) == list(range(7))
        assert list(a) == [*range(7), 7] and list(b) == [*range(7), 70]
        assert a[-1] == 7 and a[2:5] == [2, 3, 4] and list(reversed(log))[0] == 6
        chunks = a.encode_chunks(lambda xs: orjson.dumps(xs))
        assert len(chunks) == 3
        back = Log.from_chunks(chunks, 8, lambda raw: list(orjson.loads(raw)))
        assert back == a and back == list(a) and back != b
        with pytest.raises(ValueError):
            Log.from_chunks(chunks, 20, lambda raw: list(orjson.loads(raw)))
        with pytest.raises(IndexError):
            _ = a[8]
        assert "more" in repr(a) and Log().last is None


def test_a_log_being_iterated_never_shows_items_appended_after_it() -> None:
    # A newer state folded from an older one appends to the chunk the older one is reading.
    with mock.patch.object(persistent, "CHUNK", 4):
        for n in range(1, 10):
            builder: LogBuilder[int] = LogBuilder(Log())
            builder.extend(list(range(n)))
            log = builder.release()  # the next builder appends to its buffer in place
            it = iter(log)
            seen = [next(it)]
            later = LogBuilder(log)
            later.extend([100, 101])
            newer = later.release()
            seen += list(it)
            assert seen == list(range(n)), n
            assert list(newer) == [*range(n), 100, 101]


@pytest.mark.parametrize("end", [-3, 5, True, "1"])
def test_restore_checks_its_seq_as_state_does(store: el.Store, end: object) -> None:
    store.append("a", [el.ModelInput.from_text("hi"), el.ModelInput.from_text("again")])
    runner = Runner(store, ConversationProjection())
    with pytest.raises(el.ValidationError, match="between 0 and 2"):
        runner.restore("a", end)  # type: ignore[arg-type]
    with pytest.raises(el.ValidationError, match="between 0 and 2"):
        runner.state("a", end)  # type: ignore[arg-type]
    with pytest.raises(el.StreamNotFoundError):
        runner.restore("missing", 1)
    assert runner.restore("a", 2) == (ConversationProjection().initial(), 0)
