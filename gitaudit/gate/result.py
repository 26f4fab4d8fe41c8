"""What the gate answers: a verdict per plan and in aggregate, each non-PASS with its reasons."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field

from gitaudit.frozen import frozen
from gitaudit.ledger.trust import Policy
from gitaudit.verdict import Verdict, combine, exit_code


@frozen
class Reason:
    """Why a plan (or a step of it) is not PASS: a stable code, a message naming the plan, step,
    clause or object, and the command that fixes it."""

    code: str
    message: str
    hint: str
    step: str | None = None
    verdict: Verdict = Verdict.FAIL

    def to_json(self) -> dict[str, object]:
        return {"code": self.code, "message": self.message, "hint": self.hint, "step": self.step}


@frozen
class PlanVerdict:
    name: str
    verdict: Verdict
    reasons: tuple[Reason, ...]
    run: str | None = None  # the run commit whose evidence was judged
    # each step's state for this tree, as the gate sees it: verified, failed, unknown,
    # exhausted, expired or pending (empty unless asked for, or when the plan is not in order)
    states: Mapping[str, str] = field(default_factory=dict)
    # what the accepted evidence relied on beyond the tree (live steps, declared ignored paths)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "verdict": self.verdict,
            "run": self.run,
            "reasons": [r.to_json() for r in self.reasons],
            "notes": list(self.notes),
        }


@frozen
class Basis:
    """What a verdict rests on besides the evidence itself: when it was judged, the plans
    commit it was judged under, the ledger tips whose signatures it verified (ref -> tip), the
    earliest expiry of the evidence it accepted, the tools the plans require and the programs the
    checks of runs made here ran. The verdict
    memo and the high-water marks are kept from it (:mod:`gitaudit.gate.judge`)."""

    made: float = 0.0
    plans_tip: str | None = None
    policy: Policy | None = None
    seen: Mapping[str, str] = field(default_factory=dict)
    until: float | None = None
    tools: tuple[str, ...] = ()
    # what runs made here had their checks find on PATH, which this PATH offers
    # (:mod:`gitaudit.ledger.programs`): (program, folder, executable) of each program started by
    # name, and the PATH's folders; a remembered PASS asks again on every lookup
    programs: tuple[tuple[str, str | None, str | None], ...] = ()
    path: tuple[str, ...] = ()
    # the content filter drivers their checkouts applied (NAME.KEY, value), which the global
    # git configuration here defines; a remembered PASS asks again on every lookup
    filters: tuple[tuple[str, str], ...] = ()


@frozen
class GateResult:
    verdict: Verdict
    tree: str
    plans: tuple[PlanVerdict, ...]
    reasons: tuple[Reason, ...] = ()  # problems not tied to one plan
    basis: Basis = field(default_factory=Basis, compare=False)

    @property
    def exit_code(self) -> int:
        return int(exit_code(self.verdict))

    def to_json(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "tree": self.tree,
            "plans": [p.to_json() for p in self.plans],
            "reasons": [r.to_json() for r in self.reasons],
        }


def fold(reasons: tuple[Reason, ...] | list[Reason]) -> Verdict:
    """The verdict of a list of reasons: PASS when there is none."""
    return combine(r.verdict for r in reasons) if reasons else Verdict.PASS
