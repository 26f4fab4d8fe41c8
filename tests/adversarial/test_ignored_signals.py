"""The signals ignored by whoever starts ``git audit run``.

An ignored signal stays ignored across ``fork`` and ``exec``, and Python's ``subprocess``
restores only ``SIGPIPE`` and ``SIGXFSZ``: so a check inherited every other signal the caller
ignored (``trap '' HUP TERM; git audit run``, ``nohup git audit run``), which the tree does not
pin. A protected check that the code under test survives a hangup (a daemon that reloads on
``SIGHUP``), a termination request or an interrupt passed for code that installs no handler:
PASS for a tree where the same check, started by the user, fails. Checks now start with every
signal at its default action, whatever the caller ignored (like the fixed umask).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator

import pytest

from tests.adversarial.conftest import World, check, plan, step

PY = sys.executable

CHECK = (
    "import os, signal, sys, time\n"
    "# the code under test should keep running on SIG (reload, finish its work), but installs\n"
    "# no handler for it\n"
    "os.kill(os.getpid(), signal.{name})\n"
    "time.sleep(0.2)\n"
    "sys.exit(0)\n"
)


@pytest.fixture
def caller_ignores(request: pytest.FixtureRequest) -> Iterator[signal.Signals]:
    number = request.param
    before = signal.signal(number, signal.SIG_IGN)
    try:
        yield number
    finally:
        signal.signal(number, before)


@pytest.mark.parametrize(
    "caller_ignores",
    [signal.SIGHUP, signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGALRM],
    indirect=True,
    ids=lambda s: s.name,
)
def test_attack_ignored_signals_of_the_caller_keep_a_check_alive(
    world: World, caller_ignores: signal.Signals
) -> None:
    """Before the fix: PASS under the agent's ignored signal (all five). Now: FAIL, as for the
    user."""
    world.repo.write("tools/check.py", CHECK.format(name=caller_ignores.name))
    world.seal(plan(step("unit", check(PY, "tools/check.py"))))
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]
    assert world.gate(None).verdict != "PASS"


@pytest.fixture
def caller_blocks() -> Iterator[None]:
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@pytest.mark.parametrize("name", ["SIGHUP", "SIGTERM"])
def test_attack_ignored_signals_blocked_by_the_caller_keep_a_check_alive(
    world: World, caller_blocks: None, name: str
) -> None:
    """A blocked signal is inherited too (a wrapper that blocks it, then execs ``git audit
    run``): it stays pending and the check lives on. Before the fix: PASS (both). Now: FAIL."""
    world.repo.write("tools/check.py", CHECK.format(name=name))
    world.seal(plan(step("unit", check(PY, "tools/check.py"))))
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]
    assert world.gate(None).verdict != "PASS"


def test_control_ignored_signals_code_that_ignores_the_signal_itself_passes(world: World) -> None:
    """Control: code that ignores the hangup itself passes, whatever the caller does."""
    world.repo.write(
        "tools/check.py",
        CHECK.format(name="SIGHUP").replace(
            "os.kill", "signal.signal(signal.SIGHUP, signal.SIG_IGN)\nos.kill"
        ),
    )
    world.seal(plan(step("unit", check(PY, "tools/check.py"))))
    assert world.run().verdict == "PASS"
