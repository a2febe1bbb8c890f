"""`eventlog erase`, and the other commands on an encrypted store, in a subprocess as a user runs
them (no terminal: stdin is not one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import eventlog as el
from eventlog.encryption import key_name

pytest.importorskip("cryptography")


def run(*args: str, store: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eventlog", "--store", store, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """An SQLite store with its key directory: two streams and a fork sharing one's events."""
    url = f"sqlite:///{tmp_path}/app.db?keys={tmp_path}/keys"
    with el.open(url) as store:
        store.append("conv-7", [el.ModelInput.from_text(f"turn {i}") for i in range(3)])
        store.append("conv-8", [el.ModelInput.from_text("other user")])
        store.fork("conv-7", "conv-7-retry", at_seq=2)
    return url


def test_erase_deletes_the_key_says_what_it_did_and_verify_says_erased(
    store_url: str, tmp_path: Path
) -> None:
    refused = run("erase", "conv-7", store=store_url)  # no terminal to ask: --yes is needed
    assert refused.returncode == 1 and "pass --yes" in refused.stderr
    assert (tmp_path / "keys" / f"{key_name('conv-7')}.key").exists()

    done = run("erase", "conv-7", "--yes", store=store_url)
    assert done.returncode == 0, done.stderr
    assert f"erased stream 'conv-7': its key was deleted from {tmp_path}/keys" in done.stdout
    assert "3 encrypted events can no longer be read" in done.stdout
    assert "conv-7-retry" in done.stdout  # the fork that shares its events
    assert not (tmp_path / "keys" / f"{key_name('conv-7')}.key").exists()

    verify = run("verify", "--quiet", store=store_url)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "conv-7: erased" in verify.stdout and "verify: ok" in verify.stdout
    as_json = json.loads(run("verify", "--json", "--quiet", store=store_url).stdout)
    assert (as_json["ok"], as_json["erased"]) == (True, ["conv-7"])

    log = run("log", "conv-7", store=store_url)
    assert log.returncode == 1 and "ErasedError" in log.stderr and "'conv-7'" in log.stderr
    assert run("log", "conv-8", store=store_url).returncode == 0

    again = json.loads(run("erase", "conv-7", "--yes", "--json", store=store_url).stdout)
    assert again["key_deleted"] is False and again["encrypted_events"] == 3


def test_erase_needs_the_key_directory_and_an_existing_stream(store_url: str) -> None:
    bare = store_url.split("?")[0]
    out = run("erase", "conv-7", "--yes", store=bare)
    assert out.returncode == 1 and "?keys=DIR" in out.stderr
    missing = run("erase", "nobody", "--yes", store=store_url)
    assert missing.returncode == 1 and "StreamNotFoundError" in missing.stderr
    unreadable = run("log", "conv-8", store=bare)
    assert unreadable.returncode == 1 and "MissingKeyError" in unreadable.stderr


def test_erase_with_another_key_directory_erases_nothing(store_url: str, tmp_path: Path) -> None:
    """A mistyped key directory holds no key of the stream: erasing there would delete nothing
    yet report the events unreadable, so it is refused and leaves no erasure marker."""
    wrong = f"{store_url.split('?')[0]}?keys={tmp_path}/kyes"
    out = run("erase", "conv-7", "--yes", store=wrong)
    said = " ".join(out.stderr.split())  # however the terminal wrapped it
    assert out.returncode == 1
    assert "MissingKeyError" in said and "nothing was erased" in said
    assert list((tmp_path / "kyes").iterdir()) == []
    assert run("log", "conv-7", store=store_url).returncode == 0  # still readable


def test_erase_exits_1_when_events_stored_unencrypted_stay_readable(tmp_path: Path) -> None:
    bare = f"sqlite:///{tmp_path}/old.db"
    with el.open(bare) as store:
        store.append("s", [el.ModelInput.from_text("before encryption")])
    url = f"{bare}?keys={tmp_path}/keys"
    with el.open(url) as store:
        store.append("s", [el.ModelInput.from_text("after")])
    out = run("erase", "s", "--yes", store=url)
    assert out.returncode == 1
    assert "1 event of 's' was stored unencrypted" in " ".join(out.stderr.split())


def test_export_keeps_hashes_with_the_same_keys_and_decrypts_only_when_asked(
    store_url: str, tmp_path: Path
) -> None:
    keys = f"{tmp_path}/keys"
    same = run("export", f"lmdb://{tmp_path}/copy?keys={keys}", "--quiet", store=store_url)
    if "lmdb" in same.stderr and same.returncode:
        pytest.skip("lmdb is not installed")
    assert same.returncode == 0, same.stderr
    assert "hashes: the source's" in same.stdout
    plain = run("export", f"jsonl://{tmp_path}/plain", "--quiet", store=store_url)
    assert plain.returncode == 1 and "--decrypt" in plain.stderr
    assert not (tmp_path / "plain").exists()
    decrypted = run("export", f"jsonl://{tmp_path}/plain", "--decrypt", "--quiet", store=store_url)
    assert decrypted.returncode == 0, decrypted.stderr
    assert "4 events decrypted" in decrypted.stdout and "verify target: ok" in decrypted.stdout
