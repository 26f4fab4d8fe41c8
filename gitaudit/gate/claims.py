"""Claims of agents side by side, as the gate applies them to evidence.

A run made by an agent records its name and its claim (``run.json`` ``agent``, from
``GITAUDIT_AGENT``). The run's *changes* are the paths that differ between the tree its claim was
made from (the claim's ``base``) and the tree it proved, or, for a run with no claim, between
its HEAD commit's tree and the tree it proved; and, for each other live claim, the paths that
differ between that claim's ``base`` and the tree the run proved (so a change committed before
the run, or made before the run's own claim, is no way around another's claim). When those
changes touch paths that another agent claims while that claim is live (its heartbeat within
its lease, its key still trusted), the sealed policy's ``agents`` mode decides: in
``parallel-strict`` and ``serial`` the run does not count (a FAIL naming both claims), in
``parallel-warn`` it counts with a warning beside the verdict (``status``, ``report``). The
gate reads the registry it holds; a registry that does not verify fails every plan, as a
tampered ledger does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pygit2

from gitaudit.crypto.commits import verify_commit
from gitaudit.errors import GitAuditError
from gitaudit.frozen import frozen
from gitaudit.gate.result import Reason
from gitaudit.git.repo import Repo
from gitaudit.ledger import watermark
from gitaudit.ledger.plansref import PlansState
from gitaudit.ledger.records import RunRecord
from gitaudit.ledger.refs import AGENTS_REF, read_ref
from gitaudit.plan.globs import touched

if TYPE_CHECKING:  # the registry's module is read only when the ref exists
    from gitaudit.ledger.agents import Claim, Registry

SHOWN = 5  # changed paths named per conflict


@frozen
class Agents:
    """The registry as the gate judges with it, or why it cannot be used."""

    registry: Registry | None = None  # None: there is no registry
    problem: Reason | None = None


def load(repo: Repo, state: PlansState, *, remember: bool = True) -> Agents:
    """The verified registry (nothing to read when the ref does not exist, unless its
    high-water mark says it did: a registry deleted since is a problem, not no registry)."""
    try:
        with watermark.view(repo.gitdir) as marks:
            tip = read_ref(repo.git, AGENTS_REF)
        if tip is None:
            watermark.check_forward(repo.git, repo.gitdir, AGENTS_REF, None, marks)
            return Agents()
        from gitaudit.ledger.agents import read_registry

        return Agents(read_registry(repo, state, remember=remember))
    except GitAuditError as exc:
        return Agents(
            problem=Reason(
                "agents.registry",
                f"{AGENTS_REF} cannot be trusted: {exc.message}",
                exc.hint or f"restore {AGENTS_REF} from a good copy",
            )
        )


def _stamp(record: RunRecord) -> tuple[str | None, Claim | None] | str:
    """The agent and claim a run records, or why its ``agent`` field is malformed."""
    raw: Any = record.doc.get("agent")
    if raw is None:
        return None, None
    from gitaudit.ledger.agents import Claim

    try:
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise TypeError("agent.name must be a string")
        claim = raw.get("claim")
        return raw["name"], None if claim is None else Claim.from_json(claim)
    except (KeyError, TypeError, ValueError) as exc:
        return f"run.json agent: {exc}"


def _tree(git: pygit2.Repository, rev: str | None) -> pygit2.Tree | None:
    if not rev:
        return None
    try:
        obj = git[pygit2.Oid(hex=rev)]
        return obj.peel(pygit2.Tree)
    except (KeyError, ValueError, pygit2.GitError):
        return None


def _impersonation(
    repo: Repo, state: PlansState, registry: Registry, record: RunRecord, name: str
) -> Reason | None:
    """A run may only name an agent registered to the key that signed it."""
    agent = registry.agents.get(name)
    try:
        signer = verify_commit(repo.git, record.commit, state.trust.with_role("runner"))
    except GitAuditError:
        return None  # the evidence check reports an untrusted run
    if agent is not None and agent.key == signer.fingerprint():
        return None
    whose = f"is registered to {agent.key}" if agent is not None else "is not registered"
    return Reason(
        "agents.impersonation",
        f"run {record.commit[:12]} names agent {name}, which {whose}, but the run is signed by "
        f"{signer.fingerprint()}",
        "run as an agent registered to your own key: `git audit agents register NAME`",
    )


def changes(git: pygit2.Repository, base: str | None, tree: str) -> list[str] | None:
    """The paths that differ between *base* (a tree or commit) and *tree*; None when either is
    not in the repository (then every claimed path counts as touched)."""
    after = _tree(git, tree)
    before = _tree(git, base) if base else None
    if after is None or (base and before is None):
        return None
    diff = after.diff_to_tree(swap=True) if before is None else before.diff_to_tree(after)
    paths: set[str] = set()
    for delta in diff.deltas:
        paths.update((delta.old_file.path, delta.new_file.path))
    return sorted(paths)


def judge(
    repo: Repo,
    state: PlansState,
    agents: Agents,
    plan: str,
    record: RunRecord | None,
    now: float,
) -> tuple[list[Reason], list[str]]:
    """Reasons (``parallel-strict``, ``serial``) or warnings (``parallel-warn``) for the run
    that proves *plan*, when its changes touch another live agent's claimed paths."""
    if agents.problem is not None:
        return [agents.problem], []
    registry = agents.registry
    if record is None or registry is None or not registry.agents:
        return [], []
    stamp = _stamp(record)
    if isinstance(stamp, str):
        return [
            Reason(
                "agents.stamp",
                f"run {record.commit[:12]} of plan {plan!r}: {stamp}",
                f"git audit run --plan {plan}",
            )
        ], []
    name, own = stamp
    if name is not None:
        false = _impersonation(repo, state, registry, record, name)
        if false is not None:
            return [false], []
    others = [c for c in registry.live_claims(now, state.trust) if c.agent != name and c.paths]
    if not others:
        return [], []
    base = own.base if own is not None else record.head
    changed = changes(repo.git, base, record.tree)
    ignore_case = (repo.config("core.ignorecase") or "").lower() == "true"
    who = own.describe() if own is not None else f"agent {name}" if name else "no agent"
    reasons: list[Reason] = []
    notes: list[str] = []
    strict = state.policy.agents != "parallel-warn"
    for other in others:
        # what changed since the run's own start, and since the other claim was made: a change
        # committed before the run (HEAD is then its base) or made before its own claim still
        # leaves the other's claimed paths unlike what that agent claimed
        since = changes(repo.git, other.base, record.tree)
        seen = None if changed is None or since is None else sorted({*changed, *since})
        hit = list(other.paths) if seen is None else touched(other.paths, seen, ignore_case)
        if not hit:
            continue
        more = f" and {len(hit) - SHOWN} more" if len(hit) > SHOWN else ""
        shown = ", ".join(hit[:SHOWN]) + more
        text = (
            f"run {record.commit[:12]} ({who}) changed {shown}, claimed by the live "
            f"{other.describe()}"
        )
        if strict:
            reasons.append(
                Reason(
                    "agents.conflict",
                    f"{text}; the policy's agents mode is {state.policy.agents}",
                    f"wait until agent {other.agent} releases its claim (or it goes stale), "
                    f"then `git audit run --plan {plan}`",
                )
            )
        else:
            notes.append(f"warning: {text}")
    return reasons, notes
