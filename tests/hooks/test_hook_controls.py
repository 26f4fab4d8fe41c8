"""The client hooks, the server's pre-receive and the commit-msg hook's trailers and mode, at the
unit level: each hook's function called in-process (as git runs it: in the work tree, or with
``GIT_DIR`` set and the update lines on stdin) on a real repository.

End to end (real `git commit` and `git push` through the installed hooks):
``tests/e2e/test_hooks.py`` and ``tests/adversarial/test_commit_msg.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gitaudit.crypto.keystore import keys_dir, load_signer
from gitaudit.gate import memo
from gitaudit.git.repo import open_repo
from gitaudit.hooks import entry
from gitaudit.hooks.install import install_hooks, uninstall_hooks
from gitaudit.ledger.seals import set_policy
from gitaudit.ledger.trust import Policy
from tests.e2e.conftest import PLAN
from tests.gitrepo import GitRepo, audit, git

ZERO = "0" * 40
RUNS = "refs/audit/runs/default"
FORGED = "\n\nAudit-Verdict: PASS\nAudit-Run: 0123456789abcdef0123456789abcdef01234567\n"


@pytest.fixture
def sealed(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    """The greeter with its sealed plan (the default policy: commit-msg claims), no run yet;
    the hooks run in the work tree."""
    repo.write("greeting.txt", "hello world\n")
    repo.write_plan(PLAN)
    repo.commit("greeter with a plan")
    for args in (["init"], ["plan", "seal", "-m", "initial"]):
        result = audit(repo.path, *args)
        assert result.code == 0, (args, result.out, result.err)
    monkeypatch.chdir(repo.path)
    return repo


def _commit_msg(capsys: pytest.CaptureFixture[str], message: Path) -> tuple[int, str]:
    capsys.readouterr()
    code = entry.main(["commit-msg", str(message)])
    return code, capsys.readouterr().err


def _message(repo: GitRepo, text: str) -> Path:
    path = repo.path / ".git" / "COMMIT_EDITMSG"
    path.write_text(text)
    return path


def _policy(repo: GitRepo, mode: str) -> None:
    """Seal a policy whose commit-msg mode is *mode* (with the sealer's key, as a reseal)."""
    set_policy(
        open_repo(repo.path),
        load_signer(keys_dir() / "default"),
        Policy(commit_msg=mode),  # type: ignore[arg-type]
        allow_weaken=True,
        reason="test",
    )


# ----------------------------------------------------------------------- client hooks (34)


def test_commit_msg_writes_the_verdict_and_run_of_a_proven_tree(
    sealed: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """A staged tree the gate PASSes: the hook appends ``Audit-Verdict: PASS`` and the run
    judged, in the full judgement and when the verdict memo answers."""
    assert audit(sealed.path, "run").code == 0
    run = sealed.git("rev-parse", RUNS).strip()
    memo.forget(sealed.path / ".git")
    for _ in ("full", "memo"):
        message = _message(sealed, "finish\n\nAudit-Claim: done\n")
        assert _commit_msg(capsys, message) == (0, "")
        assert message.read_text() == (
            f"finish\n\nAudit-Claim: done\nAudit-Verdict: PASS\nAudit-Run: {run}\n"
        )
        assert [e["tree"] for e in memo._entries(str(sealed.path / ".git"))] == [sealed.head_tree()]


def test_strict_commit_msg_refuses_any_commit_without_pass(
    sealed: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """``audit.commitMsg=strict``: a message that claims nothing is refused all the same while
    the staged tree has no PASS; the default mode lets it through."""
    sealed.write("x.txt", "unproven\n")
    sealed.git("add", "-A")
    message = _message(sealed, "anything\n")
    assert _commit_msg(capsys, message) == (0, "")
    sealed.git("config", "audit.commitMsg", "strict")
    code, err = _commit_msg(capsys, message)
    assert code == 1
    assert err.splitlines()[0] == (
        "gitaudit: this commit (audit.commitMsg=strict) is blocked: the gate says UNKNOWN"
    )


def test_the_hooks_judge_only_the_repository_git_runs_them_for(
    sealed: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``GIT_DIR`` (git gives it to every hook, relative to the hook's folder or absolute)
    must name the repository the hook finds from its folder; without it (the hook called by
    hand, the pre-commit framework) there is nothing to compare."""
    gitdir = sealed.path / ".git"
    monkeypatch.delenv("GIT_DIR", raising=False)
    assert entry.foreign_repository(gitdir) is None
    for given in (".git", str(gitdir), f"{sealed.path}/./.git/"):
        monkeypatch.setenv("GIT_DIR", given)
        assert entry.foreign_repository(gitdir) is None, given
    other = GitRepo.create(tmp_path / "other")
    monkeypatch.setenv("GIT_DIR", str(other.path / ".git"))
    why = entry.foreign_repository(gitdir)
    assert why is not None and "core.worktree" in why and str(other.path / ".git") in why


def test_commit_msg_passes_a_proven_tree_in_a_linked_worktree(
    sealed: GitRepo, tmp_path: Path
) -> None:
    """Control: in a linked worktree git runs commit-msg with ``GIT_DIR`` at
    ``.git/worktrees/<name>``, the repository the hook finds there: a claim on a proven tree
    passes and gets the hook's trailers."""
    assert audit(sealed.path, "run").code == 0
    run = sealed.git("rev-parse", RUNS).strip()
    linked = tmp_path / "linked"
    sealed.git("worktree", "add", "-q", "--detach", str(linked))
    done = subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "-m", "finish\n\nAudit-Claim: done"],
        cwd=linked,
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    message = git(linked, "log", "-1", "--format=%B")
    assert f"Audit-Verdict: PASS\nAudit-Run: {run}" in message, message


def test_pre_push_lets_a_branch_deletion_through(
    sealed: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """Deleting a protected branch pushes no tree to judge: it passes, on a repository whose
    HEAD has no evidence (pushing that HEAD to the same branch is blocked)."""
    head = sealed.git("rev-parse", "HEAD").strip()
    capsys.readouterr()
    assert entry.pre_push(["origin", "url"], f"(delete) {ZERO} refs/heads/main {head}\n") == 0
    assert capsys.readouterr().err == ""
    code = entry.pre_push(["origin", "url"], f"refs/heads/main {head} refs/heads/main {ZERO}\n")
    assert code == 1
    err = capsys.readouterr().err
    assert err.splitlines()[0] == (
        f"gitaudit: push of refs/heads/main to refs/heads/main ({head[:12]}) is blocked: "
        "the gate says UNKNOWN"
    )


@pytest.mark.parametrize("local", ["main^{/with a plan}", ":/a b c", "HEAD@{0 seconds ago}"])
def test_pre_push_reads_a_local_revision_with_spaces(
    sealed: GitRepo, capsys: pytest.CaptureFixture[str], local: str
) -> None:
    """git writes the revision the pusher named before the colon as the local ref, spaces
    and all: the line is read from its end, and its commit judged (it was skipped)."""
    head = sealed.git("rev-parse", "HEAD").strip()
    capsys.readouterr()
    line = f"{local} {head} refs/heads/main {ZERO}\n"
    assert entry._pushed_updates(line) == [(local, head, "refs/heads/main")]
    assert entry.pre_push(["origin", "url"], line) == 1
    assert "the gate says UNKNOWN" in capsys.readouterr().err


@pytest.mark.parametrize(
    "line", ["refs/heads/main HEAD refs/heads/main 0\n", "refs/heads/main\n", "x y\n\n"]
)
def test_pre_push_fails_closed_on_a_line_it_cannot_read(
    sealed: GitRepo, capsys: pytest.CaptureFixture[str], line: str
) -> None:
    capsys.readouterr()
    assert entry.pre_push(["origin", "url"], line) == 1
    assert capsys.readouterr().err.startswith("gitaudit: pre-push failed closed: unreadable push")


def test_install_keeps_a_foreign_hook_and_uninstall_restores_it(repo: GitRepo) -> None:
    """A pre-push hook that is not gitaudit's is moved to ``pre-push.legacy`` (the shim runs it
    first), never overwritten; uninstalling puts it back, byte for byte."""
    hooks = repo.path / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    legacy_text = "#!/bin/sh\necho legacy-ran >&2\n"
    (hooks / "pre-push").write_text(legacy_text)
    handle = open_repo(repo.path)
    done = {a.what: a.done for a in install_hooks(handle)}
    assert done == {"pre-push": "kept-legacy", "commit-msg": "installed"}
    assert (hooks / "pre-push.legacy").read_text() == legacy_text
    shim = (hooks / "pre-push").read_text()
    assert "gitaudit-hook-shim" in shim and "legacy" in shim
    assert {a.what: a.done for a in install_hooks(handle)} == {
        "pre-push": "current",
        "commit-msg": "current",
    }
    assert (hooks / "pre-push.legacy").read_text() == legacy_text  # a second install keeps it
    undone = {a.what: a.done for a in uninstall_hooks(handle)}
    assert undone == {"pre-push": "restored", "commit-msg": "removed"}
    assert (hooks / "pre-push").read_text() == legacy_text
    assert not (hooks / "pre-push.legacy").exists() and not (hooks / "commit-msg").exists()


# ------------------------------------------------------ evidence travels with the branch (35)


def test_pre_receive_passes_a_branch_pushed_with_its_evidence(
    sealed: GitRepo,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server holds the sealed plans ref and no evidence; the push carries the branch and
    the run that proves its tree (git has received the objects, not yet moved the refs, as in
    pre-receive's quarantine). The run judged with the push makes the branch PASS; the branch
    alone is refused, with the fix to push the evidence along."""
    assert audit(sealed.path, "run").code == 0
    server = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(server))
    git(server, "config", "audit.rootKey", sealed.git("config", "audit.rootKey").strip())
    sealed.git("push", "-q", "--no-verify", str(server), "refs/audit/plans")
    # the pushed objects, not yet under the refs the push names
    sealed.git("push", "-q", "--no-verify", str(server), "HEAD:refs/x/head", f"{RUNS}:refs/x/run")
    git(server, "update-ref", "-d", "refs/x/head")
    git(server, "update-ref", "-d", "refs/x/run")
    head = sealed.git("rev-parse", "HEAD").strip()
    run = sealed.git("rev-parse", RUNS).strip()
    monkeypatch.setenv("GIT_DIR", str(server))
    branch = f"{ZERO} {head} refs/heads/main\n"
    capsys.readouterr()
    assert entry.pre_receive([], f"{ZERO} {run} {RUNS}\n{branch}") == 0
    assert capsys.readouterr().err == ""
    assert entry.pre_receive([], branch) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[0] == (
        f"gitaudit: update of refs/heads/main to {head[:12]} is blocked: the gate says UNKNOWN"
    )
    assert "push your evidence with the branch: `git audit push`" in err


# ------------------------------------------------------- commit-msg owns Audit-* trailers (37)


def test_commit_msg_removes_forged_trailers_when_it_adds_none(
    sealed: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unproven staged tree with no run at all: the gate has no verdict to write, and the
    hand-written ``Audit-Verdict: PASS`` and ``Audit-Run`` go all the same."""
    sealed.write("greeting.txt", "hello, unproven\n")
    sealed.git("add", "-A")
    message = _message(sealed, "unproven" + FORGED)
    assert _commit_msg(capsys, message) == (0, "")
    assert message.read_text() == "unproven\n"


def test_commit_msg_replaces_forged_trailers_also_from_the_memo(
    sealed: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """A proven staged tree: a forged ``Audit-Verdict: FAIL`` and a forged run give way to the
    hook's verdict and run, in the full judgement and when the memo answers."""
    assert audit(sealed.path, "run").code == 0
    run = sealed.git("rev-parse", RUNS).strip()
    memo.forget(sealed.path / ".git")
    for _ in ("full", "memo"):
        message = _message(sealed, "proven" + FORGED.replace("PASS", "FAIL"))
        assert _commit_msg(capsys, message) == (0, "")
        assert message.read_text() == f"proven\n\nAudit-Verdict: PASS\nAudit-Run: {run}\n"


@pytest.mark.parametrize("configured", ["off", "claims"])
def test_commit_msg_config_cannot_lower_the_sealed_mode(
    sealed: GitRepo, capsys: pytest.CaptureFixture[str], configured: str
) -> None:
    """The sealed policy says strict; ``audit.commitMsg`` (which whoever can write .git/config
    sets) says less: a commit without PASS is refused as strict."""
    _policy(sealed, "strict")
    sealed.git("config", "audit.commitMsg", configured)
    sealed.write("x.txt", "unproven\n")
    sealed.git("add", "-A")
    code, err = _commit_msg(capsys, _message(sealed, "no claim at all\n"))
    assert code == 1
    assert err.splitlines()[0] == (
        "gitaudit: this commit (audit.commitMsg=strict) is blocked: the gate says UNKNOWN"
    )


def test_install_refuses_a_gitaudit_that_runs_from_inside_the_work_tree(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where this interpreter loads code from (its installation, a folder on its import path)
    or a `git-audit` the hooks would run lies inside the work tree: nothing is written."""
    import sys

    from gitaudit.errors import HookError
    from gitaudit.places import code_inside

    assert code_inside(repo.path) is None
    assert code_inside(repo.path, str(repo.path / "bin" / "git-audit")) == str(
        repo.path / "bin" / "git-audit"
    )
    venv = repo.path / ".venv" / "lib"
    venv.mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [*sys.path, str(venv)])
    assert code_inside(repo.path) == str(venv)
    with pytest.raises(HookError, match="inside the work tree"):
        install_hooks(open_repo(repo.path))
    assert not (repo.path / ".git" / "hooks" / "pre-push").exists()
    monkeypatch.setattr(sys, "prefix", str(repo.path / ".venv"))
    monkeypatch.setattr(sys, "path", sys.path[:-1])
    assert code_inside(repo.path) == str(repo.path / ".venv")
