"""Attacks on the shipped CI recipes (action.yml, examples/ci/): what the pushed tree holds.

A CI job checks out the commit it judges and runs its steps in that checkout's folder. The agent
controls every file of the tree except what the forge keeps it from changing (the workflow
files, when its token lacks the `workflow` scope; a GitLab configuration kept in another
project). Nothing the tree holds may run before the gate, nor decide what the gate is.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.adversarial.conftest import World
from tests.e2e.ci import GITHUB_RECIPE, GITLAB_RECIPE, load
from tests.packaging.test_action import ACTION, run_action

# What the agent commits: a `pip` that the tree's folder holds. It leaves a mark, and puts a
# `git-audit` that says PASS first on the later steps' PATH ($GITHUB_PATH, as any step may).
PLANTED = """\
import os, pathlib
temp = pathlib.Path(os.environ["RUNNER_TEMP"])
(temp / "planted-ran").write_text("the tree's pip ran\\n")
bin = temp / "planted-bin"
bin.mkdir(exist_ok=True)
tool = bin / "git-audit"
tool.write_text("#!/bin/sh\\necho 'PASS  tree (the agent says so)'\\nexit 0\\n")
tool.chmod(0o755)
if os.environ.get("GITHUB_PATH"):
    with open(os.environ["GITHUB_PATH"], "a") as added:
        added.write(f"{bin}\\n")
"""
PLANTS = {
    "module": {"pip.py": PLANTED},
    "package": {"pip/__init__.py": "", "pip/__main__.py": PLANTED},
}


def _pushed_with(world: World, tmp_path: Path, files: dict[str, str]) -> tuple[Path, str]:
    """The agent's commit holding *files*, pushed with the audit refs to a bare origin (a host
    without pre-receive), and the CI job's fresh clone of it: the clone and the commit."""
    for rel, text in files.items():
        world.repo.write(rel, text)
    head = world.repo.commit("agent: a helper")
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    world.repo.git("push", "-q", str(origin), "HEAD:refs/heads/main", "refs/audit/*:refs/audit/*")
    clone = tmp_path / "ci"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
    return clone, head


def _install_lines() -> list[tuple[str, str]]:
    """Every shipped command that installs gitaudit: the action's, and each recipe's job's."""
    steps = ACTION["runs"]["steps"]
    lines = [("action", s["run"]) for s in steps if s["name"] == "Install gitaudit"]
    github = load(GITHUB_RECIPE)
    for job, spec in github["jobs"].items():
        lines += [(f"github-{job}", s["run"]) for s in spec["steps"] if "pip" in s.get("run", "")]
    gitlab = load(GITLAB_RECIPE)
    lines += [("gitlab", line) for line in gitlab[".gitaudit"]["before_script"] if "pip" in line]
    assert len(lines) == 4, lines
    return lines


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_attack_ci_action_install_step_runs_the_trees_pip(
    sealed: World, tmp_path: Path, plant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's commit has no evidence (the gate says UNKNOWN) and holds a `pip.py` (or a
    `pip/` package) at its root. The action's first step ran `python3 -m pip install` in the
    checkout's folder, which Python searched first: the tree's pip ran instead of pip, and put
    a `git-audit` saying PASS first on the later steps' PATH ($GITHUB_PATH). The Gate step ran
    it: exit 0, `verdict` PASS (both forms, before the fix). The install runs `python3 -P`,
    which leaves the current folder off the path: pip runs, the gate says UNKNOWN."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # `pip install pip`: already there, nothing fetched
    clone, head = _pushed_with(sealed, tmp_path, PLANTS[plant])
    work = tmp_path / "job"
    work.mkdir()
    root_key = sealed.alice.public_key.fingerprint()
    steps, outputs, _ = run_action(
        clone, {"install": "pip", "rev": head, "root-key": root_key}, work
    )
    assert not (work / "planted-ran").exists(), steps[0]
    assert steps[0] == ("Install gitaudit", 0, steps[0][2]), steps[0]
    assert outputs["verdict"] == "UNKNOWN" and steps[-1][1] == 3, steps


@pytest.mark.parametrize("plant", sorted(PLANTS))
@pytest.mark.parametrize("where", ["action", "github-runner", "github-gate", "gitlab"])
def test_attack_ci_recipe_install_runs_the_trees_pip(
    sealed: World, tmp_path: Path, plant: str, where: str
) -> None:
    """The same commit under each shipped install command: the action's, the trusted runner
    recipe's two jobs (the runner job installs before it loads the runner key into ssh-agent,
    so the tree's pip could also put an `ssh-add` of its own first on PATH and read the key;
    the gate job is main's required check), and GitLab's `before_script`. Each ran
    `python3 -m pip` in the checkout's folder, so the tree's pip ran (all eight, before the
    fix); each now runs `python3 -P -m pip`."""
    clone, _ = _pushed_with(sealed, tmp_path, PLANTS[plant])
    work = tmp_path / "job"
    work.mkdir()
    (work / "github-path").write_text("")
    line = dict(_install_lines())[where]
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "RUNNER_TEMP": str(work),
        "GITHUB_PATH": str(work / "github-path"),
        "PIP_NO_INDEX": "1",
        "INSTALL": "pip",
        "GITAUDIT_INSTALL": "pip",
    }
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", line],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert not (work / "planted-ran").exists(), line
    assert (work / "github-path").read_text() == ""
    assert proc.returncode == 0, proc.stdout + proc.stderr
