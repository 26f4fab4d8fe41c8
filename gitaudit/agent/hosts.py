"""How each host is answered: the hook decisions of Claude Code, and the exit-code-2 contract.

Standard library only: every hook call imports this module.

* ``claude-code`` (the host's documented decision control, code.claude.com/docs/en/hooks): a
  ``Stop``/``SubagentStop`` hook blocks by printing ``{"decision": "block", "reason": ...}`` on
  stdout and exiting 0; a ``PreToolUse`` hook refuses a tool call with ``hookSpecificOutput``
  ``permissionDecision: "deny"`` and a ``permissionDecisionReason``. Claude Code shows both
  reasons to the model. Allowing is exit 0 with no output.
* ``codex`` (OpenAI Codex CLI, developers.openai.com/codex/hooks): the same decisions, which
  Codex reads as Claude Code does (``decision: "block"`` with a non-empty ``reason`` on
  ``Stop``/``SubagentStop``, ``permissionDecision: "deny"`` on ``PreToolUse``); any exit code
  but 0 and 2 is a failed hook, which does not block either.
* ``generic``: exit 2 with the reason on stderr blocks or refuses; exit 0 with no output allows.
  Claude Code honours this contract too (exit 2 blocks a stop and a tool call), so a host that
  follows it needs nothing else.

Any other exit of the command, for any host, is the host's to interpret: Claude Code treats it
as a non-blocking error (the stop goes through), which is why the installed command line ends in
``|| exit 2`` (:mod:`gitaudit.agent.settings`).
"""

from __future__ import annotations

import json

from gitaudit.named import NamedTuple

TYPE_CHECKING = False  # not typing's: the agent hooks do without typing (gitaudit.named)
if TYPE_CHECKING:
    from typing import Literal

    Hook = Literal["stop", "guard"]

HOSTS = ("claude-code", "codex", "generic")
JSON_HOSTS = ("claude-code", "codex")  # answered with the JSON decisions
DEFAULT_HOST = "generic"
BLOCK_EXIT = 2  # the exit-code contract: block (a stop) or deny (a tool call)


class Answer(NamedTuple):
    """A hook's decision: allow, or block/deny with the reason the agent is shown."""

    allow: bool
    reason: str = ""


ALLOW = Answer(True)


class Reply(NamedTuple):
    """What the hook process does: its exit code, stdout and stderr."""

    code: int
    stdout: str
    stderr: str


def reply(host: str, hook: Hook, answer: Answer) -> Reply:
    """The process-level reply to *host* for *answer* of *hook*."""
    if answer.allow:
        return Reply(0, "", "")
    if host in JSON_HOSTS:
        if hook == "stop":
            doc: dict[str, object] = {"decision": "block", "reason": answer.reason}
        else:
            doc = {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": answer.reason,
                }
            }
        return Reply(0, json.dumps(doc, ensure_ascii=False) + "\n", "")
    return Reply(BLOCK_EXIT, "", answer.reason.rstrip("\n") + "\n")
