"""action.yml, the composite GitHub Action, run locally: each step's `run:` script executes with
bash as the runner would (`bash --noprofile --norc -eo pipefail`), its `env:` and `if:`
expressions evaluated from the inputs, in a fresh clone, against a real bare origin."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from gitaudit.crypto.keystore import keys_dir
from tests.gitrepo import GitRepo, audit, git
from tests.run.conftest import Sealer, make_plan, run_step

ROOT = Path(__file__).resolve().parents[2]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def _value(term: str, context: dict[str, Any]) -> str:
    term = term.strip()
    if term.startswith("'") and term.endswith("'"):
        return term[1:-1]
    node: Any = context
    for part in term.split("."):
        node = node.get(part, "") if isinstance(node, dict) else ""
    return str(node or "")


def _evaluate(expression: str, context: dict[str, Any]) -> str:
    """The subset of GitHub's expression language action.yml uses: a.b.c, 'x', ||, ==, !=."""
    for op in ("==", "!="):
        if op in expression:
            left, right = expression.split(op, 1)
            same = _value(left, context) == _value(right, context)
            return "true" if same == (op == "==") else ""
    for term in expression.split("||"):
        found = _value(term, context)
        if found:
            return found
    return ""


def _substitute(text: str, context: dict[str, Any]) -> str:
    return _EXPR.sub(lambda m: _evaluate(m.group(1), context), text)


def run_action(
    cwd: Path, inputs: dict[str, str], workdir: Path
) -> tuple[list[tuple[str, int, str]], dict[str, str], str]:
    """Run the action's steps in *cwd*: (name, exit code, output) per step that ran, the step
    outputs written to GITHUB_OUTPUT, and the job summary. What a step adds to $GITHUB_PATH
    comes first on the later steps' PATH, as on the runner."""
    declared = {k: str(v.get("default", "")) for k, v in ACTION["inputs"].items()}
    context = {
        "inputs": {**declared, **inputs},
        "github": {"action_path": str(ROOT), "sha": "", "event": {}},
    }
    summary, outputs_file = workdir / "summary.md", workdir / "outputs"
    path_file = workdir / "github-path"  # $GITHUB_PATH: what a step adds to the next steps' PATH
    summary.write_text("")
    results: list[tuple[str, int, str]] = []
    outputs: dict[str, str] = {}
    added: list[str] = []
    for step in ACTION["runs"]["steps"]:
        condition = step.get("if")
        if condition and not _evaluate(condition, context):
            continue
        assert step["shell"] == "bash"
        outputs_file.write_text("")
        path_file.write_text("")
        env = {
            **os.environ,
            "PATH": ":".join([*added, str(Path(sys.executable).parent), os.environ["PATH"]]),
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_OUTPUT": str(outputs_file),
            "GITHUB_PATH": str(path_file),
            "RUNNER_TEMP": str(workdir),
            **{k: _substitute(str(v), context) for k, v in step.get("env", {}).items()},
        }
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        results.append((step["name"], proc.returncode, proc.stdout + proc.stderr))
        for line in outputs_file.read_text().splitlines():
            key, _, value = line.partition("=")
            outputs[key] = value
        added[:0] = reversed([line for line in path_file.read_text().splitlines() if line])
        if proc.returncode != 0:
            break
    return results, outputs, summary.read_text()


def _published(repo: GitRepo, sealed: Sealer, tmp_path: Path) -> tuple[Path, str, str]:
    """A sealed plan pushed with its audit refs to a bare origin, and a fresh CI clone."""
    sealed(make_plan(run_step("greet", "grep", "-q", "sample", "README.md")))
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    repo.git("remote", "add", "origin", str(origin))
    repo.git("push", "-q", "origin", "main", "refs/audit/plans:refs/audit/plans")
    clone = tmp_path / "ci"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    root_key = repo.git("config", "audit.rootKey").strip()
    head = repo.git("rev-parse", "HEAD").strip()
    return clone, root_key, head


def test_the_action_runs_the_plan_with_the_runner_key_and_passes(
    repo: GitRepo, sealed: Sealer, tmp_path: Path
) -> None:
    clone, root_key, head = _published(repo, sealed, tmp_path)
    runner_key = (keys_dir() / "default").read_text()
    steps, outputs, summary = run_action(
        clone,
        {
            "install": "skip",
            "rev": head,
            "root-key": root_key,
            "run": "true",
            "runner-key": runner_key,
        },
        tmp_path,
    )
    names = [name for name, _, _ in steps]
    assert names == [
        "Fetch the audit refs",
        "Pin the root of trust",
        "Run the sealed plans",
        "Report",
        "Gate",
    ]
    assert all(code == 0 for _, code, _ in steps), steps
    assert "default: PASS" in steps[2][2]
    assert outputs["verdict"] == "PASS"
    assert "## gitaudit: ✅ PASS" in summary
    assert git(clone, "config", "audit.rootKey").strip() == root_key
    assert not list(tmp_path.glob("gitaudit.*")), "the runner key was left on disk"


def test_the_action_fails_the_job_without_evidence(
    repo: GitRepo, sealed: Sealer, tmp_path: Path
) -> None:
    clone, root_key, head = _published(repo, sealed, tmp_path)
    steps, outputs, summary = run_action(
        clone, {"install": "skip", "rev": head, "root-key": root_key}, tmp_path
    )
    assert [n for n, _, _ in steps][-1] == "Gate"
    assert steps[-1][1] == 3 and outputs["verdict"] == "UNKNOWN"
    assert "::warning title=gitaudit default::" in steps[-2][2]  # the report's annotation
    assert "UNKNOWN" in summary
    # gate: false reports without failing the job
    steps, outputs, _ = run_action(
        clone, {"install": "skip", "rev": head, "root-key": root_key, "gate": "false"}, tmp_path
    )
    assert steps[-1][1] == 0 and outputs["verdict"] == "UNKNOWN"


def test_run_without_a_key_is_an_error(repo: GitRepo, sealed: Sealer, tmp_path: Path) -> None:
    clone, root_key, head = _published(repo, sealed, tmp_path)
    steps, _, _ = run_action(
        clone, {"install": "skip", "run": "true", "rev": head, "root-key": root_key}, tmp_path
    )
    assert steps[-1][0] == "Run the sealed plans" and steps[-1][1] == 1
    assert "needs runner-key" in steps[-1][2]


def test_every_input_reaches_scripts_through_env_only() -> None:
    for step in ACTION["runs"]["steps"]:
        assert "${{" not in step["run"], step["name"]
    assert audit(ROOT, "--version").code == 0


def test_the_action_refuses_to_judge_without_a_root_key(
    repo: GitRepo, sealed: Sealer, tmp_path: Path
) -> None:
    """A fresh clone has no trust anchor: without the pin there is no verdict to give."""
    clone, _, head = _published(repo, sealed, tmp_path)
    steps, outputs, _ = run_action(clone, {"install": "skip", "rev": head}, tmp_path)
    assert [(n, c) for n, c, _ in steps][-1] == ("Pin the root of trust", 1)
    assert "::error title=gitaudit::the input root-key is empty" in steps[-1][2]
    assert "verdict" not in outputs
    assert git(clone, "config", "--get", "audit.rootKey", check=False).strip() == ""
