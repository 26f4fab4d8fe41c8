"""The private index files of the workspace fingerprint (:mod:`gitaudit.git.fingerprint`).

Byte copies of git index files that keep their timestamps, checks that a copy is a whole index,
and the housekeeping of the per-process and kept ("warm") files in their private folder (in the
user's cache, :func:`gitaudit.places.fingerprint_dir`).

A kept index is gitaudit's own stat cache of the work tree: it holds the paths of one version
of the user's index (its *basis*), each with the stat data and blob id git recorded when it
hashed the file for gitaudit, never the user's (which anyone who writes ``.git`` can forge). It
is only ever used with a tag beside it (``warm-<slot>.mac``): a MAC, under the local key
(:mod:`gitaudit.secret`), of its name, its stat data, its trailing checksum, its basis and the
tree its entries make (so a call that changes nothing needs no ``git write-tree``), made by the
process that wrote it, so a kept index written by anyone else (entries marked skip-worktree,
stat data or cached tree ids copied from an edit) is not used, wherever the folder is
(``GITAUDIT_CACHE`` may put it anywhere). Its change time and inode, which nobody can set, stand
for its content: a file rewritten in place, or another file renamed over it, no longer matches
its tag.
"""

from __future__ import annotations

import contextlib
import os
import time

TYPE_CHECKING = False  # standard library and light: the fingerprint's head start imports it
if TYPE_CHECKING:
    from pathlib import Path

TEMP_PREFIX = "fingerprint-"
"""Per-process temporary files; any whose inode changed last more than
:data:`STALE_AFTER_SECONDS` ago are debris (by its change time: a seed copied from a kept index
carries the kept index's modification time, however old, from the moment it is made)."""
STALE_AFTER_SECONDS = 15 * 60

WARM_PREFIX = "warm-"
"""Reusable private indexes (``warm-<slot>.index``), named after the settings they were hashed
under, each with its tag (``warm-<slot>.mac``, which names the user-index version too)."""
TAG_SUFFIX = ".mac"
UNKNOWN = "-"
"""The tree a tag names for a kept index whose tree is not known."""


def copy_open_file(src_fd: int, st: os.stat_result, dst: str | os.PathLike[str]) -> None:
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
    The user's index is checked each time it seeds (a kept index is vouched for by its tag).
    """
    import hashlib

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


def tag_path(warm: Path) -> Path:
    """Where the tag of the kept index *warm* lives."""
    return warm.with_suffix(TAG_SUFFIX)


def _statement(warm_name: str, fd: int, st: os.stat_result, basis: str, tree: str) -> bytes:
    """What a kept index's tag vouches for: its name (the slot), the stat data of the file
    (the change time and inode cannot be set back), its trailing checksum, the user-index
    version whose paths it holds (:func:`identity`) and the tree its entries make."""
    trailer = os.pread(fd, 32, max(0, st.st_size - 32)).hex()
    stat = f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
    return f"gitaudit kept index 2\0{warm_name}\0{stat}\0{trailer}\0{basis}\0{tree}".encode()


class Kept:
    """A kept index copied as a seed: its entry count, the user-index version whose paths it
    holds and the tree its entries make (a plain class: the head start does without
    ``typing``)."""

    __slots__ = ("basis", "entries", "tree")

    def __init__(self, entries: int, basis: str, tree: str | None) -> None:
        self.entries = entries
        self.basis = basis
        self.tree = tree  # None: not known


class Tagged:
    """A kept index opened (the descriptor stays open until :meth:`close`) with what its tag
    says, not yet checked: :func:`vouched` checks it."""

    __slots__ = ("basis", "fd", "mac", "name", "st", "tree")

    def __init__(self, name: str, fd: int, mac: str, tree: str, basis: str) -> None:
        self.name = name
        self.fd = fd
        self.st = os.fstat(fd)
        self.mac = mac
        self.tree = tree
        self.basis = basis

    def unchanged(self) -> bool:
        """Whether the file is still what it was when opened (nothing wrote it in place)."""
        now = os.fstat(self.fd)
        return (now.st_size, now.st_mtime_ns, now.st_ctime_ns) == (
            self.st.st_size,
            self.st.st_mtime_ns,
            self.st.st_ctime_ns,
        )

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def open_kept(warm: str | os.PathLike[str]) -> Tagged | None:
    """The kept index *warm*, opened, with what its tag says; None when either is missing or
    the tag is malformed. Nothing is checked yet (:func:`vouched`)."""
    path = os.fspath(warm)
    tag = _read_ascii(os.path.splitext(path)[0] + TAG_SUFFIX)
    mac, _, rest = tag.partition(" ")
    tree, _, basis = rest.partition(" ")
    known = tree.isascii() and tree.isalnum() and len(tree) in (40, 64)
    if not (known or tree == UNKNOWN) or not (mac.isascii() and basis.isascii() and basis):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        return Tagged(os.path.basename(path), fd, mac, tree, basis)
    except OSError:
        os.close(fd)
        return None


def vouched(tagged: Tagged, key: bytes) -> Kept | None:
    """What *tagged* holds if its tag vouches for it under *key*; None when it is not the file
    its tag names (a kept index or tag written by someone else, or a race between two
    writers)."""
    import hmac

    from gitaudit import secret

    statement = _statement(tagged.name, tagged.fd, tagged.st, tagged.basis, tagged.tree)
    if not hmac.compare_digest(tagged.mac, secret.mac(key, statement)):
        return None
    head = os.pread(tagged.fd, 12, 0)
    if head[:4] != b"DIRC":
        return None
    tree = None if tagged.tree == UNKNOWN else tagged.tree
    return Kept(int.from_bytes(head[8:12], "big"), tagged.basis, tree)


def copy_vouched(warm: Path, dst: Path, key: bytes) -> Kept | None:
    """Seed the new file *dst* from the kept index *warm* if its tag vouches for it (and
    nothing wrote it while it was copied); None (nothing left written) otherwise."""
    tagged = open_kept(warm)
    if tagged is None:
        return None
    try:
        kept = vouched(tagged, key)
        if kept is None:
            return None
        copy_open_file(tagged.fd, tagged.st, dst)
        if not tagged.unchanged():
            dst.unlink()
            return None
        return kept
    finally:
        tagged.close()


def keep_vouched(src: Path, warm: Path, key: bytes, basis: str, tree: str | None) -> None:
    """Move the private index *src*, which holds the paths of the user-index version *basis*
    and whose entries make *tree* (None: not known), to *warm* and tag it. The tag is made
    from the moved file itself (an open descriptor: a file renamed over *warm* meanwhile is
    not what it names)."""
    fd = os.open(src, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    try:
        os.replace(src, warm)
        st = os.fstat(fd)  # after the move: a rename changes the file's change time
        named = tree or UNKNOWN
        from gitaudit import secret

        tag = secret.mac(key, _statement(warm.name, fd, st, basis, named))
        write_atomic(tag_path(warm), f"{tag} {named} {basis}")
    finally:
        os.close(fd)


def copy_file(src: Path, dst: Path) -> None:
    """Copy *src* to the new file *dst* with its timestamps (:func:`copy_open_file`)."""
    fd = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
    try:
        copy_open_file(fd, os.fstat(fd), dst)
    finally:
        os.close(fd)


def header(path: Path) -> tuple[int, int]:
    """(format version, entry count) of an index; exact for the unsplit indexes we write."""
    with open(path, "rb") as handle:
        header = handle.read(12)
    if len(header) != 12:
        return -1, -1
    return int.from_bytes(header[4:8], "big"), int.from_bytes(header[8:12], "big")


def _read_ascii(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(4096).decode("ascii", "replace").strip()
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
                st = entry.stat(follow_symlinks=False)
                if max(st.st_mtime, st.st_ctime) < cutoff:
                    os.unlink(entry.path)
            elif (
                keep
                and entry.name.startswith(WARM_PREFIX)
                and entry.name not in (keep.name, tag_path(keep).name)
            ):
                os.unlink(entry.path)
