"""`git audit run`, `log` and `show`: recording and reading evidence."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from gitaudit.cli import grammar, running
from gitaudit.cli.common import (
    JsonOpt,
    KeyOpt,
    PlanOpt,
    emit_json,
    exit_with,
    repo_here,
    say,
    signer_for,
    typer_param,
)
from gitaudit.cli.names import require_known
from gitaudit.errors import UsageError
from gitaudit.ledger import index
from gitaudit.ledger.objects import blob_at, commit_of
from gitaudit.ledger.records import RunRecord
from gitaudit.ledger.runs import read_run, resolve_run
from gitaudit.plan.store import discover_worktree
from gitaudit.run import interrupts
from gitaudit.run.recorder import run_plan

RUN = grammar.RUN


def run_cmd(
    steps: Annotated[list[str] | None, typer_param(RUN.param("steps"))] = None,
    step: Annotated[list[str] | None, typer_param(RUN.param("step"))] = None,
    labels: Annotated[list[str] | None, typer_param(RUN.param("labels"))] = None,
    plan: PlanOpt = None,
    jobs: Annotated[int | None, typer_param(RUN.param("jobs"))] = None,
    force: Annotated[bool, typer_param(RUN.param("force"))] = False,
    fresh: Annotated[bool, typer_param(RUN.param("fresh"))] = False,
    snapshot: Annotated[bool, typer_param(RUN.param("snapshot"))] = False,
    as_json: JsonOpt = False,
    key: KeyOpt = None,
) -> None:
    """Run sealed plans against the work tree and record each run as a signed commit on
    refs/audit/runs/<plan>. Exit 0 PASS, 1 FAIL, 3 UNKNOWN or interrupted."""
    exit_with(running.run(steps, plan, jobs, force, fresh, as_json, key, step, labels, snapshot))


def log_cmd(
    plan: PlanOpt = None,
    limit: Annotated[
        int, typer.Option("-n", "--max-count", help="How many runs per plan.", min=1)
    ] = 20,
    as_json: JsonOpt = False,
) -> None:
    """Runs, newest first: verdict, tree, HEAD, time, signer, steps passed."""
    repo = repo_here()
    require_known(repo, plan)
    names = (
        [plan]
        if plan
        else sorted(
            {
                r.removeprefix("refs/audit/runs/")
                for r in repo.git.references
                if r.startswith("refs/audit/runs/")
            }
        )
    )
    rows: list[dict[str, Any]] = []
    for name in names:
        for entry in index.recent(repo.git, repo.gitdir, name, limit):
            record = read_run(repo.git, entry.commit)
            rows.append(
                {
                    "plan": name,
                    "commit": entry.commit,
                    "verdict": record.verdict,
                    "tree": record.tree,
                    "head": record.head,
                    "time": datetime.fromtimestamp(entry.time, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "runner": record.runner,
                    "passed": len(record.passed_steps()),
                    "total": len(record.steps),
                }
            )
    if as_json:
        emit_json(rows)
        return
    if not rows:
        say("no runs recorded yet (run `git audit run`)")
    for r in rows:
        head = (r["head"] or "-")[:12]
        say(
            f"{r['commit'][:12]} {r['time']} {r['plan']:<12} {r['verdict']:<11} "
            f"tree {r['tree'][:12]} HEAD {head} {r['passed']}/{r['total']} by {r['runner']}"
        )


def show_cmd(
    run: Annotated[str, typer.Argument(help="A run commit id, a prefix, or 'latest'.")] = "latest",
    plan: PlanOpt = None,
    step: Annotated[
        str | None, typer.Option("--step", "-s", help="Show one step's checks and output.")
    ] = None,
    as_json: JsonOpt = False,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="text, or junit: JUnit XML (a suite per step, a test case per check).",
        ),
    ] = "text",
) -> None:
    """A run as a reviewer sees it: the summary, then each step's checks, outputs and
    artifacts. `--format junit` writes JUnit XML for CI systems."""
    if fmt not in ("text", "junit"):
        raise typer.BadParameter("use text or junit", param_hint="--format")
    repo = repo_here()
    require_known(repo, plan)
    names = sorted(
        {
            r.removeprefix("refs/audit/runs/")
            for r in repo.git.references
            if r.startswith("refs/audit/runs/")
        }
    )
    oid = resolve_run(repo.git, plan, run, names)
    record = read_run(repo.git, oid)
    commit = commit_of(repo.git, oid, "run")
    if fmt == "junit":
        from gitaudit.gate import junit

        junit.require_trusted(repo, record)
        sys.stdout.write(junit.build(repo.git, record, {}).decode("utf-8"))
        return
    if as_json:
        doc = dict(record.doc)
        if step is not None:
            doc = {"commit": record.commit, "step": step, **record.doc["steps"].get(step, {})}
        emit_json({"commit": record.commit, **doc} if step is None else doc)
        return
    if step is None:
        summary = blob_at(repo.git, commit.tree, "summary.md") or b""
        say(f"run {record.commit}")
        say(summary.decode(errors="replace").rstrip())
        _say_artifacts(record, None)
        return
    entry = record.steps.get(step)
    if entry is None:
        raise UsageError(
            f"run {record.commit[:12]} has no step {step!r}",
            hint=f"steps: {', '.join(record.steps)}",
        )
    say(f"step {step}: {entry.status}" + (f" — {entry.reason}" if entry.reason else ""))
    groups = [("checks", entry.checks)]
    groups += [(f"outputs/{n}", cs) for n, cs in entry.outputs.items()]
    groups += [(f"upstream/{u.step}/{u.output}", u.checks) for u in entry.upstream]
    for folder, checks in groups:
        for n, c in enumerate(checks):
            say(f"  [{folder}/{n}] {c.check}: {c.outcome} ({c.message})")
            for stream in ("stdout", "stderr"):
                data = blob_at(repo.git, commit.tree, f"steps/{step}/{folder}/{n}/{stream}") or b""
                if data:
                    text = data.decode(errors="backslashreplace").rstrip()
                    say(f"    {stream}:")
                    say("\n".join(f"      {line}" for line in text.splitlines()[-40:]))
                    truncated, total = (
                        (c.stdout_truncated, c.stdout_bytes)
                        if stream == "stdout"
                        else (c.stderr_truncated, c.stderr_bytes)
                    )
                    if truncated:
                        say(f"      … truncated ({total} bytes in all)")
    _say_artifacts(record, step)


def _say_artifacts(record: RunRecord, only: str | None) -> None:
    """The artifacts stored with the run (or one step), with the git command that prints each."""
    rows = [
        (sid, art)
        for sid, entry in record.doc["steps"].items()
        if only in (None, sid)
        for art in entry.get("artifacts", [])
    ]
    if not rows:
        return
    say("")
    say("artifacts:")
    for sid, art in rows:
        where = f"steps/{sid}/artifacts/{str(art['path']).strip('/')}"
        if art.get("stored"):
            size = f"{art['bytes']} bytes"
            say(f"  {sid}: {art['path']} ({size}): git show {record.commit[:12]}:{where}")
        else:
            say(f"  {sid}: {art['path']}: not stored ({art.get('problem')})")


def reconcile_cmd(
    step: Annotated[str, typer.Argument(help="The step whose unknown outcome to settle.")],
    plan: PlanOpt = None,
    observed: Annotated[
        str | None, typer.Option("--observed", help="What was observed: pass or fail.")
    ] = None,
    readback: Annotated[
        bool, typer.Option("--readback", help="Run the step's readback checks to observe it.")
    ] = False,
    note: Annotated[str, typer.Option("--note", help="What was observed, for the record.")] = "",
    key: KeyOpt = None,
) -> None:
    """Settle the unknown outcome of a non-idempotent step (a timeout or an interruption) before
    it may run again. Recorded as a signed run commit."""
    if (observed is None) == (not readback):
        raise UsageError("give exactly one of --observed pass|fail and --readback")
    if observed is not None and observed not in ("pass", "fail"):
        raise UsageError("--observed takes pass or fail")
    repo = repo_here()
    names = [f.name for f in discover_worktree(repo.require_workdir())]
    name = plan or (names[0] if len(names) == 1 else None)
    if name is None:
        raise UsageError("several plans: name one with --plan")
    mode = observed or "readback"
    with interrupts.session(), running.Progress(name, [step], enabled=True) as progress:
        recorded = run_plan(
            repo,
            name,
            signer_for(repo, key),
            targets=[step],
            reconcile={step: (mode, note)},
            on_event=progress.event,
        )
    entry = recorded.doc["steps"][step]
    say(
        f"{name}: step {step} reconciled as {entry['status']} ({entry['reason']}); "
        f"evidence {recorded.commit[:12]}; the plan is {recorded.verdict}"
    )
    exit_with(running.VERDICT_EXIT[recorded.verdict])
