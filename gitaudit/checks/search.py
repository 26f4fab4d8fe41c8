"""A regular-expression search bounded in time: the ``pattern`` of a ``regex`` check and the
``output_regex`` of a behavioural one.

Python's ``re`` cannot be interrupted: a pattern with nested repetition (``^(a+)+$``) over a
few dozen bytes the agent wrote backtracks for longer than anyone waits, holding the run (and
the interpreter lock) with it. So the search runs in a child interpreter that is killed at the
check's timeout, and a search that did not finish is an unknown outcome, like a check that timed
out. The child is isolated (``-I -S``: no environment, no site packages), reads the pattern and
the text on stdin, and answers with its exit code.

A child costs about 10 ms, more than most checks' own process; so a search that cannot take long
runs here: a text of at most :data:`HERE_TEXT` bytes and a pattern with at most one repetition
(``+``, ``*``, ``{m,n}``), none inside another or over an alternation, and no backreference
(:func:`_plain`). Its cost is then at most quadratic in the text (each start position, one
repetition's backtracking): a few milliseconds at that size. Anything else goes to the child.
"""

from __future__ import annotations

import re
import subprocess
import sys
from re import _constants as _c  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]
from typing import Any

from gitaudit.errors import CheckError

HERE_TEXT = 4096
"""The longest text searched in this process (with a plain pattern)."""

_CHILD = """
import re, sys
data = sys.stdin.buffer.read()
size = int.from_bytes(data[:8], "big")
pattern = data[8 : 8 + size].decode("utf-8", "surrogatepass")
text = data[8 + size :].decode("utf-8", "surrogatepass")
sys.exit(0 if re.search(pattern, text, re.MULTILINE) else 1)
"""


def search(pattern: str, text: str, timeout: float) -> bool | None:
    """Whether *pattern* (``re.MULTILINE``) matches somewhere in *text*; None when the search
    did not finish within *timeout* seconds."""
    try:
        re.compile(pattern)
    except re.error as exc:  # validation compiles it first; never a traceback regardless
        raise CheckError(f"the pattern /{pattern}/ does not compile: {exc}") from exc
    if len(text) <= HERE_TEXT and _plain(pattern):
        return re.search(pattern, text, re.MULTILINE) is not None
    encoded = pattern.encode("utf-8", "surrogatepass")
    payload = len(encoded).to_bytes(8, "big") + encoded + text.encode("utf-8", "surrogatepass")
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _CHILD],
            input=payload,
            capture_output=True,
            timeout=timeout,
            check=False,
            env={},
        )
    except subprocess.TimeoutExpired:
        return None
    if done.returncode not in (0, 1):
        why = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        raise CheckError(f"the search for /{pattern}/ failed: {why[0]}")
    return done.returncode == 0


def _plain(pattern: str) -> bool:
    """Whether *pattern* holds at most one repetition, none nested in another or over an
    alternation, and no backreference: its search cannot backtrack more than quadratically."""
    try:
        parsed = _parser.parse(pattern, re.MULTILINE)
    except Exception:  # whatever the parser makes of it: the child searches it
        return False
    count = _repetitions(parsed, inside=False)
    return count is not None and count <= 1


_REPEATS = (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", _c.MAX_REPEAT))
_BACKREFS = (_c.GROUPREF, _c.GROUPREF_EXISTS)


def _repetitions(items: Any, inside: bool) -> int | None:
    """The repetitions in the parsed *items*; None for one inside another (*inside*: within a
    repetition), an alternation inside one, or a backreference."""
    total = 0
    for op, av in items:
        if op in _BACKREFS or (op == _c.BRANCH and inside):
            return None
        repeats = op in _REPEATS and av[1] > 1
        if repeats and inside:
            return None
        for sub in _children(op, av):
            below = _repetitions(sub, inside or repeats)
            if below is None:
                return None
            total += below
        total += repeats
    return total


def _children(op: Any, av: Any) -> list[Any]:
    """The parsed sequences inside one parsed item."""
    if op in _REPEATS:
        return [av[2]]
    if op == _c.BRANCH:
        return list(av[1])
    if op == _c.SUBPATTERN:
        return [av[-1]]
    if op in (_c.ASSERT, _c.ASSERT_NOT):
        return [av[1]]
    if op == getattr(_c, "ATOMIC_GROUP", None):
        return [av]
    return []
