"""Snapshots and rollback (docs/snapshots.md), against real work trees."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gitaudit.git import restore
from tests.gitrepo import GitRepo, audit


@pytest.fixture
def keyed(repo: GitRepo) -> GitRepo:
    assert audit(repo.path, "keys", "generate").code == 0
    repo.write(".gitignore", "build/\n")
    repo.write("src/a.py", "a = 1\n")
    repo.write("tool.sh", "#!/bin/sh\n", mode=0o755)
    os.symlink("src/a.py", repo.path / "link")
    repo.commit("files")
    repo.write("notes.txt", "untracked but kept\n")
    return repo


def ok(repo: GitRepo, *args: str, cwd: Path | None = None) -> str:
    result = audit(cwd or repo.path, *args)
    assert result.code == 0, result.out + result.err
    return result.out + result.err


def test_snapshot_is_the_fingerprint_tree_and_rollback_restores_it(keyed: GitRepo) -> None:
    out = ok(keyed, "snapshot", "before")
    tree = keyed.git("rev-parse", "refs/audit/snapshots/before^{tree}").strip()
    assert f"(tree {tree[:12]})" in out
    assert keyed.git("verify-commit", "refs/audit/snapshots/before", check=False) is not None
    # damage: edit, delete, add, change a mode, retarget a link, add an ignored file
    keyed.write("src/a.py", "a = 2\n")
    (keyed.path / "notes.txt").unlink()
    keyed.write("src/new/added.py", "x\n")
    os.chmod(keyed.path / "tool.sh", 0o644)
    (keyed.path / "link").unlink()
    os.symlink("tool.sh", keyed.path / "link")
    keyed.write("build/out.bin", "ignored\n")
    ok(keyed, "snapshot", "after")  # so the damage is saved too
    out = ok(keyed, "rollback", "before")
    assert "rolled back to before" in out and "undo with `git audit rollback pre-rollback`" in out
    assert (keyed.path / "src/a.py").read_text() == "a = 1\n"
    assert (keyed.path / "notes.txt").read_text() == "untracked but kept\n"
    assert not (keyed.path / "src/new").exists()
    assert os.stat(keyed.path / "tool.sh").st_mode & 0o111
    assert os.readlink(keyed.path / "link") == "src/a.py"
    assert (keyed.path / "build/out.bin").read_text() == "ignored\n"  # never touched
    assert keyed.git("status", "--porcelain").strip() == "?? notes.txt"
    listed = audit(keyed.path, "snapshots", "--json").json()["snapshots"]
    assert [s["name"] for s in listed] == ["after", "before", "pre-rollback"]


def test_rollback_refuses_unsaved_changes_unless_forced(keyed: GitRepo) -> None:
    ok(keyed, "snapshot", "before")
    keyed.write("src/a.py", "precious work\n")
    result = audit(keyed.path, "rollback", "before")
    assert result.code == 1 and result.err.count("error:") == 1
    assert "would destroy 1 change(s) that no snapshot holds: src/a.py" in result.err
    assert (keyed.path / "src/a.py").read_text() == "precious work\n"
    ok(keyed, "rollback", "before", "--force")
    assert (keyed.path / "src/a.py").read_text() == "a = 1\n"
    ok(keyed, "rollback", "pre-rollback")  # the forced rollback is undone
    assert (keyed.path / "src/a.py").read_text() == "precious work\n"


def test_rollback_within_paths_only(keyed: GitRepo) -> None:
    ok(keyed, "snapshot", "before")
    keyed.write("src/a.py", "a = 3\n")
    keyed.write("src/b.py", "b\n")
    keyed.write("other.txt", "o\n")
    ok(keyed, "snapshot", "work")
    ok(keyed, "rollback", "before", "--paths", "a.py", cwd=keyed.path / "src")
    assert (keyed.path / "src/a.py").read_text() == "a = 1\n"
    assert (keyed.path / "src/b.py").exists() and (keyed.path / "other.txt").exists()


def test_bad_names_and_unknown_snapshots_are_one_line_errors(keyed: GitRepo) -> None:
    for name in ("../x", "a b", "x.lock", "x/y"):
        result = audit(keyed.path, "snapshot", name)
        assert result.code == 2 and "is not a safe snapshot name" in result.err, name
    result = audit(keyed.path, "rollback", "nope")
    assert result.code == 1 and "there is no snapshot named 'nope'" in result.err


def test_an_interrupted_rollback_can_be_continued_or_aborted(
    keyed: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok(keyed, "snapshot", "before")
    for n in range(6):
        keyed.write(f"many/{n}.txt", f"{n}\n")
    keyed.write("src/a.py", "changed\n")
    ok(keyed, "snapshot", "work")
    real = restore.apply
    done: list[str] = []

    def stop_halfway(*args: object, **kw: object) -> restore.Applied:
        def progress(change: restore.Change) -> None:
            done.append(change.path)
            if len(done) == 3:
                raise KeyboardInterrupt

        return real(*args[:5], progress=progress)  # type: ignore[arg-type,misc]

    monkeypatch.setattr(restore, "apply", stop_halfway)
    assert audit(keyed.path, "rollback", "before").code != 0  # interrupted
    monkeypatch.setattr(restore, "apply", real)
    assert len(done) == 3
    pending = audit(keyed.path, "rollback", "before")
    assert pending.code == 1 and "was interrupted" in pending.err
    ok(keyed, "rollback", "--abort")
    assert (keyed.path / "src/a.py").read_text() == "changed\n"
    assert all((keyed.path / f"many/{n}.txt").exists() for n in range(6))
    # and once more, continued this time
    monkeypatch.setattr(restore, "apply", stop_halfway)
    done.clear()
    assert audit(keyed.path, "rollback", "before").code != 0
    monkeypatch.setattr(restore, "apply", real)
    ok(keyed, "rollback", "--continue")
    assert (keyed.path / "src/a.py").read_text() == "a = 1\n" and not (keyed.path / "many").exists()


def test_run_snapshot_takes_one_first(keyed: GitRepo) -> None:
    keyed.write_plan(
        {
            "task": "t",
            "requirements": [{"id": "R", "description": "r"}],
            "steps": [{"id": "s", "covers": ["R"], "verify": [{"type": "run", "argv": ["true"]}]}],
        }
    )
    keyed.commit("plan")
    for args in (["trust", "init"], ["plan", "seal"]):
        ok(keyed, *args)
    out = ok(keyed, "run", "--snapshot")
    assert "snapshot pre-run:" in out
    assert keyed.git("rev-parse", "refs/audit/snapshots/pre-run^{tree}").strip()


def test_a_snapshot_chains_only_onto_a_snapshot(keyed: GitRepo) -> None:
    """The ref of a name holding anything but a snapshot (here HEAD, a plain commit) is not
    built on: the new snapshot is a root, and the user is told what the ref held."""
    head = keyed.git("rev-parse", "HEAD").strip()
    keyed.git("update-ref", "refs/audit/snapshots/s", head)
    out = ok(keyed, "snapshot", "s")
    assert f"refs/audit/snapshots/s held {head[:12]}, which is no snapshot" in out
    assert keyed.git("rev-list", "--count", "refs/audit/snapshots/s").strip() == "1"
    again = ok(keyed, "snapshot", "s")
    assert "no snapshot" not in again
    assert keyed.git("rev-list", "--count", "refs/audit/snapshots/s").strip() == "2"


def test_a_commit_signed_as_a_git_commit_is_no_snapshot(keyed: GitRepo) -> None:
    """A commit signed by the user's key for `git` (a ledger commit, or a snapshot taken before
    snapshots had their own namespace) is not rolled back to; the hint says how to by hand."""
    ok(keyed, "trust", "init")  # a plans commit the user signed
    keyed.git("update-ref", "refs/audit/snapshots/old", "refs/audit/plans")
    result = audit(keyed.path, "rollback", "old", "--force")
    assert result.code == 1
    assert "snapshot 'old'" in result.err and "expected 'gitaudit-snapshot'" in result.err
    assert "git restore --source=" in result.err


def test_a_smudge_filter_applies_from_the_global_config_only(
    keyed: GitRepo, tmp_path: Path
) -> None:
    """The user's own filter drivers (global config) check the snapshot's files out; one the
    repository's config defines (anything in the work tree can write it) is refused."""
    keyed.write(".gitattributes", "notes.txt filter=mark\n")
    ok(keyed, "snapshot", "before")
    (keyed.path / "notes.txt").unlink()
    marker = tmp_path / "smudged"
    program = f"sh -c 'touch {marker}; cat'"
    keyed.git("config", "filter.mark.smudge", program)
    refused = audit(keyed.path, "rollback", "before")
    assert refused.code == 1 and "defines filter.mark.smudge" in refused.err
    assert not marker.exists()
    keyed.git("config", "--unset", "filter.mark.smudge")
    user = tmp_path / "gitconfig"
    user.write_text(f'[filter "mark"]\n\tsmudge = "{program}"\n')
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GIT_CONFIG_GLOBAL", str(user))
        ok(keyed, "rollback", "before")
    assert marker.exists()
    assert (keyed.path / "notes.txt").read_text() == "untracked but kept\n"


def test_a_staged_file_is_read_without_following_links(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "key").write_text("secret\n")
    stage = tmp_path / "stage"
    (stage / "plain").mkdir(parents=True)
    (stage / "plain" / "key").write_text("staged\n")
    os.symlink(outside, stage / "folder")
    os.symlink(outside / "key", stage / "plain" / "link")
    fd = os.open(stage, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with restore._staged(fd, "plain/key") as staged:
            assert staged is not None and os.read(staged, 100) == b"staged\n"
        for path in ("folder/key", "plain/link", "plain", "missing/key"):
            with restore._staged(fd, path) as staged:
                assert staged is None, path
    finally:
        os.close(fd)
