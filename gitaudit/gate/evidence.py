"""The gate's second question for each plan in order: does signed, fresh evidence prove it for
exactly this tree?

The ledgers read are the plan's own (``refs/audit/runs/<plan>``) and the remote-tracking copies
of other clones' ledgers that ``git fetch`` brought in (``refs/gitaudit/remotes/<remote>/...``),
with the same checks: neither may have been rewound since it was last seen. On each, the newest
run of the plan for the tree under the current seal's contract is found (the lookup cache's
answer confirmed by the signed chain, :mod:`gitaudit.ledger.lookup`); the run and the ledger tip
must be signed by a trusted runner (on the plan's own ledger anything else is tampering; a
remote-tracking copy that does not verify is ignored, with a note). The newest of those runs is
judged; when it cannot decide every step alone (a partial run, runner labels), older runs of the
same tree and contract are composed in (:mod:`gitaudit.gate.compose`). Every required step must
be proven (carried steps traced to the run they came from) by a signer with the authority for
what the step entry claims (:mod:`gitaudit.gate.authority`), fresh, and every mandatory
requirement covered. Judged for a ref whose policy names the runners it takes evidence from
(:mod:`gitaudit.gate.runners`), the plan is judged a second time from those runners' runs alone:
the others' runs can fail the tree there, never supply a step's outcome. Nothing is executed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pygit2

from gitaudit.crypto.commits import verify_commit
from gitaudit.errors import GitAuditError
from gitaudit.frozen import frozen
from gitaudit.gate.authority import Copies, past_exhaustion, unauthorised_reconcile, unreconciled
from gitaudit.gate.compose import (
    Proof,
    Source,
    effective_labels,
    needs_more_runs,
    newest_first,
    prove,
    same_run,
)
from gitaudit.gate.result import Reason
from gitaudit.git.repo import Repo
from gitaudit.ledger import index, lookup, watermark
from gitaudit.ledger.objects import commit_of
from gitaudit.ledger.plansref import PlansState
from gitaudit.ledger.programs import Here
from gitaudit.ledger.records import CLOCK_SKEW, MalformedRun, RunRecord, StepEntry
from gitaudit.ledger.refs import mirrored_runs, read_ref, runs_ref
from gitaudit.ledger.runs import read_run
from gitaudit.ledger.tallies import Tallies
from gitaudit.ledger.trust import EvidenceRule, TrustedKey
from gitaudit.ledger.watermark import marked
from gitaudit.plan.graph import clauses_of, optional_steps, viable_without
from gitaudit.plan.model import Plan
from gitaudit.verdict import StepStatus, Verdict, output_broken, uncovered, unproven_step


@frozen
class Evidence:
    """The gate's judgement of one plan's evidence.

    ``record``: the newest run judged (for a ref with an evidence rule, the newest by a runner
    it admits, when there is one; None when there is none, or it could not be read);
    ``run``: its commit id; ``seen``: ledger ref -> the tip whose signature was verified (never a
    pushed ledger's tip, which is not ours to remember); ``until``: the earliest expiry among the
    evidence accepted; ``sources``: every run whose entries were used, newest first."""

    reasons: tuple[Reason, ...]
    record: RunRecord | None = None
    run: str | None = None
    seen: Mapping[str, str] = field(default_factory=dict)
    until: float | None = None
    notes: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()


@frozen
class Judging:
    """What judging one plan's evidence needs."""

    repo: Repo
    state: PlansState
    name: str
    plan: Plan
    tree: str
    now: float
    pushed: pygit2.Oid | None  # the tip of a runs ref being pushed (pre-receive)
    digests: Callable[[], Mapping[str, str]]  # the steps' input digests for this tree
    workdir: Path | None = None  # the work tree, when it is what is judged
    ref: str | None = None  # the ref judged for (status --for, the hooks): its evidence rule
    rule: EvidenceRule | None = None  # the policy's rule for that ref, if any
    # judging the runs of the runners *rule* admits, alone: a step they carried from another
    # runner's run is not proven (:func:`_ruled`)
    admitted_only: bool = False
    # carried sources traced so far, by (source, carrying run, ledger): every carried step of a run
    # usually comes from the same earlier run, which is checked and read once
    traced: dict[tuple[str, str, str], RunRecord | None] = field(
        default_factory=dict, compare=False, repr=False
    )
    # carrying run -> the newest execution below it of each step it carries (None: unreadable),
    # read in one walk for all of them
    newest: dict[str, dict[str, tuple[StepStatus, str]] | None] = field(
        default_factory=dict, compare=False, repr=False
    )
    # carrying run -> the newest execution below it, on any tree, of each step it carries for
    # unchanged inputs with those inputs (None: unreadable), read in one walk for all of them
    newest_inputs: dict[str, dict[str, tuple[StepStatus, str]] | None] = field(
        default_factory=dict, compare=False, repr=False
    )
    # run -> its trusted signer (None: no runner's signature verifies), asked by the ruled pass
    signers: dict[str, TrustedKey | None] = field(default_factory=dict, compare=False, repr=False)
    # the copies of the plan's ledger read (what failed attempts and unknown outcomes are
    # counted on, :mod:`gitaudit.gate.authority`): set once they are read
    held: tuple[tuple[str, pygit2.Oid | None], ...] = ()
    # (ledger key, its tip, run) -> whether that tip holds the run: asked for every step the
    # run proves, and a walk of the whole chain for a run deep in it; known without one for a
    # run found on that tip (confirmed on its chain)
    holds: dict[tuple[str, str, str], bool] = field(default_factory=dict, compare=False, repr=False)
    # ledger key -> its tallies (None: not in the lookup cache), read once when needed
    tallied: dict[str, Tallies | None] = field(default_factory=dict, compare=False, repr=False)
    # plan -> the ledger's tip a pushed tip extends and its tallies (:func:`_base`), read once
    bases: dict[str, tuple[pygit2.Oid, Tallies] | None] = field(
        default_factory=dict, compare=False, repr=False
    )
    # this machine, when what the checks ran here is compared with what its PATH finds (not on
    # the server, which judges runs made elsewhere): :mod:`gitaudit.ledger.programs`
    here: Here | None = field(default=None, compare=False, repr=False)

    @property
    def run_fix(self) -> str:
        return f"git audit run --plan {self.name}"


@frozen
class _Ledger:
    """One copy of the plan's ledger the gate reads: its ref, the key the lookup cache knows it
    by, its tip as read, and the remote it came from (None: the plan's own)."""

    ref: str
    key: str
    tip: pygit2.Oid | None
    remote: str | None = None

    @property
    def name(self) -> str:
        return f"{self.remote}'s copy of {self.ref}" if self.remote else self.ref


@dataclass
class _Survey:
    """What the ledgers read say about this tree: the newest trusted run on each (with its
    ledger), the tips verified, notes on ignored copies, and the newest run for the tree under
    another contract."""

    found: list[tuple[_Ledger, RunRecord]] = field(default_factory=list)
    seen: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    other: str | None = None


def judge_evidence(j: Judging) -> Evidence:
    git, gitdir = j.repo.git, j.repo.gitdir
    own = runs_ref(j.name)
    try:
        with watermark.view(gitdir) as marks:
            # the copies fetched, and those a mark names: one the gate saw and is gone was
            # deleted (a newer failure on it would otherwise vanish with it)
            mirrors = {} if j.pushed is not None else mirrored_runs(git, j.name, marked(marks))
            ledgers = [_Ledger(own, j.name, j.pushed or read_ref(git, own))]
            ledgers += [_Ledger(ref, ref, read_ref(git, ref), r) for r, ref in mirrors.items()]
        for ledger in ledgers:
            watermark.check_forward(git, gitdir, ledger.ref, ledger.tip, marks)
        if ledgers[0].tip is not None:
            commit_of(git, ledgers[0].tip, own)  # a ref overwritten with a blob is named
    except GitAuditError as exc:
        reason = Reason("evidence.ledger", exc.message, exc.hint or "restore the runs ref")
        return Evidence((reason,))
    j = replace(j, held=tuple((lg.key, lg.tip) for lg in ledgers))
    survey = _Survey()
    for ledger in ledgers:
        refused = _newest_on(j, ledger, survey)
        if refused is not None:
            return refused
    seen, notes = survey.seen, survey.notes
    if not survey.found:
        return Evidence((_no_evidence(j, survey.other),), seen=seen, notes=tuple(notes))
    ledger, newest = _newest_found(j, survey.found)
    if ledger.remote is not None:
        notes.append(f"the evidence was recorded elsewhere and fetched from {ledger.remote}")
    sources = [Source(newest, ledger.key, _labels(j, newest))]
    tips = [(lg, tip) for lg in ledgers if (tip := lg.tip) is not None]
    every: list[Source] | None = None  # every run for the tree, read once when needed
    if needs_more_runs(j.plan, newest):
        composed = _every_run(j, tips)
        if isinstance(composed, Reason):
            return Evidence((composed,), newest, newest.commit, seen, notes=tuple(notes))
        every = composed
        sources = composed or sources
    reasons, until, used = _content_reasons(j, sources)
    extra, beyond = _beyond_the_tree(j, used)
    if len(used) > 1:
        notes.append(
            f"composed from {len(used)} runs: {', '.join(s.record.commit[:12] for s in used)}"
        )
    evidence = Evidence(
        tuple([*reasons, *extra]),
        newest,
        newest.commit,
        seen,
        until,
        tuple([*notes, *beyond]),
        tuple(s.record.commit for s in used),
    )
    return evidence if j.rule is None else _for_ref(j, j.rule, evidence, every, tips)


def _for_ref(
    j: Judging,
    rule: EvidenceRule,
    every: Evidence,
    runs: list[Source] | None,
    tips: list[tuple[_Ledger, pygit2.Oid]],
) -> Evidence:
    """The evidence for a ref with a rule: the judgement of every run (*every*: an advisory run
    can fail the tree) and that of the admitted runners' runs alone (only they can prove it),
    whose newest run is the one named when they have one. *runs*: every run for the tree, when
    composing already read them."""
    if runs is None:
        read = _every_run(j, tips, strict=False)
        runs = read if not isinstance(read, Reason) else []
    ruled = _ruled(j, rule, runs)
    expiries = [u for u in (every.until, ruled.until) if u is not None]
    return replace(
        every,
        reasons=(*every.reasons, *(r for r in ruled.reasons if r not in every.reasons)),
        record=ruled.record or every.record,
        run=ruled.run or every.run,
        until=min(expiries) if expiries else None,
        notes=(*every.notes, *(n for n in ruled.notes if n not in every.notes)),
        sources=(*ruled.sources, *(s for s in every.sources if s not in ruled.sources)),
    )


def _ruled(j: Judging, rule: EvidenceRule, runs: list[Source]) -> Evidence:
    """The ref's evidence rule (:mod:`gitaudit.gate.runners`). The plan is judged again from the
    runs of the runners the rule admits, alone, by the same rules (composed, carried steps
    traced, authority, freshness): another runner's run is advisory, so it supplies no step's
    outcome (else a passing run of the agent's own key, newer than ci's failure of the same
    tree, would be what proves it). And at least ``min`` admitted runners' newest runs of the
    tree must have PASSed: a reason when too few did, else a note of who did."""
    from gitaudit.gate.runners import describe, tally  # refs with an evidence rule only

    admitted, advisory, agreed_until, borrowed = tally(
        j.plan,
        rule,
        runs,
        j.now,
        lambda signer, record: _own_word(j, signer, record),
        lambda commit: _run_at(j, commit),
    )
    text = describe(rule, j.ref or rule.pattern, admitted, advisory, borrowed)
    theirs = [s for s in runs if s.signer is not None and rule.admits(s.signer)]
    reasons: list[Reason] = []
    until: float | None = None
    used: list[Source] = []
    notes: tuple[str, ...] = ()
    if theirs:
        ruled = replace(j, admitted_only=True)
        sources = theirs if needs_more_runs(j.plan, theirs[0].record) else theirs[:1]
        reasons, until, used = _content_reasons(ruled, sources)
        more, notes = _beyond_the_tree(ruled, used)
        reasons += [r for r in more if r not in reasons]
    if len(admitted) < rule.min:
        reasons.append(
            Reason(
                "evidence.runner-rule",
                f"plan {j.name!r}: {text}",
                f"have {'a runner' if rule.min == 1 else f'{rule.min} runners'} of "
                f"{', '.join(sorted(rule.runners))} run the plan on this commit (e.g. in CI: "
                f"`{j.run_fix}` then `git audit push`), then `git audit sync`",
                verdict=Verdict.UNKNOWN,
            )
        )
    newest = used[0].record if used else None
    if agreed_until is not None:  # the rule holds only while enough runners' runs are fresh
        until = agreed_until if until is None else min(until, agreed_until)
    return Evidence(
        tuple(reasons),
        newest,
        newest.commit if newest is not None else None,
        until=until,
        notes=notes if reasons else (text, *notes),
        sources=tuple(s.record.commit for s in used),
    )


def _newest_on(j: Judging, ledger: _Ledger, survey: _Survey) -> Evidence | None:
    """Add what *ledger* says about this tree to *survey*. A problem with the plan's own ledger
    decides the evidence (returned); a remote-tracking copy with a problem is ignored, noted."""
    seal = j.state.seal(j.name)
    assert seal is not None
    own = ledger.remote is None
    try:
        answer = lookup.find_run(
            j.repo.git,
            j.repo.gitdir,
            j.name,
            j.tree,
            seal.contract_digest,
            pushed=j.pushed if own else None,
            ledger=None if own else ledger.key,
        )
    except GitAuditError as exc:
        if isinstance(exc, MalformedRun):
            decided = _malformed(j, exc)
        else:
            reason = Reason("evidence.ledger", exc.message, exc.hint or "restore the runs ref")
            decided = Evidence((reason,))
        return _decides(survey, ledger, decided, exc.message)
    record, tip = answer.record, answer.tip
    if record is None:
        survey.other = survey.other or answer.other_contract
        return None
    untrusted = _untrusted(j, (("run", pygit2.Oid(hex=record.commit)), ("ledger tip", tip)))
    if untrusted is not None:
        decided = Evidence((untrusted,), record, record.commit)
        return _decides(survey, ledger, decided, untrusted.message)
    # the tip's signature was just verified: it may become the high-water mark, so a later
    # rewind of this ledger is caught by the next status (a pushed tip is not ours)
    if tip is not None and (j.pushed is None or not own):
        survey.seen[ledger.ref] = str(tip)
    if tip is not None and tip == ledger.tip:
        # on the first-parent chain of the tip judged: confirmed there, or walked to from a
        # pushed tip, which extends the ledger's own (pre-receive refuses any other first)
        j.holds[(ledger.key, str(tip), record.commit)] = True
    survey.found.append((ledger, record))
    return None


def _newest_found(j: Judging, found: list[tuple[_Ledger, RunRecord]]) -> tuple[_Ledger, RunRecord]:
    """The newest run for this tree among the ledgers read (each ledger's newest): one that
    another ledger's newest was recorded after, on its chain (itself, or a copy a push signed
    again), is older whatever the clocks say (a remote-tracking copy left at an older run, which
    anyone who writes ``.git/`` can make, must not outrank the newer run of the same chain); the
    rest by signed time, the plan's own first on a tie."""
    if len(found) == 1:
        return found[0]
    git = j.repo.git
    seal = j.state.seal(j.name)
    assert seal is not None
    below: dict[str, set[tuple[int, str]]] = {}  # ledger -> the runs for the tree on its chain
    for ledger, _newest in found:
        try:
            records = (
                lookup.every_run(
                    git, j.repo.gitdir, ledger.key, j.tree, seal.contract_digest, ledger.tip
                )
                if ledger.tip is not None
                else []
            )
        except GitAuditError:
            records = []
        below[ledger.ref] = {same_run(r) for r in records}

    def superseded(ledger: _Ledger, record: RunRecord) -> bool:
        run = pygit2.Oid(hex=record.commit)
        return any(
            other.commit != record.commit
            and (
                same_run(record) in below[theirs.ref]
                or git.descendant_of(pygit2.Oid(hex=other.commit), run)
            )
            for theirs, other in found
            if theirs is not ledger
        )

    current = [f for f in found if not superseded(*f)]
    return min(current or found, key=lambda f: -f[1].time)


def _decides(survey: _Survey, ledger: _Ledger, evidence: Evidence, why: str) -> Evidence | None:
    """A problem found on *ledger*: on the plan's own it decides the evidence; a remote-tracking
    copy is ignored instead (noted)."""
    if ledger.remote is None:
        return evidence
    survey.notes.append(f"{ledger.name} is ignored: {why}")
    return None


def _labels(j: Judging, record: RunRecord) -> frozenset[str]:
    """The runner labels *record* counts for (its signature was verified by the caller)."""
    try:
        key = verify_commit(j.repo.git, record.commit, j.state.trust.with_role("runner"))
    except GitAuditError:
        return frozenset()
    signer = j.state.trust.find(key)
    return effective_labels(record.labels, signer.labels if signer else frozenset())


def _every_run(
    j: Judging, ledgers: list[tuple[_Ledger, pygit2.Oid]], *, strict: bool = True
) -> list[Source] | Reason:
    """Every run of the plan for this tree and contract on the ledgers read, newest first, each
    with its signer and the labels it holds. A run on the plan's own ledger that a trusted
    runner did not sign is tampering (a reason), or a ledger that cannot be listed; on a
    remote-tracking copy, or not *strict* (what a ref's rule reads, to find whose runs count:
    such a run is nobody's evidence, and the newest run and the tip were verified already), it
    is skipped."""
    seal = j.state.seal(j.name)
    assert seal is not None
    runners = j.state.trust.with_role("runner")
    per_ledger: list[list[Source]] = []
    for ledger, tip in ledgers:
        try:
            records = lookup.every_run(
                j.repo.git, j.repo.gitdir, ledger.key, j.tree, seal.contract_digest, tip
            )
        except GitAuditError as exc:
            if ledger.remote is None and strict:
                return Reason("evidence.ledger", exc.message, exc.hint or "restore the runs ref")
            continue
        runs = []
        for record in records:
            try:
                key = verify_commit(j.repo.git, record.commit, runners)
            except GitAuditError as exc:
                if ledger.remote is None and strict:
                    return Reason(
                        "evidence.untrusted",
                        f"run {record.commit[:12]} of plan {j.name!r}: {exc.message}",
                        "evidence must be signed by a runner key trusted on refs/audit/plans; "
                        f"re-run with a trusted key: `{j.run_fix}`",
                    )
                continue
            signer = j.state.trust.find(key)
            held = signer.labels if signer is not None else frozenset()
            runs.append(Source(record, ledger.key, effective_labels(record.labels, held), signer))
        per_ledger.append(runs)
    return newest_first(per_ledger)


def _beyond_the_tree(j: Judging, sources: Sequence[Source]) -> tuple[list[Reason], tuple[str, ...]]:
    reasons: list[Reason] = []
    notes: list[str] = []
    for source in sources:
        more, said = _beyond_one(j, source.record)
        reasons += [r for r in more if r not in reasons]
        notes += [n for n in said if n not in notes]
    return reasons, tuple(notes)


def _beyond_one(j: Judging, record: RunRecord) -> tuple[list[Reason], tuple[str, ...]]:
    """What the run relied on that the tree does not pin down: steps that ran in the live work
    tree (refused when the policy says so) and declared ignored paths (which must be as they were
    when the work tree itself is judged). A live step carried by the run counts as one that ran
    there: its pass is the live work tree's as the run it came from found it."""
    reasons: list[Reason] = []
    notes: list[str] = []
    live = sorted(sid for sid, entry in record.steps.items() if entry.live and entry.proven)
    if live:
        notes.append(f"step(s) {', '.join(live)} ran in the live work tree (workspace: live)")
        if j.state.policy.live_evidence == "refuse":
            reasons.append(
                Reason(
                    "evidence.live-refused",
                    f"the policy refuses evidence from the live work tree, and step(s) "
                    f"{', '.join(live)} of plan {j.name!r} ran there",
                    "run those steps in the private checkout (remove `workspace: live` and "
                    f"reseal), then `{j.run_fix}`",
                )
            )
    if record.ignored_paths:
        notes.append(f"relied on ignored path(s) {', '.join(sorted(record.ignored_paths))}")
    if j.workdir is not None:
        from gitaudit.run.checkout import listing_digest

        for path, digest in sorted(record.ignored_paths.items()):
            if listing_digest(j.workdir / path)[1] != digest:
                reasons.append(
                    Reason(
                        "evidence.ignored-changed",
                        f"the declared ignored path {path!r} changed since the run that proved "
                        f"plan {j.name!r}",
                        j.run_fix,
                        verdict=Verdict.UNKNOWN,
                    )
                )
    return reasons, tuple(notes)


def _malformed(j: Judging, exc: MalformedRun) -> Evidence:
    """A run record of the wrong shape: untrusted if it is not a runner's, else malformed."""
    untrusted = _untrusted(j, (("run", pygit2.Oid(hex=exc.commit)),))
    if untrusted is not None:
        return Evidence((untrusted,), run=exc.commit)
    reason = Reason(
        "evidence.malformed",
        f"the evidence of plan {j.name!r} for this tree cannot be read: {exc.message}",
        f"git audit verify; then `{j.run_fix}`",
    )
    return Evidence((reason,), run=exc.commit)


def _untrusted(j: Judging, commits: tuple[tuple[str, pygit2.Oid | None], ...]) -> Reason | None:
    runners = j.state.trust.with_role("runner")
    for what, oid in commits:
        if oid is None:
            continue
        try:
            verify_commit(j.repo.git, oid, runners)
        except GitAuditError as exc:
            return Reason(
                "evidence.untrusted",
                f"{what} {str(oid)[:12]} of plan {j.name!r}: {exc.message}",
                "evidence must be signed by a runner key trusted on refs/audit/plans; "
                f"re-run with a trusted key: `{j.run_fix}`",
            )
    return None


def _no_evidence(j: Judging, stale: str | None) -> Reason:
    """Why there is no run for this tree under the current contract (*stale*: the newest run for
    the tree under another contract)."""
    if stale is not None:
        try:
            other_plan = read_run(j.repo.git, stale).plan != j.name
        except GitAuditError as exc:
            return Reason(
                "evidence.malformed",
                f"the evidence of plan {j.name!r} for this tree cannot be read: {exc.message}",
                f"git audit verify; then `{j.run_fix}`",
            )
        if other_plan:
            return Reason(
                "evidence.replayed",
                f"run {stale[:12]} on the ledger of {j.name!r} is evidence for another plan",
                f"the ledger was tampered with; restore refs/audit/runs/{j.name}",
            )
        return Reason(
            "evidence.stale-contract",
            f"the evidence for this tree ({stale[:12]}) was made under another contract",
            j.run_fix,
            verdict=Verdict.UNKNOWN,
        )
    return Reason(
        "evidence.missing",
        f"no evidence for tree {j.tree[:12]}",
        j.run_fix,
        verdict=Verdict.UNKNOWN,
    )


def _content_reasons(
    j: Judging, sources: Sequence[Source]
) -> tuple[list[Reason], float | None, list[Source]]:
    """Judge the steps of the plan from the runs found for this tree (newest first; usually the
    newest alone decides): one reason per step not proven, the earliest expiry, and the runs
    whose entries were used (the newest always among them)."""
    newest = sources[0].record
    for source in sources:
        if source.record.plan != j.name:
            reason = Reason(
                "evidence.replayed",
                f"run {source.record.commit[:12]} is evidence for plan {source.record.plan!r}, "
                f"not {j.name!r}",
                j.run_fix,
            )
            return [reason], None, [sources[0]]
    reasons: list[Reason] = []
    optional = optional_steps(j.plan)
    verified: set[str] = set()
    until: float | None = None
    used: dict[str, Source] = {newest.commit: sources[0]}
    proofs = prove(j.plan, sources)
    for step in j.plan.steps:
        proven = True
        for proof in proofs[step.id]:
            problem, expires = _judge_proof(j, proof, step.valid_for, step.id in optional)
            if proof.source is not None:
                used.setdefault(proof.source.record.commit, proof.source)
            if problem is not None:
                reasons.append(problem)
            if problem is not None or expires is False:
                proven = False
            elif isinstance(expires, float):
                until = expires if until is None else min(until, expires)
        if proven:
            verified.add(step.id)
    reasons += _ungrounded(j, verified, optional)
    reasons += _run_level(
        j, newest, list(used.values()), composed=len(sources) > 1, quiet=bool(reasons)
    )
    if not reasons:
        reasons.extend(
            Reason(
                "evidence.uncovered",
                f"{req.priority} requirement {req.id} is not covered by verified evidence",
                j.run_fix,
            )
            for req in uncovered(j.plan, verified)
        )
    return reasons, until, list(used.values())


def _ungrounded(j: Judging, verified: set[str], optional: set[str]) -> list[Reason]:
    """Take out of *verified* every step that no alternative of one of its ``depends_on``
    clauses grounds in *verified* (transitively), and say why for each required one whose
    clause has only OR alternatives, which are not reported when unproven. Each entry is judged
    alone, so a pass carried from a run in which a prerequisite passed, or composed from an
    older run, stood beside a newest run in which every alternative failed."""
    grounded = viable_without(clauses_of(j.plan), set(j.plan.step_ids) - verified)
    reasons = []
    for step in j.plan.steps:
        if step.id not in verified or step.id in grounded:
            continue
        clause = next(c for c in step.depends_on if not grounded.intersection(c.alternatives))
        if step.id not in optional and optional.issuperset(clause.alternatives):
            reasons.append(
                Reason(
                    "evidence.prerequisite-unproven",
                    f"step {step.id} is recorded as proven, but no alternative of its "
                    f"prerequisite {clause} is proven in the evidence for this tree",
                    j.run_fix,
                    step=step.id,
                    verdict=Verdict.UNKNOWN,
                )
            )
    verified.intersection_update(grounded)
    return reasons


def _judge_proof(
    j: Judging, proof: Proof, valid_for: int | None, optional: bool
) -> tuple[Reason | None, float | bool | None]:
    """Why one step (for one label) is not proven, or None; and when its evidence expires
    (a time, None: never, False: not proven but nothing to report, an unverified OR
    alternative whose dependant is judged instead)."""
    step, entry, source = proof.step, proof.entry, proof.source
    if entry is None or source is None:
        if proof.label is not None:
            return Reason(
                "evidence.runner-label",
                f"step {step} has no evidence from a runner labelled {proof.label}",
                f"`git audit run --step {step} --label {proof.label} --plan {j.name}` on such a "
                "runner, then push its evidence",
                step=step,
                verdict=Verdict.UNKNOWN,
            ), False
        newest = source.record.commit if source else "the newest run"
        return Reason(
            "evidence.incomplete",
            f"run {newest[:12]} has no entry for step {step}",
            j.run_fix,
            step=step,
        ), False
    record = source.record
    if not entry.proven:
        problem = _authority(j, record, step, source.ledger)
        if problem is None and not optional:  # else an OR alternative: its dependant is judged
            problem = _unproven(j, record, step, entry)
        return problem, False
    executed = _executed_by(j, record, step, entry, source.ledger)
    if isinstance(executed, Reason):
        return executed, False
    expiry, expires = _expiry(j, step, valid_for, executed.time, executed.began)
    if expiry is not None:
        return expiry, False
    return None, expires


def _run_level(
    j: Judging, newest: RunRecord, used: list[Source], *, composed: bool, quiet: bool
) -> list[Reason]:
    """What the runs used say as a whole. The newest alone: its own verdict, when no step
    explained it (*quiet*: a step did). Composed: each run used must be sound."""
    if composed:
        return [r for s in used if (r := _unsound(j, s.record)) is not None]
    if newest.verdict == Verdict.PASS or quiet:
        return []
    summary = "; ".join(newest.reasons[:3])
    kind = Verdict.FAIL if newest.verdict == Verdict.FAIL else Verdict.UNKNOWN
    return [
        Reason(
            f"evidence.{newest.verdict.lower()}",
            f"the run for this tree is {newest.verdict}"
            + (f": {summary}" if summary else " (the run gives no reason)"),
            j.run_fix,
            verdict=kind,
        )
    ]


def _unsound(j: Judging, record: RunRecord) -> Reason | None:
    """Why a run whose entries are composed into the evidence does not count as a whole: it was
    interrupted, changed its workspace, or lacked a required tool."""
    if record.verdict == Verdict.INTERRUPTED:
        return Reason(
            "evidence.interrupted",
            f"run {record.commit[:12]} was interrupted",
            j.run_fix,
            verdict=Verdict.UNKNOWN,
        )
    if record.changed:
        return Reason(
            "evidence.fail",
            f"run {record.commit[:12]} changed its workspace: {', '.join(record.changed[:5])}",
            j.run_fix,
        )
    if record.missing_tools:
        return Reason(
            "evidence.fail",
            f"run {record.commit[:12]} lacked required tools: {', '.join(record.missing_tools)}",
            j.run_fix,
        )
    return None


def _executed_by(
    j: Judging, record: RunRecord, step: str, entry: StepEntry, ledger: str
) -> RunRecord | Reason:
    """The run whose evidence proves *step* (*record*, read from *ledger*, or the run a carried
    step came from), or why it does not: the carried source does not trace, its signer lacked
    the authority for what its step entry claims, or it was made here and its checks started
    a program this PATH does not offer."""
    source = record
    if entry.status == StepStatus.CARRIED:
        traced = _trace_carried(j, record, step, entry.carried_from or "", ledger)
        if traced is None:
            return Reason(
                "evidence.carried-invalid",
                f"step {step} claims evidence carried from "
                f"{(entry.carried_from or '')[:12]}, which does not hold for this tree",
                j.run_fix,
                step=step,
            )
        if j.admitted_only and j.rule is not None:
            advisory = _advisory(j, traced)
            if advisory is not None:
                return Reason(
                    "evidence.runner-rule",
                    f"step {step} of run {record.commit[:12]} is carried from run "
                    f"{traced.commit[:12]} by {advisory}, whose evidence is advisory for "
                    f"{j.ref or 'this ref'}",
                    f"have a runner of {', '.join(sorted(j.rule.runners))} run it itself: "
                    f"`git audit run --fresh --plan {j.name}`",
                    step=step,
                    verdict=Verdict.UNKNOWN,
                )
        # whether a copy holds the source is asked of git (Copies.holding), never inferred from
        # its carrier: that the source is earlier may come from the lookup cache, whose rows
        # anyone who writes .git/ can file (a run on another copy's fork passed as earlier)
        source = traced
    return _authority(j, source, step, ledger) or _ran_elsewhere(j, source, step) or source


def _signer(j: Judging, commit: str) -> TrustedKey | None:
    """The trusted runner who signed *commit* (None: no runner's signature verifies)."""
    if commit not in j.signers:
        try:
            key = verify_commit(
                j.repo.git, pygit2.Oid(hex=commit), j.state.trust.with_role("runner")
            )
        except (GitAuditError, ValueError, KeyError, pygit2.GitError):
            j.signers[commit] = None
        else:
            j.signers[commit] = j.state.trust.find(key)
    return j.signers[commit]


def _run_at(j: Judging, commit: str) -> RunRecord | None:
    """The run commit *commit* names, as recorded (None: it cannot be read)."""
    try:
        return read_run(j.repo.git, pygit2.Oid(hex=commit))
    except (GitAuditError, ValueError, KeyError, pygit2.GitError):
        return None


def _own_word(j: Judging, signer: TrustedKey, record: RunRecord) -> bool:
    """Whether every step *record* carried came from a run that *signer* signed too: else its
    pass repeats another runner's word (no agreement where a rule asks several runners)."""
    return all(
        (origin := _signer(j, entry.carried_from or "")) is not None and origin.name == signer.name
        for entry in record.steps.values()
        if entry.status == StepStatus.CARRIED
    )


def _advisory(j: Judging, record: RunRecord) -> str | None:
    """Who signed *record*, when the ref's rule does not admit them (None: it does)."""
    signer = _signer(j, record.commit)
    if signer is not None and j.rule is not None and j.rule.admits(signer):
        return None
    return signer.name if signer is not None else "no trusted runner"


def _ran_elsewhere(j: Judging, record: RunRecord, step: str) -> Reason | None:
    """Why *step*'s checks in *record*, the run that executed it, prove nothing here: the run
    was made here (signed with a key this machine holds), and this PATH lacks a folder of its
    checks' PATH or does not offer a program one of them started by name
    (:mod:`gitaudit.ledger.programs`). None when it binds."""
    why = j.here.binds(record, step) if j.here is not None else None
    if why is None:
        return None
    return Reason(
        "evidence.program-elsewhere",
        f"step {step} of run {record.commit[:12]} {why}: the run was made here with another PATH",
        f"run it again with the PATH you have now (the step is not carried): `{j.run_fix}`",
        step=step,
        verdict=Verdict.UNKNOWN,
    )


def _authority(j: Judging, record: RunRecord, step: str, ledger: str) -> Reason | None:
    git = j.repo.git
    copies = Copies(
        j.held or ((ledger, None),), lambda key: _tallies(j, key), lambda: _base(j), j.holds
    )
    return (
        unauthorised_reconcile(git, j.state.trust, j.name, record, step)
        or past_exhaustion(git, j.state, j.name, j.plan, record, step, copies)
        or unreconciled(git, j.state, j.name, record, step, copies)
    )


def _tallies(j: Judging, key: str) -> Tallies | None:
    """The tallies of ledger *key* up to its tip, from the lookup cache (under its MAC, else
    counted again from the chain); None for a pushed tip (the cache indexes the ref, not what
    is pushed) or a copy that cannot be read."""
    if j.pushed is not None:
        return None
    if key not in j.tallied:
        try:
            j.tallied[key] = index.tallies(j.repo.git, j.repo.gitdir, key)
        except GitAuditError:
            j.tallied[key] = None
    return j.tallied[key]


def _base(j: Judging) -> tuple[pygit2.Oid, Tallies] | None:
    """For a pushed tip (pre-receive): the tip of the plan's ledger as the repository holds it
    (the ref has not moved yet) and its tallies from the lookup cache, which the pushed chain
    extends; None when nothing is pushed, there is no ledger yet, or it cannot be read."""
    if j.pushed is None:
        return None
    if j.name not in j.bases:
        git = j.repo.git
        tip = read_ref(git, runs_ref(j.name))
        try:
            counted = index.tallies(git, j.repo.gitdir, j.name) if tip is not None else None
        except GitAuditError:
            counted = None
        j.bases[j.name] = (tip, counted) if tip is not None and counted is not None else None
    return j.bases[j.name]


def _unproven(j: Judging, record: RunRecord, step: str, entry: StepEntry) -> Reason:
    broken = entry.status == StepStatus.BLOCKED and any(
        output_broken(u.passed, (c.outcome for c in u.checks)) for u in entry.upstream
    )
    verdict = unproven_step(entry.status, upstream_broken=broken)
    detail = f": {entry.reason}" if entry.reason else ""
    hint = (
        f"`git audit show {record.commit[:12]} --step {step}` shows the output; "
        f"fix it, then `{j.run_fix}`"
        if verdict == Verdict.FAIL
        else j.run_fix
    )
    return Reason(
        f"step.{entry.status}", f"step {step} {entry.status}{detail}", hint, step, verdict
    )


def _expiry(
    j: Judging, step: str, valid_for: int | None, when: int, began: int
) -> tuple[Reason | None, float | None]:
    """Evidence with ``valid_for`` counts from when the run that executed the step *began*
    (:attr:`RunRecord.began`, never later than its signed commit time *when*; see
    docs/ledger-format): a reason when it is dated in the future or has expired, else when it
    expires."""
    if valid_for is None:
        return None, None
    if when > j.now + CLOCK_SKEW:
        dated = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
        return (
            Reason(
                "evidence.future",
                f"the evidence for step {step} is dated in the future ({dated})",
                "check the clocks of this machine and of the runner; then re-run",
                step=step,
            ),
            None,
        )
    if began + valid_for >= j.now:
        return None, float(began + valid_for)
    expired = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(began + valid_for))
    return (
        Reason(
            "evidence.expired",
            f"the evidence for step {step} expired at {expired}",
            f"git audit run {step} --plan {j.name}",
            step=step,
            verdict=Verdict.UNKNOWN,
        ),
        None,
    )


def _carried_source(j: Judging, record: RunRecord, source: str, ledger: str) -> RunRecord | None:
    """The run *source* names, if it is signed by a trusted runner and earlier than *record* on
    the same ledger (what any step carried from it needs)."""
    git, gitdir = j.repo.git, j.repo.gitdir
    try:
        oid = pygit2.Oid(hex=source)
        earlier = index.is_earlier(git, gitdir, ledger, source, record.commit)
        if earlier is None:  # not both indexed (a pushed run): ask git
            earlier = git.descendant_of(pygit2.Oid(hex=record.commit), oid)
        if not earlier:
            return None
        # the source's own signature: a carried step is only as good as the run it came from
        verify_commit(git, oid, j.state.trust.with_role("runner"))
        return read_run(git, oid)
    except (GitAuditError, ValueError, KeyError, pygit2.GitError):
        return None


def _overruled(j: Judging, record: RunRecord, step: str, ledger: str) -> bool:
    """Whether the newest execution of *step* in a run for the same tree and contract below
    *record* (down to the source of its carried pass), signed by a trusted runner, did not
    pass: the newest outcome decides, so a pass before it can no longer be carried (``git audit
    run`` carries only the newest, and for unchanged inputs only the newest with them; a run
    that carried an older one was prepared before the failure was recorded, or misled). A run
    for the same tree and contract gave the step the same input digest, so this holds for a
    pass carried from another tree as much as for one carried from this tree."""
    if record.commit not in j.newest:
        j.newest[record.commit] = _newest_below(j, record, ledger)
    return _not_passed(j.newest[record.commit], step)


def _newest_below(
    j: Judging, record: RunRecord, ledger: str
) -> dict[str, tuple[StepStatus, str]] | None:
    """The newest execution on *record*'s tree, below it and down to its source, of each step it
    carries (None when the chain cannot be read: nothing is carried)."""
    carried: dict[str, str] = {}
    for sid, entry in record.steps.items():
        if entry.status != StepStatus.CARRIED:
            continue
        origin = _origin(j, record, entry.carried_from or "", ledger)
        if origin is not None:
            carried[sid] = origin.commit
    try:
        parents = commit_of(j.repo.git, pygit2.Oid(hex=record.commit), "run").parent_ids
        return lookup.newest_executions(
            j.repo.git,
            j.repo.gitdir,
            parents[0] if parents else None,
            record.tree,
            record.contract,
            j.state.trust.with_role("runner"),
            carried,
        )
    except (GitAuditError, ValueError, KeyError, pygit2.GitError):
        return None


def _origin(j: Judging, record: RunRecord, source: str, ledger: str) -> RunRecord | None:
    """:func:`_carried_source`, once per (source, carrying run, ledger)."""
    key = (source, record.commit, ledger)
    if key not in j.traced:
        j.traced[key] = _carried_source(j, record, source, ledger)
    return j.traced[key]


def _trace_carried(
    j: Judging, record: RunRecord, step: str, source: str, ledger: str
) -> RunRecord | None:
    """The run a carried step's evidence came from, if it is an earlier run on the same ledger in
    which that step itself passed, and it proves this tree: the same tree and contract, or the
    same input digest as this tree gives the step now (incremental evidence, versioned proofs),
    for a step that did not run in the live work tree (what it observed there, outside the
    tree, is not in its input digest: ``git audit run`` executes it again). Either way the
    source listed every declared ignored path as the carrying run did (``git audit run``
    carries only from such a run; one written before it did is refused here)."""
    origin = _origin(j, record, source, ledger)
    if origin is None or not origin.sound:  # a pass in a run that does not count is none
        return None
    entry, carrying = origin.steps.get(step), record.steps[step]
    listed = origin.ignored_paths
    if (
        entry is None
        or entry.status != StepStatus.PASSED
        or any(listed.get(path) != digest for path, digest in record.ignored_paths.items())
    ):
        return None  # not a pass there, or its checks read a declared ignored path otherwise
    if origin.tree == record.tree and origin.contract == record.contract:
        return None if _overruled(j, record, step, ledger) else origin
    claimed = entry.input_digest
    if (
        not (entry.live or carrying.live)
        and claimed
        and claimed == carrying.input_digest
        and claimed == j.digests().get(step)
    ):
        if _overruled(j, record, step, ledger) or _overruled_inputs(j, record, step, ledger):
            return None
        return origin
    return None


def _overruled_inputs(j: Judging, record: RunRecord, step: str, ledger: str) -> bool:
    """Whether the newest execution of *step* with the input digest its carried pass claims, on
    any tree, below *record* and down to that pass's run, signed by a trusted runner, did not
    pass: a step carried because its inputs are unchanged is proven by the newest execution
    with those inputs (``git audit run`` carries only that one), and a failure with them on
    another tree shows the step reads more than it declares."""
    if record.commit not in j.newest_inputs:
        j.newest_inputs[record.commit] = _newest_with_inputs(j, record, ledger)
    return _not_passed(j.newest_inputs[record.commit], step)


def _not_passed(newest: Mapping[str, tuple[StepStatus, str]] | None, step: str) -> bool:
    """Whether *newest* (step -> its newest execution; None: the chain could not be read)
    says *step*'s newest execution did not pass (a step it lacks was not executed since)."""
    return newest is None or (step in newest and newest[step][0] != StepStatus.PASSED)


def _newest_with_inputs(
    j: Judging, record: RunRecord, ledger: str
) -> dict[str, tuple[StepStatus, str]] | None:
    """:func:`lookup.newest_with_inputs` below *record* for each step it carries from a run of
    another tree or contract (None when the chain cannot be read: nothing is carried)."""
    sought: dict[str, tuple[str, str]] = {}
    for sid, entry in record.steps.items():
        if entry.status != StepStatus.CARRIED or not entry.input_digest:
            continue
        origin = _origin(j, record, entry.carried_from or "", ledger)
        if origin is not None and (origin.tree, origin.contract) != (record.tree, record.contract):
            sought[sid] = (entry.input_digest, origin.commit)
    try:
        parents = commit_of(j.repo.git, pygit2.Oid(hex=record.commit), "run").parent_ids
        return lookup.newest_with_inputs(
            j.repo.git,
            parents[0] if parents else None,
            sought,
            j.state.trust.with_role("runner"),
        )
    except (GitAuditError, ValueError, KeyError, pygit2.GitError):
        return None
