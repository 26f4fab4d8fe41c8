"""Run records: ``run.json`` parsed once, at the ledger boundary, into frozen typed objects.

A run commit's ``run.json`` (format ``gitaudit.run/1``, documented in docs/ledger-format.md) is
signed data, but its content is whatever the signer wrote. :func:`parse_run` checks every field
the code relies on and turns a malformed record into one :class:`~gitaudit.errors.LedgerError`
naming the commit and the JSON path; past this point nothing downstream needs a catch-all.
Fields that later versions added (``route``, ``input_digest``, ``attempts_used``,
``reconciled``) are optional; every field present must have its documented type. The raw
document stays available as :attr:`RunRecord.doc` for display (``show --json``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gitaudit.errors import LedgerError
from gitaudit.verdict import StepStatus, Verdict

RUN_FORMAT = "gitaudit.run/1"


@dataclass(frozen=True)
class CheckEntry:
    """One check's result as recorded (``result.json``)."""

    check: str
    outcome: str  # passed | failed | unknown | interrupted
    message: str
    exit_code: int | None
    duration: float
    stdout_bytes: int
    stderr_bytes: int
    stdout_truncated: bool
    stderr_truncated: bool


@dataclass(frozen=True)
class UpstreamEntry:
    """An upstream output contract re-executed right before a step."""

    step: str
    output: str
    passed: bool
    checks: tuple[CheckEntry, ...]


@dataclass(frozen=True)
class StepEntry:
    status: StepStatus
    title: str
    reason: str
    attempt: int | None
    attempts_used: int
    duration: float
    carried_from: str | None
    checks: tuple[CheckEntry, ...]
    outputs: Mapping[str, tuple[CheckEntry, ...]]
    upstream: tuple[UpstreamEntry, ...]
    input_digest: str | None
    reconciled: Mapping[str, str] | None
    workspace: str | None = None  # checkout | live; None: recorded before 0.2 (the work tree)

    @property
    def proven(self) -> bool:
        return self.status.proven

    @property
    def live(self) -> bool:
        """The step's checks ran in the live work tree (declared, or before private checkouts)."""
        return self.workspace != "checkout"


@dataclass(frozen=True)
class RunRecord:
    """A run commit as the gate, mission control and reviewers see it."""

    commit: str
    time: int  # the signed commit time
    plan: str
    verdict: Verdict
    reasons: tuple[str, ...]
    contract: str
    tree: str
    head: str | None
    seal_commit: str | None
    seal_version: int | None
    runner: str | None
    steps: Mapping[str, StepEntry]
    doc: Mapping[str, Any]  # the document as stored, for display only
    ignored_paths: Mapping[str, str] = field(default_factory=dict)  # path -> listing digest
    forced: bool = False  # `--force`: steps exhausted under the contract were run again
    labels: tuple[str, ...] = ()  # `--label`: the runner labels this run acted as (runs_on)
    changed: tuple[str, ...] = ()  # what the steps changed in the workspace (purity)
    missing_tools: tuple[str, ...] = ()

    def passed_steps(self) -> list[str]:
        return [sid for sid, s in self.steps.items() if s.proven]


class MalformedRun(LedgerError):
    """A run record whose fields do not have their documented shape."""

    def __init__(self, commit: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.commit = commit


_REQUIRED = object()
_BAD = object()  # what a converter returns for a value of the wrong type


class _Reader:
    """Typed access to one JSON document, naming the commit and the path of a bad field."""

    def __init__(self, commit: str) -> None:
        self.commit = commit

    def fail(self, path: str, expected: str, value: object) -> MalformedRun:
        found = "it is missing" if value is _REQUIRED else f"found {type(value).__name__}"
        return MalformedRun(
            self.commit,
            f"run {self.commit[:12]}: run.json {path}: expected {expected}, {found}",
            hint="the run record is malformed; re-run to record fresh evidence "
            "(`git audit run`), and check the ledger with `git audit verify`",
        )

    def get(
        self,
        doc: Mapping[str, Any],
        key: str,
        path: str,
        convert: Callable[[object], Any],
        expected: str,
        default: Any = _REQUIRED,
    ) -> Any:
        """``doc[key]`` converted; *default* when absent (a field without one is required).
        (Called for every field of every run that ``verify`` reads: the path is only spelled
        out for an error.)"""
        raw = doc.get(key, _REQUIRED)
        if raw is _REQUIRED:
            if default is _REQUIRED:
                raise self.fail(f"{path}.{key}" if path else key, expected, _REQUIRED)
            return default
        value = convert(raw)
        if value is _BAD:
            raise self.fail(f"{path}.{key}" if path else key, expected, raw)
        return value


def _str(value: object) -> object:
    return value if isinstance(value, str) else _BAD


def _int(value: object) -> object:
    return value if isinstance(value, int) and not isinstance(value, bool) else _BAD


def _num(value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _BAD
    return float(value)


def _bool(value: object) -> object:
    return value if isinstance(value, bool) else _BAD


def _dict(value: object) -> object:
    return value if isinstance(value, dict) else _BAD


def _list(value: object) -> object:
    return value if isinstance(value, list) else _BAD


def _strings(value: object) -> object:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return _BAD
    return tuple(value)


def _one_of(*values: str) -> Callable[[object], object]:
    return lambda value: value if value in values else _BAD


def _nullable(convert: Callable[[object], object]) -> Callable[[object], object]:
    return lambda value: None if value is None else convert(value)


def _enum(kind: Callable[[str], object]) -> Callable[[object], object]:
    def convert(value: object) -> object:
        if not isinstance(value, str):
            return _BAD
        try:
            return kind(value)
        except ValueError:
            return _BAD

    return convert


# built once: every field of every run read goes through one of these
_INT_OR_NULL = _nullable(_int)
_DICT_OR_NULL = _nullable(_dict)
_STR_OR_NULL = _nullable(_str)
_STEP_STATUS = _enum(StepStatus)
_VERDICT = _enum(Verdict)
_WORKSPACE_KIND = _one_of("checkout", "live")


def _check(r: _Reader, raw: object, path: str) -> CheckEntry:
    if not isinstance(raw, dict):
        raise r.fail(path, "an object", raw)
    doc: Mapping[str, Any] = raw
    return CheckEntry(
        check=r.get(doc, "check", path, _str, "a string", ""),
        outcome=r.get(doc, "outcome", path, _str, "a string"),
        message=r.get(doc, "message", path, _str, "a string", ""),
        exit_code=r.get(doc, "exit_code", path, _INT_OR_NULL, "an integer or null", None),
        duration=r.get(doc, "duration", path, _num, "a number", 0.0),
        stdout_bytes=r.get(doc, "stdout_bytes", path, _int, "an integer", 0),
        stderr_bytes=r.get(doc, "stderr_bytes", path, _int, "an integer", 0),
        stdout_truncated=r.get(doc, "stdout_truncated", path, _bool, "a boolean", False),
        stderr_truncated=r.get(doc, "stderr_truncated", path, _bool, "a boolean", False),
    )


def _checks(r: _Reader, raw: object, path: str) -> tuple[CheckEntry, ...]:
    if not isinstance(raw, list):
        raise r.fail(path, "an array", raw)
    items: list[Any] = raw
    return tuple(_check(r, item, f"{path}[{n}]") for n, item in enumerate(items))


def _upstream(r: _Reader, raw: object, path: str) -> UpstreamEntry:
    if not isinstance(raw, dict):
        raise r.fail(path, "an object", raw)
    doc: Mapping[str, Any] = raw
    return UpstreamEntry(
        step=r.get(doc, "step", path, _str, "a string"),
        output=r.get(doc, "output", path, _str, "a string"),
        passed=r.get(doc, "passed", path, _bool, "a boolean"),
        checks=_checks(r, doc.get("checks", []), f"{path}.checks"),
    )


def _step(r: _Reader, raw: object, path: str) -> StepEntry:
    if not isinstance(raw, dict):
        raise r.fail(path, "an object", raw)
    doc: Mapping[str, Any] = raw
    outputs_raw: Mapping[str, Any] = r.get(doc, "outputs", path, _dict, "an object", {})
    upstream_raw: list[Any] = r.get(doc, "upstream", path, _list, "an array", [])
    reconciled = r.get(doc, "reconciled", path, _DICT_OR_NULL, "an object", None)
    if reconciled is not None and not all(isinstance(v, str) for v in reconciled.values()):
        raise r.fail(f"{path}.reconciled", "an object of strings", reconciled)
    return StepEntry(
        status=r.get(doc, "status", path, _STEP_STATUS, "a step status"),
        title=r.get(doc, "title", path, _str, "a string", ""),
        reason=r.get(doc, "reason", path, _str, "a string", ""),
        attempt=r.get(doc, "attempt", path, _INT_OR_NULL, "an integer or null", None),
        attempts_used=r.get(doc, "attempts_used", path, _int, "an integer", 0),
        duration=r.get(doc, "duration", path, _num, "a number", 0.0),
        carried_from=r.get(doc, "carried_from", path, _STR_OR_NULL, "a string or null", None),
        checks=_checks(r, doc.get("checks", []), f"{path}.checks"),
        outputs={
            str(name): _checks(r, checks, f"{path}.outputs.{name}")
            for name, checks in outputs_raw.items()
        },
        upstream=tuple(
            _upstream(r, u, f"{path}.upstream[{n}]") for n, u in enumerate(upstream_raw)
        ),
        input_digest=r.get(doc, "input_digest", path, _STR_OR_NULL, "a string or null", None),
        reconciled=reconciled,
        workspace=r.get(doc, "workspace", path, _WORKSPACE_KIND, "checkout or live", None),
    )


def parse_run(commit: str, time: int, doc: object) -> RunRecord:
    """The typed record of a run commit's ``run.json``; LedgerError naming the path of the first
    malformed field."""
    r = _Reader(commit)
    if not isinstance(doc, dict) or doc.get("format") != RUN_FORMAT:
        raise LedgerError(f"run {commit[:12]}: run.json is not a {RUN_FORMAT} record")
    seal: Mapping[str, Any] = r.get(doc, "seal", "", _dict, "an object", {})
    runner: Mapping[str, Any] = r.get(doc, "runner", "", _dict, "an object", {})
    steps: Mapping[str, Any] = r.get(doc, "steps", "", _dict, "an object")
    workspace: Mapping[str, Any] = r.get(doc, "workspace", "", _dict, "an object", {})
    ignored: Mapping[str, Any] = r.get(
        workspace, "ignored_paths", "workspace", _dict, "an object", {}
    )
    purity: Mapping[str, Any] = r.get(doc, "purity", "", _dict, "an object", {})
    return RunRecord(
        commit=commit,
        time=time,
        plan=r.get(doc, "plan", "", _str, "a string"),
        verdict=r.get(doc, "verdict", "", _VERDICT, "a verdict"),
        reasons=r.get(doc, "reasons", "", _strings, "an array of strings", ()),
        contract=r.get(doc, "contract_digest", "", _str, "a string"),
        tree=r.get(doc, "tree", "", _str, "a string"),
        head=r.get(doc, "head", "", _STR_OR_NULL, "a string or null", None),
        seal_commit=r.get(seal, "commit", "seal", _str, "a string", None),
        seal_version=r.get(seal, "version", "seal", _int, "an integer", None),
        runner=r.get(runner, "name", "runner", _str, "a string", None),
        steps={str(sid): _step(r, entry, f"steps.{sid}") for sid, entry in steps.items()},
        doc=doc,
        ignored_paths={
            str(p): r.get(v, "digest", f"workspace.ignored_paths.{p}", _str, "a string")
            if isinstance(v, dict)
            else _bad_ignored(r, p, v)
            for p, v in ignored.items()
        },
        forced=r.get(doc, "forced", "", _bool, "a boolean", False),
        labels=r.get(runner, "labels", "runner", _strings, "an array of strings", ()),
        changed=r.get(purity, "changed", "purity", _strings, "an array of strings", ()),
        missing_tools=r.get(doc, "missing_tools", "", _strings, "an array of strings", ()),
    )


def _bad_ignored(r: _Reader, path: object, value: object) -> str:
    raise r.fail(f"workspace.ignored_paths.{path}", "an object", value)


def lookup_keys(doc: object) -> tuple[str, str, str, dict[str, tuple[str, str]]] | None:
    """What the lookup cache indexes a run by: (tree, contract, verdict, step -> (status, input
    digest)), read leniently: a run whose other fields are malformed must still be found for its
    tree, so that the gate judges it (and FAILs it) instead of missing it. None when even these
    cannot be read."""
    if not isinstance(doc, dict):
        return None
    tree, contract, verdict = doc.get("tree"), doc.get("contract_digest"), doc.get("verdict")
    if not (isinstance(tree, str) and isinstance(contract, str) and isinstance(verdict, str)):
        return None
    steps: dict[str, tuple[str, str]] = {}
    raw_steps = doc.get("steps")
    for sid, entry in (raw_steps if isinstance(raw_steps, dict) else {}).items():
        if isinstance(entry, dict):
            status, digest = entry.get("status"), entry.get("input_digest")
            steps[str(sid)] = (
                status if isinstance(status, str) else "?",
                digest if isinstance(digest, str) else "",
            )
    return tree, contract, verdict, steps
