"""OpenSSH SSHSIG signatures (PROTOCOL.sshsig), Ed25519 only, interoperable with ssh-keygen -Y.

Signature blob::

    byte[6]  "SSHSIG"
    uint32   1                      (version)
    string   publickey              ("ssh-ed25519" wire blob)
    string   namespace
    string   reserved               (empty)
    string   hash_algorithm         ("sha512" or "sha256")
    string   signature              (string "ssh-ed25519" + string 64-byte signature)

The Ed25519 signature covers ``"SSHSIG" || string namespace || string reserved ||
string hash_algorithm || string H(message)``. The blob is armoured between
``-----BEGIN SSH SIGNATURE-----`` and ``-----END SSH SIGNATURE-----`` lines, base64 wrapped at
70 columns. :func:`verify` parses all of it strictly; every defect is a :class:`SignatureError`.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable

import nacl.bindings
import nacl.exceptions
import nacl.signing

from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.wire import (
    KEY_TYPE,
    PUBLIC_KEY_LEN,
    SEED_LEN,
    SIGNATURE_LEN,
    WireFormatError,
    WireReader,
    armour,
    dearmour,
    ssh_string,
    ssh_uint32,
)
from gitaudit.errors import KeyMaterialError, SignatureError
from gitaudit.frozen import frozen

MAGIC = b"SSHSIG"
VERSION = 1
LABEL = "SSH SIGNATURE"
DEFAULT_HASH = "sha512"
HASHES = frozenset({"sha512", "sha256"})


@frozen
class ParsedSignature:
    """The fields of a well-formed SSHSIG blob (not yet checked against any message)."""

    public_key: PublicKey
    namespace: str
    hash_algorithm: str
    signature: bytes


# what hashlib.new(name) looks up, called directly (any other name still goes through it)
_HASH_FUNCTIONS = {"sha512": hashlib.sha512, "sha256": hashlib.sha256}


@functools.lru_cache(maxsize=16)
def _signed_prefix(namespace: str, hash_algorithm: str) -> bytes:
    return (
        MAGIC
        + ssh_string(namespace.encode("utf-8"))
        + ssh_string(b"")
        + ssh_string(hash_algorithm.encode("ascii"))
    )


def signed_data(namespace: str, hash_algorithm: str, message: bytes) -> bytes:
    """The exact bytes the Ed25519 signature covers (reserved is always empty)."""
    hash_function = _HASH_FUNCTIONS.get(hash_algorithm)
    if hash_function is None:
        digest = hashlib.new(hash_algorithm, message).digest()
    else:
        digest = hash_function(message).digest()
    return _signed_prefix(namespace, hash_algorithm) + ssh_string(digest)


def sign_raw(
    key: bytes | nacl.signing.SigningKey,
    data: bytes,
    namespace: str = "git",
    *,
    hash_algorithm: str = DEFAULT_HASH,
) -> str:
    """Sign *data* for *namespace* with an Ed25519 key (32-byte seed, 64-byte seed||public or a
    PyNaCl SigningKey); return the armoured signature, byte-identical to ssh-keygen's."""
    if not namespace:
        raise SignatureError("the signature namespace must not be empty")
    if hash_algorithm not in HASHES:
        raise SignatureError(f"unsupported hash algorithm '{hash_algorithm}'")
    if isinstance(key, bytes):
        if len(key) not in (SEED_LEN, 2 * SEED_LEN):
            raise KeyMaterialError(f"an Ed25519 private key is 32 or 64 bytes, got {len(key)}")
        signing_key = nacl.signing.SigningKey(key[:SEED_LEN])
        if len(key) == 2 * SEED_LEN and bytes(signing_key.verify_key) != key[SEED_LEN:]:
            raise KeyMaterialError("Ed25519 private key does not match its public half")
    else:
        signing_key = key
    public = PublicKey(bytes(signing_key.verify_key))
    signature = signing_key.sign(signed_data(namespace, hash_algorithm, data)).signature
    blob = (
        MAGIC
        + ssh_uint32(VERSION)
        + ssh_string(public.wire())
        + ssh_string(namespace.encode("utf-8"))
        + ssh_string(b"")
        + ssh_string(hash_algorithm.encode("ascii"))
        + ssh_string(ssh_string(KEY_TYPE.encode()) + ssh_string(signature))
    )
    return armour(LABEL, blob)


def parse(armoured: str) -> ParsedSignature:
    """Parse an armoured SSHSIG strictly, without checking it against a message."""
    try:
        return _parse_blob(dearmour(armoured, LABEL))
    except WireFormatError as exc:
        raise SignatureError(f"malformed SSH signature: {exc}") from None


# The blob ssh-keygen writes for an Ed25519 key, up to the key, and after the namespace (by hash
# algorithm): the empty reserved field, the hash algorithm, the signature's type and length.
_KEY_TYPE_STRING = ssh_string(KEY_TYPE.encode())
_PLAIN_HEAD = (
    MAGIC
    + ssh_uint32(VERSION)
    + ssh_uint32(len(_KEY_TYPE_STRING) + 4 + PUBLIC_KEY_LEN)
    + _KEY_TYPE_STRING
    + ssh_uint32(PUBLIC_KEY_LEN)
)
_PLAIN_TAILS = {
    ssh_string(b"")
    + ssh_string(name.encode("ascii"))
    + ssh_uint32(len(_KEY_TYPE_STRING) + 4 + SIGNATURE_LEN)
    + _KEY_TYPE_STRING
    + ssh_uint32(SIGNATURE_LEN): name
    for name in sorted(HASHES)
}


def _parse_blob(blob: bytes) -> ParsedSignature:
    plain = _parse_plain(blob)
    return plain if plain is not None else _parse_fields(blob)


def _parse_plain(blob: bytes) -> ParsedSignature | None:
    """The fields of a blob laid out exactly as ssh-keygen writes one for an Ed25519 key (with
    any UTF-8 namespace), read by position: what :func:`_parse_fields` reads from it. None for
    any other blob, which :func:`_parse_fields` reads (or refuses) field by field."""
    key_end = len(_PLAIN_HEAD) + PUBLIC_KEY_LEN
    if len(blob) < key_end + 4 + SIGNATURE_LEN or not blob.startswith(_PLAIN_HEAD):
        return None
    namespace_end = key_end + 4 + int.from_bytes(blob[key_end : key_end + 4], "big")
    # empty (so no tail) when the namespace's length runs into the signature or past the end
    hash_algorithm = _PLAIN_TAILS.get(blob[namespace_end:-SIGNATURE_LEN])
    if hash_algorithm is None:
        return None
    try:
        namespace = blob[key_end + 4 : namespace_end].decode("utf-8")
    except UnicodeDecodeError:
        return None
    public = PublicKey(blob[len(_PLAIN_HEAD) : key_end])
    return ParsedSignature(public, namespace, hash_algorithm, blob[-SIGNATURE_LEN:])


def _parse_fields(blob: bytes) -> ParsedSignature:
    """:func:`_parse_blob` field by field (the reference reading, for any blob)."""
    reader = WireReader(blob)
    if reader.take(len(MAGIC), "signature magic") != MAGIC:
        raise SignatureError("malformed SSH signature: bad magic (not SSHSIG)")
    version = reader.uint32("signature version")
    if version != VERSION:
        raise SignatureError(f"unsupported SSH signature version {version}, expected {VERSION}")
    key_blob = reader.string("signature public key")
    try:
        public = PublicKey.from_wire(key_blob)
    except KeyMaterialError as exc:
        raise SignatureError(f"SSH signature public key: {exc}") from None
    namespace_raw = reader.string("signature namespace")
    try:
        namespace = namespace_raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SignatureError("signature namespace is not UTF-8") from None
    if reader.string("signature reserved field"):
        raise SignatureError("signature reserved field is not empty")
    hash_algorithm = reader.text("signature hash algorithm")
    if hash_algorithm not in HASHES:
        raise SignatureError(f"unsupported signature hash algorithm '{hash_algorithm[:32]}'")
    sig_blob = reader.string("signature")
    reader.finish("the signature")
    inner = WireReader(sig_blob)
    sig_type = inner.text("signature type")
    if sig_type != KEY_TYPE:
        raise SignatureError(f"signature type '{sig_type[:32]}' is not {KEY_TYPE}")
    signature = inner.string("Ed25519 signature")
    inner.finish("the Ed25519 signature")
    if len(signature) != SIGNATURE_LEN:
        raise SignatureError(f"an Ed25519 signature is {SIGNATURE_LEN} bytes, got {len(signature)}")
    return ParsedSignature(public, namespace, hash_algorithm, signature)


def verify(armoured: str, data: bytes, namespace: str) -> PublicKey:
    """Check that *armoured* is a valid SSHSIG over *data* for *namespace*; return its key.

    The key is returned, not trusted: use :func:`verify_with` to require an allowed key.
    """
    if not isinstance(armoured, str):
        raise SignatureError("signature is not text")
    parsed = parse(armoured)
    if parsed.namespace != namespace:
        raise SignatureError(
            f"signature namespace is {parsed.namespace[:64]!r}, expected {namespace!r}"
        )
    message = signed_data(parsed.namespace, parsed.hash_algorithm, data)
    try:
        # VerifyKey(raw).verify(message, signature) without its per-call wrapping: the key and
        # the signature lengths are already checked
        nacl.bindings.crypto_sign_open(parsed.signature + message, parsed.public_key.raw)
    except (nacl.exceptions.CryptoError, ValueError):
        raise SignatureError(
            f"bad signature by {parsed.public_key.fingerprint()}: "
            "the signed data was altered or the signature is corrupt"
        ) from None
    return parsed.public_key


def verify_with(
    armoured: str, data: bytes, namespace: str, allowed: Iterable[PublicKey]
) -> PublicKey:
    """:func:`verify`, then require the signing key to be one of *allowed* (compared by raw)."""
    key = verify(armoured, data, namespace)
    for candidate in allowed:
        if candidate.raw == key.raw:
            return candidate
    raise SignatureError(f"signed by untrusted key {key.fingerprint()}")
