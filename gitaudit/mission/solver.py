"""Branch and bound over the planning space (:class:`_Solver`).

The exact cheapest-route search, the bounded enumeration of the best routes and the greedy
fallback, with h-max and LM-cut lower bounds, under a deterministic work budget whose
exhaustion raises :class:`_OutOfBudget`. Private to the package: :mod:`gitaudit.mission.search`
is its public face.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from typing import Final

from gitaudit.mission.space import _Alts, _Goal, _Space

_Cand = tuple[float, int, frozenset[int]]  # cost, size, steps
_Part = tuple[frozenset[_Alts], frozenset[int], float]  # open clauses, their cone, lower bound


class _OutOfBudget(Exception):
    pass


class _Solver:
    """Branch and bound over OR clauses, with independent parts split and sub-problems memoised.

    A sub-problem is a set ``C`` of open clauses (each still needs one of its alternatives)
    under a chosen set ``T``. Its *cone* ``D`` is every step that could be added to serve it:
    the alternatives of ``C`` and, transitively, the alternatives of their clauses that ``T``
    does not satisfy. ``(C, D)`` determines the sub-problem completely (a clause of a step in
    ``D`` is satisfied by ``T`` exactly when it has an alternative outside ``D``), so results
    are memoised on it. Clauses whose cones are disjoint are independent: they are solved
    separately and their solutions combine by union, which stays minimal.

    Branching takes the most downstream open clause and tries each alternative together with
    everything it forces (single-alternative clauses, transitively); every inclusion-minimal
    solution lies on some branch, so nothing is lost. Each sub-problem keeps its ``k`` best
    minimal solutions (all of them when ``k`` is ``None``) at or under an upper bound, and
    prunes with admissible lower bounds: h-max (the cheapest alternative of a clause plus,
    recursively, the dearest clause it still needs) while no upper bound is known, LM-cut once
    one is. With ``k == 1`` this is an exact branch and bound for the cheapest route.
    """

    def __init__(self, space: _Space, goal: _Goal, k: int | None, budget: float) -> None:
        self.space = space
        self.goal = goal
        self.k = k
        self.budget = budget
        self.work = 0
        self.truncated = False
        self.memo: dict[tuple[frozenset[_Alts], frozenset[int]], tuple[float, list[_Cand]]] = {}
        self.bounds: dict[tuple[frozenset[_Alts], frozenset[int]], tuple[float, bool]] = {}

    def tick(self, units: int = 1) -> None:
        self.work += units
        if self.work > self.budget:
            raise _OutOfBudget

    def close(self, chosen: set[int], seeds: Iterable[int]) -> list[int]:
        """Add *seeds* and every step they force (single-alternative clauses) to *chosen*."""
        clauses = self.space.clauses
        added: list[int] = []
        stack = [s for s in seeds if s not in chosen]
        while stack:
            x = stack.pop()
            if x in chosen:
                continue
            chosen.add(x)
            added.append(x)
            for clause in clauses[x]:
                if len(clause) == 1 and clause[0] not in chosen:
                    stack.append(clause[0])
        return added

    def open_clauses(
        self, previous: Iterable[_Alts], added: Iterable[int], chosen: frozenset[int]
    ) -> frozenset[_Alts]:
        clauses = self.space.clauses
        out = {c for c in previous if chosen.isdisjoint(c)}
        for x in added:
            for c in clauses[x]:
                if len(c) > 1 and chosen.isdisjoint(c):
                    out.add(c)
        return frozenset(out)

    def start(self) -> tuple[frozenset[int], frozenset[_Alts]]:
        chosen: set[int] = set()
        seeds = list(self.goal.units) + [c[0] for c in self.goal.clauses if len(c) == 1]
        added = self.close(chosen, seeds)
        multi = [c for c in self.goal.clauses if len(c) > 1]
        frozen = frozenset(chosen)
        return frozen, self.open_clauses(multi, added, frozen)

    def prune(self, cands: Iterable[_Cand]) -> list[_Cand]:
        """Drop duplicates and dominated candidates; cheapest first, then fewest steps."""
        unique = {c[2]: c for c in cands}
        self.tick(len(unique) // 16)
        kept: list[_Cand] = []
        for c in sorted(unique.values(), key=_order_key):
            if not any(o[2] <= c[2] for o in kept):
                kept.append(c)
        return kept

    def solve(
        self,
        open_: frozenset[_Alts],
        chosen: frozenset[int],
        ub: float,
        parts: list[_Part] | None = None,
    ) -> list[_Cand]:
        """The best solutions of *open_* under *chosen* costing at most *ub*."""
        if not open_:
            return [_EMPTY]
        if parts is None:
            parts = self.components(open_, chosen)
        total = math.fsum(lb for _, _, lb in parts)
        if not _within(total, ub):
            return []
        if ub < math.inf:  # a stronger bound pays only when it can prune
            stronger: list[_Part] = []
            for c, d, lb in parts:
                target = ub - (total - lb)
                strong = self.strong_bound(c, d, chosen, target)
                if strong > lb:
                    total += strong - lb
                    lb = strong
                if not _within(total, ub):
                    return []
                stronger.append((c, d, lb))
            parts = stronger
        lists: list[list[_Cand]] = []
        for part, cone, lb in sorted(parts, key=lambda p: -p[2]):
            cands = self.component(part, cone, chosen, ub - (total - lb))
            if not cands:
                return []
            total += cands[0][0] - lb
            lists.append(cands)
        return self.product(lists, ub)

    def components(self, open_: frozenset[_Alts], chosen: frozenset[int]) -> list[_Part]:  # noqa: C901, PLR0912 (one algorithm: union-find, then h-max)
        """Split *open_* into independent parts: (clauses, cone, lower bound) each.

        Two clauses interact when their cones share a step, which is exactly when they are
        connected in the undirected graph of the steps in all the cones (every edge of that
        graph lies inside some clause's cone). The lower bound of a part is its largest h-max
        clause cost: the cheapest alternative's cost plus, recursively, the dearest of the
        clauses that alternative still needs.
        """
        clauses = self.space.clauses
        cost = self.space.cost
        parent: dict[int, int] = {}

        def find(x: int) -> int:
            root = x
            while parent[root] != root:
                root = parent[root]
            while parent[x] != root:
                parent[x], x = root, parent[x]
            return root

        stack = [a for c in open_ for a in c]
        while stack:
            x = stack.pop()
            if x in parent:
                continue
            parent[x] = x
            for dep in clauses[x]:
                if chosen.isdisjoint(dep):
                    stack.extend(dep)
        self.tick(1 + len(parent) // 8)
        region = sorted(parent)
        hmax: dict[int, float] = {}
        for x in region:  # dependencies come first in topological order
            need = 0.0
            for dep in clauses[x]:
                if chosen.isdisjoint(dep):
                    need = max(need, min(hmax[a] for a in dep))
                    rx = find(x)
                    for a in dep:
                        ra = find(a)
                        if ra != rx:
                            parent[ra] = rx
            hmax[x] = cost[x] + need
        for c in open_:
            rc = find(c[0])
            for a in c[1:]:
                ra = find(a)
                if ra != rc:
                    parent[ra] = rc
        grouped: dict[int, tuple[list[_Alts], list[int], list[float]]] = {}
        for c in open_:
            group = grouped.setdefault(find(c[0]), ([], [], [0.0]))
            group[0].append(c)
            group[2][0] = max(group[2][0], min(hmax[a] for a in c))
        for x in region:
            grouped[find(x)][1].append(x)
        return [(frozenset(c), frozenset(steps), lb[0]) for c, steps, lb in grouped.values()]

    def strong_bound(
        self, open_: frozenset[_Alts], cone: frozenset[int], chosen: frozenset[int], target: float
    ) -> float:
        """LM-cut for one part, memoised; it may stop early once it exceeds *target*."""
        key = (open_, cone)
        known = self.bounds.get(key)
        if known is not None and (known[1] or not _within(known[0], target)):
            return known[0]
        bound, complete = self.lmcut(sorted(open_), cone, chosen, target)
        self.bounds[key] = (bound, complete)
        return bound

    def lmcut(  # noqa: C901, PLR0912, PLR0915 (one algorithm: LM-cut, a hot loop)
        self, goal: Sequence[_Alts], cone: frozenset[int], chosen: frozenset[int], target: float
    ) -> tuple[float, bool]:
        """The LM-cut lower bound on the cost of satisfying *goal* with steps of *cone*.

        The problem is a delete-free planning task: each step is an action whose preconditions
        are its unsatisfied clauses and which achieves every clause naming it. LM-cut (Helmert
        and Domshlak, 2009) repeatedly takes the h-max justification graph, finds a cut of
        actions every plan must use, charges the cheapest of them and discounts the rest; the
        sum of the charges never exceeds the cost of any solution. Plans are DAGs with
        alternatives earlier in topological order, so each h-max pass is one linear sweep.
        Returns the bound and whether it is final (false: stopped once above *target*).
        """
        clauses = self.space.clauses
        steps = sorted(cone)
        local = {x: i for i, x in enumerate(steps)}
        fact_of: dict[_Alts, int] = {}
        achievers: list[list[int]] = []

        def fact(c: _Alts) -> int:
            f = fact_of.get(c)
            if f is None:
                f = fact_of[c] = len(achievers)
                achievers.append([local[a] for a in c])
            return f

        pre = [[fact(c) for c in clauses[x] if chosen.isdisjoint(c)] for x in steps]
        goal_facts = [fact(c) for c in goal]
        effects: list[list[int]] = [[] for _ in steps]
        for f, alts in enumerate(achievers):
            for i in alts:
                effects[i].append(f)
        remaining = [self.space.cost[x] for x in steps]
        last = [max(alts) for alts in achievers]  # a fact's value settles after its last achiever
        n = len(steps)
        n_facts = len(achievers)
        hstep = [0.0] * n
        hfact = [-1.0] * len(achievers)
        pcf = [-1] * n
        start = 0  # steps before this index kept their h-max value since the previous round
        total = 0.0
        for _ in range(n + 1):
            self.tick(1 + n // 16)
            get = hstep.__getitem__
            for i in range(start, n):
                top = -1.0
                arg = -1
                for f in pre[i]:
                    v = hfact[f]
                    if v < 0.0:
                        v = hfact[f] = min(map(get, achievers[f]))
                    if v > top:
                        top = v
                        arg = f
                pcf[i] = arg
                hstep[i] = remaining[i] + top if arg >= 0 else remaining[i]
            goal_value = -1.0
            goal_pcf = -1
            for f in goal_facts:
                v = hfact[f]
                if v < 0.0:
                    v = hfact[f] = min(map(get, achievers[f]))
                if v > goal_value:
                    goal_value, goal_pcf = v, f
            if goal_value <= _EPSILON:
                break
            zone = [False] * n_facts  # facts that reach the goal through zero-cost edges
            zone[goal_pcf] = True
            todo = [goal_pcf]
            while todo:
                for a in achievers[todo.pop()]:
                    p = pcf[a]
                    if p >= 0 and not zone[p] and remaining[a] <= _EPSILON:
                        zone[p] = True
                        todo.append(p)
            before = [False] * n_facts  # facts reached from the start avoiding the zone
            cut: list[int] = []
            for i in range(n):
                p = pcf[i]
                if p < 0 or before[p]:
                    crosses = False
                    for f in effects[i]:
                        if zone[f]:
                            crosses = True
                        else:
                            before[f] = True
                    if crosses:
                        cut.append(i)
            if not cut:
                break
            charge = min(remaining[i] for i in cut)
            if charge <= _EPSILON:
                break
            total += charge
            for i in cut:
                remaining[i] -= charge
            if not _within(total, target):
                return total, False
            start = cut[0]  # cut is in index order: everything before it is unchanged
            for f, top_achiever in enumerate(last):
                if top_achiever >= start:
                    hfact[f] = -1.0
        return total, True

    def component(
        self, open_: frozenset[_Alts], cone: frozenset[int], chosen: frozenset[int], ub: float
    ) -> list[_Cand]:
        key = (open_, cone)
        entry = self.memo.get(key)
        if entry is not None:
            used, listed = entry
            if ub <= used or (self.k is not None and len(listed) >= self.k):
                return [c for c in listed if _within(c[0], ub)]
        self.tick()
        cost = self.space.cost
        branch = min(open_, key=_branch_key)
        options: list[tuple[float, float, int, int, list[int], frozenset[int], list[_Part]]] = []
        for alt in branch:
            trial = set(chosen)
            added = self.close(trial, (alt,))
            grown = frozenset(trial)
            add_cost = math.fsum(cost[i] for i in added)
            rest = self.open_clauses(open_, added, grown)
            parts = self.components(rest, grown) if rest else []
            estimate = add_cost + math.fsum(lb for _, _, lb in parts)
            options.append((estimate, add_cost, len(added), alt, added, grown, parts))
        options.sort(key=lambda o: o[:4])
        kept: list[_Cand] = []
        for estimate, add_cost, size, _, added, grown, parts in options:
            full = self.k is not None and len(kept) >= self.k
            threshold = min(ub, kept[-1][0]) if full else ub
            if not _within(estimate, threshold):
                break  # options are sorted by their lower bound: no later one fits either
            rest = frozenset(c for part in parts for c in part[0])
            subs = self.solve(rest, grown, threshold - add_cost, parts)
            base = frozenset(added)
            self.tick(len(subs))
            cands = kept + [(add_cost + c, size + n, base | ids) for c, n, ids in subs]
            kept = self.prune(cands)
            if self.k is not None and len(kept) > self.k:
                kept = kept[: self.k]
        if self.k is not None and len(kept) >= self.k:
            self.truncated = True
        self.memo[key] = (ub, kept)
        return kept

    def product(self, lists: Sequence[list[_Cand]], ub: float) -> list[_Cand]:
        """The best unions of one candidate per independent part (their sets are disjoint)."""
        result = lists[0]
        for other in lists[1:]:
            pairs = [
                (a[0] + b[0], a[1] + b[1], ia, ib)
                for ia, a in enumerate(result)
                for ib, b in enumerate(other)
                if _within(a[0] + b[0], ub)
            ]
            self.tick(len(pairs) // 4 + 1)
            if self.k is not None and len(pairs) > self.k:
                self.truncated = True
                pairs = heapq.nsmallest(self.k, pairs)
            else:
                pairs.sort()
            result = [(cost, size, result[ia][2] | other[ib][2]) for cost, size, ia, ib in pairs]
        return result

    def run(self) -> list[frozenset[int]]:
        """The best routes, each including the steps the goal forces."""
        chosen, open_ = self.start()
        return [chosen | c[2] for c in self.solve(open_, chosen, math.inf)]

    def greedy(self) -> frozenset[int]:
        """A valid route, not necessarily the cheapest, found without backtracking.

        It follows the branching of the exact search but commits, at each OR clause, to the
        alternative with the lowest estimate (its forced cost plus the h-max bound of what
        remains open). It ignores the work budget, and costs one bound per alternative.
        """
        self.budget = math.inf
        chosen, open_ = self.start()
        cost = self.space.cost
        while open_:
            branch = min(open_, key=_branch_key)
            best: tuple[float, float, int, frozenset[int], frozenset[_Alts]] | None = None
            for alt in branch:
                trial = set(chosen)
                added = self.close(trial, (alt,))
                grown = frozenset(trial)
                rest = self.open_clauses(open_, added, grown)
                add_cost = math.fsum(cost[i] for i in added)
                estimate = add_cost + math.fsum(lb for _, _, lb in self.components(rest, grown))
                option = (estimate, add_cost, alt, grown, rest)
                if best is None or option[:3] < best[:3]:
                    best = option
            assert best is not None
            chosen, open_ = best[3], best[4]
        return chosen


_EMPTY: Final[_Cand] = (0.0, 0, frozenset())
_EPSILON: Final = 1e-12


def _order_key(c: _Cand) -> tuple[float, int]:
    return (c[0], c[1])


def _branch_key(c: _Alts) -> tuple[int, int, _Alts]:
    """Branch on the most downstream clause first (then the fewest alternatives).

    Deciding dependants before their prerequisites lets each decision settle which upstream
    clauses are needed at all; measured on random layered plans it expands an order of
    magnitude fewer sub-problems than upstream-first.
    """
    return (-c[0], len(c), c)


def _within(cost: float, bound: float) -> bool:
    """``cost <= bound`` up to float rounding (sums of the same costs in another order)."""
    return cost <= bound + 1e-9 * max(1.0, abs(bound))
