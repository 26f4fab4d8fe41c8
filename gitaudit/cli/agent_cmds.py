"""`git audit agent ...`: the hooks for AI coding hosts (install, uninstall, stop, guard).

``stop`` and ``guard`` are answered by :mod:`gitaudit.cli.fast` without typer (they run on every
stop and tool call); the commands here give them help and a second way in.
"""

from __future__ import annotations

from typing import Annotated

import typer

from gitaudit.agent.hosts import DEFAULT_HOST, HOSTS
from gitaudit.agent.settings import generic_instructions, install, uninstall
from gitaudit.cli.common import CONTEXT, repo_here, say

app = typer.Typer(
    help=(
        "Agent hooks for AI coding hosts (Claude Code, Codex): a stop hook held to the gate, "
        "and a guard. Agents side by side are `git audit agents`."
    ),
    context_settings=CONTEXT,
    no_args_is_help=True,
)

HostOpt = Annotated[
    str,
    typer.Option(
        "--host",
        help=f"The host: {', '.join(HOSTS[:-1])} or {HOSTS[-1]} (the exit-code-2 contract).",
    ),
]
LocalOpt = Annotated[
    bool,
    typer.Option(
        "--local",
        help="Claude Code: write .claude/settings.local.json (personal, not committed).",
    ),
]


def _host(host: str) -> str:
    if host not in HOSTS:
        raise typer.BadParameter(
            f"unknown host {host!r}; use {', '.join(HOSTS[:-1])} or {HOSTS[-1]}",
            param_hint="--host",
        )
    return host


@app.command("install")
def install_cmd(host: HostOpt = "claude-code", local: LocalOpt = False) -> None:
    """Install the stop hook and the guard for an AI coding host.

    The stop hook runs on Stop and SubagentStop, the guard on PreToolUse. claude-code: merged
    into .claude/settings.json; codex: into .codex/hooks.json; every other key and hook is
    kept, and running it again changes nothing. generic: prints the commands and the
    exit-code-2 contract."""
    if _host(host) == "generic":
        say(generic_instructions())
        return
    change = install(repo_here().require_workdir(), host, local=local)
    for event, state in change.events:
        say(f"{event}: {state}")
    say(f"settings: {change.path}{'' if change.written else ' (unchanged)'}")
    if host == "codex":
        say(
            "Codex reads .codex/ only in a trusted project, and asks you to review new hooks "
            "before they run: start a session and approve them"
        )
    else:
        say("Claude Code reads hooks at start-up: restart the session (or review them in /hooks)")


@app.command("uninstall")
def uninstall_cmd(host: HostOpt = "claude-code", local: LocalOpt = False) -> None:
    """Remove gitaudit's entries from the host's settings (and nothing else)."""
    if _host(host) == "generic":
        say("nothing is installed for generic hosts: remove the two commands from its settings")
        return
    change = uninstall(repo_here().require_workdir(), host, local=local)
    for event, state in change.events:
        say(f"{event}: {state}")
    if not change.events:
        say(f"no gitaudit hooks in {change.path}")


def _run(hook: str, host: str) -> None:
    from gitaudit.agent.entry import main

    raise typer.Exit(main([hook, "--host", _host(host)]))


@app.command("stop")
def stop_cmd(host: HostOpt = DEFAULT_HOST) -> None:
    """The Stop/SubagentStop hook: the agent may stop only on PASS.

    Reads the host's JSON on stdin; allows only when the gate says PASS for the work tree, else
    blocks with the reasons and the next command to run. Fails closed: bad input or any error
    blocks."""
    _run("stop", host)


@app.command("guard")
def guard_cmd(host: HostOpt = DEFAULT_HOST) -> None:
    """The PreToolUse hook: refuse edits and commands that get past the gate.

    Refuses edits of .git/, .gitaudit/, the agent settings, gitaudit's home and the files the
    checks run, and shell commands that bypass the gate (--no-verify, update-ref on
    refs/audit/*, git config audit.* or core.hooksPath, ...), each with the reason."""
    _run("guard", host)
