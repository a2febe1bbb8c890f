"""CLI `create`: an empty store with its options, refused where one exists."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import eventlog as el
from eventlog.cli import cli


def run(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", url, "create", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl", "lmdb"])
def test_creates_an_empty_store(tmp_path: Path, scheme: str) -> None:
    url = f"{scheme}:///{tmp_path / 'store'}?compression=zstd"
    code, out, err = run(url)
    assert code == 0, err
    assert f"created an empty {scheme} store at" in out
    assert el.store_exists(url)
    with el.open(url) as store:
        assert store.streams() == []
    with el.open(url) as store:  # opened as created: its options come with the URL
        store.append("s", [el.Checkpoint(label="x" * 2000)])
        [record] = store.backend.read("s", 1, 1)
        assert record.codec == 1  # zstd


def test_json_output(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    code, out, err = run(url, "--json")
    assert code == 0, err
    assert orjson.loads(out) == {
        "created": url,
        "backend": "sqlite",
        "location": str(tmp_path / "a.db"),
    }


def test_an_existing_store_is_left_alone(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    with el.open(url) as store:
        store.append("s", [el.Checkpoint(label="kept")])
    code, out, err = run(url)
    assert code == 1 and "a store exists already; nothing changed" in " ".join(err.split())
    with el.open(url) as store:
        assert [e.data for e in store.read("s")] == [el.Checkpoint(label="kept")]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("memory://", "lives in one process"),
        ("sqlite:///{dir}/b.db?compresion=zstd", "unknown option(s) for sqlite://: compresion"),
        ("lmdb:///{dir}/j", "a jsonl store is already there (use jsonl://)"),
    ],
)
def test_bad_input_creates_nothing(tmp_path: Path, url: str, message: str) -> None:
    with el.open(f"jsonl:///{tmp_path / 'j'}") as store:
        store.append("s", [el.Checkpoint(label="x")])
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out, err = run(url.format(dir=tmp_path))
    assert code != 0 and message in " ".join(err.split())
    assert sorted(p.name for p in tmp_path.iterdir()) == before
