"""Exhausted steps stay exhausted: `--force` evidence counts after a sealer's reset of the step's
failed attempts, and failures count afresh from the reset. Through the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gitaudit.cli.context import signer_for
from gitaudit.errors import LedgerError
from gitaudit.git.repo import open_repo
from gitaudit.ledger import watermark
from gitaudit.run.recorder import run_plan
from tests.gitrepo import GitRepo, audit
from tests.run.conftest import Sealer, make_plan, run_step


def run_doc(repo: GitRepo) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(repo.git("show", "refs/audit/runs/default:run.json"))
    return doc


def exhaust(repo: GitRepo, sealed: Sealer, flag: Path) -> None:
    """Step a fails while *flag* exists, at most twice; run it until it is exhausted."""
    flag.write_text("failing\n")
    sealed(make_plan(run_step("a", "test", "!", "-e", str(flag), max_attempts=2)))
    for _ in range(2):
        assert audit(repo.path, "run").code == 1
    assert audit(repo.path, "run").code == 1
    assert run_doc(repo)["steps"]["a"]["status"] == "exhausted"
    assert "git audit plan reset-attempts a" in run_doc(repo)["steps"]["a"]["reason"]


def test_forced_evidence_counts_only_after_a_reset(
    repo: GitRepo, sealed: Sealer, tmp_path: Path
) -> None:
    flag = tmp_path / "flag"
    exhaust(repo, sealed, flag)
    flag.unlink()
    forced = audit(repo.path, "run", "--force")
    assert run_doc(repo)["steps"]["a"]["status"] == "passed", forced.out
    # the run passed, but says plainly that its evidence does not count yet
    assert forced.code == 1 and "default: PASS" in forced.out
    assert (
        "step a was forced past its max_attempts: its evidence counts once a sealer" in forced.out
    )
    status = audit(repo.path, "status", "--json")
    assert status.code == 1
    (reason,) = status.json()["plans"][0]["reasons"]
    assert reason["code"] == "evidence.forced-past-exhaustion" and reason["step"] == "a"
    assert "`git audit plan reset-attempts a --plan default --reason ...`" in reason["hint"]
    reset = audit(repo.path, "plan", "reset-attempts", "a", "--reason", "the flag was stale")
    assert reset.code == 0, reset.err
    assert reset.out.startswith("reset 2 failed attempt(s) of step a of plan 'default' in ")
    assert audit(repo.path, "status").code == 0
    again = audit(repo.path, "plan", "reset-attempts", "a", "--reason", "twice")
    assert again.code == 0 and "no failed attempts to reset; nothing to do" in again.out
    history = audit(repo.path, "plan", "history")
    lines = history.out.splitlines()
    assert " default reset-attempts a by " in lines[0], history.out
    assert lines[1].strip() == "2 failed attempt(s) no longer count  reason: the flag was stale"
    assert " default v1 initial by " in lines[2]
    entries = audit(repo.path, "plan", "history", "--json").json()
    assert [e["change"] for e in entries] == ["reset-attempts", "initial"]
    assert entries[0]["step"] == "a" and entries[0]["failed"] == 2 and entries[0]["count"] == 2


def test_failures_count_afresh_after_a_reset(repo: GitRepo, sealed: Sealer, tmp_path: Path) -> None:
    flag = tmp_path / "flag"
    exhaust(repo, sealed, flag)
    (front,) = audit(repo.path, "next", "--json").json()["plans"]
    assert front["exhausted"] == ["a"]
    assert audit(repo.path, "plan", "reset-attempts", "a", "-m", "retry the infra").code == 0
    (front,) = audit(repo.path, "next", "--json").json()["plans"]
    assert front["exhausted"] == [] and front["retryable"] == ["a"], front
    for used in (1, 2):  # not exhausted any more, and counting from the reset
        assert audit(repo.path, "run").code == 1
        entry = run_doc(repo)["steps"]["a"]
        assert (entry["status"], entry["attempts_used"], entry["attempt"]) == ("failed", used, used)
    assert audit(repo.path, "run").code == 1
    assert run_doc(repo)["steps"]["a"]["status"] == "exhausted"
    (front,) = audit(repo.path, "next", "--json").json()["plans"]
    assert front["exhausted"] == ["a"]  # mission control counts from the reset too
    assert audit(repo.path, "plan", "reset-attempts", "a", "-m", "once more").out.startswith(
        "reset 2 failed attempt(s)"
    )


def test_reset_is_refused_without_reason_step_or_sealer_key(
    repo: GitRepo, sealed: Sealer, tmp_path: Path
) -> None:
    exhaust(repo, sealed, tmp_path / "flag")
    tip = repo.git("rev-parse", "refs/audit/plans").strip()
    no_reason = audit(repo.path, "plan", "reset-attempts", "a")
    assert no_reason.code == 1 and "needs --reason" in no_reason.err
    ghost = audit(repo.path, "plan", "reset-attempts", "ghost", "-m", "x")
    assert ghost.code == 2 and "plan 'default' has no step ghost" in ghost.err
    unknown_plan = audit(repo.path, "plan", "reset-attempts", "a", "--plan", "nope", "-m", "x")
    assert unknown_plan.code == 1 and "plan 'nope' is not sealed as active" in unknown_plan.err
    made = audit(repo.path, "keys", "generate", "--name", "ci")
    public, private = made.out.splitlines()[0], made.out.splitlines()[2].split(": ", 1)[1]
    added = audit(repo.path, "trust", "add", public, "--role", "runner", "--name", "ci")
    assert added.code == 0, added.err
    tip = repo.git("rev-parse", "refs/audit/plans").strip()
    runner = audit(repo.path, "plan", "reset-attempts", "a", "-m", "x", "--key", private)
    assert runner.code == 1 and "is not a sealer" in runner.err, runner.err
    assert len(runner.err.splitlines()) == 2 and "Traceback" not in runner.err
    assert repo.git("rev-parse", "refs/audit/plans").strip() == tip


def test_only_the_exhausted_steps_of_a_forced_run_do_not_count(
    repo: GitRepo, sealed: Sealer, tmp_path: Path
) -> None:
    flag = tmp_path / "flag"
    flag.write_text("failing\n")
    sealed(
        make_plan(
            run_step("a", "test", "!", "-e", str(flag), max_attempts=1),
            run_step("b", "true", max_attempts=1),
            run_step("c", "test", "!", "-e", str(flag), max_attempts=2),
        )
    )
    assert audit(repo.path, "run").code == 1  # a and c fail once: a is exhausted, c is not
    flag.unlink()
    assert audit(repo.path, "run", "--force").code == 1
    status = audit(repo.path, "status", "--json")
    reasons = status.json()["plans"][0]["reasons"]
    assert [(r["code"], r["step"]) for r in reasons] == [("evidence.forced-past-exhaustion", "a")]


def test_a_rewound_ledger_is_refused_and_marks_never_move_back(
    repo: GitRepo, sealed: Sealer, tmp_path: Path
) -> None:
    """The failures are counted on the runs ref: one moved back since it was seen is refused
    before anything runs, and no run recorded on it (made while it was moved back) moves the
    mark off the tip the failures are on."""
    exhaust(repo, sealed, tmp_path / "flag")
    ref = "refs/audit/runs/default"
    tip = repo.git("rev-parse", ref).strip()
    first = repo.git("rev-list", "--max-parents=0", ref).strip()
    repo.git("update-ref", ref, first)
    handle = open_repo(repo.path)
    with pytest.raises(LedgerError, match=f"{ref} moved backwards or was rewritten"):
        run_plan(handle, "default", signer_for(handle, None))
    assert repo.git("rev-parse", ref).strip() == first  # nothing recorded
    watermark.record(handle.gitdir, {ref: first}, "seen", handle.git)
    watermark.record(handle.gitdir, {ref: first}, "verified", handle.git)
    assert watermark.load(handle.gitdir, "seen")[ref] == tip
    assert ref not in watermark.load(handle.gitdir, "verified")
    repo.git("update-ref", ref, tip)
    watermark.record(handle.gitdir, {ref: tip}, "verified", handle.git)  # forward: recorded
    assert watermark.load(handle.gitdir, "verified")[ref] == tip
