"""The workspace fingerprint against real git: ``git add -A && git write-tree`` is the oracle.

Every expectation is computed by git itself in a *copy* of the repository (so the user's index
defines what is tracked, exactly as the fingerprint promises), or, where index flags would hide
work-tree content, with a throwaway empty index.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitaudit.errors import RepositoryError
from gitaudit.git import fingerprint, head_start, index_files
from gitaudit.git.environment import folds_case
from gitaudit.git.fingerprint import (
    EMPTY_TREE,
    Fingerprint,
    changed_paths,
    private_folder,
    tree_of,
    workspace_fingerprint,
)
from gitaudit.git.index_files import STALE_AFTER_SECONDS, WARM_PREFIX, tag_path
from gitaudit.git.repo import open_repo
from tests.gitrepo import (
    OLD_TIME,
    GitRepo,
    cached_trees,
    edit_keeping_times,
    git,
    point_entry_at,
    root_left_to_compute,
    with_cached_trees,
)

ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- oracles and probes


def truth_in_copy(repo_path: Path) -> str:
    """`git add -A && git write-tree` in a copy of the whole repository (index included)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "copy"
        shutil.copytree(repo_path, copy, symlinks=True)
        git(copy, "add", "-A")
        return git(copy, "write-tree").strip()


def truth_throwaway_index(repo_path: Path) -> str:
    """`git add -A && git write-tree` with an empty throwaway index (writes only objects)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        for args in (["add", "-A"], ["write-tree"]):
            proc = subprocess.run(
                ["git", *args], cwd=repo_path, env=env, capture_output=True, check=True
            )
        return proc.stdout.decode().strip()


def snapshot(repo: GitRepo) -> dict[str, object]:
    """Everything the fingerprint must leave alone: index bytes and mtime, status, work tree."""
    index = repo.path / ".git" / "index"
    files: dict[str, tuple[int, int, str]] = {}
    for path in sorted(repo.path.rglob("*")):
        rel = path.relative_to(repo.path).as_posix()
        if rel == ".git" or rel.startswith(".git/"):
            continue
        st_ = path.lstat()
        digest = (
            hashlib.sha256(path.read_bytes()).hexdigest()
            if stat.S_ISREG(st_.st_mode)
            else os.readlink(path)
            if stat.S_ISLNK(st_.st_mode)
            else "dir"
        )
        files[rel] = (st_.st_mode, st_.st_mtime_ns, digest)
    return {
        "index": index.read_bytes() if index.exists() else None,
        "index_mtime": index.stat().st_mtime_ns if index.exists() else None,
        "status": repo.git(
            "--no-optional-locks", "status", "--porcelain", "--untracked-files=all", "--ignored"
        ),
        "flags": repo.git("ls-files", "-v"),
        "files": files,
        "locks": sorted(p.name for p in (repo.path / ".git").glob("*.lock")),
    }


def private_files(repo: GitRepo) -> set[str]:
    """Names in the private dir apart from kept indexes (which must all be whole indexes, each
    with its tag) and their tags."""
    private = private_folder(repo.path / ".git")
    names = {p.name for p in private.iterdir()} if private.exists() else set()
    for name in names:
        if name.startswith(WARM_PREFIX) and name.endswith(".index"):
            data = (private / name).read_bytes()
            assert data[:4] == b"DIRC"
            assert hashlib.sha1(data[:-20]).digest() == data[-20:]
            assert tag_path(private / name).name in names
    return {name for name in names if not name.startswith(WARM_PREFIX)}


def _must_not_be_called(*args: object) -> None:
    raise AssertionError("the user's index was read although a kept index applied")


def warm_files(repo: GitRepo) -> list[Path]:
    return sorted(private_folder(repo.path / ".git").glob(WARM_PREFIX + "*.index"))


def index_entries(index: Path) -> int:
    return int.from_bytes(index.read_bytes()[8:12], "big")


# --------------------------------------------------------------------------- clean and dirty


def test_clean_checkout_is_head_tree(repo: GitRepo) -> None:
    repo.write("src/app.py", "print('hi')\n")
    repo.write("bin/run", "#!/bin/sh\n", mode=0o755)
    head = repo.commit("more")
    fp = workspace_fingerprint(repo.path)
    assert fp == Fingerprint(tree=repo.head_tree(), head=head, clean=True)


def test_fingerprint_is_frozen(repo: GitRepo) -> None:
    fp = workspace_fingerprint(repo.path)
    with pytest.raises(AttributeError):
        fp.tree = "0" * 40  # type: ignore[misc]
    assert workspace_fingerprint(repo.path) == fp


@pytest.mark.parametrize(
    "change",
    [
        "modify",
        "untracked",
        "delete",
        "chmod",
        "symlink",
        "nested",
        "file_to_dir",
        "symlink_retarget",
    ],
)
def test_dirty_workspace_matches_git_add_all(repo: GitRepo, change: str) -> None:
    repo.write("lib/util.py", "x = 1\n")
    repo.write("link", "")
    (repo.path / "link").unlink()
    (repo.path / "link").symlink_to("README.md")
    repo.commit("base")
    p = repo.path
    if change == "modify":
        (p / "lib/util.py").write_text("x = 2\n")
    elif change == "untracked":
        repo.write("new.txt", "new\n")
    elif change == "delete":
        (p / "lib/util.py").unlink()
    elif change == "chmod":
        os.chmod(p / "lib/util.py", 0o755)
    elif change == "symlink":
        (p / "alias").symlink_to("lib/util.py")
    elif change == "nested":
        repo.write("a/b/c/d/e.txt", "deep\n")
        repo.write("a/b/f.txt", "shallow\n")
    elif change == "file_to_dir":
        (p / "lib/util.py").unlink()
        repo.write("lib/util.py/inner.txt", "now a directory\n")
    elif change == "symlink_retarget":
        (p / "link").unlink()
        (p / "link").symlink_to("lib/util.py")
    before = snapshot(repo)
    expected = truth_in_copy(p)
    fp = workspace_fingerprint(p)
    assert fp.tree == expected
    assert fp.tree != repo.head_tree()
    assert fp.clean is False
    assert fp.head == repo.git("rev-parse", "HEAD").strip()
    assert snapshot(repo) == before


def test_names_git_reads_as_lines_differently_are_compared_as_they_are(repo: GitRepo) -> None:
    """Every file git hashed is compared with its blob: names that `hash-object --stdin-paths`
    would read otherwise (a line break inside, a CR at the end, a leading double quote) are
    hashed as they are, so an honest work tree holding them is fingerprinted, not refused."""
    odd = ['"quoted', 'say "hi".txt', "ends in cr\r", "two\nlines", "tab\there"]
    for name in odd:
        (repo.path / name).write_bytes(b"content of an odd name\n")
    expected = truth_in_copy(repo.path)
    fp = workspace_fingerprint(repo.path)
    assert fp.tree == expected and fp.clean is False
    (repo.path / '"quoted').write_bytes(b"edited\n")
    assert workspace_fingerprint(repo.path).tree == truth_in_copy(repo.path) != expected


def test_chmod_back_and_forth_is_seen(repo: GitRepo) -> None:
    script = repo.write("tool.sh", "echo\n", mode=0o644)
    repo.commit("tool")
    os.chmod(script, 0o755)
    executable = workspace_fingerprint(repo.path).tree
    entry = repo.git("ls-tree", executable, "tool.sh")
    assert entry.startswith("100755 ")
    os.chmod(script, 0o644)
    assert workspace_fingerprint(repo.path).clean


def test_ignored_files_do_not_count(repo: GitRepo) -> None:
    repo.write(".gitignore", "*.log\nbuild/\n")
    repo.commit("ignore")
    (repo.path / ".git" / "info").mkdir(exist_ok=True)
    (repo.path / ".git" / "info" / "exclude").write_text("secret.txt\n")
    excludes = repo.path.parent / "global-excludes"
    excludes.write_text("*.swp\n")
    repo.git("config", "core.excludesFile", str(excludes))
    repo.write("debug.log", "noise\n")
    repo.write("build/out/app.bin", b"\x00\x01")
    repo.write("secret.txt", "shh\n")
    repo.write(".README.md.swp", "vim\n")
    fp = workspace_fingerprint(repo.path)
    assert fp.tree == repo.head_tree()
    assert fp.clean is True


def test_tracked_file_matching_ignore_rules_still_counts(repo: GitRepo) -> None:
    repo.write(".gitignore", "*.o\n")
    repo.write("vendor/blob.o", "v1\n")
    repo.git("add", "-f", "vendor/blob.o")
    repo.commit("vendored object")
    assert workspace_fingerprint(repo.path).clean
    repo.write("vendor/blob.o", "v2\n")
    fp = workspace_fingerprint(repo.path)
    assert fp.tree == truth_in_copy(repo.path)
    assert changed_paths(repo.path, repo.head_tree(), fp.tree) == ["vendor/blob.o"]


def test_file_ignored_after_being_fingerprinted_stops_counting(repo: GitRepo) -> None:
    """A persistent private index would keep such a file "tracked" forever; ours must not."""
    repo.write("coverage.xml", "<coverage/>\n")
    assert not workspace_fingerprint(repo.path).clean
    repo.write(".gitignore", "coverage.xml\n")
    repo.commit("ignore coverage")
    assert repo.git("status", "--porcelain") == ""
    fp = workspace_fingerprint(repo.path)
    assert fp.clean
    assert fp.tree == repo.head_tree()


def test_file_force_added_by_user_counts_immediately(repo: GitRepo) -> None:
    repo.write(".gitignore", "*.cfg\n")
    repo.commit("ignore cfg")
    repo.write("local.cfg", "a=1\n")
    assert workspace_fingerprint(repo.path).clean
    repo.git("add", "-f", "local.cfg")
    fp = workspace_fingerprint(repo.path)
    assert fp.tree == truth_in_copy(repo.path)
    assert "local.cfg" in repo.git("ls-tree", "--name-only", fp.tree)


@pytest.mark.parametrize("flag", ["--assume-unchanged", "--skip-worktree"])
def test_index_flags_do_not_hide_edits(repo: GitRepo, flag: str) -> None:
    repo.write("config.ini", "mode=prod\n")
    repo.commit("config")
    repo.git("update-index", flag, "config.ini")
    repo.write("config.ini", "mode=debug\n")
    assert repo.git("status", "--porcelain") == ""  # git itself no longer looks
    before = snapshot(repo)
    for _ in range(2):  # the second call must not trust a cached "no flags" verdict
        fp = workspace_fingerprint(repo.path)
        assert fp.tree == truth_throwaway_index(repo.path)
        assert not fp.clean
    assert changed_paths(repo.path, repo.head_tree(), fp.tree) == ["config.ini"]
    assert snapshot(repo) == before  # the user's flags survive


@pytest.mark.parametrize("where", ["root", "folder"])
def test_cached_tree_ids_are_computed_from_the_entries(repo: GitRepo, where: str) -> None:
    """The tree ids the user's index caches for its folders (``TREE``) are written by whoever
    writes the index; `git write-tree` trusts any that names an existing tree. They are
    computed again from the entries, on every call."""
    app = repo.write("src/app.py", "ANSWER = 42\n")
    repo.commit("app")
    index = repo.path / ".git" / "index"
    proven = cached_trees(index.read_bytes())
    if where == "folder":
        proven = root_left_to_compute(proven)
    app.write_text("ANSWER = 0\n")
    os.utime(app, ns=(OLD_TIME, OLD_TIME))
    repo.git("add", "src/app.py")
    index.write_bytes(with_cached_trees(index.read_bytes(), proven))
    assert repo.git("write-tree").strip() == repo.head_tree()  # git trusts them
    before = snapshot(repo)
    for _ in range(2):  # the second call starts from the kept index
        fp = workspace_fingerprint(repo.path)
        assert fp.tree == truth_throwaway_index(repo.path) != repo.head_tree()
    assert changed_paths(repo.path, "HEAD", fp.tree) == ["src/app.py"]
    assert snapshot(repo) == before  # the user's index, forged ids and all, is left alone


BLINDING_CONFIG = [
    pytest.param(("core.checkStat", "minimal"), id="checkStat-minimal"),
    pytest.param(("core.trustctime", "false"), id="trustctime-false"),
]


def test_core_worktree_pointing_at_another_folder_is_refused(repo: GitRepo, tmp_path: Path) -> None:
    """`core.worktree` would have git hash another folder (a clean copy, say) than the one
    holding `.git`: the fingerprint refuses, naming the setting, and so does opening the
    repository; a linked worktree, whose `.git` file leads to its own git dir, is its own
    folder and fingerprints as usual."""
    repo.write("a.txt", "a\n")
    repo.commit("a")
    linked = tmp_path / "linked"
    repo.git("worktree", "add", "-q", str(linked))
    assert workspace_fingerprint(linked).clean
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "a.txt").write_text("a\n")
    repo.write("a.txt", "edited\n")
    repo.git("config", "core.worktree", str(copy))
    for start in (repo.path, repo.path / ".git"):
        with pytest.raises(RepositoryError, match=r"core\.worktree"):
            workspace_fingerprint(start)
    with pytest.raises(RepositoryError, match=r"core\.worktree"):
        open_repo(repo.path)
    repo.git("config", "core.worktree", str(repo.path))  # naming its own folder is harmless
    assert not workspace_fingerprint(repo.path).clean
    assert open_repo(repo.path).workdir == repo.path.resolve()


def test_a_separate_git_dir_has_the_folder_of_its_gitdir_file_as_work_tree(
    tmp_path: Path,
) -> None:
    """`git init --separate-git-dir` leaves a `gitdir:` file in the work tree: the repository
    opens with that folder as its work tree, as git has it (the git dir opened by itself would
    name its own parent), and it fingerprints as usual."""
    work = tmp_path / "work"
    (tmp_path / "store").mkdir()
    git(tmp_path, "init", "-q", f"--separate-git-dir={tmp_path / 'store' / 'x.git'}", str(work))
    repo = GitRepo(work)
    repo.write("a.txt", "a\n")
    repo.commit("a")
    (work / "sub").mkdir()
    assert open_repo(work / "sub").workdir == work.resolve()
    assert workspace_fingerprint(work / "sub").clean


def test_ignorecase_is_what_the_file_system_does(repo: GitRepo) -> None:
    """This file system tells `readme.md` from `README.md`: with `core.ignorecase=true` in the
    repository's config git lists a case variant of a tracked file nowhere, but the fingerprint
    tells git what the file system does, and covers it."""
    repo.write("README.md", "proven\n")
    repo.commit("readme")
    assert not folds_case(repo.path)
    repo.write("readme.md", "not proven\n")
    repo.git("config", "core.ignorecase", "true")
    assert repo.git("status", "--porcelain") == ""  # git alone does not see it
    found = workspace_fingerprint(repo.path)
    assert not found.clean
    listed = repo.git("ls-tree", "--name-only", found.tree).split()
    assert listed == ["README.md", "readme.md"]


def test_only_a_folded_name_of_the_same_entry_means_case_folding(
    repo: GitRepo, tmp_path: Path
) -> None:
    """`.GIT` beside `.git` folds case only when it is the very entry, and the entry has no
    other name: a separate `.GIT`, a link to `.git`, or a hard link to a `.git` file, are what a
    file system that tells case apart holds."""
    assert not folds_case(repo.path)
    (repo.path / ".GIT").mkdir()
    assert not folds_case(repo.path)
    (repo.path / ".GIT").rmdir()
    (repo.path / ".GIT").symlink_to(".git")
    assert not folds_case(repo.path)
    (repo.path / ".GIT").unlink()
    linked = tmp_path / "linked"
    repo.write("a.txt", "a\n")
    repo.commit("a")
    repo.git("worktree", "add", "-q", str(linked))
    assert (linked / ".git").is_file()
    os.link(linked / ".git", linked / ".GIT")  # the same file under both names
    assert os.path.samestat(os.lstat(linked / ".git"), os.lstat(linked / ".GIT"))
    assert not folds_case(linked)
    assert not folds_case(tmp_path / "nowhere")


@pytest.mark.parametrize("blind", BLINDING_CONFIG)
def test_config_cannot_blind_the_stat_comparison(repo: GitRepo, blind: tuple[str, str]) -> None:
    """An edit that keeps the file's size, inode and modification time differs from the index
    only in its change time; the repository's config can tell git to ignore that. The
    fingerprint compares the stat data in full: the edit is hashed, before and after the private
    index was kept for reuse."""
    path = repo.path / "config.ini"
    repo.write("config.ini", "mode=prod\n")
    os.utime(path, ns=(OLD_TIME, OLD_TIME))  # never racily clean
    repo.commit("config")
    repo.git("config", *blind)  # first: the index is kept under the settings it saw
    assert workspace_fingerprint(repo.path).clean  # a kept private index, config.ini in it
    edit_keeping_times(path, b"mode=test\n")  # the same inode and size, the times put back
    assert repo.git("status", "--porcelain") == ""  # blinded: git no longer looks
    unblinded = ("-c", "core.checkStat=default", "-c", "core.trustctime=true")
    assert "config.ini" in repo.git(*unblinded, "status", "--porcelain")  # git by default sees it
    for _ in range(2):
        fp = workspace_fingerprint(repo.path)
        assert not fp.clean
        assert changed_paths(repo.path, repo.head_tree(), fp.tree) == ["config.ini"]
    repo.git("config", "--unset", blind[0])
    assert fp.tree == truth_throwaway_index(repo.path)


def test_config_cannot_pass_a_links_text_for_the_link(repo: GitRepo) -> None:
    """With `core.symlinks=false` git takes a plain file holding a committed link's text for the
    link (`git status` is clean); the fingerprint sees a plain file where the link was."""
    repo.write("real.py", "print(1)\n")
    os.symlink("real.py", repo.path / "link.py")
    repo.commit("a link")
    assert workspace_fingerprint(repo.path).clean
    (repo.path / "link.py").unlink()
    (repo.path / "link.py").write_text("real.py")
    repo.git("config", "core.symlinks", "false")
    assert repo.git("status", "--porcelain") == ""  # git no longer tells them apart
    fp = workspace_fingerprint(repo.path)
    assert not fp.clean
    assert changed_paths(repo.path, repo.head_tree(), fp.tree) == ["link.py"]


@pytest.mark.parametrize("flag", ["--assume-unchanged", "--skip-worktree"])
def test_a_file_with_one_index_flag_is_read_on_every_call(repo: GitRepo, flag: str) -> None:
    """One kind of flag alone (not both) must keep the user's index from being marked clean of
    flags: a later call, the file edited by then, would trust the flag and miss the edit."""
    repo.write("config.ini", "mode=prod\n")
    repo.commit("config")
    repo.git("update-index", flag, "config.ini")
    assert workspace_fingerprint(repo.path).clean  # flagged, not yet edited
    repo.write("config.ini", "mode=debug\n")
    assert repo.git("status", "--porcelain") == ""  # git itself no longer looks
    fp = workspace_fingerprint(repo.path)
    assert fp.tree == truth_throwaway_index(repo.path)
    assert changed_paths(repo.path, repo.head_tree(), fp.tree) == ["config.ini"]
    repo.git("config", "user.name", "Someone Else")  # a kept result from before no longer applies
    repo.write("config.ini", "mode=debug, verbose\n")
    fp = workspace_fingerprint(repo.path)
    assert fp.tree == truth_throwaway_index(repo.path)
    assert not fp.clean


def test_index_flags_set_after_a_cached_verdict_are_seen(repo: GitRepo) -> None:
    assert workspace_fingerprint(repo.path).clean
    assert warm_files(repo)  # this version of the user's index was checked and kept
    repo.git("update-index", "--assume-unchanged", "README.md")
    repo.write("README.md", "edited behind git's back\n")
    fp = workspace_fingerprint(repo.path)
    assert fp.tree == truth_throwaway_index(repo.path)


def test_empty_repository_without_commits(tmp_path: Path) -> None:
    repo = GitRepo.create(tmp_path / "empty")
    assert not (repo.path / ".git" / "index").exists()
    fp = workspace_fingerprint(repo.path)
    assert fp == Fingerprint(tree=EMPTY_TREE, head=None, clean=True)
    repo.write("first.txt", "1\n")
    repo.write("dir/second.txt", "2\n", mode=0o755)
    fp = workspace_fingerprint(repo.path)
    assert fp.tree == truth_in_copy(repo.path)
    assert fp.head is None
    assert fp.clean is False
    repo.git("add", "first.txt")  # an index now exists, still no commit
    assert workspace_fingerprint(repo.path).tree == fp.tree


def test_accepts_any_path_inside_the_work_tree(repo: GitRepo) -> None:
    target = repo.write("pkg/sub/mod.py", "pass\n")
    repo.write("other.txt", "x\n")
    expected = workspace_fingerprint(repo.path)
    assert workspace_fingerprint(repo.path / "pkg" / "sub") == expected
    assert workspace_fingerprint(target) == expected
    assert workspace_fingerprint(str(repo.path / "pkg")) == expected


def test_linked_worktree_uses_its_own_index(repo: GitRepo, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    repo.git("worktree", "add", "-q", "-b", "side", str(wt))
    (wt / "README.md").write_text("in the linked worktree\n")
    repo.write("README.md", "in the main worktree\n")
    fp = workspace_fingerprint(wt)
    assert fp.tree == truth_throwaway_index(wt)
    assert fp.tree != workspace_fingerprint(repo.path).tree
    assert private_folder(repo.path / ".git" / "worktrees" / "wt").is_dir()


# --------------------------------------------------------------------------- leaves things alone


def test_user_index_status_and_files_are_untouched(repo: GitRepo) -> None:
    repo.write("staged.txt", "staged\n")
    repo.git("add", "staged.txt")
    repo.write("staged.txt", "staged then edited\n")
    repo.write("untracked/x.txt", "x\n")
    (repo.path / "README.md").unlink()
    time.sleep(0.01)
    before = snapshot(repo)
    workspace_fingerprint(repo.path)
    workspace_fingerprint(repo.path)
    assert snapshot(repo) == before
    assert private_files(repo) == set()


def test_works_with_hook_environment_pointing_elsewhere(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside hooks git exports its own index, git dir and prefix; none of it may leak in."""
    repo.write(".gitignore", "*.o\n")
    repo.commit("ignore")
    repo.write("README.md", "changed\n")
    repo.write("obj/keep.o", "ignored content\n")
    expected = truth_in_copy(repo.path)
    decoy = GitRepo.create(tmp_path / "decoy")
    decoy.write("decoy.txt", "decoy\n")
    decoy.write("obj/keep.o", "x\n")
    decoy.git("add", "-A")
    decoy.git("add", "-f", "obj/keep.o")
    decoy_before = (decoy.path / ".git" / "index").read_bytes()
    user_before = snapshot(repo)
    monkeypatch.setenv("GIT_DIR", str(decoy.path / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(decoy.path))
    monkeypatch.setenv("GIT_INDEX_FILE", str(decoy.path / ".git" / "index"))
    monkeypatch.setenv("GIT_PREFIX", "obj/")
    monkeypatch.setenv("GIT_OBJECT_DIRECTORY", str(tmp_path / "quarantine"))
    monkeypatch.setenv("GIT_QUARANTINE_PATH", str(tmp_path / "quarantine"))
    fp = workspace_fingerprint(repo.path)
    assert fp.tree == expected
    assert fp.head is not None
    assert changed_paths(repo.path, fp.head, fp.tree) == ["README.md"]
    assert not (tmp_path / "quarantine").exists()
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX", "GIT_OBJECT_DIRECTORY"):
        monkeypatch.delenv(var)
    assert (decoy.path / ".git" / "index").read_bytes() == decoy_before
    assert snapshot(repo) == user_before


def test_works_inside_a_real_pre_commit_hook(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "hook-out.txt"
    hook = repo.path / ".git" / "hooks" / "pre-commit"
    hook.write_text(
        f"#!/bin/sh\nexec {sys.executable} - <<'EOF'\n"
        "import os\n"
        "from gitaudit.git.fingerprint import workspace_fingerprint\n"
        "fp = workspace_fingerprint('.')\n"
        f"open({str(out)!r}, 'w').write(fp.tree + '\\n' + os.environ.get('GIT_INDEX_FILE', ''))\n"
        "EOF\n"
    )
    hook.chmod(0o755)
    # ROOT first; whatever else is on the path (make mutate's shim) stays behind it
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    )
    repo.write("README.md", "committed by -a\n")
    repo.write("notes.txt", "untracked, not committed\n")
    expected = truth_in_copy(repo.path)
    repo.git("commit", "-q", "-a", "-m", "via hook")
    tree, index_file = out.read_text().splitlines()
    assert index_file  # git really did export its own index to the hook
    assert tree == expected
    # the commit itself is intact and the workspace still has only the untracked file
    assert repo.git("show", "HEAD:README.md") == "committed by -a\n"
    assert repo.git("status", "--porcelain") == "?? notes.txt\n"
    assert changed_paths(repo.path, "HEAD", tree) == ["notes.txt"]


# --------------------------------------------------------------------------- concurrency, debris


def _busy_repo(repo: GitRepo) -> None:
    for i in range(40):
        repo.write(f"d{i % 5}/f{i}.txt", f"{i}\n")
    repo.commit("many")
    repo.write("d1/f1.txt", "changed\n")
    repo.write("fresh/new.txt", "new\n")
    (repo.path / "d2/f2.txt").unlink()


def test_concurrent_fingerprints_in_threads_agree(repo: GitRepo) -> None:
    _busy_repo(repo)
    expected = truth_in_copy(repo.path)
    before = snapshot(repo)
    with ThreadPoolExecutor(max_workers=8) as pool:
        trees = list(pool.map(lambda _: workspace_fingerprint(repo.path).tree, range(16)))
    assert set(trees) == {expected}
    assert private_files(repo) == set()
    assert snapshot(repo) == before


def test_concurrent_fingerprints_in_processes_agree(repo: GitRepo) -> None:
    _busy_repo(repo)
    expected = truth_in_copy(repo.path)
    code = (
        "import sys\n"
        "from gitaudit.git.fingerprint import workspace_fingerprint\n"
        "print(workspace_fingerprint(sys.argv[1]).tree)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(repo.path)], stdout=subprocess.PIPE, env=env
        )
        for _ in range(8)
    ]
    trees = {p.communicate()[0].decode().strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert trees == {expected}
    assert private_files(repo) == set()
    assert len(warm_files(repo)) == 1  # the racing writers left one kept index, tagged


def test_stale_temporary_files_are_swept_by_their_change_time(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Debris is a per-process file whose inode has not changed for the debris age. An old
    modification time alone is not enough: a live seed carries the old one of the kept index
    it was copied from (`test_head_start`: sweeping it made a clean checkout fingerprint as the
    empty tree). Nothing but per-process files is ever swept."""
    private = private_folder(repo.path / ".git")
    private.mkdir(parents=True)
    dead = private / "fingerprint-999999-dead.index"
    dead_lock = private / "fingerprint-999999-dead.index.lock"
    foreign = private / "someone-elses-file"
    for path in (dead, dead_lock, foreign):
        path.write_bytes(b"DIRC garbage from a crashed run")
        old = time.time() - STALE_AFTER_SECONDS - 60
        os.utime(path, (old, old))
    assert workspace_fingerprint(repo.path).clean
    assert private_files(repo) == {dead.name, dead_lock.name, foreign.name}
    later = time.time() + STALE_AFTER_SECONDS + 60  # their change time is that old by then
    monkeypatch.setattr(index_files, "time", SimpleNamespace(time=lambda: later))
    index_files.sweep(private)
    assert private_files(repo) == {foreign.name}
    assert warm_files(repo)  # the kept index stays: only a newer one replaces it


@pytest.mark.parametrize("where", ["work tree", "git dir"])
def test_a_cache_folder_inside_the_repository_is_refused(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """In the work tree the private indexes would be fingerprinted themselves; in the git dir
    anything in the work tree could swap them. Refused, naming the folder and the setting."""
    inside = repo.path / "cache" if where == "work tree" else repo.path / ".git" / "cache"
    monkeypatch.setenv("GITAUDIT_CACHE", str(inside))
    with pytest.raises(RepositoryError, match="inside the repository") as raised:
        workspace_fingerprint(repo.path)
    assert "GITAUDIT_CACHE" in (raised.value.hint or "")
    assert not inside.exists()


def test_copy_works_without_sendfile(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS sendfile only writes to sockets; the copy must fall back to plain reads."""
    repo.write("README.md", "edited\n")
    expected = truth_in_copy(repo.path)
    monkeypatch.delattr(os, "sendfile")
    assert workspace_fingerprint(repo.path).tree == expected


@pytest.mark.parametrize("damage", ["garbage", "empty", "missing", "another-files", "tree"])
def test_a_kept_index_without_its_own_tag_is_not_used(repo: GitRepo, damage: str) -> None:
    """A kept index is used only with the tag its writer made for that very file."""
    repo.write("README.md", "edited\n")
    expected = workspace_fingerprint(repo.path)
    [warm] = warm_files(repo)
    tag = tag_path(warm)
    if damage == "missing":
        tag.unlink()
    elif damage == "another-files":  # an honest tag, of a copy: another inode, change time
        copy = warm.with_name("copy.index")
        copy.write_bytes(warm.read_bytes())
        os.utime(copy, ns=(warm.stat().st_atime_ns, warm.stat().st_mtime_ns))
        os.replace(copy, warm)
    elif damage == "tree":  # its MAC kept, another tree named: the tree is vouched for too
        mac, _, basis = tag.read_text().strip().split(" ")
        tag.write_text(f"{mac} {repo.head_tree()} {basis}\n")
    else:
        tag.write_bytes({"garbage": b"\xff\xfe not a tag", "empty": b""}[damage])
    with pytest.MonkeyPatch.context() as patch:
        seeds: list[bool] = []
        real = fingerprint._seed

        def seed(*args: Any, **kwargs: Any) -> Any:
            got = real(*args, **kwargs)
            seeds.append(got.from_warm)
            return got

        patch.setattr(fingerprint, "_seed", seed)
        assert workspace_fingerprint(repo.path) == expected
        assert seeds == [False]  # not seeded from the kept index: every file hashed again
    assert workspace_fingerprint(repo.path) == expected
    assert private_files(repo) == set()


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_corrupt_user_index_falls_back_to_hashing_everything(repo: GitRepo, damage: str) -> None:
    """git reads a damaged index without complaint (truncated entries become null ids), so the
    fingerprint checks the seed itself, and without a trustworthy seed hashes the whole tree."""
    repo.write("extra/new.txt", "new\n")
    repo.write("README.md", "edited\n")
    index = repo.path / ".git" / "index"
    data = index.read_bytes()
    data = {
        "truncate": data[:50],
        "flip": data[:60] + bytes([data[60] ^ 0x01]) + data[61:],
        "garbage": b"not an index at all",
    }[damage]
    index.write_bytes(data)
    expected = truth_throwaway_index(repo.path)
    for _ in range(2):
        assert workspace_fingerprint(repo.path).tree == expected
    assert index.read_bytes() == data
    assert private_files(repo) == set()  # no "verified" verdict for a broken index


def test_damaged_stat_data_cannot_fool_the_fingerprint(repo: GitRepo) -> None:
    """git does not checksum the index on read; wrong stat data must only cost a re-hash."""
    repo.write("README.md", "edited\n")
    expected = truth_in_copy(repo.path)
    index = repo.path / ".git" / "index"
    data = bytearray(index.read_bytes())
    data[12 + 36] ^= 0xFF  # first entry's file size
    index.write_bytes(bytes(data))
    assert workspace_fingerprint(repo.path).tree == expected


# --------------------------------------------------------------------------- kept private index


def test_a_result_is_kept_only_when_git_rewrote_the_private_index(repo: GitRepo) -> None:
    """Keeping a result costs a write in the user's cache; it is done once per version of the
    user's index and then only when git changed the private index (a file re-hashed), never
    for a call that found nothing new."""
    old = 1_700_000_000
    os.utime(repo.path / "README.md", (old, old))
    repo.git("update-index", "--really-refresh")  # the user's index now has nothing racy
    assert workspace_fingerprint(repo.path).clean
    [checked] = warm_files(repo)  # kept for this version of the user's index
    kept = checked.stat()
    assert workspace_fingerprint(repo.path).clean
    again = checked.stat()
    assert (again.st_ino, again.st_ctime_ns) == (kept.st_ino, kept.st_ctime_ns)  # not rewritten
    edited = repo.write("README.md", "edited\n")
    os.utime(edited, (old + 60, old + 60))  # not racy: the kept stat data is trusted
    first = workspace_fingerprint(repo.path)
    [warm] = warm_files(repo)
    kept = warm.stat()
    assert workspace_fingerprint(repo.path) == first
    again = warm.stat()
    assert [warm] == warm_files(repo)
    assert (again.st_ino, again.st_mtime_ns) == (kept.st_ino, kept.st_mtime_ns)  # not rewritten


def test_a_call_that_changes_nothing_takes_the_tree_from_the_tag(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tag of a kept index names the tree its entries make: a call whose `git add -A`
    changes nothing needs no `git write-tree`; one that changes something runs it."""
    edited = repo.write("README.md", "edited\n")
    os.utime(edited, ns=(OLD_TIME, OLD_TIME))  # never racily clean: git need not look again
    first = workspace_fingerprint(repo.path)
    assert first.tree == truth_in_copy(repo.path)
    with monkeypatch.context() as patch:
        patch.setattr(fingerprint, "_write_tree", _must_not_be_called)
        assert workspace_fingerprint(repo.path) == first
    calls: list[object] = []
    real = fingerprint._write_tree

    def write_tree(*args: Any) -> str:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(fingerprint, "_write_tree", write_tree)
    repo.write("README.md", "edited again\n")
    assert workspace_fingerprint(repo.path).tree == truth_in_copy(repo.path) != first.tree
    assert calls


def test_unstaged_edits_are_kept_and_results_stay_exact(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.write("a.txt", "a\n")
    repo.write("b.txt", "b\n")
    repo.commit("two files")
    repo.write("a.txt", "edited a\n")
    repo.write("b.txt", "edited b\n")
    first = workspace_fingerprint(repo.path)
    assert first.tree == truth_in_copy(repo.path)
    [warm] = warm_files(repo)
    user_index = repo.path / ".git" / "index"
    assert index_entries(warm) == index_entries(user_index)
    assert int.from_bytes(warm.read_bytes()[4:8], "big") == 4  # prefix-compressed paths
    basis = tag_path(warm).read_text().split()[2]
    with monkeypatch.context() as patch:  # prove the next call starts from the kept index
        patch.setattr(fingerprint, "_list", _must_not_be_called)
        assert workspace_fingerprint(repo.path) == first
    repo.write("a.txt", "edited a again\n")
    assert workspace_fingerprint(repo.path).tree == truth_in_copy(repo.path)
    [kept] = warm_files(repo)
    assert int.from_bytes(kept.read_bytes()[4:8], "big") == 4
    repo.git("add", "b.txt")  # a new version of the user's index: the kept one follows it
    assert workspace_fingerprint(repo.path).tree == truth_in_copy(repo.path)
    [kept] = warm_files(repo)
    assert tag_path(kept).read_text().split()[2] != basis


@pytest.mark.parametrize("seen", ["kept", "first-contact"])
def test_the_stat_data_of_the_users_index_is_not_trusted(repo: GitRepo, seen: str) -> None:
    """An edit staged, then its entry pointed at the committed blob by hand: the user's index
    says (by its stat data) that the file holds the committed content, and git believes it.
    The fingerprint's stat data is its own, recorded when git hashed the file for gitaudit; on
    first contact (nothing kept) every file is hashed."""
    committed = repo.git("rev-parse", "HEAD:README.md").strip()
    if seen == "kept":
        assert workspace_fingerprint(repo.path).clean
        assert warm_files(repo)
    edited = repo.write("README.md", "edited\n")
    os.utime(edited, ns=(OLD_TIME, OLD_TIME))  # never racily clean
    repo.git("add", "README.md")
    point_entry_at(repo, "README.md", committed)
    assert repo.git("status", "--porcelain") == ""  # git is fooled
    expected = truth_throwaway_index(repo.path)  # every file hashed
    assert expected != repo.head_tree()
    for _ in range(2):
        assert workspace_fingerprint(repo.path).tree == expected


def test_a_new_version_of_the_users_index_rehashes_only_what_changed(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept index follows the user's paths (added, removed, force-added while ignored)
    without hashing again the files whose stat data git recorded for gitaudit."""
    repo.write(".gitignore", "*.o\n")
    for i in range(5):
        repo.write(f"f{i}.txt", f"{i}\n")
    repo.commit("five files")
    for name in repo.git("ls-files").splitlines():
        os.utime(repo.path / name, ns=(OLD_TIME, OLD_TIME))  # never racily clean
    assert workspace_fingerprint(repo.path).clean
    repo.write("new.txt", "added\n")
    repo.write("build.o", "object\n")
    repo.git("add", "new.txt")
    repo.git("add", "-f", "build.o")
    repo.git("rm", "-q", "--cached", "f0.txt")
    repo.write(".git/info/exclude", "f0.txt\n")  # untracked now, and ignored
    updates: list[tuple[str, list[bytes]]] = []
    real = fingerprint._update

    def update(layout: Any, env: Any, options: Any, records: list[bytes]) -> None:
        updates.append((options[0], [r.rpartition(b"\t")[2] for r in records]))
        real(layout, env, options, records)

    monkeypatch.setattr(fingerprint, "_update", update)
    assert workspace_fingerprint(repo.path).tree == truth_in_copy(repo.path)
    # the path the user no longer tracks taken out, the new ones entered without stat data
    # (git hashes them); the others keep the stat data git recorded for gitaudit
    assert updates == [("--force-remove", [b"f0.txt"]), ("--index-info", [b"build.o", b"new.txt"])]
    [warm] = warm_files(repo)
    kept = subprocess.run(
        ["git", "ls-files"],
        cwd=repo.path,
        env={**os.environ, "GIT_INDEX_FILE": str(warm)},
        capture_output=True,
        check=True,
    )
    assert kept.stdout.decode() == repo.git("ls-files")  # the user's paths, kept


@pytest.mark.parametrize("checked_out", [False, True])
def test_a_submodule_keeps_the_users_gitlink_when_not_checked_out(
    repo: GitRepo, checked_out: bool
) -> None:
    """A submodule that is not checked out (an empty folder) counts with the commit the user's
    index records for it, as `git add -A` on that index does; one checked out, with its HEAD."""
    inner = GitRepo.create(repo.path.parent / "inner")
    inner.write("lib.txt", "v1\n")
    first = inner.commit("v1")
    inner.write("lib.txt", "v2\n")
    second = inner.commit("v2")
    if checked_out:
        repo.git("clone", "-q", str(inner.path), "sub")
        repo.git("-C", "sub", "checkout", "-q", first)
    else:
        (repo.path / "sub").mkdir()
    repo.git("update-index", "--add", "--cacheinfo", f"160000,{first},sub")
    repo.commit("a submodule")
    assert workspace_fingerprint(repo.path).clean
    repo.git("update-index", "--cacheinfo", f"160000,{second},sub")  # the user moves it
    if checked_out:
        repo.git("-C", "sub", "checkout", "-q", second)
    fp = workspace_fingerprint(repo.path)
    assert fp.tree == truth_in_copy(repo.path) != repo.head_tree()
    assert repo.git("ls-tree", fp.tree, "sub").split()[2] == second


def test_a_new_version_of_the_users_index_with_the_same_paths_is_followed_once(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's index rewritten with the same paths (`git status` refreshing it, say): the
    next call lists it once and keeps its index for that version, nothing hashed again; the
    call after starts from the kept index as it is."""
    for name in repo.git("ls-files").splitlines():
        os.utime(repo.path / name, ns=(OLD_TIME, OLD_TIME))  # never racily clean
    first = workspace_fingerprint(repo.path)
    repo.git("update-index", "--index-version", "3")  # another version, the same paths
    assert workspace_fingerprint(repo.path) == first
    with monkeypatch.context() as patch:
        patch.setattr(fingerprint, "_list", _must_not_be_called)
        patch.setattr(fingerprint, "_write_tree", _must_not_be_called)
        assert workspace_fingerprint(repo.path) == first


def test_with_file_mode_off_the_users_executable_bits_count(repo: GitRepo) -> None:
    """Under `core.fileMode=false` git takes executable bits from the index, not the disk: the
    user's modes count as its paths do, on first contact and when the user changes one."""
    repo.write("run.sh", "#!/bin/sh\n", mode=0o755)
    repo.commit("a script")
    repo.git("config", "core.fileMode", "false")
    os.chmod(repo.path / "run.sh", 0o644)  # the disk says otherwise: not counted
    fp = workspace_fingerprint(repo.path)
    assert fp.clean and fp.tree == truth_in_copy(repo.path)
    repo.git("update-index", "--chmod=-x", "run.sh")
    fp = workspace_fingerprint(repo.path)
    assert fp.tree == truth_in_copy(repo.path) != repo.head_tree()
    assert repo.git("ls-tree", fp.tree, "run.sh").split()[0] == "100644"


def test_kept_index_never_holds_untracked_paths(repo: GitRepo) -> None:
    """Otherwise an untracked file would stay "tracked" after the user ignores it."""
    repo.write("README.md", "edited\n")
    workspace_fingerprint(repo.path)
    [warm] = warm_files(repo)
    kept = warm.read_bytes()
    repo.write("scratch.txt", "untracked\n")
    assert workspace_fingerprint(repo.path).tree == truth_in_copy(repo.path)
    assert warm.read_bytes() == kept  # a result with an extra path is not kept
    (repo.path / ".git" / "info" / "exclude").write_text("scratch.txt\n")
    fp = workspace_fingerprint(repo.path)
    assert fp.tree == truth_in_copy(repo.path)
    assert changed_paths(repo.path, "HEAD", fp.tree) == ["README.md"]


def test_tracked_ignored_file_deleted_and_recreated(repo: GitRepo) -> None:
    """A result missing a tracked-but-ignored file must not be kept: `add -A` never re-adds it."""
    repo.write(".gitignore", "*.o\n")
    repo.write("keep.o", "v1\n")
    repo.git("add", "-f", "keep.o")
    repo.commit("tracked object")
    repo.write("README.md", "edited\n")
    workspace_fingerprint(repo.path)
    assert warm_files(repo)
    (repo.path / "keep.o").unlink()
    repo.write("other.txt", "one path gone, one new: the entry count alone cannot tell\n")
    assert workspace_fingerprint(repo.path).tree == truth_in_copy(repo.path)
    (repo.path / "other.txt").unlink()
    repo.write("keep.o", "v2\n")
    fp = workspace_fingerprint(repo.path)
    assert fp.tree == truth_in_copy(repo.path)
    assert changed_paths(repo.path, "HEAD", fp.tree) == ["README.md", "keep.o"]


def test_unresolved_conflict_is_fingerprinted_but_not_kept(repo: GitRepo) -> None:
    """Resolving collapses three stage entries into one, so the entry count proves nothing:
    two new files make up the difference and must not end up in a kept index."""
    repo.write("c.txt", "base\n")
    repo.commit("base")
    repo.git("checkout", "-q", "-b", "other")
    repo.write("c.txt", "other\n")
    repo.commit("other")
    repo.git("checkout", "-q", "main")
    repo.write("c.txt", "main\n")
    repo.commit("main")
    repo.git("merge", "-q", "other", check=False)
    assert "UU c.txt" in repo.git("status", "--porcelain")
    repo.write("new1.txt", "new\n")
    repo.write("new2.txt", "new\n")
    for _ in range(2):
        assert workspace_fingerprint(repo.path).tree == truth_in_copy(repo.path)
    assert warm_files(repo) == []
    (repo.path / ".git" / "info" / "exclude").write_text("new1.txt\n")
    fp = workspace_fingerprint(repo.path)
    assert fp.tree == truth_in_copy(repo.path)
    assert "new1.txt" not in repo.git("ls-tree", "--name-only", fp.tree)


def test_racily_clean_entries_are_rechecked(repo: GitRepo) -> None:
    """The private copy keeps the user's index mtime: an edit in the same instant as the index
    write, with the same size and mtime, is only caught by git's racy-timestamp check."""
    repo.git("config", "core.trustctime", "false")
    readme = repo.path / "README.md"
    stamp = 1_700_000_000_000_000_000
    readme.write_text("aaaa\n")
    os.utime(readme, ns=(stamp, stamp))
    repo.git("add", "README.md")
    index = repo.path / ".git" / "index"
    os.utime(index, ns=(stamp, stamp))  # the entry is now racily clean
    with open(readme, "r+") as handle:  # same inode, same size, same mtime
        handle.write("bbbb\n")
    os.utime(readme, ns=(stamp, stamp))
    fp = workspace_fingerprint(repo.path)
    assert repo.git("show", f"{fp.tree}:README.md") == "bbbb\n"
    assert index.stat().st_mtime_ns == stamp


@pytest.mark.parametrize("where", [".gitattributes", ".git/info/attributes"])
def test_attribute_changes_invalidate_the_kept_index(repo: GitRepo, where: str) -> None:
    """Attributes decide the blob a file hashes to; a kept blob from before must not survive.
    (The CRLF file is what a checkout writes under `eol=crlf`: faithful to its blob. In
    `.git/info/attributes`, which the tree does not pin, the conversion is refused.)"""
    repo.write("crlf.txt", b"one\ntwo\n")
    repo.commit("lf file")
    edited = repo.write("crlf.txt", b"one\r\ntwo\r\n")
    os.utime(edited, (1_700_000_000, 1_700_000_000))  # not racy: the kept stat data is trusted
    before = workspace_fingerprint(repo.path)
    assert warm_files(repo)
    assert changed_paths(repo.path, "HEAD", before.tree) == ["crlf.txt"]
    repo.write(where, "*.txt text eol=crlf\n")
    if where == ".git/info/attributes":
        with pytest.raises(RepositoryError, match="sets attributes that convert files"):
            workspace_fingerprint(repo.path)
        return
    fp = workspace_fingerprint(repo.path)
    assert fp.tree == truth_in_copy(repo.path)
    # with the attribute the CRLF file normalises to the committed blob
    blob = repo.git("rev-parse", f"{fp.tree}:crlf.txt").strip()
    assert blob == repo.git("rev-parse", "HEAD:crlf.txt").strip()


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_corrupt_kept_index_is_detected_and_rebuilt(repo: GitRepo, damage: str) -> None:
    repo.write("README.md", "edited\n")
    expected = workspace_fingerprint(repo.path)
    [warm] = warm_files(repo)
    data = warm.read_bytes()
    warm.write_bytes(
        {
            "truncate": data[: len(data) // 2],
            "flip": data[:40] + bytes([data[40] ^ 0x10]) + data[41:],
            "garbage": b"DIRC\x00\x00\x00\x02garbage",
            "empty": b"",
        }[damage]
    )
    assert workspace_fingerprint(repo.path) == expected
    assert workspace_fingerprint(repo.path) == expected
    private_files(repo)  # any kept index is whole again


# --------------------------------------------------------------------------- errors


def test_a_repository_config_that_is_not_utf8_is_still_read(repo: GitRepo) -> None:
    """git takes any bytes in its config (a Latin-1 user name, say): the check for content
    filters reads it all the same, and a filter defined next to such bytes is still refused."""
    config = repo.path / ".git" / "config"
    with config.open("ab") as handle:
        handle.write(b"[user]\n\tname = Ren\xe9\n")
    assert workspace_fingerprint(repo.path).clean
    repo.git("config", "filter.hide.clean", "cat")
    with pytest.raises(RepositoryError, match=r"defines content filters \(filter\.hide\.clean\)"):
        workspace_fingerprint(repo.path)


def _define_filter(repo: GitRepo, how: str) -> None:
    """A clean filter `hide` in the repository's configuration, defined *how*."""
    git_dir = repo.path / ".git"
    if how == "directly":
        repo.git("config", "filter.hide.clean", "cat")
    elif how == "upper case":
        with (git_dir / "config").open("a") as handle:
            handle.write('[FILTER "hide"]\n\tCLEAN = cat\n')
    elif how in ("include", "includeIf"):
        (git_dir / "more.cfg").write_text('[filter "hide"]\n\tclean = cat\n')
        key = "include.path" if how == "include" else f"includeIf.gitdir:{repo.path}/.path"
        repo.git("config", key, "more.cfg")
    elif how == "worktree config":
        repo.git("config", "extensions.worktreeConfig", "true")
        repo.git("config", "--worktree", "filter.hide.clean", "cat")
    else:
        raise AssertionError(how)


@pytest.mark.parametrize(
    "how", ["directly", "upper case", "include", "includeIf", "worktree config"]
)
def test_a_content_filter_of_the_repository_config_is_refused_however_defined(
    repo: GitRepo, how: str
) -> None:
    """However the repository's own configuration defines a clean filter (a section in upper
    case, a file it includes, the work tree's own config), the fingerprint refuses, with or
    without a head start, as git itself would apply it."""
    assert workspace_fingerprint(repo.path).clean  # an index kept: a head start is possible
    _define_filter(repo, how)
    assert repo.git("config", "--get", "filter.hide.clean").strip() == "cat"  # git applies it
    for _ in range(2):
        launched = head_start.launch(repo.path)
        assert not launched  # the fingerprint decides, from the start
        with pytest.raises(RepositoryError, match=r"defines content filters \(filter\.hide\."):
            workspace_fingerprint(repo.path)


def test_filters_of_the_global_config_and_harmless_includes_are_allowed(repo: GitRepo) -> None:
    repo.git("config", "--global", "filter.lfs.clean", "cat")
    (repo.path / ".git" / "more.cfg").write_text("[color]\n\tui = never\n")
    repo.git("config", "include.path", "more.cfg")
    assert workspace_fingerprint(repo.path).clean


def test_bare_repository_is_refused(tmp_path: Path) -> None:
    bare = GitRepo.create(tmp_path / "bare.git", bare=True)
    with pytest.raises(RepositoryError) as info:
        workspace_fingerprint(bare.path)
    assert str(info.value) == "bare repository has no work tree; pass a revision"
    assert info.value.hint == "fingerprint a commit with its tree id instead"


def test_not_a_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plain").mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    with pytest.raises(RepositoryError, match="not a git repository"):
        workspace_fingerprint(tmp_path / "plain")
    with pytest.raises(RepositoryError, match="no such file"):
        workspace_fingerprint(tmp_path / "missing")


def test_inside_the_git_dir_is_not_a_work_tree(repo: GitRepo) -> None:
    with pytest.raises(RepositoryError, match="not inside a work tree") as info:
        workspace_fingerprint(repo.path / ".git" / "refs")
    assert info.value.hint == "pass the work tree, not the git directory"


def test_embedded_repository_without_commits_is_a_clear_error(repo: GitRepo) -> None:
    GitRepo.create(repo.path / "vendored")
    before = snapshot(repo)
    with pytest.raises(RepositoryError, match="vendored"):
        workspace_fingerprint(repo.path)
    assert snapshot(repo) == before
    assert private_files(repo) == set()


def test_unreadable_file_is_a_clear_error(repo: GitRepo) -> None:
    """A file git cannot read. Root reads any file, so as root the fingerprint runs in a child
    whose bounding set lacks the capabilities that bypass file permissions (util-linux
    ``setpriv``): the same failing read, the same message."""
    secret = repo.write("secret.txt", "x\n")
    secret.chmod(0)
    try:
        if os.geteuid() != 0:
            with pytest.raises(RepositoryError, match=r"secret\.txt"):
                workspace_fingerprint(repo.path)
            return
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv (util-linux) is needed to drop root's file capabilities"
        code = (
            "import sys\n"
            "from gitaudit.errors import RepositoryError\n"
            "from gitaudit.git.fingerprint import workspace_fingerprint\n"
            "try:\n"
            "    workspace_fingerprint(sys.argv[1])\n"
            "except RepositoryError as exc:\n"
            "    print(exc.message)\n"
            "    sys.exit(7)\n"
        )
        proc = subprocess.run(
            [
                setpriv,
                "--bounding-set=-dac_override,-dac_read_search",
                sys.executable,
                "-c",
                code,
                str(repo.path),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 7, proc.stdout + proc.stderr
        assert "secret.txt" in proc.stdout and "Permission denied" in proc.stdout, proc.stdout
    finally:
        secret.chmod(0o644)


# --------------------------------------------------------------------------- tree_of, changed_paths


def test_tree_of_commits_trees_and_unknowns(repo: GitRepo) -> None:
    head = repo.git("rev-parse", "HEAD").strip()
    tree = repo.head_tree()
    assert tree_of(repo.path, head) == tree
    assert tree_of(repo.path, "HEAD") == tree
    assert tree_of(repo.path, tree) == tree
    repo.git("tag", "-a", "v1", "-m", "annotated")
    assert tree_of(repo.path, "v1") == tree
    blob = repo.git("rev-parse", "HEAD:README.md").strip()
    for bad in ("no-such-branch", "0" * 40, blob, "--all"):
        with pytest.raises(RepositoryError, match="unknown revision") as caught:
            tree_of(repo.path, bad)
        assert caught.value.hint == "pass a commit or tree that exists in this repository"


def test_a_work_tree_whose_path_is_not_utf8_is_fingerprinted(tmp_path: Path) -> None:
    """git prints the repository's paths as the bytes they are; a folder name that is not
    UTF-8 (Latin-1 'café') still names the work tree and its git dir."""
    where = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9"))
    repo = GitRepo.create(where)
    repo.write("a.txt", "a\n")
    repo.commit("one file")
    fp = workspace_fingerprint(where)
    assert fp.tree == repo.head_tree() and fp.clean
    repo.write("b.txt", "b\n")
    assert workspace_fingerprint(where).tree != fp.tree
    empty = GitRepo.create(Path(os.fsdecode(bytes(tmp_path) + b"/na\xefve")))  # no commits yet
    assert workspace_fingerprint(empty.path) == Fingerprint(EMPTY_TREE, None, True)


def test_tree_of_works_in_bare_repository(repo: GitRepo, tmp_path: Path) -> None:
    bare = tmp_path / "clone.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo.path), str(bare))
    assert tree_of(bare, "HEAD") == repo.head_tree()


def test_tree_of_outside_a_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    with pytest.raises(RepositoryError, match="not a git repository"):
        tree_of(tmp_path, "HEAD")
    with pytest.raises(RepositoryError, match="not a git repository"):
        changed_paths(tmp_path, EMPTY_TREE, "1" * 40)


def test_changed_paths_lists_every_kind_of_change(repo: GitRepo) -> None:
    repo.write("keep.txt", "same\n")
    repo.write("mod.txt", "v1\n")
    repo.write("gone.txt", "bye\n")
    repo.write("exec.sh", "echo\n", mode=0o644)
    repo.write("dir/deep/file.txt", "deep\n")
    repo.write("became_link", "file\n")
    old = workspace_fingerprint(repo.path).tree
    repo.write("mod.txt", "v2\n")
    (repo.path / "gone.txt").unlink()
    os.chmod(repo.path / "exec.sh", 0o755)
    repo.write("dir/deep/new.txt", "new\n")
    (repo.path / "became_link").unlink()
    (repo.path / "became_link").symlink_to("keep.txt")
    new = workspace_fingerprint(repo.path).tree
    assert changed_paths(repo.path, old, new) == [
        "became_link",
        "dir/deep/new.txt",
        "exec.sh",
        "gone.txt",
        "mod.txt",
    ]
    assert changed_paths(repo.path, new, old) == changed_paths(repo.path, old, new)
    assert changed_paths(repo.path, old, old) == []
    assert changed_paths(repo.path, EMPTY_TREE, old) == sorted(
        repo.git("ls-tree", "-r", "--name-only", old).split()
    )


def test_changed_paths_unknown_tree_is_an_error(repo: GitRepo) -> None:
    with pytest.raises(RepositoryError, match="cannot compare"):
        changed_paths(repo.path, repo.head_tree(), "1" * 40)


def test_changed_paths_keeps_unusual_names(repo: GitRepo) -> None:
    old = repo.head_tree()
    for name in ("sp ace.txt", "ünï.txt", 'quo"te.txt', "new\nline.txt"):
        repo.write(name, "x\n")
    new = workspace_fingerprint(repo.path).tree
    assert changed_paths(repo.path, old, new) == sorted(
        ["sp ace.txt", "ünï.txt", 'quo"te.txt', "new\nline.txt"]
    )


# --------------------------------------------------------------------------- property


_NAMES = st.sampled_from(["a", "b", "c.txt", "D", "s p", "é", ".dot", "x.o", "build"])
_PATHS = st.lists(_NAMES, min_size=1, max_size=3).map("/".join)
_KIND = st.sampled_from(["file", "exec", "link"])
_SPEC = st.tuples(_KIND, st.binary(max_size=12))


def _consistent(tree: dict[str, tuple[str, bytes]]) -> dict[str, tuple[str, bytes]]:
    """Drop paths that would need to be both a file and a directory."""
    dirs = {"/".join(p.split("/")[:i]) for p in tree for i in range(1, p.count("/") + 1)}
    return {p: spec for p, spec in tree.items() if p not in dirs}


def _is_file(path: Path) -> bool:
    return path.is_symlink() or path.is_file()


def _materialise(root: Path, tree: dict[str, tuple[str, bytes]]) -> None:
    for rel, (kind, content) in tree.items():
        target = root / rel
        for parent in reversed(target.relative_to(root).parents):
            p = root / parent
            if p.is_symlink() or p.is_file():
                p.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        if kind == "link":
            target.symlink_to(content.hex() or "dangling")
        else:
            target.write_bytes(content)
            target.chmod(0o755 if kind == "exec" else 0o644)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    initial=st.dictionaries(_PATHS, _SPEC, max_size=6).map(_consistent),
    rounds=st.lists(
        st.tuples(
            st.dictionaries(_PATHS, _SPEC, max_size=4).map(_consistent),
            st.sets(st.integers(min_value=0, max_value=5), max_size=3),
            st.booleans(),
        ),
        min_size=1,
        max_size=2,
    ),
)
def test_random_trees_match_git_add_all(
    initial: dict[str, tuple[str, bytes]],
    rounds: list[tuple[dict[str, tuple[str, bytes]], set[int], bool]],
) -> None:
    """Random trees, then one or two rounds of edits (writes, deletions, optionally staging)."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = GitRepo.create(Path(tmp) / "r")
        repo.write(".gitignore", "*.o\nbuild/\n")
        _materialise(repo.path, initial)
        repo.commit("initial")
        assert workspace_fingerprint(repo.path).clean
        for edits, deletions, stage in rounds:
            existing = sorted(
                p for p in initial if (repo.path / p).is_symlink() or (repo.path / p).is_file()
            )
            for i in sorted(deletions):
                if i < len(existing):
                    (repo.path / existing[i]).unlink()
            _materialise(repo.path, edits)
            if stage:
                repo.git("add", "-A")
            before = snapshot(repo)
            fp = workspace_fingerprint(repo.path)
            assert fp.tree == truth_in_copy(repo.path)
            assert fp.clean == (fp.tree == repo.head_tree())
            assert snapshot(repo) == before
            assert private_files(repo) == set()


def test_kept_index_carries_no_untracked_cache_of_the_users_index(repo: GitRepo) -> None:
    """The user's index (which anyone who can write `.git/` can write) holds an untracked cache:
    listings of untracked files per directory, trusted while a directory's stat data matches.
    The private index is seeded from a copy of it; git runs there with the cache forced off, so
    it is dropped, never kept for reuse, and what `add -A` sees is always read from the disk.
    (`add -A` in git 2.39 does not consult the cache itself; this pins that nothing of it is
    carried into what gitaudit keeps, whatever a later git does with it.)"""
    repo.git("config", "core.untrackedCache", "true")
    repo.git("update-index", "--untracked-cache")
    repo.write("notes.txt", "untracked\n")
    repo.git("status", "--porcelain")  # writes the cache into the user's index
    assert b"UNTR" in (repo.path / ".git" / "index").read_bytes()
    (repo.path / "notes.txt").unlink()  # (a result with an untracked path is not kept anyway)
    repo.write("README.md", "edited\n")
    fp = workspace_fingerprint(repo.path)
    assert fp.tree == truth_in_copy(repo.path)
    kept = warm_files(repo)
    assert kept, "the result was kept for reuse"
    for warm in kept:
        assert b"UNTR" not in warm.read_bytes(), warm


@pytest.mark.parametrize("seen", ["kept", "first-contact"])
def test_a_file_a_checkout_would_not_write_is_refused(repo: GitRepo, seen: str) -> None:
    """`git add` converts what it hashes and loses information doing so (`$Id: anything$`
    hashes like `$Id$`, some CRLF line ends like none): a file whose bytes are neither its
    blob's nor what a checkout writes for that blob is refused, whether the fingerprint hashes
    it from a kept index or from nothing. Files as a checkout writes them are the tree."""
    repo.write(".gitattributes", "* text=auto\nid.py ident\n")
    repo.write("id.py", 'ID = "$Id$"\n')
    repo.write("mixed.sh", "a=1\nb=2\n")
    repo.commit("conversions")
    (repo.path / "id.py").unlink()
    repo.git("checkout", "--", "id.py")  # `$Id: <blob> $`, as a checkout writes it
    assert workspace_fingerprint(repo.path).clean
    for name, content in [("id.py", b'ID = "$Id: x"; evil = 1; _ = "$"\n'), ("mixed.sh", None)]:
        before = (repo.path / name).read_bytes()
        (repo.path / name).write_bytes(content or b"a=1\r\nb=2\n")
        if seen == "first-contact":
            shutil.rmtree(private_folder(repo.path / ".git"))
        with pytest.raises(RepositoryError, match=rf"holds other bytes .*: {name};"):
            workspace_fingerprint(repo.path)
        (repo.path / name).write_bytes(before)
        assert workspace_fingerprint(repo.path).clean


@pytest.mark.parametrize("extra", ["untracked", "force-added-ignored"])
def test_a_file_hashed_into_the_seed_is_compared_too(repo: GitRepo, extra: str) -> None:
    """With nothing kept, every file is hashed into the seed; when the user's index then has
    other paths than that `git add -A` from no index (an untracked file, a force-added ignored
    one), the seed is brought to them and git adds again. The files the first add hashed are
    compared with their blobs too, not only those the second changed."""
    repo.write(".gitattributes", "id.py ident\n")
    repo.write("id.py", 'ID = "$Id$"\n')
    if extra == "force-added-ignored":
        repo.write(".gitignore", "local.cfg\n")
        repo.write("local.cfg", "x = 1\n")
        repo.git("add", "-f", "local.cfg")
    repo.commit("ident")
    if extra == "untracked":
        repo.write("notes.txt", "hello\n")
    workspace_fingerprint(repo.path)
    (repo.path / "id.py").write_bytes(b'ID = "$Id: x"; evil = 1; _ = "$"\n')
    shutil.rmtree(private_folder(repo.path / ".git"))
    with pytest.raises(RepositoryError, match=r"holds other bytes .*: id.py;"):
        workspace_fingerprint(repo.path)
    (repo.path / "id.py").write_bytes(b'ID = "$Id$"\n')
    shutil.rmtree(private_folder(repo.path / ".git"))
    assert workspace_fingerprint(repo.path).tree == truth_in_copy(repo.path)


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        (("core.autocrlf", "true"), "core.autocrlf"),
        (("core.autocrlf", "1"), "core.autocrlf"),
        (("core.eol", "CRLF"), "core.eol"),
        (("core.attributesFile", "/dev/null"), "core.attributesfile"),
    ],
)
def test_conversions_of_the_repository_config_are_refused(
    repo: GitRepo, setting: tuple[str, str], named: str
) -> None:
    """The repository's config, which the work tree can write, may not make a checkout write
    other bytes than the blob (the user's global config may)."""
    repo.git("config", *setting)
    with pytest.raises(RepositoryError, match=rf"defines content conversions \({named}\)"):
        workspace_fingerprint(repo.path)
    repo.git("config", "--unset", setting[0])
    repo.git("config", "--global", *setting)
    assert workspace_fingerprint(repo.path).clean


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ("*.sh text eol=crlf\n", True),
        ("app.py ident\n", True),
        ("*.txt working-tree-encoding=UTF-16\n", True),
        ("[attr]mine ident\n", True),
        ("*.py\tfilter=lfs\n", True),
        ("*.png -text -diff\n*.c !eol\n", False),
        ("*.png binary\n*.md diff=markdown export-ignore\n", False),
    ],
)
def test_converting_info_attributes_are_refused(repo: GitRepo, text: str, refused: bool) -> None:
    """`.git/info/attributes` is not pinned by the tree: an attribute there that converts what
    git hashes or writes (or a macro the tree's `.gitattributes` could use) is refused;
    unsetting one, and attributes that convert nothing, are not."""
    repo.write(".git/info/attributes", text)
    if not refused:
        assert workspace_fingerprint(repo.path).clean
        return
    with pytest.raises(RepositoryError, match="sets attributes that convert files"):
        workspace_fingerprint(repo.path)
