"""The private index files of the workspace fingerprint (:mod:`gitaudit.git.fingerprint`).

Byte copies of git index files that keep their timestamps, checks that a copy is a whole index,
and the housekeeping of the per-process and kept ("warm") files under the state directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path

TEMP_PREFIX = "fingerprint-"
"""Per-process temporary files; any older than :data:`STALE_AFTER_SECONDS` are debris."""
STALE_AFTER_SECONDS = 15 * 60

VERIFIED_MARKER = "fingerprint.verified"
"""``<identity> <entries> <check>`` of the last user index found intact and free of index flags."""

WARM_PREFIX = "warm-"
"""Reusable private indexes, named after the user-index version and settings they belong to."""


def copy_open_file(src_fd: int, st: os.stat_result, dst: Path) -> None:
    """Copy the open file *src_fd* to the new file *dst*, giving it the source's timestamps.

    The mtime matters: git treats entries whose mtime is not older than the index file as
    "racily clean" and re-checks their content.  A copy stamped "now" would make those entries
    look safely clean and could hide an edit made in the same second as the index was written.
    The timestamps come from the open file, so a concurrent rename over *src* cannot pair one
    version's bytes with another's mtime.
    """
    dst_fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        offset = 0
        try:  # sendfile: a kernel-side copy (Linux); elsewhere it only sends to sockets
            while offset < st.st_size:
                sent = os.sendfile(dst_fd, src_fd, offset, st.st_size - offset)
                if sent == 0:
                    break
                offset += sent
        except (AttributeError, OSError):
            while offset < st.st_size:
                chunk = os.pread(src_fd, min(1 << 20, st.st_size - offset), offset)
                if not chunk:
                    break
                write_all(dst_fd, chunk, offset)
                offset += len(chunk)
    finally:
        os.close(dst_fd)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))


def write_all(fd: int, data: bytes, offset: int = 0) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def identity(src_fd: int, st: os.stat_result) -> str:
    """A name for this exact version of an index file: stat data plus its trailing checksum.

    git only ever replaces an index by rename, never edits one in place, and the trailer is a hash
    of everything before it, so equal identities mean equal bytes.
    """
    trailer = os.pread(src_fd, 32, max(0, st.st_size - 32)).hex()
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{trailer}"


def intact(data: bytes) -> bool:
    """True when *data* is a whole git index: known header and a matching trailing checksum.

    git itself skips the checksum when reading an index (only ``git fsck`` checks it), and reads a
    truncated one as entries with null ids, so a damaged seed would silently change the result.
    The user's index is checked once per version, a kept private index each time it is used.
    """
    if data[:4] != b"DIRC" or int.from_bytes(data[4:8], "big") not in (2, 3, 4):
        return False
    for algorithm, size in (("sha1", 20), ("sha256", 32)):
        if len(data) < 12 + size:
            continue
        trailer = data[-size:]
        if trailer == bytes(size):  # index.skipHash: git wrote no checksum
            return True
        if hashlib.new(algorithm, memoryview(data)[:-size]).digest() == trailer:
            return True
    return False


def index_intact(path: Path) -> bool:
    try:
        return intact(path.read_bytes())
    except OSError:
        return False


def copy_warm(warm: Path, dst: Path) -> bool:
    """Seed *dst* from a kept private index if it exists and is intact; drop it if damaged."""
    try:
        with open(warm, "rb") as handle:
            st = os.fstat(handle.fileno())
            data = handle.read()
    except FileNotFoundError:
        return False
    if not intact(data):
        with contextlib.suppress(OSError):
            warm.unlink()
        return False
    dst_fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        write_all(dst_fd, data)
    finally:
        os.close(dst_fd)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
    return True


def header(path: Path) -> tuple[int, int]:
    """(format version, entry count) of an index; exact for the unsplit indexes we write."""
    with open(path, "rb") as handle:
        header = handle.read(12)
    if len(header) != 12:
        return -1, -1
    return int.from_bytes(header[4:8], "big"), int.from_bytes(header[8:12], "big")


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return ""


def write_atomic(path: Path, text: str) -> None:
    """Replace *path* with *text* by rename, so concurrent readers see old or new, never half."""
    temp = path.with_name(f"{TEMP_PREFIX}{os.getpid()}-{os.urandom(6).hex()}.tmp")
    try:
        temp.write_text(text + "\n", encoding="ascii")
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            temp.unlink()


def sweep(private_dir: Path, keep: Path | None = None) -> None:
    """Remove debris of crashed processes and, when *keep* is given, superseded warm indexes."""
    cutoff = time.time() - STALE_AFTER_SECONDS
    try:
        entries = list(os.scandir(private_dir))
    except FileNotFoundError:
        return
    for entry in entries:
        with contextlib.suppress(OSError):
            if entry.name.startswith(TEMP_PREFIX):
                if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)
            elif keep and entry.name.startswith(WARM_PREFIX) and entry.name != keep.name:
                os.unlink(entry.path)
