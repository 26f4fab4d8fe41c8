"""Confining the paths a plan names (``cwd``, ``path``, ``exec``) to the workspace.

A plan is data that may come from anyone who can push a branch, and its checks' results are
signed. A ``cwd`` of ``../other-repo`` or a ``path`` symlinked to ``/etc`` would make evidence
about files outside the commit being audited, so every such path goes through two gates:

* :func:`gitaudit.plan.paths.check_relative_spec`, a pure lexical check with no filesystem
  access, used when a plan is validated: non-empty, no NUL byte, encodable as a file name,
  relative, no ``..`` component.
* :func:`confine`, used when a check is about to run: the lexical check again, then the path is
  resolved with every symlink followed (including symlinked parent directories) and must still
  lie inside the resolved workspace.

What this is not: a sandbox. A check runs arbitrary code with the user's privileges and can read
anything it likes; confinement stops a *plan* from pointing gitaudit at the wrong files. Likewise
a symlink swapped in between :func:`confine` and its use (a race) is not defended against: the
workspace is the checkout being audited, which the check itself could modify anyway.

Case: on Linux file names are case-sensitive, so ``Src`` and ``src`` are different paths and the
comparison here is exact. On a case-insensitive filesystem (macOS, Windows, some mounts) two
spellings may alias one directory; the resolved-path comparison still keeps everything inside the
workspace, but two distinct-looking paths may name the same files.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from gitaudit.errors import CheckError
from gitaudit.plan.paths import HINT, check_relative_spec


def is_within(root: Path, p: Path) -> bool:
    """True if ``p`` is ``root`` or lies below it, after resolving symlinks in both.

    Both sides are resolved (``..`` collapsed, symlinks followed as far as they exist), so neither
    ``root/a/../..`` nor a symlink out of ``root`` can pass. A path that cannot be resolved at all
    (NUL byte, unencodable name) is not within anything.
    """
    try:
        real_root = Path(os.path.realpath(root))
        real_p = Path(os.path.realpath(p))
    except (OSError, ValueError):
        return False
    return real_p.parts[: len(real_root.parts)] == real_root.parts


def confine(workspace: Path, rel: str, *, what: str = "path", must_exist: bool = False) -> Path:
    """Resolve ``rel`` inside ``workspace``, or raise :class:`CheckError` naming the problem.

    ``what`` names the value in messages (``cwd '../x' escapes the workspace...``). The returned
    path is absolute with every symlink resolved; a path that does not exist yet is allowed (its
    missing tail is kept as written) unless ``must_exist``.
    """
    reason = check_relative_spec(rel)
    if reason is not None:
        raise CheckError(f"{what} {reason}", hint=HINT)
    try:
        real_root = Path(os.path.realpath(workspace))
        target = Path(os.path.realpath(real_root / rel))
    except (OSError, ValueError) as exc:  # pragma: no cover - excluded by the lexical check
        raise CheckError(f"{what} {rel!r} cannot be resolved: {exc}", hint=HINT) from exc
    if not is_within(real_root, target):
        raise CheckError(
            f"{what} {rel!r} escapes the workspace through a symlink (it resolves to {target})",
            hint=HINT + ", and no symlink leading out of the repository",
        )
    if must_exist and not os.path.exists(target):
        raise CheckError(
            f"{what} {rel!r} does not exist in the workspace",
            hint="create it, or fix the path in the plan",
        )
    return target


def first_link(workspace: Path, rel: str) -> tuple[str, str, bool] | None:
    """The first symlink on the way to ``rel`` (``rel`` itself included): (the link, where it
    leads, whether that is inside ``workspace``), the link relative and where it leads relative
    when inside, absolute when not; None when no link is on the way.

    The seal protects a check's own files by their paths in the tree (:mod:`gitaudit.plan.protect`):
    through ``tools -> scripts`` the file a check runs as ``tools/check.py`` is
    ``scripts/check.py``, which nothing protects; through ``tools -> /home/me/x`` it is a file
    the tree does not hold at all.
    """
    real_root = os.path.realpath(workspace)
    here = real_root
    parts = [p for p in posixpath.normpath(rel).split("/") if p not in ("", ".")]
    for i, part in enumerate(parts):
        here = os.path.join(here, part)
        if os.path.islink(here):
            target = os.path.realpath(here)
            link = "/".join(parts[: i + 1])
            if not is_within(Path(real_root), Path(target)):
                return link, target, False
            return link, os.path.relpath(target, real_root), True
    return None


def link_climbed(workspace: Path, spelled: str) -> tuple[str, str, bool] | None:
    """The first symlink a ``..`` of *spelled* (a path relative to ``workspace``, not
    normalised) climbs out of, as :func:`first_link` names it; None when each ``..`` climbs out
    of a real folder, so that the path read lexically (``app/../x``: ``x``) is the file the
    system reaches. Through ``app -> lib/app``, ``app/../x`` is ``lib/x``."""
    kept: list[str] = []
    for part in spelled.split("/"):
        if part in ("", "."):
            continue
        if part != "..":
            kept.append(part)
            continue
        if not kept:
            return None  # above the workspace: no file of the tree, and none the seal protects
        found = first_link(workspace, "/".join(kept))
        if found is not None:
            return found
        kept.pop()
    return None
