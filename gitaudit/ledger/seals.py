"""Changing the plans ref: trust, policy, seals, retirement and resets of failed attempts. Every
change is one signed commit.

Each operation reads the verified current state, computes the complete new tree, and appends it
through :func:`gitaudit.ledger.plansref.append` (compare-and-swap, re-read and retry on races: a
concurrent seal is never lost; a concurrent change that makes ours a weakening is refused).
"""

from __future__ import annotations

from typing import Any

import pygit2

from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.signers import Signer
from gitaudit.errors import PlanError, SealError, TrustError, UsageError
from gitaudit.frozen import frozen
from gitaudit.git.repo import Repo
from gitaudit.ledger import anchor, chain
from gitaudit.ledger.objects import dumps
from gitaudit.ledger.plansref import (
    PlansState,
    SealRecord,
    append,
    attempt_contracts,
    now_iso,
    read_state,
    sealed_contract,
    signer_name,
    state_at,
)
from gitaudit.ledger.protected import (
    Changes,
    differences,
    manifest,
    manifest_digest,
    manifest_path,
    protected_files,
)
from gitaudit.ledger.refs import PLANS_REF, read_ref, runs_ref
from gitaudit.ledger.requests import record_path, request_path, retire_request
from gitaudit.ledger.resets import (
    ALL,
    AttemptReset,
    already_reset,
    failures_on_chain,
    held_at,
    resets_file,
    resets_path,
)
from gitaudit.ledger.trust import POLICY_PATH, Policy, Role, TrustSet
from gitaudit.plan.catalog import CheckedPlan, check_file
from gitaudit.plan.compare import Comparison, compare
from gitaudit.plan.digest import contract, step_digest
from gitaudit.plan.graph import topological_order
from gitaudit.plan.model import Plan
from gitaudit.plan.request import gaps
from gitaudit.plan.store import PlanFile


def _base_files(
    state: PlansState, *, trust: TrustSet | None = None, policy: Policy | None = None
) -> dict[str, bytes]:
    files = dict(state.files)
    files.update((trust or state.trust).files())
    files[POLICY_PATH] = dumps((policy or state.policy).to_json())
    return files


def _trailers(**pairs: str) -> str:
    return "\n".join(f"{k.replace('_', '-')}: {v}" for k, v in pairs.items())


# --------------------------------------------------------------------------------- trust


def trust_init(repo: Repo, signer: Signer, name: str, *, runner: bool = True) -> pygit2.Oid:
    """Create ``refs/audit/plans`` with its root commit, signed by *signer* (the first sealer),
    and pin that key: in the repository's trust anchor (written first: nothing is created when
    it cannot be) and in ``audit.rootKey``. A repository anchored to another key is refused."""
    if read_ref(repo.git, PLANS_REF) is not None:
        raise TrustError(
            f"{PLANS_REF} already exists; trust is initialised",
            hint="use `git audit trust add` to trust more keys",
        )
    trust = TrustSet().added(name, signer.public_key, "sealer")
    if runner:
        trust = trust.added(name, signer.public_key, "runner")
    trust.files()  # a name no allowed-signers line can hold is refused before anything is written
    fingerprint = signer.public_key.fingerprint()
    existing = anchor.find(repo)
    if existing is not None and existing.root_key != fingerprint:
        raise anchor.AnchorError(
            f"this repository is anchored to the root key {existing.root_key} "
            f"({existing.file}); a root of trust signed by {fingerprint} would fail the gate",
            hint="sign with the anchored key, or remove the anchor files "
            f"({', '.join(anchor.files(repo))}) to start a new root of trust",
        )
    if existing is None:
        anchor.write(repo, fingerprint)

    def build(state: PlansState) -> tuple[dict[str, bytes], str]:
        if state.exists:
            raise TrustError(f"{PLANS_REF} was created by another process meanwhile")
        files = {**trust.files(), POLICY_PATH: dumps(Policy().to_json())}
        message = (
            f"trust: initialise with sealer {name}\n\n"
            f"Root of trust: {signer.public_key.fingerprint()}\n\n" + _trailers(Audit_Trust="init")
        )
        return files, message

    commit, _ = append(repo, signer, build)
    assert commit is not None
    repo.git.config["audit.rootKey"] = fingerprint
    return commit


def trust_add(
    repo: Repo,
    signer: Signer,
    key: PublicKey,
    role: Role,
    name: str,
    labels: frozenset[str] = frozenset(),
) -> pygit2.Oid | None:
    def build(state: PlansState) -> tuple[dict[str, bytes], str] | None:
        _require_initialised(state)
        entry = state.trust.named(name)
        known = entry is not None and entry.key == key and role in entry.roles
        if known and entry is not None and labels <= entry.labels:
            return None
        trust = state.trust.added(name, key, role, labels)
        labelled = f" labelled {', '.join(sorted(labels))}" if labels else ""
        message = f"trust: add {name} as {role}{labelled}\n\n{key.fingerprint()}\n\n" + _trailers(
            Audit_Trust=f"add {role} {name}"
        )
        return _base_files(state, trust=trust), message

    commit, _ = append(repo, signer, build)
    return commit


def trust_remove(repo: Repo, signer: Signer, name: str) -> pygit2.Oid:
    def build(state: PlansState) -> tuple[dict[str, bytes], str]:
        _require_initialised(state)
        trust = state.trust.removed(name)
        message = f"trust: remove {name}\n\n" + _trailers(Audit_Trust=f"remove {name}")
        return _base_files(state, trust=trust), message

    commit, _ = append(repo, signer, build)
    assert commit is not None
    return commit


def _require_initialised(state: PlansState) -> None:
    if not state.exists:
        raise TrustError(f"{PLANS_REF} does not exist yet", hint="run `git audit trust init` first")


def set_policy(
    repo: Repo, signer: Signer, policy: Policy, *, allow_weaken: bool, reason: str | None
) -> tuple[pygit2.Oid | None, list[str]]:
    """Change the gate policy. A laxer policy is a weakening and needs *allow_weaken* and a
    reason; it is also refused outright when the current policy forbids weakening."""

    laxer: list[str] = []

    def build(state: PlansState) -> tuple[dict[str, bytes], str] | None:
        _require_initialised(state)
        if policy.to_json() == state.policy.to_json():
            return None
        laxer[:] = policy.laxer_than(state.policy)
        if laxer:
            _check_weaken_allowed(state, "policy", laxer, allow_weaken, reason)
        files = _base_files(state, policy=policy)
        # every active seal binds the policy digest: carry the seals over to the new policy
        for name, seal in state.seals.items():
            files[f"seals/{name}.json"] = dumps(
                {**seal.to_json(), "policy_digest": policy.digest()}
            )
        head = "policy: " + ("weaken" if laxer else "update")
        body = "\n".join(f"- weakened: {w}" for w in laxer)
        message = f"{head}\n\n{reason or ''}\n{body}\n\n" + _trailers(
            Audit_Policy=policy.digest(), Audit_Weakened="true" if laxer else "false"
        )
        return files, message

    commit, _ = append(repo, signer, build)
    return commit, laxer


def _check_weaken_allowed(
    state: PlansState, what: str, weakenings: list[str], allow: bool, reason: str | None
) -> None:
    listing = "; ".join(weakenings)
    if not state.policy.allow_weaken:
        raise SealError(
            f"{what} would be weakened ({listing}) and policy.json forbids weakening",
            hint="restore what was removed or loosened: a policy that forbids weakening cannot be "
            "relaxed either (that would itself be a weakening)",
        )
    if not allow or not reason:
        raise SealError(
            f"{what} would be weakened: {listing}",
            hint="restore it, or pass --allow-weaken --reason TEXT to record the weakening",
        )


# --------------------------------------------------------------------------------- seals


@frozen
class SealOutcome:
    plan: str
    commit: pygit2.Oid | None  # None: nothing to do
    record: SealRecord | None
    comparison: Comparison | None
    message: str


def seal_plan(
    repo: Repo,
    signer: Signer,
    checked: CheckedPlan,
    *,
    reason: str | None = None,
    allow_weaken: bool = False,
    tree: str | None = None,
    amend: bool = False,
) -> SealOutcome:
    """Seal the working copy of one plan (refusing an invalid plan and unrecorded weakening).

    The plan's protected set (:mod:`gitaudit.ledger.protected`) in *tree* (default: the work
    tree's fingerprint) is recorded with the seal. When the files the current seal protects
    differ from what it recorded (what the gate would call ``plan.protected-changed``), sealing
    is an **amendment**: refused unless *amend* (with a *reason*), and recorded with the files
    that changed. Files that enter or leave the set because the contract changes are the
    contract's business (protecting fewer is a weakening)."""
    plan = checked.require_valid()
    tree = tree or _work_tree(repo)
    protected = protected_files(repo.git, tree, plan) if tree else None
    digest = checked.digest
    assert digest is not None
    new_contract = contract(plan)
    outcome: dict[str, Any] = {}
    if amend and not reason:
        raise SealError("--amend needs --reason", hint="say why the protected files may change")

    def build(state: PlansState) -> tuple[dict[str, bytes], str] | None:
        _require_initialised(state)
        planner = _planner_name(state, signer, plan, amend=amend, allow_weaken=allow_weaken)
        old_checked, old_record = sealed_contract(state, plan.name)
        live = old_record is not None and not old_record.retired
        changes = _protected_changes(state, plan.name, old_checked, tree, amend, repo)
        new_protection = protected is not None and (
            not live or old_record is None or old_record.protected_digest is None
        )
        unchanged = live and old_record is not None and old_record.contract_digest == digest
        if unchanged and not changes and not (new_protection and amend):
            outcome.update(record=old_record, comparison=None)
            return None
        comparison = None
        change = "amended" if changes or (new_protection and amend) else "initial"
        weakenings: list[str] = []
        if old_checked is not None and old_checked.plan is not None:
            comparison = compare(contract(old_checked.plan), new_contract)
            weakenings = [c.render() for c in comparison.weakenings]
            if weakenings:
                if planner is None:
                    _check_weaken_allowed(
                        state, f"plan {plan.name!r}", weakenings, allow_weaken, reason
                    )
                change = "weakened"
            elif comparison.changes or change != "amended":
                change = "strengthened" if comparison.strengthenings else "neutral"
        record = SealRecord(
            plan=plan.name,
            version=(old_record.version + 1) if old_record else 1,
            contract_digest=digest,
            previous_digest=old_record.contract_digest
            if old_record and not old_record.retired
            else None,
            policy_digest=state.policy.digest(),
            sealed_at=now_iso(),
            sealer=signer_name(state, signer.public_key),
            sealer_fingerprint=signer.public_key.fingerprint(),
            reason=reason or "",
            change=change,
            weakened=bool(weakenings),
            weakenings=tuple(weakenings),
            strengthenings=tuple(c.render() for c in comparison.strengthenings)
            if comparison
            else (),
            protected_digest=manifest_digest(protected) if protected is not None else None,
            amended=changes.paths() if changes else None,
            request_digest=_request_digest(state, plan.name),
        )
        files = _base_files(state)
        files[f"plans/{plan.name}.json"] = checked.file.data
        files[f"seals/{plan.name}.json"] = dumps(record.to_json())
        if protected is not None:
            files[manifest_path(plan.name)] = manifest(protected)
        recorded = len(protected) if protected is not None and new_protection else None
        outcome.update(record=record, comparison=comparison)
        return files, _seal_message(record, _seal_lines(plan, comparison, changes, recorded))

    commit, _ = append(repo, signer, build, role="planner")
    record = outcome.get("record")
    comparison = outcome.get("comparison")
    if commit is None:
        version = record.version if record else "?"
        msg = f"plan {plan.name!r} is already sealed with this contract (v{version}); nothing to do"
    else:
        assert record is not None
        msg = f"sealed plan {plan.name!r} v{record.version} ({record.change}) as {str(commit)[:12]}"
    return SealOutcome(plan.name, commit, record, comparison, msg)


def _planner_name(
    state: PlansState, signer: Signer, plan: Plan, *, amend: bool, allow_weaken: bool
) -> str | None:
    """The principal name of *signer* when it is a planner and not a sealer (None: a sealer,
    whose *plan* must answer its sealed request). What only a sealer may ask for is refused
    here, in the planner's words; the rest of a planner's change is judged by the planner's
    rules when it is appended (:func:`gitaudit.ledger.plansref.planner_problem`)."""
    entry = state.trust.require(signer.public_key, "planner")
    if entry.may("sealer"):
        _require_answer(state, plan)
        return None
    if amend:
        raise SealError(
            f"planner {entry.name!r} cannot amend protected files: only a sealer can",
            hint="revert the protected files, or ask a sealer to review and amend the seal",
        )
    if allow_weaken:
        raise SealError(
            f"planner {entry.name!r} cannot weaken a plan: only a sealer can",
            hint="keep what the seal holds, or ask a sealer to record the weakening",
        )
    return entry.name


def _request_digest(state: PlansState, name: str) -> str | None:
    """The digest of plan *name*'s active sealed request (None: none)."""
    record = state.requests.get(name)
    return record.request_digest if record is not None and not record.retired else None


def _require_answer(state: PlansState, plan: Plan) -> None:
    """SealError when *plan* does not answer its sealed request."""
    request = state.request(plan.name)
    record = state.requests.get(plan.name)
    if request is None or record is None:
        return
    found = gaps(request, plan)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise SealError(
            f"plan {plan.name!r} does not answer its sealed request v{record.version}: "
            f"{found[0].message}{more}",
            hint="state each request requirement in $.requirements as the request does and "
            "cover it, or change the request first: "
            f"`git audit request seal --plan {plan.name}`",
        )


def _work_tree(repo: Repo) -> str | None:
    """The work tree's fingerprint (None without a work tree)."""
    if repo.workdir is None:
        return None
    from gitaudit.git.fingerprint import workspace_fingerprint

    return workspace_fingerprint(repo.workdir).tree


def _seal_lines(
    plan: Plan, comparison: Comparison | None, changes: Changes | None, recorded: int | None
) -> list[str]:
    """The body of a seal commit's message: what changed."""
    lines = (
        [c.render() for c in comparison.changes]
        if comparison
        else [f"{len(plan.steps)} steps, {len(plan.requirements)} requirements"]
    )
    if changes:
        lines.append(f"protected files amended: {changes.summary()}")
    elif recorded is not None:
        lines.append(f"{recorded} protected file(s) recorded")
    return lines


def _seal_message(record: SealRecord, lines: list[str]) -> str:
    title = f"seal({record.plan}): v{record.version} {record.change}" + (
        f" — {record.reason}" if record.reason else ""
    )
    return (
        f"{title}\n\n"
        + "\n".join(f"- {line}" for line in lines)
        + "\n\n"
        + _trailers(
            Audit_Plan=record.plan,
            Audit_Contract=record.contract_digest,
            Audit_Seal_Version=str(record.version),
            Audit_Weakened="true" if record.weakened else "false",
        )
    )


def _protected_changes(
    state: PlansState,
    name: str,
    current: CheckedPlan | None,
    tree: str | None,
    amend: bool,
    repo: Repo,
) -> Changes | None:
    """How the files the current seal of *name* (its plan: *current*) protects differ in *tree*
    from what it recorded (None: nothing recorded, or no tree); a difference without *amend* is
    refused."""
    sealed = state.protected(name)
    if sealed is None or tree is None or current is None or current.plan is None:
        return None
    changes = differences(sealed, protected_files(repo.git, tree, current.plan))
    if changes and not amend:
        record = state.seal(name)
        version = f" v{record.version}" if record else ""
        raise SealError(
            f"protected files of plan {name!r} changed since its seal{version} "
            f"({changes.summary()})",
            hint="revert them, or, as a sealer who reviewed them, amend the seal: "
            f"`git audit plan seal --amend --plan {name} --reason TEXT`",
        )
    return changes


def retire_plan(repo: Repo, signer: Signer, name: str, reason: str) -> pygit2.Oid:
    """Retire a sealed plan, and its sealed request with it: a signed change. Deleting the plan
    file alone never retires it. A request sealed for a plan never sealed is retired alone."""
    if not reason:
        raise SealError("retiring a plan needs --reason", hint="say why the plan no longer applies")

    def build(state: PlansState) -> tuple[dict[str, bytes], str]:
        _require_initialised(state)
        old = state.seal(name)
        request = state.requests.get(name)
        live = old is not None and not old.retired
        asked = request is not None and not request.retired
        if not live and not asked:
            raise PlanError(
                f"plan {name!r} is not sealed as active",
                hint="see `git audit plan history`",
            )
        if not state.policy.allow_weaken:
            raise SealError(
                f"retiring plan {name!r} removes its obligations and policy.json forbids weakening"
            )
        files = _base_files(state)
        who = (signer_name(state, signer.public_key), signer.public_key.fingerprint())
        title = f"retire({name}):"
        if old is not None and live:
            record = _retired_seal(state, old, who, reason)
            files.pop(f"plans/{name}.json", None)
            files[f"seals/{name}.json"] = dumps(record.to_json())
            title += f" v{record.version}"
        if request is not None and asked:
            retired = retire_request(request, now_iso(), who, reason)
            files.pop(request_path(name), None)
            files[record_path(name)] = dumps(retired.to_json())
            title += f" request v{retired.version}"
        message = f"{title} — {reason}\n\n" + _trailers(Audit_Plan=name, Audit_Retired="true")
        return files, message

    commit, _ = append(repo, signer, build)
    assert commit is not None
    return commit


def _retired_seal(
    state: PlansState, old: SealRecord, who: tuple[str, str], reason: str
) -> SealRecord:
    return SealRecord(
        plan=old.plan,
        version=old.version + 1,
        contract_digest=old.contract_digest,
        previous_digest=old.contract_digest,
        policy_digest=state.policy.digest(),
        sealed_at=now_iso(),
        sealer=who[0],
        sealer_fingerprint=who[1],
        reason=reason,
        change="retired",
        weakened=True,
        weakenings=("plan retired",),
        retired=True,
    )


# --------------------------------------------------------------------------- attempt resets


@frozen
class ResetOutcome:
    commit: pygit2.Oid | None  # None: nothing to reset
    reset: AttemptReset | None
    count: int  # the failed attempts that stop counting


def reset_attempts(repo: Repo, signer: Signer, plan: str, step: str, reason: str) -> ResetOutcome:
    """Let the failed attempts of *step* under the current contract count afresh: a signed
    commit recording how many the runs ledger holds now (see :mod:`gitaudit.ledger.resets`)."""
    if not reason:
        raise SealError(
            "resetting failed attempts needs --reason", hint="say why the step may be tried again"
        )
    outcome: dict[str, Any] = {}

    def build(state: PlansState) -> tuple[dict[str, bytes], str] | None:
        _require_initialised(state)
        seal = state.seal(plan)
        if seal is None or seal.retired:
            raise PlanError(
                f"plan {plan!r} is not sealed as active", hint="see `git audit plan history`"
            )
        sealed, _ = sealed_contract(state, plan)
        if sealed is None or sealed.plan is None or sealed.plan.step(step) is None:
            steps = ", ".join(sealed.plan.step_ids) if sealed and sealed.plan else "none"
            raise UsageError(f"plan {plan!r} has no step {step}", hint=f"steps: {steps}")
        contract_digest = seal.contract_digest
        tip = read_ref(repo.git, runs_ref(plan))
        # the failures that count: under the sealed contract and those a planner's reseals
        # led from, less what a sealer reset under each; the reset covers them all
        resets = dict(state.resets.get(plan, {}))
        failed = count = 0
        held = held_at(repo.git, tip)  # a reset taken on another chain reset nothing here
        for under in attempt_contracts(repo.git, state, plan):
            found = failures_on_chain(repo.git, tip, plan, under, {step: ALL})[step]
            failed += found
            count += found - already_reset(resets, step, under, held)
        outcome.update(count=max(count, 0))
        if count <= 0:
            return None
        resets[step] = AttemptReset(
            plan=plan,
            step=step,
            contract_digest=contract_digest,
            failed=failed,
            run=str(tip) if tip is not None else None,
            reason=reason,
            reset_at=now_iso(),
            sealer=signer_name(state, signer.public_key),
            sealer_fingerprint=signer.public_key.fingerprint(),
        )
        outcome.update(reset=resets[step])
        files = _base_files(state)
        files[resets_path(plan)] = resets_file(plan, resets)
        message = (
            f"reset-attempts({plan}): step {step} — {reason}\n\n"
            f"{count} failed attempt(s) under seal v{seal.version} no longer count.\n\n"
            + _trailers(
                Audit_Plan=plan,
                Audit_Contract=contract_digest,
                Audit_Reset_Attempts=f"{step} {failed}",
            )
        )
        return files, message

    commit, _ = append(repo, signer, build)
    return ResetOutcome(commit, outcome.get("reset"), int(outcome.get("count", 0)))


# --------------------------------------------------------------------------------- history


@frozen
class HistoryEntry:
    commit: str
    time: int
    signer: str
    record: SealRecord
    plan_data: bytes | None
    position: int = 0  # of the commit on the plans ref, 0 for the root


def history(repo: Repo, name: str | None = None) -> list[HistoryEntry]:
    """Every seal version of one plan or of all plans, newest first, from the verified chain.

    Each version is attributed to the commit that introduced it (the oldest commit carrying it).
    """
    state = read_state(repo)
    commits = list(chain.walk(repo.git, state.tip, what=PLANS_REF))
    seen: set[tuple[str, int]] = set()
    out: list[HistoryEntry] = []
    for position, commit in enumerate(reversed(commits)):
        at = state_at(repo.git, commit)
        for plan, record in sorted(at.seals.items()):
            key = (plan, record.version)
            if key in seen or (name is not None and plan != name):
                continue
            seen.add(key)
            out.append(
                HistoryEntry(
                    str(commit.id),
                    commit.commit_time,
                    record.sealer,
                    record,
                    at.sealed_plan(plan),
                    position,
                )
            )
    out.reverse()
    return out


def migration(
    name: str, previous: bytes | None, current: bytes | None
) -> tuple[list[str], list[str]]:
    """What a reseal keeps and what it reopens (versioned proofs): a step's evidence carries
    over when its step contract and those of everything it depends on are unchanged."""
    if current is None:
        return [], []
    new = check_file(PlanFile(name, "new", current), environment=False).plan
    old = check_file(PlanFile(name, "old", previous), environment=False).plan if previous else None
    if new is None:
        return [], []
    old_digests = {s.id: step_digest(old, s) for s in old.steps} if old is not None else {}
    kept: set[str] = set()
    for sid in topological_order(new):
        step = new.step(sid)
        assert step is not None
        if old_digests.get(sid) == step_digest(new, step) and all(
            d in kept for d in step.dependency_ids()
        ):
            kept.add(sid)
    order = topological_order(new)
    return [s for s in order if s in kept], [s for s in order if s not in kept]


@frozen
class ResetEntry:
    commit: str
    time: int
    reset: AttemptReset
    count: int  # the failed attempts it stopped counting
    position: int  # of the commit on the plans ref, 0 for the root


def reset_history(repo: Repo, name: str | None = None) -> list[ResetEntry]:
    """Every reset of failed attempts (of one plan or all), newest first, from the verified
    chain, each attributed to the commit that recorded it."""
    state = read_state(repo)
    commits = list(chain.walk(repo.git, state.tip, what=PLANS_REF))
    out: list[ResetEntry] = []
    previous: dict[tuple[str, str], AttemptReset] = {}
    for position, commit in enumerate(reversed(commits)):
        for plan, resets in sorted(state_at(repo.git, commit).resets.items()):
            for step, reset in sorted(resets.items()):
                before = previous.get((plan, step))
                previous[(plan, step)] = reset
                if reset == before or (name is not None and plan != name):
                    continue
                earlier = (
                    before.failed
                    if before and before.contract_digest == reset.contract_digest
                    else 0
                )
                out.append(
                    ResetEntry(
                        str(commit.id), commit.commit_time, reset, reset.failed - earlier, position
                    )
                )
    out.reverse()
    return out
