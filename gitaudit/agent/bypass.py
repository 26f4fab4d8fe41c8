"""Which shell commands get past the gate, and why: the guard's rules for ``Bash`` tool calls.

Each rule answers a simple command (:mod:`gitaudit.agent.shell`) with the reason it is refused,
worded so the agent can act on it, or None. The kinds refused:

* skipping the client hooks: ``--no-verify`` on ``git commit`` (and its ``-n``), ``push``,
  ``merge``, ``pull``, ``am``, ``rebase``;
* moving the ledger by hand: ``git update-ref`` (``symbolic-ref``, ``reflog``) on
  ``refs/audit/*``, ``update-ref --stdin``; force-pushing, deleting or mirroring
  ``refs/audit/*``, force-fetching into it;
* configuration that switches hooks off or changes gitaudit: ``git config`` writes of
  ``audit.*``, ``core.hooksPath``, ``include.path``/``includeIf.*`` and ``alias.*`` (``--edit``
  too); the same keys in ``git -c``/``--config-env``; ``GIT_CONFIG*`` variables (``GIT_CONFIG_
  COUNT``/``KEY_n``/``VALUE_n``, ``GIT_CONFIG_PARAMETERS``, ``GIT_CONFIG_GLOBAL``, ...),
  ``GITAUDIT_HOME``, ``HOME``/``XDG_CONFIG_HOME`` for git (another global config), and
  ``PYTHONPATH``/``PYTHONHOME`` for git or ``git-audit`` (the hooks would import another
  gitaudit);
* removing the hooks: ``git audit hooks uninstall``, ``git audit agent uninstall``;
* the sealer's decisions, taken with the user's key: ``git audit plan seal --allow-weaken``
  (or ``--amend``), ``plan retire``, ``plan reset-attempts``, ``request seal``, ``trust add/
  remove/init/anchor/policy``, ``reconcile --observed`` (a plain ``plan seal``, which only
  strengthens, passes);
* writing a guarded path (``.git/``, ``.gitaudit/``, the agent settings, gitaudit's home, the
  files the checks run) with a redirection or a command that writes its arguments (``rm``,
  ``mv``, ``cp``/``ln``/``install`` destinations, ``tee``, ``sed -i``, ``chmod``, ``dd of=``,
  ``git rm/mv/checkout/restore``, ...);
* a patch in the command (a here-document for ``git apply`` or ``patch``, Codex's
  ``apply_patch`` envelope) that writes a guarded path (:mod:`gitaudit.agent.patches`);
* ``xargs git ...`` for those subcommands (the arguments come from input the guard cannot
  see);
* a command the guard cannot read, and any other program whose arguments name the git
  directory's internals (``.git/hooks``, ``.git/config``, ``refs/audit``, ...), since the guard
  cannot tell whether it writes there.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence

from gitaudit.agent.shell import Simple, Unreadable, commands, wrapped

WriteCheck = Callable[[str], "str | None"]
"""Why writing the path a word names is refused (None: it is not)."""

PathCheck = Callable[[str, str], "str | None"]
"""Why writing the path a word names, from a directory, is refused (None: it is not)."""

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
    bases = [cwd]
    variables: dict[str, str] = {}

    def check(word: str) -> str | None:
        return next((why for base in bases if (why := guarded(word, base))), None)

    for found in simples:
        simple = _substituted(found, variables)
        why = _environment(simple) or _program(simple, check) or _redirects(simple, check)
        if why:
            return why
        if simple.name in ("cd", "pushd"):
            bases += _moved(bases, simple.words[1:])
        if not simple.words:
            variables.update(simple.assignments)  # NAME=value on its own: a shell variable
    return _patched(command, check)


def _patched(command: str, check: WriteCheck) -> str | None:
    """A patch in the command's text (a here-document for ``git apply`` or ``patch``, Codex's
    ``apply_patch`` envelope) that writes a guarded path."""
    from gitaudit.agent.patches import patch_paths

    for path in patch_paths(command):
        why = check(path)
        if why:
            return f"the patch in this command would write `{path}`: {why}"
    return None


_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _substituted(simple: Simple, variables: dict[str, str]) -> Simple:
    """*simple* with the shell variables set earlier in the same command put in."""
    if not variables:
        return simple

    def put(word: str) -> str:
        return _VARIABLE.sub(lambda m: variables.get(m[1] or m[2], m[0]), word)

    return simple._replace(
        words=tuple(map(put, simple.words)),
        writes=tuple(map(put, simple.writes)),
        assignments=tuple((k, put(v)) for k, v in simple.assignments),
    )


def _moved(bases: list[str], args: Sequence[str]) -> list[str]:
    """Where ``cd ARGS`` may lead from each of *bases* (``cd`` and ``cd ~``: home)."""
    target = next((a for a in args if not a.startswith("-") or a == "-"), "~")
    if target == "-":
        return []  # the previous directory: one of the bases already
    target = os.path.expanduser(os.path.expandvars(target))
    return [os.path.join(base, target) for base in bases][:16]


# ------------------------------------------------------------------------------ environment

_EXPORTS = frozenset({"export", "declare", "typeset", "local", "readonly", "set"})
_GITAUDIT_RUNNERS = frozenset({"git", "git-audit", "gitaudit"})  # they run gitaudit's Python


def _environment(simple: Simple) -> str | None:
    names = [name for name, _ in simple.assignments]
    if simple.name in _EXPORTS:
        names += [w.partition("=")[0] for w in simple.words[1:] if not w.startswith("-")]
    for name in names:
        if name.startswith("GIT_CONFIG"):
            return (
                f"setting {name} injects git configuration into the commands that follow "
                "(it can point core.hooksPath elsewhere, which skips gitaudit's hooks, or change "
                "audit.*): run the command without it" + AFTER
            )
        if name == "GITAUDIT_HOME":
            return (
                "setting GITAUDIT_HOME points gitaudit at another home (keys, trust anchors, "
                "the verdict memo), so its verdict would not be the user's: run the command "
                "without it" + AFTER
            )
        if name in ("PYTHONPATH", "PYTHONHOME") and simple.name in _GITAUDIT_RUNNERS:
            return (
                f"setting {name} for {simple.name} can make its hooks (and `git audit`) import "
                "another gitaudit: run it without it" + AFTER
            )
        if name in ("HOME", "XDG_CONFIG_HOME") and simple.name == "git":
            return (
                f"setting {name} for git makes it read another global configuration (which can "
                "switch hooks off with core.hooksPath): run git without it" + AFTER
            )
    return None


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
        "rm", "rmdir", "unlink", "shred", "touch", "truncate", "chmod", "chown", "chgrp", "mv",
        "tee", "mkdir", "chattr", "setfacl", "mkfifo",
    }
)  # fmt: skip
_DEST_WRITERS = frozenset({"cp", "ln", "install", "rsync", "scp", "link"})
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
)


def _program(simple: Simple, guarded: WriteCheck) -> str | None:
    name, args = simple.name, list(simple.words[1:])
    rule = _PROGRAMS.get(name)
    if rule is not None:
        return rule(name, args, guarded)
    if name.startswith("python") and args[:2] == ["-m", "gitaudit"]:
        return _audit("gitaudit", args[2:], guarded)
    if name == "find" and not {"-delete", "-exec", "-execdir", "-ok", "-okdir"} & set(args):
        return None
    if name in _READERS or simple.heredoc or not name:
        return None
    return _mentions(name, args)


def _writes_operands(name: str, args: list[str], guarded: WriteCheck) -> str | None:
    return _targets(name, _operands(args), guarded)


def _writes_destination(name: str, args: list[str], guarded: WriteCheck) -> str | None:
    return _targets(name, _destination(args), guarded)


def _writes_in_place(name: str, args: list[str], guarded: WriteCheck) -> str | None:
    if any(a.startswith(("-i", "--in-place", "-pi")) for a in args):
        return _targets(name, _operands(args), guarded)
    return None


def _xargs(name: str, args: list[str], guarded: WriteCheck) -> str | None:
    """``xargs git SUB``: the arguments xargs adds come from its input, which the guard cannot
    see (``echo --no-verify | xargs git commit``)."""
    for inner in wrapped(Simple((), (name, *args), ())):
        sub = _git_subcommand(list(inner.words[1:])) if inner.name == "git" else None
        if sub in _SEES_ARGUMENTS:
            return (
                f"`xargs git {sub}` adds arguments from its input, which gitaudit's guard cannot "
                f"see (they could be --no-verify, refs/audit/* or hook settings): run `git {sub}` "
                "with its arguments written out" + AFTER
            )
    return None


def _writes_dd(name: str, args: list[str], guarded: WriteCheck) -> str | None:
    return _targets(name, [a[3:] for a in args if a.startswith("of=")], guarded)


def _operands(args: Sequence[str]) -> list[str]:
    out, ended = [], False
    for arg in args:
        if arg == "--" and not ended:
            ended = True
        elif ended or not arg.startswith("-") or arg == "-":
            out.append(arg)
    return out


def _destination(args: Sequence[str]) -> list[str]:
    """Where ``cp``/``ln``/``install`` write: ``-t DIR``, or the last operand."""
    for i, arg in enumerate(args):
        if arg in ("-t", "--target-directory") and i + 1 < len(args):
            return [args[i + 1]]
        if arg.startswith("--target-directory="):
            return [arg.split("=", 1)[1]]
    operands = _operands(args)
    return operands[-1:] if len(operands) > 1 else operands


def _targets(name: str, words: Sequence[str], guarded: WriteCheck) -> str | None:
    for word in words:
        why = guarded(word)
        if why:
            return f"`{name}` would write `{word}`: {why}"
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
_NO_VERIFY_COMMANDS = frozenset({"commit", "push", "merge", "pull", "am", "rebase"})
_PATH_WRITERS = frozenset({"rm", "mv", "checkout", "restore"})
_SEES_ARGUMENTS = _NO_VERIFY_COMMANDS | {
    "update-ref", "symbolic-ref", "reflog", "config", "fetch", "audit", *_PATH_WRITERS,
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
    moves = [args[j + 1] for j in range(i - 1) if args[j] == "-C"]
    if moves:  # `git -C DIR`: paths are DIR's
        folder = os.path.join(*moves)
        inner = guarded

        def guarded(word: str) -> str | None:
            return inner(os.path.join(folder, word)) or inner(word)

    return why or (rule(sub, rest, guarded) if rule is not None else None)


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
    return _targets(f"git {sub}", _operands(rest), guarded)


def _no_verify(sub: str, rest: list[str]) -> str | None:
    with_value = {"-m", "-F", "-c", "-C", "-t", "--message", "--file", "--reuse-message",
                  "--reedit-message", "--fixup", "--squash", "--author", "--date",
                  "--template", "--cleanup", "--trailer", "--pathspec-from-file", "-o",
                  "--push-option", "--repo", "--receive-pack", "--exec", "-s", "--strategy",
                  "-X", "--strategy-option", "--onto"}  # fmt: skip
    skip = False
    for arg in rest:
        if skip:
            skip = False
            continue
        if arg == "--":
            break
        if arg.startswith("$") and sub in ("commit", "push"):
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


def _no_verify_reason(sub: str, arg: str) -> str:
    hook = {"commit": "commit-msg", "push": "pre-push"}.get(sub, "client")
    return (
        f"`git {sub} {arg}` skips gitaudit's {hook} hook, which checks the gate. Run it "
        f"without {'-n/' if sub == 'commit' else ''}--no-verify: if the hook refuses, the work "
        "is not done yet; run `git audit status` and do what it says"
    )


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
    for spec in (a for a in rest if not a.startswith("-")):
        if "refs/audit" not in spec:
            continue
        if force or delete or spec.startswith(("+", ":")):
            return (
                f"force-pushing or deleting `{spec}` would rewrite the shared ledger "
                "(refs/audit/*: seals and evidence), which moves only forward; share evidence "
                "with `git audit push`" + AFTER
            )
    return None


def _fetch(sub: str, rest: list[str], guarded: WriteCheck) -> str | None:
    flags = [a for a in rest if a.startswith("-")]
    force = any(a in ("-f", "--force", "--prune", "-p") for a in flags)
    for spec in (a for a in rest if not a.startswith("-")):
        _, _, dest = spec.partition(":")
        if dest.startswith("refs/audit") and (force or spec.startswith("+")):
            return (
                f"`git fetch {spec}` with force overwrites the local ledger (refs/audit/*) with "
                "another copy: fetch it into refs/remotes (`git audit sync` does) and let "
                "gitaudit compare" + AFTER
            )
    return None


_CONFIG_WITH_VALUE = frozenset({"-f", "--file", "--blob", "--type", "--default", "--comment",
                                "--value", "--url"})  # fmt: skip
_CONFIG_READS = frozenset({"--get", "--get-all", "--get-regexp", "--get-urlmatch", "-l",
                           "--list", "--get-color", "--get-colorbool"})  # fmt: skip
_CONFIG_WRITES = frozenset({"--unset", "--unset-all", "--add", "--replace-all",
                            "--rename-section", "--remove-section"})  # fmt: skip


def _config(sub: str, rest: list[str], guarded: WriteCheck) -> str | None:
    options, operands = [], []
    skip = False
    for arg in rest:
        if skip:
            skip = False
        elif arg.startswith("-"):
            options.append(arg.split("=", 1)[0])
            skip = arg in _CONFIG_WITH_VALUE
        else:
            operands.append(arg)
    if "-e" in options or "--edit" in options or operands[:1] == ["edit"]:
        return (
            "`git config --edit` can change anything, core.hooksPath and audit.* included, "
            "which the guard cannot check: set ordinary keys one by one" + AFTER
        )
    if operands[:1] in (["set"], ["unset"], ["rename-section"], ["remove-section"]):
        keys = operands[1:2] if operands[0] in ("set", "unset") else operands[1:3]
    elif operands[:1] in (["get"], ["list"], ["get-color"]) or set(options) & _CONFIG_READS:
        return None
    elif set(options) & _CONFIG_WRITES or len(operands) >= 2:
        keys = operands[:2] if "--rename-section" in options else operands[:1]
    else:
        return None  # `git config KEY` reads
    for key in keys:
        why = _guarded_key(key, f"git config {key}")
        if why:
            return why
    return None


def _guarded_key(key: str, what: str) -> str | None:
    low = key.lower()
    if low == "core.hookspath":
        why = "points git at another hooks folder, which skips gitaudit's hooks"
    elif low == "audit" or low.startswith("audit."):
        why = "changes gitaudit's own configuration (the pinned root key, the commit-msg mode)"
    elif low == "include" or low.startswith(("include.", "includeif.")):
        why = "includes another configuration file, which can set core.hooksPath or audit.*"
    elif low.startswith("alias."):
        why = "defines an alias, which hides the real command from the guard"
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
    "update-ref": _refs,
    "symbolic-ref": _refs,
    "reflog": _refs,
    "config": _config,
    "audit": _audit,
    **dict.fromkeys(_PATH_WRITERS, _git_paths),
}
_PROGRAMS: dict[str, Rule] = {
    "git": _git,
    "git-audit": _audit,
    "gitaudit": _audit,
    "dd": _writes_dd,
    "xargs": _xargs,
    **dict.fromkeys(_WRITERS, _writes_operands),
    **dict.fromkeys(_DEST_WRITERS, _writes_destination),
    **dict.fromkeys(_IN_PLACE, _writes_in_place),
}
