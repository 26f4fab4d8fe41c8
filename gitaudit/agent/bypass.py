"""Which shell commands get past the gate, and why: the guard's rules for ``Bash`` tool calls.

Each rule answers a simple command (:mod:`gitaudit.agent.shell`) with the reason it is refused,
worded so the agent can act on it, or None. The kinds refused:

* skipping the client hooks: ``--no-verify`` on ``git commit`` (and its ``-n``), ``push``,
  ``merge``, ``pull``, ``am``, ``rebase`` (each read with its own options), or an option the
  guard cannot see there (``$FLAGS``); commits and pushes made without them (``commit-tree``,
  ``hash-object -t commit``, ``send-pack``, ``http-push``);
* moving the ledger by hand: ``git update-ref`` (``symbolic-ref``, ``reflog``) on
  ``refs/audit/*``, ``update-ref --stdin``; force-pushing, deleting, pruning or mirroring
  ``refs/audit/*``, force-fetching or pruning into it, by any refspec git may resolve there
  (``audit/plans``, ``refs/*``); ``remote.*.push/fetch/mirror`` and ``remote add --mirror``;
* configuration that switches hooks off or changes gitaudit: ``git config`` writes of
  ``audit.*``, ``core.hooksPath``, ``include.path``/``includeIf.*``, ``alias.*``,
  ``core.worktree`` and ``init.templateDir`` (``--edit`` too; its options read as git reads
  them: ``--fil FILE``, ``--glob``, ``-fFILE``); the same keys in ``git -c``/``--config-env``;
  ``GIT_CONFIG*`` variables (``GIT_CONFIG_COUNT``/``KEY_n``/``VALUE_n``,
  ``GIT_CONFIG_PARAMETERS``, ``GIT_CONFIG_GLOBAL``, ...),
  ``GITAUDIT_HOME``, ``HOME``/``XDG_CONFIG_HOME`` for git (another global config) or
  gitaudit (another home), and
  ``PYTHONPATH``/``PYTHONHOME`` for git or ``git-audit`` (the hooks would import another
  gitaudit; ``PYTHONPYCACHEPREFIX``, ``PYTHONUSERBASE``, ``PYTHONINSPECT`` too), ``LD_PRELOAD``
  and the loader's other variables, ``GITAUDIT_CACHE``/``XDG_CACHE_HOME`` for them (for
  ``python3 -m gitaudit`` too, and exported or assigned alone in a command that runs git);
  ``set -a`` in a command that runs git, ``read``/``mapfile``/``printf -v`` into ``GIT_*``;
  any ``git config --global``/``--system`` write (the user's configuration is trusted like
  gitaudit's home);
* removing the hooks: ``git audit hooks uninstall``, ``git audit agent uninstall``;
* the sealer's decisions, taken with the user's key: ``git audit plan seal --allow-weaken``
  (or ``--amend``), ``plan retire``, ``plan reset-attempts``, ``request seal``, ``trust add/
  remove/init/anchor/policy``, ``reconcile --observed`` (a plain ``plan seal``, which only
  strengthens, passes);
* writing a guarded path (``.git/``, ``.gitaudit/``, the agent settings, gitaudit's home, the
  git configuration, gitaudit's installation, a ``git`` on PATH, the shell's startup files,
  the files the checks run, a folder holding one) with a redirection or a
  command that writes its arguments (``rm``, ``mv``, ``cp``/``ln``/``install`` destinations,
  ``tee``, ``sed -i``, ``chmod``, ``dd of=``, ``git rm/mv/checkout/restore``, ...); a link to
  one (``ln``, ``cp -s``); a name built from an option, each option read as its program reads
  it (:func:`_getopt`): a backup (``cp -S``, ``sed -i'bak/*'``, ``rsync --backup-dir``), the
  folder an archive is extracted into (``tar -C``, ``unzip -d``), a ``git --work-tree``; what
  a git subcommand writes where its words say (:func:`_git_outputs`, :func:`_git_creates`):
  ``--output`` (``git diff``/``log``/``show``/``format-patch``), ``format-patch -o``,
  ``archive -o``, ``bundle create FILE``, ``worktree add PATH``, ``init [DIR]`` (``.``: a
  re-initialization copies a template's hooks; ``GIT_TEMPLATE_DIR`` and ``GIT_DIR`` for it are
  refused), ``clone URL [DIR]``, ``submodule add URL [PATH]``; the paths git's pathspecs may
  reach (:func:`_pathspec`: ``:/``, ``:(top)``, ``icase``, exclusions, wildcards;
  ``--pathspec-from-file`` and ``--icase-pathspecs`` refused) and the index entries ``git
  update-index`` sets (``--chmod``, ``--cacheinfo``) or ``checkout-index -a`` writes out; a
  path the guard cannot see: made by a command substitution, or relative after a ``cd`` to
  one (or to a variable set elsewhere);
* a patch in the command (a here-document or a here-string for ``git apply`` or ``patch``,
  Codex's ``apply_patch`` envelope) or in a patch file it applies, read from disk (``git
  apply FILE``, ``git am FILE``, ``patch -i FILE``, ``< FILE``, ``cat FILE |``:
  :func:`_patch_files`; one the guard cannot read, or a patch piped from another program, is
  refused) that writes a guarded path (:mod:`gitaudit.agent.patches`), its
  names judged under the folder it is applied in (``--directory``, ``patch -d``) and as bash
  hands them over (an unquoted here-document expanded; a name still holding ``$`` there is
  refused); what ``patch`` writes besides (``patch FILE``, ``-o``, ``-r``, the backups its
  ``-B``/``-Y``/``-z`` name);
* ``xargs git ...`` for those subcommands and ``xargs patch`` (the arguments come from input
  the guard cannot see);
* a command the guard cannot read, and any other program whose arguments name the git
  directory's internals (``.git/hooks``, ``.git/config``, ``refs/audit``, ...), since the guard
  cannot tell whether it writes there.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from typing import NamedTuple

from gitaudit.agent.patches import Reader, mail_texts
from gitaudit.agent.shell import Simple, Unreadable, commands, split_heredocs, wrapped

WriteCheck = Callable[[str], "str | None"]
"""Why writing the path a word names is refused (None: it is not)."""

PathCheck = Callable[[str, str, Mapping[str, str]], "str | None"]
"""Why writing the path a shell word names, from a directory, is refused (None: it is not),
given the variables the command has set by then (a ``$NAME`` in the word may be one of them,
or quoted and literal)."""

AFTER = "; `git audit status` says what the gate wants instead."


def refusal(command: str, guarded: PathCheck, cwd: str) -> str | None:
    """Why the shell *command*, run in *cwd*, is refused, or None when the guard lets it run.

    Paths are checked from every directory the command may be in when it writes: *cwd*, and
    each one a ``cd``/``pushd`` before it moves to (subshells are not tracked, so all of them
    count: refusing too much is safe, too little is not)."""
    try:
        simples = list(commands(command))
    except Unreadable as exc:
        return (
            f"gitaudit's guard cannot read this command ({exc}), so it is refused: write it "
            "in plain form (balanced quotes, no deeply nested shells)."
        )
    try:
        return _refused(command, simples, guarded, cwd)
    except Unreadable as exc:
        return f"gitaudit's guard cannot check this command, so it is refused: {exc}."


def _refused(
    command: str,
    simples: list[Simple],
    guarded: PathCheck,
    cwd: str,
) -> str | None:
    bases = [cwd]
    variables: dict[str, str] = {}
    values: dict[str, set[str]] = {}  # every value each variable is given in the command
    runs_git = any(runs_gitaudit(s) for s in simples)
    reader = Reader()
    files: list[str] = []  # the text of each patch file the command applies

    unvalued = _unvalued(command, simples)

    def check(word: str) -> str | None:
        why = _unseen_word(word, unvalued)
        if why:
            return why
        head, top, rest = word.partition(_TOP)
        for base in bases:
            if base == _UNSEEN:
                why = _unseen_base(word)
            elif top:  # from the work tree's top: one of the folders above
                above = _above(os.path.normpath(os.path.join(base, head)))
                why = next((w for f in above if (w := guarded(rest, f, variables))), None)
            else:
                why = guarded(word, base, variables)
            if why:
                return why
        return None

    for found in simples:
        simple = _substituted(found, variables)
        why = (
            _split_unseen(found, simple, unvalued)
            or _environment(simple, runs_git)
            or _program(simple, check)
            or _redirects(simple, check)
        )
        if why or (simple != found and (why := _as_written(found, check))):
            return why
        files += _patch_files(simple, bases, simples, reader)
        if simple.name in ("cd", "pushd"):
            bases += [b for b in _moved(bases, simple.words[1:]) if b not in bases]
        if not simple.words:
            variables.update(simple.assignments)  # NAME=value on its own: a shell variable
            for name, value in simple.assignments:
                values.setdefault(name, set()).add(value)
    known = {name: next(iter(v)) for name, v in values.items() if len(v) == 1}
    return _patched(command, simples, known, check, files)


def _as_written(found: Simple, check: WriteCheck) -> str | None:
    """Why writing a path of *found* is refused with its variables as written: quotes are gone
    by now, and a quoted ``'$X/../tests/x.py'`` is literal, whatever the command set X to, so
    the write check sees each ``$X`` as written, to be kept or expanded one by one (only the
    rules' write refusals count here: an option in a variable is judged by its value)."""
    writes: list[str] = []

    def recorded(word: str) -> str | None:
        why = check(word)
        if why:
            writes.append(why)
        return why

    why = _program(found, recorded)
    return why if why and writes else _redirects(found, check)


def _patched(
    command: str,
    simples: list[Simple],
    known: dict[str, str],
    check: WriteCheck,
    files: Sequence[str] = (),
) -> str | None:
    """A patch in the command's text (a here-document for ``git apply`` or ``patch``, Codex's
    ``apply_patch`` envelope) or in the patch *files* it applies (:func:`_patch_files`) that
    writes a guarded path.

    Its names are judged where the applying command reads them (:func:`_patch_folders`), and
    as bash hands them over: an unquoted here-document (``<<EOF``) is expanded first, so its
    text is read again with the command's variables put in (:func:`_heredoc_expanded`), and a
    name that still holds ``$`` or a backtick there (``$(printf t)ests``, an unknown variable)
    is refused: the guard cannot see what it becomes."""
    from gitaudit.agent.patches import components, patch_paths

    folders = _patch_folders(simples)
    patched = [_patch_backups(s.words[1:]) for s in simples if s.name == "patch"]
    texts = [(command, False), ("\n".join(files), False)]  # one budget for all the files
    if any(not _QUOTES.search(m[1]) for m in _HEREDOC_START.finditer(command)):
        texts.insert(0, (_heredoc_expanded(command, known), True))
    if any((inputs := _patch_inputs(s)) and inputs.mail for s in simples):  # `git am <<EOF`
        texts += [(mail, False) for body in split_heredocs(command)[1] for mail in mail_texts(body)]
    seen: set[str] = set()
    for text, expanded in texts:
        for path in patch_paths(text):
            if path in seen:
                continue
            seen.add(path)
            if expanded and _hidden(path):
                return (
                    f"the patch in this command names `{path}` in a here-document whose "
                    "delimiter is not quoted, where bash expands `$` and backticks into a name "
                    "gitaudit's guard cannot see: quote the delimiter (<<'EOF') and write the "
                    "name out" + AFTER
                )
            for folder in folders:
                words = list(components(os.path.join(folder, path)) if folder else [path])
                for backups in patched:  # `patch -B PREFIX`: PREFIX and the name patch reads
                    words += [os.path.join(folder, b) for b in backups(path)]
                for word in words:
                    why = check(word)
                    if why:
                        return f"the patch in this command would write `{word}`: {why}"
    return None


_HEREDOC_START = re.compile(r"(?<!<)<<(?!<)-?[ \t]*([^\s;&|<>()]+)")
_QUOTES = re.compile(r"['\"\\]")  # a quoted delimiter keeps the body literal
_IN_HEREDOC = re.compile(
    r"\\\n|\\([$`\\])|\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))"
)


def _heredoc_expanded(text: str, known: dict[str, str]) -> str:
    """*text* read as bash reads an unquoted here-document: ``\\`` and a newline joins two
    lines, ``\\$`` is a ``$`` (kept: the guard refuses it in a name), and the variables the
    command sets (one value only) are put in; any other ``$`` and backticks stay."""

    def put(match: re.Match[str]) -> str:
        if match[0] == "\\\n":
            return ""
        if match[1] is not None:
            return match[1]
        return known.get(match[2] or match[3], match[0])

    expanded = _IN_HEREDOC.sub(put, text)
    if len(expanded) > 4 * len(text) + _LONGEST:
        raise Unreadable("its variables make its here-documents longer than the guard reads")
    return expanded


def _patch_folders(simples: Sequence[Simple]) -> list[str]:
    """The folders the command's patches are applied in, relative to where it runs (``""``:
    there). ``patch -d DIR`` (``--directory=DIR``) moves to DIR first; ``git apply
    --directory=DIR`` (and ``git am``'s) puts DIR before every name, which git reads from the
    work tree's root in a git diff (the name's leading components are judged stripped too, so
    from a subfolder ``sub/DIR/x`` is judged as ``DIR/x`` there); ``git -C`` moves too. (``git
    apply`` has no ``--root``; it refuses names with ``..`` and, from a subfolder, skips those
    outside it.)"""
    folders = {"": None}
    for simple in simples:
        args = list(simple.words[1:])
        if simple.name == "patch":
            folders.update(dict.fromkeys(_directories(args, _PATCH_WITH_VALUE)))
        elif simple.name == "git" and _git_subcommand(args) in ("apply", "am"):
            at = next(i for i, a in enumerate(args) if a in ("apply", "am"))
            moves = [b for a, b in pairwise(args[:at]) if a == "-C"]
            for folder in _directories(args[at + 1 :], ""):
                folders[os.path.join(*moves, folder)] = None
    return list(folders)


_PATCH_WITH_VALUE = "pFiorDdBYzVgx"  # GNU patch's short options that take a value


class _Inputs(NamedTuple):
    """Where a command that applies a patch reads it from."""

    files: list[str]  # the patch files its words name
    folders: list[str]  # where a relative name is looked up, from the command's folder
    stdin: bool  # whether it reads a patch from its standard input too
    mail: bool  # `git am`: the files are mailboxes


def _patch_inputs(simple: Simple) -> _Inputs | None:
    """Where ``git apply``/``git am``/``patch`` ARGS read their patch (None for any other
    command), their options read as each reads them (:func:`_getopt`): ``git apply`` and
    ``git am`` the files they are given (from ``git -C DIR``), standard input without one or
    with ``-``; GNU ``patch`` its ``-i FILE`` (``--input``, ``--in=FILE``) and its second
    operand (``patch [ORIGINAL [PATCHFILE]]``), from its ``-d DIR`` (it moves there first),
    standard input without them."""
    args = list(simple.words[1:])
    if simple.name == "patch":
        operands, values, _ = _getopt(args, _PATCH_SHORT, _PATCH_LONG)
        named = values.get("input", []) + operands[1:2]
        files = [f for f in named if f != "-"]
        return _Inputs(
            files, ["", *values.get("directory", [])], len(files) < len(named) or not named, False
        )
    sub = _git_subcommand(args) if simple.name == "git" else None
    if sub not in ("apply", "am"):
        return None
    at = next(i for i, a in enumerate(args) if a == sub)
    moves = [b for a, b in pairwise(args[:at]) if a == "-C"]
    short, long = _APPLY_OPTIONS
    operands, _, _ = _getopt(args[at + 1 :], short, long)
    files = [f for f in operands if f != "-"]
    stdin = len(files) < len(operands) or not operands
    return _Inputs(files, [os.path.join(*moves) if moves else ""], stdin, sub == "am")


_PATCH_SHORT = {c: "" for c in _PATCH_WITH_VALUE} | {"i": "input", "d": "directory"}
_PATCH_LONG = (
    "input", "directory", "output", "reject-file", "strip", "fuzz", "prefix", "basename-prefix",
    "suffix", "ifdef", "version-control", "get", "debug", "quoting-style", "reject-format",
    "read-only",
)  # fmt: skip
_APPLY_OPTIONS = (
    {"p": "", "C": ""},
    ("exclude", "include", "directory", "whitespace", "build-fake-ancestor", "quoted-cr",
     "patch-format", "resolvemsg", "empty"),
)  # fmt: skip
"""``git apply``'s and ``git am``'s options that take a value (``-p1``/``-p 1``, ``--dir=x``)."""


def _patch_files(
    simple: Simple, bases: Sequence[str], simples: Sequence[Simple], reader: Reader
) -> list[str]:
    """The text of each patch file *simple* applies (:func:`_patch_inputs`), read from each of
    *bases* (:class:`~gitaudit.agent.patches.Reader`), and of what its standard input
    reads (:func:`_stdin_texts`); mails decoded as ``git am`` decodes them."""
    inputs = _patch_inputs(simple)
    if inputs is None:
        return []
    texts = [t for f in inputs.files for t in reader.read(f, bases, inputs.folders)]
    if inputs.stdin:
        texts += _stdin_texts(simple, bases, simples, reader)
    return texts + [m for t in texts for m in mail_texts(t)] if inputs.mail else texts


def _stdin_texts(
    simple: Simple, bases: Sequence[str], simples: Sequence[Simple], reader: Reader
) -> list[str]:
    """What the patch *simple* reads on its standard input may be: its own redirections (a
    file, a here-string; a here-document is in the command's text already), else the command
    piped into it, else, since a group passes its input on (``cat p.diff | (cd x; git
    apply)``, ``{ git apply; } < p.diff``, ``done < p.diff``), any pipe or redirection of a
    group in the command. What the guard cannot read there is refused: the output of a program
    other than ``cat`` (``git show HEAD:p.diff | git apply``, ``curl``), a file descriptor."""
    what = f"`{' '.join(simple.words[:2])}`"
    if simple.reads:
        return _redirected(what, simple.reads, bases, reader)
    sources = [simple.piped] if simple.piped else [s.piped for s in simples if s.piped]
    texts = [
        t
        for s in simples
        if not simple.piped and s.name in ("", "done", "esac")
        for t in _redirected(what, s.reads, bases, reader)
    ]
    for source in sources:
        operands = _operands(source.words[1:])
        if source.name != "cat":
            program = f"`{source.name}`" if source.name else "a group of commands"
            raise Unreadable(
                f"the patch {what} reads comes from {program}'s output, which the guard "
                "cannot read: write the patch to a file and apply it by name (`git apply FILE`)"
            )
        texts += [t for f in operands if f != "-" for t in reader.read(f, bases)]
        if not operands or "-" in operands:
            if source.piped:
                raise Unreadable(f"the patch {what} reads comes through more than one pipe")
            texts += _redirected(what, source.reads, bases, reader)
    return texts


def _redirected(
    what: str, reads: Sequence[tuple[str, str]], bases: Sequence[str], reader: Reader
) -> list[str]:
    """The text of each of the input redirections *reads*: a file (``< p.diff``), a
    here-string (``<<< TEXT``)."""
    texts: list[str] = []
    for operator, word in reads:
        if operator == "<":
            texts += reader.read(word, bases)
        elif operator == "<<<":
            if _hidden(word):
                raise Unreadable(
                    f"the patch {what} reads from a here-string holds a `$` or a backtick, "
                    "which bash expands into text the guard cannot see: write it to a file"
                )
            texts.append(word)
        elif operator == "<&" and word not in ("0", "-"):
            raise Unreadable(f"the patch {what} reads comes from a file descriptor ({word})")
    return texts


def _directories(args: Sequence[str], with_value: str) -> list[str]:
    """The values of ``--directory`` (``--directory=DIR``, ``--directory DIR``, or any
    abbreviation getopt and git accept, ``--dir=DIR``) and, where *with_value* holds ``d``,
    ``-d DIR`` (``-dDIR``, ``-Ed DIR``): GNU patch's."""
    out = []
    for i, arg in enumerate(args):
        after = args[i + 1] if i + 1 < len(args) else ""
        if arg == "--":
            break
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            if len(name) > 0 and "directory".startswith(name):
                out.append(value if eq else after)
        elif arg.startswith("-") and "d" in with_value:
            for j, c in enumerate(arg[1:], 2):
                if c in with_value:
                    if c == "d":
                        out.append(arg[j:] or after)
                    break
    return out


_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _substituted(simple: Simple, variables: dict[str, str]) -> Simple:
    """*simple* with the shell variables set earlier in the same command put in."""
    if not variables:
        return simple

    def put(word: str) -> str:
        done = _VARIABLE.sub(lambda m: variables.get(m[1] or m[2], m[0]), word)
        if len(done) > len(word) + _LONGEST:  # A=$B$B$B, B=$C$C$C, ...: it doubles and doubles
            raise Unreadable("its variables make words longer than the guard reads")
        return done

    def reads(simple: Simple) -> tuple[tuple[str, str], ...]:
        return tuple((operator, put(word)) for operator, word in simple.reads)

    piped = simple.piped
    return simple._replace(
        words=tuple(map(put, simple.words)),
        writes=tuple(map(put, simple.writes)),
        reads=reads(simple),
        piped=piped._replace(words=tuple(map(put, piped.words)), reads=reads(piped))
        if piped
        else None,
        assignments=tuple((k, put(v)) for k, v in simple.assignments),
    )


_LONGEST = 1 << 16
"""How much longer the command's variables may make a word (or a here-document) than it is
written."""

_TOP = "\0top\0"
"""Put before a path a git command reads from the work tree's top (``git rm :/x``, ``git
checkout-index -a``), which the guard does not look up: the path is judged from the folder
the command runs in and from each folder above it, the top among them."""


def _above(folder: str) -> list[str]:
    """*folder* and each folder above it, up to ``/``."""
    found = [folder]
    while (up := os.path.dirname(found[-1])) != found[-1]:
        found.append(up)
    return found


_UNSEEN = "\0unseen"
"""A directory the guard cannot see: a ``cd`` to a command substitution or a variable set
elsewhere (``cd "$(git rev-parse --git-dir)"``); it may be inside any guarded place."""


def _moved(bases: list[str], args: Sequence[str]) -> list[str]:
    """Where ``cd ARGS`` may lead from each of *bases* (``cd`` and ``cd ~``: home;
    :data:`_UNSEEN` when the guard cannot see where)."""
    target = next((a for a in args if not a.startswith("-") or a == "-"), "~")
    if target == "-":
        return []  # the previous directory: one of the bases already
    target = os.path.expanduser(os.path.expandvars(target))
    if _hidden(target):
        return [_UNSEEN]
    if os.path.isabs(target):
        return [target]
    return [_UNSEEN if base == _UNSEEN else os.path.join(base, target) for base in bases][:16]


def _hidden(word: str) -> bool:
    """Whether *word* (variables already put in) holds what the guard cannot see: a command
    substitution or a variable it does not know."""
    return "$" in word or "`" in word


_SUBSTITUTION = re.compile(r"\$\(|`|[<>]\(")
_MKTEMP = re.compile(r"\$\(mktemp(?: [^()`$]*)?\)(?:/[^()`$]*)?")  # a new temporary path


_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_APPENDED_OR_ARRAY = re.compile(rf"({_NAME})(?:\[[^\]]*\])?(?:\+=|=\()")  # d+=t, m=(.git)
_ASSIGNED_IN_EXPANSION = re.compile(rf"\$\{{({_NAME}):?=")  # ${d:=.git}
_REFERENCED = re.compile(rf"\$(?:\{{[!#]?({_NAME}|[0-9@*#])|({_NAME})|([0-9@*#]))")
_POSITIONAL = frozenset({*"0123456789", "@", "*", "#"})


def _referenced(word: str) -> list[str]:
    """The variables *word* expands (``$d``, ``${d}``, ``${d%x}``, ``${!d}``, ``$1``)."""
    return [m[1] or m[2] or m[3] for m in _REFERENCED.finditer(word)]


def _unvalued(command: str, simples: Sequence[Simple]) -> set[str]:
    """The variables *command* sets in a way the guard does not take a value from, anywhere
    in it: appended to (``d+=t``: the guard's plain assignment would replace), an array
    (``m=(.git)``), through an expansion (``${d:=.git}``), by a builtin (``export``/``declare``/
    ``local``/``readonly``/``typeset NAME=...``, ``read``, ``mapfile``, ``printf -v``,
    ``getopts``), for a command alone (``d=.git bash -c
    '...$d...'``: the value reaches the nested script, not the guard's reading of it), and
    the positional parameters (``set -- .git``). A write target that expands one is made of a
    value the guard does not know (it would judge it as unset and as written). A loop's
    variable stays a known limit (docs/agent-hooks.md: ``for f in tests/*.py``)."""
    names = {m[1] for m in _APPENDED_OR_ARRAY.finditer(command)}
    names |= {m[1] for m in _ASSIGNED_IN_EXPANSION.finditer(command)}
    for simple in simples:
        if simple.words:
            names |= {name for name, _ in simple.assignments}
        args = [w for w in simple.words[1:] if w != "--"]
        operands = [w for w in args if not w.startswith(("-", "+"))]
        if simple.name in _EXPORTS - {"set"} or simple.name in _READS_NAMES:
            names |= {w.partition("=")[0] for w in operands}
        elif simple.name == "printf":
            names |= {b for a, b in pairwise(args) if a == "-v"}
            names |= {a[2:] for a in args if a.startswith("-v") and len(a) > 2}
        elif simple.name == "getopts" and len(args) >= 2:
            names.add(args[1])
        elif simple.name == "set" and operands:
            names |= _POSITIONAL
    return names


def _unseen_word(word: str, unvalued: set[str]) -> str | None:
    """Why the path *word* is refused before it is judged: a command substitution makes it,
    or it expands a variable the command sets in a way the guard takes no value from."""
    if _SUBSTITUTION.search(word) and not (_MKTEMP.fullmatch(word) and ".." not in word):
        return _unseen_path(word)
    name = next((n for n in _referenced(word) if n in unvalued), None)
    return None if name is None else _unvalued_path(word, name)


def _split_unseen(found: Simple, simple: Simple, unvalued: set[str]) -> str | None:
    """Why *found*, whose variables put in made *simple*, is refused when the command sets
    ``IFS`` in a way the guard does not value: where bash splits the values is not known."""
    if simple == found or "IFS" not in unvalued:
        return None
    return _unvalued_path(" ".join(found.words), "IFS")


def _unvalued_path(word: str, name: str) -> str:
    return (
        f"`{word}` expands `{name}`, which this command sets in a way gitaudit's guard does "
        "not take a value from (export, declare, read, printf -v, an array, `+=`, "
        "`set --`): it may name .git (the hooks), the plans or the files the checks run. Set "
        "it alone (`NAME=value;`) or write the path out" + AFTER
    )


def _unseen_path(word: str) -> str:
    return (
        f"`{word}` is made by a command substitution, which gitaudit's guard cannot see: it "
        "may name .git (the hooks), the plans or the files the checks run. Write the path "
        "out" + AFTER
    )


def _unseen_base(word: str) -> str | None:
    """Why writing the relative path *word* from a directory the guard cannot see is
    refused."""
    if os.path.isabs(os.path.expanduser(os.path.expandvars(word))):
        return None
    return (
        f"`{word}` is relative to a folder this command moved into with a command "
        'substitution or a variable (`cd "$(...)"`), which gitaudit\'s guard cannot see: '
        "it may be inside .git (the hooks), the plans or the files the checks run. `cd` to "
        "a folder written out, or write the path out in full" + AFTER
    )


# ------------------------------------------------------------------------------ environment

_EXPORTS = frozenset({"export", "declare", "typeset", "local", "readonly", "set"})
_GITAUDIT_RUNNERS = frozenset({"git", "git-audit", "gitaudit"})  # they run gitaudit's Python


_READS_NAMES = frozenset({"read", "mapfile", "readarray"})  # they set variables from input


def _environment(simple: Simple, runs_git: bool = False) -> str | None:
    names = [name for name, _ in simple.assignments]
    if simple.name in _EXPORTS:
        words = [w for w in simple.words[1:] if not w.startswith("-")]
        names += [w.partition("=")[0] for w in words]
        names += [w.partition("=")[2] for w in words]  # `declare -n ref=GIT_CONFIG_COUNT`
    return (
        _exports_all(simple, runs_git) or _read_names(simple) or _set_names(names, simple, runs_git)
    )


_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)*)?")


def runs_gitaudit(simple: Simple) -> bool:
    """Whether *simple* runs gitaudit's Python: ``git`` (``git audit``, the hooks),
    ``git-audit``, ``gitaudit``, or a Python interpreter started on gitaudit (``python3 -m
    gitaudit``, ``-Im gitaudit.hooks``, the console script ``python3 ~/.local/bin/git-audit``),
    its options read as Python reads them."""
    if simple.name in _GITAUDIT_RUNNERS:
        return True
    if not _PYTHON.fullmatch(simple.name):
        return False
    args = list(simple.words[1:])
    i = 0
    while i < len(args):
        word = args[i]
        if word in {"--", "-"} or not word.startswith("-"):
            script = args[i + 1 : i + 2] if word == "--" else [word]
            return bool(script) and os.path.basename(script[0]) in ("git-audit", "gitaudit")
        if word.startswith("--"):  # --version, --help: no argument
            i += 1
            continue
        for at, letter in enumerate(word[1:], start=2):
            if letter in "mcWX":  # the option's argument: the rest of the word, or the next
                value = word[at:] or (args[i + 1] if i + 1 < len(args) else "")
                if letter == "m":
                    return value == "gitaudit" or value.startswith("gitaudit.")
                if letter == "c":
                    return False  # code given inline: not gitaudit's entry point
                i += 0 if word[at:] else 1
                break
        i += 1
    return False


def _exports_all(simple: Simple, runs_git: bool) -> str | None:
    """``set -a`` (``set -o allexport``) in a command that runs git: every variable set after
    it reaches git, however it is set (``read GIT_CONFIG_COUNT ... <<< '1 core.hooksPath
    /dev/null'``)."""
    if simple.name != "set" or not runs_git:
        return None
    args = list(simple.words[1:])
    short = any(a.startswith("-") and not a.startswith("--") and "a" in a for a in args)
    if short or any(a == "-o" and b == "allexport" for a, b in pairwise(args)):
        return (
            f"`{' '.join(simple.words)}` exports every variable set after it to git, where "
            "gitaudit's guard cannot see them (GIT_CONFIG_* can point core.hooksPath elsewhere, "
            "which skips gitaudit's hooks): run git without it" + AFTER
        )
    return None


def _read_names(simple: Simple) -> str | None:
    """``read``, ``mapfile`` or ``printf -v`` setting a GIT_* variable from input the guard
    cannot see."""
    args = list(simple.words[1:])
    if simple.name in _READS_NAMES:
        names = args
    elif simple.name == "printf":
        names = [b for a, b in pairwise(args) if a == "-v"]
        names += [a[2:] for a in args if a.startswith("-v") and len(a) > 2]
    else:
        return None
    found = next((n for n in names if n.startswith("GIT_")), None)
    if found is None:
        return None
    return (
        f"`{simple.name}` sets {found} from input gitaudit's guard cannot see (GIT_* variables "
        "steer git: GIT_CONFIG_* can point core.hooksPath elsewhere, which skips gitaudit's "
        "hooks): set the variable you need with its value written out" + AFTER
    )


def _set_names(names: list[str], simple: Simple, runs_git: bool = False) -> str | None:
    # a name exported (`export`, `declare -x`) or assigned on its own (`HOME=/x; git ...`: a
    # variable the environment already holds stays exported) reaches every later command of
    # the call, the git or gitaudit it runs among them
    reaches = runs_git and (simple.name in _EXPORTS or not simple.words)
    runner = runs_gitaudit(simple) or reaches
    for name in names:
        if name.startswith("GIT_CONFIG"):
            return (
                f"setting {name} injects git configuration into the commands that follow "
                "(it can point core.hooksPath elsewhere, which skips gitaudit's hooks, or change "
                "audit.*): run the command without it" + AFTER
            )
        if name in _STEERING:
            return _STEERING[name] + AFTER
        if name in _RUNNER_VARS and runner:
            why = _RUNNER_VARS[name]
            target = simple.name if runs_gitaudit(simple) else "a command that runs gitaudit"
            return f"setting {name} for {target} {why}: run it without it" + AFTER
        if name == "GIT_DIR" and _git_subcommand(list(simple.words[1:])) == "init":
            return (
                "setting GIT_DIR for `git init` re-initializes that git directory (copying a "
                "template's hooks into it), where gitaudit's guard cannot judge it: run `git "
                "init DIR` without it" + AFTER
            )
        if name in ("HOME", "XDG_CONFIG_HOME") and (home := _homes(name, simple, reaches)):
            return home
    return None


def _homes(name: str, simple: Simple, reaches: bool) -> str | None:
    """``HOME`` or ``XDG_CONFIG_HOME`` set for git (another global configuration) or for
    gitaudit (another gitaudit home), as :func:`_set_names` reads *reaches*."""
    if simple.name == "git" or reaches:
        return (
            f"setting {name} for git makes it read another global configuration (which can "
            "switch hooks off with core.hooksPath): run git without it" + AFTER
        )
    if runs_gitaudit(simple):
        return (
            f"setting {name} for {simple.name} points gitaudit at another home (keys, "
            "trust anchors, the verdict memo and its cache; the site-packages of a `pip "
            "install --user`), so its verdict would not be the user's: run it without it" + AFTER
        )
    return None


_IMPORTS = "can make its hooks (and `git audit`) import another gitaudit (or its bytecode)"
_LOADS = (
    "has the dynamic loader put code of its choosing into git and gitaudit (the process that "
    "signs a run)"
)
_CACHES = (
    "points gitaudit at another cache (its private checkouts and kept indexes, which a run trusts)"
)
_RUNNER_VARS = {
    **dict.fromkeys(
        ("PYTHONPATH", "PYTHONHOME", "PYTHONPYCACHEPREFIX", "PYTHONUSERBASE", "PYTHONPLATLIBDIR"),
        _IMPORTS,
    ),
    "PYTHONINSPECT": (
        "has gitaudit's interpreter run what is typed on its terminal once it ends, in the "
        "process that read the signing key"
    ),
    **dict.fromkeys(("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES"), _LOADS),
    **dict.fromkeys(("GITAUDIT_CACHE", "XDG_CACHE_HOME"), _CACHES),
}
"""Variables that put other code into gitaudit's process, when set for a program that runs it
(:data:`_GITAUDIT_RUNNERS`), and why."""

_STEERING = {
    "GITAUDIT_HOME": (
        "setting GITAUDIT_HOME points gitaudit at another home (keys, trust anchors, the "
        "verdict memo), so its verdict would not be the user's: run the command without it"
    ),
    "SIMPLE_BACKUP_SUFFIX": (
        "setting SIMPLE_BACKUP_SUFFIX names the backups `patch`, `cp`, `mv`, `install` and "
        "`ln` make after the files they write (`t/hooks/pre-push` after a file named `.gi`), "
        "where gitaudit's guard cannot see them: give the suffix to the command itself (`-z`, "
        "`-S`), where it is judged"
    ),
    "GIT_TEMPLATE_DIR": (
        "setting GIT_TEMPLATE_DIR makes `git init` copy that folder's hooks into the git "
        "directory it makes or re-initializes (.git/hooks), where gitaudit's guard cannot see "
        "them: run git without it"
    ),
    "GIT_ICASE_PATHSPECS": (
        "setting GIT_ICASE_PATHSPECS makes git match every path in any case (`git rm "
        "TESTS/CHECK.PY` removes the checks' file), which gitaudit's guard cannot judge: write "
        "each path in its own case, without it"
    ),
    "GIT_WORK_TREE": (
        "setting GIT_WORK_TREE points the files git writes at another folder, where gitaudit's "
        "guard cannot see them: give it as `git --work-tree=DIR`, where it is judged"
    ),
}
"""Variables refused whatever the command: each steers where a program writes or reads."""


# --------------------------------------------------------------------------------- programs

_READERS = frozenset(
    {
        "cat", "less", "more", "head", "tail", "ls", "grep", "egrep", "fgrep", "rg", "ag",
        "wc", "diff", "cmp", "stat", "file", "jq", "echo", "printf", "test", "[", "readlink",
        "realpath", "basename", "dirname", "sha256sum", "sha1sum", "md5sum", "od", "xxd",
        "hexdump", "tree", "du", "cd", "pushd", "popd", "pwd", "true", "false", "which",
        "type",
    }
)  # fmt: skip
_WRITERS = frozenset(
    {
        "rm", "rmdir", "unlink", "shred", "touch", "truncate", "chmod", "chown", "chgrp", "tee",
        "mkdir", "chattr", "setfacl", "mkfifo",
    }
)  # fmt: skip
_DEST_WRITERS = frozenset({"cp", "mv", "ln", "install", "rsync", "scp", "link"})
_IN_PLACE = frozenset({"sed", "perl", "ruby", "gsed"})
_INTERNALS = (
    ".git/hooks",
    ".git/config",
    ".git/refs",
    ".git/packed-refs",
    ".git/gitaudit",
    ".git/info",
    ".git/shallow",
    ".git/objects/info",
    ".git/commondir",
    ".git/worktrees",
    "refs/audit",
    "hookspath",
    ".claude/settings",
    ".codex/hooks",
    ".codex/config",
    "/.gitconfig",
    "git/config",
    "git/attributes",
    "etc/gitattributes",
)


def _program(simple: Simple, guarded: WriteCheck) -> str | None:
    name, args = simple.name, list(simple.words[1:])
    rule = _PROGRAMS.get(name)
    if rule is not None:
        return rule(name, args, guarded)
    if name.startswith("python") and args[:2] == ["-m", "gitaudit"]:
        return _audit("gitaudit", args[2:], guarded)
    if name == "find":
        return _find(args, guarded)
    if name in _READERS or simple.heredoc or not name:
        return None
    return _mentions(name, args)


_FIND_RUNS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


def _find(args: list[str], guarded: WriteCheck) -> str | None:
    """``find`` deleting, or running a program not known to only read, on what it finds: each
    starting point is written into (``find .git -name pre-push -delete`` removes the hook
    whatever the expression matches); a starting point that is guarded, or inside a guarded
    place, is refused. ``find . -name '*.pyc' -delete`` passes: only the folder itself is
    judged, not all it holds."""
    runs = [b for a, b in pairwise(args) if a in _FIND_RUNS]
    if "-delete" not in args and all(os.path.basename(r) in _READERS for r in runs):
        return None
    i = 0
    while i < len(args) and (args[i] in ("-H", "-L", "-P") or args[i].startswith(("-O", "-D"))):
        i += 2 if args[i] == "-D" else 1  # the options before the starting points
    starts = itertools.takewhile(lambda a: not a.startswith(("-", "(", "!", ")")), args[i:])
    mentioned = _mentions("find", args)  # `.git/hooks` named: said so
    if mentioned:
        return mentioned
    for start in starts:
        why = guarded(start.rstrip("/") + "/")
        if why:
            return f"`find` would write under `{start}`: {why}"
    return None


def _writes_operands(name: str, args: list[str], guarded: WriteCheck) -> str | None:
    return _targets(name, _operands(args), guarded)


def _writes_destination(name: str, args: list[str], guarded: WriteCheck) -> str | None:
    """A copy, move or link: what it writes (:func:`_destination`), what ``mv`` removes (its
    sources), and what a link leads to (``ln``, ``cp -l``/``-s``): a link to a guarded path
    is another name for it, which the guard cannot follow before the link exists (``ln -s
    .git g && rm g/hooks/pre-push``)."""
    sources, writes = _destination(name, args)
    if name == "mv":
        why = _targets(name, sources, guarded)
        if why:
            return why
    _, values, shorts = _getopt(args, *_COPY_OPTIONS.get(name, ({}, ())))
    links = name in ("ln", "link") or (
        name == "cp" and bool(set(shorts) & {"l", "s"} or {"--link", "--symbolic-link"} & {*args})
    )
    for source in sources if links else ():
        seen = {source, *(os.path.join(os.path.dirname(w), source) for w in writes)}
        why = next((why for word in sorted(seen) if (why := guarded(word))), None)
        if why:
            return (
                f"`{name}` would make a link to `{source}`, another name for it that gitaudit's "
                f"guard could not follow: {why}"
            )
    backups = [w.rstrip("/") + suffix for suffix in values.get("suffix", []) for w in writes]
    folders = [f"{d.rstrip('/')}/" for k in _COPY_FOLDERS for d in values.get(k, []) if d]
    return _targets(name, [*writes, *backups, *folders], guarded)


_COPY_OPTIONS: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {
    "cp": ({"S": "suffix", "t": "target-directory"}, ("suffix", "target-directory")),
    "mv": ({"S": "suffix", "t": "target-directory"}, ("suffix", "target-directory")),
    "ln": ({"S": "suffix", "t": "target-directory"}, ("suffix", "target-directory")),
    "install": (
        {"S": "suffix", "t": "target-directory", "g": "", "m": "", "o": ""},
        ("suffix", "target-directory"),
    ),
    "rsync": (
        {"T": "temp-dir", "e": "", "B": "", "f": "", "M": "", "@": ""},
        ("suffix", "backup-dir", "temp-dir", "partial-dir"),
    ),
    "scp": ({c: "" for c in "cFiloPSJDX"}, ()),
}
"""Each copying program's options that take a value (its short letters, each with the long
option it stands for: "" when the value names no path) and its long options whose value
names what it writes: the target folder (``-t``), the backups' suffix (a backup is the
destination's name and the suffix: ``cp -b -S .py x tests/check`` moves the old
``tests/check`` to ``tests/check.py``; coreutils and rsync ignore one holding ``/``), the
folders rsync writes backups and temporary files into."""
_COPY_FOLDERS = ("backup-dir", "temp-dir", "partial-dir")


def _getopt(
    args: Sequence[str], short: Mapping[str, str], long: Sequence[str]
) -> tuple[list[str], dict[str, list[str]], str]:
    """*args* read as GNU getopt reads them: the operands (options may follow them), the
    values of the options that take one, by long name (a short letter of *short* bundled or
    not, its value attached or the next word: ``-tDIR``, ``-at DIR``; a long option of *long*
    in any abbreviation: ``--target=DIR``, ``--tar DIR``), and the short letters given without
    a value. An abbreviation getopt would find ambiguous counts too: refusing too much is
    safe."""
    operands: list[str] = []
    values: dict[str, list[str]] = {}
    flags = ""
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            operands += rest
            break
        if arg.startswith("--"):
            option, eq, value = arg[2:].partition("=")
            found = next((n for n in long if option and n.startswith(option)), None)
            if found is not None:
                values.setdefault(found, []).append(value if eq or not rest else rest.pop(0))
        elif arg.startswith("-") and arg != "-":
            for j, c in enumerate(arg[1:], 2):
                if c in short:
                    value = arg[j:] or (rest.pop(0) if rest else "")
                    values.setdefault(short[c], []).append(value)
                    break
                flags += c
        else:
            operands.append(arg)
    return operands, values, flags


def _writes_in_place(name: str, args: list[str], guarded: WriteCheck) -> str | None:
    """``sed -i`` (``perl -i``, ...) writes its files, and a backup of each when ``-i`` has a
    suffix (:func:`_in_place`)."""
    suffixes = _in_place(name, args)
    if suffixes is None:
        return None
    files = _operands(args)
    backups = [s.replace("*", f) if "*" in s else f + s for s in suffixes if s for f in files]
    return _targets(name, [*files, *backups], guarded)


def _in_place(name: str, args: Sequence[str]) -> list[str] | None:
    """The backup suffixes of an in-place edit (``-i[SUFFIX]``, bundled too: ``sed -Ei``,
    ``perl -pi.bak``; ``--in-place[=SUFFIX]``), or None when the command edits nothing in
    place. GNU sed and perl make the backup's name of the suffix with each ``*`` replaced by
    the file's name (``-i'bak/*'``: into a folder), else of the file's name and the suffix
    (``-it/hooks/pre-push`` on a file named ``.gi``)."""
    found: list[str] | None = None
    for arg in args:
        if arg == "--":
            break
        option, _, value = arg[2:].partition("=")
        if arg.startswith("--") and option and "in-place".startswith(option):
            found = [*(found or []), value]
        elif arg.startswith("-") and not arg.startswith("--"):
            for j, c in enumerate(arg[1:], 2):
                if c == "i":
                    found = [*(found or []), arg[j:]]
                    break
                if c in _IN_PLACE_WITH_VALUE.get(name, "e"):
                    break
    return found


_IN_PLACE_WITH_VALUE = {"sed": "efl", "gsed": "efl", "perl": "eEIMmxCdD", "ruby": "eIrxCEFKWT"}
"""The short options of each in-place editor after which the rest of a bundle is a value
(``sed -ei`` runs the script ``i``), where ``-i`` no longer counts."""


def _writes_into(name: str, args: list[str], guarded: WriteCheck) -> str | None:
    """An archive extracted into a folder: ``tar -C DIR`` (``--directory``, ``-xfC ARCHIVE
    DIR``, tar's old bundle ``xfC ARCHIVE DIR``), ``unzip -d DIR``, ``cpio -D DIR`` and ``cpio
    -p DIR``. What the archive holds the guard cannot read, so the folder is judged as one
    written into (``.git/``: the hooks); and the archive ``tar -c``/``-r`` writes (``-f``)."""
    short = _EXTRACTORS[name]
    if name == "tar" and args and not args[0].startswith("-"):
        args = _tar_bundle(args)
    operands, values, flags = _getopt(args, short, ("directory", "file"))
    folders = values.get("directory", []) + (operands if name == "cpio" and "p" in flags else [])
    writes = [f"{f.rstrip('/')}/" for f in folders if f]
    typed = [a[2:].partition("=")[0] for a in args if a.startswith("--") and len(a) > 3]
    if name == "tar" and (
        set(flags) & set("crAu") or any(w.startswith(t) for t in typed for w in _TAR_WRITES)
    ):
        writes += values.get("file", [])
    return _targets(name, writes, guarded)


def _tar_bundle(args: Sequence[str]) -> list[str]:
    """tar's old form read as options: a first word without a dash bundles letters, each that
    takes a value taking the next word in turn (``tar xfC a.tar DIR``)."""
    rest = list(args[1:])
    out = []
    for c in args[0]:
        out.append(f"-{c}")
        if c in _EXTRACTORS["tar"] and rest:
            out.append(rest.pop(0))
    return out + rest


_TAR_WRITES = ("create", "append", "update", "catenate", "concatenate")  # write the archive
_EXTRACTORS = {
    "tar": {"C": "directory", "f": "file", **{c: "" for c in "bFgHIKLNTVX"}},
    "unzip": {"d": "directory", "P": "", "x": ""},
    "cpio": {"D": "directory", **{c: "" for c in "CEFHIMOR"}},
}
"""Each extractor's short options that take a value, with the long option each stands for
("" when its value names no place it writes)."""


def _xargs(name: str, args: list[str], guarded: WriteCheck) -> str | None:
    """``xargs git SUB`` (``xargs patch``): the arguments xargs adds come from its input, which
    the guard cannot see (``echo --no-verify | xargs git commit``, ``xargs -a list git apply``:
    the patch files)."""
    for inner in wrapped(Simple((), (name, *args), ())):
        sub = _git_subcommand(list(inner.words[1:])) if inner.name == "git" else None
        if inner.name == "patch":
            return (
                "`xargs patch` adds arguments from its input, which gitaudit's guard cannot see "
                "(the patch file it applies, the file it writes): run `patch` with its "
                "arguments written out" + AFTER
            )
        if sub in _SEES_ARGUMENTS:
            return (
                f"`xargs git {sub}` adds arguments from its input, which gitaudit's guard cannot "
                f"see (they could be --no-verify, refs/audit/* or hook settings): run `git {sub}` "
                "with its arguments written out" + AFTER
            )
    return None


def _writes_patch(name: str, args: list[str], guarded: WriteCheck) -> str | None:
    """GNU ``patch`` writes the file it is given, whatever its diff names (``patch FILE <
    fix.diff``), its ``-o`` output and its ``-r`` rejects, and a backup of each file it
    patches (:func:`_patch_backups`). Every word that is not an option is judged as written
    (an option's value too: refusing too much is safe)."""
    writes = []
    for i, arg in enumerate(args):
        after = args[i + 1 : i + 2]
        if arg.startswith("--"):  # getopt takes any abbreviation (`--out=FILE`)
            option, eq, value = arg[2:].partition("=")
            if option and any(o.startswith(option) for o in ("output", "reject-file")):
                writes += [value] if eq else after
        elif arg.startswith("-"):
            for j, c in enumerate(arg[1:], 2):
                if c in _PATCH_WITH_VALUE:
                    writes += ([arg[j:]] if arg[j:] else after) if c in "or" else []
                    break
        else:
            writes.append(arg)
    backups = _patch_backups(args)
    return _targets(name, [*writes, *(b for w in writes for b in backups(w))], guarded)


def _patch_backups(args: Sequence[str]) -> Callable[[str], list[str]]:
    """The names of the backups GNU ``patch`` ARGS makes of a file it patches: ``-B PREFIX``
    (``--prefix``) before its name, ``-Y PREFIX`` (``--basename-prefix``) before its last
    component, ``-z SUFFIX`` (``--suffix``) after it. patch takes them as they are (``-B .gi``
    backs ``t/hooks/pre-push`` up to ``.git/hooks/pre-push``; ``-z t/hooks/pre-push`` backs
    ``.gi`` up there), and makes a backup without ``-b`` too when a hunk does not match exactly
    (``--backup-if-mismatch`` is its default), so each is judged whenever it is given."""
    long = ("prefix", "basename-prefix", "suffix")
    _, values, _ = _getopt(args, {**dict.fromkeys(_PATCH_WITH_VALUE, ""), **_PATCH_AFFIXES}, long)

    def backups(path: str) -> list[str]:
        folder, base = os.path.split(path)
        return [
            *(prefix + path for prefix in values.get("prefix", [])),
            *(os.path.join(folder, p + base) for p in values.get("basename-prefix", [])),
            *(path + suffix for suffix in values.get("suffix", [])),
        ]

    return backups


_PATCH_AFFIXES = {"B": "prefix", "Y": "basename-prefix", "z": "suffix"}


def _git_apply(sub: str, rest: list[str], guarded: WriteCheck) -> str | None:
    """``git apply --build-fake-ancestor=FILE`` writes an index file there."""
    files = [b for a, b in pairwise(rest) if a == "--build-fake-ancestor"]
    files += [a.split("=", 1)[1] for a in rest if a.startswith("--build-fake-ancestor=")]
    return _targets(f"git {sub}", files, guarded)


def _writes_dd(name: str, args: list[str], guarded: WriteCheck) -> str | None:
    return _targets(name, [a[3:] for a in args if a.startswith("of=")], guarded)


def _operands(args: Sequence[str], *, slash: bool = False) -> list[str]:
    """The operands of a command, without a trailing ``/`` unless *slash* (``rm -rf tests/``
    removes the folder as a whole: see :func:`_destination` for the one place a ``/`` counts)."""
    out, ended = [], False
    for arg in args:
        if arg == "--" and not ended:
            ended = True
        elif ended or not arg.startswith("-") or arg == "-":
            out.append(arg if slash else arg.rstrip("/") or arg)
    return out


def _destination(name: str, args: Sequence[str]) -> tuple[list[str], list[str]]:
    """The sources of ``cp``/``mv``/``ln``/``install`` (a lone operand is one: ``ln -s
    .git``), and what they write: into ``-t DIR`` (``-tDIR``, ``-at DIR``, ``--target=DIR``:
    :func:`_getopt`), or the last operand (a
    folder: the entry each source makes in it, and the folder itself ending with ``/``, so the
    guard judges it as a whole only when it is not an existing folder; with ``-T``, ``rsync``
    and a source that is a folder's contents, ``src/.``: the destination as a whole)."""
    operands, values, shorts = _getopt(args, *_COPY_OPTIONS.get(name, ({}, ())))
    folder = values["target-directory"][-1] if "target-directory" in values else None
    sources = [o.rstrip("/") or o for o in operands]
    if folder is None and len(operands) < 2:
        return sources, sources[-1:] if name != "ln" else [os.path.basename(s) for s in sources]
    if folder is None and ("T" in shorts or "--no-target-directory" in args):
        return sources[:-1], sources[-1:]
    if folder is None:
        folder, operands, sources = operands[-1], operands[:-1], sources[:-1]
    folder = folder.rstrip("/") or folder
    out = [folder if name == "rsync" else folder + "/"]
    for source in operands:
        entry = os.path.basename(source)
        whole = name == "rsync" and _RSYNC_CONTENTS.search(source) is not None
        out.append(folder if whole or entry in ("", ".", "..") else os.path.join(folder, entry))
    return sources, out


_RSYNC_CONTENTS = re.compile(r"/\.?$")  # rsync's `src/` (and `src/.`): the folder's contents


def _targets(name: str, words: Sequence[str], guarded: WriteCheck) -> str | None:
    for word in words:
        why = guarded(word)
        if why:
            return f"`{name}` would write `{word.replace(_TOP, ':/')}`: {why}"
    return None


def _redirects(simple: Simple, guarded: WriteCheck) -> str | None:
    for target in simple.writes:
        why = guarded(target)
        if why:
            return f"the redirection would write `{target}`: {why}"
    return None


def _mentions(name: str, args: Sequence[str]) -> str | None:
    for arg in args:
        low = arg.lower()
        hit = next((x for x in _INTERNALS if x in low), None)
        if hit:
            return (
                f"`{name}` is given `{arg}`, which names {hit}: gitaudit's guard cannot tell "
                "whether the program writes there, and the hooks, refs and settings there are "
                "what the gate relies on. Read it with a read-only command (cat, ls, git "
                "show), and leave it as it is" + AFTER
            )
    return None


# -------------------------------------------------------------------------------------- git

_GLOBAL_WITH_VALUE = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix",
     "--attr-source", "--list-cmds"}
)  # fmt: skip
_WITH_VALUE: dict[str, frozenset[str]] = {
    "commit": frozenset({"-m", "-F", "-c", "-C", "-t", "--message", "--file", "--reuse-message",
                         "--reedit-message", "--fixup", "--squash", "--author", "--date",
                         "--template", "--cleanup", "--trailer", "--pathspec-from-file"}),
    "push": frozenset({"-o", "--push-option", "--repo", "--receive-pack", "--exec"}),
    "merge": frozenset({"-m", "-F", "--message", "--file", "-s", "--strategy", "-X",
                        "--strategy-option", "--cleanup", "--into-name"}),
    "pull": frozenset({"-s", "--strategy", "-X", "--strategy-option", "--cleanup",
                       "--upload-pack", "--depth", "--deepen", "--shallow-since",
                       "--shallow-exclude", "--refmap", "-o", "--server-option",
                       "--negotiation-tip"}),
    "rebase": frozenset({"--onto", "-C", "--whitespace", "--empty", "-x", "--exec", "-s",
                         "--strategy", "-X", "--strategy-option"}),
    "am": frozenset({"--quoted-cr", "--whitespace", "--directory", "--exclude", "--include",
                     "-C", "-p", "--patch-format", "--resolvemsg", "--empty"}),
}  # fmt: skip
"""The options of each subcommand that takes ``--no-verify`` whose value is the next word
(per subcommand: ``-t`` is commit's ``--template`` but pull's ``--tags``)."""
_NO_VERIFY_COMMANDS = frozenset(_WITH_VALUE)
_PATH_WRITERS = frozenset({"rm", "mv", "checkout", "restore"})
_SEES_ARGUMENTS = _NO_VERIFY_COMMANDS | {
    "update-ref", "symbolic-ref", "reflog", "config", "fetch", "audit", "remote",
    "hash-object", *_PATH_WRITERS, "update-index", "checkout-index", "init", "clone",
    "worktree", "submodule", "bundle", "archive", "format-patch", "diff", "log", "show",
    "apply",
}  # fmt: skip


def _git_subcommand(args: list[str]) -> str | None:
    """The git subcommand of ``git ARGS`` (after the global options)."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in _GLOBAL_WITH_VALUE else 1
    return args[i] if i < len(args) else None


def _git(name: str, args: list[str], guarded: WriteCheck) -> str | None:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        opt = args[i]
        value = None
        if opt in ("-c", "--config-env") and i + 1 < len(args):
            value = args[i + 1]
        elif opt.startswith("--config-env="):
            value = opt.split("=", 1)[1]
        if value is not None:
            why = _guarded_key(value.partition("=")[0], f"git {opt.split('=')[0]} {value}")
            if why:
                return why
        i += 2 if opt in _GLOBAL_WITH_VALUE else 1
    if i >= len(args):
        return None
    sub, rest = args[i], args[i + 1 :]
    why = _no_verify(sub, rest) if sub in _NO_VERIFY_COMMANDS else None
    rule = _GIT_COMMANDS.get(sub)
    elsewhere, guarded = _git_folders(args[:i], guarded)
    return (
        why
        or elsewhere
        or _git_globals(sub, args[:i], guarded)
        or _git_outputs(sub, rest, guarded)
        or (rule(sub, rest, guarded) if rule is not None else None)
    )


def _git_globals(sub: str, options: Sequence[str], guarded: WriteCheck) -> str | None:
    """Global options that change what a subcommand writes: ``--icase-pathspecs`` (every
    pathspec matches in any case: ``git rm TESTS/CHECK.PY``), and for ``git init`` the
    ``--git-dir`` it (re-)initializes, judged as a whole (``git --git-dir=.git init
    --template=DIR`` copies DIR's hooks into ``.git/hooks``)."""
    if sub in _PATH_WRITERS and "--icase-pathspecs" in options:
        return (
            f"`git --icase-pathspecs {sub}` matches its paths in any case, which gitaudit's "
            "guard cannot judge (`TESTS/CHECK.PY` is the checks' file): write each path in "
            "its own case, without it" + AFTER
        )
    if sub != "init":
        return None
    dirs = [b for a, b in pairwise(options) if a == "--git-dir"]
    dirs += [a.split("=", 1)[1] for a in options if a.startswith("--git-dir=")]
    return _targets(f"git --git-dir {sub}", [d.rstrip("/") or d for d in dirs], guarded)


def _git_folders(options: Sequence[str], guarded: WriteCheck) -> tuple[str | None, WriteCheck]:
    """Why git's global *options* are refused (a ``--work-tree`` folder git would write the
    tree's files into, judged as a whole: ``git --work-tree=.git checkout -f HEAD``, with a
    tree holding ``hooks/pre-push``), and the write check for the subcommand's paths, which
    are each folder's (``git -C DIR``, ``--work-tree DIR``) as well as written."""
    moves = [b for a, b in pairwise(options) if a == "-C"]
    here = os.path.join(*moves) if moves else ""
    trees = [b for a, b in pairwise(options) if a == "--work-tree"]
    trees += [a.split("=", 1)[1] for a in options if a.startswith("--work-tree=")]
    trees = [os.path.join(here, t) for t in trees]
    for tree in trees:  # `--work-tree=.`: where `git checkout -f` writes anyway
        whole = guarded(tree.rstrip("/") or tree) if os.path.normpath(tree) != "." else None
        if whole:
            return (
                f"`git --work-tree {tree}` makes git write the work tree's files into "
                f"`{tree}` (a checkout or `reset --hard` writes them all): {whole}"
            ), guarded
    folders = [f for f in (here, *trees) if f]

    def inside(word: str) -> str | None:
        for folder in folders:
            # `git -C "$(...)"`: a folder the guard cannot see
            seen = _unseen_base(word) if _hidden(folder) else guarded(os.path.join(folder, word))
            if seen:
                return seen
        return guarded(word)

    return None, inside if folders else guarded


def _refs(sub: str, rest: list[str], guarded: WriteCheck) -> str | None:
    if "--stdin" in rest and sub == "update-ref":
        return (
            "`git update-ref --stdin` moves refs the guard cannot see; refs/audit/* (seals "
            "and evidence) must only move through gitaudit (`git audit run`, `git audit "
            "push`): update refs one by one, never under refs/audit/" + AFTER
        )
    if any("refs/audit" in a for a in rest):
        return (
            f"`git {sub}` on refs/audit/* rewrites gitaudit's ledger (seals and evidence) "
            "by hand; the gate would see a rewind or an unsigned tip. Record evidence with "
            "`git audit run` and share it with `git audit push`" + AFTER
        )
    return None


def _git_paths(sub: str, rest: list[str], guarded: WriteCheck) -> str | None:
    """``git rm/mv/checkout/restore`` write what their pathspecs match (:func:`_pathspec`);
    ``--pathspec-from-file`` names them in a file (or input) the guard cannot see."""
    options = rest[: rest.index("--")] if "--" in rest else rest
    if any(_abbreviates(a, "pathspec-from-file", 10) for a in options):
        return (
            f"`git {sub} --pathspec-from-file` takes its paths from a file or input gitaudit's "
            "guard cannot see (they could name the checks' files): give the paths as "
            "arguments" + AFTER
        )
    return _targets(f"git {sub}", [w for o in _operands(rest) for w in _pathspec(o)], guarded)


def _abbreviates(arg: str, option: str, least: int = 1) -> bool:
    """Whether *arg* is ``--OPTION`` (``=VALUE`` or not) in an abbreviation git takes, at least
    *least* letters long (a shorter one git finds ambiguous and refuses anyway)."""
    name = arg[2:].partition("=")[0]
    return arg.startswith("--") and len(name) >= least and option.startswith(name)


_PATHSPEC_MAGIC = re.compile(r":(?:\(([^)]*)\)|([/!^]*):?)")
_WILDCARD = re.compile(r"[*?\[\\]")


def _pathspec(word: str) -> list[str]:
    """What the pathspec *word* may write, as paths the guard judges. Git reads magic before
    a path: ``:/x`` and ``:(top)x`` name ``x`` from the work tree's top (:data:`_TOP`);
    ``:(icase)`` matches in any case, and an exclusion (``:!x``, ``:^x``, ``:(exclude)``)
    leaves everything else matched, so each is judged as the whole folder it starts from; and
    a wildcard (``*``, ``?``, ``[``: git's ``*`` matches ``/`` too, so ``*check.py`` is
    ``tests/check.py``) as the folder before it, as a whole (``:(literal)``: none)."""
    magic = _PATHSPEC_MAGIC.match(word)
    if magic is None:
        words = set()
        path = word
    else:
        words = {m.strip().partition(":")[0] for m in (magic[1] or "").split(",")}
        words |= {_SHORT_MAGIC[c] for c in magic[2] or ""}
        path = word[magic.end() :]
    top = _TOP if "top" in words else ""
    if words & {"icase", "exclude"}:  # git adds `:/` to exclusions alone: the top
        return [(top or _TOP if "exclude" in words else top) + "."]
    wildcard = None if "literal" in words else _WILDCARD.search(path)
    if wildcard is not None:
        return [top + (os.path.dirname(path[: wildcard.start()]) or ".")]
    return [top + path if top or magic else path]


_SHORT_MAGIC = {"/": "top", "!": "exclude", "^": "exclude"}


def _checkout_index(sub: str, rest: list[str], guarded: WriteCheck) -> str | None:
    """``git checkout-index`` writes each file it names under ``--prefix`` (put before the
    name as it is: ``--prefix=.gi t/hooks/pre-push`` writes ``.git/hooks/pre-push``), from the
    work tree's top (:data:`_TOP`), with the folder the command runs in before the name, so
    every place the prefix may begin (``.gi*``); with ``-a``/``--stdin`` (``--al``: git takes
    any abbreviation), any file of the index under the folder it runs in (without a prefix:
    that folder as a whole, where the index may hold another check than the disk)."""
    operands, values, flags = _getopt(rest, {}, ("prefix", "stage"))
    prefixes = values.get("prefix", [])
    writes = [p + o for p in prefixes or [""] for o in operands]
    writes += [_TOP + p + "*" for p in prefixes if p]
    every = [a for a in rest if _abbreviates(a, "all") or _abbreviates(a, "stdin")]
    if ("a" in flags or every) and not prefixes:
        writes.append(".")
    return _targets(f"git {sub}", writes, guarded)


def _update_index(sub: str, rest: list[str], guarded: WriteCheck) -> str | None:
    """``git update-index`` sets what the next commit records for each path it names (
    ``--chmod=+x``, ``--cacheinfo MODE,OBJECT,PATH``, ``--force-remove``), whatever the file
    on disk holds, and ``git checkout-index -a`` or a reset writes it out then: each path is
    judged as written; ``--index-info`` and ``--stdin`` take them from input the guard cannot
    see."""
    if any(_abbreviates(a, "index-info", 7) or _abbreviates(a, "stdin", 2) for a in rest):
        return (
            f"`git {sub} --index-info`/`--stdin` takes the paths it changes from input "
            "gitaudit's guard cannot see (they could be the checks' files): name each path "
            "as an argument" + AFTER
        )
    operands, values, _ = _getopt(rest, {}, ("cacheinfo", "chmod", "index-version"))
    paths = [info.split(",", 2)[-1] for info in values.get("cacheinfo", [])]
    return _targets(f"git {sub}", [*operands, *paths], guarded)


_GIT_WRITES: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {
    "format-patch": (
        {"o": "output-directory", **dict.fromkeys("vUSGOl", "")},
        ("output-directory",),
    ),
    "archive": ({"o": "output"}, ()),
    "bugreport": ({"o": "output-directory", "s": ""}, ("output-directory", "suffix")),
    "diagnose": ({"o": "output-directory", "s": ""}, ("output-directory", "suffix")),
    "index-pack": ({"o": "output"}, ()),
    "mailsplit": ({"o": "output-directory"}, ()),
}
"""The git subcommands that write a file or folder an option names besides ``--output``
(every one that takes it writes there: ``diff``, ``log``, ``show``, ``format-patch``,
``range-diff``, ...): each one's short options that take a value (the long option each stands
for; "" when its value names no place it writes) and its long options taking one."""


def _git_outputs(sub: str, rest: list[str], guarded: WriteCheck) -> str | None:
    """The file ``--output FILE`` names, for every subcommand (git's diff options write the
    patch there: ``git log --format=... --output=.git/hooks/pre-push`` writes a hook), and
    what :data:`_GIT_WRITES` names (``format-patch -o DIR``, ``archive -o FILE``): a folder is
    judged as one written into."""
    short, long = _GIT_WRITES.get(sub, ({}, ()))
    _, values, _ = _getopt(rest, short, ("output", *long))
    files = values.get("output", [])
    folders = [f"{d.rstrip('/')}/" for d in values.get("output-directory", []) if d]
    return _targets(f"git {sub}", [*files, *folders], guarded)


def _git_creates(sub: str, rest: list[str], guarded: WriteCheck) -> str | None:
    """The folder or file a git subcommand makes, each judged as a whole (like ``mkdir``):
    ``git init [DIR]`` (``.`` by default: run in an existing repository it re-initializes it,
    copying ``--template``'s hooks into ``.git/hooks``, and ``--bare .git`` makes it bare)
    and its ``--separate-git-dir``; ``git clone URL [DIR]`` (DIR by default the name git
    makes of URL); ``git bundle create FILE``; ``git worktree add PATH`` (``move``,
    ``remove``); ``git submodule add URL [PATH]``."""
    operands, values, _ = _getopt(rest, *_CREATES[sub])
    action, *after = operands or [""]
    if sub == "init":
        writes = operands[:1] or ["."]
    elif sub == "clone":
        writes = operands[1:2] or [_humanish(o) for o in operands[:1]]
    elif sub == "submodule" and action == "add":
        writes = after[1:2] or [_humanish(o) for o in after[:1]]
    elif sub == "bundle" and action == "create":
        writes = after[:1]
    elif sub == "worktree" and action in ("add", "move", "remove"):
        writes = after[: 2 if action == "move" else 1]
    else:
        return None
    writes += values.get("separate-git-dir", [])
    return _targets(f"git {sub}", [w.rstrip("/") or w for w in writes], guarded)


_CLONE_WITH_VALUE = (
    "origin", "branch", "upload-pack", "template", "reference", "reference-if-able",
    "separate-git-dir", "depth", "shallow-since", "shallow-exclude", "config", "server-option",
    "jobs", "filter", "bundle-uri",
)  # fmt: skip
_CREATES: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {
    "init": ({"b": ""}, ("template", "separate-git-dir", "initial-branch", "object-format")),
    "clone": (dict.fromkeys("obucj", ""), _CLONE_WITH_VALUE),
    "submodule": ({"b": ""}, ("branch", "name", "reference", "depth")),
    "bundle": ({}, ("version",)),
    "worktree": ({"b": "", "B": ""}, ("reason",)),
}
"""The options of each subcommand :func:`_git_creates` reads that take a value (short
letters; long names, which git takes in any abbreviation)."""


def _humanish(url: str) -> str:
    """The folder ``git clone URL`` makes without one named: the URL's last component without
    ``/.git``, ``.git`` or ``.bundle``."""
    name = re.sub(r"(/\.git)?/*$", "", url)
    name = re.split(r"[/:]", name)[-1]
    return re.sub(r"\.(git|bundle)$", "", name) or url


def _no_verify(sub: str, rest: list[str]) -> str | None:
    with_value = _WITH_VALUE[sub]
    skip = False
    for arg in rest:
        if skip:
            skip = False
            continue
        if arg == "--":
            break
        if _hides_an_option(sub, arg):
            return (
                f"`git {sub} {arg}`: gitaudit's guard cannot see what {arg} holds (it could be "
                "--no-verify): write the options out"
            )
        if arg.startswith("--"):
            name = arg.split("=", 1)[0]
            if len(name) > 5 and "--no-verify".startswith(name):
                return _no_verify_reason(sub, arg)
            skip = name in with_value and "=" not in arg
        elif arg.startswith("-") and len(arg) > 1 and sub == "commit":
            for n, ch in enumerate(arg[1:], 1):
                if ch == "n":
                    return _no_verify_reason(sub, arg)
                if ch in "mFcCtSu":
                    skip = ch in "mFcCt" and n == len(arg) - 1
                    break
        elif arg.startswith("-"):
            skip = arg in with_value
    return None


def _hides_an_option(sub: str, arg: str) -> bool:
    """Whether *arg* holds a substitution or a variable the guard cannot see where an option
    could be (``$'--no-verify'``, ``--no-ver$X``, ``$FLAGS``, commit's ``-a$X``)."""
    if not _hidden(arg):
        return False
    prefix = arg[: min(i for i in (arg.find("$"), arg.find("`")) if i >= 0)]
    if "--no-verify".startswith(prefix):
        return True
    bundle = prefix.startswith("-") and not prefix.startswith("--")
    return sub == "commit" and bundle and not set(prefix[1:]) & set("mFcCtSu")


def _no_verify_reason(sub: str, arg: str) -> str:
    hook = {"commit": "commit-msg", "push": "pre-push"}.get(sub, "client")
    return (
        f"`git {sub} {arg}` skips gitaudit's {hook} hook, which checks the gate. Run it "
        f"without {'-n/' if sub == 'commit' else ''}--no-verify: if the hook refuses, the work "
        "is not done yet; run `git audit status` and do what it says"
    )


def _ledger(name: str) -> bool:
    """Whether the ref name or refspec side *name* could resolve under ``refs/audit/``, as
    git resolves it: a name without ``refs/`` is looked up as ``refs/<name>`` too
    (``audit/plans``), and a glob's ``*`` matches any text (``refs/*``, ``*``, ``refs/a*``)."""
    name = re.sub("/+", "/", name.lower())
    for full in dict.fromkeys((name, f"refs/{name}")):
        if "*" in full:
            head = full.split("*", 1)[0]
            if "refs/audit/".startswith(head) or head.startswith("refs/audit/"):
                return True
        elif full == "refs/audit" or full.startswith("refs/audit/"):
            return True
    return False


def _refspec(spec: str) -> tuple[bool, str, str]:
    """(forced, source, destination) of the refspec *spec*; a spec without ``:`` writes the
    ref it names."""
    forced = spec.startswith("+")
    source, colon, destination = spec.removeprefix("+").partition(":")
    return forced, source, destination if colon else source


def _push(sub: str, rest: list[str], guarded: WriteCheck) -> str | None:
    flags = [a for a in rest if a.startswith("-")]
    shorts = "".join(a[1:] for a in flags if not a.startswith("--"))
    force = "f" in shorts or any(
        a.split("=", 1)[0] in ("--force", "--force-with-lease", "--force-if-includes")
        for a in flags
    )
    delete = "d" in shorts or "--delete" in flags or "--prune" in flags
    if "--mirror" in flags:
        return (
            "`git push --mirror` force-updates and deletes every ref on the remote, "
            "refs/audit/* (the shared seals and evidence) included: push the branch with `git "
            "audit push` instead" + AFTER
        )
    for spec in _operands(rest, slash=True):  # the remote too: a remote named `audit` is rare
        forced, source, destination = _refspec(spec)
        erased = delete or (not source and destination)
        if (force or forced or erased) and _ledger(destination):
            return (
                f"force-pushing or deleting `{spec}` would rewrite the shared ledger "
                "(refs/audit/*: seals and evidence; git completes `audit/...` and globs match "
                "there too), which moves only forward; share evidence with `git audit push`" + AFTER
            )
    return None


def _fetch(sub: str, rest: list[str], guarded: WriteCheck) -> str | None:
    flags = [a for a in rest if a.startswith("-")]
    shorts = "".join(a[1:] for a in flags if not a.startswith("--"))
    force = bool({"f", "p"} & set(shorts)) or any(
        a.split("=", 1)[0] in ("--force", "--prune", "--mirror") for a in flags
    )
    specs = [a.split("=", 1)[1] for a in rest if a.startswith("--refmap=")]
    specs += [b for a, b in pairwise(rest) if a == "--refmap"]
    for spec in specs + _operands(rest, slash=True):
        forced, _, destination = _refspec(spec)
        if ":" in spec and (force or forced) and _ledger(destination):
            return (
                f"`git {sub} {spec}` with force or prune overwrites the local ledger "
                "(refs/audit/*; git completes `audit/...` and globs match there too) with "
                "another copy: fetch it into refs/remotes (`git audit sync` does) and let "
                "gitaudit compare" + AFTER
            )
    return None


def _hookless(sub: str, rest: list[str], guarded: WriteCheck) -> str | None:
    """Plumbing that makes a commit or a push without the hooks that check the gate."""
    if sub == "hash-object":  # only `-t commit` makes a commit
        kinds = [b for a, b in pairwise(rest) if a in ("-t", "--type")]
        kinds += [a.split("=", 1)[1] for a in rest if a.startswith("--type=")]
        if "commit" not in kinds and "-tcommit" not in rest:
            return None
    hook = "pre-push" if sub in ("send-pack", "http-push") else "commit-msg"
    instead = "git push" if hook == "pre-push" else "git commit"
    return (
        f"`git {sub}` {'pushes' if hook == 'pre-push' else 'makes a commit'} without gitaudit's "
        f"{hook} hook, which checks the gate: use `{instead}` (if the hook refuses, the work is "
        "not done yet; run `git audit status` and do what it says)"
    )


def _remote(sub: str, rest: list[str], guarded: WriteCheck) -> str | None:
    """``git remote add --mirror``: a remote whose fetch refspec is ``+refs/*:refs/*`` (or
    whose push mirrors every ref), so a plain ``git fetch``/``git push`` forces the ledger."""
    if any(a == "--mirror" or a.startswith("--mirror=") for a in rest):
        return (
            "`git remote --mirror` makes a remote that force-updates every ref, refs/audit/* "
            "(the ledger) included, on each fetch or push: add it without --mirror" + AFTER
        )
    return None


_CONFIG_OPTIONS = (
    "global", "system", "local", "worktree", "file", "blob", "get", "get-all", "get-regexp",
    "get-urlmatch", "replace-all", "add", "unset", "unset-all", "rename-section",
    "remove-section", "list", "fixed-value", "edit", "get-color", "get-colorbool", "type",
    "bool", "int", "bool-or-int", "path", "expiry-date", "no-type", "null", "name-only",
    "includes", "show-origin", "show-scope", "default", "comment", "value", "url", "all",
)  # fmt: skip
_CONFIG_WITH_VALUE = frozenset({"file", "blob", "type", "default", "comment", "value", "url"})
_CONFIG_SHORT = {"f": "file", "t": "type", "l": "list", "e": "edit", "z": "null"}
_CONFIG_READS = frozenset({"get", "get-all", "get-regexp", "get-urlmatch", "list",
                           "get-color", "get-colorbool"})  # fmt: skip
_CONFIG_WRITES = frozenset({"unset", "unset-all", "add", "replace-all", "rename-section",
                            "remove-section"})  # fmt: skip


def _config_words(rest: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """``git config ARGS`` read as git reads them: its options by full name (git takes any
    unambiguous abbreviation, ``--fil``, ``--glob``, and bundled short ones, ``-f.git/config``,
    ``-lz``), the files ``--file``/``-f`` name, and the operands."""
    options: list[str] = []
    files: list[str] = []
    operands: list[str] = []
    args = list(rest)
    while args:
        arg = args.pop(0)
        if arg == "--":
            operands += args
            break
        found: list[tuple[str, str | None]] = []  # (option, its value if it takes one)
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            exact = [o for o in _CONFIG_OPTIONS if o == name]
            named = exact or [o for o in _CONFIG_OPTIONS if name and o.startswith(name)]
            takes = bool(_CONFIG_WITH_VALUE.intersection(named))  # ambiguous: git refuses
            taken = value if eq else (args.pop(0) if takes and args else "")
            found += [(o, taken if o in _CONFIG_WITH_VALUE else None) for o in named]
        elif arg.startswith("-") and arg != "-":
            for j, c in enumerate(arg[1:], 2):
                option = _CONFIG_SHORT.get(c, c)
                if option in _CONFIG_WITH_VALUE:
                    found.append((option, arg[j:] or (args.pop(0) if args else "")))
                    break
                found.append((option, None))
        else:
            operands.append(arg)
        for option, given in found:
            options.append(option)
            if option == "file" and given is not None:
                files.append(given)
    return options, files, operands


def _config(sub: str, rest: list[str], guarded: WriteCheck) -> str | None:
    options, files, operands = _config_words(rest)
    if "edit" in options or operands[:1] == ["edit"]:
        return (
            "`git config --edit` can change anything, core.hooksPath and audit.* included, "
            "which the guard cannot check: set ordinary keys one by one" + AFTER
        )
    if operands[:1] in (["set"], ["unset"], ["rename-section"], ["remove-section"]):
        keys = operands[1:2] if operands[0] in ("set", "unset") else operands[1:3]
    elif operands[:1] in (["get"], ["list"], ["get-color"]) or set(options) & _CONFIG_READS:
        return None
    elif set(options) & _CONFIG_WRITES or len(operands) >= 2:
        keys = operands[:2] if "rename-section" in options else operands[:1]
    else:
        return None  # `git config KEY` reads
    for key in keys:
        why = _guarded_key(key, f"git config {key}")
        if why:
            return why
    scope = next((o for o in options if o in ("global", "system")), None)
    if scope:
        return (
            f"`git config --{scope}` writes the user's git configuration, which gitaudit trusts "
            "like its key folder (a content filter or core.hooksPath there changes what the "
            "gate's fingerprint hashes and which hooks run); only the user changes it: set the "
            "key for this repository (`git config KEY VALUE`)" + AFTER
        )
    return next((f"`git config --file {f}`: {why}" for f in files if (why := guarded(f))), None)


def _guarded_key(key: str, what: str) -> str | None:
    low = key.lower()
    if low == "core.hookspath":
        why = "points git at another hooks folder, which skips gitaudit's hooks"
    elif low == "audit" or low.startswith("audit."):
        why = "changes gitaudit's own configuration (the pinned root key, the commit-msg mode)"
    elif low == "include" or low.startswith(("include.", "includeif.")):
        why = "includes another configuration file, which can set core.hooksPath or audit.*"
    elif low == "core.worktree":
        why = (
            "points the files git writes at another folder (from the git directory: `hooks` "
            "is .git/hooks), where gitaudit's guard cannot see them; give it as `git "
            "--work-tree=DIR`, where it is judged"
        )
    elif low == "init.templatedir":
        why = "makes `git init` copy that folder's hooks into the git directory (.git/hooks)"
    elif low.startswith("alias."):
        why = "defines an alias, which hides the real command from the guard"
    elif low.startswith("remote.") and low.endswith((".push", ".mirror", ".fetch")):
        why = (
            "sets which refs a plain fetch or push moves, which the guard cannot see then "
            "(`+refs/*:refs/*` forces the ledger, refs/audit/*)"
        )
    else:
        return None
    return f"`{what}` {why}: leave it as it is (`git audit doctor` checks the set-up)" + AFTER


# ------------------------------------------------------------------------------- git audit


_SEALER_DECISIONS = {
    ("plan", "retire"): "retires a plan, so its requirements stop counting",
    ("plan", "reset-attempts"): "gives a step the attempts the plan allowed it back",
    ("request", "seal"): "changes what the user asked for (a plan must answer the request)",
    ("trust", "add"): "changes whose keys count (seals, evidence, approvals)",
    ("trust", "remove"): "changes whose keys count (seals, evidence, approvals)",
    ("trust", "init"): "changes whose keys count (seals, evidence, approvals)",
    ("trust", "anchor"): "changes the pin every verification starts from",
    ("trust", "policy"): "changes the policy the gate judges with",
}


def _audit(name: str, args: list[str], guarded: WriteCheck) -> str | None:
    words = [a for a in args if not a.startswith("-")]
    flags = {a.split("=", 1)[0] for a in args if a.startswith("--")}
    if words[:2] in (["hooks", "uninstall"], ["agent", "uninstall"]):
        return (
            f"`git audit {' '.join(words[:2])}` removes the hooks that hold the work to the "
            "gate; that is the user's decision, not the agent's: ask the user" + AFTER
        )
    what = _SEALER_DECISIONS.get((words[0], words[1])) if len(words) >= 2 else None
    if words[:2] == ["trust", "policy"] and not flags - {"--json", "--help"}:
        what = None  # shows the policy
    if words[:2] == ["plan", "seal"] and flags & {"--allow-weaken", "--amend"}:
        what = "records a weakening or an amendment of the sealed definition of done"
    if words[:1] == ["approve"]:
        what = "adds a sealer's approval to a proposed change of the definition of done"
    if words[:1] == ["reconcile"] and "--observed" in flags:
        what = "records an outcome by assertion instead of by a check (`--readback` runs one)"
    if what:
        return (
            f"`git audit {' '.join(words[:2] if words[:1] != ['approve'] else words[:1])}` "
            f"{what}: that is the user's decision, taken "
            "with the user's key, not the agent's. Ask the user; meanwhile make the work pass "
            "the plan as it is" + AFTER
        )
    return None


Rule = Callable[[str, list[str], WriteCheck], "str | None"]

_GIT_COMMANDS: dict[str, Rule] = {
    "push": _push,
    "fetch": _fetch,
    "pull": _fetch,
    "remote": _remote,
    "commit-tree": _hookless,
    "hash-object": _hookless,
    "send-pack": _hookless,
    "http-push": _hookless,
    "update-ref": _refs,
    "symbolic-ref": _refs,
    "reflog": _refs,
    "config": _config,
    "apply": _git_apply,
    "checkout-index": _checkout_index,
    "update-index": _update_index,
    **dict.fromkeys(_CREATES, _git_creates),
    "audit": _audit,
    **dict.fromkeys(_PATH_WRITERS, _git_paths),
}
_PROGRAMS: dict[str, Rule] = {
    "git": _git,
    "git-audit": _audit,
    "gitaudit": _audit,
    "dd": _writes_dd,
    "patch": _writes_patch,
    "xargs": _xargs,
    **dict.fromkeys(_EXTRACTORS, _writes_into),
    **dict.fromkeys(_WRITERS, _writes_operands),
    **dict.fromkeys(_DEST_WRITERS, _writes_destination),
    **dict.fromkeys(_IN_PLACE, _writes_in_place),
}
