"""The read-only hot commands (status, verify) as plain functions returning an exit code.

They are called by the typer commands and by :mod:`gitaudit.cli.fast`, which answers them
without importing typer (the gate runs in hooks and CI loops, where start-up time matters).
"""

from __future__ import annotations

from gitaudit.cli.output import emit_json, say

TYPE_CHECKING = False  # not typing's: the status fast path does without it (gitaudit.named)
if TYPE_CHECKING:
    from gitaudit.gate import memo


def status(rev: str | None, plan: str | None, as_json: bool, for_ref: str | None = None) -> int:
    check_for_ref(for_ref)
    before = None
    if rev is None and plan is None and not as_json:
        before, served = _remembered_status(for_ref or "")
        if served:
            return 0
    from gitaudit.gate.judge import judge
    from gitaudit.gate.render import render_gate
    from gitaudit.git.repo import open_repo

    repo = open_repo()
    if plan is not None:
        from gitaudit.cli.names import require_known

        require_known(repo, plan)
    result = judge(repo, rev, plan=plan, for_ref=for_ref, before=before)
    if as_json:
        emit_json(result.to_json())
    else:
        for line in render_gate(result):
            say(line)
    return result.exit_code


def check_for_ref(for_ref: str | None) -> None:
    """``--for`` takes a full ref name: ``main`` is refused, not judged as an unruled ref."""
    if for_ref is not None and not for_ref.startswith("refs/"):
        from gitaudit.errors import UsageError

        raise UsageError(
            f"--for takes a full ref name, not {for_ref!r}", hint=f"e.g. --for refs/heads/{for_ref}"
        )


def _remembered_status(ref: str = "") -> tuple[memo.Snapshot | None, bool]:
    """Serve ``git audit status`` (the work tree, every plan) from the verdict memo, as the hooks
    do: the work tree's fingerprint judged PASS in exactly the current state of the audit refs,
    marks, configuration and trust anchor, unexpired, its tools on PATH, and with no notes (a
    PASS relying on ignored paths or live steps is judged in full: the work tree's ignored files
    are checked beyond its tree). Printed as the full gate prints that PASS. Returns the state
    taken and whether it was served; no pygit2 on this path. *ref*: judged for that ref (its
    evidence rule), "" for none."""
    from gitaudit.errors import RepositoryError
    from gitaudit.gate import memo
    from gitaudit.gate.render import render_pass
    from gitaudit.git.fingerprint import workspace_fingerprint

    found = memo.snapshot()
    if found is None:
        return None, False
    snap = found[0]
    try:
        tree = workspace_fingerprint(snap.workdir).tree
    except RepositoryError:
        return snap, False  # the full gate explains
    entry = memo.lookup(snap, tree, ref=ref, work_tree=True)
    if entry is None:
        return snap, False
    for line in render_pass(tree, entry.runs):
        say(line)
    return snap, True


def verify(as_json: bool) -> int:
    from gitaudit.git.repo import open_repo
    from gitaudit.ledger.verify import verify_all

    report = verify_all(open_repo())
    if as_json:
        emit_json(report.to_json())
    else:
        total = sum(report.verified.values())
        verdict = "PASS" if report.ok else "FAIL"
        say(f"{verdict}: verified {total} new commit(s) in {report.seconds:.2f}s")
        for ref, n in sorted(report.verified.items()):
            say(f"  {ref}: {n} new")
        for problem in report.problems:
            say(f"  problem: {problem}")
    return 0 if report.ok else 1
