"""Run the whole suite: every figure with its limit and its peers, in one run, on one workload.

`run(Options(...))` returns a JSON-ready dict (machine, command, sizes, figures, growth series);
`render_table`, `to_markdown` and `plot` present it. `eventlog bench` is the command-line front.
eventlog and its limit are measured alternately, best of `Sizes.rounds`, so a noisy neighbour
hurts both alike; nothing here asserts speed.
"""

from __future__ import annotations

import dataclasses
import functools
import platform
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from rich.table import Table

import eventlog
import eventlog as el
from eventlog.bench import figures as ours
from eventlog.bench import limits as raw
from eventlog.bench import peers, raw_writers
from eventlog.bench.common import (
    LAST_N,
    QUICK,
    THREADS,
    Figure,
    Sizes,
    best_of,
    check_goal,
    check_same_tokens,
    cpu_count,
    per_call_us,
)
from eventlog.bench.workload import conversation_events, without_compactions
from eventlog.events import EventData
from eventlog.projections.providers.render import PROVIDERS, render_json
from eventlog.projections.tokens import get_counter
from eventlog.projections.window import WindowBuilder, context_window

BACKENDS = ("memory", "sqlite", "jsonl", "lmdb", "postgres")
DURABLE = (*ours.FILE_BACKENDS, "postgres")
"""Backends whose appends reach a disk: single durable appends and concurrent writers apply."""
BATCHES = (10, 100, 1000)
PEER_ORDER = ("eventsourcing", "openai-agents", "langgraph", "langchain")

Progress = Callable[[str], None]


@dataclass
class Options:
    """What to run."""

    sizes: Sizes = QUICK
    backends: Sequence[str] = BACKENDS
    peers: bool = True
    """Measure the peers that are installed."""
    postgres: bool = True
    """Measure PostgreSQL (when in `backends` and a server answers at `limits.postgres_url()`)."""
    progress: Progress | None = None
    """Called with one line per figure as it is measured."""
    workdir: Path | None = None
    """Where the scratch stores go: a fresh subdirectory of it per run, kept afterwards (default:
    a temporary directory, removed afterwards)."""
    command: str = ""


@dataclass
class _Run:
    opts: Options
    data: list[EventData]
    tmp: Path
    figures: list[Figure] = field(default_factory=list)
    series: dict[str, Any] = field(default_factory=dict)
    peers: dict[str, str | None] = field(default_factory=dict)
    counter: int = 0
    measured: list[str] = field(default_factory=list)
    """The backends measured so far (asked for, and available here)."""

    @property
    def sizes(self) -> Sizes:
        return self.opts.sizes

    def path(self, name: str) -> Path:
        self.counter += 1
        return self.tmp / f"{self.counter:03d}-{name}"

    def has(self, peer: str) -> bool:
        return self.opts.peers and self.peers.get(peer) is not None

    def add(self, fig: Figure) -> Figure:
        self.figures.append(fig)
        if self.opts.progress is not None:
            self.opts.progress(_progress_line(fig))
        return fig


# -- entry point ---------------------------------------------------------------------------------


def run(opts: Options) -> dict[str, Any]:
    """Measure every figure; the result as a JSON-ready dict."""
    opts = dataclasses.replace(opts, backends=tuple(dict.fromkeys(opts.backends)))
    started = time.time()
    load_before = _load()
    with _workdir(opts.workdir) as tmp:
        size = max(opts.sizes.read_events, opts.sizes.batch_events, 4 * opts.sizes.growth_messages)
        r = _Run(opts, conversation_events(size), tmp)
        r.peers = peers.available() if opts.peers else {}
        _limits_only(r)
        try:
            for backend in opts.backends:
                missing = _unavailable(opts, backend)
                if missing:
                    _say(r, f"skipping {backend}: {missing}")
                    continue
                r.measured.append(backend)
                _appends(r, backend)
                _reads(r, backend)
            _storage(r)
            _memory(r)
            if opts.peers and opts.sizes.growth_messages:
                _growth(r)
            _windows(r)
        finally:
            if "postgres" in r.measured:
                raw.postgres_drop_leftovers()
    return {
        "eventlog_version": eventlog.__version__,
        "command": opts.command,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "elapsed_s": round(time.time() - started, 1),
        "load_before": load_before,
        "load_after": _load(),
        "machine": machine_info(),
        "sizes": asdict(opts.sizes),
        "backends": list(opts.backends),
        "workdir": str(tmp) if opts.workdir is not None else None,
        "peers": r.peers,
        "figures": [f.to_json() for f in r.figures],
        "series": r.series,
    }


class _workdir:
    """The run's scratch directory: a fresh one inside `given`, kept, or a temporary one.

    Fresh every run, so a reused --workdir never has a run append to an earlier run's stores.
    """

    def __init__(self, given: Path | None) -> None:
        self.given = given
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> Path:
        if self.given is not None:
            self.given.mkdir(parents=True, exist_ok=True)
            return Path(tempfile.mkdtemp(prefix="run-", dir=self.given))
        self._tmp = tempfile.TemporaryDirectory(prefix="eventlog-bench-")
        return Path(self._tmp.name)

    def __exit__(self, *exc: object) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()


def _unavailable(opts: Options, backend: str) -> str:
    """Why `backend` cannot be measured here ('' when it can)."""
    if not ours.backend_available(backend):
        return "not available here (its optional dependency is not installed)"
    if backend == "postgres":
        if not opts.postgres:
            return "turned off"
        if not raw.postgres_available():
            return f"no server answers at {raw.postgres_url()} (set EVENTLOG_BENCH_POSTGRES)"
    return ""


def _say(r: _Run, line: str) -> None:
    if r.opts.progress is not None:
        r.opts.progress(line)


# -- limits with no eventlog counterpart ---------------------------------------------------------


def _limits_only(r: _Run) -> None:
    r.add(
        Figure(
            "limit.fsync",
            "limit",
            "fsync of a 256 B append (median)",
            "us",
            False,
            limit=raw.fsync_latency_us(r.path("fsync"), 50 if r.sizes.name == "tiny" else 200),
            limit_label="os.fsync",
        )
    )
    (decode,) = best_of(r.sizes.rounds, raw.msgspec_decode(r.data[: r.sizes.read_events]))
    r.add(
        Figure(
            "limit.decode",
            "limit",
            "msgspec decode of the events (MessagePack)",
            "events/s",
            True,
            limit=decode,
            limit_label="msgspec typed decoder",
        )
    )


_PG_NOTE = (
    "both sides commit with synchronous_commit=on (eventlog's durability=fsync); eventlog also "
    "locks its head row per transaction, which orders positions by commit"
)


# -- appends -------------------------------------------------------------------------------------

_SINGLE_LIMIT = {
    "sqlite": "sqlite3 autocommit, synchronous=FULL",
    "lmdb": "lmdb 1 put/txn, sync",
    "jsonl": "orjson line + fdatasync each",
    "postgres": "psycopg autocommit INSERT",
}
_BATCH_DURABILITY = {
    "memory": "batch",
    "sqlite": "batch",
    "jsonl": "fsync",
    "lmdb": "fsync",
    "postgres": "fsync",
}
"""The level whose syncs match the raw batch limit: SQLite's batch is synchronous=NORMAL (as
the raw WAL table); the JSONL and LMDB limits sync every batch, as their level fsync does."""
_BATCH_LIMIT = {
    "sqlite": "sqlite3 executemany {n}/txn, WAL, NORMAL",
    "lmdb": "lmdb {n} puts/txn, sync",
    "jsonl": "orjson lines + fdatasync every {n}",
    "postgres": "psycopg executemany {n}/txn",
}


def _raw_append(
    backend: str, path: Path, data: list[EventData], batch: int, durable: bool
) -> float:
    if backend == "sqlite":
        return raw.sqlite_append(path, data, batch, "FULL" if durable else "NORMAL")
    if backend == "lmdb":
        return raw.lmdb_append(path, data, batch) or 0.0
    if backend == "postgres":
        return raw.postgres_append(data, batch) or 0.0
    return raw.file_append(path, data, batch)


def _appends(r: _Run, backend: str) -> None:
    single: float | None = None
    if backend in DURABLE:
        single = _single(r, backend)
    for n in BATCHES:
        _batch(r, backend, n)
    if backend == "sqlite":
        _batch_durable_vs_peers(r)
    if single is not None:
        data = r.data[: r.sizes.single_events]
        per = r.sizes.writer_events
        commits: list[tuple[int, int]] = []
        many, one, raw_many = best_of(
            r.sizes.rounds,
            lambda: ours.writers_rate(backend, r.path("w8"), data, THREADS, per, commits),
            lambda: ours.append_rate(backend, r.path("w1"), data[: THREADS * per], 1, "fsync"),
            lambda: _RAW_WRITERS[backend](r.path("raw-w8"), data, THREADS, per) or 0.0,
        )
        r.add(
            Figure(
                f"append.writers{THREADS}.{backend}",
                "append",
                f"{backend}: {THREADS} threads appending 1 event each, fsync",
                "events/s",
                True,
                value=many,
                limit=one,
                limit_label="eventlog, 1 writer, fsync",
                goal=">= 3",
                note="; ".join(
                    n
                    for n in (_per_commit(commits), _raw_writers_note(backend, raw_many, many))
                    if n
                ),
            )
        )


_RAW_WRITERS: dict[str, Callable[[Path, list[EventData], int, int], float | None]] = {
    "sqlite": raw_writers.sqlite_writers,
    "lmdb": raw_writers.lmdb_writers,
    "jsonl": raw_writers.file_writers,
    "postgres": raw_writers.postgres_writers,
}
_RAW_WRITERS_LABEL = {
    "sqlite": "raw sqlite3 with {t} threads sharing multi-row autocommit INSERTs",
    "lmdb": "raw lmdb with {t} threads sharing synced write transactions",
    "jsonl": "raw files, {t} threads each appending and fdatasyncing its own",
    "postgres": "raw psycopg, {t} threads each autocommitting INSERTs on its own connection",
}


def _raw_writers_note(backend: str, raw_many: float, many: float) -> str:
    """The same concurrent load on the raw engine: what group commit can reach on this machine."""
    if not raw_many:
        return ""
    label = _RAW_WRITERS_LABEL[backend].format(t=THREADS)
    return f"{label}: {raw_many:,.0f}/s, eventlog {many / raw_many:.2f}x that"


def _per_commit(commits: list[tuple[int, int]]) -> str:
    """How many appends shared a commit, over the rounds (group commit at work)."""
    total = sum(c for c, _ in commits)
    if not total:
        return ""
    return f"{sum(j for _, j in commits) / total:.1f} appends per commit"


def _single(r: _Run, backend: str) -> float:
    data = r.data[: r.sizes.single_events]
    fns: list[Callable[[], float]] = [
        lambda: ours.append_rate(backend, r.path("s1"), data, 1, "fsync"),
        lambda: _raw_append(backend, r.path("raw-s1"), data, 1, True),
    ]
    names = _add_append_peers(r, fns, data, 1) if backend == "sqlite" else []
    value, limit, *peer_values = best_of(r.sizes.rounds, *fns)
    r.add(
        Figure(
            f"append.single.{backend}",
            "append",
            f"{backend}: append 1 event, fsync",
            "events/s",
            True,
            value=value,
            limit=limit,
            limit_label=_SINGLE_LIMIT[backend],
            goal=">= 0.9" if backend == "sqlite" else "",
            peers=dict(zip(names, peer_values, strict=True)),
            peer_goals={"best": ">= 1.2"} if names else {},
        )
    )
    return value


def _batch(r: _Run, backend: str, n: int) -> None:
    data = r.data[: r.sizes.batch_events]  # the same events for every batch size
    level = _BATCH_DURABILITY.get(backend, "batch")
    fns: list[Callable[[], float]] = [
        lambda: ours.append_rate(backend, r.path(f"b{n}"), data, n, level)
    ]
    if backend == "memory":
        fns.append(lambda: 0.0)
    else:
        fns.append(lambda: _raw_append(backend, r.path(f"raw-b{n}"), data, n, False))
    reference = ""
    if backend == "sqlite" and n == 100:
        fns.append(lambda: raw.sqlite_append(r.path("raw-b100bg"), data, n, "NORMAL", True))
        reference = _BACKGROUND
    elif backend == "jsonl" and n == 100:
        fns.append(lambda: raw.jsonl_format_floor(r.path("floor-b100.jsonl"), data, n))
        reference = _FLOOR
    value, limit, *extra = best_of(r.sizes.rounds, *fns)
    r.add(
        Figure(
            f"append.batch{n}.{backend}",
            "append",
            f"{backend}: append {n}-event batches, durability={level}",
            "events/s",
            True,
            value=value,
            limit=limit or None,
            limit_label=_BATCH_LIMIT.get(backend, "").format(n=n),
            goal=">= 0.8" if n == 100 and backend != "memory" else "",
            note=_notes(
                _UNTIL_CLOSED if backend == "sqlite" else "",
                _PG_NOTE if backend == "postgres" else "",
                _reference_note(value, reference, extra[0] if extra else None),
            ),
        )
    )


def _add_append_peers(
    r: _Run, fns: list[Callable[[], float]], data: list[EventData], batch: int
) -> list[str]:
    """Append the installed SQLite peers' append measurements to `fns`; return their names."""
    names = []
    for name, measure in (
        ("eventsourcing", _eventsourcing_append),
        ("openai-agents", _openai_append),
    ):
        if r.has(name):
            fns.append(functools.partial(measure, r, data, batch))
            names.append(name)
    return names


def _batch_durable_vs_peers(r: _Run) -> None:
    data = r.data[: r.sizes.batch_events]
    fns: list[Callable[[], float]] = [
        lambda: ours.append_rate("sqlite", r.path("b100f"), data, 100, "fsync"),
        lambda: raw.sqlite_append(r.path("raw-b100f"), data, 100, "FULL"),
        lambda: raw.sqlite_append(r.path("raw-b100fbg"), data, 100, "FULL", True),
    ]
    names = _add_append_peers(r, fns, data, 100)
    value, limit, background, *peer_values = best_of(r.sizes.rounds, *fns)
    r.add(
        Figure(
            "append.batch100_fsync.sqlite",
            "append",
            "sqlite: append 100-event batches, fsync",
            "events/s",
            True,
            value=value,
            limit=limit,
            limit_label="sqlite3 executemany 100/txn, WAL, FULL",
            peers=dict(zip(names, peer_values, strict=True)),
            peer_goals={"best": ">= 1.2"} if names else {},
            note=_notes(_UNTIL_CLOSED, _reference_note(value, _BACKGROUND, background)),
        )
    )


_UNTIL_CLOSED = "each side timed until closed (its final WAL checkpoint included)"
"""SQLite leaves data in the WAL until a checkpoint: raw sqlite3 checkpoints inside the commit
that fills 1000 pages, eventlog in a thread and at close. Timing both until closed, when every
page is in the database file, compares the same work whatever the number of events."""
_BACKGROUND = "raw with eventlog's background checkpoints"
"""eventlog leaves the WAL checkpoints of large or unsynced commits to a thread; raw sqlite3 runs
them inside the commit (its default), so the limit alone would flatter eventlog."""
_FLOOR = "the JSONL format's bare minimum in Python"
"""Id check, encode, chain hash, line, one write and sync per batch (`limits.jsonl_format_floor`):
how close any CPython implementation of the format can come to the raw limit."""


def _notes(*notes: str) -> str:
    """The non-empty notes, joined."""
    return "; ".join(n for n in notes if n)


def _reference_note(value: float, label: str, rate: float | None) -> str:
    """A second reference measured beside the limit, and eventlog's ratio to it."""
    if not rate or not label:
        return ""
    return f"{label}: {rate:,.0f}/s, eventlog {value / rate:.2f}x that"


def _eventsourcing_append(r: _Run, data: list[EventData], batch: int) -> float:
    peer = peers.Eventsourcing(r.path("es.db"))
    try:
        return peer.append(data, batch, until_closed=True)
    finally:
        peer.close()


def _openai_append(r: _Run, data: list[EventData], batch: int) -> float:
    peer = peers.OpenAISession(r.path("oai.db"))
    try:
        return peer.append(data, batch, until_closed=True)
    finally:
        peer.close()


# -- reads and replay ----------------------------------------------------------------------------


def _reads(r: _Run, backend: str) -> None:
    data = r.data[: r.sizes.read_events]
    store = ours.Populated(backend, r.path("read"), data)
    limit_read, limit_all, limit_last, close_raw = _raw_readers(r, backend, data)
    try:
        peer_fns, names, closers = _peer_readers(r, data) if backend == "sqlite" else ([], [], [])
        try:
            value, limit, *peer_values = best_of(
                r.sizes.rounds + 1, store.read, limit_read, *peer_fns
            )
        finally:
            for close in closers:
                close()
        r.add(
            Figure(
                f"read.stream.{backend}",
                "read",
                f"{backend}: read a {len(data)}-event stream, decoded",
                "events/s",
                True,
                value=value,
                limit=limit,
                limit_label=_READ_LIMIT[backend],
                goal=">= 0.8",
                peers=dict(zip(names, peer_values, strict=True)),
                peer_goals={"best": ">= 2"} if names else {},
            )
        )
        value, limit = best_of(r.sizes.rounds + 1, store.read_all, limit_all)
        r.add(
            Figure(
                f"read.all.{backend}",
                "read",
                f"{backend}: read the whole store by position",
                "events/s",
                True,
                value=value,
                limit=limit,
                limit_label=_READ_LIMIT[backend],
            )
        )
        _last_n(r, backend, store, limit_last)
        _replay(r, backend, store, limit_read)
    finally:
        store.close()
        close_raw()


_READ_LIMIT = {
    "memory": "msgspec decode of the events",
    "sqlite": "sqlite3 SELECT + msgspec decode",
    "lmdb": "lmdb cursor scan + msgspec decode",
    "jsonl": "file line iteration + msgspec JSON decode",
    "postgres": "psycopg SELECT (binary) + msgspec decode",
}


def _raw_readers(
    r: _Run, backend: str, data: list[EventData]
) -> tuple[
    Callable[[], float], Callable[[], float], Callable[[], object] | None, Callable[[], None]
]:
    """The raw engine's stream read, whole-store read, last-N read, and its close."""
    if backend == "sqlite":
        reader = raw.SQLiteReader(r.path("raw-read.db"), data)
        return reader.read, reader.read_all, reader.last_n(LAST_N), reader.close
    if backend == "lmdb":
        lmdb_reader = raw.LMDBReader(r.path("raw-read"), data)
        read = lambda: lmdb_reader.read() or 0.0  # noqa: E731
        return read, read, None, lmdb_reader.close
    if backend == "jsonl":
        file_reader = raw.FileReader(r.path("raw-read.jsonl"), data)
        return file_reader.read, file_reader.read, None, lambda: None
    if backend == "postgres":
        pg_reader = raw.PostgresReader(data)
        return pg_reader.read, pg_reader.read_all, pg_reader.last_n(LAST_N), pg_reader.close
    decode = raw.msgspec_decode(data)
    return decode, decode, None, lambda: None


def _peer_readers(
    r: _Run, data: list[EventData]
) -> tuple[list[Callable[[], float]], list[str], list[Callable[[], None]]]:
    fns: list[Callable[[], float]] = []
    names: list[str] = []
    closers: list[Callable[[], None]] = []
    n = len(data)
    if r.has("eventsourcing"):
        es = peers.Eventsourcing(r.path("es-read.db"))
        es.append(data, 1000)
        fns.append(lambda: es.read(n))
        names.append("eventsourcing")
        closers.append(es.close)
    if r.has("openai-agents"):
        oai = peers.OpenAISession(r.path("oai-read.db"))
        oai.append(data, 1000)
        fns.append(lambda: oai.read(n))
        names.append("openai-agents")
        closers.append(oai.close)
    return fns, names, closers


def _last_n(
    r: _Run, backend: str, store: ours.Populated, limit_fn: Callable[[], object] | None
) -> None:
    calls = r.sizes.last_n_calls
    value = min(per_call_us(calls, store.last_n(LAST_N)) for _ in range(r.sizes.rounds))
    limit = (
        min(per_call_us(calls, limit_fn) for _ in range(r.sizes.rounds))
        if limit_fn is not None
        else None
    )
    found: dict[str, float] = {}
    note = ""
    if backend == "sqlite" and r.has("openai-agents"):
        data = r.data[: r.sizes.read_events]
        items = peers.items_in(data[-LAST_N:])  # the session stores items, not events
        oai = peers.OpenAISession(r.path("oai-last.db"))
        try:
            oai.append(data, 1000)
            found["openai-agents"] = oai.last_n_us(items, max(10, calls // 10))
        finally:
            oai.close()
        note = f"openai-agents: get_items(limit={items}), the items of the last {LAST_N} events"
    r.add(
        Figure(
            f"read.last{LAST_N}.{backend}",
            "read",
            f"{backend}: last {LAST_N} events of the stream",
            "us",
            False,
            value=value,
            limit=limit,
            limit_label=_LAST_N_LIMIT.get(backend, "") if limit is not None else "",
            peers=found,
            note=note,
        )
    )


_LAST_N_LIMIT = {
    "sqlite": "sqlite3 SELECT DESC LIMIT + decode",
    "postgres": "psycopg SELECT DESC LIMIT + decode",
}


def _replay(r: _Run, backend: str, store: ours.Populated, limit_read: Callable[[], float]) -> None:
    measure = store.replay()
    value, limit = best_of(r.sizes.rounds, measure, limit_read)
    r.add(
        Figure(
            f"replay.state.{backend}",
            "replay",
            f"{backend}: replay into ConversationState",
            "events/s",
            True,
            value=value,
            limit=limit,
            limit_label=_READ_LIMIT[backend],
        )
    )


# -- storage and memory --------------------------------------------------------------------------


def _storage(r: _Run) -> None:
    data = r.data[: r.sizes.batch_events]
    json_size = raw.json_bytes_per_event(data)
    for backend in r.measured:
        if backend not in ours.FILE_BACKENDS:
            continue
        for mode in ("none", "zstd", "zstd+dict"):
            value = ours.storage_per_event(backend, r.path(f"size-{mode}"), data, mode)
            r.add(
                Figure(
                    f"storage.{mode.replace('+', '_')}.{backend}",
                    "storage",
                    f"{backend}: bytes on disk per event, compression {mode}",
                    "B/event",
                    False,
                    value=value,
                    limit=json_size,
                    limit_label="the event as compact JSON",
                    goal="<= 0.6" if mode == "zstd+dict" else "",
                    note="" if value is not None else "zstandard is not installed",
                )
            )


def _memory(r: _Run) -> None:
    # A file backend decodes every event it returns (memory hands back its own objects).
    order = [b for b in r.measured if b != "memory"] + ["memory"]
    backend = next((b for b in order if b in r.measured), None)
    if backend is None:
        return
    data = r.data[: r.sizes.read_events]
    store = ours.Populated(backend, r.path("mem"), data)
    try:
        limit = raw.decode_peak_mib(data)
        r.add(
            Figure(
                f"memory.read.{backend}",
                "memory",
                f"{backend}: peak memory reading {len(data)} events into a list",
                "MiB",
                False,
                value=store.read_peak_mib(),
                limit=limit,
                limit_label="msgspec decode into a list",
            )
        )
        r.add(
            Figure(
                f"memory.replay.{backend}",
                "memory",
                f"{backend}: peak memory replaying {len(data)} events into state",
                "MiB",
                False,
                value=store.replay_peak_mib(),
                limit=limit,
                limit_label="msgspec decode into a list",
            )
        )
    finally:
        store.close()


# -- growth against LangGraph and the OpenAI session ---------------------------------------------


def _growth(r: _Run) -> None:
    turns = peers.conversation_turns(r.data)
    points = [p for p in r.sizes.growth_points if p <= r.sizes.growth_messages]
    _say(r, f"growth: appending a conversation turn by turn up to {points[-1]} messages ...")
    mine, my_load = ours.turn_growth(r.path("growth"), turns, points, peers.messages_in)
    series: dict[str, Any] = {"eventlog": mine}
    loads: dict[str, float] = {}
    if r.has("langgraph"):
        _say(r, "growth: LangGraph SqliteSaver (stores the whole message list per step) ...")
        series["langgraph"], lg_load = peers.langgraph_growth(r.path("lg.db"), turns, points)
        if lg_load is not None:
            loads["langgraph"] = lg_load
    if r.has("openai-agents"):
        oai = peers.OpenAISession(r.path("oai-growth.db"))
        try:
            series["openai-agents"] = oai.growth(turns, points)
        finally:
            oai.close()
    r.series["growth"] = series
    if not mine:
        return
    last = mine[-1]
    n = int(last["messages"])

    def at_end(key: str) -> dict[str, float]:
        return {p: s[-1][key] for p, s in series.items() if p != "eventlog" and s}

    r.add(
        Figure(
            "peers.size_at_end",
            "peers",
            f"sqlite: store size at {n} messages (database pages)",
            "MB",
            False,
            value=last["bytes"] / 1e6,
            peers={p: v / 1e6 for p, v in at_end("bytes").items()},
            peer_goals=_size_goals(series, n),
            note=_size_note(series, n),
        )
    )
    r.add(
        Figure(
            "peers.turn_at_end",
            "peers",
            f"sqlite: record one turn at {n} messages (fsync)",
            "ms",
            False,
            value=last["turn_ms"],
            peers=at_end("turn_ms"),
        )
    )
    r.add(
        Figure(
            "peers.load_at_end",
            "peers",
            f"sqlite: load the conversation at {n} messages",
            "ms",
            False,
            value=my_load,
            peers=loads,
        )
    )


SIZE_GOAL = "<= 0.01"
"""eventlog's store at most a hundredth of LangGraph's checkpoint database..."""
SIZE_GOAL_MESSAGES = 2_000
"""...at this history length (the goal's; its ratio grows with the history)."""
_SIZE_METHOD = "page_count x page_size of each SQLite file: its size once the WAL is checkpointed"


def _size_goals(series: dict[str, Any], n: int) -> dict[str, str]:
    """The LangGraph size goal, checked only at the history length it is set for."""
    return {"langgraph": SIZE_GOAL} if "langgraph" in series and n >= SIZE_GOAL_MESSAGES else {}


def _size_note(series: dict[str, Any], n: int) -> str:
    """How sizes are measured, and why the LangGraph goal is not checked on a shorter history."""
    if "langgraph" in series and n < SIZE_GOAL_MESSAGES:
        return (
            f"{_SIZE_METHOD}; goal x langgraph {SIZE_GOAL} is set for {SIZE_GOAL_MESSAGES:,} "
            f"messages, not checked at {n}"
        )
    return _SIZE_METHOD


# -- windows and rendering ---------------------------------------------------------------------


def _windows(r: _Run) -> None:
    _window_new_turn(r)
    # Without compactions: trim_messages keeps the newest messages of the whole list, as
    # drop_oldest does only when no compaction stands in for older events.
    data = without_compactions(r.data[: r.sizes.read_events])

    def full() -> object:
        return context_window(data, budget=WINDOW_BUDGET, strategy="drop_oldest")

    ms = min(per_call_us(1, full) for _ in range(r.sizes.rounds))
    found: dict[str, float] = {}
    note = ""
    if r.has("langchain") and r.sizes.name != "tiny":
        counter = get_counter("estimate")
        trimmed = peers.trim_messages_timed(data, counter.count_text, WINDOW_BUDGET)
        if trimmed is not None:
            found["langchain"], theirs = trimmed
            tokens = window_tokens(data)
            check_same_tokens(tokens, theirs, "full window vs trim_messages")
            ours_ms = ms / 1e3
            ok = check_goal(ours_ms / found["langchain"], FULL_WINDOW_GOAL)
            note = (
                f"{found['langchain'] / ours_ms:.1f}x faster than trim_messages, goal 10x "
                f"{'met' if ok else 'MISSED'}; windows of {tokens:,} and {theirs:,} tokens"
            )
    r.add(
        Figure(
            "window.full_vs_trim",
            "window",
            f"full window from scratch ({WINDOW_BUDGET // 1000}k tokens, drop_oldest) over "
            f"{len(data)} events without compactions, estimate",
            "ms",
            False,
            value=ms / 1e3,
            peers=found,
            peer_goals={"langchain": FULL_WINDOW_GOAL},
            note=note,
        )
    )
    _render(r)


def window_tokens(data: Sequence[EventData]) -> int:
    """Tokens in the full drop_oldest window of `data` (what trim_messages' is checked against)."""
    report = context_window(data, budget=WINDOW_BUDGET, strategy="drop_oldest").report
    return report.tokens if report is not None else 0


WINDOW_BUDGET = 100_000
FULL_WINDOW_GOAL = "<= 0.1"
"""A full window from scratch takes at most a tenth of trim_messages' time (>= 10x faster)."""
NEW_TURN = 50
"""New inputs timed per history length (each one grows the history by one event)."""
NEW_TURN_GOAL_MS = {100_000: "<= 1"}
"""Goals on the new-input window's milliseconds, by history length (besides <= 2x the first)."""


def _window_new_turn(r: _Run) -> None:
    """Incremental window for a new input on 1k / 10k (/ 100k in full runs) event histories."""
    lengths = {"tiny": (200, 1_000), "quick": (1_000, 10_000)}.get(
        r.sizes.name, (1_000, 10_000, 100_000)
    )
    new_input = el.ModelInput.from_text("Now run the tests again and tell me what still fails.")
    base: float | None = None
    for n in lengths:
        builder = WindowBuilder(budget=WINDOW_BUDGET, entries="window")
        builder.extend(conversation_events(n))
        builder.window()

        def one(b: WindowBuilder = builder) -> object:
            b.feed(new_input)
            return b.window()

        ms = min(per_call_us(NEW_TURN, one) for _ in range(r.sizes.rounds)) / 1e3
        base = ms if base is None else base
        r.add(
            Figure(
                f"window.new_turn.{n}",
                "window",
                f"window for a new input on a {n}-event history (incremental)",
                "ms",
                False,
                value=ms,
                limit=base,
                limit_label=f"the same on {lengths[0]} events",
                goal="<= 2" if n != lengths[0] else "",
                value_goal=NEW_TURN_GOAL_MS.get(n, ""),
            )
        )


def _render(r: _Run) -> None:
    window, encode = ours.tail_window(r.data[: r.sizes.read_events], RENDER_EVENTS)
    calls = max(3, r.sizes.last_n_calls // 20)
    limit = min(per_call_us(calls, encode) for _ in range(r.sizes.rounds)) / 1e3
    for provider in PROVIDERS:

        def one(p: str = provider) -> object:
            return render_json(window, p, model="bench-model", max_tokens=1024)

        value = min(per_call_us(calls, one) for _ in range(r.sizes.rounds)) / 1e3
        r.add(
            Figure(
                f"render.{provider}",
                "render",
                f"render a {len(window.items)}-item window to {provider} JSON",
                "ms",
                False,
                value=value,
                limit=limit,
                limit_label="msgspec JSON encode of the window",
            )
        )


RENDER_EVENTS = 200
"""Events in the window the renderers are timed on (about a 100k-token window here)."""


# -- machine -------------------------------------------------------------------------------------


def _load() -> list[float]:
    try:
        import os

        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        return []


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:  # pragma: no cover
        pass
    return None


def machine_info() -> dict[str, Any]:
    """CPU count, memory, Python, SQLite and library versions."""
    libs = (
        "msgspec",
        "orjson",
        "lmdb",
        "zstandard",
        "psycopg",
        "eventsourcing",
        "openai-agents",
        "langgraph",
        "langgraph-checkpoint-sqlite",
        "langchain-core",
        "matplotlib",
    )
    return {
        "cpus": cpu_count(),
        "memory_gib": _memory_gib(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "libraries": {lib: _version(lib) for lib in libs},
    }


# -- presentation --------------------------------------------------------------------------------


def fmt(value: float | None, unit: str) -> str:
    """A value with its unit, compactly."""
    if value is None:
        return "-"
    if unit == "events/s":
        if value >= 1e6:
            return f"{value / 1e6:.2f}M/s"
        if value >= 1e3:
            return f"{value / 1e3:.1f}k/s"
        return f"{value:.0f}/s"
    if unit in ("us", "ms"):
        return f"{value:,.1f} {unit}" if value < 100 else f"{value:,.0f} {unit}"
    if unit == "B/event":
        return f"{value:,.0f} B"
    return f"{value:,.1f} {unit}"


def _fmt_ratio(ratio: float | None) -> str:
    if ratio is None:
        return "-"
    return f"{ratio:.3f}" if ratio < 0.1 else f"{ratio:.2f}"


def _peer_columns(result: dict[str, Any]) -> list[str]:
    present = {p for f in result["figures"] for p in f["peers"]}
    return [p for p in PEER_ORDER if p in present]


def _goal_text(fig: dict[str, Any]) -> str:
    parts = [("ok " if g["met"] else "MISSED ") + g["goal"] for g in fig["goals"]]
    if fig["note"]:
        parts.append(fig["note"])
    return "; ".join(parts)


def rows(result: dict[str, Any]) -> Iterator[list[str]]:
    """The table's rows as text: figure, eventlog, limit, x limit, (peer, x peer)..., goals."""
    columns = _peer_columns(result)
    for f in result["figures"]:
        limit = fmt(f["limit"], f["unit"])
        if f["limit_label"] and f["limit"] is not None:
            limit += f" ({f['limit_label']})"
        row = [f["label"], fmt(f["value"], f["unit"]), limit, _fmt_ratio(f["ratio"])]
        for p in columns:
            row += [fmt(f["peers"].get(p), f["unit"]), _fmt_ratio(f["peer_ratios"].get(p))]
        row.append(_goal_text(f))
        yield row


def headers(result: dict[str, Any]) -> list[str]:
    """The table's column headers."""
    out = ["figure", "eventlog", "limit", "x limit"]
    for p in _peer_columns(result):
        out += [p, f"x {p}"]
    return out + ["goals"]


def render_table(result: dict[str, Any]) -> Table:
    """One rich table of every figure."""
    machine = result["machine"]
    table = Table(
        title=(
            f"eventlog bench ({result['sizes']['name']}): {machine['cpus']} CPUs, "
            f"Python {machine['python']}, SQLite {machine['sqlite']}, "
            f"load {result['load_before']} -> {result['load_after']}"
        ),
        show_lines=False,
    )
    for i, h in enumerate(headers(result)):
        table.add_column(h, justify="left" if i in (0, 2) else "right", overflow="fold")
    for row in rows(result):
        table.add_row(*row)
    return table


def to_markdown(result: dict[str, Any]) -> str:
    """The table as GitHub Markdown."""
    head = headers(result)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows(result):
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in row) + " |")
    return "\n".join(lines) + "\n"


def _progress_line(fig: Figure) -> str:
    text = f"{fig.label}: {fmt(fig.value, fig.unit)}"
    if fig.limit is not None:
        text += f"  limit {fmt(fig.limit, fig.unit)}"
    if fig.ratio is not None:
        text += f"  x{fig.ratio:.2f}"
    for p in fig.peers:
        text += f"  {p} {fmt(fig.peers[p], fig.unit)}"
    if fig.note:
        text += f"  ({fig.note})"
    return text
