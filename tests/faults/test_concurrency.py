"""Concurrency: many processes appending runs and seals to one repository at once, and the gate
reading while they do. Compare-and-swap must lose nothing and never fork the ledger, and a
reader must never see a torn state."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pygit2
import pytest

from gitaudit.gate.judge import judge
from gitaudit.git.repo import open_repo
from gitaudit.ledger import index
from gitaudit.ledger.refs import PLANS_REF, read_ref
from gitaudit.ledger.seals import history
from tests.faults.conftest import (
    PLAN_NAME,
    RUNS_REF,
    assert_ledger_sound,
    cli_argv,
    collect,
    env,
    seal_repo,
    spawn,
)
from tests.gitrepo import GitRepo

PROCESSES, RUNS_EACH = 16, 25
SEALERS, VERSIONS = 4, 4


@pytest.mark.slow
def test_sixteen_processes_record_four_hundred_runs(tiny: GitRepo) -> None:
    path = tiny.path
    start_at = time.time() + 3.0  # every interpreter is up before the first run starts
    workers = [spawn("record_worker", str(path), RUNS_EACH, start_at) for _ in range(PROCESSES)]
    results = collect(workers, timeout=240)
    elapsed = time.time() - start_at
    reported = [c for r in results for c in r["commits"]]
    print(
        f"concurrency: {PROCESSES} processes recorded {len(reported)} runs in {elapsed:.1f} s "
        f"({len(reported) / elapsed:.1f} runs/s)",
        file=sys.stderr,
    )
    assert len(reported) == PROCESSES * RUNS_EACH
    assert len(set(reported)) == len(reported), "two processes reported the same run"
    chain = assert_ledger_sound(path)  # linear, fsck clean, every commit verifies
    assert len(chain) == PROCESSES * RUNS_EACH
    assert set(chain) == set(reported), "a recorded run is not on the ledger"
    repo = open_repo(path)
    indexed = index.recent(repo.git, repo.gitdir, PLAN_NAME, 10_000)
    assert [r.commit for r in indexed] == chain
    assert [r.seq for r in indexed] == list(range(len(chain), 0, -1))
    # the index agrees with a rebuild from scratch
    (repo.gitdir / "gitaudit" / "index.sqlite").unlink()
    rebuilt = index.recent(repo.git, repo.gitdir, PLAN_NAME, 10_000)
    assert [(r.commit, r.seq) for r in rebuilt] == [(r.commit, r.seq) for r in indexed]
    assert judge(repo, "HEAD").verdict == "PASS"


@pytest.mark.slow
def test_concurrent_seals_lose_no_version(repo: GitRepo) -> None:
    """Sealers race on refs/audit/plans, each sealing its own plan and the one plan they share."""
    seal_repo(repo)
    path = repo.path
    start_at = time.time() + 2.5
    workers = [spawn("seal_worker", str(path), me, VERSIONS, start_at) for me in range(SEALERS)]
    results = collect(workers, timeout=180)
    handle = open_repo(path)
    shared = history(handle, "shared")
    assert sorted(e.record.version for e in shared) == list(range(1, SEALERS * VERSIONS + 1))
    wanted_shared = {d for r in results for d in r["shared"]}
    assert {e.record.contract_digest for e in shared} == wanted_shared
    for me, result in enumerate(results):
        own = history(handle, f"own{me}")
        assert [e.record.contract_digest for e in reversed(own)] == result["own"]
        assert [e.record.version for e in reversed(own)] == list(range(1, VERSIONS + 1))
    chain = assert_ledger_sound(path, PLANS_REF)
    # the root, the initial seal, and one commit per seal made by the workers
    assert len(chain) == 2 + 2 * SEALERS * VERSIONS
    print(f"seals: {SEALERS} sealers, {len(chain) - 2} seals, none lost", file=sys.stderr)


@pytest.mark.slow
def test_gate_never_sees_a_torn_state(repo: GitRepo) -> None:
    """While runs are appended in a loop, the gate (in-process and `git audit status`) answers
    PASS, UNKNOWN or FAIL without an exception, and PASS as soon as a passing run for the tree
    is on the ledger."""
    seal_repo(repo)
    path = repo.path
    start_at = time.time() + 2.0
    appenders = [spawn("record_worker", str(path), 40, start_at) for _ in range(2)]
    verdicts: dict[str, int] = {}
    wrong: list[str] = []
    checks = 0
    deadline = time.monotonic() + 120
    time.sleep(max(0.0, start_at - time.time() - 0.3))
    while any(p.poll() is None for p in appenders) and time.monotonic() < deadline:
        handle = open_repo(path)
        passing_before = read_ref(handle.git, RUNS_REF) is not None  # every run here passes
        if checks % 5 == 4:
            proc = subprocess.run(
                cli_argv("status", "HEAD", "--json"),
                cwd=path,
                capture_output=True,
                text=True,
                env=env(),
                check=False,
            )
            assert "Traceback" not in proc.stderr, proc.stderr
            verdict = json.loads(proc.stdout)["verdict"]
            assert proc.returncode == {"PASS": 0, "FAIL": 1, "UNKNOWN": 3}[verdict]
            detail = proc.stdout
        else:
            result = judge(handle, "HEAD")
            verdict = result.verdict
            detail = json.dumps(result.to_json())
        checks += 1
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
        assert verdict in ("PASS", "UNKNOWN", "FAIL")
        if passing_before and verdict != "PASS":
            wrong.append(detail)  # including the torn read that once gave a false FAIL
    collect(appenders, timeout=60)
    print(
        f"gate during runs: {checks} checks, verdicts {verdicts}",
        file=sys.stderr,
    )
    assert checks >= 10
    assert not wrong, f"{len(wrong)} of {checks} checks were not PASS: {wrong[0]}"
    assert_ledger_sound(Path(path))


def test_gate_between_tip_read_and_index_lookup(
    tiny: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interleaving the loop above can only hit by chance, forced: another process appends a
    passing run for the same tree while the gate is about to ask the index (the gate now takes
    the tip from the index's own consistent view instead of reading the ref separately)."""
    from gitaudit.cli.common import signer_for
    from gitaudit.run.recorder import run_plan

    handle = open_repo(tiny.path)
    signer = signer_for(handle, None)
    run_plan(handle, PLAN_NAME, signer, jobs=1)
    assert judge(open_repo(tiny.path), "HEAD").verdict == "PASS"
    real = index.lookup
    appended: list[str] = []

    def racing(*args: object, **kwargs: object) -> object:
        if not appended:  # the other process wins the race once
            appended.append(run_plan(open_repo(tiny.path), PLAN_NAME, signer, jobs=1).commit)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(index, "lookup", racing)
    result = judge(open_repo(tiny.path), "HEAD")
    assert appended
    assert result.verdict == "PASS", result.to_json()


def test_stale_index_sync_keeps_the_newer_index(tiny: GitRepo) -> None:
    """Process A wants to sync while process B holds the index's write lock and appends a run.
    A reads the ref only once it holds the lock, so it indexes B's newer tip; it never rebuilds
    the index back to a tip it read before waiting."""
    import sqlite3
    import threading

    from gitaudit.cli.common import signer_for
    from gitaudit.run.recorder import run_plan

    handle = open_repo(tiny.path)
    signer = signer_for(handle, None)
    run_plan(handle, PLAN_NAME, signer, jobs=1)
    database = handle.gitdir / "gitaudit" / "index.sqlite"
    holder = sqlite3.connect(database, timeout=30, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # B holds the lock
    done = threading.Event()

    def sync_a() -> None:
        index.sync(handle.git, handle.gitdir, PLAN_NAME)
        done.set()

    thread = threading.Thread(target=sync_a)
    thread.start()  # A waits for the lock
    time.sleep(0.3)
    assert not done.is_set()
    # B's new run: written as run_plan does, but its index update must wait, so append directly
    from gitaudit.ledger.runs import append_run

    tip = read_ref(handle.git, RUNS_REF)
    assert tip is not None
    files = {
        "run.json": handle.git[tip].peel(pygit2.Commit).tree["run.json"].peel(pygit2.Blob).data
    }
    newer = append_run(handle.git, PLAN_NAME, files, "audit(x): PASS again\n", signer)
    holder.execute("COMMIT")
    holder.close()
    thread.join(timeout=30)
    assert done.is_set()
    conn = sqlite3.connect(database)
    try:
        row = conn.execute("SELECT tip FROM meta WHERE plan=?", (PLAN_NAME,)).fetchone()
    finally:
        conn.close()
    assert row[0] == str(newer)
