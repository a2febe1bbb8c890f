"""The core CLI commands against real stores, in a subprocess like a user would run them."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import eventlog as el
from tests.conftest import BACKENDS

PERSISTENT = [b for b in BACKENDS if b != "memory"]
TEST_CLASSES = {
    "sqlite": "tests.backends.test_sqlite:TestSQLite",
    "jsonl": "tests.backends.test_jsonl:TestJSONL",
    "lmdb": "tests.backends.test_lmdb:TestLMDB",
}


def run(*args: str, store: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eventlog", "--store", store, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.fixture(params=PERSISTENT)
def backend_name(request: pytest.FixtureRequest) -> str:
    """Only backends that persist between CLI invocations."""
    name: str = request.param
    return name


@pytest.fixture
def store_url(make_url: Callable[[], str]) -> str:
    return make_url()


def test_demo_records_and_verifies(store_url: str) -> None:
    out = run("demo", store=store_url)
    assert out.returncode == 0, out.stderr
    assert "verify: ok" in out.stdout and "demo-1" in out.stdout
    again = run("demo", store=store_url)
    assert "demo-2" in again.stdout
    streams = json.loads(run("streams", "--json", store=store_url).stdout)
    assert {s["stream"] for s in streams} == {"demo-1", "demo-1-retry", "demo-2", "demo-2-retry"}


def test_append_json_lines_and_verify(store_url: str) -> None:
    lines = "\n".join(
        [
            json.dumps({"type": "system_instruction_set", "data": {"text": "hi"}}),
            json.dumps(
                {"type": "model_input", "data": {"sections": [{"text": "q"}]}, "meta": {"u": 1}}
            ),
        ]
    )
    out = run("append", "s", "--expected-seq", "no_stream", store=store_url, stdin=lines)
    assert out.returncode == 0, out.stderr
    assert [r["seq"] for r in json.loads(out.stdout)] == [1, 2]
    bad = run("append", "s", store=store_url, stdin='{"type": "nope"}')
    assert bad.returncode == 1 and "unknown event type" in bad.stderr
    conflict = run("append", "s", "--expected-seq", "0", store=store_url, stdin=lines)
    assert conflict.returncode == 1 and "ConcurrencyError" in conflict.stderr
    verify = run("verify", "--json", store=store_url)
    assert verify.returncode == 0 and json.loads(verify.stdout)["ok"] is True


def test_verify_exits_1_on_tampering(store_url: str, backend_name: str) -> None:
    run("demo", store=store_url)
    with el.open(store_url) as store:
        _tamper(store, backend_name)
    out = run("verify", store=store_url)
    assert out.returncode == 1
    assert "demo-1 seq 3" in out.stdout


def _on_a_terminal(*args: str, store: str) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal: (exit code, stdout, what the terminal got)."""
    leader, follower = os.openpty()
    seen: list[bytes] = []

    def drain() -> None:  # read as it comes: a full terminal buffer would block the child
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed its end
                return
            if not chunk:
                return
            seen.append(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "eventlog", "--store", store, *args],
            stdout=subprocess.PIPE,
            stderr=follower,
            text=True,
            env={**os.environ, "COLUMNS": "100", "TERM": "xterm"},
        )
        os.close(follower)
        stdout, _ = proc.communicate(timeout=60)
        reader.join(10)
    finally:
        os.close(leader)
    return proc.returncode, stdout, b"".join(seen).decode(errors="replace")


def test_verify_shows_progress_on_a_terminal_only(store_url: str) -> None:
    with el.open(store_url) as store:
        store.append("s", [el.ModelInput.from_text(f"m{i}") for i in range(3000)])
    code, stdout, terminal = _on_a_terminal("verify", store=store_url)
    assert code == 0 and "verify: ok (3,000 events in 1 stream)" in stdout
    assert "verifying" in terminal and "3000/3000" in terminal
    code, _, terminal = _on_a_terminal("verify", "--quiet", "s", store=store_url)
    assert code == 0 and terminal == ""
    piped = run("verify", "s", store=store_url)
    assert piped.returncode == 0 and piped.stderr == ""


def test_file_system_and_encoding_errors_are_one_line(tmp_path: Path) -> None:
    """No traceback for what a user can cause: an unwritable place, input that is not UTF-8,
    an output path whose directory is missing (found before a benchmark runs, not after)."""
    for url in ("sqlite:////proc/eventlog-test.db", "jsonl:////proc/eventlog-test"):
        out = run("streams", store=url)
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
        assert out.stderr.startswith("error: ")
    latin = tmp_path / "latin1.jsonl"
    latin.write_bytes('{"type": "model_input", "data": {"text": "caf\xe9"}}\n'.encode("latin-1"))
    store = tmp_path / "s.db"
    out = run("append", "s", str(latin), store=f"sqlite:///{store}")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "latin1.jsonl line 1: not UTF-8 text" in out.stderr
    assert not store.exists()  # nothing was written
    out = run("bench", "--quick", "--json", str(tmp_path / "missing" / "r.json"), store="memory://")
    assert out.returncode == 2 and "directory" in out.stderr and "does not exist" in out.stderr


_ONE_INPUT = '{"type": "model_input", "data": {"sections": [{"text": "q"}]}}\n'


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl", "lmdb"])
def test_read_commands_never_create_a_store(tmp_path: Path, scheme: str) -> None:
    """A mistyped --store is an error for commands that only read, and leaves nothing behind."""
    place = tmp_path / ("typo.db" if scheme == "sqlite" else "typo")
    url = f"sqlite:///{place}" if scheme == "sqlite" else f"{scheme}://{place}"
    for args in (["verify"], ["streams"], ["stats"], ["log", "s"], ["export", "memory://"]):
        out = run(*args, store=url)
        assert out.returncode == 1, (args, out.stdout, out.stderr)
        assert f"no store at {url}" in out.stderr
    assert list(tmp_path.iterdir()) == []
    with_bom = tmp_path.parent / f"bom-{scheme}.jsonl"  # as some editors save UTF-8
    with_bom.write_bytes(b"\xef\xbb\xbf" + _ONE_INPUT.encode())
    assert run("append", "s", str(with_bom), store=url).returncode == 0
    assert run("verify", store=url).returncode == 0


def test_export_of_a_damaged_source_leaves_no_target(tmp_path: Path) -> None:
    source = f"sqlite:///{tmp_path / 'src.db'}"
    run("demo", store=source)
    with el.open(source) as store:
        _tamper(store, "sqlite")
    target = tmp_path / "out"
    out = run("export", f"jsonl://{target}", store=source)
    assert out.returncode == 1 and "does not verify" in out.stderr
    assert not target.exists()


def _tamper(store: el.Store, backend_name: str) -> None:
    """Use the backend test class's own raw-engine tamper."""
    module, _, name = TEST_CLASSES[backend_name].partition(":")
    cls = getattr(importlib.import_module(module), name)
    cls().tamper(store, "demo-1", 3)


def test_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    out = run("streams", store="ftp://nowhere")
    assert out.returncode == 1
    assert "UsageError" in out.stderr and "Traceback" not in out.stderr


def test_names_and_text_with_brackets_are_printed_as_they_are(tmp_path: Path) -> None:
    """Stream names, event text and search snippets are text, not rich markup."""
    url = f"sqlite:///{tmp_path}/m.db?search=on"
    with el.open(url) as store:
        store.append("[/tool]", [el.ModelInput.from_text("the [bold] build fails")])
        store.fork("[/tool]", "[red]fork", at_seq=1)
    for args, expected in [
        (("streams",), ["[/tool]", "[red]fork", "[/tool]@1"]),
        (("log", "[/tool]"), ["the [bold] build fails"]),
        (("search", "build"), ["[/tool]@1", "[build]"]),
        (("stats",), ["longest stream: [/tool]"]),
        (("window", "[red]fork", "--budget", "1000"), ["[red]fork window at seq 1"]),
    ]:
        done = run(*args, store=url)
        assert done.returncode == 0, (args, done.stderr)
        for text in expected:
            assert text in done.stdout, (args, done.stdout)
    failed = run("fork", "[/missing]", "x", store=url)
    assert failed.returncode == 1
    assert "Traceback" not in failed.stderr
    assert "[/missing]" in failed.stderr
    ignored = run("replay", "[/tool]", "--keep-snapshots", "2", store=url)
    assert ignored.returncode == 2 and "--save-snapshot" in ignored.stderr
    ignored = run("window", "[/tool]", "--budget", "1000", "--turns", "2", store=url)
    assert ignored.returncode == 2 and "sliding_window" in ignored.stderr
    nowhere = run("search", "build", "--stream", "nosuch", store=url)
    assert nowhere.returncode == 1 and "StreamNotFoundError" in nowhere.stderr
    too_far = run("log", "[/tool]", "--to", str(2**63), store=url)
    assert too_far.returncode == 2 and "'--to'" in too_far.stderr


def test_import_registers_an_applications_event_types(tmp_path: Path) -> None:
    """A store holding an application's own event kinds: verify, log and export need them."""
    (tmp_path / "app_events.py").write_text(
        "import eventlog as el\n\n\n"
        "@el.register_event_type\n"
        "class Rated(el.EventData, frozen=True, tag='app.rated'):\n"
        "    score: int\n"
    )
    url = f"sqlite:///{tmp_path}/app.db"
    script = (
        "import sys, eventlog as el; sys.path.insert(0, sys.argv[1]); import app_events; "
        "el.open(sys.argv[2]).append('s', [app_events.Rated(score=5)])"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path), url], check=True, timeout=60)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}

    def cli(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "eventlog", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**env, **extra},
        )

    unknown = cli("--store", url, "verify")
    assert unknown.returncode == 1
    assert "unknown event type 'app.rated'" in unknown.stdout
    assert "eventlog --import MODULE" in unknown.stdout
    assert cli("--import", "app_events", "--store", url, "verify").returncode == 0
    assert cli("--store", url, "verify", EVENTLOG_IMPORT="app_events").returncode == 0
    log = cli("--import", "app_events", "--store", url, "log", "s", "--json")
    assert json.loads(log.stdout)["data"] == {"type": "app.rated", "score": 5}
    export = cli("--import", "app_events", "--store", url, "export", f"jsonl://{tmp_path}/j")
    assert export.returncode == 0, export.stderr
    missing = cli("--import", "no_such_module", "--store", url, "verify")
    assert missing.returncode == 2
    assert "cannot import 'no_such_module'" in missing.stderr and "PYTHONPATH" in missing.stderr
    (tmp_path / "broken_events.py").write_text("raise RuntimeError('config missing')\n")
    broken = cli("--import", "broken_events", "--store", url, "verify")
    assert broken.returncode == 2 and "PYTHONPATH" not in broken.stderr
    assert "importing 'broken_events' failed: RuntimeError: config missing" in broken.stderr


def test_verify_prints_a_damaged_event_id_as_text(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path}/j"
    with el.open(url) as store:
        (event,) = store.append("s", [el.Checkpoint(label="x")])
        path = store.backend.stream_path("s")  # type: ignore[attr-defined]
    damaged = "[/x]" + event.id[4:]
    path.write_text(path.read_text().replace(event.id, damaged))
    done = run("verify", store=url)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert damaged in done.stdout + done.stderr


def test_a_schema_upgrade_is_announced_on_stderr(tmp_path: Path) -> None:
    """Opening an older SQLite store migrates it, which takes a while on a big one: the
    command says so (and how long it took) instead of sitting silent."""
    from tests.backends.test_sqlite import _old_store

    path = tmp_path / "v3.db"
    expected = _old_store(path, 3)
    result = run("verify", store=f"sqlite:///{path}")
    assert result.returncode == 0, result.stderr
    count = len(expected) + 1  # and the compressed event _old_store adds
    assert f"eventlog: packing the records of {count} events (schema v4)" in result.stderr
    assert f"eventlog: packed {count} records in" in result.stderr
    again = run("verify", store=f"sqlite:///{path}")
    assert again.returncode == 0 and "packing" not in again.stderr


def test_notices_are_printed_once(tmp_path: Path) -> None:
    """A discarded snapshot is logged and warned about: the CLI prints it once. When an
    --import'ed module configures logging itself, its handler prints eventlog's notices and
    the CLI adds none of its own (no line twice)."""
    from eventlog.projections import ConversationProjection

    path = tmp_path / "s.db"
    url = f"sqlite:///{path}"
    with el.open(url) as store:
        store.append("c", [el.ModelInput.from_text(f"m{i}") for i in range(5)])
        name, version = ConversationProjection.name, ConversationProjection.version
        store.backend.save_snapshot("c", name, version, 3, b"\x93not a snapshot")
    result = run("replay", "c", "--json", store=url)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("discarded corrupt snapshot") == 1
    assert result.stderr.startswith("eventlog: discarded corrupt snapshot")
    (tmp_path / "logcfg.py").write_text(
        "import logging\nlogging.basicConfig(format='ROOT %(message)s', level=logging.INFO)\n"
    )
    (tmp_path / "ownlog.py").write_text(  # a handler on the eventlog logger itself
        "import logging, sys\nh = logging.StreamHandler(sys.stderr)\n"
        "h.setFormatter(logging.Formatter('MINE %(message)s'))\n"
        "logging.getLogger('eventlog').addHandler(h)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    with el.open(url) as store:  # the first replay deleted the discarded snapshot
        store.backend.save_snapshot("c", name, version, 3, b"\x93not a snapshot")
    own = subprocess.run(
        [sys.executable, "-m", "eventlog", "--store", url, "--import", "ownlog", "replay", "c"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert own.returncode == 0, own.stderr
    assert own.stderr.count("discarded corrupt snapshot") >= 1
    assert "MINE discarded corrupt snapshot" in own.stderr
    assert "eventlog: discarded" not in own.stderr
    from tests.backends.test_sqlite import _old_store

    old = tmp_path / "v3.db"
    _old_store(old, 3)
    configured = subprocess.run(
        [sys.executable, "-m", "eventlog", "--store", f"sqlite:///{old}", "--import", "logcfg"]
        + ["verify"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])},
    )
    assert configured.returncode == 0, configured.stderr
    assert configured.stderr.count("packing the records of") == 1
    assert "ROOT packing the records of" in configured.stderr
