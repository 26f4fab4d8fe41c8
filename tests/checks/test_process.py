"""run_bounded against real processes: exit codes, start errors, bounds, process-group cleanup."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitaudit.checks import process
from gitaudit.checks.process import ProcessResult, decode_output, run_bounded
from gitaudit.errors import CheckError

PY = sys.executable


def _state(pid: int) -> str | None:
    """The /proc state letter of pid, or None if it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return stat.rpartition(b")")[2].split()[0].decode()


def _gone(pid: int, within: float = 5.0) -> bool:
    """Wait until pid no longer runs: it does not exist, or is a zombie awaiting its reaper."""
    deadline = time.monotonic() + within
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if _state(pid) in (None, "Z", "X"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


@contextlib.contextmanager
def _reaping(pidfile: Path) -> Iterator[None]:
    """Afterwards, SIGKILL the process groups of the pids a test's child wrote to pidfile.

    Keeps a failing assertion (or a regression) from leaving `sleep 100` processes behind. Only
    groups other than pytest's own are touched: they are the sessions run_bounded started.
    """
    try:
        yield
    finally:
        if pidfile.exists():
            for word in pidfile.read_text().split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    pgid = os.getpgid(int(word))
                    if pgid != os.getpgrp():
                        os.killpg(pgid, signal.SIGKILL)


def _pids(pidfile: Path) -> list[int]:
    return [int(w) for w in pidfile.read_text().split()]


# --- exit status -----------------------------------------------------------------------------


def test_exit_codes_pass_through(tmp_path: Path) -> None:
    ok = run_bounded(["true"], cwd=tmp_path)
    assert (ok.exit_code, ok.signal, ok.timed_out, ok.start_error) == (0, None, False, None)
    assert ok.succeeded and ok.summary() == "exit code 0"
    failed = run_bounded(["sh", "-c", "exit 3"], cwd=tmp_path)
    assert failed.exit_code == 3 and not failed.succeeded
    assert failed.argv == ("sh", "-c", "exit 3")
    assert failed.leftovers_killed is False


def test_death_by_signal_is_reported(tmp_path: Path) -> None:
    r = run_bounded(["sh", "-c", "kill -TERM $$"], cwd=tmp_path)
    assert r.exit_code is None
    assert r.signal == signal.SIGTERM
    assert not r.timed_out
    assert r.summary() == "killed by signal 15 (SIGTERM)"


# --- start errors ----------------------------------------------------------------------------


def test_missing_command_is_a_start_error(tmp_path: Path) -> None:
    r = run_bounded(["frobnicate-no-such-command"], cwd=tmp_path)
    assert r.start_error == "command not found: frobnicate-no-such-command"
    assert r.exit_code is None and r.signal is None and not r.succeeded
    assert r.summary() == r.start_error


def test_missing_relative_script_is_a_start_error(tmp_path: Path) -> None:
    r = run_bounded(["./nope.sh"], cwd=tmp_path)
    assert r.start_error == "command not found: ./nope.sh"


def test_non_executable_file_is_permission_denied(tmp_path: Path) -> None:
    script = tmp_path / "x.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    r = run_bounded(["./x.sh"], cwd=tmp_path)
    assert r.start_error == "permission denied: ./x.sh"
    assert r.exit_code is None


def test_script_without_shebang_is_exec_format_error(tmp_path: Path) -> None:
    script = tmp_path / "noshebang"
    script.write_bytes(b"\x00\x01\x02 not a program\n")
    script.chmod(0o755)
    r = run_bounded(["./noshebang"], cwd=tmp_path)
    assert r.start_error is not None
    assert r.start_error.startswith("exec format error: ./noshebang")


def test_missing_interpreter_is_named(tmp_path: Path) -> None:
    script = tmp_path / "bad.sh"
    script.write_text("#!/no/such/interpreter\n")
    script.chmod(0o755)
    r = run_bounded(["./bad.sh"], cwd=tmp_path)
    assert r.start_error == "interpreter not found for ./bad.sh (check its #! line)"


def test_missing_cwd_is_a_start_error(tmp_path: Path) -> None:
    r = run_bounded(["true"], cwd=tmp_path / "absent")
    assert r.start_error == f"working directory not found: {tmp_path / 'absent'}"
    assert r.exit_code is None


# --- stdin, env, cwd, shell ------------------------------------------------------------------


def test_stdin_is_closed(tmp_path: Path) -> None:
    r = run_bounded(["cat"], cwd=tmp_path, timeout=20)
    assert not r.timed_out  # an open stdin would keep cat waiting until the timeout
    assert r.exit_code == 0 and not r.timed_out
    assert r.stdout == b"" and r.stdout_total == 0


def test_env_is_passed_exactly(tmp_path: Path) -> None:
    r = run_bounded(["/usr/bin/env"], cwd=tmp_path, env={"FOO": "bar baz", "EMPTY": ""})
    assert r.exit_code == 0
    assert sorted(r.stdout.splitlines()) == [b"EMPTY=", b"FOO=bar baz"]


def test_env_none_inherits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITAUDIT_TEST_MARKER", "inherited")
    r = run_bounded(["sh", "-c", 'printf %s "$GITAUDIT_TEST_MARKER"'], cwd=tmp_path)
    assert r.stdout == b"inherited"


def test_cwd_is_honoured(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    r = run_bounded([PY, "-c", "import os; print(os.getcwd())"], cwd=tmp_path / "sub")
    assert r.stdout.decode().strip() == os.path.realpath(tmp_path / "sub")


def test_shell_true_runs_through_bin_sh(tmp_path: Path) -> None:
    r = run_bounded("echo $((1 + 2)) | tr 3 X; echo done >&2", cwd=tmp_path, shell=True)
    assert r.argv == ("/bin/sh", "-c", "echo $((1 + 2)) | tr 3 X; echo done >&2")
    assert (r.exit_code, r.stdout, r.stderr) == (0, b"X\n", b"done\n")
    single = run_bounded(["exit 4"], cwd=tmp_path, shell=True)
    assert single.exit_code == 4


def test_metacharacters_are_literal_without_shell(tmp_path: Path) -> None:
    r = run_bounded(["echo", "a; touch pwned", "$(touch pwned2)", "`touch pwned3`"], cwd=tmp_path)
    assert r.stdout == b"a; touch pwned $(touch pwned2) `touch pwned3`\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "shell", "fragment"),
    [
        ("echo hi", False, "not the string"),
        (["echo", "hi"], True, "needs one command string"),
        ([], False, "no command"),
        ([""], False, "no command"),
        (["   "], True, "empty"),
        (["echo", "a\0b"], False, "NUL"),
        ("echo a\0b", True, "NUL"),
    ],
)
def test_misuse_raises_check_error(
    tmp_path: Path, argv: list[str] | str, shell: bool, fragment: str
) -> None:
    with pytest.raises(CheckError, match=fragment) as info:
        run_bounded(argv, cwd=tmp_path, shell=shell)
    assert info.value.hint


@pytest.mark.parametrize("timeout", [0, -1, float("nan")])
def test_non_positive_timeout_is_refused(tmp_path: Path, timeout: float) -> None:
    with pytest.raises(CheckError, match="timeout"):
        run_bounded(["true"], cwd=tmp_path, timeout=timeout)


def test_negative_output_limit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CheckError, match="max_output_bytes"):
        run_bounded(["true"], cwd=tmp_path, max_output_bytes=-1)


def test_bad_environment_name_is_a_check_error(tmp_path: Path) -> None:
    with pytest.raises(CheckError, match="cannot start"):
        run_bounded(["true"], cwd=tmp_path, env={"A=B": "c"})


# --- output bounds ---------------------------------------------------------------------------


def test_output_is_truncated_per_stream_with_exact_totals(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.stdout.buffer.write(b'A' * 1000 + b'B' * 4_999_000)\n"
        "sys.stderr.buffer.write(b'e' * 999 + b'E' * 1_999_001)\n"
    )
    r = run_bounded([PY, "-c", code], cwd=tmp_path, max_output_bytes=1000)
    assert r.exit_code == 0
    assert r.stdout == b"A" * 1000  # the FIRST bytes are kept
    assert (r.stdout_total, r.stdout_truncated) == (5_000_000, True)
    assert r.stderr == b"e" * 999 + b"E"
    assert (r.stderr_total, r.stderr_truncated) == (2_000_000, True)


def test_streams_are_bounded_independently(tmp_path: Path) -> None:
    code = "import sys; sys.stdout.write('x' * 10); sys.stderr.write('y' * 50)"
    r = run_bounded([PY, "-c", code], cwd=tmp_path, max_output_bytes=20)
    assert (r.stdout, r.stdout_total, r.stdout_truncated) == (b"x" * 10, 10, False)
    assert (r.stderr, r.stderr_total, r.stderr_truncated) == (b"y" * 20, 50, True)


def test_exactly_at_the_limit_is_not_truncated(tmp_path: Path) -> None:
    r = run_bounded(["printf", "abcd"], cwd=tmp_path, max_output_bytes=4)
    assert (r.stdout, r.stdout_total, r.stdout_truncated) == (b"abcd", 4, False)


def test_zero_limit_keeps_nothing_but_counts(tmp_path: Path) -> None:
    r = run_bounded(["printf", "abc"], cwd=tmp_path, max_output_bytes=0)
    assert (r.stdout, r.stdout_total, r.stdout_truncated) == (b"", 3, True)


def test_200_mb_of_output_drains_in_bounded_memory(tmp_path: Path) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    r = run_bounded(["head", "-c", "200000000", "/dev/zero"], cwd=tmp_path, timeout=120)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert r.exit_code == 0 and not r.timed_out
    assert r.stdout_total == 200_000_000
    assert len(r.stdout) == 1 << 20 and r.stdout_truncated
    assert after - before < 100 * 1024  # far less than the 200 MB that went through


def test_non_utf8_bytes_are_preserved(tmp_path: Path) -> None:
    code = (
        "import sys; sys.stdout.buffer.write(bytes(range(256)))\nsys.stderr.buffer.write(b'\\xff')"
    )
    r = run_bounded([PY, "-c", code], cwd=tmp_path)
    assert r.stdout == bytes(range(256))
    assert r.stderr == b"\xff"
    assert decode_output(r.stderr) == "\\xff"
    assert decode_output("héllo".encode()) == "héllo"


# --- time and process-group bounds -----------------------------------------------------------


def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    script = f'sleep 100 & echo "$$ $!" > {pidfile}; sleep 100'
    with _reaping(pidfile):
        r = run_bounded(["sh", "-c", script], cwd=tmp_path, timeout=1)
        assert r.timed_out and r.exit_code is None
        assert r.signal == signal.SIGKILL
        assert not r.succeeded and r.summary().startswith("timed out after")
        assert r.duration >= 1
        leader, grandchild = _pids(pidfile)
        assert _gone(leader)
        assert _gone(grandchild)


def test_timeout_keeps_output_written_before_it(tmp_path: Path) -> None:
    r = run_bounded(["sh", "-c", "echo before; exec sleep 30"], cwd=tmp_path, timeout=0.5)
    assert r.timed_out and r.stdout == b"before\n"


@pytest.mark.parametrize(
    "script",
    [
        # the daemon keeps the pipes open: EOF alone would never end the run
        'sleep 100 & echo "$!" > {pidfile}; exit 0',
        # the daemon closes the pipes: only the leader's exit tells us to look
        'sleep 100 >/dev/null 2>&1 & echo "$!" > {pidfile}; exit 0',
        # double fork without setsid: the orphan is reparented but stays in the group
        '(sleep 100 & echo "$!" > {pidfile}) ; exit 0',
    ],
)
def test_leftover_daemon_is_killed(tmp_path: Path, script: str) -> None:
    pidfile = tmp_path / "pids"
    with _reaping(pidfile):
        r = run_bounded(["sh", "-c", script.format(pidfile=pidfile)], cwd=tmp_path, timeout=60)
        assert r.exit_code == 0 and not r.timed_out
        assert r.leftovers_killed is True
        assert "left processes running" in r.summary()
        (daemon,) = _pids(pidfile)
        assert _gone(daemon)


def test_leftovers_are_killed_without_pidfd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The polling fallback (kernels without pidfd_open) gives the same results."""
    monkeypatch.setattr(process, "_open_pidfd", lambda pid: None)
    pidfile = tmp_path / "pids"
    with _reaping(pidfile):
        r = run_bounded(["sh", "-c", f'sleep 100 & echo "$!" > {pidfile}; exit 5'], cwd=tmp_path)
        assert r.exit_code == 5 and r.leftovers_killed
        (daemon,) = _pids(pidfile)
        assert _gone(daemon)
    quiet = run_bounded(["sh", "-c", "exec >&- 2>&-; sleep 0.2; exit 2"], cwd=tmp_path)
    assert quiet.exit_code == 2 and not quiet.leftovers_killed
    slow = run_bounded(["sh", "-c", "exec >&- 2>&-; exec sleep 30"], cwd=tmp_path, timeout=0.5)
    assert slow.timed_out and slow.exit_code is None
    out = run_bounded(["printf", "x"], cwd=tmp_path)
    assert (out.exit_code, out.stdout, out.leftovers_killed) == (0, b"x", False)


def test_exited_child_is_not_a_leftover(tmp_path: Path) -> None:
    """A background job that finished before the leader exited is not reported."""
    r = run_bounded(["sh", "-c", "true & wait; echo ok"], cwd=tmp_path)
    assert (r.exit_code, r.stdout, r.leftovers_killed) == (0, b"ok\n", False)


def test_orphan_that_already_exited_is_not_a_leftover(tmp_path: Path) -> None:
    """An orphaned child that finished (maybe a zombie awaiting init) is not reported."""
    r = run_bounded(["sh", "-c", "(true &) ; sleep 0.3; exit 0"], cwd=tmp_path)
    assert (r.exit_code, r.leftovers_killed) == (0, False)


def test_setsid_escapee_does_not_hang_the_run(tmp_path: Path) -> None:
    """Documented limitation: a setsid() daemon escapes the group, but the run still ends."""
    pidfile = tmp_path / "pids"
    with _reaping(pidfile):
        r = run_bounded(
            ["sh", "-c", f'setsid sleep 30 & echo "$!" > {pidfile}; echo out; exit 0'],
            cwd=tmp_path,
            timeout=60,
        )
        assert not r.timed_out  # it did not wait for the escaped daemon
        assert r.exit_code == 0 and r.stdout == b"out\n"


@pytest.mark.usefixtures("sigint_delivered")
def test_keyboard_interrupt_kills_the_group_and_propagates(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    ready = tmp_path / "ready"
    script = f'sleep 100 & echo "$$ $!" > {pidfile}.tmp; mv {pidfile}.tmp {ready}; sleep 100'

    def interrupt() -> None:
        deadline = time.monotonic() + 20
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Thread(target=interrupt)
    with _reaping(ready):
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                run_bounded(["sh", "-c", script], cwd=tmp_path, timeout=60)
        finally:
            timer.join()
        leader, grandchild = _pids(ready)
        assert _gone(leader)
        assert _gone(grandchild)


@pytest.mark.usefixtures("sigint_delivered")
def test_keyboard_interrupt_while_the_check_starts_kills_its_group(tmp_path: Path) -> None:
    """A Ctrl-C that arrives after ``fork`` but before the poll loop (here: while ``on_start``
    learns the pid) is handled once the group can be killed. Raised where it arrived, it left
    the check running: under load it landed inside ``subprocess.Popen``, which drops the pid."""
    pidfile = tmp_path / "pids"
    ready = tmp_path / "ready"
    script = f'sleep 100 & echo "$$ $!" > {pidfile}.tmp; mv {pidfile}.tmp {ready}; sleep 100'

    def interrupt_as_it_starts(pid: int) -> None:
        deadline = time.monotonic() + 20
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    with _reaping(ready):
        with pytest.raises(KeyboardInterrupt):
            run_bounded(
                ["sh", "-c", script], cwd=tmp_path, timeout=60, on_start=interrupt_as_it_starts
            )
        leader, grandchild = _pids(ready)
        assert _gone(leader)
        assert _gone(grandchild)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_signal_held_while_the_check_starts_is_not_lost(tmp_path: Path) -> None:
    """While a check starts, the handlers are held; a signal that arrives meanwhile reaches its
    own handler afterwards, and the handlers are back in place."""
    seen: list[int] = []

    def handler(signum: int, _frame: object) -> None:
        seen.append(signum)

    previous = signal.signal(signal.SIGUSR1, handler)
    try:

        def usr1(pid: int) -> None:
            os.kill(os.getpid(), signal.SIGUSR1)
            assert seen == []  # held: the check's group is not known to the kill yet

        r = run_bounded(["true"], cwd=tmp_path, on_start=usr1)
        assert r.exit_code == 0
        assert seen == [signal.SIGUSR1]
        assert signal.getsignal(signal.SIGUSR1) is handler
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_result_is_frozen(tmp_path: Path) -> None:
    r = run_bounded(["true"], cwd=tmp_path)
    assert isinstance(r, ProcessResult)
    with pytest.raises(AttributeError):
        r.exit_code = 1  # type: ignore[misc]


@pytest.mark.parametrize("caller", [0o077, 0o000, 0o022])
def test_a_check_runs_with_the_fixed_umask_whatever_the_callers(
    tmp_path: Path, caller: int
) -> None:
    """The caller's umask (the agent's ``umask 077``) does not reach the check: it starts with
    022, and gitaudit's own umask is left as it was."""
    before = os.umask(caller)
    try:
        result = run_bounded(["sh", "-c", "umask"], cwd=tmp_path)
        assert os.umask(caller) == caller
    finally:
        os.umask(before)
    assert result.exit_code == 0
    assert int(result.stdout.decode().strip(), 8) == process.UMASK == 0o022


def _status_mask(text: str, field: str) -> int:
    line = next(x for x in text.splitlines() if x.startswith(field + ":"))
    return int(line.split()[1], 16)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc/self/status")
def test_a_check_starts_with_no_signal_ignored_or_blocked_whatever_the_callers(
    tmp_path: Path,
) -> None:
    """Signals the caller ignores or blocks (``trap '' HUP TERM; git audit run``) do not reach
    the check: it starts with every signal at its default action and none blocked, and
    gitaudit's own dispositions and mask are left as they were."""
    ignored = (signal.SIGHUP, signal.SIGTERM, signal.SIGUSR1, signal.SIGQUIT)
    before = {s: signal.signal(s, signal.SIG_IGN) for s in ignored}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2, signal.SIGALRM})
    try:
        result = run_bounded(["cat", "/proc/self/status"], cwd=tmp_path)
        assert all(signal.getsignal(s) is signal.SIG_IGN for s in ignored)
        assert signal.SIGUSR2 in signal.pthread_sigmask(signal.SIG_BLOCK, ())
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for s, was in before.items():
            signal.signal(s, was)
    assert result.exit_code == 0
    status = result.stdout.decode()
    # glibc keeps 32 and 33 for its threads (no program sets or uses them through it); what
    # the test process inherited there is no signal a check can be steered by
    usable = sum(1 << (int(s) - 1) for s in signal.valid_signals())
    assert _status_mask(status, "SigIgn") & usable == 0
    assert _status_mask(status, "SigBlk") & usable == 0


def test_a_caller_that_ignores_nothing_adds_no_step_before_the_program() -> None:
    """Control: with nothing ignored or blocked, no ``preexec_fn`` slows the start (the test
    process's own ignored signals, `nohup`'s SIGHUP say, are set to their default meanwhile)."""
    ignored = [
        s
        for s in signal.valid_signals()
        if s not in process._LEFT and signal.getsignal(s) is signal.SIG_IGN
    ]
    mask = signal.pthread_sigmask(signal.SIG_SETMASK, ())
    try:
        for s in ignored:
            signal.signal(s, signal.SIG_DFL)
        assert process._signals_reset() is None
    finally:
        for s in ignored:
            signal.signal(s, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    assert signal.pthread_sigmask(signal.SIG_BLOCK, ()) == mask
