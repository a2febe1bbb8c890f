"""`python -m eventlog` runs the CLI."""

from eventlog.cli import main

main()
