"""Attacks on approvals (k of n): changes of refs/audit/plans the policy says need several
sealers, made with fewer, or with approvals that are not for them.

The world: alice, bob and carol are sealers; the policy asks for 2 distinct sealers to weaken
(3 in the first attack); STRICT is sealed. A weakening (dropping the step ``lint``) proposed by
alice gives the exact files of the change (``proposal.files``); forgeries put those files in a
plans commit signed by a trusted sealer, with approvals.json built by hand.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from gitaudit.crypto import sshsig
from gitaudit.crypto.keystore import generate_key, load_signer
from gitaudit.crypto.signers import Ed25519Signer, Signer
from gitaudit.errors import LedgerError
from gitaudit.ledger.approvals import (
    APPROVALS_PATH,
    NAMESPACE,
    Approvals,
    ChangeProposed,
    Proposal,
    change_digest,
    statement,
)
from gitaudit.ledger.objects import dumps
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.proposals import approve, find
from gitaudit.ledger.refs import PLANS_REF
from gitaudit.ledger.seals import retire_plan, set_policy, trust_add
from gitaudit.ledger.trust import EvidenceRule
from gitaudit.plan.catalog import check_worktree
from tests.adversarial.conftest import (
    STRICT,
    World,
    assert_plan,
    assert_plans_level,
    check,
    codes,
    only,
    plan,
    runner,
    step,
)
from tests.gitrepo import git

WEAK = plan(step("unit", check("true")))


@dataclass
class Council:
    world: World
    bob: Ed25519Signer
    carol: Ed25519Signer

    @property
    def alice(self) -> Ed25519Signer:
        return self.world.alice

    def require(self, **kinds: int) -> None:
        """alice raises what the policy asks for (a strengthening: one sealer is enough)."""
        handle = self.world.handle()
        policy = read_state(handle).policy
        wanted = replace(policy, approvals=tuple(sorted(kinds.items())))
        commit, laxer = set_policy(handle, self.alice, wanted, allow_weaken=False, reason=None)
        assert commit is not None and not laxer

    def propose_weakening(self) -> Proposal:
        """alice seals WEAK with --allow-weaken: it becomes a proposal, not a seal."""
        before = self.world.ref(PLANS_REF)
        with pytest.raises(ChangeProposed) as proposed:
            self.world.seal(WEAK, reason="lint is redundant", allow_weaken=True)
        assert self.world.ref(PLANS_REF) == before, "a proposal must not move the plans ref"
        return proposed.value.proposal

    def forge(self, files: dict[str, bytes], signer: Signer | None = None) -> None:
        self.world.forge_plans(files, signer or self.alice)


def approvals_json(parent: str, files: dict[str, bytes], signatures: list[str]) -> bytes:
    return dumps(Approvals(parent, change_digest(files), tuple(signatures)).to_json())


def sign(signer: Signer, parent: str, files: dict[str, bytes]) -> str:
    return signer.sign(statement(parent, change_digest(files)), NAMESPACE)


@pytest.fixture
def council(sealed: World) -> Council:
    keys = {name: generate_key(name).private_path for name in ("bob", "carol")}
    signers = {name: load_signer(path) for name, path in keys.items()}
    handle = sealed.handle()
    for name, signer in signers.items():
        trust_add(handle, sealed.alice, signer.public_key, "sealer", name)
    sealed.keys = {**sealed.keys, **keys}
    council = Council(sealed, signers["bob"], signers["carol"])  # type: ignore[arg-type]
    council.require(weaken=2)
    return council


def _weakened(world: World) -> bool:
    state = read_state(world.handle())
    record = state.seal("default")
    assert record is not None
    return record.weakened


# --------------------------------------------------------------------------------- attacks


def test_attack_approvals_k_minus_one_are_not_enough(council: Council) -> None:
    """The policy asks for 3 sealers to weaken; alice proposes, bob approves: 2 of 3 apply
    nothing, and a hand-made commit carrying those 2 approvals is refused by every reader."""
    council.require(weaken=3)
    proposal = council.propose_weakening()
    outcome = approve(council.world.handle(), council.bob, proposal.id)
    assert outcome.applied is None and outcome.approvers == ("alice", "bob")
    assert outcome.required == 3
    assert not _weakened(council.world)
    parent = council.world.ref(PLANS_REF)
    assert parent == proposal.parent
    files = dict(proposal.files)
    files[APPROVALS_PATH] = approvals_json(
        parent, files, [sign(council.alice, parent, files), sign(council.bob, parent, files)]
    )
    council.forge(files)
    result = council.world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "needs the approval of 3 distinct sealers; 2 approved (alice, bob)" in (
        result.reasons[0].message
    )


def test_attack_approvals_same_sealer_twice_counts_once(council: Council) -> None:
    """alice signs the approval twice (once with sha512, once with sha256: two different
    signatures by one key) and approves her own proposal again: one sealer is one approval."""
    proposal = council.propose_weakening()
    again = approve(council.world.handle(), council.alice, proposal.id)
    assert again.applied is None and again.approvers == ("alice",)
    parent, files = proposal.parent, dict(proposal.files)
    data = statement(parent, change_digest(files))
    seed = council.alice._key.encode()  # the raw seed: a second, distinct signature
    twice = [
        sign(council.alice, parent, files),
        sshsig.sign_raw(seed, data, NAMESPACE, hash_algorithm="sha256"),
    ]
    assert twice[0] != twice[1]
    files[APPROVALS_PATH] = approvals_json(parent, files, twice)
    council.forge(files)
    result = council.world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "needs the approval of 2 distinct sealers; 1 approved (alice)" in (
        result.reasons[0].message
    )


def test_attack_approvals_of_a_stale_proposal_do_not_count(council: Council) -> None:
    """The plans ref moves (a strengthening of another plan) after alice proposed: bob's
    approval is refused, and the approvals of alice and bob, made for the old parent, do not
    make the change acceptable on the new one."""
    proposal = council.propose_weakening()
    stale_files = dict(proposal.files)
    old_parent = proposal.parent
    approvals = [
        sign(council.alice, old_parent, stale_files),
        sign(council.bob, old_parent, stale_files),
    ]
    council.world.seal(STRICT, "other")  # the plans ref moves on
    with pytest.raises(LedgerError, match="stale: refs/audit/plans moved"):
        approve(council.world.handle(), council.bob, proposal.id)
    assert find(council.world.handle(), proposal.id).state == "stale"
    files = council.world.plans_files()
    files.pop(APPROVALS_PATH, None)
    for path in ("plans/default.json", "seals/default.json"):
        files[path] = stale_files[path]
    files[APPROVALS_PATH] = dumps(
        Approvals(old_parent, change_digest(files), tuple(approvals)).to_json()
    )
    council.forge(files)
    result = council.world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "stale approvals do not count" in result.reasons[0].message


def test_attack_approvals_bound_to_another_change(council: Council) -> None:
    """bob approved alice's proposal (drop the step lint); a commit carrying those approvals
    retires the plan instead: the approvals are for another change."""
    proposal = council.propose_weakening()
    parent, approved = proposal.parent, dict(proposal.files)
    signatures = [sign(council.alice, parent, approved), sign(council.bob, parent, approved)]
    with pytest.raises(ChangeProposed) as retiring:
        retire_plan(council.world.handle(), council.alice, "default", "not needed")
    files = dict(retiring.value.proposal.files)
    files[APPROVALS_PATH] = approvals_json(parent, approved, signatures)
    council.forge(files)
    result = council.world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "approves another change than the one this commit makes" in result.reasons[0].message


def test_attack_approvals_hand_made_commit_without_them(council: Council) -> None:
    """alice, a trusted sealer, signs the weakening herself in a hand-made plans commit without
    approvals.json: status refuses the plans ref."""
    proposal = council.propose_weakening()
    council.forge(dict(proposal.files))
    council.world.repo.commit("weak plan")
    result = council.world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "(weaken) needs the approval of 2 distinct sealers and carries none" in (
        result.reasons[0].message
    )


def test_attack_approvals_hand_made_commit_refused_by_the_server(
    council: Council, tmp_path: Path
) -> None:
    """The same hand-made commit pushed straight to the server (no client hook involved): its
    pre-receive refuses it, whatever the client did."""
    council.world.serve(tmp_path / "server.git")
    proposal = council.propose_weakening()
    council.forge(dict(proposal.files))
    pushed = subprocess.run(
        ["git", "push", "origin", f"{PLANS_REF}:{PLANS_REF}"],
        cwd=council.world.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert pushed.returncode != 0 and f"rejecting {PLANS_REF}" in pushed.stderr, pushed.stderr
    assert "(weaken) needs the approval of 2 distinct sealers" in pushed.stderr
    server_tip = git(tmp_path / "server.git", "rev-parse", PLANS_REF).strip()
    assert server_tip == proposal.parent


def test_attack_approvals_by_an_untrusted_key_do_not_count(council: Council) -> None:
    """mallory (trusted by nobody) and ci (a runner, not a sealer) add their approvals to
    alice's: one sealer approved."""
    proposal = council.propose_weakening()
    parent, files = proposal.parent, dict(proposal.files)
    signatures = [
        sign(council.alice, parent, files),
        sign(council.world.mallory, parent, files),
        sign(council.world.ci, parent, files),
    ]
    files[APPROVALS_PATH] = approvals_json(parent, files, signatures)
    council.forge(files)
    result = council.world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "needs the approval of 2 distinct sealers; 1 approved (alice)" in (
        result.reasons[0].message
    )


def test_attack_approvals_lowered_without_approvals(council: Council) -> None:
    """alice lowers what a weakening needs back to 1 (then she could weaken alone): a
    proposal; the same policy in a hand-made commit signed by her is refused."""
    handle = council.world.handle()
    policy = read_state(handle).policy
    lax = replace(policy, approvals=())
    with pytest.raises(ChangeProposed) as proposed:
        set_policy(handle, council.alice, lax, allow_weaken=True, reason="too slow")
    assert proposed.value.proposal.required == 2
    assert read_state(handle).policy.approvals_for("weaken") == 2
    council.forge(dict(proposed.value.proposal.files))
    result = council.world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "(weaken, policy) needs the approval of 2 distinct sealers" in (
        result.reasons[0].message
    )


@pytest.mark.parametrize("change", ["neutral", "strengthened"])
def test_attack_approvals_amendment_by_dropping_the_manifest(council: Council, change: str) -> None:
    """The policy asks two sealers to amend protected files. Plan `guarded` runs check.sh, which
    fails; its seal protects it. alice alone signs a hand-made seal v2 of `guarded` (the same
    contract, or one with a check added) whose record binds no protected-files manifest, as a
    seal made before protection existed: nothing is protected any more, so the agent makes
    check.sh pass and ci's run PASSed. Dropping the manifest amends every file it protected:
    it needs the amend approvals."""
    world = council.world
    council.require(weaken=2, amend=2)
    world.repo.write("check.sh", "exit 1\n")
    guarded = plan(step("unit", check("sh", "check.sh")))
    world.seal(guarded, "guarded")
    files = world.plans_files()
    assert "protected/guarded.json" in files
    v1 = json.loads(files["seals/guarded.json"])
    v2 = {**v1, "version": 2, "previous_digest": v1["contract_digest"], "change": change}
    del v2["protected_digest"]
    if change == "strengthened":
        guarded["steps"][0]["verify"].append(check("true"))
        world.write_plan(guarded, "guarded")
        (checked,) = check_worktree(world.path, "guarded")
        v2.update(contract_digest=checked.digest, strengthenings=["step unit verify: added"])
        files["plans/guarded.json"] = checked.file.data
    files["seals/guarded.json"] = dumps(v2)
    del files["protected/guarded.json"]
    council.forge(files)
    world.repo.write("check.sh", "exit 0\n")
    world.repo.commit("check.sh passes now")
    result = world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "(amend) needs the approval of 2 distinct sealers and carries none" in (
        result.reasons[0].message
    )


SKIP_ALL = (
    "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
    "    for item in items:\n        item.add_marker(pytest.mark.skip)\n"
)
PYTESTED = {
    **plan(step("unit", {"type": "pytest", "argv": ["-q", "-p", "no:cacheprovider", "tests"]})),
    "python": sys.executable,
}


def _titled() -> dict[str, Any]:
    data = copy.deepcopy(PYTESTED)
    data["steps"][0]["title"] = "unit tests"
    return data


def _skip_all(world: World) -> dict[str, Any]:
    world.repo.write("tests/conftest.py", SKIP_ALL)
    return _titled()


def _skip_all_from_the_root(world: World) -> dict[str, Any]:
    world.repo.write("conftest.py", SKIP_ALL)
    data = copy.deepcopy(PYTESTED)
    data["steps"][0]["verify"].append(check("true"))
    return data


def _failing_test_deleted(world: World) -> dict[str, Any]:
    (world.path / "tests/test_hard.py").unlink()
    return _titled()


# id: (what the agent does to the tree, returning the plan alice seals, the seal's change)
AMENDED_BY_THE_MANIFEST = {
    "a-conftest-added-with-a-new-title": (_skip_all, "neutral"),
    "a-root-conftest-added-with-a-check-added": (_skip_all_from_the_root, "strengthened"),
    "a-failing-test-deleted-with-a-new-title": (_failing_test_deleted, "neutral"),
}


@pytest.mark.parametrize("case", list(AMENDED_BY_THE_MANIFEST))
def test_attack_approvals_amendment_by_a_file_new_to_or_gone_from_the_manifest(
    council: Council, case: str
) -> None:
    """The policy asks two sealers to amend protected files. Plan `guarded` runs pytest on
    tests/, where one test fails; the agent adds a conftest.py that skips every test (or deletes
    the failing test): plan.protected-changed. alice alone signs a hand-made seal v2 with no
    approvals.json that changes only a step title (or adds a check) and binds the manifest of
    the agent's tree. A new contract let the manifest differ in files protected before and
    after only, so a file added or gone was no amendment: the chain took it and ci's run PASSed.
    A file the old plan protects that enters or leaves the manifest is an amendment."""
    cheat, change = AMENDED_BY_THE_MANIFEST[case]
    world = council.world
    council.require(weaken=2, amend=2)
    world.repo.write("tests/test_easy.py", "def test_easy():\n    assert 6 * 7 == 42\n")
    world.repo.write("tests/test_hard.py", "def test_hard():\n    assert 6 * 7 == 41\n")
    world.seal(PYTESTED, "guarded")
    assert world.run("guarded").verdict == "FAIL"
    newplan = cheat(world)
    world.repo.commit("the agent's tree")
    assert world.run("guarded").verdict == "PASS"  # the checks pass on the agent's tree
    assert "plan.protected-changed" in codes(only(world.gate(), "guarded"))
    world.write_plan(newplan, "guarded")
    world.repo.commit("alice's new plan")
    files, _ = world.hand_made_seal_v2("guarded", change)
    council.forge(files)  # signed by alice alone, no approvals.json
    result = world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "(amend) needs the approval of 2 distinct sealers and carries none" in (
        result.reasons[0].message
    )


# -------------------------------------------------------------------------------- controls


def test_approvals_k_of_them_apply_the_change(council: Council, tmp_path: Path) -> None:
    """Control: alice proposes, bob approves: the weakening is applied, signed, with both
    approvals; a fresh reader (no marks) and the server accept it."""
    council.world.serve(tmp_path / "server.git")
    proposal = council.propose_weakening()
    outcome = approve(council.world.handle(), council.bob, proposal.id)
    assert outcome.applied is not None and outcome.approvers == ("alice", "bob")
    assert _weakened(council.world)
    stored = json.loads(council.world.plans_files()[APPROVALS_PATH])
    assert stored["parent"] == proposal.parent and len(stored["signatures"]) == 2
    council.world.repo.commit("weak plan, sealed with approvals")
    assert council.world.run().verdict == "PASS"
    assert council.world.gate().verdict == "PASS"
    council.world.repo.git("push", "origin", f"{PLANS_REF}:{PLANS_REF}")
    server_tip = git(tmp_path / "server.git", "rev-parse", PLANS_REF).strip()
    assert server_tip == outcome.applied


def test_approvals_changes_needing_none_work_with_one_key(council: Council) -> None:
    """Control: with weaken=2, strengthening, sealing a new plan and trusting another runner
    need alice alone, as before."""
    stronger = plan(step("unit", check("true")), step("lint", check("true")), step("doc"))
    assert council.world.seal(stronger, reason="docs too").commit is not None
    assert council.world.seal(WEAK, "second").commit is not None
    runner = Ed25519Signer.generate("ci2")
    handle = council.world.handle()
    assert trust_add(handle, council.alice, runner.public_key, "runner", "ci2") is not None
    (checked,) = check_worktree(council.world.path, "default")
    assert checked.digest == read_state(handle).seal("default").contract_digest  # type: ignore[union-attr]


@pytest.mark.parametrize("how", ["a new key", "a runner made sealer", "bob's key replaced"])
def test_attack_approvals_second_sealer_key_added_by_one(council: Council, how: str) -> None:
    """The policy asks two sealers to weaken (the example of sealing.md: `trust` left at 1).
    A process that read alice's key trusts a key it made as a sealer (`alice2`), makes ci's
    runner key (which it read too) a sealer, or puts its key in place of bob's: one sealer's
    change. It then holds two sealer keys, proposes the weakening with alice's and approves it
    with its own: the weak plan was applied and ci's run of it PASSed (3 of 3 before the fix).
    A change that makes a key a sealer now needs as many sealers as the policy asks for any
    kind (a protection is never undone by fewer sealers than it protects with): the trust
    change is a proposal, and the same change signed by alice alone is refused."""
    world = council.world
    handle = world.handle()
    if how == "a runner made sealer":
        second: Signer = world.ci
        name = "ci"
    else:
        second = Ed25519Signer.generate("alice2")
        name = "alice2"
    before = world.ref(PLANS_REF)
    if how == "bob's key replaced":
        state = read_state(handle)
        trust = state.trust.removed("bob").added("bob", second.public_key, "sealer")
        files = {**world.plans_files(), **trust.files()}
        world.forge_plans(files, council.alice)
        result = world.gate()
        assert_plans_level(result, "plans.untrusted")
        assert "(trust) needs the approval of 2 distinct sealers" in result.reasons[0].message
        return
    with pytest.raises(ChangeProposed) as proposed:
        trust_add(handle, council.alice, second.public_key, "sealer", name)
    assert proposed.value.proposal.required == 2
    assert world.ref(PLANS_REF) == before
    entry = read_state(handle).trust.named(name)
    assert entry is None or not entry.may("sealer")
    world.forge_plans(dict(proposed.value.proposal.files), council.alice)
    result = world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "(trust) needs the approval of 2 distinct sealers" in result.reasons[0].message


def test_approvals_control_a_sealer_added_by_k_sealers(council: Council) -> None:
    """Control: alice proposes trusting dave as a sealer, bob approves: dave is a sealer, and
    the gate accepts the plans ref; a runner still takes alice alone."""
    world = council.world
    dave = Ed25519Signer.generate("dave")
    with pytest.raises(ChangeProposed) as proposed:
        trust_add(world.handle(), council.alice, dave.public_key, "sealer", "dave")
    outcome = approve(world.handle(), council.bob, proposed.value.proposal.id)
    assert outcome.applied is not None and outcome.approvers == ("alice", "bob")
    entry = read_state(world.handle()).trust.named("dave")
    assert entry is not None and entry.may("sealer")
    runner = Ed25519Signer.generate("ci2")
    assert trust_add(world.handle(), council.alice, runner.public_key, "runner", "ci2")
    world.run()
    assert world.gate().verdict == "PASS"


MAIN = "refs/heads/main"
ADMITTED_BY_ONE = ["label given to the agent", "new runner with the label", "ci's name given"]


@pytest.mark.parametrize("how", ADMITTED_BY_ONE)
def test_attack_approvals_runner_admitted_to_an_evidence_rule_by_one(
    council: Council, how: str, tmp_path: Path
) -> None:
    """The policy asks two sealers to weaken (``trust`` left at 1, the example of sealing.md),
    and main is proven only by the runner ``ci`` or one labelled ``release-ci``; the agent's
    own runner key ``agent`` is advisory there. Widening the rule in policy.json is a
    weakening (two sealers). A process that read alice's key does it through the trust set
    instead: it gives the agent's key the label ``release-ci``, trusts a new key of its own
    with it, or gives the name ``ci`` to the agent's key. A trust change, one sealer's: it was
    applied, and the agent's own run (a runner's word, which the rule says does not count for
    main) made main PASS (3 of 3 before the fix). A trust change that lets a rule admit a key
    it did not now needs what a weakening needs: proposed, not applied, and the same commit
    signed by alice alone is refused by every reader, the server's pre-receive too."""
    world = council.world
    world.serve(tmp_path / "server.git")
    handle = world.handle()
    policy = read_state(handle).policy
    rule = EvidenceRule(MAIN, ("ci", "release-ci"))
    set_policy(
        handle, council.alice, replace(policy, evidence=(rule,)), allow_weaken=False, reason=None
    )
    agent = runner(world, "agent")
    assert world.run(signer=agent).verdict == "PASS"
    assert_plan(world.gate(for_ref=MAIN), "evidence.runner-rule", "UNKNOWN")
    before = world.ref(PLANS_REF)
    trust = read_state(handle).trust
    if how == "label given to the agent":
        changed = trust.added("agent", agent.public_key, "runner", frozenset({"release-ci"}))
    elif how == "new runner with the label":
        extra = Ed25519Signer.generate("ci2")
        changed = trust.added("ci2", extra.public_key, "runner", frozenset({"release-ci"}))
    else:
        changed = trust.removed("ci").removed("agent").added("ci", agent.public_key, "runner")
    if how != "ci's name given":
        key = agent.public_key if how == "label given to the agent" else extra.public_key
        name = "agent" if how == "label given to the agent" else "ci2"
        with pytest.raises(ChangeProposed) as proposed:
            trust_add(handle, council.alice, key, "runner", name, frozenset({"release-ci"}))
        assert proposed.value.proposal.required == 2
        assert "weaken" in proposed.value.proposal.kinds
        assert world.ref(PLANS_REF) == before
    served = git(tmp_path / "server.git", "rev-parse", PLANS_REF).strip()
    world.forge_plans({**world.plans_files(), **changed.files()}, council.alice)
    result = world.gate(for_ref=MAIN)
    assert_plans_level(result, "plans.untrusted")
    assert "(weaken, trust) needs the approval of 2 distinct sealers" in result.reasons[0].message
    pushed = subprocess.run(
        ["git", "push", "origin", f"{PLANS_REF}:{PLANS_REF}"],
        cwd=world.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert pushed.returncode != 0 and f"rejecting {PLANS_REF}" in pushed.stderr, pushed.stderr
    assert "(weaken, trust) needs the approval of 2 distinct sealers" in pushed.stderr
    assert git(tmp_path / "server.git", "rev-parse", PLANS_REF).strip() == served


def test_approvals_control_runners_outside_the_rules_take_one_sealer(council: Council) -> None:
    """Control: with main's rule in place, a runner the rule does not admit, a label the rule
    does not name, and a new key for a runner no rule governs take alice alone; ci's run
    still makes main PASS."""
    world = council.world
    handle = world.handle()
    policy = read_state(handle).policy
    rule = EvidenceRule(MAIN, ("ci", "release-ci"))
    set_policy(
        handle, council.alice, replace(policy, evidence=(rule,)), allow_weaken=False, reason=None
    )
    agent = runner(world, "agent", frozenset({"laptop"}))
    assert trust_add(handle, council.alice, agent.public_key, "runner", "agent", frozenset({"dev"}))
    extra = Ed25519Signer.generate("ci2")
    assert trust_add(handle, council.alice, extra.public_key, "runner", "ci2")
    assert world.run().verdict == "PASS"
    assert world.gate(for_ref=MAIN).verdict == "PASS"


MISSTATED = {
    "a policy change": (("policy",), "policy: commit-msg strict\n\nnothing else changes\n"),
    "nothing weighed": ((), "seal(default): v2 strengthened\n\n+ step doc: added\n"),
}


@pytest.mark.parametrize("claim", list(MISSTATED))
def test_attack_approvals_proposal_misstates_its_kinds(council: Council, claim: str) -> None:
    """The policy asks two sealers to weaken and to change the policy. A process that read
    alice's key writes the weakening (drop ``lint``) as a proposal whose proposal.json says it
    is of kind ``policy`` (or of no weighed kind) and whose message describes a harmless policy
    change (or a strengthening). ``git audit proposals`` printed the proposal's own word as its
    kinds, so bob, reviewing it, read "kinds policy" and approved: the weakening was applied
    with two approvals (2 of 2 before the fix). The kinds shown are now the ones its change
    makes on its parent, and ``approve`` refuses a proposal that misstates them."""
    from gitaudit.ledger import approvals

    council.require(weaken=2, policy=2)
    world = council.world
    genuine = council.propose_weakening()
    git(world.path, "update-ref", "-d", f"refs/audit/proposals/{genuine.id}")
    kinds, message = MISSTATED[claim]
    with pytest.raises(ChangeProposed) as proposed:
        raise approvals.propose(
            world.handle().git,
            council.alice,
            proposer="alice",
            parent=genuine.parent,
            files=dict(genuine.files),
            message=message,
            need=approvals.Need(kinds, 2),
            trust=read_state(world.handle()).trust,
            now="2026-12-06T00:00:00Z",
        )
    pid = proposed.value.proposal.id
    shown = world.cli("proposals", pid)
    assert shown.code == 0, shown.err
    assert "  kinds      weaken\n" in shown.out, shown.out
    listed = world.cli("proposals")
    assert "(weaken; by alice)" in listed.out, listed.out
    with pytest.raises(LedgerError, match="misstates") as refused:
        approve(world.handle(), council.bob, pid)
    assert "\n" not in refused.value.message
    assert not _weakened(world)
