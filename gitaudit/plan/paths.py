"""The lexical rule for the paths a plan names (``cwd``, ``path``, ``exec``, ``inputs``).

Pure (no filesystem access), so a plan can be validated anywhere; :mod:`gitaudit.checks.paths`
applies it again, and then resolves the path inside the workspace, when a check runs.
"""

from __future__ import annotations

import os

HINT = "use a path relative to the repository root without '..'"


def check_relative_spec(rel: str) -> str | None:  # noqa: PLR0911 (one decision list: each way a path is bad)
    """Return why ``rel`` is not an acceptable workspace-relative path, or None if it is.

    Purely lexical (never touches the filesystem), so a plan can be validated anywhere. The
    message starts with the offending value; callers prefix what it is (``cwd``, ``path``...).
    ``.`` (the workspace root itself) is accepted.
    """
    if not isinstance(rel, str):
        return f"{rel!r} is not a string"
    if rel == "":
        return "'' is empty"
    if "\0" in rel:
        return f"{rel!r} contains a NUL byte"
    try:
        os.fsencode(rel)
    except UnicodeError:
        return f"{rel!r} is not a valid file name (it contains unencodable characters)"
    if rel.startswith("/"):
        return f"{rel!r} escapes the workspace: it is an absolute path"
    if ".." in rel.split("/"):
        return f"{rel!r} escapes the workspace: it contains a '..' component"
    return None
