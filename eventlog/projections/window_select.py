"""Selection machinery of the context window: a multi-tree Fenwick index and the strategies.

Every keep/drop unit of the history (an input, an output with the results of its calls, an
earlier system instruction, a compaction summary) sits at a slot (the seq it starts at). For
each unit the index holds four non-negative numbers: `A = live - summary`, `B = summary - gist`,
`G = gist` (ordinary units) and `K = gist` (compaction summaries). A strategy's cost for "units
up to slot s downgraded / dropped" is then a prefix sum, and the first slot that makes the
window fit is found by one descent of the trees: O(log n) whatever the history's length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Strategy = Literal["drop_oldest", "sliding_window", "lod_then_drop", "summary_aware"]
STRATEGIES: Final = ("drop_oldest", "sliding_window", "lod_then_drop", "summary_aware")
"""Strategy names, in order of sophistication; `summary_aware` is the default."""

Vec = tuple[int, int, int, int]
ZERO: Final[Vec] = (0, 0, 0, 0)
EVERYTHING: Final = 1 << 62
"""A slot past every unit: a `Plan` cut there reaches the newest unit, whatever it costs."""

W_LIVE: Final[Vec] = (1, 1, 1, 1)
W_A: Final[Vec] = (1, 0, 0, 0)
W_B: Final[Vec] = (0, 1, 0, 0)
W_GIST_ALL: Final[Vec] = (0, 0, 1, 1)
W_GIST: Final[Vec] = (0, 0, 1, 0)


class Fenwick:
    """Four Fenwick trees over slots 1..cap sharing one index (capacity doubles as needed)."""

    __slots__ = ("cap", "totals", "trees", "values")

    def __init__(self) -> None:
        self.cap = 0
        self.trees: list[list[int]] = [[0], [0], [0], [0]]
        self.values: list[list[int]] = [[0], [0], [0], [0]]
        self.totals = [0, 0, 0, 0]

    def ensure(self, slot: int) -> None:
        """Make room for `slot` (rebuilds in O(cap) when the capacity doubles)."""
        if slot <= self.cap:
            return
        cap = max(64, self.cap)
        while cap < slot:
            cap *= 2
        for k in range(4):
            vals = self.values[k]
            vals.extend([0] * (cap - self.cap))
            tree = list(vals)
            for i in range(1, cap + 1):
                j = i + (i & -i)
                if j <= cap:
                    tree[j] += tree[i]
            self.trees[k] = tree
        self.cap = cap

    def add(self, slot: int, delta: Vec) -> None:
        """Add `delta` to the four values at `slot`."""
        self.ensure(slot)
        for k in range(4):
            d = delta[k]
            if d:
                self.values[k][slot] += d
                self.totals[k] += d
                tree = self.trees[k]
                i = slot
                cap = self.cap
                while i <= cap:
                    tree[i] += d
                    i += i & -i

    def total(self, w: Vec) -> int:
        """Weighted sum of every slot."""
        t = self.totals
        return w[0] * t[0] + w[1] * t[1] + w[2] * t[2] + w[3] * t[3]

    def prefix(self, w: Vec, slot: int) -> int:
        """Weighted sum of slots 1..slot."""
        slot = min(slot, self.cap)
        t0, t1, t2, t3 = self.trees
        out = 0
        while slot > 0:
            out += w[0] * t0[slot] + w[1] * t1[slot] + w[2] * t2[slot] + w[3] * t3[slot]
            slot -= slot & -slot
        return out

    def search(self, w: Vec, x: int) -> int:
        """The smallest slot whose weighted prefix sum is >= x (0 if x <= 0, cap if never)."""
        if x <= 0:
            return 0
        t0, t1, t2, t3 = self.trees
        cap = self.cap
        pos = 0
        step = 1 << max(cap.bit_length() - 1, 0)
        while step:
            nxt = pos + step
            if nxt <= cap:
                v = w[0] * t0[nxt] + w[1] * t1[nxt] + w[2] * t2[nxt] + w[3] * t3[nxt]
                if v < x:
                    pos = nxt
                    x -= v
            step >>= 1
        return min(pos + 1, cap)


@dataclass(frozen=True, slots=True)
class Plan:
    """Where a strategy cut the history.

    Units at slots <= `drop` are dropped (except pinned units, and compaction summaries under
    `summary_aware`); among kept ones, slots <= `gist` are at Gist, slots <= `summary` at
    Summary, the rest Live.
    """

    drop: int = 0
    gist: int = 0
    summary: int = 0
    drop_compactions: int = 0
    """How many of the oldest compaction summaries `summary_aware` also dropped."""

    def level(self, slot: int) -> Literal["live", "summary", "gist"]:
        """The level a kept, unpinned unit at `slot` is shown at."""
        if slot <= self.gist:
            return "gist"
        if slot <= self.summary:
            return "summary"
        return "live"


def plan(
    fen: Fenwick,
    strategy: Strategy,
    available: int,
    *,
    cut: int = 0,
    compactions: list[int] | None = None,
) -> Plan:
    """Choose the cut for `strategy` so the unpinned units cost at most `available` tokens.

    `cut` (sliding_window): the slot of the oldest turn kept; `compactions` (summary_aware):
    the costs of the active compaction summaries, oldest first.
    """
    live = fen.total(W_LIVE)
    if strategy in ("drop_oldest", "sliding_window"):
        base = 0
        if strategy == "sliding_window" and cut > 1:
            base = cut - 1
            if live - fen.prefix(W_LIVE, base) <= available:
                return Plan(drop=base)
        if live <= available:
            return Plan(drop=base)
        return Plan(drop=max(base, fen.search(W_LIVE, live - available)))
    everything = EVERYTHING
    if live <= available:
        return Plan()
    a = fen.totals[0]
    if live - a <= available:
        return Plan(summary=fen.search(W_A, live - available))
    gist_all = fen.total(W_GIST_ALL)
    if gist_all <= available:
        return Plan(summary=everything, gist=fen.search(W_B, live - a - available))
    if strategy == "lod_then_drop":
        return Plan(
            summary=everything,
            gist=everything,
            drop=fen.search(W_GIST_ALL, gist_all - available),
        )
    # summary_aware: compaction summaries go last, oldest first.
    kept = fen.totals[3]
    if kept <= available:
        return Plan(
            summary=everything,
            gist=everything,
            drop=fen.search(W_GIST, gist_all - available),
        )
    n = 0
    for cost in compactions or ():
        if kept <= available:
            break
        kept -= cost
        n += 1
    return Plan(summary=everything, gist=everything, drop=everything, drop_compactions=n)


__all__ = ["EVERYTHING", "STRATEGIES", "Fenwick", "Plan", "Strategy", "plan"]
