"""Resets of a step's failed attempts: a sealer's signed word that they count afresh.

A step that failed ``max_attempts`` times under a contract is exhausted: it is not run again,
and evidence from running it anyway (``git audit run --force``) does not count. Only a sealer
reopens it, by a signed commit on ``refs/audit/plans`` (``git audit plan reset-attempts``) that
records, in ``resets/<plan>.json``, for the step and the current contract, how many failed
attempts the ledger held when the reset was made (``failed``). Failed attempts count from there
on: the recorder subtracts ``failed`` from its count, and the gate from the failures before a
forced run, on a chain of runs that holds the runs ref's tip the count was taken at
(:func:`held_at`); on a ledger that merged other machines' failures it can only count more.

Failures are counted on the signed first-parent chain of the runs ref, never in the lookup
cache (a file in ``.git/`` that anyone with the work tree can edit).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pygit2

from gitaudit.errors import SealError
from gitaudit.frozen import frozen
from gitaudit.ledger import chain
from gitaudit.ledger.objects import blob_at, dumps, loads
from gitaudit.ledger.records import lookup_keys
from gitaudit.ledger.refs import runs_ref

RESETS_FORMAT = "gitaudit.resets/1"
RESETS_DIR = "resets/"


def resets_path(plan: str) -> str:
    return f"{RESETS_DIR}{plan}.json"


@frozen
class AttemptReset:
    """The latest reset of one step's failed attempts (an entry of ``resets/<plan>.json``)."""

    plan: str
    step: str
    contract_digest: str  # the contract whose failed attempts were reset
    failed: int  # failed attempts on the ledger at the reset: they no longer count
    run: str | None  # the runs ref's tip the count was taken at (for reviewers)
    reason: str
    reset_at: str
    sealer: str
    sealer_fingerprint: str

    def to_json(self) -> dict[str, Any]:
        return {
            "contract_digest": self.contract_digest,
            "failed": self.failed,
            "run": self.run,
            "reason": self.reason,
            "reset_at": self.reset_at,
            "sealer": {"name": self.sealer, "fingerprint": self.sealer_fingerprint},
        }

    @classmethod
    def from_json(cls, plan: str, step: str, doc: Any) -> AttemptReset:
        sealer = doc["sealer"]
        record = cls(
            plan=plan,
            step=step,
            contract_digest=_str(doc["contract_digest"]),
            failed=_count(doc["failed"]),
            run=None if doc["run"] is None else _str(doc["run"]),
            reason=_str(doc["reason"]),
            reset_at=_str(doc["reset_at"]),
            sealer=_str(sealer["name"]),
            sealer_fingerprint=_str(sealer["fingerprint"]),
        )
        if not record.reason:
            raise ValueError("a reset needs a reason")
        return record


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {type(v).__name__}")
    return v


def _count(v: Any) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise TypeError("expected a count (an integer >= 0)")
    return v


PlanResets = Mapping[str, AttemptReset]  # step -> its latest reset


def parse_resets(files: Mapping[str, bytes], where: str) -> dict[str, PlanResets]:
    """Every ``resets/<plan>.json`` of a plans tree: plan -> step -> reset. SealError naming the
    commit and file when one is malformed."""
    out: dict[str, PlanResets] = {}
    for path, data in files.items():
        if not (path.startswith(RESETS_DIR) and path.endswith(".json")):
            continue
        plan = path[len(RESETS_DIR) : -len(".json")]
        try:
            doc = loads(data)
            if not isinstance(doc, dict) or doc.get("format") != RESETS_FORMAT:
                raise ValueError(f"not a {RESETS_FORMAT} record")
            if doc.get("plan") != plan:
                raise ValueError(f"it names plan {doc.get('plan')!r}")
            steps = doc["steps"]
            if not isinstance(steps, dict):
                raise TypeError("steps must be an object")
            out[plan] = {
                str(step): AttemptReset.from_json(plan, str(step), entry)
                for step, entry in steps.items()
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise SealError(
                f"{where}: {path} is malformed ({exc})",
                hint="resets are written by `git audit plan reset-attempts`; restore the plans ref",
            ) from None
    return out


def resets_file(plan: str, resets: PlanResets) -> bytes:
    return dumps(
        {
            "format": RESETS_FORMAT,
            "plan": plan,
            "steps": {step: r.to_json() for step, r in sorted(resets.items())},
        }
    )


def already_reset(
    resets: PlanResets | None, step: str, contract: str, held: Callable[[AttemptReset], bool]
) -> int:
    """How many failed attempts of *step* under *contract* a sealer has reset (0: none) on a
    chain of runs that *held* says holds the reset's run (:func:`held_at`)."""
    found = (resets or {}).get(step)
    if found is None or found.contract_digest != contract or not held(found):
        return 0
    return found.failed


def held_at(git: pygit2.Repository, at: pygit2.Oid | str | None) -> Callable[[AttemptReset], bool]:
    """Whether a reset counts on the chain of runs whose newest commit is *at* (None: no runs).

    A reset is a count (the failures its ledger held), not a list of them: subtracted from a
    chain that never held them (a clone's ledger that started without the audit runs, fetched
    back as a remote-tracking copy), it lent that chain as many fresh attempts as the ledger it
    was taken on had spent, and a step past its ``max_attempts`` there passed. So the count is
    subtracted only on a chain that holds the run it was taken at (``run``): that run, or a run
    recorded after it. A reset of nothing (``failed`` 0) counts anywhere; one with failures and
    no run, or a run this repository does not have, counts nowhere. A reset taken over local
    runs that a push then signs again onto the remote's ledger (new commit ids) stops counting
    there: a sealer resets again on the synced ledger."""
    tip = None if at is None else pygit2.Oid(hex=at) if isinstance(at, str) else at

    def held(reset: AttemptReset) -> bool:
        if reset.failed == 0:
            return True
        if tip is None or reset.run is None:
            return False
        key = (git.path, str(tip), reset.run)
        found = _HELD.get(key)
        if found is None:
            found = _descends(git, tip, reset.run)
            if found is not None:  # kept once both commits are here: a fetch may bring the run
                if len(_HELD) >= _HELD_KEPT:
                    del _HELD[next(iter(_HELD))]
                _HELD[key] = found
        return bool(found)

    return held


# (repository, newest run, the reset's run) -> whether the one descends from the other: fixed
# once both commits exist (their ids name their parents), and asked for each step the gate
# judges (past_exhaustion, twice: the ledger's tip and the judged run), where a walk of a deep
# chain (65 ms at 20,000 runs, down to a reset taken long ago or to a run not on the chain) was
# paid again for every step
_HELD: dict[tuple[str, str, str], bool] = {}
_HELD_KEPT = 1024


def _descends(git: pygit2.Repository, tip: pygit2.Oid, run: str) -> bool | None:
    """Whether the commit *tip* is the commit *run* or descends from it; None (no) when *run*
    is not a commit this repository has, or *tip* is not one."""
    try:
        oid = pygit2.Oid(hex=run)
    except ValueError:
        return None
    if tip == oid:
        return True
    if not isinstance(git.get(oid), pygit2.Commit) or not isinstance(git.get(tip), pygit2.Commit):
        return None  # missing, or a blob: descendant_of raises
    return bool(git.descendant_of(tip, oid))


def failures_on_chain(
    git: pygit2.Repository,
    start: pygit2.Oid | None,
    plan: str,
    contract: str,
    enough: Mapping[str, int],
    stop: pygit2.Oid | None = None,
) -> dict[str, int]:
    """Failed attempts under *contract* of each step of *enough* recorded on the first-parent
    chain from *start* (inclusive) back to the root, or to *stop* (exclusive), counted as the
    lookup cache counts them (every run commit on the chain, its run.json read leniently). The
    walk stops early once every step has *enough* (step -> how many are enough; None: count
    them all)."""
    found = dict.fromkeys(enough, 0)
    if not found:
        return found
    for commit in chain.walk(git, start, stop=stop, what=runs_ref(plan)):
        try:
            keys = lookup_keys(loads(blob_at(git, commit.tree, "run.json") or b"{}"))
        except ValueError:
            keys = None
        if keys is None or keys[1] != contract:
            continue
        for step in found:
            if keys[3].get(step, ("",))[0] == "failed":
                found[step] += 1
        if all(found[step] >= n for step, n in enough.items()):
            break
    return found


ALL = 1 << 62  # as *enough*: count every failure on the chain
