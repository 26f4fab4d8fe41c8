"""Benchmark: the workspace fingerprint against `git status --porcelain` on 50,000 files.

The fingerprint runs before and after every check, so it must cost about what a `git status`
costs.  Targets (ratios measured side by side in one run, because absolute times vary tenfold
between machines): warm <= 1.5x and cold <= 3x the median `git status --porcelain`, and the
first fingerprint in a fresh clone <= 2x the first `git status` in a fresh clone.

* cold: the first fingerprint ever (its private folder removed before each run): with no stat
  data of its own (it never takes the user's index's, which anyone who writes ``.git`` can
  forge), it hashes every file, once; this row and the fresh clone's measure that on purpose.
  It is hashed in parts, one ``git add -A`` a core (:mod:`gitaudit.git.parts`); the same with
  one ``git add -A`` is printed beside, for the record.
* warm: nothing changed since the previous fingerprint (clean checkout).
* warm, 10 files just modified: before each timed call 10 tracked files get new content (not
  staged), so every call hashes them and writes its private index twice (``add``, ``write-tree``).
* warm, 10 files still modified: the same edits, fingerprinted again: the call starts from the
  private index kept by the previous one, so nothing is hashed or written.
* fresh clone: each round clones the repository twice (``git clone``, untimed); the first
  ``git status --porcelain`` in one clone is the baseline of the first fingerprint in the other
  (the index as checkout wrote it, no private files yet: every file is hashed, as when cold).

Every row prints the median and the [min-max] of its rounds.

Measurements are interleaved with the `git status` runs so that load from other processes hits
both alike.  ``--compare`` also times hashing the whole tree from an empty index (what the
fingerprint would cost without seeding from the user's index) and pygit2's ``Index.add_all``.

Run: ``.venv/bin/python benchmarks/bench_fingerprint.py [--files N] [--rounds R]
[--clone-rounds C] [--compare]`` (``GITAUDIT_BENCH_QUICK=1``: 5,000 files).
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import Stat, big_repo, copy_repo, git, hermetic_env, spread, time_once

from gitaudit.git import fingerprint as fingerprint_module
from gitaudit.git import parts
from gitaudit.git.fingerprint import private_folder, workspace_fingerprint

WARM_TARGET = 1.5
COLD_TARGET = 3.0
CLONE_TARGET = 2.0
QUICK = os.environ.get("GITAUDIT_BENCH_QUICK", "") not in ("", "0")


def git_status(repo: Path) -> Callable[[], object]:
    return lambda: subprocess.run(
        ["git", "status", "--porcelain"], cwd=repo, capture_output=True, check=True
    )


def interleaved(
    baseline: Callable[[], object],
    subject: Callable[[], object],
    rounds: int,
    prepare: Callable[[], object] | None = None,
) -> tuple[Stat, Stat]:
    """Median (and spread) seconds of *baseline* and *subject*, alternating them for *rounds*
    rounds (*prepare*, untimed, before each *subject*)."""
    base_times: list[float] = []
    subject_times: list[float] = []
    for _ in range(rounds):
        base_times.append(time_once(baseline))
        if prepare is not None:
            prepare()
        subject_times.append(time_once(subject))
    return Stat(base_times), Stat(subject_times)


def fresh_clones(pristine: Path, scratch: Path, rounds: int) -> tuple[Stat, Stat]:
    """First ``git status`` in one fresh clone and first fingerprint in another, per round."""
    statuses: list[float] = []
    prints: list[float] = []
    for n in range(rounds):
        a, b = scratch / f"clone-{n}-a", scratch / f"clone-{n}-b"
        for where in (a, b):
            subprocess.run(["git", "clone", "-q", str(pristine), str(where)], check=True)
        status = functools.partial(
            subprocess.run, ["git", "status", "--porcelain"], cwd=a, capture_output=True, check=True
        )
        statuses.append(time_once(status))
        prints.append(time_once(functools.partial(workspace_fingerprint, b)))
        shutil.rmtree(a)
        shutil.rmtree(b)
    return Stat(statuses), Stat(prints)


def throwaway_truth(repo: Path, scratch: Path) -> str:
    """Ground truth: `git add -A && git write-tree` on a copy of the user's index."""
    index = scratch / "truth.index"
    shutil.copy2(repo / ".git" / "index", index)
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
    out = subprocess.run(["git", "write-tree"], cwd=repo, env=env, check=True, capture_output=True)
    return out.stdout.decode().strip()


def compare_alternatives(repo: Path, scratch: Path) -> None:
    """Time the designs the fingerprint does not use, for the record."""
    env = {**os.environ, "GIT_INDEX_FILE": str(scratch / "empty.index")}
    start = time.perf_counter()
    subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "write-tree"], cwd=repo, env=env, check=True, capture_output=True)
    print(f"  alt: empty index + git add -A     {time.perf_counter() - start:8.3f} s")
    import pygit2

    pyrepo = pygit2.Repository(str(repo))
    index = pyrepo.index  # a scratch copy's index, emptied in memory and never written back
    index.clear()
    start = time.perf_counter()
    index.add_all()
    index.write_tree()
    print(f"  alt: pygit2 Index.add_all (empty)  {time.perf_counter() - start:8.3f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5_000 if QUICK else 50_000)
    parser.add_argument("--dirs", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--clone-rounds", type=int, default=3, help="fresh-clone rounds")
    parser.add_argument("--compare", action="store_true", help="also time rejected designs")
    args = parser.parse_args()

    started = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="gitaudit-bench-fp-"))
    try:
        hermetic_env(scratch / "home")
        print(f"building/reusing a {args.files}-file repository in {args.dirs} directories ...")
        pristine = big_repo(args.files, args.dirs)
        repo = copy_repo(pristine, scratch / "repo")
        private = private_folder(repo / ".git")
        status = git_status(repo)
        status()  # warm the page cache for both contenders
        head_tree = git(repo, "rev-parse", "HEAD^{tree}").strip()

        def cold_prepare() -> None:
            shutil.rmtree(private, ignore_errors=True)

        def fingerprint() -> object:
            return workspace_fingerprint(repo)

        st_cold, cold = interleaved(status, fingerprint, args.rounds, cold_prepare)
        cores = fingerprint_module._cores
        try:  # for the record: the same with the whole tree hashed by one git add
            fingerprint_module._cores = lambda: 1
            st_single, single = interleaved(status, fingerprint, args.rounds, cold_prepare)
        finally:
            fingerprint_module._cores = cores
        fp = workspace_fingerprint(repo)
        assert fp.clean and fp.tree == head_tree, "clean checkout must fingerprint to HEAD^{tree}"
        st_warm, warm = interleaved(status, fingerprint, args.rounds)

        files = sorted((repo / "d00").rglob("*.txt"))[:10]
        edits = iter(range(1_000_000))

        def modify_ten() -> None:
            generation = next(edits)
            for i, path in enumerate(files):
                path.write_text(f"modified {i} generation {generation}\n")

        st_fresh, fresh = interleaved(status, fingerprint, args.rounds, modify_ten)
        fp = workspace_fingerprint(repo)
        assert fp.tree == throwaway_truth(repo, scratch), "fingerprint differs from git add -A"
        assert not fp.clean
        st_mod, mod = interleaved(status, fingerprint, args.rounds)

        st_clone, clone = fresh_clones(pristine, scratch, args.clone_rounds)

        baseline = statistics.median([st_cold, st_warm, st_fresh, st_mod])
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"\n{args.files} files, median of {args.rounds} interleaved runs (load avg {load})")
        print(f"  git status --porcelain           {baseline * 1000:8.1f} ms")
        rows = [
            ("cold fingerprint", cold, st_cold, COLD_TARGET),
            ("warm fingerprint", warm, st_warm, WARM_TARGET),
            ("warm, 10 files just modified", fresh, st_fresh, WARM_TARGET),
            ("warm, 10 files still modified", mod, st_mod, WARM_TARGET),
            ("first, in a fresh clone", clone, st_clone, CLONE_TARGET),
        ]
        ok = True
        for name, value, base, target in rows:
            ratio = value / base
            verdict = "PASS" if ratio <= target else "FAIL"
            ok = ok and verdict == "PASS"
            print(
                f"  {name:<32} {value * 1000:8.1f} ms {spread(value):>11}  {ratio:5.2f}x git "
                f"status ({base * 1000:.1f} ms {spread(base)} alongside)  target <= {target}x  "
                f"{verdict}"
            )
        print(
            f"  for the record: cold in one git add {single * 1000:8.1f} ms {spread(single):>11}  "
            f"{single / st_single:5.2f}x git status; the cold row (parts on {cores()} cores, "
            f"from {parts.ENTRIES_PER_PART * 2} files) {cold / single:.2f}x that"
        )
        if args.compare:
            compare_alternatives(repo, scratch)
        print(f"\n{'PASS' if ok else 'FAIL'}  (total {time.perf_counter() - started:.1f} s)")
        return 0 if ok else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
