"""The files a patch writes, as the guard reads them: :func:`patch_paths`.

Two kinds of text carry patches past a path check that looks only at arguments:

* Codex's ``apply_patch`` tool (its ``tool_input.command`` is the patch body) and the same
  envelope fed to a shell: ``*** Add File: P``, ``*** Update File: P``, ``*** Delete File: P``,
  ``*** Move to: P``;
* a diff given to ``git apply``, ``patch`` or ``git am`` in a here-document: ``--- P``,
  ``+++ P`` (a tab and a timestamp may follow), ``diff --git a/P b/Q``, ``rename to P``,
  ``copy to P``, and a context diff's ``*** P``.

A diff's paths usually carry a prefix the applying command strips (``a/``, ``b/``, ``-p1``), so
each path is returned as written and without its first component: the guard checks both, since
refusing too much is safe and too little is not. Standard library only.
"""

from __future__ import annotations

import re

_CODEX = re.compile(r"^\*\*\* (?:Add File|Update File|Delete File|Move to): (.+)$")
_CODEX_MARKERS = re.compile(r"^\*\*\* (?:Begin Patch|End Patch|End of File)\b")
_UNIFIED = re.compile(r"^(?:---|\+\+\+|\*\*\*) (.+?)(?:\t.*)?$")
_HUNK = re.compile(r"^(?:---|\*\*\*) \d+(?:,\d+)? (?:----|\*\*\*\*)$")
_GIT = re.compile(r"^diff --git (\S+) (\S+)$")
_RENAME = re.compile(r"^(?:rename|copy) (?:from|to) (.+)$")


def patch_paths(text: str) -> list[str]:
    """Every path *text* names as a file a patch writes (see the module docstring), each also
    without its first component when it has more than one; ``/dev/null`` left out."""
    found: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if _CODEX_MARKERS.match(line) or _HUNK.match(line):
            continue
        codex = _CODEX.match(line)
        if codex:
            found.append(codex[1].strip())
            continue
        match = _GIT.match(line)
        if match:
            found += [match[1], match[2]]
            continue
        match = _RENAME.match(line) or _UNIFIED.match(line)
        if match:
            found.append(match[1].strip())
    out: list[str] = []
    for path in found:
        path = _unquoted(path)
        if not path or path == "/dev/null":
            continue
        out.append(path)
        first, sep, rest = path.partition("/")
        if sep and rest and first not in ("", ".", ".."):
            out.append(rest)
    return list(dict.fromkeys(out))


def _unquoted(path: str) -> str:
    """A path git quoted (``"a/x y"``) without its quotes and escapes."""
    if len(path) >= 2 and path[0] == path[-1] == '"':
        return re.sub(r"\\(.)", r"\1", path[1:-1])
    return path
