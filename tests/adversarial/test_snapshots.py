"""Attacks through snapshots and rollback: the one command that writes the user's work tree,
and the one that signs whatever the work tree holds, onto whatever its ref points at."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pygit2
import pytest

from gitaudit.crypto.commits import SNAPSHOT_NAMESPACE
from gitaudit.crypto.signers import Signer
from gitaudit.ledger import watermark
from gitaudit.ledger.objects import dumps, write_tree
from gitaudit.ledger.refs import PLANS_REF, SNAPSHOTS_PREFIX, runs_ref
from gitaudit.ledger.seals import trust_add
from tests.adversarial.conftest import (
    World,
    assert_plans_level,
    check,
    only,
    plan,
    step,
)
from tests.gitrepo import CliResult, audit, forget_marks, git


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
    oid = world.commit_object(
        git,
        tree,
        [],
        "snapshot: hooks\n\nAudit-Snapshot: hooks\n",
        world.ci,
        namespace=SNAPSHOT_NAMESPACE,
    )
    world.set_ref(f"{SNAPSHOTS_PREFIX}hooks", oid)
    result = _rollback(world, "hooks", "--force")
    assert result.code == 1
    assert "holds '.GIT/hooks/pre-commit', a path a rollback never writes" in result.err
    assert not (world.path / ".GIT").exists()
    assert not (world.path / ".git" / "gitaudit" / "rollback.json").exists()
    assert isinstance(git.head.peel(pygit2.Commit), pygit2.Commit)


@pytest.mark.parametrize(
    "journal",
    ["written by the agent", "put back after a rollback", "beside a snapshot of its own"],
)
@pytest.mark.parametrize("finish", ["--continue", "--abort"])
def test_attack_snapshots_rollback_journal_planted_over_unsaved_work(
    world: World, journal: str, finish: str
) -> None:
    """The user took snapshot ``old`` (README.md = old), then wrote README.md again, a change
    no snapshot holds. The agent writes ``.git/gitaudit/rollback.json`` naming ``old`` (and as
    the ``pre-rollback`` snapshot, ``old`` too), or puts back the journal of an earlier
    rollback of the user's. The user's next rollback says one was interrupted, and
    `rollback --continue` (or `--abort`) rolled the work tree back without a look at what it
    destroyed and without a snapshot of it: the change was lost (both, before the fix). Going
    on with a journal now refuses, as a rollback does, to destroy changes no snapshot holds;
    a commit the agent puts on a snapshot ref holding the change (unsigned: it can delete it
    again afterwards) holds nothing: only a snapshot a trusted key signed does."""
    alice = ["--key", str(world.keys["alice"])]
    world.repo.write("README.md", "old\n")
    assert audit(world.path, "snapshot", "old", *alice).code == 0
    target = world.ref(f"{SNAPSHOTS_PREFIX}old")
    undo = target
    if journal == "put back after a rollback":
        world.repo.write("README.md", "between\n")
        assert audit(world.path, "snapshot", "between", *alice).code == 0
        assert audit(world.path, "rollback", "old", *alice).code == 0
        undo = world.ref(f"{SNAPSHOTS_PREFIX}pre-rollback")
        if finish == "--abort":  # the earlier pre-rollback held "between": roll onto old
            undo = target
    assert target is not None and undo is not None
    world.repo.write("README.md", "precious unsaved work\n")
    if journal == "beside a snapshot of its own":
        git_ = world.handle().git
        tree = write_tree(git_, {"README.md": b"precious unsaved work\n"})
        decoy = world.commit_object(git_, tree, [], "snapshot: decoy\n", None)
        world.set_ref(f"{SNAPSHOTS_PREFIX}decoy", decoy)
    planted = {
        "format": "gitaudit.rollback/1",
        "snapshot": "old",
        "target": target,
        "tree": world.repo.git("rev-parse", f"{target}^{{tree}}").strip(),
        "scope": ["**"],
        "undo": undo,
        "undo_tree": world.repo.git("rev-parse", f"{undo}^{{tree}}").strip(),
        "started": 0,
    }
    (world.handle().state_dir / "rollback.json").write_text(json.dumps(planted))
    told = audit(world.path, "rollback", "old", *alice)
    assert told.code == 1 and "a rollback to 'old' was interrupted" in told.err, told.err
    done = audit(world.path, "rollback", finish, *alice)
    assert done.code == 1, done.out + done.err
    name = "pre-rollback" if finish == "--abort" else "old"
    assert (
        f"error: rolling back to {name!r} would destroy 1 change(s) that no snapshot holds: "
        "README.md"
    ) in done.err
    assert (world.path / "README.md").read_text() == "precious unsaved work\n"


# ------------------------------------------------------- the snapshot as a signing oracle
#
# The user signs a snapshot whenever they ask for one; its tree is the agent's work tree and
# (before the fix) its parent whatever refs/audit/snapshots/NAME held, which the agent can point
# at refs/audit/plans or refs/audit/runs/PLAN. The signature, for the namespace "git" like every
# ledger commit, made the snapshot a fast-forward plans commit (or run) of the agent's design.

RUNS = runs_ref("default")
GOOD = plan(step("unit", check("grep", "-qx", "good", "app.txt")), step("lint"))


@pytest.fixture
def broken(world: World) -> World:
    """GOOD sealed by alice and proven by ci on app.txt = good; then the agent commits
    app.txt = bad, which fails `unit` (no evidence for it)."""
    world.repo.write("app.txt", "good\n")
    world.seal(GOOD)
    assert world.run().verdict == "PASS"
    world.repo.write("app.txt", "bad\n")
    world.repo.commit("break app")
    assert world.gate().verdict != "PASS"
    return world


def _lay_out(world: World, files: dict[str, bytes]) -> None:
    """The agent writes *files* into the work tree (untracked: a snapshot takes them)."""
    for path, data in files.items():
        target = world.path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _plans_with_mallory(world: World) -> dict[str, bytes]:
    """The current plans tree, with mallory trusted as sealer and runner."""
    files = world.plans_files()
    line = f'mallory namespaces="git" {world.mallory.public_key.openssh()}\n'
    files["trust/allowed_signers"] += line.encode()
    roles = json.loads(files["trust/roles.json"])
    roles["sealers"].append("mallory")
    roles["runners"].append("mallory")
    files["trust/roles.json"] = dumps(roles)
    return files


TAKES = {"run --snapshot": "pre-run", "snapshot": "latest", "rollback": "pre-rollback"}
"""The snapshot each routine command signs."""


def _user_signs(world: World, how: str, key: str | None) -> CliResult:
    """The user (with *key*, or the configured one) runs the command *how*, which signs a
    snapshot of the work tree as ``TAKES[how]``."""
    by = ["--key", str(world.keys[key])] if key else []
    if how == "run --snapshot":
        return audit(world.path, "run", "--snapshot", *by)  # a FAIL: app.txt is bad
    if how == "snapshot":
        return audit(world.path, "snapshot", *by)
    assert how == "rollback"
    result = audit(world.path, "rollback", "before", "--paths", "app.txt", *by)
    world.repo.write("app.txt", "bad\n")  # the agent puts its change back
    return result


def _push(world: World, *refspecs: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "push", "--no-verify", "--atomic", "origin", *refspecs],
        cwd=world.path,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("how", ["run --snapshot", "snapshot", "rollback", "chained"])
def test_attack_snapshots_signed_as_a_plans_commit(broken: World, tmp_path: Path, how: str) -> None:
    """alice (sealer and runner, as `git audit init` makes her) takes a snapshot of a work tree
    the agent laid out as the plans tree with mallory trusted, its ref pointed at
    refs/audit/plans; the agent moves refs/audit/plans to it. *chained*: a snapshot alice signed
    on the plans tip itself (what the old chaining made): its signature is no plans signature."""
    world = broken
    trust_add(world.handle(), world.alice, world.alice.public_key, "runner", "alice")
    server = world.serve(tmp_path / "server.git")
    on_server = git(server, "rev-parse", PLANS_REF).strip()
    tip = world.ref(PLANS_REF)
    assert tip is not None and tip == on_server
    if how == "rollback":
        world.repo.write("app.txt", "good\n")
        assert audit(world.path, "snapshot", "before", "--key", str(world.keys["alice"])).code == 0
        world.repo.write("app.txt", "bad\n")
    files = _plans_with_mallory(world)
    if how == "chained":
        git_ = world.handle().git
        snap = world.commit_object(
            git_,
            write_tree(git_, files),
            [pygit2.Oid(hex=tip)],
            "snapshot: latest\n\nAudit-Snapshot: latest\n",
            world.alice,
            namespace=SNAPSHOT_NAMESPACE,
        )
    else:
        _lay_out(world, files)
        ref = f"{SNAPSHOTS_PREFIX}{TAKES[how]}"
        world.set_ref(ref, tip)  # the agent: the next snapshot's parent
        taken = _user_signs(world, how, "alice")
        assert taken.code == (1 if how == "run --snapshot" else 0), taken.err
        snap = pygit2.Oid(hex=world.ref(ref) or "")
        assert str(snap) != tip
    world.set_ref(PLANS_REF, snap)
    result = world.gate()
    assert_plans_level(result, "plans.untrusted")
    pushed = _push(world, f"+{PLANS_REF}:{PLANS_REF}")
    assert pushed.returncode != 0 and "pre-receive hook declined" in pushed.stderr
    why = "is a work-tree snapshot" if how == "chained" else "not a fast-forward"
    assert why in pushed.stderr, pushed.stderr
    assert git(server, "rev-parse", PLANS_REF).strip() == on_server
    if how != "chained":  # nor was it chained onto what the agent put on its ref
        assert _parents(world, snap) == []


def _parents(world: World, oid: pygit2.Oid) -> list[str]:
    commit = world.handle().git.get(oid)
    assert isinstance(commit, pygit2.Commit)
    return [str(p) for p in commit.parent_ids]


@pytest.mark.parametrize("how", ["run --snapshot", "snapshot", "chained"])
def test_attack_snapshots_signed_as_a_run(broken: World, tmp_path: Path, how: str) -> None:
    """The runner ci snapshots a work tree holding the last PASS run's files relabelled for
    the bad tree, its ref pointed at refs/audit/runs/default; the agent moves the runs ref to
    the snapshot and deletes the high-water marks (a cache). *chained*: a snapshot ci signed on
    the runs tip itself. Neither the gate nor the server takes it as a run."""
    world = broken
    server = world.serve(tmp_path / "server.git")
    assert _push(world, f"{RUNS}:{RUNS}").returncode == 0  # the good run is on the server
    on_server = git(server, "rev-parse", RUNS).strip()
    tip = world.ref(RUNS)
    assert tip is not None
    tree = world.repo.head_tree()
    files = world.run_files(tip)
    doc = json.loads(files["run.json"])
    doc["tree"] = tree
    files["run.json"] = dumps(doc)
    if how == "chained":
        git_ = world.handle().git
        snap = world.commit_object(
            git_,
            write_tree(git_, files),
            [pygit2.Oid(hex=tip)],
            "snapshot: latest\n\nAudit-Snapshot: latest\n",
            world.ci,
            namespace=SNAPSHOT_NAMESPACE,
        )
    else:
        _lay_out(world, files)
        ref = f"{SNAPSHOTS_PREFIX}{TAKES[how]}"
        world.set_ref(ref, tip)
        taken = _user_signs(world, how, "ci")
        assert taken.code == (1 if how == "run --snapshot" else 0), taken.err
        snap = pygit2.Oid(hex=world.ref(ref) or "")
        for path in files:
            (world.path / path).unlink()
    world.set_ref(RUNS, snap)
    forget_marks(world.handle().gitdir)
    judged = only(world.gate())
    assert judged.verdict == "FAIL" and world.gate().verdict == "FAIL", judged
    if how == "chained":
        assert any("is a work-tree snapshot" in r.message for r in judged.reasons), judged
    pushed = _push(world, "HEAD:refs/heads/main", f"+{RUNS}:{RUNS}")
    assert pushed.returncode != 0 and "pre-receive hook declined" in pushed.stderr
    assert git(server, "rev-parse", RUNS).strip() == on_server
    assert git(server, "rev-parse", "-q", "--verify", "refs/heads/main", check=False) == ""
    if how != "chained":
        assert _parents(world, snap) == []


@pytest.mark.parametrize("how", ["run --snapshot", "snapshot"])
def test_attack_snapshots_signing_key_chosen_in_the_repository_config(
    broken: World, how: str
) -> None:
    """The agent sets audit.signingKey in .git/config to alice's key (a sealer, not a runner),
    lays out the plans tree with mallory trusted and points the snapshot's ref at
    refs/audit/plans; the user runs the command without --key. `run --snapshot` refuses alice
    before it signs anything; `snapshot` signs with her, for snapshots only: the plans ref
    moved to it does not verify."""
    world = broken
    tip = world.ref(PLANS_REF)
    assert tip is not None
    _lay_out(world, _plans_with_mallory(world))
    ref = f"{SNAPSHOTS_PREFIX}{TAKES[how]}"
    world.set_ref(ref, tip)
    world.repo.git("config", "audit.signingKey", str(world.keys["alice"]))
    taken = _user_signs(world, how, None)
    if how == "run --snapshot":
        assert taken.code != 0 and "key alice" in taken.err and "is not a runner" in taken.err
        assert world.ref(ref) == tip  # nothing was signed
        assert "snapshot pre-run" not in taken.out + taken.err
    else:
        assert taken.code == 0, taken.err
    world.set_ref(PLANS_REF, world.ref(ref) or "")
    if how == "run --snapshot":  # the plans ref did not move: no mallory, no evidence
        assert world.ref(PLANS_REF) == tip
        assert only(world.gate()).verdict == "UNKNOWN"
    else:
        assert_plans_level(world.gate(), "plans.untrusted")
        assert "is no snapshot of a trusted key" in taken.err  # and said so when taken


def test_snapshots_control_versions_chain_and_roll_back(world: World) -> None:
    """Control: taking a name again chains onto the user's own earlier snapshot (no warning),
    and rollback and pre-rollback still verify."""
    alice = ["--key", str(world.keys["alice"])]
    world.repo.write("README.md", "one\n")
    assert audit(world.path, "snapshot", "s", *alice).code == 0
    assert audit(world.path, "snapshot", "one", *alice).code == 0
    world.repo.write("README.md", "two\n")
    again = audit(world.path, "snapshot", "s", *alice)
    assert again.code == 0 and "no snapshot" not in again.err
    back = audit(world.path, "rollback", "one", *alice)
    assert back.code == 0, back.err
    assert (world.path / "README.md").read_text() == "one\n"
    undo = audit(world.path, "rollback", "pre-rollback", *alice)
    assert undo.code == 0, undo.err
    assert (world.path / "README.md").read_text() == "two\n"
    listed = {s["name"]: s for s in audit(world.path, "snapshots", "--json").json()["snapshots"]}
    assert listed["s"]["versions"] == 2 and listed["pre-rollback"]["versions"] == 2


@pytest.mark.parametrize("other", ["another name", "pre-rollback", "the same tree"])
def test_attack_snapshots_name_pointed_at_another_snapshot(world: World, other: str) -> None:
    """The user snapshots README.md as `good`; the agent points refs/audit/snapshots/good at
    another snapshot the user signed: one of another name, or a `pre-rollback` one, holding a
    README.md of the agent's choosing (or the same files as `good`, where only the name
    differs). `rollback good` restored that snapshot: the signature was checked, not the name
    it was signed as (all three before the fix). Now the rollback refuses a snapshot signed as
    another name, naming it, and changes nothing, not even the pre-rollback snapshot. (An older
    version of `good` itself is signed as `good`: a rewind the signature cannot show, stated
    in the threat model's limits.)"""
    alice = ["--key", str(world.keys["alice"])]
    good = f"{SNAPSHOTS_PREFIX}good"
    world.repo.write("README.md", "good\n" if other == "the same tree" else "bad\n")
    assert audit(world.path, "snapshot", "bad", *alice).code == 0
    world.repo.write("README.md", "good\n")
    assert audit(world.path, "snapshot", "good", *alice).code == 0
    if other == "pre-rollback":  # rolling back to `bad` leaves pre-rollback holding "good"...
        assert audit(world.path, "rollback", "bad", *alice).code == 0
        assert audit(world.path, "rollback", "pre-rollback", *alice).code == 0  # ...then "bad"
        planted = world.ref(f"{SNAPSHOTS_PREFIX}pre-rollback")
    else:
        planted = world.ref(f"{SNAPSHOTS_PREFIX}bad")
    assert planted is not None
    world.repo.write("README.md", "mine\n")
    undo = world.ref(f"{SNAPSHOTS_PREFIX}pre-rollback")
    world.set_ref(good, planted)
    done = audit(world.path, "rollback", "good", *alice)
    assert done.code == 1, (done.out, done.err)
    assert "not as 'good'" in done.err and planted[:12] in done.err, done.err
    assert (world.path / "README.md").read_text() == "mine\n"
    assert world.ref(f"{SNAPSHOTS_PREFIX}pre-rollback") == undo


# ------------------------------------------------ snapshots an older gitaudit signed for "git"


def _old_snapshot(world: World, files: dict[str, bytes], parent: str, signer: Signer) -> str:
    """A snapshot as gitaudit wrote it before snapshots had their own namespace: the work tree
    (here *files*) on whatever its ref held (*parent*), signed for "git" like a ledger commit."""
    git_ = world.handle().git
    tree = write_tree(git_, files)
    message = f"snapshot: latest\n\nAudit-Snapshot: latest\nAudit-Tree: {tree}\n"
    oid = world.commit_object(git_, tree, [pygit2.Oid(hex=parent)], message, signer)
    return str(oid)


@pytest.mark.parametrize("how", ["verified from the mark", "marked verified already"])
def test_attack_snapshots_old_one_read_as_a_plans_commit(
    broken: World, tmp_path: Path, how: str
) -> None:
    """An older gitaudit signed a snapshot for "git", with alice's key (sealer and runner), of a
    work tree the agent laid out as the plans tree with mallory trusted, on the plans tip; the
    repository still holds it. The agent moves refs/audit/plans to it (*marked verified
    already*: the older gitaudit had accepted it and marked it verified, with its MAC). Every
    reader refuses it by its Audit-Snapshot trailer, and so does the server."""
    world = broken
    trust_add(world.handle(), world.alice, world.alice.public_key, "runner", "alice")
    server = world.serve(tmp_path / "server.git")
    tip = world.ref(PLANS_REF)
    assert tip is not None
    snap = _old_snapshot(world, _plans_with_mallory(world), tip, world.alice)
    world.set_ref(PLANS_REF, snap)
    if how == "marked verified already":
        handle = world.handle()
        watermark.record(handle.gitdir, {PLANS_REF: snap}, "verified", handle.git)
    result = world.gate()
    assert_plans_level(result, "plans.untrusted")
    (reason,) = result.reasons
    assert f"commit {snap[:12]}" in reason.message or f"commit {snap}" in reason.message
    assert "is a work-tree snapshot ('Audit-Snapshot: latest' in its message)" in reason.message
    assert "never a" in reason.message and "\n" not in reason.message
    pushed = _push(world, f"{PLANS_REF}:{PLANS_REF}")
    assert pushed.returncode != 0 and "pre-receive hook declined" in pushed.stderr
    assert "is a work-tree snapshot ('Audit-Snapshot: latest'" in pushed.stderr, pushed.stderr
    assert git(server, "rev-parse", PLANS_REF).strip() == tip


def test_attack_snapshots_old_one_read_as_a_run(broken: World, tmp_path: Path) -> None:
    """An older gitaudit signed a snapshot for "git", with ci's key, of a work tree holding the
    last PASS run relabelled for the bad tree, on the runs tip. The agent moves the runs ref to
    it and deletes the high-water marks: the gate, verify and the server refuse it by its
    Audit-Snapshot trailer."""
    world = broken
    server = world.serve(tmp_path / "server.git")
    assert _push(world, f"{RUNS}:{RUNS}").returncode == 0
    tip = world.ref(RUNS)
    assert tip is not None
    files = world.run_files(tip)
    doc = json.loads(files["run.json"])
    doc["tree"] = world.repo.head_tree()
    files["run.json"] = dumps(doc)
    snap = _old_snapshot(world, files, tip, world.ci)
    world.set_ref(RUNS, snap)
    forget_marks(world.handle().gitdir)
    judged = only(world.gate())
    assert judged.verdict == "FAIL", judged
    assert any(
        "is a work-tree snapshot ('Audit-Snapshot: latest' in its message), never a run"
        in r.message
        for r in judged.reasons
    ), judged.reasons
    verified = audit(world.path, "verify")
    assert verified.code != 0 and "is a work-tree snapshot" in verified.out + verified.err
    pushed = _push(world, "HEAD:refs/heads/main", f"{RUNS}:{RUNS}")
    assert pushed.returncode != 0 and "pre-receive hook declined" in pushed.stderr
    assert "is a work-tree snapshot ('Audit-Snapshot: latest'" in pushed.stderr, pushed.stderr
    assert git(server, "rev-parse", RUNS).strip() == tip


# ------------------------------------------------ programs the repository's config names


def _smudge(world: World, program: str) -> None:
    world.repo.git("config", "filter.keep.smudge", program)


def _smudge_included(world: World, program: str) -> None:
    extra = world.path / ".git" / "more.config"
    extra.write_text(f'[FILTER "keep"]\n\tsmudge = "{program}"\n')
    world.repo.git("config", "include.path", "more.config")


def _fsmonitor(world: World, program: str) -> None:
    script = world.path / ".git" / "fsmonitor.sh"
    script.write_text(f"#!/bin/sh\n{program}\n")
    script.chmod(0o755)
    world.repo.git("config", "core.fsmonitor", str(script))


# variant -> (how the agent names its program in the repository's config, refused?)
PROGRAMS = {
    "a smudge filter in .git/config": (_smudge, True),
    "a smudge filter in a file .git/config includes, in upper case": (_smudge_included, True),
    "a file-system monitor in .git/config": (_fsmonitor, False),
}


@pytest.mark.parametrize("how", sorted(PROGRAMS))
def test_attack_snapshots_rollback_runs_a_program_the_repository_config_names(
    world: World, tmp_path: Path, how: str
) -> None:
    """The tree's .gitattributes gives notes.txt the filter `keep` and the user snapshots it;
    the agent deletes notes.txt and names a program of its own in the repository's config: a
    smudge driver for `keep` (the fingerprint refuses clean and process drivers there, not a
    smudge one, which changes nothing git hashes), or `core.fsmonitor`. The user's `rollback`
    staged notes.txt with `git checkout-index`, which ran the program as the user, outside any
    fence, where it reads the signing keys: it copied ci's private key out (all three before
    the fix). A smudge driver of the repository's own is now refused before anything changes
    (no journal, no pre-rollback snapshot), and the staging git runs with no file-system
    monitor, as every git gitaudit asks about a work tree does."""
    world.repo.write(".gitattributes", "notes.txt filter=keep\n")
    world.repo.write("notes.txt", "keep me\n")
    world.repo.commit("notes")
    _snapshot(world, "good")
    (world.path / "notes.txt").unlink()
    stolen = tmp_path / "stolen"
    program = f"sh -c 'cp {world.keys['ci']} {stolen}; cat'"
    name, refused = PROGRAMS[how]
    name(world, program if "fsmonitor" not in how else f"cp {world.keys['ci']} {stolen}")
    result = _rollback(world, "good")
    assert not stolen.exists(), result.err
    if refused:
        assert result.code == 1 and "defines filter.keep.smudge" in result.err, result.err
        assert len(result.err.strip().splitlines()) == 2, result.err
        assert not (world.path / "notes.txt").exists()
        assert not (world.path / ".git" / "gitaudit" / "rollback.json").exists()
        assert world.ref(f"{SNAPSHOTS_PREFIX}pre-rollback") is None
    else:
        assert result.code == 0, result.err
        assert (world.path / "notes.txt").read_text() == "keep me\n"


def _folder_swapped(stage: Path, secret: Path) -> None:
    os.rename(stage / "zz", stage / "zz-old")
    os.symlink(secret, stage / "zz")


def _file_swapped(stage: Path, secret: Path) -> None:
    os.unlink(stage / "zz" / "runner")
    os.symlink(secret / "runner", stage / "zz" / "runner")


# variant -> how the agent's process swaps the staged zz/runner for the key outside
STAGE_SWAPS = {
    "a folder of the staging area swapped for a link": _folder_swapped,
    "the staged file swapped for a link": _file_swapped,
}


@pytest.mark.parametrize("how", sorted(STAGE_SWAPS))
def test_attack_snapshots_rollback_copies_a_file_from_outside_through_the_staging_area(
    world: World, tmp_path: Path, how: str
) -> None:
    """The user's snapshot `good` holds zz/runner (the name of the key file in the user's key
    folder) and many files that sort before it; the agent deletes them all and, while the user
    rolls back, a process of its own watches `.git/gitaudit/rollback/` and, once git has
    checked the files out there, swaps the staged `zz` folder for a link to the key folder. The
    rollback read each staged file by a path that followed the link and copied the private key
    into the work tree, where the agent reads it (only a warning: `still different from the
    snapshot`), before the fix. A staged file is now opened by walking the staging folder with
    O_NOFOLLOW from a descriptor taken before the writes: zz/runner is left alone and nothing
    from outside is written. (The staged file itself swapped for a link was refused before
    too, by a check made before the file was opened.)"""
    secret = tmp_path / "home" / "keys"
    secret.mkdir(parents=True)
    (secret / "runner").write_text("PRIVATE KEY\n")
    for i in range(600):
        world.repo.write(f"a/{i:04}", "x\n")
    world.repo.write("zz/runner", "decoy\n")
    world.repo.commit("many files")
    _snapshot(world, "good")
    shutil.rmtree(world.path / "a")
    (world.path / "zz" / "runner").unlink()
    base = world.path / ".git" / "gitaudit" / "rollback"
    swap, done, swapped = STAGE_SWAPS[how], threading.Event(), threading.Event()

    def agent() -> None:
        while not done.is_set():
            for stage in base.glob("stage-*"):
                if (stage / "zz" / "runner").is_file() and not (stage / "zz").is_symlink():
                    swap(stage, secret)
                    swapped.set()
                    return
            time.sleep(0.0005)

    watcher = threading.Thread(target=agent)
    watcher.start()
    try:
        result = _rollback(world, "good")
    finally:
        done.set()
        watcher.join()
    assert swapped.is_set(), "the agent's process never saw the staging area"
    assert result.code == 0, result.err
    assert "left alone: zz/runner" in result.err, result.err
    landed = world.path / "zz" / "runner"
    assert not landed.exists() or "PRIVATE" not in landed.read_text()
    assert (world.path / "a" / "0000").read_text() == "x\n"
    assert (secret / "runner").read_text() == "PRIVATE KEY\n"
