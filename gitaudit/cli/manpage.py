"""Generate ``git-audit.1`` from the command tree, so ``git audit --help`` (which git turns into
``man git-audit``) shows the same text as ``-h``. Run ``make manpage`` after changing the CLI; a
test fails when the shipped page is stale.
"""

from __future__ import annotations

import sys
from typing import Any

import typer


def _escape(text: str) -> str:
    lines = []
    for line in text.replace("\\", "\\\\").splitlines():
        if line.startswith((".", "'")):
            line = "\\&" + line
        lines.append(line.replace("-", "\\-"))
    return "\n".join(lines)


def _walk(cmd: Any, path: list[str]) -> list[tuple[list[str], Any]]:
    found = [(path, cmd)]
    if hasattr(cmd, "commands"):
        for name in sorted(cmd.commands):
            found.extend(_walk(cmd.commands[name], [*path, name]))
    return found


def generate() -> str:
    from gitaudit.cli.app import app

    root = typer.main.get_command(app)
    out = [
        '.TH GIT-AUDIT 1 "" "gitaudit" "Git Manual"',  # no version: the page is committed
        ".SH NAME",
        "git\\-audit \\- sealed plans, signed evidence runs and a completion gate, all in git",
        ".SH SYNOPSIS",
        ".B git audit",
        "[\\-\\-debug] [\\-h] \\fICOMMAND\\fR [\\fIARGS\\fR]",
        ".SH DESCRIPTION",
        _escape(root.help or ""),
        ".SH EXIT STATUS",
        "0 success or PASS; 1 error or FAIL; 2 usage error; 3 UNKNOWN (no fresh evidence).",
        ".SH COMMANDS",
    ]
    for path, cmd in _walk(root, []):
        if not path or hasattr(cmd, "commands"):
            continue
        ctx = typer.Context(cmd, info_name=" ".join(["git audit", *path]))
        out.append(".TP")
        out.append(f".B git audit {' '.join(path)}")
        usage = " ".join(cmd.collect_usage_pieces(ctx))
        if usage:
            out.append(f".I {_escape(usage)}")
        out.append(".br")
        out.append(_escape(cmd.help or cmd.short_help or ""))
        for param in cmd.params:
            if param.param_type_name == "option" and not getattr(param, "hidden", False):
                names = ", ".join(param.opts + param.secondary_opts)
                out.append(".RS")
                out.append(f".TP\n.B {_escape(names)}\n{_escape(param.help or '')}")
                out.append(".RE")
    out.append(".SH SEE ALSO")
    out.append(
        "docs/ in the gitaudit source tree: plan\\-format, ledger\\-format, "
        "threat\\-model, hooks\\-and\\-servers."
    )
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(generate())
