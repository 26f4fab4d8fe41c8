"""Benchmark: the pre-push hook on 50,000 files, cached and not, on shallow and deep ledgers.

The hook judges every pushed commit (``python -m gitaudit.hooks pre-push``, what the installed
shim runs). A PASS the gate reached in exactly the current state is re-served from the verdict
memo (``gitaudit.gate.memo``) with three git calls and no pygit2; anything else runs the full
gate. A passing ``git audit run`` ends by judging its tree as the hook will, so the push right
after a run is the cached case: no ``status`` in between.

Fixtures (cached): the 50,000-file repository of ``_util.big_repo`` with a sealed one-step plan
and HEAD's run 0, 20,000 or 100,000 runs deep (``_ledger_util.status_fixture``), and the same
repository with a plan of 100 steps that declare ``inputs`` (``bench_inputs``'s best case).

Rows (medians of interleaved rounds, [min-max] beside; baseline ``git status --porcelain`` in
the 50,000-file work tree, same rounds):

* best case, the push right after ``git audit run`` (each round runs it, untimed, then pushes):
  <= 0.5x ``git status``; a sanity check makes sure the hook did not import pygit2;
* worst case, no memo at all (deleted before each push: the full gate), with HEAD's run at the
  tip, 20,000 and 100,000 runs deep, and with the 100-step inputs plan: <= ``git status`` + 50 ms.
  The rows after a run use copies of their own (a run records HEAD's tree at the ledger's tip),
  and the benchmark fails unless these ledgers are where the fixtures left them, so the matched
  run really is that deep.
  The plan files keep the schema marks the gate left (``gitaudit.plan.known_valid``): a push of
  a PASS follows a run, which judged the same plan bytes.

For the record: the same without the schema marks either (plan bytes never judged in this
repository: the schema check and its validator's import, about 7 ms more), ``python -c pass``
and the installed shim ``.git/hooks/pre-push`` (sh + the same entry point). At the end
``python -X importtime`` of one uncached hook lists its ten largest imports on stderr.

Run: ``.venv/bin/python benchmarks/bench_hooks.py [--rounds R] [--profile]``
(``GITAUDIT_BENCH_QUICK=1``: 5,000 files, 2,000 / 10,000 runs, 20 input steps).
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ledger_util import (
    GIT_AUDIT,
    PYTHON,
    REF,
    ZERO,
    checkout_fixture,
    finish,
    info_line,
    interleaved,
    plan_fixture,
    quick,
    status_fixture,
    timed_run,
    verdict_line,
)
from _util import git
from bench_inputs import best_plan

CACHED_TARGET = 0.5  # x git status
UNCACHED_MARGIN = 0.050  # s beyond git status
HOOK = [PYTHON, "-m", "gitaudit.hooks", "pre-push", "origin", "x"]


def push_line(repo: Path, rev: str = "HEAD") -> str:
    sha = git(repo, "rev-parse", rev).strip()
    return f"refs/heads/main {sha} refs/heads/main {ZERO}\n"


def forget(repo: Path, *, marks: bool = False) -> None:
    """Drop the verdict memo (and, with *marks*, the plan files' schema marks as well)."""
    (repo / ".git" / "gitaudit" / "memo.json").unlink(missing_ok=True)
    if marks:
        (repo / ".git" / "gitaudit" / "valid-plans").unlink(missing_ok=True)


def imports(repo: Path, stdin: str, env: dict[str, str]) -> list[tuple[int, int, str]]:
    """(cumulative us, self us, module) of every import one hook process makes."""
    proc = subprocess.run(
        [PYTHON, "-X", "importtime", *HOOK[1:]],
        cwd=repo,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, self_us, cumulative_us, name = (
            p.strip() for p in line.replace("import time:", "|").split("|")
        )
        rows.append((int(cumulative_us), int(self_us), name))
    rows.sort(reverse=True)
    return rows


def _copies(
    scratch: Path, files: int, depths: tuple[int, ...], steps: int
) -> dict[str, tuple[Path, dict[str, str]]]:
    """A checkout of each fixture (and its environment) by row name. The rows after a run get
    copies of their own: a run records HEAD's tree at the tip, and the full gate's rows must
    keep the matched run as deep as the fixture made it."""
    repos: dict[str, tuple[Path, dict[str, str]]] = {}
    for depth in depths:
        fixture = status_fixture(files, depth)
        for row in ("deep", "run") if depth in (0, depths[-1]) else ("deep",):
            repo = checkout_fixture(fixture, scratch / f"{row}{depth}", link_worktree=True)
            repos[f"{row}-{depth}"] = (repo, dict(os.environ))
    fixture = plan_fixture(f"inputs-best-{steps}", best_plan(steps), files)
    for row in ("inputs", "run-inputs"):
        repo = checkout_fixture(fixture, scratch / row, link_worktree=True)
        repos[row] = (repo, dict(os.environ))
    return repos


def _still_deep(
    repos: dict[str, tuple[Path, dict[str, str]]], tips: dict[str, str], names: list[str]
) -> None:
    """RuntimeError unless the runs ref of each of *names* is where it was: no run moved it,
    so the matched run is as deep as the fixture made it."""
    for name in names:
        if git(repos[name][0], "rev-parse", REF) != tips[name]:
            raise RuntimeError(f"{name}: the runs ref moved, so its matched run is not deep")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds (medians)")
    parser.add_argument("--profile", action="store_true", help="cProfile one uncached hook")
    args = parser.parse_args()
    files = 5_000 if quick() else 50_000
    depths = (0, 2_000, 10_000) if quick() else (0, 20_000, 100_000)
    steps = 20 if quick() else 100

    scratch = Path(tempfile.mkdtemp(prefix="gitaudit-bench-hooks-"))
    try:
        repos = _copies(scratch, files, depths, steps)
        tips = {name: git(repo, "rev-parse", REF) for name, (repo, _) in repos.items()}
        lines = {name: push_line(repo) for name, (repo, _) in repos.items()}
        for repo, env in repos.values():
            if not (repo / ".git" / "hooks" / "pre-push").exists():
                timed_run([GIT_AUDIT, "hooks", "install"], repo, env=env)
            timed_run(["git", "status", "--porcelain"], repo, env=env)
            timed_run([GIT_AUDIT, "status", "HEAD"], repo, env=env)  # PASS; warms the caches
            forget(repo)
        shallow, env0 = repos["deep-0"]
        timed_run(HOOK, shallow, stdin=push_line(shallow, "HEAD~1"), expect=1, env=env0)

        def after_run(name: str) -> float:
            repo, env = repos[f"run-{name.removeprefix('deep-')}"]
            timed_run([GIT_AUDIT, "run"], repo, env=env)  # untimed: refreshes the memo
            return timed_run(HOOK, repo, stdin=lines[name], env=env)

        def uncached(name: str, *, marks: bool = False) -> float:
            repo, env = repos[name]
            forget(repo, marks=marks)
            return timed_run(HOOK, repo, stdin=lines[name], env=env)

        served = True  # the push right after a run takes the memo's path (no pygit2)
        for name in ("run-0", f"run-{depths[-1]}"):
            repo, env = repos[name]
            timed_run([GIT_AUDIT, "run"], repo, env=env)
            if any(n.strip() == "pygit2" for _, _, n in imports(repo, lines[name], env)):
                print(f"  {name}: the push right after a run was NOT served from the memo")
                served = False

        shim = ["./.git/hooks/pre-push", "origin", "x"]
        commands: dict[str, Callable[[], object]] = {
            "git-status": lambda: timed_run(["git", "status", "--porcelain"], shallow, env=env0),
            "python": lambda: timed_run([PYTHON, "-c", "pass"], shallow, env=env0),
            "shim": lambda: timed_run(shim, shallow, stdin=lines["deep-0"], env=env0),
            "after-run-0": lambda: after_run("deep-0"),
            f"after-run-{depths[-1]}": lambda: after_run(f"deep-{depths[-1]}"),
            "after-run-inputs": lambda: after_run("inputs"),
            **{f"uncached-{d}": functools.partial(uncached, f"deep-{d}") for d in depths},
            "uncached-inputs": lambda: uncached("inputs"),
            "unmarked-0": lambda: uncached("deep-0", marks=True),
        }
        medians = interleaved(commands, args.rounds)
        _still_deep(repos, tips, [*(f"deep-{d}" for d in depths), "inputs"])
        base = medians["git-status"]
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"pre-push for a passing commit, {files} files (load {load}):")
        info_line("baseline: git status --porcelain", base)
        info_line("python -c pass (interpreter start-up)", medians["python"], base)
        info_line("installed shim .git/hooks/pre-push (memo)", medians["shim"], base)
        info_line(
            "no memo and no schema mark (plan bytes never judged here)",
            medians["unmarked-0"],
            base,
        )
        print("\nresults:")
        results = [
            verdict_line(
                f"right after git audit run, run {d:,} deep (memo)",
                medians[f"after-run-{d}"],
                CACHED_TARGET * base,
                base,
            )
            for d in (0, depths[-1])
        ]
        results.append(
            verdict_line(
                f"right after git audit run, {steps} input steps (memo)",
                medians["after-run-inputs"],
                CACHED_TARGET * base,
                base,
            )
        )
        for d in depths:
            results.append(
                verdict_line(
                    f"no memo (full gate), run {d:,} deep",
                    medians[f"uncached-{d}"],
                    base + UNCACHED_MARGIN,
                    base,
                )
            )
        results.append(
            verdict_line(
                f"no memo (full gate), {steps} input steps",
                medians["uncached-inputs"],
                base + UNCACHED_MARGIN,
                base,
            )
        )
        results.append(served)
        print(f"  the push right after a run takes the memo's path: {'PASS' if served else 'FAIL'}")
        print(
            f"  (memo: target {CACHED_TARGET}x git status; no memo: git status + "
            f"{UNCACHED_MARGIN * 1000:.0f} ms)"
        )
        if args.profile:
            forget(shallow)
            proc = subprocess.run(
                [PYTHON, "-m", "cProfile", "-s", "cumulative", *HOOK[1:]],
                cwd=shallow,
                input=lines["deep-0"],
                capture_output=True,
                text=True,
                check=False,
                env=env0,
            )
            print("\ncProfile of one uncached pre-push process, top 30 cumulative:")
            print("\n".join(proc.stdout.splitlines()[:38]))
        code = finish(results)
        forget(shallow)
        print("\npython -X importtime pre-push (uncached): top 10 cumulative", file=sys.stderr)
        for c, s, n in imports(shallow, lines["deep-0"], env0)[:10]:
            print(f"  {c / 1000:8.1f} ms cumulative {s / 1000:7.1f} ms self  {n}", file=sys.stderr)
        return code
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
