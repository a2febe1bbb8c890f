"""A local fake of the OpenAI and Anthropic HTTP APIs, for tests with the official SDKs.

`FakeProvider` serves `/v1/chat/completions`, `/v1/responses` and `/v1/messages` on 127.0.0.1 (a
free port), records each request, and answers with the canned JSON body or SSE text set for that
path with `reply()`, picked by the request's `stream` flag. Use it as a context manager, or through
the `fake_provider` fixture function (register it in a test module with
`fake_provider = pytest.fixture(fake_provider_fixture)`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

PATHS = ("/v1/chat/completions", "/v1/responses", "/v1/messages")


# Canned successful answers of each API (a one-word "ok" reply).
CHAT_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-x",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "ok"},
        }
    ],
}
RESPONSES_REPLY = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1,
    "model": "gpt-x",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}],
        }
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
}
ANTHROPIC_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


@dataclass
class Recorded:
    """One request the fake received."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any


@dataclass
class Reply:
    """What the fake answers on one path."""

    json: Any = None
    sse: str | None = None
    status: int = 200


def sse_text(events: list[Any], *, named: bool = False, done: bool = False) -> str:
    """SSE text from event dicts (with `event:` lines when `named`; `data: [DONE]` when `done`)."""
    out = []
    for e in events:
        head = f"event: {e['type']}\n" if named else ""
        out.append(f"{head}data: {orjson.dumps(e).decode()}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out)


@dataclass
class FakeProvider:
    """A threaded HTTP server answering with canned provider responses."""

    requests: list[Recorded] = field(default_factory=list)
    replies: dict[str, Reply] = field(default_factory=dict)
    handlers: dict[str, Callable[[Recorded], Reply]] = field(default_factory=dict)
    """Per path: a function of the request that makes the answer (instead of a canned reply)."""
    clients: list[Any] = field(default_factory=list)
    """SDK clients made for this fake; closed with it (no unclosed sockets)."""
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT` (the OpenAI SDK wants `url + "/v1"`, Anthropic's `url`)."""
        assert self._server is not None, "not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def reply(
        self, path: str, *, json: Any = None, sse: str | None = None, status: int = 200
    ) -> None:
        """Set the canned answer for a path: `json` for plain requests, `sse` for streams."""
        self.replies[path] = Reply(json=json, sse=sse, status=status)

    def respond(self, path: str, handler: Callable[[Recorded], Reply]) -> None:
        """Answer requests on a path with `handler(request)` (e.g. an error for a long one)."""
        self.handlers[path] = handler

    def start(self) -> FakeProvider:
        """Listen on a free port in a daemon thread."""
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?", 1)[0]
                body = orjson.loads(raw) if raw else None
                fake.requests.append(
                    Recorded(
                        "POST", path, {k.lower(): v for k, v in self.headers.items()}, raw, body
                    )
                )
                handler = fake.handlers.get(path)
                reply = handler(fake.requests[-1]) if handler else fake.replies.get(path)
                if reply is None:
                    self._send(
                        404, "application/json", b'{"error": {"message": "no canned reply"}}'
                    )
                elif isinstance(body, dict) and body.get("stream") and reply.status == 200:
                    assert reply.sse is not None, f"no canned SSE for {path}"
                    self._send(reply.status, "text/event-stream", reply.sse.encode())
                else:
                    self._send(reply.status, "application/json", orjson.dumps(reply.json))

            def _send(self, status: int, content_type: str, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the clients made for it and shut the server down."""
        for client in self.clients:
            client.close()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def last_body(self) -> Any:
        """The JSON body of the last request."""
        return self.requests[-1].body


def fake_provider_fixture() -> Iterator[FakeProvider]:
    """Fixture body: a started FakeProvider, stopped after the test."""
    with FakeProvider() as fake:
        yield fake


def openai_client(fake: FakeProvider) -> Any:
    """An `openai.OpenAI` client pointed at the fake (no retries)."""
    import openai

    client = openai.OpenAI(base_url=fake.url + "/v1", api_key="test", max_retries=0)
    fake.clients.append(client)
    return client


def anthropic_client(fake: FakeProvider) -> Any:
    """An `anthropic.Anthropic` client pointed at the fake (no retries)."""
    import anthropic

    client = anthropic.Anthropic(base_url=fake.url, api_key="test", max_retries=0)
    fake.clients.append(client)
    return client
