"""A run checks the sealed copy of its plan with the schema marks (gitaudit/plan/known_valid.py),
as it checks the plan file: bytes found schema-valid before are not checked against the schema
again by a new process, and the schema's validator is not loaded for them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gitaudit.plan import catalog, load
from tests.gitrepo import GitRepo, audit
from tests.run.conftest import Sealer, make_plan, run_step


@pytest.fixture
def schema_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The plans (by task) checked against the schema from here on."""
    calls: list[str] = []
    real = load.schema_problems

    def counted(value: Any, **kw: Any) -> Any:
        calls.append(json.dumps(value)[:60])
        return real(value, **kw)

    monkeypatch.setattr(load, "schema_problems", counted)
    return calls


def test_a_run_checks_the_sealed_copy_with_the_marks(
    repo: GitRepo, sealed: Sealer, schema_checks: list[str]
) -> None:
    sealed(make_plan(run_step("a", "true", idempotent=False)))
    assert audit(repo.path, "run").code == 0  # the plan's bytes found schema-valid: marked
    catalog._CHECKED.clear()  # a new process: only the marks can skip the check
    schema_checks.clear()
    result = audit(repo.path, "run", "--fresh")
    assert result.code == 0, result.err
    assert schema_checks == []


def test_a_sealed_copy_without_a_mark_is_checked(
    repo: GitRepo, sealed: Sealer, schema_checks: list[str]
) -> None:
    """The plan file rewritten with other white space (the same contract): its bytes are not
    the sealed copy's, so the sealed copy is checked against the schema in full, then marked.
    (With ``--plan`` the run refreshes no verdict memo: these are the run's own checks.)"""
    plan = make_plan(run_step("a", "true", idempotent=False))
    sealed(plan)
    (repo.path / ".git" / "gitaudit" / "valid-plans").unlink(missing_ok=True)
    repo.write(".gitaudit/plans/default.json", json.dumps(plan, indent=4))
    repo.commit("the plan, reformatted")
    catalog._CHECKED.clear()
    schema_checks.clear()
    result = audit(repo.path, "run", "--plan", "default")
    assert result.code == 0, result.err
    assert len(schema_checks) == 2  # the plan file and the sealed copy: other bytes
    catalog._CHECKED.clear()
    schema_checks.clear()
    assert audit(repo.path, "run", "--fresh", "--plan", "default").code == 0
    assert schema_checks == []  # both marked now
