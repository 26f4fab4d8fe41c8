"""k of n: the plans-ref changes the policy says need several sealers, and the proof they agreed.

The policy's ``approvals`` (:class:`gitaudit.ledger.trust.Policy`) names, per **kind** of change,
how many distinct sealers must approve it: ``weaken`` (a weakened or retired seal, a laxer
policy, a runner key an evidence rule admits that it did not), ``amend`` (protected files
amended), ``trust`` (the trust set changed), ``policy`` (the policy changed) and ``request``
(the user's request changed: files under ``requests/``). A plans
commit whose change needs k > 1 sealers, by its **parent's** policy, must carry ``approvals.json``:
SSHSIG signatures (namespace ``gitaudit-approval``) over a statement binding the parent commit and
the digest of the commit's files, by at least k distinct sealers trusted in the parent. Approvals
of another parent (stale) or of another change, by untrusted keys, or a sealer's second signature
do not count. :func:`approval_problem` is that rule; every reader of the plans ref applies it per
commit (``plansref.transition_problem``): ``status``, ``verify``, ``pre-receive``.

Such a change starts as a **proposal**: ``refs/audit/proposals/<id>``, signed commits holding the
proposed plans files (``tree/``), what is proposed (``proposal.json``) and the approvals so far
(``approvals.json``). The id is derived from the statement, so proposing the same change on the
same parent twice finds the same proposal. :func:`propose` writes one (the proposer's approval
included); approving and applying are in :mod:`gitaudit.ledger.proposals`.

This module does not import :mod:`gitaudit.ledger.plansref` (which calls it): the states it
compares are described by the protocols below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, replace
from typing import Any, Protocol

import pygit2

from gitaudit.crypto import sshsig
from gitaudit.crypto.commits import create_signed_commit
from gitaudit.crypto.signers import Signer
from gitaudit.errors import ExitCode, GitAuditError, LedgerError
from gitaudit.frozen import frozen
from gitaudit.ledger.objects import commit_of, dumps, loads, read_files, write_tree
from gitaudit.ledger.protected import amendments, manifest_path, parse_manifest
from gitaudit.ledger.refs import PLANS_REF, PROPOSALS_PREFIX, cas_update, read_ref
from gitaudit.ledger.trust import APPROVAL_KINDS, Policy, TrustSet
from gitaudit.plan.catalog import check_file
from gitaudit.plan.digest import canonical, sha256
from gitaudit.plan.model import Plan
from gitaudit.plan.store import PlanFile

APPROVALS_PATH = "approvals.json"
APPROVALS_FORMAT = "gitaudit.approvals/1"
STATEMENT_FORMAT = "gitaudit.approval/1"
CHANGE_FORMAT = "gitaudit.change/1"
PROPOSAL_FORMAT = "gitaudit.proposal/1"
PROPOSAL_PATH = "proposal.json"
PROPOSED_PREFIX = "tree/"  # the proposed plans files, inside a proposal commit
NAMESPACE = "gitaudit-approval"
# where the user's request lives on the plans ref (the request/planner split): a change there is
# of kind "request"
REQUEST_PREFIXES = ("request/", "requests/", "request-seals/")
MAX_SIGNATURES = 64  # more than any trust set holds: a bigger list is refused, not verified
ID_LENGTH = 12


# ------------------------------------------------------------------------ what is compared


class SealLike(Protocol):
    """What the rules read of a seal record (``plansref.SealRecord``)."""

    @property
    def version(self) -> int: ...
    @property
    def contract_digest(self) -> str: ...
    @property
    def change(self) -> str: ...
    @property
    def weakened(self) -> bool: ...
    @property
    def retired(self) -> bool: ...
    @property
    def protected_digest(self) -> str | None: ...
    @property
    def amended(self) -> Mapping[str, tuple[str, ...]] | None: ...


class StateLike(Protocol):
    """What the rules read of one verified plans state (``plansref.PlansState``)."""

    @property
    def tip(self) -> pygit2.Oid | None: ...
    @property
    def trust(self) -> TrustSet: ...
    @property
    def policy(self) -> Policy: ...
    @property
    def seals(self) -> Mapping[str, SealLike]: ...
    @property
    def files(self) -> Mapping[str, bytes]: ...


@frozen
class Need:
    """What a change does that the policy weighs, and how many distinct sealers it needs."""

    kinds: tuple[str, ...]
    required: int  # 1: its signer alone

    def describe(self) -> str:
        return ", ".join(self.kinds) or "no weighed change"


def kinds_of(before: StateLike, after: StateLike) -> tuple[str, ...]:
    """The kinds of change (APPROVAL_KINDS order) the step from *before* to *after* makes."""
    found: set[str] = set()
    if after.policy.laxer_than(before.policy) or _newly_admitted(before, after):
        found.add("weaken")
    if before.policy.digest() != after.policy.digest():
        found.add("policy")
    if _trust_entries(before.trust) != _trust_entries(after.trust):
        found.add("trust")
    for name, new in after.seals.items():
        old = before.seals.get(name)
        if old is None or old.version == new.version:
            continue
        if new.weakened or new.retired:
            found.add("weaken")
        if (
            new.amended is not None
            or new.change == "amended"
            or _manifest_amended(before, after, name, old, new)
        ):
            found.add("amend")
    if any(
        before.files.get(p) != after.files.get(p)
        for p in set(before.files) | set(after.files)
        if p.startswith(REQUEST_PREFIXES)
    ):
        found.add("request")
    return tuple(k for k in APPROVAL_KINDS if k in found)


def needed(before: StateLike, after: StateLike) -> Need:
    """The approvals the step from *before* to *after* needs, by *before*'s policy: the most any
    of its kinds needs; for each kind whose number it lowers, that kind's number; and when it
    makes a key a sealer, the most any kind needs."""
    kinds = kinds_of(before, after)
    # lowering what a kind needs takes as many sealers as that kind needed: a protection is
    # never undone by fewer sealers than it protects with
    lowered = [k for kind, k in before.policy.approvals if after.policy.approvals_for(kind) < k]
    # nor is it by a new sealer key: whoever adds one holds one more approval of every kind
    if _new_sealer_keys(before.trust, after.trust):
        lowered += [k for _kind, k in before.policy.approvals]
    return Need(kinds, max([before.policy.approvals_for(k) for k in kinds] + lowered, default=1))


def _new_sealer_keys(before: TrustSet, after: TrustSet) -> bool:
    """Whether *after* lets a key seal that *before* did not (a key added as a sealer, another
    role's key made one, a sealer's name given another key)."""
    had = {k.key for k in before.keys if k.may("sealer")}
    return any(k.may("sealer") and k.key not in had for k in after.keys)


def _newly_admitted(before: StateLike, after: StateLike) -> bool:
    """Whether an evidence rule of *after*'s policy admits a runner key *before*'s trust set did
    not let it admit (a label the rule names given to a key, a key trusted with it, a name the
    rule names given to another key): a rule relaxed through the trust set, as widening it in
    policy.json would (:meth:`Policy.laxer_than`), is a weakening."""
    for rule in after.policy.evidence:
        had = {k.key for k in before.trust.keys if k.may("runner") and rule.admits(k)}
        if any(k.may("runner") and rule.admits(k) and k.key not in had for k in after.trust.keys):
            return True
    return False


def _trust_entries(trust: TrustSet) -> set[tuple[str, bytes, str, str]]:
    return {
        (k.name, k.key.raw, ",".join(sorted(k.roles)), ",".join(sorted(k.labels)))
        for k in trust.keys
    }


def _manifest_amended(
    before: StateLike, after: StateLike, name: str, old: SealLike, new: SealLike
) -> bool:
    """A new seal version changes protected content without saying so: another manifest under
    the same contract, no manifest at all where there was one (as a seal made before protection
    existed: nothing is protected), or under a new contract what ``plan seal`` calls an
    amendment (:func:`gitaudit.ledger.protected.amendments`): a file protected before and after
    with other content, one gone, or one the old plan protects new to the manifest (a
    ``conftest.py`` the agent added, taken in with a new step title)."""
    if old.protected_digest is None or new.retired:
        return False
    if new.protected_digest is None:
        return True
    if old.protected_digest == new.protected_digest:
        return False
    if old.contract_digest == new.contract_digest:
        return True
    path = manifest_path(name)
    try:
        was = parse_manifest(before.files.get(path, b""), path)
        now = parse_manifest(after.files.get(path, b""), path)
    except GitAuditError:
        return True
    return bool(amendments(was, now, _sealed_plan(before, name)))


def _sealed_plan(state: StateLike, name: str) -> Plan | None:
    """The plan *state* seals as *name*, parsed (None when it cannot be: then every file new to
    the manifest counts as an amendment)."""
    path = f"plans/{name}.json"
    data = state.files.get(path)
    if data is None:
        return None
    return check_file(PlanFile(name, f"{PLANS_REF}:{path}", data), environment=False).plan


def lockout_problem(trust: TrustSet, policy: Policy) -> str | None:
    """Why *policy* would need more distinct sealers than *trust* holds (nothing of that kind
    could ever change again), if it would."""
    sealers = {k.key for k in trust.keys if "sealer" in k.roles}  # distinct keys, not names
    over = [f"{kind} needs {k}" for kind, k in policy.approvals if k > len(sealers)]
    if over:
        return (
            f"the policy's approvals ({'; '.join(over)}) ask for more distinct sealers than the "
            f"{len(sealers)} trusted"
        )
    return None


# ----------------------------------------------------------------------- the signed statement


def change_digest(files: Mapping[str, bytes]) -> str:
    """The digest of a plans commit's content: every file but ``approvals.json``."""
    listing = {p: sha256(data) for p, data in sorted(files.items()) if p != APPROVALS_PATH}
    return sha256(canonical({"format": CHANGE_FORMAT, "files": listing}))


def statement(parent: str, change: str) -> bytes:
    """The bytes each approval signs: this change, made on top of that parent commit."""
    return canonical({"format": STATEMENT_FORMAT, "parent": parent, "change": change})


def proposal_id(parent: str, change: str) -> str:
    return sha256(statement(parent, change)).removeprefix("sha256:")[:ID_LENGTH]


def proposal_ref(pid: str) -> str:
    return f"{PROPOSALS_PREFIX}{pid}"


@frozen
class Approvals:
    """``approvals.json``: signatures over :func:`statement` of *parent* and *change*."""

    parent: str
    change: str
    signatures: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "format": APPROVALS_FORMAT,
            "parent": self.parent,
            "change": self.change,
            "signatures": list(self.signatures),
        }

    @classmethod
    def from_json(cls, doc: Any) -> Approvals:
        """ValueError naming what is wrong."""
        if not isinstance(doc, dict) or doc.get("format") != APPROVALS_FORMAT:
            raise ValueError(f"not a {APPROVALS_FORMAT} document")
        if set(doc) != {"format", "parent", "change", "signatures"}:
            raise ValueError("it holds format, parent, change and signatures, nothing else")
        parent, change, signatures = doc["parent"], doc["change"], doc["signatures"]
        if not isinstance(parent, str) or not isinstance(change, str):
            raise ValueError("parent and change must be strings")
        if not isinstance(signatures, list) or not all(isinstance(s, str) for s in signatures):
            raise ValueError("signatures must be a list of armoured SSH signatures")
        if len(signatures) > MAX_SIGNATURES:
            raise ValueError(f"more than {MAX_SIGNATURES} signatures")
        return cls(parent, change, tuple(signatures))

    def approvers(self, trust: TrustSet) -> tuple[str, ...]:
        """The distinct sealers of *trust* whose signature here verifies, sorted: one each per
        key, named by its sealer names (``a,b`` for a key trusted under two). A signature by
        an untrusted key, a non-sealer, over another statement or broken counts for nobody; a
        sealer's second signature counts once, and so does a key listed under several names
        (one line of ``allowed_signers`` may name several principals: one signature would
        otherwise count as several sealers)."""
        return tuple(sorted(self._counted(trust)))

    def valid_only(self, trust: TrustSet) -> Approvals:
        """Only the signatures that count (one per sealer key, the first), in a stable order."""
        counted = self._counted(trust)
        return replace(self, signatures=tuple(counted[n] for n in sorted(counted)))

    def _counted(self, trust: TrustSet) -> dict[str, str]:
        """The sealer names of each key with a signature that counts -> its first signature."""
        data = statement(self.parent, self.change)
        kept: dict[str, str] = {}
        for armoured in self.signatures:
            try:
                key = sshsig.verify(armoured, data, NAMESPACE)
            except GitAuditError:
                continue
            names = sorted({k.name for k in trust.keys if k.key == key and "sealer" in k.roles})
            if names:
                kept.setdefault(",".join(names), armoured)
        return kept

    def signed_by(self, signer: Signer) -> Approvals:
        """These approvals and *signer*'s (unless it already signed)."""
        data = statement(self.parent, self.change)
        for armoured in self.signatures:
            try:
                if sshsig.verify(armoured, data, NAMESPACE).raw == signer.public_key.raw:
                    return self
            except GitAuditError:
                continue
        return replace(self, signatures=(*self.signatures, signer.sign(data, NAMESPACE)))

    def merged(self, other: Approvals) -> Approvals:
        extra = tuple(s for s in other.signatures if s not in self.signatures)
        return replace(self, signatures=self.signatures + extra)


def approval_problem(before: StateLike, after: StateLike, where: str) -> str | None:
    """Why the plans commit *after* (on *before*) lacks the approvals its change needs, or
    carries an ``approvals.json`` that is not its own, if it does."""
    need = needed(before, after)
    raw = after.files.get(APPROVALS_PATH)
    what = f"{where} ({need.describe()})"
    if raw is None:
        if need.required <= 1:
            return None
        return (
            f"{what} needs the approval of {need.required} distinct sealers and carries none "
            f"({APPROVALS_PATH} missing)"
        )
    doc = _own_approvals(before, after, raw, where)
    if isinstance(doc, str):
        return doc
    names = doc.approvers(before.trust)
    if len(names) < need.required:
        who = f" ({', '.join(names)})" if names else ""
        return (
            f"{what} needs the approval of {need.required} distinct sealers; "
            f"{len(names)} approved{who}"
        )
    return None


def _own_approvals(before: StateLike, after: StateLike, raw: bytes, where: str) -> Approvals | str:
    """The commit's ``approvals.json`` when it is well-formed and for this very step, else why
    not."""
    try:
        doc = Approvals.from_json(loads(raw))
    except ValueError as exc:
        return f"{where}: {APPROVALS_PATH} is malformed ({exc})"
    if before.tip is None or doc.parent != str(before.tip):
        return (
            f"{where}: {APPROVALS_PATH} approves a change of {doc.parent[:12]}, not of its parent "
            f"{str(before.tip)[:12]} (stale approvals do not count)"
        )
    if doc.change != change_digest(after.files):
        return f"{where}: {APPROVALS_PATH} approves another change than the one this commit makes"
    return doc


# -------------------------------------------------------------------------------- proposals


@frozen
class Proposal:
    """One proposal as a commit of ``refs/audit/proposals/<id>`` holds it."""

    id: str
    parent: str
    change: str
    kinds: tuple[str, ...]
    required: int
    message: str
    proposer: str
    proposer_fingerprint: str
    proposed_at: str
    approvals: Approvals
    files: Mapping[str, bytes] = field(repr=False)
    commit: pygit2.Oid | None = None  # the proposal commit it was read from

    @property
    def summary(self) -> str:
        return self.message.splitlines()[0] if self.message else ""

    def to_json(self) -> dict[str, Any]:
        """``proposal.json``."""
        return {
            "format": PROPOSAL_FORMAT,
            "id": self.id,
            "parent": self.parent,
            "change": self.change,
            "kinds": list(self.kinds),
            "required": self.required,
            "message": self.message,
            "proposer": {"name": self.proposer, "fingerprint": self.proposer_fingerprint},
            "proposed_at": self.proposed_at,
        }

    def tree_files(self) -> dict[str, bytes]:
        files = {f"{PROPOSED_PREFIX}{p}": data for p, data in self.files.items()}
        files[PROPOSAL_PATH] = dumps(self.to_json())
        files[APPROVALS_PATH] = dumps(self.approvals.to_json())
        return files


class ChangeProposed(GitAuditError):
    """The change needs approvals: it was proposed (or approved again) instead of applied.

    Not a failure (exit code 0): the command line prints the message and the next command."""

    exit_code = ExitCode.OK

    def __init__(self, proposal: Proposal, approvers: tuple[str, ...]) -> None:
        self.proposal = proposal
        self.approvers = approvers
        who = ", ".join(approvers) or "none"
        hint = (
            f"another sealer reviews it (`git audit proposals {proposal.id}`) and approves it: "
            f"`git audit approve {proposal.id}` (on another machine: `git audit push` it first)"
        )
        if len(approvers) >= proposal.required:
            hint = f"it has its approvals: apply it with `git audit approve {proposal.id}`"
        super().__init__(
            f"proposed as {proposal.id}: {proposal.summary}: {describe_need(proposal)}; "
            f"approved by {len(approvers)} ({who}); nothing is applied yet",
            hint=hint,
        )


def describe_need(proposal: Proposal) -> str:
    return f"{proposal.required} distinct sealers must approve ({', '.join(proposal.kinds)})"


def read_proposal(git: pygit2.Repository, oid: pygit2.Oid, where: str) -> Proposal:
    """The proposal commit *oid*, parsed and checked for consistency (LedgerError naming it):
    its id, files, parent and change agree. Its approvals are not verified here."""
    commit = commit_of(git, oid, where)
    files = read_files(git, commit.tree)
    try:
        doc = loads(files.get(PROPOSAL_PATH, b"null"))
        if not isinstance(doc, dict) or doc.get("format") != PROPOSAL_FORMAT:
            raise ValueError(f"{PROPOSAL_PATH} is not a {PROPOSAL_FORMAT} document")
        approvals = Approvals.from_json(loads(files.get(APPROVALS_PATH, b"null")))
        proposed = {
            p.removeprefix(PROPOSED_PREFIX): data
            for p, data in files.items()
            if p.startswith(PROPOSED_PREFIX)
        }
        proposer = doc["proposer"]
        kinds = doc["kinds"]
        if not isinstance(kinds, list) or not set(kinds) <= set(APPROVAL_KINDS):
            raise ValueError(f"kinds must list kinds of change ({', '.join(APPROVAL_KINDS)})")
        required = doc["required"]
        if isinstance(required, bool) or not isinstance(required, int) or required < 1:
            raise ValueError("required must be a whole number, 1 or more")
        proposal = Proposal(
            id=_text(doc["id"]),
            parent=_text(doc["parent"]),
            change=_text(doc["change"]),
            kinds=tuple(kinds),
            required=required,
            message=_text(doc["message"]),
            proposer=_text(proposer["name"]),
            proposer_fingerprint=_text(proposer["fingerprint"]),
            proposed_at=_text(doc["proposed_at"]),
            approvals=approvals,
            files=proposed,
            commit=commit.id,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise LedgerError(
            f"{where}: malformed proposal ({exc})",
            hint="proposals are written by gitaudit's sealing commands and `git audit approve`",
        ) from None
    if change_digest(proposal.files) != proposal.change:
        raise LedgerError(f"{where}: its files are not the change it proposes")
    if proposal_id(proposal.parent, proposal.change) != proposal.id:
        raise LedgerError(f"{where}: its id is not the one its parent and change give")
    if (approvals.parent, approvals.change) != (proposal.parent, proposal.change):
        raise LedgerError(f"{where}: its {APPROVALS_PATH} approves another change")
    return proposal


def _text(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {type(v).__name__}")
    return v


def write_proposal(
    git: pygit2.Repository,
    signer: Signer,
    proposal: Proposal,
    base: pygit2.Oid | None,
    expected: pygit2.Oid | None,
    title: str,
) -> Proposal:
    """Commit *proposal* (signed by *signer*) on *base* and move its ref from *expected* to it
    (compare-and-swap: RefConflict when it moved)."""
    tree = write_tree(git, proposal.tree_files())
    message = f"{title}\n\n{proposal.summary}\n\nAudit-Proposal: {proposal.id}\n"
    commit = create_signed_commit(
        git, tree=tree, parents=[base] if base else [], message=message, signer=signer
    )
    cas_update(git, proposal_ref(proposal.id), commit, expected, f"gitaudit: {title}")
    return replace(proposal, commit=commit)


def propose(
    git: pygit2.Repository,
    signer: Signer,
    *,
    proposer: str,
    parent: str,
    files: Mapping[str, bytes],
    message: str,
    need: Need,
    trust: TrustSet,
    now: str,
) -> ChangeProposed:
    """Propose the change to *files* on plans commit *parent* with the proposer's approval (or,
    when the same change is proposed there already, add the approval to it). Returns the outcome
    to raise."""
    change = change_digest(files)
    pid = proposal_id(parent, change)
    ref = proposal_ref(pid)
    tip = read_ref(git, ref)
    if tip is not None:
        current = read_proposal(git, tip, ref)
        signed = replace(current, approvals=current.approvals.signed_by(signer))
        if signed.approvals != current.approvals:
            signed = write_proposal(git, signer, signed, tip, tip, f"approve: {pid}")
        return ChangeProposed(signed, signed.approvals.approvers(trust))
    fresh = Proposal(
        id=pid,
        parent=parent,
        change=change,
        kinds=need.kinds,
        required=need.required,
        message=message,
        proposer=proposer,
        proposer_fingerprint=signer.public_key.fingerprint(),
        proposed_at=now,
        approvals=Approvals(parent, change).signed_by(signer),
        files=dict(files),
    )
    written = write_proposal(git, signer, fresh, None, None, f"propose: {pid}")
    return ChangeProposed(written, written.approvals.approvers(trust))
