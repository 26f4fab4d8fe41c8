"""`git audit report`: a review-ready summary for a pull-request comment (markdown or JSON)."""

from __future__ import annotations

import re
import secrets
from typing import Any

import pygit2

from gitaudit.gate import junit
from gitaudit.gate.assess import plan_files
from gitaudit.gate.judge import judge
from gitaudit.gate.result import GateResult
from gitaudit.gate.states import step_states
from gitaudit.git.repo import Repo
from gitaudit.ledger.objects import blob_at
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.records import RunRecord, StepEntry
from gitaudit.ledger.runs import read_run
from gitaudit.plan.catalog import check_file
from gitaudit.plan.graph import render
from gitaudit.plan.model import Plan


def _previous(repo: Repo, record: RunRecord) -> RunRecord | None:
    commit = repo.git[pygit2.Oid(hex=record.commit)]
    assert isinstance(commit, pygit2.Commit)
    if not commit.parent_ids:
        return None
    return read_run(repo.git, commit.parent_ids[0])


TAIL_LINES = 30

# Fixes that make sense in a pull request, by reason code: what to do, then push.
_PR_FIXES = {
    "evidence.missing": "record evidence for this commit, then push it with the branch: "
    "`git audit run --plan {plan}` and `git audit push` (or let a CI job with a runner key "
    "run the plan: see docs/hooks-and-servers.md)",
    "evidence.stale-contract": "the plan was resealed since the last run: run it again on this "
    "commit (`git audit run --plan {plan}`) and push the evidence (`git audit push`)",
    "step.failed": "fix step {step} (see why below), commit and push: the gate judges the new "
    "commit, and its run records fresh evidence",
    "step.exhausted": "step {step} used all its attempts: after the fix, a sealer resets them "
    "(`git audit plan reset-attempts {step} --plan {plan}`) and the plan runs again",
    "step.blocked": "step {step} waits for a prerequisite that is not verified: fix that one first",
    "plan.differs-from-seal": "the branch changes the plan: a sealer reviews and seals it "
    "(`git audit plan seal --plan {plan}`), pushing refs/audit/plans before the branch",
    "plan.unsealed": "a sealer seals the new plan (`git audit plan seal --plan {plan}`) and "
    "pushes refs/audit/plans before the branch",
}


def pr_fix(code: str, plan: str, step: str | None, hint: str) -> str:
    """The fix for a reason, worded for a pull request (the local command otherwise)."""
    template = _PR_FIXES.get(code)
    if template is None:
        return hint
    return template.format(plan=plan, step=step or "?")


def _failure(repo: Repo, record: RunRecord, sid: str, title: str) -> dict[str, Any]:
    """Why a step is not proven: its reason, the failing test names of its JUnit artifacts, and
    the tail of the output of its first failing check."""
    entry = record.steps[sid]
    tests = junit.failing_tests(repo.git, record, sid)
    output = ""
    commit = repo.git[pygit2.Oid(hex=record.commit)]
    assert isinstance(commit, pygit2.Commit)
    for folder, n, check in junit.checks_of(entry):
        if check.outcome == "passed":
            continue
        base = f"steps/{sid}/{folder}/{n}"
        parts = [
            junit.tail(blob_at(repo.git, commit.tree, f"{base}/{stream}") or b"", TAIL_LINES)
            for stream in ("stdout", "stderr")
        ]
        output = "\n".join(p for p in parts if p)
        break
    return {
        "step": sid,
        "title": title,
        "status": str(entry.status),
        "reason": entry.reason,
        "failing_tests": tests,
        "output_tail": output,
    }


def _head(repo: Repo, rev: str | None) -> str | None:
    """The commit judged: REV's, else HEAD's (the work tree is judged, HEAD is its base)."""
    try:
        obj = repo.git.revparse_single(rev or "HEAD")
        return str(obj.peel(pygit2.Commit).id)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        return None


def _run_facts(repo: Repo, record: RunRecord, entry: dict[str, Any], plan: Plan | None) -> None:
    """Why steps of the judged run failed, and what changed since the run before it."""
    titles = {s.id: s.title for s in plan.steps} if plan else {}
    for sid, s in record.steps.items():
        if not s.proven and str(s.status) not in ("not-run", "blocked"):
            entry["failures"].append(_failure(repo, record, sid, titles.get(sid, "")))
    previous = _previous(repo, record)
    if previous is not None:
        for sid, s in record.steps.items():
            earlier = previous.steps.get(sid)
            before = str(earlier.status) if earlier else None
            if before != s.status:
                entry["changes"].append({"step": sid, "before": before, "after": s.status})
        entry["previous_run"] = previous.commit


def _status(entry: StepEntry | None, state: str) -> str:
    """A step's status in the run, unless the run proved it and the gate does not take that
    proof for this commit (its evidence expired, or was refused): then the gate's state."""
    if entry is None:
        return "no evidence"
    if entry.proven and state != "verified":
        return state
    return str(entry.status)


def build(
    repo: Repo, rev: str | None, for_ref: str | None = None
) -> tuple[GateResult, dict[str, Any]]:
    result = judge(repo, rev, for_ref=for_ref)
    plans_state = read_state(repo)
    files = {f.name: f for f in plan_files(repo, result.tree, rev)}
    plans = []
    for verdict in result.plans:
        entry: dict[str, Any] = {
            "plan": verdict.to_json(),
            "requirements": [],
            "changes": [],
            "graph": None,
            "failures": [],
        }
        file = files.get(verdict.name)
        checked = check_file(file, environment=False) if file else None
        record = read_run(repo.git, verdict.run) if verdict.run else None
        if checked and checked.plan:
            plan = checked.plan
            # the gate's word on each step, not the run's: a step the run proved whose evidence
            # expired (or was refused) is no verified step of this commit
            states = step_states(repo, plans_state, verdict.name, plan, record, verdict.reasons)
            entry["graph"] = render(plan, "mermaid", states)
            for req in plan.requirements:
                rows = []
                for step in plan.covering_steps(req.id):
                    s = record.steps.get(step.id) if record else None
                    checks = s.checks if s else ()
                    rows.append(
                        {
                            "step": step.id,
                            "title": step.title,
                            "status": _status(s, states[step.id]),
                            "evidence": str(
                                (s and s.carried_from) or (record.commit if record else "")
                            ),
                            "exit_codes": [c.exit_code for c in checks],
                            "seconds": round(sum(c.duration for c in checks), 3),
                        }
                    )
                entry["requirements"].append(
                    {
                        "id": req.id,
                        "priority": req.priority,
                        "description": req.description,
                        "steps": rows,
                    }
                )
        if record is not None:
            _run_facts(repo, record, entry, checked.plan if checked else None)
        plans.append(entry)
    for entry in plans:
        name = entry["plan"]["name"]
        for reason in entry["plan"]["reasons"]:
            reason["pr_fix"] = pr_fix(reason["code"], name, reason.get("step"), reason["hint"])
    return result, {
        "verdict": result.verdict,
        "tree": result.tree,
        "commit": _head(repo, rev),
        "judged": "commit" if rev else "work tree",
        "plans": plans,
    }


# what ends a line for CommonMark or Python, and every other control character: quoted text
# (a step title, a test name, a path in a reason) holding one could start a line of its own,
# a heading "## gitaudit: PASS" that reads as gitaudit's
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
# controls kept out of a code block (ANSI escapes recolour or erase lines in a job log)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# ASCII punctuation that makes inline markdown: emphasis, code spans, links, images, tables
# (a heading starts a line, and quoted text never does)
_MARKUP = re.compile(r"([\\`*_\[\]!~|])")


def _line(text: str) -> str:
    """*text* on one line: its line breaks and control characters become one space each."""
    return _BREAKS.sub(" ", text)


def _md(text: str) -> str:
    """Text outside code spans, on one line and inert: angle brackets would be read as HTML,
    markdown punctuation as emphasis, links or code spans."""
    text = _line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKUP.sub(r"\\\1", text)


def _code(text: str) -> str:
    """*text* as an inline code span on one line, delimited by more backticks than it holds."""
    text = _line(text)
    ticks = "`" * (max((len(r) for r in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _fence(text: str) -> str:
    """A code fence no line of *text* closes: longer than every run of backticks in it."""
    return "`" * max(3, max((len(r) for r in re.findall("`+", text)), default=0) + 1)


def _verbatim(text: str) -> str:
    """Captured output for a code block: control characters (ANSI escapes, NUL) shown as
    ``\\xNN`` rather than written for a terminal or a job log to act on."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def markdown(doc: dict[str, Any]) -> str:
    icon = {"PASS": "✅", "FAIL": "❌", "UNKNOWN": "❔"}
    commit = doc.get("commit")
    where = f"Commit `{commit}`, tree `{doc['tree']}`" if commit else f"Tree `{doc['tree']}`"
    if doc.get("judged") == "work tree":
        where = f"Work tree `{doc['tree']}`" + (f" (on commit `{commit}`)" if commit else "")
    out = [f"## gitaudit: {icon.get(doc['verdict'], '')} {doc['verdict']}", "", where, ""]
    for entry in doc["plans"]:
        out += _plan_markdown(entry, icon)
    return "\n".join(out)


def _plan_markdown(entry: dict[str, Any], icon: dict[str, str]) -> list[str]:
    plan = entry["plan"]
    out = [f"### {icon.get(plan['verdict'], '')} Plan `{plan['name']}`: {plan['verdict']}"]
    if plan.get("run"):
        run = plan["run"]
        out.append(
            f"Evidence: run commit `{run}` on `refs/audit/runs/{plan['name']}` "
            f"(`git audit show {run[:12]}`, or `git show {run[:12]}:summary.md`)"
        )
    out.append("")
    for reason in plan["reasons"]:
        out.append(f"- {_md(reason['message'])}")
        out.append(f"  - fix: {_line(reason.get('pr_fix') or reason['hint'])}")
    for note in plan.get("notes", []):
        out.append(f"- note: {_md(note)}")
    out.append("")
    for failure in entry.get("failures", []):
        out += _failure_markdown(failure)
    if entry["requirements"]:
        out += _requirements_markdown(entry["requirements"])
    if entry["changes"]:
        out.append(f"Changed since the previous run (`{entry['previous_run'][:12]}`):")
        out += [f"- step {c['step']}: {c['before']} → {c['after']}" for c in entry["changes"]]
        out.append("")
    if entry["graph"]:
        fence = _fence(entry["graph"])
        out += [
            "<details><summary>Plan graph</summary>",
            "",
            f"{fence}mermaid",
            entry["graph"].rstrip(),
            fence,
            "",
            "</details>",
            "",
        ]
    return out


def _failure_markdown(failure: dict[str, Any]) -> list[str]:
    title = f" ({failure['title']})" if failure["title"] else ""
    out = [
        f"**Step `{failure['step']}`{_md(title)}: {failure['status']}** — " + _md(failure["reason"])
    ]
    tests = failure["failing_tests"]
    if tests:
        out.append("")
        out.append("Failing tests:")
        out += [f"- {_code(t)}" for t in tests[:20]]
        if len(tests) > 20:
            out.append(f"- … and {len(tests) - 20} more")
    if failure["output_tail"]:
        output = _verbatim(failure["output_tail"])
        fence = _fence(output)
        out += [
            "",
            "<details><summary>Output (last lines)</summary>",
            "",
            fence,
            output,
            fence,
            "",
            "</details>",
        ]
    out.append("")
    return out


def _requirements_markdown(requirements: list[dict[str, Any]]) -> list[str]:
    out = [
        "| requirement | step | status | evidence | exit codes | seconds |",
        "|---|---|---|---|---|---|",
    ]
    empty = {"step": "—", "status": "uncovered", "evidence": "", "exit_codes": [], "seconds": ""}
    for req in requirements:
        for i, row in enumerate(req["steps"] or [empty]):
            name = f"{req['id']} ({req['priority']})" if i == 0 else ""
            ev = f"`{row['evidence'][:12]}`" if row["evidence"] else ""
            codes = ", ".join("—" if c is None else str(c) for c in row["exit_codes"])
            out.append(
                f"| {name} | {row['step']} | {row['status']} | {ev} | {codes} | {row['seconds']} |"
            )
    out.append("")
    return out


def github_log(text: str) -> list[str]:
    """*text* (the report) as lines for a GitHub Actions job log: the runner acts on any line of
    the log that reads as a workflow command (``::notice::``, ``::add-mask::``, ``##[error]``),
    and the report quotes what checks printed, so commands are stopped around it and resumed by
    a token no check could have printed."""
    token = secrets.token_hex(16)
    return [f"::stop-commands::{token}", text, f"::{token}::"]


def github_annotations(doc: dict[str, Any]) -> list[str]:
    """GitHub Actions workflow commands: one ::error (FAIL) or ::warning (UNKNOWN) per reason."""
    lines = []
    for entry in doc["plans"]:
        plan = entry["plan"]
        level = {"FAIL": "error", "UNKNOWN": "warning"}.get(plan["verdict"])
        if level is None:
            continue
        for reason in plan["reasons"]:
            text = f"{reason['message']} — fix: {reason.get('pr_fix') or reason['hint']}"
            text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
            lines.append(f"::{level} title=gitaudit {plan['name']}::{text}")
    return lines
