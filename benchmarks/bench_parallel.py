"""Benchmark: independent steps run in parallel.

A sealed plan of 8 independent steps (``"depends_on": []``), each with the one behavioural check
``sleep 1``. With ``--jobs 8`` the step execution (first step started to last step finished, as
``RunOutcome`` records it) must take <= 1.5 s, against a baseline of 1 s (one ``sleep 1``).

Measured in one run:

* baseline: one ``sleep 1`` subprocess;
* ``run_plan(..., jobs=8)`` in-process: the step-execution span (the target) and the whole call;
* ``git audit run --jobs 8``: wall time of the whole command (start-up, fingerprints, signing);
* ``git audit run --jobs 1``: the same plan serially, for comparison (about 8 s).

Each run appends a signed run commit; every one must be PASS.

Run: ``.venv/bin/python benchmarks/bench_parallel.py [--steps N] [--jobs J]``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ledger_util import (
    GIT_AUDIT,
    PLAN,
    bench_env,
    finish,
    info_line,
    init_audited_repo,
    plan_doc,
    run_steps,
    timed_run,
    verdict_line,
)

TARGET = 1.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="independent `sleep 1` steps")
    parser.add_argument("--jobs", type=int, default=8, help="parallel jobs for the target")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="gitaudit-bench-parallel-"))
    try:
        bench_env(scratch)
        repo = scratch / "repo"
        init_audited_repo(repo, plan_doc(run_steps(args.steps, ["sleep", "1"])))
        print(f"plan: {args.steps} independent steps, each `sleep 1` (one behavioural check)")

        baseline = timed_run(["sleep", "1"], repo)

        from gitaudit.crypto.keystore import keys_dir, load_signer
        from gitaudit.git.repo import open_repo
        from gitaudit.run.recorder import run_plan

        signer = load_signer(keys_dir() / "default")
        start = time.perf_counter()
        recorded = run_plan(open_repo(repo), PLAN, signer, jobs=args.jobs)
        call = time.perf_counter() - start
        if recorded.verdict != "PASS":
            raise RuntimeError(f"in-process run: {recorded.verdict} {recorded.doc['reasons']}")
        span = recorded.outcome.finished - recorded.outcome.started

        wall_parallel = timed_run([GIT_AUDIT, "run", "--jobs", str(args.jobs)], repo)
        wall_serial = timed_run([GIT_AUDIT, "run", "--jobs", "1"], repo)

        print("\nfor the record:")
        info_line("baseline: one `sleep 1`", baseline)
        info_line(f"run_plan(jobs={args.jobs}) in-process, whole call", call, baseline)
        info_line(
            f"git audit run --jobs {args.jobs}, whole command (wall)",
            wall_parallel,
            baseline,
            f"= steps + {(wall_parallel - span) * 1000:.0f} ms around them",
        )
        info_line("git audit run --jobs 1, whole command (wall)", wall_serial, baseline)
        print(f"  speed-up --jobs {args.jobs} vs --jobs 1: {wall_serial / wall_parallel:.2f}x")
        print("\nresults:")
        results = [
            verdict_line(
                f"step execution with jobs={args.jobs} (first start..last end)",
                span,
                TARGET,
                baseline,
            )
        ]
        print("  (ratio against one `sleep 1`)")
        return finish(results)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
