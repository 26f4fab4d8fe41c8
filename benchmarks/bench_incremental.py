"""Benchmark: incremental evidence. After one file changes, only the affected step re-runs.

A sealed plan of 20 steps ``s00`` .. ``s19``, each with its own input folder
(``"inputs": ["pkgNN/**"]``), one output (``pkgNN/src.txt`` exists) and one behavioural check that
takes a fixed time (``sleep 0.2``), plus a final step ``all`` that depends on all of them
(requiring each one's output) with the same check.

Measured in one run:

1. a full ``git audit run`` (every step executes);
2. one file in ``pkg07/`` changes (committed), then ``git audit run`` again, three times with a
   new change each time (the median is judged);
3. for the record: ``git audit run`` with nothing changed (every step carried: the fixed cost of a
   run), and the incremental run in-process (``run_plan``, no interpreter start-up or CLI).

Each incremental run's ``run.json`` must show ``s07`` and ``all`` as ``passed`` (executed) and every
other step as ``carried``, and its wall time must be <= 15% of the full run's.

The check is ``sleep`` rather than ``python3 -c "import time; time.sleep(0.2)"``: a fixed time on
every machine (a ``python3`` that is a pyenv shim takes 0.3 s more to start than to sleep). Steps
run with ``--jobs 1`` by default: the criterion compares work done, and with J parallel jobs the
full run shrinks about J-fold while the incremental run (a two-step dependency chain) cannot, so
the ratio would measure the number of cores instead. ``--jobs N`` measures that case anyway.

``--profile`` runs one more incremental ``git audit run`` under cProfile and prints where its time
goes (imports, CLI, run_plan and its parts).

Run: ``.venv/bin/python benchmarks/bench_incremental.py [--steps N] [--sleep S] [--jobs J]``.
Exit 0 on PASS.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ledger_util import GIT_AUDIT, PLAN, bench_env, init_audited_repo, ms, timed_run
from _util import git

TARGET_RATIO = 0.15
CHANGED = 7  # the folder whose file changes between the runs
ROUNDS = 3  # incremental runs (median)


def plan_doc(steps: int, sleep: float) -> dict[str, Any]:
    check = {"type": "run", "argv": ["sleep", f"{sleep:g}"]}
    doc_steps: list[dict[str, Any]] = []
    for i in range(steps):
        src = {"type": "file_exists", "path": f"pkg{i:02d}/src.txt"}
        doc_steps.append(
            {
                "id": f"s{i:02d}",
                "title": f"package {i:02d}",
                "depends_on": [],
                "covers": ["REQ-001"],
                "inputs": [f"pkg{i:02d}/**"],
                "verify": [check],
                "outputs": [{"name": "src", "verify": [src]}],
            }
        )
    doc_steps.append(
        {
            "id": "all",
            "title": "every package together",
            "depends_on": [f"s{i:02d}" for i in range(steps)],
            "requires_outputs": [{"step": f"s{i:02d}", "name": "src"} for i in range(steps)],
            "covers": ["REQ-001"],
            "inputs": ["pkg*/**"],
            "verify": [check],
        }
    )
    return {
        "task": "incremental evidence benchmark",
        "requirements": [{"id": "REQ-001", "description": "every package builds"}],
        "steps": doc_steps,
    }


def build_repo(repo: Path, steps: int, sleep: float) -> None:
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for i in range(steps):
        folder = repo / f"pkg{i:02d}"
        folder.mkdir()
        (folder / "src.txt").write_text(f"package {i}\n")
        (folder / "notes.md").write_text(f"notes for package {i}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "packages")
    init_audited_repo(repo, plan_doc(steps, sleep), fresh=False)


def run_doc(repo: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(git(repo, "show", f"refs/audit/runs/{PLAN}:run.json"))
    return doc


def by_status(doc: dict[str, Any], status: str) -> list[str]:
    return sorted(sid for sid, entry in doc["steps"].items() if entry["status"] == status)


def check_seconds(doc: dict[str, Any]) -> float:
    """Seconds spent in the checks of the executed steps (from run.json)."""
    return sum(float(e.get("duration") or 0) for e in doc["steps"].values())


def change(repo: Path, folder: int, note: str) -> None:
    path = repo / f"pkg{folder:02d}" / "src.txt"
    path.write_text(path.read_text() + f"{note}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", f"change pkg{folder:02d}: {note}")


def in_process_run(repo: Path, jobs: int) -> tuple[float, float, list[str]]:
    """One incremental run through ``run_plan`` in this process: (call, step span, executed)."""
    from gitaudit.crypto.keystore import keys_dir, load_signer
    from gitaudit.git.repo import open_repo
    from gitaudit.run.recorder import run_plan

    signer = load_signer(keys_dir() / "default")
    start = time.perf_counter()
    recorded = run_plan(open_repo(repo), PLAN, signer, jobs=jobs)
    call = time.perf_counter() - start
    span = recorded.outcome.finished - recorded.outcome.started
    return call, span, by_status(dict(recorded.doc), "passed")


def profile_cli(repo: Path, jobs: int) -> str:
    """cProfile of one ``git audit run`` (cumulative, gitaudit and import lines)."""
    argv = [sys.executable, "-m", "cProfile", "-s", "cumulative", "-m", "gitaudit"]
    proc = subprocess.run(
        [*argv, "run", "--jobs", str(jobs)],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = proc.stdout.splitlines()
    head = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return "\n".join(lines[head : head + 60])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="independent steps (>= 8)")
    parser.add_argument("--sleep", type=float, default=0.2, help="seconds each check takes")
    parser.add_argument("--jobs", type=int, default=1, help="parallel jobs for every run")
    parser.add_argument("--profile", action="store_true", help="cProfile one more CLI run")
    args = parser.parse_args()
    if args.steps < CHANGED + 1:
        parser.error(f"--steps must be at least {CHANGED + 1}")

    scratch = Path(tempfile.mkdtemp(prefix="gitaudit-bench-incremental-"))
    try:
        bench_env(scratch)
        repo = scratch / "repo"
        build_repo(repo, args.steps, args.sleep)
        print(
            f"plan: {args.steps} steps with inputs pkgNN/** plus one step depending on all; "
            f"each check is `sleep {args.sleep:g}`; --jobs {args.jobs}"
        )
        run = [GIT_AUDIT, "run", "--jobs", str(args.jobs)]
        expected = sorted([f"s{CHANGED:02d}", "all"])

        full = timed_run(run, repo)
        first = run_doc(repo)
        if first["verdict"] != "PASS" or by_status(first, "passed") != sorted(first["steps"]):
            raise RuntimeError(f"the full run is not a full PASS: {first['reasons']}")

        times: list[float] = []
        executed_ok = True
        docs = []
        for n in range(ROUNDS):
            change(repo, CHANGED, f"change {n}")
            times.append(timed_run(run, repo))
            doc = run_doc(repo)
            docs.append(doc)
            if doc["verdict"] != "PASS":
                raise RuntimeError(f"incremental run {n} is {doc['verdict']}: {doc['reasons']}")
            carried = by_status(doc, "carried")
            executed_ok &= by_status(doc, "passed") == expected
            executed_ok &= len(carried) + len(expected) == len(doc["steps"])
        incremental = statistics.median(times)
        last = docs[-1]

        noop = timed_run(run, repo)  # nothing changed: everything is carried
        noop_doc = run_doc(repo)
        change(repo, CHANGED, "in-process")
        call, span, in_executed = in_process_run(repo, args.jobs)
        executed_ok &= in_executed == expected

        ratio = incremental / full
        print("\nfor the record:")
        print(
            f"  full run: {len(first['steps'])} steps executed, checks {check_seconds(first):.2f}s"
        )
        print(
            f"  incremental runs (wall)                          {', '.join(ms(t) for t in times)}"
        )
        print(
            f"  incremental run: executed {', '.join(by_status(last, 'passed'))}; carried "
            f"{len(by_status(last, 'carried'))} steps; checks {check_seconds(last):.2f}s"
        )
        print(
            f"  no-op run (nothing changed, {len(by_status(noop_doc, 'carried'))} carried, wall) "
            f"{ms(noop)}   <- fixed cost of `git audit run`"
        )
        print(
            f"  in-process run_plan, incremental               {ms(call)}  "
            f"(steps {ms(span).strip()}, executed {', '.join(in_executed)})"
        )
        print("\nresults:")
        print(f"  full run (git audit run, wall)                   {ms(full)}")
        print(f"  incremental run (git audit run, wall, median)    {ms(incremental)}")
        print(f"  ratio incremental / full                         {ratio * 100:8.1f} %")
        ok_time = ratio <= TARGET_RATIO
        print(
            f"  only the affected step and its dependant executed ({', '.join(expected)}): "
            f"{'PASS' if executed_ok else 'FAIL'}"
        )
        print(
            f"  incremental run <= {TARGET_RATIO:.0%} of the full run: {ratio:.1%} "
            f"{'PASS' if ok_time else 'FAIL'}"
        )
        if args.profile:
            change(repo, CHANGED, "profiled")
            print("\ncProfile of one incremental `git audit run` (cumulative):")
            print(profile_cli(repo, args.jobs))
        ok = executed_ok and ok_time
        print(f"\n{'PASS' if ok else 'FAIL'}")
        return 0 if ok else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
