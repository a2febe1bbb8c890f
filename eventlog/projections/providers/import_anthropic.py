"""Import an Anthropic Messages request (`system`, `messages`, `tools`) as events."""

from __future__ import annotations

from typing import Any

from eventlog.events import (
    Attachment,
    EventData,
    Invocation,
    Part,
    ReasoningPart,
    Section,
    TextPart,
    ToolCall,
    ToolSpec,
)
from eventlog.projections.providers.common import dumps, file_uri
from eventlog.projections.providers.import_base import (
    HistoryBuilder,
    Where,
    attachment_from_base64,
    attachment_from_url,
    checked,
    need,
)


def tools_from(tools: Any, at: Where) -> list[ToolSpec]:
    """ToolSpecs from an Anthropic `tools` list (client tools with an `input_schema`)."""
    if not isinstance(tools, list):
        raise at.error("expected a list")
    specs = []
    for i, tool in enumerate(tools):
        t_at = at / i
        kind = need(tool, "type", str, t_at, "custom")
        if kind != "custom" or "input_schema" not in tool:
            raise (t_at / "type").error(f"server tool {kind!r} is not supported; only client tools")
        specs.append(
            ToolSpec(
                name=need(tool, "name", str, t_at),
                description=need(tool, "description", str, t_at, ""),
                parameters=need(tool, "input_schema", dict, t_at),
            )
        )
    return specs


def _system_text(system: Any, at: Where) -> str:
    if isinstance(system, str):
        return system
    if not isinstance(system, list):
        raise at.error(f"expected a string or a list of text blocks, got {type(system).__name__}")
    return "\n\n".join(_text_block(block, at / i) for i, block in enumerate(system))


def _text_block(block: Any, at: Where) -> str:
    if need(block, "type", str, at) != "text":
        raise (at / "type").error(f"expected a text block, got {block['type']!r}")
    return need(block, "text", str, at)


def _source(block: dict[str, Any], at: Where) -> Attachment:
    """An image or document block's `source`: base64, text, URL or file reference."""
    source = need(block, "source", dict, at)
    s_at = at / "source"
    kind = need(source, "type", str, s_at)
    name = need(block, "title", str, at, None)
    if kind == "base64":
        return attachment_from_base64(
            need(source, "data", str, s_at), need(source, "media_type", str, s_at), s_at, name
        )
    if kind == "text":
        data = need(source, "data", str, s_at).encode()
        media_type = need(source, "media_type", str, s_at, "text/plain")
        return checked(lambda: Attachment(media_type=media_type, data=data, name=name), s_at)
    if kind == "url":
        fallback = "image/*" if block["type"] == "image" else "application/pdf"
        return attachment_from_url(
            need(source, "url", str, s_at), s_at, fallback_type=fallback, name=name
        )
    if kind == "file":
        uri = file_uri("anthropic", need(source, "file_id", str, s_at))
        return checked(
            lambda: Attachment(media_type="application/octet-stream", uri=uri, name=name), s_at
        )
    raise (s_at / "type").error(f"unsupported source type {kind!r}")


def _tool_result(builder: HistoryBuilder, block: dict[str, Any], at: Where) -> None:
    content = block.get("content", "")
    texts: list[str] = []
    attachments: list[Attachment] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for i, item in enumerate(content):
            kind = need(item, "type", str, at / "content" / i)
            if kind == "text":
                texts.append(need(item, "text", str, at / "content" / i))
            elif kind in ("image", "document"):
                attachments.append(_source(item, at / "content" / i))
            else:
                raise (at / "content" / i / "type").error(f"unsupported tool result block {kind!r}")
    else:
        raise (at / "content").error(f"expected a string or a list, got {type(content).__name__}")
    builder.result(
        need(block, "tool_use_id", str, at),
        "\n\n".join(texts),
        at / "tool_use_id",
        status="failed" if need(block, "is_error", bool, at, False) else "success",
        attachments=tuple(attachments),
    )


def _user(builder: HistoryBuilder, content: Any, at: Where) -> None:
    if isinstance(content, str):
        builder.input([Section(text=content)], [], at)
        return
    if not isinstance(content, list) or not content:
        raise at.error("expected a string or a non-empty list of blocks")
    sections: list[Section] = []
    attachments: list[Attachment] = []
    for i, block in enumerate(content):
        b_at = at / i
        kind = need(block, "type", str, b_at)
        if kind == "tool_result":
            if sections or attachments:
                raise (b_at / "type").error("tool_result blocks must come first in a user message")
            _tool_result(builder, block, b_at)
        elif kind == "text":
            sections.append(Section(text=need(block, "text", str, b_at)))
        elif kind in ("image", "document"):
            attachments.append(_source(block, b_at))
        else:
            raise (b_at / "type").error(f"unsupported block type {kind!r} in a user message")
    if sections or attachments:
        builder.input(sections, attachments, at)


def _assistant(builder: HistoryBuilder, content: Any, at: Where) -> None:
    if isinstance(content, str):
        builder.output([TextPart(text=content)] if content else [], [], at)
        return
    if not isinstance(content, list):
        raise at.error(f"expected a string or a list of blocks, got {type(content).__name__}")
    parts: list[Part] = []
    calls: list[ToolCall] = []
    for i, block in enumerate(content):
        b_at = at / i
        kind = need(block, "type", str, b_at)
        if kind == "text":
            parts.append(TextPart(text=need(block, "text", str, b_at)))
        elif kind == "thinking":
            parts.append(
                ReasoningPart(
                    text=need(block, "thinking", str, b_at),
                    signature=need(block, "signature", str, b_at),
                )
            )
        elif kind == "redacted_thinking":
            parts.append(ReasoningPart(redacted_data=need(block, "data", str, b_at)))
        elif kind == "tool_use":
            raw = dumps(need(block, "input", dict, b_at))
            calls.append(
                ToolCall.parse(need(block, "id", str, b_at), need(block, "name", str, b_at), raw)
            )
        else:
            raise (b_at / "type").error(f"unsupported block type {kind!r} in an assistant message")
    builder.output(parts, calls, at)


def events_from_anthropic(body: Any) -> list[EventData]:
    """Events from a Messages request `{"system", "messages", "tools", "model"}` (or a list)."""
    if isinstance(body, list):
        body = {"messages": body}
    if not isinstance(body, dict):
        raise Where("request").error(f"expected a request object, got {type(body).__name__}")
    request = Where("request")
    messages = need(body, "messages", list, request)
    model = need(body, "model", str, request, "")
    builder = HistoryBuilder(
        Invocation(provider="anthropic", specification="messages", model=model)
    )
    if body.get("system"):
        builder.system(_system_text(body["system"], Where("system")))
    if body.get("tools"):
        builder.toolset(tools_from(body["tools"], Where("tools")), Where("tools"))
    for index, message in enumerate(messages):
        at = Where(f"messages[{index}]", index)
        role = need(message, "role", str, at)
        content = need(message, "content", object, at)
        if role == "user":
            _user(builder, content, at / "content")
        elif role == "assistant":
            _assistant(builder, content, at / "content")
        else:
            raise (at / "role").error(
                f"unknown role {role!r} (Anthropic messages are user or assistant)"
            )
    return builder.finish()


__all__ = ["events_from_anthropic", "tools_from"]
