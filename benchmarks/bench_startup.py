"""Benchmark: the command line's start-up: ``--version`` and ``-h`` against a bare interpreter.

``git-audit --version`` and ``git-audit -h`` answer from ``gitaudit/cli/entry.py`` without
importing typer or pygit2 (the help is typer's own text, pre-rendered by ``make manpage`` and
served only where typer would print the same bytes). Commands that go through typer are timed
beside them, for the record (``docs/architecture.md`` quotes these numbers).

Targets (medians of interleaved rounds, [min-max] beside): ``--version`` and ``-h`` <= 50 ms
wall each. Baseline: ``python -c pass`` (interpreter start-up), same rounds.

Run: ``.venv/bin/python benchmarks/bench_startup.py [--rounds R]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ledger_util import (
    GIT_AUDIT,
    PYTHON,
    audit,
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

TARGET = 0.050


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds (medians)")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="gitaudit-bench-startup-"))
    try:
        bench_env(scratch)
        os.environ.pop("COLUMNS", None)
        repo = scratch / "repo"
        init_audited_repo(repo, plan_doc(run_steps(1, ["true"])))
        audit(repo, "run")
        medians = interleaved(
            {
                "python": lambda: timed_run([PYTHON, "-c", "pass"], repo),
                "version": lambda: timed_run([GIT_AUDIT, "--version"], repo),
                "help": lambda: timed_run([GIT_AUDIT, "-h"], repo),
                "status": lambda: timed_run([GIT_AUDIT, "status", "HEAD"], repo),
                "log": lambda: timed_run([GIT_AUDIT, "log"], repo),
                "sub-help": lambda: timed_run([GIT_AUDIT, "plan", "-h"], repo),
            },
            args.rounds,
        )
        base = medians["python"]
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"start-up, medians of {args.rounds} interleaved rounds, [min-max] (load {load}):")
        info_line("baseline: python -c pass", base)
        info_line("git audit status HEAD (fast path, 1-run ledger)", medians["status"], base)
        info_line("git audit log (through typer)", medians["log"], base)
        info_line("git audit plan -h (through typer)", medians["sub-help"], base)
        print("\nresults:")
        results = [
            verdict_line("git-audit --version", medians["version"], TARGET, base),
            verdict_line("git-audit -h", medians["help"], TARGET, base),
        ]
        return finish(results)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
