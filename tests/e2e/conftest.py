"""A client clone and a bare server with gitaudit's hooks installed, driven by real git."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo, audit, git

PLAN = {
    "task": "ship a working greeter",
    "requirements": [
        {"id": "REQ-1", "description": "the greeting is built", "priority": "must"},
        {"id": "REQ-2", "description": "the greeting is correct", "priority": "must"},
    ],
    "steps": [
        {
            "id": "build",
            "depends_on": [],
            "covers": ["REQ-1"],
            "verify": [{"type": "run", "argv": ["sh", "-c", "test -s greeting.txt"]}],
            "outputs": [
                {"name": "greeting", "verify": [{"type": "file_exists", "path": "greeting.txt"}]}
            ],
        },
        {
            "id": "check",
            "depends_on": ["build"],
            "requires_outputs": [{"step": "build", "name": "greeting"}],
            "covers": ["REQ-2"],
            "verify": [{"type": "run", "argv": ["grep", "-q", "hello", "greeting.txt"]}],
        },
    ],
}


@dataclass
class Setup:
    client: GitRepo
    server: Path

    def push(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "push", *args],
            cwd=self.client.path,
            capture_output=True,
            text=True,
            check=check,
            env=self.env(),
        )

    def audit_push(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gitaudit", "push"],
            cwd=self.client.path,
            capture_output=True,
            text=True,
            check=False,
            env=self.env(),
        )

    def env(self) -> dict[str, str]:
        bindir = str(Path(sys.executable).parent)
        return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}

    def server_ref(self, ref: str) -> str | None:
        proc = subprocess.run(
            ["git", "rev-parse", "--verify", "-q", ref],
            cwd=self.server,
            capture_output=True,
            text=True,
            check=False,
        )
        return proc.stdout.strip() or None


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    server = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(server))
    client = GitRepo.create(tmp_path / "client")
    client.write("greeting.txt", "hello world\n")
    client.write_plan(PLAN)
    client.commit("greeter with a plan")
    client.git("remote", "add", "origin", str(server))
    for args in (["init"], ["plan", "seal", "-m", "initial"]):
        result = audit(client.path, *args)
        assert result.code == 0, (args, result.out, result.err)
    fingerprint = client.git("config", "audit.rootKey").strip()
    git(server, "config", "audit.rootKey", fingerprint)
    installed = audit(server, "hooks", "install", "--server")
    assert installed.code == 0, installed.err
    s = Setup(client, server)
    bootstrap = s.push("origin", "refs/audit/plans:refs/audit/plans")
    assert bootstrap.returncode == 0, bootstrap.stderr
    return s
