"""Write errors while recording: a full disk (ENOSPC) at each point where a run or a seal writes.

We run as root here, so read-only object folders prove nothing (root writes anyway) and a small
tmpfs needs a mount: the failures are injected instead, in-process (each object written, the
pack's index, ``write_tree`` and the commit write raise ``OSError(ENOSPC)`` on the N-th call),
through the real command line (a ``python -c`` wrapper patches the object writes and calls
:func:`gitaudit.cli.main`), and
at the ref update (a ``git`` shim on PATH whose ``update-ref`` fails as git does on a full disk).
Nothing may be half-recorded: the ref does not move, fsck stays clean, and the next run works.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gitaudit.cli.common import signer_for
from gitaudit.errors import GitAuditError
from gitaudit.git import pack
from gitaudit.git.repo import open_repo
from gitaudit.ledger import index, objects
from gitaudit.run.recorder import run_plan
from tests.faults.conftest import (
    PLAN_NAME,
    RUNS_REF,
    assert_ledger_sound,
    env,
    fsck,
    rev_list,
    rev_parse,
    tiny_plan,
)
from tests.gitrepo import GitRepo, audit


def failing_on(n: int, real: Callable[..., Any]) -> Callable[..., Any]:
    calls = {"n": 0}

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] >= n:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(*args, **kwargs)

    return wrapper


def assert_untouched(path: Path, tip: str | None, runs: int) -> None:
    assert rev_parse(path, RUNS_REF) == tip, "the runs ref moved although recording failed"
    checked = fsck(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    handle = open_repo(path)
    assert len(index.recent(handle.git, handle.gitdir, PLAN_NAME, 10_000)) == runs


@pytest.mark.parametrize(
    "where",
    ["first object", "fourth object", "pack index", "tree", "commit"],
)
def test_enospc_in_process_records_nothing(
    tiny: GitRepo, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    path = tiny.path
    handle = open_repo(path)
    signer = signer_for(handle, None)
    run_plan(handle, PLAN_NAME, signer, jobs=1)
    tip = rev_parse(path, RUNS_REF)
    with monkeypatch.context() as patch:
        if where.endswith("object"):
            n = 1 if where == "first object" else 4
            patch.setattr(objects, "_write_loose", failing_on(n, objects._write_loose))
        elif where == "pack index":  # the pack is written; the disk is full for its index
            patch.setattr(pack, "PACK_FROM", 1)
            patch.setattr(pack, "_temporary", failing_on(2, pack._temporary))
        elif where == "tree":
            import gitaudit.ledger.runs as runs
            from gitaudit.ledger.objects import write_tree

            patch.setattr(runs, "write_tree", failing_on(1, write_tree))
        else:
            import gitaudit.ledger.runs as runs
            from gitaudit.crypto.commits import create_signed_commit

            patch.setattr(runs, "create_signed_commit", failing_on(1, create_signed_commit))
        with pytest.raises((OSError, GitAuditError)) as caught:
            run_plan(open_repo(path), PLAN_NAME, signer, jobs=1)
        assert "No space left on device" in str(caught.value)
    assert not list((path / ".git" / "objects" / "pack").glob("tmp_*"))
    assert_untouched(path, tip, 1)
    recorded = run_plan(open_repo(path), PLAN_NAME, signer, jobs=1)  # the disk has room again
    assert rev_parse(path, RUNS_REF) == recorded.commit
    assert_ledger_sound(path)


def test_enospc_at_the_ref_update_is_one_line(tiny: GitRepo, tmp_path: Path) -> None:
    """The real command, with git's own update-ref failing as on a full disk."""
    path = tiny.path
    assert audit(path, "run").code == 0
    tip = rev_parse(path, RUNS_REF)
    real_git = shutil.which("git")
    assert real_git is not None
    shim = tmp_path / "bin" / "git"
    shim.parent.mkdir()
    shim.write_text(
        "#!/bin/sh\n"
        'for arg in "$@"; do\n'
        '  if [ "$arg" = update-ref ]; then\n'
        "    echo \"fatal: update_ref failed for ref 'refs/audit/runs/default': could not write "
        'to .git/refs/audit/runs/default.lock: No space left on device" >&2\n'
        "    exit 128\n"
        "  fi\n"
        "done\n"
        f'exec {real_git} "$@"\n'
    )
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    result = subprocess.run(
        [sys.executable, "-m", "gitaudit", "run"],
        cwd=path,
        env=env(PATH=f"{shim.parent}:{env()['PATH']}"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "No space left on device" in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert_untouched(path, tip, 1)
    assert audit(path, "run").code == 0
    assert_ledger_sound(path)


def _failing_git(tmp_path: Path, command: str, words: str) -> Path:
    """A folder holding a ``git`` that fails *command* with *words*, as git does on a full
    disk, and runs the real git for everything else."""
    real_git = shutil.which("git")
    assert real_git is not None
    shim = tmp_path / "bin" / "git"
    shim.parent.mkdir(exist_ok=True)
    shim.write_text(
        "#!/bin/sh\n"
        'for arg in "$@"; do\n'
        f'  if [ "$arg" = {command} ]; then echo "{words}" >&2; exit 128; fi\n'
        "done\n"
        f'exec {real_git} "$@"\n'
    )
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    return shim.parent


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("add", "fatal: unable to write new index file: No space left on device"),
        ("add", "error: unable to create temporary file: Disk quota exceeded"),
        ("write-tree", "fatal: git-write-tree: error building trees: No space left on device"),
    ],
)
def test_a_full_disk_under_the_fingerprint_is_named_as_such(
    tiny: GitRepo, tmp_path: Path, command: str, words: str
) -> None:
    """git cannot write the fingerprint's private index or the work tree's objects: the one
    error line's hint says to free disk space and where git writes (it said to make a file
    readable or to run `git fsck` before); the cause, git's words, stays in the error."""
    tiny.write("new.txt", "new\n")  # git has something to hash and a tree to write
    folder = _failing_git(tmp_path, command, words)
    result = subprocess.run(
        [sys.executable, "-m", "gitaudit", "status"],
        cwd=tiny.path,
        env=env(PATH=f"{folder}:{env()['PATH']}"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    hints = [line for line in result.stderr.splitlines() if line.startswith("hint:")]
    assert len(errors) == 1 and words.rsplit(": ", maxsplit=1)[-1] in errors[0], result.stderr
    assert len(hints) == 1 and hints[0].startswith("hint: free disk space where git writes"), (
        result.stderr
    )
    assert str(tiny.path / ".git") in hints[0]


CLI_WRAPPER = """
import errno, os, sys
from gitaudit.cli.entry import main

what, n = sys.argv[1], int(sys.argv[2])

def enospc():
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

if what == "object":
    from gitaudit.ledger import objects
    real = objects._write_loose
    calls = [0]
    def write_loose(*args):
        calls[0] += 1
        if calls[0] >= n:
            raise enospc()
        return real(*args)
    objects._write_loose = write_loose
else:  # the evidence is on the ledger; then the lookup cache cannot be written
    import sqlite3
    import gitaudit.run.recorder as record
    from gitaudit.ledger import index
    real_append, real_sync = record.append_run, index.sync
    appended = [False]
    def append_run(*args, **kwargs):
        commit = real_append(*args, **kwargs)
        appended[0] = True
        return commit
    def sync(*args, **kwargs):
        if appended[0]:
            raise sqlite3.OperationalError("database or disk is full")
        return real_sync(*args, **kwargs)
    record.append_run = append_run
    index.sync = sync
main(sys.argv[3:])
"""

ONE_LINE_BUG = (
    "BUG: gitaudit/cli/__init__.py main() maps only GitAuditError to `error: ...`; an OSError "
    "(ENOSPC from pygit2/libgit2) or sqlite3.Error raised while recording escapes as a Python "
    "traceback instead of one error line"
)


@pytest.mark.parametrize(
    ("command", "what", "n"),
    [
        pytest.param(["run"], "object", 2),
        pytest.param(
            ["plan", "seal", "--plan", PLAN_NAME],
            "object",
            1,
        ),
        pytest.param(["run"], "index", 0),
    ],
)
def test_enospc_through_the_command_line_is_one_line(
    tiny: GitRepo, command: list[str], what: str, n: int
) -> None:
    path = tiny.path
    assert audit(path, "run").code == 0
    tip = rev_parse(path, RUNS_REF)
    plans_tip = rev_parse(path, "refs/audit/plans")
    if command[0] == "plan":
        tiny.write_plan(tiny_plan(["stronger"]))
    result = subprocess.run(
        [sys.executable, "-c", CLI_WRAPPER, what, str(n), *command],
        cwd=path,
        env=env(),
        capture_output=True,
        text=True,
        check=False,
    )
    checked = fsck(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert rev_parse(path, "refs/audit/plans") == plans_tip
    if what == "index":
        # the run is on the ledger (the index is only a cache); the gate finds it
        assert len(rev_list(path, RUNS_REF)) == 2
        assert audit(path, "status").code == 0
    else:
        assert rev_parse(path, RUNS_REF) == tip
    assert "Traceback" not in result.stderr, result.stderr
    if what == "index" and result.returncode == 0:
        return  # recorded, and the cache is rebuilt later: success is a fine answer too
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr


AFTER_RECORD = """
import contextlib, errno, os, sqlite3, sys
from gitaudit.cli.entry import main
import gitaudit.run.recorder as record
from gitaudit.ledger import index, watermark

what = sys.argv[1]
real_append, real_db, real_replace = record.append_run, index._db, watermark._replace
appended = [False]

def append_run(*args, **kwargs):
    commit = real_append(*args, **kwargs)
    appended[0] = True
    return commit

@contextlib.contextmanager
def db(*args, **kwargs):
    if appended[0]:
        raise sqlite3.OperationalError("disk I/O error")
    with real_db(*args, **kwargs) as conn:
        yield conn

def replace(*args, **kwargs):
    if appended[0]:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return real_replace(*args, **kwargs)

record.append_run = append_run
if what == "sqlite":
    index._db = db
else:
    watermark._replace = replace
main(sys.argv[2:])
"""


@pytest.mark.parametrize("what", ["sqlite", "enospc"])
def test_a_full_disk_after_the_run_is_recorded_is_not_reported_as_nothing_recorded(
    tiny: GitRepo, what: str
) -> None:
    """The run's commit is on the ledger; then the disk fills up while the seen mark, the lookup
    cache (``sqlite3``: "disk I/O error") or the verdict memo is written. Before the fix `git
    audit run` printed only `error: disk I/O error` / `hint: nothing was recorded if the command
    did not say so`, exited 1 and printed no verdict (and no JSON), for a signed PASS on the
    ledger. Now the verdict is printed and is the exit code, with a warning that the run is
    recorded and the caches were not updated."""
    path = tiny.path
    assert audit(path, "run").code == 0
    result = subprocess.run(
        [sys.executable, "-c", AFTER_RECORD, what, "run", "--json"],
        cwd=path,
        env=env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "nothing was recorded" not in result.stderr and "error:" not in result.stderr
    (run,) = json.loads(result.stdout)["runs"]
    assert run["verdict"] == "PASS" and run["commit"] == rev_parse(path, RUNS_REF)
    assert f"the run is recorded ({run['commit'][:12]})" in result.stderr, result.stderr
    assert len(rev_list(path, RUNS_REF)) == 2
    assert audit(path, "status").code == 0  # the caches are rebuilt from the ledger
    assert audit(path, "verify").code == 0
    assert_ledger_sound(path)
