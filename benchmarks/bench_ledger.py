"""Benchmark: finding the run for a tree in ledgers of 20,000 and 100,000 run commits.

The gate, ``run`` (carried evidence) and the hooks look up "the newest run of plan P for tree T"
through the SQLite index (``gitaudit.ledger.index``), never by walking the ledger (design §3).

Fixtures (cached, see ``_ledger_util.ledger_fixture``): a sealed one-step plan, one real passing
``git audit run`` for HEAD's tree, then 20,000 (and 100,000) generated signed run commits over
4,000 distinct workspace tree ids on ``refs/audit/runs/default``: HEAD's run is the deepest.
Everything below is measured for both; the lookup must stay flat.

Measured in one run:

* the first index build (``index.sync`` with no index file) -- informational;
* a warm lookup in-process (``index.lookup`` for a random known tree id, for HEAD's tree
  and for an unknown id): target <= 20 ms (median over the sample);
* the same lookup as a whole process (``python -c "..."``): informational, shown next to the
  baselines ``python -c pass`` (interpreter start-up) and ``git rev-parse refs/audit/runs/default``;
* the whole gate (``gate.judge.judge``) for HEAD, whose run is the oldest of the chain --
  informational;
* what every ``git audit run`` asks the index before its steps: which steps' last execution is
  unknown or interrupted, and which run each step's unchanged inputs carry: target <= 20 ms,
  flat (they read the rows that matter, not every step of every run);
* one more run appended, then the incremental index sync -- informational.

Run: ``.venv/bin/python benchmarks/bench_ledger.py [--lookups N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ledger_util import (
    PLAN,
    PYTHON,
    REF,
    RUNS,
    bench_env,
    checkout_fixture,
    finish,
    generate_runs,
    info_line,
    interleaved,
    ledger_fixture,
    quick,
    timed_run,
    verdict_line,
)

LOOKUP_TARGET = 0.020

WHOLE_PROCESS = """
import sys
from gitaudit.ledger import index
from gitaudit.git.repo import open_repo
repo = open_repo()
found = index.lookup(repo.git, repo.gitdir, sys.argv[1], sys.argv[2], "").any_contract
sys.exit(0 if found is not None else 1)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lookups", type=int, default=200, help="random tree ids looked up")
    parser.add_argument("--rounds", type=int, default=9, help="rounds of the process timings")
    args = parser.parse_args()
    results: list[bool] = []
    for runs in (2_000, 10_000) if quick() else (RUNS, 100_000):
        print(f"\n===== {runs:,} runs")
        results += one(runs, args)
    return finish(results)


def one(runs: int, args: argparse.Namespace) -> list[bool]:
    scratch = Path(tempfile.mkdtemp(prefix="gitaudit-bench-ledger-"))
    try:
        bench_env(scratch)
        fixture = ledger_fixture(runs)
        repo_path = checkout_fixture(fixture, scratch)
        ids: list[str] = json.loads((fixture / "tree_ids.json").read_text())
        head_tree = (fixture / "head_tree").read_text().strip()

        from gitaudit.git.repo import open_repo
        from gitaudit.ledger import index

        repo = open_repo(repo_path)
        print(f"ledger: {runs + 1} run commits on {REF}, {len(ids) + 1} distinct tree ids")
        print("\nindex build and lookups (in-process):")
        for name in ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm"):
            (repo.gitdir / "gitaudit" / name).unlink(missing_ok=True)
        start = time.perf_counter()
        index.sync(repo.git, repo.gitdir, PLAN)
        first_build = time.perf_counter() - start
        indexed = len(index.recent(repo.git, repo.gitdir, PLAN, runs + 10))
        if indexed != runs + 1:
            raise RuntimeError(f"the index holds {indexed} runs, expected {runs + 1}")
        info_line("first index build (index.sync, no index file)", first_build)

        rng = random.Random(1)
        sample = rng.sample(ids, min(args.lookups, len(ids)))
        _ = index.lookup(repo.git, repo.gitdir, PLAN, head_tree, "").any_contract  # warm-up
        times: list[float] = []
        for tree in [head_tree, *sample]:
            start = time.perf_counter()
            found = index.lookup(repo.git, repo.gitdir, PLAN, tree, "").any_contract
            times.append(time.perf_counter() - start)
            if found is None or found.tree != tree:
                raise RuntimeError(f"no run found for tree {tree}")
        start = time.perf_counter()
        missing = index.lookup(repo.git, repo.gitdir, PLAN, "f" * 40, "").any_contract
        miss_time = time.perf_counter() - start
        assert missing is None
        lookup = statistics.median(times)
        p95 = sorted(times)[int(len(times) * 0.95) - 1]

        # what every `git audit run` asks before its steps: which steps' last execution is
        # unknown, and which run each step's unchanged inputs carry (every step of every run
        # executed here: the rows these questions could have to read)
        from gitaudit.ledger.runs import read_run

        newest = read_run(repo.git, repo.git.references[REF].target)
        steps = {sid: "sha256:" + "0" * 64 for sid in newest.steps}
        asked: dict[str, list[float]] = {"unresolved": [], "attempts": [], "carry": []}
        for _ in range(args.rounds):
            start = time.perf_counter()
            index.tallies(repo.git, repo.gitdir, PLAN).unsettled()
            asked["unresolved"].append(time.perf_counter() - start)
            start = time.perf_counter()
            index.tallies(repo.git, repo.gitdir, PLAN).failures(newest.contract)
            asked["attempts"].append(time.perf_counter() - start)
            start = time.perf_counter()
            counted = index.tallies(repo.git, repo.gitdir, PLAN)
            _ = [counted.newest_with(sid, digest) for sid, digest in steps.items()]
            asked["carry"].append(time.perf_counter() - start)

        # The gate does more than the lookup: it also checks that the run found is on the
        # ledger. HEAD's run is the oldest of the chain here (generated runs came after it).
        # judge, as the commands call it: the first call records the ledger tip as seen (so the
        # next ones check no rewind from the fixture's older mark) and the confirmation.
        from gitaudit.gate.judge import judge

        judge(repo_for_gate := open_repo(repo_path), "HEAD")
        gate_times = []
        for _ in range(5):
            start = time.perf_counter()
            verdict = judge(repo_for_gate, "HEAD").verdict
            gate_times.append(time.perf_counter() - start)
            if verdict != "PASS":
                raise RuntimeError(f"the gate says {verdict} for HEAD")
        gate_head = statistics.median(gate_times)

        print("\nprocess timings (medians, interleaved):")
        medians = interleaved(
            {
                "python": lambda: timed_run([PYTHON, "-c", "pass"], repo_path),
                "rev-parse": lambda: timed_run(["git", "rev-parse", REF], repo_path),
                "whole": lambda: timed_run(
                    [PYTHON, "-c", WHOLE_PROCESS, PLAN, rng.choice(ids)], repo_path
                ),
            },
            args.rounds,
        )
        startup, rev_parse, whole = medians["python"], medians["rev-parse"], medians["whole"]
        info_line("baseline: python -c pass (interpreter start-up)", startup)
        info_line("baseline: git rev-parse refs/audit/runs/default", rev_parse)
        info_line(
            "whole-process lookup (python -c '...index.lookup')",
            whole,
            startup,
            f"= start-up + {(whole - startup) * 1000:.1f} ms",
        )

        print("\nincremental index sync after one more run:")
        generate_runs(repo_path, 1, 1, seed=7)
        start = time.perf_counter()
        index.sync(repo.git, repo.gitdir, PLAN)
        info_line("index.sync with 1 new run commit", time.perf_counter() - start)

        print("\nresults:")
        info_line("first index build", first_build, rev_parse)
        info_line("warm lookup, p95 over the sample", p95, rev_parse)
        info_line("warm lookup of an unknown tree", miss_time, rev_parse)
        info_line(
            f"gate judge(HEAD) in-process, run {runs:,} commits deep",
            gate_head,
            rev_parse,
            "(lookup + signature + ancestry checks)",
        )
        info_line(
            "whole-process lookup minus python start-up (info)",
            whole - startup,
            rev_parse,
            "(imports pygit2 + sqlite3 + gitaudit.ledger)",
        )
        results = [
            verdict_line(
                f"warm lookup in-process (median of {len(times)})", lookup, LOOKUP_TARGET, rev_parse
            ),
            verdict_line(
                "a run's question: steps whose last outcome is unknown",
                statistics.median(asked["unresolved"]),
                LOOKUP_TARGET,
                rev_parse,
            ),
            verdict_line(
                "a run's question: failed attempts under the contract",
                statistics.median(asked["attempts"]),
                LOOKUP_TARGET,
                rev_parse,
            ),
            verdict_line(
                f"a run's question: what {len(steps)} step(s) with unchanged inputs carry",
                statistics.median(asked["carry"]),
                LOOKUP_TARGET,
                rev_parse,
            ),
        ]
        print("  (ratios against git rev-parse refs/audit/runs/default)")
        return results
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
