"""Whether this machine's PATH offers what a run made here had its checks find on theirs.

Whoever starts ``git audit run`` chooses its ``PATH`` (:mod:`gitaudit.pathsearch`): an agent
that puts a folder of its own first (``PATH=/tmp/x:$PATH git audit run``) has its checks run a
``grep`` or ``python3`` that passes whatever it is asked (or an ``npm`` check's ``node``, a
shell check's commands), and the run, signed with the user's runner key, says PASS. A run
records the folders of its checks' PATH, and each program a check started by name with the
folder it was found in and the executable, so whoever holds the key the run was signed with in
their gitaudit home (the run was made by a ``git audit run`` here) asks whether their own PATH,
cleaned as the checks' is, holds each of those folders and offers each program from its
folder. If not, the step's evidence does not bind here (the gate: UNKNOWN, run it again with
this PATH), nor is it carried into a new run (:mod:`gitaudit.run.recorder`). A run signed
elsewhere (CI, a teammate's runner) ran that machine's programs, which this PATH says nothing
about. What a PASS relied on is kept with it in the verdict memo and asked again on every
lookup (:mod:`gitaudit.gate.memo`).
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gitaudit.git.config_paths import filter_drivers
from gitaudit.ledger.records import CheckEntry, RunRecord
from gitaudit.pathsearch import Offers, Started, judge_offers
from gitaudit.places import home_dir

KEYS_FOLDER = "keys"  # gitaudit.crypto.keystore.KEYS_DIRNAME: where its key pairs live


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


def held_keys() -> frozenset[str] | None:
    """The fingerprints of the key pairs in the gitaudit home's ``keys`` folder (a ``NAME.pub``
    beside a ``NAME``), as :class:`gitaudit.crypto.pubkey.PublicKey` gives them; None when the
    folder or a public key in it cannot be read. Read here with the standard library: the
    signing code (and the ``subprocess`` it imports) stays out of every judgement."""
    folder = os.path.join(home_dir(), KEYS_FOLDER)
    try:
        names = set(os.listdir(folder))
    except FileNotFoundError:
        return frozenset()
    except OSError:  # a file, or not readable
        return None
    found = set()
    for name in sorted(names):
        if not name.endswith(".pub") or name.removesuffix(".pub") not in names:
            continue
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                blob = base64.b64decode(handle.read().split()[1], validate=True)
        except (OSError, ValueError, IndexError):  # UnicodeDecodeError and binascii's too
            return None
        digest = base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii")
        found.add("SHA256:" + digest.rstrip("="))
    return frozenset(found)


@dataclass
class Here:
    """This machine, asked once a judgement (or a run): the keys its gitaudit home holds, and
    what its PATH (cleaned for *repository*) offers. What a verdict relies on is collected for
    the verdict memo: the programs (*programs*) and the PATH folders (*folders*)."""

    repository: Sequence[str | os.PathLike[str]]
    programs: dict[Started, None] = field(default_factory=dict)
    folders: dict[str, None] = field(default_factory=dict)
    filters: dict[str, str] = field(default_factory=dict)  # the drivers relied on
    _fingerprints: frozenset[str] | None = None
    _offers: Offers | None = None
    _drivers: dict[str, dict[str, str]] = field(default_factory=dict)  # filter -> its driver

    def made_here(self, fingerprint: str | None) -> bool:
        """Whether the key of *fingerprint* (a run's signer) is one whose pair this user's
        gitaudit home holds: a run it signed was made by a ``git audit run`` here. A keys folder
        that cannot be read (a file, no permission, a public key that does not parse) holds
        every key: the run is asked (closed)."""
        if self._fingerprints is None:
            held = held_keys()
            if held is None:
                return True
            self._fingerprints = held
        return fingerprint in self._fingerprints

    @property
    def offers(self) -> Offers:
        if self._offers is None:
            self._offers = judge_offers(self.repository)
        return self._offers

    def binds(self, record: RunRecord, step: str) -> str | None:
        """Why *step*'s evidence in *record* does not bind here: the run was made here, and
        this PATH lacks a folder of its checks' PATH or does not offer a program one of the
        step's checks started by name; None when it binds (or was made elsewhere). Made here:
        the run names, in its signed record, a key whose pair this home holds (the evidence
        read was signed by a trusted runner; only that key's holder could name another)."""
        programs, path = started(record, step), record.path or ()
        if not (programs or path or record.filters) or not self.made_here(record.runner_key):
            return None
        differs = self.unconfigured(record.filters)
        if differs is not None:
            return (
                f"checked its files out through the content filter driver {differs}, which "
                "this user's global git configuration does not define"
            )
        folder = self.offers.lacks(path)
        if folder is not None:
            return f"had {folder} on its checks' PATH, which this PATH does not hold"
        missing = self.offers.unoffered(programs)
        if missing is not None:
            program, where, executable = missing
            return (
                f"ran {program!r} from {where or 'nowhere'} ({executable or 'not found'}), "
                "which this PATH does not offer"
            )
        self.programs.update(dict.fromkeys(programs))
        self.folders.update(dict.fromkeys(path))
        self.filters.update(record.filters)
        return None

    def unconfigured(self, recorded: Mapping[str, str]) -> str | None:
        """The first setting of *recorded* (a run's filter drivers, ``NAME.KEY`` -> value)
        that the global git configuration git reads here does not hold as recorded (nor the
        one it holds beyond them), as ``NAME.KEY=value``; None when every driver is the
        same. Whoever starts ``git audit run`` chooses which file git reads as the global
        configuration (``HOME``, ``XDG_CONFIG_HOME``, ``GIT_CONFIG_GLOBAL``): a driver of
        its own writes the bytes the checks read."""
        names = sorted({key.rpartition(".")[0] for key in recorded})
        for name in names:
            if name not in self._drivers:
                self._drivers[name] = filter_drivers([name])
        here = {k: v for name in names for k, v in self._drivers[name].items()}
        for key in sorted({*recorded, *here}):
            if recorded.get(key) != here.get(key):
                return f"{key}={recorded.get(key, '(none)')}"
        return None
