"""`git audit request ...`: seal, show and diff the user's request (the requirements of a plan,
kept apart from the plan: docs/plan-format.md#the-request)."""

from __future__ import annotations

from typing import Annotated, Any

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
)
from gitaudit.errors import ExitCode, UsageError
from gitaudit.git.repo import Repo
from gitaudit.ledger.plansref import PlansState, read_state, sealed_contract
from gitaudit.ledger.request_ops import seal_request
from gitaudit.ledger.requests import request_path
from gitaudit.plan.request import (
    REQUESTS_DIR,
    Request,
    compare_requests,
    gaps,
    implicit,
    parse_request,
    read_worktree,
    worktree_names,
)

app = typer.Typer(
    help="Seal and show the user's request: the requirements a plan must answer.",
    context_settings=CONTEXT,
    no_args_is_help=True,
)


def _names(repo: Repo, plan: str | None, state: PlansState | None = None) -> list[str]:
    """The plan named, or every plan with a request file or a sealed request."""
    names = set(worktree_names(repo.require_workdir()))
    if state is not None:
        names |= set(state.requested())
    if plan is not None:
        if plan not in names:
            have = ", ".join(sorted(names)) or "none"
            raise UsageError(
                f"no request for plan {plan!r} (requests: {have})",
                hint=f"write {REQUESTS_DIR}/{plan}.json (docs/plan-format.md#the-request)",
            )
        return [plan]
    if not names:
        raise UsageError(
            f"no requests in {REQUESTS_DIR}/",
            hint=f"write {REQUESTS_DIR}/<plan>.json: the requirements the user asks for",
        )
    return sorted(names)


def _working(repo: Repo, name: str) -> Request | None:
    data = read_worktree(repo.require_workdir(), name)
    if data is None:
        return None
    return parse_request(data, name=name, source=f"{REQUESTS_DIR}/{name}.json")


@app.command("seal")
def seal_cmd(
    plan: PlanOpt = None,
    reason: Annotated[
        str | None,
        typer.Option("--reason", "-m", help="Why; recorded in the request seal and the commit."),
    ] = None,
    allow_weaken: Annotated[
        bool,
        typer.Option(
            "--allow-weaken",
            help="Record a weakening (a requirement dropped, lowered or rewritten) instead of "
            "refusing it (needs --reason).",
        ),
    ] = False,
    key: KeyOpt = None,
) -> None:
    """Seal the request files (.gitaudit/requests/<plan>.json) on refs/audit/plans: a sealer's
    signed change. Planners may then seal plans that answer them, and nothing less."""
    repo = repo_here()
    workdir = repo.require_workdir()
    names = _names(repo, plan)
    files = []
    for name in names:
        data = read_worktree(workdir, name)
        if data is None:
            raise UsageError(
                f"{REQUESTS_DIR}/{name}.json does not exist",
                hint="write the request first (docs/plan-format.md#the-request)",
            )
        source = f"{REQUESTS_DIR}/{name}.json"
        parse_request(data, name=name, source=source)  # every file valid before any is sealed
        files.append((name, data, source))
    signer = signer_for(repo, key)
    for name, data, source in files:
        outcome = seal_request(
            repo, signer, name, data, source=source, reason=reason, allow_weaken=allow_weaken
        )
        say(outcome.message)
        if outcome.commit is not None and outcome.comparison is not None:
            for change in outcome.comparison.changes:
                say(f"  {change.kind:<12} {change.render()}")
        if not outcome.planned:
            say(f"  no plan is sealed for it yet: `git audit plan seal --plan {name}`")
        elif outcome.gaps:
            say(
                f"  the sealed plan {name!r} does not answer it yet (the gate FAILs until it does):"
            )
            for gap in outcome.gaps:
                say(f"    {gap.message}")


def _show_entry(state: PlansState, repo: Repo, name: str) -> dict[str, Any]:
    record = state.requests.get(name)
    sealed = state.request(name)
    working = _working(repo, name)
    checked, seal = sealed_contract(state, name)
    plan = checked.plan if checked is not None else None
    shown = sealed or working
    if sealed is None:
        standing = "unsealed"
    elif working is None or _same_bytes(repo, state, name):
        standing = "sealed"
    else:
        standing = "differs"
    found = gaps(shown, plan) if shown is not None and plan is not None else ()
    return {
        "plan": name,
        "state": standing,
        "version": record.version if record and not record.retired else None,
        "plan_version": seal.version if seal and not seal.retired else None,
        "task": shown.task if shown else "",
        "requirements": [
            {
                "id": r.id,
                "priority": r.priority,
                "description": r.description,
                "covered_by": [s.id for s in plan.covering_steps(r.id)] if plan else [],
            }
            for r in (shown.requirements if shown else ())
        ],
        "answered": plan is not None and not found,
        "gaps": [g.message for g in found],
    }


def _same_bytes(repo: Repo, state: PlansState, name: str) -> bool:
    return read_worktree(repo.require_workdir(), name) == state.files.get(request_path(name))


@app.command("show")
def show_cmd(plan: PlanOpt = None, as_json: JsonOpt = False) -> None:
    """Each request (sealed, else the working file): its requirements, the steps of the sealed
    plan that cover them, and whether that plan answers it. Exit 1 unless every request is
    sealed as it is in the work tree and answered."""
    repo = repo_here()
    state = read_state(repo)
    entries = [_show_entry(state, repo, name) for name in _names(repo, plan, state)]
    ok = all(e["state"] == "sealed" and e["answered"] for e in entries)
    if as_json:
        emit_json({"requests": entries})
        exit_with(ExitCode.OK if ok else ExitCode.FAIL)
    for e in entries:
        version = f"v{e['version']}" if e["version"] else "not sealed"
        standing = {"sealed": "", "differs": " (the working file differs: `request diff`)"}
        say(f"request {e['plan']} {version}{standing.get(e['state'], '')}: {e['task'] or ''}")
        for r in e["requirements"]:
            covered = ", ".join(r["covered_by"]) or "no step"
            say(f"  {r['id']} [{r['priority']}] {r['description']}  <- {covered}")
        if e["plan_version"] is None:
            say(f"  no plan is sealed for it: `git audit plan seal --plan {e['plan']}`")
        elif e["answered"]:
            say(f"  answered by plan {e['plan']!r} v{e['plan_version']}")
        else:
            say(f"  plan {e['plan']!r} v{e['plan_version']} does not answer it:")
            for gap in e["gaps"]:
                say(f"    {gap}")
    exit_with(ExitCode.OK if ok else ExitCode.FAIL)


@app.command("diff")
def diff_cmd(plan: PlanOpt = None) -> None:
    """The classified changes from the sealed request (or, for a plan in the single-file form,
    its sealed requirements) to the working request file."""
    repo = repo_here()
    state = read_state(repo)
    for name in _names(repo, plan, state):
        working = _working(repo, name)
        sealed = state.request(name)
        label = f"sealed v{state.requests[name].version}" if sealed is not None else ""
        if sealed is None:
            checked, seal = sealed_contract(state, name)
            if checked is not None and checked.plan is not None and seal is not None:
                sealed, label = implicit(checked.plan), f"plan v{seal.version} requirements"
        if working is None or sealed is None:
            what = "no working request file" if working is None else "nothing sealed to compare"
            say(f"{name}: {what}")
            continue
        comparison = compare_requests(sealed, working)
        say(f"{name}: {label} -> working copy: {comparison.summary()}")
        for change in comparison.changes:
            say(f"  {change.kind:<12} {change.render()}")
