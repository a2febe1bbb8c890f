"""Payload compression for every backend: zstd above a size threshold, optionally with a dictionary.

A dictionary trained on the store's own events (`train_dictionary`) makes small events compress too.

Each record says how its payload is packed (`Record.codec`, persisted, frozen):

- ``0`` plain: the encoded payload as is;
- ``1`` zstd: one zstd frame;
- ``2`` zstd with a dictionary: 4-byte big-endian dictionary id, then one zstd frame made with
  that dictionary. The dictionary is a store blob named ``zstd-dict/<id>``.

The hash chain covers the plain bytes, so compression never changes an event's hash, and a store
holding records of all three kinds (settings changed between runs) reads back correctly.
``zstandard`` is an optional dependency (``agent-eventlog[zstd]``), imported on first use.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import random
import struct
import threading
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from eventlog.backends.base import Record
from eventlog.encryption import ENCRYPTED
from eventlog.errors import BackendUnavailableError, CorruptionError, UsageError

if TYPE_CHECKING:
    from eventlog.store import Store

PLAIN = 0
ZSTD = 1
ZSTD_DICT = 2
DEFAULT_MIN_BYTES = 512
"""Without a dictionary, payloads shorter than this are stored plain."""
DICT_MIN_BYTES = 32
"""With a dictionary, payloads shorter than this are stored plain."""
DEFAULT_LEVEL = 3
DEFAULT_DICT_SIZE = 16 * 1024
MAX_PLAIN_BYTES = 256 * 1024 * 1024
"""A frame claiming a larger payload is treated as damaged (no huge allocation)."""
log = logging.getLogger("eventlog.compression")

ACTIVE_DICT_BLOB = "zstd-dict/active"
"""Blob naming (in ASCII digits) the dictionary new appends use."""

Mode = Literal["none", "zstd"]
BlobGetter = Callable[[str], bytes | None]
_DICT_ID = struct.Struct(">I")
_ZSTD_DICT_MAGIC = b"\x37\xa4\x30\xec"
DICT_BLOB_HEADER = b"eventlog zstd-dict v1\n"
"""A dictionary blob: this header, the SHA-256 of the dictionary, the dictionary. A damaged
dictionary would otherwise decode records into other bytes without an error, and compress new
ones with the damage. Blobs written before the checksum hold the dictionary alone."""


def dict_blob_key(dict_id: int) -> str:
    """The blob key of one dictionary."""
    return f"zstd-dict/{dict_id}"


def zstd_module() -> ModuleType:
    """The `zstandard` module, or BackendUnavailableError with an install hint."""
    try:
        return importlib.import_module("zstandard")
    except ModuleNotFoundError as exc:
        raise BackendUnavailableError(
            "zstd compression needs the zstandard package, which is not installed "
            "(pip install 'agent-eventlog[zstd]')"
        ) from exc


class Compression:
    """Packs payloads for storage and unpacks them, for one store.

    `mode` "none" stores new payloads plain (but still reads compressed records); "zstd"
    compresses payloads of at least `min_bytes` (0: every payload, even when that does not save
    bytes), or of at least `DICT_MIN_BYTES` once a dictionary is active. A compressed payload that
    is not smaller than the plain one is stored plain.
    """

    def __init__(
        self,
        mode: str = "none",
        *,
        min_bytes: int | None = None,
        level: int | None = None,
        blobs: BlobGetter | None = None,
    ) -> None:
        if mode not in ("none", "zstd"):
            raise ValueError(f"compression must be 'none' or 'zstd', got {mode!r}")
        self.mode: Mode = "zstd" if mode == "zstd" else "none"
        for name, value in (("compress_min_bytes", min_bytes), ("zstd_level", level)):
            if value is not None and type(value) is not int:  # not 1.5 silently made 1, nor True
                raise ValueError(f"{name} must be an integer, got {value!r}")
        self.min_bytes = DEFAULT_MIN_BYTES if min_bytes is None else min_bytes
        if self.min_bytes < 0:
            raise ValueError(f"compress_min_bytes must be >= 0, got {min_bytes}")
        self.level = DEFAULT_LEVEL if level is None else level
        self._blobs = blobs
        self._zstd: Any = None
        self._dicts: dict[int, Any] = {}
        self._local = threading.local()
        self.dict_id: int | None = None
        """The dictionary new payloads are compressed with, if any."""
        if self.mode == "zstd":
            self._zstd = zstd_module()
            if not -7 <= self.level <= self._zstd.MAX_COMPRESSION_LEVEL:
                raise ValueError(
                    f"zstd_level must be between -7 and {self._zstd.MAX_COMPRESSION_LEVEL}, "
                    f"got {self.level}"
                )
            active = blobs(ACTIVE_DICT_BLOB) if blobs is not None else None
            if active:
                self._activate_stored(active)

    def _activate_stored(self, active: bytes) -> None:
        """Use the dictionary the store names as active; without it, compress without one.

        A damaged name or a missing dictionary blob must not keep the store from opening: the
        records compressed with that dictionary raise CorruptionError when read (and `verify`
        reports them); new payloads are compressed without a dictionary. Both are logged.
        """
        try:
            dict_id = int(active)
        except ValueError:
            log.warning(
                "blob %s is damaged (%r): compressing without a dictionary",
                ACTIVE_DICT_BLOB,
                active,
            )
            return
        if self._dictionary(dict_id) is None:
            log.warning(
                "zstd dictionary %d, the active one, is missing or damaged (blob %s): compressing "
                "without a dictionary; records compressed with it cannot be read",
                dict_id,
                dict_blob_key(dict_id),
            )
            return
        self.dict_id = dict_id

    # -- packing ---------------------------------------------------------------------------

    def use_dictionary(self, dict_id: int | None) -> None:
        """Compress new payloads with this stored dictionary (None: without a dictionary)."""
        if dict_id is not None and self._dictionary(dict_id) is None:
            raise UsageError(
                f"zstd dictionary {dict_id} is not stored (blob {dict_blob_key(dict_id)})"
            )
        self.dict_id = dict_id

    def pack(self, plain: bytes) -> tuple[bytes, int]:
        """(stored bytes, codec id) for a plain payload."""
        if self.mode == "none":
            return plain, PLAIN
        size = len(plain)
        if size > MAX_PLAIN_BYTES:  # a frame this large would read back as damaged: keep it plain
            return plain, PLAIN
        dict_id = self.dict_id
        if dict_id is not None and size >= min(DICT_MIN_BYTES, self.min_bytes):
            packed = _DICT_ID.pack(dict_id) + self._compressor(dict_id).compress(plain)
            codec = ZSTD_DICT
        elif size >= self.min_bytes:
            packed = self._compressor(None).compress(plain)
            codec = ZSTD
        else:
            return plain, PLAIN
        if len(packed) >= size and self.min_bytes:
            return plain, PLAIN
        return packed, codec

    def _compressor(self, dict_id: int | None) -> Any:
        # zstandard's (de)compressors must not be shared by threads: one set per thread.
        cache: dict[int | None, Any] | None = getattr(self._local, "compressors", None)
        if cache is None:
            cache = self._local.compressors = {}
        comp = cache.get(dict_id)
        if comp is None:
            zstd = self._zstd
            if dict_id is None:
                comp = zstd.ZstdCompressor(level=self.level, write_checksum=False)
            else:
                comp = zstd.ZstdCompressor(
                    level=self.level, dict_data=self._dictionary(dict_id), write_dict_id=False
                )
            cache[dict_id] = comp
        return comp

    # -- unpacking -------------------------------------------------------------------------

    def unpack(self, rec: Record, location: str = "") -> bytes:
        """The plain payload of a record; CorruptionError naming stream and seq if impossible."""
        codec = rec.codec
        if codec == PLAIN:
            return rec.data
        if type(rec.data) is not bytes:  # a file edited by another tool (text in a blob column)
            raise _corrupt(rec, location, f"payload is stored as {type(rec.data).__name__}")
        if codec == ZSTD:
            return self._decompress(rec, None, rec.data, location)
        if codec == ZSTD_DICT:
            if len(rec.data) < _DICT_ID.size:
                raise _corrupt(rec, location, "payload is too short for a dictionary id")
            (dict_id,) = _DICT_ID.unpack_from(rec.data)
            return self._decompress(rec, dict_id, rec.data[_DICT_ID.size :], location)
        raise _corrupt(rec, location, f"unknown payload codec {codec}")

    def _decompress(self, rec: Record, dict_id: int | None, frame: bytes, location: str) -> bytes:
        zstd = self._zstd
        if zstd is None:
            zstd = self._zstd = zstd_module()
        cache: dict[int | None, Any] | None = getattr(self._local, "decompressors", None)
        if cache is None:
            cache = self._local.decompressors = {}
        dec = cache.get(dict_id)
        if dec is None:
            if dict_id is None:
                dec = zstd.ZstdDecompressor()
            else:
                zdict = self._dictionary(dict_id)
                if zdict is None:
                    raise _corrupt(
                        rec,
                        location,
                        f"zstd dictionary {dict_id} is missing or damaged "
                        f"(blob {dict_blob_key(dict_id)})",
                    )
                dec = zstd.ZstdDecompressor(dict_data=zdict)
            cache[dict_id] = dec
        try:
            size = zstd.frame_content_size(frame)
            if not 0 <= size <= MAX_PLAIN_BYTES:
                raise _corrupt(rec, location, f"zstd frame declares a bad size ({size})")
            plain: bytes = dec.decompress(frame, allow_extra_data=False)  # nothing after it
        except zstd.ZstdError as exc:
            raise _corrupt(rec, location, f"zstd payload does not decompress: {exc}") from exc
        return plain

    def _dictionary(self, dict_id: int) -> Any:
        """The dictionary object for an id, loaded from the store's blobs once.

        None if its blob is absent or damaged (logged).
        """
        zdict = self._dicts.get(dict_id)
        if zdict is None:
            raw = self._blobs(dict_blob_key(dict_id)) if self._blobs is not None else None
            if raw is None:
                return None
            zstd = self._zstd
            if zstd is None:
                zstd = self._zstd = zstd_module()
            try:
                zdict = zstd.ZstdCompressionDict(dictionary_bytes(raw))
                if zdict.dict_id() != dict_id:
                    raise ValueError(f"the blob holds dictionary {zdict.dict_id()}")
                if self.mode == "zstd":
                    zdict.precompute_compress(level=self.level)
            except (zstd.ZstdError, ValueError) as exc:  # a damaged blob: as good as missing
                log.warning("zstd dictionary %d is damaged: %s", dict_id, exc)
                return None
            self._dicts[dict_id] = zdict
        return zdict


def dictionary_blob(dictionary: bytes) -> bytes:
    """The blob that stores a dictionary: header, SHA-256, dictionary (`DICT_BLOB_HEADER`)."""
    return DICT_BLOB_HEADER + hashlib.sha256(dictionary).digest() + dictionary


def dictionary_bytes(blob: bytes) -> bytes:
    """The dictionary a blob holds; ValueError if its checksum does not match.

    A blob without the header is one written before the checksum: the dictionary alone, which
    starts with zstd's dictionary magic number.
    """
    if not blob.startswith(DICT_BLOB_HEADER):
        if not blob.startswith(_ZSTD_DICT_MAGIC):
            raise ValueError("the blob is not a zstd dictionary")
        return blob
    start = len(DICT_BLOB_HEADER)
    digest, dictionary = blob[start : start + 32], blob[start + 32 :]
    if hashlib.sha256(dictionary).digest() != digest:
        raise ValueError("its SHA-256 does not match the one stored with it")
    return dictionary


def _corrupt(rec: Record, location: str, message: str) -> CorruptionError:
    return CorruptionError(message, stream=rec.stream, seq=rec.seq, location=location or None)


def train_dictionary(
    store: Store,
    *,
    size: int = DEFAULT_DICT_SIZE,
    max_samples: int = 20_000,
    activate: bool = True,
) -> int:
    """Train a zstd dictionary on the store's newest events, store it; return its id.

    Encrypted events are not sampled: the dictionary is stored unencrypted, and holds pieces of
    what it was trained on.

    The dictionary is kept with the store (blob ``zstd-dict/<id>``), so every reader finds it.
    With `activate`, it becomes the store's active dictionary: this store object (when opened
    with ``compression=zstd``) and stores opened later compress new events with it.
    Raises UsageError when the store holds too little data to train on.
    """
    if isinstance(size, bool) or not isinstance(size, int) or not 256 <= size <= 2**31:
        raise UsageError(f"size must be a number of bytes from 256 to 2**31, got {size!r}")
    if isinstance(max_samples, bool) or not isinstance(max_samples, int) or max_samples < 1:
        raise UsageError(f"max_samples must be a positive integer, got {max_samples!r}")
    zstd = zstd_module()
    backend = store.backend
    codec = store.codec
    samples: list[bytes] = []
    after = max(store.head_position() - max_samples, 0)
    while len(samples) < max_samples:
        page = backend.read_all(after, min(1000, max_samples - len(samples)))
        if not page:
            break
        # Encrypted events are left out: a dictionary is stored unencrypted, and holds pieces
        # of what it was trained on.
        samples.extend(
            codec.unpack(rec, store.location) for rec in page if not rec.codec & ENCRYPTED
        )
        after = page[-1].position
    total = sum(map(len, samples))
    dict_id = random.SystemRandom().randrange(1, 2**31)
    while backend.get_blob(dict_blob_key(dict_id)) is not None:
        dict_id = random.SystemRandom().randrange(1, 2**31)
    try:
        trained = zstd.train_dictionary(size, samples, dict_id=dict_id, level=DEFAULT_LEVEL)
    except zstd.ZstdError as exc:
        raise UsageError(
            f"cannot train a {size}-byte zstd dictionary on {len(samples)} events "
            f"({total} bytes): {exc}; append more events first"
        ) from exc
    backend.put_blob(dict_blob_key(dict_id), dictionary_blob(trained.as_bytes()))
    if activate:
        backend.put_blob(ACTIVE_DICT_BLOB, str(dict_id).encode())
        compression = codec.compression
        if compression.mode == "zstd":
            compression.use_dictionary(dict_id)
    return dict_id


__all__ = [
    "ACTIVE_DICT_BLOB",
    "PLAIN",
    "ZSTD",
    "ZSTD_DICT",
    "Compression",
    "dict_blob_key",
    "dictionary_blob",
    "dictionary_bytes",
    "train_dictionary",
    "zstd_module",
]
