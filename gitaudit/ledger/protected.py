"""The protected set of a plan in a tree, as the seal records it and the gate compares it.

A seal records the content of the files its plan protects (:mod:`gitaudit.plan.protect`) as a
manifest, ``protected/<name>.json`` on ``refs/audit/plans``: each file's mode and blob id, sorted
by path. The seal record binds the manifest by its digest, so changing either needs a new
signed seal. The gate computes the same set in the judged tree and compares: any protected file
changed, added or deleted is ``plan.protected-changed`` until a sealer amends the seal
(``git audit plan seal --amend``).
"""

from __future__ import annotations

from collections.abc import Mapping

import pygit2

from gitaudit.errors import SealError
from gitaudit.frozen import frozen
from gitaudit.ledger.objects import dumps, loads
from gitaudit.plan.digest import sha256
from gitaudit.plan.inputs import tree_files
from gitaudit.plan.model import Plan
from gitaudit.plan.protect import patterns, select

MANIFEST_FORMAT = "gitaudit.protected/1"

Files = Mapping[str, str]  # path -> "<octal mode> <blob id>"


def manifest_path(plan: str) -> str:
    return f"protected/{plan}.json"


def protected_files(repo: pygit2.Repository, tree: str, plan: Plan) -> dict[str, str]:
    """The files *plan* protects in *tree*, each as ``"<mode> <blob id>"``."""
    pats = patterns(plan)
    if pats.empty:
        return {}
    root = repo[pygit2.Oid(hex=tree)]
    assert isinstance(root, pygit2.Tree)
    if pats.needs_listing:
        listing = {path: (mode, oid) for path, mode, oid in tree_files(repo, tree)}
    else:  # only exact paths: look each up instead of listing the tree
        listing = {}
        for path in pats.candidates:
            try:
                entry = root[path]
            except (KeyError, ValueError):
                continue
            if entry.type_str == "blob":
                listing[path] = (entry.filemode, str(entry.id))
    chosen = select(pats, listing, lambda p: p in listing)
    return {p: f"{listing[p][0]:06o} {listing[p][1]}" for p in chosen}


def manifest(files: Files) -> bytes:
    return dumps({"format": MANIFEST_FORMAT, "files": dict(sorted(files.items()))})


def manifest_digest(files: Files) -> str:
    return sha256(manifest(files))


def parse_manifest(data: bytes, where: str) -> dict[str, str]:
    try:
        doc = loads(data)
        if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
            raise ValueError(f"not a {MANIFEST_FORMAT} document")
        files = doc.get("files")
        if not isinstance(files, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()
        ):
            raise ValueError("files must map paths to '<mode> <blob>'")
    except ValueError as exc:
        raise SealError(
            f"{where}: malformed protected-files manifest ({exc})",
            hint="manifests are written by `git audit plan seal`; restore the plans ref",
        ) from None
    return dict(files)


@frozen
class Changes:
    """How a tree's protected files differ from the sealed ones."""

    changed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.changed or self.added or self.deleted)

    def summary(self, limit: int = 8) -> str:
        parts = []
        for word, paths in (
            ("changed", self.changed),
            ("added", self.added),
            ("deleted", self.deleted),
        ):
            if paths:
                shown = ", ".join(paths[:limit]) + (
                    f" (+{len(paths) - limit})" if len(paths) > limit else ""
                )
                parts.append(f"{word}: {shown}")
        return "; ".join(parts)

    def paths(self) -> dict[str, tuple[str, ...]]:
        return {"changed": self.changed, "added": self.added, "deleted": self.deleted}


def differences(sealed: Files, now: Files) -> Changes:
    return Changes(
        tuple(sorted(p for p in sealed.keys() & now.keys() if sealed[p] != now[p])),
        tuple(sorted(now.keys() - sealed.keys())),
        tuple(sorted(sealed.keys() - now.keys())),
    )


def amendments(sealed: Files, now: Files, plan: Plan | None) -> Changes:
    """How manifest *now* amends *sealed*, the manifest recorded with *plan*: the differences
    ``git audit plan seal`` takes as an amendment, judged on manifests alone (a plans commit
    holds no work tree). A file protected before and after with other content, one gone from
    *now*, and one new to it that *plan*'s patterns protect (a file added to the tree, such as a
    ``conftest.py`` that skips every test). A file new to *now* that *plan* does not protect came
    with a new contract protecting more (the contract's business, judged as a strengthening);
    without *plan* (unreadable) every new file counts."""
    if plan is not None:
        protects = set(select(patterns(plan), now, lambda p: p in now))
        now = {p: v for p, v in now.items() if p in protects or p in sealed}
    return differences(sealed, now)
