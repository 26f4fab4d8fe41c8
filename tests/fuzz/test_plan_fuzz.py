"""Plan parsing and validation under hostile input: only GitAuditError may escape (ideally nothing).

Goes further than ``tests/plan/test_graph.py``: structured mutations of every fixture plan at any
depth (types, huge and non-finite numbers, unicode, duplicate ids, long strings, deep nesting,
raw text fragments json.dumps cannot write), random JSON, random bytes; and what the gate and
``plan seal`` do next with a plan that validated (the contract digest), which must not raise
either. ``matches_input`` and ``input_digests`` are checked against their documented meaning.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitaudit.plan.catalog import check_file
from gitaudit.plan.digest import contract_digest
from gitaudit.plan.inputs import input_digests, matches_input
from gitaudit.plan.load import load_plan
from gitaudit.plan.store import PlanFile
from gitaudit.plan.validate import validate_bytes
from tests.fuzz._support import (
    PLAN_FIXTURES,
    bare_repo,
    commit_files,
    encode,
    json_values,
    mutate,
    tolerating_known_bugs,
)

FIXTURE_DOCS = {p.name: json.loads(p.read_text()) for p in PLAN_FIXTURES}

PLAN_WORDS: list[Any] = [
    *[
        "id",
        "depends_on",
        "any_of",
        "requires_outputs",
        "step",
        "name",
        "covers",
        "verify",
        "type",
        "argv",
        "cmd",
        "shell",
        "path",
        "args",
        "pattern",
        "expect_exit",
        "output_regex",
        "timeout",
        "max_output_bytes",
        "env",
        "cwd",
        "outputs",
        "readback",
        "cost",
        "owner",
        "valid_for",
        "idempotent",
        "inputs",
        "max_attempts",
        "status",
        "title",
        "description",
        "requirements",
        "priority",
        "required_tools",
        "task",
        "$schema",
        "created",
    ],
    *["run", "exec", "pytest", "file_exists", "regex", "must", "should", "may"],
    "REQ-001",
    "build",
    "7d",
    ["true"],
    {"type": "run", "argv": ["true"]},
    {"type": "file_exists", "path": "x"},
    {"any_of": []},
]


def _step_ids(doc: Any) -> list[Any]:
    steps = doc.get("steps") if isinstance(doc, dict) else None
    if not isinstance(steps, list):
        return []
    return [s["id"] for s in steps if isinstance(s, dict) and "id" in s]


def validate_all_layers(data: bytes) -> None:
    """What ``plan validate``, ``plan seal`` and the gate do with a plan file's bytes."""
    with tolerating_known_bugs():
        plan, report = validate_bytes(data, name="fuzz", source="fuzz.json", environment=False)
        assert report.valid == (not report.errors)
        if plan is not None:
            assert plan.name == "fuzz"
    with tolerating_known_bugs():
        checked = check_file(PlanFile("fuzz", "fuzz.json", data), environment=False)
        if checked.digest is not None:
            assert checked.digest.startswith("sha256:")
            assert checked.plan is not None
            assert contract_digest(checked.plan) == checked.digest  # deterministic


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_fixture_plans_raise_only_gitaudit_errors(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(FIXTURE_DOCS)), label="fixture")
    base = FIXTURE_DOCS[name]
    vocabulary = [*PLAN_WORDS, *_step_ids(base)]
    doc = mutate(data, base, json_values(vocabulary, max_leaves=6), max_rounds=5)
    validate_all_layers(encode(doc, data))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_plan_specific_damage_raises_only_gitaudit_errors(data: st.DataObject) -> None:
    """Duplicate ids, dangling and cyclic dependencies, steps copied over each other."""
    doc = json.loads(json.dumps(FIXTURE_DOCS[data.draw(st.sampled_from(sorted(FIXTURE_DOCS)))]))
    steps = doc["steps"]
    ids = _step_ids(doc)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(steps) - 1))
        action = data.draw(st.sampled_from(["dup-id", "self", "cycle", "copy", "any_of", "ids"]))
        if action == "dup-id":
            steps[i]["id"] = data.draw(st.sampled_from(ids))
        elif action == "self":
            steps[i]["depends_on"] = [steps[i]["id"]]
        elif action == "cycle":
            j = data.draw(st.integers(0, len(steps) - 1))
            steps[i]["depends_on"] = [steps[j]["id"]]
            steps[j]["depends_on"] = [steps[i]["id"]]
        elif action == "copy":
            steps.append(json.loads(json.dumps(steps[i])))
        elif action == "any_of":
            alts = data.draw(st.lists(st.sampled_from([*ids, "ghost", 999, 1.0]), max_size=4))
            steps[i]["depends_on"] = [{"any_of": alts}]
        else:
            steps[i]["id"] = data.draw(
                st.sampled_from([0, -1, 1.0, 1.5, 2**53, 2**64, "A", "a" * 65, "a\n", True])
            )
    validate_all_layers(encode(doc, data))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_json_raises_only_gitaudit_errors(data: st.DataObject) -> None:
    value = data.draw(
        st.one_of(
            json_values(PLAN_WORDS),
            st.fixed_dictionaries({"steps": st.lists(json_values(PLAN_WORDS), max_size=3)}),
        )
    )
    validate_all_layers(encode(value, data))


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=200),
        st.sampled_from([p.read_bytes() for p in PLAN_FIXTURES]).flatmap(
            lambda raw: st.tuples(st.integers(0, len(raw)), st.integers(0, 64), st.binary()).map(
                lambda t: raw[: t[0]] + t[2] + raw[t[0] + t[1] :]
            )
        ),
    )
)
def test_random_bytes_raise_only_gitaudit_errors(data: bytes) -> None:
    validate_all_layers(data)


@pytest.mark.parametrize("path", PLAN_FIXTURES, ids=lambda p: p.name)
def test_fixture_seeds_parse_and_digest(path: Path) -> None:
    """The seeds themselves are fine (so every failure above is caused by a mutation)."""
    checked = check_file(PlanFile("x", "x", path.read_bytes()), environment=False)
    assert checked.plan is not None
    assert (checked.digest is not None) == checked.report.valid


# ----------------------------------------------------------------------------- inputs

_segment = st.sampled_from(["a", "b", "src", "pkg1", "x.py", "d.md", "[a]", "we ird", "é"])
_rel = st.lists(_segment, min_size=1, max_size=4).map("/".join)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30), st.text(max_size=30))
def test_matches_input_never_raises(pattern: str, path: str) -> None:
    assert isinstance(matches_input(pattern, path), bool)


@settings(max_examples=200, deadline=None)
@given(_rel, _rel)
def test_matches_input_means_what_the_docs_say(rel: str, below: str) -> None:
    plain = not any(ch in rel for ch in "*?[")
    if plain:
        assert matches_input(rel, rel)
        assert matches_input(rel, f"{rel}/{below}")  # a folder names everything below it
        assert matches_input(f"./{rel}", rel)
    assert matches_input("**", rel)
    name = below.rsplit("/", 1)[-1]
    if "[" not in name:
        assert matches_input(f"**/{name}", below)  # any depth, including none
    top = rel.split("/", 1)[0]
    if "[" not in top:
        assert matches_input(f"{top}/**", f"{top}/{below}")
        assert not matches_input(f"{top}/**", f"{top}x/{below}")


_files = st.dictionaries(_rel, st.binary(max_size=4), min_size=1, max_size=6)
_pattern = st.sampled_from(["a/**", "b/**", "src", "**/x.py", "*.md", "pkg1/*"])
_patterns = st.lists(_pattern, min_size=1, max_size=2)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_files, _patterns, _patterns, st.data())
def test_input_digest_changes_exactly_with_matching_files(
    files: dict[str, bytes], first: list[str], second: list[str], data: st.DataObject
) -> None:
    """Changing one file reopens the steps whose inputs match it and their dependants, only."""
    paths = sorted(files)
    # a path that is both a file and a folder cannot be stored
    if any(q.startswith(p + "/") for p in paths for q in paths):
        return
    doc = {
        "requirements": [{"id": "R", "description": "r"}],
        "steps": [
            {"id": "one", "depends_on": [], "covers": ["R"], "inputs": first, "verify": []},
            {"id": "two", "depends_on": [], "covers": ["R"], "inputs": second, "verify": []},
            {"id": "both", "depends_on": ["one"], "covers": ["R"], "verify": []},
        ],
    }
    plan, problems = load_plan(json.dumps(doc).encode(), name="d", source="d")
    assert plan is not None, problems
    repo = bare_repo()
    changed = data.draw(st.sampled_from(paths))
    other = dict(files)
    other[changed] = files[changed] + b"!"
    before = input_digests(
        repo, plan, str(repo[commit_files(repo, files)].peel(pygit2.Commit).tree_id)
    )
    after = input_digests(
        repo, plan, str(repo[commit_files(repo, other)].peel(pygit2.Commit).tree_id)
    )
    for sid, patterns in (("one", first), ("two", second)):
        hit = any(matches_input(p, changed) for p in patterns)
        assert (before[sid] != after[sid]) == hit, (sid, patterns, changed)
    # "both" declares no inputs: it depends on the whole tree, which changed
    assert before["both"] != after["both"]
