"""The server's refusals of rewinds, deletions and rewritten plans, at the unit level: the hook's
function :func:`gitaudit.hooks.entry.pre_receive` called in-process on a repository (``GIT_DIR``
set, the update lines on stdin, as git runs it), the pushed objects already in its database.

End to end, through `git push` to a bare server: ``tests/e2e/test_hooks.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pygit2
import pytest

from gitaudit.crypto.commits import create_signed_commit
from gitaudit.crypto.signers import Ed25519Signer
from gitaudit.git.repo import open_repo
from gitaudit.hooks import entry
from gitaudit.ledger.objects import read_files, write_tree
from gitaudit.ledger.seals import trust_init
from gitaudit.ledger.trust import TrustSet
from tests.gitrepo import GitRepo, forget_marks
from tests.hooks.runs import run_tree

ZERO = "0" * 40
RUNS = "refs/audit/runs/default"
PLANS = "refs/audit/plans"


@dataclass
class Server:
    repo: GitRepo
    git: pygit2.Repository
    alice: Ed25519Signer  # the root key: sealer and runner

    def commit(
        self, parents: list[pygit2.Oid], signer: Ed25519Signer, message: str = "run\n"
    ) -> pygit2.Oid:
        tree = run_tree(self.git)
        return create_signed_commit(
            self.git, tree=tree, parents=parents, message=message, signer=signer
        )

    def plans_tip(self) -> pygit2.Commit:
        return self.git.revparse_single(PLANS).peel(pygit2.Commit)


@pytest.fixture
def server(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> Server:
    """refs/audit/plans initialised by alice (her key pinned as audit.rootKey), seen by the
    hook as git's environment names it."""
    alice = Ed25519Signer.generate("alice")
    handle = open_repo(repo.path)
    trust_init(handle, alice, "alice")
    monkeypatch.setenv("GIT_DIR", str(handle.gitdir))
    return Server(repo, handle.git, alice)


def receive(capsys: pytest.CaptureFixture[str], *lines: str) -> tuple[int, str]:
    capsys.readouterr()
    code = entry.pre_receive([], "".join(line + "\n" for line in lines))
    return code, capsys.readouterr().err


def test_a_runs_ref_moved_back_or_sideways_is_refused(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each commit signed by the trusted runner: only the ancestry makes the difference."""
    first = server.commit([], server.alice)
    second = server.commit([first], server.alice)
    sibling = server.commit([first], server.alice, "another run\n")
    server.repo.git("update-ref", RUNS, str(second))
    rewind = "not a fast-forward (audit refs never move backwards)"
    for new in (first, sibling):
        code, err = receive(capsys, f"{second} {new} {RUNS}")
        assert (code, err.splitlines()) == (1, [f"gitaudit: rejecting {RUNS}: {rewind}"])
    # the control: a fast-forward of the same ref is accepted
    onward = server.commit([second], server.alice)
    assert receive(capsys, f"{second} {onward} {RUNS}") == (0, "")


def test_the_plans_ref_moved_backwards_is_refused(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    root = server.plans_tip()
    newer = create_signed_commit(
        server.git, tree=root.tree_id, parents=[root.id], message="x\n", signer=server.alice
    )
    server.repo.git("update-ref", PLANS, str(newer))
    code, err = receive(capsys, f"{newer} {root.id} {PLANS}")
    assert code == 1
    assert err.splitlines() == [
        f"gitaudit: rejecting {PLANS}: not a fast-forward (audit refs never move backwards)"
    ]


@pytest.mark.parametrize("ref", [RUNS, PLANS])
def test_deleting_an_audit_ref_is_refused(
    server: Server, capsys: pytest.CaptureFixture[str], ref: str
) -> None:
    run = server.commit([], server.alice)
    server.repo.git("update-ref", RUNS, str(run))
    old = server.repo.git("rev-parse", ref).strip()
    code, err = receive(capsys, f"{old} {ZERO} {ref}")
    assert (code, err.splitlines()) == (
        1,
        [f"gitaudit: rejecting {ref}: audit refs cannot be deleted"],
    )
    # the control: deleting a branch is not the audit refs' business
    head = server.repo.git("rev-parse", "HEAD").strip()
    server.repo.git("branch", "topic")
    assert receive(capsys, f"{head} {ZERO} refs/heads/topic") == (0, "")


def test_a_plans_commit_by_an_untrusted_key_is_refused(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    """mallory appends to the genuine chain: her key is no sealer of the parent."""
    tip = server.plans_tip()
    mallory = Ed25519Signer.generate("mallory")
    forged = create_signed_commit(
        server.git, tree=tip.tree_id, parents=[tip.id], message="trust: sneak in\n", signer=mallory
    )
    code, err = receive(capsys, f"{tip.id} {forged} {PLANS}")
    assert code == 1
    assert err.startswith(
        f"gitaudit: rejecting {PLANS}: plans commit {str(forged)[:12]}: "
        "not signed by a trusted sealer: "
    )
    assert f"signed by untrusted key {mallory.public_key.fingerprint()}" in err
    # the control: the same change signed by alice is accepted
    genuine = create_signed_commit(
        server.git, tree=tip.tree_id, parents=[tip.id], message="x\n", signer=server.alice
    )
    assert receive(capsys, f"{tip.id} {genuine} {PLANS}") == (0, "")


def test_a_replacement_plans_history_is_refused(
    server: Server, capsys: pytest.CaptureFixture[str], repo: GitRepo
) -> None:
    """mallory's own root of trust: as an update of the server's plans ref it is not a
    fast-forward; as the first plans ref of a server that pins alice's key, its root is not
    signed by the pinned key."""
    tip = server.plans_tip()
    mallory = Ed25519Signer.generate("mallory")
    files = read_files(server.git, tip.tree)
    files.update(TrustSet().added("mallory", mallory.public_key, "sealer").files())
    root = create_signed_commit(
        server.git,
        tree=write_tree(server.git, files),
        parents=[],
        message="trust: mine\n",
        signer=mallory,
    )
    code, err = receive(capsys, f"{tip.id} {root} {PLANS}")
    assert (code, err.splitlines()) == (
        1,
        [f"gitaudit: rejecting {PLANS}: not a fast-forward (audit refs never move backwards)"],
    )
    # a server the plans ref has not reached yet (no ref, no marks), its root key pinned
    repo.git("update-ref", "-d", PLANS)
    forget_marks(open_repo(repo.path).gitdir)
    code, err = receive(capsys, f"{ZERO} {root} {PLANS}")
    assert code == 1
    assert err.startswith(f"gitaudit: rejecting {PLANS}: plans commit {str(root)[:12]}: ")
    assert "not by the pinned audit.rootKey" in err
    # the control: the genuine root is accepted there
    assert receive(capsys, f"{ZERO} {tip.id} {PLANS}") == (0, "")
