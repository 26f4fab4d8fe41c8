"""`git audit agent install/uninstall`: Claude Code's project settings merged, never clobbered."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gitaudit.agent.settings import GUARDED_TOOLS, generic_instructions, hook_command
from tests.gitrepo import GitRepo, audit

USER_SETTINGS: dict[str, Any] = {
    "permissions": {"allow": ["Bash(npm run lint)"], "deny": ["Read(./.env)"]},
    "env": {"FOO": "bar"},
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint-bash.sh"}]}
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done", "timeout": 5}]}],
        "PostToolUse": [
            {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "ruff format"}]}
        ],
    },
}


def settings(repo: GitRepo, name: str = "settings.json") -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((repo.path / ".claude" / name).read_text())
    return doc


def ours(event: str) -> dict[str, Any]:
    hook = "guard" if event == "PreToolUse" else "stop"
    group: dict[str, Any] = {"hooks": [{"type": "command", "command": hook_command(hook)}]}
    return {"matcher": GUARDED_TOOLS, **group} if event == "PreToolUse" else group


def install(repo: GitRepo, *args: str) -> str:
    result = audit(repo.path, "agent", "install", *args)
    assert result.code == 0, result.out + result.err
    return result.out


def test_install_writes_the_three_hooks(repo: GitRepo) -> None:
    out = install(repo)
    assert "Stop: added" in out and "PreToolUse: added" in out
    assert settings(repo) == {
        "hooks": {event: [ours(event)] for event in ("Stop", "SubagentStop", "PreToolUse")}
    }


def test_install_keeps_what_is_there_and_is_idempotent(repo: GitRepo) -> None:
    repo.write_json(".claude/settings.json", USER_SETTINGS)
    install(repo)
    merged = settings(repo)
    assert merged["permissions"] == USER_SETTINGS["permissions"]
    assert merged["env"] == {"FOO": "bar"}
    hooks = merged["hooks"]
    assert hooks["PostToolUse"] == USER_SETTINGS["hooks"]["PostToolUse"]
    assert hooks["PreToolUse"] == [*USER_SETTINGS["hooks"]["PreToolUse"], ours("PreToolUse")]
    assert hooks["Stop"] == [*USER_SETTINGS["hooks"]["Stop"], ours("Stop")]
    assert hooks["SubagentStop"] == [ours("SubagentStop")]
    text = (repo.path / ".claude" / "settings.json").read_text()
    out = install(repo)
    assert "unchanged" in out and "Stop: current" in out
    assert (repo.path / ".claude" / "settings.json").read_text() == text


def test_install_replaces_an_older_entry_in_place_without_duplicating(repo: GitRepo) -> None:
    old = {"type": "command", "command": "git audit agent stop", "timeout": 30}
    user = {"type": "command", "command": "say done"}
    repo.write_json(
        ".claude/settings.json",
        {
            "hooks": {
                "Stop": [{"hooks": [old, user]}, {"hooks": [{"type": "command", "command": "x"}]}]
            }
        },
    )
    assert "Stop: updated" in install(repo)
    assert settings(repo)["hooks"]["Stop"] == [
        ours("Stop"),
        {"hooks": [user]},
        {"hooks": [{"type": "command", "command": "x"}]},
    ]


def test_uninstall_removes_only_gitaudits_entries(repo: GitRepo) -> None:
    repo.write_json(".claude/settings.json", USER_SETTINGS)
    install(repo)
    result = audit(repo.path, "agent", "uninstall")
    assert result.code == 0 and "Stop: removed" in result.out
    assert settings(repo) == USER_SETTINGS
    result = audit(repo.path, "agent", "uninstall")
    assert result.code == 0 and "no gitaudit hooks" in result.out
    assert settings(repo) == USER_SETTINGS


def test_uninstall_of_a_file_gitaudit_created_removes_it(repo: GitRepo) -> None:
    install(repo)
    assert audit(repo.path, "agent", "uninstall").code == 0
    assert not (repo.path / ".claude" / "settings.json").exists()


def test_local_settings_are_separate(repo: GitRepo) -> None:
    install(repo, "--local")
    assert "Stop" in settings(repo, "settings.local.json")["hooks"]
    assert not (repo.path / ".claude" / "settings.json").exists()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "not a JSON object"),
        ('{"hooks": []}', "$.hooks is not an object"),
        ('{"hooks": {"Stop": {}}}', "$.hooks.Stop is not a list"),
    ],
)
def test_a_broken_settings_file_is_refused_not_clobbered(
    repo: GitRepo, text: str, words: str
) -> None:
    repo.write(".claude/settings.json", text)
    result = audit(repo.path, "agent", "install")
    assert result.code == 1 and words in result.err
    assert (repo.path / ".claude" / "settings.json").read_text() == text


def test_generic_prints_the_contract_and_writes_nothing(repo: GitRepo) -> None:
    result = audit(repo.path, "agent", "install", "--host", "generic")
    assert result.code == 0 and result.out.strip() == generic_instructions()
    assert "exit 2" in result.out and hook_command("stop", "generic") in result.out
    assert not (repo.path / ".claude").exists()


def test_an_unknown_host_is_a_usage_error(repo: GitRepo) -> None:
    assert audit(repo.path, "agent", "install", "--host", "cursor").code == 2
    assert audit(repo.path, "agent", "stop", "--host", "cursor", input="{}").code == 2
