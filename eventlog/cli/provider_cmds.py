"""Provider commands: import a history, ingest a response (JSON body or SSE stream)."""

from __future__ import annotations

from typing import Any, TextIO

import click

from eventlog.cli.app import cli, emit_json, expected_seq_option, open_store
from eventlog.errors import ValidationError
from eventlog.events import (
    Event,
    RecordedEvent,
    ToolsetDefined,
    ToolSpec,
    new_event_id,
)
from eventlog.projections.providers.common import decode_json
from eventlog.projections.providers.importers import FORMATS, import_history
from eventlog.projections.providers.ingest import PROVIDERS, ingest_text
from eventlog.projections.providers.tool_names import restore_tool_names
from eventlog.store import ExpectedSeq, Store


def _written(stream: str, records: list[RecordedEvent]) -> dict[str, Any]:
    return {
        "stream": stream,
        "count": len(records),
        "events": [
            {"seq": r.seq, "id": r.id, "position": r.position, "type": r.type} for r in records
        ],
    }


@cli.command("import")
@click.argument("stream")
@click.option("--format", "fmt", required=True, type=click.Choice(FORMATS), help="History format.")
@click.argument("file", type=click.File("r", encoding="utf-8-sig"))
@expected_seq_option("no_stream")
@click.pass_context
def import_cmd(
    ctx: click.Context, stream: str, fmt: str, file: TextIO, expected_seq: ExpectedSeq
) -> None:
    """Import a provider history (JSON file or - for stdin) into STREAM, all or nothing.

    STREAM must be new (a second import of the same history would repeat it), unless
    --expected-seq says otherwise.
    """
    body = decode_json(file.read(), f"{fmt} history {getattr(file, 'name', '-')}")

    def write(store: Store) -> list[RecordedEvent]:
        records = import_history(store, stream, fmt, body, expected_seq=expected_seq)
        if not records:  # (raised in the rehearsal first: no empty store is left behind)
            raise ValidationError(f"the {fmt} history holds no messages: nothing to import")
        return records

    records = write(open_store(ctx, create=True, rehearse=write))
    emit_json(_written(stream, records))


@cli.command("ingest")
@click.argument("stream")
@click.option("--provider", required=True, type=click.Choice(PROVIDERS), help="Response format.")
@click.argument("file", type=click.File("r", encoding="utf-8-sig"))
@expected_seq_option("any")
@click.pass_context
def ingest_cmd(
    ctx: click.Context, stream: str, provider: str, file: TextIO, expected_seq: ExpectedSeq
) -> None:
    """Record a provider response (a JSON body or an SSE stream, FILE or -) as one output.

    Calls of a tool of the stream's toolset that the renderer renamed to fit the provider's
    rules (`files.read` sent as `files_read_<hash>`) are recorded under the toolset's name.
    """
    output = ingest_text(provider, file.read())
    event_id = new_event_id()

    def write(store: Store) -> list[RecordedEvent]:
        data = restore_tool_names(output, provider, _current_tools(store, stream))
        event = Event(id=event_id, data=data, meta={"source": f"ingest:{provider}"})
        return store.append(stream, [event], expected_seq=expected_seq)

    records = write(open_store(ctx, create=True, rehearse=write))
    emit_json(_written(stream, records))


def _current_tools(store: Store, stream: str) -> tuple[ToolSpec, ...]:
    """The stream's toolset: its latest `ToolsetDefined` (none for a new stream)."""
    if not store.exists(stream):
        return ()
    for event in store.read(stream, backwards=True):
        if isinstance(event.data, ToolsetDefined):
            return event.data.tools
    return ()
