"""The environment a check sees: an allow-list, what the sealed plan declares, and nothing else.

Whatever a check can read that the judged tree does not pin down is a way to make evidence say
something the tree does not. So a check gets:

* the allow-listed variables of the caller (:data:`ALLOWED`, and ``LC_*``), with ``PATH`` cleaned
  (:func:`gitaudit.pathsearch.checks_path`) of relative entries and of directories inside the
  repository or gitaudit's cache, whose private checkouts hold the tree's files at a path
  anyone can work out (a tool planted there by whoever edits the work tree would shadow the
  real one), and a program found on it through a link into those places refused
  (:func:`planted`); each program started by name is recorded with the executable found, which
  a judge where the run was made finds again (:mod:`gitaudit.pathsearch`);
* a private, empty ``HOME`` (unless the plan declares ``"home": "user"``) and a private
  ``TMPDIR``, so tools read neither the user's dotfiles nor gitaudit's keys and configuration;
* the variables the plan declares in ``pass_env`` (sealed, so part of the contract; a name, or a
  prefix ending in ``*``), each of which must be set;
* the check's own ``env`` values from the plan.

Python's bytecode cache is a folder of the private ``TMPDIR`` (``PYTHONPYCACHEPREFIX``), and
nothing is written to it (``PYTHONDONTWRITEBYTECODE``): a ``__pycache__`` file the tree holds is
never read in place of the source beside it, which the seal may protect.

Everything else is dropped: ``GITAUDIT_*``, ``GIT_*``, ``PYTHON*``, ``PYTEST_*``, ``SSH_AUTH_SOCK``
and the rest. The run record lists the names each check saw, and the values of declared ones.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from functools import cached_property
from pathlib import Path

from gitaudit.frozen import frozen
from gitaudit.pathsearch import checks_path, find
from gitaudit.places import cache_dir, inside
from gitaudit.plan.exposure import forbidden

ALLOWED = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME")
ALLOWED_PREFIXES = ("LC_",)


def declared(name: str, patterns: Iterable[str]) -> bool:
    """Whether *name* matches one of the plan's ``pass_env`` entries."""
    for pattern in patterns:
        if pattern.endswith("*"):
            if name.startswith(pattern[:-1]):
                return True
        elif name == pattern:
            return True
    return False


@frozen
class Sandbox:
    """Where a run's checks keep their private state, and what the plan lets them see."""

    home: Path | None  # None: the user's HOME (the plan declares "home": "user")
    tmp: Path
    pass_env: tuple[str, ...] = ()
    repository: tuple[Path, ...] = ()  # the work tree and git dir: never on a check's PATH
    opened: tuple[str, ...] = ()  # the declared ignored paths: links out the run itself makes
    caller: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    @cached_property
    def shared(self) -> tuple[dict[str, str], dict[str, str]]:
        """What every check of the run sees before its own ``env``, and the declared variables
        passed: worked out once a run (cleaning PATH resolves each entry: 0.3 ms a check)."""
        caller = self.caller
        env = {
            k: v
            for k, v in caller.items()
            if (k in ALLOWED or k.startswith(ALLOWED_PREFIXES)) and not forbidden(k)
        }
        passed = {
            k: v for k, v in caller.items() if declared(k, self.pass_env) and not forbidden(k)
        }
        env.update(passed)
        env["PATH"] = checks_path(
            env.get("PATH", os.defpath), self.repository, caller.get("GIT_EXEC_PATH")
        )
        if self.home is not None:
            env["HOME"] = str(self.home)
        elif "HOME" in caller:
            env["HOME"] = caller["HOME"]
        for name in ("TMPDIR", "TMP", "TEMP"):
            env[name] = str(self.tmp)
        env.setdefault("PYTHONDONTWRITEBYTECODE", "1")  # keep __pycache__ out of the checked tree
        # and never read the tree's: a committed unchecked-hash .pyc (or one stamped with a kept
        # checkout's times) beside a protected source ran in its place (pytest's cache too)
        env.setdefault("PYTHONPYCACHEPREFIX", str(self.tmp / "pycache"))
        return env, passed


@frozen
class Environment:
    variables: dict[str, str]
    missing: tuple[str, ...]  # declared names the caller does not have
    declared: dict[str, str]  # the declared variables passed, with their values

    def record(self) -> dict[str, object]:
        """What the run record keeps: every name the check saw, values of declared ones."""
        return {"names": sorted(self.variables), "declared": dict(sorted(self.declared.items()))}


def check_environment(sandbox: Sandbox, extra: Mapping[str, str]) -> Environment:
    """The environment of one check (see the module docstring)."""
    shared, passed = sandbox.shared
    env = {**shared, **extra}
    caller = sandbox.caller
    missing = tuple(
        p for p in sandbox.pass_env if not p.endswith("*") and p not in caller and p not in extra
    )
    return Environment(env, missing, dict(passed))


def planted(program: str, executable: str | None, repository: Sequence[Path]) -> str | None:
    """Why *executable*, which the check's PATH found for *program*, must not run: it lies in
    the repository or gitaudit's cache though no PATH entry does (a link elsewhere leads
    there: the tree's own ``bin/python3`` would run as the system's). None when it may; a
    program named by a path (a file of the tree the plan names) is the plan's choice."""
    if executable is None or os.sep in program or not inside(executable, *repository, cache_dir()):
        return None
    return (
        f"{program!r} on the checks' PATH leads to {executable}, a file of the repository or "
        "of its private checkout: a planted tool would run in place of the real one"
    )


def resolve(program: str, env: Mapping[str, str], cwd: Path) -> str | None:
    """The executable a check's ``argv[0]`` names, as the check's own PATH resolves it (a name
    with a slash is relative to the check's directory)."""
    if os.sep in program:
        path = program if os.path.isabs(program) else os.path.join(cwd, program)
        return os.path.realpath(path) if os.access(path, os.X_OK) else None
    return find(program, env.get("PATH", ""))
