"""pygit2 loaded without the CA bundle (gitaudit/git/libgit2.py), in fresh interpreters: what
libgit2 was given, and the environment left exactly as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# prints what pygit2 gave libgit2 and what SSL_CERT_FILE is once the import is over
PROBE = """
import json, os, ssl, sys
from gitaudit.git import libgit2
{before}
import pygit2
print(json.dumps({{
    "file": pygit2.settings._ssl_cert_file,
    "dir": pygit2.settings._ssl_cert_dir,
    "env": os.environ.get("SSL_CERT_FILE", "<unset>"),
    "default": ssl.get_default_verify_paths().cafile,
    "finders": sum(type(f).__module__ == "gitaudit.git.libgit2" for f in sys.meta_path),
}}))
"""


def probe(
    env: dict[str, str], before: str = "libgit2.install()", cwd: Path | None = None
) -> dict[str, object]:
    """What a fresh interpreter running *before* then ``import pygit2`` saw (its last line)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(before=before)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A CA folder of our own (empty: OpenSSL only looks in it when a connection needs it)."""
    folder = tmp_path / "certs"
    folder.mkdir()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SSL_CERT_")}
    return {**clean, "SSL_CERT_DIR": str(folder)}


def test_installed_libgit2_gets_the_folder_and_no_bundle(env: dict[str, str]) -> None:
    seen = probe(env)
    assert seen["file"] is None
    assert seen["dir"] == env["SSL_CERT_DIR"]
    assert seen["env"] == "<unset>"  # unset again, not left empty
    assert seen["finders"] == 0  # one shot


def test_without_it_pygit2_reads_the_bundle(env: dict[str, str]) -> None:
    """The control: the same interpreter, not installed, hands libgit2 the default bundle."""
    seen = probe(env, before="")
    assert seen["file"] == seen["default"]
    assert seen["dir"] == env["SSL_CERT_DIR"]


def test_a_bundle_named_by_the_caller_is_restored_as_it_was(
    env: dict[str, str], tmp_path: Path
) -> None:
    bundle = str(tmp_path / "mine.pem")
    seen = probe({**env, "SSL_CERT_FILE": bundle})
    assert seen["file"] is None
    assert seen["env"] == bundle


def test_without_a_ca_folder_nothing_is_hidden(env: dict[str, str], tmp_path: Path) -> None:
    """pygit2 refuses to load with neither a bundle nor a folder: then the bundle stays."""
    seen = probe({**env, "SSL_CERT_DIR": str(tmp_path / "missing")})
    assert seen["dir"] is None
    assert seen["file"] == seen["default"]
    assert seen["env"] == "<unset>"


def test_other_imports_pass_by_and_the_finder_waits(env: dict[str, str]) -> None:
    seen = probe(env, before="libgit2.install(); libgit2.install(); import sqlite3, pygit2.enums")
    assert seen["file"] is None  # pygit2 itself came through the finder, via its submodule
    assert seen["finders"] == 0


def test_installing_after_pygit2_is_loaded_changes_nothing(env: dict[str, str]) -> None:
    seen = probe(env, before="import pygit2; libgit2.install()")
    assert seen["file"] == seen["default"]
    assert seen["finders"] == 0


@pytest.mark.parametrize(
    ("module", "argv"),
    [
        ("gitaudit.cli.entry", ["git-audit", "status"]),
        ("gitaudit.hooks.entry", ["hook", "commit-msg", "missing-message-file"]),
    ],
)
def test_the_entry_points_install_it(
    env: dict[str, str], tmp_path: Path, module: str, argv: list[str]
) -> None:
    """Each entry point run as its own process (outside a repository: it fails, after which
    the probe imports pygit2 if the command did not)."""
    before = (
        f"import sys; from {module} import main; sys.argv = {argv!r}\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    seen = probe({**env, "GIT_CEILING_DIRECTORIES": str(tmp_path)}, before, cwd=tmp_path)
    assert seen["file"] is None
    assert seen["env"] == "<unset>"
