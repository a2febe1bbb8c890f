"""Hypothesis strategy for valid conversations (every tool call answered in order, etc.)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

import eventlog as el
from tests.strategies import json_values, names, sections, texts

TOOLS = ("read_file", "run_tests", "search")

_invocations = st.sampled_from(
    [
        el.Invocation(provider="anthropic", specification="messages", model="claude"),
        el.Invocation(provider="openai", specification="chat.completions", model="gpt"),
        None,
    ]
)
_usages = st.none() | st.builds(
    el.Usage,
    prompt_tokens=st.integers(0, 5000),
    completion_tokens=st.integers(0, 500),
    cached_prompt_tokens=st.integers(0, 1000),
    reasoning_tokens=st.integers(0, 100),
)

steps: st.SearchStrategy[tuple[Any, ...]] = st.one_of(
    st.tuples(st.just("system"), texts),
    st.tuples(st.just("toolset"), st.lists(st.sampled_from(TOOLS), unique=True, max_size=3)),
    st.tuples(st.just("input"), st.lists(sections, min_size=1, max_size=2).map(tuple)),
    st.tuples(
        st.just("turn"),
        st.lists(st.sampled_from(TOOLS), max_size=3),
        _invocations,
        _usages,
        st.integers(0, 2),  # events between the output and its results
        st.booleans(),  # results by an execute_error instead
    ),
    st.tuples(st.just("skill"), st.sampled_from(["pptx", "pdf", "sql"]), st.none() | texts),
    st.tuples(st.just("widget"), st.sampled_from(["notes", "todo"]), texts),
    st.tuples(st.just("checkpoint"), st.sampled_from(["a", "b", "c"])),
    st.tuples(st.just("compaction"), st.floats(0, 1), st.floats(0, 1), texts),
    st.tuples(st.just("custom"), names, json_values),
)


def build(plan: list[tuple[Any, ...]]) -> list[el.EventData]:
    """Turn a plan of steps into the events of a valid conversation."""
    out: list[el.EventData] = []
    for step in plan:
        kind = step[0]
        if kind == "system":
            out.append(el.SystemInstructionSet(text=step[1]))
        elif kind == "toolset":
            out.append(el.ToolsetDefined(tools=tuple(el.ToolSpec(name=n) for n in step[1])))
        elif kind == "input":
            out.append(el.ModelInput(sections=step[1]))
        elif kind == "turn":
            made = [
                el.ToolCall.parse(f"call_{len(out)}_{i}", n, '{"x": 1}')
                for i, n in enumerate(step[1])
            ]
            out.extend(_turn(made, *step[2:]))
        elif kind == "skill":
            out.append(el.SkillActivated(name=step[1], instructions=step[2]))
        elif kind == "widget":
            out.append(el.WidgetUpdated(widget=step[1], state=step[2]))
        elif kind == "checkpoint":
            out.append(el.Checkpoint(label=step[1]))
        elif kind == "compaction":
            n = len(out)
            if n:
                first = 1 + int(step[1] * (n - 1))
                last = first + int(step[2] * (n - first))
                out.append(el.Compaction(first_seq=first, last_seq=last, summary=step[3]))
        elif kind == "custom":
            out.append(el.Custom(kind=step[1], data=step[2]))
    return out


def _turn(
    made: list[el.ToolCall], invocation: Any, usage: Any, between: int, failed: bool
) -> list[el.EventData]:
    out: list[el.EventData] = [
        el.ModelOutput(
            parts=(el.TextPart(text="ok"),),
            tool_calls=tuple(made),
            invocation=invocation,
            usage=usage,
        )
    ]
    out.extend(el.WidgetUpdated(widget="progress", state=f"step {i}") for i in range(between))
    if made and failed:
        out.append(el.ToolResults(execute_error="sandbox is down"))
    elif made:
        results = tuple(el.ToolResult(call_id=c.id, tool_name=c.name, content="done") for c in made)
        out.append(el.ToolResults(results=results))
    return out


conversations = st.lists(steps, min_size=1, max_size=18).map(build).filter(bool)
