"""Playing the AI coding host: real Claude Code (and Codex) payloads, fed to the installed hook
command.

A test builds a sealed project (:func:`sealed_project`), takes a payload from
``tests/fixtures/claude-code/`` or ``tests/fixtures/codex/`` (the host's documented hook
input), and runs the command line
``git audit agent install`` writes (``git-audit agent stop --host claude-code || exit 2``)
through ``sh -c`` in the project, with ``CLAUDE_PROJECT_DIR`` set and the payload on stdin, as
Claude Code does. :class:`HookRun` reads the answer as the host would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitaudit.agent.settings import hook_command
from tests.gitrepo import GitRepo, audit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"  # one folder per host

GREETER = "def greeting():\n    return 'Hello, world!'\n"
CHECK = (
    "import sys\nsys.path.insert(0, '.')\nfrom greeter import greeting\n"
    "assert greeting() == 'Hello, world!', greeting()\n"
)
PLAN: dict[str, Any] = {
    "task": "greet the world",
    "requirements": [{"id": "REQ-1", "description": "the greeting is right", "priority": "must"}],
    "steps": [
        {
            "id": "greeting",
            "depends_on": [],
            "covers": ["REQ-1"],
            "verify": [{"type": "run", "argv": ["python3", "tests/check_greeting.py"]}],
        }
    ],
}


def sealed_project(path: Path) -> GitRepo:
    """A repository with gitaudit set up (`git audit init`: key, trust, hooks), one sealed plan
    whose check runs ``tests/check_greeting.py`` against ``greeter.py``, all committed; no run
    yet (the gate says UNKNOWN)."""
    repo = GitRepo.create(path)
    repo.write("greeter.py", GREETER)
    repo.write("tests/check_greeting.py", CHECK)
    repo.commit("greeter")
    result = audit(repo.path, "init")
    assert result.code == 0, result.out + result.err
    repo.write_plan(PLAN)
    result = audit(repo.path, "plan", "seal", "--reason", "first version")
    assert result.code == 0, result.out + result.err
    repo.git("add", "-A")
    repo.git("commit", "-q", "--no-verify", "-m", "plan")
    return repo


def run_passing(repo: GitRepo) -> None:
    result = audit(repo.path, "run")
    assert result.code == 0, result.out + result.err


# ---------------------------------------------------------------------------------- payloads


def payload(name: str, project: Path, host: str = "claude-code", **fields: Any) -> dict[str, Any]:
    """The fixture ``<host>/<name>.json`` for *project*, with *fields* set."""
    text = (FIXTURES / host / f"{name}.json").read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text.replace("${PROJECT}", str(project)))
    doc.update(fields)
    return doc


def stop(
    project: Path, *, active: bool = False, event: str = "Stop", host: str = "claude-code"
) -> dict[str, Any]:
    name = "stop" if event == "Stop" else "subagent-stop"
    return payload(name, project, host, stop_hook_active=active)


def tool(
    project: Path, name: str, cwd: Path | None = None, host: str = "claude-code", **tool_input: Any
) -> dict[str, Any]:
    """A PreToolUse payload of *host* for the tool *name* with exactly *tool_input*."""
    doc = payload(f"pretooluse-{name.lower()}", project, host, tool_input=tool_input)
    if cwd is not None:
        doc["cwd"] = str(cwd)
    return doc


def bash(project: Path, command: str, cwd: Path | None = None) -> dict[str, Any]:
    return tool(project, "Bash", cwd, command=command, description="a command")


def apply_patch(project: Path, patch: str, cwd: Path | None = None) -> dict[str, Any]:
    """Codex's file edit: the patch body in ``tool_input.command``."""
    return tool(project, "apply_patch", cwd, "codex", command=patch)


def codex_patch(*operations: tuple[str, str]) -> str:
    """A Codex patch envelope: (``Add File``/``Update File``/``Delete File``, path) each with a
    one-line change."""
    lines = ["*** Begin Patch"]
    for verb, path in operations:
        lines.append(f"*** {verb}: {path}")
        if verb == "Add File":
            lines.append("+print('ok')")
        elif verb == "Update File":
            lines += ["@@", "-x", "+y"]
    return "\n".join([*lines, "*** End Patch", ""])


# ------------------------------------------------------------------------------- the host


@dataclass
class HookRun:
    code: int
    stdout: str
    stderr: str
    host: str

    @property
    def decision(self) -> dict[str, Any] | None:
        """The JSON decision on stdout (Claude Code reads it on exit 0 only)."""
        if self.code != 0 or not self.stdout.strip():
            return None
        doc: dict[str, Any] = json.loads(self.stdout)
        return doc

    @property
    def blocked(self) -> bool:
        """What the host does: exit 2 blocks; exit 0 with a block/deny decision blocks; exit 0
        without one allows; anything else is the host's non-blocking error (it allows)."""
        if self.code == 2:
            return True
        if self.code != 0:
            return False
        doc = self.decision or {}
        specific = doc.get("hookSpecificOutput") or {}
        return doc.get("decision") == "block" or specific.get("permissionDecision") == "deny"

    @property
    def allowed(self) -> bool:
        return self.code == 0 and not self.blocked and not self.stdout.strip()

    @property
    def reason(self) -> str:
        if self.code == 2:
            return self.stderr
        doc = self.decision or {}
        specific = doc.get("hookSpecificOutput") or {}
        return str(doc.get("reason") or specific.get("permissionDecisionReason") or "")


def host_env(
    project: Path, extra: dict[str, str] | None = None, host: str = "claude-code"
) -> dict[str, str]:
    """The hook's environment: Claude Code sets ``CLAUDE_PROJECT_DIR``; Codex sets nothing and
    starts the hook in the session's directory."""
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    env.pop("CLAUDE_PROJECT_DIR", None)
    if host == "claude-code":
        env["CLAUDE_PROJECT_DIR"] = str(project)
    env.update(extra or {})
    return env


def run_hook(
    project: Path,
    hook: str,
    data: dict[str, Any] | bytes | str,
    *,
    host: str = "claude-code",
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    command: str | None = None,
) -> HookRun:
    """Run the installed command line of *hook* as the host does: ``sh -c COMMAND`` in the
    project (or *cwd*), the payload *data* on stdin."""
    raw = (
        data
        if isinstance(data, bytes)
        else (data if isinstance(data, str) else json.dumps(data)).encode()
    )
    proc = subprocess.run(
        ["/bin/sh", "-c", command or hook_command(hook, host)],
        cwd=cwd or project,
        input=raw,
        capture_output=True,
        env=host_env(project, env, host),
        check=False,
    )
    return HookRun(proc.returncode, proc.stdout.decode(), proc.stderr.decode(), host)
