"""Where plans live: ``.gitaudit/plans/<name>.json`` in the work tree or in any git tree."""

from __future__ import annotations

import re
from pathlib import Path

import pygit2

from gitaudit.errors import PlanError, UsageError
from gitaudit.frozen import frozen

PLANS_DIR = ".gitaudit/plans"
DEFAULT_PLAN = "default"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


@frozen
class PlanFile:
    """A plan's bytes with its name and where they came from (for messages)."""

    name: str
    source: str
    data: bytes


def valid_name(name: str) -> bool:
    """Plan names become ref names (``refs/audit/runs/<name>``), so they are kept simple."""
    return bool(_NAME.fullmatch(name))  # match's $ would take a trailing newline


def plan_path(workdir: Path, name: str) -> Path:
    return workdir / PLANS_DIR / f"{name}.json"


def _check_name(name: str, source: str) -> None:
    if not valid_name(name):
        raise PlanError(
            f"{source}: plan name {name!r} is not allowed",
            hint="rename the file to letters, digits, '-' and '_' (at most 64), ending in .json",
        )


def discover_worktree(workdir: Path) -> list[PlanFile]:
    """Every plan file in the work tree, sorted by name."""
    folder = workdir / PLANS_DIR
    if not folder.is_dir():
        return []
    files = []
    for entry in sorted(folder.iterdir()):
        if entry.suffix != ".json":
            continue
        source = f"{PLANS_DIR}/{entry.name}"
        if not entry.is_file():  # never opened: a FIFO would block, a device never end
            raise PlanError(
                f"{source}: not a plan file ({_kind(entry)})",
                hint=f"remove {source}, or replace it with the plan's JSON file",
            )
        _check_name(entry.stem, source)
        try:
            data = entry.read_bytes()
        except OSError as exc:
            raise PlanError(f"{source}: cannot read: {exc.strerror}") from exc
        files.append(PlanFile(entry.stem, source, data))
    return files


def _kind(path: Path) -> str:
    """What *path* is, when it is not a regular file."""
    if path.is_dir():
        return "a directory"
    if path.is_symlink() and not path.exists():
        return "a symbolic link that leads to no file"
    return "not a regular file"


def discover_tree(repo: pygit2.Repository, tree: pygit2.Tree, label: str | None) -> list[PlanFile]:
    """Every plan file in a git tree (a commit's, the work tree's fingerprint, or the sealed
    plans tree), sorted by name; sources read ``LABEL:path``, or the bare path without a label."""
    try:
        folder = tree[PLANS_DIR]
    except KeyError:
        return []
    folder_tree = repo[folder.id]
    if not isinstance(folder_tree, pygit2.Tree):
        return []
    files = []
    for entry in sorted(folder_tree, key=lambda e: e.name or ""):
        name = entry.name or ""
        if not name.endswith(".json") or entry.type_str != "blob":
            continue
        source = f"{label}:{PLANS_DIR}/{name}" if label is not None else f"{PLANS_DIR}/{name}"
        _check_name(name[: -len(".json")], source)
        blob = repo[entry.id]
        assert isinstance(blob, pygit2.Blob)
        files.append(PlanFile(name[: -len(".json")], source, blob.data))
    return files


def select(files: list[PlanFile], name: str | None) -> list[PlanFile]:
    """All plans, or the one named by ``--plan`` (a usage error when it does not exist)."""
    if name is None:
        return files
    chosen = [f for f in files if f.name == name]
    if not chosen:
        have = ", ".join(f.name for f in files) or "none"
        raise UsageError(
            f"no plan named {name!r} in {PLANS_DIR}/ (plans: {have})",
            hint="check the name, or create it with `git audit init`" if not files else None,
        )
    return chosen


def unlike_head(repo: pygit2.Repository, workdir: Path, plan: PlanFile) -> str | None:
    """How the work tree's plan file *plan* (the bytes a seal takes) differs from the one HEAD
    commits, worded for a warning; None when they are the same file. A sealer reviews the
    committed plan, a pull request's, while the seal reads the work tree, where anything can
    have changed it since (an uncommitted edit, a link to another file)."""
    path = plan_path(workdir, plan.name)
    rel = f"{PLANS_DIR}/{plan.name}.json"
    if path.is_symlink():
        return f"{rel} is a symbolic link in the work tree (sealed: the file it leads to)"
    try:
        tree = repo.revparse_single("HEAD^{tree}")
        blob = tree[rel] if isinstance(tree, pygit2.Tree) else None
    except (KeyError, ValueError, pygit2.GitError):
        blob = None
    if blob is None or not isinstance(blob, pygit2.Blob):
        return f"{rel} is not committed in HEAD (sealed: the work tree's file)"
    if blob.data != plan.data:
        return f"{rel} differs from HEAD's (sealed: the work tree's file, uncommitted edits too)"
    return None
