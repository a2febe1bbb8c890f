"""Command-line interface: `eventlog [--store URL] COMMAND`."""

import eventlog.cli.state_cmds  # noqa: F401 - registers commands
from eventlog.cli import (  # noqa: F401 - registers commands
    bench_cmds,
    compact_cmds,
    copy_cmds,
    core_cmds,
    create_cmds,
    key_cmds,
    provider_cmds,
    render_cmds,
    window_cmds,
)
from eventlog.cli.app import cli


def main() -> None:
    """Console-script entry point."""
    cli()


__all__ = ["cli", "main"]
