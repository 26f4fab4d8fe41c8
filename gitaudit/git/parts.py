"""Hashing a whole work tree in parts, one ``git add -A`` per core, into one index.

With nothing kept (the first fingerprint in a clone, new settings), every file of the work tree
is read and hashed: four system calls a file, on one core, about five times what a ``git
status`` costs. git hashes in one thread, so the work is cut here: the work tree's paths, in
the index's own order, are cut into contiguous ranges, each range is hashed by its own ``git
add -A`` into its own index, and the indexes are joined, entries one after the other.

* The cut points are paths of the user's index, picked at even offsets of its listing (so each
  part has about as many tracked files; the user's index only chooses where to cut: any cut
  gives the same result). A range is named to git by what it is not: every path before its
  first cut point and every path from its last, as ``:(exclude,literal)`` pathspecs of whole
  folders and files, found by listing the folders above the cut point. Only exclusions: a
  pathspec that matches nothing is not an error then. git matches every path against every
  exclusion, so a cut needing many names (inside a folder of thousands of files) is moved up to
  a folder boundary. An excluded path that is ignored (``build/``) makes git list it as if
  named on the command line, and exit 1 (having added the part's files all the same): that is
  taken as
  success when the list names only paths the part excluded, or folders above them.
* In the index, paths are ordered by their bytes, where a folder's contents sort as its name
  followed by ``/``: folders and files before the cut point are ordered that way, so the parts
  hold disjoint, consecutive runs of paths.
* Each part writes a version 4 index (the kept index's) with an End of Index Entries extension,
  which says where its entries end. The joined index has the entries alone, behind one header:
  version 4 writes each name as what it keeps of the name before, so the first entry of each
  part after the first is re-encoded against the last name of the part before (from git's
  report). It takes the modification time of the oldest part, so that an entry git would
  re-check as racily clean in any part is re-checked.
* The join is checked, not assumed, on git's own reading of it (:func:`in_order`): as many
  paths, each part's first and last path where its report puts them, each part's last before
  the next part's first. That fails for any path a part was not meant to hold (a file created
  while the parts ran, a submodule, one entry, ordered as a folder) and for any name read back
  otherwise. The caller then hashes the work tree in one ``git add -A``, as without parts; so it
  does for any part git did not finish cleanly.
"""

from __future__ import annotations

import hashlib
import os
import struct

from gitaudit.git.head_start import unread

ENTRIES_PER_PART = 4_000
"""Tracked files a part must have at least: below that, one more git costs what it saves."""
MAX_PARTS = 8
MAX_EXCLUSIONS = 32
"""Names a cut point may need (the folders and files beside it and above it): git matches each
path against each (on 25,000 paths, 0.6 ms a name against 150 ms of hashing)."""

PART_CONFIG = (
    "-c",
    "index.version=4",
    "-c",
    "index.recordEndOfIndexEntries=true",
    "-c",
    "advice.addIgnoredFile=false",
)
"""Settings of each part's git (after the fingerprint's own): the kept index's version (git keeps
an index's version once written), and the extension that says where the entries end."""

_EXCLUDE = b":(exclude,literal)"
_IGNORED = b"The following paths are ignored by one of your .gitignore files:\n"
_HEAD = struct.Struct(">4sII")
_EXTENDED = 0x4000


def parts_for(listing: bytes, cores: int) -> int:
    """How many parts to hash a work tree whose user index lists *listing* in (1: no split)."""
    return max(1, min(cores, MAX_PARTS, listing.count(b"\0") // ENTRIES_PER_PART))


def cut_points(listing: bytes, parts: int) -> list[tuple[bytes, int]] | None:
    """*parts* - 1 tracked paths of *listing* (``ls-files --stage -z``, sorted) at even offsets,
    increasing, each with its offset; None when they are not (too few distinct paths)."""
    points: list[tuple[bytes, int]] = []
    for k in range(1, parts):
        start = listing.find(b"\0", len(listing) * k // parts)
        tab = listing.find(b"\t", start + 1)
        end = listing.find(b"\0", tab + 1)
        if start < 0 or tab < 0 or end < 0:
            return None
        path = listing[tab + 1 : end]
        if points and path <= points[-1][0]:
            return None
        points.append((path, tab))
    return points


class _Folders:
    """The entries of the work tree's folders, listed once each: (name, is a folder)."""

    def __init__(self, root: bytes) -> None:
        self.root = root
        self.seen: dict[bytes, list[tuple[bytes, bool]] | None] = {}

    def entries(self, folder: bytes) -> list[tuple[bytes, bool]] | None:
        if folder not in self.seen:
            where = os.path.join(self.root, folder) if folder else self.root
            try:
                with os.scandir(where) as found:
                    listed = [(e.name, e.is_dir(follow_symlinks=False)) for e in found]
                self.seen[folder] = [(n, d) for n, d in listed if n != b".git"]
            except OSError:
                self.seen[folder] = None
        return self.seen[folder]


class _Cut:
    """The paths before a cut point and the paths from it, as whole files and folders."""

    def __init__(self, before: list[bytes], after: list[bytes]) -> None:
        self.before = before
        self.after = after


def _cut(folders: _Folders, listing: bytes, point: bytes, at: int, slack: int) -> _Cut | None:
    """The cut at *point* (at offset *at* of *listing*), moved up to the shallowest folder
    boundary above it that moves it by at most *slack* bytes of the listing, or else to the
    deepest that needs at most :data:`MAX_EXCLUSIONS` names (git matches each path against
    every one); None when even the top level needs more, or the top folder cannot be listed."""
    parts = point.split(b"/")
    best: _Cut | None = None
    before: list[bytes] = []
    after: list[bytes] = []
    for depth in range(len(parts)):
        parent = b"/".join(parts[:depth])
        entries = folders.entries(parent)
        if entries is None:
            return best
        name = parts[depth]
        last = depth == len(parts) - 1
        here = name if last else name + b"/"
        prefix = parent + b"/" if parent else b""
        for entry, is_dir in entries:
            if entry == name:
                continue
            (before if (entry + b"/" if is_dir else entry) < here else after).append(prefix + entry)
        if len(before) + len(after) + 1 > MAX_EXCLUSIONS:
            return best
        # cut here: the point's folder (or file) and everything after it go from the point on
        best = _Cut(list(before), [*after, prefix + name])
        first = listing.find(b"\t" + prefix + here)  # where that folder's paths begin
        if 0 <= at - first <= slack:
            return best
    return best


def exclusions(
    work_tree: bytes, listing: bytes, points: list[tuple[bytes, int]]
) -> list[bytes] | None:
    """For each part (one more than the distinct cuts at *points*), the pathspecs that leave it
    its range (NUL-separated, for ``git add --pathspec-from-file --pathspec-file-nul``); None
    when the work tree cannot be cut there."""
    folders = _Folders(work_tree)
    cuts: list[_Cut] = []
    slack = len(listing) // (len(points) + 1) // 4  # a quarter of a part
    for point, at in points:
        cut = _cut(folders, listing, point, at, slack)
        if cut is None:
            return None
        if not cuts or cuts[-1].after != cut.after:  # two cut points at one folder: one cut
            cuts.append(cut)
    specs: list[bytes] = []
    for k in range(len(cuts) + 1):
        paths = (cuts[k - 1].before if k else []) + (cuts[k].after if k < len(cuts) else [])
        specs.append(b"".join(_EXCLUDE + path + b"\0" for path in paths))
    return specs


def succeeded(code: int, messages: bytes, spec: bytes) -> bool:
    """Whether a part's ``git add`` (exit *code*, *messages* on stderr, given the pathspecs
    *spec*) did its work: exit 0, or exit 1 listing as ignored only paths *spec* excludes or
    folders above them (an excluded path that is ignored is listed as one named would be)."""
    if unread(messages) is not None:  # git could not read something: one process explains
        return False
    if code == 0:
        return True
    if code != 1 or not messages.startswith(_IGNORED):
        return False
    named = [item[len(_EXCLUDE) :] for item in spec.split(b"\0") if item]
    listed = messages[len(_IGNORED) :].split(b"\n")
    return all(
        any(path == name or name.startswith(path + b"/") for name in named)
        for path in listed
        if path
    )


def _entries(data: bytes) -> tuple[int, int, bytes, int] | None:
    """(version, entry count, entries, hash size) of the index *data* whose entries end where
    its End of Index Entries extension says; None for anything else."""
    if len(data) < _HEAD.size:
        return None
    signature, version, count = _HEAD.unpack_from(data)
    for size in (20, 32):  # SHA-1, SHA-256
        at = len(data) - size - 8 - 4 - size
        if at < _HEAD.size or data[at : at + 4] != b"EOIE":
            continue
        length, end = struct.unpack_from(">II", data, at + 4)
        if length == 4 + size and _HEAD.size <= end <= at and signature == b"DIRC":
            return (version, count, data[_HEAD.size : end], size) if version == 4 else None
    return None


def _varint(value: int) -> bytes:
    """*value* as git's index version 4 writes a prefix length (the offset encoding of packs)."""
    out = bytearray([value & 0x7F])
    value >>= 7
    while value:
        value -= 1
        out.insert(0, 0x80 | (value & 0x7F))
        value >>= 7
    return bytes(out)


def _after(entries: bytes, hash_size: int, previous: bytes) -> bytes | None:
    """*entries*, the first of an index, re-encoded to follow an entry named *previous*: in
    version 4 each name is written as what it drops of the name before and what it adds, and
    the first drops nothing (one byte 0) of an empty name. None for anything else."""
    flags_at = 40 + hash_size
    if len(entries) < flags_at + 3:
        return None
    flags = int.from_bytes(entries[flags_at : flags_at + 2], "big")
    at = flags_at + 2 + (2 if flags & _EXTENDED else 0)
    if entries[at] != 0:
        return None
    return entries[:at] + _varint(len(previous)) + entries[at + 1 :]


def ends(report: bytes) -> tuple[bytes, bytes]:
    """The first and the last path a ``git add --verbose`` from no index reported (it adds in
    the index's order); empty when it reported no path."""
    lines = report.rstrip(b"\n")
    first, last = lines.split(b"\n", 1)[0], lines.rsplit(b"\n", 1)[-1]
    if not (first.startswith(b"add '") and last.startswith(b"add '")):
        return b"", b""
    return first[5:-1], last[5:-1]


def join(part_files: list[str], dest: str, lasts: list[bytes]) -> list[int] | None:
    """Write the index *dest* holding the entries of the indexes *part_files*, in order, with
    the modification time of the oldest (an entry any part would re-check as racily clean
    stays re-checked); *lasts*: the last path of each part, from its report. The parts' entry
    counts, or None (and nothing written) unless each part is an index of version 4 with an
    End of Index Entries extension, all with one hash. That the paths are what the reports
    say, and in order, is for the caller to check on git's own reading (:func:`in_order`)."""
    chunks: list[bytes] = []
    counts: list[int] = []
    hash_size, oldest = 0, -1
    previous = b""
    for path, last in zip(part_files, lasts, strict=True):
        with open(path, "rb") as handle:
            data = handle.read()
            mtime = os.fstat(handle.fileno()).st_mtime_ns
        found = _entries(data)
        if found is None or (hash_size and found[3] != hash_size):
            return None
        _, count, entries, hash_size = found
        if count and previous:
            moved = _after(entries, hash_size, previous)
            if moved is None:
                return None
            entries = moved
        counts.append(count)
        chunks.append(entries)
        previous = last if count else previous
        oldest = mtime if oldest < 0 else min(oldest, mtime)
    body = _HEAD.pack(b"DIRC", 4, sum(counts)) + b"".join(chunks)
    digest = (hashlib.sha256 if hash_size == 32 else hashlib.sha1)(body).digest()
    with open(dest, "xb") as handle:
        handle.write(body + digest)
    os.utime(dest, ns=(oldest, oldest))
    return counts


def in_order(listing: bytes, counts: list[int], firsts: list[bytes], lasts: list[bytes]) -> bool:
    """Whether git reads the joined index as the parts made it (*listing*: its ``ls-files
    -z``): as many paths, each part's first and last path where its entries begin and end
    (*firsts*, *lasts*, from the reports; so every re-encoded name is read back as it was), and
    each part's last before the next part's first: the index's order holds."""
    paths = listing.split(b"\0")[:-1]
    if len(paths) != sum(counts):
        return False
    at, previous = 0, None
    for count, first, last in zip(counts, firsts, lasts, strict=True):
        if not count:
            continue
        if paths[at] != first or paths[at + count - 1] != last:
            return False
        if previous is not None and not previous < first:
            return False
        at, previous = at + count, last
    return True
