"""Workspace path globs in one canonical spelling, and whether two of them can meet.

Agents claim paths (:mod:`gitaudit.ledger.agents`) and rollbacks are scoped by them
(:mod:`gitaudit.git.restore`). A claim must not be dodged by spelling: ``src/../src/a.py``,
``./src/a.py``, ``src//a.py`` and (from inside ``src/``) ``a.py`` all name ``src/a.py``. So a
spec is made canonical once, lexically (no filesystem access, like :mod:`gitaudit.plan.paths`):
the caller's folder prefixed, ``.`` and ``..`` folded, Unicode in NFC (macOS spells names
decomposed), and then checked by the same lexical rule as the paths a plan names. The whole
work tree (``.``) is ``*``.

Matching is that of ``inputs`` (:func:`gitaudit.plan.inputs.matches_input`): ``fnmatch`` (``*``
and ``?`` also match ``/``), ``**/`` any depth, a pattern without wildcards naming everything
below it. :func:`overlap` decides exactly whether some path matches both of two such patterns
(the product of their automata, searched for a common accepted word), so two claims conflict
precisely when one file could belong to both.
"""

from __future__ import annotations

import posixpath
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from gitaudit.plan.inputs import matches_input
from gitaudit.plan.paths import check_relative_spec

WHOLE_TREE = "*"
MAX_CHAR = 0x10FFFF
_WILD = "*?["


class GlobError(ValueError):
    """A path spec that is not a workspace-relative glob; the message names it and why."""


def canonical(spec: str, cwd: str = "") -> str:
    """*spec* as a canonical workspace-relative glob; *cwd* is the caller's folder relative to
    the work tree's root ("" at the root). GlobError when it is absolute, empty or leaves the
    work tree."""
    if not isinstance(spec, str) or spec.strip() == "":
        raise GlobError(f"{spec!r} is empty")
    if spec.startswith("/"):
        raise GlobError(f"{spec!r} is absolute: give a path inside the work tree")
    joined = posixpath.join(cwd, spec) if cwd else spec
    folded = posixpath.normpath(unicodedata.normalize("NFC", joined))
    if folded == "..":
        raise GlobError(f"{spec!r} leaves the work tree")
    if folded == ".":
        return WHOLE_TREE
    problem = check_relative_spec(folded)
    if problem is not None:
        raise GlobError(problem.replace(repr(folded), repr(spec), 1))
    parts = folded.split("/")
    if ".git" in (p.lower() for p in parts):
        raise GlobError(f"{spec!r} names git's own folder, which is never part of the work tree")
    return folded


def fold(path: str, ignore_case: bool = False) -> str:
    """How a path or glob compares: NFC, and case-folded where the file system ignores case
    (``core.ignorecase``)."""
    path = unicodedata.normalize("NFC", path)
    return path.casefold() if ignore_case else path


def matches(pattern: str, path: str, ignore_case: bool = False) -> bool:
    """Whether *path* (a file in the work tree) falls under the canonical glob *pattern*."""
    return matches_input(fold(pattern, ignore_case), fold(path, ignore_case))


def touched(patterns: Iterable[str], paths: Iterable[str], ignore_case: bool = False) -> list[str]:
    """The *paths* that fall under any of *patterns*, in order."""
    globs = list(patterns)
    return [p for p in paths if any(matches(g, p, ignore_case) for g in globs)]


# ------------------------------------------------------------------------------- overlap

_Ranges = tuple[tuple[int, int], ...]  # sorted, disjoint, inclusive code point ranges
_ANY: _Ranges = ((0, MAX_CHAR),)


@dataclass
class _State:
    edges: list[tuple[_Ranges, int]]
    eps: list[int]


class _Nfa:
    """The automaton of one glob: ``accept`` is its last state."""

    def __init__(self) -> None:
        self.states: list[_State] = [_State([], [])]

    @property
    def last(self) -> int:
        return len(self.states) - 1

    def new(self) -> int:
        self.states.append(_State([], []))
        return self.last

    def char(self, ranges: _Ranges) -> None:
        here = self.last
        self.states[here].edges.append((ranges, self.new()))

    def star(self) -> None:
        here = self.last
        self.states[here].edges.append((_ANY, here))

    def literal(self, text: str) -> None:
        for ch in text:
            self.char(((ord(ch), ord(ch)),))


def _class(pattern: str, i: int) -> tuple[_Ranges, int] | None:
    """The character class opening at ``pattern[i] == '['`` as fnmatch reads it, and the index
    after it; None when it does not close (the '[' is then a literal)."""
    j = i + 1
    negate = j < len(pattern) and pattern[j] == "!"
    if negate:
        j += 1
    start = j
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 1
    if j >= len(pattern):
        return None
    body = pattern[start:j]
    ranges: list[tuple[int, int]] = []
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            lo, hi = ord(body[k]), ord(body[k + 2])
            if lo <= hi:
                ranges.append((lo, hi))
            k += 3
        else:
            ranges.append((ord(body[k]), ord(body[k])))
            k += 1
    merged = _normalise(ranges)
    return (_complement(merged) if negate else merged), j + 1


def _normalise(ranges: Iterable[tuple[int, int]]) -> _Ranges:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def _complement(ranges: _Ranges) -> _Ranges:
    out, nxt = [], 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CHAR:
        out.append((nxt, MAX_CHAR))
    return tuple(out)


def _compile(pattern: str) -> _Nfa:
    nfa = _Nfa()
    if not any(ch in pattern for ch in _WILD):
        # the path itself, or anything below it
        nfa.literal(pattern.rstrip("/"))
        end = nfa.last
        nfa.literal("/")
        nfa.star()
        below = nfa.last
        final = nfa.new()
        nfa.states[end].eps.append(final)
        nfa.states[below].eps.append(final)
        return nfa
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            before = nfa.last
            folders = nfa.new()  # any folders ...
            nfa.states[before].eps.append(folders)
            nfa.star()
            nfa.literal("/")
            nfa.states[before].eps.append(nfa.last)  # ... or none
            i += 3
            continue
        ch = pattern[i]
        if ch == "*":
            if nfa.states[nfa.last].edges and nfa.states[nfa.last].edges[-1][1] == nfa.last:
                i += 1  # ** outside "**/" is a single star
                continue
            nfa.star()
            i += 1
        elif ch == "?":
            nfa.char(_ANY)
            i += 1
        elif ch == "[" and (found := _class(pattern, i)) is not None:
            nfa.char(found[0])
            i = found[1]
        else:
            nfa.literal(ch)
            i += 1
    return nfa


def _closure(nfa: _Nfa, states: Iterable[int]) -> frozenset[int]:
    seen = set(states)
    todo = list(seen)
    while todo:
        for nxt in nfa.states[todo.pop()].eps:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return frozenset(seen)


# The shape of a path in a tree: components that are not empty, "." or "..", joined by "/".
# States: at the start of a component, after ".", after "..", inside a component (accepting).
_START, _DOT, _DOTDOT, _NAME = 0, 1, 2, 3
_SLASH, _PERIOD = ord("/"), ord(".")


def _path_step(state: int, kind: str) -> int | None:
    if kind == "/":
        return _START if state == _NAME else None
    if kind == ".":
        return {_START: _DOT, _DOT: _DOTDOT}.get(state, _NAME)
    return _NAME


def _inter(a: _Ranges, b: _Ranges) -> _Ranges:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _kinds(ranges: _Ranges) -> list[tuple[str, str]]:
    """(kind, a character of that kind) for each kind of path character in *ranges*: the
    separator, a period, any other character (not NUL)."""
    out = []

    def inside(c: int) -> bool:
        return any(lo <= c <= hi for lo, hi in ranges)

    if inside(_SLASH):
        out.append(("/", "/"))
    if inside(_PERIOD):
        out.append((".", "."))
    if inside(ord("x")):
        out.append(("x", "x"))
    else:
        for lo, hi in ranges:
            c = next((c for c in range(max(lo, 1), hi + 1) if c not in (_SLASH, _PERIOD)), None)
            if c is not None:
                out.append(("x", chr(c)))
                break
    return out


def witness(a: str, b: str, ignore_case: bool = False) -> str | None:
    """A shortest path (non-empty components, none ``.`` or ``..``) that both canonical globs
    match, or None when there is none: the product of their automata and of the shape of a
    path, searched breadth first."""
    left, right = _compile(fold(a, ignore_case)), _compile(fold(b, ignore_case))
    start = (_closure(left, [0]), _closure(right, [0]), _START)
    seen = {start: ""}
    queue = [start]
    while queue:
        nxt_queue = []
        for xs, ys, shape in queue:
            word = seen[(xs, ys, shape)]
            if left.last in xs and right.last in ys and shape == _NAME:
                return word
            for x in xs:
                for xr, xt in left.states[x].edges:
                    for y in ys:
                        for yr, yt in right.states[y].edges:
                            for kind, ch in _kinds(_inter(xr, yr)):
                                after = _path_step(shape, kind)
                                if after is None:
                                    continue
                                key = (_closure(left, [xt]), _closure(right, [yt]), after)
                                if key not in seen:
                                    seen[key] = word + ch
                                    nxt_queue.append(key)
        queue = nxt_queue
    return None


def overlap(a: str, b: str, ignore_case: bool = False) -> bool:
    """Whether some path matches both canonical globs *a* and *b* (decided exactly)."""
    return witness(a, b, ignore_case) is not None
