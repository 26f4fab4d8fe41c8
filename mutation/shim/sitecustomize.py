"""Loaded by every Python process a mutation test starts (``make mutate`` puts this folder first on
``PYTHONPATH``): the command-line and hook subprocesses of a test.

mutmut's stats run (``MUTANT_UNDER_TEST=stats``) maps each test to the functions it reaches, but its
recorder needs mutmut's configuration, which a subprocess started in a test's temporary folder
cannot find: it crashed the command, so the stats run failed and no mutant was ever checked. Here a
subprocess records each function it reaches in the file ``MUTATE_HITS`` names instead, and
``mutate_plugin`` credits them to the test that started it: a mutant reached only inside ``git
audit`` run as a process or inside a hook is then run against the tests that reach it.
"""

from __future__ import annotations

import os


def _install() -> None:
    hits = os.environ.get("MUTATE_HITS")
    if os.environ.get("MUTANT_UNDER_TEST") != "stats" or not hits:
        return
    from mutmut.mutation import trampoline

    seen: set[str] = set()

    def record(name: str, caller: str | None = None) -> None:
        del caller
        if name not in seen:
            seen.add(name)
            with open(hits, "a", encoding="utf-8") as out:
                out.write(name + "\n")

    setattr(trampoline, "record_trampoline_hit", record)  # noqa: B010 (not exported by name)


_install()
