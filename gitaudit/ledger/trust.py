"""Who may sign what: the trust set and the gate policy stored on ``refs/audit/plans``.

``trust/allowed_signers`` (OpenSSH format, so plain git can verify with it) names each principal's
key; ``trust/roles.json`` says which principals are **sealers** (may change plans, seals,
requests, trust and policy), which are **planners** (may seal plan changes that answer the
sealed request and weaken nothing: an agent's own key), which are **runners** (may append
evidence) and which are **reconcilers** (may settle an unknown outcome by their word: ``git
audit reconcile --observed``). A sealer is a planner and a reconciler too. ``policy.json`` holds
the gate policy.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import field, replace
from typing import Any, Literal

import pygit2

from gitaudit.crypto.allowed_signers import (
    format_allowed_signers,
    parse_allowed_signers,
    signs_for,
)
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.errors import GitAuditError, TrustError
from gitaudit.frozen import frozen
from gitaudit.ledger.objects import blob_at, dumps, loads
from gitaudit.plan.digest import canonical, sha256

Role = Literal["sealer", "runner", "reconciler", "planner"]
ROLES: tuple[Role, ...] = ("sealer", "runner", "reconciler", "planner")
# the roles another role implies: a sealer, who may change the contract itself, may also say
# what was observed, and plan
IMPLIED_BY: Mapping[Role, tuple[Role, ...]] = {"reconciler": ("sealer",), "planner": ("sealer",)}
CommitMsgMode = Literal["off", "claims", "strict"]
COMMIT_MSG_MODES: tuple[CommitMsgMode, ...] = ("off", "claims", "strict")
LiveEvidence = Literal["allow", "refuse"]
LIVE_EVIDENCE: tuple[LiveEvidence, ...] = ("allow", "refuse")
AgentsMode = Literal["parallel-warn", "parallel-strict", "serial"]
# laxest first: a policy moving left is a weakening
AGENTS_MODES: tuple[AgentsMode, ...] = ("parallel-warn", "parallel-strict", "serial")
# the kinds of plans-ref change the policy may require several sealers for (ledger/approvals.py)
APPROVAL_KINDS = ("weaken", "amend", "trust", "policy", "request")

ALLOWED_SIGNERS_PATH = "trust/allowed_signers"
ROLES_PATH = "trust/roles.json"
POLICY_PATH = "policy.json"
ROLES_FORMAT = "gitaudit.roles/1"
POLICY_FORMAT = "gitaudit.policy/1"


@frozen
class EvidenceRule:
    """Whose evidence proves a tree for the refs matching *pattern*: runners named (a principal
    name, or a label a principal carries), and how many distinct ones must each have recorded
    a passing run of the plan for the same tree and contract."""

    pattern: str
    runners: tuple[str, ...]
    min: int = 1

    def admits(self, key: TrustedKey) -> bool:
        return key.name in self.runners or bool(key.labels & set(self.runners))

    def to_json(self) -> dict[str, Any]:
        return {"runners": sorted(self.runners), "min": self.min}

    def describe(self) -> str:
        who = ", ".join(sorted(self.runners))
        return f"{self.pattern}: {self.min} of [{who}]"


MAX_JSON_INT = (1 << 53) - 1  # the largest integer canonical JSON (RFC 8785) holds exactly


def _whole(value: Any, least: int) -> bool:
    """*value* is a JSON integer (not a bool) from *least* to :data:`MAX_JSON_INT`."""
    return not isinstance(value, bool) and isinstance(value, int) and least <= value <= MAX_JSON_INT


def _is_text(value: str) -> bool:
    """*value* encodes as UTF-8 (no lone surrogate, which JSON output cannot hold)."""
    return value.encode("utf-8", errors="ignore").decode() == value


def _rules_from_json(doc: Any) -> tuple[EvidenceRule, ...]:
    if not isinstance(doc, dict):
        raise ValueError("evidence must map ref patterns to {runners, min}")
    rules = []
    for pattern, rule in sorted(doc.items()):
        where = f"evidence[{pattern!r}]"
        if not isinstance(pattern, str) or not pattern.startswith("refs/") or not _is_text(pattern):
            raise ValueError(f"{where}: a ref pattern starts with refs/ (and is text)")
        if not isinstance(rule, dict) or set(rule) - {"runners", "min"}:
            raise ValueError(f'{where} must be {{"runners": [...], "min": N}}')
        runners = rule.get("runners")
        if (
            not isinstance(runners, list)
            or not runners
            or not all(isinstance(r, str) and r and _is_text(r) for r in runners)
        ):
            raise ValueError(f"{where}.runners must list runner names or labels")
        least = rule.get("min", 1)
        if not _whole(least, 1):
            raise ValueError(f"{where}.min must be a whole number, 1 or more (at most 2^53-1)")
        rules.append(EvidenceRule(pattern, tuple(sorted(set(runners))), least))
    return tuple(rules)


@frozen
class TrustedKey:
    name: str
    key: PublicKey
    roles: frozenset[str]
    labels: frozenset[str] = frozenset()  # what a runner is (linux, macos, ci): `runs_on`

    def describe(self) -> str:
        labels = f" [{', '.join(sorted(self.labels))}]" if self.labels else ""
        return (
            f"{self.name} ({', '.join(sorted(self.roles)) or 'no role'}){labels} "
            f"{self.key.fingerprint()}"
        )

    def may(self, role: Role) -> bool:
        """Whether this key may act in *role*: it holds it, or a role that implies it."""
        return role in self.roles or any(r in self.roles for r in IMPLIED_BY.get(role, ()))


@frozen
class TrustSet:
    keys: tuple[TrustedKey, ...] = ()

    def with_role(self, role: Role) -> list[PublicKey]:
        """The keys that may act in *role* (held, or implied by another role they hold)."""
        return [k.key for k in self.keys if k.may(role)]

    def find(self, key: PublicKey) -> TrustedKey | None:
        return next((k for k in self.keys if k.key == key), None)

    def named(self, name: str) -> TrustedKey | None:
        return next((k for k in self.keys if k.name == name), None)

    def require(self, key: PublicKey, role: Role) -> TrustedKey:
        """The trusted entry for *key* in *role*, or a TrustError saying what is missing."""
        entry = self.find(key)
        if entry is None:
            raise TrustError(
                f"key {key.fingerprint()} is not trusted by this repository",
                hint=f"a sealer must run `git audit trust add '{key.openssh()}' --role {role} "
                "--name NAME`",
            )
        if not entry.may(role):
            raise TrustError(
                f"key {entry.name} ({key.fingerprint()}) is not a {role}",
                hint=f"use a {role} key, or have a sealer run "
                f"`git audit trust add ... --role {role}`",
            )
        return entry

    def added(
        self, name: str, key: PublicKey, role: Role, labels: frozenset[str] = frozenset()
    ) -> TrustSet:
        current = self.named(name)
        if current is not None and current.key != key:
            raise TrustError(
                f"the name {name!r} already belongs to key {current.key.fingerprint()}",
                hint="choose another --name, or remove the old key first",
            )
        other = self.find(key)
        if other is not None and other.name != name:
            raise TrustError(f"this key is already trusted as {other.name!r}")
        # an evidence rule lists runner names and labels as one list: a name that is another
        # principal's label (or a label that is another's name) would be admitted as that one
        for k in self.keys:
            if k.name != name and name in k.labels:
                raise TrustError(
                    f"the name {name!r} is a label of {k.name}: evidence rules naming it would "
                    "admit this key too",
                    hint="choose another --name",
                )
            if k.name != name and k.name in labels:
                raise TrustError(
                    f"the label {k.name!r} is the name of a trusted principal: evidence rules "
                    "naming it would admit this key too",
                    hint="choose another --label",
                )
        if current is None:
            return TrustSet((*self.keys, TrustedKey(name, key, frozenset({role}), labels)))
        updated = replace(current, roles=current.roles | {role}, labels=current.labels | labels)
        return TrustSet(tuple(updated if k.name == name else k for k in self.keys))

    def removed(self, name: str) -> TrustSet:
        if self.named(name) is None:
            raise TrustError(f"no trusted key is named {name!r}", hint="see `git audit keys list`")
        rest = TrustSet(tuple(k for k in self.keys if k.name != name))
        if not rest.with_role("sealer"):
            raise TrustError(
                f"removing {name!r} would leave no sealer, and nobody could change trust again",
                hint="add another sealer first",
            )
        return rest

    def files(self) -> dict[str, bytes]:
        signers = format_allowed_signers(
            (k.name, k.key.with_comment("")) for k in sorted(self.keys, key=lambda k: k.name)
        )
        roles: dict[str, Any] = {
            "format": ROLES_FORMAT,
            "sealers": sorted(k.name for k in self.keys if "sealer" in k.roles),
            "runners": sorted(k.name for k in self.keys if "runner" in k.roles),
        }
        reconcilers = sorted(k.name for k in self.keys if "reconciler" in k.roles)
        if reconcilers:  # absent when empty: trust sets without reconcilers keep their bytes
            roles["reconcilers"] = reconcilers
        planners = sorted(k.name for k in self.keys if "planner" in k.roles)
        if planners:  # likewise
            roles["planners"] = planners
        labels = {k.name: sorted(k.labels) for k in self.keys if k.labels}
        if labels:  # likewise
            roles["labels"] = dict(sorted(labels.items()))
        return {ALLOWED_SIGNERS_PATH: signers.encode(), ROLES_PATH: dumps(roles)}

    def allowed_signers(self) -> str:
        return self.files()[ALLOWED_SIGNERS_PATH].decode()


def trust_from_tree(repo: pygit2.Repository, tree: pygit2.Tree, where: str) -> TrustSet:
    """Parse the trust set of one plans-ref commit; TrustError naming the commit when broken."""
    signers_raw = blob_at(repo, tree, ALLOWED_SIGNERS_PATH)
    roles_raw = blob_at(repo, tree, ROLES_PATH)
    if signers_raw is None or roles_raw is None:
        raise TrustError(
            f"{where} has no {ALLOWED_SIGNERS_PATH} or {ROLES_PATH}",
            hint="the plans ref was not created by `git audit trust init`",
        )
    try:
        entries = parse_allowed_signers(signers_raw.decode("utf-8"))
        roles = loads(roles_raw)
        if not isinstance(roles, dict) or roles.get("format") != ROLES_FORMAT:
            raise ValueError("unknown roles format (expected gitaudit.roles/1)")
        held = {role: set(_names(roles, f"{role}s")) for role in ROLES}
        labels = _labels(roles)
    except (GitAuditError, ValueError, UnicodeDecodeError) as exc:
        raise TrustError(f"{where}: malformed trust files: {exc}") from None
    keys: list[TrustedKey] = []
    for principals, key, options in entries:
        if not signs_for(options, "git"):
            # a line ssh-keygen (so git verify-commit) would not take for a ledger commit's
            # signature: an expired or not yet valid key, a CA, a key for other namespaces
            continue
        for name in principals.split(","):
            other = next((k for k in keys if k.name == name and k.key != key), None)
            if other is not None:  # one name, two keys: each would hold that name's roles
                raise TrustError(
                    f"{where}: malformed trust files: {ALLOWED_SIGNERS_PATH} names principal "
                    f"{name!r} for two keys ({other.key.fingerprint()}, {key.fingerprint()})",
                    hint="restore refs/audit/plans from a good copy",
                )
            granted = {r for r, names in held.items() if name in names}
            keys.append(TrustedKey(name, key, frozenset(granted), labels.get(name, frozenset())))
    return TrustSet(tuple(keys))


def _labels(doc: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    value = doc.get("labels", {})
    if not isinstance(value, dict) or not all(
        isinstance(v, list) and all(isinstance(x, str) and x for x in v) for v in value.values()
    ):
        raise ValueError("labels must map principal names to lists of labels")
    return {str(k): frozenset(v) for k, v in value.items()}


def _names(doc: Mapping[str, Any], field_name: str) -> list[str]:
    value = doc.get(field_name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{field_name} must be a list of names")
    return value


DEFAULT_MAX_ARTIFACT_BYTES = 4 << 20


@frozen
class Policy:
    """The gate policy. A server judges a push with the policy it already holds."""

    protected_refs: tuple[str, ...] = ("refs/heads/*",)
    allow_weaken: bool = True
    commit_msg: CommitMsgMode = "claims"
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)
    # "refuse": evidence of checks that ran in the live work tree (workspace: live) does not count
    live_evidence: LiveEvidence = "allow"
    # the largest artifact a run stores (a step's junit.xml, coverage.xml), in bytes
    max_artifact_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES
    # how claims of agents side by side may coexist, and what the gate makes of conflicts
    agents: AgentsMode = "parallel-warn"
    # per ref pattern, whose evidence proves a tree for that ref (trusted runners, k of them)
    evidence: tuple[EvidenceRule, ...] = ()
    # per kind of change (APPROVAL_KINDS), how many distinct sealers must approve it (absent: 1)
    approvals: tuple[tuple[str, int], ...] = ()

    def approvals_for(self, kind: str) -> int:
        """How many distinct sealers a change of *kind* needs (1: its signer alone)."""
        return dict(self.approvals).get(kind, 1)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "format": POLICY_FORMAT,
            "protected_refs": list(self.protected_refs),
            "allow_weaken": self.allow_weaken,
            "commit_msg": self.commit_msg,
        }
        if self.live_evidence != "allow":  # added in 0.2: only when set (stable digests)
            doc["live_evidence"] = self.live_evidence
        if self.max_artifact_bytes != DEFAULT_MAX_ARTIFACT_BYTES:  # added in 0.2: only when set
            doc["max_artifact_bytes"] = self.max_artifact_bytes
        if self.agents != "parallel-warn":  # added in 0.2: only when set (stable digests)
            doc["agents"] = self.agents
        if self.evidence:  # added in 0.3: only when set (stable digests)
            doc["evidence"] = {r.pattern: r.to_json() for r in self.evidence}
        if self.approvals:  # added in 0.3: only when set (stable digests)
            doc["approvals"] = dict(self.approvals)
        return doc

    def evidence_rule(self, refname: str | None) -> EvidenceRule | None:
        """The evidence rule for *refname*: the rule of its exact name, else of the longest
        pattern it matches; None when no rule applies (any trusted runner's evidence counts)."""
        if not refname:
            return None
        exact = [r for r in self.evidence if r.pattern == refname]
        if exact:
            return exact[0]
        matching = [r for r in self.evidence if fnmatch.fnmatchcase(refname, r.pattern)]
        return max(matching, key=lambda r: (len(r.pattern), r.pattern), default=None)

    def digest(self) -> str:
        return sha256(canonical(self.to_json()))

    def protects(self, refname: str) -> bool:
        return any(fnmatch.fnmatchcase(refname, pattern) for pattern in self.protected_refs)

    def laxer_than(self, old: Policy) -> list[str]:
        """What this policy relaxes compared with *old* (each is a weakening)."""
        out = [
            f"ref pattern {p!r} no longer protected"
            for p in old.protected_refs
            if p not in self.protected_refs
        ]
        if self.allow_weaken and not old.allow_weaken:
            out.append("weakening seals becomes allowed")
        if COMMIT_MSG_MODES.index(self.commit_msg) < COMMIT_MSG_MODES.index(old.commit_msg):
            out.append(f"commit-msg default {old.commit_msg} -> {self.commit_msg}")
        if self.live_evidence == "allow" and old.live_evidence == "refuse":
            out.append("evidence from the live work tree becomes acceptable")
        if AGENTS_MODES.index(self.agents) < AGENTS_MODES.index(old.agents):
            out.append(f"agents mode {old.agents} -> {self.agents}")
        out += self._laxer_evidence(old)
        for kind, least in old.approvals:
            if self.approvals_for(kind) < least:
                out.append(f"{kind} approvals: {least} -> {self.approvals_for(kind)} sealer(s)")
        return out

    def _laxer_evidence(self, old: Policy) -> list[str]:
        """What this policy's evidence rules relax compared with *old*'s. A removed rule
        relaxes (a broader rule, or none, governs its refs). A new or changed rule governs, in
        this policy, refs an old rule governed: its own pattern's, and those of every old
        pattern it may share a ref with (:func:`_may_share_a_ref`) and now takes precedence
        over (:func:`_outranks`), such as ``refs/heads/main`` added under ``refs/heads/*``: it
        relaxes each such old rule when it names a runner that rule did not, or a lower
        ``min``. When unsure whether two patterns share a ref, they do."""
        out: list[str] = []
        mine = {r.pattern: r for r in self.evidence}
        theirs = {r.pattern: r for r in old.evidence}
        out += [f"evidence rule for {p} removed" for p in theirs if p not in mine]
        for rule in self.evidence:
            if theirs.get(rule.pattern) == rule:
                continue
            for was in old.evidence:
                if was.pattern != rule.pattern and (
                    not _may_share_a_ref(was.pattern, rule.pattern)
                    or (was.pattern in mine and _outranks(was.pattern, rule.pattern))
                ):
                    continue
                where = rule.pattern
                if was.pattern != rule.pattern:
                    where += f", governed by the rule for {was.pattern} before,"
                if rule.min < was.min:
                    out.append(f"evidence for {where} needs {rule.min} runners, not {was.min}")
                added = sorted(set(rule.runners) - set(was.runners))
                if added:
                    out.append(f"evidence for {where} also from {', '.join(added)}")
        return out

    @classmethod
    def from_json(cls, doc: Any, where: str) -> Policy:
        try:
            if not isinstance(doc, dict) or doc.get("format") != POLICY_FORMAT:
                raise ValueError("not a gitaudit.policy/1 document")
            refs = doc.get("protected_refs", ["refs/heads/*"])
            if not isinstance(refs, list) or not all(isinstance(r, str) and r for r in refs):
                raise ValueError("protected_refs must be a list of ref patterns")
            if not all(_is_text(r) for r in refs):
                raise ValueError("protected_refs must be text (no lone surrogates)")
            allow = doc.get("allow_weaken", True)
            if not isinstance(allow, bool):
                raise ValueError("allow_weaken must be true or false")
            mode = doc.get("commit_msg", "claims")
            if mode not in COMMIT_MSG_MODES:
                raise ValueError(f"commit_msg must be one of {', '.join(COMMIT_MSG_MODES)}")
            live = doc.get("live_evidence", "allow")
            if live not in LIVE_EVIDENCE:
                raise ValueError(f"live_evidence must be one of {', '.join(LIVE_EVIDENCE)}")
            limit = doc.get("max_artifact_bytes", DEFAULT_MAX_ARTIFACT_BYTES)
            if not _whole(limit, 0):
                raise ValueError(
                    "max_artifact_bytes must be a number of bytes (0 or more, at most 2^53-1)"
                )
            agents = doc.get("agents", "parallel-warn")
            if agents not in AGENTS_MODES:
                raise ValueError(f"agents must be one of {', '.join(AGENTS_MODES)}")
            rules = _rules_from_json(doc.get("evidence", {}))
            approvals = _approvals_from_json(doc.get("approvals", {}))
        except ValueError as exc:
            raise TrustError(f"{where}: {POLICY_PATH} is invalid: {exc}") from None
        return cls(tuple(refs), allow, mode, doc, live, limit, agents, rules, approvals=approvals)


_WILD = "*?["  # what makes an evidence pattern a glob (git forbids them in ref names)


def _may_share_a_ref(one: str, other: str) -> bool:
    """Whether a ref name may match both evidence patterns (fnmatch): exactly when one is a
    plain name; for two globs, unless their literal heads (before the first wildcard) or tails
    (after the last) disagree, which every common ref would need to begin or end with. True
    when unsure."""
    if not any(c in one for c in _WILD):
        return fnmatch.fnmatchcase(one, other)
    if not any(c in other for c in _WILD):
        return fnmatch.fnmatchcase(other, one)
    heads = [re.split(r"[*?\[]", p, maxsplit=1)[0] for p in (one, other)]
    tails = [re.split(r"[*?\[\]]", p)[-1] for p in (one, other)]
    return (heads[0].startswith(heads[1]) or heads[1].startswith(heads[0])) and (
        tails[0].endswith(tails[1]) or tails[1].endswith(tails[0])
    )


def _outranks(one: str, other: str) -> bool:
    """Whether the rule for pattern *one* governs every ref the two (different) patterns share,
    as :meth:`Policy.evidence_rule` picks: a plain name is its ref's exact rule; between two
    globs the longer (then the greater) pattern wins."""
    if not any(c in one for c in _WILD):
        return True
    if not any(c in other for c in _WILD):
        return False
    return (len(one), one) > (len(other), other)


def _approvals_from_json(doc: Any) -> tuple[tuple[str, int], ...]:
    if not isinstance(doc, dict):
        raise ValueError("approvals must map kinds of change to numbers of sealers")
    for kind, least in doc.items():
        if kind not in APPROVAL_KINDS:
            raise ValueError(f"approvals: unknown kind {kind!r} ({', '.join(APPROVAL_KINDS)})")
        if not _whole(least, 1):
            raise ValueError(f"approvals.{kind} must be a whole number, 1 or more (at most 2^53-1)")
    return tuple(sorted(doc.items()))


def policy_from_tree(repo: pygit2.Repository, tree: pygit2.Tree, where: str) -> Policy:
    raw = blob_at(repo, tree, POLICY_PATH)
    if raw is None:
        raise TrustError(f"{where} has no {POLICY_PATH}")
    try:
        doc = loads(raw)
    except ValueError as exc:
        raise TrustError(f"{where}: {POLICY_PATH} is not valid JSON ({exc})") from None
    return Policy.from_json(doc, where)


def pinned_matches(pinned: str, key: PublicKey) -> bool:
    """``audit.rootKey`` may hold an OpenSSH public key line or a ``SHA256:`` fingerprint."""
    pinned = pinned.strip()
    if pinned.startswith("SHA256:"):
        return pinned == key.fingerprint()
    try:
        return PublicKey.from_openssh(pinned) == key
    except GitAuditError:
        return False
