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
import json
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
        "requires_outputs": [{"step": r.step, "name": r.name} for r in step.upstream_outputs()],
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
    """RFC 8785 canonical JSON bytes (:mod:`rfc8785`'s, byte for byte).

    Contracts hold strings, booleans, null, integers, timeouts in seconds, lists and objects,
    and for those RFC 8785 is what the standard library's C encoder writes with sorted keys and
    no spaces, once each integral float is an integer (RFC 8785 writes ``300.0`` as ``300``):
    the same escapes (RFC 8785 3.2.2.2 takes ECMAScript's, which Python's ``json`` shares),
    numbers within 2**53 without an exponent written alike, and keys in code-point order,
    which is UTF-16 order for keys without a character beyond U+FFFF. rfc8785 is pure Python,
    three times slower; it writes anything else (a float Python writes with an exponent, zero,
    a key beyond U+FFFF, another type, a lone surrogate), and refuses what it refuses."""
    try:
        text = json.dumps(_plain(value), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        return text.encode("utf-8")
    except (_NotPlain, UnicodeEncodeError, RecursionError):  # a lone surrogate: refused below
        return bytes(rfc8785.dumps(value))


class _NotPlain(Exception):
    """A value the standard library does not write as RFC 8785 does."""


_SAFE_INTEGER = 2**53 - 1  # RFC 8785 numbers are IEEE doubles: integers beyond are refused
_BEYOND_BMP = "\U00010000"


def _plain(value: Any) -> Any:
    """*value* with each integral float an integer, when it holds only what the standard
    library then writes as RFC 8785 does (see :func:`canonical`): exact str, bool, None, int
    and float within 2**53 (no exponent, not zero), list, tuple, and dict with str keys below
    U+10000. :class:`_NotPlain` otherwise."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        if -_SAFE_INTEGER <= value <= _SAFE_INTEGER:
            return value
        raise _NotPlain
    if kind is float:
        if value.is_integer() and value and -_SAFE_INTEGER <= value <= _SAFE_INTEGER:
            return int(value)
        written = repr(value)
        if value and not value.is_integer() and "e" not in written and "n" not in written:
            return value  # not nan, inf nor an exponent: RFC 8785 writes repr's digits
        raise _NotPlain
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str or not (key.isascii() or max(key) < _BEYOND_BMP):
                raise _NotPlain
            out[key] = _plain(item)
        return out
    if kind is list or kind is tuple:
        return [_plain(item) for item in value]
    raise _NotPlain


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def contract_digest(plan: Plan) -> str:
    """``sha256:<hex>`` of the canonical contract: same contract, same digest, on every machine."""
    return sha256(canonical(contract(plan)))


def step_digest(plan: Plan, step: Step) -> str:
    """Digest of one step's contract and of the plan-level settings it runs under (used to
    carry evidence across reseals): a reseal that changes what the checks may read beyond the
    tree (``workspace``, ``pass_env``, ``home``, ``ignored_paths``, ``filters``, ``python``)
    or the tools every run must find (``required_tools``: a check that skips what a missing tool
    would have checked passed in a run under a seal that did not require it) reopens every
    step, as one that changes the step does. Those settings enter only when they differ from
    their defaults, so the digests of plans without them stay what they were."""
    body: dict[str, Any] = {"plan_format": CONTRACT_FORMAT, "step": step_contract(step)}
    shared = exposure.plan_fields(plan)
    if plan.required_tools:
        shared["required_tools"] = sorted(set(plan.required_tools))
    if shared:
        body["plan"] = shared
    return sha256(canonical(body))
