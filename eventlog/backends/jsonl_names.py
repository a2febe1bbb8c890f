"""Stream names -> safe, collision-free file names for the JSONL backend.

A file name is a readable slug of the name plus a hash of the exact name: `Chat/42` becomes
`chat_42~<16 hex>`. The slug only uses `[a-z0-9_-]`, so no name can escape the directory (no `/`,
no `.`, no NUL, no drive letters) or hit a reserved Windows name (the `~hash` suffix is always
there). The hash covers the exact, case-sensitive name, so `A` and `a`, `a/b` and `a_b`, or names
whose slugs agree get different files, also on case-insensitive file systems. The mapping is not
reversible: each stream file records its exact name in its header line.
"""

from __future__ import annotations

import hashlib
import re

SLUG_CHARS = 48
"""Longest readable part kept in a file name."""
HASH_CHARS = 16
"""Hex digits of the name's hash in a file name (64 bits)."""

_UNSAFE = re.compile(r"[^a-z0-9_-]+")
_STEM = re.compile(rf"^[a-z0-9_-]{{1,{SLUG_CHARS}}}~[0-9a-f]{{{HASH_CHARS}}}$")


def name_hash(name: str) -> str:
    """Hex digest of the exact name (UTF-8, surrogates escaped)."""
    raw = name.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(raw, digest_size=HASH_CHARS // 2).hexdigest()


def slug(name: str) -> str:
    """The readable part: lower case, every run of other characters folded to `_`."""
    folded = _UNSAFE.sub("_", name.lower()).strip("_")[:SLUG_CHARS]
    return folded or "_"


def stem_for(name: str) -> str:
    """The file stem (no extension) of a name: `<slug>~<hash>`."""
    return f"{slug(name)}~{name_hash(name)}"


def is_stem(text: str) -> bool:
    """Whether a file stem has the shape `stem_for` produces (other files are ignored)."""
    return _STEM.match(text) is not None
