"""Ed25519 public keys in OpenSSH formats.

The ``ssh-ed25519`` wire blob, the one-line OpenSSH public key (``ssh-ed25519 AAAA... comment``)
and its SHA256 fingerprint, exactly as ``ssh-keygen -lf`` prints it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import field

from gitaudit.crypto.wire import KEY_TYPE, PUBLIC_KEY_LEN, WireFormatError, WireReader, ssh_string
from gitaudit.errors import KeyMaterialError
from gitaudit.frozen import frozen


@frozen
class PublicKey:
    """An Ed25519 public key. Equality and hashing use the 32 raw bytes only, never the comment."""

    raw: bytes
    comment: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if len(self.raw) != PUBLIC_KEY_LEN:
            raise KeyMaterialError(
                f"an Ed25519 public key is {PUBLIC_KEY_LEN} bytes, got {len(self.raw)}"
            )
        if "\n" in self.comment or "\r" in self.comment:
            raise KeyMaterialError("a public key comment cannot contain a line break")

    def wire(self) -> bytes:
        """The SSH wire blob: ``string "ssh-ed25519"`` + ``string raw``."""
        return ssh_string(KEY_TYPE.encode()) + ssh_string(self.raw)

    def openssh(self) -> str:
        """``ssh-ed25519 AAAA... comment`` (the comment is left out when empty)."""
        text = f"{KEY_TYPE} {base64.b64encode(self.wire()).decode('ascii')}"
        return f"{text} {self.comment}" if self.comment else text

    def fingerprint(self) -> str:
        """``SHA256:<unpadded base64>``, the second field of ``ssh-keygen -lf``."""
        digest = hashlib.sha256(self.wire()).digest()
        return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")

    def with_comment(self, comment: str) -> PublicKey:
        """The same key with another comment."""
        return PublicKey(self.raw, comment)

    @classmethod
    def from_wire(cls, blob: bytes, comment: str = "") -> PublicKey:
        """Parse an ``ssh-ed25519`` wire blob strictly (type, 32-byte key, nothing after)."""
        reader = WireReader(blob)
        try:
            key_type = reader.text("public key type")
            if key_type != KEY_TYPE:
                raise KeyMaterialError(
                    f"unsupported key type '{key_type}': gitaudit uses Ed25519 keys ({KEY_TYPE})"
                )
            raw = reader.string("Ed25519 public key")
            reader.finish("the public key blob")
        except WireFormatError as exc:
            raise KeyMaterialError(f"malformed public key blob: {exc}") from None
        if len(raw) != PUBLIC_KEY_LEN:
            raise KeyMaterialError(
                f"an Ed25519 public key is {PUBLIC_KEY_LEN} bytes, got {len(raw)}"
            )
        return cls(raw, comment)

    @classmethod
    def from_openssh(cls, text: str) -> PublicKey:
        """Parse ``ssh-ed25519 BASE64 [comment]``, also with git's literal ``key::`` prefix."""
        line = text.strip()
        line = line.removeprefix("key::").strip()
        parts = line.split(None, 2)
        if not parts:
            raise KeyMaterialError("empty public key")
        if parts[0] != KEY_TYPE:
            raise KeyMaterialError(
                f"unsupported key type '{parts[0][:40]}': gitaudit uses Ed25519 keys ({KEY_TYPE})"
            )
        if len(parts) < 2:
            raise KeyMaterialError(f"'{KEY_TYPE}' is not followed by the base64 key")
        try:
            blob = base64.b64decode(parts[1], validate=True)
        except (binascii.Error, ValueError):
            raise KeyMaterialError("public key is not valid base64") from None
        return cls.from_wire(blob, parts[2].strip() if len(parts) > 2 else "")
