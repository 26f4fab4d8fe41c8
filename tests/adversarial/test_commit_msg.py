"""Attacks on the commit-msg hook: what a commit message says about the gate.

The hook owns the ``Audit-*`` trailers (a hand-written ``Audit-Verdict: PASS`` never survives),
recognises completion claims however they are punctuated, and takes its mode from the sealed
policy, which ``git config audit.commitMsg`` (in ``.git/config``, which the agent can write) may
only make stricter. Uses the `setup` fixture of tests/e2e (a client with the hooks installed).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gitaudit.crypto.keystore import keys_dir, load_signer
from gitaudit.git.repo import open_repo
from gitaudit.hooks.entry import MODES, _own_trailers, claims_completion, commit_mode
from gitaudit.hooks.message import without_owned_trailers
from gitaudit.ledger.seals import set_policy
from gitaudit.ledger.trust import COMMIT_MSG_MODES, Policy
from tests.e2e.conftest import Setup
from tests.e2e.conftest import setup as setup  # noqa: PLC0414 (re-exported fixture)
from tests.gitrepo import audit

IDS = {"REQ-1", "REQ-2", "REQ-3"}

# (message line, whether it claims completion); the plans' requirements are REQ-1..REQ-3
CLAIMS: list[tuple[str, bool]] = [
    ("Closes REQ-1", True),
    ("Fixes: REQ-1", True),
    ("fixes:REQ-1", True),
    ("Fixed REQ-1.", True),
    ("[done] REQ-1", True),
    ("closes #REQ-1", True),
    ("(closes REQ-1)", True),
    ("Resolves REQ-9, REQ-2 and REQ-3", True),
    ("Implements REQ-1 & REQ-2", True),
    ("completes **REQ-1**", True),
    ("DONE - REQ-1", True),
    ("close req-1", True),
    ("Not only fixes REQ-1 but also the docs", True),
    ("finish Fixes: REQ-1", True),
    ("REQ-1: done", True),
    ("[REQ-2] completed", True),
    ("REQ-3 is fixed now", True),
    ("Audit-Claim: done", True),
    ("Audit-Claim:done", True),
    ("audit-claim: Done.", True),
    ("Audit-Claim: REQ-2", True),
    ("prefix: REQ-10", False),
    ("Fixes REQ-10", False),
    ("Closes REQ-99", False),
    ("Refs REQ-1", False),
    ("doesn't fix REQ-1 yet", False),
    ("does not close REQ-1", False),
    ("Partially fixes REQ-1", False),
    ("REQ-1 is not done", False),
    ("REQ-1 isn’t done", False),
    ("Fixes the build", False),
    ("work towards REQ-1", False),
    ("hotfix for REQ-1", False),
    ("Audit-Claim: not yet", False),
    ("Audit-Verdict: PASS", False),
    ("# Closes REQ-1", False),
]


# ASCII ids: a test id with an escaped character is not found again by a second pytest session in
# the same process (mutmut lists the tests, then runs them by id, in one process)
@pytest.mark.parametrize(
    ("line", "claims"), CLAIMS, ids=[c[0].replace("\u2019", "'") for c in CLAIMS]
)
def test_attack_commit_msg_claim_phrasings(line: str, claims: bool) -> None:
    """Completion claims are found however they are punctuated or bracketed; negated, partial
    or other requirements' mentions are not claims (docs/hooks-and-servers.md)."""
    found = claims_completion(f"greeting\n\nSome words first.\n{line}\n", IDS)
    assert (found is not None) is claims, (line, found)


def test_attack_commit_msg_claim_below_the_scissors_is_no_claim() -> None:
    scissors = "# ------------------------ >8 ------------------------"
    message = f"tidy up\n{scissors}\ndiff --git a/x b/x\n+Closes REQ-1\n"
    assert claims_completion(message, IDS) is None
    assert claims_completion(message.replace("tidy up", "tidy up, closes REQ-1"), IDS)


def test_attack_commit_msg_owned_trailers_are_removed_wherever_they_stand() -> None:
    message = (
        "subject\n\nAudit-Verdict: PASS (trust me)\nbody line\n\n"
        "Signed-off-by: A <a@example.test>\naudit-run : 1234\n  folded continuation\n"
        "Audit-Tree: abc\nAudit-Claim: done\n"
    )
    assert without_owned_trailers(message) == (
        "subject\n\nbody line\n\nSigned-off-by: A <a@example.test>\nAudit-Claim: done\n"
    )


def _commit(setup: Setup, message: str, *, stage: bool = True) -> subprocess.CompletedProcess[str]:
    if stage:
        subprocess.run(["git", "add", "-A"], cwd=setup.client.path, check=True)
    return subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "-m", message],
        cwd=setup.client.path,
        capture_output=True,
        text=True,
        env=setup.env(),
        check=False,
    )


def _last_message(setup: Setup) -> str:
    return setup.client.git("log", "-1", "--format=%B")


FORGED = "\n\nAudit-Verdict: PASS\nAudit-Run: 0123456789abcdef0123456789abcdef01234567\n"


def test_attack_commit_msg_forged_trailers_replaced_on_pass(setup: Setup) -> None:
    """A proven tree: the forged trailers give way to the hook's own, in the full judgement and
    when the verdict memo answers."""
    assert audit(setup.client.path, "run").code == 0
    run = setup.client.git("rev-parse", "refs/audit/runs/default").strip()
    for _ in range(2):  # the first commit is judged in full (and remembered), the second not
        committed = _commit(setup, "proven" + FORGED.replace("PASS", "FAIL"))
        assert committed.returncode == 0, committed.stderr
        message = _last_message(setup)
        assert message.count("Audit-Verdict:") == 1 and "Audit-Verdict: PASS" in message
        assert f"Audit-Run: {run}" in message and "0123456789abcdef" not in message


def test_attack_commit_msg_forged_pass_removed_when_there_is_no_evidence(setup: Setup) -> None:
    """An unproven tree with no run at all: the hook adds no trailer, and removes the forged."""
    setup.client.write("greeting.txt", "hello, unproven\n")
    committed = _commit(setup, "unproven" + FORGED)
    assert committed.returncode == 0, committed.stderr
    assert "Audit-" not in _last_message(setup)


def test_attack_commit_msg_forged_pass_replaced_on_fail(setup: Setup) -> None:
    """A tree whose run failed: the hook's own FAIL verdict and run, not the forged PASS."""
    setup.client.write("greeting.txt", "goodbye\n")
    setup.client.commit("break the greeting")
    assert audit(setup.client.path, "run").code == 1
    run = setup.client.git("rev-parse", "refs/audit/runs/default").strip()
    committed = _commit(setup, "still broken" + FORGED)
    assert committed.returncode == 0, committed.stderr
    message = _last_message(setup)
    assert "Audit-Verdict: FAIL" in message and "Audit-Verdict: PASS" not in message
    assert f"Audit-Run: {run}" in message and "0123456789abcdef" not in message


def _policy(setup: Setup, mode: str) -> None:
    sealer = load_signer(keys_dir() / "default")
    set_policy(
        open_repo(setup.client.path),
        sealer,
        Policy(commit_msg=mode),  # type: ignore[arg-type]
        allow_weaken=True,
        reason="test",
    )


@pytest.mark.parametrize("configured", ["off", "claims"])
def test_attack_commit_msg_config_cannot_lower_a_strict_policy(
    setup: Setup, configured: str
) -> None:
    """The sealed policy says strict; the agent sets a laxer `audit.commitMsg`."""
    _policy(setup, "strict")
    setup.client.git("config", "audit.commitMsg", configured)
    setup.client.write("x.txt", "unproven\n")
    blocked = _commit(setup, "anything")
    assert blocked.returncode != 0 and "strict" in blocked.stderr


def test_attack_commit_msg_config_off_does_not_silence_claims(setup: Setup) -> None:
    """The default policy (claims) with `audit.commitMsg=off`: a claim is still judged."""
    setup.client.git("config", "audit.commitMsg", "off")
    setup.client.write("greeting.txt", "hello, unproven\n")
    blocked = _commit(setup, "finish\n\nFixes: REQ-2")
    assert blocked.returncode != 0 and "claims completion" in blocked.stderr


def test_attack_commit_msg_config_may_make_it_stricter(setup: Setup) -> None:
    """A policy of off, raised by the configuration: claims, then strict."""
    _policy(setup, "off")
    setup.client.write("x.txt", "unproven\n")
    assert _commit(setup, "finish\n\nCloses REQ-1").returncode == 0  # off: nothing checked
    setup.client.git("config", "audit.commitMsg", "claims")
    assert _commit(setup, "finish\n\nCloses REQ-1", stage=False).returncode != 0
    setup.client.git("config", "audit.commitMsg", "strict")
    assert _commit(setup, "no claim", stage=False).returncode != 0


def test_commit_mode_is_a_floor() -> None:
    assert MODES == COMMIT_MSG_MODES
    for policy in MODES:
        for configured in (None, *MODES, "bogus"):
            mode = commit_mode(policy, configured)
            assert MODES.index(mode) >= MODES.index(policy)
            if configured in MODES:
                assert MODES.index(mode) >= MODES.index(configured)


def test_every_plans_run_keeps_its_own_trailer(tmp_path: Path) -> None:
    """`--if-exists replace` used to keep only the last Audit-Run of several plans."""
    message = tmp_path / "MSG"
    message.write_text("subject\n\nAudit-Run: forged\n")
    _own_trailers(str(message), "PASS", ["a" * 40, "b" * 40])
    assert message.read_text() == (
        f"subject\n\nAudit-Verdict: PASS\nAudit-Run: {'a' * 40}\nAudit-Run: {'b' * 40}\n"
    )
