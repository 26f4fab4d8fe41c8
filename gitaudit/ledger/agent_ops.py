"""What `git audit agents` writes: register, heartbeat, claim and release, each one signed record
on ``refs/audit/agents`` (:mod:`gitaudit.ledger.agents`), refused with one line when the sealed
policy's ``agents`` mode does not allow it.

* ``serial``: one live claim at a time, whoever holds it.
* ``parallel-strict``: claims coexist when their paths cannot meet (:func:`gitaudit.plan.globs.
  overlap`, decided exactly); the gate does not count a run whose changes touch paths another
  live agent claims.
* ``parallel-warn``: overlapping claims are allowed with a warning, and so is such a run.

In every mode a step has one holder: a live claim on it is never shared, and a stale one is taken
over (recorded, and told to its agent at its next heartbeat).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gitaudit.crypto.signers import Signer
from gitaudit.frozen import frozen
from gitaudit.git.repo import Repo
from gitaudit.ledger.agents import (
    AgentError,
    Claim,
    Registry,
    append,
    check_name,
    read_registry,
)
from gitaudit.ledger.plansref import PlansState
from gitaudit.plan.globs import overlap


@frozen
class Written:
    """What an agents command did: the registry after it, the agent's claim, and what it should
    be told (overlaps allowed by ``parallel-warn``, a takeover)."""

    registry: Registry
    claim: Claim | None = None
    warnings: tuple[str, ...] = ()
    changed: bool = True


def _ignore_case(repo: Repo) -> bool:
    return (repo.config("core.ignorecase") or "").lower() == "true"


def _age(now: int, then: int) -> str:
    seconds = max(0, now - then)
    if seconds < 120:
        return f"{seconds}s ago"
    if seconds < 7200:
        return f"{seconds // 60}m ago"
    return f"{seconds // 3600}h ago"


def register(repo: Repo, signer: Signer, plans: PlansState, name: str, lease: int) -> Written:
    """Register agent *name* to the signing key (again: a new lease, and a heartbeat)."""
    check_name(name)
    if lease < 1:
        raise AgentError("a lease must be at least one second", hint="e.g. --lease 15m")
    fingerprint = signer.public_key.fingerprint()

    def build(reg: Registry, at: int) -> dict[str, Any]:
        current = reg.agents.get(name)
        if current is not None and current.key != fingerprint:
            raise AgentError(
                f"agent {name!r} is registered to another key ({current.key})",
                hint="choose another name, or sign with that agent's key (--key)",
            )
        return {"agent": name, "action": "register", "lease": lease}

    _, reg = append(repo, signer, plans, build)
    return Written(reg, reg.agents[name].claim)


def _own(reg: Registry, name: str, fingerprint: str) -> None:
    agent = reg.agent(name)
    if agent.key != fingerprint:
        raise AgentError(
            f"agent {name!r} is registered to key {agent.key}, not to the signing key "
            f"{fingerprint}",
            hint="sign with the agent's own key (--key or $GITAUDIT_SIGNING_KEY)",
        )


def _conflicts(
    reg: Registry, plans: PlansState, mine: Claim, now: int, ignore_case: bool
) -> tuple[list[Claim], list[Claim]]:
    """Live claims of other agents that *mine* may not coexist with under the policy's mode,
    and those it merely overlaps (allowed with a warning)."""
    mode = plans.policy.agents
    refused: list[Claim] = []
    overlapping: list[Claim] = []
    for other in reg.live_claims(now, plans.trust):
        if other.agent == mine.agent:
            continue
        if mode == "serial" or (other.plan, other.step) == (mine.plan, mine.step):
            refused.append(other)
            continue
        meets = any(overlap(a, b, ignore_case) for a in mine.paths for b in other.paths)
        if meets:
            (refused if mode == "parallel-strict" else overlapping).append(other)
    return refused, overlapping


def heartbeat(repo: Repo, signer: Signer, plans: PlansState, name: str) -> Written:
    """Prove the agent is alive: its claim stays (or becomes again) live. Refused when its claim
    was taken over while it was stale (``release`` acknowledges that), or when reviving its
    stale claim would now conflict with another live claim."""
    fingerprint = signer.public_key.fingerprint()
    ignore_case = _ignore_case(repo)

    def build(reg: Registry, at: int) -> dict[str, Any]:
        _own(reg, name, fingerprint)
        agent = reg.agents[name]
        if agent.lost is not None:
            lost = agent.lost
            taker = reg.holder(lost.plan, lost.step)
            by = f" by agent {taker.agent}" if taker is not None else ""
            raise AgentError(
                f"agent {name}'s stale claim #{lost.seq} on step {lost.step} was taken over{by}",
                hint=f"acknowledge with `git audit agents release --agent {name}`, then claim "
                "another step (`git audit next` shows the unclaimed ones)",
            )
        if agent.claim is not None and agent.stale(at):
            refused, _ = _conflicts(reg, plans, agent.claim, at, ignore_case)
            if refused:
                raise AgentError(
                    f"agent {name}'s claim #{agent.claim.seq} went stale (heartbeat "
                    f"{_age(at, agent.heartbeat)}, lease {agent.lease}s) and now conflicts "
                    f"with {refused[0].describe()}",
                    hint=f"release it (`git audit agents release --agent {name}`) and claim "
                    "again once the other claim is released",
                )
        return {"agent": name, "action": "heartbeat"}

    _, reg = append(repo, signer, plans, build)
    return Written(reg, reg.agents[name].claim)


def claim(
    repo: Repo,
    signer: Signer,
    plans: PlansState,
    name: str,
    plan: str,
    step: str,
    paths: Sequence[str],
    base: str,
) -> Written:
    """Claim *step* of *plan* and the canonical globs *paths* for agent *name*, from the work
    tree fingerprinted as *base*. A stale claim on the step is taken over (recorded)."""
    fingerprint = signer.public_key.fingerprint()
    ignore_case = _ignore_case(repo)
    warnings: list[str] = []

    def build(reg: Registry, at: int) -> dict[str, Any]:
        warnings.clear()
        _own(reg, name, fingerprint)
        agent = reg.agents[name]
        if agent.claim is not None:
            raise AgentError(
                f"agent {name} already holds {agent.claim.describe()}",
                hint=f"release it first: `git audit agents release --agent {name}`",
            )
        mine = Claim(name, plan, step, tuple(paths), base, reg.seq + 1, at)
        refused, overlapping = _conflicts(reg, plans, mine, at, ignore_case)
        if refused:
            other = refused[0]
            holder = reg.agents[other.agent]
            why = {
                "serial": "the policy's agents mode is serial: one live claim at a time",
                "parallel-strict": "their paths overlap, and the policy's agents mode is "
                "parallel-strict",
            }.get(plans.policy.agents, "")
            if (other.plan, other.step) == (plan, step):
                why = "a step has one holder"
            raise AgentError(
                f"{other.describe()} is live (heartbeat {_age(at, holder.heartbeat)}, lease "
                f"{holder.lease}s): {why}",
                hint="pick an unclaimed step (`git audit next`), or wait until it is released "
                "or goes stale",
            )
        warnings.extend(
            f"{o.describe()} overlaps these paths (allowed: the agents mode is parallel-warn)"
            for o in overlapping
        )
        draft: dict[str, Any] = {
            "agent": name,
            "action": "claim",
            "plan": plan,
            "step": step,
            "paths": tuple(paths),
            "base": base,
        }
        stale = reg.holder(plan, step)
        if stale is not None:
            draft["takeover"] = stale.agent
            warnings.append(f"took over the stale {stale.describe()}")
        return draft

    _, reg = append(repo, signer, plans, build)
    return Written(reg, reg.agents[name].claim, tuple(warnings))


def release(repo: Repo, signer: Signer, plans: PlansState, name: str) -> Written:
    """Release the agent's claim (and acknowledge one taken over while it was stale)."""
    fingerprint = signer.public_key.fingerprint()
    released: list[Claim] = []

    def build(reg: Registry, _at: int) -> dict[str, Any] | None:
        _own(reg, name, fingerprint)
        agent = reg.agents[name]
        if agent.claim is None and agent.lost is None:
            return None
        released[:] = [c for c in (agent.claim, agent.lost) if c is not None]
        return {"agent": name, "action": "release"}

    record, reg = append(repo, signer, plans, build)
    return Written(reg, released[0] if released else None, changed=record is not None)


def run_stamp(repo: Repo, plans: PlansState, name: str, plan: str) -> dict[str, Any]:
    """What a run made by agent *name* records about it (``run.json`` ``agent``): its name and
    its claim, if it holds one on *plan*. AgentError for an unknown agent."""
    check_name(name)
    reg = read_registry(repo, plans)
    agent = reg.agent(name)
    mine = agent.claim if agent.claim is not None and agent.claim.plan == plan else None
    return {
        "name": name,
        "key": agent.key,
        "registry": str(reg.tip),
        "claim": mine.to_json() if mine is not None else None,
    }
