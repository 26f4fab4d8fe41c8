"""`git audit push` against a real bare server: a lost race on the shared runs ref is retried."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import Setup
from tests.gitrepo import audit, git


def other_machine(setup: Setup, path: Path) -> Path:
    git(path.parent, "clone", "-q", str(setup.server), str(path))
    git(path, "fetch", "-q", "origin", "refs/audit/*:refs/audit/*")
    git(path, "config", "audit.rootKey", setup.client.git("config", "audit.rootKey").strip())
    return path


def runs_on_server(setup: Setup) -> int:
    return int(git(setup.server, "rev-list", "--count", "refs/audit/runs/default").strip())


def test_a_lost_race_on_the_runs_ref_is_fetched_replayed_and_retried(
    setup: Setup, tmp_path: Path
) -> None:
    assert audit(setup.client.path, "run").code == 0
    assert setup.audit_push().returncode == 0
    other = other_machine(setup, tmp_path / "other")
    assert audit(other, "run").code == 0  # another run, not yet pushed
    # the other machine pushes while this push is under way: between the server's ref
    # advertisement and our update (from a pre-push hook, which git runs just then)
    marker = tmp_path / "raced"
    legacy = setup.client.path / ".git" / "hooks" / "pre-push.legacy"
    legacy.write_text(
        "#!/bin/sh\n"
        f"[ -e '{marker}' ] && exit 0\n"
        f"touch '{marker}'\n"
        f"cd '{other}' && env -u GIT_DIR -u GIT_INDEX_FILE '{sys.executable}' -m gitaudit push "
        ">/dev/null 2>&1\n"
    )
    legacy.chmod(0o755)
    setup.client.write("more.txt", "more\n")
    setup.client.commit("more")
    assert audit(setup.client.path, "run").code == 0
    pushed = setup.audit_push()
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert marker.exists()
    assert "another push moved refs/audit/runs/default first" in pushed.stderr, pushed.stderr
    assert "refs/audit/runs/default: rebased 1" in pushed.stdout
    assert runs_on_server(setup) == 3  # ours, theirs, ours again: nothing lost
    assert audit(setup.server, "status", "main").code == 0


def test_a_refusal_that_is_not_a_race_is_not_retried(setup: Setup) -> None:
    assert audit(setup.client.path, "run").code == 0
    assert setup.audit_push().returncode == 0
    setup.client.write("untested.txt", "no evidence\n")
    setup.client.commit("untested")
    # skip the client hook: the server's pre-receive hook refuses, which no retry can change
    proc = subprocess.run(
        [sys.executable, "-m", "gitaudit", "push"],
        cwd=setup.client.path,
        capture_output=True,
        text=True,
        check=False,
        env={
            **setup.env(),
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "core.hooksPath",
            "GIT_CONFIG_VALUE_0": "/dev/null",
        },
    )
    assert proc.returncode == 1
    assert "another push moved" not in proc.stderr
    assert "pre-receive hook declined" in proc.stdout + proc.stderr
    assert runs_on_server(setup) == 1


def test_a_run_recorded_during_a_push_is_not_rewound_by_git(setup: Setup) -> None:
    """git writes a pushed ref's value into the matching remote-tracking ref after a push. With
    the legacy fetch refspec `refs/audit/*:refs/audit/*` that ref is the local ledger itself, so a
    run recorded while the push was under way was silently rewound (and lost). The audit refs'
    remote-tracking copies now live in their own namespace."""
    assert audit(setup.client.path, "run").code == 0
    # another run lands on the local ledger while `git push` is talking to the server
    legacy = setup.client.path / ".git" / "hooks" / "pre-push.legacy"
    legacy.write_text(
        "#!/bin/sh\n"
        f"env -u GIT_DIR -u GIT_INDEX_FILE '{sys.executable}' -m gitaudit run >/dev/null 2>&1\n"
        "exit 0\n"
    )
    legacy.chmod(0o755)
    pushed_tip = setup.client.git("rev-parse", "refs/audit/runs/default").strip()
    result = setup.push("origin", "main", "refs/audit/runs/default:refs/audit/runs/default")
    assert result.returncode == 0, result.stderr
    local_tip = setup.client.git("rev-parse", "refs/audit/runs/default").strip()
    assert local_tip != pushed_tip  # the run recorded during the push is still the tip
    assert setup.client.git("merge-base", "--is-ancestor", pushed_tip, local_tip) == ""
    tracking = setup.client.git("rev-parse", "refs/gitaudit/remotes/origin/audit/runs/default")
    assert tracking.strip() == pushed_tip  # what git wrote back went to the tracking copy
    assert audit(setup.client.path, "verify").code == 0


def test_init_upgrades_the_legacy_fetch_refspec(setup: Setup) -> None:
    client = setup.client
    client.git("config", "--unset-all", "remote.origin.fetch", "gitaudit")
    client.git("config", "--add", "remote.origin.fetch", "refs/audit/*:refs/audit/*")
    doctor = audit(client.path, "doctor")
    assert "BAD refspecs: remotes without the audit fetch refspec: origin (legacy)" in doctor.out
    upgraded = audit(client.path, "init")
    assert upgraded.code == 0, upgraded.err
    assert "fetch refspec for origin: upgraded" in upgraded.out
    fetch = client.git("config", "--get-all", "remote.origin.fetch").split()
    assert fetch == [
        "+refs/heads/*:refs/remotes/origin/*",
        "+refs/audit/*:refs/gitaudit/remotes/origin/audit/*",
    ]
    # a plain fetch now works whatever the remote's ledger did
    assert client.git("fetch", "-q", "origin") == ""


def test_a_remote_serving_a_non_commit_audit_ref_is_refused_in_one_line(
    setup: Setup, tmp_path: Path
) -> None:
    """A remote (its URL is whatever .git/config says) whose refs/audit/plans or runs ref is a
    blob, a tree or an annotated tag: `sync` and `push` compared it with the local ref and
    crashed (pygit2's InvalidError, a traceback); now one line names the ref and the remote."""
    assert audit(setup.client.path, "run").code == 0
    odd = tmp_path / "odd.git"
    git(tmp_path, "init", "-q", "--bare", str(odd))
    setup.client.git("push", "-q", "--no-verify", str(odd), "refs/audit/*:refs/audit/*")
    setup.client.git("remote", "add", "odd", str(odd))
    blob = git(odd, "hash-object", "-w", "--stdin", input=b"not a commit\n").strip()
    run = git(odd, "rev-parse", "refs/audit/runs/default").strip()
    tag = git(
        odd,
        "mktag",
        input=f"object {run}\ntype commit\ntag t\ntagger t <t@e> 0 +0000\n\nt\n".encode(),
    ).strip()
    tree = git(odd, "rev-parse", "refs/audit/plans^{tree}").strip()
    for ref, oid, kind in (
        ("refs/audit/plans", blob, "blob"),
        ("refs/audit/runs/default", tag, "tag"),
        ("refs/audit/runs/default", tree, "tree"),
    ):
        git(odd, "update-ref", ref, oid)
        for command in (["sync", "odd"], ["push", "odd"]):
            result = audit(setup.client.path, *command)
            assert result.code == 1, (command, result.out, result.err)
            assert "Traceback" not in result.err
            assert (
                f"error: {ref} of remote 'odd' points at {oid[:12]}, a {kind}, not a commit; "
                "nothing was taken from it"
            ) in result.err, result.err
        git(odd, "update-ref", ref, run if "runs" in ref else setup.server_ref(ref) or "")
