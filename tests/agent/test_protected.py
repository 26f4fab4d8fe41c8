"""protected_paths: the files the plans' checks run, from the work tree's and the sealed plans."""

from __future__ import annotations

from typing import Any

from gitaudit.agent.protected import PYTEST_STEERING, matches, protected_paths
from tests.agent.host import PLAN
from tests.gitrepo import GitRepo


def plan_with(*checks: dict[str, Any]) -> dict[str, Any]:
    step = {"id": "s", "depends_on": [], "covers": ["REQ-1"], "verify": list(checks)}
    return {**PLAN, "steps": [step]}


def test_run_and_exec_checks_protect_the_files_they_name(repo: GitRepo) -> None:
    repo.write("tools/check.sh", "#!/bin/sh\n", mode=0o755)
    repo.write("tools/data.txt", "x\n")
    repo.write("sub/run.py", "print(1)\n")
    repo.write_plan(
        plan_with(
            {"type": "run", "argv": ["python3", "tools/check.sh", "--data=tools/data.txt"]},
            {"type": "exec", "path": "tools/check.sh", "args": ["missing.txt", "/etc/passwd"]},
            {"type": "run", "argv": ["python3", "run.py"], "cwd": "sub"},
            {"type": "run", "cmd": "sh tools/check.sh > /dev/null", "shell": True},
            {"type": "regex", "path": "README.md", "pattern": "x"},
        )
    )
    assert protected_paths(str(repo.path)) == ["sub/run.py", "tools/check.sh", "tools/data.txt"]


def test_pytest_checks_protect_what_steers_pytest_and_the_tests_they_pass(repo: GitRepo) -> None:
    repo.write("tests/unit/test_a.py", "def test_a(): pass\n")
    repo.write("tests/test_b.py", "def test_b(): pass\n")
    repo.write_plan(
        plan_with(
            {"type": "pytest", "argv": ["-q", "tests/unit", "tests/test_b.py::test_b"]},
        )
    )
    found = protected_paths(str(repo.path))
    assert set(PYTEST_STEERING) <= set(found)
    assert "tests/test_b.py" in found
    assert matches("tests/unit/deep/test_x.py", found) == "tests/unit/**/test_*.py"
    assert matches("tests/unit/helpers.py", found) is None
    assert matches("src/conftest.py", found) == "**/conftest.py"
    assert matches("conftest.py", found) == "**/conftest.py"
    assert matches("tox.ini", found) == "tox.ini"


def test_a_run_check_that_runs_pytest_counts_as_one(repo: GitRepo) -> None:
    repo.write("tests/test_b.py", "def test_b(): pass\n")
    repo.write_plan(plan_with({"type": "run", "argv": ["python3", "-m", "pytest", "tests"]}))
    found = protected_paths(str(repo.path))
    assert "pyproject.toml" in found and matches("tests/test_b.py", found)


def test_sealed_plans_count_even_when_the_work_tree_copy_is_gone(repo: GitRepo) -> None:
    from tests.agent.host import sealed_project

    project = sealed_project(repo.path.parent / "sealed")
    (project.path / ".gitaudit" / "plans" / "default.json").unlink()
    assert protected_paths(str(project.path)) == ["tests/check_greeting.py"]


def test_garbage_plans_protect_nothing_and_do_not_fail(repo: GitRepo) -> None:
    repo.write(".gitaudit/plans/broken.json", "{not json")
    repo.write(".gitaudit/plans/odd.json", '{"steps": [1, {"verify": "x"}, {"verify": [2]}]}')
    assert protected_paths(str(repo.path)) == []


def test_paths_outside_the_tree_and_in_git_are_not_patterns(repo: GitRepo) -> None:
    repo.write_plan(
        plan_with({"type": "run", "argv": ["cat", "../outside", ".git/config", "/etc/hosts"]})
    )
    assert protected_paths(str(repo.path)) == []


def test_glob_characters_in_file_names_are_literal(repo: GitRepo) -> None:
    repo.write("odd[1]*.py", "x\n")
    repo.write_plan(plan_with({"type": "run", "argv": ["python3", "odd[1]*.py"]}))
    found = protected_paths(str(repo.path))
    assert matches("odd[1]*.py", found) and not matches("odd1x.py", found)


def test_a_plans_protect_globs_are_protected(repo: GitRepo) -> None:
    """A plan's own ``protect`` globs (the sealed check surfaces of issue 13), read as written
    and with ``*`` also crossing folders; entries that are not globs are ignored."""
    repo.write_plan({**PLAN, "protect": ["fixtures/*.json", "/golden/", 7, ""]})
    found = protected_paths(str(repo.path))
    assert {"fixtures/*.json", "fixtures/**.json", "golden"} <= set(found)
    assert matches("fixtures/a.json", found) and matches("fixtures/deep/b.json", found)
    assert matches("golden", found) and matches("golden/deep/x.txt", found)
    assert not matches("src/a.json", found)
