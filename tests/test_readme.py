"""The Python examples in README.md and docs/ run as written.

Every ```python block must run on its own; a block that needs context it does not show (an SDK
client, a server, a directory) is fenced as ```python fragment and only checked to compile.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
FRAGMENT = re.compile(r"```python fragment\n(.*?)```", re.S)
EXAMPLES = [
    pytest.param(code, id=f"{path.relative_to(ROOT)}#{i}")
    for path in DOCS
    for i, code in enumerate(BLOCK.findall(path.read_text()))
]


FRAGMENTS = [
    pytest.param(code, id=f"{path.relative_to(ROOT)}#fragment{i}")
    for path in DOCS
    for i, code in enumerate(FRAGMENT.findall(path.read_text()))
]


@pytest.mark.parametrize("code", FRAGMENTS)
def test_fragment_compiles(code: str) -> None:
    compile(code, "<doc fragment>", "exec")


@pytest.mark.parametrize("code", EXAMPLES)
def test_example_runs(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # samples' temp dirs end up here
    exec(compile(code, "<doc example>", "exec"), {"__name__": "__doc_example__"})


def test_readme_starts_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make demo", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
