"""Ed25519 signing in OpenSSH formats, so plain ``git verify-commit`` and ``ssh-keygen -Y`` agree.

* :mod:`gitaudit.crypto.wire`: the SSH wire format and armour, the Ed25519 key-type constants;
* :mod:`gitaudit.crypto.pubkey`: Ed25519 public keys, their OpenSSH text and fingerprints;
* :mod:`gitaudit.crypto.keyfile`: openssh-key-v1 private key files;
* :mod:`gitaudit.crypto.signers`: the Signer protocol, in-process and ``ssh-keygen`` signers;
* :mod:`gitaudit.crypto.keystore`: gitaudit's key directory: generate, list and load keys;
* :mod:`gitaudit.crypto.resolve`: which key signs (``--key``, environment, git config);
* :mod:`gitaudit.crypto.sshsig`: SSHSIG signatures (PROTOCOL.sshsig);
* :mod:`gitaudit.crypto.allowed_signers`: OpenSSH allowed-signers files;
* :mod:`gitaudit.crypto.commits`: SSH-signed commit objects, as ``git commit -S`` writes them.
"""

from gitaudit.crypto.allowed_signers import (
    format_allowed_signers,
    keys_for_namespace,
    parse_allowed_signers,
)
from gitaudit.crypto.commits import (
    SignedCommit,
    create_signed_commit,
    read_commit_signature,
    verify_commit,
)
from gitaudit.crypto.keystore import (
    GeneratedKey,
    LocalKey,
    generate_key,
    list_local_keys,
    load_signer,
)
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.resolve import resolve_signer
from gitaudit.crypto.signers import Ed25519Signer, Signer, SshKeygenSigner
from gitaudit.crypto.sshsig import sign_raw, verify, verify_with
from gitaudit.places import gitaudit_home

__all__ = [
    "Ed25519Signer",
    "GeneratedKey",
    "LocalKey",
    "PublicKey",
    "SignedCommit",
    "Signer",
    "SshKeygenSigner",
    "create_signed_commit",
    "format_allowed_signers",
    "generate_key",
    "gitaudit_home",
    "keys_for_namespace",
    "list_local_keys",
    "load_signer",
    "parse_allowed_signers",
    "read_commit_signature",
    "resolve_signer",
    "sign_raw",
    "verify",
    "verify_commit",
    "verify_with",
]
