"""`make mutate`: mutation testing of the security-critical modules, bounded, reproducible.

Uses mutmut 3 (from the package registry; installed on demand). For each group (the modules of
one defence and the tests that guard them), a scratch copy of the project is made under
``build/mutate/<group>/`` with its own ``[tool.mutmut]`` configuration, every mutant of the
group's modules is generated, a **seeded sample** of them is run (all of them with
``--sample 0``), and the score and the surviving mutants (with their diffs) are printed.

Mutants are switched on through the environment (``MUTANT_UNDER_TEST``) and the scratch copy is
first on ``PYTHONPATH``, so the command-line and hook subprocesses a test starts run the mutant
too. mutmut picks, per mutant, only the tests that reached the mutated function in process; a
mutant reached only in a subprocess reports "no tests" and counts as not killed.

    python mutation/run.py [--groups gate,ledger] [--sample 40] [--seed 18] [--jobs 2]

Exit status 0 when every group run reached --target (default 0.9), else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "mutate"
MUTMUT = "mutmut==3.8.1"


@dataclass(frozen=True)
class Group:
    modules: tuple[str, ...]
    tests: tuple[str, ...]


GROUPS = {
    "gate": Group(
        (
            "gitaudit/gate/evidence.py",
            "gitaudit/gate/assess.py",
            "gitaudit/gate/authority.py",
            "gitaudit/gate/plans.py",
            "gitaudit/verdict.py",
        ),
        (
            "tests/adversarial/test_evidence.py",
            "tests/adversarial/test_plans.py",
            "tests/adversarial/test_reconcile.py",
            "tests/adversarial/test_attempts.py",
            "tests/adversarial/test_time.py",
        ),
    ),
    "ledger": Group(
        (
            "gitaudit/ledger/plansref.py",
            "gitaudit/ledger/lookup.py",
            "gitaudit/ledger/records.py",
            "gitaudit/ledger/chain.py",
        ),
        (
            "tests/ledger",
            "tests/adversarial/test_seals.py",
            "tests/adversarial/test_history.py",
            "tests/adversarial/test_evidence.py",
        ),
    ),
    "crypto": Group(
        (
            "gitaudit/crypto/sshsig.py",
            "gitaudit/crypto/commits.py",
            "gitaudit/crypto/wire.py",
            "gitaudit/crypto/pubkey.py",
        ),
        ("tests/crypto",),
    ),
    "hooks": Group(
        ("gitaudit/hooks/entry.py", "gitaudit/hooks/message.py"),
        (
            "tests/adversarial/test_hooks.py",
            "tests/adversarial/test_commit_msg.py",
            "tests/e2e/test_hooks.py",
        ),
    ),
    "fingerprint": Group(("gitaudit/git/fingerprint.py",), ("tests/test_fingerprint.py",)),
    "runner": Group(
        ("gitaudit/run/runner.py",), ("tests/run/test_run.py", "tests/run/test_attempts.py")
    ),
}

KILLED = {"killed", "timeout"}  # a mutant that makes a test hang is caught too
STATUS = re.compile(r"^\s+(\S+): (.+)$")


def _toml_list(items: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def prepare(name: str, group: Group) -> Path:
    work = BUILD / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for folder in ("gitaudit", "tests", "hooks"):
        shutil.copytree(ROOT / folder, work / folder, ignore=shutil.ignore_patterns("__pycache__"))
    config = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    config += (
        "\n[tool.mutmut]\n"
        'source_paths = ["gitaudit"]\n'
        f"only_mutate = {_toml_list(group.modules)}\n"
        'pytest_add_cli_args = ["-p", "no:randomly", "-q", "-x"]\n'
        f"pytest_add_cli_args_test_selection = {_toml_list(group.tests)}\n"
        "use_git_change_detection = false\n"
    )
    (work / "pyproject.toml").write_text(config, encoding="utf-8")
    return work


def mutmut(work: Path, *args: str, jobs: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(work / "mutants")}
    argv = [sys.executable, "-m", "mutmut", *args]
    if args and args[0] == "run":
        argv[4:4] = ["--max-children", str(jobs)]
    return subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, check=False)


def statuses(work: Path, jobs: int) -> dict[str, str]:
    out = mutmut(work, "results", "--all", "true", jobs=jobs).stdout
    return {m.group(1): m.group(2) for line in out.splitlines() if (m := STATUS.match(line))}


def run_group(name: str, group: Group, sample: int, seed: int, jobs: int) -> dict[str, object]:
    work = prepare(name, group)
    # generation and the one run of the tests that maps tests to functions; no mutant runs
    mutmut(work, "run", "nothing.matches.this", jobs=jobs)
    every = sorted(statuses(work, jobs))
    if not every:
        raise SystemExit(f"mutate {name}: mutmut generated no mutants (see {work})")
    rng = random.Random(seed)  # noqa: S311 (a reproducible sample, not a secret)
    chosen = every if sample <= 0 else sorted(rng.sample(every, min(sample, len(every))))
    mutmut(work, "run", *chosen, jobs=jobs)
    result = statuses(work, jobs)
    picked = {m: result.get(m, "not checked") for m in chosen}
    killed = [m for m, s in picked.items() if s in KILLED]
    survivors = {m: s for m, s in picked.items() if s not in KILLED}
    score = len(killed) / len(picked)
    summary: dict[str, object] = {
        "group": name,
        "modules": list(group.modules),
        "tests": list(group.tests),
        "mutants": len(every),
        "sampled": len(picked),
        "seed": seed,
        "killed": len(killed),
        "score": round(score, 3),
        "survivors": survivors,
    }
    (work / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"== mutate {name}: {len(killed)}/{len(picked)} killed ({score:.0%}) of {len(every)} ")
    for mutant, status in survivors.items():
        print(f"-- {status}: {mutant}")
        print(mutmut(work, "show", mutant, jobs=jobs).stdout.strip())
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", default=",".join(GROUPS))
    parser.add_argument("--sample", type=int, default=40, help="mutants per group; 0: all")
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--target", type=float, default=0.9)
    args = parser.parse_args()
    try:
        import mutmut  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", MUTMUT], check=True)
    ok = True
    totals = [0, 0]
    for name in args.groups.split(","):
        summary = run_group(name, GROUPS[name], args.sample, args.seed, args.jobs)
        totals[0] += int(summary["killed"])  # type: ignore[call-overload]
        totals[1] += int(summary["sampled"])  # type: ignore[call-overload]
        ok = ok and float(summary["score"]) >= args.target  # type: ignore[arg-type]
    print(f"== mutate: {totals[0]}/{totals[1]} killed ({totals[0] / max(1, totals[1]):.0%})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
