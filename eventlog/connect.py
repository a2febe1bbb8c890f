"""Open a store from a URL: `memory://`, `sqlite:///file.db`, `jsonl:///dir`, `lmdb:///dir`, ...

Query parameters set store options (`?durability=batch`); the rest go to the backend. The path is
taken as written: `#` and `%` are part of the name (no fragment, no percent-decoding).
"""

from __future__ import annotations

import importlib
import math
import os
from typing import Any, Literal, Protocol, TypedDict, Unpack
from urllib.parse import parse_qsl, urlsplit

from eventlog.aio import AsyncStore
from eventlog.backends.base import Backend, Durability
from eventlog.codec import Codec
from eventlog.compression import Compression, Mode
from eventlog.encryption import FileKeyStore, KeyStore, RehearsalKeyStore, crypto_module
from eventlog.errors import BackendUnavailableError, UsageError
from eventlog.store import Store, check_poll_interval

BACKENDS: dict[str, tuple[str, str]] = {
    "memory": ("eventlog.backends.memory:MemoryBackend", ""),
    "sqlite": ("eventlog.backends.sqlite:SQLiteBackend", "sqlite"),
    "jsonl": ("eventlog.backends.jsonl:JSONLBackend", ""),
    "lmdb": ("eventlog.backends.lmdb:LMDBBackend", "lmdb"),
    "postgresql": ("eventlog.backends.postgres:PostgresBackend", "postgres"),
    "postgres": ("eventlog.backends.postgres:PostgresBackend", "postgres"),
}
"""URL scheme -> (backend class, extra to install)."""


class StoreOptions(TypedDict, total=False):
    """The store's own options, the same with every backend (a key left out: its default)."""

    durability: Durability | Literal["fsync", "batch", "none"]
    """How far a commit is pushed to disk before `append` returns (default fsync)."""
    max_event_bytes: int | None
    """Largest encoded payload of one event, in bytes, at least 1 (None: 16 MiB)."""
    poll_interval: float
    """Seconds between looks for other processes' commits while subscribed, > 0 (default 0.05)."""
    compression: Mode
    """`zstd` compresses new payloads, `none` stores them plain (default); both read every kind."""
    compress_min_bytes: int | None
    """Shortest payload compressed without a dictionary, >= 0 (None: 512; 0: every payload)."""
    zstd_level: int | None
    """zstd compression level, -7 (fastest) to 22 (None: 3)."""
    keys: str | os.PathLike[str] | None
    """A key directory (made if missing): new events are encrypted with a key per stream kept
    there, outside the store (docs/encryption.md). Shorthand for `key_store=FileKeyStore(dir)`."""
    key_store: KeyStore | None
    """Where the streams' keys are (a keyword only): new events are encrypted with them."""


class OpenOptions(StoreOptions, total=False):
    """The keyword options of `open` and `open_async`: store options, then backend options.

    Each is also a query parameter of the URL, where its value is text (`?search=on`); a keyword
    overrides the query. A backend option is for the backends named: any other backend refuses
    it with UsageError, as it does a name it does not know.
    """

    search: bool | Literal["on", "off", "true", "false", "yes", "no", "1", "0"]
    """sqlite: on creates the store with a full-text index (only when the store is created)."""
    busy_timeout: float
    """sqlite: seconds, >= 0, a write waits for another process's write lock (default 10)."""
    check: Literal["none", "quick"]
    """sqlite: `quick` runs `PRAGMA quick_check` on open (reads the whole file; default none)."""
    lock_timeout: float
    """jsonl, lmdb, postgresql: seconds, >= 0, a write waits for another's lock (default 10)."""
    map_size: int
    """lmdb: initial size of the memory map in bytes, 1 to 2**62 (default 256 MiB; it grows)."""
    max_readers: int
    """lmdb: read transactions open at once, all processes together, 1 to 2**31 - 1 (256)."""
    schema: str
    """postgresql: the schema holding the store, a lowercase identifier (default eventlog)."""
    pool_size: int
    """postgresql: most connections the store's readers hold at once, 1 to 1000 (default 8)."""
    connect_timeout: float
    """postgresql: seconds, >= 0, to wait for the server when connecting (default 10)."""


_STORE_OPTIONS = StoreOptions.__optional_keys__
_TEXT_OPTIONS = {"durability", "compression", "keys"}
_INT_OPTIONS = {"max_event_bytes", "compress_min_bytes", "zstd_level"}


class _FromURL(Protocol):
    def __call__(self, url: str, path: str, options: dict[str, str]) -> Backend: ...


def _backend_class(scheme: str) -> Any:
    try:
        target, extra = BACKENDS[scheme]
    except KeyError:
        known = ", ".join(f"{s}://" for s in BACKENDS)
        raise UsageError(f"unknown store URL scheme {scheme!r}; use one of {known}") from None
    module_name, _, cls_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("eventlog"):
            raise UsageError(f"the {scheme} backend is not available in this version") from exc
        hint = f" (pip install 'agent-eventlog[{extra}]')" if extra else ""
        raise BackendUnavailableError(
            f"the {scheme} backend needs {exc.name}, which is not installed{hint}"
        ) from exc
    return getattr(module, cls_name)


def _split(url: str) -> tuple[str, str, dict[str, str], dict[str, Any]]:
    if not isinstance(url, str) or "://" not in url:
        raise UsageError(f"not a store URL: {url!r} (expected e.g. sqlite:///events.db)")
    # A store URL has no fragment: `#` is part of the file name, never a silent cut that would
    # open another store (`jsonl:///runs/run#2` is the directory `run#2`, not `runs/run`).
    parts = urlsplit(url, allow_fragments=False)
    scheme = parts.scheme.lower()
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    store_opts: dict[str, Any] = {}
    for key in list(query):
        if key == "key_store":
            raise UsageError(
                f"option key_store is a keyword of eventlog.open, not a URL parameter; in "
                f"{url!r} name a key directory with keys=DIR instead"
            )
        if key in _STORE_OPTIONS:
            store_opts[key] = _option_value(url, key, query.pop(key))
    path = parts.netloc + parts.path
    if scheme in _DIRECTORY_SCHEMES:
        path = _directory(url, path)
    return scheme, path, query, store_opts


_DIRECTORY_SCHEMES = {"jsonl", "lmdb"}


def _directory(url: str, path: str) -> str:
    """A directory store's path: `~/dir` is in the home directory, as for `sqlite:///~/x.db`.

    `jsonl:///~/dir` would be a directory named `~` at the root of the file system: refused as
    the slip it almost always is.
    """
    if path == "/~" or path.startswith("/~/"):
        scheme = url.split(":", 1)[0]
        raise UsageError(
            f"{url!r} names a directory '~' at the root of the file system; for the home "
            f"directory write {scheme}://~/{path[3:]}"
        )
    return os.path.expanduser(path) if path.startswith("~") else path


def _option_value(url: str, key: str, value: str) -> Any:
    """A store option from the URL's query: text, an integer, or a finite number."""
    if key in _TEXT_OPTIONS:
        return value
    try:
        number = int(value) if key in _INT_OPTIONS else float(value)
    except ValueError:
        kind = "an integer" if key in _INT_OPTIONS else "a number"
        raise UsageError(f"option {key} must be {kind}, got {value!r} in {url!r}") from None
    if not math.isfinite(number):
        raise UsageError(f"option {key} must be finite, got {value!r} in {url!r}")
    return number


def open(url: str = "memory://", **options: Unpack[OpenOptions]) -> Store:
    """Open (creating if needed) the store at `url`; keyword options override the query.

    Options (`OpenOptions` says what each does): store options `durability`, `max_event_bytes`,
    `poll_interval`, `compression`, `compress_min_bytes`, `zstd_level`, `keys`, `key_store`
    (docs/encryption.md); backend options `search`, `busy_timeout`, `check` (sqlite),
    `lock_timeout` (jsonl, lmdb, postgresql), `map_size`, `max_readers` (lmdb), `schema`,
    `pool_size`, `connect_timeout` (postgresql).
    An unknown name or a bad value is a UsageError, raised before anything is created.
    """
    scheme, path, backend_opts, store_opts = _split(url)
    given: dict[str, Any] = dict(options)  # checked at run time too: not every caller is typed
    for key in list(given):
        if key in _STORE_OPTIONS:
            store_opts[key] = given.pop(key)
    backend_opts.update({k: str(v) for k, v in given.items()})
    cls = _backend_class(scheme)
    _check_store_options(url, cls.format, store_opts)  # before the backend makes any file
    _open_keys(url, scheme, path, store_opts)
    backend: Backend = cls.from_url(url, path, backend_opts)
    try:
        return Store(backend, **store_opts)
    except (ValueError, TypeError) as exc:
        backend.close()
        raise UsageError(f"bad store option in {url!r}: {exc}") from exc
    except BaseException:
        backend.close()
        raise


def store_exists(url: str) -> bool:
    """Whether `url` names a store that exists already (opening it would create nothing)."""
    scheme, path, backend_opts, _ = _split(url)
    exists: bool = _backend_class(scheme).exists_at_url(url, path, backend_opts)
    return exists


def in_process(url: str) -> bool:
    """Whether `url` names a store that lives in this process only (`memory://`)."""
    return url.split("://", 1)[0].lower() == "memory"


def other_store_at(url: str) -> str | None:
    """The scheme of another backend's store at `url`'s path (a mistyped scheme), or None."""
    from pathlib import Path

    from eventlog.backends.base import holds_store
    from eventlog.backends.sqlite_schema import SQLITE_HEADER, database_path

    scheme, path, _, _ = _split(url)
    if scheme not in {"sqlite", *_DIRECTORY_SCHEMES} or not path:  # not a local file
        return None
    target = database_path(path) if scheme == "sqlite" else Path(path)
    if target.is_dir():
        return next((o for o in ("jsonl", "lmdb") if o != scheme and holds_store(target, o)), None)
    if scheme != "sqlite" and target.is_file():
        with target.open("rb") as f:
            if f.read(len(SQLITE_HEADER)) == SQLITE_HEADER:
                return "sqlite"
    return None


def rehearsal(url: str) -> Store:
    """An empty in-memory store that checks writes as the store at `url` would.

    Same payload format and store options (size limit, compression): a write that fails on it
    fails before the real store is created, so a refused first write leaves no empty store
    behind. A refusal of the backend's own, after it made its files, is not rehearsed. With a
    key store, its keys and erasures are read (a key directory is not made) and nothing is
    written to it (`eventlog.encryption.RehearsalKeyStore`).
    """
    from eventlog.backends.memory import MemoryBackend

    scheme, _, _, store_opts = _split(url)
    cls = _backend_class(scheme)
    _check_store_options(url, cls.format, store_opts)
    keys = store_opts.pop("keys", None)
    if keys is not None:  # seals alike, sees the directory's keys, and makes none on disk
        directory = os.path.abspath(os.path.expanduser(os.fspath(keys)))
        store_opts["key_store"] = RehearsalKeyStore(directory)
    elif store_opts.get("key_store") is not None:
        store_opts["key_store"] = RehearsalKeyStore(store_opts["key_store"])

    class _Rehearsal(MemoryBackend):
        format = cls.format

    backend = _Rehearsal()
    backend.location = url  # errors name the store the write was meant for
    return Store(backend, **store_opts)


def _check_store_options(url: str, fmt: str, opts: dict[str, Any]) -> None:
    """Raise UsageError for a store option the store would refuse (checked as the store will)."""
    try:
        if "durability" in opts:
            try:
                Durability(opts["durability"])
            except ValueError:
                choices = ", ".join(d.value for d in Durability)
                raise ValueError(
                    f"durability must be one of {choices}, got {opts['durability']!r}"
                ) from None
        Compression(
            opts.get("compression", "none"),
            min_bytes=opts.get("compress_min_bytes"),
            level=opts.get("zstd_level"),
        )
        if opts.get("max_event_bytes") is not None:
            Codec(fmt, max_event_bytes=opts["max_event_bytes"])  # type: ignore[arg-type]
        if "poll_interval" in opts:
            check_poll_interval(opts["poll_interval"])
    except (ValueError, TypeError) as exc:
        raise UsageError(f"bad store option in {url!r}: {exc}") from exc
    keys, key_store = opts.get("keys"), opts.get("key_store")
    if keys is not None and key_store is not None:
        raise UsageError(f"give keys (a key directory) or key_store, not both, for {url!r}")
    if keys is not None and (not isinstance(keys, (str, os.PathLike)) or not os.fspath(keys)):
        raise UsageError(f"option keys must name a key directory, got {keys!r} for {url!r}")
    if key_store is not None and not isinstance(key_store, KeyStore):
        raise UsageError(
            "option key_store must be a KeyStore (location, get, get_or_create, delete, "
            f"erased), got {type(key_store).__name__}"
        )
    if keys is not None or key_store is not None:
        crypto_module()  # BackendUnavailableError with the install hint, before any file


def _open_keys(url: str, scheme: str, path: str, opts: dict[str, Any]) -> None:
    """Replace a `keys` directory by its FileKeyStore (made now: UsageError if it cannot be).

    The directory must lie outside a directory store's own: a copy or backup of the store
    would otherwise hold its keys.
    """
    keys = opts.pop("keys", None)
    if keys is None:
        return
    directory = os.path.abspath(os.path.expanduser(os.fspath(keys)))
    if scheme in _DIRECTORY_SCHEMES and path:
        root = os.path.abspath(path)
        if os.path.commonpath([root, directory]) == root:
            raise UsageError(
                f"the key directory {directory} is inside the store {root}: keep keys outside "
                "the store, so a copy or backup of the store never holds them"
            )
    opts["key_store"] = FileKeyStore(directory)


def open_async(url: str = "memory://", **options: Unpack[OpenOptions]) -> AsyncStore:
    """Open a store for asyncio code (the same URL and keyword options as `open`)."""
    return AsyncStore(open(url, **options))
