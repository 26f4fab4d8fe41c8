"""Benchmark: the pre-push hook for a passing commit, against interpreter start-up.

Design §6: hooks call back into the package through a lean entry point so that their latency
stays near the interpreter's start-up. Target: ``python -m gitaudit.hooks pre-push origin x``
with one pre-push stdin line for HEAD (``refs/heads/main <sha> refs/heads/main <zero>``) takes
<= 150 ms wall; baseline ``python -c pass``.

A push normally follows a judgement of the same commit: ``git audit status HEAD``, or the
commit-msg hook that judged the staged tree when the commit was made. The gate remembers each
PASS in the verdict memo (``gitaudit.gate.memo``: keyed by the exact state of the audit refs, the
marks and the configuration, authenticated with a key kept beside the signing keys), and the
hook re-serves it with three git calls and without importing pygit2. The target rows time that
path (a sanity check makes sure pygit2 is not imported). The cold rows delete the memo before
every call, so the hook runs the full gate: they are printed for information.

Two client repositories, both with a passing run for HEAD and the hooks installed by
``git audit init``: a fresh one (one run in its ledger) and a copy of the cached 20,000-run
ledger fixture (``_ledger_util.ledger_fixture``; its lookup index warmed first; the run for
HEAD lies under 20,000 newer runs of other trees, the worst case for the lookup's
confirmation). For the real picture the installed shim ``.git/hooks/pre-push`` is timed too (sh +
exec of the same entry point). A sanity check first makes sure the hook does judge: pushing the
initial commit (no plan, no evidence) must be refused.

At the end ``python -X importtime -m gitaudit.hooks pre-push`` is run once on the cold path and
its ten largest cumulative imports go to stderr (informational). ``--profile`` also prints a
cProfile of one cold hook process.

Run: ``.venv/bin/python benchmarks/bench_hooks.py [--rounds R] [--profile]``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ledger_util import (
    PYTHON,
    ZERO,
    audit,
    bench_env,
    checkout_fixture,
    finish,
    info_line,
    init_audited_repo,
    interleaved,
    ledger_fixture,
    plan_doc,
    run_steps,
    timed_run,
    verdict_line,
)
from _util import git

TARGET = 0.150
HOOK = [PYTHON, "-m", "gitaudit.hooks", "pre-push", "origin", "x"]


def push_line(repo: Path, rev: str = "HEAD") -> str:
    sha = git(repo, "rev-parse", rev).strip()
    return f"refs/heads/main {sha} refs/heads/main {ZERO}\n"


def forget(repo: Path) -> None:
    (repo / ".git" / "gitaudit" / "memo.json").unlink(missing_ok=True)


def imports(repo: Path, stdin: str) -> list[tuple[int, int, str]]:
    """(cumulative us, self us, module) of every import one hook process makes."""
    proc = subprocess.run(
        [PYTHON, "-X", "importtime", *HOOK[1:]],
        cwd=repo,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
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


def importtime_top(repo: Path, stdin: str, top: int = 10) -> list[str]:
    rows = imports(repo, stdin)
    return [f"{c / 1000:8.1f} ms cumulative {s / 1000:7.1f} ms self  {n}" for c, s, n in rows[:top]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11, help="timed rounds (medians)")
    parser.add_argument("--profile", action="store_true", help="cProfile one hook process")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="gitaudit-bench-hooks-"))
    try:
        bench_env(scratch)
        fixture = ledger_fixture()
        big = checkout_fixture(fixture, scratch)
        small = scratch / "small"
        init_audited_repo(small, plan_doc(run_steps(1, ["true"])))
        audit(small, "run", "--jobs", "1")
        for repo in (small, big):
            if not (repo / ".git" / "hooks" / "pre-push").exists():
                raise RuntimeError(f"{repo}: the pre-push hook is not installed")
            audit(repo, "status", "HEAD")  # PASS; warms the lookup index and the marks
        small_in, big_in = push_line(small), push_line(big)
        timed_run(HOOK, small, stdin=push_line(small, "HEAD~1"), expect=1)  # the hook judges
        for repo, line in ((small, small_in), (big, big_in)):
            timed_run(HOOK, repo, stdin=line)  # remembers the PASS if status did not
            if any(name.strip() == "pygit2" for _, _, name in imports(repo, line)):
                raise RuntimeError(f"{repo}: the hook did not use the verdict memo")

        shim = ["./.git/hooks/pre-push", "origin", "x"]

        def cold(repo: Path, line: str) -> float:
            forget(repo)
            return timed_run(HOOK, repo, stdin=line)

        medians = interleaved(
            {
                "python": lambda: timed_run([PYTHON, "-c", "pass"], small),
                "small": lambda: timed_run(HOOK, small, stdin=small_in),
                "small-shim": lambda: timed_run(shim, small, stdin=small_in),
                "big": lambda: timed_run(HOOK, big, stdin=big_in),
                "big-shim": lambda: timed_run(shim, big, stdin=big_in),
                "small-cold": lambda: cold(small, small_in),
                "big-cold": lambda: cold(big, big_in),
            },
            args.rounds,
        )
        startup = medians["python"]
        print("pre-push for a passing commit (median wall times, interleaved):")
        info_line("baseline: python -c pass (interpreter start-up)", startup)
        info_line(
            "installed shim .git/hooks/pre-push, 1-run ledger", medians["small-shim"], startup
        )
        info_line(
            "installed shim .git/hooks/pre-push, 20,001-run ledger", medians["big-shim"], startup
        )
        info_line("cold (no memo: the full gate), 1-run ledger", medians["small-cold"], startup)
        info_line("cold (no memo: the full gate), 20,001-run ledger", medians["big-cold"], startup)
        print("\nresults (the commit judged before the push, as status or commit-msg do):")
        results = [
            verdict_line(
                "python -m gitaudit.hooks pre-push, 1-run ledger", medians["small"], TARGET, startup
            ),
            verdict_line(
                "python -m gitaudit.hooks pre-push, 20,001-run ledger",
                medians["big"],
                TARGET,
                startup,
            ),
        ]
        print(
            f"  (ratios against python start-up; beyond it: "
            f"{(medians['small'] - startup) * 1000:.0f} ms / "
            f"{(medians['big'] - startup) * 1000:.0f} ms)"
        )
        if args.profile:
            forget(big)
            proc = subprocess.run(
                [PYTHON, "-m", "cProfile", "-s", "cumulative", *HOOK[1:]],
                cwd=big,
                input=big_in,
                capture_output=True,
                text=True,
                check=False,
            )
            print("\ncProfile of one cold pre-push process (20,001-run ledger), top 30 cumulative:")
            print("\n".join(proc.stdout.splitlines()[:38]))
        code = finish(results)
        print(
            "\npython -X importtime -m gitaudit.hooks pre-push (cold): top 10 cumulative imports",
            file=sys.stderr,
        )
        forget(small)
        for row in importtime_top(small, small_in):
            print(f"  {row}", file=sys.stderr)
        return code
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
