"""Attacks through snapshots and rollback: the one command that writes the user's work tree."""

from __future__ import annotations

import os
from pathlib import Path

import pygit2

from gitaudit.ledger.objects import write_tree
from gitaudit.ledger.refs import SNAPSHOTS_PREFIX
from tests.adversarial.conftest import World
from tests.gitrepo import CliResult, audit


def _rollback(world: World, *args: str) -> CliResult:
    return audit(world.path, "rollback", *args, "--key", str(world.keys["ci"]))


def _snapshot(world: World, name: str) -> None:
    result = audit(world.path, "snapshot", name, "--key", str(world.keys["ci"]))
    assert result.code == 0, result.err


def test_attack_snapshots_forged_by_an_untrusted_key(world: World) -> None:
    """mallory plants refs/audit/snapshots/good holding his own files: rollback refuses it."""
    git = world.handle().git
    tree = write_tree(git, {"README.md": b"pwned\n"})
    oid = world.commit_object(git, tree, [], "snapshot: good\n", world.mallory)
    world.set_ref(f"{SNAPSHOTS_PREFIX}good", oid)
    result = _rollback(world, "good", "--force")
    assert result.code == 1 and "is not signed by a key this repository trusts" in result.err
    assert (world.path / "README.md").read_text() == "sample\n"


def test_attack_snapshots_rollback_never_writes_through_a_symlink(
    world: World, tmp_path: Path
) -> None:
    """data/ was a folder when snapshot; now it is a link to a folder outside the work tree:
    restoring data/x within --paths data/x must not write outside."""
    world.repo.write("data/x", "inside\n")
    world.repo.commit("data")
    _snapshot(world, "before")
    outside = tmp_path / "outside"
    outside.mkdir()
    (world.path / "data" / "x").unlink()
    (world.path / "data").rmdir()
    os.symlink(outside, world.path / "data")
    _snapshot(world, "now")
    result = _rollback(world, "before", "--paths", "data/x")
    assert result.code == 0, result.err
    assert "left alone: data/x ('data' is a link or not a folder)" in result.err
    assert list(outside.iterdir()) == []


def test_attack_snapshots_tree_names_the_git_folder(world: World) -> None:
    """A snapshot signed by ci (trusted) whose tree holds .GIT/hooks/pre-commit (git on a
    case-insensitive disk would run it): rollback never writes it."""
    git = world.handle().git
    r = world.repo  # libgit2 refuses such a name; git's plumbing writes it
    blob = r.git("hash-object", "-w", "--stdin", input=b"#!/bin/sh\n").strip()
    hooks = r.git("mktree", input=f"100755 blob {blob}\tpre-commit\n".encode()).strip()
    dot = r.git("mktree", input=f"040000 tree {hooks}\thooks\n".encode()).strip()
    readme = r.git("rev-parse", "HEAD:README.md").strip()
    listing = f"040000 tree {dot}\t.GIT\n100644 blob {readme}\tREADME.md\n"
    tree = pygit2.Oid(hex=r.git("mktree", input=listing.encode()).strip())
    oid = world.commit_object(git, tree, [], "snapshot: hooks\n", world.ci)
    world.set_ref(f"{SNAPSHOTS_PREFIX}hooks", oid)
    result = _rollback(world, "hooks", "--force")
    assert result.code == 1
    assert "holds '.GIT/hooks/pre-commit', a path a rollback never writes" in result.err
    assert not (world.path / ".GIT").exists()
    assert not (world.path / ".git" / "gitaudit" / "rollback.json").exists()
    assert isinstance(git.head.peel(pygit2.Commit), pygit2.Commit)
