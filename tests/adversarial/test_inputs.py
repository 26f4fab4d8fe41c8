"""Attacks on incremental evidence: a step whose ``inputs`` are unchanged is carried, not run.

The agent keeps every file the globs match byte for byte and breaks what one of them points to:
a symlink inside the inputs whose target lives elsewhere in the tree. Evidence binds what ran,
so the step's input digest covers the content behind the link and the step runs again.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.adversarial.conftest import World, assert_plan, check, plan, step

# variant -> (symlinks: path -> target, the file the check reads, the step's inputs)
VARIANTS: dict[str, tuple[dict[str, str], str, list[str]]] = {
    "a link to the file": ({"src/impl.txt": "../lib/impl.txt"}, "src/impl.txt", ["src/**"]),
    "a link to its folder": ({"src/lib": "../lib"}, "src/lib/impl.txt", ["src/**"]),
    "a chain of links": (
        {"src/impl.txt": "../mid/impl.txt", "mid/impl.txt": "../lib/impl.txt"},
        "src/impl.txt",
        ["src/**"],
    ),
    "a link deep in a subfolder": (
        {"src/x/y/impl.txt": "../../../lib/impl.txt"},
        "src/x/y/impl.txt",
        ["src/**"],
    ),
    "a glob through a linked folder": ({"src/lib": "../lib"}, "src/lib/impl.txt", ["src/lib/*"]),
}


def _world_with_links(world: World, variant: str) -> None:
    links, read, patterns = VARIANTS[variant]
    world.repo.write("lib/impl.txt", "works\n")
    for path, target in links.items():
        (world.path / path).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, world.path / path)
    unit: dict[str, Any] = step("unit", check("grep", "-q", "works", read), inputs=patterns)
    world.seal(plan(unit, step("lint")))
    assert world.run().verdict == "PASS"


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_attack_inputs_content_behind_a_symlink_broken(world: World, variant: str) -> None:
    """The file behind the link is broken; every path the globs match is unchanged."""
    _world_with_links(world, variant)
    world.repo.write("lib/impl.txt", "broken\n")
    world.repo.commit("break what the link points to")
    recorded = world.run()
    assert recorded.verdict == "FAIL", recorded.doc["steps"]["unit"]
    assert recorded.doc["steps"]["unit"]["status"] == "failed"
    assert_plan(world.gate(), "step.failed", "FAIL")


@pytest.mark.parametrize("variant", ["a link to the file", "a link to its folder"])
def test_attack_inputs_link_retargeted_at_a_copy(world: World, variant: str) -> None:
    """The link is pointed at another file (or folder) whose content is broken."""
    links, _read, _patterns = VARIANTS[variant]
    _world_with_links(world, variant)
    world.repo.write("copy/impl.txt", "broken\n")
    for path, target in links.items():
        os.unlink(world.path / path)
        os.symlink(target.replace("../lib", "../copy"), world.path / path)
    world.repo.commit("retarget")
    assert world.run().verdict == "FAIL"
    assert_plan(world.gate(), "step.failed", "FAIL")
