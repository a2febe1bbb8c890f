"""The command synopses in docs/ name exactly the options each command takes."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from eventlog.cli import cli

DOCS = sorted((Path(__file__).parent.parent / "docs").rglob("*.md"))
SYNOPSIS = re.compile(r"eventlog (?:\[--store URL\] )?([a-z]+)(.*)")


def _code_blocks(text: str) -> list[str]:
    """The fenced blocks of a Markdown text, continuation lines joined to the line above."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)
    return [re.sub(r"\n\s+(?=\[|--)", " ", block) for block in blocks]


def _synopses() -> list[tuple[str, str, str]]:
    """(doc, command, options text) for each `eventlog [--store URL] COMMAND ...` line."""
    found = []
    for path in DOCS:
        for block in _code_blocks(path.read_text()):
            for line in block.splitlines():
                match = SYNOPSIS.match(line)
                if match and match.group(1) in cli.commands:
                    found.append((path.name, match.group(1), match.group(2)))
    return found


SYNOPSES = [pytest.param(*s, id=f"{s[0]}-{s[1]}") for s in _synopses()]


def test_synopses_are_found() -> None:
    assert {name for _, name, _ in _synopses()} >= {"replay", "window", "import", "compact"}


@pytest.mark.parametrize(("doc", "name", "text"), SYNOPSES)
def test_a_synopsis_names_every_option_and_only_those(doc: str, name: str, text: str) -> None:
    command = cli.commands[name]
    options = {
        p.opts[0]
        for p in command.params
        if isinstance(p, click.Option) and not p.hidden and p.opts[0].startswith("--")
    }
    shown = set(re.findall(r"--[a-z][a-z-]*", text))
    assert shown == options, (doc, name, sorted(options - shown), sorted(shown - options))
