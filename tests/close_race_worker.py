"""Closes a store while threads read and append to it, round after round (run as a subprocess).

`python -m tests.close_race_worker URL_PREFIX ROUNDS` prints `ok N` when every thread ended with
results or with StoreClosedError. A crash (closing a connection or transaction another thread
still uses) kills this process, not the test run; any other error is printed and exits 1.
"""

from __future__ import annotations

import sys
import threading
import time

import eventlog as el


def _round(url: str) -> list[BaseException]:
    store = el.open(url, durability="none")
    store.append("s", [el.Event(data=el.Custom(kind="k", data=i)) for i in range(200)])
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                list(store.read_all())
                list(store.read("s", 150))
        except el.StoreClosedError:
            pass
        except BaseException as exc:
            errors.append(exc)

    def appender(n: int) -> None:
        try:
            while not stop.is_set():
                store.append(f"w{n}", [el.Event(data=el.Checkpoint(label="x"))])
        except el.StoreClosedError:
            pass
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    threads += [threading.Thread(target=appender, args=(n,)) for n in range(2)]
    for th in threads:
        th.start()
    time.sleep(0.01)
    store.close()
    stop.set()
    for th in threads:
        th.join(30)
    return errors


def main() -> None:
    prefix, rounds = sys.argv[1], int(sys.argv[2])
    for i in range(rounds):
        url = prefix.replace("{i}", str(i))
        errors = _round(url)
        if errors:
            print(f"round {i}: {[f'{type(e).__name__}: {e}' for e in errors[:3]]}", flush=True)
            sys.exit(1)
    print(f"ok {rounds}", flush=True)


if __name__ == "__main__":
    main()
