"""Subprocess for the crash harness: appends durably forever, printing each acknowledged batch.

Usage: python tests/crash_worker.py URL STREAM SEED [DURABILITY]
Each line printed is `batch_id size id1,id2,...`, written only after append returned.
"""

from __future__ import annotations

import random
import sys

import eventlog as el


def main() -> None:
    url, stream, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    durability = sys.argv[4] if len(sys.argv) > 4 else "fsync"
    rng = random.Random(seed)
    store = el.open(url, durability=durability)
    batch_no = 0
    while True:
        size = rng.choice((1, 1, 2, 5))
        batch_id = f"{seed}-{batch_no}"
        events = [
            el.Event(
                data=el.ModelInput.from_text(f"{batch_id}/{i} " + "x" * rng.randrange(10, 3000)),
                meta={"batch": batch_id, "size": size},
            )
            for i in range(size)
        ]
        store.append(stream, events)
        sys.stdout.write(f"{batch_id} {size} {','.join(e.id for e in events)}\n")
        sys.stdout.flush()
        batch_no += 1


if __name__ == "__main__":
    main()
