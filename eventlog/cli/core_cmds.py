"""Core commands: demo, streams, verify, stats, search, append."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Any

import click
import msgspec
from rich.markup import escape
from rich.table import Table

from eventlog.backends.base import StreamInfo
from eventlog.cli.app import (
    cli,
    console,
    count,
    emit_json,
    expected_seq_option,
    open_store,
    print_table,
    progress_bar,
    store_url,
)
from eventlog.demo import record_demo
from eventlog.errors import EventlogError, ValidationError
from eventlog.event_json import event_from_json
from eventlog.events import Event, RecordedEvent
from eventlog.stats import store_stats
from eventlog.store import ANY, MAX_SEQ, ExpectedSeq, Store
from eventlog.text import event_text


def _info_json(info: StreamInfo) -> dict[str, Any]:
    return {
        "stream": info.stream,
        "last_seq": info.last_seq,
        "last_ts": info.last_ts,
        "parent": info.parent,
        "at_seq": info.at_seq,
    }


def _preview(event: RecordedEvent, width: int = 70) -> str:
    text = " ".join(event_text(event.data).split())
    return text if len(text) <= width else text[: width - 1] + "…"


@cli.command("demo")
@click.pass_context
def demo_cmd(ctx: click.Context) -> None:
    """Record a scripted agent conversation (and a fork of it), print it and verify the store."""
    store = open_store(ctx, create=True)
    stream = record_demo(store)
    table = Table(title=escape(f"{stream} in {store_url(ctx)}"))
    for column in ("seq", "pos", "type", "text"):
        table.add_column(column)
    for event in store.read(stream):
        table.add_row(
            str(event.seq), str(event.position), escape(event.type), escape(_preview(event))
        )
    print_table(table)
    retry = f"{stream}-retry"
    ancestry = " -> ".join(f"{name}@{seq}" for name, seq in store.ancestry(retry))
    console.print(escape(f"fork {retry}: {ancestry} -> {store.stream_info(retry).last_seq} events"))
    report = store.verify()
    status = "[green]ok[/green]" if report.ok else "[red]FAILED[/red]"
    console.print(
        f"verify: {status} ({count(report.events, 'event')} in {count(report.streams, 'stream')})"
    )


@cli.command("streams")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def streams_cmd(ctx: click.Context, as_json: bool) -> None:
    """List streams with their length and fork parent."""
    infos = open_store(ctx).streams()
    if as_json:
        emit_json([_info_json(i) for i in infos])
        return
    table = Table()
    for column in ("stream", "events", "fork of"):
        table.add_column(column)
    for i in infos:
        fork_of = escape(f"{i.parent}@{i.at_seq}") if i.parent else ""
        table.add_row(escape(i.stream), str(i.last_seq), fork_of)
    print_table(table)


@cli.command("verify")
@click.argument("stream", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.pass_context
def verify_cmd(ctx: click.Context, stream: str | None, as_json: bool, quiet: bool) -> None:
    """Check hash chains, seqs and decoding; exit 1 and name the first bad event if any.

    A progress bar on stderr counts the events checked (when stderr is a terminal).
    """
    store = open_store(ctx)
    bar = progress_bar(quiet)
    with bar:
        task = bar.add_task("verifying", total=_events_to_verify(store, stream) or None)
        report = store.verify(stream, progress=lambda done: bar.update(task, completed=done))
    if as_json:
        emit_json(
            {
                "ok": report.ok,
                "streams": report.streams,
                "events": report.events,
                "problems": [msgspec.to_builtins(p) for p in report.problems],
                "erased": report.erased,
            }
        )
    else:
        for p in report.problems:
            console.print(
                f"[red]{escape(p.stream)} seq {p.seq}[/red] "
                f"({escape(str(p.event_id))}): {escape(p.message)}"
            )
        for name in report.erased:
            console.print(
                escape(f"{name}: erased (its key was deleted; hash chain checked)"),
                highlight=False,
            )
        status = "[green]ok[/green]" if report.ok else "[red]FAILED[/red]"
        checked = f"{count(report.events, 'event')} in {count(report.streams, 'stream')}"
        console.print(f"verify: {status} ({checked})")
    if not report.ok:
        ctx.exit(1)


def _events_to_verify(store: Store, stream: str | None) -> int:
    """How many events verify walks: every event, or the stream's history (0 if unknown)."""
    if stream is None:
        return store.head_position()
    try:
        return store.stream_info(stream).last_seq  # seqs 1..last, ancestors' included
    except EventlogError:  # verify reports it
        return 0


@cli.command("stats")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def stats_cmd(ctx: click.Context, as_json: bool) -> None:
    """Count streams, forks and events (by kind), stored bytes, compression and size on disk."""
    stats = store_stats(open_store(ctx))
    if as_json:
        emit_json(msgspec.to_builtins(stats))
        return
    console.print(escape(f"{stats.location} ({stats.format} payloads)"), highlight=False)
    console.print(
        f"{count(stats.events, 'event')} in {count(stats.streams, 'stream')} "
        f"({count(stats.forks, 'fork')}), "
        f"head position {stats.head_position:,}"
    )
    if stats.first_ts is not None and stats.last_ts is not None:
        console.print(f"recorded from {_when(stats.first_ts)} to {_when(stats.last_ts)}")
    if stats.longest_stream is not None:
        console.print(
            escape(f"longest stream: {stats.longest_stream} ({stats.longest_events:,} own events)"),
            highlight=False,
        )
    per_event = stats.stored_bytes / stats.events if stats.events else 0
    console.print(
        f"payloads: {_bytes(stats.stored_bytes)} stored ({per_event:,.0f} B per event), "
        f"{stats.compressed:,} compressed"
        + (f", {stats.encrypted:,} encrypted" if stats.encrypted else "")
    )
    if stats.disk_bytes is not None:
        console.print(f"on disk: {_bytes(stats.disk_bytes)}")
    if stats.kinds:
        table = Table()
        for column in ("type", "events", "stored"):
            table.add_column(column, justify="left" if column == "type" else "right")
        for kind in stats.kinds:
            table.add_row(escape(kind.type), f"{kind.events:,}", _bytes(kind.stored_bytes))
        print_table(table)


def _when(ts: int) -> str:
    return datetime.fromtimestamp(ts / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


@cli.command("search")
@click.argument("query")
@click.option(
    "--stream",
    default=None,
    help="Search one stream (a fork with the prefix it shares with its parent).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1, max=MAX_SEQ),
    default=20,
    show_default=True,
    help="Most hits shown, best first.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def search_cmd(
    ctx: click.Context, query: str, stream: str | None, limit: int, as_json: bool
) -> None:
    """Full-text search over event text (SQLite stores)."""
    hits = open_store(ctx).search(query, stream=stream, limit=limit)
    if as_json:
        emit_json([msgspec.to_builtins(h) for h in hits])
        return
    for h in hits:  # one line each: the snippet's line breaks are the event text's
        snippet = " ".join(h.snippet.split())
        console.print(escape(f"{h.stream}@{h.seq}  {snippet}"), highlight=False)


class _Lines:
    """The events of a JSON-lines file, and the file line (1-based) each came from."""

    def __init__(self, source: Any) -> None:
        name = getattr(source, "name", "-")
        self.name = "stdin" if name in ("-", "<stdin>") else name
        self.events: list[Event] = []
        self.lines: list[int] = []
        lineno = 0
        try:
            for lineno, line in enumerate(source, 1):
                if line.strip():
                    self.events.append(event_from_json(line, f"{self.name} line {lineno}"))
                    self.lines.append(lineno)
        except UnicodeDecodeError as exc:
            where = f"{self.name} line {lineno + 1}"
            raise ValidationError(f"{where}: not UTF-8 text ({exc.reason})") from None

    def located(self, exc: ValidationError) -> ValidationError:
        """The store's error about event #i, naming the file line instead."""
        if exc.index is None or not 0 <= exc.index < len(self.lines):
            return exc
        where = f"{self.name} line {self.lines[exc.index]}"
        field = f", field {exc.field!r}" if exc.field is not None else ""
        located = ValidationError(f"{where}{field}: {exc.detail}")
        located.field = exc.field
        return located


@cli.command("append")
@click.argument("stream")
@click.argument("source", type=click.File("r", encoding="utf-8-sig"), default="-")
@expected_seq_option("any")
@click.pass_context
def append_cmd(ctx: click.Context, stream: str, source: Any, expected_seq: ExpectedSeq) -> None:
    """Append events given as JSON lines ({"type": ..., "data": {...}, "meta": {...}}).

    All or nothing: a line that is not a valid event (unknown keys or fields, values of the
    wrong type) fails the whole append, naming the file and line.
    """
    given = _Lines(source)

    if not given.events and expected_seq == ANY:  # (with an expectation, it checks that)
        raise ValidationError(f"{given.name} holds no events: nothing to append")

    def write(store: Store) -> list[RecordedEvent]:
        try:
            return store.append(stream, given.events, expected_seq=expected_seq)
        except ValidationError as exc:
            raise given.located(exc) from None

    stored = write(open_store(ctx, create=True, rehearse=write))
    emit_json([{"seq": e.seq, "position": e.position, "id": e.id} for e in stored])
    sys.stdout.flush()
