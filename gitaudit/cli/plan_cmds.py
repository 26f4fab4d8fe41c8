"""`git audit plan ...`: validate, show and draw plans; seal, retire, reset attempts, history."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import typer

from gitaudit.cli.common import (
    CONTEXT,
    JsonOpt,
    KeyOpt,
    PlanOpt,
    emit_json,
    exit_with,
    repo_here,
    say,
    signer_for,
    warn,
)
from gitaudit.cli.names import require_known
from gitaudit.errors import ExitCode, UsageError
from gitaudit.git.repo import Repo
from gitaudit.ledger.approvals import ChangeProposed
from gitaudit.ledger.plansref import read_state, sealed_contract
from gitaudit.ledger.request_ops import RequestEntry, request_history
from gitaudit.ledger.seals import (
    HistoryEntry,
    ResetEntry,
    history,
    migration,
    reset_attempts,
    reset_history,
    retire_plan,
    seal_plan,
)
from gitaudit.plan.catalog import CheckedPlan, check_file, check_worktree
from gitaudit.plan.compare import compare
from gitaudit.plan.digest import contract
from gitaudit.plan.graph import render, topological_order
from gitaudit.plan.model import Check, Plan
from gitaudit.plan.store import PLANS_DIR, PlanFile, discover_worktree, unlike_head

app = typer.Typer(
    help="Validate, show, draw and seal plans.", context_settings=CONTEXT, no_args_is_help=True
)


@app.command("validate")
def validate_cmd(plan: PlanOpt = None, as_json: JsonOpt = False) -> None:
    """Validate plans: JSON, schema, graph, output contracts, coverage and environment.

    Exit 0 when every selected plan is valid, 1 when any is not. Missing required tools are
    reported in their own section: the plan is valid, but the gate will not PASS on this machine.
    """
    checked = check_worktree(repo_here().require_workdir(), plan)
    ok = all(c.report.valid for c in checked)
    if as_json:
        emit_json(
            {
                "valid": ok,
                "plans": [
                    {
                        "plan": c.name,
                        "source": c.file.source,
                        "valid": c.report.valid,
                        "digest": c.digest,
                        "problems": [p.to_json() for p in c.report.problems],
                    }
                    for c in checked
                ],
            }
        )
    else:
        for c in checked:
            _print_report(c)
    exit_with(ExitCode.OK if ok else ExitCode.FAIL)


def _print_report(c: CheckedPlan) -> None:
    report = c.report
    if report.valid:
        n = len(c.plan.steps) if c.plan else 0
        say(f"{c.name}: valid ({n} step{'s' if n != 1 else ''}, contract {c.digest})")
    else:
        say(f"{c.name}: INVALID, {len(report.errors)} problem(s)")
    for p in report.errors:
        say(f"  error   {p.path}: {p.message} [{p.code}]")
        say(f"          fix: {p.hint}")
    for p in report.warnings:
        say(f"  warning {p.path}: {p.message} [{p.code}]")
    if report.environment:
        say("  environment (this machine, not the plan):")
        for p in report.environment:
            say(f"    {p.path}: {p.message} [{p.code}]")
            say(f"      fix: {p.hint}")


def _check_json(check: Check) -> dict[str, Any]:
    return {"type": check.type, "describe": check.describe(), "path": check.json_path}


def _plan_json(c: CheckedPlan, plan: Plan) -> dict[str, Any]:
    order = topological_order(plan)
    return {
        "plan": plan.name,
        "task": plan.task,
        "digest": c.digest,
        "sequential": plan.legacy,
        "requirements": [
            {
                "id": r.id,
                "priority": r.priority,
                "description": r.description,
                "covered_by": [s.id for s in plan.covering_steps(r.id)],
            }
            for r in plan.requirements
        ],
        "required_tools": list(plan.required_tools),
        "steps": [
            {
                "id": s.id,
                "title": s.title,
                "depends_on": [
                    {"any_of": list(cl.alternatives)} if cl.is_any_of else cl.alternatives[0]
                    for cl in s.depends_on
                ],
                "requires_outputs": [{"step": r.step, "name": r.name} for r in s.requires_outputs],
                "covers": list(s.covers),
                "verify": [_check_json(ch) for ch in s.verify],
                "outputs": [
                    {"name": o.name, "verify": [_check_json(ch) for ch in o.checks]}
                    for o in s.outputs
                ],
                "cost": s.cost,
                "max_attempts": s.max_attempts,
                "idempotent": s.idempotent,
                "valid_for": s.valid_for,
            }
            for s in (plan.step(i) for i in order)
            if s is not None
        ],
    }


@app.command("show")
def show_cmd(plan: PlanOpt = None, as_json: JsonOpt = False) -> None:  # noqa: C901, PLR0912 (to split: one printer per plan section)
    """Show requirements and their covering steps, steps in dependency order, and the digest."""
    repo = repo_here()
    checked = check_worktree(repo.require_workdir(), plan)
    docs = []
    tree: str | None = None
    for c in checked:
        model = c.require_valid()
        from gitaudit.ledger.protected import protected_files

        if tree is None:
            from gitaudit.git.fingerprint import workspace_fingerprint

            tree = workspace_fingerprint(repo.require_workdir()).tree
        protected = sorted(protected_files(repo.git, tree, model))
        if as_json:
            docs.append({**_plan_json(c, model), "protected": protected})
            continue
        say(f"plan {model.name}: {model.task or '(no task)'}")
        say(f"  contract {c.digest}" + ("  (legacy sequential plan)" if model.legacy else ""))
        say("  requirements:")
        for r in model.requirements:
            covering = ", ".join(s.id for s in model.covering_steps(r.id)) or "NOT COVERED"
            say(f"    {r.id} [{r.priority}] {r.description}  <- steps {covering}")
        if model.required_tools:
            say(f"  required tools: {', '.join(model.required_tools)}")
        say("  steps (dependency order):")
        for sid in topological_order(model):
            s = model.step(sid)
            assert s is not None
            say(f"    {s.label}")
            if s.depends_on:
                parts = [str(cl) for cl in s.depends_on]
                note = " (implicit: previous step)" if s.implicit_dependencies else ""
                say(f"      depends on: {' AND '.join(parts)}{note}")
            for ref in s.requires_outputs:
                say(f"      requires output: {ref.step}/{ref.name}")
            if s.covers:
                say(f"      covers: {', '.join(s.covers)}")
            for ch in s.verify:
                say(f"      check  {ch.describe()}")
            for o in s.outputs:
                say(f"      output {o.name}:")
                for ch in o.checks:
                    say(f"        check  {ch.describe()}")
        more = f" (+{len(protected) - 10})" if len(protected) > 10 else ""
        shown = ", ".join(protected[:10]) + more
        say(f"  protected files ({len(protected)}): {shown or 'none'}")
        for p in c.report.warnings:
            warn(f"warning: {p.render()}")
    if as_json:
        emit_json({"plans": docs})


GraphFormatOpt = Annotated[
    str, typer.Option("--format", "-f", help="mermaid (renders in pull requests), dot or text.")
]


@app.command("graph")
def graph_cmd(
    plan: PlanOpt = None,
    fmt: GraphFormatOpt = "mermaid",
    status: Annotated[
        bool,
        typer.Option(
            "--status",
            help="Colour steps by state for this tree: verified, ready, blocked, failed, "
            "unknown, expired.",
        ),
    ] = False,
) -> None:
    """Draw the dependency graph (arrows run from prerequisite to dependant)."""
    if fmt not in ("mermaid", "dot", "text"):
        raise typer.BadParameter(
            f"unknown format {fmt!r}; use mermaid, dot or text", param_hint="--format"
        )
    fmt_lit: Literal["mermaid", "dot", "text"] = fmt  # type: ignore[assignment]
    colours: dict[str, dict[str, str]] = {}
    if status:
        from gitaudit.cli.mission_cmds import plans_with_states
        from gitaudit.mission import graph_states

        colours = {m.name: graph_states(m, v.states) for m, v in plans_with_states(plan)}
    for c in check_worktree(repo_here().require_workdir(), plan):
        model = c.require_valid()
        out = render(model, fmt_lit, colours.get(model.name))
        if fmt == "text":
            say(f"# {model.name}")
        say(out.rstrip("\n"))


# ----------------------------------------------------------------------------- sealing

ReasonOpt = Annotated[
    str | None,
    typer.Option("--reason", "-m", help="Why; recorded in the seal and the commit message."),
]


@app.command("seal")
def seal_cmd(
    plan: PlanOpt = None,
    reason: ReasonOpt = None,
    allow_weaken: Annotated[
        bool,
        typer.Option(
            "--allow-weaken", help="Record a weakening instead of refusing it (needs --reason)."
        ),
    ] = False,
    amend: Annotated[
        bool,
        typer.Option(
            "--amend",
            help="Accept changed protected files (the check files the seal binds) as they are "
            "in the work tree: a recorded amendment (needs --reason).",
        ),
    ] = False,
    key: KeyOpt = None,
) -> None:
    """Validate and seal plans on refs/audit/plans (signed), with the content of the files they
    protect. Strengthening is free; weakening is refused unless --allow-weaken --reason is given
    (and the policy allows it); changed protected files need --amend --reason."""
    repo = repo_here()
    checked = check_worktree(repo.require_workdir(), plan)
    for c in checked:
        c.require_valid()
    signer = signer_for(repo, key)
    workdir = repo.require_workdir()
    for c in checked:
        try:
            outcome = seal_plan(
                repo, signer, c, reason=reason, allow_weaken=allow_weaken, amend=amend
            )
        except ChangeProposed as proposed:  # the policy asks for more sealers: the next plan
            say(f"{proposed.message}\nnext: {proposed.hint}")
            continue
        say(outcome.message)
        unlike = unlike_head(repo.git, workdir, c.file) if outcome.commit is not None else None
        if unlike is not None:  # after the seal: a refusal stays one line
            review = f"`git diff HEAD -- {PLANS_DIR}`"
            warn(f"warning: {unlike}: check {review} is what you meant to seal")
        record = outcome.record
        if outcome.commit is not None and record is not None and record.amended:
            for kind, paths in record.amended.items():
                for path in paths:
                    say(f"  {kind:<12} {path} (protected)")
        if outcome.commit is not None and outcome.comparison is not None:
            for change in outcome.comparison.changes:
                say(f"  {change.kind:<12} {change.render()}")


@app.command("retire")
def retire_cmd(
    name: Annotated[str, typer.Argument(help="The plan to retire.")],
    reason: ReasonOpt = None,
    key: KeyOpt = None,
) -> None:
    """Retire a sealed plan (a signed change; deleting the file alone never retires a plan)."""
    repo = repo_here()
    commit = retire_plan(repo, signer_for(repo, key), name, reason or "")
    say(f"retired plan {name!r} in {str(commit)[:12]}")


@app.command("reset-attempts")
def reset_attempts_cmd(
    step: Annotated[str, typer.Argument(help="The step whose failed attempts count afresh.")],
    plan: PlanOpt = None,
    reason: Annotated[
        str | None, typer.Option("--reason", "-m", help="Why the step may be tried again.")
    ] = None,
    key: KeyOpt = None,
) -> None:
    """Let an exhausted step be tried again: a signed change by a sealer recording that its
    failed attempts so far (under the current contract) no longer count. Evidence from a run
    forced past them (`git audit run --force`) counts from then on."""
    repo = repo_here()
    if plan is None:
        active = read_state(repo).active()
        if len(active) != 1:
            raise UsageError("name the plan with --plan", hint=f"plans: {', '.join(active)}")
        plan = active[0]
    outcome = reset_attempts(repo, signer_for(repo, key), plan, step, reason or "")
    if outcome.commit is None:
        say(f"step {step} of plan {plan!r} has no failed attempts to reset; nothing to do")
        return
    say(
        f"reset {outcome.count} failed attempt(s) of step {step} of plan {plan!r} "
        f"in {str(outcome.commit)[:12]}"
    )


@app.command("history")
def history_cmd(plan: PlanOpt = None, as_json: JsonOpt = False) -> None:
    """Every seal version (time, signer, reason, strengthened/weakened, digest, the request it
    answers), every sealed version of the plan's request, and every reset of a step's failed
    attempts."""
    repo = repo_here()
    require_known(repo, plan)
    entries = history(repo, plan)
    resets = reset_history(repo, plan)
    asked = request_history(repo, plan)
    answers = {r.record.request_digest: r.record.version for r in asked}
    moves: dict[int, tuple[list[str], list[str]]] = {}
    for i, e in enumerate(entries):
        before = next((p for p in entries[i + 1 :] if p.record.plan == e.record.plan), None)
        moves[i] = migration(e.record.plan, before.plan_data if before else None, e.plan_data)
    # newest first, as both lists are: merged by position on the plans ref
    events: list[tuple[int, int, int]] = [(e.position, 1, i) for i, e in enumerate(entries)]
    events += [(r.position, 0, i) for i, r in enumerate(resets)]
    events += [(r.position, 2, i) for i, r in enumerate(asked)]
    events.sort(key=lambda ev: (-ev[0], ev[1]))
    if as_json:
        emit_json(
            [
                _seal_json(entries[i], moves[i])
                if kind == 1
                else _reset_json(resets[i])
                if kind == 0
                else {"commit": asked[i].commit, "time": asked[i].time, **asked[i].record.to_json()}
                for _pos, kind, i in events
            ]
        )
        return
    if not entries and not asked:
        say("no seals yet (run `git audit plan seal`)")
    for _pos, kind, i in events:
        if kind == 1:
            _print_seal(entries[i], moves[i], answers)
        elif kind == 0:
            _print_reset(resets[i])
        else:
            _print_request(asked[i])


def _when(time: int) -> str:
    return datetime.fromtimestamp(time, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _seal_json(e: HistoryEntry, move: tuple[list[str], list[str]]) -> dict[str, Any]:
    return {
        "commit": e.commit,
        "time": e.time,
        **e.record.to_json(),
        "migration": {"kept": move[0], "reopened": move[1]},
    }


def _reset_json(e: ResetEntry) -> dict[str, Any]:
    return {
        "commit": e.commit,
        "time": e.time,
        "change": "reset-attempts",
        "plan": e.reset.plan,
        "step": e.reset.step,
        "count": e.count,
        **e.reset.to_json(),
    }


def _print_seal(
    e: HistoryEntry, move: tuple[list[str], list[str]], answers: dict[str, int]
) -> None:
    r = e.record
    flag = " WEAKENED" if r.weakened else ""
    say(f"{e.commit[:12]} {_when(e.time)} {r.plan} v{r.version} {r.change}{flag} by {r.sealer}")
    say(f"    {r.contract_digest}" + (f"  reason: {r.reason}" if r.reason else ""))
    if r.request_digest is not None:
        say(f"    answers request v{answers.get(r.request_digest, '?')}")
    for w in r.weakenings:
        say(f"    weakened: {w}")
    for kind, paths in (r.amended or {}).items():
        if paths:
            say(f"    protected files {kind}: {', '.join(paths)}")
    kept, reopened = move
    if r.version > 1 and (kept or reopened):
        kept_text = ", ".join(kept) or "nothing"
        say(f"    evidence kept for: {kept_text}; reopened: {', '.join(reopened) or 'nothing'}")


def _print_request(e: RequestEntry) -> None:
    r = e.record
    flag = " WEAKENED" if r.weakened else ""
    say(
        f"{e.commit[:12]} {_when(e.time)} {r.plan} request v{r.version} {r.change}{flag} "
        f"by {r.sealer}"
    )
    say(f"    {r.request_digest}" + (f"  reason: {r.reason}" if r.reason else ""))
    for w in r.weakenings:
        say(f"    weakened: {w}")
    for w in r.strengthenings:
        say(f"    strengthened: {w}")


def _print_reset(e: ResetEntry) -> None:
    r = e.reset
    say(f"{e.commit[:12]} {_when(e.time)} {r.plan} reset-attempts {r.step} by {r.sealer}")
    say(f"    {e.count} failed attempt(s) no longer count  reason: {r.reason}")


def _contract_at(repo: Repo, name: str, version: str) -> tuple[str, dict[str, Any]]:
    """The contract of seal version *version* ("working" = the working copy, "sealed" = current)."""
    if version == "working":
        (c,) = check_worktree(repo.require_workdir(), name)
        return "working copy", contract(c.require_valid())
    state = read_state(repo)
    if version == "sealed":
        sealed, record = sealed_contract(state, name)
        if sealed is None or sealed.plan is None:
            raise UsageError(
                f"plan {name!r} is not sealed", hint=f"run `git audit plan seal --plan {name}`"
            )
        return f"sealed v{record.version if record else '?'}", contract(sealed.plan)
    for e in history(repo, name):
        if str(e.record.version) == version.lstrip("v") and e.plan_data is not None:
            c = check_file(
                PlanFile(name, f"seal v{e.record.version}", e.plan_data), environment=False
            )
            return f"sealed v{e.record.version}", contract(c.require_valid())
    raise UsageError(
        f"plan {name!r} has no seal version {version!r}", hint="see `git audit plan history`"
    )


@app.command("diff")
def diff_cmd(
    a: Annotated[
        str, typer.Argument(help="A seal version (e.g. 2), 'sealed' or 'working'.")
    ] = "sealed",
    b: Annotated[str, typer.Argument(help="A seal version, 'sealed' or 'working'.")] = "working",
    plan: PlanOpt = None,
) -> None:
    """The contract difference between two seal versions, or the seal and the working copy, of
    one plan or of every plan (in the work tree or sealed as active)."""
    repo = repo_here()
    require_known(repo, plan)
    if plan is not None:
        names = [plan]
    else:
        names = sorted(
            {f.name for f in discover_worktree(repo.require_workdir())}
            | set(read_state(repo).active())
        )
        if not names:
            raise UsageError("there are no plans yet", hint="create one with `git audit init`")
    for name in names:
        label_a, old = _contract_at(repo, name, a)
        label_b, new = _contract_at(repo, name, b)
        comparison = compare(old, new)
        say(f"{name}: {label_a} -> {label_b}: {comparison.summary()}")
        for change in comparison.changes:
            say(f"  {change.kind:<12} {change.render()}")
        if (a, b) == ("sealed", "working"):
            _protected_diff(repo, name)
        if b == "working":
            _request_diff(repo, name)


def _protected_diff(repo: Repo, name: str) -> None:
    """The protected files of *name* that differ between its seal and the work tree."""
    from gitaudit.git.fingerprint import workspace_fingerprint
    from gitaudit.ledger.protected import differences, protected_files

    state = read_state(repo)
    sealed = state.protected(name)
    (c,) = check_worktree(repo.require_workdir(), name)
    if sealed is None or c.plan is None:
        return
    tree = workspace_fingerprint(repo.require_workdir()).tree
    changes = differences(sealed, protected_files(repo.git, tree, c.plan))
    for kind, paths in changes.paths().items():
        for path in paths:
            say(f"  {'protected':<12} {path} {kind} (needs `plan seal --amend`)")


def _request_diff(repo: Repo, name: str) -> None:
    """How the working copy of *name* fails to answer its sealed request (what sealing it
    would be refused for)."""
    from gitaudit.plan.request import gaps

    request = read_state(repo).request(name)
    (c,) = check_worktree(repo.require_workdir(), name)
    if request is None or c.plan is None:
        return
    for gap in gaps(request, c.plan):
        say(f"  {'request':<12} {gap.message} (the sealed request must be answered)")


@app.command("inspect")
def inspect_cmd(plan: PlanOpt = None, as_json: JsonOpt = False) -> None:
    """Whether each working copy matches its seal, and what differs. Exit 1 when any differs."""
    repo = repo_here()
    state = read_state(repo)
    names = sorted(
        {c.name for c in check_worktree(repo.require_workdir(), plan)}
        | (set(state.active()) if plan is None else set())
    )
    report = []
    ok = True
    for name in names:
        sealed, record = sealed_contract(state, name)
        try:
            (c,) = check_worktree(repo.require_workdir(), name)
        except UsageError:
            c = None
        entry: dict[str, Any] = {"plan": name, "sealed_version": record.version if record else None}
        if c is None:
            entry.update(state="missing", message="sealed as active but the plan file is missing")
        elif sealed is None or sealed.plan is None:
            entry.update(state="unsealed", message="not sealed (run `git audit plan seal`)")
        elif c.digest == sealed.digest:
            entry.update(
                state="matches", message=f"matches seal v{record.version if record else '?'}"
            )
        elif c.plan is None or not c.report.valid:
            entry.update(state="invalid", message="the working copy is invalid")
        else:
            cmp = compare(contract(sealed.plan), contract(c.plan))
            entry.update(
                state="differs",
                message=f"differs from seal v{record.version if record else '?'}: {cmp.summary()}",
                changes=[
                    {"kind": ch.kind, "where": ch.where, "message": ch.message}
                    for ch in cmp.changes
                ],
            )
        ok = ok and entry["state"] == "matches"
        report.append(entry)
    if as_json:
        emit_json({"plans": report})
    else:
        for entry in report:
            say(f"{entry['plan']}: {entry['message']}")
            for ch in entry.get("changes", []):
                say(f"  {ch['kind']:<12} {ch['where']}: {ch['message']}")
    exit_with(ExitCode.OK if ok else ExitCode.FAIL)
