"""Attacks through a declared ignored path (a virtualenv) that holds the project's own modules.

A plan may declare ``ignored_paths: [".venv"]`` so that its checks use the user's virtualenv.
What the virtualenv holds is the user's environment (third-party packages), but a module or
package there named like one of the tree's own is the project's code shadowed: the checks import
that copy, which the tree does not pin, instead of the judged sources.
"""

from __future__ import annotations

import json
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gitaudit.errors import RunError
from gitaudit.places import checkouts_dir
from tests.adversarial.conftest import World, check, plan, step

# the check adds the tree's root after the interpreter's own path (a common test runner shape,
# and what pytest's --import-mode=append does): honestly, it imports the tree's app
CHECK = """import os, sys
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import app
sys.exit(0 if app.ANSWER == 42 else 1)
"""
SRC_CHECK = CHECK.replace("'..'", "'..', 'src'")
FIXED = "ANSWER = 42\n"


def _venv(world: World) -> Path:
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", ".venv"], cwd=world.path, check=True
    )
    (site,) = (world.path / ".venv" / "lib").glob("python3*/site-packages")
    return site


def _plant(site: Path, variant: str) -> None:
    if variant == "module":
        (site / "app.py").write_text(FIXED)
    elif variant == "package":
        (site / "app").mkdir()
        (site / "app" / "__init__.py").write_text(FIXED)
    elif variant == "sourceless-bytecode":
        source = site.parent / "app_source.py"
        source.write_text(FIXED)
        py_compile.compile(str(source), cfile=str(site / "app.pyc"))
        source.unlink()
    elif variant == "pth-folder-inside-the-venv":
        shadow = site.parents[2] / "shadow"  # .venv/shadow
        shadow.mkdir()
        (shadow / "app.py").write_text(FIXED)
        (site / "extra.pth").write_text("../../../shadow\n")
    elif variant == "pth-folder-outside-the-work-tree":
        shadow = site.parents[4] / "shadow"  # beside the work tree
        shadow.mkdir()
        (shadow / "app.py").write_text(FIXED)
        (site / "extra.pth").write_text(f"{shadow}\n")
    elif variant == "site-packages-linked-outside":
        outside = site.parents[4] / "site-packages"
        site.rename(outside)
        site.symlink_to(outside)
        (outside / "app.py").write_text(FIXED)
    else:  # pragma: no cover
        raise AssertionError(variant)


VARIANTS = [
    "module",
    "package",
    "sourceless-bytecode",
    "pth-folder-inside-the-venv",
    "pth-folder-outside-the-work-tree",
    "site-packages-linked-outside",
]


@pytest.mark.parametrize("layout", ["flat", "src"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_attack_shadowed_modules_project_module_in_a_declared_virtualenv(
    world: World, variant: str, layout: str
) -> None:
    """app.py (or src/app/__init__.py) says ANSWER = 41 and the sealed check, run with the
    declared virtualenv's python, needs 42. The agent puts a fixed copy of the project's own
    module in the virtualenv (a module, a package, sourceless bytecode, a folder a .pth adds
    inside the virtualenv or outside the work tree, site-packages linked out): the check
    imported it before the tree's, and the run and the gate said PASS for a tree whose check
    fails with an honest virtualenv (all before the fix). A declared ignored path holding a
    module named like a top-level module or package of the tree, where Python looks for
    modules, is refused."""
    world.repo.write(".gitignore", "/.venv\n")
    if layout == "flat":
        world.repo.write("app.py", "ANSWER = 41\n")
        world.repo.write("tests/check.py", CHECK)
    else:
        world.repo.write("src/app/__init__.py", "ANSWER = 41\n")
        world.repo.write("tests/check.py", SRC_CHECK)
    site = _venv(world)
    world.seal(
        plan(step("unit", check(".venv/bin/python", "tests/check.py")))
        | {"ignored_paths": [".venv"]}
    )
    assert world.run().verdict == "FAIL"  # the honest virtualenv
    _plant(site, variant)
    with pytest.raises(RunError, match="named like a module of the tree: it would shadow"):
        world.run()


def test_an_honest_virtualenv_without_the_projects_modules_is_used(world: World) -> None:
    """Control: third-party modules in the virtualenv are used, the tree's app is the one
    imported, and the check passes when the tree is right."""
    world.repo.write(".gitignore", "/.venv\n")
    world.repo.write("app.py", "ANSWER = 42\n")
    world.repo.write("tests/check.py", CHECK.replace("import app", "import app, helper"))
    site = _venv(world)
    (site / "helper.py").write_text("VALUE = 1\n")
    (site / "application").mkdir()
    (site / "application" / "__init__.py").write_text("")
    world.seal(
        plan(step("unit", check(".venv/bin/python", "tests/check.py")))
        | {"ignored_paths": [".venv"]}
    )
    recorded = world.run()
    assert recorded.verdict == "PASS", recorded.doc["reasons"]


# ----------------------------------------------------------------------------- node_modules

NODE_CHECK = "process.exit(require('myproj').ANSWER === 42 ? 0 : 1)\n"


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("variant", ["package", "scoped", "in-a-sub-project"])
def test_attack_shadowed_modules_project_package_in_declared_node_modules(
    world: World, variant: str
) -> None:
    """The tree is the npm package ``myproj`` (index.js says ANSWER = 41, package.json names it
    with no ``exports``), and the sealed check requires it by its own name, which node resolves
    through node_modules. The agent puts a fixed copy of the project at ``node_modules/myproj``
    (or ``@acme/myproj``; or in a sub-project, web/node_modules beside web/package.json): the run
    and the gate said PASS for a tree whose check fails with an honest node_modules (all before
    the fix). A package in a declared node_modules named like the tree's own is refused."""
    name = "@acme/myproj" if variant == "scoped" else "myproj"
    top = "web" if variant == "in-a-sub-project" else ""
    modules = declared = f"{top}/node_modules" if top else "node_modules"
    world.repo.write(".gitignore", "node_modules/\n")
    world.repo.write(f"{top}/package.json" if top else "package.json", json.dumps({"name": name}))
    world.repo.write(f"{top}/index.js" if top else "index.js", "exports.ANSWER = 41\n")
    world.repo.write(f"{top}/check.js" if top else "check.js", NODE_CHECK.replace("myproj", name))
    world.repo.write(f"{modules}/left-pad/index.js", "module.exports = 1\n")
    argv = ["node", f"{top}/check.js" if top else "check.js"]
    world.seal(plan(step("unit", check(*argv))) | {"ignored_paths": [declared]})
    assert world.run().verdict == "FAIL"  # the honest node_modules
    world.repo.write(f"{modules}/{name}/package.json", json.dumps({"name": name}))
    world.repo.write(f"{modules}/{name}/index.js", "exports.ANSWER = 42\n")
    with pytest.raises(RunError, match="named like the tree's own package"):
        world.run()


# ----------------------------------------------------------------------- the bytecode cache

BYTECODE_HOOKS = {
    "pth-import-line": {"speed.pth": "import sys; sys.pycache_prefix = {prefix!r}\n"},
    "sitecustomize": {"sitecustomize.py": "import sys\nsys.pycache_prefix = {prefix!r}\n"},
    "module-a-pth-imports": {
        "speed.pth": "import _speedup\n",
        "_speedup/__init__.py": "import sys\nsys.pycache_prefix = {prefix!r}\n",
    },
    "prefix-built-at-run-time": {
        "sitecustomize.py": (
            "import os, sys\nsetattr(sys, 'pycache_' + 'prefix', "
            "os.path.join(os.path.dirname(__file__), *['..'] * 3, 'pc'))\n"
        ),
    },
}


@pytest.mark.parametrize("hook", sorted(BYTECODE_HOOKS))
def test_attack_shadowed_modules_bytecode_cache_moved_into_the_virtualenv(
    world: World, hook: str
) -> None:
    """app.py says ANSWER = 41 and the check needs 42. The agent compiles a fixed app.py
    (``unchecked-hash``: never compared with the source) to where a bytecode cache at
    ``.venv/pc`` keeps the private checkout's app.py (its path anyone can work out), and has
    the virtualenv set ``sys.pycache_prefix`` there at start-up (a .pth import line,
    sitecustomize, a module a .pth imports, or a prefix built at run time): Python ran that
    bytecode in place of the tree's source, and the run and the gate said PASS (all four before
    the fix). A declared path whose start-up files move the bytecode cache, or that holds
    bytecode cached for the checkout's files, is refused."""
    world.repo.write(".gitignore", "/.venv\n")
    world.repo.write("app.py", "ANSWER = 41\n")
    world.repo.write("check.py", "import app, sys\nsys.exit(0 if app.ANSWER == 42 else 1)\n")
    site = _venv(world)
    world.seal(
        plan(step("unit", check(".venv/bin/python", "check.py"))) | {"ignored_paths": [".venv"]}
    )
    assert world.run().verdict == "FAIL"
    tree = Path(checkouts_dir(world.path / ".git")) / "0" / "tree"
    prefix = world.path / ".venv" / "pc"
    source = world.path / ".venv" / "fixed.py"
    source.write_text(FIXED)
    cached = Path(f"{prefix}{tree.resolve()}") / f"app.{sys.implementation.cache_tag}.pyc"
    cached.parent.mkdir(parents=True)
    unchecked = py_compile.PycInvalidationMode.UNCHECKED_HASH
    py_compile.compile(str(source), cfile=str(cached), invalidation_mode=unchecked)
    source.unlink()
    for rel, text in BYTECODE_HOOKS[hook].items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text.format(prefix=str(prefix)))
    with pytest.raises(RunError, match=r"bytecode cache \(sys.pycache_prefix\)"):
        world.run()
