"""Helpers shared by the crypto tests: real ssh-keygen, ssh-agent and allowed-signers files."""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SSH_KEYGEN = "/usr/bin/ssh-keygen"
SSH_AGENT = "/usr/bin/ssh-agent"
SSH_ADD = "/usr/bin/ssh-add"


def run(
    *args: str | Path,
    input: bytes | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """Run a program; raise with its stderr when *check* and it fails."""
    proc = subprocess.run(
        [str(a) for a in args],
        input=input,
        capture_output=True,
        check=False,
        env=env,
        stdin=None if input is not None else subprocess.DEVNULL,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, args))} failed ({proc.returncode}):\n"
            f"{proc.stderr.decode(errors='replace')}"
        )
    return proc


def keygen(
    path: Path, *, key_type: str = "ed25519", passphrase: str = "", comment: str = "t@x"
) -> Path:
    """Create a key pair with real ssh-keygen; return the private key path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    run(SSH_KEYGEN, "-q", "-t", key_type, "-N", passphrase, "-C", comment, "-f", path)
    return path


def keygen_fingerprint(pub: Path) -> str:
    """The second field of ``ssh-keygen -lf``."""
    return run(SSH_KEYGEN, "-lf", pub).stdout.decode().split()[1]


def keygen_sign(key: Path, data: bytes, namespace: str = "git", *extra: str) -> str:
    """``ssh-keygen -Y sign`` over *data* on stdin; the armoured signature."""
    return run(
        SSH_KEYGEN, "-q", "-Y", "sign", "-n", namespace, *extra, "-f", key, input=data
    ).stdout.decode()


def keygen_verify(
    tmp: Path, allowed: str, principal: str, armoured: str, data: bytes, namespace: str = "git"
) -> subprocess.CompletedProcess[bytes]:
    """``ssh-keygen -Y verify`` (not checked: the caller asserts the return code)."""
    allowed_file = tmp / "allowed_signers"
    allowed_file.write_text(allowed)
    sig = tmp / "data.sig"
    sig.write_text(armoured)
    return run(
        SSH_KEYGEN,
        "-Y",
        "verify",
        "-f",
        allowed_file,
        "-I",
        principal,
        "-n",
        namespace,
        "-s",
        sig,
        input=data,
        check=False,
    )


def private_checkint(text: str) -> int:
    """The check int of an unencrypted openssh-key-v1 file (to compare encodings byte-for-byte)."""
    body = "".join(text.strip().splitlines()[1:-1])
    blob = base64.b64decode(body)
    pub_len = int.from_bytes(blob[39:43], "big")  # after magic(15), none, none, "", count
    start = 43 + pub_len + 4
    return int.from_bytes(blob[start : start + 4], "big")


@contextmanager
def ssh_agent() -> Iterator[dict[str, str]]:
    """Start a private ssh-agent; yield an environment pointing at it; kill it afterwards."""
    out = run(SSH_AGENT, "-s").stdout.decode()
    sock = re.search(r"SSH_AUTH_SOCK=([^;]+);", out)
    pid = re.search(r"SSH_AGENT_PID=(\d+);", out)
    assert sock and pid, out
    env = dict(os.environ, SSH_AUTH_SOCK=sock.group(1), SSH_AGENT_PID=pid.group(1))
    try:
        yield env
    finally:
        os.kill(int(pid.group(1)), signal.SIGTERM)


@contextmanager
def libgit2_home(home: Path) -> Iterator[None]:
    """Point libgit2's global/XDG/system config search paths at *home* for the duration.

    libgit2 computes them once, from the real $HOME, when pygit2 is first imported, so the
    hermetic fixture's HOME is not seen by ``pygit2.Repository.config`` without this.
    """
    from pygit2 import settings
    from pygit2.enums import ConfigLevel

    levels = (ConfigLevel.GLOBAL, ConfigLevel.XDG, ConfigLevel.SYSTEM)
    saved = {level: settings.search_path[level] for level in levels}
    settings.search_path[ConfigLevel.GLOBAL] = str(home)
    settings.search_path[ConfigLevel.XDG] = str(home / ".config" / "git")
    settings.search_path[ConfigLevel.SYSTEM] = str(home / "no-system-config")
    try:
        yield
    finally:
        for level, value in saved.items():
            settings.search_path[level] = value
