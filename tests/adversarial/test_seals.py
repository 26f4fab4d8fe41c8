"""Attacks on refs/audit/plans: seal records, sealed copies, trust and the chain itself."""

from __future__ import annotations

import copy
import json
import shutil
import sys
from dataclasses import replace
from typing import Any

import pygit2
import pytest

from gitaudit.crypto.keystore import generate_key, load_signer
from gitaudit.errors import SealError
from gitaudit.ledger.objects import dumps, write_tree
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.refs import PLANS_REF
from gitaudit.ledger.seals import set_policy, trust_add
from gitaudit.ledger.trust import Policy, TrustSet
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
    step,
)
from tests.adversarial.test_reconcile import deploy_plan
from tests.adversarial.test_request import REQUEST, Asked, answering, tied
from tests.gitrepo import forget_marks

WEAK = plan(step("unit", check("true")))


def _weak_digest(world: World) -> str:
    """The contract digest of WEAK (written to the work tree, not committed)."""
    world.write_plan(WEAK)
    (checked,) = check_worktree(world.path, "default")
    assert checked.digest is not None
    return checked.digest


def _forge_weak_seal(world: World) -> dict[str, bytes]:
    """The current plans files with a well-formed seal v2 of WEAK (a recorded weakening, as
    `plan seal --allow-weaken` would write it): only the signature can tell it is forged."""
    files = world.plans_files()
    record = json.loads(files["seals/default.json"])
    record.update(
        contract_digest=_weak_digest(world),
        previous_digest=record["contract_digest"],
        version=record["version"] + 1,
        change="weakened",
        weakened=True,
        weakenings=["step lint removed"],
        reason="(forged)",
    )
    files["seals/default.json"] = dumps(record)
    files["plans/default.json"] = (world.path / ".gitaudit/plans/default.json").read_bytes()
    return files


def test_attack_seals_edited_by_an_unsigned_commit(proven: World) -> None:
    """The seal record is rewritten to WEAK's digest in an unsigned plans commit."""
    proven.forge_plans(_forge_weak_seal(proven), None)
    proven.repo.commit("weak plan, matching the (forged) seal")
    result = proven.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "is not signed" in result.reasons[0].message


def test_attack_seals_resigned_by_an_untrusted_key_in_a_fresh_clone(proven: World) -> None:
    """mallory signs the weakened seal; the local high-water mark is gone (as in a fresh
    clone), so the chain is verified from the root and her commit is refused by signature."""
    proven.forge_plans(_forge_weak_seal(proven), proven.mallory)
    proven.repo.commit("weak plan")
    forget_marks(proven.handle().gitdir)  # as in a fresh clone: no marks, no floors
    shutil.rmtree(proven.handle().state_dir)
    result = proven.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "not signed by a trusted sealer" in result.reasons[0].message


def test_attack_seals_replacement_root_of_trust(proven: World) -> None:
    """mallory replaces the whole plans history with her own root in which she is the sealer
    (no high-water mark): the root key pinned by `trust init` (audit.rootKey) refuses it."""
    files = _forge_weak_seal(proven)
    trust = TrustSet().added("mallory", proven.mallory.public_key, "sealer")
    trust = trust.added("mallory", proven.mallory.public_key, "runner")
    files.update(trust.files())
    git = proven.handle().git
    root = proven.commit_object(git, write_tree(git, files), [], "trust: mine\n", proven.mallory)
    proven.set_ref(PLANS_REF, root)
    proven.repo.commit("weak plan")
    forget_marks(proven.handle().gitdir)  # as in a fresh clone: no marks, no floors
    shutil.rmtree(proven.handle().state_dir)
    result = proven.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "not by the pinned audit.rootKey" in result.reasons[0].message


def test_attack_seals_record_swapped_between_plans(world: World) -> None:
    """seals/a.json's content (the weak plan's seal) placed at seals/b.json, with a's sealed copy
    as b's, even in a commit signed by the real sealer: the record names another plan."""
    world.seal(WEAK, "a")
    world.seal(STRICT, "b")
    files = world.plans_files()
    files["seals/b.json"] = files["seals/a.json"]
    files["plans/b.json"] = files["plans/a.json"]
    world.forge_plans(files, world.alice)
    result = world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "seals/b.json is a seal for plan 'a', not 'b'" in result.reasons[0].message


def test_attack_seals_old_seal_replayed(world: World) -> None:
    """Seal v1 (weak), then v2 (strict). The agent resets refs/audit/plans to v1 and reverts the
    plan file, hoping to be judged by the weaker contract with the evidence made under it."""
    world.seal(WEAK)
    v1 = world.ref(PLANS_REF)
    assert world.run().verdict == "PASS"
    world.seal(STRICT, reason="add lint")
    assert world.gate().verdict == "UNKNOWN"  # status ran: the v2 tip is the verified mark
    world.set_ref(PLANS_REF, v1)  # type: ignore[arg-type]
    world.write_plan(WEAK)
    world.repo.commit("back to the weak plan")
    result = world.gate("HEAD~1")  # the tree that has v1 evidence
    assert_plans_level(result, "plans.untrusted")
    assert "moved backwards or was rewritten" in result.reasons[0].message


def test_attack_seals_plans_ref_rewound_to_the_root(proven: World) -> None:
    """refs/audit/plans rewound to its root commit (trust only, no seal at all)."""
    git = proven.handle().git
    root = git.revparse_single(PLANS_REF).peel(pygit2.Commit)
    while root.parents:
        root = root.parents[0]
    proven.set_ref(PLANS_REF, root.id)
    result = proven.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "moved backwards" in result.reasons[0].message


def test_attack_seals_plans_ref_deleted(proven: World) -> None:
    """Without refs/audit/plans nothing is sealed, so a plan file would just be 'unsealed'."""
    proven.repo.git("update-ref", "-d", PLANS_REF)
    result = proven.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "was deleted" in result.reasons[0].message


def _forge_root(world: World, files: dict[str, bytes]) -> None:
    """Replace refs/audit/plans by a one-commit history holding *files*, signed by alice (the
    pinned root key), as a fresh clone would fetch it (no high-water mark)."""
    git = world.handle().git
    root = world.commit_object(git, write_tree(git, files), [], "trust: hand-made\n", world.alice)
    world.set_ref(PLANS_REF, root)
    forget_marks(world.handle().gitdir)  # as in a fresh clone: no marks, no floors
    shutil.rmtree(world.handle().state_dir)


def test_attack_seals_sealed_copy_differs_from_the_record(proven: World) -> None:
    """The sealed copy is replaced by WEAK while the record keeps STRICT's digest, in a commit
    signed by the real sealer: the chain check refuses the transition."""
    files = proven.plans_files()
    files["plans/default.json"] = json.dumps(WEAK).encode()
    proven.forge_plans(files, proven.alice)
    result = proven.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "does not match its seal record" in result.reasons[0].message


def test_attack_seals_sealed_copy_differs_in_a_hand_made_root(proven: World) -> None:
    """The same tampering as the root of a hand-made history signed by the pinned root key
    (no transition to check): the gate compares the copy with the record itself."""
    files = proven.plans_files()
    files["plans/default.json"] = json.dumps(WEAK).encode()
    _forge_root(proven, files)
    judged = assert_plan(proven.gate(), "seal.tampered", "FAIL")
    assert "does not match its seal record" in judged.reasons[0].message


def test_attack_seals_sealed_copy_removed(proven: World) -> None:
    """The sealed copy is deleted from the plans tree while the seal stays active (sealer-signed
    hand-made commit)."""
    files = proven.plans_files()
    del files["plans/default.json"]
    proven.forge_plans(files, proven.alice)
    judged = assert_plan(proven.gate(), "seal.tampered", "FAIL")
    assert "sealed copy of plan 'default' is missing" in judged.reasons[0].message


def test_attack_seals_policy_digest_mismatch(proven: World) -> None:
    """policy.json edited without carrying the seals over. `trust policy` always re-binds the
    seals and the chain check refuses a seal changed in place, so this is reachable only in a
    hand-made root signed by the pinned root key (unsigned or foreign-signed it is
    plans.untrusted before anything else)."""
    files = proven.plans_files()
    policy = json.loads(files["policy.json"])
    policy["protected_refs"] = ["refs/heads/release"]
    files["policy.json"] = dumps(policy)
    _forge_root(proven, files)
    judged = assert_plan(proven.gate(), "seal.policy-mismatch", "FAIL")
    assert "binds another policy" in judged.reasons[0].message


def test_attack_seals_policy_changed_in_place(proven: World) -> None:
    """The same policy edit appended as a sealer-signed commit on the verified chain."""
    files = proven.plans_files()
    policy = json.loads(files["policy.json"])
    policy["protected_refs"] = ["refs/heads/release"]
    files["policy.json"] = dumps(policy)
    proven.forge_plans(files, proven.alice)
    result = proven.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "without a new version" in result.reasons[0].message


def _uncovering(data: dict[str, Any], *ids: str) -> dict[str, Any]:
    for each in data["steps"]:
        if each["id"] in ids:
            each["covers"] = []
    return data


# R covered only by full, an alternative of ship: every PASS verifies full
BY_AN_ALTERNATIVE = tied(
    _uncovering(
        plan(step("full"), step("fast"), step("ship", deps=[{"any_of": ["fast", "full"]}])),
        "fast",
        "ship",
    )
)


@pytest.mark.parametrize(
    ("base", "new", "words"),
    [
        pytest.param(
            None,
            tied(
                plan(
                    *STRICT["steps"],
                    step("trivial"),
                    step("done", deps=[{"any_of": ["trivial", "unit"]}]),
                )
            ),
            "step unit: no longer required: an any_of alternative route avoids it",
            id="a-new-sink-names-it-in-any_of",
        ),
        pytest.param(
            None,
            tied(
                plan(
                    *STRICT["steps"],
                    step("trivial"),
                    step("wrap", deps=["unit"]),
                    step("done", deps=[{"any_of": ["wrap", "trivial"]}]),
                )
            ),
            "step unit: no longer required: an any_of alternative route avoids it",
            id="an-any_of-downstream-of-a-new-wrapper",
        ),
        pytest.param(
            BY_AN_ALTERNATIVE,
            tied(plan(*copy.deepcopy(BY_AN_ALTERNATIVE["steps"]), step("cheap"))),
            "coverage of R: can now be met without any step that covered it (full)",
            id="a-new-step-covers-what-only-an-alternative-covered",
        ),
    ],
)
def test_attack_seals_required_step_made_optional_where_weakening_is_forbidden(
    world: World, base: dict[str, Any] | None, new: dict[str, Any], words: str
) -> None:
    """With `allow_weaken: false`, alice reseals a plan that only adds steps (an any_of route
    around unit, or a new step covering what only an alternative covered): every PASS verified
    unit (full) before, now one need not. Refused like any weakening, with --allow-weaken too;
    a hand-made commit of hers recording it as a strengthening is refused by the chain."""
    world.seal(base or STRICT)
    set_policy(
        world.handle(), world.alice, Policy(allow_weaken=False), allow_weaken=False, reason=None
    )
    tip = world.ref(PLANS_REF)
    for allow in (False, True):
        with pytest.raises(SealError) as caught:
            world.seal(new, reason="one more step", allow_weaken=allow)
        assert "policy.json forbids weakening" in caught.value.message, caught.value.message
        assert words in caught.value.message
    assert world.ref(PLANS_REF) == tip
    files = world.plans_files()
    record = json.loads(files["seals/default.json"])
    (checked,) = check_worktree(world.path, "default")
    record.update(
        contract_digest=checked.digest,
        previous_digest=record["contract_digest"],
        version=record["version"] + 1,
        change="strengthened",
        strengthenings=["step done: added"],
    )
    files["seals/default.json"] = dumps(record)
    files["plans/default.json"] = checked.file.data
    world.forge_plans(files, world.alice)
    result = world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "weakens the contract without recording it" in result.reasons[0].message


@pytest.mark.parametrize("policy", ["weakening-forbidden", "two-sealers-to-weaken"])
def test_attack_seals_reconciliation_opened_as_an_earlier_rule_strengthening(
    world: World, policy: str
) -> None:
    """`deploy` can never pass its checks (`sleep 30`, timeout 0.5 s). The policy forbids
    weakening, or asks two sealers to weaken. alice alone signs a hand-made seal v2 making deploy
    non-idempotent with a readback check the agent can satisfy, listing both changes among its
    `strengthenings`, as gitaudit wrote them before they counted as weakenings. The chain check
    excused such a listing as a seal made under the earlier rule, so ci's run (deploy unknown)
    and `reconcile deploy --readback` with ci's key gave PASS. Under a policy where one sealer
    could not weaken, the listing excuses nothing: the chain refuses the commit."""
    world.repo.write(".gitignore", "deployed.txt\n")
    world.seal(deploy_plan(idempotent=True, readback=[]))
    handle = world.handle()
    if policy == "weakening-forbidden":
        set_policy(handle, world.alice, Policy(allow_weaken=False), allow_weaken=False, reason=None)
    else:
        bob = load_signer(generate_key("bob").private_path)
        trust_add(handle, world.alice, bob.public_key, "sealer", "bob")
        wanted = replace(read_state(handle).policy, approvals=(("weaken", 2),))
        set_policy(handle, world.alice, wanted, allow_weaken=False, reason=None)
    files = world.plans_files()
    v1 = json.loads(files["seals/default.json"])
    world.write_plan(deploy_plan())  # idempotent: false, readback: deployed.txt exists
    world.repo.commit("deploy may be read back")
    (checked,) = check_worktree(world.path, "default")
    v2 = {
        **v1,
        "contract_digest": checked.digest,
        "previous_digest": v1["contract_digest"],
        "version": v1["version"] + 1,
        "change": "strengthened",
        "weakened": False,
        "strengthenings": [
            "step deploy: idempotent True -> False",
            "step deploy readback: readback check added: file_exists deployed.txt",
        ],
    }
    files["seals/default.json"] = dumps(v2)
    files["plans/default.json"] = checked.file.data
    world.forge_plans(files, world.alice)
    result = world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "seal v2 of 'default' weakens the contract without recording it" in (
        result.reasons[0].message
    )
    status = world.cli("status", "--json")
    assert status.code == 1, status.err
    assert status.json()["reasons"][0]["code"] == "plans.untrusted"


# ------------------------------------------------------- a planner's seal and protected files

SKIP_ALL = (
    "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
    "    for item in items:\n        item.add_marker(pytest.mark.skip)\n"
)
PYTESTED = {
    **answering(
        step("unit", {"type": "pytest", "argv": ["-q", "-p", "no:cacheprovider", "tests"]}),
        step("lint", check("true"), covers=["R2"]),
    ),
    "python": sys.executable,
}
PYTESTED["steps"][0]["covers"] = ["R1"]
SCRIPTED = answering(
    step("unit", check("sh", "check.sh"), covers=["R1"]), step("lint", covers=["R2"])
)


def _more_checks(data: dict[str, Any]) -> dict[str, Any]:
    grown = copy.deepcopy(data)
    grown["steps"][1]["verify"].append(check("true", "again"))
    return grown


# id: (the sealed plan, the file the agent adds and its content, the plan of the forged seal
# (None: the same), whether the forged seal drops the manifest, the refusal)
PLANNER_TAKES_IN = {
    "a-conftest-under-tests": (
        PYTESTED,
        ("tests/conftest.py", SKIP_ALL),
        None,
        False,
        "cannot amend the protected files of plan 'default' (added: tests/conftest.py)",
    ),
    "a-root-conftest-with-a-check-added": (
        PYTESTED,
        ("conftest.py", SKIP_ALL),
        _more_checks(PYTESTED),
        False,
        "cannot amend the protected files of plan 'default' (added: conftest.py)",
    ),
    "the-run-script-into-an-empty-manifest": (
        SCRIPTED,
        ("check.sh", "exit 0\n"),
        None,
        False,
        "cannot amend the protected files of plan 'default' (added: check.sh)",
    ),
    "the-run-script-by-dropping-the-empty-manifest": (
        SCRIPTED,
        ("check.sh", "exit 0\n"),
        None,
        True,
        "cannot drop the protected-files manifest of plan 'default' (seal v1 records one)",
    ),
}


@pytest.mark.parametrize("case", list(PLANNER_TAKES_IN))
def test_attack_seals_planner_takes_in_an_added_protected_file(world: World, case: str) -> None:
    """alice sealed the request; the agent holds a planner key and sealed its plan, whose check
    fails. The agent adds a protected file that makes it pass (a conftest.py that skips every
    test, the check.sh the plan runs, absent when sealed: an empty manifest): the gate says
    plan.protected-changed and `plan seal` with the planner key refuses. So the agent writes the
    next plans commit by hand, signed with its planner key: a seal v2 (the same contract, or a
    check added) whose manifest takes the file in, or that binds no manifest. The chain's
    planner rule looked only at files already in the old manifest: status, verify and the
    server took it, and ci's honest run gave PASS. A file the old plan protects may not enter
    the manifest, nor the manifest go, by a planner's seal."""
    sealed, (path, content), forged, drop, words = PLANNER_TAKES_IN[case]
    generated = generate_key("agent")
    asked = Asked(world, load_signer(generated.private_path), generated.private_path)
    trust_add(world.handle(), world.alice, asked.agent.public_key, "planner", "agent")
    asked.request(REQUEST, reason="what the user wants")
    world.repo.write("tests/test_answer.py", "def test_answer():\n    assert 6 * 7 == 41\n")
    assert asked.seal(sealed).commit is not None
    world.repo.commit("the plan, the request and a failing test")
    assert world.run().verdict == "FAIL"
    world.repo.write(path, content)
    world.repo.commit("the checks pass now")
    assert world.run().verdict == "PASS"  # ci runs the checks: the added file makes them pass
    judged = only(world.gate())
    assert "plan.protected-changed" in codes(judged)
    with pytest.raises(SealError, match=f"added: {path}"):
        asked.seal(sealed)
    if forged is not None:
        world.write_plan(forged)
        world.repo.commit("one more check")
    files, taken = world.hand_made_seal_v2(
        "default", "neutral" if forged is None else "strengthened", bind_manifest=not drop
    )
    assert path in taken
    world.forge_plans(files, asked.agent)
    result = world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert f"planner 'agent' {words}: only a sealer can" in result.reasons[0].message
    verified = world.cli("verify")
    assert verified.code == 1 and words in verified.out
