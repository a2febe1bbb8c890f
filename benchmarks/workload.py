"""Re-export of the seeded workload generator, which now lives in `eventlog.bench.workload`."""

from eventlog.bench.workload import conversation, conversation_events, toolset

__all__ = ["conversation", "conversation_events", "toolset"]
