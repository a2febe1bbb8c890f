"""Hand-built context windows shared by the renderer tests, SDK acceptance tests and benchmarks."""

from __future__ import annotations

import re
from typing import Any

import hypothesis.strategies as st
import msgspec

from eventlog.events import (
    Attachment,
    Compaction,
    Invocation,
    ModelInput,
    ModelOutput,
    ReasoningPart,
    RefusalPart,
    Section,
    SystemInstructionSet,
    TextPart,
    ToolCall,
    ToolResult,
    ToolResults,
    ToolSpec,
)
from eventlog.projections.window_types import ItemData, Window, WindowItem

__all__ = ["Window"]

ANTHROPIC = Invocation(provider="anthropic", specification="messages", model="claude-x")
OPENAI_CHAT = Invocation(provider="openai", specification="chat.completions", model="gpt-x")
OPENAI_RESPONSES = Invocation(provider="openai", specification="responses", model="gpt-x")
GOOGLE = Invocation(provider="google", specification="generateContent", model="gemini-x")

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
SEARCH = ToolSpec(name="search", parameters={"type": "object", "properties": {}})
TOOLS = (WEATHER, SEARCH)
PATCH = ToolSpec(
    name="apply_patch",
    description="Apply a patch to the repository.",
    format={"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch" /.+/s'},
)
SHELL = ToolSpec(name="run_shell", format={"type": "text"})

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(32))
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f"
INTL = "你好，世界 👋🏽 مرحبا بالعالم — שלום עולם ‏e\u0301\u200d"
BIG = "".join(f"line {i:05d} ünïcødé ✓ {'x' * 20}\n" for i in range(1500))  # ~ 53 KB


def win(
    *data: ItemData,
    system: str | None = "You are helpful.",
    tools: tuple[ToolSpec, ...] = TOOLS,
    screen: tuple[tuple[str, str], ...] = (),
) -> Window:
    """A window of `data` at seqs 1..n; `screen` goes on the last item."""
    items = [WindowItem(seq=i, data=d) for i, d in enumerate(data, 1)]
    if screen and items:
        items[-1] = WindowItem(seq=items[-1].seq, data=items[-1].data, live_screen=screen)
    return Window(stream="conv", seq=len(items), system=system, tools=tools, items=tuple(items))


def text_in(text: str) -> ModelInput:
    return ModelInput.from_text(text)


def text_out(text: str, invocation: Invocation | None = ANTHROPIC) -> ModelOutput:
    return ModelOutput(parts=(TextPart(text=text),), invocation=invocation, stop_reason="end_turn")


def call(id: str, name: str, raw: str, **kw: Any) -> ToolCall:
    return ToolCall.parse(id, name, raw, **kw)


def calls_out(
    *calls: ToolCall,
    text: str = "",
    invocation: Invocation | None = ANTHROPIC,
    parts: tuple[Any, ...] = (),
) -> ModelOutput:
    p = parts + ((TextPart(text=text),) if text else ())
    return ModelOutput(parts=p, tool_calls=calls, invocation=invocation, stop_reason="tool_use")


def ok(call_id: str, name: str, content: str, **kw: Any) -> ToolResult:
    return ToolResult(call_id=call_id, tool_name=name, content=content, **kw)


def results(*rs: ToolResult, error: str | None = None) -> ToolResults:
    return ToolResults(results=rs, execute_error=error)


# ---------------------------------------------------------------------------------------------
# Scenarios named by the issue


def parallel_out_of_order(invocation: Invocation | None = ANTHROPIC) -> Window:
    return win(
        text_in("Weather in Paris and Tokyo?"),
        calls_out(
            call("call_1", "get_weather", '{"city": "Paris"}'),
            call("call_2", "get_weather", '{"city": "Tokyo"}'),
            text="Checking both.",
            invocation=invocation,
        ),
        results(ok("call_2", "get_weather", "22C"), ok("call_1", "get_weather", "18C")),
        text_out("Paris 18C, Tokyo 22C.", invocation),
    )


def failed_tool() -> Window:
    return win(
        text_in("Search it."),
        calls_out(call("c1", "search", '{"q": "x"}')),
        results(ok("c1", "search", "timeout after 30s", status="failed")),
    )


def unparseable_arguments() -> Window:
    return win(
        text_in("Search it."),
        calls_out(call("c1", "search", '{"q": "x"')),
        results(ok("c1", "search", "bad arguments", status="failed")),
    )


def consecutive_inputs() -> Window:
    return win(text_in("First."), text_in("Second."), text_out("Both read."))


def only_tool_calls() -> Window:
    return win(
        text_in("Go."),
        calls_out(call("c1", "search", "{}")),
        results(ok("c1", "search", "found")),
    )


def international() -> Window:
    return win(text_in(INTL), text_out(INTL), text_in(INTL + " ?"))


def big_output() -> Window:
    return win(
        text_in("Dump it."),
        calls_out(call("c1", "search", "{}")),
        results(ok("c1", "search", BIG)),
    )


def system_changed() -> Window:
    return win(
        SystemInstructionSet(text="Answer in English."),
        text_in("Hi"),
        text_out("Hello!"),
        SystemInstructionSet(text="Answer in French."),
        text_in("Hi again"),
        system="Answer in French.",
    )


def thinking_anthropic() -> Window:
    return win(
        text_in("Think, then look up."),
        calls_out(
            call("toolu_01", "search", '{"q": "x"}'),
            text="Looking.",
            parts=(
                ReasoningPart(text="Let me think\u2026 ü", signature="sig+/=A1"),
                ReasoningPart(redacted_data="RED/ACTED=="),
            ),
        ),
        results(ok("toolu_01", "search", "found")),
    )


def reasoning_openai() -> Window:
    return win(
        text_in("Think, then look up."),
        calls_out(
            call("call_9", "search", '{"q": "x"}', item_id="fc_9"),
            invocation=OPENAI_RESPONSES,
            parts=(
                ReasoningPart(
                    text="", item_id="rs_123", encrypted_content="ENC==", summary=("Plan.",)
                ),
            ),
        ),
        results(ok("call_9", "search", "found")),
    )


def thoughts_google() -> Window:
    return win(
        text_in("Think, then look up."),
        ModelOutput(
            parts=(
                ReasoningPart(text="thinking", signature="gsig1"),
                TextPart(text="Looking.", signature="gsig2"),
            ),
            tool_calls=(call("search_0", "search", '{"q": "x"}', signature="gsig3"),),
            invocation=GOOGLE,
        ),
        results(ok("search_0", "search", "found")),
    )


def custom_tools() -> Window:
    """Custom (free-form) tools beside a function tool, called from both OpenAI APIs."""
    return win(
        text_in("Fix the bug, then run the tests."),
        calls_out(
            call("call_c1", "apply_patch", "*** Begin Patch\n+fix\n", item_id="ctc_1", custom=True),
            call("call_f2", "get_weather", '{"city": "Paris"}', item_id="fc_2"),
            invocation=OPENAI_RESPONSES,
        ),
        results(ok("call_c1", "apply_patch", "applied"), ok("call_f2", "get_weather", "18C")),
        calls_out(call("call_c3", "run_shell", "", custom=True), invocation=OPENAI_CHAT),
        results(ok("call_c3", "run_shell", "exit 1", status="failed")),
        text_out("Done.", OPENAI_RESPONSES),
        tools=(WEATHER, PATCH, SHELL),
    )


def image_input() -> Window:
    png = Attachment(media_type="image/png", data=PNG, name="dot.png")
    return win(ModelInput(sections=(Section(text="What is this?"),), attachments=(png,)))


def uploaded_files() -> Window:
    """Files uploaded to a provider (as the importers record them), and URIs of other kinds."""
    attachments = (
        Attachment(media_type="image/*", uri="openai-file:file-img"),
        Attachment(media_type="application/octet-stream", uri="openai-file:file-doc", name="r.pdf"),
        Attachment(media_type="image/*", uri="anthropic-file:file_011"),
        Attachment(media_type="application/pdf", uri="anthropic-file:file_012"),
        Attachment(media_type="image/png", uri="s3://bucket/x.png"),
        Attachment(media_type="image/*", uri="https://example.com/picture"),
    )
    return win(ModelInput(sections=(Section(text="Look."),), attachments=attachments))


def starts_with_output() -> Window:
    return win(text_out("Welcome back."), text_in("Thanks."))


def unanswered() -> Window:
    return win(
        text_in("Do two things."),
        calls_out(call("c1", "search", "{}"), call("c2", "search", '{"q": 2}')),
        results(ok("c1", "search", "one")),
        text_in("Stop, never mind."),
    )


def foreign_artifacts() -> Window:
    """Outputs from all three issuers, each with its artifacts, in one history."""
    return win(
        text_in("Q1"),
        ModelOutput(
            parts=(ReasoningPart(text="a-think", signature="ANTH_SIG"), TextPart(text="A1")),
            invocation=ANTHROPIC,
        ),
        text_in("Q2"),
        ModelOutput(
            parts=(
                ReasoningPart(item_id="rs_OAI", encrypted_content="OAI_ENC", summary=("s",)),
                TextPart(text="A2"),
            ),
            invocation=OPENAI_RESPONSES,
        ),
        text_in("Q3"),
        ModelOutput(
            parts=(ReasoningPart(text="g-think", signature="GOOG_SIG"), TextPart(text="A3")),
            tool_calls=(call("search_0", "search", "{}", signature="GOOG_CALL_SIG"),),
            invocation=GOOGLE,
        ),
        results(ok("search_0", "search", "r")),
        ModelOutput(parts=(ReasoningPart(redacted_data="ANTH_REDACTED"), TextPart(text="A4"))),
    )


ARTIFACTS = ("ANTH_SIG", "ANTH_REDACTED", "rs_OAI", "OAI_ENC", "GOOG_SIG", "GOOG_CALL_SIG")


def empty_after_ingest() -> Window:
    """Outputs that keep little once ingested (issue: request bodies the APIs refused).

    Anthropic thinking with no other block (its server tool blocks not kept), a failed result
    without text; OpenAI reasoning items in a row (the built-in call between them not kept),
    and reasoning between calls, which ModelOutput keeps apart from its parts.
    """
    R = ReasoningPart
    return win(
        text_in("Search the web."),
        ModelOutput(parts=(R(text="I should search.", signature="SIG1"),), invocation=ANTHROPIC),
        text_in("Go on."),
        calls_out(call("toolu_1", "search", "{}")),
        results(ok("toolu_1", "search", "", status="failed")),
        ModelOutput(
            parts=(R(item_id="rs_1"), R(item_id="rs_2"), TextPart(text="Found.", item_id="msg_1")),
            invocation=OPENAI_RESPONSES,
        ),
        text_in("Both at once."),
        calls_out(
            call("call_1", "search", "{}", item_id="fc_1"),
            call("call_2", "search", "{}", item_id="fc_2"),
            invocation=OPENAI_RESPONSES,
            parts=(R(item_id="rs_3", encrypted_content="E3"), R(item_id="rs_4")),
        ),
        results(ok("call_1", "search", "a"), ok("call_2", "search", "b")),
    )


def compaction_and_screen() -> Window:
    return win(
        Compaction(first_seq=1, last_seq=10, summary="We planned a trip."),
        text_in("Where next?"),
        screen=(("notebook", "- Paris\n- Tokyo"), ("clock", "12:00")),
    )


def long_conversation(turns: int = 2000, invocation: Invocation | None = ANTHROPIC) -> Window:
    """`turns` rounds: input, output with a call, its result, output text (4 items each)."""
    data: list[ItemData] = []
    for i in range(turns):
        data.append(text_in(f"question {i}"))
        data.append(calls_out(call(f"call_{i}", "search", f'{{"q": {i}}}'), invocation=invocation))
        data.append(results(ok(f"call_{i}", "search", f"result {i}")))
        data.append(text_out(f"answer {i}", invocation))
    return win(*data)


SCENARIOS = {
    "parallel_out_of_order": parallel_out_of_order,
    "failed_tool": failed_tool,
    "unparseable_arguments": unparseable_arguments,
    "consecutive_inputs": consecutive_inputs,
    "only_tool_calls": only_tool_calls,
    "international": international,
    "big_output": big_output,
    "system_changed": system_changed,
    "thinking_anthropic": thinking_anthropic,
    "reasoning_openai": reasoning_openai,
    "thoughts_google": thoughts_google,
    "custom_tools": custom_tools,
    "image_input": image_input,
    "uploaded_files": uploaded_files,
    "starts_with_output": starts_with_output,
    "unanswered": unanswered,
    "foreign_artifacts": foreign_artifacts,
    "compaction_and_screen": compaction_and_screen,
    "empty_after_ingest": empty_after_ingest,
}


# ---------------------------------------------------------------------------------------------
# Structural invariants, one checker per provider (used by exact, property and long tests)

_ANTHROPIC_ID = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")


def _blank(text: str) -> bool:
    return not text or text.isspace()


# Tool names as the providers document them: OpenAI's "a-z, A-Z, 0-9, or contain underscores
# and dashes, with a maximum length of 64", Anthropic's ^[a-zA-Z0-9_-]{1,64}$, Gemini's "must
# start with a letter or an underscore ... underscores, dots, colons and dashes ... 64".
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
GEMINI_TOOL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$")


def _check_names(names: list[str], rule: re.Pattern[str] = TOOL_NAME) -> None:
    bad = [n for n in names if not rule.match(n)]
    assert not bad, f"tool names the provider refuses: {bad}"


def check_anthropic(body: dict[str, Any]) -> None:
    assert isinstance(body["max_tokens"], int) and body["max_tokens"] > 0
    _check_names([t["name"] for t in body.get("tools", ())])
    _check_names([b["name"] for m in body["messages"] for b in m["content"] if "name" in b])
    messages = body["messages"]
    media = sum(
        1
        for m in messages
        for b in m["content"]
        for x in ([b, *b["content"]] if isinstance(b.get("content"), list) else [b])
        if x["type"] in ("image", "document")
    )
    assert media <= 100, "too many images and documents"
    seen: set[str] = set()
    marks = sum(1 for t in body.get("tools", ()) if "cache_control" in t)
    if isinstance(body.get("system"), list):
        marks += sum(1 for b in body["system"] if "cache_control" in b)
    for i, m in enumerate(messages):
        assert m["role"] == ("user" if i % 2 == 0 else "assistant"), (i, m["role"])
        content = m["content"]
        assert content, i
        kinds = [b["type"] for b in content]
        n_think = len(kinds) - len([k for k in kinds if k not in ("thinking", "redacted_thinking")])
        assert all(k in ("thinking", "redacted_thinking") for k in kinds[:n_think])
        assert all(k not in ("thinking", "redacted_thinking") for k in kinds[n_think:])
        # "The final block in an assistant message cannot be 'thinking'" (nor redacted).
        assert n_think < len(kinds), (i, "a message of thinking blocks only")
        for b in content:
            marks += "cache_control" in b
            if b["type"] == "text":
                assert not _blank(b["text"])
            if b["type"] == "tool_use":
                assert _ANTHROPIC_ID.match(b["id"]) and b["id"] not in seen
                assert isinstance(b["input"], dict)
                seen.add(b["id"])
            if b["type"] == "tool_result" and isinstance(b.get("content"), list):
                assert all(not _blank(x["text"]) for x in b["content"] if x["type"] == "text")
            if b["type"] == "tool_result" and isinstance(b.get("content"), str):
                assert not _blank(b["content"])
            if b["type"] == "tool_result" and b.get("is_error"):
                # "content cannot be empty if `is_error` is true"
                assert b.get("content"), (i, "an error result without content")
                # "all content must be type 'text' if 'is_error' is true"
                assert isinstance(b["content"], str) or all(
                    x["type"] == "text" for x in b["content"]
                ), (i, "an error result with non-text content")
        uses = [b["id"] for b in content if b["type"] == "tool_use"]
        answers = [b["tool_use_id"] for b in content if b["type"] == "tool_result"]
        assert answers == [b.get("tool_use_id") for b in content[: len(answers)]]
        if answers:
            prev = [b["id"] for b in messages[i - 1]["content"] if b["type"] == "tool_use"]
            assert sorted(answers) == sorted(prev), (answers, prev)
        if uses:
            assert i + 1 < len(messages), "tool_use in the last message"
            # tool_use blocks end their message: with extended thinking the API refuses a
            # text block after a tool_use (stacklok/mecatl#1465, vercel/ai#16312).
            assert all(k == "tool_use" for k in kinds[len(kinds) - len(uses) :]), kinds
    assert marks <= 4


def check_openai_chat(body: dict[str, Any]) -> None:
    messages = body["messages"]
    _check_names([t[t["type"]]["name"] for t in body.get("tools", ())])
    _check_names([c[c["type"]]["name"] for m in messages for c in m.get("tool_calls") or ()])
    i = 0
    seen: set[str] = set()
    while i < len(messages):
        m = messages[i]
        assert m["role"] in ("system", "developer", "user", "assistant"), m["role"]
        if m["role"] == "assistant":
            assert m["content"] is None or isinstance(m["content"], str)
            calls = m.get("tool_calls", [])
            assert m["content"] is not None or calls or m.get("refusal")
            assert len(calls) <= 128, "tool_calls: array too long (maximum length 128)"
            ids = [c["id"] for c in calls]
            for c in calls:
                assert len(c["id"]) <= 40 and c["id"] not in seen
                if c["type"] == "custom":
                    assert isinstance(c["custom"]["input"], str)
                else:
                    assert c["type"] == "function"
                    assert isinstance(c["function"]["arguments"], str)
                seen.add(c["id"])
            following = [x.get("tool_call_id") for x in messages[i + 1 : i + 1 + len(ids)]]
            assert following == ids, (following, ids)
            assert all(x["role"] == "tool" for x in messages[i + 1 : i + 1 + len(ids)])
            i += 1 + len(ids)
            continue
        i += 1


def check_openai_responses(body: dict[str, Any]) -> None:
    items = body["input"]
    _check_names([t["name"] for t in body.get("tools", ())])
    _check_names(
        [i["name"] for i in items if i.get("type") in ("function_call", "custom_tool_call")]
    )
    called: dict[str, int] = {}
    answered: set[str] = set()
    kinds: dict[str, str] = {}
    for i, item in enumerate(items):
        kind = item.get("type")
        if kind in ("function_call", "custom_tool_call"):
            assert item["call_id"] not in called and len(item["call_id"]) <= 64
            assert isinstance(item["arguments" if kind == "function_call" else "input"], str)
            called[item["call_id"]] = i
            kinds[item["call_id"]] = kind
        elif kind in ("function_call_output", "custom_tool_call_output"):
            assert item["call_id"] in called and item["call_id"] not in answered
            assert kind == kinds[item["call_id"]] + "_output"
            answered.add(item["call_id"])
        elif kind == "reasoning":
            # "Item 'rs_...' of type 'reasoning' was provided without its required following
            # item": a message or a call, never another reasoning item.
            nxt = items[i + 1]
            assert (
                nxt.get("type") in ("function_call", "custom_tool_call")
                or nxt.get("role") == "assistant"
            ), (i, nxt.get("type"))
        else:
            assert kind == "message" and item["role"] in ("user", "assistant", "developer")
            assert item["content"]
    assert answered == set(called)
    # outputs come right after their run of calls, before anything else
    calls_and_outputs = (
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
    )
    for i, item in enumerate(items):
        if item.get("type") in ("function_call_output", "custom_tool_call_output"):
            prev = items[i - 1].get("type")
            assert prev in calls_and_outputs, prev
            # No message between a call and its output (servers that pair them strictly
            # refuse one); only calls, outputs and the reasoning before a call.
            j = called[item["call_id"]]
            between = [x.get("type") for x in items[j + 1 : i]]
            assert set(between) <= {*calls_and_outputs, "reasoning"}, between


def check_gemini(body: dict[str, Any]) -> None:
    contents = body["contents"]
    declared = [d["name"] for t in body.get("tools", ()) for d in t.get("functionDeclarations", ())]
    _check_names(declared, GEMINI_TOOL_NAME)
    _check_names(
        [
            p[k]["name"]
            for c in contents
            for p in c["parts"]
            for k in ("functionCall", "functionResponse")
            if k in p
        ],
        GEMINI_TOOL_NAME,
    )
    for i, c in enumerate(contents):
        assert c["role"] == ("user" if i % 2 == 0 else "model"), (i, c["role"])
        assert c["parts"]
        for p in c["parts"]:
            if "text" in p and "thoughtSignature" not in p:
                assert not _blank(p["text"])
        responses = [p["functionResponse"]["name"] for p in c["parts"] if "functionResponse" in p]
        assert responses == [
            p.get("functionResponse", {}).get("name") for p in c["parts"][: len(responses)]
        ]
        if c["role"] == "model":
            names = [p["functionCall"]["name"] for p in c["parts"] if "functionCall" in p]
            if names:
                nxt = contents[i + 1]["parts"]
                got = [p["functionResponse"]["name"] for p in nxt if "functionResponse" in p]
                assert got == names, (got, names)
        elif i > 0:
            prev = [p for p in contents[i - 1]["parts"] if "functionCall" in p]
            assert len(responses) == len(prev)
        else:
            assert not responses


CHECKERS = {
    "anthropic": check_anthropic,
    "openai-chat": check_openai_chat,
    "openai-responses": check_openai_responses,
    "gemini": check_gemini,
}


# ---------------------------------------------------------------------------------------------
# Random windows (hypothesis)

ISSUERS = {"anthropic": ANTHROPIC, "openai": OPENAI_RESPONSES, "google": GOOGLE, "none": None}
RECEIVERS = {
    "anthropic": ("anthropic",),
    "openai": ("openai-responses",),
    "google": ("gemini",),
    "none": (),
}
"""Which renderers may show an issuer's artifacts."""

_texts = st.sampled_from(["", " ", "\n\t", "hi", "你好 👋🏽", "مرحبا", "a\u200db", "two\n\nlines "])
_ids = st.sampled_from(["c1", "c2", "call_3", "toolu 4", "x" * 80, "a.b/c", "é", "c1~2"])
_tool_names = st.sampled_from(["search", "files.read", "mcp:fs/read", "9lives", "名前", "y" * 70])


@st.composite
def _output(draw: st.DrawFn, tag: str, calls: list[ToolCall]) -> ModelOutput:
    issuer = draw(st.sampled_from(sorted(ISSUERS)))
    parts: list[Any] = []
    for k in range(draw(st.integers(0, 3))):
        art = f"ART-{issuer}-{tag}-{k}"
        parts.append(
            draw(
                st.sampled_from(
                    [
                        TextPart(text=draw(_texts)),
                        TextPart(text=draw(_texts), signature=art),
                        ReasoningPart(text=draw(_texts), signature=art),
                        ReasoningPart(redacted_data=art),
                        ReasoningPart(item_id=art, encrypted_content=art + "e", summary=("s",)),
                        RefusalPart(text=draw(_texts)),
                    ]
                )
            )
        )
    # Where each call stood among the parts, as Responses ingest records it; also unrecorded,
    # out of range and out of order, which every renderer must survive.
    places = st.none() | st.integers(-1, len(parts) + 1)
    placed = tuple(msgspec.structs.replace(c, after=draw(places)) for c in calls)
    return ModelOutput(parts=tuple(parts), tool_calls=placed, invocation=ISSUERS[issuer])


@st.composite
def windows(draw: st.DrawFn) -> Window:
    """Random histories: inputs, outputs with calls (odd ids, bad arguments, artifacts of every
    issuer), results partial / out of order / orphaned, compactions, instruction changes."""
    data: list[ItemData] = []
    open_calls: list[ToolCall] = []
    for n in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["input", "output", "results", "results", "other"]))
        if kind == "input":
            png = Attachment(media_type="image/png", data=PNG)
            atts = (png,) if draw(st.booleans()) else ()
            data.append(ModelInput(sections=(Section(text=draw(_texts)),), attachments=atts))
        elif kind == "output":
            ids = draw(st.lists(_ids, max_size=3, unique=True))
            raw = st.sampled_from(["{}", '{"a": 1}', '{"a"', "[1]", ""])
            open_calls = [
                call(i, draw(_tool_names), draw(raw), custom=draw(st.booleans())) for i in ids
            ]
            data.append(draw(_output(str(n), open_calls)))
        elif kind == "results":
            answered = draw(st.permutations(open_calls))[: draw(st.integers(0, len(open_calls)))]
            rs = [
                ok(
                    c.id,
                    c.name,
                    draw(_texts),
                    status=draw(st.sampled_from(["success", "failed", "skipped"])),
                )
                for c in answered
            ]
            if draw(st.booleans()):
                rs.append(ok("ghost", "search", "orphan"))
            data.append(results(*rs, error=draw(st.sampled_from([None, "host crashed"]))))
        else:
            data.append(
                draw(
                    st.sampled_from(
                        [
                            Compaction(first_seq=1, last_seq=2, summary="earlier"),
                            SystemInstructionSet(text="New rules."),
                        ]
                    )
                )
            )
    screen = (("notes", "- a"),) if draw(st.booleans()) else ()
    system = draw(st.sampled_from([None, "Be brief.", " "]))
    return win(*data, system=system, screen=screen)
