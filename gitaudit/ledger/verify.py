"""`git audit verify`: check everything stored, incrementally.

* the plans ref: every commit signed by a sealer trusted in its parent, from the root (or from the
  last verified tip); every seal record consistent with its sealed plan copy;
* every runs ref: every commit signed by a key that was a trusted runner on some version of the
  plans ref, a linear parent chain, and each ``run.json`` matched by its tree (every recorded
  check has its ``result.json``, ``stdout`` and ``stderr``);
* the agents registry (``refs/audit/agents``): every record signed and consistent, judged by the
  verified plans state (:func:`gitaudit.ledger.agents.verify_registry`);
* no audit ref has moved behind its verified high-water mark (a rewind or truncation is FAIL), and
  none with a mark was deleted (any mark: verified, seen, or its floor in the gitaudit home).

Verified tips are recorded, so a second call verifies only what is new: each ref from its
verified mark when the mark's MAC under the local key holds (:func:`watermark.verified`), from
its root otherwise.

Many run commits to verify (a fresh clone, a first ``verify``) are shared with worker processes,
one per core: the chain is cut into shares of a few hundred commits, each process verifies the
shares it takes (the signature and the tree of each commit) as fast as it gets them done, and the
first problem in chain order is reported, as one process would.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import pygit2

from gitaudit.crypto.pubkey import PublicKey
from gitaudit.errors import GitAuditError, LedgerError
from gitaudit.git.repo import Repo
from gitaudit.ledger import chain, watermark, workers
from gitaudit.ledger.anchor import pinned_root
from gitaudit.ledger.objects import commit_of
from gitaudit.ledger.plansref import (
    PlansState,
    runners_ever,
    sealed_contract,
    state_at,
    verify_chain,
    verify_root,
)
from gitaudit.ledger.refs import AGENTS_REF, PLANS_REF, RUNS_PREFIX, list_refs, read_ref
from gitaudit.ledger.run_shares import problem, verify_share


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


def verify_all(repo: Repo, *, remember: bool = True) -> VerifyReport:
    started = time.monotonic()
    report = VerifyReport()
    git = repo.git
    with watermark.view(repo.gitdir) as marks:
        # every ref a verified mark can name (the plans and agents readers mark theirs too): a
        # mark of a ref not read here would read as the ref deleted
        refs = {
            PLANS_REF: read_ref(git, PLANS_REF),
            AGENTS_REF: read_ref(git, AGENTS_REF),
            **list_refs(git, RUNS_PREFIX),
        }
    for ref, mark in _marked(marks).items():
        if refs.get(ref) is None:
            report.problems.append(f"{ref} was deleted; it was verified at {mark[:12]}")

    def start(ref: str) -> str | None:
        """Where *ref*'s verification resumes: its verified mark, if gitaudit made it here
        (a hand-written one would vouch for whatever is below it), else the root."""
        return watermark.verified(git, repo.gitdir, marks, ref)

    new_marks: dict[str, str] = {}
    plans_tip = refs.get(PLANS_REF)
    plans: PlansState | None = None
    if plans_tip is not None:
        try:
            watermark.check_forward(git, repo.gitdir, PLANS_REF, plans_tip, marks)
            report.verified[PLANS_REF], plans = _verify_plans(repo, plans_tip, start(PLANS_REF))
            new_marks[PLANS_REF] = str(plans_tip)
        except GitAuditError as exc:
            report.problems.append(exc.message)
    _verify_agents(repo, plans, refs[AGENTS_REF], marks, report, new_marks)
    runners = runners_ever(git, plans_tip) if plans_tip is not None else []
    # runs are judged by the runners of the plans chain: when it does not verify, neither do they
    trusted_runners = plans_tip is None or PLANS_REF in new_marks
    for ref, tip in sorted(refs.items()):
        if ref in (PLANS_REF, AGENTS_REF) or tip is None:
            continue
        try:
            watermark.check_forward(git, repo.gitdir, ref, tip, marks)
        except GitAuditError as exc:
            report.problems.append(exc.message)
            continue
        count, found = _verify_runs(git, ref, tip, start(ref), runners, repo.gitdir)
        report.verified[ref] = count
        if found:
            report.problems.append(found)
        elif trusted_runners:
            new_marks[ref] = str(tip)
    if remember and new_marks:
        watermark.record(repo.gitdir, new_marks, "verified", git)
    report.seconds = time.monotonic() - started
    return report


def _marked(marks: watermark.Marks) -> dict[str, str]:
    """Each ref of those read here that any mark names (verified, seen, or the floor kept in the
    gitaudit home: the marks file may be gone, and a runs ref is only ever seen by a run and the
    gate), with the mark to name: a ref missing now was deleted below it."""
    out: dict[str, str] = {}
    for kind in ("home", "seen", "verified"):  # the last wins: the verified mark
        for ref, mark in marks.get(kind, {}).items():
            if ref in (PLANS_REF, AGENTS_REF) or ref.startswith(RUNS_PREFIX):
                out[ref] = mark
    return out


def _verify_agents(
    repo: Repo,
    plans: PlansState | None,
    tip: pygit2.Oid | None,
    marks: watermark.Marks,
    report: VerifyReport,
    new_marks: dict[str, str],
) -> None:
    """Verify the agents registry from its verified mark to *tip* by the verified *plans* state
    (None: the plans chain did not verify or is missing, and neither does the registry), into
    *report*, and mark *tip* in *new_marks* when it verifies. No *tip*: nothing to verify (a
    registry deleted after its mark is reported with every deleted ref)."""
    if tip is None:
        return
    if plans is None:
        report.problems.append(
            f"{AGENTS_REF} cannot be verified: {PLANS_REF} does not verify or is missing"
        )
        return
    from gitaudit.ledger.agents import verify_registry  # read only when the registry exists

    try:
        report.verified[AGENTS_REF] = verify_registry(repo, plans, tip, marks)[1]
    except GitAuditError as exc:
        report.problems.append(exc.message)
    else:
        new_marks[AGENTS_REF] = str(tip)


def _verify_plans(repo: Repo, tip: pygit2.Oid, mark: str | None) -> tuple[int, PlansState]:
    """Verify the plans chain from its verified mark to *tip*, and each active seal: the number
    of commits verified now, and the plans state at *tip*."""
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
        verify_root(git, tip, pinned)  # the pin may have changed since the mark was made
    for name in state.active():
        sealed_contract(state, name)
    return count, state


PARALLEL_FROM = 2_000  # run commits to verify before worker processes pay for themselves
CHUNK = 250  # run commits per share while the chain is walked: about 25 ms of work
LAST = 25  # the smallest share, when little is left: the processes end together
AHEAD = 2  # shares a worker holds at once: the next one is there when it finishes one


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
    The workers start as soon as the walk has reached :data:`PARALLEL_FROM` commits (one share,
    :data:`CHUNK`, when they were started early: :mod:`gitaudit.ledger.workers`), and take
    shares of the walked chain while the rest of it is walked (:class:`_Shares`)."""
    stop = pygit2.Oid(hex=mark) if mark else None
    oids: list[pygit2.Oid] = []
    walk_problem: str | None = None
    shares: _Shares | None = None
    parallel_from = CHUNK if workers.started_early() else PARALLEL_FROM
    try:
        try:
            for oid in chain.walk_ids(git, tip, stop=stop, what=ref, linear=True):
                oids.append(oid)
                if shares is None and len(oids) == parallel_from and gitdir is not None:
                    shares = _start_shares(os.fspath(gitdir), ref, runners)
                    due = True
                else:
                    due = len(oids) % CHUNK == 0
                if shares is not None and due:  # a share is walked in whole
                    shares.hand_out(oids)
        except GitAuditError as exc:
            walk_problem = problem(ref, exc)
        if shares is not None:
            first = shares.finish(git, oids)
        else:
            first = verify_share(git, ref, oids, runners)
    finally:
        if shares is not None:
            shares.stop()
    if first is not None:
        return first
    return len(oids), walk_problem


def _start_shares(gitdir: str, ref: str, runners: list[PublicKey]) -> _Shares | None:
    jobs = workers.jobs()
    return _Shares(gitdir, jobs - 1, ref, runners) if jobs > 1 else None


class _Shares:
    """One chain's verification shared with worker processes (fresh interpreters: nothing of
    this process's libgit2 state is shared).

    Workers take shares from the chain's newest end, :data:`AHEAD` at a time each, as soon as
    the walk has reached them; this process takes shares from its oldest end once the walk is
    done, and hands a worker its next share whenever it answers one. So the work splits by what
    each process gets done: a worker that starts late or shares a busy core takes fewer shares
    (a fixed split waited for the slowest). A share is :data:`CHUNK` commits while the chain is
    walked; then shares shrink with what is left (a few per process, at least :data:`LAST`), so
    no process is left waiting long for another's last share. A share wholly after a problem
    already found is not verified; the first problem in chain order is reported, as one process
    would."""

    def __init__(self, gitdir: str, count: int, ref: str, runners: list[PublicKey]) -> None:
        import json
        import select
        import subprocess

        self.ref, self.runners = ref, runners
        self.front = 0  # the first commit no worker has been given
        self.back: int | None = None  # one past the last commit left; None while walking
        self.found: list[tuple[int, str]] = []  # (index in the chain, problem)
        self.failed: subprocess.Popen[bytes] | None = None  # a worker that died
        self.procs = workers.take(count)
        self.held = [0] * count  # shares handed to each worker and not answered yet
        self.pending = [b""] * count  # the start of an answer line not read whole yet
        self.poller = select.poll()
        self.by_fd: dict[int, int] = {}
        setup = {"gitdir": gitdir, "ref": ref, "runners": [k.raw.hex() for k in runners]}
        for n, proc in enumerate(self.procs):
            assert proc.stdout is not None
            self.by_fd[proc.stdout.fileno()] = n
            self.poller.register(proc.stdout.fileno(), select.POLLIN)
            self._send(n, json.dumps(setup))

    def _send(self, n: int, line: str) -> None:
        proc = self.procs[n]
        assert proc.stdin is not None
        try:
            proc.stdin.write(line.encode() + b"\n")
            proc.stdin.flush()
        except BrokenPipeError:  # the worker died: its answers end too (read below)
            pass

    def _open(self, start: int) -> bool:
        """Whether the share starting at *start* may still hold the first problem."""
        return not self.found or start < min(self.found)[0]

    def _size(self) -> int:
        """Commits in the next share: :data:`CHUNK` while walking, then a few shares per
        process of what is left."""
        if self.back is None:
            return CHUNK
        left = self.back - self.front
        return min(CHUNK, max(LAST, left // (3 * (len(self.procs) + 1))))

    def hand_out(self, oids: Sequence[pygit2.Oid]) -> None:
        """Read the answers there are, then fill every worker up to :data:`AHEAD` shares from
        the newest end, with shares the walk has reached in whole (all of them, once done)."""
        import json

        self._answers(wait=False)
        for n in range(len(self.procs)):
            while self.held[n] < AHEAD and self.failed is None:
                size = self._size()
                limit = self.back if self.back is not None else len(oids) // CHUNK * CHUNK
                start, end = self.front, min(self.front + size, limit)
                if start >= end:
                    break
                self.front = end
                if not self._open(start):
                    continue
                self.held[n] += 1
                self._send(n, json.dumps([start, [str(o) for o in oids[start:end]]]))

    def _answers(self, *, wait: bool) -> None:
        import json

        for fd, _event in self.poller.poll(None if wait else 0):
            n = self.by_fd[fd]
            data = os.read(fd, 1 << 16)
            if not data:  # the worker ended: it only does once its input is closed
                self.poller.unregister(fd)
                if self.held[n]:
                    self.held[n] = 0
                    self.failed = self.procs[n]
                continue
            *lines, self.pending[n] = (self.pending[n] + data).split(b"\n")
            for line in lines:
                start, found = json.loads(line)
                self.held[n] -= 1
                if found is not None:
                    self.found.append((int(start) + int(found[0]), str(found[1])))

    def finish(self, git: pygit2.Repository, oids: Sequence[pygit2.Oid]) -> tuple[int, str] | None:
        """Verify the walked chain *oids* with the workers: the first problem (index, text)."""
        self.back = len(oids)
        while self.failed is None:
            self.hand_out(oids)
            if self.front < self.back:
                start, end = max(self.front, self.back - self._size()), self.back
                self.back = start
                if self._open(start):
                    found = verify_share(git, self.ref, oids[start:end], self.runners)
                    if found is not None:
                        self.found.append((start + found[0], found[1]))
            elif any(self.held):
                self._answers(wait=True)
            else:
                return min(self.found) if self.found else None
        raise LedgerError(
            f"{self.ref}: a verification worker failed (exit {self.failed.wait()})",
            hint="run `git audit verify --debug`, or free memory and retry",
        )

    def stop(self) -> None:
        """End every worker (an idle one waits for its next share) and reap it."""
        workers.end(self.procs)
