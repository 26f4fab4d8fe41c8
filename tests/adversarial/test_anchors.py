"""Attacks on the local pin of the root of trust: ``audit.rootKey`` in ``.git/config``.

The agent can write the work tree and ``.git/``, so it can re-pin ``audit.rootKey`` to a key of
its own and fabricate a whole ``refs/audit/plans`` (and evidence) signed by it; it cannot write
the user's gitaudit home, where ``trust init`` keeps the repository's trust anchor
(:mod:`gitaudit.ledger.anchor`). Every attack here starts from mallory's fabricated ledger: a clone
whose plans ref has mallory as its root, sealer and runner, with a genuine PASS run of the same
plan for the same tree, fetched over the repository's audit refs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gitaudit.crypto.keystore import generate_key
from gitaudit.gate.judge import judge
from gitaudit.git.repo import open_repo
from gitaudit.ledger import anchor
from gitaudit.ledger.refs import PLANS_REF, runs_ref
from gitaudit.ledger.seals import seal_plan, trust_init
from gitaudit.places import anchor_path, marks_path
from gitaudit.plan.catalog import check_worktree
from gitaudit.run.recorder import run_plan
from tests.adversarial.conftest import World, assert_plans_level
from tests.gitrepo import GitRepo, audit
from tests.reasons import assert_well_formed
from tests.run.test_memo import hook, pre_push

RUNS = runs_ref("default")


def _fabricate(world: World, tmp_path: Path) -> str:
    """mallory's ledger in a clone, fetched over the audit refs; her key's fingerprint."""
    other = GitRepo(tmp_path / "fabricated")
    subprocess.run(
        ["git", "clone", "-q", str(world.path), str(other.path)], check=True, capture_output=True
    )
    handle = open_repo(other.path)
    trust_init(handle, world.mallory, "mallory")
    (checked,) = check_worktree(other.path, "default")
    seal_plan(handle, world.mallory, checked)
    assert run_plan(open_repo(other.path), "default", world.mallory).verdict == "PASS"
    world.repo.git("fetch", "-q", str(other.path), "+refs/audit/*:refs/audit/*")
    return world.mallory.public_key.fingerprint()


def _forget_marks(world: World) -> None:
    """No marks, as in a fresh clone. The floors the gitaudit home keeps of them (which the
    agent cannot remove) would report the replaced ledger first: they go too, so the anchor is
    seen to hold on its own."""
    shutil.rmtree(world.handle().state_dir)
    Path(marks_path(world.handle().gitdir)).unlink(missing_ok=True)


def _forge_marks(world: World) -> None:
    """Write watermarks.json as if every current audit tip had been verified (the floors in the
    gitaudit home removed, as by :func:`_forget_marks`)."""
    Path(marks_path(world.handle().gitdir)).unlink(missing_ok=True)
    tips = {ref: world.ref(ref) for ref in (PLANS_REF, RUNS)}
    marks = {"verified": tips, "seen": tips}
    state = world.handle().state_dir
    state.mkdir(exist_ok=True)
    (state / "watermarks.json").write_text(json.dumps(marks))


@pytest.mark.parametrize("marks", ["deleted", "forged"])
def test_attack_anchors_config_repinned_to_a_fabricated_root(
    proven: World, tmp_path: Path, marks: str
) -> None:
    """mallory's ledger, and `git config audit.rootKey` re-pinned to her key; the high-water
    marks deleted (a fresh start) or forged to vouch for her tips."""
    fingerprint = _fabricate(proven, tmp_path)
    proven.repo.git("config", "audit.rootKey", fingerprint)
    _forget_marks(proven) if marks == "deleted" else _forge_marks(proven)
    result = proven.gate()
    assert_plans_level(result, "plans.anchor-mismatch")
    assert "disagrees with this repository's trust anchor" in result.reasons[0].message
    status = proven.cli("status", "--json")
    assert status.code == 1 and status.json()["reasons"][0]["code"] == "plans.anchor-mismatch"
    code, _path, err = pre_push(proven.repo)
    assert code == 1 and "plans.anchor-mismatch" in err
    message = proven.path / ".git" / "MSG"
    message.write_text("finish\n\nAudit-Claim: done\n")
    code, _path, err = hook(proven.repo, "commit-msg", str(message))
    assert code == 1 and "plans.anchor-mismatch" in err
    verified = proven.cli("verify")
    assert verified.code == 1 and "disagrees with this repository's trust anchor" in verified.out


def test_attack_anchors_config_pin_deleted(proven: World, tmp_path: Path) -> None:
    """mallory's ledger, and the pin simply removed from .git/config (trust on first use)."""
    _fabricate(proven, tmp_path)
    proven.repo.git("config", "--unset", "audit.rootKey")
    _forget_marks(proven)
    result = proven.gate()
    assert_plans_level(result, "plans.anchor-mismatch")
    assert "audit.rootKey is not set" in result.reasons[0].message
    assert "git config audit.rootKey" in result.reasons[0].hint


@pytest.mark.parametrize("anchored", [True, False])
def test_attack_anchors_forged_marks_skip_the_pinned_root(
    proven: World, tmp_path: Path, anchored: bool
) -> None:
    """The pin is left alone; mallory's ledger goes in with marks written to say it was
    verified, so only the tip's signature (by mallory, a sealer of her own chain) is checked.
    The root is checked against the pin all the same, anchored or not."""
    _fabricate(proven, tmp_path)
    if not anchored:
        for path in anchor.files(proven.handle()):
            os.unlink(path)
    _forge_marks(proven)
    result = proven.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "not by the pinned audit.rootKey" in result.reasons[0].message


def test_attack_anchors_the_anchor_of_another_repository(proven: World, tmp_path: Path) -> None:
    """Anchors are per repository: the fabricating clone has its own (mallory's), which decides
    nothing here; and a copy of it put where this repository's anchor is does not apply."""
    fingerprint = _fabricate(proven, tmp_path)
    fabricated = open_repo(tmp_path / "fabricated")
    assert fabricated.config("audit.rootKey") == fingerprint
    assert open_repo(tmp_path / "fabricated").git.references.get(PLANS_REF) is not None
    theirs = anchor.find(fabricated)
    assert theirs is not None and theirs.root_key == fingerprint
    proven.repo.git("config", "audit.rootKey", fingerprint)
    _forget_marks(proven)
    assert_plans_level(proven.gate(), "plans.anchor-mismatch")
    for mine in anchor.files(proven.handle()):
        shutil.copyfile(theirs.file, mine)  # (the agent cannot write here; a mistake could)
    result = proven.gate()
    assert_plans_level(result, "plans.anchor-mismatch")
    assert "names the repository" in result.reasons[0].message


@pytest.mark.parametrize("how", ["gitfile", "commondir"])
def test_attack_anchors_git_dir_swapped_for_a_fabricated_one(
    proven: World, tmp_path: Path, how: str
) -> None:
    """A copy of .git, inside the work tree, with mallory's ledger and pin, and the work tree's
    `.git` made a `gitdir:` file pointing at it (or `.git/commondir` pointing at its copy):
    git now reads another repository, which has no anchor of its own."""
    fingerprint = _fabricate(proven, tmp_path)
    dot_git = proven.path / ".git"
    fake = proven.path / ".cache" / "git"
    shutil.copytree(dot_git, fake)
    subprocess.run(["git", "config", "audit.rootKey", fingerprint], cwd=fake, check=True)
    shutil.rmtree(fake / "gitaudit")
    if how == "gitfile":
        shutil.rmtree(dot_git)
        dot_git.write_text(f"gitdir: {fake}\n")
    else:
        (dot_git / "commondir").write_text(f"{fake}\n")
        _forget_marks(proven)  # they live in .git/gitaudit, which stays: they would say rewind
    assert proven.repo.git("config", "audit.rootKey").strip() == fingerprint
    result = proven.gate()
    assert_plans_level(result, "plans.anchor-mismatch")
    assert "was replaced or redirected" in result.reasons[0].message


def test_attack_anchors_a_private_gitaudit_home_fools_only_its_owner(
    proven: World, tmp_path: Path
) -> None:
    """KNOWN LIMIT (by design): the agent runs its own `git audit status` with GITAUDIT_HOME
    pointing at an empty folder, so it sees no anchor and its re-pinned ledger PASSes for it.
    That fools nobody else: the user's own status (their home) says anchor-mismatch, and so
    do the hooks when the user commits or pushes; a server judges with its own pin."""
    fingerprint = _fabricate(proven, tmp_path)
    proven.repo.git("config", "audit.rootKey", fingerprint)
    _forget_marks(proven)
    own = {"GITAUDIT_HOME": str(tmp_path / "agent-home")}
    assert audit(proven.path, "status", "HEAD", env=own).code == 0  # the agent's own view
    assert audit(proven.path, "status", "HEAD").code == 1
    assert pre_push(proven.repo)[0] == 1


def test_trust_init_refuses_a_root_other_than_the_anchored_one(proven: World) -> None:
    """An agent that deletes the plans ref and runs `git audit trust init` with its own key
    would create a root of trust the anchor refuses: init says so and creates nothing."""
    tip = proven.ref(PLANS_REF)
    proven.repo.git("update-ref", "-d", PLANS_REF)
    with pytest.raises(anchor.AnchorError, match="is anchored to the root key"):
        trust_init(proven.handle(), proven.mallory, "mallory")
    assert proven.ref(PLANS_REF) is None
    proven.set_ref(PLANS_REF, str(tip))


def test_trust_anchor_pins_the_verified_root(proven: World, tmp_path: Path) -> None:
    """`git audit trust anchor` shows the root's key, asks, and pins it outside the repository;
    `--expect` refuses another key."""
    handle = proven.handle()
    for path in anchor.files(handle):
        os.unlink(path)
    alice = proven.alice.public_key.fingerprint()
    refused = audit(proven.path, "trust", "anchor")  # no terminal to confirm in
    assert refused.code == 2 and "--yes" in refused.err
    wrong = audit(proven.path, "trust", "anchor", "--yes", "--expect", "SHA256:" + "A" * 43)
    assert wrong.code == 1 and f"signed by {alice}" in wrong.err
    assert anchor.find(handle) is None
    pinned = audit(proven.path, "trust", "anchor", "--yes", "--expect", alice)
    assert pinned.code == 0, pinned.err
    found = anchor.find(handle)
    assert found is not None and found.root_key == alice
    assert found.file == anchor_path(handle.gitdir)
    assert "already anchored" in audit(proven.path, "trust", "anchor", "--yes").out
    doctor = audit(proven.path, "doctor")
    assert f"ok  trust anchor: {alice}" in doctor.out


def _ci_clone(world: World, tmp_path: Path, *, fetch: bool = True) -> Path:
    """mallory's fabricated ledger force-pushed to a host without pre-receive, and a CI job's
    fresh clone of it (with the audit refs fetched, unless not *fetch*): no anchor, no pin."""
    _fabricate(world, tmp_path)
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    world.repo.git(
        "push", "-q", "--force", str(origin), "HEAD:refs/heads/main", "+refs/audit/*:refs/audit/*"
    )
    clone = tmp_path / "ci"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
    if fetch:
        subprocess.run(
            ["git", "-C", str(clone), "fetch", "-q", "origin", "+refs/audit/*:refs/audit/*"],
            check=True,
        )
    return clone


@pytest.mark.parametrize(
    "job",
    [
        {"CI": "true"},
        {"CI": "1"},
        {"GITHUB_ACTIONS": "true"},
        {"GITLAB_CI": "true", "CI": "false"},
        {"BUILDKITE": "true"},
    ],
    ids=["ci", "ci-1", "github", "gitlab", "buildkite"],
)
def test_attack_anchors_ci_job_without_the_action_or_a_pin(
    proven: World, tmp_path: Path, job: dict[str, str]
) -> None:
    """The same fabricated ledger on a host without pre-receive, and a CI job that does not use
    the action: it runs `git audit status` in a fresh clone without `git config audit.rootKey`.
    The clone has no anchor, so the root was taken on first use and the job said PASS for
    mallory's ledger (stated as out of scope, before the fix). A CI job now refuses to judge an
    unpinned repository; pinned, mallory's root is refused; outside CI the rule is unchanged."""
    clone = _ci_clone(proven, tmp_path)
    got = audit(clone, "status", "HEAD", env=job)
    assert got.code == 1 and "plans.unpinned" in got.out + got.err, got
    assert "audit.rootKey" in got.out + got.err
    subprocess.run(
        ["git", "-C", str(clone), "config", "audit.rootKey", proven.alice.public_key.fingerprint()],
        check=True,
    )
    got = audit(clone, "status", "HEAD", env=job)
    assert got.code == 1 and "plans.unpinned" not in got.out + got.err, got
    subprocess.run(["git", "-C", str(clone), "config", "--unset", "audit.rootKey"], check=True)
    off = {name: "false" if value != "1" else "0" for name, value in job.items()}
    assert audit(clone, "status", "HEAD", env=off).code == 0  # trust on first use, as stated


def test_attack_anchors_ci_job_pins_an_empty_root_key(proven: World, tmp_path: Path) -> None:
    """The same fabricated ledger on a host without pre-receive; the CI job follows the recipe,
    `git config audit.rootKey "$GITAUDIT_ROOT_KEY"`, in a job where the variable is empty (a
    pull request from a fork gets no secrets). The empty pin was taken as a pin, so the job was
    not refused as unpinned, and every caller takes a blank pin as none: the root was taken on
    first use and the job said PASS for mallory's ledger (before the fix). A blank pin is no pin
    in a CI job: plans.unpinned."""
    clone = _ci_clone(proven, tmp_path)
    subprocess.run(["git", "-C", str(clone), "config", "audit.rootKey", ""], check=True)
    got = audit(clone, "status", "HEAD", env={"GITHUB_ACTIONS": "true", "CI": "true"})
    assert got.code == 1 and "plans.unpinned" in got.out + got.err, got


@pytest.mark.parametrize(
    "inputs",
    [{}, {"root-key": ""}, {"root-key": " \t"}, {"root-key": "", "gate": "false"}],
    ids=["omitted", "empty", "blank", "report-only"],
)
def test_attack_anchors_ci_action_without_a_root_key(
    proven: World, tmp_path: Path, inputs: dict[str, str]
) -> None:
    """A host without a pre-receive hook (GitHub) takes any push to refs/audit/*: the agent
    force-pushes mallory's fabricated ledger. The CI job runs the action in a fresh clone, which
    has no anchor; without the `root-key` input the root of trust was taken on first use, and
    the action said PASS for mallory's ledger. It now refuses to judge without the pin."""
    from tests.packaging.test_action import run_action

    clone = _ci_clone(proven, tmp_path, fetch=False)  # the action fetches them
    head = proven.repo.git("rev-parse", "HEAD").strip()
    work = tmp_path / "job"
    work.mkdir()
    steps, outputs, _summary = run_action(clone, {"install": "skip", "rev": head, **inputs}, work)
    assert outputs.get("verdict") != "PASS", steps
    name, code, out = steps[-1]
    assert (name, code) == ("Pin the root of trust", 1), steps
    assert "::error title=gitaudit::the input root-key is empty" in out
    # the pin given, mallory's root is refused
    pinned = {"root-key": proven.alice.public_key.fingerprint()}
    steps, outputs, _summary = run_action(clone, {"install": "skip", "rev": head, **pinned}, work)
    assert outputs["verdict"] == "FAIL" and steps[-1][1] == 1, steps


def _linked_worktree(world: World, tmp_path: Path) -> tuple[Path, str]:
    """A linked worktree of *world* (`git worktree add`) where the agent committed a change no
    runner of the repository has run: its path and the commit."""
    wt = tmp_path / "wt"
    world.repo.git("worktree", "add", "-q", "--detach", str(wt), "HEAD")
    linked = GitRepo(wt)
    linked.write("NOTES.md", "the agent's change\n")
    return wt, linked.commit("agent: notes")


def _fabricate_at(world: World, tmp_path: Path, commit: str) -> str:
    """mallory's ledger (root, sealer, runner, a PASS run) for *commit*, fetched into *world*."""
    other = GitRepo(tmp_path / "fabricated")
    subprocess.run(
        ["git", "clone", "-q", str(world.path), str(other.path)], check=True, capture_output=True
    )
    other.git("checkout", "-q", commit)
    handle = open_repo(other.path)
    trust_init(handle, world.mallory, "mallory")
    (checked,) = check_worktree(other.path, "default")
    seal_plan(handle, world.mallory, checked)
    assert run_plan(open_repo(other.path), "default", world.mallory).verdict == "PASS"
    world.repo.git("fetch", "-q", str(other.path), "+refs/audit/*:refs/audit/*")
    return world.mallory.public_key.fingerprint()


@pytest.mark.parametrize(
    "how",
    [
        "commondir",  # .git/worktrees/wt/commondir names the copy; nobody judged in wt before
        "gitfile, anchored after the worktree was added",  # wt/.git names the copy's
        "gitfile, judged in the worktree before",  # added after anchoring, the user's status ran
        "main gitfile, anchored from the worktree",  # the root pinned in wt; main's .git swapped
    ],
)
def test_attack_anchors_linked_worktree_redirected(proven: World, tmp_path: Path, how: str) -> None:
    """The agent works in a linked worktree (`git worktree add`) and commits a change ci never
    ran. It copies .git out of the repository with mallory's ledger (a PASS run for its commit)
    and her pin, and redirects the linked worktree to the copy: `commondir` of its git dir
    (inside the real .git), or its `.git` file; or, the root pinned from the linked worktree,
    the main worktree's `.git`. Before the fix the anchor was keyed by the common dir and by
    the work tree the anchoring command ran in only: from the redirected worktree neither
    key led to an anchor, mallory's pin was taken and the user's `git audit status` said PASS
    (4 of 4). Now a linked git dir of an anchored repository must keep its `commondir`, every
    work tree of the repository is keyed when the root is pinned, and one added later is keyed
    the first time the user's gitaudit judges there: plans.anchor-mismatch."""
    handle = proven.handle()
    root = proven.alice.public_key.fingerprint()
    if how.startswith("gitfile, anchored after"):
        for path in anchor.files(handle):
            os.unlink(path)
        wt, commit = _linked_worktree(proven, tmp_path)
        assert audit(proven.path, "trust", "anchor", "--yes", "--expect", root).code == 0
    elif how.startswith("main gitfile"):
        for path in anchor.files(handle):
            os.unlink(path)
        wt, commit = _linked_worktree(proven, tmp_path)
        assert audit(wt, "trust", "anchor", "--yes", "--expect", root).code == 0
    else:
        wt, commit = _linked_worktree(proven, tmp_path)
        if how.startswith("gitfile, judged"):
            assert audit(wt, "status", "HEAD").code != 0  # honest: ci never ran the change
    fingerprint = _fabricate_at(proven, tmp_path, commit)
    dot_git = proven.path / ".git"
    fake = tmp_path / "copy.git"
    shutil.copytree(dot_git, fake)
    subprocess.run(["git", "config", "audit.rootKey", fingerprint], cwd=fake, check=True)
    shutil.rmtree(fake / "gitaudit")
    _forget_marks(proven)
    judged = wt
    if how == "commondir":
        (dot_git / "worktrees" / "wt" / "commondir").write_text(f"{fake}\n")
    elif how.startswith("gitfile"):
        (fake / "worktrees" / "wt" / "commondir").write_text(f"{fake}\n")
        (wt / ".git").write_text(f"gitdir: {fake / 'worktrees' / 'wt'}\n")
    else:
        shutil.rmtree(dot_git)
        (proven.path / ".git").write_text(f"gitdir: {fake}\n")
        GitRepo(proven.path).git("checkout", "-q", "--detach", commit)
        judged = proven.path
    assert GitRepo(judged).git("config", "audit.rootKey").strip() == fingerprint
    result = assert_well_formed(judge(open_repo(judged), "HEAD"))
    assert_plans_level(result, "plans.anchor-mismatch")
    status = audit(judged, "status", "HEAD")
    assert status.code == 1 and "plans.anchor-mismatch" in status.out + status.err


def test_anchors_control_linked_worktree_of_an_anchored_repository(
    proven: World, tmp_path: Path
) -> None:
    """Control: a linked worktree of the anchored repository is judged by the real ledger (ci's
    PASS for the tree it checks out), and the key its first judgement adds names the
    repository; removing the worktree leaves the repository's own anchor as it was."""
    wt = tmp_path / "wt"
    proven.repo.git("worktree", "add", "-q", "--detach", str(wt), "HEAD")
    assert assert_well_formed(judge(open_repo(wt), "HEAD")).verdict == "PASS"
    learned = anchor.find(open_repo(wt))
    assert learned is not None and learned.repository == anchor.common_dir(proven.handle().gitdir)
    assert os.path.exists(anchor_path(wt))
    proven.repo.git("worktree", "remove", str(wt))
    assert proven.gate().verdict == "PASS"


_REPOSITORY_SETTINGS = {
    "audit.signingKey": [("audit.signingKey", "{key}")],
    "user.signingKey": [("gpg.format", "ssh"), ("user.signingKey", "{key}")],
    "user.signingKey .pub": [("gpg.format", "ssh"), ("user.signingKey", "{key}.pub")],
    "an included file": [("include.path", "{included}")],
}


@pytest.mark.parametrize("setting", sorted(_REPOSITORY_SETTINGS))
@pytest.mark.parametrize("command", [("init",), ("trust", "init")])
def test_attack_anchors_init_roots_trust_in_a_key_the_repository_names(
    repo: GitRepo, tmp_path: Path, command: tuple[str, ...], setting: str
) -> None:
    """Before the user onboards the repository the agent writes a key of its own outside the work
    tree and names it in `.git/config` (`audit.signingKey`; `user.signingKey` with `gpg.format
    ssh`, the private file or its `.pub` beside it; or an `include.path` file holding the
    setting). The user, whose own key is `$GITAUDIT_HOME/keys/default`, runs `git audit init`
    (or `git audit trust init`): the command took the key the repository named, created
    refs/audit/plans with it as the only sealer and runner and pinned it in the user's trust
    anchor (before the fix, 8 of 8): the agent held the root of trust. A key that would become the
    root of trust is now never chosen by the repository's own configuration: the command stops
    with one error naming the setting and the file, and nothing is created."""
    user = generate_key("default")
    mallory = generate_key("mallory", home=tmp_path / "agent")
    included = tmp_path / "agent" / "included.gitconfig"
    included.write_text(f"[audit]\n\tsigningKey = {mallory.private_path}\n")
    for name, value in _REPOSITORY_SETTINGS[setting]:
        repo.git("config", name, value.format(key=mallory.private_path, included=included))
    result = audit(repo.path, *command)
    assert result.code != 0, result.out
    assert "in the repository's configuration" in result.err and "--key" in result.err
    assert repo.git("for-each-ref", "refs/audit").strip() == ""
    handle = open_repo(repo.path)
    assert anchor.find(handle) is None
    assert not (repo.path / ".gitaudit").exists() or command != ("init",)
    # the user's own choice still onboards: the key passed on the command line
    done = audit(repo.path, *command, "--key", str(user.private_path))
    assert done.code == 0, done.err
    found = anchor.find(open_repo(repo.path))
    assert found is not None and found.root_key == user.public_key.fingerprint()


def test_anchors_control_init_with_the_users_own_configuration(
    repo: GitRepo, tmp_path: Path
) -> None:
    """Control: `audit.signingKey` in the user's global configuration (which the agent cannot
    write), or no setting at all, chooses the root key as before; an existing plans ref makes
    `init` skip trust, so a repository setting is no obstacle then."""
    user = generate_key("default")
    other = generate_key("laptop", home=tmp_path / "elsewhere")
    repo.git("config", "--global", "audit.signingKey", str(other.private_path))
    done = audit(repo.path, "init")
    assert done.code == 0, done.err
    found = anchor.find(open_repo(repo.path))
    assert found is not None and found.root_key == other.public_key.fingerprint()
    repo.git("config", "audit.signingKey", str(user.private_path))
    again = audit(repo.path, "init")
    assert again.code == 0, again.err
    assert "trust: refs/audit/plans exists (skipped)" in again.out
