"""The gate confirms the lookup cache's answer for evidence deep in the ledger too (git's own
search past a few hundred commits)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pygit2
import pytest

from gitaudit.cli.context import signer_for
from gitaudit.crypto.signers import Signer
from gitaudit.gate.judge import judge
from gitaudit.git.repo import open_repo
from gitaudit.ledger import lookup
from gitaudit.ledger.runs import append_run
from tests.gitrepo import GitRepo, audit, forget_marks
from tests.run.conftest import Sealer, make_plan, run_step


def _pad(repo: GitRepo, count: int, *, tree: str | None = None) -> list[str]:
    """*count* signed run commits copying the tip's run.json, for another tree unless *tree*."""
    handle = open_repo(repo.path)
    signer = signer_for(handle, None)
    doc = json.loads(repo.git("show", "refs/audit/runs/default:run.json"))
    contract = doc["contract_digest"]
    out = []
    for i in range(count):
        doc["tree"] = tree or f"{i:040x}"
        message = f"audit(default): PASS\n\nAudit-Tree: {doc['tree']}\nAudit-Contract: {contract}\n"
        out.append(
            str(
                append_run(
                    handle.git, "default", {"run.json": json.dumps(doc).encode()}, message, signer
                )
            )
        )
    return out


def test_deep_evidence_is_confirmed_and_a_lying_cache_is_caught(
    repo: GitRepo, sealed: Sealer
) -> None:
    sealed(make_plan(run_step("a", "true")))
    assert audit(repo.path, "run").code == 0
    genuine = repo.git("rev-parse", "refs/audit/runs/default").strip()
    _pad(repo, 300)
    assert judge(open_repo(repo.path), "HEAD").verdict == "PASS"  # 300 runs deep: git confirms
    newer = _pad(repo, 1, tree=repo.head_tree())[0]
    _pad(repo, 300)
    handle = open_repo(repo.path)
    assert judge(handle, "HEAD").plans[0].run == newer
    db = sqlite3.connect(handle.gitdir / "gitaudit" / "index.sqlite")
    db.execute("UPDATE runs SET tree='x' WHERE commit_id=?", (newer,))  # the cache hides it
    db.commit()
    db.close()
    result = judge(open_repo(repo.path), "HEAD")
    assert result.verdict == "FAIL" and result.plans[0].reasons[0].code == "evidence.ledger"
    assert f"the newest is {newer[:12]}" in result.plans[0].reasons[0].message
    assert genuine


def test_a_remembered_confirmation_walks_only_the_newer_runs(
    repo: GitRepo, sealed: Sealer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the run was confirmed newest at a tip, the next judgement walks down to that tip
    only: git's whole-chain search is not asked again, however deep the run lies."""
    sealed(make_plan(run_step("a", "true")))
    assert audit(repo.path, "run").code == 0
    _pad(repo, 300)
    assert judge(open_repo(repo.path), "HEAD").verdict == "PASS"  # walks once, remembers
    _pad(repo, 5)

    def no_deep_walk(*args: object) -> None:
        raise AssertionError("the remembered confirmation was not used")

    monkeypatch.setattr(lookup, "_confirm_with_git", no_deep_walk)
    assert judge(open_repo(repo.path), "HEAD").verdict == "PASS"


def test_a_remembered_confirmation_never_hides_a_newer_run(repo: GitRepo, sealed: Sealer) -> None:
    """A newer run for the tree after the remembered tip is found by the walk down to it, and a
    statement that does not carry the local key's MAC (forged, or moved to another tip) counts
    for nothing."""
    sealed(make_plan(run_step("a", "true")))
    assert audit(repo.path, "run").code == 0
    genuine = repo.git("rev-parse", "refs/audit/runs/default").strip()
    _pad(repo, 3)
    assert judge(open_repo(repo.path), "HEAD").plans[0].run == genuine  # remembered
    newer = _pad(repo, 1, tree=repo.head_tree())[0]
    _pad(repo, 3)
    handle = open_repo(repo.path)
    db = sqlite3.connect(handle.gitdir / "gitaudit" / "index.sqlite")
    judge(handle, "HEAD")
    db.execute("UPDATE runs SET tree='x' WHERE commit_id=?", (newer,))  # the cache hides it
    db.commit()
    db.close()
    result = judge(open_repo(repo.path), "HEAD")
    assert result.verdict == "FAIL" and result.plans[0].reasons[0].code == "evidence.ledger"
    assert newer[:12] in result.plans[0].reasons[0].message

    # a statement moved to the current tip without the key: ignored, the walk still catches it
    path = handle.gitdir / "gitaudit" / lookup.CONFIRMED
    doc = json.loads(path.read_text())
    tip = repo.git("rev-parse", "refs/audit/runs/default").strip()
    for item in doc["statements"]:
        if item["run"] == genuine:
            item["through"] = tip
    path.write_text(json.dumps(doc))
    result = judge(open_repo(repo.path), "HEAD")
    assert result.verdict == "FAIL" and newer[:12] in result.plans[0].reasons[0].message


def _copies(
    repo: GitRepo,
    count: int,
    signer: Signer | None = None,
    extra_check: bool = False,
    template: str = "refs/audit/runs/default",
) -> None:
    """*count* valid run commits: *template*'s whole evidence tree, for other trees."""
    from gitaudit.ledger.objects import read_files

    handle = open_repo(repo.path)
    files = read_files(handle.git, handle.git.revparse_single(template).peel(pygit2.Tree))
    doc = json.loads(files["run.json"])
    if extra_check:  # run.json records a second check whose files the tree lacks
        doc["steps"]["a"]["checks"].append(doc["steps"]["a"]["checks"][0])
    for i in range(count):
        doc["tree"] = f"{i + 1:040x}"
        files["run.json"] = json.dumps(doc).encode()
        message = f"audit(default): PASS\n\nAudit-Tree: {doc['tree']}\n"
        append_run(handle.git, "default", files, message, signer or signer_for(handle, None))


@pytest.mark.parametrize("chunk", [1, 3])
@pytest.mark.parametrize("bad", ["signature", "missing"])
def test_verification_split_among_processes_reports_as_one_process(
    repo: GitRepo, sealed: Sealer, monkeypatch: pytest.MonkeyPatch, bad: str, chunk: int
) -> None:
    """Many commits are verified by worker processes; the count and the first problem in chain
    order are what a single process reports, for a forged signature or a tree that lacks what
    its run.json records, however the chain is cut into shares."""
    from gitaudit.crypto.signers import Ed25519Signer
    from gitaudit.ledger import verify, workers

    sealed(make_plan(run_step("a", "true")))
    assert audit(repo.path, "run").code == 0
    _copies(repo, 6)
    if bad == "signature":
        _copies(repo, 1, signer=Ed25519Signer.generate())
    else:
        _copies(repo, 1, extra_check=True)
    _copies(repo, 5, template="refs/audit/runs/default~1")
    handle = open_repo(repo.path)

    def report() -> tuple[dict[str, int], list[str]]:
        forget_marks(handle.gitdir)
        got = verify.verify_all(open_repo(repo.path), remember=False)
        return got.verified, got.problems

    serial = report()
    assert len(serial[1]) == 1 and serial[0]["refs/audit/runs/default"] == 5, serial
    monkeypatch.setattr(verify, "PARALLEL_FROM", 2)
    monkeypatch.setattr(verify, "CHUNK", chunk)
    monkeypatch.setattr(workers, "jobs", lambda: 3)
    assert report() == serial


def _slow_python(tmp_path: Path, before: str) -> Path:
    """An interpreter wrapper for the workers: it runs the shell lines *before*, then the real
    interpreter with its input copied to ``requests.log``."""
    import sys

    wrapper = tmp_path / "python"
    wrapper.write_text(
        f'#!/bin/sh\n{before}\ntee -a {tmp_path / "requests.log"} | {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def test_a_worker_that_starts_late_takes_fewer_shares(
    repo: GitRepo, sealed: Sealer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The split follows what each process gets done: a worker that only starts once this
    process has verified seven shares keeps the two it was handed first, and this process
    verifies every other (a fixed split waited for the slowest)."""
    import sys

    from gitaudit.ledger import run_shares, verify, workers

    sealed(make_plan(run_step("a", "true")))
    assert audit(repo.path, "run").code == 0
    _copies(repo, 8)
    mine = tmp_path / "mine.log"
    mine.touch()
    real = run_shares.verify_share

    def verify_here(*args: object) -> object:
        found = real(*args)  # type: ignore[arg-type]
        with mine.open("a") as log:
            log.write("share\n")
        return found

    wait = f'while [ "$(wc -l < {mine})" -lt 7 ]; do sleep 0.01; done'
    monkeypatch.setattr(verify, "PARALLEL_FROM", 2)
    monkeypatch.setattr(verify, "CHUNK", 1)
    monkeypatch.setattr(workers, "jobs", lambda: 2)
    monkeypatch.setattr(verify, "verify_share", verify_here)
    monkeypatch.setattr(sys, "executable", str(_slow_python(tmp_path, wait)))
    got = verify.verify_all(open_repo(repo.path), remember=False)
    assert got.ok and got.verified["refs/audit/runs/default"] == 9, got
    assert mine.read_text().count("share") == 7
    requests = (tmp_path / "requests.log").read_text().splitlines()
    assert [json.loads(line)[0] for line in requests[1:]] == [0, 1]  # the newest two


def test_shares_shrink_once_the_walk_is_done_and_cover_the_chain_once(
    repo: GitRepo, sealed: Sealer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """While the chain is walked, shares are CHUNK commits; once its length is known they
    shrink with what is left (so no process waits long for another's last share), and the
    worker's shares and this process's cover every commit exactly once."""
    import sys

    from gitaudit.ledger import run_shares, verify, workers

    sealed(make_plan(run_step("a", "true")))
    assert audit(repo.path, "run").code == 0
    _copies(repo, 63)  # 64 commits: 8 shares of 8 without the shrinking
    here: list[int] = []
    real = run_shares.verify_share

    def verify_here(git: object, ref: str, oids: list[pygit2.Oid], runners: object) -> object:
        here.append(len(oids))
        return real(git, ref, oids, runners)  # type: ignore[arg-type]

    monkeypatch.setattr(verify, "PARALLEL_FROM", 8)
    monkeypatch.setattr(verify, "CHUNK", 8)
    monkeypatch.setattr(verify, "LAST", 1)
    monkeypatch.setattr(workers, "jobs", lambda: 2)
    monkeypatch.setattr(verify, "verify_share", verify_here)
    monkeypatch.setattr(sys, "executable", str(_slow_python(tmp_path, "")))
    got = verify.verify_all(open_repo(repo.path), remember=False)
    assert got.ok and got.verified["refs/audit/runs/default"] == 64, got
    requests = (tmp_path / "requests.log").read_text().splitlines()[1:]
    shares = [(start, len(commits)) for start, commits in map(json.loads, requests)]
    walked = [size for _start, size in shares if size == 8]
    assert walked and shares[: len(walked)] == [(8 * n, 8) for n in range(len(walked))]
    smaller = [size for _start, size in shares if size < 8] + [n for n in here if n < 8]
    assert smaller  # the last shares are smaller than the walk's
    covered = sorted(i for start, size in shares for i in range(start, start + size))
    assert len(covered) + sum(here) == 64  # no commit twice
    assert set(covered) == set(range(len(covered)))  # the worker's: the newest end, no gap


def test_a_worker_that_dies_holding_a_share_fails_the_verification(
    repo: GitRepo, sealed: Sealer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A share handed to a worker that ends without answering is not taken as verified."""
    import sys

    from gitaudit.errors import LedgerError
    from gitaudit.ledger import verify, workers

    sealed(make_plan(run_step("a", "true")))
    assert audit(repo.path, "run").code == 0
    _copies(repo, 8)
    monkeypatch.setattr(verify, "PARALLEL_FROM", 2)
    monkeypatch.setattr(verify, "CHUNK", 1)
    monkeypatch.setattr(workers, "jobs", lambda: 2)
    monkeypatch.setattr(
        sys, "executable", str(_slow_python(tmp_path, "read setup; read share; exit 3"))
    )
    with pytest.raises(LedgerError, match=r"a verification worker failed \(exit 3\)"):
        verify.verify_all(open_repo(repo.path), remember=False)


def test_workers_started_before_the_walk_ends_are_all_reaped(
    repo: GitRepo,
    sealed: Sealer,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The workers start while the chain is still being walked, before the number of commits is
    known: every worker is ended once the chain is verified (those left without a share too), is
    reaped, none complains, and the count is what one process reports."""
    import subprocess

    from gitaudit.ledger import verify, workers

    sealed(make_plan(run_step("a", "true")))
    assert audit(repo.path, "run").code == 0
    _copies(repo, 8)
    started: list[subprocess.Popen[bytes]] = []
    real_popen = subprocess.Popen

    def popen(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        proc: subprocess.Popen[bytes] = real_popen(*args, **kwargs)  # type: ignore[call-overload]
        started.append(proc)
        return proc

    monkeypatch.setattr(verify, "PARALLEL_FROM", 2)
    monkeypatch.setattr(verify, "CHUNK", 1)
    monkeypatch.setattr(workers, "jobs", lambda: 8)  # 9 commits: 9 shares for 8 processes
    monkeypatch.setattr(subprocess, "Popen", popen)
    capfd.readouterr()
    got = verify.verify_all(open_repo(repo.path), remember=False)
    assert got.ok and got.verified["refs/audit/runs/default"] == 9, got
    assert len(started) == 7
    assert all(proc.returncode is not None for proc in started)
    assert capfd.readouterr().err == ""


def test_workers_started_early_verify_from_scratch_and_only_from_scratch(
    repo: GitRepo, sealed: Sealer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``verify`` with no verified mark starts its workers before its imports; the chain then
    verifies as one process would, through them (none left waiting), and the next ``verify``,
    with the marks there, starts none."""
    from gitaudit.ledger import verify, workers

    sealed(make_plan(run_step("a", "true")))
    assert audit(repo.path, "run").code == 0
    _copies(repo, 7)
    forget_marks(open_repo(repo.path).gitdir)
    monkeypatch.setattr(verify, "CHUNK", 2)
    monkeypatch.setattr(workers, "jobs", lambda: 3)
    monkeypatch.chdir(repo.path)
    workers.start_early(".")
    early = list(workers._EARLY)
    assert len(early) == 2 and workers.started_early()
    got = verify.verify_all(open_repo(repo.path))
    assert got.ok and got.verified["refs/audit/runs/default"] == 8, got
    assert not workers.started_early()
    assert all(proc.returncode is not None for proc in early)  # taken, then ended
    workers.start_early(".")  # the marks are there now: nothing to verify from scratch
    assert not workers.started_early()


def test_workers_started_early_and_not_taken_are_ended(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Workers nobody takes (the command failed first, or had less to verify than guessed) are
    ended at exit; outside a work tree, or with one core, none start."""
    from gitaudit.ledger import workers

    monkeypatch.setattr(workers, "jobs", lambda: 2)
    workers.start_early(str(tmp_path / "nowhere"))
    assert not workers.started_early()
    monkeypatch.chdir(repo.path)
    workers.start_early(".")
    early = list(workers._EARLY)
    assert len(early) == 1 and early[0].poll() is None
    workers.end_unused()
    assert not workers.started_early() and early[0].returncode is not None
    monkeypatch.setattr(workers, "jobs", lambda: 1)
    workers.start_early(".")
    assert not workers.started_early()


@pytest.mark.parametrize("commondir", [b"\xff\xfe\n", b"elsewhere\x00\n"])
def test_a_guess_that_cannot_read_the_repository_starts_no_worker_and_no_traceback(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch, commondir: bytes
) -> None:
    """The guess is made before the command looks at the repository: a `.git/commondir` that is
    not UTF-8, or holds a NUL (anything that writes `.git/` can plant one), is for the command
    to report in one line; the guess starts no worker (it raised UnicodeDecodeError or
    ValueError out of `git audit verify`, a traceback, before the fix)."""
    from gitaudit.ledger import workers

    (repo.path / ".git" / "commondir").write_bytes(commondir)
    monkeypatch.setattr(workers, "jobs", lambda: 2)
    monkeypatch.chdir(repo.path)
    workers.start_early(".")
    assert not workers.started_early()
    got = audit(repo.path, "verify", process=True)
    assert got.code != 0 and "Traceback" not in got.out + got.err, got
