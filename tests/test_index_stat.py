"""Reading the stat data of a git index (gitaudit/git/index_stat.py) from indexes real git wrote:
what it reads equals what ``lstat`` finds for every file and link, and it declines (None) every
index it cannot read whole."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from gitaudit.git import index_stat
from tests.gitrepo import GitRepo


def walked(root: Path) -> dict[str, index_stat.Stamp]:
    """What ``lstat`` finds for every file and link under *root*, ``.git`` aside."""
    found: dict[str, index_stat.Stamp] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            path = os.path.join(folder, name)
            found[path] = index_stat.stamp_of(os.lstat(path))
    return found


def read(repo: GitRepo, oid_size: int = 20) -> dict[str, index_stat.Stamp] | None:
    data = (repo.path / ".git" / "index").read_bytes()
    return index_stat.file_stamps(data, oid_size, str(repo.path) + os.sep)


def populated(repo: GitRepo) -> GitRepo:
    repo.write("a.txt", "a\n")
    repo.write("deep/er/b.txt", "b\n")
    repo.write("bin/tool", "#!/bin/sh\n", mode=0o755)
    repo.write("ünïcode/名前.txt", "名前\n")
    os.symlink("a.txt", repo.path / "link")
    os.symlink("deep", repo.path / "dirlink")
    repo.commit("files")
    return repo


def test_every_file_and_link_is_read_as_lstat_finds_it(repo: GitRepo) -> None:
    populated(repo)
    found = read(repo)
    assert found is not None
    assert found == walked(repo.path)
    assert str(repo.path / "ünïcode/名前.txt") in found and str(repo.path / "dirlink") in found


def test_a_sha256_repository_is_read(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "sha256")
    repo.path.mkdir()
    repo.git("init", "-q", "--object-format=sha256")
    populated(repo)
    assert read(repo, 32) == walked(repo.path)
    assert read(repo, 20) is None  # read with the wrong id size, it does not end where it must


def test_version_3_entries_and_names_of_4095_bytes_or_more_are_read(repo: GitRepo) -> None:
    """An intent-to-add entry makes git write version 3 (extended flags, two more bytes); a
    name of 0xFFF bytes or more is not in the flags, and is read up to its NUL."""
    populated(repo)
    repo.write("later.txt", "later\n")
    repo.git("add", "-N", "later.txt")
    blob = repo.git("hash-object", "-w", "a.txt").strip()
    long_name = "/".join(["x" * 200] * 21)  # 4220 bytes, no file of that name
    repo.git("update-index", "--add", "--cacheinfo", f"100644,{blob},{long_name}")
    data = (repo.path / ".git" / "index").read_bytes()
    assert int.from_bytes(data[4:8], "big") == 3
    found = index_stat.file_stamps(data, 20, "")
    assert found is not None
    # git keeps no stat data for these: one without a file, one only intended to be added
    assert found[long_name] == found["later.txt"] == (0, 0, 0)
    assert {k: v for k, v in found.items() if k not in (long_name, "later.txt")} == {
        os.path.relpath(p, repo.path): s
        for p, s in walked(repo.path).items()
        if p != str(repo.path / "later.txt")
    }


def test_gitlinks_are_not_files(repo: GitRepo) -> None:
    populated(repo)
    commit = repo.git("rev-parse", "HEAD").strip()
    repo.git("update-index", "--add", "--cacheinfo", f"160000,{commit},sub")
    found = read(repo)
    assert found is not None and str(repo.path / "sub") not in found
    assert found == walked(repo.path)


@pytest.mark.parametrize("how", ["version-4", "split-index"])
def test_indexes_it_cannot_read_whole_are_declined(repo: GitRepo, how: str) -> None:
    populated(repo)
    if how == "version-4":
        repo.git("update-index", "--index-version", "4")
    else:
        repo.git("update-index", "--split-index")
        data = (repo.path / ".git" / "index").read_bytes()
        assert b"link" in data  # the entries are in the shared index
    assert read(repo) is None


def test_damaged_indexes_are_declined(repo: GitRepo) -> None:
    populated(repo)
    data = (repo.path / ".git" / "index").read_bytes()
    assert index_stat.file_stamps(data, 20) is not None
    count = int.from_bytes(data[8:12], "big")
    damaged = {
        "not an index": b"JUNK" + data[4:],
        "truncated": data[: len(data) // 2],
        "one entry more": data[:8] + (count + 1).to_bytes(4, "big") + data[12:],
        "one entry fewer": data[:8] + (count - 1).to_bytes(4, "big") + data[12:],
        "empty": b"",
        "header only": data[:12],
    }
    for why, bad in damaged.items():
        assert index_stat.file_stamps(bad, 20) is None, why


def test_an_index_without_sub_second_times_is_declined(repo: GitRepo) -> None:
    """A git built without nanoseconds keeps none: compared with ``lstat``, every file would
    look rewritten, so such an index is not read (entries added without a file stand in)."""
    repo.git("read-tree", "--empty")
    blob = repo.git("hash-object", "-w", "--stdin", input=b"x\n").strip()
    for name in ("a", "b"):
        repo.git("update-index", "--add", "--cacheinfo", f"100644,{blob},{name}")
    assert read(repo) is None
    repo.git("update-index", "--force-remove", "a", "b")
    data = (repo.path / ".git" / "index").read_bytes()
    assert index_stat.file_stamps(data, 20) == {}  # nothing to compare: an empty reading


def test_stamps_cut_to_what_the_index_keeps() -> None:
    class Stat:
        st_ino = (7 << 32) | 5
        st_ctime_ns = ((3 << 32) + 11) * 1_000_000_000 + 42

    assert index_stat.stamp_of(Stat()) == (5, 11, 42)  # type: ignore[arg-type]


def test_the_reading_is_of_the_bytes_given(repo: GitRepo) -> None:
    """The caller reads the index once and digests those very bytes."""
    populated(repo)
    data = (repo.path / ".git" / "index").read_bytes()
    before = hashlib.sha256(data).digest()
    index_stat.file_stamps(data, 20)
    assert hashlib.sha256(data).digest() == before
