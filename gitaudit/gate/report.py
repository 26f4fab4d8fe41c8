"""`git audit report`: a review-ready summary for a pull-request comment (markdown or JSON)."""

from __future__ import annotations

from typing import Any

import pygit2

from gitaudit.gate.assess import plan_files
from gitaudit.gate.judge import judge
from gitaudit.gate.result import GateResult
from gitaudit.git.repo import Repo
from gitaudit.ledger.records import RunRecord
from gitaudit.ledger.runs import read_run
from gitaudit.plan.catalog import check_file
from gitaudit.plan.graph import render


def _previous(repo: Repo, record: RunRecord) -> RunRecord | None:
    commit = repo.git[pygit2.Oid(hex=record.commit)]
    assert isinstance(commit, pygit2.Commit)
    if not commit.parent_ids:
        return None
    return read_run(repo.git, commit.parent_ids[0])


def build(repo: Repo, rev: str | None) -> tuple[GateResult, dict[str, Any]]:
    result = judge(repo, rev)
    files = {f.name: f for f in plan_files(repo, result.tree, rev)}
    plans = []
    for verdict in result.plans:
        entry: dict[str, Any] = {
            "plan": verdict.to_json(),
            "requirements": [],
            "changes": [],
            "graph": None,
        }
        file = files.get(verdict.name)
        checked = check_file(file, environment=False) if file else None
        record = read_run(repo.git, verdict.run) if verdict.run else None
        if checked and checked.plan:
            plan = checked.plan
            states = {}
            for step in plan.steps:
                found = record.steps.get(step.id) if record else None
                states[step.id] = (
                    "verified"
                    if found and found.proven
                    else str(found.status)
                    if found
                    else "pending"
                )
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
                            "status": str(s.status) if s else "no evidence",
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
            previous = _previous(repo, record)
            if previous is not None:
                for sid, s in record.steps.items():
                    earlier = previous.steps.get(sid)
                    before = str(earlier.status) if earlier else None
                    if before != s.status:
                        entry["changes"].append({"step": sid, "before": before, "after": s.status})
                entry["previous_run"] = previous.commit
        plans.append(entry)
    return result, {"verdict": result.verdict, "tree": result.tree, "plans": plans}


def markdown(doc: dict[str, Any]) -> str:
    icon = {"PASS": "✅", "FAIL": "❌", "UNKNOWN": "❔"}
    out = [
        f"## gitaudit: {icon.get(doc['verdict'], '')} {doc['verdict']}",
        "",
        f"Tree `{doc['tree']}`",
        "",
    ]
    for entry in doc["plans"]:
        plan = entry["plan"]
        out.append(f"### Plan `{plan['name']}`: {plan['verdict']}")
        if plan.get("run"):
            out.append(
                f"Evidence: run commit `{plan['run']}` (`git audit show {plan['run'][:12]}`)"
            )
        for reason in plan["reasons"]:
            out.append(f"- {reason['message']} — fix: `{reason['hint']}`")
        for note in plan.get("notes", []):
            out.append(f"- note: {note}")
        out.append("")
        if entry["requirements"]:
            out += [
                "| requirement | step | status | evidence | exit codes | seconds |",
                "|---|---|---|---|---|---|",
            ]
            for req in entry["requirements"]:
                for i, row in enumerate(
                    req["steps"]
                    or [
                        {
                            "step": "—",
                            "status": "uncovered",
                            "evidence": "",
                            "exit_codes": [],
                            "seconds": "",
                        }
                    ]
                ):
                    name = f"{req['id']} ({req['priority']})" if i == 0 else ""
                    ev = f"`{row['evidence'][:12]}`" if row["evidence"] else ""
                    codes = ", ".join("—" if c is None else str(c) for c in row["exit_codes"])
                    out.append(
                        f"| {name} | {row['step']} | {row['status']} | {ev} | {codes} "
                        f"| {row['seconds']} |"
                    )
            out.append("")
        if entry["changes"]:
            out.append(f"Changed since the previous run (`{entry['previous_run'][:12]}`):")
            out += [f"- step {c['step']}: {c['before']} → {c['after']}" for c in entry["changes"]]
            out.append("")
        if entry["graph"]:
            out += ["```mermaid", entry["graph"].rstrip(), "```", ""]
    return "\n".join(out)
