"""SSHSIG: interoperability with ssh-keygen -Y in both directions, and strict rejection."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nacl.signing
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitaudit.crypto import sshsig
from gitaudit.crypto.allowed_signers import format_allowed_signers
from gitaudit.crypto.keyfile import decode_private_key
from gitaudit.crypto.keystore import load_signer
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.signers import Ed25519Signer
from gitaudit.crypto.wire import armour, ssh_string, ssh_uint32
from gitaudit.errors import KeyMaterialError, SignatureError
from tests.crypto import keygen, keygen_sign, keygen_verify

SEED = bytes(range(1, 33))
DATA = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nmessage\n"


def _blob(armoured: str) -> bytes:
    return base64.b64decode("".join(armoured.strip().splitlines()[1:-1]))


def _sig_fields(
    *,
    magic: bytes = b"SSHSIG",
    version: int = 1,
    key: bytes | None = None,
    namespace: bytes = b"git",
    reserved: bytes = b"",
    hash_alg: bytes = b"sha512",
    sig_type: bytes = b"ssh-ed25519",
    sig: bytes | None = None,
    trailer: bytes = b"",
    data: bytes = DATA,
) -> str:
    """A hand-built SSHSIG whose signature is valid unless a field is overridden."""
    signing = nacl.signing.SigningKey(SEED)
    public = PublicKey(bytes(signing.verify_key))
    if sig is None:
        signed = sshsig.signed_data(namespace.decode(errors="replace"), "sha512", data)
        sig = signing.sign(signed).signature
    blob = (
        magic
        + ssh_uint32(version)
        + ssh_string(key if key is not None else public.wire())
        + ssh_string(namespace)
        + ssh_string(reserved)
        + ssh_string(hash_alg)
        + ssh_string(ssh_string(sig_type) + ssh_string(sig))
        + trailer
    )
    return armour("SSH SIGNATURE", blob)


# ---------------------------------------------------------------- interoperability


def test_hand_built_reference_signature_is_valid() -> None:
    assert sshsig.verify(_sig_fields(), DATA, "git").raw == bytes(
        nacl.signing.SigningKey(SEED).verify_key
    )
    assert _sig_fields() == sshsig.sign_raw(SEED, DATA, "git")


def test_sign_is_byte_identical_to_ssh_keygen(tmp_path: Path) -> None:
    priv = keygen(tmp_path / "k")
    signer = load_signer(priv)
    for namespace in ("git", "file", "gitaudit-evidence@example.test"):
        assert signer.sign(DATA, namespace) == keygen_sign(priv, DATA, namespace)


def test_armour_layout() -> None:
    armoured = sshsig.sign_raw(SEED, DATA, "git")
    lines = armoured.split("\n")
    assert lines[0] == "-----BEGIN SSH SIGNATURE-----"
    assert lines[-2:] == ["-----END SSH SIGNATURE-----", ""]
    body = lines[1:-2]
    assert all(len(line) == 70 for line in body[:-1]) and 0 < len(body[-1]) <= 70
    assert _blob(armoured).startswith(b"SSHSIG\x00\x00\x00\x01")


@pytest.mark.parametrize("data", [b"", b"x", DATA, bytes(range(256)) * 40])
def test_our_signatures_pass_ssh_keygen_verify(tmp_path: Path, data: bytes) -> None:
    signer = Ed25519Signer.generate()
    armoured = signer.sign(data, "git")
    allowed = format_allowed_signers([("auditor@example.test", signer.public_key)])
    proc = keygen_verify(tmp_path, allowed, "auditor@example.test", armoured, data)
    assert proc.returncode == 0, proc.stderr
    assert b'Good "git" signature for auditor@example.test' in proc.stdout
    # and ssh-keygen itself rejects tampering, the wrong namespace and the wrong principal
    assert keygen_verify(
        tmp_path, allowed, "auditor@example.test", armoured, data + b"!"
    ).returncode
    wrong_ns = signer.sign(data, "file")
    assert keygen_verify(tmp_path, allowed, "auditor@example.test", wrong_ns, data).returncode
    assert keygen_verify(tmp_path, allowed, "mallory@example.test", armoured, data).returncode


def test_sha256_signature_from_ssh_keygen_verifies(tmp_path: Path) -> None:
    priv = keygen(tmp_path / "k")
    armoured = keygen_sign(priv, DATA, "git", "-O", "hashalg=sha256")
    assert sshsig.parse(armoured).hash_algorithm == "sha256"
    key = sshsig.verify(armoured, DATA, "git")
    assert key == PublicKey.from_openssh((tmp_path / "k.pub").read_text())
    seed = decode_private_key(priv.read_text()).seed
    assert seed is not None
    assert sshsig.sign_raw(seed, DATA, "git", hash_algorithm="sha256") == armoured


def test_ssh_keygen_signature_passes_our_verify(tmp_path: Path) -> None:
    priv = keygen(tmp_path / "k")
    expected = PublicKey.from_openssh((tmp_path / "k.pub").read_text())
    armoured = keygen_sign(priv, DATA, "git")
    assert sshsig.verify(armoured, DATA, "git") == expected
    assert sshsig.verify_with(armoured, DATA, "git", [expected]).comment == "t@x"


def test_verify_tolerates_crlf_and_missing_final_newline() -> None:
    armoured = sshsig.sign_raw(SEED, DATA, "git")
    assert sshsig.verify(armoured.replace("\n", "\r\n"), DATA, "git")
    assert sshsig.verify(armoured.rstrip("\n"), DATA, "git")


# ---------------------------------------------------------------- rejections


def test_rejects_tampered_payload() -> None:
    armoured = sshsig.sign_raw(SEED, DATA, "git")
    with pytest.raises(SignatureError, match=r"bad signature by SHA256:.*altered"):
        sshsig.verify(armoured, DATA.replace(b"message", b"massage"), "git")


def test_rejects_wrong_namespace() -> None:
    armoured = sshsig.sign_raw(SEED, DATA, "file")
    with pytest.raises(SignatureError, match="signature namespace is 'file', expected 'git'"):
        sshsig.verify(armoured, DATA, "git")


def test_rejects_untrusted_key() -> None:
    armoured = sshsig.sign_raw(SEED, DATA, "git")
    signer_key = sshsig.verify(armoured, DATA, "git")
    other = Ed25519Signer.generate().public_key
    with pytest.raises(
        SignatureError, match=re.escape(f"untrusted key {signer_key.fingerprint()}")
    ):
        sshsig.verify_with(armoured, DATA, "git", [other])
    with pytest.raises(SignatureError, match="untrusted key"):
        sshsig.verify_with(armoured, DATA, "git", [])
    assert sshsig.verify_with(armoured, DATA, "git", [other, signer_key]) == signer_key


def _lines(armoured: str) -> list[str]:
    return armoured.split("\n")


GOOD = sshsig.sign_raw(SEED, DATA, "git")

ARMOUR_CASES: list[tuple[str, str]] = [
    ("", "missing '-----BEGIN SSH SIGNATURE-----' line"),
    ("garbage", "missing '-----BEGIN SSH SIGNATURE-----'"),
    ("\n".join(_lines(GOOD)[:-2]), "truncated ssh signature armour"),
    ("\n".join(_lines(GOOD)[:2]), "truncated ssh signature armour"),
    ("-----BEGIN SSH SIGNATURE-----\n-----END SSH SIGNATURE-----\n", "empty ssh signature armour"),
    ("junk\n" + GOOD, "unexpected text before"),
    (GOOD + "junk\n", "unexpected text after"),
    (GOOD.replace("U1NIU0lH", "U1NIU0l*"), "invalid base64"),
    (GOOD.replace("U1NIU0lH", "U1NI U0lH"), "invalid base64"),
    ("-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n", "truncated"),
    ("-----BEGIN SSH SIGNATURE-----\nAAAA====\n-----END SSH SIGNATURE-----\n", "base64|magic"),
]


@pytest.mark.parametrize(("text", "reason"), ARMOUR_CASES)
def test_rejects_bad_armour(text: str, reason: str) -> None:
    with pytest.raises(SignatureError, match=reason):
        sshsig.verify(text, DATA, "git")


BLOB_CASES: list[tuple[Callable[[], str], str]] = [
    (lambda: _sig_fields(magic=b"SSHSIh"), "bad magic"),
    (lambda: _sig_fields(version=2), "unsupported SSH signature version 2"),
    (lambda: _sig_fields(version=0), "version 0"),
    (lambda: _sig_fields(trailer=b"\x00"), "1 trailing bytes after the signature"),
    (lambda: _sig_fields(trailer=b"more!"), "5 trailing bytes"),
    (lambda: _sig_fields(reserved=b"x"), "reserved field is not empty"),
    (lambda: _sig_fields(hash_alg=b"sha1"), "unsupported signature hash algorithm 'sha1'"),
    (lambda: _sig_fields(hash_alg=b"\xff"), "hash algorithm is not ASCII"),
    (lambda: _sig_fields(sig_type=b"ssh-rsa"), "signature type 'ssh-rsa' is not ssh-ed25519"),
    (lambda: _sig_fields(sig=bytes(63)), "64 bytes, got 63"),
    (lambda: _sig_fields(sig=bytes(64)), "bad signature"),
    (
        lambda: _sig_fields(key=ssh_string(b"ssh-rsa") + ssh_string(b"\x01\x00\x01")),
        "unsupported key type 'ssh-rsa'",
    ),
    (lambda: _sig_fields(key=ssh_string(b"ssh-ed25519") + ssh_string(bytes(31))), "got 31"),
    (lambda: _sig_fields(key=Ed25519Signer.generate().public_key.wire()), "bad signature"),
    (lambda: _sig_fields(namespace=b"\xff\xfe"), "namespace is not UTF-8"),
    (lambda: armour("SSH SIGNATURE", _blob(GOOD)[:40]), "truncated signature"),
    (
        lambda: armour("SSH SIGNATURE", _blob(GOOD)[:-1]),
        "malformed SSH signature: truncated signature",
    ),
]


@pytest.mark.parametrize(("build", "reason"), BLOB_CASES)
def test_rejects_malformed_blob(build: Callable[[], str], reason: str) -> None:
    with pytest.raises(SignatureError, match=reason):
        sshsig.verify(build(), DATA, "git")


@pytest.mark.parametrize(
    ("armoured", "message"),
    [
        (
            lambda: armour("SSH SIGNATURE", b"SSH"),
            "malformed SSH signature: truncated signature magic",
        ),
        (lambda: _sig_fields(namespace=b"\xff\xfe"), "signature namespace is not UTF-8"),
        (lambda: _sig_fields(reserved=b"x"), "signature reserved field is not empty"),
        (
            lambda: armour("SSH SIGNATURE", _blob(GOOD)[: 6 + 4 + 4 + 51 + 4 + 3 + 4 + 2]),
            "malformed SSH signature: truncated signature hash algorithm",
        ),
        (
            lambda: _sig_fields(sig_type=b"\xff"),
            "malformed SSH signature: signature type is not ASCII",
        ),
    ],
)
def test_malformed_blob_messages_name_the_field(armoured: Callable[[], str], message: str) -> None:
    with pytest.raises(SignatureError) as caught:
        sshsig.parse(armoured())
    assert caught.value.message == message


def test_rejects_inner_signature_trailing_bytes() -> None:
    blob = _blob(GOOD)
    inner_len_at = len(blob) - (4 + 11 + 4 + 64) - 4
    inner_len = int.from_bytes(blob[inner_len_at : inner_len_at + 4], "big")
    assert inner_len == 4 + 11 + 4 + 64
    patched = blob[:inner_len_at] + ssh_uint32(inner_len + 1) + blob[inner_len_at + 4 :] + b"\x00"
    with pytest.raises(SignatureError, match="trailing bytes after the Ed25519 signature"):
        sshsig.verify(armour("SSH SIGNATURE", patched), DATA, "git")


def test_sign_raw_validates_its_inputs() -> None:
    with pytest.raises(SignatureError, match="namespace must not be empty"):
        sshsig.sign_raw(SEED, DATA, "")
    with pytest.raises(KeyMaterialError, match="32 or 64 bytes"):
        sshsig.sign_raw(SEED[:31], DATA, "git")
    with pytest.raises(KeyMaterialError, match="does not match its public half"):
        sshsig.sign_raw(SEED + bytes(32), DATA, "git")
    full = SEED + bytes(nacl.signing.SigningKey(SEED).verify_key)
    assert sshsig.sign_raw(full, DATA, "git") == GOOD


# ---------------------------------------------------------------- fuzzing


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
def test_random_text_raises_only_signature_error(text: str) -> None:
    with pytest.raises(SignatureError):
        sshsig.verify(text, DATA, "git")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_armoured_bytes_raise_only_signature_error(blob: bytes) -> None:
    with pytest.raises(SignatureError):
        sshsig.verify(armour("SSH SIGNATURE", blob), DATA, "git")


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_garbled_valid_signature_raises_only_signature_error(data: st.DataObject) -> None:
    blob = bytearray(_blob(GOOD))
    action = data.draw(st.sampled_from(["flip", "truncate", "insert", "delete"]))
    index = data.draw(st.integers(min_value=0, max_value=len(blob) - 1))
    if action == "flip":
        blob[index] ^= data.draw(st.integers(min_value=1, max_value=255))
    elif action == "truncate":
        del blob[index:]
    elif action == "insert":
        blob.insert(index, data.draw(st.integers(min_value=0, max_value=255)))
    else:
        del blob[index]
    with pytest.raises(SignatureError):
        sshsig.verify(armour("SSH SIGNATURE", bytes(blob)), DATA, "git")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.text(min_size=1, max_size=20))
def test_sign_verify_roundtrip(data: bytes, namespace: str) -> None:
    armoured = sshsig.sign_raw(SEED, data, namespace)
    assert sshsig.verify(armoured, data, namespace).raw == bytes(
        nacl.signing.SigningKey(SEED).verify_key
    )


def test_the_namespace_is_git_by_default() -> None:
    """A signature made without naming a namespace is one for git's (``-n git``)."""
    key = nacl.signing.SigningKey(b"\x07" * 32)
    armoured = sshsig.sign_raw(key, b"payload")
    assert sshsig.parse(armoured).namespace == "git"
    assert sshsig.verify(armoured, b"payload", "git").raw == bytes(key.verify_key)


def test_refusals_name_what_is_wrong() -> None:
    key = nacl.signing.SigningKey(b"\x07" * 32)
    with pytest.raises(SignatureError) as caught:
        sshsig.sign_raw(key, b"payload", hash_algorithm="md5")
    assert caught.value.message == "unsupported hash algorithm 'md5'"
    with pytest.raises(SignatureError) as caught:
        sshsig.verify(b"-----BEGIN SSH SIGNATURE-----", b"payload", "git")  # type: ignore[arg-type]
    assert caught.value.message == "signature is not text"


def test_a_truncated_ed25519_signature_is_named() -> None:
    """The inner signature blob claims more bytes than it holds: the error names that field."""
    key = nacl.signing.SigningKey(b"\x07" * 32)
    public = PublicKey(bytes(key.verify_key))
    inner = ssh_string(b"ssh-ed25519") + ssh_uint32(64) + b"\x00" * 10
    blob = (
        b"SSHSIG"
        + ssh_uint32(1)
        + ssh_string(public.wire())
        + ssh_string(b"git")
        + ssh_string(b"")
        + ssh_string(b"sha512")
        + ssh_string(inner)
    )
    with pytest.raises(SignatureError) as caught:
        sshsig.parse(armour("SSH SIGNATURE", blob))
    assert caught.value.message == "malformed SSH signature: truncated Ed25519 signature"


@pytest.mark.parametrize(
    ("namespace", "hash_algorithm"),
    [("git", "sha512"), ("git", "sha256"), ("file", "sha512"), ("é/ns", "sha256")],
)
def test_a_signature_as_ssh_keygen_writes_it_is_read_by_position(
    namespace: str, hash_algorithm: str
) -> None:
    """The blob of every signature gitaudit or ssh-keygen makes is read by position
    (_parse_plain); field by field (_parse_fields) reads the same fields."""
    armoured = sshsig.sign_raw(SEED, DATA, namespace, hash_algorithm=hash_algorithm)
    blob = _blob(armoured)
    plain = sshsig._parse_plain(blob)
    assert plain is not None and plain == sshsig._parse_fields(blob)
    assert (plain.namespace, plain.hash_algorithm) == (namespace, hash_algorithm)
    assert plain.public_key.raw == bytes(nacl.signing.SigningKey(SEED).verify_key)
    assert sshsig.verify(armoured, DATA, namespace) == plain.public_key


@pytest.mark.parametrize(
    "fields",
    [
        {"namespace": b"\xff"},  # not UTF-8
        {"reserved": b"x"},
        {"hash_alg": b"sha1"},
        {"sig": bytes(63)},
        {"sig_type": b"ssh-rsa"},
        {"version": 2},
        {"key": ssh_string(b"ssh-ed25519") + ssh_string(bytes(31))},
    ],
)
def test_a_blob_out_of_the_plain_layout_is_refused_field_by_field(
    fields: dict[str, Any],
) -> None:
    armoured = _sig_fields(**fields)
    blob = _blob(armoured)
    assert sshsig._parse_plain(blob) is None
    with pytest.raises(SignatureError) as caught:
        sshsig.parse(armoured)
    with pytest.raises(SignatureError) as again:
        sshsig._parse_fields(blob)
    assert caught.value.message == again.value.message


def test_signed_data_for_any_hashlib_name() -> None:
    """signed_data hashes with hashlib.sha512/sha256 directly, and any other name hashlib knows
    as before (sign_raw and verify only ever use sha512 and sha256)."""
    import hashlib

    for name in ("sha512", "sha256", "sha384"):
        digest = hashlib.new(name, DATA).digest()
        expected = (
            b"SSHSIG" + ssh_string(b"git") + ssh_string(b"") + ssh_string(name.encode())
        ) + ssh_string(digest)
        assert sshsig.signed_data("git", name, DATA) == expected
