"""PostgreSQL store layout: URL parsing, schema creation and open-time checks, error translation.

A store is one PostgreSQL schema (namespace) in a database, `eventlog` unless the URL names
another (`?schema=run42`), so several stores share a database. It is created in one transaction
under an advisory lock, so two processes opening a new store at once end up sharing one and no
one sees half of it. An existing schema is inspected before anything is written: one holding
other tables, or written by a newer eventlog, is refused by name and left as it was.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg.conninfo import make_conninfo

from eventlog.backends.base import Conflict
from eventlog.errors import (
    BackendUnavailableError,
    CorruptionError,
    SchemaVersionError,
    UsageError,
    ValidationError,
)

SCHEMA_VERSION = 1
"""The layout version this eventlog writes and reads (in the `eventlog_schema` table)."""
VERSION_TABLE = "eventlog_schema"
TABLES = ("events", "forks", "blobs", "snapshots", "head", VERSION_TABLE)
"""Every table of a store (a schema holding tables but no `VERSION_TABLE` is not a store)."""
SCHEMA_TABLES = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
"""
"""The tables (and views) of a schema, whatever the role may do with them (unlike
information_schema, which lists only those it has rights on)."""
DEFAULT_SCHEMA = "eventlog"
OPTIONS = {"schema", "pool_size", "connect_timeout", "lock_timeout"}
"""The URL options the backend reads; any other is passed to libpq (sslmode, ...)."""
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

# Names are compared and sorted as code points (as Python does): "C" collation.
_CREATE = """
CREATE TABLE {s}.eventlog_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL
    DEFAULT now());
CREATE TABLE {s}.head (one boolean PRIMARY KEY DEFAULT true CHECK (one),
    position bigint NOT NULL);
INSERT INTO {s}.head (position) VALUES (0);
CREATE TABLE {s}.events (
    position bigint PRIMARY KEY,
    id text COLLATE "C" NOT NULL,
    stream text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    ts bigint NOT NULL,
    type text COLLATE "C" NOT NULL,
    rec bytea NOT NULL,
    CONSTRAINT events_id_unique UNIQUE (id),
    CONSTRAINT events_stream_seq_unique UNIQUE (stream, seq)
);
CREATE TABLE {s}.forks (
    stream text COLLATE "C" CONSTRAINT forks_stream_unique PRIMARY KEY,
    parent text COLLATE "C" NOT NULL,
    at_seq bigint NOT NULL,
    ts bigint NOT NULL
);
CREATE INDEX forks_parent ON {s}.forks (parent, stream);
CREATE TABLE {s}.blobs (key text COLLATE "C" PRIMARY KEY, value bytea NOT NULL);
CREATE TABLE {s}.snapshots (
    stream text COLLATE "C" NOT NULL,
    name text COLLATE "C" NOT NULL,
    version integer NOT NULL,
    seq bigint NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (stream, name, version, seq)
);
"""


class Target:
    """Where a store lives: libpq connection string, schema, and a location safe to print."""

    def __init__(self, conninfo: str, schema: str, location: str) -> None:
        self.conninfo = conninfo
        self.schema = schema
        self.location = location

    @property
    def channel(self) -> str:
        """The LISTEN/NOTIFY channel of the store (an identifier of at most 63 bytes)."""
        digest = hashlib.blake2b(self.schema.encode(), digest_size=8).hexdigest()
        return f"eventlog_{digest}"

    @property
    def quoted(self) -> str:
        """The schema's name as an SQL identifier (it is checked to need no escaping)."""
        return f'"{self.schema}"'


def parse_url(url: str, options: dict[str, str]) -> tuple[Target, dict[str, str]]:
    """The store's target and eventlog's own options from a `postgresql://` URL.

    `options` are the URL's query parameters left once store options are taken; those eventlog
    does not know are libpq's (`sslmode`, `application_name`...), passed on as given.
    """
    parts = urlsplit(url, allow_fragments=False)
    ours = {k: v for k, v in options.items() if k in OPTIONS}
    libpq = {k: v for k, v in options.items() if k not in OPTIONS}
    schema = ours.get("schema", DEFAULT_SCHEMA)
    if not _SCHEMA_NAME.fullmatch(schema) or schema.startswith("pg_"):
        raise UsageError(
            f"option schema must be a lowercase identifier (a-z, 0-9, _; at most 63; not pg_*), "
            f"got {schema!r}"
        )
    scheme = "postgresql"
    try:
        # Not urlunsplit: it drops the "//" of an empty host (a Unix socket given as ?host=).
        conninfo = make_conninfo(f"{scheme}://{parts.netloc}{parts.path}", **libpq)
    except (psycopg.ProgrammingError, ValueError) as exc:
        raise UsageError(f"bad PostgreSQL URL: {exc}") from None
    netloc = parts.netloc
    if "@" in netloc:  # never print a password
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.split(':', 1)[0]}@{host}"
    location = f"{scheme}://{netloc}{parts.path}?schema={schema}"
    return Target(conninfo, schema, location), ours


def connect(target: Target, timeout: float) -> psycopg.Connection[Any]:
    """An autocommit connection to the store's database; BackendUnavailableError if none."""
    try:
        return psycopg.connect(
            target.conninfo, autocommit=True, connect_timeout=max(1, round(timeout))
        )
    except psycopg.ProgrammingError as exc:  # a bad connection string or option
        raise UsageError(f"bad PostgreSQL URL {target.location}: {exc}") from exc
    except psycopg.Error as exc:
        raise BackendUnavailableError(
            f"{target.location}: cannot connect to PostgreSQL: {str(exc).strip()}"
        ) from exc


def open_schema(conn: psycopg.Connection[Any], target: Target) -> None:
    """Create the store's tables if its schema holds none; check them otherwise.

    Raises SchemaVersionError for a schema that holds other tables or a newer layout, and
    CorruptionError for one missing some of eventlog's tables; nothing is changed then.
    """
    q = target.quoted
    with conn.transaction():
        # Serializes creation with other processes opening the same store.
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (target.channel,))
        tables = {row[0] for row in conn.execute(SCHEMA_TABLES, (target.schema,))}
        if not tables:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {q}".encode())
            conn.execute(_CREATE.format(s=q).encode())  # several statements, no parameters
            conn.execute(
                f"INSERT INTO {q}.{VERSION_TABLE} (version) VALUES (%s)".encode(),
                (SCHEMA_VERSION,),
            )
            return
        _check_tables(conn, target, tables)


def _check_tables(conn: psycopg.Connection[Any], target: Target, tables: set[str]) -> None:
    if VERSION_TABLE not in tables:
        shown = ", ".join(sorted(tables)[:5])
        raise SchemaVersionError(
            f"schema {target.schema!r} holds other tables ({shown}), not an eventlog store: "
            "choose another with ?schema=NAME",
            location=target.location,
        )
    row = conn.execute(
        f"SELECT max(version) FROM {target.quoted}.{VERSION_TABLE}".encode()
    ).fetchone()
    version = int(row[0] or 0) if row else 0
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"has layout version {version}, newer than this eventlog's {SCHEMA_VERSION}: "
            "upgrade eventlog to open it",
            location=target.location,
        )
    missing = sorted(set(TABLES) - tables)
    if missing or version < 1:
        raise CorruptionError(
            f"the store's tables are incomplete (missing: {', '.join(missing) or 'its version'})",
            location=target.location,
        )


# -- error translation: the one place PostgreSQL errors become eventlog errors ---------------

Build = Callable[[str, str], BaseException]

ERROR_RULES: tuple[tuple[str, str, Build], ...] = (
    # (SQLSTATE prefix, constraint or message fragment, build(message, location))
    ("23505", "events_stream_seq_unique", lambda m, loc: Conflict("seq", m)),
    ("23505", "events_id_unique", lambda m, loc: Conflict("id", m)),
    ("23505", "forks_stream_unique", lambda m, loc: Conflict("fork", m)),
    ("55P03", "", lambda m, loc: BackendUnavailableError(f"{loc}: locked by another writer: {m}")),
    ("54000", "", lambda m, loc: ValidationError(f"a value is too large to be indexed: {m}")),
    ("22021", "", lambda m, loc: ValidationError(f"cannot be stored in PostgreSQL: {m}")),
    ("", "cannot contain NUL", lambda m, loc: ValidationError(f"cannot be stored: {m}")),
    ("3F000", "", lambda m, loc: CorruptionError(f"the store's schema is gone: {m}", location=loc)),
    (
        "42P01",
        "",
        lambda m, loc: CorruptionError(f"a table of the store is gone: {m}", location=loc),
    ),
    ("53", "", lambda m, loc: BackendUnavailableError(f"{loc}: server out of resources: {m}")),
    ("42501", "", lambda m, loc: BackendUnavailableError(f"{loc}: permission denied: {m}")),
    ("25006", "", lambda m, loc: BackendUnavailableError(f"{loc}: read-only server: {m}")),
)
"""Checked in order; the first match decides. Anything else is BackendUnavailableError."""


def translate_error(exc: BaseException, location: str) -> BaseException:
    """The eventlog error (or backend Conflict) for a psycopg error, naming the store."""
    if not isinstance(exc, psycopg.Error):
        return exc
    state = exc.sqlstate or ""
    diag = getattr(exc, "diag", None)
    constraint = (diag.constraint_name if diag is not None else None) or ""
    message = str(exc).strip()
    for prefix, fragment, build in ERROR_RULES:
        if state.startswith(prefix) and (not fragment or fragment in (constraint or message)):
            error = build(message, location)
            error.__cause__ = exc
            return error
    error = BackendUnavailableError(
        f"{location}: PostgreSQL error {state or type(exc).__name__}: {message}"
    )
    error.__cause__ = exc
    return error
