"""Many runners feed one ledger: N runner clones each record R runs of the plan (each on its own
tree) through the real command line and push them, concurrently, to one bare server that judges
every push with gitaudit's pre-receive hook. Used by ``test_many_runners.py`` (16 x 25) and by
``benchmarks/bench_runners.py`` (64 x 25): ``python -m tests.faults.many_runners N R DIR``.

Every push is evidence only (``git audit push --evidence-only``): a runner that loses the race
for the shared runs ref fetches, replays its runs on top and pushes again. The result records
every push attempt, so a caller can assert that nothing was refused for a reason other than a
lost race, that exactly N x R runs arrived, and that each verifies.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PUSH_EVERY = 5  # runs recorded between two pushes of one runner
MAX_PUSHES = 60  # per batch: git audit push retries lost races itself; this bounds the rest


def _cli(path: Path, *args: str) -> tuple[int, str]:
    """The command line's real entry point, in this process (one runner = one process)."""
    from gitaudit.cli.entry import main

    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(path)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                main(list(args))
                code = 0
            except SystemExit as exc:
                code = int(exc.code or 0) if not isinstance(exc.code, str) else 1
    finally:
        os.chdir(cwd)
    return code, out.getvalue()


def _push(path: Path) -> dict[str, Any]:
    """Push until the batch lands (bounded); every attempt's outcome is kept."""
    attempts = []
    for _ in range(MAX_PUSHES):
        proc = subprocess.run(
            [sys.executable, "-m", "gitaudit", "push", "--evidence-only"],
            cwd=path,
            capture_output=True,
            text=True,
            check=False,
        )
        lost = "still losing the race" in proc.stderr
        attempts.append({"code": proc.returncode, "lost_race": lost, "err": proc.stderr[-600:]})
        if proc.returncode == 0 or not lost:
            break
    return {"attempts": attempts}


def runner(path: str, runs: int, start_at: float) -> None:
    """Record *runs* runs in the clone at *path*, pushing every PUSH_EVERY; print the commits
    recorded (their trees) and every push."""
    work = Path(path)
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)
    recorded, pushes = 0, []
    for n in range(runs):
        code, out = _cli(work, "run", "--fresh", "--jobs", "1")
        if code != 0:
            raise SystemExit(f"run {n} in {path} failed ({code}): {out[-2000:]}")
        recorded += 1
        if recorded % PUSH_EVERY == 0 or n == runs - 1:
            pushes.append(_push(work))
    print(json.dumps({"recorded": recorded, "pushes": pushes}))


def prepare(base: Path, runners: int) -> tuple[Path, list[Path]]:
    """A served client (tests.faults.conftest.make_served) and *runners* clones, each with its
    own commit (so each runner's runs are for its own tree)."""
    from tests.faults.conftest import make_served
    from tests.gitrepo import audit, git

    served = make_served(base, [f"r{i}.txt" for i in range(runners)])
    assert audit(served.client.path, "run").code == 0
    first = served.audit_push()
    assert first.returncode == 0, first.stderr
    clones = []
    for i in range(runners):
        path = base / f"r{i}"
        git(base, "clone", "-q", str(served.server), str(path))
        git(path, "config", "audit.rootKey", served.root_key)
        (path / f"r{i}.txt").write_text(f"runner {i}\n")
        git(path, "commit", "-qam", f"runner {i}")
        assert audit(path, "sync").code == 0
        assert audit(path, "hooks", "install").code == 0
        clones.append(path)
    return served.server, clones


def drive(clones: list[Path], runs: int, timeout: float) -> list[dict[str, Any]]:
    """Start every runner at once; their results."""
    from tests.faults.conftest import collect

    start = time.time() + 1.0
    return collect([spawn_runner(path, runs, start) for path in clones], timeout=timeout)


def spawn_runner(path: Path, runs: int, start_at: float) -> subprocess.Popen[str]:
    from tests.faults.conftest import env

    code = (
        "import json, sys\n"
        "from tests.faults.many_runners import runner\n"
        "runner(*json.loads(sys.argv[1]))\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, json.dumps([str(path), runs, start_at])],
        cwd=path,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


if __name__ == "__main__":  # pragma: no cover - the benchmark's entry point
    count, each, where = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    began = time.monotonic()
    srv, paths = prepare(where, count)
    ready = time.monotonic()
    results = drive(paths, each, timeout=3600)
    done = time.monotonic()
    print(
        json.dumps(
            {
                "runners": count,
                "runs": each,
                "setup_s": ready - began,
                "drive_s": done - ready,
                "pushes": sum(len(r["pushes"]) for r in results),
                "attempts": sum(len(p["attempts"]) for r in results for p in r["pushes"]),
                "arrived": int(
                    subprocess.run(
                        ["git", "rev-list", "--count", "refs/audit/runs/default"],
                        cwd=srv,
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout
                ),
            }
        )
    )
