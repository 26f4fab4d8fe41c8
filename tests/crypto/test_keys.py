"""Keys: OpenSSH public/private formats against real ssh-keygen, key files, signers, ssh-agent."""

from __future__ import annotations

import base64
import os
import re
import stat
from pathlib import Path

import pytest

from gitaudit.crypto import sshsig
from gitaudit.crypto.allowed_signers import format_allowed_signers
from gitaudit.crypto.keyfile import decode_private_key, encode_private_key
from gitaudit.crypto.keystore import generate_key, keys_dir, list_local_keys, load_signer
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.signers import Ed25519Signer, SshKeygenSigner
from gitaudit.crypto.wire import WireFormatError, armour, ssh_string
from gitaudit.errors import KeyMaterialError
from gitaudit.places import gitaudit_home
from tests.crypto import (
    SSH_ADD,
    SSH_KEYGEN,
    keygen,
    keygen_fingerprint,
    keygen_verify,
    private_checkint,
    run,
    ssh_agent,
)

# ---------------------------------------------------------------- public keys


def test_public_key_text_and_fingerprint_match_ssh_keygen(tmp_path: Path) -> None:
    priv = keygen(tmp_path / "k", comment="alice@example.test")
    text = (tmp_path / "k.pub").read_text().strip()
    key = PublicKey.from_openssh(text)
    assert key.comment == "alice@example.test"
    assert key.openssh() == text
    assert key.fingerprint() == keygen_fingerprint(tmp_path / "k.pub")
    assert key.fingerprint().startswith("SHA256:") and not key.fingerprint().endswith("=")
    assert PublicKey(key.raw).openssh() == text.rsplit(" ", 1)[0]
    assert priv.exists()


def test_public_key_literal_forms_and_equality(tmp_path: Path) -> None:
    keygen(tmp_path / "k")
    text = (tmp_path / "k.pub").read_text()
    plain = PublicKey.from_openssh(text)
    literal = PublicKey.from_openssh("key::" + text.rsplit(" ", 1)[0])
    assert literal == plain  # equality ignores the comment
    assert literal.comment == ""
    assert hash(literal) == hash(plain)
    assert PublicKey.from_wire(plain.wire()) == plain


def _blob(*fields: bytes) -> str:
    return base64.b64encode(b"".join(ssh_string(f) for f in fields)).decode()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty public key"),
        ("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ== x", "unsupported key type 'ssh-rsa'"),
        ("ecdsa-sha2-nistp256 AAAA", "unsupported key type 'ecdsa-sha2-nistp256'"),
        ("ssh-ed25519", "not followed by the base64 key"),
        ("ssh-ed25519 not*base64!", "not valid base64"),
        (f"ssh-ed25519 {_blob(b'ssh-ed25519', bytes(31))}", "32 bytes, got 31"),
        (f"ssh-ed25519 {_blob(b'ssh-ed25519', bytes(33))}", "32 bytes, got 33"),
        (f"ssh-ed25519 {_blob(b'ssh-rsa', bytes(32))}", "unsupported key type 'ssh-rsa'"),
        (f"ssh-ed25519 {_blob(b'ssh-ed25519', bytes(32), b'x')}", "trailing bytes"),
        ("ssh-ed25519 " + base64.b64encode(b"\0\0\0\x0bssh").decode(), "truncated"),
    ],
)
def test_public_key_rejections(text: str, reason: str) -> None:
    with pytest.raises(KeyMaterialError, match=reason):
        PublicKey.from_openssh(text)


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"", "malformed public key blob: truncated public key type"),
        (ssh_string(b"\xff"), "malformed public key blob: public key type is not ASCII"),
        (ssh_string(b"ssh-ed25519"), "malformed public key blob: truncated Ed25519 public key"),
        (
            ssh_string(b"ssh-ed25519") + ssh_string(bytes(32)) + b"x",
            "malformed public key blob: 1 trailing bytes after the public key blob",
        ),
    ],
)
def test_public_key_blob_refusals_name_the_field(blob: bytes, message: str) -> None:
    """The wire reader names the field it could not read; the message carries it whole."""
    with pytest.raises(KeyMaterialError) as caught:
        PublicKey.from_wire(blob)
    assert caught.value.message == message
    with pytest.raises(KeyMaterialError) as caught:
        PublicKey.from_openssh("ssh-ed25519 " + base64.b64encode(blob).decode())
    assert caught.value.message in (message, "'ssh-ed25519' is not followed by the base64 key")


def test_an_empty_public_key_is_named() -> None:
    for text in ("", "key::  ", "\n"):
        with pytest.raises(KeyMaterialError) as caught:
            PublicKey.from_openssh(text)
        assert caught.value.message == "empty public key"


def test_public_key_rejects_comment_with_newline() -> None:
    with pytest.raises(KeyMaterialError, match="line break"):
        PublicKey(bytes(32), "a\nb")


# ---------------------------------------------------------------- private key format


def test_private_key_encoding_is_byte_identical_to_ssh_keygen(tmp_path: Path) -> None:
    text = keygen(tmp_path / "k", comment="c@example.test").read_text()
    parsed = decode_private_key(text)
    assert parsed.seed is not None and not parsed.encrypted
    assert parsed.public_key.comment == "c@example.test"
    again = encode_private_key(parsed.seed, "c@example.test", checkint=private_checkint(text))
    assert again == text


def test_encrypted_private_key_is_recognised(tmp_path: Path) -> None:
    text = keygen(tmp_path / "k", passphrase="secret").read_text()
    parsed = decode_private_key(text)
    assert parsed.encrypted and parsed.seed is None
    assert parsed.cipher == "aes256-ctr" and parsed.kdf == "bcrypt"
    assert parsed.public_key == PublicKey.from_openssh((tmp_path / "k.pub").read_text())


def _corrupt(text: str, old: bytes, new: bytes) -> str:
    blob = base64.b64decode("".join(text.strip().splitlines()[1:-1]))
    assert old in blob
    return armour("OPENSSH PRIVATE KEY", blob.replace(old, new, 1))


def test_private_key_corruptions_are_rejected() -> None:
    seed = bytes(range(32))
    good = encode_private_key(seed, "c", checkint=0x01020304)
    assert decode_private_key(good).seed == seed
    cases = {
        "check ints differ": _corrupt(
            good, b"\x01\x02\x03\x04\x01\x02\x03\x04", b"\x01\x02\x03\x04\x01\x02\x03\x05"
        ),
        "bad magic": _corrupt(good, b"openssh-key-v1", b"openssh-key-v2"),
        "holds 2 keys": _corrupt(good, b"\0\0\0\1\0\0\0\x33", b"\0\0\0\2\0\0\0\x33"),
        "cipher 'none' with kdf 'bcrypt'": _corrupt(
            good, b"\0\0\0\4none\0\0\0\4none", b"\0\0\0\4none\0\0\0\6bcrypt"
        ),
    }
    for reason, text in cases.items():
        with pytest.raises((WireFormatError, KeyMaterialError), match=reason):
            decode_private_key(text)
    # padding must be 1, 2, 3, ...
    blob = base64.b64decode("".join(good.strip().splitlines()[1:-1]))
    assert blob.endswith(b"c\x01\x02\x03\x04")
    bad_pad = armour("OPENSSH PRIVATE KEY", blob[:-4] + b"\x01\x02\x03\x05")
    with pytest.raises(WireFormatError, match="bad padding"):
        decode_private_key(bad_pad)
    with pytest.raises(WireFormatError, match="truncated"):
        decode_private_key(armour("OPENSSH PRIVATE KEY", blob[:60]))
    with pytest.raises(WireFormatError, match="truncated openssh private key armour"):
        decode_private_key("\n".join(good.splitlines()[:-1]))


# ---------------------------------------------------------------- generate_key


def test_generated_key_is_read_by_ssh_keygen(tmp_path: Path) -> None:
    home = tmp_path / "gahome"
    made = generate_key("laptop", home)
    assert made.private_path == home / "keys" / "laptop"
    assert made.public_path == home / "keys" / "laptop.pub"
    assert made.private_path.read_text().startswith("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    derived = run(SSH_KEYGEN, "-y", "-f", made.private_path).stdout.decode().strip()
    assert PublicKey.from_openssh(derived) == made.public_key
    assert derived.split()[:2] == made.public_key.openssh().split()[:2]
    assert keygen_fingerprint(made.public_path) == made.public_key.fingerprint()
    assert made.public_path.read_text() == made.public_key.openssh() + "\n"
    assert made.public_key.comment == "laptop"
    assert stat.S_IMODE(made.private_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(made.private_path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(home.stat().st_mode) == 0o700


def test_generated_key_signs_like_ssh_keygen(tmp_path: Path) -> None:
    made = generate_key("k", tmp_path / "h")
    signer = load_signer(made.private_path)
    assert isinstance(signer, Ed25519Signer)
    ours = signer.sign(b"payload\n", "git")
    theirs = run(
        SSH_KEYGEN, "-q", "-Y", "sign", "-n", "git", "-f", made.private_path, input=b"payload\n"
    ).stdout.decode()
    assert ours == theirs  # Ed25519 is deterministic: identical armour


def test_generate_defaults_to_gitaudit_home(hermetic: Path) -> None:
    made = generate_key("default")
    assert made.private_path == hermetic / ".config" / "gitaudit" / "keys" / "default"
    assert made.private_path.exists()


def test_generate_refuses_to_overwrite(tmp_path: Path) -> None:
    home = tmp_path / "h"
    first = generate_key("k", home)
    before = first.private_path.read_bytes()
    with pytest.raises(KeyMaterialError, match="already exists"):
        generate_key("k", home)
    assert first.private_path.read_bytes() == before
    first.private_path.unlink()  # a lone .pub also blocks the name
    with pytest.raises(KeyMaterialError, match="already exists"):
        generate_key("k", home)
    assert not first.private_path.exists()


def test_generate_refuses_inside_work_tree(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(KeyMaterialError, match="must never live inside the work tree"):
        generate_key("k", work / ".keys", forbid_inside=work)
    assert not (work / ".keys").exists()


def test_generate_refuses_work_tree_reached_through_symlink(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "secret").mkdir(parents=True)
    link = tmp_path / "innocent-home"
    link.symlink_to(work / "secret")
    with pytest.raises(KeyMaterialError, match="inside the work tree"):
        generate_key("k", link, forbid_inside=work)
    # and the work tree itself given through a symlink
    work_link = tmp_path / "work-link"
    work_link.symlink_to(work)
    with pytest.raises(KeyMaterialError, match="inside the work tree"):
        generate_key("k", work / "x", forbid_inside=work_link)
    assert list((work / "secret").iterdir()) == []
    assert generate_key("k", tmp_path / "outside", forbid_inside=work).private_path.exists()


@pytest.mark.parametrize("name", ["", ".hidden", "-x", "a/b", "../up", "a b", "k.pub", "é"])
def test_generate_rejects_bad_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(KeyMaterialError, match="invalid key name"):
        generate_key(name, tmp_path / "h")


def test_list_local_keys(tmp_path: Path) -> None:
    home = tmp_path / "h"
    assert list_local_keys(home) == []
    b = generate_key("beta", home)
    a = generate_key("alpha", home)
    (keys_dir(home) / "orphan.pub").write_text(a.public_key.openssh())  # no private half
    listed = list_local_keys(home)
    assert [k.name for k in listed] == ["alpha", "beta"]
    assert listed[0].public_key == a.public_key and listed[1].public_key == b.public_key
    assert listed[0].private_path == a.private_path
    assert listed[1].fingerprint == keygen_fingerprint(b.public_path)


def test_gitaudit_home_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GITAUDIT_HOME", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert gitaudit_home() == tmp_path / "explicit"
    monkeypatch.delenv("GITAUDIT_HOME")
    assert gitaudit_home() == tmp_path / "xdg" / "gitaudit"
    monkeypatch.setenv("XDG_CONFIG_HOME", "")
    assert gitaudit_home() == tmp_path / "home" / ".config" / "gitaudit"


# ---------------------------------------------------------------- load_signer


def test_load_signer_reads_ssh_keygen_key(tmp_path: Path) -> None:
    priv = keygen(tmp_path / "k", comment="me@x")
    signer = load_signer(priv)
    assert isinstance(signer, Ed25519Signer)
    assert signer.public_key == PublicKey.from_openssh((tmp_path / "k.pub").read_text())
    assert signer.public_key.comment == "me@x"
    assert "SHA256:" in repr(signer) and "seed" not in repr(signer)


def test_load_signer_routes_encrypted_key_to_ssh_keygen(tmp_path: Path) -> None:
    priv = keygen(tmp_path / "k", passphrase="secret")
    signer = load_signer(priv)
    assert isinstance(signer, SshKeygenSigner)
    assert signer.key_path == priv
    assert signer.public_key == PublicKey.from_openssh((tmp_path / "k.pub").read_text())


def test_load_signer_routes_public_key_to_agent(tmp_path: Path) -> None:
    keygen(tmp_path / "k")
    signer = load_signer(tmp_path / "k.pub")
    assert isinstance(signer, SshKeygenSigner)
    assert signer.public_key == PublicKey.from_openssh((tmp_path / "k.pub").read_text())


def test_load_signer_refuses_group_readable_key(tmp_path: Path) -> None:
    priv = keygen(tmp_path / "k")
    os.chmod(priv, 0o640)
    with pytest.raises(KeyMaterialError, match=r"readable by group or others \(mode 0640\)") as e:
        load_signer(priv)
    assert e.value.hint == f"chmod 600 {priv}"


def test_load_signer_refuses_key_inside_work_tree(tmp_path: Path) -> None:
    work = tmp_path / "work"
    priv = keygen(work / "keys" / "k")
    with pytest.raises(KeyMaterialError, match="private keys must never live inside the work tree"):
        load_signer(priv, forbid_inside=work)
    link = tmp_path / "k-link"
    link.symlink_to(priv)
    with pytest.raises(KeyMaterialError, match="inside the work tree"):
        load_signer(link, forbid_inside=work)
    assert isinstance(load_signer(link), Ed25519Signer)  # fine without the restriction


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "not an OpenSSH Ed25519 private key"),
        (b"\xff\xfe binary", "no -----BEGIN OPENSSH PRIVATE KEY----- line"),
        (b"https://agent:ghp_s3cr3t@github.com\n", r"line\)$"),  # never echoed
        (b"-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n", "RSA PRIVATE"),
        (
            b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n",
            r"not an OpenSSH Ed25519 private key \(truncated",
        ),
        (
            b"-----BEGIN OPENSSH PRIVATE KEY-----\n!!!!\n-----END OPENSSH PRIVATE KEY-----\n",
            "invalid base64",
        ),
    ],
)
def test_load_signer_rejects_garbage(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "bad"
    path.write_bytes(content)
    os.chmod(path, 0o600)
    with pytest.raises(KeyMaterialError, match=reason) as e:
        load_signer(path)
    assert str(path) in e.value.message
    assert "s3cr3t" not in e.value.message


def test_load_signer_rejects_other_key_types(tmp_path: Path) -> None:
    priv = keygen(tmp_path / "k", key_type="ecdsa")
    with pytest.raises(KeyMaterialError, match=r"not an OpenSSH Ed25519 private key \(.*ecdsa"):
        load_signer(priv)
    with pytest.raises(KeyMaterialError, match="not an OpenSSH Ed25519 public key"):
        load_signer(tmp_path / "k.pub")


def test_load_signer_missing_file(tmp_path: Path) -> None:
    with pytest.raises(KeyMaterialError, match="no such key file") as e:
        load_signer(tmp_path / "absent")
    assert e.value.hint and "git audit keys generate" in e.value.hint


# ---------------------------------------------------------------- ssh-keygen / ssh-agent signing


def test_agent_held_keys_sign_through_ssh_keygen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = keygen(tmp_path / "plain", comment="plain@x")
    locked = keygen(tmp_path / "locked", passphrase="secret", comment="locked@x")
    askpass = tmp_path / "askpass.sh"
    askpass.write_text("#!/bin/sh\necho secret\n")
    askpass.chmod(0o700)
    with ssh_agent() as env:
        env.update(SSH_ASKPASS=str(askpass), SSH_ASKPASS_REQUIRE="force", DISPLAY=":0")
        run(SSH_ADD, plain, env=env)
        run(SSH_ADD, locked, env=env)
        plain.unlink()  # from now on only the agent holds the plain key
        monkeypatch.setenv("SSH_AUTH_SOCK", env["SSH_AUTH_SOCK"])
        for signer_path, principal in ((tmp_path / "plain.pub", "p"), (locked, "l")):
            signer = load_signer(signer_path)
            assert isinstance(signer, SshKeygenSigner)
            armoured = signer.sign(b"agent data\n", "git")
            assert sshsig.verify(armoured, b"agent data\n", "git") == signer.public_key
            allowed = format_allowed_signers([(principal, signer.public_key)])
            proc = keygen_verify(tmp_path, allowed, principal, armoured, b"agent data\n")
            assert proc.returncode == 0, proc.stderr
        literal = SshKeygenSigner.for_agent_key(
            PublicKey.from_openssh(plain.with_suffix(".pub").read_text())
        )
        armoured = literal.sign(b"literal\n", "file")
        assert sshsig.verify(armoured, b"literal\n", "file") == literal.public_key


def test_agent_signer_without_agent_explains_the_fix(tmp_path: Path) -> None:
    keygen(tmp_path / "k").unlink()  # ssh-keygen would fall back to k next to k.pub
    signer = load_signer(tmp_path / "k.pub")
    with pytest.raises(KeyMaterialError, match="ssh-keygen could not sign") as e:
        signer.sign(b"x", "git")
    assert e.value.hint and "ssh-add" in e.value.hint


def test_ssh_keygen_signer_detects_a_different_key(tmp_path: Path) -> None:
    keygen(tmp_path / "a")
    other = PublicKey.from_openssh((keygen(tmp_path / "b").with_suffix(".pub")).read_text())
    signer = SshKeygenSigner(tmp_path / "a", other)
    with pytest.raises(KeyMaterialError, match=re.escape("expected " + other.fingerprint())):
        signer.sign(b"x", "git")
