"""The repository and signing key of a command, without typer."""

from __future__ import annotations

from pathlib import Path

from gitaudit.crypto.resolve import chosen_in_repository, resolve_signer
from gitaudit.crypto.signers import Signer
from gitaudit.errors import KeyMaterialError
from gitaudit.git.repo import Repo, open_repo
from gitaudit.ledger.refs import PLANS_REF, read_ref


def repo_here() -> Repo:
    return open_repo()


def signer_for(repo: Repo, key: Path | None) -> Signer:
    """The signing key, resolved in the documented order; never one inside the work tree."""
    return resolve_signer(explicit=key, repo_config=repo.git.config, workdir=repo.workdir)


def refuse_root_key_from_repository(repo: Repo, key: Path | None) -> None:
    """KeyMaterialError when the key that would become the root of trust (``init``, ``trust
    init`` while there is no ``refs/audit/plans``) is named only by the repository's own
    configuration, which anything that writes ``.git/`` can set: the sealer key of a new root
    must be one the user chose."""
    if key is not None or read_ref(repo.git, PLANS_REF) is not None:
        return
    setting = chosen_in_repository(repo.git.config)
    if setting is not None:
        raise KeyMaterialError(
            f"{setting} in the repository's configuration ({repo.gitdir / 'config'}) names the "
            "key; anything that writes .git/ can set it, so it never chooses a root of trust",
            hint=f"pass the key yourself (--key PATH), or `git config --unset {setting}`",
        )


def root_signer_for(repo: Repo, key: Path | None) -> Signer:
    """:func:`signer_for` for the first sealer of a new root of trust: never a key named only by
    the repository's configuration (:func:`refuse_root_key_from_repository`)."""
    refuse_root_key_from_repository(repo, key)
    return signer_for(repo, key)
