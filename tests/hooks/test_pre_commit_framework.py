"""The pre-commit framework's pre-push stage (``gitaudit-pre-push`` in
``.pre-commit-hooks.yaml``), called in-process as the framework runs it: no stdin, the pushed
ref in ``PRE_COMMIT_*`` variables.

End to end (through the framework's variables on a real push): ``tests/e2e/test_team.py``.
"""

from __future__ import annotations

import pytest

from gitaudit.hooks import entry
from tests.e2e.conftest import PLAN
from tests.gitrepo import GitRepo, audit


@pytest.fixture
def two_commits(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> tuple[GitRepo, str, str]:
    """Commit A proven by a run; commit B on top of it, not; the work tree is B's."""
    repo.write("greeting.txt", "hello world\n")
    repo.write_plan(PLAN)
    proven = repo.commit("greeter with a plan")
    for args in (["init"], ["plan", "seal", "-m", "initial"], ["run"]):
        assert audit(repo.path, *args).code == 0, args
    repo.write("greeting.txt", "hello, unproven\n")
    unproven = repo.commit("unproven")
    monkeypatch.chdir(repo.path)
    for name in ("PRE_COMMIT_TO_REF", "PRE_COMMIT_FROM_REF", "PRE_COMMIT_LOCAL_BRANCH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PRE_COMMIT_REMOTE_BRANCH", "refs/heads/main")
    return repo, proven, unproven


def _hook(capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = entry.main(["pre-commit-push"])
    return code, capsys.readouterr().err


def test_the_pushed_commit_is_judged_not_the_work_tree(
    two_commits: tuple[GitRepo, str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, proven, unproven = two_commits
    monkeypatch.setenv("PRE_COMMIT_TO_REF", proven)  # pushing A while B is checked out
    assert _hook(capsys) == (0, "")
    monkeypatch.setenv("PRE_COMMIT_TO_REF", unproven)
    code, err = _hook(capsys)
    assert code == 1 and "UNKNOWN" in err, err


def test_without_the_variables_the_work_tree_is_judged(
    two_commits: tuple[GitRepo, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _hook(capsys)
    assert code == 1 and "the push" in err, err


def test_the_audit_refs_are_left_to_the_server(
    two_commits: tuple[GitRepo, str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, _, unproven = two_commits
    monkeypatch.setenv("PRE_COMMIT_REMOTE_BRANCH", "refs/audit/runs/default")
    monkeypatch.setenv("PRE_COMMIT_TO_REF", unproven)
    assert _hook(capsys) == (0, "")


def test_a_local_branch_with_spaces_and_a_from_ref_that_is_no_object_are_judged(
    two_commits: tuple[GitRepo, str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The local side is any revision the pusher wrote (spaces and all), and pre-commit's
    FROM_REF for a new branch may be `sha^`: the pushed commit is judged all the same."""
    _, proven, unproven = two_commits
    monkeypatch.setenv("PRE_COMMIT_LOCAL_BRANCH", "main^{/with a plan}")
    monkeypatch.setenv("PRE_COMMIT_FROM_REF", f"{proven}^")
    monkeypatch.setenv("PRE_COMMIT_TO_REF", proven)
    assert _hook(capsys) == (0, "")
    monkeypatch.setenv("PRE_COMMIT_TO_REF", unproven)
    code, err = _hook(capsys)
    assert code == 1 and "UNKNOWN" in err, err
