"""Artifacts (junit.xml and the like): declared in the plan and sealed, stored in the run
commit's tree within the policy's size bound, listed by `show`, rendered by `show --format junit`
and `report` (failing test names, the output's tail, fixes for a pull request)."""

from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import GitRepo, audit
from tests.run.conftest import Sealer, make_plan, run_step

JUNIT = (
    '<testsuite name="unit"><testcase classname="tests.test_math" name="test_add" time="0.01"/>'
    '<testcase classname="tests.test_math" name="test_div" time="0.02">'
    '<failure message="ZeroDivisionError">Traceback: boom</failure></testcase></testsuite>'
)


def _junit_plan(repo: GitRepo, sealed: Sealer, exit_code: int = 1) -> None:
    repo.write(".gitignore", "reports/\nbig.bin\n")
    repo.write("write_report.sh", f"mkdir -p reports\nprintf '%s' '{JUNIT}' > reports/junit.xml\n")
    script = f"sh write_report.sh; echo collected 2 items; echo 1 failed >&2; exit {exit_code}"
    sealed(
        make_plan(
            run_step(
                "test",
                "sh",
                "-c",
                script,
                title="Unit tests",
                artifacts=["reports/junit.xml", "reports/absent.xml"],
            )
        )
    )


def test_artifacts_are_stored_listed_and_sealed(repo: GitRepo, sealed: Sealer) -> None:
    _junit_plan(repo, sealed)
    assert audit(repo.path, "run").code == 1
    stored = repo.git("show", "refs/audit/runs/default:steps/test/artifacts/reports/junit.xml")
    assert stored == JUNIT
    entry = json.loads(repo.git("show", "refs/audit/runs/default:run.json"))["steps"]["test"]
    assert entry["artifacts"] == [
        {
            "path": "reports/junit.xml",
            "output": None,
            "bytes": len(JUNIT),
            "stored": True,
            "problem": None,
        },
        {
            "path": "reports/absent.xml",
            "output": None,
            "bytes": None,
            "stored": False,
            "problem": "missing",
        },
    ]
    shown = audit(repo.path, "show")
    assert "artifacts:" in shown.out
    assert "test: reports/junit.xml (" in shown.out and "steps/test/artifacts/" in shown.out
    assert "test: reports/absent.xml: not stored (missing)" in shown.out
    assert "test: reports/junit.xml" in audit(repo.path, "show", "--step", "test").out
    # declared artifacts are part of the contract: changing them needs a new seal
    plan = json.loads((repo.path / ".gitaudit/plans/default.json").read_text())
    plan["steps"][0]["artifacts"] = ["reports/junit.xml"]
    repo.write_plan(plan)
    refused = audit(repo.path, "run")
    assert refused.code == 1 and "differs from its seal" in refused.err
    assert "artifacts" in audit(repo.path, "plan", "diff").out


def test_the_policy_bounds_the_size_of_an_artifact(repo: GitRepo, sealed: Sealer) -> None:
    repo.write(".gitignore", "big.bin\n")
    sealed(
        make_plan(
            run_step("big", "sh", "-c", "head -c 5000 /dev/zero > big.bin", artifacts=["big.bin"])
        )
    )
    assert audit(repo.path, "trust", "policy", "--max-artifact-bytes", "1000").code == 0
    assert audit(repo.path, "plan", "seal").code == 0
    assert audit(repo.path, "run").code == 0
    entry = json.loads(repo.git("show", "refs/audit/runs/default:run.json"))["steps"]["big"]
    assert entry["artifacts"][0]["problem"] == "too-large"
    assert entry["artifacts"][0]["bytes"] == 5000
    names = repo.git("ls-tree", "-r", "--name-only", "refs/audit/runs/default")
    assert "artifacts" not in names


def test_an_artifact_outside_the_repository_is_refused_at_validation(
    repo: GitRepo, sealed: Sealer
) -> None:
    repo.write_plan(make_plan(run_step("a", "true", artifacts=["../secret.txt"])))
    result = audit(repo.path, "plan", "validate")
    assert result.code == 1 and "path.escapes-workspace" in result.out + result.err


def test_show_format_junit(repo: GitRepo, sealed: Sealer) -> None:
    _junit_plan(repo, sealed)
    assert audit(repo.path, "run").code == 1
    result = audit(repo.path, "show", "--format", "junit")
    assert result.code == 0, result.err
    root = ET.fromstring(result.out)
    assert root.tag == "testsuites" and root.get("failures") == "3"
    suite, run = root.findall("testsuite")
    assert run.get("name") == "run" and run.find("testcase[@name='verdict']/failure") is not None
    assert suite.get("name") == "test (Unit tests)"
    cases = suite.findall("testcase")
    own = cases[0]
    assert own.get("classname") == "default.test" and own.get("name", "").startswith("run: sh")
    failure = own.find("failure")
    assert failure is not None and "exit code 1" in (failure.get("message") or "")
    assert "collected 2 items" in (failure.text or "") and "1 failed" in (failure.text or "")
    names = [c.get("name") for c in cases[1:]]
    assert names == ["test_add", "test_div"]
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["gitaudit.run"] == repo.git("rev-parse", "refs/audit/runs/default").strip()


def test_show_format_junit_marks_blocked_steps_skipped(repo: GitRepo, sealed: Sealer) -> None:
    sealed(
        make_plan(
            run_step("a", "false", outputs={"o": "README.md"}),
            run_step("b", "true", deps=["a"], requires=[("a", "o")]),
        )
    )
    assert audit(repo.path, "run").code == 1
    root = ET.fromstring(audit(repo.path, "show", "--format", "junit").out)
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert suites["b"].find("testcase/skipped") is not None
    assert root.get("skipped") == "1"


def test_report_names_failing_tests_and_pr_fixes(repo: GitRepo, sealed: Sealer) -> None:
    _junit_plan(repo, sealed)
    assert audit(repo.path, "run").code == 1
    head = repo.git("rev-parse", "HEAD").strip()
    report = audit(repo.path, "report", "HEAD")
    assert report.code == 1
    assert f"Commit `{head}`, tree `" in report.out
    assert "Failing tests:" in report.out and "`tests.test_math.test_div`" in report.out
    assert "<details><summary>Output (last lines)</summary>" in report.out
    assert "commit and push" in report.out  # a fix that makes sense in a pull request
    run = repo.git("rev-parse", "refs/audit/runs/default").strip()
    assert f"run commit `{run}` on `refs/audit/runs/default`" in report.out
    doc = audit(repo.path, "report", "--format", "json").json()
    failure = doc["plans"][0]["failures"][0]
    assert failure["failing_tests"] == ["tests.test_math.test_div"]
    assert doc["commit"] == head


def test_report_without_junit_shows_the_output_tail(repo: GitRepo, sealed: Sealer) -> None:
    sealed(make_plan(run_step("lint", "sh", "-c", "echo 'E501 line too long' >&2; exit 1")))
    assert audit(repo.path, "run").code == 1
    doc = audit(repo.path, "report", "--format", "json").json()
    failure = doc["plans"][0]["failures"][0]
    assert failure["failing_tests"] == [] and "E501 line too long" in failure["output_tail"]


def test_report_format_github_writes_the_job_summary(
    repo: GitRepo, sealed: Sealer, tmp_path: Path
) -> None:
    sealed(make_plan(run_step("lint", "false")))
    assert audit(repo.path, "run").code == 1
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    result = audit(
        repo.path, "report", "--format", "github", env={"GITHUB_STEP_SUMMARY": str(summary)}
    )
    assert result.code == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n") and "## gitaudit: ❌ FAIL" in text
    assert result.out.startswith("::error title=gitaudit default::step lint failed")
    fresh = audit(repo.path, "report", "--format", "github")  # no summary file: stdout
    assert "## gitaudit: ❌ FAIL" in fresh.out


def test_an_artifact_is_read_through_no_link_made_after_it_was_confined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The artifact is opened along the path it was confined to, following no link: a file or a
    folder replaced by a link since (to outside the checkout) is not read; a FIFO is not waited
    on; a link inside the checkout made before the run still leads to its file."""
    from gitaudit.checks import paths
    from gitaudit.run import artifacts

    root, outside = tmp_path / "checkout", tmp_path / "home"
    (root / "reports").mkdir(parents=True)
    outside.mkdir()
    (outside / "key").write_bytes(b"SECRET")
    (root / "reports" / "key").write_bytes(b"<testsuite/>")
    (root / "linked").symlink_to("reports/key")
    assert artifacts._read(root, "linked", None, 100).data == b"<testsuite/>"
    assert artifacts._read(root, "reports/key", None, 100).data == b"<testsuite/>"
    os.mkfifo(root / "fifo")
    assert artifacts._read(root, "fifo", None, 100).problem == "not-a-file"

    def then_linked(folder: Path, rel: str, **kw: Any) -> Path:
        target = paths.confine(folder, rel, **kw)
        shutil.rmtree(root / "reports")
        (root / "reports").symlink_to(outside)
        return target

    monkeypatch.setattr("gitaudit.run.artifacts.confine", then_linked)
    found = artifacts._read(root, "reports/key", None, 100)
    assert found.data is None and found.problem == "not-a-file"


def test_an_artifact_is_read_only_under_the_checkout_resolved_before_the_checks(
    tmp_path: Path,
) -> None:
    """The checkout moved aside and replaced by a link to another folder after it was resolved:
    an artifact is not read from there (it would be confined to that folder)."""
    from gitaudit.run import artifacts

    root, outside = tmp_path / "checkout", tmp_path / "home"
    root.mkdir()
    outside.mkdir()
    (outside / "key").write_bytes(b"SECRET")
    (root / "key").write_bytes(b"<testsuite/>")
    (resolved,) = artifacts.resolved_roots(root)
    assert artifacts._read(resolved, "key", None, 100).data == b"<testsuite/>"
    root.rename(tmp_path / "moved")
    root.symlink_to(outside)
    found = artifacts._read(resolved, "key", None, 100)
    assert found.data is None and found.problem == "outside-the-workspace"
