"""Kill stress: several clones push to one server at once while some pushes are SIGKILLed.

Each clone (a worker process) loops: commit a change to its own branch ``c<i>``, record a run
(`git audit run --json`), `git audit push`, then `git audit status`. About half the pushes are
killed, chosen with one seeded random generator per clone:

* at a pause point (:mod:`gitaudit.checkpoint`): ``push.replayed`` (replays signed, no ref
  moved) or ``push.pushed`` (the push landed, nothing recorded after it);
* after a random delay, wherever the push happens to be: fetching, replaying, in git's ref
  transaction, in the pre-push hook, in ``git push`` itself.

Each kill is either of the gitaudit process alone (its git children run on as orphans, as after
a crashed parent, racing the clone's next command) or of its whole process group (git dies too,
and may leave a lock). The server side runs in a session of its own
(``remote.origin.receivepack = setsid -w git-receive-pack``), as behind ssh: killing a client
never kills the server's receive-pack in the middle of its ref transaction.

A worker never retries a killed push: the runs it carried are pushed by a later push of the same
clone. It records what every command reported, so the test can assert that no command ever saw
a false "moved backwards or was rewritten", and that every run a clone recorded before a push
that reported success is on the server at once (and every run recorded at all, after the last
push). Used by ``test_kill_stress.py``; ``python -m tests.faults.kill_stress CLONES PUSHES DIR``
runs it alone (longer soaks).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SEED = int(os.environ.get("GITAUDIT_STRESS_SEED", "20261114"))  # another seed, other kills
POINTS = ("push.replayed", "push.pushed")
REWIND = "moved backwards or was rewritten"
HANG_GUARD = 120.0  # seconds, per command: only against a hang, never a measurement
KILL_SHARE = 0.5  # the share of pushes killed
MAX_DELAY = 3.0  # seconds: a timed kill lands in [0.05, MAX_DELAY) after the start


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "gitaudit", *args]


def server_trees(server: Path) -> list[str]:
    """The Audit-Tree of every run on the server's runs ref, newest first (a ref read is
    atomic, and the server's refs only fast-forward)."""
    proc = subprocess.run(
        [
            "git",
            "log",
            "--format=%(trailers:key=Audit-Tree,valueonly)",
            "refs/audit/runs/default",
        ],
        cwd=server,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.split()


def _kill_plan(rng: random.Random) -> dict[str, Any] | None:
    if rng.random() >= KILL_SHARE:
        return None
    group = rng.random() < 0.5
    if rng.random() < 0.4:
        return {"point": rng.choice(POINTS), "group": group}
    return {"after": round(rng.uniform(0.05, MAX_DELAY), 3), "group": group}


def _push(work: Path, plan: dict[str, Any] | None, folder: Path) -> dict[str, Any]:
    """`git audit push` in its own process group, killed as *plan* says (or not at all)."""
    extra: dict[str, str] = {}
    if plan and "point" in plan:
        from gitaudit import checkpoint

        folder.mkdir(parents=True, exist_ok=True)
        extra = {checkpoint.DIR_VARIABLE: str(folder), checkpoint.POINTS_VARIABLE: plan["point"]}
    proc = subprocess.Popen(
        _cli("push"),
        cwd=work,
        env={**os.environ, **extra},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    started = time.monotonic()
    killed = False
    if plan:
        marker = folder / f"{plan.get('point')}.reached"
        while proc.poll() is None and time.monotonic() - started < HANG_GUARD:
            due = "point" in plan and marker.exists()
            due = due or ("after" in plan and time.monotonic() - started >= plan["after"])
            if due:
                try:
                    if plan["group"]:
                        os.killpg(proc.pid, signal.SIGKILL)
                    else:
                        os.kill(proc.pid, signal.SIGKILL)
                    killed = True
                except ProcessLookupError:
                    pass  # it ended just then
                break
            time.sleep(0.01)
    try:
        out, err = proc.communicate(timeout=HANG_GUARD)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"`git audit push` in {work} hung") from None
    killed = killed and proc.returncode == -signal.SIGKILL
    return {
        "code": proc.returncode,
        "killed": killed,
        "plan": plan,
        "seconds": round(time.monotonic() - started, 3),
        "out": out[-1500:],
        "err": err[-1500:],
    }


def _rev(cwd: Path, rev: str) -> str:
    proc = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", rev],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip()


def _command(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _cli(*args), cwd=work, capture_output=True, text=True, check=False, timeout=HANG_GUARD
    )


def _run(work: Path) -> dict[str, Any]:
    """`git audit run --json`, tried again while a lock a killed git left is still fresh (the
    run waits for it to become stale, or gives up saying so)."""
    tries = []
    for _ in range(4):
        proc = _command(work, "run", "--json")
        tries.append({"code": proc.returncode, "err": proc.stderr[-1500:]})
        if proc.returncode == 0:
            doc = json.loads(proc.stdout)
            return {"commit": doc["runs"][0]["commit"], "tries": tries}
        if ".lock" not in proc.stderr and "lock" not in proc.stderr:
            break
        time.sleep(1.0)
    return {"commit": None, "tries": tries}


def clone_worker(path: str, server: str, me: int, pushes: int, start_at: float) -> None:
    """The loop of one clone (see the module docstring); prints one JSON document."""
    rng = random.Random(SEED * 1000 + me)
    work, srv = Path(path), Path(server)
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)
    recorded: list[str] = []  # the trees of the runs this clone recorded
    steps = []
    for k in range(pushes):
        (work / f"c{me}.txt").write_text(f"clone {me} push {k}\n")
        subprocess.run(["git", "add", f"c{me}.txt"], cwd=work, check=True)
        subprocess.run(
            ["git", "commit", "-q", "--no-verify", "-m", f"c{me}: {k}"], cwd=work, check=True
        )
        tree, head = _rev(work, "HEAD^{tree}"), _rev(work, "HEAD")
        step: dict[str, Any] = {"k": k, "tree": tree, "run": _run(work)}
        if step["run"]["commit"] is not None:
            recorded.append(tree)
        step["push"] = _push(work, _kill_plan(rng), work.parent / f"cp{me}.{k}")
        if step["push"]["code"] == 0:
            # reported pushed: every run recorded so far must be on the server now, and the branch
            on_server = set(server_trees(srv))
            step["missing"] = [t for t in recorded if t not in on_server]
            step["branch_ok"] = _rev(srv, f"refs/heads/c{me}") == head
        status = _command(work, "status", "--json")
        step["status"] = {"code": status.returncode, "out": status.stdout[-1500:]}
        step["status"]["err"] = status.stderr[-1500:]
        steps.append(step)
    print(json.dumps({"clone": me, "recorded": recorded, "steps": steps}))


def prepare(base: Path, clones: int) -> tuple[Path, list[Path]]:
    """A served repository (tests.faults.many_runners.prepare), each clone on its own branch
    ``c<i>`` and reaching the server's receive-pack in a session of its own."""
    from tests.faults.many_runners import prepare as prepare_runners
    from tests.gitrepo import git

    server, paths = prepare_runners(base, clones)
    for i, path in enumerate(paths):
        git(path, "checkout", "-q", "-b", f"c{i}")
        git(path, "config", "remote.origin.receivepack", "setsid -w git-receive-pack")
    return server, paths


def spawn(path: Path, server: Path, me: int, pushes: int, start_at: float) -> Any:
    from tests.faults.conftest import env

    code = (
        "import json, sys\n"
        "from tests.faults.kill_stress import clone_worker\n"
        "clone_worker(*json.loads(sys.argv[1]))\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, json.dumps([str(path), str(server), me, pushes, start_at])],
        cwd=path,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def drive(server: Path, paths: list[Path], pushes: int, timeout: float) -> list[dict[str, Any]]:
    from tests.faults.conftest import collect

    start = time.time() + 1.0
    procs = [spawn(p, server, i, pushes, start) for i, p in enumerate(paths)]
    return collect(procs, timeout=timeout)


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The numbers of one stress: pushes, kills by kind, what the unkilled pushes said."""
    steps = [s for r in results for s in r["steps"]]
    pushes = [s["push"] for s in steps]
    kills: dict[str, int] = {}
    for p in pushes:
        if p["killed"]:
            plan = p["plan"]
            kind = plan.get("point", "timed") + ("/group" if plan["group"] else "/process")
            kills[kind] = kills.get(kind, 0) + 1
    return {
        "clones": len(results),
        "pushes": len(pushes),
        "killed": sum(p["killed"] for p in pushes),
        "kills": dict(sorted(kills.items())),
        "pushed": sum(p["code"] == 0 for p in pushes),
        "failed": sum(p["code"] not in (0, -signal.SIGKILL) for p in pushes),
        # why an unkilled push failed (a lock a killed git left, a race lost five times): its
        # one-line error
        "failures": [
            ([ln for ln in p["err"].splitlines() if ln.startswith("error:")] or [p["err"]])[-1]
            for p in pushes
            if p["code"] not in (0, -signal.SIGKILL)
        ],
        "runs_recorded": sum(len(r["recorded"]) for r in results),
        "run_retries": sum(len(s["run"]["tries"]) - 1 for s in steps),
        "status_not_pass": sum(s["status"]["code"] != 0 for s in steps),
    }


if __name__ == "__main__":  # pragma: no cover - a longer soak by hand
    count, each, where = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    srv, clone_paths = prepare(where, count)
    began = time.monotonic()
    out = drive(srv, clone_paths, each, timeout=3600)
    print(json.dumps({**summary(out), "seconds": round(time.monotonic() - began, 1)}))
