"""`git audit verify`: check everything stored, incrementally.

* the plans ref: every commit signed by a sealer trusted in its parent, from the root (or from the
  last verified tip); every seal record consistent with its sealed plan copy;
* every runs ref: every commit signed by a key that was a trusted runner on some version of the
  plans ref, a linear parent chain, and each ``run.json`` matched by its tree (every recorded
  check has its ``result.json``, ``stdout`` and ``stderr``);
* no audit ref has moved behind its verified high-water mark (a rewind or truncation is FAIL).

Verified tips are recorded, so a second call verifies only what is new.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pygit2

from gitaudit.crypto.commits import verify_commit
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.errors import GitAuditError
from gitaudit.git.repo import Repo
from gitaudit.ledger import chain, watermark
from gitaudit.ledger.anchor import pinned_root
from gitaudit.ledger.objects import commit_of
from gitaudit.ledger.plansref import sealed_contract, state_at, verify_chain, verify_root
from gitaudit.ledger.refs import PLANS_REF, RUNS_PREFIX, list_refs, read_ref
from gitaudit.ledger.runs import read_run


@dataclass
class VerifyReport:
    problems: list[str] = field(default_factory=list)
    verified: dict[str, int] = field(default_factory=dict)  # ref -> commits verified now
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, object]:
        return {
            "verdict": "PASS" if self.ok else "FAIL",
            "problems": self.problems,
            "verified": self.verified,
            "seconds": round(self.seconds, 3),
        }


def _runner_keys(repo: pygit2.Repository, tip: pygit2.Oid | None) -> list[PublicKey]:
    """Every key that was a runner on any version of the plans ref (old evidence stays valid
    after a key is retired; the gate itself only accepts currently trusted runners)."""
    keys: list[PublicKey] = []
    for commit in chain.walk(repo, tip, what=PLANS_REF):
        for key in state_at(repo, commit).trust.with_role("runner"):
            if key not in keys:
                keys.append(key)
    return keys


def _check_run_tree(repo: pygit2.Repository, commit: pygit2.Commit) -> str | None:
    record = read_run(repo, commit.id)
    tree = commit.tree
    for sid, entry in record.steps.items():
        groups = [("checks", entry.checks)]
        groups += [(f"outputs/{n}", cs) for n, cs in entry.outputs.items()]
        groups += [(f"upstream/{u.step}/{u.output}", u.checks) for u in entry.upstream]
        for folder, checks in groups:
            for n in range(len(checks)):
                for leaf in ("result.json", "stdout", "stderr"):
                    path = f"steps/{sid}/{folder}/{n}/{leaf}"
                    try:
                        tree[path]
                    except KeyError:
                        return (
                            f"run {str(commit.id)[:12]}: run.json records {path}, "
                            "which its tree lacks"
                        )
    return None


def verify_all(repo: Repo, *, remember: bool = True) -> VerifyReport:
    started = time.monotonic()
    report = VerifyReport()
    git = repo.git
    with watermark.view(repo.gitdir) as marks:
        refs = {PLANS_REF: read_ref(git, PLANS_REF), **list_refs(git, RUNS_PREFIX)}
    verified = marks["verified"]
    for ref, mark in verified.items():
        if ref not in refs or refs[ref] is None:
            report.problems.append(f"{ref} was deleted; it was verified at {mark[:12]}")
    new_marks: dict[str, str] = {}
    plans_tip = refs.get(PLANS_REF)
    if plans_tip is not None:
        try:
            watermark.check_forward(git, repo.gitdir, PLANS_REF, plans_tip, marks)
            report.verified[PLANS_REF] = _verify_plans(repo, plans_tip, verified.get(PLANS_REF))
            new_marks[PLANS_REF] = str(plans_tip)
        except GitAuditError as exc:
            report.problems.append(exc.message)
    runners = _runner_keys(git, plans_tip) if plans_tip is not None else []
    for ref, tip in sorted(refs.items()):
        if ref == PLANS_REF or tip is None:
            continue
        try:
            watermark.check_forward(git, repo.gitdir, ref, tip, marks)
        except GitAuditError as exc:
            report.problems.append(exc.message)
            continue
        count, problem = _verify_runs(git, ref, tip, verified.get(ref), runners)
        report.verified[ref] = count
        if problem:
            report.problems.append(problem)
        else:
            new_marks[ref] = str(tip)
    if remember and new_marks:
        watermark.record(repo.gitdir, new_marks, "verified", git)
    report.seconds = time.monotonic() - started
    return report


def _verify_plans(repo: Repo, tip: pygit2.Oid, mark: str | None) -> int:
    """Verify the plans chain from its verified mark to *tip*, and each active seal; the number
    of commits verified now."""
    git = repo.git
    pinned = pinned_root(repo)
    if mark == str(tip):
        state = state_at(git, commit_of(git, tip, PLANS_REF))
        count = 0
    else:
        stop = pygit2.Oid(hex=mark) if mark else None
        state = verify_chain(git, tip, stop_at=stop, pinned_root=pinned)
        count = chain.count(git, tip, stop)
    if pinned and mark:
        verify_root(git, tip, pinned)  # the mark is a file: it vouches for no root
    for name in state.active():
        sealed_contract(state, name)
    return count


def _verify_runs(
    git: pygit2.Repository,
    ref: str,
    tip: pygit2.Oid,
    mark: str | None,
    runners: list[PublicKey],
) -> tuple[int, str | None]:
    """Verify a runs ref from its verified mark to *tip*: (commits verified, the first problem)."""
    stop = pygit2.Oid(hex=mark) if mark else None
    count = 0
    try:
        for commit in chain.walk(git, tip, stop=stop, what=ref, linear=True):
            verify_commit(git, commit.id, runners)
            problem = _check_run_tree(git, commit)
            if problem:
                return count, problem
            count += 1
    except GitAuditError as exc:
        return count, exc.message if exc.message.startswith(ref) else f"{ref}: {exc.message}"
    return count, None
