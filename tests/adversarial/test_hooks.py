"""Attacks on the hooks: a real bare server with pre-receive, a client with gitaudit's hooks.

Uses the `setup` fixture of tests/e2e (client + server, plan sealed, plans ref pushed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitaudit.crypto.commits import create_signed_commit
from gitaudit.crypto.keystore import keys_dir, load_signer
from gitaudit.crypto.signers import Ed25519Signer, Signer
from gitaudit.git.repo import open_repo
from gitaudit.hooks.entry import claims_completion
from gitaudit.ledger.objects import dumps, read_files, write_tree
from gitaudit.ledger.seals import seal_plan, set_policy, trust_add, trust_init
from gitaudit.ledger.trust import Policy
from gitaudit.plan.catalog import check_worktree
from gitaudit.run.recorder import run_plan
from tests import sealrules
from tests.adversarial.conftest import World, check, honest_run_on_any_tip, plan, step
from tests.e2e.conftest import PLAN, Setup
from tests.e2e.conftest import setup as setup  # noqa: PLC0414 (re-exported fixture)
from tests.gitrepo import audit, git

RUNS = "refs/audit/runs/default"
PLANS = "refs/audit/plans"
ZERO = "0" * 40


def _sealer() -> Signer:
    """The key `git audit init` generated for the client (sealer and runner)."""
    return load_signer(keys_dir() / "default")


def _run_pass(setup: Setup) -> None:
    result = audit(setup.client.path, "run")
    assert result.code == 0, result.out + result.err


def _forge(
    setup: Setup,
    ref: str,
    signer: Signer | None,
    edit: Any = None,
) -> str:
    """A commit on top of *ref* in the client, with the tip's files passed through *edit*."""
    git = open_repo(setup.client.path).git
    tip = git.references[ref].target
    files = read_files(git, git[tip].tree)
    if edit is not None:
        edit(files)
    tree = write_tree(git, files)
    if signer is None:
        who = pygit2.Signature("forger", "forger@example.test")
        oid = git.create_commit(None, who, who, "forged\n", tree, [tip])
    else:
        oid = create_signed_commit(git, tree=tree, parents=[tip], message="forged\n", signer=signer)
    setup.client.git("update-ref", ref, str(oid))
    return str(oid)


def _make_pass(files: dict[str, bytes]) -> None:
    doc = json.loads(files["run.json"])
    doc["verdict"], doc["reasons"] = "PASS", []
    for entry in doc["steps"].values():
        entry["status"], entry["reason"] = "passed", ""
    files["run.json"] = dumps(doc)


def test_attack_hooks_no_verify_caught_by_pre_receive(setup: Setup) -> None:
    """The client's pre-push hook is skipped with --no-verify; the server judges anyway."""
    _run_pass(setup)
    assert setup.audit_push().returncode == 0
    before = setup.server_ref("refs/heads/main")
    setup.client.write("greeting.txt", "goodbye\n")
    setup.client.commit("unproven change")
    pushed = setup.push("--no-verify", "origin", "main")
    assert pushed.returncode != 0
    assert "pre-receive hook declined" in pushed.stderr and "UNKNOWN" in pushed.stderr
    assert setup.server_ref("refs/heads/main") == before


def test_attack_hooks_audit_ref_alone_with_untrusted_signature(setup: Setup) -> None:
    """Only refs/audit/runs/default is pushed, its tip signed by a stranger."""
    _run_pass(setup)
    _forge(setup, RUNS, Ed25519Signer.generate("mallory"))
    pushed = setup.push("--no-verify", "origin", RUNS)
    assert pushed.returncode != 0
    assert f"rejecting {RUNS}" in pushed.stderr and "untrusted key" in pushed.stderr
    assert setup.server_ref(RUNS) is None


def test_attack_hooks_unsigned_forgery_under_an_honest_run(setup: Setup) -> None:
    """The laundering attack of test_evidence, as far as the server is concerned: an unsigned
    'all passed' run, then an honest targeted run. The runner refuses to carry anything from an
    unsigned run (so the client stays UNKNOWN), and the server, which verifies every pushed run
    commit, refuses the whole atomic push anyway."""
    _run_pass(setup)
    assert setup.audit_push().returncode == 0
    setup.client.write("greeting.txt", "goodbye\n")
    setup.client.commit("break the greeting")
    assert audit(setup.client.path, "run").code == 1
    forged = _forge(setup, RUNS, None, _make_pass)
    assert audit(setup.client.path, "run", "build").code == 1  # no run signed on a forgery
    with honest_run_on_any_tip():  # as runs were signed before the tip check
        assert audit(setup.client.path, "run", "build").code == 3  # nothing carried from it
    pushed = setup.push("--no-verify", "--atomic", "origin", "main", RUNS)
    assert pushed.returncode != 0
    assert f"commit {forged} is not signed" in pushed.stderr
    assert setup.server_ref("refs/heads/main") != setup.client.git("rev-parse", "HEAD").strip()


def test_attack_hooks_delete_audit_refs_on_the_server(setup: Setup) -> None:
    """Deleting the plans ref and a runs ref on the server (which would reset trust to first use
    and drop evidence) is refused; both stay."""
    _run_pass(setup)
    assert setup.audit_push().returncode == 0
    plans, runs = setup.server_ref(PLANS), setup.server_ref(RUNS)
    deleted = setup.push("--no-verify", "origin", f":{PLANS}", f":{RUNS}")
    assert deleted.returncode != 0
    assert deleted.stderr.count("audit refs cannot be deleted") == 2
    assert (setup.server_ref(PLANS), setup.server_ref(RUNS)) == (plans, runs)


def test_attack_hooks_plans_change_signed_by_a_runner_key(setup: Setup) -> None:
    """A runner-only key, trusted on the server, signs a plans commit that retires the plan."""
    ci = Ed25519Signer.generate("ci")
    trust_add(open_repo(setup.client.path), _sealer(), ci.public_key, "runner", "ci")
    assert setup.push("origin", PLANS).returncode == 0
    before = setup.server_ref(PLANS)

    def retire(files: dict[str, bytes]) -> None:
        record = json.loads(files["seals/default.json"])
        record.update(version=record["version"] + 1, retired=True, change="retired")
        record.update(weakened=True, weakenings=["plan retired"])
        files["seals/default.json"] = dumps(record)
        del files["plans/default.json"]

    _forge(setup, PLANS, ci, retire)
    pushed = setup.push("origin", PLANS)
    assert pushed.returncode != 0 and "not signed by a trusted sealer" in pushed.stderr
    assert setup.server_ref(PLANS) == before


def test_attack_hooks_contract_replaced_in_place_by_a_sealer(setup: Setup) -> None:
    """With `allow_weaken: false` on the server, a sealer-signed hand-made commit swaps the sealed
    contract for a weaker one while keeping the seal version (what `plan seal` never writes)."""
    sealer = _sealer()
    set_policy(
        open_repo(setup.client.path),
        sealer,
        Policy(allow_weaken=False),
        allow_weaken=False,
        reason=None,
    )
    assert setup.push("origin", PLANS).returncode == 0
    before = setup.server_ref(PLANS)
    weak = json.loads(json.dumps(PLAN))
    weak["steps"][1]["verify"] = [{"type": "run", "argv": ["true"]}]
    setup.client.write_plan(weak)
    (checked,) = check_worktree(setup.client.path, "default")

    def swap(files: dict[str, bytes]) -> None:
        record = json.loads(files["seals/default.json"])
        record["contract_digest"] = checked.digest
        files["seals/default.json"] = dumps(record)
        files["plans/default.json"] = checked.file.data

    _forge(setup, PLANS, sealer, swap)
    pushed = setup.push("origin", PLANS)
    assert pushed.returncode != 0
    assert "changes seal v1 of plan 'default' without a new version" in pushed.stderr
    assert setup.server_ref(PLANS) == before


@pytest.mark.parametrize("transition", sorted(sealrules.TRANSITIONS))
def test_attack_hooks_sealing_rule_broken_by_a_sealer_signed_commit(
    setup: Setup, transition: str
) -> None:
    """The sealer's key signs a hand-made plans commit that breaks one rule of the seal chain:
    a weakening not recorded, a weakening where the policy forbids it, a seal version lowered,
    a seal record deleted, a policy that forbids weakening relaxed. pre-receive refuses each."""
    sealer = _sealer()
    client = open_repo(setup.client.path)
    v1 = sealrules.prepare(client, sealer, transition)
    assert setup.push("origin", PLANS).returncode == 0  # the legitimate history
    before = setup.server_ref(PLANS)
    forged = sealrules.forge(client, sealer, transition, v1)
    pushed = setup.push("--no-verify", "origin", PLANS)
    assert pushed.returncode != 0
    assert f"rejecting {PLANS}" in pushed.stderr
    assert sealrules.TRANSITIONS[transition] in pushed.stderr, pushed.stderr
    assert str(forged)[:12] in pushed.stderr
    assert setup.server_ref(PLANS) == before


def test_attack_hooks_unknown_audit_ref(setup: Setup) -> None:
    """A ref in refs/audit/ that gitaudit does not define (fetched by every client's
    `+refs/audit/*` refspec): the server keeps the namespace to the plans and runs refs."""
    _run_pass(setup)
    tip = setup.client.git("rev-parse", RUNS).strip()
    for ref in ("refs/audit/notes", "refs/audit/plans-v2", "refs/audit/runsx/default"):
        setup.client.git("update-ref", ref, tip)
        pushed = setup.push("--no-verify", "origin", ref)
        assert pushed.returncode != 0
        assert f"rejecting {ref}: unknown audit ref" in pushed.stderr
        assert setup.server_ref(ref) is None


def test_attack_hooks_merge_on_the_runs_ref(setup: Setup) -> None:
    """A merge signed by the trusted runner, its second parent an unsigned 'all passed' forgery:
    a walk of first parents (as signature checks do) would never see the forgery. Audit refs
    are linear; the server refuses the merge."""
    _run_pass(setup)
    assert setup.audit_push().returncode == 0
    git = open_repo(setup.client.path).git
    tip = git.references[RUNS].target
    honest = git[tip].peel(pygit2.Commit)
    files = read_files(git, honest.tree)
    _make_pass(files)
    who = pygit2.Signature("forger", "forger@example.test")
    forgery = git.create_commit(None, who, who, "forged\n", write_tree(git, files), [tip])
    merge = create_signed_commit(
        git, tree=honest.tree_id, parents=[tip, forgery], message="merge\n", signer=_sealer()
    )
    setup.client.git("update-ref", RUNS, str(merge))
    before = setup.server_ref(RUNS)
    pushed = setup.push("--no-verify", "origin", RUNS)
    assert pushed.returncode != 0
    assert f"rejecting {RUNS}" in pushed.stderr
    assert f"{str(merge)[:12]} is a merge; audit refs are linear" in pushed.stderr
    assert setup.server_ref(RUNS) == before


def test_attack_hooks_completion_claim_without_pass(setup: Setup) -> None:
    """commit-msg: a commit claiming `Audit-Claim: done` for a tree without PASS is refused."""
    setup.client.write("greeting.txt", "hello, unproven\n")
    subprocess.run(["git", "add", "-A"], cwd=setup.client.path, check=True)
    head = setup.client.git("rev-parse", "HEAD").strip()
    claim = subprocess.run(
        ["git", "commit", "-q", "-m", "all done\n\nAudit-Claim: done"],
        cwd=setup.client.path,
        capture_output=True,
        text=True,
        env=setup.env(),
        check=False,
    )
    assert claim.returncode != 0
    assert "claims completion ('Audit-Claim: done')" in claim.stderr
    assert setup.client.git("rev-parse", "HEAD").strip() == head


__all__ = ["setup"]


def test_attack_hooks_completion_claim_in_other_words() -> None:
    """The claim detector is a pattern match; these are completion claims all the same."""
    ids = {"REQ-2"}
    assert claims_completion("Closes REQ-2", ids) is not None  # the detected spelling
    for message in ("Fixed REQ-2", "Closes: REQ-2", "resolved REQ-2", "close REQ-2"):
        assert claims_completion(f"greeting\n\n{message}\n", ids) is not None, message
    # a comment line for Python's splitlines, the middle of a line git keeps whole
    for separator in ("\u2028", "\x0c", "\x85"):
        hidden = f"greeting\n\nx{separator}# Closes REQ-2\n"
        assert claims_completion(hidden, ids) is not None, repr(separator)


def _make_fail(files: dict[str, bytes]) -> None:
    doc = json.loads(files["run.json"])
    doc["verdict"] = "FAIL"
    doc["steps"]["check"]["status"] = "failed"
    files["run.json"] = dumps(doc)


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085"])
def test_attack_hooks_runs_ref_named_across_a_line_separator(setup: Setup, separator: str) -> None:
    """The server's ledger says the tree of main PASSed, then (newer, the same runner) FAILed.
    The agent pushes main with the older PASS run as `refs/audit/runs/default<U+2028>x`: a name
    git allows, but Python's splitlines cut the hook's input line there, so the update was
    judged as one of refs/audit/runs/default, the rewound ledger read as pushed evidence, and
    main accepted (before the fix). Lines now end in \\n alone, and a runs ref must name a plan."""
    _run_pass(setup)
    passed = setup.client.git("rev-parse", RUNS).strip()
    assert setup.push("--no-verify", "origin", RUNS).returncode == 0
    _forge(setup, RUNS, _sealer(), _make_fail)  # the trusted runner's newer verdict: FAIL
    assert setup.push("--no-verify", "origin", RUNS).returncode == 0
    assert setup.push("--no-verify", "origin", "main").returncode != 0  # FAIL, as it should
    alias = f"refs/audit/runs/default{separator}x"
    pushed = setup.push("--no-verify", "origin", "main", f"{passed}:{alias}")
    assert pushed.returncode != 0, pushed.stderr
    assert f"{'default' + separator + 'x'!r} is no plan name" in pushed.stderr
    assert "Traceback" not in pushed.stderr
    assert setup.server_ref("refs/heads/main") is None
    assert setup.server_ref(alias) is None


@pytest.mark.parametrize("space", ["\u00a0", "\u3000", "\u2007"])
def test_attack_hooks_ref_named_with_unicode_whitespace(setup: Setup, space: str) -> None:
    """A branch and a runs ref whose names hold a no-break (or ideographic, figure) space, which
    git allows: the hook split each input line at any whitespace, found four fields instead of
    three and skipped the line, so an unproven commit went onto a protected branch and an
    unsigned 'all passed' commit onto the ledger, neither judged (before the fix)."""
    _run_pass(setup)
    setup.client.write("greeting.txt", "goodbye\n")
    setup.client.commit("unproven change")
    forged = _forge(setup, RUNS, None, _make_pass)
    branch, runs = f"refs/heads/main{space}x", f"refs/audit/runs/default{space}x"
    pushed = setup.push("--no-verify", "origin", f"main:{branch}", f"{forged}:{runs}")
    assert pushed.returncode != 0, pushed.stderr
    assert f"update of {branch} to" in pushed.stderr and "UNKNOWN" in pushed.stderr
    assert f"{'default' + space + 'x'!r} is no plan name" in pushed.stderr
    assert "Traceback" not in pushed.stderr
    assert (setup.server_ref(branch), setup.server_ref(runs)) == (None, None)


@pytest.mark.parametrize("how", ["runs copy", "plans copy", "elsewhere below", "deletion"])
def test_attack_hooks_mirror_refs_pushed_to_the_server(setup: Setup, how: str) -> None:
    """`refs/gitaudit/` holds a clone's copies of its remotes' audit refs, and the gate reads
    them beside refs/audit/* (a copy may only add runner-signed runs). A server keeps none, so a
    pushed copy could only be the pusher's choice of evidence for the server's gate to weigh, and
    deleting one (left there by an administrator) its choice of what to hide: every update
    below refs/gitaudit/ is refused, whatever it holds."""
    _run_pass(setup)
    mirror = "refs/gitaudit/remotes/origin/audit"
    if how == "deletion":
        tip = setup.client.git("rev-parse", RUNS).strip()
        assert setup.push("--no-verify", "origin", RUNS).returncode == 0
        subprocess.run(
            ["git", "update-ref", f"{mirror}/runs/default", tip], cwd=setup.server, check=True
        )
        ref, spec = f"{mirror}/runs/default", f":{mirror}/runs/default"
    else:
        source, ref = {
            "runs copy": (RUNS, f"{mirror}/runs/default"),
            "plans copy": (PLANS, f"{mirror}/plans"),
            "elsewhere below": (RUNS, "refs/gitaudit/evidence"),
        }[how]
        spec = f"{source}:{ref}"
    before = setup.server_ref(ref)
    pushed = setup.push("--no-verify", "origin", spec)
    assert pushed.returncode != 0, pushed.stderr
    assert f"rejecting {ref}: refs/gitaudit/ holds a clone's copies" in pushed.stderr
    assert "Traceback" not in pushed.stderr
    assert setup.server_ref(ref) == before


def _pkt(data: bytes) -> bytes:
    return b"%04x" % (len(data) + 4) + data


def _raw_push(
    setup: Setup,
    commands: list[tuple[str, str, str]],
    revs: list[str],
    env: dict[str, str] | None = None,
) -> str:
    """A push spoken to the server's `git receive-pack` directly, as any client can: each
    command's old value is the pusher's to write (git's client sends the one the server
    advertised). The objects of *revs* go in the pack; git's report and messages are returned.
    *env*: more of receive-pack's environment (a host's `GIT_NAMESPACE`)."""
    lines = b"".join(
        _pkt(f"{old} {new} {ref}".encode() + (b"\0report-status" if not i else b"") + b"\n")
        for i, (old, new, ref) in enumerate(commands)
    )
    pack = subprocess.run(
        ["git", "pack-objects", "--stdout", "--revs"],
        cwd=setup.client.path,
        input="".join(f"{r}\n" for r in revs).encode(),
        capture_output=True,
        check=True,
    ).stdout
    proc = subprocess.Popen(
        ["git", "receive-pack", str(setup.server)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**setup.env(), **(env or {})},
    )
    assert proc.stdout is not None
    while size := int(proc.stdout.read(4), 16):  # the advertised refs, up to a flush
        proc.stdout.read(size - 4)
    out, err = proc.communicate(lines + b"0000" + pack)
    return out.decode(errors="replace") + err.decode(errors="replace")


@pytest.mark.parametrize("claimed", ["the rewound run itself", "no ledger yet"])
def test_attack_hooks_runs_update_with_a_false_old_value(setup: Setup, claimed: str) -> None:
    """The server's ledger says main's tree PASSed, then (newer) FAILed. The pusher speaks to
    receive-pack itself and sends, in one non-atomic push, main and refs/audit/runs/default
    moved back to the PASS run with the old value it chose: that run (nothing to verify from
    it), or zeros (a new ledger, verified from its genuine root). git gives pre-receive the old
    value the pusher sent and checks it only when it moves the ref: the hook verified the
    update from there, read the rewound ledger as pushed evidence and passed main; then the
    runs ref failed to lock and main landed (both variants, before the fix). An audit ref's
    old value must now be what the server holds."""
    _run_pass(setup)
    passed = setup.client.git("rev-parse", RUNS).strip()
    assert setup.push("--no-verify", "origin", RUNS).returncode == 0
    failed = _forge(setup, RUNS, _sealer(), _make_fail)  # the trusted runner's newer verdict
    assert setup.push("--no-verify", "origin", RUNS).returncode == 0
    assert setup.push("--no-verify", "origin", "main").returncode != 0  # FAIL, as it should
    main = setup.client.git("rev-parse", "main").strip()
    old = passed if claimed == "the rewound run itself" else ZERO
    report = _raw_push(setup, [(old, passed, RUNS), (ZERO, main, "refs/heads/main")], [main])
    assert f"rejecting {RUNS}: the push says it was at {old[:12]}, but the server holds " in report
    assert f"holds {failed[:12]} " in report and "pre-receive hook declined" in report
    assert "Traceback" not in report
    assert (setup.server_ref("refs/heads/main"), setup.server_ref(RUNS)) == (None, failed)


@pytest.mark.parametrize("source", ["the plans chain", "the runs of another plan"])
def test_attack_hooks_runs_ref_squatted_with_other_signed_commits(
    setup: Setup, source: str
) -> None:
    """The key `git audit init` made signs as sealer and runner. The pusher (no key) takes
    commits it signed for something else, the plans chain or plan default's runs, and pushes
    them as refs/audit/runs/release, a ledger the server does not have yet: every commit is
    signed by a trusted runner, so the server accepted it (both, before the fix). That chain
    would stay the ledger of plan release for good (audit refs are never deleted), its evidence
    malformed, and `git audit push` refuses to replay runs onto a tip that is no run of the
    plan. Each pushed runs commit must now be a run of the ref's plan."""
    _run_pass(setup)
    ref = "refs/audit/runs/release"
    tip = setup.client.git("rev-parse", PLANS if source == "the plans chain" else RUNS).strip()
    pushed = setup.push("--no-verify", "origin", f"{tip}:{ref}")
    assert pushed.returncode != 0, pushed.stderr
    what = "is no run (" if source == "the plans chain" else "is a run of plan 'default'"
    assert f"rejecting {ref}: " in pushed.stderr and what in pushed.stderr, pushed.stderr
    assert "Traceback" not in pushed.stderr
    assert setup.server_ref(ref) is None
    # the control: the runs of plan default, as its own ledger
    assert setup.push("--no-verify", "origin", RUNS).returncode == 0


def _plant_gitaudit(folder: Path) -> None:
    """A package named gitaudit whose hook entry points (by module name, and the function the
    shims call) let everything through."""
    (folder / "gitaudit" / "hooks").mkdir(parents=True)
    (folder / "gitaudit" / "__init__.py").write_text("")
    (folder / "gitaudit" / "hooks" / "__init__.py").write_text("")
    (folder / "gitaudit" / "hooks" / "__main__.py").write_text(
        "import sys\nprint('planted hook ran', file=sys.stderr)\nsys.exit(0)\n"
    )
    (folder / "gitaudit" / "hooks" / "entry.py").write_text(
        "import sys\n\ndef run():\n    print('planted hook ran', file=sys.stderr)\n"
        "    sys.exit(0)\n\nmain = run\n"
    )


@pytest.mark.parametrize("how", ["push", "commit"])
def test_attack_hooks_gitaudit_package_planted_in_the_work_tree(setup: Setup, how: str) -> None:
    """The hook shims ran `python -m gitaudit.hooks` (now `python -c` importing
    gitaudit.hooks.entry), and git runs a client hook in the work tree's top folder, which
    Python put before the installed package. An untracked `gitaudit/`
    folder the agent writes (no --no-verify, no change to .git) answered for gitaudit in the
    user's own commits and pushes too: an unproven commit was pushed, and a commit claiming
    completion without PASS was made (both, before the fix). The shims run Python with -P."""
    setup.client.write("greeting.txt", "hello, unproven\n")
    env = setup.env()
    _plant_gitaudit(setup.client.path)
    setup.client.git("add", "greeting.txt")
    head = setup.client.git("rev-parse", "HEAD").strip()
    message = "all done\n\nAudit-Claim: done" if how == "commit" else "unproven"
    committed = subprocess.run(
        ["git", "commit", "-q", "-m", message],
        cwd=setup.client.path,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert "planted hook ran" not in committed.stderr
    if how == "commit":
        assert committed.returncode != 0, committed.stderr
        assert "claims completion ('Audit-Claim: done')" in committed.stderr
        assert setup.client.git("rev-parse", "HEAD").strip() == head
        return
    assert committed.returncode == 0, committed.stderr
    pushed = subprocess.run(
        ["git", "push", "origin", "main"],
        cwd=setup.client.path,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert "planted hook ran" not in pushed.stderr
    assert pushed.returncode != 0, pushed.stderr
    assert "push of refs/heads/main to refs/heads/main" in pushed.stderr
    assert setup.server_ref("refs/heads/main") is None


# ------------------------------------------------------- what else a push can make the server do


def test_attack_hooks_runs_ref_named_twice_in_one_push(setup: Setup) -> None:
    """The trusted runner's ledger says main's tree PASSed, then (newer) FAILed. The pusher
    speaks to receive-pack itself and names refs/audit/runs/default twice in one push: first
    with the whole ledger (the FAIL on top), then with the PASS run alone, beside main. git
    gives pre-receive both lines and applies only the first (the second no longer finds the
    ref at its old value): the hook judged main with the last, the PASS, and main landed on a
    server whose ledger says its tree FAILed (before the fix). A push names each ref once."""
    _run_pass(setup)
    passed = setup.client.git("rev-parse", RUNS).strip()
    failed = _forge(setup, RUNS, _sealer(), _make_fail)  # the trusted runner's newer verdict
    main = setup.client.git("rev-parse", "main").strip()
    commands = [(ZERO, failed, RUNS), (ZERO, passed, RUNS), (ZERO, main, "refs/heads/main")]
    report = _raw_push(setup, commands, [main, failed])
    assert f"rejecting {RUNS}: the push names it twice" in report, report
    assert "pre-receive hook declined" in report and "Traceback" not in report
    assert (setup.server_ref("refs/heads/main"), setup.server_ref(RUNS)) == (None, None)
    # the control: the whole ledger and main, each named once: main's tree FAILed
    pushed = setup.push("--no-verify", "origin", "main", RUNS)
    assert pushed.returncode != 0 and "FAIL" in pushed.stderr, pushed.stderr
    assert setup.push("--no-verify", "origin", RUNS).returncode == 0
    assert setup.server_ref(RUNS) == failed


def test_attack_hooks_replace_ref_pushed_to_the_server(setup: Setup) -> None:
    """main PASSed on the server. The pusher then pushes `refs/replace/<main's commit>` holding
    an unproven commit: no protected ref moves, so the hook let it through (before the fix),
    and every git command on the server (a deploy hook's `git checkout main`, `git archive`)
    read main as the unproven commit, while gitaudit, which never follows replace refs, still
    said PASS. A server takes no replace ref (deleting one is allowed)."""
    _run_pass(setup)
    assert setup.audit_push().returncode == 0
    proven = setup.client.git("rev-parse", "main").strip()
    tree = setup.client.git("rev-parse", "main^{tree}").strip()
    setup.client.write("greeting.txt", "goodbye\n")
    unproven = setup.client.commit("unproven change")
    for name in (proven, tree):
        swap = unproven if name == proven else f"{unproven}^{{tree}}"
        target = setup.client.git("rev-parse", swap).strip()
        pushed = setup.push("--no-verify", "origin", f"{target}:refs/replace/{name}")
        assert pushed.returncode != 0, pushed.stderr
        assert f"rejecting refs/replace/{name}: " in pushed.stderr, pushed.stderr
        assert "Traceback" not in pushed.stderr
        assert setup.server_ref(f"refs/replace/{name}") is None
    shown = subprocess.run(
        ["git", "rev-parse", "main^{tree}"],
        cwd=setup.server,
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in setup.env().items() if k != "GIT_NO_REPLACE_OBJECTS"},
    )
    assert shown.stdout.strip() == tree


CASE_VARIANTS = {
    "runs ledger": "refs/AUDIT/runs/default",
    "plans ref deleted": "refs/Audit/plans",
    "mirror": "refs/GitAudit/remotes/origin/audit/runs/default",
    "replace ref": "refs/REPLACE/{main}",
    "namespace": "refs/Namespaces/x/refs/heads/main",
    "protected branch": "refs/Heads/main",
    "protected branch, long s": "refs/head\u017f/main",
}


@pytest.mark.parametrize("how", list(CASE_VARIANTS))
def test_attack_hooks_case_variant_of_a_judged_ref(setup: Setup, how: str) -> None:
    """A name that is an audit ref, a mirror, a replace ref, a namespace's ref or a protected
    branch but for case (`refs/AUDIT/runs/default`, `refs/Heads/main`, `refs/head<U+017F>/main`,
    whose long s folds to s): the hook compared names exactly and let each through unjudged,
    an unsigned 'all passed' run, the deletion of the plans ref, an unproven commit (all before
    the fix). On a
    server whose file system ignores case (macOS, Windows) git writes such a loose ref into the
    very file of the ref it folds to. Each is refused; a branch the policy protects as spelt
    still passes (the control)."""
    _run_pass(setup)
    assert setup.audit_push().returncode == 0
    proven = setup.client.git("rev-parse", "main").strip()
    ref = CASE_VARIANTS[how].format(main=proven)
    setup.client.write("greeting.txt", "goodbye\n")
    unproven = setup.client.commit("unproven change")
    if how == "plans ref deleted":
        plans = setup.client.git("rev-parse", PLANS).strip()
        report = _raw_push(setup, [(plans, ZERO, ref)], [])
    else:
        source = _forge(setup, RUNS, None, _make_pass) if how in ("runs ledger", "mirror") else ""
        pushed = setup.push("--no-verify", "origin", f"{source or unproven}:{ref}")
        assert pushed.returncode != 0, pushed.stderr
        report = pushed.stderr
    assert f"rejecting {ref}: " in report, report
    why = "matches it only when case is ignored" if "branch" in how else "a case variant of"
    assert why in report and "Traceback" not in report, report
    assert setup.server_ref(ref) is None
    assert setup.server_ref(PLANS) is not None
    # the control: a proven commit on a protected branch of any spelling refs/heads/* matches
    topic = setup.push("--no-verify", "origin", f"{proven}:refs/heads/Topic-A")
    assert topic.returncode == 0, topic.stderr


UNPROVEN_PUSHES = {
    "beside a proven branch": "update of refs/heads/topic to",
    "with a tag of it": "update of refs/heads/topic to",
    "plan added under another name": "plan 'other' is not sealed",
    "plan file renamed": "plan 'default' is sealed as active but .gitaudit/plans/default.json",
    "as an annotated tag object": "update of refs/heads/topic to",
    "as its bare tree": "update of refs/heads/topic to",
}


@pytest.mark.parametrize("how", list(UNPROVEN_PUSHES))
def test_attack_hooks_unproven_commit_pushed_in_another_shape(setup: Setup, how: str) -> None:
    """main is proven on the server. The pusher sends an unproven commit in shapes the other
    tests do not: as one of two branches of a push whose other branch is proven; with an
    unprotected tag of it; with a tree that adds a copy of the plan under another name (which
    nothing sealed), or renames the plan file; as an annotated tag object or its bare tree
    object on a branch (spoken to receive-pack, which takes a non-commit on a new branch).
    Each is judged (the tree behind the value, every protected ref), and nothing lands."""
    _run_pass(setup)
    assert setup.audit_push().returncode == 0
    proven = setup.client.git("rev-parse", "main").strip()
    setup.client.write("greeting.txt", "hello, unproven\n")
    if how == "plan added under another name":
        setup.client.write_plan(PLAN, "other")
    if how == "plan file renamed":
        setup.client.git("mv", ".gitaudit/plans/default.json", ".gitaudit/plans/other.json")
    unproven = setup.client.commit("unproven change")
    topic, refs = "refs/heads/topic", ["refs/heads/topic"]
    if how in ("as an annotated tag object", "as its bare tree"):
        setup.client.git("tag", "-a", "-m", "release", "v1", unproven)
        value = setup.client.git(
            "rev-parse", "refs/tags/v1" if how == "as an annotated tag object" else "HEAD^{tree}"
        ).strip()
        report = _raw_push(setup, [(ZERO, value, topic)], ["refs/tags/v1"])
    else:
        specs = [f"{unproven}:{topic}"]
        if how == "beside a proven branch":
            specs.append(f"{proven}:refs/heads/proven")
            refs.append("refs/heads/proven")
        if how == "with a tag of it":
            setup.client.git("tag", "v1", unproven)
            specs.append("refs/tags/v1")
            refs.append("refs/tags/v1")
        pushed = setup.push("--no-verify", "origin", *specs)
        assert pushed.returncode != 0, pushed.stderr
        report = pushed.stderr
    assert UNPROVEN_PUSHES[how] in report and "pre-receive hook declined" in report, report
    assert "Traceback" not in report
    assert [setup.server_ref(ref) for ref in refs] == [None] * len(refs)
    assert setup.server_ref("refs/heads/main") == proven


def _gitaudit_venv_inside(repo: Path) -> Path:
    """A virtual environment in the project's ignored `.venv/` whose Python imports this
    gitaudit (a `.pth` line adds this interpreter's own site folders): the Python a user who
    installed gitaudit into the project's environment runs. Its `python`."""
    import site
    import sys

    folder = repo / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    (repo / ".git" / "info" / "exclude").write_text(".venv/\n")
    python = folder / "bin" / "python"
    packages = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    outer = [p for p in site.getsitepackages() if Path(p).is_dir()]
    lines = "".join(f"import site; site.addsitedir({p!r})\n" for p in outer)
    (Path(packages) / "outer.pth").write_text(lines)
    return python


@pytest.mark.parametrize("entry", ["hooks", "agent", "init"])
def test_attack_hooks_run_by_a_python_inside_the_work_tree(
    world: Any, tmp_path: Path, entry: str
) -> None:
    """The user installed gitaudit into the project's own virtual environment (`.venv/`,
    ignored) and installs the hooks with it: the shims would run that Python (and the agent
    host the `git-audit` found there on PATH), and a `.pth` file the agent adds to it (an
    ignored file; nothing in `.git` changes) runs before gitaudit's first line, so the
    user's own push of an unproven commit got through (before the fix). gitaudit refuses to
    install hooks that would run code from inside the work tree, and writes nothing
    (`git audit init` sets up the rest and says why the hooks are not installed)."""
    python = _gitaudit_venv_inside(world.path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{python.parent}{os.pathsep}{env['PATH']}"
    if entry in ("hooks", "init"):
        argv = [
            str(python),
            "-m",
            "gitaudit",
            *(["init"] if entry == "init" else ["hooks", "install"]),
        ]
        written = world.path / ".git" / "hooks" / "pre-push"
    else:
        (python.parent / "git-audit").write_text(
            f"#!{python}\nfrom gitaudit.cli.entry import main\nmain()\n"
        )
        (python.parent / "git-audit").chmod(0o755)
        argv = [sys.executable, "-m", "gitaudit", "agent", "install"]  # gitaudit outside
        written = world.path / ".claude" / "settings.json"
    done = subprocess.run(
        argv, cwd=world.path, capture_output=True, text=True, env=env, check=False
    )
    if entry == "init":
        assert done.returncode == 0, done
        assert "hooks: not installed: gitaudit runs from" in done.stdout, done
        assert "install gitaudit outside" in done.stdout, done
    else:
        assert done.returncode == 1, done
        assert "inside the work tree" in done.stderr and "install gitaudit outside" in done.stderr
    assert not written.exists() or "gitaudit" not in written.read_text()


def _into_namespace(setup: Setup, how: str, *specs: str) -> subprocess.CompletedProcess[str]:
    """A push whose receive-pack serves namespace x of the server, as a host serving several
    projects from one repository sets it up: by the variable, or by `git --namespace`."""
    receive = {
        "env": "env GIT_NAMESPACE=x git-receive-pack",
        "option": "git --namespace=x receive-pack",
    }[how]
    return setup.push("--no-verify", f"--receive-pack={receive}", "origin", *specs)


NAMESPACED = {
    "a protected tag, the namespace packed": ("env", "refs/tags/v1"),
    "a protected tag, by git --namespace": ("option", "refs/tags/v1"),
    "its branch by its full name": ("", "refs/heads/main"),
    "its ledger by its full name": ("", RUNS),
}


@pytest.mark.parametrize("how", list(NAMESPACED))
def test_attack_hooks_push_into_a_git_namespace(setup: Setup, how: str) -> None:
    """A host serves project x from the server's repository with GIT_NAMESPACE=x: git gives
    pre-receive the names without the namespace and applies them under refs/namespaces/x/.
    The hook's pygit2 follows the variable for loose refs only, and looks for packed ones in
    refs/namespaces/x/packed-refs, a file git never writes: after `git gc` (`pack-refs`) it saw
    none of x's refs. x's sealed policy protects tags: the hook read no plans, protected
    refs/heads/* alone, and an unproven tag landed in x. And a push outside any namespace named
    x's refs in full, `refs/namespaces/x/refs/heads/main` (an unproven commit) or x's runs
    ledger (an unsigned 'all passed' run): neither an audit ref nor protected by that name,
    each landed unjudged, and x served it as its own (all, before the fix). A push into a
    namespace is refused, naming the variable, and so is any ref below refs/namespaces/; the
    control: the server still judges a push outside any namespace."""
    _run_pass(setup)
    assert setup.audit_push().returncode == 0  # the server's own ledger, outside any namespace
    receive, ref = NAMESPACED[how]
    setup.client.write("greeting.txt", "hello, unproven\n")
    unproven = setup.client.commit("unproven change")
    if receive:
        tags = Policy(protected_refs=("refs/heads/*", "refs/tags/*"))
        set_policy(open_repo(setup.client.path), _sealer(), tags, allow_weaken=False, reason=None)
        # x's ledger, as a push into x left it (fetched here: the hook now refuses that push)
        git(
            setup.server,
            "fetch",
            "-q",
            str(setup.client.path),
            f"{PLANS}:refs/namespaces/x/{PLANS}",
        )
        git(setup.server, "pack-refs", "--all")  # what `git gc` does
        setup.client.git("tag", "v1", unproven)
        pushed = _into_namespace(setup, receive, ref)
        why = "pre-receive failed closed: GIT_NAMESPACE is set ('x'): gitaudit cannot judge"
    else:
        source = _forge(setup, RUNS, None, _make_pass) if ref == RUNS else unproven
        pushed = setup.push("--no-verify", "origin", f"{source}:refs/namespaces/x/{ref}")
        why = f"rejecting refs/namespaces/x/{ref}: a git namespace's refs"
    assert pushed.returncode != 0, pushed.stderr
    assert "pre-receive hook declined" in pushed.stderr and why in pushed.stderr, pushed.stderr
    assert "Traceback" not in pushed.stderr
    assert setup.server_ref(f"refs/namespaces/x/{ref}") is None
    # the control: a push outside any namespace is judged as ever
    assert setup.push("--no-verify", "origin", "main").returncode != 0
    assert setup.push("--no-verify", "origin", "HEAD~1:refs/heads/proven").returncode == 0


@pytest.mark.parametrize("gate", ["status", "pre-push", "commit-msg"])
def test_attack_hooks_git_namespace_in_the_callers_environment(setup: Setup, gate: str) -> None:
    """The client's ledger says main's tree PASSed, then (newer, the same runner) FAILed. The
    agent copies the rewound ledger (plans, and runs up to the PASS) into namespace x of the
    clone and sets GIT_NAMESPACE=x for `git audit status`, `git push` and `git commit`. The
    gate opens the repository by its path, never from git's environment, and its git processes
    never get the variable: it reads the clone's own refs/audit/*, and says FAIL each time (no
    hole found: this proves it stays so)."""
    _run_pass(setup)
    passed = setup.client.git("rev-parse", RUNS).strip()
    _forge(setup, RUNS, _sealer(), _make_fail)  # the trusted runner's newer verdict: FAIL
    plans = setup.client.git("rev-parse", PLANS).strip()
    setup.client.git("update-ref", f"refs/namespaces/x/{PLANS}", plans)
    setup.client.git("update-ref", f"refs/namespaces/x/{RUNS}", passed)
    env = {**setup.env(), "GIT_NAMESPACE": "x"}
    head = setup.client.git("rev-parse", "HEAD").strip()
    if gate == "status":
        judged = audit(setup.client.path, "status", env={"GIT_NAMESPACE": "x"})
        assert judged.code == 1 and "FAIL" in judged.out, judged.out + judged.err
        return
    argv = (
        ["push", "origin", "main"]
        if gate == "pre-push"
        else ["commit", "-q", "--allow-empty", "-m", "all done\n\nAudit-Claim: done"]
    )
    done = subprocess.run(
        ["git", *argv], cwd=setup.client.path, capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode != 0, done.stderr
    blocked = "push of refs/heads/main" if gate == "pre-push" else "claims completion"
    assert f"{blocked}" in done.stderr and "the gate says FAIL" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert setup.server_ref("refs/heads/main") is None
    assert setup.client.git("rev-parse", "HEAD").strip() == head


@pytest.mark.parametrize("pin", ["unset", "empty", "blank"])
def test_attack_hooks_first_plans_push_to_an_unpinned_server(
    sealed: World, tmp_path: Path, pin: str
) -> None:
    """A server whose administrator installed the hook but pinned no `audit.rootKey` (or an
    empty one): mallory pushes first a plans ref whose root is her own key, then her branch
    with her own PASS run. The server took the root on first use and both pushes (unset and
    empty: 2 of 3 before the fix; a blank pin was refused as naming another key). The first
    plans ref is now refused until the server pins its root, and so every branch after it
    ("nothing can PASS")."""
    fabricated = tmp_path / "fabricated"
    subprocess.run(["git", "clone", "-q", str(sealed.path), str(fabricated)], check=True)
    handle = open_repo(fabricated)
    trust_init(handle, sealed.mallory, "mallory")
    (checked,) = check_worktree(fabricated, "default")
    seal_plan(handle, sealed.mallory, checked)
    assert run_plan(open_repo(fabricated), "default", sealed.mallory).verdict == "PASS"
    server = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(server))
    if pin != "unset":
        git(server, "config", "audit.rootKey", "" if pin == "empty" else "  ")
    assert audit(server, "hooks", "install", "--server").code == 0
    first = subprocess.run(
        ["git", "push", str(server), f"{PLANS}:{PLANS}"],
        cwd=fabricated,
        capture_output=True,
        text=True,
        check=False,
    )
    assert first.returncode != 0, first.stderr
    assert "the server pins no root of trust" in first.stderr
    assert "git config audit.rootKey" in first.stderr
    second = subprocess.run(
        ["git", "push", str(server), "HEAD:refs/heads/main", f"{RUNS}:{RUNS}"],
        cwd=fabricated,
        capture_output=True,
        text=True,
        check=False,
    )
    assert second.returncode != 0, second.stderr
    assert git(server, "for-each-ref").strip() == ""


SHADOWS = {
    "a tag named as the branch": ("refs/tags/main", "main", "refs/heads/main"),
    "a ref below refs/ named as a branch": ("refs/release/1", "release/1", "refs/heads/release/1"),
    "a ref below refs/ named as a protected tag": ("refs/v/1", "v/1", "refs/tags/v/1"),
    "a tag, then the branch it names": ("refs/tags/release", "release", "refs/heads/release"),
    "the branch and a tag of its name in one push": ("refs/tags/rc", "rc", "refs/heads/rc"),
}


def _server_reads(setup: Setup, name: str) -> str | None:
    """What git on the server reads for the short *name* (a deploy's `git archive NAME`)."""
    return setup.server_ref(f"{name}^{{commit}}")


@pytest.mark.parametrize("how", list(SHADOWS))
def test_attack_hooks_ref_that_git_reads_before_a_protected_one(setup: Setup, how: str) -> None:
    """git reads a short name as refs/NAME, then refs/tags/NAME, then refs/heads/NAME (`git
    help revisions`): on the server, `git archive main` or `git show main:app.py` (a deploy)
    reads a tag `main` before the proven branch main, and a ref `refs/release/1` before the
    proven branch `release/1` (git refuses a ref right below refs/, not one deeper). The
    pusher sends an unproven commit as such a ref, which no pattern of the policy protects
    (also `refs/v/1` where the policy protects tags, before the proven tag `v/1`): the hook let
    each through, and git on the server read the proven name as the unproven code (before the
    fix); so it did for an unprotected tag `release` pushed before the proven branch `release`,
    or in the same push as the branch. A ref git reads before a protected one is refused, and
    so is a protected ref while such a ref stands before it (the fix: delete that ref)."""
    _run_pass(setup)
    assert setup.audit_push().returncode == 0
    proven = setup.client.git("rev-parse", "main").strip()
    ref, name, protected = SHADOWS[how]
    if protected.startswith("refs/tags/"):
        tags = Policy(protected_refs=("refs/heads/*", "refs/tags/*"))
        set_policy(open_repo(setup.client.path), _sealer(), tags, allow_weaken=False, reason=None)
        assert setup.push("--no-verify", "origin", PLANS).returncode == 0
    if "one push" not in how and "then" not in how:
        assert setup.push("--no-verify", "origin", f"{proven}:{protected}").returncode == 0
    setup.client.write("greeting.txt", "hello, unproven\n")
    unproven = setup.client.commit("unproven change")
    if how == "a tag, then the branch it names":
        assert setup.push("--no-verify", "origin", f"{unproven}:{ref}").returncode == 0
        pushed = setup.push("--no-verify", "origin", f"{proven}:{protected}")
        refused, why = protected, f"{ref} stands before it"
    else:
        specs = [f"{unproven}:{ref}"]
        if how == "the branch and a tag of its name in one push":
            specs.append(f"{proven}:{protected}")
        pushed = setup.push("--no-verify", "origin", *specs)
        refused, why = ref, f"git reads {name!r} as this ref before {protected}"
    assert pushed.returncode != 0, pushed.stderr
    assert f"rejecting {refused}: " in pushed.stderr and why in pushed.stderr, pushed.stderr
    assert "Traceback" not in pushed.stderr
    if how != "a tag, then the branch it names":
        assert setup.server_ref(ref) is None
        assert _server_reads(setup, name) in (None, proven)
    else:  # the fix the refusal names: delete the ref that stands before it, then push again
        assert setup.push("--no-verify", "origin", f":{ref}").returncode == 0
        assert setup.push("--no-verify", "origin", f"{proven}:{protected}").returncode == 0
        assert _server_reads(setup, name) == proven


@pytest.mark.parametrize(
    "source",
    [":/with a plan", "main^{/with a plan}", "HEAD@{0 seconds ago}", "beside a proven branch"],
)
def test_attack_hooks_pre_push_source_written_with_spaces(
    setup: Setup, tmp_path: Path, source: str
) -> None:
    """main's commit has no evidence. The agent pushes it to a host without pre-receive (as
    GitHub is) naming it by a revision that holds a space: `:/with a plan`, `main^{/with a
    plan}`, `HEAD@{0 seconds ago}` (also beside a proven branch in the same push). git writes
    that revision as the pre-push line's local ref, so the line had five fields or more, and the
    hook skipped it: no `--no-verify`, nothing in `.git` changed, and the unproven commit landed
    (all four, before the fix). The line is now read from its end (a ref name and two object
    ids), and an unreadable one fails closed: the push is judged and blocked."""
    hosted = tmp_path / "hosted.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(hosted))
    setup.client.git("remote", "add", "hosted", str(hosted))
    plain = setup.push("hosted", "main")  # the control: the plain name is judged
    assert plain.returncode != 0 and "push of refs/heads/main" in plain.stderr, plain.stderr
    specs = [f"{source}:refs/heads/main"]
    if source == "beside a proven branch":
        _run_pass(setup)
        setup.client.write("greeting.txt", "hello, unproven\n")
        setup.client.commit("unproven change")
        specs = ["HEAD~1:refs/heads/proven", "main^{/unproven change}:refs/heads/main"]
    done = setup.push("hosted", *specs)
    assert done.returncode != 0, done.stderr
    assert "to refs/heads/main" in done.stderr and "the gate says" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert git(hosted, "for-each-ref").strip() == ""


# ------------------------------------------------------------ a symbolic ref kept on the server


def _alias_policy(world: World, how: str) -> None:
    """The policy of *how*: main proven by ci alone (every branch protected), or main the only
    protected ref."""
    from dataclasses import replace

    from gitaudit.ledger.plansref import read_state
    from gitaudit.ledger.trust import EvidenceRule

    current = read_state(world.handle()).policy
    if how.startswith("rule"):
        policy = replace(current, evidence=(EvidenceRule("refs/heads/main", ("ci",)),))
    else:
        policy = replace(current, protected_refs=("refs/heads/main",))
    set_policy(world.handle(), world.alice, policy, allow_weaken=True, reason="aliases")


@pytest.mark.parametrize(
    ("how", "alias", "chain"),
    [
        ("rule: the agent's own run", "refs/heads/master", ()),
        ("rule: the agent's own run", "refs/heads/latest", ("refs/heads/master",)),
        ("only main protected: no run", "refs/heads/stable", ()),
        ("only main protected: no run", "refs/tags/latest", ()),
    ],
)
def test_attack_hooks_push_through_a_symbolic_ref_on_the_server(
    world: World, tmp_path: Path, how: str, alias: str, chain: tuple[str, ...]
) -> None:
    """The server keeps a symbolic ref for main (`git symbolic-ref refs/heads/master
    refs/heads/main`, as many keep master after renaming it; or an alias of that alias).
    git gives pre-receive the name pushed, and moves the ref it points to. main is proven by
    ci alone, and the agent pushes its own PASS run with the commit as that alias; or main is
    the only protected ref and the agent pushes a commit without any evidence to an alias
    named `refs/heads/stable` or `refs/tags/latest`. The hook judged the alias (for no rule,
    or not at all) and main moved to the unproven commit (all four, before the fix). An update
    is now judged as one of the ref git moves."""
    from tests.adversarial.conftest import STRICT, runner

    world.seal(STRICT)
    _alias_policy(world, how)
    agent = runner(world, "agent")  # trusted, but advisory for main where ci alone proves it
    server = world.serve(tmp_path / "server.git")
    world.run()  # ci proves the first main
    first = world.repo.git("rev-parse", "HEAD").strip()
    assert world.repo.git("push", "-q", "--atomic", "origin", "HEAD:refs/heads/main", RUNS) == ""
    for name, target in zip((alias, *chain), (*chain, "refs/heads/main"), strict=True):
        git(server, "symbolic-ref", name, target)
    world.repo.write("unproven.txt", "never run by ci\n")
    world.repo.git("add", "unproven.txt")
    world.repo.git("commit", "-q", "-m", "unproven")
    refs = []
    if how.startswith("rule"):
        world.run(signer=agent)
        refs = [RUNS]
    head = world.repo.git("rev-parse", "HEAD").strip()
    pushed = subprocess.run(
        ["git", "push", "--no-verify", "origin", f"+HEAD:{alias}", *refs],
        cwd=world.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert pushed.returncode != 0, pushed.stderr
    assert "pre-receive hook declined" in pushed.stderr and "Traceback" not in pushed.stderr
    assert f"update of refs/heads/main (pushed as {alias}) to {head[:12]}" in pushed.stderr
    assert git(server, "rev-parse", "refs/heads/main").strip() == first


@pytest.mark.parametrize(
    "how",
    [
        "a tag main beside the proven branch, main deleted with a stale old value",
        "a tag main beside the proven branch, main deleted with its own old value",
        "the branch release beside a tag release, the tag deleted with a stale old value",
    ],
)
def test_attack_hooks_deletion_that_git_refuses_clears_a_shadowing_ref(
    setup: Setup, how: str
) -> None:
    """git reads a short name as refs/tags/NAME before refs/heads/NAME, so the hook refuses a
    tag main beside the branch main, and a branch release while a tag release stands, unless
    the push deletes the other ref. The pusher speaks to receive-pack itself and sends, in one
    non-atomic push, the deletion of the other ref beside its update: with an old value that
    is not the server's (a commit it has, so git does not drop the check), or, for the
    server's current branch main, with its real one (git refuses to delete the current
    branch). The hook took the deletion as done and let the update through; git then refused
    the deletion after the hook, kept the ref, and applied the update. The proven main stood
    beside a tag main holding unproven code (or a tag release, pushed when no branch release
    existed, beside the new proven branch release), and git on the server read `main`
    (`release`) as the unproven commit (all three, before the fix). A deletion in the same
    push no longer clears a ref that stands in the way: delete it first, in a push of its
    own."""
    _run_pass(setup)
    assert setup.audit_push().returncode == 0
    proven = setup.client.git("rev-parse", "main").strip()
    setup.client.write("greeting.txt", "hello, unproven\n")
    unproven = setup.client.commit("unproven change")
    if how.startswith("a tag main"):
        kept, pushed_ref, new, name = "refs/heads/main", "refs/tags/main", unproven, "main"
        stale = proven if how.endswith("its own old value") else unproven
        refused = "rejecting refs/tags/main: git reads 'main' as this ref before refs/heads/main"
    else:
        kept, pushed_ref, new, name = "refs/tags/release", "refs/heads/release", proven, "release"
        assert setup.push("--no-verify", "origin", f"{unproven}:{kept}").returncode == 0
        stale = proven  # an object, not the tag's value
        refused = "rejecting refs/heads/release: refs/tags/release stands before it"
    report = _raw_push(setup, [(stale, ZERO, kept), (ZERO, new, pushed_ref)], [unproven])
    assert refused in report and "pre-receive hook declined" in report, report
    assert "Traceback" not in report
    assert setup.server_ref(pushed_ref) is None
    assert _server_reads(setup, name) == (proven if name == "main" else unproven)
    if name == "release":  # the fix the refusal names: delete the tag first, then push
        assert setup.push("--no-verify", "origin", f":{kept}").returncode == 0
        assert setup.push("--no-verify", "origin", f"{proven}:{pushed_ref}").returncode == 0
        assert _server_reads(setup, name) == proven


def _decoy_passing(setup: Setup, decoy: Path, tmp: Path) -> str:
    """The agent's own repository at *decoy*: a clone of the client whose HEAD is the client's
    staged tree, trusted to a key the agent made (outside every work tree) and proven by it:
    its gate says PASS for that tree. Returns the tree."""
    key = tmp / "agent-key" / "id"
    key.parent.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    git(tmp, "clone", "-q", str(setup.client.path), str(decoy))
    for name in ("user.name", "user.email"):
        git(decoy, "config", name, setup.client.git("config", name).strip())
    tree = setup.client.git("write-tree").strip()
    (decoy / "greeting.txt").write_bytes((setup.client.path / "greeting.txt").read_bytes())
    git(decoy, "commit", "-q", "--allow-empty", "-am", "the agent's copy")
    assert git(decoy, "rev-parse", "HEAD^{tree}").strip() == tree
    for args in (["init", "--key", str(key)], ["plan", "seal", "-m", "mine", "--key", str(key)]):
        done = audit(decoy, *args)
        assert done.code == 0, (args, done.out, done.err)
    done = audit(decoy, "run", env={"GITAUDIT_SIGNING_KEY": str(key)})
    assert done.code == 0, done.out + done.err
    assert audit(decoy, "status", "HEAD").code == 0  # PASS there, under the agent's own root
    return tree


@pytest.mark.parametrize("where", ["inside-the-project", "outside-the-project"])
@pytest.mark.parametrize("mode", ["claims", "strict"])
def test_attack_hooks_commit_msg_judged_in_the_repository_core_worktree_names(
    setup: Setup, tmp_path: Path, where: str, mode: str
) -> None:
    """The agent stages an unproven tree (no run of the client's runner proves it), makes a
    repository of its own holding that very tree (a clone, in an ignored folder of the project
    or elsewhere), trusted to a key it generated and proven by that key, and sets
    `core.worktree` in the client's `.git/config` to that repository's folder. git runs the
    user's `git commit` hooks from the work tree it names, so the commit-msg hook (which found
    its repository from the folder it ran in, not from the GIT_DIR git gave it) judged the
    client's staged tree with the decoy's ledger and trust: PASS, the commit with a completion
    claim (and in strict mode any commit) went through with `Audit-Verdict: PASS` and the
    decoy's run as its trailers (before the fix; from the memo and from the full gate alike).
    Now the hook refuses a repository other than the one git runs it for."""
    if mode == "strict":
        setup.client.git("config", "audit.commitMsg", "strict")
    setup.client.write("greeting.txt", "hello, unproven\n")
    setup.client.git("add", "-A")
    if where == "inside-the-project":
        setup.client.write(".git/info/exclude", ".cache/\n")
        decoy = setup.client.path / ".cache" / "decoy"
        decoy.parent.mkdir()
    else:
        decoy = tmp_path / "decoy"
    _decoy_passing(setup, decoy, tmp_path)
    head = setup.client.git("rev-parse", "HEAD").strip()
    setup.client.git("config", "core.worktree", str(decoy))
    message = "all done\n\nAudit-Claim: done" if mode == "claims" else "tidy up"

    def commit() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "commit", "-q", "-m", message],
            cwd=setup.client.path,
            capture_output=True,
            text=True,
            env=setup.env(),
            check=False,
        )

    for _ in range(2):  # neither from the memo nor judged in full
        done = commit()
        assert done.returncode != 0, done.stderr
        assert "core.worktree" in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert setup.client.git("rev-parse", "HEAD").strip() == head
    setup.client.git("config", "--unset", "core.worktree")
    done = commit()
    assert done.returncode != 0 and "the gate says UNKNOWN" in done.stderr, done.stderr


@pytest.mark.parametrize("decoy_at", ["a-gitdir-file", "a-linked-dotgit"])
def test_attack_hooks_pre_push_judged_in_the_repository_core_worktree_names(
    setup: Setup, tmp_path: Path, decoy_at: str
) -> None:
    """The sharper form for pre-push, which git runs from the work tree only when the folder
    `git push` starts in lies inside it: the agent points `core.worktree` at a folder holding
    the project (here its parent) that leads to a repository of its own, where the unproven
    commit's tree is proven by its own key (the parent holds a `.git` file or a link naming
    it). The pre-push hook found that repository from the folder it ran in and said
    PASS, so the commit went to a host without pre-receive (before the fix). Now refused."""
    setup.client.write("greeting.txt", "hello, unproven\n")
    commit = setup.client.commit("unproven")
    decoy = tmp_path / "decoy"
    _decoy_passing(setup, decoy, tmp_path)
    git(decoy, "fetch", "-q", str(setup.client.path), "main")
    assert git(decoy, "cat-file", "-t", commit).strip() == "commit"
    hosted = tmp_path / "hosted.git"
    git(tmp_path, "init", "-q", "--bare", str(hosted))
    if decoy_at == "a-linked-dotgit":
        (tmp_path / ".git").symlink_to(decoy / ".git")
    else:
        (tmp_path / ".git").write_text(f"gitdir: {decoy / '.git'}\n")
    setup.client.git("config", "core.worktree", str(tmp_path))
    pushed = setup.push(str(hosted), "main:refs/heads/main")
    assert pushed.returncode != 0, pushed.stderr
    assert "core.worktree" in pushed.stderr and "Traceback" not in pushed.stderr, pushed.stderr
    assert git(hosted, "rev-parse", "--verify", "-q", "refs/heads/main", check=False) == ""
    setup.client.git("config", "--unset", "core.worktree")
    pushed = setup.push(str(hosted), "main:refs/heads/main")
    assert pushed.returncode != 0 and "the gate says UNKNOWN" in pushed.stderr, pushed.stderr


EXPORT_SUBST = {
    "versioneer's line": {".gitattributes": "_version.py export-subst\n"},
    "a macro": {".gitattributes": "[attr]stamped export-subst\n_version.py stamped\n"},
    "a folder's attributes": {"pkg/.gitattributes": "* export-subst\n"},
}


def _archived(setup: Setup, rev: str, path: str) -> str:
    """The file *path* as `git archive REV` on the server writes it (a deploy, a release
    tarball)."""
    import io
    import tarfile

    out = subprocess.run(
        ["git", "archive", rev, path], cwd=setup.server, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(out)) as archive:
        member = archive.extractfile(path)
        assert member is not None
        return member.read().decode()


@pytest.mark.parametrize("how", list(EXPORT_SUBST))
def test_attack_hooks_export_subst_lets_ref_names_into_the_archive(setup: Setup, how: str) -> None:
    """main's tree holds a version file as versioneer writes it (`git_refnames =
    "$Format:%d$"`, with `export-subst` set on it by a line of .gitattributes, a macro, or a
    folder's attributes): the checks ran on it, it PASSed and the server took main. The pusher
    (no key) then pushes a tag, or a branch (its tree is main's proven one), pointing at main's
    commit and named `v1"+__import__("os").system("...")+"`: no protected tree changes, so the
    hook let both through, and `git archive main` on the server (a deploy, a release tarball)
    wrote `git_refnames = " (HEAD -> main, tag: v1"+__import__("os").system("...")+"...)"`, code
    no check ran, while `git show main:...` still showed the proven file (all three, before the
    fix; a commit message reaches the archive the same way, through `%B`). The server now
    refuses a protected ref whose tree sets export-subst, naming the attributes file."""
    path = "pkg/_version.py" if how == "a folder's attributes" else "_version.py"
    for name, text in EXPORT_SUBST[how].items():
        setup.client.write(name, text)
    setup.client.write(path, 'git_refnames = "$Format:%d$"\n')
    setup.client.commit("stamp the version in archives")
    _run_pass(setup)
    pushed = setup.audit_push()
    assert pushed.returncode != 0, pushed.stderr
    where = next(iter(EXPORT_SUBST[how]))
    assert f"rejecting refs/heads/main: {where} sets export-subst" in pushed.stderr, pushed.stderr
    assert "Traceback" not in pushed.stderr
    assert setup.server_ref("refs/heads/main") is None
    # what the refusal prevents: once main stands, any pusher names a ref into its archive
    main = setup.client.git("rev-parse", "main").strip()
    evil = 'v1"+__import__("os").system("echo_pwned")+"'
    assert setup.push("--no-verify", "origin", f"{main}:refs/tags/{evil}").returncode == 0
    git(setup.server, "update-ref", "refs/heads/main", main)  # as the server took it before
    assert f"tag: {evil}" in _archived(setup, "main", path)
    # the fix it names: without export-subst, main is taken and its archive is its tree
    git(setup.server, "update-ref", "-d", "refs/heads/main")
    for name in EXPORT_SUBST[how]:
        setup.client.git("rm", "-q", name)
    setup.client.commit("no export-subst")
    _run_pass(setup)
    pushed = setup.audit_push()
    assert pushed.returncode == 0, pushed.stderr
    assert setup.push("--no-verify", "origin", f"main:refs/tags/{evil}2").returncode == 0
    assert _archived(setup, "main", path) == 'git_refnames = "$Format:%d$"\n'


# git hooks that run on gitaudit's own git commands: after an index write, around every ref
# update, before an automatic gc. Each leaves a mark of which hook ran.
_GITAUDITS_OWN_HOOKS = ("post-index-change", "reference-transaction", "pre-auto-gc")


@pytest.mark.parametrize("where", ["hooks", "hooksPath"], ids=["git-dir-hooks", "core-hooksPath"])
def test_attack_hooks_repository_hooks_run_by_gitaudits_own_git(
    world: World, tmp_path: Path, where: str
) -> None:
    """The agent writes hooks git runs on index writes and ref updates (`post-index-change`,
    `reference-transaction`, `pre-auto-gc`) into `.git/hooks` or a folder `core.hooksPath`
    names, programs of its own that would read the runner key or the local key (the checks
    are fenced from both; gitaudit's own processes are not). Before the fix the user's `git
    audit run` ran them from its fingerprint's `git add -A` and its `git update-ref` of the
    runs ref, and `status` from its fingerprint. Now no git process of gitaudit's that writes an
    index or a ref runs a hook: seal, run, status, sync leave no mark."""
    mark = tmp_path / "hooks-ran"
    hooks = world.path / ".git" / ("hooks" if where == "hooks" else "agent-hooks")
    hooks.mkdir(exist_ok=True)
    for name in _GITAUDITS_OWN_HOOKS:
        hook = hooks / name
        hook.write_text(f'#!/bin/sh\necho "{name} $*" >> "{mark}"\nexit 0\n')
        hook.chmod(0o755)
    if where == "hooksPath":
        world.repo.git("config", "core.hooksPath", str(hooks))
    world.repo.write("app.py", "ANSWER = 42\n")
    world.seal(plan(step("unit", check("true"))))
    mark.unlink(missing_ok=True)  # the test's own commit ran them: git's, not gitaudit's
    assert world.run().verdict == "PASS"
    assert world.gate(None).verdict == "PASS"
    assert world.cli("status", process=True).code == 0
    assert not mark.exists(), mark.read_text()
