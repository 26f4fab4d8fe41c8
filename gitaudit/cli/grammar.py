"""The command-line grammar of the hot commands, declared once.

``run``, ``status`` and ``verify`` are run by hooks, CI loops and agents, and typer costs a few
hundred milliseconds to start. Their parameters are declared here as data (standard library
only): the typer commands build their options from these declarations
(:func:`gitaudit.cli.common.typer_param`), and the fast path (:mod:`gitaudit.cli.fast`) parses
with them, so a flag cannot exist in one parser and not in the other (``tests/cli`` checks that
each typer command has exactly the declared parameters). Anything the fast parser does not
recognise (``-h``, a typo, an unknown option) is left to typer, which owns help and usage errors.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gitaudit.frozen import frozen


@frozen
class Param:
    """One parameter: an option (``names`` given) or a positional argument (no ``names``).

    ``value`` is the type of the option's value (``None``: a flag, False unless given);
    ``many``: a positional taking any number of values, or an option that may be repeated."""

    dest: str
    help: str
    names: tuple[str, ...] = ()
    value: type[str] | type[int] | type[Path] | None = str
    minimum: int | None = None
    many: bool = False

    @property
    def positional(self) -> bool:
        return not self.names

    @property
    def flag(self) -> bool:
        return bool(self.names) and self.value is None


PLAN = Param("plan", "Act on this plan only (default: every active plan).", ("--plan", "-p"))
JSON = Param("as_json", "Print a machine-readable JSON document.", ("--json",), None)
KEY = Param(
    "key",
    "Signing key (an OpenSSH Ed25519 private key, or a .pub held by ssh-agent). "
    "Default: $GITAUDIT_SIGNING_KEY, audit.signingKey, user.signingKey (gpg.format=ssh), "
    "then the gitaudit key directory.",
    ("--key", "-k"),
    Path,
)
REV = Param("rev", "Judge this commit's tree (default: the work tree).")
FOR_REF = Param(
    "for_ref",
    "Judge as the policy's evidence rule for this ref does (e.g. refs/heads/main: only the "
    "runners it names prove a tree for it), as the hooks do for the refs they guard.",
    ("--for",),
)


@frozen
class Grammar:
    name: str
    params: tuple[Param, ...]

    def param(self, dest: str) -> Param:
        return next(p for p in self.params if p.dest == dest)

    def parse(self, argv: Sequence[str]) -> dict[str, Any] | None:
        """The parameters of *argv* by ``dest``, or None for anything this simple parser does
        not handle (typer then parses it, and explains a usage error)."""
        options = {name: p for p in self.params for name in p.names}
        positionals = [p for p in self.params if p.positional]
        values: dict[str, Any] = {p.dest: (False if p.flag else None) for p in self.params}
        given: list[str] = []
        items = list(argv)
        while items:
            item = items.pop(0)
            name, eq, inline = item.partition("=") if item.startswith("--") else (item, "", "")
            param = options.get(name)
            if param is None:
                if item.startswith("-"):
                    return None
                given.append(item)
                continue
            converted = _option_value(param, inline if eq else None, items)
            if converted is None:
                return None
            if param.many:
                values[param.dest] = [*(values[param.dest] or ()), converted]
            else:
                values[param.dest] = converted
        for param in positionals:
            if param.many:
                values[param.dest] = given or None
                given = []
            elif given:
                values[param.dest] = given.pop(0)
        return None if given else values


def _option_value(param: Param, inline: str | None, items: list[str]) -> Any:
    """The value of option *param* given ``--name=inline`` or followed by *items* (consumed),
    True for a flag; None when this parser does not handle it."""
    if param.flag:
        return True if inline is None else None
    if inline is not None:
        return _convert(param, inline)
    if items and not items[0].startswith("-"):
        return _convert(param, items.pop(0))
    return None


def _convert(param: Param, raw: str) -> Any:
    if param.value is int:
        if not raw.isdigit():
            return None
        number = int(raw)
        return None if param.minimum is not None and number < param.minimum else number
    if param.value is Path:
        return Path(raw)
    return raw


RUN = Grammar(
    "run",
    (
        Param(
            "steps",
            "Run only these steps (others carry verified evidence for this tree).",
            many=True,
        ),
        Param(
            "step",
            "Run only this step (repeatable; the same as naming it).",
            ("--step", "-s"),
            many=True,
        ),
        Param(
            "labels",
            "Act as a runner with this label (repeatable; the key must carry it in the trust "
            "set): steps whose `runs_on` names none of the labels are left to other runners.",
            ("--label", "-l"),
            many=True,
        ),
        PLAN,
        Param(
            "jobs",
            "Steps run in parallel (default: CPUs).",
            ("--jobs", "-j"),
            int,
            minimum=1,
        ),
        Param(
            "force",
            "Run exhausted steps again (recorded in the evidence, which counts only once a "
            "sealer resets their attempts: `git audit plan reset-attempts`).",
            ("--force",),
            None,
        ),
        Param(
            "fresh",
            "Re-run steps whose inputs are unchanged instead of carrying.",
            ("--fresh",),
            None,
        ),
        Param(
            "snapshot",
            "Snapshot the work tree first (refs/audit/snapshots/pre-run; "
            "`git audit rollback pre-run` restores it).",
            ("--snapshot",),
            None,
        ),
        JSON,
        KEY,
    ),
)
STATUS = Grammar("status", (REV, PLAN, FOR_REF, JSON))
VERIFY = Grammar("verify", (JSON,))

FAST: dict[str, Grammar] = {g.name: g for g in (RUN, STATUS, VERIFY)}

FLAGS = frozenset(n for g in FAST.values() for p in g.params if p.flag for n in p.names)
_BOOLEAN_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "1", "0"})


def misused_flag(argv: Sequence[str]) -> tuple[str, str] | None:
    """``(flag, word)`` when a flag such as ``--json`` is followed by a boolean word
    (``--json true``): the word would otherwise be read as a positional argument (a revision)."""
    for flag, word in itertools.pairwise(argv):
        if flag in FLAGS and word.lower() in _BOOLEAN_WORDS:
            return flag, word
    return None
