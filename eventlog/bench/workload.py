"""One seeded generator of realistic agent conversations, shared by every benchmark.

A conversation is a system instruction and a toolset, then turns: a user input (English or
CJK), a model output with text and 1-3 tool calls, their results (200 B to 20 KB of tool
output), and now and then a compaction summarising an earlier range. The same seed always gives
the same events, so every figure in one run is measured on the same data.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator, Sequence

import eventlog as el

_WORDS = (
    "the model reads the file and runs the tests then reports which assertion failed and why "
    "agent tool call result context window budget token stream event replay fork snapshot "
    "database index query latency throughput commit durable append projection summary"
).split()
_CJK = "我们需要检查这个函数的返回值是否正确然后运行测试并报告结果上下文窗口令牌预算"
_WORD_BY_BYTE = tuple(_WORDS[i % len(_WORDS)] for i in range(256))
_CJK_BY_BYTE = tuple(_CJK[i % len(_CJK)] for i in range(256))
_TOOLS = ("read_file", "run_tests", "search_code", "write_file", "shell")
_MODELS = (
    el.Invocation(provider="anthropic", specification="messages", model="claude-sonnet-4-5"),
    el.Invocation(provider="openai", specification="chat.completions", model="gpt-4.1"),
)


def _words(rng: random.Random, n: int) -> list[str]:
    # One random byte per word, mapped through a 256-entry table: C-level speed.
    return list(map(_WORD_BY_BYTE.__getitem__, rng.randbytes(n)))


def _prose(rng: random.Random, n_words: int) -> str:
    return " ".join(_words(rng, n_words))


def _cjk(rng: random.Random, n_chars: int) -> str:
    return "".join(map(_CJK_BY_BYTE.__getitem__, rng.randbytes(n_chars)))


def _tool_output(rng: random.Random) -> str:
    size = int(rng.lognormvariate(7.45, 1.0))  # median ~1.7 KB
    size = max(200, min(size, 20_000))
    lines = []
    total = 0
    while total < size:
        # Draw a block of lines at once: line numbers, words per line (4-13), words.
        n_lines = (size - total) // 50 + 2
        shape = rng.randbytes(3 * n_lines)
        words = _words(rng, 13 * n_lines)
        i = 0
        for j in range(n_lines):
            count = 4 + shape[3 * j] % 10
            number = 1 + (shape[3 * j + 1] << 8 | shape[3 * j + 2]) % 998
            line = f"{number:>4}: {' '.join(words[i : i + count])}"
            i += count
            lines.append(line)
            total += len(line) + 1
            if total >= size:
                break
    return "\n".join(lines)[:size]


def toolset() -> el.ToolsetDefined:
    """The benchmark toolset."""
    return el.ToolsetDefined(
        tools=tuple(
            el.ToolSpec(
                name=name,
                description=f"{name.replace('_', ' ')} in the workspace",
                parameters={
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "args": {"type": "string"}},
                    "required": ["path"],
                },
            )
            for name in _TOOLS
        )
    )


def _turn(rng: random.Random, turn: int) -> Iterator[el.EventData]:
    if rng.random() < 0.15:
        text = _cjk(rng, rng.randrange(20, 200))
    else:
        text = _prose(rng, rng.randrange(10, 120))
    yield el.ModelInput(
        sections=(
            el.Section(
                text=text,
                title="request",
                summary=text[: max(10, len(text) // 4)],
                gist=text[:10],
            ),
        )
    )
    calls = tuple(
        el.ToolCall.parse(
            f"call_{turn}_{i}",
            name := rng.choice(_TOOLS),
            f'{{"path": "src/module_{rng.randrange(100)}.py", "args": "{name} --verbose"}}',
        )
        for i in range(rng.choice((1, 1, 2, 3)))
    )
    invocation = rng.choice(_MODELS)
    yield el.ModelOutput(
        parts=(el.TextPart(text=_prose(rng, rng.randrange(15, 80))),),
        tool_calls=calls,
        invocation=invocation,
        usage=el.Usage(
            prompt_tokens=1000 + turn * 400,
            completion_tokens=rng.randrange(50, 400),
            cached_prompt_tokens=turn * 300,
        ),
        stop_reason="tool_use",
    )
    results = []
    for call in calls:
        output = _tool_output(rng)
        failed = rng.random() < 0.05
        results.append(
            el.ToolResult(
                call_id=call.id,
                tool_name=call.name,
                status="failed" if failed else "success",
                content=output,
                summary=output[:200],
                gist=output[:40],
                elapsed_ms=round(rng.uniform(1, 900), 3),
            )
        )
    yield el.ToolResults(results=tuple(results))


_cache: dict[int, list[el.EventData]] = {}
_cache_lock = threading.Lock()


def conversation_events(n: int, seed: int = 0) -> list[el.EventData]:
    """Exactly n events of one realistic agent conversation (same seed, same events).

    A shorter conversation is a prefix of a longer one with the same seed; the longest generated
    so far is kept per seed (events are immutable), so asking again costs a slice.
    """
    with _cache_lock:
        cached = _cache.get(seed)
        if cached is None or len(cached) < n:
            cached = _cache[seed] = _generate(n, seed)
        return cached[:n]


def _generate(n: int, seed: int) -> list[el.EventData]:
    rng = random.Random(seed)
    out: list[el.EventData] = [
        el.SystemInstructionSet(text="You are a careful coding agent. " + _prose(rng, 60)),
        toolset(),
    ]
    turn = 0
    while len(out) < n:
        turn += 1
        out.extend(_turn(rng, turn))
        if turn % 40 == 0 and len(out) > 20:
            out.append(
                el.Compaction(
                    first_seq=3,
                    last_seq=len(out) - 10,
                    summary=_prose(rng, 150),
                    summarizer="benchmark",
                )
            )
    return out[:n]


def without_compactions(data: Sequence[el.EventData]) -> list[el.EventData]:
    """The events with every compaction left out, for comparing windows with a peer's.

    eventlog's windows put a compaction's summary in place of the events it covers; a message
    list trimmed by a peer keeps those events, so both are given a history without compactions.
    """
    return [d for d in data if not isinstance(d, el.Compaction)]


def conversation(n: int, seed: int = 0) -> list[el.Event]:
    """The first n events wrapped in envelopes with fresh ids (for append benchmarks)."""
    return [el.Event(data=d) for d in conversation_events(n, seed)]


def main() -> None:
    """Print the size of a 10k-event conversation."""
    import msgspec

    events = conversation_events(10_000)
    sizes = [len(msgspec.msgpack.encode(e)) for e in events]
    print(f"{len(events)} events, mean {sum(sizes) / len(sizes):.0f} B msgpack")


if __name__ == "__main__":
    main()
