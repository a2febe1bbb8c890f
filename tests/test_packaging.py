"""What a plain `pip install agent-eventlog` must be enough for."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_DEFAULT_STORE_RUN = """
import json, sys, tempfile
import eventlog as el
import eventlog.cli
with tempfile.TemporaryDirectory() as d:
    with el.open(f"sqlite:///{d}/x.db") as store:
        store.append("s", [el.ModelInput.from_text("hi")])
        assert store.verify().ok
print(json.dumps(sorted({name.partition(".")[0] for name in sys.modules})))
"""


_OPPORTUNISTIC = {"typing_extensions"}
"""Imported when installed, and done without otherwise (msgspec tries it)."""


def _core_distributions() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[\[<>=!~; ]", req, maxsplit=1)[0] for req in project["dependencies"]}
    return {_canonical(n) for n in names}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(names: set[str]) -> set[str]:
    """The distributions and everything they require (extras and markers aside), installed."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for req in requires:
            if "extra ==" in req:
                continue
            todo.append(_canonical(re.split(r"[\[<>=!~; (]", req, maxsplit=1)[0]))
    return seen


def test_the_default_store_and_the_cli_need_only_core_dependencies() -> None:
    """Every third-party module the SQLite default and the CLI load comes from a distribution
    listed in `dependencies`, not an extra: `eventlog demo` works on a bare install."""
    done = subprocess.run(
        [sys.executable, "-c", _DEFAULT_STORE_RUN], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    baseline = subprocess.run(  # what the interpreter loads by itself (.pth hooks, say)
        [sys.executable, "-c", "import json, sys; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    loaded = set(json.loads(done.stdout)) - set(json.loads(baseline.stdout)) - _OPPORTUNISTIC
    owners = importlib.metadata.packages_distributions()
    core = _closure(_core_distributions())
    outside = {
        module: owners[module]
        for module in loaded
        if module in owners
        and module != "eventlog"
        and not any(
            _canonical(d) in core or _canonical(d) == "agent-eventlog" for d in owners[module]
        )
    }
    assert outside == {}, f"loaded from distributions outside `dependencies`: {outside}"
    assert "sqlite-utils" in _core_distributions()
