"""Signed commits: ours pass `git verify-commit`, git's pass ours, and bad layouts are rejected."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pygit2
import pytest

from gitaudit.crypto import sshsig
from gitaudit.crypto.allowed_signers import format_allowed_signers
from gitaudit.crypto.commits import (
    SNAPSHOT_NAMESPACE,
    _split_lines,
    _split_plain,
    commit_payload,
    create_signed_commit,
    insert_signature,
    read_commit_signature,
    snapshot_marker,
    split_signature,
    verify_commit,
)
from gitaudit.crypto.keystore import generate_key, load_signer
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.crypto.signers import Ed25519Signer
from gitaudit.errors import RepositoryError, SignatureError
from tests.conftest import PINNED_DATE
from tests.crypto import keygen, keygen_verify, libgit2_home, run
from tests.gitrepo import GitRepo

PINNED = int(datetime.fromisoformat(PINNED_DATE).timestamp())
AUTHOR = pygit2.Signature("Test Author", "author@example.test", PINNED, 0)
COMMITTER = pygit2.Signature("Test Committer", "committer@example.test", PINNED, 0)


@pytest.fixture(autouse=True)
def _libgit2_sees_hermetic_home(hermetic: Path) -> Iterator[None]:
    with libgit2_home(hermetic):
        yield


@pytest.fixture
def signer(hermetic: Path) -> Ed25519Signer:
    made = generate_key("signer")
    loaded = load_signer(made.private_path)
    assert isinstance(loaded, Ed25519Signer)
    return loaded


def _allowed_file(tmp_path: Path, *keys: PublicKey) -> Path:
    path = tmp_path / "allowed_signers"
    path.write_text(format_allowed_signers((f"p{i}@example.test", k) for i, k in enumerate(keys)))
    return path


def _git_verify(repo: GitRepo, allowed: Path, oid: object) -> int:
    """Exit code of plain `git verify-commit` with an SSH allowed-signers file."""
    return run(
        "git",
        "-C",
        repo.path,
        "-c",
        "gpg.format=ssh",
        "-c",
        f"gpg.ssh.allowedSignersFile={allowed}",
        "verify-commit",
        str(oid),
        check=False,
    ).returncode


def _write_raw(repo: GitRepo, raw: bytes) -> str:
    return repo.git(
        "hash-object", "-t", "commit", "-w", "--literally", "--stdin", input=raw
    ).strip()


def _our_commit(repo: GitRepo, signer: Ed25519Signer, message: str = "evidence\n") -> pygit2.Oid:
    r = pygit2.Repository(str(repo.path))
    return create_signed_commit(
        r,
        tree=repo.head_tree(),
        parents=[repo.git("rev-parse", "HEAD").strip()],
        message=message,
        signer=signer,
        author=AUTHOR,
        committer=COMMITTER,
    )


def test_our_commit_passes_git_verify_commit(
    repo: GitRepo, signer: Ed25519Signer, tmp_path: Path
) -> None:
    head = repo.git("rev-parse", "HEAD").strip()
    oid = _our_commit(repo, signer)
    allowed = _allowed_file(tmp_path, signer.public_key)
    assert _git_verify(repo, allowed, oid) == 0
    log = repo.git(
        "-c", f"gpg.ssh.allowedSignersFile={allowed}", "log", "--show-signature", "-1", str(oid)
    )
    assert 'Good "git" signature for p0@example.test with ED25519 key' in log
    assert signer.public_key.fingerprint() in log
    assert repo.git("rev-parse", "HEAD").strip() == head  # no ref moved
    assert verify_commit(pygit2.Repository(str(repo.path)), oid, [signer.public_key]) == (
        signer.public_key
    )
    # git parses it as an ordinary commit
    assert repo.git("log", "-1", "--format=%T %P %an %ce %s", str(oid)).strip() == (
        f"{repo.head_tree()} {head} Test Author committer@example.test evidence"
    )


def test_a_snapshot_signature_is_never_a_commit_signature(
    repo: GitRepo, signer: Ed25519Signer, tmp_path: Path
) -> None:
    """Signed for the snapshot namespace, a commit passes only the snapshot verifier: neither
    `git verify-commit` nor the ledger's verify_commit accepts it, and the refusal says what it
    is."""
    r = pygit2.Repository(str(repo.path))
    oid = create_signed_commit(
        r,
        tree=repo.head_tree(),
        parents=[repo.git("rev-parse", "HEAD").strip()],
        message="snapshot: latest\n",
        signer=signer,
        author=AUTHOR,
        namespace=SNAPSHOT_NAMESPACE,
    )
    assert _git_verify(repo, _allowed_file(tmp_path, signer.public_key), oid) != 0
    with pytest.raises(SignatureError, match="is a work-tree snapshot"):
        verify_commit(r, oid, [signer.public_key])
    assert verify_commit(r, oid, [signer.public_key], SNAPSHOT_NAMESPACE) == signer.public_key
    with pytest.raises(SignatureError, match="expected 'gitaudit-snapshot'"):
        verify_commit(r, _our_commit(repo, signer), [signer.public_key], SNAPSHOT_NAMESPACE)


def test_a_snapshot_signed_for_git_is_refused_by_its_trailer(
    repo: GitRepo, signer: Ed25519Signer
) -> None:
    """A snapshot an older gitaudit signed for "git" (before snapshots had their own namespace)
    verifies as a git signature, but verify_commit refuses it by its Audit-Snapshot trailer, in
    one line; the same words outside the trailers (a seal's reason, say) are no snapshot."""
    r = pygit2.Repository(str(repo.path))
    head = repo.git("rev-parse", "HEAD").strip()

    def signed(message: str) -> pygit2.Oid:
        return create_signed_commit(
            r, tree=repo.head_tree(), parents=[head], message=message, signer=signer, author=AUTHOR
        )

    old = signed("snapshot: latest\n\nAudit-Snapshot: latest\nAudit-Tree: 0123\n")
    with pytest.raises(SignatureError) as caught:
        verify_commit(r, old, [signer.public_key])
    assert caught.value.message == (
        f"commit {old} is a work-tree snapshot ('Audit-Snapshot: latest' in its message), "
        "never a 'git' commit"
    )
    assert snapshot_marker("snapshot: s \u2014 note\n\nAudit-Snapshot: s\nAudit-Head: 1\n") == "s"
    quoted = signed("seal: default\n\nAudit-Snapshot: in the reason\n\nAudit-Plan: default\n")
    assert snapshot_marker("seal\n\nAudit-Snapshot: x\n\nAudit-Plan: default\n") is None
    assert verify_commit(r, quoted, [signer.public_key]) == signer.public_key


def test_layout_matches_git_commit_dash_s_byte_for_byte(repo: GitRepo, tmp_path: Path) -> None:
    key = keygen(tmp_path / "keys" / "id")
    signer = load_signer(key)
    repo.git("config", "gpg.format", "ssh")
    repo.git("config", "user.signingKey", str(key))
    parent = repo.git("rev-parse", "HEAD").strip()
    repo.write("file.txt", "content\n")
    repo.git("add", "-A")
    repo.git("commit", "-q", "-S", "-m", "signed by git")
    theirs = repo.git("rev-parse", "HEAD").strip()
    ours = create_signed_commit(
        pygit2.Repository(str(repo.path)),
        tree=repo.head_tree(),
        parents=[parent],
        message="signed by git",
        signer=signer,
        author=AUTHOR,
        committer=COMMITTER,
    )
    assert str(ours) == theirs
    raw = repo.git("cat-file", "commit", theirs)
    assert re.search(
        r"\ncommitter [^\n]+\ngpgsig -----BEGIN SSH SIGNATURE-----\n( [A-Za-z0-9+/=]{1,70}\n)+"
        r" -----END SSH SIGNATURE-----\n\nsigned by git\n$",
        raw,
    )


def test_git_commit_dash_s_passes_our_verify(repo: GitRepo, tmp_path: Path) -> None:
    key = keygen(tmp_path / "keys" / "id")
    expected = PublicKey.from_openssh((tmp_path / "keys" / "id.pub").read_text())
    repo.git("config", "gpg.format", "ssh")
    repo.git("config", "user.signingKey", str(key))
    repo.git("commit", "-q", "--allow-empty", "-S", "-m", "by git")
    oid = repo.git("rev-parse", "HEAD").strip()
    r = pygit2.Repository(str(repo.path))
    assert verify_commit(r, oid, [expected]) == expected
    signed = read_commit_signature(r, oid)
    raw = r.odb.read(oid)[1]
    assert signed.payload == re.sub(rb"gpgsig [^\n]*\n( [^\n]*\n)*", b"", raw)
    assert b"gpgsig" not in signed.payload and signed.payload.endswith(b"\n\nby git\n")
    # independent check: ssh-keygen accepts exactly this payload/signature split
    allowed = format_allowed_signers([("me", expected)])
    assert keygen_verify(tmp_path, allowed, "me", signed.armoured, signed.payload).returncode == 0


def test_merge_commit_and_message_newline(
    repo: GitRepo, signer: Ed25519Signer, tmp_path: Path
) -> None:
    first = repo.git("rev-parse", "HEAD").strip()
    second = repo.commit("second")
    r = pygit2.Repository(str(repo.path))
    oid = create_signed_commit(
        r,
        tree=repo.head_tree(),
        parents=[first, pygit2.Oid(hex=second)],
        message="merge",
        signer=signer,
    )
    raw = r.odb.read(oid)[1]
    assert f"parent {first}\nparent {second}\nauthor Test User <user@example.test> ".encode() in raw
    assert raw.endswith(b"\n\nmerge\n")
    assert _git_verify(repo, _allowed_file(tmp_path, signer.public_key), oid) == 0


def test_altered_commit_fails(repo: GitRepo, signer: Ed25519Signer, tmp_path: Path) -> None:
    oid = _our_commit(repo, signer, "honest message\n")
    raw = repo.git("cat-file", "commit", str(oid)).encode()
    forged = _write_raw(repo, raw.replace(b"honest message", b"forged message"))
    assert forged != str(oid)
    r = pygit2.Repository(str(repo.path))
    with pytest.raises(SignatureError, match=f"commit {forged}: bad signature"):
        verify_commit(r, forged, [signer.public_key])
    assert _git_verify(repo, _allowed_file(tmp_path, signer.public_key), forged) != 0
    # a header slipped in after the signature is caught as well
    moved = raw.replace(b"\n\nhonest", b"\nextra header\n\nhonest")
    with pytest.raises(SignatureError, match="bad signature"):
        verify_commit(r, _write_raw(repo, moved), [signer.public_key])


def test_two_gpgsig_headers_fail(repo: GitRepo, signer: Ed25519Signer) -> None:
    oid = _our_commit(repo, signer)
    raw = repo.git("cat-file", "commit", str(oid)).encode()
    header = re.search(rb"gpgsig [^\n]*\n( [^\n]*\n)*", raw)
    assert header
    doubled = raw.replace(header.group(0), header.group(0) * 2)
    r = pygit2.Repository(str(repo.path))
    with pytest.raises(SignatureError, match="2 gpgsig headers"):
        verify_commit(r, _write_raw(repo, doubled), [signer.public_key])
    both = raw.replace(header.group(0), header.group(0) + b"gpgsig-sha256" + header.group(0)[6:])
    with pytest.raises(SignatureError, match="both gpgsig and gpgsig-sha256"):
        verify_commit(r, _write_raw(repo, both), [signer.public_key])
    only256 = raw.replace(header.group(0), b"gpgsig-sha256" + header.group(0)[6:])
    with pytest.raises(SignatureError, match="only a gpgsig-sha256"):
        verify_commit(r, _write_raw(repo, only256), [signer.public_key])


def test_a_signature_header_without_its_space_is_no_signature(
    repo: GitRepo, signer: Ed25519Signer
) -> None:
    """``gpgsig`` alone on its line, the armour on the continuation lines: git verify-commit
    finds no signature (a header is its name and a space); gitaudit took the armour."""
    oid = _our_commit(repo, signer)
    raw = repo.git("cat-file", "commit", str(oid)).encode()
    split = raw.replace(b"\ngpgsig -----BEGIN", b"\ngpgsig\n -----BEGIN", 1)
    moved = _write_raw(repo, split)
    seen = subprocess.run(
        ["git", "verify-commit", "--raw", moved], cwd=repo.path, capture_output=True, check=False
    )
    assert (seen.returncode, seen.stderr) == (1, b"")  # git finds no signature to check
    signed = subprocess.run(
        ["git", "verify-commit", "--raw", str(oid)], cwd=repo.path, capture_output=True, check=False
    )
    assert signed.stderr  # the original's signature is found (and cannot be checked here)
    with pytest.raises(SignatureError, match=f"commit {moved} is not signed"):
        verify_commit(pygit2.Repository(str(repo.path)), moved, [signer.public_key])


def test_unsigned_commit_fails(repo: GitRepo, signer: Ed25519Signer) -> None:
    oid = repo.git("rev-parse", "HEAD").strip()
    with pytest.raises(SignatureError, match=f"commit {oid} is not signed"):
        verify_commit(pygit2.Repository(str(repo.path)), oid, [signer.public_key])


def test_pgp_signature_is_not_accepted() -> None:
    raw = (
        b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n"
        b"author a <a@b> 0 +0000\ncommitter a <a@b> 0 +0000\n"
        b"gpgsig -----BEGIN PGP SIGNATURE-----\n \n AAAA\n -----END PGP SIGNATURE-----\n\nm\n"
    )
    with pytest.raises(SignatureError, match="carries an OpenPGP signature, not an SSH signature"):
        split_signature(raw)
    with pytest.raises(SignatureError, match="not an SSH signature"):
        split_signature(raw.replace(b"PGP SIGNATURE", b"X"))


def test_untrusted_key_fails(repo: GitRepo, signer: Ed25519Signer) -> None:
    oid = _our_commit(repo, signer)
    other = Ed25519Signer.generate().public_key
    r = pygit2.Repository(str(repo.path))
    with pytest.raises(SignatureError, match=re.escape(signer.public_key.fingerprint())) as e:
        verify_commit(r, oid, [other])
    assert "untrusted key" in e.value.message and str(oid) in e.value.message


def test_split_keeps_other_multiline_headers_in_payload() -> None:
    sig = sshsig.sign_raw(bytes(32), b"x", "git")
    payload = (
        b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n"
        b"author a <a@b> 0 +0000\ncommitter a <a@b> 0 +0000\n"
        b"mergetag object 0\n type commit\n\nmessage\n gpgsig lookalike\n"
    )
    body = "\n ".join(sig.rstrip("\n").split("\n")).encode()
    raw = payload.replace(b"mergetag", b"gpgsig " + body + b"\nmergetag", 1)
    split = split_signature(raw)
    assert split.payload == payload
    assert split.armoured == sig


def test_split_reads_a_commit_without_a_final_newline() -> None:
    """The last header line need not end in a newline (a hand-made object): read to its end."""
    raw = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor a <a@b> 0 +0000"
    with pytest.raises(SignatureError) as caught:
        split_signature(raw, "run abc")
    assert caught.value.message == "run abc is not signed"


def test_only_ssh_signature_armour_is_embedded() -> None:
    with pytest.raises(SignatureError) as caught:
        insert_signature(b"tree 0\n\nmessage\n", "-----BEGIN PGP SIGNATURE-----\nx\n")
    assert caught.value.message == "refusing to embed a signature that is not SSH signature armour"


def test_bad_inputs(repo: GitRepo, signer: Ed25519Signer) -> None:
    r = pygit2.Repository(str(repo.path))
    head = repo.git("rev-parse", "HEAD").strip()
    with pytest.raises(RepositoryError) as caught:
        create_signed_commit(r, tree=head, parents=[], message="m", signer=signer)
    assert caught.value.message == f"tree {head} is not a tree"
    with pytest.raises(RepositoryError) as caught:
        create_signed_commit(r, tree="0" * 40, parents=[], message="m", signer=signer)
    assert caught.value.message == f"tree {'0' * 40} does not exist in {r.path}"
    with pytest.raises(RepositoryError) as caught:
        create_signed_commit(
            r, tree=repo.head_tree(), parents=[repo.head_tree()], message="m", signer=signer
        )
    assert caught.value.message == f"parent {repo.head_tree()} is not a commit"
    with pytest.raises(RepositoryError, match="not a full object id"):
        create_signed_commit(r, tree="HEAD", parents=[], message="m", signer=signer)
    with pytest.raises(SignatureError, match="is not a commit"):
        read_commit_signature(r, repo.head_tree())
    with pytest.raises(ValueError, match="NUL"):
        commit_payload(
            tree=pygit2.Oid(hex=repo.head_tree()),
            parents=[],
            author=AUTHOR,
            committer=AUTHOR,
            message="a\0b",
        )


def test_signer_returning_a_foreign_signature_is_refused(repo: GitRepo) -> None:
    class Liar:
        public_key = Ed25519Signer.generate().public_key

        def sign(self, data: bytes, namespace: str = "git") -> str:
            return Ed25519Signer.generate().sign(data, namespace)

    r = pygit2.Repository(str(repo.path))
    with pytest.raises(
        SignatureError, match="expected " + re.escape(Liar.public_key.fingerprint())
    ):
        create_signed_commit(r, tree=repo.head_tree(), parents=[], message="m", signer=Liar())


def test_negative_timezone_offset_is_formatted_like_git(
    repo: GitRepo, signer: Ed25519Signer
) -> None:
    who = pygit2.Signature("Tz Person", "tz@example.test", PINNED, -(5 * 60 + 30))
    oid = create_signed_commit(
        pygit2.Repository(str(repo.path)),
        tree=repo.head_tree(),
        parents=[],
        message="tz",
        signer=signer,
        author=who,
        committer=who,
    )
    assert f"author Tz Person <tz@example.test> {PINNED} -0530\n" in repo.git(
        "cat-file", "commit", str(oid)
    )
    commit = pygit2.Repository(str(repo.path))[oid]
    assert isinstance(commit, pygit2.Commit) and commit.author.offset == -330


def test_default_identity_falls_back_without_user_config(
    repo: GitRepo, signer: Ed25519Signer, hermetic: Path
) -> None:
    (hermetic / ".gitconfig").write_text("")
    r = pygit2.Repository(str(repo.path))
    oid = create_signed_commit(r, tree=repo.head_tree(), parents=[], message="m", signer=signer)
    raw = r.odb.read(oid)[1]
    assert b"\nauthor gitaudit <gitaudit@localhost> " in raw
    assert b"\ncommitter gitaudit <gitaudit@localhost> " in raw


def test_an_identity_that_would_break_the_header_is_refused() -> None:
    """A name (or email) with a newline would end the header line early, and so change what was
    signed: refused before anything is signed. (libgit2 itself refuses '<' and '>' in a
    signature, and ends a name at NUL, before gitaudit sees them.)"""
    tree = pygit2.Oid(hex="4b825dc642cb6eb9a060e54bf8d69288fbee4904")
    for who in (
        pygit2.Signature("a\nb", "author@example.test", PINNED, 0),
        pygit2.Signature("Name", "a\nb@example.test", PINNED, 0),
    ):
        with pytest.raises(ValueError, match=r"author identity .* contains"):
            commit_payload(tree=tree, parents=[], author=who, committer=COMMITTER, message="m")


def test_an_unsigned_object_is_called_a_commit_by_default() -> None:
    raw = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nmessage\n"
    with pytest.raises(SignatureError) as caught:
        split_signature(raw)
    assert caught.value.message == "commit is not signed"


def _signed_raw(*, before: bytes = b"", after: bytes = b"", header: bytes = b"gpgsig ") -> bytes:
    sig = sshsig.sign_raw(bytes(32), b"x", "git")
    body = "\n ".join(sig.rstrip("\n").split("\n")).encode()
    return (
        b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n"
        b"author a <a@b> 0 +0000\ncommitter a <a@b> 0 +0000\n"
        + before
        + header
        + body
        + b"\n"
        + after
        + b"\nmessage\n gpgsig lookalike\n\ngpgsig in the message\n"
    )


@pytest.mark.parametrize(
    ("raw", "plain"),
    [
        (_signed_raw(), True),
        (_signed_raw(after=b"mergetag object 0\n type commit\n  two spaces\n \n"), True),
        (_signed_raw(before=b"encoding x\n continued\n"), True),
        (_signed_raw(header=b"gpgsig  "), True),  # a value starting with a space
        (_signed_raw(after=b"gpgsig-sha256 x\n"), False),
        (_signed_raw(before=b"gpgsigs x\n"), False),  # any header named gpgsig... is read by line
        (_signed_raw(before=b"gpgsig-sha256 x\n"), False),
        (_signed_raw(after=b"gpgsig x\n"), False),
        (_signed_raw(header=b"gpgsig-sha256 "), False),
        (_signed_raw(header=b"gpgsig\n "), False),
        (_signed_raw().replace(b"\n\nmessage", b"\n"), True),  # the headers end further down
        (_signed_raw().split(b"\n\n")[0], False),  # no blank line, no final newline
        (b"gpgsig " + _signed_raw(header=b"x "), False),  # the first line
        (b"\n" + _signed_raw(), False),  # no headers at all
    ],
)
def test_a_plain_layout_is_split_as_the_line_by_line_split_does(raw: bytes, plain: bool) -> None:
    """Every signed run commit is split in a few searches (_split_plain); any layout it does
    not take is split line by line, and both give the same payload and signature."""
    assert (_split_plain(raw) is not None) is plain
    try:
        expected: object = _split_lines(raw, "commit")
    except SignatureError as exc:
        expected = exc.message
    try:
        found: object = split_signature(raw)
    except SignatureError as exc:
        found = exc.message
    assert found == expected
