"""Import an OpenAI Responses `input` list (plus `instructions`, `tools`) as events."""

from __future__ import annotations

from typing import Any

from eventlog.events import (
    Attachment,
    EventData,
    Invocation,
    Part,
    ReasoningPart,
    RefusalPart,
    Section,
    TextPart,
    ToolCall,
    ToolSpec,
)
from eventlog.projections.providers.common import file_uri
from eventlog.projections.providers.import_base import (
    HistoryBuilder,
    Where,
    attachment_from_base64,
    attachment_from_url,
    checked,
    custom_tool,
    need,
)

SYSTEM_ROLES = ("system", "developer")
_OUTPUT_ITEMS = ("reasoning", "function_call", "custom_tool_call")
_RESULT_ITEMS = ("function_call_output", "custom_tool_call_output")


def tools_from(tools: Any, at: Where) -> list[ToolSpec]:
    """ToolSpecs from a Responses `tools` list (function and custom tools)."""
    if not isinstance(tools, list):
        raise at.error("expected a list")
    specs = []
    for i, tool in enumerate(tools):
        t_at = at / i
        kind = need(tool, "type", str, t_at)
        if kind == "custom":
            specs.append(custom_tool(tool, t_at))
            continue
        if kind != "function":
            raise (t_at / "type").error(
                f"unsupported tool type {kind!r}; only function and custom tools"
            )
        specs.append(
            ToolSpec(
                name=need(tool, "name", str, t_at),
                description=need(tool, "description", str, t_at, ""),
                parameters=need(
                    tool, "parameters", dict, t_at, {"type": "object", "properties": {}}
                ),
            )
        )
    return specs


def _input_part(part: Any, at: Where) -> Section | Attachment:
    kind = need(part, "type", str, at)
    if kind == "input_text":
        return Section(text=need(part, "text", str, at))
    if kind == "input_image":
        url = need(part, "image_url", str, at, None)
        if url is not None:
            return attachment_from_url(url, at / "image_url", fallback_type="image/*")
        file_id = need(part, "file_id", str, at)
        return checked(
            lambda: Attachment(media_type="image/*", uri=file_uri("openai", file_id)), at
        )
    if kind == "input_file":
        name = need(part, "filename", str, at, None)
        data = need(part, "file_data", str, at, None)
        if data is not None:
            if data.startswith("data:"):
                return attachment_from_url(
                    data, at / "file_data", fallback_type="application/octet-stream", name=name
                )
            return attachment_from_base64(data, "application/pdf", at / "file_data", name)
        url = need(part, "file_url", str, at, None)
        if url is not None:
            return attachment_from_url(
                url, at / "file_url", fallback_type="application/octet-stream", name=name
            )
        file_id = need(part, "file_id", str, at)
        return checked(
            lambda: Attachment(
                media_type="application/octet-stream", uri=file_uri("openai", file_id), name=name
            ),
            at,
        )
    raise (at / "type").error(f"unsupported input content type {kind!r}")


def _parts_of(content: Any, at: Where) -> tuple[list[Section], list[Attachment]]:
    if isinstance(content, str):
        return [Section(text=content)], []
    if not isinstance(content, list) or not content:
        raise at.error("expected a string or a non-empty list of content parts")
    sections: list[Section] = []
    attachments: list[Attachment] = []
    for i, part in enumerate(content):
        item = _input_part(part, at / i)
        if isinstance(item, Section):
            sections.append(item)
        else:
            attachments.append(item)
    return sections, attachments


def _assistant_parts(
    content: Any, at: Where, item_id: str | None = None, phase: str | None = None
) -> list[Part]:
    """An assistant message's parts; its text keeps the message's id and phase (sent back)."""
    if isinstance(content, str):
        return [TextPart(text=content, item_id=item_id, phase=phase)] if content else []
    if not isinstance(content, list):
        raise at.error(f"expected a string or a list, got {type(content).__name__}")
    parts: list[Part] = []
    for i, c in enumerate(content):
        kind = need(c, "type", str, at / i)
        if kind in ("output_text", "input_text"):
            parts.append(TextPart(text=need(c, "text", str, at / i), item_id=item_id, phase=phase))
        elif kind == "refusal":
            parts.append(RefusalPart(text=need(c, "refusal", str, at / i)))
        else:
            raise (at / i / "type").error(f"unsupported assistant content type {kind!r}")
    return parts


class _Output:
    """Consecutive assistant items (reasoning, message, calls) that form one ModelOutput."""

    def __init__(self, at: Where) -> None:
        self.at = at
        self.parts: list[Part] = []
        self.calls: list[ToolCall] = []

    def add(self, item: dict[str, Any], kind: str, at: Where) -> None:
        if kind == "reasoning":
            summary = need(item, "summary", list, at, [])
            content = need(item, "content", list, at, [])
            self.parts.append(
                ReasoningPart(
                    text="".join(
                        need(c, "text", str, at / "content" / i) for i, c in enumerate(content)
                    ),
                    item_id=need(item, "id", str, at, None),
                    encrypted_content=need(item, "encrypted_content", str, at, None),
                    summary=tuple(
                        need(s, "text", str, at / "summary" / i) for i, s in enumerate(summary)
                    ),
                )
            )
        elif kind == "function_call":
            self.calls.append(
                ToolCall.parse(
                    need(item, "call_id", str, at),
                    need(item, "name", str, at),
                    need(item, "arguments", str, at, ""),
                    item_id=need(item, "id", str, at, None),
                    after=len(self.parts),
                )
            )
        elif kind == "custom_tool_call":
            self.calls.append(
                ToolCall.parse(
                    need(item, "call_id", str, at),
                    need(item, "name", str, at),
                    need(item, "input", str, at, ""),
                    item_id=need(item, "id", str, at, None),
                    custom=True,
                    after=len(self.parts),
                )
            )
        else:
            self.parts += _assistant_parts(
                need(item, "content", object, at),
                at / "content",
                need(item, "id", str, at, None),
                need(item, "phase", str, at, None),
            )


def _result(builder: HistoryBuilder, item: dict[str, Any], at: Where) -> None:
    output = need(item, "output", object, at)
    attachments: list[Attachment] = []
    if isinstance(output, str):
        text = output
    else:
        sections, attachments = _parts_of(output, at / "output")
        text = "\n\n".join(s.text for s in sections)
    builder.result(
        need(item, "call_id", str, at), text, at / "call_id", attachments=tuple(attachments)
    )


def events_from_responses(body: Any) -> list[EventData]:
    """Events from `{"input", "instructions", "tools", "model"}`, an input list, or a string."""
    request = Where("request")
    if isinstance(body, dict):
        items = need(body, "input", object, request)
        instructions = need(body, "instructions", str, request, "")
        tools = body.get("tools")
        model = need(body, "model", str, request, "")
    else:
        items, instructions, tools, model = body, "", None, ""
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise Where("input").error(
            f"expected a list of items or a string, got {type(items).__name__}"
        )
    builder = HistoryBuilder(Invocation(provider="openai", specification="responses", model=model))
    if instructions:
        builder.system(instructions)
    # Leading system / developer messages join the instructions before the toolset, as in
    # the Chat import: an instruction after the toolset would replace them, not add to them.
    start = 0
    while start < len(items) and _is_instruction(items[start]):
        at = Where(f"input[{start}]", start)
        _message(builder, items[start], items[start]["role"], at)
        start += 1
    if tools:
        builder.toolset(tools_from(tools, Where("tools")), Where("tools"))
    _items(builder, items, start)
    return builder.finish()


def _is_instruction(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and item.get("type", "message") == "message"
        and item.get("role") in SYSTEM_ROLES
    )


def _items(builder: HistoryBuilder, items: list[Any], start: int = 0) -> None:
    """Fold input items from `start`; consecutive assistant items become one output."""
    pending: _Output | None = None
    for index in range(start, len(items)):
        item = items[index]
        at = Where(f"input[{index}]", index)
        if not isinstance(item, dict):
            raise at.error(f"expected an item object, got {type(item).__name__}")
        role = item.get("role")
        kind = need(item, "type", str, at, "message")
        is_output = kind in _OUTPUT_ITEMS or (kind == "message" and role == "assistant")
        if pending is not None and not is_output:
            builder.output(pending.parts, pending.calls, pending.at)
            pending = None
        if is_output:
            pending = pending or _Output(at)
            pending.add(item, kind, at)
        elif kind in _RESULT_ITEMS:
            _result(builder, item, at)
        elif kind != "message":
            raise (at / "type").error(f"unsupported item type {kind!r}")
        else:
            _message(builder, item, role, at)
    if pending is not None:
        builder.output(pending.parts, pending.calls, pending.at)


def _message(builder: HistoryBuilder, item: dict[str, Any], role: Any, at: Where) -> None:
    if role in SYSTEM_ROLES:
        sections, attachments = _parts_of(need(item, "content", object, at), at / "content")
        if attachments:
            raise (at / "content").error("a system message can only hold text")
        builder.system("\n\n".join(s.text for s in sections))
    elif role == "user":
        sections, attachments = _parts_of(need(item, "content", object, at), at / "content")
        builder.input(sections, attachments, at / "content")
    else:
        raise (at / "role").error(f"unknown role {role!r}")


__all__ = ["events_from_responses", "tools_from"]
