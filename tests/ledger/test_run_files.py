"""``gitaudit.ledger.runs.evidence_files``: run.json is written with each step's entry spliced
from the text of its ``result.json`` (one encoding of each entry, not two); the bytes must be
exactly :func:`gitaudit.ledger.objects.dumps` of the whole document."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitaudit.crypto.signers import Ed25519Signer
from gitaudit.errors import LedgerError
from gitaudit.git.repo import open_repo
from gitaudit.ledger.objects import dumps, loads
from gitaudit.ledger.refs import cas_update, read_ref, runs_ref
from gitaudit.ledger.runs import append_run, evidence_files
from tests.gitrepo import GitRepo

_TEXT = st.text(st.characters(codec="utf-8"))  # no lone surrogates: ledgers refuse them
_LEAVES = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT
_JSON = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=12,
)
_RUN = st.fixed_dictionaries(
    {"steps": st.dictionaries(_TEXT, st.dictionaries(_TEXT, _JSON, max_size=4), max_size=5)},
    optional={"plan": _TEXT, "verdict": _TEXT, "a": _JSON, "zz": _JSON},
)


def _files(run: dict[str, Any]) -> dict[str, bytes]:
    return evidence_files(run, "# summary\n", {sid: ([], {}, []) for sid in run["steps"]})


@settings(max_examples=300, deadline=None)
@given(_RUN)
def test_run_json_is_dumps_of_the_document(run: dict[str, Any]) -> None:
    files = _files(run)
    assert files["run.json"] == dumps(run)
    for sid, entry in run["steps"].items():
        assert files[f"steps/{sid}/result.json"] == dumps(entry)


def test_a_value_that_looks_like_the_mark_stays_a_value() -> None:
    """The mark the steps are spliced at is new to each call: a value spelled like a mark (NUL,
    hex, NUL) anywhere in the document is written as it is."""
    looks = "\0" + "0" * 32 + "\0"
    run = {
        "steps": {"a": {"reason": looks, "checks": [{"x": [1, 2.5, None]}]}, "é/b": {}},
        "note": looks,
        "\0": {"steps": looks},
    }
    files = _files(run)
    assert files["run.json"] == dumps(run)
    assert loads(files["run.json"]) == run


def test_no_steps() -> None:
    run: dict[str, Any] = {"steps": {}, "plan": "default"}
    assert _files(run)["run.json"] == dumps(run)


def test_append_run_hands_every_tip_it_signs_on_to_check_tip(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``append_run`` shows *check_tip* each tip before it signs on it: the first one, and the
    new one after losing the race to a concurrent writer (control: a tip it accepts is signed
    on); a tip it refuses gets nothing signed on it, and the ref stays where it was."""
    git = open_repo(repo.path).git
    ci = Ed25519Signer.generate("ci")
    seen: list[object] = []
    first = append_run(git, "p", {"run.json": b"{}\n"}, "one\n", ci, check_tip=seen.append)
    assert seen == [None]
    raced: list[object] = []

    def lose_once(*args: Any) -> None:
        if not raced:  # a concurrent writer lands first
            raced.append(None)
            raced[0] = append_run(git, "p", {"run.json": b"{}\n"}, "other\n", ci)
        cas_update(*args)

    monkeypatch.setattr("gitaudit.ledger.runs.cas_update", lose_once)
    third = append_run(git, "p", {"run.json": b"{}\n"}, "three\n", ci, check_tip=seen.append)
    assert seen == [None, first, raced[0]]  # after the lost race, the new tip
    assert git.get(third).parent_ids == [raced[0]]  # type: ignore[union-attr]

    def refuse(tip: object) -> None:
        raise LedgerError(f"refused {tip}")

    with pytest.raises(LedgerError, match="refused"):
        append_run(git, "p", {"run.json": b"{}\n"}, "four\n", ci, check_tip=refuse)
    assert read_ref(git, runs_ref("p")) == third
