"""The CI runner recipe played locally (docs/hooks-and-servers.md#a-trusted-ci-runner).

The server is a bare repository with gitaudit's pre-receive hook, and its policy says that only
the runner ``ci`` proves a tree for main (``trust policy --evidence refs/heads/main=ci``). The
developer's agent holds a runner key of its own: its evidence passes a topic branch, never main.
CI is a machine of its own (HOME, gitaudit home, cache, no git identity) whose only copy of the
``ci`` key is the forge's secret; the recipes of examples/ci/ run there unchanged.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitaudit.crypto.keystore import keys_dir
from tests.e2e.ci import (
    GITHUB_REPOSITORY,
    GITHUB_SERVER,
    GITLAB_PROJECT,
    GITLAB_SERVER,
    JOB_TOKEN,
    PUSH_TOKEN,
    GitHub,
    GitLab,
    Job,
    Machine,
)
from tests.e2e.conftest import Setup
from tests.gitrepo import audit

pytestmark = pytest.mark.slow  # three CI jobs and a dozen pushes each

MAIN = "refs/heads/main"
WORK = "refs/heads/agent-work"


@dataclass
class Team:
    setup: Setup
    root_key: str
    secret: str  # the ci runner's private key: held by the forge, nowhere else
    agent_key: Path
    tmp: Path

    @property
    def client(self) -> Path:
        return self.setup.client.path

    def machine(self, name: str) -> Machine:
        urls = (
            f"{GITHUB_SERVER}/{GITHUB_REPOSITORY}",
            f"{GITLAB_SERVER}/{GITLAB_PROJECT}.git",
            f"https://gitlab-ci-token:{JOB_TOKEN}@{GITLAB_SERVER[8:]}/{GITLAB_PROJECT}.git",
            f"https://gitaudit-ci:{PUSH_TOKEN}@{GITLAB_SERVER[8:]}/{GITLAB_PROJECT}.git",
        )
        return Machine.create(self.tmp / name, self.setup.server, *urls)

    def git_audit(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gitaudit", *args],
            cwd=self.client,
            capture_output=True,
            text=True,
            check=False,
            env=self.setup.env(),
        )


@pytest.fixture
def team(setup: Setup, tmp_path: Path) -> Team:
    client = setup.client.path
    # the CI key is made away from the developer's and the agent's keys; its private half goes
    # to the forge's secret store, its public half is trusted by a sealer, and main's rule
    # names it
    vault = tmp_path / "vault"
    made = audit(client, "keys", "generate", "--name", "ci", env={"GITAUDIT_HOME": str(vault)})
    assert made.code == 0, made.err
    steps = (
        ("trust", "add", str(vault / "keys" / "ci.pub"), "--role", "runner", "--name", "ci"),
        ("keys", "generate", "--name", "agent"),
        ("trust", "policy", "--evidence", f"{MAIN}=ci"),
    )
    for args in steps:
        done = audit(client, *args)
        assert done.code == 0, (args, done.err)
    agent_key = keys_dir() / "agent"  # in the developer's gitaudit home, beside theirs
    added = audit(client, "trust", "add", f"{agent_key}.pub", "--role", "runner", "--name", "agent")
    assert added.code == 0, added.err
    assert setup.push("origin", "refs/audit/plans").returncode == 0
    return Team(
        setup,
        setup.client.git("config", "audit.rootKey").strip(),
        (vault / "keys" / "ci").read_text(),
        agent_key,
        tmp_path,
    )


def agent_pushes_work(team: Team) -> str:
    """The agent's change, its own passing run, and the push of its branch (no rule there)."""
    team.setup.client.write("greeting.txt", "hello there\n")
    sha = team.setup.client.commit("a friendlier greeting")
    ran = audit(team.client, "run", "--key", str(team.agent_key))
    assert ran.code == 0, ran.out + ran.err
    pushed = team.git_audit("push", "origin", f"HEAD:{WORK}")
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    return sha


def main_is_declined(team: Team) -> None:
    hooked = team.git_audit("push", "origin", f"HEAD:{MAIN}")
    assert hooked.returncode != 0
    assert "refs/heads/main takes evidence from ci" in hooked.stderr, hooked.stderr
    forced = team.setup.push("--no-verify", "origin", f"HEAD:{MAIN}")
    assert forced.returncode != 0
    assert "pre-receive hook declined" in forced.stderr, forced.stderr
    assert team.setup.server_ref(MAIN) is None


def main_is_accepted(team: Team, sha: str) -> None:
    judged = audit(team.client, "status", "--for", MAIN)
    assert judged.code == 3, judged.out  # the ci run is on the server, not here yet
    synced = audit(team.client, "sync")
    assert synced.code == 0, synced.err
    judged = audit(team.client, "status", "--for", MAIN)
    assert judged.code == 0, judged.out
    assert "passing runs for this tree by ci" in judged.out
    pushed = team.git_audit("push", "origin", f"HEAD:{MAIN}")
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert team.setup.server_ref(MAIN) == sha


def assert_server_has_ci_evidence(team: Team, sha: str) -> None:
    """The server itself now judges the commit PASS for main: ci's evidence is there."""
    judged = audit(team.setup.server, "status", "--for", MAIN, sha)
    assert judged.code == 0, judged.out + judged.err


def key_left_nowhere(team: Team, *places: Path) -> None:
    body = team.secret.strip().splitlines()[1]  # a line of the private key's base64
    for place in places:
        for path in place.rglob("*"):
            if path.is_file() and not path.is_symlink():
                assert body not in path.read_text(errors="replace"), f"the key is in {path}"


def play_github(team: Team, sha: str) -> Callable[[str], Job]:
    machine = team.machine("github-runner")
    push = GitHub(
        machine,
        sha,
        WORK,
        variables={"GITAUDIT_ROOT_KEY": team.root_key},
        secrets={"GITAUDIT_RUNNER_KEY": team.secret},
    )
    count = iter(range(100))
    return lambda job: push.run(job, team.tmp / f"github-{job}-{next(count)}")


def test_github_runner_job_then_gate_job_then_main(team: Team) -> None:
    sha = agent_pushes_work(team)
    main_is_declined(team)
    play = play_github(team, sha)
    # the gate job alone (the runner has not run): the agent's evidence is advisory for main
    early = play("gate")
    assert early.step("Gate").code == 3, early.step("Gate").output
    assert "runs by agent are advisory here" in early.step("Gate").output
    assert "UNKNOWN" in early.summary
    runner = play("runner")
    assert runner.ok, [(s.name, s.code, s.output) for s in runner.steps]
    assert runner.names()[-3:] == ["Push the evidence", "Stop ssh-agent", "The run's verdict"]
    assert "default: PASS" in runner.step("Run the sealed plans").output
    assert "refs/audit/runs/default" in runner.step("Push the evidence").output
    assert_server_has_ci_evidence(team, sha)
    gate = play("gate")
    assert gate.ok, [(s.name, s.code, s.output) for s in gate.steps]
    assert "passing runs for this tree by ci" in gate.step("Gate").output
    assert "PASS" in gate.summary
    key_left_nowhere(team, team.tmp / "github-runner", *team.tmp.glob("github-*"))
    main_is_accepted(team, sha)


def test_gitlab_runner_job_then_gate_job_then_main(team: Team) -> None:
    sha = agent_pushes_work(team)
    main_is_declined(team)
    machine = team.machine("gitlab-runner")
    pipeline = GitLab(
        machine,
        sha,
        "agent-work",
        variables={"GITAUDIT_ROOT_KEY": team.root_key},
        files={"GITAUDIT_RUNNER_KEY": team.secret},
        scoped={"GITAUDIT_PUSH_TOKEN": PUSH_TOKEN},
    )
    early, _ = pipeline.run("gitaudit-gate", team.tmp / "gitlab-gate-0")
    assert early.steps[0].code == 3, early.steps[0].output
    runner, files = pipeline.run("gitaudit-runner", team.tmp / "gitlab-runner-job")
    assert runner.ok, runner.steps[0].output
    assert "default: PASS" in runner.steps[0].output
    assert not files["GITAUDIT_RUNNER_KEY"].exists(), "the key file outlived the run"
    assert_server_has_ci_evidence(team, sha)
    gate, _ = pipeline.run("gitaudit-gate", team.tmp / "gitlab-gate-1")
    assert gate.ok, gate.steps[0].output
    key_left_nowhere(team, team.tmp / "gitlab-runner", *team.tmp.glob("gitlab-*"))
    main_is_accepted(team, sha)


def test_github_gate_still_judges_when_the_run_fails(team: Team) -> None:
    """A forge without server hooks: the agent pushes a commit whose check fails. The runner
    job records and pushes the failing evidence and fails; the gate job, which runs whatever
    the runner did (a skipped required check would count as passed), fails too."""
    removed = audit(team.setup.server, "hooks", "uninstall", "--server")
    assert removed.code == 0, removed.err
    team.setup.client.write("greeting.txt", "good bye\n")
    sha = team.setup.client.commit("a greeting without hello")
    pushed = team.setup.push("--no-verify", "origin", f"HEAD:{WORK}")
    assert pushed.returncode == 0, pushed.stderr
    play = play_github(team, sha)
    runner = play("runner")
    codes = {s.name: s.code for s in runner.steps}
    assert codes["Run the sealed plans"] == 0  # the run's exit code is kept for the last step
    assert codes["Push the evidence"] == 0
    assert codes["Stop ssh-agent"] == 0
    assert codes["The run's verdict"] == 1
    assert "default: FAIL" in runner.step("Run the sealed plans").output
    gate = play("gate")
    assert gate.step("Gate").code == 1, gate.step("Gate").output
    assert "FAIL" in gate.summary
