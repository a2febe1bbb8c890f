"""A process-wide write lock on a file (`flock`), taken with a time limit.

Directory backends serialize their writers across processes with it. `flock` belongs to an open
file description, so the kernel releases it when the process that holds it dies (kill -9
included), and a stopped holder (SIGSTOP, a debugger) makes the others give up after the limit
instead of waiting for ever.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

from eventlog.backends.base import seconds_option
from eventlog.errors import BackendUnavailableError

DEFAULT_LOCK_TIMEOUT = 10.0
"""Seconds a writer waits for another process's write lock, unless the store's URL says."""
_FIRST_DELAY = 0.0005
_MAX_DELAY = 0.05


def timeout_option(raw: str | None) -> float:
    """The `lock_timeout` URL option's seconds (the default when not given); UsageError if bad."""
    return DEFAULT_LOCK_TIMEOUT if raw is None else seconds_option("lock_timeout", raw)


def open_lock_file(path: Path) -> int:
    """A descriptor of the lock file at `path`, created if missing (read-only if it must be)."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except PermissionError:
        # A store on read-only media, or one this user may not write: flock works on a
        # read-only descriptor, and the write itself will say what is wrong.
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)


def acquire(fd: int, timeout: float, path: Path, store: str) -> None:
    """Take the exclusive lock on `fd`, polling with back-off for at most `timeout` seconds.

    Raises BackendUnavailableError naming the lock file once the time is up.
    """
    deadline = time.monotonic() + timeout
    delay = _FIRST_DELAY
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            raise BackendUnavailableError(
                f"{store}: another process holds the write lock ({path}); gave up after "
                f"{timeout:g}s (raise it with ?lock_timeout=seconds)"
            )
        time.sleep(delay)
        delay = min(delay * 2, _MAX_DELAY)


def release(fd: int) -> None:
    """Give the lock on `fd` back."""
    fcntl.flock(fd, fcntl.LOCK_UN)
