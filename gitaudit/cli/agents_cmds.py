"""`git audit agents ...`: the registry of agents working side by side (refs/audit/agents)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from gitaudit.cli.common import CONTEXT, JsonOpt, KeyOpt, PlanOpt, emit_json, repo_here, say, warn
from gitaudit.cli.context import signer_for
from gitaudit.errors import UsageError
from gitaudit.git.fingerprint import workspace_fingerprint
from gitaudit.git.repo import Repo
from gitaudit.ledger import agent_ops
from gitaudit.ledger.agents import (
    DEFAULT_LEASE,
    Claim,
    Registry,
    check_name,
    read_registry,
)
from gitaudit.ledger.plansref import PlansState, read_state
from gitaudit.plan.catalog import check_worktree
from gitaudit.plan.durations import parse_duration
from gitaudit.plan.globs import GlobError, canonical

app = typer.Typer(
    help="Agents working side by side: register, heartbeat, claim steps and paths, release.",
    context_settings=CONTEXT,
    no_args_is_help=True,
)

AgentOpt = Annotated[
    str | None,
    typer.Option(
        "--agent",
        "-a",
        help="The agent (default: $GITAUDIT_AGENT, else the one registered to the key).",
    ),
]


def _which(reg: Registry, signer_key: str, given: str | None) -> str:
    name = given or os.environ.get("GITAUDIT_AGENT") or None
    if name is not None:
        check_name(name)
        reg.agent(name)  # one line for an unknown agent
        return name
    mine = [a.name for a in reg.agents.values() if a.key == signer_key]
    if len(mine) == 1:
        return mine[0]
    raise UsageError(
        "which agent? " + ("none is registered to this key" if not mine else f"{', '.join(mine)}"),
        hint="pass --agent NAME or set GITAUDIT_AGENT (register with `git audit agents register`)",
    )


def _setup(key: Path | None) -> tuple[Repo, Any, PlansState]:
    repo = repo_here()
    return repo, signer_for(repo, key), read_state(repo)


def _tell(written: agent_ops.Written) -> None:
    for line in written.warnings:
        warn(f"warning: {line}")


@app.command("register")
def register_cmd(
    name: Annotated[str, typer.Argument(help="The agent's name (a safe basename).")],
    lease: Annotated[
        str, typer.Option("--lease", help="How long a heartbeat keeps its claim live.")
    ] = f"{DEFAULT_LEASE // 60}m",
    key: KeyOpt = None,
) -> None:
    """Register an agent, bound to the signing key (again: a new lease and a heartbeat)."""
    seconds = parse_duration(lease)
    if seconds is None:
        raise UsageError(f"--lease {lease!r} is not a duration", hint="e.g. 15m, 1h, 90s")
    repo, signer, plans = _setup(key)
    written = agent_ops.register(repo, signer, plans, name, seconds)
    say(f"agent {name}: registered (lease {lease}), record #{written.registry.seq}")


@app.command("heartbeat")
def heartbeat_cmd(agent: AgentOpt = None, key: KeyOpt = None) -> None:
    """Say the agent is alive: its claim stays live for another lease."""
    repo, signer, plans = _setup(key)
    name = _which(read_registry(repo, plans), signer.public_key.fingerprint(), agent)
    written = agent_ops.heartbeat(repo, signer, plans, name)
    held = f"; holds {written.claim.describe()}" if written.claim else ""
    say(f"agent {name}: heartbeat, record #{written.registry.seq}{held}")


def cwd_prefix(workdir: Path) -> str:
    """The current folder relative to the work tree's root ("" at the root or outside)."""
    try:
        rel = Path.cwd().resolve().relative_to(workdir.resolve())
    except ValueError:
        return ""
    return "" if str(rel) == "." else rel.as_posix()


def _plan_of(workdir: Path, plan: str | None, step: str) -> str:
    checked = check_worktree(workdir, plan)
    having = [c.name for c in checked if c.plan is not None and c.plan.step(step) is not None]
    if plan is not None and not having:
        raise UsageError(f"plan {plan!r} has no step {step!r}", hint="see `git audit plan show`")
    if len(having) != 1:
        where = f"plans {', '.join(having)} have" if having else "no plan has"
        raise UsageError(f"{where} a step {step!r}", hint="name the plan with --plan")
    return having[0]


@app.command("claim")
def claim_cmd(
    step: Annotated[str, typer.Argument(help="The step to work on.")],
    paths: Annotated[
        list[str] | None,
        typer.Option("--paths", help="Paths or globs the agent will change (repeatable)."),
    ] = None,
    plan: PlanOpt = None,
    agent: AgentOpt = None,
    key: KeyOpt = None,
) -> None:
    """Claim a step and the paths its agent will change. Paths are canonical and
    workspace-relative (relative to the current folder when given inside it), so no spelling
    dodges a conflict; a stale claim on the step is taken over (recorded)."""
    repo, signer, plans = _setup(key)
    workdir = repo.require_workdir()
    prefix = cwd_prefix(workdir)
    try:
        globs = tuple(dict.fromkeys(canonical(p, prefix) for p in paths or []))
    except GlobError as exc:
        raise UsageError(f"--paths {exc}", hint="give paths inside the work tree") from None
    name = _which(read_registry(repo, plans), signer.public_key.fingerprint(), agent)
    plan_name = _plan_of(workdir, plan, step)
    base = workspace_fingerprint(workdir).tree
    written = agent_ops.claim(repo, signer, plans, name, plan_name, step, globs, base)
    _tell(written)
    assert written.claim is not None
    say(f"agent {name}: {written.claim.describe()}, from tree {base[:12]}")


@app.command("release")
def release_cmd(agent: AgentOpt = None, key: KeyOpt = None) -> None:
    """Release the agent's claim (and acknowledge one taken over while it was stale)."""
    repo, signer, plans = _setup(key)
    name = _which(read_registry(repo, plans), signer.public_key.fingerprint(), agent)
    written = agent_ops.release(repo, signer, plans, name)
    if not written.changed:
        say(f"agent {name}: holds no claim; nothing to do")
    else:
        assert written.claim is not None
        say(f"agent {name}: released {written.claim.describe()}")


def claim_json(claim: Claim, reg: Registry, plans: PlansState, now: float) -> dict[str, Any]:
    return {
        **claim.to_json(),
        "live": reg.live(claim, now, plans.trust),
    }


def _age(now: float, then: int) -> str:
    return f"{int(now - then)}s ago"


@app.command("list")
def list_cmd(as_json: JsonOpt = False) -> None:
    """The registered agents, their heartbeats and claims (live or stale), verified."""
    repo = repo_here()
    plans = read_state(repo)
    reg = read_registry(repo, plans)
    now = time.time()
    if as_json:
        emit_json(
            {
                "tip": str(reg.tip) if reg.tip else None,
                "seq": reg.seq,
                "mode": plans.policy.agents,
                "agents": [
                    {
                        "name": a.name,
                        "key": a.key,
                        "lease": a.lease,
                        "heartbeat": a.heartbeat,
                        "stale": a.stale(now),
                        "claim": claim_json(a.claim, reg, plans, now) if a.claim else None,
                        "lost": a.lost.to_json() if a.lost else None,
                    }
                    for a in reg.agents.values()
                ],
            }
        )
        return
    if not reg.agents:
        say("no agents are registered (`git audit agents register NAME`)")
        return
    say(f"{len(reg.agents)} agent(s), {reg.seq} record(s), mode {plans.policy.agents}")
    for a in sorted(reg.agents.values(), key=lambda a: a.name):
        state = "stale" if a.stale(now) else "live"
        say(f"  {a.name:<16} {state:<5} heartbeat {_age(now, a.heartbeat)}, lease {a.lease}s")
        if a.claim:
            say(f"    holds {a.claim.describe()}")
        if a.lost:
            say(f"    lost claim #{a.lost.seq} on step {a.lost.step} (taken over while stale)")


def holders(repo: Repo, plans: PlansState, plan: str) -> dict[str, tuple[str, bool]]:
    """step -> (agent, live) for the claims on *plan*'s steps; empty without a registry."""
    reg = read_registry(repo, plans)
    now = time.time()
    return {
        c.step: (c.agent, reg.live(c, now, plans.trust)) for c in reg.claims() if c.plan == plan
    }
