"""A sealed, trusted repository ready for `git audit run`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gitaudit.crypto.signers import Ed25519Signer
from gitaudit.git.repo import Repo, open_repo
from gitaudit.ledger.seals import seal_plan, trust_init
from gitaudit.plan.catalog import check_worktree
from tests.gitrepo import GitRepo, audit

Sealer = Callable[..., Repo]


def run_step(
    sid: str,
    *argv: str,
    deps: list[str] | None = None,
    outputs: dict[str, str] | None = None,
    requires: list[tuple[str, str]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    step: dict[str, Any] = {
        "id": sid,
        "depends_on": deps or [],
        "covers": ["R"],
        "verify": [{"type": "run", "argv": list(argv)}],
    }
    if outputs:
        step["outputs"] = [
            {"name": n, "verify": [{"type": "file_exists", "path": p}]} for n, p in outputs.items()
        ]
    if requires:
        step["requires_outputs"] = [{"step": s, "name": n} for s, n in requires]
    step.update(extra)
    return step


def make_plan(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"task": "test", "requirements": [{"id": "R", "description": "r"}], "steps": list(steps)}


@pytest.fixture
def sealed(repo: GitRepo) -> Sealer:
    """Write *plan*, commit, generate a key (files, so subprocesses find it), init trust, seal."""

    def build(plan: dict[str, Any], name: str = "default", *, commit: bool = True) -> Repo:
        repo.write_plan(plan, name)
        if commit:
            repo.commit("plan")
        handle = open_repo(repo.path)
        if handle.git.references.get("refs/audit/plans") is None:
            assert audit(repo.path, "keys", "generate").code == 0
            assert audit(repo.path, "trust", "init").code == 0
        result = audit(repo.path, "plan", "seal", "--plan", name)
        assert result.code == 0, result.err
        return open_repo(repo.path)

    return build


__all__ = ["Ed25519Signer", "check_worktree", "make_plan", "run_step", "seal_plan", "trust_init"]
