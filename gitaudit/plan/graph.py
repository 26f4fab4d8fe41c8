"""The dependency graph of a plan: cycles, topological order, and renderings.

Edges point from a step to each step named in its ``depends_on`` clauses (every alternative of an
OR clause is an edge). All functions are iterative, so plans of thousands of steps cannot exhaust
the recursion limit, and linear in steps plus edges.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping, Sequence
from typing import Literal

from gitaudit.plan.model import Plan, StepId

Adjacency = Mapping[StepId, Sequence[StepId]]
GraphFormat = Literal["mermaid", "dot", "text"]


def adjacency(plan: Plan) -> dict[StepId, list[StepId]]:
    """step -> its dependency ids (only ids that exist in the plan)."""
    known = set(plan.step_ids)
    return {s.id: [d for d in s.dependency_ids() if d in known] for s in plan.steps}


def find_cycles(graph: Adjacency) -> list[list[StepId]]:  # noqa: C901 (one algorithm: Tarjan)
    """One cycle per strongly connected component that has one, each listed in dependency order.

    A cycle ``[a, b, c]`` means a depends on b, b on c and c on a. Uses Tarjan's algorithm
    iteratively, then walks each component to name one concrete cycle inside it.
    """
    index: dict[StepId, int] = {}
    low: dict[StepId, int] = {}
    on_stack: set[StepId] = set()
    stack: list[StepId] = []
    components: list[list[StepId]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work: list[tuple[StepId, int]] = [(root, 0)]
        while work:
            node, child_i = work.pop()
            if child_i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            children = graph.get(node, ())
            if child_i < len(children):
                work.append((node, child_i + 1))
                child = children[child_i]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                self_loop = node in graph.get(node, ())
                if len(component) > 1 or self_loop:
                    components.append(component)
    order = {n: i for i, n in enumerate(graph)}
    return [_cycle_in(graph, set(c), min(c, key=order.__getitem__)) for c in components]


def _cycle_in(graph: Adjacency, members: set[StepId], start: StepId) -> list[StepId]:
    """A concrete cycle through *start* inside one strongly connected component."""
    path = [start]
    position = {start: 0}
    node = start
    while True:
        nxt = next(c for c in graph.get(node, ()) if c in members)
        if nxt in position:
            return path[position[nxt] :]
        position[nxt] = len(path)
        path.append(nxt)
        node = nxt


def topological_order(plan: Plan) -> list[StepId]:
    """Steps with every dependency before its dependants; ties keep file order (Kahn's algorithm).

    Steps on a cycle are appended at the end in file order, so callers always get every step.
    """
    graph = adjacency(plan)
    waiting = {sid: len(set(deps)) for sid, deps in graph.items()}
    dependants: dict[StepId, list[StepId]] = {sid: [] for sid in graph}
    for sid, deps in graph.items():
        for dep in set(deps):
            dependants[dep].append(sid)
    position = {sid: i for i, sid in enumerate(graph)}
    ready = [(position[s], s) for s, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order: list[StepId] = []
    while ready:
        _, sid = heapq.heappop(ready)
        order.append(sid)
        for nxt in dependants[sid]:
            waiting[nxt] -= 1
            if waiting[nxt] == 0:
                heapq.heappush(ready, (position[nxt], nxt))
    if len(order) < len(graph):
        placed = set(order)
        order.extend(s for s in graph if s not in placed)
    return order


def _mermaid_id(sid: StepId) -> str:
    return "s_" + "".join(ch if ch.isalnum() else "_" for ch in sid)


def _escape(text: str) -> str:
    """A label on one line: a title's line break (``\\r`` too, which markdown and dot also
    end a line at) would end the node, and in a report the fence around the graph."""
    return " ".join(text.replace('"', "'").splitlines())


def render(plan: Plan, fmt: GraphFormat, states: Mapping[StepId, str] | None = None) -> str:  # noqa: C901, PLR0912 (one renderer per format)
    """The graph as mermaid, Graphviz dot or indented text. Arrows run prerequisite -> dependant.

    *states* (step -> verified/ready/blocked/failed/unknown/expired/pending) colours the nodes.
    """
    states = states or {}
    lines: list[str] = []
    order = topological_order(plan)
    steps = {s.id: s for s in plan.steps}
    if fmt == "mermaid":
        lines.append("flowchart LR")
        for sid in order:
            step = steps[sid]
            label = _escape(f"{sid}: {step.title}" if step.title else sid)
            state = states.get(sid)
            lines.append(f'  {_mermaid_id(sid)}["{label}"]' + (f":::{state}" if state else ""))
        for sid in order:
            for ci, clause in enumerate(steps[sid].depends_on):
                for alt in clause.alternatives:
                    if alt not in steps:
                        continue
                    arrow = f"-. any_of {ci + 1} .->" if clause.is_any_of else "-->"
                    lines.append(f"  {_mermaid_id(alt)} {arrow} {_mermaid_id(sid)}")
        lines.extend(f"  classDef {name} {style}" for name, style in _MERMAID_STYLES.items())
        return "\n".join(lines) + "\n"
    if fmt == "dot":
        lines.append(f'digraph "{_escape(plan.name)}" {{')
        lines.append("  rankdir=LR; node [shape=box, style=rounded];")
        for sid in order:
            step = steps[sid]
            label = _escape(f"{sid}: {step.title}" if step.title else sid)
            color = _DOT_COLOURS.get(states.get(sid, ""), "")
            extra = f', style="rounded,filled", fillcolor="{color}"' if color else ""
            lines.append(f'  "{_escape(sid)}" [label="{label}"{extra}];')
        for sid in order:
            for ci, clause in enumerate(steps[sid].depends_on):
                for alt in clause.alternatives:
                    if alt in steps:
                        style = (
                            f' [style=dashed, label="any_of {ci + 1}"]' if clause.is_any_of else ""
                        )
                        lines.append(f'  "{_escape(alt)}" -> "{_escape(sid)}"{style};')
        lines.append("}")
        return "\n".join(lines) + "\n"
    for sid in order:
        step = steps[sid]
        state = f" [{states[sid]}]" if sid in states else ""
        lines.append(f"{sid}{': ' + step.title if step.title else ''}{state}")
        for clause in step.depends_on:
            kind = "needs one of" if clause.is_any_of else "needs"
            lines.append(f"    {kind} {', '.join(clause.alternatives)}")
    return "\n".join(lines) + "\n"


_MERMAID_STYLES = {
    "verified": "fill:#c8f7c5,stroke:#2e7d32",
    "ready": "fill:#fff3c4,stroke:#f9a825",
    "blocked": "fill:#eeeeee,stroke:#9e9e9e",
    "failed": "fill:#ffcdd2,stroke:#c62828",
    "unknown": "fill:#e1bee7,stroke:#6a1b9a",
    "expired": "fill:#ffe0b2,stroke:#ef6c00",
    "pending": "fill:#ffffff,stroke:#616161",
}
_DOT_COLOURS = {
    "verified": "#c8f7c5",
    "ready": "#fff3c4",
    "blocked": "#eeeeee",
    "failed": "#ffcdd2",
    "unknown": "#e1bee7",
    "expired": "#ffe0b2",
}


Clauses = Mapping[StepId, Sequence[tuple[Sequence[StepId], bool]]]
"""step -> its ``depends_on`` clauses, each as (alternatives, is ``any_of``): the graph in a form
both a :class:`Plan` and a sealed contract (:mod:`gitaudit.plan.compare`) give."""


def clauses_of(plan: Plan) -> dict[StepId, list[tuple[Sequence[StepId], bool]]]:
    return {s.id: [(c.alternatives, c.is_any_of) for c in s.depends_on] for s in plan.steps}


def optional_steps(plan: Plan) -> set[StepId]:
    """Steps the goal can do without: alternatives of OR clauses (and what only they need).

    A step is optional when every step that depends on it names it only inside an ``any_of``
    clause with other alternatives, or is itself optional; sinks (steps nothing depends on) are
    never optional. Whether a particular optional step is needed then depends on which
    alternative gets verified; requirement coverage still applies to the verified set.
    """
    return optional_among(clauses_of(plan))


def optional_among(graph: Clauses) -> set[StepId]:
    """:func:`optional_steps` of a graph given as its clauses."""
    dependants: dict[StepId, list[tuple[StepId, bool]]] = {sid: [] for sid in graph}
    for sid, clauses in graph.items():
        for alternatives, is_any_of in clauses:
            alternative = is_any_of and len(alternatives) > 1
            for alt in alternatives:
                if alt in dependants:
                    dependants[alt].append((sid, alternative))
    optional: set[StepId] = set()
    changed = True
    while changed:
        changed = False
        for sid, users in dependants.items():
            if sid in optional or not users:
                continue
            if all(is_alt or user in optional for user, is_alt in users):
                optional.add(sid)
                changed = True
    return optional


def viable_without(graph: Clauses, excluded: Collection[StepId]) -> set[StepId]:
    """The steps that can still be verified when the *excluded* ones never are: a step is
    viable when each of its clauses has a viable alternative (steps on a cycle never are, and
    an alternative the graph does not hold never is). Linear in steps plus edges."""
    users: dict[StepId, list[tuple[StepId, int]]] = {sid: [] for sid in graph}
    waiting: dict[StepId, int] = {}
    ready: list[StepId] = []
    for sid, clauses in graph.items():
        waiting[sid] = len(clauses)
        for ci, (alternatives, _) in enumerate(clauses):
            for alt in alternatives:
                if alt in users:
                    users[alt].append((sid, ci))
        if not clauses and sid not in excluded:
            ready.append(sid)
    met: set[tuple[StepId, int]] = set()
    viable: set[StepId] = set()
    while ready:
        sid = ready.pop()
        viable.add(sid)
        for user, ci in users[sid]:
            if (user, ci) in met:
                continue
            met.add((user, ci))
            waiting[user] -= 1
            if waiting[user] == 0 and user not in excluded:
                ready.append(user)
    return viable
