"""Raw tree objects as git writes them, read in C.

One grammar for the entries of a tree object's body (``mode name\\0id``: a mode git writes, a
name without ``/`` or NUL, an id of *size* bytes), shared by the input digests
(:mod:`gitaudit.plan.inputs`) and the fingerprint's look for attributes
(:mod:`gitaudit.git.conversions`, on every hook's path: this module imports ``re`` alone).
A body that does not match exactly is not read here; each caller reads it its own slow way.
"""

from __future__ import annotations

import re
from functools import lru_cache

FOLDER = b"40000"
"""The mode git writes for a folder's entry."""


@lru_cache(maxsize=4)
def patterns(size: int) -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """One entry, as ``(mode, name, id)`` groups, and a whole body made of such entries (its
    quantifiers possessive: the grammar leaves nothing to backtrack into)."""
    one = rb"(100644|100755|120000|160000|40000) ([^\0/]++)\0(.{%d})" % size
    return re.compile(one, re.S), re.compile(rb"(?:%s)*+" % one, re.S)


@lru_cache(maxsize=4)
def plain(size: int) -> re.Pattern[bytes]:
    """A whole body holding only files, executable files and folders (no symlink, no
    submodule), none named ``.`` or ``..``."""
    entry = rb"(?:100644|100755|40000) (?!\.\.?\0)[^\0/]++\0.{%d}" % size
    return re.compile(rb"(?:%s)*+" % entry, re.S)


def folders(body: bytes, size: int) -> list[tuple[bytes, bytes]] | None:
    """(name, raw id) of each folder a body as git writes them names; None for any other."""
    entry, whole = patterns(size)
    if whole.fullmatch(body) is None:
        return None
    if FOLDER + b" " not in body:  # most bodies hold no folder at all
        return []
    return [(name, oid) for mode, name, oid in entry.findall(body) if mode == FOLDER]
