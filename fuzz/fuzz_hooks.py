"""Fuzz harness: what the hooks read from git (stdin lines, commit messages).

The first byte picks the target, the rest is its input:

* ``0``: pre-push's stdin -> ``_pushed_updates``: never raises; every update it keeps came from a
  line of four fields, pushes a non-zero commit, and is not an audit ref (the server judges
  those); every such line is kept;
* ``1``: a commit message -> ``without_owned_trailers`` and ``claims_completion``: never raise;
  no ``Audit-*`` trailer survives the removal, and removing twice changes nothing more;
* ``2``: pre-receive's stdin, judged by the real hook on a small sealed repository (no commit of
  the input exists there): exit 0 only when no line updates an audit ref or a protected branch.

Run: ``fuzz/run.py hooks SECONDS``.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from functools import cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _driver import guarded, hermetic, main

try:
    import atheris
except ImportError:
    atheris = None

if atheris is not None:
    with atheris.instrument_imports(include=["gitaudit"]):
        from gitaudit.errors import GitAuditError
        from gitaudit.hooks import entry, message
else:
    from gitaudit.errors import GitAuditError
    from gitaudit.hooks import entry, message

ZERO = "0" * 40


class Broken(AssertionError):
    """A hook read its input wrongly."""


def _pre_push(text: str) -> str:
    kept = entry._pushed_updates(text)
    wanted = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[1] != ZERO and not parts[2].startswith("refs/audit/"):
            wanted.append((parts[0], parts[1], parts[2]))
    if kept != wanted:
        raise Broken(f"pre-push kept {kept!r}, wanted {wanted!r}")
    return f"pre-push:{len(kept)}"


def _commit_msg(text: str) -> str:
    cleaned = message.without_owned_trailers(text)
    if any(message.owned(line) for line in message.body(cleaned)):
        raise Broken(f"an Audit-* trailer survived: {cleaned!r}")
    if message.without_owned_trailers(cleaned) != cleaned:
        raise Broken(f"removing the trailers twice changed more: {text!r}")
    claim = message.claims_completion(text, {"REQ-1", "R"})
    return f"commit-msg:{claim is not None}"


@cache
def server() -> str:
    """A repository with a sealed plan (the pre-receive hook's view); its git dir."""
    from gitaudit.crypto.signers import Ed25519Signer
    from gitaudit.git.repo import open_repo
    from gitaudit.ledger.seals import seal_plan, trust_init
    from gitaudit.plan.catalog import check_worktree
    from tests.gitrepo import GitRepo

    repo = GitRepo.create(Path(tempfile.mkdtemp(prefix="gitaudit-fuzz-hooks-")) / "server")
    step = {
        "id": "s",
        "depends_on": [],
        "covers": ["R"],
        "verify": [{"type": "run", "argv": ["true"]}],
    }
    repo.write_plan(
        {"task": "t", "requirements": [{"id": "R", "description": "r"}], "steps": [step]}
    )
    repo.commit("plan")
    handle = open_repo(repo.path)
    signer = Ed25519Signer(bytes(range(32)), comment="fuzz")
    trust_init(handle, signer, "fuzz")
    (checked,) = check_worktree(repo.path, "default")
    seal_plan(handle, signer, checked)
    return str(handle.gitdir)


def _pre_receive(text: str) -> str:
    gitdir = server()
    updates = [line.split() for line in text.splitlines() if len(line.split()) == 3]
    consequential = [
        u for u in updates if u[2].startswith(("refs/audit/", "refs/heads/")) and u[1] != ZERO
    ] + [u for u in updates if u[2].startswith("refs/audit/")]
    old = os.environ.get("GIT_DIR")
    os.environ["GIT_DIR"] = gitdir
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            code = entry.pre_receive([], text)
    finally:
        if old is None:
            del os.environ["GIT_DIR"]
        else:
            os.environ["GIT_DIR"] = old
    if code == 0 and consequential:
        raise Broken(f"pre-receive accepted {consequential!r}")
    return f"pre-receive:{code}"


def check(data: bytes) -> str:
    mode, rest = (data[0] % 3, data[1:]) if data else (0, b"")
    text = rest.decode("utf-8", "surrogateescape")
    if mode == 0:
        return guarded(lambda: _pre_push(text))
    if mode == 1:
        return guarded(lambda: _commit_msg(text))
    return guarded(lambda: _pre_receive(text), GitAuditError)


if __name__ == "__main__":
    hermetic()
    main(check, instrumented=atheris is not None)
