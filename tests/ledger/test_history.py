"""The repository gitaudit reads (StoredHistory): the stored parents, whatever .git/ says."""

from __future__ import annotations

import pygit2
import pytest
from pygit2.enums import ObjectType

from gitaudit.errors import LedgerError
from gitaudit.git.repo import StoredHistory, open_repo
from gitaudit.ledger import chain
from tests.gitrepo import GitRepo


def _three(repo: GitRepo) -> list[str]:
    for i in range(2):
        repo.write("f.txt", f"{i}\n")
        repo.commit(f"c{i}")
    return repo.git("rev-list", "HEAD").split()  # newest first


def _commit(git: pygit2.Repository, oid: pygit2.Oid) -> pygit2.Commit:
    found = git[oid]
    assert isinstance(found, pygit2.Commit)
    return found


def test_grafts_and_shallow_are_ignored_replace_refs_too(repo: GitRepo) -> None:
    newest, middle, oldest = _three(repo)
    (repo.path / ".git" / "info").mkdir(exist_ok=True)
    (repo.path / ".git" / "info" / "grafts").write_text(f"{newest} {oldest}\n")
    (repo.path / ".git" / "shallow").write_text(f"{middle}\n")
    repo.git("replace", middle, oldest)
    raw = pygit2.Repository(str(repo.path))
    grafted = raw[pygit2.Oid(hex=newest)]
    assert isinstance(grafted, pygit2.Commit)
    assert grafted.parent_ids == [pygit2.Oid(hex=oldest)]  # what libgit2 does with grafts
    git = open_repo(repo.path).git
    assert isinstance(git, StoredHistory)
    new, mid, old = (pygit2.Oid(hex=h) for h in (newest, middle, oldest))
    assert _commit(git, new).parent_ids == [mid] and _commit(git, mid).parent_ids == [old]
    assert [c.id for c in chain.walk(git, new)] == [new, mid, old]
    assert git.descendant_of(new, mid) and git.merge_base(new, mid) == mid
    assert git.revparse_single(f"{newest}~1").id == mid
    assert _commit(git, mid).message == "c0\n"  # not the replacement's


def test_config_paths_refs_and_writes_are_the_real_repositorys(repo: GitRepo) -> None:
    repo.git("config", "audit.rootKey", "SHA256:x")
    handle = open_repo(repo.path)
    assert handle.config("audit.rootKey") == "SHA256:x"
    assert handle.git.path == str(handle.gitdir) + "/"
    assert handle.git.head.target == pygit2.Oid(hex=repo.git("rev-parse", "HEAD").strip())
    blob = handle.git.create_blob(b"written through the real object database\n")
    assert repo.git("cat-file", "-p", str(blob)) == "written through the real object database\n"
    handle.git.references.create("refs/heads/made", handle.git.head.target)
    assert repo.git("rev-parse", "made").strip() == str(handle.git.head.target)


def test_a_missing_parent_is_named_with_a_fix(repo: GitRepo) -> None:
    git = open_repo(repo.path).git
    head = git.head.target
    raw = git.odb.read(head)[1]
    orphan_parent = "1" * 40
    lines = raw.split(b"\n")
    lines.insert(1, f"parent {orphan_parent}".encode())
    child = git.odb.write(ObjectType.COMMIT, b"\n".join(lines))
    with pytest.raises(LedgerError, match="is missing from the repository") as caught:
        list(chain.walk(git, child, what="refs/audit/runs/default"))
    assert "git fetch --unshallow" in (caught.value.hint or "")
