"""Sealed check surfaces: an agent that rewrites the files a check runs (to make a failing check
pass) keeps the contract but not the seal. For each kind of file protected by default, and for a
plan's own ``protect`` globs, the edit that turns a FAIL into a "PASS" is caught as
``plan.protected-changed``; accepting it is a sealer's recorded amendment."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gitaudit.ledger.plansref import read_state
from tests.adversarial.conftest import World, assert_plan, check, codes, only, plan, step
from tests.gitrepo import audit, git

PY = sys.executable

FAILING_TEST = "def test_answer():\n    assert 6 * 7 == 41\n"


def pytest_plan(*args: str, **extra: object) -> dict[str, object]:
    return {
        **plan(step("unit", {"type": "pytest", "argv": list(args)})),
        "python": PY,
        **extra,
    }


@pytest.fixture
def failing_tests(world: World) -> World:
    """A pytest step whose test fails, sealed, with honest FAIL evidence."""
    world.repo.write("tests/test_answer.py", FAILING_TEST)
    world.seal(pytest_plan("-q", "-p", "no:cacheprovider", "tests"))
    assert world.run().verdict == "FAIL"
    assert_plan(world.gate(), "step.failed", "FAIL")
    return world


def cheat(world: World, path: str, content: str) -> None:
    """The agent's move: make the check pass by editing what it runs, commit, run again."""
    world.repo.write(path, content)
    world.repo.commit(f"make it pass: {path}")
    assert world.run().verdict == "PASS"  # the checks really do pass now


def test_attack_protected_test_file_rewritten_to_pass(failing_tests: World) -> None:
    cheat(failing_tests, "tests/test_answer.py", "def test_answer():\n    assert True\n")
    judged = assert_plan(failing_tests.gate(), "plan.protected-changed", "FAIL")
    assert "changed: tests/test_answer.py" in judged.reasons[0].message


@pytest.mark.parametrize("where", ["conftest.py", "tests/conftest.py"])
def test_attack_protected_conftest_added_to_skip(failing_tests: World, where: str) -> None:
    skip_all = (
        "import pytest\n\n"
        "def pytest_collection_modifyitems(items):\n"
        "    for item in items:\n"
        "        item.add_marker(pytest.mark.skip)\n"
    )
    cheat(failing_tests, where, skip_all)
    judged = assert_plan(failing_tests.gate(), "plan.protected-changed", "FAIL")
    assert f"added: {where}" in judged.reasons[0].message


@pytest.mark.parametrize(
    ("config", "text"),
    [
        ("pytest.ini", "[pytest]\naddopts = --deselect tests/test_answer.py::test_answer\n"),
        ("setup.cfg", "[tool:pytest]\naddopts = -k 'not answer'\n"),
        ("tox.ini", "[pytest]\naddopts = -k 'not answer'\n"),
        ("pyproject.toml", "[tool.pytest.ini_options]\naddopts = \"-k 'not answer'\"\n"),
    ],
)
def test_attack_protected_pytest_config_deselects(
    failing_tests: World, config: str, text: str
) -> None:
    failing_tests.repo.write(config, text)
    failing_tests.repo.commit(f"configure pytest: {config}")
    # exit 5 (nothing collected) or a pass: either way the gate must not trust it
    failing_tests.run()
    judged = only(failing_tests.gate())
    assert judged.verdict == "FAIL"
    assert codes(judged)[0] == "plan.protected-changed", codes(judged)
    assert f"added: {config}" in judged.reasons[0].message


def test_attack_protected_script_named_by_a_check_replaced(world: World) -> None:
    world.repo.write("scripts/check.sh", "#!/bin/sh\ntest -e done.txt\n", mode=0o755)
    world.seal(plan(step("unit", check("sh", "scripts/check.sh"))))
    assert world.run().verdict == "FAIL"
    cheat(world, "scripts/check.sh", "#!/bin/sh\nexit 0\n")
    judged = assert_plan(world.gate(), "plan.protected-changed", "FAIL")
    assert "changed: scripts/check.sh" in judged.reasons[0].message


def test_attack_protected_exec_path_and_option_value_replaced(world: World) -> None:
    world.repo.write("bin/verify", "#!/bin/sh\nexit 1\n", mode=0o755)
    world.repo.write("rules.cfg", "strict\n")
    world.seal(
        plan(
            step(
                "unit",
                {"type": "exec", "path": "bin/verify"},
                check("grep", "--file=rules.cfg", "-q", "rules.cfg"),
            )
        )
    )
    assert world.run().verdict == "FAIL"
    world.repo.write("rules.cfg", "lenient\n")
    cheat(world, "bin/verify", "#!/bin/sh\nexit 0\n")
    judged = assert_plan(world.gate(), "plan.protected-changed", "FAIL")
    assert "changed: bin/verify, rules.cfg" in judged.reasons[0].message


def test_attack_protected_glob_fixture_edited(world: World) -> None:
    world.repo.write("fixtures/expected.txt", "42\n")
    world.seal(
        {
            **plan(step("unit", check("grep", "-qx", "41", "fixtures/expected.txt"))),
            "protect": ["fixtures/**"],
        }
    )
    assert world.run().verdict == "FAIL"
    cheat(world, "fixtures/expected.txt", "41\n")
    judged = assert_plan(world.gate(), "plan.protected-changed", "FAIL")
    assert "changed: fixtures/expected.txt" in judged.reasons[0].message


def test_attack_protected_test_deleted(failing_tests: World) -> None:
    failing_tests.repo.write("tests/test_other.py", "def test_other():\n    pass\n")
    failing_tests.repo.commit("another test")
    sealed = failing_tests.cli(
        "plan",
        "seal",
        "--amend",
        "--reason",
        "a new test, reviewed",
        "--key",
        str(failing_tests.keys["alice"]),
    )
    assert sealed.code == 0, sealed.err
    (failing_tests.path / "tests" / "test_answer.py").unlink()
    failing_tests.repo.commit("drop the failing test")
    assert failing_tests.run().verdict == "PASS"
    judged = assert_plan(failing_tests.gate(), "plan.protected-changed", "FAIL")
    assert "deleted: tests/test_answer.py" in judged.reasons[0].message


def test_attack_protected_reseal_without_amend_is_refused(failing_tests: World) -> None:
    """Resealing (even a stronger contract) does not launder a changed test: the seal refuses
    protected changes unless they are declared as an amendment."""
    failing_tests.repo.write("tests/test_answer.py", "def test_answer():\n    assert True\n")
    failing_tests.repo.commit("make it pass")
    stronger = pytest_plan("-q", "-p", "no:cacheprovider", "tests", required_tools=["sh"])
    failing_tests.write_plan(stronger)
    failing_tests.repo.commit("stronger plan")
    refused = failing_tests.cli("plan", "seal", "--key", str(failing_tests.keys["alice"]))
    assert refused.code == 1
    assert "protected files of plan 'default' changed since its seal v1" in refused.err
    assert "--amend" in refused.err
    assert read_state(failing_tests.handle()).seal("default").version == 1  # type: ignore[union-attr]


def test_attack_protected_exemption_is_a_weakening(failing_tests: World) -> None:
    exempt = pytest_plan("-q", "-p", "no:cacheprovider", "tests", protect=["!tests/test_answer.py"])
    failing_tests.write_plan(exempt)
    failing_tests.repo.commit("exempt the failing test")
    refused = failing_tests.cli("plan", "seal", "--key", str(failing_tests.keys["alice"]))
    assert refused.code == 1
    assert "weakened" in refused.err and "'!tests/test_answer.py' added" in refused.err


def test_attack_protected_change_refused_by_the_server(
    failing_tests: World, tmp_path: Path
) -> None:
    server = failing_tests.serve(tmp_path / "server.git")
    cheat(failing_tests, "tests/test_answer.py", "def test_answer():\n    assert True\n")
    pushed = audit(failing_tests.path, "push")
    assert pushed.code == 1
    assert git(server, "rev-parse", "-q", "--verify", "refs/heads/main", check=False) == ""
    assert "protected files of plan 'default' differ from seal v1" in pushed.err + pushed.out


def test_amended_protected_files_pass_and_are_in_the_history(failing_tests: World) -> None:
    """Control: a sealer who reviewed the change amends the seal; the history says what."""
    cheat(failing_tests, "tests/test_answer.py", "def test_answer():\n    assert 6 * 7 == 42\n")
    amended = failing_tests.cli(
        "plan",
        "seal",
        "--amend",
        "--reason",
        "the expected value was wrong",
        "--key",
        str(failing_tests.keys["alice"]),
    )
    assert amended.code == 0, amended.err
    assert "changed      tests/test_answer.py (protected)" in amended.out
    assert failing_tests.run().verdict == "PASS"
    assert failing_tests.gate().verdict == "PASS"
    history = failing_tests.cli("plan", "history")
    assert "v2 amended by alice" in history.out
    assert "protected files changed: tests/test_answer.py" in history.out


SHADOW = "import sys\n\nsys.exit(0)\n"


@pytest.mark.parametrize(
    "where", ["pytest.py", "_pytest/__init__.py", "json.py", "unittest/__init__.py"]
)
def test_attack_protected_module_shadowing_pytest(failing_tests: World, where: str) -> None:
    """`python -m pytest` puts the check's folder first on sys.path: a `pytest.py` (or a
    standard-library name pytest imports) there replaces the real one and exits 0."""
    failing_tests.repo.write(where, SHADOW)
    failing_tests.repo.commit(f"add {where}")
    failing_tests.run()  # whether the shadow wins or pytest crashes: the gate must not trust it
    judged = only(failing_tests.gate())
    assert judged.verdict == "FAIL"
    assert codes(judged)[0] == "plan.protected-changed", codes(judged)
    assert f"added: {where}" in judged.reasons[0].message


def test_attack_protected_python_m_pytest_in_a_run_check(world: World) -> None:
    """A `run` check spelling out `python -m pytest` is read like a pytest check."""
    world.repo.write("suite/test_answer.py", FAILING_TEST)
    world.seal(
        plan(step("unit", check(PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "suite")))
    )
    assert world.run().verdict == "FAIL"
    cheat(world, "suite/test_answer.py", "def test_answer():\n    pass\n")
    judged = assert_plan(world.gate(), "plan.protected-changed", "FAIL")
    assert "changed: suite/test_answer.py" in judged.reasons[0].message


def test_attack_protected_script_folder_shadows_a_module(world: World) -> None:
    """`python tools/check.py` puts tools/ first on sys.path: a `tools/re.py` replaces `re`."""
    world.repo.write(
        "tools/check.py", "import re\nraise SystemExit(0 if re.fullmatch('a', 'b') else 1)\n"
    )
    world.seal(plan(step("unit", check(PY, "tools/check.py"))))
    assert world.run().verdict == "FAIL"
    cheat(world, "tools/re.py", "def fullmatch(*args):\n    return True\n")
    judged = assert_plan(world.gate(), "plan.protected-changed", "FAIL")
    assert "added: tools/re.py" in judged.reasons[0].message


def test_attack_protected_makefile_of_a_make_check(world: World) -> None:
    world.repo.write("Makefile", "test:\n\tfalse\n")
    world.seal(plan(step("unit", check("make", "-s", "test"))))
    assert world.run().verdict == "FAIL"
    cheat(world, "Makefile", "test:\n\ttrue\n")
    judged = assert_plan(world.gate(), "plan.protected-changed", "FAIL")
    assert "changed: Makefile" in judged.reasons[0].message


def test_attack_protected_pytest_config_above_the_tests(world: World) -> None:
    """pytest looks for its configuration in the test paths' folders and every folder above
    them: a `pytest.ini` in a subfolder is protected when the tests live there."""
    world.repo.write("pkg/tests/test_answer.py", FAILING_TEST)
    world.seal(pytest_plan("-q", "-p", "no:cacheprovider", "pkg/tests"))
    assert world.run().verdict == "FAIL"
    world.repo.write("pkg/pytest.ini", "[pytest]\naddopts = -k 'not answer'\n")
    world.repo.commit("configure pytest for pkg")
    world.run()
    judged = only(world.gate())
    assert codes(judged)[0] == "plan.protected-changed", codes(judged)
    assert "added: pkg/pytest.ini" in judged.reasons[0].message


def test_new_source_module_is_not_protected(world: World) -> None:
    """Control: the code under test is the agent's work. Fixing it, and adding a module with an
    ordinary name next to it, passes: protection is for the checks, not the code."""
    world.repo.write("answer.py", "ANSWER = 41\n")
    world.repo.write(
        "tests/test_answer.py",
        "from answer import ANSWER\n\n\ndef test_answer():\n    assert ANSWER == 42\n",
    )
    world.seal(pytest_plan("-q", "-p", "no:cacheprovider", "tests"))
    assert world.run().verdict == "FAIL"
    world.repo.write("mathbits.py", "SIX, SEVEN = 6, 7\n")
    world.repo.write("answer.py", "from mathbits import SEVEN, SIX\n\nANSWER = SIX * SEVEN\n")
    world.repo.commit("compute the answer")
    assert world.run().verdict == "PASS"
    assert world.gate().verdict == "PASS"


@pytest.mark.parametrize("signer", ["unsigned", "mallory", "alice"])
def test_attack_protected_manifest_rewritten_on_the_plans_ref(
    failing_tests: World, signer: str
) -> None:
    """The agent rewrites the sealed manifest to its edited test's blob: unsigned or signed by
    an untrusted key, the plans ref stops verifying; even a sealer-signed commit is refused,
    because the seal record binds the manifest by its digest."""
    cheat(failing_tests, "tests/test_answer.py", "def test_answer():\n    assert True\n")
    files = failing_tests.plans_files()
    doc = json.loads(files["protected/default.json"])
    blob = git(failing_tests.path, "rev-parse", "HEAD:tests/test_answer.py").strip()
    doc["files"]["tests/test_answer.py"] = f"100644 {blob}"
    files["protected/default.json"] = (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
    keys = {"unsigned": None, "mallory": failing_tests.mallory, "alice": failing_tests.alice}
    failing_tests.forge_plans(files, keys[signer])
    judged = failing_tests.gate()
    assert judged.verdict == "FAIL"
    assert judged.reasons[0].code == "plans.untrusted", judged.reasons
    if signer == "alice":
        assert "protected" in judged.reasons[0].message


@pytest.mark.parametrize(
    ("module", "before", "planted"),
    [
        ("tools.check", {}, "tools/__init__.py"),  # a namespace package gets an __init__
        ("tools.check", {"tools/__init__.py": ""}, "tools/__init__.py"),  # edited
        ("tools.sub.check", {"tools/sub/__init__.py": ""}, "tools/__init__.py"),
        ("tools.sub.check", {"tools/__init__.py": ""}, "tools/sub/__init__.py"),
        ("tools.check", {}, "tools/check/__init__.py"),  # a package beside the module
    ],
)
def test_attack_protected_python_m_runs_a_file_beside_the_module(
    world: World, module: str, before: dict[str, str], planted: str
) -> None:
    """``python -m tools.check`` protects tools/check.py (and tools/check/__main__.py), but
    Python imports the module's parent packages first (``tools/__init__.py`` runs before the
    module), and prefers a package ``tools/check/`` to the module ``tools/check.py``. The agent
    adds or edits one of those to exit 0: the check passed and the protected files were
    unchanged (PASS before the fix, all five). They are protected now:
    ``plan.protected-changed``. (An extension module ``tools/check.abi3.so`` would be preferred
    too, but ``-m`` cannot run one: no code object.)"""
    script = module.replace(".", "/") + ".py"
    for path, text in before.items():
        world.repo.write(path, text)
    world.repo.write(script, "raise SystemExit(1)\n")
    world.seal(plan(step("unit", check(PY, "-m", module))))
    assert world.run().verdict == "FAIL"
    cheat(world, planted, "raise SystemExit(0)\n")
    judged = assert_plan(world.gate(), "plan.protected-changed", "FAIL")
    verb = "changed" if planted in before else "added"
    assert f"{verb}: {planted}" in judged.reasons[0].message


@pytest.mark.parametrize("cwd", ["app", "app/deep", "./app"])
def test_attack_protected_exec_path_of_a_check_with_a_cwd_replaced(world: World, cwd: str) -> None:
    """An `exec` check runs its path from the root of the workspace whatever its `cwd` (it is
    confined from there), but the seal protected it under the `cwd` (`app/bin/verify`: no file,
    so nothing). The agent rewrote `bin/verify` to exit 0: run PASS, gate PASS before the fix.
    Now the exec path is protected as it runs: `plan.protected-changed`."""
    world.repo.write("bin/verify", "#!/bin/sh\nexit 1\n", mode=0o755)
    world.repo.write(f"{cwd}/README", "where the check runs\n")
    world.seal(plan(step("unit", {"type": "exec", "path": "bin/verify", "cwd": cwd})))
    assert world.run().verdict == "FAIL"
    cheat(world, "bin/verify", "#!/bin/sh\nexit 0\n")
    judged = assert_plan(world.gate(), "plan.protected-changed", "FAIL")
    assert "changed: bin/verify" in judged.reasons[0].message


@pytest.mark.parametrize(
    "argv",
    [
        ["sh", "-e", "scripts/check.sh"],
        ["bash", "-e", "-u", "scripts/check.sh"],
        ["bash", "-o", "pipefail", "scripts/check.sh"],
        ["bash", "-eo", "pipefail", "scripts/check.sh"],
        ["python3", "-W", "error", "scripts/check.sh"],
        ["python3", "-X", "dev", "scripts/check.sh"],
    ],
    ids=" ".join,
)
def test_attack_protected_script_after_an_option_replaced(world: World, argv: list[str]) -> None:
    """The script an interpreter runs is its first operand after the options, but the seal read
    a shell's `-e` (errexit) as inline code, as perl's, and the argument of `-o`, `-W` or `-X`
    as the script: `sh -e scripts/check.sh` or `python3 -W error scripts/check.sh` protected
    nothing (or `error`). The agent rewrote the script to pass: PASS before the fix. Now the
    options are read per interpreter: `plan.protected-changed`."""
    code = "exit 1\n" if argv[0] != "python3" else "raise SystemExit(1)\n"
    world.repo.write("scripts/check.sh", code)
    world.seal(plan(step("unit", check(*argv))))
    assert world.run().verdict == "FAIL"
    cheat(world, "scripts/check.sh", code.replace("1", "0"))
    judged = assert_plan(world.gate(), "plan.protected-changed", "FAIL")
    assert "changed: scripts/check.sh" in judged.reasons[0].message


@pytest.mark.parametrize(
    "options",
    [["-k", "answer"], ["-m", "not slow"], ["-p", "no:cacheprovider"], ["--maxfail", "1"]],
    ids=" ".join,
)
def test_attack_protected_test_discovered_after_an_option_with_a_value(
    world: World, options: list[str]
) -> None:
    """A pytest check without a test path (pytest discovers the tests) whose options take a
    value: `-k answer`, `-p no:cacheprovider`... The seal read the value as a test path, so it
    protected that (no file) instead of pytest's discovery patterns: the agent rewrote the
    failing test to pass, PASS before the fix. Now an option's argument is no test path."""
    world.repo.write("tests/test_answer.py", FAILING_TEST)
    world.seal(pytest_plan("-q", *options))
    assert world.run().verdict == "FAIL"
    cheat(world, "tests/test_answer.py", "def test_answer():\n    assert True\n")
    judged = assert_plan(world.gate(), "plan.protected-changed", "FAIL")
    assert "changed: tests/test_answer.py" in judged.reasons[0].message


PASSING_TEST = "def test_ok():\n    assert 6 * 7 == 42\n"


@pytest.mark.parametrize(
    "path", [".pytest.toml", "pkg/pytest.toml", "pkg/.pytest.toml", "pytest.toml"]
)
def test_attack_protected_pytest_toml_deselects(world: World, path: str) -> None:
    """pytest 9 reads `pytest.toml` and `.pytest.toml` (its table `[pytest]`) before any other
    configuration file of a folder, in the tests' folders and every folder above them. The
    protected set named only `pytest.ini`, `.pytest.ini`, `pyproject.toml`, `setup.cfg` and
    `tox.ini` there: the agent added `.pytest.toml` at the root, or either name in `pkg/` above
    the tests `pkg/tests`, deselecting the failing test; the remaining test passed, `git audit
    run` recorded a signed PASS and the gate said PASS (3 of 4 before the fix; `pytest.toml` at
    the root was caught only because its name shadows the module `pytest`). Both names are now
    protected wherever the others are: `plan.protected-changed`."""
    world.repo.write("pkg/tests/test_answer.py", FAILING_TEST)
    world.repo.write("pkg/tests/test_ok.py", PASSING_TEST)
    world.seal(pytest_plan("-q", "-p", "no:cacheprovider", "pkg/tests"))
    assert world.run().verdict == "FAIL"
    world.repo.write(path, '[pytest]\naddopts = ["-k", "not answer"]\n')
    world.repo.commit(f"configure pytest: {path}")
    world.run()  # pytest reads it: the failing test is not run (PASS before the fix)
    judged = assert_plan(world.gate(), "plan.protected-changed", "FAIL")
    assert f"added: {path}" in judged.reasons[0].message


@pytest.mark.parametrize("cwd", [".", "web"])
def test_attack_protected_npmrc_swaps_the_script_shell(world: World, cwd: str) -> None:
    """`npm test` runs the test script through the `script-shell` the project's `.npmrc` (beside
    its `package.json`) names. The agent adds `.npmrc` saying `script-shell=/bin/true` there (the
    root, or the check's cwd `web`): `npm test` exits 0 without running the failing script, `git
    audit run` recorded a signed PASS and the gate said PASS (both before the fix; only
    `package.json` was protected). `.npmrc` is protected in the cwd and every folder above it:
    `plan.protected-changed`."""
    folder = "" if cwd == "." else f"{cwd}/"
    world.repo.write(
        f"{folder}package.json",
        '{"name": "w", "version": "1.0.0", "scripts": {"test": "exit 1"}}\n',
    )
    world.seal(plan(step("unit", check("npm", "test", cwd=cwd))))
    assert world.run().verdict == "FAIL"
    path = f"{folder}.npmrc"
    world.repo.write(path, "script-shell=/bin/true\n")
    world.repo.commit(f"configure npm: {path}")
    world.run()  # npm reads it: the script does not run (PASS before the fix)
    judged = assert_plan(world.gate(), "plan.protected-changed", "FAIL")
    assert f"added: {path}" in judged.reasons[0].message


@pytest.mark.parametrize(
    ("script", "argv"),
    [
        ("tools/check.py", ["env", "python3", "tools/check.py"]),
        ("tools/check.py", ["/usr/bin/env", "-u", "X", "LANG=C", "python3", "tools/check.py"]),
        ("tools/check.sh", ["timeout", "60", "sh", "tools/check.sh"]),
        ("tools/check.sh", ["nice", "-n", "5", "timeout", "-s", "KILL", "60", "./tools/check.sh"]),
        ("tools/check.sh", ["nohup", "sh", "tools/check.sh"]),
    ],
)
def test_attack_protected_script_behind_a_wrapper_replaced(
    world: World, script: str, argv: list[str]
) -> None:
    """The script a check runs is its own file, also when a wrapper starts the interpreter
    (`env python3 tools/check.py`, `timeout 60 sh tools/check.sh`, `nice ... ./tools/check.sh`):
    the wrapper was read as the program, so nothing of the command was protected; the agent
    rewrote the failing script to exit 0, `git audit run` signed a PASS and the gate said PASS
    (all five before the fix). The command past the wrappers is read as a check's own:
    `plan.protected-changed`."""
    failing = "import sys\nsys.exit(1)\n" if script.endswith(".py") else "#!/bin/sh\nexit 1\n"
    world.repo.write(script, failing, mode=0o755)
    world.seal(plan(step("unit", check(*argv))))
    assert world.run().verdict == "FAIL"
    passing = "import sys\nsys.exit(0)\n" if script.endswith(".py") else "#!/bin/sh\nexit 0\n"
    world.repo.write(script, passing, mode=0o755)
    world.repo.commit(f"make it pass: {script}")
    world.run()  # the rewritten script passes (PASS before the fix)
    judged = assert_plan(world.gate(), "plan.protected-changed", "FAIL")
    assert f"changed: {script}" in judged.reasons[0].message
