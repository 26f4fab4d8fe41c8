"""The gate's second question for each plan in order: does signed, fresh evidence prove it for
exactly this tree?

The newest run of the plan for the tree under the current seal's contract is found (the lookup
cache's answer confirmed by the signed chain, :mod:`gitaudit.ledger.lookup`); the run and the
ledger tip must be signed by a trusted runner on a ledger that was not rewound; then every
required step must be proven by it (carried steps traced to the run they came from), by a signer
with the authority for what the step entry claims (:mod:`gitaudit.gate.authority`), fresh, and
every mandatory requirement covered. Nothing is executed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pygit2

from gitaudit.crypto.commits import verify_commit
from gitaudit.errors import GitAuditError
from gitaudit.gate.authority import forced_past_exhaustion, unauthorised_reconcile
from gitaudit.gate.result import Reason
from gitaudit.git.repo import Repo
from gitaudit.ledger import index, lookup, watermark
from gitaudit.ledger.plansref import PlansState
from gitaudit.ledger.records import MalformedRun, RunRecord, StepEntry
from gitaudit.ledger.refs import read_ref, runs_ref
from gitaudit.ledger.runs import read_run
from gitaudit.plan.graph import optional_steps
from gitaudit.plan.model import Plan
from gitaudit.verdict import StepStatus, Verdict, output_broken, uncovered, unproven_step

CLOCK_SKEW = 300  # seconds of tolerated clock difference for signed times


@dataclass(frozen=True)
class Evidence:
    """The gate's judgement of one plan's evidence.

    ``record``: the run judged (None when there is none, or it could not be read); ``run``: its
    commit id; ``seen``: the ledger tip whose signature was verified (None for a pushed ledger,
    whose tip is not ours to remember); ``until``: the earliest expiry among the evidence
    accepted."""

    reasons: tuple[Reason, ...]
    record: RunRecord | None = None
    run: str | None = None
    seen: str | None = None
    until: float | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Judging:
    """What judging one plan's evidence needs."""

    repo: Repo
    state: PlansState
    name: str
    plan: Plan
    tree: str
    now: float
    pushed: pygit2.Oid | None  # the tip of a runs ref being pushed (pre-receive)
    digests: Callable[[], Mapping[str, str]]  # the steps' input digests for this tree
    workdir: Path | None = None  # the work tree, when it is what is judged

    @property
    def run_fix(self) -> str:
        return f"git audit run --plan {self.name}"


def judge_evidence(j: Judging) -> Evidence:
    seal = j.state.seal(j.name)
    assert seal is not None
    git = j.repo.git
    try:
        with watermark.view(j.repo.gitdir) as marks:
            current = j.pushed or read_ref(git, runs_ref(j.name))
        watermark.check_forward(git, j.repo.gitdir, runs_ref(j.name), current, marks)
        found = lookup.find_run(
            git, j.repo.gitdir, j.name, j.tree, seal.contract_digest, pushed=j.pushed
        )
    except MalformedRun as exc:
        return _malformed(j, exc)
    except GitAuditError as exc:
        reason = Reason("evidence.ledger", exc.message, exc.hint or "restore the runs ref")
        return Evidence((reason,))
    record, tip = found.record, found.tip
    if record is None:
        return Evidence((_no_evidence(j, found.other_contract),))
    untrusted = _untrusted(j, (("run", pygit2.Oid(hex=record.commit)), ("ledger tip", tip)))
    if untrusted is not None:
        return Evidence((untrusted,), record, record.commit)
    # the tip's signature was just verified: it may become the high-water mark, so a later
    # rewind of this ledger is caught by the next status (a pushed tip is not ours to remember)
    seen = str(tip) if tip is not None and j.pushed is None else None
    reasons, until = _content_reasons(j, record)
    extra, notes = _beyond_the_tree(j, record)
    return Evidence(tuple([*reasons, *extra]), record, record.commit, seen, until, notes)


def _beyond_the_tree(j: Judging, record: RunRecord) -> tuple[list[Reason], tuple[str, ...]]:
    """What the run relied on that the tree does not pin down: steps that ran in the live work
    tree (refused when the policy says so) and declared ignored paths (which must be as they were
    when the work tree itself is judged)."""
    reasons: list[Reason] = []
    notes: list[str] = []
    live = sorted(
        sid
        for sid, entry in record.steps.items()
        if entry.live and entry.status == StepStatus.PASSED
    )
    if live:
        notes.append(f"step(s) {', '.join(live)} ran in the live work tree (workspace: live)")
        if j.state.policy.live_evidence == "refuse":
            reasons.append(
                Reason(
                    "evidence.live-refused",
                    f"the policy refuses evidence from the live work tree, and step(s) "
                    f"{', '.join(live)} of plan {j.name!r} ran there",
                    "run those steps in the private checkout (remove `workspace: live` and "
                    f"reseal), then `{j.run_fix}`",
                )
            )
    if record.ignored_paths:
        notes.append(f"relied on ignored path(s) {', '.join(sorted(record.ignored_paths))}")
    if j.workdir is not None:
        from gitaudit.run.checkout import listing_digest

        for path, digest in sorted(record.ignored_paths.items()):
            if listing_digest(j.workdir / path)[1] != digest:
                reasons.append(
                    Reason(
                        "evidence.ignored-changed",
                        f"the declared ignored path {path!r} changed since the run that proved "
                        f"plan {j.name!r}",
                        j.run_fix,
                        verdict=Verdict.UNKNOWN,
                    )
                )
    return reasons, tuple(notes)


def _malformed(j: Judging, exc: MalformedRun) -> Evidence:
    """A run record of the wrong shape: untrusted if it is not a runner's, else malformed."""
    untrusted = _untrusted(j, (("run", pygit2.Oid(hex=exc.commit)),))
    if untrusted is not None:
        return Evidence((untrusted,), run=exc.commit)
    reason = Reason(
        "evidence.malformed",
        f"the evidence of plan {j.name!r} for this tree cannot be read: {exc.message}",
        f"git audit verify; then `{j.run_fix}`",
    )
    return Evidence((reason,), run=exc.commit)


def _untrusted(j: Judging, commits: tuple[tuple[str, pygit2.Oid | None], ...]) -> Reason | None:
    runners = j.state.trust.with_role("runner")
    for what, oid in commits:
        if oid is None:
            continue
        try:
            verify_commit(j.repo.git, oid, runners)
        except GitAuditError as exc:
            return Reason(
                "evidence.untrusted",
                f"{what} {str(oid)[:12]} of plan {j.name!r}: {exc.message}",
                "evidence must be signed by a runner key trusted on refs/audit/plans; "
                f"re-run with a trusted key: `{j.run_fix}`",
            )
    return None


def _no_evidence(j: Judging, stale: str | None) -> Reason:
    """Why there is no run for this tree under the current contract (*stale*: the newest run for
    the tree under another contract)."""
    if stale is not None:
        try:
            other_plan = read_run(j.repo.git, stale).plan != j.name
        except GitAuditError as exc:
            return Reason(
                "evidence.malformed",
                f"the evidence of plan {j.name!r} for this tree cannot be read: {exc.message}",
                f"git audit verify; then `{j.run_fix}`",
            )
        if other_plan:
            return Reason(
                "evidence.replayed",
                f"run {stale[:12]} on the ledger of {j.name!r} is evidence for another plan",
                f"the ledger was tampered with; restore refs/audit/runs/{j.name}",
            )
        return Reason(
            "evidence.stale-contract",
            f"the evidence for this tree ({stale[:12]}) was made under another contract",
            j.run_fix,
            verdict=Verdict.UNKNOWN,
        )
    return Reason(
        "evidence.missing",
        f"no evidence for tree {j.tree[:12]}",
        j.run_fix,
        verdict=Verdict.UNKNOWN,
    )


def _content_reasons(j: Judging, record: RunRecord) -> tuple[list[Reason], float | None]:
    """Judge the steps of the run found for this tree: one reason per step not proven."""
    if record.plan != j.name:
        reason = Reason(
            "evidence.replayed",
            f"run {record.commit[:12]} is evidence for plan {record.plan!r}, not {j.name!r}",
            j.run_fix,
        )
        return [reason], None
    reasons: list[Reason] = []
    optional = optional_steps(j.plan)
    verified: set[str] = set()
    until: float | None = None
    for step in j.plan.steps:
        entry = record.steps.get(step.id)
        if entry is None:
            reasons.append(
                Reason(
                    "evidence.incomplete",
                    f"run {record.commit[:12]} has no entry for step {step.id}",
                    j.run_fix,
                    step=step.id,
                )
            )
            continue
        if not entry.proven:
            problem = _authority(j, record, step.id)
            if problem is None and step.id not in optional:  # else an OR alternative: its
                problem = _unproven(j, record, step.id, entry)  # dependant is judged instead
            if problem is not None:
                reasons.append(problem)
            continue
        source = _executed_by(j, record, step.id, entry)
        if isinstance(source, Reason):
            reasons.append(source)
            continue
        when = source.time
        expiry, expires = _expiry(j, step.id, step.valid_for, when)
        if expiry is not None:
            reasons.append(expiry)
            continue
        if expires is not None:
            until = expires if until is None else min(until, expires)
        verified.add(step.id)
    if record.verdict != Verdict.PASS and not reasons:
        summary = "; ".join(record.reasons[:3])
        kind = Verdict.FAIL if record.verdict == Verdict.FAIL else Verdict.UNKNOWN
        reasons.append(
            Reason(
                f"evidence.{record.verdict.lower()}",
                f"the run for this tree is {record.verdict}: {summary}",
                j.run_fix,
                verdict=kind,
            )
        )
    if not reasons:
        reasons.extend(
            Reason(
                "evidence.uncovered",
                f"{req.priority} requirement {req.id} is not covered by verified evidence",
                j.run_fix,
            )
            for req in uncovered(j.plan, verified)
        )
    return reasons, until


def _executed_by(j: Judging, record: RunRecord, step: str, entry: StepEntry) -> RunRecord | Reason:
    """The run whose evidence proves *step* (*record*, or the run a carried step came from),
    or why it does not: the carried source does not trace, or its signer lacked the authority
    for what its step entry claims."""
    source = record
    if entry.status == StepStatus.CARRIED:
        traced = _trace_carried(j, record, step, entry.carried_from or "")
        if traced is None:
            return Reason(
                "evidence.carried-invalid",
                f"step {step} claims evidence carried from "
                f"{(entry.carried_from or '')[:12]}, which does not hold for this tree",
                j.run_fix,
                step=step,
            )
        source = traced
    return _authority(j, source, step) or source


def _authority(j: Judging, record: RunRecord, step: str) -> Reason | None:
    git = j.repo.git
    return unauthorised_reconcile(
        git, j.state.trust, j.name, record, step
    ) or forced_past_exhaustion(git, j.state, j.name, j.plan, record, step)


def _unproven(j: Judging, record: RunRecord, step: str, entry: StepEntry) -> Reason:
    broken = entry.status == StepStatus.BLOCKED and any(
        output_broken(u.passed, (c.outcome for c in u.checks)) for u in entry.upstream
    )
    verdict = unproven_step(entry.status, upstream_broken=broken)
    detail = f": {entry.reason}" if entry.reason else ""
    hint = (
        f"`git audit show {record.commit[:12]} --step {step}` shows the output; "
        f"fix it, then `{j.run_fix}`"
        if verdict == Verdict.FAIL
        else j.run_fix
    )
    return Reason(
        f"step.{entry.status}", f"step {step} {entry.status}{detail}", hint, step, verdict
    )


def _expiry(
    j: Judging, step: str, valid_for: int | None, when: int
) -> tuple[Reason | None, float | None]:
    """Evidence with ``valid_for`` counts from the signed commit time (see docs/ledger-format):
    a reason when it is dated in the future or has expired, else when it expires."""
    if valid_for is None:
        return None, None
    if when > j.now + CLOCK_SKEW:
        dated = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
        return (
            Reason(
                "evidence.future",
                f"the evidence for step {step} is dated in the future ({dated})",
                "check the clocks of this machine and of the runner; then re-run",
                step=step,
            ),
            None,
        )
    if when + valid_for >= j.now:
        return None, float(when + valid_for)
    expired = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when + valid_for))
    return (
        Reason(
            "evidence.expired",
            f"the evidence for step {step} expired at {expired}",
            f"git audit run {step} --plan {j.name}",
            step=step,
            verdict=Verdict.UNKNOWN,
        ),
        None,
    )


def _trace_carried(j: Judging, record: RunRecord, step: str, source: str) -> RunRecord | None:
    """The run a carried step's evidence came from, if it is an earlier run on the same ledger in
    which that step itself passed, and it proves this tree: the same tree and contract, or the
    same input digest as this tree gives the step now (incremental evidence, versioned proofs)."""
    git, gitdir = j.repo.git, j.repo.gitdir
    try:
        oid = pygit2.Oid(hex=source)
        earlier = index.is_earlier(git, gitdir, record.plan, source, record.commit)
        if earlier is None:  # not both indexed (a pushed run): ask git
            earlier = git.descendant_of(pygit2.Oid(hex=record.commit), oid)
        if not earlier:
            return None
        # the source's own signature: a carried step is only as good as the run it came from
        verify_commit(git, oid, j.state.trust.with_role("runner"))
        origin = read_run(git, oid)
    except (GitAuditError, ValueError, KeyError, pygit2.GitError):
        return None
    entry = origin.steps.get(step)
    if entry is None or entry.status != StepStatus.PASSED:
        return None
    if origin.tree == record.tree and origin.contract == record.contract:
        return origin
    claimed = entry.input_digest
    current = record.steps[step].input_digest
    if claimed and claimed == current and claimed == j.digests().get(step):
        return origin
    return None
