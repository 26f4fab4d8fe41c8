"""`doctor` and `hooks install/uninstall` in a bare server repository: the server's gate is its
pre-receive hook, so client hooks are refused there and removing the gate is never silent."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.gitrepo import audit, git


def _server(tmp_path: Path) -> Path:
    server = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(server))
    return server


def test_client_hooks_are_refused_in_a_bare_repository(tmp_path: Path) -> None:
    server = _server(tmp_path)
    result = audit(server, "hooks", "install")
    assert result.code == 2, result.out + result.err
    assert "bare repository" in result.err and "hooks install --server" in result.err
    assert not (server / "hooks" / "pre-push").exists()
    assert audit(server, "hooks", "install", "--server").code == 0
    assert (server / "hooks" / "pre-receive").exists()


def test_uninstall_never_silently_removes_a_servers_gate(tmp_path: Path) -> None:
    server = _server(tmp_path)
    assert audit(server, "hooks", "install", "--server").code == 0
    refused = audit(server, "hooks", "uninstall")
    assert refused.code == 2 and "switches the gate off" in refused.err
    assert "hooks uninstall --server" in refused.err
    assert (server / "hooks" / "pre-receive").exists()
    removed = audit(server, "hooks", "uninstall", "--server")
    assert removed.code == 0 and "pre-receive: removed" in removed.out
    assert not (server / "hooks" / "pre-receive").exists()


def test_doctor_judges_a_server_by_its_pre_receive_hook(tmp_path: Path) -> None:
    server = _server(tmp_path)
    assert audit(server, "hooks", "install", "--server").code == 0
    doctor = audit(server, "doctor")
    assert "ok  hooks" in doctor.out, doctor.out
    assert "pre-receive current" in doctor.out
    assert "pre-push" not in doctor.out and "commit-msg" not in doctor.out
    assert "BAD signing key" not in doctor.out


def test_a_shim_of_another_environment_is_current_not_outdated(tmp_path: Path) -> None:
    """A server's hook installed by the server's own virtual environment's git-audit runs that
    environment's Python; the administrator's doctor, run from another environment, must not
    call it outdated."""
    server = _server(tmp_path)
    other = tmp_path / "venv" / "bin"
    other.mkdir(parents=True)
    os.symlink(sys.executable, other / "python")
    assert audit(server, "hooks", "install", "--server").code == 0
    hook = server / "hooks" / "pre-receive"
    hook.write_text(hook.read_text().replace(sys.executable, str(other / "python")))
    doctor = audit(server, "doctor")
    assert "pre-receive current" in doctor.out, doctor.out
    (other / "python").unlink()
    doctor = audit(server, "doctor")
    assert "pre-receive missing-python" in doctor.out and "BAD hooks" in doctor.out
    assert "hooks install --server" in doctor.out


def test_uninstall_in_a_clone_keeps_a_pre_receive_hook_and_says_so(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "init", "-q", "-b", "main", str(clone))
    assert audit(clone, "hooks", "install").code == 0
    assert audit(clone, "hooks", "install", "--server").code == 0
    result = audit(clone, "hooks", "uninstall")
    assert result.code == 0
    assert "pre-push: removed" in result.out and "pre-receive: kept" in result.err
    assert (clone / ".git" / "hooks" / "pre-receive").exists()


def test_doctor_reports_a_server_without_its_pin(tmp_path: Path) -> None:
    """A server without `audit.rootKey` takes no first plans ref: doctor says so, and how."""
    server = _server(tmp_path)
    assert audit(server, "hooks", "install", "--server").code == 0
    doctor = audit(server, "doctor")
    assert "BAD trust anchor: none, and no audit.rootKey" in doctor.out, doctor.out
    assert "git config audit.rootKey SHA256:" in doctor.out
    git(server, "config", "audit.rootKey", "SHA256:" + "A" * 43)
    doctor = audit(server, "doctor")
    assert "ok  trust anchor: none: a server is pinned by its own audit.rootKey" in doctor.out
