"""Which files a plan protects: the pure rules of gitaudit.plan.protect, on plans built by the
real loader and trees given as path lists."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gitaudit.plan.load import load_plan
from gitaudit.plan.model import Check, Plan
from gitaudit.plan.protect import (
    PYTEST_CONFIG,
    SHADOWED,
    climbing_paths,
    matches,
    patterns,
    select,
)


def plan_of(*checks: dict[str, Any], protect: list[str] | None = None) -> Plan:
    doc: dict[str, Any] = {
        "task": "t",
        "requirements": [{"id": "R", "description": "r", "priority": "must"}],
        "steps": [{"id": "s", "title": "s", "covers": ["R"], "verify": list(checks)}],
    }
    if protect is not None:
        doc["protect"] = protect
    plan, problems = load_plan(json.dumps(doc).encode(), name="p", source="p.json")
    assert plan is not None, problems
    return plan


def protected(plan: Plan, tree: list[str]) -> list[str]:
    return select(patterns(plan), tree, lambda p: p in tree)


def run(*argv: str, **extra: Any) -> dict[str, Any]:
    return {"type": "run", "argv": list(argv), **extra}


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("tests", "tests/a/b.py", True),
        ("tests/", "tests/a.py", True),
        ("tests", "tests2/a.py", False),
        ("*.py", "a.py", True),
        ("*.py", "d/a.py", False),
        ("**/*.py", "d/e/a.py", True),
        ("**/*.py", "a.py", True),
        ("d/**", "d/e/f", True),
        ("d/?.txt", "d/a.txt", True),
        ("d/?.txt", "d/ab.txt", False),
        ("d/[ab].txt", "d/b.txt", True),
        ("d/[!ab].txt", "d/b.txt", False),
        ("./tests", "tests/x", True),
    ],
)
def test_git_glob_rules(pattern: str, path: str, expected: bool) -> None:
    assert matches(pattern, path) is expected


TREE = [
    "README.md",
    "greeter.py",
    "greeting.txt",
    "scripts/check.sh",
    "tools/check.py",
    "tools/lint/__main__.py",
    "tools/json.py",
    "rules.cfg",
    "Makefile",
    "package.json",
    "pytest.ini",
    "pkg/pyproject.toml",
    "pkg/tests/test_a.py",
    "pkg/tests/helpers.py",
    "pkg/src/mod.py",
    "conftest.py",
    "deep/x/conftest.py",
    "other/test_b.py",
    "other/b_test.py",
    "other/util.py",
    "pytest.py",
    "mylib.py",
]


def test_a_script_an_interpreter_runs_is_protected_its_operands_are_not() -> None:
    plan = plan_of(
        run("sh", "scripts/check.sh", "greeting.txt"), run("grep", "-q", "x", "README.md")
    )
    assert protected(plan, TREE) == ["scripts/check.sh"]


def test_program_paths_option_values_and_python_modules() -> None:
    plan = plan_of(
        run("./scripts/check.sh"),
        run("grep", "--file=rules.cfg", "README.md"),
        run("python3", "-m", "tools.lint"),
        {"type": "exec", "path": "tools/check.py", "args": ["greeting.txt"]},
    )
    got = protected(plan, TREE)
    assert {"scripts/check.sh", "rules.cfg", "tools/lint/__main__.py", "tools/check.py"} <= set(got)
    assert "greeting.txt" not in got and "README.md" not in got


def test_python_m_protects_what_python_runs_before_or_instead_of_the_module() -> None:
    """``python -m a.b.c``: the ``__init__.py`` of ``a`` and ``a/b`` run first, and a package
    ``a/b/c/`` is taken before the module ``a/b/c.py``; a sibling module is the work."""
    tree = [
        "a/__init__.py",
        "a/b/__init__.py",
        "a/b/c.py",
        "a/b/c/__init__.py",
        "a/b/other.py",
        "a/util.py",
    ]
    got = protected(plan_of(run("python3", "-m", "a.b.c")), tree)
    assert got == ["a/__init__.py", "a/b/__init__.py", "a/b/c.py", "a/b/c/__init__.py"]
    top = protected(plan_of(run("python3", "-m", "a", cwd=".")), ["a.py", "a/__init__.py", "b.py"])
    assert top == ["a.py", "a/__init__.py"]


def test_cwd_is_honoured() -> None:
    plan = plan_of(run("sh", "check.sh", cwd="scripts"))
    assert protected(plan, TREE) == ["scripts/check.sh"]


def test_python_script_folder_shadowing() -> None:
    """`python tools/check.py` puts tools/ first on sys.path: tools/json.py shadows json."""
    plan = plan_of(run("python3", "tools/check.py"))
    assert protected(plan, TREE) == ["tools/check.py", "tools/json.py"]
    isolated = plan_of(run("python3", "-I", "tools/check.py"))
    assert protected(isolated, TREE) == ["tools/check.py"]


def test_pytest_with_a_test_path() -> None:
    plan = plan_of({"type": "pytest", "argv": ["-q", "pkg/tests"]})
    got = protected(plan, TREE)
    assert got == [
        "conftest.py",
        "deep/x/conftest.py",
        "pkg/pyproject.toml",
        "pkg/tests/helpers.py",
        "pkg/tests/test_a.py",
        "pytest.ini",
        "pytest.py",
    ]


def test_pytest_discovery_without_a_path() -> None:
    got = protected(plan_of({"type": "pytest", "argv": ["-q"]}), TREE)
    assert "other/test_b.py" in got and "other/b_test.py" in got and "pkg/tests/test_a.py" in got
    assert "other/util.py" not in got and "mylib.py" not in got and "pkg/src/mod.py" not in got
    assert "pytest.py" in got  # shadows pytest itself


def test_python_m_pytest_in_a_run_check_is_read_like_pytest() -> None:
    got = protected(plan_of(run("python3", "-m", "pytest", "other")), TREE)
    assert {"other/test_b.py", "other/util.py", "conftest.py", "pytest.ini", "pytest.py"} <= set(
        got
    )


def test_tool_files() -> None:
    assert protected(plan_of(run("make", "test")), TREE) == ["Makefile"]
    assert protected(plan_of(run("npm", "test")), TREE) == ["package.json"]


def test_protect_globs_and_exemptions() -> None:
    plan = plan_of(
        {"type": "pytest", "argv": ["pkg/tests"]},
        protect=["other/**", "!pkg/tests/helpers.py", "!other/util.py"],
    )
    got = protected(plan, TREE)
    assert "other/b_test.py" in got and "other/util.py" not in got
    assert "pkg/tests/helpers.py" not in got and "pkg/tests/test_a.py" in got


def test_no_checks_that_run_files_protect_nothing() -> None:
    plan = plan_of({"type": "file_exists", "path": "greeting.txt"})
    assert patterns(plan).empty
    assert protected(plan, TREE) == []


def test_shadowed_names_cover_the_standard_library_and_pytest() -> None:
    assert {"json", "os", "re", "unittest", "pytest", "_pytest", "pluggy"} <= SHADOWED
    assert "mylib" not in SHADOWED


def test_climbing_paths_are_the_own_files_as_spelled_with_a_parent_step() -> None:
    """What the run must resolve as the system does (``..`` after a link): the check's own
    files joined to its cwd as written, only those with a ``..``; what is protected stays the
    lexical path."""
    checks = [
        run("python3", "../scripts/check.py", "../greeting.txt", cwd="app"),
        run("grep", "--file=../rules.cfg", "x", cwd="app"),
        run("sh", "tools/sub/../check.sh"),
        run("python3", "-m", "pytest", "../tests/test_a.py::t", cwd="app"),
        {"type": "pytest", "argv": ["-q", "../tests"], "cwd": "app"},
        run("sh", "scripts/check.sh", cwd="app"),
        run("/opt/tool/../bin/check", cwd="app"),
    ]
    got = [climbing_paths(load_check(c)) for c in checks]
    assert got == [
        ("app/../scripts/check.py",),
        ("app/../rules.cfg",),
        ("tools/sub/../check.sh",),
        ("app/../tests/test_a.py",),
        ("app/../tests",),
        (),
        (),
    ]
    assert protected(plan_of(checks[0]), ["scripts/check.py", "app/x"]) == ["scripts/check.py"]


def load_check(raw: dict[str, Any]) -> Check:
    (check,) = plan_of(raw).steps[0].verify
    return check


def test_an_exec_path_is_protected_from_the_root_whatever_its_cwd() -> None:
    """An exec path runs from the root of the workspace (it is confined from there), so it is
    protected there; its options' files are read from its cwd."""
    tree = ["bin/verify", "app/bin/verify", "app/rules.cfg", "rules.cfg"]
    exec_check = {"type": "exec", "path": "bin/verify", "args": ["--rules=rules.cfg"], "cwd": "app"}
    assert protected(plan_of(exec_check), tree) == ["app/rules.cfg", "bin/verify"]
    run_check = run("./bin/verify", "--rules=rules.cfg", cwd="app")  # a run check's: the cwd's
    assert protected(plan_of(run_check), tree) == ["app/bin/verify", "app/rules.cfg"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["sh", "-e", "scripts/check.sh", "greeting.txt"], ["scripts/check.sh"]),  # errexit
        (["bash", "-eo", "pipefail", "scripts/check.sh"], ["scripts/check.sh"]),
        (["bash", "+O", "extglob", "scripts/check.sh"], ["scripts/check.sh"]),
        (["sh", "-ec", "scripts/check.sh"], []),  # a cluster with -c: inline code
        (["python3", "-W", "error", "tools/check.py"], ["tools/check.py", "tools/json.py"]),
        (["python3", "-X", "dev", "-I", "tools/check.py"], ["tools/check.py"]),
        (["perl", "-e", "1", "x.pl"], []),  # perl's -e is inline code
        (["perl", "-c", "x.pl"], ["x.pl"]),  # and its -c checks a script's syntax
    ],
)
def test_the_script_is_the_first_operand_after_the_interpreters_options(
    argv: list[str], expected: list[str]
) -> None:
    """Options are read per interpreter: which take the next word (a shell's -o, python's -W)
    and which run inline code (a shell's -c, perl's -e); a shell's -e is errexit."""
    tree = ["scripts/check.sh", "tools/check.py", "tools/json.py", "x.pl", "error", "pipefail"]
    assert protected(plan_of(run(*argv)), [*tree, "greeting.txt", "extglob"]) == expected


@pytest.mark.parametrize(
    "argv",
    [
        ["-q", "-k", "not slow"],
        ["-q", "-m", "not integration"],
        ["-q", "-p", "no:cacheprovider"],
        ["-q", "--maxfail", "2", "--tb", "short"],
        ["-q", "-n", "2"],
    ],
)
def test_an_option_argument_is_no_test_path(argv: list[str]) -> None:
    """Without a test path pytest discovers the tests, so its discovery patterns are protected:
    an option's argument read as a test path dropped them."""
    tree = ["tests/test_a.py", "test_b.py", "not slow", "2"]
    assert protected(plan_of({"type": "pytest", "argv": argv}), tree) == [
        "test_b.py",
        "tests/test_a.py",
    ]


def test_a_pytest_configuration_file_named_by_an_option_is_protected() -> None:
    tree = ["ci.ini", "tests/test_a.py", "other/test_b.py"]
    for argv in (["-c", "ci.ini", "tests"], ["--config-file=ci.ini", "tests"]):
        assert protected(plan_of({"type": "pytest", "argv": argv}), tree) == [
            "ci.ini",
            "tests/test_a.py",
        ]


def test_every_configuration_file_pytest_reads_is_protected() -> None:
    """pytest takes its configuration from the first of these names it finds in a folder
    (pytest 9: `pytest.toml` and `.pytest.toml` first); each one, added beside the tests or
    above them, is protected. The names the installed pytest looks for are all among them."""
    from _pytest.config import findpaths

    assert set(getattr(findpaths, "CONFIG_LOADERS_BY_NAME", ())) <= set(PYTEST_CONFIG)
    plan = plan_of({"type": "pytest", "argv": ["-q", "pkg/tests"]})
    for folder in ("", "pkg/", "pkg/tests/"):
        for name in PYTEST_CONFIG:
            assert f"{folder}{name}" in protected(plan, [*TREE, f"{folder}{name}"]), folder + name
    assert "pkg/src/pytest.toml" not in protected(plan, [*TREE, "pkg/src/pytest.toml"])


def test_tool_configuration_is_protected_in_the_cwd_and_above() -> None:
    """`.npmrc` (`script-shell=/bin/true` makes every `npm test` pass) and cargo's
    `.cargo/config.toml` (`runner = "true"`) are read from the tool's folder and every folder
    above it: protected there, not below nor beside."""
    tree = [*TREE, ".npmrc", "web/.npmrc", "web/app/.npmrc", "other/.npmrc", ".cargo/config.toml"]
    got = protected(plan_of(run("npm", "test", cwd="web")), tree)
    assert {".npmrc", "web/.npmrc"} <= set(got)
    assert "web/app/.npmrc" not in got and "other/.npmrc" not in got
    assert ".cargo/config.toml" in protected(plan_of(run("cargo", "test", cwd="web")), tree)
    assert ".npmrc" not in protected(plan_of(run("make", "test")), tree)


def test_the_command_behind_a_wrapper_is_read() -> None:
    """`env`, `timeout`, `nice`, `nohup`, ... run the command after their options (and
    `timeout`'s duration, `env`'s assignments) unchanged: its script, tool files and Python
    roots are the check's own, as without the wrapper."""
    assert protected(plan_of(run("env", "-i", "A=1", "python3", "tools/check.py")), TREE) == [
        "tools/check.py",
        "tools/json.py",
    ]
    assert protected(plan_of(run("timeout", "-k", "5", "60", "sh", "scripts/check.sh")), TREE) == [
        "scripts/check.sh"
    ]
    assert protected(plan_of(run("nice", "-n", "5", "make", "test")), TREE) == ["Makefile"]
    assert protected(plan_of(run("env")), TREE) == []
