"""Artifacts: files a step declares (``"artifacts": ["junit.xml"]``, on the step or one of its
outputs) that are kept with its evidence in the run commit's tree.

After the checks ran, each executed step's artifacts are read from where its checks ran (the
private checkout, or the work tree for ``workspace: live``), confined to it (symlinks followed),
and bounded by the policy's ``max_artifact_bytes``. An artifact is evidence to read (CI renders a
JUnit report), not a check: one that is missing, too large or not a regular file is recorded as
such and changes no verdict. Carried steps keep the artifacts of the run that executed them.
"""

from __future__ import annotations

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


def _read(root: Path, path: str, output: str | None, limit: int) -> Artifact:
    try:
        target = confine(root, path, what="artifact")
    except CheckError:
        return Artifact(path, output, None, None, "outside-the-workspace")
    if not target.is_file():
        return Artifact(path, output, None, None, "not-a-file" if target.exists() else "missing")
    try:
        size = target.stat().st_size
        data = target.read_bytes() if size <= limit else None
    except OSError:
        return Artifact(path, output, None, None, "missing")
    if data is None or len(data) > limit:  # too large, or grew since stat
        return Artifact(path, output, None, size if data is None else len(data), "too-large")
    return Artifact(path, output, data, len(data))


def collect(
    plan: Plan,
    executed: Callable[[StepId], bool],
    root_of: Callable[[Step], Path],
    limit: int,
) -> dict[StepId, tuple[Artifact, ...]]:
    """The artifacts of every executed step that declares any, read from its checks' folder."""
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
