"""Plan files known to satisfy the schema (gitaudit/plan/known_valid.py): the marks bind the
bytes, the schema and the gitaudit version, and need the local key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gitaudit.plan import catalog, known_valid, load
from gitaudit.plan.catalog import check_file
from gitaudit.plan.known_valid import KnownValid
from gitaudit.plan.store import PlanFile

PLAN = {
    "task": "t",
    "requirements": [{"id": "R", "description": "r"}],
    "steps": [
        {
            "id": "s",
            "covers": ["R"],
            "depends_on": [],
            "verify": [{"type": "run", "argv": ["true"]}],
        }
    ],
}


def data(**extra: Any) -> bytes:
    return json.dumps({**PLAN, **extra}).encode()


@pytest.fixture
def known(tmp_path: Path) -> KnownValid:
    (tmp_path / "git").mkdir()
    return KnownValid(str(tmp_path / "git"), str(tmp_path / "work"))


@pytest.fixture
def validator_calls(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every schema check made (by the compiled validator)."""
    calls: list[bytes] = []
    real = load.schema_problems

    def counted(value: Any, **kw: Any) -> Any:
        calls.append(json.dumps(value).encode())
        return real(value, **kw)

    monkeypatch.setattr(load, "schema_problems", counted)
    return calls


def test_a_valid_plan_is_checked_once_then_known(
    known: KnownValid, validator_calls: list[bytes]
) -> None:
    first = check_file(PlanFile("default", "x", data()), known=known)
    assert first.report.valid and len(validator_calls) == 1
    catalog._CHECKED.clear()  # a new process: only the mark can skip the check
    again = check_file(PlanFile("default", "x", data()), known=KnownValid(known.gitdir, None))
    assert again.report.valid and len(validator_calls) == 1  # skipped: the mark was read back
    assert again.digest == first.digest and again.plan == first.plan


def test_other_bytes_are_checked(known: KnownValid, validator_calls: list[bytes]) -> None:
    check_file(PlanFile("default", "x", data()), known=known)
    check_file(PlanFile("default", "x", data() + b" "), known=known)  # one more space
    assert len(validator_calls) == 2


def test_an_invalid_plan_leaves_no_mark(known: KnownValid) -> None:
    bad = data(surprise=1)
    checked = check_file(PlanFile("default", "x", bad), known=known)
    assert not checked.report.valid and checked.report.errors[0].code.startswith("schema.")
    assert bad not in known
    assert not (Path(known.gitdir) / "gitaudit" / "valid-plans").exists()
    again = check_file(PlanFile("default", "x", bad), known=KnownValid(known.gitdir, None))
    assert not again.report.valid


def test_semantic_rules_still_apply_to_known_bytes(known: KnownValid) -> None:
    """The mark skips the schema check only: a plan valid by the schema but not by the
    semantic rules (a step covering an unknown requirement) stays invalid."""
    doc = json.loads(data())
    doc["steps"][0]["covers"] = ["NOPE"]
    raw = json.dumps(doc).encode()
    assert not check_file(PlanFile("default", "x", raw), known=known).report.valid
    assert raw in known  # the schema held
    catalog._CHECKED.clear()  # a new process, which finds the mark
    assert not check_file(PlanFile("default", "x", raw), known=known).report.valid


def test_a_run_checks_its_plan_with_the_marks(
    known: KnownValid, validator_calls: list[bytes], tmp_path: Path
) -> None:
    """``check_worktree`` (what ``git audit run`` checks its plan with) passes the marks on:
    bytes the gate found schema-valid are not checked again by a new process."""
    work = tmp_path / "work"
    (work / ".gitaudit" / "plans").mkdir(parents=True)
    (work / ".gitaudit" / "plans" / "default.json").write_bytes(data())
    (first,) = catalog.check_worktree(work, "default", known=known)
    assert first.report.valid and len(validator_calls) == 1
    catalog._CHECKED.clear()
    (again,) = catalog.check_worktree(work, "default", known=KnownValid(known.gitdir, None))
    assert again.report.valid and again.digest == first.digest
    assert len(validator_calls) == 1
    catalog._CHECKED.clear()
    (unmarked,) = catalog.check_worktree(work, "default")
    assert unmarked.report.valid and len(validator_calls) == 2


@pytest.mark.parametrize("change", ["version", "schema", "key"])
def test_a_mark_binds_the_version_the_schema_and_the_key(
    known: KnownValid, change: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    check_file(PlanFile("default", "x", data()), known=known)
    assert data() in KnownValid(known.gitdir, None)
    if change == "version":
        monkeypatch.setattr(known_valid, "__version__", "99.0")
    elif change == "schema":
        stored = load.schema_bytes()
        monkeypatch.setattr(load, "schema_bytes", lambda: stored + b" ")
    else:
        monkeypatch.setenv("GITAUDIT_HOME", str(tmp_path / "another-home"))
    assert data() not in KnownValid(known.gitdir, None)


def test_no_key_no_marks(known: KnownValid, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a private key (here: one inside the work tree), nothing is known."""
    check_file(PlanFile("default", "x", data()), known=known)
    from gitaudit import secret

    monkeypatch.setattr(secret, "local_key", lambda *a, **k: None)
    assert data() not in KnownValid(known.gitdir, None)


def test_the_list_keeps_the_newest(known: KnownValid) -> None:
    plans = [data(task=f"t{i}") for i in range(known_valid.KEPT + 3)]
    for raw in plans:
        check_file(PlanFile("default", "x", raw), known=known)
    fresh = KnownValid(known.gitdir, None)
    assert [raw in fresh for raw in plans] == [False] * 3 + [True] * known_valid.KEPT


def test_a_list_that_cannot_be_written_is_let_go(known: KnownValid) -> None:
    (Path(known.gitdir) / "gitaudit").write_text("a file where the folder goes")
    assert check_file(PlanFile("default", "x", data()), known=known).report.valid
    assert data() not in KnownValid(known.gitdir, None)


def test_check_file_without_known_checks_once_a_process(validator_calls: list[bytes]) -> None:
    """Without marks every process checks the schema; within one, the same bytes, name and
    source are checked once (a run checks its plan, then judges the tree it proved). Other
    bytes, or the same bytes from another source, are checked again."""
    for _ in range(2):
        assert catalog.check_file(PlanFile("default", "x", data())).report.valid
    assert len(validator_calls) == 1
    assert catalog.check_file(PlanFile("default", "y", data())).report.valid
    assert catalog.check_file(PlanFile("other", "x", data())).report.valid
    assert len(validator_calls) == 3
    catalog._CHECKED.clear()  # a new process
    assert catalog.check_file(PlanFile("default", "x", data())).report.valid
    assert len(validator_calls) == 4


def test_the_environment_layer_is_checked_every_time(
    validator_calls: list[bytes], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A required tool that leaves PATH between two checks of the same bytes is missing in the
    second: only the plan's own layers are remembered."""
    tool = tmp_path / "bin" / "frobnicate"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}:/usr/bin:/bin")
    file = PlanFile("default", "x", data(required_tools=["frobnicate"]))
    first = catalog.check_file(file)
    assert first.report.valid and first.digest is not None
    tool.unlink()
    second = catalog.check_file(file)
    assert first.report.environment == ()
    assert [p.code for p in second.report.environment] == ["env.missing-tool"]
    assert second.report.valid and second.digest == first.digest  # the machine's problem
    assert catalog.check_file(file, environment=False).report.environment == ()
    assert len(validator_calls) == 1
