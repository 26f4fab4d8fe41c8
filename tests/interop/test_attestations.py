"""`git audit attest`: the envelope is checked by independent implementations, not only ours.

* securesystemslib (the DSSE implementation of in-toto and TUF) verifies the signature over the
  DSSE pre-authentication encoding with the runner's Ed25519 public key;
* in-toto-attestation (the in-toto project's bindings) validates the Statement v1 and parses
  the predicate as a SLSA Verification Summary v1, ignoring unrecognised fields as the parsing
  rules require (our extension field, the VSA 1.1 ``verifier.version``);
* ``attest verify`` accepts the untouched envelope and refuses a changed one.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from in_toto_attestation.predicates.vsa.v1 import vsa_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement
from securesystemslib.dsse import Envelope
from securesystemslib.signer._key import SSlibKey
from securesystemslib.signer._signature import Signature

from gitaudit.crypto.dsse import pae
from gitaudit.crypto.keystore import keys_dir
from gitaudit.crypto.pubkey import PublicKey
from tests.gitrepo import GitRepo, audit
from tests.run.conftest import Sealer, make_plan, run_step


def _attested(repo: GitRepo, sealed: Sealer, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    sealed(make_plan(run_step("build", "true", title="Build")), "app")
    assert audit(repo.path, "run").code == 0
    out = tmp_path / "vsa.json"
    result = audit(repo.path, "attest", "--plan", "app", "-o", str(out))
    assert result.code == 0, result.err
    return out, json.loads(out.read_text())


def _runner_key(repo: GitRepo) -> PublicKey:
    line = audit(repo.path, "trust", "export").out.splitlines()[0]
    return PublicKey.from_openssh(line[line.index("ssh-ed25519") :])


def test_securesystemslib_verifies_the_envelope(
    repo: GitRepo, sealed: Sealer, tmp_path: Path
) -> None:
    _, doc = _attested(repo, sealed, tmp_path)
    key = _runner_key(repo)
    sslib_key = SSlibKey(
        keyid=key.fingerprint(),
        keytype="ed25519",
        scheme="ed25519",
        keyval={"public": key.raw.hex()},
    )
    envelope = Envelope.from_dict(json.loads(json.dumps(doc)))
    accepted = envelope.verify([sslib_key], 1)
    assert list(accepted) == [key.fingerprint()]
    assert envelope.pae() == pae(doc["payloadType"], base64.b64decode(doc["payload"]))
    # a changed payload no longer verifies
    tampered = json.loads(json.dumps(doc))
    statement = json.loads(base64.b64decode(tampered["payload"]))
    statement["predicate"]["verificationResult"] = "FAILED"
    tampered["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    from securesystemslib.exceptions import VerificationError

    with pytest.raises(VerificationError):
        Envelope.from_dict(tampered).verify([sslib_key], 1)
    # and a signature securesystemslib makes is one gitaudit's verifier accepts: same PAE
    assert isinstance(envelope.signatures[key.fingerprint()], Signature)


def test_in_toto_attestation_parses_the_statement_and_the_vsa(
    repo: GitRepo, sealed: Sealer, tmp_path: Path
) -> None:
    _, doc = _attested(repo, sealed, tmp_path)
    assert doc["payloadType"] == "application/vnd.in-toto+json"
    payload = json.loads(base64.b64decode(doc["payload"]))
    pb = json_format.ParseDict(payload, statement_pb2.Statement())
    Statement.copy_from_pb(pb).validate()
    assert pb.predicate_type == "https://slsa.dev/verification_summary/v1"
    predicate = dict(payload["predicate"])
    # the 0.9.3 bindings declare verifiedLevels a single string; the VSA v1 spec, an array
    levels = predicate.pop("verifiedLevels")
    vsa = json_format.ParseDict(
        predicate,
        vsa_pb2.VerificationSummary(),
        ignore_unknown_fields=True,
    )
    head = repo.git("rev-parse", "HEAD").strip()
    tree = repo.git("rev-parse", "HEAD^{tree}").strip()
    assert vsa.verification_result == "PASSED"
    assert levels == ["GITAUDIT_GATE_PASS"]
    assert vsa.resource_uri.endswith("@" + head)
    assert vsa.policy.digest["sha256"]
    runs = [a for a in vsa.input_attestations if a.uri.endswith("refs/audit/runs/app")]
    run = repo.git("rev-parse", "refs/audit/runs/app").strip()
    assert runs and runs[0].digest["gitCommit"] == run
    subjects = {d: v for s in pb.subject for d, v in s.digest.items()}
    assert subjects == {"gitCommit": head, "gitTree": tree}


def test_attest_verify_checks_offline_against_the_trust_set(
    repo: GitRepo, sealed: Sealer, tmp_path: Path
) -> None:
    path, doc = _attested(repo, sealed, tmp_path)
    ok = audit(repo.path, "attest", "verify", str(path))
    assert ok.code == 0, ok.out + ok.err
    assert "authentic: signed by" in ok.out and "PASSED for commit" in ok.out
    statement = json.loads(base64.b64decode(doc["payload"]))
    statement["predicate"]["verificationResult"] = "PASSED"
    statement["subject"][0]["digest"]["gitCommit"] = "0" * 40
    forged = dict(doc, payload=base64.b64encode(json.dumps(statement).encode()).decode())
    path.write_text(json.dumps(forged))
    bad = audit(repo.path, "attest", "verify", str(path))
    assert bad.code == 1 and "no signature of the envelope verifies" in bad.err


def test_a_failing_gate_is_attested_as_failed(
    repo: GitRepo, sealed: Sealer, tmp_path: Path
) -> None:
    sealed(make_plan(run_step("build", "false")), "app")
    assert audit(repo.path, "run").code == 1
    out = tmp_path / "vsa.json"
    assert audit(repo.path, "attest", "-o", str(out)).code == 0
    checked = audit(repo.path, "attest", "verify", str(out))
    assert checked.code == 1 and "FAILED for commit" in checked.out
    statement = json.loads(audit(repo.path, "attest", "--format", "statement").out)
    assert statement["predicate"]["verifiedLevels"] == ["FAILED"]
    extension = statement["predicate"]["https://gitaudit.dev/attestation/gate/v1"]
    assert extension["verdict"] == "FAIL" and extension["plans"][0]["run"]


def test_an_untrusted_key_cannot_attest(repo: GitRepo, sealed: Sealer, tmp_path: Path) -> None:
    sealed(make_plan(run_step("build", "true")), "app")
    assert audit(repo.path, "keys", "generate", "--name", "stranger").code == 0
    result = audit(repo.path, "attest", "--key", str(keys_dir() / "stranger"))
    assert result.code == 1 and "not trusted" in result.err
