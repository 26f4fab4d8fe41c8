"""Signature parsing under hostile input: SignatureError only, and never a forged acceptance.

Starts from a real SSH-signed commit (``create_signed_commit`` with a fixed key) and damages it at
three levels: the raw commit object (headers, continuation lines, CR, duplicate or renamed
``gpgsig`` headers), the armoured text (lines dropped, swapped, re-wrapped, CRLF, blank lines,
base64 edits), and the SSHSIG wire fields (each field replaced, lengths lied about). Whatever
``split_signature`` / ``sshsig.verify`` accept must be the genuine signature over the genuine
payload (``tests/crypto/test_sshsig.py`` already fuzzes random text and raw blob bit flips).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import cache

import pygit2
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pygit2.enums import ObjectType

from gitaudit.crypto import sshsig
from gitaudit.crypto.commits import (
    NAMESPACE,
    _split_lines,
    _split_plain,
    create_signed_commit,
    split_signature,
)
from gitaudit.crypto.signers import Ed25519Signer
from gitaudit.crypto.wire import WireFormatError, WireReader, armour, dearmour
from gitaudit.errors import SignatureError
from tests.fuzz._support import SEED, bare_repo, commit_files

SIGNER = Ed25519Signer(SEED, comment="fuzz")
WHEN = pygit2.Signature("Fuzz Runner", "runner@example.test", 1_700_000_000, 60)


@cache
def genuine_commit() -> bytes:
    repo = bare_repo()
    tree = repo[commit_files(repo, {"run.json": b"{}\n"})].peel(pygit2.Commit).tree_id
    oid = create_signed_commit(
        repo,
        tree=tree,
        parents=[],
        message="audit(default): PASS\n\nAudit-Verdict: PASS\n",
        signer=SIGNER,
        author=WHEN,
        committer=WHEN,
    )
    kind, raw = repo.odb.read(oid)
    assert kind == ObjectType.COMMIT
    return bytes(raw)


@cache
def genuine() -> tuple[bytes, str, bytes]:
    """(payload, armoured signature, SSHSIG blob) of the genuine commit."""
    signed = split_signature(genuine_commit())
    return signed.payload, signed.armoured, dearmour(signed.armoured, sshsig.LABEL)


def _accepts(armoured: str, payload: bytes, *, record: bool = True) -> bool:
    try:
        key = sshsig.verify(armoured, payload, NAMESPACE)
    except SignatureError:
        return False
    assert key.raw == SIGNER.public_key.raw
    if record:
        event("accepted")
    return True


def test_the_genuine_commit_verifies() -> None:
    payload, armoured, _ = genuine()
    assert _accepts(armoured, payload, record=False)
    assert not _accepts(armoured, payload + b"x", record=False)


# ----------------------------------------------------------------------------- raw commits

_TOKENS = [
    b"\n",
    b"\n ",
    b" ",
    b"\r",
    b"\r\n",
    b"\n\n",
    b"gpgsig ",
    b"\ngpgsig ",
    b"\ngpgsig-sha256 ",
    b"gpgsig",
    b"\nparent 0000000000000000000000000000000000000000",
    b"-----BEGIN SSH SIGNATURE-----",
    b"-----END SSH SIGNATURE-----",
    b"-----BEGIN PGP SIGNATURE-----",
    b"\x00",
    b"\xff",
    b"=",
]


@st.composite
def damaged_commits(draw: st.DrawFn) -> bytes:
    raw = bytearray(genuine_commit())
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(raw)))
        op = draw(st.sampled_from(["insert", "delete", "replace", "flip", "truncate", "move"]))
        if op == "insert":
            raw[at:at] = draw(st.one_of(st.sampled_from(_TOKENS), st.binary(max_size=8)))
        elif op == "delete":
            del raw[at : at + draw(st.integers(1, 80))]
        elif op == "replace":
            raw[at : at + draw(st.integers(1, 8))] = draw(st.sampled_from(_TOKENS))
        elif op == "flip" and at < len(raw):
            raw[at] ^= draw(st.integers(1, 255))
        elif op == "truncate":
            del raw[at:]
        else:  # move a line elsewhere
            lines = bytes(raw).split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            j = draw(st.integers(0, len(lines) - 1))
            lines.insert(j, lines.pop(i))
            raw = bytearray(b"\n".join(lines))
    return bytes(raw)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(damaged_commits(), st.binary(max_size=300)))
def test_split_signature_raises_only_signature_error_and_never_forges(raw: bytes) -> None:
    payload, _, _ = genuine()
    try:
        signed = split_signature(raw)
    except SignatureError:
        return
    assert signed.armoured.startswith("-----BEGIN SSH SIGNATURE-----\n")
    if _accepts(signed.armoured, signed.payload):
        # a valid signature means exactly the genuine payload is what it covers
        assert signed.payload == payload


def _outcome(read: Callable[[], object]) -> object:
    """What *read* returns, or the type and message of what it raises."""
    try:
        return read()
    except (SignatureError, WireFormatError) as exc:
        return type(exc), str(exc)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(damaged_commits(), st.binary(max_size=300)))
def test_split_signature_splits_as_the_line_by_line_reading(raw: bytes) -> None:
    """The search-based split of a plain layout gives what the line-by-line split gives."""
    fast = _outcome(lambda: split_signature(raw, "run x"))
    assert fast == _outcome(lambda: _split_lines(raw, "run x"))
    event("plain layout" if _split_plain(raw) is not None else "read by line")


# ----------------------------------------------------------------------------- armoured text


@st.composite
def damaged_armour(draw: st.DrawFn) -> str:
    _, armoured, _ = genuine()
    lines = armoured.split("\n")
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(
            st.sampled_from(
                ["drop", "dup", "swap", "crlf", "space", "blank", "char", "join", "split", "case"]
            )
        )
        if op == "drop" and len(lines) > 1:
            lines.pop(i)
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "crlf":
            lines[i] += "\r"
        elif op == "space":
            lines[i] = draw(st.sampled_from([" ", "\t", ""])) + lines[i] + " "
        elif op == "blank":
            lines.insert(i, draw(st.sampled_from(["", " ", "\r"])))
        elif op == "char" and lines[i]:
            at = draw(st.integers(0, len(lines[i]) - 1))
            new = draw(st.sampled_from([*"A/+=-_ é\x00", lines[i][at].swapcase()]))
            lines[i] = lines[i][:at] + new + lines[i][at + 1 :]
        elif op == "join" and i + 1 < len(lines):
            lines[i : i + 2] = [lines[i] + lines[i + 1]]
        elif op == "split" and len(lines[i]) > 2:
            at = draw(st.integers(1, len(lines[i]) - 1))
            lines[i : i + 1] = [lines[i][:at], lines[i][at:]]
        else:
            lines[i] = lines[i].lower()
    return "\n".join(lines)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_armour())
def test_damaged_armour_raises_only_signature_error(armoured: str) -> None:
    payload, _, blob = genuine()
    if _accepts(armoured, payload):
        # accepted variants (CRLF, trailing blank lines, re-wrapped base64) carry the same blob
        assert dearmour(armoured, sshsig.LABEL) == blob


# ----------------------------------------------------------------------------- wire fields

FIELDS = ("public key", "namespace", "reserved", "hash", "signature")


def _fields(blob: bytes) -> tuple[bytes, int, list[bytes]]:
    reader = WireReader(blob)
    magic = reader.take(6, "magic")
    version = reader.uint32("version")
    return magic, version, [reader.string(f) for f in FIELDS]


def _string(data: bytes, lie: int = 0) -> bytes:
    return struct.pack(">I", max(0, min(len(data) + lie, 2**32 - 1))) + data


_values = st.one_of(
    st.binary(max_size=80),
    st.sampled_from(
        [
            b"",
            b"git",
            b"file",
            b"git\x00",
            b"sha256",
            b"sha1",
            b"SHA512",
            b"md5",
            b"ssh-ed25519",
            b"ssh-rsa",
            b"sk-ssh-ed25519@openssh.com",
            b"\xff\xfe",
            _string(b"ssh-ed25519") + _string(bytes(32)),
            _string(b"ssh-ed25519") + _string(bytes(31)),
            _string(b"ssh-ed25519") + _string(bytes(64)),
            _string(b"ssh-ed25519") + _string(bytes(64)) + b"x",
        ]
    ),
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(range(len(FIELDS))),
    _values,
    st.integers(-3, 3),
    st.sampled_from([b"SSHSIG", b"SSHSIh", b"", b"SSHSIGSSHSIG"]),
    st.sampled_from([1, 0, 2, 2**32 - 1]),
    st.binary(max_size=4),
)
def test_rebuilt_wire_fields_raise_only_signature_error(
    index: int, value: bytes, lie: int, magic: bytes, version: int, tail: bytes
) -> None:
    payload, _, blob = genuine()
    _, _, fields = _fields(blob)
    fields[index] = value
    rebuilt = (
        magic
        + struct.pack(">I", version)
        + b"".join(_string(f, lie if i == index else 0) for i, f in enumerate(fields))
        + tail
    )
    if _accepts(armour(sshsig.LABEL, rebuilt), payload):
        assert rebuilt == blob
    # the blob read by position (the layout ssh-keygen writes) reads as read field by field
    assert _outcome(lambda: sshsig._parse_blob(rebuilt)) == _outcome(
        lambda: sshsig._parse_fields(rebuilt)
    )
    event("plain blob" if sshsig._parse_plain(rebuilt) is not None else "read by field")
    # the parser alone is strict too (no message involved)
    try:
        parsed = sshsig.parse(armour(sshsig.LABEL, rebuilt))
    except SignatureError:
        return
    assert parsed.hash_algorithm in sshsig.HASHES
    assert len(parsed.signature) == 64


@settings(max_examples=150, deadline=None)
@given(
    st.binary(max_size=60), st.text(min_size=1, max_size=12), st.sampled_from(["sha256", "sha512"])
)
def test_resigned_fields_verify_only_for_their_own_namespace_and_data(
    data: bytes, namespace: str, hash_algorithm: str
) -> None:
    armoured = sshsig.sign_raw(SEED, data, namespace, hash_algorithm=hash_algorithm)
    assert sshsig.verify(armoured, data, namespace).raw == SIGNER.public_key.raw
    for other_data, other_ns in ((data + b"\x00", namespace), (data, namespace + "x")):
        try:
            sshsig.verify(armoured, other_data, other_ns)
        except SignatureError:
            continue
        raise AssertionError(f"accepted for {other_ns!r} / {other_data!r}")


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.sampled_from([b"git", b"file", "é".encode(), b""]), st.binary(max_size=12)),
    # mostly in the layout, so that both the reading by position and its refusals are seen
    st.sampled_from([0] * 8 + [-1, 1, 3, 64, 67, -5, 2**32 - 1]),
    st.sampled_from([b"sha512", b"sha256"] * 3 + [b"sha1", b"sha512\x00"]),
    st.one_of(st.binary(min_size=64, max_size=64), st.binary(max_size=70)),
    st.sampled_from([b""] * 6 + [b"x"]),
)
def test_a_blob_near_the_plain_layout_reads_as_field_by_field(
    namespace: bytes, lie: int, hash_name: bytes, signature: bytes, reserved: bytes
) -> None:
    """Blobs in (and near) the layout ssh-keygen writes, read by position: the same fields as
    read field by field, or the same refusal."""
    blob = (
        sshsig.MAGIC
        + struct.pack(">I", 1)
        + _string(SIGNER.public_key.wire())
        + _string(namespace, lie)
        + _string(reserved)
        + _string(hash_name)
        + _string(_string(b"ssh-ed25519") + _string(signature))
    )
    fast = _outcome(lambda: sshsig._parse_blob(blob))
    assert fast == _outcome(lambda: sshsig._parse_fields(blob))
    event("plain blob" if sshsig._parse_plain(blob) is not None else "read by field")
