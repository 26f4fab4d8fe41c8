"""Reconciliation in the weakening rules: non-idempotent steps and readback checks open a way to
PASS without a step's verify checks, so adding them weakens and removing them strengthens."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from gitaudit.plan.catalog import check_file
from gitaudit.plan.compare import compare
from gitaudit.plan.digest import contract
from gitaudit.plan.store import PlanFile
from tests.plan.builders import two_step_plan

READBACK = {"type": "file_exists", "path": "deployed.txt"}
OTHER_READBACK = {"type": "regex", "path": "deployed.txt", "pattern": "live"}


def contract_of(doc: dict[str, Any]) -> dict[str, Any]:
    checked = check_file(PlanFile("p", "p.json", json.dumps(doc).encode()), environment=False)
    assert checked.plan is not None, checked.report.errors
    return contract(checked.plan)


def changes(
    before: Callable[[dict[str, Any]], object], after: Callable[[dict[str, Any]], object]
) -> list[tuple[str, str]]:
    old, new = two_step_plan(), two_step_plan()
    before(old)
    after(new)
    return [(c.kind, c.render()) for c in compare(contract_of(old), contract_of(new)).changes]


def use(**fields: Any) -> Callable[[dict[str, Any]], object]:
    return lambda plan: plan["steps"][1].update(fields)


def nothing(plan: dict[str, Any]) -> None:
    del plan


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (nothing, use(idempotent=False), [("weakened", "step use: idempotent True -> False")]),
        (use(idempotent=False), nothing, [("strengthened", "step use: idempotent False -> True")]),
        (
            nothing,
            use(readback=[READBACK]),
            [("weakened", "step use readback: readback check added: file_exists deployed.txt")],
        ),
        (
            use(readback=[READBACK]),
            nothing,
            [
                (
                    "strengthened",
                    "step use readback: readback check removed or changed: "
                    "file_exists deployed.txt",
                )
            ],
        ),
        (
            use(readback=[READBACK]),
            use(readback=[OTHER_READBACK]),
            [
                (
                    "strengthened",
                    "step use readback: readback check removed or changed: "
                    "file_exists deployed.txt",
                ),
                ("weakened", "step use readback: readback check added: regex deployed.txt"),
            ],
        ),
    ],
)
def test_reconciliation_paths_weaken_and_their_removal_strengthens(
    before: Callable[[dict[str, Any]], object],
    after: Callable[[dict[str, Any]], object],
    expected: list[tuple[str, str]],
) -> None:
    assert changes(before, after) == expected


def test_a_changed_readback_check_is_a_weakening_overall() -> None:
    old, new = two_step_plan(), two_step_plan()
    old["steps"][1].update(idempotent=False, readback=[READBACK])
    new["steps"][1].update(idempotent=False, readback=[OTHER_READBACK])
    comparison = compare(contract_of(old), contract_of(new))
    assert comparison.weakened and comparison.summary() == "1 strengthened, 1 weakened"


def test_verify_checks_still_weaken_when_removed() -> None:
    old, new = two_step_plan(), two_step_plan()
    new["steps"][1]["verify"].append({"type": "run", "argv": ["echo", "more"]})
    assert [c.kind for c in compare(contract_of(old), contract_of(new)).changes] == ["strengthened"]
    assert [c.kind for c in compare(contract_of(new), contract_of(old)).changes] == ["weakened"]
