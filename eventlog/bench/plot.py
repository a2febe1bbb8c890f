"""The plot of a run (matplotlib, an optional import): throughput, windows, storage growth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eventlog.bench.common import optional_module
from eventlog.errors import BackendUnavailableError

_THROUGHPUT = (
    ("append.single", "1 event, fsync"),
    ("append.batch100", "100-event batches"),
    ("read.stream", "read a stream"),
)


def plot(result: dict[str, Any], path: Path) -> None:
    """Write a PNG: throughput per backend; window latency vs history; storage vs LangGraph."""
    matplotlib: Any = optional_module("matplotlib")
    if matplotlib is None:
        raise BackendUnavailableError(
            "--plot needs matplotlib, which is not installed "
            "(pip install 'agent-eventlog[benchmarks]')"
        )
    matplotlib.use("Agg")
    plt: Any = optional_module("matplotlib.pyplot")
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4.4))
    _throughput(ax1, result)
    _windows(ax2, result)
    _storage(ax3, result)
    machine = result["machine"]
    fig.suptitle(
        f"eventlog bench ({result['sizes']['name']}) on {machine['cpus']} CPUs, "
        f"load {result['load_before'][0] if result['load_before'] else '?'}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=70)
    plt.close(fig)


def _by_key(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["key"]: f for f in result["figures"]}


def _throughput(ax: Any, result: dict[str, Any]) -> None:
    figs = _by_key(result)
    backends = [b for b in result["backends"] if f"read.stream.{b}" in figs]
    width = 0.8 / (2 * len(_THROUGHPUT))
    for i, (prefix, label) in enumerate(_THROUGHPUT):
        for j, who in enumerate(("eventlog", "limit")):
            values = []
            for b in backends:
                f = figs.get(f"{prefix}.{b}")
                v = None if f is None else (f["value"] if who == "eventlog" else f["limit"])
                values.append((v or 0) / 1e3)
            xs = [k + (2 * i + j) * width for k in range(len(backends))]
            ax.bar(
                xs,
                values,
                width,
                label=f"{label} ({who})",
                alpha=1.0 if who == "eventlog" else 0.45,
                color=f"C{i}",
            )
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(backends))], backends)
    ax.set_yscale("log")
    ax.set_ylabel("thousand events/s (log)")
    ax.set_title("throughput per backend (pale: raw limit)", fontsize=9)
    ax.legend(fontsize=6)


def _windows(ax: Any, result: dict[str, Any]) -> None:
    figs = _by_key(result)
    ax.set_title("window latency vs history length", fontsize=9)
    drawn = False
    points = [
        (n, figs[k]["value"])
        for n in (200, 1_000, 10_000, 100_000)
        if (k := f"window.new_turn.{n}") in figs and figs[k]["value"] is not None
    ]
    if points:
        ax.plot(*zip(*points, strict=True), marker="o", label="new turn (incremental)")
        drawn = True
    full = figs.get("window.full_vs_trim")
    n = result["sizes"]["read_events"]
    if full and full["value"] is not None:
        ax.scatter(
            [n], [full["value"]], marker="s", label="whole window from scratch (no compactions)"
        )
        drawn = True
    if full and full["peers"].get("langchain") is not None:
        ax.scatter(
            [n],
            [full["peers"]["langchain"]],
            marker="x",
            color="red",
            label="LangChain trim_messages",
        )
        drawn = True
    if not drawn:
        ax.text(
            0.5,
            0.5,
            "no window figures in this run",
            ha="center",
            va="center",
            transform=ax.transAxes,
            color="gray",
        )
    ax.set_yscale("log")
    ax.set_xscale("log")
    ax.set_xlabel("history (events)")
    ax.set_ylabel("ms")
    if drawn:
        ax.legend(fontsize=7)


def _storage(ax: Any, result: dict[str, Any]) -> None:
    growth = result.get("series", {}).get("growth", {})
    ax.set_title("store size vs history length", fontsize=9)
    for name, points in growth.items():
        if points:
            xs = [p["messages"] for p in points]
            ys = [p["bytes"] / 1e6 for p in points]
            ax.plot(xs, ys, marker="o", label=name)
    if not growth:
        ax.text(0.5, 0.5, "peers not measured", ha="center", va="center", transform=ax.transAxes)
    else:
        ax.legend(fontsize=7)
    ax.set_yscale("log")
    ax.set_xlabel("messages")
    ax.set_ylabel("MB of database pages (log)")
