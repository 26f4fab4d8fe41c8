"""The file mode creation mask of whoever starts ``git audit run``.

A check's process inherited gitaudit's umask, which is the caller's: the agent that starts the
run chooses it (``umask 077; git audit run``), and the tree does not pin it. A protected test
that a secret is written private (``0600``) passed for code that never sets the mode: PASS for
a tree where the same check, started by the user, fails. Checks now start with the umask every
honest machine has (``022``), whatever the caller's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from tests.adversarial.conftest import World, check, plan, step

PY = sys.executable

CHECK = (
    "import os, stat\n"
    "with open('secret.txt', 'w') as handle:  # the code under test forgets to chmod\n"
    "    handle.write('s3cret')\n"
    "mode = stat.S_IMODE(os.stat('secret.txt').st_mode)\n"
    "os.remove('secret.txt')\n"
    "raise SystemExit(0 if mode & 0o077 == 0 else 1)\n"
)


@pytest.fixture
def caller_umask(request: pytest.FixtureRequest) -> Iterator[int]:
    before = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(before)


@pytest.mark.parametrize("caller_umask", [0o077, 0o177, 0o277], indirect=True)
def test_attack_umask_of_the_caller_makes_a_file_private(world: World, caller_umask: int) -> None:
    """Before the fix: PASS under the agent's umask (all three). Now: FAIL, as for the user."""
    world.repo.write(".gitignore", "secret.txt\n")
    world.repo.write("tools/check.py", CHECK)
    world.seal(plan(step("unit", check(PY, "tools/check.py"))))
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]
    assert world.gate(None).verdict != "PASS"


def test_control_umask_a_check_that_sets_the_mode_passes(world: World) -> None:
    """Control: code that makes the file private itself passes, under the default umask."""
    world.repo.write(".gitignore", "secret.txt\n")
    world.repo.write(
        "tools/check.py",
        CHECK.replace(
            "    handle.write", "    os.fchmod(handle.fileno(), 0o600)\n    handle.write"
        ),
    )
    world.seal(plan(step("unit", check(PY, "tools/check.py"))))
    assert world.run().verdict == "PASS"
