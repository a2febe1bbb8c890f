"""Opening stores from URLs: schemes, options, clear errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import eventlog as el


@pytest.mark.parametrize(
    ("url", "error", "match"),
    [
        ("nonsense", el.UsageError, "not a store URL"),
        ("ftp://x", el.UsageError, "unknown store URL scheme 'ftp'"),
        ("memory://?bogus=1", el.UsageError, "bogus"),
        ("memory://?durability=sometimes", el.UsageError, "sometimes"),
        ("memory://?zstd_level=abc", el.UsageError, "zstd_level must be an integer, got 'abc'"),
        ("memory://?max_event_bytes=1.5", el.UsageError, "max_event_bytes must be an integer"),
        ("memory://?poll_interval=soon", el.UsageError, "poll_interval must be a number"),
        ("memory://?poll_interval=inf", el.UsageError, "poll_interval must be finite"),
        ("memory://?poll_interval=nan", el.UsageError, "poll_interval must be finite"),
        ("lmdb:///tmp/x?map_size=" + "1" * 24, el.UsageError, "map_size must be between 1"),
        ("lmdb:///tmp/x?max_readers=100000000000", el.UsageError, "max_readers must be between"),
        ("jsonl:///tmp/x?lock_timeout=nan", el.UsageError, "lock_timeout must be a number"),
        ("jsonl:///tmp/x?lock_timeout=inf", el.UsageError, "lock_timeout must be a number"),
        ("sqlite:///tmp/x.db?busy_timeout=-5", el.UsageError, "busy_timeout must be a number"),
        ("sqlite:///tmp/x.db?busy_timeout=nan", el.UsageError, "busy_timeout must be a number"),
    ],
)
def test_bad_urls(url: str, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        el.open(url)


def test_options_from_url_and_keywords() -> None:
    with el.open("memory://?durability=batch&poll_interval=0.5") as store:
        assert store.durability == el.Durability.BATCH and store.poll_interval == 0.5
    with el.open("memory://", durability="none") as store:
        assert store.durability == el.Durability.NONE


def test_max_event_bytes_bounds_payloads() -> None:
    with el.open("memory://?max_event_bytes=100") as store:
        with pytest.raises(el.ValidationError, match="limit is 100"):
            store.append("s", [el.ModelInput.from_text("x" * 200)])
        assert not store.exists("s")


def _snapshot(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
        for p in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize(("made", "opened"), [("jsonl", "lmdb"), ("lmdb", "jsonl")])
def test_a_directory_store_is_never_opened_as_another_backend(
    tmp_path: Path, made: str, opened: str
) -> None:
    """A mistyped scheme must not add a second store's files to an existing one."""
    pytest.importorskip("lmdb")
    root = tmp_path / "store"
    with el.open(f"{made}://{root}") as store:
        store.append("s", [el.ModelInput.from_text("hi")])
    before = _snapshot(root)
    with pytest.raises(el.UsageError, match=f"holds a {made} store, not a {opened} one"):
        el.open(f"{opened}://{root}")
    assert _snapshot(root) == before


@pytest.mark.parametrize("scheme", ["jsonl", "lmdb"])
def test_a_directory_of_other_files_does_not_become_a_store(tmp_path: Path, scheme: str) -> None:
    pytest.importorskip("lmdb")
    root = tmp_path / "photos"
    root.mkdir()
    (root / "cat.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(el.UsageError, match=r"is not empty \(cat.jpg\) and holds no"):
        el.open(f"{scheme}://{root}")
    assert _snapshot(root) == {"cat.jpg": b"\xff\xd8"}
    empty = tmp_path / "empty"
    (empty / ".git").mkdir(parents=True)  # a new repository to commit the store to, say
    (empty / "lost+found").mkdir()  # the root of a new file system
    with el.open(f"{scheme}://{empty}") as store:  # an empty directory is a fine new store
        assert store.streams() == []


@pytest.mark.parametrize(
    ("query", "match"),
    [
        ("durability=maybe", "durability must be one of fsync, batch, none, got 'maybe'"),
        ("compression=zstd&zstd_level=99", "zstd_level"),
        ("compression=gzip", "compression must be"),
        ("max_event_bytes=0", "max_event_bytes must be a positive integer, got 0"),
        ("max_event_bytes=-5", "max_event_bytes must be a positive integer, got -5"),
        ("poll_interval=0", "poll_interval.: must be a positive number of seconds, got 0"),
        ("poll_interval=-1", "poll_interval.: must be a positive number of seconds, got -1"),
    ],
)
@pytest.mark.parametrize("scheme", ["sqlite", "jsonl", "lmdb"])
def test_a_bad_store_option_writes_nothing(
    tmp_path: Path, scheme: str, query: str, match: str
) -> None:
    pytest.importorskip("lmdb")
    pytest.importorskip("zstandard")
    target = tmp_path / ("x.db" if scheme == "sqlite" else "x")
    url = f"{scheme}:///{target}" if scheme == "sqlite" else f"{scheme}://{target}"
    with pytest.raises(el.UsageError, match=match):
        el.open(f"{url}?{query}")
    assert list(tmp_path.iterdir()) == []


def test_keyword_options_are_checked_as_strictly_as_the_url() -> None:
    """1.5 is not silently made 1, nor True taken for level 1."""
    pytest.importorskip("zstandard")
    with pytest.raises(el.UsageError, match="compress_min_bytes must be an integer, got 1.5"):
        el.open("memory://", compression="zstd", compress_min_bytes=1.5)
    with pytest.raises(el.UsageError, match="zstd_level must be an integer, got True"):
        el.open("memory://", compression="zstd", zstd_level=True)
    with el.open("memory://") as store:
        with pytest.raises(el.ValidationError, match="must be one of fsync, batch, none"):
            store.append("s", [el.ModelInput.from_text("x")], durability="nope")
        with pytest.raises(el.StreamNotFoundError):
            store.read("missing", 5, 2)  # an empty range of a stream that does not exist


@pytest.mark.parametrize("value", [0, -0.5, True, "0.1", float("nan"), float("inf"), 10**400])
def test_a_poll_interval_that_would_spin_or_never_wake_is_refused(value: object) -> None:
    """Zero or less made every waiting subscriber spin a CPU core."""
    with pytest.raises(el.UsageError, match="poll_interval.: must be a positive number"):
        el.open("memory://", poll_interval=value)


def test_async_subscribe_checks_its_poll_interval() -> None:
    """At the call, with the error `Store.subscribe` and `Store(poll_interval=...)` raise."""

    async def first() -> None:
        async with el.open_async("memory://") as store:
            store.subscribe(poll_interval=0)

    with pytest.raises(el.ValidationError, match="poll_interval.: must be a positive number"):
        asyncio.run(first())


@pytest.mark.parametrize("scheme", ["jsonl", "lmdb"])
def test_a_directory_store_under_home_is_written_as_for_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scheme: str
) -> None:
    """`~` is the home directory; `///~/x` (a '~' at the root of the file system) is refused."""
    pytest.importorskip("lmdb")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with el.open(f"{scheme}://~/events") as store:
        store.append("s", [el.ModelInput.from_text("hi")])
    assert (tmp_path / "events").is_dir() and not (tmp_path / "~").exists()
    with el.open(f"{scheme}://~/events") as store:
        assert store.stream_info("s").last_seq == 1
    with pytest.raises(el.UsageError, match=f"for the home directory write {scheme}://~/x"):
        el.open(f"{scheme}:///~/x")


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl", "lmdb"])
def test_a_hash_sign_is_part_of_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scheme: str
) -> None:
    """`#` starts no fragment: `run#2` is its own store, never `run` opened in its place."""
    pytest.importorskip("lmdb")
    monkeypatch.chdir(tmp_path)
    name = "run#2.db" if scheme == "sqlite" else "run#2"
    with el.open(f"{scheme}://{'/' if scheme == 'sqlite' else ''}{name}") as store:
        store.append("s", [el.ModelInput.from_text("hi")])
        assert name in store.location
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("run")) == [name]
