"""`eventlog compact`: append a compaction that stands in for a stream's older part."""

from __future__ import annotations

from typing import Any

import click
from click.core import ParameterSource
from rich.markup import escape

from eventlog.cli.app import cli, console, emit_json, open_store
from eventlog.projections.compaction import (
    CompactionPlan,
    CompactionPolicy,
    CompactionResult,
    ExtractiveSummarizer,
    SummaryRequest,
    compact,
    plan_compaction,
    replaced_tokens,
    summary_room,
)
from eventlog.projections.tokens import COUNTER_NAMES, get_counter
from eventlog.projections.window import context_window


class _Given:
    """A summarizer that answers with the text given on the command line."""

    name = "cli"

    def __init__(self, text: str) -> None:
        self.text = text

    def __call__(self, request: SummaryRequest) -> str:
        return self.text


def _plan_json(plan: CompactionPlan | None) -> dict[str, Any] | None:
    if plan is None:
        return None
    return {
        "first_seq": plan.first_seq,
        "last_seq": plan.last_seq,
        "at": plan.at,
        "supersedes": [e.seq for e in plan.previous],
        "events": len(plan.events),
    }


def _result_json(result: CompactionResult) -> dict[str, Any]:
    event = result.event
    return {
        "outcome": result.outcome,
        "plan": _plan_json(result.plan),
        "seq": event.seq if event is not None else None,
        "id": event.id if event is not None else None,
        "summary_tokens": result.summary_tokens,
        "replaced_tokens": result.replaced_tokens,
    }


@cli.command("compact")
@click.argument("stream")
@click.option(
    "--keep-last",
    type=click.IntRange(min=0),
    default=CompactionPolicy().keep_last,
    show_default=True,
    help="Newest messages (inputs, outputs with their tool results) kept as they are.",
)
@click.option(
    "--max-summary-tokens",
    type=click.IntRange(min=1),
    default=CompactionPolicy().max_summary_tokens,
    show_default=True,
    help="Length of the extractive summary, in the counter's tokens.",
)
@click.option(
    "--counter",
    type=click.Choice(COUNTER_NAMES),
    default="estimate",
    show_default=True,
    help="Token counter.",
)
@click.option(
    "--summary",
    "summary_file",
    type=click.File("r", encoding="utf-8-sig"),
    default=None,
    help="Use this file's text as the summary ('-' for stdin) instead of the extract.",
)
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=None,
    help="Compact only when the window for this many tokens is due (see --trigger).",
)
@click.option(
    "--trigger",
    type=click.FloatRange(min=0, max=1, min_open=True),
    default=CompactionPolicy().trigger,
    show_default=True,
    help="With --budget: due when the window uses more than this share of it, or had to "
    "downgrade or drop anything.",
)
@click.option("--dry-run", is_flag=True, help="Show what would be compacted; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
def compact_cmd(
    ctx: click.Context,
    stream: str,
    keep_last: int,
    max_summary_tokens: int,
    counter: str,
    summary_file: Any,
    budget: int | None,
    trigger: float,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Append a compaction to STREAM: a summary that stands in for all but its newest messages.

    Nothing is deleted; context windows show the summary in place of the range from now on.
    The summary is a deterministic extract unless --summary gives one. Prints the range
    compacted, or why nothing was.
    """
    if budget is None and ctx.get_parameter_source("trigger") is ParameterSource.COMMANDLINE:
        raise click.BadParameter("only means something with --budget", param_hint="--trigger")
    policy = CompactionPolicy(
        trigger=trigger, keep_last=keep_last, max_summary_tokens=max_summary_tokens
    )
    given = summary_file.read() if summary_file is not None else None
    if given is not None and not given.strip():
        raise click.BadParameter("the summary is empty", param_hint="--summary")
    store = open_store(ctx)
    count = get_counter(counter)
    if budget is not None:
        window = context_window(store, stream, budget=budget, counter=count)
        if not policy.due(window):
            report = window.report
            assert report is not None
            _print(
                as_json,
                {"outcome": "not_due", "tokens": report.tokens, "budget": report.budget},
                f"not due: the window uses {report.tokens} of {report.budget} tokens "
                f"(trigger {trigger:g}), nothing downgraded or dropped",
            )
            return
    if dry_run:
        plan = plan_compaction(list(store.read(stream)), keep_last=keep_last, stream=stream)
        _dry_run(plan, policy, given, count, as_json)
        return
    summarizer = _Given(given) if given is not None else ExtractiveSummarizer(count)
    result = compact(store, stream, summarizer, policy=policy, counter=count)
    if as_json:
        emit_json(_result_json(result))
        return
    if result.plan is None or result.event is None:
        why = {
            "already_compacted": "another writer compacted it first",
            "not_shorter": f"the summary ({result.summary_tokens} tokens) is no shorter than "
            f"what it would replace ({result.replaced_tokens} tokens)",
        }.get(
            result.outcome,
            f"no input, output or tool result before the newest {keep_last} messages that a "
            "compaction does not already cover",
        )
        console.print(escape(f"nothing to compact in {stream!r}: {why}"), highlight=False)
        return
    plan = result.plan
    console.print(
        escape(
            f"compacted {stream!r} seqs {plan.first_seq}..{plan.last_seq} "
            f"({result.replaced_tokens} tokens) into seq {result.event.seq} "
            f"({result.summary_tokens} tokens)"
            + (f", superseding seqs {_seqs(plan)}" if plan.previous else "")
        ),
        highlight=False,
    )


def _seqs(plan: CompactionPlan) -> str:
    return ", ".join(str(e.seq) for e in plan.previous)


def _print(as_json: bool, value: dict[str, Any], text: str) -> None:
    if as_json:
        emit_json(value)
    else:
        console.print(escape(text), highlight=False)


def _dry_run(
    plan: CompactionPlan | None,
    policy: CompactionPolicy,
    given: str | None,
    counter: Any,
    as_json: bool,
) -> None:
    if plan is None:
        _print(as_json, {"outcome": "nothing_to_compact", "plan": None}, "nothing to compact")
        return
    request = plan.request(summary_room(policy, replaced_tokens(plan, counter)))
    summary = given if given is not None else ExtractiveSummarizer(counter)(request)
    if as_json:
        emit_json({"outcome": "dry_run", "plan": _plan_json(plan), "summary": summary})
        return
    superseding = f", superseding seqs {_seqs(plan)}" if plan.previous else ""
    console.print(
        f"would compact seqs {plan.first_seq}..{plan.last_seq} ({len(plan.events)} events"
        f"{superseding}) as seq {plan.at + 1}, with this summary:",
        highlight=False,
    )
    console.print(escape(summary), highlight=False)
