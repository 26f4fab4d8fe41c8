"""Crashes found by fuzzing that are not fixed yet: one registry for the tests and the harnesses.

Each entry names an exception type and the innermost gitaudit function it escapes from. The
property tests (``tests/fuzz``) and the atheris harnesses (``fuzz/``) tolerate exactly these
signatures so that they keep looking for *new* crashes; every entry has a minimal reproducer in
``tests/fuzz/test_known_bugs.py`` marked ``xfail(strict=True)``. When a bug is fixed its reproducer
XPASSes, the strict marker turns that into a failure, and the entry here must be deleted.

Set ``GITAUDIT_FUZZ_STRICT=1`` to tolerate nothing (every known bug is reported as a crash again).

No test-framework imports: the atheris harnesses load this too.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[2] / "gitaudit"


@dataclass(frozen=True)
class KnownBug:
    name: str
    types: tuple[type[BaseException], ...]
    # "relative/path.py:function" of the innermost gitaudit frame the exception escapes from
    where: frozenset[str]
    summary: str
    # when set, the second innermost gitaudit frame (the caller of *where*) must be one of these
    caller: frozenset[str] | None = None


KNOWN_BUGS: tuple[KnownBug, ...] = ()  # none open: every crash found so far is fixed

# Fixed since they were found (commit 0c578f7); their reproducers are now regression tests in
# tests/fuzz/test_fuzz_regressions.py: plan-deep-nesting, plan-surrogate-key, plan-path-key-int,
# plan-duration-digits, contract-not-canonicalisable, ledger-json-deep-nesting,
# gate-malformed-run-fields, gate-stale-run-unreadable.


def gitaudit_frames(exc: BaseException) -> list[str]:
    """``relative/path.py:function`` of every traceback frame inside the gitaudit package,
    outermost first."""
    found = []
    for frame in traceback.extract_tb(exc.__traceback__):
        path = Path(frame.filename).resolve()
        if path.is_relative_to(_PACKAGE):
            found.append(f"{path.relative_to(_PACKAGE).as_posix()}:{frame.name}")
    return found


def known_bug(exc: BaseException, *, honour_strict: bool = True) -> KnownBug | None:
    """The registered bug *exc* is an instance of, or None (a new crash, or strict mode)."""
    if honour_strict and os.environ.get("GITAUDIT_FUZZ_STRICT"):
        return None
    frames = gitaudit_frames(exc)
    where = frames[-1] if frames else None
    caller = frames[-2] if len(frames) > 1 else None
    for bug in KNOWN_BUGS:
        if not isinstance(exc, bug.types) or where not in bug.where:
            continue
        if bug.caller is None or caller in bug.caller:
            return bug
    return None
