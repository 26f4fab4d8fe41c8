"""A Ctrl-C at any point of the scheduler's loop reports the step it interrupted.

The first SIGINT of a session is only remembered while the checks run: the scheduler asks at
its safe points. Raised where it landed, it could fall between a step's start and its being
noted as running: that step then read "not started" though its check had run, and the Ctrl-C
line for it was never printed (a rare flake of tests/edges/test_interrupts.py under load).
These tests put the SIGINT exactly there, in the main thread, with no timing involved.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitaudit.checks.environment import Sandbox
from gitaudit.plan.load import build_plan
from gitaudit.plan.model import Plan, StepId
from gitaudit.run import interrupts
from gitaudit.run.runner import Event, RunRequest, StepOutcome, execute
from gitaudit.verdict import StepStatus


@pytest.fixture(autouse=True)
def _terminal_sigint() -> Iterator[None]:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _plan(flag: Path) -> Plan:
    doc = {
        "task": "t",
        "requirements": [{"id": "R", "description": "r"}],
        "steps": [
            {
                "id": "slow",
                "title": "slow",
                "covers": ["R"],
                "verify": [
                    {"type": "run", "argv": ["sh", "-c", f"touch {flag}; sleep 60"], "timeout": 90}
                ],
            },
            {
                "id": "after",
                "title": "after",
                "covers": ["R"],
                "depends_on": ["slow"],
                "verify": [{"type": "run", "argv": ["true"]}],
            },
        ],
    }
    plan, problems = build_plan(doc, name="default", source="default.json")
    assert not problems, problems
    return plan


def _request(plan: Plan, tmp_path: Path, on_event: Event) -> RunRequest:
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    return RunRequest(
        plan=plan,
        workspace=tmp_path,
        sandbox=Sandbox(home=home, tmp=tmp, caller={"PATH": "/usr/bin:/bin"}),
        jobs=2,
        on_event=on_event,
    )


def test_a_ctrl_c_as_a_step_starts_reports_that_step_interrupted(tmp_path: Path) -> None:
    """The SIGINT arrives as the step is announced, before it is handed to a worker: the step
    still starts, is then stopped (its check killed) and reported INTERRUPTED with a "done"
    event; its dependant is never started."""
    events: list[tuple[str, StepId, StepOutcome | None]] = []

    def on_event(kind: str, sid: StepId, outcome: StepOutcome | None) -> None:
        events.append((kind, sid, outcome))
        if kind == "start":
            signal.raise_signal(signal.SIGINT)

    with interrupts.session():
        outcome = execute(_request(_plan(tmp_path / "started"), tmp_path, on_event))
    assert outcome.interrupted
    slow = outcome.steps[StepId("slow")]
    assert slow.status == StepStatus.INTERRUPTED, slow
    assert slow.reason == "interrupted by Ctrl-C"
    assert outcome.steps[StepId("after")].status == StepStatus.NOT_RUN
    done = [(sid, o.status) for kind, sid, o in events if kind == "done" and o is not None]
    assert done == [(StepId("slow"), StepStatus.INTERRUPTED)]
    assert [sid for kind, sid, _ in events if kind == "start"] == [StepId("slow")]


def test_outside_a_session_a_ctrl_c_still_stops_the_run(tmp_path: Path) -> None:
    """The library called directly (no session): Python's own KeyboardInterrupt applies, and the
    scheduler still records the run as interrupted."""
    flag = tmp_path / "started"

    def on_event(kind: str, sid: StepId, outcome: StepOutcome | None) -> None:
        if kind == "start":
            signal.raise_signal(signal.SIGINT)

    outcome = execute(_request(_plan(flag), tmp_path, on_event))
    assert outcome.interrupted
    assert outcome.steps[StepId("after")].status == StepStatus.NOT_RUN
