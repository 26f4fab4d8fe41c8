"""keys, trust and seal commands end to end through the real entry point."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo, audit, forget_marks
from tests.plan.builders import two_step_plan


def onboard(repo: GitRepo) -> None:
    repo.write_plan(two_step_plan())
    for args in (["keys", "generate"], ["trust", "init"], ["plan", "seal", "-m", "first"]):
        result = audit(repo.path, *args)
        assert result.code == 0, (args, result.err)


def test_keys_generate_prints_openssh_key_and_ssh_keygen_fingerprint(
    repo: GitRepo, hermetic: Path
) -> None:
    result = audit(repo.path, "keys", "generate", "--name", "laptop")
    assert result.code == 0, result.err
    pub_line, fp_line, path_line = result.out.splitlines()
    assert pub_line.startswith("ssh-ed25519 AAAA") and pub_line.endswith(" laptop")
    private = Path(path_line.split(": ", 1)[1])
    assert private.is_relative_to(hermetic) and oct(private.stat().st_mode & 0o777) == "0o600"
    keygen = subprocess.run(
        ["ssh-keygen", "-lf", str(private) + ".pub"], capture_output=True, text=True, check=True
    )
    assert keygen.stdout.strip() == fp_line
    listed = audit(repo.path, "keys", "list", "--json").json()
    assert [k["name"] for k in listed["local"]] == ["laptop"]


def test_key_inside_the_work_tree_is_refused(repo: GitRepo) -> None:
    inside = repo.path / "secrets"
    result = audit(repo.path, "keys", "generate", env={"GITAUDIT_HOME": str(inside)})
    assert result.code == 1 and "never live inside the work tree" in result.err
    assert not inside.exists() or not any(inside.rglob("default"))
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(repo.path / "k")], check=True
    )
    repo.write_plan(two_step_plan())
    init = audit(repo.path, "trust", "init", "--key", str(repo.path / "k"))
    assert init.code == 1 and "never live inside the work tree" in init.err
    assert "Traceback" not in init.err


def test_missing_and_corrupted_keys_are_one_line_errors(repo: GitRepo, tmp_path: Path) -> None:
    none = audit(repo.path, "trust", "init")
    assert none.code == 1 and none.err.startswith("error: no signing key found")
    assert "git audit keys generate" in none.err
    bad = tmp_path / "bad_key"
    bad.write_text(
        "-----BEGIN OPENSSH PRIVATE KEY-----\ngarbage\n-----END OPENSSH PRIVATE KEY-----\n"
    )
    os.chmod(bad, 0o600)
    corrupt = audit(repo.path, "trust", "init", "--key", str(bad))
    assert corrupt.code == 1 and str(bad) in corrupt.err and "Traceback" not in corrupt.err
    assert len(corrupt.err.strip().splitlines()) <= 2


@pytest.mark.parametrize("content", [b"\xff\xfe\x00binary", b"", b"ssh-ed25519 !!"])
def test_trust_add_of_a_file_that_is_no_public_key_is_a_one_line_error(
    repo: GitRepo, tmp_path: Path, content: bytes
) -> None:
    """A .pub file that is not UTF-8 raised UnicodeDecodeError (a traceback)."""
    bad = tmp_path / "bad.pub"
    bad.write_bytes(content)
    added = audit(repo.path, "trust", "add", str(bad), "--role", "runner", "--name", "ci")
    assert added.code == 1 and "Traceback" not in added.err, added.err
    assert added.err.startswith(f"error: {bad}: not an OpenSSH Ed25519 public key"), added.err


@pytest.mark.parametrize(
    ("option", "value", "error"),
    [
        ("--evidence", "refs/heads/main=ci:" + "9" * 23, "evidence['refs/heads/main'].min must"),
        ("--evidence", "refs/heads/main=ci:\u00b2", "MIN must be a whole number"),
        ("--evidence", "refs/heads/\udcff=ci", "a ref pattern starts with refs/ (and is text)"),
        ("--approvals", "weaken=\u00b2", "expected KIND=K"),
        ("--max-artifact-bytes", "9" * 23, "max_artifact_bytes must be a number of bytes"),
    ],
)
def test_a_policy_no_reader_could_hold_is_a_one_line_error(
    repo: GitRepo, hermetic: Path, option: str, value: str, error: str
) -> None:
    """A number beyond canonical JSON's integers (IntegerDomainError), a lone surrogate
    (UnicodeEncodeError) or a superscript digit (int() ValueError) raised a traceback."""
    assert audit(repo.path, "keys", "generate", "--name", "alice").code == 0
    assert audit(repo.path, "trust", "init").code == 0
    done = audit(repo.path, "trust", "policy", option, value)
    assert done.code == 2 and "Traceback" not in done.err, done.err
    assert error in done.err and len(done.err.strip().splitlines()) <= 2, done.err


def test_seal_flow_and_plain_git_verification(repo: GitRepo, tmp_path: Path) -> None:
    onboard(repo)
    again = audit(repo.path, "plan", "seal")
    assert again.code == 0 and "nothing to do" in again.out
    inspect = audit(repo.path, "plan", "inspect")
    assert inspect.code == 0 and "matches seal v1" in inspect.out
    plan = two_step_plan()
    plan["steps"][1]["verify"] = []
    plan["steps"][1]["verify"].append({"type": "run", "argv": ["true", "--lenient"]})
    repo.write_plan(plan)
    differs = audit(repo.path, "plan", "inspect")
    assert differs.code == 1 and "weakened" in differs.out
    refused = audit(repo.path, "plan", "seal")
    assert (
        refused.code == 1 and "would be weakened" in refused.err and "--allow-weaken" in refused.err
    )
    diff = audit(repo.path, "plan", "diff")
    assert "check removed or changed: run true" in diff.out
    ok = audit(repo.path, "plan", "seal", "--allow-weaken", "--reason", "lenient for now")
    assert ok.code == 0 and "v2 (weakened)" in ok.out
    hist = audit(repo.path, "plan", "history", "--json").json()
    assert [h["version"] for h in hist] == [2, 1] and hist[0]["weakened"] is True
    v1v2 = audit(repo.path, "plan", "diff", "1", "2")
    assert v1v2.code == 0 and "weakened" in v1v2.out
    signers = tmp_path / "allowed_signers"
    assert audit(repo.path, "trust", "export", str(signers)).code == 0
    log = subprocess.run(
        [
            "git",
            "-c",
            "gpg.format=ssh",
            "-c",
            f"gpg.ssh.allowedSignersFile={signers}",
            "log",
            "--show-signature",
            "refs/audit/plans",
        ],
        cwd=repo.path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert log.stdout.count('Good "git" signature') == 3


def test_trust_add_and_policy_commands(repo: GitRepo, tmp_path: Path) -> None:
    onboard(repo)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ci", "-f", str(tmp_path / "ci")],
        check=True,
    )
    added = audit(
        repo.path, "trust", "add", str(tmp_path / "ci.pub"), "--role", "runner", "--name", "ci"
    )
    assert added.code == 0, added.err
    listed = {
        k["name"]: k["roles"] for k in audit(repo.path, "keys", "list", "--json").json()["trusted"]
    }
    assert listed["ci"] == ["runner"]
    reconciler = audit(
        repo.path, "trust", "add", str(tmp_path / "ci.pub"), "--role", "reconciler", "--name", "ci"
    )
    assert reconciler.code == 0 and "trusted ci as reconciler" in reconciler.out, reconciler.err
    listed = {
        k["name"]: k["roles"] for k in audit(repo.path, "keys", "list", "--json").json()["trusted"]
    }
    assert listed["ci"] == ["reconciler", "runner"]
    as_runner = audit(repo.path, "trust", "remove", "default", "--key", str(tmp_path / "ci"))
    assert as_runner.code == 1 and "is not a sealer" in as_runner.err
    bad_role = audit(
        repo.path, "trust", "add", str(tmp_path / "ci.pub"), "--role", "admin", "--name", "x"
    )
    assert bad_role.code == 2
    forbid = audit(repo.path, "trust", "policy", "--weakening", "forbidden")
    assert forbid.code == 0, forbid.err
    relax = audit(
        repo.path, "trust", "policy", "--weakening", "allowed", "--allow-weaken", "--reason", "x"
    )
    assert relax.code == 1 and "forbids weakening" in relax.err
    shown = audit(repo.path, "trust", "policy")
    assert "allow_weaken: False" in shown.out
    data = json.loads(
        subprocess.run(
            ["git", "show", "refs/audit/plans:policy.json"],
            cwd=repo.path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert data["allow_weaken"] is False


def test_a_retired_runner_is_refused_by_the_gate_and_kept_by_verify(
    repo: GitRepo, tmp_path: Path
) -> None:
    """ci, a runner, records the evidence; then ci is removed from the trust set. The gate
    refuses evidence at the ledger tip signed by a key that is no longer a runner; `git audit
    verify` keeps accepting the commits ci signed while it was one (old evidence stays
    verifiable after a key is retired)."""
    from tests.run.conftest import make_plan, run_step

    repo.write_plan(make_plan(run_step("a", "true")))
    repo.commit("plan")
    for args in (["keys", "generate"], ["trust", "init"], ["plan", "seal", "-m", "first"]):
        assert audit(repo.path, *args).code == 0, args
    key = tmp_path / "ci"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    added = audit(repo.path, "trust", "add", f"{key}.pub", "--role", "runner", "--name", "ci")
    assert added.code == 0, added.err
    ran = audit(repo.path, "run", "--key", str(key))
    assert ran.code == 0, ran.err
    assert audit(repo.path, "status").code == 0
    removed = audit(repo.path, "trust", "remove", "ci")
    assert removed.code == 0, removed.err
    judged = audit(repo.path, "status", "--json")
    assert judged.code == 1
    codes = [r["code"] for p in judged.json()["plans"] for r in p["reasons"]]
    assert codes == ["evidence.untrusted"], judged.out
    forget_marks(repo.path / ".git")  # verify everything again
    verified = audit(repo.path, "verify", "--json")
    assert verified.code == 0, verified.out + verified.err
    assert verified.json()["verified"]["refs/audit/runs/default"] == 1


def test_seal_warns_when_the_work_tree_plan_is_not_the_committed_one(repo: GitRepo) -> None:
    """The sealer reviews the committed plan (a pull request's); the seal reads the work tree,
    which may hold an uncommitted edit, a new file or a link to another file: each is named."""
    repo.write_plan(two_step_plan())
    repo.commit("plan")
    for args in (["keys", "generate"], ["trust", "init"]):
        assert audit(repo.path, *args).code == 0
    clean = audit(repo.path, "plan", "seal", "-m", "first")
    assert clean.code == 0, clean.err
    assert "warning" not in clean.err
    edited = two_step_plan()
    edited["steps"][0]["title"] = "edited after the review"
    repo.write_plan(edited)
    sealed = audit(repo.path, "plan", "seal", "-m", "second")
    assert sealed.code == 0, sealed.err
    assert (
        "warning: .gitaudit/plans/default.json differs from HEAD's (sealed: the work tree's "
        "file, uncommitted edits too): check `git diff HEAD -- .gitaudit/plans` is what you "
        "meant to seal"
    ) in sealed.err
    other = repo.write_json("elsewhere.json", two_step_plan())
    plan_file = repo.path / ".gitaudit" / "plans" / "default.json"
    plan_file.unlink()
    plan_file.symlink_to(other)
    linked = audit(repo.path, "plan", "seal", "-m", "third")
    assert "default.json is a symbolic link in the work tree" in linked.err
    repo.write_plan(two_step_plan(), "extra")
    new = audit(repo.path, "plan", "seal", "--plan", "extra", "-m", "new")
    assert new.code == 0, new.err
    assert ".gitaudit/plans/extra.json is not committed in HEAD" in new.err


@pytest.mark.parametrize("commondir", [b"\xff\xfe..\n", b"..\x00x\n"], ids=["not-utf8", "nul"])
def test_verify_from_scratch_with_a_hostile_commondir_is_one_line(
    repo: GitRepo, commondir: bytes
) -> None:
    """`git audit verify` with no verified mark guesses whether to start its workers before it
    opens the repository: a `.git/commondir` it cannot read is the command's to report, in one
    line, with no traceback (the guess raised out of the command, before the fix)."""
    repo.write_plan(two_step_plan())
    repo.commit("plan")
    (repo.path / ".git" / "commondir").write_bytes(commondir)
    got = audit(repo.path, "verify", process=True)
    assert got.code != 0 and "Traceback" not in got.out + got.err, got
    assert len(got.err.strip().splitlines()) <= 2, got.err  # the error and its hint
