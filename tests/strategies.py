"""Hypothesis strategies for every event kind (shared by the contract and property tests)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

import eventlog as el

texts = st.text(max_size=60)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=12)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
json_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | finite | texts
json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=10,
)
json_objects = st.dictionaries(texts, json_values, max_size=4)

sections = st.builds(
    el.Section,
    text=texts,
    title=texts,
    summary=st.none() | texts,
    gist=st.none() | texts,
)
attachments = st.one_of(
    st.builds(el.Attachment, media_type=st.just("image/png"), data=st.binary(max_size=64)),
    st.builds(el.Attachment, media_type=st.just("application/pdf"), uri=texts, name=texts),
)
parts = st.one_of(
    st.builds(el.TextPart, text=texts, signature=st.none() | texts),
    st.builds(
        el.ReasoningPart,
        text=texts,
        signature=st.none() | texts,
        redacted_data=st.none() | texts,
        item_id=st.none() | texts,
        encrypted_content=st.none() | texts,
        summary=st.lists(texts, max_size=2).map(tuple),
    ),
    st.builds(el.RefusalPart, text=texts),
)
tool_calls = st.builds(
    el.ToolCall.parse,
    st.uuids().map(lambda u: f"call_{u.hex[:12]}"),
    names,
    st.one_of(json_objects.map(lambda d: el.events.msgspec.json.encode(d).decode()), texts),
)
tool_results = st.builds(
    el.ToolResult,
    call_id=names,
    tool_name=names,
    status=st.sampled_from(["success", "failed", "skipped"]),
    content=texts,
    summary=st.none() | texts,
    gist=st.none() | texts,
    attachments=st.lists(attachments, max_size=1).map(tuple),
    elapsed_ms=st.none() | finite,
)


def _unique_calls(calls: list[el.ToolCall]) -> tuple[el.ToolCall, ...]:
    seen: dict[str, el.ToolCall] = {}
    for c in calls:
        seen.setdefault(c.id, c)
    return tuple(seen.values())


event_data: st.SearchStrategy[el.EventData] = st.one_of(
    st.builds(el.SystemInstructionSet, text=texts),
    st.builds(
        el.ToolsetDefined,
        tools=st.lists(
            st.builds(el.ToolSpec, name=names, description=texts, parameters=json_objects),
            max_size=3,
            unique_by=lambda t: t.name,
        ).map(tuple),
    ),
    st.builds(
        el.ModelInput,
        sections=st.lists(sections, min_size=1, max_size=3).map(tuple),
        attachments=st.lists(attachments, max_size=2).map(tuple),
    ),
    st.builds(
        el.ModelOutput,
        parts=st.lists(parts, max_size=3).map(tuple),
        tool_calls=st.lists(tool_calls, max_size=3).map(_unique_calls),
        invocation=st.none()
        | st.builds(el.Invocation, provider=names, specification=names, model=names),
        usage=st.none()
        | st.builds(
            el.Usage,
            prompt_tokens=st.integers(0, 10**6),
            completion_tokens=st.integers(0, 10**6),
            cached_prompt_tokens=st.integers(0, 10**6),
        ),
        stop_reason=st.none() | names,
    ),
    st.builds(
        el.ToolResults,
        results=st.lists(tool_results, max_size=3).map(tuple),
        execute_error=st.none() | texts,
    ),
    st.integers(1, 50).flatmap(
        lambda a: st.builds(
            el.Compaction,
            first_seq=st.just(a),
            last_seq=st.integers(a, a + 50),
            summary=texts,
            summarizer=names,
        )
    ),
    st.builds(el.Checkpoint, label=names),
    st.builds(el.WidgetUpdated, widget=names, state=texts),
    st.builds(el.SkillActivated, name=names, instructions=st.none() | texts),
    st.builds(el.Custom, kind=names, data=json_values),
)

metas = st.dictionaries(names, json_scalars, max_size=3)
events = st.builds(
    el.Event,
    data=event_data,
    meta=metas,
    causation_id=st.none() | st.uuids().map(str),
    correlation_id=st.none() | st.uuids().map(str),
)
