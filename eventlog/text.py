"""The searchable text of an event: what full-text indexes see."""

from __future__ import annotations

from eventlog.events import (
    Checkpoint,
    Compaction,
    Custom,
    EventData,
    ModelInput,
    ModelOutput,
    ReasoningPart,
    RefusalPart,
    SkillActivated,
    SystemInstructionSet,
    TextPart,
    ToolResults,
    ToolsetDefined,
    WidgetUpdated,
)


def event_text(data: EventData) -> str:
    """Human-readable text of an event (titles, texts, tool names and arguments, results)."""
    match data:
        case ModelInput():
            return "\n".join(f"{s.title}\n{s.text}" if s.title else s.text for s in data.sections)
        case ModelOutput():
            parts = [
                p.text
                for p in data.parts
                if isinstance(p, TextPart | RefusalPart | ReasoningPart) and p.text
            ]
            parts.extend(f"{c.name} {c.raw_arguments}" for c in data.tool_calls)
            return "\n".join(parts)
        case ToolResults():
            lines = [f"{r.tool_name}\n{r.content}" for r in data.results]
            if data.execute_error:
                lines.append(data.execute_error)
            return "\n".join(lines)
        case SystemInstructionSet():
            return data.text
        case ToolsetDefined():
            return "\n".join(f"{t.name} {t.description}" for t in data.tools)
        case Compaction():
            return data.summary
        case Checkpoint():
            return data.label
        case WidgetUpdated():
            return f"{data.widget}\n{data.state}"
        case SkillActivated():
            return data.name if data.instructions is None else f"{data.name}\n{data.instructions}"
        case Custom():
            return data.kind if not isinstance(data.data, str) else f"{data.kind}\n{data.data}"
    return ""
