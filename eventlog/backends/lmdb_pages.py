"""A structural check of an LMDB file, made without liblmdb: damage it could not survive reading.

liblmdb trusts its pages: a damaged page header, node offset or child page number sends its reads
outside the map, and the process dies of SIGSEGV or SIGBUS instead of raising. Before `verify`
lets liblmdb walk a store, this walks the B-trees of the snapshot it will read with `pread`
and checks what liblmdb relies on: every page a tree reaches lies inside the file, says it is
the page it was reached as and has the kind its parent expects, its nodes lie inside it, its
leaves sit at the tree's depth, no page is reached twice, and each tree's page and entry counts
are what its header says. Key and value bytes are eventlog's to check (hashes, decoding).

Format: LMDB 0.9 on a 64-bit little-endian machine (what the `lmdb` package builds), no
duplicate-sorted databases (eventlog uses none).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import NamedTuple

PAGE_HEADER = 16
"""pgno (8), pad (2), flags (2), lower and upper (2 + 2) or an overflow run's page count (4)."""
NODE_HEADER = 8
"""lo, hi, flags and key size (2 each); a branch node's child is lo | hi << 16 | flags << 32."""
P_BRANCH, P_LEAF, P_OVERFLOW, P_META = 0x01, 0x02, 0x04, 0x08
_P_IGNORED = 0x10 | 0x4000 | 0x8000
"""Flags of pages in memory only (dirty, loose, keep): not part of a page's kind."""
_KINDS = {P_BRANCH: "branch", P_LEAF: "leaf"}
F_BIGDATA, F_SUBDATA = 0x01, 0x02
P_INVALID = 2**64 - 1
"""The root of an empty tree."""
MAGIC, DATA_VERSION = 0xBEEFC0DE, 1

_PAGE = struct.Struct("<QHHHH")
_NODE = struct.Struct("<HHHH")
_DB = struct.Struct("<IHHQQQQQ")
"""MDB_db: pad, flags, depth, branch, leaf and overflow page counts, entries, root."""
_META = struct.Struct("<IIQQ")
"""The start of MDB_meta: magic, version, fixed address, map size; then two MDB_db, the
last page number and the transaction id."""
_U64 = struct.Struct("<Q")


class Tree(NamedTuple):
    """One B-tree as its header (MDB_db) describes it."""

    name: str
    depth: int
    branch_pages: int
    leaf_pages: int
    overflow_pages: int
    entries: int
    root: int

    @classmethod
    def parse(cls, name: str, raw: bytes) -> Tree:
        """The tree of a packed MDB_db."""
        _, _, depth, branch, leaf, overflow, entries, root = _DB.unpack(raw)
        return cls(name, depth, branch, leaf, overflow, entries, root)


class Damage(Exception):
    """What is wrong with the file, in words."""


class Meta(NamedTuple):
    """One of the two meta pages: the trees and extent of one committed snapshot."""

    page_size: int
    free: Tree
    main: Tree
    last_page: int
    txnid: int


def read_meta(fd: int, index: int, page_size: int = 4096) -> Meta:
    """Meta page 0 or 1 (at `index` * page size); Damage if it is not one."""
    raw = os.pread(fd, PAGE_HEADER + _META.size + 2 * _DB.size + 16, index * page_size)
    if len(raw) < PAGE_HEADER + _META.size + 2 * _DB.size + 16:
        raise Damage(f"meta page {index} is cut short")
    _, _, flags, _, _ = _PAGE.unpack_from(raw)
    magic, version, _, _ = _META.unpack_from(raw, PAGE_HEADER)
    if not flags & P_META or magic != MAGIC or version != DATA_VERSION:
        raise Damage(f"page {index} is not an LMDB meta page")
    at = PAGE_HEADER + _META.size
    free = Tree.parse("free pages", raw[at : at + _DB.size])
    main = Tree.parse("main", raw[at + _DB.size : at + 2 * _DB.size])
    last_page, txnid = struct.unpack_from("<QQ", raw, at + 2 * _DB.size)
    psize = _DB.unpack_from(raw, at)[0]  # the page size is kept in the free tree's pad
    return Meta(psize, free, main, last_page, txnid)


class Walker:
    """Walks the trees of one snapshot of an LMDB file (see the module docstring)."""

    def __init__(self, fd: int, meta: Meta) -> None:
        self._fd = fd
        self._meta = meta
        self._psize = meta.page_size
        self._seen: set[int] = set()
        size = os.fstat(fd).st_size
        if meta.page_size < 512 or meta.page_size & (meta.page_size - 1):
            raise Damage(f"page size {meta.page_size} is not one LMDB writes")
        if (meta.last_page + 1) * self._psize > size:
            raise Damage(f"the file ends before its last page {meta.last_page}")

    def check(self, tree: Tree) -> list[tuple[bytes, Tree]]:
        """Walk one tree; Damage on the first fault. The named trees its leaves hold (main)."""
        if tree.root == P_INVALID:
            if tree.depth or tree.entries or tree.branch_pages or tree.leaf_pages:
                raise Damage(f"the {tree.name} tree is empty but its header counts pages")
            return []
        counts = [0, 0, 0, 0]  # branch, leaf, overflow pages, entries
        named: list[tuple[bytes, Tree]] = []
        for key, flags, value in self._walk(tree, tree.root, 1, counts):
            if flags & F_SUBDATA:
                if len(value) != _DB.size:
                    raise Damage(f"named tree {key!r} has a header of {len(value)} bytes")
                named.append((key, Tree.parse(key.decode(errors="replace"), value)))
        expected = [tree.branch_pages, tree.leaf_pages, tree.overflow_pages, tree.entries]
        if counts != expected:
            raise Damage(
                f"the {tree.name} tree holds {counts[1]} leaf, {counts[0]} branch and {counts[2]} "
                f"overflow pages and {counts[3]} entries; its header says {expected[1]}, "
                f"{expected[0]}, {expected[2]} and {expected[3]}"
            )
        return named

    def _page(self, pgno: int, name: str) -> bytes:
        last = self._meta.last_page
        if pgno < 2 or pgno > last:
            raise Damage(f"the {name} tree points to page {pgno}, outside pages 2-{last}")
        self._mark(pgno)
        raw = os.pread(self._fd, self._psize, pgno * self._psize)
        if len(raw) < self._psize:
            raise Damage(f"page {pgno} is cut short")
        (stored,) = _U64.unpack_from(raw)
        if stored != pgno:
            raise Damage(f"page {pgno} says it is page {stored}")
        return raw

    def _mark(self, pgno: int) -> None:
        if pgno in self._seen:
            raise Damage(f"page {pgno} is reached twice (a loop or a shared page)")
        self._seen.add(pgno)

    def _nodes(self, raw: bytes, where: str, kind: int) -> list[int]:
        """Offsets of a branch or leaf page's nodes, once its header is checked."""
        _, _, flags, lower, upper = _PAGE.unpack_from(raw)
        if flags & ~_P_IGNORED != kind:
            raise Damage(f"{where} has flags {flags:#x}, not a {_KINDS[kind]} page")
        if not PAGE_HEADER <= lower <= upper <= self._psize or (lower - PAGE_HEADER) % 2:
            raise Damage(f"{where} has a free space of {lower}-{upper}")
        n = (lower - PAGE_HEADER) // 2
        if n == 0:
            raise Damage(f"{where} holds no nodes")
        ptrs = list(struct.unpack_from(f"<{n}H", raw, PAGE_HEADER))
        if min(ptrs) < upper or max(ptrs) + NODE_HEADER > self._psize:
            raise Damage(f"{where} has a node outside its bytes {upper}-{self._psize}")
        return ptrs

    def _walk(
        self, tree: Tree, pgno: int, depth: int, counts: list[int]
    ) -> Iterator[tuple[bytes, int, bytes]]:
        """(key, node flags, value) of each leaf node under page `pgno`, checking as it goes."""
        raw = self._page(pgno, tree.name)
        where = f"page {pgno} of the {tree.name} tree"
        if depth > tree.depth:
            raise Damage(f"{where} is at depth {depth}; the tree's leaves are at {tree.depth}")
        leaf = depth == tree.depth
        ptrs = self._nodes(raw, where, P_LEAF if leaf else P_BRANCH)
        counts[1 if leaf else 0] += 1
        for ptr in ptrs:
            lo, hi, nflags, ksize = _NODE.unpack_from(raw, ptr)
            key_end = ptr + NODE_HEADER + ksize
            if key_end > self._psize:
                raise Damage(f"{where} has a key that runs past the page")
            key = raw[ptr + NODE_HEADER : key_end]
            if not leaf:
                yield from self._walk(tree, lo | hi << 16 | nflags << 32, depth + 1, counts)
                continue
            counts[3] += 1
            yield key, nflags, self._value(raw, where, tree, nflags, key_end, lo | hi << 16, counts)

    def _value(
        self, raw: bytes, where: str, tree: Tree, flags: int, at: int, size: int, counts: list[int]
    ) -> bytes:
        """A leaf node's value (empty for a big one, whose overflow pages are checked)."""
        if flags & ~(F_BIGDATA | F_SUBDATA):
            raise Damage(f"{where} has a node with flags {flags:#x}")
        if flags & F_BIGDATA:
            if at + 8 > self._psize:
                raise Damage(f"{where} has an overflow pointer that runs past the page")
            counts[2] += self._overflow(tree, _U64.unpack_from(raw, at)[0], size)
            return b""
        if at + size > self._psize:
            raise Damage(f"{where} has a value that runs past the page")
        return raw[at : at + size]

    def _overflow(self, tree: Tree, first: int, size: int) -> int:
        """Check the run of overflow pages a big value starts at; the number of pages."""
        head = self._page(first, tree.name)
        _, _, flags, pages = struct.unpack_from("<QHHI", head)
        if flags & ~_P_IGNORED != P_OVERFLOW:
            raise Damage(f"page {first} of the {tree.name} tree should start a big value")
        if pages < 1 or first + pages - 1 > self._meta.last_page:
            raise Damage(f"the big value at page {first} claims {pages} pages")
        if size > pages * self._psize - PAGE_HEADER:
            raise Damage(f"the big value at page {first} is {size} bytes in {pages} pages")
        for pgno in range(first + 1, first + pages):
            self._mark(pgno)
        return int(pages)


def check_file(fd: int, txnid: int) -> str | None:
    """Damage in the snapshot `txnid` of the LMDB data file open at `fd`, in words, or None.

    Call it while a read transaction of that snapshot is open (`txn.id()`): its pages cannot be
    reused until then. None too if the snapshot's meta page was already overwritten by two later
    commits (there is nothing left to check it against).
    """
    try:
        first = read_meta(fd, 0)
        metas = [first, read_meta(fd, 1, first.page_size)]
        meta = next((m for m in metas if m.txnid == txnid), None)
        if meta is None:
            return None
        walker = Walker(fd, meta)
        walker.check(meta.free)
        for _, tree in walker.check(meta.main):
            walker.check(tree)
    except Damage as exc:
        return str(exc)
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        return f"unreadable structure: {exc}"
    return None
