"""The ledger's controls end to end (docs/threat-model.md, *Signatures*, *Trust and roles*, *Seals
bind the plan*, *Ledger integrity*): forged, altered and garbled signatures, a replacement root
of trust, tampered seals, weakening, rewinds and concurrent writers, judged by the command line
(`git audit status`, `verify`, `plan seal`, `trust ...`) and by the server's pre-receive hook
behind a real `git push` to a bare remote."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pygit2
import pytest
from pygit2.enums import ObjectType

from gitaudit.crypto.commits import (
    commit_payload,
    create_signed_commit,
    insert_signature,
    split_signature,
)
from gitaudit.crypto.keystore import list_local_keys, load_signer
from gitaudit.crypto.signers import Ed25519Signer, Signer
from gitaudit.crypto.wire import armour
from gitaudit.ledger.objects import dumps, read_files, write_tree
from gitaudit.ledger.trust import TrustSet
from tests.e2e.conftest import PLAN, Setup
from tests.gitrepo import audit, git
from tests.gitrepo import forget_marks as forget_repository_marks

RUNS = "refs/audit/runs/default"
PLANS = "refs/audit/plans"


# ------------------------------------------------------------------------------------ helpers


def run_pass(setup: Setup) -> str:
    """`git audit run` (PASS) for the work tree; the new tip of the runs ref."""
    result = audit(setup.client.path, "run")
    assert result.code == 0, result.out + result.err
    return setup.client.git("rev-parse", RUNS).strip()


def own_key(setup: Setup) -> Signer:
    """The key `git audit init` generated: the sealer and runner of the client's ledger."""
    (key,) = list_local_keys()
    return load_signer(key.private_path)


def odb(setup: Setup) -> pygit2.Repository:
    return pygit2.Repository(str(setup.client.path))


def raw_commit(setup: Setup, rev: str) -> bytes:
    repo = odb(setup)
    _kind, data = repo.odb.read(repo.revparse_single(rev).id)
    return bytes(data)


def write_commit(setup: Setup, data: bytes) -> str:
    return str(odb(setup).odb.write(ObjectType.COMMIT, data))


def sig_block(data: bytes) -> bytes:
    """The ``gpgsig`` header (with its continuation lines) of a raw commit."""
    start = data.index(b"\ngpgsig ") + 1
    end = start
    while True:
        end = data.index(b"\n", end) + 1
        if not data[end:].startswith(b" "):
            return data[start:end]


def status_json(setup: Setup, *args: str) -> tuple[int, dict[str, Any]]:
    result = audit(setup.client.path, "status", "--json", *args)
    assert "Traceback" not in result.err, result.err
    return result.code, json.loads(result.out)


def reasons(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (code, message) of a `status --json` document, the gate's own and each plan's."""
    found = [(r["code"], r["message"]) for r in doc.get("reasons", [])]
    for plan in doc.get("plans", []):
        found += [(r["code"], r["message"]) for r in plan.get("reasons", [])]
    return found


def push_runs(setup: Setup) -> subprocess.CompletedProcess[str]:
    """Push main and the runs ref past the client hooks: only the server judges."""
    return setup.push("--no-verify", "--atomic", "origin", "main", RUNS)


def forget_marks(setup: Setup) -> None:
    """What a fresh clone has: no high-water marks (and so no remembered verdicts either)."""
    forget_repository_marks(setup.client.path / ".git")


# --------------------------------------------------------------------------------- signatures


def _alter_tree(data: bytes, setup: Setup) -> bytes:
    """Another run tree: the tip's with one more newline at the end of run.json (the tree of an
    earlier run may be this very tree: two runs alike within a second record the same
    run.json)."""
    found = re.match(rb"tree ([0-9a-f]{40})", data)
    assert found is not None
    tree = found.group(1).decode()
    record = setup.client.git("rev-parse", f"{tree}:run.json").strip()
    text = setup.client.git("cat-file", "blob", record)
    blob = setup.client.git("hash-object", "-w", "--stdin", input=f"{text}\n".encode()).strip()
    listing = setup.client.git("ls-tree", tree).replace(record, blob)
    other = setup.client.git("mktree", input=listing.encode()).strip().encode()
    return data.replace(found.group(1), other, 1)


def _alter_parent(data: bytes, setup: Setup) -> bytes:
    grandparent = setup.client.git("rev-parse", f"{RUNS}~2").strip().encode()
    return re.sub(rb"\nparent [0-9a-f]{40}", b"\nparent " + grandparent, data, count=1)


def _alter_time(data: bytes, setup: Setup) -> bytes:
    def later(match: re.Match[bytes]) -> bytes:
        return match.group(1) + str(int(match.group(2)) + 1).encode()

    return re.sub(rb"(\ncommitter [^\n]*> )(\d+)", later, data, count=1)


def _alter_message(data: bytes, setup: Setup) -> bytes:
    return data + b"\nAll checks passed, trust me.\n"


@pytest.mark.parametrize(
    "alter",
    [_alter_tree, _alter_parent, _alter_time, _alter_message],
    ids=["tree", "parents", "times", "message"],
)
def test_an_altered_signed_commit_is_refused(
    setup: Setup, alter: Callable[[bytes, Setup], bytes]
) -> None:
    """A genuine run commit rewritten with its signature header kept: the server's pre-receive
    refuses it naming the commit, and `git audit status` of a clone without marks calls the
    evidence untrusted."""
    for _ in range(3):
        run_pass(setup)  # R1 <- R2 <- R3: a tip with a parent and a grandparent
    tip = setup.client.git("rev-parse", RUNS).strip()
    original = raw_commit(setup, tip)
    altered = alter(original, setup)
    assert altered != original and sig_block(altered) == sig_block(original)
    forged = write_commit(setup, altered)
    setup.client.git("update-ref", RUNS, forged)
    pushed = push_runs(setup)
    assert pushed.returncode != 0
    assert f"gitaudit: rejecting {RUNS}: commit {forged}: bad signature by SHA256:" in (
        pushed.stderr
    )
    assert "the signed data was altered or the signature is corrupt" in pushed.stderr
    assert setup.server_ref(RUNS) is None and setup.server_ref("refs/heads/main") is None
    forget_marks(setup)
    code, doc = status_json(setup)
    assert code == 1 and doc["verdict"] == "FAIL"
    assert [c for c, m in reasons(doc) if "the signed data was altered" in m] == [
        "evidence.untrusted"
    ], reasons(doc)


def _forge_on_tip(setup: Setup, sign: Callable[[bytes], bytes]) -> str:
    """A new run commit on top of the genuine tip (same tree: PASS evidence if it counted),
    whose raw bytes are sign(payload)."""
    repo = odb(setup)
    tip = repo.revparse_single(RUNS).peel(pygit2.Commit)
    who = pygit2.Signature("ci", "ci@example.test", tip.committer.time + 60, 0)
    payload = commit_payload(
        tree=tip.tree_id, parents=[tip.id], author=who, committer=who, message="audit: PASS\n"
    )
    return write_commit(setup, sign(payload))


def _unsigned(setup: Setup, payload: bytes) -> bytes:
    return payload


def _two_signatures(setup: Setup, payload: bytes) -> bytes:
    genuine = insert_signature(payload, own_key(setup).sign(payload))
    extra = sig_block(insert_signature(payload, Ed25519Signer.generate("mallory").sign(payload)))
    block = sig_block(genuine)
    return genuine.replace(block, block + extra, 1)


def _openpgp(setup: Setup, payload: bytes) -> bytes:
    body = base64.b64encode(b"\x89\x02\x33" + bytes(60)).decode()
    header = (
        "gpgsig -----BEGIN PGP SIGNATURE-----\n \n "
        + body
        + "\n =abcd\n -----END PGP SIGNATURE-----\n"
    ).encode()
    cut = payload.index(b"\n\n") + 1
    return payload[:cut] + header + payload[cut:]


def _wrong_namespace(setup: Setup, payload: bytes) -> bytes:
    return insert_signature(payload, own_key(setup).sign(payload, "file"))


def _untrusted_key(setup: Setup, payload: bytes) -> bytes:
    return insert_signature(payload, Ed25519Signer.generate("mallory").sign(payload))


@pytest.mark.parametrize(
    ("sign", "why"),
    [
        (_unsigned, "is not signed"),
        (_two_signatures, "has 2 gpgsig headers; exactly one is allowed"),
        (_openpgp, "carries an OpenPGP signature, not an SSH signature"),
        (_wrong_namespace, "signature namespace is 'file', expected 'git'"),
        (_untrusted_key, "signed by untrusted key SHA256:"),
    ],
    ids=["unsigned", "two-headers", "openpgp", "wrong-namespace", "untrusted-key"],
)
def test_commits_without_one_trusted_ssh_signature_are_refused(
    setup: Setup, sign: Callable[[Setup, bytes], bytes], why: str
) -> None:
    """A PASS run commit on top of genuine evidence, signed wrongly: `git audit status` says
    FAIL (evidence.untrusted) and the server's pre-receive refuses the push, each naming why."""
    run_pass(setup)
    forged = _forge_on_tip(setup, lambda payload: sign(setup, payload))
    setup.client.git("update-ref", RUNS, forged)
    code, doc = status_json(setup)
    assert code == 1 and doc["verdict"] == "FAIL"
    assert [c for c, m in reasons(doc) if why in m] == ["evidence.untrusted"], reasons(doc)
    pushed = push_runs(setup)
    assert pushed.returncode != 0
    assert f"gitaudit: rejecting {RUNS}: commit {forged}" in pushed.stderr
    assert why in pushed.stderr and "evidence must be signed by a runner" in pushed.stderr
    assert setup.server_ref(RUNS) is None and setup.server_ref("refs/heads/main") is None


def _garble(blob: bytes, how: str) -> bytes:
    if how == "truncated":
        return blob[: len(blob) // 2]
    if how == "bad-magic":
        return b"SSHSIH" + blob[6:]
    if how == "trailing-bytes":
        return blob + b"\x00\x00\x00\x04junk"
    if how == "huge-length":  # the public key's length field claims 4 GiB
        return blob[:10] + b"\xff\xff\xff\xff" + blob[14:]
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["truncated", "bad-magic", "trailing-bytes", "huge-length"])
def test_a_garbled_signature_is_a_refusal_not_a_crash(setup: Setup, how: str) -> None:
    """A genuine run commit whose SSHSIG blob is garbled (re-armoured, so it still looks like an
    SSH signature): status, verify and the server's hook refuse it in one line, no traceback."""
    run_pass(setup)
    data = raw_commit(setup, RUNS)
    signed = split_signature(data)
    blob = base64.b64decode("".join(signed.armoured.strip().splitlines()[1:-1]))
    garbled = insert_signature(signed.payload, armour("SSH SIGNATURE", _garble(blob, how)))
    forged = write_commit(setup, garbled)
    setup.client.git("update-ref", RUNS, forged)
    forget_marks(setup)
    code, doc = status_json(setup)
    assert code == 1 and doc["verdict"] == "FAIL"
    assert [c for c, m in reasons(doc) if forged in m or forged[:12] in m] == [
        "evidence.untrusted"
    ], reasons(doc)
    verified = audit(setup.client.path, "verify")
    assert verified.code == 1 and forged[:12] in verified.out + verified.err
    assert "Traceback" not in verified.err
    pushed = push_runs(setup)
    assert pushed.returncode != 0 and "Traceback" not in pushed.stderr
    assert f"gitaudit: rejecting {RUNS}: commit {forged}: " in pushed.stderr
    assert setup.server_ref(RUNS) is None


# ------------------------------------------------------------------------------ trust and roles


def _replacement_root(setup: Setup) -> tuple[str, str]:
    """mallory's own plans history: a root trusting only her, and one more commit on it, with
    the genuine plans' seals and copies (so only the root of trust differs). Returns (root, tip)
    and points the client's refs/audit/plans at the tip."""
    repo = odb(setup)
    mallory = Ed25519Signer.generate("mallory")
    genuine = repo.revparse_single(PLANS).peel(pygit2.Commit)
    files = read_files(repo, genuine.tree)
    trust = TrustSet().added("mallory", mallory.public_key, "sealer")
    files.update(trust.added("mallory", mallory.public_key, "runner").files())
    tree = write_tree(repo, files)
    root = create_signed_commit(
        repo, tree=tree, parents=[], message="trust: mine\n", signer=mallory
    )
    tip = create_signed_commit(repo, tree=tree, parents=[root], message="more\n", signer=mallory)
    setup.client.git("update-ref", PLANS, str(tip))
    return str(root), str(tip)


def test_a_replacement_root_is_refused_by_the_pinned_key(setup: Setup, tmp_path: Path) -> None:
    """mallory swaps refs/audit/plans for a self-consistent history rooted in her own key.
    Without the high-water marks (a fresh clone), and with marks written to vouch for her tip,
    `git audit status` and `verify` refuse it by the pinned root key; a server that pins the
    root key refuses it as the first plans ref pushed to it."""
    run_pass(setup)
    root, tip = _replacement_root(setup)
    pinned = "not by the pinned audit.rootKey"
    forget_marks(setup)
    code, doc = status_json(setup)
    assert code == 1 and doc["verdict"] == "FAIL" and doc["plans"] == []
    assert reasons(doc) == [("plans.untrusted", reasons(doc)[0][1])]
    assert f"plans commit {root[:12]}" in reasons(doc)[0][1] and pinned in reasons(doc)[0][1]
    # a mark written to say her tip was verified here does not vouch for her root
    marks = {"verified": {PLANS: tip}, "seen": {PLANS: tip}}
    (setup.client.path / ".git" / "gitaudit" / "watermarks.json").write_text(json.dumps(marks))
    code, doc = status_json(setup)
    assert code == 1 and [c for c, m in reasons(doc) if pinned in m] == ["plans.untrusted"]
    verified = audit(setup.client.path, "verify")
    assert verified.code == 1 and pinned in verified.out + verified.err
    # a new server pinned to the genuine root key, before any plans ref reached it
    fresh = tmp_path / "fresh.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(fresh))
    git(fresh, "config", "audit.rootKey", setup.client.git("config", "audit.rootKey").strip())
    assert audit(fresh, "hooks", "install", "--server").code == 0
    pushed = setup.push(str(fresh), f"{PLANS}:{PLANS}")
    assert pushed.returncode != 0 and f"gitaudit: rejecting {PLANS}: " in pushed.stderr
    assert f"plans commit {root[:12]}" in pushed.stderr and pinned in pushed.stderr
    assert git(fresh, "for-each-ref").strip() == ""


def test_the_last_sealer_cannot_be_removed(setup: Setup) -> None:
    """`git audit trust remove` of the only sealer is refused with the reason; nothing moves,
    locally or on the server; removing a runner beside it is not refused."""
    keys = audit(setup.client.path, "keys", "list", "--json").json()
    (sealer,) = [k["name"] for k in keys["trusted"] if "sealer" in k["roles"]]
    before = setup.client.git("rev-parse", PLANS).strip()
    refused = audit(setup.client.path, "trust", "remove", sealer)
    assert refused.code == 1, refused.out + refused.err
    assert f"removing {sealer!r} would leave no sealer" in refused.err
    assert "Traceback" not in refused.err
    assert setup.client.git("rev-parse", PLANS).strip() == before
    ci = Ed25519Signer.generate("ci")
    pub = setup.client.path.parent / "ci.pub"
    pub.write_text(ci.public_key.openssh() + "\n")
    assert (
        audit(setup.client.path, "trust", "add", str(pub), "--role", "runner", "--name", "ci").code
        == 0
    )
    assert audit(setup.client.path, "trust", "remove", "ci").code == 0
    assert setup.push("origin", PLANS).returncode == 0
    state = audit(setup.server, "keys", "list", "--json").json()
    assert [k["name"] for k in state["trusted"] if "sealer" in k["roles"]] == [sealer]


# ----------------------------------------------------------------------- seals bind the plan


def _weaker_plan() -> dict[str, Any]:
    weaker: dict[str, Any] = json.loads(json.dumps(PLAN))
    weaker["steps"][1]["verify"] = [{"type": "run", "argv": ["true"]}]
    return weaker


def _sealer_signed_plans(setup: Setup, edit: dict[str, bytes]) -> str:
    """A plans commit on the tip, signed by the genuine sealer, with *edit* applied to its files;
    refs/audit/plans is moved to it."""
    repo = odb(setup)
    tip = repo.revparse_single(PLANS).peel(pygit2.Commit)
    files = {**read_files(repo, tip.tree), **edit}
    forged = create_signed_commit(
        repo,
        tree=write_tree(repo, files),
        parents=[tip.id],
        message="plans: touch up\n",
        signer=own_key(setup),
    )
    setup.client.git("update-ref", PLANS, str(forged))
    return str(forged)


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (
            {"plans/default.json": dumps(_weaker_plan())},
            "the sealed copy of plan 'default' does not match its seal record",
        ),
        ({"seals/default.json": b"{not json"}, "seals/default.json is not valid JSON"),
    ],
    ids=["sealed-copy", "seal-record"],
)
def test_a_tampered_sealed_copy_or_seal_record_is_refused(
    setup: Setup, edit: dict[str, bytes], why: str
) -> None:
    """Even signed by the genuine sealer, a plans commit whose sealed copy no longer matches its
    seal record (or whose record is not a record) fails `git audit status` and `verify`, and
    the server's pre-receive refuses it."""
    run_pass(setup)
    forged = _sealer_signed_plans(setup, edit)
    code, doc = status_json(setup)
    assert code == 1 and doc["verdict"] == "FAIL" and doc["plans"] == []
    assert [c for c, m in reasons(doc) if why in m] == ["plans.untrusted"], reasons(doc)
    verified = audit(setup.client.path, "verify")
    assert verified.code == 1 and why in verified.out + verified.err
    pushed = setup.push("--no-verify", "origin", PLANS)
    assert pushed.returncode != 0
    assert f"gitaudit: rejecting {PLANS}: " in pushed.stderr and why in pushed.stderr
    assert setup.server_ref(PLANS) != forged


def test_weakening_needs_a_reason_and_the_policy_may_forbid_it(
    setup: Setup,
) -> None:
    """Through `git audit plan seal` and `git audit trust policy`: a weaker plan is refused
    with the list of what it weakens; --allow-weaken alone is refused; with --reason it is
    sealed and recorded in the history; a laxer policy is a weakening too; and once the policy
    forbids weakening, neither a weaker plan nor relaxing that policy is accepted."""
    client = setup.client.path
    tip = setup.client.git("rev-parse", PLANS).strip()
    setup.client.write_plan(_weaker_plan())
    setup.client.commit("a weaker check")
    refused = audit(client, "plan", "seal")
    assert refused.code == 1
    assert "plan 'default' would be weakened: " in refused.err
    assert "check removed or changed: run grep -q hello greeting.txt" in refused.err
    assert "--allow-weaken --reason" in refused.err
    no_reason = audit(client, "plan", "seal", "--allow-weaken")
    assert no_reason.code == 1 and "would be weakened" in no_reason.err
    assert setup.client.git("rev-parse", PLANS).strip() == tip  # nothing sealed so far
    sealed = audit(client, "plan", "seal", "--allow-weaken", "--reason", "grep is flaky here")
    assert sealed.code == 0 and "v2 (weakened)" in sealed.out, sealed.out + sealed.err
    (latest, first) = audit(client, "plan", "history", "--json").json()
    assert (latest["version"], latest["weakened"], latest["reason"]) == (
        2,
        True,
        "grep is flaky here",
    )
    assert first["version"] == 1 and not first["weakened"]
    # a laxer policy (main no longer protected) is a weakening
    tip = setup.client.git("rev-parse", PLANS).strip()
    laxer = audit(client, "trust", "policy", "--protect", "refs/heads/release")
    assert laxer.code == 1
    assert "policy would be weakened: ref pattern 'refs/heads/*' no longer protected" in laxer.err
    assert setup.client.git("rev-parse", PLANS).strip() == tip
    # the policy forbids weakening: nothing weaker is sealed, and the rule cannot be relaxed
    assert audit(client, "trust", "policy", "--weakening", "forbidden").code == 0
    tip = setup.client.git("rev-parse", PLANS).strip()
    weakest = _weaker_plan()
    weakest["steps"][0]["verify"] = [{"type": "run", "argv": ["true"]}]
    setup.client.write_plan(weakest)
    setup.client.commit("weaker still")
    forbidden = audit(client, "plan", "seal", "--allow-weaken", "--reason", "please")
    assert forbidden.code == 1
    assert "would be weakened (" in forbidden.err and "policy.json forbids weakening" in (
        forbidden.err
    )
    relax = audit(
        client, "trust", "policy", "--weakening", "allowed", "--allow-weaken", "--reason", "x"
    )
    assert relax.code == 1 and "weakening seals becomes allowed" in relax.err
    assert "forbids weakening" in relax.err
    assert setup.client.git("rev-parse", PLANS).strip() == tip


# --------------------------------------------------------------------------- ledger integrity


def test_a_plans_ref_moved_back_to_an_older_seal_is_refused(setup: Setup) -> None:
    """Seal v1 has evidence; v2 adds a check. The plans ref is reset to v1 and the tree with
    v1's evidence judged: `git audit status`, `verify` and the pre-push hook refuse the rewind
    against the local high-water mark."""
    v1 = setup.client.git("rev-parse", PLANS).strip()
    run_pass(setup)  # PASS evidence for this tree under v1
    stronger = json.loads(json.dumps(PLAN))
    stronger["steps"][1]["verify"].append({"type": "run", "argv": ["test", "-s", "greeting.txt"]})
    setup.client.write_plan(stronger)
    setup.client.commit("a stronger plan")
    assert audit(setup.client.path, "plan", "seal", "-m", "stronger").code == 0
    setup.client.git("update-ref", PLANS, v1)
    setup.client.git("reset", "-q", "--hard", "HEAD~1")  # back to the tree v1 proved
    code, doc = status_json(setup, "HEAD")
    assert code == 1 and doc["verdict"] == "FAIL"
    assert [c for c, m in reasons(doc) if "moved backwards or was rewritten" in m] == [
        "plans.untrusted"
    ], reasons(doc)
    verified = audit(setup.client.path, "verify")
    assert verified.code == 1 and "moved backwards" in verified.out + verified.err
    pushed = setup.push("origin", "main")
    assert pushed.returncode != 0 and "moved backwards or was rewritten" in pushed.stderr
    assert setup.server_ref("refs/heads/main") is None


@pytest.mark.parametrize("ref", [PLANS, RUNS])
def test_an_audit_ref_pointing_at_a_non_commit_is_reported(setup: Setup, ref: str) -> None:
    """An audit ref overwritten with a blob (in a clone without marks, so it is not reported
    as a rewind first): `git audit verify` names the ref's object as not a commit, the gate
    FAILs naming it (`plans.untrusted` for the plans ref, `evidence.ledger` for a runs ref), nothing
    crashes, and the server's hook refuses such a push (forced past git's own check)."""
    run_pass(setup)
    blob = setup.client.git("hash-object", "-w", "--stdin", input=b"not a commit\n").strip()
    setup.client.git("update-ref", ref, blob)
    forget_marks(setup)
    code, doc = status_json(setup)
    if ref == PLANS:
        why = f"{ref} points at {blob[:12]}, a blob, not a commit"
        assert code == 1 and doc["verdict"] == "FAIL" and doc["plans"] == []
        assert reasons(doc) == [("plans.untrusted", why)], reasons(doc)
    else:
        why = f"{ref} points at {blob[:12]}, a blob, not a commit"
        assert code == 1 and doc["verdict"] == "FAIL"
        assert reasons(doc) == [("evidence.ledger", why)], reasons(doc)
    verified = audit(setup.client.path, "verify")
    assert verified.code == 1 and "Traceback" not in verified.err
    assert f"{blob[:12]}" in verified.out + verified.err
    assert "not a commit" in verified.out + verified.err
    pushed = setup.push("--no-verify", "--force", "origin", f"{ref}:{ref}")
    assert pushed.returncode != 0 and "Traceback" not in pushed.stderr
    assert f"gitaudit: rejecting {ref}: {blob[:12]} is not a commit" in pushed.stderr


def test_concurrent_seals_and_runs_lose_nothing(setup: Setup) -> None:
    """Four `git audit plan seal` processes at once, then six `git audit run` processes at once
    (each runs every plan): every seal and every run is on one linear chain per ref, `git audit
    verify` accepts it, and `git audit push` delivers it to the server, which says PASS."""
    names = [f"p{i}" for i in range(4)]
    for name in names:
        setup.client.write_plan(PLAN, name)
    setup.client.commit("four more plans")
    env = setup.env()

    def together(*argv: str, count: int = 0, each: list[list[str]] | None = None) -> None:
        commands = each or [list(argv)] * count
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "gitaudit", *command],
                cwd=setup.client.path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for command in commands
        ]
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, (out + err).decode()

    together(each=[["plan", "seal", "--plan", name, "-m", f"seal {name}"] for name in names])
    plans_log = setup.client.git("rev-list", "--count", PLANS).strip()
    assert plans_log == "6"  # the root, the default plan's seal and four more
    assert setup.client.git("rev-list", "--min-parents=2", PLANS).strip() == ""
    together("run", count=6)
    for name in ["default", *names]:
        ref = f"refs/audit/runs/{name}"
        assert setup.client.git("rev-list", "--count", ref).strip() == "6", name
        assert setup.client.git("rev-list", "--min-parents=2", ref).strip() == "", name
    verified = audit(setup.client.path, "verify")
    assert verified.code == 0, verified.out + verified.err
    pushed = setup.audit_push()
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    for name in ["default", *names]:
        ref = f"refs/audit/runs/{name}"
        assert git(setup.server, "rev-list", "--count", ref).strip() == "6", name
    assert git(setup.server, "rev-list", "--count", PLANS).strip() == "6"
    assert audit(setup.server, "status", "main").code == 0
