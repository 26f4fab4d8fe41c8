"""The gate: is this exact tree proven, by signed and fresh evidence, to satisfy every active
sealed plan? (design §5)

For every active plan, PASS requires: a valid plan with requirements, full coverage and a
behavioural check per step (the plan's own validation); the plan in the tree identical to its seal;
a seal chain signed by trusted sealers; the latest run of the plan for this tree made under the
current seal, signed by a trusted runner, on an intact and un-rewound ledger, with every required
step verified (carried steps traced to valid evidence of the same tree) and fresh; the required
tools present; and no plan sealed as active missing from the tree. The aggregate is the
conjunction: one FAIL fails all; otherwise one UNKNOWN makes it UNKNOWN.

The gate reads refs and a few objects and runs no check.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

import pygit2

from gitaudit.crypto.commits import verify_commit
from gitaudit.errors import ExitCode, GitAuditError, LedgerError, RepositoryError, SealError
from gitaudit.gate import memo
from gitaudit.git.repo import Repo
from gitaudit.ledger import index, watermark
from gitaudit.ledger.plansref import PlansState, read_state, sealed_contract
from gitaudit.ledger.refs import read_ref, runs_ref
from gitaudit.ledger.runs import RunRecord, read_run
from gitaudit.plan.catalog import CheckedPlan, check_file
from gitaudit.plan.graph import optional_steps
from gitaudit.plan.inputs import input_digests
from gitaudit.plan.model import Plan
from gitaudit.plan.store import PlanFile, discover_tree

Verdict = Literal["PASS", "FAIL", "UNKNOWN"]
EXIT = {"PASS": ExitCode.OK, "FAIL": ExitCode.FAIL, "UNKNOWN": ExitCode.UNKNOWN}
CLOCK_SKEW = 300  # seconds of tolerated clock difference for signed times


@dataclass(frozen=True)
class Reason:
    code: str
    message: str
    hint: str
    step: str | None = None
    verdict: Verdict = "FAIL"


@dataclass(frozen=True)
class PlanVerdict:
    name: str
    verdict: Verdict
    reasons: tuple[Reason, ...]
    run: str | None = None  # the run commit whose evidence was judged
    # each step's state for this tree, as the gate sees it: verified, failed, unknown,
    # exhausted, expired or pending (empty when the plan itself is not in order)
    states: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "verdict": self.verdict,
            "run": self.run,
            "reasons": [
                {k: v for k, v in asdict(r).items() if k != "verdict"} for r in self.reasons
            ],
        }


@dataclass(frozen=True)
class GateResult:
    verdict: Verdict
    tree: str
    plans: tuple[PlanVerdict, ...]
    reasons: tuple[Reason, ...] = ()  # problems not tied to one plan

    @property
    def exit_code(self) -> int:
        return int(EXIT[self.verdict])

    def to_json(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "tree": self.tree,
            "plans": [p.to_json() for p in self.plans],
            "reasons": [
                {k: v for k, v in asdict(r).items() if k != "verdict"} for r in self.reasons
            ],
        }


def combine(verdicts: Sequence[Verdict]) -> Verdict:
    if not verdicts or "FAIL" in verdicts:
        return "FAIL"
    return "UNKNOWN" if "UNKNOWN" in verdicts else "PASS"


def _fold(reasons: Sequence[Reason]) -> Verdict:
    return combine([r.verdict for r in reasons]) if reasons else "PASS"


@dataclass
class Context:
    """What one assessment needs: the repository, the verified plans state, and options."""

    repo: Repo
    state: PlansState
    tree: str
    check_tools: bool = True
    extra_runs: Mapping[str, pygit2.Oid] = field(default_factory=dict)  # plan -> pushed run tip
    now: float = field(default_factory=time.time)
    remember: bool = True
    with_states: bool = False
    until: float | None = None  # the earliest expiry of the evidence accepted so far
    plans: dict[str, Plan] = field(default_factory=dict)
    checked: dict[str, CheckedPlan] = field(default_factory=dict)
    _digests: dict[str, dict[str, str]] = field(default_factory=dict)

    def digests_for(self, name: str) -> dict[str, str]:
        """Input digests of every step of plan *name* for the judged tree (computed once)."""
        if name not in self._digests:
            plan = self.plans.get(name)
            self._digests[name] = input_digests(self.repo.git, plan, self.tree) if plan else {}
        return self._digests[name]


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
    extra_runs: Mapping[str, pygit2.Oid] | None = None,
    state: PlansState | None = None,
    tree: str | None = None,
    remember: bool = True,
    with_states: bool = False,
    before: memo.Snapshot | None = None,
) -> GateResult:
    """Judge REV (or the work tree). Expected errors become FAIL reasons, never exceptions.

    *remember* records verified tips as high-water marks (off in server hooks) and a PASS in
    the verdict memo (see :mod:`gitaudit.gate.memo`), keyed by the state *before* the assessment
    (taken here unless the caller took it earlier)."""
    memoize = remember and plan is None and not extra_runs and check_tools
    if memoize and before is None:
        found = memo.snapshot(gitdir=repo.gitdir)
        before = found[0] if found is not None else None
    tree = tree or resolve_tree(repo, rev)
    try:
        state = state or read_state(repo)
    except GitAuditError as exc:
        reason = Reason("plans.untrusted", exc.message, exc.hint or "restore refs/audit/plans")
        return GateResult("FAIL", tree, (), (reason,))
    files = {f.name: f for f in plan_files(repo, tree, rev)}
    names = sorted(set(files) | set(state.active()))
    if plan is not None:
        names = [n for n in names if n == plan]
    if not names:
        reason = Reason("plans.none", "there are no active plans", "create one: `git audit init`")
        return GateResult("FAIL", tree, (), (reason,))
    ctx = Context(
        repo,
        state,
        tree,
        check_tools,
        dict(extra_runs or {}),
        remember=remember,
        with_states=with_states,
    )
    verdicts = tuple(_assess_plan(ctx, name, files.get(name)) for name in names)
    result = GateResult(combine([v.verdict for v in verdicts]), tree, verdicts)
    if memoize and before is not None and result.verdict == "PASS":
        _memoize(ctx, before, result)
    return result


def _memoize(ctx: Context, snap: memo.Snapshot, result: GateResult) -> None:
    """Remember a PASS judged on exactly the state *snap* describes (best effort)."""
    plans_tip = dict(snap.refs).get("refs/audit/plans")
    if plans_tip is None or str(ctx.state.tip) != plans_tip:
        return  # the plans state was read before the snapshot, and the ref has moved since
    if os.path.realpath(snap.gitdir) != os.path.realpath(ctx.repo.gitdir):
        return
    memo.remember(
        snap,
        tree=result.tree,
        made=ctx.now,
        until=ctx.until,
        tools=[t for p in ctx.plans.values() for t in p.required_tools],
        protect=ctx.state.policy.protected_refs,
        commit_msg=ctx.state.policy.commit_msg,
        runs=[(p.name, p.run) for p in result.plans if p.run],
    )


def _assess_plan(ctx: Context, name: str, file: PlanFile | None) -> PlanVerdict:
    reasons = _plan_reasons(ctx, name, file)
    if reasons:
        return PlanVerdict(name, _fold(reasons), tuple(reasons))
    assert file is not None
    checked = ctx.checked[name]
    if checked.plan is not None:
        ctx.plans[name] = checked.plan
    try:
        run_reasons, run = _evidence_reasons(ctx, name, checked)
    except (TypeError, AttributeError, KeyError, ValueError, GitAuditError) as exc:
        # a signed run.json whose fields have the wrong shape: never a PASS, never a crash
        detail = exc.message if isinstance(exc, GitAuditError) else f"{type(exc).__name__}: {exc}"
        run_reasons = [
            Reason(
                "evidence.malformed",
                f"the evidence of plan {name!r} for this tree cannot be read: {detail}",
                f"git audit verify; then `git audit run --plan {name}`",
            )
        ]
        run = None
    env = (
        [Reason("env.missing-tool", p.message, p.hint) for p in checked.report.environment]
        if ctx.check_tools
        else []
    )
    all_reasons = env + run_reasons
    assert checked.plan is not None
    states: dict[str, str] = {}
    if ctx.with_states:
        try:
            states = _states(ctx, name, checked.plan, run, run_reasons)
        except (TypeError, AttributeError, KeyError, ValueError, GitAuditError):
            states = {s.id: "pending" for s in checked.plan.steps}
    return PlanVerdict(name, _fold(all_reasons), tuple(all_reasons), run, states)


_STATE_OF = {"failed": "failed", "exhausted": "exhausted", "unknown": "unknown"}


def _states(
    ctx: Context, name: str, plan: Plan, run: str | None, reasons: Sequence[Reason]
) -> dict[str, str]:
    """Step states for mission control, consistent with the verdict: a step is verified only
    when the evidence the gate accepted proves it for this tree and it has not expired."""
    by_step = {r.step: r for r in reasons if r.step}
    record = None
    if run is not None and not any(r.step is None and r.verdict == "FAIL" for r in reasons):
        with contextlib.suppress(GitAuditError):
            record = read_run(ctx.repo.git, run)
    git, gitdir = ctx.repo.git, ctx.repo.gitdir
    seal = ctx.state.seal(name)
    attempts = index.failed_attempts(git, gitdir, name, seal.contract_digest) if seal else {}
    unresolved = index.unresolved(git, gitdir, name)
    states: dict[str, str] = {}
    for step in plan.steps:
        entry = record.steps.get(step.id, {}) if record else {}
        status = str(entry.get("status", ""))
        reason = by_step.get(step.id)
        if reason is not None and reason.code == "evidence.expired":
            states[step.id] = "expired"
        elif reason is None and status in ("passed", "carried"):
            states[step.id] = "verified"
        elif step.id in unresolved and not step.idempotent:
            states[step.id] = "unknown"
        elif attempts.get(step.id, 0) >= step.max_attempts:
            states[step.id] = "exhausted"
        else:
            states[step.id] = _STATE_OF.get(status, "pending")
    return states


def _plan_reasons(ctx: Context, name: str, file: PlanFile | None) -> list[Reason]:
    """Everything about the plan and its seal (before looking at evidence)."""
    seal = ctx.state.seal(name)
    fix_seal = f"git audit plan seal --plan {name}"
    if file is None:
        return [
            Reason(
                "plan.missing",
                f"plan {name!r} is sealed as active but .gitaudit/plans/{name}.json "
                "is not in this tree",
                f"restore the file, or retire the plan: `git audit plan retire {name} --reason ..`",
            )
        ]
    checked = check_file(file, environment=ctx.check_tools)
    ctx.checked[name] = checked
    if not checked.report.valid:
        first = checked.report.errors[0]
        return [
            Reason(
                "plan.invalid",
                f"{first.path}: {first.message} [{first.code}]"
                + (
                    f" (+{len(checked.report.errors) - 1} more)"
                    if len(checked.report.errors) > 1
                    else ""
                ),
                f"git audit plan validate --plan {name}",
            )
        ]
    if seal is None or seal.retired:
        state = "retired" if seal else "not sealed"
        return [Reason("plan.unsealed", f"plan {name!r} is {state}", fix_seal)]
    try:
        if ctx.state.sealed_plan(name) == file.data:
            # the sealed copy is these very bytes: validated just above, no second pass
            if checked.digest != seal.contract_digest:
                raise SealError(
                    f"the sealed copy of plan {name!r} does not match its seal record",
                    hint="the plans ref was tampered with; restore it from a good copy",
                )
            sealed: CheckedPlan | None = checked
        else:
            sealed, _ = sealed_contract(ctx.state, name)
    except GitAuditError as exc:
        return [Reason("seal.tampered", exc.message, exc.hint or "restore refs/audit/plans")]
    if sealed is None:
        return [
            Reason(
                "seal.tampered",
                f"the sealed copy of plan {name!r} is missing",
                "restore refs/audit/plans",
            )
        ]
    if seal.policy_digest != ctx.state.policy.digest():
        return [
            Reason(
                "seal.policy-mismatch",
                f"seal v{seal.version} of {name!r} binds another policy than policy.json",
                "the plans ref was edited by hand; restore it",
            )
        ]
    if checked.digest != seal.contract_digest:
        return [
            Reason(
                "plan.differs-from-seal",
                f"plan {name!r} in this tree differs from its seal v{seal.version}",
                f"reseal (`{fix_seal}`) or revert the plan file "
                "(`git audit plan inspect` shows what differs)",
            )
        ]
    return []


def _find_run(ctx: Context, name: str, contract: str) -> tuple[RunRecord | None, pygit2.Oid | None]:
    """The newest run of *name* for the tree (pushed runs first, then the indexed ledger)."""
    git = ctx.repo.git
    pushed = ctx.extra_runs.get(name)
    if pushed is not None:
        current: pygit2.Oid | None = pushed
        tip_now = read_ref(git, runs_ref(name))
        while current is not None and current != tip_now:
            record = read_run(git, current)
            if record.tree == ctx.tree and record.contract == contract:
                return record, pushed
            commit = git[current]
            assert isinstance(commit, pygit2.Commit)
            current = commit.parent_ids[0] if commit.parent_ids else None
    found, indexed_tip = index.lookup(git, ctx.repo.gitdir, name, ctx.tree, contract)
    if indexed_tip is None:
        return None, None
    tip = pygit2.Oid(hex=indexed_tip)  # the view the index answered from, not a later re-read
    if found is None:
        return None, pushed or tip
    record = read_run(git, found.commit)
    _check_index_answer(git, tip, record, name, ctx.tree, contract)
    return record, pushed or tip


_WALK_IN_PYTHON = 256


def _confirm_with_git(
    git: pygit2.Repository, newest: pygit2.Oid, run: str, name: str, tree: str, contract: str
) -> None:
    """The same confirmation for a run deep in the ledger, by git (in C) in one walk: the
    newest commit on the first-parent chain of *newest* carrying both trailers of this tree and
    contract must be *run* itself (so *run* is on the chain, and nothing newer is)."""
    import subprocess

    from gitaudit.git.env import git_env

    found = subprocess.run(
        [
            "git",
            f"--git-dir={git.path}",
            "rev-list",
            "--first-parent",
            "--fixed-strings",
            "--all-match",
            "--max-count=1",
            f"--grep=Audit-Tree: {tree}",
            f"--grep=Audit-Contract: {contract}",
            str(newest),
        ],
        capture_output=True,
        text=True,
        env=git_env(),
        check=False,
    )
    newest_run = found.stdout.strip()
    if found.returncode != 0 or newest_run != run:
        detail = (
            f"the newest is {newest_run[:12]}"
            if newest_run
            else "it is not on the ledger's first-parent chain"
        )
        raise LedgerError(
            f"run {run[:12]} named by the lookup cache is not the newest run of {name!r} for "
            f"tree {tree[:12]} ({detail})",
            hint=f"the cache was edited; delete {git.path}gitaudit/index.sqlite",
        )


def _check_index_answer(
    git: pygit2.Repository, tip: pygit2.Oid, record: RunRecord, name: str, tree: str, contract: str
) -> None:
    """The lookup cache is a file in the repository, not evidence: confirm its answer. The run
    must be for this tree and contract (its run.json is signed; its plan is judged later), lie on
    the ledger's first-parent chain, and be the newest run for that tree (read from the signed
    chain's commit trailers: one object read per newer run, or git's own log search past a few
    hundred)."""
    if record.tree != tree or record.contract != contract:
        raise LedgerError(
            f"the lookup cache names run {record.commit[:12]}, which is not evidence for tree "
            f"{tree[:12]} under this contract",
            hint=f"the cache was edited; delete {git.path}gitaudit/index.sqlite (it is rebuilt)",
        )
    marker = f"Audit-Tree: {tree}\nAudit-Contract: {contract}\n"
    current: pygit2.Oid | None = tip
    walked = 0
    while current is not None and str(current) != record.commit:
        if walked == _WALK_IN_PYTHON:
            _confirm_with_git(git, current, record.commit, name, tree, contract)
            return
        walked += 1
        commit = git[current]
        assert isinstance(commit, pygit2.Commit)
        if marker in commit.message:
            raise LedgerError(
                f"a newer run ({str(current)[:12]}) than the one the lookup cache names exists "
                f"for tree {tree[:12]}",
                hint=f"the cache was edited; delete {git.path}gitaudit/index.sqlite",
            )
        current = commit.parent_ids[0] if commit.parent_ids else None
    if current is None:
        raise LedgerError(
            f"run {record.commit[:12]} named by the lookup cache is not on the ledger of {name!r}",
            hint=f"the cache was edited; delete {git.path}gitaudit/index.sqlite",
        )


def _evidence_reasons(
    ctx: Context, name: str, checked: CheckedPlan
) -> tuple[list[Reason], str | None]:
    plan = checked.plan
    seal = ctx.state.seal(name)
    assert plan is not None and seal is not None
    run_fix = f"git audit run --plan {name}"
    git = ctx.repo.git
    try:
        watermark.check_forward(
            git,
            ctx.repo.gitdir,
            runs_ref(name),
            ctx.extra_runs.get(name) or read_ref(git, runs_ref(name)),
        )
        record, tip = _find_run(ctx, name, seal.contract_digest)
    except GitAuditError as exc:
        return [Reason("evidence.ledger", exc.message, exc.hint or "restore the runs ref")], None
    if record is None:
        stale = index.latest_for_tree(git, ctx.repo.gitdir, name, ctx.tree) if tip else None
        if stale is not None and read_run(git, stale.commit).plan != name:
            return [
                Reason(
                    "evidence.replayed",
                    f"run {stale.commit[:12]} on the ledger of {name!r} is evidence for "
                    "another plan",
                    f"the ledger was tampered with; restore refs/audit/runs/{name}",
                )
            ], None
        if stale is not None:
            return [
                Reason(
                    "evidence.stale-contract",
                    f"the evidence for this tree ({stale.commit[:12]}) was made under "
                    "another contract",
                    run_fix,
                    verdict="UNKNOWN",
                )
            ], None
        return [
            Reason(
                "evidence.missing",
                f"no evidence for tree {ctx.tree[:12]}",
                run_fix,
                verdict="UNKNOWN",
            )
        ], None
    runners = ctx.state.trust.with_role("runner")
    for what, oid in (("run", pygit2.Oid(hex=record.commit)), ("ledger tip", tip)):
        if oid is None:
            continue
        try:
            verify_commit(git, oid, runners)
        except GitAuditError as exc:
            return [
                Reason(
                    "evidence.untrusted",
                    f"{what} {str(oid)[:12]} of plan {name!r}: {exc.message}",
                    "evidence must be signed by a runner key trusted on refs/audit/plans; "
                    f"re-run with a trusted key: `{run_fix}`",
                )
            ], record.commit
    if tip is not None and ctx.remember and name not in ctx.extra_runs:
        # the tip's signature was just verified: it becomes the high-water mark, so a later
        # rewind or truncation of this ledger is caught by the next status, not only by verify
        watermark.record(ctx.repo.gitdir, {runs_ref(name): str(tip)}, "seen", ctx.repo.git)
    # No ancestry walk is needed here: a run found through the index lies on the first-parent
    # chain of the ref's current tip (the index is rebuilt when the ref stops descending from
    # what it indexed), and a pushed run was found by walking back from the pushed tip.
    reasons = _run_content_reasons(ctx, name, record, plan, run_fix)
    return reasons, record.commit


def _run_content_reasons(
    ctx: Context, name: str, record: RunRecord, plan: Plan, run_fix: str
) -> list[Reason]:
    """Judge the steps of the run found for this tree, one reason per step that is not proven."""
    doc = record.doc
    if doc.get("plan") != name:
        return [
            Reason(
                "evidence.replayed",
                f"run {record.commit[:12]} is evidence for plan {doc.get('plan')!r}, not {name!r}",
                run_fix,
            )
        ]
    reasons: list[Reason] = []
    optional = optional_steps(plan)
    verified: set[str] = set()
    for step in plan.steps:
        entry = record.steps.get(step.id)
        if entry is None:
            reasons.append(
                Reason(
                    "evidence.incomplete",
                    f"run {record.commit[:12]} has no entry for step {step.id}",
                    run_fix,
                    step=step.id,
                )
            )
            continue
        status = str(entry.get("status"))
        if status not in ("passed", "carried"):
            if step.id in optional:
                continue  # an OR alternative: its dependant is judged instead
            broken_upstream = status == "blocked" and any(
                not u.get("passed")
                and not any(c.get("outcome") == "unknown" for c in u.get("checks", []))
                for u in entry.get("upstream", [])
            )
            failed = status in ("failed", "exhausted") or broken_upstream
            detail = f": {entry.get('reason')}" if entry.get("reason") else ""
            hint = (
                f"`git audit show {record.commit[:12]} --step {step.id}` shows the output; "
                f"fix it, then `{run_fix}`"
                if failed
                else run_fix
            )
            verdict: Verdict = "FAIL" if failed else "UNKNOWN"
            reasons.append(
                Reason(f"step.{status}", f"step {step.id} {status}{detail}", hint, step.id, verdict)
            )
            continue
        when = record.time
        if status == "carried":
            source = _trace_carried(ctx, record, step.id, str(entry.get("carried_from") or ""))
            if source is None:
                reasons.append(
                    Reason(
                        "evidence.carried-invalid",
                        f"step {step.id} claims evidence carried from "
                        f"{str(entry.get('carried_from'))[:12]}, which does not hold for this tree",
                        run_fix,
                        step=step.id,
                    )
                )
                continue
            when = source.time
        expiry = _expiry_reason(ctx, name, step.id, step.valid_for, when)
        if expiry is not None:
            reasons.append(expiry)
            continue
        verified.add(step.id)
    if record.verdict != "PASS" and not reasons:
        run_reasons = "; ".join(str(r) for r in doc.get("reasons", [])[:3])
        kind: Verdict = "FAIL" if record.verdict == "FAIL" else "UNKNOWN"
        reasons.append(
            Reason(
                f"evidence.{record.verdict.lower()}",
                f"the run for this tree is {record.verdict}: {run_reasons}",
                run_fix,
                verdict=kind,
            )
        )
    if not reasons:
        for req in plan.requirements:
            if req.mandatory and not any(s.id in verified for s in plan.covering_steps(req.id)):
                reasons.append(
                    Reason(
                        "evidence.uncovered",
                        f"{req.priority} requirement {req.id} is not covered by verified evidence",
                        run_fix,
                    )
                )
    return reasons


def _expiry_reason(
    ctx: Context, name: str, step: str, valid_for: int | None, when: int
) -> Reason | None:
    """Evidence with ``valid_for`` counts from the signed commit time (see docs/ledger-format)."""
    if valid_for is None:
        return None
    if when > ctx.now + CLOCK_SKEW:
        return Reason(
            "evidence.future",
            f"the evidence for step {step} is dated in the future "
            f"({time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(when))})",
            "check the clocks of this machine and of the runner; then re-run",
            step=step,
        )
    if when + valid_for >= ctx.now:
        ctx.until = when + valid_for if ctx.until is None else min(ctx.until, when + valid_for)
    else:
        expired = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when + valid_for))
        return Reason(
            "evidence.expired",
            f"the evidence for step {step} expired at {expired}",
            f"git audit run {step} --plan {name}",
            step=step,
            verdict="UNKNOWN",
        )
    return None


def _trace_carried(ctx: Context, record: RunRecord, step: str, source: str) -> RunRecord | None:
    """The run a carried step's evidence came from, if it is an earlier run on the same ledger in
    which that step itself passed, and it proves this tree: the same tree and contract, or the
    same input digest as this tree gives the step now (incremental evidence, versioned proofs)."""
    git = ctx.repo.git
    try:
        oid = pygit2.Oid(hex=source)
        earlier = index.is_earlier(git, ctx.repo.gitdir, record.plan, source, record.commit)
        if earlier is None:  # not both indexed (a pushed run): ask git
            earlier = git.descendant_of(pygit2.Oid(hex=record.commit), oid)
        if not earlier:
            return None
        # the source's own signature: a carried step is only as good as the run it came from
        verify_commit(git, oid, ctx.state.trust.with_role("runner"))
        origin = read_run(git, oid)
    except (GitAuditError, ValueError, KeyError, pygit2.GitError):
        return None
    entry = origin.steps.get(step, {})
    if entry.get("status") != "passed":
        return None
    if origin.tree == record.tree and origin.contract == record.contract:
        return origin
    claimed = entry.get("input_digest")
    current = record.steps.get(step, {}).get("input_digest")
    if claimed and claimed == current and claimed == ctx.digests_for(record.plan).get(step):
        return origin
    return None


def render_gate(result: GateResult) -> list[str]:
    """Human lines: the verdict, then one line per plan, with each non-PASS reason and its fix."""
    lines = [f"{result.verdict}  tree {result.tree[:12]}"]
    for reason in result.reasons:
        lines.append(f"  {reason.message} [{reason.code}]")
        lines.append(f"    fix: {reason.hint}")
    for plan in result.plans:
        if plan.reasons:
            first = plan.reasons[0].message
        else:
            first = f"evidence {plan.run[:12]}" if plan.run else ""
        lines.append(f"  {plan.verdict:<7} {plan.name}: {first}")
        lines.extend(f"          {reason.message}" for reason in plan.reasons[1:])
        lines.extend(f"          fix: {fix}" for fix in dict.fromkeys(r.hint for r in plan.reasons))
    return lines
