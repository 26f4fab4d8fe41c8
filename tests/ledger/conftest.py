from __future__ import annotations

import pytest

from gitaudit.crypto.signers import Ed25519Signer
from gitaudit.git.repo import Repo, open_repo
from gitaudit.ledger.seals import trust_init
from tests.gitrepo import GitRepo
from tests.plan.builders import two_step_plan


@pytest.fixture
def sealer() -> Ed25519Signer:
    return Ed25519Signer.generate("alice")


@pytest.fixture
def stranger() -> Ed25519Signer:
    return Ed25519Signer.generate("mallory")


@pytest.fixture
def trusted(repo: GitRepo, sealer: Ed25519Signer) -> Repo:
    """A repository with refs/audit/plans initialised by *sealer* and a valid default plan."""
    repo.write_plan(two_step_plan())
    repo.commit("plan")
    handle = open_repo(repo.path)
    trust_init(handle, sealer, "alice")
    return handle
