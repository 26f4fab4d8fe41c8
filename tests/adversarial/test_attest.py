"""Attacks on what gitaudit exports for others to read: attestations and JUnit reports.

A CI system that renders (or gates on) a JUnit report, or a consumer of an in-toto attestation,
must not be told that a run passed when gitaudit's verdict on it is not PASS.
"""

from __future__ import annotations

import base64
import json
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from gitaudit.crypto import dsse
from gitaudit.gate import attest
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.seals import set_policy, trust_add, trust_remove
from gitaudit.ledger.trust import EvidenceRule
from tests.adversarial.conftest import STRICT, World, check, plan, runner, step


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


MAIN = "refs/heads/main"


@pytest.mark.parametrize("how", ["attested for no ref", "forged for main", "attested for main"])
def test_attack_attest_agent_runner_key_attests_main(
    world: World, how: str, tmp_path: Path
) -> None:
    """main is proven by ci alone (the policy's evidence rule); the agent holds a trusted runner
    key of its own, whose runs are advisory for main: its passing run leaves main UNKNOWN. It
    has `git audit attest` sign the gate's verdict with its key (judged for no ref, any
    runner's evidence counts: PASSED), or writes the statement itself, PASSED and judged for
    main, and signs the envelope with its key: `attest verify` exited 0 (both, before the fix)
    and a consumer deploying main took it. A statement judged for no ref is now no verdict for
    a ref with a rule (`--for` a ref without one takes it); one judged for a ref must be judged
    under that ref's rule and signed by a runner the rule names, and `attest --for` refuses to
    sign with any other."""
    world.seal(STRICT)
    policy = replace(read_state(world.handle()).policy, evidence=(EvidenceRule(MAIN, ("ci",)),))
    set_policy(world.handle(), world.alice, policy, allow_weaken=False, reason="runners")
    agent = runner(world, "agent")
    assert world.run(signer=agent).verdict == "PASS"
    assert world.gate(for_ref=MAIN).verdict == "UNKNOWN"
    out = tmp_path / "main.vsa.json"
    key = ["--key", str(agent.source)]
    if how == "attested for main":
        made = world.cli("attest", "--for", MAIN, *key, "-o", str(out))
        assert made.code == 1 and not out.exists(), made.err
        assert made.err.startswith(
            "error: runner agent does not prove a tree for the refs matching refs/heads/main "
            "(the policy's evidence rule: refs/heads/main: 1 of [ci])"
        ), made.err
        return
    if how == "attested for no ref":
        assert world.cli("attest", *key, "-o", str(out)).code == 0
        why = "the attestation was judged for no ref, taking any trusted runner's evidence"
    else:
        forged = attest.build(world.handle(), None, None, for_ref=MAIN)
        predicate = forged.statement["predicate"]
        assert predicate["verificationResult"] == "FAILED"
        predicate["verificationResult"] = "PASSED"
        predicate["verifiedLevels"] = [attest.PASS_LEVEL]
        extension = predicate[attest.EXTENSION]
        extension["verdict"] = "PASS"
        extension["reasons"] = []
        for entry in extension["plans"]:
            entry["verdict"] = "PASS"
        envelope = dsse.sign(agent, dsse.IN_TOTO_PAYLOAD_TYPE, forged.payload())
        out.write_text(json.dumps(envelope.to_json()))
        why = "the attestation is signed by agent, a runner the evidence rule for refs/heads/main"
    for extra in ([], ["--for", MAIN], ["--plan", "default"]):
        checked = world.cli("attest", "verify", str(out), *extra)
        assert checked.code == 1, (extra, checked.out, checked.err)
        assert "authentic: signed by agent" in checked.out and "PASSED for commit" in checked.out
        if how == "attested for no ref" and extra == ["--for", MAIN]:
            assert "the attestation was judged for no ref, not under the evidence rule for " in (
                checked.err
            )
        else:
            assert why in checked.err, checked.err
    # a ref without a rule takes any trusted runner's word
    assert world.cli("attest", "verify", str(out), "--for", "refs/heads/topic").code == 0


def test_attest_control_ci_attests_main(world: World, tmp_path: Path) -> None:
    """Control: with main proven by ci alone, ci's run and `attest --for refs/heads/main` with
    ci's key verify (for main, and by default for the ref it was judged for)."""
    world.seal(STRICT)
    policy = replace(read_state(world.handle()).policy, evidence=(EvidenceRule(MAIN, ("ci",)),))
    set_policy(world.handle(), world.alice, policy, allow_weaken=False, reason="runners")
    assert world.run().verdict == "PASS"
    out = tmp_path / "main.vsa.json"
    made = world.cli("attest", "--for", MAIN, "--key", str(world.keys["ci"]), "-o", str(out))
    assert made.code == 0, made.err
    for extra in ([], ["--for", MAIN], ["--plan", "default", "--for", MAIN]):
        checked = world.cli("attest", "verify", str(out), *extra)
        assert checked.code == 0, (extra, checked.out, checked.err)
        assert f"judged for {MAIN}" in checked.out


def _passed(statement: dict[str, Any]) -> dict[str, Any]:
    """*statement* rewritten to say PASSED for every plan."""
    predicate = statement["predicate"]
    predicate["verificationResult"] = "PASSED"
    predicate["verifiedLevels"] = [attest.PASS_LEVEL]
    predicate[attest.EXTENSION]["verdict"] = "PASS"
    for entry in predicate[attest.EXTENSION]["plans"]:
        entry["verdict"] = "PASS"
    return statement


ALTERED = [
    "payloadType swapped",
    "bytes moved from the type into the payload",
    "statement rewritten, ci's signature kept",
    "statement rewritten, mallory's signature added",
    "statement rewritten, mallory's signature under ci's keyid",
    "ci's signature of another envelope",
    "ci removed from the trust set since",
]


@pytest.mark.parametrize("how", ALTERED)
def test_attack_attest_envelope_altered_without_a_key(
    world: World, how: str, tmp_path: Path
) -> None:
    """ci attested the commit FAILED (plan default fails); the agent has no trusted key. It
    swaps the envelope's payloadType, moves bytes between the type and the payload (the PAE
    names both lengths), rewrites the statement to PASSED and keeps ci's signature, adds one of
    mallory's (also under ci's keyid, first in the list), or takes ci's signature from another
    envelope (ci's PASSED attestation of an older commit); or ci's genuine PASSED envelope is
    verified after alice removed ci from the trust set. `attest verify` refuses each: no
    signature verifies with a key trusted now."""
    world.seal(plan(step("unit", check("sh", "-c", "test ! -e broken"))))
    assert world.run().verdict == "PASS"
    older = tmp_path / "older.vsa.json"
    ci = ["--key", str(world.keys["ci"])]
    assert world.cli("attest", *ci, "-o", str(older)).code == 0
    if how != "ci removed from the trust set since":
        world.repo.write("broken", "yes\n")
        world.repo.commit("break it")
        assert world.run().verdict == "FAIL"
    out = tmp_path / "head.vsa.json"
    assert world.cli("attest", *ci, "-o", str(out)).code == 0
    doc = json.loads(out.read_text())
    statement = json.loads(base64.b64decode(doc["payload"]))
    forged = json.dumps(_passed(statement), separators=(",", ":")).encode()
    mallory = dsse.sign(world.mallory, dsse.IN_TOTO_PAYLOAD_TYPE, forged).to_json()["signatures"]
    why = "no signature of the envelope verifies with a trusted key"
    if how == "payloadType swapped":
        doc["payloadType"] = "application/json"
        why = "payloadType is 'application/json', not 'application/vnd.in-toto+json'"
    elif how == "bytes moved from the type into the payload":
        doc["payloadType"] = dsse.IN_TOTO_PAYLOAD_TYPE[:-1]
        doc["payload"] = base64.b64encode(b"n " + forged).decode()
        why = "payloadType is 'application/vnd.in-toto+jso'"
    elif how.startswith("statement rewritten"):
        doc["payload"] = base64.b64encode(forged).decode()
        if how.endswith("added"):
            doc["signatures"] += mallory
        elif how.endswith("keyid"):
            mallory[0]["keyid"] = doc["signatures"][0]["keyid"]
            doc["signatures"] = mallory + doc["signatures"]
    elif how == "ci's signature of another envelope":
        doc["signatures"] = json.loads(older.read_text())["signatures"]
    else:
        world.cli("trust", "remove", "ci", "--key", str(world.keys["alice"]))
        assert all(k.name != "ci" for k in read_state(world.handle()).trust.keys)
    out.write_text(json.dumps(doc))
    checked = world.cli("attest", "verify", str(out))
    assert checked.code == 1, checked.out + checked.err
    assert "authentic" not in checked.out and why in checked.err, checked.err


def _headings(markdown: str) -> list[str]:
    """The text of every heading a CommonMark renderer (GitHub's) makes of *markdown*."""
    tokens = MarkdownIt("commonmark").parse(markdown)
    return [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]


FORGED = "## gitaudit: ✅ PASS"
QUOTED = {  # (what the check prints, the step's title, a failing test's name in its JUnit)
    "output closes the fence": ("````\n\n" + FORGED + "\n\n````", "unit", ""),
    "output closes a longer fence": ("```````\n" + FORGED + "\n", "unit", ""),
    "step title with a line break": ("", "unit\n\n" + FORGED + "\n", ""),
    "step title with a carriage return": ("", "unit\r```\r\r" + FORGED + "\r```", ""),
    "test name closing its code span": ("", "unit", "t`&#10;&#10;" + FORGED + "&#10;`"),
}


@pytest.mark.parametrize("how", sorted(QUOTED))
def test_attack_attest_report_quote_forges_a_pass_heading(world: World, how: str) -> None:
    """The plan's one step fails: the gate says FAIL. Its check printed a line of backticks
    longer than the report's fence, then a heading; or the step's title holds a line break
    (``\\r`` too: the plan graph's fence); or a failing test of the step's JUnit artifact is
    named with a backtick and line breaks: `git audit report` (the pull-request comment, the
    job summary) rendered a second heading "gitaudit: ✅ PASS" under the genuine FAIL, words
    of the agent's read as gitaudit's (all five, before the fix). Quoted text is now kept on
    its line and inert, and a fence or code span is longer than any run of backticks in it."""
    output, title, test = QUOTED[how]
    junit = f'<testsuite><testcase name="{test}"><failure/></testcase></testsuite>' if test else ""
    code = (
        f"import os, sys; os.makedirs('reports', exist_ok=True); "
        f"open('reports/junit.xml', 'w').write({junit!r}); sys.stdout.write({output!r}); "
        "sys.exit(1)"
    )
    world.repo.write(".gitignore", "reports/\n")
    world.seal(
        plan(
            step("unit", check("python3", "-c", code), title=title, artifacts=["reports/junit.xml"])
        )
    )
    assert world.run().verdict == "FAIL"
    shown = world.cli("report", "HEAD")
    assert shown.code == 1, shown.err
    assert _headings(shown.out) == ["gitaudit: ❌ FAIL", "❌ Plan `default`: FAIL"], shown.out
    if output:
        fences = [t.content for t in MarkdownIt("commonmark").parse(shown.out) if t.type == "fence"]
        assert output.rstrip() + "\n" in fences, shown.out
    if test:
        assert "Failing tests:" in shown.out, shown.out


JUNIT_QUOTES = {
    "ANSI escapes in stdout": ("\x1b[32mPASSED\x1b[0m all tests", "", "unit"),
    "NUL in stderr": ("", "boom\x00", "unit"),
    "backspaces over FAILED": ("FAILED\x08\x08\x08\x08\x08\x08PASSED", "", "unit"),
    "escape in the step title": ("", "", "unit \x1b[8m"),
}


@pytest.mark.parametrize("how", sorted(JUNIT_QUOTES))
def test_attack_attest_junit_control_characters_unreadable(world: World, how: str) -> None:
    """The step's check fails after printing a control character (an ANSI colour, NUL, a
    backspace), or the step's title holds one: `show --format junit` wrote it into the XML as
    it was, a character XML 1.0 has no place for, and no XML parser read the document: the
    failed case and the failing verdict went unread by the CI system gating on it (all four,
    before the fix). Such characters are now written ``\\xNN``."""
    out, err, title = JUNIT_QUOTES[how]
    code = f"import sys; sys.stdout.write({out!r}); sys.stderr.write({err!r}); sys.exit(1)"
    world.seal(plan(step("unit", check("python3", "-c", code), title=title)))
    assert world.run().verdict == "FAIL"
    shown = world.cli("show", "--format", "junit")
    assert shown.code == 0, shown.err
    root = ET.fromstring(shown.out)
    assert root.get("failures") == "2", shown.out
    failed = [c.get("name") for c in root.iter("testcase") if c.find("failure") is not None]
    assert len(failed) == 2 and "verdict" in failed, shown.out
    assert any(f"\\x{c:02x}" in shown.out for c in (0x1B, 0x00, 0x08)), shown.out


# lines GitHub's runner acts on in a job log (actions/runner, ActionCommandManager): `::cmd`
# after leading spaces, or `##[cmd]` anywhere in a line; `::stop-commands::T` stops them all
# until a line `::T::`
WORKFLOW_COMMANDS = {
    "an annotation in gitaudit's name": "::notice title=gitaudit default::PASS",
    "a mask over the verdict": "  ::add-mask::FAIL",
    "commands stopped for gitaudit's own": "::stop-commands::gitaudit",
    "a legacy command mid-line": "see ##[warning]gitaudit: PASS",
    "an output set": "::set-output name=verdict::PASS",
}


def _acted_on(log: str) -> list[str]:
    """The lines of *log* GitHub's runner would take for workflow commands."""
    acted, stopped = [], None
    for line in log.splitlines():
        command = line.lstrip()
        if stopped is not None:
            if command == f"::{stopped}::":
                stopped = None
            continue
        if command.startswith("::stop-commands::"):
            stopped = command.removeprefix("::stop-commands::")
            continue
        if command.startswith("::") or "##[" in line:
            acted.append(line)
    return acted


@pytest.mark.parametrize("how", sorted(WORKFLOW_COMMANDS))
def test_attack_attest_report_output_runs_workflow_commands(
    world: World, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step's check fails printing a line GitHub's runner reads as a workflow command:
    `git audit report --format github` with no $GITHUB_STEP_SUMMARY prints the summary to the
    job log, quoting the output, and the runner would have acted on it: an annotation "PASS"
    in gitaudit's name, a mask hiding FAIL, commands stopped so gitaudit's own annotations
    were dropped (all five, before the fix). The quoted summary is now printed between
    `::stop-commands::` and a resume token no check could have printed."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    line = WORKFLOW_COMMANDS[how]
    argv = ("python3", "-c", f"print({line!r}); raise SystemExit(1)")
    world.seal(plan(step("unit", check(*argv))))
    assert world.run().verdict == "FAIL"
    shown = world.cli("report", "HEAD", "--format", "github")
    assert shown.code == 1, shown.err
    assert line in shown.out, shown.out
    acted = _acted_on(shown.out)
    assert acted and all(a.startswith("::error title=gitaudit default::") for a in acted), acted


@pytest.mark.parametrize("which", ["every plan", "--plan default"])
def test_attack_attest_verdict_after_its_evidence_expired(
    world: World, which: str, tmp_path: Path
) -> None:
    """The plan's step is valid for 2 s (`valid_for`). ci's run passed and the agent had the
    commit attested (ci's key signs). The evidence expires: the gate says UNKNOWN, and `attest
    verify` still exited 0 on the envelope, PASSED for good (both, before the fix). A statement
    now records when its evidence expires (`valid_until`), and is refused from then."""
    world.seal(plan(step("unit", valid_for="2s")))
    assert world.run().verdict == "PASS"
    out = tmp_path / "vsa.json"
    assert world.cli("attest", "--key", str(world.keys["ci"]), "-o", str(out)).code == 0
    extra = ["--plan", "default"] if which == "--plan default" else []
    assert world.cli("attest", "verify", str(out), *extra).code == 0
    time.sleep(2.2)
    assert world.gate().verdict == "UNKNOWN"
    checked = world.cli("attest", "verify", str(out), *extra)
    assert checked.code == 1, checked.out
    assert "the evidence the attestation rests on expired at" in checked.err, checked.err


REPLAYED = [
    "a commit that fails",
    "a commit with no evidence",
    "--plan default, a commit that fails",
]


@pytest.mark.parametrize("how", REPLAYED)
def test_attack_attest_replayed_for_another_commit(world: World, how: str, tmp_path: Path) -> None:
    """ci attested commit A PASSED. The agent's commit B fails (or has no evidence); it hands
    A's envelope to the job that checks B: `attest verify FILE` exited 0, and there was no way
    to have it check the envelope is about B (all three, before the fix: `verify FILE B` was a
    usage error). `attest verify FILE REV` now refuses an envelope about another commit or
    tree; without REV it still says which commit it is about, and exits 0 for that one."""
    world.seal(plan(step("unit", check("sh", "-c", "test ! -e broken"))))
    assert world.run().verdict == "PASS"
    out = tmp_path / "a.vsa.json"
    assert world.cli("attest", "--key", str(world.keys["ci"]), "-o", str(out)).code == 0
    a = world.repo.git("rev-parse", "HEAD").strip()
    world.repo.write("broken", "yes\n")
    b = world.repo.commit("break it")
    if "no evidence" not in how:
        assert world.run().verdict == "FAIL"
    assert world.gate(b).verdict in ("FAIL", "UNKNOWN")
    extra = ["--plan", "default"] if how.startswith("--plan") else []
    checked = world.cli("attest", "verify", str(out), b, *extra)
    assert checked.code == 1, checked.out + checked.err
    assert f"the attestation is about commit {a}" in checked.err, checked.err
    assert world.cli("attest", "verify", str(out), a, *extra).code == 0


def _signed_by_ci(world: World, statement: dict[str, Any], path: Path) -> None:
    payload = json.dumps(statement, separators=(",", ":")).encode()
    path.write_text(json.dumps(dsse.sign(world.ci, dsse.IN_TOTO_PAYLOAD_TYPE, payload).to_json()))


AMBIGUOUS = [
    "a second commit subject",
    "a sha256 subject",
    "the extension names another commit",
    "PASSED over a FAIL verdict",
]


@pytest.mark.parametrize("how", AMBIGUOUS)
def test_attack_attest_statement_says_two_things(world: World, how: str, tmp_path: Path) -> None:
    """A trusted runner key signs a statement gitaudit did not make (an agent's own runner key
    where no evidence rule applies, or another tool holding one): ci's PASSED statement of
    commit A with B (which fails) as a second subject, or another artifact's digest, which an
    in-toto consumer matching any subject takes it for; the extension naming B; or PASSED over
    the extension's FAIL verdict. `attest verify` exited 0 on each, the first saying PASSED
    for B (all four, before the fix). A statement must name exactly one commit and one tree,
    the same in its extension, and say PASSED exactly when its gate verdict is PASS."""
    world.seal(plan(step("unit", check("sh", "-c", "test ! -e broken"))))
    assert world.run().verdict == "PASS"
    made = attest.build(world.handle(), None, None)
    statement = json.loads(made.payload())
    world.repo.write("broken", "yes\n")
    b = world.repo.commit("break it")
    assert world.run().verdict == "FAIL"
    tree = world.repo.git("rev-parse", f"{b}^{{tree}}").strip()
    extension = statement["predicate"][attest.EXTENSION]
    if how == "a second commit subject":
        statement["subject"] += [
            {"name": "commit", "digest": {"gitCommit": b}},
            {"name": "tree", "digest": {"gitTree": tree}},
        ]
    elif how == "a sha256 subject":
        statement["subject"].append({"name": "app.tar.gz", "digest": {"sha256": "ab" * 32}})
    elif how == "the extension names another commit":
        extension["commit"], extension["tree"] = b, tree
    else:
        extension["verdict"] = "FAIL"
    out = tmp_path / "vsa.json"
    _signed_by_ci(world, statement, out)
    checked = world.cli("attest", "verify", str(out))
    assert checked.code == 1, checked.out
    assert "authentic" not in checked.out and "the signed statement" in checked.err, checked.err


@pytest.mark.parametrize("steps", ["the only step", "one of two steps"])
def test_attack_attest_report_expired_evidence_shown_verified(world: World, steps: str) -> None:
    """ci's run proved step unit, valid for 1 s; it expires: the gate says UNKNOWN. `git audit
    report` still drew unit `verified` in the plan graph and `passed` in the requirement
    table, the run's word for a proof the gate no longer takes (both, before the fix). Each
    step is now shown in the gate's state: `expired`; a step still fresh stays verified."""
    extra = [step("lint")] if steps == "one of two steps" else []
    world.seal(plan(step("unit", valid_for="1s"), *extra))
    assert world.run().verdict == "PASS"
    time.sleep(1.5)
    assert world.gate().verdict == "UNKNOWN"
    shown = world.cli("report", "HEAD", "--format", "json")
    (entry,) = json.loads(shown.out)["plans"]
    rows = {row["step"]: row["status"] for req in entry["requirements"] for row in req["steps"]}
    assert rows["unit"] == "expired", rows
    assert 's_unit["unit"]:::expired' in entry["graph"], entry["graph"]
    if extra:
        assert rows["lint"] == "passed" and ":::verified" in entry["graph"], rows


IMPERSONATED = {  # the case of gitaudit's the agent's test report names a passing one after
    "the run's verdict": ("default.run", "verdict"),
    "the failing check": ("default.unit", "run: sh write.sh"),
}


@pytest.mark.parametrize("whose", sorted(IMPERSONATED))
def test_attack_attest_junit_artifact_case_in_gitaudits_name(world: World, whose: str) -> None:
    """The step's check fails; the JUnit report it stores as an artifact holds a passing case
    named as gitaudit names its own: classname `default.run` name `verdict`, or the failing
    check's. `show --format junit` copied it as it was: a passing `verdict` (or check) beside
    the failing one, and the only one left in a CI system that keeps one case per name (both,
    before the fix). An artifact's case in gitaudit's names is now classed `artifact:...`."""
    classname, name = IMPERSONATED[whose]
    junit = f'<testsuite><testcase classname="{classname}" name="{name}"/></testsuite>'
    world.repo.write(".gitignore", "reports/\n")
    world.repo.write(
        "write.sh", f"mkdir -p reports\nprintf '%s' '{junit}' > reports/j.xml\nexit 1\n"
    )
    world.seal(plan(step("unit", check("sh", "write.sh"), artifacts=["reports/j.xml"])))
    assert world.run().verdict == "FAIL"
    shown = world.cli("show", "--format", "junit")
    assert shown.code == 0, shown.err
    root = ET.fromstring(shown.out)
    ours = [c for c in root.iter("testcase") if (c.get("classname") or "").startswith("default.")]
    named = [c for c in ours if (c.get("classname"), c.get("name")) == (classname, name)]
    assert len(named) == 1 and named[0].find("failure") is not None, shown.out
    assert any(c.get("classname") == f"artifact:{classname}" for c in root.iter("testcase"))


@pytest.mark.parametrize("spec", ["latest", "the forged commit"])
@pytest.mark.parametrize("signer", ["unsigned", "mallory (untrusted)", "alice (a sealer)"])
def test_attack_attest_junit_of_a_forged_run_is_green(world: World, signer: str, spec: str) -> None:
    """ci's run passed tree A. The agent commits B, whose check fails, and writes a run commit
    of its own: ci's run.json with B's tree and head, unsigned, signed by a key nobody trusts,
    or by a key that is trusted but as no runner; it points the runs ref at it (or leaves the
    ref alone and names the commit). The gate says FAIL, but `show --format junit` read the
    commit without checking who signed it and wrote a green report for B: every case passed,
    the `verdict` case too, `gitaudit.tree` B's (6 of 6, before the fix). JUnit is now written
    only for a run a trusted runner signed; the command fails naming the run."""
    world.repo.write("t.sh", "exit 0\n")
    world.seal(plan(step("unit", check("sh", "t.sh"))))
    assert world.run().verdict == "PASS"
    honest = world.ref("refs/audit/runs/default")
    assert honest is not None
    world.repo.write("t.sh", "exit 1\n")
    world.repo.git("commit", "-qam", "broken")
    head, tree = world.ref("HEAD"), world.repo.git("rev-parse", "HEAD^{tree}").strip()

    def as_b(doc: dict[str, Any]) -> None:
        doc["head"], doc["tree"] = head, tree

    key = {"unsigned": None, "mallory (untrusted)": world.mallory, "alice (a sealer)": world.alice}
    forged = world.forge_run(honest, edit=as_b, signer=key[signer], move=spec == "latest")
    assert world.gate().verdict == "FAIL"
    shown = world.cli("show", "latest" if spec == "latest" else str(forged), "--format", "junit")
    assert shown.code != 0 and not shown.out.strip(), shown.out
    assert f"run {str(forged)[:12]} is not evidence" in shown.err
    assert len(shown.err.strip().splitlines()) <= 2, shown.err  # the error and its hint


@pytest.mark.parametrize("how", ["removed", "re-added without its label", "renamed"])
@pytest.mark.parametrize("extra", [[], ["--plan", "default"], ["HEAD"]])
def test_attack_attest_verdict_of_a_runner_untrusted_since(
    world: World, how: str, extra: list[str], tmp_path: Path
) -> None:
    """main is proven by one of the runners agent or ci (the policy's evidence rule); the agent
    holds the key of runner `agent` (labelled linux; the step must run on linux). Its run
    passes the commit and it has `git audit attest --for main` sign the verdict with ci's key
    (the runner key the gitaudit home holds). alice then stops trusting the agent's key: she
    removes it, re-adds it without its label, or under another name the rule does not list.
    The gate refuses the agent's evidence for main, but `attest verify` (also with `--plan
    default`, or with REV) still exited 0 on the envelope, PASSED for the commit and main (all
    nine, before the fix): a statement was checked against the contracts and the rule in force,
    never against the runners trusted now. A statement is now refused when a runner of the
    plans commit it was judged under is not that runner now; one added since changes nothing."""
    world.seal(plan(step("unit", check("true"), runs_on=["linux"])))
    agent = runner(world, "agent", frozenset({"linux"}))
    rules = (EvidenceRule(MAIN, ("agent", "ci")),)
    policy = replace(read_state(world.handle()).policy, evidence=rules)
    set_policy(world.handle(), world.alice, policy, allow_weaken=False, reason="runners")
    assert world.run(signer=agent).verdict == "PASS"
    assert world.gate(for_ref=MAIN).verdict == "PASS"
    out = tmp_path / "vsa.json"
    made = world.cli("attest", "--for", MAIN, "--key", str(world.keys["ci"]), "-o", str(out))
    assert made.code == 0, made.err
    assert world.cli("attest", "verify", str(out), *extra).code == 0
    runner(world, "bob")  # a runner added since: still accepted
    assert world.cli("attest", "verify", str(out), *extra).code == 0
    trust_remove(world.handle(), world.alice, "agent")
    if how == "re-added without its label":
        trust_add(world.handle(), world.alice, agent.public_key, "runner", "agent")
    elif how == "renamed":
        trust_add(
            world.handle(), world.alice, agent.public_key, "runner", "x", frozenset({"linux"})
        )
    assert world.gate(for_ref=MAIN).verdict != "PASS"
    checked = world.cli("attest", "verify", str(out), *extra)
    assert checked.code == 1, checked.out + checked.err
    assert "authentic: signed by ci" in checked.out and "PASSED for commit" in checked.out
    assert "runner agent (SHA256:" in checked.err and "is not that runner now" in checked.err


def test_attest_control_runner_removed_and_restored(world: World, tmp_path: Path) -> None:
    """Control: a runner removed and trusted again as it was (same key, name and labels) leaves
    the attestation accepted, as the gate accepts its evidence again."""
    world.seal(plan(step("unit", check("true"))))
    agent = runner(world, "agent")
    assert world.run(signer=agent).verdict == "PASS"
    out = tmp_path / "vsa.json"
    assert world.cli("attest", "--key", str(world.keys["ci"]), "-o", str(out)).code == 0
    trust_remove(world.handle(), world.alice, "agent")
    assert world.cli("attest", "verify", str(out)).code == 1
    trust_add(world.handle(), world.alice, agent.public_key, "runner", "agent")
    assert world.gate().verdict == "PASS"
    checked = world.cli("attest", "verify", str(out))
    assert checked.code == 0, checked.err


def _live_refused(world: World) -> None:
    world.seal(plan(step("unit", check("true"), workspace="live")))


def _agents_strict(world: World) -> None:
    """ann claims src/a.py; the commit changes it (ann's claim is live): a warning only."""
    world.repo.write("src/a.py", "a\n")
    world.seal(plan(step("unit", check("true"))))
    ci = ("--key", str(world.keys["ci"]))
    assert world.cli("agents", "register", "ann", *ci).code == 0
    claimed = world.cli("agents", "claim", "unit", "--paths", "src/a.py", "-a", "ann", *ci)
    assert claimed.code == 0, claimed.err
    world.repo.write("src/a.py", "not ann's\n")
    world.repo.commit("edit a claimed file")


# what the policy starts refusing: (how the evidence is made, the policy then, its words)
TIGHTENED: dict[str, tuple[Callable[[World], None], dict[str, str], str]] = {
    "live evidence refused": (
        _live_refused,
        {"live_evidence": "refuse"},
        "evidence from the live work tree is refused",
    ),
    "agents mode parallel-strict": (
        _agents_strict,
        {"agents": "parallel-strict"},
        "a run conflicting with another agent's claim is refused (agents: parallel-strict)",
    ),
}


@pytest.mark.parametrize("extra", [[], ["--plan", "default"], ["HEAD"]])
@pytest.mark.parametrize("how", sorted(TIGHTENED))
def test_attack_attest_verdict_under_a_policy_tightened_since(
    world: World, how: str, extra: list[str], tmp_path: Path
) -> None:
    """The step's evidence is of a kind the policy accepts for now: its checks ran in the live
    work tree (`workspace: live`, which the agent controls), or the run changed a file another
    agent (ann) holds a live claim on (parallel-warn: a warning). ci's run passed the commit
    and the agent had it attested (ci's key signs). alice then tightens the policy: live
    evidence refused, or agents mode parallel-strict. The gate says FAIL, but `attest verify`
    (also with `--plan default`, or with REV) still exited 0 on the envelope, PASSED for the
    commit (all six, before the fix): the statement was compared with the contracts and the
    evidence rules in force, never with the rest of the policy. A statement is now refused when
    the policy refuses, since its plans commit, evidence it accepted then."""
    make, tightened, words = TIGHTENED[how]
    make(world)
    assert world.run().verdict == "PASS"
    out = tmp_path / "vsa.json"
    made = world.cli("attest", "--key", str(world.keys["ci"]), "-o", str(out))
    assert made.code == 0, made.err
    assert world.cli("attest", "verify", str(out), *extra).code == 0
    handle = world.handle()
    policy = replace(read_state(handle).policy, **tightened)  # type: ignore[arg-type]
    set_policy(handle, world.alice, policy, allow_weaken=False, reason=None)
    assert world.gate().verdict == "FAIL"
    checked = world.cli("attest", "verify", str(out), *extra)
    assert checked.code == 1, checked.out + checked.err
    assert "authentic: signed by ci" in checked.out and "PASSED for commit" in checked.out
    assert "the policy is stricter now than when the attestation was made" in checked.err
    assert words in checked.err, checked.err


def test_attest_control_policy_relaxed_since(world: World, tmp_path: Path) -> None:
    """Control: a policy relaxed since (live evidence refused when attested, allowed now: a
    weakening alice signs) leaves the attestation of a step in the private checkout accepted."""
    handle = world.handle()
    strict = replace(read_state(handle).policy, live_evidence="refuse")
    set_policy(handle, world.alice, strict, allow_weaken=False, reason=None)
    world.seal(plan(step("unit", check("true"))))
    assert world.run().verdict == "PASS"
    out = tmp_path / "vsa.json"
    assert world.cli("attest", "--key", str(world.keys["ci"]), "-o", str(out)).code == 0
    lax = replace(read_state(handle).policy, live_evidence="allow")
    set_policy(handle, world.alice, lax, allow_weaken=True, reason="live is fine")
    checked = world.cli("attest", "verify", str(out))
    assert checked.code == 0, checked.err


def test_attack_attest_verdict_settled_by_a_reconciler_untrusted_since(
    world: World, tmp_path: Path
) -> None:
    """deploy's outcome was unknown (its check timed out); rita, a runner and reconciler, settled
    it by her word (`reconcile --observed pass`), the gate said PASS, and the agent had the
    commit attested (ci's key signs). alice then takes rita's reconciler role away (she stays a
    runner): the gate refuses the settlement, but `attest verify` still exited 0, PASSED
    (before the fix). A statement is now refused when a reconciler (or sealer) of the plans
    commit it was judged under is none now."""
    from gitaudit.crypto.keystore import generate_key, load_signer
    from tests.adversarial.test_reconcile import deploy_plan

    world.repo.write(".gitignore", "deployed.txt\n")
    world.seal(deploy_plan())
    assert world.run().verdict == "UNKNOWN"
    rita = generate_key("rita").private_path
    public = load_signer(rita).public_key
    trust_add(world.handle(), world.alice, public, "runner", "rita")
    trust_add(world.handle(), world.alice, public, "reconciler", "rita")
    settled = world.cli("reconcile", "deploy", "--observed", "pass", "--key", str(rita))
    assert settled.code == 0, settled.out + settled.err
    assert world.gate().verdict == "PASS"
    out = tmp_path / "vsa.json"
    assert world.cli("attest", "--key", str(world.keys["ci"]), "-o", str(out)).code == 0
    assert world.cli("attest", "verify", str(out)).code == 0
    trust_remove(world.handle(), world.alice, "rita")
    trust_add(world.handle(), world.alice, public, "runner", "rita")
    assert world.gate().verdict != "PASS"
    checked = world.cli("attest", "verify", str(out))
    assert checked.code == 1, checked.out + checked.err
    assert "rita (SHA256:" in checked.err and "is no reconciler now" in checked.err, checked.err
