"""The gate against signed but arbitrary evidence: always a verdict, PASS only for a genuine pass.

A trusted runner key (an in-process ``Ed25519Signer`` trusted through ``trust_init``) signs run
commits whose ``run.json`` is damaged, forged or plain garbage, on top of a genuine PASS run for an
older tree. ``gate.assess`` must return a verdict without raising, and PASS only when the run it
judged really is a pass of this plan, this tree and this contract: every step ``passed``, or
``carried`` from an earlier run on the same ledger in which the step passed for the same tree and
contract or for the same input digest as this tree gives it. Both the local ledger and a pushed
run (``pushed_runs``, as the pre-receive hook judges it) are exercised.
"""

from __future__ import annotations

import json
from typing import Any

import pygit2
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gitaudit.gate.result import GateResult
from gitaudit.git.repo import open_repo
from gitaudit.ledger.records import RUN_FORMAT
from gitaudit.ledger.refs import runs_ref
from tests.fuzz._support import (
    GateWorld,
    encode,
    gate_world,
    ideal_doc,
    install_run,
    json_values,
    judge_gate,
    mutate,
    tolerating_known_bugs,
)

STATUSES = ["passed", "carried", "failed", "blocked", "unknown", "exhausted", "not-run"]
STEP_FIELDS = ["status", "status", "carried_from", "input_digest", "upstream", "reason", "checks"]
RUN_FIELDS = ["verdict", "reasons", "tree", "plan", "contract_digest", "format", "steps"]


def vocabulary(world: GateWorld, extra: list[str]) -> list[Any]:
    return [
        *STATUSES,
        *["PASS", "FAIL", "UNKNOWN", "INTERRUPTED", RUN_FORMAT, world.plan, "a", "b", "R"],
        *["format", "plan", "verdict", "tree", "contract_digest", "steps", "status"],
        *["carried_from", "input_digest", "upstream", "checks", "outcome", "reasons", "passed"],
        world.tree,
        str(world.genuine_doc["tree"]),
        world.contract,
        str(world.genuine),
        *world.digests.values(),
        *extra,
        {"passed": False, "checks": [{"outcome": "unknown"}]},
        {"passed": False, "checks": [{"outcome": "failed"}]},
    ]


def _run_json(data: st.DataObject, world: GateWorld, extra: list[str]) -> bytes:
    how = data.draw(st.sampled_from(["ideal", "ideal", "genuine", "json", "bytes"]), label="doc")
    if how == "bytes":
        return data.draw(st.binary(max_size=120), label="run.json bytes")
    words = vocabulary(world, extra)
    leaves = json_values(words, max_leaves=6)
    if how == "json":
        return encode(data.draw(json_values(words), label="run.json"), data)
    base = ideal_doc(world) if how == "ideal" else world.genuine_doc
    doc = mutate(data, base, leaves, max_rounds=3)
    # focused edits: the fields the gate reads, set to statuses, ids, digests or junk
    for _ in range(data.draw(st.integers(0, 3), label="focused edits")):
        if not isinstance(doc, dict):
            break
        steps = doc.get("steps")
        if isinstance(steps, dict) and steps and data.draw(st.booleans()):
            entry = steps.get(data.draw(st.sampled_from(sorted(steps))))
            if isinstance(entry, dict):
                field = data.draw(st.sampled_from(STEP_FIELDS), label="step field")
                entry[field] = data.draw(leaves, label="step value")
        else:
            field = data.draw(st.sampled_from(RUN_FIELDS), label="run field")
            doc[field] = data.draw(leaves, label="run value")
    return encode(doc, data)


def _parsed(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def genuine_pass(world: GateWorld, ledger: list[tuple[str, Any]], judged: str) -> bool:
    """Whether run *judged* (on *ledger*, oldest first: commit hex and parsed run.json) proves
    this plan for the judged tree."""
    position = {commit: i for i, (commit, _) in enumerate(ledger)}
    docs = dict(ledger)
    doc = docs.get(judged)
    if not isinstance(doc, dict) or not isinstance(doc.get("steps"), dict):
        return False
    wanted = {
        "format": RUN_FORMAT,
        "plan": world.plan,
        "tree": world.tree,
        "contract_digest": world.contract,
        "verdict": "PASS",
    }
    if any(doc.get(k) != v for k, v in wanted.items()):
        return False
    for sid in world.step_ids:
        entry = doc["steps"].get(sid)
        if not isinstance(entry, dict) or entry.get("status") not in ("passed", "carried"):
            return False
        if entry["status"] == "passed":
            continue
        source = entry.get("carried_from")
        if source not in position or position[source] >= position[judged]:
            return False
        origin = docs[source]
        if not isinstance(origin, dict) or origin.get("format") != RUN_FORMAT:
            return False
        steps = origin.get("steps")
        first = steps.get(sid) if isinstance(steps, dict) else None
        if not isinstance(first, dict) or first.get("status") != "passed":
            return False
        same_tree = origin.get("tree") == world.tree and origin.get("contract_digest") == (
            world.contract
        )
        digest = world.digests[sid]
        same_inputs = first.get("input_digest") == entry.get("input_digest") == digest
        if not (same_tree or same_inputs):
            return False
    return True


def _judge(pushed: pygit2.Oid | None) -> GateResult | None:
    result = None
    with tolerating_known_bugs(()):  # the gate promises verdicts, never exceptions
        result = judge_gate(pushed)
    return result


def test_the_ideal_forgery_is_a_pass_and_the_oracle_agrees() -> None:
    """Sanity: without mutations the gate passes, so the property below is not vacuous."""
    world = gate_world()
    raw = json.dumps(ideal_doc(world)).encode()
    commit = install_run(raw)
    result = _judge(None)
    assert result is not None and result.verdict == "PASS", result
    ledger = [(str(world.genuine), world.genuine_doc), (str(commit), _parsed(raw))]
    assert genuine_pass(world, ledger, str(commit))
    # the genuine doc is for the older tree only: the gate must not use it for HEAD
    install_run(json.dumps(world.genuine_doc).encode())
    result = _judge(None)
    assert result is not None and result.verdict == "UNKNOWN", result


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_gate_on_signed_arbitrary_run_json_gives_a_verdict_and_passes_only_genuinely(
    data: st.DataObject,
) -> None:
    world = gate_world()
    ledger: list[tuple[str, Any]] = [(str(world.genuine), world.genuine_doc)]
    parent = world.genuine
    extra: list[str] = []
    for _ in range(data.draw(st.integers(1, 2), label="runs")):
        raw = _run_json(data, world, extra)
        parent = install_run(raw, parent=parent)
        ledger.append((str(parent), _parsed(raw)))
        extra.append(str(parent))
    pushed = data.draw(st.booleans(), label="pushed")
    if pushed:  # the pre-receive view: the ref still at the genuine run, the pushed tip beside
        git = open_repo(world.path).git
        git.references.create(runs_ref(world.plan), world.genuine, force=True)
    result = _judge(parent if pushed else None)
    if result is None:
        return  # a registered known bug (counted as an event)
    event(f"verdict {result.verdict}")
    assert result.verdict in ("PASS", "FAIL", "UNKNOWN")
    if result.verdict == "PASS":
        (plan,) = result.plans
        assert plan.run is not None
        assert genuine_pass(world, ledger, plan.run), (plan.run, ledger[-1][1])
