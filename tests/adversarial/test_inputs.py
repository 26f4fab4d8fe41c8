"""Attacks on incremental evidence: a step whose ``inputs`` are unchanged is carried, not run.

The agent keeps every file the globs match byte for byte and breaks what one of them points to:
a symlink inside the inputs whose target lives elsewhere in the tree. Evidence binds what ran,
so the step's input digest covers the content behind the link and the step runs again.
"""

from __future__ import annotations

import os
import sqlite3
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


# variant -> (the .gitattributes path, its line): each changes the bytes git writes for the
# file the check reads, without changing the file's blob
ATTRIBUTES: dict[str, tuple[str, str]] = {
    "line endings, in the root": (".gitattributes", "*.txt text eol=crlf\n"),
    "line endings, beside the file": ("src/.gitattributes", "impl.txt text eol=crlf\n"),
    "line endings, by a macro": (".gitattributes", "[attr]dos text eol=crlf\n*.txt dos\n"),
}


@pytest.mark.parametrize("variant", sorted(ATTRIBUTES))
def test_attack_inputs_attributes_outside_the_inputs_change_the_bytes(
    world: World, variant: str
) -> None:
    """The step's inputs are `src/**`; the agent adds a `.gitattributes` that rewrites how git
    checks out a file of them (CRLF line endings) while every blob the globs match stays the
    same. A checkout of the new tree holds other bytes, so the step runs again (and fails)
    instead of being carried."""
    world.repo.write("src/impl.txt", "works\n")
    reads = check(
        "python3", "-c", "import sys; sys.exit(open('src/impl.txt','rb').read() != b'works\\n')"
    )
    world.seal(plan(step("unit", reads, inputs=["src/**"]), step("lint")))
    assert world.run().verdict == "PASS"
    path, line = ATTRIBUTES[variant]
    world.repo.write(path, line)
    world.repo.git("add", path)  # only the attributes: every blob the globs match is kept
    world.repo.git("commit", "-q", "-m", "how git writes the file")
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]["unit"]
    assert recorded.verdict == "FAIL"
    assert_plan(world.gate(), "step.failed", "FAIL")


# ------------------------------------------------------------- the lookup index names the source


def _index(world: World) -> sqlite3.Connection:
    return sqlite3.connect(world.handle().state_dir / "index.sqlite")


@pytest.mark.parametrize("forgery", ["a failed execution marked passed", "a pass given new inputs"])
def test_attack_inputs_index_names_a_carry_source_that_does_not_hold(
    world: World, forgery: str
) -> None:
    """The lookup index says which run a step with unchanged inputs carries; the agent edits
    it (``.git/gitaudit/index.sqlite``) so that the run carries a step it should execute: the
    step's failed execution marked passed, or an older pass given the broken tree's input
    digest. The run reads the named run's signed record, sees the step did not pass with these
    inputs, and executes it: FAIL (the gate always refused such a carry; the run itself said
    PASS and exited 0)."""
    world.repo.write("src/impl.txt", "works\n")
    unit: dict[str, Any] = step(
        "unit", check("grep", "-q", "works", "src/impl.txt"), inputs=["src/**"]
    )
    world.seal(plan(unit))
    assert world.run().verdict == "PASS"
    world.repo.write("src/impl.txt", "broken\n")
    world.repo.commit("break the input")
    failed = world.run()
    assert failed.verdict == "FAIL"
    digest = failed.doc["steps"]["unit"]["input_digest"]
    with _index(world) as db:
        if forgery == "a failed execution marked passed":
            db.execute("UPDATE steps SET status='passed' WHERE step='unit' AND status='failed'")
        else:
            db.execute("DELETE FROM steps WHERE step='unit' AND status='failed'")
            db.execute("UPDATE steps SET input_digest=? WHERE step='unit'", (digest,))
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]["unit"]
    assert recorded.verdict == "FAIL"
    assert_plan(world.gate(), "step.failed", "FAIL")
