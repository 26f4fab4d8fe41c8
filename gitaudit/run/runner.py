"""Executing a sealed plan: dependency order, parallel steps, attempts, and audit purity.

For each step, in this order (seed 000): every required upstream output contract is re-executed
right before the step; then the step's own checks; then each of its declared outputs is checked
independently. The step passes only when all of them pass. A step whose prerequisite failed or is
missing is ``blocked`` (no attempt used); a step with ``max_attempts`` failures recorded for this
contract is ``exhausted`` unless forced; a timeout makes the outcome ``unknown``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gitaudit.checks.environment import Sandbox
from gitaudit.checks.execute import CheckResult, run_check
from gitaudit.checks.fence import Fence
from gitaudit.frozen import frozen
from gitaudit.plan.graph import topological_order
from gitaudit.plan.model import Check, Plan, Step, StepId
from gitaudit.run import interrupts
from gitaudit.verdict import PROVEN, StepStatus


@frozen
class UpstreamCheck:
    step: StepId
    output: str
    results: tuple[CheckResult, ...]

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)


@frozen
class StepOutcome:
    step: StepId
    status: StepStatus
    reason: str = ""
    attempt: int | None = None  # which attempt this was (1-based), for executed steps
    duration: float = 0.0
    checks: tuple[CheckResult, ...] = ()
    outputs: Mapping[str, tuple[CheckResult, ...]] = field(default_factory=dict)
    upstream: tuple[UpstreamCheck, ...] = ()
    carried_from: str | None = None  # the run commit whose evidence was carried forward


@frozen
class RunOutcome:
    steps: Mapping[StepId, StepOutcome]
    order: tuple[StepId, ...]
    interrupted: bool
    started: float
    finished: float
    checks_run: int = 0  # checks started, of any kind (none: nothing can have changed)

    def count(self, *statuses: str) -> int:
        return sum(1 for s in self.steps.values() if s.status in statuses)


Event = Callable[[str, StepId, StepOutcome | None], None]  # ("start"|"done", step, outcome)


@frozen
class Where:
    """Where and how one step's checks run: the directory (the private checkout, or the live
    work tree for a ``workspace: live`` step), their sandbox (environment, HOME, TMPDIR) and the
    Python of pytest checks, and the fence their processes run in."""

    workspace: Path
    sandbox: Sandbox
    python: str = "python3"
    fence: Fence | None = None


@dataclass
class RunRequest:
    plan: Plan
    workspace: Path  # where checks run: the private checkout (or the work tree, in a live run)
    sandbox: Sandbox
    live_workspace: Path | None = None  # the work tree, for steps declared workspace: live
    jobs: int = os.cpu_count() or 1
    targets: frozenset[StepId] | None = None  # None: every step
    # steps left to runners with other labels (`runs_on`): step -> why
    elsewhere: Mapping[StepId, str] = field(default_factory=dict)
    carried: Mapping[StepId, str] = field(default_factory=dict)  # verified evidence: step -> run
    # steps whose declared inputs and dependencies are unchanged since a passing run: step -> run
    incremental: Mapping[StepId, str] = field(default_factory=dict)
    attempts_used: Mapping[StepId, int] = field(default_factory=dict)
    # steps whose last outcome is unknown and that may not simply run again (not idempotent
    # under the sealed contract or one a planner's reseals led from): step -> the run that left
    # it unknown
    unresolved: Mapping[StepId, str] = field(default_factory=dict)
    # reconciliation of unknown outcomes: step -> ("pass" | "fail" | "readback", note)
    reconcile: Mapping[StepId, tuple[str, str]] = field(default_factory=dict)
    force: bool = False
    on_event: Event | None = None
    fence: Fence | None = None  # what checks may not open (None: no fence)
    # one sandbox per pass_env: each works out the environment its checks share once
    _sandboxes: dict[tuple[str, ...], Sandbox] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def where(self, step: Step) -> Where:
        """Where *step*'s checks run (see :class:`Where`)."""
        live = self.plan.workspace_of(step) == "live" and self.live_workspace is not None
        pass_env = self.plan.pass_env_of(step)
        sandbox = self._sandboxes.get(pass_env)
        if sandbox is None:
            sandbox = self._sandboxes[pass_env] = replace(self.sandbox, pass_env=pass_env)
        workspace = self.live_workspace if live and self.live_workspace else self.workspace
        return Where(workspace, sandbox, self.plan.python, self.fence)


PASSED = StepStatus.PASSED  # a step executed (not carried) and passed in this run

WAKE_SECONDS = 0.25
"""How long the main thread waits for a step at most before it looks again. The kernel hands a
signal sent to the process to any thread, and Python runs the handler only when the main thread
runs: a Ctrl-C delivered to a worker blocked in ``select()`` went unseen, under load, until the
check ended (the interrupt test hung for its check's 600 seconds). Blocking the signals in the
workers instead would pass the blocked mask on to every check they start."""


class _Supervisor:
    """Tracks the process groups of running checks, so an interrupt can kill them all."""

    def __init__(self) -> None:
        self.groups: set[int] = set()
        self.lock = threading.Lock()
        self.cancelled = threading.Event()
        self.checks = 0  # checks started

    def started(self, pid: int) -> None:
        with self.lock:
            self.groups.add(pid)
        if self.cancelled.is_set():
            self.kill_all()

    def kill_all(self) -> None:
        self.cancelled.set()
        with self.lock:
            groups = list(self.groups)
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)


def _clause_state(clause_alts: tuple[StepId, ...], status: Mapping[StepId, str]) -> str:
    """ok (an alternative verified), wait (one may still succeed) or dead (none can)."""
    states = [status.get(a, StepStatus.NOT_RUN) for a in clause_alts]
    if any(s in PROVEN for s in states):
        return "ok"
    if any(s in ("pending", "running") for s in states):
        return "wait"
    return "dead"


def execute(request: RunRequest) -> RunOutcome:  # noqa: C901, PLR0912, PLR0915 (one state machine: the scheduler loop)
    plan = request.plan
    order = tuple(topological_order(plan))
    steps = {s.id: s for s in plan.steps}
    status: dict[StepId, str] = {}
    outcomes: dict[StepId, StepOutcome] = {}
    # a pass carried from an earlier run counts once a prerequisite of each clause is proven in
    # this run (else the step is blocked, as an executed one would be): it waits for them
    carrying: dict[StepId, StepOutcome] = {}
    for sid in order:
        if sid in request.incremental and sid not in request.reconcile:
            carrying[sid] = StepOutcome(
                sid,
                StepStatus.CARRIED,
                f"inputs unchanged since {request.incremental[sid][:12]}",
                carried_from=request.incremental[sid],
            )
            status[sid] = "pending"
        elif sid in request.elsewhere or (
            request.targets is not None and sid not in request.targets
        ):
            if sid in request.carried:
                carrying[sid] = StepOutcome(
                    sid,
                    StepStatus.CARRIED,
                    "verified earlier for this tree",
                    carried_from=request.carried[sid],
                )
                status[sid] = "pending"
            else:
                why = request.elsewhere.get(sid, "not targeted and no evidence for this tree")
                outcomes[sid] = StepOutcome(sid, StepStatus.NOT_RUN, why)
                status[sid] = StepStatus.NOT_RUN
        else:
            status[sid] = "pending"
    supervisor = _Supervisor()
    started = time.time()
    interrupted = False
    emit = request.on_event or (lambda *_: None)
    running: dict[Future[StepOutcome], StepId] = {}
    # the workers only run checks: each enters the run's fence as it starts
    enter = request.fence.enter if request.fence is not None else None
    with (
        ThreadPoolExecutor(max_workers=max(1, request.jobs), initializer=enter) as pool,
        interrupts.polled(),
    ):
        try:
            while True:
                if interrupts.requested():
                    raise KeyboardInterrupt  # a safe point: no check half-started
                progressed = False
                for sid in order:
                    if status[sid] != "pending":
                        continue
                    step = steps[sid]
                    verdicts = [_clause_state(c.alternatives, status) for c in step.depends_on]
                    if "dead" in verdicts:
                        blocker = step.depends_on[verdicts.index("dead")]
                        outcomes[sid] = StepOutcome(
                            sid, StepStatus.BLOCKED, f"prerequisite {blocker} is not verified"
                        )
                        status[sid] = StepStatus.BLOCKED
                        emit("done", sid, outcomes[sid])
                        progressed = True
                        continue
                    if "wait" in verdicts:
                        continue
                    if sid in carrying:
                        # a pass carried for unchanged inputs (from a run of another tree,
                        # perhaps) only beside its prerequisites' own carried evidence: one
                        # executed again in this run (expired, failed before) may have made
                        # other outputs than the run the pass is carried from saw
                        prerequisites = step.dependency_ids() if sid in request.incremental else ()
                        again = [d for d in sorted(prerequisites) if status[d] == PASSED]
                        if not again:
                            outcomes[sid] = carrying[sid]
                            status[sid] = StepStatus.CARRIED
                            progressed = True
                            continue
                        del carrying[sid]
                        if sid in request.elsewhere or (
                            request.targets is not None and sid not in request.targets
                        ):
                            outcomes[sid] = StepOutcome(
                                sid,
                                StepStatus.NOT_RUN,
                                f"its prerequisite {again[0]} ran again in this run: its "
                                "earlier pass is not carried",
                            )
                            status[sid] = StepStatus.NOT_RUN
                            emit("done", sid, outcomes[sid])
                            progressed = True
                            continue
                    used = request.attempts_used.get(sid, 0)
                    if sid in request.reconcile:
                        mode, note = request.reconcile[sid]
                        status[sid] = "running"
                        emit("start", sid, None)
                        future = pool.submit(
                            _reconcile_step, step, request.where(step), mode, note, supervisor
                        )
                        running[future] = sid
                        progressed = True
                        continue
                    if sid in request.unresolved:
                        outcomes[sid] = StepOutcome(
                            sid,
                            StepStatus.UNKNOWN,
                            f"its last outcome ({request.unresolved[sid][:12]}) is unknown and it "
                            "is not idempotent: reconcile before retrying (`git audit reconcile "
                            f"{sid} --observed pass|fail` or `--readback`)",
                        )
                        status[sid] = StepStatus.UNKNOWN
                        emit("done", sid, outcomes[sid])
                        progressed = True
                        continue
                    if used >= step.max_attempts and not request.force:
                        outcomes[sid] = StepOutcome(
                            sid,
                            StepStatus.EXHAUSTED,
                            f"{used} failed attempts (max_attempts {step.max_attempts}); a "
                            f"sealer may reset them (`git audit plan reset-attempts {sid}`)",
                        )
                        status[sid] = StepStatus.EXHAUSTED
                        emit("done", sid, outcomes[sid])
                        progressed = True
                        continue
                    status[sid] = "running"
                    emit("start", sid, None)
                    # the outputs it relies on: of the prerequisites verified by now (an OR
                    # clause relies on the alternative that was, not on those that failed)
                    verified = frozenset(d for d, st in status.items() if st in PROVEN)
                    future = pool.submit(
                        _run_step, plan, step, request.where(step), used + 1, supervisor, verified
                    )
                    running[future] = sid
                    progressed = True
                if not running:
                    if not progressed:
                        break
                    continue
                # woken now and then (WAKE_SECONDS) to ask for a Ctrl-C: its handler runs only
                # when the main thread does, and the kernel may hand it to a worker thread
                done, _ = wait(running, timeout=WAKE_SECONDS, return_when=FIRST_COMPLETED)
                for future in done:
                    sid = running.pop(future)
                    outcome = future.result()
                    outcomes[sid] = outcome
                    status[sid] = outcome.status
                    emit("done", sid, outcome)
        except KeyboardInterrupt:
            interrupted = True
            supervisor.kill_all()
            for future, sid in running.items():
                try:
                    outcome = future.result()
                except Exception:  # the step is recorded as interrupted regardless
                    outcome = StepOutcome(sid, StepStatus.INTERRUPTED, "interrupted")
                outcomes[sid] = StepOutcome(
                    sid,
                    StepStatus.INTERRUPTED,
                    f"interrupted by {interrupts.cause()}",
                    attempt=outcome.attempt,
                    duration=outcome.duration,
                    checks=outcome.checks,
                    outputs=outcome.outputs,
                    upstream=outcome.upstream,
                )
                emit("done", sid, outcomes[sid])
            for sid in order:
                if sid not in outcomes:
                    outcomes[sid] = StepOutcome(
                        sid, StepStatus.NOT_RUN, "not started: the run was interrupted"
                    )
    return RunOutcome(outcomes, order, interrupted, started, time.time(), supervisor.checks)


def _run_checks(
    checks: tuple[Check, ...], where: Where, supervisor: _Supervisor
) -> tuple[CheckResult, ...]:
    results = []
    for check in checks:
        if supervisor.cancelled.is_set():
            break
        with supervisor.lock:
            supervisor.checks += 1
        results.append(
            run_check(
                check,
                where.workspace,
                where.sandbox,
                python=where.python,
                on_start=supervisor.started,
                fence=where.fence,
            )
        )
    return tuple(results)


def _summarise(results: tuple[CheckResult, ...]) -> str:
    bad = [r for r in results if not r.passed]
    return "; ".join(f"{r.describe}: {r.message}" for r in bad[:3])


def _run_step(
    plan: Plan,
    step: Step,
    where: Where,
    attempt: int,
    supervisor: _Supervisor,
    verified: frozenset[StepId] | None = None,
) -> StepOutcome:
    """Execute *step*: first the output contracts it requires of its prerequisites in
    *verified* (None: all of them), then its checks and its own outputs'."""
    start = time.monotonic()
    upstream: list[UpstreamCheck] = []
    for ref in step.upstream_outputs():  # the sealed order, not the file's
        producer = plan.step(ref.step)
        output = producer.output(ref.name) if producer else None
        if output is None or (verified is not None and ref.step not in verified):
            continue
        upstream.append(
            UpstreamCheck(ref.step, ref.name, _run_checks(output.checks, where, supervisor))
        )
    failed_up = [u for u in upstream if not u.passed]
    if failed_up:
        u = failed_up[0]
        return StepOutcome(
            step.id,
            StepStatus.BLOCKED,
            f"upstream output {u.step}/{u.output} no longer holds: {_summarise(u.results)}",
            duration=time.monotonic() - start,
            upstream=tuple(upstream),
        )
    checks = _run_checks(step.verify, where, supervisor)
    outputs = {o.name: _run_checks(o.checks, where, supervisor) for o in step.outputs}
    everything = checks + tuple(r for rs in outputs.values() for r in rs)
    if supervisor.cancelled.is_set():
        status: StepStatus = StepStatus.INTERRUPTED
        reason = f"interrupted by {interrupts.cause()}"
    elif any(r.outcome == "unknown" for r in everything):
        status, reason = StepStatus.UNKNOWN, _summarise(everything)
    elif all(r.passed for r in everything) and len(everything) == len(step.verify) + sum(
        len(o.checks) for o in step.outputs
    ):
        status, reason = StepStatus.PASSED, ""
    else:
        status, reason = StepStatus.FAILED, _summarise(everything)
    return StepOutcome(
        step.id,
        status,
        reason,
        attempt=attempt,
        duration=time.monotonic() - start,
        checks=checks,
        outputs=outputs,
        upstream=tuple(upstream),
    )


def _reconcile_step(
    step: Step, where: Where, mode: str, note: str, supervisor: _Supervisor
) -> StepOutcome:
    """Settle an unknown outcome: by an observation someone reports, or by the step's readback
    checks (read-only checks that observe the effect)."""
    start = time.monotonic()
    suffix = f" ({note})" if note else ""
    if mode in ("pass", "fail"):
        status: StepStatus = StepStatus.PASSED if mode == "pass" else StepStatus.FAILED
        return StepOutcome(step.id, status, f"reconciled: observed {mode}{suffix}", attempt=None)
    checks = _run_checks(step.readback, where, supervisor)
    if any(r.outcome == "unknown" for r in checks):
        status, reason = StepStatus.UNKNOWN, f"readback inconclusive: {_summarise(checks)}"
    elif checks and all(r.passed for r in checks):
        status, reason = StepStatus.PASSED, f"reconciled by readback{suffix}"
    else:
        status, reason = StepStatus.FAILED, f"reconciled by readback: {_summarise(checks)}{suffix}"
    return StepOutcome(
        step.id, status, reason, attempt=None, duration=time.monotonic() - start, checks=checks
    )


def step_json(outcome: StepOutcome, step: Step) -> dict[str, Any]:
    """The per-step entry of run.json (outputs themselves are stored beside it)."""
    return {
        "status": outcome.status,
        "title": step.title,
        "reason": outcome.reason,
        "attempt": outcome.attempt,
        "duration": round(outcome.duration, 3),
        "carried_from": outcome.carried_from,
        "checks": [r.to_json() for r in outcome.checks],
        "outputs": {name: [r.to_json() for r in rs] for name, rs in outcome.outputs.items()},
        "upstream": [
            {
                "step": u.step,
                "output": u.output,
                "passed": u.passed,
                "checks": [r.to_json() for r in u.results],
            }
            for u in outcome.upstream
        ],
    }
