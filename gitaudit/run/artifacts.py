"""Artifacts: files a step declares (``"artifacts": ["junit.xml"]``, on the step or one of its
outputs) that are kept with its evidence in the run commit's tree.

After the checks ran, each executed step's artifacts are read from where its checks ran (the
private checkout, or the work tree for ``workspace: live``), confined to it (symlinks followed),
then opened along the path it resolved to following no link (the run holds the runner's key and
is not fenced: a link swapped in by a process outside the run must not lead it out), and
bounded by the policy's ``max_artifact_bytes``. An artifact is evidence to read (CI renders a
JUnit report), not a check: one that is missing, too large or not a regular file is recorded as
such and changes no verdict. Carried steps keep the artifacts of the run that executed them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gitaudit.checks.paths import confine
from gitaudit.errors import CheckError
from gitaudit.frozen import frozen
from gitaudit.plan.model import Plan, Step, StepId

TREE_FOLDER = "artifacts"


@frozen
class Artifact:
    path: str  # as declared, relative to the repository root
    output: str | None  # the output that declares it; None: the step
    data: bytes | None  # None: not stored (see problem)
    size: int | None
    problem: str | None = None  # missing | not-a-file | too-large | outside-the-workspace

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "output": self.output,
            "bytes": self.size,
            "stored": self.data is not None,
            "problem": self.problem,
        }

    @property
    def tree_path(self) -> str:
        """Where it is stored, under ``steps/<id>/``."""
        return f"{TREE_FOLDER}/{self.path.strip('/')}"


def resolved_roots(*roots: Path) -> tuple[Path, ...]:
    """*roots* resolved, as :func:`collect` wants them: before the checks run."""
    return tuple(Path(os.path.realpath(root)) for root in roots)


def _open_beneath(root: Path, target: Path) -> int:
    """A read-only descriptor of *target* (as :func:`confine` resolved it: ValueError when that
    is not inside *root*, resolved before the checks ran), opened one component at a time from
    ``/`` following no link and without blocking: a file or folder on the way replaced by a
    link since it was resolved (a process outside the run can do that: the run would read the
    runner's key for it) is OSError, never followed."""
    parts = root.parts[1:] + target.relative_to(root).parts
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open("/", flags | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            inner = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        return os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=fd)
    finally:
        os.close(fd)


def _contents(root: Path, target: Path, limit: int) -> tuple[bytes | None, int | None, str | None]:
    """(data, size, problem) of the artifact at *target*: data None when it is not stored."""
    try:
        fd = _open_beneath(root, target)
    except ValueError:  # the checkout itself was replaced by a link since the checks started
        return None, None, "outside-the-workspace"
    except OSError:  # a link on the way since it was confined; not a folder; gone
        return None, None, "not-a-file" if os.path.lexists(target) else "missing"
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):  # a folder, a FIFO (opened without blocking), a device
            return None, None, "not-a-file"
        try:
            data = handle.read(limit + 1) if info.st_size <= limit else None
        except OSError:
            return None, None, "missing"
    if data is None or len(data) > limit:  # too large, or grew since stat
        return None, max(info.st_size, len(data or b"")), "too-large"
    return data, len(data), None


def _read(root: Path, path: str, output: str | None, limit: int) -> Artifact:
    try:
        target = confine(root, path, what="artifact")
    except CheckError:
        return Artifact(path, output, None, None, "outside-the-workspace")
    return Artifact(path, output, *_contents(root, target, limit))


def collect(
    plan: Plan,
    executed: Callable[[StepId], bool],
    root_of: Callable[[Step], Path],
    limit: int,
) -> dict[StepId, tuple[Artifact, ...]]:
    """The artifacts of every executed step that declares any, read from its checks' folder
    (*root_of*: resolved before the checks ran, :func:`resolved_roots`)."""
    found: dict[StepId, tuple[Artifact, ...]] = {}
    for step in plan.steps:
        declared = step.all_artifacts()
        if declared and executed(step.id):
            root = root_of(step)
            found[step.id] = tuple(_read(root, p, o, limit) for p, o in declared)
    return found


def tree_files(collected: Mapping[StepId, tuple[Artifact, ...]]) -> dict[str, bytes]:
    """The stored artifacts as files of the run commit's tree."""
    return {
        f"steps/{sid}/{a.tree_path}": a.data
        for sid, artifacts in collected.items()
        for a in artifacts
        if a.data is not None
    }
