"""Shared rendering steps: pairing, unanswered calls, orphans, ids, text helpers; properties of
every renderer over random windows."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import HealthCheck, given, settings

import eventlog as el
from eventlog.errors import UsageError
from eventlog.events import ModelInput, ModelOutput, Section, ToolResult, ToolResults
from eventlog.projections.providers import render_common as rc
from eventlog.projections.providers.render import PROVIDERS, render, render_json
from tests import render_windows as rw


def test_results_gathered_in_call_order_and_inputs_moved_after_them() -> None:
    w = rw.win(
        rw.text_in("go"),
        rw.calls_out(rw.call("a", "search", "{}"), rw.call("b", "search", "{}")),
        rw.results(rw.ok("b", "search", "B")),
        rw.text_in("meanwhile"),
        rw.results(rw.ok("a", "search", "A")),
    )
    t = rc.turns(w)
    assert [type(x).__name__ for x in t] == ["UserTurn", "OutputTurn", "ResultsTurn", "UserTurn"]
    results = t[2]
    assert isinstance(results, rc.ResultsTurn)
    assert [(uid, result.content) for _, uid, result in results.answers] == [("a", "A"), ("b", "B")]
    assert t[3] == rc.UserTurn(("meanwhile",))


def test_unanswered_cancel_and_drop() -> None:
    w = rw.unanswered()
    cancelled = rc.turns(w)[2]
    assert isinstance(cancelled, rc.ResultsTurn)
    assert cancelled.answers[1][2] == ToolResult(
        call_id="c2", tool_name="search", status="failed", content=rc.CANCELLED_TEXT
    )
    dropped = rc.turns(w, unanswered="drop")
    out, res = dropped[1], dropped[2]
    assert isinstance(out, rc.OutputTurn) and [uid for _, uid in out.calls] == ["c1"]
    assert isinstance(res, rc.ResultsTurn) and len(res.answers) == 1


def test_drop_removes_a_fully_unanswered_call_set() -> None:
    w = rw.win(rw.text_in("go"), rw.calls_out(rw.call("a", "search", "{}")), rw.text_in("stop"))
    t = rc.turns(w, unanswered="drop")
    assert [type(x).__name__ for x in t] == ["UserTurn", "OutputTurn", "UserTurn"]
    out = t[1]
    assert isinstance(out, rc.OutputTurn) and out.calls == ()
    for provider in PROVIDERS:
        rw.CHECKERS[provider](render(w, provider, model="m", unanswered="drop"))


def test_execute_error_answers_missing_calls() -> None:
    w = rw.win(
        rw.text_in("go"),
        rw.calls_out(rw.call("a", "search", "{}")),
        rw.results(error="sandbox died"),
    )
    res = rc.turns(w)[2]
    assert isinstance(res, rc.ResultsTurn)
    _, _, result = res.answers[0]
    assert result.content == "sandbox died" and result.status == "failed"


def test_orphan_results_become_text_or_are_dropped() -> None:
    w = rw.win(rw.text_in("go"), rw.results(rw.ok("ghost", "search", "boo")))
    t = rc.turns(w)
    assert t[1] == rc.UserTurn(
        (
            "[Result of tool 'search' (call ghost, success); "
            "its call is not in this conversation]\nboo",
        )
    )
    assert len(rc.turns(w, orphans="drop")) == 1
    for provider in PROVIDERS:
        body = orjson.dumps(render(w, provider, model="m")).decode()
        assert "tool_result" not in body and "function_call_output" not in body
        assert '"tool"' not in body and "functionResponse" not in body


def test_a_second_result_for_the_same_call_is_an_orphan() -> None:
    w = rw.win(
        rw.calls_out(rw.call("a", "search", "{}")),
        rw.results(rw.ok("a", "search", "1"), rw.ok("a", "search", "2")),
    )
    t = rc.turns(w)
    assert isinstance(t[1], rc.ResultsTurn) and len(t[1].answers) == 1
    assert isinstance(t[2], rc.UserTurn) and "2" in str(t[2].blocks[0])


def test_repeated_call_ids_are_made_unique_and_stay_paired() -> None:
    w = rw.win(
        rw.text_in("q"),
        rw.calls_out(rw.call("search_0", "search", "{}")),
        rw.results(rw.ok("search_0", "search", "1")),
        rw.calls_out(rw.call("search_0", "search", "{}")),
        rw.results(rw.ok("search_0", "search", "2")),
    )
    t = rc.turns(w)
    uids = [uid for x in t if isinstance(x, rc.ResultsTurn) for _, uid, _ in x.answers]
    assert uids == ["search_0", "search_0~2"]
    body = render(w, "anthropic", model="m")
    rw.check_anthropic(body)
    ids = [b["id"] for m in body["messages"] for b in m["content"] if b["type"] == "tool_use"]
    assert ids[0] == "search_0" and ids[1] != ids[0] and ids[1].startswith("search_0_2_")


class _Input(ModelInput, frozen=True, tag="test_render_input"):
    pass


class _Output(ModelOutput, frozen=True, tag="test_render_output"):
    pass


class _Results(ToolResults, frozen=True, tag="test_render_results"):
    pass


def test_subclassed_kinds_render_like_their_base() -> None:
    """The pass dispatches on exact types first; subclasses take the slow path, same result."""
    base = rw.parallel_out_of_order()
    sub = {ModelInput: _Input, ModelOutput: _Output, ToolResults: _Results}
    items = tuple(
        msgspec.structs.replace(i, data=sub[type(i.data)](**msgspec.structs.asdict(i.data)))
        for i in base.items
    )
    assert {type(i.data) for i in items} == {_Input, _Output, _Results}
    window = msgspec.structs.replace(base, items=items)
    for provider in PROVIDERS:
        assert render(window, provider, model="m") == render(base, provider, model="m")


def test_fix_id() -> None:
    assert rc.fix_id("call_1", 64) == "call_1"
    long = "x" * 100
    fixed = rc.fix_id(long, 64)
    assert len(fixed) == 64 and fixed == rc.fix_id(long, 64)
    assert rc.fix_id("a.b/c", 64) != rc.fix_id("a_b_c", 64)
    assert re.fullmatch(r"[A-Za-z0-9_-]+", rc.fix_id("é ü/?", 64))
    assert rc.fix_id("a.b/c", 40, strict_chars=False) == "a.b/c"
    assert len(rc.fix_id(long, 40, strict_chars=False)) == 40


def test_input_blocks_titles_and_live_screen() -> None:
    data = ModelInput(
        sections=(Section(text="body", title="Task"), Section(text=" "), Section(text="more"))
    )
    assert rc.input_blocks(data) == ("# Task\nbody", "more")
    assert rc.input_blocks(ModelInput.from_text(" exact  ")) == (" exact  ",)
    assert rc.live_screen_text((("notes", "- a"), ("clock", "12:00"))) == (
        "[LiveScreen]\n## notes\n- a\n\n## clock\n12:00"
    )


def test_compaction_and_live_screen_render_as_user_text() -> None:
    t = rc.turns(rw.compaction_and_screen())
    assert t == [
        rc.UserTurn(("Summary of earlier conversation:\nWe planned a trip.",)),
        rc.UserTurn(
            ("Where next?", "[LiveScreen]\n## notebook\n- Paris\n- Tokyo\n\n## clock\n12:00")
        ),
    ]


def test_live_screen_on_tool_results_follows_them() -> None:
    w = rw.win(
        rw.text_in("go"),
        rw.calls_out(rw.call("a", "search", "{}")),
        rw.results(rw.ok("a", "search", "A")),
        screen=(("notes", "x"),),
    )
    body = render(w, "anthropic", model="m")
    assert body["messages"][-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "a", "content": "A"},
        {"type": "text", "text": "[LiveScreen]\n## notes\nx"},
    ]


def test_option_errors() -> None:
    w = rw.consecutive_inputs()
    with pytest.raises(UsageError, match="unknown provider"):
        render(w, "bard", model="m")
    with pytest.raises(UsageError, match="unknown option"):
        render(w, "openai-chat", model="m", cache=True)
    with pytest.raises(UsageError, match="unanswered"):
        render(w, "gemini", model="m", unanswered="ignore")
    with pytest.raises(UsageError, match="system_role must be 'system' or 'developer'"):
        render(w, "openai-chat", model="m", system_role="boss")
    with pytest.raises(UsageError, match="extra sets messages"):
        render(w, "anthropic", model="m", extra={"messages": []})
    body = render(w, "anthropic", model="m", extra={"temperature": 0.5})
    assert body["temperature"] == 0.5


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_tokens": 0}, "max_tokens must be a positive integer"),
        ({"max_tokens": -1}, "max_tokens must be a positive integer"),
        ({"max_tokens": True}, "max_tokens must be a positive integer"),
        ({"max_tokens": 1.5}, "max_tokens must be a positive integer"),
        ({"model": ""}, "model must be a non-empty string"),
        ({"model": 5}, "model must be a non-empty string"),
        ({"extra": 5}, "extra must be a mapping"),
        ({"extra": {1: "x"}}, "extra must be a mapping"),
    ],
)
def test_request_arguments_are_checked_for_every_provider(
    provider: str, options: dict[str, Any], message: str
) -> None:
    """A bad reply limit, model or extra is a UsageError naming it. Before, max_tokens=0 was
    sent as 0 by three providers and replaced by 4096 by Anthropic, -1 and True were sent as
    they were, and a non-string model or extra raised TypeError or AttributeError (found in
    review)."""
    w = rw.consecutive_inputs()
    with pytest.raises(UsageError, match=message):
        render(w, provider, **{"model": "m", **options})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cache": True, "cache_every": 0}, "cache_every must be an integer >= 1"),
        ({"cache": True, "cache_every": True}, "cache_every must be an integer >= 1"),
        ({"cache": True, "cache_ttl": 5}, "cache_ttl must be one of 5m, 1h"),
        ({"cache": True, "cache_ttl": "2h"}, "cache_ttl must be one of 5m, 1h"),
        ({"cache": "yes"}, "cache must be True or False"),
    ],
)
def test_anthropic_cache_options_are_checked(options: dict[str, Any], message: str) -> None:
    w = rw.consecutive_inputs()
    with pytest.raises(UsageError, match=message):
        render(w, "anthropic", model="m", **options)


def test_a_given_reply_limit_is_sent_as_given() -> None:
    w = rw.consecutive_inputs()
    fields = {
        "openai-chat": ("max_completion_tokens",),
        "openai-responses": ("max_output_tokens",),
        "anthropic": ("max_tokens",),
        "gemini": ("generationConfig", "maxOutputTokens"),
    }
    for provider, path in fields.items():
        body: Any = render(w, provider, model="m", max_tokens=1)
        for key in path:
            body = body[key]
        assert body == 1, provider
    assert render(w, "anthropic", model="m")["max_tokens"] == 4096  # the API requires one
    marked = render(w, "anthropic", model="m", cache=True, cache_every=1, cache_ttl="1h")
    assert marked["messages"][-1]["content"][-1]["cache_control"] == {
        "type": "ephemeral",
        "ttl": "1h",
    }


@pytest.mark.parametrize("name", sorted(rw.SCENARIOS))
@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_scenario_keeps_every_invariant(provider: str, name: str) -> None:
    window = rw.SCENARIOS[name]()
    for unanswered in ("cancel", "drop"):
        rw.CHECKERS[provider](render(window, provider, model="m", unanswered=unanswered))


@pytest.mark.parametrize("provider", PROVIDERS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(window=rw.windows())
def test_random_windows_keep_every_invariant(provider: str, window: rw.Window) -> None:
    for unanswered in ("cancel", "drop"):
        body = render(window, provider, model="m", unanswered=unanswered)
        rw.CHECKERS[provider](body)
        again = render_json(window, provider, model="m", unanswered=unanswered)
        assert orjson.dumps(body) == again
    if provider == "anthropic":
        rw.check_anthropic(render(window, provider, model="m", cache=True, cache_every=1))
    text = orjson.dumps(body).decode()
    for issuer, receivers in rw.RECEIVERS.items():
        if provider not in receivers:
            assert f"ART-{issuer}-" not in text, issuer


def test_made_unique_ids_never_collide_with_literal_ones() -> None:
    calls = [rw.call(i, "search", "{}") for i in ("c1", "c2", "c1~2")]
    w = rw.win(
        rw.calls_out(rw.call("c1", "search", "{}")),
        rw.results(rw.ok("c1", "search", "a")),
        rw.calls_out(*calls),
        rw.results(*(rw.ok(c.id, "search", "b") for c in calls)),
    )
    for provider in PROVIDERS:
        rw.CHECKERS[provider](render(w, provider, model="m"))


def test_uploaded_files_and_unfetchable_uris() -> None:
    """A provider's own file ids go by `file_id`; another provider's, or a URI no provider can
    fetch, become notes; an image URL of unknown subtype is still an image for Anthropic."""
    w = rw.uploaded_files()

    def content(provider: str) -> list[object]:
        body = render(w, provider, model="m")
        if provider == "gemini":
            return list(body["contents"][0]["parts"])
        messages = body["messages"] if provider != "openai-responses" else body["input"]
        return list(messages[-1]["content"])

    responses = content("openai-responses")
    assert responses[1:3] == [
        {"type": "input_image", "file_id": "file-img", "detail": "auto"},
        {"type": "input_file", "file_id": "file-doc"},
    ]
    assert [p["type"] for p in responses[3:6]] == ["input_text"] * 3  # notes
    assert responses[6] == {
        "type": "input_image",
        "image_url": "https://example.com/picture",
        "detail": "auto",
    }
    chat = content("openai-chat")
    assert chat[2] == {"type": "file", "file": {"file_id": "file-doc"}}
    assert [p["type"] for p in (chat[1], *chat[3:6])] == ["text"] * 4  # Chat: images by URL only
    anthropic = content("anthropic")
    assert anthropic[3:5] == [
        {"type": "image", "source": {"type": "file", "file_id": "file_011"}},
        {"type": "document", "source": {"type": "file", "file_id": "file_012"}},
    ]
    assert [p["type"] for p in anthropic[1:3]] == ["text", "text"]  # OpenAI's files: notes
    assert anthropic[5]["type"] == "text"  # s3: a note
    assert anthropic[6] == {
        "type": "image",
        "source": {"type": "url", "url": "https://example.com/picture"},
    }
    gemini = content("gemini")
    assert all("text" in p for p in gemini[1:5])  # the providers' files: notes
    assert gemini[5] == {"text": "[attachment (image/png) not supported by Gemini]"}  # s3:
    assert gemini[6] == {"text": "[attachment (image/*) not supported by Gemini]"}  # a wildcard


def test_gemini_gets_only_the_media_types_and_uris_it_reads() -> None:
    """Gemini refuses other types ('Unsupported MIME type') and URIs it cannot fetch."""
    docx = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    sent = [
        rw.Attachment(media_type="image/png", uri="gs://bucket/x.png"),
        rw.Attachment(media_type="application/pdf", uri="https://example.com/a.pdf"),
        rw.Attachment(media_type="text/csv", data=b"a,b"),
        rw.Attachment(media_type="audio/mpeg", data=b"ID3"),
    ]
    noted = [
        rw.Attachment(media_type="application/zip", data=b"PK"),
        rw.Attachment(media_type=docx, data=b"PK", name="a.docx"),
        rw.Attachment(media_type="text/plain", uri="file:///home/u/notes.txt"),
    ]
    w = rw.win(rw.ModelInput(sections=(rw.Section(text="Look."),), attachments=(*sent, *noted)))
    parts = render(w, "gemini", model="m")["contents"][0]["parts"][1:]
    assert [next(iter(p)) for p in parts] == [
        "fileData",
        "fileData",
        "inlineData",
        "inlineData",
    ] + ["text"] * 3
    assert parts[5] == {"text": f"[attachment 'a.docx' ({docx}) not supported by Gemini]"}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_empty_attachment_becomes_a_note(provider: str) -> None:
    """Providers refuse an empty image or document ('image cannot be empty')."""
    empty = (
        rw.Attachment(media_type="image/png", data=b""),
        rw.Attachment(media_type="text/plain", data=b""),
    )
    w = rw.win(rw.ModelInput(sections=(rw.Section(text="see"),), attachments=empty))
    body = json.dumps(render(w, provider, model="m"))
    assert body.count("is empty]") == 2 and "base64," not in body and '"data": ""' not in body


def test_uri_schemes_are_matched_without_case() -> None:
    assert rc.is_fetchable(rw.Attachment(media_type="image/png", uri="HTTPS://example.com/a.png"))
    assert not rc.is_fetchable(rw.Attachment(media_type="image/png", uri="S3://bucket/a.png"))


def test_json_bytes_writes_big_integers_and_still_refuses_the_rest() -> None:
    from eventlog.projections.providers.common import decode_json, json_bytes

    assert json_bytes({"n": 2**70, "x": 1.5}) == b'{"n":1180591620717411303424,"x":1.5}'
    with pytest.raises(TypeError):
        json_bytes({"b": b"bytes are no JSON"})
    deep = "[" * 100_000 + "]" * 100_000  # past every Python version's recursion limit
    with pytest.raises(el.ProviderMappingError, match="nested too deeply|depth"):
        decode_json(deep, "a body")


def _texts_in_order(provider: str, body: dict[str, Any]) -> list[str]:
    """The slot, then every user-side text of a rendered body, in order."""
    if provider == "anthropic":
        return [f"slot:{body.get('system')}"] + [
            b["text"] for m in body["messages"] for b in m["content"] if b["type"] == "text"
        ]
    if provider == "gemini":
        slot = body.get("systemInstruction", {}).get("parts", [{}])[0].get("text")
        return [f"slot:{slot}"] + [p["text"] for c in body["contents"] for p in c["parts"]]
    return [f"slot:{body.get('instructions')}"] + [
        c["text"] for i in body["input"] for c in i["content"] if "text" in c
    ]


@pytest.mark.parametrize("provider", ["anthropic", "gemini", "openai-responses"])
@pytest.mark.parametrize(
    ("instructions", "one_slot", "responses"),
    [
        # Superseded before any turn: only the last one ever took effect.
        (["English", "French", "Hi"], ["slot:French", "Hi"], ["slot:French", "Hi"]),
        (["B", "A", "B", "Hi"], ["slot:B", "Hi"], ["slot:B", "Hi"]),
        (["A", "B"], ["slot:B"], ["slot:B"]),
        # In force at the start, then changed. Anthropic and Gemini: the current one is the slot,
        # the opening one shown first. Responses: the opening one is `instructions` (a prefix
        # that stays put), the change a developer message where it took effect.
        (
            ["X", "A", "Hi", "B", "Yo"],
            ["slot:B", "A", "Hi", "B", "Yo"],
            ["slot:A", "Hi", "B", "Yo"],
        ),
    ],
)
def test_leading_instructions_keep_the_one_in_force(
    provider: str, instructions: list[str], one_slot: list[str], responses: list[str]
) -> None:
    data: list[Any] = [
        ModelInput.from_text(t) if t in ("Hi", "Yo") else el.SystemInstructionSet(text=t)
        for t in instructions
    ]
    current = [t for t in instructions if t not in ("Hi", "Yo")][-1]
    body = render(rw.win(*data, system=current, tools=()), provider, model="m")
    heading = rc.INSTRUCTION_HEADING + "\n"
    got = [t.removeprefix(heading) for t in _texts_in_order(provider, body)]
    assert got == (responses if provider == "openai-responses" else one_slot)


def test_openai_sees_failed_and_skipped_results_as_errors() -> None:
    """OpenAI has no error flag: what Anthropic marks is_error starts `Error: `."""
    text = {
        status: rc.error_text(ToolResult(call_id="c", tool_name="t", status=status, content=c))
        for status, c in (("success", "ok"), ("failed", "boom"), ("skipped", "user said no"))
    }
    assert text == {"success": "ok", "failed": "Error: boom", "skipped": "Error: user said no"}
    skipped = ToolResult(call_id="c", tool_name="t", status="skipped")
    assert rc.error_text(skipped) == rc.SKIPPED_TEXT and rc.is_error(skipped)


def _attachment_blocks(provider: str, attachments: tuple[el.Attachment, ...]) -> list[Any]:
    window = rw.win(ModelInput(sections=(Section(text="Look."),), attachments=attachments))
    body = render(window, provider, model="m")
    if provider == "gemini":
        return body["contents"][0]["parts"][1:]
    if provider == "openai-responses":
        return body["input"][0]["content"][1:]
    if provider == "openai-chat":
        return body["messages"][1]["content"][1:]
    return body["messages"][0]["content"][1:]


def test_data_uris_go_as_inline_bytes_and_unread_image_formats_as_notes() -> None:
    """A data: URI is not a URL to fetch; BMP and the like are refused inline by the APIs."""
    png_uri = el.Attachment(media_type="image/*", uri="data:image/png;base64," + rw.PNG_B64)
    bmp = el.Attachment(media_type="image/bmp", data=b"BM" + bytes(30), name="x.bmp")
    broken = el.Attachment(media_type="image/png", uri="data:image/png;base64,@@@")
    got = {p: _attachment_blocks(p, (png_uri, bmp, broken)) for p in PROVIDERS}
    assert got["anthropic"][0]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": rw.PNG_B64,
    }
    assert got["gemini"][0] == {"inlineData": {"mimeType": "image/png", "data": rw.PNG_B64}}
    png_url = "data:image/png;base64," + rw.PNG_B64
    assert got["openai-chat"][0] == {"type": "image_url", "image_url": {"url": png_url}}
    assert got["openai-responses"][0]["image_url"] == png_url
    for provider, blocks in got.items():
        notes = [b.get("text", "") for b in blocks[1:]]
        assert "image/bmp" in notes[0] and "not supported" in notes[0], provider
        assert "not supported" in notes[1], provider


def test_inline_media_types_are_spelled_as_the_apis_want() -> None:
    jpg = el.Attachment(media_type="image/jpg", uri="data:image/jpg;base64," + rw.PNG_B64)
    upper = el.Attachment(media_type="image/*", uri="data:IMAGE/PNG;base64," + rw.PNG_B64)
    untyped = el.Attachment(media_type="image/png", uri="data:;base64," + rw.PNG_B64)
    text = el.Attachment(media_type="text/plain", uri="data:text/plain,hello%20world%21")
    blocks = _attachment_blocks("anthropic", (jpg, upper, untyped, text))
    assert [b["source"].get("media_type") for b in blocks[:3]] == [
        "image/jpeg",
        "image/png",
        "image/png",
    ]
    assert blocks[3]["source"] == {
        "type": "text",
        "media_type": "text/plain",
        "data": "hello world!",
    }
    chat = _attachment_blocks("openai-chat", (jpg,))
    assert chat[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")


def test_chat_keeps_only_the_instruction_in_force_of_a_run() -> None:
    data: list[Any] = [
        el.SystemInstructionSet(text="A"),
        el.SystemInstructionSet(text="B"),
        ModelInput.from_text("hi"),
        el.SystemInstructionSet(text="C"),
        el.SystemInstructionSet(text="B"),
        ModelInput.from_text("yo"),
    ]
    body = render(rw.win(*data, system="B", tools=()), "openai-chat", model="m")
    assert [(m["role"], m["content"]) for m in body["messages"]] == [
        ("system", "B"),
        ("user", "hi"),
        ("system", "B"),
        ("user", "yo"),
    ]
