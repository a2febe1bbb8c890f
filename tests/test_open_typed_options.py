"""`eventlog.open`'s keyword options: typed for mypy --strict, and checked at run time as before.

Untyped callers still exist, so every option keeps its run-time check: an unknown name or a bad
value is a UsageError naming the option, raised before anything is made on disk.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import eventlog as el
from tests.postgres import DATABASE, fresh_schema, url_for

__all__ = ["fresh_schema"]  # the fixture, used by name

ROOT = Path(__file__).parent.parent
LOCAL = ["memory", "sqlite"]


def _url(scheme: str, tmp_path: Path) -> str:
    """A store URL under `tmp_path` (nothing is made there until the store opens)."""
    return {
        "memory": "memory://",
        "sqlite": f"sqlite:///{tmp_path}/x.db",
        "jsonl": f"jsonl://{tmp_path}/x",
        "lmdb": f"lmdb://{tmp_path}/x",
    }[scheme]


def _open(url: str, **options: Any) -> el.Store:
    """An untyped caller: any name, any value, as before the options had types."""
    return el.open(url, **options)


def _settings(store: el.Store) -> dict[str, object]:
    """What the store options became."""
    packer = store.codec.compression
    return {
        "durability": store.durability,
        "max_event_bytes": store.codec.max_event_bytes,
        "poll_interval": store.poll_interval,
        "compression": packer.mode,
        "compress_min_bytes": packer.min_bytes,
        "zstd_level": packer.level,
    }


# -- valid values open a store, as a keyword as in the URL --------------------------------------

STORE_VALUES: list[tuple[str, object, str, object]] = [
    # (option, keyword value, the same in a URL query, what the store then has)
    ("durability", "fsync", "fsync", el.Durability.FSYNC),
    ("durability", "batch", "batch", el.Durability.BATCH),
    ("durability", "none", "none", el.Durability.NONE),
    ("durability", el.Durability.BATCH, "batch", el.Durability.BATCH),
    ("max_event_bytes", 100, "100", 100),
    ("max_event_bytes", None, "", 16 * 1024 * 1024),
    ("poll_interval", 0.5, "0.5", 0.5),
    ("poll_interval", 2, "2", 2.0),
    ("compression", "none", "none", "none"),
    ("compression", "zstd", "zstd", "zstd"),
    ("compress_min_bytes", 0, "0", 0),
    ("compress_min_bytes", 100, "100", 100),
    ("compress_min_bytes", None, "", 512),
    ("zstd_level", -7, "-7", -7),
    ("zstd_level", 22, "22", 22),
    ("zstd_level", None, "", 3),
]


@pytest.mark.parametrize(("option", "value", "text", "expected"), STORE_VALUES)
@pytest.mark.parametrize("scheme", LOCAL)
def test_every_store_option_opens_a_store(
    tmp_path: Path, scheme: str, option: str, value: object, text: str, expected: object
) -> None:
    pytest.importorskip("zstandard")
    extra: dict[str, Any] = {"compression": "zstd"} if option == "zstd_level" else {}
    with _open(_url(scheme, tmp_path), **extra, **{option: value}) as store:
        by_keyword = _settings(store)
        assert by_keyword[option] == expected
    if text:  # the same value in the URL's query gives the same store
        query = "&".join(f"{k}={v}" for k, v in {**extra, option: text}.items())
        with el.open(f"{_url(scheme, tmp_path)}?{query}") as store:
            assert _settings(store) == by_keyword


def test_a_keyword_overrides_the_query(tmp_path: Path) -> None:
    url = f"{_url('sqlite', tmp_path)}?durability=none&busy_timeout=3"
    with el.open(url, durability="batch", busy_timeout=0.5) as store:
        assert store.durability is el.Durability.BATCH
        assert store.backend.busy_timeout == 0.5  # type: ignore[attr-defined]


def test_max_event_bytes_given_as_a_keyword_bounds_payloads() -> None:
    with (
        el.open("memory://", max_event_bytes=100) as store,
        pytest.raises(el.ValidationError, match="limit is 100"),
    ):
        store.append("s", [el.ModelInput.from_text("x" * 200)])


@pytest.mark.parametrize(
    ("options", "search", "busy_timeout"),
    [
        ({}, False, 10.0),
        ({"search": True}, True, 10.0),
        ({"search": "on"}, True, 10.0),
        ({"search": "yes"}, True, 10.0),
        ({"search": False}, False, 10.0),
        ({"search": "off"}, False, 10.0),
        ({"busy_timeout": 0}, False, 0.0),
        ({"busy_timeout": 2.5}, False, 2.5),
        ({"check": "none"}, False, 10.0),
        ({"check": "quick"}, False, 10.0),
    ],
)
def test_every_sqlite_option_opens_a_store(
    tmp_path: Path, options: dict[str, Any], search: bool, busy_timeout: float
) -> None:
    with el.open(_url("sqlite", tmp_path), **options) as store:
        assert store.backend.search_enabled is search  # type: ignore[attr-defined]
        assert store.backend.busy_timeout == busy_timeout  # type: ignore[attr-defined]
        store.append("s", [el.ModelInput.from_text("hello world")])
        if search:
            assert [h.stream for h in store.search("hello")] == ["s"]


def test_every_directory_backend_option_opens_a_store(tmp_path: Path) -> None:
    pytest.importorskip("lmdb")
    with el.open(_url("jsonl", tmp_path) + "j", lock_timeout=0.5) as store:
        assert store.backend.lock_timeout == 0.5  # type: ignore[attr-defined]
    options: dict[str, Any] = {"map_size": 2**21, "max_readers": 16, "lock_timeout": 0}
    with el.open(_url("lmdb", tmp_path) + "l", **options) as store:
        assert store.backend.lock_timeout == 0  # type: ignore[attr-defined]
        assert store.backend.map_size == 2**21  # type: ignore[attr-defined]
        store.append("s", [el.ModelInput.from_text("hi")])


def test_every_postgres_option_opens_a_store(fresh_schema: Any) -> None:
    name = fresh_schema()
    with el.open(
        DATABASE, schema=name, pool_size=2, connect_timeout=5, lock_timeout=1.5, durability="batch"
    ) as store:
        assert f"schema={name}" in store.location
        store.append("s", [el.ModelInput.from_text("hi")])
    assert el.store_exists(url_for(name))


def test_open_async_takes_the_same_options() -> None:
    async def scenario() -> None:
        async with el.open_async("memory://", durability="none", poll_interval=0.5) as store:
            assert store.sync.durability is el.Durability.NONE
            assert store.sync.poll_interval == 0.5

    asyncio.run(scenario())
    with pytest.raises(el.UsageError, match="pol_interval"):
        el.open_async("memory://", pol_interval=1)  # type: ignore[call-arg]
    with pytest.raises(el.UsageError, match="durability must be one of"):
        el.open_async("memory://", durability="sometimes")  # type: ignore[arg-type]


# -- bad values and unknown names: UsageError naming the option, nothing on disk ---------------

SECONDS = "must be a number of seconds"
BAD_STORE_VALUES: list[tuple[dict[str, Any], str]] = [
    ({"durability": "sometimes"}, "durability must be one of fsync, batch, none, got 'sometimes'"),
    ({"durability": "FSYNC"}, "durability must be one of fsync, batch, none, got 'FSYNC'"),
    ({"durability": None}, "durability must be one of fsync, batch, none, got None"),
    ({"max_event_bytes": "10"}, "max_event_bytes must be a positive integer, got '10'"),
    ({"max_event_bytes": 0}, "max_event_bytes must be a positive integer, got 0"),
    ({"max_event_bytes": 1.5}, "max_event_bytes must be a positive integer, got 1.5"),
    ({"poll_interval": "0.1"}, "poll_interval.: must be a positive number of seconds, got '0.1'"),
    ({"poll_interval": 0}, "poll_interval.: must be a positive number of seconds, got 0"),
    ({"poll_interval": True}, "poll_interval.: must be a positive number of seconds, got True"),
    ({"poll_interval": None}, "poll_interval.: must be a positive number of seconds, got None"),
    ({"compression": "gzip"}, "compression must be 'none' or 'zstd', got 'gzip'"),
    ({"compression": None}, "compression must be 'none' or 'zstd', got None"),
    ({"compress_min_bytes": 1.5}, "compress_min_bytes must be an integer, got 1.5"),
    ({"compress_min_bytes": "5"}, "compress_min_bytes must be an integer, got '5'"),
    ({"compress_min_bytes": -1}, "compress_min_bytes must be >= 0, got -1"),
    ({"zstd_level": True}, "zstd_level must be an integer, got True"),
    ({"compression": "zstd", "zstd_level": 99}, "zstd_level must be between -7 and 22, got 99"),
]
BAD_SQLITE_VALUES: list[tuple[dict[str, Any], str]] = [
    ({"search": "maybe"}, "option search must be on or off, got 'maybe'"),
    ({"search": None}, "option search must be on or off, got 'None'"),
    ({"busy_timeout": -1}, r"option busy_timeout must be a number of seconds \(>= 0\), got '-1'"),
    ({"busy_timeout": "soon"}, "option busy_timeout must be a number of seconds"),
    ({"busy_timeout": float("inf")}, "option busy_timeout must be a number of seconds"),
    ({"check": "full"}, "option check must be 'none' or 'quick', got 'full'"),
]


@pytest.mark.parametrize(("options", "match"), BAD_STORE_VALUES)
@pytest.mark.parametrize("scheme", LOCAL)
def test_a_bad_store_option_value_is_refused(
    tmp_path: Path, scheme: str, options: dict[str, Any], match: str
) -> None:
    pytest.importorskip("zstandard")
    with pytest.raises(el.UsageError, match=match):
        _open(_url(scheme, tmp_path), **options)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("options", "match"), BAD_SQLITE_VALUES)
def test_a_bad_sqlite_option_value_is_refused(
    tmp_path: Path, options: dict[str, Any], match: str
) -> None:
    with pytest.raises(el.UsageError, match=match):
        _open(_url("sqlite", tmp_path), **options)
    assert list(tmp_path.iterdir()) == []
    (name,) = options
    with pytest.raises(el.UsageError, match=f"unknown option\\(s\\) for memory://: {name}$"):
        _open("memory://", **options)  # memory:// has no backend options


@pytest.mark.parametrize(
    ("scheme", "options", "match"),
    [
        ("jsonl", {"lock_timeout": -1}, f"option lock_timeout {SECONDS}"),
        ("jsonl", {"lock_timeout": float("nan")}, f"option lock_timeout {SECONDS}"),
        ("lmdb", {"lock_timeout": "soon"}, f"option lock_timeout {SECONDS}"),
        ("lmdb", {"map_size": 0}, "option map_size must be between 1 and"),
        ("lmdb", {"map_size": 1.5}, "option map_size must be an integer, got '1.5'"),
        ("lmdb", {"max_readers": 2**31}, "option max_readers must be between 1 and"),
        ("lmdb", {"max_readers": "many"}, "option max_readers must be an integer, got 'many'"),
    ],
)
def test_a_bad_directory_backend_option_value_is_refused(
    tmp_path: Path, scheme: str, options: dict[str, Any], match: str
) -> None:
    pytest.importorskip("lmdb")
    with pytest.raises(el.UsageError, match=match):
        _open(_url(scheme, tmp_path), **options)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"pool_size": 0}, "option pool_size must be an integer from 1 to 1000, got '0'"),
        ({"pool_size": 1.5}, "option pool_size must be an integer from 1 to 1000, got '1.5'"),
        ({"connect_timeout": -1}, "option connect_timeout must be a number of seconds"),
        ({"lock_timeout": "soon"}, "option lock_timeout must be a number of seconds"),
    ],
)
def test_a_bad_postgres_option_value_is_refused(
    fresh_schema: Any, options: dict[str, Any], match: str
) -> None:
    """Refused before connecting: the schema is never made."""
    name = fresh_schema()
    with pytest.raises(el.UsageError, match=match):
        _open(DATABASE, schema=name, **options)
    assert not el.store_exists(url_for(name))


def test_a_bad_postgres_schema_name_is_refused() -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(el.UsageError, match="option schema must be a lowercase identifier"):
        el.open(DATABASE, schema="Run-42")


@pytest.mark.parametrize(
    ("scheme", "name", "value"),
    [
        ("memory", "durabilty", "batch"),
        ("sqlite", "durabilty", "batch"),
        ("sqlite", "max_event_byte", 10),
        ("sqlite", "map_size", 2**30),  # an lmdb option
        ("sqlite", "lock_timeout", 1),  # not SQLite's (its wait is busy_timeout)
        ("jsonl", "search", True),  # an sqlite option
        ("jsonl", "pool_size", 4),  # a postgresql option
        ("lmdb", "busy_timeout", 1),
        ("lmdb", "schema", "x"),
    ],
)
def test_an_unknown_option_is_refused(
    tmp_path: Path, scheme: str, name: str, value: object
) -> None:
    if scheme == "lmdb":
        pytest.importorskip("lmdb")
    with pytest.raises(el.UsageError, match=f"unknown option\\(s\\) for {scheme}://: {name}\\b"):
        _open(_url(scheme, tmp_path), **{name: value})
    assert list(tmp_path.iterdir()) == []


def test_the_typed_options_are_every_option_open_knows() -> None:
    """Nothing accepted at run time is missing from the types, and nothing typed is refused."""
    pytest.importorskip("psycopg")
    from eventlog.backends import postgres_schema, sqlite
    from eventlog.connect import _STORE_OPTIONS, OpenOptions, StoreOptions

    lmdb_and_jsonl = {"map_size", "max_readers", "lock_timeout"}
    assert set(StoreOptions.__optional_keys__) == set(_STORE_OPTIONS)
    assert set(OpenOptions.__optional_keys__) == (
        set(_STORE_OPTIONS) | sqlite._OPTIONS | postgres_schema.OPTIONS | lmdb_and_jsonl
    )
    assert not OpenOptions.__required_keys__


# -- mypy --strict sees the options -------------------------------------------------------------

SAMPLE = """\
from __future__ import annotations

import eventlog as el
from eventlog.connect import OpenOptions


def correct() -> None:
    with el.open(
        "memory://",
        durability="batch",
        max_event_bytes=1000,
        poll_interval=0.5,
        compression="none",
        compress_min_bytes=None,
        zstd_level=3,
    ) as store:
        assert store.poll_interval == 0.5
    el.open("sqlite:///x.db", durability=el.Durability.NONE, search="on", check="quick")
    el.open("sqlite:///x.db", search=True, busy_timeout=2, max_event_bytes=None)
    el.open("lmdb:///x", map_size=2**30, max_readers=126, lock_timeout=0)
    el.open("jsonl:///x", lock_timeout=0.5, zstd_level=None)
    el.open("postgresql:///db", schema="run42", pool_size=4, connect_timeout=5.0)
    el.open_async("memory://", poll_interval=1, compression="zstd", compress_min_bytes=0)
    options: OpenOptions = {"durability": "none", "max_event_bytes": None}
    el.open("memory://", **options)


def mistakes() -> None:
    el.open("memory://", durabilty="batch")  # expect: call-arg "durabilty"
    el.open("memory://", max_event_bytes="10")  # expect: arg-type "max_event_bytes"
    el.open("memory://", durability="sometimes")  # expect: arg-type "durability"
    el.open("memory://", poll_interval="0.1")  # expect: arg-type "poll_interval"
    el.open("memory://", compression="gzip")  # expect: arg-type "compression"
    el.open("memory://", zstd_level=1.5)  # expect: arg-type "zstd_level"
    el.open("sqlite:///x.db", search="maybe")  # expect: arg-type "search"
    el.open("sqlite:///x.db", check="full")  # expect: arg-type "check"
    el.open("lmdb:///x", map_size="1GB")  # expect: arg-type "map_size"
    el.open_async("memory://", pol_interval=1)  # expect: call-arg "pol_interval"
    bad: OpenOptions = {"zstd_levl": 3}  # expect: typeddict-unknown-key "zstd_levl"
    el.open("memory://", **bad)
"""
EXPECT = re.compile(r'# expect: ([a-z-]+) ("\w+")$')
ERROR = re.compile(r"^sample\.py:(\d+): error: (.*)  \[([a-z-]+)\]$")


def test_mypy_strict_catches_a_mistyped_option_and_a_wrong_value(tmp_path: Path) -> None:
    """One mypy run over a sample: the correct calls pass, each mistake is the error expected."""
    pytest.importorskip("mypy")  # a dev dependency: the suite runs it
    (tmp_path / "sample.py").write_text(SAMPLE)
    expected = {
        n: (m[1], m[2])
        for n, line in enumerate(SAMPLE.splitlines(), 1)
        if (m := EXPECT.search(line))
    }
    assert len(expected) == 11
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
    command += ["--strict", "--cache-dir", str(tmp_path / ".mypy_cache"), "--show-error-codes"]
    command += ["--no-pretty", "--no-color-output", "--hide-error-context", "sample.py"]
    # From tmp_path, with the checkout on MYPYPATH: `eventlog` is this checkout's source.
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    env.pop("MYPY_CACHE_DIR", None)
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr + done.stdout
    errors: dict[int, list[tuple[str, str]]] = {}
    for line in done.stdout.splitlines():
        if m := ERROR.match(line):
            errors.setdefault(int(m[1]), []).append((m[3], m[2]))
    assert set(errors) == set(expected), done.stdout
    for number, (code, name) in expected.items():
        assert [c for c, _ in errors[number]] == [code], done.stdout
        assert name in errors[number][0][1], done.stdout
