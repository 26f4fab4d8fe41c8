"""Bad input through the real entry point fails closed in one line: `error:` naming the file or
object, `hint:` with the fix, the documented exit code, and never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo, audit
from tests.plan.builders import two_step_plan
from tests.run.conftest import make_plan, run_step


def _one_error(err: str) -> None:
    lines = err.strip().splitlines()
    assert "Traceback" not in err, err
    assert lines[0].startswith("error: ") and lines[-1].startswith("hint: "), err
    assert len(lines) == 2, err


@pytest.mark.parametrize("kind", ["directory", "fifo"])
@pytest.mark.parametrize("where", ["--key", "audit.signingKey"])
def test_a_signing_key_that_is_not_a_regular_file_is_named(
    repo: GitRepo, tmp_path: Path, kind: str, where: str
) -> None:
    """A key path naming a directory said `error: [Errno 21] Is a directory: 3` (the file
    descriptor, not the file, and the generic hint); a FIFO was named but had no hint."""
    repo.write_plan(two_step_plan())
    key = tmp_path / "key"
    if kind == "directory":
        key.mkdir()
    else:
        os.mkfifo(key)
    if where == "--key":
        result = audit(repo.path, "plan", "seal", "--key", str(key))
    else:
        repo.git("config", "audit.signingKey", str(key))
        result = audit(repo.path, "plan", "seal")
    assert result.code == 1, result.out + result.err
    _one_error(result.err)
    assert f"error: {where}: {key}: not a key file (" in result.err
    assert "Errno" not in result.err
    assert "hint: name an Ed25519 private key file" in result.err


PLAN_NOT_A_FILE: dict[str, tuple[Callable[[Path], None], str]] = {
    "directory": (lambda p: p.mkdir(), "a directory"),
    "fifo": (os.mkfifo, "not a regular file"),
    "dangling symlink": (lambda p: p.symlink_to(p.parent / "gone.json"), "leads to no file"),
    "symlink loop": (lambda p: p.symlink_to(p), "leads to no file"),
    "symlink to a device": (lambda p: p.symlink_to("/dev/zero"), "not a regular file"),
}


@pytest.mark.parametrize("kind", sorted(PLAN_NOT_A_FILE))
@pytest.mark.parametrize(
    "command", [["plan", "validate"], ["plan", "seal"], ["plan", "diff"], ["run"], ["init"]]
)
def test_a_plan_path_that_is_not_a_regular_file_is_named(
    repo: GitRepo, kind: str, command: list[str]
) -> None:
    """`.gitaudit/plans/default.json` as a directory, a FIFO, a dangling or looping symlink or a
    link to a device was skipped in silence: `no plans in .gitaudit/plans/` (exit 2, hint `git
    audit init`, which skipped it too and wrote nothing) while `status` told the user to run
    `git audit plan validate`. Now the path is named as not a plan file, with the fix."""
    make, what = PLAN_NOT_A_FILE[kind]
    path = repo.path / ".gitaudit" / "plans" / "default.json"
    path.parent.mkdir(parents=True)
    make(path)
    result = audit(repo.path, *command)
    assert result.code == 1, result.out + result.err
    _one_error(result.err)
    assert "error: .gitaudit/plans/default.json: not a plan file (" in result.err
    assert what in result.err
    assert "hint: remove .gitaudit/plans/default.json, or replace it" in result.err


def _passed(repo: GitRepo) -> None:
    """One sealed plan `default` (step a) with a PASS recorded for the work tree."""
    repo.write_plan(make_plan(run_step("a", "true")))
    repo.commit("plan")
    for args in (["keys", "generate"], ["trust", "init"], ["plan", "seal"], ["run"]):
        result = audit(repo.path, *args)
        assert result.code == 0, (args, result.out, result.err)


MISSING = "1234567890" * 4


@pytest.mark.parametrize("target", ["blob", "missing"])
@pytest.mark.parametrize("ref", ["refs/audit/plans", "refs/audit/runs/default"])
@pytest.mark.parametrize(
    "command", [["next"], ["route"], ["impact", "a"], ["plan", "export", "--output", "pddl"]]
)
def test_mission_commands_name_an_audit_ref_that_is_not_a_commit(
    repo: GitRepo, ref: str, target: str, command: list[str]
) -> None:
    """An audit ref overwritten with a blob or an object the repository lacks: with the plans
    ref broken, `route`, `impact` and `plan export` printed nothing and exited 0 (every plan
    was skipped); with a runs ref broken, `next` said `0/1 verified, ready a` and exited 0 (the
    unreadable ledger read as empty). Now one line names the ref, exit 1."""
    _passed(repo)
    oid = MISSING
    if target == "blob":
        oid = repo.git("hash-object", "-w", "--stdin", input=b"not a commit\n").strip()
    (repo.path / ".git" / ref).write_text(oid + "\n")
    result = audit(repo.path, *command)
    assert result.code == 1, (result.out, result.err)
    _one_error(result.err)
    named = ref if ref.endswith("plans") else f"plan 'default': {ref}"
    assert f"error: {named} " in result.err
    assert "verified" not in result.out


@pytest.mark.parametrize(
    "command", [["--version"], ["--help"], ["-h"], ["status"], ["status", "--json"], ["log"]]
)
def test_a_closed_output_pipe_ends_the_command_without_a_word(
    repo: GitRepo, command: list[str]
) -> None:
    """The reader of the output exited first (`git audit --version | true`, `status | head`):
    `--version` and `--help` died with a BrokenPipeError traceback, `status` said `error:
    [Errno 32] Broken pipe` with a hint about nothing being recorded. Now every command ends as
    `log` (click) did: nothing on stderr, exit 1 (the output was not all read)."""
    _passed(repo)
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "gitaudit", *command],
            cwd=repo.path,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            timeout=60,
        )
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (1, ""), proc.stderr


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_attest_verify_refuses_a_file_that_is_not_regular_at_once(
    repo: GitRepo, tmp_path: Path, kind: str
) -> None:
    """`git audit attest verify FILE` with a FIFO or /dev/zero as FILE hung (read_bytes waited
    for a writer, or read forever); a directory said `cannot read (Is a directory)` with no
    hint. Now each is named as not an attestation file at once, with the fix, exit 2."""
    _passed(repo)
    path = tmp_path / "envelope"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path = Path("/dev/zero")
    proc = subprocess.run(
        [sys.executable, "-m", "gitaudit", "attest", "verify", str(path)],
        cwd=repo.path,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    _one_error(proc.stderr)
    assert f"error: {path}: not an attestation file (not a regular file)" in proc.stderr


@pytest.mark.parametrize("command", [["--help"], ["show"], ["plan", "show"]])
def test_an_ascii_locale_gets_escapes_not_a_traceback(repo: GitRepo, command: list[str]) -> None:
    """Under `LC_ALL=C PYTHONUTF8=0` (stdout encoded as ASCII), `--help` (its box drawing) and
    `show` (the arrow between times) died with a UnicodeEncodeError traceback. Now what ASCII
    lacks is written escaped (as Python writes stderr), exit 0."""
    _passed(repo)
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}
    env.pop("PYTHONIOENCODING", None)
    proc = subprocess.run(
        [sys.executable, "-m", "gitaudit", *command],
        cwd=repo.path,
        capture_output=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert b"Traceback" not in proc.stderr, proc.stderr.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    proc.stdout.decode("ascii")  # nothing but ASCII was written


@pytest.mark.parametrize("ref", ["refs/audit/runs/default", "refs/audit/plans"])
@pytest.mark.parametrize("command", [["show"], ["next"], ["verify"]])
def test_a_corrupt_loose_object_is_named_in_one_line(
    repo: GitRepo, ref: str, command: list[str]
) -> None:
    """An audit ref's tip whose loose object is garbage (`failed to inflate`): `show`, `next`
    and `verify` died with pygit2's GitError and a traceback. Now one line names the object,
    the hint `git fsck`, exit 1."""
    _passed(repo)
    oid = repo.git("rev-parse", ref).strip()
    loose = repo.path / ".git" / "objects" / oid[:2] / oid[2:]
    loose.chmod(0o644)
    loose.write_bytes(b"garbage")
    result = audit(repo.path, *command)
    assert "Traceback" not in result.err, result.err
    if result.code == 0:  # this command does not read that object
        return
    assert result.code == 1, result.out + result.err
    if result.err.strip():  # else `verify` reported the object as a problem on stdout
        _one_error(result.err)
    else:
        assert oid[:12] in result.out, result.out


@pytest.mark.parametrize("kind", ["directory", "fifo", "dangling link", "rsa line"])
def test_trust_add_of_what_is_no_public_key_is_named_with_the_fix(
    repo: GitRepo, tmp_path: Path, kind: str
) -> None:
    """`trust add` of a folder, a FIFO or a link to nothing said "unsupported key type
    '<path>'" (the path read as a key line) with no hint; a key line of another type had no
    hint either. Each is one line naming what was given, with the fix."""
    assert audit(repo.path, "keys", "generate").code == 0
    assert audit(repo.path, "trust", "init").code == 0
    given = tmp_path / "key.pub"
    if kind == "directory":
        given.mkdir()
    elif kind == "fifo":
        os.mkfifo(given)
    elif kind == "dangling link":
        given.symlink_to(tmp_path / "nothing")
    argument = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ== x" if kind == "rsa line" else str(given)
    result = audit(repo.path, "trust", "add", argument, "--role", "runner", "-n", "ci")
    assert result.code == 1, (result.out, result.err)
    _one_error(result.err)
    if kind == "rsa line":
        assert "unsupported key type 'ssh-rsa'" in result.err
    else:
        what = {"directory": "a folder", "fifo": "not a regular file"}.get(
            kind, "a link to nothing"
        )
        assert f"error: {given}: not an OpenSSH Ed25519 public key ({what})" in result.err
    assert "hint: pass the key's .pub file" in result.err
