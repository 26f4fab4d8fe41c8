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
