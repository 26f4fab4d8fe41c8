"""Regression tests: the crashes fuzzing found (fixed in 0c578f7), each as its minimal input.

Every input here once escaped as something other than a GitAuditError (RecursionError,
UnicodeEncodeError, ValueError, rfc8785 errors, TypeError/AttributeError/LedgerError out of the
gate). Now each must be reported the way its layer reports bad input: a plan problem, the
reader's own error type, or a gate verdict that is not PASS.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitaudit.errors import LedgerError, SealError, TrustError
from gitaudit.gate.judge import judge
from gitaudit.git.repo import open_repo
from gitaudit.ledger.objects import dumps
from gitaudit.ledger.plansref import state_at
from gitaudit.ledger.records import RUN_FORMAT
from gitaudit.ledger.runs import read_run
from gitaudit.ledger.trust import POLICY_PATH, ROLES_PATH, Policy, policy_from_tree, trust_from_tree
from gitaudit.plan.catalog import check_file
from gitaudit.plan.store import PlanFile
from gitaudit.plan.validate import validate_bytes
from tests.fuzz._support import (
    bare_repo,
    commit_files,
    gate_world,
    ideal_doc,
    install_run,
    judge_gate,
)
from tests.fuzz.test_ledger_fuzz import PLANS_FILES, TRUST
from tests.gitrepo import GitRepo

DEEP = b"[" * 100_000  # far beyond the interpreter's recursion limit (1000)


def valid_plan(**step: Any) -> dict[str, Any]:
    return {
        "requirements": [{"id": "R", "description": "r"}],
        "steps": [
            {"id": 1, "covers": ["R"], "verify": [{"type": "run", "argv": ["true"]}], **step}
        ],
    }


def rejected(data: bytes) -> list[str]:
    """The error codes of a plan that must be invalid (and must not crash any layer)."""
    _plan, report = validate_bytes(data, name="p", source="p.json", environment=False)
    checked = check_file(PlanFile("p", "p.json", data), environment=False)
    assert checked.digest is None and not checked.report.valid
    assert report.problems == checked.report.problems[: len(report.problems)]
    return [p.code for p in checked.report.errors]


# ----------------------------------------------------------------------------- plans


def test_deeply_nested_plan() -> None:  # was RecursionError in load.parse_json
    assert rejected(DEEP) == ["json.invalid"]


def test_lone_surrogate_object_key() -> None:  # was UnicodeEncodeError in jsonschema_rs
    assert rejected(b'{"\\ud800": 1, "steps": []}') == ["json.invalid"]


@pytest.mark.parametrize("key", ["²", "1" * 5000])
def test_schema_error_under_a_digit_like_key(key: str) -> None:  # was ValueError in _path_key
    plan = valid_plan()
    plan["steps"][0]["verify"][0]["env"] = {key: 1}  # env values must be strings
    assert "schema.type" in rejected(json.dumps(plan).encode())


def test_valid_for_with_a_huge_number() -> None:  # was ValueError in parse_duration
    assert rejected(json.dumps(valid_plan(valid_for="9" * 4301 + "d")).encode())


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(valid_plan(max_attempts=2**53 + 1)),
        json.dumps(valid_plan(valid_for="9" * 20 + "d")),
        json.dumps(valid_plan(valid_for="999999999999w")),
        json.dumps(valid_plan(cost=1.5)).replace("1.5", "1e400"),
        json.dumps(valid_plan(title="\ud800")),
        json.dumps(valid_plan(id=2**63)),
    ],
    ids=["max_attempts", "valid_for-20", "valid_for-12w", "cost-1e400", "surrogate", "id-2**63"],
)
def test_plans_whose_contract_rfc8785_cannot_encode(text: str) -> None:  # were rfc8785 errors
    assert rejected(text.encode())


def test_gate_on_a_tree_whose_plan_has_a_huge_integer(tmp_path: Path) -> None:
    repo = GitRepo.create(tmp_path / "r")
    plan = valid_plan()
    plan["steps"][0]["verify"][0]["expect_exit"] = 2**63
    repo.write_plan(plan)
    repo.commit("plan")
    result = judge(open_repo(repo.path), "HEAD")
    assert result.verdict == "FAIL"
    assert [r.code for p in result.plans for r in p.reasons] == ["plan.invalid"]


# ----------------------------------------------------------------------------- ledger


def _commit(files: dict[str, bytes]) -> pygit2.Commit:
    repo = bare_repo()
    commit = repo[commit_files(repo, files)]
    assert isinstance(commit, pygit2.Commit)
    return commit


def test_deeply_nested_run_json() -> None:  # was RecursionError in read_run
    repo = bare_repo()
    oid = commit_files(repo, {"run.json": DEEP})
    with pytest.raises(LedgerError, match="not valid JSON"):
        read_run(repo, oid)


def test_deeply_nested_seal_record() -> None:  # was RecursionError in state_at
    commit = _commit({**PLANS_FILES, "seals/default.json": DEEP})
    with pytest.raises(SealError, match="not valid JSON"):
        state_at(bare_repo(), commit)


def test_deeply_nested_roles() -> None:  # was RecursionError in trust_from_tree
    commit = _commit({**TRUST.files(), ROLES_PATH: DEEP})
    with pytest.raises(TrustError, match="malformed trust files"):
        trust_from_tree(bare_repo(), commit.tree, "x")


def test_deeply_nested_policy() -> None:  # was RecursionError in policy_from_tree
    commit = _commit({POLICY_PATH: DEEP, "x": dumps(Policy().to_json())})
    with pytest.raises(TrustError, match="not valid JSON"):
        policy_from_tree(bare_repo(), commit.tree, "x")


# ----------------------------------------------------------------------------- the gate


def _not_a_pass() -> list[str]:
    result = judge_gate()
    assert result.verdict in ("FAIL", "UNKNOWN"), result
    return [r.code for p in result.plans for r in p.reasons]


def test_gate_with_a_deeply_nested_unsigned_run() -> None:  # was RecursionError in index
    install_run(DEEP, signed=False)
    _not_a_pass()


def _blocked_b(upstream: Any) -> dict[str, Any]:
    doc = ideal_doc(gate_world())
    doc["steps"]["b"].update(status="blocked", upstream=upstream)
    return doc


def _reasons_not_a_list() -> dict[str, Any]:
    doc = ideal_doc(gate_world())
    doc.update(verdict="FAIL", reasons=5)
    return doc


def _surrogate_verdict() -> dict[str, Any]:
    doc = ideal_doc(gate_world())
    doc["verdict"] = "\ud800"
    return doc


@pytest.mark.parametrize(
    "make",
    [
        lambda: _blocked_b([5]),
        lambda: _blocked_b(5),
        lambda: _blocked_b([{"passed": False, "checks": 5}]),
        _reasons_not_a_list,
        _surrogate_verdict,
    ],
    ids=["upstream-[5]", "upstream-5", "upstream-checks-5", "reasons-5", "verdict-surrogate"],
)
def test_gate_with_malformed_fields_of_a_signed_run(make: Any) -> None:  # were Type/AttributeError
    install_run(json.dumps(make()).encode())
    _not_a_pass()


def test_gate_with_a_carried_origin_whose_step_is_not_an_object() -> None:  # was AttributeError
    world = gate_world()
    middle = install_run(json.dumps({"format": RUN_FORMAT, "steps": {"a": 5}}).encode())
    doc = ideal_doc(world)
    doc["steps"]["a"]["carried_from"] = str(middle)
    install_run(json.dumps(doc).encode(), parent=middle)
    _not_a_pass()


def test_gate_with_an_unreadable_stale_run() -> None:  # was LedgerError out of assess
    doc = ideal_doc(gate_world())
    del doc["format"]
    doc["contract_digest"] = "sha256:" + "f" * 64  # another contract: only the stale lookup
    install_run(json.dumps(doc).encode())
    _not_a_pass()
