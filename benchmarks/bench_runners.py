"""Benchmark: many runners feed one ledger (RUNNERS x RUNS, default 64 x 25).

Wraps ``python -m tests.faults.many_runners RUNNERS RUNS DIR`` (the fault test's driver, see
tests/faults/many_runners.py): a bare server with gitaudit's pre-receive hook, RUNNERS clones
each on its own tree, every clone recording RUNS runs through the real command line and pushing
them (``git audit push --evidence-only``, every 5 runs), all at once. Reports the
throughput (runs recorded and pushed per second of the concurrent phase), the pushes and how
many of them had to be tried again after losing the race for the runs ref (beyond ``git audit
push``'s own retries), the packed size of the ledger per run, and whether every run arrived:
the server's ledger must hold exactly RUNNERS x RUNS + 1 runs (the first one, then everybody's)
and `git audit verify` must verify every one.

Run: ``.venv/bin/python benchmarks/bench_runners.py [--runners N] [--runs R] [--quick]``;
``--quick`` is 8 x 5. The machine's load counts for everything here: say what else ran.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ledger_util import GIT_AUDIT, PYTHON, bench_env

ROOT = Path(__file__).resolve().parent.parent


def _packed_per_run(server: Path, runs: int) -> float:
    """KiB per run of the runs ref's objects once packed: the size of a pack of everything
    reachable from it (run commits, their trees and blobs), over the runs."""
    listed = subprocess.run(
        ["git", "rev-list", "--objects", "refs/audit/runs/default"],
        cwd=server,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    packed = subprocess.run(
        ["git", "pack-objects", "--stdout", "-q"],
        cwd=server,
        input=listed.encode(),
        capture_output=True,
        check=True,
    ).stdout
    return len(packed) / 1024 / runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runners", type=int, default=64, help="concurrent runner clones")
    parser.add_argument("--runs", type=int, default=25, help="runs each runner records")
    parser.add_argument("--quick", action="store_true", help="8 runners x 5 runs")
    args = parser.parse_args()
    if args.quick:
        args.runners, args.runs = 8, 5

    scratch = Path(tempfile.mkdtemp(prefix="gitaudit-bench-runners-"))
    try:
        bench_env(scratch)
        os.environ["GIT_AUTHOR_DATE"] = os.environ["GIT_COMMITTER_DATE"] = "2026-11-01T12:00:00Z"
        bindir = str(Path(PYTHON).parent)
        env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
        work = scratch / "runners"
        work.mkdir()
        print(f"{args.runners} runners x {args.runs} runs, pushing every 5 runs, all at once ...")
        started = time.perf_counter()
        proc = subprocess.run(
            [
                PYTHON,
                "-m",
                "tests.faults.many_runners",
                str(args.runners),
                str(args.runs),
                str(work),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
            return 1
        doc = json.loads(proc.stdout.strip().splitlines()[-1])
        server = work / "server.git"
        verify_started = time.perf_counter()
        verified = subprocess.run(
            [GIT_AUDIT, "verify", "--json"], cwd=server, capture_output=True, text=True, check=False
        )
        verify_s = time.perf_counter() - verify_started
        report = json.loads(verified.stdout) if verified.stdout.strip() else {}
        runs = args.runners * args.runs
        retried = doc["attempts"] - doc["pushes"]
        all_arrived = doc["arrived"] == runs + 1
        all_verified = (
            report.get("verdict") == "PASS"
            and report.get("verified", {}).get("refs/audit/runs/default") == doc["arrived"]
        )
        print(f"  set-up (server, {args.runners} clones)      {doc['setup_s']:8.1f} s")
        print(f"  concurrent phase                      {doc['drive_s']:8.1f} s")
        print(f"  throughput                            {runs / doc['drive_s']:8.2f} runs/s")
        print(f"  pushes                                {doc['pushes']:8d}")
        print(f"  pushes tried again (lost races)       {retried:8d}")
        print(f"  runs on the server                    {doc['arrived']:8d}  (expected {runs + 1})")
        print(
            f"  git audit verify on the server        {verify_s:8.1f} s  ({report.get('verdict')})"
        )
        print(f"  wall in all                           {wall:8.1f} s")
        per_run = _packed_per_run(server, doc["arrived"])
        print(f"  ledger packed, per run                {per_run:8.2f} KiB")
        ok = all_arrived and all_verified
        print(f"\n{'PASS' if ok else 'FAIL'}: every run arrived and verifies: {ok}")
        return 0 if ok else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
