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
from dataclasses import field
from typing import Any, TypeVar

from gitaudit.errors import LedgerError
from gitaudit.frozen import frozen
from gitaudit.verdict import StepStatus, Verdict

CLOCK_SKEW = 300
"""Seconds of tolerated clock difference for signed times: a signed time further ahead of the
reader's clock is refused (evidence, agent records), one behind it is merely old."""

RUN_FORMAT = "gitaudit.run/1"


@frozen
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
    # a program the check started by name, the PATH folder it was found in and the executable
    # (links resolved): a judge where the run was made must offer it so (gitaudit.pathsearch)
    program: str | None = None
    executable: str | None = None
    found_in: str | None = None


@frozen
class UpstreamEntry:
    """An upstream output contract re-executed right before a step."""

    step: str
    output: str
    passed: bool
    checks: tuple[CheckEntry, ...]


@frozen
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


@frozen
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
    runner_key: str | None = None  # the fingerprint of the key the run says signed it
    path: tuple[str, ...] | None = None  # the folders of the checks' PATH (None: not recorded)
    # the drivers of the content filters its checkout applied (``NAME.smudge`` -> command)
    filters: Mapping[str, str] = field(default_factory=dict)

    def passed_steps(self) -> list[str]:
        return [sid for sid, s in self.steps.items() if s.proven]

    @property
    def began(self) -> int:
        """When the run's checks began, for counting its evidence's age (``valid_for``): its
        signed ``started_at`` (whole seconds, rounded down), or its signed commit time when that
        is earlier or ``started_at`` is missing or malformed. The commit is signed when the run
        ends: counted from then, a check that ran at the start of a long run (a later check
        slow on purpose, a run held stopped) stayed fresh for as long again as the run took."""
        from datetime import UTC, datetime

        stamp = self.doc.get("started_at") if isinstance(self.doc, Mapping) else None
        if not isinstance(stamp, str):
            return self.time
        try:
            moment = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError:
            return self.time
        return min(self.time, int(moment.timestamp()))

    @property
    def sound(self) -> bool:
        """Whether the run counts as a whole: it was not interrupted, its steps left the
        workspace as they found it, and no required tool was missing. A step that passed in
        an unsound run proves nothing, here or carried into another run."""
        return self.verdict != Verdict.INTERRUPTED and not self.changed and not self.missing_tools


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
        program=r.get(doc, "program", path, _STR_OR_NULL, "a string or null", None),
        executable=r.get(doc, "executable", path, _STR_OR_NULL, "a string or null", None),
        found_in=r.get(doc, "found_in", path, _STR_OR_NULL, "a string or null", None),
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
    malformed field.

    A well-formed record (every run ``verify`` reads) is taken in one pass of inlined checks
    (:func:`_plain_run`); anything else, down to a ``str`` subclass, is read again field by
    field (:func:`_typed_run`), which refuses it naming the first malformed field."""
    if isinstance(doc, dict) and doc.get("format") == RUN_FORMAT:
        record = _plain_run(commit, time, doc)
        if record is not None:
            return record
    return _typed_run(commit, time, doc)


def _typed_run(commit: str, time: int, doc: object) -> RunRecord:
    """:func:`parse_run` field by field through :class:`_Reader` (the reference reading)."""
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
    drivers: Mapping[str, Any] = r.get(workspace, "filters", "workspace", _dict, "an object", {})
    purity: Mapping[str, Any] = r.get(doc, "purity", "", _dict, "an object", {})
    environment: Mapping[str, Any] = r.get(doc, "environment", "", _dict, "an object", {})
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
        runner_key=r.get(runner, "fingerprint", "runner", _str, "a string", None),
        path=r.get(environment, "path", "environment", _strings, "an array of strings", None),
        filters={
            str(k): r.get(drivers, str(k), "workspace.filters", _str, "a string") for k in drivers
        },
    )


def _bad_ignored(r: _Reader, path: object, value: object) -> str:
    raise r.fail(f"workspace.ignored_paths.{path}", "an object", value)


# The fast reading: the checks of _typed_run for a record whose every value has exactly its JSON
# type (``type(v) is str``: json.loads makes no subclasses), inlined. Each function returns None
# as soon as anything is not plainly right, and parse_run then reads the whole record again with
# _typed_run: so the fast reading refuses nothing itself, and only returns what _typed_run would
# return for the same document. A field whose default is not one of its valid values (``seal``'s
# ``commit`` is None when absent, but null is refused) is read with _ABSENT as its default.

_ABSENT: Any = object()
_NO_FIELDS: Mapping[str, Any] = {}  # an absent object field (only ever read)
_STATUSES = {status.value: status for status in StepStatus}  # StepStatus(value), as a lookup
_VERDICTS = {verdict.value: verdict for verdict in Verdict}
_WORKSPACES = ("checkout", "live")
_Record = TypeVar("_Record", CheckEntry, UpstreamEntry, StepEntry, RunRecord)
_Item = TypeVar("_Item")


def _built(cls: type[_Record], **fields: Any) -> _Record:
    """``cls(**fields)`` for a frozen dataclass given every one of its fields, without the one
    ``object.__setattr__`` call per field of its ``__init__`` (a third of the fast reading)."""
    record = object.__new__(cls)
    record.__dict__.update(fields)
    return record


def _plain_strings(value: object) -> tuple[str, ...] | None:
    if type(value) is not list or any(type(v) is not str for v in value):
        return None
    return tuple(value)


def _plain_check(raw: object) -> CheckEntry | None:
    if type(raw) is not dict:
        return None
    get = raw.get
    check, outcome, message = get("check", ""), get("outcome"), get("message", "")
    exit_code, duration = get("exit_code"), get("duration", 0.0)
    stdout_bytes, stderr_bytes = get("stdout_bytes", 0), get("stderr_bytes", 0)
    stdout_cut, stderr_cut = get("stdout_truncated", False), get("stderr_truncated", False)
    program, executable, found_in = get("program"), get("executable"), get("found_in")
    if (
        (program is None or type(program) is str)
        and (executable is None or type(executable) is str)
        and (found_in is None or type(found_in) is str)
        and type(check) is str
        and type(outcome) is str
        and type(message) is str
        and (exit_code is None or type(exit_code) is int)
        and (type(duration) is float or type(duration) is int)
        and type(stdout_bytes) is int
        and type(stderr_bytes) is int
        and type(stdout_cut) is bool
        and type(stderr_cut) is bool
    ):
        return _built(
            CheckEntry,
            check=check,
            outcome=outcome,
            message=message,
            exit_code=exit_code,
            duration=float(duration),
            stdout_bytes=stdout_bytes,
            stderr_bytes=stderr_bytes,
            stdout_truncated=stdout_cut,
            stderr_truncated=stderr_cut,
            program=program,
            executable=executable,
            found_in=found_in,
        )
    return None


def _plain_list(raw: object, read: Callable[[object], _Item | None]) -> tuple[_Item, ...] | None:
    """Each item of the JSON array *raw* read by *read*; None unless every one reads."""
    if type(raw) is not list:
        return None
    entries: list[_Item] = []
    for item in raw:
        entry = read(item)
        if entry is None:
            return None
        entries.append(entry)
    return tuple(entries)


def _plain_checks(raw: object) -> tuple[CheckEntry, ...] | None:
    return _plain_list(raw, _plain_check)


def _plain_upstream(raw: object) -> UpstreamEntry | None:
    if type(raw) is not dict:
        return None
    step, output, passed = raw.get("step"), raw.get("output"), raw.get("passed")
    checks = _plain_checks(raw.get("checks", []))
    if type(step) is not str or type(output) is not str or type(passed) is not bool:
        return None
    if checks is None:
        return None
    return _built(UpstreamEntry, step=step, output=output, passed=passed, checks=checks)


def _plain_outputs(raw: Mapping[str, Any]) -> dict[str, tuple[CheckEntry, ...]] | None:
    outputs: dict[str, tuple[CheckEntry, ...]] = {}
    for name, checks_raw in raw.items():
        checks = _plain_checks(checks_raw)
        if checks is None:
            return None
        outputs[str(name)] = checks
    return outputs


def _plain_step(raw: object) -> StepEntry | None:
    if type(raw) is not dict:
        return None
    get = raw.get
    status, title, reason = get("status"), get("title", ""), get("reason", "")
    attempt, attempts_used, duration = get("attempt"), get("attempts_used", 0), get("duration", 0.0)
    carried_from, input_digest = get("carried_from"), get("input_digest")
    reconciled, workspace = get("reconciled"), get("workspace", _ABSENT)
    outputs_raw, upstream_raw = get("outputs", _NO_FIELDS), get("upstream", [])
    if not (
        type(status) is str
        and status in _STATUSES
        and type(title) is str
        and type(reason) is str
        and (attempt is None or type(attempt) is int)
        and type(attempts_used) is int
        and (type(duration) is float or type(duration) is int)
        and (carried_from is None or type(carried_from) is str)
        and (input_digest is None or type(input_digest) is str)
        and (
            reconciled is None
            or (type(reconciled) is dict and all(type(v) is str for v in reconciled.values()))
        )
        and (workspace is _ABSENT or workspace in _WORKSPACES)
        and type(outputs_raw) is dict
        and type(upstream_raw) is list
    ):
        return None
    checks = _plain_checks(get("checks", []))
    outputs = _plain_outputs(outputs_raw)
    upstream = _plain_list(upstream_raw, _plain_upstream)
    if checks is None or outputs is None or upstream is None:
        return None
    return _built(
        StepEntry,
        status=_STATUSES[status],
        title=title,
        reason=reason,
        attempt=attempt,
        attempts_used=attempts_used,
        duration=float(duration),
        carried_from=carried_from,
        checks=checks,
        outputs=outputs,
        upstream=upstream,
        input_digest=input_digest,
        reconciled=reconciled,
        workspace=None if workspace is _ABSENT else workspace,
    )


def _plain_run(commit: str, time: int, doc: Mapping[str, Any]) -> RunRecord | None:
    """:func:`_typed_run`'s record of a plainly well-formed *doc*; None for any other."""
    get = doc.get
    seal, runner = get("seal", _NO_FIELDS), get("runner", _NO_FIELDS)
    workspace, purity = get("workspace", _NO_FIELDS), get("purity", _NO_FIELDS)
    environment = get("environment", _NO_FIELDS)
    steps_raw = get("steps")
    if not (
        type(seal) is dict
        and type(runner) is dict
        and type(workspace) is dict
        and type(purity) is dict
        and type(environment) is dict
        and type(steps_raw) is dict
    ):
        return None
    plan, verdict, contract, tree = get("plan"), get("verdict"), get("contract_digest"), get("tree")
    head, forced = get("head"), get("forced", False)
    seal_commit, seal_version = seal.get("commit", _ABSENT), seal.get("version", _ABSENT)
    runner_name, runner_key = runner.get("name", _ABSENT), runner.get("fingerprint", _ABSENT)
    ignored_raw = workspace.get("ignored_paths", _NO_FIELDS)
    drivers_raw = workspace.get("filters", _NO_FIELDS)
    if not (
        type(plan) is str
        and type(verdict) is str
        and verdict in _VERDICTS
        and type(contract) is str
        and type(tree) is str
        and (head is None or type(head) is str)
        and type(forced) is bool
        and (seal_commit is _ABSENT or type(seal_commit) is str)
        and (seal_version is _ABSENT or type(seal_version) is int)
        and (runner_name is _ABSENT or type(runner_name) is str)
        and (runner_key is _ABSENT or type(runner_key) is str)
        and type(ignored_raw) is dict
        and type(drivers_raw) is dict
        and all(type(v) is str for v in drivers_raw.values())
    ):
        return None
    reasons = _plain_strings(get("reasons", []))
    labels = _plain_strings(runner.get("labels", []))
    changed = _plain_strings(purity.get("changed", []))
    missing_tools = _plain_strings(get("missing_tools", []))
    path_raw = environment.get("path", _ABSENT)
    folders = None if path_raw is _ABSENT else _plain_strings(path_raw)
    unread = path_raw is not _ABSENT and folders is None
    if reasons is None or labels is None or changed is None or missing_tools is None or unread:
        return None
    ignored_paths: dict[str, str] = {}
    for path, listing in ignored_raw.items():
        digest = listing.get("digest") if type(listing) is dict else None
        if type(digest) is not str:
            return None
        ignored_paths[str(path)] = digest
    steps: dict[str, StepEntry] = {}
    for sid, step_raw in steps_raw.items():
        step = _plain_step(step_raw)
        if step is None:
            return None
        steps[str(sid)] = step
    return _built(
        RunRecord,
        commit=commit,
        time=time,
        plan=plan,
        verdict=_VERDICTS[verdict],
        reasons=reasons,
        contract=contract,
        tree=tree,
        head=head,
        seal_commit=None if seal_commit is _ABSENT else seal_commit,
        seal_version=None if seal_version is _ABSENT else seal_version,
        runner=None if runner_name is _ABSENT else runner_name,
        steps=steps,
        doc=doc,
        ignored_paths=ignored_paths,
        forced=forced,
        labels=labels,
        changed=changed,
        missing_tools=missing_tools,
        runner_key=None if runner_key is _ABSENT else runner_key,
        path=folders,
        filters={str(k): v for k, v in drivers_raw.items()},
    )


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
    sound = _sound_doc(doc, verdict)
    for sid, entry in (raw_steps if isinstance(raw_steps, dict) else {}).items():
        if isinstance(entry, dict):
            status, digest = entry.get("status"), entry.get("input_digest")
            if status == StepStatus.PASSED and not sound:
                status = UNSOUND
            steps[str(sid)] = (
                status if isinstance(status, str) else "?",
                digest if isinstance(digest, str) else "",
            )
    return tree, contract, verdict, steps


UNSOUND = "unsound"
"""What the lookup cache counts a step that passed in an unsound run as (:attr:`RunRecord.sound`):
an execution, not a pass."""


def _sound_doc(doc: Mapping[str, Any], verdict: str) -> bool:
    """:attr:`RunRecord.sound` for a run document read leniently (anything unreadable is
    unsound)."""
    purity, tools = doc.get("purity", {}), doc.get("missing_tools", [])
    changed = purity.get("changed", []) if isinstance(purity, dict) else None
    return verdict != Verdict.INTERRUPTED and changed == [] and tools == []
