"""Several processes writing one store while another follows it by position (reusable).

`check_multiprocess(url)` runs, in real subprocesses (spawn context): `writers` processes each
appending to its own stream and, with `expected_seq`, to one shared stream (a conflict is retried
after re-reading the stream's end), each reporting the ids it saw acknowledged; and one reader
process following `read_all` positions until it has seen every acknowledged event. Afterwards:
every acknowledged event is stored exactly once, every stream's seqs are gapless, the hash chains
verify, and the reader saw every event exactly once, in position order.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from multiprocessing.queues import Queue
from typing import Any

import eventlog as el

SHARED = "shared"


def _writer(url: str, w: int, rounds: int, start: Any, out: Queue[Any]) -> None:
    acked: list[str] = []
    conflicts = 0
    with el.open(url, durability="batch") as store:
        start.wait()
        for i in range(rounds):
            (rec,) = store.append(f"own{w}", [el.ModelInput.from_text(f"w{w} own {i}")])
            acked.append(rec.id)
            event = el.Event(data=el.ModelInput.from_text(f"w{w} shared {i}"))
            while True:
                info = store.stream_info(SHARED) if store.exists(SHARED) else None
                expected = info.last_seq if info else el.NO_STREAM
                try:
                    (rec,) = store.append(SHARED, [event], expected_seq=expected)
                except el.ConcurrencyError:
                    conflicts += 1
                    continue
                acked.append(rec.id)
                break
    out.put(("writer", w, acked, conflicts))


def _reader(url: str, total: int, timeout: float, out: Queue[Any]) -> None:
    seen: list[tuple[int, str]] = []
    deadline = time.monotonic() + timeout
    with el.open(url) as store:
        position = 0
        while len(seen) < total and time.monotonic() < deadline:
            page = list(store.read_all(after=position, limit=200))
            if not page:
                time.sleep(0.002)
                continue
            seen.extend((e.position, e.id) for e in page)
            position = page[-1].position
    out.put(("reader", 0, seen, 0))


def check_multiprocess(
    url: str, *, writers: int = 4, rounds: int = 40, timeout: float = 60.0
) -> dict[str, int]:
    """Run the scenario against `url` (a fresh store) and assert its guarantees; return counts."""
    el.open(url).close()  # create the store once, before the processes race to open it
    ctx = mp.get_context("spawn")
    out: Queue[Any] = ctx.Queue()
    start = ctx.Event()
    total = writers * rounds * 2
    procs = [ctx.Process(target=_reader, args=(url, total, timeout, out))]
    procs += [
        ctx.Process(target=_writer, args=(url, w, rounds, start, out)) for w in range(writers)
    ]
    for p in procs:
        p.start()
    start.set()
    results = [out.get(timeout=timeout) for _ in procs]
    for p in procs:
        p.join(timeout=timeout)
        assert p.exitcode == 0, f"process {p.name} exited with {p.exitcode}"
    acked = [i for kind, _, ids, _ in results if kind == "writer" for i in ids]
    conflicts = sum(c for kind, _, _, c in results if kind == "writer")
    (seen,) = [ids for kind, _, ids, _ in results if kind == "reader"]
    with el.open(url) as store:
        stored = list(store.read_all())
        stored_ids = [e.id for e in stored]
        assert len(acked) == total
        assert sorted(stored_ids) == sorted(acked), "acknowledged events missing or duplicated"
        for info in store.streams():
            seqs = [e.seq for e in store.read(info.stream)]
            assert seqs == list(range(1, len(seqs) + 1)), f"gap in {info.stream}"
        assert store.stream_info(SHARED).last_seq == writers * rounds
        assert store.verify().ok
    positions = [p for p, _ in seen]
    assert positions == sorted(set(positions)), "reader saw positions out of order or twice"
    assert [i for _, i in seen] == stored_ids, "reader missed events or saw them out of order"
    return {"events": total, "conflicts": conflicts}
