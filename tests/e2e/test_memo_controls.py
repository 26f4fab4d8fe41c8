"""The verdict memo end to end: a real `git push` through the installed pre-push hook, and
`git audit status` through the command line. The memo answers only in exactly the state a PASS
was judged in; a tampered entry, a key that is not private, a moved or rewound ledger, expired
evidence, a required tool gone from PATH and a PASS with notes all send the hook (or `status`)
to the full gate, which blocks.

The memo's own rules, at the unit level: ``tests/run/test_memo.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from gitaudit import secret
from gitaudit.gate import memo
from tests.e2e.conftest import PLAN, Setup
from tests.gitrepo import audit

RUNS = "refs/audit/runs/default"


def _memo_file(setup: Setup) -> Path:
    return setup.client.path / ".git" / "gitaudit" / memo.FILENAME


def _entries(setup: Setup) -> list[dict[str, Any]]:
    return list(json.loads(_memo_file(setup).read_text())["entries"])


def _key_file() -> Path:
    return Path(os.environ["GITAUDIT_HOME"]) / secret.KEY_FILENAME


def _run(setup: Setup, env: dict[str, str] | None = None) -> None:
    result = audit(setup.client.path, "run", env=env)
    assert result.code == 0, result.out + result.err


def _head(setup: Setup, rev: str = "HEAD") -> str:
    return setup.client.git("rev-parse", rev).strip()


def _push(
    setup: Setup, rev: str = "HEAD", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`git push origin REV:main` with the branch's evidence (the client's pre-push hook judges
    the branch; the server's pre-receive hook judges both)."""
    return subprocess.run(
        ["git", "push", "--atomic", "origin", f"{rev}:refs/heads/main", f"{RUNS}:{RUNS}"],
        cwd=setup.client.path,
        capture_output=True,
        text=True,
        check=False,
        env={**setup.env(), **(env or {})},
    )


def _blocked_by_the_client(
    setup: Setup, pushed: subprocess.CompletedProcess[str], sha: str, verdict: str
) -> None:
    """The client's pre-push hook (not the server) refused *sha*, judged in full: the branch on
    the server has not moved."""
    assert pushed.returncode != 0
    blocked = f" to refs/heads/main ({sha[:12]}) is blocked: the gate says {verdict}\n"
    assert any(
        line.startswith("gitaudit: push of ") and line.endswith(blocked)
        for line in pushed.stderr.splitlines(keepends=True)
    ), pushed.stderr
    assert "pre-receive hook declined" not in pushed.stderr
    assert setup.server_ref("refs/heads/main") != sha


def _passing_push(setup: Setup) -> None:
    """A run, and the push the memo it refreshed answers: the branch and its evidence land."""
    _run(setup)
    assert [e["tree"] for e in _entries(setup)] == [setup.client.head_tree()]
    pushed = _push(setup)
    assert pushed.returncode == 0, pushed.stderr
    assert setup.server_ref("refs/heads/main") == _head(setup)


def _unproven_commit(setup: Setup) -> str:
    setup.client.write("untested.txt", "no evidence for this tree\n")
    return setup.client.commit("untested")


def _forge(entry: dict[str, Any], key: bytes, **changes: Any) -> dict[str, Any]:
    """*entry* with *changes*, MAC'd under *key*."""
    parsed = memo._parse({**entry, **changes})
    assert parsed is not None
    return {**json.loads(parsed.payload()), "mac": memo._mac(key, parsed)}


def _state(setup: Setup) -> str:
    """The digest of the client's state as the memo takes it now (what a forger would key an
    entry under)."""
    found = memo.snapshot(setup.client.path)
    assert found is not None
    return found[0].digest


def _write_memo(setup: Setup, *entries: dict[str, Any]) -> None:
    _memo_file(setup).write_text(json.dumps({"format": memo.FORMAT, "entries": list(entries)}))


def test_a_forged_or_rekeyed_memo_entry_does_not_pass_a_push(setup: Setup) -> None:
    """The genuine entry for the proven tree, re-pointed at an unproven commit's tree (its MAC
    kept), or MAC'd under a key of the attacker's: the hook judges in full and blocks."""
    _passing_push(setup)
    (genuine,) = _entries(setup)
    sha = _unproven_commit(setup)
    tree, state = setup.client.head_tree(), _state(setup)
    retargeted = {**genuine, "tree": tree, "state": state}
    rekeyed = _forge(genuine, os.urandom(32), tree=tree, state=state)
    for forged in (retargeted, rekeyed):
        _write_memo(setup, genuine, forged)
        _blocked_by_the_client(setup, _push(setup), sha, "UNKNOWN")


def test_a_memo_key_that_is_not_private_authenticates_nothing(setup: Setup, tmp_path: Path) -> None:
    """Whoever reads the memo key can MAC any entry: a key readable by others, or reached
    through a symbolic link, authenticates nothing, so an entry forged with it for an unproven
    tree does not let the push through."""
    _passing_push(setup)
    (genuine,) = _entries(setup)
    sha = _unproven_commit(setup)
    tree, state = setup.client.head_tree(), _state(setup)
    key_file = _key_file()
    key = key_file.read_bytes()
    _write_memo(setup, _forge(genuine, key, tree=tree, state=state))
    key_file.chmod(0o644)  # readable by others
    _blocked_by_the_client(setup, _push(setup), sha, "UNKNOWN")
    key_file.chmod(0o600)
    moved = tmp_path / "elsewhere.key"  # private, but reached through a link
    key_file.rename(moved)
    key_file.symlink_to(moved)
    _write_memo(setup, _forge(genuine, key, tree=tree, state=state))
    _blocked_by_the_client(setup, _push(setup), sha, "UNKNOWN")


def test_a_deleted_ledger_is_judged_not_remembered(setup: Setup) -> None:
    """The memo remembers HEAD's PASS; the runs ref is then deleted (the evidence is gone):
    the same commit's push is judged in full and blocked (the marks saw the ledger)."""
    _run(setup)
    assert [e["tree"] for e in _entries(setup)] == [setup.client.head_tree()]
    setup.client.git("update-ref", "-d", RUNS)
    sha = _head(setup)
    pushed = subprocess.run(
        ["git", "push", "origin", "main"],
        cwd=setup.client.path,
        capture_output=True,
        text=True,
        check=False,
        env=setup.env(),
    )
    _blocked_by_the_client(setup, pushed, sha, "FAIL")
    assert f"{RUNS} was deleted; it was verified at" in pushed.stderr
    assert "watermarks.json" in pushed.stderr  # how to accept a deliberate deletion


def test_a_rewound_ledger_and_a_replayed_memo_are_judged(setup: Setup) -> None:
    """The memo file of an earlier state is kept aside; after a later run the ledger is rewound
    to that state and the file put back: the refs are as they were, the marks are not, so the
    earlier commit's push is judged in full, and the rewind blocks it."""
    _run(setup)
    first_run, first = _head(setup, RUNS), _head(setup)
    saved = _memo_file(setup).read_bytes()
    setup.client.write("more.txt", "more\n")
    setup.client.commit("more")
    _run(setup)
    setup.client.git("update-ref", RUNS, first_run)
    _memo_file(setup).write_bytes(saved)
    pushed = _push(setup, first)
    _blocked_by_the_client(setup, pushed, first, "FAIL")
    assert "moved backwards or was rewritten" in pushed.stderr


def test_expired_evidence_is_judged_not_remembered(setup: Setup) -> None:
    """Evidence valid for ten seconds: once the memo's entry has expired, the push is judged in
    full, and the expired evidence blocks it. (Ten, not one: the run remembers its PASS only
    while the evidence is valid, and under a loaded machine's run one second had gone by.)"""
    short = json.loads(json.dumps(PLAN))
    for step in short["steps"]:
        step["valid_for"] = "10s"
    setup.client.write_plan(short)
    setup.client.commit("evidence lives ten seconds")
    assert audit(setup.client.path, "plan", "seal", "-m", "short-lived evidence").code == 0
    _run(setup)
    (entry,) = _entries(setup)
    assert entry["until"] is not None
    while time.time() <= entry["until"]:
        time.sleep(0.1)
    sha = _head(setup)
    pushed = _push(setup)
    _blocked_by_the_client(setup, pushed, sha, "UNKNOWN")
    assert "the evidence for step build expired at" in pushed.stderr


def test_a_required_tool_gone_from_path_is_judged_not_remembered(
    setup: Setup, tmp_path: Path
) -> None:
    """The plan requires `greeter-lint`; the run had it on PATH and the memo remembers the
    PASS; pushed without it, the hook judges in full and names the missing tool."""
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "greeter-lint").write_text("#!/bin/sh\nexit 0\n")
    (tools / "greeter-lint").chmod(0o755)
    with_tool = {"PATH": f"{tools}{os.pathsep}{setup.env()['PATH']}"}
    linted = json.loads(json.dumps(PLAN))
    linted["required_tools"] = ["greeter-lint"]
    setup.client.write_plan(linted)
    setup.client.commit("the plan needs greeter-lint")
    sealed = audit(setup.client.path, "plan", "seal", "-m", "lint", env=with_tool)
    assert sealed.code == 0, sealed.out + sealed.err
    _run(setup, env=with_tool)
    (entry,) = _entries(setup)
    assert entry["tools"] == ["greeter-lint"]
    sha = _head(setup)
    pushed = _push(setup)
    _blocked_by_the_client(setup, pushed, sha, "FAIL")
    assert "required tool 'greeter-lint' is not on PATH" in pushed.stderr


def test_status_of_a_pass_with_notes_is_judged_not_remembered(setup: Setup) -> None:
    """A PASS that relied on a declared ignored path comes with a note: `git audit status` of
    the work tree judges it in full every time, so a change to the ignored file (invisible to
    the tree) turns the verdict to UNKNOWN."""
    setup.client.write(".gitignore", "tools/\n")
    setup.client.write("tools/verdict", "ok\n")
    ignoring = json.loads(json.dumps(PLAN)) | {"ignored_paths": ["tools"]}
    setup.client.write_plan(ignoring)
    setup.client.commit("the checks use the ignored tools folder")
    sealed = audit(setup.client.path, "plan", "seal", "--allow-weaken", "--reason", "ignored tools")
    assert sealed.code == 0, sealed.out + sealed.err
    _run(setup)
    (entry,) = _entries(setup)
    assert entry["notes"] == [["default", "relied on ignored path(s) tools"]]
    assert audit(setup.client.path, "status", process=True).code == 0
    setup.client.write("tools/verdict", "changed\n")
    status = audit(setup.client.path, "status", process=True)
    assert status.code == 3, status.out + status.err
    assert "UNKNOWN" in status.out
    assert "the declared ignored path 'tools' changed since the run" in status.out
