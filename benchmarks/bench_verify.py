"""Benchmark: ``git audit verify`` on a ledger of 20,000 run commits, from scratch and again.

Fixture: the cached ledger of ``_ledger_util.ledger_fixture`` (a sealed one-step plan, one real
run, then 20,000 generated runs signed by the trusted runner key).

Measured in one run:

* from scratch (median of R rounds, [min-max]): ``<gitdir>/gitaudit/watermarks.json`` deleted,
  so every plans commit and every run commit is verified (signature, linear chain, ``run.json``
  against its tree): target <= 1.5x the Ed25519 bound, the time PyNaCl takes to verify as many
  signatures one after another in this process (measured in the same rounds: 2,000 verifications
  of a signature over a run commit's size, scaled to the number of commits); the work may be
  split among processes, one per core. Also <= 20 s. Baseline for the record: ``git rev-list
  --count refs/audit/runs/default`` (git walking the same chain);
* incrementally, nothing new (median of R): target <= 200 ms; baseline ``python -c pass``;
* incrementally, after one more run commit (median of R, a run appended before each call):
  target <= 200 ms;
* for the record: ``git-audit --version`` (the CLI's own start-up: typer, rich and the eager
  imports of every command module) and the in-process ``verify_all`` from scratch.

Run: ``.venv/bin/python benchmarks/bench_verify.py [--rounds R] [--profile]``.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ledger_util import (
    GIT_AUDIT,
    PYTHON,
    REF,
    RUNS,
    audit,
    bench_env,
    checkout_fixture,
    finish,
    generate_runs,
    info_line,
    interleaved,
    ledger_fixture,
    timed_run,
    verdict_line,
)

FULL_TARGET = 20.0
BOUND_TARGET = 1.5
INCREMENTAL_TARGET = 0.200
SAMPLE = 2_000


def ed25519_seconds() -> float:
    """Seconds PyNaCl takes for one verification of a signature over ~1 kB (a run commit)."""
    import nacl.signing

    key = nacl.signing.SigningKey(b"\x01" * 32)
    signed = key.sign(b"x" * 1000)
    verify = key.verify_key.verify
    start = time.perf_counter()
    for _ in range(SAMPLE):
        verify(signed)
    return (time.perf_counter() - start) / SAMPLE


def forget_marks(repo: Path) -> None:
    (repo / ".git" / "gitaudit" / "watermarks.json").unlink(missing_ok=True)


def verify_cli(repo: Path, expect_new: int | None) -> float:
    """Wall seconds of ``git audit verify --json``; checks PASS and the count of new commits."""
    import json
    import subprocess

    start = time.perf_counter()
    proc = subprocess.run(
        [GIT_AUDIT, "verify", "--json"], cwd=repo, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(
            f"git audit verify exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
        )
    doc = json.loads(proc.stdout)
    got = doc["verified"].get(REF)
    if doc["verdict"] != "PASS" or (expect_new is not None and got != expect_new):
        raise RuntimeError(f"unexpected verify result: {doc}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the incremental timings")
    parser.add_argument("--full-rounds", type=int, default=3, help="rounds from scratch")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the in-process full verification"
    )
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="gitaudit-bench-verify-"))
    try:
        bench_env(scratch)
        repo = checkout_fixture(ledger_fixture(), scratch)
        print(f"ledger: {RUNS + 1} run commits on {REF}")

        rev_list = statistics.median(
            timed_run(["git", "rev-list", "--count", REF], repo) for _ in range(3)
        )
        commits = RUNS + 1

        def from_scratch() -> float:
            forget_marks(repo)
            return verify_cli(repo, commits)

        timed = interleaved(
            {"bound": lambda: ed25519_seconds() * commits, "full": from_scratch},
            args.full_rounds,
            warmup=0,
        )
        full, bound = timed["full"], timed["bound"]

        from gitaudit.git.repo import open_repo
        from gitaudit.ledger.verify import verify_all

        forget_marks(repo)
        profiler = cProfile.Profile() if args.profile else None
        start = time.perf_counter()
        if profiler:
            profiler.enable()
        report = verify_all(open_repo(repo))
        if profiler:
            profiler.disable()
        in_process = time.perf_counter() - start
        assert report.ok, report.problems

        medians = interleaved(
            {
                "python": lambda: timed_run([PYTHON, "-c", "pass"], repo),
                "version": lambda: timed_run([GIT_AUDIT, "--version"], repo),
                "nothing-new": lambda: verify_cli(repo, 0),
            },
            args.rounds,
        )
        one_new: list[float] = []
        for n in range(args.rounds):
            generate_runs(repo, 1, 1, seed=100 + n)
            one_new.append(verify_cli(repo, 1))
        one = statistics.median(one_new)

        print("\nbaselines:")
        info_line("git rev-list --count refs/audit/runs/default", rev_list)
        info_line("python -c pass (interpreter start-up)", medians["python"])
        info_line("git-audit --version (CLI start-up)", medians["version"], medians["python"])
        print("\nfor the record:")
        info_line("verify_all in-process, from scratch", in_process, rev_list)
        print(f"  per run commit: {in_process / (RUNS + 1) * 1e6:.0f} us")
        print("\nresults:")
        info_line(f"Ed25519 bound: {commits} PyNaCl verifications", bound)
        results = [
            verdict_line(
                "git audit verify, from scratch, vs the Ed25519 bound",
                full,
                BOUND_TARGET * bound,
                bound,
            ),
            verdict_line("git audit verify, from scratch (absolute)", full, FULL_TARGET, rev_list),
            verdict_line(
                "git audit verify, incremental (nothing new)",
                medians["nothing-new"],
                INCREMENTAL_TARGET,
                medians["python"],
            ),
            verdict_line(
                "git audit verify, incremental (1 new run)",
                one,
                INCREMENTAL_TARGET,
                medians["python"],
            ),
        ]
        print(
            f"  (from scratch: target {BOUND_TARGET}x the bound, {os.cpu_count()} cores; "
            "incremental vs python start-up)"
        )
        if profiler:
            print("\nprofile of verify_all from scratch (top 20 by cumulative time):")
            pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative").print_stats(20)
        audit(repo, "verify")  # the copy is still intact
        return finish(results)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
