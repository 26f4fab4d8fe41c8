"""What a check sees, at the unit level: :func:`gitaudit.checks.execute.run_check` and
:func:`gitaudit.checks.environment.check_environment` called directly with a given caller
environment, running real processes (docs/threat-model.md, "Checks run on the tree": the
environment is part of the contract; a directory does not satisfy a file check).

End to end (the same through a run): tests/adversarial/test_hermetic.py."""

from __future__ import annotations

import json
import os
import py_compile
import shutil
import sys
import threading
from pathlib import Path

import pytest

from gitaudit.checks.environment import Sandbox, check_environment
from gitaudit.checks.execute import REGEX_READ_LIMIT, CheckResult, run_check
from gitaudit.plan.model import Check
from gitaudit.plan.validate import validate_bytes

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
# what every check sees besides PATH and the allow-listed caller's variables
ALWAYS = {
    "PATH",
    "HOME",
    "TMPDIR",
    "TMP",
    "TEMP",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONPYCACHEPREFIX",
}
UNDECLARED = {
    "PYTHONPATH": "/tmp/planted",
    "PYTEST_ADDOPTS": "-p planted",
    "GITAUDIT_PYTHON": "/bin/true",
    "GIT_DIR": "/tmp/elsewhere.git",
    "LD_PRELOAD": "/nonexistent/planted.so",
    "BASH_ENV": "/tmp/planted-bashrc",
    "GITAUDIT_SIGNING_KEY": "/home/user/.config/gitaudit/keys/ci.key",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
    "UNRELATED": "x",
}


def run(argv: tuple[str, ...], workspace: Path, sandbox: Sandbox, **fields: object) -> CheckResult:
    check = Check(type="run", json_path="$.steps[0].verify[0]", argv=argv, **fields)  # type: ignore[arg-type]
    return run_check(check, workspace, sandbox)


def seen(result: CheckResult) -> dict[str, str]:
    """The environment the check's process had (it ran ``env -0``)."""
    pairs = [item.partition("=") for item in result.stdout.decode().split("\0") if item]
    return {name: value for name, _, value in pairs}


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(workspace, the user's HOME with a dotfile, the checks' private HOME)."""
    workspace, user_home, private = tmp_path / "ws", tmp_path / "user", tmp_path / "private"
    for folder in (workspace, user_home, private, tmp_path / "tmp"):
        folder.mkdir()
    (user_home / ".verdict").write_text("ok\n")
    return workspace, user_home, private


# --------------------------------------------------------------------------- environment (25)


def test_undeclared_variables_and_dotfiles_are_not_seen(
    world: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The caller has PYTHONPATH, PYTEST_ADDOPTS, GITAUDIT_PYTHON, GIT_DIR, LD_PRELOAD, BASH_ENV,
    the signing material and more: the check's process sees the allow-list only, a private
    HOME and TMPDIR, and the run records exactly those names."""
    workspace, user_home, private = world
    caller = {**UNDECLARED, "PATH": SYSTEM_PATH, "HOME": str(user_home), "LANG": "C.UTF-8"}
    sandbox = Sandbox(home=private, tmp=tmp_path / "tmp", caller=caller)
    result = run(("env", "-0"), workspace, sandbox)
    assert result.outcome == "passed", result.message
    env = seen(result)
    assert set(env) == ALWAYS | {"LANG"}
    assert env["HOME"] == str(private) and env["TMPDIR"] == str(tmp_path / "tmp")
    assert env["PATH"] == SYSTEM_PATH
    assert result.extra["env"] == {"names": sorted(env), "declared": {}}
    dotfile = run(("sh", "-c", 'test ! -e "$HOME/.verdict"'), workspace, sandbox)
    assert dotfile.outcome == "passed", dotfile.message


def test_bytecode_the_workspace_holds_is_never_run_for_its_source(
    world: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """A ``__pycache__`` file beside a source (unchecked-hash: current whatever the source
    says) is not what the check's Python runs: its bytecode cache is a folder of the private
    TMPDIR, and nothing is written there or into the workspace."""
    workspace, _, private = world
    tools = workspace / "tools"
    tools.mkdir()
    (tools / "__init__.py").write_text("")
    (tools / "check.py").write_text("raise SystemExit(1)\n")
    cheat = tmp_path / "cheat.py"
    cheat.write_text("raise SystemExit(0)\n")
    cached = tools / "__pycache__" / f"check.{sys.implementation.cache_tag}.pyc"
    cached.parent.mkdir()
    py_compile.compile(
        str(cheat),
        cfile=str(cached),
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    sandbox = Sandbox(home=private, tmp=tmp_path / "tmp", caller={"PATH": SYSTEM_PATH})
    result = run((sys.executable, "-m", "tools.check"), workspace, sandbox)
    assert result.outcome == "failed" and result.exit_code == 1, result.message
    env = check_environment(sandbox, {}).variables
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "tmp" / "pycache")
    assert sorted(p.name for p in cached.parent.iterdir()) == [cached.name]
    assert not (tmp_path / "tmp" / "pycache").exists()
    own = run(
        (sys.executable, "-m", "tools.check"), workspace, sandbox, env={"PYTHONPYCACHEPREFIX": ""}
    )
    assert own.outcome == "passed"  # a plan that sets the variable itself chose (and sealed) it


def test_a_tool_planted_in_the_repository_is_not_on_path(
    world: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The caller puts a `grep` inside the repository first on PATH (also through a symlink
    from outside, and as a relative entry): the check runs the system's, and records it."""
    workspace, _, private = world
    repository = tmp_path / "repo"
    planted = repository / ".git" / "bin"
    planted.mkdir(parents=True)
    (planted / "grep").write_text("#!/bin/sh\nexit 0\n")
    (planted / "grep").chmod(0o755)
    alias = tmp_path / "innocent-bin"
    alias.symlink_to(planted)
    path = f"{planted}:{alias}:.git/bin:.:{SYSTEM_PATH}"
    sandbox = Sandbox(
        home=private,
        tmp=tmp_path / "tmp",
        repository=(repository, repository / ".git"),
        caller={"PATH": path},
    )
    result = run(("grep", "-q", "never-there", "/dev/null"), workspace, sandbox)
    assert result.outcome == "failed" and result.exit_code == 1  # the real grep ran
    real = os.path.realpath(shutil.which("grep", path=SYSTEM_PATH) or "")
    assert result.extra["executable"] == real
    environment = check_environment(sandbox, {})
    assert environment.variables["PATH"] == SYSTEM_PATH


def test_a_tool_of_the_private_checkout_is_not_on_path_nor_run_through_a_link(
    world: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gitaudit's cache holds the tree's files at a path anyone can work out: a PATH entry
    there is dropped like the repository's, and a program PATH finds through a link into it
    is refused (never run) and named; a program the plan names by a path still runs."""
    workspace, _, private = world
    monkeypatch.setenv("GITAUDIT_CACHE", str(tmp_path / "cache"))
    tools = tmp_path / "cache" / "checkouts" / "0123456789abcdef0123" / "0" / "tree" / "bin"
    tools.mkdir(parents=True)
    (tools / "grep").write_text("#!/bin/sh\nexit 0\n")
    (tools / "grep").chmod(0o755)
    links = tmp_path / "links"
    links.mkdir()
    (links / "grep").symlink_to(tools / "grep")
    sandbox = Sandbox(home=private, tmp=tmp_path / "tmp", caller={"PATH": f"{tools}:{SYSTEM_PATH}"})
    assert check_environment(sandbox, {}).variables["PATH"] == SYSTEM_PATH
    result = run(("grep", "-q", "never-there", "/dev/null"), workspace, sandbox)
    assert result.exit_code == 1  # the real grep ran
    linked = Sandbox(home=private, tmp=tmp_path / "tmp", caller={"PATH": f"{links}:{SYSTEM_PATH}"})
    refused = run(("grep", "-q", "never-there", "/dev/null"), workspace, linked)
    assert refused.outcome == "failed" and refused.exit_code is None
    assert refused.message == (
        f"'grep' on the checks' PATH leads to {tools / 'grep'}, a file of the repository or of "
        "its private checkout: a planted tool would run in place of the real one"
    )
    named = run((str(tools / "grep"), "x"), workspace, linked)
    assert named.outcome == "passed", named.message


def test_declared_variables_passed_and_a_missing_one_named(
    world: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    workspace, _, private = world
    caller = {"PATH": SYSTEM_PATH, "DEPLOY_ENV": "staging", "APP_MODE": "ci", "OTHER": "x"}
    sandbox = Sandbox(
        home=private, tmp=tmp_path / "tmp", pass_env=("DEPLOY_ENV", "APP_*"), caller=caller
    )
    result = run(("env", "-0"), workspace, sandbox)
    assert result.outcome == "passed", result.message
    env = seen(result)
    assert (env["DEPLOY_ENV"], env["APP_MODE"]) == ("staging", "ci") and "OTHER" not in env
    assert result.extra["env"]["declared"] == {"APP_MODE": "ci", "DEPLOY_ENV": "staging"}
    without = Sandbox(
        home=private,
        tmp=tmp_path / "tmp",
        pass_env=("DEPLOY_ENV",),
        caller={"PATH": SYSTEM_PATH},
    )
    missing = run(("true",), workspace, without)
    assert missing.outcome == "failed"
    assert missing.message == (
        "the plan passes DEPLOY_ENV to checks (pass_env), but the caller has not set it"
    )


def test_one_checks_own_env_is_not_seen_by_the_next(
    world: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The environment every check of a run shares is worked out once; each check's declared
    ``env`` goes on a copy, so a later check of the same sandbox sees neither it nor a change
    made to an earlier check's variables."""
    workspace, _, private = world
    caller = {"PATH": SYSTEM_PATH, "DEPLOY_ENV": "staging"}
    sandbox = Sandbox(home=private, tmp=tmp_path / "tmp", pass_env=("DEPLOY_ENV",), caller=caller)
    first = check_environment(sandbox, {"MODE": "first", "HOME": "/elsewhere"})
    first.variables["PATH"] = "/planted"
    first.declared["DEPLOY_ENV"] = "production"
    second = check_environment(sandbox, {})
    assert "MODE" not in second.variables
    assert second.variables["HOME"] == str(private)
    assert second.variables["PATH"] == SYSTEM_PATH
    assert second.declared == {"DEPLOY_ENV": "staging"}
    env = seen(run(("env", "-0"), workspace, sandbox))
    assert "MODE" not in env and env["PATH"] == SYSTEM_PATH and env["DEPLOY_ENV"] == "staging"


def test_the_signing_material_cannot_be_declared(
    world: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """A plan declaring GITAUDIT_* or SSH_AUTH_SOCK does not validate; and even handed to the
    environment builder, they are not passed."""
    workspace, _, private = world
    sandbox = Sandbox(
        home=private,
        tmp=tmp_path / "tmp",
        pass_env=("GITAUDIT_*", "SSH_AUTH_SOCK", "GITAUDIT_SIGNING_KEY"),
        caller={**UNDECLARED, "PATH": SYSTEM_PATH},
    )
    env = seen(run(("env", "-0"), workspace, sandbox))
    assert not {n for n in env if n.startswith("GITAUDIT_") or n == "SSH_AUTH_SOCK"}
    plan = {
        "task": "t",
        "requirements": [{"id": "R", "description": "r"}],
        "pass_env": ["GITAUDIT_*", "SSH_AUTH_SOCK", "DEPLOY_ENV"],
        "steps": [
            {
                "id": "s",
                "covers": ["R"],
                "pass_env": ["GITAUDIT_SIGNING_KEY"],
                "verify": [{"type": "run", "argv": ["true"]}],
            }
        ],
    }
    _, report = validate_bytes(json.dumps(plan).encode(), name="p", source="p.json")
    assert [(p.path, p.code) for p in report.errors] == [
        ("$.steps[0].pass_env[0]", "env.forbidden"),
        ("$.pass_env[0]", "env.forbidden"),
        ("$.pass_env[1]", "env.forbidden"),
    ]


def test_the_pytest_python_is_not_chosen_by_a_variable(
    world: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """GITAUDIT_PYTHON (or PYTHONHOME, PYTHONPATH) in the caller's environment does not choose
    or bend the interpreter of a pytest check: the plan's python, found on the checks' PATH."""
    workspace, _, private = world
    fake = tmp_path / "fake" / "python3"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    (workspace / "test_x.py").write_text("def test_x():\n    assert False\n")
    bindir = str(Path(sys.executable).parent)
    caller = {
        "PATH": f"{bindir}:{SYSTEM_PATH}",
        "GITAUDIT_PYTHON": str(fake),
        "PYTHONHOME": str(tmp_path / "fake"),
        "PYTHONPATH": str(tmp_path / "fake"),
    }
    sandbox = Sandbox(home=private, tmp=tmp_path / "tmp", caller=caller)
    check = Check(
        type="pytest",
        json_path="$.steps[0].verify[0]",
        argv=("-q", "-p", "no:cacheprovider", "test_x.py"),
    )
    result = run_check(check, workspace, sandbox)
    assert result.outcome == "failed" and result.exit_code == 1, result.stdout
    assert b"1 failed" in result.stdout  # pytest ran, in the plan's python, and the test failed
    planned = shutil.which("python3", path=bindir)
    assert planned is not None and result.extra["executable"] == os.path.realpath(planned)
    assert result.extra["executable"] != str(fake)


def test_a_pytest_failure_says_what_pytest_s_exit_code_means(
    world: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """A pytest check that collects nothing fails with pytest's exit code 5, and the reason
    says so; a failing test says "tests failed"; a run check's code stays a bare number."""
    workspace, _, private = world
    bindir = str(Path(sys.executable).parent)
    sandbox = Sandbox(
        home=private, tmp=tmp_path / "tmp", caller={"PATH": f"{bindir}:{SYSTEM_PATH}"}
    )

    def pytest(*argv: str) -> CheckResult:
        check = Check(type="pytest", json_path="$.v", argv=("-q", "-p", "no:cacheprovider", *argv))
        return run_check(check, workspace, sandbox)

    empty = pytest()
    assert empty.message == "exit code 5 (no tests collected), expected 0", empty.stdout
    (workspace / "test_x.py").write_text("def test_x():\n    assert False\n")
    assert pytest("test_x.py").message == "exit code 1 (tests failed), expected 0"
    run = run_check(
        Check(type="run", json_path="$.v", argv=("sh", "-c", "exit 5")), workspace, sandbox
    )
    assert run.message == "exit code 5, expected 0"


# ------------------------------------------------------------- a directory is not a file (26)


def test_a_directory_does_not_satisfy_a_file_check(
    world: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    workspace, _, private = world
    (workspace / "out").mkdir()
    (workspace / "file").write_text("x")
    sandbox = Sandbox(home=private, tmp=tmp_path / "tmp")

    def exists(path: str, kind: str = "file") -> CheckResult:
        check = Check(type="file_exists", json_path="$.v", path=path, kind=kind)  # type: ignore[arg-type]
        return run_check(check, workspace, sandbox)

    as_file = exists("out")
    assert as_file.outcome == "failed"
    assert as_file.message == "out is a directory, not a file (declare kind: dir for a directory)"
    assert exists("out", "dir").outcome == "passed"
    assert exists("file").outcome == "passed"
    assert exists("file", "dir").message == "file is not a directory"


# ------------------------------------------------- what is not a regular file is not read


def test_a_fifo_is_neither_searched_nor_a_file(
    world: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Opening a FIFO blocks until a writer comes: a regex check would hang the run."""
    workspace, _, private = world
    os.mkfifo(workspace / "pipe")
    sandbox = Sandbox(home=private, tmp=tmp_path / "tmp")
    regex = Check(type="regex", json_path="$.v", path="pipe", pattern="x")
    exists = Check(type="file_exists", json_path="$.v", path="pipe")
    for check in (regex, exists):
        results: list[CheckResult] = []
        judging = threading.Thread(
            target=lambda c=check, out=results: out.append(run_check(c, workspace, sandbox)),
            daemon=True,
        )
        judging.start()
        judging.join(10)
        if judging.is_alive():  # blocked opening the FIFO: release it, and fail
            os.close(os.open(workspace / "pipe", os.O_WRONLY | os.O_NONBLOCK))
        assert results, f"the {check.type} check hung on the FIFO"
        assert (results[0].outcome, results[0].message) == ("failed", "pipe is not a regular file")


def test_a_search_judges_the_whole_text_or_fails(
    world: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """A search of a part can match what the whole does not: a file larger than a regex check
    reads, or an output longer than max_output_bytes with an output_regex, fails the check
    (tests/adversarial/test_searches.py); at the limit, the whole is searched."""
    workspace, _, private = world
    sandbox = Sandbox(home=private, tmp=tmp_path / "tmp")
    limit = REGEX_READ_LIMIT
    (workspace / "at").write_bytes(b"#" * (limit - 3) + b"\nok")
    (workspace / "past").write_bytes(b"#" * (limit - 3) + b"\nok" + b"X")

    def regex(path: str) -> CheckResult:
        check = Check(type="regex", json_path="$.v", path=path, pattern="^ok$")
        return run_check(check, workspace, sandbox)

    assert regex("at").outcome == "passed"
    past = regex("past")
    assert past.outcome == "failed"
    assert past.message == (
        "past is larger than 16 MiB, more than a regex check searches; check it with a run check"
    )
    for argv, cut in [(("printf", "ok"), False), (("printf", "okX"), True)]:
        for err in (False, True):
            command = ("sh", "-c", '"$@" >&2', "sh", *argv) if err else argv
            result = run(command, workspace, sandbox, output_regex="^ok$", max_output_bytes=2)
            assert result.outcome == ("failed" if cut else "passed"), (argv, err, result)
            if cut:
                assert "longer than max_output_bytes (2)" in result.message
    without = run(("printf", "okX"), workspace, sandbox, max_output_bytes=2)
    assert without.outcome == "passed"  # no search: the cut output is only recorded


def test_a_checks_own_file_through_a_link_inside_is_refused(
    world: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The seal protects ``tools/check.py`` by its path; through ``tools -> scripts`` the check
    would run ``scripts/check.py``, which nothing protects."""
    workspace, _, private = world
    (workspace / "scripts").mkdir()
    (workspace / "scripts" / "check.py").write_text("")
    (workspace / "tools").symlink_to("scripts")
    sandbox = Sandbox(home=private, tmp=tmp_path / "tmp")
    result = run(("python3", "tools/check.py"), workspace, sandbox)
    assert result.outcome == "failed"
    assert result.message == (
        "the check's own file 'tools/check.py' is reached through the link 'tools' (to "
        "'scripts'), which the seal does not protect"
    )
    assert run(("python3", "scripts/check.py"), workspace, sandbox).outcome == "passed"


@pytest.mark.parametrize("opened", [(), ("tools",)])
def test_a_checks_own_file_through_a_link_out_is_refused_unless_declared(
    world: tuple[Path, Path, Path], tmp_path: Path, opened: tuple[str, ...]
) -> None:
    """Through ``tools -> /elsewhere`` the check would run a file the tree does not hold: it
    fails unread, naming the link; unless the link is a declared ignored path (the run makes
    those links itself, and the plan opened them)."""
    workspace, _, private = world
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "check.py").write_text("")
    (workspace / "tools").symlink_to(elsewhere)
    sandbox = Sandbox(home=private, tmp=tmp_path / "tmp", opened=opened)
    result = run(("python3", "tools/check.py"), workspace, sandbox)
    if opened:
        assert result.outcome == "passed", result.message
        return
    assert result.outcome == "failed"
    assert result.message == (
        "the check's own file 'tools/check.py' is reached through the link 'tools', which leads "
        f"out of the workspace (to {os.path.realpath(elsewhere)!r}): the tree does not hold "
        "what the check runs"
    )
