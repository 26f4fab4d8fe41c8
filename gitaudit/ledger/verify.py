"""`git audit verify`: check everything stored, incrementally.

* the plans ref: every commit signed by a sealer trusted in its parent, from the root (or from the
  last verified tip); every seal record consistent with its sealed plan copy;
* every runs ref: every commit signed by a key that was a trusted runner on some version of the
  plans ref, a linear parent chain, and each ``run.json`` matched by its tree (every recorded
  check has its ``result.json``, ``stdout`` and ``stderr``);
* no audit ref has moved behind its verified high-water mark (a rewind or truncation is FAIL).

Verified tips are recorded, so a second call verifies only what is new.

Many run commits to verify (a fresh clone, a first ``verify``) are shared with worker processes,
one per core: each verifies its share of the chain (the signature and the tree of each commit)
and the first problem in chain order is reported, as one process would.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import pygit2

from gitaudit.crypto.commits import verify_commit
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.errors import GitAuditError, LedgerError
from gitaudit.git.repo import Repo, open_repo
from gitaudit.ledger import chain, watermark
from gitaudit.ledger.anchor import pinned_root
from gitaudit.ledger.objects import commit_of
from gitaudit.ledger.plansref import sealed_contract, state_at, verify_chain, verify_root
from gitaudit.ledger.refs import PLANS_REF, RUNS_PREFIX, list_refs, read_ref
from gitaudit.ledger.runs import run_of


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
    tree = commit.tree
    record = run_of(repo, commit, tree)
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
        count, problem = _verify_runs(git, ref, tip, verified.get(ref), runners, repo.gitdir)
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


PARALLEL_FROM = 2_000  # run commits to verify before worker processes pay for themselves


def _verify_runs(
    git: pygit2.Repository,
    ref: str,
    tip: pygit2.Oid,
    mark: str | None,
    runners: list[PublicKey],
    gitdir: os.PathLike[str] | str | None = None,
) -> tuple[int, str | None]:
    """Verify a runs ref from its verified mark to *tip*: (commits verified, the first problem).

    The chain is walked first (linear, every object present); the commits it reached are then
    verified, shared between this process and worker processes when there are many, and the
    first problem in chain order wins, a walk error coming after every commit walked before it.
    The workers start as soon as the walk has reached :data:`PARALLEL_FROM` commits, so their
    interpreters start up while the rest of the chain is walked."""
    stop = pygit2.Oid(hex=mark) if mark else None
    oids: list[pygit2.Oid] = []
    walk_problem: str | None = None
    workers: _Workers | None = None
    try:
        try:
            for commit in chain.walk(git, tip, stop=stop, what=ref, linear=True):
                oids.append(commit.id)
                if len(oids) == PARALLEL_FROM and gitdir is not None and (jobs := _jobs()) > 1:
                    workers = _Workers(os.fspath(gitdir), jobs - 1)
        except GitAuditError as exc:
            walk_problem = _problem(ref, exc)
        if workers is not None:
            first = workers.verify(git, ref, oids, runners)
        else:
            first = _verify_chunk_in(git, ref, oids, runners)
    finally:
        if workers is not None:
            workers.stop()
    if first is not None:
        return first
    return len(oids), walk_problem


def _problem(ref: str, exc: GitAuditError) -> str:
    return exc.message if exc.message.startswith(ref) else f"{ref}: {exc.message}"


def _verify_one(
    git: pygit2.Repository, ref: str, oid: pygit2.Oid, runners: Sequence[PublicKey]
) -> str | None:
    """The problem with one run commit (signature by a runner, tree matching run.json)."""
    try:
        verify_commit(git, oid, runners)
        return _check_run_tree(git, commit_of(git, oid, ref))
    except GitAuditError as exc:
        return _problem(ref, exc)


def _verify_chunk_in(
    git: pygit2.Repository, ref: str, oids: Sequence[pygit2.Oid], runners: Sequence[PublicKey]
) -> tuple[int, str] | None:
    """(index, problem) of the first bad commit of *oids*, or None."""
    for n, oid in enumerate(oids):
        problem = _verify_one(git, ref, oid, runners)
        if problem:
            return n, problem
    return None


def _worker() -> None:
    """A worker process (``python -c``): a JSON request on stdin, the first problem of its share
    of the chain (or null) as JSON on stdout."""
    import json
    import sys

    request = json.load(sys.stdin)
    git = open_repo(request["gitdir"]).git
    runners = [PublicKey(bytes.fromhex(k)) for k in request["runners"]]
    oids = [pygit2.Oid(hex=h) for h in request["commits"]]
    json.dump(_verify_chunk_in(git, request["ref"], oids, runners), sys.stdout)


def _jobs() -> int:
    """Processes verifying at once (this one included): one per core, at most 8."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cores or 1, 8))


class _Workers:
    """Worker processes (fresh interpreters: nothing of this process's libgit2 state is shared)
    that verify their shares of a chain beside this process, which verifies the first share."""

    def __init__(self, gitdir: str, count: int) -> None:
        import subprocess
        import sys

        import gitaudit

        self.gitdir = gitdir
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(gitaudit.__file__)))
        path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
        code = "from gitaudit.ledger.verify import _worker; _worker()"
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-c", code],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env={**os.environ, "PYTHONPATH": path},
            )
            for _ in range(count)
        ]

    def verify(
        self,
        git: pygit2.Repository,
        ref: str,
        oids: list[pygit2.Oid],
        runners: list[PublicKey],
    ) -> tuple[int, str] | None:
        """:func:`_verify_chunk_in` over *oids*, one share here and one per worker."""
        import contextlib
        import json

        size = -(-len(oids) // (len(self.procs) + 1))
        starts = list(range(0, len(oids), size))
        shares = list(zip(starts[1:], self.procs, strict=False))
        # every worker gets its share before any answer is awaited, and before this process
        # starts on its own; a worker reads all of its request before it writes anything
        for start, proc in shares:
            request = {
                "gitdir": self.gitdir,
                "ref": ref,
                "runners": [k.raw.hex() for k in runners],
                "commits": [str(o) for o in oids[start : start + size]],
            }
            assert proc.stdin is not None
            with contextlib.suppress(BrokenPipeError):  # a worker that died is reported below
                proc.stdin.write(json.dumps(request).encode())
                proc.stdin.close()
        first = _verify_chunk_in(git, ref, oids[:size], runners)
        for start, proc in shares:
            assert proc.stdout is not None
            with proc.stdout:
                out = proc.stdout.read()
            proc.wait()
            if proc.returncode != 0:
                raise LedgerError(
                    f"{ref}: a verification worker failed (exit {proc.returncode})",
                    hint="run `git audit verify --debug`, or free memory and retry",
                )
            found = json.loads(out)
            if found is not None and first is None:
                first = start + int(found[0]), str(found[1])
        return first

    def stop(self) -> None:
        """End the workers still running (one without a share waits for its request, one
        whose share is not awaited after an error is not needed) and reap every one."""
        import contextlib

        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
