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
from collections.abc import Callable
from typing import Any

MAX_GROUP = 256
"""At most this many appends share one transaction (bounds the leader's latency)."""
GATHER_SECONDS = 0.0002
"""How long a leader of a synced commit waits for more appends once several shared one."""


class Job:
    """One write waiting for (or done by) a group commit."""

    __slots__ = ("done", "error", "fn", "result", "sync")

    def __init__(self, fn: Callable[[Any], Any], sync: bool) -> None:
        self.fn = fn
        self.sync = sync
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False


class GroupQueue:
    """Leader/follower queue: `run` returns once the group holding its job has committed."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[Job] = []
        self._leading = False
        self._contended = False
        self.commits = 0
        """Transactions committed through this queue."""
        self.jobs = 0
        """Jobs those transactions held."""

    def run(self, fn: Callable[[Any], Any], sync: bool, commit: Callable[[list[Job]], bool]) -> Any:
        """Queue `fn(txn)`; lead groups through `commit(group)` until this job is done.

        `commit` runs the jobs, sets each one's result or error, and says whether it committed.
        """
        job = Job(fn, sync)
        with self._cond:
            self._queue.append(job)
        while True:
            with self._cond:
                while self._leading and not job.done:
                    self._cond.wait()
                if job.done:
                    break
                self._leading = True
                if self._contended and sync:
                    # Writers just woken by the last commit are still encoding their next
                    # append: a moment's wait lets them join this sync instead of the next.
                    self._cond.wait(GATHER_SECONDS)
                group = self._queue[:MAX_GROUP]
                del self._queue[:MAX_GROUP]
                self._contended = len(group) > 1
            try:
                if commit(group):
                    self.commits += 1
                    self.jobs += len(group)
            finally:
                with self._cond:
                    for j in group:
                        j.done = True
                    self._leading = False
                    self._cond.notify_all()
        if job.error is not None:
            raise job.error
        return job.result
