"""`git audit attest`: the gate's verdict on a commit as an in-toto Statement (v1) with a SLSA
Verification Summary (v1) predicate, in a DSSE envelope signed by a trusted runner key.

Subjects: the commit (digest ``gitCommit``) and its tree (``gitTree``). Predicate: the verifier
(gitaudit's gate), the time, the resource (the repository URI at the commit), the policy (the
sealed contract digests of the judged plans, hashed together; each one listed in the extension
field), the inputs (the plans commit the verdict used and each run commit it relied on) and the
result: ``PASSED`` only for a gate PASS. ``attest verify`` checks an envelope offline against the
repository's trust set. The layout is documented in docs/attestations.md.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pygit2

from gitaudit import __version__
from gitaudit.crypto import dsse
from gitaudit.crypto.signers import Signer
from gitaudit.errors import RepositoryError, SignatureError, TrustError
from gitaudit.frozen import frozen
from gitaudit.gate.assess import plan_files
from gitaudit.gate.judge import judge
from gitaudit.gate.request import requested_names
from gitaudit.gate.result import GateResult
from gitaudit.git.repo import Repo
from gitaudit.ledger.plansref import PlansState, read_state, state_at
from gitaudit.ledger.refs import PLANS_REF, runs_ref
from gitaudit.ledger.trust import EvidenceRule, Policy, TrustedKey
from gitaudit.plan.digest import canonical

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
VSA_TYPE = "https://slsa.dev/verification_summary/v1"
VERIFIER_ID = "https://gitaudit.dev/verifier/gate/v1"
EXTENSION = "https://gitaudit.dev/attestation/gate/v1"
PASS_LEVEL = "GITAUDIT_GATE_PASS"  # noqa: S105 - a SLSA result name, not a secret
STAMP = "%Y-%m-%dT%H:%M:%SZ"


@frozen
class Attestation:
    statement: dict[str, Any]
    result: GateResult
    commit: str
    rule: EvidenceRule | None = None  # the evidence rule of the ref judged for (`--for`)

    def payload(self) -> bytes:
        return json.dumps(self.statement, indent=None, separators=(",", ":")).encode()


def _repository_uri(repo: Repo) -> str:
    """``git+<origin URL>`` without credentials, else a URN naming no local path."""
    url = repo.config("remote.origin.url")
    if url:
        url = re.sub(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", r"\1", url.strip())
        return url if url.startswith("git+") else f"git+{url}"
    return "urn:gitaudit:repository"


def contracts_digest(contracts: dict[str, str]) -> str:
    """sha256 (hex) of the RFC 8785 JSON of ``{plan: "sha256:<contract digest>"}``: the policy."""
    return hashlib.sha256(canonical(contracts)).hexdigest()


def rule_json(rule: EvidenceRule | None) -> dict[str, Any] | None:
    """An evidence rule as a statement records it (None: no rule applied)."""
    return None if rule is None else {"pattern": rule.pattern, **rule.to_json()}


def build(
    repo: Repo,
    rev: str | None,
    plan: str | None,
    when: datetime | None = None,
    for_ref: str | None = None,
) -> Attestation:
    """Judge *rev* (default HEAD), for the ref *for_ref* when given (its evidence rule), and
    describe the verdict as an in-toto Statement."""
    sha, tree = _commit(repo, rev or "HEAD", "give a commit, branch or tag")
    result = judge(repo, sha, plan=plan, for_ref=for_ref)
    # a statement for some plans is no statement about the commit: it says whether it is one
    judged = {p.name for p in result.plans}
    complete = plan is None or {p.name for p in judge(repo, sha, for_ref=for_ref).plans} <= judged
    state = read_state(repo)
    rule = state.policy.evidence_rule(for_ref)
    base = _repository_uri(repo)
    contracts: dict[str, str] = {}
    plans_doc = []
    for verdict in result.plans:
        seal = state.seal(verdict.name)
        digest = seal.contract_digest if seal else None
        if digest:
            contracts[verdict.name] = digest
        plans_doc.append(
            {
                "name": verdict.name,
                "verdict": str(verdict.verdict),
                "contract_digest": digest,
                "seal_version": seal.version if seal else None,
                "run": verdict.run,
            }
        )
    inputs = []
    tip = result.basis.plans_tip or (str(state.tip) if state.tip else None)
    if tip:
        inputs.append({"uri": f"{base}#{PLANS_REF}", "digest": {"gitCommit": tip}})
    for verdict in result.plans:
        if verdict.run:
            inputs.append(
                {"uri": f"{base}#{runs_ref(verdict.name)}", "digest": {"gitCommit": verdict.run}}
            )
    passed = str(result.verdict) == "PASS"
    stamp = (when or datetime.now(UTC)).strftime(STAMP)
    until = result.basis.until
    valid_until = None if until is None else datetime.fromtimestamp(until, UTC).strftime(STAMP)
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": "commit", "uri": f"{base}@{sha}", "digest": {"gitCommit": sha}},
            {"name": "tree", "uri": f"{base}@{sha}", "digest": {"gitTree": tree}},
        ],
        "predicateType": VSA_TYPE,
        "predicate": {
            "verifier": {"id": VERIFIER_ID, "version": {"gitaudit": __version__}},
            "timeVerified": stamp,
            "resourceUri": f"{base}@{sha}",
            "policy": {
                "uri": f"{base}#{PLANS_REF}",
                "digest": {"sha256": contracts_digest(contracts)},
            },
            "inputAttestations": inputs,
            "verificationResult": "PASSED" if passed else "FAILED",
            "verifiedLevels": [PASS_LEVEL if passed else "FAILED"],
            "slsaVersion": "1.0",
            EXTENSION: {
                "verdict": str(result.verdict),
                "commit": sha,
                "tree": tree,
                "plans_commit": tip,
                "contracts": contracts,
                "plans": plans_doc,
                "complete": complete,
                # the ref judged for and its evidence rule: whose runs prove a tree there
                "for_ref": for_ref,
                "evidence_rule": rule_json(rule),
                # when the evidence of the verdict expires (a step's valid_for): the gate says
                # UNKNOWN from then, and so must the statement (null: it does not expire)
                "valid_until": valid_until,
                "reasons": [r.message for p in result.plans for r in p.reasons]
                + [r.message for r in result.reasons],
            },
        },
    }
    return Attestation(statement, result, sha, rule)


def sign(repo: Repo, attestation: Attestation, signer: Signer) -> dsse.Envelope:
    """The DSSE envelope of *attestation*, signed by *signer*, which must be a trusted runner
    (one the evidence rule of the ref judged for admits, when one applied)."""
    entry = read_state(repo).trust.require(signer.public_key, "runner")
    rule = attestation.rule
    if rule is not None and not rule.admits(entry):
        raise TrustError(
            f"runner {entry.name} does not prove a tree for the refs matching {rule.pattern} "
            f"(the policy's evidence rule: {rule.describe()}), so its word attests nothing there",
            hint="sign with the key of a runner the rule names",
        )
    return dsse.sign(signer, dsse.IN_TOTO_PAYLOAD_TYPE, attestation.payload())


@frozen
class Checked:
    """An envelope whose signature verified: who signed, and what the statement says."""

    signer: TrustedKey
    statement: dict[str, Any]
    result: str  # PASSED | FAILED
    commit: str
    tree: str
    contracts: dict[str, str]
    notes: tuple[str, ...]  # what could not be cross-checked in this repository
    plans: dict[str, str]  # the verdict of each plan judged
    complete: bool  # every plan of the commit was judged (not `attest --plan` of some)
    # (plan, why) for each judged plan sealed with another contract since: its verdict is not
    # one under the contract in force
    outdated: tuple[tuple[str, str], ...] = ()
    # the plans this repository's gate judges for the commit now that the statement did not
    # judge (sealed since it was made)
    unjudged: tuple[str, ...] = ()
    judged_for: str | None = None  # the ref the statement was judged for (`attest --for`)
    # why the statement's verdict no longer holds in time: the evidence it rested on expired (a
    # step's valid_for), or it records no expiry (an older gitaudit)
    stale: str | None = None
    # why the statement is not about the commit it is verified for (`attest verify FILE REV`)
    elsewhere: str | None = None
    # why the statement is no verdict for the ref it is verified for: the policy's evidence
    # rule names who proves a tree there, and the statement was judged otherwise or signed by
    # a runner the rule does not name
    ref_refusal: str | None = None
    # why the plans state now judges evidence more strictly than the plans commit the statement
    # was judged under: a runner of it is no runner now (removed, renamed, labels taken), or the
    # policy refuses what it accepted (live evidence, side-by-side agents' conflicts)
    stricter: str | None = None

    @property
    def passed(self) -> bool:
        return self.result == "PASSED"

    def refusal(self, plan: str | None = None) -> str | None:
        """Why the attestation does not show the commit PASSed (for *plan*, when given: that
        plan PASSed), or None."""
        if self.elsewhere is not None:
            return self.elsewhere
        if plan is not None:
            return self._plan_refusal(plan) or self.stale or self.ref_refusal or self.stricter
        if not self.passed:
            return None  # FAILED: said as such, never accepted
        return self._commit_refusal() or self.stale or self.ref_refusal or self.stricter

    def _commit_refusal(self) -> str | None:
        """Why the PASSED statement is no verdict on the commit under the seals now, or None."""
        if not self.complete:
            names = ", ".join(sorted(self.plans)) or "none"
            return (
                f"the attestation judged plan {names} only, not every plan of the commit: it is "
                f"accepted for that plan (`git audit attest verify FILE --plan "
                f"{sorted(self.plans)[0] if self.plans else 'NAME'}`)"
            )
        if self.unjudged:
            return (
                f"the attestation did not judge plan {', '.join(self.unjudged)}, which the "
                "gate judges for the commit now (sealed since it was made): it is no verdict "
                "on the commit; attest it again"
            )
        return self.outdated[0][1] if self.outdated else None

    def _plan_refusal(self, plan: str) -> str | None:
        """Why the attestation does not show that *plan* PASSed, or None."""
        verdict = self.plans.get(plan)
        if verdict is None:
            judged = ", ".join(sorted(self.plans)) or "none"
            return f"the attestation judged no plan {plan!r} (plans judged: {judged})"
        if verdict != "PASS":
            return f"plan {plan!r} is {verdict}, not PASS"
        return next((why for name, why in self.outdated if name == plan), None)


def verify(
    repo: Repo,
    text: bytes,
    source: str,
    for_ref: str | None = None,
    rev: str | None = None,
    now: float | None = None,
) -> Checked:
    """Check an envelope offline: a trusted runner's Ed25519 signature over the DSSE PAE, an
    in-toto v1 Statement with a VSA v1 predicate, a policy digest that matches its listed
    contracts, and (when the repository holds the commit) a tree subject that matches it. What
    keeps it from being the verdict under the seals and the policy in force (for the ref
    *for_ref*, when given), on the commit *rev* (when given) and at *now* (its evidence not
    expired) is in the result's refusal."""
    envelope = dsse.loads(text, source)
    if envelope.payload_type != dsse.IN_TOTO_PAYLOAD_TYPE:
        raise SignatureError(
            f"{source}: payloadType is {envelope.payload_type!r}, not {dsse.IN_TOTO_PAYLOAD_TYPE!r}"
        )
    state = read_state(repo)
    trust = state.trust
    key = dsse.verify(envelope, trust.with_role("runner"))
    signer = trust.find(key)
    if signer is None:  # with_role returned it, so find() does too
        raise TrustError(f"{source}: signed by an unknown key")
    try:
        statement = json.loads(envelope.payload)
    except ValueError:
        raise SignatureError(f"{source}: the signed payload is not JSON") from None
    checked = _check_statement(repo, statement, signer, source)
    checked = _against_seals(repo, state, checked)
    return replace(
        checked,
        ref_refusal=_against_rules(state.policy, checked, for_ref),
        stale=_expired(checked, datetime.now(UTC).timestamp() if now is None else now),
        elsewhere=None if rev is None else _elsewhere(repo, checked, rev),
        stricter=_against_plans_then(repo, state, checked),
    )


def _against_plans_then(repo: Repo, state: PlansState, checked: Checked) -> str | None:
    """Why the plans state now judges the evidence of *checked*'s verdict more strictly than
    the plans commit it was judged under, or None. A runner of that commit that is no runner
    now (removed, renamed, a label taken away) no longer proves a tree, a reconciler (or
    sealer) that is none now no longer settles an outcome by its word, and a policy that now
    refuses what it accepted (evidence from the live work tree, runs conflicting with another
    agent's claim) refuses the runs the verdict took: the gate says otherwise, and a statement
    made before must not go on saying PASSED. A runner added, or a policy relaxed, since
    changes nothing."""
    tip = checked.statement["predicate"].get(EXTENSION, {}).get("plans_commit")
    git = repo.git
    try:
        then = git[pygit2.Oid(hex=tip)] if isinstance(tip, str) else None
    except (KeyError, ValueError):
        then = None
    now = state.tip
    if (
        not isinstance(then, pygit2.Commit)
        or now is None
        or (then.id != now and not git.descendant_of(now, then.id))
    ):
        return (
            f"the attestation's plans commit {tip} is not in this repository's {PLANS_REF}: "
            "the runners and policy it judged under cannot be compared with those now; fetch "
            f"{PLANS_REF}, or attest the commit again"
        )
    earlier = state_at(git, then)
    tightened = _stricter_policy(earlier.policy, state.policy)
    if tightened is not None:
        return (
            f"the policy is stricter now than when the attestation was made (plans commit "
            f"{tip[:12]}): {tightened}, so the gate may refuse the evidence the verdict took; "
            "run the plan again and attest the commit again"
        )
    for old in earlier.trust.keys:
        current = state.trust.find(old.key)
        if old.may("runner") and (
            current is None
            or not current.may("runner")
            or current.name != old.name
            or not old.labels <= current.labels
        ):
            return (
                f"runner {old.name} ({old.key.fingerprint()}), trusted when the attestation "
                f"was made (plans commit {tip[:12]}), is not that runner now: the gate refuses "
                "its evidence, so the verdict may rest on it; run the plan again and attest "
                "the commit again"
            )
        if old.may("reconciler") and (current is None or not current.may("reconciler")):
            return (
                f"{old.name} ({old.key.fingerprint()}) settled outcomes by its word when the "
                f"attestation was made (plans commit {tip[:12]}) and is no reconciler now: the "
                "gate refuses its settlements, so the verdict may rest on one; attest the "
                "commit again"
            )
    return None


def _stricter_policy(then: Policy, now: Policy) -> str | None:
    """What the policy *now* refuses in evidence that the policy *then* accepted, or None (its
    evidence rules are compared with the statement's own, in :func:`_against_rules`)."""
    if then.live_evidence == "allow" and now.live_evidence == "refuse":
        return "evidence from the live work tree is refused (live_evidence: refuse)"
    if then.agents == "parallel-warn" and now.agents != "parallel-warn":
        return f"a run conflicting with another agent's claim is refused (agents: {now.agents})"
    return None


def _expired(checked: Checked, now: float) -> str | None:
    """Why *checked*'s verdict no longer holds at *now*, or None: a PASS rests on evidence that
    expires (a step's ``valid_for``); from then the gate says UNKNOWN, and a statement made
    before would otherwise say PASSED forever."""
    extension = checked.statement["predicate"].get(EXTENSION, {})
    if "valid_until" not in extension:
        return (
            "the attestation records no expiry of the evidence it rests on (an older "
            "gitaudit made it): attest the commit again"
        )
    until = extension["valid_until"]
    if until is None:
        return None
    try:
        moment = datetime.strptime(str(until), STAMP).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return f"the attestation's valid_until {until!r} is no time ({STAMP}): attest it again"
    if now < moment:
        return None
    return (
        f"the evidence the attestation rests on expired at {until} (a step's valid_for): the "
        "gate says UNKNOWN now; run the plan again and attest the commit again"
    )


def _elsewhere(repo: Repo, checked: Checked, rev: str) -> str | None:
    """Why *checked* is not about the commit *rev* names, or None: an attestation says PASSED
    for the commit and tree it names, and one for another commit (an older one that passed)
    handed in for this one says nothing about it."""
    sha, tree = _commit(repo, rev, "give the commit the attestation must be about")
    if (checked.commit, checked.tree) == (sha, tree):
        return None
    return (
        f"the attestation is about commit {checked.commit} (tree {checked.tree}), not {rev} "
        f"({sha}, tree {tree}): it says nothing about that commit; attest it"
    )


def _against_rules(policy: Policy, checked: Checked, want: str | None) -> str | None:
    """Why *checked* is no verdict for the ref *want* (default: the ref it was judged for)
    under the policy's evidence rules, or None. A verdict judged for no ref took any trusted
    runner's evidence: it is none for a ref whose rule names the runners that prove it, nor is
    one judged under another rule, nor one signed by a runner the rule does not name (an
    agent's own runner key signs whatever statement it likes)."""
    ref = want or checked.judged_for
    if ref is None:
        if not policy.evidence:
            return None
        rules = "; ".join(r.describe() for r in policy.evidence)
        return (
            f"the attestation was judged for no ref, taking any trusted runner's evidence, and "
            f"this repository's policy names who proves a tree for some refs ({rules}): verify "
            "it --for the ref it is about (attested --for that ref)"
        )
    rule = policy.evidence_rule(ref)
    if rule is None:
        return None
    recorded = checked.statement["predicate"].get(EXTENSION, {}).get("evidence_rule")
    if recorded != rule_json(rule):
        judged = f"for {checked.judged_for}" if checked.judged_for else "for no ref"
        return (
            f"the attestation was judged {judged}, not under the evidence rule for {ref} "
            f"({rule.describe()}): attest the commit again with --for {ref}"
        )
    if not rule.admits(checked.signer):
        return (
            f"the attestation is signed by {checked.signer.name}, a runner the evidence rule "
            f"for {ref} does not name ({rule.describe()}): its word proves nothing there"
        )
    return None


def _against_seals(repo: Repo, state: PlansState, checked: Checked) -> Checked:
    """*checked* with what the statement's verdict is not under the seals in force now: each
    judged plan sealed with another contract since, and each plan the gate judges for the
    commit now that the statement did not judge. A statement is the verdict under the
    contracts it lists; a plan strengthened (or added) since was never judged by it."""
    outdated = []
    for name in sorted(checked.plans):
        seal = state.seal(name)
        attested = checked.contracts.get(name)
        if seal is None or seal.retired or seal.contract_digest == attested:
            continue
        outdated.append(
            (
                name,
                f"plan {name!r} is sealed with contract {seal.contract_digest} now (version "
                f"{seal.version}); the attestation judged contract {attested}: it is no verdict "
                "under the contract in force; attest it again",
            )
        )
    names = set(state.active()) | set(state.requested())
    try:
        commit = repo.git[pygit2.Oid(hex=checked.commit)]
    except (KeyError, ValueError):
        commit = None
    if isinstance(commit, pygit2.Commit):
        tree = str(commit.tree_id)
        names |= {f.name for f in plan_files(repo, tree, checked.commit)}
        names |= requested_names(repo, state, tree)
    unjudged = tuple(sorted(names - set(checked.plans)))
    return replace(checked, outdated=tuple(outdated), unjudged=unjudged)


def _subject_digests(subjects: object) -> tuple[str | None, str | None]:
    """The one gitCommit and the one gitTree the subjects name (None for either when they name
    none, or more than one: a consumer matches any subject, so a statement naming two commits
    would be taken for each)."""
    found: dict[str, set[str]] = {"gitCommit": set(), "gitTree": set()}
    for s in subjects if isinstance(subjects, list) else []:
        if isinstance(s, dict) and isinstance(s.get("digest"), dict):
            for kind, value in s["digest"].items():
                found.setdefault(kind, set()).add(str(value))
    if len(found) != 2 or any(len(values) != 1 for values in found.values()):
        return None, None
    return next(iter(found["gitCommit"])), next(iter(found["gitTree"]))


def _check_statement(repo: Repo, statement: object, signer: TrustedKey, source: str) -> Checked:
    def bad(what: str) -> SignatureError:
        return SignatureError(f"{source}: the signed statement {what}")

    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise bad(f"is not an in-toto Statement v1 (_type {STATEMENT_TYPE})")
    if statement.get("predicateType") != VSA_TYPE:
        raise bad(f"has predicateType {statement.get('predicateType')!r}, not {VSA_TYPE}")
    commit, tree = _subject_digests(statement.get("subject"))
    if not commit or not tree:
        raise bad("names not exactly one gitCommit and one gitTree subject (and no other)")
    predicate = statement.get("predicate")
    if not isinstance(predicate, dict):
        raise bad("has no predicate")
    result = predicate.get("verificationResult")
    if result not in ("PASSED", "FAILED"):
        raise bad("has no verificationResult PASSED or FAILED")
    _agrees(predicate, commit, tree, bad)
    contracts, plans, complete = _extension(predicate, bad)
    judged_for = predicate.get(EXTENSION, {}).get("for_ref")
    if judged_for is not None and not isinstance(judged_for, str):
        raise bad("names a ref judged for that is not text")
    notes = []
    try:
        obj = repo.git[pygit2.Oid(hex=commit)]
    except (KeyError, ValueError):
        notes.append(f"commit {commit[:12]} is not in this repository: its tree is not compared")
    else:
        if not isinstance(obj, pygit2.Commit) or str(obj.tree_id) != tree:
            raise bad(f"names tree {tree[:12]}, but commit {commit[:12]} has another tree")
    return Checked(
        signer,
        statement,
        str(result),
        commit,
        tree,
        contracts,
        tuple(notes),
        plans,
        complete,
        judged_for=judged_for,
    )


def _agrees(
    predicate: dict[str, Any], commit: str, tree: str, bad: Callable[[str], SignatureError]
) -> None:
    """The statement says one thing: its extension names the commit and tree of its subjects,
    and the gate verdict PASS exactly when its result is PASSED (a reader of either part is
    told the same)."""
    extension = predicate.get(EXTENSION)
    extension = extension if isinstance(extension, dict) else {}
    if (extension.get("commit"), extension.get("tree")) != (commit, tree):
        raise bad(f"names commit {commit[:12]} as its subject and another in {EXTENSION}")
    result = predicate["verificationResult"]
    if (result == "PASSED") != (extension.get("verdict") == "PASS"):
        raise bad(f"says {result}, and its gate verdict ({EXTENSION}) says otherwise")


def _extension(
    predicate: dict[str, Any], bad: Callable[[str], SignatureError]
) -> tuple[dict[str, str], dict[str, str], bool]:
    """The contracts the predicate's policy digest covers, each judged plan's verdict, and
    whether every plan of the commit was judged (a statement without the field, from an older
    gitaudit, is not known to be complete)."""
    extension = predicate.get(EXTENSION)
    if not isinstance(extension, dict):
        extension = {}
    contracts = extension.get("contracts")
    if not isinstance(contracts, dict):
        raise bad(f"lists no contracts ({EXTENSION})")
    policy = predicate.get("policy")
    claimed = policy.get("digest", {}).get("sha256") if isinstance(policy, dict) else None
    if claimed != contracts_digest(contracts):
        raise bad("has a policy digest that does not match the contracts it lists")
    plans = _plan_verdicts(extension.get("plans"))
    if plans is None:
        raise bad(f"lists no plans with their verdicts ({EXTENSION})")
    return dict(contracts), plans, extension.get("complete") is True


def _plan_verdicts(plans: object) -> dict[str, str] | None:
    """name -> verdict of the extension's ``plans`` list, or None when it is not one."""
    if not isinstance(plans, list):
        return None
    out = {}
    for entry in plans:
        if not isinstance(entry, dict):
            return None
        name, verdict = entry.get("name"), entry.get("verdict")
        if not isinstance(name, str) or not isinstance(verdict, str):
            return None
        out[name] = verdict
    return out


def _commit(repo: Repo, spec: str, hint: str) -> tuple[str, str]:
    """(commit id, tree id) of the commit *spec* names; RepositoryError with *hint* otherwise."""
    try:
        commit = repo.git.revparse_single(spec).peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        raise RepositoryError(f"unknown revision {spec!r}", hint=hint) from None
    return str(commit.id), str(commit.tree_id)
