"""The plan commands through the real entry point, in real repositories."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gitaudit.cli.manpage import generate
from tests.gitrepo import GitRepo, audit
from tests.plan.builders import fixture, two_step_plan

ROOT = Path(__file__).resolve().parents[2]


def test_init_onboards_once_and_never_overwrites(repo: GitRepo) -> None:
    first = audit(repo.path, "init")
    assert first.code == 0, first.err
    plan = repo.path / ".gitaudit/plans/default.json"
    assert plan.is_file()
    assert audit(repo.path, "plan", "validate").code == 0
    for line in (
        "plan: created",
        "key: generated",
        "trust: initialised",
        "hooks: pre-push: installed",
    ):
        assert line in first.out
    plan.write_text(plan.read_text().replace("Describe in one line", "Mine"))
    again = audit(repo.path, "init")
    assert again.code == 0
    for line in (
        "plan: found default (template skipped)",
        "(skipped generating one)",
        "trust: refs/audit/plans exists (skipped)",
        "pre-push: current",
    ):
        assert line in again.out
    assert "Mine" in plan.read_text()


def test_validate_reports_every_problem_with_fix_and_exit_1(repo: GitRepo) -> None:
    plan = two_step_plan()
    plan["steps"][0]["covers"] = ["REQ-404"]
    del plan["steps"][1]["requires_outputs"]
    repo.write_plan(plan)
    result = audit(repo.path, "plan", "validate")
    assert result.code == 1
    assert "covers.unknown-requirement" in result.out
    assert "dep.no-output-contract" in result.out
    assert "requirement.uncovered" in result.out
    assert result.out.count("fix:") >= 3


def test_validate_json_lists_problems(repo: GitRepo) -> None:
    repo.write_plan(two_step_plan(), "good")
    bad = two_step_plan()
    bad["steps"][1]["depends_on"] = ["ghost"]
    repo.write_plan(bad, "bad")
    result = audit(repo.path, "plan", "validate", "--json")
    assert result.code == 1
    doc = result.json()
    by_name = {p["plan"]: p for p in doc["plans"]}
    assert by_name["good"]["valid"] and by_name["good"]["digest"].startswith("sha256:")
    problem = next(p for p in by_name["bad"]["problems"] if p["code"] == "dep.unknown-step")
    assert set(problem) >= {"plan", "path", "code", "message", "hint"}
    assert problem["path"] == "$.steps[1].depends_on[0]"
    assert problem["plan"] == "bad"
    only_good = audit(repo.path, "plan", "validate", "--plan", "good", "--json")
    assert only_good.code == 0 and [p["plan"] for p in only_good.json()["plans"]] == ["good"]


def test_malformed_json_is_one_line_with_position(repo: GitRepo) -> None:
    repo.write(".gitaudit/plans/default.json", '{"steps": [\n')
    result = audit(repo.path, "plan", "validate")
    assert result.code == 1
    assert "invalid JSON at line 2" in result.out
    assert "Traceback" not in result.out + result.err


def test_environment_section(repo: GitRepo) -> None:
    plan = two_step_plan()
    plan["required_tools"] = ["no-such-tool-abc"]
    repo.write_plan(plan)
    result = audit(repo.path, "plan", "validate")
    assert result.code == 0
    assert "environment (this machine, not the plan):" in result.out
    assert "no-such-tool-abc" in result.out


def test_show_lists_requirements_steps_and_digest(repo: GitRepo) -> None:
    repo.write_plan(fixture("plans/release-mission.json"))
    result = audit(repo.path, "plan", "show")
    assert result.code == 0, result.err
    assert "REQ-RES [must]" in result.out and "<- steps residency_evidence" in result.out
    assert "depends on: any_of(provider_attestation, independent_test)" in result.out
    steps = result.out.split("steps (dependency order):")[1]
    assert steps.index("freeze_candidate") < steps.index("risk_approval") < steps.index("release (")
    doc = audit(repo.path, "plan", "show", "--json").json()["plans"][0]
    assert doc["digest"].startswith("sha256:")
    order = [s["id"] for s in doc["steps"]]
    assert order.index("residency_evidence") > order.index("independent_test")


def test_show_refuses_an_invalid_plan(repo: GitRepo) -> None:
    plan = two_step_plan()
    plan["steps"][1]["depends_on"] = ["ghost"]
    repo.write_plan(plan)
    result = audit(repo.path, "plan", "show")
    assert result.code == 1
    assert result.err.startswith("error: .gitaudit/plans/default.json: $.steps[1].depends_on[0]")
    assert "hint: run `git audit plan validate --plan default`" in result.err


@pytest.mark.parametrize(
    ("fmt", "marker"), [("mermaid", "flowchart LR"), ("dot", "digraph"), ("text", "# default")]
)
def test_graph_formats(repo: GitRepo, fmt: str, marker: str) -> None:
    repo.write_plan(fixture("plans/model-artifact.json"))
    result = audit(repo.path, "plan", "graph", "--format", fmt)
    assert result.code == 0, result.err
    assert marker in result.out


def test_usage_errors_exit_2(repo: GitRepo) -> None:
    repo.write_plan(two_step_plan())
    unknown_plan = audit(repo.path, "plan", "validate", "--plan", "nope")
    assert unknown_plan.code == 2 and "no plan named 'nope'" in unknown_plan.err
    assert audit(repo.path, "plan", "graph", "--format", "png").code == 2
    assert audit(repo.path, "no-such-command").code == 2


def test_outside_a_repository(tmp_path: Path) -> None:
    result = audit(tmp_path, "plan", "validate")
    assert result.code == 1
    assert "is not inside a git repository" in result.err
    assert "Traceback" not in result.err


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = audit(tmp_path, "--debug", "plan", "validate", process=True)
    assert result.code != 0 and "Traceback" in result.err


def test_help_everywhere(repo: GitRepo) -> None:
    for args in (
        ["-h"],
        ["--help"],
        ["plan", "-h"],
        ["plan", "validate", "-h"],
        ["init", "--help"],
    ):
        result = audit(repo.path, *args)
        assert result.code == 0, (args, result.err)
        assert "Usage" in result.out


def test_console_scripts_and_git_subcommand(repo: GitRepo) -> None:
    bindir = Path(sys.executable).parent
    for script in ("git-audit", "gitaudit"):
        proc = subprocess.run(
            [bindir / script, "--version"], capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0 and proc.stdout.startswith("gitaudit ")
    env_path = f"{bindir}:{os.environ['PATH']}"
    proc = subprocess.run(
        ["git", "audit", "--version"],
        cwd=repo.path,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PATH": env_path},
    )
    assert proc.returncode == 0 and proc.stdout.startswith("gitaudit ")


def test_shipped_man_page_is_current() -> None:
    shipped = (ROOT / "man" / "git-audit.1").read_text()
    assert shipped == generate(), "run `make manpage` and commit man/git-audit.1"


def test_git_help_audit_finds_the_man_page(repo: GitRepo) -> None:
    """`git audit --help` becomes `git help audit`, i.e. `man git-audit`: man must find our page
    through the PATH of the installed script (man maps <prefix>/bin to <prefix>/share/man)."""
    bindir = Path(sys.executable).parent
    manpage = bindir.parent / "share" / "man" / "man1" / "git-audit.1"
    assert manpage.is_file(), "the wheel installs git-audit.1 next to the scripts"
    env = {
        **os.environ,
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "MANPAGER": "cat",
        "PAGER": "cat",
    }
    if shutil.which("man") is None:
        pytest.fail("man(1) is needed for this test; .ci/run installs man-db")
    found = subprocess.run(
        ["man", "-w", "git-audit"], capture_output=True, text=True, env=env, check=False
    )
    assert Path(found.stdout.strip()).resolve() == manpage.resolve()
    proc = subprocess.run(
        ["git", "audit", "--help"],
        cwd=repo.path,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_init_refuses_a_plan_name_that_escapes(repo: GitRepo) -> None:
    result = audit(repo.path, "init", "--plan", "../../evil")
    assert result.code == 2 and "not allowed" in result.err
    assert not (repo.path.parent / "evil.json").exists()


def test_show_lists_the_protected_files(repo: GitRepo) -> None:
    plan = two_step_plan()
    plan["steps"][0]["verify"] = [{"type": "run", "argv": ["sh", "tools/check.sh", "out.txt"]}]
    plan["protect"] = ["fixtures/**"]
    repo.write_plan(plan)
    repo.write("tools/check.sh", "exit 0\n")
    repo.write("fixtures/a.json", "{}\n")
    repo.write("out.txt", "work\n")
    result = audit(repo.path, "plan", "show")
    assert result.code == 0, result.err
    assert "protected files (2): fixtures/a.json, tools/check.sh" in result.out
    doc = audit(repo.path, "plan", "show", "--json").json()["plans"][0]
    assert doc["protected"] == ["fixtures/a.json", "tools/check.sh"]
