"""Payload compression: threshold, dictionaries, mixed settings, damage, missing zstandard."""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eventlog as el
from eventlog import compression
from eventlog.backends.base import Record
from eventlog.backends.lmdb import LMDBBackend
from eventlog.backends.memory import MemoryBackend
from eventlog.compression import (
    ACTIVE_DICT_BLOB,
    DEFAULT_MIN_BYTES,
    PLAIN,
    ZSTD,
    ZSTD_DICT,
    Compression,
    dict_blob_key,
    train_dictionary,
)
from tests.strategies import events as event_strategy


def big_text(n: int = 4000) -> el.ModelInput:
    return el.ModelInput.from_text(" ".join(f"word{i % 50}" for i in range(n // 6)))


def conversation(n: int, seed: int = 0) -> list[el.EventData]:
    from eventlog.bench.workload import conversation_events

    return conversation_events(n, seed)


def codecs(store: el.Store, stream: str) -> list[int]:
    return [r.codec for r in store.backend.read(stream, 1, None)]


def record(data: bytes, codec: int) -> Record:
    return Record("id", "conv", 7, 0, "checkpoint", 1, data, b"", None, None, b"h" * 32, codec)


# -- threshold ----------------------------------------------------------------------------------


def test_payloads_above_the_threshold_are_compressed() -> None:
    with el.open("memory://", compression="zstd") as store:
        store.append("s", [el.Checkpoint(label="small"), big_text()])
        assert codecs(store, "s") == [PLAIN, ZSTD]
        (rec,) = store.backend.read("s", 2, 2)
        assert len(rec.data) < DEFAULT_MIN_BYTES
        assert [e.data for e in store.read("s")] == [el.Checkpoint(label="small"), big_text()]
        assert store.verify().ok


def test_threshold_is_configurable() -> None:
    with el.open("memory://?compression=zstd&compress_min_bytes=100000") as store:
        store.append("s", [big_text()])
        assert codecs(store, "s") == [PLAIN]
    with el.open("memory://?compression=zstd&compress_min_bytes=0") as store:
        store.append("s", [el.Checkpoint(label="x")])
        assert codecs(store, "s") == [ZSTD]  # 0: every payload, even when it grows


def test_incompressible_payload_stays_plain() -> None:
    noise = el.Custom(kind="noise", data=os.urandom(4000))
    with el.open("memory://", compression="zstd") as store:
        store.append("s", [noise])
        assert codecs(store, "s") == [PLAIN]


def test_a_payload_above_the_read_limit_stays_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """A frame claiming more than MAX_PLAIN_BYTES reads as damaged (no huge allocation), so a
    larger payload is never compressed: before, a 260 MiB event was acknowledged and could not
    be read back (found in review). Here the limit is lowered to keep the test small."""
    monkeypatch.setattr(compression, "MAX_PLAIN_BYTES", 1000)
    with el.open("memory://", compression="zstd") as store:
        store.append("s", [el.ModelInput.from_text("x" * 5000), el.ModelInput.from_text("y" * 900)])
        assert codecs(store, "s") == [PLAIN, ZSTD]
        assert [len(e.data.text) for e in store.read("s")] == [5000, 900]  # type: ignore[attr-defined]
        assert store.verify().ok
    real = b"z" * (256 * 1024 * 1024 + 1)
    monkeypatch.undo()
    assert Compression("zstd").pack(real) == (real, PLAIN)


def test_compression_is_off_by_default() -> None:
    with el.open("memory://") as store:
        store.append("s", [big_text()])
        assert codecs(store, "s") == [PLAIN]


@pytest.mark.parametrize("level", ["1", "19", "-5"])
def test_levels(level: str) -> None:
    with el.open(f"memory://?compression=zstd&zstd_level={level}") as store:
        store.append("s", [big_text()])
        assert codecs(store, "s") == [ZSTD]
        assert next(store.read("s")).data == big_text()


@pytest.mark.parametrize(
    "query",
    [
        "compression=gzip",
        "compression=zstd&zstd_level=99",
        "compression=zstd&compress_min_bytes=-1",
    ],
)
def test_bad_options(query: str) -> None:
    with pytest.raises(el.UsageError):
        el.open(f"memory://?{query}")


# -- dictionaries --------------------------------------------------------------------------------


def test_trained_dictionary_compresses_small_events(tmp_path: Path) -> None:
    url = f"lmdb://{tmp_path}/d"
    events = conversation(1200)
    with el.open(url, compression="zstd") as store:
        store.append("train", events)
        dict_id = train_dictionary(store)
        assert store.codec.compression.dict_id == dict_id
        assert store.backend.get_blob(dict_blob_key(dict_id)) is not None
        assert store.backend.get_blob(ACTIVE_DICT_BLOB) == str(dict_id).encode()
        store.append("after", events[:300])
        kinds = Counter(codecs(store, "after"))
        assert kinds[ZSTD_DICT] > 250
        plain = sum(len(msgspec.msgpack.encode(e)) for e in events[:300])
        with_dict = sum(len(r.data) for r in store.backend.read("after", 1, None))
        without = sum(len(r.data) for r in store.backend.read("train", 1, 300))
        assert with_dict < without < plain
    # The dictionary is stored with the store: a reopened store reads and keeps using it.
    with el.open(url, compression="zstd") as store:
        assert store.codec.compression.dict_id == dict_id
        assert [e.data for e in store.read("after")] == events[:300]
        store.append("later", [el.ModelInput.from_text("the model reads the file")])
        assert codecs(store, "later") == [ZSTD_DICT]
        assert store.verify().ok
    # Opened without compression: reads everything, writes plain.
    with el.open(url) as store:
        assert [e.data for e in store.read("after")] == events[:300]
        store.append("plain", [big_text()])
        assert codecs(store, "plain") == [PLAIN]


def test_train_without_activation_and_in_a_store_without_compression() -> None:
    with el.open("memory://") as store:
        store.append("s", conversation(600))
        dict_id = train_dictionary(store, size=4096, activate=False)
        assert store.backend.get_blob(ACTIVE_DICT_BLOB) is None
        assert store.codec.compression.dict_id is None
        other = train_dictionary(store, size=4096)
        assert other != dict_id
        assert store.backend.get_blob(ACTIVE_DICT_BLOB) == str(other).encode()
        assert store.codec.compression.dict_id is None  # this store does not compress


def test_training_on_too_little_data_is_a_usage_error() -> None:
    with el.open("memory://", compression="zstd") as store:
        with pytest.raises(el.UsageError, match="append more"):
            train_dictionary(store)
        store.append("s", [el.Checkpoint(label="x")])
        with pytest.raises(el.UsageError):
            train_dictionary(store)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"size": -1}, "size must be"),
        ({"size": 0}, "size must be"),
        ({"size": True}, "size must be"),
        ({"max_samples": 0}, "max_samples must be"),
    ],
)
def test_bad_training_options_are_usage_errors(options: dict[str, int], message: str) -> None:
    with el.open("memory://", compression="zstd") as store:
        store.append("s", [el.ModelInput.from_text(f"turn {i}") for i in range(500)])
        with pytest.raises(el.UsageError, match=message):
            train_dictionary(store, **options)
        assert store.backend.get_blob(ACTIVE_DICT_BLOB) is None


def test_use_of_an_unknown_dictionary_is_refused() -> None:
    with el.open("memory://", compression="zstd") as store, pytest.raises(el.UsageError):
        store.codec.compression.use_dictionary(12345)


# -- mixed settings ------------------------------------------------------------------------------


def test_mixed_settings_in_one_store_read_back(tmp_path: Path) -> None:
    url = f"lmdb://{tmp_path}/mixed"
    events = conversation(900, seed=3)
    with el.open(url) as store:
        store.append("s", events[:300])
    with el.open(url, compression="zstd") as store:
        store.append("s", events[300:600])
        train_dictionary(store)
    with el.open(url, compression="zstd", compress_min_bytes=0) as store:
        store.append("s", events[600:])
    with el.open(url) as store:
        assert {PLAIN, ZSTD, ZSTD_DICT} <= set(codecs(store, "s"))
        assert [e.data for e in store.read("s")] == events
        assert [e.data for e in store.read_all()] == events
        assert store.verify().ok


# -- damage --------------------------------------------------------------------------------------


def test_unknown_codec_is_corruption_naming_stream_and_seq() -> None:
    codec = el.Store(MemoryBackend()).codec
    with pytest.raises(el.CorruptionError) as err:
        codec.unpack(record(b"x", 9), "here")
    assert (err.value.stream, err.value.seq) == ("conv", 7)
    assert "unknown payload codec 9" in str(err.value) and "here" in str(err.value)


def test_unknown_codec_in_a_store(tmp_path: Path) -> None:
    from tests.backends.test_lmdb import raw_rewrite

    with el.open(f"lmdb://{tmp_path}/u") as store:
        store.append("s", [el.Checkpoint(label="a"), el.Checkpoint(label="b")])
        raw_rewrite(store, "s", 2, codec=77)
        with pytest.raises(el.CorruptionError, match="unknown payload codec 77") as err:
            list(store.read("s"))
        assert (err.value.stream, err.value.seq) == ("s", 2)
        assert [(p.stream, p.seq) for p in store.verify().problems] == [("s", 2)]


def test_missing_dictionary_is_corruption_naming_stream_and_seq(tmp_path: Path) -> None:
    path = f"{tmp_path}/m"
    with el.open(f"lmdb://{path}", compression="zstd") as store:
        store.append("s", conversation(600))
        dict_id = train_dictionary(store)
        store.append("t", [el.ModelInput.from_text("hello there, the model reads the file")])
        assert codecs(store, "t") == [ZSTD_DICT]
    backend = LMDBBackend(path)
    with backend.env.begin(write=True) as txn:
        txn.delete(dict_blob_key(dict_id).encode(), db=backend.env.open_db(b"blobs", txn=txn))
    backend.close()
    for options in ({}, {"compression": "zstd"}):  # the store opens with compression on too
        with el.open(f"lmdb://{path}", **options) as store:
            with pytest.raises(el.CorruptionError, match=f"dictionary {dict_id} is missing") as err:
                list(store.read("t"))
            assert (err.value.stream, err.value.seq) == ("t", 1)
            assert [(p.stream, p.seq) for p in store.verify().problems] == [("t", 1)]
            assert store.verify("s").ok
    with el.open(f"lmdb://{path}", compression="zstd") as store:  # new payloads: no dictionary
        store.append("u", [el.ModelInput.from_text("hello there, the model reads the file")])
        assert codecs(store, "u") != [ZSTD_DICT]
        assert [e.seq for e in store.read("u")] == [1]


def test_a_damaged_active_dictionary_name_does_not_keep_the_store_closed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with el.open("memory://", compression="zstd") as store:
        store.append("s", conversation(600))
        train_dictionary(store)
        store.backend.put_blob(ACTIVE_DICT_BLOB, b"2x")
        compression = Compression("zstd", blobs=store.backend.get_blob)
        assert compression.dict_id is None
        assert "damaged" in caplog.text


@pytest.mark.parametrize(
    ("data", "codec", "message"),
    [
        (b"\x28\xb5\x2f\xfd garbage", ZSTD, "does not decompress"),
        (b"not a frame at all", ZSTD, "does not decompress"),
        (b"\x00\x01", ZSTD_DICT, "too short"),
    ],
)
def test_damaged_frames_are_corruption(data: bytes, codec: int, message: str) -> None:
    compression = Compression("zstd")
    with pytest.raises(el.CorruptionError, match=message) as err:
        compression.unpack(record(data, codec))
    assert (err.value.stream, err.value.seq) == ("conv", 7)


@pytest.mark.parametrize("extra", [b"junk", "frame"])
def test_bytes_after_the_frame_are_corruption(extra: bytes | str) -> None:
    """zstd stops at the end of its frame: what follows (an edit) is damage, not ignored."""
    import zstandard

    frame = zstandard.ZstdCompressor().compress(b"x" * 1000)
    tail = frame if extra == "frame" else extra
    assert isinstance(tail, bytes)
    assert Compression("zstd").unpack(record(frame, ZSTD)) == b"x" * 1000
    with pytest.raises(el.CorruptionError, match="unused data"):
        Compression("zstd").unpack(record(frame + tail, ZSTD))


def test_frame_claiming_a_huge_size_is_corruption() -> None:
    import zstandard

    frame = bytearray(zstandard.ZstdCompressor().compress(b"x" * 1000))
    # Frame header descriptor: 8-byte content size, then the size field.
    frame[4] = 0xE0
    huge = (2**40).to_bytes(8, "little")
    frame = frame[:5] + huge + frame[7:]
    with pytest.raises(el.CorruptionError):
        Compression("zstd").unpack(record(bytes(frame), ZSTD))


def test_altered_compressed_payload_fails_verify() -> None:
    with el.open("memory://", compression="zstd") as store:
        store.append("s", [big_text(), big_text(6000)])
        backend = store.backend
        assert isinstance(backend, MemoryBackend)
        (rec,) = backend.read("s", 2, 2)
        data = bytearray(rec.data)
        data[len(data) // 2] ^= 0xFF
        backend.tamper("s", 2, bytes(data))
        report = store.verify()
        assert [(p.stream, p.seq) for p in report.problems] == [("s", 2)]


# -- zstandard missing ---------------------------------------------------------------------------


def test_missing_zstandard_gives_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    with el.open("memory://", compression="zstd") as store:
        store.append("s", [big_text()])
        (rec,) = store.backend.read("s", 1, 1)
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(el.BackendUnavailableError, match=r"agent-eventlog\[zstd\]"):
        el.open("memory://", compression="zstd")
    with pytest.raises(el.BackendUnavailableError, match=r"agent-eventlog\[zstd\]"):
        Compression().unpack(rec)
    with el.open("memory://") as store:  # no compression: zstandard is never imported
        store.append("s", [big_text()])
        assert next(store.read("s")).data == big_text()


# -- round trips ---------------------------------------------------------------------------------

_DICT: list[Compression] = []


def _with_dictionary() -> Compression:
    if not _DICT:
        backend = MemoryBackend()
        store = el.Store(backend, compression="zstd")
        store.append("s", conversation(600))
        train_dictionary(store, size=4096)
        _DICT.append(Compression("zstd", blobs=backend.get_blob))
    return _DICT[0]


@settings(max_examples=200, deadline=None)
@given(
    plain=st.binary(max_size=5000) | st.text(max_size=3000).map(str.encode),
    min_bytes=st.sampled_from([0, 1, 64, 512]),
    level=st.integers(-5, 10),
)
def test_pack_unpack_round_trip(plain: bytes, min_bytes: int, level: int) -> None:
    compression = Compression("zstd", min_bytes=min_bytes, level=level)
    data, codec = compression.pack(plain)
    assert codec in (PLAIN, ZSTD)
    if min_bytes and codec != PLAIN:
        assert len(data) < len(plain)
    assert Compression().unpack(record(data, codec)) == plain


@settings(max_examples=100, deadline=None)
@given(plain=st.binary(max_size=3000) | st.text(max_size=2000).map(str.encode))
def test_dictionary_round_trip(plain: bytes) -> None:
    compression = _with_dictionary()
    data, codec = compression.pack(plain)
    assert compression.unpack(record(data, codec)) == plain


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    batch=st.lists(event_strategy, min_size=1, max_size=6, unique_by=lambda e: e.id),
    min_bytes=st.sampled_from([0, 1, 256]),
)
def test_events_round_trip_compressed(batch: list[el.Event], min_bytes: int) -> None:
    with el.open("memory://", compression="zstd", compress_min_bytes=min_bytes) as store:
        store.append("s", batch)
        read = list(store.read("s"))
        assert [e.data for e in read] == [e.data for e in batch]
        assert [e.meta for e in read] == [e.meta for e in batch]
        assert store.verify().ok
