"""Attacks on the keys in memory: a check makes the run that holds the runner's key write its
memory out.

A check runs as the user, so it may raise its parent's core-size limit (``prlimit`` works
between processes of one user) and send it a signal whose default action dumps core. Before the
fix the core file landed in the work tree (the run's folder) holding the runner's Ed25519 seed:
the agent read it from there and signed a PASS of its own.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from gitaudit.crypto.keystore import load_signer
from tests.adversarial.conftest import World, check, plan, step

RUNS = "refs/audit/runs/default"

DUMPING = ["SIGSEGV", "SIGABRT", "SIGQUIT", "SIGBUS"]


def _crasher(name: str) -> list[str]:
    code = (
        "import os, resource, signal, time\n"
        "parent = os.getppid()\n"
        "unlimited = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)\n"
        "try:\n"
        "    resource.prlimit(parent, resource.RLIMIT_CORE, unlimited)\n"
        "except OSError:\n"
        "    pass\n"
        f"os.kill(parent, signal.{name})\n"
        "time.sleep(30)\n"
    )
    return ["python3", "-c", code]


def _seed(world: World) -> bytes:
    signer = load_signer(world.keys["ci"])
    return bytes(signer._key)  # type: ignore[attr-defined]  # the seed, to look for on disk


def _files_holding(root: Path, needle: bytes) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if needle in path.read_bytes():
                    found.append(str(path))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("name", DUMPING)
def test_attack_keys_check_dumps_the_run_s_memory(world: World, name: str) -> None:
    world.seal(plan(step("unit", check(*_crasher(name), timeout=60))))
    result = world.cli("run", "--key", str(world.keys["ci"]), process=True)
    roots = (world.path.parent, Path.home())  # the work tree's folder; the home with the cache
    cores = [p for root in roots for p in root.rglob("core*") if p.is_file()]
    assert cores == [], (result.code, cores)
    assert [f for root in roots for f in _files_holding(root, _seed(world))] == []
    # killed without a core, or the signal never reached it: nothing is PASS either way
    if result.code == -getattr(signal, name):
        assert world.ref(RUNS) is None
    else:
        assert result.code != 0, (result.out, result.err)
