"""Group commit for the LMDB and JSONL backends: concurrent appends share one commit and one sync.

A durable commit costs a flush of the disk, and these backends commit one writer at a time, so
appends from several threads would each wait for a flush of their own. Instead, the first thread
to find no commit in progress leads: it takes every append waiting at that moment and hands the
group to the backend's `commit`, which writes them all, syncs once if any of them asked for it,
and sets each job's result or error (one append's conflict fails only that append). A caller
returns only after the commit holding its append, as durable as it asked.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sized
from typing import Any

from eventlog.backends.base import Conflict

MAX_GROUP = 256
"""At most this many appends share one transaction (bounds the leader's latency)."""
GATHER_SECONDS = 0.001
"""The longest a leader of a synced commit waits for the writers it expects."""


class Gather:
    """Lets the leader of a synced commit wait for the writers still on their way.

    Writers woken by a commit spend a while in Python (results, the next event's encoding)
    before they queue again. A leader that starts at once syncs for itself alone and the others
    wait for the next sync; so it waits, at most `GATHER_SECONDS`, until as many jobs are queued
    as were in flight at the last commit (its group plus those that queued meanwhile). Every
    method is called with the queue's lock held.
    """

    def __init__(self, lock: threading.Lock) -> None:
        self._arrivals = threading.Condition(lock)
        self._waiting = False
        self.expected = 1
        """Writers in flight at the last commit."""

    def arrived(self, queued: int) -> None:
        """A job was queued, making `queued`: wake the gathering leader once it has them all.

        Waking it for each arrival would cost a thread switch per writer, in the cycle every
        writer waits on.
        """
        if self._waiting and queued >= self.expected:
            self._arrivals.notify()

    def wait(self, queue: Sized) -> None:
        """Wait until `queue` holds the expected number of jobs, or the time is up."""
        if self.expected <= 1:
            return
        deadline = time.monotonic() + GATHER_SECONDS
        self._waiting = True
        try:
            while len(queue) < self.expected:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._arrivals.wait(remaining)
        finally:
            self._waiting = False

    def committed(self, group: int, queued: int) -> None:
        """A commit of `group` jobs ended with `queued` more waiting."""
        self.expected = min(group + queued, MAX_GROUP)


class Job:
    """One write waiting for (or done by) a group commit."""

    __slots__ = ("done", "error", "fn", "kept", "result", "sync")

    def __init__(self, fn: Callable[[Any], Any], sync: bool) -> None:
        self.fn = fn
        self.sync = sync
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False
        self.kept = False
        """Committed, with its result set: an interrupt of the leader afterwards leaves it."""


class Turns:
    """Leader/follower turns over a queue of jobs: the part both group commits share.

    A caller queues its job (`_enqueue`), then `_take_turns`: while another thread leads it
    waits; when none does it leads the oldest jobs, at most `_cap()` of them, and goes on until
    its own job is done (with a long queue it may lead a group without it). The lock is entered
    as the plain lock (C) rather than the Condition (Python), and `notify_all` runs only when a
    follower waits: a lone writer pays for neither.
    """

    def __init__(self) -> None:
        self._lock = lock = threading.Lock()
        self._cond = threading.Condition(lock)
        self._followers = 0
        """Threads waiting for a leader's commit."""
        self._gather = Gather(lock)
        self._queue: list[Any] = []
        self._leading = False

    def _cap(self) -> int:
        """At most this many jobs share one commit."""
        return MAX_GROUP

    def _check_open(self) -> None:
        """Raise if no more jobs may be queued (called with the lock held)."""

    def _enqueue(self, job: Any) -> None:
        with self._lock:
            self._check_open()
            self._queue.append(job)
            self._gather.arrived(len(self._queue))

    def _take_turns(self, job: Any, sync: bool, lead: Callable[[list[Any]], None]) -> None:
        """Wait, or lead groups through `lead(group)`, until `job` is done.

        `lead` must give every job of its group a result or an error. Interrupted while waiting
        (KeyboardInterrupt), the job is taken back if no group has taken it: it never runs.
        """
        try:
            while (group := self._turn(job, sync)) is not None:
                try:
                    lead(group)
                finally:
                    self._finish(group)
        except BaseException:
            with self._lock:
                if any(j is job for j in self._queue):
                    self._queue.remove(job)
            raise

    def _turn(self, job: Any, sync: bool) -> list[Any] | None:
        """Wait while another thread leads; the group to lead next, or None once `job` is done."""
        with self._lock:
            while self._leading and not job.done:
                self._wait()
            if job.done:
                return None
            self._leading = True
            if sync:
                try:
                    self._gather.wait(self._queue)
                except BaseException:  # no one else would ever lead again
                    self._leading = False
                    self._cond.notify_all()
                    raise
            queue, cap = self._queue, self._cap()
            if len(queue) <= cap:  # all of it, without copying
                self._queue = []
                return queue
            group = queue[:cap]
            del queue[:cap]
            return group

    def _wait(self) -> None:
        """Wait (lock held) until a leader's commit ends."""
        self._followers += 1
        try:
            self._cond.wait()
        finally:
            self._followers -= 1

    def _finish(self, group: list[Any]) -> None:
        """The group's commit ended: mark its jobs done and wake the threads waiting."""
        with self._lock:
            for j in group:
                j.done = True
            self._leading = False
            self._gather.committed(len(group), len(self._queue))
            if self._followers:
                self._cond.notify_all()


class GroupQueue(Turns):
    """Leader/follower queue: `run` returns once the group holding its job has committed."""

    def __init__(self) -> None:
        super().__init__()
        self.commits = 0
        """Transactions committed through this queue."""
        self.jobs = 0
        """Jobs those transactions held."""

    def run(self, fn: Callable[[Any], Any], sync: bool, commit: Callable[[list[Job]], bool]) -> Any:
        """Queue `fn(txn)`; lead groups through `commit(group)` until this job is done.

        `commit` runs the jobs, sets each one's result or error, and says whether it committed.
        """
        job = Job(fn, sync)
        self._enqueue(job)
        self._take_turns(job, sync, lambda group: self._lead(group, commit))
        if job.error is not None:
            raise job.error
        return job.result

    def _lead(self, group: list[Job], commit: Callable[[list[Job]], bool]) -> None:
        try:
            if commit(group):
                self.commits += 1
                self.jobs += len(group)
        except BaseException as exc:
            # The commit gave up before settling every job (a lock it could not take, say):
            # each job it left without an outcome gets its error, never a None result.
            for j in group:
                if j.error is None and not j.kept:
                    j.result = None
                    j.error = exc
            if not isinstance(exc, Exception):
                raise


def commit_group(
    group: list[Job],
    attempt: Callable[[bool], object],
    alone: Callable[[Exception], bool] = lambda exc: isinstance(exc, Conflict),
) -> bool:
    """Run a group's transaction through `attempt(nested)`, settling every job; True once committed.

    The jobs first run straight in one transaction (`nested` false). If one of several fails
    with an error that may be its own (`alone`: a Conflict by default), the transaction is
    dropped and the group reruns with each job in a nested transaction (`nested` true) whose
    failure stays its own job's error. Any other exception is the error of every job not
    settled otherwise.
    """
    nested = False
    while True:
        try:
            attempt(nested)
        except Exception as exc:
            if not nested and len(group) > 1 and alone(exc):
                nested = True  # find out whose write fails; the others still commit
                continue
            for job in group:
                if job.error is None:
                    job.error, job.result = exc, None
            return False
        except BaseException as exc:
            for job in group:
                job.error, job.result = exc, None
            raise
        return True
