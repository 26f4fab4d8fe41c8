"""The built wheel, installed into a clean virtual environment outside the checkout, runs the
whole flow with its installed console script: seal, run, status, a push refused by the client
hook and by the server's pre-receive hook, and `git audit push` accepted. This is what a user
who installs gitaudit gets (not the editable development install the other tests use)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

PLAN = {
    "task": "greet",
    "requirements": [{"id": "R", "description": "greets"}],
    "steps": [
        {
            "id": "greet",
            "title": "It greets",
            "covers": ["R"],
            "verify": [{"type": "run", "argv": ["grep", "-q", "hello", "greeting.txt"]}],
        }
    ],
}


def _run(
    cmd: list[str], cwd: Path, env: dict[str, str], check: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean venv, outside the checkout, with the freshly built wheel installed."""
    where = tmp_path_factory.mktemp("installed")
    cache = Path(sys.prefix) / "pip-cache"  # reused between runs: packages download once
    env = {**os.environ, "PIP_CACHE_DIR": str(cache), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    # build from a copy: building writes gitaudit/_version.py, and the version of the tree under
    # test must not change under the other tests (the verdict memo is keyed by it)
    source = where / "src"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv", "dist", "build", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"
        ),
    )
    dist = where / "dist"
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(source)], where, env)
    (wheel,) = dist.glob("gitaudit-*.whl")
    venv = where / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], where, env)
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], where, env)
    return venv


def test_the_installed_console_script_runs_the_whole_flow(installed: Path, tmp_path: Path) -> None:
    bindir = installed / "bin"
    env = {
        **os.environ,
        # the venv's scripts and the system's tools; nothing of the checkout or its .venv
        "PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin",
    }
    env.pop("PYTHONPATH", None)
    where = _run(
        [str(bindir / "python"), "-c", "import gitaudit; print(gitaudit.__file__)"], tmp_path, env
    ).stdout
    assert str(installed) in where and str(ROOT) not in where
    version = _run(["git-audit", "--version"], tmp_path, env).stdout
    assert version.startswith("gitaudit ") and "unknown" not in version

    client = tmp_path / "client"
    _run(["git", "init", "-q", "-b", "main", str(client)], tmp_path, env)
    (client / ".gitaudit" / "plans").mkdir(parents=True)
    (client / ".gitaudit" / "plans" / "default.json").write_text(json.dumps(PLAN))
    (client / "greeting.txt").write_text("hello\n")
    _run(["git", "add", "-A"], client, env)
    _run(["git", "commit", "-q", "-m", "greeter"], client, env)
    _run(["git", "audit", "init"], client, env)
    _run(["git", "audit", "plan", "seal", "--reason", "first"], client, env)
    run = _run(["git", "audit", "run"], client, env)
    assert "default: PASS" in run.stdout
    assert _run(["git", "audit", "status"], client, env).returncode == 0
    hook = (client / ".git" / "hooks" / "pre-push").read_text()
    assert str(bindir / "python") in hook  # the shim runs the installed interpreter

    server = tmp_path / "server.git"
    _run(["git", "init", "-q", "--bare", "-b", "main", str(server)], tmp_path, env)
    _run(["git-audit", "hooks", "install", "--server"], server, env)
    root_key = _run(["git", "config", "audit.rootKey"], client, env).stdout.strip()
    _run(["git", "config", "audit.rootKey", root_key], server, env)
    _run(["git", "remote", "add", "origin", str(server)], client, env)
    _run(["git", "push", "-q", "origin", "refs/audit/plans:refs/audit/plans"], client, env)
    _run(["git", "audit", "push"], client, env)
    assert _run(["git", "rev-parse", "main"], server, env).stdout.strip()

    (client / "greeting.txt").write_text("goodbye\n")
    _run(["git", "commit", "-q", "-am", "unproven"], client, env)
    refused = _run(["git", "push", "origin", "main"], client, env, check=False)
    assert refused.returncode != 0 and "gitaudit: push of refs/heads/main" in refused.stderr
    remote = _run(["git", "push", "--no-verify", "origin", "main"], client, env, check=False)
    assert remote.returncode != 0
    assert "remote: gitaudit: update of refs/heads/main" in remote.stderr
    assert "pre-receive hook declined" in remote.stderr
    status = _run(["git-audit", "status", "main"], server, env, check=False)
    assert status.returncode == 0, status.stdout  # the server still holds the proven commit
