"""What a ledger says about retrying each step, counted from the signed chain and kept under a MAC.

Two answers decide whether ``git audit run`` may execute a step again: how many failed attempts
the step has under a contract (``max_attempts``), and whether its newest executed outcome is
unknown or interrupted (a non-idempotent step waits for a reconcile). Both are tallies of the run
commits on the chain up to a tip. The lookup cache's rows hold the same facts, but any process in
the repository can rewrite them, and a row deleted or marked ``passed`` would let the run retry a
step the contract closed. So the tallies are kept apart, beside the tip they were counted up to,
under a MAC with the local key (:mod:`gitaudit.secret`): the cache adds the runs it indexes to
tallies whose MAC holds, and a tally that does not hold (or is missing) is counted again from the
chain. Whoever cannot read the key can make the count slower, never smaller.

Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from gitaudit import secret

EXECUTED = frozenset({"passed", "failed", "unknown", "interrupted"})
"""The statuses of a step that ran (carried, blocked, exhausted or skipped steps did not)."""
UNSETTLED = frozenset({"unknown", "interrupted"})
"""The executed outcomes whose effect may or may not have happened."""

_FORMAT = b"gitaudit.ledger-tallies/1"


@dataclass
class Tallies:
    """Failed executions per (contract, step), and each step's newest execution: (status, the
    run commit that recorded it)."""

    failed: dict[tuple[str, str], int] = field(default_factory=dict)
    last: dict[str, tuple[str, str]] = field(default_factory=dict)

    def add(self, commit: str, contract: str, steps: Mapping[str, tuple[str, str]]) -> None:
        """Count one run commit (newer than every one counted so far): its contract and each
        step's (status, input digest), as the lookup cache reads them."""
        for step, (status, _digest) in steps.items():
            if status == "failed":
                self.failed[contract, step] = self.failed.get((contract, step), 0) + 1
            if status in EXECUTED:
                self.last[step] = (status, commit)

    def failures(self, contract: str) -> dict[str, int]:
        """step -> failed executions under *contract*."""
        return {step: n for (under, step), n in self.failed.items() if under == contract}

    def unsettled(self) -> dict[str, str]:
        """step -> the run commit of its newest execution, when that outcome is unknown or
        interrupted."""
        return {step: commit for step, (status, commit) in self.last.items() if status in UNSETTLED}

    def dump(self) -> str:
        return json.dumps(
            {
                "failed": sorted([c, s, n] for (c, s), n in self.failed.items()),
                "last": sorted([s, status, c] for s, (status, c) in self.last.items()),
            },
            separators=(",", ":"),
        )

    @classmethod
    def load(cls, text: str) -> Tallies | None:
        """The tallies *text* holds; None when it is not what :meth:`dump` writes."""
        try:
            doc = json.loads(text)
            return cls(
                {(str(c), str(s)): int(n) for c, s, n in doc["failed"]},
                {str(s): (str(status), str(c)) for s, status, c in doc["last"]},
            )
        except (ValueError, TypeError, KeyError):
            return None


def mac(key: bytes, ledger: str, tip: str, body: str) -> str:
    """The MAC of *body*, the tallies of ledger *ledger* (a plan name, or a remote-tracking
    ledger's ref) counted up to the run commit *tip*."""
    return secret.mac(key, b"\0".join((_FORMAT, ledger.encode(), tip.encode(), body.encode())))
