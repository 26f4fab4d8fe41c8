"""The verdict rules: where PASS, FAIL and UNKNOWN are decided, once.

Three parts of gitaudit judge: the recorder gives a run its own verdict (:func:`judge_run`), the
gate judges a tree from signed evidence (:mod:`gitaudit.gate`), and mission control plans the
remaining route to a goal (:mod:`gitaudit.mission`). Each rule they share is written here and
nowhere else:

* **Coverage.** Every ``must`` or ``should`` requirement is covered by a verified step
  (:func:`mandatory_coverage`, :func:`uncovered`).
* **Broken outputs.** An upstream output contract that was re-executed and did not hold, with no
  check whose outcome is unknown, is broken: the step that relies on it is blocked, and the run
  FAILs (:func:`output_broken`).
* **Unproven steps.** A failed or exhausted step, or one blocked by a broken output, is a FAIL;
  any other step without proof (blocked, unknown, interrupted, not run) is UNKNOWN
  (:func:`unproven_step`).
* **Aggregation.** FAIL outranks UNKNOWN outranks PASS; nothing empty ever passes
  (:func:`combine`). Verdicts become exit codes in :func:`exit_code`, the only such mapping.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping

from gitaudit.errors import ExitCode
from gitaudit.plan.graph import optional_steps
from gitaudit.plan.model import Plan, Requirement, Step, StepId


class Verdict(enum.StrEnum):
    """A verdict of the gate (PASS, FAIL, UNKNOWN) or of one run (also INTERRUPTED)."""

    PASS = "PASS"  # noqa: S105 (a verdict, not a password)
    FAIL = "FAIL"
    UNKNOWN = "UNKNOWN"
    INTERRUPTED = "INTERRUPTED"  # a run stopped by Ctrl-C; the gate never says it


class StepStatus(enum.StrEnum):
    """The status of one step in one run (``run.json`` ``steps.<id>.status``)."""

    PASSED = "passed"
    CARRIED = "carried"  # not executed: earlier evidence of the same plan is reused
    FAILED = "failed"
    EXHAUSTED = "exhausted"  # max_attempts failures recorded: not executed unless forced
    BLOCKED = "blocked"  # a prerequisite is not verified, or an upstream output broke
    UNKNOWN = "unknown"  # the outcome could not be established (a timeout)
    INTERRUPTED = "interrupted"
    NOT_RUN = "not-run"

    @property
    def proven(self) -> bool:
        return self in PROVEN


PROVEN: frozenset[StepStatus] = frozenset({StepStatus.PASSED, StepStatus.CARRIED})
RAN: frozenset[StepStatus] = frozenset(
    {StepStatus.PASSED, StepStatus.FAILED, StepStatus.UNKNOWN, StepStatus.INTERRUPTED}
)
"""The statuses of a step whose checks were executed in the run (carried, blocked, exhausted
and not-run steps were not)."""

_EXIT = {
    Verdict.PASS: ExitCode.OK,
    Verdict.FAIL: ExitCode.FAIL,
    Verdict.UNKNOWN: ExitCode.UNKNOWN,
    Verdict.INTERRUPTED: ExitCode.UNKNOWN,
}


def exit_code(verdict: Verdict | str) -> ExitCode:
    """The process exit code of a verdict: PASS 0, FAIL 1, UNKNOWN and INTERRUPTED 3."""
    return _EXIT[Verdict(verdict)]


def combine(verdicts: Iterable[Verdict | str]) -> Verdict:
    """The conjunction: FAIL if any is FAIL (or there is none at all: nothing empty passes),
    else UNKNOWN if any is not PASS, else PASS."""
    seen = {Verdict(v) for v in verdicts}
    if not seen or Verdict.FAIL in seen:
        return Verdict.FAIL
    return Verdict.PASS if seen == {Verdict.PASS} else Verdict.UNKNOWN


def mandatory_coverage(plan: Plan) -> list[tuple[Requirement, tuple[Step, ...]]]:
    """Each ``must``/``should`` requirement with the steps that cover it."""
    return [(r, plan.covering_steps(r.id)) for r in plan.requirements if r.mandatory]


def uncovered(plan: Plan, verified: Collection[StepId]) -> list[Requirement]:
    """The mandatory requirements that no verified step covers."""
    return [
        req for req, steps in mandatory_coverage(plan) if not any(s.id in verified for s in steps)
    ]


def uncovered_reason(req: Requirement) -> str:
    return f"{req.priority} requirement {req.id} is not covered by a verified step"


def output_broken(passed: bool, outcomes: Iterable[str]) -> bool:
    """A re-executed upstream output contract is broken when it did not hold and none of its
    checks ended with an unknown outcome (a timeout says nothing about the output)."""
    return not passed and StepStatus.UNKNOWN.value not in set(outcomes)


def unproven_step(status: StepStatus, *, upstream_broken: bool = False) -> Verdict:
    """The verdict a required step without proof contributes."""
    if status in (StepStatus.FAILED, StepStatus.EXHAUSTED) or upstream_broken:
        return Verdict.FAIL
    return Verdict.UNKNOWN


def judge_run(
    plan: Plan,
    statuses: Mapping[StepId, StepStatus],
    *,
    interrupted: bool,
    impure: bool,
    missing_tools: Iterable[str],
    broken_upstream: Iterable[StepId] = (),
) -> tuple[Verdict, list[str]]:
    """The verdict of one run and the reasons it is not PASS.

    PASS: every required step verified (alternatives of a satisfied OR clause are not required)
    and every mandatory requirement covered by a verified step, with a pure workspace.
    FAIL: a failed or exhausted step, an upstream output that no longer holds, a changed
    workspace, or a missing tool. Otherwise UNKNOWN (timeouts, blocked or not-run steps).
    """
    if interrupted:
        return Verdict.INTERRUPTED, ["the run was interrupted"]
    reasons: list[str] = []
    verdicts: list[Verdict] = []
    verified = {sid for sid, s in statuses.items() if s in PROVEN}
    optional = optional_steps(plan)
    broken = set(broken_upstream)
    if broken:
        verdicts.append(Verdict.FAIL)
    for step in plan.steps:
        status = statuses.get(step.id, StepStatus.NOT_RUN)
        # an unverified OR alternative is not needed by itself: the step that depends on it is
        # required, and is reported here when no alternative of its clause was verified
        if status in PROVEN or step.id in optional:
            continue
        reasons.append(f"step {step.id} {status}")
        verdicts.append(unproven_step(status))  # a broken upstream has made it FAIL above
    for req in uncovered(plan, verified):
        reasons.append(uncovered_reason(req))
        verdicts.append(Verdict.UNKNOWN)
    tools = list(missing_tools)
    if tools:
        verdicts.append(Verdict.FAIL)
        reasons.append(f"required tools missing: {', '.join(tools)}")
    if impure:
        verdicts.append(Verdict.FAIL)
        reasons.append("the workspace changed during the run")
    return (combine(verdicts) if verdicts else Verdict.PASS), reasons
