"""Google Gemini `generateContent` request bodies from a Window (pure; see docs/rendering.md).

Rules held by construction: the current instruction as `systemInstruction`; strict user/model
alternation (same-role turns merge, in order), starting with a user turn; one
`functionResponse` per `functionCall`, in call order, in the user turn right after the call;
thought signatures kept on the part they came with, for outputs Google produced only (whose
functionCall parts go back among the text where Gemini sent them); no empty text parts. The
model name is not part of the body (it is in the request URL).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eventlog.events import Attachment, ModelOutput, ReasoningPart, TextPart
from eventlog.events import Part as OutputPart
from eventlog.projections.providers.render_common import (
    OPENING_TEXT,
    Answer,
    Blocks,
    Orphans,
    SystemSlot,
    Unanswered,
    attachment_note,
    b64,
    check_request,
    current_system,
    from_provider,
    function_parameters,
    inline,
    instruction_text,
    is_blank,
    is_error,
    merge_extra,
    result_text,
    tool_input,
)
from eventlog.projections.providers.tool_names import tool_namer
from eventlog.projections.window_types import Window

PROVIDER = "google"
_tool_name = tool_namer("gemini")
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"})
"""Image formats Gemini reads from inline bytes."""

Part = dict[str, Any]
Content = dict[str, Any]


GEMINI_3 = "gemini-3"
"""Model names from which Gemini refuses a call in the current turn without a signature."""
SKIP_SIGNATURE = "skip_thought_signature_validator"
"""The placeholder Google documents for calls Gemini 3 did not sign (another provider's)."""


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
    check_request("gemini", model, max_tokens, extra)
    c = _Contents(unanswered, orphans, current_system(window))
    if model.rsplit("/", 1)[-1].startswith(GEMINI_3):  # the model is named by the URL
        c.unsigned = SKIP_SIGNATURE
    c.run(window.items)
    contents = c.contents
    if contents and contents[0]["role"] == "model":
        contents.insert(0, {"role": "user", "parts": [{"text": OPENING_TEXT}]})
    body: dict[str, Any] = {}
    if c.system is not None and not is_blank(c.system):
        body["systemInstruction"] = {"parts": [{"text": c.system}]}
    body["contents"] = contents
    if window.tools:
        declarations = [
            _declaration(t.name, t.description, function_parameters(t)) for t in window.tools
        ]
        body["tools"] = [{"functionDeclarations": declarations}]
    if max_tokens is not None:
        body["generationConfig"] = {"maxOutputTokens": max_tokens}
    return merge_extra(body, extra, PROVIDER)


def _declaration(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": _tool_name(name)}
    if description:
        declaration["description"] = description
    declaration["parameters"] = parameters
    return declaration


class _Contents(SystemSlot):
    """Contents built in the pairing pass; same-role turns merge into one content.

    The current instruction is `systemInstruction` (see `SystemSlot` for the ones before the
    first turn); every other one stays at its place as user text.
    """

    def __init__(self, unanswered: Unanswered, orphans: Orphans, system: str | None) -> None:
        super().__init__(unanswered, orphans, system)
        self.contents: list[Content] = []
        self.role = ""
        """Role of the last content."""
        self.parts: list[Part] = []
        """Parts of the last content."""
        self.unsigned: str | None = None
        """The signature of an output's first call when it has none (`SKIP_SIGNATURE` for
        Gemini 3, else none): another provider's, or an older Gemini's. As Gemini does, only
        the first of parallel calls is signed."""

    def user(self, blocks: Blocks) -> None:
        self.start_turn()
        if len(blocks) == 1 and isinstance(blocks[0], str):
            self._add("user", [{"text": blocks[0]}])
        else:
            parts = [{"text": b} if isinstance(b, str) else _attachment(b) for b in blocks]
            self._add("user", parts)

    def show_instruction(self, text: str) -> None:
        self._add("user", [{"text": instruction_text(text)}])

    def output(self, output: ModelOutput, seq: int, answers: Sequence[Answer]) -> None:
        """The model turn, then one functionResponse per call in call order, then attachments.

        Google's own outputs whose kept calls recorded their place (`ToolCall.after`) get each
        functionCall back where Gemini sent it; other outputs list the calls after the text.
        """
        self.start_turn()
        own = from_provider(output, PROVIDER)
        if not answers:
            self._add("model", _model_parts(output.parts, own))
            return
        calls: list[Part] = []
        responses: list[Part] = []
        attached: list[Part] = []
        carried = _dropped_signature(output, answers) if own else None
        for k, (call, _, result) in enumerate(answers):
            part: Part = {"functionCall": {"name": _tool_name(call.name), "args": tool_input(call)}}
            signature = call.signature if own else None
            if carried is not None:  # the first call kept: it takes the dropped one's place
                signature, carried = signature or carried, None
            if k == 0 and signature is None:  # Gemini 3 wants the first call signed
                signature = self.unsigned
            if signature is not None:
                part["thoughtSignature"] = signature
            calls.append(part)
            response = {"error" if is_error(result) else "output": result_text(result)}
            responses.append(
                {"functionResponse": {"name": _tool_name(call.name), "response": response}}
            )
            if result.attachments:
                attached += [_attachment(x) for x in result.attachments]
        places = [call.after for call, _, _ in answers if call.after is not None]
        if own and len(places) == len(answers):
            self._add("model", _in_place(output.parts, places, calls))
        else:
            self._add("model", _model_parts(output.parts, own) + calls)
        self._add("user", responses + attached if attached else responses)

    def _add(self, role: str, parts: list[Part]) -> None:
        if not parts:
            return
        if self.role == role:
            self.parts.extend(parts)
        else:
            self.contents.append({"role": role, "parts": parts})
            self.role, self.parts = role, parts


def _dropped_signature(output: ModelOutput, answers: Sequence[Answer]) -> str | None:
    """The signature of a call left out before the first one kept (`unanswered="drop"`).

    Gemini signs the first call of a parallel set only, and refuses a turn whose calls lost it:
    the first call kept then carries it.
    """
    kept = {call.id for call, _, _ in answers}
    for call in output.tool_calls:
        if call.id in kept:
            return None
        if call.signature is not None:
            return call.signature
    return None


def _in_place(
    parts: Sequence[OutputPart], places: Sequence[int], calls: Sequence[Part]
) -> list[Part]:
    """Google's own parts with each functionCall part back at its place among them.

    A place counts the output's parts (blank ones, which are not sent, included), clamped to
    them and never before the previous call's: calls keep call order, which pairs responses.
    """
    out: list[Part] = []
    i = 0
    for place, call in zip(places, calls, strict=True):
        end = min(max(place, i), len(parts))
        out += _model_parts(parts[i:end], True)
        out.append(call)
        i = end
    out += _model_parts(parts[i:], True)
    return out


def _model_parts(parts: Sequence[OutputPart], own: bool) -> list[Part]:
    """Text and thoughts; Google's own keep their signature (and then even an empty text)."""
    out: list[Part] = []
    for p in parts:
        if isinstance(p, TextPart):
            sig = p.signature if own else None
            if sig is not None:
                out.append({"text": p.text, "thoughtSignature": sig})
            elif p.text and not p.text.isspace():
                out.append({"text": p.text})
        elif isinstance(p, ReasoningPart):
            if own and p.signature is not None:
                out.append({"text": p.text, "thought": True, "thoughtSignature": p.signature})
        elif p.text and not p.text.isspace():  # a refusal
            out.append({"text": p.text})
    return out


def _attachment(a: Attachment) -> Part:
    """Inline bytes as `inlineData`, a URI Gemini can fetch as `fileData`.

    Gemini reads images of its formats, PDFs, text, audio and video, and fetches http(s) and
    `gs://` URIs (its Files API URIs are https). Anything else (another provider's file id, a
    `file:` or `s3:` URI, a zip, a Word file, a wildcard type such as `image/*`) becomes a note:
    the API refuses it (`Unsupported MIME type`, an unreachable URI).
    """
    bytes_or_url = inline(a)
    if bytes_or_url is None or not _reads(bytes_or_url):
        return {"text": attachment_note(a, "Gemini")}
    a = bytes_or_url
    if a.uri is not None:
        return {"fileData": {"mimeType": a.media_type, "fileUri": a.uri}}
    return {"inlineData": {"mimeType": a.media_type, "data": b64(a)}}


READ_TYPES = IMAGE_TYPES | {"application/pdf"}
READ_PREFIXES = ("text/", "audio/", "video/")
"""Media types Gemini reads from inline bytes or a file URI (with IMAGE_TYPES)."""
URI_SCHEMES = frozenset({"http", "https", "gs"})


def _reads(a: Attachment) -> bool:
    """Whether Gemini takes this attachment as it is (media type, and where it is)."""
    media_type = a.media_type
    if "*" in media_type or not (media_type in READ_TYPES or media_type.startswith(READ_PREFIXES)):
        return False
    return a.uri is None or a.uri.partition(":")[0].lower() in URI_SCHEMES


__all__ = ["PROVIDER", "render"]
