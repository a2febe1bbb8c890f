"""`eventlog create`: make an empty store, with its options, before anything is written to it."""

from __future__ import annotations

import click
from rich.markup import escape

import eventlog
from eventlog.cli.app import cli, console, emit_json, store_url
from eventlog.connect import in_process, other_store_at, store_exists
from eventlog.errors import UsageError


@cli.command("create")
@click.option("--json", "as_json", is_flag=True, help="Print what was created as JSON.")
@click.pass_context
def create_cmd(ctx: click.Context, as_json: bool) -> None:
    """Create an empty store at --store (options in its URL, e.g. ?compression=zstd).

    Refuses a store that exists already, or another backend's store at the same path: nothing
    is changed then. Writing commands (append, import, ingest, demo) create a store too; this
    one lets a script create it first, with its options, and fail early on a bad URL.
    """
    url = store_url(ctx)
    if in_process(url):
        raise UsageError(f"{url} lives in one process: there is nothing to create on disk")
    other = other_store_at(url)
    if other is not None:
        raise UsageError(f"{url}: a {other} store is already there (use {other}://)")
    if store_exists(url):
        raise UsageError(f"{url}: a store exists already; nothing changed")
    with eventlog.open(url) as store:
        location = store.location
        durability = str(store.durability)
    scheme = url.split("://", 1)[0].lower()
    if as_json:
        emit_json({"created": url, "backend": scheme, "location": location})
        return
    console.print(
        f"created an empty {scheme} store at {escape(location)} (durability {durability})",
        highlight=False,
    )
