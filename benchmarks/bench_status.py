"""Benchmark: ``git audit status`` (the gate) on 50,000 files and a 20,000-run ledger.

Fixture (cached, see ``_ledger_util.status_fixture``): the 50,000-file repository of
``_util.big_repo`` carrying the 20,001-run ledger of ``_ledger_util.ledger_fixture``, the sealed
plan committed, and a real passing ``git audit run`` for HEAD's tree on top. Each benchmark run
copies its ``.git`` and hard-links its work tree (nothing here writes the work tree); one warm-up
of every command follows, so the numbers are warm: git's index refreshed, the fingerprint's
private index and the lookup index built.

Targets (medians of R, all commands interleaved):

* ``git audit status HEAD`` (judges HEAD's tree, no work tree scan): <= 300 ms wall;
* ``git audit status`` (judges the work tree: fingerprint first): <= the fingerprint alone
  (``workspace_fingerprint`` in a fresh ``python -c`` process) + 300 ms.

Baseline: ``git status --porcelain``. For the record: ``python -c pass`` and ``git-audit
--version`` (the CLI's start-up). ``--profile`` prints a cProfile of one ``status HEAD``.

Run: ``.venv/bin/python benchmarks/bench_status.py [--rounds R] [--profile]``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ledger_util import (
    GIT_AUDIT,
    PYTHON,
    bench_env,
    checkout_fixture,
    finish,
    info_line,
    interleaved,
    status_fixture,
    timed_run,
    verdict_line,
)

HEAD_TARGET = 0.300
WORKTREE_MARGIN = 0.300

FINGERPRINT = """
from pathlib import Path
from gitaudit.git.fingerprint import workspace_fingerprint
print(workspace_fingerprint(Path.cwd()).tree)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (medians)")
    parser.add_argument("--profile", action="store_true", help="cProfile one `status HEAD`")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="gitaudit-bench-status-"))
    try:
        bench_env(scratch)
        fixture = status_fixture()
        start = time.perf_counter()
        repo = checkout_fixture(fixture, scratch, link_worktree=True)
        print(f"fixture copied in {time.perf_counter() - start:.1f}s: 50,000 files, 20,002 runs")
        head_tree = (fixture / "head_tree").read_text().strip()

        fingerprint = subprocess.run(
            [PYTHON, "-c", FINGERPRINT], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.strip()
        if fingerprint != head_tree:
            raise RuntimeError(f"the work tree is not clean: {fingerprint} != {head_tree}")

        commands = {
            "git-status": lambda: timed_run(["git", "status", "--porcelain"], repo),
            "python": lambda: timed_run([PYTHON, "-c", "pass"], repo),
            "version": lambda: timed_run([GIT_AUDIT, "--version"], repo),
            "fingerprint": lambda: timed_run([PYTHON, "-c", FINGERPRINT], repo),
            "status-head": lambda: timed_run([GIT_AUDIT, "status", "HEAD"], repo),
            "status-worktree": lambda: timed_run([GIT_AUDIT, "status"], repo),
        }
        medians = interleaved(commands, args.rounds)
        base = medians["git-status"]
        print("\nfor the record (medians, interleaved):")
        info_line("baseline: git status --porcelain", base)
        info_line("python -c pass (interpreter start-up)", medians["python"], base)
        info_line("git-audit --version (CLI start-up)", medians["version"], base)
        info_line(
            "fingerprint alone (python -c workspace_fingerprint)", medians["fingerprint"], base
        )
        print("\nresults:")
        results = [
            verdict_line("git audit status HEAD", medians["status-head"], HEAD_TARGET, base),
            verdict_line(
                "git audit status (work tree)",
                medians["status-worktree"],
                medians["fingerprint"] + WORKTREE_MARGIN,
                base,
            ),
        ]
        print(
            f"  (ratios against git status --porcelain; work-tree target = fingerprint "
            f"{medians['fingerprint'] * 1000:.0f} ms + 300 ms; beyond the fingerprint: "
            f"{(medians['status-worktree'] - medians['fingerprint']) * 1000:.0f} ms)"
        )
        if args.profile:
            proc = subprocess.run(
                [PYTHON, "-m", "cProfile", "-s", "cumulative", "-m", "gitaudit", "status", "HEAD"],
                cwd=repo,
                capture_output=True,
                text=True,
                check=False,
            )
            print("\ncProfile of one `git audit status HEAD` (top 35 cumulative):")
            print("\n".join(proc.stdout.splitlines()[:45]))
        return finish(results)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
