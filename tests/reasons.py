"""What every gate answer must look like, checked on each one the attack catalogue gets.

A reason is read by people and by tools: its code must be one ``docs/ledger-format.md`` documents,
with the verdict documented for it; its message and its fix (``hint``) must say something. A gate
that changed a code, lost a hint or gave a reason another verdict would still refuse, but would
say so wrongly; the tests of the gate check that too.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from gitaudit.gate.result import GateResult, Reason, fold
from gitaudit.verdict import Verdict, combine

LEDGER_DOC = Path(__file__).resolve().parents[1] / "docs" / "ledger-format.md"


@cache
def documented() -> dict[str, str]:
    """code -> its verdict cell in the reason-code table of docs/ledger-format.md."""
    text = LEDGER_DOC.read_text(encoding="utf-8")
    table = text[text.index("## Reason codes") :]
    rows = re.findall(r"^\| `([a-z.-]+)` \| ([^|]+) \|", table, re.MULTILINE)
    return {code: cell.strip() for code, cell in rows}


def assert_well_formed_reason(reason: Reason) -> None:
    codes = documented()
    assert reason.code in codes, f"{reason.code!r} is not a documented reason code"
    assert reason.verdict in (Verdict.FAIL, Verdict.UNKNOWN), reason
    assert reason.verdict.value in codes[reason.code], (
        f"{reason.code} is documented as {codes[reason.code]}, the gate gives {reason.verdict}"
    )
    for text in (reason.message, reason.hint):
        assert isinstance(text, str) and text.strip() == text and text, reason
        assert "\n" not in text and "None" not in text.split(), reason


def assert_well_formed(result: GateResult) -> GateResult:
    """*result*, after checking every reason in it and that each verdict is its reasons' fold."""
    for reason in result.reasons:
        assert_well_formed_reason(reason)
    for plan in result.plans:
        for reason in plan.reasons:
            assert_well_formed_reason(reason)
        assert plan.verdict == fold(plan.reasons), plan
    if result.reasons:
        assert result.verdict == Verdict.FAIL and result.plans == (), result
    else:
        assert result.verdict == combine(p.verdict for p in result.plans), result
    return result
