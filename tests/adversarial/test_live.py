"""Attacks on ``workspace: live`` steps: checks that run in the work tree itself.

A live step reads the live work tree, which the plan opens on purpose (its ignored files, an
effect outside the tree); but the evidence still names the work tree's fingerprint, so what the
checks read of the *tree* must be what that fingerprint holds. The run fingerprinted the work
tree again when the checks were done and took an equal tree for a pure run; two things escaped
that comparison.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from gitaudit.errors import RunError
from tests.adversarial.conftest import World, check, plan, step
from tests.gitrepo import GitRepo

READS_VERDICT = check("grep", "-qx", "ok", "verdict")
# the check that writes "ok" into the tracked verdict, and the one that puts the tree's bytes back
PUT_BACK = {
    "in-place": (
        "cp -p {f} $TMPDIR/kept.tmp && printf 'ok\\n' > {f}",
        "printf 'broken\\n' > {f}",
    ),
    "times-kept": (
        "cp -p {f} $TMPDIR/kept.tmp && printf 'ok\\n' > {f}",
        "cat $TMPDIR/kept.tmp > {f} && touch -r $TMPDIR/kept.tmp {f}",
    ),
    "renamed-back": ("mv {f} $TMPDIR/kept.tmp && printf 'ok\\n' > {f}", "mv $TMPDIR/kept.tmp {f}"),
}


def _shell(cmd: str) -> dict[str, Any]:
    return {"type": "run", "cmd": cmd, "shell": True}


def _live_plan(*steps: dict[str, Any], level: str) -> dict[str, Any]:
    """*steps* live: the plan's workspace, or the first step's beside a checkout step."""
    if level == "plan":
        return plan(*steps) | {"workspace": "live"}
    first, *rest = steps
    return plan(first | {"workspace": "live"}, *rest, step("lint", check("true")))


def _submodule(world: World, tmp_path: Path, *, nested: bool = False) -> None:
    """lib, a submodule whose verdict says broken (in lib/inner, a nested one, when *nested*)."""
    lib = GitRepo.create(tmp_path / "lib")
    lib.write("verdict", "broken\n")
    allow = ("-c", "protocol.file.allow=always")
    if nested:
        inner = GitRepo.create(tmp_path / "inner")
        inner.write("verdict", "broken\n")
        inner.commit("v1")
        lib.git(*allow, "submodule", "add", "-q", str(inner.path), "inner")
    lib.commit("v1")
    world.repo.git(*allow, "submodule", "add", "-q", str(lib.path), "lib")
    world.repo.commit("add lib")
    if nested:
        world.repo.git(*allow, "submodule", "update", "-q", "--init", "--recursive")


@pytest.mark.parametrize("level", ["plan", "step"])
@pytest.mark.parametrize("how", sorted(PUT_BACK))
def test_attack_live_check_writes_the_work_tree_and_puts_it_back(
    world: World, how: str, level: str
) -> None:
    """In a live step the agent's build writes "ok" into the tracked verdict (committed
    "broken"), unit reads it, and a last check puts the tree's bytes back: in place, with the
    file's times too, or renaming the tree's file aside and back. The purity check fingerprinted
    the work tree after the checks and found the tree it began with: a signed PASS for a tree
    whose verdict says broken (all six before the fix), with the plan live or one step. The
    stamps (inode, change time) of the tree's files are now taken before the checks and
    compared after them, as in the private checkout: the run FAILs, naming the file."""
    write, put_back = (_shell(cmd.format(f="verdict")) for cmd in PUT_BACK[how])
    world.repo.write("verdict", "broken\n")
    world.repo.commit("verdict")
    world.seal(_live_plan(step("unit", write, READS_VERDICT, put_back), level=level))
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "passed", recorded.doc["steps"]["unit"]
    assert recorded.verdict == "FAIL", recorded.doc
    assert recorded.doc["purity"]["changed"] == ["verdict (written during the run, then put back)"]
    assert world.gate(None).verdict != "PASS"


@pytest.mark.parametrize("target", ["lib/verdict", "lib/inner/verdict"])
@pytest.mark.parametrize("how", sorted(PUT_BACK))
def test_attack_live_check_writes_a_submodule_and_puts_it_back(
    world: World, tmp_path: Path, how: str, target: str
) -> None:
    """The same in a submodule's file, and in a nested submodule's: the fingerprint records
    only each submodule's commit, so the purity check saw nothing of lib/verdict even when it
    stayed "ok". The stamps reach into the checked-out submodules."""
    _submodule(world, tmp_path, nested=True)
    write, put_back = (_shell(cmd.format(f=target)) for cmd in PUT_BACK[how])
    reads = check("grep", "-qx", "ok", target)
    world.seal(_live_plan(step("unit", write, reads, put_back), level="plan"))
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "passed", recorded.doc["steps"]["unit"]
    assert recorded.verdict == "FAIL", recorded.doc
    named = f"{target} (written during the run, then put back)"
    assert recorded.doc["purity"]["changed"] == [named]
    assert world.gate(None).verdict != "PASS"


@pytest.mark.parametrize("target", ["lib/verdict", "lib/inner/verdict"])
def test_attack_live_check_leaves_a_submodule_changed(
    world: World, tmp_path: Path, target: str
) -> None:
    """A live step's build writes "ok" into a submodule's verdict and leaves it: unit passed,
    and the purity check, which fingerprinted only the superproject (lib's commit unchanged),
    said pure: PASS before the fix. The submodule's own work tree is compared with its commit
    after the checks: the run FAILs, naming it."""
    _submodule(world, tmp_path, nested=True)
    world.seal(
        _live_plan(
            step("unit", _shell(f"printf 'ok\\n' > {target}"), check("grep", "-qx", "ok", target)),
            level="plan",
        )
    )
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "passed", recorded.doc["steps"]["unit"]
    assert recorded.verdict == "FAIL", recorded.doc
    changed = recorded.doc["purity"]["changed"]
    assert changed == [f"{target.rsplit('/', 1)[0]} (submodule changed)"], changed


# how the agent leaves lib's (or lib/inner's) work tree unlike the commit the tree records
DIRTY = (
    "edited",
    "staged",
    "edit-marked-assume-unchanged",
    "edit-marked-skip-worktree",
    "ignore-all-in-config",
    "untracked-override",
    "gitfile-removed",
    "folder-without-git",
)


def _dirty(world: World, sub: Path, how: str) -> None:
    if how == "untracked-override":
        (sub / "override").write_text("ok\n")
        return
    if how.startswith("edit-marked-"):
        GitRepo(sub).git("update-index", f"--{how.removeprefix('edit-marked-')}", "verdict")
    elif how == "ignore-all-in-config":
        world.repo.git("config", "diff.ignoreSubmodules", "all")
    elif how == "gitfile-removed":
        (sub / ".git").unlink()
    elif how == "folder-without-git":
        shutil.rmtree(sub)
        sub.mkdir()
    (sub / "verdict").write_text("ok\n")
    if how == "staged":
        GitRepo(sub).git("add", "verdict")


@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("how", DIRTY)
def test_attack_live_uncommitted_submodule_state_is_read(
    world: World, tmp_path: Path, how: str, nested: bool
) -> None:
    """The tree records lib (or lib/inner) at a commit whose verdict says broken; the agent
    edits the verdict in the submodule's work tree (staged or not, hidden from `git status`
    by an index mark or `diff.ignoreSubmodules`), adds an untracked override that unit reads,
    or writes the verdict into the submodule's folder without its `.git` (removed, or the
    folder made afresh: the fingerprint keeps the gitlink).
    In the private checkout this is never read; a live step reads it, and the fingerprint,
    which records each submodule's commit only, is the committed tree: a signed PASS for a tree
    whose lib says broken (every variant, before the fix). A live run now refuses to start
    while a checked-out submodule is not exactly its commit, or one not checked out is not an
    empty folder, and names it."""
    _submodule(world, tmp_path, nested=nested)
    sub = world.path / "lib" / ("inner" if nested else "")
    unit = _shell(
        f"test -f {sub.relative_to(world.path)}/override || "
        f"grep -qx ok {sub.relative_to(world.path)}/verdict"
    )
    world.seal(_live_plan(step("unit", unit), level="plan"))
    assert world.run().verdict == "FAIL"  # the committed tree fails
    _dirty(world, sub, how)
    where = "lib/inner" if nested else "lib"
    with pytest.raises(RunError, match=f"submodule {where!r}"):
        world.run()
    assert world.gate(None).verdict != "PASS"


def test_live_steps_that_read_and_build_beside_the_tree_stay_pure(
    world: World, tmp_path: Path
) -> None:
    """Control: a live step that reads the tree and its submodules and writes ignored files
    beside them passes, run after run."""
    _submodule(world, tmp_path, nested=True)
    world.repo.write(".gitignore", "out/\n")
    world.repo.write("verdict", "ok\n")
    world.repo.commit("verdict")
    build = _shell("mkdir -p out && cat verdict lib/verdict lib/inner/verdict > out/all")
    reads = check("grep", "-qx", "ok", "out/all")
    reads_lib = check("test", "-f", "lib/verdict")
    world.seal(_live_plan(step("unit", build, reads, reads_lib), level="plan"))
    for _ in range(2):
        recorded = world.run()
        assert recorded.verdict == "PASS", recorded.doc
        assert recorded.doc["purity"]["changed"] == []
