"""Which files of a tree a plan protects: the check surfaces an agent must not quietly rewrite.

The seal binds the check commands; these rules extend it to the files the commands run. A plan's
protected set is, in a given tree:

* every file its ``protect`` globs match (git's ``:(glob)`` pathspec rules: ``*`` and ``?`` stay
  within one folder, ``**`` spans folders, a path without wildcards also names everything below
  it);
* every file of the tree a ``run`` or ``exec`` check runs, relative to its ``cwd``: the program
  when it is a path (``./scripts/check.sh``; the ``exec`` path, which runs from the root whatever
  the ``cwd``), the script an interpreter runs
  (``sh scripts/check.sh``, ``python tools/check.py``, ``python -m tools.check`` with the
  ``__init__.py`` of its parent packages and of a package ``tools/check/``), and the value
  of every ``--option=value`` (configuration and pattern files). The other operands (``grep -q
  hello greeting.txt``) are what the check inspects, usually the work itself, and are not
  protected by default; a script that is the work (``python3 greeter.py``) is exempted with
  ``"!greeter.py"``;
* for ``pytest`` checks, the files that steer pytest (``conftest.py`` at any depth,
  ``pytest.toml``, ``.pytest.toml``, ``pytest.ini``, ``.pytest.ini``, ``pyproject.toml``,
  ``setup.cfg``, ``tox.ini``, in the check's ``cwd``, the test paths' folders and every folder
  above them) and the test paths the check passes (a folder: every file below it); with no
  test path, pytest's own discovery patterns (``test_*.py``, ``*_test.py`` at any depth);

* the files a well-known tool reads when a ``run`` check starts it in its ``cwd`` (``make``:
  the makefiles; ``npm``, ``yarn``, ``pnpm``: ``package.json``; ``tox``, ``nox``, ``cargo``,
  ``go``, ``just``: theirs), and the configuration ``npm``, ``pnpm``, ``yarn`` and ``cargo``
  look for there and in every folder above (``.npmrc``, ``.yarnrc``, ``.yarnrc.yml``,
  ``.cargo/config.toml``); ``python -m pytest`` is read like a ``pytest`` check;
* **module shadowing**: where a check starts Python (a ``pytest`` check, ``python -m``/``-c``: the
  check's ``cwd``; ``python script.py``: the script's folder), that folder comes first on
  ``sys.path``, so a file or package there named like a module of the standard library or of
  pytest (``pytest.py``, ``json/``, ``_pytest/``) would replace it. Those names are protected in
  that folder (:data:`SHADOWED`, frozen so every machine computes the same set);

less every file a ``protect`` entry starting with ``!`` matches (an exemption: removing
protection, so sealing one is a weakening). Everything here is pure: the caller lists the tree.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from collections.abc import Callable, Iterable
from functools import lru_cache

from gitaudit.frozen import frozen
from gitaudit.plan.model import Check, Plan

# every file pytest takes its configuration from, in a folder and above (pytest 9 reads
# `pytest.toml` and `.pytest.toml` before the others of the same folder)
PYTEST_CONFIG = (
    "pytest.toml",
    ".pytest.toml",
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
)
PYTEST_DISCOVERY = ("**/test_*.py", "**/*_test.py")
TOOL_FILES: dict[str, tuple[str, ...]] = {
    "make": ("Makefile", "makefile", "GNUmakefile"),
    "gmake": ("Makefile", "makefile", "GNUmakefile"),
    "npm": ("package.json",),
    "yarn": ("package.json",),
    "pnpm": ("package.json",),
    "tox": ("tox.ini", "pyproject.toml", "setup.cfg"),
    "nox": ("noxfile.py",),
    "cargo": ("Cargo.toml",),
    "go": ("go.mod",),
    "just": ("justfile", "Justfile", ".justfile"),
}
# configuration those tools look for in their folder and every folder above it, which changes
# what they run: `script-shell=/bin/true` in an `.npmrc` makes every `npm test` pass, and a
# cargo `runner = "true"` every test binary
TOOL_CONFIG: dict[str, tuple[str, ...]] = {
    "npm": (".npmrc",),
    "pnpm": (".npmrc",),
    "yarn": (".npmrc", ".yarnrc", ".yarnrc.yml"),
    "cargo": (".cargo/config.toml", ".cargo/config"),
}
PYTHON = re.compile(r"python(?:\d+(?:\.\d+)*)?")


def _shadowed() -> frozenset[str]:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shadowed_modules.txt")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    return frozenset(
        line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")
    )


SHADOWED = _shadowed()


@frozen
class Patterns:
    """What a plan protects, before a tree is looked at: globs to include, exact candidate
    paths (protected only when they are files of the tree), and exemptions."""

    globs: tuple[str, ...]
    candidates: tuple[str, ...]
    exempt: tuple[str, ...]
    python_roots: tuple[str, ...] = ()  # folders ("" the root) first on a check's sys.path

    def shadows(self, path: str) -> bool:
        """Whether *path* would shadow a protected module name in a Python root."""
        for root in self.python_roots:
            rest = path[len(root) + 1 :] if root else path
            if root and not path.startswith(root + "/"):
                continue
            if rest.split("/", 1)[0].split(".", 1)[0] in SHADOWED:
                return True
        return False

    def selects(self, path: str) -> bool:
        """Whether *path*, a file of the tree, is protected (exact candidates are checked by the
        caller, which knows which paths are files)."""
        if any(matches(p, path) for p in self.exempt):
            return False
        return (
            path in self.candidates
            or any(matches(p, path) for p in self.globs)
            or self.shadows(path)
        )

    def why(self, path: str) -> str | None:
        """Why *path* is protected (None: it is not), in words for a refusal message."""
        if any(matches(p, path) for p in self.exempt):
            return None
        if path in self.candidates:
            return "a check runs or reads it as its own file"
        for glob in self.globs:
            if matches(glob, path):
                return f"it matches `{glob}`"
        if self.shadows(path):
            return "it would shadow a module the checks' Python imports"
        return None

    @property
    def empty(self) -> bool:
        return not (self.globs or self.candidates or self.python_roots)

    @property
    def needs_listing(self) -> bool:
        """Whether the whole tree must be listed (globs or shadowing), not just candidates."""
        return bool(self.globs or self.python_roots)


def _clean(path: str) -> str | None:
    """A tree-relative POSIX path, or None for one that leaves the tree."""
    if not path or path.startswith("/"):
        return None
    normal = posixpath.normpath(path)
    if normal in (".", "") or normal.startswith("../") or normal == "..":
        return None
    return normal


@lru_cache(maxsize=512)
def _regex(pattern: str) -> re.Pattern[str]:
    out = []
    parts = pattern.split("/")
    for n, part in enumerate(parts):
        last = n == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        out.append(_segment(part) + ("" if last else "/"))
    return re.compile("(?s:" + "".join(out) + r")\Z")


def _segment(part: str) -> str:
    """One path segment of a glob as a regex: ``*`` and ``?`` never cross a ``/``."""
    out, i = [], 0
    while i < len(part):
        ch = part[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[" and (end := part.find("]", i + 2)) != -1:
            body = part[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append(f"[{body.replace(chr(92), chr(92) * 2)}]")
            i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def matches(pattern: str, path: str) -> bool:
    """Whether *path* matches a protect *pattern* (see the module docstring)."""
    pattern = pattern.strip().removeprefix("./")
    if not any(ch in pattern for ch in "*?["):
        plain = pattern.rstrip("/")
        return path == plain or path.startswith(plain + "/")
    return _regex(pattern).match(path) is not None


INTERPRETERS = re.compile(
    r"(?:ba|da|k|z)?sh|python(?:\d+(?:\.\d+)*)?|node|deno|bun|perl|ruby|php|Rscript|lua|tclsh|pwsh"
)
SHELLS = re.compile(r"(?:ba|da|k|z)?sh")
# per interpreter (a shell, a python, else its name): the options whose argument is code to run
# (no script file follows), and those whose argument is the next word (not the script): a
# shell's -e is errexit, and `python3 -W error tools/check.py` runs tools/check.py, not `error`
INLINE_CODE = {
    "shell": ("-c",),
    "python": ("-c",),
    "perl": ("-e", "-E"),
    "ruby": ("-e",),
    "node": ("-e", "--eval", "-p", "--print"),
    "bun": ("-e", "--eval", "-p", "--print"),
    "php": ("-r",),
    "Rscript": ("-e",),
    "lua": ("-e",),
    "pwsh": ("-c", "-Command", "-command"),
}
TAKES_A_VALUE = {
    "shell": ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"),
    "python": ("-W", "-X", "--check-hash-based-pycs"),
    "ruby": ("-I", "-r", "-C", "-E"),
    "node": ("-r", "--require", "--import", "--loader", "--experimental-loader", "-C"),
    "lua": ("-l",),
    "php": ("-c", "-d", "-z"),
}


def _family(program: str) -> str:
    name = posixpath.basename(program)
    return "shell" if SHELLS.fullmatch(name) else "python" if PYTHON.fullmatch(name) else name


def _reads_option(family: str, word: str) -> tuple[bool, bool]:
    """(its argument is code to run, the next word is its argument) for the option *word*."""
    inline, value = INLINE_CODE.get(family, ()), TAKES_A_VALUE.get(family, ())
    if family == "shell" and len(word) > 2 and word[0] in "-+" and word[1:].isalpha():
        return "c" in word[1:], word[-1] in "oO"  # a cluster: -ec runs code, -eo takes a value
    return word in inline, word in value


def _argv_paths(check: Check) -> Iterable[str]:
    """The words of a run/exec check that name what it runs (relative to its cwd): the program
    when it is a path, the script an interpreter runs (its first operand; ``python -m a.b``:
    ``a/b.py``, ``a/b/__main__.py``, and the ``__init__.py`` of ``a`` and of a package ``a/b``),
    and every ``--option=value`` value (a configuration or
    pattern file). Other operands are what the check inspects, usually the work itself; a plan
    protects them with ``protect`` when they are fixtures."""
    words = _words(check)
    if not words or not words[0]:
        return
    program, rest = words[0], words[1:]
    if "/" in program and check.type == "run":
        yield program  # an exec path is the root's, not the cwd's: see patterns_of
    interpreter = INTERPRETERS.fullmatch(posixpath.basename(program)) is not None
    family = _family(program)
    operand_seen = not interpreter
    value_next = False
    for i, word in enumerate(rest):
        if value_next:  # an option's argument, not the script
            value_next = False
            continue
        if word.startswith("-") or (family == "shell" and word[:1] == "+" and len(word) > 1):
            _option, eq, value = word.partition("=")
            if eq and value and word.startswith("--"):
                yield value
            code, value_next = _reads_option(family, word) if not operand_seen else (False, False)
            if code:
                operand_seen = True  # inline code: no script file
            elif not operand_seen and word == "-m" and i + 1 < len(rest):
                yield from _module_files(rest[i + 1])
                operand_seen = True
            continue
        if not operand_seen:
            operand_seen = True
            yield word


# programs that run the command after their options (and, for some, one operand) unchanged:
# per wrapper, its options whose argument is the next word, and how many operands come before
# the command (`timeout 60 CMD`); `env` also takes NAME=VALUE words
WRAPPERS: dict[str, tuple[tuple[str, ...], int]] = {
    "env": (("-u", "--unset", "-C", "--chdir", "-S", "--split-string"), 0),
    "nohup": ((), 0),
    "setsid": ((), 0),
    "time": (("-f", "--format", "-o", "--output"), 0),
    "nice": (("-n", "--adjustment"), 0),
    "ionice": (("-c", "--class", "-n", "--classdata", "-p", "-P", "-u"), 0),
    "stdbuf": (("-i", "-o", "-e", "--input", "--output", "--error"), 0),
    "timeout": (("-s", "--signal", "-k", "--kill-after"), 1),
}


def _unwrapped(words: list[str]) -> list[str]:
    """*words* past the wrappers in front (``env python3 tools/check.py``, ``timeout 60 sh
    check.sh``): the command they run, whose files are the check's own."""
    while words and posixpath.basename(words[0]) in WRAPPERS:
        takes_value, operands = WRAPPERS[posixpath.basename(words[0])]
        rest = words[1:]
        while rest and (
            (rest[0].startswith("-") and rest[0] != "-")
            or (words[0].endswith("env") and "=" in rest[0])
        ):
            word = rest.pop(0)
            if word == "--":
                break
            if word in takes_value and rest:
                rest.pop(0)
        words = rest[operands:]
    return words


def _words(check: Check) -> list[str]:
    """The program and its arguments as a run or exec check names them (a shell command's
    first simple command), past the wrappers in front (:func:`_unwrapped`)."""
    if check.type == "run" and check.shell and check.cmd:
        return _unwrapped(_shell_words(check.cmd))
    if check.type == "run":
        return _unwrapped(list(check.argv))
    if check.type == "exec":
        return [check.path or "", *check.args]
    return []


def _module_files(name: str) -> Iterable[str]:
    """The files ``python -m name`` runs: the module, or its package's ``__main__``, and what
    runs first, or instead: each parent package's ``__init__`` is imported before the module,
    and a package of the module's name is taken before the module."""
    module = name.replace(".", "/")
    yield f"{module}.py"
    yield f"{module}/__main__.py"
    yield f"{module}/__init__.py"
    parts = module.split("/")[:-1]
    yield from ("/".join(parts[: n + 1]) + "/__init__.py" for n in range(len(parts)))


def _shell_words(cmd: str) -> list[str]:
    """The words of a shell command line, as far as they can be read without a shell (the
    first simple command: what runs before any ``;``, ``&&``, ``|``...)."""
    try:
        lexer = shlex.shlex(cmd, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        words = cmd.split()
    first: list[str] = []
    for word in words:
        if word and all(ch in "();<>|&" for ch in word):
            break
        first.append(word)
    return first


def _under(cwd: str | None, path: str) -> str | None:
    return _clean(posixpath.join(cwd or "", path))


def _ancestors(folder: str | None) -> list[str]:
    """*folder* and every folder above it up to the root ("" the root), deepest first."""
    out, here = [], folder or ""
    while here:
        out.append(here)
        here = posixpath.dirname(here)
    return [*out, ""]


# pytest's options (and common plugins') whose argument is the next word: never a test path
PYTEST_VALUE_OPTIONS = frozenset(
    [
        "-k",
        "-m",
        "-p",
        "-o",
        "-W",
        "-r",
        "-n",
        "--tb",
        "--maxfail",
        "--rootdir",
        "--basetemp",
        "--confcutdir",
        "--deselect",
        "--ignore",
        "--ignore-glob",
        "--junitxml",
        "--junit-xml",
        "--junit-prefix",
        "--durations",
        "--durations-min",
        "--log-level",
        "--log-file",
        "--log-file-level",
        "--log-cli-level",
        "--log-format",
        "--log-date-format",
        "--color",
        "--capture",
        "--import-mode",
        "--override-ini",
        "--cov",
        "--cov-report",
        "--cov-config",
        "--cov-fail-under",
        "--timeout",
        "--dist",
        "--numprocesses",
        "--maxprocesses",
        "--reruns",
        "--reruns-delay",
    ]
)
PYTEST_CONFIG_OPTIONS = ("-c", "--config-file")  # their argument is a configuration file


def _pytest_words(argv: Iterable[str]) -> tuple[list[str], list[str]]:
    """(test paths, configuration files) of pytest's arguments *argv*, as written (``a/test_x.py
    ::t`` -> the file). An option's argument (``-k "not slow"``, ``-p no:cacheprovider``) is no
    test path: read as one, the discovery patterns were dropped and no test was protected."""
    tests: list[str] = []
    configs: list[str] = []
    words = iter(argv)
    for word in words:
        option, eq, value = word.partition("=")
        if option in PYTEST_CONFIG_OPTIONS:
            configs += [value] if eq else [next(words, "")]
        elif word in PYTEST_VALUE_OPTIONS:
            next(words, None)
        elif not word.startswith("-"):
            tests.append(word.split("::", 1)[0])
    return tests, [c for c in configs if c]


def _test_words(argv: Iterable[str]) -> list[str]:
    """The test paths of pytest's arguments *argv*, as written (see :func:`_pytest_words`)."""
    return _pytest_words(argv)[0]


def _pytest(cwd: str | None, argv: Iterable[str]) -> tuple[list[str], list[str]]:
    """(globs, candidates) that steer or make up a pytest run in *cwd* with *argv*: conftest
    files, the configuration pytest may pick up (in the check's folder, the test paths' folders,
    and every folder above them) and the tests."""
    globs = ["**/conftest.py"]
    tests = []
    words, configs = _pytest_words(argv)
    for word in words:
        target = _under(cwd, word)
        if target:
            tests.append(target)
    folders = {cwd or ""} | {posixpath.dirname(t) for t in tests} | set(tests)
    candidates = [
        posixpath.join(folder, name)
        for start in sorted(folders)
        for folder in _ancestors(start)
        for name in PYTEST_CONFIG
    ]
    candidates += [c for config in configs if (c := _under(cwd, config))]
    globs += tests or [_under(cwd, p) or p for p in PYTEST_DISCOVERY]
    return globs, candidates


def _program(check: Check) -> str:
    words = _unwrapped(list(check.argv)) if check.type == "run" else []
    if words:
        return posixpath.basename(words[0])
    return posixpath.basename(check.path or "") if check.type == "exec" else ""


def _python_run(check: Check) -> tuple[str | None, tuple[str, ...] | None]:
    """For a ``run`` check that starts Python: the folder first on its ``sys.path`` (None when
    ``-I``/``-P`` keep it off) and, for ``python -m pytest``, pytest's arguments."""
    argv = tuple(_unwrapped(list(check.argv))) if check.type == "run" else ()
    if not argv or not PYTHON.fullmatch(posixpath.basename(argv[0])):
        return None, None
    cwd = _clean(check.cwd or ".") or ""
    safe = False
    value_next = False
    for i, word in enumerate(argv[1:], start=1):
        if value_next:  # an option's argument (-W error), not the script
            value_next = False
        elif word in TAKES_A_VALUE["python"]:
            value_next = True
        elif word in ("-I", "-P"):
            safe = True
        elif word == "-m" and i + 1 < len(argv):
            pytest_args = argv[i + 2 :] if argv[i + 1] == "pytest" else None
            return (None if safe else cwd), pytest_args
        elif word == "-c":
            return (None if safe else cwd), None
        elif not word.startswith("-"):
            script = _under(check.cwd, word)
            return (posixpath.dirname(script) if script and not safe else None), None
    return (None if safe else cwd), None


def climbing_paths(check: Check) -> tuple[str, ...]:
    """The paths of *check*'s own files as it spells them, joined to its ``cwd`` but not
    normalised, for those with a ``..`` component. The protected set names each file by its
    path read lexically (``app/../scripts/check.py`` is ``scripts/check.py``), while the
    system climbs a ``..`` out of where a link led (``app -> lib/app``: ``lib/scripts/...``),
    so the check must be refused a link before a ``..`` (:func:`gitaudit.checks.paths.
    link_climbed`)."""
    words = list(_argv_paths(check))
    if check.type == "pytest":
        words += _test_words(check.argv)
    else:
        pytest_args = _python_run(check)[1]
        words += _test_words(pytest_args) if pytest_args is not None else []
    joined = (posixpath.join(check.cwd or "", word) for word in words)
    # an absolute path names no file of the tree (nor one the seal protects)
    return tuple(dict.fromkeys(p for p in joined if ".." in p.split("/") and p[:1] != "/"))


def patterns(plan: Plan) -> Patterns:
    """What *plan* protects (see the module docstring)."""
    checks = [
        check
        for step in plan.steps
        for check in (*step.verify, *step.readback, *(c for o in step.outputs for c in o.checks))
    ]
    return patterns_of(plan.protect, checks)


def patterns_of(protect: Iterable[str], checks: Iterable[Check]) -> Patterns:
    """What a plan with these ``protect`` entries and *checks* protects."""
    globs: list[str] = []
    candidates: list[str] = []
    exempt: list[str] = []
    roots: list[str] = []
    for entry in protect:
        (exempt if entry.startswith("!") else globs).append(entry.removeprefix("!"))
    for check in checks:
        if check.type == "pytest":
            more_globs, more = _pytest(check.cwd, check.argv)
            globs += more_globs
            candidates += more
            roots.append(_clean(check.cwd or ".") or "")
            continue
        if check.type == "exec" and (path := _clean(check.path or "")):
            candidates.append(path)  # confined from the root when it runs, whatever its cwd
        candidates += [p for w in _argv_paths(check) if (p := _under(check.cwd, w))]
        candidates += [
            p for name in TOOL_FILES.get(_program(check), ()) if (p := _under(check.cwd, name))
        ]
        candidates += [
            posixpath.join(folder, name)
            for name in TOOL_CONFIG.get(_program(check), ())
            for folder in _ancestors(_clean(check.cwd or ".") or "")
        ]
        root, pytest_args = _python_run(check)
        if root is not None:
            roots.append(root)
        if pytest_args is not None:
            more_globs, more = _pytest(check.cwd, pytest_args)
            globs += more_globs
            candidates += more
    return Patterns(
        tuple(dict.fromkeys(globs)),
        tuple(dict.fromkeys(candidates)),
        tuple(dict.fromkeys(exempt)),
        tuple(dict.fromkeys(roots)),
    )


def select(pats: Patterns, files: Iterable[str], is_file: Callable[[str], bool]) -> list[str]:
    """The protected paths among *files* (every file of a tree), sorted; candidates are taken
    when *is_file* says they are files of the tree even if *files* was cut short."""
    chosen = {p for p in files if any(matches(g, p) for g in pats.globs) or pats.shadows(p)}
    chosen |= {c for c in pats.candidates if is_file(c)}
    return sorted(p for p in chosen if not any(matches(x, p) for x in pats.exempt))
