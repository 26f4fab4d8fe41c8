"""The ``openssh-key-v1`` private key container of OpenSSH's PROTOCOL.key, Ed25519 only.

Cipher and kdf are ``none`` when we write it; encrypted keys are recognised (their public part is
read) and handed to ``ssh-keygen`` for signing.
"""

from __future__ import annotations

import os

import nacl.signing

from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.wire import (
    KEY_TYPE,
    PUBLIC_KEY_LEN,
    SEED_LEN,
    WireFormatError,
    WireReader,
    armour,
    dearmour,
    ssh_string,
    ssh_uint32,
)
from gitaudit.errors import KeyMaterialError
from gitaudit.frozen import frozen

PRIVATE_KEY_LABEL = "OPENSSH PRIVATE KEY"
OPENSSH_KEY_MAGIC = b"openssh-key-v1\x00"
_PRIVATE_BLOCK_SIZE = 8  # cipher "none" pads the private section to 8 bytes


@frozen
class PrivateKeyFile:
    """A parsed ``openssh-key-v1`` file holding one Ed25519 key; *seed* is None if encrypted."""

    public_key: PublicKey
    cipher: str
    kdf: str
    seed: bytes | None

    @property
    def encrypted(self) -> bool:
        """True when the private section is protected by a passphrase."""
        return self.cipher != "none"


def encode_private_key(seed: bytes, comment: str = "", *, checkint: int | None = None) -> str:
    """Serialise an unencrypted ``openssh-key-v1`` Ed25519 private key, armoured.

    Layout (PROTOCOL.key): magic, cipher "none", kdf "none", empty kdf options, 1 key, the public
    blob, then the private section: two equal check ints, type, public key, 64-byte private key
    (seed || public), comment, and padding bytes 1, 2, 3... to a multiple of 8.
    """
    if len(seed) != SEED_LEN:
        raise KeyMaterialError(f"an Ed25519 seed is {SEED_LEN} bytes, got {len(seed)}")
    public = PublicKey(bytes(nacl.signing.SigningKey(seed).verify_key))
    check = int.from_bytes(os.urandom(4), "big") if checkint is None else checkint
    private = (
        ssh_uint32(check)
        + ssh_uint32(check)
        + ssh_string(KEY_TYPE.encode())
        + ssh_string(public.raw)
        + ssh_string(seed + public.raw)
        + ssh_string(comment.encode("utf-8"))
    )
    pad = -len(private) % _PRIVATE_BLOCK_SIZE
    private += bytes(range(1, pad + 1))
    blob = (
        OPENSSH_KEY_MAGIC
        + ssh_string(b"none")
        + ssh_string(b"none")
        + ssh_string(b"")
        + ssh_uint32(1)
        + ssh_string(public.wire())
        + ssh_string(private)
    )
    return armour(PRIVATE_KEY_LABEL, blob)


def decode_private_key(text: str) -> PrivateKeyFile:
    """Parse an armoured ``openssh-key-v1`` Ed25519 key strictly.

    Raises :class:`WireFormatError` or :class:`KeyMaterialError` with the reason (no path; the
    caller adds it). Encrypted keys are parsed up to their public part only.
    """
    reader = WireReader(dearmour(text, PRIVATE_KEY_LABEL))
    if reader.take(len(OPENSSH_KEY_MAGIC), "magic") != OPENSSH_KEY_MAGIC:
        raise WireFormatError("bad magic (not openssh-key-v1)")
    cipher = reader.text("cipher name")
    kdf = reader.text("kdf name")
    reader.string("kdf options")
    count = reader.uint32("key count")
    if count != 1:
        raise WireFormatError(f"file holds {count} keys, expected 1")
    public = PublicKey.from_wire(reader.string("public key"))
    private = reader.string("private section")
    reader.finish("the private section")
    if cipher != "none":
        return PrivateKeyFile(public, cipher, kdf, None)
    if kdf != "none":
        raise WireFormatError(f"cipher 'none' with kdf '{kdf}'")
    if len(private) % _PRIVATE_BLOCK_SIZE:
        raise WireFormatError("private section is not padded to 8 bytes")
    section = WireReader(private)
    if section.uint32("check int") != section.uint32("check int"):
        raise WireFormatError("check ints differ (corrupt key)")
    key_type = section.text("private key type")
    if key_type != KEY_TYPE:
        raise KeyMaterialError(f"key type '{key_type}' is not {KEY_TYPE}")
    inner_public = section.string("public key")
    secret = section.string("private key")
    comment_bytes = section.string("comment")
    padding = section.rest()
    if padding != bytes(range(1, len(padding) + 1)):
        raise WireFormatError("bad padding in private section")
    if len(secret) != SEED_LEN + PUBLIC_KEY_LEN or secret[SEED_LEN:] != inner_public:
        raise WireFormatError("private key does not embed its public key")
    if inner_public != public.raw:
        raise WireFormatError("private section does not match the public key")
    seed = secret[:SEED_LEN]
    if bytes(nacl.signing.SigningKey(seed).verify_key) != public.raw:
        raise WireFormatError("private key does not derive its public key")
    comment = " ".join(comment_bytes.decode("utf-8", errors="replace").splitlines())
    return PrivateKeyFile(public.with_comment(comment), cipher, kdf, seed)
