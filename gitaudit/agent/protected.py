"""The files the guard protects because the plans' checks run them: :func:`protection`.

The rules are the seal's own (:mod:`gitaudit.plan.protect`), so the guard refuses exactly the
edits the gate would call ``plan.protected-changed``, and leaves the work itself (what a check
only inspects, or a script a plan exempts with ``"!path"``) free to change. The plans are read
both from the work tree and as sealed on ``refs/audit/plans`` (one ``git`` call; signatures are
the gate's business, the guard only advises), and read leniently: a plan the loader would
refuse still protects what its checks name.

Standard library only (plus gitaudit's pure plan model): the guard runs before every edit.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterator
from typing import Any, cast

from gitaudit.frozen import frozen
from gitaudit.git.call import run_git
from gitaudit.plan.model import Check, CheckType
from gitaudit.plan.protect import Patterns, patterns_of

PLANS_DIR = ".gitaudit/plans"  # as gitaudit.plan.store.PLANS_DIR (which imports pygit2)
PLANS_REF = "refs/audit/plans"
MAX_PLAN_BYTES = 4 << 20


@frozen
class Protection:
    """What the plans of a work tree protect: one set of rules per plan document."""

    plans: tuple[Patterns, ...]

    def why(self, rel: str) -> str | None:
        """Why the tree path *rel* is protected (None: it is not); a plan's exemption only
        frees what that plan protects."""
        for rules in self.plans:
            reason = rules.why(rel)
            if reason is not None:
                return reason
        return None


def protection(root: str) -> Protection:
    """The protection of the work tree *root*, from its plans and the sealed ones."""
    return Protection(tuple(_rules(doc) for doc in _plan_docs(root)))


def _rules(doc: dict[str, Any]) -> Patterns:
    found = doc.get("protect")
    protect = (
        [g.strip() for g in found if isinstance(g, str) and g.strip()]
        if isinstance(found, list)
        else []
    )
    return patterns_of(protect, [c for raw in _checks(doc) if (c := _check(raw)) is not None])


def _check(raw: dict[str, Any]) -> Check | None:
    """A raw check as the loader would build it, as far as protection needs (None: not a
    check that runs anything)."""
    kind = raw.get("type")
    if kind not in ("run", "exec", "pytest"):
        return None
    cwd = raw.get("cwd") if isinstance(raw.get("cwd"), str) else None
    cmd = raw.get("cmd") if isinstance(raw.get("cmd"), str) else None
    shell = raw.get("shell") is True
    argv = _strings(raw.get("argv"))
    if kind == "run" and not argv and cmd and not shell:
        argv = _split(cmd)
    if kind == "pytest" and not argv:
        args = raw.get("args")
        argv = _split(args) if isinstance(args, str) else _strings(args)
    path = raw.get("path") if isinstance(raw.get("path"), str) else None
    args = _strings(raw.get("args")) if kind == "exec" else ()
    return Check(
        type=cast(CheckType, kind),
        json_path="",
        argv=argv,
        cmd=cmd,
        shell=shell,
        path=path,
        args=args,
        cwd=cwd,
    )


def _strings(value: object) -> tuple[str, ...]:
    return tuple(w for w in value if isinstance(w, str)) if isinstance(value, list) else ()


def _split(text: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(text))
    except ValueError:
        return tuple(text.split())


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
