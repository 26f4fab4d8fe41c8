"""Benchmark: incremental evidence on 50,000 files. After one file changes, only the affected step
re-runs, and the run costs a fraction of a full one.

Fixture (cached, ``_ledger_util.plan_fixture``): the 50,000-file repository of ``_util.big_repo``
with a sealed plan of 20 steps ``s00`` .. ``s19``, each with its own input folder of the tree
(``"inputs": ["dNN/sMM/**"]``), one output (a file of that folder exists) and one behavioural
check that takes a fixed time (``sleep 0.2``), plus a final step ``all`` that depends on all of
them (requiring each one's output) over the whole tree (``"inputs": ["d*/**"]``) with the same
check; one real run recorded.

Measured in R interleaved rounds (medians, [min-max] beside):

1. one file in ``s07``'s folder changes (committed), then ``git audit run``: the incremental
   run; its ``run.json`` must show ``s07`` and ``all`` executed (``passed``) and every other step
   carried;
2. ``git audit run --fresh``: the full run on the same checkout (every step executes);
3. for the record: ``git audit run`` with nothing changed (every step carried: the fixed cost of a
   run on 50,000 files).

Target: incremental <= 15% of the full run. The check is ``sleep`` rather than a ``python3``: a
fixed time on every machine. Steps run with ``--jobs 1`` by default: the criterion compares work
done, and with J parallel jobs the full run shrinks about J-fold while the incremental run (a
two-step dependency chain) cannot, so the ratio would measure the number of cores instead.

``--profile`` runs one more incremental ``git audit run`` under cProfile.

Run: ``.venv/bin/python benchmarks/bench_incremental.py [--rounds R] [--sleep S] [--jobs J]``
(``GITAUDIT_BENCH_QUICK=1``: 5,000 files). Exit 0 on PASS.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ledger_util import (
    GIT_AUDIT,
    PLAN,
    checkout_fixture,
    finish,
    info_line,
    interleaved,
    ms,
    plan_fixture,
    quick,
    timed_run,
    verdict_line,
)
from _util import git

TARGET_RATIO = 0.15
STEPS = 20
CHANGED = 7  # the step whose folder changes between the runs
FOLDERS = [f"d{d % 20:02d}/s{d // 20:02d}" for d in range(400)]  # _util.big_repo's layout


def folder(i: int) -> str:
    return FOLDERS[i * 20 + i % 20]


def plan_doc(sleep: float) -> dict[str, Any]:
    check = {"type": "run", "argv": ["sleep", f"{sleep:g}"]}
    doc_steps: list[dict[str, Any]] = []
    for i in range(STEPS):
        src = {"type": "file_exists", "path": f"{folder(i)}/file0000.txt"}
        doc_steps.append(
            {
                "id": f"s{i:02d}",
                "title": f"package {i:02d}",
                "depends_on": [],
                "covers": ["REQ-001"],
                "inputs": [f"{folder(i)}/**"],
                "verify": [check],
                "outputs": [{"name": "src", "verify": [src]}],
            }
        )
    doc_steps.append(
        {
            "id": "all",
            "title": "every package together",
            "depends_on": [f"s{i:02d}" for i in range(STEPS)],
            "requires_outputs": [{"step": f"s{i:02d}", "name": "src"} for i in range(STEPS)],
            "covers": ["REQ-001"],
            "inputs": ["d*/**"],
            "verify": [check],
        }
    )
    return {
        "task": "incremental evidence benchmark",
        "requirements": [{"id": "REQ-001", "description": "every package builds"}],
        "steps": doc_steps,
    }


def run_doc(repo: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(git(repo, "show", f"refs/audit/runs/{PLAN}:run.json"))
    return doc


def by_status(doc: dict[str, Any], status: str) -> list[str]:
    return sorted(sid for sid, entry in doc["steps"].items() if entry["status"] == status)


def check_seconds(doc: dict[str, Any]) -> float:
    """Seconds spent in the checks of the executed steps (from run.json)."""
    return sum(float(e.get("duration") or 0) for e in doc["steps"].values())


def change(repo: Path, note: str) -> None:
    path = repo / folder(CHANGED) / "file0001.txt"
    path.write_text(path.read_text() + f"{note}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", f"change {folder(CHANGED)}: {note}")


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
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (medians)")
    parser.add_argument("--sleep", type=float, default=0.2, help="seconds each check takes")
    parser.add_argument("--jobs", type=int, default=1, help="parallel jobs for every run")
    parser.add_argument("--profile", action="store_true", help="cProfile one more CLI run")
    args = parser.parse_args()
    files = 5_000 if quick() else 50_000

    scratch = Path(tempfile.mkdtemp(prefix="gitaudit-bench-incremental-"))
    try:
        fixture = plan_fixture(f"incremental-{args.sleep:g}", plan_doc(args.sleep), files)
        repo = checkout_fixture(fixture, scratch)  # the work tree is written: a real copy
        print(
            f"{files} files; plan: {STEPS} steps with inputs dNN/sMM/** plus one step over "
            f"d*/** depending on all; each check is `sleep {args.sleep:g}`; --jobs {args.jobs}"
        )
        run = [GIT_AUDIT, "run", "--jobs", str(args.jobs)]
        expected = sorted([f"s{CHANGED:02d}", "all"])
        timed_run(run, repo)  # the private checkout brought up to date, everything carried
        edits = iter(range(1_000_000))
        docs: dict[str, list[dict[str, Any]]] = {"incremental": [], "full": []}

        def incremental() -> float:
            change(repo, f"change {next(edits)}")
            seconds = timed_run(run, repo)
            docs["incremental"].append(run_doc(repo))
            return seconds

        def full() -> float:
            seconds = timed_run([*run, "--fresh"], repo)
            docs["full"].append(run_doc(repo))
            return seconds

        medians = interleaved(
            {"incremental": incremental, "full": full, "noop": lambda: timed_run(run, repo)},
            args.rounds,
            warmup=0,
        )
        executed_ok = True
        for doc in docs["incremental"]:
            if doc["verdict"] != "PASS":
                raise RuntimeError(f"incremental run is {doc['verdict']}: {doc['reasons']}")
            executed_ok &= by_status(doc, "passed") == expected
            executed_ok &= len(by_status(doc, "carried")) + len(expected) == len(doc["steps"])
        for doc in docs["full"]:
            if doc["verdict"] != "PASS" or by_status(doc, "passed") != sorted(doc["steps"]):
                raise RuntimeError(f"the full run is not a full PASS: {doc['reasons']}")
        change(repo, "in-process")
        call, span, in_executed = in_process_run(repo, args.jobs)
        executed_ok &= in_executed == expected
        inc, whole = medians["incremental"], medians["full"]
        last = docs["incremental"][-1]
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"\nmedians of {args.rounds} interleaved rounds, [min-max] (load {load}):")
        info_line("full run (git audit run --fresh, wall)", whole)
        info_line("no-op run (nothing changed, all carried)", medians["noop"], whole, "fixed cost")
        print(
            f"  full run: {len(docs['full'][-1]['steps'])} steps executed, checks "
            f"{check_seconds(docs['full'][-1]):.2f}s; incremental: executed "
            f"{', '.join(by_status(last, 'passed'))}, carried {len(by_status(last, 'carried'))}, "
            f"checks {check_seconds(last):.2f}s"
        )
        print(
            f"  in-process run_plan, incremental               {ms(call)}  "
            f"(steps {ms(span).strip()}, executed {', '.join(in_executed)})"
        )
        print("\nresults:")
        results = [
            verdict_line("incremental run (git audit run, wall)", inc, TARGET_RATIO * whole, whole)
        ]
        print(
            f"  only the affected step and its dependant executed ({', '.join(expected)}): "
            f"{'PASS' if executed_ok else 'FAIL'}"
        )
        print(f"  (target: {TARGET_RATIO:.0%} of the full run; ratio against the full run)")
        if args.profile:
            change(repo, "profiled")
            print("\ncProfile of one incremental `git audit run` (cumulative):")
            print(profile_cli(repo, args.jobs))
        return finish([*results, executed_ok])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
