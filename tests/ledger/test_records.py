"""``gitaudit.ledger.records``: every field of ``run.json`` is read from its documented key, with
its documented default, and a malformed one is refused naming the commit, the JSON path, the
type expected and the type found (the gate trusts nothing it did not read this way).

Hostile input at large: ``tests/fuzz/test_ledger_fuzz.py``.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from typing import Any

import pytest

from gitaudit.errors import LedgerError
from gitaudit.ledger.records import (
    RUN_FORMAT,
    CheckEntry,
    MalformedRun,
    UpstreamEntry,
    _plain_run,
    _typed_run,
    lookup_keys,
    parse_run,
)
from gitaudit.verdict import StepStatus, Verdict

COMMIT = "c0ffee" + "1" * 34


def _check(name: str) -> dict[str, Any]:
    return {
        "check": name,
        "outcome": "passed",
        "message": f"{name} ok",
        "exit_code": 3,
        "duration": 1.5,
        "stdout_bytes": 11,
        "stderr_bytes": 7,
        "stdout_truncated": True,
        "stderr_truncated": True,
        "program": name,
        "executable": f"/opt/{name}/bin/{name}",
        "found_in": "/usr/local/bin",
    }


def full_run() -> dict[str, Any]:
    """A run.json with every field present and none at its default."""
    return {
        "format": RUN_FORMAT,
        "plan": "release",
        "verdict": "FAIL",
        "reasons": ["impure"],
        "contract_digest": "sha256:" + "c" * 64,
        "tree": "t" * 40,
        "head": "h" * 40,
        "seal": {"commit": "s" * 40, "version": 4},
        "runner": {"name": "ci", "labels": ["linux", "gpu"], "fingerprint": "SHA256:ci"},
        "environment": {"path": ["/usr/local/bin", "/usr/bin"]},
        "workspace": {"ignored_paths": {"node_modules": {"digest": "sha256:" + "d" * 64}}},
        "purity": {"before": "t" * 40, "after": "u" * 40, "changed": ["src/a.py", "b.txt"]},
        "forced": True,
        "missing_tools": ["cargo"],
        "steps": {
            "build": {
                "status": "carried",
                "title": "Build it",
                "reason": "carried from an earlier run",
                "attempt": 2,
                "attempts_used": 3,
                "duration": 2.25,
                "carried_from": "f" * 40,
                "checks": [_check("compile")],
                "outputs": {"wheel": [_check("exists")]},
                "upstream": [{"step": "fetch", "output": "src", "passed": True, "checks": []}],
                "input_digest": "sha256:" + "i" * 64,
                "reconciled": {"observed": "pass"},
                "workspace": "checkout",
            }
        },
    }


def test_every_field_is_read_from_its_key() -> None:
    doc = full_run()
    run = parse_run(COMMIT, 1234, doc)
    assert (run.commit, run.time, run.plan, run.verdict) == (COMMIT, 1234, "release", Verdict.FAIL)
    assert run.reasons == ("impure",)
    assert run.contract == "sha256:" + "c" * 64
    assert (run.tree, run.head) == ("t" * 40, "h" * 40)
    assert (run.seal_commit, run.seal_version) == ("s" * 40, 4)
    assert (run.runner, run.labels) == ("ci", ("linux", "gpu"))
    assert run.ignored_paths == {"node_modules": "sha256:" + "d" * 64}
    assert run.changed == ("src/a.py", "b.txt")
    assert run.forced is True
    assert run.missing_tools == ("cargo",)
    assert (run.runner_key, run.path) == ("SHA256:ci", ("/usr/local/bin", "/usr/bin"))
    assert run.doc is doc
    step = run.steps["build"]
    assert step.status is StepStatus.CARRIED
    assert (step.title, step.reason) == ("Build it", "carried from an earlier run")
    assert (step.attempt, step.attempts_used, step.duration) == (2, 3, 2.25)
    assert step.carried_from == "f" * 40
    assert step.input_digest == "sha256:" + "i" * 64
    assert step.reconciled == {"observed": "pass"}
    assert step.workspace == "checkout" and not step.live
    assert step.proven
    ran = ("/opt/compile/bin/compile", "/usr/local/bin")
    compiled = CheckEntry(
        "compile", "passed", "compile ok", 3, 1.5, 11, 7, True, True, "compile", *ran
    )
    assert step.checks == (compiled,)
    exists = ("exists", "/opt/exists/bin/exists", "/usr/local/bin")
    assert step.outputs == {
        "wheel": (CheckEntry("exists", "passed", "exists ok", 3, 1.5, 11, 7, True, True, *exists),)
    }
    assert step.upstream == (UpstreamEntry("fetch", "src", True, ()),)
    assert run.passed_steps() == ["build"]


def test_optional_fields_take_their_documented_defaults() -> None:
    doc = _minimal_run()
    run = parse_run(COMMIT, 0, doc)
    assert run.reasons == () and run.head is None
    assert (run.seal_commit, run.seal_version, run.runner) == (None, None, None)
    assert (run.ignored_paths, run.forced, run.labels) == ({}, False, ())
    assert (run.changed, run.missing_tools) == ((), ())
    assert (run.runner_key, run.path) == (None, None)
    step = run.steps["s"]
    assert (step.title, step.reason, step.attempt, step.attempts_used) == ("", "", None, 0)
    assert (step.duration, step.carried_from, step.input_digest) == (0.0, None, None)
    assert (step.outputs, step.upstream, step.reconciled, step.workspace) == ({}, (), None, None)
    assert step.live and not step.proven
    assert run.passed_steps() == []
    assert step.checks == (CheckEntry("", "failed", "", None, 0.0, 0, 0, False, False),)
    # explicit nulls where null is allowed
    doc["head"] = None
    doc["steps"]["s"].update(attempt=None, carried_from=None, input_digest=None, reconciled=None)
    doc["steps"]["s"]["checks"][0]["exit_code"] = None
    run = parse_run(COMMIT, 0, doc)
    assert run.head is None and run.steps["s"].checks[0].exit_code is None


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    """Set (or with ``value is DELETE``, delete) ``path`` (``a.b[0].c``) in *doc*."""
    keys: list[Any] = [
        int(k[1:-1]) if k.startswith("[") else k for k in re.findall(r"\[\d+\]|[^.\[\]]+", path)
    ]
    target: Any = doc
    for key in keys[:-1]:
        target = target[key]
    if value is DELETE:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value


DELETE = object()

# (JSON path, a wrong value, the type described in the message)
WRONG = [
    ("plan", 1, "a string"),
    ("verdict", "MAYBE", "a verdict"),
    ("verdict", 1, "a verdict"),
    ("reasons", ["ok", 2], "an array of strings"),
    ("reasons", "impure", "an array of strings"),
    ("contract_digest", None, "a string"),
    ("tree", [], "a string"),
    ("head", 7, "a string or null"),
    ("seal", [], "an object"),
    ("seal.commit", 1, "a string"),
    ("seal.version", "4", "an integer"),
    ("seal.version", True, "an integer"),
    ("runner", "ci", "an object"),
    ("runner.name", 1, "a string"),
    ("runner.labels", "linux", "an array of strings"),
    ("runner.fingerprint", 1, "a string"),
    ("environment", [], "an object"),
    ("environment.path", "/usr/bin", "an array of strings"),
    ("environment.path", None, "an array of strings"),
    ("steps.build.checks[0].program", 1, "a string or null"),
    ("steps.build.checks[0].executable", ["x"], "a string or null"),
    ("steps.build.checks[0].found_in", 2, "a string or null"),
    ("steps", [], "an object"),
    ("workspace", "x", "an object"),
    ("workspace.ignored_paths", [], "an object"),
    ("workspace.ignored_paths.node_modules", "sha", "an object"),
    ("workspace.ignored_paths.node_modules.digest", 5, "a string"),
    ("purity", [], "an object"),
    ("purity.changed", "src/a.py", "an array of strings"),
    ("forced", "yes", "a boolean"),
    ("missing_tools", [1], "an array of strings"),
    ("steps.build", "passed", "an object"),
    ("steps.build.status", "done", "a step status"),
    ("steps.build.status", 1, "a step status"),
    ("steps.build.title", 1, "a string"),
    ("steps.build.reason", 1, "a string"),
    ("steps.build.attempt", "2", "an integer or null"),
    ("steps.build.attempts_used", 1.5, "an integer"),
    ("steps.build.duration", "2s", "a number"),
    ("steps.build.duration", False, "a number"),
    ("steps.build.carried_from", 1, "a string or null"),
    ("steps.build.input_digest", 1, "a string or null"),
    ("steps.build.reconciled", "pass", "an object"),
    ("steps.build.reconciled", {"observed": 1}, "an object of strings"),
    ("steps.build.workspace", "sandbox", "checkout or live"),
    ("steps.build.outputs", [], "an object"),
    ("steps.build.outputs.wheel", {}, "an array"),
    ("steps.build.upstream", {}, "an array"),
    ("steps.build.upstream[0]", "fetch", "an object"),
    ("steps.build.upstream[0].step", 1, "a string"),
    ("steps.build.upstream[0].output", 1, "a string"),
    ("steps.build.upstream[0].passed", "yes", "a boolean"),
    ("steps.build.upstream[0].checks", {}, "an array"),
    ("steps.build.checks", {}, "an array"),
    ("steps.build.checks[0]", "ok", "an object"),
    ("steps.build.checks[0].check", 1, "a string"),
    ("steps.build.checks[0].outcome", 1, "a string"),
    ("steps.build.checks[0].message", 1, "a string"),
    ("steps.build.checks[0].exit_code", 1.0, "an integer or null"),
    ("steps.build.checks[0].duration", "1", "a number"),
    ("steps.build.checks[0].stdout_bytes", "11", "an integer"),
    ("steps.build.checks[0].stderr_bytes", "7", "an integer"),
    ("steps.build.checks[0].stdout_truncated", 1, "a boolean"),
    ("steps.build.checks[0].stderr_truncated", 0, "a boolean"),
    ("steps.build.outputs.wheel[0].outcome", None, "a string"),
]


@pytest.mark.parametrize(
    ("path", "value", "expected"), WRONG, ids=[f"{w[0]}={w[1]!r}" for w in WRONG]
)
def test_a_malformed_field_is_named_with_its_path_and_types(
    path: str, value: Any, expected: str
) -> None:
    doc = copy.deepcopy(full_run())
    _set(doc, path, value)
    assert _plain_run(COMMIT, 0, doc) is None  # the fast reading leaves it to the typed one
    with pytest.raises(MalformedRun) as caught:
        parse_run(COMMIT, 0, doc)
    found = type(value).__name__
    assert caught.value.message == (
        f"run {COMMIT[:12]}: run.json {path}: expected {expected}, found {found}"
    )
    assert caught.value.commit == COMMIT
    assert "git audit run" in str(caught.value.hint) and "git audit verify" in str(
        caught.value.hint
    )


REQUIRED = [
    ("plan", "a string"),
    ("verdict", "a verdict"),
    ("contract_digest", "a string"),
    ("tree", "a string"),
    ("steps", "an object"),
    ("steps.build.status", "a step status"),
    ("steps.build.checks[0].outcome", "a string"),
    ("steps.build.upstream[0].step", "a string"),
    ("steps.build.upstream[0].output", "a string"),
    ("steps.build.upstream[0].passed", "a boolean"),
    ("workspace.ignored_paths.node_modules.digest", "a string"),
]


@pytest.mark.parametrize(("path", "expected"), REQUIRED)
def test_a_missing_required_field_is_named(path: str, expected: str) -> None:
    doc = copy.deepcopy(full_run())
    _set(doc, path, DELETE)
    assert _plain_run(COMMIT, 0, doc) is None
    with pytest.raises(MalformedRun) as caught:
        parse_run(COMMIT, 0, doc)
    assert caught.value.message == (
        f"run {COMMIT[:12]}: run.json {path}: expected {expected}, it is missing"
    )


def _minimal_run() -> dict[str, Any]:
    return {
        "format": RUN_FORMAT,
        "plan": "p",
        "verdict": "PASS",
        "contract_digest": "sha256:x",
        "tree": "t",
        "steps": {"s": {"status": "failed", "checks": [{"outcome": "failed"}]}},
    }


def _with_nulls() -> dict[str, Any]:
    doc = _minimal_run()
    doc["head"] = None
    doc["steps"]["s"].update(attempt=None, carried_from=None, input_digest=None, reconciled=None)
    doc["steps"]["s"]["checks"][0]["exit_code"] = None
    return doc


def _with_integers() -> dict[str, Any]:
    doc = full_run()
    doc["steps"]["build"]["duration"] = 2  # a number: read as 2.0 either way
    doc["steps"]["build"]["checks"][0]["duration"] = 0
    doc["steps"]["build"].update(workspace="live", upstream=[])
    return doc


@pytest.mark.parametrize("make", [full_run, _minimal_run, _with_nulls, _with_integers])
def test_the_fast_reading_returns_what_the_typed_reading_returns(make: Any) -> None:
    """parse_run takes a well-formed record in one pass of inlined checks (_plain_run): the
    record is equal, field for field, to the one the typed reader builds."""
    fast, typed = _plain_run(COMMIT, 7, make()), _typed_run(COMMIT, 7, make())
    assert fast is not None and fast == typed
    built: list[object] = [fast, *fast.steps.values()]
    for step in fast.steps.values():
        built += [*step.checks, *step.upstream, *(c for u in step.upstream for c in u.checks)]
        built += [c for checks in step.outputs.values() for c in checks]
    for record in built:  # every field set (_built), each of the type the typed reading gives
        assert list(vars(record)) == [f.name for f in dataclasses.fields(record)]  # type: ignore[arg-type]
    assert [type(v) for v in vars(fast).values()] == [type(v) for v in vars(typed).values()]
    for sid, step in fast.steps.items():
        assert vars(step) == vars(typed.steps[sid])
        assert type(step.duration) is float and type(step.status) is StepStatus
    assert type(fast.verdict) is Verdict


class _Text(str):
    """A str subclass: json.loads never makes one, but the typed reader accepts it."""


@pytest.mark.parametrize(
    ("path", "value", "fast"),
    [
        ("plan", _Text("release"), False),
        ("steps.build.checks[0].outcome", _Text("passed"), False),
        ("steps.build.workspace", _Text("checkout"), True),  # compared, as _one_of does
        ("seal.commit", DELETE, True),
        ("steps.build.workspace", DELETE, True),
        ("runner", DELETE, True),
    ],
)
def test_what_the_fast_reading_leaves_is_read_the_same_by_the_typed_one(
    path: str, value: Any, fast: bool
) -> None:
    doc = full_run()
    _set(doc, path, value)
    assert (_plain_run(COMMIT, 0, doc) is not None) is fast
    assert parse_run(COMMIT, 0, doc) == _typed_run(COMMIT, 0, doc)


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        # absent reads as null, but an explicit null is refused: the fast reading must not take it
        ("seal.commit", None, "a string"),
        ("seal.version", None, "an integer"),
        ("runner.name", None, "a string"),
        ("steps.build.workspace", None, "checkout or live"),
        ("steps.build.checks[0].stdout_bytes", True, "an integer"),
        ("steps.build.attempts_used", False, "an integer"),
    ],
)
def test_a_null_or_boolean_where_its_default_would_pass_is_refused(
    path: str, value: Any, expected: str
) -> None:
    doc = full_run()
    _set(doc, path, value)
    assert _plain_run(COMMIT, 0, doc) is None
    with pytest.raises(MalformedRun) as caught:
        parse_run(COMMIT, 0, doc)
    found = type(value).__name__
    assert caught.value.message == (
        f"run {COMMIT[:12]}: run.json {path}: expected {expected}, found {found}"
    )


@pytest.mark.parametrize("doc", [[], "x", {"format": "gitaudit.run/2"}, {"plan": "p"}])
def test_a_document_that_is_not_a_run_record_is_refused(doc: object) -> None:
    with pytest.raises(LedgerError) as caught:
        parse_run(COMMIT, 0, doc)
    assert caught.value.message == f"run {COMMIT[:12]}: run.json is not a {RUN_FORMAT} record"


def test_lookup_keys_read_leniently() -> None:
    doc = full_run()
    doc["steps"]["odd"] = {"status": 3, "input_digest": 4}
    doc["steps"]["junk"] = "x"
    assert lookup_keys(doc) == (
        "t" * 40,
        "sha256:" + "c" * 64,
        "FAIL",
        {"build": ("carried", "sha256:" + "i" * 64), "odd": ("?", "")},
    )
    doc["steps"] = []
    assert lookup_keys(doc) == ("t" * 40, "sha256:" + "c" * 64, "FAIL", {})
    for key in ("tree", "contract_digest", "verdict"):
        broken = full_run()
        broken[key] = 1
        assert lookup_keys(broken) is None
    assert lookup_keys([]) is None


@pytest.mark.parametrize(
    ("started_at", "began"),
    [
        ("2026-12-05T10:00:00Z", 1_796_464_800),  # the signed start: before the commit time
        ("2026-12-05T11:00:00Z", 1_796_466_000),  # a start after the commit time: the commit
        (None, 1_796_466_000),  # no start recorded (an older record): the commit time
        ("5 December", 1_796_466_000),  # malformed: the commit time
        (1_796_464_800, 1_796_466_000),  # not a string: the commit time
    ],
)
def test_a_run_began_at_its_signed_start_never_after_its_commit(
    started_at: object, began: int
) -> None:
    """Evidence is as old as the run's checks: ``began`` is ``started_at``, bounded by the
    signed commit time (docs/ledger-format.md, evidence expiry)."""
    doc = _minimal_run()
    if started_at is not None:
        doc["started_at"] = started_at
    assert parse_run(COMMIT, 1_796_466_000, doc).began == began
