"""Google Gemini `generateContent` request bodies from a Window (pure; see docs/rendering.md).

Rules held by construction: the current instruction as `systemInstruction`; strict user/model
alternation (same-role turns merge, in order), starting with a user turn; one
`functionResponse` per `functionCall`, in call order, in the user turn right after the call;
thought signatures kept on the part they came with, for outputs Google produced only; no empty
text parts. The model name is not part of the body (it is in the request URL).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, assert_never

from eventlog.events import Attachment, ReasoningPart, RefusalPart, TextPart
from eventlog.projections.providers.render_common import (
    OPENING_TEXT,
    Answer,
    InstructionTurn,
    Orphans,
    OutputTurn,
    ResultsTurn,
    Turn,
    Unanswered,
    UserTurn,
    b64,
    from_provider,
    is_blank,
    is_error,
    merge_extra,
    result_text,
    single_system,
    tool_input,
    turns,
)
from eventlog.projections.window_types import Window

PROVIDER = "google"

Part = dict[str, Any]
Content = dict[str, Any]


def render(
    window: Window,
    *,
    model: str,
    max_tokens: int | None = None,
    unanswered: Unanswered = "cancel",
    orphans: Orphans = "text",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The `models/{model}:generateContent` body for a window (`model` goes in the URL).

    `max_tokens` becomes `generationConfig.maxOutputTokens`; `extra` adds other top-level
    fields (`safetySettings`, a `generationConfig` when `max_tokens` is not given).
    """
    del model  # the model is named by the URL, not the body
    system, items = single_system(window, turns(window, unanswered=unanswered, orphans=orphans))
    body: dict[str, Any] = {}
    if system is not None and not is_blank(system):
        body["systemInstruction"] = {"parts": [{"text": system}]}
    body["contents"] = _contents(items)
    if window.tools:
        declarations = [_declaration(t.name, t.description, t.parameters) for t in window.tools]
        body["tools"] = [{"functionDeclarations": declarations}]
    if max_tokens is not None:
        body["generationConfig"] = {"maxOutputTokens": max_tokens}
    return merge_extra(body, extra, PROVIDER)


def _declaration(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": name}
    if description:
        declaration["description"] = description
    declaration["parameters"] = parameters
    return declaration


def _contents(items: list[Turn]) -> list[Content]:
    contents: list[Content] = []

    def add(role: str, parts: list[Part]) -> None:
        if not parts:
            return
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})

    for t in items:
        match t:
            case UserTurn():
                add(
                    "user",
                    [{"text": b} if isinstance(b, str) else _attachment(b) for b in t.blocks],
                )
            case InstructionTurn():  # single_system turned these into user text already
                add("user", [{"text": t.text}])
            case OutputTurn():
                add("model", _model_parts(t))
            case ResultsTurn():
                add("user", _response_parts(t.answers))
            case _:
                assert_never(t)
    if contents and contents[0]["role"] == "model":
        contents.insert(0, {"role": "user", "parts": [{"text": OPENING_TEXT}]})
    return contents


def _model_parts(t: OutputTurn) -> list[Part]:
    """Text, thoughts (Google's own, with their signature) and function calls."""
    own = from_provider(t.output, PROVIDER)
    parts: list[Part] = []
    for p in t.output.parts:
        match p:
            case TextPart():
                sig = p.signature if own else None
                if sig is not None:
                    parts.append({"text": p.text, "thoughtSignature": sig})
                elif not is_blank(p.text):
                    parts.append({"text": p.text})
            case ReasoningPart():
                if own and p.signature is not None:
                    parts.append({"text": p.text, "thought": True, "thoughtSignature": p.signature})
            case RefusalPart():
                if not is_blank(p.text):
                    parts.append({"text": p.text})
            case _:
                assert_never(p)
    for c in t.calls:
        part: Part = {"functionCall": {"name": c.call.name, "args": tool_input(c.call)}}
        if own and c.call.signature is not None:
            part["thoughtSignature"] = c.call.signature
        parts.append(part)
    return parts


def _response_parts(answers: tuple[Answer, ...]) -> list[Part]:
    """One functionResponse per call, in call order; then any attachments of the results."""
    parts: list[Part] = []
    attached: list[Part] = []
    for a in answers:
        key = "error" if is_error(a.result) else "output"
        response = {key: result_text(a.result)}
        parts.append({"functionResponse": {"name": a.call.call.name, "response": response}})
        attached += [_attachment(x) for x in a.result.attachments]
    return parts + attached


def _attachment(a: Attachment) -> Part:
    if a.uri is not None:
        return {"fileData": {"mimeType": a.media_type, "fileUri": a.uri}}
    return {"inlineData": {"mimeType": a.media_type, "data": b64(a)}}


__all__ = ["PROVIDER", "render"]
