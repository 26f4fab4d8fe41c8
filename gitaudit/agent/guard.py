"""The PreToolUse guard: refuses the tool calls that edit what the gate stands on.

* File edits (``Write``, ``Edit``, ``MultiEdit``: ``file_path``; ``NotebookEdit``:
  ``notebook_path``; Codex's ``apply_patch``: each file its patch body names) of a guarded
  path: anything in a git directory (this repository's, found with git, or any path with a
  ``.git`` component), the plans (``.gitaudit/``), the hosts' hook settings (``.claude/
  settings.json``, ``.claude/settings.local.json``, ``.codex/hooks.json``, ``.codex/config.
  toml``, in the project or the user's home), gitaudit's home (keys, trust anchors, the memo
  key), the user's and the system's git configuration (:func:`gitaudit.places.
  global_git_config`, ``/etc/gitconfig``, ``/etc/gitattributes``, ``$GIT_CONFIG_SYSTEM``:
  trusted like the key folder, since a content filter or ``core.hooksPath`` there changes what
  the fingerprint hashes and which hooks run), what that configuration names elsewhere
  (:func:`gitaudit.git.config_paths.named_by_config`: included files, the attributes file, the
  hooks folder, the content filters' programs), what decides which program the hooks and the
  agent's later commands run (:mod:`gitaudit.agent.programs`: gitaudit's installation, a
  ``git``/``git-audit``/``gitaudit`` in a folder on PATH, the files a shell sources first),
  the configuration a pre-commit framework hook runs from (``.pre-commit-config.yaml``: it
  decides whether gitaudit's client hooks run at all) and the files the checks run
  (:func:`gitaudit.agent.protected.protection`); and a folder above any of them (removing or
  replacing ``tests/`` replaces the check inside it).
* ``Bash`` commands that bypass the gate or write a guarded path
  (:mod:`gitaudit.agent.bypass`).

Paths are resolved as the tool would: relative ones from the payload's ``cwd``, ``..`` and
symbolic links followed (both the path as written and where it leads are checked); a shell
word in every spelling bash may give it, since its quotes are gone (:func:`spellings`). What
one call may ask the guard to judge is bounded (:data:`BUDGET`): past it, the call is refused
as unreadable rather than judged past the host's hook timeout. Every other tool passes with no
output. Standard library only, and nothing
is computed that the call does not need: an edit outside the guarded folders costs two git
processes, for what the configuration names and for the protected files (and one more to list
an existing folder of the work tree it writes), a read-only tool none.
"""

from __future__ import annotations

import fnmatch
import glob
import itertools
import os
import re
from collections.abc import Callable, Iterator, Mapping
from functools import cached_property

from gitaudit.agent import payload as payloads
from gitaudit.agent import programs
from gitaudit.agent.hosts import ALLOW, Answer

TYPE_CHECKING = False  # not typing's: the agent hooks do without typing (gitaudit.named)
if TYPE_CHECKING:
    from gitaudit.agent.protected import Protection

EDIT_TOOLS = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
PATCH_TOOLS = {"apply_patch"}  # Codex: tool_input.command is the patch body
SETTINGS_FILES = (
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".codex/hooks.json",
    ".codex/config.toml",
)  # the hosts' hook settings: in the project, and the same names in the user's home
AFTER = " `git audit status` says what the gate wants instead."


def decide(raw: bytes) -> Answer:
    """The guard's decision for the host payload *raw* (a ``PreToolUse`` call)."""
    doc = payloads.load(raw)
    tool = payloads.field(doc, "tool_name", str, required=True)
    if tool not in EDIT_TOOLS and tool not in PATCH_TOOLS and tool != "Bash":
        return ALLOW
    tool_input = payloads.field(doc, "tool_input", dict, required=True)
    places = Places(payloads.project_dir())
    cwd = payloads.field(doc, "cwd", str) or places.project
    if tool == "Bash":
        from gitaudit.agent.bypass import refusal

        command = payloads.field(tool_input, "command", str, required=True)
        why = refusal(
            command,
            places.write_refusal,
            cwd,
        )
    elif tool in PATCH_TOOLS:
        from gitaudit.agent.patches import patch_paths

        body = payloads.field(tool_input, "command", str, required=True)
        why = next(
            (
                f"{tool} writing `{path}` is refused: {why}"
                for path in patch_paths(body)
                if (why := places.write_refusal(path, cwd))
            ),
            None,
        )
    else:
        path = payloads.field(tool_input, EDIT_TOOLS[tool], str, required=True)
        why = places.write_refusal(path, cwd)
        why = f"{tool} of `{path}` is refused: {why}" if why else None
    return Answer(False, why) if why else ALLOW


class Places:
    """The guarded places of the project at *project* (computed when first needed)."""

    def __init__(self, project: str) -> None:
        self.project = project
        self.spent = 0  # of BUDGET

    @cached_property
    def _located(self) -> list[str]:
        """git's answer: the work tree's top, the git dir, the common dir and the hooks folder
        git runs (``core.hooksPath`` or the common dir's ``hooks``); [] outside a repository."""
        from gitaudit.git.call import run_git

        proc = run_git(
            [
                "rev-parse",
                "--path-format=absolute",
                "--show-toplevel",
                "--git-dir",
                "--git-common-dir",
                "--git-path",
                "hooks",
            ],
            cwd=self.project,
            check=False,
        )
        lines = proc.out.splitlines()
        return lines if proc.code == 0 and len(lines) == 4 else []

    @cached_property
    def repository(self) -> tuple[str | None, tuple[str, ...]]:
        """(work tree root, git directories), real paths; (None, ()) outside a repository."""
        lines = self._located
        if not lines:
            return None, ()
        return os.path.realpath(lines[0]), tuple(os.path.realpath(p) for p in lines[1:3])

    @cached_property
    def _hook_configs(self) -> list[str]:
        """The files outside the git directory that the installed client hooks take their
        commands from: a hook written by the pre-commit framework runs whatever the file its
        ``hook-impl --config=FILE`` names (``.pre-commit-config.yaml`` by default, relative
        to the work tree's top, where git runs hooks) lists, so that file decides whether
        gitaudit's hook runs at all. Real paths; [] when no hook is pre-commit's."""
        if not self._located or self.repository[0] is None:
            return []
        folder, root = self._located[3], self.repository[0]
        found: list[str] = []
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return []
        for name in names:
            if name.endswith(".sample"):
                continue
            try:
                with open(os.path.join(folder, name), "rb") as handle:
                    text = handle.read(1 << 18).decode("utf-8", "replace")
            except OSError:
                continue
            if "hook-impl" not in text and "File generated by pre-commit" not in text:
                continue
            for each in _PRE_COMMIT_CONFIG.findall(text) or [".pre-commit-config.yaml"]:
                found.append(os.path.realpath(os.path.join(root, os.path.expanduser(each))))
        return list(dict.fromkeys(found))

    def _hook_config(self, path: str) -> str | None:
        if not self._hook_configs or os.path.realpath(path) not in self._hook_configs:
            return None
        return (
            f"`{path}` is the configuration of the client hooks (a hook in "
            f"`{self._located[3]}` is the pre-commit framework's, which runs what this file "
            "lists): a change to it can drop gitaudit's pre-push or commit-msg hook or put "
            "another program in its place; only the user changes it." + AFTER
        )

    @cached_property
    def protected(self) -> Protection:
        from gitaudit.agent.protected import Protection, protection

        root = self.repository[0]
        return protection(root) if root is not None else Protection(())

    @cached_property
    def home(self) -> str:
        from gitaudit.places import home_dir

        return os.path.realpath(home_dir())

    def write_refusal(
        self, word: str, cwd: str, variables: Mapping[str, str] | None = None
    ) -> str | None:
        """Why writing the path *word* (from *cwd*) is refused, or None. With *variables* (a
        shell word, its quotes already gone; the variables its command set), every path bash
        may make of it is judged (:func:`spellings`): as written, since quoted text is literal
        (``'$HOME'`` names a folder called ``$HOME``), and with its braces, ``~``, variables
        and globs expanded.

        A word that ends with ``/`` and names an existing folder is written into, not replaced
        (the shell rules pass a copy's destination folder so, with the entry the copy makes in
        it): only the folder itself is judged, not what it holds.

        Each path judged, and each folder entry a glob looks at, is spent from :data:`BUDGET`
        (:class:`~gitaudit.agent.shell.Unreadable` past it)."""
        expand = variables is not None
        every = spellings(word, cwd, self._spend, variables) if expand else [word]
        for each in (f for s in every for f in _fields(s, variables)) if expand else every:
            path = os.path.join(cwd, each)
            for candidate in (path, *(self._glob_written(path) if expand else ())):
                self._spend(1)
                into = candidate.endswith(os.sep) and os.path.isdir(candidate)
                why = self._refusal(candidate, whole=not into)
                if why:
                    return why
        return None

    def _spend(self, cost: int) -> None:
        """Count *cost* against :data:`BUDGET`: a hostile command multiplies the paths to judge
        (``cd`` folders, braces, variables, globs over the whole disk, patch names), and a
        guard that runs past the host's hook timeout lets the call through."""
        self.spent += cost
        if self.spent > BUDGET:
            from gitaudit.agent.shell import Unreadable

            raise Unreadable(
                "it asks for more paths to be checked than the guard checks in time (folders "
                "it moves to, braces, variables, globs, patch names): split it into smaller "
                "commands and write the paths out"
            )

    def _glob_written(self, pattern: str) -> list[str]:
        """What bash may expand the written path *pattern* to. A pattern ending with ``/`` is
        a copy's destination (:func:`gitaudit.agent.bypass._destination`): written into when
        it matches a folder (kept with its ``/``), written over when it matches a file (``cp
        /dev/null .g?t/hooks/pre-push``, where a ``/`` after it would match folders only)."""
        if not pattern.endswith(os.sep):
            return self._glob(pattern)
        found = self._glob(pattern.rstrip(os.sep) or pattern)
        return [f + os.sep if os.path.isdir(f) else f for f in found]

    def _glob(self, pattern: str) -> list[str]:
        """What :func:`glob.glob` (hidden names included) matches of *pattern*, each folder
        entry it looks at spent (``/*/*/*/*/*/x`` walks the whole disk)."""
        if not glob.has_magic(pattern):
            return []
        parts = os.path.join(os.curdir, pattern).split(os.sep)  # absolute: parts[0] is ""
        found = [parts[0]]
        for i, part in enumerate(parts[1:], 1):
            last = i == len(parts) - 1
            if not glob.has_magic(part):
                found = [f"{f}{os.sep}{part}" for f in found]
                continue
            matched = []
            for folder in found:
                try:
                    with os.scandir(folder or os.sep) as entries:
                        for entry in entries:
                            self._spend(1)
                            if fnmatch.fnmatchcase(entry.name, part) and (last or entry.is_dir()):
                                matched.append(f"{folder}{os.sep}{entry.name}")
                except OSError:
                    continue
            found = matched
        return [f for f in found if os.path.lexists(f)]

    def _refusal(self, path: str, *, whole: bool = True) -> str | None:
        """Why writing *path* is refused; with *whole*, writing it as a whole (removing,
        moving or replacing a folder) counts as writing everything it holds."""
        lexical = os.path.normpath(path)
        real = os.path.realpath(path)
        for where in dict.fromkeys((lexical, real)):
            why = (
                self._git_dir(where)
                or self._home(where)
                or self._host_settings(where)
                or self._git_config(where)
                or self._sourced(where)
                or self._path_program(where)
                or self._installation(where)
                or self._hook_config(where)
                or self._in_tree(where)
                or (self._holds(where) if whole else None)
            )
            if why:
                return why
        return None

    def _holds(self, folder: str) -> str | None:
        """Why writing the folder *folder* as a whole is refused: it holds a guarded place
        (a git directory, gitaudit's home, the git configuration, hook settings, the plans)
        or a file of the work tree a plan protects (`rm -rf tests && cp -r easy tests`
        replaces the check inside it)."""
        for inner in self._guarded_places():
            if inner != folder and _within(inner, folder):
                why = self._refusal(inner, whole=False)
                if why:
                    return f"it holds `{inner}`, and {why}"
        root = self.repository[0]
        if root is None or not _within(folder, root) or not os.path.isdir(folder):
            return None
        for rel in self._tracked(os.path.relpath(folder, root)):
            why = self._in_tree(os.path.join(root, rel))
            if why:
                return f"it holds `{rel}`, and {why}"
        return None

    def _guarded_places(self) -> list[str]:
        """The guarded places a folder may hold, besides the protected files of the tree."""
        home = os.path.expanduser("~")
        places = []  # the work tree's first: a pathspec (`git checkout -- .`) never reaches .git
        for base in dict.fromkeys((self.repository[0] or self.project, self.project, home)):
            places += [os.path.join(base, *name.split("/")) for name in SETTINGS_FILES]
            if base != home:
                places.append(os.path.join(base, ".gitaudit"))
        places += [*self._user_settings]
        places += [*self.repository[1], self.home, *self._git_config_files, *self._config_named]
        places += [*self._startup_files, *self._installation_places, *self._hook_configs]
        places += [os.path.join(f, name) for f in self._path_folders for name in programs.RUNNERS]
        return [os.path.normpath(p) for p in places]

    def _tracked(self, rel: str) -> list[str]:
        """The files of the index under the folder *rel* of the work tree."""
        from gitaudit.git.call import run_git

        root = self.repository[0]
        assert root is not None
        self._spend(GIT_COST)
        proc = run_git(["ls-files", "-z", "--", rel], cwd=root, check=False)
        names = [name for name in proc.out.split("\0") if name] if proc.code == 0 else []
        self._spend(len(names) // 16)
        return names

    def _git_dir(self, path: str) -> str | None:
        gitdirs = self.repository[1]
        inside = any(_within(path, d) for d in gitdirs)
        if not inside and not any(part.lower() == ".git" for part in path.split(os.sep)):
            return None
        return (
            "it is inside a git directory, where the hooks, the refs (refs/audit/* holds the "
            "seals and evidence) and the configuration the gate relies on live. Change the "
            "repository with git commands (add, commit, ...), and leave hooks, refs and config "
            "as they are." + AFTER
        )

    def _home(self, path: str) -> str | None:
        if not _within(path, self.home):
            return None
        return (
            f"it is in gitaudit's home ({self.home}): the signing keys, the trust anchors and the "
            "verdict memo's key, which only the user manages." + AFTER
        )

    @cached_property
    def _user_settings(self) -> list[str]:
        """The hosts' user-level settings files, as written and where they lead: the names of
        :data:`SETTINGS_FILES` in the home, and in the hosts' configuration folders
        (:func:`gitaudit.agent.programs.host_folder`: ``$CLAUDE_CONFIG_DIR/settings.json``,
        ``$CODEX_HOME/config.toml``, ...)."""
        found = [
            os.path.join(folder, rest)
            for name in SETTINGS_FILES
            for folder in programs.host_folder(name.split("/")[0])
            for rest in [name.split("/", 1)[1]]
        ]
        return list(
            dict.fromkeys(f(p) for p in found for f in (os.path.normpath, os.path.realpath))
        )

    def _host_settings(self, path: str) -> str | None:
        """The hosts' user-level settings (``~/.claude/settings.json``, ``~/.codex/hooks.json``,
        ``~/.codex/config.toml``, ..., and the same in ``$CLAUDE_CONFIG_DIR``/``$CODEX_HOME``),
        which can switch the project's hooks off too."""
        found = next((f for f in self._user_settings if path == f), None)
        if found is None:
            return None
        return (
            f"`{found}` holds the host's hook settings, which can switch this agent's "
            "hooks (gitaudit's stop hook and this guard) off; only the user changes them."
        )

    @cached_property
    def _git_config_files(self) -> list[str]:
        """The user's and the system's git configuration: every path, as given and where it
        leads (``~/.gitconfig`` is often a link into a dotfiles folder)."""
        from gitaudit.places import global_git_config

        system = os.environ.get("GIT_CONFIG_SYSTEM")
        found = [
            *global_git_config(),
            "/etc/gitconfig",
            "/etc/gitattributes",
            *([os.path.expanduser(system)] if system else []),
        ]
        return list(
            dict.fromkeys(f(p) for p in found for f in (os.path.normpath, os.path.realpath))
        )

    @cached_property
    def _config_named(self) -> list[str]:
        """What the git configuration names elsewhere (:func:`gitaudit.git.config_paths.
        named_by_config`: included files, the attributes file, the hooks folder, the content
        filters' programs), as named and where it leads; one git process, asked only when a
        path gets this far."""
        from gitaudit.git.config_paths import named_by_config

        self._spend(GIT_COST)
        found = named_by_config(self.repository[0] or self.project)
        return list(
            dict.fromkeys(f(p) for p in found for f in (os.path.normpath, os.path.realpath))
        )

    def _git_config(self, path: str) -> str | None:
        """The user's and the system's git configuration, which gitaudit trusts like its key
        folder: a content filter added there (``clean = git cat-file blob HEAD:%f``) makes the
        fingerprint hash what was proven instead of the file on disk, ``core.hooksPath`` there
        switches the client hooks off. And what it names elsewhere, which decides as much: an
        included file is configuration too, ``*.sh text eol=crlf`` in the attributes file made
        a failing script with CRLF line ends the checkout of the proven tree."""
        found = next((f for f in self._git_config_files if _within(path, f)), None)
        if found is not None:
            return (
                f"`{found}` is the user's git configuration, which gitaudit trusts like its key "
                "folder: a content filter, an attributes line or core.hooksPath there changes "
                "what the gate's fingerprint hashes and which hooks run; only the user changes "
                "it. Set an ordinary key for this repository with `git config KEY VALUE`." + AFTER
            )
        found = next((f for f in self._config_named if _within(path, f)), None)
        if found is None:
            return None
        return (
            f"`{found}` is named by the git configuration (an included file, core.attributesFile, "
            "core.hooksPath or a content filter's program), which gitaudit trusts like its key "
            "folder: what it holds changes what the gate's fingerprint hashes, what a run's "
            "checks read and which hooks run; only the user changes it." + AFTER
        )

    @cached_property
    def _startup_files(self) -> list[str]:
        return programs.startup_files()

    def _sourced(self, path: str) -> str | None:
        """The files a shell sources before the agent's commands run (its startup files,
        Claude Code's shell snapshot, ``$CLAUDE_ENV_FILE``, ...): a function or an alias there
        changes what a later command the guard reads as ``git commit`` runs."""
        found = next((f for f in self._startup_files if _within(path, f)), None)
        if found is None:
            return None
        return (
            f"`{found}` is sourced by the shell before the agent's commands run (a startup "
            "file, the host's shell snapshot or its environment file): a function or alias "
            'there (`git() { command git -c core.hooksPath=/dev/null "$@"; }`) changes what '
            "every later command runs, where gitaudit's guard cannot see it; only the user "
            "changes it. Set what a command needs in the command itself." + AFTER
        )

    @cached_property
    def _path_folders(self) -> list[str]:
        return programs.path_folders()

    def _path_program(self, path: str) -> str | None:
        """A program in a folder on PATH: one named like git or gitaudit
        (:data:`gitaudit.agent.programs.RUNNERS`) anywhere, since a later ``git commit``, which
        the guard reads as git's, or the host's ``git-audit agent stop`` would run it instead
        of the real one; and any program in such a folder outside the work tree, where the
        checks of ``git audit run`` find theirs (a ``python3`` there that exits 0 proves every
        check; the run drops only the repository's folders from PATH)."""
        folder, name = os.path.split(path)
        if folder not in self._path_folders:
            return None
        if name.lower() in programs.RUNNERS:
            return (
                f"it would put a program named `{name}` in `{folder}`, a folder on PATH, where "
                f"a later `{name}` may find it before the real one (a `git` that skips "
                "gitaudit's hooks, a `git-audit` that answers for them); only the user installs "
                "programs there. Give the program another name, or run it by its path." + AFTER
            )
        root = self.repository[0] or os.path.realpath(self.project)
        if _within(path, root) or _within(path, self.project):
            return None  # the run drops the repository's folders from the checks' PATH
        return (
            f"`{folder}` is a folder on PATH outside the repository, where the checks of "
            f"`git audit run` find their programs: a `{name}` there is what a check naming it "
            "runs; only the user installs programs there. Keep the program in the repository "
            "and run it by its path." + AFTER
        )

    @cached_property
    def _installation_places(self) -> list[str]:
        return programs.installation(self.repository[1])

    def _installation(self, path: str) -> str | None:
        """gitaudit's installation outside the work tree (:func:`gitaudit.agent.programs.
        installation`): the code the stop hook and this guard run. One inside the work tree
        is refused when the hooks are installed (:func:`gitaudit.places.code_inside`); the
        work tree itself stays the agent's to edit."""
        tree = (self.repository[0] or self.project, self.project, os.path.realpath(self.project))
        if any(_within(path, t) for t in tree):
            return None
        found = next((p for p in self._installation_places if _within(path, p)), None)
        if found is None:
            return None
        return (
            f"`{found}` belongs to the gitaudit installation the hooks run (its Python, its "
            "packages, its `git-audit`): code written there (a `.pth` file in site-packages "
            "runs at every start) would run inside gitaudit's stop hook and this guard, which "
            "would then answer what it says; only the user changes it (upgrade with pipx or "
            "pip)." + AFTER
        )

    def _in_tree(self, path: str) -> str | None:
        root = self.repository[0] or os.path.realpath(self.project)
        if not _within(path, root) and not _within(path, self.project):
            return None
        base = root if _within(path, root) else self.project
        rel = os.path.relpath(path, base).replace(os.sep, "/")
        low = rel.lower()
        if low == ".gitaudit" or low.startswith(".gitaudit/"):
            return (
                f"`{rel}` is a gitaudit plan file: the plan is the sealed definition of done, "
                "and a change to it counts only when a sealer reseals it. Ask the user to change "
                "the plan; meanwhile make the work pass the plan as it is." + AFTER
            )
        if low in SETTINGS_FILES:
            return (
                f"`{rel}` holds this agent's hooks (gitaudit's stop hook and this guard); only "
                "the user changes them."
            )
        why = self.protected.why(rel) if self.repository[0] else None
        if why is None:
            return None
        return (
            f"`{rel}` is protected by the plan ({why}): editing it would change what the "
            "checks prove, not make "
            "the work pass them. Change the code under "
            "test instead; if the check itself is wrong, ask the user to change it and reseal "
            "the plan." + AFTER
        )


_PRE_COMMIT_CONFIG = re.compile(
    r"""(?:--config[= ]|\bCONFIG=)["']?([^\s"')]+)"""
)  # pre-commit's hook: `ARGS=(hook-impl --config=FILE ...)`, `CONFIG=FILE` before 2.0

BUDGET = 20_000
"""How much judging one tool call may ask for: a path judged or a folder entry a glob looks
at costs one, a ``git ls-files`` for a folder :data:`GIT_COST` (and one per 16 files it lists).
About two seconds on a slow machine; an ordinary command spends a few dozen."""
GIT_COST = 40


def spellings(
    word: str, cwd: str, spend: Callable[[int], None], variables: Mapping[str, str] | None = None
) -> Iterator[str]:
    """The paths the shell word *word* may stand for, from *cwd*, each spent (one) with *spend*.

    Quotes are gone by the time a word reaches the guard, so where bash reads ``$``, ``~`` and
    braces is not known: ``'$HOME/../x'`` (or ``$'\\x24HOME/../x'``) writes through a folder
    literally named ``$HOME``, ``"$HOME"/x`` through the home folder. So every reading is
    returned: the word as written, and with its braces expanded, ``~`` (``~+``: *cwd*) expanded
    or not, and each variable kept as written or replaced by what bash may put there (the value
    the command set, its value here, nothing: bash expands an unset variable to nothing; a
    ``${NAME:-word}`` default's word too)."""
    for each in dict.fromkeys((word, *_braces(word, spend))):
        for tilde in dict.fromkeys((each, _tilde(each, cwd))):
            for spelling in _variables(tilde, variables or {}):
                spend(1 + len(spelling) // 256)
                yield spelling


def _fields(word: str, variables: Mapping[str, str] | None) -> list[str]:
    """*word*, and the fields bash may split it into: an unquoted expansion is split at each
    character of ``IFS`` (``x='a .git/hooks/pre-push'; rm $x`` removes the hook), and the
    guard no longer knows which parts were quoted, so every split counts (``IFS`` as the
    command set it, besides space, tab and newline)."""
    separators = " \t\n" + (variables or {}).get("IFS", "")
    if not any(c in word for c in separators):
        return [word]
    pattern = "[" + re.escape(separators) + "]"
    return [word, *(f for f in re.split(pattern, word) if f)]


def _tilde(word: str, cwd: str) -> str:
    if word == "~+" or word.startswith("~+/"):
        return cwd + word[2:]
    return os.path.expanduser(word)


_REFERENCE = re.compile(r"\$(?:\{([^{}]*)\}|([A-Za-z_][A-Za-z0-9_]*)|([0-9@*#?$!-]))")
_DEFAULT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?::?[-=+?](.*))?", re.S)


def _variables(word: str, variables: Mapping[str, str]) -> Iterator[str]:
    """*word* with each ``$NAME``, ``${...}`` and ``$1``/``$@``/... kept or replaced, in every
    combination (lazily: the caller spends each)."""
    pieces, choices, end = [], [], 0
    for match in _REFERENCE.finditer(word):
        pieces.append(word[end : match.start()])
        end = match.end()
        values = [match[0], ""]
        default = _DEFAULT.fullmatch(match[1] or "")
        if match[1] is not None and not default:
            _unevaluated(match[0], match[1], variables)
        name = match[2] or (default[1] if default else None)
        if name:
            values += [variables.get(name, ""), os.environ.get(name, "")]
        if default:
            values.append(default[2] or "")
        choices.append(list(dict.fromkeys(values)))
    pieces.append(word[end:])
    for combination in itertools.product(*choices):
        yield "".join(p + v for p, v in zip(pieces, [*combination, ""], strict=True))


_OPERAND = re.compile(r"[!#]?([A-Za-z_][A-Za-z0-9_]*)")


def _unevaluated(reference: str, inner: str, variables: Mapping[str, str]) -> None:
    """Refuse as unreadable the expansion *reference* (``${INNER}``) of a variable the guard
    knows (set by the command, or here) in a form it does not evaluate: indirection
    (``${!b}``, b=a, a=.git), a pattern cut or replaced (``${x#X}``, ``${x/tig/git}``), a
    substring (``${x:1}``), a subscript (``${m[1]}``), a case change. Bash makes another path
    of it than the value, the value's absence or the text as written, which are all the
    guard judges."""
    name = _OPERAND.match(inner)
    if name and (name[1] in variables or name[1] in os.environ):
        from gitaudit.agent.shell import Unreadable

        raise Unreadable(
            f"it writes a path made by `{reference}`, an expansion of `{name[1]}` whose result "
            "the guard does not compute: put the path in a variable as it is, or write it out"
        )


_BRACE = re.compile(r"\{([^{}]*)\}")  # an innermost group: linear, unlike `[^{}]*,[^{}]*`


def _braces(word: str, spend: Callable[[int], None], limit: int = 64) -> list[str]:
    """*word* with its ``{a,b}`` alternatives expanded as a shell does (at most *limit*), each
    step spent with *spend* (a word of a thousand groups takes many)."""
    out: list[str] = []
    todo = [word]
    while todo and len(out) < limit:
        each = todo.pop()
        spend(1 + len(each) // 256)
        match = next((m for m in _BRACE.finditer(each) if "," in m[1]), None)
        if match is None:
            out.append(each)
            continue
        head, tail = each[: match.start()], each[match.end() :]
        alternatives = match[1].split(",", limit)[:limit]  # not 60,000 copies of a long word
        todo += reversed([head + alternative + tail for alternative in alternatives])
    return out


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
