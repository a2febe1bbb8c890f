"""`eventlog window`: the token-budgeted context window of a stream, and its report."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
import msgspec
from rich.markup import escape
from rich.table import Table

from eventlog.cli.app import cli, console, emit_json, open_store, print_table
from eventlog.cli.state_cmds import describe
from eventlog.projections.tokens import COUNTER_NAMES
from eventlog.projections.window import STRATEGIES, context_window
from eventlog.projections.window_types import Window
from eventlog.store import MAX_SEQ


def window_json(window: Window) -> dict[str, Any]:
    """A window (items and report) as JSON-ready builtins."""
    out: dict[str, Any] = msgspec.to_builtins(window)
    return out


F = TypeVar("F", bound=Callable[..., Any])


def selection_options(command: F) -> F:
    """--counter, --calibrate, --strategy and --turns: how a command's window is chosen."""
    options = (
        click.option(
            "--counter",
            type=click.Choice(COUNTER_NAMES),
            default="estimate",
            show_default=True,
            help="Token counter.",
        ),
        click.option(
            "--calibrate", is_flag=True, help="Scale counts by the stream's reported usage."
        ),
        click.option(
            "--strategy",
            type=click.Choice(STRATEGIES),
            default="summary_aware",
            show_default=True,
            help="How to fit the budget.",
        ),
        click.option(
            "--turns", type=click.IntRange(min=1), default=None, help="sliding_window: turns kept."
        ),
    )
    for option in reversed(options):
        command = option(command)
    return command


def check_turns(strategy: str, turns: int | None) -> None:
    """--turns only means something to sliding_window."""
    if turns is not None and strategy != "sliding_window":
        raise click.BadParameter(
            f"applies to --strategy sliding_window, not {strategy}", param_hint="--turns"
        )


@cli.command("window")
@click.argument("stream")
@click.option(
    "--budget", type=click.IntRange(min=0), required=True, help="Tokens the window may use."
)
@selection_options
@click.option(
    "--at", type=click.IntRange(min=0, max=MAX_SEQ), default=None, help="Window as of this seq."
)
@click.option("--json", "as_json", is_flag=True, help="Print the window and report as JSON.")
@click.pass_context
def window_cmd(
    ctx: click.Context,
    stream: str,
    budget: int,
    counter: str,
    calibrate: bool,
    strategy: str,
    turns: int | None,
    at: int | None,
    as_json: bool,
) -> None:
    """Print the context window of STREAM for a token budget, and what happened to each entry."""
    check_turns(strategy, turns)
    window = context_window(
        open_store(ctx),
        stream,
        budget=budget,
        counter=counter,
        calibrate=calibrate,
        strategy=strategy,
        turns=turns,
        at=at,
    )
    if as_json:
        emit_json(window_json(window))
        return
    report = window.report
    assert report is not None
    table = Table(title=escape(f"{stream} window at seq {window.seq}"))
    for col in ("seq", "kind", "fate", "level", "tokens", "content"):
        table.add_column(col, justify="right" if col in ("seq", "tokens") else "left")
    shown = {it.seq: it for it in window.items}
    for e in report.entries:
        item = shown.get(e.seq)
        content = describe(item.data) if item is not None else ""
        if e.summarised_by is not None:
            content = f"(summarised by seq {e.summarised_by})"
        if item is not None and item.live_screen:
            content += f" [+live screen: {', '.join(w for w, _ in item.live_screen)}]"
        table.add_row(str(e.seq), e.kind, e.fate, e.level, str(e.tokens), escape(content))
    print_table(table)
    calibration = f", calibration {report.calibration}" if report.calibration else ""
    console.print(
        f"{report.tokens} / {report.budget} tokens ({report.strategy}, counter "
        f"{report.counter}{calibration}): system {report.system_tokens}, tools "
        f"{report.tools_tokens}, live screen {report.live_screen_tokens}; entries kept "
        f"{report.kept}, downgraded {report.downgraded}, summarised {report.summarised}, "
        f"dropped {report.dropped}",
        highlight=False,
    )
