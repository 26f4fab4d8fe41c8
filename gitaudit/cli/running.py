"""`git audit run` without typer: the live progress display and the command itself.

Called by the typer command and by :mod:`gitaudit.cli.fast` (the most frequent command should
not pay for typer's start-up).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitaudit.cli.context import signer_for
from gitaudit.cli.output import emit_json, say, warn
from gitaudit.crypto.signers import Signer
from gitaudit.errors import ExitCode, GitAuditError, UsageError
from gitaudit.frozen import frozen
from gitaudit.git.repo import Repo, open_repo
from gitaudit.plan.catalog import check_worktree
from gitaudit.plan.known_valid import KnownValid
from gitaudit.plan.store import discover_worktree
from gitaudit.run import interrupts
from gitaudit.run.authority import forced_past_exhaustion
from gitaudit.run.recorder import RecordedRun, require_runner, run_plan
from gitaudit.run.runner import StepOutcome

if TYPE_CHECKING:
    from rich.live import Live
    from rich.table import Table

VERDICT_EXIT = {
    "PASS": ExitCode.OK,
    "FAIL": ExitCode.FAIL,
    "UNKNOWN": ExitCode.UNKNOWN,
    "INTERRUPTED": ExitCode.UNKNOWN,
}
_MARK = {
    "passed": "✓",
    "carried": "✓",
    "failed": "✗",
    "blocked": "·",
    "unknown": "?",
    "exhausted": "✗",
    "interrupted": "!",
    "not-run": "-",
}


HEARTBEAT_ENV = "GITAUDIT_PROGRESS_SECONDS"
HEARTBEAT_DEFAULT = 5.0


def heartbeat_seconds() -> float | None:
    """Seconds between "still running" lines without a terminal: $GITAUDIT_PROGRESS_SECONDS
    (0 turns them off), else 5."""
    raw = os.environ.get(HEARTBEAT_ENV, "").strip()
    try:
        value = float(raw) if raw else HEARTBEAT_DEFAULT
    except ValueError:
        value = HEARTBEAT_DEFAULT
    return value if value > 0 else None


class Progress:
    """Live table on a terminal, one plain line per event otherwise (stderr either way)."""

    def __init__(self, plan: str, step_ids: list[str], enabled: bool) -> None:
        # rich only for a terminal: a run in CI or under an agent does not pay for importing it
        self.live_mode = enabled and sys.stderr.isatty()
        if self.live_mode:
            from rich.console import Console

            self.console = Console(stderr=True)
            self.live_mode = self.console.is_terminal
        self.plan = plan
        self.state = {sid: "pending" for sid in step_ids}
        self.started: dict[str, float] = {}
        self.elapsed: dict[str, float] = {}
        self.lock = threading.Lock()
        self.live: Live | None = None
        # without a terminal: a line per running step every few seconds, so a long step is
        # visibly alive in CI logs and agent transcripts
        self.heartbeat = heartbeat_seconds() if enabled and not self.live_mode else None
        self.stopped = threading.Event()
        self.beats: threading.Thread | None = None

    def table(self) -> Table:
        from rich.table import Table

        table = Table(title=f"git audit run --plan {self.plan}", show_edge=False)
        table.add_column("step")
        table.add_column("state")
        table.add_column("seconds", justify="right")
        now = time.monotonic()
        for sid, st in self.state.items():
            secs = self.elapsed.get(sid, now - self.started[sid] if sid in self.started else 0.0)
            colour = {
                "passed": "green",
                "carried": "green",
                "failed": "red",
                "running": "yellow",
                "exhausted": "red",
                "unknown": "magenta",
            }.get(st, "dim")
            table.add_row(sid, f"[{colour}]{st}[/]", f"{secs:.1f}" if sid in self.started else "")
        return table

    def __enter__(self) -> Progress:
        if self.live_mode:
            from rich.live import Live

            self.live = Live(
                self.table(), console=self.console, refresh_per_second=8, transient=False
            )
            self.live.__enter__()
        if self.heartbeat:
            self.beats = threading.Thread(target=self._beat, name="gitaudit-heartbeat", daemon=True)
            self.beats.start()
        return self

    def _beat(self) -> None:
        assert self.heartbeat
        while not self.stopped.wait(self.heartbeat):
            with self.lock:
                now = time.monotonic()
                for sid, st in self.state.items():
                    if st == "running" and sid in self.started:
                        print(
                            f"  … {sid} running ({now - self.started[sid]:.0f}s)",
                            file=sys.stderr,
                            flush=True,
                        )

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        if self.beats is not None:
            self.beats.join()
        if self.live is not None:
            self.live.update(self.table())
            self.live.__exit__(None, None, None)

    def event(self, kind: str, sid: str, outcome: StepOutcome | None) -> None:
        with self.lock:
            if kind == "start":
                self.state[sid] = "running"
                self.started[sid] = time.monotonic()
            elif outcome is not None:
                self.state[sid] = outcome.status
                if sid in self.started:
                    self.elapsed[sid] = time.monotonic() - self.started[sid]
            if self.live is not None:
                self.live.update(self.table())
            elif kind == "start":
                print(f"  … {sid} running", file=sys.stderr, flush=True)
            elif outcome is not None:
                secs = f" ({outcome.duration:.1f}s)" if outcome.attempt else ""
                why = f": {outcome.reason}" if outcome.reason else ""
                print(
                    f"  {_MARK.get(outcome.status, '?')} {sid} {outcome.status}{secs}{why}",
                    file=sys.stderr,
                    flush=True,
                )


def result_json(r: RecordedRun) -> dict[str, Any]:
    return {
        "plan": r.plan,
        "commit": r.commit,
        "verdict": r.verdict,
        "tree": r.tree,
        "passed": r.passed,
        "total": r.total,
        "reasons": r.doc["reasons"],
        "changed_paths": list(r.changed_paths),
        "steps": {
            sid: {"status": s["status"], "reason": s["reason"], "carried_from": s["carried_from"]}
            for sid, s in r.doc["steps"].items()
        },
    }


def _not_started(rest: list[str]) -> None:
    if rest:
        warn(f"interrupted: not started: {', '.join(rest)}")


def _stamp(repo: Repo, agent: str, plan: str) -> dict[str, Any]:
    from gitaudit.ledger.agent_ops import run_stamp
    from gitaudit.ledger.plansref import read_state

    return run_stamp(repo, read_state(repo), agent, plan)


@frozen
class _Options:
    """What the command line asks of every plan's run."""

    steps: list[str]
    labels: list[str]
    jobs: int | None
    force: bool
    fresh: bool
    as_json: bool
    agent: str | None


def _run_one(
    repo: Repo, workdir: Path, name: str, signer: Signer, o: _Options
) -> tuple[RecordedRun, list[str]]:
    """Run and record plan *name*; print its result unless ``o.as_json``."""
    # the schema check is skipped for plan bytes the gate or a run found schema-valid here
    known = KnownValid(str(repo.gitdir), str(workdir))
    (checked,) = check_worktree(workdir, name, known=known)
    step_ids = list(checked.plan.step_ids) if checked.plan else []
    with Progress(name, step_ids, enabled=not o.as_json) as progress:
        recorded = run_plan(
            repo,
            name,
            signer,
            targets=o.steps,
            labels=o.labels,
            jobs=o.jobs,
            force=o.force,
            fresh=o.fresh,
            on_event=progress.event,
            checked=checked,
            agent=_stamp(repo, o.agent, name) if o.agent else None,
        )
    forced = forced_past_exhaustion(checked.plan, recorded.doc) if checked.plan else []
    if not o.as_json:
        say(
            f"{name}: {recorded.verdict} — {recorded.passed}/{recorded.total} steps verified, "
            f"evidence {recorded.commit[:12]} on refs/audit/runs/{name}"
        )
        for reason in recorded.doc["reasons"]:
            say(f"  {reason}")
        for sid in forced:
            say(
                f"  step {sid} was forced past its max_attempts: its evidence counts once a "
                f"sealer resets them (`git audit plan reset-attempts {sid} --plan {name}`)"
            )
        if recorded.changed_paths:
            say("  changed during the run: " + ", ".join(recorded.changed_paths[:10]))
    if recorded.unkept:
        warn(
            f"{name}: the run is recorded ({recorded.commit[:12]}), but its seen mark and the "
            f"lookup cache in .git/gitaudit were not updated ({recorded.unkept}): free disk "
            "space; the next command rebuilds them from the ledger"
        )
    return recorded, forced


def run(
    steps: list[str] | None,
    plan: str | None,
    jobs: int | None,
    force: bool,
    fresh: bool,
    as_json: bool,
    key: Path | None,
    step: list[str] | None = None,
    labels: list[str] | None = None,
    snapshot: bool = False,
) -> int:
    """Run sealed plans and record each run; the exit code of the worst verdict. With
    *snapshot*, the work tree is snapshot first; with ``$GITAUDIT_AGENT`` set, each run records
    that agent and its claim (docs/agents.md)."""
    steps = [*(steps or ()), *(step or ())]
    repo = open_repo()
    workdir = repo.require_workdir()
    names = [f.name for f in discover_worktree(workdir)] if plan is None else [plan]
    if not names:
        raise UsageError("no plans in .gitaudit/plans/", hint="create one with `git audit init`")
    if steps and len(names) > 1:
        raise UsageError("naming steps needs --plan", hint="e.g. `git audit run 3 --plan backend`")
    signer = signer_for(repo, key)
    if snapshot:
        from gitaudit.ledger.snapshots import take, unchained_note

        state, _runner = require_runner(repo, signer)  # a key that may not run signs nothing
        trusted = [k.key for k in state.trust.keys]
        taken = take(repo, signer, "pre-run", "before `git audit run`", trusted)
        if not as_json:
            say(f"snapshot pre-run: {taken.commit[:12]} (tree {taken.tree[:12]})")
            if taken.unchained:
                warn(unchained_note(taken))
    options = _Options(
        steps, labels or [], jobs, force, fresh, as_json, os.environ.get("GITAUDIT_AGENT") or None
    )
    from gitaudit.checks.fence import abi

    if not abi():
        warn(
            "this system has no Landlock: checks run unfenced and can read the gitaudit home "
            "and the signing key (docs/threat-model.md, 'The fence around the checks')"
        )
    results = []
    worst: int = ExitCode.OK
    with interrupts.session():
        for i, name in enumerate(names):
            try:
                recorded, forced = _run_one(repo, workdir, name, signer, options)
            except KeyboardInterrupt:
                why = interrupts.cause()
                warn(f"{name}: interrupted ({why}) before its checks ran: nothing recorded for it")
                _not_started(names[i + 1 :])
                worst = interrupts.exit_status()  # 128 + the signal: 130 for Ctrl-C
                break
            results.append(recorded)
            # evidence of a step forced past its attempts counts only after a sealer's reset
            code = ExitCode.FAIL if forced else VERDICT_EXIT[recorded.verdict]
            worst = max(worst, code, key=lambda c: (c == ExitCode.FAIL, c == ExitCode.UNKNOWN))
            if recorded.verdict == "INTERRUPTED" or interrupts.requested():
                _not_started(names[i + 1 :])
                break
    everything = plan is None and not steps and not labels and len(results) == len(names)
    if everything and worst == ExitCode.OK:
        _refresh_memo(repo, {r.tree for r in results})
    if as_json:
        emit_json({"runs": [result_json(r) for r in results]})
    return int(worst)


def _refresh_memo(repo: Repo, trees: set[str]) -> None:
    """Every plan ran and passed on one tree: judge it as the pre-push hook would (that tree, as
    a commit of it), so the verdict memo holds the answer and a push right after the run costs
    the memo's three git calls. The full gate decides; only its PASS is remembered. Best effort:
    Ctrl-C here stops the refresh, not the command (its runs are recorded; the memo writes by
    rename, so it is left as it was or refreshed)."""
    if len(trees) != 1:
        return
    import sqlite3

    from gitaudit.gate.judge import judge

    tree = trees.pop()
    with contextlib.suppress(GitAuditError, KeyboardInterrupt):
        try:
            judge(repo, tree=tree)
        except (OSError, sqlite3.Error) as exc:  # the runs are recorded: only the memo is not
            warn(
                f"the runs are recorded, but the verdict of tree {tree[:12]} was not kept in "
                f".git/gitaudit ({exc}): free disk space; the next `git audit status` judges "
                "it again"
            )
