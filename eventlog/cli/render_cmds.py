"""`eventlog render`: a stream's context window as a provider's exact request body (JSON)."""

from __future__ import annotations

import click

from eventlog.cli.app import cli, emit_json, open_store
from eventlog.cli.window_cmds import check_turns, selection_options
from eventlog.projections.providers.render import PROVIDERS, render
from eventlog.projections.window import context_window
from eventlog.store import MAX_SEQ

UNLIMITED = 1 << 62
"""Budget used without --budget: the whole history (compactions still stand in for ranges)."""


@cli.command("render")
@click.argument("stream")
@click.option("--provider", required=True, type=click.Choice(PROVIDERS), help="Request format.")
@click.option("--model", required=True, help="Model name put in the body.")
@click.option("--budget", type=click.IntRange(min=0), default=None, help="Window budget in tokens.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=None, help="Reply limit.")
@click.option(
    "--at", type=click.IntRange(min=0, max=MAX_SEQ), default=None, help="Render as of this seq."
)
@selection_options
@click.pass_context
def render_cmd(
    ctx: click.Context,
    stream: str,
    provider: str,
    model: str,
    budget: int | None,
    max_tokens: int | None,
    at: int | None,
    counter: str,
    calibrate: bool,
    strategy: str,
    turns: int | None,
) -> None:
    """Print the request body for STREAM's context window (whole history without --budget).

    Without --budget nothing is counted, so --counter and --calibrate need one;
    --strategy sliding_window still keeps only its last --turns turns (default 10).
    """
    check_turns(strategy, turns)
    if budget is None:
        for name in ("counter", "calibrate"):
            if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT:
                raise click.BadParameter(
                    "needs --budget (nothing is counted without one)", param_hint=f"--{name}"
                )
    window = context_window(
        open_store(ctx),
        stream,
        budget=UNLIMITED if budget is None else budget,
        counter=counter,
        calibrate=calibrate,
        strategy=strategy,
        turns=turns,
        at=at,
        entries="window",
    )
    emit_json(render(window, provider, model=model, max_tokens=max_tokens))
