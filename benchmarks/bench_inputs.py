"""Benchmark: steps that declare ``inputs``, on 50,000 files: the input digests cost one pass.

Every step's input digest covers the files its ``inputs`` globs match (gitaudit/plan/inputs.py).
The gate computes them for the run it judges, and ``git audit run`` for every step it may carry.
Matching each step's globs against every file costs steps x files; here they must cost at most
one pass over the tree, whatever the number of steps.

Fixtures (cached, ``_ledger_util.plan_fixture``): the 50,000-file repository of
``_util.big_repo`` (400 folders ``dNN/sMM/`` of 125 files) with a sealed plan of N steps (default
100), each with the check ``true``, and one real passing ``git audit run`` for HEAD:

* best case: each step's ``inputs`` is its own folder (``dNN/sMM/**``): the gate reads only the
  folders named;
* worst case: each step's ``inputs`` is a glob with no literal prefix (``**/file0NNN.txt``), so
  every path of the tree has to be tried: one whole pass, shared by all the steps.

Targets (medians of interleaved rounds; [min-max] beside):

* ``git audit status`` (the work tree) with the best-case plan <= 1.6x ``git status --porcelain``
  (the verdict memo answers, as after any ``status`` or passing ``run``);
* the input digests in-process (``input_digests`` for HEAD's tree, a fresh reading each time:
  the process's own memo of them is cleared first), best and worst case, <= one pass over the
  tree: ``git ls-tree -r HEAD`` (git listing every entry, in C, into a pipe).

For the record: the worst cases beside, ``git audit status`` with no memo (deleted before each
call: the full gate, input digests included) for both plans; ``git audit status HEAD`` and the
no-op ``git audit run`` (nothing changed: every step carried) for both plans, ``git audit
status`` with the worst-case plan, and the digests as remembered in-process.

Run: ``.venv/bin/python benchmarks/bench_inputs.py [--steps N] [--rounds R] [--profile]``.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ledger_util import (
    GIT_AUDIT,
    checkout_fixture,
    finish,
    info_line,
    interleaved,
    plan_doc,
    plan_fixture,
    quick,
    timed_run,
    verdict_line,
)

STATUS_TARGET = 1.6
FOLDERS = [f"d{d % 20:02d}/s{d // 20:02d}" for d in range(400)]  # _util.big_repo's layout


def best_plan(steps: int) -> dict[str, Any]:
    return plan_doc(
        [
            {"id": f"s{i:03d}", "inputs": [f"{FOLDERS[i * 4 % 400]}/**"], "verify": [TRUE]}
            for i in range(steps)
        ]
    )


def worst_plan(steps: int) -> dict[str, Any]:
    return plan_doc(
        [
            {"id": f"s{i:03d}", "inputs": [f"**/file{i % 125:04d}.txt"], "verify": [TRUE]}
            for i in range(steps)
        ]
    )


TRUE = {"type": "run", "argv": ["true"]}


def digests_once(repo: Path, *, remembered: bool = False) -> float:
    """Seconds of one ``input_digests`` for HEAD's tree, with a fresh repository handle: a real
    reading of the tree (the digests this process remembers are forgotten first), or with
    *remembered* the in-process memo's answer (what a ``run`` and the gate judging its tree right
    after share)."""
    from gitaudit.git.repo import open_repo
    from gitaudit.plan import inputs
    from gitaudit.plan.catalog import check_worktree

    handle = open_repo(repo)
    (checked,) = check_worktree(repo, "default")
    plan = checked.require_valid()
    tree = str(handle.git.revparse_single("HEAD^{tree}").id)
    if remembered:
        inputs.input_digests(handle.git, plan, tree)
    else:
        inputs._DIGESTS.clear()  # a benchmark of the reading itself
    start = time.perf_counter()
    inputs.input_digests(handle.git, plan, tree)
    return time.perf_counter() - start


def _without_memo(repo: Path, env: dict[str, str], *args: str) -> float:
    """``git audit ARGS`` with no verdict memo (deleted first, untimed): the full gate."""
    (repo / ".git" / "gitaudit" / "memo.json").unlink(missing_ok=True)
    return timed_run([GIT_AUDIT, *args], repo, env=env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20 if quick() else 100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="cProfile one best-case status")
    args = parser.parse_args()
    files = 5_000 if quick() else 50_000

    scratch = Path(tempfile.mkdtemp(prefix="gitaudit-bench-inputs-"))
    try:
        best_fx = plan_fixture(f"inputs-best-{args.steps}", best_plan(args.steps), files)
        worst_fx = plan_fixture(f"inputs-worst-{args.steps}", worst_plan(args.steps), files)
        best = checkout_fixture(best_fx, scratch / "best", link_worktree=True)
        best_env = dict(os.environ)
        worst = checkout_fixture(worst_fx, scratch / "worst", link_worktree=True)
        worst_env = dict(os.environ)
        for repo, env in ((best, best_env), (worst, worst_env)):
            timed_run(["git", "status", "--porcelain"], repo, env=env)
            timed_run([GIT_AUDIT, "status", "HEAD"], repo, env=env)  # PASS
        print(
            f"{files} files; plans of {args.steps} steps with inputs (best: one folder each; "
            "worst: **/fileNNNN.txt each)"
        )

        medians = interleaved(
            {
                "git-status": lambda: timed_run(["git", "status", "--porcelain"], best),
                "ls-tree": lambda: timed_run(["git", "ls-tree", "-r", "HEAD"], best),
                "digests-best": lambda: digests_once(best),
                "digests-worst": lambda: digests_once(worst),
                "digests-remembered": lambda: digests_once(worst, remembered=True),
                "status-full-best": lambda: _without_memo(best, best_env, "status"),
                "status-full-worst": lambda: _without_memo(worst, worst_env, "status"),
                "status-best": lambda: timed_run([GIT_AUDIT, "status"], best, env=best_env),
                "status-head-best": lambda: timed_run(
                    [GIT_AUDIT, "status", "HEAD"], best, env=best_env
                ),
                "status-worst": lambda: timed_run([GIT_AUDIT, "status"], worst, env=worst_env),
                "run-best": lambda: timed_run([GIT_AUDIT, "run"], best, env=best_env),
                "run-worst": lambda: timed_run([GIT_AUDIT, "run"], worst, env=worst_env),
            },
            args.rounds,
        )
        base, tree_pass = medians["git-status"], medians["ls-tree"]
        print("\nbaselines (medians of interleaved rounds, [min-max]):")
        info_line("git status --porcelain", base)
        info_line("git ls-tree -r HEAD (one pass over the tree)", tree_pass, base)
        print("\nfor the record:")
        info_line("git audit status HEAD, best case", medians["status-head-best"], base)
        info_line("git audit status (work tree), worst case", medians["status-worst"], base)
        info_line("status (work tree), no memo, best case", medians["status-full-best"], base)
        info_line("status (work tree), no memo, worst case", medians["status-full-worst"], base)
        info_line(
            "input_digests remembered in-process, worst case",
            medians["digests-remembered"],
            tree_pass,
            "(x ls-tree)",
        )
        info_line("no-op git audit run (all carried), best case", medians["run-best"], base)
        info_line("no-op git audit run (all carried), worst case", medians["run-worst"], base)
        print("\nresults:")
        results = [
            verdict_line(
                "git audit status (work tree), best case",
                medians["status-best"],
                STATUS_TARGET * base,
                base,
            ),
            verdict_line(
                "input_digests in-process, best case",
                medians["digests-best"],
                tree_pass,
                tree_pass,
            ),
            verdict_line(
                "input_digests in-process, worst case",
                medians["digests-worst"],
                tree_pass,
                tree_pass,
            ),
        ]
        print(
            f"  (status against git status x {STATUS_TARGET}; digests against one pass over the "
            "tree, git ls-tree -r)"
        )
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            digests_once(worst)
            profiler.disable()
            print("\nprofile of input_digests, worst case (top 20 cumulative):")
            pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative").print_stats(20)
        return finish(results)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
