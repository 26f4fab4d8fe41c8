"""A fast path for the hot commands (`run`, `status`, `verify`, `agent stop|guard`, `--version`)
without typer.

typer (and the pydantic it builds parameters with) costs a few hundred milliseconds at start-up;
the gate is run by hooks and CI loops. The commands' grammar is declared once, in
:mod:`gitaudit.cli.grammar`; anything it does not recognise (``-h``, a typo, an unknown option)
falls through to the typer application, which owns help and usage errors. (``--version`` and the
top-level ``-h`` are answered even earlier, by :mod:`gitaudit.cli.entry`.) ``run`` and ``status``
of the work tree start fingerprinting it at once, so git hashes while the rest of gitaudit is
imported.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: importing typing costs the agent hooks about 3 ms
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

PLAIN_STATUS: dict[str, object] = {"rev": None, "plan": None, "for_ref": None, "as_json": False}
"""What the grammar makes of a bare ``status`` (a test holds the two equal): the command loops
and agents call most, answered without importing the grammar (and the ``dataclasses`` and
``inspect`` it brings) when the verdict memo knows the work tree."""


def try_fast(argv: Sequence[str]) -> int | None:
    """The exit code when *argv* is a fast command, else None (let typer handle it)."""
    rest = [a for a in argv if a != "--debug"]
    if rest == ["--version"] or rest[:1] == ["agent"]:
        return _version_or_agent(rest)
    if rest == ["status"]:
        values: dict[str, Any] | None = dict(PLAIN_STATUS)
    else:
        from gitaudit.cli import grammar  # not before: the agent hooks do without it

        if not rest or rest[0] not in grammar.FAST:
            return None
        values = grammar.FAST[rest[0]].parse(rest[1:])
    if values is None:
        return None
    if rest[0] == "verify":
        # from scratch, the worker processes start while gitaudit is imported here
        from gitaudit.ledger.workers import start_early

        start_early(".")
    if rest[0] == "run" or (rest[0] == "status" and values["rev"] is None):
        # a run, or the gate of the work tree: git hashes the work tree while the rest of
        # gitaudit is imported (the first fingerprint taken is the work tree as the command
        # started)
        from gitaudit.git.fingerprint import prefetch

        prefetch(".")
    if rest[0] == "run":
        from gitaudit.cli import running

        return running.run(**values)
    from gitaudit.cli import reading

    if rest[0] == "status":
        return reading.status(**values)
    return reading.verify(**values)


def _version_or_agent(rest: Sequence[str]) -> int | None:
    """``--version``, and the agent hooks (``agent stop|guard``: every stop and every tool call
    of an agent runs one; ``agent install`` and help are typer's)."""
    if rest[:1] == ["agent"]:
        from gitaudit.agent.entry import main, parse_args

        return main(rest[1:]) if parse_args(rest[1:]) is not None else None
    from gitaudit import __version__
    from gitaudit.cli.output import say

    say(f"gitaudit {__version__}")
    return 0
