"""Ledger objects under hostile input: each reader raises only its own error type.

* ``SealRecord.from_json`` on arbitrary and damaged records -> SealError only;
* ``state_at`` on a plans commit with one damaged file -> GitAuditError only (SealError/TrustError);
* ``read_run`` on a commit whose run.json is arbitrary bytes -> LedgerError only;
* ``Policy.from_json`` -> TrustError only; ``trust_from_tree`` -> TrustError only;
* ``parse_allowed_signers`` on arbitrary text -> KeyMaterialError or SignatureError only.

Genuine values always round-trip, so a reader that rejected everything would fail here too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitaudit.crypto.allowed_signers import format_allowed_signers, parse_allowed_signers
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.signers import Ed25519Signer
from gitaudit.errors import KeyMaterialError, LedgerError, SealError, SignatureError, TrustError
from gitaudit.ledger import index
from gitaudit.ledger.objects import dumps
from gitaudit.ledger.plansref import SealRecord, state_at
from gitaudit.ledger.records import RUN_FORMAT, _typed_run, parse_run
from gitaudit.ledger.refs import runs_ref
from gitaudit.ledger.runs import read_run
from gitaudit.ledger.trust import (
    ALLOWED_SIGNERS_PATH,
    POLICY_PATH,
    ROLES_PATH,
    Policy,
    TrustSet,
    trust_from_tree,
)
from tests.fuzz._support import (
    SEED,
    bare_repo,
    commit_files,
    encode,
    json_values,
    mutate,
    tolerating_known_bugs,
)

KEY = Ed25519Signer(SEED, comment="fuzz").public_key
OTHER = Ed25519Signer(bytes(reversed(SEED))).public_key
RECORD = SealRecord(
    plan="default",
    version=2,
    contract_digest="sha256:" + "1" * 64,
    previous_digest="sha256:" + "0" * 64,
    policy_digest=Policy().digest(),
    sealed_at="2026-11-01T12:00:00Z",
    sealer="alice",
    sealer_fingerprint=KEY.fingerprint(),
    reason="fuzz",
    change="strengthened",
    weakenings=(),
    strengthenings=("added step 2",),
)
TRUST = TrustSet().added("alice", KEY, "sealer").added("alice", KEY, "runner")
TRUST = TRUST.added("bob", OTHER, "runner")
PLAN_BYTES = json.dumps(
    {
        "requirements": [{"id": "R", "description": "r"}],
        "steps": [{"id": 1, "covers": ["R"], "verify": [{"type": "run", "argv": ["true"]}]}],
    }
).encode()
PLANS_FILES: dict[str, bytes] = {
    **TRUST.files(),
    POLICY_PATH: dumps(Policy().to_json()),
    "plans/default.json": PLAN_BYTES,
    "seals/default.json": dumps(RECORD.to_json()),
}
LEDGER_WORDS: list[Any] = [
    *[
        "format",
        "plan",
        "version",
        "contract_digest",
        "previous_digest",
        "policy_digest",
        "sealed_at",
        "sealer",
        "name",
        "fingerprint",
        "reason",
        "change",
        "weakened",
        "weakenings",
        "strengthenings",
        "retired",
        "protected_refs",
        "allow_weaken",
        "commit_msg",
        "sealers",
        "runners",
        "steps",
        "status",
        "tree",
        "verdict",
    ],
    "gitaudit.seal/1",
    "gitaudit.policy/1",
    "gitaudit.roles/1",
    RUN_FORMAT,
    "refs/heads/*",
    "off",
    "claims",
    "strict",
    "alice",
    "default",
]
leaves = json_values(LEDGER_WORDS, max_leaves=6)


# ----------------------------------------------------------------------------- seal records


def test_genuine_records_round_trip() -> None:
    assert SealRecord.from_json(RECORD.to_json(), "x") == RECORD
    assert Policy.from_json(Policy().to_json(), "x") == Policy()


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_seal_record_from_damaged_json_raises_only_seal_error(data: st.DataObject) -> None:
    if data.draw(st.booleans(), label="damage a genuine record"):
        doc = mutate(data, RECORD.to_json(), leaves)
    else:
        doc = data.draw(json_values(LEDGER_WORDS), label="record")
    try:
        record = SealRecord.from_json(doc, "fuzz")
    except SealError:
        return
    # whatever was accepted is well-typed and writes back to an equal record
    assert isinstance(record.version, int) and record.version >= 1
    assert SealRecord.from_json(record.to_json(), "again") == record


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_state_at_with_one_damaged_file_raises_only_gitaudit_errors(data: st.DataObject) -> None:
    files = dict(PLANS_FILES)
    target = data.draw(st.sampled_from(sorted(files)), label="file")
    original = files[target]
    how = data.draw(st.sampled_from(["json", "bytes", "splice", "delete"]), label="how")
    if how == "json" and target.endswith(".json"):
        files[target] = encode(mutate(data, json.loads(original), leaves), data)
    elif how == "delete":
        del files[target]
    elif how == "splice":
        at = data.draw(st.integers(0, len(original)))
        cut = data.draw(st.integers(0, 16))
        files[target] = original[:at] + data.draw(st.binary(max_size=16)) + original[at + cut :]
    else:
        files[target] = data.draw(st.binary(max_size=120))
    repo = bare_repo()
    commit = repo[commit_files(repo, files)]
    assert isinstance(commit, pygit2.Commit)
    with tolerating_known_bugs():
        state = state_at(repo, commit)
        assert state.tip == commit.id
        state.policy.digest()  # what the seal transition rules and the gate compute next


# ----------------------------------------------------------------------------- runs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_read_run_of_arbitrary_run_json_raises_only_ledger_error(data: st.DataObject) -> None:
    genuine = {"format": RUN_FORMAT, "plan": "default", "verdict": "PASS", "steps": {}}
    how = data.draw(st.sampled_from(["bytes", "json", "damaged"]), label="run.json")
    if how == "bytes":
        raw = data.draw(st.binary(max_size=100))
    elif how == "json":
        raw = encode(data.draw(json_values(LEDGER_WORDS)), data)
    else:
        raw = encode(mutate(data, genuine, leaves), data)
    repo = bare_repo()
    oid = commit_files(repo, {"run.json": raw, "summary.md": b"x"})
    with tolerating_known_bugs((LedgerError,)):
        record = read_run(repo, oid)
        assert record.doc["format"] == RUN_FORMAT
        assert isinstance(record.steps, dict)
        assert isinstance(record.plan, str) and isinstance(record.verdict, str)


def test_read_run_without_run_json_is_a_ledger_error() -> None:
    repo = bare_repo()
    oid = commit_files(repo, {"summary.md": b"x"})
    with pytest.raises(LedgerError, match=r"has no run\.json"):
        read_run(repo, oid)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_index_survives_any_run_json(data: st.DataObject) -> None:
    """The lookup index reads every run commit before anything is verified; unreadable ones
    become placeholder rows, never an exception."""
    genuine = {
        "format": RUN_FORMAT,
        "plan": "p",
        "tree": "t",
        "contract_digest": "c",
        "verdict": "PASS",
        "steps": {"a": {"status": "passed", "input_digest": "d"}},
    }
    repo = bare_repo()
    plan = f"p{data.draw(st.integers(0, 10**9), label='plan')}"
    parent: list[pygit2.Oid] = []
    who = pygit2.Signature("fuzz", "fuzz@example.test", 1_700_000_000, 0)
    for _ in range(data.draw(st.integers(1, 3), label="runs")):
        if data.draw(st.booleans(), label="damaged"):
            raw = encode(mutate(data, genuine, leaves), data)
        else:
            raw = data.draw(st.binary(max_size=80), label="bytes")
        tree = repo[commit_files(repo, {"run.json": raw})].peel(pygit2.Commit).tree_id
        parent = [repo.create_commit(None, who, who, "run", tree, parent)]
    repo.references.create(runs_ref(plan), parent[0], force=True)
    gitdir = Path(repo.path)
    with tolerating_known_bugs(()):
        index.sync(repo, gitdir, plan)
        index.lookup(repo, gitdir, plan, "t", "c")
        counted = index.tallies(repo, gitdir, plan)
        counted.failures("c")
        counted.unsettled()
        counted.newest_with("a", "d")


# ----------------------------------------------------------------------------- trust


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_policy_from_json_raises_only_trust_error(data: st.DataObject) -> None:
    if data.draw(st.booleans(), label="damage a genuine policy"):
        doc = mutate(data, Policy().to_json(), leaves)
    else:
        doc = data.draw(json_values(LEDGER_WORDS), label="policy")
    try:
        policy = Policy.from_json(doc, "fuzz")
    except TrustError:
        return
    assert all(isinstance(p, str) and p for p in policy.protected_refs)
    assert isinstance(policy.allow_weaken, bool)
    assert Policy.from_json(policy.to_json(), "again") == policy
    with tolerating_known_bugs(()):  # an accepted policy can be digested (seals bind it)
        assert policy.digest().startswith("sha256:")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_trust_from_tree_raises_only_trust_error(data: st.DataObject) -> None:
    files = TRUST.files()
    roles = json.loads(files[ROLES_PATH])
    how = data.draw(st.sampled_from(["keep", "damaged", "bytes"]), label="roles")
    if how == "damaged":
        files[ROLES_PATH] = encode(mutate(data, roles, leaves), data)
    elif how == "bytes":
        files[ROLES_PATH] = data.draw(st.binary(max_size=60))
    files[ALLOWED_SIGNERS_PATH] = data.draw(
        st.one_of(
            st.just(files[ALLOWED_SIGNERS_PATH]),
            signer_lines.map(str.encode),
            st.binary(max_size=120),
        ),
        label="allowed_signers",
    )
    repo = bare_repo()
    commit = repo[commit_files(repo, files)]
    assert isinstance(commit, pygit2.Commit)
    with tolerating_known_bugs((TrustError,)):
        trust = trust_from_tree(repo, commit.tree, "fuzz")
        for entry in trust.keys:
            assert isinstance(entry.key, PublicKey)
            assert entry.roles <= {"sealer", "runner"}


# ----------------------------------------------------------------------------- allowed signers

GENUINE_SIGNERS = format_allowed_signers([("alice", KEY), ("bob@example.test", OTHER)])
_tokens = st.sampled_from(
    [
        "alice",
        '"a b"',
        "*",
        "!x",
        "a,b",
        'namespaces="git"',
        'namespaces="git,file"',
        "namespaces=git",
        "cert-authority",
        'valid-after="20260101"',
        'cert-authority,namespaces="git"',
        ",",
        '"',
        "#",
        "ssh-ed25519",
        "ssh-rsa",
        "ecdsa-sha2-nistp256",
        KEY.openssh().split()[1],
        KEY.openssh().split()[1][:-4],
        KEY.openssh().split()[1] + "==",
        "AAAA",
        "key::ssh-ed25519",
        "comment",
        "\t",
        "\r",
        "\x00",
        "\u2028",
        "é",
    ]
)
signer_lines = st.one_of(
    st.lists(st.lists(_tokens, max_size=6).map(" ".join), max_size=4).map("\n".join),
    st.text(max_size=200),
    st.builds(
        lambda at, cut, junk: GENUINE_SIGNERS[:at] + junk + GENUINE_SIGNERS[at + cut :],
        st.integers(0, len(GENUINE_SIGNERS)),
        st.integers(0, 20),
        st.text(max_size=10),
    ),
)


def test_genuine_allowed_signers_round_trip() -> None:
    parsed = parse_allowed_signers(GENUINE_SIGNERS)
    assert [(p, k) for p, k, _ in parsed] == [("alice", KEY), ("bob@example.test", OTHER)]
    assert all(o == {"namespaces": "git"} for _, _, o in parsed)


@settings(max_examples=250, deadline=None)
@given(signer_lines)
def test_parse_allowed_signers_raises_only_key_or_signature_errors(text: str) -> None:
    try:
        entries = parse_allowed_signers(text)
    except (KeyMaterialError, SignatureError):
        return
    for principals, key, options in entries:
        assert principals and '"' not in principals
        assert isinstance(key, PublicKey) and len(key.raw) == 32
        assert set(options) <= {"cert-authority", "namespaces", "valid-after", "valid-before"}


FULL_RUN = {
    "format": RUN_FORMAT,
    "plan": "release",
    "verdict": "FAIL",
    "reasons": ["impure"],
    "contract_digest": "sha256:c",
    "tree": "t",
    "head": None,
    "seal": {"commit": "s", "version": 4},
    "runner": {"name": "ci", "labels": ["linux"]},
    "workspace": {"ignored_paths": {"node_modules": {"digest": "sha256:d"}}},
    "purity": {"changed": ["src/a.py"]},
    "forced": True,
    "missing_tools": ["cargo"],
    "steps": {
        "build": {
            "status": "carried",
            "title": "Build",
            "attempt": 2,
            "attempts_used": 3,
            "duration": 2,
            "carried_from": None,
            "checks": [{"check": "c", "outcome": "passed", "exit_code": 0, "duration": 1.5}],
            "outputs": {"wheel": [{"outcome": "failed", "stdout_truncated": True}]},
            "upstream": [{"step": "fetch", "output": "src", "passed": True, "checks": []}],
            "input_digest": "sha256:i",
            "reconciled": {"observed": "pass"},
            "workspace": "checkout",
        }
    },
}


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_parse_run_reads_a_damaged_record_as_the_typed_reader_does(data: st.DataObject) -> None:
    """parse_run's fast reading of a well-formed record changes nothing: on any damaged record
    it returns an equal record, or refuses it with the same message, as the typed reader."""
    doc = mutate(data, FULL_RUN, leaves)
    outcomes: list[object] = []
    for read in (parse_run, _typed_run):
        try:
            outcomes.append(read("c0ffee" * 6 + "0000", 3, doc))
        except LedgerError as exc:
            outcomes.append((type(exc), exc.message))
    assert outcomes[0] == outcomes[1]
