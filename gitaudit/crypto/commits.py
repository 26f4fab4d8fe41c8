"""SSH-signed git commits, byte-compatible with ``git commit -S`` (``gpg.format=ssh``).

A signed commit is the plain commit object with one ``gpgsig`` header inserted after the last
header (``committer``), holding the armoured SSHSIG; every line after the first starts with a
single space. The signed payload is the object without that header, which is what
``git verify-commit`` checks. Objects are read and written raw through the object database so
the bytes signed and the bytes stored cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import pygit2
from pygit2.enums import ObjectType

from gitaudit.crypto import sshsig
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.errors import RepositoryError, SignatureError
from gitaudit.frozen import frozen

if TYPE_CHECKING:  # signing is for writers: judging only verifies
    from gitaudit.crypto.signers import Signer

NAMESPACE = "git"
SNAPSHOT_NAMESPACE = "gitaudit-snapshot"
"""Work-tree snapshots (:mod:`gitaudit.ledger.snapshots`) are signed for their own namespace:
their tree and parent come from the work tree and a ref the agent can write, so a signature
that verified for ``git`` would make each one a commit of the agent's design, signed by the
user, that any ledger reader (and ``git verify-commit``) accepts."""
SNAPSHOT_TRAILER = "Audit-Snapshot"
"""The trailer every snapshot's message carries (``Audit-Snapshot: NAME``), from the first
gitaudit that took snapshots on: those before :data:`SNAPSHOT_NAMESPACE` were signed for ``git``
like any ledger commit, so the trailer is what tells one of them from a plans commit or a run."""
SIGNATURE_HEADER = b"gpgsig"
SIGNATURE_HEADER_SHA256 = b"gpgsig-sha256"
_SIGNATURE_HEADERS = (SIGNATURE_HEADER, SIGNATURE_HEADER_SHA256)
_SSH_BEGIN = "-----BEGIN SSH SIGNATURE-----\n"
_FALLBACK_NAME, _FALLBACK_EMAIL = "gitaudit", "gitaudit@localhost"

OidLike = pygit2.Oid | str


@frozen
class SignedCommit:
    """A commit split the way git verifies it: the payload and the armoured signature."""

    payload: bytes
    armoured: str


def _oid(value: OidLike) -> pygit2.Oid:
    if isinstance(value, pygit2.Oid):
        return value
    try:
        return pygit2.Oid(hex=value)
    except (ValueError, TypeError):
        raise RepositoryError(f"{value!r} is not a full object id") from None


def _require(repo: pygit2.Repository, value: OidLike, kind: ObjectType, what: str) -> pygit2.Oid:
    oid = _oid(value)
    try:
        obj_type, _data = repo.odb.read(oid)
    except (KeyError, ValueError, pygit2.GitError):
        raise RepositoryError(f"{what} {oid} does not exist in {repo.path}") from None
    if obj_type != kind:
        raise RepositoryError(f"{what} {oid} is not a {kind.name.lower()}")
    return oid


def _person(role: bytes, who: pygit2.Signature) -> bytes:
    """``author Name <email> 1700000000 +0000`` as git writes it."""
    name, email = who.raw_name, who.raw_email
    for part in (name, email):
        if any(ch in part for ch in (b"<", b">", b"\n", b"\x00")):
            raise ValueError(f"{role.decode()} identity {part!r} contains '<', '>', NUL or newline")
    offset = who.offset
    sign = "-" if offset < 0 else "+"
    hours, minutes = divmod(abs(offset), 60)
    stamp = f"{who.time} {sign}{hours:02d}{minutes:02d}".encode("ascii")
    return role + b" " + name + b" <" + email + b"> " + stamp + b"\n"


def _default_signature(repo: pygit2.Repository) -> pygit2.Signature:
    try:
        return repo.default_signature
    except (KeyError, pygit2.GitError):
        return pygit2.Signature(_FALLBACK_NAME, _FALLBACK_EMAIL)


def commit_payload(
    *,
    tree: pygit2.Oid,
    parents: Sequence[pygit2.Oid],
    author: pygit2.Signature,
    committer: pygit2.Signature,
    message: str,
) -> bytes:
    """The unsigned commit object: tree, parents, author, committer, blank line, message.

    A non-empty message gets a final newline if it lacks one; NUL bytes are refused.
    """
    if "\x00" in message:
        raise ValueError("a commit message cannot contain NUL bytes")
    if message and not message.endswith("\n"):
        message += "\n"
    head = b"tree " + str(tree).encode("ascii") + b"\n"
    for parent in parents:
        head += b"parent " + str(parent).encode("ascii") + b"\n"
    head += _person(b"author", author) + _person(b"committer", committer)
    return head + b"\n" + message.encode("utf-8")


def insert_signature(payload: bytes, armoured: str) -> bytes:
    """Insert ``gpgsig <armour>`` after the last header, continuation lines indented by a space."""
    lines = armoured.rstrip("\n").split("\n")
    if not armoured.startswith(_SSH_BEGIN) or any(not line for line in lines):
        raise SignatureError("refusing to embed a signature that is not SSH signature armour")
    header = SIGNATURE_HEADER + b" " + "\n ".join(lines).encode("ascii") + b"\n"
    end = payload.find(b"\n\n")
    cut = len(payload) if end < 0 else end + 1
    return payload[:cut] + header + payload[cut:]


def create_signed_commit(
    repo: pygit2.Repository,
    *,
    tree: OidLike,
    parents: Sequence[OidLike],
    message: str,
    signer: Signer,
    author: pygit2.Signature | None = None,
    committer: pygit2.Signature | None = None,
    namespace: str = NAMESPACE,
) -> pygit2.Oid:
    """Write an SSH-signed commit object and return its id. No ref is moved.

    *author* and *committer* default to the repository's ``user.name``/``user.email`` (or
    ``gitaudit <gitaudit@localhost>``) at the current time. *namespace* is ``git`` for every
    ledger commit (what ``git verify-commit`` checks), :data:`SNAPSHOT_NAMESPACE` for snapshots.
    """
    tree_oid = _require(repo, tree, ObjectType.TREE, "tree")
    parent_oids = [_require(repo, p, ObjectType.COMMIT, "parent") for p in parents]
    if author is None:
        author = _default_signature(repo)
    if committer is None:
        committer = author
    payload = commit_payload(
        tree=tree_oid, parents=parent_oids, author=author, committer=committer, message=message
    )
    armoured = signer.sign(payload, namespace)
    signed_by = sshsig.verify(armoured, payload, namespace)
    if signed_by.raw != signer.public_key.raw:
        raise SignatureError(
            f"signer returned a signature by {signed_by.fingerprint()}, "
            f"expected {signer.public_key.fingerprint()}"
        )
    return repo.odb.write(ObjectType.COMMIT, insert_signature(payload, armoured))


def _header_lines(raw: bytes) -> tuple[list[bytes], bytes]:
    """A raw commit's header lines (each with its newline, but a last line without one) and the
    rest: the empty line that ends the headers and the message, payload as they stand."""
    if raw.startswith(b"\n"):
        return [], raw
    end = raw.find(b"\n\n")
    head, rest = (raw, b"") if end < 0 else (raw[: end + 1], raw[end + 1 :])
    lines = head.split(b"\n")
    last = lines.pop()  # b"" after a final newline
    kept = [line + b"\n" for line in lines]
    if last:
        kept.append(last)
    return kept, rest


def _split_plain(raw: bytes) -> tuple[bytes, bytes] | None:
    """(payload, signature) of a commit with exactly one ``gpgsig`` header, its value on one
    line and its continuation lines, a blank line ending the headers, and no other header
    starting with ``gpgsig`` (every signed run commit): what the line-by-line split gives, in
    a few searches. None for any other layout, which the line-by-line split reads."""
    end = raw.find(b"\n\n")  # the headers' last newline; the blank line is at end + 1
    if end < 0 or raw.startswith((b"\n", b"gpgsig")):
        return None
    # every other header line starts after a newline before *end*
    at = raw.find(b"\ngpgsig", 0, end) + 1  # the header line (0: none)
    begin = at + len(SIGNATURE_HEADER) + 1  # its value, after "gpgsig "
    if not at or raw[begin - 1] != 0x20 or raw.find(b"\ngpgsig", at, end) >= 0:
        return None
    lines: list[bytes] = []
    while True:
        stop = raw.find(b"\n", begin)  # at most end
        lines.append(raw[begin : stop + 1])
        if raw[stop + 1] != 0x20:  # not a continuation line (raw[end + 1] is the blank line)
            break
        begin = stop + 2  # a continuation line, without its leading space
    return raw[:at] + raw[stop + 1 :], b"".join(lines)


def split_signature(raw: bytes, what: str = "commit") -> SignedCommit:
    """Split a raw commit object into payload and SSH signature, rejecting ambiguous layouts."""
    plain = _split_plain(raw)
    if plain is not None:
        return _ssh_signed(plain[0], plain[1], what)
    return _split_lines(raw, what)


def _split_lines(raw: bytes, what: str) -> SignedCommit:
    """:func:`split_signature` line by line (the reference reading, for any layout)."""
    lines, rest = _header_lines(raw)
    payload: list[bytes] = []
    signatures: list[tuple[bytes, list[bytes]]] = []
    in_signature = False
    for line in lines:
        if line.startswith(b" "):  # a continuation line
            if in_signature:
                signatures[-1][1].append(line[1:])
            else:
                payload.append(line)
            continue
        name = line.split(b" ", 1)[0].rstrip(b"\n")
        # a signature header is its name and a space, as git reads it ("gpgsig" alone on its
        # line starts none: git verify-commit finds no signature there)
        in_signature = name in _SIGNATURE_HEADERS and line[len(name) : len(name) + 1] == b" "
        if in_signature:
            signatures.append((name, [line[len(name) + 1 :]]))
        else:
            payload.append(line)
    payload.append(rest)
    names = [name for name, _ in signatures]
    if not names:
        raise SignatureError(f"{what} is not signed")
    if SIGNATURE_HEADER_SHA256 in names and SIGNATURE_HEADER in names:
        raise SignatureError(f"{what} has both gpgsig and gpgsig-sha256 headers")
    if SIGNATURE_HEADER not in names:
        raise SignatureError(f"{what} has only a gpgsig-sha256 header (no SHA-1 signature)")
    if len(names) > 1:
        raise SignatureError(f"{what} has {len(names)} gpgsig headers; exactly one is allowed")
    return _ssh_signed(b"".join(payload), b"".join(signatures[0][1]), what)


def _ssh_signed(payload: bytes, signature: bytes, what: str) -> SignedCommit:
    """The split commit, if its one ``gpgsig`` header holds SSH signature armour."""
    try:
        armoured = signature.decode("ascii")
    except UnicodeDecodeError:
        raise SignatureError(f"{what} has a gpgsig header that is not ASCII") from None
    if not armoured.startswith(_SSH_BEGIN):
        kind = "an OpenPGP" if armoured.startswith("-----BEGIN PGP") else "a non-SSH"
        raise SignatureError(f"{what} carries {kind} signature, not an SSH signature")
    return SignedCommit(payload, armoured)


def read_commit_signature(repo: pygit2.Repository, oid: OidLike) -> SignedCommit:
    """Read the raw commit object *oid* and split it as git does for verification."""
    commit_oid = _oid(oid)
    try:
        obj_type, raw = repo.odb.read(commit_oid)
    except (KeyError, ValueError, pygit2.GitError):
        raise SignatureError(f"commit {commit_oid} does not exist") from None
    if obj_type != ObjectType.COMMIT:
        raise SignatureError(f"object {commit_oid} is not a commit")
    return split_signature(raw, f"commit {commit_oid}")


def verify_commit(
    repo: pygit2.Repository,
    oid: OidLike,
    allowed: Iterable[PublicKey],
    namespace: str = NAMESPACE,
) -> PublicKey:
    """Verify the SSH signature of commit *oid* (namespace ``git`` unless told) against
    *allowed* keys. A snapshot is refused as anything else by name, so the refusal of one
    pointed at by a ledger ref says what it is."""
    signed = read_commit_signature(repo, oid)
    if namespace != SNAPSHOT_NAMESPACE:  # one signed for "git" by a gitaudit before the namespace
        body = signed.payload.find(b"\n\n")
        refusal = snapshot_refusal(
            signed.payload[body + 2 :] if body >= 0 else b"", _oid(oid), f"a {namespace!r} commit"
        )
        if refusal is not None:
            raise SignatureError(refusal, hint=SNAPSHOT_HINT)
    try:
        return sshsig.verify_with(signed.armoured, signed.payload, namespace, allowed)
    except SignatureError as exc:
        if namespace != SNAPSHOT_NAMESPACE and _signed_for(signed) == SNAPSHOT_NAMESPACE:
            raise SignatureError(
                f"commit {_oid(oid)} is a work-tree snapshot (signed for "
                f"{SNAPSHOT_NAMESPACE!r}), never a {namespace!r} commit",
                hint=SNAPSHOT_HINT,
            ) from None
        raise SignatureError(f"commit {_oid(oid)}: {exc.message}", hint=exc.hint) from None


def snapshot_marker(message: str | bytes) -> str | None:
    """The snapshot name in the trailers of commit *message* (a line ``Audit-Snapshot: NAME`` in
    its last paragraph, where gitaudit writes it), or None: the commit is a work-tree snapshot."""
    text = message.decode("utf-8", "replace") if isinstance(message, bytes) else message
    if f"{SNAPSHOT_TRAILER}:" not in text:  # every ledger commit: one search
        return None
    for line in text.rstrip("\n").rsplit("\n\n", 1)[-1].split("\n"):
        if line.startswith(f"{SNAPSHOT_TRAILER}:"):
            return line.removeprefix(f"{SNAPSHOT_TRAILER}:").strip()
    return None


def snapshot_refusal(message: str | bytes, oid: OidLike, role: str) -> str | None:
    """Why commit *oid* (its *message*) is no *role* (``a plans commit``, ``a run``): it is a
    work-tree snapshot by its trailer, whatever namespace it was signed for; None otherwise."""
    name = snapshot_marker(message)
    if name is None:
        return None
    return (
        f"commit {oid} is a work-tree snapshot ('{SNAPSHOT_TRAILER}: {name}' in its message), "
        f"never {role}"
    )


SNAPSHOT_HINT = (
    "snapshots are not evidence, seals or trust (an older gitaudit signed them like ledger "
    "commits); move the ref back to the commit it held (`git reflog`)"
)


def _signed_for(signed: SignedCommit) -> str | None:
    """The namespace a commit's signature names, or None when it does not parse."""
    try:
        return sshsig.parse(signed.armoured).namespace
    except SignatureError:
        return None
