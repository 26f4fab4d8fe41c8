"""Benchmark: the server's pre-receive hook judging one pushed branch, against `git status`.

Fixtures (cached, see ``_scale_util.bare_server``): a bare server holding the 50,000-file tree
of ``_util.big_repo`` and a ledger of SMALL (default 1,000) or LARGE (default 100,000) runs; the
push waiting to be judged is ``main`` moved to a commit with the sealed plan on top of the big
tree, together with one new run for that tree on top of the ledger (the objects received, no
ref moved: exactly what receive-pack hands the hook). Each benchmark run copies both servers and
installs the hook with this environment's Python.

Measured, interleaved, medians with the best and the worst round:

* ``git status --porcelain`` in a work tree of the same 50,000 files (the yardstick);
* ``python -c`` importing what the hook imports (start-up alone: the floor of any hook);
* the installed ``hooks/pre-receive`` of each server, run as receive-pack runs it (``GIT_DIR``,
  the update lines on stdin); it must accept. Two pushes: the branch with its run (what `git
  audit push` sends: the evidence is found among the pushed runs), and the branch alone with
  its run already on the server's ledger ("evidence first", e.g. from CI: the evidence is found
  through the server's lookup index, warm, as every judgement keeps it up to date).

Targets (the branch with its run): the hook on the LARGE ledger <= 2x `git status`; flat in
ledger size: LARGE / SMALL <= 1.1; the same ratios for "evidence first", for the record. Also
for the record: the first "evidence first" judgement with no lookup index (what building the
index costs, once) and the index's size on disk.

Run: ``.venv/bin/python benchmarks/bench_prereceive.py [--rounds R] [--files N] [--small N]
[--large N] [--quick]``; ``--quick`` is 5,000 files, 200 vs 5,000 runs, 3 rounds.
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

from _ledger_util import PYTHON, bench_env
from _scale_util import (
    bare_server,
    du,
    hook,
    index_files,
    rounds,
    run_seconds,
    server_copy,
)
from _util import big_repo

# what the hook imports before it judges (gitaudit.hooks.entry.pre_receive): start-up alone
IMPORTS = (
    "import gitaudit.hooks.entry, gitaudit.gate.assess, gitaudit.ledger.plansref, "
    "gitaudit.git.repo, gitaudit.errors"
)
STATUS_RATIO = 2.0
FLATNESS = 1.1


def _worktree(big: Path, scratch: Path) -> Path:
    """The big repository's work tree hard-linked (git's stat data stays valid), .git copied."""
    dst = scratch / "worktree"
    subprocess.run(["cp", "-al", str(big), str(dst)], check=True)
    shutil.rmtree(dst / ".git")
    subprocess.run(["cp", "-a", str(big / ".git"), str(dst / ".git")], check=True)
    return dst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11, help="timed rounds (medians)")
    parser.add_argument("--files", type=int, default=50_000, help="files in the tree")
    parser.add_argument("--small", type=int, default=1_000, help="runs on the small ledger")
    parser.add_argument("--large", type=int, default=100_000, help="runs on the large ledger")
    parser.add_argument("--quick", action="store_true", help="5,000 files, 200 vs 5,000 runs")
    args = parser.parse_args()
    if args.quick:
        args.files, args.small, args.large, args.rounds = 5_000, 200, 5_000, 3

    scratch = Path(tempfile.mkdtemp(prefix="gitaudit-bench-prereceive-"))
    try:
        bench_env(scratch)
        big = big_repo(args.files, dirs=max(1, min(400, args.files // 100)))
        cached = {
            size: bare_server(big, size, min(size, 4_000)) for size in (args.small, args.large)
        }
        servers = {size: server_copy(s, scratch) for size, s in cached.items()}
        first = {size: server_copy(s, scratch, evidence_first=True) for size, s in cached.items()}
        tree = _worktree(big, scratch)
        print(
            f"{args.files:,} files; ledgers of {args.small:,} and {args.large:,} runs "
            f"(+1 real run, +1 pushed); {args.rounds} rounds, interleaved"
        )

        print(
            "\nfirst judgement of a branch whose evidence is already on the server, no lookup "
            "index yet\n(once: what building the index costs; then it is kept up to date):"
        )
        for size, server in first.items():
            took = hook(server)()
            size_kib = sum(p.stat().st_size for p in index_files(server.path)) / 1024
            print(
                f"  {size:>9,} runs: {took * 1000:8.1f} ms; lookup index {size_kib:,.0f} KiB, "
                f"repository {du(server.path) / 2**20:,.1f} MiB"
            )

        fns = {
            "git status": lambda: run_seconds(["git", "status", "--porcelain"], tree),
            "python -c pass": lambda: run_seconds([PYTHON, "-c", "pass"], tree),
            "start-up and imports of the hook": lambda: run_seconds([PYTHON, "-c", IMPORTS], tree),
            **{f"pre-receive, {size:,} runs": hook(s) for size, s in servers.items()},
            **{f"pre-receive, evidence first, {size:,} runs": hook(s) for size, s in first.items()},
        }
        started = time.perf_counter()
        got = rounds(fns, args.rounds)
        base = got["git status"].median
        print(f"\nmedians (x git status), best and worst of {args.rounds} rounds:")
        for name, s in got.items():
            print(s.row(name, base))
        small = got[f"pre-receive, {args.small:,} runs"].median
        large = got[f"pre-receive, {args.large:,} runs"].median
        first_small = got[f"pre-receive, evidence first, {args.small:,} runs"].median
        first_large = got[f"pre-receive, evidence first, {args.large:,} runs"].median
        ratio, flat = large / base, large / small
        ok_ratio, ok_flat = ratio <= STATUS_RATIO, flat <= FLATNESS
        best_flat = (
            got[f"pre-receive, {args.large:,} runs"].best
            / got[f"pre-receive, {args.small:,} runs"].best
        )
        print(
            f"\n  pre-receive at {args.large:,} runs / git status: {ratio:.2f}x "
            f"(target <= {STATUS_RATIO}x) {'PASS' if ok_ratio else 'FAIL'}"
        )
        print(
            f"  pre-receive {args.large:,} runs / {args.small:,} runs: {flat:.2f}x "
            f"(target <= {FLATNESS}x) {'PASS' if ok_flat else 'FAIL'}; best against best "
            f"{best_flat:.2f}x"
        )
        print(
            f"  evidence first (the lookup index at work): {first_large / base:.2f}x git status, "
            f"{args.large:,} / {args.small:,} runs: {first_large / first_small:.2f}x"
        )
        imports = got["start-up and imports of the hook"].median
        print(
            f"  judging beyond start-up and imports (medians): {(small - imports) * 1000:.0f} ms "
            f"at {args.small:,} runs, {(large - imports) * 1000:.0f} ms at {args.large:,} runs"
        )
        took = time.perf_counter() - started
        print(f"  ({took:.0f} s of timed rounds; the machine is shared and noisy)")
        return 0 if ok_ratio and ok_flat else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
