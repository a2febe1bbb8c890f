"""Encryption at rest with a key per stream, and erasure by deleting a stream's key.

With a key store (`eventlog.open(url, keys="/path/to/keys")`, or `key_store=` any `KeyStore`),
every new event's payload (after compression) and its meta are sealed with AES-256-GCM under
the key of the event's stream. The envelope (id, stream, seq, time, type, schema version, links,
hash) stays plain, so listing streams, idempotency checks and reads by position need no key.
Deleting a stream's key (`erase_stream`) makes its events unreadable without rewriting the
log: crypto-shredding, for users who must honour deletion requests.

Each record says how its payload is packed (`Record.codec`): `ENCRYPTED` (16) plus the
compression codec underneath (0 plain, 1 zstd, 2 zstd with a dictionary). A sealed value is a
fresh random 96-bit nonce, then the AES-GCM ciphertext and its 16-byte tag. The additional
authenticated data binds it to its place: the part (payload or meta), the record's stream,
seq, event id and codec, so a ciphertext moved, swapped or copied into another record fails
to decrypt and reads as a `CorruptionError` naming the record.

Keys live outside the store (a backup of the store never holds them): `FileKeyStore`, one
file per stream in a directory of its own, or `MemoryKeyStore` for tests and throwaway
stores. ``cryptography`` is an optional dependency (``agent-eventlog[encryption]``), imported
when a key store is configured. See docs/encryption.md.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import msgspec

from eventlog.backends.base import Record
from eventlog.backends.file_lock import DEFAULT_LOCK_TIMEOUT, acquire, open_lock_file, release
from eventlog.errors import (
    BackendUnavailableError,
    CorruptionError,
    ErasedError,
    MissingKeyError,
    UsageError,
)

if TYPE_CHECKING:
    from eventlog.store import Store

ENCRYPTED = 16
"""Flag added to a record's codec when its payload and meta are sealed."""
CODECS = frozenset({0, 1, 2, ENCRYPTED, ENCRYPTED | 1, ENCRYPTED | 2})
"""Every codec id a record may carry (see eventlog.compression for 1 and 2)."""
KEY_BYTES = 32
"""AES-256."""
NONCE_BYTES = 12
TAG_BYTES = 16
OVERHEAD = NONCE_BYTES + TAG_BYTES
"""Bytes a sealed value takes beyond its plain bytes."""
_AAD_LABEL = "eventlog-aead-v1"
_aad_encoder = msgspec.msgpack.Encoder()
_AEADS_KEPT = 4096
"""Cipher objects cached at most (one per key in use)."""


def crypto_module() -> ModuleType:
    """`cryptography`'s AEAD module, or BackendUnavailableError with an install hint."""
    try:
        return importlib.import_module("cryptography.hazmat.primitives.ciphers.aead")
    except ModuleNotFoundError as exc:
        raise BackendUnavailableError(
            "encryption needs the cryptography package, which is not installed "
            "(pip install 'agent-eventlog[encryption]')"
        ) from exc


def key_name(stream: str) -> str:
    """The file stem of a stream's key: the SHA-256 of its name (any name is a safe file name)."""
    return hashlib.sha256(stream.encode("utf-8", "surrogatepass")).hexdigest()


@runtime_checkable
class KeyStore(Protocol):
    """Where the keys of a store's streams live, outside the store.

    Implementations must be safe to use from several threads, and `get_or_create` atomic:
    two writers appending the first events of one stream at once (threads or processes) must
    end with one key that both use.
    """

    @property
    def location(self) -> str:
        """Where the keys are, for messages (never a key)."""
        ...

    def get(self, stream: str) -> bytes | None:
        """The stream's 32-byte key, or None if it has none (never made, or erased)."""
        ...

    def get_or_create(self, stream: str) -> bytes:
        """The stream's key, made now if it has none; ErasedError if it was erased."""
        ...

    def delete(self, stream: str) -> bool:
        """Erase the stream's key for good (later `get_or_create` calls raise ErasedError).

        True if a key was deleted, False if there was none.
        """
        ...

    def erased(self, stream: str) -> bool:
        """Whether the stream's key was erased."""
        ...


class MemoryKeyStore:
    """Keys in a dict: for tests and stores that do not outlive the process."""

    def __init__(self) -> None:
        self._keys: dict[str, bytes] = {}
        self._erased: set[str] = set()
        self._lock = threading.Lock()

    @property
    def location(self) -> str:
        """Where the keys are."""
        return f"memory key store {id(self):#x}"

    def get(self, stream: str) -> bytes | None:
        """The stream's key, if it has one."""
        return self._keys.get(stream)

    def get_or_create(self, stream: str) -> bytes:
        """The stream's key, made now if needed; ErasedError after `delete`."""
        with self._lock:
            if stream in self._erased:
                raise _erased_for_append(stream, self.location)
            key = self._keys.get(stream)
            if key is None:
                key = self._keys[stream] = secrets.token_bytes(KEY_BYTES)
            return key

    def delete(self, stream: str) -> bool:
        """Forget the stream's key and remember it was erased."""
        with self._lock:
            self._erased.add(stream)
            return self._keys.pop(stream, None) is not None

    def erased(self, stream: str) -> bool:
        """Whether `delete` was called for the stream."""
        return stream in self._erased


class FileKeyStore:
    """One key file per stream in a directory of its own (mode 0700, files 0600).

    A key file is named by the SHA-256 of the stream's name (`<hex>.key`) and holds the 32
    key bytes. It is made atomically: written to a temporary file, synced, then linked to its
    name, which fails if another thread or process linked one first (that key is then used).
    Where hard links are not supported (FAT, exFAT, some network shares), or with
    `hard_links=False`, the temporary file is renamed to its name instead, under a lock file
    (`.lock`, flock) and only if no key has that name yet. Either way a key file is complete
    when it appears, and a crash leaves no second copy of a key that was used.
    `delete` first leaves a marker (`<hex>.erased`, synced), so no key is made for the stream
    again, then overwrites the key file, syncs it, removes it and syncs the directory.

    The directory is made if it does not exist; UsageError if it cannot be made or written.
    Opening it finishes an erasure cut short (a crash between marker and removal): a key file
    beside its stream's erasure marker is destroyed (until then appends are refused:
    `Encryption.sealing_key` checks the marker).
    """

    def __init__(self, directory: str | os.PathLike[str], *, hard_links: bool = True) -> None:
        path = Path(os.path.expanduser(os.fspath(directory)))
        self.directory = path
        try:
            if path.exists() and not path.is_dir():  # (mkdir would say "File exists")
                raise NotADirectoryError(errno.ENOTDIR, "Not a directory", str(path))
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=path, prefix=".probe-")
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise unusable_key_directory(path, exc) from None
        self.hard_links = hard_links
        """Whether new keys are published by a hard link (else by a rename under a lock)."""
        self._paths: dict[str, tuple[str, str]] = {}
        self._create_lock = threading.Lock()
        self._finish_erasures()

    def _finish_erasures(self) -> None:
        """Destroy the key files of streams marked erased (an erasure that did not finish)."""
        with os.scandir(self.directory) as entries:
            names = {e.name for e in entries}
        left = [n[: -len(".erased")] + ".key" for n in names if n.endswith(".erased")]
        left = [n for n in left if n in names]
        for name in left:
            _destroy(os.path.join(self.directory, name))
        if left:
            _sync_directory(self.directory)

    @property
    def location(self) -> str:
        """The key directory."""
        return str(self.directory)

    def __repr__(self) -> str:
        return f"FileKeyStore({self.location!r})"

    def _files(self, stream: str) -> tuple[str, str]:
        """(key file, erasure marker) of a stream."""
        found = self._paths.get(stream)
        if found is None:
            stem = os.path.join(self.directory, key_name(stream))
            found = (stem + ".key", stem + ".erased")
            if len(self._paths) > 65_536:
                self._paths.clear()
            self._paths[stream] = found
        return found

    def get(self, stream: str) -> bytes | None:
        """The key in the stream's key file (read each time: an erasure shows at once).

        MissingKeyError if the file exists but cannot be read (its mode, say).
        """
        return _read_key(stream, self._files(stream)[0])

    def erased(self, stream: str) -> bool:
        """Whether the stream's erasure marker exists."""
        return os.path.exists(self._files(stream)[1])

    def get_or_create(self, stream: str) -> bytes:
        """The stream's key, made atomically if it has none; ErasedError if it was erased."""
        key = self.get(stream)
        if key is not None:
            return key
        path, marker = self._files(stream)
        with self._create_lock:
            if os.path.exists(marker):
                raise _erased_for_append(stream, self.location)
            try:
                self._make_key(path)
            except OSError as exc:
                raise self._unwritable(exc, f"no key can be made for stream {stream!r}") from None
            if os.path.exists(marker):  # erased meanwhile: the erasure may not have seen it
                _destroy(path)
                _sync_directory(self.directory)
                raise _erased_for_append(stream, self.location)
        key = self.get(stream)
        if key is None:  # erased between the link and this read
            raise _erased_for_append(stream, self.location)
        return key

    def _make_key(self, path: str) -> None:
        """Write a new key to `path`, unless another writer's key is there first (synced)."""
        fd, temp = tempfile.mkstemp(dir=self.directory, prefix=".new-", suffix=".key")
        try:
            try:
                os.write(fd, secrets.token_bytes(KEY_BYTES))
                os.fsync(fd)
            finally:
                os.close(fd)
            self._publish(temp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)  # a link to the key, or a key never used
        _sync_directory(self.directory)

    def _unwritable(self, exc: OSError, outcome: str) -> UsageError:
        """The error for a key directory this process can no longer write (its mode, say)."""
        return UsageError(
            f"the key directory {self.directory} cannot be written: {exc.strerror or exc}; "
            f"{outcome}"
        )

    def _publish(self, temp: str, path: str) -> None:
        """Give the key written to `temp` its name, unless another writer's key has it already.

        A hard link is atomic and never replaces a file. Without hard links, the key file is
        renamed under the directory's lock file, after checking that no key has the name yet:
        a rename is atomic too, so a reader never finds a key half written.
        """
        if self.hard_links:
            try:
                os.link(temp, path)
                return
            except FileExistsError:
                return  # another thread or process made it first: theirs is the key
            except OSError as exc:
                if exc.errno not in _NO_LINKS:
                    raise
        lock = self.directory / ".lock"
        fd = open_lock_file(lock)
        try:
            acquire(fd, DEFAULT_LOCK_TIMEOUT, lock, f"the key directory {self.directory}")
            try:
                if not os.path.exists(path):
                    os.rename(temp, path)
            finally:
                release(fd)
        finally:
            os.close(fd)

    def delete(self, stream: str) -> bool:
        """Mark the stream erased, then overwrite and remove its key file (both synced)."""
        path, marker = self._files(stream)
        try:
            if not os.path.exists(marker):
                self._mark_erased(marker)
            deleted = _destroy(path)
            _sync_directory(self.directory)
        except OSError as exc:
            if os.path.exists(marker):  # appends are refused already; the key file stays
                outcome = (
                    f"stream {stream!r} is marked erased but its key file is not removed yet "
                    "(opening the key directory when it is writable again removes it)"
                )
            else:
                outcome = f"nothing was erased (stream {stream!r})"
            raise self._unwritable(exc, outcome) from None
        return deleted

    def _mark_erased(self, marker: str) -> None:
        """Write the erasure marker atomically (synced, directory too)."""
        fd, temp = tempfile.mkstemp(dir=self.directory, prefix=".new-", suffix=".erased")
        try:
            try:
                os.write(fd, f"erased at {time.time_ns()} ns\n".encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, marker)  # atomic; another erasure's marker says the same
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
        _sync_directory(self.directory)


_NO_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS})
"""Errors of `os.link` on a file system without hard links (FAT, exFAT, some shares)."""


def _unreadable(stream: str, path: str, exc: OSError) -> MissingKeyError:
    """The error for a key file that exists but cannot be read (its mode, a directory...)."""
    return MissingKeyError(
        f"the key file {path} cannot be read: {exc.strerror or exc}",
        stream=stream,
    )


def _destroy(path: str) -> bool:
    """Overwrite a key file with random bytes, sync it and remove it; False if it is absent.

    Overwriting helps on file systems that rewrite blocks in place; copy-on-write and
    journalling file systems, and SSDs, may keep the old bytes elsewhere (docs/encryption.md).
    """
    try:
        fd = os.open(path, os.O_WRONLY)
    except FileNotFoundError:
        return False
    except PermissionError:
        fd = -1  # a file this process may not write (its mode): removing it still erases it
    if fd >= 0:
        try:
            os.write(fd, secrets.token_bytes(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def unusable_key_directory(path: str | os.PathLike[str], exc: OSError) -> UsageError:
    """The error for a key directory that cannot be made or written."""
    return UsageError(
        f"the key directory {os.fspath(path)} cannot be used: {exc.strerror or exc} (keys= "
        "must name a directory this process can create and write)"
    )


def _read_key(stream: str, path: str) -> bytes | None:
    """The key in a key file, None if there is none; MissingKeyError or CorruptionError."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _unreadable(stream, path, exc) from None
    try:
        key = os.read(fd, KEY_BYTES + 1)
    except OSError as exc:
        raise _unreadable(stream, path, exc) from None
    finally:
        os.close(fd)
    if len(key) != KEY_BYTES:
        raise CorruptionError(
            f"the key of stream {stream!r} is damaged: its file {path} holds {len(key)} "
            f"bytes, a key is {KEY_BYTES}",
            stream=stream,
        )
    return key


class RehearsalKeyStore:
    """A key store as a store about to be opened on it would find it, changing nothing there.

    For rehearsals (`eventlog.connect.rehearsal`): keys and erasures are read from `base` (a
    key directory, read without being made, or another KeyStore), so a copy's checks see
    what the real key store holds; keys made and streams erased stay in memory.
    """

    def __init__(self, base: str | os.PathLike[str] | KeyStore) -> None:
        self._base: KeyStore | None = None
        self._directory: str | None = None
        if isinstance(base, KeyStore):
            self._base = base
        else:
            self._directory = os.fspath(base)
            if os.path.exists(self._directory) and not os.path.isdir(self._directory):
                error = NotADirectoryError(errno.ENOTDIR, "Not a directory", self._directory)
                raise unusable_key_directory(self._directory, error)  # as FileKeyStore would
        self._memory = MemoryKeyStore()

    @property
    def location(self) -> str:
        """The real key store's location (messages name what the real store would)."""
        return self._base.location if self._base is not None else str(self._directory)

    def _path(self, stream: str, suffix: str) -> str:
        return os.path.join(str(self._directory), key_name(stream) + suffix)

    def get(self, stream: str) -> bytes | None:
        """The key made in memory, else the real store's."""
        key = self._memory.get(stream)
        if key is not None or self._memory.erased(stream):
            return key
        if self._base is not None:
            return self._base.get(stream)
        if os.path.exists(self._path(stream, ".erased")):
            return None  # an erasure cut short: opening the directory finishes it
        return _read_key(stream, self._path(stream, ".key"))

    def get_or_create(self, stream: str) -> bytes:
        """The real store's key, else one made in memory; ErasedError if erased."""
        if self.erased(stream):
            raise _erased_for_append(stream, self.location)
        key = self.get(stream)
        return key if key is not None else self._memory.get_or_create(stream)

    def delete(self, stream: str) -> bool:
        """Erase in memory only: True if the stream had a key."""
        had = self.get(stream) is not None
        self._memory.delete(stream)
        return had

    def erased(self, stream: str) -> bool:
        """Erased in memory, or in the real store."""
        if self._memory.erased(stream):
            return True
        if self._base is not None:
            return self._base.erased(stream)
        return os.path.exists(self._path(stream, ".erased"))


def _sync_directory(path: Path) -> None:
    """Sync a directory, so a file made, linked or removed in it stays so after a crash."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _erased_for_append(stream: str, location: str) -> ErasedError:
    return ErasedError(
        stream,
        message=(
            f"the stream was erased (its key was deleted from {location}): nothing can be "
            "appended to it (a new key would mix two keys' events in one stream)"
        ),
    )


def _aad(part: str, stream: str, seq: int, event_id: str, codec: int) -> bytes:
    """The additional authenticated data of one sealed value: where it belongs."""
    return _aad_encoder.encode((_AAD_LABEL, part, stream, seq, event_id, codec))


class Encryption:
    """Seals and opens the payloads and meta of one store's records with its key store."""

    def __init__(self, keys: KeyStore) -> None:
        self.keys = keys
        self._aead_class: Any = crypto_module().AESGCM
        self._invalid_tag: type[Exception] = importlib.import_module(
            "cryptography.exceptions"
        ).InvalidTag
        self._aeads: dict[bytes, Any] = {}

    def _aead(self, key: bytes) -> Any:
        aead = self._aeads.get(key)
        if aead is None:
            if type(key) is not bytes or len(key) != KEY_BYTES:
                raise UsageError(
                    f"the key store {self.keys.location} returned a key of "
                    f"{len(key) if isinstance(key, bytes) else type(key).__name__} bytes; "
                    f"keys are {KEY_BYTES} bytes"
                )
            if len(self._aeads) >= _AEADS_KEPT:
                self._aeads.clear()
            aead = self._aeads[key] = self._aead_class(key)
        return aead

    def forget(self, key: bytes) -> None:
        """Drop the cipher object of a key (after its erasure)."""
        self._aeads.pop(key, None)

    def sealing_key(self, stream: str, tail: Callable[[], Record | None]) -> Any:
        """The cipher to seal a stream's new events with (its key made if it has none).

        `tail()` gives the stream's own last record, asked only when the stream has no key:
        when that record is sealed (another key store, or a key removed by hand) a new key
        would mix two keys' events in one stream, so that is refused.
        """
        keys = self.keys
        key = keys.get(stream)
        if keys.erased(stream):  # a key beside its marker: an erasure cut short by a crash
            raise _erased_for_append(stream, keys.location)
        if key is None:
            _refuse_if_sealed(
                tail(),
                keys,
                "nothing appended, since a new key would mix two keys' events in one stream",
            )
            key = keys.get_or_create(stream)
        return self._aead(key)

    def seal(
        self, aead: Any, part: str, stream: str, seq: int, event_id: str, codec: int, data: bytes
    ) -> bytes:
        """Nonce + ciphertext + tag of `data`, bound to its record by the AAD."""
        nonce = os.urandom(NONCE_BYTES)
        sealed: bytes = aead.encrypt(nonce, data, _aad(part, stream, seq, event_id, codec))
        return nonce + sealed

    def opening_key(self, rec: Record, location: str) -> Any:
        """The cipher to open a record's sealed values; ErasedError or MissingKeyError."""
        keys = self.keys
        key = keys.get(rec.stream)
        if key is None:
            if keys.erased(rec.stream):
                raise ErasedError(
                    rec.stream, seq=rec.seq, position=rec.position, location=location or None
                )
            raise MissingKeyError(
                f"the event is encrypted, and its stream's key is not in {keys.location} "
                "(another key directory than the one it was written with?)",
                stream=rec.stream,
                seq=rec.seq,
                location=location or None,
            )
        return self._aead(key)

    def open(self, rec: Record, part: str, sealed: bytes, location: str, aead: Any = None) -> bytes:
        """The plain bytes of a record's sealed payload or meta; CorruptionError if altered.

        `aead`: the record's cipher, if the caller has it (`opening_key`).
        """
        if type(sealed) is not bytes:
            raise _corrupt(rec, location, f"encrypted {part} is stored as {type(sealed).__name__}")
        if len(sealed) < OVERHEAD:
            raise _corrupt(rec, location, f"encrypted {part} is too short ({len(sealed)} bytes)")
        if aead is None:
            aead = self.opening_key(rec, location)
        try:
            plain: bytes = aead.decrypt(
                sealed[:NONCE_BYTES],
                sealed[NONCE_BYTES:],
                _aad(part, rec.stream, rec.seq, rec.id, rec.codec),
            )
        except self._invalid_tag:
            raise _corrupt(
                rec,
                location,
                f"encrypted {part} does not decrypt with the stream's key: it was altered, "
                "moved from another event, or the key is not the one it was written with",
            ) from None
        return plain


SNAPSHOT_MAGIC = b"eventlog-sealed-snapshot\x00"
"""The first bytes of a sealed projection snapshot (a plain one is a MessagePack array)."""


def _lineage_key(keys: KeyStore, lineage: list[str]) -> bytes:
    """One key from the keys of a stream and its ancestors (SHA-256 over them, in order).

    A snapshot of a fork holds state made from its ancestors' events too: it must become
    unreadable when any of their keys is erased. A stream of the lineage without a key (its
    events stored plain) adds nothing; an erased one raises ErasedError.
    """
    digest = hashlib.sha256(b"eventlog snapshot key v1")
    for name in lineage:
        key = keys.get(name)
        if key is None:
            if keys.erased(name):
                raise ErasedError(name, message="a stream its state was made from was erased")
            continue
        digest.update(hashlib.sha256(name.encode()).digest() + key)
    return digest.digest()


def seal_snapshot(
    encryption: Encryption,
    lineage: list[str],
    seq: int,
    projection: str,
    blob: bytes,
    tail: Callable[[str], Record | None],
) -> bytes:
    """A projection snapshot sealed with its stream's lineage key (`lineage[0]` is the stream).

    Each stream of the lineage gets its key now if it has none yet (a fork before its first
    own event, an ancestor whose events are all plain): made later, a key would change the
    lineage key and the snapshot would no longer open. `tail(stream)` gives a stream's own
    last record: one sealed with a key held elsewhere gets no key here (see `sealing_key`).
    """
    keys = encryption.keys
    for name in lineage:
        if keys.get(name) is None and not keys.erased(name):
            last = tail(name)
            if last is None or not last.codec & ENCRYPTED:
                keys.get_or_create(name)
    aead = encryption._aead(_lineage_key(encryption.keys, lineage))
    label = f"snapshot:{projection}"
    return SNAPSHOT_MAGIC + encryption.seal(aead, label, lineage[0], seq, "", 0, blob)


def open_snapshot(
    encryption: Encryption | None, lineage: list[str], seq: int, projection: str, blob: bytes
) -> bytes:
    """The plain snapshot of a sealed one; ErasedError or MissingKeyError if it cannot be.

    ValueError when it does not open (damaged, or sealed for another stream, seq or
    projection): the caller discards it.
    """
    if encryption is None:
        raise MissingKeyError(
            "a projection snapshot is encrypted: open the store with its key store",
            stream=lineage[0],
            seq=seq,
        )
    sealed = blob[len(SNAPSHOT_MAGIC) :]
    if len(sealed) < OVERHEAD:
        raise ValueError("the sealed snapshot is too short")
    aead = encryption._aead(_lineage_key(encryption.keys, lineage))
    aad = _aad(f"snapshot:{projection}", lineage[0], seq, "", 0)
    try:
        plain: bytes = aead.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], aad)
    except encryption._invalid_tag:
        raise ValueError("the sealed snapshot does not decrypt with its lineage's keys") from None
    return plain


def no_key_store(rec: Record, location: str) -> MissingKeyError:
    """The error for an encrypted record read by a store opened without a key store."""
    return MissingKeyError(
        "the event is encrypted: open the store with its key store (keys=DIR in the URL or as "
        "a keyword, or key_store=) to read it",
        stream=rec.stream,
        seq=rec.seq,
        location=location or None,
    )


def _corrupt(rec: Record, location: str, message: str) -> CorruptionError:
    return CorruptionError(message, stream=rec.stream, seq=rec.seq, location=location or None)


# -- erasure ---------------------------------------------------------------------------------


class ErasureReport(msgspec.Struct, frozen=True):
    """What `erase_stream` did."""

    stream: str
    key_deleted: bool
    """False when there was no key to delete (erased before, or no event was ever sealed)."""
    encrypted_events: int
    """The stream's own events sealed with the deleted key: unreadable from now on."""
    plain_events: int
    """The stream's own events stored unencrypted (written before encryption was turned on):
    still readable. Erasing them needs a copy of the store without them."""
    shared_events: int
    """Events a fork reads through its ancestors (its prefix): they belong to the ancestors
    and are not erased with it."""
    forks: list[str]
    """Forks (at any depth) whose prefix holds events of this stream: those become unreadable
    in them too."""
    snapshots_dropped: int
    """Projection snapshots of the stream and of those forks, removed (they hold state made
    from the erased events, not encrypted)."""


def erase_stream(store: Store, stream: str) -> ErasureReport:
    """Erase a stream: delete its key, so its encrypted events can never be read again.

    Nothing in the log is rewritten: the events keep their place, envelope and hash (`verify`
    still checks the chain and reports the stream as erased); reading them raises ErasedError,
    and so does appending to the stream. Projection snapshots of the stream and of its forks
    are removed. UsageError if the store has no key store, StreamNotFoundError if the stream
    does not exist, MissingKeyError (nothing erased) if its encrypted events have no key in
    the key store (another key directory).
    """
    from eventlog.codec import validate_stream_name
    from eventlog.errors import StreamNotFoundError

    store._check_open()
    encryption = store.codec.encryption
    if encryption is None:
        raise UsageError(
            f"{store.location} is opened without a key store: open it with keys=DIR (or "
            "key_store=) to erase a stream"
        )
    validate_stream_name(stream, stored=True)
    if not store.exists(stream):
        raise StreamNotFoundError(stream)
    fork = store.backend.get_fork(stream)
    shared = fork.at_seq if fork is not None else 0
    store._stream_locks.acquire(stream)
    try:
        key = _key_to_erase(store, encryption.keys, stream)
        deleted = encryption.keys.delete(stream)
        if key is not None:
            encryption.forget(key)
        # Counted after the deletion: appends of other processes that had the key until then
        # are counted too (they are as unreadable as the rest).
        sealed, plain = _own_events(store, stream, shared + 1)
    finally:
        store._stream_locks.release(stream)
    forks = _descendants(store, stream)
    dropped = sum(store.backend.drop_snapshots(name) for name in [stream, *forks])
    return ErasureReport(stream, deleted, sealed, plain, shared, forks, dropped)


def _key_to_erase(store: Store, keys: KeyStore, stream: str) -> bytes | None:
    """The stream's key, if readable; MissingKeyError if its sealed events have none here.

    An erasure in another key directory than the events were sealed with would delete
    nothing, yet mark the stream erased there and report its events unreadable.
    """
    try:
        key = keys.get(stream)
    except (CorruptionError, MissingKeyError):
        return None  # a damaged or unreadable key file: `delete` removes it all the same
    if key is None and not keys.erased(stream):
        _refuse_if_sealed(store.backend.last(stream), keys, "nothing was erased", store.location)
    return key


def _refuse_if_sealed(
    last: Record | None, keys: KeyStore, outcome: str, location: str | None = None
) -> None:
    """MissingKeyError if a stream whose key is not in `keys` ends with a sealed record.

    Its events were sealed with a key held elsewhere (another key directory, or a key file
    removed by hand): writing or erasing here would act on the wrong key.
    """
    if last is not None and last.codec & ENCRYPTED:
        raise MissingKeyError(
            f"the stream holds encrypted events but its key is not in {keys.location} "
            f"(another key directory than the one they were written with?): {outcome}",
            stream=last.stream,
            location=location,
        )


def _own_events(store: Store, stream: str, first: int) -> tuple[int, int]:
    """(encrypted, unencrypted) records of a stream's own, from seq `first` on."""
    sealed = plain = 0
    while True:
        page = store.backend.read(stream, first, None, limit=1000)
        for rec in page:
            if rec.codec & ENCRYPTED:
                sealed += 1
            else:
                plain += 1
        if len(page) < 1000:
            return sealed, plain
        first = page[-1].seq + 1


def _descendants(store: Store, stream: str) -> list[str]:
    """The forks, at any depth, whose prefix holds some of the stream's own events."""
    found: list[str] = []
    todo = [stream]
    seen = {stream}
    while todo:
        for fork in store.backend.list_forks(todo.pop()):
            if fork.stream not in seen:
                seen.add(fork.stream)
                todo.append(fork.stream)
                if any(
                    origin == stream and (hi is None or lo <= hi)
                    for origin, lo, hi in store._segments(fork.stream)
                ):
                    found.append(fork.stream)
    return sorted(found)


__all__ = [
    "CODECS",
    "ENCRYPTED",
    "Encryption",
    "ErasureReport",
    "FileKeyStore",
    "KeyStore",
    "MemoryKeyStore",
    "erase_stream",
    "key_name",
]
