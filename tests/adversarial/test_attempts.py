"""Attacks on exhausted steps: a forced run does not reopen what the contract closed.

`unit` may fail twice (`max_attempts: 2`) under the sealed contract. After two failures it is
exhausted: `git audit run` does not run it again, and evidence from running it anyway (`--force`)
does not count until alice, the sealer, records a signed reset of its attempts on
refs/audit/plans. ci holds only a runner key, so it can force runs but not reset anything.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.refs import PLANS_REF, mirror_ref, runs_ref
from gitaudit.ledger.resets import AttemptReset, held_at, resets_file, resets_path
from gitaudit.ledger.seals import reset_attempts
from gitaudit.run.recorder import RecordedRun
from tests.adversarial.conftest import (
    World,
    assert_plan,
    assert_plans_level,
    check,
    edit_lookup_cache,
    plan,
    step,
)
from tests.gitrepo import audit, git

RUNS = runs_ref("default")


def flaky(flag: Path) -> dict[str, Any]:
    """`unit` fails while *flag* (outside the repository) exists, at most twice; `lint` passes."""
    return plan(step("unit", check("test", "!", "-e", str(flag)), max_attempts=2), step("lint"))


@pytest.fixture
def exhausted(world: World, tmp_path: Path) -> World:
    """`flaky` sealed; unit failed twice and is exhausted; then the flag is gone, so unit would
    pass if run again (on the very same tree)."""
    flag = tmp_path / "flag"
    flag.write_text("unit fails\n")
    world.seal(flaky(flag))
    for _ in range(2):
        assert world.run().doc["steps"]["unit"]["status"] == "failed"
    third = world.run()
    assert third.doc["steps"]["unit"]["status"] == "exhausted"
    assert_plan(world.gate(), "step.exhausted", "FAIL")
    flag.unlink()
    return world


def forced(world: World, **kw: Any) -> RecordedRun:
    recorded = world.run(force=True, **kw)
    assert recorded.doc["forced"] is True
    return recorded


def reset_for(world: World, step_id: str, *, failed: int, contract: str | None = None) -> bytes:
    state = read_state(world.handle())
    seal = state.seal("default")
    assert seal is not None
    reset = AttemptReset(
        plan="default",
        step=step_id,
        contract_digest=contract or seal.contract_digest,
        failed=failed,
        run=world.ref(RUNS),
        reason="by hand",
        reset_at="2026-11-01T12:00:00Z",
        sealer="alice",
        sealer_fingerprint=world.alice.public_key.fingerprint(),
    )
    return resets_file("default", {step_id: reset})


def test_attack_attempts_forced_past_exhaustion(exhausted: World) -> None:
    """ci runs the exhausted step with `--force`; it passes this time."""
    recorded = forced(exhausted)
    assert recorded.verdict == "PASS" and recorded.doc["steps"]["unit"]["status"] == "passed"
    judged = assert_plan(exhausted.gate(), "evidence.forced-past-exhaustion", "FAIL")
    assert judged.reasons[0].step == "unit"
    assert judged.reasons[0].message == (
        f"step unit passed in run {str(recorded.commit)[:12]} only because it was forced "
        "(--force) past its 2 failed attempts"
    )
    assert judged.reasons[0].hint == (
        "a forced run's evidence counts once a sealer lets the step be tried again: "
        "`git audit plan reset-attempts unit --plan default --reason ...` (or reseal the plan)"
    )


def test_attack_attempts_forced_evidence_carried_by_a_targeted_run(exhausted: World) -> None:
    """After the forced run, an honest `git audit run lint` carries unit from it: the carried
    step is judged where it executed."""
    source = forced(exhausted)
    honest = exhausted.run(targets=["lint"])
    assert honest.doc["forced"] is False
    assert honest.doc["steps"]["unit"]["carried_from"] == source.commit
    judged = assert_plan(exhausted.gate(), "evidence.forced-past-exhaustion", "FAIL")
    assert judged.run == honest.commit


def test_attack_attempts_reset_signed_by_a_runner_key(exhausted: World) -> None:
    """ci asks for a reset (refused: not a sealer), then signs a plans commit holding one by
    hand: the plans ref no longer verifies, so nothing passes."""
    forced(exhausted)
    refused = exhausted.cli(
        "plan", "reset-attempts", "unit", "--reason", "please", "--key", str(exhausted.keys["ci"])
    )
    assert refused.code == 1 and "is not a sealer" in refused.err.splitlines()[0], refused.err
    files = exhausted.plans_files()
    files[resets_path("default")] = reset_for(exhausted, "unit", failed=2)
    exhausted.forge_plans(files, exhausted.ci)
    assert_plans_level(exhausted.gate(), "plans.untrusted")


def _resets(world: World) -> dict[str, int]:
    """The resets that count on the plan's ledger, as its tip holds them."""
    handle = world.handle()
    held = held_at(handle.git, world.ref(RUNS))
    return read_state(handle).attempts_reset("default", _contract(world), held)


def test_attack_attempts_reset_for_another_step(exhausted: World) -> None:
    """alice's (genuine, hand-made) reset names `lint`, not `unit`: unit's forced evidence still
    does not count."""
    forced(exhausted)
    files = exhausted.plans_files()
    files[resets_path("default")] = reset_for(exhausted, "lint", failed=5)
    exhausted.forge_plans(files, exhausted.alice)
    assert _resets(exhausted) == {"lint": 5}
    assert_plan(exhausted.gate(), "evidence.forced-past-exhaustion", "FAIL")


def test_attack_attempts_reset_under_another_contract(exhausted: World) -> None:
    """A sealer-signed reset of unit's attempts under a contract that is not the sealed one: the
    chain check refuses the commit (and such a reset would not apply anyway)."""
    forced(exhausted)
    files = exhausted.plans_files()
    files[resets_path("default")] = reset_for(exhausted, "unit", failed=2, contract="sha256:0")
    exhausted.forge_plans(files, exhausted.alice)
    assert_plans_level(exhausted.gate(), "plans.untrusted")
    message = exhausted.gate().reasons[0].message
    assert "under a contract that is not its seal v1" in message, message


def test_attack_attempts_reset_in_the_file_of_another_plan(exhausted: World) -> None:
    """The reset is written to resets/other.json, naming plan 'default' inside."""
    forced(exhausted)
    files = exhausted.plans_files()
    files[resets_path("other")] = reset_for(exhausted, "unit", failed=2)
    exhausted.forge_plans(files, exhausted.alice)
    assert_plans_level(exhausted.gate(), "plans.untrusted")
    assert "resets/other.json is malformed" in exhausted.gate().reasons[0].message


def test_attack_attempts_reset_count_inflated_by_hand(exhausted: World) -> None:
    """A reset can only be recorded for failures on the ledger: a `failed` count edited into
    the reset by a plain (unsigned) plans commit does not verify."""
    forced(exhausted)
    files = exhausted.plans_files()
    files[resets_path("default")] = reset_for(exhausted, "unit", failed=1000)
    exhausted.forge_plans(files, None)
    assert_plans_level(exhausted.gate(), "plans.untrusted")


def test_attack_attempts_forced_evidence_pushed_to_the_server(
    exhausted: World, tmp_path: Path
) -> None:
    """The forced run is pushed with the branch, skipping the client's hooks: the server judges
    it with the same gate and declines."""
    server = exhausted.serve(tmp_path / "server.git")
    forced(exhausted)
    pushed = subprocess.run(
        ["git", "push", "--no-verify", "--atomic", "origin", "main", f"{RUNS}:{RUNS}"],
        cwd=exhausted.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert pushed.returncode != 0 and "pre-receive hook declined" in pushed.stderr
    assert "only because it was forced (--force)" in pushed.stderr, pushed.stderr
    assert git(server, "rev-parse", "--verify", "-q", "main", check=False) == ""


def test_attack_attempts_reset_by_a_runner_pushed_to_the_server(
    exhausted: World, tmp_path: Path
) -> None:
    """ci's hand-signed reset is pushed to the server: pre-receive verifies every plans commit
    against the sealers of its parent and refuses it."""
    server = exhausted.serve(tmp_path / "server.git")
    before = git(server, "rev-parse", "refs/audit/plans").strip()
    files = exhausted.plans_files()
    files[resets_path("default")] = reset_for(exhausted, "unit", failed=2)
    exhausted.forge_plans(files, exhausted.ci)
    pushed = subprocess.run(
        ["git", "push", "origin", "refs/audit/plans:refs/audit/plans"],
        cwd=exhausted.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert pushed.returncode != 0 and "not signed by a trusted sealer" in pushed.stderr
    assert git(server, "rev-parse", "refs/audit/plans").strip() == before


def test_attack_attempts_control_a_sealer_resets(exhausted: World, tmp_path: Path) -> None:
    """Control: alice resets unit's attempts after reviewing the forced run; its evidence
    counts, on the client and on the server."""
    server = exhausted.serve(tmp_path / "server.git")
    forced(exhausted)
    outcome = reset_attempts(exhausted.handle(), exhausted.alice, "default", "unit", "flaky infra")
    assert outcome.commit is not None and outcome.count == 2
    assert _resets(exhausted) == {"unit": 2}
    assert exhausted.gate().verdict == "PASS"
    assert exhausted.repo.git("push", "-q", "origin", "refs/audit/plans") == ""
    pushed = exhausted.cli("push")
    assert pushed.code == 0, pushed.out + pushed.err
    assert audit(server, "status", "main").code == 0


def _contract(world: World) -> str:
    seal = read_state(world.handle()).seal("default")
    assert seal is not None
    return seal.contract_digest


# ------------------------------------------------------------ the run killed once a step failed


@pytest.mark.usefixtures("stops_delivered")
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_attack_attempts_run_killed_once_the_step_failed(
    world: World, tmp_path: Path, stop: signal.Signals
) -> None:
    """unit may fail once. ci runs the plan and, as soon as the progress line says unit failed
    (lint, still running, keeps the run from being recorded yet), stops `git audit run` with
    SIGTERM (as `timeout` or a cancelled CI job does) or SIGHUP (a closed terminal): left to
    its default action the signal ended the process with nothing written, so the failure was
    never counted and unit could be tried again and again until it passed (PASS before the
    fix). The run is recorded as INTERRUPTED, as for Ctrl-C, with unit's failure: unit is
    exhausted."""
    flag = tmp_path / "flag"
    flag.write_text("unit fails\n")
    release = tmp_path / "release"  # lint waits for it
    wait = f"while [ ! -e {release} ]; do sleep 0.01; done"
    world.seal(
        plan(
            step("unit", check("test", "!", "-e", str(flag)), max_attempts=1),
            step("lint", check("sh", "-c", wait)),
        )
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitaudit", "run", "--key", str(world.keys["ci"])],
        cwd=world.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "GITAUDIT_PROGRESS_SECONDS": "0"},
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "unit failed" in line:
            proc.send_signal(stop)
            break
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, out + err
    assert "default: INTERRUPTED" in out
    flag.unlink()  # unit would pass now
    release.touch()
    again = world.run()
    assert again.doc["steps"]["unit"]["status"] == "exhausted", again.doc["steps"]["unit"]
    assert_plan(world.gate(), "step.exhausted", "FAIL")


# ------------------------------------------------- the pass made where the failures are not


def another_clone(world: World, tmp_path: Path, server: Path | None = None) -> Path:
    """ci's second clone of the repository, without its audit runs (a plain `git clone`): the
    root key pinned and the plans ref fetched, so `git audit run` works there on a ledger that
    never held a failure; with *server*, that is its origin and ci's key signs its pushes."""
    clone = tmp_path / "b"
    git(tmp_path, "clone", "-q", str(world.path), str(clone))
    git(clone, "config", "audit.rootKey", world.repo.git("config", "audit.rootKey").strip())
    git(clone, "fetch", "-q", "origin", f"{PLANS_REF}:{PLANS_REF}")
    if server is not None:
        git(clone, "remote", "set-url", "origin", str(server))
        git(clone, "config", "audit.signingKey", str(world.keys["ci"]))
    return clone


def _laundered(world: World, tmp_path: Path, how: str) -> Path:
    """unit is exhausted on the plan's ledger; ci commits its change (a new tree), runs the plan
    in another clone (unforced: unit runs there, and passes) and brings that pass back *how*;
    the other clone."""
    server = world.serve(tmp_path / "server.git") if how == "pushed" else None
    if server is not None:  # the failures are on the server's ledger too
        world.repo.git("push", "-q", "--no-verify", "origin", f"{RUNS}:{RUNS}")
    world.repo.write("fix.txt", "the change\n")
    world.repo.commit("the change")
    clone = another_clone(world, tmp_path, server)
    ran = audit(clone, "run", "--key", str(world.keys["ci"]))
    assert ran.code == 0, ran.out + ran.err  # the clone's ledger never held a failure
    if how == "fetched":
        copy = mirror_ref("b", RUNS)
        world.repo.git("fetch", "-q", str(clone), f"{RUNS}:{copy}")
    else:
        pushed = audit(clone, "push")  # pre-receive judges the replayed run
        assert pushed.code != 0 and "had exhausted it" in pushed.err, pushed.out + pushed.err
        assert world.cli("sync").code == 0
    return clone


@pytest.mark.parametrize("how", ["fetched", "pushed"])
def test_attack_attempts_exhausted_step_passed_in_another_clone(
    exhausted: World, tmp_path: Path, how: str
) -> None:
    """unit is exhausted. ci clones the repository without its audit runs, commits its change,
    and runs the plan there without `--force`: that ledger never held a failure, so unit runs,
    passes, and the run says PASS. Then ci brings the pass back: fetched as a remote-tracking
    copy of that clone's ledger (`git fetch B refs/audit/runs/default:refs/gitaudit/remotes/b/
    ...`), or pushed from the clone (`git audit push` signed its run again on top of the
    server's ledger, failures and all, and pre-receive took it; `git audit sync` brought it
    home). The gate said PASS over the exhausted step (both before the fix: only a forced run
    was checked for exhaustion). A pass counts only when the failures before it, on its own
    chain and on every copy of the ledger the gate reads that does not hold it, had not
    exhausted the step."""
    _laundered(exhausted, tmp_path, how)
    if how == "fetched":
        judged = assert_plan(exhausted.gate(), "evidence.past-exhaustion", "FAIL")
        assert judged.reasons[0].step == "unit"
    else:  # refused by pre-receive: nothing came home
        assert_plan(exhausted.gate(), "evidence.missing", "UNKNOWN")
    status = exhausted.cli("status")
    assert status.code != 0, status.out + status.err


def test_attack_attempts_carried_from_a_fork_the_lookup_cache_calls_earlier(
    world: World, tmp_path: Path
) -> None:
    """unit (inputs `src/**`) is exhausted on the plan's ledger; ci runs the plan in another
    clone, where unit passes, and fetches that run X as a remote-tracking copy (the gate counts
    the failures: X is not on the plan's ledger). Then, on a new tree with the same inputs, ci
    signs run R on the plan's ledger carrying unit from X, and files X in the lookup cache as an
    earlier run of that ledger. R is on the plan's ledger, but X is not: the gate took R's
    ledger for one holding X too (the cache said X was earlier) and skipped its failures (before
    the fix; the failures were counted after it). The carry is now refused first: the newest
    execution of unit below R, on the signed chain down to X, cannot be read, as X is not on it."""
    flag = tmp_path / "flag"
    flag.write_text("unit fails\n")
    world.repo.write("src/a.txt", "a\n")
    unit = step("unit", check("test", "!", "-e", str(flag)), max_attempts=2, inputs=["src/**"])
    world.seal(plan(unit, step("lint")))
    for _ in range(2):
        assert world.run().doc["steps"]["unit"]["status"] == "failed"
    flag.unlink()
    world.repo.write("fix.txt", "the change\n")
    world.repo.commit("the change")
    clone = another_clone(world, tmp_path)
    ran = audit(clone, "run", "--key", str(world.keys["ci"]))
    assert ran.code == 0, ran.out + ran.err
    copy = mirror_ref("b", RUNS)
    world.repo.git("fetch", "-q", str(clone), f"{RUNS}:{copy}")
    fork = world.ref(copy)
    assert fork is not None
    assert_plan(world.gate(), "evidence.past-exhaustion", "FAIL")
    world.repo.write("other.txt", "more\n")
    world.repo.commit("more")
    tree = world.repo.git("rev-parse", "HEAD^{tree}").strip()

    def carried(doc: dict[str, Any]) -> None:
        doc["tree"] = tree
        doc["steps"]["unit"].update(status="carried", carried_from=fork)

    run = world.forge_run(fork, edit=carried, signer=world.ci)
    assert_plan(world.gate(), "evidence.carried-invalid", "FAIL")  # X is not below R
    edit_lookup_cache(
        world,
        None,
        "INSERT INTO runs SELECT plan, -1, '" + fork + "', tree, contract, verdict, time "
        f"FROM runs WHERE plan='default' AND commit_id='{run}'",
    )
    # the signed chain below R never meets X, so nothing shows what happened to unit between
    # them: the carry is refused before the failures are counted (since the newest-failure rule
    # covers carries for unchanged inputs), whatever the cache says
    judged = assert_plan(world.gate(), "evidence.carried-invalid", "FAIL")
    assert judged.reasons[0].step == "unit"


def test_attack_attempts_failures_split_between_the_server_and_the_pushed_runs(
    world: World, tmp_path: Path
) -> None:
    """unit may fail twice. It failed once on the server's ledger; ci, in a clone without the
    audit runs, fails it once more and then passes it, and `git audit push` replays both runs
    on top of the server's: neither ledger alone holds two failures, the chain below the
    replayed pass does. pre-receive counts the runs pushed plus the tallies of the ledger they
    extend (it walked the whole ledger for every push before, seconds at 100,000 runs), and
    refuses the pass."""
    flag = tmp_path / "flag"
    flag.write_text("unit fails\n")
    world.seal(flaky(flag))
    assert world.run().doc["steps"]["unit"]["status"] == "failed"
    server = world.serve(tmp_path / "server.git")
    world.repo.git("push", "-q", "--no-verify", "origin", f"{RUNS}:{RUNS}")
    world.repo.write("fix.txt", "the change\n")
    world.repo.commit("the change")
    clone = another_clone(world, tmp_path, server)
    failed = audit(clone, "run", "--key", str(world.keys["ci"]))
    assert failed.code == 1, failed.out + failed.err
    flag.unlink()
    passed = audit(clone, "run", "--key", str(world.keys["ci"]))
    assert passed.code == 0, passed.out + passed.err  # one failure on the clone's own ledger
    pushed = audit(clone, "push")
    assert pushed.code != 0 and "had exhausted it" in pushed.err, pushed.out + pushed.err


@pytest.mark.parametrize("how", ["fetched", "pushed"])
def test_attack_attempts_control_a_sealer_resets_after_another_clone(
    exhausted: World, tmp_path: Path, how: str
) -> None:
    """Control: alice resets unit's attempts; the pass made in the other clone counts."""
    _laundered(exhausted, tmp_path, how)
    outcome = reset_attempts(exhausted.handle(), exhausted.alice, "default", "unit", "reviewed")
    assert outcome.commit is not None
    if how == "pushed":  # the pass never reached the server: push it again, reset and all
        assert exhausted.repo.git("push", "-q", "origin", PLANS_REF) == ""
        clone = tmp_path / "b"
        git(clone, "fetch", "-q", "origin", f"+{PLANS_REF}:{PLANS_REF}")
        pushed = audit(clone, "push")
        assert pushed.code == 0, pushed.out + pushed.err
        assert exhausted.cli("sync").code == 0
    assert exhausted.gate().verdict == "PASS"


# ------------------------------------------------------ the lookup cache forgets the failures


def _zeroed(doc: dict[str, Any]) -> None:
    doc["failed"] = [[contract, step, 0] for contract, step, _n in doc["failed"]]


def _removed(doc: dict[str, Any]) -> None:
    doc["failed"] = []


def _moved(doc: dict[str, Any]) -> None:
    doc["failed"] = [["sha256:" + "0" * 64, step, n] for _c, step, n in doc["failed"]]


def _forgotten(doc: dict[str, Any]) -> None:
    _removed(doc)
    doc["recent"] = [[step, [e for e in kept if e[0] != "failed"]] for step, kept in doc["recent"]]


# variant -> (how the tallies are rewritten, SQL run on the cache)
FORGET_FAILURES: dict[str, tuple[Any, tuple[str, ...]]] = {
    "the failures zeroed": (_zeroed, ()),
    "the failures removed": (_removed, ()),
    "the failures moved to another contract": (_moved, ()),
    "every failed execution forgotten": (_forgotten, ()),
    "the tallies dropped, the failing runs deleted": (
        None,
        ("DELETE FROM tallies", "DELETE FROM runs WHERE verdict='FAIL'"),
    ),
}


@pytest.mark.parametrize("forgery", sorted(FORGET_FAILURES))
def test_attack_attempts_lookup_cache_forgets_the_failures(exhausted: World, forgery: str) -> None:
    """unit is exhausted; ci edits the lookup cache (`.git/gitaudit/index.sqlite`) until it
    shows no failed attempt of unit under this contract, then runs the plan without `--force`:
    the run would try unit a third time, it passes, and neither the run nor the gate could tell
    (PASS before the fix, when the cache's rows were counted). The failures are tallies of the
    signed ledger kept under the local key's MAC; tallies rewritten or dropped are counted again
    from the chain: unit stays exhausted."""
    rewrite, statements = FORGET_FAILURES[forgery]
    edit_lookup_cache(exhausted, rewrite, *statements)
    recorded = exhausted.run()
    assert recorded.doc["steps"]["unit"]["status"] == "exhausted", recorded.doc["steps"]["unit"]
    assert recorded.verdict == "FAIL" and recorded.doc["forced"] is False
    judged = assert_plan(exhausted.gate(), "step.exhausted", "FAIL")
    assert judged.reasons[0].step == "unit"
    states = exhausted.cli("next", "--json")
    assert '"exhausted"' in states.out, states.out + states.err


def test_attack_attempts_lookup_cache_rolled_back_to_before_a_failure(
    world: World, tmp_path: Path
) -> None:
    """ci keeps a copy of the lookup cache's state after unit's first failure (its tallies
    genuine, their MAC valid for that tip) and puts it back once unit is exhausted: the cache
    says one failure. Tallies are true only for the tip they were counted up to: the runs
    after it are counted again, and unit stays exhausted."""
    flag = tmp_path / "flag"
    flag.write_text("unit fails\n")
    world.seal(flaky(flag))
    assert world.run().doc["steps"]["unit"]["status"] == "failed"
    database = world.handle().state_dir / "index.sqlite"
    with sqlite3.connect(database) as db:
        (count,) = db.execute("SELECT count FROM meta").fetchone()
        kept = {t: db.execute(f"SELECT * FROM {t}").fetchall() for t in ("meta", "tallies")}
    assert world.run().doc["steps"]["unit"]["status"] == "failed"
    assert world.run().doc["steps"]["unit"]["status"] == "exhausted"
    flag.unlink()
    with sqlite3.connect(database) as db:
        for table, rows in kept.items():
            db.execute(f"DELETE FROM {table}")
            db.executemany(f"INSERT INTO {table} VALUES ({','.join('?' * len(rows[0]))})", rows)
        db.execute("DELETE FROM runs WHERE seq > ?", (count,))
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "exhausted", recorded.doc["steps"]["unit"]
    assert_plan(world.gate(), "step.exhausted", "FAIL")


# ------------------------------------------------------- the runs ledger rewound before a run


def _rewind(world: World, how: str) -> None:
    """What the agent does to refs/audit/runs/default once unit is exhausted (two failures,
    then the run that found it exhausted): *how* names it."""
    git = world.handle().git
    chain = [str(c.id) for c in git.walk(git.revparse_single(RUNS).id)]
    if how == "rewound to the first failure":
        world.set_ref(RUNS, chain[-1])
    elif how == "deleted":
        world.repo.git("update-ref", "-d", RUNS)
    else:  # another ledger's chain: ci's first failing run alone, as another clone holds it
        world.forge_run(chain[-1], signer=world.ci, parent=None)


@pytest.mark.parametrize(
    "how", ["rewound to the first failure", "deleted", "moved to another chain"]
)
def test_attack_attempts_ledger_rewound_before_the_run(exhausted: World, how: str) -> None:
    """unit is exhausted; ci moves refs/audit/runs/default back to the first failure, deletes
    it, or points it at another chain holding fewer failures (the high-water marks left as
    they are), then runs the plan without `--force`: the run counted the failures on the
    rewound ledger, tried unit a third time, and marked its own run seen over the rewind, so
    the gate took it (PASS before the fix). The run refuses a ledger behind its mark before
    anything runs; the gate reports the rewind."""
    _rewind(exhausted, how)
    moved = exhausted.ref(RUNS)
    result = exhausted.cli("run", "--key", str(exhausted.keys["ci"]))
    assert result.code == 1, result.out + result.err
    lines = result.err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: refs/audit/runs/default "), lines
    assert "verified at" in lines[0] or "does not descend from" in lines[0], lines
    assert lines[1].startswith("hint: ") and "git update-ref refs/audit/runs/default" in lines[1]
    assert exhausted.ref(RUNS) == moved  # nothing ran, nothing was recorded
    assert_plan(exhausted.gate(), "evidence.ledger", "FAIL")


# ------------------------------------------------------------- timeouts spend no attempt


def test_attack_attempts_timeouts_spend_no_attempt(world: World, tmp_path: Path) -> None:
    """KNOWN LIMIT: `max_attempts` counts failed attempts, and a timed-out one is `unknown`,
    not failed. The agent makes the code under test hang where it would fail (it catches the
    flaky error and waits): unit, allowed 2 failures, times out three times, spends no
    attempt, and passes on the fourth try. Where it stops: each timed-out run is UNKNOWN for
    the gate and says so; the gate's PASS rests on the run in which unit's checks passed on
    this tree, and the timeouts stay on the ledger for a reviewer (`git audit log`)."""
    counter = tmp_path / "tries"  # the flake: unit passes from its fourth try on
    counter.write_text("0\n")
    hang = f'n=$(cat {counter}); echo $((n+1)) > {counter}; [ "$n" -ge 3 ] || sleep 30'
    world.seal(plan(step("unit", check("sh", "-c", hang, timeout=0.5), max_attempts=2)))
    for _ in range(3):
        recorded = world.run()
        entry = recorded.doc["steps"]["unit"]
        assert (entry["status"], entry["attempts_used"]) == ("unknown", 0), entry
        judged = assert_plan(world.gate(with_states=True), "step.unknown", "UNKNOWN")
        assert judged.states["unit"] == "pending"  # idempotent: it may simply run again
    lucky = world.run()
    assert lucky.doc["steps"]["unit"]["status"] == "passed"
    assert world.gate().verdict == "PASS"


@pytest.mark.parametrize("objects", ["without", "with"])
def test_attack_attempts_reset_lent_to_another_chain(
    exhausted: World, tmp_path: Path, objects: str
) -> None:
    """unit (max_attempts 2) is exhausted; alice resets its 2 failures. ci clones the repository
    without its audit runs (*objects*: with the ledger's commits fetched into the clone, so the
    reset's run is known there, or without), commits its change and runs the plan there: unit
    fails three times, then passes (forced, where the clone's run stops at exhaustion), and ci
    fetches that ledger back as a remote-tracking copy. The reset is a count (2), and it was
    subtracted from a chain that never held those failures: three failures there less two is
    one, under max_attempts, so the clone tried unit a fourth time and the gate said PASS
    (before the fix). A reset counts only on a chain that holds the run it was taken at."""
    flag = tmp_path / "flag"
    outcome = reset_attempts(exhausted.handle(), exhausted.alice, "default", "unit", "reviewed")
    assert outcome.commit is not None and outcome.count == 2
    exhausted.repo.write("fix.txt", "the change\n")
    exhausted.repo.commit("the change")
    clone = another_clone(exhausted, tmp_path)
    if objects == "with":
        git(clone, "fetch", "-q", str(exhausted.path), f"{RUNS}:refs/heads/their-runs")
        git(clone, "update-ref", "-d", "refs/heads/their-runs")
    flag.write_text("unit fails\n")
    statuses = []
    for _ in range(3):
        audit(clone, "run", "--key", str(exhausted.keys["ci"]))
        statuses.append(json.loads(git(clone, "show", f"{RUNS}:run.json"))["steps"]["unit"])
    assert [s["status"] for s in statuses[:2]] == ["failed", "failed"]
    assert statuses[2]["status"] == "exhausted"  # "failed" before the fix: a third try
    flag.unlink()
    audit(clone, "run", "--force", "--key", str(exhausted.keys["ci"]))
    assert json.loads(git(clone, "show", f"{RUNS}:run.json"))["steps"]["unit"]["status"] == "passed"
    exhausted.repo.git("fetch", "-q", str(clone), f"{RUNS}:{mirror_ref('b', RUNS)}")
    judged = assert_plan(exhausted.gate(), "evidence.forced-past-exhaustion", "FAIL")
    assert judged.reasons[0].step == "unit"
    assert exhausted.cli("status").code != 0
