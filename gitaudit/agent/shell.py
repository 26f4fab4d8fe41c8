"""Reading a shell command the way the guard needs to: the simple commands it runs.

Not a shell: a conservative reader of what an agent's ``Bash`` tool call will run. It splits
the command into words and operators as a POSIX shell does (quotes, backslashes, comments;
bash's ``$'...'`` decoded and ``$"..."`` read as ``"..."``; ``$(...)``, backticks and ``<(...)``
kept whole inside their word), then into simple commands at
``;``, ``&&``, ``||``, ``|``, ``&``, newlines and parentheses; takes each command's leading
``NAME=value`` assignments, its write-redirection targets (``>``, ``>>``, ``&>``, ...), its
input redirections and the command piped into it (where a patch it applies comes from);
unwraps the commands that run another command (``env``, ``sudo``, ``nice``, ``timeout``,
``xargs``, ``find -exec``, ``command``, ``exec``, ...); and reads the scripts given to
``sh -c``/``bash -c``, ``eval``, ``alias`` and command substitutions as commands too.
Here-document bodies are read as well, marked as such (``bash <<EOF`` runs its body; ``cat
<<EOF`` only prints it).

What it cannot see (a script file it runs, a variable set elsewhere, an alias defined in an
earlier call) it does not guess at: the rules in :mod:`gitaudit.agent.bypass` refuse what they
cannot read where it matters. Standard library only.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator
from typing import NamedTuple

MAX_DEPTH = 8  # nested sh -c / eval / $(...) levels read before giving up (and refusing)

OPERATORS = (
    "&>>", "<<<", ";;", "&&", "||", "|&", "&>", ">>", ">|", ">&", "<<", "<&", "<>",
    ">", "<", ";", "|", "&", "(", ")", "\n",
)  # fmt: skip
WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
READ_REDIRECTS = frozenset({"<", "<<", "<<<", "<&"})
_FD_REDIRECTS = WRITE_REDIRECTS | READ_REDIRECTS | {">&"}
KEYWORDS = frozenset(
    {"!", "{", "}", "then", "do", "else", "elif", "if", "while", "until", "time", "coproc", "fi"}
)
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "busybox"})
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\+?=(.*)$", re.S)
_HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z0-9_.\-]+)\2")
_BLANKS = " \t\r"


class Unreadable(Exception):
    """The command cannot be read (unbalanced quotes, nesting too deep)."""


class Token(NamedTuple):
    text: str
    operator: bool


class Simple(NamedTuple):
    """One simple command: its ``NAME=value`` prefixes, its words, its write targets."""

    assignments: tuple[tuple[str, str], ...]
    words: tuple[str, ...]
    writes: tuple[str, ...]
    heredoc: bool = False  # read from a here-document body: maybe a command, maybe data
    reads: tuple[tuple[str, str], ...] = ()
    """Its input redirections, each ``(operator, word)``: ``("<", FILE)``, ``("<<<", TEXT)``,
    ``("<<", DELIMITER)``, ``("<&", FD)`` (where a patch it applies may come from)."""
    piped: Simple | None = None
    """The command whose output it reads through a pipe (``cat fix.diff | git apply``); one
    without words when the guard cannot tell which (``{ ...; } | git apply``)."""

    @property
    def name(self) -> str:
        """The command's name without its folder (``/usr/bin/git`` is ``git``)."""
        return os.path.basename(self.words[0]) if self.words else ""


def commands(script: str, depth: int = 0) -> Iterator[Simple]:
    """Every simple command *script* runs, nested ones included (see the module docstring)."""
    if depth > MAX_DEPTH:
        raise Unreadable("the command nests shells, eval or $(...) too deeply to read")
    text, bodies = split_heredocs(script)
    for body in bodies:
        for simple in _lenient(body, depth + 1):
            yield simple._replace(heredoc=True)
    for simple in _simple_commands(tokens(text)):
        reads = (word for _, word in simple.reads)
        for word in (*simple.words, *(v for _, v in simple.assignments), *simple.writes, *reads):
            for inner in substitutions(word):
                yield from commands(inner, depth + 1)
        yield from _unwrapped(simple, depth)


def _lenient(script: str, depth: int) -> Iterator[Simple]:
    """The commands of *script* if it reads; else of each line that reads."""
    try:
        found = list(commands(script, depth))
    except Unreadable:
        found = []
        for line in script.split("\n"):
            try:
                found += list(commands(line, depth))
            except Unreadable:
                continue
    yield from found


def split_heredocs(script: str) -> tuple[str, list[str]]:
    """*script* without the bodies of its here-documents, and the bodies."""
    out: list[str] = []
    bodies: list[str] = []
    body: list[str] = []
    pending: list[tuple[str, bool]] = []
    for line in script.split("\n"):
        if pending:
            delimiter, tabs = pending[0]
            if (line.lstrip("\t") if tabs else line) == delimiter:
                pending.pop(0)
                bodies.append("\n".join(body))
                body = []
            else:
                body.append(line)
            continue
        out.append(line)
        for match in _HEREDOC.finditer(line):
            pending.append((match.group(3), match.group(1) == "-"))
    if body:
        bodies.append("\n".join(body))
    return "\n".join(out), bodies


def substitutions(word: str) -> list[str]:
    """The scripts of the command substitutions in *word*: ``$(...)``, ``<(...)``, ``>(...)``
    and backticks (a literal one in single quotes too: reading it is safe, missing one is
    not)."""
    found = []
    i = 0
    while i < len(word):
        if word.startswith(("$(", "<(", ">("), i):
            end = _closing(word, i + 2)
            found.append(word[i + 2 : end - 1])
            i = end
        elif word[i] == "`":
            end = word.find("`", i + 1)
            if end < 0:
                raise Unreadable("the command cannot be read (a backtick is not closed)")
            found.append(word[i + 1 : end])
            i = end + 1
        else:
            i += 1
    return found


# ---------------------------------------------------------------------------------- words


def tokens(script: str) -> list[Token]:
    """*script* as words and operators, the way a POSIX shell splits it (quotes removed)."""
    out: list[Token] = []
    word: list[str] = []
    in_word = False
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        substitution = script.startswith(("<(", ">("), i) and not in_word
        if c in _BLANKS or (c in "();<>|&\n" and not substitution):
            if in_word:
                out.append(Token("".join(word), False))
                word, in_word = [], False
            if c in _BLANKS:
                i += 1
            else:
                op = next(o for o in OPERATORS if script.startswith(o, i))
                out.append(Token(op, True))
                i += len(op)
        elif c == "#" and not in_word:
            end = script.find("\n", i)
            i = n if end < 0 else end  # a comment, up to the newline
        elif script.startswith("\\\n", i):
            i += 2  # a continued line
        else:
            text, i = _piece(script, i)
            word.append(text)
            in_word = True
    if in_word:
        out.append(Token("".join(word), False))
    return out


def _piece(script: str, i: int) -> tuple[str, int]:
    """The next piece of a word at *i* (a quoted string without its quotes, an escaped
    character, a whole substitution, or one plain character) and where it ends."""
    c = script[i]
    if c == "\\":
        return script[i + 1 : i + 2], i + 2
    if c == "'":
        end = script.find("'", i + 1)
        if end < 0:
            raise Unreadable("the command cannot be read (a ' is not closed)")
        return script[i + 1 : end], end + 1
    if c == '"':
        return _double_quoted(script, i + 1)
    if c == "`":
        end = script.find("`", i + 1)
        if end < 0:
            raise Unreadable("the command cannot be read (a backtick is not closed)")
        return script[i : end + 1], end + 1
    if c in "$<>":
        return _dollar(script, i)
    return c, i + 1


def _dollar(script: str, i: int) -> tuple[str, int]:
    """The piece of a word at a ``$`` (or a ``<(...)``, ``>(...)``) at *i*, and where it ends:
    ``$'...'`` decoded, ``$"..."`` as ``"..."`` (its translation needs a message catalog),
    ``$$`` (the shell's process id: ``$$'x'`` is no ``$'x'``), a whole substitution, or the
    character itself."""
    if script.startswith("$'", i):
        return _ansi_c(script, i + 2)
    if script.startswith('$"', i):
        return _double_quoted(script, i + 2)
    if script.startswith("$$", i):
        return "$$", i + 2
    if script.startswith(("$(", "<(", ">("), i):
        end = _closing(script, i + 2)
        return script[i:end], end
    return script[i], i + 1


def _double_quoted(script: str, i: int) -> tuple[str, int]:
    """The text of a double-quoted string starting after its quote, and where it ends."""
    text: list[str] = []
    while i < len(script):
        c = script[i]
        if c == '"':
            return "".join(text), i + 1
        if c == "\\" and script[i + 1 : i + 2] in ('"', "\\", "$", "`", "\n"):
            text.append(script[i + 1] if script[i + 1] != "\n" else "")
            i += 2
        elif script.startswith("$(", i):
            end = _closing(script, i + 2)
            text.append(script[i:end])
            i = end
        elif c == "`":
            end = script.find("`", i + 1)
            if end < 0:
                break
            text.append(script[i : end + 1])
            i = end + 1
        else:
            text.append(c)
            i += 1
    raise Unreadable('the command cannot be read (a " is not closed)')


def _ansi_c(script: str, i: int) -> tuple[str, int]:
    """The text of a ``$'...'`` string starting after its ``$'``, decoded as bash does, and
    where it ends.

    Its escapes spell any character (``$'\\x2egit'`` is ``.git``), so a word read without
    decoding them names another path than the one the shell writes. Bash finds the closing
    quote first (``\\'`` does not close), then decodes: ``\\a \\b \\e \\E \\f \\n \\r \\t \\v
    \\\\ \\' \\" \\?``, ``\\nnn`` (octal, one to three digits), ``\\xHH`` and ``\\x{H...}``,
    ``\\uHHHH`` and ``\\UHHHHHHHH`` (as UTF-8), ``\\cX`` (control-X); an unknown escape stays as
    written, and a NUL byte ends the string's text. Bytes that are not UTF-8 are kept as
    surrogate escapes (as :func:`os.fsdecode` keeps them)."""
    end = i
    while end < len(script) and script[end] != "'":
        end += 2 if script[end] == "\\" else 1
    if end >= len(script):
        raise Unreadable("the command cannot be read (a $' is not closed)")
    text = script[i:end]
    out = bytearray()
    j = 0
    while j < len(text):
        if text[j] == "\\" and j + 1 < len(text):
            chunk, j = _ansi_c_escape(text, j + 1)
        else:
            chunk, j = text[j].encode("utf-8", "surrogateescape"), j + 1
        out += chunk
    return bytes(out.partition(b"\0")[0]).decode("utf-8", "surrogateescape"), end + 1


def _ansi_c_escape(text: str, j: int) -> tuple[bytes, int]:
    """The bytes of the escape in *text* whose backslash is just before *j*, and where the
    escape ends (see :func:`_ansi_c`)."""
    e, j = text[j], j + 1
    if e in _ANSI_C_ESCAPES:
        return bytes([_ANSI_C_ESCAPES[e]]), j
    if e in _OCTAL:
        digits = _run(text, j - 1, _OCTAL, 3)
        return bytes([int(digits, 8) & 0xFF]), j - 1 + len(digits)
    if e in "xuU":
        braced = e == "x" and text[j : j + 1] == "{"  # \\x{HH...}: its last two digits
        start = j + braced
        digits = _run(text, start, _HEX, len(text) if braced else {"x": 2, "u": 4, "U": 8}[e])
        end = start + len(digits)
        end += braced and text[end : end + 1] == "}"
        if digits or braced:
            value = int(digits or "0", 16)
            if e == "x":
                return bytes([value & 0xFF]), end
            if value > 0x10FFFF:
                raise Unreadable(f"the command cannot be read (\\{e}{digits} is no character)")
            return chr(value).encode("utf-8", "surrogatepass"), end
    if e == "c" and j < len(text):
        raw = text[j].encode("utf-8", "surrogateescape")
        control = 0x7F if raw == b"?" else raw[0] & 0x1F
        return bytes([control]) + raw[1:], j + 1 + (raw == b"\\" and text[j + 1 : j + 2] == "\\")
    return ("\\" + e).encode("utf-8", "surrogateescape"), j


_ANSI_C_ESCAPES = {
    "a": 7, "b": 8, "e": 27, "E": 27, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11,
    "\\": 92, "'": 39, '"': 34, "?": 63,
}  # fmt: skip
_OCTAL = "01234567"
_HEX = "0123456789abcdefABCDEF"


def _run(text: str, i: int, alphabet: str, most: int) -> str:
    """The characters of *alphabet* at *i* in *text*, at most *most* of them."""
    end = i
    while end < len(text) and end - i < most and text[end] in alphabet:
        end += 1
    return text[i:end]


def _closing(script: str, i: int) -> int:
    """Where the ``(`` opened just before *i* is closed (the index after its ``)``), skipping
    quoted text; the end of *script* when it never is."""
    depth = 1
    while i < len(script):
        c = script[i]
        if c == "\\" or script.startswith("$$", i):
            i += 2
            continue
        if script.startswith("$'", i):
            try:
                _, i = _ansi_c(script, i + 2)
            except Unreadable:
                return len(script)
            continue
        if c == "'":
            end = script.find("'", i + 1)
            i = len(script) if end < 0 else end + 1
            continue
        if c == '"':
            try:
                _, i = _double_quoted(script, i + 1)
            except Unreadable:
                return len(script)
            continue
        depth += {"(": 1, ")": -1}.get(c, 0)
        i += 1
        if depth == 0:
            return i
    return len(script)


_UNKNOWN = Simple((), (), ())  # a command the guard cannot tell (`{ ...; } | git apply`)


def _simple_commands(tokens: list[Token]) -> Iterator[Simple]:
    assignments: list[tuple[str, str]] = []
    words: list[str] = []
    writes: list[str] = []
    reads: list[tuple[str, str]] = []
    piped: Simple | None = None
    end = Token(";", True)
    i = 0
    while i <= len(tokens):
        tok = tokens[i] if i < len(tokens) else end
        following = tokens[i + 1] if i + 1 < len(tokens) else Token("", False)
        if (
            not tok.operator
            and tok.text.isdigit()
            and following.operator
            and following.text in _FD_REDIRECTS
        ):
            i += 1  # a file descriptor: 2>&1, 2>err.txt
            continue
        if tok.operator and (tok.text in WRITE_REDIRECTS or tok.text == ">&"):
            target = following.text
            if not (tok.text == ">&" and (target.isdigit() or target == "-")):
                writes.append(target)
            if tok.text == "<>":
                reads.append(("<", target))
            i += 2
        elif tok.operator and tok.text in READ_REDIRECTS:
            reads.append((tok.text, following.text))
            i += 2
        elif tok.operator:
            simple = None
            if words or assignments or writes or reads:
                simple = Simple(
                    tuple(assignments), tuple(words), tuple(writes), False, tuple(reads), piped
                )
                yield simple
            assignments, words, writes, reads = [], [], [], []
            piped = _piped(tok.text, simple, piped)
            i += 1
        else:
            match = _ASSIGNMENT.match(tok.text)
            if not words and match:
                assignments.append((match.group(1), match.group(2)))
            elif words or tok.text not in KEYWORDS:
                words.append(tok.text)
            i += 1


def _piped(operator: str, ended: Simple | None, piped: Simple | None) -> Simple | None:
    """What the command after *operator* reads through a pipe: the command *ended* there
    (:data:`_UNKNOWN` when none did, ``(cat p.diff) | git apply``; one pipe back only, ``a |
    cat | git apply`` is unseen), or, after a ``(`` opened right after a pipe, that pipe
    (``cat p.diff | (git apply)``)."""
    if operator in ("|", "|&"):
        if ended is None:
            return _UNKNOWN
        return ended._replace(piped=_UNKNOWN) if ended.piped else ended
    return piped if operator == "(" and ended is None else None


# ----------------------------------------------------------------------- commands in commands

# wrapper -> (options that take a value, how many leading non-option words it takes itself)
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "env": (frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}), 0),
    "sudo": (frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-R", "-T", "-U", "-r", "-t"}), 0),
    "doas": (frozenset({"-u", "-C"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "ionice": (frozenset({"-c", "-n", "-p", "-P", "-u"}), 0),
    "nohup": (frozenset(), 0),
    "command": (frozenset(), 0),
    "builtin": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "time": (frozenset({"-f", "--format", "-o", "--output"}), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "stdbuf": (frozenset({"-i", "-o", "-e"}), 0),
    "xargs": (
        frozenset({"-I", "-L", "-n", "-P", "-d", "-E", "-s", "-a", "--arg-file", "--delimiter"}),
        0,
    ),
    "watch": (frozenset({"-n", "--interval", "-d"}), 0),
    "flock": (frozenset({"-w", "--timeout", "-E", "-c"}), 1),
    "chroot": (frozenset(), 1),
    "setsid": (frozenset(), 0),
    "unbuffer": (frozenset(), 0),
    "busybox": (frozenset(), 0),
}
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


def _unwrapped(simple: Simple, depth: int) -> Iterator[Simple]:
    """*simple*, and what it runs when it is a wrapper, ``find -exec``, a shell with ``-c``,
    ``eval`` or ``alias``."""
    yield simple
    name, args = simple.name, list(simple.words[1:])
    if name in _WRAPPERS or name == "find":
        for inner in wrapped(simple):
            yield from _unwrapped(inner, depth)
    elif name == "git":
        for each in _git_scripts(simple):
            yield from commands(each, depth + 1)
        bisect = _git_bisect_run(args)
        if bisect:
            yield from _unwrapped(simple._replace(assignments=(), words=bisect), depth)
    elif name in SHELLS:
        script = _dash_c(args)
        for each in [script] if script is not None else _stdin_script(simple):
            yield from commands(each, depth + 1)
    elif name == "eval":
        yield from commands(" ".join(args), depth + 1)
    elif name == "alias":
        for arg in args:
            _, eq, value = arg.partition("=")
            if eq:
                yield from commands(value, depth + 1)


_GIT_GLOBAL_WITH_VALUE = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix",
     "--attr-source", "--list-cmds"}
)  # fmt: skip
_GIT_SHELL_KEYS = re.compile(
    r"core\.(?:editor|pager|sshcommand)|sequence\.editor|pager\..*|diff\.external"
    r"|interactive\.difffilter|(?:diff|difftool|mergetool)\..*\.(?:command|cmd)"
    r"|merge\..*\.driver",
    re.I,
)
"""The configuration keys whose value git runs as a shell command."""
_GIT_SHELL_VARIABLES = frozenset(
    {"GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER", "PAGER", "EDITOR", "VISUAL",
     "GIT_EXTERNAL_DIFF", "GIT_SSH_COMMAND"}
)  # fmt: skip


def _git_split(args: list[str]) -> tuple[list[str], str | None, list[str]]:
    """(the global options, the subcommand, its arguments) of ``git ARGS``."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in _GIT_GLOBAL_WITH_VALUE else 1
    return args[:i], (args[i] if i < len(args) else None), args[i + 1 :]


def _git_scripts(simple: Simple) -> list[str]:
    """The shell commands ``git`` runs for *simple* besides itself: the value of a ``-c`` key
    (or a variable) git runs as a command (``core.editor``, ``core.pager``, ``GIT_EDITOR``,
    ``GIT_EXTERNAL_DIFF``, ...), ``rebase --exec CMD`` (``-x CMD``, ``-xCMD``), ``submodule
    foreach CMD``."""
    options, sub, rest = _git_split(list(simple.words[1:]))
    found = [v for n, v in simple.assignments if n in _GIT_SHELL_VARIABLES]
    for i, opt in enumerate(options):
        value = options[i + 1] if opt == "-c" and i + 1 < len(options) else ""
        key, eq, script = value.partition("=")
        if eq and _GIT_SHELL_KEYS.fullmatch(key):
            found.append(script)
    if sub == "rebase":
        for i, arg in enumerate(rest):
            if arg in ("-x", "--exec") and i + 1 < len(rest):
                found.append(rest[i + 1])
            elif arg.startswith("--exec="):
                found.append(arg.partition("=")[2])
            elif arg.startswith("-x") and len(arg) > 2:
                found.append(arg[2:])
    if sub == "submodule":
        words = [a for a in rest if not a.startswith("-")]
        if words[:1] == ["foreach"] and len(words) > 1:
            found.append(" ".join(words[1:]))
    return found


def _git_bisect_run(args: list[str]) -> tuple[str, ...]:
    """The command ``git bisect run CMD ARGS...`` runs."""
    _, sub, rest = _git_split(args)
    if sub == "bisect" and rest[:1] == ["run"] and len(rest) > 1:
        return tuple(rest[1:])
    return ()


def wrapped(simple: Simple) -> list[Simple]:
    """The commands a wrapper runs (with the variables ``env`` sets), or ``find``'s ``-exec``
    commands; none for other commands. Options are read as getopt reads them: bundled
    (``exec -cla NAME``, ``env -iS...``), with the value attached (``env -S'git commit -n'``,
    ``--split-string=...``, abbreviated ``--split=``); ``flock FILE -c COMMAND`` runs
    COMMAND in a shell, ``busybox APPLET`` runs the applet."""
    name, args = simple.name, list(simple.words[1:])
    if name == "find":
        return _find_exec(simple)
    if name not in _WRAPPERS:
        return []
    takes, positional = _WRAPPERS[name]
    assignments = list(simple.assignments)
    while args and (args[0].startswith("-") or (name == "env" and "=" in args[0])):
        opt = args.pop(0)
        if opt == "--":
            break
        if "=" in opt and not opt.startswith("-"):
            key, _, value = opt.partition("=")
            assignments.append((key, value))
            continue
        _wrapper_option(opt, args, takes)
    if name == "flock" and len(args) > 2 and args[1] in ("-c", "--command"):
        return [simple._replace(assignments=tuple(assignments), words=("sh", "-c", args[2]))]
    args = args[positional:]
    if not args:
        return []
    return [simple._replace(assignments=tuple(assignments), words=tuple(args))]


def _wrapper_option(opt: str, args: list[str], takes: frozenset[str]) -> None:
    """Take the value of the wrapper's option *opt* off *args* when it has one there (not
    attached, ``--opt=value``, ``-Xvalue``); ``env -S``'s value is split into words put back
    in front of *args*, read as env's own (options and assignments too)."""
    value: str | None = None
    if opt.startswith("--"):
        long, eq, attached = opt.partition("=")
        option = next((t for t in takes if t.startswith("--") and t.startswith(long)), None)
        if len(long) <= 2 or option is None:
            return
        value = attached if eq else (args.pop(0) if args else "")
        split = option == "--split-string"
    else:
        letter = next((c for c in opt[1:] if f"-{c}" in takes), None)
        if letter is None:
            return
        value = opt[opt.index(letter, 1) + 1 :] or (args.pop(0) if args else "")
        split = letter == "S" and "--split-string" in takes
    if split:
        args[:0] = _split(value)


def _find_exec(simple: Simple) -> list[Simple]:
    """The commands of ``find``'s ``-exec``/``-execdir``/``-ok``/``-okdir``."""
    found: list[list[str]] = []
    current: list[str] | None = None
    for arg in simple.words[1:]:
        if current is None and arg in _FIND_EXEC:
            current = []
        elif current is not None and arg in (";", "+"):
            found.append(current)
            current = None
        elif current is not None:
            current.append(arg)
    found += [current] if current else []
    return [simple._replace(words=tuple(w), writes=()) for w in found if w]


_SHELL_WITH_VALUE = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


def _shell_options(args: list[str]) -> tuple[str, list[str]]:
    """(the option letters, the operands) of a shell's arguments, read as the shell reads
    them: bundled (``-ec``, ``-eoc pipefail``), with their values (``-o errexit``, ``-O
    extglob``, ``--rcfile FILE``), ended by ``--`` or the first operand."""
    letters, i = "", 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg in ("--", "-"):
            break
        if arg in _SHELL_WITH_VALUE:
            i += 1
        elif arg.startswith("--"):
            continue
        elif arg[:1] in "-+" and len(arg) > 1:
            letters += arg[1:] if arg[0] == "-" else ""
            i += sum(letter in "oO" for letter in arg[1:])
        else:
            i -= 1
            break
    return letters, args[i:]


def _dash_c(args: list[str]) -> str | None:
    """The script of ``sh -c SCRIPT``: the first operand after the options
    (:func:`_shell_options`: ``-ec``, ``-o errexit -c``, ``-c -- SCRIPT``)."""
    letters, operands = _shell_options(args)
    if "c" not in letters:
        return None  # a script file, or its standard input: see _stdin_script
    return operands[0] if operands else ""


def _stdin_script(simple: Simple) -> list[str]:
    """What a shell without ``-c`` reads as its script from a here-string (``bash <<<
    'git commit -n'``, ``sh -s <<< ...``, ``bash /dev/stdin <<< ...``); a here-document's
    body is read as commands already, a script file run by name is not read."""
    letters, operands = _shell_options(list(simple.words[1:]))
    if operands and "s" not in letters and operands[0] not in _STDIN:
        return []
    return [word for operator, word in simple.reads if operator == "<<<"]


_STDIN = ("/dev/stdin", "/proc/self/fd/0", "/dev/fd/0")


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        raise Unreadable(f"the command cannot be read (env -S {text!r})") from None
