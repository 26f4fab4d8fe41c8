"""The repository and signing key of a command, without typer."""

from __future__ import annotations

from pathlib import Path

from gitaudit.crypto.resolve import resolve_signer
from gitaudit.crypto.signers import Signer
from gitaudit.git.repo import Repo, open_repo


def repo_here() -> Repo:
    return open_repo()


def signer_for(repo: Repo, key: Path | None) -> Signer:
    """The signing key, resolved in the documented order; never one inside the work tree."""
    return resolve_signer(explicit=key, repo_config=repo.git.config, workdir=repo.workdir)
