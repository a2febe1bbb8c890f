"""Per-stream append locks: same stream in turn, different streams never wait on each other."""

from __future__ import annotations

import threading
from pathlib import Path

import eventlog as el
from eventlog.stream_locks import StreamLocks
from tests.contract import text_events


def _acquire_in_thread(locks: StreamLocks, stream: str) -> tuple[threading.Thread, threading.Event]:
    got = threading.Event()

    def run() -> None:
        locks.acquire(stream)
        got.set()
        locks.release(stream)

    th = threading.Thread(target=run)
    th.start()
    return th, got


def test_other_streams_do_not_wait() -> None:
    """Many streams (which a fixed set of stripes would map onto shared locks) are independent."""
    locks = StreamLocks()
    held = [f"w{i}" for i in range(200)]
    for stream in held:
        locks.acquire(stream)
    th, got = _acquire_in_thread(locks, "other")
    assert got.wait(5)
    th.join()
    for stream in held:
        locks.release(stream)
    assert len(locks) == 0


def test_same_stream_waits_for_the_holder() -> None:
    locks = StreamLocks()
    locks.acquire("s")
    th, got = _acquire_in_thread(locks, "s")
    assert not got.wait(0.1)
    assert len(locks) == 1
    locks.release("s")
    assert got.wait(5)
    th.join()
    assert len(locks) == 0  # the lock is dropped once nobody holds or waits for it


def test_store_appends_to_a_held_stream_only_wait_for_that_stream(tmp_path: Path) -> None:
    """While one stream's append lock is held, appends to 100 other streams all complete."""
    with el.open(f"sqlite:///{tmp_path / 'l.db'}") as store:
        store._stream_locks.acquire("busy")
        done = threading.Event()

        def others() -> None:
            for i in range(100):
                store.append(f"s{i}", text_events(1, f"s{i}"))
            done.set()

        th = threading.Thread(target=others)
        th.start()
        assert done.wait(30)
        th.join()
        store._stream_locks.release("busy")
        assert store.append("busy", text_events(1))[0].seq == 1
