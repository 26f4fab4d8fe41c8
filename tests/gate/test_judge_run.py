"""``verdict.judge_run``: the verdict and reasons a run records (``run.json``), rule by rule."""

from __future__ import annotations

from gitaudit.plan.load import build_plan
from gitaudit.plan.model import Plan
from gitaudit.verdict import StepStatus, Verdict, judge_run
from tests.adversarial.conftest import plan, step

PASSED, FAILED, BLOCKED = StepStatus.PASSED, StepStatus.FAILED, StepStatus.BLOCKED


def _plan() -> Plan:
    built, problems = build_plan(
        plan(step("build"), step("test", deps=["build"])), name="default", source="test"
    )
    assert not problems
    return built


def _judge(statuses: dict[str, StepStatus], **kw: object) -> tuple[Verdict, list[str]]:
    args: dict[str, object] = {"interrupted": False, "impure": False, "missing_tools": ()}
    return judge_run(_plan(), statuses, **{**args, **kw})  # type: ignore[arg-type]


def test_every_step_verified_passes() -> None:
    assert _judge({"build": PASSED, "test": StepStatus.CARRIED}) == (Verdict.PASS, [])


def test_an_interrupted_run_says_so_and_nothing_else() -> None:
    assert _judge({"build": FAILED}, interrupted=True) == (
        Verdict.INTERRUPTED,
        ["the run was interrupted"],
    )


def test_an_unproven_step_is_unknown_and_a_failed_one_fails() -> None:
    assert _judge({"build": PASSED, "test": BLOCKED}) == (Verdict.UNKNOWN, ["step test blocked"])
    assert _judge({"build": PASSED}) == (Verdict.UNKNOWN, ["step test not-run"])
    assert _judge({"build": FAILED, "test": BLOCKED}) == (
        Verdict.FAIL,
        [
            "step build failed",
            "step test blocked",
            "must requirement R is not covered by a verified step",
        ],
    )


def test_a_broken_upstream_output_fails_the_run_whatever_the_step_says() -> None:
    """The step that needed the output is blocked (UNKNOWN by itself), or even passed: the run
    FAILs either way."""
    for status in (BLOCKED, PASSED):
        verdict, _ = _judge({"build": PASSED, "test": status}, broken_upstream=["test"])
        assert verdict == Verdict.FAIL, status


def test_a_missing_tool_and_an_impure_workspace_fail_with_their_reasons() -> None:
    assert _judge({"build": PASSED, "test": PASSED}, missing_tools=["pytest", "ruff"]) == (
        Verdict.FAIL,
        ["required tools missing: pytest, ruff"],
    )
    assert _judge({"build": PASSED, "test": PASSED}, impure=True) == (
        Verdict.FAIL,
        ["the workspace changed during the run"],
    )
