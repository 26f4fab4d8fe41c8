"""Configuration the agent plants above gitaudit's cache, where tools looking upwards from a
check's folder find it (pytest's ini files and ``conftest.py``, Node's ``node_modules``).

The fence keeps a *check* from making a new entry above its checkout
(``test_hermetic.py::test_attack_hermetic_check_plants_configuration_above_the_checkout``), and
``acquire`` clears gitaudit's own folders. But the agent prepares the machine before the user
starts ``git audit run``: as the user, it writes ``~/.cache`` and ``~`` itself, no check needed.
A run now refuses to start while a folder above gitaudit's cache holds one of the names tools
look for there (``gitaudit.run.checkout.UPWARD``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gitaudit.checks import fence
from gitaudit.errors import RunError
from gitaudit.places import cache_dir
from tests.adversarial.conftest import World, check, plan, step
from tests.adversarial.test_hermetic import PASS_EVERYTHING

# each names pytest's configuration file, as pytest finds it looking upwards
IMPORTLIB = "addopts = --import-mode=importlib\n"
PYTEST_CONFIGS = {
    "pytest.ini": "[pytest]\n" + IMPORTLIB,
    ".pytest.ini": "[pytest]\n" + IMPORTLIB,
    "tox.ini": "[pytest]\n" + IMPORTLIB,
    "setup.cfg": "[tool:pytest]\n" + IMPORTLIB,
    "pyproject.toml": '[tool.pytest.ini_options]\naddopts = "--import-mode=importlib"\n',
}
# where: the folder above gitaudit's cache folder the agent writes (``~/.cache``, ``~``)
WHERE = {"cache's parent": 1, "home": 2}


def _above(levels: int) -> Path:
    return Path(cache_dir()).parents[levels - 1]


def _seal_unit(world: World) -> None:
    """unit runs the sealed (protected) tests/test_add.py against calc.py, the agent's code."""
    world.repo.write(
        "tests/test_add.py", "from calc import add\ndef test_add():\n    assert add(2, 2) == 4\n"
    )
    world.repo.write("calc.py", "def add(a, b):\n    return a + b\n")
    world.seal(plan(step("unit", {"type": "pytest", "args": "-q -p no:cacheprovider tests"})))


def _failing_tree(world: World) -> None:
    world.repo.write("calc.py", "def add(a, b):\n    return a - b\n")
    world.repo.commit("add is broken")


@pytest.mark.parametrize("where", sorted(WHERE))
def test_attack_upward_node_modules_planted_above_the_cache(world: World, where: str) -> None:
    """A sealed check runs the tree's ``check.js``, which ``require('verdict')``: a package the
    tree does not hold, so a fresh clone fails. Before the user's ``git audit run`` the agent
    writes ``~/.cache/node_modules/verdict/index.js`` (or ``~/node_modules/...``) exporting
    ``ok``. Node resolves a bare name in the ``node_modules`` of every folder above the
    importing file, opening it by name (the fence denies listing those folders, not opening
    what they hold): the check passed, the runner key signed PASS and the gate said PASS (both
    before the fix). The run now refuses to start, naming the folder; nothing is recorded."""
    world.repo.write("check.js", "if (require('verdict') !== 'ok') process.exit(1);\n")
    world.seal(plan(step("unit", check("node", "check.js"))))
    world.repo.commit("a check needing a package the tree lacks")
    package = _above(WHERE[where]) / "node_modules" / "verdict"
    package.mkdir(parents=True)
    (package / "index.js").write_text("module.exports = 'ok';\n")
    with pytest.raises(RunError, match=r"node_modules lies above gitaudit's cache folder"):
        world.run()
    assert world.gate(None).verdict != "PASS"


@pytest.mark.parametrize("where", sorted(WHERE))
def test_attack_upward_package_json_planted_above_the_cache(world: World, where: str) -> None:
    """The same through the ``imports`` of the nearest ``package.json``: the tree's check
    ``require('#verdict')``, which only a package scope maps; the tree has no ``package.json``,
    so Node takes the nearest one above the checkout, the agent's in ``~/.cache`` (or ``~``),
    whose ``imports`` maps ``#verdict`` to a file of its own: PASS before the fix. Refused
    now, naming the file."""
    world.repo.write("check.js", "if (require('#verdict') !== 'ok') process.exit(1);\n")
    world.seal(plan(step("unit", check("node", "check.js"))))
    world.repo.commit("a check needing an import map the tree lacks")
    folder = _above(WHERE[where])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "verdict.js").write_text("module.exports = 'ok';\n")
    (folder / "package.json").write_text('{"imports": {"#verdict": "./verdict.js"}}\n')
    with pytest.raises(RunError, match=r"package\.json lies above gitaudit's cache folder"):
        world.run()
    assert world.gate(None).verdict != "PASS"


@pytest.mark.parametrize("fenced", [True, False], ids=["fenced", "no-landlock"])
@pytest.mark.parametrize("where", sorted(WHERE))
@pytest.mark.parametrize("config", sorted(PYTEST_CONFIGS))
def test_attack_upward_pytest_configuration_planted_above_the_cache(
    world: World, monkeypatch: pytest.MonkeyPatch, config: str, where: str, fenced: bool
) -> None:
    """The tree's test fails and the tree holds no pytest configuration. Before the user's
    run the agent writes a pytest configuration file (``pytest.ini``, ``.pytest.ini``,
    ``tox.ini``, ``setup.cfg``, ``pyproject.toml``) with ``--import-mode=importlib`` and a
    ``conftest.py`` that turns every failure into a pass into ``~/.cache`` or ``~``. pytest,
    looking upwards from the checkout, took that folder as its rootdir and loaded the conftest:
    without Landlock the runner key signed PASS and the gate said PASS (before the fix);
    fenced, pytest then failed to list its rootdir (the fence denies listing the folders above
    the cache), and the run FAILed by that accident. The run now refuses to start either way,
    naming the file."""
    if not fenced:
        monkeypatch.setattr(fence, "_ABI", 0)  # a kernel without Landlock
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    _seal_unit(world)
    _failing_tree(world)
    folder = _above(WHERE[where])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / config).write_text(PYTEST_CONFIGS[config])
    (folder / "conftest.py").write_text(PASS_EVERYTHING)
    with pytest.raises(RunError, match=r"lies above gitaudit's cache folder"):
        world.run()
    assert world.gate(None).verdict != "PASS"


def test_control_upward_nothing_planted_the_tree_is_judged_by_itself(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control: with nothing planted above the cache, the passing tree PASSes and the broken
    one FAILs, each judged by itself."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    _seal_unit(world)
    world.repo.commit("add works")
    assert world.run().verdict == "PASS"
    assert world.gate(None).verdict == "PASS"
    _failing_tree(world)
    assert world.run().verdict == "FAIL"
    assert world.gate(None).verdict == "FAIL"
