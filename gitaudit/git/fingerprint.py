"""The workspace fingerprint: the git tree id of what is on disk right now.

Evidence is only worth something if it names exactly what was checked.  The fingerprint is the tree
that ``git add -A && git write-tree`` would produce in a copy of the repository: every tracked file
plus every untracked file that is not ignored, with executable bits, symlinks and deletions, as git
itself would hash them (clean filters, ``core.autocrlf``, ``.gitignore``, ``info/exclude`` and
``core.excludesFile`` all apply).  A clean checkout therefore fingerprints to ``HEAD^{tree}``, so
evidence recorded on a clean workspace is directly comparable with commits.

How it is computed, and why that way:

* The user's index and work tree are never written.  ``git add -A`` and ``git write-tree`` run
  against a *private* index: a per-process file in the work tree's folder of the user's cache
  (:func:`private_folder`; not in the git dir, which anything in the work tree can write, and
  where another process could swap the file while git reads it), seeded from a byte copy of
  the user's index that keeps its mtime (git's racy-timestamp check depends on it).  The
  copy carries the user's stat data, so only files changed since git last looked at them are
  hashed; hashing everything (an empty index, or pygit2's ``Index.add_all``) is 4x-40x slower on a
  large tree.  Each process has its own file, so concurrent fingerprints never contend for a lock
  or corrupt each other; a crash leaves at worst a stray file that later calls remove.
* A plain persistent private index would drift from the user's: a file fingerprinted once while
  untracked would stay "tracked" in it after the user adds it to ``.gitignore`` (and a file the
  user force-adds would be missed), so a clean workspace would stop fingerprinting to
  ``HEAD^{tree}``.  So a result is kept for reuse (``warm-*.index``) only when it holds exactly the
  user's paths (same entry count, nothing removed), and only for the user-index version it came
  from.  Seeding from it then differs from seeding from the user's index in stat data alone,
  which only decides what gets re-hashed, never the result.  Files the user edited but has not
  staged are thereby hashed once, not on every call.  Untracked files are hashed on every call.
* The user's index is anyone's to write, so it is checked each time it seeds: git reads an index
  without verifying its checksum, so a damaged seed would silently change what counts as
  tracked (a damaged one is replaced by an empty seed); entries marked ``assume-unchanged`` or
  ``skip-worktree`` are unmarked in the private copy, so content hidden from ``git status`` is
  still fingerprinted; and the tree ids it caches for its folders (which ``git write-tree``
  trusts) are computed again from its entries.  The checked copy is kept, with a tag (a MAC
  under the local key, :mod:`gitaudit.git.index_files`) binding it to the file gitaudit wrote, so
  later calls for that version start from it; a kept index without its own tag is not used.
* Inside hooks git exports ``GIT_DIR``, ``GIT_INDEX_FILE``, ``GIT_WORK_TREE``, ``GIT_PREFIX``
  and friends, pointing at *its* index.  Every git process started here runs with the one
  environment policy of :mod:`gitaudit.git.call` (which drops them) plus the ones it needs set
  explicitly, so the result does not depend on where it is called from.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from gitaudit import secret
from gitaudit.errors import RepositoryError
from gitaudit.git import index_files
from gitaudit.git.call import GitResult, as_it_is, run_git
from gitaudit.git.index_files import TEMP_PREFIX, WARM_PREFIX
from gitaudit.places import fingerprint_dir, inside, require_entered

__all__ = [
    "EMPTY_TREE",
    "Fingerprint",
    "changed_paths",
    "tree_of",
    "workspace_fingerprint",
]

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
"""The id of the empty tree: the fingerprint of an empty work tree (SHA-1 repositories)."""
EMPTY_TREE_SHA256 = "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"


def private_folder(git_dir: str | os.PathLike[str]) -> Path:
    """The folder of the private indexes of the work tree whose (per-worktree) git dir is
    *git_dir* (:func:`gitaudit.places.fingerprint_dir`)."""
    return Path(fingerprint_dir(git_dir))


# Settings forced on the git processes that touch the private index.  The split index would make
# git create `sharedindex.*` files in the user's git dir (and hide the true entry count); sparse
# checkout would make `add -A` refuse or skip paths outside the cone; the embedded-repo advice is
# noise on stderr.
_INDEX_CONFIG: tuple[str, ...] = (
    "-c",
    "core.splitIndex=false",
    "-c",
    "core.sparseCheckout=false",
    "-c",
    "index.sparse=false",
    "-c",
    "advice.addEmbeddedRepo=false",
)


class Fingerprint(NamedTuple):
    """The state of a work tree.

    ``tree`` is the tree id of the workspace content; ``head`` the commit HEAD points at (``None``
    in a repository without commits); ``clean`` is true when the workspace is exactly HEAD's tree
    (for a repository without commits: when the workspace has nothing git would add).

    (These records are NamedTuples, not dataclasses: ``dataclasses`` costs a prefetched
    fingerprint about 10 ms of imports before git can start hashing.)
    """

    tree: str
    head: str | None
    clean: bool


class _Layout(NamedTuple):
    git_dir: Path  # per-worktree: holds the index
    common_dir: Path  # shared by linked worktrees: config, info/
    work_tree: Path
    head: str | None  # None: HEAD does not resolve to a commit (a repository without commits)
    head_tree: str | None
    settings: tuple[str, ...]  # git.call.as_it_is for this work tree: on every index command


class _Seed(NamedTuple):
    identity: str | None  # the user-index version the private index started from; None: empty
    entries: int  # its entry count, or -1 when the result must not be kept for reuse
    warm: Path | None  # where a reusable result for this version lives (None: no local key)
    from_warm: bool
    key: bytes | None = None  # the local key that tags kept results
    tree: str | None = None  # the tree the seed's entries make, when known


def _run(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    started: Callable[[], None] | None = None,
) -> GitResult:
    """git ARGS in *cwd* (with *env* on top of the one git environment policy); never raises for
    a failing git: the callers explain their own failures."""
    return run_git(args, cwd=cwd, env=env, input=stdin, check=False, started=started)


def _stderr(proc: GitResult) -> str:
    return proc.err


def _start_dir(repo_path: Path | str) -> Path:
    path = Path(repo_path).absolute()
    if not path.exists():
        raise RepositoryError(f"no such file or directory: {path}")
    return path if path.is_dir() else path.parent


def _locate(repo_path: Path | str) -> _Layout:
    """Find the git dirs, work-tree root and HEAD of *repo_path* the way git itself would.

    One git process in the usual case; a repository without commits costs a second one.
    """
    start = _start_dir(repo_path)
    env = None
    where = [
        "rev-parse",
        "--path-format=absolute",
        "--git-dir",
        "--git-common-dir",
        "--show-toplevel",
    ]
    proc = _run([*where, "HEAD^{commit}", "HEAD^{tree}", "--"], cwd=start, env=env)
    lines = proc.stdout.decode("utf-8", errors="surrogateescape").splitlines()
    if proc.code == 0 and len(lines) >= 5:
        git_dir, common_dir, work_tree = (Path(line) for line in lines[:3])
        require_entered(work_tree, start)
        return _Layout(git_dir, common_dir, work_tree, lines[3], lines[4], as_it_is(work_tree))
    proc = _run(where, cwd=start, env=env)
    lines = proc.stdout.decode("utf-8", errors="surrogateescape").splitlines()
    if proc.code == 0 and len(lines) == 3:
        git_dir, common_dir, work_tree = (Path(line) for line in lines)
        require_entered(work_tree, start)
        return _Layout(git_dir, common_dir, work_tree, None, None, as_it_is(work_tree))
    # Diagnose on the failure path only: bare, inside the git dir, or not a repository at all.
    probe = _run(["rev-parse", "--is-bare-repository", "--is-inside-work-tree"], cwd=start, env=env)
    answers = probe.stdout.decode().split()
    if probe.code != 0:
        raise RepositoryError(
            f"not a git repository: {start} ({_stderr(probe)})",
            hint="run inside a git work tree or pass its path",
        )
    if answers[:1] == ["true"]:
        raise RepositoryError(
            "bare repository has no work tree; pass a revision",
            hint="fingerprint a commit with its tree id instead",
        )
    raise RepositoryError(
        f"not inside a work tree: {start} ({_stderr(proc)})",
        hint="pass the work tree, not the git directory",
    )


def _settings_signature(layout: _Layout) -> str:
    """Stat data of the files outside the work tree that change how git hashes files.

    Attributes and filters (``core.autocrlf``, ``filter.*.clean``, ``info/attributes``) decide the
    blob a file hashes to.  A kept result holds blobs hashed under the settings of its time, so it
    is only reused while none of these files changed.
    """
    home = Path.home()
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    candidates = [
        layout.common_dir / "config",
        layout.git_dir / "config.worktree",
        layout.common_dir / "info" / "attributes",
        Path(os.environ.get("GIT_CONFIG_GLOBAL") or home / ".gitconfig"),
        xdg / "git" / "config",
        xdg / "git" / "attributes",
        Path(os.environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig"),
    ]
    parts = [os.environ.get("GIT_CONFIG_PARAMETERS", ""), os.environ.get("GIT_CONFIG_COUNT", "")]
    for path in candidates:
        try:
            st = path.stat()
        except OSError:
            parts.append("-")
            continue
        parts.append(f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}")
    return "|".join(parts)


# --------------------------------------------------------------------------- the computation


def _list_index(layout: _Layout, env: Mapping[str, str]) -> list[bytes]:
    proc = _run(
        [*_INDEX_CONFIG, *layout.settings, "ls-files", "-v", "-z"], cwd=layout.work_tree, env=env
    )
    if proc.code != 0:
        raise RepositoryError(
            f"cannot read the index of {layout.work_tree}: {_stderr(proc)}",
            hint="check the repository with `git status`",
        )
    return [record for record in proc.stdout.split(b"\0") if len(record) >= 3]


def _unflag(layout: _Layout, env: Mapping[str, str], records: list[bytes]) -> bool:
    """Clear assume-unchanged/skip-worktree in the private index; True if anything was flagged.

    With those bits set ``git add -A`` would trust the index over the file on disk; the audit must
    not.  (One mark per ``update-index`` call: git applies only the last mark option given.)
    """
    assumed = [r[2:] for r in records if r[:1].islower()]
    skipped = [r[2:] for r in records if r[:1] in (b"S", b"s")]
    for option, paths in (("--no-assume-unchanged", assumed), ("--no-skip-worktree", skipped)):
        if not paths:
            continue
        proc = _run(
            [*_INDEX_CONFIG, *layout.settings, "update-index", option, "-z", "--stdin"],
            cwd=layout.work_tree,
            env=env,
            stdin=b"\0".join(paths) + b"\0",
        )
        if proc.code != 0:
            raise RepositoryError(
                f"cannot read the index of {layout.work_tree}: {_stderr(proc)}",
                hint="check the repository with `git status`",
            )
    return bool(assumed or skipped)


def _seed(
    layout: _Layout, private_dir: Path, temp: Path, env: Mapping[str, str], *, allow_warm: bool
) -> _Seed:
    """Fill *temp* with the best starting point that is guaranteed to give the exact result:
    the kept index of this version of the user's index when its tag vouches for it, else the
    user's index, checked and cleaned (and then kept, tagged, for the next call)."""
    try:
        src_fd = os.open(layout.git_dir / "index", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return _Seed(identity=None, entries=-1, warm=None, from_warm=False)
    key = secret.local_key(str(layout.work_tree), create=True)
    try:
        st = os.fstat(src_fd)
        identity = index_files.identity(src_fd, st)
        slot = hashlib.sha256(f"{identity}|{_settings_signature(layout)}".encode()).hexdigest()
        warm = private_dir / f"{WARM_PREFIX}{slot[:32]}.index" if key else None
        if warm is not None and key is not None and allow_warm:
            found = index_files.copy_vouched(warm, temp, key)
            if found is not None:
                return _Seed(identity, found.entries, warm, True, key, found.tree)
        index_files.copy_open_file(src_fd, st, temp)
    finally:
        os.close(src_fd)
    # The user's index as it is, written by git or by anyone else: is it whole, and does it hide
    # anything (marks, or cached tree ids that its entries do not make)?
    if not index_files.index_intact(temp):
        temp.unlink()  # nothing trustworthy says what is tracked: hash the whole work tree
        return _Seed(identity=None, entries=-1, warm=None, from_warm=False)
    records = _list_index(layout, env)
    flagged = _unflag(layout, env, records)
    tree = _rebuild_cached_trees(layout, env)
    if tree is None:
        temp.unlink()  # unmerged entries, or entries naming missing objects: hash everything
        return _Seed(identity=None, entries=-1, warm=None, from_warm=False)
    unmerged = any(r[:1] in (b"M", b"m") for r in records)
    # conflicts collapse on add, marks are gone: the entry count says nothing about the result
    entries = -1 if unmerged or flagged else len(records)
    if warm is not None and key is not None and entries >= 0:
        # this version's checked and cleaned copy, for the calls to come
        checked = temp.with_name(f"{temp.stem}-kept.index")
        index_files.copy_file(temp, checked)
        index_files.keep_vouched(checked, warm, key, tree)
        index_files.sweep(private_dir, keep=warm)  # the kept copies of older versions
    return _Seed(identity, entries, warm, False, key, tree)


def _rebuild_cached_trees(layout: _Layout, env: Mapping[str, str]) -> str | None:
    """Replace the tree ids cached in the private index (its ``TREE`` extension) with the ones
    its entries make, and return the tree they make. ``git write-tree`` trusts a cached id that
    names an existing tree, so an index written by hand could name the proven tree while its
    entries hold an edit. None when git cannot (unmerged entries, an entry naming a missing
    object)."""
    proc = _run(
        [*_INDEX_CONFIG, *layout.settings, "write-tree", "--ignore-cache-tree"],
        cwd=layout.work_tree,
        env=env,
    )
    tree = proc.stdout.decode("ascii", errors="replace").strip()
    return tree if proc.code == 0 and tree else None


def _add_all(
    layout: _Layout, env: Mapping[str, str], started: Callable[[], None] | None = None
) -> bytes:
    """``git add -A --verbose`` on the private index; returns git's (untranslated) report.
    *started* is called once git is hashing."""
    proc = _run(
        [*_INDEX_CONFIG, *layout.settings, "add", "-A", "--verbose"],
        cwd=layout.work_tree,
        env={**env, "LC_ALL": "C", "LANGUAGE": "C"},
        started=started,
    )
    if proc.code != 0:
        raise RepositoryError(
            f"cannot fingerprint the work tree {layout.work_tree}: {_stderr(proc)}",
            hint="make the file readable, commit or remove the embedded repository, "
            "or list the path in .gitignore",
        )
    return proc.stdout


def _write_tree(layout: _Layout, env: Mapping[str, str]) -> str:
    proc = _run([*_INDEX_CONFIG, *layout.settings, "write-tree"], cwd=layout.work_tree, env=env)
    tree = proc.stdout.decode("ascii", errors="replace").strip()
    if proc.code != 0 or not tree:
        raise RepositoryError(
            f"cannot write the workspace tree of {layout.work_tree}: {_stderr(proc)}",
            hint="check the repository with `git fsck`",
        )
    return tree


def _file_state(path: Path) -> tuple[int, int] | None:
    """Enough stat data to tell whether git rewrote *path* (inode numbers alone get reused)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns


def _compact(layout: _Layout, env: Mapping[str, str], index: Path) -> bool:
    """Store a kept index in format 4 (prefix-compressed paths, about a fifth smaller).

    Every later call that starts from it and changes anything has git hash and write the whole
    file twice (``add``, then ``write-tree``); measured 10-20% faster on 50,000 files.  Converting
    costs one extra write, once per kept index, paid by the first call that replaces a kept index
    (the very first fingerprint, in a fresh clone say, keeps its result as git wrote it).  False
    if git refused.
    """
    if index_files.header(index)[0] == 4:
        return True
    proc = _run(
        [*_INDEX_CONFIG, *layout.settings, "update-index", "--index-version", "4"],
        cwd=layout.work_tree,
        env=env,
    )
    return proc.code == 0


def _private_tree(layout: _Layout, started: Callable[[], None] | None = None) -> str:
    """``git add -A`` + ``git write-tree`` on a private index; keep the result when it is safe.
    *started* is called once git is hashing the work tree."""
    private_dir = private_folder(layout.git_dir)
    if inside(private_dir, layout.work_tree, layout.git_dir, layout.common_dir):
        # in the work tree, its files would be fingerprinted too; in the git dir, anything in
        # the work tree could swap them
        raise RepositoryError(
            f"the fingerprint's private indexes would be inside the repository ({private_dir})",
            hint="unset GITAUDIT_CACHE / XDG_CACHE_HOME, or point it outside the repository",
        )
    try:
        private_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise RepositoryError(
            f"cannot create {private_dir}: {exc.strerror}",
            hint="gitaudit needs a cache folder it can write (set GITAUDIT_CACHE to choose one)",
        ) from exc
    index_files.sweep(private_dir)
    temp = private_dir / f"{TEMP_PREFIX}{os.getpid()}-{os.urandom(6).hex()}.index"
    env = {
        "GIT_DIR": str(layout.git_dir),
        "GIT_WORK_TREE": str(layout.work_tree),
        "GIT_INDEX_FILE": str(temp),
    }
    try:
        seed = _seed(layout, private_dir, temp, env, allow_warm=True)
        before = _file_state(temp)
        report = _add_all(layout, env, started)
        if seed.from_warm and b".gitattributes" in report:
            # Attributes in the tree changed since the kept result was made: its blobs may have
            # been hashed under the old ones.  Drop it and start over from the user's index.
            temp.unlink()
            if seed.warm is not None:
                with contextlib.suppress(OSError):
                    seed.warm.unlink()
            seed = _seed(layout, private_dir, temp, env, allow_warm=False)
            before = _file_state(temp)
            report = _add_all(layout, env)
        rewritten = _file_state(temp) != before
        # git rewrites the index whenever it changed an entry: else the tree is the seed's
        tree = seed.tree if seed.tree and not rewritten else _write_tree(layout, env)
        removed = any(line.startswith(b"remove '") for line in report.splitlines())
        if (
            seed.warm is not None
            and seed.entries >= 0
            and not removed
            and rewritten  # git changed it: otherwise nothing is gained
            and index_files.header(temp)[1]
            == seed.entries  # nothing added either: the user's paths
            and seed.key is not None
            and (not seed.from_warm or _compact(layout, env, temp))
        ):
            index_files.keep_vouched(temp, seed.warm, seed.key, tree)
            index_files.sweep(private_dir, keep=seed.warm)
        return tree
    finally:
        for leftover in (temp, temp.with_name(temp.name + ".lock")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


# --------------------------------------------------------------------------- public API


def _refuse_local_filters(layout: _Layout) -> None:
    """Content filters defined in the repository's own config (which anything in the work tree
    can write) would let the bytes that checks read differ from the bytes fingerprinted, so
    evidence would prove a tree that was never tested. They are refused; filters configured in
    the user's global config (git-lfs, say) are outside the work tree and trusted like the key
    directory."""
    config = layout.common_dir / "config"
    try:
        text = config.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    if "filter" not in text:
        return
    import pygit2

    try:
        entries = [e.name for e in pygit2.Config(str(config))]
    except pygit2.GitError:
        return
    drivers = sorted(
        {n for n in entries if n.startswith("filter.") and n.endswith((".clean", ".process"))}
    )
    if drivers:
        raise RepositoryError(
            f"{config} defines content filters ({', '.join(drivers)}): the bytes checks read "
            "could differ from the tree gitaudit fingerprints",
            hint="remove them from the repository config (`git config --unset ...`); filters "
            "from your global config are allowed",
        )


class _Prefetch:
    """A fingerprint started early, in a thread, so that git hashes the work tree while the
    process imports the rest of gitaudit (the gate's start-up then overlaps git's work).

    The caller waits until ``git add -A`` is running (or the thread gave up): the Python work
    before it (finding the repository, seeding the private index) is on the critical path, and
    would otherwise compete for the interpreter with the caller's imports."""

    def __init__(self, start: Path) -> None:
        import threading

        self.start = start
        self.layout: _Layout | None = None
        self.result: Fingerprint | None = None
        self.hashing = threading.Event()
        self.thread = threading.Thread(target=self._work, name="gitaudit-fingerprint", daemon=True)
        self.thread.start()
        self.hashing.wait(_LAUNCH_WAIT)

    def _work(self) -> None:
        try:
            with contextlib.suppress(Exception):  # the caller computes it again, and explains
                self.layout = _locate(self.start)
                self.result = _fingerprint(self.layout, self.hashing.set)
        finally:
            self.hashing.set()

    def take(self, repo_path: Path | str) -> Fingerprint | None:
        """The prefetched fingerprint if it is of the work tree containing *repo_path*."""
        self.thread.join()
        if self.layout is None or self.result is None:
            return None
        wanted = os.path.realpath(_start_dir(repo_path))
        if wanted not in (os.path.realpath(self.start), os.path.realpath(self.layout.work_tree)):
            return None
        return self.result


_PREFETCHED: list[_Prefetch] = []  # at most one, taken by the next workspace_fingerprint
_LAUNCH_WAIT = 1.0  # seconds a prefetch waits for git to start hashing (a slow disk, a first seed)


def prefetch(repo_path: Path | str) -> None:
    """Start fingerprinting the work tree containing *repo_path* in the background; the next
    :func:`workspace_fingerprint` of that work tree in this process takes the result (once).
    For a command that judges the work tree as it is when the command starts."""
    with contextlib.suppress(RepositoryError, RuntimeError):
        start = _start_dir(repo_path)
        if not any(p.start == start for p in _PREFETCHED):  # started once per command
            started = _Prefetch(start)
            _PREFETCHED[:] = [started]
            if not _RUNNING:
                import atexit

                atexit.unregister(_finish_prefetch)  # registered once
                atexit.register(_finish_prefetch)
            _RUNNING[:] = [p for p in _RUNNING if p.thread.is_alive()] + [started]


_RUNNING: list[_Prefetch] = []  # prefetches started and perhaps still running, for the exit


def _finish_prefetch() -> None:
    """At exit, a prefetch still running (nobody took it: the command failed before it judged
    the work tree) is waited for, so its git finishes and its private index is removed: a
    command leaves nothing behind. An interrupted command drops it first
    (:func:`drop_prefetch`)."""
    while _RUNNING:
        _RUNNING.pop().thread.join()


def drop_prefetch() -> None:
    """Forget the prefetches without waiting for them (Ctrl-C: their git was interrupted too,
    or is left to finish on its own; a stray private index is removed by a later fingerprint)."""
    _PREFETCHED.clear()
    _RUNNING.clear()


def workspace_fingerprint(repo_path: Path | str) -> Fingerprint:
    """Fingerprint the work tree containing *repo_path* without touching its index or files.

    Raises :class:`RepositoryError` for a bare repository, a path outside any repository, or a
    work tree git cannot hash (an unreadable file, an embedded repository without commits). A
    fingerprint started by :func:`prefetch` for this work tree is taken instead (once).
    """
    while _PREFETCHED:
        found = _PREFETCHED.pop().take(repo_path)
        if found is not None:
            return found
    return _fingerprint(_locate(repo_path))


def _fingerprint(layout: _Layout, started: Callable[[], None] | None = None) -> Fingerprint:
    _refuse_local_filters(layout)
    tree = _private_tree(layout, started)
    empty = EMPTY_TREE_SHA256 if len(tree) == len(EMPTY_TREE_SHA256) else EMPTY_TREE
    clean = tree == (layout.head_tree or empty)
    return Fingerprint(tree=tree, head=layout.head, clean=clean)


def tree_of(repo_path: Path | str, rev: str) -> str:
    """The tree id of revision *rev* (a commit, tag or tree name or id) in *repo_path*.

    Works in bare repositories too.  Raises :class:`RepositoryError` when *rev* names nothing, or
    something that is not a tree or commit.
    """
    start = _start_dir(repo_path)
    proc = _run(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{tree}}"],
        cwd=start,
        env=None,
    )
    if proc.code != 0:
        _require_repository(start)
        raise RepositoryError(
            f"unknown revision or not a tree: {rev!r} in {start}",
            hint="pass a commit or tree that exists in this repository",
        )
    return proc.stdout.decode("ascii").strip()


def changed_paths(repo_path: Path | str, old_tree: str, new_tree: str) -> list[str]:
    """Paths that differ between two trees (or commits): added, deleted, modified, mode changes.

    Sorted, recursive (files and gitlinks, never directories), with no rename detection: a rename
    is reported as both paths.  Used to say which files a check changed in the workspace.
    """
    if old_tree == new_tree:
        return []
    start = _start_dir(repo_path)
    proc = _run(
        [
            "diff-tree",
            "-r",
            "-z",
            "--name-only",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            "--end-of-options",
            old_tree,
            new_tree,
        ],
        cwd=start,
        env=None,
    )
    if proc.code != 0:
        _require_repository(start)
        raise RepositoryError(
            f"cannot compare {old_tree} with {new_tree}: {_stderr(proc)}",
            hint="both must be trees or commits present in this repository",
        )
    names = proc.stdout.split(b"\0")
    return sorted({os.fsdecode(name) for name in names if name})


def _require_repository(start: Path) -> None:
    proc = _run(["rev-parse", "--git-dir"], cwd=start, env=None)
    if proc.code != 0:
        raise RepositoryError(
            f"not a git repository: {start} ({_stderr(proc)})",
            hint="run inside a git repository or pass its path",
        )
