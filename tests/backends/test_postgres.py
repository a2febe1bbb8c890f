"""The conformance suite, crash harness and PostgreSQL-specific behaviour on a real server."""

from __future__ import annotations

import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import msgspec
import pytest

import eventlog as el
from eventlog.backends.base import Conflict
from eventlog.backends.envelope import pack_record, unpack_record
from eventlog.errors import BackendUnavailableError, CorruptionError, SchemaVersionError
from eventlog.projections import ConversationProjection, Runner
from tests.contract import (
    DurableContract,
    FreshURL,
    concurrent_single_appends,
    text_events,
    texts_of,
    wait_for,
)
from tests.postgres import connect, fresh_schema, require_server, url_for

__all__ = ["fresh_schema"]  # the fixture, used by name
require_server(module=True)  # one skip for the module, with the reason, where no server answers

Schemas = Callable[[], str]


def raw_tamper(store: el.Store, stream: str, seq: int) -> None:
    """Flip the stored payload of one event with a separate raw psycopg connection: a letter
    of a plain payload, the middle byte of a compressed one."""
    from eventlog.backends.postgres import PostgresBackend

    backend = store.backend
    assert isinstance(backend, PostgresBackend)
    table = f'"{backend.target.schema}".events'
    with closing(connect()) as conn:
        position, packed = conn.execute(
            f"SELECT position, rec FROM {table} WHERE stream = %s AND seq = %s", (stream, seq)
        ).fetchone()
        rec = unpack_record(position, stream, packed)
        if rec.codec:
            data = bytearray(rec.data)
            data[len(data) // 2] ^= 0x5A
        else:
            data = bytearray(rec.data.replace(b"m", b"M", 1))
        assert data != rec.data
        conn.execute(
            f"UPDATE {table} SET rec = %s WHERE position = %s",
            (pack_record(msgspec.structs.replace(rec, data=bytes(data))), position),
        )


class TestPostgres(DurableContract):
    @pytest.fixture
    def fresh_url(self, fresh_schema: Schemas) -> FreshURL:
        return lambda: url_for(fresh_schema())

    def tamper(self, store: el.Store, stream: str, seq: int) -> None:
        raw_tamper(store, stream, seq)


class TestPostgresCompressed(TestPostgres):
    """The suite again with every payload compressed with zstd (codec 1 records only)."""

    @pytest.fixture
    def fresh_url(self, fresh_schema: Schemas) -> FreshURL:
        return lambda: url_for(fresh_schema(), compression="zstd", compress_min_bytes="0")

    def test_payloads_are_stored_compressed(self, store: el.Store) -> None:
        store.append("s", text_events(2))
        assert [r.codec for r in store.backend.read("s", 1, None)] == [1, 1]


class TestPostgresEncrypted(TestPostgres):
    """The suite again with a key directory: every payload and meta sealed (codec 16)."""

    test_crash_harness = None  # run with encryption on SQLite: keys are made the same way

    @pytest.fixture
    def fresh_url(self, fresh_schema: Schemas, tmp_path: Path) -> FreshURL:
        pytest.importorskip("cryptography")
        return lambda: url_for(fresh_schema(), keys=str(tmp_path / "keys"))

    def test_payloads_and_meta_are_stored_sealed(self, store: el.Store) -> None:
        store.append("s", [el.Event(data=el.Checkpoint(label="c"), meta={"who": "me"})])
        (rec,) = store.backend.read("s", 1, None)
        assert rec.codec == 16 and b"who" not in rec.meta
        assert next(iter(store.read("s"))).meta == {"who": "me"}


# -- several processes, crashes ------------------------------------------------------------------


@pytest.mark.slow
def test_multiprocess_writers_and_reader(fresh_schema: Schemas) -> None:
    from tests.multiprocess import check_multiprocess

    counts = check_multiprocess(url_for(fresh_schema()), writers=4, rounds=40)
    assert counts["events"] == 320


def test_group_commit_shares_transactions(fresh_schema: Schemas) -> None:
    """Durable appends from 8 threads share commits, and each is stored once."""
    with el.open(url_for(fresh_schema()), durability="fsync") as store:
        concurrent_single_appends(store, threads=8, per=25)
        stats = store.backend.stats()  # type: ignore[attr-defined]
        assert stats["jobs"] == 200
        assert stats["commits"] < 200
        assert sum(info.last_seq for info in store.streams()) == 200
        assert store.verify().ok


def in_one_group(store: el.Store, *writes: Callable[[], object]) -> list[object]:
    """Run `writes` in threads so that they share one group transaction; their outcomes.

    Another session holds the head row, so a first append leads a group alone and waits; the
    writes queue meanwhile, and the next leader takes them all at once.
    """
    backend = store.backend
    schema = backend.target.schema  # type: ignore[attr-defined]
    queue = backend._queue  # type: ignore[attr-defined]
    outcomes: list[object] = [None] * len(writes)

    def run(i: int, write: Callable[[], object]) -> None:
        try:
            outcomes[i] = write()
        except Exception as exc:
            outcomes[i] = exc

    with closing(connect()) as other:
        other.execute("BEGIN")
        other.execute(f'SELECT position FROM "{schema}".head FOR UPDATE')
        leader = threading.Thread(target=lambda: store.append("first", text_events(1)))
        leader.start()
        assert wait_for(lambda: queue._leading and not queue._queue)
        threads = [threading.Thread(target=run, args=(i, w)) for i, w in enumerate(writes)]
        for t in threads:
            t.start()
        assert wait_for(lambda: len(queue._queue) == len(writes))
        other.execute("COMMIT")
        for t in [leader, *threads]:
            t.join(30)
    return outcomes


def test_a_failing_write_in_a_group_fails_alone(fresh_schema: Schemas) -> None:
    """Writes sharing a transaction: a taken id, or a snapshot name PostgreSQL cannot store,
    fails that write only; the others commit, positions stay gapless."""
    with el.open(url_for(fresh_schema())) as store:
        store.append("a", text_events(1))
        store.append("a20", text_events(20))
        backend = store.backend
        taken = [msgspec.structs.replace(backend.read("a", 1, 1)[0], stream="b", seq=1)]
        taken20 = [msgspec.structs.replace(r, stream="c") for r in backend.read("a20", 1, None)]
        for writes, bad in [
            (  # a taken id: a Conflict
                [
                    lambda: store.append("ok0", text_events(1)),
                    lambda: backend.append(taken, el.Durability.FSYNC),
                    lambda: store.append("ok1", text_events(1)),
                ],
                Conflict,
            ),
            (  # a NUL in a snapshot's name: refused by PostgreSQL, not by eventlog
                [
                    lambda: store.append("ok2", text_events(1)),
                    lambda: backend.save_snapshot("a", "bad\x00name", 1, 1, b"x"),
                    lambda: store.append("ok3", text_events(1)),
                ],
                el.ValidationError,
            ),
            (  # 20 events each: the group's rows go in one COPY, which the taken ids fail
                [
                    lambda: store.append("ok4", text_events(20)),
                    lambda: backend.append(taken20, el.Durability.FSYNC),
                    lambda: store.append("ok5", text_events(20)),
                ],
                Conflict,
            ),
        ]:
            commits = backend.stats()["commits"]  # type: ignore[attr-defined]
            outcomes = in_one_group(store, *writes)
            assert backend.stats()["commits"] == commits + 2  # type: ignore[attr-defined]
            assert isinstance(outcomes[1], bad), outcomes
            assert not any(isinstance(o, BaseException) for o in (outcomes[0], outcomes[2]))
        assert all(store.exists(f"ok{i}") for i in range(6))
        assert not store.exists("b") and not store.exists("c")
        assert [store.stream_info(f"ok{i}").last_seq for i in (4, 5)] == [20, 20]
        assert store.head_position() == 68  # 1 + 20, then 3 groups of 3, 3 and 41 events
        assert store.verify().ok


def test_close_while_appending_raises_nothing_and_leaks_nothing(fresh_schema: Schemas) -> None:
    """Closing a store that other threads append to: close returns, the appends that did not
    commit raise StoreClosedError, and no connection is left on the server."""
    schema = fresh_schema()
    before = _connections()
    errors: list[BaseException] = []
    for _ in range(5):
        store = el.open(url_for(schema), durability="none")
        stop = threading.Event()

        def append(t: int, s: el.Store = store, halt: threading.Event = stop) -> None:
            while not halt.is_set():
                try:
                    s.append(f"t{t}", text_events(1))
                except el.StoreClosedError:
                    return
                except BaseException as exc:
                    errors.append(exc)
                    return

        threads = [threading.Thread(target=append, args=(t,)) for t in range(16)]
        for t in threads:
            t.start()
        time.sleep(0.2)
        store.close()
        stop.set()
        for t in threads:
            t.join(30)
    assert errors == []
    assert wait_for(lambda: _connections() == before)


def _connections() -> int:
    """Client connections to the test database, besides the one asking."""
    with closing(connect()) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend' "
            "AND query NOT LIKE '%%pg_stat_activity%%'"
        ).fetchone()
    return int(row[0])


def test_listen_notify_wakes_a_subscriber_before_its_poll_interval(
    fresh_schema: Schemas, tmp_path: Path
) -> None:
    """Another process's commit ends `poll` at once, though the poll interval is 60 s."""
    url = url_for(fresh_schema())
    with el.open(url, poll_interval=60) as reader:
        reader.append("s", text_events(1))
        sub = reader.subscribe(after=reader.head_position())
        script = (
            "import sys, time, eventlog as el\n"
            "time.sleep(1.0)\n"
            "with el.open(sys.argv[1]) as s: s.append('s', [el.ModelInput.from_text('late')])\n"
        )
        proc = subprocess.Popen([sys.executable, "-c", script, url], cwd=Path.cwd())
        try:
            started = time.monotonic()
            got = sub.poll(timeout=30)
            waited = time.monotonic() - started
        finally:
            proc.wait(30)
        assert texts_of(got) == ["late"]
        assert waited < 20  # woken by NOTIFY; polling would have waited 30 s


def test_a_fork_from_another_process_wakes_a_follower_waiting_for_the_stream(
    fresh_schema: Schemas,
) -> None:
    """A fork commits no event; its NOTIFY still ends the wait, though the interval is 60 s."""
    url = url_for(fresh_schema())
    with el.open(url, poll_interval=60) as store:
        store.append("p", text_events(3))
        runner = Runner(store, ConversationProjection(), snapshot_every=None)
        with runner.follow("f") as follower:
            script = (
                "import sys, time, eventlog as el\n"
                "time.sleep(1.0)\n"
                "with el.open(sys.argv[1]) as s: s.fork('p', 'f', at_seq=2)\n"
            )
            proc = subprocess.Popen([sys.executable, "-c", script, url], cwd=Path.cwd())
            try:
                started = time.monotonic()
                state = follower.poll(timeout=30)
                waited = time.monotonic() - started
            finally:
                proc.wait(30)
            assert proc.returncode == 0
            assert state.seq == 2 and state == runner.state("p", 2)
            assert waited < 20  # woken by NOTIFY; polling would have waited 30 s


def test_a_writer_connection_ended_while_idle_is_replaced(fresh_schema: Schemas) -> None:
    """The server ends the idle writer's connection: the next append finds out before sending
    anything, connects again and is stored; positions stay gapless."""
    with el.open(url_for(fresh_schema())) as store:
        store.append("s", text_events(1))
        backend = store.backend
        pid = backend._writer.info.backend_pid  # type: ignore[attr-defined]
        with closing(connect()) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        assert wait_for(lambda: not _alive(pid))
        stored = store.append("s", text_events(2, "kept"), expected_seq=1)
        assert [e.position for e in stored] == [2, 3]
        assert backend._writer.info.backend_pid != pid  # type: ignore[attr-defined]
        assert texts_of(store.read("s")) == ["m0", "kept0", "kept1"]
        assert [e.position for e in store.read_all()] == [1, 2, 3]
        assert store.verify().ok


_DUPLICATES = """
import sys, eventlog as el

def texts(n, prefix):
    return [el.Event(data=el.ModelInput.from_text(f"{prefix}{i}")) for i in range(n)]

duplicates = 0
with el.open(sys.argv[1]) as store:
    for k in range(20):
        taken = el.Event(data=el.ModelInput.from_text("taken"))
        store.append(f"a{k}", [taken])
        for batch in ([taken, *texts(14, "x")], [taken, *texts(19, "y")]):  # INSERT, COPY
            try:
                store.append(f"b{k}", batch)
            except el.DuplicateEventError:
                duplicates += 1
            store.append(f"a{k}", texts(3, "after"))
    print(duplicates, store.head_position(), store.verify().ok)
"""


def test_a_duplicate_event_id_prints_nothing(fresh_schema: Schemas) -> None:
    """Appending a taken id (DuplicateEventError), then more: psycopg logs no "error ignored
    terminating Pipeline" (a unique violation while later rows were in flight did), and
    nothing reaches stderr. Twenty rounds, as the rows in flight depend on timing."""
    url = url_for(fresh_schema())
    done = subprocess.run(
        [sys.executable, "-c", _DUPLICATES, url],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path.cwd(),
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.split() == ["40", str(20 * 7), "True"]


def _alive(pid: int) -> bool:
    with closing(connect()) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
        return bool(row.fetchone()[0])


def test_two_processes_creating_one_store_share_it(fresh_schema: Schemas) -> None:
    url = url_for(fresh_schema())
    script = "import sys, eventlog as el\nwith el.open(sys.argv[1]) as s: pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", script, url]) for _ in range(4)]
    assert [p.wait(60) for p in procs] == [0, 0, 0, 0]
    with el.open(url) as store:
        store.append("s", text_events(2))
        assert store.head_position() == 2


# -- bad input: nothing is changed ------------------------------------------------------------


def _tables(schema: str) -> list[str]:
    with closing(connect()) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "ORDER BY table_name",
            (schema,),
        ).fetchall()
    return [r[0] for r in rows]


def test_a_schema_of_other_tables_is_refused_and_left_alone(fresh_schema: Schemas) -> None:
    schema = fresh_schema()
    with closing(connect()) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".orders (id int)')
    with pytest.raises(SchemaVersionError, match="not an eventlog store") as info:
        el.open(url_for(schema))
    assert f"schema={schema}" in str(info.value)
    assert _tables(schema) == ["orders"]
    assert not el.store_exists(url_for(fresh_schema()))
    assert el.store_exists(url_for(schema))


def test_a_newer_layout_is_refused(fresh_schema: Schemas) -> None:
    schema = fresh_schema()
    url = url_for(schema)
    with el.open(url) as store:
        store.append("s", text_events(1))
    with closing(connect()) as conn:
        conn.execute(f'INSERT INTO "{schema}".eventlog_schema (version) VALUES (99)')
    with pytest.raises(SchemaVersionError, match="newer than this eventlog"):
        el.open(url)


def test_a_missing_table_is_damage(fresh_schema: Schemas) -> None:
    schema = fresh_schema()
    url = url_for(schema)
    el.open(url).close()
    with closing(connect()) as conn:
        conn.execute(f'DROP TABLE "{schema}".forks')
    with pytest.raises(CorruptionError, match="missing: forks"):
        el.open(url)


def test_a_damaged_record_names_its_place(fresh_schema: Schemas) -> None:
    schema = fresh_schema()
    with el.open(url_for(schema)) as store:
        store.append("s", text_events(2))
        with closing(connect()) as conn:
            conn.execute(f"UPDATE \"{schema}\".events SET rec = '\\x00ff' WHERE seq = 2")
        with pytest.raises(CorruptionError, match="position 2") as info:
            list(store.read("s"))
        assert info.value.stream == "s"
        report = store.verify()
        assert not report.ok


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"schema": "Bad-Name"}, "lowercase identifier"),
        ({"schema": "pg_catalog"}, "lowercase identifier"),
        ({"schema": "ok", "pool_size": "0"}, "pool_size"),
        ({"schema": "ok", "connect_timeout": "-1"}, "connect_timeout"),
        ({"schema": "ok", "no_such_libpq_option": "1"}, "bad PostgreSQL URL"),
    ],
)
def test_bad_options_are_usage_errors(options: dict[str, str], message: str) -> None:
    require_server()
    query = "&".join(f"{k}={v}" for k, v in options.items())
    with pytest.raises(el.UsageError, match=message):
        el.open(f"postgresql://127.0.0.1/test?{query}")


def test_an_unreachable_server_is_unavailable_and_hides_the_password() -> None:
    with pytest.raises(BackendUnavailableError, match="cannot connect") as info:
        el.open("postgresql://me:secret@127.0.0.1:1/test?connect_timeout=2")
    assert "secret" not in str(info.value)
    assert "me@127.0.0.1:1" in str(info.value)


# -- error translation: one table, each rule provoked on the server ---------------------------


def test_error_rules_translate_real_server_errors(fresh_schema: Schemas) -> None:
    """Each rule of ERROR_RULES, on an error the server (or psycopg) really raised."""
    import psycopg

    from eventlog.backends.postgres_schema import ERROR_RULES, translate_error

    schema = fresh_schema()
    el.open(url_for(schema)).close()
    s = f'"{schema}"'
    row = "(1, 'i', 's', 1, 0, 't', '\\x00')"
    role = f"{schema}_nobody"
    # (statement, parameters, error class, Conflict kind or a fragment of the message)
    cases: list[tuple[str, tuple[object, ...], type[BaseException], str]] = [
        (f"INSERT INTO {s}.events VALUES {row}, (2, 'j', 's', 1, 0, 't', '')", (), Conflict, "seq"),
        (f"INSERT INTO {s}.events VALUES {row}, (2, 'i', 's', 2, 0, 't', '')", (), Conflict, "id"),
        (f"INSERT INTO {s}.forks VALUES ('f', 'p', 1, 0), ('f', 'q', 1, 0)", (), Conflict, "fork"),
        ("SELECT 1", (), BackendUnavailableError, "locked by another writer"),  # see below
        (
            f"INSERT INTO {s}.events VALUES (1, 'i', %s, 1, 0, 't', '')",
            (secrets.token_urlsafe(6000),),  # random: TOAST cannot shrink it under the limit
            el.ValidationError,
            "too large to be indexed",
        ),
        ("SELECT convert_from('\\xff'::bytea, 'UTF8')", (), el.ValidationError, "cannot be stored"),
        ("SELECT %s::text", ("a\x00b",), el.ValidationError, "NUL"),
        ("CREATE TABLE no_schema_here.x (i int)", (), CorruptionError, "schema is gone"),
        (f"SELECT * FROM {s}.nothing", (), CorruptionError, "table of the store is gone"),
        (
            "SET LOCAL temp_file_limit = '64kB'; SET LOCAL work_mem = '64kB'",
            (),
            BackendUnavailableError,
            "out of resources",
        ),
        (f"SET LOCAL ROLE {role}", (), BackendUnavailableError, "permission denied"),
        ("SET TRANSACTION READ ONLY", (), BackendUnavailableError, "read-only server"),
        ("SELECT 1/0", (), BackendUnavailableError, "22012"),
    ]
    follow_up = {
        "locked": f"SET LOCAL lock_timeout = '100ms'; LOCK TABLE {s}.head",
        "out of resources": "SELECT g FROM generate_series(1, 200000) g ORDER BY g DESC",
        "permission denied": f"SELECT * FROM {s}.events",
        "read-only server": f"CREATE TABLE {s}.x (i int)",
    }
    rules_hit: set[int] = set()
    with closing(connect()) as conn, closing(connect()) as holder:
        conn.execute(f"DROP ROLE IF EXISTS {role}")
        conn.execute(f"CREATE ROLE {role}")
        try:
            for statement, params, kind, detail in cases:
                then = next((q for k, q in follow_up.items() if k in detail), None)
                if "locked" in detail:
                    holder.execute("BEGIN")
                    holder.execute(f"LOCK TABLE {s}.head")
                with pytest.raises(psycopg.Error) as info, conn.transaction():
                    conn.execute(statement, params or None)
                    if then:
                        conn.execute(then)
                if "locked" in detail:
                    holder.execute("ROLLBACK")
                error = translate_error(info.value, "the-store")
                assert isinstance(error, kind), (statement, error)
                if isinstance(error, Conflict):
                    assert error.kind == detail
                else:
                    assert detail in str(error), (statement, str(error))
                rules_hit.add(_rule_of(info.value, ERROR_RULES))
        finally:
            conn.execute(f"DROP ROLE IF EXISTS {role}")
    assert rules_hit == set(range(len(ERROR_RULES))) | {-1}  # every rule, and the fallback


def _rule_of(exc: BaseException, rules: tuple[tuple[str, str, Any], ...]) -> int:
    """The index of the rule that decides `exc` (-1: none, the fallback)."""
    state = getattr(exc, "sqlstate", None) or ""
    diag = getattr(exc, "diag", None)
    constraint = (diag.constraint_name if diag is not None else None) or ""
    for i, (prefix, fragment, _) in enumerate(rules):
        if state.startswith(prefix) and (not fragment or fragment in (constraint or str(exc))):
            return i
    return -1


def test_a_writer_waits_at_most_lock_timeout_for_another(fresh_schema: Schemas) -> None:
    """Another session holding the head row (a writer stopped mid-commit): the append gives up
    after `lock_timeout` with BackendUnavailableError, writing nothing."""
    schema = fresh_schema()
    with el.open(url_for(schema, lock_timeout="0.5")) as store:
        store.append("s", text_events(1))
        with closing(connect()) as other, other.transaction():
            other.execute(f'SELECT position FROM "{schema}".head FOR UPDATE')
            started = time.monotonic()
            with pytest.raises(BackendUnavailableError, match="locked by another writer"):
                store.append("s", text_events(1, "late"))
            assert time.monotonic() - started < 5
        store.append("s", text_events(1, "after"))
        assert texts_of(store.read("s")) == ["m0", "after0"]


def test_the_command_line_works_on_a_postgres_store(fresh_schema: Schemas) -> None:
    """`eventlog --store postgresql://...`: append, log, verify and stats (with the server's
    size of the tables as size on disk); `streams` refuses a schema that holds no store."""
    import json

    url = url_for(fresh_schema())

    def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "eventlog", "--store", url, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )

    missing = cli("streams")
    assert missing.returncode != 0 and "no store" in (missing.stderr + missing.stdout).lower()
    line = json.dumps({"type": "checkpoint", "data": {"label": "one"}})
    assert cli("append", "s", "-", stdin=line + "\n").returncode == 0
    assert "one" in cli("log", "s").stdout
    assert cli("verify").returncode == 0
    stats = json.loads(cli("stats", "--json").stdout)
    assert stats["events"] == 1
    assert stats["disk_bytes"] > 0


def test_libpq_parameters_and_the_unix_socket_reach_the_server(fresh_schema: Schemas) -> None:
    """`postgresql:///db?host=/socket/dir` (an empty host) and libpq parameters holding spaces
    are passed on as written."""
    schema = fresh_schema()
    url = (
        f"postgresql:///test?host=/var/run/postgresql&schema={schema}"
        "&application_name=my%20app&options=-c%20statement_timeout%3D4321"
    )
    if not Path("/var/run/postgresql").is_dir():
        pytest.skip("no PostgreSQL socket directory at /var/run/postgresql")
    with el.open(url) as store:
        store.append("s", text_events(1))
        rows = store.backend._query(  # type: ignore[attr-defined]
            "SELECT current_setting('application_name'), current_setting('statement_timeout')"
        )
        assert rows == [("my app", "4321ms")]
        assert "schema=" in store.location and "/var/run" not in store.location


def test_reads_survive_the_server_ending_their_connections(fresh_schema: Schemas) -> None:
    """The server ends every pooled connection (a restart, an idle timeout): reads go on."""
    with el.open(url_for(fresh_schema(), pool_size="4")) as store:
        store.append("s", text_events(3))
        barrier = threading.Barrier(4)

        def read() -> None:  # four reads at once: four pooled connections
            barrier.wait()
            assert len(list(store.read("s"))) == 3

        threads = [threading.Thread(target=read) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with closing(connect()) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND backend_type = 'client backend' AND query LIKE %s",
                (f'%"{store.backend.target.schema}".events%',),  # type: ignore[attr-defined]
            )
        time.sleep(0.2)
        for _ in range(6):
            assert texts_of(store.read("s")) == ["m0", "m1", "m2"]


def test_the_listener_comes_back_after_its_connection_is_lost(fresh_schema: Schemas) -> None:
    """The LISTEN connection is ended by the server: it is made again, and other stores'
    commits wake subscribers at once again (not at the 60 s poll interval)."""
    url = url_for(fresh_schema())
    with el.open(url, poll_interval=60) as reader, el.open(url) as writer:
        sub = reader.subscribe()
        assert sub.poll(timeout=0.1) == []  # starts the listener
        listener = reader.backend._listener  # type: ignore[attr-defined]
        with closing(connect()) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE %s",
                ("LISTEN eventlog_%",),
            )
        time.sleep(1.5)  # lost, and made again
        for word in ("one", "two"):
            threading.Timer(0.3, lambda w=word: writer.append("s", text_events(1, w))).start()
            started = time.monotonic()
            got = sub.poll(timeout=20)
            assert texts_of(got) == [f"{word}0"]
            assert time.monotonic() - started < 10
        assert listener.is_alive()
