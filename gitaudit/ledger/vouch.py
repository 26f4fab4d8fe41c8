"""An authenticated mark of the last plans tip verified here, for tips a planner signed.

The verified high-water mark (:mod:`gitaudit.ledger.watermark`) is a cache any process in the
work tree can write. It vouches for a tip a *sealer* signed (only a sealer's verified append
makes one), never for a tip a *planner* signed: whoever holds the planner key, an agent, can
sign a commit and write the mark. Such a tip is verified back to the nearest sealer's commit,
unless this file vouches for it: the tip's id under a MAC with the local secret key
(:mod:`gitaudit.secret`, kept beside the signing keys), which a process confined to the work
tree cannot read. Without the key nothing is vouched for, and verification is only slower.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import tempfile
from pathlib import Path

from gitaudit import secret
from gitaudit.places import state_dir

FILENAME = "plans-vouched.json"


def _payload(gitdir: Path, tip: str) -> bytes:
    return b"\0".join(
        (b"gitaudit.plans-vouched/1", os.fsencode(os.path.realpath(gitdir)), tip.encode())
    )


def _path(gitdir: Path) -> Path:
    return Path(state_dir(gitdir)) / FILENAME


def vouched(gitdir: Path, workdir: Path | None, tip: str) -> bool:
    """Whether this repository verified the plans chain up to *tip* (a MAC'd record says so)."""
    key = secret.local_key(str(workdir) if workdir else None, create=False)
    if key is None:
        return False
    try:
        doc = json.loads(_path(gitdir).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(doc, dict) or doc.get("tip") != tip:
        return False
    return hmac.compare_digest(str(doc.get("mac", "")), secret.mac(key, _payload(gitdir, tip)))


def vouch(gitdir: Path, workdir: Path | None, tip: str) -> None:
    """Record that the plans chain up to *tip* was verified here (best effort: a cache)."""
    key = secret.local_key(str(workdir) if workdir else None, create=True)
    if key is None:
        return
    doc = {"tip": tip, "mac": secret.mac(key, _payload(gitdir, tip))}
    path = _path(gitdir)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".vouch-")
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(doc, handle)
            os.replace(temp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
