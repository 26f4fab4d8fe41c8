"""Benchmark: fetching the audit refs after one new run costs what changed, not the ledger.

Fixtures: for SMALL (default 1,000) and LARGE (default 100,000) runs, a bare remote holding the
ledger of ``_ledger_util.ledger_fixture`` (a mirror clone) and a clone of it with gitaudit's
fetch refspec (``+refs/audit/*:refs/gitaudit/remotes/origin/audit/*``) and ``audit.rootKey``,
which fetched everything once and ran ``git audit sync`` once (both timed once, for the record:
they are proportional to the ledger, and happen once per clone).

Each round appends one signed run to each remote (untimed), then times, interleaved:

* ``git fetch origin`` in each clone: the new run comes in;
* ``git audit sync origin`` in each clone after one more new run: fetch, verify the new run,
  fast-forward the local runs ref.

Targets: LARGE / SMALL <= 1.25 for ``git fetch`` (what changed is one commit either way), and
for the record the same ratio for ``git audit sync``. Medians with the best and worst round.

Run: ``.venv/bin/python benchmarks/bench_fetch.py [--rounds R] [--small N] [--large N]
[--quick]``; ``--quick`` is 200 vs 5,000 runs, 3 rounds.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ledger_util import GIT_AUDIT, bench_env, ledger_fixture
from _scale_util import append_run, du, rounds, run_seconds, signer_of
from _util import git

if TYPE_CHECKING:
    from gitaudit.crypto.signers import Signer

FETCH_FLATNESS = 1.25
REFSPEC = "+refs/audit/*:refs/gitaudit/remotes/origin/audit/*"


@dataclass
class Pair:
    runs: int
    remote: Path
    client: Path
    signer: Signer
    added: int = 0

    def one_more_run(self) -> None:
        self.added += 1
        tree = hashlib.sha1(f"bench-fetch-{self.runs}-{self.added}".encode()).hexdigest()
        append_run(self.remote, tree, self.signer)


def prepare(scratch: Path, runs: int) -> Pair:
    ledger = ledger_fixture(runs, min(runs, 4_000))
    remote = scratch / f"remote-{runs}.git"
    git(scratch, "clone", "-q", "--mirror", str(ledger / "repo" / ".git"), str(remote))
    git(remote, "config", "gc.auto", "0")
    client = scratch / f"client-{runs}"
    # --no-local: through git's transport, as from a server (a local clone would hard-link the
    # remote's whole pack, audit objects included, and the first fetch would move nothing)
    git(scratch, "clone", "-q", "--no-local", str(remote), str(client))
    git(client, "config", "gc.auto", "0")
    git(client, "config", "--add", "remote.origin.fetch", REFSPEC)
    root = git(ledger / "repo", "config", "audit.rootKey").strip()
    git(client, "config", "audit.rootKey", root)
    first = run_seconds(["git", "fetch", "-q", "origin"], client)
    synced = run_seconds([GIT_AUDIT, "sync", "origin"], client)
    print(
        f"  {runs:>9,} runs: first fetch {first * 1000:8.1f} ms, first sync {synced * 1000:8.1f} "
        f"ms (once per clone); remote {du(remote) / 2**20:,.1f} MiB"
    )
    return Pair(runs, remote, client, signer_of(ledger))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds (medians)")
    parser.add_argument("--small", type=int, default=1_000, help="runs on the small ledger")
    parser.add_argument("--large", type=int, default=100_000, help="runs on the large ledger")
    parser.add_argument("--quick", action="store_true", help="200 vs 5,000 runs, 3 rounds")
    args = parser.parse_args()
    if args.quick:
        args.small, args.large, args.rounds = 200, 5_000, 3

    scratch = Path(tempfile.mkdtemp(prefix="gitaudit-bench-fetch-"))
    try:
        bench_env(scratch)
        print("set-up (proportional to the ledger, once per clone):")
        pairs = {size: prepare(scratch, size) for size in (args.small, args.large)}

        def fetch(pair: Pair) -> float:
            pair.one_more_run()
            return run_seconds(["git", "fetch", "-q", "origin"], pair.client)

        def sync(pair: Pair) -> float:
            pair.one_more_run()
            return run_seconds([GIT_AUDIT, "sync", "origin"], pair.client)

        fns = {}
        for size, pair in pairs.items():
            fns[f"git fetch, 1 new run of {size + 1:,}"] = lambda p=pair: fetch(p)
        for size, pair in pairs.items():
            fns[f"git audit sync, 1 new run of {size + 1:,}"] = lambda p=pair: sync(p)
        started = time.perf_counter()
        got = rounds(fns, args.rounds)
        names = list(fns)
        print(f"\nafter one new run: medians, best and worst of {args.rounds} rounds:")
        for name in names:
            print(got[name].row(name))
        fetch_ratio = got[names[1]].median / got[names[0]].median
        sync_ratio = got[names[3]].median / got[names[2]].median
        ok = fetch_ratio <= FETCH_FLATNESS
        print(
            f"\n  git fetch, {args.large:,} / {args.small:,} runs: {fetch_ratio:.2f}x "
            f"(target <= {FETCH_FLATNESS}x) {'PASS' if ok else 'FAIL'}"
        )
        print(f"  git audit sync, {args.large:,} / {args.small:,} runs: {sync_ratio:.2f}x")
        for pair in pairs.values():  # every new run arrived and was adopted
            tips = [
                git(pair.remote, "rev-parse", "refs/audit/runs/default").strip(),
                git(pair.client, "rev-parse", "refs/audit/runs/default").strip(),
            ]
            assert tips[0] == tips[1], (pair.runs, tips)
        print(
            f"  ({time.perf_counter() - started:.0f} s of timed rounds; a shared machine is noisy)"
        )
        return 0 if ok else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
