"""The PostgreSQL server the tests use, and fresh stores (schemas) on it.

`EVENTLOG_TEST_POSTGRES` names the database (default ``postgresql://127.0.0.1/test``). Where no
server answers, the PostgreSQL tests are skipped with the reason, unless
`EVENTLOG_REQUIRE_POSTGRES=1` (set by `.ci/run`, which starts the server): then they fail.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from typing import Any

import pytest

DATABASE = os.environ.get("EVENTLOG_TEST_POSTGRES", "postgresql://127.0.0.1/test")
REQUIRED = os.environ.get("EVENTLOG_REQUIRE_POSTGRES") == "1"


@functools.cache
def unavailable() -> str | None:
    """Why the tests cannot use the server (None: they can)."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'agent-eventlog[postgres]')"
    try:
        psycopg.connect(DATABASE, connect_timeout=3).close()
    except psycopg.Error as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"no PostgreSQL server answers at {DATABASE} ({first_line})"
    return None


def require_server(*, module: bool = False) -> None:
    """Skip the calling test (or, with `module`, the importing test module) when the server is
    unavailable; fail instead when it is required."""
    reason = unavailable()
    if reason is None:
        return
    if REQUIRED:
        pytest.fail(f"EVENTLOG_REQUIRE_POSTGRES=1 but {reason}", pytrace=False)
    pytest.skip(
        f"PostgreSQL tests skipped: {reason}; set EVENTLOG_TEST_POSTGRES to a database",
        allow_module_level=module,
    )


def connect() -> Any:
    """A raw autocommit psycopg connection to the test database."""
    import psycopg

    return psycopg.connect(DATABASE, autocommit=True)


def url_for(schema: str, **options: str) -> str:
    """The store URL of `schema` in the test database, with options."""
    query = "&".join(f"{k}={v}" for k, v in {"schema": schema, **options}.items())
    return f"{DATABASE}{'&' if '?' in DATABASE else '?'}{query}"


def drop_schemas(names: list[str]) -> None:
    """Drop the test schemas (whatever their state)."""
    if not names or unavailable():
        return
    with closing(connect()) as conn:
        conn.execute("SET lock_timeout = '10s'")
        for name in names:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def fresh_schema() -> Iterator[Callable[[], str]]:
    """A function giving a new, unused schema name on each call; all are dropped afterwards."""
    require_server()
    made: list[str] = []

    def new() -> str:
        name = f"t_{os.getpid()}_{uuid.uuid4().hex[:12]}"
        made.append(name)
        return name

    yield new
    drop_schemas(made)
