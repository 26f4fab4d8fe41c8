"""The read-only hot commands (status, verify) as plain functions returning an exit code.

They are called by the typer commands and by :mod:`gitaudit.cli.fast`, which answers them
without importing typer (the gate runs in hooks and CI loops, where start-up time matters).
"""

from __future__ import annotations

from gitaudit.cli.output import emit_json, say
from gitaudit.git.repo import open_repo


def status(rev: str | None, plan: str | None, as_json: bool, for_ref: str | None = None) -> int:
    from gitaudit.gate.judge import judge
    from gitaudit.gate.render import render_gate

    repo = open_repo()
    if plan is not None:
        from gitaudit.cli.names import require_known

        require_known(repo, plan)
    check_for_ref(for_ref)
    result = judge(repo, rev, plan=plan, for_ref=for_ref)
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


def verify(as_json: bool) -> int:
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
