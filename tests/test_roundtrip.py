"""Round trip (issue 8): import a provider history -> window -> render to the same provider ->
import again gives back the same conversation.

Documented normalisations: OpenAI Responses puts the *current* instruction in `instructions`
and earlier ones as developer messages (docs/rendering.md), so re-importing it yields the
current instruction first; instruction texts are compared in order after that leading one.
Everything else (inputs with attachments, outputs with reasoning artifacts and raw arguments,
results with errors and images, instruction changes at their place) comes back equal.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest
from click.testing import CliRunner

import eventlog as el
from eventlog.cli import cli
from eventlog.events import BIG_INT_ERROR
from eventlog.projections.providers.importers import history_events
from eventlog.projections.providers.ingest import ingest_response
from eventlog.projections.providers.render import render, render_json
from eventlog.projections.window import context_window
from tests import render_windows as rw
from tests import test_import as samples

CASES: list[tuple[str, Callable[[], dict[str, Any]]]] = [
    ("openai-chat", samples.chat_history),
    ("anthropic", samples.anthropic_history),
    ("openai-responses", samples.responses_history),
]


def _body(fmt: str, original: dict[str, Any], window: el.Window) -> dict[str, Any]:
    body = render(window, fmt, model=original.get("model", "m"))
    if fmt == "openai-responses":
        return {k: body[k] for k in ("instructions", "input", "tools", "model") if k in body}
    return body


def _without_derived_ids(again: tuple[Any, ...], first: tuple[Any, ...]) -> tuple[Any, ...]:
    """`again` with the message ids the renderer made up (where `first` had none) cleared.

    Responses messages need an id; a message imported without one is sent with a derived id,
    which the next import keeps like any other.
    """
    out = []
    for a, f in zip(again, first, strict=False):
        if isinstance(a, el.ModelOutput) and isinstance(f, el.ModelOutput):
            parts = tuple(
                msgspec.structs.replace(p, item_id=None)
                if isinstance(p, el.TextPart) and isinstance(q, el.TextPart) and q.item_id is None
                else p
                for p, q in zip(a.parts, f.parts, strict=False)
            )
            a = msgspec.structs.replace(a, parts=parts + a.parts[len(parts) :])
        out.append(a)
    return (*out, *again[len(out) :])


@pytest.mark.parametrize(("fmt", "history"), CASES)
def test_import_window_render_import(fmt: str, history: Callable[[], dict[str, Any]]) -> None:
    original = history()
    events = history_events(fmt, original)
    window = context_window(events, "conv", budget=10**9)
    again = history_events(fmt, _body(fmt, original, window))
    first = tuple(events)
    assert _without_derived_ids(tuple(again), first) == first


def test_chat_messages_come_back_equal_modulo_the_system_run() -> None:
    original = samples.chat_history()
    events = history_events("openai-chat", original)
    body = render(context_window(events, budget=10**9), "openai-chat", model=original["model"])
    assert body["tools"] == original["tools"]
    sent, got = original["messages"], body["messages"]
    # A run of system / developer messages is one instruction (texts joined by a blank line).
    assert got[0] == {"role": "system", "content": "You are terse.\n\nUse tools."}
    assert sent[:2] == [
        {"role": "system", "content": "You are terse."},
        {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
    ]
    # Consecutive tool messages come back in call order (the import orders them so).
    assert [m.get("tool_call_id") for m in sent[4:6]] == ["call_b", "call_a"]
    assert got[1:] == [*sent[2:4], sent[5], sent[4], *sent[6:]]


def test_round_trip_keeps_big_and_international_content() -> None:
    events = history_events(
        "openai-chat",
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": rw.INTL},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "search", "arguments": '{"q": "x"'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": rw.BIG},
                {"role": "assistant", "content": rw.INTL},
            ],
        },
    )
    body = render(context_window(events, budget=10**9), "openai-chat", model="m")
    assert history_events("openai-chat", body) == events


@pytest.mark.parametrize(("fmt", "history"), CASES)
def test_cli_import_then_render(
    fmt: str, history: Callable[[], dict[str, Any]], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'rt.db'}"
    original = history()
    path = tmp_path / "history.json"
    path.write_bytes(orjson.dumps(original))
    runner = CliRunner()
    result = runner.invoke(cli, ["--store", url, "import", "conv", "--format", fmt, str(path)])
    assert result.exit_code == 0, result.stderr
    result = runner.invoke(
        cli,
        [
            "--store",
            url,
            "render",
            "conv",
            "--provider",
            fmt,
            "--model",
            original.get("model", "m"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    body = orjson.loads(result.stdout)
    if fmt == "openai-responses":
        body = {k: body[k] for k in ("instructions", "input", "tools", "model") if k in body}
    first = tuple(history_events(fmt, original))
    again = tuple(history_events(fmt, body))
    assert _without_derived_ids(again, first) == first


@pytest.mark.parametrize(
    ("fmt", "message"),
    [
        (
            "openai-chat",
            {"role": "user", "content": [{"type": "text", "text": t} for t in ("Look:", "x = 1")]},
        ),
        (
            "anthropic",
            {"role": "user", "content": [{"type": "text", "text": t} for t in ("Look:", "x = 1")]},
        ),
        (
            "openai-responses",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": t} for t in ("Look:", "x = 1")],
            },
        ),
    ],
)
def test_a_message_of_several_text_parts_keeps_them(fmt: str, message: dict[str, Any]) -> None:
    history = {"input": [message]} if fmt == "openai-responses" else {"messages": [message]}
    events = history_events(fmt, history)
    assert [s.text for s in events[0].sections] == ["Look:", "x = 1"]  # type: ignore[attr-defined]
    body = render(context_window(events, "conv", budget=10**9), fmt, model="m")
    if fmt == "openai-responses":
        body = {k: body[k] for k in ("input", "model")}
    assert history_events(fmt, body) == events


@pytest.mark.parametrize("backend", ["memory", "sqlite", "lmdb", "jsonl"])
def test_tool_arguments_past_64_bits_are_stored_and_sent_back_exactly(
    backend: str, tmp_path: Path
) -> None:
    """MessagePack stores cannot hold such integers parsed: the call keeps them as raw text."""
    big = 123456789012345678901234567890
    output = ingest_response(
        "anthropic",
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"id": big}}
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
    )
    call = output.tool_calls[0]
    assert (call.arguments, call.parse_error) == (None, BIG_INT_ERROR)
    url = {
        "memory": "memory://",
        "sqlite": f"sqlite:///{tmp_path / 'b.db'}",
        "lmdb": f"lmdb:///{tmp_path / 'l'}",
        "jsonl": f"jsonl:///{tmp_path / 'j'}",
    }[backend]
    with el.open(url) as store:
        store.append("s", [el.ModelInput.from_text("look it up"), output])
        stored = store.get("s", 2).data
        assert stored == output
        window = context_window(store, "s", budget=10**6)
    body = msgspec.json.decode(render_json(window, "anthropic", model="claude-x"))
    uses = [b for m in body["messages"] for b in m["content"] if b["type"] == "tool_use"]
    assert uses[0]["input"] == {"id": big}
    openai = render(window, "openai-chat", model="gpt-x")
    calls = [c for m in openai["messages"] for c in m.get("tool_calls", ())]
    assert calls[0]["function"]["arguments"] == '{"id":' + str(big) + "}"
