"""Approvals (k of n) on refs/audit/plans: what each kind of change is, proposals in one clone,
the policy field, and the command line. Attacks are in tests/adversarial/test_approvals.py;
two machines and a server in tests/e2e/test_approvals.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

import pytest

from gitaudit.crypto.keyfile import encode_private_key
from gitaudit.crypto.signers import Ed25519Signer
from gitaudit.errors import LedgerError, SealError, TrustError
from gitaudit.git.repo import Repo
from gitaudit.ledger import approvals
from gitaudit.ledger.approvals import APPROVALS_PATH, ChangeProposed, kinds_of, needed
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.proposals import approve, find, list_proposals, prune
from gitaudit.ledger.protected import manifest, manifest_digest, manifest_path
from gitaudit.ledger.refs import PLANS_REF, read_ref
from gitaudit.ledger.seals import retire_plan, seal_plan, set_policy, trust_add, trust_remove
from gitaudit.ledger.trust import EvidenceRule, Policy
from gitaudit.plan.catalog import check_worktree
from tests.gitrepo import GitRepo, audit
from tests.plan.builders import two_step_plan


@pytest.fixture
def bob() -> Ed25519Signer:
    return Ed25519Signer.generate("bob")


@pytest.fixture
def pair(trusted: Repo, sealer: Ed25519Signer, bob: Ed25519Signer) -> Repo:
    """alice and bob are sealers; the default plan is sealed."""
    trust_add(trusted, sealer, bob.public_key, "sealer", "bob")
    _seal(trusted, sealer)
    return trusted


def _seal(repo: Repo, signer: Ed25519Signer, **kw: object) -> object:
    (checked,) = check_worktree(repo.require_workdir(), "default")
    return seal_plan(repo, signer, checked, **kw)  # type: ignore[arg-type]


def _require(repo: Repo, signer: Ed25519Signer, **kinds: int) -> None:
    policy = replace(read_state(repo).policy, approvals=tuple(sorted(kinds.items())))
    set_policy(repo, signer, policy, allow_weaken=True, reason="approvals")


def _proposed(call: Callable[[], object]) -> ChangeProposed:
    with pytest.raises(ChangeProposed) as proposed:
        call()
    return proposed.value


# ------------------------------------------------------------------------------- the policy


def test_the_policy_field_keeps_old_digests_and_lowering_is_a_weakening() -> None:
    plain = Policy()
    assert "approvals" not in plain.to_json()
    strict = replace(plain, approvals=(("amend", 2), ("weaken", 3)))
    assert strict.to_json()["approvals"] == {"amend": 2, "weaken": 3}
    assert Policy.from_json(strict.to_json(), "here") == strict
    assert strict.laxer_than(plain) == []
    assert plain.laxer_than(strict) == [
        "amend approvals: 2 -> 1 sealer(s)",
        "weaken approvals: 3 -> 1 sealer(s)",
    ]
    bad: object
    for bad in ({"approve": 2}, {"weaken": 0}, {"weaken": True}, []):
        with pytest.raises(TrustError, match="approvals"):
            Policy.from_json({**plain.to_json(), "approvals": bad}, "here")


def test_a_policy_no_set_of_sealers_could_satisfy_is_refused(
    pair: Repo, sealer: Ed25519Signer
) -> None:
    with pytest.raises(SealError, match="more distinct sealers than the 2 trusted"):
        _require(pair, sealer, weaken=3)
    _require(pair, sealer, trust=2)
    # removing bob would leave one sealer where a trust change needs two
    with pytest.raises(SealError, match="more distinct sealers than the 1 trusted"):
        trust_remove(pair, sealer, "bob")
    assert read_state(pair).trust.named("bob") is not None


# -------------------------------------------------------------------------------- the kinds


def test_each_kind_of_change_is_recognised(
    pair: Repo, sealer: Ed25519Signer, bob: Ed25519Signer, repo: GitRepo
) -> None:
    _require(pair, sealer, weaken=2, trust=2, policy=2, request=2)
    carol = Ed25519Signer.generate("carol")
    added = _proposed(lambda: trust_add(pair, sealer, carol.public_key, "runner", "carol"))
    assert added.proposal.kinds == ("trust",)
    stricter = replace(read_state(pair).policy, commit_msg="strict")
    proposed = _proposed(
        lambda: set_policy(pair, sealer, stricter, allow_weaken=False, reason=None)
    )
    assert proposed.proposal.kinds == ("policy",)
    weaker = replace(read_state(pair).policy, approvals=(("trust", 2),))
    proposed = _proposed(lambda: set_policy(pair, sealer, weaker, allow_weaken=True, reason="x"))
    assert proposed.proposal.kinds == ("weaken", "policy")
    retired = _proposed(lambda: retire_plan(pair, sealer, "default", "done"))
    assert retired.proposal.kinds == ("weaken",)
    # a request file (the request/planner split keeps the user's request under requests/)
    state = read_state(pair)
    after = replace(state, files={**state.files, "requests/default.json": b"{}\n"})
    assert kinds_of(state, after) == ("request",)
    assert read_ref(pair.git, PLANS_REF) == state.tip  # nothing of it was applied


def test_a_new_sealer_key_needs_the_most_any_kind_needs(
    pair: Repo, sealer: Ed25519Signer, bob: Ed25519Signer
) -> None:
    """weaken=3, amend=2, trust at 1: a key made a sealer (new, a runner's, a sealer's name
    given another key) needs 3, whatever its kinds; a runner, a label, a reconciler, a sealer
    removed or given another role need what `trust` needs: 1."""
    carol = Ed25519Signer.generate("carol")
    trust_add(pair, sealer, carol.public_key, "sealer", "carol")
    _require(pair, sealer, weaken=3, amend=2)
    state = read_state(pair)
    runner = Ed25519Signer.generate("ci")
    added = replace(state, trust=state.trust.added("dave", runner.public_key, "sealer"))
    assert (needed(state, added).kinds, needed(state, added).required) == (("trust",), 3)
    removed = replace(
        state, trust=state.trust.added("bob", bob.public_key, "runner").removed("carol")
    )
    assert (needed(state, removed).kinds, needed(state, removed).required) == (("trust",), 1)
    with_runner = replace(state, trust=state.trust.added("ci", runner.public_key, "runner"))
    assert needed(state, with_runner).required == 1
    made_sealer = replace(
        with_runner, trust=with_runner.trust.added("ci", runner.public_key, "sealer")
    )
    assert needed(with_runner, made_sealer).required == 3
    swapped = state.trust.removed("bob").added("bob", runner.public_key, "sealer")
    assert needed(state, replace(state, trust=swapped)).required == 3
    labelled = state.trust.added("bob", bob.public_key, "reconciler", frozenset({"linux"}))
    assert needed(state, replace(state, trust=labelled)).required == 1
    assert trust_add(pair, sealer, runner.public_key, "runner", "ci") is not None
    proposed = _proposed(lambda: trust_add(pair, sealer, runner.public_key, "sealer", "ci"))
    assert (proposed.proposal.kinds, proposed.proposal.required) == (("trust",), 3)


def test_a_runner_a_rule_did_not_admit_is_a_weakening(
    pair: Repo, sealer: Ed25519Signer, bob: Ed25519Signer
) -> None:
    """weaken=2, trust at 1; main is proven by ci or a runner labelled ``release-ci``. A trust
    change after which the rule admits another key (a label given, a labelled key added, the
    name ``ci`` given to another key) relaxes the rule: weaken, 2. A runner the rule does not
    admit, another label, a rule's runner removed, and any runner where no rule applies: 1."""
    ci, agent = Ed25519Signer.generate("ci"), Ed25519Signer.generate("agent")
    trust_add(pair, sealer, ci.public_key, "runner", "ci")
    trust_add(pair, sealer, agent.public_key, "runner", "agent")
    _require(pair, sealer, weaken=2)
    state = read_state(pair)
    free = replace(
        state, trust=state.trust.added("new", Ed25519Signer.generate("n").public_key, "runner")
    )
    assert needed(state, free).required == 1  # no rule: any runner counts already
    rule = EvidenceRule("refs/heads/main", ("ci", "release-ci"))
    ruled = replace(state, policy=replace(state.policy, evidence=(rule,)))
    for trust in (
        ruled.trust.added("agent", agent.public_key, "runner", frozenset({"release-ci"})),
        ruled.trust.added(
            "new", Ed25519Signer.generate("n").public_key, "runner", frozenset({"release-ci"})
        ),
        ruled.trust.removed("ci").removed("agent").added("ci", agent.public_key, "runner"),
    ):
        need = needed(ruled, replace(ruled, trust=trust))
        assert (need.kinds, need.required) == (("weaken", "trust"), 2)
    for trust in (
        ruled.trust.added("agent", agent.public_key, "runner", frozenset({"dev"})),
        ruled.trust.added("new", Ed25519Signer.generate("n").public_key, "runner"),
        ruled.trust.removed("ci"),
        ruled.trust.added("bob", bob.public_key, "reconciler", frozenset({"release-ci"})),
    ):
        need = needed(ruled, replace(ruled, trust=trust))
        assert (need.kinds, need.required) == (("trust",), 1)


def test_an_amendment_needs_its_approvals(
    pair: Repo, sealer: Ed25519Signer, bob: Ed25519Signer, repo: GitRepo
) -> None:
    plan = two_step_plan()
    # last in `use` (no outputs): after every sealed check, so a strengthening
    plan["steps"][1]["verify"].append({"type": "run", "argv": ["sh", "check.sh"]})
    repo.write("check.sh", "true\n")
    repo.write_plan(plan)
    repo.commit("a check file")
    _seal(pair, sealer)
    assert read_state(pair).protected("default") is not None
    _require(pair, sealer, amend=2)
    repo.write("check.sh", "exit 0\n")
    repo.commit("the check file changes")
    proposed = _proposed(lambda: _seal(pair, sealer, amend=True, reason="reviewed"))
    assert proposed.proposal.kinds == ("amend",)
    # the same change by hand, the seal record claiming no amendment: still an amendment
    state = read_state(pair)
    unsaid = replace(
        state.seals["default"],
        version=state.seals["default"].version + 1,
        protected_digest="sha256:another manifest",
        amended=None,
        change="neutral",
    )
    assert kinds_of(state, replace(state, seals={"default": unsaid})) == ("amend",)
    outcome = approve(pair, bob, proposed.proposal.id)
    assert outcome.applied is not None
    assert read_state(pair).seals["default"].change == "amended"


@pytest.mark.parametrize(
    ("edit", "kinds"),
    [
        (lambda files: {**files, "tests/conftest.py": "100644 " + "1" * 40}, ("amend",)),
        (lambda files: {p: v for p, v in files.items() if p != "tests/test_a.py"}, ("amend",)),
        (lambda files: {p: "100644 " + "2" * 40 for p in files}, ("amend",)),
        (lambda files: {**files, "more.sh": "100644 " + "3" * 40}, ()),
    ],
    ids=["added", "gone", "changed", "entering-with-the-new-contract"],
)
def test_under_a_new_contract_the_manifest_is_judged_as_plan_seal_judges_it(
    pair: Repo,
    sealer: Ed25519Signer,
    repo: GitRepo,
    edit: Callable[[dict[str, str]], dict[str, str]],
    kinds: tuple[str, ...],
) -> None:
    """A new contract with another manifest amends when a file the old plan protects is
    changed, gone, or new to the manifest (added to the tree); a file the old plan did not
    protect enters with the new contract (a check it adds), which is the contract's business."""
    plan = two_step_plan()
    plan["protect"] = ["tests/"]
    repo.write("tests/test_a.py", "def test_a():\n    pass\n")
    repo.write_plan(plan)
    repo.commit("the plan protects tests/")
    _seal(pair, sealer)
    state = read_state(pair)
    record, listed = state.seals["default"], state.protected("default")
    assert listed is not None and list(listed) == ["tests/test_a.py"]
    now = edit(listed)
    resealed = replace(
        record,
        version=record.version + 1,
        contract_digest="sha256:" + "4" * 64,
        protected_digest=manifest_digest(now),
        change="strengthened",
    )
    files = {**state.files, manifest_path("default"): manifest(now)}
    after = replace(state, seals={"default": resealed}, files=files)
    assert kinds_of(state, after) == kinds


# ----------------------------------------------------------------------------- proposals


def test_proposing_the_same_change_twice_finds_the_same_proposal(
    pair: Repo, sealer: Ed25519Signer, bob: Ed25519Signer
) -> None:
    _require(pair, sealer, trust=2)
    carol = Ed25519Signer.generate("carol")
    first = _proposed(lambda: trust_add(pair, sealer, carol.public_key, "runner", "carol"))
    again = _proposed(lambda: trust_add(pair, bob, carol.public_key, "runner", "carol"))
    assert again.proposal.id == first.proposal.id
    assert again.approvers == ("alice", "bob")
    assert "apply it with `git audit approve" in (again.hint or "")
    (view,) = list_proposals(pair)
    assert view.state == "ready" and view.required == 2
    outcome = approve(pair, sealer, first.proposal.id[:6])  # a prefix is enough
    assert outcome.applied == str(read_ref(pair.git, PLANS_REF))
    assert list_proposals(pair) == []  # the applied proposal's local ref is gone
    tip = read_state(pair)
    assert json.loads(tip.files[APPROVALS_PATH])["parent"] == first.proposal.parent
    # the next change carries no approvals.json over
    _require(pair, sealer, trust=2, policy=1)
    assert APPROVALS_PATH not in read_state(pair).files


def test_a_proposal_is_shown_with_the_kinds_its_change_makes(
    pair: Repo, sealer: Ed25519Signer, bob: Ed25519Signer
) -> None:
    """The kinds a proposal is listed with are those its files make on its parent; one whose
    proposal.json says others is marked and refused by ``approve`` before anything is signed;
    one that says the truth is approved and applied."""
    _require(pair, sealer, trust=2, weaken=2)
    carol = Ed25519Signer.generate("carol")
    honest = _proposed(lambda: trust_add(pair, sealer, carol.public_key, "runner", "carol"))
    (view,) = list_proposals(pair)
    assert view.kinds == honest.proposal.kinds == ("trust",)
    state = read_state(pair)
    proposal = honest.proposal
    files = {**proposal.files, "requests/extra.json": b"{}\n"}  # another change, another id
    lying = approvals.propose(
        pair.git,
        sealer,
        proposer="alice",
        parent=proposal.parent,
        files=files,
        message="trust: carol as a runner\n",
        need=approvals.Need(("trust",), 2),
        trust=state.trust,
        now=proposal.proposed_at,
    )
    shown = find(pair, lying.proposal.id)
    assert shown.kinds == ("trust", "request") and shown.proposal.kinds == ("trust",)
    assert shown.to_json()["kinds"] == ["trust", "request"]
    before = read_ref(pair.git, f"refs/audit/proposals/{lying.proposal.id}")
    with pytest.raises(LedgerError, match=r"misstates its change: its proposal\.json says trust"):
        approve(pair, bob, lying.proposal.id)
    assert read_ref(pair.git, f"refs/audit/proposals/{lying.proposal.id}") == before
    outcome = approve(pair, bob, proposal.id)
    assert outcome.applied == str(read_ref(pair.git, PLANS_REF))


def test_a_stale_proposal_is_listed_stale_and_pruned(
    pair: Repo, sealer: Ed25519Signer, bob: Ed25519Signer
) -> None:
    _require(pair, sealer, trust=2)
    carol = Ed25519Signer.generate("carol")
    proposed = _proposed(lambda: trust_add(pair, sealer, carol.public_key, "runner", "carol"))
    set_policy(
        pair,
        sealer,
        replace(read_state(pair).policy, commit_msg="strict"),
        allow_weaken=False,
        reason=None,
    )
    assert find(pair, proposed.proposal.id).state == "stale"
    assert prune(pair) == [proposed.proposal.id]
    assert list_proposals(pair) == []


# --------------------------------------------------------------------------- command line


def test_the_command_line_proposes_lists_and_approves(
    pair: Repo, sealer: Ed25519Signer, repo: GitRepo
) -> None:
    key = repo.path.parent / "alice.key"
    key.write_text(encode_private_key(sealer._key.encode(), "alice"))
    key.chmod(0o600)
    keys = {"alice": key}
    usage = audit(repo.path, "trust", "policy", "--approvals", "weaken=zero")
    assert usage.code == 2 and "expected KIND=K" in usage.err
    set_ = audit(
        repo.path, "trust", "policy", "--approvals", "trust=2", "--key", str(keys["alice"])
    )
    assert set_.code == 0, set_.err
    shown = audit(repo.path, "trust", "policy")
    assert "approvals: {'trust': 2}" in shown.out
    carol = Ed25519Signer.generate("carol")
    added = audit(
        repo.path,
        "trust",
        "add",
        carol.public_key.openssh(),
        "-r",
        "runner",
        "-n",
        "carol",
        "--key",
        str(keys["alice"]),
    )
    assert added.code == 0, added.err
    assert "proposed as" in added.out and "next: another sealer" in added.out
    listed = audit(repo.path, "proposals", "--json")
    (entry,) = listed.json()["proposals"]
    assert entry["state"] == "pending" and entry["approvers"] == ["alice"]
    again = audit(repo.path, "approve", entry["id"], "--key", str(keys["alice"]))
    assert again.code == 0 and "1 of 2 (alice); it needs 1 more" in again.out
    missing = audit(repo.path, "approve", "ffffff", "--key", str(keys["alice"]))
    assert missing.code == 2 and "is not a proposal this clone holds" in missing.err


def test_a_key_trusted_under_two_names_approves_once(
    sealer: Ed25519Signer, bob: Ed25519Signer
) -> None:
    """Distinct sealers are distinct keys: a key that allowed_signers lists under two
    principals ("alice,alias") counts once, and so does a policy's count of sealers."""
    from gitaudit.ledger.approvals import Approvals, lockout_problem
    from gitaudit.ledger.trust import TrustedKey, TrustSet

    sealing = frozenset({"sealer"})
    trust = TrustSet(
        (
            TrustedKey("alice", sealer.public_key, sealing),
            TrustedKey("alias", sealer.public_key, sealing),
            TrustedKey("bob", bob.public_key, sealing),
        )
    )
    alone = Approvals("a" * 40, "sha256:" + "0" * 64).signed_by(sealer)
    assert alone.approvers(trust) == ("alias,alice",)
    assert len(alone.valid_only(trust).signatures) == 1
    both = alone.signed_by(bob)
    assert both.approvers(trust) == ("alias,alice", "bob")
    assert len(both.valid_only(trust).signatures) == 2
    policy = Policy(approvals=(("weaken", 3),))
    problem = lockout_problem(trust, policy)
    assert problem is not None and "than the 2 trusted" in problem
    assert lockout_problem(trust, replace(policy, approvals=(("weaken", 2),))) is None
