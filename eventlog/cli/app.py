"""The `eventlog` click group, the shared `--store` option and output helpers."""

from __future__ import annotations

import importlib
import logging
import math
import os
import re
import signal
import sys
import warnings
from collections.abc import Callable
from typing import Any

import click
import msgspec
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import eventlog
from eventlog.connect import in_process, other_store_at, rehearsal, store_exists
from eventlog.errors import EventlogError, UsageError
from eventlog.store import ANY, MAX_SEQ, NO_STREAM, ExpectedSeq, Store

DEFAULT_STORE = "sqlite:///eventlog.db"


class _Notices(logging.Handler):
    """eventlog's log records on stderr, written to whatever stderr is at the time.

    They are the notices a user should see: schema upgrades (long on a big store), index
    rebuilds, torn tails cut.
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            click.echo(f"eventlog: {self.format(record)}", err=True)
        except Exception:  # logging's contract: a handler never raises
            self.handleError(record)


def show_notices() -> None:
    """Print the `eventlog` logger's INFO and higher records on stderr (once per process).

    Not when logging is configured already for `eventlog` or above it (by an `--import`ed
    module, or a program running the CLI): its handlers then decide, and nothing is printed
    twice. A discarded snapshot is logged, so its `SnapshotWarning` is then not shown again.
    """
    from eventlog.projections.runner import SnapshotWarning

    logger = logging.getLogger("eventlog")
    if logger.hasHandlers():  # the logger's own, or an ancestor's (the root's)
        return
    warnings.filterwarnings("ignore", category=SnapshotWarning)
    logger.addHandler(_Notices(logging.INFO))
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)


def store_url(ctx: click.Context) -> str:
    """The store URL: --store, then $EVENTLOG_STORE, then sqlite:///eventlog.db here."""
    root = ctx.find_root()
    url: str | None = root.params.get("store")
    if url is None:
        url = os.environ.get("EVENTLOG_STORE")
        if url == "":
            raise UsageError("$EVENTLOG_STORE is empty: set it to a store URL, or unset it")
    if url == "":
        raise UsageError("--store is empty (an unset shell variable?): give a store URL")
    return url or DEFAULT_STORE


def open_store(
    ctx: click.Context,
    *,
    create: bool = False,
    rehearse: Callable[[Store], object] | None = None,
) -> Store:
    """Open the store this invocation points at (closed when the command ends).

    Only commands that write pass `create`: a mistyped URL must not leave an empty store behind
    and report on it as if it were the one meant. When the store does not exist yet, the
    command's write is first `rehearse`d on an in-memory store with the same format and
    options (`eventlog.connect.rehearsal`): a write the store would refuse then creates
    nothing.
    """
    url = store_url(ctx)
    if not create and in_process(url):
        raise UsageError(
            f"{url} is empty in every command (a memory store lives in one process): "
            "nothing to read; point --store at a file store"
        )
    exists = store_exists(url)
    if not create and not exists:
        other = other_store_at(url)
        if other is not None:
            scheme = url.split("://", 1)[0]
            raise UsageError(f"{url} holds a {other} store, not a {scheme} one (use {other}://)")
        raise UsageError(
            f"no store at {url} (check --store or $EVENTLOG_STORE; demo, append, import and "
            "ingest create one)"
        )
    if not exists and rehearse is not None:
        with rehearsal(url) as trial:
            rehearse(trial)
    store = eventlog.open(url)
    ctx.call_on_close(store.close)
    return store


def expected_seq_option(default: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The --expected-seq option: a seq, 'any' or 'no_stream' (optimistic concurrency)."""

    def parse(ctx: click.Context, param: click.Parameter, value: str) -> ExpectedSeq:
        if value in (ANY, NO_STREAM):
            return value
        if value.isascii() and value.isdigit() and int(value) <= MAX_SEQ:
            return int(value)
        raise click.BadParameter("must be a seq, 'any' or 'no_stream'")

    return click.option(
        "--expected-seq",
        default=default,
        show_default=True,
        callback=parse,
        help="The stream's last seq this write expects: a seq, 'any' or 'no_stream'.",
    )


def emit_json(value: Any) -> None:
    """Write one JSON document to stdout."""
    write_out(json_bytes(value, indent=True) + b"\n")
    sys.stdout.flush()


def write_out(data: bytes) -> None:
    """Write all of `data` to stdout; BrokenPipeError if the reader has gone.

    A reader leaving mid-write can make one write take only part of a large output without an
    error (SIGPIPE is ignored): the rest is written until the pipe says it is closed.
    """
    out = sys.stdout.buffer
    view = memoryview(data)
    while view:
        n = out.write(view)
        if not n:
            raise BrokenPipeError
        view = view[n:]


def json_bytes(value: Any, *, indent: bool = False, what: str = "the output") -> bytes:
    """`value` (JSON-like builtins) as JSON, exactly or not at all.

    Integers of any size are written as they are. NaN and the infinities have no JSON form
    (orjson and msgspec would write `null`): they are refused, naming `what` holds them.
    """
    _refuse_inexact(value, what)
    out = msgspec.json.encode(value)
    return msgspec.json.format(out, indent=2) if indent else out


def _refuse_inexact(value: Any, what: str) -> None:
    """UsageError for what JSON would change: a non-finite float, a key that is not a string."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UsageError(
                f"{what} holds the float {value!r}, which JSON cannot show (it would print "
                "null): read it with the Python API"
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise UsageError(
                    f"{what} holds the {type(key).__name__} key {key!r}, which JSON can only "
                    "show as a string (another value): read it with the Python API"
                )
            _refuse_inexact(item, what)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _refuse_inexact(item, what)


class _Console(Console):
    """A rich console whose closed pipe ends the command as `Group` ends it (status 141)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


console = _Console(soft_wrap=True)
"""stdout. Lines are never broken at the console's width (80 columns when piped): a script
reading them, or `grep`, sees each message whole. Tables keep a layout (`print_table`)."""
err_console = Console(stderr=True)
"""stderr: progress bars (which must fit the terminal) and messages (printed soft-wrapped)."""


def print_table(table: Table) -> None:
    """Print `table` on stdout, laid out to the console's width (its cells wrap)."""
    console.print(table, soft_wrap=False)


def count(n: int, noun: str) -> str:
    """`n` and its noun, singular for 1 ("1 stream", "3 streams"), with thousands separators."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def progress_bar(quiet: bool) -> Progress:
    """A progress bar on stderr for long work; off with `quiet` or when stderr is no terminal."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        disable=quiet or not err_console.is_terminal,
        transient=True,
    )


class Group(click.Group):
    """A click group that turns errors users can meet into one clear line and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; eventlog, file system and encoding errors are one line, no traceback.

        A bug's traceback still shows.
        """
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            _closed_pipe(ctx)
        except (EventlogError, OSError) as exc:
            _fail(ctx, type(exc).__name__, str(exc))
        except UnicodeDecodeError as exc:
            _fail(
                ctx,
                "UnicodeDecodeError",
                f"the input is not UTF-8 text ({exc.reason} at byte {exc.start})",
            )


def _closed_pipe(ctx: click.Context) -> None:
    """The reader of stdout went away (`eventlog log s | head`): stop quietly.

    With status 141, as a program killed by SIGPIPE; stdout then points at /dev/null, so
    Python's last flush at exit does not fail again.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    ctx.exit(128 + signal.SIGPIPE)


def _fail(ctx: click.Context, kind: str, message: str) -> None:
    """Print the error as one line on stderr (a driver's message may span several) and exit 1."""
    one_line = re.sub(r"\s*\n\s*", " ", message.strip())
    err_console.print(
        f"[red]error:[/red] {kind}: {escape(one_line)}", highlight=False, soft_wrap=True
    )
    ctx.exit(1)


@click.group(cls=Group)
@click.option(
    "--store",
    metavar="URL",
    default=None,
    help="Store URL (default: $EVENTLOG_STORE, then sqlite:///eventlog.db).",
)
@click.option(
    "--import",
    "imports",
    metavar="MODULE",
    multiple=True,
    help="Import a module first, so its event types are registered (repeatable; also "
    "$EVENTLOG_IMPORT, comma-separated).",
)
@click.version_option(eventlog.__version__, prog_name="eventlog")
def cli(store: str | None, imports: tuple[str, ...]) -> None:
    """An event-sourced store for LLM agent conversations."""
    from_env = [m.strip() for m in os.environ.get("EVENTLOG_IMPORT", "").split(",") if m.strip()]
    for module in [*from_env, *imports]:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            hint = "; is it on PYTHONPATH?" if exc.name and module.startswith(exc.name) else ""
            raise click.UsageError(f"cannot import {module!r} ({exc}){hint}") from exc
        except Exception as exc:  # the module was found, and raised while importing
            raise click.UsageError(
                f"importing {module!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
    show_notices()  # after the imports: one of them may configure logging
