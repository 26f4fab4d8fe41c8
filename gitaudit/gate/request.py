"""The gate's check of the user's request (:mod:`gitaudit.plan.request`): a sealed request must
be answered by a sealed plan, and the request in the judged tree must be the sealed one.

A sealer may change the request after the plan was sealed (add a requirement, rewrite one):
the plan sealed before does not answer it, so the tree is not done until a planner (or a
sealer) seals a plan that does: ``request.unanswered``.
"""

from __future__ import annotations

import pygit2

from gitaudit.errors import GitAuditError
from gitaudit.gate.result import Reason
from gitaudit.git.repo import Repo
from gitaudit.ledger.plansref import PlansState
from gitaudit.ledger.requests import request_path
from gitaudit.plan.model import Plan
from gitaudit.plan.request import REQUESTS_DIR, gaps, read_tree, tree_names


def requested_names(repo: Repo, state: PlansState, tree: str) -> set[str]:
    """The plans a request is sealed for, or that have a request file in *tree*: each is judged,
    whether or not a plan exists for it yet."""
    obj = repo.git[pygit2.Oid(hex=tree)]
    assert isinstance(obj, pygit2.Tree)
    return set(state.requested()) | set(tree_names(repo.git, obj))


def unplanned_reason(state: PlansState, name: str) -> Reason:
    """Why *name*, which has a request but neither a plan file nor an active seal, fails."""
    record = state.requests.get(name)
    if record is None or record.retired:
        return Reason(
            "request.unsealed",
            f"the request {REQUESTS_DIR}/{name}.json in this tree is not sealed, and no plan "
            "answers it",
            f"a sealer reviews and seals it: `git audit request seal --plan {name}`",
        )
    return Reason(
        "request.unplanned",
        f"request v{record.version} of plan {name!r} is sealed, but no plan answering it is",
        f"write .gitaudit/plans/{name}.json stating and covering its requirements, and seal "
        f"it: `git audit plan seal --plan {name}` (a planner's key is enough)",
    )


def request_reason(
    repo: Repo, state: PlansState, name: str, plan: Plan, tree: str
) -> Reason | None:
    """``request.differs-from-seal`` / ``request.unsealed`` when the request file of *tree*
    is not the sealed request; ``request.unanswered`` when the sealed *plan* does not answer
    the sealed request; None when all is in order (or there is no request: single-file form)."""
    record = state.requests.get(name)
    active = record is not None and not record.retired
    obj = repo.git[pygit2.Oid(hex=tree)]
    assert isinstance(obj, pygit2.Tree)
    here = read_tree(repo.git, obj, name)
    path = f"{REQUESTS_DIR}/{name}.json"
    fix = f"revert it, or a sealer reviews and seals it: `git audit request seal --plan {name}`"
    if here is not None and not active:
        return Reason("request.unsealed", f"the request {path} in this tree is not sealed", fix)
    if record is None or not active:
        return None
    if here is not None and here != state.files.get(request_path(name)):
        return Reason(
            "request.differs-from-seal",
            f"the request {path} in this tree differs from its seal v{record.version}",
            fix,
        )
    try:
        request = state.request(name)
    except GitAuditError as exc:
        return Reason("seal.tampered", exc.message, exc.hint or "restore refs/audit/plans")
    found = gaps(request, plan) if request is not None else ()
    if not found:
        return None
    seal = state.seal(name)
    more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
    return Reason(
        "request.unanswered",
        f"plan {name!r} (seal v{seal.version if seal else '?'}) does not answer request "
        f"v{record.version}: {found[0].message}{more}",
        "state each request requirement in the plan as the request does and cover it, then "
        f"reseal: `git audit plan seal --plan {name}` (a planner's key is enough)",
    )
