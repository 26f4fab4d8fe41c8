"""How fast is full plan validation on a large plan, and does it grow linearly?

Generates a random, valid DAG plan (every step has a ``run`` check and one output; every edge is
tied to that output by ``requires_outputs``; every requirement is covered), serialises it to bytes
and runs :func:`gitaudit.plan.validate.validate_bytes` on it -- every layer: JSON parse, schema,
model building, semantics, graph and environment.

Three sizes are measured: the median (with [min-max]) of R interleaved rounds, each round timing
the validation and, beside it, the baseline ``json.loads`` of the same bytes (the bare parse every
reader pays). The target is the largest size, 2,000 steps and 10,000 edges, "well under 1 s"
(median <= 1 s, and the slowest round printed beside); linearity is judged by the median time per
(steps + edges) of the largest size divided by that of the smallest (<= 2x counts as linear).

Run: ``.venv/bin/python benchmarks/bench_validate.py [--rounds R]`` (exits 1 on FAIL).
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import Stat, interleaved, spread

from gitaudit.plan.load import build_plan, parse_json, schema_problems
from gitaudit.plan.validate import environment_problems, semantic_problems, validate_bytes

SEED = 20260905
SIZES = [(500, 2_500), (1_000, 5_000), (2_000, 10_000)]
RUNS = 3
BUDGET_S = 1.0  # "well under 1 s" for the largest size
LINEAR_RATIO = 2.0
ANY_OF_SHARE = 0.1  # share of steps whose dependencies include one two-way OR clause
STEPS_PER_REQUIREMENT = 10


def make_plan(steps: int, edges: int, seed: int = SEED) -> dict[str, Any]:
    """A valid DAG plan with exactly *steps* steps and *edges* dependency edges.

    Edges run from a later step to an earlier one (so the graph is acyclic); an edge is one
    alternative of one ``depends_on`` clause. Some steps group two of their edges into an
    ``{"any_of": [...]}`` clause. Every edge's upstream step appears in ``requires_outputs``.
    """
    if edges > steps * (steps - 1) // 2:
        raise ValueError("too many edges for a DAG of this size")
    rng = random.Random(seed)
    chosen: set[tuple[int, int]] = set()
    while len(chosen) < edges:
        a, b = rng.randrange(steps), rng.randrange(steps)
        if a != b:
            chosen.add((max(a, b), min(a, b)))  # (dependant, prerequisite)
    deps: list[list[int]] = [[] for _ in range(steps)]
    for dependant, prerequisite in sorted(chosen):
        deps[dependant].append(prerequisite)

    n_req = max(1, steps // STEPS_PER_REQUIREMENT)
    requirements = [
        {"id": f"REQ-{r:04d}", "description": f"requirement {r}", "priority": "must"}
        for r in range(n_req)
    ]
    plan_steps = []
    for i in range(steps):
        ups = deps[i]
        clauses: list[Any] = []
        if len(ups) >= 2 and rng.random() < ANY_OF_SHARE:
            clauses.append({"any_of": [f"s{ups[0]}", f"s{ups[1]}"]})
            clauses.extend(f"s{u}" for u in ups[2:])
        else:
            clauses.extend(f"s{u}" for u in ups)
        plan_steps.append(
            {
                "id": f"s{i}",
                "title": f"step {i}",
                "depends_on": clauses,
                "requires_outputs": [{"step": f"s{u}", "name": "out"} for u in ups],
                "covers": [f"REQ-{i % n_req:04d}"],
                "verify": [{"type": "run", "argv": ["python3", "-c", f"print({i})"]}],
                "outputs": [
                    {"name": "out", "verify": [{"type": "file_exists", "path": f"out/{i}.json"}]}
                ],
            }
        )
    return {
        "task": f"benchmark plan with {steps} steps and {edges} edges",
        "requirements": requirements,
        "required_tools": ["sh"],
        "steps": plan_steps,
    }


def count_edges(plan: dict[str, Any]) -> int:
    total = 0
    for step in plan["steps"]:
        for clause in step["depends_on"]:
            total += len(clause["any_of"]) if isinstance(clause, dict) else 1
    return total


def validate(data: bytes) -> None:
    model, report = validate_bytes(data, name="bench", source="bench.json")
    if model is None or not report.valid:
        first = [p.render() for p in report.errors[:5]]
        raise SystemExit(f"benchmark plan is not valid: {first}")


def best_of(fn: Callable[[], object], runs: int = RUNS) -> float:
    """Best wall time of *runs* calls of *fn*, in seconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def layer_times(data: bytes) -> list[tuple[str, float]]:
    """Best time of each validation layer on *data*, to show where the time goes."""
    value, _ = parse_json(data, plan="bench", source="bench.json")
    plan, _ = build_plan(value, name="bench", source="bench.json")
    return [
        ("1 parse JSON", best_of(lambda: parse_json(data, plan="bench", source="bench.json"))),
        ("2 schema", best_of(lambda: schema_problems(value, plan="bench", source="bench.json"))),
        ("2 build model", best_of(lambda: build_plan(value, name="bench", source="bench.json"))),
        ("3+4 semantics", best_of(lambda: semantic_problems(plan))),
        ("5 environment", best_of(lambda: environment_problems(plan))),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (medians)")
    args = parser.parse_args()
    validate(json.dumps(make_plan(20, 40)).encode())  # warm-up: schema load, regex caches
    rows: list[tuple[int, int, Stat]] = []
    layers = []
    print(
        f"{'steps':>6} {'edges':>7} {'bytes':>10} {'median s':>9} {'[min-max] ms':>14} "
        f"{'json.loads s':>12} {'ratio':>6} {'(s+e)/s':>9}"
    )
    for steps, edges in SIZES:
        plan = make_plan(steps, edges)
        assert count_edges(plan) == edges
        data = json.dumps(plan).encode()
        timed = interleaved(
            {
                "parse": functools.partial(json.loads, data),
                "validate": functools.partial(validate, data),
            },
            args.rounds,
        )
        seconds, parse = timed["validate"], timed["parse"]
        rows.append((steps, edges, seconds))
        layers.append(layer_times(data))
        print(
            f"{steps:>6} {edges:>7} {len(data):>10} {seconds:>9.3f} {spread(seconds):>14} "
            f"{parse:>12.3f} {seconds / parse:>5.0f}x {(steps + edges) / seconds:>9.0f}"
        )
    small, large = rows[0], rows[-1]
    scale = (large[0] + large[1]) / (small[0] + small[1])
    print("per layer at the largest size, best of 3 (growth per (steps+edges) vs the smallest):")
    for (label, t_small), (_, t_large) in zip(layers[0], layers[-1], strict=True):
        growth = f"{t_large / t_small / scale:5.2f}x" if t_small > 1e-4 else "    -"
        print(f"  {label:<14} {t_large:>7.3f} s  {growth}")
    ratio = (large[2] / (large[0] + large[1])) / (small[2] / (small[0] + small[1]))
    linear = ratio <= LINEAR_RATIO
    print(
        f"time per (steps+edges), largest / smallest: {ratio:.2f}x "
        f"({'about linear' if linear else 'NOT linear'}, limit {LINEAR_RATIO:.0f}x)"
    )
    ok = large[2] < BUDGET_S
    print(
        f"{'PASS' if ok else 'FAIL'}: {large[0]:,} steps + {large[1]:,} edges validated in "
        f"{large[2]:.3f} s median, {large[2].hi:.3f} s the slowest round (budget: well under "
        f"{BUDGET_S:.0f} s)"
    )
    return 0 if ok and linear else 1


if __name__ == "__main__":
    sys.exit(main())
