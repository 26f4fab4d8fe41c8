"""Who may say what a run records beyond what its checks showed.

A runner key records what its checks observed. Settling an unknown outcome by someone's word
(``git audit reconcile STEP --observed pass|fail``) is authority, not a button: it needs a key
with the **reconciler** role, or a sealer's (sealers are reconcilers too). A runner may still
reconcile with ``--readback``: the step's readback checks run like any other check. The gate
applies the same rule to every run commit it judges (:mod:`gitaudit.gate.authority`), since a
runner key can write run commits without this command.

Likewise a step exhausted under its contract (``max_attempts`` failures since a sealer last reset
them) may be run with ``--force``, but its evidence does not count until a sealer resets its
attempts (``git audit plan reset-attempts``): :func:`forced_past_exhaustion` names those steps so
that ``git audit run`` does not report as PASS what the gate will not accept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gitaudit.crypto.pubkey import PublicKey
from gitaudit.errors import TrustError
from gitaudit.ledger.trust import TrustSet
from gitaudit.plan.model import Plan, StepId

OBSERVED = ("pass", "fail")  # the reconcile modes that take the caller's word


def require_reconciler(
    trust: TrustSet, key: PublicKey, reconcile: Mapping[StepId, tuple[str, str]]
) -> None:
    """TrustError, before anything runs, when *reconcile* settles a step by observation and
    *key* is neither a reconciler nor a sealer."""
    observed = sorted(sid for sid, (mode, _note) in reconcile.items() if mode != "readback")
    if not observed:
        return
    entry = trust.find(key)
    if entry is not None and entry.may("reconciler"):
        return
    who = f"key {entry.name} ({key.fingerprint()})" if entry else f"key {key.fingerprint()}"
    step = observed[0]
    raise TrustError(
        f"{who} may not settle step {step} by its word (--observed): that needs a reconciler "
        "or a sealer key",
        hint=f"observe it with the step's readback checks (`git audit reconcile {step} "
        "--readback`), or have a reconciler run it with --key; a sealer grants the role: "
        "`git audit trust add KEY.pub --role reconciler --name NAME`",
    )


def forced_past_exhaustion(plan: Plan, run: Mapping[str, Any]) -> list[StepId]:
    """The steps a forced run (*run*: its run.json) executed and passed although their failed
    attempts had reached ``max_attempts``: this run's attempt number is past it."""
    if run.get("forced") is not True:
        return []
    found = []
    for step in plan.steps:
        entry = run["steps"].get(step.id, {})
        attempt = entry.get("attempt")
        past = isinstance(attempt, int) and attempt > step.max_attempts
        if entry.get("status") == "passed" and past:
            found.append(step.id)
    return found
