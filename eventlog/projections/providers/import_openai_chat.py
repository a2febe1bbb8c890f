"""Import an OpenAI Chat Completions `messages` list (plus optional `tools`) as events."""

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
    custom_tool,
    need,
)

SYSTEM_ROLES = ("system", "developer")


def tools_from(tools: Any, at: Where) -> list[ToolSpec]:
    """ToolSpecs from a Chat Completions `tools` list (function and custom tools)."""
    if not isinstance(tools, list):
        raise at.error("expected a list")
    specs = []
    for i, tool in enumerate(tools):
        t_at = at / i
        kind = need(tool, "type", str, t_at, "function")
        if kind == "custom":
            specs.append(custom_tool(need(tool, "custom", dict, t_at), t_at / "custom"))
            continue
        if kind != "function":
            raise (t_at / "type").error(f"unsupported tool type {kind!r}")
        fn = need(tool, "function", dict, t_at)
        specs.append(
            ToolSpec(
                name=need(fn, "name", str, t_at / "function"),
                description=need(fn, "description", str, t_at / "function", ""),
                parameters=need(
                    fn, "parameters", dict, t_at / "function", {"type": "object", "properties": {}}
                ),
            )
        )
    return specs


def _text_of(content: Any, at: Where, kinds: tuple[str, ...] = ("text",)) -> str:
    """Text of a string or a list of text parts (joined by blank lines)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise at.error(f"expected a string or a list of parts, got {type(content).__name__}")
    texts = []
    for i, part in enumerate(content):
        kind = need(part, "type", str, at / i)
        if kind not in kinds:
            raise (at / i / "type").error(f"unsupported content part type {kind!r} here")
        texts.append(need(part, "text", str, at / i))
    return "\n\n".join(texts)


def _user_part(part: Any, at: Where) -> Section | Attachment:
    kind = need(part, "type", str, at)
    if kind == "text":
        return Section(text=need(part, "text", str, at))
    if kind == "image_url":
        image = need(part, "image_url", dict, at)
        return attachment_from_url(
            need(image, "url", str, at / "image_url"), at, fallback_type="image/*"
        )
    if kind == "input_audio":
        audio = need(part, "input_audio", dict, at)
        fmt = need(audio, "format", str, at / "input_audio")
        return attachment_from_base64(
            need(audio, "data", str, at / "input_audio"), f"audio/{fmt}", at
        )
    if kind == "file":
        file = need(part, "file", dict, at)
        name = need(file, "filename", str, at / "file", None)
        data = need(file, "file_data", str, at / "file", None)
        if data is not None:
            if data.startswith("data:"):
                return attachment_from_url(
                    data, at / "file", fallback_type="application/octet-stream", name=name
                )
            return attachment_from_base64(data, "application/pdf", at / "file", name)
        file_id = need(file, "file_id", str, at / "file")
        return Attachment(
            media_type="application/octet-stream", uri=file_uri("openai", file_id), name=name
        )
    raise (at / "type").error(f"unsupported content part type {kind!r}")


def _user(builder: HistoryBuilder, content: Any, at: Where) -> None:
    if isinstance(content, str):
        builder.input([Section(text=content)], [], at)
        return
    if not isinstance(content, list) or not content:
        raise at.error("expected a string or a non-empty list of parts")
    sections: list[Section] = []
    attachments: list[Attachment] = []
    for i, part in enumerate(content):
        item = _user_part(part, at / i)
        if isinstance(item, Section):
            sections.append(item)
        else:
            attachments.append(item)
    builder.input(sections, attachments, at)


def _call(raw: Any, at: Where) -> ToolCall:
    call_id = need(raw, "id", str, at)
    if need(raw, "type", str, at, "function") == "custom":
        custom = need(raw, "custom", dict, at)
        return ToolCall.parse(
            call_id,
            need(custom, "name", str, at / "custom"),
            need(custom, "input", str, at / "custom"),
            custom=True,
        )
    fn = need(raw, "function", dict, at)
    return ToolCall.parse(
        call_id,
        need(fn, "name", str, at / "function"),
        need(fn, "arguments", str, at / "function", ""),
    )


def _assistant(builder: HistoryBuilder, message: dict[str, Any], at: Where) -> None:
    parts: list[Part] = []
    for key in ("reasoning_content", "reasoning"):
        if isinstance(message.get(key), str) and message[key]:
            parts.append(ReasoningPart(text=message[key]))
            break
    content = message.get("content")
    if isinstance(content, list):
        for i, part in enumerate(content):
            kind = need(part, "type", str, at / "content" / i)
            if kind == "text":
                parts.append(TextPart(text=need(part, "text", str, at / "content" / i)))
            elif kind == "refusal":
                parts.append(RefusalPart(text=need(part, "refusal", str, at / "content" / i)))
            else:
                raise (at / "content" / i / "type").error(f"unsupported content part type {kind!r}")
    elif isinstance(content, str):
        if content:
            parts.append(TextPart(text=content))
    elif content is not None:
        raise (at / "content").error(
            f"expected a string, a list or null, got {type(content).__name__}"
        )
    refusal = need(message, "refusal", str, at, None)
    if refusal:
        parts.append(RefusalPart(text=refusal))
    calls = [
        _call(c, at / "tool_calls" / i)
        for i, c in enumerate(need(message, "tool_calls", list, at, []))
    ]
    builder.output(parts, calls, at)


def events_from_chat(body: Any) -> list[EventData]:
    """Events from a `messages` list or a request body `{"messages", "tools", "model"}`."""
    root = Where("messages")
    if isinstance(body, dict):
        messages = need(body, "messages", list, Where("request"))
        tools = body.get("tools")
        model = need(body, "model", str, Where("request"), "")
    elif isinstance(body, list):
        messages, tools, model = body, None, ""
    else:
        raise root.error(
            f"expected a list of messages or a request object, got {type(body).__name__}"
        )
    builder = HistoryBuilder(
        Invocation(provider="openai", specification="chat.completions", model=model)
    )
    start = 0
    while (
        start < len(messages)
        and isinstance(messages[start], dict)
        and messages[start].get("role") in SYSTEM_ROLES
    ):
        at = Where(f"messages[{start}]", start)
        builder.system(_text_of(need(messages[start], "content", object, at), at / "content"))
        start += 1
    if tools:
        builder.toolset(tools_from(tools, Where("tools")), Where("tools"))
    for index in range(start, len(messages)):
        message = messages[index]
        at = Where(f"messages[{index}]", index)
        role = need(message, "role", str, at)
        if role in SYSTEM_ROLES:
            builder.system(_text_of(need(message, "content", object, at), at / "content"))
        elif role == "user":
            _user(builder, need(message, "content", object, at), at / "content")
        elif role == "assistant":
            _assistant(builder, message, at)
        elif role == "tool":
            builder.result(
                need(message, "tool_call_id", str, at),
                _text_of(need(message, "content", object, at, ""), at / "content"),
                at / "tool_call_id",
            )
        else:
            raise (at / "role").error(f"unknown role {role!r}")
    return builder.finish()


__all__ = ["events_from_chat", "tools_from"]
