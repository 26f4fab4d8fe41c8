"""Bytecode the tree holds in place of a protected source.

Python runs a module from ``__pycache__`` when the ``.pyc`` there says it is current: one
compiled ``--invalidation-mode unchecked-hash`` always is (the source is never looked at), one
stamped with the source's modification time and size is when the checkout's file has them (a
kept checkout keeps an unchanged file's times, which anyone can read in gitaudit's cache), and
pytest keeps its own cache of rewritten test modules, stamped the same way. The seal protects
the check's sources (``tools/check.py`` of ``python -m tools.check``, ``test_*.py`` of a pytest
check, the plan's ``protect`` globs), not a ``__pycache__`` file beside them, so a committed
``.pyc`` made a sealed, unchanged, failing check pass. The checks' Python now keeps its bytecode
cache in a private folder (``PYTHONPYCACHEPREFIX``): what the tree holds in ``__pycache__`` is
never read, and the sources run.
"""

from __future__ import annotations

import importlib.util
import marshal
import py_compile
import sys
from pathlib import Path

import pytest

from gitaudit.places import checkouts_dir
from tests.adversarial.conftest import World, check, plan, step

PY = sys.executable
TAG = sys.implementation.cache_tag
PASSING = "raise SystemExit(0)\n"
FAILING_TEST = "def test_answer():\n    assert 6 * 7 == 41\n"


def _unchecked(world: World, rel: str, source: str, tmp: Path) -> None:
    """Write *source* compiled as an unchecked hash-based ``.pyc`` at *rel* of the work tree."""
    src = tmp / "cheat.py"
    src.write_text(source)
    target = world.path / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    py_compile.compile(
        str(src), cfile=str(target), invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
    )


def _stamped(world: World, rel: str, source: str, stamp_of: Path) -> None:
    """Write *source* compiled as a timestamp ``.pyc`` at *rel*, stamped with the modification
    time and size of *stamp_of* (the file as the kept checkout holds it)."""
    st = stamp_of.stat()
    header = (
        importlib.util.MAGIC_NUMBER
        + b"\0\0\0\0"
        + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
        + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    )
    code = compile(source, str(stamp_of), "exec")
    target = world.path / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(header + marshal.dumps(code))


def _kept(world: World) -> Path:
    return Path(checkouts_dir(world.path / ".git")) / "0" / "tree"


def _pytest_tag() -> str:
    return f"{TAG}-pytest-{pytest.__version__}"


@pytest.mark.parametrize("how", ["unchecked-hash", "timestamp"])
def test_attack_bytecode_beside_the_module_a_check_runs(
    world: World, tmp_path: Path, how: str
) -> None:
    """``python -m tools.check`` (protected: tools/check.py) fails; the agent commits
    ``tools/__pycache__/check.<tag>.pyc`` that exits 0. Before the fix: PASS (the gate saw
    no protected file changed). Now the source runs: FAIL."""
    world.repo.write("tools/__init__.py", "")
    world.repo.write("tools/check.py", "raise SystemExit(1)\n")
    world.seal(plan(step("unit", check(PY, "-m", "tools.check"))))
    assert world.run().verdict == "FAIL"
    rel = f"tools/__pycache__/check.{TAG}.pyc"
    if how == "unchecked-hash":
        _unchecked(world, rel, PASSING, tmp_path)
    else:
        _stamped(world, rel, PASSING, _kept(world) / "tools/check.py")
    world.repo.commit("bytecode")
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]
    assert recorded.verdict == "FAIL"
    assert world.gate(None).verdict != "PASS"


def test_attack_bytecode_of_a_protected_helper_of_a_script(world: World, tmp_path: Path) -> None:
    """``python tools/check.py`` imports tools/verdict.py, which the plan protects
    (``tools/*.py``); the agent commits an unchecked ``.pyc`` of ``verdict`` that says OK."""
    world.repo.write("tools/verdict.py", "OK = False\n")
    world.repo.write("tools/check.py", "import verdict\nraise SystemExit(0 if verdict.OK else 1)\n")
    world.seal(plan(step("unit", check(PY, "tools/check.py"))) | {"protect": ["tools/*.py"]})
    assert world.run().verdict == "FAIL"
    _unchecked(world, f"tools/__pycache__/verdict.{TAG}.pyc", "OK = True\n", tmp_path)
    world.repo.commit("bytecode")
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]
    assert world.gate(None).verdict != "PASS"


def test_attack_bytecode_in_pytests_own_cache(world: World) -> None:
    """A pytest check with pytest's own discovery (tests/test_answer.py protected by
    ``**/test_*.py``) fails; the agent reads the test file's time and size in the kept
    checkout and commits ``tests/__pycache__/test_answer.<tag>-pytest-<v>.pyc`` so stamped,
    holding a test that passes: pytest took it for its rewritten module."""
    world.repo.write("tests/test_answer.py", FAILING_TEST)
    world.seal(
        plan(step("unit", {"type": "pytest", "argv": ["-q", "-p", "no:cacheprovider"]}))
        | {"python": PY}
    )
    assert world.run().verdict == "FAIL"
    _stamped(
        world,
        f"tests/__pycache__/test_answer.{_pytest_tag()}.pyc",
        "def test_answer():\n    assert True\n",
        _kept(world) / "tests/test_answer.py",
    )
    world.repo.commit("bytecode")
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]
    assert world.gate(None).verdict != "PASS"


def test_control_bytecode_the_tree_holds_does_not_stop_a_passing_check(
    world: World, tmp_path: Path
) -> None:
    """Control: a tree that commits bytecode beside sources that pass still passes (the
    sources run), and the checks' Python writes nothing into the checkout."""
    world.repo.write("tools/__init__.py", "")
    world.repo.write("tools/check.py", "raise SystemExit(0)\n")
    _unchecked(world, f"tools/__pycache__/check.{TAG}.pyc", "raise SystemExit(1)\n", tmp_path)
    world.seal(plan(step("unit", check(PY, "-m", "tools.check"))))
    recorded = world.run()
    assert recorded.verdict == "PASS", recorded.doc["steps"]
    assert recorded.doc["purity"]["changed"] == []
