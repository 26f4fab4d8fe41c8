"""Load: 8 clients push 200 times in total, concurrently, to one bare server that judges every
push with gitaudit's pre-receive hook. Passing pushes carry fresh evidence (`git audit push`
replays each client's runs onto the shared runs ref); the others carry none (`git push
--no-verify`) and must be rejected. Zero wrong accepts, zero wrong rejects."""

from __future__ import annotations

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
    assert_ledger_sound,
    collect,
    make_served,
    rev_list,
    rev_parse,
    spawn,
)
from tests.gitrepo import audit, git

CLIENTS = 8
PUSHES_EACH = 25  # 200 pushes in total
PASSING_EACH = 4  # with evidence; the rest are pushes the server must reject
MAX_ATTEMPTS = 20  # per passing push: the first try plus retries after a lost race


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

    started = time.time()
    workers = [
        spawn("load_client", str(path), i, PUSHES_EACH, PASSING_EACH, started + 2.0, MAX_ATTEMPTS)
        for i, path in enumerate(clones)
    ]
    results = [r for batch in collect(workers, timeout=480) for r in batch]
    elapsed = time.time() - started - 2.0

    passes = [r for r in results if r["kind"] == "pass"]
    rejects = [r for r in results if r["kind"] == "reject"]
    assert len(results) == CLIENTS * PUSHES_EACH
    assert all(r["verdict"] == "PASS" for r in passes)
    accepted = [r for r in passes if r["accepted"]]
    wrong_accepts = [r for r in rejects if r["accepted"]]
    # every accepted tip PASSes on the server, by the server's own `git audit status <sha>`
    wrong_accepts += [r for r in accepted if audit(s.server, "status", r["sha"]).code != 0]
    wrong_rejects = [r for r in passes if not r["accepted"]]
    retries = sum(r["attempts"] - 1 for r in passes)
    rate = len(results) / elapsed
    mean_pass = sum(r["seconds"] for r in passes) / max(1, len(passes))
    mean_reject = sum(r["seconds"] for r in rejects) / max(1, len(rejects))
    summary = (
        f"load: {len(results)} pushes ({len(passes)} with evidence, {len(rejects)} without) by "
        f"{CLIENTS} clients in {elapsed:.1f} s = {rate:.2f} pushes/s; wrong accepts "
        f"{len(wrong_accepts)}, wrong rejects {len(wrong_rejects)}, retries after lost races "
        f"{retries} (max {max((r['attempts'] for r in passes), default=1) - 1} for one push); "
        f"mean wall time {mean_pass:.2f} s per push with evidence (run + `git audit push`, "
        f"retries included), {mean_reject:.2f} s per rejected push"
    )
    print(summary, file=sys.stderr)
    record_property("pushes", len(results))
    record_property("pushes_per_second", round(rate, 3))
    record_property("wrong_accepts", len(wrong_accepts))
    record_property("wrong_rejects", len(wrong_rejects))
    record_property("retries", retries)
    assert not wrong_accepts, wrong_accepts
    assert not wrong_rejects, wrong_rejects[0].get("error")
    assert all(r["declined_by_hook"] for r in rejects), "rejected for another reason"

    # each server branch ends at its client's last accepted push
    for i in range(CLIENTS):
        mine = [r for r in accepted if r["client"] == i]
        if mine:
            assert git(s.server, "rev-parse", f"refs/heads/c{i}").strip() == mine[-1]["sha"]
    # commits the server rejected never reached it
    for r in rejects:
        assert rev_parse(s.server, f"{r['sha']}^{{commit}}") is None, r
    # the server's ledger: fsck clean, linear, every commit verifies, one run per accepted push
    chain = assert_ledger_sound(s.server)
    assert len(chain) >= len(accepted) + 1
    assert rev_list(s.server, RUNS_REF) == chain
