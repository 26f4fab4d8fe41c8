"""The private checkout: the judged tree, materialised where the checks run.

Evidence names a tree (the workspace fingerprint), so the checks must read exactly that tree:
not the live work tree (which anyone may edit while a run is under way, and whose ignored files,
filters and local settings the tree does not pin down). A run therefore brings a private checkout
to the fingerprinted tree and runs its checks there, as they would run in a fresh clone:

* **Outside the project.** Checkouts live in the user's cache directory
  (:func:`gitaudit.places.checkouts_dir`), so a tool that looks upwards from a check's directory
  (pytest's rootdir and conftest search, Node's ``node_modules``, git) never finds the live
  project, and an agent confined to the project cannot edit them.
* **Neutral git settings.** The checkout has its own git directory whose objects are the
  repository's (``objects/info/alternates``); no repository, user or system configuration, no
  ``info/attributes``, no ``core.attributesFile``, no hooks and no ``git -c`` from the caller
  apply: only the tree's own ``.gitattributes``. A content filter the tree asks for is refused
  unless the sealed plan declares it (``"filters"``), and then only the driver from the user's
  global configuration is used.
* **Verified objects.** git does not check an object's content against its name when it reads
  it, and anything can write into ``.git/objects``; so every tree and blob written into the
  checkout is hashed and compared with its id first (all of them for a fresh checkout or after a
  run that changed the checkout, the changed ones for an update). The checks can write the
  checkout's private git dir, which the next update reads before any check runs: it is made anew
  every time (only its authenticated index stays), and git runs there with ``GIT_COMMON_DIR`` and
  ``GIT_NO_REPLACE_OBJECTS``, so no object, replace ref or ``commondir`` a check left is read.
* **Submodules** are materialised at the commits the tree records, from the submodule's own
  object store (``.git/modules/<name>``), each with its own index, when the tree's
  ``.gitmodules`` names their path (as a clone's ``git submodule update --init`` does: a
  submodule it does not name is an empty folder there, and here); uncommitted submodule state
  never reaches a check, and the purity check looks into each one (a check that changes a
  submodule's files for the next one makes the run impure).
* **Ignored files do not exist** in the checkout. A path the plan declares in ``ignored_paths``
  (a virtualenv, ``node_modules``) is linked in from the work tree; its listing is recorded and
  must not change during the run, and an editable install pointing back into the work tree (a
  ``.pth`` line, a module a ``.pth`` imports, a finder, a symlink) is refused (it would make
  checks read the live sources).
* **A clone-like repository.** The checkout's ``.git`` file points at its private git dir, whose
  HEAD is the commit of the tree (or a commit made for it in the private object store), so a
  check that runs git sees a clean clone.
* **Kept between runs**, updated incrementally (only changed files are written), and left clean
  after each run: what a run produced is removed when it ends, and what git does not track is
  removed again before the next update (whoever writes the cache may have added it since), so
  the next run starts from the tree alone. The slot's state (its tree and the digest of its
  index) is authenticated with the local secret (:mod:`gitaudit.secret`); a slot whose state
  does not verify is rebuilt.

Each slot ``<n>/`` serves one run at a time (an exclusive ``flock`` on ``<n>.lock``); concurrent
runs take further slots. A slot also holds the checks' private ``home`` and ``tmp``, emptied for
every run.

**Nothing above the checkout is a check's.** A tool looks upwards from a check's folder for its
configuration (pytest's ``pytest.ini``, ``pyproject.toml``, ``setup.cfg``, ``tox.ini`` and
``conftest.py``; ``package.json``, ``node_modules`` and ``.npmrc``; ``Cargo.toml``, ``go.mod``,
a ``.git``): one a check left in the slot's folder, or in a folder above it, would steer the
checks of a later step or run of another tree (a ``conftest.py`` that turns failures into
passes). The fence lets checks write only the slot's ``tree`` (and its private git dirs),
``home`` and ``tmp`` (:func:`gitaudit.checks.fence.for_run`), and :func:`acquire` removes what
gitaudit did not make from the slot's folder and the folders above it (``checkouts/<repo>/``,
``checkouts/``: gitaudit's alone, whose names it chooses), never following a link, and refuses
to run while the cache folder itself (which the user may name: ``GITAUDIT_CACHE``) holds
anything else, rather than delete there what may be the user's. Removing keeps runs going after
a check planted something where the kernel has no fence; nothing of the user's can be lost by it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import importlib.machinery
import json
import os
import re
import shutil
import stat
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import field
from pathlib import Path
from typing import NamedTuple

from gitaudit import secret
from gitaudit.errors import RunError
from gitaudit.executables import git_program
from gitaudit.frozen import frozen
from gitaudit.git import index_stat
from gitaudit.git.call import GitResult, run_git
from gitaudit.git.config_paths import filter_drivers
from gitaudit.git.environment import AS_IT_IS, git_env
from gitaudit.places import checkouts_dir, inside

META = "meta.json"
META_FORMAT = 1
SUBMODULE_DEPTH = 8  # nested submodules deeper than this are refused
_FILTER = re.compile(r"(?:^|\s)filter=([^\s]+)")
# a committer for the commit made when the judged tree is not a commit of the repository
_IDENTITY = {
    "GIT_AUTHOR_NAME": "gitaudit",
    "GIT_AUTHOR_EMAIL": "gitaudit@localhost",
    "GIT_COMMITTER_NAME": "gitaudit",
    "GIT_COMMITTER_EMAIL": "gitaudit@localhost",
    "GIT_AUTHOR_DATE": "1970-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "1970-01-01T00:00:00Z",
}
_PRIVATE_CONFIG = (
    "[core]\n"
    "\trepositoryformatversion = 0\n"
    "\tbare = false\n"
    "\tlogallrefupdates = false\n"
    "\tattributesFile = /dev/null\n"
    "\texcludesFile = /dev/null\n"  # not git's default, under the neutral XDG folder
    "\thooksPath = /dev/null\n"
    "\tuntrackedCache = false\n"
    "\tfsmonitor = false\n"
)


Stamp = index_stat.Stamp
"""An entry of the checkout as ``lstat`` finds it: its inode and its change time, cut to
what a git index keeps (:func:`gitaudit.git.index_stat.stamp_of`). Writing a file, renaming it,
changing its mode or its links moves the change time, which no process can set back: a file
written and put back keeps its bytes, not its stamp."""


@frozen
class Slot:
    """One private checkout: ``tree`` is where checks run; ``git`` its private git dir."""

    root: Path

    @property
    def tree(self) -> Path:
        return self.root / "tree"

    @property
    def git(self) -> Path:
        return self.root / "git"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def neutral(self) -> Path:
        return self.root / "neutral"  # an empty HOME and XDG_CONFIG_HOME for our own git


@frozen
class IgnoredPath:
    """A declared ignored path linked into the checkout, and the digest of its listing."""

    path: str
    files: int
    digest: str
    stamp: str = ""  # the stamps of its entries when the checks start: compared, not recorded

    def to_json(self) -> dict[str, object]:
        return {"files": self.files, "digest": self.digest}


@frozen
class PlacedSubmodule:
    """A materialised submodule: its private git dir, the commit it is at, and the digest of the
    index :func:`materialise` left there (the purity check compares both)."""

    git_dir: Path
    commit: str
    index_digest: str


@frozen
class Materialised:
    """What :func:`materialise` did: ``fresh`` (written from scratch) or an update, the objects
    it verified, the content filters applied (name -> driver settings), the submodules (path ->
    commit; and path -> :class:`PlacedSubmodule`, nested ones by their path in the checkout) and
    the declared ignored paths linked in."""

    slot: Slot
    tree: str
    fresh: bool
    verified: int
    filters: Mapping[str, str] = field(default_factory=dict)
    submodules: Mapping[str, str] = field(default_factory=dict)
    ignored: tuple[IgnoredPath, ...] = ()
    index_digest: str = ""
    pristine: bool = False  # written afresh, or updated from a checkout the last run left clean
    placed_submodules: Mapping[str, PlacedSubmodule] = field(default_factory=dict)
    # files and links of the checkout as the checks found them: path -> (inode, change time);
    # every one (*complete*), or those git cannot tell from a later write (see :func:`_before`)
    stamps: Mapping[str, Stamp] = field(default_factory=dict)
    complete: bool = True

    @property
    def config(self) -> list[str]:
        """The ``-c`` settings of the declared filters' drivers (to read the checkout back)."""
        return [f"filter.{k}={v}" for k, v in self.filters.items()]

    def to_json(self) -> dict[str, object]:
        return {
            "mode": "checkout",
            "fresh": self.fresh,
            "objects_verified": self.verified,
            "filters": dict(self.filters),
            "submodules": dict(self.submodules),
            "ignored_paths": {i.path: i.to_json() for i in self.ignored},
        }


# ------------------------------------------------------------------------------------- slots


def _base(gitdir: Path, workdir: Path) -> Path:
    base = Path(checkouts_dir(gitdir))
    if inside(base, workdir, gitdir):
        raise RunError(
            f"the private checkouts would be inside the repository ({base})",
            hint="unset GITAUDIT_CACHE / XDG_CACHE_HOME, or point it outside the repository",
        )
    return base


_CACHE_ENTRIES = ("checkouts", "fingerprint")  # the folders of the cache (gitaudit.places)
UPWARD = (
    "node_modules",  # Node's require() tries each folder's above the importing file
    "package.json",  # npm's and Node's package root (its "type", "imports")
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",  # pytest's configuration and rootdir, and ruff's, black's, mypy's
    "go.mod",
    "go.work",
    "tsconfig.json",
)
"""What tools look for upwards from a check's folder and read as the project's: none may lie
in a folder above gitaudit's cache (:func:`_nothing_found_upwards`). A list, not every tool's
names; and not the user's dotfiles there: npm reads a folder's ``.npmrc`` only as the project's,
which its ``package.json`` or ``node_modules`` makes it, while cargo reads the
``.cargo/config.toml`` of every folder above (``~/.cargo`` is where rustup installs cargo, so
it is left alone: a limit)."""
_SLOT_FOLDERS = ("tree", "git", "home", "tmp", "neutral", "modules")
_REPOSITORY_KEY = re.compile(r"[0-9a-f]{20}")
_SLOT_ENTRY = re.compile(r"[0-9]+(\.lock)?")


def _kind(entry: os.DirEntry[str]) -> str:
    """``folder``, ``file``, or ``other`` (a link among them), without following a link."""
    if entry.is_dir(follow_symlinks=False):
        return "folder"
    return "file" if entry.is_file(follow_symlinks=False) else "other"


def _made_in_checkouts(name: str, kind: str) -> bool:
    return kind == "folder" and _REPOSITORY_KEY.fullmatch(name) is not None


def _made_in_repository(name: str, kind: str) -> bool:
    wanted = "file" if name.endswith(".lock") else "folder"
    return kind == wanted and _SLOT_ENTRY.fullmatch(name) is not None


def _made_in_slot(name: str, kind: str) -> bool:
    return name in _SLOT_FOLDERS if kind == "folder" else kind == "file" and name == META


def _tidy(folder: Path, made: Callable[[str, str], bool]) -> None:
    """Remove every entry of *folder* that *made* (its name and :func:`_kind`) says gitaudit
    did not make; links are removed, never followed."""
    for entry in os.scandir(folder):
        if not made(entry.name, _kind(entry)):
            with contextlib.suppress(FileNotFoundError):  # a concurrent run removed it first
                _remove_tree(Path(entry.path))


def _own_folders(base: Path) -> None:
    """The folders from the cache down to *base* (``<cache>/checkouts/<repo>``), each holding
    only what gitaudit makes there (see the module docstring): RunError naming an entry of the
    cache folder gitaudit did not make."""
    checkouts = base.parent
    cache = checkouts.parent
    cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    for entry in os.scandir(cache):
        if entry.name not in _CACHE_ENTRIES or _kind(entry) != "folder":
            raise RunError(
                f"gitaudit's cache folder {cache} holds {entry.name!r}, which gitaudit did not "
                "make: a tool that looks upwards from a check's folder (pytest, npm, cargo, git) "
                "would find it",
                hint=f"remove {entry.path}, or point GITAUDIT_CACHE at a folder of gitaudit's own",
            )
    _nothing_found_upwards(cache)
    for folder, made in ((checkouts, _made_in_checkouts), (base, _made_in_repository)):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
        _tidy(folder, made)


def _nothing_found_upwards(cache: Path) -> None:
    """RunError naming the first entry of :data:`UPWARD` in a folder above the *cache* folder
    (``~/.cache``, ``~``, up to ``/``): whoever writes as the user can leave one there before a
    run, and a check's tool finds it as if the tree held it. The fence does not stop it: it
    denies listing those folders, not opening a name in them, which is how Node and pytest
    look. The folders above the cache as spelled and as its real path (a check's folder is
    found by its real path, ``os.getcwd``, when ``~/.cache`` is a link elsewhere)."""
    spelled = Path(os.path.abspath(cache)).parents
    real = Path(os.path.realpath(cache)).parents
    for folder in dict.fromkeys([*spelled, *real]):
        for name in UPWARD:
            found = folder / name
            if os.path.lexists(found):
                raise RunError(
                    f"{found} lies above gitaudit's cache folder {cache}: a tool that looks "
                    "upwards from a check's folder (node, npm, pytest, go) would read it, though "
                    "the judged tree does not hold it",
                    hint=f"remove {found}, or point GITAUDIT_CACHE at a folder with none above it",
                )


@contextlib.contextmanager
def acquire(gitdir: Path, workdir: Path) -> Iterator[Slot]:
    """The first free slot (exclusively locked while in use), created when all are busy; it and
    the folders above it hold only what gitaudit made (:func:`_own_folders`)."""
    base = _base(gitdir, workdir)
    _own_folders(base)
    n = 0
    while True:
        handle = open(base / f"{n}.lock", "a+")  # noqa: SIM115 (held for the whole run)
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            n += 1
            continue
        try:
            slot = Slot(base / str(n))
            with contextlib.suppress(FileExistsError):
                slot.root.mkdir(mode=0o700)
            _tidy(slot.root, _made_in_slot)
            for folder in (slot.home, slot.tmp, slot.neutral):
                if folder.exists() or folder.is_symlink():
                    _remove_tree(folder)
                folder.mkdir(parents=True)
            yield slot
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            handle.close()
        return


def _own_folder(root: Path, path: str) -> bool:
    """Whether every part of *path* below *root* is a folder of its own, no link: a check can
    swap a submodule's folder (or one above it) for a link anywhere, through which git's
    ``clean`` of the submodule, its sweep and its ``.git`` file would reach that place."""
    here = root
    for part in Path(path).parts:
        here = here / part
        try:
            if not stat.S_ISDIR(os.lstat(here).st_mode):
                return False
        except OSError:
            return False
    return True


def _make_own_folder(root: Path, path: str) -> Path:
    """*path* below *root* as a folder of its own (:func:`_own_folder`): a link, or anything
    but a folder, found on the way is removed first (never followed)."""
    here = root
    for part in Path(path).parts:
        here = here / part
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISDIR(os.lstat(here).st_mode):
                here.unlink()
        here.mkdir(exist_ok=True)
    return here


def _write_gitfile(work: Path, git_dir: Path) -> None:
    """Write the ``.git`` file of the checkout (or of a submodule in it) that leads git to
    *git_dir*, as a new file: a check can leave a link (or a folder) there, and a write
    through a link reached whatever it named (an ignored file the next run's checks read as
    if the tree held it, or a fenced file outside the checkout)."""
    path = work / ".git"
    _remove_tree(path)  # a file, a link (never followed) or a folder; nothing when absent
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(_gitfile_text(git_dir))


def _gitfile_text(git_dir: Path) -> str:
    return f"gitdir: {git_dir}\n"


def _remove_tree(path: Path) -> None:
    """rm -rf that also removes what a check made read-only or unreadable."""

    def retry(_func: object, name: str, _exc: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(name), stat.S_IRWXU)
        with contextlib.suppress(OSError):
            os.chmod(name, stat.S_IRWXU)
        if os.path.isdir(name) and not os.path.islink(name):
            shutil.rmtree(name, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)

    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, onerror=retry)


# --------------------------------------------------------------------------------- git there


def _neutral_env(slot: Slot, git_dir: Path, work_tree: Path) -> dict[str, str]:
    """git on a checkout: its private git dir, no configuration or attributes but the tree's."""
    return {
        "GIT_DIR": str(git_dir),
        "GIT_WORK_TREE": str(work_tree),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_COUNT": "0",
        "GIT_CONFIG_PARAMETERS": "",
        "GIT_ATTR_NOSYSTEM": "1",
        # what a check may leave in the private git dir that would have git read other objects
        # than the verified ones: replace refs (and grafts), a commondir naming another git dir
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_COMMON_DIR": str(git_dir),
        "HOME": str(slot.neutral),
        "XDG_CONFIG_HOME": str(slot.neutral),
        "GIT_TERMINAL_PROMPT": "0",
        # git's own test knob: a split index keeps its entries in a file beside it, which the
        # private git dir, made anew before every update, would not keep
        "GIT_TEST_SPLIT_INDEX": "0",
        "LC_ALL": "C",
        "LANGUAGE": "C",
    }


def _git(
    slot: Slot,
    git_dir: Path,
    work_tree: Path,
    args: Sequence[str],
    *,
    config: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    check: bool = True,
    input: bytes | None = None,
) -> GitResult:
    options = [item for pair in (("-c", c) for c in config) for item in pair]
    return run_git(
        [*options, *args],
        cwd=work_tree if work_tree.is_dir() else slot.root,
        env={**_neutral_env(slot, git_dir, work_tree), **(env or {})},
        check=check,
        input=input,
    )


def _objects_dir(gitdir: Path) -> Path:
    """The object store of the repository at *gitdir* (the common dir's, for a worktree)."""
    found = run_git(
        ["rev-parse", "--path-format=absolute", "--git-path", "objects"], git_dir=gitdir
    )
    return Path(found.out.strip())


_KEPT_IN_GIT_DIR = frozenset({"index"})  # authenticated by the slot's state (its digest)


def _private_git_dir(git_dir: Path, objects: Path, ignored_paths: Sequence[str] = ()) -> None:
    """A minimal git dir that borrows *objects* and has a neutral configuration of its own,
    made anew: everything in it but the index goes first. The checks can write it (the
    checkout's ``.git`` names it), and whatever they leave there would be read by the next
    update of the checkout before any check runs: objects of its own (which git reads before
    the borrowed ones, and which are not the verified ones), replace refs, a ``commondir``
    naming another git dir. Only the index stays: its digest is part of the slot's
    authenticated state."""
    if git_dir.is_symlink() or (git_dir.exists() and not git_dir.is_dir()):
        git_dir.unlink()
    if git_dir.is_dir():
        for entry in os.scandir(git_dir):
            if entry.name not in _KEPT_IN_GIT_DIR or not entry.is_file(follow_symlinks=False):
                _remove_tree(Path(entry.path))
    (git_dir / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (git_dir / "refs").mkdir(exist_ok=True)
    (git_dir / "info").mkdir(exist_ok=True)
    (git_dir / "objects" / "info" / "alternates").write_text(f"{objects}\n")
    _own_settings(git_dir, ignored_paths)
    if not (git_dir / "HEAD").exists():
        (git_dir / "HEAD").write_text("ref: refs/heads/gitaudit\n")


def _own_settings(git_dir: Path, ignored_paths: Sequence[str]) -> None:
    """(Re)write the settings of a private git dir: its config, and the excludes that keep the
    declared ignored paths out of git's sight; no attributes of its own. The checks can write
    these files (the checkout's ``.git`` names the dir), so the purity check writes them again
    before it asks git what changed: a check that set ``core.trustctime=false``, or defined a
    clean filter, would otherwise have git take an edited file for the tree's; and the run's
    own git there, unfenced, would start a program a check named (``core.fsmonitor``).

    Each file is written as a new one, and ``info`` made a folder of its own: what a check left
    under those names (a link to the user's ``~/.gitconfig``, an ``info`` that leads to
    ``~/.config/git``) is removed, never followed, so the run writes nothing outside the slot.
    *git_dir* itself must be a folder, no link (see :func:`_settled`)."""
    _write_new(git_dir / "config", _PRIVATE_CONFIG)
    info = git_dir / "info"
    if info.is_symlink() or (info.exists() and not info.is_dir()):
        _remove_tree(info)
    info.mkdir(exist_ok=True)
    _write_new(info / "exclude", "".join(f"/{p.strip('/')}\n" for p in ignored_paths))
    _remove_tree(info / "attributes")


def _write_new(path: Path, text: str) -> None:
    """*text* as a new file at *path*: whatever is there first goes (a link is never followed)."""
    _remove_tree(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _settled(slot: Slot, git_dir: Path, ignored_paths: Sequence[str]) -> bool:
    """Write the settings of the private git dir *git_dir* of *slot* again before the run's own
    git reads it after the checks (:func:`_own_settings`); False, and nothing written, when a
    check replaced it (or a folder above it in the slot) with a link or anything but a folder:
    no git may then run there."""
    try:
        rel = git_dir.relative_to(slot.root)
    except ValueError:
        return False
    if not _own_folder(slot.root, str(rel)):
        return False
    _own_settings(git_dir, ignored_paths)
    return True


# ---------------------------------------------------------------------------- materialising


def materialise(
    slot: Slot,
    gitdir: Path,
    workdir: Path,
    tree: str,
    head: str | None,
    *,
    declared_filters: Sequence[str] = (),
    ignored_paths: Sequence[str] = (),
) -> Materialised:
    """Bring *slot* to exactly *tree* (see the module docstring). RunError, naming the path,
    the filter or the object, when the tree cannot be materialised as a fresh clone would."""

    def afresh() -> Materialised:
        _forget(slot)  # the slot's state goes: the next attempt writes everything again
        return materialise(
            slot,
            gitdir,
            workdir,
            tree,
            head,
            declared_filters=declared_filters,
            ignored_paths=ignored_paths,
        )

    objects = _objects_dir(gitdir)
    meta = _read_meta(slot, workdir)
    fresh = meta.get("objects") != str(objects) or meta.get("index") != _index_digest(slot.git)
    kept_at = _changed_at(slot.git / "index")
    if fresh:
        _clear(slot)
        meta = {}
    _private_git_dir(slot.git, objects, ignored_paths)
    previous = str(meta["tree"]) if isinstance(meta.get("tree"), str) else None
    listing = _listing(slot, slot.git, slot.tree, previous, tree)
    if previous is not None and listing.attributes:
        # a .gitattributes changed: git rewrites only the files whose blobs changed, so files
        # whose attributes changed would keep the bytes of the last tree; a fresh clone's
        # bytes come from writing everything again
        return afresh()
    if previous is not None and not meta.get("clean"):
        # the last run changed the checkout (or did not say it left it clean): the reset below
        # writes the files it changed again from the object store, which anyone can write, so
        # every object of the tree is verified, not only those that differ from the last tree
        listing = _listing(slot, slot.git, slot.tree, None, tree)
    requested = _requested(slot, listing, previous is None, tree, meta.get("requested"))
    filters = _filters(requested, declared_filters)
    config = [f"{key}={value}" for key, value in filters.items()]
    for gone, gitlink in _stale_submodules(meta, tree, slot):
        _remove_tree(slot.tree / gone)
        if gitlink:  # still in the tree, not named: an empty folder, as git writes it
            (slot.tree / gone).mkdir(parents=True, exist_ok=True)
    # the objects are verified while git writes them: nothing in the checkout is used before
    # the verification has passed, and a forgery wipes it
    verification = _Background(
        lambda: verify_objects(objects, _objects(slot, slot.git, slot.tree, listing), gitdir)
    )
    moved = _move(slot, previous, tree, config, clean=bool(meta.get("clean")))
    try:
        verified = verification.result()
    except RunError:
        _forget(slot)
        _remove_tree(slot.tree)
        raise
    if moved is None:
        if fresh:
            raise RunError(
                f"cannot write the private checkout of tree {tree[:12]} in {slot.tree}",
                hint="check the disk space and permissions of the cache directory",
            )
        return afresh()  # rebuild from scratch
    # what git wrote holds the verified objects (None: every file)
    _require_as_verified(
        slot, slot.git, tree, None if moved == RESET else listing.written, config, objects
    )
    _write_gitfile(slot.tree, slot.git)
    _set_head(slot, slot.git, slot.tree, tree, head)
    known = meta.get("submodule_state")
    states: dict[str, str] = {}
    placed: dict[str, PlacedSubmodule] = {}
    submodules = _submodules(
        slot,
        gitdir,
        slot.git,
        slot.tree,
        tree,
        depth=0,
        known=known if isinstance(known, dict) and not fresh else {},
        states=states,
        placed=placed,
    )
    ignored = tuple(_link_ignored(slot, workdir, ignored_paths))
    drivers = {k.removeprefix("filter."): v for k, v in filters.items()}
    index_data = _read_index(slot.git)
    index = _digest(index_data)
    _write_meta(
        slot,
        workdir,
        {
            "objects": str(objects),
            "tree": tree,
            "index": index,
            "requested": requested,
            "submodules": sorted(submodules),
            "submodule_state": states,
        },
    )
    pristine = fresh or moved == MERGED
    merged = (kept_at, listing.changed) if moved == MERGED else None
    before = _before(slot, index_data, tree, submodules, ignored, pristine, merged)
    if before is None:
        return afresh()  # git kept a file whose stat data its index does not hold
    stamps, complete = before
    return Materialised(
        slot,
        tree,
        fresh,
        verified,
        drivers,
        submodules,
        ignored,
        index,
        pristine,
        placed,
        stamps,
        complete,
    )


def _require_as_verified(
    slot: Slot,
    git_dir: Path,
    tree: str,
    paths: Sequence[str] | None,
    config: Sequence[str],
    objects: Path,
    work_tree: Path | None = None,
) -> None:
    """The files git just wrote into a checkout (*paths*; None: all)
    hold the objects its index names, compared by content; else RunError naming the first,
    and the checkout is wiped.

    Objects are verified beside git's own reads of them, by a reader of their own: whoever
    writes the object store while the run is under way (a process the agent left running)
    can put the honest object back in place for the verification and another under its name
    for git's read, so the checkout holds bytes the judged tree does not, under stat data
    git records as clean (unseen by the purity check when the index is written in a later
    second than the file). git compares each file with its entry by content when the index
    it reads is dated before the file (racily clean): a copy of the index dated 1970 makes
    every entry so, and ``git diff-files`` (which writes nothing) names those that differ.

    A tree object swapped the same way names another blob, and the file then holds that one:
    after a checkout of one tree (*paths* None), whose cache of tree ids git took from the
    objects it read (and the purity check trusts), the index's entries must hash to *tree*."""
    if paths is not None and not paths:
        return  # git wrote nothing
    work_tree = work_tree or slot.tree
    # the tree the entries make is worked out on the other core while git compares the files
    with ThreadPoolExecutor(max_workers=1) as pool:
        entries = pool.submit(_index_tree, slot, git_dir, work_tree) if paths is None else None
        differ = _first_unlike_its_blob(slot, git_dir, work_tree, paths, config)
        held = entries.result() if entries is not None else tree
    hint = "stop whatever writes the repository's objects during the run, run `git fsck`, and "
    if differ is not None:
        _forget(slot)
        _remove_tree(work_tree)
        raise RunError(
            f"the checkout's file {differ} does not hold the object its tree names: an object "
            f"in {objects} changed while it was checked out",
            hint=hint + "run again",
        )
    if held != tree:
        _forget(slot)
        _remove_tree(work_tree)
        raise RunError(
            f"the index of the checkout in {work_tree} holds tree {held[:12]}, not {tree[:12]}: "
            f"a tree object in {objects} changed while it was checked out",
            hint=hint + "run again",
        )


def _first_unlike_its_blob(
    slot: Slot,
    git_dir: Path,
    work_tree: Path,
    paths: Sequence[str] | None,
    config: Sequence[str],
) -> str | None:
    """The first of the files *paths* (None: all) of the checkout in *work_tree* that does not
    hold the blob the index of *git_dir* names, compared by content; None when each does."""
    probe = slot.root / "written.index"
    shutil.copyfile(git_dir / "index", probe)
    try:
        os.utime(probe, (1, 1))
        env = {"GIT_INDEX_FILE": str(probe), "GIT_LITERAL_PATHSPECS": "1"}
        base = [*AS_IT_IS, "diff-files", "--name-only", "-z", "--ignore-submodules=all", "--"]
        listed = list(paths) if paths is not None else []
        chunks = [listed[i : i + 2000] for i in range(0, len(listed), 2000)] or [[]]
        for chunk in chunks:
            found = _git(slot, git_dir, work_tree, [*base, *chunk], config=config, env=env)
            differ = [os.fsdecode(p) for p in found.stdout.split(b"\0") if p]
            if differ:
                return differ[0]
        return None
    finally:
        with contextlib.suppress(FileNotFoundError):
            probe.unlink()


def _index_tree(slot: Slot, git_dir: Path, work_tree: Path) -> str:
    """The tree the entries of the index of *git_dir* hash to, worked out afresh (an index
    made of its entries alone: no cached tree ids)."""
    entries = _git(slot, git_dir, work_tree, ["ls-files", "-s", "-z"]).stdout
    made = slot.root / "entries.index"
    with contextlib.suppress(FileNotFoundError):
        made.unlink()
    env = {"GIT_INDEX_FILE": str(made)}
    try:
        _git(
            slot, git_dir, work_tree, ["update-index", "-z", "--index-info"], env=env, input=entries
        )
        return _git(slot, git_dir, work_tree, ["write-tree"], env=env).out.strip()
    finally:
        with contextlib.suppress(FileNotFoundError):
            made.unlink()


class _Background:
    """A function run in a thread; :meth:`result` waits for it and returns or raises."""

    def __init__(self, fn: Callable[[], int]) -> None:
        self.value: int = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[[], int]) -> None:
        try:
            self.value = fn()
        except BaseException as exc:  # handed to the caller by result()
            self.error = exc

    def result(self) -> int:
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.value


MERGED, RESET = "merged", "reset"


def _move(
    slot: Slot, previous: str | None, tree: str, config: Sequence[str], *, clean: bool
) -> str | None:
    """Bring the checkout from *previous* to *tree*. After a run that left it clean (verified
    equal to *previous* by the purity check, leftovers removed), a two-way merge writes only
    what changed (nothing at all for the same tree): :data:`MERGED`; otherwise leftovers are
    swept and the checkout reset to the tree, which also restores what a check changed:
    :data:`RESET`. None when git could not.

    "Left clean" is what the last run saw, not what the checkout holds now: whoever can write
    the cache (the agent, between two runs) may have added files since, and the merge keeps
    every file its index does not hold (an ignored ``build/flag`` a check tests for, a
    ``__pycache__`` entry that shadows a module of the tree). So what git does not track goes
    first (``git clean``; what git does not see, a FIFO or a nested ``.git``, the purity check
    names and the next run sweeps), and the merge runs only on what is left: the tree."""
    if previous is not None and clean and _cleaned(slot, slot.git, slot.tree):
        if previous == tree:
            return MERGED  # a two-way merge of a tree with itself writes no file
        args = ["read-tree", "-m", "-u", previous, tree]
        if _git(slot, slot.git, slot.tree, args, config=config, check=False).code == 0:
            return MERGED
    if previous is not None:
        _sweep(slot, slot.git, slot.tree)  # leftovers the last run could not remove
    args = ["read-tree", "--reset", "-u", tree]
    return (
        RESET
        if _git(slot, slot.git, slot.tree, args, config=config, check=False).code == 0
        else None
    )


def _cleaned(slot: Slot, git_dir: Path, work_tree: Path) -> bool:
    """Remove every untracked and ignored file and folder of a checkout (``git clean``, nested
    repositories too); False when git could not (the caller sweeps and resets instead)."""
    return _git(slot, git_dir, work_tree, ["clean", "-ffdxq"], check=False).code == 0


def _stale_submodules(meta: Mapping[str, object], tree: str, slot: Slot) -> list[tuple[str, bool]]:
    """Submodule paths of the last checkout that *tree* no longer has as submodules: no gitlink
    there, or one its ``.gitmodules`` does not name (their materialised contents would stand in
    the way, or be read where a clone holds an empty folder); with whether *tree* has a gitlink
    there."""
    paths = [p for p in meta.get("submodules") or () if isinstance(p, str)]  # type: ignore[attr-defined]
    if not paths:
        return []
    listed = _git(slot, slot.git, slot.tree, ["ls-tree", "-z", tree, "--", *paths]).stdout
    named = _submodule_names(slot, slot.git, slot.tree, tree)
    kept = {
        os.fsdecode(r.partition(b"\t")[2]) for r in listed.split(b"\0") if r.startswith(b"160000 ")
    }
    return [(p, p in kept) for p in paths if p not in kept or p not in named]


def _forget(slot: Slot) -> None:
    with contextlib.suppress(FileNotFoundError):
        (slot.root / META).unlink()


def _clear(slot: Slot) -> None:
    """An empty checkout and no private git dir: the next update writes everything."""
    for folder in (slot.tree, slot.git):
        if folder.exists() or folder.is_symlink():
            _remove_tree(folder)
    slot.tree.mkdir(parents=True)


def _read_index(git_dir: Path) -> bytes:
    try:
        return (git_dir / "index").read_bytes()
    except OSError:
        return b""


def _digest(index: bytes) -> str:
    return hashlib.sha256(index).hexdigest() if index else ""


def _index_digest(git_dir: Path) -> str:
    return _digest(_read_index(git_dir))


def _set_head(slot: Slot, git_dir: Path, work_tree: Path, tree: str, head: str | None) -> None:
    """HEAD of the private git dir: the commit of *tree*, or a commit made for it (in the private
    object store, never the repository's)."""
    commit = head
    if head is not None:
        head_tree = _git(slot, git_dir, work_tree, ["rev-parse", f"{head}^{{tree}}"], check=False)
        if head_tree.code != 0 or head_tree.out.strip() != tree:
            commit = None
    if commit is None:
        parents = ["-p", head] if head is not None else []
        made = _git(
            slot,
            git_dir,
            work_tree,
            ["commit-tree", tree, *parents, "-m", "gitaudit: the tree being audited"],
            env=_IDENTITY,
        )
        commit = made.out.strip()
    (git_dir / "HEAD").write_text(f"{commit}\n")


# ----------------------------------------------------------------------------------- objects


def verify_objects(objects: Path, oids: Iterable[str], gitdir: Path) -> int:
    """Hash every object in *oids* from the store and compare it with its id. RunError naming
    the first object whose content does not match (a planted object) or that is missing."""
    wanted = list(dict.fromkeys(oids))
    if not wanted:
        return 0
    env = git_env()
    try:
        git = git_program(gitdir, env)
    except FileNotFoundError as exc:
        raise RunError(f"cannot verify the checkout's objects: {exc}", hint="install git") from None
    proc = subprocess.Popen(
        [git, f"--git-dir={gitdir}", "cat-file", "--batch"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin = proc.stdin

    def feed() -> None:  # a thread: git blocks on a full stdout pipe while we would still write
        with contextlib.suppress(BrokenPipeError):
            for start in range(0, len(wanted), 1024):
                stdin.write("".join(f"{o}\n" for o in wanted[start : start + 1024]).encode())
        with contextlib.suppress(BrokenPipeError):
            stdin.close()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        for oid in wanted:
            header = proc.stdout.readline().split()
            if len(header) != 3:
                raise RunError(
                    f"object {oid[:12]} of the judged tree is missing from the repository",
                    hint="the repository is incomplete; fetch it again (`git fetch`), or run "
                    "`git fsck`",
                )
            kind, size = header[1], int(header[2])
            data = proc.stdout.read(size)
            proc.stdout.read(1)
            algorithm = "sha256" if len(oid) == 64 else "sha1"
            digest = hashlib.new(algorithm, kind + b" %d\0" % size + data).hexdigest()
            if digest != oid:
                raise RunError(
                    f"object {oid[:12]} in {objects} does not hold what its name says (its "
                    f"content hashes to {digest[:12]}): someone wrote a forged object into the "
                    "repository",
                    hint="remove the forged object (`git fsck` lists it) and run again",
                )
    finally:
        proc.stdout.close()
        proc.kill()
        proc.wait()
        feeder.join()
    return len(wanted)


# ------------------------------------------------------------------------------------ filters


def _requested(
    slot: Slot, listing: _Listing, fresh: bool, tree: str, known: object
) -> dict[str, str]:
    """The content filters *tree*'s attributes ask for (name -> the file naming it): from the
    listing of a fresh checkout; for an update, the last answer (*known*) unless a
    .gitattributes changed."""
    if fresh:
        return _filters_named(slot, listing.attributes)
    if isinstance(known, dict) and not listing.attributes:
        return {str(k): str(v) for k, v in known.items()}
    return _requested_filters(slot, tree)


def _filters(requested: Mapping[str, str], declared: Sequence[str]) -> dict[str, str]:
    """The ``-c filter.NAME.*`` settings for the content filters the tree asks for: each must be
    declared by the plan and configured in the user's global git configuration."""
    undeclared = sorted(set(requested) - set(declared))
    if undeclared:
        name = undeclared[0]
        raise RunError(
            f"the tree asks for the content filter {name!r} ({requested[name]}): a fresh clone "
            "without it would check out other bytes than the ones gitaudit fingerprints",
            hint=f'declare it in the plan (`"filters": ["{name}"]`) and reseal, or remove the '
            "filter attribute",
        )
    settings: dict[str, str] = {}
    for name in sorted(requested):
        driver = {f"filter.{k}": v for k, v in filter_drivers([name]).items()}
        if not any(k.endswith((".smudge", ".process")) for k in driver):
            raise RunError(
                f"the plan declares the content filter {name!r}, but no driver for it is "
                "configured in your global git configuration",
                hint=f"configure it (e.g. `git config --global filter.{name}.process ...`; for "
                "Git LFS: `git lfs install`)",
            )
        settings.update(driver)
    return settings


def _requested_filters(slot: Slot, tree: str) -> dict[str, str]:
    """filter name -> the .gitattributes file that names it, over every .gitattributes of
    *tree* (macros included: any ``filter=NAME`` counts)."""
    return _filters_named(slot, _attribute_files(slot, slot.git, slot.tree, tree))


def _filters_named(slot: Slot, attributes: Mapping[str, str]) -> dict[str, str]:
    """filter name -> the first of *attributes* (path -> blob) that names it."""
    found: dict[str, str] = {}
    for path, blob in sorted(attributes.items()):
        text = _git(slot, slot.git, slot.tree, ["cat-file", "blob", blob]).out
        # lines and comments as git reads them: a line ends at "\n" alone (str.splitlines also
        # ends one at U+2028, a form feed and more, which made `v<U+2028>#x filter=NAME` a
        # comment here and a filter of the file `v<U+2028>#x` for git), and only its blanks
        # come before a comment's "#"
        for line in text.split("\n"):
            if line.lstrip(" \t\r").startswith("#"):
                continue
            for name in _FILTER.findall(line):
                found.setdefault(name, path)
    return found


# --------------------------------------------------------------------------------- submodules


def _submodules(
    slot: Slot,
    source_gitdir: Path,
    git_dir: Path,
    work_tree: Path,
    tree: str,
    depth: int,
    *,
    known: Mapping[str, object],
    states: dict[str, str],
    placed: dict[str, PlacedSubmodule],
    prefix: str = "",
) -> dict[str, str]:
    """Materialise every submodule (gitlink) of *tree* at its recorded commit; path -> commit.

    Each has a private git dir of its own, made anew like the checkout's, and is reset to its
    tree with every object of it verified (git rewrites from the object store the files a
    check changed, and the submodule's store is anyone's to write). Its index is kept only
    when its digest is the one the slot's authenticated state recorded after the last update
    (*known*, by private git dir; the new ones go into *states*): one a check wrote, say with
    an edited file's stat data, goes, and every file is written again. Each one placed goes into
    *placed* under its path in the checkout (*prefix*: the path of the submodule holding it)."""
    links = list(_gitlinks(slot, git_dir, work_tree).items())
    if not links:
        return {}
    if depth >= SUBMODULE_DEPTH:
        raise RunError(f"submodules nest deeper than {SUBMODULE_DEPTH} levels")
    names = _submodule_names(slot, git_dir, work_tree, tree)
    found: dict[str, str] = {}
    for path, commit in links:
        name = names.get(path)
        if name is None:
            continue  # .gitmodules does not name it: a clone leaves its folder empty, and so here
        if ".." in name.split("/"):
            raise RunError(f"submodule {path} has the unsafe name {name!r} in .gitmodules")
        store = source_gitdir / "modules" / name
        if not (store / "objects").is_dir() or not _has_commit(store, commit):
            raise RunError(
                f"submodule {path} is recorded at commit {commit[:12]}, which {store} does not "
                "have",
                hint="fetch it: `git submodule update --init --recursive`, then run again",
            )
        sub_tree_id = run_git(["rev-parse", f"{commit}^{{tree}}"], git_dir=store).out.strip()
        key = hashlib.sha256(f"{depth}:{prefix}{path}".encode()).hexdigest()[:20]
        sub_git = slot.root / "modules" / key
        sub_work = work_tree / path
        sub_objects = _objects_dir(store)
        _private_git_dir(sub_git, sub_objects)
        _make_own_folder(work_tree, path)  # never through a link a check left there
        if known.get(key) != _index_digest(sub_git):
            with contextlib.suppress(FileNotFoundError):
                (sub_git / "index").unlink()
        listed = _listing(slot, sub_git, sub_work, None, sub_tree_id)
        verify_objects(sub_objects, [commit, *_objects(slot, sub_git, sub_work, listed)], store)
        _sweep(slot, sub_git, sub_work)
        reset = _git(
            slot, sub_git, sub_work, ["read-tree", "--reset", "-u", sub_tree_id], check=False
        )
        if reset.code != 0:
            raise reset.error(f"cannot check out submodule {path}")
        _require_as_verified(slot, sub_git, sub_tree_id, None, (), sub_objects, sub_work)
        _write_gitfile(sub_work, sub_git)
        (sub_git / "HEAD").write_text(f"{commit}\n")
        states[key] = _index_digest(sub_git)
        placed[prefix + path] = PlacedSubmodule(sub_git, commit, states[key])
        found[path] = commit
        for nested, nested_commit in _submodules(
            slot,
            store,
            sub_git,
            sub_work,
            sub_tree_id,
            depth + 1,
            known=known,
            states=states,
            placed=placed,
            prefix=f"{prefix}{path}/",
        ).items():
            found[f"{path}/{nested}"] = nested_commit
    return found


@frozen
class _Listing:
    """What a checkout from *previous* (None: from nothing) to a tree reads from the object
    store (its trees and blobs: every one, or those that changed), and the tree's
    ``.gitattributes`` among them (path -> blob)."""

    oids: tuple[str, ...]
    attributes: Mapping[str, str]
    changed: tuple[str, ...] = ()  # from *previous*: the paths that differ (trees included)
    written: tuple[str, ...] = ()  # of those, the files and links git writes
    whole: str | None = None  # from nothing: the tree whose every object :func:`_objects` lists


def _listing(
    slot: Slot, git_dir: Path, work_tree: Path, previous: str | None, tree: str
) -> _Listing:
    if previous == tree:
        return _Listing((), {})
    if previous is None:  # the objects are listed beside git's checkout (:func:`_objects`)
        return _Listing((), _attribute_files(slot, git_dir, work_tree, tree), whole=tree)
    oids = [tree]
    attributes: dict[str, str] = {}
    args = ["diff-tree", "-r", "-t", "-z", "--no-renames", previous, tree]
    parts = _git(slot, git_dir, work_tree, args).stdout.split(b"\0")
    changed = parts[1::2]
    written: list[bytes] = []
    for meta, raw in zip(parts[::2], changed, strict=False):
        fields = meta.split()
        if len(fields) < 5 or fields[1] == b"160000":
            continue
        if fields[4] != b"D":
            oids.append(fields[3].decode())
            if fields[1] != b"040000":
                written.append(raw)
        if raw == b".gitattributes" or raw.endswith(b"/.gitattributes"):
            attributes[os.fsdecode(raw)] = fields[3].decode()  # changed (a deletion counts)
    return _Listing(
        tuple(oids),
        attributes,
        tuple(map(os.fsdecode, changed)),
        tuple(map(os.fsdecode, written)),
    )


def _objects(slot: Slot, git_dir: Path, work_tree: Path, listing: _Listing) -> list[str]:
    """The objects a checkout reads, to verify: those *listing* names, or every tree and blob
    of its *whole* tree (listed in the verification's thread, while git writes)."""
    if listing.whole is None:
        return list(listing.oids)
    out = _git(slot, git_dir, work_tree, ["ls-tree", "-r", "-t", "-z", listing.whole]).stdout
    oids = [listing.whole]
    for record in out.split(b"\0"):
        fields = record.partition(b"\t")[0].split()
        if len(fields) >= 3 and fields[1] in (b"tree", b"blob"):
            oids.append(fields[2].decode())
    return oids


_EMPTY_TREE = {
    40: "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    64: "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321",
}


def _attribute_files(slot: Slot, git_dir: Path, work_tree: Path, tree: str) -> dict[str, str]:
    """path -> blob of every ``.gitattributes`` file (or link) of *tree*, in any folder: git
    finds them (a diff from the empty tree limited to that name), which costs a fraction of
    listing the whole tree here."""
    args = ["diff-tree", "-r", "-z", "--no-renames", _EMPTY_TREE[len(tree)], tree]
    parts = _git(slot, git_dir, work_tree, [*args, "--", ":(glob)**/.gitattributes"]).stdout
    records = parts.split(b"\0")
    attributes: dict[str, str] = {}
    for meta, raw in zip(records[::2], records[1::2], strict=False):
        fields = meta.split()
        named = raw == b".gitattributes" or raw.endswith(b"/.gitattributes")
        if named and len(fields) >= 5 and fields[1] != b"160000":
            attributes[os.fsdecode(raw)] = fields[3].decode()
    return attributes


def _gitlinks(slot: Slot, git_dir: Path, work_tree: Path) -> dict[str, str]:
    """path -> commit of every gitlink in the checkout's index. Only a tree with a .gitmodules
    has submodules a clone would check out, so without one nothing is listed (cheap)."""
    if not (work_tree / ".gitmodules").is_file():
        return {}
    staged = _git(slot, git_dir, work_tree, ["ls-files", "-s", "-z"])
    links: dict[str, str] = {}
    for record in staged.stdout.split(b"\0"):
        info, _, raw = record.partition(b"\t")
        if info.startswith(b"160000 "):
            links[os.fsdecode(raw)] = info.split()[1].decode()
    return links


def _submodule_names(slot: Slot, git_dir: Path, work_tree: Path, tree: str) -> dict[str, str]:
    """path -> name, from the tree's own .gitmodules."""
    listed = _git(
        slot,
        git_dir,
        work_tree,
        ["config", "--blob", f"{tree}:.gitmodules", "--get-regexp", r"^submodule\..*\.path$"],
        check=False,
    )
    names = {}
    for line in listed.out.split("\n")[:-1]:  # names and paths may hold U+2028: "\n" alone
        key, _, path = line.partition(" ")
        names[path] = key.removeprefix("submodule.").removesuffix(".path")
    return names


def _has_commit(git_dir: Path, commit: str) -> bool:
    found = run_git(["cat-file", "-e", f"{commit}^{{commit}}"], git_dir=git_dir, check=False)
    return found.code == 0


# ------------------------------------------------------------------------------ ignored paths


def _link_ignored(slot: Slot, workdir: Path, paths: Sequence[str]) -> Iterator[IgnoredPath]:
    """Link each declared ignored path of the work tree into the checkout; its listing digest."""
    for rel in paths:
        live = workdir / rel
        inside = slot.tree / rel
        if not (live.exists() or live.is_symlink()):
            raise RunError(
                f"the plan declares the ignored path {rel!r}, which does not exist in the work "
                "tree",
                hint=f"create it (e.g. the virtualenv), or remove {rel!r} from ignored_paths",
            )
        if inside.exists() or inside.is_symlink():
            raise RunError(
                f"the plan declares {rel!r} as an ignored path, but the tree has it",
                hint="declare only paths git does not record (ignored files and folders)",
            )
        _refuse_editable(rel, live, workdir, paths, slot.tree)
        inside.parent.mkdir(parents=True, exist_ok=True)
        inside.symlink_to(live)
        files, digest, stamp = _listing_digests(live)
        yield IgnoredPath(rel, files, digest, stamp)


def listing_digest(root: Path) -> tuple[int, str]:
    """(entries, sha256 of every entry's path, mode, size and mtime) under *root*: cheap, and it
    changes when anything under it is written."""
    count, digest, _stamp = _listing_digests(root)
    return count, digest


def _listing_digests(root: Path) -> tuple[int, str, str]:
    """:func:`listing_digest`, and a digest of the :data:`Stamp` of every entry and folder
    under *root* (what a run compares: a file written and put back with its times, or one
    added and removed again, moves a stamp; which is why it is not what the run records, and
    the gate compares later in a work tree that may have been copied since)."""
    h, stamps = hashlib.sha256(), hashlib.sha256()
    count = 0
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        with contextlib.suppress(FileNotFoundError):
            st = os.lstat(folder)
            where = os.path.relpath(folder, root)
            stamps.update(f"{where}/\0{st.st_ino}\0{st.st_ctime_ns}\n".encode())
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]):
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            rel = os.path.relpath(path, root)
            h.update(f"{rel}\0{st.st_mode:o}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
            stamps.update(f"{rel}\0{st.st_ino}\0{st.st_ctime_ns}\n".encode())
            count += 1
    return count, "sha256:" + h.hexdigest(), "sha256:" + stamps.hexdigest()


def ignored_unchanged(workdir: Path, ignored: IgnoredPath) -> bool:
    """Whether the declared ignored path is as the run found it: its listing, and the stamps of
    its entries (see :func:`_listing_digests`)."""
    _count, digest, stamp = _listing_digests(workdir / ignored.path)
    return digest == ignored.digest and stamp == ignored.stamp


_READ_AT_MOST = 1 << 20  # bytes of one file looked into for a path naming the work tree
_PACKAGE_FILES = 2_000  # files of one package a .pth imports looked into
_NOT_IN_A_PATH = frozenset(b"\"'` \t\r\n\0,;:()[]{}<>|=\\")
_CUSTOMIZE = ("sitecustomize", "usercustomize")  # imported by site from any sys.path folder
# folders a virtualenv or an interpreter puts on sys.path (besides those .pth files add)
# a startup hook that moves the bytecode cache (sys.pycache_prefix) has Python run bytecode
# kept there, compiled from any source, in place of the checkout's files of the same path
_PYCACHE_PREFIX = b"pycache_prefix"
_SYS_PATH_FOLDER = re.compile(r"site-packages|dist-packages|python\d+(\.\d+)?|lib-dynload")


class _WorkTree:
    """Where a path found in a declared ignored path leads: into the work tree outside the
    declared ignored paths (whose own contents are sealed and shown), by its real path."""

    def __init__(self, workdir: Path, declared: Sequence[str]) -> None:
        self.real = os.path.realpath(workdir)
        self.declared = [os.path.realpath(workdir / rel) for rel in declared]
        self.names = {os.fsencode(os.path.abspath(workdir)), os.fsencode(self.real)}

    def holds(self, path: str) -> bool:
        real = os.path.realpath(path)
        return _under(real, self.real) and not any(_under(real, d) for d in self.declared)

    def named_in(self, data: bytes) -> str | None:
        """The first path in *data* (text naming the work tree) that leads into it."""
        for name in self.names:
            at = data.find(name)
            while at >= 0:
                end = at + len(name)
                while end < len(data) and data[end] not in _NOT_IN_A_PATH:
                    end += 1
                candidate = os.fsdecode(data[at:end])
                if self.holds(candidate):
                    return candidate
                at = data.find(name, at + 1)
        return None


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _head(path: str) -> bytes:
    """The start of the regular file at *path* (through symlinks); nothing for anything else (a
    FIFO named ``x.pth`` must not block the run)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return b""
    with os.fdopen(fd, "rb") as handle:
        return handle.read(_READ_AT_MOST) if stat.S_ISREG(os.fstat(fd).st_mode) else b""


def _own_modules(checkout: Path) -> frozenset[str]:
    """The top-level modules and packages of the tree (the checkout holds exactly it, no check
    has run): modules and packages of its root, and every module or folder of ``src/``."""
    suffixes = tuple(importlib.machinery.all_suffixes())
    names: set[str] = set()
    for folder, any_folder in ((checkout, False), (checkout / "src", True)):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            if entry.is_dir(follow_symlinks=False):
                if any_folder or os.path.lexists(os.path.join(entry.path, "__init__.py")):
                    names.add(name)
            elif name.endswith(suffixes):
                names.add(name.split(".", 1)[0])
    return frozenset(n for n in names if n.isidentifier())


def _refuse_editable(
    rel: str,
    live: Path,
    workdir: Path,
    declared: Sequence[str],
    checkout: Path | None = None,
) -> None:
    """An editable install in a declared path would make checks import the live sources, and a
    module or npm package there named like one of the tree's own (the *checkout*'s, which holds
    exactly the tree) would be imported in place of the judged one: the path is sealed and its
    listing recorded, but not what it leads to nor what its files say (:class:`_EditableScan`
    says what is looked at)."""
    tree = _WorkTree(workdir, declared)
    real = os.path.realpath(live)
    linked = real != os.path.normpath(os.path.join(tree.real, rel))  # it, or a folder above it
    scan = None
    if linked and _under(real, tree.real):
        found: tuple[str, str] | None = (str(live), real)  # the live tree under another name
    else:
        scan = _EditableScan(live, tree)
        if checkout is not None:
            scan.mirror = os.path.realpath(checkout.parent.parent) + os.sep
        found = scan.run()
    if found is not None:
        where, target = found
        raise RunError(
            f"the declared ignored path {rel!r} holds an editable install pointing into the "
            f"work tree ({os.path.relpath(where, workdir)} -> {target}): checks would read the "
            "live sources, not the judged tree",
            hint="install only the project's dependencies in it (the checks import the tree's "
            'own modules from the checkout), or run that step with `"workspace": "live"`',
        )
    if scan is None or checkout is None:
        return
    if scan.redirects:
        raise RunError(
            f"the declared ignored path {rel!r} holds "
            f"{os.path.relpath(scan.redirects[0], workdir)}, which moves or fills Python's "
            "bytecode cache (sys.pycache_prefix): checks would run bytecode the tree does not "
            "pin in place of its sources",
            hint="remove it; the checks' bytecode cache is gitaudit's own (PYTHONPYCACHEPREFIX)",
        )
    shadow = scan.shadowing(_own_modules(checkout))
    if shadow is not None:
        raise RunError(
            f"the declared ignored path {rel!r} holds {os.path.relpath(shadow, workdir)}, named "
            "like a module of the tree: it would shadow the judged sources (checks would import "
            "a copy the tree does not pin)",
            hint="remove it (a copy of the project: `pip uninstall` it, keep its "
            "dependencies) and have the checks import the tree's modules (e.g. pytest's "
            "`pythonpath`)",
        )
    package = scan.own_package(workdir, checkout)
    if package is not None:
        raise RunError(
            f"the declared ignored path {rel!r} holds {os.path.relpath(package, workdir)}, "
            "named like the tree's own package: it would shadow the judged sources (checks "
            "would require a copy the tree does not pin)",
            hint="remove it (a copy of the project) and have the checks require the tree's "
            "files (a relative path, or `exports` in package.json)",
        )


class _EditableScan:
    """One walk of a declared ignored path for what leads into the work tree (outside the
    declared paths), as ``site`` and the import system would follow it: a symlink whose target
    is there; a ``.pth`` line ``site`` adds to ``sys.path`` (absolute, or relative to the
    .pth's folder) there; a ``.pth`` naming such a path anywhere (its ``import`` lines are
    executed); a module such a line may import (any name in it, as a module or package of a
    folder ``site`` processes or a .pth adds inside the declared path), a ``__editable__*``
    file (setuptools' finders and .pth files) or a ``sitecustomize``/``usercustomize`` naming
    one. Best effort: code that builds the path at run time, or reaches it through a folder
    outside the work tree, is not seen (the threat model's limits)."""

    def __init__(self, live: Path, tree: _WorkTree) -> None:
        self.live = live
        self.tree = tree
        self.imports: list[tuple[str, bytes]] = []  # (.pth file, an import line of it)
        self.folders: set[str] = set()  # folders whose modules those lines may import
        self.sites: set[str] = set()  # folders of sys.path found in it (besides self.folders)
        self.node_modules: set[str] = {str(live)} if live.name == "node_modules" else set()
        self.mirror: str | None = None  # the repository's private checkouts, when looked for
        self.redirects: list[str] = []  # what moves Python's bytecode cache, or fills it

    def run(self) -> tuple[str, str] | None:
        """(the file or symlink, where it leads) for the first thing found, else None."""
        todo = [str(self.live)]
        while todo:
            try:
                entries = list(os.scandir(todo.pop()))
            except OSError:
                continue
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    todo.append(entry.path)
                    if _SYS_PATH_FOLDER.fullmatch(entry.name):
                        self.sites.add(entry.path)
                    if entry.name == "node_modules":
                        self.node_modules.add(entry.path)
                    continue
                if _SYS_PATH_FOLDER.fullmatch(entry.name) and entry.is_dir():
                    self.sites.add(entry.path)  # linked elsewhere: its modules are imported too
                if entry.name == "node_modules" and entry.is_dir():
                    self.node_modules.add(entry.path)
                if self.mirror and entry.name.endswith(".pyc") and self.mirror in entry.path:
                    self.redirects.append(entry.path)  # bytecode cached for the checkout's files
                found = self._entry(entry)
                if found is not None:
                    return found
        return self._imported()

    def shadowing(self, own: frozenset[str]) -> str | None:
        """The first module or package named like one of *own* (the tree's top-level modules)
        in a folder Python looks in for modules: ``site-packages``, ``dist-packages``, an
        interpreter's ``lib/pythonX.Y`` and ``lib-dynload`` (or a link by such a name), a folder
        holding a ``.pth`` or one a ``.pth`` adds, anywhere (source, bytecode, extension,
        package or namespace folder)."""
        suffixes = tuple(importlib.machinery.all_suffixes())
        for folder in sorted(self.folders | self.sites):
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                stem = entry.name.split(".", 1)[0]
                if stem not in own:
                    continue
                if entry.name == stem or entry.name.endswith(suffixes):
                    return entry.path
        return None

    def own_package(self, workdir: Path, checkout: Path) -> str | None:
        """The first package of a top-level ``node_modules`` folder (none above it) named like
        the npm package of the tree whose ``package.json`` lies beside that folder, or at the
        tree's root."""
        root = _npm_name(checkout / "package.json")
        for folder in sorted(self.node_modules):
            beside = os.path.relpath(os.path.dirname(folder), workdir)
            if "node_modules" in Path(beside).parts or beside.startswith(".."):
                continue  # a dependency's own: what the tree's files require is not found there
            for name in (_npm_name(checkout / beside / "package.json"), root):
                if name is not None and os.path.lexists(os.path.join(folder, name)):
                    return os.path.join(folder, name)
        return None

    def _entry(self, entry: os.DirEntry[str]) -> tuple[str, str] | None:
        if entry.is_symlink() and self.tree.holds(entry.path):
            return entry.path, os.readlink(entry.path)
        if entry.name.endswith(".pth"):  # read through a symlink, as site reads it
            return self._pth(entry.path)
        if entry.name.startswith(("__editable__", *_CUSTOMIZE)):
            return self._names(entry.path)
        return None

    def _names(self, path: str) -> tuple[str, str] | None:
        data = _head(path)
        if _PYCACHE_PREFIX in data:
            self.redirects.append(path)
        named = self.tree.named_in(data)
        return None if named is None else (path, named)

    def _pth(self, path: str) -> tuple[str, str] | None:
        site_dir = os.path.dirname(path)
        self.folders.add(site_dir)
        for line in _head(path).splitlines():
            if not line.strip() or line.startswith(b"#"):
                continue  # as site skips them; any other line is taken both ways
            if b"import" in line:
                self.imports.append((path, line))
            added = os.path.join(site_dir, os.fsdecode(line.rstrip()))
            if self.tree.holds(added):
                return path, added
            if _under(os.path.realpath(added), os.path.realpath(self.live)):
                self.folders.add(added)
            elif os.path.isdir(added):
                self.sites.add(added)  # outside: not walked, but its modules are imported
        return self._names(path)

    def _imported(self) -> tuple[str, str] | None:
        for pth, line in self.imports:
            for word in sorted(set(re.findall(rb"[A-Za-z_][A-Za-z0-9_]*", line))):
                for module in _modules_named(self.folders, os.fsdecode(word)):
                    data = _head(module)
                    if _PYCACHE_PREFIX in data:
                        self.redirects.append(module)
                    named = self.tree.named_in(data)
                    if named is not None:
                        module = os.path.relpath(module, os.path.dirname(pth))
                        return pth, f"{module}, which names {named}"
        return None


def _npm_name(manifest: Path) -> str | None:
    """The ``name`` of the npm package whose ``package.json`` is *manifest*, when it is one that
    names a folder of ``node_modules`` (``pkg`` or ``@scope/pkg``)."""
    try:
        data = json.loads(_head(str(manifest)) or b"null")
    except ValueError:
        return None
    name = data.get("name") if isinstance(data, dict) else None
    if not isinstance(name, str) or not name or name.startswith((".", "/")) or ".." in name:
        return None
    return name


def _modules_named(folders: Iterable[str], name: str) -> Iterator[str]:
    """The files of the module or package *name* in *folders* (any suffix: source, bytecode,
    extension), at most :data:`_PACKAGE_FILES` of a package."""
    for folder in sorted(folders):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.name != name and not entry.name.startswith(name + "."):
                continue
            if not entry.is_dir():
                yield entry.path
                continue
            count = 0
            for inner, _dirs, files in os.walk(entry.path):
                for file in sorted(files):
                    count += 1
                    if count > _PACKAGE_FILES:
                        return
                    yield os.path.join(inner, file)


# ------------------------------------------------------------------------------------- purity


@frozen
class Purity:
    """What the steps left: the checkout's tree now, the paths in which it no longer equals the
    judged tree, the entries git does not see (to remove), and whether anything may be left to
    clean away (untracked or ignored files, empty folders): no when git listed nothing of the
    kind and the walk found no empty folder."""

    after: str
    changed: tuple[str, ...]
    specials: tuple[Path, ...] = ()
    leftovers: bool = True


def changed(placed: Materialised) -> Purity:
    """Whether the checkout still equals the judged tree: tracked files changed or deleted and
    untracked files that are not ignored (:func:`_git_sees`), the index itself rewritten, the
    same inside every submodule (:func:`_submodule_sees`: the superproject's look records only
    each submodule's commit, not its files), and what git does not see (``.git`` entries, FIFOs
    and other special files, unreadable directories, files written and put back: a walk of the
    checkout)."""
    slot, tree = placed.slot, placed.tree
    index = _read_index(slot.git)
    rewritten = _digest(index) != placed.index_digest
    # a check can write them: git must compare stat data in full, and start no program of its
    if not _settled(slot, slot.git, [ignored.path for ignored in placed.ignored]):
        return Purity(tree, (".git of the checkout (its git dir was replaced during the run)",))
    # the walk for what git does not see, and git's comparison of stat data where the stamps
    # leave it to git, run beside git's own look at the checkout (on two cores)
    with ThreadPoolExecutor(max_workers=2) as pool:
        walk = pool.submit(_special_entries, slot, placed)
        later = None if rewritten or placed.complete else pool.submit(_written, placed, index)
        seen = _Seen(None, tree, True) if rewritten else _git_sees(slot, placed)
        specials, hollow, touched = walk.result()
        written, unread = later.result() if later is not None else ([], None)
    found = [str(p.relative_to(slot.tree)) + why for p, why in specials]
    paths = tuple(p for p, _ in specials)
    if rewritten:
        found.append(".git index of the checkout (rewritten during the run)")
        return Purity(tree, tuple(found), paths)
    for failed in (seen.failed, unread):
        if failed is not None:
            return Purity(tree, (*found, f"(git cannot read the checkout: {failed.err})"), paths)
    if seen.tree != tree:
        # the names come from objects read through the private git dir, which a check can
        # write (a forged object under the judged tree's id named nothing): they name what
        # changed, the tree ids (git's own hashing of the checkout) say whether anything did
        args = ["diff-tree", "-r", "-z", "--name-only", "--no-renames", tree, seen.tree]
        diff = _git(slot, slot.git, slot.tree, args, check=False)
        differ = sorted({os.fsdecode(p) for p in diff.stdout.split(b"\0") if p})
        found += differ or [f"(the checkout holds tree {seen.tree}, not the judged {tree})"]
    leftovers = seen.leftovers or hollow or bool(specials)
    for path, sub in sorted(placed.placed_submodules.items()):
        inside, left = _submodule_sees(slot, path, sub)
        found += inside
        leftovers = leftovers or left
    named = set(found)
    touched = sorted({*touched, *written} - named)
    found += [f"{p} (written during the run, then put back)" for p in touched]
    return Purity(seen.tree, tuple(found), paths, leftovers)


class _Seen(NamedTuple):
    failed: GitResult | None  # git could not read the checkout
    tree: str  # the tree the checkout holds now
    leftovers: bool  # untracked or ignored files git listed (or could not tell)


_STATUS = (
    "status",
    "--porcelain",
    "-z",
    "--untracked-files=all",
    "--ignored=matching",
    "--ignore-submodules=none",
    "--no-renames",
)


def _git_sees(slot: Slot, placed: Materialised) -> _Seen:
    """What git sees in the checkout, its own settings written again first (a check can write
    them). Usually the checkout is the tree, which ``git status`` shows in one look: nothing
    but ignored files listed (it compares stat data, and re-reads racily clean files, as ``git
    add`` does; and the index with HEAD, the commit of the tree). Otherwise, and in a checkout
    with submodules, ``git add -A`` and ``git write-tree`` on a copy of its index say which
    tree it now holds."""
    if not placed.submodules:
        status = [*AS_IT_IS, *_STATUS]  # git's stat comparison in full, whatever was configured
        looked = _git(slot, slot.git, slot.tree, status, config=placed.config, check=False)
        listed = [entry for entry in looked.stdout.split(b"\0") if entry]
        if looked.code == 0 and all(entry.startswith(b"!! ") for entry in listed):
            return _Seen(None, placed.tree, bool(listed))
    probe = slot.root / "purity.index"
    shutil.copy2(slot.git / "index", probe)
    try:
        env = {"GIT_INDEX_FILE": str(probe)}
        add = [*AS_IT_IS, "add", "-A"]  # git's stat comparison in full, whatever was configured
        added = _git(slot, slot.git, slot.tree, add, config=placed.config, env=env, check=False)
        if added.code != 0:
            return _Seen(added, placed.tree, True)
        now = _git(slot, slot.git, slot.tree, ["write-tree"], env=env).out.strip()
        return _Seen(None, now, True)
    finally:
        with contextlib.suppress(FileNotFoundError):
            probe.unlink()


def _written(placed: Materialised, index: bytes) -> tuple[list[str], GitResult | None]:
    """The files of the checkout written during the run that have no stamp of their own (see
    :func:`_before`): git lists each file whose stat data no longer equals what its *index*
    records (``git diff-files``, contents aside: it does not refresh), and those whose inode
    or change time moved are named. With what git said when it could not read the checkout."""
    slot = placed.slot
    args = [*AS_IT_IS, "diff-files", "--name-only", "-z", "--ignore-submodules=all"]
    listed = _git(slot, slot.git, slot.tree, args, config=placed.config, check=False)
    if listed.code != 0:
        return [], listed
    root = str(slot.tree) + os.sep
    listed_paths = (os.fsdecode(p) for p in listed.stdout.split(b"\0") if p)
    unstamped = [p for p in listed_paths if root + p not in placed.stamps]
    if not unstamped:
        return [], None
    recorded = index_stat.file_stamps(index, len(placed.tree) // 2, root) or {}
    now = _stamps_of(slot, unstamped)  # what is gone, or no file now, git status names
    return [
        p for p in unstamped if root + p in now and now[root + p] != recorded.get(root + p)
    ], None


def _submodule_sees(slot: Slot, path: str, sub: PlacedSubmodule) -> tuple[list[str], bool]:
    """What changed inside the submodule at *path* of the checkout (paths named from the top,
    ``lib/greet.py``), and whether it may hold leftovers. git looks through the submodule's own
    private git dir, never the ``.git`` file a check could rewrite; as at the top, its settings
    are written again first, its index must be the one :func:`materialise` left (a check could
    mark an edited file unchanged in it) and its HEAD the recorded commit."""
    if not _own_folder(slot.tree, path):  # git is not run through a link a check left there
        return [f"{path} (the submodule's folder was replaced during the run)"], True
    work = slot.tree / path
    found: list[str] = []
    if (work / ".git").is_symlink() or _read_gitfile(work) != sub.git_dir:
        found.append(f"{path}/.git (rewritten during the run)")
    if _index_digest(sub.git_dir) != sub.index_digest:
        return [*found, f"{path}/.git index of submodule {path} (rewritten during the run)"], True
    try:
        head = (sub.git_dir / "HEAD").read_text().strip()
    except OSError:
        head = ""
    if head != sub.commit:
        found.append(f"{path} (the submodule's HEAD moved during the run)")
    if not _settled(slot, sub.git_dir, ()):
        return [*found, f"{path} (the submodule's git dir was replaced during the run)"], True
    # its nested submodules are looked into on their own: here only whether their commits moved
    status = [*AS_IT_IS, *(o for o in _STATUS if not o.startswith("--ignore-submodules="))]
    status.append("--ignore-submodules=dirty")
    looked = _git(slot, sub.git_dir, work, status, check=False)
    if looked.code != 0:
        return [*found, f"{path} (git cannot read the submodule: {looked.err})"], True
    listed = [entry for entry in looked.stdout.split(b"\0") if entry]
    found += [f"{path}/{os.fsdecode(e[3:])}" for e in listed if not e.startswith(b"!! ")]
    return found, bool(listed)


def _walk(
    slot: Slot, submodules: Iterable[str], ignored: Iterable[str]
) -> Iterator[tuple[str, list[os.DirEntry[str]] | None]]:
    """Each folder of the checkout with its entries (None: unreadable), below the root and each
    submodule, but no ``.git`` entry's insides and not the declared ignored paths' links."""
    # plain strings while walking (a Path per entry costs seconds on 50,000 files)
    skip = {str(slot.tree / p) for p in submodules}
    skip |= {str(slot.tree / p) for p in ignored}
    # a submodule's folder a check swapped for a link is not walked into (git reports it)
    todo = [str(slot.tree), *(str(slot.tree / s) for s in submodules if _own_folder(slot.tree, s))]
    while todo:
        folder = todo.pop()
        try:
            entries = [e for e in os.scandir(folder) if e.path not in skip]
        except OSError:
            yield folder, None
            continue
        yield folder, entries
        todo += [e.path for e in entries if e.name != ".git" and e.is_dir(follow_symlinks=False)]


def _stamp(entry: os.DirEntry[str]) -> Stamp | None:
    """*entry*'s :data:`Stamp` when it is a file or a link (None: a folder, or gone)."""
    try:
        found = entry.stat(follow_symlinks=False)
    except OSError:
        return None
    if stat.S_ISDIR(found.st_mode):
        return None
    return index_stat.stamp_of(found)


def _stamps(slot: Slot, submodules: Iterable[str], ignored: Iterable[str]) -> dict[str, Stamp]:
    """The :data:`Stamp` of every file and link of the checkout (see :func:`_walk`)."""
    found: dict[str, Stamp] = {}
    for _folder, entries in _walk(slot, submodules, ignored):
        for entry in entries or ():
            if entry.name != ".git" and (stamp := _stamp(entry)) is not None:
                found[entry.path] = stamp
    return found


def _before(
    slot: Slot,
    index: bytes,
    tree: str,
    submodules: Mapping[str, str],
    ignored: Sequence[IgnoredPath],
    pristine: bool,
    merged: tuple[int | None, Sequence[str]] | None,
) -> tuple[dict[str, Stamp], bool] | None:
    """The :data:`Stamp` of the checkout's files and links before the checks run, and whether
    they are all of them; None when the checkout must be written afresh.

    The purity check must see every file written during the run, even one whose bytes and
    times were put back. git's own comparison of stat data with its index (``git
    diff-files``, every setting that would blind it pinned) sees any write in a later second
    than the one git recorded (its change time, which no process can set back, is compared
    in whole seconds). What it cannot see is a write in the same second, so only the files
    whose recorded change time is in the current second of the file system's clock (or
    later), read before any check starts, need a stamp of their own, compared to the
    nanosecond. That is all of them in a fresh checkout written within the second, none but
    the files it wrote in an update after a clean run (the kept index, and so every stat data
    in it, was written in an earlier second), and the index is where git recorded each file's
    ``lstat`` as it wrote it: nothing is walked.

    This needs an index that holds every file's stat data exactly: one git wrote afresh, or
    updated after a run that left the checkout clean (whose purity check found each file as
    recorded). After a reset it may not: git compares whole seconds, so a file a check
    rewrote with the same bytes in the second git wrote it keeps its old stat data. There a
    walk stamps every file, and a checkout whose index disagrees with the walk is written
    afresh (else the next update would take that file for one written during its run).
    Submodules, each with an index of its own, are walked too; so is an index this does not
    read (:func:`gitaudit.git.index_stat.file_stamps`)."""
    skip = [i.path for i in ignored]
    if submodules:
        return _stamps(slot, submodules, skip), True
    settled = _clock(slot)
    if merged is not None and merged[0] is not None and merged[0] < settled:
        return _stamps_of(slot, merged[1]), False
    indexed = index_stat.file_stamps(index, len(tree) // 2, str(slot.tree) + os.sep)
    if not pristine:
        walked = _stamps(slot, submodules, skip)
        return None if indexed is not None and walked != indexed else (walked, True)
    if indexed is None:
        return _stamps(slot, {}, skip), True
    return {path: s for path, s in indexed.items() if s[1] >= settled}, False


def _changed_at(path: Path) -> int | None:
    """The second (as an index keeps it) in which the file at *path* last changed; None when
    it is gone or not a file (a link to a file elsewhere would give another clock's time)."""
    try:
        found = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(found.st_mode):
        return None
    return (found.st_ctime_ns // 1_000_000_000) & index_stat.MASK


def _clock(slot: Slot) -> int:
    """The current second of the file system's clock (the one that stamps the checkout), read
    from a file made now in the slot (whatever a check left under its name goes first)."""
    probe = slot.root / "clock"
    with contextlib.suppress(FileNotFoundError):
        probe.unlink()
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        made = os.fstat(fd)
    finally:
        os.close(fd)
    return (made.st_ctime_ns // 1_000_000_000) & index_stat.MASK


def _stamps_of(slot: Slot, paths: Iterable[str]) -> dict[str, Stamp]:
    """The :data:`Stamp` of each of *paths* (relative) that is a file or a link."""
    root = str(slot.tree) + os.sep
    found: dict[str, Stamp] = {}
    for path in paths:
        try:
            st = os.lstat(root + path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
            found[root + path] = index_stat.stamp_of(st)
    return found


def _special_entries(
    slot: Slot, placed: Materialised
) -> tuple[list[tuple[Path, str]], bool, list[str]]:
    """Entries of the checkout git would not report, with why: ``.git`` anywhere but where we
    put them, anything that is neither a file, a symlink nor a directory, unreadable
    directories; whether there is an empty directory (git lists none: ``git clean`` removes
    it); and the files and links written during the run whatever they hold now (their
    :data:`Stamp` moved: a file written and put back before the purity check looks, which git
    takes for unchanged, was what the checks in between read)."""
    ignored = [i.path for i in placed.ignored]
    top = str(slot.tree)
    roots = {top, *(str(slot.tree / sub) for sub in placed.submodules)}
    found: list[tuple[Path, str]] = []
    touched: list[str] = []
    hollow = False
    for folder, entries in _walk(slot, placed.submodules, ignored):
        if entries is None:
            found.append((Path(folder), "/ (unreadable)"))
            continue
        hollow = hollow or not entries
        for entry in entries:
            if entry.name == ".git":
                if folder not in roots:
                    found.append((Path(entry.path), ""))
                elif folder == top and not _gitfile_is(entry, slot.git):
                    found.append((Path(entry.path), " (the checkout's .git, rewritten)"))
            elif not entry.is_dir(follow_symlinks=False) and not (
                entry.is_file(follow_symlinks=False) or entry.is_symlink()
            ):
                found.append((Path(entry.path), " (not a file)"))
            elif (was := placed.stamps.get(entry.path)) is not None and _stamp(entry) != was:
                touched.append(os.path.relpath(entry.path, slot.tree))
    return sorted(found), hollow, sorted(touched)


def _gitfile_is(entry: os.DirEntry[str], git_dir: Path) -> bool:
    """Whether *entry* is a ``.git`` file (no link) saying what :func:`_write_gitfile` wrote."""
    if not entry.is_file(follow_symlinks=False):
        return False
    try:
        fd = os.open(entry.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    with os.fdopen(fd, "rb") as handle:
        return handle.read(4097) == _gitfile_text(git_dir).encode()


def leave_clean(placed: Materialised, workdir: Path, purity: Purity) -> None:
    """Remove what the run left in the checkout (outputs, ignored files, debris), so the next run
    starts from the tree alone without a scan; record the slot's state, authenticated. The
    checkout counts as clean only when the purity check found it equal to the tree."""
    slot = placed.slot
    _unlink_ignored(placed)
    removed = True
    for special in purity.specials:
        try:
            _remove_tree(special)
        except OSError:
            removed = False
    cleaned = True
    ignored = [i.path for i in placed.ignored]
    if purity.leftovers or placed.submodules:  # else git would find nothing to remove
        # git reads the settings there: those a check wrote would start its program, unfenced
        cleaned = _settled(slot, slot.git, ignored) and _cleaned(slot, slot.git, slot.tree)
    for path, sub in placed.placed_submodules.items():  # its own git dir, whatever .git says
        work = slot.tree / path
        if not _own_folder(slot.tree, path) or not _settled(slot, sub.git_dir, ()):
            cleaned = False  # a link a check left: never cleaned through
            continue
        cleaned &= _cleaned(slot, sub.git_dir, work)
    meta = _read_meta(slot, workdir)
    if meta.get("index") == placed.index_digest:
        meta["clean"] = removed and cleaned and not purity.changed
        _write_meta(slot, workdir, meta)


def leave_unused(placed: Materialised, workdir: Path) -> None:
    """After a run that started no check: the checkout is as :func:`materialise` left it, so
    it stays clean when it was pristine (the next run updates it with a two-way merge; anything
    else is swept and reset by the next run, as after a run whose purity was not checked)."""
    _unlink_ignored(placed)
    if not placed.pristine:
        return
    meta = _read_meta(placed.slot, workdir)
    if meta.get("index") == placed.index_digest:
        meta["clean"] = True
        _write_meta(placed.slot, workdir, meta)


def _unlink_ignored(placed: Materialised) -> None:
    """The links to the declared ignored paths go (the next run links them again)."""
    for ignored in placed.ignored:
        link = placed.slot.tree / ignored.path
        if link.is_symlink():
            link.unlink()


def _read_gitfile(work: Path) -> Path | None:
    try:
        text = (work / ".git").read_text()
    except OSError:
        return None
    return Path(text.removeprefix("gitdir:").strip()) if text.startswith("gitdir:") else None


def _sweep(slot: Slot, git_dir: Path, work_tree: Path) -> bool:
    """Remove everything in a checkout that its index does not hold (git clean, and what git
    does not see); True when nothing is left."""
    cleaned = _git(slot, git_dir, work_tree, ["clean", "-ffdxq"], check=False)
    expected = {
        os.fsdecode(p)
        for p in _git(slot, git_dir, work_tree, ["ls-files", "-z"]).stdout.split(b"\0")
        if p
    }
    dirs = {str(Path(p).parent) for p in expected}
    closure = set(dirs)
    for d in dirs:
        parts = Path(d).parts
        closure.update(str(Path(*parts[:i])) for i in range(1, len(parts)))
    ok = cleaned.code == 0
    for folder, subdirs, files in os.walk(work_tree):
        rel_folder = os.path.relpath(folder, work_tree)
        for name in [*files, *subdirs]:
            rel = os.path.normpath(os.path.join(rel_folder, name))
            full = Path(folder) / name
            if rel == ".git" or rel in expected:
                continue
            if name in subdirs and rel in closure and not full.is_symlink():
                continue
            try:
                _remove_tree(full)
            except OSError:
                ok = False
        subdirs[:] = [d for d in subdirs if (Path(folder) / d).is_dir()]
    return ok


# --------------------------------------------------------------------------------------- meta


def _meta_key(workdir: Path) -> bytes | None:
    return secret.local_key(str(workdir), create=True)


def _read_meta(slot: Slot, workdir: Path) -> dict[str, object]:
    """The slot's recorded state, when its MAC verifies (else nothing: the slot is rebuilt)."""
    try:
        data = json.loads((slot.root / META).read_text())
    except (OSError, ValueError):
        return {}
    key = _meta_key(workdir)
    if not isinstance(data, dict) or key is None or data.get("format") != META_FORMAT:
        return {}
    body = {k: v for k, v in data.items() if k != "mac"}
    payload = json.dumps(body, sort_keys=True).encode()
    if not hmac.compare_digest(str(data.get("mac", "")), secret.mac(key, payload)):
        return {}
    return body


def _write_meta(slot: Slot, workdir: Path, meta: Mapping[str, object]) -> None:
    key = _meta_key(workdir)
    if key is None:
        _forget(slot)
        return
    body = {**meta, "format": META_FORMAT}
    body.pop("mac", None)
    payload = json.dumps(body, sort_keys=True).encode()
    slot.root.mkdir(parents=True, exist_ok=True)
    tmp = slot.root / (META + ".tmp")  # a new file: a link left under that name is not followed
    _write_new(tmp, json.dumps({**body, "mac": secret.mac(key, payload)}, sort_keys=True))
    os.replace(tmp, slot.root / META)
