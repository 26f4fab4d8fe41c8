"""`git audit watch`: follow the work tree, re-run what changed, show the frontier and gate."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Annotated

import typer

from gitaudit.cli.common import KeyOpt, PlanOpt, repo_here, say
from gitaudit.cli.context import signer_for
from gitaudit.errors import UsageError
from gitaudit.gate.judge import judge
from gitaudit.git.repo import Repo
from gitaudit.mission import frontier
from gitaudit.plan.catalog import check_worktree
from gitaudit.run.recorder import run_plan
from gitaudit.run.runner import StepOutcome
from gitaudit.run.trial import Memory, trial
from gitaudit.run.watching import backend, trees
from gitaudit.verdict import PROVEN, RAN


def _round(
    repo: Repo, plan: str | None, record: bool, key: object, memory: dict[str, Memory]
) -> None:
    """One round: each plan's changed steps run (recorded or not), then its frontier; then
    the gate."""
    checked_plans = check_worktree(repo.require_workdir(), plan)
    if not checked_plans:
        raise UsageError("no plans in .gitaudit/plans/", hint="create one with `git audit init`")
    signer = signer_for(repo, key) if record else None  # type: ignore[arg-type]
    for checked in checked_plans:
        model = checked.require_valid()
        if signer is not None:
            recorded = run_plan(repo, model.name, signer, checked=checked)
            steps, order = recorded.outcome.steps, recorded.outcome.order  # the plan's order
            ran = [s for s in order if steps[s].status in RAN]
            held = [s for s in order if steps[s].status not in RAN | PROVEN]
            say(
                f"{model.name}: {recorded.verdict} — ran {', '.join(ran) or 'nothing'}"
                + _held(held, steps)
                + f"; evidence {recorded.commit[:12]}"
            )
            states = {
                s: "verified" if o.status in ("passed", "carried") else o.status
                for s, o in steps.items()
            }
        else:
            done = trial(repo, model, memory.setdefault(model.name, Memory()))
            failed = [s for s in done.outcome.order if done.outcome.steps[s].status == "failed"]
            say(
                f"{model.name}: tree {done.tree[:12]} — ran {', '.join(done.ran) or 'nothing'}, "
                f"carried {len(done.carried)}"
                + (f"; failed {', '.join(failed)}" if failed else "")
                + _held(done.held, done.outcome.steps)
                + " (not recorded)"
            )
            states = dict(done.states())
        f = frontier(model, states)
        say(
            f"  frontier: {', '.join(f.ready) or 'nothing ready'}"
            f" — {len(f.verified)}/{len(model.steps)} verified"
        )
    gate = judge(repo, None)
    say(f"gate: {gate.verdict}" + ("" if record else " (trial runs are not evidence)"))


def _held(held: Sequence[str], steps: Mapping[str, StepOutcome]) -> str:
    """ "; not run: deploy (blocked), …" for the steps neither executed nor carried."""
    if not held:
        return ""
    return "; not run: " + ", ".join(f"{s} ({steps[s].status})" for s in held)


def watch_cmd(
    plan: PlanOpt = None,
    record: Annotated[
        bool, typer.Option("--record", help="Record each run (signed), as `git audit run`.")
    ] = False,
    once: Annotated[bool, typer.Option("--once", help="One round, then stop.")] = False,
    debounce: Annotated[
        float, typer.Option("--debounce", help="Seconds of quiet before re-running.", min=0.05)
    ] = 0.4,
    key: KeyOpt = None,
) -> None:
    """Follow the work tree and, after each quiet moment, re-run only the steps whose inputs
    changed (carrying the rest), showing each plan's frontier and the gate. Without --record
    nothing is signed. Ctrl-C stops it."""
    repo = repo_here()
    workdir = repo.require_workdir()
    memory: dict[str, Memory] = {}
    stop = threading.Event()
    say(f"watching {workdir} ({backend()}); Ctrl-C stops")
    try:
        for tree in trees(workdir, stop, debounce=debounce):
            say(f"— {time.strftime('%H:%M:%S')} tree {tree[:12]}")
            _round(repo, plan, record, key, memory)
            if once:
                stop.set()
                break
    except KeyboardInterrupt:
        stop.set()
    say("stopped")
