"""The gate's check of the protected files: the check surfaces the seal binds (the files the
checks run, the files that steer pytest, the plan's ``protect`` globs) must be exactly as the
seal recorded them (:mod:`gitaudit.ledger.protected`). A test rewritten to always pass keeps the
contract, but not the seal."""

from __future__ import annotations

from gitaudit.errors import GitAuditError
from gitaudit.gate.result import Reason
from gitaudit.git.repo import Repo
from gitaudit.ledger.plansref import PlansState
from gitaudit.ledger.protected import differences, protected_files
from gitaudit.plan.model import Plan


def protected_reason(
    repo: Repo, state: PlansState, name: str, plan: Plan, tree: str
) -> Reason | None:
    """``plan.protected-changed`` when a protected file of *plan* differs in *tree* from its
    seal (changed, added or deleted); None when they agree, or the seal recorded none (a seal
    made before gitaudit 0.3: its next seal records them)."""
    record = state.seal(name)
    try:
        sealed = state.protected(name)
    except GitAuditError as exc:
        return Reason("seal.tampered", exc.message, exc.hint or "restore refs/audit/plans")
    if record is None or sealed is None:
        return None
    changes = differences(sealed, protected_files(repo.git, tree, plan))
    if not changes:
        return None
    first = (changes.changed + changes.added + changes.deleted)[0]
    return Reason(
        "plan.protected-changed",
        f"protected files of plan {name!r} differ from seal v{record.version}: {changes.summary()}",
        "revert them; or, if the change is right, a sealer reviews it and amends the seal: "
        f"`git audit plan seal --amend --plan {name} --reason TEXT`; if a file is the work the "
        f'checks judge rather than part of a check, exempt it in the plan ("protect": '
        f'["!{first}"]) and reseal',
    )
