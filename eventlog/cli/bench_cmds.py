"""`eventlog bench`: the benchmark suite against the limit and the peers, in one run."""

from __future__ import annotations

import shlex
from pathlib import Path

import click
import orjson
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eventlog.bench.common import FULL, QUICK, SIZES, optional_module
from eventlog.cli.app import cli, console, err_console

BACKEND_CHOICES = ("memory", "sqlite", "jsonl", "lmdb", "postgres")


@cli.command("bench")
@click.option("--quick", is_flag=True, help="Smaller workload (under 2 minutes).")
@click.option(
    "--size",
    type=click.Choice(sorted(SIZES)),
    default=None,
    hidden=True,
    help="Workload preset (overrides --quick).",
)
@click.option(
    "--backend",
    "backends",
    multiple=True,
    type=click.Choice(BACKEND_CHOICES),
    help="Backend to measure (repeatable; default: all available).",
)
@click.option("--no-peers", is_flag=True, help="Skip the peers even when installed.")
@click.option(
    "--json", "json_path", type=click.Path(path_type=Path), help="Save the results as JSON."
)
@click.option("--plot", "plot_path", type=click.Path(path_type=Path), help="Save a PNG plot.")
@click.option(
    "--markdown", "md_path", type=click.Path(path_type=Path), help="Save the table as Markdown."
)
@click.option(
    "--workdir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where scratch stores go: a fresh subdirectory per run, kept (default: a temporary "
    "directory, removed afterwards).",
)
def bench_cmd(
    quick: bool,
    size: str | None,
    backends: tuple[str, ...],
    no_peers: bool,
    json_path: Path | None,
    plot_path: Path | None,
    md_path: Path | None,
    workdir: Path | None,
) -> None:
    """Measure eventlog against raw engines (the limit) and its peers, and print one table."""
    from eventlog.bench import runner

    _check_outputs(json_path, plot_path, md_path)  # found now, not after the run
    backends = tuple(dict.fromkeys(backends))  # a backend given twice is measured once
    sizes = SIZES[size] if size else (QUICK if quick else FULL)
    options = runner.Options(
        sizes=sizes,
        backends=backends or runner.BACKENDS,
        peers=not no_peers,
        progress=lambda line: err_console.print(
            f"[dim]bench[/dim] {escape(line)}", highlight=False
        ),
        workdir=workdir,
        command=_command_line(quick, size, backends, no_peers, json_path, plot_path, md_path),
    )
    result = runner.run(options)
    table = runner.render_table(result)
    _table_console(table).print(table)
    if result.get("workdir"):
        err_console.print(
            f"scratch stores kept in {escape(str(result['workdir']))}",
            highlight=False,
            soft_wrap=True,
        )
    if json_path is not None:
        json_path.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2) + b"\n")
        err_console.print(
            f"results saved to {escape(str(json_path))}", highlight=False, soft_wrap=True
        )
    if md_path is not None:
        md_path.write_text(runner.to_markdown(result))
    if plot_path is not None:
        from eventlog.bench.plot import plot

        plot(result, plot_path)
        err_console.print(
            f"plot saved to {escape(str(plot_path))}", highlight=False, soft_wrap=True
        )


TABLE_WIDTH = 180
"""The table's least width: it has a column per peer, and squeezed into 80 it is unreadable."""


def _table_console(table: Table) -> Console:
    """A console as wide as the terminal (at least `TABLE_WIDTH`), or as the table when piped.

    Rich caps a print's width at its console's (80 when not a terminal), so it is set on the
    console: piped to a file or a pager, each row of the table is one line.
    """
    if console.is_terminal:
        width = max(console.width, TABLE_WIDTH)
    else:
        width = max(Console(width=_UNBOUNDED).measure(table).maximum, TABLE_WIDTH)
    return Console(width=width, force_terminal=console.is_terminal)


_UNBOUNDED = 100_000
"""A width no table reaches: measuring on it gives the table's natural width."""


def _check_outputs(json_path: Path | None, plot_path: Path | None, md_path: Path | None) -> None:
    """Refuse output paths the run could not write, and --plot without matplotlib, up front."""
    for option, path in (("--json", json_path), ("--plot", plot_path), ("--markdown", md_path)):
        if path is None:
            continue
        if path.is_dir():
            raise click.BadParameter(f"{str(path)!r} is a directory", param_hint=option)
        if not path.resolve().parent.is_dir():
            raise click.BadParameter(
                f"directory {str(path.parent)!r} does not exist", param_hint=option
            )
    if plot_path is not None and optional_module("matplotlib") is None:
        raise click.BadParameter(
            "matplotlib is not installed (pip install 'agent-eventlog[benchmarks]')",
            param_hint="--plot",
        )


def _command_line(
    quick: bool,
    size: str | None,
    backends: tuple[str, ...],
    no_peers: bool,
    *paths: Path | None,
) -> str:
    """The command that reproduces this run, rebuilt from its parsed options.

    Not sys.argv: when the CLI runs in-process (tests, notebooks) that is the host's command.
    """
    words = ["eventlog", "bench"]
    words += ["--quick"] if quick else []
    words += ["--size", size] if size else []
    for backend in backends:
        words += ["--backend", backend]
    words += ["--no-peers"] if no_peers else []
    for flag, path in zip(("--json", "--plot", "--markdown"), paths, strict=True):
        words += [flag, str(path)] if path is not None else []
    return shlex.join(words)
