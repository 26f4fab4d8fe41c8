"""Attacks on the signatures and the trust set: the principals, options and keys of
``trust/allowed_signers`` and ``trust/roles.json`` on ``refs/audit/plans``, read by every judge.

The world (``tests/adversarial/conftest.py``): alice is the only sealer, ci the only runner,
mallory is the agent, trusted by nobody until alice adds mallory's key at mallory's request.
"""

from __future__ import annotations

import pytest

from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.refs import PLANS_REF
from gitaudit.ledger.seals import seal_plan
from gitaudit.plan.catalog import check_worktree
from tests.adversarial.conftest import World, check, plan, step

WEAK = plan(step("unit", check("true")))
"""STRICT without its step ``lint``: a weakening only a sealer may seal."""


@pytest.mark.parametrize(
    ("role", "name"),
    [
        ("runner", "alice,agent"),
        ("planner", "alice,agent"),
        ("reconciler", "alice,mallory-bot"),
    ],
)
def test_attack_signatures_principal_name_lists_a_sealer(
    proven: World, role: str, name: str
) -> None:
    """mallory asks alice to trust her key as a runner, planner or reconciler under a name that
    is a principal list (``alice,agent``). Every reader splits an allowed-signers principal list
    at its commas, so mallory's key came back as ``alice`` *and* ``agent``, alice's roles
    included: a sealer (the first entry, as which the writers take it too). mallory then sealed
    the weak plan with her own key and ci's honest run of it passed. A principal name is now one
    name: no comma, no white space, no control character (what splits a name or a line on
    reading), refused before anything is signed."""
    before = proven.ref(PLANS_REF)
    added = proven.cli(
        "trust", "add", proven.mallory.public_key.openssh(), "--role", role, "--name", name,
        "--key", str(proven.keys["alice"]),
    )  # fmt: skip
    if added.code == 0:  # before the fix: mallory's key is a sealer; she weakens the contract
        assert proven.mallory.public_key in read_state(proven.handle()).trust.with_role("sealer")
        proven.write_plan(WEAK)
        proven.repo.commit("weak plan")
        (checked,) = check_worktree(proven.path, "default")
        seal_plan(proven.handle(), proven.mallory, checked, reason="x", allow_weaken=True)
        proven.run()
        assert proven.gate().verdict == "PASS"
    assert added.code == 2, added.out + added.err
    assert f"invalid principal name {name!r}" in added.err
    assert proven.ref(PLANS_REF) == before
