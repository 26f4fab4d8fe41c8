"""``refs/audit/agents``: the registry of agents working side by side, and their claims.

One signed commit per record, on a linear chain. Each commit's tree holds ``record.json`` (what
happened: an agent registered, sent a heartbeat, claimed a step and paths, or released its
claim) and ``agents.json`` (the registry after it), so plain git can read both
(``git show refs/audit/agents:agents.json``). A record carries its sequence number and its
predecessor (the parent commit), and the plans commit whose trust set its signer was judged by;
reading the registry verifies, from the last verified tip (a high-water mark, like every audit
ref):

* the chain: linear, the parent is the record's ``prev``, the sequence goes up by one from 1,
  so a record dropped, inserted, reordered or cut off in the middle breaks it; a tip moved back
  (truncation at the end) is caught by the high-water mark (:mod:`gitaudit.ledger.watermark`);
* the signature: by a runner or sealer of the named plans commit, which must be on the verified
  plans chain and never older than its predecessor's; and the record's key must be that signer;
* the transition: only an agent's own key writes its records; a claim needs the step free, or
  held by a claim that was stale at the record's signed time (a *takeover*, named in the
  record); ``agents.json`` must be exactly the registry the records replay to;
* the time: a record signed more than the tolerated clock skew after the reader's clock is
  refused until then (its signed time decides who is stale).

A claim is *stale* once its agent's last record is older than the agent's lease; a stale claim
no longer blocks anyone and may be taken over. Which claims may coexist is the sealed policy's
``agents`` mode (``serial``, ``parallel-warn``, ``parallel-strict``), applied when a claim is
made; the gate applies it to evidence (:mod:`gitaudit.gate.claims`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import field, replace
from typing import Any

import pygit2

from gitaudit.crypto.commits import create_signed_commit, verify_commit
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.signers import Signer
from gitaudit.errors import GitAuditError, LedgerError, TrustError, UsageError
from gitaudit.frozen import frozen
from gitaudit.git.repo import Repo
from gitaudit.ledger import chain, watermark
from gitaudit.ledger.objects import blob_at, commit_of, dumps, loads, write_tree
from gitaudit.ledger.plansref import PlansState, state_at
from gitaudit.ledger.records import CLOCK_SKEW
from gitaudit.ledger.refs import AGENTS_REF, RefConflict, cas_update, read_ref
from gitaudit.ledger.trust import TrustSet
from gitaudit.plan.globs import GlobError, canonical

RECORD_FORMAT = "gitaudit.agent-record/1"
STATE_FORMAT = "gitaudit.agents/1"
RECORD_PATH = "record.json"
STATE_PATH = "agents.json"
ACTIONS = ("register", "heartbeat", "claim", "release")
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
DEFAULT_LEASE = 15 * 60
MAX_RETRIES = 50


class AgentError(GitAuditError):
    """An agents command that the registry refuses: an unknown agent, a step claimed by a live
    agent, a claim that went stale or was taken over."""


def check_name(name: str) -> str:
    if not NAME.fullmatch(name) or name.endswith(".lock") or ".." in name:
        raise UsageError(
            f"{name!r} is not a valid agent name",
            hint="use lower-case letters, digits, '.', '_' and '-' (at most 64), starting "
            "with a letter or digit",
        )
    return name


@frozen
class Claim:
    """An agent's hold on one step of one plan and on workspace paths (canonical globs);
    ``base`` is the work tree's fingerprint when it was made, ``seq`` the record that made it."""

    agent: str
    plan: str
    step: str
    paths: tuple[str, ...]
    base: str
    seq: int
    since: int

    def describe(self) -> str:
        paths = f" and {', '.join(self.paths)}" if self.paths else ""
        return f"claim #{self.seq} of agent {self.agent} on step {self.step} ({self.plan}){paths}"

    def to_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "plan": self.plan,
            "step": self.step,
            "paths": list(self.paths),
            "base": self.base,
            "seq": self.seq,
            "since": self.since,
        }

    @classmethod
    def from_json(cls, doc: Any) -> Claim:
        if not isinstance(doc, dict):
            raise TypeError("a claim must be an object")
        return cls(
            _s(doc["agent"]),
            _s(doc["plan"]),
            _s(doc["step"]),
            tuple(_s(p) for p in _l(doc["paths"])),
            _s(doc["base"]),
            _i(doc["seq"]),
            _i(doc["since"]),
        )


@frozen
class Agent:
    name: str
    key: str  # the SHA256 fingerprint of the key that registered it
    lease: int
    registered: int
    heartbeat: int  # the signed time of its newest record
    claim: Claim | None = None
    lost: Claim | None = None  # a claim taken over from it while stale, until it acknowledges

    def stale(self, now: float) -> bool:
        return now > self.heartbeat + self.lease

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "lease": self.lease,
            "registered": self.registered,
            "heartbeat": self.heartbeat,
            "claim": self.claim.to_json() if self.claim else None,
            "lost": self.lost.to_json() if self.lost else None,
        }

    @classmethod
    def from_json(cls, name: str, doc: Any) -> Agent:
        if not isinstance(doc, dict):
            raise TypeError(f"agent {name} must be an object")
        claim, lost = doc["claim"], doc["lost"]
        return cls(
            name,
            _s(doc["key"]),
            _i(doc["lease"]),
            _i(doc["registered"]),
            _i(doc["heartbeat"]),
            None if claim is None else Claim.from_json(claim),
            None if lost is None else Claim.from_json(lost),
        )


@frozen
class Registry:
    """The verified registry at ``tip`` (None: the ref does not exist)."""

    tip: pygit2.Oid | None = None
    seq: int = 0
    agents: Mapping[str, Agent] = field(default_factory=dict)

    def agent(self, name: str) -> Agent:
        found = self.agents.get(name)
        if found is None:
            known = ", ".join(sorted(self.agents)) or "none"
            raise AgentError(
                f"no agent named {name!r} is registered on {AGENTS_REF} (registered: {known})",
                hint=f"register it first: `git audit agents register {name}`",
            )
        return found

    def claims(self) -> list[Claim]:
        return [a.claim for a in self.agents.values() if a.claim is not None]

    def live(self, claim: Claim, now: float, trust: TrustSet | None = None) -> bool:
        """A claim blocks others while its agent's heartbeat is within its lease (and, with
        *trust*, while the agent's key is still trusted as a runner or sealer)."""
        agent = self.agents.get(claim.agent)
        if agent is None or agent.claim != claim or agent.stale(now):
            return False
        return trust is None or any(
            k.key.fingerprint() == agent.key and (k.may("runner") or k.may("sealer"))
            for k in trust.keys
        )

    def live_claims(self, now: float, trust: TrustSet | None = None) -> list[Claim]:
        return [c for c in self.claims() if self.live(c, now, trust)]

    def holder(self, plan: str, step: str) -> Claim | None:
        return next((c for c in self.claims() if c.plan == plan and c.step == step), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "seq": self.seq,
            "agents": {n: a.to_json() for n, a in sorted(self.agents.items())},
        }


EMPTY = Registry()


@frozen
class Record:
    """``record.json``: one change to the registry."""

    seq: int
    prev: str | None
    trust: str  # the plans commit whose trust set judges the signature
    agent: str
    action: str
    key: str
    plan: str | None = None
    step: str | None = None
    paths: tuple[str, ...] = ()
    base: str | None = None
    lease: int | None = None
    takeover: str | None = None  # the agent whose stale claim this claim takes over

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "format": RECORD_FORMAT,
            "seq": self.seq,
            "prev": self.prev,
            "trust": self.trust,
            "agent": self.agent,
            "action": self.action,
            "key": self.key,
        }
        if self.action == "register":
            doc["lease"] = self.lease
        if self.action == "claim":
            doc.update(
                plan=self.plan,
                step=self.step,
                paths=list(self.paths),
                base=self.base,
                takeover=self.takeover,
            )
        return doc

    @classmethod
    def from_json(cls, doc: Any, where: str) -> Record:
        try:
            if not isinstance(doc, dict) or doc.get("format") != RECORD_FORMAT:
                raise ValueError(f"not a {RECORD_FORMAT} record")
            action = _s(doc["action"])
            if action not in ACTIONS:
                raise ValueError(f"unknown action {action!r}")
            prev = doc["prev"]
            record = cls(
                seq=_i(doc["seq"]),
                prev=None if prev is None else _s(prev),
                trust=_s(doc["trust"]),
                agent=_s(doc["agent"]),
                action=action,
                key=_s(doc["key"]),
            )
            if action == "register":
                record = replace(record, lease=_i(doc["lease"]))
            if action == "claim":
                takeover = doc["takeover"]
                record = replace(
                    record,
                    plan=_s(doc["plan"]),
                    step=_s(doc["step"]),
                    paths=tuple(_s(p) for p in _l(doc["paths"])),
                    base=_s(doc["base"]),
                    takeover=None if takeover is None else _s(takeover),
                )
            if record.to_json() != doc:
                raise ValueError("it holds fields its action does not have")
        except (KeyError, TypeError, ValueError) as exc:
            raise LedgerError(
                f"{where}: malformed agent record ({exc})",
                hint=f"records are written by `git audit agents`; restore {AGENTS_REF}",
            ) from None
        return record


def _s(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {type(v).__name__}")
    return v


def _i(v: Any) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise TypeError("expected a non-negative integer")
    return v


def _l(v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise TypeError("expected a list")
    return v


# ------------------------------------------------------------------------------ replaying


def _bad(where: str, why: str) -> LedgerError:
    return LedgerError(f"{where}: {why}", hint=f"restore {AGENTS_REF} from a good copy")


def apply(reg: Registry, record: Record, at: int, where: str) -> Registry:
    """The registry after *record*, signed at time *at*; LedgerError naming *where* when the
    record is not a legal change of *reg*."""
    if record.seq != reg.seq + 1:
        raise _bad(where, f"record #{record.seq} follows record #{reg.seq} (they count 1, 2, ...)")
    if record.prev != (str(reg.tip) if reg.tip is not None else None):
        raise _bad(where, f"record #{record.seq} names {str(record.prev)[:12]} as predecessor")
    if not NAME.fullmatch(record.agent):
        raise _bad(where, f"{record.agent!r} is not an agent name")
    agents = dict(reg.agents)
    current = agents.get(record.agent)
    if record.action == "register":
        assert record.lease is not None
        if current is not None and current.key != record.key:
            raise _bad(where, f"agent {record.agent} is registered to another key")
        if record.lease < 1:
            raise _bad(where, "a lease must be at least one second")
        agents[record.agent] = (
            Agent(record.agent, record.key, record.lease, at, at)
            if current is None
            else replace(current, lease=record.lease, heartbeat=at)
        )
    elif current is None:
        raise _bad(where, f"agent {record.agent} is not registered")
    elif current.key != record.key:
        raise _bad(where, f"a record for agent {record.agent} is made with another agent's key")
    elif record.action == "heartbeat":
        agents[record.agent] = replace(current, heartbeat=at)
    elif record.action == "release":
        agents[record.agent] = replace(current, heartbeat=at, claim=None, lost=None)
    else:
        _apply_claim(reg, agents, current, record, at, where)
    return Registry(reg.tip, record.seq, agents)


def _apply_claim(
    reg: Registry, agents: dict[str, Agent], current: Agent, record: Record, at: int, where: str
) -> None:
    assert record.plan is not None and record.step is not None and record.base is not None
    if current.claim is not None:
        raise _bad(where, f"agent {record.agent} claims while holding {current.claim.describe()}")
    for path in record.paths:
        try:
            spelled = canonical(path)
        except GlobError as exc:
            raise _bad(
                where, f"record #{record.seq} claims a path that is not one: {exc}"
            ) from None
        if spelled != path:
            raise _bad(where, f"record #{record.seq} spells {spelled!r} as {path!r}")
    holder = reg.holder(record.plan, record.step)
    if holder is not None:
        previous = agents[holder.agent]
        if record.takeover != holder.agent or not previous.stale(at):
            raise _bad(where, f"step {record.step} is claimed by {holder.describe()}")
        agents[holder.agent] = replace(previous, claim=None, lost=holder)
    elif record.takeover is not None:
        raise _bad(where, f"record #{record.seq} takes over a claim that does not exist")
    claim = Claim(record.agent, record.plan, record.step, record.paths, record.base, record.seq, at)
    agents[record.agent] = replace(current, heartbeat=at, claim=claim, lost=None)


def _parse_state(doc: Any, tip: pygit2.Oid, where: str) -> Registry:
    try:
        if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT:
            raise ValueError(f"not a {STATE_FORMAT} document")
        raw = doc["agents"]
        if not isinstance(raw, dict):
            raise TypeError("agents must be an object")
        agents = {_s(n): Agent.from_json(n, a) for n, a in raw.items()}
        return Registry(tip, _i(doc["seq"]), agents)
    except (KeyError, TypeError, ValueError) as exc:
        raise LedgerError(f"{where}: malformed {STATE_PATH} ({exc})") from None


def _json_at(git: pygit2.Repository, commit: pygit2.Commit, path: str, where: str) -> Any:
    raw = blob_at(git, commit.tree, path)
    if raw is None:
        raise LedgerError(f"{where} has no {path}", hint=f"restore {AGENTS_REF} from a good copy")
    try:
        return loads(raw)
    except ValueError as exc:
        raise LedgerError(
            f"{where}: {path} is not valid JSON ({exc})",
            hint=f"restore {AGENTS_REF} from a good copy",
        ) from None


class _Judge:
    """Who may sign a record that names a plans commit: a runner or sealer of that commit's
    trust set, for a commit on the verified plans chain."""

    def __init__(self, git: pygit2.Repository, plans: PlansState) -> None:
        self.git = git
        self.plans = plans
        self.cache: dict[str, list[PublicKey]] = {}

    def keys(self, trust: str, where: str) -> list[PublicKey]:
        if trust in self.cache:
            return self.cache[trust]
        tip = self.plans.tip
        try:
            oid = pygit2.Oid(hex=trust)
            on_chain = tip is not None and (oid == tip or self.git.descendant_of(tip, oid))
        except (ValueError, pygit2.GitError):
            on_chain = False
        if not on_chain:
            raise TrustError(
                f"{where} is judged by plans commit {trust[:12]}, which is not on the verified "
                "refs/audit/plans",
                hint=f"fetch refs/audit/plans, or restore {AGENTS_REF} from a good copy",
            )
        state = self.plans if oid == tip else state_at(self.git, commit_of(self.git, oid, "plans"))
        keys = [k.key for k in state.trust.keys if k.may("runner") or k.may("sealer")]
        self.cache[trust] = keys
        return keys

    def later_or_same(self, new: str, old: str) -> bool:
        if new == old:
            return True
        try:
            return bool(self.git.descendant_of(pygit2.Oid(hex=new), pygit2.Oid(hex=old)))
        except (ValueError, pygit2.GitError):
            return False


def _verified_record(
    git: pygit2.Repository, judge: _Judge, commit: pygit2.Commit, previous: Record | None
) -> Record:
    """The record of *commit*, after its signature (by a runner or sealer of the plans commit it
    names, not older than *previous*'s) and its key field are checked."""
    where = f"agents commit {str(commit.id)[:12]}"
    record = Record.from_json(_json_at(git, commit, RECORD_PATH, where), where)
    if previous is not None and not judge.later_or_same(record.trust, previous.trust):
        raise LedgerError(
            f"{where}: record #{record.seq} is judged by an older trust set than record "
            f"#{previous.seq}",
            hint=f"restore {AGENTS_REF} from a good copy",
        )
    try:
        signer = verify_commit(git, commit.id, judge.keys(record.trust, where))
    except GitAuditError as exc:
        raise TrustError(
            f"{where}: not signed by a trusted runner or sealer: {exc.message}",
            hint=f"someone rewrote {AGENTS_REF}; restore it from a good copy",
        ) from None
    if signer.fingerprint() != record.key:
        raise TrustError(f"{where}: signed by {signer.fingerprint()}, not by the record's key")
    return record


def verify_segment(
    git: pygit2.Repository,
    plans: PlansState,
    tip: pygit2.Oid,
    stop: pygit2.Oid | None,
    now: float | None = None,
) -> Registry:
    """Verify every agents commit from *tip* back to *stop* (exclusive; None: the root) and
    return the registry at *tip*. The registry at *stop* is taken from its ``agents.json`` after
    its own signature is checked. Errors name the first bad commit, oldest first. A record
    signed more than :data:`CLOCK_SKEW` after *now* (this machine's clock) is refused: its time
    decides staleness (a takeover, a heartbeat), so a key holder who dated it ahead would take
    over a live claim, or keep its own alive, before that time came."""
    now = time.time() if now is None else now
    commits, reached = chain.segment(git, tip, stop, what=AGENTS_REF, linear=True)
    if not reached:
        raise LedgerError(f"{AGENTS_REF} does not descend from {str(stop)[:12]}")
    commits.reverse()
    judge = _Judge(git, plans)
    reg, previous = EMPTY, None
    if stop is not None:
        base = commit_of(git, stop, AGENTS_REF)
        previous = _verified_record(git, judge, base, None)
        where = f"agents commit {str(stop)[:12]}"
        reg = _parse_state(_json_at(git, base, STATE_PATH, where), stop, where)
    for commit in commits:
        where = f"agents commit {str(commit.id)[:12]}"
        record = _verified_record(git, judge, commit, previous)
        if commit.commit_time > now + CLOCK_SKEW:
            dated = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(commit.commit_time))
            raise LedgerError(
                f"{where}: record #{record.seq} is dated {dated}, ahead of this machine's clock",
                hint=f"check the clocks here and where it was signed; a record dated ahead is "
                f"refused until then (or restore {AGENTS_REF} from a good copy)",
            )
        after = apply(reg, record, commit.commit_time, where)
        after = replace(after, tip=commit.id)
        stored = _parse_state(_json_at(git, commit, STATE_PATH, where), commit.id, where)
        if stored.to_json() != after.to_json():
            raise LedgerError(
                f"{where}: {STATE_PATH} is not the registry its records make",
                hint=f"restore {AGENTS_REF} from a good copy",
            )
        reg, previous = after, record
    return reg


def read_registry(repo: Repo, plans: PlansState, *, remember: bool = True) -> Registry:
    """The verified registry (EMPTY when the ref does not exist), verified from the last
    verified tip; a tip that does not descend from it (a truncated registry) fails."""
    with watermark.view(repo.gitdir) as marks:
        tip = read_ref(repo.git, AGENTS_REF)
    reg, verified_now = verify_registry(repo, plans, tip, marks)
    if remember and tip is not None and verified_now:  # none: the tip was the verified mark
        watermark.record(repo.gitdir, {AGENTS_REF: str(tip)}, "verified", repo.git)
    return reg


def verify_registry(
    repo: Repo, plans: PlansState, tip: pygit2.Oid | None, marks: watermark.Marks
) -> tuple[Registry, int]:
    """The registry at *tip* (read under *marks*, :func:`watermark.view`), verified from its
    verified mark (from the root without one), and the number of commits verified now; a tip
    behind or beside a mark, or deleted after one, fails. Nothing is marked."""
    git = repo.git
    watermark.check_forward(git, repo.gitdir, AGENTS_REF, tip, marks)
    if tip is None:
        return EMPTY, 0
    # only a mark gitaudit MAC'd here says the records up to it were verified (the file is a
    # cache anything in the work tree can write); the tip's own record is verified all the same
    mark = watermark.verified(git, repo.gitdir, marks, AGENTS_REF)
    stop = None
    if mark and mark != str(tip):
        stop = pygit2.Oid(hex=mark)
    elif mark == str(tip):
        stop = commit_of(git, tip, AGENTS_REF).parent_ids[0] if _has_parent(git, tip) else None
    reg = verify_segment(git, plans, tip, stop)
    return reg, 0 if mark == str(tip) else chain.count(git, tip, stop)


def _has_parent(git: pygit2.Repository, tip: pygit2.Oid) -> bool:
    return bool(commit_of(git, tip, AGENTS_REF).parent_ids)


# ------------------------------------------------------------------------------- writing

Draft = dict[str, Any]  # the record's fields beyond seq, prev, trust and key
Build = Callable[[Registry, int], Draft | None]


def _identity(git: pygit2.Repository, at: int) -> pygit2.Signature:
    try:
        who = git.default_signature
        return pygit2.Signature(who.name, who.email, at, 0)
    except (KeyError, pygit2.GitError):
        return pygit2.Signature("gitaudit", "gitaudit@localhost", at, 0)


def append(
    repo: Repo, signer: Signer, plans: PlansState, build: Build
) -> tuple[Record | None, Registry]:
    """Append one signed record; compare-and-swap, re-read and retry on races. *build* gets the
    verified registry and the time the record will be signed at, and returns the record's fields
    (``agent``, ``action`` and the action's own), or None for nothing to do."""
    if not plans.exists:
        raise TrustError(
            "refs/audit/plans does not exist: nobody is trusted to sign agent records",
            hint="run `git audit init` (or `git audit trust init`) first",
        )
    entry = plans.trust.find(signer.public_key)
    if entry is None or not (entry.may("runner") or entry.may("sealer")):
        raise TrustError(
            f"key {signer.public_key.fingerprint()} is not a trusted runner or sealer",
            hint="agents sign with a runner key: a sealer runs "
            "`git audit trust add KEY --role runner --name NAME`",
        )
    git = repo.git
    for _ in range(MAX_RETRIES):
        reg = read_registry(repo, plans)
        at = int(time.time())
        draft = build(reg, at)
        if draft is None:
            return None, reg
        record = Record(
            seq=reg.seq + 1,
            prev=str(reg.tip) if reg.tip is not None else None,
            trust=str(plans.tip),
            key=signer.public_key.fingerprint(),
            **draft,
        )
        after = apply(reg, record, at, f"new record #{record.seq}")
        files = {RECORD_PATH: dumps(record.to_json()), STATE_PATH: dumps(after.to_json())}
        what = f"{record.action} {record.step}" if record.step else record.action
        message = (
            f"agents: {record.agent} {what}\n\n"
            f"Audit-Agent: {record.agent}\nAudit-Agent-Seq: {record.seq}\n"
        )
        who = _identity(git, at)
        try:
            tree = write_tree(git, files)
            commit = create_signed_commit(
                git,
                tree=tree,
                parents=[reg.tip] if reg.tip is not None else [],
                message=message,
                signer=signer,
                author=who,
                committer=who,
            )
            cas_update(git, AGENTS_REF, commit, reg.tip, f"gitaudit: {message.splitlines()[0]}")
        except RefConflict:
            continue
        except (OSError, pygit2.GitError) as exc:
            raise LedgerError(f"cannot write to {AGENTS_REF}: {exc}; nothing was recorded") from exc
        watermark.record(repo.gitdir, {AGENTS_REF: str(commit)}, "verified", git)
        return record, replace(after, tip=commit)
    raise LedgerError(f"{AGENTS_REF} kept moving; gave up after {MAX_RETRIES} attempts")
