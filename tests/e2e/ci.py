"""Playing CI on this machine: the recipes of examples/ci/ executed as GitHub Actions and GitLab CI
would execute them, on a CI machine of their own (its own HOME, git configuration, gitaudit
home and cache, no git identity), against a bare server reached through the URL the forge
would give (``url.<server>.insteadOf`` in the CI machine's git configuration maps it).

Only what the recipes use is emulated, strictly: an expression, a ``uses:`` or a ``rules:``
the emulator does not know fails the test, so a change to a recipe is a change to its test.
The ``run:`` and ``script:`` shell code runs unchanged, with bash as the runners start it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
GITHUB_RECIPE = ROOT / "examples" / "ci" / "github-runner.yml"
GITLAB_RECIPE = ROOT / "examples" / "ci" / "gitlab-ci.yml"

GITHUB_SERVER = "https://github.example"
GITHUB_REPOSITORY = "team/project"
GITLAB_SERVER = "https://gitlab.example"
GITLAB_PROJECT = "team/project"
JOB_TOKEN = "job-token-1234"  # GitLab's CI_JOB_TOKEN: reads the repository
PUSH_TOKEN = "push-token-5678"  # a token allowed to push refs/audit/runs/*

# The install step is the one step not run: gitaudit is already on PATH (this checkout's).
INSTALL = 'python3 -P -m pip install --quiet --disable-pip-version-check "$GITAUDIT_INSTALL"'
# The composite actions the GitHub recipe uses, and what each amounts to here.
KNOWN_ACTIONS = ("actions/checkout@v4", "actions/setup-python@v5")
_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def load(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict), path
    return loaded


@dataclass
class Machine:
    """A CI machine: its own home, configuration and keys; gitaudit from this checkout."""

    home: Path
    server: Path

    @classmethod
    def create(cls, home: Path, server: Path, *urls: str) -> Machine:
        home.mkdir(parents=True)
        (home / ".gitconfig").write_text(
            "".join(f'[url "file://{server}"]\n\tinsteadOf = {url}\n' for url in urls)
        )
        return cls(home, server)

    def env(self) -> dict[str, str]:
        dropped = ("GIT_", "GITAUDIT_", "SSH_", "XDG_", "HOME")
        env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
        bindir = str(Path(sys.executable).parent)
        env.update(
            {
                "HOME": str(self.home),
                "XDG_CONFIG_HOME": str(self.home / ".config"),
                "XDG_CACHE_HOME": str(self.home / ".cache"),
                "GIT_CONFIG_GLOBAL": str(self.home / ".gitconfig"),
                "GIT_CONFIG_NOSYSTEM": "1",
                "PATH": f"{bindir}:{env.get('PATH', '/usr/bin:/bin')}",
            }
        )
        return env

    def git(self, cwd: Path, *args: str) -> str:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, env=self.env(), capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, (args, proc.stderr)
        return proc.stdout

    def checkout(self, url: str, sha: str, workspace: Path, depth: int) -> None:
        """What the forge's checkout does: a shallow fetch of the commit, detached."""
        workspace.mkdir(parents=True)
        self.git(workspace, "init", "-q")
        self.git(workspace, "remote", "add", "origin", url)
        self.git(workspace, "fetch", "-q", "--no-tags", f"--depth={depth}", "origin", sha)
        self.git(workspace, "checkout", "-q", "--detach", sha)


@dataclass
class Step:
    name: str
    code: int
    output: str


@dataclass
class Job:
    steps: list[Step] = field(default_factory=list)
    summary: str = ""

    @property
    def ok(self) -> bool:
        return all(s.code == 0 for s in self.steps)

    def step(self, name: str) -> Step:
        found = [s for s in self.steps if s.name == name]
        assert found, (name, [s.name for s in self.steps])
        return found[0]

    def names(self) -> list[str]:
        return [s.name for s in self.steps]


def _bash(script: str, cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
    )


def _stop_agent(env: Mapping[str, str]) -> None:
    """A job that failed half-way may leave the ssh-agent it started: end it, by its id."""
    pid = env.get("SSH_AGENT_PID", "")
    if pid.isdigit():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGTERM)


# ------------------------------------------------------------------------------ GitHub Actions


def _lookup(term: str, context: Mapping[str, Any]) -> str:
    node: Any = context
    for part in term.split("."):
        assert isinstance(node, Mapping) and part in node, f"unknown expression {term!r}"
        node = node[part]
    return str(node)


def evaluate(expression: str, context: Mapping[str, Any]) -> str:
    """The expressions the GitHub recipe uses: a context lookup (``github.sha``,
    ``secrets.NAME``, ``steps.ID.outputs.NAME``) and ``always()``."""
    expression = expression.strip()
    if expression == "always()":
        return "true"
    assert re.fullmatch(r"[a-z_]+(\.[A-Za-z_][\w-]*)+", expression), expression
    return _lookup(expression, context)


def substitute(text: str, context: Mapping[str, Any]) -> str:
    return _EXPR.sub(lambda m: evaluate(m.group(1), context), text)


@dataclass
class GitHub:
    """A push of *sha* to *ref*, and the settings of the repository (variables, secrets)."""

    machine: Machine
    sha: str
    ref: str
    variables: dict[str, str]
    secrets: dict[str, str]
    token: str = PUSH_TOKEN

    @property
    def url(self) -> str:
        return f"{GITHUB_SERVER}/{GITHUB_REPOSITORY}"

    def run(self, job_name: str, workdir: Path) -> Job:
        workflow = load(GITHUB_RECIPE)
        job = workflow["jobs"][job_name]
        workdir.mkdir(parents=True)
        workspace, temp = workdir / "workspace", workdir / "temp"
        temp.mkdir()
        files = {n: workdir / n for n in ("env", "output", "summary")}
        for f in files.values():
            f.write_text("")
        context: dict[str, Any] = {
            "github": {"sha": self.sha, "token": self.token},
            "vars": self.variables,
            "secrets": self.secrets,
            "steps": {},
        }
        env = {
            **self.machine.env(),
            **{k: str(v) for k, v in workflow.get("env", {}).items()},
            **{k: str(v) for k, v in job.get("env", {}).items()},
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_SHA": self.sha,
            "GITHUB_REF": self.ref,
            "GITHUB_SERVER_URL": GITHUB_SERVER,
            "GITHUB_REPOSITORY": GITHUB_REPOSITORY,
            "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_ENV": str(files["env"]),
            "GITHUB_OUTPUT": str(files["output"]),
            "GITHUB_STEP_SUMMARY": str(files["summary"]),
            "RUNNER_TEMP": str(temp),
        }
        result = Job()
        try:
            for step in job["steps"]:
                self._step(step, context, env, workspace, files, result)
        finally:
            _stop_agent(env)
        result.summary = files["summary"].read_text()
        return result

    def _step(
        self,
        step: dict[str, Any],
        context: dict[str, Any],
        env: dict[str, str],
        workspace: Path,
        files: dict[str, Path],
        result: Job,
    ) -> None:
        condition = step.get("if")
        if condition is None and not result.ok:  # success(): skipped after a failure
            return
        if condition is not None and evaluate(condition, context) != "true":
            return
        name = step.get("name", step.get("uses", ""))
        if "uses" in step:
            assert step["uses"] in KNOWN_ACTIONS, step["uses"]
            if step["uses"].startswith("actions/checkout@"):
                given = step.get("with", {})
                assert given.get("persist-credentials") is False, "the checks get no token"
                sha = substitute(str(given["ref"]), context)
                self.machine.checkout(self.url, sha, workspace, int(given.get("fetch-depth", 1)))
            result.steps.append(Step(name, 0, ""))
            return
        if step["run"] == INSTALL:
            result.steps.append(Step(name, 0, "gitaudit is on PATH"))
            return
        step_env = {
            **env,
            **{k: substitute(str(v), context) for k, v in step.get("env", {}).items()},
        }
        files["output"].write_text("")
        proc = _bash(step["run"], workspace, step_env)
        result.steps.append(Step(name, proc.returncode, proc.stdout + proc.stderr))
        for line in files["env"].read_text().splitlines():
            key, _, value = line.partition("=")
            env[key] = value
        files["env"].write_text("")
        outputs = dict(line.partition("=")[::2] for line in files["output"].read_text().split())
        if "id" in step:
            context["steps"][step["id"]] = {"outputs": outputs}


# --------------------------------------------------------------------------------- GitLab CI


@dataclass
class GitLab:
    """A branch pipeline for *sha* on *branch*, and the project's CI/CD variables."""

    machine: Machine
    sha: str
    branch: str
    variables: dict[str, str]
    files: dict[str, str]  # variables of type File: name -> content
    scope: str = "gitaudit-runner"  # the environment *files* and *scoped* are given to
    scoped: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"{GITLAB_SERVER}/{GITLAB_PROJECT}.git"

    def job_url(self) -> str:
        return self.url.replace("https://", f"https://gitlab-ci-token:{JOB_TOKEN}@")

    def run(self, job_name: str, workdir: Path) -> tuple[Job, dict[str, Path]]:
        """Run the job; also the paths where its File variables were written."""
        pipeline = load(GITLAB_RECIPE)
        job = dict(pipeline[job_name])
        base = job.pop("extends", None)
        if base is not None:
            job = {**pipeline[base], **job}
        assert self._included(job), job_name
        workdir.mkdir(parents=True)
        workspace, temp = workdir / "project", workdir / "project.tmp"
        temp.mkdir()
        depth = int(pipeline.get("variables", {}).get("GIT_DEPTH", 20))
        self.machine.checkout(self.job_url(), self.sha, workspace, depth)
        environment = job.get("environment", {}).get("name")
        scoped = environment == self.scope
        written = {}
        for name, content in self.files.items() if scoped else ():
            written[name] = temp / name
            written[name].write_text(content)
        env = {
            **self.machine.env(),
            **{k: str(v) for k, v in pipeline.get("variables", {}).items()},
            **{k: str(v) for k, v in job.get("variables", {}).items()},
            **self.variables,
            **(self.scoped if scoped else {}),
            **{k: str(v) for k, v in written.items()},
            "CI": "true",
            "GITLAB_CI": "true",
            "CI_COMMIT_SHA": self.sha,
            "CI_COMMIT_BRANCH": self.branch,
            "CI_PROJECT_DIR": str(workspace),
            "CI_PROJECT_PATH": GITLAB_PROJECT,
            "CI_SERVER_URL": GITLAB_SERVER,
            "CI_REPOSITORY_URL": self.job_url(),
            "CI_JOB_TOKEN": JOB_TOKEN,
        }
        lines = [line for line in job.get("before_script", []) + job["script"] if line != INSTALL]
        proc = _bash("\n".join(lines), workspace, env)
        return Job([Step(job_name, proc.returncode, proc.stdout + proc.stderr)]), written

    def _included(self, job: dict[str, Any]) -> bool:
        rules = job["rules"]
        assert [r["if"] for r in rules] == ["$CI_COMMIT_BRANCH"], rules
        return bool(self.branch)
