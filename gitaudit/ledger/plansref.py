"""``refs/audit/plans``: reading it (always verified), and appending signed commits to it.

Every commit on the plans ref must be signed by a key that is a **sealer** in its parent's trust
set, or a **planner** there whose change a planner may make (:func:`planner_problem`); the root
commit by a sealer of its own trust set (and by the key pinned in ``audit.rootKey`` when set).
The chain is linear. :func:`read_state` verifies from the root, or
incrementally from the last verified tip (see :mod:`gitaudit.ledger.watermark`), so a rewound,
rewritten, foreign-signed or unsigned plans ref is always reported with the commit id and why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pygit2

from gitaudit import checkpoint
from gitaudit.crypto.commits import (
    SNAPSHOT_HINT,
    create_signed_commit,
    snapshot_refusal,
    verify_commit,
)
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.errors import GitAuditError, LedgerError, SealError, TrustError
from gitaudit.frozen import frozen
from gitaudit.git.repo import Repo
from gitaudit.ledger import chain, watermark
from gitaudit.ledger.anchor import pinned_root
from gitaudit.ledger.objects import commit_of, loads, read_files, write_tree
from gitaudit.ledger.protected import amendments, manifest_path, parse_manifest
from gitaudit.ledger.refs import PLANS_REF, RefConflict, cas_update, read_ref
from gitaudit.ledger.requests import RequestRecord, parse_records, sealed_request
from gitaudit.ledger.requests import transition_problem as requests_transition
from gitaudit.ledger.resets import AttemptReset, PlanResets, already_reset, parse_resets
from gitaudit.ledger.trust import (
    Policy,
    Role,
    TrustedKey,
    TrustSet,
    pinned_matches,
    policy_from_tree,
    trust_from_tree,
)
from gitaudit.plan.catalog import CheckedPlan, check_file
from gitaudit.plan.digest import contract, sha256
from gitaudit.plan.model import Plan
from gitaudit.plan.request import Request, gaps
from gitaudit.plan.request import implicit as implicit_request
from gitaudit.plan.store import PlanFile

if TYPE_CHECKING:  # signing and approvals are for writers: reading the ref needs neither
    from gitaudit.crypto.signers import Signer
    from gitaudit.plan.compare import Change
    from gitaudit.plan.known_valid import KnownValid

SEAL_FORMAT = "gitaudit.seal/1"
MAX_RETRIES = 50
RESTORE_HINT = "restore refs/audit/plans from a good copy"


@frozen
class SealRecord:
    """``seals/<name>.json``: one plan's current seal (design §3)."""

    plan: str
    version: int
    contract_digest: str
    previous_digest: str | None
    policy_digest: str
    sealed_at: str
    sealer: str
    sealer_fingerprint: str
    reason: str
    change: str  # initial | strengthened | weakened | neutral | retired
    weakened: bool = False
    weakenings: tuple[str, ...] = ()
    strengthenings: tuple[str, ...] = ()
    retired: bool = False
    # added in 0.3, written only when set: the digest of the protected-files manifest
    # (gitaudit.ledger.protected), and what an amendment changed in it
    protected_digest: str | None = None
    amended: Mapping[str, tuple[str, ...]] | None = None
    # added with requests, written only when set: the digest of the sealed request
    # (requests/<name>.json) this version answers
    request_digest: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc = self._core()
        if self.protected_digest is not None:
            doc["protected_digest"] = self.protected_digest
        if self.amended is not None:
            doc["amended"] = {k: list(v) for k, v in self.amended.items()}
        if self.request_digest is not None:
            doc["request_digest"] = self.request_digest
        return doc

    def _core(self) -> dict[str, Any]:
        return {
            "format": SEAL_FORMAT,
            "plan": self.plan,
            "version": self.version,
            "contract_digest": self.contract_digest,
            "previous_digest": self.previous_digest,
            "policy_digest": self.policy_digest,
            "sealed_at": self.sealed_at,
            "sealer": {"name": self.sealer, "fingerprint": self.sealer_fingerprint},
            "reason": self.reason,
            "change": self.change,
            "weakened": self.weakened,
            "weakenings": list(self.weakenings),
            "strengthenings": list(self.strengthenings),
            "retired": self.retired,
        }

    @classmethod
    def from_json(cls, doc: Any, where: str) -> SealRecord:
        try:
            if not isinstance(doc, dict) or doc.get("format") != SEAL_FORMAT:
                raise ValueError("not a gitaudit.seal/1 record")
            sealer = doc["sealer"]
            record = cls(
                plan=_str(doc["plan"]),
                version=_int(doc["version"]),
                contract_digest=_str(doc["contract_digest"]),
                previous_digest=None
                if doc["previous_digest"] is None
                else _str(doc["previous_digest"]),
                policy_digest=_str(doc["policy_digest"]),
                sealed_at=_str(doc["sealed_at"]),
                sealer=_str(sealer["name"]),
                sealer_fingerprint=_str(sealer["fingerprint"]),
                reason=_str(doc["reason"]),
                change=_str(doc["change"]),
                weakened=_bool(doc["weakened"]),
                weakenings=tuple(_str(x) for x in doc["weakenings"]),
                strengthenings=tuple(_str(x) for x in doc["strengthenings"]),
                retired=_bool(doc["retired"]),
                protected_digest=None
                if doc.get("protected_digest") is None
                else _str(doc["protected_digest"]),
                amended=None if doc.get("amended") is None else _amended(doc["amended"]),
                request_digest=None
                if doc.get("request_digest") is None
                else _str(doc["request_digest"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SealError(
                f"{where}: malformed seal record ({exc})",
                hint="seal records are written by `git audit plan seal`; restore the plans ref",
            ) from None
        return record


def _amended(v: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(v, dict) or set(v) - {"changed", "added", "deleted"}:
        raise TypeError("amended must hold changed, added and deleted lists")
    return {str(k): tuple(_str(x) for x in paths) for k, paths in v.items()}


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {type(v).__name__}")
    return v


def _int(v: Any) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise TypeError("expected a positive integer")
    return v


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError("expected true or false")
    return v


@frozen
class PlansState:
    """One verified version of the plans ref."""

    tip: pygit2.Oid | None
    trust: TrustSet
    policy: Policy
    seals: Mapping[str, SealRecord]
    files: Mapping[str, bytes] = field(repr=False)
    resets: Mapping[str, PlanResets] = field(default_factory=dict)  # plan -> step -> reset
    requests: Mapping[str, RequestRecord] = field(default_factory=dict)  # plan -> request seal

    @property
    def exists(self) -> bool:
        return self.tip is not None

    def request(self, name: str) -> Request | None:
        """The sealed request of plan *name* while active (None: none, or retired)."""
        return sealed_request(self.files, self.requests, name)

    def requested(self) -> list[str]:
        """Names of plans with an active sealed request."""
        return sorted(n for n, r in self.requests.items() if not r.retired)

    def attempts_reset(
        self, name: str, contract: str, held: Callable[[AttemptReset], bool]
    ) -> dict[str, int]:
        """step -> failed attempts under *contract* that a sealer reset (they do not count), on
        the chain of runs *held* judges (:func:`gitaudit.ledger.resets.held_at`)."""
        resets = self.resets.get(name, {})
        return {step: already_reset(resets, step, contract, held) for step in resets}

    def active(self) -> list[str]:
        """Names of plans sealed as active (not retired)."""
        return sorted(n for n, s in self.seals.items() if not s.retired)

    def sealed_plan(self, name: str) -> bytes | None:
        return self.files.get(f"plans/{name}.json")

    def seal(self, name: str) -> SealRecord | None:
        return self.seals.get(name)

    def protected(self, name: str) -> dict[str, str] | None:
        """The protected files the seal of *name* recorded (None: it recorded none), checked
        against the digest in its seal record when the state was read."""
        data = self.files.get(manifest_path(name))
        record = self.seals.get(name)
        if data is None or record is None or record.protected_digest is None:
            return None
        return parse_manifest(data, f"{PLANS_REF}: {manifest_path(name)}")


EMPTY = PlansState(None, TrustSet(), Policy(), {}, {})


def state_at(repo: pygit2.Repository, commit: pygit2.Commit) -> PlansState:
    """Parse (not verify) the plans state stored in *commit*; TrustError for a work-tree
    snapshot (an older gitaudit signed them like plans commits: never read as one)."""
    refusal = snapshot_refusal(commit.message, str(commit.id)[:12], "a plans commit")
    if refusal is not None:
        raise TrustError(f"{PLANS_REF}: {refusal}", hint=SNAPSHOT_HINT)
    return _state_of(repo, commit.tree, commit.id, f"plans commit {str(commit.id)[:12]}")


def runners_ever(repo: pygit2.Repository, tip: pygit2.Oid | None) -> list[PublicKey]:
    """Every key that was a runner on any version of the plans ref up to *tip*: a run signed
    by a runner retired since is still a run (``verify`` accepts it, and a new run may follow
    it); the gate itself only accepts currently trusted runners."""
    keys: list[PublicKey] = []
    for commit in chain.walk(repo, tip, what=PLANS_REF):
        for key in state_at(repo, commit).trust.with_role("runner"):
            if key not in keys:
                keys.append(key)
    return keys


def _state_of(
    repo: pygit2.Repository, tree: pygit2.Tree, tip: pygit2.Oid, where: str
) -> PlansState:
    try:
        files = read_files(repo, tree)
    except LedgerError as exc:
        raise LedgerError(f"{where}: {exc.message}", hint=exc.hint) from None
    seals: dict[str, SealRecord] = {}
    for path, data in files.items():
        if path.startswith("seals/") and path.endswith(".json"):
            name = path[len("seals/") : -len(".json")]
            try:
                doc = loads(data)
            except ValueError as exc:
                raise SealError(f"{where}: {path} is not valid JSON ({exc})") from None
            record = SealRecord.from_json(doc, f"{where}: {path}")
            if record.plan != name:
                raise SealError(f"{where}: {path} is a seal for plan {record.plan!r}, not {name!r}")
            seals[name] = record
            _check_manifest(files, record, where)
    return PlansState(
        tip,
        trust_from_tree(repo, tree, where),
        policy_from_tree(repo, tree, where),
        seals,
        files,
        parse_resets(files, where),
        parse_records(files, where),
    )


def _check_manifest(files: Mapping[str, bytes], record: SealRecord, where: str) -> None:
    """The protected-files manifest must be the one the seal record binds."""
    if record.protected_digest is None:
        return
    data = files.get(manifest_path(record.plan))
    if data is None or sha256(data) != record.protected_digest:
        raise SealError(
            f"{where}: {manifest_path(record.plan)} is not the manifest seal v{record.version} "
            f"of plan {record.plan!r} binds",
            hint="restore refs/audit/plans from a good copy",
        )


def _check_signed(
    repo: pygit2.Repository,
    commit: pygit2.Commit,
    judge: TrustSet,
    where: str,
    pinned_root: str | None,
    *,
    planners: bool = False,
) -> PublicKey:
    """*commit* must be signed by a sealer of *judge* (or, with *planners*, a planner: what it
    changed is judged by :func:`planner_problem`); the root also by the pinned key."""
    keys = judge.with_role("planner" if planners else "sealer")
    if not keys:
        raise TrustError(f"{where}: no sealer is trusted to sign it")
    try:
        signer = verify_commit(repo, commit.id, keys)
    except GitAuditError as exc:
        who = "sealer or planner" if len(keys) > len(judge.with_role("sealer")) else "sealer"
        raise TrustError(
            f"{where}: not signed by a trusted {who}: {exc.message}",
            hint="someone rewrote refs/audit/plans; restore it from a good copy",
        ) from None
    if pinned_root and not pinned_matches(pinned_root, signer):
        raise TrustError(
            f"{where}: the root of trust is signed by {signer.fingerprint()}, "
            "not by the pinned audit.rootKey",
            hint="fetch the genuine refs/audit/plans, or re-pin: `git config audit.rootKey`",
        )
    return signer


def _planner_check(before: PlansState, after: PlansState, signer: PublicKey, where: str) -> None:
    """TrustError when *signer*, not a sealer of *before*, made a change only a sealer may."""
    entry = before.trust.find(signer)
    if entry is None or entry.may("sealer"):
        return
    problem = planner_problem(before, after, entry)
    if problem:
        raise TrustError(f"{where}: {problem}", hint="restore refs/audit/plans from a good copy")


def verify_chain(
    repo: pygit2.Repository,
    tip: pygit2.Oid,
    *,
    stop_at: pygit2.Oid | None = None,
    pinned_root: str | None = None,
) -> PlansState:
    """Verify every plans commit from *tip* back to *stop_at* (exclusive) or the root.

    Returns the state at *tip*. TrustError names the first bad commit (oldest first).
    """
    try:
        commits, reached = chain.segment(repo, tip, stop_at, what=PLANS_REF, linear=True)
    except LedgerError as exc:
        raise TrustError(exc.message, hint=exc.hint or RESTORE_HINT) from None
    if not reached:
        raise TrustError(f"{PLANS_REF} does not descend from {str(stop_at)[:12]}")
    commits.reverse()
    parent_state = state_at(repo, commit_of(repo, stop_at, PLANS_REF)) if stop_at else None
    state = parent_state
    for commit in commits:
        where = f"plans commit {str(commit.id)[:12]}"
        # the signature first (judged by the parent's sealers), the content only after it:
        # nothing an unsigned commit holds is evaluated
        signer = None
        if state is not None:
            signer = _check_signed(repo, commit, state.trust, where, None, planners=True)
        try:
            mine = state_at(repo, commit)
        except GitAuditError as exc:
            raise TrustError(f"{exc.message}", hint=exc.hint or RESTORE_HINT) from None
        if state is None or signer is None:
            _check_signed(repo, commit, mine.trust, where, pinned_root)
        else:
            problem = transition_problem(state, mine, where)
            if problem:
                raise TrustError(problem, hint=RESTORE_HINT)
            _planner_check(state, mine, signer, where)
        state = mine
    assert state is not None
    return state


def read_state(repo: Repo, *, tip: pygit2.Oid | None = None, remember: bool = True) -> PlansState:
    """The verified plans state at the current tip of ``refs/audit/plans`` (EMPTY when absent).

    Verification is incremental from the last verified tip; a tip that does not descend from it
    is a rewind and fails. With *remember* the new tip becomes the verified mark.
    """
    git = repo.git
    with watermark.view(repo.gitdir) as marks:
        tip = tip if tip is not None else read_ref(git, PLANS_REF)
    if tip is not None:
        commit_of(git, tip, PLANS_REF)  # a ref at a non-commit is reported as such
    watermark.check_forward(git, repo.gitdir, PLANS_REF, tip, marks)
    if tip is None:
        return EMPTY
    pinned = pinned_root(repo)  # the trust anchor's, or audit.rootKey
    # only a mark this repository's gitaudit MAC'd says the chain up to it was verified: the
    # file is a cache anything in the work tree can write
    mark = watermark.verified(git, repo.gitdir, marks, PLANS_REF)
    if mark == str(tip):
        state = state_at(git, commit_of(git, tip, PLANS_REF))
    else:
        stop = pygit2.Oid(hex=mark) if mark else None
        state = verify_chain(git, tip, stop_at=stop, pinned_root=pinned)
    if pinned and mark:
        # the mark says nothing of the pin, which may have changed since it was made
        verify_root(git, tip, pinned)
    if remember and mark != str(tip):
        watermark.record(repo.gitdir, {PLANS_REF: str(tip)}, "verified", git)
    return state


def verify_root(git: pygit2.Repository, tip: pygit2.Oid, pinned: str) -> None:
    """TrustError unless the root of the plans chain ending at *tip* is signed by a sealer of
    its own trust set whose key is *pinned*."""
    try:
        *_, root = chain.walk(git, tip, what=PLANS_REF, linear=True)
    except LedgerError as exc:
        raise TrustError(exc.message, hint=exc.hint) from None
    where = f"plans commit {str(root.id)[:12]}"
    try:
        state = state_at(git, root)
    except GitAuditError as exc:
        raise TrustError(exc.message, hint=exc.hint) from None
    _check_signed(git, root, state.trust, where, pinned)


def root_of_trust(repo: Repo) -> tuple[pygit2.Oid, PublicKey, str]:
    """The root commit of ``refs/audit/plans``, the key that signed it and that key's principal,
    after verifying the whole chain from that root (whatever is pinned): what ``git audit trust
    anchor`` shows before pinning it."""
    git = repo.git
    tip = read_ref(git, PLANS_REF)
    if tip is None:
        raise TrustError(
            f"{PLANS_REF} does not exist: there is no root of trust to pin",
            hint="create it (`git audit init`) or fetch it first: "
            "`git fetch origin 'refs/audit/*:refs/audit/*'`",
        )
    verify_chain(git, tip)
    *_, root = chain.walk(git, tip, what=PLANS_REF, linear=True)
    state = state_at(git, root)
    signer = verify_commit(git, root.id, state.trust.with_role("sealer"))
    return root.id, signer, signer_name(state, signer)


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


Build = Callable[[PlansState], tuple[dict[str, bytes], str] | None]


def append(
    repo: Repo, signer: Signer, build: Build, *, role: Role = "sealer"
) -> tuple[pygit2.Oid | None, PlansState]:
    """Append one signed commit to the plans ref; compare-and-swap, re-read and retry on races.

    *build* gets the current verified state and returns the complete new file map and the commit
    message, or None when there is nothing to do (then no commit is written). The signer must be a
    sealer of the current state (of the new state for the very first commit), or, with *role*
    ``planner``, a planner whose change keeps the planner's rules (else SealError, before anything
    is signed: every reader of the chain would refuse it).
    """
    from gitaudit.ledger import approvals  # writers and new seals only

    for _ in range(MAX_RETRIES):
        state = read_state(repo)
        planner: TrustedKey | None = None
        if state.exists:
            entry = state.trust.require(signer.public_key, role)
            planner = None if entry.may("sealer") else entry
        built = build(state)
        if built is None:
            return None, state
        files, message = built
        files = {p: d for p, d in files.items() if p != approvals.APPROVALS_PATH}  # per commit
        try:
            tree = write_tree(repo.git, files)
        except (OSError, pygit2.GitError) as exc:
            raise LedgerError(
                f"cannot write to {PLANS_REF}: {exc}; nothing was recorded",
                hint="free disk space or fix the repository's permissions, then retry",
            ) from exc
        if not state.exists:
            tree_obj = repo.git[tree]
            assert isinstance(tree_obj, pygit2.Tree)
            new_trust = trust_from_tree(repo.git, tree_obj, "new plans root")
            new_trust.require(signer.public_key, "sealer")
        if planner is not None:
            _refuse_for_planner(repo, state, tree, planner)
        commit = create_signed_commit(
            repo.git,
            tree=tree,
            parents=[state.tip] if state.tip else [],
            message=message,
            signer=signer,
        )
        if state.exists:
            _approvals_gate(repo, signer, state, commit, files, message)
        checkpoint.reached("seal.objects-written", str(commit))
        try:
            cas_update(
                repo.git, PLANS_REF, commit, state.tip, f"gitaudit: {message.splitlines()[0]}"
            )
        except RefConflict:
            continue
        watermark.record(repo.gitdir, {PLANS_REF: str(commit)}, "verified", repo.git)
        return commit, state_at(repo.git, commit_of(repo.git, commit, PLANS_REF))
    raise LedgerError(
        f"{PLANS_REF} kept moving while writing; gave up after {MAX_RETRIES} attempts",
        hint="another process is sealing in a loop; retry when it is done",
    )


def _refuse_for_planner(
    repo: Repo, state: PlansState, tree: pygit2.Oid, planner: TrustedKey
) -> None:
    """SealError when the plans tree *tree* is a change *planner* may not make."""
    tree_obj = repo.git[tree]
    assert isinstance(tree_obj, pygit2.Tree)
    after = _state_of(repo.git, tree_obj, tree, "the new plans commit")
    problem = planner_problem(state, after, planner) or transition_problem(
        state, after, "the new plans commit"
    )
    if problem:
        raise SealError(
            problem,
            hint="a sealer makes this change with their key (`--key`), or ask the user to",
        )


def _approvals_gate(
    repo: Repo,
    signer: Signer,
    state: PlansState,
    commit: pygit2.Oid,
    files: dict[str, bytes],
    message: str,
) -> None:
    """A change that would lock every sealer out is refused; one that needs several sealers
    (the policy's approvals) is proposed instead of applied (raises ChangeProposed)."""
    mine = state_at(repo.git, commit_of(repo.git, commit, PLANS_REF))
    from gitaudit.ledger import approvals  # writers and new seals only

    lockout = approvals.lockout_problem(mine.trust, mine.policy)
    if lockout and lockout != approvals.lockout_problem(state.trust, state.policy):
        raise SealError(
            f"refused: {lockout}; nothing of those kinds could ever change again",
            hint="trust more sealers first, or ask for fewer approvals",
        )
    need = approvals.needed(state, mine)
    if need.required > 1:
        raise approvals.propose(
            repo.git,
            signer,
            proposer=signer_name(state, signer.public_key),
            parent=str(state.tip),
            files=files,
            message=message,
            need=need,
            trust=state.trust,
            now=now_iso(),
        )


def signer_name(state: PlansState, key: PublicKey) -> str:
    entry = state.trust.find(key)
    return entry.name if entry else key.fingerprint()


def sealed_contract(
    state: PlansState, name: str, *, known: KnownValid | None = None
) -> tuple[CheckedPlan | None, SealRecord | None]:
    """The sealed copy of plan *name*, validated, and its seal record; SealError when the copy
    does not match the record (the plans ref was tampered with). *known*: the schema check is
    skipped for bytes it holds a mark for (:mod:`gitaudit.plan.known_valid`), as the gate's
    check of a working copy does: the sealed copy is, byte for byte, the plan file sealed."""
    record = state.seal(name)
    data = state.sealed_plan(name)
    if record is None or data is None or record.retired:
        return None, record
    checked = check_file(
        PlanFile(name, f"{PLANS_REF}:plans/{name}.json", data), environment=False, known=known
    )
    if checked.digest != record.contract_digest:
        raise SealError(
            f"{PLANS_REF}: the sealed copy of plan {name!r} does not match its seal record "
            f"(digest {checked.digest} != {record.contract_digest})",
            hint="the plans ref was tampered with; restore it from a good copy",
        )
    return checked, record


def transition_problem(before: PlansState, after: PlansState, where: str) -> str | None:  # noqa: C901, PLR0911, PLR0912 (one rule set: the sealing rules)
    """Why the step from *before* to *after* (one plans commit) breaks the sealing rules, if it
    does: a seal record changed without a new version, deleted, or moved backwards; a weakening
    not recorded as one; a weakening or a laxer policy where the policy forbids weakening; a
    reset of failed attempts for a step not in a plan sealed as active, or under another
    contract; a request changed against its rules (:mod:`gitaudit.ledger.requests`), or a new
    seal naming a request that is not the sealed one; a trust set left without a sealer (nobody
    could change trust, policy or seals again)."""
    if before.trust.with_role("sealer") and not after.trust.with_role("sealer"):
        return f"{where} leaves no sealer trusted, and nobody could change trust again"
    problem = (
        _policy_problem(before, after, where)
        or _resets_problem(before, after, where)
        or _requests_problem(before, after, where)
    )
    if problem:
        return problem
    for name in sorted(set(before.seals) | set(after.seals)):
        old, new = before.seals.get(name), after.seals.get(name)
        if new is None:
            return f"{where} deletes the seal record of plan {name!r}"
        try:
            new_sealed, _ = sealed_contract(after, name)
        except GitAuditError as exc:
            return f"{where}: {exc.message}"
        problem = _request_binding_problem(after, name, old, new, where)
        if problem:
            return problem
        if old is None:
            continue
        if new.version == old.version:
            same = {**old.to_json(), "policy_digest": None} == {
                **new.to_json(),
                "policy_digest": None,
            }
            if not same or new.policy_digest != after.policy.digest():
                return f"{where} changes seal v{new.version} of plan {name!r} without a new version"
            continue
        if new.version < old.version:
            return f"{where} moves the seal of {name!r} back from v{old.version} to v{new.version}"
        try:
            old_sealed, _ = sealed_contract(before, name)
        except GitAuditError as exc:
            return f"{where}: {exc.message}"
        weakened = new.retired
        if old_sealed and old_sealed.plan and new_sealed and new_sealed.plan:
            weakened = weakened or _weakens(old_sealed.plan, new_sealed.plan, new, before.policy)
        if weakened and not new.weakened:
            return (
                f"{where}: seal v{new.version} of {name!r} weakens the contract "
                "without recording it"
            )
        if weakened and not before.policy.allow_weaken:
            return (
                f"{where}: seal v{new.version} of {name!r} weakens the contract; policy forbids it"
            )
    # k of n: what the parent's policy says this kind of change needs (ledger/approvals.py)
    from gitaudit.ledger import approvals  # writers and new seals only

    return approvals.approval_problem(before, after, where)


def _weakens(old: Plan, new: Plan, record: SealRecord, policy: Policy) -> bool:
    """Whether sealing *new* over *old* weakens the contract. Ways to reconcile (a step made
    non-idempotent, a readback check added) were classified as strengthenings before they
    counted as weakenings: a seal that lists such a change among its strengthenings was made
    under the earlier rule, and stays valid for it, where one sealer could weaken then. Under a
    *policy* (the parent's) that forbids weakening or asks several sealers to weaken, the listing
    excuses nothing: anyone holding one sealer key could write it today, and open a way around a
    step's checks that the policy says takes more (approvals came after the rule changed)."""
    from gitaudit.plan.compare import compare  # new seals only

    lone = policy.allow_weaken and policy.approvals_for("weaken") <= 1
    earlier = set(record.strengthenings) if lone else set()
    return any(
        not (change.reconciliation and (change.render() in earlier or change.listed_as in earlier))
        for change in compare(contract(old), contract(new)).weakenings
    )


def _request_binding_problem(
    after: PlansState, name: str, old: SealRecord | None, new: SealRecord, where: str
) -> str | None:
    """A new seal version naming a request must name the sealed one."""
    fresh = old is None or new.version != old.version
    if not fresh or new.request_digest is None:
        return None
    bound = after.requests.get(name)
    if bound is None or bound.retired or bound.request_digest != new.request_digest:
        return (
            f"{where}: seal v{new.version} of {name!r} names a request that is not the sealed one"
        )
    return None


def _requests_problem(before: PlansState, after: PlansState, where: str) -> str | None:
    """The request rules; a plan's first request is compared with the plan's own requirements
    (sealed before it, in the single-file form)."""
    implicit: dict[str, Request] = {}
    for name in set(after.requests) - set(before.requests):
        try:
            sealed, _ = sealed_contract(before, name)
        except GitAuditError as exc:
            return f"{where}: {exc.message}"
        if sealed is not None and sealed.plan is not None:
            implicit[name] = implicit_request(sealed.plan)
    return requests_transition(
        (before.files, before.requests),
        (after.files, after.requests),
        implicit,
        before.policy.allow_weaken,
        where,
    )


def _policy_problem(before: PlansState, after: PlansState, where: str) -> str | None:
    laxer = after.policy.laxer_than(before.policy)
    if laxer and not before.policy.allow_weaken:
        return f"{where} relaxes a policy that forbids weakening ({'; '.join(laxer)})"
    return None


def _resets_problem(before: PlansState, after: PlansState, where: str) -> str | None:
    """A reset of failed attempts written or changed by this commit must be for a step of a plan
    sealed as active, under its current contract (dropping a reset only makes failures count
    again, so it is allowed)."""
    for name, resets in sorted(after.resets.items()):
        for step, reset in sorted(resets.items()):
            if before.resets.get(name, {}).get(step) == reset:
                continue
            seal = after.seal(name)
            if seal is None or seal.retired:
                return f"{where} resets attempts of step {step} of {name!r}, not sealed as active"
            if reset.contract_digest != seal.contract_digest:
                return (
                    f"{where} resets the attempts of step {step} of {name!r} under a contract "
                    f"that is not its seal v{seal.version}"
                )
            try:
                sealed, _ = sealed_contract(after, name)
            except GitAuditError as exc:
                return f"{where}: {exc.message}"
            if sealed is None or sealed.plan is None or sealed.plan.step(step) is None:
                return f"{where} resets the attempts of step {step}, which plan {name!r} lacks"
    return None


# ------------------------------------------------------------------------------- planners

# what a planner may change on the plans ref: plans, their seals and protected manifests
PLANNER_PATHS = ("plans/", "seals/", "protected/")
_SEALERS_OWN = {
    "trust": "trust",
    "policy.json": "the policy",
    "resets": "the failed attempts of a step",
    "requests": "the request",
    "request-seals": "the request",
}
_ONLY = "only a sealer changes the request"


_INHERITED: dict[tuple[str, str, str], tuple[tuple[str, PlansState], ...]] = {}
# (repository, tip, plan) -> the lineage of its seal (:func:`_lineage`)


def attempt_contracts(git: pygit2.Repository, state: PlansState, name: str) -> tuple[str, ...]:
    """The contracts under which failed attempts of plan *name*'s steps count, newest first:
    the sealed one, and while the seal that brought it is a planner's, those before it, back to
    the newest seal a sealer made (or the first). A sealer's reseal lets every step be tried
    afresh; a planner's does not, whatever it changed (a title, a cost: any new contract),
    since counting failed attempts afresh is a sealer's word (a reset, or a reseal)."""
    return tuple(dict.fromkeys(contract for contract, _at in _lineage(git, state, name)))


def reconcile_first(
    git: pygit2.Repository, state: PlansState, name: str, *, known: KnownValid | None = None
) -> frozenset[str]:
    """The steps of plan *name* whose unknown outcome must be settled (``git audit reconcile``)
    before they run again: those that are not idempotent under the sealed contract or, as for
    failed attempts (:func:`attempt_contracts`), under one a planner's reseals led from. Making
    a step idempotent closes the way to settle it by someone's word, a strengthening a planner
    may seal; it does not make running again what the step did an unknown number of times
    safe, which is a sealer's word. *known*: see :func:`sealed_contract`."""
    steps: set[str] = set()
    for _contract, at in _lineage(git, state, name):
        try:
            checked, _record = sealed_contract(at, name, known=known)
        except GitAuditError:
            continue  # the chain was verified: the sealed copy of a verified state matches
        if checked is not None and checked.plan is not None:
            steps.update(s.id for s in checked.plan.steps if not s.idempotent)
    return frozenset(steps)


def _lineage(
    git: pygit2.Repository, state: PlansState, name: str
) -> tuple[tuple[str, PlansState], ...]:
    """Each contract of :func:`attempt_contracts`, newest first, with a plans state in which it
    is the sealed one."""
    record = state.seal(name)
    if record is None:
        return ()
    if state.tip is None:
        return ((record.contract_digest, state),)
    key = (str(git.path), str(state.tip), name)
    if key in _INHERITED:
        return _INHERITED[key]
    lineage = [(record.contract_digest, state)]
    current, trust = record, state.trust
    if _sealers_seal(trust, current):  # the usual case: no walk
        return tuple(lineage)
    for commit in chain.walk(git, state.tip, what=PLANS_REF):
        try:
            at = state_at(git, commit)
        except GitAuditError:
            break
        older = at.seals.get(name)
        if older is not None and older.version == current.version:
            trust = at.trust  # at the commit that made it, in the end
            continue
        if current.retired or _sealers_seal(trust, current) or older is None:
            break
        current, trust = older, at.trust
        lineage.append((older.contract_digest, at))
    if len(_INHERITED) > 64:
        _INHERITED.clear()
    _INHERITED[key] = tuple(lineage)
    return _INHERITED[key]


def _sealers_seal(trust: TrustSet, record: SealRecord) -> bool:
    """Whether *record* was sealed by a key that is a sealer in *trust* (not a planner's, nor
    one *trust* no longer holds: the older failures count then)."""
    entry = next((k for k in trust.keys if k.key.fingerprint() == record.sealer_fingerprint), None)
    return entry is not None and entry.may("sealer")


def planner_problem(before: PlansState, after: PlansState, planner: TrustedKey) -> str | None:
    """Why *planner* may not make the step from *before* to *after* (None: it may).

    A planner changes plans and their seals, nothing else: each new seal answers the plan's
    sealed request (in the single-file form, without a request, keeps the plan's requirements
    exactly: they are the request), weakens nothing but the plan's own requirements (those the
    request does not hold), amends no protected file and retires nothing. Trust, policy,
    requests and resets of failed attempts are a sealer's. Each new seal names the planner's own
    key as its sealer, so the history attributes it truly. The rules of every plans commit
    (:func:`transition_problem`) apply as well."""
    who = planner.name
    for path in sorted(set(before.files) | set(after.files)):
        if path.startswith(PLANNER_PATHS) or before.files.get(path) == after.files.get(path):
            continue
        what = _SEALERS_OWN.get(path.split("/", 1)[0], path)
        return f"planner {who!r} cannot change {what}: only a sealer can"
    for name in sorted(after.seals):
        new = after.seals[name]
        if before.seals.get(name) == new:
            continue
        if new.sealer_fingerprint != planner.key.fingerprint():
            return (
                f"planner {who!r} signs seal v{new.version} of plan {name!r} in the name of "
                f"{new.sealer!r}"
            )
        problem = _planner_seal_problem(before, after, name, who)
        if problem:
            return problem
    return None


def _planner_seal_problem(  # noqa: PLR0911 (one rule list: what a planner may not seal)
    before: PlansState, after: PlansState, name: str, who: str
) -> str | None:
    if after.seals[name].retired:
        return f"planner {who!r} cannot retire plan {name!r}: only a sealer can"
    try:
        new_checked, _ = sealed_contract(after, name)
        old_checked, _ = sealed_contract(before, name)
    except GitAuditError as exc:
        return exc.message
    problem = _planner_amends(before, after, name, who, old_checked)
    if problem:
        return problem
    if new_checked is None or new_checked.plan is None:
        return None  # a seal without its plan: the rules of every commit refuse it
    plan = new_checked.plan
    previous = old_checked.plan if old_checked is not None else None
    request = after.request(name)
    problem = _answers_problem(after, request, previous, plan, name, who)
    if problem:
        return problem
    if previous is not None:
        from gitaudit.plan.compare import compare  # new seals only

        weakenings = [
            c.render()
            for c in compare(contract(previous), contract(plan)).weakenings
            if not _planners_own(c, request)
        ]
        if weakenings:
            return (
                f"planner {who!r} cannot weaken plan {name!r} ({'; '.join(weakenings)}): "
                "only a sealer can"
            )
    return None


def _planner_amends(
    before: PlansState, after: PlansState, name: str, who: str, sealed: CheckedPlan | None
) -> str | None:
    """A planner's new seal of plan *name* keeps the protected files the old seal recorded, as
    ``plan seal`` judges them (:func:`gitaudit.ledger.protected.amendments`: *sealed*'s patterns
    over the new manifest, so a file they protect may not enter it either), and keeps a manifest
    wherever the old seal bound one, even an empty one: without it the gate compares nothing,
    and a file the agent added (a ``check.sh`` the plan runs) would go unseen."""
    old, new = before.seals.get(name), after.seals[name]
    listing = ""
    if old is not None and not old.retired and old.protected_digest is not None:
        if new.protected_digest is None:
            return (
                f"planner {who!r} cannot drop the protected-files manifest of plan {name!r} "
                f"(seal v{old.version} records one): only a sealer can amend protected files"
            )
        was, now = before.protected(name) or {}, after.protected(name) or {}
        listing = amendments(was, now, sealed.plan if sealed is not None else None).summary()
    if not listing and new.amended and any(new.amended.values()):
        listing = "as recorded"
    if not listing:
        return None
    return (
        f"planner {who!r} cannot amend the protected files of plan {name!r} ({listing}): "
        "only a sealer can"
    )


def _answers_problem(
    after: PlansState,
    request: Request | None,
    previous: Plan | None,
    plan: Plan,
    name: str,
    who: str,
) -> str | None:
    """The new seal of plan *name* must answer its sealed request (without one: keep the
    plan's requirements, the request of the single-file form)."""
    if request is None:
        if previous is None:
            return (
                f"planner {who!r} cannot seal plan {name!r} without a sealed request: only a "
                f"sealer states what is asked (`git audit request seal --plan {name}`)"
            )
        return _requirements_kept(previous, plan, name, who)
    verbs = {"missing": "drop", "rewritten": "rewrite", "lowered": "lower"}
    for gap in gaps(request, plan):
        if gap.kind not in verbs:
            return (
                f"planner {who!r} leaves request requirement {gap.requirement} uncovered: {_ONLY}"
            )
        stated = gap.stated
        lowered = gap.kind == "lowered" and stated is not None
        detail = f" ({gap.asked.priority} -> {stated.priority})" if lowered and stated else ""
        return (
            f"planner {who!r} cannot {verbs[gap.kind]} request requirement {gap.requirement}"
            f"{detail}: {_ONLY}"
        )
    if after.seals[name].request_digest != after.requests[name].request_digest:
        version = after.seals[name].version
        return (
            f"planner {who!r} seals plan {name!r} v{version} without naming the request it answers"
        )
    return None


def _requirements_kept(old: Plan, new: Plan, name: str, who: str) -> str | None:
    """In the single-file form the plan's requirements are the request: all kept as they are."""
    why = f"without a sealed request, the requirements of plan {name!r} are the request; {_ONLY}"
    now = {r.id: r for r in new.requirements}
    for req in old.requirements:
        if req.id not in now:
            return f"planner {who!r} cannot drop requirement {req.id}: {why}"
        if now[req.id] != req:
            return f"planner {who!r} cannot change requirement {req.id}: {why}"
    known = {r.id for r in old.requirements}
    for req in new.requirements:
        if req.id not in known:
            return f"planner {who!r} cannot add requirement {req.id}: {why}"
    return None


def _planners_own(change: Change, request: Request | None) -> bool:
    """A change a planner may make although it weakens: about a requirement the request does not
    hold (the plan's own), or a requirement itself made to read as the request states it (the
    plan answers the request: checked first)."""
    if request is None or change.requirement is None:
        return False
    own = request.requirement(change.requirement) is None
    return own or change.where == f"requirement {change.requirement}"
