"""Command-line interface: `eventlog [--store URL] COMMAND`."""

from eventlog.cli import core_cmds, provider_cmds  # noqa: F401 - registers commands
from eventlog.cli.app import cli


def main() -> None:
    """Console-script entry point."""
    cli()


__all__ = ["cli", "main"]
