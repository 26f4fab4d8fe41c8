"""Attacks on the signatures and the trust set: the principals, options and keys of
``trust/allowed_signers`` and ``trust/roles.json`` on ``refs/audit/plans``, read by every judge.

The world (``tests/adversarial/conftest.py``): alice is the only sealer, ci the only runner,
mallory is the agent, trusted by nobody until alice adds mallory's key at mallory's request.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pygit2
import pytest
from pygit2.enums import ObjectType

from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.refs import PLANS_REF, runs_ref
from gitaudit.ledger.seals import seal_plan, set_policy
from gitaudit.ledger.trust import ALLOWED_SIGNERS_PATH, EvidenceRule
from gitaudit.plan.catalog import check_worktree
from tests.adversarial.conftest import World, assert_plan, check, plan, runner, step
from tests.gitrepo import forget_marks

RUNS = runs_ref("default")
MAIN = "refs/heads/main"


def rule(world: World, *rules: EvidenceRule) -> None:
    """alice sets the policy's evidence rules (a strengthening)."""
    policy = replace(read_state(world.handle()).policy, evidence=rules)
    set_policy(world.handle(), world.alice, policy, allow_weaken=False, reason="runners")


WEAK = plan(step("unit", check("true")))
"""STRICT without its step ``lint``: a weakening only a sealer may seal."""


@pytest.mark.parametrize(
    ("role", "name"),
    [
        ("runner", "alice,agent"),
        ("planner", "alice,agent"),
        ("reconciler", "alice,mallory-bot"),
    ],
)
def test_attack_signatures_principal_name_lists_a_sealer(
    proven: World, role: str, name: str
) -> None:
    """mallory asks alice to trust her key as a runner, planner or reconciler under a name that
    is a principal list (``alice,agent``). Every reader splits an allowed-signers principal list
    at its commas, so mallory's key came back as ``alice`` *and* ``agent``, alice's roles
    included: a sealer (the first entry, as which the writers take it too). mallory then sealed
    the weak plan with her own key and ci's honest run of it passed. A principal name is now one
    name: no comma, no white space, no control character (what splits a name or a line on
    reading), refused before anything is signed."""
    before = proven.ref(PLANS_REF)
    added = proven.cli(
        "trust", "add", proven.mallory.public_key.openssh(), "--role", role, "--name", name,
        "--key", str(proven.keys["alice"]),
    )  # fmt: skip
    if added.code == 0:  # before the fix: mallory's key is a sealer; she weakens the contract
        assert proven.mallory.public_key in read_state(proven.handle()).trust.with_role("sealer")
        proven.write_plan(WEAK)
        proven.repo.commit("weak plan")
        (checked,) = check_worktree(proven.path, "default")
        seal_plan(proven.handle(), proven.mallory, checked, reason="x", allow_weaken=True)
        proven.run()
        assert proven.gate().verdict == "PASS"
    assert added.code == 2, added.out + added.err
    assert f"invalid principal name {name!r}" in added.err
    assert proven.ref(PLANS_REF) == before


@pytest.mark.parametrize(
    "option",
    [
        'valid-before="20240101"',
        'valid-after="29991231"',
        "cert-authority",
        'namespaces="file"',
    ],
)
def test_attack_signatures_restricted_key_signs_evidence(proven: World, option: str) -> None:
    """alice trusted the agent's key ``bot`` as a runner, then restricted its line of
    ``trust/allowed_signers`` the OpenSSH way (in a commit she signs): expired
    (``valid-before``), not valid yet (``valid-after``), a certificate authority that signs no
    commit itself, or allowed to sign only ``file`` signatures. ssh-keygen, so ``git
    verify-commit``, refuses bot's commits; every gitaudit reader ignored the options, so bot's
    run for an untested tree (ci's pass relabelled) was PASS. A line whose options keep its key
    from signing ``git`` commits, or whose validity gitaudit cannot judge, now trusts nobody."""
    bot = runner(proven, "bot")
    files = proven.plans_files()
    key = bot.public_key.with_comment("").openssh()
    signers = files[ALLOWED_SIGNERS_PATH].decode()
    assert f'\nbot namespaces="git" {key}\n' in signers
    restricted = signers.replace(f'\nbot namespaces="git" {key}\n', f"\nbot {option} {key}\n")
    proven.forge_plans({**files, ALLOWED_SIGNERS_PATH: restricted.encode()}, proven.alice)
    base = proven.ref(RUNS)
    assert base is not None
    proven.repo.write("src.py", "broken = True\n")
    proven.repo.commit("untested change")
    tree = proven.repo.head_tree()

    def relabel(doc: dict[str, Any]) -> None:
        doc["tree"] = doc["purity"]["before"] = doc["purity"]["after"] = tree

    forged = proven.forge_run(base, edit=relabel, signer=bot)
    assert _git_verifies(proven, base) and not _git_verifies(proven, str(forged))
    judged = assert_plan(proven.gate(), "evidence.untrusted", "FAIL")
    assert "signed by untrusted key" in judged.reasons[0].message


def _git_verifies(world: World, commit: str) -> bool:
    """Whether ``git verify-commit`` accepts *commit* with ``trust/allowed_signers`` as stored on
    the plans ref."""
    stored = world.path.parent / "allowed_signers"
    stored.write_bytes(world.plans_files()[ALLOWED_SIGNERS_PATH])
    config = ["-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={stored}"]
    argv = ["git", *config, "verify-commit", commit]
    return subprocess.run(argv, cwd=world.path, capture_output=True, check=False).returncode == 0


def _signature_moved_up(raw: bytes) -> bytes:
    """*raw* with its ``gpgsig`` header (and continuation lines) moved right after ``tree``:
    the payload git and gitaudit cut out is unchanged, so the signature still verifies, but
    libgit2 cannot parse the commit (it expects ``parent``/``author`` there)."""
    head, _, body = raw.partition(b"\n\n")
    lines = head.split(b"\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(b"gpgsig "))
    end = start + 1
    while end < len(lines) and lines[end].startswith(b" "):
        end += 1
    rest = lines[:start] + lines[end:]
    return b"\n".join(rest[:1] + lines[start:end] + rest[1:]) + b"\n\n" + body


@pytest.mark.parametrize(
    ("ledger", "reader"),
    [
        ("runs", "verify"),
        ("plans", "verify"),
        ("runs", "log"),
        ("runs", "status"),
        ("runs", "server"),
        ("plans", "server"),
    ],
)
def test_attack_signatures_header_moved_into_the_headers(
    proven: World, tmp_path: Path, ledger: str, reader: str
) -> None:
    """The agent rewrites the tip of a ledger ref with its ``gpgsig`` header moved between
    ``tree`` and ``author``: the signed payload is the same (git's own split takes a
    signature header anywhere), so the signature of ci or alice verifies, and libgit2 cannot
    parse the object. The high-water marks are gone (as in a fresh clone), and the rewritten
    tip is pushed to the server with --no-verify. `git audit verify` and `git audit log`
    crashed with a traceback (pygit2.InvalidError) and `status` said the object did not exist;
    every reader now says the commit cannot be read (`log` lists no run), and the server
    refuses it."""
    name = RUNS if ledger == "runs" else PLANS_REF
    if reader == "server":
        proven.serve(tmp_path / "server.git")
        proven.repo.git("push", "-q", "origin", f"{RUNS}:{RUNS}")
    tip = proven.ref(name)
    assert tip is not None
    git = proven.handle().git
    _kind, raw = git.odb.read(pygit2.Oid(hex=tip))
    moved = git.odb.write(ObjectType.COMMIT, _signature_moved_up(raw))
    assert _git_verifies(proven, str(moved))  # the signature is good: only the object is bad
    proven.set_ref(name, moved)
    forget_marks(proven.handle().gitdir)  # as in a fresh clone: no marks, no floors
    shutil.rmtree(proven.handle().state_dir)
    why = "cannot be read"
    if reader == "server":
        pushed = subprocess.run(
            ["git", "push", "--no-verify", "-f", "origin", f"{name}:{name}"],
            cwd=proven.path, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert pushed.returncode == 1 and "pre-receive hook declined" in pushed.stderr
        assert f"rejecting {name}: commit {str(moved)[:12]} {why}" in pushed.stderr
    elif reader == "status":
        judged = assert_plan(proven.gate(), "evidence.ledger", "FAIL")
        assert f"{name} points at {moved}, which {why} as a commit" in judged.reasons[0].message
    elif reader == "log":  # the tip cannot be read: an error naming it, not "no runs"
        done = proven.cli(reader)
        assert done.code == 1 and done.out == "", done.out
        assert f"{name}: commit {str(moved)[:12]} {why}" in done.err, done.err
    else:
        done = proven.cli(reader)
        assert done.code == 1 and "Traceback" not in done.err, done.err
        assert f"{name}: commit {str(moved)[:12]} {why}" in done.out + done.err


@pytest.mark.parametrize(
    ("name", "labels", "admitted_as"),
    [
        ("release-ci", (), "release-ci"),  # the name of the label the rule names
        ("bot", ("ci",), "ci"),  # the label of the name the rule names
    ],
)
def test_attack_signatures_runner_named_like_a_label(
    sealed: World, name: str, labels: tuple[str, ...], admitted_as: str
) -> None:
    """main is proven by the runners the rule names: ``release-ci`` (a label, which alice's
    build machine carries) or ``ci`` (a principal). An evidence rule reads runner names and
    labels as one list, so mallory, trusted as a runner at her request under the *name*
    ``release-ci``, or *labelled* ``ci``, was admitted where only the build machine or ci was
    meant: her own run made main PASS. A principal's name may no longer be another
    principal's label, nor a label another principal's name."""
    runner(sealed, "build1", frozenset({"release-ci"}))
    rule(sealed, EvidenceRule(MAIN, (admitted_as,)))
    before = sealed.ref(PLANS_REF)
    flags = [arg for label in labels for arg in ("--label", label)]
    added = sealed.cli(
        "trust", "add", sealed.mallory.public_key.openssh(), "--role", "runner", "--name", name,
        *flags, "--key", str(sealed.keys["alice"]),
    )  # fmt: skip
    if added.code == 0:  # before the fix: mallory's runs count for main
        assert sealed.run(signer=sealed.mallory).verdict == "PASS"
        assert sealed.gate(for_ref=MAIN).verdict == "PASS"
    assert added.code == 1, added.out + added.err
    clash = (
        f"the name {name!r} is a label of build1"
        if name == admitted_as
        else f"the label {admitted_as!r} is the name of a trusted principal"
    )
    assert added.err.startswith(f"error: {clash}: evidence rules naming it"), added.err
    assert sealed.ref(PLANS_REF) == before
