"""What `attest verify` takes a statement to say: one commit and tree, its verdict only while
its evidence is fresh, and about the commit it is verified for (gitaudit.gate.attest)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from gitaudit.crypto import dsse
from gitaudit.errors import RepositoryError
from gitaudit.gate import attest
from gitaudit.ledger.trust import Policy
from tests.adversarial.conftest import World, plan, step

C, T = "c" * 40, "d" * 40


@pytest.mark.parametrize(
    ("subjects", "expected"),
    [
        ([{"digest": {"gitCommit": C}}, {"digest": {"gitTree": T}}], (C, T)),
        ([{"digest": {"gitCommit": C, "gitTree": T}}], (C, T)),
        ([{"digest": {"gitCommit": C}}, {"digest": {"gitTree": T}}] * 2, (C, T)),
        (
            [
                {"digest": {"gitCommit": C}},
                {"digest": {"gitTree": T}},
                {"digest": {"gitCommit": T}},
            ],
            (None, None),
        ),
        ([{"digest": {"gitCommit": C, "gitTree": T, "sha256": "ab"}}], (None, None)),
        ([{"digest": {"gitCommit": C}}], (None, None)),
        ("not a list", (None, None)),
    ],
)
def test_subject_digests_name_one_commit_and_one_tree(
    subjects: object, expected: tuple[str | None, str | None]
) -> None:
    assert attest._subject_digests(subjects) == expected


def _envelope(world: World, edit: Any = None) -> bytes:
    statement = json.loads(attest.build(world.handle(), None, None).payload())
    if edit is not None:
        edit(statement["predicate"][attest.EXTENSION])
    payload = json.dumps(statement).encode()
    return json.dumps(dsse.sign(world.ci, dsse.IN_TOTO_PAYLOAD_TYPE, payload).to_json()).encode()


def test_a_statement_holds_until_its_evidence_expires(world: World) -> None:
    world.seal(plan(step("unit", valid_for="1h")))
    assert world.run().verdict == "PASS"
    text = _envelope(world)
    now = time.time()
    assert attest.verify(world.handle(), text, "f", now=now).refusal() is None
    later = attest.verify(world.handle(), text, "f", now=now + 7200)
    why = later.refusal()
    assert why is not None and "expired at" in why
    assert later.refusal("default") == later.stale


def test_a_statement_without_expiry_holds_unless_it_records_none(world: World) -> None:
    world.seal(plan(step("unit")))
    assert world.run().verdict == "PASS"
    forever = attest.verify(world.handle(), _envelope(world), "f", now=time.time() + 10**9)
    assert forever.refusal() is None
    unknown = attest.verify(world.handle(), _envelope(world, lambda e: e.pop("valid_until")), "f")
    assert unknown.stale is not None and "records no expiry" in unknown.stale


def test_a_statement_is_verified_for_the_commit_it_is_about(world: World) -> None:
    world.seal(plan(step("unit")))
    assert world.run().verdict == "PASS"
    text = _envelope(world)
    assert attest.verify(world.handle(), text, "f", rev="HEAD").refusal() is None
    world.repo.commit("another")
    other = attest.verify(world.handle(), text, "f", rev="HEAD")
    assert other.elsewhere is not None and other.refusal("default") == other.elsewhere
    with pytest.raises(RepositoryError, match="unknown revision 'nope'"):
        attest.verify(world.handle(), text, "f", rev="nope")


@pytest.mark.parametrize(
    "plans_commit",
    [None, "0" * 40, "not hex", "the commit judged"],
    ids=["none", "absent", "no id", "not a plans commit"],
)
def test_a_statement_is_compared_with_the_runners_of_a_plans_commit_here(
    world: World, plans_commit: str | None
) -> None:
    """A statement's runners are those of its plans commit, which must be the plans tip here or
    an ancestor of it: one that names no such commit cannot be compared and is refused, for
    the commit and for each plan; one that does is accepted while its runners still are."""
    world.seal(plan(step("unit")))
    assert world.run().verdict == "PASS"
    assert attest.verify(world.handle(), _envelope(world), "f").stricter is None
    head = world.repo.git("rev-parse", "HEAD").strip()
    value = head if plans_commit == "the commit judged" else plans_commit

    def edit(extension: dict[str, Any]) -> None:
        extension["plans_commit"] = value

    checked = attest.verify(world.handle(), _envelope(world, edit), "f")
    assert checked.stricter is not None and "is not in this repository's" in checked.stricter
    assert checked.refusal() == checked.refusal("default") == checked.stricter


def test_a_policy_is_stricter_only_where_it_refuses_evidence_accepted_before() -> None:
    lax, live, strict = Policy(), Policy(live_evidence="refuse"), Policy(agents="serial")
    assert attest._stricter_policy(lax, lax) is None
    assert attest._stricter_policy(live, lax) is None  # relaxed since: nothing refused
    assert attest._stricter_policy(strict, lax) is None
    assert "live work tree" in (attest._stricter_policy(lax, live) or "")
    assert "agents: serial" in (attest._stricter_policy(lax, strict) or "")
    # protecting more refs, or asking for more approvals, judges no evidence differently
    assert attest._stricter_policy(lax, Policy(protected_refs=("refs/*",))) is None
    assert attest._stricter_policy(lax, Policy(approvals=(("weaken", 2),))) is None
