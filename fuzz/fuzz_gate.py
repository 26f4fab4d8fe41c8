"""Fuzz harness: the gate on arbitrary run.json signed by the trusted runner.

The input is the ``run.json`` of a run commit signed by the trusted runner key and put on top of
a genuine PASS run for an older tree (the gate world of ``tests/fuzz/_support.py``). The gate
must always give a verdict (never raise), and PASS only for a run that genuinely proves the plan
for the judged tree (the oracle of ``tests/fuzz/test_gate_fuzz.py``: the newest run for the tree
and contract, every step passed or carried from an earlier run that passed it, every mandatory
requirement covered).

Run: ``fuzz/run.py gate SECONDS``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _driver import guarded, hermetic, main

try:
    import atheris
except ImportError:
    atheris = None

if atheris is not None:
    with atheris.instrument_imports(include=["gitaudit"]):
        from tests.fuzz._support import gate_world, install_run, judge_gate
        from tests.fuzz.test_gate_fuzz import genuine_pass
else:
    from tests.fuzz._support import gate_world, install_run, judge_gate
    from tests.fuzz.test_gate_fuzz import genuine_pass


class FalsePass(AssertionError):
    """The gate said PASS for a run that does not prove the plan for this tree."""


def check(data: bytes) -> str:
    world = gate_world()

    def run() -> str:
        commit = install_run(data)
        result = judge_gate(None)
        if result.verdict not in ("PASS", "FAIL", "UNKNOWN"):
            raise FalsePass(f"not a verdict: {result.verdict!r}")
        if result.verdict == "PASS":
            try:
                doc = json.loads(data)
            except (ValueError, RecursionError):
                doc = None
            ledger = [(str(world.genuine), world.genuine_doc), (str(commit), doc)]
            (plan,) = result.plans
            if plan.run is None or not genuine_pass(world, ledger, plan.run):
                raise FalsePass(f"PASS for {data!r}")
        return f"verdict:{result.verdict}"

    return guarded(run)


if __name__ == "__main__":
    hermetic()
    main(check, instrumented=atheris is not None)
