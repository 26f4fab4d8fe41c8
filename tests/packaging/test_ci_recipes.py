"""examples/ci/, the trusted CI runner recipes: they parse, run the runner before the gate, keep
every value out of their scripts (no script injection), and use only what is documented: the
settings named in docs/hooks-and-servers.md ("A trusted CI runner") and `git audit` commands
and options that exist. tests/e2e/test_ci_runner.py runs them."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer

from gitaudit.cli.app import app
from tests.e2e.ci import GITHUB_RECIPE, GITLAB_RECIPE, load

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "hooks-and-servers.md"
GITHUB = load(GITHUB_RECIPE)
GITLAB = load(GITLAB_RECIPE)
# GitLab's own variables the recipe reads (https://docs.gitlab.com/ci/variables/predefined_variables/)
GITLAB_PREDEFINED = {"CI_COMMIT_BRANCH", "CI_COMMIT_SHA", "CI_SERVER_URL", "CI_PROJECT_PATH"}
# GitHub's: the default environment variables of a runner
GITHUB_PREDEFINED = {"GITHUB_SHA", "GITHUB_SERVER_URL", "GITHUB_ENV", "GITHUB_OUTPUT"}


def section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("\n## A trusted CI runner\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def github_scripts() -> list[tuple[str, str]]:
    return [
        (f"{job}: {step.get('name', '')}", step["run"])
        for job, spec in GITHUB["jobs"].items()
        for step in spec["steps"]
        if "run" in step
    ]


def gitlab_jobs() -> dict[str, dict[str, Any]]:
    return {k: v for k, v in GITLAB.items() if k.startswith(".") or "script" in v}


def gitlab_scripts() -> list[tuple[str, str]]:
    return [
        (name, line)
        for name, job in gitlab_jobs().items()
        for key in ("before_script", "script")
        for line in job.get(key, [])
    ]


def test_the_runner_job_comes_first_and_the_gate_always_judges() -> None:
    assert set(GITHUB["jobs"]) == {"runner", "gate"}
    gate = GITHUB["jobs"]["gate"]
    assert gate["needs"] == "runner"
    assert gate["if"] == "always()", "a skipped required check counts as passed on GitHub"
    assert GITHUB["jobs"]["runner"]["permissions"] == {"contents": "write"}
    assert gate["permissions"] == {"contents": "read"}
    assert GITHUB["permissions"] == {}
    triggers = dict(GITHUB)[True]  # type: ignore[index]  # YAML 1.1 reads the key `on` as true
    assert set(triggers) == {"push"}, "the workflow of the pushed commit, not a pull request's"
    assert GITLAB["stages"] == ["evidence", "gate"]
    jobs = gitlab_jobs()
    assert jobs["gitaudit-runner"]["stage"] == "evidence"
    assert jobs["gitaudit-gate"]["needs"] == ["gitaudit-runner"]
    assert jobs["gitaudit-gate"]["rules"][0]["when"] == "always"
    assert jobs["gitaudit-runner"]["environment"]["name"] == "gitaudit-runner"
    assert "environment" not in jobs["gitaudit-gate"], "the gate gets no key and no token"


def test_the_gate_judges_for_main_and_the_runner_pushes_evidence_only() -> None:
    gh = dict(github_scripts())
    assert gh["gate: Gate"] == 'git audit status --for "$GITAUDIT_FOR" "$GITHUB_SHA"'
    assert GITHUB["env"]["GITAUDIT_FOR"] == "refs/heads/main"
    assert "git audit push --evidence-only origin" in gh["runner: Push the evidence"]
    gl = dict(gitlab_scripts())
    assert gl["gitaudit-gate"] == 'git audit status --for "$GITAUDIT_FOR" "$CI_COMMIT_SHA"'
    assert GITLAB["variables"]["GITAUDIT_FOR"] == "refs/heads/main"
    assert "git audit push --evidence-only origin" in gl["gitaudit-runner"]


def test_no_value_is_spliced_into_a_script() -> None:
    """GitHub substitutes ${{ }} into a script's text before bash reads it: a value holding
    shell code would run. Values reach the scripts through env: only; GitLab's variables are
    environment variables already (and its $[[ inputs ]] are not used)."""
    for where, script in github_scripts():
        assert "${{" not in script, where
    for where, script in gitlab_scripts():
        assert "$[[" not in script, where
    for job in GITHUB["jobs"].values():
        for step in job["steps"]:
            assert set(step) <= {"name", "id", "if", "uses", "with", "env", "run"}, step


def test_no_python_module_runs_from_the_checkouts_folder() -> None:
    """Every step runs in the checkout of the judged tree, and `python -m X` searches the current
    folder first: a `pip.py` the tree holds would run instead of pip. Each `-m` runs with `-P`
    (tests/adversarial/test_ci.py), in the recipes and in the action."""
    from tests.packaging.test_action import ACTION

    action = [(s["name"], s["run"]) for s in ACTION["runs"]["steps"]]
    found = 0
    for where, script in github_scripts() + gitlab_scripts() + action:
        for call in re.findall(r"\bpython3?((?:\s+-\w+)*)\s+-m\b", script):
            found += 1
            assert "-P" in call.split(), (where, script)
    assert found == 4


def _expressions(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [e for v in node.values() for e in _expressions(v)]
    if isinstance(node, list):
        return [e for v in node for e in _expressions(v)]
    return re.findall(r"\$\{\{\s*(.*?)\s*\}\}", str(node))


def test_every_setting_the_recipes_read_is_documented() -> None:
    doc = section()
    expressions = set(_expressions(GITHUB))
    settings = {e for e in expressions if e.startswith(("secrets.", "vars."))}
    assert settings == {"secrets.GITAUDIT_RUNNER_KEY", "vars.GITAUDIT_ROOT_KEY"}
    assert expressions - settings == {"github.sha", "github.token", "steps.run.outputs.code"}
    for setting in settings:
        assert f"`{setting.split('.')[1]}`" in doc, setting
    used = {v for _, s in gitlab_scripts() for v in re.findall(r"\$\{?([A-Z][A-Z0-9_]*)", s)}
    own = set(GITLAB["variables"])
    assert {v for v in used if v.startswith("CI_")} <= GITLAB_PREDEFINED
    for name in sorted(v for v in used if v.startswith("GITAUDIT_") and v not in own):
        assert f"`{name}`" in doc, name
    for name in own:
        assert f"`{name}`" in doc, name
    github_env = {v for _, s in github_scripts() for v in re.findall(r"\$\{?(GITHUB_\w+)", s)}
    assert github_env <= GITHUB_PREDEFINED


def _invocations() -> list[tuple[str, list[str]]]:
    """Each `git audit ...` of the scripts, as words (up to the end of the command)."""
    found = []
    for where, script in github_scripts() + gitlab_scripts():
        for match in re.finditer(r"git audit ([^|;&)\n]*)", script.replace("\\\n", " ")):
            found.append((where, shlex.split(match.group(1))))
    return found


def test_every_git_audit_command_and_option_exists() -> None:
    root = typer.main.get_command(app)
    seen = set()
    for where, words in _invocations():
        command: Any = root
        while hasattr(command, "commands"):  # a group
            name = words.pop(0)
            assert name in command.commands, (where, name)
            command = command.commands[name]
        options = {o for p in command.params for o in p.opts if o.startswith("-")}
        for word in words:
            if word.startswith("-"):
                assert word in options, (where, command.name, word)
        seen.add(command.name)
    assert seen == {"sync", "run", "push", "report", "status"}


@pytest.mark.parametrize("recipe", [GITHUB_RECIPE, GITLAB_RECIPE])
def test_the_docs_link_each_recipe_and_each_recipe_links_the_docs(recipe: Path) -> None:
    doc = section()
    assert f"](../examples/ci/{recipe.name})" in doc
    assert "docs/hooks-and-servers.md#a-trusted-ci-runner" in recipe.read_text(encoding="utf-8")


def test_the_docs_give_the_set_up_and_the_order() -> None:
    doc = section()
    for needed in (
        "git audit keys generate --name ci",
        "git audit trust add ci.pub --role runner --name ci",
        "git audit trust policy --evidence refs/heads/main=ci",
        'git audit status --for refs/heads/main "$SHA"',
        "git audit push --evidence-only",
        "git audit sync",
    ):
        assert needed in doc, needed
