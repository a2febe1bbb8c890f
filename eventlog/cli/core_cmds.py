"""Core commands: streams, log, verify, demo."""

from __future__ import annotations

import click

from eventlog.cli.app import cli, console, emit_json, open_store


@cli.command("streams")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def streams_cmd(ctx: click.Context, as_json: bool) -> None:
    """List streams with their length and fork parent."""
    infos = open_store(ctx).streams()
    if as_json:
        emit_json(
            [
                {
                    "stream": i.stream,
                    "last_seq": i.last_seq,
                    "last_ts": i.last_ts,
                    "parent": i.parent,
                    "at_seq": i.at_seq,
                }
                for i in infos
            ]
        )
        return
    for i in infos:
        fork = f"  (fork of {i.parent} at {i.at_seq})" if i.parent else ""
        console.print(f"{i.stream}  {i.last_seq} events{fork}", highlight=False)
