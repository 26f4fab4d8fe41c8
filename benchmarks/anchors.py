"""Side-by-side anchors: gitaudit against in-toto-run and plan-auditor 2.6.3, measured together.

``make bench-anchors`` installs ``in-toto`` and ``plan-auditor==2.6.3`` into their own virtual
environment (``.venv-anchors``, never gitaudit's) and runs this script with gitaudit's
interpreter, pointing it at that environment with ``--anchors``.

What is compared (medians of interleaved rounds, [min-max] beside; every tool in the same
rounds, on the same files):

* **recording one ``true`` step on the 50,000-file repository** of ``_util.big_repo``:
  ``git audit run --fresh`` (the step executed, the work tree fingerprinted before and after, the
  evidence signed and committed) against ``in-toto-run --materials . --products . -- true``
  (every file hashed before and after, an Ed25519-signed link written; ``.git`` excluded, as
  gitaudit excludes it). Target: gitaudit >= 8x faster than in-toto-run.
* **the gate** on the same repository: ``git audit status HEAD`` against ``plan-auditor audit``
  (its final gate, over its one-step plan, sealed, HMAC key set; it re-executes every check,
  which is also how it records: ``plan-auditor run`` skips steps already verified, so after the
  first call it records nothing). Target: gitaudit not slower.
* **per-step overhead**, on a small repository: a 21-step plan minus a 1-step plan, divided by
  20 (every step is ``true``), for ``git audit run --fresh --jobs 1`` and ``plan-auditor audit``
  (both execute every step). Target: gitaudit's not larger.

Run: ``make bench-anchors`` (or ``.venv/bin/python benchmarks/anchors.py --anchors DIR
[--rounds R]``; ``GITAUDIT_BENCH_QUICK=1``: 5,000 files).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ledger_util import (
    GIT_AUDIT,
    audit,
    bench_env,
    finish,
    info_line,
    init_audited_repo,
    interleaved,
    plan_doc,
    quick,
    run_steps,
    timed_run,
    verdict_line,
)
from _util import big_repo, copy_repo, git

RECORD_SPEEDUP = 8.0


def pa_plan(steps: int) -> dict[str, Any]:
    return {
        "task": "anchor",
        "created": "2026-09-06T00:00:00Z",
        "requirements": [{"id": "REQ-001", "description": "true runs", "priority": "must"}],
        "steps": [
            {
                "id": i + 1,
                "title": f"true {i + 1}",
                "depends_on": [],
                "covers": ["REQ-001"],
                "verify": [{"type": "run", "argv": ["true"]}],
            }
            for i in range(steps)
        ],
    }


def pa_setup(pa: Path, project: Path, steps: int, scratch: Path) -> dict[str, str]:
    """A sealed plan-auditor plan of *steps* ``true`` steps in *project*; its environment."""
    key = scratch / f"hmac-{project.name}.key"
    key.write_text(os.urandom(32).hex() + "\n")
    key.chmod(0o600)
    env = {**os.environ, "PLAN_AUDITOR_HMAC_KEY_FILE": str(key)}
    (project / ".plan-auditor").mkdir(exist_ok=True)
    (project / ".plan-auditor" / "plan.json").write_text(json.dumps(pa_plan(steps)))
    request = scratch / f"request-{project.name}.json"
    check = {"type": "run", "argv": ["true"]}
    request.write_text(
        json.dumps(
            {
                "task": "anchor",
                "requirements": [
                    {
                        "id": "REQ-001",
                        "description": "true runs",
                        "priority": "must",
                        "acceptance_checks": [check],
                    }
                ],
            }
        )
    )
    tool = str(pa / "bin" / "plan-auditor")
    # the order its docs imply: integrity first (it completes once a request and a seal exist)
    timed_run([tool, "integrity", "init", "."], project, env=env, expect=None)
    for argv in (
        [tool, "request", "init", "--file", str(request), "."],
        [tool, "plan", "verify", "."],
        [tool, "integrity", "init", "."],
        [tool, "run", "."],
        [tool, "audit", "."],
    ):
        timed_run(argv, project, env=env)
    return env


def ed25519_pem(path: Path, anchors: Path) -> None:
    """An unencrypted PKCS8 Ed25519 key for in-toto, made with the anchors' own cryptography."""
    code = (
        "import sys\n"
        "from cryptography.hazmat.primitives import serialization as s\n"
        "from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey\n"
        "k = Ed25519PrivateKey.generate()\n"
        "open(sys.argv[1], 'wb').write(k.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8,"
        " s.NoEncryption()))\n"
    )
    timed_run([str(anchors / "bin" / "python"), "-c", code, str(path)], path.parent)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anchors", type=Path, default=Path(".venv-anchors"))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    anchors = args.anchors.resolve()
    for tool in ("in-toto-run", "plan-auditor"):
        if not (anchors / "bin" / tool).exists():
            raise SystemExit(f"{anchors}/bin/{tool} is missing: run `make bench-anchors`")
    files = 5_000 if quick() else 50_000

    scratch = Path(tempfile.mkdtemp(prefix="gitaudit-bench-anchors-"))
    try:
        source = big_repo(files)
        bench_env(scratch)
        big = copy_repo(source, scratch / "big")
        init_audited_repo(big, plan_doc(run_steps(1, ["true"])), fresh=False)
        audit(big, "run")
        pa_big = pa_setup(anchors, big, 1, scratch)
        git(big, "status", "--porcelain")
        key = scratch / "in-toto.pem"
        ed25519_pem(key, anchors)
        links = scratch / "links"
        links.mkdir()
        in_toto = [
            str(anchors / "bin" / "in-toto-run"),
            "--step-name",
            "true",
            "--signing-key",
            str(key),
            "--materials",
            ".",
            "--products",
            ".",
            "--exclude",
            ".git",
            "--metadata-directory",
            str(links),
            "--",
            "true",
        ]
        timed_run(in_toto, big)
        small: dict[int, tuple[Path, dict[str, str]]] = {}
        for steps in (1, 21):
            repo = scratch / f"small-{steps}"
            init_audited_repo(repo, plan_doc(run_steps(steps, ["true"])))
            audit(repo, "run", "--jobs", "1")
            small[steps] = (repo, pa_setup(anchors, repo, steps, scratch))
        pa = str(anchors / "bin" / "plan-auditor")
        print(f"{files} files; anchors from {anchors}")

        commands: dict[str, Callable[[], object]] = {
            "git-status": lambda: timed_run(["git", "status", "--porcelain"], big),
            "ga-record": lambda: timed_run([GIT_AUDIT, "run", "--fresh"], big),
            "in-toto": lambda: timed_run(in_toto, big),
            "ga-gate": lambda: timed_run([GIT_AUDIT, "status", "HEAD"], big),
            "pa-gate": lambda: timed_run([pa, "audit", "."], big, env=pa_big),
        }
        for steps, (repo, env) in small.items():
            commands[f"ga-{steps}"] = functools.partial(
                timed_run, [GIT_AUDIT, "run", "--fresh", "--jobs", "1"], repo
            )
            commands[f"pa-{steps}"] = functools.partial(
                timed_run, [pa, "audit", "."], repo, env=env
            )
        m = interleaved(commands, args.rounds)
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"\nmedians of {args.rounds} interleaved rounds, [min-max] (load {load}):")
        info_line("baseline: git status --porcelain", m["git-status"])
        info_line("in-toto-run, one `true` step, materials+products", m["in-toto"], m["ga-record"])
        info_line("plan-auditor audit (its gate)", m["pa-gate"], m["ga-gate"])
        ga_step = (m["ga-21"] - m["ga-1"]) / 20
        pa_step = (m["pa-21"] - m["pa-1"]) / 20
        print(
            f"  per-step overhead: gitaudit {ga_step * 1000:.1f} ms, plan-auditor "
            f"{pa_step * 1000:.1f} ms (ratios above: anchor / gitaudit)"
        )
        print("\nresults:")
        results = [
            verdict_line(
                "git audit run --fresh, one step (vs in-toto-run / 8)",
                m["ga-record"],
                m["in-toto"] / RECORD_SPEEDUP,
                m["in-toto"],
            ),
            verdict_line(
                "git audit status HEAD (vs plan-auditor audit)",
                m["ga-gate"],
                m["pa-gate"],
                m["pa-gate"],
            ),
            verdict_line(
                "per-step overhead (vs plan-auditor)",
                ga_step,
                max(pa_step, 0.0),
                pa_step if pa_step > 0 else None,
            ),
        ]
        print(
            f"  (gitaudit records {m['in-toto'] / m['ga-record']:.1f}x faster than in-toto-run; "
            f"its gate is {m['pa-gate'] / m['ga-gate']:.1f}x faster than plan-auditor audit)"
        )
        return finish(results)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
