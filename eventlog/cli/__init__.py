"""Command-line interface: `eventlog [--store URL] COMMAND`."""

import eventlog.cli.state_cmds  # noqa: F401 - registers commands
from eventlog.cli import bench_cmds, core_cmds, provider_cmds  # noqa: F401 - registers commands
from eventlog.cli.app import cli


def main() -> None:
    """Console-script entry point."""
    cli()


__all__ = ["cli", "main"]
