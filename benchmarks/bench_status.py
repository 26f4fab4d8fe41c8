"""Benchmark: ``git audit status`` (the gate) on 50,000 files, with the matched run deep.

Fixtures (cached, ``_ledger_util.status_fixture``): the 50,000-file repository of
``_util.big_repo`` with a sealed one-step plan and one real passing ``git audit run`` for HEAD,
then 0, 20,000 or 100,000 generated runs of other trees on top of it: HEAD's run lies that many
commits deep, the worst case for the lookup's confirmation (the best case, the run at the tip,
is the 1-run ledger). Each benchmark run copies ``.git`` and hard-links the work tree (nothing
here writes it). One untimed round warms everything first (git's index refreshed, the lookup
index built, the confirmation remembered); the first ``status HEAD`` at each depth, on a cold
lookup index, is printed for the record.

Targets (medians of interleaved rounds, [min-max] beside; baseline ``git status --porcelain``
in the 1-run repository, measured in the same rounds):

* ``git audit status`` (the work tree, fingerprint included; the verdict memo answers, as it
  does after any ``status`` or passing ``run``) <= 1.5x ``git status``;
* ``git audit status HEAD`` with the run 20,000 and 100,000 commits deep <= 1.1x the same on the
  1-run ledger (flat in the ledger's depth).

For the record: the worst case of ``status`` beside it (the memo deleted before each call, so
the full gate judges the work tree), ``status HEAD`` itself against ``git status``, and the
fingerprint alone (``workspace_fingerprint`` in a fresh ``python -c``). ``--profile`` prints a
cProfile of one ``status`` (work tree).

Run: ``.venv/bin/python benchmarks/bench_status.py [--rounds R] [--profile]``
(``GITAUDIT_BENCH_QUICK=1``: 5,000 files and 2,000 / 10,000 runs).
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ledger_util import (
    GIT_AUDIT,
    PYTHON,
    checkout_fixture,
    finish,
    info_line,
    interleaved,
    quick,
    status_fixture,
    timed_run,
    verdict_line,
)

WORKTREE_TARGET = 1.5
DEPTH_TARGET = 1.1

FINGERPRINT = """
from pathlib import Path
from gitaudit.git.fingerprint import workspace_fingerprint
print(workspace_fingerprint(Path.cwd()).tree)
"""


def _without_memo(repo: Path, env: dict[str, str]) -> float:
    """``git audit status`` of the work tree with no verdict memo (deleted first, untimed)."""
    (repo / ".git" / "gitaudit" / "memo.json").unlink(missing_ok=True)
    return timed_run([GIT_AUDIT, "status"], repo, env=env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds (medians)")
    parser.add_argument("--profile", action="store_true", help="cProfile one `status`")
    args = parser.parse_args()
    files = 5_000 if quick() else 50_000
    depths = (0, 2_000, 10_000) if quick() else (0, 20_000, 100_000)

    scratch = Path(tempfile.mkdtemp(prefix="gitaudit-bench-status-"))
    try:
        repos: dict[int, tuple[Path, dict[str, str]]] = {}
        first: dict[int, float] = {}
        for depth in depths:
            fixture = status_fixture(files, depth)
            start = time.perf_counter()
            repo = checkout_fixture(fixture, scratch / f"d{depth}", link_worktree=True)
            env = dict(os.environ)
            print(
                f"{files} files, HEAD's run {depth} runs deep: copied in "
                f"{time.perf_counter() - start:.1f}s"
            )
            timed_run(["git", "status", "--porcelain"], repo, env=env)
            head_tree = (fixture / "head_tree").read_text().strip()
            got = subprocess.run(
                [PYTHON, "-c", FINGERPRINT],
                cwd=repo,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            ).stdout.strip()
            if got != head_tree:
                raise RuntimeError(f"the work tree is not clean: {got} != {head_tree}")
            first[depth] = timed_run([GIT_AUDIT, "status", "HEAD"], repo, env=env)
            repos[depth] = (repo, env)

        shallow, env0 = repos[0]
        commands: dict[str, Callable[[], object]] = {
            "git-status": lambda: timed_run(["git", "status", "--porcelain"], shallow, env=env0),
            "fingerprint": lambda: timed_run([PYTHON, "-c", FINGERPRINT], shallow, env=env0),
            "status-full": functools.partial(_without_memo, shallow, env0),
            "status": lambda: timed_run([GIT_AUDIT, "status"], shallow, env=env0),
        }
        for depth, (repo, env) in repos.items():
            commands[f"head-{depth}"] = functools.partial(
                timed_run, [GIT_AUDIT, "status", "HEAD"], repo, env=env
            )
        medians = interleaved(commands, args.rounds)
        base = medians["git-status"]
        flat = medians["head-0"]
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"\nmedians of {args.rounds} interleaved rounds, [min-max] (load {load}):")
        info_line("baseline: git status --porcelain", base)
        info_line(
            "fingerprint alone (python -c workspace_fingerprint)", medians["fingerprint"], base
        )
        info_line(
            "git audit status (work tree), no memo: the full gate", medians["status-full"], base
        )
        for depth in depths:
            info_line(
                f"git audit status HEAD, run {depth:,} deep",
                medians[f"head-{depth}"],
                base,
                f"(first, cold lookup index: {first[depth]:.2f} s)",
            )
        print("\nresults:")
        results = [
            verdict_line(
                "git audit status (work tree) vs git status",
                medians["status"],
                WORKTREE_TARGET * base,
                base,
            )
        ]
        for depth in depths[1:]:
            results.append(
                verdict_line(
                    f"status HEAD, run {depth:,} deep vs the 1-run ledger",
                    medians[f"head-{depth}"],
                    DEPTH_TARGET * flat,
                    flat,
                )
            )
        print(
            f"  (work tree: target {WORKTREE_TARGET}x git status; depth: target {DEPTH_TARGET}x "
            "status HEAD on the 1-run ledger)"
        )
        if args.profile:
            proc = subprocess.run(
                [PYTHON, "-m", "cProfile", "-s", "cumulative", "-m", "gitaudit", "status"],
                cwd=shallow,
                env=env0,
                capture_output=True,
                text=True,
                check=False,
            )
            print("\ncProfile of one `git audit status` (top 35 cumulative):")
            print("\n".join(proc.stdout.splitlines()[:45]))
        return finish(results)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
