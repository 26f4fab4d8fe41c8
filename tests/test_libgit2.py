"""pygit2 loaded without TLS set-up (gitaudit/git/libgit2.py), in fresh interpreters: what
libgit2 was given, whether Python's ``ssl`` was imported, and ``sys.modules`` and the environment
left exactly as they were."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# prints what pygit2 gave libgit2, whether ssl was loaded by the import, and what SSL_CERT_FILE
# is once the import is over
PROBE = """
import json, os, sys
from gitaudit.git import libgit2
{before}
earlier = sys.modules.get("ssl")
import pygit2
loaded = sys.modules.get("ssl")
import ssl
print(json.dumps({{
    "file": pygit2.settings._ssl_cert_file,
    "dir": pygit2.settings._ssl_cert_dir,
    "env": os.environ.get("SSL_CERT_FILE", "<unset>"),
    "default": ssl.get_default_verify_paths().cafile,
    "ssl": "none" if loaded is None else "kept" if loaded is earlier else "loaded",
    "real": ssl is loaded if loaded is not None else hasattr(ssl, "SSLContext"),
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


def test_installed_libgit2_gets_no_certificates_and_ssl_is_not_imported(
    env: dict[str, str],
) -> None:
    seen = probe(env)
    assert seen["file"] is None
    assert seen["dir"] == os.devnull  # not the CA folder the environment names
    assert seen["ssl"] == "none"  # nor the stand-in left behind: the import after got the real one
    assert seen["real"] is True
    assert seen["env"] == "<unset>"
    assert seen["finders"] == 0  # one shot


def test_without_it_pygit2_reads_the_bundle_and_imports_ssl(env: dict[str, str]) -> None:
    """The control: the same interpreter, not installed, hands libgit2 the default bundle and
    the CA folder, and loads Python's ssl to find them."""
    seen = probe(env, before="")
    assert seen["file"] == seen["default"]
    assert seen["dir"] == env["SSL_CERT_DIR"]
    assert seen["ssl"] == "loaded"


def test_an_ssl_loaded_before_is_kept_and_the_environment_untouched(
    env: dict[str, str], tmp_path: Path
) -> None:
    bundle = str(tmp_path / "mine.pem")
    seen = probe({**env, "SSL_CERT_FILE": bundle}, before="libgit2.install(); import ssl")
    assert seen["ssl"] == "kept"  # the very module object imported before
    assert seen["file"] is None
    assert seen["dir"] == os.devnull
    assert seen["env"] == bundle


def test_the_stand_in_answers_other_names_from_the_real_ssl() -> None:
    """A name pygit2 might ask for besides the two it does is the real module's; the import
    system's own questions (``__path__``) are not passed on, so ``from ssl import ...`` does
    not import the real module."""
    import ssl

    from gitaudit.git import libgit2

    module = libgit2.stand_in()
    assert module.PROTOCOL_TLS_CLIENT is ssl.PROTOCOL_TLS_CLIENT
    assert not hasattr(module, "__path__")
    paths = module.get_default_verify_paths()
    assert (paths.cafile, paths.capath) == (None, os.devnull)
    assert paths._fields == ssl.DefaultVerifyPaths._fields  # the real tuple's fields, in order


def test_other_imports_pass_by_and_the_finder_waits(env: dict[str, str]) -> None:
    seen = probe(env, before="libgit2.install(); libgit2.install(); import sqlite3, pygit2.enums")
    assert seen["dir"] == os.devnull  # pygit2 itself came through the finder, via its submodule
    assert seen["finders"] == 0


def test_installing_after_pygit2_is_loaded_changes_nothing(env: dict[str, str]) -> None:
    seen = probe(env, before="import pygit2; libgit2.install()")
    assert seen["file"] == seen["default"]
    assert seen["dir"] == env["SSL_CERT_DIR"]
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
    assert seen["dir"] == os.devnull
    assert seen["ssl"] == "none"


def test_a_name_the_stand_in_lacks_loads_the_real_ssl_once() -> None:
    """Were pygit2 to ask for more of ssl, it gets the real module's, and that module, not a
    second copy, is ``ssl`` after the import (in a fresh interpreter: none loaded before)."""
    code = (
        "import sys, types\n"
        "from gitaudit.git import libgit2\n"
        "loaded = types.ModuleType('loaded')\n"
        "libgit2._without_tls(lambda m: exec('from ssl import SSLContext', m.__dict__))(loaded)\n"
        "import ssl\n"
        "print(loaded.SSLContext is ssl.SSLContext, hasattr(ssl, 'create_default_context'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "True"]
