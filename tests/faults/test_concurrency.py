"""Concurrency: many processes appending runs and seals to one repository at once, and the gate
reading while they do. Compare-and-swap must lose nothing and never fork the ledger, and a
reader must never see a torn state."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    release,
    seal_repo,
    spawn,
)
from tests.gitrepo import GitRepo

PROCESSES, RUNS_EACH = 16, 10
SEALERS, VERSIONS = 4, 4


@pytest.mark.slow
def test_sixteen_processes_record_runs_through_the_cli(tiny: GitRepo, tmp_path: Path) -> None:
    """16 processes, each running `git audit run` (the real command line, one process per run)
    10 times, released together by a barrier."""
    path = tiny.path
    gate = tmp_path / "barrier"
    gate.mkdir()
    workers = [
        spawn("record_worker", str(path), RUNS_EACH, str(gate), str(n)) for n in range(PROCESSES)
    ]
    release(gate, workers, timeout=120)
    started = time.monotonic()
    results = collect(workers, timeout=600)  # a hang guard
    elapsed = time.monotonic() - started
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
def test_concurrent_seals_lose_no_version(repo: GitRepo, tmp_path: Path) -> None:
    """Sealers race on refs/audit/plans, each sealing its own plan and the one plan they share."""
    seal_repo(repo)
    path = repo.path
    gate = tmp_path / "barrier"
    gate.mkdir()
    workers = [spawn("seal_worker", str(path), me, VERSIONS, str(gate)) for me in range(SEALERS)]
    release(gate, workers, timeout=120)
    results = collect(workers, timeout=300)  # a hang guard
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
def test_gate_never_sees_a_torn_state(repo: GitRepo, tmp_path: Path) -> None:
    """While two processes append runs through `git audit run`, the gate (in-process and `git
    audit status`) answers without an exception, and PASS whenever a run is on the ledger
    (every run here passes, for this very tree)."""
    seal_repo(repo)
    path = repo.path
    gate = tmp_path / "barrier"
    gate.mkdir()
    appenders = [spawn("record_worker", str(path), 20, str(gate), str(n)) for n in range(2)]
    release(gate, appenders, timeout=120)
    verdicts: dict[str, int] = {}
    wrong: list[str] = []
    checks = 0
    deadline = time.monotonic() + 300  # a hang guard
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
        if passing_before and verdict != "PASS":
            wrong.append(detail)  # including the torn read that once gave a false FAIL
    collect(appenders, timeout=120)
    print(f"gate during runs: {checks} checks, verdicts {verdicts}", file=sys.stderr)
    assert checks >= 10
    assert set(verdicts) <= {"PASS", "UNKNOWN"}, verdicts  # UNKNOWN only before the first run
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


def test_stale_index_sync_keeps_the_newer_index(
    tiny: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Process A wants to sync while process B holds the index's write lock and appends a run.
    A reads the ref only once it holds the lock, so it indexes B's newer tip; it never rebuilds
    the index back to a tip it read before waiting."""
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

    waiting = threading.Event()
    real_db = index._db

    class Watched:
        """A's connection: says when A asks for the write lock B holds."""

        def __init__(self, conn: sqlite3.Connection) -> None:
            self.conn = conn

        def execute(self, sql: str, *args: Any) -> Any:
            if sql == "BEGIN IMMEDIATE":
                waiting.set()
            return self.conn.execute(sql, *args)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.conn, name)

    @contextlib.contextmanager
    def watched_db(gitdir: Path) -> Iterator[Any]:
        with real_db(gitdir) as conn:
            yield Watched(conn) if threading.current_thread() is thread else conn

    monkeypatch.setattr(index, "_db", watched_db)
    thread = threading.Thread(target=sync_a)
    thread.start()
    assert waiting.wait(timeout=60)  # A asks for the lock (everything it read, it read before)
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
