"""Installing the agent hooks into a host: the project's hook settings, or instructions.

Each host gets three entries, each one matcher group holding one ``command`` handler:

* ``Stop`` and ``SubagentStop``: ``git-audit agent stop --host HOST || exit 2``;
* ``PreToolUse`` for the tools that write (``git-audit agent guard --host HOST || exit 2``).

``claude-code``: ``.claude/settings.json`` in the work tree (``.claude/settings.local.json``
with *local*: Claude Code's personal, git-ignored project settings); the guard's matcher is
``Write|Edit|MultiEdit|NotebookEdit|Bash``. ``codex``: ``.codex/hooks.json`` in the work tree
(Codex reads it, in the same shape, in a trusted project); the guard's matcher is
``Bash|apply_patch`` (Codex's shell tools report as ``Bash``, its file edits as
``apply_patch``).

The ``|| exit 2`` keeps the hook closed when the command cannot answer at all (``git-audit``
not on PATH, an interpreter that fails to start, a crash): both hosts treat exit codes other
than 0 and 2 as failed hooks that do not block, so without it those would let the agent stop.

The merge keeps everything else in the file (other keys, the user's own hooks and matcher
groups, their order), recognises gitaudit's handlers by their command and replaces them in
place when they differ, so installing twice changes nothing and never duplicates an entry.
Uninstalling removes gitaudit's handlers only (and the groups and events left empty by that).

``generic``: nothing is written; :func:`generic_instructions` is the exit-code-2 contract and
the two commands for the host's own configuration.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from gitaudit.errors import HookError, UsageError
from gitaudit.frozen import frozen

SETTINGS = Path(".claude") / "settings.json"
LOCAL_SETTINGS = Path(".claude") / "settings.local.json"
CODEX_HOOKS = Path(".codex") / "hooks.json"
GUARDED_TOOLS = "Write|Edit|MultiEdit|NotebookEdit|Bash"
CODEX_GUARDED_TOOLS = "Bash|apply_patch"
INSTALLABLE = ("claude-code", "codex")
_OURS = re.compile(r"(?:^|[\s/\"'])(?:git-audit|gitaudit|git audit) agent (?:stop|guard)\b")


def hook_command(hook: str, host: str = "claude-code") -> str:
    """The command line a host runs for *hook* (``stop`` or ``guard``)."""
    return f"git-audit agent {hook} --host {host} || exit 2"


def wanted(host: str = "claude-code") -> list[tuple[str, str | None, str]]:
    """(event, matcher, command) of every entry gitaudit installs for *host*."""
    stop, guard = hook_command("stop", host), hook_command("guard", host)
    tools = CODEX_GUARDED_TOOLS if host == "codex" else GUARDED_TOOLS
    return [
        ("Stop", None, stop),
        ("SubagentStop", None, stop),
        ("PreToolUse", tools, guard),
    ]


def settings_path(workdir: Path, host: str = "claude-code", *, local: bool = False) -> Path:
    """The file :func:`install` writes for *host* in the work tree *workdir*."""
    if host == "codex":
        if local:
            raise UsageError(
                "--local is for Claude Code's personal settings; Codex has none per project",
                hint="run `git audit agent install --host codex` without --local",
            )
        return workdir / CODEX_HOOKS
    return workdir / (LOCAL_SETTINGS if local else SETTINGS)


@frozen
class SettingsChange:
    """What installing or uninstalling did to the settings file at *path*."""

    path: Path
    events: tuple[tuple[str, str], ...]  # (event, added | updated | current | removed)
    written: bool


def is_ours(handler: object) -> bool:
    """A hook handler gitaudit installed (recognised by its command)."""
    return (
        isinstance(handler, dict)
        and isinstance(handler.get("command"), str)
        and bool(_OURS.search(handler["command"]))
    )


def install(workdir: Path, host: str = "claude-code", *, local: bool = False) -> SettingsChange:
    """Merge gitaudit's hooks into the project's hook settings of *host* (see the module
    docstring); HookError, before anything is written, when gitaudit (this one, or the
    ``git-audit`` on PATH that the host will run) lives inside the work tree."""
    import shutil

    from gitaudit.places import require_code_outside

    on_path = shutil.which("git-audit")
    require_code_outside(workdir, *([on_path] if on_path else []))
    path = settings_path(workdir, host, local=local)
    settings = _read(path)
    hooks = _hooks(settings, path, create=True)
    done = []
    for event, matcher, command in wanted(host):
        groups = _groups(hooks, event, path)
        handler = {"type": "command", "command": command}
        group: dict[str, Any] = {"hooks": [handler]}
        if matcher is not None:
            group = {"matcher": matcher, **group}
        present = [g for g in groups if isinstance(g, dict) and any(map(is_ours, _list(g)))]
        if present == [group]:
            done.append((event, "current"))
            continue
        groups[:], placed = _placed(groups, group)
        done.append((event, "updated" if placed else "added"))
    written = any(state != "current" for _, state in done)
    if written:
        _write(path, settings)
    return SettingsChange(path, tuple(done), written)


def uninstall(workdir: Path, host: str = "claude-code", *, local: bool = False) -> SettingsChange:
    """Remove gitaudit's hooks (only those) from the project's hook settings of *host*."""
    path = settings_path(workdir, host, local=local)
    if not path.exists():
        return SettingsChange(path, (), False)
    settings = _read(path)
    hooks = _hooks(settings, path, create=False)
    done = []
    for event in list(hooks):
        groups = _groups(hooks, event, path)
        kept = _without_ours(groups)
        if kept == groups:
            continue
        done.append((event, "removed"))
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not done:
        return SettingsChange(path, (), False)
    if not hooks:
        settings.pop("hooks", None)
    if settings:
        _write(path, settings)
    else:
        path.unlink()
    return SettingsChange(path, tuple(done), True)


def generic_instructions() -> str:
    """The exit-code-2 contract, for hosts other than Claude Code and Codex."""
    return "\n".join(
        [
            "gitaudit's agent hooks, for a host that runs a command with the hook's JSON on stdin:",
            "",
            f"  when the agent wants to stop:   {hook_command('stop', 'generic')}",
            f"  before each tool call:          {hook_command('guard', 'generic')}",
            "",
            "Run them in the project's work tree. The contract:",
            "  stdin    a JSON object. stop reads `stop_hook_active` (optional); guard reads",
            "           `tool_name`, `tool_input` (`file_path`, `notebook_path` or `command`) and",
            "           `cwd`, as Claude Code names them (Codex's `apply_patch`: the patch in",
            "           `tool_input.command`).",
            "  exit 0   allow (nothing is printed)",
            "  exit 2   block the stop / refuse the tool call; the reason is on stderr: give it",
            "           to the agent",
            "  other    cannot happen with `|| exit 2`; treat any other outcome as a block",
            "",
            "The stop hook blocks until `git audit status` says PASS for the work tree; it fails",
            "closed (bad JSON, no repository, any error: exit 2). See docs/agent-hooks.md.",
        ]
    )


# ---------------------------------------------------------------------------------- helpers


def _list(group: dict[str, Any]) -> list[Any]:
    handlers = group.get("hooks")
    return handlers if isinstance(handlers, list) else []


def _placed(groups: list[Any], group: dict[str, Any]) -> tuple[list[Any], bool]:
    """*groups* with gitaudit's handlers replaced by *group* (where the first of them stood, or
    at the end), and whether there were any."""
    out: list[Any] = []
    placed = False
    for item in groups:
        if not isinstance(item, dict) or not any(map(is_ours, _list(item))):
            out.append(item)
            continue
        if not placed:
            out.append(group)
            placed = True
        others = [h for h in _list(item) if not is_ours(h)]
        if others:
            out.append({**item, "hooks": others})
    if not placed:
        out.append(group)
    return out, placed


def _without_ours(groups: list[Any]) -> list[Any]:
    """*groups* with gitaudit's handlers removed, and the groups that held only those."""
    kept = []
    for group in groups:
        if not isinstance(group, dict) or not any(map(is_ours, _list(group))):
            kept.append(group)
            continue
        others = [h for h in _list(group) if not is_ours(h)]
        if others:
            kept.append({**group, "hooks": others})
    return kept


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise HookError(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        doc = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise HookError(
            f"{path}: not valid JSON ({exc})",
            hint="fix the file (the host cannot read it either), then install again",
        ) from None
    if not isinstance(doc, dict):
        raise HookError(f"{path}: the settings are not a JSON object", hint="fix the file")
    return doc


def _hooks(settings: dict[str, Any], path: Path, *, create: bool) -> dict[str, Any]:
    hooks = settings.setdefault("hooks", {}) if create else settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise HookError(f"{path}: $.hooks is not an object", hint="fix the file")
    return hooks


def _groups(hooks: dict[str, Any], event: str, path: Path) -> list[Any]:
    groups = hooks.setdefault(event, [])
    if not isinstance(groups, list):
        raise HookError(f"{path}: $.hooks.{event} is not a list", hint="fix the file")
    return groups


def _write(path: Path, settings: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(settings, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise HookError(f"{path}: cannot write: {exc.strerror}") from exc
