"""Bringing work tree files back to a tree: the careful half of `git audit rollback`.

Everything else in gitaudit leaves the user's work tree alone; a rollback is the one command the
user gives to change it, so it changes exactly what it must and nothing else:

* **What changes** is the difference between the work tree's fingerprint (tracked and untracked
  files that are not ignored) and the target tree, within the scope (canonical globs,
  :mod:`gitaudit.plan.globs`): files are written, replaced (content, mode, symlink) or deleted;
  folders left empty by a deletion are removed.
* **What never changes**: anything under ``.git``, ignored files (they are not in either tree;
  a path the target needs that an ignored file or folder occupies is left alone and reported),
  submodules and nested repositories (gitlinks), and anything outside the work tree: every
  path is walked one folder at a time from the work tree's root with ``O_NOFOLLOW``, so a
  symbolic link (even one swapped in meanwhile) is never followed, and a path through a link
  is refused.
* **How**: file contents come out of git with the user's own checkout settings (``git
  checkout-index`` from a private index into a staging folder under the state directory, so
  line endings and attributes apply as in a checkout); each file is written beside its place
  and renamed over it, so an interruption leaves every file either old or new, never torn.

Pure of policy: which snapshots exist, what counts as saved and the journal that makes an
interrupted rollback resumable live in :mod:`gitaudit.ledger.snapshots`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import pygit2

from gitaudit.errors import RepositoryError
from gitaudit.frozen import frozen
from gitaudit.git.call import run_git
from gitaudit.git.environment import as_it_is
from gitaudit.places import state_dir
from gitaudit.plan.globs import WHOLE_TREE, matches

LINK, GITLINK, EXEC = 0o120000, 0o160000, 0o100755


@frozen
class Change:
    """One path to bring to the target: ``mode``/``oid`` of the target entry, or None to delete
    it; ``old`` the current entry's (mode, oid), or None when the path is new."""

    path: str
    mode: int | None
    oid: str | None
    old: tuple[int, str] | None


@frozen
class Applied:
    written: tuple[str, ...]
    deleted: tuple[str, ...]
    kept: tuple[str, ...]  # paths left alone, each with why


def entries(git: pygit2.Repository, tree: str) -> dict[str, tuple[int, str]]:
    """path -> (mode, oid) of every non-folder entry of *tree*."""
    out: dict[str, tuple[int, str]] = {}
    root = git[pygit2.Oid(hex=tree)]
    assert isinstance(root, pygit2.Tree)
    todo: list[tuple[str, pygit2.Tree]] = [("", root)]
    while todo:
        prefix, node = todo.pop()
        for entry in node:
            path = f"{prefix}{entry.name}"
            if entry.filemode == pygit2.enums.FileMode.TREE:
                sub = git[entry.id]
                assert isinstance(sub, pygit2.Tree)
                todo.append((f"{path}/", sub))
            else:
                out[path] = (int(entry.filemode), str(entry.id))
    return out


def in_scope(path: str, scope: Sequence[str], ignore_case: bool = False) -> bool:
    return any(g == WHOLE_TREE or matches(g, path, ignore_case) for g in scope)


def changes(
    git: pygit2.Repository,
    current: str,
    target: str,
    scope: Sequence[str],
    ignore_case: bool = False,
) -> list[Change]:
    """What brings the work tree fingerprinted as *current* to *target* within *scope*."""
    now, then = entries(git, current), entries(git, target)
    out: list[Change] = []
    for path in sorted(set(now) | set(then)):
        if now.get(path) == then.get(path) or not in_scope(path, scope, ignore_case):
            continue
        want = then.get(path)
        out.append(
            Change(path, want[0] if want else None, want[1] if want else None, now.get(path))
        )
    return out


def unsafe(path: str) -> bool:
    """Whether a tree path is one a rollback never writes (``.git`` in any case, ``.``,
    ``..`` or an empty component)."""
    return any(p in ("", ".", "..") or p.lower() == ".git" for p in path.split("/"))


class _Blocked(Exception):
    """A path cannot be reached without following a link or crossing a non-folder."""


def _safe(path: str) -> list[str]:
    if unsafe(path):
        raise _Blocked("not a plain path inside the work tree")
    return path.split("/")


@contextlib.contextmanager
def _folder(root: int, parts: Sequence[str], *, create: bool) -> Iterator[int]:
    """A descriptor of the folder *parts* under *root*, walked without following links
    (created when *create*). FileNotFoundError when it is missing; _Blocked when a part is a
    link or not a folder."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    fds: list[int] = []
    current = root
    try:
        for part in parts:
            try:
                fd = os.open(part, flags, dir_fd=current)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o777, dir_fd=current)
                fd = os.open(part, flags, dir_fd=current)
            except OSError:  # ELOOP: a link; ENOTDIR: a file
                raise _Blocked(f"{part!r} is a link or not a folder") from None
            fds.append(fd)
            current = fd
        yield current
    finally:
        for fd in reversed(fds):
            os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


SMUDGE = r"^filter\..*\.smudge$"


def refuse_local_smudge(workdir: Path) -> None:
    """RepositoryError when the repository's own config (``.git/config``, ``config.worktree``
    or a file they include) defines a smudge filter: the program a checkout of the snapshot's
    files would run as the user, outside any fence, and anything in the work tree can write
    that config. (Clean and process drivers there are refused by the fingerprint already;
    drivers from the user's global config, git-lfs say, apply.)"""
    proc = run_git(["config", "--show-scope", "--get-regexp", SMUDGE], cwd=workdir, check=False)
    if proc.code not in (0, 1):  # 1: no such setting
        raise RepositoryError(
            f"cannot read the configuration of {workdir}: {proc.err}",
            hint="repair the repository config (`git config --list` names the problem)",
        )
    local = sorted(
        line.partition("\t")[2].partition(" ")[0]
        for line in proc.out.splitlines()
        if line.partition("\t")[0] in ("local", "worktree")
    )
    if local:
        raise RepositoryError(
            f"the repository config of {workdir} defines {', '.join(local)}: a rollback would "
            "run that program as you to write the snapshot's files; nothing was changed",
            hint="remove it (`git config --unset ...`) or move it to your global config",
        )


def _stage(workdir: Path, gitdir: Path, target: str, paths: Iterable[str]) -> Path:
    """Check the files *paths* of *target* out into a fresh staging folder (the user's filters
    and line endings apply, never a program the repository's config names: no smudge filter
    of its own, no file-system monitor); returns the folder."""
    refuse_local_smudge(workdir)
    settings = as_it_is(workdir)
    base = Path(state_dir(gitdir)) / "rollback"
    base.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(6)
    stage, index = base / f"stage-{token}", base / f"index-{token}"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        run_git([*settings, "read-tree", target], cwd=workdir, env=env)
        listing = b"".join(os.fsencode(p) + b"\0" for p in paths)
        if listing:
            run_git(
                [*settings, "checkout-index", "-f", "-z", "--stdin", f"--prefix={stage}/"],
                cwd=workdir,
                env=env,
                input=listing,
            )
    except Exception as exc:
        shutil.rmtree(stage, ignore_errors=True)
        raise RepositoryError(f"cannot check out the snapshot's files: {exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            index.unlink()
    return stage


@contextlib.contextmanager
def _staged(stage: int, path: str) -> Iterator[int | None]:
    """A descriptor of the staged file *path* under the staging folder *stage*, walked without
    following links (the staging folder is under the git dir, which anything in the work tree
    can write while the rollback runs: a folder swapped for a link must not copy a file from
    outside the work tree into it); None when it is missing, a link or not a plain file."""
    parts = path.split("/")
    try:
        with _folder(stage, parts[:-1], create=False) as folder:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW, dir_fd=folder)
    except (OSError, _Blocked):
        yield None
        return
    try:
        yield fd if stat.S_ISREG(os.fstat(fd).st_mode) else None
    finally:
        os.close(fd)


def _write_file(folder: int, name: str, data_from: int, executable: bool, mask: int) -> None:
    tmp = f".{name}.gitaudit-{secrets.token_hex(4)}"
    mode = (0o777 if executable else 0o666) & ~mask
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=folder)
    try:
        with os.fdopen(fd, "wb") as out, os.fdopen(data_from, "rb", closefd=False) as src:
            shutil.copyfileobj(src, out)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode, dir_fd=folder, follow_symlinks=False)
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=folder)
        raise


def _write_link(folder: int, name: str, target: bytes) -> None:
    tmp = f".{name}.gitaudit-{secrets.token_hex(4)}"
    os.symlink(os.fsdecode(target), tmp, dir_fd=folder)
    try:
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=folder)
        raise


def _kind(folder: int, name: str) -> int | None:
    try:
        return os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None


def apply(
    git: pygit2.Repository,
    workdir: Path,
    gitdir: Path,
    target: str,
    todo: Sequence[Change],
    progress: Callable[[Change], None] | None = None,
) -> Applied:
    """Carry out *todo* (from :func:`changes`): deletions first, deepest first, then writes in
    path order. *progress* is called after each change is done (an interruption between two is
    safe: running :func:`changes` again gives what is left)."""
    written: list[str] = []
    deleted: list[str] = []
    kept: list[str] = []
    mask = _umask()
    untouchable = [c for c in todo if GITLINK in (c.mode, *(c.old or ()))]
    kept += [f"{c.path} (a submodule or nested repository: never touched)" for c in untouchable]
    writes = [c for c in todo if c.mode is not None and c not in untouchable]
    removals = [c for c in todo if c.mode is None and c not in untouchable]
    stage = _stage(workdir, gitdir, target, [c.path for c in writes if c.mode != LINK])
    root = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        staged = os.open(stage, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        os.close(root)
        shutil.rmtree(stage, ignore_errors=True)
        raise RepositoryError(
            f"the staging folder {stage} was replaced; nothing was written"
        ) from None
    try:
        for change in sorted(removals, key=lambda c: (-c.path.count("/"), c.path)):
            why = _delete(root, change.path)
            if why:
                kept.append(f"{change.path} ({why})")
                continue
            deleted.append(change.path)
            if progress:
                progress(change)
        for change in writes:
            why = _put(git, root, staged, change, mask)
            if why:
                kept.append(f"{change.path} ({why})")
            else:
                written.append(change.path)
                if progress:
                    progress(change)
    finally:
        os.close(staged)
        os.close(root)
        shutil.rmtree(stage, ignore_errors=True)
    return Applied(tuple(written), tuple(deleted), tuple(kept))


def _delete(root: int, path: str) -> str | None:
    """Delete one file or link, then the folders it leaves empty; why not, or None."""
    try:
        parts = _safe(path)
        with _folder(root, parts[:-1], create=False) as folder:
            mode = _kind(folder, parts[-1])
            if mode is None:
                pass
            elif stat.S_ISDIR(mode):
                return "a folder holding files the snapshot does not know: left alone"
            else:
                os.unlink(parts[-1], dir_fd=folder)
    except FileNotFoundError:
        return None
    except _Blocked as exc:
        return str(exc)
    for depth in range(len(parts) - 1, 0, -1):
        try:
            with _folder(root, parts[: depth - 1], create=False) as folder:
                os.rmdir(parts[depth - 1], dir_fd=folder)
        except (OSError, _Blocked):
            break  # not empty (ignored files stay), or not ours to remove
    return None


def _put(git: pygit2.Repository, root: int, stage: int, change: Change, mask: int) -> str | None:
    """Write one file or link of the target; why not, or None."""
    assert change.mode is not None and change.oid is not None
    try:
        parts = _safe(change.path)
        with _folder(root, parts[:-1], create=True) as folder:
            mode = _kind(folder, parts[-1])
            if mode is not None and stat.S_ISDIR(mode):
                return "a folder occupies it (ignored files?): left alone"
            if mode is not None and change.old is None:
                return "an ignored file occupies it: left alone"
            if change.mode == LINK:
                blob = git[pygit2.Oid(hex=change.oid)]
                assert isinstance(blob, pygit2.Blob)
                _write_link(folder, parts[-1], blob.data)
            else:
                with _staged(stage, change.path) as staged:
                    if staged is None:
                        return "git could not check it out"
                    _write_file(folder, parts[-1], staged, change.mode == EXEC, mask)
    except _Blocked as exc:
        return str(exc)
    return None
