"""`git audit run`: run a sealed plan against the work tree and record the signed evidence.

Refuses before anything runs when the plan is not sealed, or its working copy differs from the
seal ("reseal or revert"), or the signing key is not a trusted runner. The workspace fingerprint
is taken before and after: a run during which the workspace changed is recorded as FAIL with the
changed paths (audit purity).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gitaudit import __version__
from gitaudit.crypto.commits import verify_commit
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.signers import Signer
from gitaudit.errors import GitAuditError, RunError, UsageError
from gitaudit.git.fingerprint import changed_paths, workspace_fingerprint
from gitaudit.git.repo import Repo
from gitaudit.ledger import index, watermark
from gitaudit.ledger.plansref import read_state, sealed_contract
from gitaudit.ledger.records import RUN_FORMAT
from gitaudit.ledger.refs import runs_ref
from gitaudit.ledger.runs import append_run, evidence_files, read_run
from gitaudit.plan.catalog import CheckedPlan, check_worktree
from gitaudit.plan.compare import compare
from gitaudit.plan.digest import contract
from gitaudit.plan.inputs import input_digests
from gitaudit.plan.model import Plan, StepId
from gitaudit.run.authority import require_reconciler
from gitaudit.run.runner import Event, RunOutcome, RunRequest, execute, step_json
from gitaudit.verdict import PROVEN, StepStatus, Verdict, judge_run, output_broken


@dataclass(frozen=True)
class RecordedRun:
    plan: str
    commit: str
    verdict: Verdict
    tree: str
    passed: int
    total: int
    outcome: RunOutcome
    changed_paths: tuple[str, ...]
    doc: Mapping[str, Any]


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def route_receipt(plan: Plan, statuses: Mapping[StepId, StepStatus]) -> dict[str, Any]:
    """Which alternatives the run pursued: every OR clause with its alternatives' outcomes, the
    selection rule, and the chosen (verified) set."""
    clauses = []
    for step in plan.steps:
        for i, clause in enumerate(step.depends_on, start=1):
            if not clause.is_any_of:
                continue
            outcomes = {alt: statuses.get(alt, StepStatus.NOT_RUN) for alt in clause.alternatives}
            selected = next((a for a, s in outcomes.items() if s in PROVEN), None)
            clauses.append(
                {"step": step.id, "clause": i, "alternatives": outcomes, "selected": selected}
            )
    return {
        "rule": "an any_of clause is satisfied by its first verified alternative in declaration "
        "order; alternatives not selected are not required for PASS",
        "clauses": clauses,
        "chosen": sorted(sid for sid, s in statuses.items() if s in PROVEN),
    }


def _summary_md(doc: Mapping[str, Any], plan: Plan) -> str:
    lines = [
        f"# audit({doc['plan']}): {doc['verdict']}",
        "",
        f"- tree `{doc['tree']}`" + (f", HEAD `{doc['head']}`" if doc.get("head") else ""),
        f"- contract `{doc['contract_digest']}` (seal v{doc['seal']['version']})",
        f"- runner {doc['runner']['name']} `{doc['runner']['fingerprint']}`",
        f"- {doc['started_at']} → {doc['finished_at']}",
    ]
    if doc.get("reasons"):
        lines.append("- not PASS because: " + "; ".join(doc["reasons"]))
    if doc["purity"]["changed"]:
        lines.append(
            "- workspace changed during the run: "
            + ", ".join(f"`{p}`" for p in doc["purity"]["changed"][:20])
        )
    lines += [
        "",
        "| step | status | check | exit | expected | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for step in plan.steps:
        entry = doc["steps"][step.id]
        rows = [*entry["checks"], *(c for cs in entry["outputs"].values() for c in cs)]
        status = entry["status"] + (
            f" (from {entry['carried_from'][:12]})" if entry.get("carried_from") else ""
        )
        if not rows:
            lines.append(f"| {step.id} | {status} | {entry['reason'] or '—'} | | | |")
        for i, c in enumerate(rows):
            cell = c["check"].replace("|", "\\|")
            first = f"{step.id} | {status}" if i == 0 else " | "
            exit_code = "" if c["exit_code"] is None else c["exit_code"]
            expected = "" if c["expect_exit"] is None else c["expect_exit"]
            lines.append(
                f"| {first} | `{cell}` {c['outcome']} | {exit_code} | {expected} "
                f"| {c['duration']} |"
            )
    return "\n".join(lines) + "\n"


def _trusted(repo: Repo, commit: str, runners: list[PublicKey]) -> bool:
    try:
        verify_commit(repo.git, commit, runners)
    except GitAuditError:
        return False
    return True


def run_plan(  # noqa: C901, PLR0912, PLR0915 (to split: refusals, carried evidence, the record)
    repo: Repo,
    name: str,
    signer: Signer,
    *,
    targets: Iterable[str] = (),
    jobs: int | None = None,
    force: bool = False,
    fresh: bool = False,
    reconcile: Mapping[StepId, tuple[str, str]] | None = None,
    on_event: Event | None = None,
    checked: CheckedPlan | None = None,
) -> RecordedRun:
    """Run plan *name* (all steps, or *targets*) and record the signed run commit.

    Steps that declare ``inputs`` are carried forward instead of re-run when their input digest
    (see :mod:`gitaudit.plan.inputs`) matches a passing run, unless *fresh* or explicitly targeted.
    *reconcile* settles unknown outcomes of non-idempotent steps instead of running them.
    """
    workdir = repo.require_workdir()
    state = read_state(repo)
    if not state.exists:
        raise RunError(
            "refs/audit/plans does not exist",
            hint="run `git audit trust init` and `git audit plan seal`",
        )
    runner = state.trust.require(signer.public_key, "runner")
    require_reconciler(state.trust, signer.public_key, reconcile or {})
    if checked is None:
        (checked,) = check_worktree(workdir, name)
    plan = checked.require_valid()
    seal = state.seal(name)
    if seal is None or seal.retired:
        raise RunError(
            f"plan {name!r} is not sealed", hint=f"run `git audit plan seal --plan {name}`"
        )
    if checked.digest != seal.contract_digest:
        sealed, _ = sealed_contract(state, name)
        summary = ""
        if sealed is not None and sealed.plan is not None:
            summary = ": " + compare(contract(sealed.plan), contract(plan)).summary()
        raise RunError(
            f"the working copy of plan {name!r} differs from its seal v{seal.version}{summary}",
            hint=f"reseal (`git audit plan seal --plan {name}`) or revert the plan file",
        )
    wanted = [str(t) for t in targets]
    unknown = [t for t in wanted if plan.step(t) is None]
    if unknown:
        raise UsageError(
            f"plan {name!r} has no step {', '.join(unknown)}",
            hint=f"steps: {', '.join(plan.step_ids)}",
        )
    digest = seal.contract_digest
    runners = state.trust.with_role("runner")
    before = workspace_fingerprint(workdir)
    carried: dict[StepId, str] = {}
    if wanted:
        # the newest trusted outcome of each step for this tree decides: a later failure
        # outweighs an earlier pass, and a run without a runner's signature counts for nothing
        decided: set[StepId] = set()
        for prior in index.runs_for_tree(repo.git, repo.gitdir, name, before.tree, digest):
            if not _trusted(repo, prior.commit, runners):
                continue
            record = read_run(repo.git, prior.commit)
            for sid, entry in record.steps.items():
                if sid in decided or entry.status in (StepStatus.NOT_RUN, StepStatus.BLOCKED):
                    continue
                decided.add(sid)
                if entry.proven:
                    carried[sid] = entry.carried_from or record.commit
    for sid, (mode, _note) in (reconcile or {}).items():
        step = plan.step(sid)
        if step is None:
            raise UsageError(f"plan {name!r} has no step {sid}")
        if step.idempotent:
            raise RunError(
                f"step {sid} of plan {name!r} is idempotent: run it again instead of reconciling",
                hint=f"`git audit run {sid} --plan {name}`",
            )
        pending = index.unresolved(repo.git, repo.gitdir, name)
        if sid not in pending:
            raise RunError(
                f"step {sid} of plan {name!r} has no unknown outcome to reconcile",
                hint=f"`git audit run {sid} --plan {name}` runs it",
            )
        where = read_run(repo.git, pending[sid]).tree
        if where != before.tree:
            raise RunError(
                f"the unknown outcome of step {sid} was recorded for tree {where[:12]}, not for "
                f"this work tree ({before.tree[:12]})",
                hint="check out that tree to reconcile the outcome observed there",
            )
        if mode == "readback" and not step.readback:
            raise RunError(
                f"step {sid} declares no readback checks",
                hint="reconcile with --observed pass|fail, or add readback checks and reseal",
            )
    digests = input_digests(repo.git, plan, before.tree)
    incremental: dict[StepId, str] = {}
    if not fresh:
        wanted_digests = {
            s.id: digests[s.id] for s in plan.steps if s.inputs and s.id not in wanted
        }
        sources = index.carry_sources(repo.git, repo.gitdir, name, wanted_digests)
        incremental = {sid: c for sid, c in sources.items() if _trusted(repo, c, runners)}
    attempts = index.failed_attempts(
        repo.git, repo.gitdir, name, digest, state.attempts_reset(name, digest)
    )
    unresolved = index.unresolved(repo.git, repo.gitdir, name)
    missing_tools = [t for t in plan.required_tools if shutil.which(t) is None]
    outcome = execute(
        RunRequest(
            plan=plan,
            workspace=workdir,
            jobs=jobs or os.cpu_count() or 1,
            targets=frozenset(wanted) if wanted else None,
            carried=carried,
            incremental=incremental,
            attempts_used=attempts,
            unresolved=unresolved,
            reconcile=dict(reconcile or {}),
            force=force,
            on_event=on_event,
        )
    )
    after = workspace_fingerprint(workdir)
    changed = (
        tuple(changed_paths(workdir, before.tree, after.tree)) if after.tree != before.tree else ()
    )
    statuses = {sid: o.status for sid, o in outcome.steps.items()}
    broken = [
        sid
        for sid, o in outcome.steps.items()
        if any(output_broken(u.passed, (r.outcome for r in u.results)) for u in o.upstream)
    ]
    verdict, reasons = judge_run(
        plan,
        statuses,
        interrupted=outcome.interrupted,
        impure=bool(changed),
        missing_tools=missing_tools,
        broken_upstream=broken,
    )
    steps_doc = {sid: step_json(o, plan.step(sid)) for sid, o in outcome.steps.items()}  # type: ignore[arg-type]
    for sid, step_doc in steps_doc.items():
        step_doc["input_digest"] = digests[sid]
        if reconcile and sid in reconcile:
            step_doc["reconciled"] = {"mode": reconcile[sid][0], "note": reconcile[sid][1]}
        failed = step_doc["status"] == StepStatus.FAILED
        step_doc["attempts_used"] = attempts.get(sid, 0) + (1 if failed else 0)
    passed = outcome.count(*PROVEN)
    doc: dict[str, Any] = {
        "format": RUN_FORMAT,
        "plan": name,
        "verdict": verdict,
        "reasons": reasons,
        "contract_digest": digest,
        "seal": {"commit": str(state.tip), "version": seal.version},
        "tree": before.tree,
        "head": before.head,
        "started_at": _iso(outcome.started),
        "finished_at": _iso(outcome.finished),
        "runner": {"name": runner.name, "fingerprint": signer.public_key.fingerprint()},
        "tool": {"name": "gitaudit", "version": __version__},
        "targeted": wanted or None,
        "forced": force,
        "jobs": jobs or os.cpu_count() or 1,
        "missing_tools": missing_tools,
        "purity": {"before": before.tree, "after": after.tree, "changed": list(changed)},
        "order": list(outcome.order),
        "route": route_receipt(plan, statuses),
        "steps": steps_doc,
    }
    files = evidence_files(
        doc,
        _summary_md(doc, plan),
        {
            sid: (o.checks, o.outputs, [(u.step, u.output, u.results) for u in o.upstream])
            for sid, o in outcome.steps.items()
        },
    )
    message = (
        f"audit({name}): {verdict} {before.tree[:12]} — {passed}/{len(plan.steps)} steps\n\n"
        + ("\n".join(f"- {r}" for r in reasons) + "\n\n" if reasons else "")
        + f"Audit-Plan: {name}\nAudit-Tree: {before.tree}\n"
        + f"Audit-Contract: {digest}\nAudit-Verdict: {verdict}\n"
    )
    commit = append_run(repo.git, name, files, message, signer)
    # remember our own signed tip, so a rewind right after this run is caught by the next status
    watermark.record(repo.gitdir, {runs_ref(name): str(commit)}, "seen", repo.git)
    index.sync(repo.git, repo.gitdir, name)
    return RecordedRun(
        name, str(commit), verdict, before.tree, passed, len(plan.steps), outcome, changed, doc
    )
