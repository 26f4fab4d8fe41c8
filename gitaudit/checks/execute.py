"""Executing one declared check against the workspace, producing a recordable result.

Behavioural checks (``run``, ``exec``, ``pytest``) go through :func:`run_bounded`: no shell unless
the plan says ``shell: true``, stdin closed, cwd confined to the workspace, a timeout that kills
the whole process group, and bounded output; they see the environment of
:mod:`gitaudit.checks.environment` (an allow-list, private HOME and TMPDIR, what the plan
declares), and the executable they ran is recorded. ``file_exists`` and ``regex`` read the
workspace through :func:`confine`, so a symlink pointing outside it is rejected, never followed;
``file_exists`` wants what it names (a file, or with ``kind: dir`` a directory).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any, Literal

from gitaudit.checks.environment import Sandbox, check_environment, planted, resolve
from gitaudit.checks.fence import Fence
from gitaudit.checks.paths import confine, first_link, link_climbed
from gitaudit.checks.process import ProcessResult, decode_output, run_bounded
from gitaudit.checks.search import search
from gitaudit.errors import CheckError
from gitaudit.frozen import frozen
from gitaudit.pathsearch import found
from gitaudit.plan.model import Check
from gitaudit.plan.protect import climbing_paths, patterns_of

Outcome = Literal["passed", "failed", "unknown", "interrupted"]
REGEX_READ_LIMIT = 16 << 20
REGEX_SEARCH_SECONDS = 60.0  # a regex check has no timeout of its own; its search is bounded too
_UNFINISHED = "did not finish in time (a catastrophic pattern?): the outcome is unknown"


@frozen
class CheckResult:
    """The evidence of one check: what ran, how it ended, and its bounded output."""

    json_path: str
    type: str
    describe: str
    outcome: Outcome
    message: str
    argv: tuple[str, ...] = ()
    cwd: str = "."
    exit_code: int | None = None
    expect_exit: int | None = None
    duration: float = 0.0
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_total: int = 0
    stderr_total: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timed_out: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.json_path,
            "type": self.type,
            "check": self.describe,
            "outcome": self.outcome,
            "message": self.message,
            "argv": list(self.argv),
            "cwd": self.cwd,
            "exit_code": self.exit_code,
            "expect_exit": self.expect_exit,
            "duration": round(self.duration, 3),
            "stdout_bytes": self.stdout_total,
            "stderr_bytes": self.stderr_total,
            "stdout_truncated": self.stdout_truncated,
            "stderr_truncated": self.stderr_truncated,
            "timed_out": self.timed_out,
            **dict(self.extra),
        }


def _argv(check: Check, workspace: Path, python: str) -> tuple[str, ...]:
    if check.type == "run":
        if check.shell:
            return (check.cmd or "",)
        return check.argv
    if check.type == "exec":
        target = confine(workspace, check.path or "", what="exec path", must_exist=True)
        if not os.access(target, os.X_OK) or not target.is_file():
            raise CheckError(f"exec path {check.path!r} is not an executable file")
        return (str(target), *check.args)
    return (python, "-m", "pytest", *check.argv)


def run_check(
    check: Check,
    workspace: Path,
    sandbox: Sandbox,
    *,
    python: str = "python3",
    on_start: Callable[[int], None] | None = None,
    fence: Fence | None = None,
) -> CheckResult:
    """Execute *check* in *workspace*, its process inside *fence*; never raises for a failing or
    misdeclared check."""
    base: dict[str, Any] = {
        "json_path": check.json_path,
        "type": check.type,
        "describe": check.describe(),
    }
    try:
        if check.type == "file_exists":
            return _file_exists(check, workspace, base)
        if check.type == "regex":
            return _regex(check, workspace, base)
        cwd = confine(workspace, check.cwd, what="cwd", must_exist=True) if check.cwd else workspace
        return _process(check, workspace, cwd, sandbox, python, on_start, fence, base)
    except CheckError as exc:
        return CheckResult(**base, outcome="failed", message=exc.message)


def _process(
    check: Check,
    workspace: Path,
    cwd: Path,
    sandbox: Sandbox,
    python: str,
    on_start: Callable[[int], None] | None,
    fence: Fence | None,
    base: dict[str, Any],
) -> CheckResult:
    """A behavioural check: its environment, its executable, the bounded process."""
    environment = check_environment(sandbox, check.env)
    base["extra"] = {"env": environment.record()}
    if environment.missing:
        names = ", ".join(environment.missing)
        raise CheckError(
            f"the plan passes {names} to checks (pass_env), but the caller has not set it"
        )
    interpreter = None
    if check.type == "pytest":
        interpreter = resolve(python, environment.variables, cwd)
        if interpreter is None:
            raise CheckError(
                f"{python!r} (the plan's python for pytest checks) is not on the checks' PATH"
            )
    argv = _argv(check, workspace, interpreter or python)  # an exec path is confined first
    _refuse_own_files_through_links(check, workspace, sandbox)
    if not check.shell:
        program = python if interpreter else argv[0]
        executable = interpreter or resolve(argv[0], environment.variables, cwd)
        base["extra"]["executable"] = executable
        if os.sep not in program:  # found on PATH: a judge where the run was made looks again
            place = found(program, environment.variables.get("PATH", ""))
            base["extra"]["program"] = program
            base["extra"]["found_in"] = place[0] if place is not None else None
        why = planted(program, executable, sandbox.repository)
        if why is not None:
            raise CheckError(why, hint="remove the link, or name the program by its path")
    result = run_bounded(
        argv,
        cwd=cwd,
        env=environment.variables,
        timeout=check.timeout,
        max_output_bytes=check.max_output_bytes,
        shell=check.shell,
        on_start=on_start,
        fence=fence,
    )
    return _judge(check, workspace, cwd, result, base)


def _refuse_own_files_through_links(check: Check, workspace: Path, sandbox: Sandbox) -> None:
    """A file the seal protects as the check's own (its script, its configuration, its test
    paths) must be the file the check reaches: one reached through a link to elsewhere in the
    workspace is unprotected, and the agent could rewrite it under a sealed plan; one reached
    through a link out of the workspace is no file of the tree at all. The links the run itself
    makes to the declared ignored paths, and a live work tree (the plan opened it), are the
    plan's own."""
    live = bool(sandbox.repository) and os.path.realpath(workspace) == os.path.realpath(
        sandbox.repository[0]
    )
    own = patterns_of((), [check])
    plain = [g for g in own.globs if not any(c in g for c in "*?[")]
    on_the_way = [(rel, first_link(workspace, rel)) for rel in (*own.candidates, *plain)]
    # a `..` climbs out of where a link led, not back up the path as written: the file reached
    # is not the one the seal protects under the path read lexically
    on_the_way += [(rel, link_climbed(workspace, rel)) for rel in climbing_paths(check)]
    for rel, link_found in on_the_way:
        if link_found is None:
            continue
        link, target, inside = link_found
        if inside:
            raise CheckError(
                f"the check's own file {rel!r} is reached through the link {link!r} (to "
                f"{target!r}), which the seal does not protect",
                hint=f"name {target!r} in the plan instead of the link, or replace the link",
            )
        if not live and not _declared(link, sandbox.opened):
            raise CheckError(
                f"the check's own file {rel!r} is reached through the link {link!r}, which "
                f"leads out of the workspace (to {target!r}): the tree does not hold what the "
                "check runs",
                hint="commit the file itself in place of the link",
            )


def _declared(link: str, opened: tuple[str, ...]) -> bool:
    """Whether *link* is a declared ignored path, or inside one (*opened*)."""
    for path in opened:
        path = path.strip("/")
        if link == path or link.startswith(path + "/"):
            return True
    return False


_PYTEST_EXITS = {  # pytest's documented exit codes, beside the number in a failure's reason
    1: "tests failed",
    2: "interrupted",
    3: "internal error",
    4: "usage error",
    5: "no tests collected",
}


def _judge(
    check: Check, workspace: Path, cwd: Path, result: ProcessResult, base: dict[str, Any]
) -> CheckResult:
    outcome: Outcome = "passed"
    message = result.summary()
    if result.timed_out:
        outcome, message = "unknown", f"{message}: the outcome is unknown"
    elif result.start_error is not None or result.exit_code is None:
        outcome = "failed"
    elif result.exit_code != check.expect_exit:
        meaning = _PYTEST_EXITS.get(result.exit_code) if check.type == "pytest" else None
        code = f"{result.exit_code} ({meaning})" if meaning else str(result.exit_code)
        outcome, message = "failed", f"exit code {code}, expected {check.expect_exit}"
    elif check.output_regex is not None and (result.stdout_truncated or result.stderr_truncated):
        # a search of the kept first bytes can match what the whole output does not (a
        # negative lookahead, a line the cut ends early): the pattern judges all of it or fails
        outcome = "failed"
        message = (
            f"the output is longer than max_output_bytes ({check.max_output_bytes}), so "
            f"/{check.output_regex}/ cannot search all of it; raise max_output_bytes"
        )
    elif check.output_regex is not None:
        text = decode_output(result.stdout) + "\n" + decode_output(result.stderr)
        found = search(check.output_regex, text, check.timeout)
        if found is None:
            outcome = "unknown"
            message = f"the search for /{check.output_regex}/ in the output {_UNFINISHED}"
        elif not found:
            outcome = "failed"
            message = f"output does not match /{check.output_regex}/"
    rel_cwd = os.path.relpath(cwd, workspace)
    recorded = base.pop("extra", {})
    return CheckResult(
        **base,
        outcome=outcome,
        message=message,
        argv=result.argv,
        cwd=rel_cwd,
        exit_code=result.exit_code,
        expect_exit=check.expect_exit,
        duration=result.duration,
        stdout=result.stdout,
        stderr=result.stderr,
        stdout_total=result.stdout_total,
        stderr_total=result.stderr_total,
        stdout_truncated=result.stdout_truncated,
        stderr_truncated=result.stderr_truncated,
        timed_out=result.timed_out,
        extra={
            **recorded,
            "signal": result.signal,
            "leftovers_killed": result.leftovers_killed,
        },
    )


def _file_exists(check: Check, workspace: Path, base: dict[str, Any]) -> CheckResult:
    target = confine(workspace, check.path or "", what="path")
    if check.kind == "dir":
        if target.is_dir():
            return CheckResult(**base, outcome="passed", message=f"{check.path} is a directory")
        what = "is not a directory" if target.exists() else "does not exist"
        return CheckResult(**base, outcome="failed", message=f"{check.path} {what}")
    if target.is_file():
        return CheckResult(**base, outcome="passed", message=f"{check.path} exists")
    if target.is_dir():
        return CheckResult(
            **base,
            outcome="failed",
            message=f"{check.path} is a directory, not a file (declare kind: dir for a directory)",
        )
    if target.exists():
        return CheckResult(**base, outcome="failed", message=f"{check.path} is not a regular file")
    return CheckResult(**base, outcome="failed", message=f"{check.path} does not exist")


def _regex(check: Check, workspace: Path, base: dict[str, Any]) -> CheckResult:
    target = confine(workspace, check.path or "", what="path")
    try:
        data = _read_regular(target)
    except FileNotFoundError:
        return CheckResult(**base, outcome="failed", message=f"{check.path} does not exist")
    except OSError as exc:
        return CheckResult(**base, outcome="failed", message=f"{check.path}: {exc.strerror}")
    if data is None or len(data) > REGEX_READ_LIMIT:
        # a search of a part can match what the whole file does not (a negative lookahead,
        # `\Z`, a line the cut ends early): the pattern judges all of it or the check fails
        why = (
            "is not a regular file"
            if data is None
            else f"is larger than {REGEX_READ_LIMIT >> 20} MiB, more than a regex check "
            "searches; check it with a run check"
        )
        return CheckResult(**base, outcome="failed", message=f"{check.path} {why}")
    text = data.decode("utf-8", errors="replace")
    found = search(check.pattern or "", text, REGEX_SEARCH_SECONDS)
    if found is None:
        message = f"the search for /{check.pattern}/ in {check.path} {_UNFINISHED}"
        return CheckResult(**base, outcome="unknown", message=message)
    if found:
        return CheckResult(**base, outcome="passed", message=f"{check.path} matches")
    return CheckResult(
        **base, outcome="failed", message=f"{check.path} does not match /{check.pattern}/"
    )


def _read_regular(target: Path) -> bytes | None:
    """The first ``REGEX_READ_LIMIT + 1`` bytes of the regular file *target*; None for anything
    else. Opened without blocking and judged by what was opened, not by a name looked at before:
    a FIFO an earlier check made (or one in a live work tree) would block ``open`` forever, and a
    device reads without end."""
    fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return handle.read(REGEX_READ_LIMIT + 1)
