"""Whether this machine's PATH offers the programs a run made here had its checks start.

Whoever starts ``git audit run`` chooses its ``PATH`` (:mod:`gitaudit.pathsearch`): an agent
that puts a folder of its own first (``PATH=/tmp/x:$PATH git audit run``) has its checks run a
``grep`` or ``python3`` that passes whatever it is asked, and the run, signed with the user's
runner key, says PASS. A run records each program a check started by name with the PATH folder
it was found in and the executable, so whoever holds the key the run was signed with in their
gitaudit home (the run was made by a ``git audit run`` here) asks whether their own PATH,
cleaned as the checks' is, offers that program from that folder: if not, the step's evidence
does not bind here (the gate: UNKNOWN, run it again with this PATH), nor is it carried into a
new run (:mod:`gitaudit.run.recorder`). A run signed elsewhere (CI, a teammate's runner) ran
that machine's programs, which this PATH says nothing about. The programs relied on are kept
with a remembered PASS and asked again on every lookup (:mod:`gitaudit.gate.memo`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from gitaudit.crypto.keystore import list_local_keys
from gitaudit.errors import KeyMaterialError
from gitaudit.ledger.records import CheckEntry, RunRecord
from gitaudit.pathsearch import Offers, Started, checks_path


def started(record: RunRecord, step: str) -> list[Started]:
    """(program, folder, executable) of each check of *step* in *record* that started a program
    by name (its own checks, its outputs' and its upstream's), in order, once each."""
    entry = record.steps.get(step)
    if entry is None:
        return []
    checks: list[CheckEntry] = [*entry.checks]
    for group in entry.outputs.values():
        checks += group
    for upstream in entry.upstream:
        checks += upstream.checks
    return list(dict.fromkeys((c.program, c.found_in, c.executable) for c in checks if c.program))


@dataclass
class Here:
    """This machine, asked once a judgement (or a run): the keys its gitaudit home holds, and
    what its PATH (cleaned for *repository*) offers; *relied* collects each program a verdict
    relies on, for the verdict memo."""

    repository: Sequence[str | os.PathLike[str]]
    relied: dict[Started, None] = field(default_factory=dict)
    _fingerprints: frozenset[str] | None = None
    _offers: Offers | None = None

    def made_here(self, fingerprint: str | None) -> bool:
        """Whether the key of *fingerprint* (a run's signer) is one whose pair this user's
        gitaudit home holds: a run it signed was made by a ``git audit run`` here. A home whose
        keys cannot be read holds every key: the programs are asked (closed)."""
        if self._fingerprints is None:
            try:
                self._fingerprints = frozenset(k.fingerprint for k in list_local_keys())
            except KeyMaterialError:
                return True
        return fingerprint in self._fingerprints

    def unoffered(self, programs: Sequence[Started]) -> Started | None:
        """The first of *programs* this PATH does not offer (:meth:`Offers.unoffered`); None
        when it offers each, which are then relied on."""
        if self._offers is None:
            path = checks_path(os.environ.get("PATH", os.defpath), self.repository)
            self._offers = Offers(path)
        missing = self._offers.unoffered(programs)
        if missing is None:
            self.relied.update(dict.fromkeys(programs))
        return missing

    def binds(self, record: RunRecord, step: str) -> Started | None:
        """The first program *step*'s checks in *record* started that this PATH does not offer,
        when the run was made here; None when it binds (or was made elsewhere). Made here: the
        run names, in its signed record, a key whose pair this home holds (the evidence read
        was signed by a trusted runner; only that key's holder could name another in it)."""
        programs = started(record, step)
        if not programs or not self.made_here(record.runner_key):
            return None
        return self.unoffered(programs)
