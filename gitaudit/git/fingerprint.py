"""The workspace fingerprint: the git tree id of what is on disk right now.

Evidence is only worth something if it names exactly what was checked.  The fingerprint is the tree
that ``git add -A && git write-tree`` would produce in a copy of the repository: every tracked file
plus every untracked file that is not ignored, with executable bits, symlinks and deletions, as git
itself would hash them (the tree's attributes, the user's global filters and ``core.autocrlf``,
``.gitignore``, ``info/exclude`` and ``core.excludesFile`` all apply).  A clean checkout therefore
fingerprints to ``HEAD^{tree}``, so evidence recorded on a clean workspace is directly comparable
with commits.

Those conversions lose information (``ident`` takes ``$Id: anything$`` for ``$Id$``, ``text`` some
CRLF line ends for none), so the tree must be what the files hold, not just what they hash to:
:mod:`gitaudit.git.conversions` compares each file git hashes with its blob and with what a
checkout writes for it (unless no conversion can apply at all), and refuses conversions set
where the tree does not pin them (the repository's config, ``info/attributes``).

How it is computed, and why that way:

* The user's index and work tree are never written.  ``git add -A`` and ``git write-tree`` run
  against a *private* index: a per-process file in the work tree's folder of the user's cache
  (:func:`private_folder`; not in the git dir, which anything in the work tree can write, and
  where another process could swap the file while git reads it).
* It is seeded from gitaudit's own stat cache, the *kept* index (``warm-*.index``): the paths
  of the user's index, each with the stat data git recorded when it last hashed the file *for
  gitaudit*, so only files changed since then are hashed (hashing everything, an empty index
  or pygit2's ``Index.add_all``, is 4x-40x slower on a large tree).  The user's index is
  anyone's to write: it says which paths are tracked (a force-added ignored file counts, a file
  the user stopped tracking and ignores does not, a submodule that is not checked out keeps its
  commit), never what they hold.  Its stat data, blob ids, marks (``assume-unchanged``,
  ``skip-worktree``) and cached tree ids never reach the private index: a hand-written entry
  with an edited file's stat data and the proven blob id, which has ``git status`` and ``git
  commit`` take the edit for the proven file, is hashed like any path the kept index lacks.
  With nothing kept (a fresh clone, an emptied cache, new settings) every file is hashed.
* The kept index holds exactly the user's paths (untracked files are hashed on every call, and
  taken out before keeping), so a clean workspace keeps fingerprinting to ``HEAD^{tree}``.  It
  is used only with its tag (a MAC under the local key, :mod:`gitaudit.git.index_files`)
  binding it to the file gitaudit wrote and to the user-index version whose paths it holds.
  Each process has its own private index, so concurrent fingerprints never contend for a lock
  or corrupt each other; a crash leaves at worst a stray file that later calls remove.
* Inside hooks git exports ``GIT_DIR``, ``GIT_INDEX_FILE``, ``GIT_WORK_TREE``, ``GIT_PREFIX``
  and friends, pointing at *its* index.  Every git process started here runs with the one
  environment policy of :mod:`gitaudit.git.environment` (which drops them) plus the ones it
  needs set explicitly, so the result does not depend on where it is called from.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from gitaudit import secret
from gitaudit.errors import RepositoryError
from gitaudit.git import conversions, head_start, index_files, parts
from gitaudit.git.call import GitResult, run_git
from gitaudit.git.environment import as_it_is
from gitaudit.git.head_start import ADD_ALL, ADD_ENV, INDEX_CONFIG
from gitaudit.named import NamedTuple
from gitaudit.places import fingerprint_dir, inside, require_entered

TYPE_CHECKING = False  # not typing's (gitaudit.named)
if TYPE_CHECKING:
    from typing import Any

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


class Fingerprint(NamedTuple):
    """The state of a work tree.

    ``tree`` is the tree id of the workspace content; ``head`` the commit HEAD points at (``None``
    in a repository without commits); ``clean`` is true when the workspace is exactly HEAD's tree
    (for a repository without commits: when the workspace has nothing git would add).

    (These records are NamedTuples, not dataclasses: ``dataclasses`` costs a prefetched
    fingerprint about 10 ms of imports before git can start hashing; :mod:`gitaudit.named`'s,
    which make the same classes as typing's without importing typing.)
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
    settings: tuple[str, ...]  # environment.as_it_is for this work tree: on every index command


class _Seed(NamedTuple):
    identity: str | None  # the user-index version whose paths the private index holds
    entries: int  # its entry count, or -1 when the result must not be kept for reuse
    warm: Path | None  # where a reusable result lives (None: no local key)
    from_warm: bool  # the stat data came from the kept index (else every file is hashed)
    key: bytes | None = None  # the local key that tags kept results
    tree: str | None = None  # the tree the seed's entries make, when known
    current: bool = False  # the kept index as it is, for this very version of the user's
    added: bytes | None = None  # the report of a `git add -A` the seeding already ran
    modes: bool = False  # the user's modes count (core.fileMode=false)
    hashed: bool = False  # every file was hashed by this call, into the seed itself


def _run(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    started: Callable[[], object] | None = None,
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
    where = list(head_start.LOCATE)
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


# --------------------------------------------------------------------------- the computation


_GITLINK = b"160000 "
_UNMERGED = (b" 1\t", b" 2\t", b" 3\t")
_PATHS = re.compile(rb"\t([^\0]*)\0")
_MODE_PATHS = re.compile(rb"(\d+) [^\0\t]*\t([^\0]*)\0")
_RECORDS = re.compile(rb"([^\0\t]*)\t([^\0]*)\0")


def _list(layout: _Layout, env: Mapping[str, str], *options: str) -> bytes:
    proc = _run(
        [*INDEX_CONFIG, *layout.settings, "ls-files", "-z", *options],
        cwd=layout.work_tree,
        env=env,
    )
    if proc.code != 0:
        raise RepositoryError(
            f"cannot read the index of {layout.work_tree}: {_stderr(proc)}",
            hint="check the repository with `git status`",
        )
    return proc.stdout


def _update(
    layout: _Layout, env: Mapping[str, str], options: Sequence[str], records: list[bytes]
) -> None:
    """``git update-index -z OPTIONS`` on the private index, fed *records*."""
    if not records:
        return
    proc = _run(
        [*INDEX_CONFIG, *layout.settings, "update-index", "-z", *options],
        cwd=layout.work_tree,
        env=env,
        stdin=b"\0".join(records) + b"\0",
    )
    if proc.code != 0:
        raise RepositoryError(
            f"cannot update the private index of {layout.work_tree}: {_stderr(proc)}",
            hint="check the repository with `git status`",
        )


def _seed(
    layout: _Layout,
    private_dir: Path,
    temp: Path,
    env: Mapping[str, str],
    *,
    allow_warm: bool,
    started: Callable[[], None] | None = None,
) -> _Seed:
    """Fill *temp* with the paths of the user's index, each with gitaudit's own stat data.

    The user's index says which paths are tracked (an ignored file stays counted while it is
    tracked), never what they hold: its stat data, blob ids, marks and cached tree ids are
    anyone's to write. The kept index holds the paths of one version of the user's index with
    the stat data git recorded when it hashed each file for gitaudit; it is taken as it is for
    that version, or brought to the paths of the current one: paths the user no longer tracks
    are removed, the ones it lacks are entered with no stat data, so git hashes them. With no
    kept index (the first call in a clone, new settings) every file is hashed, by a ``git add
    -A`` from no index whose report the seed carries when it needs no second one."""
    key = secret.local_key(str(layout.work_tree), create=True)
    slot = head_start.warm_path(str(private_dir), str(layout.git_dir), str(layout.common_dir))
    warm = Path(slot) if key else None
    user = temp.with_name(f"{temp.stem}-user.index")
    kept = None
    try:
        src_fd = os.open(layout.git_dir / "index", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        src_fd = -1
    try:
        st = os.fstat(src_fd) if src_fd >= 0 else None
        identity = index_files.identity(src_fd, st) if st is not None else None
        if warm is not None and key is not None and allow_warm:
            kept = index_files.copy_vouched(warm, temp, key)
            if kept is not None and kept.basis == identity:
                return _Seed(identity, kept.entries, warm, True, key, kept.tree, current=True)
        if st is not None:
            index_files.copy_open_file(src_fd, st, user)
    finally:
        if src_fd >= 0:
            os.close(src_fd)
    try:
        # What the user's index tracks, read from a copy of the version named (whole: git reads
        # a truncated index as entries with null ids); nothing trustworthy says it otherwise,
        # and the whole work tree is hashed as if nothing were tracked.
        listing = b""
        if identity is not None and index_files.index_intact(user):
            listing = _list(layout, {**env, "GIT_INDEX_FILE": str(user)}, "--stage")
    finally:
        with contextlib.suppress(FileNotFoundError):
            user.unlink()
    # git takes executable bits from the index, not the disk, under core.fileMode=false: the
    # user's modes then count like its paths
    modes = _index_modes(layout, env)
    report = ours = None
    if kept is None and not modes:  # nothing kept says what any file holds: hash them all
        # (from no index, which costs a third less than entering the user's paths first)
        report, ours = _hash_everything(layout, env, temp, listing, started)
    same = _reconcile(layout, env, listing, modes=modes, ours=ours)
    unmerged = any(stage in listing for stage in _UNMERGED)
    keep = identity is not None and listing and not unmerged  # conflicts collapse on add
    paths = listing.count(b"\0")  # one record a path, when none is unmerged
    tree = kept.tree if kept is not None and same else None
    added = report if same else None  # the paths were the user's already: nothing to add again
    return _Seed(
        identity,
        paths if keep else -1,
        warm,
        kept is not None,
        key,
        tree,
        added=added,
        modes=modes,
        hashed=report is not None,
    )


def _index_modes(layout: _Layout, env: Mapping[str, str]) -> bool:
    """Whether git takes executable bits from the index (``core.fileMode=false``)."""
    proc = _run(["config", "--type=bool", "core.fileMode"], cwd=layout.work_tree, env=env)
    return proc.stdout.strip() == b"false"


def _reconcile(
    layout: _Layout,
    env: Mapping[str, str],
    listing: bytes,
    *,
    modes: bool,
    ours: bytes | None = None,
) -> bool:
    """Bring the private index to the paths of the user's (*listing*, ``ls-files --stage
    -z``), and to its modes with *modes*: remove the paths it lacks, enter its other entries
    with no stat data (git hashes the file, or removes the entry when the file is gone), and
    take its gitlinks as they are (a submodule that is not checked out keeps its commit).
    True when the private index was already there. *ours*: its ``ls-files -z`` when already
    read (never with *modes*)."""
    if ours is None:
        ours = b""
        if os.path.exists(env["GIT_INDEX_FILE"]):
            ours = _list(layout, env, *(("--stage",) if modes else ()))
    wanted: list[Any] = (_MODE_PATHS if modes else _PATHS).findall(listing)
    have: list[Any] = _MODE_PATHS.findall(ours) if modes else ours.split(b"\0")[:-1]
    gitlinks = listing.startswith(_GITLINK) or b"\0" + _GITLINK in listing
    if wanted == have and not gitlinks:
        return True
    records = {path: info for info, path in _RECORDS.findall(listing)}
    present = set(have)
    paths = [h[1] for h in have] if modes else have
    _update(layout, env, ("--force-remove", "--stdin"), [p for p in paths if p not in records])
    entries = [
        b"%s %s 0\t%s" % (*info.split(b" ")[:2], path)
        for path, info in records.items()
        if ((info[: info.index(b" ")], path) if modes else path) not in present
        or info.startswith(_GITLINK)
    ]
    _update(layout, env, ("--index-info",), entries)
    return False


def _add_all(
    layout: _Layout, env: Mapping[str, str], started: Callable[[], None] | None = None
) -> bytes:
    """``git add -A --verbose`` on the private index; returns git's (untranslated) report.
    *started* is called once git is hashing."""
    proc = _run(
        [*INDEX_CONFIG, *layout.settings, *ADD_ALL],
        cwd=layout.work_tree,
        env={**env, **ADD_ENV},
        started=started,
    )
    return _added(layout, proc)


def _hash_everything(
    layout: _Layout,
    env: Mapping[str, str],
    temp: Path,
    listing: bytes,
    started: Callable[[], None] | None = None,
) -> tuple[bytes, bytes | None]:
    """Hash every file of the work tree into the private index *temp*, from no index: in
    parts, one ``git add -A`` a core, on a large work tree (:mod:`gitaudit.git.parts`; the
    user's index *listing* only says where to cut it), else (or when the parts cannot be
    joined) in one. git's report, and the private index's ``ls-files -z`` when read."""
    count = parts.parts_for(listing, _cores())
    if count > 1 and not temp.exists():
        joined = _add_in_parts(layout, env, temp, listing, count, started)
        if joined is not None:
            return joined
    return _add_all(layout, env, started), None


def _cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1  # pragma: no cover - platforms without affinity


def _add_in_parts(
    layout: _Layout,
    env: Mapping[str, str],
    temp: Path,
    listing: bytes,
    count: int,
    started: Callable[[], None] | None,
) -> tuple[bytes, bytes] | None:
    """:func:`_hash_everything` in *count* parts: the joined report and listing, or None when
    the work tree could not be cut, a part failed, or git does not read the joined index as
    the parts made it (the caller then hashes it in one)."""
    points = parts.cut_points(listing, count)
    specs = parts.exclusions(os.fsencode(layout.work_tree), listing, points) if points else None
    if specs is None:
        return None
    files = [temp.with_name(f"{temp.stem}-part{k}{temp.suffix}") for k in range(len(specs))]
    try:
        results = _run_parts(layout, env, files, specs, started)
        return _join_parts(layout, env, temp, files, results) if results is not None else None
    finally:
        for file in files:
            for leftover in (file, file.with_name(file.name + ".lock")):
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()


def _run_parts(
    layout: _Layout,
    env: Mapping[str, str],
    files: list[Path],
    specs: list[bytes],
    started: Callable[[], None] | None,
) -> list[GitResult] | None:
    """One ``git add -A`` a part, all at once, part *k* into *files[k]* with the pathspecs
    *specs[k]*: their results, or None when any failed."""
    import threading

    results: list[GitResult | None] = [None] * len(specs)

    def add(k: int) -> None:
        with contextlib.suppress(RepositoryError):  # the one process after it explains
            results[k] = _run(
                [
                    *INDEX_CONFIG,
                    *layout.settings,
                    *parts.PART_CONFIG,
                    *ADD_ALL,
                    "--pathspec-from-file=-",
                    "--pathspec-file-nul",
                ],
                cwd=layout.work_tree,
                env={**env, **ADD_ENV, "GIT_INDEX_FILE": str(files[k])},
                stdin=specs[k],
            )

    threads = [threading.Thread(target=add, args=(k,), daemon=True) for k in range(len(specs))]
    for thread in threads:
        thread.start()
    if started is not None:
        started()
    for thread in threads:
        thread.join()
    done = [
        r
        for r, spec in zip(results, specs, strict=True)
        if r is not None and parts.succeeded(r.code, r.stderr, spec)
    ]
    return done if len(done) == len(results) else None


def _join_parts(
    layout: _Layout,
    env: Mapping[str, str],
    temp: Path,
    files: list[Path],
    results: list[GitResult],
) -> tuple[bytes, bytes] | None:
    """Join the parts' indexes *files* into the private index *temp*, and check it on git's
    reading: the joined report and listing, or None (and no *temp*)."""
    # a part with nothing to add writes no index (a cut moved up to a folder may leave one)
    made = [(f, r) for f, r in zip(files, results, strict=True) if f.exists() or r.stdout]
    if not made:
        return None
    ends = [parts.ends(r.stdout) for _, r in made]
    firsts, lasts = [first for first, _ in ends], [last for _, last in ends]
    try:
        counts = parts.join([str(f) for f, _ in made], str(temp), lasts)
    except OSError:
        counts = None
    if counts is None:
        return None
    listed = _run(
        [*INDEX_CONFIG, *layout.settings, "ls-files", "-z"], cwd=layout.work_tree, env=env
    )
    if listed.code != 0 or not parts.in_order(listed.stdout, counts, firsts, lasts):
        temp.unlink()
        return None
    return b"".join(r.stdout for _, r in made), listed.stdout


def _added(layout: _Layout, proc: GitResult) -> bytes:
    """The report of a finished ``git add -A --verbose``; RepositoryError when it failed, or
    when git says it could not read part of the work tree (:func:`head_start.unread`: it
    exits 0 then, with the entries it could not read as they were)."""
    if proc.code != 0:
        raise RepositoryError(
            f"cannot fingerprint the work tree {layout.work_tree}: {_stderr(proc)}",
            hint=_out_of_room(layout, _stderr(proc))
            or "make the file readable, commit or remove the embedded repository, "
            "or list the path in .gitignore",
        )
    unreadable = head_start.unread(proc.stderr)
    if unreadable is not None:
        raise RepositoryError(
            f"cannot fingerprint the work tree {layout.work_tree}: git could not read all of "
            f"it ({unreadable[:300]})",
            hint="make every file and folder of the work tree readable (`chmod -R u+rwX`), "
            "or remove what git cannot read, or list it in .gitignore (a folder by name: "
            "`data/`)",
        )
    return proc.stdout


def _write_tree(
    layout: _Layout, env: Mapping[str, str], meanwhile: Callable[[], object] | None = None
) -> str:
    """``git write-tree`` of the private index; *meanwhile* is called while git writes it."""
    proc = _run(
        [*INDEX_CONFIG, *layout.settings, "write-tree"],
        cwd=layout.work_tree,
        env=env,
        started=meanwhile,
    )
    tree = proc.stdout.decode("ascii", errors="replace").strip()
    if proc.code != 0 or not tree:
        raise RepositoryError(
            f"cannot write the workspace tree of {layout.work_tree}: {_stderr(proc)}",
            hint=_out_of_room(layout, _stderr(proc)) or "check the repository with `git fsck`",
        )
    return tree


_NO_ROOM = ("No space left on device", "Disk quota exceeded", "File too large")


def _out_of_room(layout: _Layout, stderr: str) -> str | None:
    """The hint for git's words of a full disk (or quota) in *stderr*; None for anything else
    (the file or repository hints of the callers fit those)."""
    if not any(words in stderr for words in _NO_ROOM):
        return None
    return (
        f"free disk space where git writes: the repository's objects ({layout.common_dir}) "
        f"and gitaudit's private index ({private_folder(layout.git_dir)}); then run the "
        "command again"
    )


def _file_state(path: Path) -> tuple[int, int] | None:
    """Enough stat data to tell whether git rewrote *path* (inode numbers alone get reused)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns


def _private_dir(layout: _Layout) -> Path:
    """The folder of the work tree's private indexes, made if need be and swept of debris."""
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
    return private_dir


class _Taken(NamedTuple):
    seed: _Seed
    before: tuple[int, int] | None  # the private index as git found it
    report: bytes


def _take(layout: _Layout, started: head_start.Started) -> _Taken | None:
    """The result of the head start's ``git add -A`` if the kept index it started from is
    vouched for by its tag and nothing wrote it since; else None, with the head start
    stopped and removed (the caller computes the fingerprint from the start). RepositoryError
    when git failed."""
    key = secret.local_key(str(layout.work_tree), create=True)
    tagged = started.kept
    kept = index_files.vouched(tagged, key) if key is not None and tagged is not None else None
    if kept is None or tagged is None or not tagged.unchanged() or kept.basis != started.identity:
        started.discard()
        return None
    code, out, err = started.finish()
    started.discard(keep_index=True)
    report = _added(layout, GitResult(("git", *ADD_ALL), code, out, err))
    warm = Path(started.warm)
    seed = _Seed(started.identity, kept.entries, warm, True, key, kept.tree, current=True)
    return _Taken(seed, started.before, report)


def _private_tree(
    layout: _Layout,
    started: Callable[[], None] | None = None,
    launched: head_start.Started | None = None,
) -> str:
    """``git add -A`` + ``git write-tree`` on a private index; keep the result when it is safe.
    *started* is called once git is hashing the work tree; *launched*: the head start's git,
    taken when its seed is vouched for."""
    began = launched.launched_ns if launched is not None else time.time_ns()
    private_dir = _private_dir(layout)
    taken = _take(layout, launched) if launched is not None else None
    temp = Path(launched.temp if taken and launched else head_start.temp_path(str(private_dir)))
    env = {
        "GIT_DIR": str(layout.git_dir),
        "GIT_WORK_TREE": str(layout.work_tree),
        "GIT_INDEX_FILE": str(temp),
    }
    base = Path(head_start.base_path(str(temp)))
    try:
        if taken is not None:
            seed, before, report = taken
        else:
            seed = _seed(layout, private_dir, temp, env, allow_warm=True, started=started)
            before = _file_state(temp)
            _copy_base(temp, base)
            report = seed.added if seed.added is not None else _add_all(layout, env, started)
        # hashed from no index, before the seed was kept: compared whole, not against the seed
        # (whose entries this very call hashed, conversions and all)
        everything = seed.added is not None or seed.hashed
        if seed.from_warm and b".gitattributes" in report:
            # Attributes in the tree changed since the kept result was made: its blobs may have
            # been hashed under the old ones.  Drop it and hash every file again.
            temp.unlink()
            if seed.warm is not None:
                with contextlib.suppress(OSError):
                    seed.warm.unlink()
            seed = _seed(layout, private_dir, temp, env, allow_warm=False)
            before = _file_state(temp)
            _copy_base(temp, base)
            report = _add_all(layout, env)
            everything = True
        after = _file_state(temp)
        if after is None and before is not None:  # git reads a missing index as an empty one
            raise RepositoryError(
                f"the fingerprint's private index {temp} was removed while git hashed the "
                "work tree",
                hint="run the command again; if it recurs, check what cleans "
                f"{temp.parent} (nothing but gitaudit should)",
            )
        rewritten = after != before
        # the folders conversions.possible looks in, listed while git writes the new tree
        listing = (
            conversions.list_folders(layout, seed.tree)
            if rewritten and seed.tree and not everything
            else None
        )
        try:
            # git rewrites the index whenever it changed an entry: else the tree is the seed's
            tree = (
                seed.tree
                if seed.tree and not rewritten
                else _write_tree(layout, env, None if listing is None else listing.read)
            )
        except BaseException:
            if listing is not None:
                conversions.drop(listing)
            raise
        if (rewritten or everything) and conversions.possible(
            layout, env, tree, report, began, seed=listing
        ):
            conversions.require_faithful(layout, env, None if everything else base, temp)
        if rewritten or not seed.current:
            _keep(layout, env, seed, temp, base, report, tree)
        return tree
    finally:
        for leftover in (temp, temp.with_name(temp.name + ".lock"), base):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


def _copy_base(temp: Path, base: Path) -> None:
    """Keep the seed as *base*: what the kept index is brought back to after ``git add -A``.
    A second name for the same file, not a copy: git never writes an index in place (it
    writes a new file and renames it over the old), so *base* keeps the seed's bytes."""
    with contextlib.suppress(FileNotFoundError):
        base.unlink()
    try:
        os.link(temp, base)
    except FileNotFoundError:
        pass  # no seed: nothing to bring back
    except OSError:  # a file system without hard links
        index_files.copy_file(temp, base)


def _keep(
    layout: _Layout,
    env: Mapping[str, str],
    seed: _Seed,
    temp: Path,
    base: Path,
    report: bytes,
    tree: str,
) -> None:
    """Keep the private index *temp*, tagged, for the next calls: it holds the stat data git
    recorded for the files it hashed (or found unchanged) this time. It is kept with the user's
    paths only, so that a file counts while the user tracks it and never after (say, once
    ignored): when ``git add -A`` added untracked files or removed missing ones, those are
    taken out and put back (as in *base*, the seed), which is worth its two listings only when
    a tracked file changed or the user's index is new to the kept one. (Otherwise a tracked
    file touched without a change is read again by each call, until then.)"""
    if seed.warm is None or seed.key is None or seed.identity is None or seed.entries < 0:
        return
    lines = report.splitlines()
    removed = sum(1 for line in lines if line.startswith(b"remove '"))
    count = index_files.header(temp)[1]
    tree_named: str | None = tree
    if count != seed.entries or removed:
        untracked = count - seed.entries + removed
        changed = sum(1 for line in lines if line.startswith(b"add '")) - untracked
        if (seed.current and changed <= 0) or not base.exists():
            return
        base_env = {**env, "GIT_INDEX_FILE": str(base)}
        _reconcile(layout, env, _list(layout, base_env, "--stage"), modes=seed.modes)
        if index_files.header(temp)[1] != seed.entries:
            return
        tree_named = None  # its entries no longer make the tree just computed
    # the seed's second name goes first: unlinking it later would change the kept file's
    # change time, and its tag would no longer match
    base.unlink(missing_ok=True)
    index_files.keep_vouched(temp, seed.warm, seed.key, seed.identity, tree_named)
    index_files.sweep(private_dir=temp.parent, keep=seed.warm)


# --------------------------------------------------------------------------- public API


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


def prefetch(repo_path: Path | str, *, head_start_tried: bool = False) -> None:
    """Start fingerprinting the work tree containing *repo_path* in the background; the next
    :func:`workspace_fingerprint` of that work tree in this process takes the result (once).
    For a command that judges the work tree as it is when the command starts. The usual case
    gets a head start (:func:`gitaudit.git.head_start.launch`, which the entry points try
    before importing this module: *head_start_tried*); anything else runs in a thread here."""
    with contextlib.suppress(RepositoryError, RuntimeError):
        start = _start_dir(repo_path)
        if any(p.start == start for p in _PREFETCHED):  # started once per command
            return
        if not head_start_tried and head_start.launch(start):
            return
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
    launched = head_start.take(repo_path)
    if launched is not None:
        where = (Path(launched.git_dir), Path(launched.common_dir), Path(launched.work_tree))
        layout = _Layout(*where, launched.head, launched.head_tree, launched.settings)
        try:
            return _fingerprint(layout, launched=launched)
        except BaseException:  # whatever failed: its git stopped, its files removed
            launched.discard()
            raise
    while _PREFETCHED:
        found = _PREFETCHED.pop().take(repo_path)
        if found is not None:
            return found
    return _fingerprint(_locate(repo_path))


def _fingerprint(
    layout: _Layout,
    started: Callable[[], None] | None = None,
    launched: head_start.Started | None = None,
) -> Fingerprint:
    conversions.refuse_local(layout)
    tree = _private_tree(layout, started, launched)
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
