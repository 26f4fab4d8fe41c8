"""A sealed project for the agent hook tests (see tests/agent/host.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent.host import sealed_project
from tests.gitrepo import GitRepo


@pytest.fixture
def project(tmp_path: Path) -> GitRepo:
    return sealed_project(tmp_path / "project")
