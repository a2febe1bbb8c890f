"""State commands: replay (state at a seq), fork (at a seq or checkpoint), log (events)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
import msgspec
from click.core import ParameterSource
from rich.markup import escape
from rich.table import Table

from eventlog.cli.app import (
    cli,
    console,
    emit_json,
    json_bytes,
    open_store,
    print_table,
    write_out,
)
from eventlog.event_json import event_to_json
from eventlog.events import (
    Checkpoint,
    Compaction,
    Custom,
    EventData,
    ModelInput,
    ModelOutput,
    SkillActivated,
    SystemInstructionSet,
    ToolResults,
    ToolsetDefined,
    WidgetUpdated,
)
from eventlog.projections.forks import fork as fork_stream
from eventlog.projections.runner import Runner
from eventlog.projections.state import ConversationProjection, ConversationState, MessageEntry
from eventlog.store import MAX_SEQ


def _short(text: str, width: int = 70) -> str:
    one = " ".join(text.split())
    return one if len(one) <= width else one[: width - 1] + "…"


def describe(data: EventData) -> str:
    """A one-line human summary of an event payload."""
    if isinstance(data, ModelInput):
        extra = f" (+{len(data.attachments)} attachments)" if data.attachments else ""
        return _short(data.text) + extra
    if isinstance(data, ModelOutput):
        calls = ", ".join(f"{c.name}#{c.id}" for c in data.tool_calls)
        model = f"[{data.invocation.model}] " if data.invocation else ""
        text = _short(data.text, 50)
        return f"{model}{text}" + (f" -> calls {calls}" if calls else "")
    if isinstance(data, ToolResults):
        results = ", ".join(f"{r.tool_name}#{r.call_id}:{r.status}" for r in data.results)
        error = f" execute_error={_short(data.execute_error, 40)}" if data.execute_error else ""
        return results + error
    if isinstance(data, SystemInstructionSet):
        return _short(data.text)
    if isinstance(data, ToolsetDefined):
        return ", ".join(t.name for t in data.tools) or "(no tools)"
    if isinstance(data, Compaction):
        return f"seqs {data.first_seq}..{data.last_seq}: {_short(data.summary, 50)}"
    if isinstance(data, Checkpoint):
        return data.label
    if isinstance(data, WidgetUpdated):
        return f"{data.widget}: {_short(data.state, 50)}"
    if isinstance(data, SkillActivated):
        return data.name
    if isinstance(data, Custom):
        return f"{data.kind}: {_short(_preview_json(data.data), 50)}"
    return _short(_preview_json(data))


def _preview_json(value: Any) -> str:
    """JSON-ish text for a one-line preview: NaN and big integers shown as they are."""
    return json.dumps(msgspec.to_builtins(value), ensure_ascii=False, default=str)


@cli.command("log")
@click.argument("stream")
@click.option(
    "--from", "first", type=click.IntRange(min=1, max=MAX_SEQ), default=1, help="First seq."
)
@click.option(
    "--to", "last", type=click.IntRange(min=1, max=MAX_SEQ), default=None, help="Last seq."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines, one event each.")
@click.pass_context
def log_cmd(ctx: click.Context, stream: str, first: int, last: int | None, as_json: bool) -> None:
    """Show a stream's events, one line each (a fork's prefix comes from its ancestors)."""
    if last is not None and last < first:
        raise click.BadParameter(f"{last} is below --from {first}", param_hint="'--to'")
    store = open_store(ctx)
    events = store.read(stream, first, last)
    if as_json:
        for event in events:
            where = f"stream {event.stream!r} seq {event.seq}"
            write_out(json_bytes(event_to_json(event), what=where) + b"\n")
        sys.stdout.buffer.flush()
        return
    for event in events:
        time = event.time.strftime("%Y-%m-%d %H:%M:%S")
        origin = f" ({escape(event.stream)})" if event.stream != stream else ""
        console.print(
            f"[bold]{event.seq:>6}[/bold]  {time}  [cyan]{escape(f'{event.type:<22}')}[/cyan] "
            f"{escape(describe(event.data))}{origin}",
            highlight=False,
            soft_wrap=True,
        )


@cli.command("replay")
@click.argument("stream")
@click.option(
    "--at", type=click.IntRange(min=0, max=MAX_SEQ), default=None, help="Seq (default: the end)."
)
@click.option(
    "--policy",
    type=click.Choice(["strict", "warn"]),
    default="strict",
    show_default=True,
    help="A broken conversation rule: fail, or record a warning in the state.",
)
@click.option("--save-snapshot", is_flag=True, help="Store a snapshot of the state computed.")
@click.option(
    "--keep-snapshots",
    type=click.IntRange(min=0),
    default=3,
    show_default=True,
    help="With --save-snapshot: newest snapshots of STREAM kept, older ones deleted (0: all).",
)
@click.option(
    "--tail",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Messages shown (human output).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole state as JSON.")
@click.pass_context
def replay_cmd(
    ctx: click.Context,
    stream: str,
    at: int | None,
    policy: str,
    save_snapshot: bool,
    keep_snapshots: int,
    tail: int,
    as_json: bool,
) -> None:
    """Show the conversation state of STREAM at a seq (from the latest snapshot plus the tail)."""
    if (
        not save_snapshot
        and ctx.get_parameter_source("keep_snapshots") is ParameterSource.COMMANDLINE
    ):
        raise click.BadParameter(
            "only means something with --save-snapshot", param_hint="--keep-snapshots"
        )
    store = open_store(ctx)
    runner = Runner(
        store,
        ConversationProjection(policy),  # type: ignore[arg-type]
        snapshot_every=None,
        keep_snapshots=keep_snapshots or None,
    )
    state = runner.state(stream, at)
    if save_snapshot and state.seq:
        runner.save_snapshot(stream, state.seq)
    if as_json:
        emit_json({"stream": stream, **state.to_builtins()})
        return
    _print_state(stream, state, tail)


def _print_state(stream: str, state: ConversationState, tail: int) -> None:
    kinds = {"input": 0, "output": 0, "tool_results": 0}
    for entry in state.messages:
        kinds[entry.kind] += 1
    table = Table(title=f"{escape(stream)} at seq {state.seq}", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    system = state.system
    table.add_row(
        "system", escape(_short(system.text)) + f"  (seq {system.seq})" if system else "-"
    )
    tools = state.toolset
    table.add_row(
        "toolset",
        escape(", ".join(t.name for t in tools.tools)) + f"  (seq {tools.seq})" if tools else "-",
    )
    table.add_row(
        "messages",
        f"{len(state.messages)}: {kinds['input']} inputs, {kinds['output']} outputs, "
        f"{kinds['tool_results']} tool results",
    )
    table.add_row(
        "open calls",
        escape(", ".join(f"{c.call.name}#{c.call.id} (seq {c.seq})" for c in state.open_calls))
        or "-",
    )
    table.add_row("skills", escape(", ".join(s.name for s in state.skills)) or "-")
    table.add_row(
        "widgets", escape(", ".join(f"{w.widget} (seq {w.seq})" for w in state.widgets)) or "-"
    )
    table.add_row(
        "compactions",
        ", ".join(
            f"{c.compaction.first_seq}..{c.compaction.last_seq} (seq {c.seq})"
            for c in state.compactions
        )
        or "-",
    )
    table.add_row(
        "checkpoints", escape(", ".join(f"{c.label}@{c.seq}" for c in state.checkpoints)) or "-"
    )
    for u in state.usage:
        table.add_row(
            f"usage {escape(u.provider or '?')}/{escape(u.model or '?')}",
            f"{u.outputs} outputs, prompt {u.prompt_tokens}, completion {u.completion_tokens}, "
            f"cached {u.cached_prompt_tokens}, reasoning {u.reasoning_tokens}",
        )
    for w in state.warnings:
        table.add_row("[yellow]warning[/yellow]", escape(f"seq {w.seq}: {w.message}"))
    print_table(table)
    entries: list[MessageEntry] = state.messages[max(0, len(state.messages) - tail) :]
    for entry in entries:
        console.print(
            f"{entry.seq:>6}  [cyan]{entry.kind:<12}[/cyan] {escape(describe(entry.event))}",
            highlight=False,
            soft_wrap=True,
        )


@cli.command("fork")
@click.argument("stream")
@click.argument("new")
@click.option(
    "--at", type=click.IntRange(min=1, max=MAX_SEQ), default=None, help="Fork after this seq."
)
@click.option(
    "--checkpoint", metavar="LABEL", default=None, help="Fork at the last such checkpoint."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def fork_cmd(
    ctx: click.Context, stream: str, new: str, at: int | None, checkpoint: str | None, as_json: bool
) -> None:
    """Create NEW from STREAM's events up to a seq or checkpoint (default: all of them)."""
    if at is not None and checkpoint is not None:
        raise click.UsageError("use --at or --checkpoint, not both")
    store = open_store(ctx)
    info = fork_stream(store, stream, new, at=at, checkpoint=checkpoint)
    if as_json:
        emit_json({"stream": info.stream, "parent": info.parent, "at_seq": info.at_seq})
        return
    console.print(
        f"forked {escape(stream)} at seq {info.at_seq} into {escape(new)}", highlight=False
    )
