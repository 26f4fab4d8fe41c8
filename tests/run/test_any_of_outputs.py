"""An ``any_of`` clause ties each alternative to an output of its own
(``dep.no-output-contract``); the dependant relies on the alternative that was verified."""

from __future__ import annotations

import json

import pytest

from gitaudit.git.repo import open_repo
from gitaudit.ledger.runs import read_run
from tests.gitrepo import GitRepo, audit
from tests.run.conftest import Sealer, make_plan, run_step


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_dependant_checks_the_outputs_of_the_verified_alternatives(
    repo: GitRepo, sealed: Sealer, jobs: str
) -> None:
    """`evidence` needs `attestation` or `probe`; `probe` fails and never writes its output.
    The dependant checked every alternative's output contract, so it was blocked by the
    alternative it does not rely on ("upstream output probe/out no longer holds") and the run
    FAILed, whichever alternative passed: an OR clause with output contracts was an AND."""
    repo.write(".gitignore", "out-*.txt\n")
    sealed(
        make_plan(
            run_step("attestation", "sh", "-c", "echo eu >out-a.txt", outputs={"out": "out-a.txt"}),
            run_step("probe", "false", outputs={"out": "out-p.txt"}),
            run_step(
                "evidence",
                "grep",
                "-q",
                "eu",
                "out-a.txt",
                deps=[{"any_of": ["attestation", "probe"]}],  # type: ignore[list-item]
                requires=[("attestation", "out"), ("probe", "out")],
            ),
        )
    )
    result = audit(repo.path, "run", "--jobs", jobs)
    handle = open_repo(repo.path)
    doc = read_run(handle.git, str(handle.git.references["refs/audit/runs/default"].target)).doc
    steps = {sid: entry["status"] for sid, entry in doc["steps"].items()}
    assert steps == {"attestation": "passed", "probe": "failed", "evidence": "passed"}, doc
    upstream = doc["steps"]["evidence"]["upstream"]
    assert [(u["step"], u["output"], u["passed"]) for u in upstream] == [
        ("attestation", "out", True)
    ], json.dumps(upstream)
    assert result.code == 0, result.out + result.err
    status = audit(repo.path, "status")
    assert status.code == 0, status.out + status.err
