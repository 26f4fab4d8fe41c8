"""Hashing a work tree in parts (:mod:`gitaudit.git.parts`): the joined index makes the tree one
``git add -A`` makes, whatever the names, ignore rules and untracked files around the cuts; and
a join git would read differently is refused, so the fingerprint hashes in one process instead.

The oracle is git itself (``git add -A && git write-tree`` in a copy); every test also checks
that the parts were really joined, so a split that always fell back would fail here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gitaudit.git import fingerprint, index_files, parts
from gitaudit.git.fingerprint import private_folder, workspace_fingerprint
from gitaudit.git.index_files import WARM_PREFIX
from tests.gitrepo import GitRepo, git
from tests.test_fingerprint import truth_in_copy


class Joins:
    """How many times the fingerprint hashed in parts, and how many it asked for."""

    def __init__(self) -> None:
        self.joined = 0
        self.declined = 0


@pytest.fixture
def split(monkeypatch: pytest.MonkeyPatch) -> Joins:
    """Every fingerprint from no kept index is hashed in 3 parts, however small the tree."""
    monkeypatch.setattr(parts, "ENTRIES_PER_PART", 1)
    monkeypatch.setattr(fingerprint, "_cores", lambda: 3)
    seen = Joins()
    original = fingerprint._add_in_parts

    def counted(*args: object, **kwargs: object) -> object:
        result = original(*args, **kwargs)  # type: ignore[arg-type]
        if result is None:
            seen.declined += 1
        else:
            seen.joined += 1
        return result

    monkeypatch.setattr(fingerprint, "_add_in_parts", counted)
    return seen


def forget_kept(repo: GitRepo) -> None:
    shutil.rmtree(private_folder(repo.path / ".git"), ignore_errors=True)


TRICKY = [
    "a-b/x",
    "a.txt",
    "a/b/c",
    "a/b/d e",
    "a/b0",
    "a0",
    "b b/c",
    "caf\u00e9/\u00fc",
    "x[1]/y",
    "y*z",
    "q?",
    ".hidden/f",
    "m/n/o/p/q",
    "m/n-o",
    "m/n.o",
    "m0/z",
]


def tricky_repo(root: Path) -> GitRepo:
    """Names that sort around ``/``, glob characters, spaces, non-ASCII, hidden folders; an
    ignored folder and ignored files beside the cuts; untracked files and folders; a link and
    an executable."""
    repo = GitRepo.create(root)
    for n, name in enumerate(TRICKY):
        repo.write(name, f"{n}\n")
    repo.write(".gitignore", "build/\n*.log\n")
    repo.write("build/out", "ignored\n")
    repo.write("a/b/x.log", "ignored\n")
    repo.write("tool", "#!/bin/sh\n", mode=0o755)
    os.symlink("a.txt", repo.path / "link")
    repo.commit("tracked")
    for name in ("new/f", "a/b/new", "zz", "m/n/untracked", "a-c"):
        repo.write(name, "untracked\n")
    repo.write("m/n/o/edited", "not committed\n")
    (repo.path / "a.txt").write_text("edited\n")
    return repo


@pytest.mark.parametrize("cores", [2, 3, 5])
def test_parts_make_the_tree_one_add_makes(
    tmp_path: Path, split: Joins, monkeypatch: pytest.MonkeyPatch, cores: int
) -> None:
    monkeypatch.setattr(fingerprint, "_cores", lambda: cores)
    repo = tricky_repo(tmp_path / "repo")
    expected = truth_in_copy(repo.path)
    assert workspace_fingerprint(repo.path).tree == expected
    assert split.joined == 1, "the work tree was not hashed in parts"
    # and the kept index it left serves the next call, in the kept index's version
    (repo.path / "m" / "n" / "o" / "p" / "q").write_text("changed\n")
    assert workspace_fingerprint(repo.path).tree == truth_in_copy(repo.path)
    kept = [p for p in private_folder(repo.path / ".git").glob(f"{WARM_PREFIX}*.index")]
    assert kept and index_files.header(kept[0])[0] == 4


def test_a_cut_inside_a_large_folder_moves_to_its_boundary(tmp_path: Path, split: Joins) -> None:
    repo = GitRepo.create(tmp_path / "repo")
    for n in range(parts.MAX_EXCLUSIONS * 3):
        repo.write(f"flat/f{n:04d}", f"{n}\n")
    repo.write("after/x", "x\n")
    repo.write("before", "b\n")
    repo.commit("flat")
    repo.write("flat/untracked", "u\n")
    assert workspace_fingerprint(repo.path).tree == truth_in_copy(repo.path)
    assert split.joined == 1


def test_sha256_repository(tmp_path: Path, split: Joins) -> None:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "--object-format=sha256")
    repo = GitRepo(path)
    for name in TRICKY:
        repo.write(name, name + "\n")
    repo.commit("tracked")
    repo.write("m/untracked", "u\n")
    tree = workspace_fingerprint(repo.path).tree
    assert len(tree) == 64 and tree == truth_in_copy(repo.path)
    assert split.joined == 1


def test_a_submodule_beside_a_name_that_sorts_before_its_folder(
    tmp_path: Path, split: Joins
) -> None:
    """A submodule is one entry, ``sub``, which sorts before ``sub-x``; its folder would sort
    after: whatever the cut makes of it, the tree is git's."""
    inner = GitRepo.create(tmp_path / "inner")
    inner.write("f", "inner\n")
    inner.commit("inner")
    repo = GitRepo.create(tmp_path / "repo")
    for name in ("a", "sub-x/y", "sub.txt", "sub0", "z/z"):
        repo.write(name, name + "\n")
    repo.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner.path), "sub")
    repo.commit("with a submodule")
    forget_kept(repo)
    assert workspace_fingerprint(repo.path).tree == truth_in_copy(repo.path)
    assert split.joined + split.declined == 1


def ls_files(repo: GitRepo, index: Path) -> bytes:
    return subprocess.run(
        ["git", "ls-files", "-z"],
        cwd=repo.path,
        env={**os.environ, "GIT_INDEX_FILE": str(index)},
        capture_output=True,
        check=True,
    ).stdout


def part_indexes(repo: GitRepo, specs: list[bytes], folder: Path) -> tuple[list[str], list[bytes]]:
    """Index files git writes for *specs* (one ``add -A`` each, as the parts are), and the
    reports' last paths."""
    files, lasts = [], []
    for k, spec in enumerate(specs):
        index = folder / f"part{k}.index"
        proc = subprocess.run(
            ["git", *parts.PART_CONFIG, "add", "-A", "--verbose", "--pathspec-from-file=-"],
            cwd=repo.path,
            input=spec,
            env={**os.environ, "GIT_INDEX_FILE": str(index), "LC_ALL": "C"},
            capture_output=True,
            check=True,
        )
        files.append(str(index))
        lasts.append(parts.ends(proc.stdout)[1])
    return files, lasts


def test_a_join_out_of_order_is_refused(tmp_path: Path) -> None:
    repo = GitRepo.create(tmp_path / "repo")
    for name in ("a/1", "a/2", "b/1", "b/2"):
        repo.write(name, name + "\n")
    files, lasts = part_indexes(repo, [b"b\n", b"a\n"], tmp_path)  # the wrong way round
    joined = tmp_path / "joined.index"
    counts = parts.join(files, str(joined), lasts)
    assert counts == [2, 2]
    firsts = [b"b/1", b"a/1"]
    assert not parts.in_order(ls_files(repo, joined), counts, firsts, lasts)
    # the right way round, the same check holds, and git reads every name back
    right = tmp_path / "right.index"
    (tmp_path / "r").mkdir()
    files, lasts = part_indexes(repo, [b"a\n", b"b\n"], tmp_path / "r")
    counts = parts.join(files, str(right), lasts)
    assert counts == [2, 2]
    listing = ls_files(repo, right)
    assert listing.split(b"\0")[:-1] == [b"a/1", b"a/2", b"b/1", b"b/2"]
    assert parts.in_order(listing, counts, [b"a/1", b"b/1"], lasts)


def test_the_join_takes_the_oldest_time_and_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    repo = GitRepo.create(tmp_path / "repo")
    for name in ("a/1", "b/1"):
        repo.write(name, name + "\n")
    files, lasts = part_indexes(repo, [b"a\n", b"b\n"], tmp_path)
    os.utime(files[1], ns=(1_000_000_000, 1_000_000_000))
    joined = tmp_path / "joined.index"
    assert parts.join(files, str(joined), lasts) == [1, 1]
    assert joined.stat().st_mtime_ns == 1_000_000_000
    # an index without the extension that says where its entries end (git's default)
    plain = tmp_path / "plain.index"
    subprocess.run(
        ["git", "add", "-A"],
        cwd=repo.path,
        env={**os.environ, "GIT_INDEX_FILE": str(plain)},
        check=True,
    )
    assert parts.join([files[0], str(plain)], str(tmp_path / "no.index"), lasts) is None
    assert not (tmp_path / "no.index").exists()


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x00"),
        (16511, b"\xff\x7f"),
        (16512, b"\x80\x80\x00"),
    ],
)
def test_prefix_lengths_are_written_as_git_writes_them(value: int, encoded: bytes) -> None:
    assert parts._varint(value) == encoded


def test_names_git_would_read_as_magic_or_globs(tmp_path: Path, split: Joins) -> None:
    repo = GitRepo.create(tmp_path / "repo")
    names = ["!bang/x", "-dash/x", "back\\slash", "]close", "^caret", ":(top)x", "a", "m/*", "z"]
    for name in names:
        repo.write(name, name + "\n")
    repo.commit("odd names")
    repo.write("m/?", "untracked, a glob matching m/*\n")
    assert workspace_fingerprint(repo.path).tree == truth_in_copy(repo.path)
    assert split.joined == 1


@pytest.mark.parametrize(
    ("code", "messages", "accepted"),
    [
        (0, b"", True),
        (1, parts._IGNORED + b"build\n", True),  # excluded, and ignored
        (1, parts._IGNORED + b"a\n", True),  # a folder above an excluded path
        (1, parts._IGNORED + b"other\n", False),  # not one the part excluded
        (1, parts._IGNORED + b"build/x\n", False),  # inside one: not how git lists them
        (1, b"error: something else\n", False),
        (128, b"fatal: adding files failed\n", False),
    ],
)
def test_a_part_succeeded_when_git_only_listed_excluded_ignored_paths(
    code: int, messages: bytes, accepted: bool
) -> None:
    spec = b":(exclude,literal)build\0:(exclude,literal)a/b/c\0"
    assert parts.succeeded(code, messages, spec) is accepted


def test_a_file_created_while_the_parts_run_is_hashed_once(
    tmp_path: Path, split: Joins, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A path no cut knew of (here at the top, above every cut) is in every part: the join
    sees it more than once and is refused, and the work tree is hashed again in one process,
    with the file."""
    repo = tricky_repo(tmp_path / "repo")
    original = parts.exclusions

    def then_create(*args: object) -> object:
        specs = original(*args)  # type: ignore[arg-type]
        (repo.path / "late").write_text("created after the cuts\n")
        return specs

    monkeypatch.setattr(parts, "exclusions", then_create)
    assert workspace_fingerprint(repo.path).tree == truth_in_copy(repo.path)
    assert split.declined == 1 and split.joined == 0


def test_a_folder_above_a_cut_turned_into_a_link_out_of_the_tree(
    tmp_path: Path, split: Joins
) -> None:
    repo = tricky_repo(tmp_path / "repo")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("not in the tree\n")
    shutil.rmtree(repo.path / "m")
    os.symlink(outside, repo.path / "m")
    assert workspace_fingerprint(repo.path).tree == truth_in_copy(repo.path)
    assert split.joined + split.declined == 1


def test_a_part_git_fails_leaves_the_work_to_one_process(
    tmp_path: Path, split: Joins, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tricky_repo(tmp_path / "repo")
    monkeypatch.setattr(parts, "PART_CONFIG", ("-c", "index.version=99"))  # git refuses it
    assert workspace_fingerprint(repo.path).tree == truth_in_copy(repo.path)
    assert split.declined == 1 and split.joined == 0
    assert not [p for p in private_folder(repo.path / ".git").iterdir() if "part" in p.name]
