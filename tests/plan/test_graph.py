"""Graph algorithms against brute force on random graphs (hypothesis)."""

from __future__ import annotations

import contextlib
import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gitaudit.errors import GitAuditError
from gitaudit.plan.graph import find_cycles, render, topological_order
from gitaudit.plan.load import load_plan
from gitaudit.plan.validate import validate_bytes
from tests.plan.builders import fixture

graphs = st.integers(min_value=1, max_value=7).flatmap(
    lambda n: st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=n * 3).map(
        lambda edges: (n, sorted(set(edges)))
    )
)


def plan_for(n: int, edges: list[tuple[int, int]]) -> dict[str, Any]:
    steps = []
    for i in range(n):
        deps = sorted({b + 1 for a, b in edges if a == i})
        steps.append(
            {
                "id": i + 1,
                "depends_on": deps,
                "requires_outputs": [{"step": d, "name": "o"} for d in deps],
                "verify": [{"type": "run", "argv": ["true"]}],
                "outputs": [{"name": "o", "verify": [{"type": "file_exists", "path": "o"}]}],
            }
        )
    return {"requirements": [{"id": "R", "description": "r"}], "steps": steps}


def brute_force_has_cycle(n: int, edges: list[tuple[int, int]]) -> bool:
    """A graph is acyclic iff some ordering of its nodes puts every dependency first."""
    for order in itertools.permutations(range(n)):
        pos = {node: i for i, node in enumerate(order)}
        if all(pos[b] < pos[a] for a, b in edges if a != b) and all(a != b for a, b in edges):
            return False
    return True


@settings(max_examples=150, deadline=None)
@given(graphs)
def test_cycle_detection_agrees_with_brute_force(graph: tuple[int, list[tuple[int, int]]]) -> None:
    n, edges = graph
    adjacency = {str(i + 1): [str(b + 1) for a, b in edges if a == i] for i in range(n)}
    cycles = find_cycles(adjacency)
    assert bool(cycles) == brute_force_has_cycle(n, edges)
    for cycle in cycles:  # every reported cycle is a real one
        for a, b in zip(cycle, [*cycle[1:], cycle[0]], strict=True):
            assert b in adjacency[a]


@settings(max_examples=150, deadline=None)
@given(graphs)
def test_topological_order_respects_every_edge(graph: tuple[int, list[tuple[int, int]]]) -> None:
    n, edges = graph
    if brute_force_has_cycle(n, edges):
        return
    plan, problems = load_plan(json.dumps(plan_for(n, edges)).encode(), name="g", source="g")
    assert plan is not None, problems
    order = topological_order(plan)
    assert sorted(order) == sorted(plan.step_ids)
    pos = {sid: i for i, sid in enumerate(order)}
    for a, b in edges:
        assert pos[str(b + 1)] < pos[str(a + 1)]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def near_valid() -> st.SearchStrategy[Any]:
    base = fixture("plans/release-mission.json")
    keys = ["id", "depends_on", "requires_outputs", "verify", "outputs", "covers", "cost"]
    return st.tuples(st.integers(0, 9), st.sampled_from(keys), json_values).map(
        lambda t: _mutate(base, *t)
    )


def _mutate(base: dict[str, Any], index: int, key: str, value: Any) -> dict[str, Any]:
    plan: dict[str, Any] = json.loads(json.dumps(base))
    plan["steps"][index][key] = value
    return plan


@settings(max_examples=300, deadline=None)
@given(st.one_of(json_values, near_valid()))
def test_validation_of_arbitrary_json_never_raises(value: Any) -> None:
    with contextlib.suppress(GitAuditError):
        validate_bytes(json.dumps(value).encode(), name="x", source="x.json")


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64))
def test_validation_of_arbitrary_bytes_never_raises(data: bytes) -> None:
    with contextlib.suppress(GitAuditError):
        validate_bytes(data, name="x", source="x.json")


def test_render_formats_show_or_clauses() -> None:
    plan, _ = load_plan(
        json.dumps(fixture("plans/release-mission.json")).encode(), name="r", source="r"
    )
    assert plan is not None
    mermaid = render(plan, "mermaid", {"freeze_candidate": "verified"})
    assert mermaid.startswith("flowchart LR")
    assert "s_provider_attestation -. any_of 1 .-> s_residency_evidence" in mermaid
    assert ":::verified" in mermaid
    dot = render(plan, "dot")
    assert '"independent_test" -> "residency_evidence" [style=dashed' in dot
    text = render(plan, "text")
    assert "needs one of provider_attestation, independent_test" in text
