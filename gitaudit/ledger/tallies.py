"""What the ledger says about retrying or carrying each step: tallies of the chain, under a MAC.

Three answers decide what ``git audit run`` executes: how many failed attempts a step has under a
contract (``max_attempts``), whether its newest executed outcome is unknown or interrupted (a
non-idempotent step waits for a reconcile), and whether its newest execution with the inputs
this tree gives it passed (incremental evidence). All are tallies of the run commits on the
chain up to a tip. They used to be rows of the lookup cache, which any process in the repository
can rewrite: a row deleted or marked ``passed`` let the run retry a step the contract closed, or
carry a pass over a newer failure. So the tallies are kept beside the tip they were counted up
to, under a MAC with the local key (:mod:`gitaudit.secret`): the cache adds the runs it indexes
to tallies whose MAC holds, and tallies that do not hold (or are missing) are counted again from
the chain. Whoever cannot read the key can make the count slower, never smaller.

Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from gitaudit import secret

EXECUTED = frozenset({"passed", "failed", "unknown", "interrupted", "unsound"})
"""The statuses of a step that ran (carried, blocked, exhausted or skipped steps did not);
"unsound" is a pass in a run that does not count as a whole (``records.UNSOUND``)."""
UNSETTLED = frozenset({"unknown", "interrupted"})
"""The executed outcomes whose effect may or may not have happened."""

RECENT = 8
"""Executions kept per step with inputs, newest first (a step without inputs keeps its newest):
enough to know the newest execution with the inputs a tree gives it unless it ran with other
inputs that many times since (see :meth:`Tallies.newest_with`)."""

_FORMAT = b"gitaudit.ledger-tallies/3"  # 3: a pass in an unsound run is no pass

Execution = tuple[str, str, str]
"""(status, input digest, the run commit that recorded it)."""


@dataclass
class Tallies:
    """Failed executions per (contract, step), and each step's :data:`RECENT` newest
    executions."""

    failed: dict[tuple[str, str], int] = field(default_factory=dict)
    recent: dict[str, list[Execution]] = field(default_factory=dict)

    def add(self, commit: str, contract: str, steps: Mapping[str, tuple[str, str]]) -> None:
        """Count one run commit (newer than every one counted so far): its contract and each
        step's (status, input digest), as the lookup cache reads them."""
        for step, (status, digest) in steps.items():
            if status == "failed":
                self.failed[contract, step] = self.failed.get((contract, step), 0) + 1
            if status in EXECUTED:
                kept = self.recent.setdefault(step, [])
                kept.insert(0, (status, digest, commit))
                del kept[RECENT if digest else 1 :]

    def failures(self, contract: str, reset: Mapping[str, int] | None = None) -> dict[str, int]:
        """step -> failed executions under *contract*, less those a sealer *reset* (step ->
        failures that no longer count); only steps with some left."""
        counts = {
            step: n - (reset or {}).get(step, 0)
            for (under, step), n in self.failed.items()
            if under == contract
        }
        return {step: n for step, n in counts.items() if n > 0}

    def failures_since(self, contracts: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
        """Failed executions under several contracts (contract -> its resets), less every reset
        among them: those a planner's reseals led through
        (:func:`gitaudit.ledger.plansref.attempt_contracts`), where a sealer's reset under the
        newest covers the failures under the older ones too; only steps with some left."""
        total: dict[str, int] = {}
        for contract, reset in contracts.items():
            for (under, step), n in self.failed.items():
                if under == contract:
                    total[step] = total.get(step, 0) + n
            for step, n in reset.items():
                total[step] = total.get(step, 0) - n
        return {step: n for step, n in total.items() if n > 0}

    def unsettled(self) -> dict[str, str]:
        """step -> the run commit of its newest execution, when that outcome is unknown or
        interrupted."""
        return {step: kept[0][2] for step, kept in self.recent.items() if kept[0][0] in UNSETTLED}

    def newest_with(self, step: str, digest: str) -> Execution | None:
        """The newest execution of *step* with input digest *digest*; None when none of the
        executions kept had it (it ran with other inputs :data:`RECENT` times since, or never
        with these): then nobody knows, without reading the chain, what the newest was."""
        for execution in self.recent.get(step, []):
            if execution[1] == digest:
                return execution
        return None

    def dump(self) -> str:
        return json.dumps(
            {
                "failed": sorted([c, s, n] for (c, s), n in self.failed.items()),
                "recent": sorted([s, [list(e) for e in kept]] for s, kept in self.recent.items()),
            },
            separators=(",", ":"),
        )

    @classmethod
    def load(cls, text: str) -> Tallies | None:
        """The tallies *text* holds; None when it is not what :meth:`dump` writes."""
        try:
            doc = json.loads(text)
            failed = {(str(c), str(s)): int(n) for c, s, n in doc["failed"]}
            recent: dict[str, list[Execution]] = {}
            for step, kept in doc["recent"]:
                recent[str(step)] = [(str(a), str(b), str(c)) for a, b, c in kept][:RECENT]
                if not recent[str(step)]:
                    return None
            return cls(failed, recent)
        except (ValueError, TypeError, KeyError):
            return None


def mac(key: bytes, ledger: str, tip: str, body: str) -> str:
    """The MAC of *body*, the tallies of ledger *ledger* (a plan name, or a remote-tracking
    ledger's ref) counted up to the run commit *tip*."""
    return secret.mac(key, b"\0".join((_FORMAT, ledger.encode(), tip.encode(), body.encode())))
