"""Opening stores from URLs: schemes, options, clear errors."""

from __future__ import annotations

import pytest

import eventlog as el


@pytest.mark.parametrize(
    ("url", "error", "match"),
    [
        ("nonsense", el.UsageError, "not a store URL"),
        ("ftp://x", el.UsageError, "unknown store URL scheme 'ftp'"),
        ("memory://?bogus=1", el.UsageError, "bogus"),
        ("memory://?durability=sometimes", el.UsageError, "sometimes"),
        ("memory://?zstd_level=abc", el.UsageError, "zstd_level must be an integer, got 'abc'"),
        ("memory://?max_event_bytes=1.5", el.UsageError, "max_event_bytes must be an integer"),
        ("memory://?poll_interval=soon", el.UsageError, "poll_interval must be a number"),
        ("memory://?poll_interval=inf", el.UsageError, "poll_interval must be finite"),
        ("memory://?poll_interval=nan", el.UsageError, "poll_interval must be finite"),
        ("lmdb:///tmp/x?map_size=" + "1" * 24, el.UsageError, "map_size must be between 1"),
        ("lmdb:///tmp/x?max_readers=100000000000", el.UsageError, "max_readers must be between"),
        ("jsonl:///tmp/x?lock_timeout=nan", el.UsageError, "lock_timeout must be a number"),
        ("jsonl:///tmp/x?lock_timeout=inf", el.UsageError, "lock_timeout must be a number"),
        ("sqlite:///tmp/x.db?busy_timeout=-5", el.UsageError, "busy_timeout must be a number"),
        ("sqlite:///tmp/x.db?busy_timeout=nan", el.UsageError, "busy_timeout must be a number"),
    ],
)
def test_bad_urls(url: str, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        el.open(url)


def test_options_from_url_and_keywords() -> None:
    with el.open("memory://?durability=batch&poll_interval=0.5") as store:
        assert store.durability == el.Durability.BATCH and store.poll_interval == 0.5
    with el.open("memory://", durability="none") as store:
        assert store.durability == el.Durability.NONE


def test_max_event_bytes_bounds_payloads() -> None:
    with el.open("memory://?max_event_bytes=100") as store:
        with pytest.raises(el.ValidationError, match="limit is 100"):
            store.append("s", [el.ModelInput.from_text("x" * 200)])
        assert not store.exists("s")
