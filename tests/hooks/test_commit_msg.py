"""The commit-msg hook called in-process (``python -m gitaudit.hooks commit-msg FILE``, as git
runs it), on a repository with a sealed plan and an unproven staged tree.

End to end (real commits through the installed hook): ``tests/adversarial/test_commit_msg.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gitaudit.hooks import entry
from tests.e2e.conftest import PLAN
from tests.gitrepo import GitRepo, audit

WAY_OUT = "gitaudit:   run `git audit run`, or drop the claim from the message"


@pytest.fixture
def unproven(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    """The default policy (claims), no run, a staged change; the hook runs in the work tree."""
    repo.write("greeting.txt", "hello world\n")
    repo.write_plan(PLAN)
    repo.commit("greeter with a plan")
    for args in (["init"], ["plan", "seal", "-m", "initial"]):
        assert audit(repo.path, *args).code == 0, args
    repo.write("greeting.txt", "hello, unproven\n")
    repo.git("add", "-A")
    monkeypatch.chdir(repo.path)
    return repo


def _hook(capsys: pytest.CaptureFixture[str], message: Path) -> tuple[int, str]:
    capsys.readouterr()
    code = entry.main(["commit-msg", str(message)])
    return code, capsys.readouterr().err


def test_a_claim_is_refused_with_the_way_out(
    unproven: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    message = unproven.path / ".git" / "COMMIT_EDITMSG"
    message.write_text("finish\n\nFixes: REQ-2\n")
    code, err = _hook(capsys, message)
    assert code == 1
    assert "this commit claims completion ('Fixes: REQ-2')" in err
    assert err.splitlines()[-1] == WAY_OUT
    message.write_text("work in progress\n")
    assert _hook(capsys, message) == (0, "")


def test_a_message_that_is_not_utf8_is_still_judged(
    unproven: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """git passes the message as the user wrote it, in any encoding (i18n.commitEncoding): an
    undecodable byte is replaced, not a reason to stop; a claim beside it is still found."""
    message = unproven.path / ".git" / "COMMIT_EDITMSG"
    message.write_bytes(b"caf\xe9 au lait\n")
    assert _hook(capsys, message) == (0, "")
    message.write_bytes(b"caf\xe9 au lait\n\nFixes: REQ-2\n")
    code, err = _hook(capsys, message)
    assert code == 1 and err.splitlines()[-1] == WAY_OUT


def test_a_hook_that_cannot_do_its_work_fails_closed_in_one_line(
    unproven: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any error inside a hook refuses (exit 1) with one line naming the hook and the error,
    never a traceback; ``GITAUDIT_DEBUG`` lets the exception through."""
    missing = unproven.path / ".git" / "NO_SUCH_MSG"
    code, err = _hook(capsys, missing)
    assert code == 1
    assert err.splitlines() == [
        f"gitaudit: commit-msg failed closed: FileNotFoundError: [Errno 2] No such file or "
        f"directory: {str(missing)!r}"
    ]
    monkeypatch.setenv("GITAUDIT_DEBUG", "1")
    with pytest.raises(FileNotFoundError):
        entry.main(["commit-msg", str(missing)])


def test_the_claim_quoted_is_the_whole_phrase_that_matched() -> None:
    """The refusal quotes what the message says: the id and the words that claim it, whichever
    comes first."""
    from gitaudit.hooks.message import claims_completion

    assert claims_completion("REQ-3 is fixed now", {"REQ-3"}) == "REQ-3 is fixed"
    assert claims_completion("Fixes REQ-3 for good", {"REQ-3"}) == "Fixes REQ-3"


@pytest.mark.parametrize("message", ["Audit-Verdict: PASS\n", "\n\nAudit-Run: abc\n"])
def test_a_message_of_owned_trailers_alone_becomes_empty(message: str) -> None:
    """Nothing but forged `Audit-*` trailers (and blank lines): nothing is left, no crash."""
    from gitaudit.hooks.message import without_owned_trailers

    assert without_owned_trailers(message) == ""
