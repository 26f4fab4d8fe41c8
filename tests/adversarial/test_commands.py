"""Attacks through the commands a plan runs: parsing, environment, processes, output."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from gitaudit.checks import fence
from gitaudit.ledger.refs import runs_ref
from tests.adversarial.conftest import World, assert_plan, check, plan, step

RUNS = runs_ref("default")


def _result(world: World, path: str) -> dict[str, object]:
    tip = world.ref(RUNS)
    assert tip is not None
    doc: dict[str, object] = json.loads(world.run_files(tip)[path])
    return doc


def test_attack_commands_shell_metacharacters_without_shell(world: World) -> None:
    """`"cmd": "echo pwned; touch pwned"` without `shell: true` is split like a shell would split
    words, but `;` is a plain argument: nothing named pwned is created."""
    world.seal(plan(step("unit", {"type": "run", "cmd": "echo pwned; touch pwned"})))
    recorded = world.run()
    assert recorded.verdict == "PASS"
    assert not (world.path / "pwned").exists()
    assert world.run_files(recorded.commit)["steps/unit/checks/0/stdout"] == b"pwned; touch pwned\n"
    result = _result(world, "steps/unit/checks/0/result.json")
    assert result["argv"] == ["echo", "pwned;", "touch", "pwned"]


def test_attack_commands_argument_injection_is_passed_as_is(world: World) -> None:
    """Arguments that look like options, substitutions or globs reach the program unchanged."""
    args = ["--version", "-rf", "$(touch owned)", "`touch owned`", "*", "--", "a b"]
    world.seal(plan(step("unit", check("printf", "%s|", *args))))
    recorded = world.run()
    assert recorded.verdict == "PASS"
    stdout = world.run_files(recorded.commit)["steps/unit/checks/0/stdout"]
    assert stdout.decode() == "".join(f"{a}|" for a in args)
    assert not (world.path / "owned").exists()


def test_attack_commands_gitaudit_environment_not_visible(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gitaudit's own repository and signing variables are not passed on to checks (a check that
    saw GITAUDIT_SIGNING_KEY or SSH_AUTH_SOCK could sign evidence of its own)."""
    world.seal(plan(step("unit", check("env"))))
    secrets = {
        "GIT_DIR": str(world.path / ".git"),
        "GIT_INDEX_FILE": str(world.path / ".git" / "index"),
        "GIT_WORK_TREE": str(world.path),
        "GITAUDIT_SIGNING_KEY": str(world.keys["ci"]),
        "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ADVERSARIAL_CANARY", "passed-through")
    recorded = world.run()
    assert recorded.verdict == "PASS"
    env = world.run_files(recorded.commit)["steps/unit/checks/0/stdout"].decode()
    names = {line.split("=", 1)[0] for line in env.splitlines()}
    assert "ADVERSARIAL_CANARY" not in names  # an allow-list: undeclared variables are dropped
    assert not names & set(secrets), names & set(secrets)


# a check signals the `git audit run` process that started it (which holds the runner's key):
# the process, or each of its threads (the fenced workers that start checks among them)
SIGNALLED = {
    "parent": "kill -s {sig} $PPID",
    "every-thread": "for t in /proc/$PPID/task/*; do kill -s {sig} ${{t##*/}} || exit 1; done",
}


@pytest.mark.parametrize("target", sorted(SIGNALLED))
@pytest.mark.parametrize("sig", ["KILL", "TERM", "SEGV"])
def test_attack_commands_check_kills_its_parent(world: World, sig: str, target: str) -> None:
    """`kill -9 $PPID` (or SIGTERM, or SIGSEGV, whose core dump held the runner's key) from a
    check killed the `git audit run` process itself (every variant before the fix). Where the
    kernel scopes signals (Landlock ABI 6, Linux 6.12) each check runs in a Landlock domain of
    its own and signals only what it started: the kill is refused, the run records normally and
    the gate judges its evidence. Below ABI 6 this stays a limit: the process dies, nothing is
    recorded (no half-written evidence, no lock left), and the tree stays UNKNOWN."""
    attack = SIGNALLED[target].format(sig=sig)
    world.seal(plan(step("unit", check("sh", "-c", f"{attack} && sleep 5"))))
    result = world.cli("run", "--key", str(world.keys["ci"]), process=True)
    if fence.abi() >= 6:
        assert result.code == 1, (result.code, result.out, result.err)  # recorded: FAIL
        assert world.ref(RUNS) is not None
        stderr = world.run_files(world.ref(RUNS) or "")["steps/unit/checks/0/stderr"].decode()
        assert "Operation not permitted" in stderr
        assert_plan(world.gate(), "step.failed", "FAIL")
        return
    assert result.code < 0, (result.code, result.out, result.err)  # the limit below ABI 6
    assert world.ref(RUNS) is None
    assert not list((world.path / ".git").rglob("*.lock"))
    assert_plan(world.gate(), "evidence.missing", "UNKNOWN")


def test_a_check_still_signals_what_it_starts_and_the_run_still_stops_it(world: World) -> None:
    """Control: inside its own domain a check signals its children (`timeout`, a test runner
    ending its workers), and the run, outside it, still ends a check that runs out of time."""
    own = "sleep 30 & kill $!; wait $!; test $? = 143 && timeout 0.2 sleep 5; test $? = 124"
    world.seal(
        plan(step("unit", check("sh", "-c", own)), step("slow", check("sleep", "30", timeout=1)))
    )
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "passed", recorded.doc["steps"]["unit"]
    slow = recorded.doc["steps"]["slow"]
    assert slow["status"] == "unknown" and slow["checks"][0]["timed_out"] is True


def _sleepers(marker: bytes) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker in cmdline:
            found.append(int(pid))
    return found


def test_attack_commands_fork_bomb_contained_by_the_timeout(world: World) -> None:
    """A (paced) fork bomb: background sleepers forever. The timeout kills the whole process
    group: the step is unknown (never PASS) and no sleeper survives the run."""
    marker = "61.2345"
    bomb = f"while :; do sleep {marker} & sleep 0.01; done"
    world.seal(plan(step("unit", check("sh", "-c", bomb, timeout=2))))
    recorded = world.run()
    assert recorded.verdict == "UNKNOWN"
    entry = recorded.doc["steps"]["unit"]
    assert entry["status"] == "unknown" and entry["checks"][0]["timed_out"] is True
    deadline = time.monotonic() + 5
    while _sleepers(f"sleep\0{marker}".encode()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _sleepers(f"sleep\0{marker}".encode()) == []
    judged = assert_plan(world.gate(), "step.unknown", "UNKNOWN")
    assert judged.reasons[0].step == "unit"


def test_attack_commands_huge_output_is_bounded(world: World) -> None:
    """3 MB of output with max_output_bytes 1000: the first 1000 bytes are kept, the rest is
    counted and the truncation recorded."""
    flood = "head -c 3000000 /dev/zero | tr '\\0' x"
    world.seal(plan(step("unit", check("sh", "-c", flood, max_output_bytes=1000))))
    recorded = world.run()
    assert recorded.verdict == "PASS"
    files = world.run_files(recorded.commit)
    assert files["steps/unit/checks/0/stdout"] == b"x" * 1000
    result = _result(world, "steps/unit/checks/0/result.json")
    assert result["stdout_bytes"] == 3_000_000 and result["stdout_truncated"] is True
    assert sum(len(v) for v in files.values()) < 50_000
    assert world.gate().verdict == "PASS"


# how the daemon leaves the check's process group: a session of its own, from a background
# job; or a double fork in that session, whose middle process exits at once. {pid} is where it
# writes its pid, {later} what it does once the run is over
DAEMONS = {
    "setsid": "setsid sh -c 'echo $$ > {pid}.tmp; mv {pid}.tmp {pid}; {later}' ",
    "setsid-double-fork": (
        "setsid sh -c 'sh -c \"echo \\$\\$ > {pid}.tmp; mv {pid}.tmp {pid}; {later}\" &' "
    ),
}


@pytest.mark.parametrize("daemon", sorted(DAEMONS))
def test_attack_commands_daemon_rewrites_the_checkout_after_the_run(
    world: World, tmp_path: Path, daemon: str
) -> None:
    """unit's check leaves a daemon in a session of its own, outside its process group, and
    fails; the daemon waits until the run's purity check has found the checkout clean, then
    writes "ok" into its copy of the verdict. The next run took the checkout for clean and its
    check read the daemon's bytes (and put the tree's back): PASS, before the fix. The run now
    adopts what its checks orphan and kills it when they are done: the daemon is gone when the
    run ends, and the next run FAILs."""
    pidfile = tmp_path / "daemon.pid"
    spawn = DAEMONS[daemon].format(pid=pidfile, later="sleep 3; echo ok > verdict")
    world.repo.write("verdict", "broken\n")
    cmd = (
        "if grep -qx ok verdict; then echo broken > verdict; exit 0; fi; "
        f"if ! test -e {pidfile}; then {spawn} </dev/null >/dev/null 2>&1 & "
        f"while ! test -s {pidfile}; do sleep 0.01; done; fi; exit 1"
    )
    world.seal(plan(step("unit", {"type": "run", "cmd": cmd, "shell": True})))
    assert world.run().verdict == "FAIL"
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed, and reaped
    recorded = world.run()
    assert recorded.verdict == "FAIL", recorded.doc
    assert world.gate(None).verdict != "PASS"


# a chain of daemons, each leaving its parent's session (or process group) and starting the
# next; the last writes its pid to argv[1], then keeps "ok" in the checkout's ignored
# verdict.local (for 30 s at most)
CHAIN = """\
import os, sys, time
here = os.getcwd()
for _ in range({depth}):
    {leave}
    if os.fork():
        time.sleep(60)
        os._exit(0)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
end = time.monotonic() + 30
while time.monotonic() < end:
    path = os.path.join(here, "verdict.local")
    if not os.path.exists(path):
        try:
            with open(path, "w") as f:
                f.write("ok\\n")
        except OSError:
            pass
    time.sleep(0.002)
"""
LEAVE = {"session": "os.setsid()", "group": "os.setpgid(0, 0)"}


@pytest.mark.parametrize("depth", [3, 100])
@pytest.mark.parametrize("leave", sorted(LEAVE))
def test_attack_commands_chain_of_daemons_outlives_the_run(
    world: World, tmp_path: Path, leave: str, depth: int
) -> None:
    """unit's check reads verdict.local, which the tree ignores, so it fails on the tree. Its
    first run leaves a chain of daemons, each in a session (or process group) of its own that
    started the next, and fails; the last daemon keeps "ok" in the checkout's verdict.local.
    The run adopted one level of the chain a kill round (a daemon's child is orphaned, so
    adopted, only once its parent is killed) and gave up after 64: the last 36 daemons of 100
    outlived the run, wrote the file after the next run had cleaned the checkout, and that run
    gave PASS for a tree that never held the file (gate PASS). Every round now kills what each
    adopted daemon started, at any depth: the chain is gone when the first run ends."""
    pidfile = tmp_path / "daemon.pid"
    script = tmp_path / "chain.py"
    script.write_text(CHAIN.format(depth=depth, leave=LEAVE[leave]))
    world.repo.write(".gitignore", "verdict.local\n")
    cmd = (
        f"if ! test -e {pidfile}; then {sys.executable} {script} {pidfile} "
        f"</dev/null >/dev/null 2>&1 & while ! test -s {pidfile}; do sleep 0.01; done; exit 1; "
        "fi; grep -qx ok verdict.local"
    )
    world.seal(plan(step("unit", {"type": "run", "cmd": cmd, "shell": True})))
    assert world.run().verdict == "FAIL"
    pid = int(pidfile.read_text())
    try:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # killed, and reaped
        recorded = world.run()
        assert recorded.verdict == "FAIL", recorded.doc
        assert world.gate(None).verdict != "PASS"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
