"""Hermetic test environment: every test gets its own HOME and pinned git identity and dates."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pygit2 import settings
from pygit2.enums import ConfigLevel

from tests.gitrepo import GitRepo

pytest.register_assert_rewrite("tests.ctrl_c")  # imported by test modules, after this one

PINNED_DATE = "2026-11-01T12:00:00+00:00"


@pytest.fixture(autouse=True)
def hermetic(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """Seal the test off from the user's real configuration, keys and git identity."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GITAUDIT_HOME", str(home / ".config" / "gitaudit"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    for var in (
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GITAUDIT_SIGNING_KEY",
        "SSH_AUTH_SOCK",
        "GIT_QUARANTINE_PATH",
    ):
        monkeypatch.delenv(var, raising=False)
    # a CI job refuses an unpinned repository (ledger/anchor.py): the suite's repositories are
    # judged as on a developer's machine unless a test says otherwise
    from gitaudit.ledger.anchor import CI_VARIABLES

    for var in CI_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test Author")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "author@example.test")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test Committer")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "committer@example.test")
    monkeypatch.setenv("GIT_AUTHOR_DATE", PINNED_DATE)
    monkeypatch.setenv("GIT_COMMITTER_DATE", PINNED_DATE)
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    # the interpreter's bin first on PATH, as for an installed gitaudit: a run made in a child
    # process (which tests start with it first) and a judgement made in this one see one PATH,
    # as they do for a user (a run made here binds its checks' PATH: gitaudit.ledger.programs)
    bindir = os.path.dirname(sys.executable)
    if os.environ.get("PATH", "").split(os.pathsep)[0] != bindir:
        monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    (home / ".gitconfig").write_text(
        "[init]\n\tdefaultBranch = main\n[user]\n\tname = Test User\n\temail = user@example.test\n"
    )
    # libgit2 reads its global/XDG/system config locations once, from the real HOME, when pygit2
    # is imported: point them at the fixture's home too, so in-process code is hermetic as well.
    levels = (ConfigLevel.GLOBAL, ConfigLevel.XDG, ConfigLevel.SYSTEM)
    saved = {level: settings.search_path[level] for level in levels}
    settings.search_path[ConfigLevel.GLOBAL] = str(home)
    settings.search_path[ConfigLevel.XDG] = str(home / ".config" / "git")
    settings.search_path[ConfigLevel.SYSTEM] = str(home / "no-system-config")
    from gitaudit.plan import catalog

    catalog._CHECKED.clear()  # every test starts as a new process: no plan checked yet
    try:
        yield home
    finally:
        for level, value in saved.items():
            settings.search_path[level] = value
        # a fingerprint's head start a test left untaken would outlive it (its git, its files)
        from gitaudit.git import head_start

        head_start._discard_at_exit()


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    """A fresh, real, non-bare git repository with one initial commit."""
    r = GitRepo.create(tmp_path / "repo")
    r.write("README.md", "sample\n")
    r.commit("initial")
    return r


@pytest.fixture
def sigint_delivered() -> Iterator[None]:
    """SIGINT delivered as from a terminal (``KeyboardInterrupt`` here, the default action in the
    processes started), even when the suite was started with it ignored: a shell does that to
    a job it starts in the background without job control, and the ignored signal is inherited
    by every process started, so nothing could be interrupted."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def stops_delivered(sigint_delivered: None) -> Iterator[None]:
    """SIGTERM and SIGHUP too, as ``sigint_delivered``: their default action in the processes
    started, even when the suite was started with one ignored (SIGHUP under ``nohup``)."""
    previous = {s: signal.signal(s, signal.SIG_DFL) for s in (signal.SIGTERM, signal.SIGHUP)}
    yield
    for s, was in previous.items():
        signal.signal(s, was)
