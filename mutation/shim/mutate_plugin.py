"""pytest plugin for ``make mutate``.

- In the stats run, credits the functions a test's subprocesses reached (written to
  ``MUTATE_HITS`` by ``sitecustomize``) to the test, before mutmut files its hits.
- In a mutant's run, orders its tests fastest first (by the durations the stats run measured).
  mutmut stops at the first failing test, in the order it passes them (a set's order), so a mutant
  that a 0.1 s unit test kills was often first run through minutes of end-to-end attacks; the gate
  group, whose tests take two minutes, could not finish in its time limit.
"""

from __future__ import annotations

import json
import os

import pytest

_NOT_A_MUTANT = {"stats", "fail", "mutant_generation", "list_all_tests", ""}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    del item
    hits = os.environ.get("MUTATE_HITS")
    if os.environ.get("MUTANT_UNDER_TEST") != "stats" or not hits or not os.path.exists(hits):
        return
    from mutmut.state import state

    with open(hits, encoding="utf-8") as found:
        names = {line.strip() for line in found if line.strip()}
    os.unlink(hits)
    state()._stats.update(names)


def fastest_first(nodeids: list[str], durations: dict[str, float]) -> list[int]:
    """The positions of *nodeids*, fastest test first; a test without a duration last, and ties
    in their collected order."""
    late = max(durations.values(), default=0.0) + 1.0
    return sorted(range(len(nodeids)), key=lambda i: (durations.get(nodeids[i], late), i))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("MUTANT_UNDER_TEST", "") in _NOT_A_MUTANT:
        return
    try:
        with open("mutmut-stats.json", encoding="utf-8") as stats:
            durations = json.load(stats).get("duration_by_test", {})
    except (OSError, ValueError):
        return  # no stats yet: the collected order
    order = fastest_first([item.nodeid for item in items], durations)
    items[:] = [items[i] for i in order]
