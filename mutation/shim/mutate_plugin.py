"""pytest plugin for ``make mutate``'s stats run: credits the functions a test's subprocesses
reached (written to ``MUTATE_HITS`` by ``sitecustomize``) to the test, before mutmut files its
hits."""

from __future__ import annotations

import os

import pytest


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
