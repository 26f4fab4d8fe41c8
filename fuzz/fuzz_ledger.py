"""Fuzz harness: the ledger's run-record readers (``records.parse_run``, ``records.lookup_keys``).

The input is a ``run.json`` as it would be stored in a run commit. Expected: a typed record, or
one ``MalformedRun``/``LedgerError`` naming the JSON path. Anything else is a crash, and so is a
disagreement between the two readers: the lookup cache indexes what ``lookup_keys`` returns and
the gate judges what ``parse_run`` returns, so for a record both accept the tree, the contract
and the verdict must be the same (else the cache could point the gate at another tree's run).

Run: ``fuzz/run.py ledger SECONDS``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _driver import guarded, hermetic, main

try:
    import atheris
except ImportError:
    atheris = None

if atheris is not None:
    with atheris.instrument_imports(include=["gitaudit"]):
        from gitaudit.errors import LedgerError
        from gitaudit.ledger.records import lookup_keys, parse_run
else:
    from gitaudit.errors import LedgerError
    from gitaudit.ledger.records import lookup_keys, parse_run

COMMIT = "0" * 40


class Disagreement(AssertionError):
    """The lookup cache's reader and the gate's reader read one record differently."""


def check(data: bytes) -> str:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return "not-json"

    def run() -> str:
        keys = lookup_keys(doc)
        record = parse_run(COMMIT, 1_700_000_000, doc)
        if keys is not None:
            tree, contract, verdict, _steps = keys
            if (tree, contract, verdict) != (record.tree, record.contract, str(record.verdict)):
                raise Disagreement(f"{keys[:3]} != {(record.tree, record.contract)}: {data!r}")
        return f"record:{record.verdict}:{len(record.steps)}"

    return guarded(run, LedgerError)


if __name__ == "__main__":
    hermetic()
    main(check, instrumented=atheris is not None)
