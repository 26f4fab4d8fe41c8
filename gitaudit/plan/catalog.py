"""Reading and validating the plans of a work tree (or any tree) in one call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from gitaudit.errors import PlanError, UsageError
from gitaudit.frozen import frozen
from gitaudit.plan.digest import contract_digest
from gitaudit.plan.model import Plan
from gitaudit.plan.problems import Problem, ValidationReport
from gitaudit.plan.store import (
    DEFAULT_PLAN,
    PLANS_DIR,
    PlanFile,
    discover_worktree,
    plan_path,
    select,
    valid_name,
)
from gitaudit.plan.validate import environment_problems, validate_bytes

if TYPE_CHECKING:
    from gitaudit.plan.known_valid import KnownValid


@frozen
class CheckedPlan:
    """A plan file after every validation layer: the model (when it could be built), the report,
    and the contract digest (when the plan is valid)."""

    file: PlanFile
    plan: Plan | None
    report: ValidationReport
    digest: str | None

    @property
    def name(self) -> str:
        return self.file.name

    def require_valid(self) -> Plan:
        """The plan, or a PlanError summarising why it is invalid."""
        if self.plan is None or not self.report.valid:
            first = self.report.errors[0]
            more = len(self.report.errors) - 1
            raise PlanError(
                f"{first.render()}" + (f" (and {more} more problem(s))" if more else ""),
                hint=f"run `git audit plan validate --plan {self.name}` to see every problem",
            )
        return self.plan


def check_file(
    file: PlanFile, *, environment: bool = True, known: KnownValid | None = None
) -> CheckedPlan:
    """Every check of the plan file; with *known*, the schema check only for bytes it does not
    know as schema-valid, and bytes found valid are added to it. The plan's own layers and its
    digest are worked out once a process for the same bytes, name and source (a run checks its
    plan, then judges the tree it proved); the environment layer (tools on PATH) every time."""
    schema_checked = known is not None and file.data in known
    plan, problems, digest = _checked(file, schema_checked)
    if known is not None and plan is not None and not schema_checked:
        known.add(file.data)  # built: the schema held
    if plan is not None and environment:
        problems += tuple(environment_problems(plan))
    report = ValidationReport(file.name, file.source, problems)
    return CheckedPlan(file, plan, report, digest)  # the environment's problems never invalidate


_Checked = tuple[Plan | None, tuple[Problem, ...], str | None]
_CHECKED: dict[tuple[bytes, str, str, bool], _Checked] = {}  # the last few plan files checked
_KEEP = 16


def _checked(file: PlanFile, schema_checked: bool) -> _Checked:
    """The plan, its problems but the environment's, and its contract digest (None unless it is
    valid); a result found with the schema checked also answers without it."""
    key = (file.data, file.name, file.source)
    found = _CHECKED.get((*key, False)) or (_CHECKED.get((*key, True)) if schema_checked else None)
    if found is not None:
        return found
    plan, report = validate_bytes(
        file.data,
        name=file.name,
        source=file.source,
        environment=False,
        schema_checked=schema_checked,
    )
    problems, digest = report.problems, None
    if plan is not None and report.valid:
        try:
            digest = contract_digest(plan)
        except (ValueError, TypeError, OverflowError) as exc:  # RFC 8785 cannot encode it
            problem = Problem(
                file.name,
                file.source,
                "$",
                "contract.not-canonical",
                f"the contract cannot be written as canonical JSON (RFC 8785): {exc}",
                "keep numbers within ±2^53 and strings free of lone surrogates",
            )
            problems = (*problems, problem)
    if len(_CHECKED) >= _KEEP:
        del _CHECKED[next(iter(_CHECKED))]
    _CHECKED[(*key, schema_checked)] = (plan, problems, digest)
    return plan, problems, digest


def check_worktree(
    workdir: Path, name: str | None = None, *, known: KnownValid | None = None
) -> list[CheckedPlan]:
    """Validate the active plans of a work tree (all of them, or the one named); *known*: see
    :func:`check_file`."""
    files = discover_worktree(workdir)
    if not files and name is None:
        raise UsageError(
            f"no plans in {PLANS_DIR}/",
            hint="create one with `git audit init`",
        )
    return [check_file(f, known=known) for f in select(files, name)]


TEMPLATE: dict[str, object] = {
    "task": "Describe in one line what this plan proves",
    "requirements": [
        {
            "id": "REQ-001",
            "description": "The project's test suite passes",
            "priority": "must",
        }
    ],
    "required_tools": ["python3"],
    "steps": [
        {
            "id": "tests",
            "title": "the test suite passes",
            "depends_on": [],
            "covers": ["REQ-001"],
            "verify": [{"type": "pytest", "args": "-q"}],
        }
    ],
}


def write_template(workdir: Path, name: str = DEFAULT_PLAN) -> Path:
    """Create ``.gitaudit/plans/<name>.json`` from a template that validates; never overwrite."""
    if not valid_name(name):
        raise UsageError(
            f"plan name {name!r} is not allowed",
            hint="use letters, digits, '-' and '_' (at most 64 characters)",
        )
    target = plan_path(workdir, name)
    if target.exists():
        raise PlanError(
            f"{target.relative_to(workdir)} already exists; not overwriting it",
            hint="edit it, or pass another name with --plan",
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(TEMPLATE, indent=2) + "\n", encoding="utf-8")
    return target
