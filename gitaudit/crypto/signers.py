"""Signers: the :class:`Signer` protocol, in-process Ed25519 signing and ``ssh-keygen -Y sign``."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Protocol

import nacl.signing

from gitaudit.crypto import sshsig
from gitaudit.crypto.keyfile import decode_private_key
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.wire import SEED_LEN, WireFormatError
from gitaudit.errors import KeyMaterialError, SignatureError


class Signer(Protocol):
    """Something that makes SSHSIG signatures with one Ed25519 key."""

    @property
    def public_key(self) -> PublicKey:
        """The key whose signatures :meth:`sign` produces."""
        ...

    def sign(self, data: bytes, namespace: str = "git") -> str:
        """Sign *data* for *namespace*; return the armoured SSHSIG text as ssh-keygen writes it."""
        ...


class Ed25519Signer:
    """Signs in-process with an unencrypted Ed25519 key (PyNaCl)."""

    def __init__(self, seed: bytes, *, comment: str = "", source: Path | None = None) -> None:
        if len(seed) != SEED_LEN:
            raise KeyMaterialError(f"an Ed25519 seed is {SEED_LEN} bytes, got {len(seed)}")
        self._key = nacl.signing.SigningKey(seed)
        self.source = source
        self._public = PublicKey(bytes(self._key.verify_key), comment)

    @classmethod
    def generate(cls, comment: str = "") -> Ed25519Signer:
        """A fresh random key (for tests and ephemeral use)."""
        return cls(os.urandom(SEED_LEN), comment=comment)

    @property
    def public_key(self) -> PublicKey:
        """The matching public key."""
        return self._public

    def sign(self, data: bytes, namespace: str = "git") -> str:
        """Armoured SSHSIG over *data* (hash sha512)."""
        return sshsig.sign_raw(self._key, data, namespace)

    def sign_raw(self, data: bytes) -> bytes:
        """A plain 64-byte Ed25519 signature over *data* (DSSE envelopes)."""
        return bytes(self._key.sign(data).signature)

    def __repr__(self) -> str:
        return f"Ed25519Signer({self._public.fingerprint()}, source={self.source})"


class SshKeygenSigner:
    """Signs by running ``ssh-keygen -Y sign``: passphrase-protected keys and ssh-agent keys.

    *key_path* is a private key (ssh-keygen asks for the passphrase or uses the agent) or a
    ``.pub`` file (the private half must be loaded in ssh-agent). With :meth:`for_agent_key`
    there is no file: a temporary ``.pub`` is written for each signature.
    """

    def __init__(
        self,
        key_path: Path | None,
        public_key: PublicKey | None = None,
        *,
        agent_only: bool = False,
    ) -> None:
        if key_path is None and public_key is None:
            raise KeyMaterialError("SshKeygenSigner needs a key path or a public key")
        self.key_path = key_path
        self.agent_only = agent_only  # ssh-keygen -U: never load a private key file
        if public_key is None:
            assert key_path is not None
            public_key = _public_key_of_file(key_path)
        self._public = public_key

    @classmethod
    def for_agent_key(cls, public_key: PublicKey) -> SshKeygenSigner:
        """Sign with the agent-held private half of *public_key*."""
        return cls(None, public_key)

    @property
    def public_key(self) -> PublicKey:
        """The key ssh-keygen is expected to sign with."""
        return self._public

    def sign(self, data: bytes, namespace: str = "git") -> str:
        """Run ``ssh-keygen -Y sign -n <namespace> -f <key>`` with *data* on stdin."""
        if self.key_path is not None:
            return self._run(self.key_path, data, namespace)
        with tempfile.TemporaryDirectory(prefix="gitaudit-agent-") as tmp:
            pub = Path(tmp) / "agent-key.pub"
            pub.write_text(self._public.openssh() + "\n")
            return self._run(pub, data, namespace)

    def _run(self, key_file: Path, data: bytes, namespace: str) -> str:
        shown = self.key_path if self.key_path is not None else self._public.fingerprint()
        from gitaudit.executables import outside

        try:  # never one the repository holds: it would be handed the key to sign with
            exe: str | None = outside("ssh-keygen", None, os.environ)
        except FileNotFoundError:
            exe = None
        if exe is None:
            raise KeyMaterialError(
                f"{shown}: ssh-keygen is needed to sign with this key but is not on PATH",
                hint="install OpenSSH (openssh-client) or use an unencrypted gitaudit key",
            )
        agent = ["-U"] if self.agent_only else []
        proc = subprocess.run(
            [exe, "-q", "-Y", "sign", *agent, "-n", namespace, "-f", str(key_file)],
            input=data,
            capture_output=True,
            check=False,
        )
        if proc.returncode != 0:
            detail = proc.stderr.decode(errors="replace").strip().splitlines()
            raise KeyMaterialError(
                f"{shown}: ssh-keygen could not sign"
                + (f" ({detail[-1]})" if detail else f" (exit {proc.returncode})"),
                hint=(
                    f"load the key into ssh-agent (`ssh-add {self.key_path or '<key>'}`), "
                    "check SSH_AUTH_SOCK, or use an unencrypted key from `git audit keys generate`"
                ),
            )
        armoured = proc.stdout.decode("ascii", errors="replace")
        try:
            signer_key = sshsig.verify(armoured, data, namespace)
        except SignatureError as exc:
            raise KeyMaterialError(
                f"{shown}: ssh-keygen produced an unusable signature ({exc})"
            ) from None
        if signer_key != self._public:
            raise KeyMaterialError(
                f"{shown}: ssh-keygen signed with {signer_key.fingerprint()}, "
                f"expected {self._public.fingerprint()}",
                hint="the agent or key file holds a different key than configured",
            )
        return armoured

    def __repr__(self) -> str:
        return f"SshKeygenSigner({self._public.fingerprint()}, key_path={self.key_path})"


def _public_key_of_file(path: Path) -> PublicKey:
    """The public key of a ``.pub`` file or of an OpenSSH private key file (even encrypted)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyMaterialError(f"{path}: cannot read key file ({exc})") from None
    try:
        if text.lstrip().startswith("-----BEGIN"):
            return decode_private_key(text).public_key
        return PublicKey.from_openssh(text)
    except (WireFormatError, KeyMaterialError) as exc:
        raise KeyMaterialError(f"{path}: not an OpenSSH Ed25519 key ({exc})") from None
