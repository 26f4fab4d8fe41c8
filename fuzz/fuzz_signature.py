"""Fuzz harness: the signature parsers (``split_signature``, ``sshsig.verify``, allowed signers).

The first byte picks the target, the rest is its input:

* ``0``: a raw commit object -> ``split_signature``, then ``sshsig.verify`` of what it split;
* ``1``: armoured SSHSIG text -> ``sshsig.verify`` against the genuine commit's payload;
* ``2``: an SSHSIG wire blob (armoured here, so the wire parser is reached) -> ``sshsig.verify``;
* ``3``: an allowed-signers file -> ``parse_allowed_signers``.

Expected: SignatureError (and KeyMaterialError for allowed signers). Anything else is a crash, and
so is an *acceptance* of anything but the genuine signature over the genuine payload: a
signature the fuzzer made verify would be a forgery.

Run: ``fuzz/run.py signature SECONDS``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _driver import guarded, hermetic, main

try:
    import atheris
except ImportError:
    atheris = None

if atheris is not None:
    with atheris.instrument_imports(include=["gitaudit"]):
        from gitaudit.crypto import sshsig
        from gitaudit.crypto.allowed_signers import parse_allowed_signers
        from gitaudit.crypto.commits import split_signature
        from gitaudit.crypto.signers import Ed25519Signer
        from gitaudit.crypto.wire import armour, dearmour
        from gitaudit.errors import KeyMaterialError, SignatureError
else:
    from gitaudit.crypto import sshsig
    from gitaudit.crypto.allowed_signers import parse_allowed_signers
    from gitaudit.crypto.commits import split_signature
    from gitaudit.crypto.signers import Ed25519Signer
    from gitaudit.crypto.wire import armour, dearmour
    from gitaudit.errors import KeyMaterialError, SignatureError

SEED = bytes(range(32))  # the same fixed key as tests/fuzz: reproducible signatures


class Forgery(AssertionError):
    """A mutated signature verified: never expected."""


def genuine_commit() -> bytes:
    """A real SSH-signed commit object (fixed key, identity and times: byte-identical)."""
    import pygit2

    from gitaudit.crypto.commits import create_signed_commit
    from gitaudit.ledger.objects import write_tree

    repo = pygit2.init_repository(tempfile.mkdtemp(prefix="gitaudit-fuzz-sig-"), bare=True)
    when = pygit2.Signature("Fuzz Runner", "runner@example.test", 1_700_000_000, 60)
    oid = create_signed_commit(
        repo,
        tree=write_tree(repo, {"run.json": b"{}\n"}),
        parents=[],
        message="audit(default): PASS\n\nAudit-Verdict: PASS\n",
        signer=Ed25519Signer(SEED, comment="fuzz"),
        author=when,
        committer=when,
    )
    return bytes(repo.odb.read(oid)[1])


COMMIT = genuine_commit()
SIGNED = split_signature(COMMIT)
PAYLOAD, ARMOURED = SIGNED.payload, SIGNED.armoured
BLOB = dearmour(ARMOURED, sshsig.LABEL)


def _verify(armoured: str, payload: bytes) -> None:
    sshsig.verify(armoured, payload, "git")


def check(data: bytes) -> str:
    mode, rest = (data[0] % 4, data[1:]) if data else (0, b"")
    if mode == 0:

        def run() -> str:
            signed = split_signature(rest)
            _verify(signed.armoured, signed.payload)
            if signed.payload != PAYLOAD:
                raise Forgery(f"a signature verified over another payload: {rest!r}")
            return "commit-verified"

        return guarded(run, SignatureError)
    if mode in (1, 2):
        text = rest.decode("utf-8", "surrogateescape") if mode == 1 else armour(sshsig.LABEL, rest)

        def run() -> str:
            _verify(text, PAYLOAD)
            if dearmour(text, sshsig.LABEL) != BLOB:
                raise Forgery(f"another signature blob verified: {text!r}")
            return "signature-verified"

        return guarded(run, SignatureError)

    def signers() -> str:
        return f"signers:{len(parse_allowed_signers(rest.decode('utf-8', 'surrogateescape')))}"

    return guarded(signers, KeyMaterialError, SignatureError)


if __name__ == "__main__":
    hermetic()
    main(check, instrumented=atheris is not None)
