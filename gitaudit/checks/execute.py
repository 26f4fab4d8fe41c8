"""Executing one declared check against the workspace, producing a recordable result.

Behavioural checks (``run``, ``exec``, ``pytest``) go through :func:`run_bounded`: no shell unless
the plan says ``shell: true``, stdin closed, cwd confined to the workspace, a timeout that kills
the whole process group, and bounded output. ``file_exists`` and ``regex`` read the workspace
through :func:`confine`, so a symlink pointing outside it is rejected, never followed.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gitaudit.checks.paths import confine
from gitaudit.checks.process import ProcessResult, decode_output, run_bounded
from gitaudit.errors import CheckError
from gitaudit.plan.model import Check

Outcome = Literal["passed", "failed", "unknown", "interrupted"]
REGEX_READ_LIMIT = 16 << 20

# Variables that describe *gitaudit's* repository or signing identity: a check must not inherit
# them (inside a hook they would point git at the user's index; signing variables would let a
# check sign evidence).
_SCRUBBED = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_PREFIX",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_QUARANTINE_PATH",
    "GITAUDIT_SIGNING_KEY",
    "SSH_AUTH_SOCK",
)


@dataclass(frozen=True)
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


def check_python() -> str:
    """The Python used for ``pytest`` checks: ``$GITAUDIT_PYTHON``, else ``python3`` on PATH,
    else the interpreter running gitaudit."""
    return os.environ.get("GITAUDIT_PYTHON") or shutil.which("python3") or sys.executable


def check_env(extra: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")  # keep __pycache__ out of the audited tree
    env.update(extra)
    return env


def _argv(check: Check, workspace: Path) -> tuple[str, ...]:
    if check.type == "run":
        if check.shell:
            return (check.cmd or "",)
        return check.argv
    if check.type == "exec":
        target = confine(workspace, check.path or "", what="exec path", must_exist=True)
        if not os.access(target, os.X_OK) or not target.is_file():
            raise CheckError(f"exec path {check.path!r} is not an executable file")
        return (str(target), *check.args)
    return (check_python(), "-m", "pytest", *check.argv)


def run_check(
    check: Check, workspace: Path, *, on_start: Callable[[int], None] | None = None
) -> CheckResult:
    """Execute *check* in *workspace*; never raises for a failing or misdeclared check."""
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
        argv = _argv(check, workspace)
    except CheckError as exc:
        return CheckResult(**base, outcome="failed", message=exc.message)
    result = run_bounded(
        argv,
        cwd=cwd,
        env=check_env(check.env),
        timeout=check.timeout,
        max_output_bytes=check.max_output_bytes,
        shell=check.shell,
        on_start=on_start,
    )
    return _judge(check, workspace, cwd, result, base)


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
        outcome, message = "failed", f"exit code {result.exit_code}, expected {check.expect_exit}"
    elif check.output_regex is not None:
        text = decode_output(result.stdout) + "\n" + decode_output(result.stderr)
        if not re.search(check.output_regex, text, re.MULTILINE):
            outcome = "failed"
            message = f"output does not match /{check.output_regex}/"
    if outcome == "passed" and result.leftovers_killed:
        message += " (background processes it left were killed)"
    rel_cwd = os.path.relpath(cwd, workspace)
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
        extra={"signal": result.signal, "leftovers_killed": result.leftovers_killed},
    )


def _file_exists(check: Check, workspace: Path, base: dict[str, Any]) -> CheckResult:
    target = confine(workspace, check.path or "", what="path")
    if target.exists():
        return CheckResult(**base, outcome="passed", message=f"{check.path} exists")
    return CheckResult(**base, outcome="failed", message=f"{check.path} does not exist")


def _regex(check: Check, workspace: Path, base: dict[str, Any]) -> CheckResult:
    target = confine(workspace, check.path or "", what="path")
    try:
        with open(target, "rb") as fh:
            data = fh.read(REGEX_READ_LIMIT + 1)
    except FileNotFoundError:
        return CheckResult(**base, outcome="failed", message=f"{check.path} does not exist")
    except OSError as exc:
        return CheckResult(**base, outcome="failed", message=f"{check.path}: {exc.strerror}")
    truncated = len(data) > REGEX_READ_LIMIT
    text = data[:REGEX_READ_LIMIT].decode("utf-8", errors="replace")
    found = re.search(check.pattern or "", text, re.MULTILINE)
    note = " (first 16 MiB searched)" if truncated else ""
    if found:
        return CheckResult(**base, outcome="passed", message=f"{check.path} matches{note}")
    return CheckResult(
        **base, outcome="failed", message=f"{check.path} does not match /{check.pattern}/{note}"
    )
