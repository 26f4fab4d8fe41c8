"""Reading a shell command the way the guard needs to: the simple commands it runs.

Not a shell: a conservative reader of what an agent's ``Bash`` tool call will run. It splits
the command into simple commands at ``;``, ``&&``, ``||``, ``|``, ``&``, newlines and
parentheses; takes each command's leading ``NAME=value`` assignments and its write-redirection
targets (``>``, ``>>``, ``&>``, ...); unwraps the commands that run another command (``env``,
``sudo``, ``nice``, ``timeout``, ``xargs``, ``command``, ``exec``, ...); and reads the scripts
given to ``sh -c``/``bash -c``, ``eval``, ``alias`` and command substitutions (``$(...)``,
backticks) as commands too. Here-document bodies are data, not commands, and are dropped.

What it cannot see (a script file it runs, a variable set elsewhere, an alias defined in a
previous call) it does not guess at: the rules in :mod:`gitaudit.agent.bypass` refuse what they
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
KEYWORDS = frozenset(
    {"!", "{", "}", "then", "do", "else", "elif", "if", "while", "until", "time", "coproc", "fi"}
)
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "busybox"})
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\+?=(.*)$", re.S)
_HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z0-9_.\-]+)\2")


class Unreadable(Exception):
    """The command cannot be read (unbalanced quotes, nesting too deep)."""


class Simple(NamedTuple):
    """One simple command: its ``NAME=value`` prefixes, its words, its write targets."""

    assignments: tuple[tuple[str, str], ...]
    words: tuple[str, ...]
    writes: tuple[str, ...]
    heredoc: bool = False  # read from a here-document body: maybe a command, maybe data

    @property
    def name(self) -> str:
        """The command's name without its folder (``/usr/bin/git`` is ``git``)."""
        return os.path.basename(self.words[0]) if self.words else ""


def commands(script: str, depth: int = 0) -> Iterator[Simple]:
    """Every simple command *script* runs, nested ones included (see the module docstring).

    Here-document bodies are read as commands too, line by line where they do not read as a
    whole (``bash <<EOF`` runs its body; and a ``<<`` that was not a here-document must not
    hide the lines after it); command substitutions are found anywhere in the text, quoted or
    not (reading a literal ``$(...)`` as a command is safe, missing a real one is not)."""
    if depth > MAX_DEPTH:
        raise Unreadable("the command nests shells, eval or $(...) too deeply to read")
    text, bodies = split_heredocs(script)
    for inner in substitutions(text):
        yield from commands(inner, depth + 1)
    for body in bodies:
        for simple in _lenient(body, depth + 1):
            yield simple._replace(heredoc=True)
    for simple in _simple_commands(_tokens(text)):
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
    """The scripts of the command substitutions in *word*: ``$(...)`` (balanced), ``<(...)``,
    ``>(...)`` and backticks."""
    found = []
    i = 0
    while True:
        found_at = [p for p in (word.find(m, i) for m in ("$(", "<(", ">(")) if p >= 0]
        if not found_at:
            break
        start = min(found_at)
        depth, j = 1, start + 2
        while j < len(word) and depth:
            depth += {"(": 1, ")": -1}.get(word[j], 0)
            j += 1
        found.append(word[start + 2 : j - 1 if depth == 0 else j])
        i = j
    parts = word.split("`")
    found += parts[1:-1:2] if len(parts) > 2 else []
    return found


def _tokens(script: str) -> list[str]:
    lexer = shlex.shlex(script, posix=True, punctuation_chars="();<>|&\n")
    lexer.whitespace = " \t\r"
    lexer.commenters = ""  # a '#' is kept: reading too much is safe, too little is not
    lexer.whitespace_split = True  # words split at blanks and operators only
    try:
        raw = list(lexer)
    except ValueError as exc:
        raise Unreadable(f"the command cannot be read ({exc})") from None
    tokens: list[str] = []
    for token in raw:
        if token and set(token) <= set("();<>|&\n"):
            tokens += _operators(token)
        else:
            tokens.append(token)
    return tokens


def _operators(run: str) -> list[str]:
    """A run of operator characters as the operators it is made of, longest first."""
    out = []
    while run:
        op = next((o for o in OPERATORS if run.startswith(o)), run[0])
        out.append(op)
        run = run[len(op) :]
    return out


def _simple_commands(tokens: list[str]) -> Iterator[Simple]:
    assignments: list[tuple[str, str]] = []
    words: list[str] = []
    writes: list[str] = []
    i = 0
    while i <= len(tokens):
        tok = tokens[i] if i < len(tokens) else ";"
        following = tokens[i + 1] if i + 1 < len(tokens) else ""
        if tok.isdigit() and (
            following in WRITE_REDIRECTS or following in READ_REDIRECTS or following == ">&"
        ):
            i += 1  # a file descriptor: 2>&1, 2>err.txt
            continue
        if tok in WRITE_REDIRECTS or tok == ">&":
            target = following
            if not (tok == ">&" and (target.isdigit() or target == "-")):
                writes.append(target)
            i += 2
            continue
        if tok in READ_REDIRECTS:
            i += 2
            continue
        if tok in OPERATORS:
            if words or assignments or writes:
                yield Simple(tuple(assignments), tuple(words), tuple(writes))
            assignments, words, writes = [], [], []
            i += 1
            continue
        match = _ASSIGNMENT.match(tok)
        if not words and match:
            assignments.append((match.group(1), match.group(2)))
        elif words or tok not in KEYWORDS:
            words.append(tok)
        i += 1


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
}


def _unwrapped(simple: Simple, depth: int) -> Iterator[Simple]:
    """*simple*, and what it runs when it is a wrapper, a shell with ``-c``, ``eval`` or
    ``alias``."""
    yield simple
    name, args = simple.name, list(simple.words[1:])
    if name in _WRAPPERS:
        inner = _wrapped(simple, name, args)
        if inner is not None:
            yield from _unwrapped(inner, depth)
    elif name in SHELLS:
        script = _dash_c(args)
        if script is not None:
            yield from commands(script, depth + 1)
    elif name == "eval":
        yield from commands(" ".join(args), depth + 1)
    elif name == "alias":
        for arg in args:
            _, eq, value = arg.partition("=")
            if eq:
                yield from commands(value, depth + 1)


def _wrapped(simple: Simple, name: str, args: list[str]) -> Simple | None:
    """The command the wrapper *name* runs (with the variables ``env`` sets), if any."""
    takes, positional = _WRAPPERS[name]
    assignments = list(simple.assignments)
    while args and (args[0].startswith("-") or (name == "env" and "=" in args[0])):
        opt = args.pop(0)
        if opt == "--":
            break
        if name == "env" and opt in ("-S", "--split-string") and args:
            args = _split(args.pop(0)) + args
        elif "=" in opt and not opt.startswith("-"):
            key, _, value = opt.partition("=")
            assignments.append((key, value))
        elif opt in takes and args:
            args.pop(0)
    args = args[positional:]
    if not args:
        return None
    return Simple(tuple(assignments), tuple(args), simple.writes, simple.heredoc)


def _dash_c(args: list[str]) -> str | None:
    """The script of ``sh -c SCRIPT`` (options may be bundled: ``-ec``, ``-lc``)."""
    for i, arg in enumerate(args):
        if arg == "--":
            return None
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]:
            return args[i + 1] if i + 1 < len(args) else ""
        if not arg.startswith("-"):
            return None  # a script file: not readable here
    return None


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        raise Unreadable(f"the command cannot be read (env -S {text!r})") from None
