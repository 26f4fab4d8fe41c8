"""Verifying run commits, a share of a chain at a time: in ``git audit verify`` and its workers.

A run commit is sound when a runner key signed it and its tree holds every file its
``run.json`` records. :func:`verify_share` checks a list of them and names the first that is
not; :func:`worker` is the entry point of the worker processes :mod:`gitaudit.ledger.verify`
shares a long chain with. It imports only what verifying a run commit needs (not the plans
ledger, the plan model or the trust rules): a worker's imports take 64-83 ms, against about
105 ms for all of :mod:`gitaudit.ledger.verify`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pygit2

from gitaudit.crypto.commits import verify_commit
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.errors import GitAuditError
from gitaudit.ledger.chain import read_commit
from gitaudit.ledger.objects import tree_of
from gitaudit.ledger.runs import run_of


def problem(ref: str, exc: GitAuditError) -> str:
    """*exc*'s message, naming *ref* once."""
    return exc.message if exc.message.startswith(ref) else f"{ref}: {exc.message}"


def check_run_tree(repo: pygit2.Repository, commit: pygit2.Commit) -> str | None:
    """The first file *commit*'s ``run.json`` records that its tree lacks, as a problem."""
    tree = tree_of(commit, "run")
    record = run_of(repo, commit, tree)
    for sid, entry in record.steps.items():
        groups = [("checks", entry.checks)]
        groups += [(f"outputs/{n}", cs) for n, cs in entry.outputs.items()]
        groups += [(f"upstream/{u.step}/{u.output}", u.checks) for u in entry.upstream]
        for folder, checks in groups:
            for n in range(len(checks)):
                for leaf in ("result.json", "stdout", "stderr"):
                    path = f"steps/{sid}/{folder}/{n}/{leaf}"
                    try:
                        tree[path]
                    except KeyError:
                        return (
                            f"run {str(commit.id)[:12]}: run.json records {path}, "
                            "which its tree lacks"
                        )
    return None


def verify_one(
    repo: pygit2.Repository, ref: str, oid: pygit2.Oid, runners: Sequence[PublicKey]
) -> str | None:
    """The problem with one run commit (signature by a runner, tree matching run.json)."""
    try:
        verify_commit(repo, oid, runners)
        return check_run_tree(repo, read_commit(repo, oid, ref))
    except GitAuditError as exc:
        return problem(ref, exc)


def verify_share(
    repo: pygit2.Repository, ref: str, oids: Sequence[pygit2.Oid], runners: Sequence[PublicKey]
) -> tuple[int, str] | None:
    """(index, problem) of the first bad commit of *oids*, or None."""
    for n, oid in enumerate(oids):
        found = verify_one(repo, ref, oid, runners)
        if found:
            return n, found
    return None


def worker() -> None:
    """A worker process (``python -c``): on stdin, one JSON line naming the repository, the ref
    and the runner keys, then one line per share (the index of its first commit in the chain,
    and its commits); for each share, one line on stdout: its index and its first problem
    (:func:`verify_share`: ``[index, problem]`` within the share, or null)."""
    import json
    import sys

    from gitaudit.git.repo import open_repo

    read = sys.stdin.buffer.readline
    setup = json.loads(read())
    repo = open_repo(setup["gitdir"]).git
    ref = setup["ref"]
    runners = [PublicKey(bytes.fromhex(k)) for k in setup["runners"]]
    while line := read():
        start, commits = json.loads(line)
        found = verify_share(repo, ref, [pygit2.Oid(hex=h) for h in commits], runners)
        sys.stdout.write(json.dumps([start, found]) + "\n")
        sys.stdout.flush()
