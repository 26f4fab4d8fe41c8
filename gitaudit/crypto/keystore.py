"""gitaudit's key files on disk: the key directory, generating, listing and loading keys.

Private keys live outside any work tree, by default under :func:`gitaudit_home` ``/keys``.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import nacl.signing

from gitaudit.crypto.keyfile import PRIVATE_KEY_LABEL, decode_private_key, encode_private_key
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.signers import Ed25519Signer, Signer, SshKeygenSigner
from gitaudit.crypto.wire import SEED_LEN, WireFormatError
from gitaudit.errors import KeyMaterialError
from gitaudit.frozen import frozen
from gitaudit.places import gitaudit_home
from gitaudit.secret import keep_private

KEYS_DIRNAME = "keys"
GENERATE_HINT = "run `git audit keys generate` or set audit.signingKey"
_KEY_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def keys_dir(home: Path | None = None) -> Path:
    """The directory holding gitaudit's own keys: ``<home>/keys``."""
    return (home if home is not None else gitaudit_home()) / KEYS_DIRNAME


@frozen
class GeneratedKey:
    """The files written by :func:`generate_key`."""

    private_path: Path
    public_path: Path
    public_key: PublicKey


@frozen
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


MAX_KEY_FILE_BYTES = 1 << 16  # an OpenSSH key file is a few hundred bytes


def expand_user(path: Path | str) -> Path:
    """*path* with a leading ``~`` or ``~user`` expanded; KeyMaterialError (not pathlib's
    RuntimeError) when there is no such home."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        raise KeyMaterialError(
            f"{path}: cannot expand '~' (no such user or no home directory)",
            hint="give the key's full path",
        ) from None


def read_key_file(path: Path) -> bytes:
    """The bytes of the key file *path*: a regular file of at most :data:`MAX_KEY_FILE_BYTES`
    (a device such as ``/dev/zero`` would never end, a FIFO would block); KeyMaterialError
    otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise KeyMaterialError(f"{path}: no such key file", hint=GENERATE_HINT) from None
    except OSError as exc:
        raise KeyMaterialError(f"{path}: cannot read key file ({exc.strerror})") from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        raise KeyMaterialError(f"{path}: cannot read key file ({exc.strerror})") from None
    if not stat.S_ISREG(mode):  # checked before fdopen, which refuses a directory by fd number
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise KeyMaterialError(
            f"{path}: not a key file ({kind})",
            hint="name an Ed25519 private key file (`git audit keys generate` creates one)",
        )
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(MAX_KEY_FILE_BYTES + 1)
        except OSError as exc:
            raise KeyMaterialError(f"{path}: cannot read key file ({exc.strerror})") from None
    if len(data) > MAX_KEY_FILE_BYTES:
        raise KeyMaterialError(f"{path}: not a key file (more than {MAX_KEY_FILE_BYTES} bytes)")
    return data


def refuse_inside(path: Path, forbid_inside: Path | None) -> None:
    """Raise KeyMaterialError when *path* resolves (symlinks included) to inside *forbid_inside*."""
    if forbid_inside is None:
        return
    resolved = expand_user(path).resolve()
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


def _is_inside(path: Path, folder: Path) -> bool:
    try:
        refuse_inside(path, folder)
    except KeyMaterialError:
        return True
    return False


def _private_halves(public: Path) -> list[Path]:
    """The private key files ssh-keygen looks for beside the public key file *public*."""
    return [
        public.with_name(public.name.removesuffix(suffix))
        for suffix in ("-cert.pub", ".pub")
        if public.name.endswith(suffix) and public.name != suffix
    ]


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
    path = expand_user(path)
    keep_private()  # before the key is in memory: no core file or /proc/<pid>/mem shows it
    data = read_key_file(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    if text and _looks_public(text):
        inside = forbid_inside is not None and _is_inside(path, forbid_inside)
        if inside:
            # ssh-keygen signs with the private key beside a .pub when no agent holds it:
            # one inside the work tree would be loaded after all
            for private in _private_halves(path):
                if private.exists() or private.is_symlink():
                    refuse_inside(private, forbid_inside)
        try:
            public = PublicKey.from_openssh(text.strip().splitlines()[0])
            # in the work tree only the agent may sign (a private half may appear beside it)
            return SshKeygenSigner(path, public, agent_only=inside)
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
        # only a PEM header is echoed: a private file named by mistake (a token, a credential
        # store) would end up in the error, and in whatever logs it
        first = text.lstrip().split("\n", 1)[0]
        seen = (
            f"starts with {first!r}"
            if re.fullmatch(r"-----BEGIN [A-Z0-9 ]{1,40}-----", first)
            else f"no -----BEGIN {PRIVATE_KEY_LABEL}----- line"
        )
        raise KeyMaterialError(
            f"{path}: not an OpenSSH Ed25519 private key ({seen})",
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
