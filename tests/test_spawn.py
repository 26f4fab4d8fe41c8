"""The process primitive every git process goes through (``os.posix_spawn``), with real git."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gitaudit.errors import RepositoryError
from gitaudit.git import head_start
from gitaudit.git.call import run_git, start_git
from gitaudit.git.environment import git_env
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


def _gone(pid: int, within: float = 5.0) -> bool:
    """Whether *pid*, a child of this process, was reaped (waiting up to *within* seconds for
    it to end, then reaping it: a child left running is not)."""
    deadline = time.monotonic() + within
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True  # reaped already: by the code under test
        if done or time.monotonic() > deadline:
            return False
        time.sleep(0.02)


@contextlib.contextmanager
def _interrupted(signum: int, where: str = "spawn") -> Iterator[list[int]]:
    """*signum* sent to this process where a Ctrl-C lands when the parent runs again only once
    the child has long started (under load): right after ``os.posix_spawn`` started it, before
    its pid is returned (*where* "spawn"), or as the caller's ``with`` block enters the
    :class:`Process` returned ("enter"). Yields the pids started; kills what is left after."""
    real_spawn, real_enter = os.posix_spawn, Process.__enter__
    started: list[int] = []

    def spawn(*args: object, **kwargs: object) -> int:
        pid = real_spawn(*args, **kwargs)  # type: ignore[arg-type]
        started.append(pid)
        if where == "spawn":
            os.kill(os.getpid(), signum)
        return pid

    def enter(self: Process) -> Process:
        os.kill(os.getpid(), signum)
        return real_enter(self)

    os.posix_spawn = spawn
    if where == "enter":
        Process.__enter__ = enter  # type: ignore[method-assign]
    try:
        yield started
    finally:
        os.posix_spawn, Process.__enter__ = real_spawn, real_enter  # type: ignore[method-assign]
        for pid in started:
            with contextlib.suppress(ProcessLookupError, ChildProcessError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


def _raise_keyboard_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # as `git audit run` does on SIGTERM and SIGHUP (run/interrupts.py)


STARTS: dict[str, Callable[[GitRepo, str, int], object]] = {
    "run_git": lambda repo, fifo, _: run_git(["hash-object", fifo], cwd=repo.path),
    "run_git-input": lambda repo, fifo, _: run_git(
        ["hash-object", fifo], cwd=repo.path, input=b"fed"
    ),
    "start_git": lambda repo, fifo, _: start_git(["hash-object", fifo], cwd=repo.path),
    # as the fingerprint's head start starts `git add -A`: its output to files of the caller's
    "Process-to-files": lambda repo, fifo, out: Process(
        ["git", "-C", str(repo.path), "hash-object", fifo], env=git_env(), stdout=out, stderr=out
    ),
}


@pytest.mark.usefixtures("stops_delivered")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("how", list(STARTS))
def test_a_ctrl_c_while_git_starts_kills_it_and_propagates(
    repo: GitRepo, tmp_path: Path, how: str, signum: int
) -> None:
    """A signal whose handler raises (Ctrl-C's KeyboardInterrupt; SIGTERM in `git audit run`)
    landing after ``posix_spawn`` started git, before :class:`Process` kept its pid: git is
    killed and reaped, and the exception propagates. Raised where it landed, it left git
    running with nobody to kill it (21 of 60 Ctrl-Cs under load). This git waits on a FIFO
    nobody opens: it never ends by itself, nor on its pipes' closing."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    if signum != signal.SIGINT:
        signal.signal(signum, _raise_keyboard_interrupt)
    out = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT, 0o600)
    with _interrupted(signum) as started:  # kills what is left, afterwards
        with pytest.raises(KeyboardInterrupt):
            STARTS[how](repo, str(fifo), out)
        os.close(out)
        assert len(started) == 1
        assert _gone(started[0], within=1.0)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signum) in (signal.default_int_handler, _raise_keyboard_interrupt)


def test_git_started_from_a_worker_thread_leaves_the_signals_to_the_main_one(
    repo: GitRepo,
) -> None:
    """Only the main thread runs Python signal handlers (and may install them): a worker (the
    fingerprint's thread) starts git without holding them, and a signal that arrives meanwhile
    reaches the main thread's handler, not the worker's git."""
    seen: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, _frame: seen.append(signum))
    results: list[object] = []

    def work() -> None:
        try:
            results.append(run_git(["rev-parse", "HEAD"], cwd=repo.path).out.strip())
        except BaseException as exc:  # what the worker met, told by the assert
            results.append(exc)

    try:
        with _interrupted(signal.SIGUSR1) as started:
            worker = threading.Thread(target=work)
            worker.start()
            worker.join()
            assert started and _gone(started[0])
        deadline = time.monotonic() + 5
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)  # the main thread runs the handler between two bytecodes
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert results == [repo.git("rev-parse", "HEAD").strip()]
    assert seen == [signal.SIGUSR1]


def test_starting_a_process_imports_neither_signal_nor_threading_nor_subprocess() -> None:
    """The hooks' fast path starts git through this module: holding the signals while git
    starts brings none of the imports that ``subprocess`` would (about 6 ms)."""
    code = (
        "import os, sys\n"
        "from gitaudit.git.spawn import Process\n"
        "with Process(['true'], env=os.environ) as p: p.communicate()\n"
        "heavy = ('signal', 'threading', 'subprocess', 'selectors', 'enum', 'typing')\n"
        "print(p.returncode, sorted(m for m in heavy if m in sys.modules))\n"
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(root), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    assert done.stdout == "0 []\n"


@pytest.mark.usefixtures("sigint_delivered")
@pytest.mark.parametrize("how", ["run_git", "head_start"])
def test_a_ctrl_c_as_the_block_enters_kills_git_and_propagates(
    repo: GitRepo, tmp_path: Path, how: str
) -> None:
    """A Ctrl-C landing once :class:`Process` returned, before the caller's ``with`` block can
    kill git (seen under load as the block's ``__enter__`` began, 1 in 300 Ctrl-Cs): run_git
    and the head start's ``rev-parse`` hold the handlers until inside the block."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    start: Callable[[], object] = {
        "run_git": lambda: run_git(["hash-object", str(fifo)], cwd=repo.path),
        "head_start": lambda: head_start._launch(str(repo.path)),
    }[how]
    with _interrupted(signal.SIGINT, "enter") as started:
        with pytest.raises(KeyboardInterrupt):
            start()
        assert len(started) == 1
        assert _gone(started[0], within=1.0)


@pytest.mark.usefixtures("sigint_delivered")
def test_a_ctrl_c_as_the_child_is_reaped_still_propagates() -> None:
    """A Ctrl-C landing as ``waitpid`` returned, before the exit status was kept: the block's
    exit finds the child reaped already, and the KeyboardInterrupt propagates (it was replaced
    by a ChildProcessError: a traceback instead of the one line an interrupt gets)."""
    real = os.waitpid

    def waitpid_then_interrupt(pid: int, options: int) -> tuple[int, int]:
        done = real(pid, options)
        os.kill(os.getpid(), signal.SIGINT)
        return done

    with pytest.raises(KeyboardInterrupt), Process(["true"], env=dict(os.environ)) as proc:
        os.waitpid = waitpid_then_interrupt
        try:
            proc.communicate()
        finally:
            os.waitpid = real
    assert proc.returncode is None  # the status was lost with the interrupted call
