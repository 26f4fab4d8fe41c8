"""The files the guard protects because checks run them: :func:`protected_paths`.

This is the guard's one source of "protected paths". For now it is computed here from the plans'
checks: every file of the work tree that a check names (an ``argv``/``args`` element, an
``exec`` path or a word of a ``cmd`` that resolves to a file in the tree, from the check's
``cwd``), and for ``pytest`` checks the files that steer pytest (``conftest.py`` at any depth,
``pytest.ini``, ``pyproject.toml``, ``setup.cfg``, ``tox.ini``) and the test paths the check
passes (a folder protects the test files pytest collects from it: ``test_*.py``,
``*_test.py``); a ``run`` check whose command is pytest counts as a pytest check. The plans
are read both from the work tree and as sealed on ``refs/audit/plans`` (one ``git`` call;
signatures are the gate's business, the guard only advises): protecting too much is harmless,
too little is not.

A plan's own ``protect`` globs are protected too (as written, and with ``*`` crossing folders).
When the seal records the protected set, point :func:`protected_paths` at that set; the guard
needs nothing else.

Standard library only: the guard runs before every edit.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterator
from typing import Any

from gitaudit.git.call import run_git

PLANS_DIR = ".gitaudit/plans"  # as gitaudit.plan.store.PLANS_DIR (which imports pygit2)
PLANS_REF = "refs/audit/plans"
PYTEST_STEERING = ("**/conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini")
PYTEST_COLLECTS = ("test_*.py", "*_test.py")  # pytest's default python_files
MAX_PLAN_BYTES = 4 << 20


def protected_paths(root: str) -> list[str]:
    """Glob patterns, relative to the work tree *root* (``/``-separated; ``*`` stays within a
    folder, ``**/`` spans any depth, ``dir/**`` is everything under ``dir``), of the files an
    agent must not edit because the plans' checks run them."""
    patterns: set[str] = set()
    for doc in _plan_docs(root):
        patterns.update(_declared(doc))
        for check in _checks(doc):
            patterns.update(_named_by(check, root))
    return sorted(patterns)


def _declared(doc: dict[str, Any]) -> set[str]:
    """The ``protect`` globs a plan declares, each as written and with every ``*`` also
    crossing folders (globs elsewhere in a plan, such as ``inputs``, let ``*`` match ``/``),
    and everything under what they name (a folder): protecting at least what the plan means."""
    found = doc.get("protect")
    globs = (
        [g.strip("/") for g in found if isinstance(g, str) and g.strip("/")]
        if isinstance(found, list)
        else []
    )
    widened = [(glob, re.sub(r"\*+", "**", glob)) for glob in globs]
    return {g for pair in widened for each in pair for g in (each, f"{each}/**")}


def matches(rel: str, patterns: list[str]) -> str | None:
    """The first of *patterns* the tree path *rel* matches, if any."""
    for pattern in patterns:
        if _regex(pattern).fullmatch(rel):
            return pattern
    return None


def _regex(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            chars = pattern[i + 1 : end]
            out.append("[" + "".join(c if c == "-" else re.escape(c) for c in chars) + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


# --------------------------------------------------------------------------------- the plans


def _plan_docs(root: str) -> Iterator[dict[str, Any]]:
    """Every plan document of the work tree and of the sealed plans ref (unparseable ones are
    skipped: the gate explains those)."""
    folder = os.path.join(root, PLANS_DIR)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        names = []
    for name in names:
        if name.endswith(".json"):
            try:
                with open(os.path.join(folder, name), "rb") as handle:
                    yield from _parsed(handle.read(MAX_PLAN_BYTES))
            except OSError:
                continue
    yield from _sealed_docs(root)


def _sealed_docs(root: str) -> Iterator[dict[str, Any]]:
    listing = run_git(["ls-tree", "-z", "--name-only", f"{PLANS_REF}:plans"], cwd=root, check=False)
    if listing.code != 0:
        return  # nothing sealed yet
    names = [n for n in listing.out.split("\0") if n.endswith(".json")]
    if not names:
        return
    batch = "".join(f"{PLANS_REF}:plans/{n}\n" for n in names).encode()
    proc = run_git(["cat-file", "--batch"], cwd=root, input=batch, check=False)
    data = proc.stdout
    while data:
        header, _, rest = data.partition(b"\n")
        parts = header.split()
        if len(parts) != 3:
            break
        size = int(parts[2])
        yield from _parsed(rest[:size])
        data = rest[size + 1 :]


def _parsed(data: bytes) -> Iterator[dict[str, Any]]:
    try:
        doc = json.loads(data)
    except ValueError:
        return
    if isinstance(doc, dict):
        yield doc


def _checks(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    steps = doc.get("steps")
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, dict):
            continue
        groups = [step.get("verify"), step.get("readback")]
        outputs = step.get("outputs")
        for output in outputs if isinstance(outputs, list) else []:
            if isinstance(output, dict):
                groups.append(output.get("verify"))
        for group in groups:
            for check in group if isinstance(group, list) else []:
                if isinstance(check, dict):
                    yield check


# -------------------------------------------------------------------------- what a check names


def _words(check: dict[str, Any]) -> list[str]:
    kind = check.get("type")
    words: list[str] = []
    for key in ("argv", "args"):
        value = check.get(key)
        if isinstance(value, list):
            words += [w for w in value if isinstance(w, str)]
        elif isinstance(value, str) and kind == "pytest":
            words += _split(value)
    if kind == "exec" and isinstance(check.get("path"), str):
        words.append(check["path"])
    if kind == "run" and isinstance(check.get("cmd"), str):
        words += _split(check["cmd"])
    return words


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _runs_pytest(check: dict[str, Any]) -> bool:
    """A ``pytest`` check, or a ``run`` check whose command is pytest (``python -m pytest``,
    ``pytest``, ``.venv/bin/pytest``)."""
    if check.get("type") == "pytest":
        return True
    words = _words(check) if check.get("type") == "run" else []
    return any(w == "pytest" or w.endswith("/pytest") or w == "py.test" for w in words[:4])


def _named_by(check: dict[str, Any], root: str) -> set[str]:
    kind = check.get("type")
    if kind not in ("run", "exec", "pytest"):
        return set()
    pytest = _runs_pytest(check)
    cwd = check["cwd"] if isinstance(check.get("cwd"), str) else ""
    real_root = os.path.realpath(root)
    found: set[str] = set(PYTEST_STEERING) if pytest else set()
    for word in _words(check):
        candidates = [word]
        if pytest:
            candidates.append(word.split("::", 1)[0])  # a node id names its file
        if "=" in word and word.startswith("-"):
            candidates.append(word.split("=", 1)[1])  # --rootdir=tests, --confcutdir=...
        for candidate in candidates:
            rel = _in_tree(real_root, cwd, candidate)
            if rel is None:
                continue
            full = os.path.join(real_root, rel)
            if os.path.isfile(full):
                found.add(_glob_escape(rel))
            elif pytest and os.path.isdir(full):
                # a folder: the files pytest collects from it
                under = "" if rel == "." else _glob_escape(rel) + "/"
                found.update(f"{under}**/{name}" for name in PYTEST_COLLECTS)
    return found


def _in_tree(real_root: str, cwd: str, word: str) -> str | None:
    """*word* as a path relative to the work tree, when it names something inside it."""
    if not word or word.startswith("-") or "\0" in word:
        return None
    base = os.path.join(real_root, cwd)
    path = os.path.realpath(os.path.join(base, word))
    if path != real_root and not path.startswith(real_root + os.sep):
        return None
    rel = os.path.relpath(path, real_root).replace(os.sep, "/")
    if rel == ".git" or rel.startswith(".git/"):
        return None
    return rel


def _glob_escape(rel: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", rel)
