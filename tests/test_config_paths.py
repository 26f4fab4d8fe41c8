"""What git's configuration names elsewhere (gitaudit.git.config_paths), read by real git."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gitaudit.git.config_paths import for_fence, named_by_config
from tests.gitrepo import GitRepo


def _configure(home: Path, text: str) -> None:
    with (home / ".gitconfig").open("a") as config:
        config.write(text)


def test_every_key_that_names_a_file_is_resolved_as_git_resolves_it(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An include is relative to the file that includes it, and its own includes are followed;
    an `includeIf` counts whatever its condition; `~` is the home; the attributes file and the
    hooks folder are relative to the work tree; a filter's program is each word naming a path
    and a bare first word as found on PATH (not a folder: `/` of `tr / _`)."""
    home = Path(os.environ["HOME"])
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "tidy").write_text("#!/bin/sh\ncat\n")
    (bin_ / "tidy").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    (home / "dotfiles").mkdir()
    (home / "dotfiles" / "extra").write_text("[include]\n\tpath = nested\n")
    _configure(
        home,
        "[include]\n\tpath = dotfiles/extra\n"
        '[includeIf "gitdir:/elsewhere/"]\n\tpath = ~/work.gitconfig\n'
        "[core]\n\tattributesFile = ~/attrs\n\thooksPath = githooks\n"
        '[filter "keep"]\n\tclean = tidy --clean %f\n\tsmudge = python3 ~/keep.py\n'
        '[filter "flip"]\n\tprocess = tr / _\n',
    )
    named = named_by_config(repo.path)
    expected = [
        home / "dotfiles" / "extra",
        home / "dotfiles" / "nested",
        home / "work.gitconfig",
        home / "attrs",
        repo.path / "githooks",
        bin_ / "tidy",
        home / "keep.py",
    ]
    assert set(named) >= {str(p) for p in expected}, named
    assert "/" not in named
    assert all(os.path.isabs(p) for p in named)
    assert str(bin_ / "tidy") not in named_by_config(repo.path, on_path=False)
    fenced = for_fence(repo.path)
    assert str(repo.path / "githooks") not in fenced  # in the work tree: the guard's alone
    assert str(home / "attrs") in fenced


def test_what_switches_a_feature_off_or_is_the_callers_own_names_nothing(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`/dev/null` (the attributes file and hooks switched off) is no file to keep, and a
    setting given for one command (`git -c`, GIT_CONFIG_*) is the caller's; a configuration
    git cannot read names nothing (git then refuses every command that reads it)."""
    home = Path(os.environ["HOME"])
    _configure(home, "[core]\n\tattributesFile = /dev/null\n\thooksPath = /dev/null\n")
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "include.path")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "/tmp/the-callers-own")
    assert named_by_config(repo.path) == []
    _configure(home, "[core\n")
    assert named_by_config(repo.path) == []
