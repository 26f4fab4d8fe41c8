"""The gate: is this exact tree proven, by signed and fresh evidence, to satisfy every active
sealed plan? (design §5)

For every active plan, PASS requires: a valid plan with requirements, full coverage and a
behavioural check per step (the plan's own validation); the plan in the tree identical to its seal;
a seal chain signed by trusted sealers; the latest run of the plan for this tree made under the
current seal, signed by a trusted runner, on an intact and un-rewound ledger, with every required
step verified (carried steps traced to valid evidence of the same tree) and fresh; the required
tools present; and no plan sealed as active missing from the tree. The aggregate is the
conjunction: one FAIL fails all; otherwise one UNKNOWN makes it UNKNOWN.

:func:`assess` reads refs and a few objects, runs no check and writes nothing: what a verdict
rests on is returned with it (:class:`~gitaudit.gate.result.Basis`), and
:mod:`gitaudit.gate.judge` keeps the high-water marks and the verdict memo from it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from pathlib import Path

import pygit2

from gitaudit.errors import GitAuditError, RepositoryError
from gitaudit.gate import claims
from gitaudit.gate.evidence import Judging, judge_evidence
from gitaudit.gate.plans import check_plan
from gitaudit.gate.protected import protected_reason
from gitaudit.gate.request import request_reason, requested_names
from gitaudit.gate.result import Basis, GateResult, PlanVerdict, Reason, fold
from gitaudit.gate.states import step_states
from gitaudit.git.repo import Repo
from gitaudit.ledger.anchor import AnchorError, UnpinnedError
from gitaudit.ledger.plansref import PlansState, read_state
from gitaudit.ledger.programs import Here
from gitaudit.plan.inputs import input_digests
from gitaudit.plan.known_valid import KnownValid
from gitaudit.plan.model import Plan
from gitaudit.plan.store import PlanFile, discover_tree
from gitaudit.verdict import Verdict, combine


def resolve_tree(repo: Repo, rev: str | None) -> str:
    """The tree id to judge: REV's tree, or the work tree's fingerprint."""
    if rev is None:
        from gitaudit.git.fingerprint import workspace_fingerprint

        return workspace_fingerprint(repo.require_workdir()).tree
    try:
        obj = repo.git.revparse_single(rev)
        return str(obj.peel(pygit2.Tree).id)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        raise RepositoryError(
            f"unknown revision {rev!r}", hint="give a commit, branch or tree"
        ) from None


def plan_files(repo: Repo, tree: str, rev: str | None) -> list[PlanFile]:
    """The plan files of the judged tree (REV's, or the work tree's fingerprint): the gate
    judges exactly that tree, so a plan file is read from it, never from the disk."""
    obj = repo.git[pygit2.Oid(hex=tree)]
    assert isinstance(obj, pygit2.Tree)
    return discover_tree(repo.git, obj, rev)


def assess(
    repo: Repo,
    rev: str | None = None,
    *,
    plan: str | None = None,
    check_tools: bool = True,
    pushed_runs: Mapping[str, pygit2.Oid] | None = None,
    state: PlansState | None = None,
    tree: str | None = None,
    with_states: bool,
    remember_plans: bool = True,
    for_ref: str | None = None,
) -> GateResult:
    """Judge REV (or the work tree, or *tree*). Expected errors become FAIL reasons, never
    exceptions.

    *pushed_runs* (plan -> pushed tip) are the runs refs of a push being received (pre-receive);
    *with_states* adds each step's state for mission control; *remember_plans* lets reading the
    plans ref record its verified tip (off on a server); *for_ref* judges as the policy's
    evidence rule for that ref does (:mod:`gitaudit.gate.runners`)."""
    now = time.time()
    workdir = repo.workdir if rev is None and tree is None else None  # judging the work tree
    tree = tree or resolve_tree(repo, rev)
    try:
        state = state or read_state(repo, remember=remember_plans)
    except UnpinnedError as exc:
        reason = Reason("plans.unpinned", exc.message, exc.hint or "git config audit.rootKey")
        return GateResult(Verdict.FAIL, tree, (), (reason,))
    except AnchorError as exc:
        reason = Reason("plans.anchor-mismatch", exc.message, exc.hint or "git audit trust anchor")
        return GateResult(Verdict.FAIL, tree, (), (reason,))
    except GitAuditError as exc:
        reason = Reason("plans.untrusted", exc.message, exc.hint or "restore refs/audit/plans")
        return GateResult(Verdict.FAIL, tree, (), (reason,))
    files = {f.name: f for f in plan_files(repo, tree, rev)}
    names = sorted(set(files) | set(state.active()) | requested_names(repo, state, tree))
    if plan is not None:
        names = [n for n in names if n == plan]
    if not names:
        reason = Reason("plans.none", "there are no active plans", "create one: `git audit init`")
        return GateResult(Verdict.FAIL, tree, (), (reason,))
    pushed = dict(pushed_runs or {})
    here = None
    if check_tools:  # judged where the tools matter: this machine's PATH (never the server)
        here = Here([p for p in (repo.workdir, repo.gitdir) if p is not None])
    agents = claims.load(repo, state, remember=remember_plans)
    known = None
    if remember_plans:  # a client: its own key authenticates the marks
        known = KnownValid(str(repo.gitdir), str(repo.workdir) if repo.workdir else None)
    judged = [
        _assess_plan(
            repo,
            state,
            n,
            files.get(n),
            tree,
            now,
            pushed.get(n),
            check_tools,
            with_states,
            workdir,
            agents,
            for_ref,
            known,
            here,
        )
        for n in names
    ]
    verdicts = tuple(v for v, _ in judged)
    seen: dict[str, str] = {}
    tools: list[str] = []
    until: float | None = None
    for verdict, basis in judged:
        seen.update(basis.seen)
        tools += basis.tools
        if basis.until is not None and verdict.verdict == Verdict.PASS:
            until = basis.until if until is None else min(until, basis.until)
    basis = Basis(
        made=now,
        plans_tip=str(state.tip) if state.tip is not None else None,
        policy=state.policy,
        seen=seen,
        until=until,
        tools=tuple(dict.fromkeys(tools)),
        programs=tuple(here.programs) if here is not None else (),
        path=tuple(here.folders) if here is not None else (),
        filters=tuple(sorted(here.filters.items())) if here is not None else (),
    )
    return GateResult(combine(v.verdict for v in verdicts), tree, verdicts, basis=basis)


def _assess_plan(
    repo: Repo,
    state: PlansState,
    name: str,
    file: PlanFile | None,
    tree: str,
    now: float,
    pushed: pygit2.Oid | None,
    check_tools: bool,
    with_states: bool,
    workdir: Path | None,
    agents: claims.Agents,
    for_ref: str | None = None,
    known: KnownValid | None = None,
    here: Here | None = None,
) -> tuple[PlanVerdict, Basis]:
    checked_plan = check_plan(state, name, file, environment=check_tools, known=known)
    if checked_plan.reasons:
        reasons = checked_plan.reasons
        return PlanVerdict(name, fold(reasons), reasons), Basis()
    checked = checked_plan.checked
    assert checked is not None and checked.plan is not None
    model: Plan = checked.plan
    evidence = judge_evidence(
        Judging(
            repo,
            state,
            name,
            model,
            tree,
            now,
            pushed,
            functools.cache(lambda: input_digests(repo.git, model, tree)),
            workdir,
            for_ref,
            state.policy.evidence_rule(for_ref),
            here=here,
        )
    )
    env = (
        [Reason("env.missing-tool", p.message, p.hint) for p in checked.report.environment]
        if check_tools
        else []
    )
    conflicts, warnings = claims.judge(repo, state, agents, name, evidence.record, now)
    protected = protected_reason(repo, state, name, model, tree)
    asked = request_reason(repo, state, name, model, tree)
    ours = [r for r in (protected, asked) if r]
    reasons = (*env, *ours, *conflicts, *evidence.reasons)
    states = step_states(repo, state, name, model, evidence.record, reasons) if with_states else {}
    seen = dict(evidence.seen)
    basis = Basis(seen=seen, until=evidence.until, tools=tuple(model.required_tools))
    notes = (*evidence.notes, *warnings)
    verdict = PlanVerdict(name, fold(reasons), reasons, evidence.run, states, notes)
    return verdict, basis
