"""Conversions between the work tree and the tree git hashes it to, and why they cannot lie.

``git add`` converts what it hashes (line endings under ``text``/``eol`` or ``core.autocrlf``,
``ident``, ``working-tree-encoding``, a content filter), and the conversion loses information:
``$Id: anything$`` hashes like ``$Id$``, a file with some CRLF line ends like the same file with
none. The workspace fingerprint (:mod:`gitaudit.git.fingerprint`) therefore

* refuses conversions set where the tree does not pin them (:func:`refuse_local`): the
  repository's config and ``info/attributes``, which anything in the work tree can write;
* compares each file git hashed with its blob, or with what a checkout writes for it
  (:func:`require_faithful`), unless no conversion can apply to any file at all
  (:func:`possible`): no attributes file that converts (the work tree's ``.gitattributes`` in
  any folder git hashed a file of, ignored ones included, the global and system ones) and no
  ``core.autocrlf``, so that every blob is the file's bytes as they are.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from gitaudit import raw_trees
from gitaudit.errors import RepositoryError
from gitaudit.git.call import GitResult, run_git, start_git
from gitaudit.git.head_start import INDEX_CONFIG

TYPE_CHECKING = False  # not typing's: status and the agent hooks import this (gitaudit.named)
if TYPE_CHECKING:
    from typing import Protocol

    from gitaudit.git.spawn import Process

    class Located(Protocol):
        """Where a work tree's repository is (the fingerprint's layout)."""

        @property
        def git_dir(self) -> Path: ...
        @property
        def common_dir(self) -> Path: ...
        @property
        def work_tree(self) -> Path: ...
        @property
        def settings(self) -> tuple[str, ...]: ...


def _run(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
) -> GitResult:
    return run_git(args, cwd=cwd, env=env, input=stdin, check=False)


_CONVERSIONS = r"^(filter\..*\.(clean|process)|core\.(autocrlf|eol|attributesfile))$"
_CONVERTING_ATTRIBUTES = frozenset([b"text", b"eol", b"crlf", b"ident", b"filter"])
_CONVERTING_ATTRIBUTES_WITH_VALUES = (b"working-tree-encoding",)


def _converts(setting: str, value: str) -> bool:
    """Whether the repository's *setting* (git's name, lower case) set to *value* (as git's
    ``--type=bool-or-str`` prints it) makes a checkout write other bytes than the blob: a
    content filter, CRLF line ends (``core.autocrlf=true``, ``core.eol=crlf``), or a file of
    attributes of its own. ``core.autocrlf=input`` only converts what is hashed, which
    :func:`require_faithful` compares."""
    if setting == "core.autocrlf":
        return value == "true"
    if setting == "core.eol":
        return value.lower() == "crlf"
    return True


def _attributes_convert(path: Path, *, unreadable: bool = False) -> bool:
    """Whether the attributes file *path* sets an attribute that converts what git hashes and
    writes (``text``, ``eol``, ``crlf``, ``ident``, ``filter``, ``working-tree-encoding``), or
    defines a macro (which a ``.gitattributes`` could then use); *unreadable* when it cannot be
    read. Unsetting one (``-text``, ``!eol``) converts nothing; an attribute git does not know
    does nothing."""
    try:
        data = path.read_bytes()
    except OSError:
        return unreadable
    for line in data.split(b"\n"):
        tokens = line.replace(b"\t", b" ").replace(b"\r", b" ").split(b" ")
        tokens = [t for t in tokens if t]
        if tokens and tokens[0].startswith(b"[attr]"):
            return True
        for token in tokens[1:]:
            name = token.partition(b"=")[0]
            if name in _CONVERTING_ATTRIBUTES or name in _CONVERTING_ATTRIBUTES_WITH_VALUES:
                return True
    return False


def refuse_local(layout: Located) -> None:
    """Conversions set where the tree does not pin them, in the repository's own config or
    ``info/attributes`` (which anything in the work tree can write), would let the bytes on
    disk differ from the bytes checks read, so evidence would prove a tree that was never the
    work tree: a content filter prints the proven blob for an edited file, ``ident`` takes
    anything between ``$Id:`` and ``$`` for nothing, ``core.autocrlf=true`` or ``eol=crlf``
    make CRLF line ends (which a shell reads as part of the line) the checkout of a tree the
    checks read with LF ones. They are refused, wherever the repository's config takes them
    from (``.git/config``, ``config.worktree`` and any file they include, in any letter case:
    git answers, with the scope of each); conversions configured in the user's global config
    (git-lfs, say, or ``core.autocrlf``) are outside the work tree and trusted like the key
    directory, and those of the tree's own ``.gitattributes`` are part of what is proven."""
    sources = (layout.common_dir / "config", layout.git_dir / "config.worktree")
    if any(_may_convert(path) for path in sources):
        _refuse_config_conversions(layout, sources[0])
    attributes = layout.common_dir / "info" / "attributes"
    if _attributes_convert(attributes):
        raise RepositoryError(
            f"{attributes} sets attributes that convert files (text, eol, crlf, ident, filter, "
            "working-tree-encoding, or a macro): the bytes checks read could differ from the "
            "work tree gitaudit fingerprints",
            hint="move them to the tree's .gitattributes (then they are part of what is "
            "proven) or to your global attributes file, and remove them from "
            f"{attributes}",
        )


def _may_convert(config: Path) -> bool:
    """Whether the config file *config* may set a content filter or a conversion: a word of
    them appears in it, or it includes other files (in any letter case; git decides)."""
    try:
        text = config.read_bytes().lower()
    except OSError:
        return False
    return any(word in text for word in (b"filter", b"include", b"crlf", b"eol", b"attributes"))


def _refuse_config_conversions(layout: Located, config: Path) -> None:
    """Refuse the filters and conversions the repository's config (*config*, the files it
    includes, ``config.worktree``) sets (:func:`_converts`)."""
    proc = _run(
        ["config", "--show-scope", "--type=bool-or-str", "--get-regexp", _CONVERSIONS],
        cwd=layout.work_tree,
    )
    if proc.code not in (0, 1):  # 1: no such setting
        raise RepositoryError(
            f"cannot read the configuration of {layout.work_tree}: {proc.err}",
            hint="repair the repository config (`git config --list` names the problem)",
        )
    drivers = set()
    for line in proc.out.splitlines():
        scope, _, setting = line.partition("\t")
        name, _, value = setting.partition(" ")
        if scope in ("local", "worktree") and _converts(name, value):
            drivers.add(name)
    if drivers:
        kind = "filters" if all(d.startswith("filter.") for d in drivers) else "conversions"
        raise RepositoryError(
            f"{config} defines content {kind} ({', '.join(sorted(drivers))}), itself or "
            "through a file it includes: the bytes checks read could differ from the tree "
            "gitaudit fingerprints",
            hint="remove them from the repository config (`git config --unset ...`); filters "
            "and conversions from your global config are allowed",
        )


_ENTRY = re.compile(  # one entry of `ls-files -z --stage --debug`, up to its flags
    rb"(?:[0-9a-f]+\n)?(\d+) ([0-9a-f]+) \d\t([^\0]*)\0"
    rb"  ctime: \d+:\d+\n  mtime: \d+:\d+\n  dev: \d+\tino: \d+\n"
    rb"  uid: \d+\tgid: \d+\n  size: \d+\t"
)
_FLAGS = b"flags: "
_REGULAR = (b"100644", b"100755")
_SHOWN = 5  # unfaithful files a refusal names


def _listing(layout: Located, env: Mapping[str, str], index: Path) -> list[bytes]:
    """The entries of the private index *index* as ``ls-files --stage --debug`` lists them
    (mode, blob id, path and the stat data git keeps), cut at each entry's flags: one piece per
    entry, with the previous entry's flags in front, so that two listings compare piece by piece
    in C (an entry whose mode, blob or stat data moved is a piece the other listing lacks)."""
    proc = _run(
        [*INDEX_CONFIG, *layout.settings, "ls-files", "-z", "--stage", "--debug"],
        cwd=layout.work_tree,
        env={**env, "GIT_INDEX_FILE": str(index)},
    )
    pieces = proc.stdout.split(_FLAGS)
    if proc.code != 0 or len(pieces) != proc.stdout.count(b"\0") + 1:
        raise RepositoryError(
            f"cannot read the private index {index}: git listed entries in an unknown form",
            hint="report this as a bug of gitaudit, with your git version",
        )
    return pieces[:-1]  # the last piece is the last entry's flags alone


def _hashed(pieces: Iterable[bytes]) -> list[tuple[bytes, str, bytes]]:
    """(mode, blob id, path) of each listed entry of *pieces* (see :func:`_listing`)."""
    out = []
    for piece in pieces:
        found = _ENTRY.fullmatch(piece)
        if found is None:
            raise RepositoryError(
                "cannot read a private index: git listed an entry in an unknown form",
                hint="report this as a bug of gitaudit, with your git version",
            )
        out.append((found[1], found[2].decode("ascii"), found[3]))
    return out


def _raw_ids(
    layout: Located, env: Mapping[str, str], paths: Sequence[bytes], width: int
) -> list[str | None]:
    """The blob id of each file's bytes as they are (no conversion), hashed by git in one
    process (``hash-object --no-filters``); None for a path that is no plain file any more."""
    plain = [p for p in paths if _is_plain(layout.work_tree / os.fsdecode(p))]
    lines = [p for p in plain if _one_line(p)]
    by_path = {
        p: _file_id(layout.work_tree / os.fsdecode(p), width) for p in plain if not _one_line(p)
    }
    if lines:
        proc = _run(
            ["hash-object", "--no-filters", "--stdin-paths"],
            cwd=layout.work_tree,
            env=env,
            stdin=b"".join(p + b"\n" for p in lines),
        )
        ids = proc.stdout.split()
        if proc.code != 0 or len(ids) != len(lines):
            return [None] * len(paths)  # one went away meanwhile: each is compared as unfaithful
        by_path.update(zip(lines, (i.decode("ascii") for i in ids), strict=True))
    return [by_path.get(p) for p in paths]


def _one_line(path: bytes) -> bool:
    """Whether ``hash-object --stdin-paths`` reads *path* back as it is: it reads a line, drops a
    CR before its end and unquotes one that starts with a double quote."""
    return b"\n" not in path and not path.endswith(b"\r") and not path.startswith(b'"')


def _file_id(path: Path, width: int) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with open(fd, "rb") as handle:
        return _blob_id(handle.read(), width)


def _is_plain(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _blob_id(data: bytes, width: int) -> str:
    """The id git gives *data* stored as a blob (SHA-1, or SHA-256 for a *width* of 64)."""
    import hashlib

    digest = hashlib.sha256() if width == 64 else hashlib.sha1()  # noqa: S324 (git's ids)
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


def _checked_out_id(
    layout: Located, env: Mapping[str, str], path: bytes, blob: str, found: str, store: Path
) -> str | None:
    """The blob id of the bytes git would write for *blob* at *path* (its smudge filter, line
    endings, ``ident`` and ``working-tree-encoding``, as a checkout applies them), or None when
    the file no longer holds the bytes whose id is *found* or no longer hashes to *blob*.

    *blob*'s bytes are never read from the repository's object store: anyone who writes
    ``.git`` can put other bytes there under its name (git checks no loose object's id on
    read), the very bytes on disk, so that the checkout of the proven blob would seem to write
    them. git hashes the file's bytes again, as ``git add`` did, into *store*, an object store
    of gitaudit's own, and smudges the blob it wrote there."""
    data = _read_plain(layout.work_tree / os.fsdecode(path))
    if data is None or _blob_id(data, len(blob)) != found:
        return None  # the file changed since it was hashed
    private = {**env, "GIT_OBJECT_DIRECTORY": str(store)}
    hashed = _run(
        ["hash-object", "-w", "--stdin", f"--path={os.fsdecode(path)}"],
        cwd=layout.work_tree,
        env=private,
        stdin=data,
    )
    if hashed.code != 0 or hashed.out.strip() != blob:
        return None
    written = _loose_state(store, blob)
    proc = _run(
        ["cat-file", "--filters", f"--path={os.fsdecode(path)}", blob],
        cwd=layout.work_tree,
        env=private,
    )
    if proc.code != 0 or written is None or _loose_state(store, blob) != written:
        return None  # what git smudged may not be what it wrote
    return _blob_id(proc.stdout, len(blob))


def _read_plain(path: Path) -> bytes | None:
    """The bytes of the plain file at *path* (no link followed), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read()


def _loose_state(store: Path, oid: str) -> tuple[int, ...] | None:
    """The identity of the loose object *oid* in *store* (inode, size, change and modification
    times), or None when it is not there as git writes one: a loose object is written once,
    under a new name, and never again in place."""
    try:
        st = os.lstat(store / oid[:2] / oid[2:])
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns, st.st_mtime_ns)


def require_faithful(
    layout: Located, env: Mapping[str, str], base: Path | None, temp: Path
) -> None:
    """Refuse a work tree whose files hold other bytes than the tree the fingerprint names.

    ``git add`` converts what it hashes (line endings under ``text``/``eol`` or
    ``core.autocrlf``, ``ident``, ``working-tree-encoding``, a filter), and the conversion
    loses information: ``$Id: <anything on the line>$`` hashes like ``$Id$``, a file with some
    CRLF line ends like the same file with none. The checks read a checkout of the tree, so a
    file whose bytes are neither its blob's nor what a checkout writes for that blob would be
    vouched for by evidence that never read it. Each file git hashed this time (its entry's
    stat data differ from the seed *base*'s, or all of them with no *base*) is compared; a
    file it did not hash is as it was when it was last compared, before its entry was kept.
    The two listings are compared entry by entry as bytes, and only the entries that moved
    are read; git hashes their bytes as they are in one process, and only a file whose bytes
    are not its blob's costs a look at what a checkout writes for it, made from the file's own
    bytes hashed again into a private object store (:func:`_checked_out_id`), never from the
    repository's store, where a forged object under the blob's name could hold the file's
    bytes."""
    after = _listing(layout, env, temp)
    before = set(_listing(layout, env, base)) if base is not None and base.exists() else set()
    moved = [e for e in _hashed(p for p in after if p not in before) if e[0] in _REGULAR]
    width = len(moved[0][1]) if moved else 40
    raw = _raw_ids(layout, env, [path for _, _, path in moved], width)
    converted = [(b, p, f) for (_, b, p), f in zip(moved, raw, strict=True) if f != b]
    unfaithful = [os.fsdecode(p) for _, p, found in converted if found is None][:_SHOWN]
    if converted and not unfaithful:
        import tempfile  # here: every hook imports this module, few files are converted

        with tempfile.TemporaryDirectory(prefix="objects-", dir=temp.parent) as store:
            for blob, path, found in converted:
                if found is None or found != _checked_out_id(
                    layout, env, path, blob, found, Path(store)
                ):
                    unfaithful.append(os.fsdecode(path))
                    if len(unfaithful) == _SHOWN:
                        break
    if unfaithful:
        raise RepositoryError(
            f"the work tree of {layout.work_tree} holds other bytes than the tree git hashes "
            f"them to (a conversion of line endings, ident, working-tree-encoding or a "
            f"filter): {', '.join(unfaithful)}; the checks would read other bytes than these",
            hint="write each file as git checks it out (commit or stash it, remove it and "
            "`git checkout -- PATH`), or make its line endings consistent",
        )


_CONFIG_CONVERSIONS = r"^(core\.(autocrlf|attributesfile)|attr\.tree|extensions\.worktreeconfig)$"


SETTLED_NS = 100_000_000
"""How long before git began a change must be for :func:`possible` to trust a look taken after
git finished: a file system stamps a change with a coarse clock (a kernel tick, at most 10 ms,
behind the real time). On a network file system the server's clock stamps it: one more than
this behind the client's could hide a change made while git hashed (docs/threat-model.md)."""


class Listing:
    """``git ls-tree -r -d`` of *tree*'s folders, started (:func:`list_folders`); what it
    lists, verified (:meth:`read`), is read once and kept."""

    __slots__ = ("_read", "git_dir", "process", "tree")

    def __init__(self, tree: str, process: Process, git_dir: Path) -> None:
        self.tree, self.process, self.git_dir = tree, process, git_dir
        self._read: tuple[dict[bytes, str] | None] | None = None

    def read(self) -> dict[bytes, str] | None:
        """folder -> tree id of each folder listed, once git is done (:func:`_listed`); the
        fingerprint reads it while ``git write-tree`` runs, :func:`possible` after."""
        if self._read is None:
            self._read = (_listed(self),)
        return self._read[0]


def list_folders(layout: Located, tree: str) -> Listing:
    """The folders of *tree*, listed from now on for :func:`possible` to read later: the
    fingerprint lists the seed tree's, and reads and verifies them (:meth:`Listing.read`),
    while ``git write-tree`` makes the new one, instead of listing the new tree's after it
    (about 10 ms on 50,000 files, and the verification about 20 ms more)."""
    args = ["ls-tree", "-r", "-d", "-z", tree]
    return Listing(tree, start_git(args, git_dir=layout.git_dir), layout.git_dir)


def drop(listing: Listing) -> None:
    """Stop a listing nobody read, close its pipes and reap it."""
    if listing.process.returncode is None:
        listing.process.kill()
    with listing.process:
        pass


def _folders_of(
    layout: Located, tree: str, seed: Listing | None
) -> Callable[[], list[bytes] | None]:
    """Start listing the folders :func:`possible` looks in besides the root; what it returns
    reads them (None when git cannot list them, or the tree objects read are not what their
    ids say: :func:`_listed`). They are *tree*'s; or, with *seed* (the folders of the tree the
    private index held before ``git add``, listed while the new tree was written), the seed
    tree's and every folder of *tree* below a folder whose id differs from the seed's at its
    path (:func:`_walk_changed`, which skips every folder whose tree is the same): all of the
    new tree's folders, and perhaps some it no longer has. A seed tree that cannot be listed
    (gone from the object store) falls back to *tree*'s."""
    if seed is None:
        listing = list_folders(layout, tree)
        return lambda: _folders(listing)

    def read() -> list[bytes] | None:
        listed = seed.read()
        if listed is None:
            return _folders(list_folders(layout, tree))
        if seed.tree == tree:
            return list(listed)
        found = _walk_changed(layout.git_dir, tree, listed)
        return None if found is None else [*listed, *sorted(found - set(listed))]

    return read


def _folders(listing: Listing) -> list[bytes] | None:
    """The folders *listing* lists (:func:`_listed`), once git is done."""
    listed = listing.read()
    return None if listed is None else list(listed)


def _listed(listing: Listing) -> dict[bytes, str] | None:
    """folder -> tree id of each folder *listing* lists, once git is done; None when it failed,
    or when the listing is not what the tree objects it read hold. git checks no object's id
    when it reads it, and anyone who writes ``.git`` can put a tree under a folder's id that
    leaves out a folder below it, whose ``.gitattributes`` would go unread: every tree object
    the listing read (the tree's and each folder's) is read again, its bytes hashed against
    its id, and each folder it names must be listed with that id (so a listing that read a
    forged object, put back since, does not count either)."""
    out, _ = listing.process.communicate()
    if listing.process.returncode != 0:
        return None
    listed: dict[bytes, str] = {}
    for entry in out.split(b"\0")[:-1]:
        meta, _, path = entry.partition(b"\t")
        fields = meta.split(b" ")
        if len(fields) != 3 or fields[1] != b"tree":
            return None
        listed[path] = fields[2].decode("ascii")
    ids = list(dict.fromkeys([listing.tree, *listed.values()]))
    contents = _verified_trees(listing.git_dir, ids)
    if contents is None:
        return None
    width = len(listing.tree) // 2
    for path, oid in [(b"", listing.tree), *listed.items()]:
        for name, child in _subtrees(contents[oid], width):
            if listed.get(path + b"/" + name if path else name) != child:
                return None
    return listed


def _walk_changed(git_dir: Path, tree: str, seed: Mapping[bytes, str]) -> set[bytes] | None:
    """The folders of *tree* at or below a folder whose id is not the one *seed* (folder ->
    id, verified) lists at its path, read level by level from tree objects hashed against
    their ids; a folder with the seed's id holds the seed's folders. None when an object
    does not verify."""
    width = len(tree) // 2
    found: set[bytes] = set()
    level = [(b"", tree)]
    while level:
        contents = _verified_trees(git_dir, list(dict.fromkeys(oid for _, oid in level)))
        if contents is None:
            return None
        below = []
        for path, oid in level:
            for name, child in _subtrees(contents[oid], width):
                folder = path + b"/" + name if path else name
                found.add(folder)
                if seed.get(folder) != child:
                    below.append((folder, child))
        level = below
    return found


def _verified_trees(git_dir: Path, ids: Sequence[str]) -> dict[str, bytes] | None:
    """The bytes of each tree object of *ids* (``cat-file --batch``, in one process), each
    hashed against its id; None when one is missing, not a tree or not what its id says."""
    import hashlib

    proc = run_git(
        ["cat-file", "--batch"],
        git_dir=git_dir,
        input=b"".join(oid.encode("ascii") + b"\n" for oid in ids),
        check=False,
    )
    if proc.code != 0:
        return None
    out, at, found = proc.stdout, 0, {}
    for oid in ids:
        end = out.find(b"\n", at)
        header = out[at:end].split(b" ") if end >= 0 else []
        if len(header) != 3 or header[1] != b"tree" or header[0] != oid.encode("ascii"):
            return None
        size = int(header[2])
        body = out[end + 1 : end + 1 + size]
        at = end + 2 + size
        digest = hashlib.sha256() if len(oid) == 64 else hashlib.sha1()  # noqa: S324 (git's)
        digest.update(b"tree %d\0" % size + body)
        if len(body) != size or digest.hexdigest() != oid:
            return None
        found[oid] = body
    return found


def _subtrees(body: bytes, width: int) -> list[tuple[bytes, str]]:
    """(name, id) of each folder a tree object's *body* names (ids *width* bytes long); a
    body git would not write names a folder no listing has (the empty name)."""
    read = raw_trees.folders(body, width)  # in C: a loop over 50,000 entries cost ~25 ms
    if read is not None:
        return [(name, oid.hex()) for name, oid in read]
    out, at = [], 0
    while at < len(body):
        space, nul = body.find(b" ", at), body.find(b"\0", at)
        if not at < space < nul or nul + 1 + width > len(body):
            return [(b"", "")]
        if body[at:space] == b"40000":
            out.append((body[space + 1 : nul], body[nul + 1 : nul + 1 + width].hex()))
        at = nul + 1 + width
    return out


def possible(
    layout: Located,
    env: Mapping[str, str],
    tree: str,
    report: bytes,
    began_ns: int,
    *,
    seed: Listing | None = None,
) -> bool:
    """Whether ``git add``, which began at *began_ns* (``time.time_ns()``), may have converted a
    file it hashed into the index behind *tree* (*report*: what its ``--verbose`` said). No, and
    each blob is its file's bytes as they are, only when

    * no ``.gitattributes`` was added, changed or removed (the report names none);
    * no ``core.autocrlf`` other than false, in any scope, and no ``attr.tree`` (attributes
      read from a tree);
    * no attributes file sets a converting attribute or a macro (:func:`_attributes_convert`):
      ``info/attributes``, the global one (``core.attributesFile``, and the default under
      ``$XDG_CONFIG_HOME`` or ``~/.config``), the system one, and the ``.gitattributes`` in the
      work tree's root and in every folder of *tree* (ignored or not: git reads them all);
    * none of those places changed since shortly before git began (:data:`SETTLED_NS`): the
      change time of every folder of *tree* (a file created, removed or renamed in it), of each
      attributes file and its folder, and of the repository's config files. Else an attributes
      file or a setting there only while git hashed would go unseen.

    Anything unsure (a file that cannot be read, git failing) counts as yes.

    *seed*: :func:`list_folders` of the tree the private index held before ``git add``,
    started early, which this takes on (reads, or drops): see :func:`_folders_of`."""
    if b".gitattributes" in report:
        if seed is not None:
            drop(seed)
        return True
    settled = began_ns - SETTLED_NS
    read_folders = _folders_of(layout, tree, seed)
    files = _attribute_files(layout, env, settled)  # while git lists the folders
    folders = read_folders()
    if files is None or folders is None:
        return True
    root = os.fspath(layout.work_tree)
    for folder in [b"", *folders]:
        where = os.path.join(root, os.fsdecode(folder))
        path = os.path.join(where, ".gitattributes")
        try:
            if os.lstat(where).st_ctime_ns >= settled:
                return True
            found = os.lstat(path)
        except FileNotFoundError:
            continue
        except OSError:
            return True
        if not stat.S_ISREG(found.st_mode) or found.st_ctime_ns >= settled:
            return True
        files.append(Path(path))
    return any(_attributes_convert(path, unreadable=True) for path in files)


def _changed_since(path: Path, settled: int, *, created: bool = False) -> bool:
    """Whether *path* changed at or after *settled* (yes when unsure); absent, and *created*:
    whether the nearest folder above it that exists did (the file was there, and removed)."""
    for where in (path, *path.parents) if created else (path,):
        try:
            return os.lstat(where).st_ctime_ns >= settled
        except FileNotFoundError:
            continue
        except OSError:
            return True
    return False


def _attribute_files(layout: Located, env: Mapping[str, str], settled: int) -> list[Path] | None:
    """The attributes files outside the tree that exist (``info/attributes``, the global and
    system ones); None when the configuration converts (``core.autocrlf``, ``attr.tree``) or has
    a file of its own per work tree (``extensions.worktreeConfig``), when ``info/attributes``
    (or its folder), another of them or the repository's config changed at or after *settled*
    (the user's global and system files are trusted to stay put), or when git cannot say."""
    configured = _run(
        ["config", "-z", "--type=bool-or-str", "--get-regexp", _CONFIG_CONVERSIONS],
        cwd=layout.work_tree,
        env=env,
    )
    if configured.code not in (0, 1):
        return None
    local = layout.common_dir / "info" / "attributes"
    files = _global_attributes()
    for item in configured.stdout.split(b"\0")[:-1]:
        name, _, value = item.partition(b"\n")
        if name == b"core.attributesfile":
            files.append(layout.work_tree / os.path.expanduser(os.fsdecode(value)))
        elif name == b"attr.tree" or value != b"false":  # or core.autocrlf, a config per tree
            return None
    if _changed_since(local, settled, created=True) or any(
        _changed_since(path, settled) for path in (*files, layout.common_dir / "config")
    ):
        return None
    return [path for path in (local, *files) if os.path.lexists(path)]


def _global_attributes() -> list[Path]:
    """Where git looks for the global attributes file when ``core.attributesFile`` is unset, and
    for the system one (``etc/gitattributes`` under git's prefix, ``/etc`` for ``/usr``)."""
    found = []
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg:
        found.append(Path(xdg, "git", "attributes"))
    home = os.environ.get("HOME")
    if home:
        found.append(Path(home, ".config", "git", "attributes"))
    found.append(Path("/etc/gitattributes"))
    from gitaudit.executables import git_program

    try:
        git = git_program(None, os.environ)  # the git gitaudit runs
    except FileNotFoundError:
        return found
    prefix = Path(os.path.realpath(git)).parent.parent
    found.append(prefix / "etc" / "gitattributes")
    return found
