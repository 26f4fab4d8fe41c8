"""Bad input through the real entry point fails closed in one line: `error:` naming the file or
object, `hint:` with the fix, the documented exit code, and never a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo, audit
from tests.plan.builders import two_step_plan


def _one_error(err: str) -> None:
    lines = err.strip().splitlines()
    assert "Traceback" not in err, err
    assert lines[0].startswith("error: ") and lines[-1].startswith("hint: "), err
    assert len(lines) == 2, err


@pytest.mark.parametrize("kind", ["directory", "fifo"])
@pytest.mark.parametrize("where", ["--key", "audit.signingKey"])
def test_a_signing_key_that_is_not_a_regular_file_is_named(
    repo: GitRepo, tmp_path: Path, kind: str, where: str
) -> None:
    """A key path naming a directory said `error: [Errno 21] Is a directory: 3` (the file
    descriptor, not the file, and the generic hint); a FIFO was named but had no hint."""
    repo.write_plan(two_step_plan())
    key = tmp_path / "key"
    if kind == "directory":
        key.mkdir()
    else:
        os.mkfifo(key)
    if where == "--key":
        result = audit(repo.path, "plan", "seal", "--key", str(key))
    else:
        repo.git("config", "audit.signingKey", str(key))
        result = audit(repo.path, "plan", "seal")
    assert result.code == 1, result.out + result.err
    _one_error(result.err)
    assert f"error: {where}: {key}: not a key file (" in result.err
    assert "Errno" not in result.err
    assert "hint: name an Ed25519 private key file" in result.err
