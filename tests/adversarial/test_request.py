"""Attacks by a planner: an agent that seals its own plan with its own key, against the request
the user sealed (docs/sealing.md#requests-and-planners).

The world: alice (sealer) sealed the request of ``default`` (R1 and R2, both ``must``); the
agent holds a **planner** key and sealed a plan answering it; ci ran it (PASS). The agent may
evolve its plan, and never drop, lower or rewrite what the user asked for, weaken a check, amend
a protected file, retire the plan, or touch the request, trust, policy or resets: not through
`git audit plan seal`, and not with a plans commit made by hand, which every reader of the
chain refuses (``status``, ``verify``, the server's ``pre-receive``).
"""

from __future__ import annotations

import contextlib
import copy
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2
import pytest
from pygit2.enums import FileMode, ObjectType

from gitaudit.crypto.keystore import generate_key, load_signer
from gitaudit.crypto.signers import Signer
from gitaudit.errors import SealError, TrustError
from gitaudit.ledger import watermark
from gitaudit.ledger.objects import dumps, write_tree
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.refs import PLANS_REF
from gitaudit.ledger.request_ops import seal_request
from gitaudit.ledger.requests import record_path, request_path
from gitaudit.ledger.resets import resets_path
from gitaudit.ledger.seals import SealOutcome, retire_plan, seal_plan, trust_add
from gitaudit.ledger.trust import TrustSet
from gitaudit.plan.catalog import check_worktree
from gitaudit.plan.digest import sha256
from tests.adversarial.conftest import World, assert_plan, assert_plans_level, check, step
from tests.adversarial.test_attempts import reset_for
from tests.gitrepo import git

R1 = {"id": "R1", "description": "the thing works", "priority": "must"}
R2 = {"id": "R2", "description": "the thing is linted", "priority": "must"}
REQUEST = {"task": "make the thing", "requirements": [R1, R2]}


def answering(*steps: dict[str, Any], requirements: list[Any] | None = None) -> dict[str, Any]:
    """A plan stating the request's requirements (or *requirements*) with *steps*."""
    return {
        "task": "make the thing",
        "requirements": copy.deepcopy(requirements if requirements is not None else [R1, R2]),
        "steps": copy.deepcopy(list(steps)),
    }


PLAN = answering(
    step("unit", check("true"), covers=["R1"]), step("lint", check("true"), covers=["R2"])
)


@dataclass
class Asked:
    """The world with a sealed request, a planner key and the planner's plan, proven."""

    world: World
    agent: Signer
    agent_key: Path

    def seal(self, data: dict[str, Any], **kw: Any) -> SealOutcome:
        """The agent seals *data* as plan ``default`` (through the API `plan seal` calls)."""
        self.world.write_plan(data)
        (checked,) = check_worktree(self.world.path, "default")
        return seal_plan(self.world.handle(), self.agent, checked, **kw)

    def request(self, data: dict[str, Any], signer: Signer | None = None, **kw: Any) -> Any:
        """*signer* (alice) seals *data* as the request of ``default``."""
        raw = (json.dumps(data, indent=2) + "\n").encode()
        self.world.repo.write(".gitaudit/requests/default.json", raw)
        return seal_request(
            self.world.handle(),
            signer or self.world.alice,
            "default",
            raw,
            source=".gitaudit/requests/default.json",
            **kw,
        )

    def forge_seal(self, data: dict[str, Any], signer: Signer | None = None, **record: Any) -> str:
        """A well-formed plans commit sealing *data* as v2 of ``default``, as `plan seal` would
        write it (weakenings recorded), but signed by hand by *signer* (the agent)."""
        self.world.write_plan(data)
        (checked,) = check_worktree(self.world.path, "default")
        files = self.world.plans_files()
        doc = json.loads(files["seals/default.json"])
        key = (signer or self.agent).public_key
        doc.update(
            {
                "sealer": {"name": "agent", "fingerprint": key.fingerprint()},
                "contract_digest": checked.digest,
                "previous_digest": doc["contract_digest"],
                "version": doc["version"] + 1,
                "change": "weakened",
                "weakened": True,
                "weakenings": ["(forged)"],
                **record,
            }
        )
        files["seals/default.json"] = dumps(doc)
        files["plans/default.json"] = checked.file.data
        return str(self.world.forge_plans(files, signer or self.agent))

    def plans_tip(self) -> str | None:
        return self.world.ref(PLANS_REF)


@pytest.fixture
def asked(world: World) -> Asked:
    generated = generate_key("agent")
    agent = load_signer(generated.private_path)
    trust_add(world.handle(), world.alice, agent.public_key, "planner", "agent")
    out = Asked(world, agent, generated.private_path)
    assert out.request(REQUEST, reason="what the user wants").commit is not None
    assert out.seal(PLAN).commit is not None
    world.repo.commit("the plan and the request")
    assert world.run().verdict == "PASS"
    assert world.gate().verdict == "PASS"
    return out


def refused(asked: Asked, data: dict[str, Any], words: str, **kw: Any) -> None:
    """The agent's seal of *data* is refused with *words*, and nothing is written."""
    before = asked.plans_tip()
    with pytest.raises(SealError) as caught:
        asked.seal(data, **kw)
    assert words in caught.value.message, caught.value.message
    assert asked.plans_tip() == before


def drop_r2() -> dict[str, Any]:
    return answering(
        step("unit", check("true"), covers=["R1"]),
        step("lint", check("true"), covers=["R1"]),
        requirements=[R1],
    )


# ----------------------------------------------------------------- through `plan seal`


def test_attack_request_planner_drops_a_requirement(asked: Asked) -> None:
    refused(
        asked,
        drop_r2(),
        "planner 'agent' cannot drop request requirement R2: only a sealer changes the request",
    )


def test_attack_request_planner_lowers_a_priority_must_to_should(asked: Asked) -> None:
    lowered = copy.deepcopy(PLAN)
    lowered["requirements"][1]["priority"] = "should"
    refused(asked, lowered, "cannot lower request requirement R2 (must -> should)")


def test_attack_request_planner_rewrites_a_description(asked: Asked) -> None:
    rewritten = copy.deepcopy(PLAN)
    rewritten["requirements"][0]["description"] = "the thing mostly works"
    refused(asked, rewritten, "cannot rewrite request requirement R1")


def test_attack_request_planner_moves_coverage_to_a_trivial_step(asked: Asked) -> None:
    """R2 stays covered, but by a new step checking nothing: lint no longer covers it."""
    moved = answering(
        step("unit", check("true"), covers=["R1"]),
        step("lint", check("true"), covers=["R1"]),
        step("noop", check("true"), covers=["R2"]),
    )
    refused(asked, moved, "step lint: no longer covers R2")


def test_attack_request_planner_weakens_a_check(asked: Asked) -> None:
    weak = copy.deepcopy(PLAN)
    weak["steps"][1]["verify"] = [check("echo", "skipped")]
    refused(asked, weak, "planner 'agent' cannot weaken plan 'default'")
    refused(asked, weak, "planner 'agent' cannot weaken a plan", allow_weaken=True, reason="x")


def test_attack_request_planner_amends_a_protected_file(asked: Asked) -> None:
    """The plan runs tests/check.sh (so the seal protects it); the agent rewrites it to pass."""
    world = asked.world
    world.repo.write("tests/check.sh", "exit 1\n", mode=0o755)
    guarded = copy.deepcopy(PLAN)
    guarded["steps"][0]["verify"].append(check("sh", "tests/check.sh", expect_exit=1))
    assert asked.seal(guarded).commit is not None
    world.repo.write("tests/check.sh", "exit 0\n", mode=0o755)
    refused(asked, guarded, "protected files of plan 'default' changed")
    refused(asked, guarded, "cannot amend protected files", amend=True, reason="it is right")


def test_attack_request_planner_retires_the_plan(asked: Asked) -> None:
    with pytest.raises(TrustError, match="is not a sealer"):
        retire_plan(asked.world.handle(), asked.agent, "default", "done, honestly")
    assert read_state(asked.world.handle()).seal("default").retired is False  # type: ignore[union-attr]


def test_attack_request_planner_seals_the_request(asked: Asked) -> None:
    """The agent cannot rewrite what was asked: sealing a request needs a sealer."""
    smaller = {"task": "make the thing", "requirements": [R1]}
    with pytest.raises(TrustError, match="is not a sealer"):
        asked.request(smaller, asked.agent)
    assert read_state(asked.world.handle()).request("default").ids == ("R1", "R2")  # type: ignore[union-attr]


def test_attack_request_planner_seals_a_plan_nobody_asked_for(asked: Asked) -> None:
    """Without a sealed request, the agent's plan would be its own request."""
    asked.world.write_plan(PLAN, "extra")
    (checked,) = check_worktree(asked.world.path, "extra")
    with pytest.raises(SealError, match="cannot seal plan 'extra' without a sealed request"):
        seal_plan(asked.world.handle(), asked.agent, checked)


def test_attack_request_planner_drops_a_requirement_of_a_single_file_plan(world: World) -> None:
    """No request file: the plan's requirements are the request (plans sealed before requests
    existed keep their meaning), so a planner keeps them exactly."""
    generated = generate_key("agent")
    agent = load_signer(generated.private_path)
    trust_add(world.handle(), world.alice, agent.public_key, "planner", "agent")
    world.seal(PLAN)
    world.write_plan(drop_r2())
    (checked,) = check_worktree(world.path, "default")
    with pytest.raises(SealError, match="cannot drop requirement R2: without a sealed request"):
        seal_plan(world.handle(), agent, checked)
    extra = answering(*PLAN["steps"], requirements=[R1, R2, {"id": "R3", "description": "mine"}])
    extra["steps"][0]["covers"] = ["R1", "R3"]
    world.write_plan(extra)
    (checked,) = check_worktree(world.path, "default")
    with pytest.raises(SealError, match="cannot add requirement R3"):
        seal_plan(world.handle(), agent, checked)


def test_attack_request_planner_cli_error_is_one_line(asked: Asked) -> None:
    asked.world.write_plan(drop_r2())
    result = asked.world.cli("plan", "seal", "--key", str(asked.agent_key))
    assert result.code == 1
    lines = result.err.splitlines()
    assert lines[0] == (
        "error: planner 'agent' cannot drop request requirement R2: "
        "only a sealer changes the request"
    ), result.err
    assert len(lines) == 2 and lines[1].startswith("hint: ")


def tied(data: dict[str, Any]) -> dict[str, Any]:
    """*data* with each dependency tied by an output contract, as validation asks: every step
    depended on declares output ``o``, and each dependant requires it (a copy: *data* may share
    steps with the module's plans)."""
    data = copy.deepcopy(data)
    by_id = {s["id"]: s for s in data["steps"]}
    for user in data["steps"]:
        for clause in user["depends_on"]:
            for dep in clause["any_of"] if isinstance(clause, dict) else [clause]:
                by_id[dep]["outputs"] = [{"name": "o", "verify": [check("true")]}]
                user.setdefault("requires_outputs", []).append({"step": dep, "name": "o"})
    return data


def around_unit(*added: dict[str, Any]) -> dict[str, Any]:
    """PLAN (unit covers R1, lint R2, both required) with *added* steps only (and the outputs
    that tie them)."""
    return tied(answering(*PLAN["steps"], *added))


# a base where R1 is covered only by `full`, an alternative of ship: every PASS verifies full
COVERED_BY_AN_ALTERNATIVE = tied(
    answering(
        step("lint", check("true"), covers=["R2"]),
        step("full", check("true"), covers=["R1"]),
        step("fast", check("true"), covers=["R2"]),
        step("ship", deps=[{"any_of": ["fast", "full"]}], covers=["R2"]),
    )
)
UNIT_AVOIDED = "step unit: no longer required: an any_of alternative route avoids it"
FULL_AVOIDED = "coverage of R1: can now be met without any step that covered it (full)"


def _also_covers_r1(data: dict[str, Any]) -> dict[str, Any]:
    data["steps"][2]["covers"] = ["R1", "R2"]
    return data


ROUTES_AROUND_A_STEP = [
    pytest.param(
        None,
        around_unit(
            step("trivial", check("true"), covers=["R1"]),
            step("done", deps=[{"any_of": ["trivial", "unit"]}], covers=["R1"]),
        ),
        UNIT_AVOIDED,
        id="a-new-sink-names-it-in-any_of",
    ),
    pytest.param(
        None,
        around_unit(
            step("trivial", check("true"), covers=["R1"]),
            step("mid", deps=[{"any_of": ["unit", "trivial"]}], covers=["R1"]),
            step("done", deps=["mid"], covers=["R1"]),
        ),
        UNIT_AVOIDED,
        id="an-any_of-upstream-of-a-new-sink",
    ),
    pytest.param(
        None,
        around_unit(
            step("trivial", check("true"), covers=["R1"]),
            step("wrap", deps=["unit"], covers=["R1"]),
            step("done", deps=[{"any_of": ["wrap", "trivial"]}], covers=["R1"]),
        ),
        UNIT_AVOIDED,
        id="an-any_of-downstream-of-a-new-wrapper",
    ),
    pytest.param(
        COVERED_BY_AN_ALTERNATIVE,
        answering(*COVERED_BY_AN_ALTERNATIVE["steps"], step("cheap", check("true"), covers=["R1"])),
        FULL_AVOIDED,
        id="a-new-step-covers-what-only-an-alternative-covered",
    ),
    pytest.param(
        COVERED_BY_AN_ALTERNATIVE,
        _also_covers_r1(copy.deepcopy(COVERED_BY_AN_ALTERNATIVE)),
        FULL_AVOIDED,
        id="the-other-alternative-now-also-covers-it",
    ),
]


@pytest.mark.parametrize(("base", "attack", "words"), ROUTES_AROUND_A_STEP)
def test_attack_request_planner_makes_a_required_step_optional_by_adding_steps(
    asked: Asked, base: dict[str, Any] | None, attack: dict[str, Any], words: str
) -> None:
    """Only additions (steps, an any_of route, coverage), each a strengthening taken alone, and
    a step every PASS verified before (unit; full, the only step covering R1) may fail: the gate
    ignores a failed any_of alternative, and R1 is met by a trivial step. A weakening: refused
    through `plan seal`, and in a hand-made planner commit (weakening recorded) by the chain."""
    if base is not None:
        asked.world.write_plan(base)
        (checked,) = check_worktree(asked.world.path, "default")
        seal_plan(asked.world.handle(), asked.world.alice, checked, allow_weaken=True, reason="b")
    refused(asked, attack, f"planner 'agent' cannot weaken plan 'default' ({words}")
    asked.forge_seal(attack)
    result = asked.world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert words in result.reasons[0].message, result.reasons[0].message


# ------------------------------------------------------------- plans commits made by hand


def test_attack_request_hand_made_planner_commit_drops_a_requirement(asked: Asked) -> None:
    """The agent writes the plans commit itself, signed with its planner key: status refuses
    the whole plans ref, and so does `git audit verify`."""
    asked.forge_seal(drop_r2())
    asked.world.repo.commit("plan without R2")
    result = asked.world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "planner 'agent' cannot drop request requirement R2" in result.reasons[0].message
    verified = asked.world.cli("verify")
    assert verified.code == 1 and "cannot drop request requirement R2" in verified.out


def test_attack_request_hand_made_planner_commit_in_the_sealers_name(asked: Asked) -> None:
    """A planner's seal of a harmless change that names alice as its sealer, so that `plan
    history` would show her review: the seal must name the key that signed it."""
    grown = copy.deepcopy(PLAN)
    grown["steps"][0]["verify"].append(check("true", "again"))
    alice = asked.world.alice.public_key.fingerprint()
    asked.forge_seal(
        grown,
        sealer={"name": "alice", "fingerprint": alice},
        change="strengthened",
        weakened=False,
        weakenings=[],
    )
    result = asked.world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "planner 'agent' signs seal v2 of plan 'default' in the name of 'alice'" in (
        result.reasons[0].message
    )


def test_attack_request_hand_made_planner_commit_weakens_a_check(asked: Asked) -> None:
    weak = copy.deepcopy(PLAN)
    weak["steps"][1]["verify"] = [check("echo", "skipped")]
    asked.forge_seal(weak)
    result = asked.world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "planner 'agent' cannot weaken plan 'default'" in result.reasons[0].message


def test_attack_request_hand_made_planner_commit_retires_the_plan(asked: Asked) -> None:
    files = asked.world.plans_files()
    doc = json.loads(files["seals/default.json"])
    doc.update(version=doc["version"] + 1, change="retired", retired=True, weakened=True)
    files["seals/default.json"] = dumps(doc)
    del files["plans/default.json"]
    asked.world.forge_plans(files, asked.agent)
    result = asked.world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "planner 'agent' cannot retire plan 'default'" in result.reasons[0].message


def test_attack_request_hand_made_planner_commit_rewrites_the_request(asked: Asked) -> None:
    """The agent rewrites the sealed request and its record consistently (R2 gone), and the
    plan with it."""
    files = asked.world.plans_files()
    smaller = dumps({"task": "make the thing", "requirements": [R1]})
    doc = json.loads(files[record_path("default")])
    doc.update(version=2, request_digest=sha256(smaller), change="weakened", weakened=True)
    files[request_path("default")] = smaller
    files[record_path("default")] = dumps(doc)
    asked.world.forge_plans(files, asked.agent)
    result = asked.world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "planner 'agent' cannot change the request" in result.reasons[0].message


def test_attack_request_hand_made_planner_commit_makes_itself_a_sealer(asked: Asked) -> None:
    files = asked.world.plans_files()
    trust = read_state(asked.world.handle()).trust.added("agent", asked.agent.public_key, "sealer")
    files.update(trust.files())
    asked.world.forge_plans(files, asked.agent)
    result = asked.world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "planner 'agent' cannot change trust" in result.reasons[0].message


def test_attack_request_hand_made_planner_commit_resets_attempts(asked: Asked) -> None:
    """Failed attempts counting afresh is a sealer's word, not the planner's."""
    files = asked.world.plans_files()
    files[resets_path("default")] = reset_for(asked.world, "unit", failed=0)
    asked.world.forge_plans(files, asked.agent)
    result = asked.world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "planner 'agent' cannot change the failed attempts of a step" in (
        result.reasons[0].message
    )


def test_attack_request_hand_made_planner_commit_behind_a_forged_mark(asked: Asked) -> None:
    """The agent also writes its commit's id into the verified mark (a cache any process of
    the user can write), once on its bad commit, once on a harmless planner commit on top of
    it, then with a made-up MAC: a mark counts only with its MAC under the local key (out of
    the agent's reach), so the chain is verified from the root."""
    asked.forge_seal(drop_r2())
    marked = str(asked.plans_tip())
    watermark.record(asked.world.handle().gitdir, {PLANS_REF: marked})
    with pytest.raises(TrustError, match="cannot drop request requirement R2"):
        read_state(asked.world.handle())
    assert_plans_level(asked.world.gate(), "plans.untrusted")
    asked.world.forge_plans(asked.world.plans_files(), asked.agent)  # changes nothing
    tip = str(asked.plans_tip())
    watermark.record(asked.world.handle().gitdir, {PLANS_REF: tip})
    with pytest.raises(TrustError, match=f"plans commit {marked[:12]}: .*cannot drop request"):
        read_state(asked.world.handle())
    # the MAC of a verified mark cannot be written without the key
    marks = asked.world.handle().state_dir / "watermarks.json"
    marks.write_text(json.dumps({**json.loads(marks.read_text()), "macs": {PLANS_REF: "0" * 64}}))
    assert_plans_level(asked.world.gate(), "plans.untrusted")


def test_attack_request_hand_made_planner_commit_pushed_to_the_server(
    asked: Asked, tmp_path: Path
) -> None:
    """pre-receive verifies each pushed plans commit with the same rules, whatever the client
    ran."""
    server = asked.world.serve(tmp_path / "server.git")
    before = git(server, "rev-parse", PLANS_REF).strip()
    asked.forge_seal(drop_r2())
    pushed = _push_plans(asked)
    assert pushed.returncode != 0, pushed.stderr
    assert "planner 'agent' cannot drop request requirement R2" in pushed.stderr
    assert git(server, "rev-parse", PLANS_REF).strip() == before


def test_attack_request_hand_made_sealer_commit_weakens_the_request_unrecorded(
    asked: Asked,
) -> None:
    """Even a sealer's request change must record its weakening (as a seal must)."""
    files = asked.world.plans_files()
    smaller = dumps({"task": "make the thing", "requirements": [R1]})
    doc = json.loads(files[record_path("default")])
    doc.update(version=2, request_digest=sha256(smaller), change="neutral")
    files[request_path("default")] = smaller
    files[record_path("default")] = dumps(doc)
    asked.world.forge_plans(files, asked.world.alice)
    result = asked.world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "weakens it without recording it" in result.reasons[0].message


# -------------------------------------------------------------------- the judged tree


def test_attack_request_old_plan_does_not_pass_a_changed_request(asked: Asked) -> None:
    """The user adds R3: the plan sealed before (and its evidence) no longer makes the tree
    PASS until a plan answering R3 is sealed."""
    more = {**REQUEST, "requirements": [R1, R2, {"id": "R3", "description": "it is fast"}]}
    outcome = asked.request(more, reason="also fast")
    assert [g.requirement for g in outcome.gaps] == ["R3"]
    asked.world.repo.commit("request R3")
    verdict = assert_plan(asked.world.gate(), "request.unanswered", "FAIL")
    assert "R3" in verdict.reasons[0].message


def test_attack_request_file_edited_in_the_tree(asked: Asked) -> None:
    """The agent edits the request file in the branch (it cannot seal it)."""
    asked.world.repo.write_json(
        ".gitaudit/requests/default.json", {"task": "x", "requirements": [R1]}
    )
    asked.world.repo.commit("smaller request")
    assert_plan(asked.world.gate(), "request.differs-from-seal", "FAIL")


def test_attack_request_sealed_but_never_planned(world: World) -> None:
    """A sealed request with no plan at all is not PASS (nor absent)."""
    raw = dumps(REQUEST)
    seal_request(world.handle(), world.alice, "asked", raw, source="asked.json")
    verdict = assert_plan(world.gate(), "request.unplanned", "FAIL", name="asked")
    assert "request v1 of plan 'asked' is sealed" in verdict.reasons[0].message


def test_attack_request_planner_covers_a_new_requirement_with_a_trivial_check(
    asked: Asked,
) -> None:
    """KNOWN LIMIT: the planner designs the proof. When the user adds R3, the agent may cover
    it with a check that proves nothing; the chain only sees that R3 is covered. It is
    visible: the seal is signed by and attributed to the planner, and the history says so."""
    asked_for = [R1, R2, {"id": "R3", "description": "it is fast"}]
    asked.request({**REQUEST, "requirements": asked_for}, reason="also fast")
    trivial = answering(
        *copy.deepcopy(PLAN["steps"]),
        step("fast", check("true"), covers=["R3"]),
        requirements=asked_for,
    )
    assert asked.seal(trivial).commit is not None
    asked.world.repo.commit("R3, trivially")
    assert asked.world.run().verdict == "PASS"
    assert asked.world.gate().verdict == "PASS"
    history = asked.world.cli("plan", "history")
    assert "default v2 strengthened by agent" in history.out, history.out


# -------------------------------------------------------------------------- controls


def test_request_control_planner_adds_a_step_and_strengthens(asked: Asked) -> None:
    """The agent evolves its plan: a step added, a check added, a requirement of its own."""
    grown = answering(
        step("unit", check("true"), check("true", "again"), covers=["R1"]),
        step("lint", check("true"), covers=["R2"]),
        step("docs", check("true"), covers=["R1", "MINE"]),
        requirements=[R1, R2, {"id": "MINE", "description": "the docs build"}],
    )
    outcome = asked.seal(grown)
    assert outcome.record is not None and outcome.record.change == "strengthened"
    assert outcome.record.sealer == "agent"
    asked.world.repo.commit("grown plan")
    assert asked.world.run().verdict == "PASS"
    assert asked.world.gate().verdict == "PASS"


def test_request_control_sealer_changes_the_request_and_the_planner_follows(
    asked: Asked,
) -> None:
    """The user rewrites R1 (a recorded weakening) and adds R3; the agent's plan follows both
    with its planner key, and the tree PASSes again."""
    r1 = {**R1, "description": "the thing works on Linux"}
    r3 = {"id": "R3", "description": "it is fast", "priority": "should"}
    changed = {**REQUEST, "requirements": [r1, R2, r3]}
    with pytest.raises(SealError, match="would be weakened"):
        asked.request(changed)
    asked.request(changed, allow_weaken=True, reason="Linux only")
    followed = answering(
        *copy.deepcopy(PLAN["steps"]),
        step("perf", check("true"), covers=["R3"]),
        requirements=[r1, R2, r3],
    )
    outcome = asked.seal(followed)
    assert outcome.record is not None and outcome.record.weakened  # recorded, and allowed
    assert (
        outcome.record.request_digest
        == read_state(asked.world.handle()).requests["default"].request_digest
    )
    asked.world.repo.commit("plan follows the request")
    assert asked.world.run().verdict == "PASS"
    assert asked.world.gate().verdict == "PASS"


def test_request_control_single_file_plans_keep_working(world: World) -> None:
    """A plan without a request file seals, runs and PASSes as before; its seal names no
    request, and the roles file lists no planners."""
    outcome = world.seal(PLAN)
    assert outcome.record is not None and "request_digest" not in outcome.record.to_json()
    assert world.run().verdict == "PASS"
    assert world.gate().verdict == "PASS"
    roles = json.loads(world.plans_files()["trust/roles.json"])
    assert "planners" not in roles
    assert TrustSet().with_role("planner") == []


def test_request_control_planner_following_a_dropped_requirement(asked: Asked) -> None:
    """The user drops R2 (recorded); the agent may then drop it from its plan too."""
    asked.request({**REQUEST, "requirements": [R1]}, allow_weaken=True, reason="no lint")
    outcome = asked.seal(drop_r2())
    assert outcome.commit is not None and outcome.record is not None
    assert outcome.record.weakenings == (
        "requirement R2: removed",
        "step lint: no longer covers R2",
    )
    asked.world.repo.commit("without R2")
    assert asked.world.run().verdict == "PASS"
    assert asked.world.gate().verdict == "PASS"


def test_request_control_planner_adds_a_needed_step_or_another_alternative(asked: Asked) -> None:
    """Additions that keep every PASS verifying what it verified are strengthenings a planner
    may seal: a new step that needs unit, and a new any_of route beside an alternative that was
    already optional (full still is the only step covering R1)."""
    needed = around_unit(step("ship", deps=["unit", "lint"], covers=["R1"]))
    outcome = asked.seal(needed)
    assert outcome.record is not None and outcome.record.change == "strengthened"
    assert asked.world.seal(COVERED_BY_AN_ALTERNATIVE, allow_weaken=True, reason="b").commit
    beside = tied(
        answering(
            *COVERED_BY_AN_ALTERNATIVE["steps"],
            step("fast2", check("true"), covers=["R2"]),
            step("ship2", deps=[{"any_of": ["fast2", "fast"]}], covers=["R2"]),
        )
    )
    outcome = asked.seal(beside)
    assert outcome.record is not None and outcome.record.change == "strengthened"
    assert outcome.record.weakenings == ()
    asked.world.repo.commit("another route")
    assert asked.world.run().verdict == "PASS"
    assert asked.world.gate().verdict == "PASS"


def _push_plans(asked: Asked) -> subprocess.CompletedProcess[str]:
    """``git push origin refs/audit/plans`` from the world's clone, as the agent would."""
    return subprocess.run(
        ["git", "push", "origin", f"{PLANS_REF}:{PLANS_REF}"],
        cwd=asked.world.path,
        capture_output=True,
        text=True,
        check=False,
    )


def _forged_trust(asked: Asked) -> dict[str, bytes]:
    """The trust files as the agent would have them: ``roles.json`` naming it a sealer, and
    ``allowed_signers`` giving alice's name to its key (its own line gone)."""
    files = asked.world.plans_files()
    roles = json.loads(files["trust/roles.json"])
    roles["sealers"] = sorted([*roles["sealers"], "agent"])
    mine, alices = asked.agent.public_key.openssh(), asked.world.alice.public_key.openssh()
    lines = files["trust/allowed_signers"].decode().splitlines(keepends=True)
    signers = "".join(line.replace(alices, mine) for line in lines if mine not in line).encode()
    return {"trust/roles.json": dumps(roles), "trust/allowed_signers": signers}


def _refused_everywhere(asked: Asked, tree: pygit2.Oid, server: Path, words: str) -> None:
    """The agent's planner key commits *tree* on the plans ref: the gate, a seal and the
    server's pre-receive each refuse it, saying *words*; the server's ref stays."""
    before = git(server, "rev-parse", PLANS_REF).strip()
    tip = asked.plans_tip()
    assert tip is not None
    git_ = asked.world.handle().git
    parents = [pygit2.Oid(hex=tip)]
    oid = asked.world.commit_object(git_, tree, parents, "plans: planner\n", asked.agent)
    asked.world.set_ref(PLANS_REF, oid)
    result = asked.world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert words in result.reasons[0].message, result.reasons[0].message
    with pytest.raises(TrustError, match=words):
        asked.seal(answering(step("unit", check("true"), covers=["R1", "R2"])), reason="x")
    pushed = _push_plans(asked)
    assert pushed.returncode != 0 and words in pushed.stderr, pushed.stderr
    assert git(server, "rev-parse", PLANS_REF).strip() == before


def _listed_twice(asked: Asked, path: str, forged: bytes | dict[str, bytes]) -> pygit2.Oid:
    """The plans tree with the entry at *path* listed twice: *forged* (a blob, or a folder of
    files), then the genuine one (which a walk of the tree keeps), each placed where a lookup by
    path finds the forged one (libgit2 searches a tree as if it were sorted, so what it finds
    depends on where the entries stand)."""
    git_ = asked.world.handle().git
    root = git_[write_tree(git_, asked.world.plans_files())]
    assert isinstance(root, pygit2.Tree)
    folder, _, name = path.rpartition("/")
    parent = git_[root[folder].id] if folder else root
    assert isinstance(parent, pygit2.Tree)
    if isinstance(forged, bytes):
        extra = (FileMode.BLOB, git_.create_blob(forged))
    else:
        extra = (FileMode.TREE, write_tree(git_, forged))
    listing = [(e.filemode, str(e.name), e.id) for e in parent]
    genuine = next(e for e in listing if e[1] == name)
    others = [e for e in listing if e[1] != name]
    places = [(i, j) for j in range(len(others) + 1) for i in range(j + 1)]
    for i, j in places:  # the forged entry at i, the genuine one after it, at j
        entries = [*others[:i], (extra[0], name, extra[1]), *others[i:j], genuine, *others[j:]]
        data = b"".join(b"%o %s\0" % (mode, n.encode()) + oid.raw for mode, n, oid in entries)
        tree = git_.odb.write(ObjectType.TREE, data)
        if folder:
            top = [(e.filemode, str(e.name), tree if e.name == folder else e.id) for e in root]
            data = b"".join(b"%o %s\0" % (mode, n.encode()) + oid.raw for mode, n, oid in top)
            tree = git_.odb.write(ObjectType.TREE, data)
        made = git_[tree]
        assert isinstance(made, pygit2.Tree)
        with contextlib.suppress(KeyError):  # out of order: the lookup may find neither
            if made[path].id == extra[1]:
                return tree
    raise AssertionError(f"no place of the extra {path} is found by a lookup")


TWICE = ["trust/roles.json", "trust", "trust/allowed_signers"]


@pytest.mark.parametrize("path", TWICE)
def test_attack_request_hand_made_planner_commit_lists_a_file_twice(
    asked: Asked, path: str, tmp_path: Path
) -> None:
    """The agent signs a plans commit with its planner key whose tree lists `trust/roles.json`
    (or the `trust` folder, or `trust/allowed_signers`) twice: the genuine entry, and one
    naming the agent a sealer (or giving alice's name to the agent's key). The planner's rules
    compared the files as a walk of the tree reads them (the last entry: nothing changed); the
    trust set was read by a lookup by path (the other entry): `status` said PASS, the server's
    `pre-receive` took the commit, and the agent, a sealer now, could seal its plan weakened
    (3 of 3 before the fix). A tree listing a name twice, which git never writes, is refused.
    (`policy.json` twice was refused already: each seal record binds the policy's digest.)"""
    server = asked.world.serve(tmp_path / "server.git")
    forged = _forged_trust(asked)
    folder = {  # the whole folder twice: the forged roles beside the genuine signers
        "allowed_signers": asked.world.plans_files()["trust/allowed_signers"],
        "roles.json": forged["trust/roles.json"],
    }
    tree = _listed_twice(asked, path, folder if path == "trust" else forged[path])
    _refused_everywhere(asked, tree, server, f"lists '{path}' twice, which git never writes")


def _slashed(asked: Asked, forged: dict[str, bytes]) -> pygit2.Oid:
    """The plans tree with the files of *forged* in their folders, then, at the top, an entry
    for each of them whose name is its whole path (``trust/roles.json``) holding the genuine
    file: a lookup by path goes through the folder, a walk of the tree keeps the last entry."""
    git_ = asked.world.handle().git
    files = asked.world.plans_files()
    root = git_[write_tree(git_, {**files, **forged})]
    assert isinstance(root, pygit2.Tree)
    entries = [(e.filemode, str(e.name), e.id) for e in root]
    entries += [(FileMode.BLOB, path, git_.create_blob(files[path])) for path in sorted(forged)]
    data = b"".join(b"%o %s\0" % (mode, n.encode()) + oid.raw for mode, n, oid in entries)
    return git_.odb.write(ObjectType.TREE, data)


@pytest.mark.parametrize(
    "paths",
    [
        ["trust/roles.json"],
        ["trust/allowed_signers"],
        ["trust/roles.json", "trust/allowed_signers"],
    ],
)
def test_attack_request_hand_made_planner_commit_names_a_file_by_its_path(
    asked: Asked, paths: list[str], tmp_path: Path
) -> None:
    """The agent signs a plans commit with its planner key whose `trust` folder names it a
    sealer (or gives alice's name to its key, or both), with a second entry at the top of the
    tree named `trust/roles.json` (`trust/allowed_signers`) holding the genuine file, where git
    would never write a `/`. The planner's rules compared the files as a walk of the tree reads
    them (the entry named by its path, last: nothing changed); the trust set was read by a
    lookup by path, through the folder: `status` said PASS, the server's `pre-receive` took the
    commit, and the agent was a sealer (3 of 3 before the fix, which the check of names listed
    twice let through). A tree git would not write is refused, naming it and the entry."""
    server = asked.world.serve(tmp_path / "server.git")
    forged = _forged_trust(asked)
    tree = _slashed(asked, {path: forged[path] for path in paths})
    named = f"tree {str(tree)[:12]} has an entry named {min(paths)!r}, which git never writes"
    _refused_everywhere(asked, tree, server, named)


# how the sealed plan passes RUN_FULL to the checks, and the agent's reseal that stops it: the
# check runs its full test only when the variable is set (a test suite gated on it)
GATED = 'test -z "$RUN_FULL" || grep -qx ok verdict'
CLOSED_PASS_ENV: dict[
    str, tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]
] = {
    # (plan fields sealed, unit fields sealed, plan fields resealed, unit fields resealed)
    "plan-level-removed": ({"pass_env": ["RUN_FULL"]}, {}, {}, {}),
    "step-level-removed": ({}, {"pass_env": ["RUN_FULL"]}, {}, {}),
    "prefix-narrowed": ({"pass_env": ["RUN_*", "RUN_UNIT"]}, {}, {"pass_env": ["RUN_UNIT"]}, {}),
    "moved-to-another-step": ({"pass_env": ["RUN_FULL"]}, {}, {}, {}),
}


@pytest.mark.parametrize("variant", sorted(CLOSED_PASS_ENV))
def test_attack_request_planner_stops_passing_a_variable_the_sealed_check_reads(
    asked: Asked, monkeypatch: pytest.MonkeyPatch, variant: str
) -> None:
    """alice seals the plan: unit's check runs its full test when RUN_FULL is set, and the plan
    passes RUN_FULL to the checks (`pass_env`: plan level, the step's, or a prefix `RUN_*`
    beside `RUN_UNIT`); the
    user's runs set it, so unit fails on the broken tree. The agent reseals with its planner key
    without it (removed, narrowed to another name, or moved to a new step of its own), the check
    itself unchanged. `compare` ranked closing what checks read beyond the tree a
    strengthening, so `plan seal` took it, the check no longer saw RUN_FULL, skipped its test,
    and the run and the gate said PASS (all four before the fix). A variable the sealed checks
    were passed and are no longer is a weakening, as a check's own `env` changed is: refused."""
    world = asked.world
    monkeypatch.setenv("RUN_FULL", "1")
    monkeypatch.setenv("RUN_UNIT", "1")
    world.repo.write("verdict", "broken\n")
    sealed_plan, sealed_unit, new_plan, new_unit = CLOSED_PASS_ENV[variant]
    unit = step("unit", check("sh", "-c", GATED), covers=["R1"])
    lint = step("lint", check("true"), covers=["R2"])
    strict = answering(unit | sealed_unit, lint) | sealed_plan
    assert world.seal(strict, allow_weaken=True, reason="full tests").commit is not None
    assert world.run().verdict == "FAIL"
    loose = answering(unit | new_unit, lint) | new_plan
    if variant == "moved-to-another-step":
        loose["steps"].append(step("env", check("true"), covers=["R2"], pass_env=["RUN_FULL"]))
    refused(asked, loose, "planner 'agent' cannot weaken plan 'default' (")
    world.repo.commit("the agent's plan")
    assert world.gate().verdict != "PASS"  # the plan file differs from the seal
    world.write_plan(strict)
    world.repo.commit("the sealed plan")
    assert world.run().verdict == "FAIL"
    assert world.gate().verdict == "FAIL"


def test_attack_request_hand_made_planner_commit_stops_passing_a_variable(
    asked: Asked, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same as a plans commit the agent signs by hand (the weakening recorded): every reader
    of the plans ref judges it with the same rules, and refuses it."""
    world = asked.world
    monkeypatch.setenv("RUN_FULL", "1")
    world.repo.write("verdict", "broken\n")
    unit = step("unit", check("sh", "-c", GATED), covers=["R1"])
    lint = step("lint", check("true"), covers=["R2"])
    strict = answering(unit, lint) | {"pass_env": ["RUN_FULL"]}
    assert world.seal(strict, allow_weaken=True, reason="full tests").commit is not None
    asked.forge_seal(answering(unit, lint))
    world.repo.commit("the agent's plan")
    result = world.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "planner 'agent' cannot weaken plan 'default' (plan: pass_env: no longer RUN_FULL" in (
        result.reasons[0].message
    )


def test_request_control_planner_passes_a_variable_no_sealed_check_saw(
    asked: Asked, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control: a sealed plan passing nothing stays sealable, and a plan passing RUN_FULL that
    the planner leaves as it is reseals (a check added after unit's) and PASSes."""
    world = asked.world
    monkeypatch.setenv("RUN_FULL", "1")
    world.repo.write("verdict", "ok\n")
    unit = step("unit", check("sh", "-c", GATED), covers=["R1"])
    lint = step("lint", check("true"), covers=["R2"])
    sealed = answering(unit, lint) | {"pass_env": ["RUN_FULL"]}
    assert world.seal(sealed, allow_weaken=True, reason="full tests").commit is not None
    more = copy.deepcopy(unit)
    more["verify"].append(check("test", "-f", "verdict"))
    assert asked.seal(answering(more, lint) | {"pass_env": ["RUN_FULL"]}).commit is not None
    world.repo.commit("the agent's plan")
    assert world.run().verdict == "PASS"
    assert world.gate().verdict == "PASS"
