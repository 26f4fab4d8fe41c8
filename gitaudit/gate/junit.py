"""A run as JUnit XML (`git audit show RUN --format junit`), the format CI systems render.

One ``<testsuite>`` per step (named by id and title), one ``<testcase>`` per check: the step's
checks, its output contracts and the upstream contracts re-checked before it; and a last suite
``run`` whose one case ``verdict`` is the run's verdict (a failure for FAIL, an error for
UNKNOWN or INTERRUPTED). A failed check carries a ``<failure>`` with the tail of its captured
output; a step that did not execute (not run, blocked) is ``<skipped>``; an unknown or
interrupted outcome is an ``<error>``. When the
step stored a JUnit artifact, its test cases are included in the step's suite. Durations are
the recorded ones. Nothing is executed: everything comes from the run commit.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

import pygit2

from gitaudit.crypto.commits import verify_commit
from gitaudit.errors import GitAuditError, SignatureError
from gitaudit.git.repo import Repo
from gitaudit.ledger.objects import blob_at
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.records import CheckEntry, RunRecord, StepEntry

TAIL_LINES = 40
_NOT_EXECUTED = {"not-run", "blocked"}
_ERRORS = {"unknown", "interrupted"}


# characters XML 1.0 has no place for (NUL, ESC and most C0 controls, lone surrogates, U+FFFE)
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """*text* with every character XML cannot hold written ``\\xNN`` (``\\uNNNN``): ElementTree
    writes them as they are, and a document holding one is no XML a CI system reads: a check
    that printed an ANSI escape would have its failure, and the run's verdict, go unread."""
    return _NOT_XML.sub(
        lambda m: (
            f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}"
        ),
        text,
    )


def _xml_safe(root: ET.Element) -> None:
    """Every text and attribute under *root* made writable as XML (`xml_text`)."""
    for element in root.iter():
        if element.text:
            element.text = xml_text(element.text)
        if element.tail:
            element.tail = xml_text(element.tail)
        for key, value in list(element.attrib.items()):
            element.set(key, xml_text(value))


def tail(data: bytes, lines: int = TAIL_LINES) -> str:
    text = data.decode(errors="replace").rstrip()
    return "\n".join(text.splitlines()[-lines:])


def checks_of(entry: StepEntry) -> Iterator[tuple[str, int, CheckEntry]]:
    """(folder under steps/<id>/, index, check) for every check recorded for a step."""
    for n, c in enumerate(entry.checks):
        yield "checks", n, c
    for name, checks in entry.outputs.items():
        for n, c in enumerate(checks):
            yield f"outputs/{name}", n, c
    for up in entry.upstream:
        for n, c in enumerate(up.checks):
            yield f"upstream/{up.step}/{up.output}", n, c


def _artifact_cases(repo: pygit2.Repository, tree: pygit2.Tree, sid: str, doc: Any) -> list[Any]:
    """The <testcase> elements of the step's stored JUnit artifacts (*.xml that parse as JUnit)."""
    cases: list[ET.Element] = []
    for art in doc.get("artifacts", []) if isinstance(doc, dict) else []:
        path = art.get("path", "") if isinstance(art, dict) else ""
        if not (art.get("stored") and str(path).endswith(".xml")):
            continue
        data = blob_at(repo, tree, f"steps/{sid}/artifacts/{str(path).strip('/')}")
        if data is None:
            continue
        try:
            root = ET.fromstring(data)  # noqa: S314 - expat refuses entity expansion bombs
        except ET.ParseError:
            continue
        if root.tag not in ("testsuites", "testsuite"):
            continue
        cases += [c for c in root.iter("testcase")]
    return cases


def _theirs(case: ET.Element, plan: str) -> ET.Element:
    """An artifact's test case kept out of the names gitaudit writes (``<plan>.<step>`` for a
    check, ``<plan>.run`` for the verdict): a passing case the agent's test report names so
    would stand beside the failing one as gitaudit's word, and replace it in a CI system that
    keeps one case per name. A plan name holds no ``:``, so ``artifact:`` is never gitaudit's."""
    classname = case.get("classname") or ""
    if classname == plan or classname.startswith(f"{plan}."):
        case.set("classname", f"artifact:{classname}")
    return case


def _seconds(value: str | None) -> float:
    try:
        return max(0.0, float(value or 0))
    except ValueError:
        return 0.0


def _counts(cases: list[Any]) -> tuple[int, int, int]:
    failures = sum(1 for c in cases if c.find("failure") is not None)
    errors = sum(1 for c in cases if c.find("error") is not None)
    skipped = sum(1 for c in cases if c.find("skipped") is not None)
    return failures, errors, skipped


def _case(
    repo: pygit2.Repository,
    tree: pygit2.Tree,
    record: RunRecord,
    sid: str,
    folder: str,
    n: int,
    check: CheckEntry,
) -> ET.Element:
    """The test case of one recorded check, with the tail of its output."""
    case = ET.Element(
        "testcase",
        classname=f"{record.plan}.{sid}",
        name=f"{check.check}" + ("" if folder == "checks" else f" [{folder}]"),
        time=f"{check.duration:.3f}",
    )
    base = f"steps/{sid}/{folder}/{n}"
    out = tail(blob_at(repo, tree, f"{base}/stdout") or b"")
    err = tail(blob_at(repo, tree, f"{base}/stderr") or b"")
    if check.outcome == "failed":
        failure = ET.SubElement(case, "failure", message=check.message, type="failed")
        failure.text = "\n".join(x for x in (out, err) if x)
    elif check.outcome in _ERRORS:
        error = ET.SubElement(case, "error", message=check.message, type=check.outcome)
        error.text = "\n".join(x for x in (out, err) if x)
    if out:
        ET.SubElement(case, "system-out").text = out
    if err:
        ET.SubElement(case, "system-err").text = err
    return case


def require_trusted(repo: Repo, record: RunRecord) -> None:
    """SignatureError (TrustError) naming the run unless a runner trusted in the verified plans
    state signed it: a JUnit document is read by CI systems as the run's word, and a run commit
    anyone can write into ``refs/audit/runs/`` (unsigned, or signed by an untrusted key) would
    otherwise be reported with its own verdict."""
    trust = read_state(repo).trust
    try:
        verify_commit(repo.git, record.commit, trust.with_role("runner"))
    except GitAuditError as exc:
        raise SignatureError(
            f"run {record.commit[:12]} is not evidence: {exc.message}; no JUnit is written for it",
            hint="`git audit verify` names the forged runs; re-run with a trusted runner key",
        ) from None


def build(repo: pygit2.Repository, record: RunRecord, titles: dict[str, str]) -> bytes:
    """The JUnit XML document of *record* (``titles``: step id -> title, when known)."""
    commit = repo[pygit2.Oid(hex=record.commit)]
    assert isinstance(commit, pygit2.Commit)
    tree = commit.tree
    suites = ET.Element("testsuites", name=f"gitaudit {record.plan}")
    totals = [0, 0, 0, 0, 0.0]  # tests, failures, errors, skipped, time
    for sid, entry in record.steps.items():
        title = titles.get(sid) or entry.title
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=f"{sid} ({title})" if title else sid,
            timestamp=str(record.doc.get("started_at", "")),
        )
        props = ET.SubElement(suite, "properties")
        for name, value in (
            ("gitaudit.plan", record.plan),
            ("gitaudit.run", record.commit),
            ("gitaudit.tree", record.tree),
            ("gitaudit.head", record.head or ""),
            ("gitaudit.status", str(entry.status)),
            ("gitaudit.carried_from", entry.carried_from or ""),
        ):
            ET.SubElement(props, "property", name=name, value=value)
        cases = [_case(repo, tree, record, sid, folder, n, c) for folder, n, c in checks_of(entry)]
        if not cases:  # a step with nothing recorded: not run, blocked, carried
            case = ET.Element("testcase", classname=f"{record.plan}.{sid}", name=sid, time="0")
            status = str(entry.status)
            if status in _NOT_EXECUTED:
                ET.SubElement(case, "skipped", message=entry.reason or status)
            elif status in _ERRORS:
                ET.SubElement(case, "error", message=entry.reason or status, type=status)
            elif not entry.proven:
                ET.SubElement(case, "failure", message=entry.reason or status, type=status)
            cases.append(case)
        artifacts = _artifact_cases(repo, tree, sid, record.doc["steps"].get(sid))
        cases += [_theirs(case, record.plan) for case in artifacts]
        suite.extend(cases)
        failures, errors, skipped = _counts(cases)
        seconds = sum(_seconds(c.get("time")) for c in cases)
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        suite.set("skipped", str(skipped))
        suite.set("time", f"{seconds:.3f}")
        for i, value in enumerate((len(cases), failures, errors, skipped, seconds)):
            totals[i] += value
    verdict = _verdict_suite(record)
    suites.append(verdict)
    for i, key in enumerate(("tests", "failures", "errors", "skipped")):
        totals[i] += int(verdict.get(key, "0"))
        suites.set(key, str(int(totals[i])))
    suites.set("time", f"{totals[4]:.3f}")
    _xml_safe(suites)
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True) + b"\n"


def _verdict_suite(record: RunRecord) -> ET.Element:
    """The run's own verdict as a test case: a run FAILs (or is UNKNOWN) also for reasons of the
    run as a whole (a changed workspace, a missing required tool, an interruption, a requirement
    no verified step covers) while every check of every step passed, and a report with only the
    steps' cases would then have no failure."""
    suite = ET.Element("testsuite", name="run", timestamp=str(record.doc.get("started_at", "")))
    case = ET.SubElement(suite, "testcase", classname=f"{record.plan}.run", name="verdict")
    case.set("time", "0")
    verdict = str(record.verdict)
    message = "; ".join(record.reasons) or verdict
    if verdict == "FAIL":
        ET.SubElement(case, "failure", message=message, type=verdict)
    elif verdict != "PASS":
        ET.SubElement(case, "error", message=message, type=verdict)
    failures, errors, _ = _counts([case])
    for key, value in (("tests", 1), ("failures", failures), ("errors", errors), ("skipped", 0)):
        suite.set(key, str(value))
    suite.set("time", "0.000")
    return suite


def failing_tests(repo: pygit2.Repository, record: RunRecord, sid: str) -> list[str]:
    """Names of the failed test cases in the step's stored JUnit artifacts (``class.name``)."""
    commit = repo[pygit2.Oid(hex=record.commit)]
    assert isinstance(commit, pygit2.Commit)
    cases = _artifact_cases(repo, commit.tree, sid, record.doc["steps"].get(sid))
    return [
        ".".join(x for x in (c.get("classname"), c.get("name")) if x)
        for c in cases
        if c.find("failure") is not None or c.find("error") is not None
    ]
