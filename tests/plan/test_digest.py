"""The contract digest: stable under cosmetic change, sensitive to any change of meaning."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from gitaudit.plan.digest import _plain, canonical, contract, contract_digest
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


def test_what_runs_upstream_is_what_the_digest_binds() -> None:
    """``requires_outputs`` is sorted and deduplicated in the contract, so its order and
    repeats in the file do not change the digest; the runner re-executes the upstream outputs
    in the contract's order (``Step.upstream_outputs``), so they decide nothing either."""
    plan = two_step_plan()
    plan["steps"].insert(0, copy.deepcopy(plan["steps"][0]))
    plan["steps"][0]["id"] = "a-first"
    plan["steps"][2]["depends_on"] = ["a-first", "build"]
    needs = [{"step": "build", "name": "artifact"}, {"step": "a-first", "name": "artifact"}]
    orders = [needs, needs[::-1], [*needs, needs[0]], [needs[1], needs[0], needs[1]]]
    digests, runs = set(), set()
    for order in orders:
        plan["steps"][2]["requires_outputs"] = order
        digests.add(digest(plan))
        loaded, problems = load_plan(json.dumps(plan).encode(), name="p", source="p.json")
        assert loaded is not None and not [p for p in problems if p.severity == "error"]
        runs.add(tuple((r.step, r.name) for r in loaded.steps[2].upstream_outputs()))
    assert len(digests) == 1
    assert runs == {(("a-first", "artifact"), ("build", "artifact"))}


def test_the_required_tools_enter_every_step_digest() -> None:
    """A step runs under the plan's ``required_tools`` (a run that lacks one does not count),
    so adding, changing or dropping one changes every step's digest (its evidence is not
    carried across the reseal), their order and repeats do not, and a plan without any keeps
    the step digests it always had."""
    from gitaudit.plan.digest import sha256, step_contract, step_digest

    def step_digests(data: dict[str, Any]) -> list[str]:
        loaded, problems = load_plan(json.dumps(data).encode(), name="p", source="p.json")
        assert loaded is not None, problems
        return [step_digest(loaded, s) for s in loaded.steps]

    plan = two_step_plan()
    loaded, _ = load_plan(json.dumps(plan).encode(), name="p", source="p.json")
    assert loaded is not None
    unchanged = [
        sha256(canonical({"plan_format": "gitaudit.contract/1", "step": step_contract(s)}))
        for s in loaded.steps
    ]
    assert step_digests(plan) == unchanged
    seen = {tuple(unchanged)}
    for tools in (["sh"], ["sh", "probetool"], ["probetool"]):
        digests = step_digests(plan | {"required_tools": tools})
        assert not set(digests) & set(unchanged), tools
        assert tuple(digests) not in seen, tools
        seen.add(tuple(digests))
    again = step_digests(plan | {"required_tools": ["probetool", "probetool"]})
    assert again == step_digests(plan | {"required_tools": ["probetool"]})
    assert step_digests(plan | {"required_tools": []}) == unchanged


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


# --- canonical: the standard library's encoder where it writes what rfc8785 writes ---------

_KEYS = st.text(
    st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=4
)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**54), max_value=2**54)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0.0, -0.0, 300.0, 1e15, 1e16, 2.0**53, 1e-7, 1e-4, 1e21, 0.1, 123.456])
    | st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()))
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(_KEYS, inner, max_size=4)
    ),
    max_leaves=20,
)


def _reference(value: Any) -> bytes | str:
    try:
        return bytes(rfc8785.dumps(value))
    except ValueError as exc:  # rfc8785 refuses with its own errors, or with UnicodeEncodeError
        return type(exc).__name__


def _ours(value: Any) -> bytes | str:
    try:
        return canonical(value)
    except ValueError as exc:  # rfc8785 refuses with its own errors, or with UnicodeEncodeError
        return type(exc).__name__


@settings(max_examples=1000, deadline=None)
@given(_VALUES)
def test_canonical_is_rfc8785_byte_for_byte(value: Any) -> None:
    """Any JSON-like value (floats of every kind, integers beyond 2**53, keys beyond U+FFFF,
    lone surrogates, tuples): the same bytes as rfc8785's, or the same refusal."""
    assert _ours(value) == _reference(value)


@pytest.mark.parametrize(
    "value",
    [
        {"timeout": 300.0, "b": [1, 2.5, True, None], "a": "x"},
        {"\U0001f600": 1, "\ufb01": 2},  # UTF-16 order differs from code-point order
        {"n": 2**53},
        {"f": 1e-7, "g": 1e21, "z": -0.0},
        {"s": "\ud800"},
        ['\x00\x1f\x7f\u2028"\\'],
    ],
    ids=["contract-like", "keys-beyond-bmp", "big-int", "exponents", "surrogate", "escapes"],
)
def test_canonical_edge_cases(value: Any) -> None:
    assert _ours(value) == _reference(value)


def test_canonical_of_a_contract_takes_the_fast_path() -> None:
    """A plan's contract holds only what the standard library writes as RFC 8785 does, once
    its integral timeouts are integers: the fast path, not the fallback, digests it."""
    plan, problems = load_plan(json.dumps(two_step_plan()).encode(), name="p", source="p")
    assert plan is not None, problems
    body = contract(plan)
    assert canonical(body) == bytes(rfc8785.dumps(body))
    assert json.dumps(_plain(body), sort_keys=True) != json.dumps(body, sort_keys=True)
