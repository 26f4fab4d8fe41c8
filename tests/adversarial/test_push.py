"""Attacks on `git audit push`: local run commits it would sign again when replaying them.

When another machine pushed runs first, `git audit push` replays the local-only runs on top of
the remote's ledger, signed again by the local runner key. A forgery slipped into the local
ledger (a commit by an untrusted key, unsigned, malformed, for another plan, a merge) must not be
laundered into genuine runner signatures: the push stops with one error naming the commit, and
neither the remote nor any local ref moves.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitaudit.crypto.commits import create_signed_commit
from gitaudit.crypto.signers import Ed25519Signer
from gitaudit.git.repo import open_repo
from gitaudit.ledger.objects import dumps
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.refs import PLANS_REF, runs_ref
from gitaudit.ledger.seals import set_policy, trust_add
from gitaudit.ledger.trust import EvidenceRule
from tests.adversarial.conftest import (
    World,
    assert_plan,
    assert_plans_level,
    check,
    honest_run_on_any_tip,
    plan,
    runner,
    step,
)
from tests.gitrepo import audit, git

RUNS = runs_ref("default")


def make_pass_doc(doc: dict[str, Any]) -> None:
    """What a forger writes: every step passed, verdict PASS."""
    doc["verdict"], doc["reasons"] = "PASS", []
    for entry in doc["steps"].values():
        entry["status"], entry["reason"] = "passed", ""


@dataclass
class Served:
    """The proven world with a bare server (pre-receive installed, root key pinned) that holds
    its plans, branch and first run, plus a second run another machine pushed since."""

    world: World
    server: Path
    shared: str  # the run both sides have
    theirs: str  # the run only the server has

    def server_refs(self) -> str:
        return git(self.server, "for-each-ref", "--format=%(refname) %(objectname)")

    def local_refs(self) -> str:
        return self.world.repo.git(
            "for-each-ref", "--format=%(refname) %(objectname)", "refs/audit"
        )


@pytest.fixture
def served(proven: World, tmp_path: Path) -> Served:
    server = proven.serve(tmp_path / "server.git")
    first = proven.cli("push")
    assert first.code == 0, first.out + first.err
    shared = proven.ref(RUNS)
    assert shared is not None and git(server, "rev-parse", RUNS).strip() == shared
    # another machine (ci's key too) records a run and pushes it first
    bare = pygit2.Repository(str(server))
    tip = bare.get(pygit2.Oid(hex=shared))
    assert isinstance(tip, pygit2.Commit)
    theirs = create_signed_commit(
        bare, tree=tip.tree_id, parents=[tip.id], message=tip.message, signer=proven.ci
    )
    git(server, "update-ref", RUNS, str(theirs), shared)
    return Served(proven, server, shared, str(theirs))


def assert_refused(served: Served, forged: str, why: str) -> None:
    """`git audit push` fails with one error line naming *forged* and *why*; nothing moved."""
    server_before, local_before = served.server_refs(), served.local_refs()
    pushed = served.world.cli("push")
    assert pushed.code == 1, pushed.out + pushed.err
    lines = pushed.err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert f"local run {forged[:12]}" in lines[0] and why in lines[0], lines[0]
    assert "Traceback" not in pushed.err
    assert served.server_refs() == server_before  # the remote is unchanged
    assert served.local_refs() == local_before  # and no local ref moved either
    assert served.world.ref(RUNS) == forged


def forge(served: Served, *, signer: Any, edit: Callable[[dict[str, Any]], None]) -> str:
    world = served.world
    return str(world.forge_run(served.shared, edit=edit, signer=signer))


def test_attack_push_replay_of_a_run_signed_by_an_untrusted_key(served: Served) -> None:
    """mallory's 'all passed' run sits on the local ledger; ci's push would sign it again."""
    forged = forge(served, signer=served.world.mallory, edit=make_pass_doc)
    assert_refused(served, forged, "is not signed by a trusted runner")


def test_attack_push_replay_of_an_unsigned_run(served: Served) -> None:
    """A plain unsigned commit claiming PASS on the local ledger."""
    forged = forge(served, signer=None, edit=make_pass_doc)
    assert_refused(served, forged, "is not signed by a trusted runner (it is not signed)")


def test_attack_push_replay_of_a_run_signed_by_a_sealer_only_key(served: Served) -> None:
    """alice may seal but is not a runner: a run she signs is not a runner's to vouch for."""
    forged = forge(served, signer=served.world.alice, edit=make_pass_doc)
    assert_refused(served, forged, "is not signed by a trusted runner")


def test_attack_push_replay_of_a_malformed_run(served: Served) -> None:
    """ci's key signed a run.json whose verdict is not a verdict (the gate would call it
    malformed; re-signed, it would travel as a genuine record)."""

    def malformed(doc: dict[str, Any]) -> None:
        doc["verdict"] = 42

    forged = forge(served, signer=served.world.ci, edit=malformed)
    assert_refused(served, forged, "run.json verdict: expected a verdict, found int")


def test_attack_push_replay_of_a_run_of_another_plan(served: Served) -> None:
    """A ci-signed run of plan 'other' placed on the ledger of 'default'."""

    def relabel(doc: dict[str, Any]) -> None:
        doc["plan"] = "other"

    forged = forge(served, signer=served.world.ci, edit=relabel)
    assert_refused(served, forged, "is evidence for plan 'other', not 'default'")


def test_attack_push_replay_of_a_merge(served: Served) -> None:
    """A ci-signed merge whose second parent carries an unsigned forgery: replaying follows
    first parents only, so the second parent's history would be signed without being read."""
    world = served.world
    hidden = world.forge_run(served.shared, edit=make_pass_doc, signer=None, move=False)
    git_ = world.handle().git
    tree = git_.get(pygit2.Oid(hex=served.shared)).peel(pygit2.Commit).tree_id  # type: ignore[union-attr]
    merge = World.commit_object(
        git_, tree, [pygit2.Oid(hex=served.shared), hidden], "audit: merge\n", world.ci
    )
    world.set_ref(RUNS, merge)
    assert_refused(served, str(merge), "has 2 parents (a run has one)")


def test_attack_push_replay_of_a_forgery_under_an_honest_run(served: Served) -> None:
    """mallory's forgery, then an honest ci run on top of it: the honest tip does not vouch for
    what lies beneath."""
    world = served.world
    forged = forge(served, signer=world.mallory, edit=make_pass_doc)
    world.repo.write("more.txt", "more\n")
    world.repo.commit("more")
    with honest_run_on_any_tip():  # as runs were signed before the tip check
        honest = world.run()
    assert honest.verdict == "PASS"
    server_before = served.server_refs()
    pushed = world.cli("push")
    assert pushed.code == 1 and f"local run {forged[:12]}" in pushed.err, pushed.err
    assert served.server_refs() == server_before
    assert world.ref(RUNS) == honest.commit


def test_attack_push_control_an_honest_diverged_ledger_still_replays(served: Served) -> None:
    """Control: ci's own new run, diverged from the server's, is replayed and pushed; the server
    judges the branch PASS with it."""
    world = served.world
    world.repo.write("more.txt", "more\n")
    world.repo.commit("more")
    honest = world.run()
    assert honest.verdict == "PASS"
    pushed = world.cli("push")
    assert pushed.code == 0, pushed.out + pushed.err
    assert f"{RUNS}: rebased 1" in pushed.out
    tip = git(served.server, "rev-parse", RUNS).strip()
    assert git(served.server, "rev-parse", f"{tip}^").strip() == served.theirs
    assert world.ref(RUNS) == tip  # the local ledger now descends from the server's
    assert audit(served.server, "status", "main").code == 0


def test_attack_push_adopts_no_unverified_plans(served: Served) -> None:
    """The server's refs/audit/plans gains a commit mallory signed (its administrator wrote it
    past the hook): push verifies the remote's plans before fast-forwarding to them."""
    world = served.world
    bare = pygit2.Repository(str(served.server))
    tip = bare.get(bare.references[PLANS_REF].target)
    assert isinstance(tip, pygit2.Commit)
    forged = create_signed_commit(
        bare, tree=tip.tree_id, parents=[tip.id], message="plans: forged\n", signer=world.mallory
    )
    git(served.server, "update-ref", PLANS_REF, str(forged), str(tip.id))
    local_before = served.local_refs()
    pushed = world.cli("push")
    assert pushed.code == 1, pushed.out + pushed.err
    assert "not signed by a trusted sealer" in pushed.err.splitlines()[0], pushed.err
    assert served.local_refs() == local_before


def test_attack_push_replay_keeps_the_signed_time(served: Served) -> None:
    """A day-old ci run, replayed at push time: signed again with today's date, its evidence
    would restart its `valid_for` on the server. The replay keeps the recorded times."""
    world = served.world
    day_old = int(time.time()) - 86400
    old = world.forge_run(served.shared, signer=world.ci, when=day_old)
    pushed = world.cli("push")
    assert pushed.code == 0, pushed.out + pushed.err
    tip = git(served.server, "rev-parse", RUNS).strip()
    assert tip != str(old)  # signed again onto the server's ledger...
    assert git(served.server, "log", "-1", "--format=%ct %at", tip).split() == [str(day_old)] * 2


# ------------------------------------------------------- the replay as a signing oracle
#
# A replay signs a local run's tree again, with the key `git audit push` resolves (the user's,
# or whatever audit.signingKey in .git/config names), onto whatever the remote's runs ref holds.
# The agent holds a runner key of its own (docs/threat-model.md#trusted-runners-per-ref), can
# write .git/config (the remote's URL) and so chooses both: a run whose tree is also a plans
# tree trusting mallory, replayed onto the plans tip, is a sealer-signed fast-forward of
# refs/audit/plans.


REPLAYS = {
    "onto the plans tip": "which is no run of plan 'default' (run ",
    "sealer key chosen in the config": "by key alice (",
    "onto a run": "holds plans/, policy.json, protected/, seals/, trust/ besides a run's files",
}


@pytest.mark.parametrize("how", list(REPLAYS))
def test_attack_push_replay_signs_a_plans_commit(proven: World, tmp_path: Path, how: str) -> None:
    """The agent signs, with its own runner key, a root 'run' whose tree is the plans tree with
    mallory trusted as a sealer plus a genuine run.json, puts it on refs/audit/runs/default, and
    points origin at a repository of its own whose refs/audit/runs/default is the plans tip.
    alice runs `git audit push` with her key: a sealer and a runner, as `git audit init` makes
    her (*sealer key chosen in the config*: her sealer-only key, which the agent named in
    audit.signingKey). The replay was alice's signature on that tree, on the plans tip: the
    agent moved refs/audit/plans to it and mallory was a sealer. Now a replay is signed only by
    a runner, only onto a run of the plan, and only for a run's files (*onto a run*: the
    remote holds ci's genuine run; the tree alone is refused)."""
    world = proven
    agent = runner(world, "agent")
    if how != "sealer key chosen in the config":
        trust_add(world.handle(), world.alice, world.alice.public_key, "runner", "alice")
    tip = world.ref(PLANS_REF)
    genuine = world.ref(RUNS)
    assert tip is not None and genuine is not None
    files = world.plans_files()
    line = f'mallory namespaces="git" {world.mallory.public_key.openssh()}\n'
    files["trust/allowed_signers"] += line.encode()
    roles = json.loads(files["trust/roles.json"])
    roles["sealers"].append("mallory")
    files["trust/roles.json"] = dumps(roles)
    run = world.run_files(genuine)
    files.update({"run.json": run["run.json"], "summary.md": run["summary.md"]})
    forged = str(world.forge_run(genuine, files=files, signer=agent, parent=None))
    evil = tmp_path / "evil.git"
    git(tmp_path, "init", "-q", "--bare", str(evil))
    base = genuine if how == "onto a run" else tip
    world.repo.git("push", "-q", str(evil), f"{base}:{RUNS}")
    world.repo.git("remote", "add", "origin", str(evil))
    world.repo.git("config", "audit.signingKey", str(world.keys["alice"]))
    before = git(evil, "for-each-ref", "--format=%(refname) %(objectname)")
    pushed = world.cli("push")
    assert pushed.code == 1, pushed.out + pushed.err
    first = pushed.err.splitlines()[0]
    assert first.startswith("error: ") and REPLAYS[how] in first, first
    if how == "onto a run":
        assert f"local run {forged[:12]}" in first, first
    if how == "sealer key chosen in the config":
        assert "which is not a runner" in first, first
    assert "Traceback" not in pushed.err
    assert world.ref(RUNS) == forged  # nothing was signed again
    assert git(evil, "for-each-ref", "--format=%(refname) %(objectname)") == before
    # whatever the agent does with what the push left behind, mallory is no sealer
    world.set_ref(PLANS_REF, world.ref(RUNS) or "")
    assert_plans_level(world.gate(), "plans.untrusted")


# ------------------------------------------------------- what `git audit push` takes in
#
# Before pushing, `git audit push` fetches the remote's audit refs and moves the local runs refs
# to the remote's where they are ahead (or exist only there). A remote without gitaudit's hook (a
# forge, a mirror the agent can push to) holds whatever was pushed to it.


@pytest.mark.parametrize("how", ["fast-forward", "remote-only ledger", "diverged"])
def test_attack_push_takes_in_unverified_remote_runs(
    proven: World, tmp_path: Path, how: str
) -> None:
    """The remote (no pre-receive) holds, on top of the genuine ledger, an unsigned 'all passed'
    run, or a whole ledger of one for a plan the clone has no runs of, or (*diverged*: the
    clone has a run of its own since) an unsigned root run. `git audit sync` verifies every run
    it takes in and leaves such a chain out; `git audit push` moved the local ref to it
    unverified (all three before the fix; the diverged ledger with the clone's run signed
    again on top of the forgery): the clone's next runs were recorded on top of the forgery,
    and every gated server then refused them. push now verifies what it takes in as sync
    does, and says it was not taken (or, diverged, replays nothing)."""
    world = proven
    genuine = world.ref(RUNS)
    assert genuine is not None
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    world.repo.git("remote", "add", "origin", str(remote))
    world.repo.git("config", "audit.signingKey", str(world.keys["ci"]))
    world.repo.git("push", "-q", "origin", "HEAD:refs/heads/main", PLANS_REF, RUNS)
    if how == "diverged":
        ref = RUNS
        forged = world.forge_run(genuine, edit=make_pass_doc, signer=None, parent=None, move=False)
        world.forge_run(genuine, edit=make_pass_doc, signer=world.ci)  # the clone's own run
        world.repo.git("push", "-q", "--force", "origin", f"{forged}:{ref}")
        before = world.ref(ref)
        pushed = world.cli("push")
        assert pushed.code == 1, pushed.out + pushed.err
        assert "does not take in" in pushed.err and "is not signed" in pushed.err, pushed.err
        assert world.ref(ref) == before  # the clone's own chain, nothing signed onto the forgery
        assert git(remote, "rev-parse", ref).strip() == str(forged)
        return
    if how == "fast-forward":
        ref = RUNS
        forged = world.forge_run(genuine, edit=make_pass_doc, signer=None, move=False)
    else:
        ref = runs_ref("release")

        def release(doc: dict[str, Any]) -> None:
            make_pass_doc(doc)
            doc["plan"] = "release"

        forged = world.forge_run(genuine, edit=release, signer=None, parent=None, move=False)
    world.repo.git("push", "-q", "origin", f"{forged}:{ref}")
    before = world.ref(ref)
    for command in ("sync", "push"):
        done = world.cli(command)
        assert done.code == 0, done.out + done.err
        assert f"{ref}: not taken: " in done.out and "is not signed" in done.out, done.out
        assert world.ref(ref) == before  # the genuine tip, or no ledger at all
    assert git(remote, "rev-parse", ref).strip() == str(forged)  # the push did not rewind it


def make_fail_doc(doc: dict[str, Any]) -> None:
    """The runner's newer verdict on the same tree: a step failed."""
    doc["verdict"] = "FAIL"
    first = next(iter(doc["steps"].values()))
    first["status"], first["reason"] = "failed", "exit 1"


@pytest.mark.parametrize("how", ["runs rewound", "plans rewound", "plans forged"])
def test_attack_push_sync_from_a_remote_that_rewinds_or_forges(
    proven: World, tmp_path: Path, how: str
) -> None:
    """ci PASSed HEAD's tree, then (newer) FAILed it. The remote the clone syncs from (no
    pre-receive) holds the runs ref at the PASS, the plans ref one seal back, or the plans ref
    with a commit mallory signed on top. `git audit sync` moves no local audit ref back nor to
    an unverified chain, and the gate, which reads the remote's copy beside the ledger, still
    says FAIL: the copy left at the older PASS does not outrank the newer FAIL."""
    world = proven
    passed = world.ref(RUNS)
    assert passed is not None
    world.forge_run(passed, edit=make_fail_doc, signer=world.ci)
    assert world.gate().verdict == "FAIL"
    plans = world.ref(PLANS_REF)
    assert plans is not None
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    world.repo.git("remote", "add", "origin", str(remote))
    world.repo.git("push", "-q", "origin", PLANS_REF, RUNS)
    if how == "runs rewound":
        git(remote, "update-ref", RUNS, passed)
    elif how == "plans rewound":
        git(remote, "update-ref", PLANS_REF, f"{plans}^")
    else:
        bare = pygit2.Repository(str(remote))
        tip = bare.get(pygit2.Oid(hex=plans))
        assert isinstance(tip, pygit2.Commit)
        forged = create_signed_commit(
            bare, tree=tip.tree_id, parents=[tip.id], message="plans\n", signer=world.mallory
        )
        git(remote, "update-ref", PLANS_REF, str(forged))
    before = world.repo.git("for-each-ref", "--format=%(refname) %(objectname)", "refs/audit")
    synced = world.cli("sync")
    if how == "plans forged":
        assert synced.code == 1 and "not signed by a trusted sealer" in synced.err, synced.err
    else:
        assert synced.code == 0, synced.out + synced.err
        ref = RUNS if how == "runs rewound" else PLANS_REF
        assert f"origin: {ref}: ahead" in synced.out, synced.out
    assert "Traceback" not in synced.err
    after = world.repo.git("for-each-ref", "--format=%(refname) %(objectname)", "refs/audit")
    assert after == before
    if how == "runs rewound":  # the remote's copy the gate reads beside the ledger
        assert world.ref("refs/gitaudit/remotes/origin/audit/runs/default") == passed
    assert world.gate().verdict == "FAIL"
    assert world.cli("status", "HEAD").code == 1


@pytest.mark.parametrize("beneath", [False, True], ids=["alone", "beneath a ci run"])
def test_attack_push_replay_launders_another_runners_run(served: Served, beneath: bool) -> None:
    """main is proven by ci alone; the agent holds a trusted runner key of its own, whose runs
    are advisory there. It commits a tree ci never ran and records its own run of it (alone,
    or with an honest ci run of another tree on top) on the local ledger, which the server's
    newer run has diverged from; then `git audit push` runs on the machine that signs with
    ci's key. The push replayed every local-only run a trusted runner signed, signed again by
    ci: the agent's word became ci's, main was PASS for the tree, locally and on the server
    (both variants, before the fix). A replay now signs again only a run its own key signed;
    the push stops naming the run and its signer, and nothing moves."""
    world = served.world
    current = read_state(world.handle()).policy
    set_policy(
        world.handle(),
        world.alice,
        replace(current, evidence=(EvidenceRule("refs/heads/main", ("ci",)),)),
        allow_weaken=False,
        reason="main is ci's",
    )
    agent = runner(world, "agent")
    world.repo.git("push", "-q", "origin", f"{PLANS_REF}:{PLANS_REF}")
    world.repo.write("unproven.txt", "never run by ci\n")
    world.repo.commit("unproven")
    assert world.run(signer=agent).verdict == "PASS"
    laundered = world.ref(RUNS)
    assert laundered is not None
    assert world.gate(for_ref="refs/heads/main").verdict != "PASS"  # advisory there
    if beneath:
        world.repo.git("checkout", "-q", "HEAD~1")
        assert world.run().verdict == "PASS"  # ci's own run, of the proven tree
        world.repo.git("checkout", "-q", "-")
    assert_refused_as(served, laundered, "is signed by agent (SHA256:")
    assert "not by ci (SHA256:" in world.cli("push").err
    assert world.gate(for_ref="refs/heads/main").verdict != "PASS"
    pushed = subprocess.run(
        ["git", "push", "--no-verify", "origin", "HEAD:refs/heads/main"],
        cwd=world.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert pushed.returncode != 0, pushed.stderr  # the server has no ci evidence of the tree


def assert_refused_as(served: Served, forged: str, why: str) -> None:
    """:func:`assert_refused`, for a run that need not be the local tip."""
    server_before, local_before = served.server_refs(), served.local_refs()
    pushed = served.world.cli("push")
    assert pushed.code == 1, pushed.out + pushed.err
    lines = pushed.err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert f"local run {forged[:12]}" in lines[0] and why in lines[0], lines[0]
    assert served.server_refs() == server_before and served.local_refs() == local_before


WEAK = plan(step("unit", check("true")))
STRICTER = plan(step("unit", check("true")), step("lint", check("false")))


@pytest.mark.parametrize("key", ["none", "ci", "mallory"], ids=["no key", "runner", "stranger"])
def test_attack_push_sync_takes_remote_plans_to_drop_a_stricter_seal(
    world: World, tmp_path: Path, key: str
) -> None:
    """alice sealed plan default with one step; her team's server has since taken another of
    her seals (a runner trusted from another machine), and on this machine she seals default
    again, stricter (a lint step that fails), not pushed yet: the plans refs have diverged. The
    agent, holding no sealer key, puts the plan file back to the weak one and runs `git audit
    sync origin --take-remote-plans`, which asked for no key: the remote's plans replaced the
    local ones, alice's stricter seal was dropped with the marks that guard it, and the weak
    plan PASSed on ci's run (before the fix). Dropping seals now needs a sealer of the local
    plans holding its key: refused with no key, ci's runner key or a stranger's, and nothing
    moves."""
    world.seal(WEAK)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    world.repo.git("remote", "add", "origin", str(remote))
    world.repo.git("push", "-q", "origin", "HEAD:refs/heads/main", PLANS_REF)
    elsewhere = tmp_path / "elsewhere"
    git(tmp_path, "clone", "-q", str(remote), str(elsewhere))
    git(elsewhere, "fetch", "-q", "origin", f"{PLANS_REF}:{PLANS_REF}")
    git(elsewhere, "config", "audit.rootKey", world.repo.git("config", "audit.rootKey").strip())
    other = Ed25519Signer.generate("ci2")
    trust_add(open_repo(elsewhere), world.alice, other.public_key, "runner", "ci2")
    git(elsewhere, "push", "-q", "origin", PLANS_REF)
    world.seal(STRICTER)
    sealed = world.ref(PLANS_REF)
    world.write_plan(WEAK)
    world.repo.commit("the weak plan again")
    assert_plan(world.gate(), "plan.differs-from-seal", "FAIL")
    args = ["sync", "origin", "--take-remote-plans"]
    if key != "none":
        args += ["--key", str(world.keys[key])]
    taken = world.cli(*args)
    assert taken.code == 1, taken.out + taken.err
    assert "needs a sealer's key" in taken.err or "is no sealer" in taken.err, taken.err
    assert "Traceback" not in taken.err
    assert world.ref(PLANS_REF) == sealed
    assert_plan(world.gate(), "plan.differs-from-seal", "FAIL")
    assert world.cli("status", "HEAD").code == 1


def test_push_control_a_sealer_takes_the_remote_plans(world: World, tmp_path: Path) -> None:
    """Control: the same divergence, and alice herself (`--key`) takes the remote's plans."""
    world.seal(WEAK)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    world.repo.git("remote", "add", "origin", str(remote))
    world.repo.git("push", "-q", "origin", PLANS_REF)
    theirs = world.forge_plans(world.plans_files(), world.alice)
    world.repo.git("push", "-q", "origin", f"{theirs}:{PLANS_REF}")
    world.set_ref(PLANS_REF, f"{theirs}^")  # as if the remote's seal had never been here
    world.seal(STRICTER)
    taken = world.cli("sync", "origin", "--take-remote-plans", "--key", str(world.keys["alice"]))
    assert taken.code == 0, taken.err
    assert "replaced by the remote's (1 local-only seal(s) dropped)" in taken.out
    assert world.ref(PLANS_REF) == str(theirs)
