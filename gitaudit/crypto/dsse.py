"""DSSE envelopes (Dead Simple Signing Envelope, v1) signed with Ed25519.

The signature is a raw Ed25519 signature over the pre-authentication encoding
``PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`` (lengths in ASCII
decimal), so any DSSE implementation (securesystemslib, in-toto, sigstore, cosign) can check it
given the public key. The ``keyid`` is the key's OpenSSH SHA256 fingerprint, as in the trust set.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from typing import Any

import nacl.exceptions
import nacl.signing

from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.signers import Ed25519Signer, Signer
from gitaudit.errors import KeyMaterialError, SignatureError
from gitaudit.frozen import frozen

IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"


def pae(payload_type: str, payload: bytes) -> bytes:
    """The DSSE v1 pre-authentication encoding of *payload_type* and *payload*."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


@frozen
class Envelope:
    payload_type: str
    payload: bytes
    signatures: tuple[tuple[str, bytes], ...]  # (keyid, raw signature)

    def to_json(self) -> dict[str, Any]:
        return {
            "payloadType": self.payload_type,
            "payload": base64.b64encode(self.payload).decode("ascii"),
            "signatures": [
                {"keyid": keyid, "sig": base64.b64encode(sig).decode("ascii")}
                for keyid, sig in self.signatures
            ],
        }

    @classmethod
    def from_json(cls, doc: object, source: str) -> Envelope:
        """Parse an envelope strictly; SignatureError naming *source* and the field otherwise."""
        if not isinstance(doc, dict):
            raise SignatureError(f"{source}: not a DSSE envelope (a JSON object is expected)")
        kind, payload, sigs = doc.get("payloadType"), doc.get("payload"), doc.get("signatures")
        if not isinstance(kind, str) or not isinstance(payload, str) or not isinstance(sigs, list):
            raise SignatureError(
                f"{source}: not a DSSE envelope (payloadType, payload and signatures are needed)"
            )
        signatures = []
        for i, entry in enumerate(sigs):
            if not isinstance(entry, dict) or not isinstance(entry.get("sig"), str):
                raise SignatureError(f"{source}: $.signatures[{i}] has no sig")
            keyid = entry.get("keyid", "")
            signatures.append((keyid if isinstance(keyid, str) else "", _b64(entry["sig"], source)))
        return cls(kind, _b64(payload, source), tuple(signatures))


def _b64(text: str, source: str) -> bytes:
    """Standard or URL-safe base64, padded or not (DSSE accepts either on input)."""
    data = text.strip().replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(data + "=" * (-len(data) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise SignatureError(f"{source}: invalid base64 in the envelope") from None


def sign(signer: Signer, payload_type: str, payload: bytes) -> Envelope:
    """An envelope over *payload* with one signature by *signer* (an in-process Ed25519 key)."""
    if not isinstance(signer, Ed25519Signer):
        raise KeyMaterialError(
            f"{signer.public_key.fingerprint()}: a DSSE envelope needs a raw Ed25519 signature, "
            "which only an unencrypted key file gives (ssh-keygen and ssh-agent sign SSHSIG only)",
            hint="sign with an unencrypted trusted key: `--key PATH` (`git audit keys generate`)",
        )
    sig = signer.sign_raw(pae(payload_type, payload))
    return Envelope(payload_type, payload, ((signer.public_key.fingerprint(), sig),))


def verify(envelope: Envelope, keys: Iterable[PublicKey]) -> PublicKey:
    """The first key of *keys* whose signature over the envelope's PAE verifies.

    Signatures are tried against keys whose fingerprint matches the keyid, then (DSSE does not
    require keyids to be meaningful) against every key. SignatureError when none verifies."""
    candidates = list(keys)
    message = pae(envelope.payload_type, envelope.payload)
    if not envelope.signatures:
        raise SignatureError("the envelope has no signature")
    for keyid, sig in envelope.signatures:
        ordered = sorted(candidates, key=lambda k: k.fingerprint() != keyid)
        for key in ordered:
            try:
                nacl.signing.VerifyKey(key.raw).verify(message, sig)
            except (nacl.exceptions.BadSignatureError, ValueError, TypeError):
                continue
            return key
    keyids = ", ".join(k for k, _ in envelope.signatures) or "none"
    raise SignatureError(
        f"no signature of the envelope verifies with a trusted key (keyids: {keyids})",
        hint="the attestation was altered, or signed by a key this repository does not trust",
    )


def loads(text: str | bytes, source: str) -> Envelope:
    try:
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SignatureError(f"{source}: not JSON ({exc})") from None
    return Envelope.from_json(doc, source)
