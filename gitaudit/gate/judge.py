"""The gate as the commands and the client hooks call it: one hop from the CLI to the verdict.

:func:`judge` runs :func:`gitaudit.gate.assess.assess` and then keeps what the verdict rests on
(:class:`~gitaudit.gate.result.Basis`): the ledger tips whose signatures it verified become
"seen" high-water marks, so a later rewind is caught by the next judgement, and a PASS of every
plan is remembered in the verdict memo (:mod:`gitaudit.gate.memo`) under the state taken before
the assessment. The server's pre-receive hook calls ``assess`` alone: it remembers nothing.
"""

from __future__ import annotations

import os

from gitaudit.gate import memo
from gitaudit.gate.assess import assess
from gitaudit.gate.result import GateResult
from gitaudit.git.repo import Repo
from gitaudit.ledger import watermark
from gitaudit.ledger.plansref import PlansState
from gitaudit.verdict import Verdict


def judge(
    repo: Repo,
    rev: str | None = None,
    *,
    plan: str | None = None,
    state: PlansState | None = None,
    tree: str | None = None,
    with_states: bool = False,
    before: memo.Snapshot | None = None,
    for_ref: str | None = None,
) -> GateResult:
    """Judge REV (or the work tree, or *tree*), for the ref *for_ref* when given (its evidence
    rule), and keep the marks and the memo; *before* is the repository's state taken by a
    caller that looked at the memo first (taken here otherwise). A remembered PASS is keyed by
    the ref it was judged for: one judged for no ref never answers for a ref with a rule."""
    whole = plan is None
    if whole and before is None:
        entered = str(repo.entered) if repo.entered is not None else None
        found = memo.snapshot(gitdir=repo.gitdir, entered=entered)
        before = found[0] if found is not None else None
    result = assess(
        repo, rev, plan=plan, state=state, tree=tree, with_states=with_states, for_ref=for_ref
    )
    if result.basis.seen:
        watermark.record(repo.gitdir, dict(result.basis.seen), "seen", repo.git)
    if whole and before is not None and result.verdict == Verdict.PASS:
        _remember(repo, before, result, for_ref or "")
    return result


def _remember(repo: Repo, before: memo.Snapshot, result: GateResult, ref: str) -> None:
    """Remember a PASS judged on exactly the state *before* describes (best effort)."""
    basis = result.basis
    if basis.plans_tip is None or dict(before.refs).get("refs/audit/plans") != basis.plans_tip:
        return  # the plans state was read before the snapshot, and the ref has moved since
    if os.path.realpath(before.gitdir) != os.path.realpath(repo.gitdir) or basis.policy is None:
        return
    memo.remember(
        before,
        tree=result.tree,
        made=basis.made,
        until=basis.until,
        tools=basis.tools,
        programs=basis.programs,
        path=basis.path,
        filters=basis.filters,
        protect=basis.policy.protected_refs,
        commit_msg=basis.policy.commit_msg,
        runs=[(p.name, p.run) for p in result.plans if p.run],
        # judged for a ref without a rule is judged as for no ref: one entry answers for both
        ref=ref if basis.policy.evidence_rule(ref) is not None else "",
        rules=[r.pattern for r in basis.policy.evidence],
        notes=[(p.name, note) for p in result.plans for note in p.notes],
    )
