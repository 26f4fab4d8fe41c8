"""protection(): the guard protects what the seal protects (gitaudit.plan.protect's rules), read
from the work tree's plans and the sealed ones, leniently."""

from __future__ import annotations

from typing import Any

from gitaudit.agent.protected import protection
from tests.agent.host import PLAN
from tests.gitrepo import GitRepo


def plan_with(*checks: dict[str, Any], **extra: Any) -> dict[str, Any]:
    step = {"id": "s", "depends_on": [], "covers": ["REQ-1"], "verify": list(checks)}
    return {**PLAN, "steps": [step], **extra}


def protected(repo: GitRepo, *paths: str) -> dict[str, bool]:
    rules = protection(str(repo.path))
    return {p: rules.why(p) is not None for p in paths}


def test_run_and_exec_checks_protect_what_they_run_not_what_they_inspect(repo: GitRepo) -> None:
    repo.write_plan(
        plan_with(
            {"type": "run", "argv": ["python3", "tools/check.py", "--data=tools/data.txt"]},
            {"type": "exec", "path": "tools/verify", "args": ["out.txt"]},
            {"type": "run", "argv": ["python3", "run.py"], "cwd": "sub"},
            {"type": "run", "cmd": "sh tools/check.sh > /dev/null && true", "shell": True},
            {"type": "run", "argv": ["grep", "-q", "hello", "greeting.txt"]},
            {"type": "regex", "path": "README.md", "pattern": "x"},
        )
    )
    assert protected(
        repo,
        "tools/check.py",
        "tools/data.txt",
        "tools/verify",
        "sub/run.py",
        "tools/check.sh",
        "out.txt",
        "greeting.txt",
        "README.md",
    ) == {
        "tools/check.py": True,
        "tools/data.txt": True,
        "tools/verify": True,
        "sub/run.py": True,
        "tools/check.sh": True,
        "out.txt": False,  # what the check inspects: the work
        "greeting.txt": False,
        "README.md": False,
    }


def test_pytest_checks_protect_what_steers_pytest_and_the_tests_they_pass(repo: GitRepo) -> None:
    repo.write_plan(plan_with({"type": "pytest", "args": "-q tests/unit tests/test_b.py::test_b"}))
    assert protected(
        repo,
        "tests/test_b.py",
        "tests/unit/deep/test_x.py",
        "tests/unit/helpers.py",
        "src/conftest.py",
        "tox.ini",
        "pytest.py",
        "src/app.py",
    ) == {
        "tests/test_b.py": True,
        "tests/unit/deep/test_x.py": True,
        "tests/unit/helpers.py": True,  # a test path folder: all of it
        "src/conftest.py": True,
        "tox.ini": True,
        "pytest.py": True,  # would shadow pytest
        "src/app.py": False,
    }


def test_a_run_check_that_runs_pytest_counts_as_one(repo: GitRepo) -> None:
    repo.write_plan(plan_with({"type": "run", "argv": ["python3", "-m", "pytest", "tests"]}))
    assert protected(repo, "pyproject.toml", "tests/test_b.py", "app.py") == {
        "pyproject.toml": True,
        "tests/test_b.py": True,
        "app.py": False,
    }


def test_sealed_plans_count_even_when_the_work_tree_copy_is_gone(repo: GitRepo) -> None:
    from tests.agent.host import sealed_project

    project = sealed_project(repo.path.parent / "sealed")
    (project.path / ".gitaudit" / "plans" / "default.json").unlink()
    assert protected(project, "tests/check_greeting.py") == {"tests/check_greeting.py": True}


def test_garbage_plans_protect_nothing_and_do_not_fail(repo: GitRepo) -> None:
    repo.write(".gitaudit/plans/broken.json", "{not json")
    repo.write(".gitaudit/plans/odd.json", '{"steps": [1, {"verify": "x"}, {"verify": [2]}]}')
    assert protection(str(repo.path)).why("anything.py") is None


def test_paths_outside_the_tree_are_not_protected(repo: GitRepo) -> None:
    repo.write_plan(plan_with({"type": "run", "argv": ["sh", "../outside.sh"]}))
    rules = protection(str(repo.path))
    assert rules.why("outside.sh") is None and rules.why("../outside.sh") is None


def test_glob_characters_in_file_names_are_literal(repo: GitRepo) -> None:
    repo.write_plan(plan_with({"type": "run", "argv": ["python3", "odd[1]*.py"]}))
    assert protected(repo, "odd[1]*.py", "odd1x.py") == {"odd[1]*.py": True, "odd1x.py": False}


def test_a_plans_protect_globs_and_exemptions(repo: GitRepo) -> None:
    """A plan's own ``protect`` globs, git's glob rules; ``!`` exempts (the work itself);
    entries that are not strings are ignored."""
    repo.write_plan(
        plan_with(
            {"type": "run", "argv": ["python3", "greeter.py"]},
            protect=["fixtures/*.json", "golden", "!greeter.py", 7, ""],
        )
    )
    assert protected(
        repo,
        "fixtures/a.json",
        "fixtures/deep/b.json",
        "golden/x/y.txt",
        "greeter.py",
        "src/a.json",
    ) == {
        "fixtures/a.json": True,
        "fixtures/deep/b.json": False,  # `*` stays within a folder, as git's globs
        "golden/x/y.txt": True,
        "greeter.py": False,  # exempted: the greeter is the work
        "src/a.json": False,
    }
