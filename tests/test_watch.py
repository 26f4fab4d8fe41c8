"""`git audit watch`: following the work tree, trial runs that re-run only changed steps, and
recorded rounds."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest

from gitaudit.git.repo import open_repo
from gitaudit.plan.catalog import check_worktree
from gitaudit.run.trial import Memory, trial
from gitaudit.run.watching import trees
from tests.gitrepo import GitRepo, audit

PLAN = {
    "task": "watched",
    "requirements": [{"id": "R", "description": "r"}],
    "steps": [
        {
            "id": "unit",
            "covers": ["R"],
            "inputs": ["src/*"],
            "verify": [{"type": "run", "argv": ["true"]}],
        },
        {
            "id": "docs",
            "covers": ["R"],
            "inputs": ["docs/*"],
            "verify": [{"type": "run", "argv": ["test", "-f", "docs/index.md"]}],
        },
    ],
}


@pytest.fixture
def watched(repo: GitRepo) -> GitRepo:
    repo.write("src/a.py", "a\n")
    repo.write("docs/index.md", "# docs\n")
    repo.write_plan(PLAN)
    repo.commit("plan")
    for args in (["keys", "generate"], ["trust", "init"], ["plan", "seal"]):
        assert audit(repo.path, *args).code == 0
    return repo


def test_trials_rerun_only_steps_whose_inputs_changed(watched: GitRepo) -> None:
    handle = open_repo(watched.path)
    (checked,) = check_worktree(watched.path, "default")
    plan = checked.require_valid()
    memory = Memory()
    first = trial(handle, plan, memory)
    assert first.ran == ("unit", "docs") and first.carried == ()
    watched.write("docs/extra.md", "more\n")
    second = trial(handle, plan, memory)
    assert second.ran == ("docs",) and second.carried == ("unit",)
    (watched.path / "docs/index.md").unlink()
    third = trial(handle, plan, memory)
    assert third.states() == {"unit": "verified", "docs": "failed"}
    assert watched.git("for-each-ref", "refs/audit/runs/") == ""  # nothing was recorded


def test_watch_once_without_record_signs_nothing(watched: GitRepo) -> None:
    result = audit(watched.path, "watch", "--once")
    assert result.code == 0, result.err
    assert "default: tree" in result.out and "ran unit, docs" in result.out
    assert "(not recorded)" in result.out and "gate: UNKNOWN" in result.out
    assert "frontier:" in result.out and result.out.rstrip().endswith("stopped")
    assert watched.git("for-each-ref", "refs/audit/runs/") == ""


def test_watch_once_with_record_records_and_passes(watched: GitRepo) -> None:
    result = audit(watched.path, "watch", "--once", "--record")
    assert result.code == 0, result.err
    assert "default: PASS" in result.out and "gate: PASS" in result.out
    assert watched.git("rev-parse", "refs/audit/runs/default").strip()


@pytest.mark.parametrize("record", [False, True])
def test_a_step_blocked_by_a_failure_is_not_said_to_have_run(repo: GitRepo, record: bool) -> None:
    """A deploy step after a failing one is blocked, not executed: the round names it as not
    run, with why, and never among what ran (a trial said "ran unit, docs, deploy" before)."""
    unit, docs = cast(list[dict[str, Any]], PLAN["steps"])
    index = {"name": "index", "verify": [{"type": "file_exists", "path": "docs/index.md"}]}
    deploy = {
        "id": "deploy",
        "covers": ["R"],
        "depends_on": ["docs"],
        "requires_outputs": [{"step": "docs", "name": "index"}],
        "verify": [{"type": "run", "argv": ["true"]}],
    }
    repo.write("src/a.py", "a\n")
    repo.write_plan({**PLAN, "steps": [unit, {**docs, "outputs": [index]}, deploy]})
    repo.commit("plan")
    for args in (["keys", "generate"], ["trust", "init"], ["plan", "seal"]):
        assert audit(repo.path, *args).code == 0
    result = audit(repo.path, "watch", "--once", *(["--record"] if record else []))
    assert result.code == 0, result.err
    (said,) = [line for line in result.out.splitlines() if line.startswith("default: ")]
    assert "ran unit, docs" in said and "deploy" not in said.split("not run:")[0], said
    assert "not run: deploy (blocked)" in said, said
    if not record:
        handle = open_repo(repo.path)
        (checked,) = check_worktree(repo.path, "default")
        done = trial(handle, checked.require_valid(), Memory())
        assert (done.ran, done.carried, done.held) == (("unit", "docs"), (), ("deploy",))


@pytest.mark.parametrize("use", ["watchfiles", "polling"])
def test_trees_follow_changes_and_stop(watched: GitRepo, use: str) -> None:
    stop = threading.Event()
    guard = threading.Timer(60, stop.set)  # never hang the suite
    guard.start()
    seen: list[str] = []
    try:
        for tree in trees(watched.path, stop, debounce=0.1, poll=0.1, use=use):
            seen.append(tree)
            if len(seen) == 1:
                (watched.path / ".git" / "ignored-by-watch").write_text("x")
                (watched.path / "src" / "b.py").write_text("b\n")
            else:
                stop.set()
                break
    finally:
        guard.cancel()
    assert len(seen) == 2 and seen[0] != seen[1]
    assert seen[0] == watched.head_tree()


def test_ctrl_c_stops_cleanly(watched: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    import gitaudit.cli.watch_cmds as watch_cmds

    def interrupted(*_args: object, **_kw: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(watch_cmds, "_round", interrupted)
    result = audit(watched.path, "watch")
    assert result.code == 0 and result.out.rstrip().endswith("stopped")


def test_a_trial_leaves_an_open_outcome_alone_and_runs_the_rest(repo: GitRepo) -> None:
    """deploy (not idempotent) timed out in a recorded run: trials do not execute it again until
    it is reconciled (run's rule, :func:`gitaudit.run.trial._open_outcomes`); unit still runs.
    Nor, before it (no open outcome), does a trial execute deploy: a trial never executes a step
    that is not idempotent (its effect is not undone, and a trial records no outcome), and says
    why; unit runs."""
    slow = {"type": "run", "argv": ["sh", "-c", "test -e slow && sleep 30; true"], "timeout": 1}
    repo.write_plan(
        {
            "task": "watched",
            "requirements": [{"id": "R", "description": "r"}],
            "steps": [
                {
                    "id": "deploy",
                    "covers": ["R"],
                    "depends_on": [],
                    "idempotent": False,
                    "verify": [slow],
                },
                {
                    "id": "unit",
                    "covers": ["R"],
                    "depends_on": [],
                    "verify": [{"type": "run", "argv": ["true"]}],
                },
            ],
        }
    )
    repo.commit("plan")
    for args in (["keys", "generate"], ["trust", "init"], ["plan", "seal"]):
        assert audit(repo.path, *args).code == 0
    handle = open_repo(repo.path)
    (checked,) = check_worktree(repo.path, "default")
    plan = checked.require_valid()
    first = trial(handle, plan, Memory())
    assert first.states() == {"deploy": "pending", "unit": "verified"}
    assert (first.ran, first.held) == (("unit",), ("deploy",))
    assert "a trial never executes it" in first.outcome.steps["deploy"].reason
    (repo.path / "slow").write_text("1\n")
    repo.commit("slow")  # the private checkout holds what the tree holds
    assert audit(repo.path, "run").code == 3  # deploy timed out: its outcome is unknown
    (repo.path / "slow").unlink()
    repo.commit("fast")
    done = trial(handle, plan, Memory())
    states = done.states()
    assert states == {"deploy": "pending", "unit": "verified"}, states
