"""Requests on refs/audit/plans and the planner role, with real git and real signatures."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gitaudit.crypto.signers import Ed25519Signer
from gitaudit.errors import PlanError, SealError, TrustError
from gitaudit.git.repo import Repo
from gitaudit.ledger import watermark
from gitaudit.ledger.objects import dumps
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.refs import PLANS_REF
from gitaudit.ledger.request_ops import request_history, seal_request
from gitaudit.ledger.requests import RequestRecord, parse_records, record_path, request_path
from gitaudit.ledger.seals import retire_plan, seal_plan, set_policy, trust_add
from gitaudit.ledger.trust import Policy
from gitaudit.ledger.verify import verify_all
from gitaudit.plan.catalog import check_worktree
from gitaudit.plan.digest import sha256
from tests.ledger.test_seals import seal
from tests.plan.builders import two_step_plan

REQUEST: dict[str, Any] = {
    "task": "build and use an artifact",
    "requirements": [
        {"id": "REQ-1", "description": "the artifact is built", "priority": "must"},
        {"id": "REQ-2", "description": "the artifact is used", "priority": "should"},
    ],
}


def raw(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, indent=2) + "\n").encode()


def ask(repo: Repo, signer: Ed25519Signer, doc: dict[str, Any], **kw: Any) -> Any:
    return seal_request(repo, signer, "default", raw(doc), source="request.json", **kw)


def write_plan(repo: Repo, doc: dict[str, Any]) -> None:
    path = repo.require_workdir() / ".gitaudit/plans/default.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")


@pytest.fixture
def planner(trusted: Repo, sealer: Ed25519Signer) -> Ed25519Signer:
    agent = Ed25519Signer.generate("agent")
    trust_add(trusted, sealer, agent.public_key, "planner", "agent")
    return agent


def test_the_planner_role_is_stored_only_when_held(
    trusted: Repo, sealer: Ed25519Signer, planner: Ed25519Signer
) -> None:
    state = read_state(trusted)
    roles = json.loads(state.files["trust/roles.json"])
    assert roles["planners"] == ["agent"]
    entry = state.trust.require(planner.public_key, "planner")
    assert entry.name == "agent" and not entry.may("sealer") and not entry.may("runner")
    assert state.trust.require(sealer.public_key, "planner").name == "alice"  # sealers plan
    assert set(state.trust.with_role("planner")) == {planner.public_key, sealer.public_key}
    with pytest.raises(TrustError, match="is not a sealer"):
        trust_add(trusted, planner, planner.public_key, "sealer", "agent")


def test_a_request_is_sealed_with_its_record_and_is_a_no_op_when_unchanged(
    trusted: Repo, sealer: Ed25519Signer
) -> None:
    outcome = ask(trusted, sealer, REQUEST, reason="asked")
    assert outcome.commit is not None and not outcome.planned  # no plan is sealed yet
    state = read_state(trusted)
    record = state.requests["default"]
    assert record.version == 1 and record.change == "initial" and record.reason == "asked"
    assert record.request_digest == sha256(raw(REQUEST))
    assert state.files[request_path("default")] == raw(REQUEST)
    assert state.request("default").ids == ("REQ-1", "REQ-2")  # type: ignore[union-attr]
    assert state.requested() == ["default"]
    again = ask(trusted, sealer, REQUEST)
    assert again.commit is None and "nothing to do" in again.message
    message = trusted.git.revparse_single("refs/audit/plans").message  # type: ignore[attr-defined]
    assert message.startswith("request(default): v1 initial — asked")
    assert "Audit-Request-Digest: sha256:" in message


def test_the_first_request_is_compared_with_the_plan_sealed_before(
    trusted: Repo, sealer: Ed25519Signer
) -> None:
    """The single-file plan's requirements were its request: a request without REQ-2 drops it."""
    seal(trusted, sealer)
    smaller = {**REQUEST, "requirements": REQUEST["requirements"][:1]}
    with pytest.raises(SealError, match="request 'default' would be weakened: requirement REQ-2"):
        ask(trusted, sealer, smaller)
    outcome = ask(trusted, sealer, smaller, allow_weaken=True, reason="no longer needed")
    assert outcome.record is not None and outcome.record.weakened
    assert outcome.record.weakenings == ("requirement REQ-2: removed",)
    assert outcome.gaps == ()  # the plan states more than asked: it still answers
    same = ask(trusted, sealer, {**REQUEST, "task": "again"}, reason="back")
    assert same.record is not None and same.record.change == "strengthened"


def test_a_policy_forbidding_weakening_forbids_weakening_a_request(
    trusted: Repo, sealer: Ed25519Signer
) -> None:
    ask(trusted, sealer, REQUEST)
    set_policy(trusted, sealer, Policy(allow_weaken=False), allow_weaken=False, reason="lock")
    lowered = json.loads(json.dumps(REQUEST))
    lowered["requirements"][0]["priority"] = "may"
    with pytest.raises(SealError, match=r"policy\.json forbids weakening"):
        ask(trusted, sealer, lowered, allow_weaken=True, reason="x")


def test_a_sealers_plan_must_answer_the_sealed_request(
    trusted: Repo, sealer: Ed25519Signer
) -> None:
    more = json.loads(json.dumps(REQUEST))
    more["requirements"].append({"id": "REQ-3", "description": "it is signed"})
    ask(trusted, sealer, more)
    with pytest.raises(SealError, match="does not answer its sealed request v1: request req"):
        seal(trusted, sealer)


def test_a_planners_seal_names_the_request_and_history_lists_both(
    trusted: Repo, sealer: Ed25519Signer, planner: Ed25519Signer
) -> None:
    ask(trusted, sealer, REQUEST, reason="asked")
    outcome = seal(trusted, planner)
    assert outcome.record is not None and outcome.record.sealer == "agent"
    assert outcome.record.request_digest == sha256(raw(REQUEST))
    entries = request_history(trusted)
    assert [(e.record.version, e.record.change) for e in entries] == [(1, "initial")]
    assert entries[0].request_data == raw(REQUEST)
    assert verify_all(trusted).ok


def test_retiring_a_plan_retires_its_request(
    trusted: Repo, sealer: Ed25519Signer, planner: Ed25519Signer
) -> None:
    ask(trusted, sealer, REQUEST)
    seal(trusted, planner)
    retire_plan(trusted, sealer, "default", "done with it")
    state = read_state(trusted)
    assert state.seals["default"].retired and state.requests["default"].retired
    assert request_path("default") not in state.files
    assert state.request("default") is None and state.requested() == []
    message = trusted.git.revparse_single("refs/audit/plans").message  # type: ignore[attr-defined]
    assert message.startswith("retire(default): v2 request v2 — done with it")
    # a planner cannot seal the plan again: nobody asks for it any more
    with pytest.raises(SealError, match="without a sealed request"):
        seal(trusted, planner)


def test_a_request_alone_can_be_retired(trusted: Repo, sealer: Ed25519Signer) -> None:
    ask(trusted, sealer, REQUEST)
    retire_plan(trusted, sealer, "default", "asked by mistake")
    assert read_state(trusted).requests["default"].retired
    with pytest.raises(PlanError, match="is not sealed as active"):
        retire_plan(trusted, sealer, "default", "again")


def test_a_planner_following_the_request_keeps_its_evidence_rules(
    trusted: Repo, sealer: Ed25519Signer, planner: Ed25519Signer
) -> None:
    """The user raises REQ-2 to must; the planner's plan follows (a strengthening)."""
    ask(trusted, sealer, REQUEST)
    seal(trusted, planner)
    raised = json.loads(json.dumps(REQUEST))
    raised["requirements"][1]["priority"] = "must"
    outcome = ask(trusted, sealer, raised)
    assert [g.kind for g in outcome.gaps] == ["lowered"]
    plan = two_step_plan()
    plan["requirements"][1]["priority"] = "must"
    write_plan(trusted, plan)
    (checked,) = check_worktree(trusted.require_workdir(), "default")
    followed = seal_plan(trusted, planner, checked)
    assert followed.record is not None and followed.record.change == "strengthened"


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda f: f.pop(request_path("default")), "is not the request v1"),
        (lambda f: f.update({request_path("default"): b"{}"}), "is not the request v1"),
        (lambda f: f.pop(record_path("default")), "has no request record"),
        (lambda f: f.update({record_path("default"): b"{"}), "is not valid JSON"),
        (lambda f: f.update({record_path("default"): b"{}"}), "malformed request record"),
    ],
)
def test_request_files_that_do_not_bind_are_refused(
    trusted: Repo, sealer: Ed25519Signer, edit: Any, words: str
) -> None:
    ask(trusted, sealer, REQUEST)
    files = dict(read_state(trusted).files)
    edit(files)
    with pytest.raises(SealError, match=words):
        parse_records(files, "plans commit x")


def test_a_request_record_round_trips_and_rejects_bad_fields() -> None:
    record = RequestRecord(
        "default", 2, "sha256:a", "sha256:b", "2026-01-01T00:00:00Z", "alice", "SHA256:x",
        "why", "strengthened", strengthenings=("requirement A: added",),
    )  # fmt: skip
    assert RequestRecord.from_json(record.to_json(), "here") == record
    for bad in ({"version": 0}, {"weakened": "no"}, {"plan": 3}, {"format": "x"}):
        with pytest.raises(SealError, match="here: malformed request record"):
            RequestRecord.from_json({**record.to_json(), **bad}, "here")
    assert json.loads(dumps(record.to_json()))["format"] == "gitaudit.request-seal/1"


def test_a_planners_tip_is_marked_verified_with_the_local_key(
    trusted: Repo, sealer: Ed25519Signer, planner: Ed25519Signer
) -> None:
    """A planner's verified tip is marked with a MAC under the local key, so the chain is not
    re-verified on every read; a mark whose MAC does not hold is verified again from the root,
    then marked anew."""
    ask(trusted, sealer, REQUEST)
    outcome = seal(trusted, planner)
    tip = str(outcome.commit)
    with watermark.view(trusted.gitdir) as marks:
        assert watermark.verified(trusted.git, trusted.gitdir, marks, PLANS_REF) == tip
    path = trusted.state_dir / watermark.FILENAME
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "macs": {PLANS_REF: "f" * 64}}))
    with watermark.view(trusted.gitdir) as marks:
        assert watermark.verified(trusted.git, trusted.gitdir, marks, PLANS_REF) is None
    assert read_state(trusted).seal("default") is not None  # verified again, then marked
    with watermark.view(trusted.gitdir) as marks:
        assert watermark.verified(trusted.git, trusted.gitdir, marks, PLANS_REF) == tip
