"""Allowed-signers files: our output is what ssh-keygen reads, our parser is strict but tolerant."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitaudit.crypto.allowed_signers import (
    format_allowed_signers,
    keys_for_namespace,
    parse_allowed_signers,
)
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.signers import Ed25519Signer
from gitaudit.errors import KeyMaterialError
from tests.crypto import keygen, keygen_verify

ALICE = Ed25519Signer(bytes(range(32)), comment="alice laptop")
BOB = Ed25519Signer(bytes(range(1, 33)))


def test_format_lines() -> None:
    text = format_allowed_signers(
        [("alice@example.test", ALICE.public_key), ("bob", BOB.public_key)]
    )
    alice_b64 = ALICE.public_key.openssh().split()[1]
    assert text.splitlines() == [
        f'alice@example.test namespaces="git" ssh-ed25519 {alice_b64} alice laptop',
        f'bob namespaces="git" {BOB.public_key.openssh()}',
    ]
    assert text.endswith("\n")
    assert format_allowed_signers([]) == ""


def test_format_roundtrips_through_parse() -> None:
    entries = [("alice@example.test", ALICE.public_key), ("bob", BOB.public_key)]
    parsed = parse_allowed_signers(format_allowed_signers(entries))
    assert [(p, k) for p, k, _ in parsed] == entries
    assert parsed[0][1].comment == "alice laptop"
    assert all(options == {"namespaces": "git"} for _, _, options in parsed)


def test_formatted_file_is_accepted_by_ssh_keygen(tmp_path: Path) -> None:
    allowed = format_allowed_signers([("one", BOB.public_key), ("two", ALICE.public_key)])
    armoured = ALICE.sign(b"data", "git")
    assert keygen_verify(tmp_path, allowed, "two", armoured, b"data").returncode == 0
    assert keygen_verify(tmp_path, allowed, "one", armoured, b"data").returncode != 0


@pytest.mark.parametrize(
    "principal",
    ["", "a b", 'a"b', "a\nb", "#x", "a,b", "a\x0bb", "a\x1cb", "a\x85b", "a\u2028b", "a\x00b"],
)
def test_format_rejects_bad_principals(principal: str) -> None:
    """One principal is one name: a comma would make it a list (each name with its roles), any
    white space or control character ends or splits the field or the line on reading."""
    with pytest.raises(KeyMaterialError, match="invalid allowed-signers principal"):
        format_allowed_signers([(principal, ALICE.public_key)])


@pytest.mark.parametrize("separator", ["\x0b", "\x0c", "\x1c", "\x85", "\u2028"])
def test_parse_breaks_lines_at_newlines_only(separator: str) -> None:
    """What ssh-keygen (so git verify-commit) reads as one line, with a second key hidden in its
    comment, is one entry here too."""
    line = f"alice {ALICE.public_key.openssh()} laptop{separator}bob {BOB.public_key.openssh()}\n"
    ((principals, key, _),) = parse_allowed_signers(line)
    assert (principals, key) == ("alice", ALICE.public_key)


def test_parse_real_world_file(tmp_path: Path) -> None:
    keygen(tmp_path / "k", comment="carol@host")
    carol = (tmp_path / "k.pub").read_text().strip()
    text = (
        "# team keys\n"
        "\n"
        f"carol@example.test {carol}\n"
        f'  "dave@example.test,erin@example.test" namespaces="git,file",valid-after="20240101" '
        f"{ALICE.public_key.openssh()}\n"
        f"*@example.test cert-authority {BOB.public_key.openssh()}\n"
        f'frank NAMESPACES="file" {BOB.public_key.openssh()}\n'
    )
    entries = parse_allowed_signers(text)
    assert [e[0] for e in entries] == [
        "carol@example.test",
        "dave@example.test,erin@example.test",
        "*@example.test",
        "frank",
    ]
    assert entries[0][1] == PublicKey.from_openssh(carol) and entries[0][2] == {}
    assert entries[0][1].comment == "carol@host"
    assert entries[1][2] == {"namespaces": "git,file", "valid-after": "20240101"}
    assert entries[2][2] == {"cert-authority": None}
    assert entries[3][2] == {"namespaces": "file"}
    # only carol may sign "git" under gitaudit's conservative reading
    assert keys_for_namespace(entries, "git") == [entries[0][1]]
    assert keys_for_namespace(entries, "file") == [entries[0][1], BOB.public_key]


def test_keys_for_namespace_patterns() -> None:
    def entry(ns: str) -> tuple[str, PublicKey, dict[str, str | None]]:
        return ("p", ALICE.public_key, {"namespaces": ns})

    assert keys_for_namespace([entry("gi*")], "git") == [ALICE.public_key]
    assert keys_for_namespace([entry("*,!git")], "git") == []
    assert keys_for_namespace([entry("file")], "git") == []
    assert keys_for_namespace([entry("git"), entry("git")], "git") == [ALICE.public_key]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("alice", "line 3: no public key"),
        ("alice ssh-rsa AAAAB3NzaC1yc2E=", "line 3: key type 'ssh-rsa' is not supported"),
        ("alice ssh-ed25519 !!!", "line 3: public key is not valid base64"),
        ("alice ssh-ed25519", "line 3: 'ssh-ed25519' is not followed by the base64 key"),
        ('alice namespaces="git ssh-ed25519 AAAA', "line 3: unterminated quote"),
        ("alice bogus-option {key}", "line 3: unsupported option 'bogus-option'"),
        ("alice namespaces=git {key}", "line 3: option 'namespaces' needs a quoted value"),
        ('alice namespaces="a",namespaces="b" {key}', "line 3: duplicate option 'namespaces'"),
        ('alice namespaces="a",,cert-authority {key}', "line 3: empty option"),
        ('"alice {key}', "line 3: unterminated quote"),
        ('al"i"ce {key}', "line 3: stray quote in principals"),
        ('"" {key}', "line 3: empty principals"),
    ],
)
def test_parse_errors_name_the_line(line: str, reason: str) -> None:
    text = "# header\n\n" + line.format(key=ALICE.public_key.openssh()) + "\n"
    with pytest.raises(KeyMaterialError, match=reason):
        parse_allowed_signers(text)
