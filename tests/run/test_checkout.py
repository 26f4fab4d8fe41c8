"""The private checkout (gitaudit/run/checkout.py) against real repositories: fresh and
incremental materialisation, object verification, leftovers, the authenticated slot state and
concurrent slots."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from gitaudit.errors import RunError
from gitaudit.git import index_stat
from gitaudit.git.repo import open_repo
from gitaudit.run import checkout
from tests.gitrepo import OLD_TIME, GitRepo, edit_keeping_times


def place(repo: GitRepo, tree: str | None = None) -> checkout.Materialised:
    handle = open_repo(repo.path)
    assert handle.workdir is not None
    with checkout.acquire(handle.gitdir, handle.workdir) as slot:
        placed = checkout.materialise(
            slot, handle.gitdir, handle.workdir, tree or repo.head_tree(), None
        )
        checkout.leave_clean(placed, handle.workdir, checkout.changed(placed))
        return placed


def test_a_fresh_checkout_equals_the_tree_and_is_a_clean_clone(repo: GitRepo) -> None:
    repo.write("src/a.py", "a = 1\n")
    repo.write("bin/tool", "#!/bin/sh\n", mode=0o755)
    os.symlink("src/a.py", repo.path / "link")
    repo.commit("files")
    placed = place(repo)
    tree = placed.slot.tree
    assert placed.fresh and placed.verified >= 5
    assert (tree / "src/a.py").read_text() == "a = 1\n"
    assert os.access(tree / "bin/tool", os.X_OK) and (tree / "link").is_symlink()
    assert (tree / ".git").read_text().startswith("gitdir: ")
    status = GitRepo(tree).git("status", "--porcelain")
    assert status == ""  # a check that runs git sees a clean clone
    assert not str(tree).startswith(str(repo.path))  # outside the project


def test_many_objects_are_verified_without_a_pipe_deadlock(repo: GitRepo) -> None:
    """git cat-file --batch blocks on a full stdout pipe: thousands of objects once hung."""
    for i in range(3000):
        repo.write(f"d{i % 30}/f{i}.txt", f"file {i}\n" * 10)
    repo.commit("many")
    placed = place(repo)
    assert placed.verified > 3000


def test_an_update_writes_only_what_changed(repo: GitRepo) -> None:
    for i in range(20):
        repo.write(f"f{i}.txt", f"{i}\n")
    repo.commit("twenty")
    first = place(repo)
    untouched = first.slot.tree / "f0.txt"
    inode = untouched.stat().st_ino, untouched.stat().st_mtime_ns
    repo.write("f1.txt", "changed\n")
    (repo.path / "f2.txt").unlink()
    repo.commit("change")
    second = place(repo)
    assert not second.fresh and second.slot == first.slot
    assert (second.slot.tree / "f1.txt").read_text() == "changed\n"
    assert not (second.slot.tree / "f2.txt").exists()
    assert (untouched.stat().st_ino, untouched.stat().st_mtime_ns) == inode
    assert second.verified <= 3  # the root tree and the changed blob


def test_leftovers_of_a_run_are_removed(repo: GitRepo) -> None:
    repo.write(".gitignore", "build/\n")
    repo.commit("ignore")
    placed = place(repo)
    (placed.slot.tree / "build").mkdir()
    (placed.slot.tree / "build" / "out.o").write_text("x")
    (placed.slot.tree / "stray.txt").write_text("x")
    os.mkfifo(placed.slot.tree / "pipe")
    purity = checkout.changed(placed)
    assert "stray.txt" in purity.changed and "pipe (not a file)" in purity.changed
    handle = open_repo(repo.path)
    assert handle.workdir is not None
    checkout.leave_clean(placed, handle.workdir, purity)
    assert not (placed.slot.tree / "build").exists()
    assert not (placed.slot.tree / "stray.txt").exists()
    assert not (placed.slot.tree / "pipe").exists()
    again = place(repo)
    assert not again.fresh and checkout.changed(again).changed == ()


@pytest.mark.parametrize("same_tree", [False, True], ids=["another-tree", "same-tree"])
def test_an_update_after_a_clean_run_removes_what_was_added_since(
    repo: GitRepo, same_tree: bool
) -> None:
    """A run left the checkout clean (``place`` ends as a run does); whoever writes the cache
    then adds what git does not track there (an ignored file, an empty folder, a link): the
    next update, a two-way merge that writes only what changed, removes it first, and the
    checkout holds the tree alone."""
    repo.write(".gitignore", "build/\n")
    repo.commit("ignore")
    tree = place(repo).slot.tree
    (tree / "build").mkdir()
    (tree / "build" / "flag").write_text("")
    (tree / "empty").mkdir()
    (tree / "cache").symlink_to(repo.path)
    if not same_tree:
        repo.write("b.txt", "b\n")
        repo.commit("b")
    handle = open_repo(repo.path)
    assert handle.workdir is not None
    with checkout.acquire(handle.gitdir, handle.workdir) as slot:
        again = checkout.materialise(slot, handle.gitdir, handle.workdir, repo.head_tree(), None)
    assert not again.fresh and again.pristine  # merged, not written afresh
    top = set(repo.git("ls-tree", "--name-only", "HEAD").split())
    assert {p.name for p in tree.iterdir()} == {".git", *top}


def _trusting_stat_data(repo: GitRepo) -> checkout.Materialised:
    """A checkout of a tree with ``a.txt``, whose index records stat data git will trust (the
    file's times long before the index's: not racily clean)."""
    repo.write("a.txt", "before\n")
    repo.commit("a")
    placed = place(repo)
    os.utime(placed.slot.tree / "a.txt", ns=(OLD_TIME, OLD_TIME))
    GitRepo(placed.slot.tree).git("update-index", "--refresh")
    placed = dataclasses.replace(
        placed,
        index_digest=checkout._index_digest(placed.slot.git),
        stamps=checkout._stamps(placed.slot, placed.submodules, ()),  # the times set above
    )
    assert checkout.changed(placed).changed == ()  # nothing edited yet
    return placed


def test_the_checks_cannot_blind_the_purity_check(repo: GitRepo) -> None:
    """The checks can write the checkout's private git dir (its ``.git`` names it): settings
    that would have git trust stale stat data, a clean filter that hashes an edited file to its
    old blob, an exclude for a new file. The purity check writes the dir's settings again and
    compares stat data in full, so it still sees the edit and the new file."""
    placed = _trusting_stat_data(repo)
    slot, edited = placed.slot, placed.slot.tree / "a.txt"
    original = slot.root / "original.tmp"
    original.write_text("before\n")
    with (slot.git / "config").open("a") as config:
        config.write("[core]\n\ttrustctime = false\n\tcheckStat = minimal\n")
        config.write(f'[filter "same"]\n\tclean = cat {original}\n')
    (slot.git / "info" / "attributes").write_text("a.txt filter=same\n")
    (slot.git / "info" / "exclude").write_text("/planted\n")
    edit_keeping_times(edited, b"after!\n", slot.git / "index")  # the same size
    (slot.tree / "planted").write_text("x\n")
    assert set(checkout.changed(placed).changed) == {"a.txt", "planted"}
    assert not (slot.git / "info" / "attributes").exists()
    assert (slot.git / "info" / "exclude").read_text() == ""


def test_the_stat_comparison_is_forced_whatever_the_settings_say(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check still running could write the settings again after the purity check rewrote
    them: git's stat comparison is forced on its command line as well."""
    placed = _trusting_stat_data(repo)
    monkeypatch.setattr(checkout, "_own_settings", lambda *_args: None)  # written again since
    with (placed.slot.git / "config").open("a") as config:
        config.write("[core]\n\ttrustctime = false\n\tcheckStat = minimal\n")
    edited = placed.slot.tree / "a.txt"
    edit_keeping_times(edited, b"after!\n", placed.slot.git / "index")  # the same size
    assert checkout.changed(placed).changed == ("a.txt",)


def test_what_a_run_left_decides_whether_the_checkout_is_swept(repo: GitRepo) -> None:
    """A run that left nothing (git lists no untracked or ignored file, no empty folder) needs
    no sweep; an ignored file, or an empty folder git lists nowhere, is swept away, and the
    next run starts from the tree alone."""
    repo.write(".gitignore", "*.log\n")
    repo.write("src/a.py", "a = 1\n")
    repo.commit("files")
    placed = place(repo)
    clean = checkout.changed(placed)
    assert clean.changed == () and not clean.leftovers and clean.after == placed.tree
    handle = open_repo(repo.path)
    assert handle.workdir is not None
    for leave in ("made/deeper", "run.log"):
        target = placed.slot.tree / leave
        if leave.endswith(".log"):
            target.write_text("x\n")
        else:
            target.mkdir(parents=True)
        purity = checkout.changed(placed)
        assert purity.changed == () and purity.leftovers, leave  # git sees no change
        checkout.leave_clean(placed, handle.workdir, purity)
        assert not target.exists() and not (placed.slot.tree / "made").exists(), leave
        again = place(repo)
        assert not again.fresh and not checkout.changed(again).leftovers


def test_a_file_written_and_put_back_is_impure(repo: GitRepo) -> None:
    """A check writes a tracked file for the checks after it and a later one puts the tree's
    bytes back, with the file's times, or renames the tree's own file aside and back: git sees
    the tree, but the file's inode and change time moved, so the purity check names it. An
    ignored file written and removed beside it is no change."""
    repo.write(".gitignore", "*.log\n")
    for name in ("a.txt", "b.txt", "c.txt"):
        repo.write(name, "tree\n")
    repo.commit("abc")
    placed = place(repo)
    tree = placed.slot.tree
    assert checkout.changed(placed).changed == ()
    kept = os.stat(tree / "a.txt")
    (tree / "a.txt").write_text("ok!!\n")
    (tree / "a.txt").write_text("tree\n")
    os.utime(tree / "a.txt", ns=(kept.st_atime_ns, kept.st_mtime_ns))
    os.rename(tree / "b.txt", placed.slot.root / "b.tmp")
    (tree / "b.txt").write_text("ok!!\n")
    os.replace(placed.slot.root / "b.tmp", tree / "b.txt")
    (tree / "build.log").write_text("built\n")
    (tree / "build.log").unlink()
    assert checkout.changed(placed).changed == (
        "a.txt (written during the run, then put back)",
        "b.txt (written during the run, then put back)",
    )


# how the checkout reaches the tree the checks run in: written afresh, updated from another
# tree, the same tree again, or reset after a run that changed it (the last read the stamps
# from a walk, the others from the index git wrote)
REACHED = ["fresh", "update", "same-tree", "reset"]


def reach(repo: GitRepo, how: str) -> None:
    """Run (and leave) the checkout so that the next one reaches the tree *how* says."""
    repo.write("kept.txt", "kept\n")
    repo.write("sub/changing.txt", "one\n")
    os.symlink("kept.txt", repo.path / "link")
    repo.commit("files")
    if how == "fresh":
        return
    first = place(repo)
    if how == "reset":
        (first.slot.tree / "sub/changing.txt").write_text("a check's edit\n")
        handle = open_repo(repo.path)
        assert handle.workdir is not None
        with checkout.acquire(handle.gitdir, handle.workdir) as slot:
            placed = checkout.materialise(slot, handle.gitdir, handle.workdir, first.tree, None)
            (slot.tree / "sub/changing.txt").write_text("a check's edit\n")
            purity = checkout.changed(placed)
            assert purity.changed == ("sub/changing.txt",)
            checkout.leave_clean(placed, handle.workdir, purity)
    if how in ("update", "reset"):
        repo.write("sub/changing.txt", "two\n")
        repo.commit("change")


def materialised(repo: GitRepo) -> tuple[checkout.Materialised, dict[str, checkout.Stamp]]:
    """The checkout of HEAD's tree, as the checks find it, and a walk of it."""
    handle = open_repo(repo.path)
    assert handle.workdir is not None
    with checkout.acquire(handle.gitdir, handle.workdir) as slot:
        placed = checkout.materialise(slot, handle.gitdir, handle.workdir, repo.head_tree(), None)
        return placed, checkout._stamps(slot, {}, [])


def assert_stamped(placed: checkout.Materialised, walk: dict[str, checkout.Stamp]) -> None:
    """The stamps before the checks are what the checkout holds (*walk*): every file's when
    they are complete, else at least every file whose change time is in the file system's
    second the slot's clock file was changed in, or later (git compares the others)."""
    assert all(walk[path] == stamp for path, stamp in placed.stamps.items())
    if placed.complete:
        assert placed.stamps == walk
    else:
        settled = (os.stat(placed.slot.root / "clock").st_ctime_ns // 10**9) & index_stat.MASK
        assert {path for path, s in walk.items() if s[1] >= settled} <= set(placed.stamps)


@pytest.mark.parametrize("how", REACHED)
def test_the_stamps_the_checks_start_from_are_what_the_checkout_holds(
    repo: GitRepo, how: str
) -> None:
    """Read from git's index or walked, the stamps before the checks are every file's and
    link's own, and nothing in the checkout is taken for written during the run."""
    reach(repo, how)
    placed, walk = materialised(repo)
    assert placed.fresh == (how == "fresh")
    assert len(walk) == 4  # README.md, kept.txt, link, changing.txt
    assert_stamped(placed, walk)
    assert placed.complete == (how == "reset")
    assert checkout.changed(placed).changed == ()


@pytest.mark.parametrize("how", REACHED)
def test_a_file_written_and_put_back_is_impure_however_the_checkout_was_reached(
    repo: GitRepo, how: str
) -> None:
    """kept.txt was written by the first checkout, not by the update, so its stamp before the
    checks is the one git recorded runs ago: still, a check that writes it and puts its bytes
    and times back is seen."""
    reach(repo, how)
    placed, _walk = materialised(repo)
    target = placed.slot.tree / "kept.txt"
    times = os.stat(target)
    target.write_text("edit\n")
    target.write_text("kept\n")
    os.utime(target, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert checkout.changed(placed).changed == ("kept.txt (written during the run, then put back)",)


def test_gits_split_index_knob_does_not_reach_the_checkout(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``GIT_TEST_SPLIT_INDEX`` in the caller's environment made git split the checkout's index
    into a shared file the next update's private git dir no longer held: every update after the
    first failed. The checkout's git runs without it."""
    monkeypatch.setenv("GIT_TEST_SPLIT_INDEX", "1")
    reach(repo, "update")
    placed, walk = materialised(repo)
    assert not [p for p in placed.slot.git.iterdir() if p.name.startswith("sharedindex")]
    assert index_stat.file_stamps((placed.slot.git / "index").read_bytes(), 20) is not None
    assert_stamped(placed, walk)
    assert checkout.changed(placed).changed == ()


def _stale(index: bytes, name: bytes) -> bytes:
    """*index* with the change time of entry *name* one nanosecond on (checksum made again)."""
    at = index.index(name + b"\0") - 62  # a version 2 entry with SHA-1 ids
    assert int.from_bytes(index[at + 60 : at + 62], "big") & 0xFFF == len(name)
    nanos = int.from_bytes(index[at + 4 : at + 8], "big")
    data = index[: at + 4] + ((nanos + 1) % 10**9).to_bytes(4, "big") + index[at + 8 : -20]
    return data + hashlib.sha1(data).digest()


def test_a_reset_that_keeps_stale_stat_data_leaves_no_false_change_for_the_next_run(
    repo: GitRepo,
) -> None:
    """git compares whole seconds: a file a check rewrote with the same bytes in the second git
    wrote it keeps, after a reset, the stat data git recorded before (made here by moving its
    change time in the index by a nanosecond). The reset's walk disagrees with the index, so
    the checkout is written afresh (or git rewrote the file): either way its stamps are what
    it holds, and the next update, which reads them from the index, finds nothing written."""
    reach(repo, "fresh")
    first = place(repo)
    handle = open_repo(repo.path)
    assert handle.workdir is not None
    index = first.slot.git / "index"
    index.write_bytes(_stale(index.read_bytes(), b"kept.txt"))
    with checkout.acquire(handle.gitdir, handle.workdir) as slot:
        meta = checkout._read_meta(slot, handle.workdir)
        meta.update(index=checkout._index_digest(slot.git), clean=False)  # as after a bad run
        checkout._write_meta(slot, handle.workdir, meta)
    written = os.stat(first.slot.tree / "kept.txt").st_ino
    reset, walk = materialised(repo)
    assert_stamped(reset, walk)
    assert reset.fresh or os.stat(reset.slot.tree / "kept.txt").st_ino != written
    checkout.leave_clean(reset, handle.workdir, checkout.changed(reset))
    repo.write("sub/changing.txt", "two\n")
    repo.commit("change")
    update, walk = materialised(repo)
    assert not update.fresh
    assert_stamped(update, walk)
    assert checkout.changed(update).changed == ()


def next_second() -> None:
    """Wait until the clocks (the file system's lags by a tick at most) are in the next second:
    what was written before is then in an earlier second than anything written after."""
    time.sleep(1.02 - time.time() % 1.0)


# ways a check writes the tracked kept.txt and puts it back as it was (bytes and times), each
# of which moves its change time, and its inode for the rename
def _in_place(target: Path) -> None:
    times = os.stat(target)
    target.write_text("edit\n")
    target.write_text("kept\n")
    os.utime(target, ns=(times.st_atime_ns, times.st_mtime_ns))


def _renamed_back(target: Path) -> None:
    aside = target.with_name("kept.aside")
    os.rename(target, aside)
    target.write_text("edit\n")
    os.replace(aside, target)


def _mode_and_back(target: Path) -> None:
    os.chmod(target, 0o755)
    os.chmod(target, 0o644)


def _linked_and_unlinked(target: Path) -> None:
    os.link(target, target.with_name("kept.link"))
    os.unlink(target.with_name("kept.link"))


PUT_BACK = {
    "in-place": _in_place,
    "renamed-back": _renamed_back,
    "mode-and-back": _mode_and_back,
    "linked-and-unlinked": _linked_and_unlinked,
}


@pytest.mark.parametrize("how", sorted(PUT_BACK))
def test_a_file_written_in_an_earlier_second_and_put_back_is_seen_by_git(
    repo: GitRepo, how: str
) -> None:
    """An update after a clean run stamps only the files it wrote: every other file's stat
    data, recorded in an earlier second, is git's to compare (``git diff-files``), and any
    write during the run moves its change time to a later second. kept.txt, written by the
    first checkout, is written and put back: named."""
    reach(repo, "fresh")
    place(repo)
    next_second()
    repo.write("sub/changing.txt", "two\n")
    repo.commit("change")
    placed, _walk = materialised(repo)
    assert not placed.complete and not placed.fresh
    assert set(placed.stamps) <= {str(placed.slot.tree / "sub/changing.txt")}
    assert checkout.changed(placed).changed == ()
    PUT_BACK[how](placed.slot.tree / "kept.txt")
    assert checkout.changed(placed).changed == ("kept.txt (written during the run, then put back)",)


@pytest.mark.parametrize("how", ["fresh", "same-tree"])
def test_files_written_in_the_current_second_have_stamps_of_their_own(
    repo: GitRepo, how: str
) -> None:
    """What git cannot tell from a write in the same second gets a stamp: a fresh checkout's
    files written in the current second, and (the same tree again) all the files when the
    kept index was written in it. Either way the put-back write is named."""
    reach(repo, "fresh")
    for _attempt in range(3):
        if how == "same-tree":
            place(repo)  # written afresh, and its index with it
        placed, walk = materialised(repo)
        target = str(placed.slot.tree / "kept.txt")
        if target in placed.stamps:
            break
        checkout._forget(placed.slot)  # the second turned meanwhile: again, from scratch
    assert placed.fresh == (how == "fresh") and not placed.complete
    assert placed.stamps[target] == walk[target]
    _in_place(Path(target))
    assert checkout.changed(placed).changed == ("kept.txt (written during the run, then put back)",)


def test_the_clock_is_read_from_a_file_of_the_slot_made_now(repo: GitRepo, tmp_path: Path) -> None:
    """A check can write the slot: a link it leaves under the clock file's name (to a file on
    a file system with another clock) is replaced, not followed; and a kept index that is a
    link gives no time at all (its stat data is then read from the index, not assumed older)."""
    reach(repo, "fresh")
    first = place(repo)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("x\n")
    before = os.stat(elsewhere)
    (first.slot.root / "clock").unlink()
    os.symlink(elsewhere, first.slot.root / "clock")
    placed, _walk = materialised(repo)
    assert not (placed.slot.root / "clock").is_symlink()
    assert os.stat(elsewhere).st_ctime_ns == before.st_ctime_ns
    index = placed.slot.git / "index"
    assert checkout._changed_at(index) is not None
    copy = tmp_path / "index"
    copy.write_bytes(index.read_bytes())
    index.unlink()
    os.symlink(copy, index)
    assert checkout._changed_at(index) is None


def test_a_quiet_update_in_a_later_second_is_pure(repo: GitRepo) -> None:
    """Control: stat data git recorded seconds ago and files untouched since: git lists none
    (it compares what it recorded, not what a refresh would write), and nothing is named."""
    reach(repo, "update")
    next_second()
    repo.write("sub/changing.txt", "three\n")
    repo.commit("again")
    placed, _walk = materialised(repo)
    assert not placed.complete
    purity = checkout.changed(placed)
    assert purity.changed == () and purity.after == placed.tree


def test_every_attributes_file_of_the_tree_is_found_and_nothing_else(repo: GitRepo) -> None:
    """The ``.gitattributes`` files a fresh checkout reads its filters from are found by git
    (a diff from the empty tree limited to that name): at the top, in folders at any depth and
    under odd names, as links too, and not files or folders that only look alike."""
    named = [".gitattributes", "a/.gitattributes", "a/b c/d/.gitattributes", "ü/.gitattributes"]
    for path in named:
        repo.write(path, f"*.{len(path)} text\n")
    for path in ("x.gitattributes", ".gitattributes.bak", "e/.gitattributes/inside"):
        repo.write(path, "not one\n")
    os.symlink("../.gitattributes", repo.path / "a" / "b c" / ".gitattributes-link")
    os.makedirs(repo.path / "l")
    os.symlink("../.gitattributes", repo.path / "l" / ".gitattributes")
    repo.commit("attributes")
    placed = place(repo)
    found = checkout._attribute_files(placed.slot, placed.slot.git, placed.slot.tree, placed.tree)
    blobs = {
        path: repo.git("rev-parse", f"HEAD:{path}").strip() for path in [*named, "l/.gitattributes"]
    }
    assert found == blobs


def test_a_tampered_slot_state_is_rebuilt_from_scratch(repo: GitRepo) -> None:
    placed = place(repo)
    meta = placed.slot.root / checkout.META
    doc = json.loads(meta.read_text())
    doc["tree"] = "0" * 40  # without the local key, the MAC cannot be redone
    meta.write_text(json.dumps(doc))
    assert place(repo).fresh


def test_a_file_changed_in_the_checkout_between_runs_is_noticed(repo: GitRepo) -> None:
    """Something edits the kept checkout between runs (it is outside the project, but any
    process of the user can reach it): the update writes only what the trees change, so the
    edit survives it, and the purity check at the end of the run names it (the run FAILs)."""
    repo.write("a.txt", "tree content\n")
    repo.commit("a")
    placed = place(repo)
    (placed.slot.tree / "a.txt").write_text("tampered\n")
    repo.write("b.txt", "new\n")  # another tree: an update, not a fresh checkout
    repo.commit("b")
    handle = open_repo(repo.path)
    assert handle.workdir is not None
    with checkout.acquire(handle.gitdir, handle.workdir) as slot:
        again = checkout.materialise(slot, handle.gitdir, handle.workdir, repo.head_tree(), None)
        assert "a.txt" in checkout.changed(again).changed


def test_concurrent_runs_take_separate_slots(repo: GitRepo) -> None:
    handle = open_repo(repo.path)
    assert handle.workdir is not None
    with (
        checkout.acquire(handle.gitdir, handle.workdir) as one,
        checkout.acquire(handle.gitdir, handle.workdir) as two,
    ):
        assert one.root != two.root
        assert one.home.is_dir() and not any(one.home.iterdir())


def test_acquire_removes_what_gitaudit_did_not_make_above_the_checkout(
    repo: GitRepo, tmp_path: Path
) -> None:
    """What a check left (where the kernel has no fence) in the slot's folder, the repository's
    folder of slots or the checkouts folder goes before the next run, links unfollowed; what
    gitaudit made stays."""
    handle = open_repo(repo.path)
    assert handle.workdir is not None
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("the user's\n")
    with checkout.acquire(handle.gitdir, handle.workdir) as slot:
        (slot.tree).mkdir()
        (slot.tree / "kept").write_text("x\n")
    base = slot.root.parent
    planted = [
        slot.root / "pytest.ini",
        slot.root / "node_modules" / "x" / "index.js",
        base / "conftest.py",
        base / "7",  # a slot's name, but a file
        base.parent / "package.json",
        base.parent / "0123456789abcdef012",  # one hex digit short
    ]
    for path in planted:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("planted\n")
    (slot.root / "pyproject.toml").symlink_to(outside / "keep")
    (base / "setup.cfg").symlink_to(outside)
    (base / "8.lock").symlink_to(outside / "keep")  # a lock's name, but a link
    with checkout.acquire(handle.gitdir, handle.workdir) as again:
        assert again == slot
        assert sorted(os.listdir(slot.root)) == ["home", "neutral", "tmp", "tree"]
        assert sorted(os.listdir(base)) == ["0", "0.lock"]
        assert os.listdir(base.parent) == [base.name]
        assert (slot.tree / "kept").is_file()  # the checkout is materialise's to bring up
    assert (outside / "keep").read_text() == "the user's\n"


def test_acquire_refuses_an_entry_of_the_cache_folder_it_did_not_make(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache folder may be one the user named (GITAUDIT_CACHE): what gitaudit did not make
    there is named, not removed; a link in place of its checkouts folder too."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("GITAUDIT_CACHE", str(cache))
    handle = open_repo(repo.path)
    assert handle.workdir is not None
    cache.mkdir()
    (cache / "conftest.py").write_text("planted\n")
    with (
        pytest.raises(RunError, match=r"cache folder .* holds 'conftest.py'") as raised,
        checkout.acquire(handle.gitdir, handle.workdir),
    ):
        pass
    assert (
        raised.value.hint
        == f"remove {cache / 'conftest.py'}, or point GITAUDIT_CACHE at a folder of gitaudit's own"
    )
    assert (cache / "conftest.py").read_text() == "planted\n"
    (cache / "conftest.py").unlink()
    (cache / "checkouts").symlink_to(tmp_path)
    with (
        pytest.raises(RunError, match="holds 'checkouts', which gitaudit did not make"),
        checkout.acquire(handle.gitdir, handle.workdir),
    ):
        pass
    (cache / "checkouts").unlink()
    with checkout.acquire(handle.gitdir, handle.workdir) as slot:
        assert slot.root.parent.parent == cache / "checkouts"


@pytest.mark.parametrize("name", checkout.UPWARD)
def test_acquire_refuses_what_tools_find_upwards_above_the_cache(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """A name a tool looks for upwards (``node_modules``, ``package.json``, ``pytest.ini``...)
    in any folder above the cache folder, a link or a dangling one too, is named and left
    where it is; the user's dotfiles there (``.npmrc``, ``.cargo``) and other names are not."""
    cache = tmp_path / "a" / "b" / "cache"
    monkeypatch.setenv("GITAUDIT_CACHE", str(cache))
    handle = open_repo(repo.path)
    assert handle.workdir is not None
    for other in (".npmrc", ".cargo", "notes.txt", "src"):
        (tmp_path / "a" / "b").mkdir(parents=True, exist_ok=True)
        (tmp_path / "a" / other).write_text("the user's\n")
    with checkout.acquire(handle.gitdir, handle.workdir):
        pass
    for planted in (tmp_path / "a" / "b" / name, tmp_path / "a" / name):
        planted.symlink_to(tmp_path / "nowhere")
        with (
            pytest.raises(
                RunError, match=f"{planted} lies above gitaudit's cache folder"
            ) as raised,
            checkout.acquire(handle.gitdir, handle.workdir),
        ):
            pass
        assert (raised.value.hint or "").startswith(f"remove {planted}, or point GITAUDIT_CACHE")
        assert planted.is_symlink()  # named, not removed: it may be the user's
        planted.unlink()
    # the cache reached through a link (~/.cache -> elsewhere): the real folders above count too
    (tmp_path / "elsewhere" / "real").mkdir(parents=True)
    (tmp_path / "a" / "b" / "link").symlink_to(tmp_path / "elsewhere" / "real")
    monkeypatch.setenv("GITAUDIT_CACHE", str(tmp_path / "a" / "b" / "link" / "cache"))
    (tmp_path / "elsewhere" / name).write_text("planted\n")
    with (
        pytest.raises(RunError, match=f"{tmp_path / 'elsewhere' / name} lies above"),
        checkout.acquire(handle.gitdir, handle.workdir),
    ):
        pass


def test_the_checkouts_may_not_live_inside_the_repository(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITAUDIT_CACHE", str(repo.path / ".cache"))
    handle = open_repo(repo.path)
    assert handle.workdir is not None
    with (
        pytest.raises(RunError, match="would be inside the repository"),
        checkout.acquire(handle.gitdir, handle.workdir),
    ):
        pass


def test_a_missing_object_is_a_clear_error(repo: GitRepo) -> None:
    blob = repo.git("hash-object", "-w", "--stdin", input=b"gone\n").strip()
    tree = repo.git("mktree", input=f"100644 blob {blob}\tgone.txt\n".encode()).strip()
    path = repo.path / ".git" / "objects" / blob[:2] / blob[2:]
    path.chmod(0o644)
    path.unlink()
    with pytest.raises(RunError, match=f"object {blob[:12]} of the judged tree is missing"):
        place(repo, tree)


def test_changed_attributes_write_the_checkout_again(repo: GitRepo) -> None:
    """git rewrites only the files whose blobs changed; a changed ``.gitattributes`` changes how
    the others are written too (here CRLF line endings), so the checkout is written afresh, as a
    clone of the new tree would be."""
    repo.write("src/a.txt", "a\n")
    repo.commit("a file")
    first = place(repo)
    assert (first.slot.tree / "src/a.txt").read_bytes() == b"a\n"
    repo.write("src/.gitattributes", "*.txt text eol=crlf\n")
    repo.git("add", "src/.gitattributes")  # the file's blob is kept
    repo.git("commit", "-q", "-m", "line endings")
    second = place(repo)
    assert second.fresh and second.slot == first.slot
    assert (second.slot.tree / "src/a.txt").read_bytes() == b"a\r\n"
    assert GitRepo(second.slot.tree).git("status", "--porcelain") == ""


@pytest.mark.parametrize("name", ["GIT_ATTR_SOURCE", "GIT_DIR", "GIT_OBJECT_DIRECTORY"])
def test_git_never_sees_the_callers_location_variables(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Every git gitaudit starts (the checkout's included) runs without the caller's variables
    that point git elsewhere: ``GIT_ATTR_SOURCE`` (git 2.40) would have the checkout's files
    written under the attributes of a tree of the caller's choosing."""
    from gitaudit.git.environment import git_env

    monkeypatch.setenv(name, "/elsewhere")
    assert name not in git_env()


def test_the_gitfile_is_written_anew_never_through_what_a_check_left(tmp_path: Path) -> None:
    """A link (or a folder) where the checkout's `.git` file belongs is replaced, and what the
    link named is left as it was; a submodule's folder is made a folder of its own, a link on
    the way removed, never followed."""
    from gitaudit.run import checkout

    work, git_dir, target = tmp_path / "work", tmp_path / "git", tmp_path / "config.local"
    work.mkdir()
    (work / ".git").symlink_to(target)
    checkout._write_gitfile(work, git_dir)
    assert not target.exists()
    assert not (work / ".git").is_symlink()
    assert (work / ".git").read_text() == f"gitdir: {git_dir}\n"
    (work / ".git").unlink()
    (work / ".git").mkdir()
    checkout._write_gitfile(work, git_dir)
    assert (work / ".git").is_file()
    outside = tmp_path / "outside"
    outside.mkdir()
    (work / "a").symlink_to(outside)
    assert not checkout._own_folder(work, "a/lib")
    made = checkout._make_own_folder(work, "a/lib")
    assert made == work / "a" / "lib" and checkout._own_folder(work, "a/lib")
    assert list(outside.iterdir()) == []


def test_the_run_s_own_git_after_the_checks_reads_only_settings_it_wrote(
    repo: GitRepo, tmp_path: Path
) -> None:
    """A check can write the checkout's private git dir; the run's git reads it after the
    checks, unfenced. Settings a check wrote (a ``core.fsmonitor`` program), even with the
    index rewritten, are written again before the clean-up's ``git clean`` (so the program
    never runs); a ``config`` or ``info`` a check made a link is replaced, never written
    through; a git dir replaced with a link is not written, nor is git run there."""
    placed = place(repo)
    slot = placed.slot
    ran = tmp_path / "ran"
    program = tmp_path / "monitor"
    program.write_text(f"#!/bin/sh\ntouch {ran}\n")
    program.chmod(0o755)
    with (slot.git / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = {program}\n")
    (slot.git / "index").write_bytes((slot.git / "index").read_bytes() + b"x")  # rewritten
    handle = open_repo(repo.path)
    assert handle.workdir is not None
    purity = checkout.changed(placed)
    assert purity.changed and purity.leftovers
    checkout.leave_clean(placed, handle.workdir, purity)
    assert not ran.exists()

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "attributes").write_text("*.bin -text\n")
    (outside / "gitconfig").write_text("[user]\n\tname = u\n")
    (slot.git / "config").unlink()
    (slot.git / "config").symlink_to(outside / "gitconfig")
    checkout._remove_tree(slot.git / "info")
    (slot.git / "info").symlink_to(outside)
    assert checkout._settled(slot, slot.git, [])
    assert (outside / "gitconfig").read_text() == "[user]\n\tname = u\n"
    assert sorted(p.name for p in outside.iterdir()) == ["attributes", "gitconfig"]
    assert not (slot.git / "config").is_symlink() and (slot.git / "info").is_dir()
    assert "fsmonitor = false" in (slot.git / "config").read_text()

    linked = slot.root / "modules" / "linked"
    linked.parent.mkdir(exist_ok=True)
    linked.symlink_to(outside)
    assert not checkout._settled(slot, linked, [])
    assert sorted(p.name for p in outside.iterdir()) == ["attributes", "gitconfig"]


def test_a_checkout_that_is_not_the_judged_tree_is_impure_whatever_the_objects_say(
    repo: GitRepo,
) -> None:
    """The purity check names the changed paths from objects read through the checkout's
    private git dir, which a check can write: a forged object under the judged tree's id
    (what the checkout now holds) has the diff name nothing. A tree that differs is still a
    change."""
    import subprocess
    import zlib

    repo.write("keep.txt", "k\n")
    repo.write("tests/fails.sh", "exit 1\n")
    repo.commit("files")
    placed = place(repo)
    slot = placed.slot
    env = {**os.environ, "GIT_DIR": str(slot.git), "GIT_WORK_TREE": str(slot.tree)}

    def git(*args: str) -> bytes:
        return subprocess.run(["git", *args], env=env, capture_output=True, check=True).stdout

    (slot.tree / "tests" / "fails.sh").unlink()
    honest = checkout.changed(placed)
    assert honest.changed == ("tests/fails.sh",)
    now = honest.after
    raw = git("cat-file", "tree", now)
    forged = slot.git / "objects" / placed.tree[:2] / placed.tree[2:]
    forged.parent.mkdir(parents=True, exist_ok=True)
    forged.write_bytes(zlib.compress(b"tree %d\0" % len(raw) + raw))
    purity = checkout.changed(placed)
    assert purity.after == now
    assert purity.changed == (f"(the checkout holds tree {now}, not the judged {placed.tree})",)


def test_the_slot_state_is_written_as_a_new_file(repo: GitRepo, tmp_path: Path) -> None:
    """The slot's state is written to a temporary file, then renamed over the old one: a link
    left under the temporary name is replaced, never written through (it would overwrite any
    file of the user's, a trust anchor or the memo key, with the slot's state)."""
    placed = place(repo)
    slot = placed.slot
    victim = tmp_path / "memo.key"
    victim.write_text("secret\n")
    (slot.root / (checkout.META + ".tmp")).symlink_to(victim)
    handle = open_repo(repo.path)
    assert handle.workdir is not None
    checkout._write_meta(slot, handle.workdir, {"tree": placed.tree})
    assert victim.read_text() == "secret\n"
    assert not (slot.root / (checkout.META + ".tmp")).exists()
    assert (slot.root / checkout.META).is_file() and not (slot.root / checkout.META).is_symlink()


@pytest.mark.parametrize("reached", ["fresh", "update"])
def test_the_files_git_wrote_are_compared_with_their_objects_by_content(
    repo: GitRepo, reached: str
) -> None:
    """What git wrote into the checkout is compared with the objects its index names, by
    content, even where the stat data say clean (a file that holds other bytes than its object
    under the stat data git recorded for it), and an index whose entries do not hash to the
    tree (a swapped tree object named other blobs): named, and the checkout wiped. Files
    converted as a checkout writes them (ident, CRLF line ends), links and executables are what
    their objects say: no false alarm."""
    repo.write(".gitattributes", "*.txt ident\n*.bat eol=crlf\n")
    repo.write("a.txt", "a\n$Id$\n")
    repo.write("b.bat", "echo b\n")
    repo.write("bin/tool", "#!/bin/sh\n", mode=0o755)
    os.symlink("a.txt", repo.path / "link")
    repo.commit("files")
    if reached == "update":
        place(repo)
        repo.write("b.bat", "echo c\n")
        repo.write("a.txt", "c\n$Id$\n")
        repo.commit("changed")
    placed = place(repo)
    assert (placed.slot.tree / "b.bat").read_bytes().endswith(b"\r\n")
    assert b"$Id: " in (placed.slot.tree / "a.txt").read_bytes()
    slot = placed.slot
    checkout._require_as_verified(slot, slot.git, placed.tree, None, (), Path("objects"))
    other = repo.git("rev-parse", "HEAD~1^{tree}" if reached == "update" else "HEAD:bin").strip()
    with pytest.raises(RunError, match=f"holds tree {placed.tree[:12]}, not {other[:12]}"):
        checkout._require_as_verified(slot, slot.git, other, None, (), Path("objects"))
    placed = place(repo)  # written afresh
    target = placed.slot.tree / "bin/tool"
    kept = os.stat(target)
    target.write_text("#!/bin/XX\n")  # same size, same times: the stat data still say clean
    os.utime(target, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    with pytest.raises(RunError, match="the checkout's file bin/tool does not hold the object"):
        checkout._require_as_verified(slot, slot.git, placed.tree, ("bin",), (), Path("objects"))
    assert not slot.tree.exists()
    assert not (slot.root / checkout.META).exists()
