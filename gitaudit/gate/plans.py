"""The gate's first question for each plan: is the plan itself in order?

The plan file of the judged tree must be valid, sealed (and not retired), identical to its seal,
and the seal must be intact and bound to the current policy. Only then is evidence looked at
(:mod:`gitaudit.gate.evidence`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gitaudit.errors import GitAuditError, SealError
from gitaudit.frozen import frozen
from gitaudit.gate.request import unplanned_reason
from gitaudit.gate.result import Reason
from gitaudit.ledger.plansref import PlansState, sealed_contract
from gitaudit.plan.catalog import CheckedPlan, check_file
from gitaudit.plan.store import PlanFile

if TYPE_CHECKING:
    from gitaudit.plan.known_valid import KnownValid


@frozen
class PlanCheck:
    """The reasons the plan is not in order (none: it is), and the checked plan file."""

    reasons: tuple[Reason, ...]
    checked: CheckedPlan | None = None


def check_plan(
    state: PlansState,
    name: str,
    file: PlanFile | None,
    *,
    environment: bool,
    known: KnownValid | None = None,
) -> PlanCheck:
    """Everything about plan *name* and its seal, before evidence is looked at."""
    seal = state.seal(name)
    fix_seal = f"git audit plan seal --plan {name}"
    if file is None and (seal is None or seal.retired):  # judged for its request alone
        return PlanCheck((unplanned_reason(state, name),))
    if file is None:
        return PlanCheck(
            (
                Reason(
                    "plan.missing",
                    f"plan {name!r} is sealed as active but .gitaudit/plans/{name}.json "
                    "is not in this tree",
                    "restore the file, or retire the plan: "
                    f"`git audit plan retire {name} --reason ..`",
                ),
            )
        )
    checked = check_file(file, environment=environment, known=known)
    if not checked.report.valid:
        first = checked.report.errors[0]
        more = len(checked.report.errors) - 1
        return PlanCheck(
            (
                Reason(
                    "plan.invalid",
                    f"{first.path}: {first.message} [{first.code}]"
                    + (f" (+{more} more)" if more else ""),
                    f"git audit plan validate --plan {name}",
                ),
            ),
            checked,
        )
    if seal is None or seal.retired:
        what = "retired" if seal else "not sealed"
        return PlanCheck((Reason("plan.unsealed", f"plan {name!r} is {what}", fix_seal),), checked)
    reason = _seal_reason(state, name, checked, fix_seal)
    return PlanCheck((reason,) if reason else (), checked)


def _seal_reason(
    state: PlansState, name: str, checked: CheckedPlan, fix_seal: str
) -> Reason | None:
    seal = state.seal(name)
    assert seal is not None
    try:
        if state.sealed_plan(name) == checked.file.data:
            # the sealed copy is these very bytes: validated just above, no second pass
            if checked.digest != seal.contract_digest:
                raise SealError(
                    f"the sealed copy of plan {name!r} does not match its seal record",
                    hint="the plans ref was tampered with; restore it from a good copy",
                )
            sealed: CheckedPlan | None = checked
        else:
            sealed, _ = sealed_contract(state, name)
    except GitAuditError as exc:
        return Reason("seal.tampered", exc.message, exc.hint or "restore refs/audit/plans")
    if sealed is None:
        return Reason(
            "seal.tampered",
            f"the sealed copy of plan {name!r} is missing",
            "restore refs/audit/plans",
        )
    if seal.policy_digest != state.policy.digest():
        return Reason(
            "seal.policy-mismatch",
            f"seal v{seal.version} of {name!r} binds another policy than policy.json",
            "the plans ref was edited by hand; restore it",
        )
    if checked.digest != seal.contract_digest:
        return Reason(
            "plan.differs-from-seal",
            f"plan {name!r} in this tree differs from its seal v{seal.version}",
            f"reseal (`{fix_seal}`) or revert the plan file "
            "(`git audit plan inspect` shows what differs)",
        )
    return None
