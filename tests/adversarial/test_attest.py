"""Attacks on what gitaudit exports for others to read: attestations and JUnit reports.

A CI system that renders (or gates on) a JUnit report, or a consumer of an in-toto attestation,
must not be told that a run passed when gitaudit's verdict on it is not PASS.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.adversarial.conftest import World, check, plan, step


@pytest.mark.parametrize("how", ["a check changed the workspace", "a required tool is missing"])
def test_attack_attest_junit_of_a_failed_run_is_green(world: World, how: str) -> None:
    """Every check of every step passed, but the run FAILed for a reason of the run as a whole
    (its workspace was changed, a required tool is missing). `show --format junit` wrote a
    suite per step and a case per check, and nothing of the run's verdict: the report had no
    failure, and a CI system gating on it went green (both, before the fix)."""
    if how == "a check changed the workspace":
        world.seal(plan(step("unit", check("sh", "-c", "echo x > stray.txt"))))
    else:
        world.seal({**plan(step("unit")), "required_tools": ["gitaudit-no-such-tool"]})
    recorded = world.run()
    assert recorded.verdict == "FAIL", recorded.doc
    shown = world.cli("show", "--format", "junit")
    assert shown.code == 0, shown.err
    root = ET.fromstring(shown.out)
    assert root.get("failures") == "1", shown.out
    (case,) = root.findall("testsuite/testcase[failure]")
    assert case.get("name") == "verdict" and case.get("classname") == "default.run"
    failure = case.find("failure")
    assert failure is not None and failure.get("type") == "FAIL"
    assert failure.get("message") == "; ".join(recorded.doc["reasons"])
