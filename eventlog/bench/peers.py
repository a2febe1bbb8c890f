"""The peers a user would pick instead, measured in the same run on the same conversation.

Each peer is an optional import (``pip install 'agent-eventlog[benchmarks]'``), never a runtime
dependency; a peer that is not installed is skipped and reported as missing.

- ``eventsourcing``: the `eventsourcing` library's SQLite application recorder, storing each
  event's MessagePack as a stored event's state (its defaults: WAL, autocommit transactions);
  replay selects them and decodes with the same typed msgspec decoder as eventlog's limit.
- ``openai-agents``: the OpenAI Agents SDK's ``SQLiteSession``; each event becomes the Responses
  API items it stands for (user/assistant messages, function calls, function call outputs) and
  is added in one ``add_items`` call; replay is ``get_items()``.
- ``langgraph``: a LangGraph ``StateGraph`` over ``MessagesState`` (agent node, tools node)
  compiled with ``SqliteSaver``: each turn is one ``invoke`` and every step checkpoints the whole
  message list, as a graph does.
- ``langchain``: ``trim_messages`` (strategy "last") over the conversation as LangChain messages.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import eventlog as el
from eventlog.bench.common import (
    msgpack_decoder,
    msgpack_encoder,
    optional_module,
    rate,
    rate_until_closed,
    sqlite_data_bytes,
)
from eventlog.events import EventData

PEERS = {
    "eventsourcing": "eventsourcing.sqlite",
    "openai-agents": "agents",
    "langgraph": "langgraph.checkpoint.sqlite",
    "langchain": "langchain_core.messages",
}
"""Peer name -> the module whose import tells whether it is installed."""


def available() -> dict[str, str | None]:
    """Each peer's installed version (None when it is not installed)."""
    dists = {
        "eventsourcing": "eventsourcing",
        "openai-agents": "openai-agents",
        "langgraph": "langgraph",
        "langchain": "langchain-core",
    }
    from importlib import metadata

    out: dict[str, str | None] = {}
    for peer, module in PEERS.items():
        if optional_module(module) is None:
            out[peer] = None
            continue
        try:
            out[peer] = metadata.version(dists[peer])
        except metadata.PackageNotFoundError:  # pragma: no cover - odd install
            out[peer] = "?"
    return out


def _text(d: EventData) -> str:
    """The main text of an event (what a chat message would carry)."""
    if isinstance(d, el.ModelInput):
        return "\n".join(s.text for s in d.sections)
    if isinstance(d, el.ModelOutput):
        return "".join(getattr(p, "text", "") for p in d.parts)
    if isinstance(d, el.SystemInstructionSet):
        return d.text
    if isinstance(d, el.Compaction):
        return d.summary
    if isinstance(d, el.ToolsetDefined):
        return ", ".join(t.name for t in d.tools)
    return ""


# -- eventsourcing -------------------------------------------------------------------------------


class Eventsourcing:
    """The `eventsourcing` library's SQLite application recorder on a fresh file."""

    def __init__(self, path: Path) -> None:
        sqlite_mod: Any = optional_module("eventsourcing.sqlite")
        self._persistence: Any = optional_module("eventsourcing.persistence")
        self.datastore = sqlite_mod.SQLiteDatastore(db_name=str(path))
        self.recorder = sqlite_mod.SQLiteApplicationRecorder(self.datastore)
        self.recorder.create_table()
        self.originator = uuid.uuid4()

    def append(self, data: Sequence[EventData], batch: int, until_closed: bool = False) -> float:
        """Events/s inserting the events `batch` per call (one transaction each).

        With `until_closed`, the clock stops once the datastore is closed (as eventlog's).
        """
        stored_event = self._persistence.StoredEvent
        encode = msgpack_encoder()
        insert = self.recorder.insert_events
        originator = self.originator
        n = len(data)
        t0 = time.perf_counter()
        for i in range(0, n, batch):
            insert(
                [
                    stored_event(
                        originator_id=originator,
                        originator_version=j + 1,
                        topic="eventlog.bench:Event",
                        state=encode(data[j]),
                    )
                    for j in range(i, min(i + batch, n))
                ]
            )
        value = n / (time.perf_counter() - t0)
        return rate_until_closed(value, n, self.close) if until_closed else value

    def read(self, n: int) -> float:
        """Events/s selecting the aggregate's events and decoding their states."""
        decode = msgpack_decoder()

        def run() -> None:
            out = [decode(e.state) for e in self.recorder.select_events(self.originator)]
            assert len(out) == n

        return rate(n, run)

    def close(self) -> None:
        """Close the datastore."""
        self.datastore.close()


# -- OpenAI Agents SDK ---------------------------------------------------------------------------


def items_in(data: Sequence[EventData]) -> int:
    """How many session items the events stand for (a "last N events" read asks for these)."""
    return sum(len(openai_items(d)) for d in data)


def openai_items(d: EventData) -> list[dict[str, Any]]:
    """The Responses API input items an event stands for."""
    if isinstance(d, el.ModelInput):
        return [{"role": "user", "content": _text(d)}]
    if isinstance(d, el.ModelOutput):
        items: list[dict[str, Any]] = [{"role": "assistant", "content": _text(d)}]
        items += [
            {
                "type": "function_call",
                "call_id": c.id,
                "name": c.name,
                "arguments": c.raw_arguments,
            }
            for c in d.tool_calls
        ]
        return items
    if isinstance(d, el.ToolResults):
        return [
            {"type": "function_call_output", "call_id": r.call_id, "output": r.content}
            for r in d.results
        ]
    return [{"role": "system", "content": _text(d)}]


class OpenAISession:
    """The OpenAI Agents SDK's SQLiteSession on a fresh file."""

    def __init__(self, path: Path) -> None:
        agents: Any = optional_module("agents")
        self.path = path
        self.session = agents.SQLiteSession("bench", db_path=str(path))

    def append(self, data: Sequence[EventData], batch: int, until_closed: bool = False) -> float:
        """Events/s adding each `batch` events' items in one add_items call.

        With `until_closed`, the clock stops once the session is closed (as eventlog's).
        """
        chunks = []
        for i in range(0, len(data), batch):
            chunk: list[dict[str, Any]] = []
            for d in data[i : i + batch]:
                chunk += openai_items(d)
            chunks.append(chunk)

        async def run() -> float:
            add = self.session.add_items
            t0 = time.perf_counter()
            for chunk in chunks:
                await add(chunk)
            return len(data) / (time.perf_counter() - t0)

        value = asyncio.run(run())
        return rate_until_closed(value, len(data), self.close) if until_closed else value

    def read(self, n: int) -> float:
        """Events/s reading the whole session (`n` events' items)."""

        async def run() -> float:
            t0 = time.perf_counter()
            items = await self.session.get_items()
            assert items
            return n / (time.perf_counter() - t0)

        return asyncio.run(run())

    def last_n_us(self, n: int, calls: int) -> float:
        """Mean microseconds of get_items(limit=n) (n items: see `items_in`)."""

        async def run() -> float:
            get = self.session.get_items
            await get(limit=n)
            t0 = time.perf_counter()
            for _ in range(calls):
                await get(limit=n)
            return (time.perf_counter() - t0) / calls * 1e6

        return asyncio.run(run())

    def growth(
        self, turns: Sequence[Sequence[EventData]], points: Sequence[int]
    ) -> list[dict[str, float]]:
        """Add the conversation turn by turn (one add_items per event); size at each point.

        The size is the database's pages (`sqlite_data_bytes`), as for eventlog's curve.
        """

        async def run() -> list[dict[str, float]]:
            out: list[dict[str, float]] = []
            targets = list(points)
            total = 0
            for turn in turns:
                t0 = time.perf_counter()
                for d in turn:
                    await self.session.add_items(openai_items(d))
                elapsed = time.perf_counter() - t0
                total += messages_in(turn)
                while targets and total >= targets[0]:
                    targets.pop(0)
                    out.append(
                        {
                            "messages": total,
                            "bytes": sqlite_data_bytes(self.path),
                            "turn_ms": elapsed * 1e3,
                        }
                    )
                if not targets:
                    break
            return out

        return asyncio.run(run())

    def close(self) -> None:
        """Close the session's connections."""
        self.session.close()


# -- turns and chat messages ---------------------------------------------------------------------


def conversation_turns(data: Sequence[EventData]) -> list[list[EventData]]:
    """The conversation split into turns: each starts at a model input."""
    turns: list[list[EventData]] = []
    for d in data:
        if isinstance(d, el.ModelInput) or not turns:
            turns.append([])
        turns[-1].append(d)
    return turns


def messages_in(turn: Sequence[EventData]) -> int:
    """Chat messages a turn is: one per input, output and tool result, one per other event."""
    return sum(len(d.results) if isinstance(d, el.ToolResults) else 1 for d in turn)


def langchain_messages(d: EventData) -> list[Any]:
    """The LangChain messages an event stands for."""
    messages: Any = optional_module("langchain_core.messages")
    if isinstance(d, el.ModelInput):
        return [messages.HumanMessage(content=_text(d))]
    if isinstance(d, el.ModelOutput):
        calls = [
            {"name": c.name, "args": dict(c.arguments or {}), "id": c.id} for c in d.tool_calls
        ]
        return [messages.AIMessage(content=_text(d), tool_calls=calls)]
    if isinstance(d, el.ToolResults):
        return [messages.ToolMessage(content=r.content, tool_call_id=r.call_id) for r in d.results]
    return [messages.SystemMessage(content=_text(d))]


# -- LangGraph -----------------------------------------------------------------------------------


def langgraph_growth(
    path: Path, turns: Sequence[Sequence[EventData]], points: Sequence[int]
) -> tuple[list[dict[str, float]], float | None]:
    """Run the conversation through a checkpointed graph, one invoke per turn.

    Returns the database size (its pages, `sqlite_data_bytes`) and the latency of the turn at
    each history length in `points` (messages), and the milliseconds to load the final state
    (None if no point was reached).
    """
    saver_mod: Any = optional_module("langgraph.checkpoint.sqlite")
    graph_mod: Any = optional_module("langgraph.graph")
    conn = sqlite3.connect(str(path), check_same_thread=False)
    saver = saver_mod.SqliteSaver(conn)
    pending: dict[str, list[Any]] = {}

    def agent(state: Any) -> dict[str, Any]:
        return {"messages": pending["agent"]}

    def tools(state: Any) -> dict[str, Any]:
        return {"messages": pending["tools"]}

    graph = graph_mod.StateGraph(graph_mod.MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_edge(graph_mod.START, "agent")
    graph.add_edge("agent", "tools")
    graph.add_edge("tools", graph_mod.END)
    app = graph.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "bench"}}
    out: list[dict[str, float]] = []
    targets = list(points)
    total = 0
    load_ms: float | None = None
    try:
        for turn in turns:
            head = [m for d in turn[:1] for m in langchain_messages(d)]
            pending["agent"] = [m for d in turn[1:2] for m in langchain_messages(d)]
            pending["tools"] = [m for d in turn[2:] for m in langchain_messages(d)]
            t0 = time.perf_counter()
            app.invoke({"messages": head}, config)
            elapsed = time.perf_counter() - t0
            total += messages_in(turn)
            while targets and total >= targets[0]:
                targets.pop(0)
                size = sqlite_data_bytes(path)
                out.append({"messages": total, "bytes": size, "turn_ms": elapsed * 1e3})
            if not targets:
                break
        if out:
            t0 = time.perf_counter()
            state = app.get_state(config)
            load_ms = (time.perf_counter() - t0) * 1e3
            assert len(state.values["messages"]) >= out[-1]["messages"] - 2
    finally:
        conn.close()
    return out, load_ms


# -- LangChain trim_messages ---------------------------------------------------------------------


def trim_messages_timed(
    data: Sequence[EventData], count_text: Callable[[str], int], max_tokens: int, calls: int = 3
) -> tuple[float, int] | None:
    """(best ms, tokens kept) of trim_messages(strategy="last") over the conversation's messages.

    None without langchain-core. The token counter is eventlog's (`count_text` on each message's
    content, + 4 a message), so a window figure and this one count the same tokens; the kept
    tokens let the caller check that both windows hold as much (`common.check_same_tokens`).
    """
    messages: Any = optional_module("langchain_core.messages")
    if messages is None:
        return None
    history = [m for d in data for m in langchain_messages(d)]

    def one(message: Any) -> int:
        content = message.content
        return count_text(content if isinstance(content, str) else str(content)) + 4

    def counter(messages: Any) -> int:
        # trim_messages calls the counter with a list of messages.
        if isinstance(messages, list):
            return sum(map(one, messages))
        return one(messages)

    best = float("inf")
    kept: list[Any] = []
    for _ in range(calls):
        t0 = time.perf_counter()
        kept = messages.trim_messages(
            history, max_tokens=max_tokens, token_counter=counter, strategy="last"
        )
        best = min(best, time.perf_counter() - t0)
        assert kept
    return best * 1e3, counter(kept)
