"""``--version`` and ``-h`` answer without typer or pygit2, and say exactly what typer would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gitaudit.cli import helptext
from gitaudit.cli.manpage import generate_help

ROOT = Path(__file__).resolve().parents[2]

SHOW_IMPORTS = (
    "import runpy, sys\n"
    "sys.argv = ['git-audit', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('gitaudit', run_name='__main__')\n"
    "finally:\n"
    "    heavy = sorted(m for m in ('typer', 'pygit2', 'rich', 'click') if m in sys.modules)\n"
    "    sys.stderr.write('IMPORTED ' + ' '.join(heavy) + '\\n')\n"
)


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR")}
    return subprocess.run(
        [sys.executable, "-c", SHOW_IMPORTS, *args],
        capture_output=True,
        text=True,
        check=False,
        env={**clean, **(env or {})},
    )


def _imported(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stderr.rsplit("IMPORTED", 1)[1].strip()


def test_shipped_help_text_is_current() -> None:
    text = (ROOT / "gitaudit" / "cli" / "helptext.py").read_text()
    assert text == generate_help(), "run `make manpage` and commit gitaudit/cli/helptext.py"


def test_version_and_help_need_neither_typer_nor_pygit2() -> None:
    version = _run("--version")
    assert version.returncode == 0 and version.stdout.startswith("gitaudit ")
    assert _imported(version) == ""
    for flag in ("-h", "--help"):
        shown = _run(flag)
        assert shown.returncode == 0
        assert shown.stdout == helptext.TEXT
        assert _imported(shown) == ""


def test_help_is_typer_s_own_wherever_it_would_differ() -> None:
    """At another width (or with colour forced) typer renders the help itself."""
    wide = _run("-h", env={"COLUMNS": "120"})
    assert wide.returncode == 0 and "Usage: git-audit" in wide.stdout
    assert wide.stdout != helptext.TEXT
    assert "typer" in _imported(wide)


def test_the_pre_rendered_help_is_what_typer_prints() -> None:
    from typer.testing import CliRunner

    from gitaudit.cli.app import app

    env = {"COLUMNS": "80", "TERM": "dumb", "FORCE_COLOR": None, "NO_COLOR": None}
    rendered = CliRunner().invoke(app, ["--help"], prog_name="git-audit", env=env).output
    assert rendered == helptext.TEXT


def test_every_command_s_line_in_a_listing_is_its_first_paragraph_unbroken() -> None:
    """The listing wraps a command's summary at the terminal's width, not at the docstring's:
    typer's rich listing would keep the docstring's line breaks ("signed commit on" cut short,
    the rest on the next line)."""
    import typer

    from gitaudit.cli.app import app

    def commands(group: typer.Typer) -> list[str]:
        out = [info.short_help or "" for info in group.registered_commands]
        for sub in group.registered_groups:
            assert sub.typer_instance is not None
            out += commands(sub.typer_instance)
        return out

    lines = commands(app)
    assert len(lines) > 30 and all(lines)
    assert not [line for line in lines if "\n" in line]
    assert "signed commit on refs/audit/runs/<plan>. Exit 0 PASS" in helptext.TEXT
