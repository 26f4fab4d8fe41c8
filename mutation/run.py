"""`make mutate`: mutation testing of the security-critical modules, bounded, reproducible.

Uses mutmut 3 (from the package registry; installed on demand). For each group (the modules of
one defence and the tests that guard them), a scratch copy of the project is made under
``build/mutate/<group>/`` with its own ``[tool.mutmut]`` configuration, and then:

1. every mutant of the group's modules is generated (no test runs);
2. mutmut's stats run maps each test of the group to the functions it reaches: in the test's own
   process, and (through ``mutation/shim``) in the ``git audit`` and hook processes it starts;
3. a **seeded sample** of each module's mutants (all of them with ``--sample 0``) is run, each
   against the tests that reach its function;
4. the score per module, and every surviving mutant with its diff, are printed, and written to
   ``build/mutate/<group>/summary.json`` (and all groups to ``build/mutate/summary.json``).

Mutants are switched on through the environment (``MUTANT_UNDER_TEST``) and the scratch copy is
first on ``PYTHONPATH``, so the subprocesses a test starts run the mutant too. Every phase's
output is kept in ``build/mutate/<group>/<phase>.log``; a phase that fails (a test failing without
any mutant, say) stops the run with the end of its log, rather than leaving mutants unchecked.

    python mutation/run.py [--groups gate,ledger] [--modules gitaudit/gate/plans.py]
                           [--sample 25] [--seed 18] [--jobs 2]

Exit status 0 when every group reached --target (default 0.9), else 1 (2 when a phase failed, or
when another run in this work tree holds ``build/mutate/.lock``).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "mutate"
SHIM = Path(__file__).resolve().parent / "shim"
MUTMUT = "mutmut==3.8.1"


@dataclass(frozen=True)
class Group:
    modules: tuple[str, ...]
    tests: tuple[str, ...]


# Each group's tests are the ones that guard its modules, chosen to run in a few minutes on two
# busy cores: mutmut runs, for each mutant, only those of them that reach the mutated function.
GROUPS = {
    "gate": Group(
        (
            "gitaudit/gate/evidence.py",
            "gitaudit/gate/assess.py",
            "gitaudit/gate/authority.py",
            "gitaudit/gate/plans.py",
            "gitaudit/verdict.py",
        ),
        # the whole attack catalogue: every attack ends at the gate's verdict
        ("tests/gate", "tests/adversarial"),
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
            "tests/faults/test_disk.py",  # a full disk while a seal is written
            "tests/run/test_deep_ledger.py",  # confirmations remembered (confirmed.json)
            "tests/adversarial/test_request.py",  # requests on the plans ref
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
            "tests/hooks",
            "tests/adversarial/test_hooks.py",
            "tests/adversarial/test_commit_msg.py",
            "tests/e2e/test_hooks.py",
            "tests/e2e/test_team.py",  # the pre-commit framework's entry
            "tests/run/test_memo.py",  # the hooks' fast path
        ),
    ),
    "fingerprint": Group(
        ("gitaudit/git/fingerprint.py",),
        (
            "tests/test_fingerprint.py",
            "tests/test_fingerprint_prefetch.py",
            "tests/e2e/test_fingerprint.py",  # `git audit run` and `status` as processes
            "tests/adversarial/test_workspace.py",  # attacks on what the fingerprint sees
            "tests/adversarial/test_hermetic.py",  # the fingerprinted tree vs what checks read
        ),
    ),
    "runner": Group(
        ("gitaudit/run/runner.py",),
        (
            "tests/run/test_run.py",
            "tests/run/test_attempts.py",
            "tests/run/test_incremental.py",  # carried steps, unknown outcomes, reconciliation
            "tests/adversarial/test_reconcile.py",
            "tests/edges/test_interrupts.py",  # Ctrl-C while steps run
        ),
    ),
}

KILLED = {"killed", "timeout"}  # a mutant that makes a test hang is caught too
STATUS = re.compile(r"^\s+(\S+): (.+)$")
ESTIMATE = re.compile(r"^(<no tests>|\d+ms) (\S+)$")

# Generation only: what `mutmut run` does before it runs any test.
GENERATE = """
import os, sys
from mutmut import __main__ as m
m.set_mutant_under_test("mutant_generation")
os.makedirs("mutants", exist_ok=True)
m.copy_src_dir()
m.copy_also_copy_files()
m.setup_source_paths()
m.create_mutants(int(sys.argv[1]))
"""


class PhaseFailed(Exception):
    pass


def _toml_list(items: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def prepare(name: str, group: Group) -> Path:
    work = BUILD / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for folder in ("gitaudit", "tests", "hooks", "docs"):
        shutil.copytree(ROOT / folder, work / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(SHIM, work / "shim", ignore=shutil.ignore_patterns("__pycache__"))
    config = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    config += (
        "\n[tool.mutmut]\n"
        'source_paths = ["gitaudit"]\n'
        # the hook shim `git audit hooks install` installs; the docs some tests check against
        'also_copy = ["hooks", "docs"]\n'
        f"only_mutate = {_toml_list(group.modules)}\n"
        'pytest_add_cli_args = ["-p", "no:randomly", "-p", "mutate_plugin", "-q"]\n'
        f"pytest_add_cli_args_test_selection = {_toml_list(group.tests)}\n"
        "use_git_change_detection = false\n"
    )
    (work / "pyproject.toml").write_text(config, encoding="utf-8")
    return work


def _kill_session(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # every process of it had ended already
        os.killpg(pid, signal.SIGKILL)


def phase(work: Path, label: str, argv: list[str], limit: float) -> str:
    """Run one step in *work*, its output kept in ``<label>.log``; raise PhaseFailed if it fails."""
    env = {k: v for k, v in os.environ.items() if k != "MUTANT_UNDER_TEST"}
    env["PYTHONPATH"] = os.pathsep.join([str(work / "shim"), str(work / "mutants")])
    env["MUTATE_HITS"] = str(work / "subprocess-hits.txt")
    log = work / f"{label}.log"
    # a session of its own: on the time limit the whole group goes (mutmut forks workers, which
    # would otherwise go on testing mutants beside the next group)
    proc = subprocess.Popen(
        [sys.executable, *argv],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        _kill_session(proc.pid)
        out, _ = proc.communicate()
        log.write_text(out or "", encoding="utf-8")
        raise PhaseFailed(f"{label}: still running after {limit:.0f} s (see {log})") from None
    except BaseException:
        _kill_session(proc.pid)
        proc.wait()
        raise
    log.write_text(out, encoding="utf-8")
    if proc.returncode != 0:
        tail = "\n".join(out.splitlines()[-40:])
        raise PhaseFailed(f"{label}: exit {proc.returncode} (see {log})\n{tail}")
    return out


def module_of(mutant: str) -> str:
    """``gitaudit/ledger/lookup.py`` for ``gitaudit.ledger.lookup.x_confirm__mutmut_3`` (and for
    a method's mutant, ``gitaudit.ledger.lookup.xǁCacheǁget__mutmut_1``)."""
    return mutant.rsplit(".", 1)[0].replace(".", "/") + ".py"


THREAT_MODEL = ROOT / "docs" / "threat-model.md"
# a row of the threat model's table of survivors: | `gate/plans.py` | `check_plan` 22 | ...
LISTED = re.compile(r"^\| `([\w/]+)\.py` \| `(\w+(?:\.\w+)?)` (\d+) \|", re.MULTILINE)


def listed_equivalents(text: str) -> set[str]:
    """mutmut's names of the survivors docs/threat-model.md lists as equivalent or harmless, each
    with why: ``gitaudit.gate.plans.x_check_plan__mutmut_22`` for the row `` `gate/plans.py` |
    `check_plan` 22 ``, ``gitaudit.crypto.wire.xǁWireReaderǁtext__mutmut_5`` for a method."""
    names = set()
    for path, function, number in LISTED.findall(text):
        module = "gitaudit." + path.replace("/", ".")
        owner, _, method = function.rpartition(".")
        mangled = f"xǁ{owner}ǁ{method}" if owner else f"x_{function}"
        names.add(f"{module}.{mangled}__mutmut_{number}")
    return names


def pick(every: list[str], sample: int, seed: int) -> list[str]:
    """A seeded sample of *sample* mutants of each module (all of them when *sample* <= 0)."""
    if sample <= 0:
        return every
    rng = random.Random(seed)  # noqa: S311 (a reproducible sample, not a secret)
    chosen: list[str] = []
    for module in sorted({module_of(m) for m in every}):
        mutants = [m for m in every if module_of(m) == module]
        chosen += rng.sample(mutants, min(sample, len(mutants)))
    return sorted(chosen)


def per_module(picked: dict[str, str], every: list[str]) -> dict[str, dict[str, int]]:
    modules: dict[str, dict[str, int]] = {}
    for mutant in every:
        counts = modules.setdefault(module_of(mutant), {"mutants": 0, "sampled": 0, "killed": 0})
        counts["mutants"] += 1
    for mutant, status in picked.items():
        counts = modules[module_of(mutant)]
        counts["sampled"] += 1
        counts["killed"] += status in KILLED
    return modules


def run_group(
    name: str,
    group: Group,
    sample: int,
    seed: int,
    jobs: int,
    limit: float,
) -> dict[str, object]:
    started = time.monotonic()
    work = prepare(name, group)
    phase(work, "generate", ["-c", GENERATE, str(jobs)], limit)
    estimates = phase(work, "stats", ["-m", "mutmut", "print-time-estimates"], limit)
    reached = {}
    for line in estimates.splitlines():
        if m := ESTIMATE.match(line.strip()):
            reached[m.group(2)] = m.group(1) != "<no tests>"
    every = sorted(reached)
    if not every:
        raise PhaseFailed(f"{name}: mutmut generated no mutants (see {work})")
    chosen = pick(every, sample, seed)
    run = ["-m", "mutmut", "run", "--max-children", str(jobs), *chosen]
    phase(work, "mutants", run, limit)
    out = phase(work, "results", ["-m", "mutmut", "results", "--all", "true"], limit)
    result = {m.group(1): m.group(2) for line in out.splitlines() if (m := STATUS.match(line))}
    picked = {m: result.get(m, "not checked") for m in chosen}
    killed = [m for m, s in picked.items() if s in KILLED]
    survivors = {m: s for m, s in picked.items() if s not in KILLED}
    # a survivor the threat model lists (with why it is equivalent or harmless) is accounted
    # for; any other one counts against the target
    listed = sorted(set(survivors) & listed_equivalents(THREAT_MODEL.read_text("utf-8")))
    score = (len(killed) + len(listed)) / len(picked)
    seconds = round(time.monotonic() - started)
    summary: dict[str, object] = {
        "group": name,
        "modules": list(group.modules),
        "tests": list(group.tests),
        "mutants": len(every),
        "reached": sum(reached.values()),
        "sampled": len(picked),
        "seed": seed,
        "killed": len(killed),
        "listed": listed,
        "timeouts": sum(1 for s in picked.values() if s == "timeout"),
        "score": round(score, 3),
        "seconds": seconds,
        "modules_scored": per_module(picked, every),
        "survivors": survivors,
    }
    (work / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(
        f"== mutate {name}: {len(killed)}/{len(picked)} killed ({len(killed) / len(picked):.0%}), "
        f"{len(listed)} more listed as equivalent or harmless: {score:.0%} accounted for, "
        f"of {len(every)} mutants, in {seconds} s",
        flush=True,
    )
    for mutant, status in survivors.items():
        why = "listed in docs/threat-model.md" if mutant in listed else "NOT LISTED"
        print(f"-- {status} ({why}): {mutant}")
        shown = phase(work, "show", ["-m", "mutmut", "show", mutant], limit)
        print(shown.strip(), flush=True)
    return summary


def table(summaries: list[dict[str, object]]) -> str:
    """One row per module: its mutants, how many were sampled and killed."""
    rows = ["| group | module | mutants | sampled | killed | score |", "|---|---|---|---|---|---|"]
    for s in summaries:
        modules = s["modules_scored"]
        assert isinstance(modules, dict)
        for module, n in sorted(modules.items()):
            score = f"{n['killed'] / n['sampled']:.0%}" if n["sampled"] else "-"
            rows.append(
                f"| {s['group']} | `{module}` | {n['mutants']} | {n['sampled']} | {n['killed']} "
                f"| {score} |"
            )
    return "\n".join(rows)


def exclusive() -> int | None:
    """Hold ``build/mutate/.lock`` until this process ends; None if another run holds it.

    Two runs at once in one work tree would each start a group by deleting its scratch copy, the
    one the other run's mutmut is working in (its cwd): that mutmut then fails on its next write
    (``FileNotFoundError: 'mutants/...meta'``) and the group is never scored."""
    BUILD.mkdir(parents=True, exist_ok=True)
    fd = os.open(BUILD / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd  # kept open: the lock goes with the process


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", default=",".join(GROUPS))
    parser.add_argument("--sample", type=int, default=25, help="mutants per module; 0: all")
    parser.add_argument("--modules", default="", help="only these of the groups' modules (paths)")
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--limit", type=float, default=3600, help="seconds per phase of a group")
    args = parser.parse_args()
    names = args.groups.split(",")
    unknown = [n for n in names if n not in GROUPS]
    if unknown:
        parser.error(f"unknown group(s) {', '.join(unknown)}; known: {', '.join(GROUPS)}")
    if exclusive() is None:
        holder = (BUILD / ".lock").read_text(encoding="utf-8").strip() or "?"
        print(
            f"!! another `make mutate` (pid {holder}) is running in {ROOT}: it would delete this "
            "run's scratch copies, or this run its; wait for it to finish",
            file=sys.stderr,
        )
        return 2
    try:
        import mutmut  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", MUTMUT], check=True)
    only = {m for m in args.modules.split(",") if m}
    every_module = {m for g in GROUPS.values() for m in g.modules}
    if only - every_module:
        parser.error(f"not a module of any group: {', '.join(sorted(only - every_module))}")
    summaries = []
    broken = []
    for name in names:
        group = GROUPS[name]
        if only:
            group = Group(tuple(m for m in group.modules if m in only), group.tests)
            if not group.modules:
                continue
        try:
            summaries.append(run_group(name, group, args.sample, args.seed, args.jobs, args.limit))
        except PhaseFailed as failed:
            print(f"!! mutate {name}: {failed}", file=sys.stderr, flush=True)
            broken.append(name)
    killed = sum(int(s["killed"]) for s in summaries)  # type: ignore[call-overload]
    sampled = sum(int(s["sampled"]) for s in summaries)  # type: ignore[call-overload]
    listed = sum(len(s["listed"]) for s in summaries)  # type: ignore[arg-type,misc]
    print()
    print(table(summaries))
    print(
        f"\n== mutate: {killed}/{sampled} killed ({killed / max(1, sampled):.0%}); with the "
        f"{listed} listed as equivalent or harmless, "
        f"{(killed + listed) / max(1, sampled):.0%} accounted for"
    )
    BUILD.mkdir(parents=True, exist_ok=True)
    (BUILD / "summary.json").write_text(json.dumps(summaries, indent=2) + "\n", encoding="utf-8")
    below = [str(s["group"]) for s in summaries if float(s["score"]) < args.target]  # type: ignore[arg-type]
    if below:
        print(
            f"== below the {args.target:.0%} target (killed, or listed with why in "
            f"docs/threat-model.md): {', '.join(below)}"
        )
    if broken:
        print(f"== not measured (a phase failed): {', '.join(broken)}")
        return 2
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())
