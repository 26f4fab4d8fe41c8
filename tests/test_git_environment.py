"""The one environment policy of gitaudit's git processes, and what git's messages say when it
could not read part of a work tree."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from gitaudit.git.call import run_git
from gitaudit.git.environment import AS_IT_IS, NO_HOOKS, NO_TRANSPORT, PATH_VARS, git_env
from gitaudit.git.head_start import unread
from tests.gitrepo import GitRepo


@pytest.mark.parametrize("name", PATH_VARS)
def test_a_relative_config_place_reaches_git_made_absolute_from_gitaudits_folder(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git resolves a relative value from its own folder (the work tree's root); gitaudit
    looks at the files from its own. git is given the place gitaudit looks at."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(name, "cfg/sub")
    assert git_env()[name] == str(tmp_path / "cfg" / "sub")
    monkeypatch.setenv(name, "/an/absolute/place")
    assert git_env()[name] == "/an/absolute/place"


def test_git_config_the_old_spelling_never_reaches_git(monkeypatch: pytest.MonkeyPatch) -> None:
    """`GIT_CONFIG` makes `git config` read one file alone while `git add` reads the
    repository's: gitaudit would be told of no conversions that git applies."""
    monkeypatch.setenv("GIT_CONFIG", os.devnull)
    assert "GIT_CONFIG" not in git_env()
    monkeypatch.setenv("GIT_TEST_SPLIT_INDEX", "1")  # git's own test switches too
    assert "GIT_TEST_SPLIT_INDEX" not in git_env()
    assert git_env({"GIT_CONFIG_NOSYSTEM": "1"})["GIT_CONFIG_NOSYSTEM"] == "1"


@pytest.mark.parametrize(
    "message",
    [
        b"pkg/mod.py: Permission denied\n",  # an entry git could not lstat (perror)
        b"warning: could not open directory 'extra/': Permission denied\n",
        b"warning: unable to access 'sub/.gitignore': Permission denied\n",
        b"deep/er/file: Too many levels of symbolic links\n",
        b"x: Input/output error\n",
        b'error: open("conftest.py"): Permission denied\n',
        b"error: unable to index file 'conftest.py'\n",
        b"fatal: adding files failed\n",
        b"warning: in the working copy of 'a.txt', LF will be replaced by CRLF\n"
        b"a/b: Permission denied\n",  # after a line that is no refusal
    ],
)
def test_messages_saying_git_could_not_read_are_refusals(message: bytes) -> None:
    found = unread(message)
    assert found is not None
    assert found.encode() in message


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"warning: in the working copy of 'a.txt', LF will be replaced by CRLF the next time Git "
        b"touches it\n",
        b"a filter's progress: 3 of 4 files\n",
        b"warning: Permission denied in the middle of a line is not git's ending\n",
    ],
)
def test_other_messages_are_not(message: bytes) -> None:
    assert unread(message) is None


def test_git_exec_path_never_reaches_git(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git starts the `git` of its exec path for a submodule (`git add -A`, `git status`): one
    planted in a folder `GIT_EXEC_PATH` names answered for it. git uses its own instead."""
    sub = tmp_path / "sub"
    run_git(["init", "-q", str(sub)])
    (sub / "f").write_text("x\n")
    run_git(["add", "f"], cwd=sub)
    run_git(["commit", "-qm", "sub"], cwd=sub)
    run_git(
        ["-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "sub"],
        cwd=repo.path,
        transport=True,  # a clone: gitaudit's git fetches only on purpose
    )
    planted = tmp_path / "exec"
    planted.mkdir()
    real = shutil.which("git")
    (planted / "git").write_text(f'#!/bin/sh\ntouch "{planted}/ran"\nexec {real} "$@"\n')
    (planted / "git").chmod(0o755)
    monkeypatch.setenv("GIT_EXEC_PATH", str(planted))
    assert "GIT_EXEC_PATH" not in git_env()
    for args in (["status", "--porcelain", "--ignore-submodules=none"], ["add", "-A"]):
        run_git(args, cwd=repo.path)
    assert not (planted / "ran").exists()


@pytest.mark.parametrize("where", ["hooks", "hooksPath"])
def test_gitaudits_index_and_ref_commands_run_no_hook_of_the_repository(
    repo: GitRepo, tmp_path: Path, where: str
) -> None:
    """git runs `post-index-change` after an index write and `reference-transaction` around a
    ref update, from `.git/hooks` or the folder `core.hooksPath` names: both are anyone's who
    writes `.git`. The fingerprint, the commands asked about a work tree (:data:`AS_IT_IS`)
    and the ledger's ref updates run none; the user's own git still runs them (control)."""
    import pygit2

    from gitaudit.git.fingerprint import workspace_fingerprint
    from gitaudit.ledger.refs import cas_update

    mark = tmp_path / "ran"
    hooks = repo.path / ".git" / ("hooks" if where == "hooks" else "elsewhere")
    hooks.mkdir(exist_ok=True)
    for name in ("post-index-change", "reference-transaction"):
        (hooks / name).write_text(f'#!/bin/sh\necho {name} >> "{mark}"\n')
        (hooks / name).chmod(0o755)
    if where == "hooksPath":
        repo.git("config", "core.hooksPath", str(hooks))
    repo.write("new.txt", "new\n")
    assert AS_IT_IS[-2:] == NO_HOOKS
    workspace_fingerprint(repo.path)
    run_git([*AS_IT_IS, "add", "-A"], cwd=repo.path, env={"GIT_INDEX_FILE": str(tmp_path / "i")})
    head = repo.git("rev-parse", "HEAD").strip()
    cas_update(pygit2.Repository(str(repo.path)), "refs/audit/x", head, None, "test")
    assert not mark.exists(), mark.read_text()
    repo.git("update-ref", "refs/heads/other", head)  # the user's own git: git's hooks run
    assert "reference-transaction" in mark.read_text()
    assert repo.git("config", "core.hooksPath", check=False).strip() == (
        str(hooks) if where == "hooksPath" else ""
    )  # the setting itself, as hooks install reads it, is untouched


def test_no_transport_but_where_gitaudit_fetches_on_purpose(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git fetches a partial clone's missing objects on demand, and a remote runs what the
    repository's config names (`remote.<name>.uploadpack` here): no git process of gitaudit's
    may use a transport, whatever the caller or the config allow; a fetch or push made on
    purpose (`transport=True`) keeps the caller's setting (control)."""
    mark = tmp_path / "ran"
    repo.git("config", "remote.origin.url", str(repo.path))
    repo.git("config", "protocol.file.allow", "always")
    repo.git("config", "remote.origin.uploadpack", f"touch {mark}; git-upload-pack")
    monkeypatch.setenv(NO_TRANSPORT, "file")
    assert git_env()[NO_TRANSPORT] == "" and git_env({NO_TRANSPORT: "file"})[NO_TRANSPORT] == ""
    refused = run_git(["ls-remote", "origin"], cwd=repo.path, check=False)
    assert refused.code != 0 and "not allowed" in refused.err, refused.err
    assert not mark.exists()
    assert git_env(transport=True)[NO_TRANSPORT] == "file"
    run_git(["ls-remote", "origin"], cwd=repo.path, transport=True)
    assert mark.exists()
