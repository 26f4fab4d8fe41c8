"""Attacks on the gap between the fingerprinted tree and what the checks read.

The agent being audited can edit every file of the work tree and of ``.git/``, set any variable
for its own `git audit run`, and write anything the tree does not record. Each class below is
tried in several variants; every one must end in a FAIL (or a refused run), never in a PASS of a
tree the checks did not see. Checks run in a private checkout of the tree
(gitaudit/run/checkout.py) with an allow-listed environment (gitaudit/checks/environment.py).
"""

from __future__ import annotations

import json
import os
import py_compile
import shlex
import shutil
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from gitaudit.checks import fence
from gitaudit.errors import RepositoryError, RunError
from gitaudit.places import checkouts_dir
from tests.adversarial.conftest import World, assert_plan, check, plan, step
from tests.gitrepo import GitRepo, audit

# a check that passes only when the file "verdict" of the checked tree says "ok"
READS_VERDICT = check("grep", "-qx", "ok", "verdict")


def honest_failure(world: World, extra: dict[str, object] | None = None) -> None:
    """Seal a plan whose check fails on the committed tree (verdict says "broken")."""
    world.repo.write("verdict", "broken\n")
    world.seal(plan(step("unit", READS_VERDICT)) | (extra or {}))


def assert_fails(world: World, **kw: object) -> None:
    recorded = world.run(**kw)  # type: ignore[arg-type]
    assert recorded.verdict == "FAIL", recorded.doc["reasons"]
    assert world.gate(None).verdict != "PASS"


# ---------------------------------------------------------- the live work tree is not the tree


def test_attack_hermetic_ignored_file_shadows_nothing(world: World) -> None:
    """An ignored copy of the file the check reads: not in the tree, not in the checkout."""
    world.repo.write(".gitignore", "verdict.local\n")
    world.repo.write("verdict.local", "ok\n")
    world.seal(plan(step("unit", check("grep", "-qx", "ok", "verdict.local"))))
    assert_fails(world)


def test_attack_hermetic_info_exclude_hides_a_file_from_the_tree(world: World) -> None:
    """A file excluded only by .git/info/exclude (no trace in the tree) is not in the checkout."""
    world.seal(plan(step("unit", check("test", "-f", "secret-pass"))))
    (world.path / ".git" / "info").mkdir(exist_ok=True)
    (world.path / ".git" / "info" / "exclude").write_text("secret-pass\n")
    world.repo.write("secret-pass", "")
    assert_fails(world)


def test_attack_hermetic_global_excludes_hide_a_file_from_the_tree(
    world: World, tmp_path: Path
) -> None:
    excludes = tmp_path / "excludes"
    excludes.write_text("secret-pass\n")
    world.repo.git("config", "core.excludesFile", str(excludes))
    world.seal(plan(step("unit", check("test", "-f", "secret-pass"))))
    world.repo.write("secret-pass", "")
    assert_fails(world)


def test_attack_hermetic_empty_directory_is_not_in_the_tree(world: World) -> None:
    world.seal(plan(step("unit", check("test", "-d", "build"))))
    (world.path / "build").mkdir()
    assert_fails(world)


def test_attack_hermetic_live_edit_during_the_run_changes_nothing(world: World) -> None:
    """The work tree is edited to the passing content while the check runs: the check reads
    the checkout, which holds the fingerprinted (failing) content."""
    world.repo.write("verdict", "broken\n")
    flip = f"printf 'ok\\n' > {world.path}/verdict; sleep 0.2; grep -qx ok verdict"
    world.seal(plan(step("unit", {"type": "run", "cmd": flip, "shell": True})))
    recorded = world.run()
    assert recorded.verdict == "FAIL"
    assert (world.path / "verdict").read_text() == "ok\n"  # the live file was changed


def test_attack_hermetic_check_writes_the_checkout_is_impure(world: World) -> None:
    """A step rewrites a tracked file of the checkout for the next one: the run FAILs and names
    the path (purity, now on the checkout)."""
    world.repo.write("verdict", "broken\n")
    output = [{"name": "v", "verify": [{"type": "file_exists", "path": "verdict"}]}]
    world.seal(
        plan(
            step(
                "fix",
                {"type": "run", "cmd": "printf 'ok\\n' > verdict", "shell": True},
                outputs=output,
            ),
            step(
                "unit", READS_VERDICT, deps=["fix"], requires_outputs=[{"step": "fix", "name": "v"}]
            ),
        )
    )
    recorded = world.run()
    assert recorded.verdict == "FAIL"
    assert "verdict" in recorded.doc["purity"]["changed"]


# a check writes the tracked "verdict" for the check after it and puts the tree's bytes back
# once that one has read them: in place; with the file's times put back too; through a rename,
# the tree's own file moved aside and back (its inode kept)
WRITE_OK = "cp -p verdict $TMPDIR/kept.tmp && printf 'ok\\n' > verdict"
PUT_BACK = {
    "in-place": (WRITE_OK, "printf 'broken\\n' > verdict"),
    "times-kept": (WRITE_OK, "cat $TMPDIR/kept.tmp > verdict && touch -r $TMPDIR/kept.tmp verdict"),
    "renamed-back": (
        "mv verdict $TMPDIR/kept.tmp && printf 'ok\\n' > verdict",
        "mv $TMPDIR/kept.tmp verdict",
    ),
}


@pytest.mark.parametrize("where", ["next-steps", "one-step"])
@pytest.mark.parametrize("how", sorted(PUT_BACK))
def test_attack_hermetic_check_writes_the_checkout_and_puts_it_back(
    world: World, how: str, where: str
) -> None:
    """The checks before unit (the agent's build, in a step of its own or first in unit's)
    write "ok" into the tracked verdict, and a check after it (a packaging step, or last in
    unit's) puts the tree's bytes back: in place, with the file's times too, or by renaming
    the tree's file aside and back. unit read "ok" from a tree that says "broken", and the
    purity check, which compared what the checkout held at the end, found it equal to the tree:
    PASS (all six before the fix). The purity check now also compares every file's inode and
    change time (which no process can set back) with what the checks found."""
    write, put_back = ({"type": "run", "cmd": cmd, "shell": True} for cmd in PUT_BACK[how])
    world.repo.write("verdict", "broken\n")
    if where == "one-step":
        steps = [step("unit", write, READS_VERDICT, put_back)]
    else:
        output = [{"name": "v", "verify": [{"type": "file_exists", "path": "verdict"}]}]
        needs = [{"step": "build", "name": "v"}]
        steps = [
            step("build", write, outputs=output),
            step("unit", READS_VERDICT, deps=["build"], requires_outputs=needs, outputs=output),
            step(
                "package", put_back, deps=["unit"], requires_outputs=[{"step": "unit", "name": "v"}]
            ),
        ]
    world.seal(plan(*steps))
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "passed", recorded.doc["steps"]["unit"]
    assert recorded.verdict == "FAIL", recorded.doc
    assert recorded.doc["purity"]["changed"] == ["verdict (written during the run, then put back)"]
    assert world.gate(None).verdict != "PASS"


@pytest.mark.parametrize("how", sorted(PUT_BACK))
def test_attack_hermetic_put_back_a_file_an_earlier_run_wrote(world: World, how: str) -> None:
    """The same attack, armed only in the second run: the first, pure, leaves the checkout
    clean, and the second updates it by writing the one file that changed (``armed``). The
    verdict the checks write and put back was written by the first run's checkout, in an
    earlier second, so it has no stamp of its own: git's comparison of its stat data with the
    index (``git diff-files``) sees its change time in a later second, and the inode or change
    time the index records has moved."""
    write, put_back = (
        {"type": "run", "cmd": f"if test -f armed; then {cmd}; fi", "shell": True}
        for cmd in PUT_BACK[how]
    )
    world.repo.write("verdict", "broken\n")
    output = [{"name": "v", "verify": [{"type": "file_exists", "path": "verdict"}]}]
    world.seal(
        plan(
            step("build", write, outputs=output),
            step(
                "unit",
                READS_VERDICT,
                deps=["build"],
                requires_outputs=[{"step": "build", "name": "v"}],
                outputs=output,
            ),
            step(
                "package", put_back, deps=["unit"], requires_outputs=[{"step": "unit", "name": "v"}]
            ),
        )
    )
    first = world.run()
    assert first.doc["steps"]["unit"]["status"] == "failed" and first.doc["purity"]["changed"] == []
    world.repo.write("armed", "\n")
    time.sleep(1.02 - time.time() % 1.0)  # the second run in a later second than the first
    recorded = world.run()
    assert recorded.doc["workspace"]["fresh"] is False  # updated: one file written
    assert recorded.doc["steps"]["unit"]["status"] == "passed", recorded.doc["steps"]["unit"]
    assert recorded.verdict == "FAIL", recorded.doc
    assert recorded.doc["purity"]["changed"] == ["verdict (written during the run, then put back)"]
    assert world.gate(None).verdict != "PASS"


def test_a_check_that_only_reads_and_writes_ignored_files_is_pure(world: World) -> None:
    """Control: checks that read the tree, write ignored outputs beside it (and remove some)
    and read them back leave a pure run, run after run."""
    world.repo.write(".gitignore", "out/\n*.log\n")
    world.repo.write("verdict", "ok\n")
    world.repo.write("src/app.txt", "app\n")
    build = {
        "type": "run",
        "cmd": "mkdir -p out && cp src/app.txt out/app && echo done > src/build.log "
        "&& rm src/build.log && echo kept > build.log",
        "shell": True,
    }
    world.seal(plan(step("unit", build, READS_VERDICT, check("cmp", "out/app", "src/app.txt"))))
    for _ in range(2):
        recorded = world.run()
        assert recorded.verdict == "PASS", recorded.doc
        assert recorded.doc["purity"]["changed"] == []
    assert world.gate(None).verdict == "PASS"


# a check's own way to blind the purity check: the checkout's ".git" names its private git dir,
# whose settings the check can write before it edits a tracked file
PRIVATE_GIT_DIR = "$(sed 's/^gitdir: //' .git)"
EDIT_KEEPING_TIMES = (
    "cp -p verdict $TMPDIR/times.tmp && printf 'ok\\nxxx\\n' > verdict "  # the same size as before
    "&& touch -r $TMPDIR/times.tmp verdict && rm $TMPDIR/times.tmp"
)
BLINDS = {
    "ctime-not-trusted": f"git config core.trustctime false && {EDIT_KEEPING_TIMES}",
    "minimal-stat": f"git config core.checkStat minimal && {EDIT_KEEPING_TIMES}",
    "no-stat-at-all": f"git config core.ignoreStat true && {EDIT_KEEPING_TIMES}",
    "clean-filter": (
        'cp verdict "$TMPDIR/original.tmp" '
        '&& git config filter.same.clean "cat $TMPDIR/original.tmp" '
        f"&& echo 'verdict filter=same' > {PRIVATE_GIT_DIR}/info/attributes "
        "&& printf 'ok\\n' > verdict"
    ),
    "excluded-new-file": (
        f"echo /planted > {PRIVATE_GIT_DIR}/info/exclude && printf 'ok\\n' > planted"
    ),
}


@pytest.mark.parametrize("blind", sorted(BLINDS))
def test_attack_hermetic_check_blinds_the_purity_check(world: World, blind: str) -> None:
    """A check sets the checkout's private git dir up to hide its own edit (stat data git
    would trust, a clean filter giving the old blob, an exclude for a new file), then edits:
    the purity check writes those settings again and compares stat data in full, so the run
    is impure. The edit comes in the second run, once the checkout's files are older than its
    index (git re-reads racily clean files whatever it is told)."""
    world.repo.write("verdict", "broken\n")
    world.repo.write("planted.expected", "ok\n")
    attack = BLINDS[blind].replace("{}", "$PWD")
    fix = {"type": "run", "cmd": f"test -f armed || exit 0; {attack}", "shell": True}
    reads = check("sh", "-c", "grep -qx ok verdict || cmp -s planted planted.expected")
    output = [{"name": "v", "verify": [{"type": "file_exists", "path": "verdict"}]}]
    world.seal(
        plan(
            step("fix", fix, outputs=output),
            step("unit", reads, deps=["fix"], requires_outputs=[{"step": "fix", "name": "v"}]),
        )
    )
    assert world.run().verdict == "FAIL"  # honest: the verdict says broken
    time.sleep(1.1)  # the checkout's files (written above) now predate any index write
    world.repo.write("armed", "")
    world.repo.commit("arm the attack")
    recorded = world.run()
    assert recorded.doc["steps"]["fix"]["status"] == "passed", recorded.doc["steps"]["fix"]
    assert recorded.verdict == "FAIL", recorded.doc
    assert recorded.doc["purity"]["changed"], recorded.doc["purity"]
    assert world.gate(None).verdict != "PASS"


@pytest.mark.parametrize(
    "debris",
    [
        "mkdir -p sub/.git && echo x > sub/.git/hidden",
        "echo x > .gitattributes-untracked && mkdir d && echo gitdir: /nowhere > d/.git",
        "mkfifo pipe",
        "rm README.md",
    ],
    ids=["nested-dot-git", "gitfile", "fifo", "deleted-file"],
)
def test_attack_hermetic_debris_git_does_not_see_is_caught(world: World, debris: str) -> None:
    world.seal(plan(step("unit", check("true"), {"type": "run", "cmd": debris, "shell": True})))
    recorded = world.run()
    assert recorded.verdict == "FAIL", recorded.doc
    assert recorded.doc["purity"]["changed"]


# ------------------------------------------------------------------------- git settings


@pytest.mark.parametrize(
    "setting",
    [
        ("core.autocrlf", "true"),
        ("core.fileMode", "false"),
        ("core.symlinks", "false"),
        ("core.attributesFile", "ATTRS"),
    ],
)
def test_attack_hermetic_local_git_settings_do_not_change_the_bytes(
    world: World, tmp_path: Path, setting: tuple[str, str]
) -> None:
    """The checkout is written as a fresh clone with default settings would write it: bytes,
    modes and symlinks are the tree's whatever the repository's configuration says. (A setting
    that would make a checkout of the work tree write other bytes, `core.autocrlf=true` or a
    `core.attributesFile` of the repository's, is refused before anything runs: the work tree
    the evidence names could not hold the bytes the checks read.)"""
    attrs = tmp_path / "attrs"
    attrs.write_text("* text eol=crlf ident\n")
    world.repo.write("script.sh", "#!/bin/sh\nexit 0\n", mode=0o755)
    os.symlink("script.sh", world.path / "link")
    world.repo.write("data.txt", "line\n")
    probe = (
        "test -x script.sh && test -L link && [ \"$(od -An -c data.txt | tr -d ' ')\" = 'line\\n' ]"
    )
    world.seal(plan(step("unit", {"type": "run", "cmd": probe, "shell": True})))
    key, value = setting
    world.repo.git("config", key, str(attrs) if value == "ATTRS" else value)
    if key in ("core.autocrlf", "core.attributesFile"):
        with pytest.raises(RepositoryError, match=r"defines content conversions"):
            world.run()
        return
    recorded = world.run()
    assert recorded.verdict == "PASS", recorded.doc["steps"]["unit"]


def test_attack_hermetic_info_attributes_filter_is_not_applied(world: World) -> None:
    """A smudge filter wired through .git/info/attributes (and a driver in the global
    configuration): a fresh clone would not apply it, nor does the checkout; the run refuses
    such a work tree (a converting `info/attributes`) before anything runs."""
    honest_failure(world)
    (world.path / ".git" / "info").mkdir(exist_ok=True)
    (world.path / ".git" / "info" / "attributes").write_text("verdict filter=flip\n")
    world.repo.git("config", "--global", "filter.flip.smudge", "sed s/broken/ok/")
    with pytest.raises(RepositoryError, match="sets attributes that convert files"):
        world.run()
    assert_plan(world.gate("HEAD"), "evidence.missing", "UNKNOWN")  # nothing was run


def test_attack_hermetic_tree_filter_must_be_declared(world: World) -> None:
    """The tree itself asks for a filter that a fresh clone without it would not apply."""
    world.repo.write(".gitattributes", "verdict filter=flip\n")
    world.repo.git("config", "--global", "filter.flip.smudge", "sed s/broken/ok/")
    world.repo.git("config", "--global", "filter.flip.clean", "cat")
    honest_failure(world)
    with pytest.raises(RunError, match="content filter 'flip'"):
        world.run()


@pytest.mark.parametrize("separator", ["\u2028", "\x0c", "\x1e"], ids=["u2028", "ff", "rs"])
def test_attack_hermetic_tree_filter_named_after_a_line_separator(
    world: World, separator: str
) -> None:
    """The same, spelled so that only git reads it: the pattern of the .gitattributes line is
    ``v<SEP>#x``, a file the check reads, so Python's ``splitlines`` cut it into ``v`` and a
    comment line, ``#x filter=flip``, while git (lines end at ``\\n`` alone) applied the filter
    to that file. Undeclared, a filter of the user's global configuration (Git LFS, say, whose
    objects in ``.git/lfs`` are the agent's to write) put bytes the tree does not hold into the
    checkout: PASS before the fix."""
    name = f"v{separator}#x"
    world.repo.write(".gitattributes", f"{name} filter=flip\n")
    world.repo.git("config", "--global", "filter.flip.smudge", "sed s/broken/ok/")
    world.repo.git("config", "--global", "filter.flip.clean", "cat")
    world.repo.write(name, "broken\n")
    world.seal(plan(step("unit", check("grep", "-qx", "ok", name))))
    with pytest.raises(RunError, match="content filter 'flip'"):
        world.run()


def test_a_declared_filter_is_applied_with_the_users_driver(world: World) -> None:
    """A filter the plan declares is applied with the driver of the user's global configuration
    (a round trip: clean undoes smudge, as Git LFS does)."""
    world.repo.write(".gitattributes", "verdict filter=flip\n")
    world.repo.git("config", "--global", "filter.flip.smudge", "sed s/bad/ok/")
    world.repo.git("config", "--global", "filter.flip.clean", "sed s/ok/bad/")
    world.repo.write("verdict", "ok\n")  # stored as "bad" by the clean filter
    world.seal(plan(step("unit", READS_VERDICT)) | {"filters": ["flip"]})
    assert world.repo.git("cat-file", "-p", "HEAD:verdict") == "bad\n"
    recorded = world.run()
    assert recorded.verdict == "PASS", (recorded.doc["reasons"], recorded.doc["purity"])
    assert recorded.doc["workspace"]["filters"] == {
        "flip.clean": "sed s/ok/bad/",
        "flip.smudge": "sed s/bad/ok/",
    }


_USERS_DRIVER = "#!/bin/sh\ncat\n"  # a pass-through, as Git LFS is for a file it does not store
_AGENTS_DRIVER = '[filter "lfs"]\n\tsmudge = sed s/broken/ok/\n\tclean = sed s/ok/broken/\n'


@pytest.mark.parametrize("how", ["GIT_CONFIG_GLOBAL", "HOME", "XDG_CONFIG_HOME"])
def test_attack_hermetic_declared_filter_driver_chosen_by_the_callers_environment(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The plan declares the content filter ``lfs`` (a Git LFS project), whose driver a run
    takes from the global git configuration, trusted like the key folder. But which file that is,
    the caller of ``git audit run`` says (``GIT_CONFIG_GLOBAL``, ``HOME``, ``XDG_CONFIG_HOME``):
    the agent names one of its own whose driver turns the committed ``broken`` into ``ok`` as
    the checkout is written (and back as git reads it, so the work tree it fingerprints and
    the purity check agree), and its run checks ``ok`` and signs PASS for the tree that holds
    ``broken``. Before the fix the gate (the user's ``status``, the hooks, the server judging
    the pushed commit with that run) said PASS for HEAD, which fails in every honest checkout:
    every variant got through. Now a judge that holds the run's key compares the drivers the
    run recorded with its own global configuration's, as it compares the checks' programs:
    the step is UNKNOWN (``evidence.program-elsewhere``), also where the agent's own judgement
    left a remembered PASS."""
    user_bin = tmp_path / "user-bin"
    user_bin.mkdir()
    (user_bin / "lfs-filter").write_text(_USERS_DRIVER)
    (user_bin / "lfs-filter").chmod(0o755)
    monkeypatch.setenv("PATH", f"{user_bin}:{os.environ['PATH']}")
    if how == "XDG_CONFIG_HOME":  # the user keeps the global configuration in ~/.config/git
        monkeypatch.delenv("GIT_CONFIG_GLOBAL")
        dotfile = Path(os.environ["HOME"]) / ".gitconfig"
        xdg = Path(os.environ["XDG_CONFIG_HOME"]) / "git"
        xdg.mkdir(parents=True, exist_ok=True)
        driver = '[filter "lfs"]\n\tsmudge = lfs-filter\n\tclean = lfs-filter\n'
        (xdg / "config").write_text(dotfile.read_text() + driver)
        dotfile.unlink()
    else:
        world.repo.git("config", "--global", "filter.lfs.smudge", "lfs-filter")
        world.repo.git("config", "--global", "filter.lfs.clean", "lfs-filter")
    world.repo.write(".gitattributes", "verdict filter=lfs\n")
    world.repo.write("verdict", "broken\n")
    world.seal(plan(step("unit", READS_VERDICT)) | {"filters": ["lfs"]})
    evil = tmp_path / "evil"
    (evil / "git").mkdir(parents=True)
    with monkeypatch.context() as agent:
        if how == "GIT_CONFIG_GLOBAL":
            (evil / "gitconfig").write_text(_AGENTS_DRIVER)
            agent.setenv("GIT_CONFIG_GLOBAL", str(evil / "gitconfig"))
        elif how == "HOME":
            (evil / ".gitconfig").write_text(_AGENTS_DRIVER)
            agent.setenv("HOME", str(evil))
            agent.delenv("GIT_CONFIG_GLOBAL")
        else:
            (evil / "git" / "config").write_text(_AGENTS_DRIVER)
            agent.setenv("XDG_CONFIG_HOME", str(evil))
        world.repo.write("verdict", "ok\n")  # what the agent's driver writes for "broken"
        recorded = world.run()
        assert recorded.verdict == "PASS", recorded.doc["reasons"]
        assert recorded.tree == world.repo.git("rev-parse", "HEAD^{tree}").strip()
        # the agent's own judgement (`git audit status`), remembered in the verdict memo
        assert audit(world.path, "status", "HEAD").out.startswith("PASS")
    world.repo.write("verdict", "broken\n")  # as HEAD holds it
    judged = world.gate("HEAD")
    assert judged.verdict == "UNKNOWN", judged.plans[0].reasons
    assert "evidence.program-elsewhere" in {r.code for r in judged.plans[0].reasons}
    assert "content filter driver lfs." in " ".join(r.message for r in judged.plans[0].reasons)
    status = audit(world.path, "status")  # the work tree, as HEAD holds it
    assert not status.out.startswith("PASS"), status.out
    honest = world.run()  # the user's own run checks what HEAD holds
    assert honest.verdict == "FAIL"


# ---------------------------------------------------------------------- forged objects


def _plant(world: World, oid: str, content: bytes) -> None:
    """Write a loose object named *oid* that holds *content* (a forgery git will not notice)."""
    path = world.path / ".git" / "objects" / oid[:2] / oid[2:]
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.chmod(0o644)
    path.write_bytes(zlib.compress(b"blob %d\0" % len(content) + content))


def test_attack_hermetic_forged_blob_is_refused(world: World) -> None:
    """git add -A keeps an object that already exists, so a forged object named like the
    failing file's blob would be what every checkout of the tree reads."""
    world.seal(plan(step("unit", READS_VERDICT)))
    blob = world.repo.git("hash-object", "--stdin", input=b"broken\n").strip()
    _plant(world, blob, b"ok\n")
    world.repo.write("verdict", "broken\n")
    with pytest.raises(RunError, match=f"object {blob[:12]}"):
        world.run()


def test_attack_hermetic_forged_blob_of_a_changed_file_in_an_update(world: World) -> None:
    """The same, for a file that changes between two runs (an incremental update)."""
    world.repo.write("verdict", "ok\n")
    world.seal(plan(step("unit", READS_VERDICT)))
    assert world.run().verdict == "PASS"
    blob = world.repo.git("hash-object", "--stdin", input=b"broken\n").strip()
    _plant(world, blob, b"ok\n")
    world.repo.write("verdict", "broken\n")
    with pytest.raises(RunError, match="forged object"):
        world.run()


@contextmanager
def _swap_while_checked_out(world: World, oid: str, forged: bytes) -> Iterator[None]:
    """What a process the agent left running does to the object store during a run: the
    honest object *oid* stays in place until the run's verification has read it (inotify
    tells it when), then a forgery under its name (*forged*: the object's header and body) is
    what git reads to write the checkout, and the honest one is back before anything else
    looks. The write of the checkout takes more than a second (a tree with many files after
    it), so git records the index in a later second than the forged file: simulated by
    writing the same index again later."""
    from gitaudit.run import checkout

    path = world.path / ".git" / "objects" / oid[:2] / oid[2:]
    honest = path.read_bytes()
    real_verify, real_move = checkout.verify_objects, checkout._move
    verified = threading.Event()
    swapped: list[bool] = []

    def verify(objects: Path, oids: Iterable[str], gitdir: Path) -> int:
        wanted = list(oids)
        count = real_verify(objects, wanted, gitdir)
        if oid in wanted:
            path.chmod(0o644)
            path.write_bytes(zlib.compress(forged))
            swapped.append(True)
        verified.set()
        return count

    def move(slot: Any, previous: str | None, tree: str, config: Any, *, clean: bool) -> Any:
        verified.wait(10)
        moved = real_move(slot, previous, tree, config, clean=clean)
        verified.clear()
        if swapped and path.read_bytes() != honest:
            path.write_bytes(honest)
            time.sleep(1.1)
            index = slot.git / "index"
            again = index.with_name("index.again")
            again.write_bytes(index.read_bytes())
            os.replace(again, index)
        return moved

    with (
        mock.patch.object(checkout, "verify_objects", verify),
        mock.patch.object(checkout, "_move", move),
    ):
        yield
    assert swapped


def _forgery(world: World, forged: str) -> tuple[str, bytes]:
    """The object to swap (its id) and the forgery under its name: the failing file's blob
    holding "ok", or its folder's tree naming the blob of "ok" for it."""
    ok = world.repo.git("hash-object", "-w", "--stdin", input=b"ok\n").strip()
    broken = world.repo.git("hash-object", "-w", "--stdin", input=b"broken\n").strip()
    if forged == "blob":
        return broken, b"blob 3\0ok\n"
    world.repo.git("add", "-A")
    folder = world.repo.git("write-tree", "--prefix=d/").strip()
    world.repo.git("reset", "-q")
    listing = world.repo.git("ls-tree", folder).replace(broken, ok)
    made = world.repo.git("mktree", input=listing.encode()).strip()
    body = subprocess.run(
        ["git", "cat-file", "tree", made], cwd=world.path, capture_output=True, check=True
    ).stdout
    return folder, b"tree %d\0" % len(body) + body


@pytest.mark.parametrize("forged", ["blob", "tree"])
@pytest.mark.parametrize("how", ["uncommitted-edit", "committed", "first-checkout"])
def test_attack_hermetic_object_swapped_while_checked_out(
    world: World, how: str, forged: str
) -> None:
    """The failing `d/verdict` is the judged tree's; a process of the agent swaps a forgery
    under the name of its blob (holding "ok") or of its folder's tree (naming the blob of
    "ok") between the run's verification of that object and git's read of it, and the honest
    object back after. Reached by the two-way merge from HEAD's tree to an uncommitted edit,
    by the checkout of HEAD's tree started beside the fingerprint (the edit committed), and by
    a first, fresh checkout. Before the fix the check read "ok" and the run said PASS for the
    tree whose `d/verdict` says "broken" (4 of 6: the blob each way, the tree in a fresh
    checkout, whose cached tree ids git took from the forged object, so the purity check saw
    nothing; a tree swapped in a merge left the run FAIL, impure). Now the files git wrote are
    compared with their objects by content, and after a checkout of one tree its index must
    hash to the tree, before any check runs: the run stops with an error naming the file or
    the tree, and the checkout is wiped. A tree swapped in a merge still ends the run FAIL."""
    world.repo.write("d/verdict", "ok\n" if how != "first-checkout" else "broken\n")
    world.repo.write("d/other", "x\n")
    world.seal(plan(step("unit", check("grep", "-qx", "ok", "d/verdict"))))
    if how != "first-checkout":
        assert world.run().verdict == "PASS"
        world.repo.write("d/verdict", "broken\n")
        if how == "committed":
            world.repo.commit("broken")
    oid, forgery = _forgery(world, forged)
    refused = "does not hold the object" if forged == "blob" else "changed while it was checked"
    with _swap_while_checked_out(world, oid, forgery):
        if forged == "tree" and how != "first-checkout":
            recorded = world.run()
            assert recorded.verdict == "FAIL", recorded.doc
            assert recorded.doc["purity"]["changed"] == ["d/verdict"]
        else:
            with pytest.raises(RunError, match=refused):
                world.run()
    assert world.run().verdict == "FAIL"  # the honest objects, checked out again


@pytest.mark.parametrize("next_tree", ["same-tree", "another-tree"])
def test_attack_hermetic_forged_blob_of_a_file_a_check_changed(
    world: World, next_tree: str
) -> None:
    """A check changes a file that no commit changes (the run FAILs, impure), then the agent
    forges the object of that file's blob in the repository's store. The next run resets the
    checkout and git writes the changed file again from the store: before, only the objects
    that differ from the last tree were verified, so the checks read the forged bytes (and the
    code put the tree's bytes back before the purity check). After a run that left the
    checkout changed, every object of the tree is verified: the forgery is refused."""
    broken = world.repo.git("hash-object", "-w", "--stdin", input=b"broken\n").strip()
    world.repo.write("verdict", "broken\n")
    world.repo.write("dirty", "")
    spoil = {"type": "run", "cmd": "test -f dirty && echo x >> verdict; true", "shell": True}
    reads = {
        "type": "run",
        "cmd": "grep -qx ok verdict || exit 1; "
        f"test \"$(git ls-files -s verdict | cut -d' ' -f2)\" = {broken} "
        "&& printf 'broken\\n' > verdict; exit 0",
        "shell": True,
    }
    world.seal(plan(step("unit", spoil, reads)))
    first = world.run()
    assert first.verdict == "FAIL" and "verdict" in first.doc["purity"]["changed"], first.doc
    if next_tree == "another-tree":
        world.repo.git("rm", "-q", "dirty")
        world.repo.commit("no more spoiling")
    _plant(world, broken, b"ok\n")
    with pytest.raises(RunError, match=f"object {broken[:12]}"):
        world.run()
    assert world.gate(None).verdict != "PASS"


# a check plants, in the checkout's private git dir, what would make the *next* run's update of
# the checkout read other bytes than the tree's for the file that changes ("verdict": "ok" now,
# "broken" next); $FORGED is a loose object named like the next blob holding "ok", $OK the
# genuine "ok" blob's id, $BROKEN the next blob's id
PLANTS = {
    "loose-object": "mkdir -p $G/objects/$D && cp $FORGED $G/objects/$D/$F",
    "replace-ref": "mkdir -p $G/refs/replace && echo $OK > $G/refs/replace/$BROKEN",
    "packed-replace-ref": "printf '%s refs/replace/%s\\n' $OK $BROKEN > $G/packed-refs",
    "commondir": (
        "E=$TMPDIR/elsewhere && mkdir -p $E/objects/info $E/objects/$D $E/refs "
        "&& cp $FORGED $E/objects/$D/$F "
        "&& cp $G/objects/info/alternates $E/objects/info/alternates "
        '&& cp $G/config $E/config && echo "$E" > $G/commondir'
    ),
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_attack_hermetic_check_plants_objects_for_the_next_update(
    world: World, tmp_path: Path, plant: str
) -> None:
    """A check (the code under test, which runs in the checkout) plants objects, replace refs
    or a ``commondir`` in the checkout's private git dir for the blob a later commit brings;
    the next run's update of the checkout would read the planted bytes, and the code put the
    tree's bytes back before the purity check looks. The private git dir is made anew before
    every update (only its authenticated index is kept), and git on the checkout never follows
    replace refs or a ``commondir``: the checks read the tree's bytes and FAIL."""
    ok = world.repo.git("hash-object", "-w", "--stdin", input=b"ok\n").strip()
    broken = world.repo.git("hash-object", "--stdin", input=b"broken\n").strip()
    forged = tmp_path / "forged"
    forged.write_bytes(zlib.compress(b"blob 3\0ok\n"))
    names = f"G=$(sed 's/^gitdir: //' .git) D={broken[:2]} F={broken[2:]} OK={ok} BROKEN={broken}"
    plants = {
        "type": "run",
        "cmd": f"test -f armed || exit 0; FORGED={forged} {names}; {PLANTS[plant]}",
        "shell": True,
    }
    # reads the verdict, then puts the tree's bytes back (so the purity check finds them)
    reads = {
        "type": "run",
        "cmd": "grep -qx ok verdict; r=$?; "
        f"test \"$(git ls-files -s verdict | cut -d' ' -f2)\" = {broken} "
        "&& printf 'broken\\n' > verdict; exit $r",
        "shell": True,
    }
    world.repo.write("verdict", "ok\n")
    world.repo.write("armed", "")
    world.seal(plan(step("unit", plants, reads)))
    first = world.run()
    assert first.verdict == "PASS", first.doc  # honest: the verdict says ok
    world.repo.write("verdict", "broken\n")
    world.repo.commit("the verdict breaks")
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]["unit"]
    assert recorded.verdict == "FAIL", recorded.doc
    assert world.gate(None).verdict != "PASS"


# --------------------------------------------------------------------------- environment


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PYTHONPATH", "/tmp"),
        ("PYTEST_ADDOPTS", "-p no:cacheprovider"),
        ("GITAUDIT_PYTHON", "/bin/true"),
        ("GIT_DIR", "/tmp"),
        ("LD_PRELOAD", "/nonexistent.so"),
        ("BASH_ENV", "/tmp/evil"),
    ],
)
def test_attack_hermetic_undeclared_variables_do_not_reach_checks(
    world: World, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    world.seal(plan(step("unit", check("sh", "-c", f'test -z "${{{name}+set}}"'))))
    monkeypatch.setenv(name, value)
    recorded = world.run()
    assert recorded.verdict == "PASS", recorded.doc["steps"]["unit"]
    seen = recorded.doc["steps"]["unit"]["checks"][0]["env"]["names"]
    assert name not in seen


def test_attack_hermetic_fake_tool_on_path_inside_the_repository(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `grep` planted in the repository and put first on PATH is not what the check runs."""
    honest_failure(world)
    fake = world.path / ".git" / "bin"
    fake.mkdir()
    (fake / "grep").write_text("#!/bin/sh\nexit 0\n")
    (fake / "grep").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    recorded = world.run()
    assert recorded.verdict == "FAIL"
    assert not recorded.doc["steps"]["unit"]["checks"][0]["executable"].startswith(str(fake))


# the agent's own tool, in a folder of its own outside the repository, first on the PATH it
# starts `git audit run` with: a script, a link to `true`, a python3 that says "1 passed"
AGENT_TOOLS = ("grep-script", "grep-link-to-true", "pytest-python", "env-grep", "shell-grep")


def agent_tool(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: str, inputs: bool = False
) -> Path:
    """Seal a failing check (with *inputs*, carried while its file is unchanged), and plant the
    agent's tool in a folder of its own; returns the folder."""
    folder = tmp_path / "agent-bin"
    folder.mkdir()
    if tool == "pytest-python":
        with_pytest_on_path(monkeypatch)
        world.repo.write("tests/test_x.py", "def test_x():\n    assert False\n")
        world.seal(plan(step("unit", {"type": "pytest", "args": "-q -p no:cacheprovider tests"})))
        (folder / "python3").write_text("#!/bin/sh\necho '1 passed'\nexit 0\n")
        (folder / "python3").chmod(0o755)
    else:
        world.repo.write("verdict", "broken\n")
        sealed = step("unit", READS_VERDICT)
        if tool == "env-grep":  # the check names `env`, which finds `grep` on the run's PATH
            sealed = step("unit", check("env", "grep", "-qx", "ok", "verdict"))
        if tool == "shell-grep":  # a shell check's commands are found on the run's PATH
            sealed = step("unit", {"type": "run", "cmd": "grep -qx ok verdict", "shell": True})
        if inputs:
            sealed["inputs"] = ["verdict"]
        world.seal(plan(sealed))
        if tool == "grep-link-to-true":
            (folder / "grep").symlink_to(shutil.which("true") or "/bin/true")
        else:
            (folder / "grep").write_text("#!/bin/sh\nexit 0\n")
            (folder / "grep").chmod(0o755)
    return folder


@pytest.mark.parametrize("judged", ["work-tree", "HEAD"])
@pytest.mark.parametrize("tool", AGENT_TOOLS)
def test_attack_hermetic_agent_starts_the_run_with_its_own_tool_first_on_path(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tool: str, judged: str
) -> None:
    """The agent starts `git audit run` with a folder of its own outside the repository first on
    PATH (`PATH=/tmp/x:$PATH git audit run`), holding a `grep` (or the pytest check's
    `python3`) that passes whatever it is asked, found by the check itself, by the `env` it
    names, or by a shell check's shell: the checks' PATH was the caller's less the repository
    and the cache, so the sealed check ran the agent's tool, the run was signed with the user's
    runner key, and the user's own gate said PASS for a tree whose check fails (every variant
    before the fix). The run records its checks' PATH folders and each program started by name
    with its folder; a judge whose gitaudit home holds the run's key asks whether its own PATH
    holds those folders and offers those programs: UNKNOWN."""
    folder = agent_tool(world, tmp_path, monkeypatch, tool)
    honest = os.environ["PATH"]
    monkeypatch.setenv("PATH", f"{folder}:{honest}")
    recorded = world.run()
    assert recorded.verdict == "PASS"  # the run itself is fooled, and signs it
    checked = recorded.doc["steps"]["unit"]["checks"][0]
    named = {"pytest-python": "python3", "env-grep": "env", "shell-grep": None}.get(tool, "grep")
    assert checked.get("program") == named
    assert str(folder.resolve()) in recorded.doc["environment"]["path"]
    rev = None if judged == "work-tree" else "HEAD"
    assert world.gate(rev).verdict == "PASS"  # the agent's own PATH: it fools only itself
    monkeypatch.setenv("PATH", honest)
    judged_here = assert_plan(world.gate(rev), "evidence.program-elsewhere", "UNKNOWN")
    assert str(folder.resolve()) in judged_here.reasons[0].message


@pytest.mark.parametrize("how", ["remembered", "carried", "run-again"])
def test_attack_hermetic_agent_path_run_remembered_or_carried(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, how: str
) -> None:
    """The same run, then: the agent's own `git audit status` under its PATH, which remembers
    the PASS in the verdict memo; or a second run under its PATH that carries the step (its
    input digest unchanged); or the user's own `git audit run`, which would carry it too. A
    remembered PASS asks again whether PATH offers each program, a carried step is judged by
    the run that executed it, and a run does not carry a pass whose programs its own PATH does
    not offer: it runs the step again. The user's status: UNKNOWN; the user's run: FAIL."""
    folder = agent_tool(world, tmp_path, monkeypatch, "grep-script", inputs=how != "remembered")
    honest = os.environ["PATH"]
    monkeypatch.setenv("PATH", f"{folder}:{honest}")
    assert world.run().verdict == "PASS"
    if how == "remembered":
        assert world.cli("status").code == 0  # remembered under the agent's PATH
    if how == "carried":
        again = world.run()
        assert again.doc["steps"]["unit"]["status"] == "carried", again.doc["steps"]
    monkeypatch.setenv("PATH", honest)
    if how == "run-again":
        again = world.run()
        assert again.doc["steps"]["unit"]["status"] == "failed", again.doc["steps"]
        assert_plan(world.gate(None), "step.failed", "FAIL")
        return
    said = world.cli("status")
    assert said.code == 3, said.out
    assert "which this PATH does not hold" in said.out, said.out
    assert_plan(world.gate(None), "evidence.program-elsewhere", "UNKNOWN")
    assert world.run(fresh=True).verdict == "FAIL"


# the agent's virtual environment whose bin is a link to the system's python3 folder (which the
# user's PATH holds), reached by a check that names python3, by a shell check's shell, by env,
# or through a spelling with `..` that goes through the link
VENV_LINKS = ("python3-c", "python3-m", "shell-python3", "env-python3", "dotdot-through-the-link")


@pytest.mark.parametrize("how", VENV_LINKS)
def test_attack_hermetic_agent_path_folder_links_to_the_user_s(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, how: str
) -> None:
    """The agent makes a virtual environment whose `bin` is a link to the folder of the
    system's `python3` (`/tmp/v/bin -> /usr/bin`, `/tmp/v/pyvenv.cfg`, a `.pth` in
    `/tmp/v/lib/pythonX.Y/site-packages` that exits 0) and starts the run with `/tmp/v/bin`
    first on PATH: python3, started from there, reads the pyvenv.cfg above the folder it was
    started from and runs the agent's .pth, so the sealed check passes; the run recorded the
    folder and the program with links resolved (`/usr/bin`, the system's python3), which the
    user's PATH holds and offers, and the user's gate said PASS (every variant before the fix).
    The run lists each folder as spelled too, which the user's PATH lacks: UNKNOWN."""
    world.repo.write("verdict", "broken\n")
    world.repo.write("chk.py", "import sys\nsys.exit(open('verdict').read().strip() != 'ok')\n")
    sealed = {
        "python3-c": check("python3", "-c", "import chk"),
        "python3-m": check("python3", "-m", "chk"),
        "shell-python3": {"type": "run", "cmd": "python3 chk.py", "shell": True},
        "env-python3": check("env", "python3", "chk.py"),
    }.get(how, check("python3", "chk.py"))
    world.seal(plan(step("unit", sealed)))
    honest = os.environ["PATH"]
    python3 = shutil.which("python3", path=os.pathsep.join(("/usr/local/bin", "/usr/bin", "/bin")))
    assert python3 is not None, "the system's python3"
    system = os.path.dirname(python3)
    assert system in honest.split(os.pathsep)  # the user's PATH holds the system's python3 folder
    venv = tmp_path / "v"
    venv.mkdir()
    (venv / "bin").symlink_to(system)
    (venv / "pyvenv.cfg").write_text(f"home = {system}\ninclude-system-site-packages = true\n")
    real = os.path.basename(os.path.realpath(python3))
    site = venv / "lib" / real / "site-packages"
    site.mkdir(parents=True)
    (site / "agent.pth").write_text("import os; os._exit(0)\n")
    entry = f"{venv}/bin/../bin" if how == "dotdot-through-the-link" else str(venv / "bin")
    monkeypatch.setenv("PATH", f"{entry}{os.pathsep}{honest}")
    recorded = world.run()
    assert recorded.verdict == "PASS"  # the run itself is fooled, and signs it
    monkeypatch.setenv("PATH", honest)
    judged_here = assert_plan(world.gate(None), "evidence.program-elsewhere", "UNKNOWN")
    assert str(venv / "bin") in judged_here.reasons[0].message
    assert str(venv / "bin") in recorded.doc["environment"]["path"]
    assert world.run(fresh=True).verdict == "FAIL"  # the user's own PATH: the check fails


def test_a_run_signed_elsewhere_is_judged_by_its_own_programs(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Control: a run signed with a key this gitaudit home does not hold (CI, a teammate's
    runner) ran that machine's programs, which this PATH says nothing about: it proves what it
    proved whatever PATH the judge has (made here, the same run did not: the folder its grep
    came from, a link to the system's, is on no PATH but the run's)."""
    world.repo.write("verdict", "ok\n")
    world.seal(plan(step("unit", READS_VERDICT)))
    elsewhere = tmp_path / "other-bin"
    elsewhere.mkdir()
    (elsewhere / "grep").symlink_to(shutil.which("grep") or "/bin/grep")
    honest = os.environ["PATH"]
    monkeypatch.setenv("PATH", f"{elsewhere}:{honest}")
    assert world.run().verdict == "PASS"
    monkeypatch.setenv("PATH", honest)
    # the same executable, but from a folder this PATH does not offer: made here, it binds
    assert_plan(world.gate(None), "evidence.program-elsewhere", "UNKNOWN")
    for name in ("ci", "ci.pub"):  # the key is no longer this machine's
        path = world.keys["ci"].with_name(name)
        path.rename(tmp_path / name)
    other = tmp_path / "another-grep"
    other.mkdir()
    (other / "grep").write_text("#!/bin/sh\nexit 1\n")
    (other / "grep").chmod(0o755)
    monkeypatch.setenv("PATH", f"{other}:{honest}")  # here, PATH finds another grep
    assert world.gate(None).verdict == "PASS"


# the tree's own tools (committed bin/grep and bin/python3, which pass whatever they are asked)
# put on PATH through the private checkout, whose folder anyone can work out: the checkout's
# bin itself, a link to that folder, a folder holding links to the two files
TREE_TOOLS_ON_PATH = ("checkout-bin", "link-to-the-folder", "links-to-the-files")


@pytest.mark.parametrize("pytest_check", [False, True], ids=["grep", "pytest-python"])
@pytest.mark.parametrize("how", TREE_TOOLS_ON_PATH)
def test_attack_hermetic_tree_tool_on_path_through_the_checkout(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, how: str, pytest_check: bool
) -> None:
    """The agent commits bin/grep and bin/python3 that exit 0 ("1 passed") and starts the run
    with the private checkout's bin (``<cache>/checkouts/<sha256(gitdir)[:20]>/0/tree/bin``)
    first on PATH, or a folder elsewhere leading there: PATH was cleaned of the work tree and
    .git only, so the sealed check ran the tree's fake (PASS for a tree whose check fails, every
    variant before the fix). PATH entries inside gitaudit's cache are dropped like the work
    tree's, and a program PATH finds through a link into the repository or the cache is
    refused: FAIL."""
    with_pytest_on_path(monkeypatch)
    if pytest_check:
        world.repo.write("tests/test_x.py", "def test_x():\n    assert False\n")
        world.seal(plan(step("unit", {"type": "pytest", "args": "-q -p no:cacheprovider tests"})))
    else:
        honest_failure(world)
    for name in ("grep", "python3"):
        world.repo.write(f"bin/{name}", "#!/bin/sh\necho '1 passed'\nexit 0\n")
        (world.path / "bin" / name).chmod(0o755)
    world.repo.commit("the tree's own tools")
    assert world.run().verdict == "FAIL"  # honest PATH: the checkout exists now
    tools = Path(checkouts_dir(world.handle().gitdir)) / "0" / "tree" / "bin"
    assert (tools / "grep").is_file()
    entry = tools
    if how == "link-to-the-folder":
        entry = tmp_path / "tools"
        entry.symlink_to(tools)
    elif how == "links-to-the-files":
        entry = tmp_path / "tools"
        entry.mkdir()
        for name in ("grep", "python3"):
            (entry / name).symlink_to(tools / name)
    monkeypatch.setenv("PATH", f"{entry}:{os.environ['PATH']}")
    recorded = world.run()
    result = recorded.doc["steps"]["unit"]["checks"][0]
    assert recorded.verdict == "FAIL", result
    if how == "links-to-the-files":  # found, refused, never run
        assert "private checkout" in result["message"] and result.get("exit_code") is None, result
    else:
        assert not result["executable"].startswith(str(tools))
    assert world.gate(None).verdict != "PASS"


def test_attack_hermetic_dotfiles_of_the_user_are_not_seen(world: World) -> None:
    home = Path(os.environ["HOME"])
    (home / "verdict").write_text("ok\n")
    world.seal(plan(step("unit", check("sh", "-c", 'grep -qx ok "$HOME/verdict"'))))
    assert_fails(world)


def test_declared_variables_are_passed_and_recorded(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.seal(
        plan(step("unit", check("sh", "-c", 'test "$DEPLOY_ENV" = staging')))
        | {"pass_env": ["DEPLOY_ENV"]}
    )
    monkeypatch.setenv("DEPLOY_ENV", "staging")
    recorded = world.run()
    assert recorded.verdict == "PASS"
    assert recorded.doc["steps"]["unit"]["checks"][0]["env"]["declared"] == {
        "DEPLOY_ENV": "staging"
    }
    monkeypatch.delenv("DEPLOY_ENV")
    again = world.run()
    assert again.verdict == "FAIL"
    assert "DEPLOY_ENV" in again.doc["steps"]["unit"]["checks"][0]["message"]


def test_pass_env_cannot_pass_the_signing_material(world: World) -> None:
    world.write_plan(plan(step("unit")) | {"pass_env": ["GITAUDIT_*"]})
    result = world.cli("plan", "validate")
    assert result.code == 1 and "env.forbidden" in result.out


def with_pytest_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks' python3 must have pytest: put this interpreter's bin first on PATH."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")


def test_attack_hermetic_pytest_python_is_not_chosen_by_a_variable(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with_pytest_on_path(monkeypatch)
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("GITAUDIT_PYTHON", str(fake))
    world.repo.write("test_x.py", "def test_x():\n    assert False\n")
    world.seal(plan(step("unit", {"type": "pytest", "args": "-q -p no:cacheprovider test_x.py"})))
    recorded = world.run()
    assert recorded.verdict == "FAIL"
    result = recorded.doc["steps"]["unit"]["checks"][0]
    assert result["executable"] != str(fake) and result["exit_code"] == 1  # the test failed


# ----------------------------------------------------------------------- path checks


def test_a_directory_does_not_satisfy_a_file_check(world: World) -> None:
    world.repo.write("out/keep", "")
    world.seal(plan(step("unit", check("true"), {"type": "file_exists", "path": "out"})))
    recorded = world.run()
    assert recorded.verdict == "FAIL"
    assert "is a directory, not a file" in recorded.doc["steps"]["unit"]["checks"][1]["message"]
    world.seal(
        plan(step("unit", check("true"), {"type": "file_exists", "path": "out", "kind": "dir"})),
        allow_weaken=True,
        reason="it is a directory",
    )
    assert world.run().verdict == "PASS"


# ----------------------------------------------------------------------- submodules


def _submodule(world: World, tmp_path: Path) -> GitRepo:
    lib = GitRepo.create(tmp_path / "lib")
    lib.write("verdict", "broken\n")
    lib.commit("v1")
    world.repo.git(
        "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib.path), "lib"
    )
    world.repo.commit("add lib")
    return lib


def test_attack_hermetic_uncommitted_submodule_state_is_not_checked(
    world: World, tmp_path: Path
) -> None:
    _submodule(world, tmp_path)
    world.seal(plan(step("unit", check("grep", "-qx", "ok", "lib/verdict"))))
    (world.path / "lib" / "verdict").write_text("ok\n")  # dirty, not committed in lib
    recorded = world.run()
    assert recorded.verdict == "FAIL"
    assert recorded.doc["workspace"]["submodules"]["lib"]


def test_attack_hermetic_untracked_file_in_a_submodule_is_not_checked(
    world: World, tmp_path: Path
) -> None:
    _submodule(world, tmp_path)
    world.seal(plan(step("unit", check("test", "-f", "lib/extra"))))
    (world.path / "lib" / "extra").write_text("x\n")
    assert_fails(world)


def _nested_submodule(world: World, tmp_path: Path) -> None:
    """lib holds the submodule inner (its own verdict says "broken"), and the work tree lib."""
    inner = GitRepo.create(tmp_path / "inner")
    inner.write("verdict", "broken\n")
    inner.commit("v1")
    lib = GitRepo.create(tmp_path / "lib")
    lib.write("verdict", "broken\n")
    lib.write(".gitignore", "*.tmp\n")
    lib.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner.path), "inner")
    lib.commit("v1 with inner")
    world.repo.git(
        "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib.path), "lib"
    )
    world.repo.git(
        "-c", "protocol.file.allow=always", "submodule", "update", "-q", "--init", "--recursive"
    )
    world.repo.commit("add lib")


# a first step changes a submodule's files in the checkout so that the second step passes:
# (what the step does, what the second step checks, the path the purity check must name)
IN_A_SUBMODULE = {
    "modified": (
        "printf 'ok\\n' > lib/verdict",
        ("grep", "-qx", "ok", "lib/verdict"),
        "lib/verdict",
    ),
    "untracked": ("printf 'ok\\n' > lib/extra", ("grep", "-qx", "ok", "lib/extra"), "lib/extra"),
    "deleted": ("rm lib/verdict", ("test", "!", "-e", "lib/verdict"), "lib/verdict"),
    "staged": (
        "printf 'ok\\n' > lib/verdict && git -C lib add verdict",
        ("grep", "-qx", "ok", "lib/verdict"),
        "lib/.git index",
    ),
    # git status believes an entry marked unchanged: only the index's digest tells
    "assume-unchanged": (
        "printf 'ok\\n' > lib/verdict && git -C lib update-index --assume-unchanged verdict",
        ("grep", "-qx", "ok", "lib/verdict"),
        "lib/.git index",
    ),
    "nested-modified": (
        "printf 'ok\\n' > lib/inner/verdict",
        ("grep", "-qx", "ok", "lib/inner/verdict"),
        "lib/inner/verdict",
    ),
    "nested-untracked": (
        "printf 'ok\\n' > lib/inner/extra",
        ("grep", "-qx", "ok", "lib/inner/extra"),
        "lib/inner/extra",
    ),
}


@pytest.mark.parametrize("variant", sorted(IN_A_SUBMODULE))
def test_attack_hermetic_check_writes_a_submodule_of_the_checkout(
    world: World, tmp_path: Path, variant: str
) -> None:
    """A step rewrites a submodule's file in the checkout for the next one: the superproject's
    look records only each submodule's commit, so every submodule is looked into too."""
    prepare, reads, named = IN_A_SUBMODULE[variant]
    _nested_submodule(world, tmp_path)
    world.seal(plan(step("unit", {"type": "run", "cmd": prepare, "shell": True}, check(*reads))))
    recorded = world.run()
    assert recorded.verdict == "FAIL", recorded.doc["reasons"]
    assert any(p.startswith(named) for p in recorded.doc["purity"]["changed"]), recorded.doc[
        "purity"
    ]
    assert world.gate(None).verdict != "PASS"
    # the next run starts from the tree again
    assert world.run().verdict == "FAIL"


def test_a_check_that_leaves_submodules_alone_is_pure(world: World, tmp_path: Path) -> None:
    """Control: what a check leaves in a submodule that its tree ignores is cleaned away, not an
    impurity; a check that reads the submodules passes, and again on the next run."""
    _nested_submodule(world, tmp_path)
    reads = "echo x > lib/build.tmp && grep -qx broken lib/inner/verdict && git -C lib status"
    world.seal(plan(step("unit", {"type": "run", "cmd": reads, "shell": True})))
    first = world.run()
    assert first.verdict == "PASS", first.doc["reasons"]
    assert first.doc["purity"]["changed"] == []
    assert world.run().verdict == "PASS"


# variant -> (what .gitmodules says then, whether a run before the change materialised lib)
NOT_NAMED: dict[str, tuple[str, bool]] = {
    "emptied, after a run": ("", True),
    "naming another path, after a run": ('[submodule "lib"]\n\tpath = other\n', True),
    "emptied, before the first run": ("", False),
}


@pytest.mark.parametrize("variant", sorted(NOT_NAMED))
def test_attack_hermetic_submodule_gitmodules_does_not_name(
    world: World, tmp_path: Path, variant: str
) -> None:
    """The tree keeps the gitlink lib, but its .gitmodules no longer names that path: a clone's
    `git submodule update --init` leaves lib an empty folder, so the check, which reads
    lib/verdict, fails there. The checkout materialised lib from .git/modules/lib all the same
    (the name was taken to be the path), or kept the files of the last run's: PASS before the
    fix. A submodule .gitmodules does not name is an empty folder in the checkout too."""
    gitmodules, earlier = NOT_NAMED[variant]
    lib = GitRepo.create(tmp_path / "lib")
    lib.write("verdict", "ok\n")
    lib.commit("v1")
    world.repo.git(
        "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib.path), "lib"
    )
    world.repo.commit("add lib")
    world.seal(plan(step("unit", check("grep", "-qx", "ok", "lib/verdict"))))
    if earlier:
        assert world.run().verdict == "PASS"
    world.repo.write(".gitmodules", gitmodules)
    world.repo.commit(".gitmodules names no lib")
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]["unit"]
    assert recorded.doc["purity"]["changed"] == []
    assert recorded.verdict == "FAIL"
    assert world.gate(None).verdict == "FAIL"


def test_a_submodule_commit_that_is_missing_is_a_clear_error(world: World, tmp_path: Path) -> None:
    _submodule(world, tmp_path)
    world.seal(plan(step("unit")))
    missing = "1" * 40
    world.repo.git("update-index", "--cacheinfo", f"160000,{missing},lib")
    world.repo.git("commit", "-q", "-m", "point lib at a commit nobody has")
    subprocess.run(["git", "checkout", "-q", "--detach"], cwd=world.path / "lib", check=True)
    with pytest.raises(RunError, match="submodule lib is recorded at commit 111111111111"):
        run_with_tree_of_head(world)


def run_with_tree_of_head(world: World) -> object:
    """Run against HEAD's tree: the work tree of lib still holds its own checkout."""
    from gitaudit.run import checkout

    handle = world.handle()
    assert handle.workdir is not None
    tree = world.repo.head_tree()
    with checkout.acquire(handle.gitdir, handle.workdir) as slot:
        return checkout.materialise(slot, handle.gitdir, handle.workdir, tree, None)


# ------------------------------------------------------------------------ ignored paths


def test_declared_ignored_path_is_linked_recorded_and_guarded(world: World) -> None:
    world.repo.write(".gitignore", "tools/\n")
    world.repo.write("tools/verdict", "ok\n")
    world.seal(
        plan(step("unit", check("grep", "-qx", "ok", "tools/verdict")))
        | {"ignored_paths": ["tools"]}
    )
    recorded = world.run()
    assert recorded.verdict == "PASS"
    assert recorded.doc["workspace"]["ignored_paths"]["tools"]["files"] == 1
    judged = world.gate(None)
    assert judged.verdict == "PASS" and "relied on ignored path(s) tools" in judged.plans[0].notes
    world.repo.write("tools/verdict", "changed\n")
    assert_plan(world.gate(None), "evidence.ignored-changed", "UNKNOWN")


def test_attack_hermetic_declared_ignored_path_written_by_a_check(world: World) -> None:
    world.repo.write(".gitignore", "tools/\n")
    world.repo.write("tools/verdict", "ok\n")
    writes = {"type": "run", "cmd": "echo more > tools/extra", "shell": True}
    world.seal(plan(step("unit", check("true"), writes)) | {"ignored_paths": ["tools"]})
    recorded = world.run()
    assert recorded.verdict == "FAIL"
    assert "tools (declared ignored path)" in recorded.doc["purity"]["changed"]


# a check changes the declared ignored path "tools" for the check after it, and a later one
# undoes it: the file's bytes and times put back, or a file added and removed again
IGNORED_PUT_BACK = {
    "times-kept": (
        "cp -p tools/verdict $TMPDIR/kept.tmp && printf 'ok\\nxxx\\n' > tools/verdict",
        "cat $TMPDIR/kept.tmp > tools/verdict && touch -r $TMPDIR/kept.tmp tools/verdict",
    ),
    "added-and-removed": ("echo ok > tools/override", "rm tools/override"),
}


@pytest.mark.parametrize("how", sorted(IGNORED_PUT_BACK))
def test_attack_hermetic_declared_ignored_path_written_and_put_back(world: World, how: str) -> None:
    """The plan declares the ignored folder tools (a virtualenv, say), whose verdict says
    broken. A check writes "ok" into it (the same size as before) or adds an override there,
    the next check reads it, and a third one puts it back with its times, or removes the
    override: the listing of the declared path (paths, modes, sizes, modification times) was
    the one the run began with, so the run was pure: PASS (both before the fix). Within the
    run, the stamps (inode, change time) of its files and folders are compared too."""
    write, back = ({"type": "run", "cmd": cmd, "shell": True} for cmd in IGNORED_PUT_BACK[how])
    reads = check("sh", "-c", "grep -qx ok tools/verdict || test -f tools/override")
    world.repo.write(".gitignore", "tools/\n")
    world.repo.write("tools/verdict", "broken\n")
    world.seal(plan(step("unit", write, reads, back)) | {"ignored_paths": ["tools"]})
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "passed", recorded.doc["steps"]["unit"]
    assert recorded.verdict == "FAIL", recorded.doc
    assert recorded.doc["purity"]["changed"] == ["tools (declared ignored path)"]
    assert world.gate(None).verdict != "PASS"


def test_attack_hermetic_editable_install_in_a_declared_path_is_refused(world: World) -> None:
    world.repo.write(".gitignore", ".venv/\n")
    world.repo.write(".venv/lib/site.pth", f"{world.path}/src\n")
    world.seal(plan(step("unit")) | {"ignored_paths": [".venv"]})
    with pytest.raises(RunError, match="editable install pointing into the work tree"):
        world.run()


SITE = ".venv/lib/python3/site-packages"
# a meta-path finder of the shape setuptools' PEP 660 editable installs write, resolving the
# package from a folder named in its MAPPING (the work tree's, in the attacks)
FINDER = """import sys, importlib.machinery as m
MAPPING = {{"greeter": {root!r}}}
class _F:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name in MAPPING:
            return m.PathFinder.find_spec(name, [MAPPING[name]])
        return None
def install():
    sys.meta_path.insert(0, _F)
"""
# ways to have a virtualenv declared in ignored_paths import the live work tree's sources
EDITABLE = {
    "finder-import-line": {
        f"{SITE}/__editable___greeter_finder.py": FINDER.format(root="{work}"),
        f"{SITE}/__editable__.greeter-0.1.pth": (
            "import __editable___greeter_finder; __editable___greeter_finder.install()\n"
        ),
    },
    "finder-by-another-name": {
        f"{SITE}/_greeter_hook.py": FINDER.format(root="{work}/src"),
        f"{SITE}/greeter.pth": "import _greeter_hook; _greeter_hook.install()\n",
    },
    "finder-in-a-package": {
        f"{SITE}/_hooks/__init__.py": "from ._impl import install\n",
        f"{SITE}/_hooks/_impl.py": FINDER.format(root="{work}"),
        f"{SITE}/hooks.pth": "import _hooks; _hooks.install()\n",
    },
    "import-line-naming-the-tree": {
        f"{SITE}/dev.pth": "import sys; sys.path.insert(0, '{work}/src')\n",
    },
    "relative-path-line": {f"{SITE}/dev.pth": "../../../../src\n"},
    "sitecustomize": {f"{SITE}/sitecustomize.py": "import sys\nsys.path.insert(0, '{work}')\n"},
    "symlinked-package": {f"{SITE}/greeter": "->{work}/src/greeter"},
    "relative-symlink": {f"{SITE}/greeter": "->../../../../src/greeter"},
    "path-line-as-if-an-import": {f"{SITE}/dev.pth": "importing/../../../../../src\n"},
    "declared-path-is-the-tree": {".venv": "->src"},
    "pth-symlinked-from-outside": {
        "../outside/dev.pth": "import sys; sys.path.insert(0, '{work}')\n",
        f"{SITE}/dev.pth": "->{work}/../outside/dev.pth",
    },
}


def _write_venv(root: Path, files: dict[str, str], work: Path) -> None:
    """Write *files* under *root* ("->target": a symlink), ``{work}`` standing for *work*."""
    for rel, content in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        text = content.replace("{work}", str(work))
        if text.startswith("->"):
            target.symlink_to(text[2:])
        else:
            target.write_text(text)


@pytest.mark.parametrize("variant", sorted(EDITABLE))
def test_attack_hermetic_live_sources_reached_from_a_declared_path(
    world: World, variant: str
) -> None:
    """The agent installs the project editable in a declared virtualenv in another form than a
    plain path line: site executes a .pth's ``import`` lines, joins relative lines to the
    site-packages folder, imports sitecustomize, and follows symlinks; each would have the
    checks import the live sources (and read files git ignores beside them)."""
    world.repo.write(".gitignore", "/.venv\n")  # a folder, or a symlink
    world.repo.write("src/greeter/__init__.py", "GREETING = 'Goodbye'\n")
    world.seal(plan(step("unit")) | {"ignored_paths": [".venv"]})
    _write_venv(world.path, EDITABLE[variant], world.path)
    with pytest.raises(RunError, match="editable install pointing into the work tree"):
        world.run()


def test_an_honest_virtualenv_in_a_declared_path_is_used(world: World, tmp_path: Path) -> None:
    """Control: a real virtualenv with what pip leaves there (a .pth whose ``import`` line names
    nothing in the work tree, its module, symlinks within the virtualenv or out to the system's
    python) and an editable install of another project, outside the work tree, is used."""
    world.repo.write(".gitignore", ".venv/\n")
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", ".venv"], cwd=world.path, check=True
    )
    (site,) = (world.path / ".venv" / "lib").glob("python3*/site-packages")
    other = tmp_path / "other"
    (other / "greeter").mkdir(parents=True)
    (other / "greeter" / "__init__.py").write_text("GREETING = 'Hello'\n")
    rel = site.relative_to(world.path)
    honest = {
        f"{rel}/distutils-precedence.pth": (
            "import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, 'local') "
            "== 'local'; enabled and __import__('_distutils_hack').add_shim(); \n"
        ),
        f"{rel}/_distutils_hack/__init__.py": "def add_shim():\n    pass\n",
        f"{rel}/honest/__init__.py": "VALUE = 1\n",
        f"{rel}/extras.pth": "# a folder of the virtualenv\nextras\n",
        f"{rel}/extras/extra_mod.py": "VALUE = 2\n",
        f"{rel}/__editable___greeter_finder.py": FINDER.format(root=str(other)),
        f"{rel}/__editable__.greeter-0.1.pth": (
            "import __editable___greeter_finder; __editable___greeter_finder.install()\n"
        ),
        f"{rel}/honest_link": "->honest",
    }
    _write_venv(world.path, honest, world.path)
    imports = (
        "import honest, extra_mod, _distutils_hack, greeter; assert greeter.GREETING == 'Hello'"
    )
    world.seal(
        plan(step("unit", check(".venv/bin/python", "-c", imports))) | {"ignored_paths": [".venv"]}
    )
    recorded = world.run()
    assert recorded.verdict == "PASS", recorded.doc["reasons"]
    assert world.run().verdict == "PASS"


def test_a_declared_ignored_path_that_does_not_exist_is_refused(world: World) -> None:
    world.seal(plan(step("unit")) | {"ignored_paths": [".venv"]})
    with pytest.raises(RunError, match=r"'\.venv', which does not exist"):
        world.run()


# ----------------------------------------------------------------------------- live


def test_live_steps_are_recorded_noted_and_refusable(world: World) -> None:
    world.seal(plan(step("unit", check("true"), workspace="live")))
    recorded = world.run()
    assert recorded.verdict == "PASS"
    assert recorded.doc["steps"]["unit"]["workspace"] == "live"
    judged = world.gate(None)
    assert judged.verdict == "PASS"
    assert any("live work tree" in n for n in judged.plans[0].notes)
    result = world.cli(
        "trust", "policy", "--live-evidence", "refuse", "--key", str(world.keys["alice"])
    )
    assert result.code == 0, result.err
    assert_plan(world.gate(None), "evidence.live-refused", "FAIL")


def test_the_checkout_is_outside_the_project(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tools that look upwards (pytest's rootdir and conftest search, node_modules) never reach
    the live project: an ignored conftest.py at its root is not loaded."""
    with_pytest_on_path(monkeypatch)
    world.repo.write(".gitignore", "conftest.py\n")
    world.repo.write(
        "conftest.py", "import pytest\n@pytest.fixture\ndef planted():\n    return 1\n"
    )
    world.repo.write("tests/test_x.py", "def test_x(planted):\n    assert planted\n")
    world.seal(
        plan(step("unit", {"type": "pytest", "args": "-q -p no:cacheprovider tests/test_x.py"}))
    )
    recorded = world.run()
    assert recorded.verdict == "FAIL"
    stdout = world.run_files(recorded.commit)["steps/unit/checks/0/stdout"].decode()
    assert "fixture 'planted' not found" in stdout


# T1's code (run by an honest pytest check) plants, above the checkout, a pytest.ini and a
# conftest.py that turns every failure into a pass; relative to the checkout (<cache>/checkouts/
# <repo>/<slot>/tree): the slot's folder, the repository's folder of slots, the checkouts
# folder, gitaudit's cache folder, the folder above it (~/.cache)
ABOVE = {
    "slot": "..",
    "repository": "../..",
    "checkouts": "../../..",
    "cache": "../../../..",
    "above-the-cache": "../../../../..",
}
PASS_EVERYTHING = (
    "import pytest\n"
    "@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    report = (yield).get_result()\n"
    "    if report.failed:\n"
    "        report.outcome, report.longrepr = 'passed', None\n"
)


def _plant_above(up: str) -> str:
    """T1's test module: it plants the configuration (a refusal is no test failure)."""
    return (
        "import pathlib\n"
        f"up = pathlib.Path.cwd() / {up!r}\n"
        "try:\n"
        "    (up / 'pytest.ini').write_text('[pytest]\\n')\n"
        f"    (up / 'conftest.py').write_text({PASS_EVERYTHING!r})\n"
        "except OSError:\n"
        "    pass\n"
        "def test_add():\n"
        "    assert 2 + 2 == 4\n"
    )


@pytest.mark.parametrize("fenced", [True, False], ids=["fenced", "no-landlock"])
@pytest.mark.parametrize("where", sorted(ABOVE))
def test_attack_hermetic_check_plants_configuration_above_the_checkout(
    world: World, monkeypatch: pytest.MonkeyPatch, where: str, fenced: bool
) -> None:
    """On tree T1 the tests write a pytest.ini and a conftest.py that turns failures into
    passes into a folder above the private checkout; tree T2's test fails and T2 plants
    nothing, but pytest, looking upwards for its configuration, found them there: a signed PASS
    for T2 (every fenced variant, and the no-Landlock ones of gitaudit's folders, before the
    fix; the same channel works from step to step within one run). Checks now write only
    their checkout, HOME and TMPDIR, and no folder above the checkout takes a new entry: T2
    FAILs. Where the kernel has no Landlock (the fence off) what a check left in gitaudit's
    folders is removed before the next run, and the cache folder itself, which the user may
    name, is refused while it holds it; above the cache (the user's folders) nothing stops an
    unfenced check from writing, but a run refuses to start while a folder above the cache
    holds what tools look for upwards (it PASSed before: a limit then)."""
    if not fenced:
        monkeypatch.setattr(fence, "_ABI", 0)  # a kernel without Landlock
    with_pytest_on_path(monkeypatch)
    args = "-q -p no:cacheprovider tests"
    world.seal(plan(step("unit", {"type": "pytest", "args": args})))
    world.repo.write("tests/test_add.py", _plant_above(ABOVE[where]))
    world.repo.commit("T1: the tests pass, and plant configuration above the checkout")
    assert world.run().verdict == "PASS"  # honest: T1's test passes
    world.repo.write("tests/test_add.py", "def test_add():\n    assert 2 + 2 == 5\n")
    world.repo.commit("T2: the test fails")
    if not fenced and where == "cache":
        with pytest.raises(RunError, match=r"cache folder .* holds '(conftest\.py|pytest\.ini)'"):
            world.run()
        assert world.gate(None).verdict != "PASS"
        return
    if not fenced and where == "above-the-cache":
        # unfenced, a check writes ~/.cache; what tools look for upwards there is named now
        with pytest.raises(RunError, match=r"lies above gitaudit's cache folder"):
            world.run()
        assert world.gate(None).verdict != "PASS"
        return
    recorded = world.run()
    stdout = world.run_files(recorded.commit)["steps/unit/checks/0/stdout"].decode()
    assert recorded.verdict == "FAIL", stdout
    assert "1 failed" in stdout
    assert world.gate(None).verdict == "FAIL"


# a check writes what is gitaudit's beside its checkout: git's neutral excludes file (the
# purity check's git reads it), the slot's state, a folder of the next slot
BESIDE = {
    "neutral-git-excludes": "mkdir -p ../neutral/git && echo /planted > ../neutral/git/ignore",
    "slot-state": "echo {} > ../meta.json",
    "next-slot": "mkdir -p ../../1 && echo '[pytest]' > ../../1/pytest.ini",
    "private-git-dir-folder": "echo x > ../planted",
}


@pytest.mark.parametrize("what", sorted(BESIDE))
def test_attack_hermetic_check_writes_gitaudits_folders_beside_the_checkout(
    world: World, what: str
) -> None:
    """The slot's folder holds gitaudit's own state beside the checkout (its git's neutral
    HOME and XDG folder, the slot's authenticated state) and lies beside the other slots: a
    check wrote all of them (before the fix), and could leave there what a later run reads.
    The fence now refuses every such write: the check fails and nothing is left."""
    writes = {"type": "run", "cmd": BESIDE[what], "shell": True}
    world.seal(plan(step("unit", writes)))
    recorded = world.run()
    entry = recorded.doc["steps"]["unit"]
    assert entry["status"] == "failed", entry
    stderr = world.run_files(recorded.commit)["steps/unit/checks/0/stderr"].decode()
    assert "Permission denied" in stderr
    cache = Path(os.environ["HOME"]) / ".cache" / "gitaudit"
    assert not list(cache.rglob("planted")) and not list(cache.rglob("ignore"))
    assert not list(cache.rglob("pytest.ini"))


# ------------------------------------------------------------ the fence (what a check may open)


def _secrets(world: World) -> dict[str, str]:
    """The runner's key, the keys folder and the gitaudit home, as a check's variables."""
    key = world.keys["ci"]
    return {"KEY": str(key), "KEYS": str(key.parent), "HOME_DIR": str(key.parent.parent)}


READS = {
    "the runner's key file": 'grep -q PRIVATE "$KEY"',
    "the keys folder": 'ls "$KEYS" | grep -q .',
    "the gitaudit home": 'find "$HOME_DIR" -name "*.pub" | grep -q .',
    "the key through a link in the tree": "grep -q PRIVATE key-link",
    "the key through the run's /proc root": 'grep -q PRIVATE "/proc/$PPID/root$KEY"',
    "a hard link to the key": 'ln "$KEY" stolen && grep -q PRIVATE stolen',
    "the key copied by a daemon": '(cp "$KEY" "$HOME/k" &); sleep 0.2; grep -q PRIVATE "$HOME/k"',
}


@pytest.mark.parametrize("variant", sorted(READS))
def test_attack_hermetic_check_reads_the_signing_key(world: World, variant: str) -> None:
    """A check (a test the agent wrote) that reads the runner's signing key or the gitaudit
    home: by path, through a link in the tree, the run's ``/proc`` root, a hard link or a
    daemon. With the key, whoever planted the check signs evidence of its own. The kernel
    refuses the check every such open (Landlock, :mod:`gitaudit.checks.fence`)."""
    env = _secrets(world)
    os.symlink(env["KEY"], world.path / "key-link")
    world.seal(plan(step("unit", check("sh", "-c", READS[variant], env=env))))
    recorded = world.run()
    assert recorded.verdict == "FAIL", recorded.doc["steps"]["unit"]
    assert recorded.doc["steps"]["unit"]["status"] == "failed"


# where the user's configuration names the sealer's key, outside the gitaudit home: the file
# itself (its private half), or its .pub (the private key beside it, as git reads it)
CONFIGURED = {
    "user.signingKey names the .pub": ("user.signingKey", "~/.ssh/id_sealer.pub"),
    "audit.signingKey names the file": ("audit.signingKey", "~/.ssh/id_sealer"),
    "GITAUDIT_SIGNING_KEY names the file": ("GITAUDIT_SIGNING_KEY", "~/.ssh/id_sealer"),
}


@pytest.mark.parametrize("variant", sorted(CONFIGURED))
def test_attack_hermetic_check_reads_the_configured_sealer_key(
    world: World, monkeypatch: pytest.MonkeyPatch, variant: str
) -> None:
    """alice's sealer key lives in ``~/.ssh`` (where the user's git signing key lives), named by
    the user's configuration (``user.signingKey`` with ``gpg.format ssh``, ``audit.signingKey``,
    ``$GITAUDIT_SIGNING_KEY``), which her `git audit plan seal` signs with; runs sign with ci's
    key (``--key``). A check reads the sealer's key: the fence held only the run's own key and
    the gitaudit home, so the check read it (and printed it into the evidence), and whoever
    planted the check could seal any plan (all 3 got through before the fix). A run now fences
    every key file the configuration names, as it fences its own."""
    setting, value = CONFIGURED[variant]
    home = Path(os.environ["HOME"])
    (home / ".ssh").mkdir(mode=0o700)
    sealer = home / ".ssh" / "id_sealer"
    shutil.copyfile(world.keys["alice"], sealer)
    sealer.chmod(0o600)
    shutil.copyfile(f"{world.keys['alice']}.pub", f"{sealer}.pub")
    if setting == "GITAUDIT_SIGNING_KEY":
        monkeypatch.setenv(setting, value)
    else:
        section, name = setting.split(".")
        (home / ".gitconfig").write_text(
            f"[gpg]\n\tformat = ssh\n[{section}]\n\t{name} = {value}\n"
        )
    world.seal(plan(step("unit", check("cat", str(sealer)))))
    recorded = world.run(signer=world.ci)
    assert recorded.verdict == "FAIL", recorded.doc["steps"]["unit"]
    assert b"PRIVATE" not in world.run_files(recorded.commit)["steps/unit/checks/0/stdout"]


WRITES = {
    "re-pin the trust anchor": 'for a in "$HOME_DIR"/anchors/*; do echo "{}" > "$a"; done',
    "replace the runner's key": 'echo forged > "$KEY"',
    "add a key of its own": 'echo forged > "$KEYS/default"',
    "rename the keys folder away": 'mv "$KEYS" "$TMPDIR/keys"',
}


@pytest.mark.parametrize("variant", sorted(WRITES))
def test_attack_hermetic_check_writes_the_gitaudit_home(world: World, variant: str) -> None:
    """A check that writes the gitaudit home (a trust anchor of its own, a key of its own, the
    keys moved away): refused by the kernel, so every file there is as it was."""
    env = _secrets(world)
    home = Path(env["HOME_DIR"])
    (home / "anchors").mkdir(exist_ok=True)
    (home / "anchors" / "pinned.json").write_text('{"pinned": true}\n')
    world.seal(plan(step("unit", check("sh", "-c", WRITES[variant], env=env))))

    def held() -> dict[Path, bytes]:  # the marks' floors are gitaudit's own to write
        files = (p for p in home.rglob("*") if p.is_file() and "marks" not in p.parts)
        return {p: p.read_bytes() for p in files}

    before = held()
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]["unit"]
    assert held() == before


GLOBAL_CONFIG = {
    "a filter driver added to ~/.gitconfig": ('echo "[filter \\"flip\\"]" >> "$G"', ".gitconfig"),
    "~/.gitconfig replaced": ('echo "[core]" > "$G.new" && mv "$G.new" "$G"', ".gitconfig"),
    "the XDG git config": ('echo "[core]" >> "$X/config"', ".config/git/config"),
    "a global attributes file made": (
        'echo "* filter=flip" > "$X/attributes"',
        ".config/git/attributes",
    ),
}


@pytest.mark.parametrize("variant", sorted(GLOBAL_CONFIG))
def test_attack_hermetic_check_writes_the_global_git_config(world: World, variant: str) -> None:
    """The user's global git configuration is trusted like the key folder: a declared content
    filter's driver comes from it. A check that wires a filter of its own there (or any other
    setting) for the runs to come is refused by the kernel: the files are as they were."""
    home = Path(os.environ["HOME"])
    (home / ".gitconfig").write_text("[user]\n\tname = u\n")
    (home / ".config" / "git").mkdir(parents=True, exist_ok=True)
    (home / ".config" / "git" / "config").write_text("[user]\n\tname = u\n")
    before = {p: p.read_bytes() for p in (home / ".gitconfig", home / ".config" / "git" / "config")}
    script, target = GLOBAL_CONFIG[variant]
    env = {"G": str(home / ".gitconfig"), "X": str(home / ".config" / "git")}
    world.seal(plan(step("unit", check("sh", "-c", script, env=env))))
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]["unit"]
    assert {p: p.read_bytes() for p in before} == before
    assert (home / target).exists() == (target != ".config/git/attributes")


NAMED_BY_THE_GLOBAL_CONFIG = {  # what ~/.gitconfig says -> what the check writes, from $D
    "an included file": ("[include]\n\tpath = {d}/extra.gitconfig\n", "extra.gitconfig"),
    "an includeIf file": (
        '[includeIf "gitdir:/elsewhere/"]\n\tpath = {d}/work.gitconfig\n',
        "work.gitconfig",
    ),
    "the attributes file": ("[core]\n\tattributesFile = {d}/attributes\n", "attributes"),
    "the hooks folder": ("[core]\n\thooksPath = {d}/hooks\n", "hooks/pre-push"),
    "a filter's program": ('[filter "keep"]\n\tclean = {d}/keep --clean\n', "keep"),
}


@pytest.mark.parametrize("variant", sorted(NAMED_BY_THE_GLOBAL_CONFIG))
def test_attack_hermetic_check_writes_what_the_global_git_config_names(
    world: World, tmp_path: Path, variant: str
) -> None:
    """The user's global git configuration names files elsewhere, trusted as it is: a file it
    includes (wiring a filter or an attributes file there is wiring it in the configuration),
    its attributes file (`*.sh text eol=crlf` made a failing script with CRLF line ends the
    checkout of the proven tree for `git audit status`), its hooks folder, a filter's program.
    A check wrote each for the runs to come (all before the fix); the kernel refuses it, and
    the files are as they were."""
    dotfiles = tmp_path / "dotfiles"
    (dotfiles / "hooks").mkdir(parents=True)
    line, name = NAMED_BY_THE_GLOBAL_CONFIG[variant]
    home = Path(os.environ["HOME"])
    with (home / ".gitconfig").open("a") as config:
        config.write(line.format(d=dotfiles))
    (dotfiles / "extra.gitconfig").write_text("[user]\n\tname = u\n")
    (dotfiles / "keep").write_text("#!/bin/sh\ncat\n")
    before = {p: p.read_bytes() for p in dotfiles.rglob("*") if p.is_file()}
    script = (
        'echo "*.sh text eol=crlf" >> "$D/{0}"'
        ' || {{ echo x > "$D/{0}.new" && mv "$D/{0}.new" "$D/{0}"; }}'
    )
    env = {"D": str(dotfiles)}
    world.seal(plan(step("unit", check("sh", "-c", script.format(name), env=env))))
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]["unit"]
    assert {p: p.read_bytes() for p in dotfiles.rglob("*") if p.is_file()} == before


def test_a_fenced_check_still_has_its_checkout_home_tmp_and_tools(world: World) -> None:
    """Control: inside the fence a check reads and writes its checkout, its HOME and TMPDIR,
    runs the system's tools and git in the checkout, and a live step reads the work tree (but
    not the keys)."""
    key = world.keys["ci"]
    world.repo.write("verdict", "ok\n")
    script = (
        "grep -qx ok verdict && echo x > made && rm made"
        ' && echo h > "$HOME/h" && echo t > "$TMPDIR/t" && python3 -c "print(1)" >/dev/null'
        " && git rev-parse HEAD >/dev/null && git log -1 >/dev/null"
    )
    live = f'grep -qx ok verdict && ! cat "{key}"'
    world.seal(
        plan(
            step("unit", check("sh", "-c", script)),
            step("live", check("sh", "-c", live), workspace="live"),
        )
    )
    recorded = world.run()
    steps = recorded.doc["steps"]
    assert (steps["unit"]["status"], steps["live"]["status"]) == ("passed", "passed"), steps


LEAVE_A_LINK = {
    # the next run's update wrote `gitdir: ...` through it, into a file the tree ignores
    "root-gitfile-to-an-ignored-name": "rm .git && ln -s config.local .git",
    "root-gitfile-to-a-folder": "rm .git && mkdir .git && touch .git/config.local",
}


@pytest.mark.parametrize("how", sorted(LEAVE_A_LINK))
def test_attack_hermetic_a_check_replaces_the_checkouts_git_file(world: World, how: str) -> None:
    """Where `armed` exists, the check replaces the checkout's own `.git` file (a link to
    `config.local`, a name the tree ignores; or a folder) and passes. The purity check never
    looked at the root `.git`, so the run was pure, and the next run's update wrote `gitdir:
    ...` through the link: on the next tree (no `armed`, where the check passes only if
    `config.local` exists, which that tree does not hold) the check passed, a signed PASS
    (before the fix). Now the rewritten `.git` makes the arming run impure, and the next run
    writes its `.git` anew, never through what a check left there."""
    world.repo.write(".gitignore", "config.local\n")
    world.repo.write("armed", "")
    script = (
        f"#!/bin/sh\nif [ -f armed ]; then {LEAVE_A_LINK[how]}; exit 0; fi\ntest -f config.local\n"
    )
    world.repo.write("check.sh", script, mode=0o755)
    world.seal(plan(step("unit", check("sh", "./check.sh"))))
    armed = world.run()
    assert armed.doc["steps"]["unit"]["status"] == "passed", armed.doc["steps"]
    assert armed.verdict == "FAIL" and ".git" in " ".join(armed.changed_paths), armed.doc
    world.repo.git("rm", "-q", "armed")
    world.repo.commit("the next tree")
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]
    assert recorded.verdict == "FAIL"
    assert world.gate(None).verdict != "PASS"


def test_attack_hermetic_a_check_swaps_a_submodule_for_a_link(world: World, tmp_path: Path) -> None:
    """The check replaces the checkout's submodule folder `lib` by a link to a folder outside
    the checkout (here a stand-in for the gitaudit home, which the fence keeps checks from
    writing). The run is impure; but its clean-up ran `git clean -ffdx` in `lib`, through the
    link, and removed every file there (the runner's key and the trust anchors, before the
    fix), and the purity check listed that folder's names. Nothing outside the checkout is
    touched or listed now, and the next run puts the submodule back as a folder."""
    _nested_submodule(world, tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "key").write_text("not the checks' to remove\n")
    world.repo.write("armed", "")
    world.repo.commit("armed")
    swap = f"if [ -f armed ]; then rm -rf lib && ln -s {outside} lib; fi"
    reads = f"{swap}; grep -qx broken lib/inner/verdict"
    world.seal(plan(step("unit", {"type": "run", "cmd": reads, "shell": True})))
    recorded = world.run()
    assert recorded.verdict == "FAIL", recorded.doc["reasons"]
    assert recorded.doc["purity"]["changed"], recorded.doc["purity"]
    assert "key" not in json.dumps(recorded.doc["purity"])
    assert (outside / "key").read_text() == "not the checks' to remove\n"
    assert sorted(p.name for p in outside.iterdir()) == ["key"]
    world.repo.git("rm", "-q", "armed")
    world.repo.commit("disarmed")
    assert world.run().verdict == "PASS"  # lib is a folder of the checkout again
    assert sorted(p.name for p in outside.iterdir()) == ["key"]


# where the agent puts a `git` of its own and starts `git audit run` with it first on PATH: in
# the git directory, in the work tree (untracked), through a link elsewhere into the git
# directory, in the private checkout (the tree's committed bin/git, whose folder anyone can
# work out)
PLANTED_GIT = ("git-dir", "work-tree", "link-into-git-dir", "private-checkout")


@pytest.mark.parametrize("where", PLANTED_GIT)
def test_attack_hermetic_planted_git_reads_the_tree_for_the_run(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str
) -> None:
    """gitaudit reads everything it judges through git, found on the caller's PATH. The agent
    plants a `git` that checks out a passing tree where the run asks for the failing one and
    says the checkout stayed clean (`status`, `diff-files` print nothing), and starts the run
    with its folder first on PATH: the run signed a PASS for a tree whose check fails (before
    the fix). gitaudit runs the first git on PATH outside the repository and its cache: the
    planted one never runs, and the run is FAIL."""
    world.repo.write("verdict", "ok\n")
    world.seal(plan(step("unit", READS_VERDICT)))
    good = world.repo.git("rev-parse", "HEAD^{tree}").strip()
    world.repo.write("verdict", "broken\n")
    world.repo.commit("the verdict broken")
    real = shutil.which("git")
    assert real is not None
    log = tmp_path / "planted.log"
    script = (
        f"#!{sys.executable}\nimport os, sys\nargs = sys.argv[1:]\n"
        f"open({str(log)!r}, 'a').write(' '.join(args) + '\\n')\n"
        "if 'status' in args or 'diff-files' in args:\n    sys.exit(0)\n"
        "if 'read-tree' in args:\n"
        f"    args = [{good!r} if len(a) == 40 and a != args[-2] else a for a in args]\n"
        f"os.execv({real!r}, [{real!r}, *args])\n"
    )
    if where == "private-checkout":
        world.repo.write("bin/git", script)
        (world.path / "bin" / "git").chmod(0o755)
        world.repo.commit("the tree's own git")
        assert world.run().verdict == "FAIL"  # honest PATH: the checkout exists now
        folder = Path(checkouts_dir(world.handle().gitdir)) / "0" / "tree" / "bin"
        log.unlink(missing_ok=True)
    else:
        folder = world.path / (".git/bin" if where != "work-tree" else "tools")
        folder.mkdir()
        (folder / "git").write_text(script)
        (folder / "git").chmod(0o755)
        if where == "link-into-git-dir":
            (tmp_path / "tools").symlink_to(folder)
            folder = tmp_path / "tools"
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    recorded = world.run()
    assert not log.exists(), log.read_text()[:500]
    assert recorded.verdict == "FAIL", recorded.doc["reasons"]
    assert world.gate(None).verdict != "PASS"


# what the agent adds to the kept checkout between two runs, by hand (its folder is a path
# anyone can work out: <cache>/checkouts/<sha256(gitdir)[:20]>/0/tree), and what the check of
# the next tree tests for; each is something git does not track there
KEPT_CHECKOUT_PLANTS = {
    "ignored-file": "test -f build/flag",
    "empty-folder": "test -d build",
    "ignored-link": "test -f build/flag",
    "shadowing-bytecode": f"{shlex.quote(sys.executable)} -c 'import verdict; assert verdict.OK'",
}


def _plant_in_kept_checkout(tree: Path, what: str, outside: Path) -> None:
    if what == "ignored-file":
        (tree / "build").mkdir()
        (tree / "build" / "flag").write_text("")
    elif what == "empty-folder":
        (tree / "build").mkdir()
    elif what == "ignored-link":  # a node_modules-like link to a folder of the agent's
        outside.mkdir()
        (outside / "flag").write_text("")
        (tree / "build").symlink_to(outside)
    else:  # bytecode of the passing verdict.py that Python never checks against the source
        source = tree / "verdict.py"
        source.write_text("OK = True\n")
        pyc = tree / "__pycache__" / f"verdict.{sys.implementation.cache_tag}.pyc"
        py_compile.compile(
            str(source),
            cfile=str(pyc),
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
        source.write_text("OK = False\n")  # the tree's bytes again (times aside: git rehashes)


@pytest.mark.parametrize("next_tree", ["another-tree", "same-tree"])
@pytest.mark.parametrize("what", sorted(KEPT_CHECKOUT_PLANTS))
def test_attack_hermetic_agent_plants_files_in_the_kept_checkout(
    world: World, tmp_path: Path, what: str, next_tree: str
) -> None:
    """A run leaves its checkout clean and the slot's state says so; the agent then adds, by
    hand, what the tree ignores (or git does not track) to the kept checkout: an ignored
    ``build/flag``, an empty ``build`` folder, ``build`` as a link to a folder of its own (a
    ``node_modules`` link), a ``__pycache__`` entry that makes ``import verdict`` run the
    passing bytes. The next run (of another tree, or the same) merged the tree into the
    checkout, which keeps every file its index does not hold, the check found what was
    planted, and the purity check took it for an ignored output: a signed PASS (all eight
    before the fix). What git does not track is removed before the merge: FAIL."""
    world.repo.write(".gitignore", "build/\n__pycache__/\n")
    world.repo.write("verdict.py", "OK = False\n")
    test = {"type": "run", "cmd": KEPT_CHECKOUT_PLANTS[what], "shell": True}
    world.seal(plan(step("unit", test)))
    first = world.run()
    assert first.verdict == "FAIL" and first.doc["purity"]["changed"] == [], first.doc
    if next_tree == "another-tree":
        world.repo.write("notes.txt", "another tree\n")
        world.repo.commit("the next tree")
    kept = Path(checkouts_dir(world.path / ".git")) / "0" / "tree"
    assert (kept / "verdict.py").read_text() == "OK = False\n"
    _plant_in_kept_checkout(kept, what, tmp_path / "agents")
    recorded = world.run()
    assert recorded.doc["workspace"]["fresh"] is False  # the kept checkout, updated
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]
    assert recorded.verdict == "FAIL"
    assert world.gate(None).verdict != "PASS"


@pytest.mark.parametrize(
    ("link", "leads_to", "declared"),
    [("lnk", ".", "lnk/src"), ("deep/lnk", ".", "deep/lnk/src"), ("vendor", "src", "vendor/pkg")],
)
def test_attack_hermetic_declared_path_through_a_linked_folder(
    world: World, link: str, leads_to: str, declared: str
) -> None:
    """The declared ignored path is no link itself, but a folder above it (ignored by git) is a
    link into the work tree: the path is the tracked ``src`` under another name, and the checks
    would import the live sources through it. Refused like a declared path that is the link."""
    world.repo.write(".gitignore", "/lnk\n/deep/\n/vendor\n")
    world.repo.write("src/pkg/__init__.py", "OK = False\n")
    world.repo.write("src/__init__.py", "")
    world.seal(plan(step("unit")) | {"ignored_paths": [declared]})
    (world.path / link).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(world.path / leads_to, world.path / link)
    with pytest.raises(RunError, match="pointing into the work tree") as err:
        world.run()
    assert f"({declared} -> {world.path / 'src'}" in err.value.message
