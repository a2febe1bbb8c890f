"""The LMDB structure check: damage liblmdb would crash on is reported by verify instead.

Each damage is made at a page the check reaches (found by walking the file), and verify runs in
a real subprocess: were the check to miss it, liblmdb would kill that process, not the tests.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import eventlog as el
from eventlog.backends import lmdb_pages
from eventlog.backends.lmdb_pages import (
    _DB,
    _PAGE,
    NODE_HEADER,
    P_BRANCH,
    P_LEAF,
    P_OVERFLOW,
    PAGE_HEADER,
    Tree,
    Walker,
    read_meta,
)


class _Recorder(Walker):
    """A walker that keeps each page it reaches: page number -> (tree name, page flags)."""

    def __init__(self, fd: int, meta: lmdb_pages.Meta) -> None:
        super().__init__(fd, meta)
        self.pages: dict[int, tuple[str, int]] = {}

    def _page(self, pgno: int, name: str) -> bytes:
        raw = super()._page(pgno, name)
        self.pages[pgno] = (name, _PAGE.unpack_from(raw)[2])
        return raw


def _layout(data: Path) -> tuple[int, dict[int, tuple[str, int]], dict[str, Tree]]:
    """(page size, reachable pages, named trees) of the newest snapshot in `data`."""
    fd = os.open(data, os.O_RDONLY)
    try:
        metas = [read_meta(fd, 0), read_meta(fd, 1)]
        meta = max(metas, key=lambda m: m.txnid)
        walker = _Recorder(fd, meta)
        walker.check(meta.free)
        trees = {}
        for key, tree in walker.check(meta.main):
            walker.check(tree)
            trees[key.decode()] = tree
        return meta.page_size, walker.pages, trees
    finally:
        os.close(fd)


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """An LMDB store with deep trees, big values on overflow pages, a fork and a blob."""
    root = tmp_path / "l"
    with el.open(f"lmdb:///{root}") as store:
        for k in range(6):
            store.append(
                f"s{k}",
                [el.ModelInput.from_text(f"turn {i} " * (5 + (i % 7) * 300)) for i in range(60)],
            )
        store.fork("s1", "f1", at_seq=10)
        store.append("f1", [el.ModelInput.from_text("on the fork")])
        store.backend.put_blob("k", b"v" * 10_000)
        assert store.verify().ok
    return root


def _verify(root: Path) -> dict[str, object]:
    """`eventlog verify --json` in a subprocess: it must exit, not die of a signal."""
    done = subprocess.run(
        [sys.executable, "-m", "eventlog", "--store", f"lmdb:///{root}", "verify", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (0, 1), (done.returncode, done.stderr)
    report: dict[str, object] = json.loads(done.stdout)
    return report


def _patch(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _first(pages: dict[int, tuple[str, int]], tree: str, kind: int) -> int:
    return min(p for p, (name, flags) in pages.items() if name == tree and flags & kind)


def test_a_healthy_store_passes_and_has_the_shapes_the_tests_damage(store_dir: Path) -> None:
    psize, pages, trees = _layout(store_dir / "data.mdb")
    assert psize == 4096
    assert trees["events"].depth >= 2  # branch pages to damage
    assert any(flags & P_OVERFLOW for _, flags in pages.values())
    assert {"events", "positions", "ids", "streams", "forks", "blobs"} <= set(trees)
    with el.open(f"lmdb:///{store_dir}") as store:
        assert store.backend.check_storage() is None


def test_verify_reads_the_file_it_opened_after_a_change_of_directory(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check reads data.mdb through the handle opened with the store, not by a path that
    the working directory (or a move of the store) could make name another file."""
    monkeypatch.chdir(store_dir.parent)
    with el.open(f"lmdb://{store_dir.name}") as store:
        monkeypatch.chdir("/")
        assert store.verify().ok


def _problem(root: Path) -> str:
    report = _verify(root)
    assert report["ok"] is False and report["events"] == 0, report
    (problem,) = report["problems"]  # type: ignore[misc]
    message: str = problem["message"]
    assert "the storage engine could not read it safely; no event checked" in message
    return message


def test_a_child_pointer_past_the_file(store_dir: Path) -> None:
    data = store_dir / "data.mdb"
    _, pages, _ = _layout(data)
    branch = _first(pages, "events", P_BRANCH)
    raw = data.read_bytes()[branch * 4096 : (branch + 1) * 4096]
    (ptr,) = struct.unpack_from("<H", raw, PAGE_HEADER)
    _patch(data, branch * 4096 + ptr, struct.pack("<HHH", 0xFFFF, 0x0FFF, 0))  # lo, hi, flags
    assert "the events tree points to page 268435455, outside pages 2-" in _problem(store_dir)


def test_a_page_that_is_another_page(store_dir: Path) -> None:
    data = store_dir / "data.mdb"
    _, pages, _ = _layout(data)
    leaf = _first(pages, "positions", P_LEAF)
    _patch(data, leaf * 4096, struct.pack("<Q", leaf + 1))
    assert f"page {leaf} says it is page {leaf + 1}" in _problem(store_dir)


def test_a_node_offset_outside_its_page(store_dir: Path) -> None:
    data = store_dir / "data.mdb"
    _, pages, _ = _layout(data)
    leaf = _first(pages, "ids", P_LEAF)
    _patch(data, leaf * 4096 + PAGE_HEADER, struct.pack("<H", 4096 - NODE_HEADER + 2))
    assert f"page {leaf} of the ids tree has a node outside its bytes" in _problem(store_dir)


def test_a_leaf_where_a_branch_belongs(store_dir: Path) -> None:
    data = store_dir / "data.mdb"
    _, pages, _ = _layout(data)
    branch = _first(pages, "events", P_BRANCH)
    _patch(data, branch * 4096 + 10, struct.pack("<H", P_LEAF))
    assert f"page {branch} of the events tree has flags 0x2, not a branch page" in _problem(
        store_dir
    )


def test_a_big_value_claiming_more_pages_than_the_file_has(store_dir: Path) -> None:
    data = store_dir / "data.mdb"
    _, pages, _ = _layout(data)
    first = _first(pages, "events", P_OVERFLOW)
    _patch(data, first * 4096 + 12, struct.pack("<I", 10**9))
    assert f"the big value at page {first} claims 1000000000 pages" in _problem(store_dir)


def test_a_tree_header_counting_other_entries(store_dir: Path) -> None:
    """A named tree's header (in the main tree's leaf) says 1 more entry than it holds."""
    data = store_dir / "data.mdb"
    _, pages, trees = _layout(data)
    main_leaf = _first(pages, "main", P_LEAF)
    raw = bytearray(data.read_bytes()[main_leaf * 4096 : (main_leaf + 1) * 4096])
    header = raw.index(b"streams") + len(b"streams")
    fields = list(_DB.unpack_from(raw, header))
    fields[6] += 1  # entries
    _patch(data, main_leaf * 4096 + header, _DB.pack(*fields))
    assert trees["streams"].entries == fields[6] - 1
    message = _problem(store_dir)
    assert "the streams tree holds" in message and "its header says" in message
