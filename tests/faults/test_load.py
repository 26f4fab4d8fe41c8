"""Load: 8 clients push 200 times in total, concurrently, to one bare server that judges every
push with gitaudit's pre-receive hook. Four kinds of push, in a seeded order per client: honest
pushes with fresh evidence (`git audit push` replays each client's runs onto the shared runs ref),
unproven pushes (`git push --no-verify`, no evidence), pushes carrying forged evidence (a PASS run
signed by an untrusted key) and pushes carrying replayed evidence (a genuine run's signed bytes
put on top for the new tree). Every decision is asserted exactly: each honest push accepted, each
other push declined by the hook for its own reason."""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gitaudit.git.repo import open_repo
from gitaudit.hooks.install import configure_fetch, install_hooks
from tests.faults.conftest import (
    RUNS_REF,
    SEED,
    assert_ledger_sound,
    collect,
    make_served,
    release,
    rev_list,
    rev_parse,
    spawn,
)
from tests.gitrepo import audit, git

CLIENTS = 8
PUSHES_EACH = 25  # 200 pushes in total
MIX = {"pass": 5, "unproven": 7, "forged": 7, "replayed": 6}  # of each client's 25
MAX_ATTEMPTS = 20  # per push: the first try plus retries after a lost race on the runs ref
# why the server declines each kind (the hook's own words)
DECLINED_BECAUSE = {
    "unproven": "UNKNOWN",
    "forged": "signed by untrusted key",
    "replayed": "the signed data was altered",
}


def kinds_of(client: int) -> list[str]:
    kinds = [kind for kind, n in MIX.items() for _ in range(n)]
    random.Random(SEED * 1000 + client).shuffle(kinds)
    return kinds


@pytest.mark.slow
def test_two_hundred_concurrent_pushes(
    tmp_path: Path, record_property: Callable[[str, Any], None]
) -> None:
    files = [f"c{i}.txt" for i in range(CLIENTS)]
    s = make_served(tmp_path, files)
    assert audit(s.client.path, "run").code == 0
    first = s.audit_push()
    assert first.returncode == 0, first.stderr
    clones = []
    for i in range(CLIENTS):
        path = tmp_path / f"c{i}"
        git(tmp_path, "clone", "-q", str(s.server), str(path))
        git(path, "fetch", "-q", "origin", "refs/audit/*:refs/audit/*")
        git(path, "checkout", "-q", "-b", f"c{i}")
        repo = open_repo(path)
        configure_fetch(repo)
        install_hooks(repo)
        clones.append(path)

    assert sum(MIX.values()) == PUSHES_EACH
    gate = tmp_path / "barrier"
    gate.mkdir()
    workers = [
        spawn("load_client", str(path), i, PUSHES_EACH, kinds_of(i), str(gate), MAX_ATTEMPTS)
        for i, path in enumerate(clones)
    ]
    release(gate, workers, timeout=300)  # a hang guard
    started = time.monotonic()
    results = [r for batch in collect(workers, timeout=900) for r in batch]  # a hang guard
    elapsed = time.monotonic() - started

    assert len(results) == CLIENTS * PUSHES_EACH
    by_kind = {kind: [r for r in results if r["kind"] == kind] for kind in MIX}
    assert {kind: len(rs) for kind, rs in by_kind.items()} == {
        kind: n * CLIENTS for kind, n in MIX.items()
    }
    passes = by_kind["pass"]
    rejects = [r for r in results if r["kind"] != "pass"]
    assert all(r["verdict"] == "PASS" for r in passes)
    accepted = [r for r in passes if r["accepted"]]
    wrong_accepts = [r for r in rejects if r["accepted"]]
    # every accepted tip PASSes on the server, by the server's own `git audit status <sha>`
    wrong_accepts += [r for r in accepted if audit(s.server, "status", r["sha"]).code != 0]
    wrong_rejects = [r for r in passes if not r["accepted"]]
    wrong_reasons = [
        r
        for r in rejects
        if not r["declined_by_hook"] or DECLINED_BECAUSE[r["kind"]] not in r["error"]
    ]
    retries = sum(r["attempts"] - 1 for r in passes)
    rate = len(results) / elapsed
    summary = (
        f"load: {len(results)} pushes ({', '.join(f'{len(v)} {k}' for k, v in by_kind.items())}) "
        f"by {CLIENTS} clients in {elapsed:.1f} s = {rate:.2f} pushes/s; wrong accepts "
        f"{len(wrong_accepts)}, wrong rejects {len(wrong_rejects)}, declined for another reason "
        f"{len(wrong_reasons)}; retries after lost races {retries}"
    )
    print(summary, file=sys.stderr)
    record_property("pushes", len(results))
    record_property("pushes_per_second", round(rate, 3))
    record_property("wrong_accepts", len(wrong_accepts))
    record_property("wrong_rejects", len(wrong_rejects))
    record_property("retries", retries)
    assert wrong_accepts == [], wrong_accepts
    assert wrong_rejects == [], wrong_rejects[0].get("error")
    assert wrong_reasons == [], wrong_reasons[0]
    assert len(accepted) == len(passes) == MIX["pass"] * CLIENTS

    # each server branch ends at its client's last accepted push
    for i in range(CLIENTS):
        mine = [r for r in accepted if r["client"] == i]
        assert git(s.server, "rev-parse", f"refs/heads/c{i}").strip() == mine[-1]["sha"]
    # commits and runs the server declined never reached it
    for r in rejects:
        assert rev_parse(s.server, f"{r['sha']}^{{commit}}") is None, r
        if "run" in r:
            assert rev_parse(s.server, f"{r['run']}^{{commit}}") is None, r
    # the server's ledger: fsck clean, linear, every commit verifies, and exactly the first run
    # plus one run per accepted push, each of them on it
    chain = assert_ledger_sound(s.server)
    assert len(chain) == len(accepted) + 1
    assert rev_list(s.server, RUNS_REF) == chain
    runs_on_server = {json.loads(git(s.server, "show", f"{c}:run.json"))["tree"] for c in chain}
    for r in accepted:
        assert git(s.server, "rev-parse", f"{r['sha']}^{{tree}}").strip() in runs_on_server
