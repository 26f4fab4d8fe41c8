"""The contract of a plan and its digest (design §2).

The contract is the plan's meaning with everything cosmetic or runtime removed (``status``,
``created``, ``description``, check ``name``, ``owner``) and every default made explicit, so that
key order, whitespace, ``"cmd": "pytest -q"`` versus ``"argv": ["pytest", "-q"]`` or an explicit
``"expect_exit": 0`` never change it, while any change to what is checked does. The digest is
sha256 over the RFC 8785 canonical JSON of the contract. Fields added after the first contract
format (see :mod:`gitaudit.plan.exposure`) enter it only when they differ from their defaults, so
a contract sealed before they existed keeps its digest.
"""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

from gitaudit.plan import exposure
from gitaudit.plan.model import Check, Plan, Step

CONTRACT_FORMAT = "gitaudit.contract/1"


def check_contract(check: Check) -> dict[str, Any]:
    """One check, normalised: the fields its type uses, with defaults filled in."""
    body: dict[str, Any] = {"type": check.type}
    if check.type == "run":
        if check.shell:
            body["shell"] = True
            body["cmd"] = check.cmd
        else:
            body["argv"] = list(check.argv)
    elif check.type == "exec":
        body["path"] = check.path
        body["args"] = list(check.args)
    elif check.type == "pytest":
        body["argv"] = list(check.argv)
    elif check.type == "file_exists":
        body["path"] = check.path
        if check.kind != "file":  # added in 0.2: only when not the default (stable digests)
            body["kind"] = check.kind
    elif check.type == "regex":
        body["path"] = check.path
        body["pattern"] = check.pattern
    if check.behavioural:
        body.update(
            expect_exit=check.expect_exit,
            output_regex=check.output_regex,
            timeout=check.timeout,
            max_output_bytes=check.max_output_bytes,
            env=dict(sorted(check.env.items())),
            cwd=check.cwd,
        )
    return body


def step_contract(step: Step) -> dict[str, Any]:
    return {
        "id": step.raw_id,
        "title": step.title,
        "depends_on": [
            {"any_of": list(c.alternatives)} if c.is_any_of else c.alternatives[0]
            for c in step.depends_on
        ],
        "requires_outputs": [
            {"step": s, "name": n}
            for s, n in sorted({(r.step, r.name) for r in step.requires_outputs})
        ],
        "covers": sorted(set(step.covers)),
        "verify": [check_contract(c) for c in step.verify],
        "outputs": [
            {
                "name": o.name,
                "verify": [check_contract(c) for c in o.checks],
                # added in 0.2: only when declared, so existing contracts keep their digests
                **({"artifacts": list(o.artifacts)} if o.artifacts else {}),
            }
            for o in step.outputs
        ],
        "readback": [check_contract(c) for c in step.readback],
        "cost": step.cost,
        "valid_for": step.valid_for,
        "idempotent": step.idempotent,
        "inputs": sorted(set(step.inputs)),
        "max_attempts": step.max_attempts,
        # added in 0.3: only when set (stable digests)
        **({"runs_on": sorted(set(step.runs_on))} if step.runs_on else {}),
        **({"artifacts": list(step.artifacts)} if step.artifacts else {}),
        **exposure.step_fields(step),
    }


def contract(plan: Plan) -> dict[str, Any]:
    """The plan's contract as a JSON-ready dict (what the seal binds)."""
    return {
        "format": CONTRACT_FORMAT,
        "task": plan.task,
        "sequential": plan.legacy,
        "requirements": [
            {"id": r.id, "description": r.description, "priority": r.priority}
            for r in plan.requirements
        ],
        "required_tools": sorted(set(plan.required_tools)),
        "steps": [step_contract(s) for s in plan.steps],
        # added in 0.3: only when set (stable digests)
        **({"protect": sorted(set(plan.protect))} if plan.protect else {}),
        **exposure.plan_fields(plan),
    }


def canonical(value: Any) -> bytes:
    """RFC 8785 canonical JSON bytes."""
    return bytes(rfc8785.dumps(value))


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def contract_digest(plan: Plan) -> str:
    """``sha256:<hex>`` of the canonical contract: same contract, same digest, on every machine."""
    return sha256(canonical(contract(plan)))


def step_digest(plan: Plan, step: Step) -> str:
    """Digest of one step's contract and of the plan-level settings it runs under (used to
    carry evidence across reseals): a reseal that changes what the checks may read beyond the
    tree (``workspace``, ``pass_env``, ``home``, ``ignored_paths``, ``filters``, ``python``)
    reopens every step, as one that changes the step does. Those settings enter only when they
    differ from their defaults, so the digests of plans without them stay what they were."""
    body: dict[str, Any] = {"plan_format": CONTRACT_FORMAT, "step": step_contract(step)}
    shared = exposure.plan_fields(plan)
    if shared:
        body["plan"] = shared
    return sha256(canonical(body))
