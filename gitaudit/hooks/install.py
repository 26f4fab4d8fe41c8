"""Installing gitaudit into a repository: hook shims and the audit refspecs.

The shim (``hooks/gitaudit-hook.sh`` in the source tree) carries a marker so it is recognised and
upgraded; an existing foreign hook is kept as ``<name>.legacy`` and still runs first;
uninstalling restores it. ``core.hooksPath`` is honoured.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from importlib import resources
from pathlib import Path

from gitaudit.errors import HookError
from gitaudit.frozen import frozen
from gitaudit.git.repo import Repo
from gitaudit.ledger.refs import fetch_refspec
from gitaudit.places import require_code_outside

MARKER = "gitaudit-hook-shim"
CLIENT_HOOKS = ("pre-push", "commit-msg")
SERVER_HOOKS = ("pre-receive",)
# Before 0.2, `init` installed this: git then treated refs/audit/* as its own remote-tracking
# refs, so every `git push` of them wrote the pushed value back into the local ref afterwards,
# silently rewinding a ledger that had moved during the push (and a non-forced fetch failed once
# the ledgers diverged). It is replaced wherever it is found.
LEGACY_REFSPEC = "refs/audit/*:refs/audit/*"


@frozen
class Action:
    what: str
    path: str
    done: str  # installed | upgraded | current | kept-legacy | removed | restored | absent


def shim_template() -> str:
    """The shim text: packaged in the wheel, or read from the source tree in a development
    install."""
    packaged = resources.files("gitaudit").joinpath("_shims/gitaudit-hook.sh")
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    source = Path(__file__).resolve().parents[2] / "hooks" / "gitaudit-hook.sh"
    try:
        return source.read_text(encoding="utf-8")
    except OSError as exc:
        raise HookError(f"the hook shim is missing from this installation ({exc})") from None


def shim_text(python: str | None = None) -> str:
    interpreter = python or sys.executable
    return shim_template().replace("'@PYTHON@'", shlex.quote(interpreter))


def hooks_dir(repo: Repo) -> Path:
    configured = repo.config("core.hooksPath")
    if configured:
        path = Path(os.path.expanduser(configured))
        if not path.is_absolute():
            path = (repo.workdir or repo.gitdir) / path
        return path
    return repo.gitdir / "hooks"


def _is_ours(path: Path) -> bool:
    try:
        return MARKER in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.gitaudit-tmp")
    tmp.write_text(text, encoding="utf-8")
    os.chmod(tmp, 0o755)  # noqa: S103 - a hook must be executable by git
    os.replace(tmp, path)


def install_hooks(repo: Repo, *, server: bool = False) -> list[Action]:
    """Write gitaudit's hook shims into the repository's hooks folder (see the module
    docstring); HookError, before anything is written, when gitaudit runs from inside the work
    tree (:func:`gitaudit.places.require_code_outside`)."""
    require_code_outside(repo.workdir)
    names = SERVER_HOOKS if server else CLIENT_HOOKS
    folder = hooks_dir(repo)
    folder.mkdir(parents=True, exist_ok=True)
    text = shim_text()
    actions = []
    for name in names:
        path = folder / name
        if path.is_symlink() or path.exists():
            if _is_ours(path) and not path.is_symlink():
                if path.read_text(encoding="utf-8") == text:
                    actions.append(Action(name, str(path), "current"))
                    continue
                _write(path, text)
                actions.append(Action(name, str(path), "upgraded"))
                continue
            legacy = path.with_name(f"{name}.legacy")
            if legacy.exists() or legacy.is_symlink():
                raise HookError(
                    f"{path} exists and so does {legacy}; not overwriting either",
                    hint="merge or remove one of them, then install again",
                )
            os.replace(path, legacy)
            _write(path, text)
            actions.append(Action(name, str(path), "kept-legacy"))
            continue
        _write(path, text)
        actions.append(Action(name, str(path), "installed"))
    return actions


def uninstall_hooks(
    repo: Repo, names: tuple[str, ...] = (*CLIENT_HOOKS, *SERVER_HOOKS)
) -> list[Action]:
    folder = hooks_dir(repo)
    actions = []
    for name in names:
        path = folder / name
        legacy = path.with_name(f"{name}.legacy")
        if not (path.exists() and _is_ours(path)):
            continue
        path.unlink()
        if legacy.exists() or legacy.is_symlink():
            os.replace(legacy, path)
            actions.append(Action(name, str(path), "restored"))
        else:
            actions.append(Action(name, str(path), "removed"))
    return actions


def shim_python(path: Path) -> str | None:
    """The interpreter an installed gitaudit shim runs (its ``PYTHON=`` line), if readable."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = re.search(r"^PYTHON=(.*)$", text, re.MULTILINE)
    if not match:
        return None
    try:
        words = shlex.split(match.group(1))
    except ValueError:
        return None
    return words[0] if len(words) == 1 else None


def hook_states(repo: Repo) -> dict[str, str]:
    """For each hook: current, outdated (an older gitaudit shim), foreign, or absent.

    A shim that is current but runs another environment's Python (a server's hook installed
    with its own virtual environment's ``git-audit``) is current; ``missing-python`` when that
    interpreter no longer exists."""
    folder = hooks_dir(repo)
    states = {}
    for name in (*CLIENT_HOOKS, *SERVER_HOOKS):
        path = folder / name
        if not path.exists():
            states[name] = "absent"
        elif not _is_ours(path):
            states[name] = "foreign"
        else:
            python = shim_python(path) or sys.executable
            if path.read_text(encoding="utf-8") != shim_text(python):
                states[name] = "outdated"
            elif not os.access(python, os.X_OK):
                states[name] = "missing-python"
            else:
                states[name] = "current"
    return states


def configure_fetch(repo: Repo) -> list[Action]:
    """Make ``git fetch`` bring every remote's audit refs into its remote-tracking namespace
    (:func:`fetch_refspec`), replacing the legacy ``refs/audit/*:refs/audit/*`` refspec."""
    actions = []
    for remote in [str(r.name) for r in repo.git.remotes]:
        key = f"remote.{remote}.fetch"
        wanted = fetch_refspec(remote)
        current = [str(v) for v in repo.git.config.get_multivar(key)]
        legacy = [v for v in current if v.lstrip("+") == LEGACY_REFSPEC]
        for value in legacy:
            repo.git.config.delete_multivar(key, "^" + re.escape(value) + "$")
        if wanted in current:
            actions.append(Action(f"fetch refspec for {remote}", wanted, "current"))
            continue
        repo.git.config.set_multivar(key, "^$", wanted)
        done = "upgraded" if legacy else "installed"
        actions.append(Action(f"fetch refspec for {remote}", wanted, done))
    return actions


def fetch_states(repo: Repo) -> dict[str, str]:
    """For each remote: current, legacy (the pre-0.2 refspec) or absent."""
    states = {}
    for remote in [str(r.name) for r in repo.git.remotes]:
        current = [str(v) for v in repo.git.config.get_multivar(f"remote.{remote}.fetch")]
        if fetch_refspec(remote) in current:
            states[remote] = "current"
        elif any(v.lstrip("+") == LEGACY_REFSPEC for v in current):
            states[remote] = "legacy"
        else:
            states[remote] = "absent"
    return states
