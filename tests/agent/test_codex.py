"""The Codex host: `git audit agent install --host codex` writes .codex/hooks.json, and the
hooks answer Codex's payloads (tests/fixtures/codex/) with the decisions Codex reads."""

from __future__ import annotations

import json
from typing import Any

from gitaudit.agent.settings import CODEX_GUARDED_TOOLS, hook_command
from tests.agent.host import (
    apply_patch,
    codex_patch,
    run_hook,
    run_passing,
    stop,
    tool,
)
from tests.gitrepo import GitRepo, audit

USER_HOOKS: dict[str, Any] = {
    "hooks": {
        "SessionStart": [
            {"matcher": "startup|resume", "hooks": [{"type": "command", "command": "./ctx.sh"}]}
        ],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./deny-rm.sh"}]}
        ],
    }
}


def hooks_file(repo: GitRepo) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((repo.path / ".codex" / "hooks.json").read_text())
    return doc


def ours(event: str) -> dict[str, Any]:
    hook = "guard" if event == "PreToolUse" else "stop"
    group: dict[str, Any] = {"hooks": [{"type": "command", "command": hook_command(hook, "codex")}]}
    return {"matcher": CODEX_GUARDED_TOOLS, **group} if event == "PreToolUse" else group


def test_install_writes_codex_hooks_json_keeping_the_users(repo: GitRepo) -> None:
    repo.write_json(".codex/hooks.json", USER_HOOKS)
    result = audit(repo.path, "agent", "install", "--host", "codex")
    assert result.code == 0, result.err
    assert "Stop: added" in result.out and "trusted project" in result.out
    hooks = hooks_file(repo)["hooks"]
    assert hooks["SessionStart"] == USER_HOOKS["hooks"]["SessionStart"]
    assert hooks["PreToolUse"] == [*USER_HOOKS["hooks"]["PreToolUse"], ours("PreToolUse")]
    assert hooks["Stop"] == [ours("Stop")] and hooks["SubagentStop"] == [ours("SubagentStop")]
    text = (repo.path / ".codex" / "hooks.json").read_text()
    again = audit(repo.path, "agent", "install", "--host", "codex")
    assert "Stop: current" in again.out and "unchanged" in again.out
    assert (repo.path / ".codex" / "hooks.json").read_text() == text
    assert not (repo.path / ".claude").exists()
    result = audit(repo.path, "agent", "uninstall", "--host", "codex")
    assert result.code == 0 and hooks_file(repo) == USER_HOOKS


def test_codex_has_no_local_settings(repo: GitRepo) -> None:
    result = audit(repo.path, "agent", "install", "--host", "codex", "--local")
    assert result.code == 2 and "--local is for Claude Code" in result.err
    assert not (repo.path / ".codex").exists()


def test_the_stop_hook_answers_codex(project: GitRepo) -> None:
    for event in ("Stop", "SubagentStop"):
        run = run_hook(
            project.path, "stop", stop(project.path, event=event, host="codex"), host="codex"
        )
        assert run.code == 0 and json.loads(run.stdout)["decision"] == "block"
        assert "the gate says UNKNOWN" in run.reason and "Next: git audit run" in run.reason
    run_passing(project)
    again = stop(project.path, active=True, host="codex")
    assert run_hook(project.path, "stop", again, host="codex").allowed


def test_the_guard_reads_codex_patches(project: GitRepo) -> None:
    fine = apply_patch(project.path, codex_patch(("Update File", "greeter.py")))
    assert run_hook(project.path, "guard", fine, host="codex").allowed
    new = apply_patch(project.path, codex_patch(("Add File", "src/new.py")))
    assert run_hook(project.path, "guard", new, host="codex").allowed
    bad = apply_patch(
        project.path,
        codex_patch(("Update File", "greeter.py"), ("Update File", "tests/check_greeting.py")),
    )
    run = run_hook(project.path, "guard", bad, host="codex")
    assert run.code == 0 and run.blocked
    doc = json.loads(run.stdout)["hookSpecificOutput"]
    assert doc["hookEventName"] == "PreToolUse" and doc["permissionDecision"] == "deny"
    assert run.reason.startswith("apply_patch writing `tests/check_greeting.py` is refused")
    assert "protected by the plan" in run.reason


def test_codex_shell_commands_are_read_as_bash(project: GitRepo) -> None:
    ok = tool(project.path, "Bash", host="codex", command="python3 -m pytest -q tests")
    assert run_hook(project.path, "guard", ok, host="codex").allowed
    bad = tool(project.path, "Bash", host="codex", command="git commit --no-verify -m done")
    run = run_hook(project.path, "guard", bad, host="codex")
    assert run.blocked and "--no-verify" in run.reason


def test_a_patch_without_its_body_is_refused(project: GitRepo) -> None:
    doc = tool(project.path, "apply_patch", host="codex")  # no tool_input.command
    run = run_hook(project.path, "guard", doc, host="codex")
    assert run.blocked and "could not check this tool call" in run.reason
