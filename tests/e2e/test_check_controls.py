"""The bounded process runner and path confinement end to end (docs/threat-model.md, "Checks:
bounded, not sandboxed" and "Path confinement"): a sealed plan whose check times out, leaves a
daemon, prints a lot, reads stdin, passes shell metacharacters, or names a path that escapes the
checkout through a symlink, run by the installed command (`python -m gitaudit run` in a child
process) and judged by `git audit status`; the evidence is read back from the signed run
commit."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import CliResult, GitRepo, audit

Sealer = Callable[..., None]


def plan(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"task": "t", "requirements": [{"id": "R", "description": "r"}], "steps": list(steps)}


def step(sid: str, *checks: dict[str, Any]) -> dict[str, Any]:
    return {"id": sid, "depends_on": [], "covers": ["R"], "verify": list(checks)}


def run(*argv: str, **extra: Any) -> dict[str, Any]:
    return {"type": "run", "argv": list(argv), **extra}


@pytest.fixture
def sealed(repo: GitRepo) -> Sealer:
    """Write the plan, commit, and seal it through the command line (a fresh key, trust init)."""

    def seal(data: dict[str, Any]) -> None:
        repo.write_plan(data)
        repo.commit("plan")
        for args in (("keys", "generate"), ("trust", "init"), ("plan", "seal")):
            done = audit(repo.path, *args)
            assert done.code == 0, (args, done.out, done.err)

    return seal


def audit_run(repo: GitRepo, *, input: str | None = None) -> CliResult:
    """`git audit run` in a child process, as a user starts it."""
    return audit(repo.path, "run", process=True, input=input)


def recorded(repo: GitRepo) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(repo.git("show", "refs/audit/runs/default:run.json"))
    return doc


def output(repo: GitRepo, sid: str, stream: str = "stdout") -> bytes:
    """A check's captured output, as stored in the signed run commit."""
    blob = f"refs/audit/runs/default:steps/{sid}/checks/0/{stream}"
    return subprocess.run(
        ["git", "cat-file", "blob", blob], cwd=repo.path, capture_output=True, check=True
    ).stdout


def status(repo: GitRepo) -> tuple[int, str]:
    judged = audit(repo.path, "status", "--json", process=True)
    return judged.code, json.loads(judged.out)["verdict"]


def gone(pid: int, within: float = 10.0) -> bool:
    """Whether *pid* no longer runs (absent, or a zombie awaiting its reaper), waiting a while
    for the kernel to deliver the kill."""
    deadline = time.monotonic() + within
    while True:
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            return True
        if stat.rpartition(b")")[2].split()[0] in (b"Z", b"X"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


@contextlib.contextmanager
def reaping(pidfile: Path) -> Iterator[None]:
    """Afterwards, SIGKILL the processes a check wrote to *pidfile* (started by this test), so a
    regression leaves no `sleep 300` behind."""
    try:
        yield
    finally:
        if pidfile.exists():
            for word in pidfile.read_text().split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(word), signal.SIGKILL)


# ------------------------------------------------------------ the bounded process runner (32)


def test_a_timeout_kills_the_checks_whole_process_group(
    repo: GitRepo, sealed: Sealer, tmp_path: Path
) -> None:
    """The check's shell starts a background `sleep` and waits: at the timeout the whole group
    is killed, the outcome is UNKNOWN (exit 3), and the gate says UNKNOWN. (5 s: time enough for
    the shell to write the pid first on a loaded machine.)"""
    pidfile = tmp_path / "group.pid"
    script = f"sleep 300 & echo $! > {pidfile}; wait"
    sealed(plan(step("slow", run("sh", "-c", script, timeout=5))))
    with reaping(pidfile):
        result = audit_run(repo)
        assert result.code == 3, result.out + result.err
        doc = recorded(repo)
        check = doc["steps"]["slow"]["checks"][0]
        assert (doc["verdict"], doc["steps"]["slow"]["status"]) == ("UNKNOWN", "unknown")
        assert check["timed_out"] is True and check["outcome"] == "unknown"
        assert check["message"].endswith(": the outcome is unknown")
        assert gone(int(pidfile.read_text()))  # the background sleep died with its group
    assert status(repo) == (3, "UNKNOWN")


def test_a_daemon_left_behind_is_killed(repo: GitRepo, sealed: Sealer, tmp_path: Path) -> None:
    """The check exits 0 but leaves a background process: it is killed when the check ends, and
    the evidence says so."""
    pidfile = tmp_path / "daemon.pid"
    sealed(plan(step("d", run("sh", "-c", f"sleep 300 & echo $! > {pidfile}"))))
    with reaping(pidfile):
        result = audit_run(repo)
        assert result.code == 0, result.out + result.err
        assert gone(int(pidfile.read_text()))
    check = recorded(repo)["steps"]["d"]["checks"][0]
    assert check["leftovers_killed"] is True
    assert check["message"] == "exit code 0; left processes running, which were killed"
    assert status(repo) == (0, "PASS")


def test_output_is_bounded_and_counted(repo: GitRepo, sealed: Sealer) -> None:
    """3 MB on stdout, non-UTF-8 bytes on stderr, a 1000-byte limit: the run keeps the first
    1000 bytes of stdout, the exact byte counts, and stderr's bytes as they were."""
    noisy = "head -c 3000000 /dev/zero | tr '\\0' x; printf '\\377\\376 bytes' >&2"
    sealed(plan(step("big", run("sh", "-c", noisy, max_output_bytes=1000))))
    result = audit_run(repo)
    assert result.code == 0, result.out + result.err
    check = recorded(repo)["steps"]["big"]["checks"][0]
    assert (check["stdout_bytes"], check["stdout_truncated"]) == (3_000_000, True)
    assert (check["stderr_bytes"], check["stderr_truncated"]) == (8, False)
    assert output(repo, "big") == b"x" * 1000
    assert output(repo, "big", "stderr") == b"\xff\xfe bytes"


def test_stdin_is_closed(repo: GitRepo, sealed: Sealer) -> None:
    """`git audit run` is started with data on its stdin: a check that reads stdin reads
    nothing (a check never waits for, or is steered by, input)."""
    sealed(plan(step("quiet", run("sh", "-c", 'test -z "$(cat)"'))))
    result = audit_run(repo, input="planted answer\n")
    assert result.code == 0, result.out + result.err
    assert recorded(repo)["steps"]["quiet"]["status"] == "passed"


def test_metacharacters_are_literal_without_a_shell(
    repo: GitRepo, sealed: Sealer, tmp_path: Path
) -> None:
    pwned = tmp_path / "pwned"
    text = f"$(touch {pwned}); `touch {pwned}` && touch {pwned} | * > out"
    sealed(plan(step("literal", run("printf", "%s", text))))
    result = audit_run(repo)
    assert result.code == 0, result.out + result.err
    assert output(repo, "literal") == text.encode()
    assert not pwned.exists()
    assert recorded(repo)["steps"]["literal"]["checks"][0]["argv"] == ["printf", "%s", text]


def test_a_check_that_cannot_start_is_a_failed_check(repo: GitRepo, sealed: Sealer) -> None:
    repo.write("not-exec.sh", "#!/bin/sh\necho hi\n", mode=0o644)
    sealed(
        plan(
            step("missing", run("definitely-not-a-command-xyz")),
            step("denied", {"type": "exec", "path": "not-exec.sh"}),
        )
    )
    result = audit_run(repo)
    assert result.code == 1 and "Traceback" not in result.err, result.err
    doc = recorded(repo)
    assert doc["verdict"] == "FAIL"
    missing = doc["steps"]["missing"]["checks"][0]
    assert missing["message"] == "command not found: definitely-not-a-command-xyz"
    assert missing["outcome"] == "failed" and missing["exit_code"] is None
    denied = doc["steps"]["denied"]["checks"][0]["message"]
    assert denied == "exec path 'not-exec.sh' is not an executable file"


# ---------------------------------------------------------------------- path confinement (33)


def test_paths_escaping_through_a_symlink_are_refused(
    repo: GitRepo, sealed: Sealer, tmp_path: Path
) -> None:
    """The tree holds symlinks leading out of the checkout (to its parent, to a folder outside
    holding a passing script and file): a cwd, a file_exists, a regex and an exec path through
    them fail, naming the path; a symlink that stays inside is followed."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "verdict").write_text("ok\n")
    (outside / "pass.sh").write_text("#!/bin/sh\nexit 0\n")
    (outside / "pass.sh").chmod(0o755)
    os.symlink("..", repo.path / "up")
    os.symlink(str(outside), repo.path / "out")
    repo.write("inner/verdict", "ok\n")
    os.symlink("inner", repo.path / "alias")
    sealed(
        plan(
            step("cwd", run("true", cwd="up")),
            step("exists", run("true"), {"type": "file_exists", "path": "out/verdict"}),
            step("regex", run("true"), {"type": "regex", "path": "out/verdict", "pattern": "ok"}),
            step("exec", {"type": "exec", "path": "out/pass.sh"}),
            step(
                "inside",
                run("grep", "-qx", "ok", "verdict", cwd="alias"),
                {"type": "regex", "path": "alias/verdict", "pattern": "^ok$"},
            ),
        )
    )
    result = audit_run(repo)
    assert result.code == 1, result.out + result.err
    doc = recorded(repo)
    assert doc["verdict"] == "FAIL"
    messages = {sid: doc["steps"][sid]["checks"][-1]["message"] for sid in doc["steps"]}
    for sid, what, rel in (
        ("cwd", "cwd", "up"),
        ("exists", "path", "out/verdict"),
        ("regex", "path", "out/verdict"),
        ("exec", "exec path", "out/pass.sh"),
    ):
        assert doc["steps"][sid]["status"] == "failed"
        assert messages[sid].startswith(f"{what} {rel!r} escapes the workspace through a symlink")
    assert doc["steps"]["inside"]["status"] == "passed", doc["steps"]["inside"]
    assert status(repo)[0] == 1


def test_a_lexically_bad_path_is_refused_before_anything_runs(repo: GitRepo) -> None:
    """`..` in a cwd, an absolute path: the plan does not validate, cannot be sealed, and
    nothing runs."""
    repo.write_plan(
        plan(
            step("up", run("true", cwd="../elsewhere")),
            step("abs", run("true"), {"type": "file_exists", "path": "/etc/hostname"}),
        )
    )
    repo.commit("plan")
    validated = audit(repo.path, "plan", "validate", process=True)
    assert validated.code == 1
    assert "$.steps[0].verify[0].cwd" in validated.out and "path.escapes-workspace" in validated.out
    assert "$.steps[1].verify[1].path" in validated.out
    assert "INVALID, 2 problem(s)" in validated.out
    for args in (("keys", "generate"), ("trust", "init")):
        assert audit(repo.path, *args).code == 0
    refused = audit(repo.path, "plan", "seal", process=True)
    assert refused.code != 0
    assert "path.escapes-workspace" in refused.out + refused.err
    ran = audit(repo.path, "run", process=True)
    assert ran.code == 1
    assert "cwd '../elsewhere': '../elsewhere' escapes the workspace" in ran.err
    assert repo.git("rev-parse", "--verify", "-q", "refs/audit/runs/default", check=False) == ""
