"""Attacks on what gitaudit exports for others to read: attestations and JUnit reports.

A CI system that renders (or gates on) a JUnit report, or a consumer of an in-toto attestation,
must not be told that a run passed when gitaudit's verdict on it is not PASS.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.adversarial.conftest import World, check, plan, runner, step


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


@pytest.mark.parametrize("other", ["fails", "has no evidence"])
def test_attack_attest_one_plan_attested_for_the_commit(
    world: World, other: str, tmp_path: Path
) -> None:
    """The commit's plan `default` FAILs (or has no evidence): the gate says FAIL. The agent
    runs `git audit attest --plan docs` (the user's runner key signs it), `docs` being a plan
    that passes: the envelope said PASSED for the commit, and `attest verify` exited 0 (both
    variants, before the fix). A statement now says whether it judged every plan of the
    commit; `attest verify` accepts one that did not only for the plan it is asked about."""
    world.seal(plan(step("unit", check("true"))), "docs", commit=False)
    world.seal(plan(step("unit", check("false" if other == "fails" else "true"))))
    assert world.run("docs").verdict == "PASS"
    if other == "fails":
        assert world.run().verdict == "FAIL"
    assert world.gate().verdict in ("FAIL", "UNKNOWN")
    out = tmp_path / "docs.vsa.json"
    made = world.cli("attest", "--plan", "docs", "--key", str(world.keys["ci"]), "-o", str(out))
    assert made.code == 0, made.err
    checked = world.cli("attest", "verify", str(out))
    assert checked.code == 1, checked.out
    assert "PASSED for commit" in checked.out
    assert (
        "the attestation judged plan docs only, not every plan of the commit: it is accepted "
        "for that plan (`git audit attest verify FILE --plan docs`)"
    ) in checked.err, checked.err
    assert world.cli("attest", "verify", str(out), "--plan", "docs").code == 0
    refused = world.cli("attest", "verify", str(out), "--plan", "default")
    assert refused.code == 1 and "judged no plan 'default'" in refused.err, refused.err


@pytest.mark.parametrize("since", ["the weakened plan sealed strict again", "a plan sealed"])
def test_attack_attest_verdict_under_contracts_sealed_over_since(
    world: World, since: str, tmp_path: Path
) -> None:
    """alice sealed plan default weakened for a while (lint dropped, `--allow-weaken`): ci's
    run passed the commit under it, and the agent had it attested (ci's key signs). alice then
    sealed the strict plan again (lint fails on the commit), or sealed a second plan,
    `security`, that the commit fails: the gate says FAIL. `attest verify` still exited 0 on
    the old envelope, PASSED for the commit (both, before the fix): it checked the statement's
    policy digest against the contracts the statement itself lists, never against the seals in
    force. A statement is now refused when a plan it judged is sealed with another contract
    since, or a plan the gate judges for the commit now was not judged; a change of the plans
    ref that seals nothing new (a runner added) leaves it accepted."""
    strict = plan(step("unit", check("true")), step("lint", check("false")))
    weak = plan(step("unit", check("true")))
    world.seal(strict)
    world.seal(weak, reason="lint is flaky", allow_weaken=True)
    assert world.run().verdict == "PASS"
    out = tmp_path / "default.vsa.json"
    made = world.cli("attest", "--key", str(world.keys["ci"]), "-o", str(out))
    assert made.code == 0, made.err
    runner(world, "bob")  # the plans ref moves, no contract changes
    assert world.cli("attest", "verify", str(out)).code == 0
    assert world.cli("attest", "verify", str(out), "--plan", "default").code == 0
    if since == "a plan sealed":
        world.seal(plan(step("audit", check("false"))), "security", commit=False)
        why = (
            "the attestation did not judge plan security, which the gate judges for the "
            "commit now (sealed since it was made): it is no verdict on the commit"
        )
    else:
        world.seal(strict, commit=False)
        why = "plan 'default' is sealed with contract sha256:"
    assert world.gate().verdict == "FAIL"
    checked = world.cli("attest", "verify", str(out))
    assert checked.code == 1, checked.out + checked.err
    assert "PASSED for commit" in checked.out and why in checked.err, checked.err
    for_plan = world.cli("attest", "verify", str(out), "--plan", "default")
    assert for_plan.code == (0 if since == "a plan sealed" else 1), for_plan.err
