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

A patch given by name (``git apply fix.diff``, ``patch -i fix.diff``, ``patch -p1 <
fix.diff``, ``cat fix.diff | git apply``, ``git am 0001.patch``) is on disk when the guard
runs, so the guard reads it (:class:`Reader`) and judges its names like a here-document's:
without that, ``git apply --unsafe-paths --directory=.git p.diff`` wrote
``.git/hooks/pre-push`` from a file the agent had written with an edit tool. Reading is
bounded (:data:`FILE_BUDGET` bytes for one command) and fails closed: a name the guard cannot
resolve (a variable it does not know, a command substitution, a folder it cannot see), a file
that does not exist, is not a regular file (a FIFO would keep the guard waiting; a Maildir,
``/dev/stdin``) or is too big is :class:`~gitaudit.agent.shell.Unreadable`, and the command
is refused. ``git am`` reads mail, whose body git decodes (quoted-printable, base64, the
charset the mail declares) before it reads the diff: :func:`mail_texts`.
Standard library only.
"""

from __future__ import annotations

import email
import fnmatch
import os
import re
import stat
from collections.abc import Iterator, Sequence

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


# ------------------------------------------------------------------------ patch files on disk

FILE_BUDGET = 1 << 22
"""How many bytes of patch files one command may ask the guard to read (4 MiB: a patch of a
thousand ordinary files is a few hundred KiB)."""

_GLOB = re.compile(r"[*?\[]")
_MAILS = re.compile(r"^From ", re.M)  # where git mailsplit starts a message in a mailbox


class Reader:
    """Reads the patch files of one command, within :data:`FILE_BUDGET` bytes in all."""

    def __init__(self) -> None:
        self.spent = 0

    def read(self, word: str, bases: Sequence[str], folders: Sequence[str] = ("",)) -> list[str]:
        """The text of each file the shell word *word* may name from each of *bases* (absolute
        folders the command may be in; any other is one the guard cannot see) and each of
        *folders* under it (``patch -d DIR -i FILE`` reads FILE in DIR), as bash expands it
        (``~``, a glob: every match, and the word as written if it exists). Raises
        :class:`Unreadable` when none can be read, or one is not a regular file."""
        if "$" in word or "`" in word:
            raise Unreadable(
                f"the patch file `{word}` is named by a variable or a command the guard cannot "
                "see: write its name out"
            )
        word = os.path.expanduser(word)
        if _GLOB.search(os.path.dirname(word)):  # it may walk the whole disk past the timeout
            raise Unreadable(
                f"the patch files `{word}` are named by a glob over folders: name them"
            )
        places: list[str] = []
        for base in bases if not os.path.isabs(word) else ["/"]:
            if not os.path.isabs(base):
                raise Unreadable(
                    f"the patch file `{word}` is relative to a folder the guard cannot see (a "
                    "`cd` to a variable or a command): give its full path"
                )
            for folder in folders:
                path = os.path.normpath(os.path.join(base, folder, word))
                places += [path, *(_matches(path) if _GLOB.search(word) else [])]
        texts = [self._text(p) for p in dict.fromkeys(places) if os.path.lexists(p)]
        if not texts:
            raise Unreadable(
                f"the patch file `{word}` does not exist where the guard looks for it: write "
                "it first, then apply it by name"
            )
        return texts

    def _text(self, path: str) -> str:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise Unreadable(f"the patch file `{path}` cannot be read ({exc.strerror})") from exc
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise Unreadable(
                f"the patch file `{path}` is not a regular file (a folder, a pipe, a device): "
                "give the guard a file it can read"
            )
        with os.fdopen(fd, "rb") as file:
            data = file.read(FILE_BUDGET - self.spent + 1)
        self.spent += len(data)
        if self.spent > FILE_BUDGET:
            raise Unreadable(
                f"the patch files of this command are longer than the {FILE_BUDGET >> 20} MiB the "
                "guard reads: apply them in smaller parts"
            )
        return data.decode("utf-8", "surrogateescape")


def _matches(pattern: str) -> list[str]:
    """The files the glob in the last component of *pattern* matches, as bash expands it."""
    folder, name = os.path.split(pattern)
    try:
        with os.scandir(folder or ".") as entries:
            names = [e.name for _, e in zip(range(_ENTRIES + 1), entries, strict=False)]
    except OSError:
        return []
    if len(names) > _ENTRIES:
        raise Unreadable(f"the glob `{pattern}` looks through more files than the guard reads")
    return [os.path.join(folder, n) for n in sorted(names) if fnmatch.fnmatchcase(n, name)]


_ENTRIES = 4096


def mail_texts(text: str) -> Iterator[str]:
    """Each body of the mails in the mailbox *text* as ``git am`` reads it: decoded from
    quoted-printable or base64, in the charset it declares (one Python does not know raises
    :class:`Unreadable`: git may know it)."""
    starts = [m.start() for m in _MAILS.finditer(text)]
    for start, end in zip([0, *starts], [*starts, len(text)], strict=True):
        message = email.message_from_string(text[start:end])
        for part in message.walk():
            payload = part.get_payload(decode=True)
            if not isinstance(payload, bytes) or part.is_multipart():
                continue
            charset = part.get_content_charset() or "utf-8"
            try:
                yield payload.decode(charset, "surrogateescape")
            except LookupError as exc:
                raise Unreadable(
                    f"a mail for `git am` is in the charset `{charset}`, which the guard cannot "
                    "decode: send it in UTF-8"
                ) from exc
