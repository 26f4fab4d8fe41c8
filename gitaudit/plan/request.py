"""The user's request: what was asked for, kept apart from the plan that proves it.

``.gitaudit/requests/<name>.json`` holds the requirements of plan ``<name>`` as the person who
asked states them (ids, descriptions, priorities, and an optional one-line ``task``); the plan
(``.gitaudit/plans/<name>.json``) holds how the work is done and proven (steps, checks,
dependencies). A sealer seals the request; a *planner* may seal plans that answer it.

A plan **answers** a request when it states every requirement of the request verbatim (same id
and description, a priority at least as high) and covers each ``must`` and ``should`` one with
a step (the plan's own coverage rule). It may state more requirements of its own. A plan without
a request file is in the single-file form: its own requirements are the request.

Everything here is pure: bytes in, values out (the ledger seals them, the gate judges them).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pygit2

from gitaudit.errors import PlanError
from gitaudit.frozen import frozen
from gitaudit.plan.load import parse_json
from gitaudit.plan.model import Plan, Priority, Requirement
from gitaudit.plan.store import valid_name

if TYPE_CHECKING:
    from gitaudit.plan.compare import Comparison

REQUESTS_DIR = ".gitaudit/requests"
PRIORITY_RANK: dict[str, int] = {"may": 0, "should": 1, "must": 2}
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_FIELDS = {"task", "requirements"}
_REQUIREMENT_FIELDS = {"id", "description", "priority"}


@frozen
class Request:
    """One plan's request, parsed (see the module docstring)."""

    name: str
    source: str
    task: str
    requirements: tuple[Requirement, ...]

    def requirement(self, req_id: str) -> Requirement | None:
        return next((r for r in self.requirements if r.id == req_id), None)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(r.id for r in self.requirements)


def request_path(workdir: Path, name: str) -> Path:
    return workdir / REQUESTS_DIR / f"{name}.json"


def _invalid(source: str, path: str, message: str) -> PlanError:
    return PlanError(
        f"{source}: {path}: {message}",
        hint='a request is {"task": "...", "requirements": [{"id": "REQ-1", '
        '"description": "...", "priority": "must"}]} (docs/plan-format.md#the-request)',
    )


def parse_request(data: bytes, *, name: str, source: str) -> Request:
    """The request in *data*; PlanError naming the file and JSON path of the first problem."""
    value, problems = parse_json(data, plan=name, source=source)
    if problems:
        first = problems[0]
        raise _invalid(source, first.path, first.message)
    if not isinstance(value, dict):
        raise _invalid(source, "$", "a request is a JSON object")
    extra = sorted(set(value) - _FIELDS)
    if extra:
        raise _invalid(source, "$", f"unknown field(s) {', '.join(map(repr, extra))}")
    task = value.get("task", "")
    if not isinstance(task, str):
        raise _invalid(source, "$.task", "task must be a string")
    raw = value.get("requirements")
    if not isinstance(raw, list) or not raw:
        raise _invalid(source, "$.requirements", "a request states at least one requirement")
    requirements: list[Requirement] = []
    for i, item in enumerate(raw):
        requirements.append(_requirement(item, f"$.requirements[{i}]", source))
    seen: set[str] = set()
    for i, req in enumerate(requirements):
        if req.id in seen:
            raise _invalid(source, f"$.requirements[{i}].id", f"{req.id!r} appears twice")
        seen.add(req.id)
    return Request(name, source, task, tuple(requirements))


def _requirement(item: Any, path: str, source: str) -> Requirement:
    if not isinstance(item, dict):
        raise _invalid(source, path, "a requirement is an object {id, description, priority}")
    extra = sorted(set(item) - _REQUIREMENT_FIELDS)
    if extra:
        raise _invalid(source, path, f"unknown field(s) {', '.join(map(repr, extra))}")
    rid, description = item.get("id"), item.get("description")
    if not isinstance(rid, str) or not _ID.fullmatch(rid):
        raise _invalid(
            source, f"{path}.id", "an id is 1-64 letters, digits, '.', '_' or '-' (e.g. REQ-1)"
        )
    if not isinstance(description, str) or not description:
        raise _invalid(source, f"{path}.description", "a requirement needs a description")
    priority = item.get("priority", "must")
    if priority not in PRIORITY_RANK:
        raise _invalid(source, f"{path}.priority", "priority is must, should or may")
    return Requirement(rid, description, cast(Priority, priority))


# ------------------------------------------------------------------------ where requests live


def worktree_names(workdir: Path) -> list[str]:
    """The names of the request files of a work tree, sorted."""
    folder = workdir / REQUESTS_DIR
    if not folder.is_dir():
        return []
    return sorted(
        p.stem
        for p in folder.iterdir()
        if p.suffix == ".json" and p.is_file() and valid_name(p.stem)
    )


def read_worktree(workdir: Path, name: str) -> bytes | None:
    path = request_path(workdir, name)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PlanError(f"{REQUESTS_DIR}/{name}.json: cannot read: {exc.strerror}") from exc


def _folder(repo: pygit2.Repository, tree: pygit2.Tree) -> pygit2.Tree | None:
    try:
        entry = tree[REQUESTS_DIR]
    except KeyError:
        return None
    folder = repo[entry.id]
    return folder if isinstance(folder, pygit2.Tree) else None


def tree_names(repo: pygit2.Repository, tree: pygit2.Tree) -> list[str]:
    """The names of the request files in a git tree (a commit's, or the work tree's
    fingerprint), sorted."""
    folder = _folder(repo, tree)
    if folder is None:
        return []
    names = (
        (e.name or "")[: -len(".json")]
        for e in folder
        if (e.name or "").endswith(".json") and e.type_str == "blob"
    )
    return sorted(n for n in names if valid_name(n))


def read_tree(repo: pygit2.Repository, tree: pygit2.Tree, name: str) -> bytes | None:
    """The bytes of ``.gitaudit/requests/<name>.json`` in *tree* (None: absent)."""
    folder = _folder(repo, tree)
    if folder is None:
        return None
    try:
        entry = folder[f"{name}.json"]
    except KeyError:
        return None
    blob = repo[entry.id]
    return blob.data if isinstance(blob, pygit2.Blob) else None


# ------------------------------------------------------------------- answering and comparing


@frozen
class Gap:
    """One way a plan fails to answer its request."""

    kind: str  # missing | rewritten | lowered | uncovered
    asked: Requirement  # as the request states it
    stated: Requirement | None  # as the plan states it (None: missing)

    @property
    def requirement(self) -> str:
        return self.asked.id

    @property
    def message(self) -> str:
        what = f"request requirement {self.asked.id} ({self.asked.priority})"
        if self.kind == "missing" or self.stated is None:
            return f"{what} is not among the plan's requirements"
        if self.kind == "rewritten":
            return f"{what} is stated with another description"
        if self.kind == "lowered":
            return f"{what} is lowered to {self.stated.priority}"
        return f"{what} is covered by no step"


def gaps(request: Request, plan: Plan) -> tuple[Gap, ...]:
    """How *plan* fails to answer *request* (none: it answers it)."""
    out: list[Gap] = []
    for asked in request.requirements:
        stated = plan.requirement(asked.id)
        if stated is None:
            out.append(Gap("missing", asked, None))
            continue
        if stated.description != asked.description:
            out.append(Gap("rewritten", asked, stated))
        if PRIORITY_RANK[stated.priority] < PRIORITY_RANK[asked.priority]:
            out.append(Gap("lowered", asked, stated))
        if asked.mandatory and not plan.covering_steps(asked.id):
            out.append(Gap("uncovered", asked, stated))
    return tuple(out)


def implicit(plan: Plan) -> Request:
    """The request of a plan in the single-file form: its own requirements."""
    return Request(plan.name, plan.source, plan.task, plan.requirements)


def _contract(request: Request) -> dict[str, Any]:
    """A contract-shaped document of the request alone, for :func:`compare`."""
    return {
        "task": request.task,
        "requirements": [
            {"id": r.id, "description": r.description, "priority": r.priority}
            for r in request.requirements
        ],
        "required_tools": [],
        "steps": [],
    }


def compare_requests(old: Request, new: Request) -> Comparison:
    """The changes from *old* to *new*, classified as for plans (a requirement removed, its
    priority lowered or its description changed weakens; one added or raised strengthens)."""
    from gitaudit.plan.compare import compare  # comparing requests only

    return compare(_contract(old), _contract(new))
