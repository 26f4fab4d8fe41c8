"""The work-tree fingerprint end to end: ``git audit run`` and ``git audit status`` as processes,
in a repository whose own index carries git's untracked cache.

At the unit level: ``tests/test_fingerprint.py``.
"""

from __future__ import annotations

from pathlib import Path

from gitaudit.git.fingerprint import private_folder
from gitaudit.git.index_files import WARM_PREFIX
from tests.e2e.conftest import PLAN
from tests.gitrepo import GitRepo, audit


def _kept(repo: GitRepo) -> list[Path]:
    return sorted(private_folder(repo.path / ".git").glob(WARM_PREFIX + "*.index"))


def test_an_untracked_cache_in_the_users_index_is_neither_kept_nor_believed(
    repo: GitRepo,
) -> None:
    """The user's index (anyone who can write `.git/` can write it) lists, per directory, the
    untracked files git saw last. gitaudit copies that index to start from, runs git with the
    cache forced off, and keeps no trace of it in the indexes it reuses; a file added after the
    cache was written is in the judged tree."""
    repo.write("greeting.txt", "hello world\n")
    repo.write("src/app.py", "print('hi')\n")
    repo.write_plan(PLAN)
    repo.commit("greeter with a plan")
    for args in (["init"], ["plan", "seal", "-m", "initial"]):
        assert audit(repo.path, *args).code == 0, args
    repo.git("config", "core.untrackedCache", "true")
    repo.git("update-index", "--untracked-cache")
    repo.git("status", "--porcelain")  # writes the cache (src/: nothing untracked)
    index = repo.path / ".git" / "index"
    assert b"UNTR" in index.read_bytes()
    # an edit of a tracked file: the fingerprint's git rewrites the copy, which is then kept
    repo.write("greeting.txt", "hello there\n")

    ran = audit(repo.path, "run", process=True)
    assert ran.code == 0, ran.err
    assert audit(repo.path, "status", process=True).code == 0
    kept = _kept(repo)
    assert kept, "the fingerprint's index was kept for reuse"
    for warm in kept:
        assert b"UNTR" not in warm.read_bytes(), warm
    assert b"UNTR" in index.read_bytes()  # the user's index is left as it was

    repo.write("src/new.py", "raise SystemExit(1)\n")  # untracked, in a cached directory
    status = audit(repo.path, "status", "--json", process=True)
    assert status.code == 3 and status.json()["verdict"] == "UNKNOWN", status.out
    for warm in _kept(repo):
        assert b"UNTR" not in warm.read_bytes(), warm
