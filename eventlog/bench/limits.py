"""The limit: raw engines doing the same work on the same events, measured in the same run.

Each function is what a careful user would write by hand, with no eventlog code on the path:

- SQLite: a WAL table ``(position INTEGER PRIMARY KEY, id UNIQUE, stream, seq, data,
  UNIQUE(stream, seq))``, events encoded with one msgspec MessagePack encoder; ``executemany``
  of N rows per transaction (synchronous=NORMAL), or autocommit inserts (synchronous=FULL);
- LMDB: puts of N events per write transaction in an environment opened with ``sync=True``;
- files: one orjson line per event appended to one file, ``fdatasync`` every N events (the JSONL
  backend syncs with ``fdatasync`` too);
- PostgreSQL (when a server answers at ``postgresql://127.0.0.1/test``, or
  ``$EVENTLOG_BENCH_POSTGRES``): a table ``(position BIGSERIAL PRIMARY KEY, id UNIQUE, stream,
  seq, data BYTEA, UNIQUE(stream, seq))``; psycopg ``executemany`` of N rows per transaction, or
  one autocommit INSERT per event, default ``synchronous_commit`` (on); binary-format reads;
- reads: the rows fetched in order and decoded with one typed msgspec decoder;
- ``fsync`` latency of a small append.

Rates are events per second; latencies microseconds. Appends are timed until the connection,
environment or file is closed: SQLite's last connection checkpoints the WAL into the database
file as it closes, and eventlog's figures stop their clock at the same point (its close), so
neither side is credited with work it left for later.
"""

from __future__ import annotations

import os
import sqlite3
import time
import tracemalloc
from binascii import hexlify
from collections.abc import Callable
from hashlib import sha256
from pathlib import Path
from typing import Any

import msgspec
import orjson

from eventlog.backends.jsonl import PLAIN_HEAD
from eventlog.backends.sqlite_checkpoint import WAL_CAP_FRAMES, Checkpointer, commit_pages
from eventlog.bench.common import (
    event_union,
    msgpack_decoder,
    msgpack_encoder,
    optional_module,
    rate,
)
from eventlog.events import UUID_PATTERN, EventData, new_event_id, tag_of

POSTGRES_URL = "postgresql://127.0.0.1/test"
"""The database the PostgreSQL figures use unless ``$EVENTLOG_BENCH_POSTGRES`` names another:
eventlog's stores are schemas of it, raw tables are named ``eventlog_bench_<pid>_...``; all
are dropped after the run."""


def postgres_url() -> str:
    """The benchmark database: ``$EVENTLOG_BENCH_POSTGRES``, else `POSTGRES_URL`."""
    return os.environ.get("EVENTLOG_BENCH_POSTGRES") or POSTGRES_URL


_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    position INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, stream TEXT NOT NULL,
    seq INTEGER NOT NULL, data BLOB NOT NULL, UNIQUE (stream, seq)
)
"""
_INSERT = "INSERT INTO events (id, stream, seq, data) VALUES (?, ?, ?, ?)"


# -- SQLite --------------------------------------------------------------------------------------


def sqlite_table(path: Path, synchronous: str) -> sqlite3.Connection:
    """A connection to the raw WAL table at `synchronous`, created if need be."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute(_SCHEMA)
    return conn


def sqlite_append(
    path: Path,
    data: list[EventData],
    batch: int,
    synchronous: str,
    background_checkpoints: bool = False,
) -> float:
    """Events/s: `batch` rows per transaction (batch 1: autocommit inserts).

    SQLite checkpoints inside the commit that fills the WAL past 1000 pages (its default).
    With `background_checkpoints`, a thread does it instead, as eventlog does for commits that
    do not sync (its `Checkpointer`, paced by the bytes committed, with the writer's WAL
    restarts): the engine's limit with the same checkpoint schedule. Either way the clock stops
    once the connection is closed, after its final checkpoint: the data is in the database file.
    """
    conn = sqlite_table(path, synchronous)
    checkpointer = None
    if background_checkpoints:
        conn.execute(f"PRAGMA wal_autocheckpoint={WAL_CAP_FRAMES}")
        checkpointer = Checkpointer(lambda: sqlite3.connect(path, check_same_thread=False), "")
    encode = msgpack_encoder()
    ids = [new_event_id() for _ in data]
    n = len(data)
    t0 = time.perf_counter()
    if batch == 1:
        for j in range(n):
            conn.execute(_INSERT, (ids[j], "s", j + 1, encode(data[j])))
    else:
        for i in range(0, n, batch):
            rows = [(ids[j], "s", j + 1, encode(data[j])) for j in range(i, min(i + batch, n))]
            if checkpointer is not None and checkpointer.restart_due:
                checkpointer.restart(conn)
            conn.execute("BEGIN")
            conn.executemany(_INSERT, rows)
            conn.execute("COMMIT")
            if checkpointer is not None:
                checkpointer.committed(commit_pages(sum(len(row[3]) for row in rows), 4096))
    if checkpointer is not None:
        checkpointer.close()
    conn.close()
    return n / (time.perf_counter() - t0)


class SQLiteReader:
    """A raw SQLite table holding the events (one stream), for the read limits."""

    def __init__(self, path: Path, data: list[EventData]) -> None:
        self.conn = sqlite_table(path, "OFF")
        encode = msgpack_encoder()
        self.n = len(data)
        self.conn.execute("BEGIN")
        self.conn.executemany(
            _INSERT, [(new_event_id(), "s", i + 1, encode(d)) for i, d in enumerate(data)]
        )
        self.conn.execute("COMMIT")
        self.decode = msgpack_decoder()

    def read(self) -> float:
        """Events/s: SELECT the stream by seq + typed decode."""
        decode = self.decode

        def run() -> None:
            rows = self.conn.execute(
                "SELECT data FROM events WHERE stream = ? ORDER BY seq", ("s",)
            )
            out = [decode(r[0]) for r in rows]
            assert len(out) == self.n

        return rate(self.n, run)

    def read_all(self) -> float:
        """Events/s: SELECT everything by position, in pages of 1000, + typed decode."""
        decode = self.decode

        def run() -> None:
            out: list[Any] = []
            after = 0
            while True:
                rows = self.conn.execute(
                    "SELECT position, data FROM events WHERE position > ? ORDER BY position "
                    "LIMIT 1000",
                    (after,),
                ).fetchall()
                if not rows:
                    break
                out.extend(decode(r[1]) for r in rows)
                after = rows[-1][0]
            assert len(out) == self.n

        return rate(self.n, run)

    def last_n(self, n: int) -> Callable[[], object]:
        """One call: the newest n events of the stream, decoded, oldest first."""
        decode = self.decode
        conn = self.conn

        def run() -> list[Any]:
            rows = conn.execute(
                "SELECT data FROM events WHERE stream = ? ORDER BY seq DESC LIMIT ?", ("s", n)
            ).fetchall()
            return [decode(r[0]) for r in reversed(rows)]

        return run

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


# -- LMDB ----------------------------------------------------------------------------------------


def lmdb_env(path: Path) -> Any:
    """A synced LMDB environment at `path` (None without lmdb)."""
    lmdb = optional_module("lmdb")
    if lmdb is None:
        return None
    path.mkdir(parents=True, exist_ok=True)
    return lmdb.open(str(path), map_size=4 << 30, sync=True, max_dbs=2)


def lmdb_append(path: Path, data: list[EventData], batch: int) -> float | None:
    """Events/s: `batch` puts per synced write transaction (None without lmdb)."""
    env = lmdb_env(path)
    if env is None:
        return None
    encode = msgpack_encoder()
    n = len(data)
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        with env.begin(write=True) as txn:
            for j in range(i, min(i + batch, n)):
                txn.put(b"s\x00" + (j + 1).to_bytes(8, "big"), encode(data[j]))
    env.close()
    return n / (time.perf_counter() - t0)


class LMDBReader:
    """A raw LMDB environment holding the events, for the read limit."""

    def __init__(self, path: Path, data: list[EventData]) -> None:
        self.env = lmdb_env(path)
        self.n = len(data)
        encode = msgpack_encoder()
        if self.env is not None:
            with self.env.begin(write=True) as txn:
                for j, d in enumerate(data):
                    txn.put(b"s\x00" + (j + 1).to_bytes(8, "big"), encode(d))
        self.decode = msgpack_decoder()

    def read(self) -> float | None:
        """Events/s: cursor range scan + typed decode."""
        if self.env is None:
            return None
        decode = self.decode

        def run() -> None:
            with self.env.begin() as txn:
                cur = txn.cursor()
                cur.set_range(b"s\x00")
                out = [decode(v) for v in cur.iternext(keys=False, values=True)]
            assert len(out) == self.n

        return rate(self.n, run)

    def close(self) -> None:
        """Close the environment."""
        if self.env is not None:
            self.env.close()


# -- files ---------------------------------------------------------------------------------------


def json_line(j: int, event_id: str, d: EventData, encode: Callable[[Any], bytes]) -> bytes:
    """The raw JSONL line of event `d`: its seq (j + 1), id and data."""
    return orjson.dumps({"seq": j + 1, "id": event_id, "data": orjson.Fragment(encode(d))}) + b"\n"


def file_append(path: Path, data: list[EventData], batch: int) -> float:
    """Events/s: one orjson line per event, fdatasync every `batch` events."""
    encode = msgspec.json.Encoder().encode
    ids = [new_event_id() for _ in data]
    n = len(data)
    with open(path, "xb") as f:
        fd = f.fileno()
        t0 = time.perf_counter()
        for i in range(0, n, batch):
            f.write(
                b"".join(json_line(j, ids[j], data[j], encode) for j in range(i, min(i + batch, n)))
            )
            f.flush()
            os.fdatasync(fd)
    return n / (time.perf_counter() - t0)


def jsonl_format_floor(path: Path, data: list[EventData], batch: int) -> float:
    """Events/s of the least work eventlog's JSONL format needs, in one plain Python loop.

    Per event: the UUID check, the JSON encode, the SHA-256 chain hash and eventlog's line; per
    `batch` events one `pwritev` and one `fdatasync`. No other validation, records, index, locks
    or returned events: a bound for any CPython implementation of the format, shown beside the
    raw limit (which writes shorter lines and hashes nothing).
    """
    encode, header, sha = msgspec.json.Encoder().encode, msgspec.msgpack.Encoder().encode, sha256
    match = UUID_PATTERN.match
    ids = [new_event_id() for _ in data]
    kinds = [(tag_of(type(d)), type(d).__schema_version__) for d in data]
    types = {tag: orjson.dumps(tag) for tag, _ in kinds}
    n = len(data)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        offset, prev = 0, bytes(32)
        t0 = time.perf_counter()
        for i in range(0, n, batch):
            end, ts = min(i + batch, n), time.time_ns()
            parts: list[bytes] = []
            for j in range(i, end):
                event_id, (tag, version) = ids[j], kinds[j]
                if not match(event_id):
                    raise ValueError(event_id)
                plain = encode(data[j])
                envelope = header(("s", j + 1, event_id, ts, tag, version, None, None, 0))
                prev = sha(prev + envelope + plain).digest()
                start = PLAIN_HEAD % (
                    j + 1,
                    j + 1,
                    event_id.encode(),
                    ts,
                    types[tag],
                    version,
                    end,
                    hexlify(prev),
                )
                parts += (start, plain, b"}\n")
            offset += os.pwritev(fd, parts, offset)
            os.fdatasync(fd)
    finally:
        os.close(fd)
    return n / (time.perf_counter() - t0)


class FileReader:
    """A raw JSON-lines file holding the events, for the read limit."""

    def __init__(self, path: Path, data: list[EventData]) -> None:
        encode = msgspec.json.Encoder().encode
        self.path = path
        self.n = len(data)
        with open(path, "wb") as f:
            f.write(b"".join(json_line(j, new_event_id(), d, encode) for j, d in enumerate(data)))
        line_type: Any = msgspec.defstruct(
            "Line", [("seq", int), ("id", str), ("data", event_union())]
        )
        self.decode = msgspec.json.Decoder(line_type).decode

    def read(self) -> float:
        """Events/s: iterate the lines + typed decode."""
        decode = self.decode

        def run() -> None:
            with open(self.path, "rb") as f:
                out = [decode(line) for line in f]
            assert len(out) == self.n

        return rate(self.n, run)


# -- PostgreSQL ----------------------------------------------------------------------------------


def postgres_available(url: str | None = None) -> bool:
    """Whether psycopg is installed and a server answers at `url`."""
    url = url or postgres_url()
    psycopg = optional_module("psycopg")
    if psycopg is None:
        return False
    try:
        psycopg.connect(url, connect_timeout=2).close()
    except Exception:
        return False
    return True


def postgres_append(data: list[EventData], batch: int, url: str | None = None) -> float | None:
    """Events/s: psycopg executemany of `batch` rows per transaction (None: no server).

    With `batch` 1, one autocommit INSERT per event (one round trip, as a user would write).
    """
    url = url or postgres_url()
    conn = postgres_connect(url)
    if conn is None:
        return None
    table = postgres_table(conn, "append")
    encode = msgpack_encoder()
    ids = [new_event_id() for _ in data]
    n = len(data)
    try:
        sql = f"INSERT INTO {table} (id, stream, seq, data) VALUES (%s, %s, %s, %s)"
        t0 = time.perf_counter()
        if batch == 1:
            execute = conn.execute
            for j in range(n):
                execute(sql, (ids[j], "s", j + 1, encode(data[j])))
        else:
            for i in range(0, n, batch):
                rows = [(ids[j], "s", j + 1, encode(data[j])) for j in range(i, min(i + batch, n))]
                with conn.transaction(), conn.cursor() as cur:
                    cur.executemany(sql, rows)
        return n / (time.perf_counter() - t0)
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.close()


def postgres_connect(url: str) -> Any:
    """An autocommit psycopg connection, or None (no psycopg, or no server)."""
    psycopg = optional_module("psycopg")
    if psycopg is None:
        return None
    try:
        return psycopg.connect(url, connect_timeout=2, autocommit=True)
    except Exception:
        return None


def postgres_table(conn: Any, name: str) -> str:
    """Create the raw events table `eventlog_bench_<pid>_<name>` (dropped first): its name."""
    table = f"eventlog_bench_{os.getpid()}_{name}"
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(
        f"CREATE TABLE {table} (position BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, "
        "stream TEXT NOT NULL, seq BIGINT NOT NULL, data BYTEA NOT NULL, UNIQUE (stream, seq))"
    )
    return table


class PostgresReader:
    """A raw PostgreSQL table holding the events (one stream), for the read limits."""

    def __init__(self, data: list[EventData], url: str | None = None) -> None:
        url = url or postgres_url()
        conn = postgres_connect(url)
        if conn is None:
            raise RuntimeError(f"no PostgreSQL server answers at {url}")
        self.conn = conn
        self.table = postgres_table(conn, "read")
        encode = msgpack_encoder()
        self.n = len(data)
        with conn.transaction(), conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {self.table} (id, stream, seq, data) VALUES (%s, %s, %s, %s)",
                [(new_event_id(), "s", i + 1, encode(d)) for i, d in enumerate(data)],
            )
        conn.execute(f"ANALYZE {self.table}")
        self.decode = msgpack_decoder()

    def read(self) -> float:
        """Events/s: SELECT the stream by seq (binary format) + typed decode."""
        decode, sql = self.decode, f"SELECT data FROM {self.table} WHERE stream = %s ORDER BY seq"

        def run() -> None:
            rows = self.conn.execute(sql, ("s",), binary=True).fetchall()
            out = [decode(r[0]) for r in rows]
            assert len(out) == self.n

        return rate(self.n, run)

    def read_all(self) -> float:
        """Events/s: SELECT everything by position, in pages of 1000, + typed decode."""
        decode = self.decode
        sql = (
            f"SELECT position, data FROM {self.table} WHERE position > %s ORDER BY position "
            "LIMIT 1000"
        )

        def run() -> None:
            out: list[Any] = []
            after = 0
            while True:
                rows = self.conn.execute(sql, (after,), binary=True).fetchall()
                if not rows:
                    break
                out.extend(decode(r[1]) for r in rows)
                after = rows[-1][0]
            assert len(out) == self.n

        return rate(self.n, run)

    def last_n(self, n: int) -> Callable[[], object]:
        """One call: the newest n events of the stream, decoded, oldest first."""
        decode, conn = self.decode, self.conn
        sql = f"SELECT data FROM {self.table} WHERE stream = %s ORDER BY seq DESC LIMIT %s"

        def run() -> list[Any]:
            rows = conn.execute(sql, ("s", n), binary=True).fetchall()
            return [decode(r[0]) for r in reversed(rows)]

        return run

    def close(self) -> None:
        """Drop the table and close the connection."""
        try:
            self.conn.execute(f"DROP TABLE IF EXISTS {self.table}")
        finally:
            self.conn.close()


def postgres_drop_schema(schema: str, url: str | None = None) -> None:
    """Drop a schema an eventlog figure made (a PostgreSQL store is one schema)."""
    url = url or postgres_url()
    psycopg = optional_module("psycopg")
    if psycopg is None:
        return
    with psycopg.connect(url, connect_timeout=2, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def postgres_drop_leftovers(url: str | None = None) -> int:
    """Drop the schemas and tables this process's figures made: how many (0 without a server)."""
    url = url or postgres_url()
    conn = postgres_connect(url)
    if conn is None:
        return 0
    prefix = f"eventlog_bench_{os.getpid()}_"
    pattern = prefix.replace("_", r"\_") + "%"
    try:
        schemas = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (pattern,)
        ).fetchall()
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
            "AND tablename LIKE %s",
            (pattern,),
        ).fetchall()
        for (name,) in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        for (name,) in tables:
            conn.execute(f'DROP TABLE IF EXISTS "{name}"')
        return len(schemas) + len(tables)
    finally:
        conn.close()


# -- decode, fsync, sizes, memory ----------------------------------------------------------------


def msgspec_decode(data: list[EventData]) -> Callable[[], float]:
    """A measurement: events/s decoding the events' MessagePack with one typed decoder."""
    encode = msgpack_encoder()
    blobs = [encode(d) for d in data]
    decode = msgpack_decoder()
    return lambda: rate(len(blobs), lambda: [decode(b) for b in blobs])


def fsync_latency_us(path: Path, calls: int = 200) -> float:
    """Median microseconds of appending 256 bytes to a file and fsync-ing it."""
    times = []
    with open(path, "ab") as f:
        fd = f.fileno()
        for _ in range(calls):
            os.write(fd, b"x" * 256)
            t0 = time.perf_counter()
            os.fsync(fd)
            times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2] * 1e6


def json_bytes_per_event(data: list[EventData]) -> float:
    """Mean bytes of an event's data as compact JSON (the raw size storage is compared with)."""
    encode = msgspec.json.Encoder().encode
    return sum(len(encode(d)) for d in data) / len(data)


def decode_peak_mib(data: list[EventData]) -> float:
    """Peak MiB traced while decoding every event's MessagePack into one list."""
    encode = msgpack_encoder()
    blobs = [encode(d) for d in data]
    decode = msgpack_decoder()
    tracemalloc.start()
    try:
        out = [decode(b) for b in blobs]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del out
    return peak / 2**20
