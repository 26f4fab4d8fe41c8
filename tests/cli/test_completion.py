"""`git audit completion bash|zsh|fish`: the generated scripts, loaded into the real shells,
complete commands, subcommands, options and (after --plan) the repository's plan names, for
`git-audit` and for `git audit`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo, audit


def _script(repo: GitRepo, shell: str, tmp_path: Path) -> Path:
    result = audit(repo.path, "completion", shell)
    assert result.code == 0, result.err
    path = tmp_path / f"completion.{shell}"
    path.write_text(result.out)
    return path


def _shell(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is needed for this test; .ci/run installs it")
    return found


def _plans(repo: GitRepo) -> None:
    repo.write_plan({"steps": [{"id": 1, "verify": []}]}, "backend")
    repo.write_plan({"steps": [{"id": 1, "verify": []}]}, "docs")


BASH_CASES = [
    ("COMP_WORDS=(git-audit pl); COMP_CWORD=1; _gitaudit_bash", ["plan"]),
    ("COMP_WORDS=(git-audit plan s); COMP_CWORD=2; _gitaudit_bash", ["seal", "show"]),
    ("COMP_WORDS=(git-audit status --j); COMP_CWORD=2; _gitaudit_bash", ["--json"]),
    ("COMP_WORDS=(git-audit run --plan ''); COMP_CWORD=3; _gitaudit_bash", ["backend", "docs"]),
    ("COMP_WORDS=(git-audit completion ''); COMP_CWORD=2; _gitaudit_bash", ["--help", "-h"]),
    ("words=(git audit tr); cword=2; _git_audit", ["trust"]),
    ("words=(git audit trust a); cword=3; _git_audit", ["add", "anchor"]),
]


@pytest.mark.parametrize(("line", "expected"), BASH_CASES)
def test_bash(repo: GitRepo, tmp_path: Path, line: str, expected: list[str]) -> None:
    _plans(repo)
    script = _script(repo, "bash", tmp_path)
    program = f'source {script}; {line}; printf "%s\\n" "${{COMPREPLY[@]}}"'
    out = subprocess.run(
        [_shell("bash"), "--norc", "-c", program],
        cwd=repo.path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert sorted(out.stdout.split()) == sorted(expected), out.stderr


ZSH_CASES = [
    ("git-audit pl", ["plan"]),
    ("git-audit plan s", ["seal", "show"]),  # compadd filters by prefix: both offered here
    ("git-audit status --plan ", ["backend", "docs"]),
]


@pytest.mark.parametrize(("line", "expected"), ZSH_CASES)
def test_zsh(repo: GitRepo, tmp_path: Path, line: str, expected: list[str]) -> None:
    _plans(repo)
    script = _script(repo, "zsh", tmp_path)
    words = line.split(" ")
    quoted = " ".join(f"'{w}'" for w in words)
    program = (
        "compdef() { :; }\n"
        'compadd() { [[ $1 == -a ]] && print -l -- "${(@P)2}"; }\n'
        f"source {script}\n"
        f"words=({quoted}); CURRENT={len(words)}\n"
        "_git-audit\n"
    )
    out = subprocess.run(
        [_shell("zsh"), "-f", "-c", program],
        cwd=repo.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    offered = [w for w in out.stdout.split() if w.startswith(words[-1])]
    assert sorted(offered) == sorted(expected), out.stdout + out.stderr


FISH_CASES = [
    ("git-audit pl", ["plan"]),
    ("gitaudit plan s", ["seal", "show"]),
    ("git-audit status --plan ", ["backend", "docs"]),
    ("git audit tr", ["trust"]),
]


@pytest.mark.parametrize(("line", "expected"), FISH_CASES)
def test_fish(repo: GitRepo, tmp_path: Path, line: str, expected: list[str]) -> None:
    _plans(repo)
    script = _script(repo, "fish", tmp_path)
    out = subprocess.run(
        [_shell("fish"), "--no-config", "-c", f"source {script}; complete -C '{line}'"],
        cwd=repo.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    offered = [row.split("\t")[0] for row in out.stdout.splitlines()]
    assert sorted(offered) == sorted(expected), out.stdout + out.stderr


def test_an_unknown_shell_is_a_usage_error(repo: GitRepo) -> None:
    result = audit(repo.path, "completion", "tcsh")
    assert result.code == 2 and "use bash, zsh or fish" in result.err
