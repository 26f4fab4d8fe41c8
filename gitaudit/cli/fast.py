"""A fast path for `status`, `verify` and `run` that does not import typer.

typer (and the pydantic it now builds parameters with) costs a few hundred milliseconds at
start-up; the gate is run by hooks and CI loops. Only the exact documented forms are handled
here; anything else (``-h``, a typo, an unknown option) falls through to the typer application,
which owns help and usage errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gitaudit.cli import reading


def _parse(rest: Sequence[str], positional: int) -> tuple[list[str], str | None, bool] | None:
    args: list[str] = []
    plan: str | None = None
    as_json = False
    items = list(rest)
    while items:
        item = items.pop(0)
        if item == "--json":
            as_json = True
        elif item in ("--plan", "-p") and items and not items[0].startswith("-"):
            plan = items.pop(0)
        elif item.startswith("--plan="):
            plan = item.split("=", 1)[1]
        elif item.startswith("-"):
            return None
        else:
            args.append(item)
    if len(args) > positional:
        return None
    return args, plan, as_json


def _parse_run(rest: Sequence[str]) -> dict[str, Any] | None:
    """`run [STEP...] [--plan N] [--jobs N] [--force] [--fresh] [--json] [--key PATH]`."""
    opts: dict[str, Any] = {
        "steps": [],
        "plan": None,
        "jobs": None,
        "force": False,
        "fresh": False,
        "as_json": False,
        "key": None,
    }
    items = list(rest)
    while items:
        item = items.pop(0)
        flag = {"--force": "force", "--fresh": "fresh", "--json": "as_json"}.get(item)
        if flag:
            opts[flag] = True
        elif item in ("--plan", "-p", "--jobs", "-j", "--key", "-k"):
            if not items or items[0].startswith("-"):
                return None
            value = items.pop(0)
            if item in ("--jobs", "-j"):
                if not value.isdigit() or int(value) < 1:
                    return None
                opts["jobs"] = int(value)
            elif item in ("--key", "-k"):
                opts["key"] = Path(value)
            else:
                opts["plan"] = value
        elif item.startswith("-"):
            return None
        else:
            opts["steps"].append(item)
    return opts


def try_fast(argv: Sequence[str]) -> int | None:
    """The exit code when *argv* is a fast command, else None (let typer handle it)."""
    rest = [a for a in argv if a != "--debug"]
    if not rest:
        return None
    command, rest = rest[0], rest[1:]
    if command == "status":
        parsed = _parse(rest, positional=1)
        if parsed is None:
            return None
        args, plan, as_json = parsed
        return reading.status(args[0] if args else None, plan, as_json)
    if command == "run":
        opts = _parse_run(rest)
        if opts is None:
            return None
        from gitaudit.cli import running

        return running.run(
            opts["steps"] or None,
            opts["plan"],
            opts["jobs"],
            opts["force"],
            opts["fresh"],
            opts["as_json"],
            opts["key"],
        )
    if command == "verify":
        parsed = _parse(rest, positional=0)
        if parsed is None or parsed[1] is not None:
            return None
        return reading.verify(parsed[2])
    return None
