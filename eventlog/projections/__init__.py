"""Projections: state, context windows and provider payloads folded from events."""

from eventlog.projections.base import EventSource, Projection
from eventlog.projections.forks import checkpoint_seq, fork
from eventlog.projections.persistent import Log
from eventlog.projections.runner import (
    Follower,
    Runner,
    SnapshotWarning,
    StoreSource,
    conversation_state,
)
from eventlog.projections.state import (
    ActiveSkill,
    CheckpointEntry,
    CompactionEntry,
    ConversationProjection,
    ConversationState,
    Entry,
    InputEntry,
    MessageEntry,
    OpenCall,
    OutputEntry,
    RuleViolation,
    SystemInstruction,
    ToolResultsEntry,
    Toolset,
    UsageTotal,
    WidgetState,
)

__all__ = [
    "ActiveSkill",
    "CheckpointEntry",
    "CompactionEntry",
    "ConversationProjection",
    "ConversationState",
    "Entry",
    "EventSource",
    "Follower",
    "InputEntry",
    "Log",
    "MessageEntry",
    "OpenCall",
    "OutputEntry",
    "Projection",
    "RuleViolation",
    "Runner",
    "SnapshotWarning",
    "StoreSource",
    "SystemInstruction",
    "ToolResultsEntry",
    "Toolset",
    "UsageTotal",
    "WidgetState",
    "checkpoint_seq",
    "conversation_state",
    "fork",
]
