"""`git audit push`'s replay, at the unit level: :func:`gitaudit.ledger.sync.reconcile_with`
called directly on a real repository and a real bare remote (no hooks: only the replay's own
rules are exercised). It signs again only local-only runs it verified, moves no ref when one
fails, and adopts the remote's plans ref only when it verifies.

End to end, through `git audit push` to a server with its hook: ``tests/adversarial/test_push.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitaudit.crypto.commits import create_signed_commit, verify_commit
from gitaudit.crypto.keystore import generate_key, load_signer
from gitaudit.crypto.signers import Signer
from gitaudit.errors import GitAuditError, LedgerError
from gitaudit.git.repo import open_repo
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.refs import PLANS_REF, runs_ref
from gitaudit.ledger.seals import trust_add
from gitaudit.ledger.sync import reconcile_with, sync
from tests.adversarial.conftest import World
from tests.adversarial.conftest import proven as proven  # noqa: PLC0414 (re-exported fixtures)
from tests.adversarial.conftest import sealed as sealed  # noqa: PLC0414
from tests.adversarial.conftest import world as world  # noqa: PLC0414
from tests.gitrepo import git

RUNS = runs_ref("default")


@dataclass
class Diverged:
    """The proven world with a bare remote ``origin`` holding its plans and first run (shared),
    plus a run another machine pushed since (theirs): the local runs ref has diverged as soon
    as anything is recorded locally."""

    world: World
    remote: Path
    shared: str
    theirs: str

    def audit_refs(self) -> dict[str, str]:
        out = self.world.repo.git("for-each-ref", "--format=%(refname) %(objectname)", "refs/audit")
        return dict(line.split() for line in out.splitlines())

    def reconcile(self) -> list[tuple[str, str]]:
        actions = reconcile_with(self.world.handle(), "origin", self.world.ci)
        return [(a.ref, a.action) for a in actions]


@pytest.fixture
def diverged(proven: World, tmp_path: Path) -> Diverged:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    proven.repo.git("remote", "add", "origin", str(remote))
    proven.repo.git("push", "-q", "origin", f"{PLANS_REF}:{PLANS_REF}", f"{RUNS}:{RUNS}")
    shared = proven.ref(RUNS)
    assert shared is not None
    bare = pygit2.Repository(str(remote))
    tip = bare.get(pygit2.Oid(hex=shared))
    assert isinstance(tip, pygit2.Commit)
    theirs = create_signed_commit(
        bare, tree=tip.tree_id, parents=[tip.id], message=tip.message, signer=proven.ci
    )
    git(remote, "update-ref", RUNS, str(theirs), shared)
    return Diverged(proven, remote, shared, str(theirs))


def _pass(doc: dict[str, Any]) -> None:
    doc["verdict"], doc["reasons"] = "PASS", []


def _malformed(doc: dict[str, Any]) -> None:
    doc["verdict"] = 42


def _other_plan(doc: dict[str, Any]) -> None:
    doc["plan"] = "other"


def _forge(d: Diverged, signer: str | None, edit: Callable[[dict[str, Any]], None]) -> str:
    key: Signer | None = None if signer is None else getattr(d.world, signer)
    return str(d.world.forge_run(d.shared, edit=edit, signer=key))


def _more_than_a_run(d: Diverged) -> str:
    """A ci-signed run whose tree also holds trust/ (signed again, a plans commit of its own)."""
    w = d.world
    files = {**w.run_files(d.shared), "trust/allowed_signers": b"", "policy.json": b"{}"}
    return str(w.forge_run(d.shared, files=files, signer=w.ci))


def _merge(d: Diverged) -> str:
    """A ci-signed merge whose second parent is an unsigned forgery."""
    w = d.world
    hidden = w.forge_run(d.shared, edit=_pass, signer=None, move=False)
    handle = w.handle().git
    tree = handle.get(pygit2.Oid(hex=d.shared)).peel(pygit2.Commit).tree_id  # type: ignore[union-attr]
    merge = World.commit_object(
        handle, tree, [pygit2.Oid(hex=d.shared), hidden], "audit: merge\n", w.ci
    )
    w.set_ref(RUNS, merge)
    return str(merge)


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda d: _forge(d, "mallory", _pass), "is not signed by a trusted runner (signed by"),
        (lambda d: _forge(d, None, _pass), "is not signed by a trusted runner (it is not signed)"),
        (lambda d: _forge(d, "alice", _pass), "is not signed by a trusted runner (signed by"),
        (lambda d: _forge(d, "ci", _malformed), "run.json verdict: expected a verdict, found int"),
        (lambda d: _forge(d, "ci", _other_plan), "is evidence for plan 'other', not 'default'"),
        (_merge, "has 2 parents (a run has one)"),
        (_more_than_a_run, "holds policy.json, trust/ besides a run's files (run.json, "),
    ],
    ids=[
        "untrusted-key",
        "unsigned",
        "sealer-only-key",
        "malformed",
        "another-plan",
        "merge",
        "more-than-a-run",
    ],
)
def test_replay_refuses_a_run_it_cannot_verify(
    diverged: Diverged, make: Callable[[Diverged], str], why: str
) -> None:
    """The local-only run reconcile_with would replay onto the remote's ledger is not a single-
    parent commit signed by a runner trusted in the verified plans, holding a well-formed
    run.json of the ref's plan: one LedgerError naming it, and no audit ref moves."""
    forged = make(diverged)
    before = diverged.audit_refs()
    remote_before = git(diverged.remote, "for-each-ref")
    with pytest.raises(LedgerError) as caught:
        diverged.reconcile()
    assert caught.value.message.startswith(f"{RUNS}: local run {forged[:12]}"), caught.value
    assert why in caught.value.message, caught.value.message
    assert caught.value.message.endswith("is not replayed; nothing was pushed")
    assert diverged.audit_refs() == before and before[RUNS] == forged
    assert git(diverged.remote, "for-each-ref") == remote_before


def test_replay_signs_only_with_a_runner_key_onto_a_run(diverged: Diverged) -> None:
    """A replay is a run signed again: with a key that is no runner (alice, a sealer only), or
    onto a remote runs ref that holds no run of the plan (the plans tip: the replay would be a
    fast-forward of refs/audit/plans), nothing is signed and no ref moves."""
    w = diverged.world
    w.repo.write("more.txt", "more\n")
    w.repo.commit("more")
    assert w.run().verdict == "PASS"
    before = diverged.audit_refs()
    with pytest.raises(LedgerError) as caught:
        reconcile_with(w.handle(), "origin", w.alice)
    assert caught.value.message.startswith(f"{RUNS}: its local runs would be signed again by ")
    assert "key alice (SHA256:" in caught.value.message
    assert "which is not a runner; nothing was replayed or pushed" in caught.value.message
    assert diverged.audit_refs() == before
    plans = git(diverged.remote, "rev-parse", PLANS_REF).strip()
    git(diverged.remote, "update-ref", RUNS, plans, diverged.theirs)
    with pytest.raises(LedgerError) as caught:
        diverged.reconcile()
    assert caught.value.message == (
        f"'origin' holds {plans[:12]} on {RUNS}, which is no run of plan 'default' (run "
        f"{plans[:12]} has no run.json); nothing is replayed onto it and nothing was pushed"
    )
    assert diverged.audit_refs() == before


def test_replay_signs_a_verified_run_again(diverged: Diverged) -> None:
    """The control: ci's own honest local run is signed again on top of the remote's run, with
    the same tree, message and times."""
    w = diverged.world
    w.repo.write("more.txt", "more\n")
    w.repo.commit("more")
    honest = w.run()
    assert honest.verdict == "PASS"
    assert (RUNS, "rebased 1") in diverged.reconcile()
    handle = w.handle().git
    tip = handle.revparse_single(RUNS).peel(pygit2.Commit)
    original = handle.revparse_single(honest.commit).peel(pygit2.Commit)
    assert [str(p) for p in tip.parent_ids] == [diverged.theirs]
    assert (tip.tree_id, tip.message, tip.commit_time) == (
        original.tree_id,
        original.message,
        original.commit_time,
    )
    assert verify_commit(handle, tip.id, [w.ci.public_key]).raw == w.ci.public_key.raw


def test_replay_adopts_no_remote_plans_that_do_not_verify(diverged: Diverged) -> None:
    """The remote's plans ref gained a commit mallory signed: it is not fast-forwarded to, and
    nothing moves; a sealer's genuine change there is adopted (the control)."""
    w = diverged.world
    bare = pygit2.Repository(str(diverged.remote))
    tip = bare.get(bare.references[PLANS_REF].target)
    assert isinstance(tip, pygit2.Commit)
    forged = create_signed_commit(
        bare, tree=tip.tree_id, parents=[tip.id], message="plans: forged\n", signer=w.mallory
    )
    git(diverged.remote, "update-ref", PLANS_REF, str(forged), str(tip.id))
    before = diverged.audit_refs()
    with pytest.raises(GitAuditError) as caught:
        diverged.reconcile()
    assert f"plans commit {str(forged)[:12]}: not signed by a trusted sealer" in (
        caught.value.message
    )
    assert diverged.audit_refs() == before
    genuine = create_signed_commit(
        bare, tree=tip.tree_id, parents=[tip.id], message="plans: genuine\n", signer=w.alice
    )
    git(diverged.remote, "update-ref", PLANS_REF, str(genuine), str(forged))
    assert (PLANS_REF, "fast-forwarded") in diverged.reconcile()
    assert w.ref(PLANS_REF) == str(genuine)
    assert read_state(open_repo(w.path)).tip == genuine


def test_replay_signs_again_only_a_run_of_its_own_key(diverged: Diverged) -> None:
    """A local-only run another trusted runner signed (an agent's own key, advisory where an
    evidence rule names ci) is not signed again by ci's key: one LedgerError naming the run
    and both runners, and no audit ref moves; ci's own run on top of it changes nothing."""
    w = diverged.world
    other = load_signer(generate_key("bot").private_path)
    trust_add(w.handle(), w.alice, other.public_key, "runner", "bot")
    w.repo.write("more.txt", "more\n")
    w.repo.commit("more")
    bots = w.run(signer=other)
    assert w.run().verdict == "PASS"  # ci, on top
    before = diverged.audit_refs()
    with pytest.raises(LedgerError) as caught:
        diverged.reconcile()
    assert caught.value.message.startswith(f"{RUNS}: local run {bots.commit[:12]} is signed by bot")
    assert "not by ci (SHA256:" in caught.value.message
    assert diverged.audit_refs() == before


class _Impostor:
    """alice's public key, signing with mallory's: a key named but not held."""

    def __init__(self, named: Signer, holding: Signer) -> None:
        self.public_key = named.public_key
        self._holding = holding

    def sign(self, data: bytes, namespace: str = "git") -> str:
        return self._holding.sign(data, namespace)


@pytest.mark.parametrize("who", ["none", "ci", "mallory", "impostor"])
def test_taking_remote_plans_needs_a_sealer_holding_its_key(
    sealed: World, tmp_path: Path, who: str
) -> None:
    """`sync --take-remote-plans` drops the local-only seals of a diverged plans ref: without a
    key, with a runner's (ci), a stranger's, or alice's public key signing with another key,
    nothing moves; alice's own key takes the remote's plans."""
    w = sealed
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    w.repo.git("remote", "add", "origin", str(remote))
    handle = w.handle().git
    base = handle.revparse_single(PLANS_REF).peel(pygit2.Commit)
    theirs, ours = (
        w.commit_object(handle, base.tree_id, [base.id], f"plans: {side}\n", w.alice)
        for side in ("theirs", "ours")
    )
    w.repo.git("push", "-q", "origin", f"{theirs}:{PLANS_REF}")
    w.set_ref(PLANS_REF, ours)
    signer = {
        "none": None,
        "ci": w.ci,
        "mallory": w.mallory,
        "impostor": _Impostor(w.alice, w.mallory),
    }[who]
    with pytest.raises(LedgerError) as caught:
        sync(w.handle(), "origin", take_remote_plans=True, signer=signer)
    assert caught.value.message.startswith("--take-remote-plans"), caught.value.message
    assert w.ref(PLANS_REF) == str(ours)
    actions = sync(w.handle(), "origin", take_remote_plans=True, signer=w.alice)
    assert actions[0].action == "replaced by the remote's (1 local-only seal(s) dropped)"
    assert w.ref(PLANS_REF) == str(theirs)
