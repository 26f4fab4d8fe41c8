"""Benchmark: what recording costs on top of the checks themselves.

A sealed plan of 200 **independent** steps (``"depends_on": []``, no chain), each with exactly one
behavioural check ``{"type": "run", "argv": ["true"]}`` and no outputs. ``git audit run --jobs 1``
runs them one after another and records the signed evidence (200 steps x result.json, stdout,
stderr). Target: its wall time <= 2 x (the same 200 ``true`` processes in a bare Python loop of
``subprocess.run``) + the fixed cost of one gitaudit command, ``git audit status HEAD`` (start-up,
imports, reading the plans and the ledger), both measured in the same rounds: so each step may
cost at most twice a bare process, and the run as a whole one more command's worth.

Measured in one run (medians of R interleaved rounds, [min-max] beside):

* baseline: ``for _ in range(200): subprocess.run(["true"])``, and ``git audit status HEAD``;
* ``git audit run --jobs 1``: wall time of the whole command (the target);
* for the record: ``run_plan(jobs=1)`` in-process (step execution span and the whole call; the
  per-step cost beyond the bare process), and ``git-audit --version``.

``--profile`` prints a cProfile of one in-process ``run_plan``.

Run: ``.venv/bin/python benchmarks/bench_overhead.py [--steps N] [--rounds R] [--profile]``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import statistics
import subprocess
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
    interleaved,
    plan_doc,
    run_steps,
    timed_run,
    verdict_line,
)


def bare_loop(n: int, cwd: Path) -> None:
    for _ in range(n):
        subprocess.run(["true"], cwd=cwd, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="independent `true` steps")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (medians)")
    parser.add_argument("--profile", action="store_true", help="cProfile one in-process run")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="gitaudit-bench-overhead-"))
    try:
        bench_env(scratch)
        repo = scratch / "repo"
        init_audited_repo(repo, plan_doc(run_steps(args.steps, ["true"])))
        print(f"plan: {args.steps} independent steps (no chain), each one `run: true`, no outputs")

        medians = interleaved(
            {
                "loop": lambda: bare_loop(args.steps, repo),
                "cli": lambda: timed_run([GIT_AUDIT, "run", "--jobs", "1"], repo),
                "status": lambda: timed_run([GIT_AUDIT, "status", "HEAD"], repo),
                "version": lambda: timed_run([GIT_AUDIT, "--version"], repo),
            },
            args.rounds,
            warmup=1,
        )
        loop, cli, fixed = medians["loop"], medians["cli"], medians["status"]
        target = 2 * loop + fixed

        from gitaudit.crypto.keystore import keys_dir, load_signer
        from gitaudit.git.repo import open_repo
        from gitaudit.run.recorder import run_plan

        signer = load_signer(keys_dir() / "default")
        spans, calls = [], []
        profiler = cProfile.Profile() if args.profile else None
        for n in range(args.rounds):
            if profiler and n == 0:
                profiler.enable()
            start = time.perf_counter()
            recorded = run_plan(open_repo(repo), PLAN, signer, jobs=1)
            calls.append(time.perf_counter() - start)
            if profiler and n == 0:
                profiler.disable()
            if recorded.verdict != "PASS":
                raise RuntimeError(f"in-process run: {recorded.verdict} {recorded.doc['reasons']}")
            spans.append(recorded.outcome.finished - recorded.outcome.started)
        span, call = statistics.median(spans), statistics.median(calls)

        print("\nfor the record:")
        info_line(f"baseline: {args.steps} x subprocess.run(['true'])", loop)
        info_line("baseline: git audit status HEAD (one command's fixed cost)", fixed, loop)
        info_line("git-audit --version (CLI start-up)", medians["version"], loop)
        info_line("run_plan(jobs=1) in-process: step execution", span, loop)
        info_line("run_plan(jobs=1) in-process: whole call", call, loop)
        per_step = (span - loop) / args.steps * 1000
        print(
            f"  per step beyond the bare process: {per_step:.2f} ms; recording after the steps: "
            f"{(call - span) * 1000:.0f} ms"
        )
        print("\nresults:")
        results = [verdict_line("git audit run --jobs 1 (wall)", cli, target, loop)]
        print(
            f"  (target = 2 x {loop:.3f} s + {fixed:.3f} s (status HEAD); ratio against the loop)"
        )
        if profiler:
            print("\nprofile of one in-process run_plan (top 25 by cumulative time):")
            pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative").print_stats(25)
        return finish(results)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
