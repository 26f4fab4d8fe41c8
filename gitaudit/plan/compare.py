"""Strengthening and weakening: how a new contract relates to the sealed one.

A new contract *strengthens* (or keeps) the sealed one when it is a structural superset: every
sealed requirement (at the same or a higher priority), coverage link, dependency clause (or a
stricter one: a clause whose alternatives are a subset), required output, output check and step
check is still there unchanged, in its sealed order, with no check that runs a program added
before it (:func:`_order`); evidence does not live longer (``valid_for``); retries are not
more generous (``max_attempts``); a step's ``inputs`` are not narrowed; no required tool is
dropped; a new step declares no ignored path the sealed contract did not (it is linked for every
step: :func:`_opened_by_new_step`); and every step a PASS had to verify (and, for each
mandatory requirement, one of the steps that covered it) still has to be verified: added steps,
``any_of`` routes or coverage that let a PASS go around one are a weakening (:func:`_routes`).
Anything else sealed that is removed or changed is a *weakening*.

Reconciliation is a way to PASS without a step's verify checks (an unknown outcome of a
non-idempotent step settled by an observation or by its readback checks), so it runs the other
way: making a step non-idempotent, adding or changing a readback check, removing one while
another sealed one is left (every readback check must pass to settle the step), or running the
sealed ones in another order (:func:`_readback_order`), or adding to a step that is not
idempotent a check that can end unknown (:func:`_unknown_opens_reconciliation`), opens that way
further and is a weakening; making a step idempotent, or removing its readback checks, closes it
and strengthens.
Cosmetic changes (title, task, cost) are reported as neutral. See docs/sealing.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from gitaudit.frozen import frozen
from gitaudit.plan import exposure
from gitaudit.plan.digest import canonical
from gitaudit.plan.graph import optional_among, viable_without
from gitaudit.plan.load import step_key

ChangeKind = Literal["weakened", "strengthened", "neutral"]
_PRIORITY = {"may": 0, "should": 1, "must": 2}


@frozen
class Change:
    kind: ChangeKind
    where: str  # e.g. "step 3 verify" or "requirement REQ-1"
    message: str
    # a change of a way to reconcile (idempotent, readback): earlier versions of gitaudit
    # classified these the other way round (see gitaudit.ledger.plansref._weakens)
    reconciliation: bool = False
    # the requirement id the change is about (a requirement itself, or a step's coverage of it):
    # whose it is (the request's, or the plan's own) decides who may make it
    requirement: str | None = None
    # how gitaudit listed this change among a seal's strengthenings before it counted as a
    # weakening, when not as render() (see gitaudit.ledger.plansref._weakens)
    listed_as: str | None = None

    def render(self) -> str:
        return f"{self.where}: {self.message}"


@frozen
class Comparison:
    changes: tuple[Change, ...]

    @property
    def weakenings(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.kind == "weakened")

    @property
    def strengthenings(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.kind == "strengthened")

    @property
    def weakened(self) -> bool:
        return bool(self.weakenings)

    def summary(self) -> str:
        w, s = len(self.weakenings), len(self.strengthenings)
        n = len(self.changes) - w - s
        parts = [f"{s} strengthened"] if s else []
        parts += [f"{w} weakened"] if w else []
        parts += [f"{n} neutral"] if n else []
        return ", ".join(parts) or "no change"


def _key(value: Any) -> bytes:
    return canonical(value)


def _clause_set(clause: Any) -> frozenset[str]:
    if isinstance(clause, dict):
        return frozenset(str(a) for a in clause["any_of"])
    return frozenset({str(clause)})


def _fmt_clause(alts: frozenset[str]) -> str:
    return next(iter(alts)) if len(alts) == 1 else "any_of(" + ", ".join(sorted(alts)) + ")"


def _checks(
    out: list[Change],
    where: str,
    old: Sequence[Any],
    new: Sequence[Any],
    noun: str,
    *,
    obligations: bool = True,
) -> None:
    """Checks compared as multisets. For *obligations* (verify and output checks) a removed
    check weakens and an added one strengthens; for alternatives to them (readback checks,
    ``obligations=False``) an added check weakens, and a removed one strengthens when it closes
    the way: a step settles by readback only when every readback check passes, so one removed
    while a sealed one is left settles it on fewer conditions, a weakening. (A removal with no
    sealed check left closes the way, or comes with added checks, which weaken.)"""
    old_c, new_c = Counter(_key(c) for c in old), Counter(_key(c) for c in new)
    still_open = not obligations and bool(old_c & new_c)
    removed: ChangeKind = "weakened" if obligations or still_open else "strengthened"
    added: ChangeKind = "strengthened" if obligations else "weakened"
    by_key = {_key(c): c for c in (*old, *new)}
    flag = not obligations
    for key in old_c - new_c:
        message = f"{noun} removed or changed: {_describe(by_key[key])}"
        out.append(Change(removed, where, message, flag))
    for key in new_c - old_c:
        out.append(Change(added, where, f"{noun} added: {_describe(by_key[key])}", flag))


def _describe(check: Mapping[str, Any]) -> str:
    body = check.get("argv") or check.get("cmd") or check.get("path") or ""
    if isinstance(body, list):
        body = " ".join(body)
    return f"{check.get('type')} {body}".strip()


_BEHAVIOURAL = frozenset({"run", "exec", "pytest"})


def _sequence(step: Mapping[str, Any]) -> list[tuple[str, bytes, bool]]:
    """The step's own checks in the order the runner runs them (verify, then each output's in
    the order of ``outputs``): (where, key, behavioural) each."""
    seq = [("verify", _key(c), c["type"] in _BEHAVIOURAL) for c in step["verify"]]
    for output in step["outputs"]:
        where = f"output {output['name']}"
        seq += [(where, _key(c), c["type"] in _BEHAVIOURAL) for c in output["verify"]]
    return seq


def _order(out: list[Change], where: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """The runner runs a step's checks one after another in one checkout, and what a check
    writes where git does not look (an ignored ``build/``) a later one reads: the order is part
    of what the sealed checks prove. So sealed checks run in another order, or a check that
    runs a program added before a sealed check (it may write what that check reads: a ``touch
    build/out`` before ``file_exists build/out``), weaken, though the checks (:func:`_checks`)
    only grew."""
    before, after = _sequence(old), _sequence(new)
    matched = _common(before, after)
    if len(matched) < sum(
        (Counter(a[:2] for a in before) & Counter(a[:2] for a in after)).values()
    ):
        message = "sealed checks reordered: one may read what another wrote"
        out.append(Change("weakened", where, message))
    last = max(matched, default=-1)
    first = next(
        (w for i, (w, _, runs) in enumerate(after) if runs and i not in matched and i < last), None
    )
    if first is not None:
        message = (
            f"{first} check added before sealed checks: it runs first and may write what they "
            "read (to strengthen, add it after them: in an output listed last)"
        )
        out.append(Change("weakened", where, message))


def _unknown_opens_reconciliation(
    where: str, old: Mapping[str, Any], new: Mapping[str, Any]
) -> list[Change]:
    """Checks added to a step that is not idempotent (on either side: a planner's reseal making
    it idempotent still leaves an unknown outcome to reconcile, see
    :func:`gitaudit.ledger.plansref.reconcile_first`). One unknown check outcome (a timeout, a
    search cut short) makes the step's outcome unknown whatever the sealed checks found, and a
    step that is not idempotent then settles by reconciliation (its readback checks, someone's
    word), not by its failure: so an added check that can end unknown (any but ``file_exists``),
    even after every sealed check, opens that way past a failing sealed check, a weakening."""
    if old["idempotent"] and new["idempotent"]:
        return []
    found: dict[bytes, Mapping[str, Any]] = {}

    def keyed(step: Mapping[str, Any]) -> Counter[tuple[str, bytes]]:
        lists = [("verify", step["verify"])]
        lists += [(f"output {o['name']}", o["verify"]) for o in step["outputs"]]
        counted: Counter[tuple[str, bytes]] = Counter()
        for label, checks in lists:
            for check in checks:
                found.setdefault(_key(check), check)
                counted[(label, _key(check))] += 1
        return counted

    added = keyed(new) - keyed(old)
    message = (
        "check added to a step that is not idempotent: its unknown outcome (a timeout) would "
        "leave the step to be settled by reconciliation, whatever the sealed checks found: "
    )
    return [
        Change(
            "weakened",
            f"{where} {label}",
            message + _describe(found[key]),
            reconciliation=True,
            listed_as=f"{where} {label}: check added: {_describe(found[key])}",
        )
        for label, key in sorted(added)
        if found[key]["type"] != "file_exists"
    ]


def _readback_order(out: list[Change], where: str, old: Sequence[Any], new: Sequence[Any]) -> None:
    """Readback checks, too, run one after another in one workspace (as :func:`_order` says of
    a step's checks): sealed ones run in another order (a program that writes ``build/status``
    moved before the ``regex`` that reads it) settle the step on what another wrote, while the
    way stays open. (Any readback check added weakens already: :func:`_checks`.)"""
    if not new:
        return  # no readback check left: the way is closed
    before = [("readback", _key(c), c["type"] in _BEHAVIOURAL) for c in old]
    after = [("readback", _key(c), c["type"] in _BEHAVIOURAL) for c in new]
    kept = Counter(a[:2] for a in before) & Counter(a[:2] for a in after)
    if len(_common(before, after)) < sum(kept.values()):
        message = "sealed readback checks reordered: one may read what another wrote"
        out.append(Change("weakened", f"{where} readback", message, reconciliation=True))


def _common(
    before: Sequence[tuple[str, bytes, bool]], after: Sequence[tuple[str, bytes, bool]]
) -> set[int]:
    """The positions in *after* of a longest common subsequence of the two check sequences:
    the sealed checks that still run in their sealed order."""
    n, m = len(before), len(after)
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            same = before[i][:2] == after[j][:2]
            best[i][j] = best[i + 1][j + 1] + 1 if same else max(best[i + 1][j], best[i][j + 1])
    found: set[int] = set()
    i = j = 0
    while i < n and j < m:
        if before[i][:2] == after[j][:2]:
            found.add(j)
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    return found


def _artifacts(step: Mapping[str, Any]) -> list[str]:
    paths = list(step.get("artifacts", []))
    for output in step.get("outputs", []):
        paths += [f"{output['name']}:{p}" for p in output.get("artifacts", [])]
    return paths


def _step(out: list[Change], old: Mapping[str, Any], new: Mapping[str, Any]) -> None:  # noqa: C901, PLR0912 (one rule table: what weakens a step)
    where = f"step {old['id']}"
    if old["title"] != new["title"]:
        out.append(Change("neutral", where, f"title {old['title']!r} -> {new['title']!r}"))
    for req in sorted(set(old["covers"]) - set(new["covers"])):
        out.append(Change("weakened", where, f"no longer covers {req}", requirement=req))
    for req in sorted(set(new["covers"]) - set(old["covers"])):
        out.append(Change("strengthened", where, f"now also covers {req}", requirement=req))
    new_clauses = [_clause_set(c) for c in new["depends_on"]]
    old_clauses = [_clause_set(c) for c in old["depends_on"]]
    for clause in old_clauses:
        if not any(n <= clause for n in new_clauses):
            out.append(
                Change("weakened", where, f"dependency {_fmt_clause(clause)} dropped or widened")
            )
    for clause in new_clauses:
        if clause not in old_clauses:
            out.append(Change("strengthened", where, f"dependency {_fmt_clause(clause)} added"))
    old_req = {(r["step"], r["name"]) for r in old["requires_outputs"]}
    new_req = {(r["step"], r["name"]) for r in new["requires_outputs"]}
    for s, n in sorted(old_req - new_req, key=str):
        out.append(Change("weakened", where, f"no longer requires output {s}/{n}"))
    for s, n in sorted(new_req - old_req, key=str):
        out.append(Change("strengthened", where, f"now requires output {s}/{n}"))
    _checks(out, f"{where} verify", old["verify"], new["verify"], "check")
    _order(out, where, old, new)
    _checks(
        out,
        f"{where} readback",
        old["readback"],
        new["readback"],
        "readback check",
        obligations=False,
    )
    _readback_order(out, where, old["readback"], new["readback"])
    out.extend(_unknown_opens_reconciliation(where, old, new))
    new_outputs = {o["name"]: o for o in new["outputs"]}
    for output in old["outputs"]:
        if output["name"] not in new_outputs:
            out.append(Change("weakened", where, f"output {output['name']!r} removed"))
            continue
        _checks(
            out,
            f"{where} output {output['name']}",
            output["verify"],
            new_outputs[output["name"]]["verify"],
            "output check",
        )
    for name in sorted(set(new_outputs) - {o["name"] for o in old["outputs"]}):
        out.append(Change("strengthened", where, f"output {name!r} added"))
    ov, nv = old["valid_for"], new["valid_for"]
    if ov != nv:
        longer = ov is not None and (nv is None or nv > ov)
        out.append(
            Change("weakened" if longer else "strengthened", where, f"valid_for {ov} -> {nv} s")
        )
    if old["max_attempts"] != new["max_attempts"]:
        more = new["max_attempts"] > old["max_attempts"]
        out.append(
            Change(
                "weakened" if more else "strengthened",
                where,
                f"max_attempts {old['max_attempts']} -> {new['max_attempts']}",
            )
        )
    if old["idempotent"] != new["idempotent"]:
        # a non-idempotent step may be reconciled instead of run again: a way around its checks
        kind: ChangeKind = "strengthened" if new["idempotent"] else "weakened"
        message = f"idempotent {old['idempotent']} -> {new['idempotent']}"
        out.append(Change(kind, where, message, reconciliation=True))
    if _artifacts(old) != _artifacts(new):
        # artifacts are evidence to read, not checks: keeping more or fewer proves no less
        out.append(Change("neutral", where, f"artifacts {_artifacts(old)} -> {_artifacts(new)}"))
    if old["inputs"] != new["inputs"]:
        # no inputs = the whole tree (broadest); more patterns = more reasons to re-run
        broader = not new["inputs"] or (
            bool(old["inputs"]) and set(old["inputs"]) <= set(new["inputs"])
        )
        kind = "strengthened" if broader else "weakened"
        out.append(Change(kind, where, f"inputs {old['inputs']} -> {new['inputs']}"))
    if old["cost"] != new["cost"]:
        out.append(Change("neutral", where, f"cost {old['cost']} -> {new['cost']}"))
    old_on, new_on = set(old.get("runs_on", ())), set(new.get("runs_on", ()))
    for label in sorted(old_on - new_on):
        out.append(Change("weakened", where, f"no longer needs evidence from a {label} runner"))
    for label in sorted(new_on - old_on):
        out.append(Change("strengthened", where, f"now needs evidence from a {label} runner"))
    out.extend(Change(k, where, m) for k, m in exposure.changes(old, new, step=True))


def _opened_by_new_step(old: Mapping[str, Any], step: Mapping[str, Any]) -> list[Change]:
    """A new step's ``ignored_paths`` that the sealed contract did not declare anywhere. The
    run links every declared ignored path (the plan's and each step's) into the one checkout all
    steps run in, so a path a new step declares is opened to the sealed steps' checks too:
    files the tree does not pin (the agent's ``build/report.txt``) then decide their outcome."""
    sealed = set(old.get("ignored_paths", ()))
    for other in old["steps"]:
        sealed.update(other.get("ignored_paths", ()))
    return [
        Change(
            "weakened",
            f"step {step['id']}",
            f"ignored_paths: now also {path} (linked into the checkout every step runs in)",
        )
        for path in sorted(set(step.get("ignored_paths", ())) - sealed)
    ]


def _protect_changes(old: Any, new: Any) -> list[Change]:
    """Protecting more files is a strengthening, protecting fewer a weakening (an exemption,
    ``!glob``, protects fewer)."""
    out = []
    for entry in sorted(set(old) - set(new)):
        kind: ChangeKind = "strengthened" if entry.startswith("!") else "weakened"
        out.append(Change(kind, "protect", f"{entry!r} removed"))
    for entry in sorted(set(new) - set(old)):
        kind = "weakened" if entry.startswith("!") else "strengthened"
        out.append(Change(kind, "protect", f"{entry!r} added"))
    return out


def _graph(contract: Mapping[str, Any]) -> dict[str, list[tuple[Sequence[str], bool]]]:
    """The contract's dependency graph in the form :mod:`gitaudit.plan.graph` reads."""
    return {
        step_key(s["id"]): [
            (tuple(str(a) for a in c["any_of"]), True)
            if isinstance(c, dict)
            else ((str(c),), False)
            for c in s["depends_on"]
        ]
        for s in contract["steps"]
    }


def _mandatory(contract: Mapping[str, Any]) -> dict[str, set[str]]:
    """Each ``must``/``should`` requirement with the steps that cover it (what the gate asks a
    verified step for: :func:`gitaudit.verdict.mandatory_coverage`)."""
    return {
        r["id"]: {step_key(s["id"]) for s in contract["steps"] if r["id"] in s["covers"]}
        for r in contract["requirements"]
        if r["priority"] in ("must", "should")
    }


def _routes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """What the new contract lets a PASS do without. The gate asks every step that is not an
    ``any_of`` alternative (:func:`gitaudit.plan.graph.optional_steps`) to be proven, and each
    mandatory requirement to be covered by some verified step; a step's own clauses hold (the
    runner runs it only then). The rule table of :func:`_step` keeps each sealed step's clauses
    (or stricter ones), so a set of steps that passes the new contract, cut down to the sealed
    steps, passes the sealed one exactly when it still holds (1) every step the sealed contract
    required and (2) for each sealed mandatory requirement, one step that covered it then.
    Adding steps alone can break either: a new sink naming a required step only in ``any_of``
    with a new trivial step makes it optional, and a new (or newly covering) step can meet a
    requirement whose sealed covering steps were all alternatives. Each is a weakening, found
    by asking whether the new goal is still reachable with those steps never verified."""
    old_graph, graph = _graph(old), _graph(new)
    optional = optional_among(graph)
    required = set(graph) - optional
    coverage = list(_mandatory(new).values())

    def avoidable(excluded: set[str]) -> bool:
        viable = viable_without(graph, excluded)
        return required <= viable and all(steps & viable for steps in coverage)

    out: list[Change] = []
    was_optional = optional_among(old_graph)
    for sid in old_graph:
        if sid in was_optional or sid not in graph or sid in required:
            continue
        if avoidable({sid}):
            message = "no longer required: an any_of alternative route avoids it"
            out.append(Change("weakened", f"step {sid}", message))
    for rid, steps in _mandatory(old).items():
        if not steps or steps & required:
            continue  # uncovered (invalid) before, or still covered by a required step
        if avoidable(steps):
            message = (
                f"can now be met without any step that covered it ({', '.join(sorted(steps))})"
            )
            out.append(Change("weakened", f"coverage of {rid}", message, requirement=rid))
    return out


def compare(old: Mapping[str, Any], new: Mapping[str, Any]) -> Comparison:  # noqa: C901, PLR0912 (one rule table: what weakens a plan)
    """Every difference between two contracts (from :func:`gitaudit.plan.digest.contract`)."""
    out: list[Change] = []
    if old.get("task") != new.get("task"):
        out.append(Change("neutral", "task", "task text changed"))
    new_reqs = {r["id"]: r for r in new["requirements"]}
    for req in old["requirements"]:
        where = f"requirement {req['id']}"
        rid = req["id"]
        other = new_reqs.get(rid)
        if other is None:
            out.append(Change("weakened", where, "removed", requirement=rid))
            continue
        moved = f"priority {req['priority']} -> {other['priority']}"
        if _PRIORITY[other["priority"]] < _PRIORITY[req["priority"]]:
            out.append(Change("weakened", where, moved, requirement=rid))
        elif _PRIORITY[other["priority"]] > _PRIORITY[req["priority"]]:
            out.append(Change("strengthened", where, moved, requirement=rid))
        if other["description"] != req["description"]:
            out.append(Change("weakened", where, "description changed", requirement=rid))
    old_ids = {r["id"] for r in old["requirements"]}
    for rid in new_reqs:
        if rid not in old_ids:
            out.append(Change("strengthened", f"requirement {rid}", "added", requirement=rid))
    for tool in sorted(set(old["required_tools"]) - set(new["required_tools"])):
        out.append(Change("weakened", "required_tools", f"{tool!r} no longer required"))
    for tool in sorted(set(new["required_tools"]) - set(old["required_tools"])):
        out.append(Change("strengthened", "required_tools", f"{tool!r} now required"))
    # matched as the plan matches ids (step_key): 1, 1.0 and "1" are one step
    new_steps = {step_key(s["id"]): s for s in new["steps"]}
    for step in old["steps"]:
        other = new_steps.get(step_key(step["id"]))
        if other is None:
            out.append(Change("weakened", f"step {step['id']}", "removed"))
        else:
            _step(out, step, other)
    old_step_ids = {step_key(s["id"]) for s in old["steps"]}
    for sid, added in new_steps.items():
        if sid not in old_step_ids:
            out.append(Change("strengthened", f"step {sid}", "added"))
            out.extend(_opened_by_new_step(old, added))
    out.extend(_routes(old, new))
    out.extend(_protect_changes(old.get("protect", ()), new.get("protect", ())))
    out.extend(Change(k, "plan", m) for k, m in exposure.changes(old, new, step=False))
    out.extend(Change(k, w, m) for k, w, m in exposure.workspace_changes(old, new))
    return Comparison(tuple(out))
