"""The hot commands' grammar is declared once (gitaudit/cli/grammar.py): the typer commands and
the fast path must agree on every parameter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer.main

from gitaudit.cli import grammar
from gitaudit.cli.app import app
from gitaudit.cli.fast import try_fast


def click_params(name: str) -> dict[str, Any]:
    """The parameters typer builds for command *name* (typer vendors click: read by duck type)."""
    group: Any = typer.main.get_command(app)
    return {p.name: p for p in group.commands[name].params}


@pytest.mark.parametrize("spec", list(grammar.FAST.values()), ids=lambda g: g.name)
def test_each_typer_command_has_exactly_the_declared_parameters(spec: grammar.Grammar) -> None:
    params = click_params(spec.name)
    assert set(params) == {p.dest for p in spec.params}
    for declared in spec.params:
        param = params[declared.dest]
        if declared.positional:
            assert param.param_type_name == "argument", declared.dest
            assert (param.nargs == -1) == declared.many
            continue
        assert param.param_type_name == "option", declared.dest
        assert sorted(param.opts) == sorted(declared.names), declared.dest
        assert param.is_flag == declared.flag, declared.dest
        assert param.help == declared.help
        if declared.value is int:
            assert param.min == declared.minimum


def test_every_option_of_the_fast_commands_is_parsed_fast() -> None:
    parse = grammar.RUN.parse
    argv = ["a", "b", "--plan", "x", "-j", "2", "--force", "--fresh", "--snapshot", "--json"]
    assert parse([*argv, "--step", "c", "-s", "d", "--label", "linux", "--label=ci"]) == {
        "steps": ["a", "b"],
        "step": ["c", "d"],
        "labels": ["linux", "ci"],
        "plan": "x",
        "jobs": 2,
        "force": True,
        "fresh": True,
        "snapshot": True,
        "as_json": True,
        "key": None,
    }
    assert parse(["--plan=x", "-k", "k.pub"]) == {
        "steps": None,
        "step": None,
        "labels": None,
        "plan": "x",
        "jobs": None,
        "force": False,
        "fresh": False,
        "snapshot": False,
        "as_json": False,
        "key": Path("k.pub"),
    }
    assert grammar.STATUS.parse(["HEAD", "-p", "app"]) == {
        "rev": "HEAD",
        "plan": "app",
        "for_ref": None,
        "as_json": False,
    }
    assert grammar.STATUS.parse(["--for", "refs/heads/main"]) == {
        "rev": None,
        "plan": None,
        "for_ref": "refs/heads/main",
        "as_json": False,
    }
    assert grammar.VERIFY.parse(["--json"]) == {"as_json": True}


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "-h"],
        ["run", "--jobs", "0"],  # below the minimum: typer explains
        ["run", "--jobs", "many"],
        ["run", "--plan"],  # a value is missing
        ["run", "--json=yes"],  # a flag takes no value
        ["status", "a", "b"],  # one revision at most
        ["status", "--unknown"],
        ["verify", "--plan", "x"],  # verify has no --plan
        ["verify", "extra"],
        ["log"],
        [],
    ],
)
def test_anything_unusual_is_left_to_typer(argv: list[str]) -> None:
    assert try_fast(argv) is None


def test_version_is_answered_without_typer(capsys: pytest.CaptureFixture[str]) -> None:
    from gitaudit import __version__

    assert try_fast(["--version"]) == 0
    assert capsys.readouterr().out == f"gitaudit {__version__}\n"


def test_typer_refuses_what_the_fast_path_left_to_it(tmp_path: Path) -> None:
    from tests.gitrepo import audit

    result = audit(tmp_path, "run", "--jobs", "0")
    assert result.code == 2 and "--jobs" in result.err
