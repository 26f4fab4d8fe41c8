"""The stat data a git index records for each of its files, read straight from the index bytes.

When git writes a file into a work tree it ``lstat``\\ s it and keeps the result in the index
entry. For a checkout git has just written, that is what a walk of the folder would find, at no
cost but reading one file: the private checkout (:mod:`gitaudit.run.checkout`) takes the
*before* stamps of its purity check from it instead of walking 50,000 files.

Only index format versions 2 and 3 with every entry in the file are read (no split index, no
sparse directory entries); for anything else :func:`file_stamps` returns None and the caller
walks. git keeps 32 bits of the inode and of the change time's seconds: :func:`stamp_of` cuts an
``lstat`` result the same way, so the two compare.
"""

from __future__ import annotations

import os
import stat
import struct

MASK = 0xFFFF_FFFF

Stamp = tuple[int, int, int]
"""A file's inode and change time (seconds, nanoseconds), cut to 32 bits as git keeps them."""

_HEAD = struct.Struct(">4sII")  # signature, version, number of entries
_FIXED = 40  # ctime, mtime, dev, ino, mode, uid, gid, size: ten 32-bit fields, then the id
_EXTENDED = 0x4000
_NAME_MASK = 0x0FFF
_FILES = (stat.S_IFREG, stat.S_IFLNK)
_WHOLE_INDEX_ONLY = (b"link", b"sdir")  # a split index's entries live elsewhere; sparse dirs


def stamp_of(st: os.stat_result) -> Stamp:
    """(inode, change time's seconds and nanoseconds) of *st*, cut to what a git index keeps."""
    seconds, nanos = divmod(st.st_ctime_ns, 1_000_000_000)
    return st.st_ino & MASK, seconds & MASK, nanos


def file_stamps(data: bytes, oid_size: int, prefix: str = "") -> dict[str, Stamp] | None:
    """*prefix* + path -> :data:`Stamp` of every file and symlink entry of the index *data*
    (object ids of *oid_size* bytes), as :func:`stamp_of` gives them. None when the index is
    not one this reads whole (another version, a split or sparse index, entries or extensions
    that do not end where the checksum begins), or when git kept no sub-second change times (a
    build without them: the comparison with ``lstat`` would then flag every file)."""
    if len(data) < _HEAD.size:
        return None
    signature, version, count = _HEAD.unpack_from(data)
    if signature != b"DIRC" or version not in (2, 3):
        return None
    # ctime seconds and nanoseconds, (mtime, dev), inode, mode, (uid, gid, size, id), flags
    unpack = struct.Struct(f">II12xII{12 + oid_size}xH").unpack_from
    names: list[bytes] = []
    stamps: list[Stamp] = []
    fixed, end, pos, nanos_seen = _FIXED + oid_size + 2, len(data) - oid_size, _HEAD.size, 0
    try:
        for _ in range(count):
            seconds, nanos, ino, mode, flags = unpack(data, pos)
            name_at = pos + fixed + (2 if flags & _EXTENDED else 0)
            length = flags & _NAME_MASK
            if length == _NAME_MASK:
                length = data.index(b"\0", name_at) - name_at
            if mode & 0o170000 in _FILES:
                names.append(data[name_at : name_at + length])
                stamps.append((ino, seconds, nanos))
                nanos_seen |= nanos
            pos += (name_at - pos + length + 8) & ~7
    except (struct.error, ValueError):
        return None
    while pos + 8 <= end:  # extensions: a signature and a size each
        if data[pos : pos + 4] in _WHOLE_INDEX_ONLY:
            return None
        pos += 8 + int.from_bytes(data[pos + 4 : pos + 8], "big")
    if pos != end or (stamps and not nanos_seen):
        return None
    paths = os.fsdecode(b"\0".join(names)).split("\0") if names else []
    return dict(zip([prefix + path for path in paths], stamps, strict=True))
