"""What an integrator imports and passes: the public names, and clear errors for wrong stores."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import get_args

import pytest

import eventlog as el
from eventlog.projections import Runner, conversation_state
from eventlog.projections.forks import checkpoint_seq, fork
from eventlog.projections.state import ConversationProjection
from eventlog.projections.window import WindowBuilder, context_window


def test_every_public_name_is_exported_and_importable() -> None:
    """Names the docs and the API's own signatures use are importable from `eventlog` (the
    review found WindowTooSmallError, SearchHit, Part, ToolStatus and ExpectedSeq missing)."""
    for name in el.__all__:
        assert getattr(el, name) is not None, name
    assert issubclass(el.WindowTooSmallError, el.EventlogError)
    assert el.SearchHit.__name__ == "SearchHit"
    assert set(get_args(el.Part)) == {el.TextPart, el.ReasoningPart, el.RefusalPart}
    assert set(get_args(el.ToolStatus)) == {"success", "failed", "skipped"}
    assert el.ANY in get_args(get_args(el.ExpectedSeq)[1])


def test_a_concurrency_error_says_what_was_expected() -> None:
    with el.open("memory://") as store:
        store.append("s", [el.Checkpoint(label="a")])
        with pytest.raises(el.ConcurrencyError) as caught:
            store.append("s", [el.Checkpoint(label="b")], expected_seq=el.NO_STREAM)
        assert (caught.value.expected, caught.value.actual) == (el.NO_STREAM, 1)
        with pytest.raises(el.ConcurrencyError) as caught:
            store.append("s", [el.Checkpoint(label="b")], expected_seq=5)
        assert (caught.value.expected, caught.value.actual) == (5, 1)


def test_projections_refuse_an_async_store_and_say_what_to_pass() -> None:
    """An AsyncStore handed to a projection failed with "'AsyncStore' object is not iterable"
    or on a coroutine (found in review): it is a UsageError pointing at `.sync`."""

    async def scenario() -> None:
        async with el.open_async("memory://") as astore:
            await astore.append("s", [el.ModelInput.from_text("hi"), el.Checkpoint(label="c")])
            calls: list[tuple[str, Callable[[], object]]] = [
                ("context_window", lambda: context_window(astore, "s", budget=1000)),  # type: ignore[arg-type]
                ("Runner", lambda: Runner(astore, ConversationProjection())),  # type: ignore[arg-type]
                ("Runner", lambda: conversation_state(astore, "s")),  # type: ignore[arg-type]
                (
                    "WindowBuilder.from_store",
                    lambda: WindowBuilder.from_store(astore, "s", budget=1000),  # type: ignore[arg-type]
                ),
                ("checkpoint_seq", lambda: checkpoint_seq(astore, "s", "c")),  # type: ignore[arg-type]
                ("fork", lambda: fork(astore, "s", "f")),  # type: ignore[arg-type]
            ]
            for name, call in calls:
                with pytest.raises(el.UsageError, match=rf"{name} takes a Store.*\.sync"):
                    call()
            # What the message says to do works:
            window = await asyncio.to_thread(context_window, astore.sync, "s", budget=1000)
            assert window.items and not await astore.exists("f")

    asyncio.run(scenario())


def test_a_runner_refuses_what_is_not_a_store() -> None:
    with pytest.raises(el.UsageError, match="Runner takes a Store, got list"):
        Runner([], ConversationProjection())  # type: ignore[arg-type]


def test_a_state_loaded_before_its_store_closes_needs_no_store(tmp_path: Path) -> None:
    """A state reads old entries' events from its store (it keeps the newest 64): after the
    store is closed they raise StoreClosedError (found in review), unless `load_events()` was
    called before."""
    with el.open(f"sqlite:///{tmp_path}/s.db") as store:
        store.append("c", [el.ModelInput.from_text(f"msg {i}") for i in range(300)])
        lazy = conversation_state(store, "c", snapshot_every=None)
        loaded = conversation_state(store, "c", snapshot_every=None).load_events()
    first = loaded.messages[0].event
    assert isinstance(first, el.ModelInput) and first.text == "msg 0"
    assert all(m.loaded for m in loaded.messages)
    window = context_window(loaded, budget=100_000)
    assert len(window.items) == 300
    with pytest.raises(el.StoreClosedError):
        lazy.messages[0].event  # noqa: B018


def test_events_go_to_json_and_back_through_the_public_helpers() -> None:
    """`event_to_json` / `event_from_json` (what `log --json` and `append` use) copy a whole
    conversation to another store with the same payloads and ids; `msgspec.json.decode(...,
    type=RecordedEvent)` cannot, as `data` is a union it cannot pick from."""
    from eventlog.bench.workload import conversation_events

    with el.open("memory://") as source, el.open("memory://") as target:
        source.append(
            "c", [el.Event(data=d, meta={"k": [1, "x"]}) for d in conversation_events(300)]
        )
        stored = list(source.read("c"))
        lines = [json.dumps(el.event_to_json(e)) for e in stored]
        target.append("c", [el.event_from_json(line) for line in lines])
        copied = list(target.read("c"))
        assert [(e.id, e.data, e.meta) for e in copied] == [(e.id, e.data, e.meta) for e in stored]
        again = el.event_from_json(el.event_to_json(stored[0]))  # a parsed object works too
        assert (again.id, again.data) == (stored[0].id, stored[0].data)
        for bad, message in [
            ('{"type": "checkpoint", "data": {"label": "a"}, "colour": 1}', "unknown key"),
            ('{"type": "no_such_kind", "data": {}}', "unknown event type"),
            ('{"type": "checkpoint", "data": {"label": 5}}', "Expected `str`"),
            ("not json", "not JSON"),
        ]:
            with pytest.raises(el.ValidationError, match=f"line 7: .*{message}"):
                el.event_from_json(bad, "line 7")
