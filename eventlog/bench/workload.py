"""One seeded generator of realistic agent conversations, shared by every benchmark.

A conversation is a system instruction and a toolset, then turns: a user input (English or
CJK), a model output with text and 1-3 tool calls, their results (200 B to 20 KB of tool
output), and now and then a compaction summarising an earlier range. The same seed always gives
the same events, so every figure in one run is measured on the same data.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import eventlog as el

_WORDS = (
    "the model reads the file and runs the tests then reports which assertion failed and why "
    "agent tool call result context window budget token stream event replay fork snapshot "
    "database index query latency throughput commit durable append projection summary"
).split()
_CJK = "我们需要检查这个函数的返回值是否正确然后运行测试并报告结果上下文窗口令牌预算"
_TOOLS = ("read_file", "run_tests", "search_code", "write_file", "shell")
_MODELS = (
    el.Invocation(provider="anthropic", specification="messages", model="claude-sonnet-4-5"),
    el.Invocation(provider="openai", specification="chat.completions", model="gpt-4.1"),
)


def _prose(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n_words))


def _cjk(rng: random.Random, n_chars: int) -> str:
    return "".join(rng.choice(_CJK) for _ in range(n_chars))


def _tool_output(rng: random.Random) -> str:
    size = int(rng.lognormvariate(7.45, 1.0))  # median ~1.7 KB
    size = max(200, min(size, 20_000))
    lines = []
    total = 0
    while total < size:
        line = f"{rng.randrange(1, 999):>4}: {_prose(rng, rng.randrange(4, 14))}"
        lines.append(line)
        total += len(line) + 1
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


def conversation_events(n: int, seed: int = 0) -> list[el.EventData]:
    """Exactly n events of one realistic agent conversation (same seed, same events)."""
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


def conversation(n: int, seed: int = 0) -> list[el.Event]:
    """n events wrapped in envelopes with fresh ids (for append benchmarks)."""
    return [el.Event(data=d) for d in conversation_events(n, seed)]


if __name__ == "__main__":
    import msgspec

    events = conversation_events(10_000)
    sizes = [len(msgspec.msgpack.encode(e)) for e in events]
    print(f"{len(events)} events, mean {sum(sizes) / len(sizes):.0f} B msgpack")
