"""The gate's verdict as lines for people (``git audit status``, the hooks)."""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: the status fast path renders memo hits (gitaudit.named)
if TYPE_CHECKING:  # standard library only at import
    from collections.abc import Sequence

    from gitaudit.gate.result import GateResult


def render_pass(tree: str, runs: Sequence[tuple[str, str]]) -> list[str]:
    """A PASS without notes remembered by the verdict memo (each plan's run), rendered exactly as
    :func:`render_gate` renders that PASS."""
    lines = [f"PASS  tree {tree[:12]}"]
    lines.extend(f"  {'PASS':<7} {name}: evidence {run[:12]}" for name, run in sorted(runs))
    return lines


def render_gate(result: GateResult) -> list[str]:
    """The verdict, then one line per plan, with each non-PASS reason and its fix."""
    lines = [f"{result.verdict}  tree {result.tree[:12]}"]
    for reason in result.reasons:
        lines.append(f"  {reason.message} [{reason.code}]")
        lines.append(f"    fix: {reason.hint}")
    for plan in result.plans:
        if plan.reasons:
            first = plan.reasons[0].message
        else:
            first = f"evidence {plan.run[:12]}" if plan.run else ""
        lines.append(f"  {plan.verdict:<7} {plan.name}: {first}")
        lines.extend(f"          {reason.message}" for reason in plan.reasons[1:])
        lines.extend(f"          fix: {fix}" for fix in dict.fromkeys(r.hint for r in plan.reasons))
        lines.extend(f"          note: {note}" for note in plan.notes)
    return lines
