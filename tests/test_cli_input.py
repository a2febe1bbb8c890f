"""CLI input a user gets wrong: one clear error naming what is wrong, and nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import eventlog as el
from eventlog.cli import cli
from tests import test_import as import_samples
from tests import test_ingest_openai_chat as chat_samples


def run(url: str, *args: str, input: str | None = None) -> tuple[int, str, str]:
    """The exit code, stdout and stderr of one CLI call (in process; a traceback fails)."""
    result = CliRunner().invoke(cli, ["--store", url, *args], input=input)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def one_line(err: str) -> str:
    """stderr as one line (rich wraps long errors)."""
    return " ".join(err.split())


CHECKPOINT = '{"type": "checkpoint", "data": {"label": "a"}}'


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"type": "model_input", "data": [1, 2]}'], '"data" must be a JSON object, got list'),
        (['{"type": "checkpoint", "data": null}'], '"data" must be a JSON object, got null'),
        (['{"type": "checkpoint", "data": {"label": "x"}, "metaa": {}}'], "unknown key(s) 'metaa'"),
        (['{"type": "checkpoint", "data": {"label": "x", "labell": "y"}}'], "no field(s) 'labell'"),
        (  # nested objects too: a typo there would store a default in its place
            [
                '{"type": "tool_results", "data": {"results": [{"call_id": "c1", '
                '"tool_name": "t", "contnet": "output", "statsu": "failed"}]}}'
            ],
            "has no field $.results[0].contnet",
        ),
        (
            ['{"type": "model_input", "data": {"sections": [{"text": "a", "titel": "t"}]}}'],
            "has no field $.sections[0].titel",
        ),
        (  # no coercion: a string is not a seq
            ['{"type": "compaction", "data": {"first_seq": "1", "last_seq": 2, "summary": "s"}}'],
            "Expected `int`, got `str`",
        ),
        (['{"type": "checkpoint", "data": {"label": "x"}, "meta": [1]}'], "Expected `object`"),
        (['{"type": "checkpoint", "data": {"label": "x"}, "id": 7}'], "Expected `str`"),
        (["", CHECKPOINT, "  ", '{"type": "checkpoint", "data": {}}'], "line 4: Object missing"),
        (["{not json"], "line 1: not JSON"),
        (['{"type": "no_such_type", "data": {}}'], "unknown event type 'no_such_type'"),
        (
            ['{"type": "checkpoint", "data": {"type": "custom", "label": "a"}}'],
            "\"data\" says type 'custom' but the line says 'checkpoint'",
        ),
    ],
)
def test_append_refuses_a_line_that_is_not_an_event(
    tmp_path: Path, lines: list[str], message: str
) -> None:
    source = tmp_path / "events.jsonl"
    source.write_text("\n".join(lines) + "\n")
    store = tmp_path / "s.db"
    code, _, err = run(f"sqlite:///{store}", "append", "s", str(source))
    assert code == 1, err
    assert err.startswith("error: ValidationError: ") and "events.jsonl line" in one_line(err)
    assert message in one_line(err), err
    assert not store.exists()  # the store did not exist: nothing created


def test_log_json_shows_bytes_in_meta_and_reads_back(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a.db"
    with el.open(url) as store:
        store.append("s", [el.Event(data=el.Checkpoint(label="x"), meta={"raw": b"\x00\x01"})])
    code, out, err = run(url, "log", "s", "--json")
    assert code == 0, err
    line = orjson.loads(out)
    assert line["meta"] == {"raw": "AAE="}  # base64, as bytes in `data` are
    copy = f"sqlite:///{tmp_path}/b.db"
    code, _, err = run(copy, "append", "s", "-", input=out)
    assert code == 0, err
    with el.open(copy) as store:
        (event,) = store.read("s")
        assert event.id == line["id"] and event.data == el.Checkpoint(label="x")


def test_an_empty_store_url_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--store "$UNSET"` must not fall back to ./eventlog.db (or $EVENTLOG_STORE)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "e.jsonl").write_text(CHECKPOINT + "\n")
    monkeypatch.setenv("EVENTLOG_STORE", f"sqlite:///{tmp_path}/env.db")
    code, _, err = run("", "append", "s", "e.jsonl")
    assert code == 1 and "--store is empty" in err
    monkeypatch.setenv("EVENTLOG_STORE", "")
    result = CliRunner().invoke(cli, ["append", "s", "e.jsonl"])
    assert result.exit_code == 1 and "$EVENTLOG_STORE is empty" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.jsonl"]


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl", "lmdb"])
def test_a_refused_first_write_creates_no_store(tmp_path: Path, scheme: str) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    events = inputs / "e.jsonl"
    events.write_text(CHECKPOINT + "\n")
    history = inputs / "h.json"
    history.write_bytes(orjson.dumps(import_samples.chat_history()))
    body = inputs / "r.json"
    body.write_bytes(orjson.dumps(chat_samples.completion()))
    where = tmp_path / "stores"
    where.mkdir()
    url = f"sqlite:///{where}/s.db" if scheme == "sqlite" else f"{scheme}://{where}/s"
    for args, message in [
        (("append", "s", str(events), "--expected-seq", "3"), "expected seq 3"),
        (("import", "c", str(history), "--format", "openai-chat", "--expected-seq", "4"), "seq 4"),
        (("ingest", "c", str(body), "--provider", "openai-chat", "--expected-seq", "2"), "seq 2"),
    ]:
        code, _, err = run(url, *args)
        assert code == 1 and "ConcurrencyError" in err and message in one_line(err), err
    code, _, err = run(f"{url}?max_event_bytes=10", "append", "s", str(events))
    assert code == 1 and "the limit is 10" in one_line(err), err
    assert list(where.iterdir()) == []
    code, _, err = run(url, "append", "s", str(events))  # and a good one does create it
    assert code == 0, err
    assert list(where.iterdir()) != []


def test_an_export_the_target_refuses_creates_no_store(tmp_path: Path) -> None:
    source = f"sqlite:///{tmp_path}/a.db"
    with el.open(source) as store:
        store.append("s", [el.Event(data=el.Checkpoint(label="x"), meta={"raw": b"\x00"})])
    target = tmp_path / "copy"
    code, _, err = run(source, "export", f"jsonl://{target}")
    assert code == 1 and "nothing was copied" in one_line(err), err
    assert not target.exists()
    code, _, err = run(source, "export", "memory://")
    assert code == 1 and "memory:// is gone when this command ends" in one_line(err)


@pytest.mark.parametrize(
    "args", [["streams"], ["verify"], ["stats"], ["log", "s"], ["export", "jsonl://out"]]
)
def test_a_read_of_a_memory_store_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    """A memory store is empty in every command: reading it would report on nothing."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run("memory://", *args)
    assert code == 1 and "memory:// is empty in every command" in one_line(err) and out == ""
    assert list(tmp_path.iterdir()) == []  # export made no empty target


def test_a_read_with_the_wrong_scheme_names_the_store_there(tmp_path: Path) -> None:
    place = tmp_path / "j"
    assert run(f"jsonl://{place}", "demo")[0] == 0
    code, _, err = run(f"lmdb://{place}", "streams")
    assert code == 1 and "holds a jsonl store, not a lmdb one (use jsonl://)" in one_line(err)
    db = tmp_path / "s.db"
    assert run(f"sqlite:///{db}", "demo")[0] == 0
    code, _, err = run(f"jsonl://{db}", "log", "demo-1")
    assert code == 1 and "holds a sqlite store, not a jsonl one" in one_line(err)


def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/p.db"
    many = "".join(f'{{"type": "checkpoint", "data": {{"label": "c{i}"}}}}\n' for i in range(5000))
    assert run(url, "append", "s", "-", input=many)[0] == 0
    for args in ("log s --json", "log s", "replay s --json"):  # replay: one large write
        command = f"{sys.executable} -m eventlog --store {url} {args} | head -1"
        done = subprocess.run(
            ["bash", "-c", f"set -o pipefail; {command}"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "COLUMNS": "200"},
        )
        assert done.returncode == 141, done.stderr  # as a program killed by SIGPIPE
        assert done.stderr == "" and done.stdout.count("\n") == 1


def test_an_error_the_store_finds_names_the_file_line(tmp_path: Path) -> None:
    """Blank lines are skipped, so the store's "event #i" is not the line: the CLI says which."""
    big_meta = '{"type": "checkpoint", "data": {"label": "b"}, "meta": {"x": "' + "y" * 3000 + '"}}'
    source = tmp_path / "events.jsonl"
    source.write_text("\n".join(["", CHECKPOINT, "", big_meta]) + "\n")
    code, _, err = run(f"sqlite:///{tmp_path}/s.db", "append", "s", str(source))
    assert code == 1 and "events.jsonl line 4, field 'meta': encodes to" in one_line(err), err
    assert not (tmp_path / "s.db").exists()


def test_log_shows_big_integers_and_refuses_what_json_cannot_show(tmp_path: Path) -> None:
    jsonl, url = f"jsonl://{tmp_path}/j", f"sqlite:///{tmp_path}/n.db"  # JSON keeps big ints
    with el.open(jsonl) as store:
        store.append("big", [el.Custom(kind="k", data={"n": 2**70})])
    with el.open(url) as store:
        store.append("nan", [el.Checkpoint(label="ok"), el.Custom(kind="k", data=float("nan"))])
    code, out, err = run(jsonl, "log", "big", "--json")
    assert code == 0 and f'"n":{2**70}' in out, err
    code, out, err = run(jsonl, "log", "big")
    assert code == 0 and str(2**70) in out, err
    code, out, err = run(url, "log", "nan", "--json")
    assert code == 1 and len(out.splitlines()) == 1  # the events before it were printed
    assert "stream 'nan' seq 2 holds the float nan, which JSON cannot show" in one_line(err)
    code, out, err = run(url, "log", "nan")
    assert code == 0 and "k: NaN" in out, err


def test_json_output_refuses_keys_json_would_turn_into_strings(tmp_path: Path) -> None:
    """MessagePack keeps int keys; JSON would print them as strings, and an int and a str key
    of the same digits as one duplicated key: `log --json | append` would lose one."""
    url = f"sqlite:///{tmp_path}/k.db"
    with el.open(url) as store:
        store.append("k", [el.Custom(kind="k", data={1: "int key", "1": "str key"})])
        store.append("m", [el.Event(data=el.Checkpoint(label="x"), meta={"n": {2: "x"}})])
    for stream, key in (("k", "int key 1"), ("m", "int key 2")):
        code, out, err = run(url, "log", stream, "--json")
        assert code == 1 and out == "", err
        assert f"stream {stream!r} seq 1 holds the {key}, which JSON" in one_line(err), err


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl"])
def test_empty_input_is_refused_and_creates_no_store(tmp_path: Path, scheme: str) -> None:
    where = tmp_path / "stores"
    where.mkdir()
    url = f"sqlite:///{where}/s.db" if scheme == "sqlite" else f"{scheme}://{where}/s"
    code, out, err = run(url, "append", "s", input="\n  \n")
    assert (code, out) == (1, "") and "stdin holds no events: nothing to append" in err, err
    code, out, err = run(url, "import", "c", "-", "--format", "openai-chat", input="[]")
    assert (code, out) == (1, "") and "holds no messages: nothing to import" in err, err
    assert list(where.iterdir()) == []
    assert run(url, "append", "s", input=CHECKPOINT + "\n")[0] == 0
    # with an expectation, an empty append checks it and writes nothing
    code, out, err = run(url, "append", "s", "--expected-seq", "1", input="")
    assert (code, out.strip()) == (0, "[]"), err
    code, _, err = run(url, "append", "s", "--expected-seq", "2", input="")
    assert code == 1 and "ConcurrencyError" in err, err
    with el.open(url) as store:
        assert [e.seq for e in store.read("s")] == [1]


def test_log_refuses_a_range_that_ends_before_it_starts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    assert run(url, "append", "s", input=CHECKPOINT + "\n" + CHECKPOINT + "\n")[0] == 0
    code, out, err = run(url, "log", "s", "--from", "2", "--to", "1")
    assert (code, out) == (2, "") and "1 is below --from 2" in one_line(err), err
    code, out, _ = run(url, "log", "s", "--from", "2", "--to", "2")
    assert code == 0 and len(out.splitlines()) == 1
