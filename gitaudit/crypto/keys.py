"""Ed25519 private keys, the signers built on them, and where gitaudit finds them.

* the ``openssh-key-v1`` private key container of OpenSSH's PROTOCOL.key (cipher and kdf
  ``none`` when we write it; encrypted keys are recognised and handed to ``ssh-keygen``).

The wire format is :mod:`gitaudit.crypto.wire`, public keys :mod:`gitaudit.crypto.pubkey`.
Private keys live outside any work tree, by default under :func:`gitaudit_home` ``/keys``.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import nacl.exceptions
import nacl.signing
import pygit2

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
from gitaudit.errors import KeyMaterialError, SignatureError
from gitaudit.home import gitaudit_home

PRIVATE_KEY_LABEL = "OPENSSH PRIVATE KEY"
OPENSSH_KEY_MAGIC = b"openssh-key-v1\x00"
KEYS_DIRNAME = "keys"
ENV_SIGNING_KEY = "GITAUDIT_SIGNING_KEY"
_PRIVATE_BLOCK_SIZE = 8  # cipher "none" pads the private section to 8 bytes
_KEY_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_GENERATE_HINT = "run `git audit keys generate` or set audit.signingKey"


# --------------------------------------------------------------------------- openssh-key-v1


@dataclass(frozen=True)
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


# --------------------------------------------------------------------------- signers


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
        from gitaudit.crypto import sshsig

        return sshsig.sign_raw(self._key, data, namespace)

    def __repr__(self) -> str:
        return f"Ed25519Signer({self._public.fingerprint()}, source={self.source})"


class SshKeygenSigner:
    """Signs by running ``ssh-keygen -Y sign``: passphrase-protected keys and ssh-agent keys.

    *key_path* is a private key (ssh-keygen asks for the passphrase or uses the agent) or a
    ``.pub`` file (the private half must be loaded in ssh-agent). With :meth:`for_agent_key`
    there is no file: a temporary ``.pub`` is written for each signature.
    """

    def __init__(self, key_path: Path | None, public_key: PublicKey | None = None) -> None:
        if key_path is None and public_key is None:
            raise KeyMaterialError("SshKeygenSigner needs a key path or a public key")
        self.key_path = key_path
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
        from gitaudit.crypto import sshsig

        shown = self.key_path if self.key_path is not None else self._public.fingerprint()
        exe = shutil.which("ssh-keygen")
        if exe is None:
            raise KeyMaterialError(
                f"{shown}: ssh-keygen is needed to sign with this key but is not on PATH",
                hint="install OpenSSH (openssh-client) or use an unencrypted gitaudit key",
            )
        proc = subprocess.run(
            [exe, "-q", "-Y", "sign", "-n", namespace, "-f", str(key_file)],
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


# --------------------------------------------------------------------------- key files


def keys_dir(home: Path | None = None) -> Path:
    """The directory holding gitaudit's own keys: ``<home>/keys``."""
    return (home if home is not None else gitaudit_home()) / KEYS_DIRNAME


@dataclass(frozen=True)
class GeneratedKey:
    """The files written by :func:`generate_key`."""

    private_path: Path
    public_path: Path
    public_key: PublicKey


@dataclass(frozen=True)
class LocalKey:
    """One key pair found in the gitaudit key directory."""

    name: str
    private_path: Path
    public_path: Path
    public_key: PublicKey

    @property
    def fingerprint(self) -> str:
        """``SHA256:...`` as ssh-keygen prints it."""
        return self.public_key.fingerprint()


def refuse_inside(path: Path, forbid_inside: Path | None) -> None:
    """Raise KeyMaterialError when *path* resolves (symlinks included) to inside *forbid_inside*."""
    if forbid_inside is None:
        return
    resolved = Path(path).expanduser().resolve()
    root = Path(forbid_inside).resolve()
    if resolved == root or resolved.is_relative_to(root):
        raise KeyMaterialError(
            f"{path}: private keys must never live inside the work tree ({root})",
            hint="keep keys outside the repository, e.g. under ~/.config/gitaudit/keys "
            "(`git audit keys generate`)",
        )


def validate_key_name(name: str) -> None:
    """A key name is ``[A-Za-z0-9][A-Za-z0-9._-]*`` and does not end in ``.pub``."""
    if not _KEY_NAME_RE.fullmatch(name) or name.endswith(".pub") or len(name) > 100:
        raise KeyMaterialError(
            f"invalid key name {name!r}",
            hint="use letters, digits, '.', '_' or '-', starting with a letter or digit",
        )


def _make_private_dir(directory: Path) -> None:
    for parent in reversed([directory, *directory.parents]):
        if not parent.exists():
            parent.mkdir(mode=0o700)
            os.chmod(parent, 0o700)


def _write_new(path: Path, content: str, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, content.encode("utf-8"))
    finally:
        os.close(fd)


def generate_key(
    name: str,
    home: Path | None = None,
    *,
    forbid_inside: Path | None = None,
    comment: str | None = None,
) -> GeneratedKey:
    """Create ``<home>/keys/<name>`` (0600, openssh-key-v1, unencrypted) and ``<name>.pub``.

    Refuses to overwrite either file and refuses a location inside *forbid_inside* (the work tree).
    """
    validate_key_name(name)
    directory = keys_dir(home)
    private_path = directory / name
    public_path = directory / f"{name}.pub"
    refuse_inside(private_path, forbid_inside)
    for existing in (private_path, public_path):
        if existing.exists() or existing.is_symlink():
            raise KeyMaterialError(
                f"{existing}: a key named {name!r} already exists",
                hint="choose another name, or remove the old key files first",
            )
    try:
        _make_private_dir(directory)
    except OSError as exc:
        raise KeyMaterialError(f"{directory}: cannot create key directory ({exc})") from None
    refuse_inside(private_path, forbid_inside)  # a symlink may have appeared meanwhile
    seed = os.urandom(SEED_LEN)
    text_comment = name if comment is None else comment
    public = PublicKey(bytes(nacl.signing.SigningKey(seed).verify_key), text_comment)
    try:
        _write_new(private_path, encode_private_key(seed, text_comment), 0o600)
    except FileExistsError:
        raise KeyMaterialError(
            f"{private_path}: a key named {name!r} already exists",
            hint="choose another name, or remove the old key files first",
        ) from None
    except OSError as exc:
        raise KeyMaterialError(f"{private_path}: cannot write private key ({exc})") from None
    try:
        _write_new(public_path, public.openssh() + "\n", 0o644)
    except OSError as exc:
        private_path.unlink(missing_ok=True)
        raise KeyMaterialError(f"{public_path}: cannot write public key ({exc})") from None
    return GeneratedKey(private_path, public_path, public)


def list_local_keys(home: Path | None = None) -> list[LocalKey]:
    """The key pairs in ``<home>/keys`` (a ``<name>.pub`` next to ``<name>``), sorted by name."""
    directory = keys_dir(home)
    if not directory.is_dir():
        return []
    found: list[LocalKey] = []
    for public_path in sorted(directory.glob("*.pub")):
        name = public_path.name.removesuffix(".pub")
        private_path = directory / name
        if not _KEY_NAME_RE.fullmatch(name) or not private_path.is_file():
            continue
        try:
            public = PublicKey.from_openssh(public_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, KeyMaterialError) as exc:
            raise KeyMaterialError(f"{public_path}: unreadable public key ({exc})") from None
        found.append(LocalKey(name, private_path, public_path, public))
    return found


def _looks_public(text: str) -> bool:
    first = text.lstrip().split(None, 1)
    return bool(first) and (first[0].startswith(("ssh-", "ecdsa-", "sk-", "key::")))


def load_signer(path: Path, *, forbid_inside: Path | None = None) -> Signer:
    """A signer for the key file at *path*.

    * unencrypted OpenSSH Ed25519 private key -> :class:`Ed25519Signer`;
    * encrypted private key, or a ``.pub`` public key (agent-held) -> :class:`SshKeygenSigner`.

    Private keys inside *forbid_inside* (after resolving symlinks) or readable by group/others
    are refused.
    """
    path = Path(path).expanduser()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise KeyMaterialError(f"{path}: no such key file", hint=_GENERATE_HINT) from None
    except OSError as exc:
        raise KeyMaterialError(f"{path}: cannot read key file ({exc.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    if text and _looks_public(text):
        try:
            return SshKeygenSigner(path, PublicKey.from_openssh(text.strip().splitlines()[0]))
        except KeyMaterialError as exc:
            raise KeyMaterialError(
                f"{path}: not an OpenSSH Ed25519 public key ({exc})",
                hint="gitaudit signs with Ed25519 keys only (`ssh-keygen -t ed25519`)",
            ) from None
    refuse_inside(path, forbid_inside)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise KeyMaterialError(
            f"{path}: private key is readable by group or others (mode {mode:04o})",
            hint=f"chmod 600 {path}",
        )
    if not text.lstrip().startswith(f"-----BEGIN {PRIVATE_KEY_LABEL}-----"):
        first = text.lstrip().split("\n", 1)[0][:60] if text else "binary data"
        raise KeyMaterialError(
            f"{path}: not an OpenSSH Ed25519 private key (starts with {first!r})",
            hint="create one with `git audit keys generate` or `ssh-keygen -t ed25519`",
        )
    try:
        parsed = decode_private_key(text)
    except (WireFormatError, KeyMaterialError) as exc:
        raise KeyMaterialError(
            f"{path}: not an OpenSSH Ed25519 private key ({exc})",
            hint="create one with `git audit keys generate` or `ssh-keygen -t ed25519`",
        ) from None
    if parsed.seed is None:
        return SshKeygenSigner(path, parsed.public_key)
    return Ed25519Signer(parsed.seed, comment=parsed.public_key.comment, source=path)


# --------------------------------------------------------------------------- resolution


class ConfigLike(Protocol):
    """What :func:`resolve_signer` needs from a config: ``config[name]`` raising KeyError."""

    def __getitem__(self, name: str, /) -> str | None: ...


ConfigLookup = Callable[[str], str | None]


def config_lookup(config: ConfigLike | ConfigLookup | pygit2.Config | None) -> ConfigLookup:
    """Normalise a pygit2.Config, a mapping or a ``get(name) -> str | None`` callable."""
    if config is None:
        return lambda _name: None
    if callable(config):
        return config

    def get(name: str) -> str | None:
        try:
            value = config[name]
        except KeyError:
            return None
        return value if isinstance(value, str) else None

    return get


def _load_from(source: str, path: Path, workdir: Path | None) -> Signer:
    """:func:`load_signer`, with *source* (where the path came from) prefixed to errors."""
    try:
        return load_signer(path, forbid_inside=workdir)
    except KeyMaterialError as exc:
        raise KeyMaterialError(f"{source}: {exc.message}", hint=exc.hint) from None


def _signer_from_setting(value: str, source: str, workdir: Path | None) -> Signer:
    """A signer from a key setting, read as git reads ``user.signingKey``: ``key::...`` or
    ``ssh-...`` is a literal public key (private half in ssh-agent), anything else a path
    (``~`` expanded, relative to the work tree)."""
    setting = value.strip()
    if setting.startswith(("key::", "ssh-")):
        try:
            return SshKeygenSigner.for_agent_key(PublicKey.from_openssh(setting))
        except KeyMaterialError as exc:
            raise KeyMaterialError(f"{source}: {exc.message}", hint=exc.hint) from None
    path = Path(setting).expanduser()
    if not path.is_absolute() and workdir is not None:
        path = workdir / path
    return _load_from(source, path, workdir)


def resolve_signer(
    *,
    explicit: Path | None = None,
    repo_config: ConfigLike | ConfigLookup | pygit2.Config | None = None,
    workdir: Path | None = None,
    home: Path | None = None,
) -> Signer:
    """Find the signing key, first match wins.

    1. *explicit* (``--key``);
    2. ``$GITAUDIT_SIGNING_KEY``;
    3. git config ``audit.signingKey``;
    4. git config ``user.signingKey`` when ``gpg.format`` is ``ssh`` (a private key path, a
       ``.pub`` path or a literal ``key::ssh-ed25519 ...`` meaning agent-held; Ed25519 only);
    5. the gitaudit key directory: the key named ``default``, else its only key.

    *repo_config* is a ``pygit2.Config``, a mapping or a ``get(name)`` callable; with the last two
    the names are looked up exactly as spelt above. Private keys inside *workdir* are refused.
    """
    get = config_lookup(repo_config)
    if explicit is not None:
        return _load_from("--key", Path(explicit).expanduser(), workdir)
    env_value = os.environ.get(ENV_SIGNING_KEY, "").strip()
    if env_value:
        return _signer_from_setting(env_value, ENV_SIGNING_KEY, workdir)
    audit_value = (get("audit.signingKey") or "").strip()
    if audit_value:
        return _signer_from_setting(audit_value, "audit.signingKey", workdir)
    if (get("gpg.format") or "").strip() == "ssh":
        user_value = (get("user.signingKey") or "").strip()
        if user_value:
            return _signer_from_setting(user_value, "user.signingKey", workdir)
    local = list_local_keys(home)
    chosen = [k for k in local if k.name == "default"] or (local if len(local) == 1 else [])
    if chosen:
        return _load_from(f"gitaudit key {chosen[0].name!r}", chosen[0].private_path, workdir)
    if local:
        names = ", ".join(k.name for k in local)
        raise KeyMaterialError(
            f"no signing key chosen: {keys_dir(home)} holds several keys ({names})",
            hint="set audit.signingKey to one of them, or pass --key",
        )
    raise KeyMaterialError("no signing key found", hint=_GENERATE_HINT)
