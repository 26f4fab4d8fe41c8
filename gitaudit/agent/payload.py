"""The host's JSON on stdin, and the project the hook speaks for. Standard library only.

Claude Code sends every hook a JSON object with ``session_id``, ``transcript_path``, ``cwd``,
``permission_mode`` and ``hook_event_name``; ``Stop``/``SubagentStop`` add ``stop_hook_active``
(true when the agent is already continuing because a stop hook blocked), ``PreToolUse`` adds
``tool_name`` and ``tool_input``. The hook does not depend on fields it does not use, but it
refuses anything that is not a JSON object: a garbled payload blocks, it never allows.
"""

from __future__ import annotations

import json
import os

from gitaudit.errors import GitAuditError

TYPE_CHECKING = False  # not typing's: the agent hooks do without typing (gitaudit.named)
if TYPE_CHECKING:
    from typing import Any


class PayloadError(GitAuditError):
    """The host's payload is not what the hook contract says (not JSON, not an object, a field
    of the wrong type)."""


def load(raw: bytes) -> dict[str, Any]:
    """The payload *raw* as a JSON object."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise PayloadError(
            f"the hook's stdin is not a JSON object ({exc})",
            hint="the host must send its hook payload as JSON on stdin",
        ) from None
    if not isinstance(doc, dict):
        raise PayloadError(
            f"the hook's stdin is JSON but not an object ({type(doc).__name__})",
            hint="the host must send its hook payload as a JSON object on stdin",
        )
    return doc


def field(doc: dict[str, Any], name: str, kind: type, *, required: bool = False) -> Any:
    """``doc[name]`` when it has type *kind*; None when absent and not *required*."""
    value = doc.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise PayloadError(
            f"the payload's {name!r} is {'missing' if value is None else type(value).__name__}, "
            f"not {kind.__name__}",
            hint="send the host's documented hook payload",
        )
    return value


def project_dir() -> str:
    """The project the hooks guard: ``$CLAUDE_PROJECT_DIR`` (Claude Code's project root, set
    for every hook it runs), else the directory the host started the hook in. Never the
    payload's ``cwd``: that is wherever the agent last changed directory to, and judging another
    repository the agent chose would let it stop on someone else's PASS."""
    return os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
