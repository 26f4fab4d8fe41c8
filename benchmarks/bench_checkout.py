"""Benchmark: the private checkout the checks run in, against git's own costs, on 50,000 files.

Every run brings a private checkout to the judged tree (gitaudit/run/checkout.py): from scratch
the first time, then incrementally. Targets, as ratios measured side by side in one run (medians
of interleaved rounds; the worst round is printed beside):

* **first checkout** <= 1.2x ``git checkout`` of the same tree into an empty directory (with a
  throwaway index), including the verification of every object written;
* **update after 10 changed files** <= 1.5x ``git status --porcelain`` in the work tree,
  including the verification of the changed objects.

Each round of the update changes 10 tracked files (alternating between two contents), so every
update writes 10 files and verifies their blobs.

Both first checkouts (ours and git's) are written to ``/dev/shm`` when it exists: on a disk-backed
file system the cost of writing 50,000 files is the kernel's and varies several-fold between
rounds on a shared machine (2-35 s measured here for the same write), which drowns what is
compared. ``--disk`` measures on the temp directory's file system instead. The end of a run
(the purity check and leaving the checkout clean) is printed beside, for information.

Run: ``.venv/bin/python benchmarks/bench_checkout.py [--files N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import big_repo, copy_repo, git, hermetic_env

from gitaudit.run import checkout

FIRST_TARGET = 1.2
UPDATE_TARGET = 1.5


def timed(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--disk", action="store_true", help="write checkouts to the temp dir")
    args = parser.parse_args()
    shm = Path("/dev/shm")
    with (
        tempfile.TemporaryDirectory(prefix="gitaudit-bench-checkout-") as tmp,
        tempfile.TemporaryDirectory(
            prefix="gitaudit-bench-checkout-",
            dir=None if args.disk or not shm.is_dir() else shm,
        ) as out_tmp,
    ):
        base, outs = Path(tmp), Path(out_tmp)
        hermetic_env(base / "home")
        os.environ["GITAUDIT_CACHE"] = str(outs / "cache")
        repo = copy_repo(big_repo(args.files), base / "repo")
        gitdir = repo / ".git"
        tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
        head = git(repo, "rev-parse", "HEAD").strip()
        targets = sorted((repo / "d00" / "s00").iterdir())[:10]

        def git_checkout() -> None:
            out = outs / "plain"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            env = {**os.environ, "GIT_INDEX_FILE": str(base / "plain.index")}
            subprocess.run(
                ["git", f"--work-tree={out}", "checkout", tree, "--", "."],
                cwd=repo,
                env=env,
                check=True,
                capture_output=True,
            )
            os.unlink(base / "plain.index")

        def first() -> None:
            shutil.rmtree(outs / "cache", ignore_errors=True)
            with checkout.acquire(gitdir, repo) as slot:
                checkout.materialise(slot, gitdir, repo, tree, head)

        def git_status() -> None:
            subprocess.run(
                ["git", "status", "--porcelain"], cwd=repo, check=True, capture_output=True
            )

        flips = [0]

        def change_ten() -> str:
            flips[0] ^= 1
            for path in targets:
                path.write_text(f"changed {flips[0]}\n")
            git(repo, "add", "-A")
            return git(repo, "write-tree").strip()

        def update(new_tree: str) -> tuple[float, float]:
            """(the update, the end of a run: the purity check and leaving it clean)."""
            with checkout.acquire(gitdir, repo) as slot:
                start = time.perf_counter()
                placed = checkout.materialise(slot, gitdir, repo, new_tree, head)
                middle = time.perf_counter()
                checkout.leave_clean(placed, repo, checkout.changed(placed))
                return middle - start, time.perf_counter() - middle

        firsts, checkouts, updates, statuses, ends = [], [], [], [], []
        for _ in range(args.rounds):
            checkouts.append(timed(git_checkout))
            firsts.append(timed(first))
        first()  # a kept slot for the updates, left clean as a run leaves it
        with checkout.acquire(gitdir, repo) as slot:
            placed = checkout.materialise(slot, gitdir, repo, tree, head)
            checkout.leave_clean(placed, repo, checkout.changed(placed))
        for _ in range(args.rounds):
            new_tree = change_ten()
            statuses.append(timed(git_status))
            took, end = update(new_tree)
            updates.append(took)
            ends.append(end)
        rows = [
            ("first checkout", firsts, checkouts, "git checkout (empty dir)", FIRST_TARGET),
            ("update, 10 files changed", updates, statuses, "git status", UPDATE_TARGET),
        ]
        failed = False
        where = "disk" if args.disk or not shm.is_dir() else "tmpfs"
        print(
            f"private checkout, {args.files} files, {args.rounds} interleaved rounds, "
            f"checkouts on {where}"
        )
        status = statistics.median(statuses)
        print(
            f"  (info) end of a run: purity check + leaving the checkout clean "
            f"{statistics.median(ends):.3f} s = {statistics.median(ends) / status:.2f}x git status"
        )
        for name, ours, base_times, baseline, target in rows:
            ratio = statistics.median(ours) / statistics.median(base_times)
            worst = max(ours) / statistics.median(base_times)
            ok = ratio <= target
            failed |= not ok
            print(
                f"  {name:<28} {statistics.median(ours):7.3f} s  vs {baseline} "
                f"{statistics.median(base_times):7.3f} s  = {ratio:5.2f}x (worst {worst:5.2f}x)"
                f"  target <= {target}x  {'PASS' if ok else 'FAIL'}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
