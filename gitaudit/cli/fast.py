"""A fast path for `status` and `verify` that does not import typer.

typer (and the pydantic it now builds parameters with) costs a few hundred milliseconds at
start-up; the gate is run by hooks and CI loops. Only the exact documented forms are handled
here; anything else (``-h``, a typo, an unknown option) falls through to the typer application,
which owns help and usage errors.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    if command == "verify":
        parsed = _parse(rest, positional=0)
        if parsed is None or parsed[1] is not None:
            return None
        return reading.verify(parsed[2])
    return None
