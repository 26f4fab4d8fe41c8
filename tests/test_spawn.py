"""The process primitive every git process goes through (``os.posix_spawn``), with real git."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

from gitaudit.errors import RepositoryError
from gitaudit.git.call import run_git, start_git
from gitaudit.git.spawn import DEVNULL, Process, executable
from tests.gitrepo import GitRepo


def test_input_larger_than_a_pipe_is_fed_while_output_larger_than_one_is_read(
    repo: GitRepo,
) -> None:
    """4 MiB in, 4 MiB out (a pipe holds 64 KiB): neither side waits for the other forever."""
    data = os.urandom(1 << 21).hex().encode()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    written = run_git(["hash-object", "-w", "--stdin"], cwd=repo.path, input=data)
    assert written.out.strip() == blob
    assert run_git(["cat-file", "blob", blob], cwd=repo.path).stdout == data


def test_output_and_messages_apart_with_the_exit_code(repo: GitRepo) -> None:
    result = run_git(["rev-parse", "HEAD", "no-such-revision"], cwd=repo.path, check=False)
    assert result.code == 128
    assert result.stdout.decode().splitlines()[0] == repo.git("rev-parse", "HEAD").strip()
    assert "unknown revision" in result.err and "unknown revision" not in result.out


def test_a_child_ended_by_a_signal_reports_minus_its_number() -> None:
    with Process(["sh", "-c", "kill -TERM $$"], env=os.environ) as proc:
        assert proc.communicate() == (b"", b"")
    assert proc.returncode == -15


def test_a_child_gets_sigpipe_back_and_no_descriptor_of_ours(tmp_path: Path) -> None:
    """Python ignores SIGPIPE, and an ignored signal stays ignored across exec: `yes` would then
    complain of a broken pipe instead of ending quietly. Only 0, 1 and 2 are inherited: not a
    file Python opened, nor one this process was given to pass on."""
    kept_open = os.open(tmp_path, os.O_RDONLY)  # non-inheritable, as Python opens every file
    passed_on = os.dup2(kept_open, 250)  # inheritable, as a parent's descriptor would be
    try:
        with Process(["sh", "-c", "yes | head -c 1; ls /proc/self/fd"], env=os.environ) as proc:
            out, err = proc.communicate()
    finally:
        os.close(kept_open)
        os.close(passed_on)
    assert err == b""
    assert proc.returncode == 0
    descriptors = out[1:].split()
    # ls opens its own folder of /proc/self/fd: one more than the three standard streams
    assert sorted(descriptors) == [b"0", b"1", b"2", b"3"]


def test_the_program_is_searched_on_the_childs_path(tmp_path: Path) -> None:
    tool = tmp_path / "bin" / "only-here"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho found\n")
    tool.chmod(0o755)
    env = {**os.environ, "PATH": str(tool.parent)}
    assert executable("only-here", env) == str(tool)
    with Process(["only-here"], env=env, stderr=DEVNULL) as proc:
        assert proc.communicate() == (b"found\n", b"")
    with pytest.raises(FileNotFoundError):
        Process(["only-here"], env=dict(os.environ))


def test_streams_to_a_file_of_the_callers(tmp_path: Path) -> None:
    target = tmp_path / "out"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with Process([sys.executable, "-c", "print('to the file')"], env=os.environ, stdout=fd):
            pass  # leaving the block reaps it
    finally:
        os.close(fd)
    assert target.read_text() == "to the file\n"


def test_a_missing_folder_or_git_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RepositoryError, match="not a directory"):
        run_git(["status"], cwd=tmp_path / "nowhere")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RepositoryError, match="git is not installed"):
        run_git(["--version"], cwd=tmp_path)
    with pytest.raises(RepositoryError, match="git is not installed"):
        start_git(["--version"], cwd=tmp_path)


def test_start_git_runs_beside_others(repo: GitRepo) -> None:
    procs = [start_git(["rev-parse", "HEAD"], cwd=repo.path) for _ in range(3)]
    outs = [p.communicate()[0] for p in procs]
    assert len(set(outs)) == 1 and all(p.returncode == 0 for p in procs)


def test_a_block_that_raises_kills_the_child_instead_of_waiting_for_it() -> None:
    """Ctrl-C (or any error) inside `with Process(...)`: the child is killed, then reaped, so
    nothing waits for a git that does not end; a block that ends normally waits as before."""
    with (
        pytest.raises(KeyboardInterrupt),
        Process(["sleep", "600"], env=dict(os.environ)) as sleeper,
    ):
        raise KeyboardInterrupt
    assert sleeper.returncode == -9  # SIGKILL
    with Process(["sh", "-c", "exit 3"], env=dict(os.environ)) as done:
        pass
    assert done.returncode == 3
