"""`eventlog export`: copy a store into a new one (another backend, format or settings)."""

from __future__ import annotations

import click
import msgspec
from rich.markup import escape
from rich.progress import Progress, TaskID

import eventlog
from eventlog.cli.app import cli, console, count, emit_json, open_store, progress_bar
from eventlog.connect import in_process, rehearsal
from eventlog.copy import Phase, copy_store
from eventlog.errors import UsageError
from eventlog.store import Store, VerifyReport

_LABELS: dict[Phase, str] = {
    "verify": "verifying the source",
    "check": "checking the target can take them",
    "copy": "copying",
}


@cli.command("export")
@click.argument("target", metavar="TARGET_URL")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option(
    "--decrypt",
    is_flag=True,
    help="Store encrypted events unencrypted in a target without a key store.",
)
@click.option(
    "--leave-out-erased",
    is_flag=True,
    help="Leave erased streams and the forks descending from them out of the copy.",
)
@click.pass_context
def export_cmd(
    ctx: click.Context,
    target: str,
    as_json: bool,
    quiet: bool,
    decrypt: bool,
    leave_out_erased: bool,
) -> None:
    """Copy every event and fork of the store into TARGET_URL, a new empty store.

    Ids, seqs, times, meta and forks are kept. Between stores of one payload format the hashes
    are the source's; between formats (e.g. SQLite to JSONL) the copy has its own hash chain.
    Encrypted events keep ciphertext and hashes when TARGET_URL has the same key directory
    (?keys=DIR); with another one they are encrypted again (new hashes), and a target without
    one takes them only with --decrypt. Erased streams are copied as stored and marked erased
    in the target's key directory; a target that cannot hold them is refused unless
    --leave-out-erased. The source is verified first and the target verified after; exit 1 on
    any problem.
    """
    source = open_store(ctx)
    if in_process(target):
        raise UsageError(
            "memory:// is gone when this command ends: export to a store on disk "
            "(sqlite://, jsonl://, lmdb://)"
        )
    opened: list[Store] = []

    def open_target() -> Store:  # a new store is made only once the source has verified
        opened.append(eventlog.open(target))
        ctx.call_on_close(opened[0].close)
        return opened[0]

    bar = progress_bar(quiet)
    tasks: dict[Phase, TaskID] = {}

    def progress(phase: Phase, done: int, total: int) -> None:
        if phase not in tasks:
            tasks[phase] = bar.add_task(_LABELS[phase], total=total or None)
        bar.update(tasks[phase], completed=done, total=total or None)

    with bar:
        # Checked on a stand-in first, whether the target exists or not: a refused copy makes
        # no new store and no key directory, and writes nothing into an existing one.
        with rehearsal(target) as trial:
            report = copy_store(
                source,
                open_target,
                progress=progress,
                rehearse=trial,
                decrypt=decrypt,
                leave_out_erased=leave_out_erased,
            )
        dest = opened[0]
        check = _verify_copy(dest, bar)
    if as_json:
        emit_json({**msgspec.to_builtins(report), "target_verified": check.ok})
    else:
        if report.same_hashes:
            hashes = "the source's"
        elif source.codec.format != dest.codec.format:
            hashes = "a new chain (other payload format)"
        else:
            hashes = "a new chain from the first event encrypted or decrypted anew"
        console.print(
            escape(
                f"copied {count(report.events, 'event')} in {count(report.streams, 'stream')} "
                f"({count(report.forks, 'fork')}) "
                f"to {dest.location}; hashes: {hashes}"
                + (f"; {report.upcast} upcast to their current schema" if report.upcast else "")
                + (f"; {count(report.encrypted, 'event')} encrypted" if report.encrypted else "")
                + (f"; {count(report.decrypted, 'event')} decrypted" if report.decrypted else "")
                + (
                    f"; {count(report.erased, 'erased stream')} copied as stored"
                    if report.erased
                    else ""
                )
                + (
                    f"; left out {count(len(report.left_out), 'stream')}, erased or forked "
                    f"from one ({count(report.left_out_events, 'event')}): "
                    f"{', '.join(report.left_out)}"
                    if report.left_out
                    else ""
                )
            ),
            highlight=False,
        )
        status = "[green]ok[/green]" if check.ok else "[red]FAILED[/red]"
        console.print(f"verify target: {status} ({check.events} events)")
    if not check.ok:
        ctx.exit(1)


def _verify_copy(dest: Store, bar: Progress) -> VerifyReport:
    """Verify the new store, on the bar: it reads every event again, as long as the copy."""
    task = bar.add_task("verifying the copy", total=dest.head_position() or None)
    return dest.verify(progress=lambda done: bar.update(task, completed=done))
