"""The weakening rules. Reconciliation: non-idempotent steps and readback checks open a way to
PASS without a step's verify checks, so adding them weakens and removing them strengthens.
Routes: added steps, ``any_of`` clauses or coverage that let a PASS go without a step every PASS
verified before weaken."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from gitaudit.plan.catalog import check_file
from gitaudit.plan.compare import compare
from gitaudit.plan.digest import contract
from gitaudit.plan.store import PlanFile
from tests.plan.builders import run_check, two_step_plan

READBACK = {"type": "file_exists", "path": "deployed.txt"}
OTHER_READBACK = {"type": "regex", "path": "deployed.txt", "pattern": "live"}


def contract_of(doc: dict[str, Any]) -> dict[str, Any]:
    checked = check_file(PlanFile("p", "p.json", json.dumps(doc).encode()), environment=False)
    assert checked.plan is not None, checked.report.errors
    return contract(checked.plan)


def changes(
    before: Callable[[dict[str, Any]], object], after: Callable[[dict[str, Any]], object]
) -> list[tuple[str, str]]:
    old, new = two_step_plan(), two_step_plan()
    before(old)
    after(new)
    return [(c.kind, c.render()) for c in compare(contract_of(old), contract_of(new)).changes]


def use(**fields: Any) -> Callable[[dict[str, Any]], object]:
    return lambda plan: plan["steps"][1].update(fields)


def nothing(plan: dict[str, Any]) -> None:
    del plan


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (nothing, use(idempotent=False), [("weakened", "step use: idempotent True -> False")]),
        (use(idempotent=False), nothing, [("strengthened", "step use: idempotent False -> True")]),
        (
            nothing,
            use(readback=[READBACK]),
            [("weakened", "step use readback: readback check added: file_exists deployed.txt")],
        ),
        (
            use(readback=[READBACK]),
            nothing,
            [
                (
                    "strengthened",
                    "step use readback: readback check removed or changed: "
                    "file_exists deployed.txt",
                )
            ],
        ),
        (
            use(readback=[READBACK]),
            use(readback=[OTHER_READBACK]),
            [
                (
                    "strengthened",
                    "step use readback: readback check removed or changed: "
                    "file_exists deployed.txt",
                ),
                ("weakened", "step use readback: readback check added: regex deployed.txt"),
            ],
        ),
    ],
)
def test_reconciliation_paths_weaken_and_their_removal_strengthens(
    before: Callable[[dict[str, Any]], object],
    after: Callable[[dict[str, Any]], object],
    expected: list[tuple[str, str]],
) -> None:
    assert changes(before, after) == expected


READBACK_BOTH = [READBACK, OTHER_READBACK]


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (  # one of two dropped: the other alone now settles the step
            use(readback=READBACK_BOTH),
            use(readback=[READBACK]),
            [
                (
                    "weakened",
                    "step use readback: readback check removed or changed: regex deployed.txt",
                )
            ],
        ),
        (  # a duplicate dropped: one run of it fewer
            use(readback=[READBACK, READBACK]),
            use(readback=[READBACK]),
            [
                (
                    "weakened",
                    "step use readback: readback check removed or changed: "
                    "file_exists deployed.txt",
                )
            ],
        ),
        (  # both dropped: the way is closed
            use(readback=READBACK_BOTH),
            nothing,
            [
                (
                    "strengthened",
                    "step use readback: readback check removed or changed: "
                    "file_exists deployed.txt",
                ),
                (
                    "strengthened",
                    "step use readback: readback check removed or changed: regex deployed.txt",
                ),
            ],
        ),
    ],
)
def test_a_readback_check_removed_while_another_is_left_weakens(
    before: Callable[[dict[str, Any]], object],
    after: Callable[[dict[str, Any]], object],
    expected: list[tuple[str, str]],
) -> None:
    """A step settles by readback when every readback check passes: dropping some while a sealed
    one is left settles it on fewer conditions (a weakening); dropping them all closes the way."""
    assert changes(before, after) == expected
    old, new = two_step_plan(), two_step_plan()
    before(old)
    after(new)
    flagged = compare(contract_of(old), contract_of(new)).changes
    assert all(c.reconciliation for c in flagged)


WRITES = {"type": "run", "argv": ["sh", "-c", "echo ok > deployed.txt"]}


@pytest.mark.parametrize(
    ("sealed", "resealed", "expected"),
    [
        (  # the program that writes moved before the check that reads
            [OTHER_READBACK, WRITES],
            [WRITES, OTHER_READBACK],
            [
                (
                    "weakened",
                    "step use readback: sealed readback checks reordered: one may read what "
                    "another wrote",
                )
            ],
        ),
        ([OTHER_READBACK, WRITES], [OTHER_READBACK, WRITES], []),  # the same order: no change
        (  # one dropped (a weakening of its own), the rest in their order
            [READBACK, OTHER_READBACK, WRITES],
            [READBACK, WRITES],
            [
                (
                    "weakened",
                    "step use readback: readback check removed or changed: regex deployed.txt",
                )
            ],
        ),
    ],
)
def test_sealed_readback_checks_reordered_weaken(
    sealed: list[dict[str, Any]], resealed: list[dict[str, Any]], expected: list[tuple[str, str]]
) -> None:
    """Readback checks run one after another in one workspace, as a step's checks do: sealed ones
    run in another order may read what another wrote."""
    assert changes(use(readback=sealed), use(readback=resealed)) == expected


HANGS = {"type": "run", "argv": ["sleep", "30"], "timeout": 0.5}
UNKNOWN_OPENS = (
    "step use verify: check added to a step that is not idempotent: its unknown outcome (a "
    "timeout) would leave the step to be settled by reconciliation, whatever the sealed checks "
    "found: "
)


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (
            use(idempotent=False),
            lambda p: p["steps"][1].update(
                idempotent=False, verify=[*p["steps"][1]["verify"], HANGS]
            ),
            [
                ("strengthened", "step use verify: check added: run sleep 30"),
                ("weakened", UNKNOWN_OPENS + "run sleep 30"),
            ],
        ),
        (
            use(idempotent=False),
            lambda p: p["steps"][1].update(
                idempotent=False, verify=[*p["steps"][1]["verify"], READBACK]
            ),
            [("strengthened", "step use verify: check added: file_exists deployed.txt")],
        ),
        (  # an idempotent step on both sides: an unknown outcome only runs it again
            nothing,
            lambda p: p["steps"][1]["verify"].append(HANGS),
            [("strengthened", "step use verify: check added: run sleep 30")],
        ),
    ],
)
def test_a_check_that_can_end_unknown_added_to_a_step_that_is_not_idempotent_weakens(
    before: Callable[[dict[str, Any]], object],
    after: Callable[[dict[str, Any]], object],
    expected: list[tuple[str, str]],
) -> None:
    """One unknown check outcome makes the step's unknown: a step that is not idempotent is then
    settled by reconciliation, not by the failure of a sealed check."""
    assert changes(before, after) == expected


def test_a_changed_readback_check_is_a_weakening_overall() -> None:
    old, new = two_step_plan(), two_step_plan()
    old["steps"][1].update(idempotent=False, readback=[READBACK])
    new["steps"][1].update(idempotent=False, readback=[OTHER_READBACK])
    comparison = compare(contract_of(old), contract_of(new))
    assert comparison.weakened and comparison.summary() == "1 strengthened, 1 weakened"


def test_verify_checks_still_weaken_when_removed() -> None:
    old, new = two_step_plan(), two_step_plan()
    new["steps"][1]["verify"].append({"type": "run", "argv": ["echo", "more"]})
    assert [c.kind for c in compare(contract_of(old), contract_of(new)).changes] == ["strengthened"]
    assert [c.kind for c in compare(contract_of(new), contract_of(old)).changes] == ["weakened"]


def test_an_integer_id_respelt_with_a_fraction_is_the_same_step() -> None:
    """`1` and `1.0` are one step id (the plan reads both as "1"): respelling it while adding a
    check is that strengthening alone, not the step removed and another added; a check removed
    from the respelt step is still a weakening."""

    def numbered(spelling: float, *argvs: list[str]) -> dict[str, Any]:
        return {
            "task": "ids",
            "requirements": [{"id": "R", "description": "it works"}],
            "steps": [
                {
                    "id": spelling,
                    "depends_on": [],
                    "covers": ["R"],
                    "workspace": "live",
                    "verify": [run_check(*argv) for argv in argvs],
                },
                {"id": 2, "depends_on": [], "covers": ["R"], "verify": [run_check("true")]},
            ],
        }

    sealed = contract_of(numbered(1, ["true"]))
    more = compare(sealed, contract_of(numbered(1.0, ["true"], ["make", "test"])))
    assert [(c.kind, c.render()) for c in more.changes] == [
        ("strengthened", "step 1 verify: check added: run make test")
    ]
    fewer = compare(sealed, contract_of(numbered(1.0, ["make", "test"])))
    assert [c.kind for c in fewer.changes] == ["weakened", "strengthened"]


# ------------------------------------------------------------------ routes around a step


Spec = tuple[str, list[Any], list[str]]


def graph_plan(*steps: Spec) -> dict[str, Any]:
    """A plan of (id, depends_on, covers) steps, each checking `true`; R is a must, M a may."""
    return {
        "task": "routes",
        "requirements": [
            {"id": "R", "description": "it works", "priority": "must"},
            {"id": "M", "description": "nice to have", "priority": "may"},
        ],
        "steps": [
            {"id": sid, "depends_on": deps, "covers": covers, "verify": [run_check("true")]}
            for sid, deps, covers in steps
        ],
    }


UNIT: Spec = ("unit", [], ["R"])
LINT: Spec = ("lint", [], ["R"])
TRIVIAL: Spec = ("trivial", [], ["R"])
# ship needs fast or full; only full covers R, so every PASS verifies full
FULL: Spec = ("full", [], ["R"])
FAST: Spec = ("fast", [], ["M"])
SHIP: Spec = ("ship", [{"any_of": ["fast", "full"]}], ["M"])
NO_LONGER = "no longer required: an any_of alternative route avoids it"
WITHOUT_FULL = "coverage of R: can now be met without any step that covered it (full)"


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            [UNIT, LINT],
            [UNIT, LINT, TRIVIAL, ("done", [{"any_of": ["trivial", "unit"]}], ["R"])],
            [f"step unit: {NO_LONGER}"],
            id="new-sink-names-it-in-any_of",
        ),
        pytest.param(
            [UNIT, LINT],
            [
                UNIT,
                LINT,
                TRIVIAL,
                ("mid", [{"any_of": ["unit", "trivial"]}], []),
                ("done", ["mid"], []),
            ],
            [f"step unit: {NO_LONGER}"],
            id="any_of-upstream-of-a-new-sink",
        ),
        pytest.param(
            [UNIT, LINT],
            [
                UNIT,
                LINT,
                TRIVIAL,
                ("wrap", ["unit"], []),
                ("done", [{"any_of": ["wrap", "trivial"]}], []),
            ],
            [f"step unit: {NO_LONGER}"],
            id="any_of-downstream-of-a-new-wrapper",
        ),
        pytest.param(
            [UNIT, LINT],
            [UNIT, ("lint", [{"any_of": ["unit", "trivial"]}], ["R"]), TRIVIAL],
            [f"step unit: {NO_LONGER}"],
            id="a-new-any_of-clause-on-a-sealed-step",
        ),
        pytest.param(
            [FULL, FAST, SHIP],
            [FULL, FAST, SHIP, ("cheap", [], ["R"])],
            [WITHOUT_FULL],
            id="a-new-step-covers-what-only-an-alternative-covered",
        ),
        pytest.param(
            [FULL, FAST, SHIP],
            [FULL, ("fast", [], ["M", "R"]), SHIP],
            [WITHOUT_FULL],
            id="the-other-alternative-now-also-covers-it",
        ),
        pytest.param(
            [FULL, FAST, SHIP],
            [FULL, FAST, SHIP, ("m2", [], ["M"]), ("more", [{"any_of": ["m2", "fast"]}], ["M"])],
            [],
            id="control-an-alternative-to-a-step-already-optional",
        ),
        pytest.param(
            [UNIT, LINT],
            [UNIT, LINT, ("ship", ["unit", "lint"], ["R"])],
            [],
            id="control-a-new-step-that-needs-them",
        ),
        pytest.param(
            [UNIT, LINT],
            [UNIT, LINT, ("gate", [{"any_of": ["unit", "unit2"]}, "unit"], []), ("unit2", [], [])],
            [],
            id="control-an-any_of-beside-a-plain-clause",
        ),
        pytest.param(
            [UNIT, LINT],
            [
                UNIT,
                LINT,
                ("pre", [], []),
                ("gate", [{"any_of": ["unit", "pre"]}], []),
                ("pre2", ["unit"], []),
            ],
            [],
            id="control-still-needed-by-another-new-step",
        ),
    ],
)
def test_a_step_made_avoidable_by_added_routes_is_a_weakening(
    old: list[Spec],
    new: list[Spec],
    expected: list[str],
) -> None:
    """Adding steps only, or coverage only, must not let a PASS skip a step every PASS of the
    sealed contract verified."""
    comparison = compare(contract_of(graph_plan(*old)), contract_of(graph_plan(*new)))
    assert [c.render() for c in comparison.weakenings] == expected
    if expected:
        return
    assert comparison.strengthenings and not comparison.weakened


BUILD = run_check("make")
PLANT = run_check("touch", "out/a")
READS = {"type": "regex", "path": "out/a", "pattern": "^ok$"}
OWN_OUTPUT = {"name": "artifact", "verify": [{"type": "file_exists", "path": "out/a"}]}

# variant -> (the use step's sealed verify, its new verify, its new outputs or None: kept)
ORDERED: dict[str, tuple[list[Any], list[Any], list[Any] | None]] = {
    "sealed checks swapped": ([BUILD, READS], [READS, BUILD], None),
    "a program added between sealed checks": ([BUILD, READS], [BUILD, PLANT, READS], None),
    "a program added first": ([BUILD, READS], [PLANT, BUILD, READS], None),
    "a program added before the step's output check": ([BUILD], [BUILD, PLANT], [OWN_OUTPUT]),
    "an output with a program put before a sealed output": (
        [BUILD],
        [BUILD],
        [{"name": "first", "verify": [PLANT]}, OWN_OUTPUT],
    ),
}


@pytest.mark.parametrize("variant", sorted(ORDERED))
def test_checks_reordered_or_a_program_added_before_sealed_checks_weaken(variant: str) -> None:
    """One checkout holds a step's checks one after another: what one writes (in an ignored
    folder) the next reads, so order is part of what the checks prove."""
    sealed, verify, outputs = ORDERED[variant]
    sealed_outputs = [OWN_OUTPUT] if outputs else []
    found = changes(
        use(verify=sealed, outputs=sealed_outputs),
        use(verify=verify, outputs=outputs or sealed_outputs),
    )
    assert any(kind == "weakened" and "step use:" in text for kind, text in found), found


@pytest.mark.parametrize(
    "verify",
    [
        [BUILD, READS, PLANT],
        [BUILD, READS, READS],
        [BUILD, READS, {"type": "file_exists", "path": "x"}],
    ],
)
def test_checks_added_after_every_sealed_check_still_strengthen(verify: list[Any]) -> None:
    """A program added last, or a check that runs none (it writes nothing) anywhere, runs after
    or beside what the sealed checks read: a strengthening, as before."""
    found = changes(use(verify=[BUILD, READS]), use(verify=verify))
    assert found and all(kind == "strengthened" for kind, _ in found), found


def test_a_file_check_added_before_sealed_checks_strengthens() -> None:
    found = changes(use(verify=[BUILD, READS]), use(verify=[READS, BUILD, READS]))
    assert [kind for kind, _ in found] == ["strengthened"], found


def _add_step(ignored: list[str]) -> Callable[[dict[str, Any]], object]:
    """A new sink step that needs nothing and declares *ignored* paths of its own."""
    return lambda plan: plan["steps"].append(
        {
            "id": "cache",
            "depends_on": [],
            "covers": ["REQ-1"],
            "verify": [run_check("true")],
            **({"ignored_paths": ignored} if ignored else {}),
        }
    )


def _declare(where: str, paths: list[str]) -> Callable[[dict[str, Any]], object]:
    def edit(plan: dict[str, Any]) -> None:
        target = plan if where == "plan" else plan["steps"][0]
        target["ignored_paths"] = paths

    return edit


def test_a_new_step_opening_an_ignored_path_weakens() -> None:
    """Every declared ignored path is linked into the one checkout all steps run in, so one a
    new step declares is opened to the sealed steps too: a weakening, though the step is new."""
    found = changes(lambda plan: None, _add_step(["build"]))
    assert (
        "weakened",
        "step cache: ignored_paths: now also build (linked into the checkout every step runs in)",
    ) in found, found
    assert ("strengthened", "step cache: added") in found


@pytest.mark.parametrize("where", ["plan", "step"])
def test_a_new_step_declaring_an_ignored_path_already_open_strengthens(where: str) -> None:
    """A new step naming a path the sealed contract opened already (at plan level, or on a
    sealed step) opens nothing more; a new step with none is a strengthening, as before."""
    for after in (_add_step(["build"]), _add_step([])):

        def both(plan: dict[str, Any], after: Callable[[dict[str, Any]], object] = after) -> None:
            _declare(where, ["build"])(plan)
            after(plan)

        found = changes(_declare(where, ["build"]), both)
        assert found and all(kind == "strengthened" for kind, _ in found), found


def _pass(where: str, names: list[str]) -> Callable[[dict[str, Any]], object]:
    def edit(plan: dict[str, Any]) -> None:
        (plan if where == "plan" else plan["steps"][1])["pass_env"] = names

    return edit


@pytest.mark.parametrize("where", ["plan", "step"])
def test_a_variable_the_sealed_checks_were_passed_and_no_longer_are_weakens(where: str) -> None:
    """The caller's value of a `pass_env` variable is the user's (the agent cannot set it): a
    check that no longer sees it runs otherwise (a suite testing more when RUN_FULL is set skips
    that), so one removed, or a prefix narrowed to a name, is a weakening, as a check's own `env`
    changed is; one added weakens as before, and unchanged ones are no change."""
    label = "plan" if where == "plan" else "step use"
    removed = changes(_pass(where, ["RUN_FULL", "LANG"]), _pass(where, ["LANG"]))
    message = f"{label}: pass_env: no longer RUN_FULL (the sealed checks read it)"
    assert removed == [("weakened", message)], removed
    narrowed = changes(_pass(where, ["RUN_*", "RUN_UNIT"]), _pass(where, ["RUN_UNIT"]))
    assert [kind for kind, _ in narrowed] == ["weakened"], narrowed
    added = changes(_pass(where, []), _pass(where, ["RUN_FULL"]))
    assert [kind for kind, _ in added] == ["weakened"], added
    assert changes(_pass(where, ["RUN_FULL"]), _pass(where, ["RUN_FULL"])) == []


def test_closing_what_the_agent_controls_still_strengthens() -> None:
    """Control: the rest of what checks may read beyond the tree (the live work tree, ignored
    paths, the user's HOME, filters) closed is a strengthening, as before."""
    opened: tuple[tuple[str, object], ...] = (
        ("home", "user"),
        ("ignored_paths", [".venv"]),
        ("filters", ["lfs"]),
    )
    for field, value in opened:

        def before(plan: dict[str, Any], f: str = field, v: object = value) -> None:
            plan[f] = v

        found = changes(before, lambda plan: None)
        assert [kind for kind, _ in found] == ["strengthened"], (field, found)
