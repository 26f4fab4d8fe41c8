"""Verified high-water marks: the last tip of each audit ref that gitaudit verified.

Kept in ``<gitdir>/gitaudit/watermarks.json``. A ref whose new tip does not descend from its mark
was rewound, truncated or rewritten, which is a FAIL. Marks only ever move forward; the file is
replaced atomically, so a crash leaves the old marks or the new ones, never a torn file. The
file is a cache of facts that can be re-established: deleting it means "trust nothing
incrementally", and the next verification starts from the roots.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

import pygit2

from gitaudit.errors import LedgerError

FILENAME = "watermarks.json"


def _path(gitdir: Path) -> Path:
    return gitdir / "gitaudit" / FILENAME


def load(gitdir: Path) -> dict[str, str]:
    try:
        data = json.loads(_path(gitdir).read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return {}  # a corrupt cache only costs a full verification
    if not isinstance(data, dict):
        return {}
    return {str(k): str(v) for k, v in data.items() if isinstance(v, str)}


def check_forward(repo: pygit2.Repository, gitdir: Path, ref: str, tip: pygit2.Oid | None) -> None:
    """LedgerError when *ref* is now behind (or beside) the tip verified earlier."""
    mark = load(gitdir).get(ref)
    if mark is None:
        return
    if tip is None:
        raise LedgerError(
            f"{ref} was deleted; it was verified at {mark[:12]}",
            hint=f"restore it (`git update-ref {ref} {mark}`) or fetch it from the remote",
        )
    if str(tip) == mark:
        return
    try:
        ahead = repo.descendant_of(tip, pygit2.Oid(hex=mark))
    except (KeyError, ValueError, pygit2.GitError):
        ahead = False
    if not ahead:
        raise LedgerError(
            f"{ref} moved backwards or was rewritten: it is at {str(tip)[:12]}, which does not "
            f"descend from the verified tip {mark[:12]}",
            hint=f"restore it with `git update-ref {ref} {mark}` (if this was deliberate, delete "
            f"{_path(gitdir)} and run `git audit verify`)",
        )


def record(gitdir: Path, marks: dict[str, str]) -> None:
    """Merge *marks* into the file (atomic replace). Callers only pass verified, newer tips."""
    path = _path(gitdir)
    current = load(gitdir)
    if all(current.get(k) == v for k, v in marks.items()):
        return  # nothing new: no write
    path.parent.mkdir(parents=True, exist_ok=True)
    current.update(marks)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".watermarks.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(current, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
