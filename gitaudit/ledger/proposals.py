"""Proposals of plans changes that need several sealers: list, approve, apply, prune; what the
server accepts on ``refs/audit/proposals/*``; which of them ``git audit push`` sends.

A proposal is read from this repository's ``refs/audit/proposals/<id>`` and from every fetched
copy (``refs/gitaudit/remotes/<remote>/audit/proposals/<id>``), each copy's tip signed by a
sealer trusted now; their approvals are merged (each is a signature over the same statement, see
:mod:`gitaudit.ledger.approvals`). Approving adds the caller's signature in a new proposal commit
(on the fetched copy, so pushing it is a fast-forward); once the approvers reach what the change
needs, the change is applied: one commit on ``refs/audit/plans`` whose parent is the proposal's,
carrying ``approvals.json``, checked with the same rules every reader applies before the ref
moves (compare-and-swap). When the plans ref has moved since, the proposal is stale and its
approvals count for nothing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pygit2

from gitaudit.crypto.commits import create_signed_commit, verify_commit
from gitaudit.crypto.signers import Signer
from gitaudit.errors import GitAuditError, LedgerError, SealError, UsageError
from gitaudit.frozen import frozen
from gitaudit.git.call import run_git
from gitaudit.git.environment import NO_HOOKS
from gitaudit.git.repo import Repo
from gitaudit.ledger import chain, watermark
from gitaudit.ledger.approvals import (
    APPROVALS_PATH,
    Approvals,
    Proposal,
    change_digest,
    needed,
    proposal_ref,
    read_proposal,
    write_proposal,
)
from gitaudit.ledger.objects import commit_of, dumps, loads, read_files, write_tree
from gitaudit.ledger.plansref import (
    PlansState,
    SealRecord,
    read_state,
    state_at,
    transition_problem,
)
from gitaudit.ledger.refs import (
    MIRROR,
    PLANS_REF,
    PROPOSALS_PREFIX,
    ZERO,
    RefConflict,
    cas_update,
    list_refs,
    mirror_ref,
    read_ref,
)
from gitaudit.ledger.trust import policy_from_tree, trust_from_tree

LOCAL = "local"
# pending: waits for approvals · ready: has them, `approve` applies it · applied: on the plans ref
# · stale: the plans ref moved on without it · behind: this clone's plans ref is older than it
STATES = ("pending", "ready", "applied", "stale", "behind")


@frozen
class ProposalView:
    """One proposal, its copies merged, as this clone sees it."""

    proposal: Proposal  # approvals of every copy merged
    approvers: tuple[str, ...]  # the distinct sealers (of its parent) whose approvals verify
    required: int  # what its change needs by the parent's policy (the proposal's word if unknown)
    state: str  # see STATES
    sources: tuple[str, ...]  # "local" and/or the remotes whose copy was read
    applied_in: str | None = None
    ignored: tuple[str, ...] = ()  # copies that were not read, and why
    # the kinds its change makes on its parent (the proposal's word when this clone cannot
    # tell): never only what its proposal.json says, which whoever wrote it chose
    kinds: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        p = self.proposal
        return {
            "id": p.id,
            "summary": p.summary,
            "kinds": list(self.kinds),
            "state": self.state,
            "approvals": len(self.approvers),
            "required": self.required,
            "approvers": list(self.approvers),
            "parent": p.parent,
            "change": p.change,
            "proposer": p.proposer,
            "proposed_at": p.proposed_at,
            "sources": list(self.sources),
            "applied_in": self.applied_in,
            "ignored": list(self.ignored),
        }


@frozen
class _Copy:
    source: str
    ref: str
    proposal: Proposal


def _copy_refs(git: pygit2.Repository, pid: str | None = None) -> list[tuple[str, str]]:
    """(source, ref) of every copy of proposal *pid* (all proposals when None)."""
    found = []
    for ref in sorted(list_refs(git, PROPOSALS_PREFIX)):
        if pid is None or ref == proposal_ref(pid):
            found.append((LOCAL, ref))
    for ref in sorted(list_refs(git, f"{MIRROR}/")):
        remote, sep, rest = ref.removeprefix(f"{MIRROR}/").partition("/audit/proposals/")
        if sep and remote and rest and (pid is None or rest == pid):
            found.append((remote, ref))
    return found


def _read_copies(
    repo: Repo, state: PlansState, pid: str | None = None
) -> tuple[dict[str, list[_Copy]], list[str]]:
    """Every readable copy by proposal id, and why the others were not read. A copy's tip must be
    signed by a sealer trusted now (nothing an unsigned or foreign copy holds is read)."""
    git = repo.git
    sealers = state.trust.with_role("sealer")
    copies: dict[str, list[_Copy]] = {}
    ignored: list[str] = []
    for source, ref in _copy_refs(git, pid):
        oid = read_ref(git, ref)
        if oid is None:
            continue
        try:
            verify_commit(git, oid, sealers)
            proposal = read_proposal(git, oid, ref)
        except GitAuditError as exc:
            ignored.append(f"{ref}: {exc.message}")
            continue
        if not ref.endswith(f"/{proposal.id}"):
            ignored.append(f"{ref}: holds proposal {proposal.id}")
            continue
        copies.setdefault(proposal.id, []).append(_Copy(source, ref, proposal))
    return copies, ignored


def _merged(copies: list[_Copy]) -> Proposal:
    first = copies[0].proposal
    approvals = first.approvals
    for copy in copies[1:]:
        approvals = approvals.merged(copy.proposal.approvals)
    return replace(first, approvals=approvals)


def _parent_state(git: pygit2.Repository, state: PlansState, parent: str) -> PlansState | None:
    """The plans state at *parent* when this clone's verified chain holds it."""
    if state.tip is not None and str(state.tip) == parent:
        return state
    try:
        oid = pygit2.Oid(hex=parent)
    except ValueError:
        return None
    if state.tip is None or oid not in git or not git.descendant_of(state.tip, oid):
        return None
    return state_at(git, commit_of(git, oid, PLANS_REF))


def _situation(
    git: pygit2.Repository, state: PlansState, proposal: Proposal
) -> tuple[str, str | None]:
    """(state, applied-in commit) of *proposal* against this clone's plans ref."""
    if state.tip is not None and str(state.tip) == proposal.parent:
        return "pending", None
    try:
        parent: pygit2.Oid | None = pygit2.Oid(hex=proposal.parent)
    except ValueError:
        parent = None
    if parent is not None and (parent not in git or state.tip is None):
        return "behind", None
    if parent is None or state.tip is None:
        return "stale", None
    if git.descendant_of(state.tip, parent):
        child = None
        for commit in chain.walk(git, state.tip, stop=parent, what=PLANS_REF):
            child = commit
        if child is not None and change_digest(read_files(git, child.tree)) == proposal.change:
            return "applied", str(child.id)
    elif git.descendant_of(parent, state.tip):
        return "behind", None
    return "stale", None


def _view(
    git: pygit2.Repository, state: PlansState, copies: list[_Copy], ignored: list[str]
) -> ProposalView:
    proposal = _merged(copies)
    situation, applied = _situation(git, state, proposal)
    at_parent = _parent_state(git, state, proposal.parent)
    trust = at_parent.trust if at_parent is not None else state.trust
    approvers = proposal.approvals.approvers(trust)
    required, kinds = proposal.required, proposal.kinds
    candidate = _candidate_state(git, proposal) if at_parent is not None else None
    if at_parent is not None and candidate is not None:
        kinds = needed(at_parent, candidate).kinds
    if situation == "pending":
        required = needed(state, candidate).required if candidate is not None else required
        if len(approvers) >= required:
            situation = "ready"
    return ProposalView(
        proposal,
        approvers,
        required,
        situation,
        tuple(dict.fromkeys(c.source for c in copies)),
        applied,
        tuple(i for i in ignored if f"/{proposal.id}:" in i),
        kinds,
    )


def _candidate_state(git: pygit2.Repository, proposal: Proposal) -> PlansState | None:
    """The plans state the proposal would make, parsed from its ``tree/`` (nothing is written),
    or None when it does not parse."""
    where = f"proposal {proposal.id}"
    try:
        commit = commit_of(git, proposal.commit, where) if proposal.commit else None
        if commit is None:
            return None
        tree = git[commit.tree["tree"].id]
        assert isinstance(tree, pygit2.Tree)
        seals = {
            path.removeprefix("seals/").removesuffix(".json"): SealRecord.from_json(
                loads(data), f"{where}: {path}"
            )
            for path, data in proposal.files.items()
            if path.startswith("seals/") and path.endswith(".json")
        }
        return PlansState(
            None,
            trust_from_tree(git, tree, where),
            policy_from_tree(git, tree, where),
            seals,
            proposal.files,
        )
    except (GitAuditError, KeyError, ValueError):
        return None


def list_proposals(repo: Repo) -> list[ProposalView]:
    """Every proposal this clone holds or has fetched, oldest first."""
    state = read_state(repo)
    copies, ignored = _read_copies(repo, state)
    views = [_view(repo.git, state, found, ignored) for found in copies.values()]
    return sorted(views, key=lambda v: (v.proposal.proposed_at, v.proposal.id))


def find(repo: Repo, pid: str) -> ProposalView:
    """The proposal whose id is or starts with *pid* (UsageError when none or several)."""
    state = read_state(repo)
    copies, ignored = _read_copies(repo, state)
    matches = sorted(i for i in copies if i.startswith(pid)) if pid else []
    if len(matches) != 1:
        known = ", ".join(sorted(copies)) or "none"
        why = "is ambiguous" if matches else "is not a proposal this clone holds"
        bad = [i for i in ignored if f"/{pid}" in i]
        raise UsageError(
            f"{pid!r} {why}" + (f" ({bad[0]})" if bad else ""),
            hint=f"proposals here: {known}; fetch the others' first (`git audit sync`)",
        )
    return _view(repo.git, state, copies[matches[0]], ignored)


def changed_paths(repo: Repo, view: ProposalView) -> dict[str, list[str]]:
    """The plans files the proposal adds, changes and deletes, against its parent (empty when
    this clone does not hold the parent)."""
    git = repo.git
    try:
        parent = commit_of(git, pygit2.Oid(hex=view.proposal.parent), PLANS_REF)
    except (GitAuditError, ValueError):
        return {}
    before = {p: d for p, d in read_files(git, parent.tree).items() if p != APPROVALS_PATH}
    after = dict(view.proposal.files)
    return {
        "added": sorted(after.keys() - before.keys()),
        "changed": sorted(p for p in after.keys() & before.keys() if after[p] != before[p]),
        "deleted": sorted(before.keys() - after.keys()),
    }


# --------------------------------------------------------------------------------- approving


@frozen
class ApproveOutcome:
    id: str
    approvers: tuple[str, ...]
    required: int
    applied: str | None  # the plans commit it was applied in (None: waits for approvals)
    already: bool = False  # it had been applied before this call


def approve(repo: Repo, signer: Signer, pid: str) -> ApproveOutcome:
    """Add *signer*'s approval to proposal *pid* and, when it then has the approvals its change
    needs, apply it to ``refs/audit/plans``. A stale proposal is refused (its approvals count for
    nothing); one this clone's plans ref is behind of asks for a sync first."""
    view = find(repo, pid)
    proposal = view.proposal
    if view.state == "applied":
        return ApproveOutcome(proposal.id, view.approvers, view.required, view.applied_in, True)
    git = repo.git
    state = read_state(repo)
    _require_current(view, state)
    state.trust.require(signer.public_key, "sealer")
    _require_stated(view)
    signed = replace(proposal, approvals=proposal.approvals.signed_by(signer))
    _record_locally(git, signer, signed, _copies_of(repo, state, proposal.id))
    commit, mine = _plans_commit(git, signer, state, signed)
    need = needed(state, mine)
    approvers = signed.approvals.approvers(state.trust)
    if len(approvers) < need.required:
        return ApproveOutcome(proposal.id, approvers, need.required, None)
    problem = transition_problem(state, mine, f"proposal {proposal.id}")
    if problem:
        raise SealError(
            f"not applied: {problem}",
            hint="the proposal breaks the sealing rules; make the change again with gitaudit",
        )
    try:
        cas_update(git, PLANS_REF, commit, state.tip, f"gitaudit: apply proposal {proposal.id}")
    except RefConflict:
        raise LedgerError(
            f"not applied: {PLANS_REF} moved meanwhile, so proposal {proposal.id} is stale",
            hint="make the change again on the current plans (a new proposal)",
        ) from None
    watermark.record(repo.gitdir, {PLANS_REF: str(commit)}, "verified", git)
    _delete_local(git, proposal.id)
    return ApproveOutcome(proposal.id, approvers, need.required, str(commit))


def _require_current(view: ProposalView, state: PlansState) -> None:
    pid = view.proposal.id
    parent = view.proposal.parent[:12]
    if view.state == "behind":
        raise LedgerError(
            f"proposal {pid} changes plans commit {parent}, which this clone's {PLANS_REF} "
            "does not have yet",
            hint="bring the plans ref in first: `git audit sync`",
        )
    if view.state == "stale":
        raise LedgerError(
            f"stale: {PLANS_REF} moved from {parent} to {str(state.tip)[:12]} since proposal "
            f"{pid} was made; approvals of a stale proposal do not count",
            hint="make the change again on the current plans: it becomes a new proposal",
        )


def _require_stated(view: ProposalView) -> None:
    """A proposal whose proposal.json names other kinds than its change makes was not written
    by this gitaudit's sealing commands: its reviewers were told another change."""
    p = view.proposal
    if tuple(p.kinds) != view.kinds:
        said = ", ".join(p.kinds) or "no weighed change"
        raise LedgerError(
            f"proposal {p.id} misstates its change: its proposal.json says {said}, its files "
            f"make {', '.join(view.kinds) or 'no weighed change'}; not approved",
            hint="have the change made again with gitaudit's own commands (a new proposal)",
        )


def _copies_of(repo: Repo, state: PlansState, pid: str) -> list[_Copy]:
    copies, _ = _read_copies(repo, state, pid)
    return copies.get(pid, [])


def _record_locally(
    git: pygit2.Repository, signer: Signer, signed: Proposal, copies: list[_Copy]
) -> None:
    """Make this clone's proposal ref hold *signed*'s approvals: a new signed commit on the most
    advanced copy (a fetched one when ours lacks it, so that pushing is a fast-forward)."""
    ref = proposal_ref(signed.id)
    local = read_ref(git, ref)
    tips = [c.proposal.commit for c in copies if c.proposal.commit is not None]
    ahead = [t for t in tips if t != local and not (local and git.descendant_of(local, t))]
    base = ahead[0] if ahead else local
    held = next((c.proposal for c in copies if c.proposal.commit == base), None)
    if held is not None and held.approvals == signed.approvals:
        if base != local and base is not None:
            cas_update(git, ref, base, local, f"gitaudit: proposal {signed.id} from a remote")
        return
    write_proposal(git, signer, signed, base, local, f"approve: {signed.id}")


def _plans_commit(
    git: pygit2.Repository, signer: Signer, state: PlansState, proposal: Proposal
) -> tuple[pygit2.Oid, PlansState]:
    """The signed plans commit applying *proposal* (objects only), with the approvals that
    count, and the state it makes."""
    counted = Approvals(proposal.parent, proposal.change, proposal.approvals.signatures)
    counted = counted.valid_only(state.trust)
    files = {**proposal.files, APPROVALS_PATH: dumps(counted.to_json())}
    message = (
        proposal.message.rstrip("\n")
        + f"\nAudit-Proposal: {proposal.id}\nAudit-Approved-By: "
        + ", ".join(counted.approvers(state.trust))
        + "\n"
    )
    assert state.tip is not None
    commit = create_signed_commit(
        git, tree=write_tree(git, files), parents=[state.tip], message=message, signer=signer
    )
    return commit, state_at(git, commit_of(git, commit, PLANS_REF))


def _delete_local(git: pygit2.Repository, pid: str) -> bool:
    ref = proposal_ref(pid)
    old = read_ref(git, ref)
    if old is None:
        return False
    proc = run_git([*NO_HOOKS, "update-ref", "-d", ref, str(old)], git_dir=git.path, check=False)
    return proc.code == 0


def prune(repo: Repo) -> list[str]:
    """Delete this clone's proposal refs that are applied or stale; their ids."""
    state = read_state(repo)
    copies, _ = _read_copies(repo, state)
    gone = []
    for pid, found in sorted(copies.items()):
        local = [c for c in found if c.source == LOCAL]
        if not local:
            continue
        situation, _ = _situation(repo.git, state, local[0].proposal)
        if situation in ("applied", "stale") and _delete_local(repo.git, pid):
            gone.append(pid)
    return gone


# ---------------------------------------------------------------------------- server, push


def check_update(
    git: pygit2.Repository, state: PlansState, ref: str, old: str, new: str
) -> str | None:
    """Why the server refuses this update of a proposal ref, or None. A proposal moves
    fast-forward only, each new commit signed by a sealer the server trusts, its tip a
    well-formed proposal of its own id; it is deleted only once stale (the server's plans ref
    moved past its parent)."""
    if not state.exists:
        return "the server has no refs/audit/plans yet: push it first"
    if new == ZERO:
        return _deletion_problem(git, state, ref, old)
    try:
        added, reached = chain.segment(
            git,
            pygit2.Oid(hex=new),
            None if old == ZERO else pygit2.Oid(hex=old),
            what=ref,
            linear=True,
        )
        if not reached:
            return "not a fast-forward (approve again to merge the approvals: `git audit approve`)"
        sealers = state.trust.with_role("sealer")
        for commit in reversed(added):
            verify_commit(git, commit.id, sealers)
    except GitAuditError as exc:
        return f"{exc.message} (a proposal is signed by a sealer trusted on the server)"
    return _content_problem(git, ref, new)


def _content_problem(git: pygit2.Repository, ref: str, new: str) -> str | None:
    """The pushed tip must be a well-formed proposal of the id its ref names."""
    try:
        proposal = read_proposal(git, pygit2.Oid(hex=new), ref)
    except GitAuditError as exc:
        return exc.message
    pid = ref.removeprefix(PROPOSALS_PREFIX)
    return None if proposal.id == pid else f"it holds proposal {proposal.id}, not {pid}"


def _deletion_problem(git: pygit2.Repository, state: PlansState, ref: str, old: str) -> str | None:
    try:
        proposal = read_proposal(git, pygit2.Oid(hex=old), ref)
    except GitAuditError:
        return None  # not a proposal at all: nothing is lost
    if proposal.parent == str(state.tip):
        return "a pending proposal cannot be deleted (refs/audit/plans is still at its parent)"
    return None


def pushable(repo: Repo, remote: str) -> list[str]:
    """This clone's proposal refs that *remote* (as last fetched) lacks or holds an ancestor
    of: pushing them is a fast-forward. A diverged one waits for `git audit approve`."""
    git = repo.git
    out = []
    for ref, ours in sorted(list_refs(git, PROPOSALS_PREFIX).items()):
        theirs = read_ref(git, mirror_ref(remote, ref))
        if theirs is None or theirs == ours or git.descendant_of(ours, theirs):
            out.append(ref)
    return out
