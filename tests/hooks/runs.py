"""A run commit's tree for the hook's unit tests: the server takes on a runs ref only runs of
its plan (a well-formed ``run.json`` and nothing but a run's files)."""

from __future__ import annotations

import json

import pygit2

from gitaudit.ledger.objects import write_tree
from gitaudit.ledger.records import RUN_FORMAT


def run_tree(git: pygit2.Repository, plan: str = "default") -> pygit2.Oid:
    """The tree of a minimal run of *plan* (a PASS of no steps, for no tree in particular)."""
    doc = {
        "format": RUN_FORMAT,
        "plan": plan,
        "verdict": "PASS",
        "contract_digest": "sha256:" + "0" * 64,
        "tree": "0" * 40,
        "steps": {},
    }
    return write_tree(git, {"run.json": json.dumps(doc).encode()})
