"""Attacks through the workspace: what the checks see versus what the fingerprint names."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gitaudit.checks import execute, paths
from gitaudit.errors import PlanError, RepositoryError
from gitaudit.git import conversions
from gitaudit.git.fingerprint import EMPTY_TREE, private_folder
from gitaudit.git.index_files import STALE_AFTER_SECONDS
from gitaudit.plan.catalog import check_worktree
from tests.adversarial.conftest import World, assert_plan, check, only, plan, step
from tests.agent.host import run_hook, stop
from tests.gitrepo import (
    OLD_TIME,
    GitRepo,
    cached_trees,
    edit_keeping_times,
    point_entry_at,
    root_left_to_compute,
    with_cached_trees,
)
from tests.test_head_start import kept_long_ago


def _escape_in_plan(world: World, data: dict[str, Any], field: str) -> None:
    """The plan is committed (sealing it is refused) and the gate reports the exact problem."""
    world.write_plan(data)
    world.repo.commit("plan with an escaping path")
    (checked,) = check_worktree(world.path, "default")
    with pytest.raises(PlanError, match=r"path\.escapes-workspace"):
        checked.require_valid()
    judged = assert_plan(world.gate(), "plan.invalid", "FAIL")
    assert "[path.escapes-workspace]" in judged.reasons[0].message
    assert field in judged.reasons[0].message


def test_attack_workspace_check_modifies_the_workspace(world: World) -> None:
    """A check that writes into the work tree makes the run FAIL (audit purity), even though
    every check passed."""
    world.seal(plan(step("unit", check("touch", "generated.txt"))))
    recorded = world.run()
    assert recorded.verdict == "FAIL"
    assert recorded.changed_paths == ("generated.txt",)
    assert recorded.doc["steps"]["unit"]["status"] == "passed"
    judged = assert_plan(world.gate(), "evidence.fail", "FAIL")
    assert "the workspace changed during the run" in judged.reasons[0].message


def test_attack_workspace_file_exists_through_a_symlink_to_etc(world: World) -> None:
    """`file_exists etc/passwd` where `etc` is a committed symlink to /etc."""
    os.symlink("/etc", world.path / "etc")
    world.seal(plan(step("unit", {"type": "file_exists", "path": "etc/passwd"}, check("true"))))
    assert world.run().verdict == "FAIL"
    judged = assert_plan(world.gate(), "step.failed", "FAIL")
    assert "escapes the workspace through a symlink" in judged.reasons[0].message


def test_attack_workspace_regex_through_a_symlinked_file(world: World) -> None:
    """`regex` over a committed symlink to /etc/passwd."""
    os.symlink("/etc/passwd", world.path / "users.txt")
    world.seal(
        plan(step("unit", {"type": "regex", "path": "users.txt", "pattern": "root"}, check("true")))
    )
    assert world.run().verdict == "FAIL"
    judged = assert_plan(world.gate(), "step.failed", "FAIL")
    assert "escapes the workspace through a symlink" in judged.reasons[0].message


def test_attack_workspace_cwd_traversal_in_the_plan(world: World) -> None:
    _escape_in_plan(world, plan(step("unit", check("true", cwd="../.."))), "cwd")


def test_attack_workspace_exec_path_absolute(world: World) -> None:
    _escape_in_plan(world, plan(step("unit", {"type": "exec", "path": "/bin/sh"})), "path")


def test_attack_workspace_output_path_traversal(world: World) -> None:
    output = {"name": "o", "verify": [{"type": "file_exists", "path": "../../../etc/passwd"}]}
    _escape_in_plan(world, plan(step("unit", outputs=[output])), "path")


def test_attack_workspace_cwd_through_a_symlinked_directory(world: World, tmp_path: Path) -> None:
    """A lexically clean `cwd` that is a committed symlink to a directory outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, world.path / "build")
    world.seal(plan(step("unit", check("true", cwd="build"))))
    assert world.run().verdict == "FAIL"
    judged = assert_plan(world.gate(), "step.failed", "FAIL")
    assert "cwd 'build' escapes the workspace through a symlink" in judged.reasons[0].message


def test_attack_workspace_exec_through_a_symlinked_directory(world: World) -> None:
    """`exec tools/true` where `tools` is a committed symlink to /usr/bin."""
    os.symlink("/usr/bin", world.path / "tools")
    world.seal(plan(step("unit", {"type": "exec", "path": "tools/true"})))
    assert world.run().verdict == "FAIL"
    judged = assert_plan(world.gate(), "step.failed", "FAIL")
    assert "exec path 'tools/true' escapes the workspace" in judged.reasons[0].message


def test_attack_workspace_case_variant_path(world: World) -> None:
    """On Linux README.md and readme.md are different files, and trees: evidence for the tree
    with README.md is not evidence for the one with readme.md (where the check fails)."""
    world.seal(plan(step("unit", {"type": "file_exists", "path": "README.md"}, check("true"))))
    assert world.run().verdict == "PASS"
    world.repo.git("mv", "README.md", "readme.md")
    world.repo.commit("rename, same bytes")
    assert_plan(world.gate(), "evidence.missing", "UNKNOWN")
    assert world.run().verdict == "FAIL"
    assert_plan(world.gate(), "step.failed", "FAIL")


def test_attack_workspace_ignored_file_changes_the_result(world: World) -> None:
    """An ignored file (`config.local`) is outside the fingerprint, so a check must not be able
    to read it: checks run in a checkout of exactly the tree, where it does not exist. (Before
    hermetic runs this was a documented limit: the check passed, the file then changed, and the
    gate still said PASS.)"""
    world.repo.write(".gitignore", "config.local\n")
    world.repo.write("config.local", "mode=ok\n")
    world.seal(plan(step("unit", check("grep", "-q", "mode=ok", "config.local"))))
    recorded = world.run()
    assert recorded.verdict == "FAIL"
    assert recorded.doc["steps"]["unit"]["status"] == "failed"
    assert_plan(world.gate(None), "step.failed", "FAIL")


def test_attack_workspace_submodule_checkout_changed(world: World, tmp_path: Path) -> None:
    """A submodule is a gitlink in the tree: the fingerprint records the submodule's checked-out
    commit, so checking out another commit in it is another tree without evidence."""
    lib = GitRepo.create(tmp_path / "lib")
    lib.write("lib.py", "VERSION = 1\n")
    lib.commit("v1")
    lib.write("lib.py", "VERSION = 2  # broken\n")
    lib.commit("v2")
    world.repo.git(
        "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib.path), "lib"
    )
    world.repo.commit("add lib")
    world.seal(plan(step("unit", check("grep", "-q", "VERSION = 2", "lib/lib.py"))))
    assert world.run().verdict == "PASS"
    assert world.gate(None).verdict == "PASS"
    subprocess.run(["git", "checkout", "-q", "HEAD~1"], cwd=world.path / "lib", check=True)
    judged = assert_plan(world.gate(None), "evidence.missing", "UNKNOWN")
    assert world.repo.head_tree()[:12] not in judged.reasons[0].message


@pytest.mark.parametrize("how", ["config", "include", "upper-case", "worktree-config"])
def test_attack_workspace_clean_filter_hides_an_edit(world: World, how: str) -> None:
    """`check.sh` fails as committed. The agent edits it to pass and hides the edit from the
    fingerprint with a clean filter that prints the committed version (`git status` is clean):
    defined in the repository's config, in a file that config includes, in a section written
    in upper case, or in the work tree's own config (the last three got past the check, which
    read `.git/config` for the word "filter", before the fix)."""
    world.repo.write("check.sh", "exit 1\n")
    world.seal(plan(step("unit", check("sh", "check.sh"))))
    assert world.run().verdict == "FAIL"
    world.repo.write("check.sh", "exit 0\n")
    (world.path / ".git/info").mkdir(exist_ok=True)
    (world.path / ".git/info/attributes").write_text("check.sh filter=hide\n")
    driver = '[filter "hide"]\n\tclean = git show HEAD:check.sh\n'
    if how == "config":
        world.repo.git("config", "filter.hide.clean", "git show HEAD:check.sh")
    elif how == "include":
        (world.path / ".git" / "tools.cfg").write_text(driver)
        world.repo.git("config", "include.path", "tools.cfg")
    elif how == "upper-case":
        with (world.path / ".git" / "config").open("a") as handle:
            handle.write(driver.replace("filter", "FILTER").replace("clean", "CLEAN"))
    else:
        world.repo.git("config", "extensions.worktreeConfig", "true")
        world.repo.git("config", "--worktree", "filter.hide.clean", "git show HEAD:check.sh")
    assert world.repo.git("status", "--porcelain") == ""
    with pytest.raises(RepositoryError, match="defines content filters"):
        world.run()  # refused: the checks would read other bytes than the fingerprint
    status = world.cli("status", process=True)
    assert status.code == 1 and "defines content filters" in status.err, status
    assert_plan(world.gate("HEAD"), "step.failed", "FAIL")  # the committed script, as run


@pytest.mark.parametrize("first", ["status", "run"])
def test_attack_workspace_left_idle_past_the_debris_age_is_not_the_empty_tree(
    world: World, first: str
) -> None:
    """An agent leaves the work tree as gitaudit last saw it for longer than the fingerprint's
    debris age (15 minutes), then runs `git audit run`. The private index seeded from the
    kept index carries that old modification time; swept as debris, it made `git write-tree`
    read an empty index, so the run proved the empty tree (a check that passes anywhere passed
    in an empty checkout) and `git audit status`, fingerprinting the same way, said PASS for a
    work tree whose checks never saw its files. Now the run proves HEAD's tree, and the
    evidence answers for it and no other."""
    world.seal(plan(step("unit", check("true"))))
    app = world.repo.write("app.py", "ANSWER = 41\n")
    world.repo.commit("app, unproven")
    for name in world.repo.git("ls-files").split():
        os.utime(world.path / name, ns=(OLD_TIME, OLD_TIME))
    if first == "status":
        assert world.cli("status").code == 3  # keeps the private index, then nothing changes
    else:
        assert world.cli("run", "--key", str(world.keys["ci"])).code == 0
    kept_long_ago(world.repo, STALE_AFTER_SECONDS + 60)
    run = world.cli("run", "--key", str(world.keys["ci"]), "--fresh")
    assert run.code == 0, run
    head_tree = world.repo.head_tree()
    recorded = json.loads(world.repo.git("show", "refs/audit/runs/default:run.json"))
    assert recorded["tree"] == head_tree != EMPTY_TREE
    kept_long_ago(world.repo, STALE_AFTER_SECONDS + 60)
    status = world.cli("status", "--json")
    assert status.code == 0 and json.loads(status.out)["tree"] == head_tree, status
    assert app.read_text() == "ANSWER = 41\n"


def test_attack_workspace_idle_tree_failing_its_check_cannot_stop_on_empty_tree_evidence(
    world: World,
) -> None:
    """The sharper form: the check fails on the work tree (app.py still says 41) but passes
    where app.py is missing. After the idle time, `git audit run` recorded a PASS for the
    empty tree and the stop hook, fingerprinting the same way, let the agent stop. Now the
    run fails for HEAD's tree and the stop hook blocks."""
    world.seal(plan(step("unit", check("sh", "-c", "! grep -q 41 app.py"))))
    world.repo.write("app.py", "ANSWER = 41\n")
    world.repo.commit("app, failing its check")
    for name in world.repo.git("ls-files").split():
        os.utime(world.path / name, ns=(OLD_TIME, OLD_TIME))
    assert world.cli("status").code == 3  # keeps the private index, then nothing changes
    kept_long_ago(world.repo, STALE_AFTER_SECONDS + 60)
    assert world.cli("run", "--key", str(world.keys["ci"])).code == 1
    recorded = json.loads(world.repo.git("show", "refs/audit/runs/default:run.json"))
    assert (recorded["tree"], recorded["verdict"]) == (world.repo.head_tree(), "FAIL")
    kept_long_ago(world.repo, STALE_AFTER_SECONDS + 60)
    assert run_hook(world.path, "stop", stop(world.path)).blocked


def _proven(world: World) -> None:
    """One step checking `true`, sealed, run and judged PASS for the work tree as it is."""
    world.seal(plan(step("unit", check("true"))))
    assert world.run().verdict == "PASS"
    assert world.gate(None).verdict == "PASS"


def _proven_app(world: World) -> Path:
    """app.py (its times long past) committed and proven: the work tree's verdict is PASS."""
    app = world.repo.write("app.py", "ANSWER = 42\n")
    os.utime(app, ns=(OLD_TIME, OLD_TIME))
    _proven(world)
    return app


@pytest.mark.parametrize(
    "blind",
    [
        pytest.param(("core.checkStat", "minimal"), id="checkStat-minimal"),
        pytest.param(("core.trustctime", "false"), id="trustctime-false"),
    ],
)
@pytest.mark.parametrize("first", [False, True], ids=["edit-then-config", "config-then-edit"])
def test_attack_workspace_config_blinds_the_stat_comparison(
    world: World, blind: tuple[str, str], first: bool
) -> None:
    """app.py is proven. The agent edits it in place (the same size, its times put back) and
    has the repository's config tell git to ignore the change time: `git status` is clean, but
    the work tree's verdict is UNKNOWN (no evidence for the bytes on disk). Also with the config
    set first and the PASS judged under it (the fingerprint keeps its index under the settings
    it saw, so the edit meets a kept index and git's stat comparison alone)."""
    app = _proven_app(world)
    if first:
        world.repo.git("config", *blind)
        assert world.gate(None).verdict == "PASS"  # kept under the blinding settings
    edit_keeping_times(app, b"ANSWER = 41\n")
    if not first:
        assert "app.py" in world.repo.git("status", "--porcelain")  # git, by default, sees it
        world.repo.git("config", *blind)
    assert world.repo.git("status", "--porcelain") == ""  # blinded
    assert_plan(world.gate(None), "evidence.missing", "UNKNOWN")
    assert world.cli("status", process=True).code == 3


@pytest.mark.parametrize("where", ["outside", "inside"])
@pytest.mark.parametrize("dotgit", [False, True], ids=["bare-copy", "copy-with-a-dotgit-file"])
def test_attack_workspace_core_worktree_points_at_a_clean_copy(
    world: World, tmp_path: Path, where: str, dotgit: bool
) -> None:
    """app.py is proven (and its PASS remembered by the verdict memo). The agent edits it,
    writes a clean copy of the proven tree to another folder (outside the project, or in an
    ignored folder inside it; with a `.git` file there naming the real git dir, the copy looks
    like a worktree of its own) and points `core.worktree` there: git, `git status` included,
    now reads the clean copy. The work tree's verdict (served from the memo or judged) and the
    agents' stop hook refuse: git's work tree is not the folder `status` entered."""
    app = _proven_app(world)
    assert world.cli("status", process=True).code == 0  # the memo remembers the PASS
    copy = tmp_path / "clean" if where == "outside" else world.path / ".cache" / "clean"
    copy.mkdir(parents=True)
    if where == "inside":
        world.repo.write(".git/info/exclude", ".cache/\n")
    archive = subprocess.run(
        ["git", "archive", "HEAD"], cwd=world.path, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(copy)], input=archive, check=True)
    if dotgit:
        (copy / ".git").write_text(f"gitdir: {world.path / '.git'}\n")
    app.write_text("ANSWER = 41\n")
    assert "app.py" in world.repo.git("status", "--porcelain")
    world.repo.git("config", "core.worktree", str(copy))
    assert world.repo.git("status", "--porcelain") == ""  # git reads the clean copy
    with pytest.raises(RepositoryError, match=r"core\.worktree"):
        world.gate(None)
    status = world.cli("status", process=True)
    assert status.code == 1 and "core.worktree" in status.err, status
    stopping = run_hook(world.path, "stop", stop(world.path))
    assert stopping.blocked and "core.worktree" in stopping.reason, stopping


@pytest.mark.parametrize("variant", ["readme.md", "src/App.py"])
def test_attack_workspace_ignorecase_hides_a_case_variant(world: World, variant: str) -> None:
    """README.md and src/app.py are proven. On this file system, which tells names apart by
    case, the agent adds a file named as a case variant of a tracked one and sets
    `core.ignorecase=true`: git lists it nowhere, `git status` is clean. The work tree's verdict
    and the stop hook see it (git is told what the file system does): UNKNOWN."""
    world.repo.write("README.md", "proven\n")
    world.repo.write("src/app.py", "ANSWER = 42\n")
    _proven(world)
    assert run_hook(world.path, "stop", stop(world.path)).allowed
    world.repo.write(variant, "not proven\n")
    assert variant in world.repo.git("status", "--porcelain")
    world.repo.git("config", "core.ignorecase", "true")
    assert world.repo.git("status", "--porcelain") == ""  # hidden from git
    assert_plan(world.gate(None), "evidence.missing", "UNKNOWN")
    assert world.cli("status", process=True).code == 3
    stopping = run_hook(world.path, "stop", stop(world.path))
    assert stopping.blocked and "UNKNOWN" in stopping.reason, stopping


def test_attack_workspace_link_replaced_by_its_text(world: World) -> None:
    """`config.py` is a committed link to `settings/prod.py`, proven. The agent replaces the link
    by a plain file holding the link's text and sets `core.symlinks=false`: `git status` is
    clean, but the work tree's verdict is UNKNOWN (a plain file is not the proven link)."""
    world.repo.write("settings/prod.py", "DEBUG = False\n")
    os.symlink("settings/prod.py", world.path / "config.py")
    _proven(world)
    (world.path / "config.py").unlink()
    (world.path / "config.py").write_text("settings/prod.py")
    world.repo.git("config", "core.symlinks", "false")
    assert world.repo.git("status", "--porcelain") == ""
    assert_plan(world.gate(None), "evidence.missing", "UNKNOWN")


@pytest.mark.parametrize("seen", ["after-a-run", "first-contact", "new-settings"])
def test_attack_workspace_forged_index_stat_cache(world: World, seen: str) -> None:
    """app.py is proven. The agent edits it, stages the edit (the index records the edited
    file's stat data), then rewrites that index entry's blob id to the proven content's by hand.
    git's stat cache now says the file is unchanged: `git status`, `git diff` and `git commit
    -a` see the proven tree. The work tree's fingerprint keeps stat data of its own, recorded
    when git hashed each file for gitaudit, and hashes every file when it has none: on first
    contact (here: its cache emptied, as in a fresh clone) and under new settings (the agent
    also writes the repository's config, so nothing kept applies): the edit is read, and the
    work tree's verdict is UNKNOWN through `git audit status` and the stop hook."""
    app = _proven_app(world)
    assert run_hook(world.path, "stop", stop(world.path)).allowed
    proven = world.repo.git("rev-parse", "HEAD:app.py").strip()
    app.write_text("ANSWER = 0\n")
    os.utime(app, ns=(OLD_TIME, OLD_TIME))  # older than the index: git does not re-read it
    world.repo.git("add", "app.py")
    point_entry_at(world.repo, "app.py", proven)
    if seen == "first-contact":
        shutil.rmtree(private_folder(world.path / ".git"))
    if seen == "new-settings":
        world.repo.git("config", "core.quotePath", "false")  # a setting of git's core
    assert world.repo.git("status", "--porcelain") == ""  # git is fooled
    assert world.repo.git("diff", "HEAD") == ""
    assert_plan(world.gate(None), "evidence.missing", "UNKNOWN")
    status = world.cli("status", process=True)
    assert status.code == 3 and "UNKNOWN" in status.out, status
    stopping = run_hook(world.path, "stop", stop(world.path))
    assert stopping.blocked and "UNKNOWN" in stopping.reason, stopping
    world.repo.git("commit", "-q", "-a", "--allow-empty", "-m", "after the forgery")
    assert world.repo.git("rev-parse", "HEAD:app.py").strip() == proven  # what git commits
    assert world.gate("HEAD").verdict == "PASS"  # true: HEAD holds the checked bytes
    assert_plan(world.gate(None), "evidence.missing", "UNKNOWN")  # the work tree does not


@pytest.mark.parametrize("where", ["root", "folder"])
def test_attack_workspace_forged_cached_tree_ids(world: World, where: str) -> None:
    """src/app.py is proven. The agent edits and stages it, then writes into the user's index
    the tree ids git cached for the proven tree (the ``TREE`` extension): for the root, or for
    the folder alone (git then computes the root from it). `git write-tree`, and `git commit`,
    trust cached ids that name existing trees: they answer the proven tree although the index
    and the file hold the edit. The work tree's verdict reads the entries: UNKNOWN, through
    `git audit status` and the stop hook."""
    app = world.repo.write("src/app.py", "ANSWER = 42\n")
    world.repo.write("README.md", "the app\n")
    world.seal(plan(step("unit", check("true"))))
    assert world.run().verdict == "PASS"
    assert run_hook(world.path, "stop", stop(world.path)).allowed
    index = world.path / ".git" / "index"
    proven = cached_trees(index.read_bytes())
    if where == "folder":
        proven = root_left_to_compute(proven)
    app.write_text("ANSWER = 0\n")
    os.utime(app, ns=(OLD_TIME, OLD_TIME))  # not racily clean: git keeps the entry as it is
    world.repo.git("add", "src/app.py")
    index.write_bytes(with_cached_trees(index.read_bytes(), proven))
    assert world.repo.git("write-tree").strip() == world.repo.head_tree()  # git is fooled
    assert world.repo.git("status", "--porcelain") == ""  # and so is its status
    assert_plan(world.gate(None), "evidence.missing", "UNKNOWN")
    stopping = run_hook(world.path, "stop", stop(world.path))
    assert stopping.blocked and "UNKNOWN" in stopping.reason, stopping


def _forge_old_marker(world: World) -> None:
    """The marker that once told the fingerprint "this version of the user's index was checked
    (no marks)": the index's identity, an entry count and a check value, which is no secret."""
    index = world.path / ".git" / "index"
    st = index.stat()
    trailer = index.read_bytes()[-32:].hex()
    identity = f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{trailer}"
    entries = len(world.repo.git("ls-files", "-z").split("\0")) - 1
    check_value = hashlib.sha256(f"{identity} {entries}".encode()).hexdigest()[:16]
    line = f"{identity} {entries} {check_value}\n"
    (world.path / ".git" / "gitaudit" / "fingerprint.verified").write_text(line)


@pytest.mark.parametrize("forgery", ["marker", "kept-in-place", "kept-renamed-over"])
def test_attack_workspace_forged_fingerprint_state(world: World, forgery: str) -> None:
    """app.py is proven; the agent edits it. The fingerprint starts from an index it kept, so
    the agent forges that state: (marker) it
    marks app.py skip-worktree (git stops looking at the file) and writes, in the git dir, the
    marker that once said "this version of the index was checked"; or it rewrites the kept copy
    (kept in the git dir before the fix, now in the user's cache: as if the agent reached it),
    in place or by a file renamed over it, with app.py's entry naming the proven blob beside
    the edited file's stat data (and its tag naming the proven tree). Before the fix each
    fooled `git audit status` and the stop hook (PASS). Nothing in the git dir is taken as
    checked now, and a kept copy is used only with the tag its writer made under a key the
    agent cannot read: UNKNOWN."""
    app = _proven_app(world)
    proven = bytes.fromhex(world.repo.git("rev-parse", "HEAD:app.py").strip())
    private = private_folder(world.path / ".git")
    if forgery == "marker":
        world.repo.git("update-index", "--skip-worktree", "app.py")
    app.write_text("ANSWER = 0\n")  # the same size
    os.utime(app, ns=(OLD_TIME, OLD_TIME))
    if forgery == "marker":
        assert world.repo.git("status", "--porcelain") == ""  # hidden from git
        _forge_old_marker(world)
    else:
        assert world.repo.git("status", "--porcelain") == " M app.py\n"
        assert_plan(world.gate(None), "evidence.missing", "UNKNOWN")  # keeps its index
        edited = bytes.fromhex(world.repo.git("hash-object", "app.py").strip())
        [kept] = sorted(private.glob("warm-*.index"))
        data = kept.read_bytes()
        assert data.count(edited) == 1  # the copy holds the edit, with the file's stat data
        body = data[:-20].replace(edited, proven)
        forged = body + hashlib.sha1(body).digest()
        # and its tag names the proven tree (a MAC the agent cannot make: its old one kept)
        mac, _, basis = kept.with_suffix(".mac").read_text().strip().split(" ")
        kept.with_suffix(".mac").write_text(f"{mac} {world.repo.head_tree()} {basis}\n")
        if forgery == "kept-in-place":
            with open(kept, "r+b") as handle:
                handle.write(forged)
        else:
            (private / "forged.index").write_bytes(forged)
            os.replace(private / "forged.index", kept)
    assert_plan(world.gate(None), "evidence.missing", "UNKNOWN")
    # the command line gives git a head start on a copy of the kept index, checked after
    status = world.cli("status", process=True)
    assert status.code == 3 and "UNKNOWN" in status.out, status
    stopping = run_hook(world.path, "stop", stop(world.path))
    assert stopping.blocked and "UNKNOWN" in stopping.reason, stopping


def test_attack_workspace_fsmonitor_hides_an_edit(world: World) -> None:
    """`check.sh` fails as committed. The agent installs a file-system monitor hook that never
    reports a change, then edits the script to pass (`git status` is clean)."""
    world.repo.write("check.sh", "exit 1\n")
    world.seal(plan(step("unit", check("sh", "check.sh"))))
    hook = world.path / ".git" / "quiet-monitor"
    hook.write_text("#!/bin/sh\nprintf 'token\\0'\n")
    hook.chmod(0o755)
    world.repo.git("config", "core.fsmonitor", str(hook))
    world.repo.git("status", "--porcelain")  # the index now carries the monitor's token
    time.sleep(1.1)  # past git's racy-timestamp window
    world.repo.write("check.sh", "exit 0\n")
    assert world.repo.git("status", "--porcelain") == ""
    world.run()
    assert_plan(world.gate("HEAD"), "evidence.missing", "UNKNOWN")


def _write_file(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _refused_as_converted(world: World, message: str) -> None:
    """The work tree's verdict, `git audit status` and the stop hook refuse, naming *message*."""
    with pytest.raises(RepositoryError, match=re.escape(message)):
        world.gate(None)
    status = world.cli("status", process=True)
    assert status.code == 1 and message in " ".join(status.err.split()), status
    stopping = run_hook(world.path, "stop", stop(world.path))
    assert stopping.blocked, stopping


@pytest.mark.parametrize("where", ["tree", "info-attributes"])
def test_attack_workspace_ident_hides_an_edit(world: World, where: str) -> None:
    """app.py says `ANSWER = "$Id$"` and is proven. `ident` (in the tree's `.gitattributes`, or
    in `.git/info/attributes`) makes `git add` take anything between `$Id:` and the next `$`
    on the line for nothing, so the agent rewrites the line to
    `ANSWER = "$Id: "; ANSWER = 41; _ = "$"`: code the checks never read, hashed to the
    proven blob. The work tree's verdict, `status` and the stop hook said PASS (both before
    the fix); now the file is compared with what a checkout of its blob writes, and the
    unpinned attributes file is refused."""
    if where == "tree":
        world.repo.write(".gitattributes", "app.py ident\n")
    app = world.repo.write("app.py", 'ANSWER = "$Id$"\n')
    _proven(world)
    if where == "info-attributes":
        world.repo.write(".git/info/attributes", "app.py ident\n")
    app.write_text('ANSWER = "$Id: "; ANSWER = 41; _ = "$"\n')
    assert world.repo.git("diff") == ""  # git sees no change
    expected = "holds other bytes" if where == "tree" else "sets attributes that convert"
    _refused_as_converted(world, expected)


@pytest.mark.parametrize(
    ("extra", "nothing_kept"),
    [
        pytest.param("untracked", "new-settings", id="untracked-new-settings"),
        pytest.param("untracked", "emptied-cache", id="untracked-emptied-cache"),
        pytest.param("force-added-ignored", "new-settings", id="force-added-new-settings"),
    ],
)
def test_attack_workspace_ident_hidden_while_nothing_is_kept(
    world: World, extra: str, nothing_kept: str
) -> None:
    """app.py (`ANSWER = "$Id$"`, `ident` in the tree's `.gitattributes`) is proven. The agent
    hides `ANSWER = 41` between `$Id:` and `$`, has the fingerprint keep nothing (a setting
    of its own in `.git/config`, `core.abbrev`, makes a new slot; or the cache emptied, as in
    a fresh clone) and leaves a path `git add -A` from no index does not make the user's: an
    untracked file, or a force-added ignored one. The fingerprint hashed every file into the
    seed, brought it to the user's paths, ran `git add -A` again and compared with their
    blobs only the files that second add changed: app.py was hashed (to the proven blob) by
    the first, and never compared. With the force-added file the work tree's verdict and
    `status` said PASS at once; with the untracked one UNKNOWN (a new tree), then PASS after
    the user's `git audit run`, for a work tree whose app.py the checks never read (all
    three, before the fix). Every file hashed in the call is compared now: refused as
    unfaithful."""
    world.repo.write(".gitattributes", "app.py ident\n")
    app = world.repo.write("app.py", 'ANSWER = "$Id$"\n')
    if extra == "force-added-ignored":
        world.repo.write(".gitignore", "local.cfg\n")
        world.repo.write("local.cfg", "x = 1\n")
        world.repo.git("add", "-f", "local.cfg")
        world.repo.git("commit", "-q", "-m", "force-added")
    _proven(world)
    if extra == "untracked":
        (world.path / "notes.txt").write_text("hello\n")
    app.write_text('ANSWER = "$Id: "; ANSWER = 41; _ = "$"\n')
    assert world.repo.git("diff") == ""  # git sees no change
    if nothing_kept == "new-settings":
        world.repo.git("config", "core.abbrev", "12")
    else:
        shutil.rmtree(private_folder(world.path / ".git"))
    _refused_as_converted(world, "holds other bytes")


@pytest.mark.parametrize(
    "where", ["ignored-folder", "tracked-folder", "xdg", "home-default", "global-attributes-file"]
)
def test_attack_workspace_ident_where_the_fast_path_must_look(
    world: World, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fingerprint skips comparing files with their blobs when no conversion can apply
    (:func:`gitaudit.git.conversions.possible`). Each variant puts `ident` for lib/app.py
    where that test must find it, and the agent then hides `ANSWER = 41` between `$Id:` and
    `$`: a `.gitattributes` in the folder of the file, ignored (written with the edit; git
    still reads it) or tracked; the user's global attributes file, at
    `$XDG_CONFIG_HOME/git/attributes`, at `~/.config/git/attributes` (no XDG_CONFIG_HOME), or
    named by the global `core.attributesFile`. Each must still be refused as unfaithful."""
    world.repo.write(".gitignore", "lib/.gitattributes\n" if where == "ignored-folder" else "")
    if where == "tracked-folder":
        world.repo.write("lib/.gitattributes", "app.py ident\n")
    home = Path(os.environ["HOME"])
    if where == "xdg":
        _write_file(home / "xdg" / "git" / "attributes", "app.py ident\n")
        monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "xdg"))
    elif where == "home-default":
        _write_file(home / ".config" / "git" / "attributes", "app.py ident\n")
        monkeypatch.delenv("XDG_CONFIG_HOME")
    elif where == "global-attributes-file":
        _write_file(home / "my.attributes", "lib/app.py ident\n")
        world.repo.git("config", "--global", "core.attributesFile", "~/my.attributes")
    app = world.repo.write("lib/app.py", 'ANSWER = "$Id$"\n')
    _proven(world)
    if where == "ignored-folder":
        world.repo.write("lib/.gitattributes", "app.py ident\n")
    app.write_text('ANSWER = "$Id: "; ANSWER = 41; _ = "$"\n')
    assert world.repo.git("diff") == ""  # git sees no change
    _refused_as_converted(world, "holds other bytes")


@pytest.mark.parametrize(
    ("where", "rule"),
    [
        pytest.param("fresh/app.py", "fresh/.gitattributes", id="new-folder"),
        pytest.param("fresh/deeper/app.py", "fresh/.gitattributes", id="above-a-new-folder"),
        pytest.param("fresh/a'\nadd 'b/app.py", "fresh/a'\nadd 'b/.gitattributes", id="newline"),
    ],
)
def test_attack_workspace_ident_in_a_folder_only_the_new_tree_has(
    world: World, where: str, rule: str
) -> None:
    """The fast path's look lists the folders of the tree the kept index makes while git
    writes the new tree, and adds those above every path that differs between the two trees.
    The agent proves fresh/app.py (`ANSWER = "$Id$"`), untracks it, removes fresh/ (the next
    fingerprint keeps an index whose tree lacks it), then, past the settling time, writes it
    back with `ANSWER = 41` hidden between `$Id:` and `$` beside an ignored attributes file
    saying `ident` for it: git adds the file hashed to the proven blob, in folders the kept
    index's tree does not have. Variants: the attributes in a new folder above the file's,
    and a folder named `a'<newline>add 'b`, which git's `add --verbose` report prints as two
    lines naming other paths. Refused as unfaithful (a look at the kept tree's folders alone
    said PASS)."""
    world.repo.write(".gitignore", ".gitattributes\n")
    app = world.repo.write(where, 'ANSWER = "$Id$"\n')
    _proven(world)
    world.repo.git("rm", "-q", "--cached", where)  # untracked: the same work tree
    assert world.gate(None).verdict == "PASS"
    fresh = world.path / "fresh"
    shutil.rmtree(fresh)
    assert world.gate(None).verdict != "PASS"  # keeps an index (and its tree) without fresh/
    attributes = world.path / rule
    pattern = os.path.relpath(app, attributes.parent)
    _write_file(attributes, f"{pattern} ident\n")
    _write_file(app, 'ANSWER = "$Id: "; ANSWER = 41; _ = "$"\n')
    time.sleep(3 * conversions.SETTLED_NS / 1e9)  # the folders' change times are settled
    _refused_as_converted(world, "holds other bytes")


@pytest.mark.parametrize("how", ["removed", "emptied-in-place", "info-attributes"])
def test_attack_workspace_attributes_there_only_while_git_hashes(
    world: World, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race against the fast path: `ident` for lib/app.py is in effect while `git add`
    hashes the edited file to the proven blob, and gone when the fingerprint then looks for
    attributes (simulated exactly there: the look is wrapped). The ignored lib/.gitattributes
    is removed, or emptied in place; or `.git/info/attributes` (refused when the fingerprint
    starts) is written just after that refusal and removed before the look. Each leaves a
    change time the fingerprint sees, and the file is compared: refused."""
    world.repo.write(".gitignore", "lib/.gitattributes\n")
    app = world.repo.write("lib/app.py", 'ANSWER = "$Id$"\n')
    _proven(world)
    attributes = world.path / "lib" / ".gitattributes"
    info = world.path / ".git" / "info" / "attributes"
    if how == "info-attributes":
        refuse = conversions.refuse_local

        def refuse_then_plant(layout: Any) -> None:
            refuse(layout)
            _write_file(info, "lib/app.py ident\n")

        monkeypatch.setattr(conversions, "refuse_local", refuse_then_plant)
    else:
        attributes.write_text("app.py ident\n")
    look = conversions.possible

    def gone_before_the_look(*args: Any, **kwargs: Any) -> bool:
        if how == "removed":
            attributes.unlink()
        elif how == "emptied-in-place":
            attributes.write_text("")
        else:
            info.unlink()
        return look(*args, **kwargs)

    monkeypatch.setattr(conversions, "possible", gone_before_the_look)
    app.write_text('ANSWER = "$Id: "; ANSWER = 41; _ = "$"\n')
    with pytest.raises(RepositoryError, match="holds other bytes"):
        world.gate(None)
    monkeypatch.undo()
    assert world.cli("status", process=True).code != 0  # nothing of the lie was kept


@pytest.mark.parametrize("how", ["global-autocrlf-input", "tracked-folder-text"])
def test_attack_workspace_crlf_where_the_fast_path_must_look(world: World, how: str) -> None:
    """As above for line ends: the user's global `core.autocrlf=input` (which converts only
    what is hashed) or `text` in a tracked `.gitattributes` of the script's folder normalise a
    CRLF the agent puts on the script's first line (`sh` then reads MODE as `safe\\r`)."""
    if how == "global-autocrlf-input":
        world.repo.git("config", "--global", "core.autocrlf", "input")
    else:
        world.repo.write("ci/.gitattributes", "*.sh text\n")
    script = world.repo.write("ci/check.sh", 'MODE=safe\n[ "$MODE" = safe ] && exit 0\nexit 1\n')
    world.seal(plan(step("unit", check("sh", "ci/check.sh"))))
    assert world.run().verdict == "PASS"
    assert world.gate(None).verdict == "PASS"
    script.write_bytes(b'MODE=safe\r\n[ "$MODE" = safe ] && exit 0\nexit 1\n')
    assert subprocess.run(["sh", str(script)], cwd=world.path, check=False).returncode != 0
    assert "check.sh" not in world.repo.git("diff", "--name-only")  # git sees no change
    _refused_as_converted(world, "holds other bytes")


@pytest.mark.parametrize(
    "how", ["text-auto", "autocrlf", "core-eol", "info-attributes", "attributes-file"]
)
def test_attack_workspace_line_ends_hide_an_edit(world: World, how: str) -> None:
    """check.sh (`MODE=safe`, then exit 0 only when MODE is safe) is proven. The agent ends
    its first line with CRLF: `sh` then reads MODE as `safe\\r` and the script fails, but
    `git add` normalises the line end away under the tree's `* text=auto`, or (every line
    CRLF, as a checkout writes them then) under `core.autocrlf=true` or `core.eol=crlf` in the
    repository's config, `eol=crlf` in `.git/info/attributes` or in a `core.attributesFile`
    the repository's config names. The work tree's verdict said PASS (all five before the
    fix); the bytes on disk are not what the checks read."""
    if how == "text-auto":
        world.repo.write(".gitattributes", "* text=auto\n")
    script = world.repo.write("check.sh", 'MODE=safe\n[ "$MODE" = safe ] && exit 0\nexit 1\n')
    world.seal(plan(step("unit", check("sh", "check.sh"))))
    assert world.run().verdict == "PASS"
    assert world.gate(None).verdict == "PASS"
    crlf = b'MODE=safe\r\n[ "$MODE" = safe ] && exit 0\r\nexit 1\r\n'
    if how == "text-auto":
        crlf = b'MODE=safe\r\n[ "$MODE" = safe ] && exit 0\nexit 1\n'
        expected = "holds other bytes"
    elif how == "autocrlf":
        world.repo.git("config", "core.autocrlf", "true")
        expected = "defines content conversions (core.autocrlf)"
    elif how == "core-eol":
        world.repo.write(".gitattributes", "* text=auto\n")
        world.repo.commit("normalise line ends")
        world.repo.git("config", "core.eol", "crlf")
        expected = "defines content conversions (core.eol)"
    elif how == "info-attributes":
        world.repo.write(".git/info/attributes", "*.sh text eol=crlf\n")
        expected = "sets attributes that convert"
    else:
        world.repo.write(".git/crlf.attributes", "*.sh text eol=crlf\n")
        world.repo.git("config", "core.attributesFile", ".git/crlf.attributes")
        expected = "defines content conversions (core.attributesfile)"
    script.write_bytes(crlf)
    assert subprocess.run(["sh", str(script)], cwd=world.path, check=False).returncode != 0
    assert "check.sh" not in world.repo.git("diff", "--name-only")  # git sees no change
    _refused_as_converted(world, expected)


def test_attack_workspace_working_tree_encoding_hides_an_edit(world: World) -> None:
    """app.py is proven with `working-tree-encoding=UTF-7` in the tree's `.gitattributes`:
    what it holds is `ANSWER = 41 #` then `ANSWER = 42` (42). The agent writes
    `ANSWER = 41 #+AAo-ANSWER = 42` on one line, which Python reads as 41 after a comment,
    and which `git add` decodes (`+AAo-` is a line break) to the proven blob. PASS before the
    fix; a checkout of that blob writes other bytes."""
    world.repo.write(".gitattributes", "app.py working-tree-encoding=UTF-7\n")
    app = world.repo.write("app.py", "ANSWER = 41 #\nANSWER = 42\n")
    _proven(world)
    app.write_bytes(b"ANSWER = 41 #+AAo-ANSWER = 42\n")
    assert world.repo.git("diff") == ""
    _refused_as_converted(world, "holds other bytes")


def _forge_object(
    world: World, oid: str, content: bytes, where: str, kind: bytes = b"blob"
) -> None:
    """Put *content* (a *kind* object) in the object store under the name *oid* (git checks no
    loose object's id on read): the loose object rewritten, or moved to a folder of the
    agent's that `objects/info/alternates` names."""
    objects = world.path / ".git" / "objects"
    loose = objects / oid[:2] / oid[2:]
    assert loose.is_file()  # the world's objects are loose
    if where == "alternates":
        loose.unlink()
        elsewhere = world.path.parent / "elsewhere-objects"
        loose = elsewhere / oid[:2] / oid[2:]
        loose.parent.mkdir(parents=True, exist_ok=True)
        (objects / "info").mkdir(exist_ok=True)
        (objects / "info" / "alternates").write_text(f"{elsewhere}\n")
    else:
        loose.chmod(0o644)
    loose.write_bytes(zlib.compress(kind + b" %d\0" % len(content) + content))


@pytest.mark.parametrize("where", ["loose", "alternates"])
@pytest.mark.parametrize(
    ("attributes", "name", "proven", "edited"),
    [
        pytest.param(
            "app.py ident\n",
            "app.py",
            b'ANSWER = "$Id$"\n',
            b'ANSWER = "$Id: "; ANSWER = 41; _ = "$"\n',
            id="ident",
        ),
        pytest.param(
            "*.sh text\n",
            "check.sh",
            b'MODE=safe\n[ "$MODE" = safe ] && exit 0\nexit 1\n',
            b'MODE=safe\r\n[ "$MODE" = safe ] && exit 0\nexit 1\n',
            id="text",
        ),
        pytest.param(
            "* text eol=lf\n",
            "check.sh",
            b'MODE=safe\n[ "$MODE" = safe ] && exit 0\nexit 1\n',
            b'MODE=safe\r\n[ "$MODE" = safe ] && exit 0\nexit 1\n',
            id="eol-lf",
        ),
    ],
)
def test_attack_workspace_forged_blob_vouches_for_a_converted_edit(
    world: World, attributes: str, name: str, proven: bytes, edited: bytes, where: str
) -> None:
    """As in the two attacks above (`ident`, or a CRLF that the tree's `text` normalises away),
    the agent writes bytes git hashes to the proven blob, and then puts those very bytes in the
    object store under the blob's name (the loose object rewritten, or moved to an alternate
    object folder of its own): the comparison with what a checkout writes asked git to smudge
    the blob from the repository's store, which handed back the forged bytes, equal to the
    file's, and the work tree's verdict, `status` and the stop hook said PASS (all six before
    the fix). What a checkout writes is now made from the file's bytes hashed again into a
    private object store: refused as unfaithful."""
    world.repo.write(".gitattributes", attributes)
    path = world.repo.write(name, proven)
    _proven(world)
    blob = world.repo.git("rev-parse", f"HEAD:{name}").strip()
    path.write_bytes(edited)
    assert world.repo.git("diff", "--name-only") == ""  # git sees no change
    _forge_object(world, blob, edited, where)
    shown = subprocess.run(
        ["git", "cat-file", "blob", blob], cwd=world.path, capture_output=True, check=True
    )
    assert shown.stdout == edited  # git reads the forgery
    _refused_as_converted(world, "holds other bytes")


@pytest.mark.parametrize("where", ["loose", "alternates"])
@pytest.mark.parametrize("app", ["lib/sub/app.py", "lib/sub/deeper/app.py"])
def test_attack_workspace_forged_tree_hides_a_folder_from_the_attributes_look(
    world: World, app: str, where: str
) -> None:
    """lib/sub/app.py (`ANSWER = "$Id$"`) is proven, beside lib/other.py; `.gitignore` ignores
    `lib/sub/.gitattributes`. The agent puts a tree object under lib's tree id that names
    lib/other.py alone (the loose object rewritten, or moved to an alternate object folder),
    writes the ignored `lib/sub/.gitattributes` saying `ident` and hides `ANSWER = 41` between
    `$Id:` and `$`: the look for attributes lists the tree's folders with `git ls-tree`, which
    read the forged object and never named lib/sub (nor its folders below), so no conversion
    seemed possible, the file was not compared with its blob, and the work tree's verdict,
    `status` and the stop hook said PASS (all four before the fix). The listing is checked
    against the tree objects read again and hashed: a forged one makes a conversion possible,
    and the file is refused as unfaithful."""
    world.repo.write(".gitignore", "lib/sub/.gitattributes\nlib/sub/deeper/.gitattributes\n")
    path = world.repo.write(app, 'ANSWER = "$Id$"\n')
    world.repo.write("lib/other.py", "X = 1\n")
    _proven(world)
    lib = world.repo.git("rev-parse", "HEAD:lib").strip()
    other = world.repo.git("rev-parse", "HEAD:lib/other.py").strip()
    _forge_object(world, lib, b"100644 other.py\0" + bytes.fromhex(other), where, b"tree")
    assert "lib/sub" not in world.repo.git("ls-tree", "-r", "-d", "--name-only", "HEAD")
    world.repo.write(str(Path(app).parent / ".gitattributes"), "app.py ident\n")
    path.write_text('ANSWER = "$Id: "; ANSWER = 41; _ = "$"\n')
    assert world.repo.git("diff", "--name-only") == ""  # git sees no change
    _refused_as_converted(world, "holds other bytes")


def test_control_workspace_conversions_as_a_checkout_writes_them(world: World) -> None:
    """The tree's own conversions (`* text=auto`, `*.bat eol=crlf`, `ident`), with the files as
    a checkout writes them, and a global `core.autocrlf=true` (the user's, trusted): the work
    tree is the proven tree, run after run."""
    world.repo.write(".gitattributes", "* text=auto\n*.bat text eol=crlf\nid.py ident\n")
    world.repo.write("run.bat", "@echo off\nexit /b 0\n")
    world.repo.write("id.py", 'ID = "$Id$"\n')
    world.repo.write("check.sh", "exit 0\n")
    world.seal(plan(step("unit", check("sh", "check.sh"))))
    for name in ("run.bat", "id.py", "check.sh"):
        (world.path / name).unlink()
    world.repo.git("checkout", "--", ".")
    assert (world.path / "run.bat").read_bytes() == b"@echo off\r\nexit /b 0\r\n"
    assert b"$Id: " in (world.path / "id.py").read_bytes()
    assert world.run().verdict == "PASS"
    assert world.gate(None).verdict == "PASS"
    world.repo.git("config", "--global", "core.autocrlf", "true")
    for name in ("run.bat", "id.py", "check.sh"):
        (world.path / name).unlink()
    world.repo.git("checkout", "--", ".")
    assert (world.path / "check.sh").read_bytes() == b"exit 0\r\n"
    assert world.gate(None).verdict == "PASS"
    assert world.cli("status", process=True).code == 0


@pytest.mark.parametrize("edit", ["beside-a-cut", "glob-named-file", "created-during-the-parts"])
def test_attack_workspace_edits_around_the_cuts_of_a_hash_in_parts(
    world: World, monkeypatch: pytest.MonkeyPatch, edit: str
) -> None:
    """A fresh clone's first fingerprint hashes a large tree in parts, cut at paths the agent
    chose and named in a user index it wrote. The tree is proven; then, with nothing kept (so
    the parts run), the agent edits a file at a cut, adds a file whose name is a glob that
    matches proven names, or creates a file while the parts run (at the top, where no cut knew
    of it, so every part holds it). Each must make the work tree unproven: UNKNOWN, never the
    proven tree."""
    from gitaudit.git import fingerprint, parts

    monkeypatch.setattr(parts, "ENTRIES_PER_PART", 1)
    monkeypatch.setattr(fingerprint, "_cores", lambda: 3)
    for n, name in enumerate(["a-b/x", "a.txt", "a/b/c", "a/b0", "m/n/o", "m/n-p", "y1z", "z"]):
        world.repo.write(name, f"{n}\n")
    _proven(world)
    private = private_folder(world.path / ".git")
    shutil.rmtree(private)
    assert world.gate(None).verdict == "PASS"  # the parts make the proven tree again
    shutil.rmtree(private)
    if edit == "beside-a-cut":
        (world.path / "m" / "n" / "o").write_text("9\n")
    elif edit == "glob-named-file":
        world.repo.write("y?z", "matches y1z as a glob\n")
    else:
        original = parts.exclusions

        def then_create(*args: Any) -> Any:
            specs = original(*args)
            (world.path / "late").write_text("created while the parts run\n")
            return specs

        monkeypatch.setattr(parts, "exclusions", then_create)
    assert_plan(world.gate(None), "evidence.missing", "UNKNOWN")


def _bound_by_file_modes() -> Any:
    """A ``preexec_fn`` under which file modes bind a child as they bind a user: as root, it
    drops the powers to pass them (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) from the bounding
    set, which the capabilities of root's next program are made from; None for anyone else."""
    if os.geteuid() != 0:
        return None

    def drop() -> None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
            if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")

    return drop


_JUDGE_UNPRIVILEGED = """
import sys
from gitaudit.errors import GitAuditError
from gitaudit.gate.judge import judge
from gitaudit.git import fingerprint, parts
from gitaudit.git.repo import open_repo

if sys.argv[1] == "parts":  # every fingerprint hashed in parts, as on a large tree
    parts.ENTRIES_PER_PART = 1
    fingerprint._cores = lambda: 3
try:
    print(judge(open_repo(".")).verdict)
except GitAuditError as exc:
    print("refused:", exc.message)
"""


def _unprivileged(world: World, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=world.path,
        capture_output=True,
        text=True,
        preexec_fn=_bound_by_file_modes(),
        check=False,
    )


@pytest.mark.parametrize(
    "hide",
    ["edit-in-a-folder-git-cannot-search", "edit-there-nothing-kept", "new-file-unlisted"],
)
def test_attack_workspace_hides_an_edit_where_git_cannot_read(world: World, hide: str) -> None:
    """pkg/mod.py is proven. The agent edits it and takes away the search permission of pkg/
    (with the fingerprint's stat cache kept, or with nothing kept, so git hashes from the
    user's index, which names the proven blob), or adds a file in a new folder it then makes
    unlistable (`chmod 300`). git cannot look: it prints why, keeps the entries it cannot
    stat as they were, leaves the folder's new files out, and exits 0, so its tree is the
    proven one. The work tree's verdict refuses (git could not read all of it), from the
    command line and the stop hook alike; never PASS."""
    world.repo.write("pkg/mod.py", "ANSWER = 42\n")
    _proven(world)
    assert world.cli("status", process=True).code == 0  # kept and remembered
    if hide == "new-file-unlisted":
        world.repo.write("extra/conftest.py", "raise SystemExit(0)\n")
        folder, mode = world.path / "extra", 0o300
    else:
        world.repo.write("pkg/mod.py", "ANSWER = 41\n")
        folder, mode = world.path / "pkg", 0o000
        if hide == "edit-there-nothing-kept":
            shutil.rmtree(private_folder(world.path / ".git"))
    folder.chmod(mode)
    try:
        # the attack's premise: git, as the user runs it, cannot read the folder
        listed = _unprivileged(world, "ls", str(folder))
        assert listed.returncode != 0, listed
        status = _unprivileged(world, sys.executable, "-m", "gitaudit", "status")
        judged = _unprivileged(world, sys.executable, "-c", _JUDGE_UNPRIVILEGED, "one")
    finally:
        folder.chmod(0o755)
    assert status.returncode == 1 and "PASS" not in status.stdout, status
    assert "git could not read all of it" in status.stderr, status
    assert judged.stdout.startswith("refused: cannot fingerprint"), judged
    assert "could not read all of it" in judged.stdout, judged
    assert_plan(world.gate(None), "evidence.missing", "UNKNOWN")  # readable again: seen


def test_attack_workspace_hides_a_file_from_a_hash_in_parts_with_ignore_errors(
    world: World,
) -> None:
    """The tree is proven. With nothing kept, the fingerprint hashes it in parts; the agent
    sets `add.ignoreErrors` (git then leaves out a file it cannot read, goes on, and exits 1,
    the exit of a part whose excluded paths are ignored), adds conftest.py unreadable and an
    ignored y.log after the cut, and names proven files, past the cut, after the lines git
    prints for conftest.py, so that every line of the part's messages reads as an excluded
    path. The work tree's verdict refuses (git
    could not read conftest.py); never the proven tree."""
    names = [
        'error: open("conftest.py"): Permission denied',
        "error: unable to index file 'conftest.py'",
        "a/x",
        "m/y",
        "z",
        "zz1",  # the listing's length puts the first cut at the first of the two above
        "zz2",
    ]
    for n, name in enumerate(names):
        world.repo.write(name, f"{n}\n")
    world.repo.write(".gitignore", "*.log\n")
    _proven(world)
    world.repo.write("y.log", "ignored, after the cut: the part's messages list it first\n")
    world.repo.git("config", "add.ignoreErrors", "true")
    shutil.rmtree(private_folder(world.path / ".git"))
    world.repo.write("conftest.py", "raise SystemExit(0)\n").chmod(0o000)
    try:
        denied = _unprivileged(world, "cat", "conftest.py")
        assert denied.returncode != 0, denied  # the premise: git cannot read it
        judged = _unprivileged(world, sys.executable, "-c", _JUDGE_UNPRIVILEGED, "parts")
    finally:
        (world.path / "conftest.py").chmod(0o644)
    assert judged.stdout.startswith("refused: cannot fingerprint"), judged
    assert "conftest.py" in judged.stdout, judged
    assert_plan(world.gate(None), "evidence.missing", "UNKNOWN")  # readable again: seen


@pytest.mark.parametrize("variable", ["XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL"])
def test_attack_workspace_a_relative_config_place_from_a_subfolder(
    world: World, variable: str
) -> None:
    """file.txt ("good") is proven. The agent writes "evil" into it, and a configuration of its
    own (a clean filter turning any line into "good", for file.txt) where git, started in the
    work tree's root, finds it through a relative `XDG_CONFIG_HOME` or `GIT_CONFIG_GLOBAL`, and
    runs `git audit status` from a subfolder with that value: gitaudit, resolving it from there,
    looked at other files (none, or the user's own), saw no conversion, and kept what git
    hashed (file.txt's bytes as the proven blob) for the user's settings. The agent removes its
    files; the user's own `status` must not say PASS: git is given the place gitaudit looks at."""
    text = world.repo.write("file.txt", "good\n")
    _proven(world)
    assert world.cli("status", process=True).code == 0
    world.repo.write(".git/info/exclude", "cfg/\n")
    evil = '[filter "evil"]\n\tclean = sed s/.*/good/\n\tsmudge = cat file.txt\n'
    subfolder = world.path / ".gitaudit"
    env = {k: v for k, v in os.environ.items() if k != "GIT_CONFIG_GLOBAL"}
    if variable == "XDG_CONFIG_HOME":
        world.repo.write("cfg/git/config", evil)
        world.repo.write("cfg/git/attributes", "file.txt filter=evil\n")
        env[variable] = "cfg"  # from the root: <repo>/cfg; from the subfolder: nothing there
        planted = [world.path / "cfg"]
    else:
        # from the subfolder, the user's own global config; from the root, a file beside it
        users = Path(os.environ["GIT_CONFIG_GLOBAL"])
        relative = os.path.relpath(users, subfolder)
        agents = Path(os.path.normpath(world.path / relative))
        assert agents != users
        agents.parent.mkdir(parents=True, exist_ok=True)
        attributes = world.repo.write("cfg/attributes", "file.txt filter=evil\n")
        agents.write_text(evil + f"[core]\n\tattributesFile = {attributes}\n")
        env[variable] = relative
        planted = [world.path / "cfg", agents]
    text.write_text("evil\n")
    os.utime(text, ns=(OLD_TIME, OLD_TIME))  # not racily clean: git trusts what it kept
    subprocess.run(
        [sys.executable, "-m", "gitaudit", "status"],
        cwd=subfolder,
        env=env,
        capture_output=True,
        check=False,
    )
    for path in planted:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    status = world.cli("status", process=True)
    assert status.code != 0 and "PASS" not in status.out, status
    assert_plan(world.gate(None), "evidence.missing", "UNKNOWN")


def _feed_when_opened(
    fifo: Callable[[], Path | None], text: bytes, done: threading.Event
) -> threading.Thread:
    """A thread writing *text* into the FIFO *fifo()* names once a reader has it open; a writer
    that never blocks, and gives up when *done* is set."""

    def feed() -> None:
        while not done.wait(0.01):
            path = fifo()
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK) if path else None
            except OSError:  # no reader yet (ENXIO), or not made yet
                fd = None
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.write(fd, text)
                os.close(fd)
                return

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("where", ["made by an earlier check", "in the live work tree"])
def test_attack_workspace_regex_over_a_fifo(world: World, tmp_path: Path, where: str) -> None:
    """A `regex` check over a FIFO: gitaudit opened it, which blocks until a writer comes (the
    run hung for good), and then judged what the writer fed it (PASS, before the fix). Only a
    regular file is searched."""
    world.repo.write(".gitignore", "pipe\n")
    regex = {"type": "regex", "path": "pipe", "pattern": "^ok$"}
    if where == "in the live work tree":
        os.mkfifo(world.path / "pipe")
        world.seal(plan(step("unit", regex, check("true"), workspace="live")))
        fifo: Callable[[], Path | None] = lambda: world.path / "pipe"  # noqa: E731
    else:
        mark = tmp_path / "where"
        make = check("sh", "-c", 'mkfifo pipe && pwd > "$0"', str(mark))
        world.seal(plan(step("unit", make, regex)))

        def fifo() -> Path | None:
            text = mark.read_text().strip() if mark.exists() else ""
            return Path(text) / "pipe" if text else None

    done = threading.Event()
    feeder = _feed_when_opened(fifo, b"ok\n", done)
    try:
        recorded = world.run()
    finally:
        done.set()
        feeder.join()
    (judged,) = [c for c in recorded.doc["steps"]["unit"]["checks"] if c["type"] == "regex"]
    assert judged["outcome"] == "failed", judged
    assert judged["message"] == "pipe is not a regular file"
    assert world.gate(None).verdict != "PASS"


@pytest.mark.parametrize("where", ["regex check", "output regex"])
def test_attack_workspace_catastrophic_pattern(
    world: World, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A sealed pattern that backtracks exponentially (``^(a+)+$``) over 30 bytes the agent
    wrote: the search held the run for minutes, 2**n steps with no bound (here ~40 s before the
    fix; 40 bytes: days). The search is bounded (by the check's timeout, or for a regex check
    :data:`REGEX_SEARCH_SECONDS`) and one that does not finish is an unknown outcome."""
    monkeypatch.setattr(execute, "REGEX_SEARCH_SECONDS", 1.0)
    world.repo.write("data.txt", "a" * 30 + "!\n")
    if where == "regex check":
        slow = {"type": "regex", "path": "data.txt", "pattern": "^(a+)+$"}
        world.seal(plan(step("unit", slow, check("true"))))
    else:
        world.seal(plan(step("unit", check("cat", "data.txt", output_regex="^(a+)+$", timeout=1))))
    started = time.monotonic()
    recorded = world.run()
    assert time.monotonic() - started < 20
    outcomes = [c["outcome"] for c in recorded.doc["steps"]["unit"]["checks"]]
    assert "unknown" in outcomes, recorded.doc["steps"]["unit"]
    assert recorded.verdict != "PASS"
    assert world.gate(None).verdict != "PASS"


@pytest.mark.parametrize(
    "path",
    [
        "./junit.xml",
        "reports//junit.xml",
        "reports/./junit.xml",
        "reports/.GIT/junit.xml",
        ".git./junit.xml",
        "GIT~1/junit.xml",
        "reports/.git /junit.xml",
        ".git::$INDEX_ALLOCATION/junit.xml",
    ],
)
def test_attack_workspace_artifact_path_the_run_cannot_store(world: World, path: str) -> None:
    """An artifact path that stays in the workspace but that a git tree cannot hold as written
    (an empty or '.' name, `.git` as Windows spells it): it was sealed, every check ran, and then
    the run recorded nothing ("refusing to store the unsafe path", or libgit2's "invalid name
    for a tree entry"), before the fix. Now the plan is refused before anything runs."""
    _escape_in_plan(world, plan(step("unit", artifacts=[path])), "artifact")


LINKED_OWN_FILES: dict[str, tuple[dict[str, Any], str, str, str]] = {
    # variant: (check, the link, what it leads to, the file the agent rewrites)
    "script in a linked folder": (
        check("python3", "tools/check.py"),
        "tools",
        "scripts",
        "scripts/check.py",
    ),
    "script that is a link": (
        check("python3", "tools/check.py"),
        "tools/check.py",
        "impl.py",
        "tools/impl.py",
    ),
    "exec path that is a link": (
        {"type": "exec", "path": "bin/check"},
        "bin/check",
        "../scripts/check.py",
        "scripts/check.py",
    ),
    "cwd that is a link": (
        check("python3", "check.py", cwd="here"),
        "here",
        "scripts",
        "scripts/check.py",
    ),
    "pytest test folder that is a link": (
        {"type": "pytest", "argv": ["-q", "-p", "no:cacheprovider", "tests"]},
        "tests",
        "checks",
        "checks/test_it.py",
    ),
}


@pytest.mark.parametrize("variant", sorted(LINKED_OWN_FILES))
def test_attack_workspace_check_file_through_a_link_in_the_tree(world: World, variant: str) -> None:
    """The seal protects the files a check runs by their paths in the tree; a link in the tree
    (committed before the seal) makes the file the check reaches another one, which nothing
    protects. The agent rewrites it to pass: PASS with the check's own file rewritten, before
    the fix. A check whose own file is reached through a link inside the workspace fails."""
    the_check, link, leads_to, rewritten = LINKED_OWN_FILES[variant]
    failing = "#!/usr/bin/env python3\nimport sys\nsys.exit(1)\n"
    world.repo.write(rewritten, failing)
    os.chmod(world.path / rewritten, 0o755)
    if rewritten.endswith("test_it.py"):
        world.repo.write(rewritten, "def test_it():\n    assert False\n")
    (world.path / link).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(leads_to, world.path / link)
    world.seal(plan(step("unit", the_check)))
    world.repo.write(rewritten, failing.replace("exit(1)", "exit(0)").replace("False", "True"))
    if rewritten.endswith("test_it.py"):
        world.repo.write(rewritten, "def test_it():\n    assert True\n")
    world.repo.commit("the check's file, rewritten")
    recorded = world.run()
    assert recorded.verdict == "FAIL", recorded.doc["steps"]["unit"]
    judged = assert_plan(world.gate(), "step.failed", "FAIL")
    assert f"is reached through the link {link!r}" in judged.reasons[0].message


# variant -> (check, the link in the tree, the file under the folder outside it the check runs,
# how the link names that folder)
LINKED_OUT: dict[str, tuple[dict[str, Any], str, str, str]] = {
    "script in a folder linked by its absolute path": (
        check("python3", "tools/check.py"),
        "tools",
        "check.py",
        "absolute",
    ),
    "script that is a link by its absolute path": (
        check("python3", "tools/check.py"),
        "tools/check.py",
        "check.py",
        "absolute",
    ),
    "script in a folder linked by `..` past the root": (
        check("python3", "tools/check.py"),
        "tools",
        "check.py",
        "climbing",
    ),
    "pytest test folder linked out": (
        {"type": "pytest", "argv": ["-q", "-p", "no:cacheprovider", "tests"]},
        "tests",
        "test_it.py",
        "absolute",
    ),
}


@pytest.mark.parametrize("variant", sorted(LINKED_OUT))
def test_attack_workspace_check_file_through_a_link_out_of_the_tree(
    world: World, tmp_path: Path, variant: str
) -> None:
    """The check's own file is reached through a link the tree holds that leads out of it (an
    absolute target, or enough `..` to pass the root from wherever the tree is checked out):
    the tree pins the link's text, not what the check runs. The agent rewrites the file out
    there, the tree unchanged: PASS for a tree whose own check fails (before the fix). A check
    whose own file is reached through a link out of the workspace fails unread, naming it."""
    the_check, link, name, how = LINKED_OUT[variant]
    outside = tmp_path / "outside"
    outside.mkdir()
    pytest_file = "def test_it():\n    assert False\n"
    failing = pytest_file if name == "test_it.py" else "import sys\nsys.exit(1)\n"
    (outside / name).write_text(failing)
    target = outside / name if link.endswith(".py") else outside
    text = str(target) if how == "absolute" else "../" * 40 + str(target).lstrip("/")
    (world.path / link).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(text, world.path / link)
    world.repo.commit("the check's file, linked")
    world.seal(plan(step("unit", the_check)))
    (outside / name).write_text(failing.replace("exit(1)", "exit(0)").replace("False", "True"))
    recorded = world.run()
    assert recorded.verdict == "FAIL", recorded.doc["steps"]["unit"]
    judged = assert_plan(world.gate(), "step.failed", "FAIL")
    assert f"is reached through the link {link!r}, which leads out" in judged.reasons[0].message


def _swap_for_a_link_to_the_key(world: World, root: Path, rel: str) -> Path:
    """The agent's own process (not a check: nothing the run kills) replaces the artifact by a
    link to the runner's key, out of the agent's reach, right after it was confined."""
    target = paths.confine(root, rel, what="artifact")
    target.unlink()
    os.symlink(world.keys["ci"], target)
    return target


def _swap_the_folder_for_a_link_to_the_keys(world: World, root: Path, rel: str) -> Path:
    target = paths.confine(root, rel, what="artifact")
    shutil.rmtree(target.parent)
    os.symlink(world.keys["ci"].parent, target.parent)
    return target


_PUT_BACK: list[Callable[[], None]] = []  # undone once the artifacts were read


def _swap_the_checkout_for_a_link_to_the_keys(world: World, root: Path, rel: str) -> Path:
    """The checkout itself moved aside and replaced by a link to the keys folder while the
    artifacts are read, then put back."""
    moved = root.with_name(root.name + ".moved")
    os.rename(root, moved)
    os.symlink(world.keys["ci"].parent, root)

    def put_back() -> None:
        os.unlink(root)
        os.rename(moved, root)

    _PUT_BACK.append(put_back)
    return paths.confine(root, rel, what="artifact")


def _swap_for_a_fifo(world: World, root: Path, rel: str) -> Path:
    """A FIFO (the run must neither wait for a writer nor store what one writes: one comes
    after two seconds)."""
    target = paths.confine(root, rel, what="artifact")
    target.unlink()
    os.mkfifo(target)

    def writer() -> None:
        time.sleep(2)
        with contextlib.suppress(OSError):
            fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
            with contextlib.suppress(OSError):
                os.write(fd, b"from the fifo")
            os.close(fd)

    threading.Thread(target=writer, daemon=True).start()
    return target


ARTIFACT_SWAPS: dict[str, tuple[Callable[[World, Path, str], Path], bool]] = {
    # variant: (the swap around confine, whether the artifact is in a folder)
    "file swapped for a link to the runner key": (_swap_for_a_link_to_the_key, True),
    "folder swapped for a link to the keys folder": (_swap_the_folder_for_a_link_to_the_keys, True),
    "checkout swapped for a link to the keys folder": (
        _swap_the_checkout_for_a_link_to_the_keys,
        False,
    ),
    "file swapped for a fifo": (_swap_for_a_fifo, True),
}


@pytest.mark.parametrize("workspace", ["checkout", "live"])
@pytest.mark.parametrize("variant", sorted(ARTIFACT_SWAPS))
def test_attack_workspace_artifact_swapped_after_it_was_confined(
    world: World, variant: str, workspace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An artifact is confined to the checkout (links followed) and then read by the run, which
    holds the runner's key and is not fenced. A process of the agent's that is no check (the run
    kills what checks leave behind) replaces the artifact, its folder or the checkout itself by
    a link to the runner's private key (or the keys folder) in the gitaudit home as the artifact
    is confined: the run read the key and stored it in the run commit's tree, where the agent
    reads it and signs evidence of its own (the three link variants, before the fix; the FIFO
    variant was refused already, as a FIFO swapped in before the type check). The checkouts are
    now resolved before the checks run, and the artifact opened one component at a time from
    there following no link, without blocking, and kept only when it is a regular file: the
    swap is recorded as a problem, and nothing outside the checkout is stored. In the private
    checkout and in the work tree (``workspace: live``) alike."""
    from gitaudit.run import artifacts

    swap, in_folder = ARTIFACT_SWAPS[variant]
    key_name = world.keys["ci"].name
    rel = f"reports/{key_name}" if in_folder else key_name
    world.repo.write(".gitignore", f"reports/\n/{key_name}\n")
    script = f"mkdir -p reports && printf '<testsuite/>' > {rel}"
    the_plan = plan(step("unit", check("sh", "-c", script), artifacts=[rel]))
    world.seal(the_plan | {"workspace": workspace})

    def confined_then_swapped(root: Path, path: str, **kw: Any) -> Path:
        return swap(world, root, path)

    collect = artifacts.collect

    def collected_then_put_back(*args: Any) -> Any:
        try:
            return collect(*args)
        finally:
            while _PUT_BACK:
                _PUT_BACK.pop()()

    monkeypatch.setattr("gitaudit.run.artifacts.confine", confined_then_swapped)
    monkeypatch.setattr(artifacts, "collect", collected_then_put_back)
    started = time.monotonic()
    recorded = world.run()
    assert time.monotonic() - started < 2, "the run waited on the FIFO"
    files = world.run_files(str(recorded.commit))
    key = world.keys["ci"].read_bytes()
    assert not any(key in data for data in files.values()), "the runner's key was recorded"
    (entry,) = recorded.doc["steps"]["unit"]["artifacts"]
    assert entry["stored"] is False and entry["problem"], entry


# variant -> (check, the folder the agent swaps for a link, where the link leads (relative to
# the folder's parent; "OUT/..." a folder out of the tree), the file the check then runs)
CLIMBED_THROUGH_A_LINK: dict[str, tuple[dict[str, Any], str, str, str]] = {
    "script named by ../ from a cwd swapped for a link": (
        check("python3", "../scripts/check.py", cwd="app"),
        "app",
        "lib/app",
        "lib/scripts/check.py",
    ),
    "script named by ../ after a folder swapped for a link": (
        check("python3", "tools/sub/../check.py"),
        "tools/sub",
        "../lib/sub",
        "lib/check.py",
    ),
    "an option's file named by ../ from a cwd swapped for a link": (
        check(
            "python3",
            "-c",
            "import sys; sys.exit(open(sys.argv[1][10:]).read() != 'ok')",
            "--verdict=../scripts/check.py",
            cwd="app",
        ),
        "app",
        "lib/app",
        "lib/scripts/check.py",
    ),
    "script named by ../ after a folder swapped for a link out of the tree": (
        check("python3", "tools/sub/../check.py"),
        "tools/sub",
        "OUT/sub",
        "OUT/check.py",
    ),
}


@pytest.mark.parametrize("variant", sorted(CLIMBED_THROUGH_A_LINK))
def test_attack_workspace_check_file_climbed_to_through_a_link(
    world: World, tmp_path: Path, variant: str
) -> None:
    """The seal protects a check's own files by their paths read lexically: `python3
    ../scripts/check.py` in `cwd: app` protects `scripts/check.py`. The system climbs a `..` out
    of where a link led: the agent swaps the folder `app` for a link to `lib/app` (or one on
    the script's own path, also to a folder out of the tree) and writes `lib/scripts/check.py`
    to pass, the protected file untouched. The run and the gate said PASS before the fix (the
    links the check's own files were looked up through were those of the lexical path). A `..`
    that climbs out of a link now fails the check, naming the link."""
    the_check, folder, leads_to, planted = CLIMBED_THROUGH_A_LINK[variant]
    outside = tmp_path / "outside"
    leads_to = leads_to.replace("OUT", str(outside))
    planted = planted.replace("OUT", str(outside))
    own = planted.removeprefix("lib/").removeprefix(f"{outside}/")
    own = f"tools/{own}" if folder.startswith("tools") else own
    failing = "exit(1)\n"
    world.repo.write(own, failing)
    world.repo.write(f"{folder}/README", "the honest folder\n")
    world.seal(plan(step("unit", the_check)))
    assert world.run().verdict == "FAIL"
    # the agent: the folder becomes a link; what the check now reaches passes
    shutil.rmtree(world.path / folder)
    target = Path(os.path.normpath(os.path.join(world.path / folder, "..", leads_to)))
    target.mkdir(parents=True)
    (target / "README").write_text("moved\n")
    os.symlink(leads_to, world.path / folder)
    passing = "ok" if "--verdict" in str(the_check) else "exit(0)\n"
    planted_at = Path(planted) if planted.startswith("/") else world.path / planted
    planted_at.parent.mkdir(parents=True, exist_ok=True)
    planted_at.write_text(passing)
    world.repo.commit("the folder, now a link")
    recorded = world.run()
    assert recorded.verdict == "FAIL", recorded.doc["steps"]["unit"]
    judged = assert_plan(world.gate(), "step.failed", "FAIL")
    assert f"through the link {folder!r}" in judged.reasons[0].message


def test_workspace_control_a_parent_step_through_real_folders_runs(world: World) -> None:
    """Control: `../` out of real folders (the cwd, a folder on the script's path) reaches the
    file the seal protects under the lexical path, and the check runs as before."""
    world.repo.write("scripts/check.py", "exit(0)\n")
    world.repo.write("app/README", "app\n")
    world.repo.write("tools/sub/README", "sub\n")
    world.repo.write("tools/check.py", "exit(0)\n")
    both = (
        check("python3", "../scripts/check.py", cwd="app"),
        check("python3", "tools/sub/../check.py"),
    )
    world.seal(plan(step("unit", *both)))
    assert world.run().verdict == "PASS"
    assert only(world.gate()).verdict == "PASS"


def test_attack_workspace_exec_path_of_a_check_with_a_cwd_through_a_link(world: World) -> None:
    """`bin -> scripts` committed before the seal, and an `exec` check of `bin/check` with `cwd:
    app`: the exec path runs from the root, through the link, while the links were looked for
    on `app/bin/check`, so the agent's rewrite of `scripts/check.py` (unprotected) passed:
    run PASS, gate PASS before the fix. Now the link is found on the path the check runs."""
    world.repo.write("scripts/check.py", "#!/usr/bin/env python3\nexit(1)\n")
    os.chmod(world.path / "scripts/check.py", 0o755)
    world.repo.write("app/README", "where the check runs\n")
    os.symlink("scripts", world.path / "bin")
    world.seal(plan(step("unit", {"type": "exec", "path": "bin/check.py", "cwd": "app"})))
    world.repo.write("scripts/check.py", "#!/usr/bin/env python3\nexit(0)\n")
    world.repo.commit("the check's file, rewritten")
    recorded = world.run()
    assert recorded.verdict == "FAIL", recorded.doc["steps"]["unit"]
    judged = assert_plan(world.gate(), "step.failed", "FAIL")
    assert "is reached through the link 'bin'" in judged.reasons[0].message


# A hook of the agent's that git runs whenever an index is written: it puts HEAD's tree into
# whatever index git just wrote (the fingerprint's private one names itself in GIT_INDEX_FILE),
# and leaves a mark that it ran. git runs hooks with the environment it was given, so the
# hook's own `git read-tree` would run it again: the variable stops that.
_INDEX_HOOK = """#!/bin/sh
echo "$GIT_INDEX_FILE" >> "{mark}"
[ -n "$AGENT_IN_HOOK" ] && exit 0
AGENT_IN_HOOK=1 git read-tree HEAD
exit 0
"""


@pytest.mark.parametrize(
    "where",
    [
        pytest.param("hooks", id="git-dir-hooks"),
        pytest.param("hooksPath", id="core-hooksPath"),
        pytest.param("hooksPath-worktree", id="core-hooksPath-in-config-worktree"),
        pytest.param("hooksPath-include", id="core-hooksPath-in-an-included-file"),
    ],
)
def test_attack_workspace_index_hook_rewrites_the_private_index(
    world: World, tmp_path: Path, where: str
) -> None:
    """app.py is proven. The agent edits it and writes a `post-index-change` hook (in
    `.git/hooks`, or in a folder `core.hooksPath` names from `.git/config`, from
    `config.worktree` under `extensions.worktreeConfig`, or from a file `.git/config`
    includes): git runs it after every index write, the fingerprint's `git add -A` into its
    private index included, and the hook reads HEAD's tree into that index (its name is in
    `GIT_INDEX_FILE`). Before the fix the fingerprint was HEAD's tree, `status` of the work
    tree said PASS and the agents' stop hook let the agent stop with the edit unproven; the
    hook, a program of the agent's, ran in the user's `git audit` processes, outside the
    fence of the checks. Now no git process of gitaudit's that touches a work tree or an
    index runs a hook: the verdict is UNKNOWN and the hook never ran."""
    app = _proven_app(world)
    mark = tmp_path / "hook-ran"
    hooks = world.path / ".git" / ("hooks" if where == "hooks" else "agent-hooks")
    hooks.mkdir(exist_ok=True)
    hook = hooks / "post-index-change"
    hook.write_text(_INDEX_HOOK.format(mark=mark))
    hook.chmod(0o755)
    if where == "hooksPath":
        world.repo.git("config", "core.hooksPath", str(hooks))
    elif where == "hooksPath-worktree":
        world.repo.git("config", "extensions.worktreeConfig", "true")
        world.repo.git("config", "--worktree", "core.hooksPath", str(hooks))
    elif where == "hooksPath-include":
        included = world.path / ".git" / "agent.cfg"
        included.write_text(f"[core]\n\thooksPath = {hooks}\n")
        world.repo.git("config", "include.path", str(included))
    app.write_text("ANSWER = 41\n")
    assert "app.py" in world.repo.git("status", "--porcelain")
    mark.unlink(missing_ok=True)  # the user's own `git status` may run it: git's, not ours
    assert_plan(world.gate(None), "evidence.missing", "UNKNOWN")
    assert world.cli("status", process=True).code == 3
    stopping = run_hook(world.path, "stop", stop(world.path))
    assert stopping.blocked, stopping
    assert world.run().verdict == "PASS"  # the user's run proves the edited tree, hook unrun
    assert not mark.exists(), mark.read_text()


# What the promisor remote of a partial clone runs when git fetches a missing object for it:
# each is a program of the agent's, named in `.git/config`.
_PROMISOR_PROGRAMS = {
    "sshCommand": ("ssh://example.invalid/x", "core.sshCommand"),
    "uploadpack": ("{path}", "remote.origin.uploadpack"),
    "insteadOf-to-ssh": ("https://example.invalid/x", "core.sshCommand"),
}


@pytest.mark.parametrize("program", sorted(_PROMISOR_PROGRAMS))
def test_attack_workspace_promisor_remote_runs_a_program_of_the_agents(
    world: World, tmp_path: Path, program: str
) -> None:
    """The agent makes the repository a partial clone (`extensions.partialClone=origin`, which
    gitaudit refuses to open) whose remote runs a program of its own (`core.sshCommand`,
    `remote.origin.uploadpack`; an https address made ssh by `url.*.insteadOf`), and deletes
    the object of HEAD's tree: git fetches a missing object from the promisor remote on
    demand. Before the fix `git audit status` (the stop hook, a pre-push) refused the
    repository only after its git processes had fetched, running the agent's program four
    times in the user's process, outside any sandbox of the agent's. Now gitaudit's git
    allows no transport but where it fetches or pushes on purpose (`sync`, `push`): the
    refusal comes and the program never ran."""
    _proven_app(world)
    mark = tmp_path / "program-ran"
    url, setting = _PROMISOR_PROGRAMS[program]
    world.repo.git("config", "core.repositoryformatversion", "1")
    world.repo.git("config", "extensions.partialClone", "origin")
    world.repo.git("config", "remote.origin.url", url.format(path=world.path))
    world.repo.git("config", "remote.origin.promisor", "true")
    world.repo.git("config", setting, f"sh -c 'echo ran >> {mark}; exit 1' --")
    if program == "insteadOf-to-ssh":  # the https address the user sees is fetched over ssh
        world.repo.git("config", "url.ssh://example.invalid/.insteadOf", "https://example.invalid/")
    tree = world.repo.git("rev-parse", "HEAD^{tree}").strip()
    loose = world.path / ".git" / "objects" / tree[:2] / tree[2:]
    assert loose.is_file()
    loose.unlink()
    status = world.cli("status", process=True)
    assert status.code == 1, status
    stopping = run_hook(world.path, "stop", stop(world.path))
    assert stopping.blocked, stopping
    assert not mark.exists(), mark.read_text()
