"""Names and ids end at the end: a regular expression's ``$`` also matches before a final line
break (``re.match``), so ``"REQ-1\\n"`` passed for a requirement id of a request, ``"x\\n"`` for
a snapshot name and ``"bob\\n"`` for an agent's name, each shown like another."""

from __future__ import annotations

import json

import pytest

from gitaudit.errors import PlanError, UsageError
from gitaudit.ledger import agents, snapshots
from gitaudit.plan.request import parse_request


def test_a_request_id_with_a_final_line_break_is_refused() -> None:
    doc = {"requirements": [{"id": "REQ-1\n", "description": "d"}]}
    with pytest.raises(PlanError, match=r"requirements\[0\]\.id"):
        parse_request(json.dumps(doc).encode(), name="r", source="r.json")
    doc["requirements"][0]["id"] = "REQ-1"
    assert [
        r.id
        for r in parse_request(json.dumps(doc).encode(), name="r", source="r.json").requirements
    ] == ["REQ-1"]


@pytest.mark.parametrize(
    "check", [snapshots.check_name, agents.check_name], ids=["snapshot", "agent"]
)
def test_a_name_with_a_final_line_break_is_refused(check: object) -> None:
    assert callable(check)
    assert check("bob") == "bob"
    with pytest.raises(UsageError, match="bob"):
        check("bob\n")
