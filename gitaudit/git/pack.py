"""Writing a batch of git objects as one pack file, the way git keeps a large fetch.

A run's evidence is one tree of many small files: 200 steps make about 800 blobs and 600 trees.
Written one by one as loose objects (libgit2's ``TreeBuilder``), that is a file created for
each, in its fan-out folder: 150 ms to 1.1 s in a benchmark repository when every result
changed (0.5 s in a fresh one); the same objects as one pack take 18 ms. git keeps a fetch as
a pack from 100 objects on (``transfer.unpackLimit``); :data:`PACK_FROM` is that number, so
small ledger writes stay loose and the number of packs grows no faster than a fetching
repository's (``git gc --auto`` merges them past ``gc.autoPackLimit``).

The pack is version 2 with no deltas, its index version 2 (with the 64-bit offset table when the
pack passes 2 GiB); both are fsynced, as git does for packs, and named by the pack's checksum.
The ``.pack`` is renamed into place before its ``.idx``: readers find packs by their index, so
none ever sees an index without its pack. Temporary files start with ``tmp_pack_``, which
``git gc`` knows as debris. Object ids are SHA-1: the only object format libgit2 (and so
pygit2) opens.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path

PACK_FROM = 100  # git's transfer.unpackLimit: a tree of this many objects or more is one pack

#: pack object types (git's ``enum object_type``), also pygit2's ObjectType values
TREE, BLOB = 2, 3
_KIND_NAMES = {1: b"commit", TREE: b"tree", BLOB: b"blob", 4: b"tag"}
_LARGE_OFFSET = 0x80000000  # offsets from here on go to the index's 64-bit table


def object_id(kind: int, data: bytes) -> bytes:
    """The raw (20-byte) id git gives an object of *kind* holding *data*."""
    h = hashlib.sha1(_KIND_NAMES[kind], usedforsecurity=False)
    h.update(b" %d\0" % len(data))
    h.update(data)
    return h.digest()


def tree_data(entries: Iterable[tuple[str, bool, bytes]]) -> bytes:
    """The body of a tree of ``(name, is_tree, raw id)`` entries, in git's order: by name, a
    tree's name compared as if it ended in ``/``. Modes are git's canonical ``40000`` (tree)
    and ``100644`` (blob). Names are the caller's to check (no ``/``, no NUL, not ``.git``)."""
    rows = sorted(
        ((name.encode(), is_tree, oid) for name, is_tree, oid in entries),
        key=lambda row: row[0] + b"/" if row[1] else row[0],
    )
    return b"".join(
        (b"40000 " if is_tree else b"100644 ") + name + b"\0" + oid for name, is_tree, oid in rows
    )


def _entry_header(kind: int, size: int) -> bytes:
    """A pack entry's type and size: 3 bits of type and 4 of size, then 7 bits of size a byte."""
    out = bytearray()
    byte = (kind << 4) | (size & 0x0F)
    size >>= 4
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def write_pack(directory: Path, objects: Mapping[bytes, tuple[int, bytes]]) -> Path:
    """Store *objects* (raw id -> (kind, data)) as one pack and its index in *directory*
    (``objects/pack``); returns the index's path. Ids are trusted: they are the caller's
    :func:`object_id` of the same data. OSError when the folder cannot be written."""
    names = sorted(objects)
    directory.mkdir(exist_ok=True)
    offsets: list[int] = []
    crcs: list[int] = []
    pack_tmp = idx_tmp = ""
    try:
        fd, pack_tmp = _temporary(directory)
        with os.fdopen(fd, "wb") as out:
            digest = hashlib.sha1(usedforsecurity=False)
            head = b"PACK" + struct.pack(">II", 2, len(names))
            out.write(head)
            digest.update(head)
            position = len(head)
            for name in names:
                kind, data = objects[name]
                entry = _entry_header(kind, len(data)) + zlib.compress(data, 1)
                offsets.append(position)
                crcs.append(zlib.crc32(entry))
                out.write(entry)
                digest.update(entry)
                position += len(entry)
            checksum = digest.digest()
            out.write(checksum)
            out.flush()
            os.fsync(out.fileno())
        index = _index(names, crcs, offsets, checksum)
        fd, idx_tmp = _temporary(directory)
        with os.fdopen(fd, "wb") as out:
            out.write(index)
            out.flush()
            os.fsync(out.fileno())
        final = directory / f"pack-{checksum.hex()}"
        for tmp, suffix in ((pack_tmp, ".pack"), (idx_tmp, ".idx")):
            os.chmod(tmp, 0o444)  # as git leaves packs: nobody rewrites one in place
            os.replace(tmp, final.with_suffix(suffix))  # the same name holds the same bytes
        pack_tmp = idx_tmp = ""
        return final.with_suffix(".idx")
    finally:
        for tmp in (pack_tmp, idx_tmp):
            if tmp:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


def _temporary(directory: Path) -> tuple[int, str]:
    """A new file in *directory* no other writer can have opened (``O_EXCL``)."""
    while True:
        path = str(directory / f"tmp_pack_{os.urandom(8).hex()}")
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), path
        except FileExistsError:
            continue


def _index(names: list[bytes], crcs: list[int], offsets: list[int], checksum: bytes) -> bytes:
    """A version 2 pack index: fan-out, sorted ids, CRCs, offsets (and the 64-bit ones), the
    pack's checksum, and the index's own."""
    fanout = [0] * 256
    for name in names:
        fanout[name[0]] += 1
    total = 0
    for byte in range(256):
        total += fanout[byte]
        fanout[byte] = total
    small: list[int] = []
    large: list[int] = []
    for offset in offsets:
        if offset < _LARGE_OFFSET:
            small.append(offset)
        else:
            small.append(_LARGE_OFFSET | len(large))
            large.append(offset)
    count = len(names)
    body = b"".join(
        [
            b"\xfftOc",
            struct.pack(">I", 2),
            struct.pack(">256I", *fanout),
            *names,
            struct.pack(f">{count}I", *crcs),
            struct.pack(f">{count}I", *small),
            struct.pack(f">{len(large)}Q", *large),
            checksum,
        ]
    )
    return body + hashlib.sha1(body, usedforsecurity=False).digest()
