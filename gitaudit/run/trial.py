"""Trial runs for `git audit watch` without `--record`: the checks of the working copy of a
plan, run in the private checkout of the work tree's fingerprint, and nothing signed or
written to the ledger.

Between trials, a step whose input digest (:mod:`gitaudit.plan.inputs`: its contract, its
``inputs`` files or the whole tree, and its dependencies' digests) is the same as when it last
passed is carried from that trial instead of run again, as `git audit run` carries recorded
evidence; a producer whose outputs a step about to run needs is run too.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from gitaudit.checks import fence
from gitaudit.checks.environment import Sandbox
from gitaudit.crypto.resolve import configured_key_files
from gitaudit.frozen import frozen
from gitaudit.git import config_paths
from gitaudit.git.fingerprint import workspace_fingerprint
from gitaudit.git.repo import Repo
from gitaudit.plan.inputs import input_digests
from gitaudit.plan.model import Plan, StepId
from gitaudit.run import checkout
from gitaudit.run.recorder import _in_tree, _producers_run
from gitaudit.run.runner import Event, RunOutcome, RunRequest, execute
from gitaudit.verdict import PROVEN, RAN


@dataclass
class Memory:
    """What earlier trials of one plan proved: step -> the input digest it passed with."""

    passed: dict[StepId, str] = field(default_factory=dict)


@frozen
class Trial:
    tree: str
    outcome: RunOutcome
    ran: tuple[StepId, ...]  # executed: passed, failed, unknown or interrupted
    carried: tuple[StepId, ...]  # their inputs unchanged since they last passed here
    held: tuple[StepId, ...]  # neither: blocked, exhausted or not run (see their status)

    def states(self) -> Mapping[StepId, str]:
        """Mission-control states: verified, failed or pending."""
        named = {"failed": "failed"}
        return {
            sid: "verified" if o.status in PROVEN else named.get(o.status, "pending")
            for sid, o in self.outcome.steps.items()
        }


def trial(
    repo: Repo,
    plan: Plan,
    memory: Memory,
    *,
    jobs: int | None = None,
    on_event: Event | None = None,
) -> Trial:
    """Run the steps of *plan* whose inputs changed since they last passed; carry the rest."""
    workdir = repo.require_workdir()
    tree = workspace_fingerprint(workdir).tree
    digests = input_digests(repo.git, plan, tree)
    unchanged = {
        sid: f"trial:{digest[:12]}"
        for sid, digest in digests.items()
        if memory.passed.get(sid) == digest
    }
    _carried, incremental, _wanted = _producers_run(plan, {}, unchanged, [], _in_tree(repo, tree))
    unresolved = _open_outcomes(repo, plan.name)
    never = {sid: NEVER_IN_A_TRIAL for sid in _not_idempotent(repo, plan)}
    with checkout.acquire(repo.gitdir, workdir) as slot:
        placed = checkout.materialise(
            slot,
            repo.gitdir,
            workdir,
            tree,
            None,
            declared_filters=plan.filters,
            ignored_paths=plan.all_ignored_paths(),
        )
        sandbox = Sandbox(
            home=slot.home if plan.home == "private" else None,
            tmp=slot.tmp,
            repository=(workdir, repo.gitdir),
            opened=plan.all_ignored_paths(),
        )
        keys = fence.key_files(None, configured_key_files(repo.git.config, workdir))
        with fence.for_run(slot.root, keys=keys, named=config_paths.for_fence(workdir)) as wall:
            outcome = execute(
                RunRequest(
                    plan=plan,
                    workspace=slot.tree,
                    sandbox=sandbox,
                    live_workspace=workdir,
                    jobs=jobs or os.cpu_count() or 1,
                    incremental=incremental,
                    elsewhere=never,
                    unresolved=unresolved,
                    on_event=on_event,
                    fence=wall,
                )
            )
        checkout.leave_clean(placed, workdir, checkout.changed(placed))
    for sid, o in outcome.steps.items():
        if o.status in PROVEN:
            memory.passed[sid] = digests[sid]
        else:
            memory.passed.pop(sid, None)
    carried = tuple(s for s in outcome.order if s in incremental)
    ran = tuple(s for s in outcome.order if s not in incremental and outcome.steps[s].status in RAN)
    held = tuple(s for s in outcome.order if s not in incremental and s not in ran)
    return Trial(tree, outcome, ran, carried, held)


NEVER_IN_A_TRIAL = (
    "not idempotent: a trial never executes it (its effect is not undone, and a trial records "
    "nothing, not even an unknown outcome); `git audit run` does"
)


def _not_idempotent(repo: Repo, plan: Plan) -> frozenset[StepId]:
    """The steps of *plan* that are not idempotent in the work tree's plan file or under the
    sealed contract (or one a planner's reseals led from: :func:`reconcile_first`, as `git
    audit run` reads it): a trial executed deploy for real, and a timeout there was recorded
    nowhere, so the next run deployed again with no reconciliation."""
    from gitaudit.errors import GitAuditError
    from gitaudit.ledger.plansref import read_state, reconcile_first

    steps = {s.id for s in plan.steps if not s.idempotent}
    with contextlib.suppress(GitAuditError):  # nothing sealed to read: the plan file's word
        steps |= reconcile_first(repo.git, read_state(repo), plan.name)
    return frozenset(sid for sid in steps if plan.step(sid) is not None)


def _open_outcomes(repo: Repo, name: str) -> dict[StepId, str]:
    """The steps whose outcome the ledger holds open (unknown, not idempotent: to reconcile
    first), by `git audit run`'s own rule: a trial does not execute them again either (it
    deployed a second time). A plan without a ledger to read has none."""
    from gitaudit.errors import GitAuditError
    from gitaudit.ledger import index
    from gitaudit.ledger.plansref import read_state, reconcile_first
    from gitaudit.run.recorder import open_outcomes

    try:
        settle_first = reconcile_first(repo.git, read_state(repo), name)
        if not settle_first:
            return {}
        return open_outcomes(repo, index.tallies(repo.git, repo.gitdir, name), settle_first)
    except GitAuditError:
        return {}
