"""The leader of a synced group commit waits for the writers it expects, and no longer."""

from __future__ import annotations

import threading
import time

import pytest

from eventlog.backends import group_commit
from eventlog.backends.group_commit import Gather, GroupQueue, Job
from tests.contract import wait_for


def test_leader_waits_until_the_expected_writers_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last arrival wakes the leader: with a gathering time of a minute, it returns at once."""
    monkeypatch.setattr(group_commit, "GATHER_SECONDS", 60.0)
    lock = threading.Lock()
    gather = Gather(lock)
    gather.committed(3, 0)
    queue: list[int] = [0]

    def arrive(item: int) -> None:
        time.sleep(0.0002)
        with lock:
            queue.append(item)
            gather.arrived(len(queue))

    threads = [threading.Thread(target=arrive, args=(i,)) for i in (1, 2)]
    with lock:
        for th in threads:
            th.start()
        t0 = time.monotonic()
        gather.wait(queue)
        assert len(queue) == 3
        assert time.monotonic() - t0 < 30
    for th in threads:
        th.join()


def test_leader_stops_waiting_at_the_deadline() -> None:
    lock = threading.Lock()
    gather = Gather(lock)
    gather.committed(5, 2)  # 7 were in flight; only the leader comes back
    assert gather.expected == 7
    with lock:
        t0 = time.monotonic()
        gather.wait([0])
        waited = time.monotonic() - t0
    assert group_commit.GATHER_SECONDS <= waited < 1.0


def test_a_lone_writer_never_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a gathering time of a minute, a wait that started would be plain to see."""
    monkeypatch.setattr(group_commit, "GATHER_SECONDS", 60.0)
    lock = threading.Lock()
    gather = Gather(lock)
    gather.committed(1, 0)
    with lock:
        t0 = time.monotonic()
        gather.wait([0])
        assert time.monotonic() - t0 < 30


def test_writers_that_arrive_together_share_one_commit() -> None:
    """8 threads each run a synced job 20 times; the queue groups them (fewer commits than
    jobs), every job gets its own result, and the expected count follows the writers."""
    queue = GroupQueue()
    barrier = threading.Barrier(8)
    results: dict[int, list[int]] = {t: [] for t in range(8)}

    def commit(group: list[Job]) -> bool:
        time.sleep(0.002)  # a sync: the others queue meanwhile
        for job in group:
            job.result = job.fn(None)
        return True

    def writer(t: int) -> None:
        barrier.wait()
        for i in range(20):
            results[t].append(queue.run(lambda _txn, v=t * 100 + i: v, True, commit))

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == {t: [t * 100 + i for i in range(20)] for t in range(8)}
    assert queue.jobs == 160
    assert queue.commits <= 160 // 2


def test_a_commit_that_raises_fails_every_job_of_its_group() -> None:
    """A commit that raises before setting outcomes (a lock it could not take) fails every job
    of its group with that error, followers included: none returns a result it never got."""
    queue = GroupQueue()
    gate = threading.Event()
    outcomes: dict[str, object] = {}

    def hold(group: list[Job]) -> bool:
        gate.wait(30)
        for job in group:
            job.result = "held"
        return True

    def fail(group: list[Job]) -> bool:
        raise TimeoutError("the write lock stayed busy")

    def run(name: str, commit: object) -> None:
        try:
            outcomes[name] = queue.run(lambda _txn: name, True, commit)  # type: ignore[arg-type]
        except TimeoutError as exc:
            outcomes[name] = exc

    holder = threading.Thread(target=run, args=("holder", hold))
    holder.start()
    assert wait_for(lambda: queue._leading)
    followers = [threading.Thread(target=run, args=(f"f{i}", fail)) for i in range(3)]
    for queued, th in enumerate(followers, 1):
        th.start()
        assert wait_for(lambda n=queued: len(queue._queue) == n)
    gate.set()
    for th in [holder, *followers]:
        th.join(30)
    assert outcomes["holder"] == "held"
    for i in range(3):
        assert isinstance(outcomes[f"f{i}"], TimeoutError), outcomes


def test_an_interrupted_leader_leaves_the_queue_usable(monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyboardInterrupt while the leader gathers: later jobs still run, the interrupted one
    never does."""
    interrupts = [KeyboardInterrupt()]

    def gather(self: Gather, queue: object) -> None:
        if interrupts:
            raise interrupts.pop()

    monkeypatch.setattr(Gather, "wait", gather)
    queue = GroupQueue()
    ran: list[str] = []

    def commit(group: list[Job]) -> bool:
        for job in group:
            job.result = job.fn(None)
        return True

    with pytest.raises(KeyboardInterrupt):
        queue.run(lambda _txn: ran.append("interrupted"), True, commit)
    assert queue.run(lambda _txn: ran.append("next") or "ok", True, commit) == "ok"
    assert ran == ["next"]
