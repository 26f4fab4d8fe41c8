"""`git audit run`: run a sealed plan on the work tree's fingerprint and record the evidence.

Refuses before anything runs when the plan is not sealed, or its working copy differs from the
seal ("reseal or revert"), or the signing key is not a trusted runner. The work tree is
fingerprinted (the tree the evidence names), a private checkout of exactly that tree is brought
up to date (:mod:`gitaudit.run.checkout`) and the checks run there, so edits made to the work
tree meanwhile cannot change what was checked. A run whose steps changed the checkout (or a
declared ignored path, or the work tree for ``workspace: live`` steps) is recorded as FAIL with
the changed paths (audit purity).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pygit2

from gitaudit import __version__
from gitaudit.checks import fence, orphans, process
from gitaudit.checks.environment import Sandbox
from gitaudit.crypto.commits import verify_commit
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.resolve import configured_key_files
from gitaudit.crypto.signers import Signer
from gitaudit.errors import GitAuditError, LedgerError, RunError, UsageError
from gitaudit.frozen import frozen
from gitaudit.git import config_paths, live
from gitaudit.git.fingerprint import Fingerprint, changed_paths, workspace_fingerprint
from gitaudit.git.index_stat import Stamp
from gitaudit.git.repo import Repo
from gitaudit.ledger import chain, index, lookup, watermark
from gitaudit.ledger.plansref import (
    PlansState,
    SealRecord,
    attempt_contracts,
    read_state,
    reconcile_first,
    runners_ever,
    sealed_contract,
)
from gitaudit.ledger.programs import Here
from gitaudit.ledger.records import RUN_FORMAT, RunRecord
from gitaudit.ledger.refs import PLANS_REF, read_ref, runs_ref
from gitaudit.ledger.resets import held_at
from gitaudit.ledger.runs import TipCheck, append_run, evidence_files, read_run, run_of
from gitaudit.ledger.tallies import Tallies
from gitaudit.ledger.trust import TrustedKey
from gitaudit.pathsearch import folders
from gitaudit.plan.catalog import CheckedPlan, check_worktree
from gitaudit.plan.compare import compare
from gitaudit.plan.digest import contract
from gitaudit.plan.inputs import input_digests
from gitaudit.plan.known_valid import KnownValid
from gitaudit.plan.model import Check, Output, Plan, StepId
from gitaudit.run import artifacts, checkout, interrupts
from gitaudit.run.authority import require_reconciler
from gitaudit.run.runner import Event, RunOutcome, RunRequest, execute, step_json
from gitaudit.verdict import PROVEN, StepStatus, Verdict, judge_run, output_broken


@frozen
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
    unkept: str = ""  # the run is recorded, but its seen mark or the lookup cache is not (why)


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
        label = step.label.replace("|", "\\|")
        rows = [*entry["checks"], *(c for cs in entry["outputs"].values() for c in cs)]
        status = entry["status"] + (
            f" (from {entry['carried_from'][:12]})" if entry.get("carried_from") else ""
        )
        if not rows:
            lines.append(f"| {label} | {status} | {entry['reason'] or '—'} | | | |")
        for i, c in enumerate(rows):
            cell = c["check"].replace("|", "\\|")
            first = f"{label} | {status}" if i == 0 else " | "
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


def _signed_record(repo: Repo, commit: str, runners: list[PublicKey]) -> RunRecord | None:
    """The record of run *commit* when a runner signed it; None otherwise."""
    if not _trusted(repo, commit, runners):
        return None
    try:
        return read_run(repo.git, commit)
    except GitAuditError:
        return None


def _carries(record: RunRecord | None, plan: str, step: StepId, digest: str) -> bool:
    """Whether the signed run *record* of *plan* executed *step* with the input digest *digest*
    and it passed. The lookup index (a cache anyone who writes ``.git`` can edit) named the run;
    its record, not the cache, decides, as it does for the gate (``gate/evidence.py``)."""
    entry = record.steps.get(step) if record is not None else None
    return (
        record is not None
        and record.plan == plan
        and record.sound
        and entry is not None
        and entry.status == StepStatus.PASSED
        and entry.input_digest == digest
    )


@frozen
class _Prepared:
    """A run that may go ahead: the verified plans state, the runner, the plan and its seal."""

    state: PlansState
    runner: TrustedKey
    plan: Plan
    seal: SealRecord
    targets: tuple[StepId, ...]
    labels: tuple[str, ...] = ()
    elsewhere: Mapping[StepId, str] = field(default_factory=dict)  # runs_on other labels
    tip: pygit2.Oid | None = None  # the runs ref's tip, checked before anything ran


def run_plan(
    repo: Repo,
    name: str,
    signer: Signer,
    *,
    targets: Iterable[str] = (),
    labels: Iterable[str] = (),
    jobs: int | None = None,
    force: bool = False,
    fresh: bool = False,
    reconcile: Mapping[StepId, tuple[str, str]] | None = None,
    on_event: Event | None = None,
    checked: CheckedPlan | None = None,
    agent: Mapping[str, Any] | None = None,
) -> RecordedRun:
    """Run plan *name* (all steps, or *targets*) and record the signed run commit.

    The checks run in a private checkout of the work tree's fingerprint (:mod:`.checkout`),
    unless the plan or a step declares ``workspace: live``. Steps that declare ``inputs`` are
    carried forward instead of re-run when their input digest (see :mod:`gitaudit.plan.inputs`)
    matches a passing run, unless *fresh*, explicitly targeted, or live. *reconcile* settles unknown
    outcomes of non-idempotent steps instead of running them. With *labels* (which the runner
    key must carry), steps whose ``runs_on`` names none of them are left to other runners.
    *agent* (the agent making the run and its claim, :func:`gitaudit.ledger.agent_ops.run_stamp`)
    is recorded as is.
    """
    workdir = repo.require_workdir()
    prep = _prepare(repo, name, signer, checked, targets, reconcile or {}, tuple(labels))
    with _one_at_a_time(repo, prep.plan):
        return _run_prepared(
            repo, prep, signer, jobs, force, fresh, reconcile, on_event, agent, workdir
        )


@contextmanager
def _one_at_a_time(repo: Repo, plan: Plan) -> Iterator[None]:
    """While a run (or reconcile) of a plan with steps that are not idempotent is under way, no
    other may start in this repository: each reads the unknown outcomes it must settle first
    from the ledger, and a run that has not recorded yet has left none there, so a second run
    would execute the step again while the first still executes it (a deploy twice at once).
    An exclusive ``flock`` from before the ledger is read until the run is recorded (of a file
    in ``.git/`` and of one in the gitaudit home, where the agent cannot delete it), and on
    Linux an abstract socket name; the kernel releases them when the process dies, so no crash
    leaves them held."""
    steps = [str(s.id) for s in plan.steps if not s.idempotent]
    if not steps:
        yield
        return
    from gitaudit.places import run_lock_path, shared_state_dir

    where = os.path.join(shared_state_dir(repo.gitdir), f"not-idempotent-{plan.name}.flock")
    # the one in the gitaudit home is out of the agent's reach: the one in .git/ it can delete
    # while a run holds it, and the next run would lock a new file there
    with (
        _exclusive(run_lock_path(repo.gitdir, plan.name), plan, steps),
        _exclusive(where, plan, steps),
        _bound(repo, plan, steps),
    ):
        yield


@contextmanager
def _bound(repo: Repo, plan: Plan, steps: list[str]) -> Iterator[None]:
    """On Linux, an abstract socket name bound while the block runs: no file to delete or
    rename, and the same whatever ``GITAUDIT_HOME`` the caller sets (a run pointed at a home of
    its own locks another file there); the kernel frees it when the process dies."""
    if not sys.platform.startswith("linux"):
        yield
        return
    import socket

    from gitaudit.places import common_dir, sha256_hex

    key = sha256_hex(f"{os.getuid()}\0{common_dir(repo.gitdir)}\0{plan.name}".encode())
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.bind(f"\0gitaudit/not-idempotent/{key}")
        except OSError:
            raise RunError(
                f"another `git audit run` or `reconcile` of plan {plan.name!r} is under way in "
                f"this repository, and {', '.join(steps)} may not run twice at once "
                "(not idempotent)",
                hint="wait for it to finish, then retry (reconcile first if it ends unknown)",
            ) from None
        yield
    finally:
        sock.close()


@contextmanager
def _exclusive(path: str, plan: Plan, steps: list[str]) -> Iterator[None]:
    """An exclusive ``flock`` of *path* (made if missing) held while the block runs."""
    import fcntl

    folder = os.path.dirname(path)
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise RunError(
            f"cannot open {path} to keep runs of plan {plan.name!r} apart: {exc.strerror}",
            hint=f"remove {path} (gitaudit makes it again) and retry",
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunError(
                f"another `git audit run` or `reconcile` of plan {plan.name!r} is under way in "
                f"this repository, and {', '.join(steps)} may not run twice at once "
                f"(not idempotent; {path} is locked)",
                hint="wait for it to finish, then retry (reconcile first if it ends unknown)",
            ) from None
        yield
    finally:
        os.close(fd)  # releases the lock


def _run_prepared(
    repo: Repo,
    prep: _Prepared,
    signer: Signer,
    jobs: int | None,
    force: bool,
    fresh: bool,
    reconcile: Mapping[StepId, tuple[str, str]] | None,
    on_event: Event | None,
    agent: Mapping[str, Any] | None,
    workdir: Path,
) -> RecordedRun:
    plan = prep.plan
    live_steps = {s.id for s in plan.steps if plan.workspace_of(s) == "live"}
    whole_live = len(live_steps) == len(plan.steps)
    with checkout.acquire(repo.gitdir, workdir) as slot:
        # the checkout is brought up to date (mostly git's work) while the work tree is
        # fingerprinted (git's too: on another core), then while what earlier runs proved is
        # read and the input digests are worked out (Python's); an error in either waits for
        # the checkout before it is raised
        with ThreadPoolExecutor(max_workers=1) as pool, _quick_handover():

            def place(tree: str, head: str | None) -> checkout.Materialised:
                return checkout.materialise(
                    slot,
                    repo.gitdir,
                    workdir,
                    tree,
                    head,
                    declared_filters=plan.filters,
                    ignored_paths=plan.all_ignored_paths(),
                )

            # most runs are of HEAD's tree: its checkout starts before the fingerprint says so
            guess = None if whole_live or reconcile else _head_of(repo)
            guessed = pool.submit(place, *guess) if guess is not None else None
            try:
                before = workspace_fingerprint(workdir)
                _check_reconcile(repo, prep, before.tree, reconcile or {})
                stamps = _live_start(workdir, before.tree) if live_steps else None
            except BaseException:
                if guessed is not None:  # nothing runs: the guess is left clean for the next
                    pool.submit(_leave_unused, guessed, workdir)
                raise
            placing = guessed
            if guessed is not None and guess != (before.tree, before.head):
                placing = pool.submit(_instead, guessed, place, workdir, before)
            elif guessed is None and not whole_live:
                placing = pool.submit(place, before.tree, before.head)
            prior = _prior(repo, prep, before.tree, fresh)
            placed = placing.result() if placing is not None else None
        carried, incremental, wanted = prior.carried, prior.incremental, list(prep.targets)
        if placed is not None and placed.ignored:
            carried = _same_ignored(repo, carried, placed.ignored)
            incremental = _same_ignored(repo, incremental, placed.ignored)
        # roots: where the artifacts are read, resolved before any check runs (a checkout moved
        # and replaced by a link meanwhile, to the gitaudit home say, is not where they are read)
        here, roots = Here((workdir, repo.gitdir)), artifacts.resolved_roots(workdir, slot.tree)
        carried, incremental = _offered(repo, carried, here), _offered(repo, incremental, here)
        if not whole_live:
            carried, incremental, wanted = _producers_run(
                plan, carried, incremental, wanted, _in_tree(repo, before.tree), prep.elsewhere
            )
        sandbox = Sandbox(
            home=slot.home if plan.home == "private" else None,
            tmp=slot.tmp,
            repository=(workdir, repo.gitdir),
            opened=plan.all_ignored_paths(),
        )
        with (
            orphans.adopting(process.running),  # what a check leaves running dies with the run
            fence.for_run(
                slot.root,
                keys=fence.key_files(signer, configured_key_files(repo.git.config, workdir)),
                named=config_paths.for_fence(workdir),
            ) as wall,
        ):
            outcome = execute(
                RunRequest(
                    plan=plan,
                    workspace=workdir if whole_live else slot.tree,
                    sandbox=sandbox,
                    live_workspace=workdir if live_steps else None,
                    jobs=jobs or os.cpu_count() or 1,
                    targets=frozenset(wanted) if wanted else None,
                    elsewhere=prep.elsewhere,
                    carried=carried,
                    incremental=incremental,
                    attempts_used=prior.attempts,
                    unresolved=prior.unresolved,
                    reconcile=dict(reconcile or {}),
                    force=force,
                    on_event=on_event,
                    fence=wall,
                )
            )
        interrupts.hold()  # the checks are done: a Ctrl-C from here on waits for the record
        collected = artifacts.collect(
            plan,
            lambda sid: outcome.steps[sid].attempt is not None,
            lambda step: roots[0] if whole_live or step.id in live_steps else roots[1],
            prep.state.policy.max_artifact_bytes,
        )
        if outcome.checks_run:
            purity, left = _purity(workdir, before.tree, placed, stamps)
            if placed is not None and left is not None:
                checkout.leave_clean(placed, workdir, left)
        else:  # no check started (every step carried): nothing can have changed what they see
            purity = _Purity(before.tree, ())
            if placed is not None:
                checkout.leave_unused(placed, workdir)
    path = sandbox.shared[0]["PATH"]  # the checks' PATH
    missing_tools = [t for t in plan.required_tools if shutil.which(t, path=path) is None]
    with interrupts.held():
        return _record(
            repo,
            prep,
            signer,
            before=before,
            outcome=outcome,
            purity=purity,
            placed=placed,
            live_steps=live_steps,
            digests=prior.digests,
            attempts=prior.attempts,
            reconcile=reconcile or {},
            wanted=list(prep.targets),
            force=force,
            jobs=jobs,
            missing_tools=missing_tools,
            collected=collected,
            path=folders(path),
            agent=agent,
        )


def _head_of(repo: Repo) -> tuple[str, str] | None:
    """(tree, commit) of HEAD, as libgit2 reads them: a guess at what the fingerprint will
    say, which decides (:func:`run_plan`); None without a commit."""
    try:
        commit = repo.git.head.peel(pygit2.Commit)
    except (pygit2.GitError, KeyError, ValueError):
        return None
    return str(commit.tree_id), str(commit.id)


def _instead(
    guessed: Future[checkout.Materialised],
    place: Callable[[str, str | None], checkout.Materialised],
    workdir: Path,
    before: Fingerprint,
) -> checkout.Materialised:
    """The work tree is not HEAD's tree: the checkout placed at HEAD's (no check has run in
    it) is kept clean and moved on to the work tree's by a two-way merge, or, where the guess
    could not be placed, brought there as it would have been without it."""
    _leave_unused(guessed, workdir)
    return place(before.tree, before.head)


def _leave_unused(guessed: Future[checkout.Materialised], workdir: Path) -> None:
    """A checkout placed at HEAD's tree that no check will run in is left clean (the next
    update is a two-way merge); one that could not be placed is left as it is."""
    with contextlib.suppress(GitAuditError):
        checkout.leave_unused(guessed.result(), workdir)


@contextmanager
def _quick_handover() -> Iterator[None]:
    """Let threads take turns every half millisecond instead of every five: a thread that
    mostly waits for git gets the interpreter back as soon as git answers, instead of queueing
    behind Python work in the other thread (measured on 50,000 files: the checkout's update
    took 0.12 s instead of 0.2 s beside the input digests)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def require_runner(repo: Repo, signer: Signer) -> tuple[PlansState, TrustedKey]:
    """The verified plans state and the runner *signer* is in it, or the refusal: asked
    before anything is signed for a run (`run --snapshot` signs its snapshot first)."""
    state = read_state(repo)
    if not state.exists:
        raise RunError(
            "refs/audit/plans does not exist",
            hint="run `git audit trust init` and `git audit plan seal`",
        )
    return state, state.trust.require(signer.public_key, "runner")


def _prepare(
    repo: Repo,
    name: str,
    signer: Signer,
    checked: CheckedPlan | None,
    targets: Iterable[str],
    reconcile: Mapping[StepId, tuple[str, str]],
    labels: tuple[str, ...] = (),
) -> _Prepared:
    """Every refusal that comes before anything runs: no plans ref, a key that is no runner
    (or lacks a label it would act as), an invalid or unsealed plan, a working copy that
    differs from its seal, unknown steps."""
    state, runner = require_runner(repo, signer)
    tip = _require_forward(repo, name, state)
    missing = [label for label in labels if label not in runner.labels]
    if missing:
        raise RunError(
            f"runner {runner.name} does not carry the label(s) {', '.join(missing)} in the "
            "trust set",
            hint=f"a sealer labels the key: `git audit trust add KEY --role runner --name "
            f"{runner.name} --label {missing[0]}`",
        )
    require_reconciler(state.trust, signer.public_key, reconcile)
    if checked is None:
        (checked,) = check_worktree(repo.require_workdir(), name)
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
    wanted = tuple(str(t) for t in targets)
    unknown = [t for t in wanted if plan.step(t) is None]
    if unknown:
        raise UsageError(
            f"plan {name!r} has no step {', '.join(unknown)}",
            hint=f"steps: {', '.join(plan.step_ids)}",
        )
    elsewhere = {
        s.id: f"runs on {' or '.join(s.runs_on)} runners"
        for s in plan.steps
        if labels and s.runs_on and not set(s.runs_on) & set(labels) and s.id not in wanted
    }
    return _Prepared(state, runner, plan, seal, wanted, labels, elsewhere, tip)


def _require_forward(repo: Repo, name: str, state: PlansState) -> pygit2.Oid | None:
    """The runs ledger no further back than it was seen, and its tip a run a runner signed.

    A step's failed attempts and unknown outcome are counted on it, so one rewound or deleted
    since (which would forget them, and whose run would then be marked seen over the rewind)
    is refused before anything runs. And the new run is signed on top of the tip: on a commit
    no runner signed (the agent writes refs and objects), its signature would take a forged
    chain into the ledger, one ``git audit verify`` and the server then refuse for good."""
    ref = runs_ref(name)
    with watermark.view(repo.gitdir) as marks:
        tip = read_ref(repo.git, ref)
    watermark.check_forward(repo.git, repo.gitdir, ref, tip, marks)
    if tip is not None:
        _require_signed_tip(repo, ref, tip, state)
    return tip


def _tip_check(repo: Repo, ref: str, start: pygit2.Oid | None, state: PlansState) -> TipCheck:
    """What the run requires of the tip it signs on, read again when it appends (the checks ran
    meanwhile, and anything can move a ref): the tip checked before they ran (*start*), or
    runs a runner signed on top of it (a concurrent run). The ref moved back or sideways, or
    onto a commit no runner signed, is refused: the run's signature would drop a run from the
    ledger's chain, or take a forgery into it."""

    def check(tip: pygit2.Oid | None) -> None:
        if tip == start:
            return
        reached = False
        if tip is not None:
            try:
                commits, reached = chain.segment(repo.git, tip, start, what=ref)
            except LedgerError:
                commits = []
        if not reached:
            raise LedgerError(
                f"{ref} moved from {str(start)[:12] if start else 'nothing'} to "
                f"{str(tip)[:12] if tip else 'nothing'} while the checks ran, not onto it; "
                "nothing was recorded",
                hint=f"move {ref} back (`git reflog show {ref}`; `git audit verify` names "
                "every problem), then run again",
            )
        for commit in commits:
            _require_signed_tip(repo, ref, commit.id, state)

    return check


def _require_signed_tip(repo: Repo, ref: str, tip: pygit2.Oid, state: PlansState) -> None:
    """*tip*, on which the new run will be signed, is a run a runner signed: a trusted runner
    now, or one of any version of the plans ref (retired since)."""
    try:
        verify_commit(repo.git, tip, state.trust.with_role("runner"))
        return
    except GitAuditError as exc:
        why = exc.message
    plans = read_ref(repo.git, PLANS_REF)  # a runner retired since it signed the tip
    if _trusted(repo, str(tip), runners_ever(repo.git, plans)):
        return
    raise LedgerError(
        f"{ref} points at {str(tip)[:12]}, which no runner signed ({why}); nothing was run",
        hint=f"move {ref} back to its last run (`git reflog show {ref}`; `git audit verify` "
        "names every problem), then run again",
    )


def _check_reconcile(
    repo: Repo, prep: _Prepared, tree: str, reconcile: Mapping[StepId, tuple[str, str]]
) -> None:
    """An unknown outcome may be settled only for a step that has one and may not simply run
    again (:func:`reconcile_first`), on the tree it was recorded for, and by readback only when
    the step declares readback checks."""
    name, plan = prep.plan.name, prep.plan
    settle_first = reconcile_first(repo.git, prep.state, name) if reconcile else frozenset()
    for sid, (mode, _note) in reconcile.items():
        step = plan.step(sid)
        if step is None:
            raise UsageError(f"plan {name!r} has no step {sid}")
        if sid not in settle_first:
            raise RunError(
                f"step {sid} of plan {name!r} is idempotent: run it again instead of reconciling",
                hint=f"`git audit run {sid} --plan {name}`",
            )
        pending = open_outcomes(repo, index.tallies(repo.git, repo.gitdir, name), settle_first)
        if sid not in pending:
            raise RunError(
                f"step {sid} of plan {name!r} has no unknown outcome to reconcile",
                hint=f"`git audit run {sid} --plan {name}` runs it",
            )
        where = _unknown_since(repo, name, pending[sid], sid).tree
        if where != tree:
            raise RunError(
                f"the unknown outcome of step {sid} was recorded for tree {where[:12]}, not for "
                f"this work tree ({tree[:12]})",
                hint="check out that tree to reconcile the outcome observed there",
            )
        if mode == "readback" and not step.readback:
            raise RunError(
                f"step {sid} declares no readback checks",
                hint="reconcile with --observed pass|fail, or add readback checks and reseal",
            )


def _unknown_since(repo: Repo, name: str, newest: str, sid: StepId) -> RunRecord:
    """The run that left *sid*'s outcome unknown: *newest* (the newest run whose entry for it
    is unknown) or, when that run only reported the outcome still unknown (waiting for a
    reconcile, it did not execute the step: no attempt, no reconciliation, no check), the
    newest run before it that executed or reconciled the step. A run on another tree reports
    it too, and must not move the outcome there."""
    first = read_run(repo.git, newest)
    for commit in chain.walk(repo.git, pygit2.Oid(hex=newest), what=runs_ref(name)):
        record = first if str(commit.id) == newest else run_of(repo.git, commit, commit.tree)
        entry = record.steps.get(sid)
        if entry is not None and (
            entry.attempt is not None or entry.reconciled is not None or entry.checks
        ):
            return record
    return first


@frozen
class _Prior:
    """What the ledger already says for this run: evidence to carry for the targeted steps'
    siblings (step -> run) and for unchanged inputs, attempts used, unknown outcomes, and the
    steps' input digests for the tree."""

    carried: dict[StepId, str]
    incremental: dict[StepId, str]
    attempts: dict[StepId, int]
    unresolved: dict[StepId, str]  # unknown outcomes to settle first (:func:`reconcile_first`)
    digests: dict[StepId, str]


def _prior(repo: Repo, prep: _Prepared, tree: str, fresh: bool) -> _Prior:
    name, plan, digest = prep.plan.name, prep.plan, prep.seal.contract_digest
    runners = prep.state.trust.with_role("runner")
    sources = _carry_sources(prep)
    carried: dict[StepId, str] = {}
    if prep.targets or prep.elsewhere:
        carried = _carried_for_tree(repo, name, tree, digest, runners, sources)
    digests = input_digests(repo.git, plan, tree)
    counted = index.tallies(repo.git, repo.gitdir, name)
    held = held_at(repo.git, read_ref(repo.git, runs_ref(name)))  # resets of this ledger's runs
    incremental: dict[StepId, str] = {}
    if not fresh:
        incremental = _unchanged_inputs(repo, prep, digests, counted, sources)
    now = time.time()
    # the sealed copy is the plan file this run checked: its schema check is skipped where the
    # file's was (a mark under the local key), and the schema's validator is not loaded here
    known = KnownValid(str(repo.gitdir), str(repo.require_workdir()))
    settle_first = reconcile_first(repo.git, prep.state, name, known=known)
    return _Prior(
        _unexpired(repo, plan, carried, now),
        _unexpired(repo, plan, incremental, now),
        counted.failures_since(
            {
                c: prep.state.attempts_reset(name, c, held)
                for c in attempt_contracts(repo.git, prep.state, name)
            }
        ),
        open_outcomes(repo, counted, settle_first),
        digests,
    )


def open_outcomes(repo: Repo, counted: Tallies, settle_first: frozenset[str]) -> dict[StepId, str]:
    """step -> the run whose outcome of it is open, for the steps to reconcile before they
    run again (*settle_first*): unknown or interrupted, or settled by a reconciliation made
    here whose checks' PATH or programs this PATH does not offer (a readback under another
    PATH, which the gate refuses as ``evidence.program-elsewhere``: it settles nothing, and
    the step is not executed again on its word)."""
    found = {sid: run for sid, run in counted.unsettled().items() if sid in settle_first}
    here = Here((repo.require_workdir(), repo.gitdir))
    for sid in sorted(settle_first - set(found)):
        newest = counted.recent.get(sid)
        if not newest:
            continue
        run = newest[0][2]
        try:
            record = read_run(repo.git, run)
        except GitAuditError:
            continue  # a run it cannot read is judged (and refused) by the gate
        entry = record.steps.get(sid)
        if entry is not None and entry.reconciled is not None and here.binds(record, sid):
            found[sid] = run
    return found


def _same_ignored(
    repo: Repo, found: Mapping[StepId, str], ignored: Sequence[checkout.IgnoredPath]
) -> dict[StepId, str]:
    """*found* (step -> the run whose pass would be carried: the run that executed the step)
    less the steps whose executing run listed a declared ignored path otherwise than it is
    now: what a check read there (a virtual environment, say) is not in the tree nor in the
    input digest, so a pass carried across a change there is evidence for other bytes."""
    now = {i.path: i.digest for i in ignored}
    listed: dict[str, Mapping[str, str]] = {}
    kept: dict[StepId, str] = {}
    for sid, source in found.items():
        if source not in listed:
            try:
                listed[source] = read_run(repo.git, source).ignored_paths
            except GitAuditError:
                listed[source] = {}
        if all(listed[source].get(path) == digest for path, digest in now.items()):
            kept[sid] = source
    return kept


def _offered(repo: Repo, found: Mapping[StepId, str], here: Here) -> dict[StepId, str]:
    """*found* (step -> the run whose pass would be carried: the run that executed the step)
    less the steps whose executing run was made here and had its checks start a program this
    PATH does not offer from where they found it (:mod:`gitaudit.ledger.programs`): carried on,
    that pass is evidence for other programs, which the gate refuses; the step runs again."""
    records: dict[str, RunRecord | None] = {}
    kept: dict[StepId, str] = {}
    for sid, source in found.items():
        if source not in records:
            try:
                records[source] = read_run(repo.git, source)
            except GitAuditError:
                records[source] = None
        record = records[source]
        if record is not None and here.binds(record, sid) is not None:
            continue
        kept[sid] = source
    return kept


def _unexpired(
    repo: Repo, plan: Plan, found: Mapping[StepId, str], now: float
) -> dict[StepId, str]:
    """*found* (step -> the run whose pass would be carried: the run that executed the step)
    less the steps with ``valid_for`` whose execution there is older than that: the gate
    counts a step's evidence from when the run that executed it began (its signed
    ``started_at``, :attr:`RunRecord.began`), so such a pass
    carried on is expired evidence (UNKNOWN), and the step is executed again instead."""
    kept: dict[StepId, str] = {}
    for sid, source in found.items():
        step = plan.step(sid)
        if step is not None and step.valid_for is not None:
            try:
                executed = read_run(repo.git, source).began
            except GitAuditError:
                continue
            if executed + step.valid_for < now:
                continue
        kept[sid] = source
    return kept


def _carry_sources(prep: _Prepared) -> list[PublicKey]:
    """Whose runs this run may carry passes from: any trusted runner's, unless an evidence rule
    of the policy admits this runner (``refs/heads/main=ci``); then only the runners every
    such rule admits too, and only its own runs when such a rule asks several runners to agree
    (``ci,ci-mac:2``: a pass carried from another's run is that runner's word, no agreement). A
    ref with a rule is judged from its admitted runners' runs alone, so a pass carried from
    another runner's would leave the ref without evidence, and the run would have to be made
    again with ``--fresh``."""
    trust, rules = prep.state.trust, prep.state.policy.evidence
    mine = [rule for rule in rules if rule.admits(prep.runner)]
    if any(rule.min > 1 for rule in mine):
        return [prep.runner.key]
    return [k.key for k in trust.keys if k.may("runner") and all(rule.admits(k) for rule in mine)]


def _carried_for_tree(
    repo: Repo,
    name: str,
    tree: str,
    contract: str,
    runners: list[PublicKey],
    sources: list[PublicKey],
) -> dict[StepId, str]:
    """step -> the run whose pass a targeted run carries for *tree*. The newest trusted outcome
    of each step for this tree decides: a later failure outweighs an earlier pass, a pass in a
    run that does not count as a whole (one that changed its workspace, say) is none, nor one
    in a run of a runner outside *sources* (:func:`_carry_sources`), and a run without a
    runner's signature counts for nothing. The lookup cache lists the runs, and anyone can
    file a row there under any tree: a run whose signed record is for another tree or
    contract is none of this tree's runs."""
    carried: dict[StepId, str] = {}
    decided: set[StepId] = set()
    for prior in index.runs_for_tree(repo.git, repo.gitdir, name, tree, contract):
        if not _trusted(repo, prior.commit, runners):
            continue
        record = read_run(repo.git, prior.commit)
        if (record.plan, record.tree, record.contract) != (name, tree, contract):
            continue
        source: bool | None = None  # signed by one of *sources*: checked once, when needed
        for sid, entry in record.steps.items():
            if sid in decided or entry.status in (StepStatus.NOT_RUN, StepStatus.BLOCKED):
                continue
            decided.add(sid)
            if entry.proven and record.sound:
                if source is None:
                    source = sources == runners or _trusted(repo, prior.commit, sources)
                if source:
                    carried[sid] = entry.carried_from or record.commit
    return _still_newest(repo, name, tree, contract, carried, runners)


def _unchanged_inputs(
    repo: Repo,
    prep: _Prepared,
    digests: Mapping[StepId, str],
    counted: Tallies,
    runners: list[PublicKey],
) -> dict[StepId, str]:
    """step -> the run whose pass this run carries because the step's inputs are unchanged:
    its newest execution with these inputs, as the tallies of the signed chain have it, passed
    there, in a run a runner signed. A ``workspace: live`` step is never carried so: it
    observes the live work tree (an effect outside the tree, ignored files), which the input
    digest does not cover, so its pass is evidence for what was there then. Nor is a step that
    is not idempotent, unless that execution is its newest: its effect lives outside the tree,
    and a later execution with other inputs (one whose outcome is unknown, or a pass) changed
    it since, so the pass says nothing of what is in effect now (and carrying it would step
    round an unknown outcome that must be reconciled first)."""
    records: dict[str, RunRecord | None] = {}  # most steps carry from the same run
    found: dict[StepId, str] = {}
    plan = prep.plan
    for step in plan.steps:
        if not step.inputs or step.id in prep.targets or plan.workspace_of(step) == "live":
            continue
        newest = counted.newest_with(step.id, digests[step.id])
        if newest is None or newest[0] != "passed":
            continue  # failed since, or not known: execute it
        if not step.idempotent and counted.recent.get(step.id, [None])[0] != newest:
            continue  # ran since with other inputs: what is in effect is that execution's
        source = newest[2]
        if source not in records:
            records[source] = _signed_record(repo, source, runners)
        if _carries(records[source], prep.plan.name, step.id, digests[step.id]):
            found[step.id] = source
    return found


def _still_newest(
    repo: Repo,
    name: str,
    tree: str,
    contract: str,
    carried: dict[StepId, str],
    runners: list[PublicKey],
) -> dict[StepId, str]:
    """*carried* (step -> the run whose pass it carries) less the steps whose newest execution
    in a trusted run for the tree did not pass, read from the signed chain in one walk: the
    lookup cache listed the runs, and a row deleted there hides one. The gate applies the same
    rule to the carry."""
    try:
        newest = lookup.newest_executions(
            repo.git,
            repo.gitdir,
            read_ref(repo.git, runs_ref(name)),
            tree,
            contract,
            runners,
            carried,
        )
    except (GitAuditError, ValueError):
        return {}
    return {
        sid: source
        for sid, source in carried.items()
        if newest.get(sid, (StepStatus.PASSED, ""))[0] == StepStatus.PASSED
    }


def _in_tree(repo: Repo, tree: str) -> Callable[[Output], bool]:
    """Whether an output holds from the tree alone: every check of it names a file (or, with
    ``kind: dir``, a directory) that the tree records."""
    root = repo.git[pygit2.Oid(hex=tree)]
    assert isinstance(root, pygit2.Tree)

    def recorded(check: Check) -> bool:
        if check.type not in ("file_exists", "regex") or not check.path:
            return False
        try:
            entry = root[check.path.strip("/")]
        except (KeyError, ValueError):
            return False
        return (entry.type_str == "tree") == (check.type == "file_exists" and check.kind == "dir")

    return lambda output: bool(output.checks) and all(recorded(c) for c in output.checks)


def _producers_run(
    plan: Plan,
    carried: dict[StepId, str],
    incremental: dict[StepId, str],
    wanted: list[StepId],
    in_tree: Callable[[Output], bool],
    elsewhere: Collection[StepId] = (),
) -> tuple[dict[StepId, str], dict[StepId, str], list[StepId]]:
    """Every run starts from the tree alone, so an output a step relies on
    (``requires_outputs``) exists only if the tree records it or its producer runs too: such a
    producer of a step that executes is executed (and targeted), not carried, transitively. A
    step carried for unchanged inputs executes after all when a prerequisite of it executes
    (:func:`gitaudit.run.runner.execute`), unless the run leaves it to others (not targeted,
    or *elsewhere*): its producers then execute too, or it would find their outputs missing."""
    carried, incremental, wanted = dict(carried), dict(incremental), list(wanted)
    known: dict[StepId, bool] = {}  # executes(), until the sets it reads change

    def executes(sid: StepId) -> bool:
        if sid not in known:  # each step once: a walk of every path is exponential in a DAG
            known[sid] = _executes(sid)
        return known[sid]

    def _executes(sid: StepId) -> bool:
        if sid in incremental:
            step = plan.step(sid)
            if step is None or sid in elsewhere or (wanted and sid not in wanted):
                return False
            return any(d not in elsewhere and executes(d) for d in step.dependency_ids())
        return sid in wanted if wanted else sid not in carried

    changed = True
    while changed:
        changed = False
        for step in plan.steps:
            if not executes(step.id):
                continue
            for ref in step.requires_outputs:
                producer = plan.step(ref.step)
                output = producer.output(ref.name) if producer else None
                if executes(ref.step) or output is None or in_tree(output):
                    continue
                carried.pop(ref.step, None)
                incremental.pop(ref.step, None)
                if wanted and ref.step not in wanted:
                    wanted.append(ref.step)
                known.clear()
                changed = True
    return carried, incremental, wanted


@frozen
class _Purity:
    after: str
    changed: tuple[str, ...]


def _live_start(workdir: Path, tree: str) -> dict[str, Stamp]:
    """Before a live step runs: its checks read the work tree's submodules, which must hold the
    commits *tree* records (:func:`gitaudit.git.live.unfaithful_submodules`); the stamps of the
    tree's files, which the purity check compares (:func:`gitaudit.git.live.tracked_stamps`)."""
    unfaithful = live.unfaithful_submodules(workdir, tree)
    if unfaithful:
        raise RunError(
            f"a `workspace: live` step would read the submodule {unfaithful[0]!r}, whose work "
            "tree is not the commit the tree records (a file changed, staged or added there)",
            hint=f"commit the change in {unfaithful[0]!r} and then in the work tree, or undo it "
            f"(`git -C {unfaithful[0]} stash -u`)",
        )
    return live.tracked_stamps(workdir, tree)


def _purity(
    workdir: Path, tree: str, placed: checkout.Materialised | None, stamps: dict[str, Stamp] | None
) -> tuple[_Purity, checkout.Purity | None]:
    """What the steps changed: in the checkout (tracked files, and files that are not ignored),
    in the declared ignored paths, and in the live work tree when a step ran there (*stamps*,
    taken before the checks: a file the tree holds, written and put back, what it held in
    between; a submodule's files)."""
    after = tree
    changed: list[str] = []
    left = None
    if placed is not None:
        left = checkout.changed(placed)
        after = left.after
        changed += left.changed
        for ignored in placed.ignored:
            if not checkout.ignored_unchanged(workdir, ignored):
                changed.append(f"{ignored.path} (declared ignored path)")
    if stamps is not None:
        live_after = workspace_fingerprint(workdir).tree
        differ = changed_paths(workdir, tree, live_after) if live_after != tree else []
        changed += differ
        if live_after != tree:
            after = live_after if placed is None else after
        moved = [p for p in live.unfaithful_submodules(workdir, tree) if p not in differ]
        changed += [f"{p} (submodule changed)" for p in moved]
        named = (*differ, *moved)  # a changed file, or one in a submodule named as changed
        now = live.tracked_stamps(workdir, tree)
        changed += [
            f"{p} (written during the run, then put back)"
            for p, was in sorted(stamps.items())
            if now.get(p, was) != was and not any(p == n or p.startswith(n + "/") for n in named)
        ]
    return _Purity(after, tuple(dict.fromkeys(changed))), left


def _record(
    repo: Repo,
    prep: _Prepared,
    signer: Signer,
    *,
    before: Fingerprint,
    outcome: RunOutcome,
    purity: _Purity,
    placed: checkout.Materialised | None,
    live_steps: set[StepId],
    digests: Mapping[StepId, str],
    attempts: Mapping[StepId, int],
    reconcile: Mapping[StepId, tuple[str, str]],
    wanted: list[StepId],
    force: bool,
    jobs: int | None,
    missing_tools: list[str],
    collected: Mapping[StepId, tuple[artifacts.Artifact, ...]],
    path: list[str],
    agent: Mapping[str, Any] | None = None,
) -> RecordedRun:
    """Judge the run, write its evidence and sign it onto the ledger."""
    plan, name, digest = prep.plan, prep.plan.name, prep.seal.contract_digest
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
        impure=bool(purity.changed),
        missing_tools=missing_tools,
        broken_upstream=broken,
    )
    steps_doc = {sid: step_json(o, plan.step(sid)) for sid, o in outcome.steps.items()}  # type: ignore[arg-type]
    for sid, step_doc in steps_doc.items():
        step_doc["input_digest"] = digests[sid]
        if sid in reconcile:
            step_doc["reconciled"] = {"mode": reconcile[sid][0], "note": reconcile[sid][1]}
        if sid in collected:
            step_doc["artifacts"] = [a.to_json() for a in collected[sid]]
        failed = step_doc["status"] == StepStatus.FAILED
        step_doc["attempts_used"] = attempts.get(sid, 0) + (1 if failed else 0)
        if placed is not None:
            step_doc["workspace"] = "live" if sid in live_steps else "checkout"
        else:
            step_doc["workspace"] = "live"
    passed = outcome.count(*PROVEN)
    workspace: dict[str, Any] = placed.to_json() if placed is not None else {"mode": "live"}
    if placed is not None and live_steps:
        workspace["live_steps"] = sorted(live_steps)
    doc: dict[str, Any] = {
        "format": RUN_FORMAT,
        "plan": name,
        "verdict": verdict,
        "reasons": reasons,
        "contract_digest": digest,
        "seal": {"commit": str(prep.state.tip), "version": prep.seal.version},
        "tree": before.tree,
        "head": before.head,
        "started_at": _iso(outcome.started),
        "finished_at": _iso(outcome.finished),
        "runner": {
            "name": prep.runner.name,
            "fingerprint": signer.public_key.fingerprint(),
            **({"labels": list(prep.labels)} if prep.labels else {}),
        },
        "tool": {"name": "gitaudit", "version": __version__},
        "targeted": wanted or None,
        "forced": force,
        "jobs": jobs or os.cpu_count() or 1,
        "missing_tools": missing_tools,
        "purity": {"before": before.tree, "after": purity.after, "changed": list(purity.changed)},
        "workspace": workspace,
        "environment": {
            "home": plan.home,
            "pass_env": list(plan.pass_env),
            "python": plan.python,
            "path": path,
        },
        "order": list(outcome.order),
        "route": route_receipt(plan, statuses),
        "steps": steps_doc,
    }
    if agent is not None:  # added in 0.2 (agents side by side, docs/agents.md)
        doc["agent"] = dict(agent)
    files = evidence_files(
        doc,
        _summary_md(doc, plan),
        {
            sid: (o.checks, o.outputs, [(u.step, u.output, u.results) for u in o.upstream])
            for sid, o in outcome.steps.items()
        },
    )
    files.update(artifacts.tree_files(collected))
    message = (
        f"audit({name}): {verdict} {before.tree[:12]} — {passed}/{len(plan.steps)} steps\n\n"
        + ("\n".join(f"- {r}" for r in reasons) + "\n\n" if reasons else "")
        + f"Audit-Plan: {name}\nAudit-Tree: {before.tree}\n"
        + f"Audit-Contract: {digest}\nAudit-Verdict: {verdict}\n"
    )
    check = _tip_check(repo, runs_ref(name), prep.tip, prep.state)
    commit = append_run(repo.git, name, files, message, signer, check_tip=check)
    # the run is on the ledger from here on: what follows is bookkeeping, and a full disk or a
    # broken cache there must not be reported as a run that recorded nothing (with exit 1)
    unkept = ""
    try:
        # remember our own signed tip, so a rewind right after this run is caught by the next
        # status
        watermark.record(repo.gitdir, {runs_ref(name): str(commit)}, "seen", repo.git)
        index.sync(repo.git, repo.gitdir, name)
    except (OSError, sqlite3.Error) as exc:
        unkept = str(exc) or type(exc).__name__
    return RecordedRun(
        name,
        str(commit),
        verdict,
        before.tree,
        passed,
        len(plan.steps),
        outcome,
        purity.changed,
        doc,
        unkept,
    )
