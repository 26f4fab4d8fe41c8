"""The contract digest: stable under cosmetic change, sensitive to any change of meaning."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gitaudit.plan.digest import contract_digest
from gitaudit.plan.load import load_plan
from tests.plan.builders import fixture, two_step_plan


def digest(data: Any, *, indent: int | None = None, sort_keys: bool = False) -> str:
    plan, problems = load_plan(
        json.dumps(data, indent=indent, sort_keys=sort_keys).encode(), name="p", source="p"
    )
    assert plan is not None, problems
    return contract_digest(plan)


def test_key_order_and_whitespace_do_not_change_the_digest() -> None:
    plan = two_step_plan()
    assert digest(plan) == digest(plan, indent=4, sort_keys=True)
    reordered = {k: plan[k] for k in reversed(list(plan))}
    assert digest(plan) == digest(reordered)


def test_runtime_and_cosmetic_fields_do_not_change_the_digest() -> None:
    plan = two_step_plan()
    before = digest(plan)
    plan["created"] = "2026-01-01"
    plan["steps"][0]["status"] = "verified"
    plan["steps"][0]["owner"] = "someone"
    plan["steps"][0]["verify"][0]["name"] = "smoke"
    assert digest(plan) == before


def test_explicit_defaults_and_cmd_spelling_do_not_change_the_digest() -> None:
    plan = two_step_plan()
    before = digest(plan)
    plan["steps"][0]["verify"][0] = {"type": "run", "cmd": "true", "expect_exit": 0, "timeout": 300}
    plan["steps"][0]["max_attempts"] = 3
    assert digest(plan) == before


def test_changing_a_check_argument_changes_the_digest() -> None:
    plan = two_step_plan()
    before = digest(plan)
    plan["steps"][0]["verify"][0]["argv"] = ["true", "--strict"]
    assert digest(plan) != before


def test_every_contract_field_is_bound() -> None:
    base = fixture("plans/release-mission.json")
    seen = {digest(base)}
    mutations: list[Callable[[dict[str, Any]], object]] = [
        lambda p: p["requirements"][0].update(priority="should"),
        lambda p: p["steps"][1]["covers"].append("REQ-SEC"),
        lambda p: p["steps"][1]["outputs"][0]["verify"][0].update(path="elsewhere.json"),
        lambda p: p["steps"][5]["depends_on"][0]["any_of"].pop(),
        lambda p: p["steps"][6].update(valid_for="8d"),
        lambda p: p["steps"][7].update(idempotent=True),
        lambda p: p["steps"][2].update(cost=9),
        lambda p: p.update(required_tools=["python3", "git"]),
        lambda p: p["steps"][0]["verify"][0].update(expect_exit=1),
    ]
    for mutate in mutations:
        variant = json.loads(json.dumps(base))
        mutate(variant)
        d = digest(variant)
        assert d not in seen
        seen.add(d)


def test_digest_format() -> None:
    d = digest(two_step_plan())
    assert d.startswith("sha256:") and len(d) == len("sha256:") + 64
