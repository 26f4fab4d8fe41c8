"""Plan names a repository knows, so that ``--plan NAME`` with an unknown name is a usage error
that lists the known ones, in every command (not "no active plans", not an empty log)."""

from __future__ import annotations

import contextlib

import pygit2

from gitaudit.errors import GitAuditError, UsageError
from gitaudit.git.repo import Repo
from gitaudit.ledger.refs import PLANS_REF
from gitaudit.plan.request import worktree_names as request_names
from gitaudit.plan.store import discover_tree, discover_worktree

_RUNS = "refs/audit/runs/"


def known_plans(repo: Repo) -> list[str]:
    """Every plan name the repository holds: plan and request files of the work tree (plan
    files of HEAD's tree in a bare repository), plans and requests ever sealed on
    refs/audit/plans, and plans with recorded runs.

    Only names are read (no signature is checked): this decides which message to give, never a
    verdict."""
    names: set[str] = set()
    with contextlib.suppress(GitAuditError):
        if repo.workdir is not None:
            names |= {f.name for f in discover_worktree(repo.workdir)}
            names |= set(request_names(repo.workdir))
        elif not repo.git.head_is_unborn:
            names |= {f.name for f in discover_tree(repo.git, repo.git.head.peel().tree, None)}
    names |= {r.removeprefix(_RUNS) for r in repo.git.references if r.startswith(_RUNS)}
    with contextlib.suppress(KeyError, pygit2.GitError):
        tree = repo.git.revparse_single(f"{PLANS_REF}^{{tree}}")
        for folder in ("seals", "request-seals"):
            with contextlib.suppress(KeyError):
                seals = repo.git[tree[folder].id] if isinstance(tree, pygit2.Tree) else None
                if isinstance(seals, pygit2.Tree):
                    names |= {
                        (e.name or "").removesuffix(".json")
                        for e in seals
                        if (e.name or "").endswith(".json")
                    }
    return sorted(names)


def require_known(repo: Repo, name: str | None) -> None:
    """Nothing when *name* is None or known; else a usage error naming the known plans."""
    if name is None:
        return
    known = known_plans(repo)
    if name in known:
        return
    raise UsageError(
        f"no plan named {name!r} (known plans: {', '.join(known) or 'none'})",
        hint="check the name; `git audit plan validate` lists the plans of the work tree"
        if known
        else "create one with `git audit init`",
    )
