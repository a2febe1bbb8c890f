"""Random conversations for the window tests, and an independent oracle of the window rules."""

from __future__ import annotations

from dataclasses import dataclass

import hypothesis.strategies as st

from eventlog.events import (
    Compaction,
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
    ToolSpec,
    Usage,
    WidgetUpdated,
)

INVOCATION = Invocation(provider="anthropic", specification="messages", model="claude-x")
TOOLS = (
    ToolSpec(name="search", description="Search the web.", parameters={"type": "object"}),
    ToolSpec(name="read_file", parameters={"type": "object", "properties": {}}),
)
words = st.sampled_from(
    ["the", "model", "reads", "file", "上下文", "窗口", "令牌", "预算", "🙂", "x=1;", "{}", "函数"]
)
text = st.lists(words, min_size=1, max_size=40).map(" ".join)


@st.composite
def section(draw: st.DrawFn) -> Section:
    body = draw(text)
    lod = draw(st.sampled_from(["none", "summary", "both", "gist"]))
    summary = body[: max(1, len(body) // 3)] if lod in ("summary", "both") else None
    gist = body[:5] if lod in ("gist", "both") else None
    return Section(
        text=body, title=draw(st.sampled_from(["", "request"])), summary=summary, gist=gist
    )


@st.composite
def conversations(draw: st.DrawFn) -> list[EventData]:
    """A system instruction, a toolset, then turns: inputs, outputs with parallel calls, results
    (split, out of order, failed, missing, execute errors), instruction changes, widget updates,
    compactions of earlier ranges."""
    out: list[EventData] = [SystemInstructionSet(text=draw(text)), ToolsetDefined(tools=TOOLS)]
    n_turns = draw(st.integers(1, 8))
    call_n = 0
    for _ in range(n_turns):
        roll = draw(st.integers(0, 9))
        if roll == 0:
            out.append(SystemInstructionSet(text=draw(text)))
        elif roll == 1:
            out.append(
                WidgetUpdated(widget=draw(st.sampled_from(["notes", "clock"])), state=draw(text))
            )
        elif roll == 2 and len(out) > 4:
            first = draw(st.integers(3, len(out)))
            last = draw(st.integers(first, len(out)))
            out.append(Compaction(first_seq=first, last_seq=last, summary=draw(text)))
        out.append(ModelInput(sections=tuple(draw(st.lists(section(), min_size=1, max_size=2)))))
        for _ in range(draw(st.integers(0, 2))):
            calls = []
            for _ in range(draw(st.integers(0, 3))):
                call_n += 1
                calls.append(ToolCall.parse(f"c{call_n}", "search", '{"q": "x"}'))
            out.append(
                ModelOutput(
                    parts=(TextPart(text=draw(text)),),
                    tool_calls=tuple(calls),
                    invocation=INVOCATION,
                    usage=Usage(prompt_tokens=draw(st.integers(0, 5000))),
                )
            )
            if not calls:
                continue
            answered = draw(st.permutations(calls))
            answered = (
                answered[: draw(st.integers(0, len(answered)))] if draw(st.booleans()) else answered
            )
            split = draw(st.integers(0, len(answered)))
            for chunk in (answered[:split], answered[split:]):
                if not chunk:
                    continue
                body = draw(text)
                results = tuple(
                    ToolResult(
                        call_id=c.id,
                        tool_name=c.name,
                        status=draw(st.sampled_from(["success", "failed"])),
                        content=body,
                        summary=body[:8] if draw(st.booleans()) else None,
                        gist=body[:3] if draw(st.booleans()) else None,
                    )
                    for c in chunk
                )
                out.append(ToolResults(results=results))
            if draw(st.integers(0, 5)) == 0:
                out.append(ToolResults(execute_error="host crashed"))
    return out


@dataclass
class Oracle:
    """What the rules say, computed without the window code."""

    groups: dict[int, int]
    """seq of each output / results / input -> seq its unit starts at."""
    pinned: set[int]
    """Unit starts that must be kept."""
    newest_input: int
    system: str | None
    superseded: set[int]
    """Instructions another followed with nothing shown between: never in a window."""


def oracle(events: list[EventData]) -> Oracle:
    groups: dict[int, int] = {}
    open_start = 0
    open_ids: set[str] = set()
    answered: set[str] = set()
    last_input = last_io = last_entry = instruction = 0
    system = None
    superseded: set[int] = set()
    previous = 0  # the latest instruction, while nothing shown has followed it
    for seq, data in enumerate(events, 1):
        if isinstance(data, SystemInstructionSet):
            if previous:
                superseded.add(previous)
            previous = seq
        elif isinstance(data, ModelInput | ModelOutput | ToolResults):
            previous = 0
        elif isinstance(data, Compaction) and min(data.first_seq, seq) > previous:
            previous = 0  # its summary sits after the instruction (else before it)
        if isinstance(data, ModelInput):
            groups[seq] = seq
            last_input = last_io = last_entry = seq
        elif isinstance(data, ModelOutput):
            groups[seq] = seq
            open_start = seq if data.tool_calls else 0
            open_ids = {c.id for c in data.tool_calls}
            answered = set()
            last_entry = seq
        elif isinstance(data, ToolResults):
            matched = {r.call_id for r in data.results if r.call_id in open_ids} - answered
            if open_start and (matched or data.execute_error):
                groups[seq] = open_start
                answered |= matched
                if answered == open_ids:
                    open_start = 0
            else:
                groups[seq] = seq
            last_io = last_entry = seq
        elif isinstance(data, SystemInstructionSet):
            groups[seq] = seq
            instruction = seq
            system = data.text
    pinned = {groups[s] for s in (last_input, last_io, last_entry, instruction) if s}
    return Oracle(
        groups=groups,
        pinned=pinned,
        newest_input=last_input,
        system=system,
        superseded=superseded,
    )
