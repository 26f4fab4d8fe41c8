"""The files a patch writes, as the guard reads them: :func:`patch_paths`.

Two kinds of text carry patches past a path check that looks only at arguments:

* Codex's ``apply_patch`` tool (its ``tool_input.command`` is the patch body) and the same
  envelope fed to a shell: ``*** Add File: P``, ``*** Update File: P``, ``*** Delete File: P``,
  ``*** Move to: P``;
* a diff given to ``git apply``, ``patch`` or ``git am`` in a here-document: ``--- P``,
  ``+++ P`` (a tab or spaces and a timestamp may follow), ``diff --git a/P b/Q``, ``rename
  from/to P`` (and git's older ``rename old/new P``), ``copy from/to P``, a context diff's
  ``*** P`` and GNU patch's ``Index: P``.

A name may be quoted the way git and GNU patch quote it (``"a/\\164ests/x.py"``: C escapes,
octal bytes that may form UTF-8), and is decoded exactly as they decode it. Where a name ends
depends on the program (GNU patch stops at a space unless a tab follows; git stops at a tab,
or before a timestamp, or, for ``rename to``, at the end of the line), so each reading is
returned. And the applying command strips any number of leading components (``-p0``,
``-p1``, ``-p2``, ...), so each name is also returned without each of its leading
components: the guard checks them all, since refusing too much is safe and too little is not.
Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gitaudit.agent.shell import Unreadable

_CODEX = re.compile(r"^\*\*\* (?:Add File|Update File|Delete File|Move to): (.+)$")
_CODEX_MARKERS = re.compile(r"^\*\*\* (?:Begin Patch|End Patch|End of File)\b")
_HUNK = re.compile(r"^(?:---|\*\*\*) \d+(?:,\d+)? (?:----|\*\*\*\*)$")
_HEADER = re.compile(
    r"^(?:---|\+\+\+|\*\*\*|(?:rename|copy) (?:from|to)|rename (?:old|new)) (.*)$|^Index:(.*)$",
)
_GIT = "diff --git "
_SPACE = " \t\n\v\f\r"  # C's isspace: where git and GNU patch end a name
# A timestamp git strips from the end of a name (apply.c, diff_timestamp_len).
_TIMESTAMP = re.compile(
    r"[\t ](?:\d\d)?\d\d-\d\d-\d\d(?: \d\d:\d\d:\d\d(?:\.\d+)?)?(?: [+-]\d\d:?\d\d)?$"
)
_C_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, '"': 34}


def patch_paths(text: str) -> list[str]:
    """Every path *text* names as a file a patch writes, in each way the applying program may
    read it (see the module docstring); ``/dev/null`` left out.

    Raises :class:`~gitaudit.agent.shell.Unreadable` past :data:`BUDGET`: every leading
    component of every name is a path to check, so a patch of very long names (a thousand
    components) would keep the guard checking past the host's hook timeout."""
    found: dict[str, None] = {}
    cost = 0
    for path in _candidates(text):
        if path not in found:
            cost += 1 + path.count("/") + len(path) // 64
            if cost > BUDGET:
                raise Unreadable(
                    "the patch in this command names more or longer paths than the guard "
                    "checks: apply it in smaller parts, or from a file you wrote with an "
                    "edit tool"
                )
            found[path] = None
    return list(found)


BUDGET = 200_000
"""How many paths' worth of checking one command's patches may ask for (a path costs one per
component and one per 64 characters): a patch of a thousand files is about a quarter of it."""


def _candidates(text: str) -> Iterator[str]:
    for raw in text.split("\n"):
        line = raw.strip()
        if _CODEX_MARKERS.match(line) or _HUNK.match(line):
            continue
        codex = _CODEX.match(line)
        if codex:
            yield from components(codex[1].strip())
        elif line.startswith(_GIT):
            yield from _git_header(line[len(_GIT) :])
        elif match := _HEADER.match(line):
            for name in _names(match[1] if match[1] is not None else match[2]):
                yield from components(name)


def _names(text: str) -> Iterator[str]:
    """The names a header's *text* may give: decoded when quoted, else up to a space (GNU
    patch), up to a tab (git; GNU patch when a tab follows), up to the end of the line (git's
    ``rename to``), and without a trailing timestamp (git)."""
    text = text.lstrip(_SPACE)
    if text.startswith('"'):
        unquoted = _c_unquoted(text)
        if unquoted is not None:
            yield unquoted[0]  # else git reads it as written, quotes and all
    tab = _before(text, "\t\n\v\f\r")
    yield _before(text, _SPACE)
    yield tab
    yield tab.rstrip(_SPACE)
    yield _before(text, "\n\v\f\r")
    stamp = _TIMESTAMP.search(text)
    if stamp:
        yield text[: stamp.start()].rstrip(" ") if stamp[0][0] == " " else text[: stamp.start()]


def _git_header(text: str) -> Iterator[str]:
    """The names ``diff --git A B`` may give (git uses them when no other line names the
    file). Unquoted, git splits the text at the blank where both halves name the same file
    once their leading components are stripped: that file is a part of the text after a
    blank or a slash, so each such part is returned as it is (those after a slash are the
    others without leading components already)."""
    if text.startswith('"'):
        unquoted = _c_unquoted(text)
        if unquoted is not None:
            first, end = unquoted
            yield from components(first)
            for name in _names(text[end:]):
                yield from components(name)
    for i, c in enumerate(text):
        if c in _SPACE or c == "/":
            rest = text[i + 1 :]
            if rest.startswith('"') and (unquoted := _c_unquoted(rest)) is not None:
                yield from components(unquoted[0])
            elif rest:
                yield rest


def _before(text: str, ends: str) -> str:
    """*text* up to the first of the characters *ends*."""
    return next((text[:i] for i, c in enumerate(text) if c in ends), text)


def components(path: str) -> Iterator[str]:
    """*path*, and *path* without each of its leading components (what ``-pN`` strips)."""
    if path and path != "/dev/null":
        yield path
        yield from (path[i + 1 :] for i, c in enumerate(path) if c == "/" and path[i + 1 :])


def _c_unquoted(text: str) -> tuple[str, int] | None:
    """The name quoted at the start of *text* (``"..."``), decoded as git and GNU patch decode
    it, and where its closing quote ends; None when it is not a valid quoted name.

    Their rules (git's ``unquote_c_style``, GNU patch's ``parse_c_string``): ``\\a \\b \\f \\n
    \\r \\t \\v \\\\ \\"``, and ``\\ooo`` exactly three octal digits, the first 0-3, giving one byte
    (bytes in a row form UTF-8 characters); any other escape makes the name invalid. A NUL byte
    ends the name (a C string). Bytes that are not UTF-8 are kept as surrogate escapes, as
    :func:`os.fsdecode` keeps them."""
    if not text.startswith('"'):
        return None
    out = bytearray()
    i = 1
    while i < len(text):
        c = text[i]
        if c == '"':
            name = bytes(out.partition(b"\0")[0]).decode("utf-8", "surrogateescape")
            return name, i + 1
        if c != "\\":
            out += c.encode("utf-8", "surrogateescape")
            i += 1
            continue
        e = text[i + 1 : i + 2]
        if e in _C_ESCAPES:
            out.append(_C_ESCAPES[e])
            i += 2
        elif re.fullmatch(r"[0-3][0-7][0-7]", text[i + 1 : i + 4]):
            out.append(int(text[i + 1 : i + 4], 8))
            i += 4
        else:
            return None
    return None
