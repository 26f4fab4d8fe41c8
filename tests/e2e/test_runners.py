"""A CI matrix feeds one ledger: steps with `runs_on` need evidence from a runner carrying each
label, composed from several signed runs of the same tree; the newest outcome per step and label
counts, so a FAIL is never hidden by an older PASS."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.conftest import PLAN, Setup
from tests.gitrepo import audit, git

MATRIX = json.loads(json.dumps(PLAN))
MATRIX["steps"][1]["runs_on"] = ["linux", "macos"]
MATRIX["steps"][1]["pass_env"] = ["OUTCOME"]
MATRIX["steps"][1]["verify"].append(
    {"type": "run", "argv": ["sh", "-c", 'test "$OUTCOME" != fail']}
)


@dataclass
class Runner:
    name: str
    home: Path
    path: Path

    def audit(self, *args: str, outcome: str = "pass") -> tuple[int, str]:
        env = {"GITAUDIT_HOME": str(self.home), "OUTCOME": outcome}
        result = audit(self.path, *args, env=env)
        return result.code, result.out + result.err

    def push(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gitaudit", "push", "--evidence-only"],
            cwd=self.path,
            capture_output=True,
            text=True,
            check=False,
            env={**Setup.env(None), "GITAUDIT_HOME": str(self.home)},  # type: ignore[arg-type]
        )


@pytest.fixture
def matrix(setup: Setup, tmp_path: Path) -> tuple[Setup, dict[str, Runner]]:
    client = setup.client
    client.write_plan(MATRIX)
    client.commit("the check runs on linux and macos")
    sealed = audit(
        client.path, "plan", "seal", "-m", "matrix", "--allow-weaken", "--reason", "a test knob"
    )
    assert sealed.code == 0, sealed.err
    runners = {}
    for name, label in (("ci-linux", "linux"), ("ci-mac", "macos")):
        home = tmp_path / f"{name}-home"
        made = audit(
            client.path, "keys", "generate", "--name", name, env={"GITAUDIT_HOME": str(home)}
        )
        assert made.code == 0, made.err
        pub = str(home / "keys" / f"{name}.pub")
        added = audit(
            client.path, "trust", "add", pub, "--role", "runner", "--name", name, "--label", label
        )
        assert added.code == 0, added.err
        path = tmp_path / name
        git(tmp_path, "clone", "-q", str(client.path), str(path))
        git(path, "remote", "set-url", "origin", str(setup.server))
        git(path, "config", "audit.rootKey", client.git("config", "audit.rootKey").strip())
        runners[label] = Runner(name, home, path)
    assert setup.push("origin", "refs/audit/plans").returncode == 0
    for runner in runners.values():
        assert runner.audit("sync")[0] == 0
    return setup, runners


def server_verdict(setup: Setup) -> dict[str, object]:
    head = setup.client.git("rev-parse", "HEAD").strip()
    git(setup.server, "fetch", "-q", str(setup.client.path), f"{head}:refs/heads/candidate")
    return dict(audit(setup.server, "status", "candidate", "--json").json())


def codes(doc: dict[str, object]) -> list[str]:
    plans = doc["plans"]
    assert isinstance(plans, list)
    return [r["code"] for p in plans for r in p["reasons"]]


def test_each_label_needs_its_own_runner_and_the_evidence_composes(
    matrix: tuple[Setup, dict[str, Runner]],
) -> None:
    setup, runners = matrix
    # each runner's job passes on its own part; the gate wants both labels
    code, out = runners["linux"].audit("run", "--label", "linux")
    assert code == 0, out
    assert runners["linux"].push().returncode == 0
    half = server_verdict(setup)
    assert half["verdict"] == "UNKNOWN"
    assert codes(half) == ["evidence.runner-label"]
    assert "labelled macos" in json.dumps(half)
    code, out = runners["macos"].audit("run", "--label", "macos")
    assert code == 0, out
    pushed = runners["macos"].push()
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    whole = server_verdict(setup)
    assert whole["verdict"] == "PASS", whole
    notes = [n for p in whole["plans"] for n in p["notes"]]  # type: ignore[attr-defined]
    assert any(n.startswith("composed from 2 runs") for n in notes), notes
    # the developer's clone sees the same through its remote-tracking copy, and pushes the branch
    assert audit(setup.client.path, "sync").code == 0
    assert audit(setup.client.path, "status").code == 0
    assert setup.audit_push().returncode == 0


def test_a_newer_failure_on_one_label_is_not_hidden_by_an_older_pass(
    matrix: tuple[Setup, dict[str, Runner]],
) -> None:
    setup, runners = matrix
    for label, runner in runners.items():
        assert runner.audit("run", "--label", label)[0] == 0
        assert runner.push().returncode == 0
    assert server_verdict(setup)["verdict"] == "PASS"
    code, out = runners["macos"].audit("run", "--label", "macos", "--fresh", outcome="fail")
    assert code == 1, out
    assert runners["macos"].push().returncode == 0
    failed = server_verdict(setup)
    assert failed["verdict"] == "FAIL"
    assert codes(failed) == ["step.failed"]


def test_labels_are_the_trust_sets_not_the_runners_word(
    matrix: tuple[Setup, dict[str, Runner]],
) -> None:
    setup, runners = matrix
    code, out = runners["linux"].audit("run", "--label", "macos")
    assert code == 1
    assert "runner ci-linux does not carry the label(s) macos" in out
    # the developer's own key is a runner with no labels: its full run proves neither label
    assert audit(setup.client.path, "run", env={"OUTCOME": "pass"}).code == 0
    mine = dict(audit(setup.client.path, "status", "--json").json())
    assert mine["verdict"] == "UNKNOWN"
    assert codes(mine) == ["evidence.runner-label", "evidence.runner-label"]
