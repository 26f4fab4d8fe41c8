"""Trust and seals on refs/audit/plans, with real git and real signatures."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pygit2
import pytest

from gitaudit.crypto.commits import create_signed_commit
from gitaudit.crypto.signers import Ed25519Signer
from gitaudit.errors import KeyMaterialError, LedgerError, PlanError, SealError, TrustError
from gitaudit.git.repo import Repo, open_repo
from gitaudit.ledger import anchor, chain, watermark
from gitaudit.ledger.objects import write_tree
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.refs import PLANS_REF, read_ref
from gitaudit.ledger.resets import AttemptReset, already_reset, held_at, resets_file, resets_path
from gitaudit.ledger.seals import (
    history,
    reset_attempts,
    reset_history,
    retire_plan,
    seal_plan,
    set_policy,
    trust_add,
    trust_init,
    trust_remove,
)
from gitaudit.ledger.trust import EvidenceRule, Policy, TrustSet, trust_from_tree
from gitaudit.ledger.verify import verify_all
from gitaudit.places import marks_path
from gitaudit.plan.catalog import check_worktree
from tests import sealrules
from tests.gitrepo import GitRepo, forget_marks
from tests.plan.builders import two_step_plan


def seal(repo: Repo, signer: Ed25519Signer, name: str = "default", **kw: object):  # type: ignore[no-untyped-def]
    (checked,) = check_worktree(repo.require_workdir(), name)
    return seal_plan(repo, signer, checked, **kw)  # type: ignore[arg-type]


def test_trust_init_creates_the_root_and_pins_the_key(trusted: Repo, sealer: Ed25519Signer) -> None:
    state = read_state(trusted)
    assert state.exists
    assert state.trust.require(sealer.public_key, "sealer").name == "alice"
    assert state.trust.require(sealer.public_key, "runner")
    assert trusted.config("audit.rootKey") == sealer.public_key.fingerprint()
    assert set(state.files) == {"trust/allowed_signers", "trust/roles.json", "policy.json"}
    with pytest.raises(TrustError, match="already exists"):
        trust_init(trusted, sealer, "alice")


def test_plain_git_verifies_plans_commits(
    trusted: Repo, sealer: Ed25519Signer, tmp_path: Path
) -> None:
    seal(trusted, sealer, reason="first")
    signers = tmp_path / "allowed"
    signers.write_text(read_state(trusted).trust.allowed_signers())
    for rev in (PLANS_REF, f"{PLANS_REF}~1"):
        proc = subprocess.run(
            [
                "git",
                "-c",
                "gpg.format=ssh",
                "-c",
                f"gpg.ssh.allowedSignersFile={signers}",
                "verify-commit",
                rev,
            ],
            cwd=trusted.workdir,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert 'Good "git" signature for alice' in proc.stderr


def test_seal_records_plan_and_seal(trusted: Repo, sealer: Ed25519Signer) -> None:
    outcome = seal(trusted, sealer, reason="first cut")
    assert outcome.commit is not None and outcome.record is not None
    state = read_state(trusted)
    record = state.seal("default")
    assert record is not None and record.version == 1 and record.change == "initial"
    assert record.reason == "first cut" and record.sealer == "alice"
    assert record.policy_digest == state.policy.digest()
    assert (
        state.sealed_plan("default")
        == (trusted.require_workdir() / ".gitaudit/plans/default.json").read_bytes()
    )
    message = trusted.git.references[PLANS_REF].peel(pygit2.Commit).message
    assert message.startswith("seal(default): v1 initial — first cut")
    assert "Audit-Contract: sha256:" in message


def test_sealing_an_unchanged_plan_is_a_no_op(trusted: Repo, sealer: Ed25519Signer) -> None:
    seal(trusted, sealer)
    tip = read_ref(trusted.git, PLANS_REF)
    outcome = seal(trusted, sealer)
    assert outcome.commit is None and "already sealed" in outcome.message
    assert read_ref(trusted.git, PLANS_REF) == tip


def test_invalid_plan_is_refused(trusted: Repo, sealer: Ed25519Signer, repo: GitRepo) -> None:
    plan = two_step_plan()
    plan["steps"][1]["depends_on"] = ["ghost"]
    repo.write_plan(plan)
    with pytest.raises(PlanError, match=r"dep\.unknown-step"):
        seal(trusted, sealer)


def test_strengthening_is_allowed_and_recorded(
    trusted: Repo, sealer: Ed25519Signer, repo: GitRepo
) -> None:
    seal(trusted, sealer)
    plan = two_step_plan()
    plan["steps"][1]["verify"].append({"type": "run", "argv": ["echo", "more"]})
    plan["requirements"][1]["priority"] = "must"
    repo.write_plan(plan)
    outcome = seal(trusted, sealer, reason="tighter")
    assert outcome.record is not None and outcome.record.change == "strengthened"
    assert not outcome.record.weakened
    assert any("check added" in s for s in outcome.record.strengthenings)
    assert any("priority should -> must" in s for s in outcome.record.strengthenings)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda p: (
                p["steps"][1]["verify"].clear()
                or p["steps"][1]["verify"].append({"type": "run", "argv": ["false"]})
            ),
            "check removed or changed",
        ),
        (lambda p: p["steps"][0]["covers"].clear(), "no longer covers REQ-1"),
        (
            lambda p: p["steps"][0]["outputs"][0]["verify"].__setitem__(
                0, {"type": "file_exists", "path": "x"}
            ),
            "output check removed or changed",
        ),
        (lambda p: p["requirements"][0].update(priority="may"), "priority must -> may"),
        (lambda p: p["steps"][1].update(max_attempts=9), "max_attempts 3 -> 9"),
        (lambda p: p["steps"][1].update(idempotent=False), "idempotent True -> False"),
        (
            lambda p: p["steps"][1].update(readback=[{"type": "file_exists", "path": "x"}]),
            "readback check added: file_exists x",
        ),
        (lambda p: p["steps"].pop(), "removed"),
    ],
)
def test_weakening_is_refused_with_the_list(
    trusted: Repo,
    sealer: Ed25519Signer,
    repo: GitRepo,
    mutate: Callable[[dict[str, Any]], object],
    expected: str,
) -> None:
    seal(trusted, sealer)
    plan = two_step_plan()
    mutate(plan)
    plan["steps"][0]["covers"] = (
        plan["steps"][0]["covers"] or ["REQ-1"] if expected != "no longer covers REQ-1" else []
    )
    if expected == "no longer covers REQ-1":
        plan["steps"][1]["covers"].append("REQ-1")
    if expected == "removed":
        plan["steps"][0]["covers"].append("REQ-2")
    repo.write_plan(plan)
    tip = read_ref(trusted.git, PLANS_REF)
    with pytest.raises(SealError, match="would be weakened") as info:
        seal(trusted, sealer)
    assert expected in info.value.message
    assert read_ref(trusted.git, PLANS_REF) == tip


def test_recorded_weakening(trusted: Repo, sealer: Ed25519Signer, repo: GitRepo) -> None:
    seal(trusted, sealer)
    plan = two_step_plan()
    plan["steps"][1]["verify"] = [{"type": "run", "argv": ["true", "--quick"]}]
    repo.write_plan(plan)
    with pytest.raises(SealError):
        seal(trusted, sealer, allow_weaken=True)  # a reason is required
    outcome = seal(trusted, sealer, allow_weaken=True, reason="flaky check replaced")
    assert (
        outcome.record is not None
        and outcome.record.weakened
        and outcome.record.change == "weakened"
    )
    entries = history(trusted, "default")
    assert [e.record.version for e in entries] == [2, 1]
    assert entries[0].record.weakenings and entries[0].record.reason == "flaky check replaced"


def test_policy_can_forbid_weakening_and_a_laxer_policy_is_a_weakening(
    trusted: Repo, sealer: Ed25519Signer, repo: GitRepo
) -> None:
    seal(trusted, sealer)
    commit, laxer = set_policy(
        trusted, sealer, Policy(allow_weaken=False), allow_weaken=False, reason=None
    )
    assert commit is not None and laxer == []
    assert read_state(trusted).seal("default").policy_digest == Policy(allow_weaken=False).digest()  # type: ignore[union-attr]
    plan = two_step_plan()
    plan["steps"][1]["verify"] = [{"type": "run", "argv": ["true", "--quick"]}]
    repo.write_plan(plan)
    with pytest.raises(SealError, match="forbids weakening"):
        seal(trusted, sealer, allow_weaken=True, reason="please")
    with pytest.raises(SealError, match="forbids weakening"):
        set_policy(trusted, sealer, Policy(allow_weaken=True), allow_weaken=True, reason="relax")
    with pytest.raises(SealError, match="forbids weakening"):
        retire_plan(trusted, sealer, "default", "done")


def test_laxer_policy_needs_allow_weaken(trusted: Repo, sealer: Ed25519Signer) -> None:
    with pytest.raises(SealError, match="no longer protected"):
        set_policy(
            trusted,
            sealer,
            Policy(protected_refs=("refs/heads/main",)),
            allow_weaken=False,
            reason=None,
        )
    commit, laxer = set_policy(
        trusted,
        sealer,
        Policy(protected_refs=("refs/heads/main",)),
        allow_weaken=True,
        reason="only main",
    )
    assert commit is not None and laxer


HEADS = EvidenceRule("refs/heads/*", ("ci",))
RELEASE = EvidenceRule("refs/heads/release/*", ("ci", "ci2"), 2)
MAIN = "refs/heads/main"


@pytest.mark.parametrize(
    ("old", "new", "laxer"),
    [
        # a narrower rule takes refs a broader one governed
        ((HEADS,), (HEADS, EvidenceRule(MAIN, ("agent",))), ["refs/heads/main, governed"]),
        ((HEADS,), (HEADS, EvidenceRule("refs/heads/m*", ("ci", "agent"))), ["also from agent"]),
        ((RELEASE,), (RELEASE, EvidenceRule("refs/heads/release/1.*", RELEASE.runners)), ["1 r"]),
        # a longer glob overlapping a specific one takes its refs; a shorter one does not
        (
            (RELEASE,),
            (RELEASE, EvidenceRule("refs/heads/rel*ease/*", ("agent", "ci"), 2)),
            ["agent"],
        ),
        ((RELEASE,), (RELEASE, EvidenceRule("refs/heads/r*/*", ("ci", "agent"))), []),
        # when the heads and tails of two globs agree they may share a ref: laxer
        ((RELEASE,), (RELEASE, EvidenceRule("refs/*/release/v*.0.x", ("ci",))), ["needs 1"]),
        ((RELEASE,), (RELEASE, EvidenceRule("refs/tags/release/v*.0.x", ("ci",))), []),
        # a changed rule, against its own old rule (the broader one it outranks asked less)
        (
            (HEADS, EvidenceRule("refs/heads/x*", ("ci", "ci2"), 2)),
            (EvidenceRule("refs/heads/*", ("ci",), 1), EvidenceRule("refs/heads/x*", ("ci",))),
            ["refs/heads/x* needs 1 runners, not 2"],
        ),
        # a rule that asks as much as every rule it takes refs from, or takes none
        ((HEADS,), (HEADS, EvidenceRule(MAIN, ("ci",), 2)), []),
        ((HEADS,), (HEADS, EvidenceRule("refs/tags/*", ("agent",))), []),
        ((HEADS, RELEASE), (HEADS, RELEASE, EvidenceRule("refs/heads/main", ("ci",))), []),
        (
            (EvidenceRule(MAIN, ("ci", "ci2"), 2),),
            (EvidenceRule(MAIN, ("ci", "ci2"), 2), HEADS),
            [],
        ),
        ((), (EvidenceRule(MAIN, ("agent",)),), []),
    ],
)
def test_a_rule_relaxes_every_ref_it_takes_from_a_stricter_rule(
    old: tuple[EvidenceRule, ...], new: tuple[EvidenceRule, ...], laxer: list[str]
) -> None:
    """The gate judges a ref by its exact rule, else its longest matching pattern: a new or
    changed rule is laxer than each old rule whose refs it now governs and that admitted fewer
    runners or asked more of them (two patterns that may share a ref are taken to share one)."""
    found = Policy(evidence=new).laxer_than(Policy(evidence=old))
    assert len(found) == len(laxer), found
    for words, said in zip(laxer, found, strict=True):
        assert words in said, said


def test_trust_add_remove_and_roles(
    trusted: Repo, sealer: Ed25519Signer, stranger: Ed25519Signer
) -> None:
    runner = Ed25519Signer.generate("ci")
    assert trust_add(trusted, sealer, runner.public_key, "runner", "ci") is not None
    assert trust_add(trusted, sealer, runner.public_key, "runner", "ci") is None  # idempotent
    state = read_state(trusted)
    state.trust.require(runner.public_key, "runner")
    with pytest.raises(TrustError, match="is not a sealer"):
        state.trust.require(runner.public_key, "sealer")
    with pytest.raises(TrustError, match="is not a sealer"):  # a runner cannot change trust
        trust_add(trusted, runner, stranger.public_key, "sealer", "mallory")
    with pytest.raises(TrustError, match="not trusted"):
        trust_add(trusted, stranger, stranger.public_key, "sealer", "mallory")
    with pytest.raises(TrustError, match="would leave no sealer"):
        trust_remove(trusted, sealer, "alice")
    trust_remove(trusted, sealer, "ci")
    assert read_state(trusted).trust.named("ci") is None


def test_a_principal_named_for_two_keys_is_refused(
    trusted: Repo, sealer: Ed25519Signer, stranger: Ed25519Signer, repo: GitRepo
) -> None:
    """A principal list naming a sealer (``bot,alice``) would give another key the sealer's
    name and roles: `trust add` refuses such a name, and a trust set that binds one name to two
    keys is malformed for every reader."""
    with pytest.raises(KeyMaterialError, match="invalid allowed-signers principal 'bot,alice'"):
        trust_add(trusted, sealer, stranger.public_key, "runner", "bot,alice")
    # the first sealer's name (a key comment, by default): refused before the anchor is written
    subprocess.run(["git", "-C", str(repo.path.parent), "init", "-q", "fresh"], check=True)
    fresh = open_repo(repo.path.parent / "fresh")
    with pytest.raises(KeyMaterialError, match="invalid allowed-signers principal 'a,b'"):
        trust_init(fresh, stranger, "a,b")
    assert not any(Path(f).exists() for f in anchor.files(fresh))  # nothing was pinned
    files = read_state(trusted).files
    line = f"bot,alice {stranger.public_key.openssh()}\n".encode()
    forged = {**files, "trust/allowed_signers": files["trust/allowed_signers"] + line}
    git = trusted.git
    tip = read_ref(git, PLANS_REF)
    assert tip is not None
    oid = create_signed_commit(
        git, tree=write_tree(git, forged), parents=[tip], message="trust\n", signer=sealer
    )
    with pytest.raises(TrustError, match="names principal 'alice' for two keys"):
        read_state(trusted, tip=oid)


def test_a_name_is_never_another_principals_label() -> None:
    """Evidence rules list runner names and labels together: a new name that is another
    principal's label, or a label that is another principal's name, would be admitted as it."""
    build, ci, bot = (Ed25519Signer.generate(n).public_key for n in ("build", "ci", "bot"))
    trust = TrustSet().added("build", build, "runner", frozenset({"linux"}))
    trust = trust.added("ci", ci, "runner")
    with pytest.raises(TrustError, match="the name 'linux' is a label of build"):
        trust.added("linux", bot, "runner")
    with pytest.raises(TrustError, match="the label 'ci' is the name of a trusted principal"):
        trust.added("bot", bot, "runner", frozenset({"ci"}))
    with pytest.raises(TrustError, match="the label 'ci' is the name"):
        trust.added("build", build, "runner", frozenset({"ci"}))  # an existing principal too
    mine = trust.added("mac", bot, "runner", frozenset({"mac", "linux"}))  # its own name: fine
    assert mine.named("mac") is not None


@pytest.mark.parametrize(
    "option",
    ['valid-before="20240101"', 'valid-after="20240101"', "cert-authority", 'namespaces="file"'],
)
def test_restricted_lines_sign_nothing(trusted: Repo, stranger: Ed25519Signer, option: str) -> None:
    """A line ssh-keygen would not take for a commit's signature (a CA, a validity window
    gitaudit does not judge, namespaces without git) trusts nobody; namespaces naming git do."""
    files = dict(read_state(trusted).files)
    key = stranger.public_key.openssh()
    for options, trusted_after in ((option, False), ('namespaces="file,gi?"', True)):
        signers = files["trust/allowed_signers"] + f"bot {options} {key}\n".encode()
        roles = json.loads(files["trust/roles.json"])
        roles["runners"] = [*roles["runners"], "bot"]
        tree = trusted.git[
            write_tree(
                trusted.git,
                {
                    **files,
                    "trust/allowed_signers": signers,
                    "trust/roles.json": json.dumps(roles).encode(),
                },
            )
        ]
        assert isinstance(tree, pygit2.Tree)
        trust = trust_from_tree(trusted.git, tree, "x")
        assert (stranger.public_key in trust.with_role("runner")) is trusted_after, options


def test_reconciler_role_and_sealers_reconcile_too(
    trusted: Repo, sealer: Ed25519Signer, repo: GitRepo
) -> None:
    roles = json.loads(repo.git("show", f"{PLANS_REF}:trust/roles.json"))
    assert "reconcilers" not in roles  # absent until someone holds the role
    runner, rita = Ed25519Signer.generate("ci"), Ed25519Signer.generate("rita")
    trust_add(trusted, sealer, runner.public_key, "runner", "ci")
    assert trust_add(trusted, sealer, rita.public_key, "reconciler", "rita") is not None
    roles = json.loads(repo.git("show", f"{PLANS_REF}:trust/roles.json"))
    assert roles["reconcilers"] == ["rita"] and roles["runners"] == ["alice", "ci"]
    trust = read_state(trusted).trust
    assert trust.require(rita.public_key, "reconciler").name == "rita"
    assert trust.require(sealer.public_key, "reconciler").name == "alice"  # implied by sealer
    assert set(trust.with_role("reconciler")) == {rita.public_key, sealer.public_key}
    with pytest.raises(TrustError, match="is not a reconciler"):
        trust.require(runner.public_key, "reconciler")
    with pytest.raises(TrustError, match="is not a runner"):
        trust.require(rita.public_key, "runner")
    with pytest.raises(TrustError, match="is not a sealer"):  # a reconciler cannot change trust
        trust_add(trusted, rita, rita.public_key, "runner", "rita")


def test_retire_is_a_signed_change_and_deleting_the_file_is_not(
    trusted: Repo, sealer: Ed25519Signer, repo: GitRepo
) -> None:
    seal(trusted, sealer)
    (repo.path / ".gitaudit/plans/default.json").unlink()
    assert read_state(trusted).active() == ["default"]
    retire_plan(trusted, sealer, "default", "superseded")
    state = read_state(trusted)
    assert state.active() == [] and state.seal("default").retired  # type: ignore[union-attr]
    assert state.sealed_plan("default") is None


# --- attackers ----------------------------------------------------------------------------------


def _forge(
    repo: Repo,
    signer: Ed25519Signer,
    files_from: pygit2.Oid,
    parent: pygit2.Oid | None,
    edit: dict[str, bytes],
) -> pygit2.Oid:
    from gitaudit.ledger.objects import read_files

    base = repo.git[files_from]
    assert isinstance(base, pygit2.Commit)
    files = {**read_files(repo.git, base.tree), **edit}
    tree = write_tree(repo.git, files)
    return create_signed_commit(
        repo.git, tree=tree, parents=[parent] if parent else [], message="forged\n", signer=signer
    )


def test_plans_commit_signed_by_an_untrusted_key_is_rejected(
    trusted: Repo, sealer: Ed25519Signer, stranger: Ed25519Signer
) -> None:
    seal(trusted, sealer)
    tip = read_ref(trusted.git, PLANS_REF)
    assert tip is not None
    evil = stranger.public_key
    from gitaudit.ledger.trust import TrustSet

    trust = TrustSet().added("mallory", evil, "sealer")
    forged = _forge(trusted, stranger, tip, tip, trust.files())
    trusted.git.references.create(PLANS_REF, forged, force=True)
    with pytest.raises(
        TrustError, match=rf"plans commit {str(forged)[:12]}: not signed by a trusted sealer"
    ):
        read_state(trusted)


def test_rewritten_root_is_rejected_by_the_pinned_key(
    trusted: Repo, stranger: Ed25519Signer, repo: GitRepo
) -> None:
    # an attacker replaces the whole plans ref with a self-consistent history of their own
    from gitaudit.ledger.trust import TrustSet

    trust = TrustSet().added("mallory", stranger.public_key, "sealer")
    tree = write_tree(
        trusted.git, {**trust.files(), "policy.json": json.dumps(Policy().to_json()).encode()}
    )
    forged = create_signed_commit(
        trusted.git, tree=tree, parents=[], message="root\n", signer=stranger
    )
    trusted.git.references.create(PLANS_REF, forged, force=True)
    forget_marks(trusted.gitdir)  # even without the high-water mark
    with pytest.raises(TrustError, match=r"not by the pinned audit\.rootKey"):
        read_state(trusted)


def test_a_written_mark_does_not_vouch_for_another_root(
    trusted: Repo, stranger: Ed25519Signer
) -> None:
    """watermarks.json is a file anything in .git/ can write: marking a history of someone
    else's as verified skips its commits' checks, but not the pinned root."""
    from gitaudit.ledger.trust import TrustSet

    trust = TrustSet().added("mallory", stranger.public_key, "sealer")
    tree = write_tree(
        trusted.git, {**trust.files(), "policy.json": json.dumps(Policy().to_json()).encode()}
    )
    root = create_signed_commit(
        trusted.git, tree=tree, parents=[], message="root\n", signer=stranger
    )
    tip = create_signed_commit(
        trusted.git, tree=tree, parents=[root], message="more\n", signer=stranger
    )
    trusted.git.references.create(PLANS_REF, tip, force=True)
    marks = {"verified": {PLANS_REF: str(tip)}, "seen": {PLANS_REF: str(tip)}}
    (trusted.gitdir / "gitaudit" / "watermarks.json").write_text(json.dumps(marks))
    # the floors in the gitaudit home (out of the agent's reach) would report the rewrite
    # first: gone here, so the pin is seen to hold on its own
    Path(marks_path(trusted.gitdir)).unlink(missing_ok=True)
    with pytest.raises(TrustError, match=r"not by the pinned audit\.rootKey"):
        read_state(trusted)
    assert not verify_all(trusted).ok


def test_verification_resumes_only_at_a_mark_made_here(
    trusted: Repo, sealer: Ed25519Signer, repo: GitRepo
) -> None:
    """The honest path stays incremental: a chain verified once is not verified again (its mark
    carries a MAC under the local key). A mark whose MAC is missing or does not hold (written by
    hand) costs one verification from the root, and is then made again."""
    plan = two_step_plan()
    for n in range(4):
        plan["steps"][1]["verify"].append({"type": "run", "argv": ["echo", str(n)]})
        repo.write_plan(plan)
        seal(trusted, sealer)
    tip = read_ref(trusted.git, PLANS_REF)
    assert tip is not None
    everything = chain.count(trusted.git, tip, None)
    assert verify_all(trusted).verified[PLANS_REF] == 0  # sealing marked each tip verified
    path = trusted.state_dir / watermark.FILENAME
    for damage in ({}, {PLANS_REF: "0" * 64}):
        doc = json.loads(path.read_text())
        path.write_text(json.dumps({**doc, "macs": damage}))
        assert verify_all(trusted).verified[PLANS_REF] == everything
        assert verify_all(trusted).verified[PLANS_REF] == 0
        assert read_state(trusted).tip == tip


def test_reset_to_an_older_seal_is_detected(
    trusted: Repo, sealer: Ed25519Signer, repo: GitRepo
) -> None:
    seal(trusted, sealer)
    old = read_ref(trusted.git, PLANS_REF)
    plan = two_step_plan()
    plan["steps"][1]["verify"].append({"type": "run", "argv": ["echo", "stronger"]})
    repo.write_plan(plan)
    seal(trusted, sealer)
    repo.git("update-ref", PLANS_REF, str(old))
    with pytest.raises(LedgerError, match="moved backwards"):
        read_state(trusted)


def test_unsigned_plans_commit_is_rejected(trusted: Repo) -> None:
    tip = read_ref(trusted.git, PLANS_REF)
    assert tip is not None
    commit = trusted.git[tip]
    assert isinstance(commit, pygit2.Commit)
    sig = pygit2.Signature("x", "x@example.test")
    unsigned = trusted.git.create_commit(None, sig, sig, "unsigned\n", commit.tree_id, [tip])
    trusted.git.references.create(PLANS_REF, unsigned, force=True)
    with pytest.raises(TrustError, match="is not signed"):
        read_state(trusted)


def test_plans_ref_pointing_at_a_blob(trusted: Repo) -> None:
    blob = trusted.git.create_blob(b"not a commit")
    trusted.git.references.create(PLANS_REF, blob, force=True)
    with pytest.raises(LedgerError, match="a blob, not a commit"):
        read_state(trusted)


def test_malformed_seal_json_and_mismatched_sealed_copy(
    trusted: Repo, sealer: Ed25519Signer
) -> None:
    seal(trusted, sealer)
    tip = read_ref(trusted.git, PLANS_REF)
    assert tip is not None
    bad = _forge(trusted, sealer, tip, tip, {"seals/default.json": b"{not json"})
    trusted.git.references.create(PLANS_REF, bad, force=True)
    with pytest.raises(TrustError, match=r"seals/default\.json is not valid JSON"):
        read_state(trusted)
    # a sealer-signed commit whose sealed copy no longer matches its seal record
    edited = _forge(
        trusted, sealer, tip, tip, {"plans/default.json": json.dumps({"steps": []}).encode()}
    )
    trusted.git.references.create(PLANS_REF, edited, force=True)
    forget_marks(trusted.gitdir)
    # even signed by a trusted sealer, a sealed copy that contradicts its record is refused
    with pytest.raises(TrustError, match="does not match its seal record"):
        read_state(trusted)


def test_a_seal_changed_without_a_new_version_is_refused(
    trusted: Repo, sealer: Ed25519Signer, repo: GitRepo
) -> None:
    seal(trusted, sealer)
    tip = read_ref(trusted.git, PLANS_REF)
    assert tip is not None
    plan = two_step_plan()
    plan["steps"][1]["verify"] = [{"type": "run", "argv": ["true", "weaker"]}]
    from gitaudit.plan.catalog import check_file
    from gitaudit.plan.store import PlanFile

    data = json.dumps(plan).encode()
    checked = check_file(PlanFile("default", "x", data), environment=False)
    record = json.loads(
        trusted.git[tip].peel(pygit2.Commit).tree["seals/default.json"].peel(pygit2.Blob).data
    )
    record["contract_digest"] = checked.digest
    forged = _forge(
        trusted,
        sealer,
        tip,
        tip,
        {"plans/default.json": data, "seals/default.json": json.dumps(record).encode()},
    )
    trusted.git.references.create(PLANS_REF, forged, force=True)
    with pytest.raises(TrustError, match="without a new version"):
        read_state(trusted)


def test_concurrent_seals_never_lose_a_version(repo: GitRepo, tmp_path: Path) -> None:
    from tests.gitrepo import audit

    assert audit(repo.path, "keys", "generate").code == 0
    assert audit(repo.path, "trust", "init").code == 0
    for i in range(6):
        repo.write_plan(two_step_plan(), f"p{i}")
    procs = [
        subprocess.Popen(
            [__import__("sys").executable, "-m", "gitaudit", "plan", "seal", "--plan", f"p{i}"],
            cwd=repo.path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(6)
    ]
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err.decode()
    state = read_state(open_repo(repo.path))
    assert state.active() == [f"p{i}" for i in range(6)]
    count = repo.git("rev-list", "--count", PLANS_REF).strip()
    assert count == "7"  # root + six seals, one linear chain


def every(_reset: AttemptReset) -> bool:
    """A reset read as recorded, whichever chain of runs it is applied to."""
    return True


def test_a_reset_counts_only_on_a_chain_holding_its_run(trusted: Repo) -> None:
    """A reset is a count taken at a run: subtracted on a chain that never held that run (a
    clone's ledger started without the audit runs), it lent that chain fresh attempts."""
    git = trusted.git
    sig = pygit2.Signature("t", "t@example.com")
    tree = git.TreeBuilder().write()
    root = git.create_commit(None, sig, sig, "root", tree, [])
    taken = git.create_commit(None, sig, sig, "taken", tree, [root])
    after = git.create_commit(None, sig, sig, "after", tree, [taken])
    fork = git.create_commit(None, sig, sig, "another chain", tree, [])
    reset = AttemptReset("default", "use", "c" * 64, 2, str(taken), "why", "now", "alice", "fp")
    held: tuple[pygit2.Oid | str, ...] = (taken, after, str(after))
    for at in held:
        assert held_at(git, at)(reset)
        assert already_reset({"use": reset}, "use", "c" * 64, held_at(git, at)) == 2
    for nowhere in (root, fork, None):
        assert not held_at(git, nowhere)(reset)
        assert already_reset({"use": reset}, "use", "c" * 64, held_at(git, nowhere)) == 0
    assert not held_at(git, after)(dataclasses.replace(reset, run="0" * 40))  # not here
    assert not held_at(git, after)(dataclasses.replace(reset, run="not a commit id"))
    assert not held_at(git, after)(dataclasses.replace(reset, run=None))
    assert held_at(git, None)(dataclasses.replace(reset, failed=0, run=None))  # lends nothing


def test_a_reset_of_attempts_is_kept_by_later_changes_and_checked_by_the_chain(
    trusted: Repo, sealer: Ed25519Signer, repo: GitRepo
) -> None:
    seal(trusted, sealer)
    with pytest.raises(SealError, match="needs --reason"):
        reset_attempts(trusted, sealer, "default", "use", "")
    nothing = reset_attempts(trusted, sealer, "default", "use", "no failures yet")
    assert nothing.commit is None and nothing.count == 0
    state = read_state(trusted)
    seal_record = state.seal("default")
    assert seal_record is not None
    record = AttemptReset(
        "default",
        "use",
        seal_record.contract_digest,
        4,
        None,
        "why",
        "2026-11-01T12:00:00Z",
        "alice",
        sealer.public_key.fingerprint(),
    )
    files = dict(state.files)
    files[resets_path("default")] = resets_file("default", {"use": record})
    tip = read_ref(trusted.git, PLANS_REF)
    assert tip is not None
    oid = create_signed_commit(
        trusted.git,
        tree=write_tree(trusted.git, files),
        parents=[tip],
        message="reset\n",
        signer=sealer,
    )
    trusted.git.references.create(PLANS_REF, oid, force=True)
    assert read_state(trusted).attempts_reset("default", seal_record.contract_digest, every) == {
        "use": 4
    }
    # later changes of the plans ref carry the reset over
    set_policy(trusted, sealer, Policy(commit_msg="strict"), allow_weaken=False, reason=None)
    trust_add(trusted, sealer, Ed25519Signer.generate("ci").public_key, "runner", "ci")
    assert read_state(trusted).attempts_reset("default", seal_record.contract_digest, every) == {
        "use": 4
    }
    (entry,) = reset_history(trusted, "default")
    assert (entry.commit, entry.count, entry.reset.reason) == (str(oid), 4, "why")
    # a malformed reset makes the chain untrustworthy
    bad = dict(read_state(trusted).files)
    bad[resets_path("default")] = bad[resets_path("default")].replace(
        b'"failed": 4', b'"failed": -4'
    )
    tip = read_ref(trusted.git, PLANS_REF)
    assert tip is not None
    forged = create_signed_commit(
        trusted.git,
        tree=write_tree(trusted.git, bad),
        parents=[tip],
        message="bad\n",
        signer=sealer,
    )
    trusted.git.references.create(PLANS_REF, forged, force=True)
    with pytest.raises(TrustError, match=r"resets/default\.json is malformed"):
        read_state(trusted)


def test_a_reconciliation_seal_recorded_under_the_earlier_rule_still_verifies(
    trusted: Repo, sealer: Ed25519Signer, repo: GitRepo
) -> None:
    """Making a step non-idempotent was a strengthening before it was a weakening: a seal that
    listed it among its strengthenings (as gitaudit then wrote it) keeps the chain valid, one
    that lists it nowhere does not."""
    seal(trusted, sealer)
    base = read_state(trusted)
    v1, tip = base.seal("default"), base.tip
    assert v1 is not None and tip is not None
    plan = two_step_plan()
    plan["steps"][1]["idempotent"] = False
    repo.write_plan(plan)
    (checked,) = check_worktree(repo.path, "default")

    def reseal(strengthenings: list[str]) -> pygit2.Oid:
        record = {
            **v1.to_json(),
            "version": 2,
            "contract_digest": checked.digest,
            "previous_digest": v1.contract_digest,
            "change": "strengthened",
            "strengthenings": strengthenings,
        }
        files = {
            **base.files,
            "plans/default.json": checked.file.data,
            "seals/default.json": json.dumps(record, indent=2, sort_keys=True).encode() + b"\n",
        }
        tree = write_tree(trusted.git, files)
        oid = create_signed_commit(
            trusted.git, tree=tree, parents=[tip], message="seal\n", signer=sealer
        )
        trusted.git.references.create(PLANS_REF, oid, force=True)
        return oid

    reseal(["step use: idempotent True -> False"])
    assert read_state(trusted, remember=False).seal("default").version == 2  # type: ignore[union-attr]
    reseal([])
    with pytest.raises(TrustError, match="weakens the contract without recording it"):
        read_state(trusted, remember=False)


def test_a_check_added_to_a_reconcilable_step_under_the_earlier_rule_still_verifies(
    trusted: Repo, sealer: Ed25519Signer, repo: GitRepo
) -> None:
    """A check added to a step that is not idempotent was a strengthening ("check added")
    before it counted as a weakening (its unknown outcome opens reconciliation): a seal that
    listed it so among its strengthenings keeps the chain valid where one sealer may weaken,
    one that lists it nowhere does not."""
    seal(trusted, sealer)
    base = read_state(trusted)
    v1, tip = base.seal("default"), base.tip
    assert v1 is not None and tip is not None
    plan = two_step_plan()
    plan["steps"][1]["idempotent"] = False
    plan["steps"][1]["verify"].append({"type": "run", "argv": ["echo", "more"]})
    repo.write_plan(plan)
    (checked,) = check_worktree(repo.path, "default")

    def reseal(strengthenings: list[str]) -> None:
        record = {
            **v1.to_json(),
            "version": 2,
            "contract_digest": checked.digest,
            "previous_digest": v1.contract_digest,
            "change": "strengthened",
            "strengthenings": strengthenings,
        }
        files = {
            **base.files,
            "plans/default.json": checked.file.data,
            "seals/default.json": json.dumps(record, indent=2, sort_keys=True).encode() + b"\n",
        }
        tree = write_tree(trusted.git, files)
        oid = create_signed_commit(
            trusted.git, tree=tree, parents=[tip], message="seal\n", signer=sealer
        )
        trusted.git.references.create(PLANS_REF, oid, force=True)

    made = "step use: idempotent True -> False"
    reseal([made, "step use verify: check added: run echo more"])
    assert read_state(trusted, remember=False).seal("default").version == 2  # type: ignore[union-attr]
    reseal([made])
    with pytest.raises(TrustError, match="weakens the contract without recording it"):
        read_state(trusted, remember=False)


# ---------------------------------------------------- the sealing rules on hand-made commits


@pytest.mark.parametrize("transition", sorted(sealrules.TRANSITIONS))
def test_a_sealer_signed_plans_commit_that_breaks_a_sealing_rule_is_refused(
    trusted: Repo, sealer: Ed25519Signer, transition: str
) -> None:
    """Each rule of the seal chain on its own: a plans commit signed by the real sealer, made by
    hand (so `plan seal`'s own checks never ran), breaking one rule and nothing else. Reading
    the plans ref refuses it, naming the commit and the rule, also without a high-water mark."""
    seal(trusted, sealer)
    v1 = sealrules.prepare(trusted, sealer, transition)
    assert read_state(trusted).seal("default") is not None
    oid = sealrules.forge(trusted, sealer, transition, v1)
    for marks in ("kept", "deleted"):
        if marks == "deleted":
            forget_marks(trusted.gitdir)
        with pytest.raises(TrustError) as info:
            read_state(trusted, remember=False)
        assert sealrules.TRANSITIONS[transition] in info.value.message, marks
        assert str(oid)[:12] in info.value.message


@pytest.mark.parametrize(
    ("recorded", "allow_weaken", "refusal"),
    [
        (False, True, "weakens the contract without recording it"),
        (True, False, "weakens the contract; policy forbids it"),
    ],
    ids=["retirement not recorded", "retirement the policy forbids"],
)
def test_a_hand_made_retirement_is_a_weakening(
    trusted: Repo, sealer: Ed25519Signer, recorded: bool, allow_weaken: bool, refusal: str
) -> None:
    """Retiring a plan removes all its obligations: a weakening whatever the plan's contract,
    so a sealer-signed commit that retires one must record it, where the policy allows it
    (`retire_plan` refuses both itself; this commit is made by hand)."""
    seal(trusted, sealer)
    if not allow_weaken:
        set_policy(trusted, sealer, Policy(allow_weaken=False), allow_weaken=False, reason=None)
    base = read_state(trusted, remember=False)
    record = base.seal("default")
    assert record is not None and base.tip is not None
    files = dict(base.files)
    del files["plans/default.json"]
    files["seals/default.json"] = (
        json.dumps(
            {
                **record.to_json(),
                "version": record.version + 1,
                "previous_digest": record.contract_digest,
                "change": "retired",
                "retired": True,
                "weakened": recorded,
                "weakenings": ["plan retired"] if recorded else [],
                "reason": "hand-made",
            },
            indent=2,
            sort_keys=True,
        ).encode()
        + b"\n"
    )
    oid = create_signed_commit(
        trusted.git,
        tree=write_tree(trusted.git, files),
        parents=[base.tip],
        message="retire by hand\n",
        signer=sealer,
    )
    trusted.git.references.create(PLANS_REF, oid, force=True)
    with pytest.raises(TrustError) as info:
        read_state(trusted, remember=False)
    assert info.value.message == f"plans commit {str(oid)[:12]}: seal v2 of 'default' {refusal}"
    assert info.value.hint == "restore refs/audit/plans from a good copy"


def _signed_on_plans(
    trusted: Repo, sealer: Ed25519Signer, files: dict[str, bytes], parents: list[pygit2.Oid]
) -> pygit2.Oid:
    tree = write_tree(trusted.git, files)
    oid = create_signed_commit(
        trusted.git, tree=tree, parents=parents, message="by hand\n", signer=sealer
    )
    trusted.git.references.create(PLANS_REF, oid, force=True)
    return oid


def test_a_merge_on_the_plans_ref_is_refused_by_name(trusted: Repo, sealer: Ed25519Signer) -> None:
    """A sealer-signed merge: its first-parent chain is all signed and sound, but a merge lets
    a side history in; the plans ref is linear."""
    base = read_state(trusted, remember=False)
    assert base.tip is not None
    side = _signed_on_plans(trusted, sealer, dict(base.files), [base.tip])
    merge = _signed_on_plans(trusted, sealer, dict(base.files), [base.tip, side])
    forget_marks(trusted.gitdir)
    with pytest.raises(TrustError) as info:
        read_state(trusted, remember=False)
    assert info.value.message == f"{PLANS_REF}: {str(merge)[:12]} is a merge; audit refs are linear"
    assert info.value.hint == "restore refs/audit/plans from a good copy"


def test_an_unreadable_plans_commit_is_refused_with_the_readers_hint(
    trusted: Repo, sealer: Ed25519Signer
) -> None:
    base = read_state(trusted, remember=False)
    assert base.tip is not None
    files = {**base.files, "policy.json": b"{not json"}
    oid = _signed_on_plans(trusted, sealer, files, [base.tip])
    with pytest.raises(TrustError) as info:
        read_state(trusted, remember=False)
    assert info.value.message.startswith(
        f"plans commit {str(oid)[:12]}: policy.json is not valid JSON"
    )
    assert info.value.hint == "restore refs/audit/plans from a good copy"


def test_a_seal_record_of_another_format_is_refused_by_name(
    trusted: Repo, sealer: Ed25519Signer
) -> None:
    seal(trusted, sealer)
    base = read_state(trusted, remember=False)
    assert base.tip is not None
    record = json.loads(base.files["seals/default.json"])
    files = {**base.files, "seals/default.json": json.dumps({**record, "format": "x"}).encode()}
    oid = _signed_on_plans(trusted, sealer, files, [base.tip])
    with pytest.raises(TrustError) as info:
        read_state(trusted, remember=False)
    assert info.value.message == (
        f"plans commit {str(oid)[:12]}: seals/default.json: malformed seal record "
        "(not a gitaudit.seal/1 record)"
    ), info.value.message


def test_the_root_of_trust_is_the_first_plans_commit_and_its_signer(
    repo: GitRepo, trusted: Repo, sealer: Ed25519Signer
) -> None:
    """What `git audit trust anchor` shows before pinning: the root commit of the plans ref, the
    key that signed it and its name, after more commits on top; without a plans ref, a refusal
    that says how to get one."""
    from gitaudit.ledger.plansref import root_of_trust

    (checked,) = check_worktree(repo.path, "default")
    seal_plan(trusted, sealer, checked)
    root = repo.git("rev-list", "--max-parents=0", PLANS_REF).strip()
    assert repo.git("rev-list", "--count", PLANS_REF).strip() == "2"
    oid, key, principal = root_of_trust(trusted)
    assert (str(oid), key, principal) == (root, sealer.public_key, "alice")
    repo.git("update-ref", "-d", PLANS_REF)
    with pytest.raises(TrustError) as refused:
        root_of_trust(open_repo(repo.path))
    assert refused.value.message == f"{PLANS_REF} does not exist: there is no root of trust to pin"
    assert refused.value.hint is not None and "`git audit init`" in refused.value.hint


@pytest.mark.parametrize(
    "doc",
    [
        {"max_artifact_bytes": 1 << 53},
        {"approvals": {"weaken": 10**30}},
        {"evidence": {"refs/heads/main": {"runners": ["ci"], "min": 1 << 60}}},
        {"evidence": {"refs/heads/\udcff": {"runners": ["ci"]}}},
    ],
)
def test_a_policy_canonical_json_cannot_hold_is_invalid(doc: dict[str, Any]) -> None:
    """Its digest raised (IntegerDomainError, UnicodeEncodeError) in every reader."""
    with pytest.raises(TrustError, match=r"^x: policy\.json is invalid: "):
        Policy.from_json({"format": "gitaudit.policy/1", **doc}, "x")


def test_marks_keep_a_floor_in_the_gitaudit_home(
    trusted: Repo, sealer: Ed25519Signer, repo: GitRepo
) -> None:
    """Every mark recorded against its ref's tip is also a floor in the gitaudit home: a reset
    to an older seal is reported with the marks file deleted, emptied or put back as it was,
    and `rewrite` (a deliberate move) lowers the floor with the marks."""
    seal(trusted, sealer)
    old = read_ref(trusted.git, PLANS_REF)
    path = trusted.state_dir / watermark.FILENAME
    before = path.read_bytes()
    plan = two_step_plan()
    plan["steps"][1]["verify"].append({"type": "run", "argv": ["echo", "stronger"]})
    repo.write_plan(plan)
    seal(trusted, sealer)
    new = read_ref(trusted.git, PLANS_REF)
    assert old is not None and new is not None
    floors = json.loads(Path(marks_path(trusted.gitdir)).read_text())
    assert floors == {"seen": {PLANS_REF: str(new)}}
    trusted.git.references.create(PLANS_REF, old, force=True)
    for damage in (None, b"{}", before):
        if damage is None:
            path.unlink()
        else:
            path.write_bytes(damage)
        with pytest.raises(LedgerError, match="moved backwards"):
            read_state(trusted)
    watermark.rewrite(
        trusted.gitdir,
        PLANS_REF,
        str(old),
        str(old),
        lambda: None,  # the ref is there already
    )
    assert json.loads(Path(marks_path(trusted.gitdir)).read_text())["seen"][PLANS_REF] == str(old)
    assert read_state(trusted).tip == old


def test_a_linked_worktree_shares_the_marks_of_the_repository(
    trusted: Repo, sealer: Ed25519Signer, repo: GitRepo, tmp_path: Path
) -> None:
    """A linked worktree shares the refs with the main one, so it shares their marks and floors
    (the common dir's): a seal marked from the main worktree counts in the linked one, as a
    floor and, its MAC bound to the repository, as verified; and the plans ref moved back from
    the linked worktree is reported there. Kept per git dir, the linked worktree had none."""
    seal(trusted, sealer)
    old = read_ref(trusted.git, PLANS_REF)
    plan = two_step_plan()
    plan["steps"][1]["verify"].append({"type": "run", "argv": ["echo", "stronger"]})
    repo.write_plan(plan)
    seal(trusted, sealer)
    new = read_ref(trusted.git, PLANS_REF)
    assert old is not None and new is not None
    repo.git("worktree", "add", "-q", str(tmp_path / "wt"), "HEAD")
    linked = open_repo(tmp_path / "wt")
    assert linked.gitdir != trusted.gitdir
    assert marks_path(linked.gitdir) == marks_path(trusted.gitdir)
    with watermark.view(linked.gitdir) as marks:
        assert marks["home"][PLANS_REF] == str(new)
        assert watermark.verified(linked.git, linked.gitdir, marks, PLANS_REF) == str(new)
    linked.git.references.create(PLANS_REF, old, force=True)
    with pytest.raises(LedgerError, match="moved backwards"):
        read_state(linked)


@pytest.mark.parametrize(
    ("env", "job"),
    [
        ({}, None),
        ({"CI": "false", "GITHUB_ACTIONS": "0", "GITLAB_CI": ""}, None),
        ({"CI": "true"}, "CI=true"),
        ({"CI": "0", "TF_BUILD": "True"}, "TF_BUILD=True"),
        ({"JENKINS_URL": "https://ci.example.test/"}, "JENKINS_URL=https://ci.example.test/"),
    ],
)
def test_ci_job_is_read_from_what_ci_systems_set(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], job: str | None
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert anchor.ci_job() == job


def test_a_ci_job_refuses_to_take_the_root_on_first_use(
    trusted: Repo, sealer: Ed25519Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unpinned (no anchor, no audit.rootKey), the plans ref's root is taken as it is, except in
    a CI job, which refuses it naming the fix; a pin is used in CI as anywhere."""
    key = sealer.public_key.fingerprint()
    for path in anchor.files(trusted):
        Path(path).unlink(missing_ok=True)
    trusted.git.config.delete_multivar("audit.rootKey", ".*")
    assert anchor.pinned_root(trusted) is None
    assert read_state(trusted).trust.keys  # trust on first use
    monkeypatch.setenv("CI", "true")
    with pytest.raises(anchor.UnpinnedError) as refused:
        anchor.pinned_root(trusted)
    assert refused.value.code == "plans.unpinned" and "audit.rootKey" in str(refused.value.hint)
    trusted.git.config["audit.rootKey"] = key
    assert anchor.pinned_root(trusted) == key


@pytest.mark.parametrize("blank", ["", "  \t"])
def test_a_ci_job_refuses_an_empty_root_key_as_no_pin(
    trusted: Repo, monkeypatch: pytest.MonkeyPatch, blank: str
) -> None:
    """`git config audit.rootKey "$GITAUDIT_ROOT_KEY"` with the variable unset (a fork's pull
    request gets no secrets) writes an empty pin, which the callers take as none: a CI job
    refuses it as unpinned, as it refuses a missing one."""
    for path in anchor.files(trusted):
        Path(path).unlink(missing_ok=True)
    trusted.git.config["audit.rootKey"] = blank
    assert anchor.pinned_root(trusted) == blank  # outside CI: trust on first use, as stated
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    with pytest.raises(anchor.UnpinnedError, match=r"an empty audit\.rootKey"):
        anchor.pinned_root(trusted)


def test_whether_a_reset_is_held_is_walked_once_per_run_and_tip(trusted: Repo) -> None:
    """The gate asks, for each step it judges, whether each reset of the plan holds on the
    ledger's tip and below the judged run: a walk of the chain down to the reset's run (65 ms at
    20,000 runs) made once per step before. The answer is fixed for two commit ids: walked once.
    A reset's run naming an object that is not a commit holds nowhere (pygit2 raised)."""
    git = trusted.git
    sig = pygit2.Signature("t", "t@example.com")
    tree = git.TreeBuilder().write()
    taken = git.create_commit(None, sig, sig, "taken", tree, [])
    after = git.create_commit(None, sig, sig, "after", tree, [taken])
    blob = git.create_blob(b"not a run\n")
    reset = AttemptReset("default", "use", "c" * 64, 2, str(taken), "why", "now", "alice", "fp")
    walks: list[tuple[pygit2.Oid, pygit2.Oid]] = []

    class Counting:
        path = git.path

        def get(self, oid: pygit2.Oid) -> object:
            return git.get(oid)

        def descendant_of(self, tip: pygit2.Oid, run: pygit2.Oid) -> bool:
            walks.append((tip, run))
            return git.descendant_of(tip, run)

    counting = cast(pygit2.Repository, Counting())
    for _step in range(5):
        assert held_at(counting, after)(reset)
    assert len(walks) == 1, walks
    assert not held_at(git, after)(dataclasses.replace(reset, run=str(blob)))
