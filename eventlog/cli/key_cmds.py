"""`eventlog erase`: erase a stream of an encrypted store by deleting its key."""

from __future__ import annotations

import sys

import click
import msgspec
from rich.markup import escape

from eventlog.cli.app import cli, console, count, emit_json, err_console, open_store
from eventlog.encryption import erase_stream
from eventlog.errors import StreamNotFoundError, UsageError


@cli.command("erase")
@click.argument("stream")
@click.option("--yes", is_flag=True, help="Erase without asking (needed without a terminal).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def erase_cmd(ctx: click.Context, stream: str, yes: bool, as_json: bool) -> None:
    """Erase STREAM for good: delete its encryption key, so its events can never be read.

    The store must be opened with its key directory (--store 'sqlite:///app.db?keys=DIR').
    Nothing in the log is rewritten: the events keep their place and hash, `verify` reports
    the stream as erased, and reading or appending to it fails. Forks that share its events
    cannot read them either. Exit 1 if some of its events were stored unencrypted (written
    before encryption was turned on): those stay readable.
    """
    store = open_store(ctx)
    if store.codec.encryption is None:
        raise UsageError(
            f"{store.location} is opened without a key store: add ?keys=DIR (the store's key "
            "directory) to --store to erase a stream"
        )
    if not store.exists(stream):  # said before asking
        raise StreamNotFoundError(stream)
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError("erasing cannot be undone: pass --yes to confirm")
        click.confirm(
            f"Erase stream {stream!r} for good (its key is deleted, nothing can undo it)?",
            abort=True,
        )
    report = erase_stream(store, stream)
    if as_json:
        emit_json(msgspec.to_builtins(report))
    else:
        keys = store.codec.encryption.keys.location
        what = (
            f"its key was deleted from {keys}"
            if report.key_deleted
            else f"it had no key in {keys} (erased before, or never encrypted)"
        )
        console.print(
            escape(
                f"erased stream {stream!r}: {what}; "
                f"{count(report.encrypted_events, 'encrypted event')} can no longer be read"
            ),
            highlight=False,
        )
        if report.forks:
            console.print(
                escape(
                    f"forks that share its events cannot read them either: "
                    f"{', '.join(report.forks)}"
                ),
                highlight=False,
            )
        if report.snapshots_dropped:
            console.print(
                f"removed {count(report.snapshots_dropped, 'projection snapshot')}",
                highlight=False,
            )
    if report.plain_events:
        err_console.print(
            escape(
                f"warning: {count(report.plain_events, 'event')} of {stream!r} "
                f"{'was' if report.plain_events == 1 else 'were'} stored "
                "unencrypted (before encryption was turned on) and can still be read; erasing "
                "them needs a copy of the store without them"
            ),
            highlight=False,
            soft_wrap=True,
        )
        ctx.exit(1)
