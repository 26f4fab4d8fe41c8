"""Attacks on the evidence: run commits on refs/audit/runs/<plan>."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pygit2
import pytest
from pygit2.enums import ObjectType

from gitaudit.crypto.commits import NAMESPACE, SNAPSHOT_NAMESPACE
from gitaudit.errors import GitAuditError, LedgerError, RunError, TrustError
from gitaudit.gate.judge import judge
from gitaudit.git.repo import open_repo
from gitaudit.ledger import watermark
from gitaudit.ledger.objects import dumps, write_tree
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.refs import PLANS_REF, runs_ref
from gitaudit.ledger.runs import append_run
from gitaudit.ledger.seals import seal_plan, trust_add, trust_init, trust_remove
from gitaudit.ledger.verify import verify_all
from gitaudit.plan.catalog import check_worktree
from gitaudit.run.recorder import run_plan
from tests.adversarial.conftest import (
    STRICT,
    World,
    assert_plan,
    assert_plans_level,
    check,
    codes,
    honest_run_on_any_tip,
    only,
    plan,
    runner,
    step,
)
from tests.adversarial.test_seals import _forge_weak_seal
from tests.gitrepo import GitRepo, audit, forget_marks, git
from tests.run.test_memo import pre_push

RUNS = runs_ref("default")


def flagged(flag: Path, **unit: Any) -> dict[str, Any]:
    """`unit` passes while *flag* (outside the repository) does not exist; `lint` always."""
    return plan(step("unit", check("test", "!", "-e", str(flag)), **unit), step("lint"))


def make_pass(doc: dict[str, Any]) -> None:
    """What a forger writes: every step passed, verdict PASS."""
    doc["verdict"], doc["reasons"] = "PASS", []
    for entry in doc["steps"].values():
        entry["status"], entry["reason"] = "passed", ""


@pytest.fixture
def failing(world: World, tmp_path: Path) -> tuple[World, str, Path]:
    """`flagged` sealed; a genuine PASS run, then the flag appears and a genuine FAIL run for the
    same tree. Returns the world, the PASS run and the flag."""
    flag = tmp_path / "flag"
    world.seal(flagged(flag))
    passed = world.run()
    assert passed.verdict == "PASS"
    flag.write_text("the unit tests fail now\n")
    failed = world.run()
    assert failed.verdict == "FAIL" and failed.tree == passed.tree
    assert_plan(world.gate(), "step.failed", "FAIL")
    return world, passed.commit, flag


def _sig_block(raw: bytes) -> bytes:
    """The ``gpgsig`` header (with its continuation lines) of a raw commit."""
    start = raw.index(b"\ngpgsig ") + 1
    end = start
    while True:
        end = raw.index(b"\n", end) + 1
        if not raw[end:].startswith(b" "):
            return raw[start:end]


def _caught_in_place_and_in_a_fresh_clone(world: World) -> None:
    """The edited commit replaced the tip the last status verified: a rewrite of the ledger. In
    a fresh clone (no high-water mark) the stale signature gives it away."""
    judged = assert_plan(world.gate(), "evidence.ledger", "FAIL")
    assert "moved backwards or was rewritten" in judged.reasons[0].message
    forget_marks(world.handle().gitdir)
    judged = assert_plan(world.gate(), "evidence.untrusted", "FAIL")
    assert "signature" in judged.reasons[0].message


# ---------------------------------------------------------------------------------- content


def test_attack_evidence_run_json_edited(failing: tuple[World, str, Path]) -> None:
    """The FAIL run's run.json is edited to PASS; the commit keeps ci's (now stale) signature."""
    world, _, _ = failing
    tip = world.ref(RUNS)
    assert tip is not None
    files = world.run_files(tip)
    doc = json.loads(files["run.json"])
    make_pass(doc)
    files["run.json"] = dumps(doc)
    git = world.handle().git
    new_tree = str(write_tree(git, files)).encode()
    old_tree = str(git[tip].tree_id).encode()  # type: ignore[attr-defined]
    world.rewrite_raw(tip, lambda raw: raw.replace(b"tree " + old_tree, b"tree " + new_tree, 1))
    _caught_in_place_and_in_a_fresh_clone(world)


def test_attack_evidence_stdout_blob_edited(proven: World) -> None:
    """Only a captured stdout blob is changed (the gate never reads it, but it is evidence)."""
    tip = proven.ref(RUNS)
    assert tip is not None
    files = proven.run_files(tip)
    files["steps/unit/checks/0/stdout"] = b"1500 passed, 0 failed\n"
    git = proven.handle().git
    new_tree = str(write_tree(git, files)).encode()
    old_tree = str(git[tip].tree_id).encode()  # type: ignore[attr-defined]
    proven.rewrite_raw(tip, lambda raw: raw.replace(b"tree " + old_tree, b"tree " + new_tree, 1))
    _caught_in_place_and_in_a_fresh_clone(proven)


def test_attack_evidence_verdict_field_lies(failing: tuple[World, str, Path]) -> None:
    """Even a trusted runner's run.json saying PASS does not hide a failed step: the gate judges
    the steps, not the verdict field."""
    world, _, _ = failing
    tip = world.ref(RUNS)
    assert tip is not None

    def lie(doc: dict[str, Any]) -> None:
        doc["verdict"], doc["reasons"] = "PASS", []

    world.forge_run(tip, edit=lie, signer=world.ci)
    assert_plan(world.gate(), "step.failed", "FAIL")


def test_attack_evidence_step_entry_dropped(failing: tuple[World, str, Path]) -> None:
    """A (runner-signed) run.json that simply omits the failing step."""
    world, _, _ = failing
    tip = world.ref(RUNS)
    assert tip is not None

    def drop(doc: dict[str, Any]) -> None:
        make_pass(doc)
        del doc["steps"]["unit"]

    world.forge_run(tip, edit=drop, signer=world.ci)
    judged = assert_plan(world.gate(), "evidence.incomplete", "FAIL")
    assert judged.reasons[0].step == "unit"


def test_attack_evidence_requirement_left_uncovered(world: World) -> None:
    """`ship` needs `fast` or `thorough`; only `thorough` covers the must requirement R2. The
    runner-signed run.json says PASS with `thorough` failed: every required step is proven, but
    R2 is not (the gate checks coverage itself, not the run's own verdict)."""
    out = [{"name": "o", "verify": [{"type": "file_exists", "path": "README.md"}]}]
    ship = step("ship", check("true"))
    ship["depends_on"] = [{"any_of": ["fast", "thorough"]}]
    ship["requires_outputs"] = [{"step": "fast", "name": "o"}, {"step": "thorough", "name": "o"}]
    world.seal(
        {
            "task": "adversarial",
            "requirements": [
                {"id": "R", "description": "it ships", "priority": "must"},
                {"id": "R2", "description": "it is tested thoroughly", "priority": "must"},
            ],
            "steps": [
                step("fast", check("true"), outputs=out),
                step("thorough", check("false"), covers=["R2"], outputs=out),
                ship,
            ],
        }
    )
    honest = world.run()
    assert honest.verdict == "UNKNOWN"
    assert honest.doc["steps"]["thorough"]["status"] == "failed"
    assert_plan(world.gate(), "evidence.unknown", "UNKNOWN")
    tip = world.ref(RUNS)
    assert tip is not None

    def lie(doc: dict[str, Any]) -> None:
        doc["verdict"], doc["reasons"] = "PASS", []

    world.forge_run(tip, edit=lie, signer=world.ci)
    judged = assert_plan(world.gate(), "evidence.uncovered", "FAIL")
    assert "must requirement R2" in judged.reasons[0].message
    assert [r.code for r in judged.reasons] == ["evidence.uncovered"]
    status = world.cli("status", "--json")
    assert status.code == 1 and status.json()["verdict"] == "FAIL", status.out


# ------------------------------------------------------------------------ tree, contract, plan


def test_attack_evidence_replayed_for_another_tree_resigned(proven: World) -> None:
    """The PASS evidence of the old tree, re-labelled for the new tree and re-signed by mallory."""
    base = proven.ref(RUNS)
    assert base is not None
    proven.repo.write("src.py", "broken = True\n")
    proven.repo.commit("untested change")
    tree = proven.repo.head_tree()

    def relabel(doc: dict[str, Any]) -> None:
        doc["tree"] = doc["purity"]["before"] = doc["purity"]["after"] = tree

    proven.forge_run(base, edit=relabel, signer=proven.mallory)
    assert_plan(proven.gate(), "evidence.untrusted", "FAIL")


def test_attack_evidence_genuine_run_for_another_tree(proven: World) -> None:
    """Genuine evidence for tree A is no evidence for tree B."""
    proven.repo.write("src.py", "broken = True\n")
    proven.repo.commit("untested change")
    judged = assert_plan(proven.gate(), "evidence.missing", "UNKNOWN")
    assert proven.repo.head_tree()[:12] in judged.reasons[0].message
    assert proven.gate("HEAD~1").verdict == "PASS"
    status = proven.cli("status")
    assert status.code == 3 and "UNKNOWN" in status.out, status.out + status.err


def test_attack_evidence_replayed_for_another_contract(world: World) -> None:
    """A plan file kept out of the fingerprint by .gitignore, so that the disk shows a contract
    the tree does not hold: the gate reads plans from the judged tree, never from the disk, so
    the work-tree form agrees with the commit form (the plan is missing) before and after a
    strengthening reseal, and no evidence made meanwhile counts."""
    world.repo.write(".gitignore", ".gitaudit/\n")
    world.repo.commit("ignore the plans")
    world.seal(plan(step("unit")), commit=False)
    world.run()
    assert_plan(world.gate(None), "plan.missing", "FAIL")
    world.seal(STRICT, commit=False, reason="add lint")
    assert_plan(world.gate(None), "plan.missing", "FAIL")
    assert_plan(world.gate("HEAD"), "plan.missing", "FAIL")


def test_attack_evidence_replayed_for_another_plan(world: World) -> None:
    """Plans a and b have identical contracts; a's run commit is put on refs/audit/runs/b."""
    world.seal(STRICT, "a")
    world.seal(STRICT, "b")
    assert world.run("a").verdict == "PASS"
    world.set_ref(runs_ref("b"), world.ref(runs_ref("a")))  # type: ignore[arg-type]
    result = world.gate()
    assert only(result, "a").verdict == "PASS"
    judged = assert_plan(result, "evidence.replayed", "FAIL", name="b")
    assert "evidence for plan 'a', not 'b'" in judged.reasons[0].message


def test_attack_evidence_replayed_for_another_plan_with_another_contract(world: World) -> None:
    """Plans a (strict) and b (weak); a's ledger is copied onto refs/audit/runs/b."""
    world.seal(STRICT, "a")
    world.seal(plan(step("unit")), "b")
    assert world.run("a").verdict == "PASS"
    world.set_ref(runs_ref("b"), world.ref(runs_ref("a")))  # type: ignore[arg-type]
    assert_plan(world.gate(), "evidence.replayed", "FAIL", name="b")


# ------------------------------------------------------------------------------ signatures


def test_attack_evidence_signed_by_a_sealer_only_key(proven: World) -> None:
    """alice may seal but is not a runner (trust init --no-runner): her run is refused up front,
    and a run commit she signs by hand does not count."""
    with pytest.raises(TrustError, match="is not a runner"):
        run_plan(proven.handle(), "default", proven.alice)
    tip = proven.ref(RUNS)
    assert tip is not None
    proven.forge_run(tip, signer=proven.alice)
    judged = assert_plan(proven.gate(), "evidence.untrusted", "FAIL")
    assert "runner" in judged.reasons[0].hint


def test_attack_evidence_signed_by_a_removed_key(proven: World) -> None:
    """ci's key is removed from the trust set (say it leaked): its old evidence stops counting."""
    trust_remove(proven.handle(), proven.alice, "ci")
    assert_plan(proven.gate(), "evidence.untrusted", "FAIL")


def test_attack_evidence_unsigned_run_commit(failing: tuple[World, str, Path]) -> None:
    """A plain unsigned commit claiming PASS on top of the ledger."""
    world, _, _ = failing
    tip = world.ref(RUNS)
    assert tip is not None
    world.forge_run(tip, edit=make_pass, signer=None)
    judged = assert_plan(world.gate(), "evidence.untrusted", "FAIL")
    assert "is not signed" in judged.reasons[0].message


def test_attack_evidence_two_signatures(failing: tuple[World, str, Path]) -> None:
    """mallory signs a PASS forgery and adds ci's genuine signature block as a second header,
    hoping a verifier accepts 'any one trusted signature'."""
    world, _, _ = failing
    tip = world.ref(RUNS)
    assert tip is not None
    git = world.handle().git
    _kind, genuine = git.odb.read(git.revparse_single(tip).id)
    forged = world.forge_run(tip, edit=make_pass, signer=world.mallory, move=False)
    extra = _sig_block(genuine)

    def add_second(raw: bytes) -> bytes:
        block = _sig_block(raw)
        return raw.replace(block, block + extra, 1)

    world.rewrite_raw(str(forged), add_second)
    judged = assert_plan(world.gate(), "evidence.untrusted", "FAIL")
    assert "2 gpgsig headers" in judged.reasons[0].message


def test_attack_evidence_forged_with_git_hash_object(failing: tuple[World, str, Path]) -> None:
    """A commit typed by hand and written with `git hash-object -t commit -w`, carrying a
    well-formed but meaningless SSH signature."""
    world, _, _ = failing
    tip = world.ref(RUNS)
    assert tip is not None
    files = world.run_files(tip)
    doc = json.loads(files["run.json"])
    make_pass(doc)
    files["run.json"] = dumps(doc)
    tree = write_tree(world.handle().git, files)
    text = (
        f"tree {tree}\nparent {tip}\n"
        "author ci <ci@example.test> 1790000000 +0000\n"
        "committer ci <ci@example.test> 1790000000 +0000\n"
        "gpgsig -----BEGIN SSH SIGNATURE-----\n"
        " U1NIU0lHAAAAAQAAADMAAAALc3NoLWVkMjU1MTkAAAAg\n"
        " -----END SSH SIGNATURE-----\n"
        "\naudit(default): PASS\n"
    )
    oid = world.repo.git("hash-object", "-t", "commit", "-w", "--stdin", input=text.encode())
    world.set_ref(RUNS, oid.strip())
    assert_plan(world.gate(), "evidence.untrusted", "FAIL")


def test_attack_evidence_foreign_commit_on_top_of_genuine_evidence(proven: World) -> None:
    """mallory appends her own 'run' for a new tree on top of genuine evidence for the old tree:
    the old tree's evidence is found, but the ledger tip is verified too."""
    base = proven.ref(RUNS)
    assert base is not None
    proven.repo.write("src.py", "x = 1\n")
    proven.repo.commit("new tree")
    tree = proven.repo.head_tree()

    def relabel(doc: dict[str, Any]) -> None:
        doc["tree"] = tree

    proven.forge_run(base, edit=relabel, signer=proven.mallory)
    judged = assert_plan(proven.gate("HEAD~1"), "evidence.untrusted", "FAIL")
    assert "ledger tip" in judged.reasons[0].message


def test_attack_evidence_copied_from_another_repository(sealed: World, tmp_path: Path) -> None:
    """A genuine PASS run for the very same tree and contract, made in a clone whose plans ref
    has mallory as its root of trust, is fetched into refs/audit/runs/default."""
    other = GitRepo(tmp_path / "other")
    subprocess.run(
        ["git", "clone", "-q", str(sealed.path), str(other.path)], check=True, capture_output=True
    )
    assert other.head_tree() == sealed.repo.head_tree()
    handle = open_repo(other.path)
    trust_init(handle, sealed.mallory, "mallory")
    (checked,) = check_worktree(other.path, "default")
    seal_plan(handle, sealed.mallory, checked)
    assert run_plan(open_repo(other.path), "default", sealed.mallory).verdict == "PASS"
    sealed.repo.git("fetch", "-q", str(other.path), f"+{RUNS}:{RUNS}")
    judged = assert_plan(sealed.gate(), "evidence.untrusted", "FAIL")
    assert "runner key trusted on refs/audit/plans" in judged.reasons[0].hint


# ---------------------------------------------------------------------------- the ledger


def test_attack_evidence_ledger_rewound_after_verify(failing: tuple[World, str, Path]) -> None:
    """After `git audit verify` recorded the FAIL run as the high-water mark, the runs ref is
    reset to the earlier PASS run of the same tree."""
    world, passed, _ = failing
    assert verify_all(world.handle()).ok
    world.set_ref(RUNS, passed)
    judged = assert_plan(world.gate(), "evidence.ledger", "FAIL")
    assert "moved backwards" in judged.reasons[0].message


def test_attack_evidence_ledger_truncated_after_status(failing: tuple[World, str, Path]) -> None:
    """`git audit status` saw the FAIL run (the `failing` fixture ran the gate); the ledger is
    then truncated back to the PASS run."""
    world, passed, _ = failing
    world.set_ref(RUNS, passed)
    judged = assert_plan(world.gate(), "evidence.ledger", "FAIL")
    assert "moved backwards" in judged.reasons[0].message


def test_attack_evidence_ledger_rewound_right_after_the_failing_run(
    world: World, tmp_path: Path
) -> None:
    """The agent runs, sees FAIL, and resets the runs ref to the previous PASS before anybody
    looks at the status."""
    flag = tmp_path / "flag"
    world.seal(flagged(flag))
    passed = world.run()
    assert world.gate().verdict == "PASS"
    flag.write_text("broken\n")
    assert world.run().verdict == "FAIL"
    world.set_ref(RUNS, passed.commit)
    assert_plan(world.gate(), "evidence.ledger", "FAIL")


def test_attack_evidence_buried_forgery_hidden_from_verify_by_status(
    failing: tuple[World, str, Path],
) -> None:
    """mallory slips an unsigned PASS forgery into the ledger; an honest run would have landed
    on top of it (it now refuses to sign on a tip no runner signed); `git audit status` runs;
    then `git audit verify` must still report the forgery."""
    world, _, _ = failing
    tip = world.ref(RUNS)
    assert tip is not None
    forged = world.forge_run(tip, edit=make_pass, signer=None)
    with pytest.raises(LedgerError, match="which no runner signed"):
        world.run()
    assert world.ref(RUNS) == str(forged)
    world.gate()
    report = verify_all(world.handle())
    assert not report.ok
    assert any(str(forged)[:12] in p for p in report.problems), report.problems


# --------------------------------------------------------------------------- carried steps


def test_attack_evidence_carried_from_a_run_that_failed_it(
    failing: tuple[World, str, Path],
) -> None:
    """A runner-signed run claims `unit` is carried from the FAIL run. A trusted runner is trusted
    by definition; this shows the gate still traces the claim to the ledger instead of taking the
    runner's word for it."""
    world, _, _ = failing
    tip = world.ref(RUNS)
    assert tip is not None

    def carry(doc: dict[str, Any]) -> None:
        make_pass(doc)
        doc["steps"]["unit"].update(status="carried", carried_from=tip)

    world.forge_run(tip, edit=carry, signer=world.ci)
    judged = assert_plan(world.gate(), "evidence.carried-invalid", "FAIL")
    assert judged.reasons[0].step == "unit"


def test_attack_evidence_carried_from_a_run_for_another_tree(proven: World) -> None:
    """A runner-signed run for a new tree carries `unit` from the old tree's passing run."""
    base = proven.ref(RUNS)
    assert base is not None
    proven.repo.write("src.py", "broken = True\n")
    proven.repo.commit("untested change")
    tree = proven.repo.head_tree()

    def carry(doc: dict[str, Any]) -> None:
        doc["tree"] = tree
        doc["steps"]["unit"].update(status="carried", carried_from=base)

    proven.forge_run(base, edit=carry, signer=proven.ci)
    assert_plan(proven.gate(), "evidence.carried-invalid", "FAIL")


def _slip_in_forgery(world: World) -> str:
    """An unsigned run commit claiming every step passed for the current tree, put on the
    ledger by hand (what an agent that can write refs can do)."""
    tip = world.ref(RUNS)
    assert tip is not None
    return str(world.forge_run(tip, edit=make_pass, signer=None))


def test_attack_evidence_carried_from_an_unsigned_run(failing: tuple[World, str, Path]) -> None:
    """An unsigned forgery claims `unit` passed; a ci-signed run (exactly what an honest targeted
    `git audit run lint` writes today, see the next test) carries `unit` from it."""
    world, _, _ = failing
    forged = _slip_in_forgery(world)

    def carry(doc: dict[str, Any]) -> None:
        make_pass(doc)
        doc["steps"]["unit"].update(status="carried", carried_from=forged)

    world.forge_run(forged, edit=carry, signer=world.ci)
    assert_plan(world.gate(), "evidence.carried-invalid", "FAIL")


def test_attack_evidence_forgery_laundered_by_a_targeted_run(
    failing: tuple[World, str, Path],
) -> None:
    """`unit` really fails for this tree. The agent slips in an unsigned 'all passed' run, then
    asks the honest runner for `git audit run lint` only."""
    world, _, _ = failing
    _slip_in_forgery(world)
    with pytest.raises(LedgerError, match="which no runner signed"):
        world.run(targets=["lint"])
    with honest_run_on_any_tip():  # as runs were signed before the tip check
        recorded = world.run(targets=["lint"])
    assert recorded.doc["steps"]["unit"]["status"] != "carried"
    assert world.gate().verdict != "PASS"


def test_attack_evidence_forgery_laundered_by_incremental_evidence(
    world: World, tmp_path: Path
) -> None:
    """`unit` declares inputs, so an unchanged input digest carries it forward. The agent forges
    an unsigned run in which `unit` passed (with the right input digest, which anyone can
    compute), then an ordinary full `git audit run` happens."""
    flag = tmp_path / "flag"
    flag.write_text("unit fails for this tree\n")
    world.repo.write("src/app.py", "x = 1\n")
    world.seal(flagged(flag, inputs=["src"]))
    first = world.run()
    assert first.verdict == "FAIL"
    _slip_in_forgery(world)
    with pytest.raises(LedgerError, match="which no runner signed"):
        world.run()
    with honest_run_on_any_tip():  # as runs were signed before the tip check
        recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] != "carried"
    assert_plan(world.gate(), "step.failed", "FAIL")


@pytest.mark.parametrize("recorded_by", ["a targeted run", "ci, as runs wrote it before"])
def test_attack_evidence_carried_dependant_while_every_alternative_fails(
    world: World, tmp_path: Path, recorded_by: str
) -> None:
    """`ship` needs `fast` or `thorough` (an any_of clause); both alternatives pass while a flag
    outside the repository does not exist. Everything passed; the flag appears, and `git audit
    run fast thorough` executes both on the same tree: both fail. That run carried ship's pass
    from the first run for the tree beside them and said PASS (before the fix; ci may still
    sign such a record), and the gate took it: an unverified OR alternative is not reported by
    itself, and ship's entry was judged alone. Now the run blocks ship; and the gate, which
    composed ship's pass from the older run beside the newest run's failures (PASS too, before
    the fix), counts a step only with a prerequisite of each clause proven beside it."""
    flag = tmp_path / "flag"
    out = [{"name": "o", "verify": [{"type": "file_exists", "path": "README.md"}]}]
    reads = check("test", "!", "-e", str(flag))
    ship = step("ship", deps=[{"any_of": ["fast", "thorough"]}])
    ship["requires_outputs"] = [{"step": "fast", "name": "o"}, {"step": "thorough", "name": "o"}]
    world.seal(plan(*(step(s, reads, outputs=out) for s in ("fast", "thorough")), ship))
    first = world.run()
    assert first.verdict == "PASS"
    flag.write_text("both alternatives fail now\n")
    recorded = world.run(targets=["fast", "thorough"])
    assert recorded.tree == first.tree and recorded.verdict != "PASS"
    assert {sid: e["status"] for sid, e in recorded.doc["steps"].items()} == {
        "fast": "failed",
        "thorough": "failed",
        "ship": "blocked",
    }
    if recorded_by != "a targeted run":

        def carried(doc: dict[str, Any]) -> None:
            doc["verdict"], doc["reasons"] = "PASS", []
            doc["steps"]["ship"].update(
                status="carried", reason="verified earlier for this tree", carried_from=first.commit
            )

        world.forge_run(recorded.commit, edit=carried, signer=world.ci)
    judged = assert_plan(world.gate(), "evidence.prerequisite-unproven", "UNKNOWN")
    reason = judged.reasons[0]
    assert reason.step == "ship" and "any_of(fast, thorough)" in reason.message, reason
    status = world.cli("status", "--json")
    assert status.code != 0 and status.json()["verdict"] == "UNKNOWN", status.out


# ---------------------------------------------------------------------- local caches in .git


def test_attack_evidence_lookup_index_poisoned(proven: World) -> None:
    """The agent edits the lookup cache so the PASS run of the old tree is listed for the new."""
    old = proven.ref(RUNS)
    proven.repo.write("src.py", "broken = True\n")
    proven.repo.commit("untested change")
    assert proven.gate().verdict == "UNKNOWN"  # the index is in sync with the ledger
    with sqlite3.connect(proven.handle().state_dir / "index.sqlite") as db:
        db.execute("UPDATE runs SET tree=? WHERE commit_id=?", (proven.repo.head_tree(), old))
    result = proven.gate()
    assert result.verdict != "PASS"
    assert only(result).reasons[0].code in ("evidence.missing", "evidence.ledger")


def test_attack_evidence_lookup_index_forgets_the_newer_failing_run(
    failing: tuple[World, str, Path],
) -> None:
    """The agent deletes the newer FAIL run's row from the lookup cache (the cache's tip stays,
    so nothing is re-indexed): the cache now names the older PASS run of the same tree."""
    world, passed, _ = failing
    failed = world.ref(RUNS)
    assert failed is not None and failed != passed
    with sqlite3.connect(world.handle().state_dir / "index.sqlite") as db:
        assert db.execute("DELETE FROM runs WHERE commit_id=?", (failed,)).rowcount == 1
    judged = assert_plan(world.gate(), "evidence.ledger", "FAIL")
    assert f"a newer run ({failed[:12]})" in judged.reasons[0].message
    assert judged.run is None
    status = world.cli("status", "--json")
    assert status.code == 1 and status.json()["verdict"] == "FAIL", status.out


def test_attack_evidence_carried_over_a_newer_failure(failing: tuple[World, str, Path]) -> None:
    """ci signs a run that carries `unit` from the older PASS run of this tree, over the newer
    FAIL run (what a targeted run prepared before the failure was recorded appends, re-parented
    onto it): the gate accepted any earlier pass for the tree (PASS before the fix). The newest
    trusted execution of the step for the tree decides."""
    world, passed, _ = failing

    def carry(doc: dict[str, Any]) -> None:
        make_pass(doc)
        doc["steps"]["unit"].update(status="carried", carried_from=passed)

    forged = world.forge_run(passed, edit=carry, signer=world.ci)
    judged = assert_plan(world.gate(), "evidence.carried-invalid", "FAIL")
    assert judged.run == str(forged) and judged.reasons[0].step == "unit"


def spoiling_plan(marker: Path) -> dict[str, Any]:
    """`unit` reads the verdict (which says broken); its first check writes "ok" into the
    checkout's copy, once (the marker outside the checkout remembers it): the run that does it
    changed its workspace, and FAILs as a whole although `unit` passed in it."""
    spoil = {
        "type": "run",
        "cmd": f"test -e {marker} || {{ touch {marker}; printf 'ok\\n' > verdict; }}",
        "shell": True,
    }
    reads = check("grep", "-qx", "ok", "verdict")
    return plan(step("unit", spoil, reads, inputs=["verdict"]), step("lint"))


@pytest.mark.parametrize("carry", ["targeted", "inputs-unchanged", "signed-by-ci"])
def test_attack_evidence_carried_from_a_run_that_changed_its_workspace(
    world: World, tmp_path: Path, carry: str
) -> None:
    """unit passes only in a run whose check rewrote the file it reads: that run FAILs (it
    changed its workspace), but its entry for unit says passed. Before the fix a later run
    carried that pass (a targeted `git audit run lint` on the same tree, or a full run on
    another tree where unit's inputs are unchanged), said PASS, and so did the gate; ci could
    also sign such a carry. A pass in a run that does not count as a whole is no pass: the
    runs execute unit again (it fails) and the gate refuses the carry."""
    world.repo.write("verdict", "broken\n")
    world.seal(spoiling_plan(tmp_path / "spoiled"))
    impure = world.run()
    assert impure.verdict == "FAIL" and impure.doc["purity"]["changed"] == ["verdict"]
    assert impure.doc["steps"]["unit"]["status"] == "passed"
    if carry == "signed-by-ci":

        def carried(doc: dict[str, Any]) -> None:
            make_pass(doc)
            doc["purity"]["changed"] = []
            doc["steps"]["unit"].update(status="carried", carried_from=impure.commit)

        forged = world.forge_run(impure.commit, edit=carried, signer=world.ci)
        judged = world.gate(None).plans[0]
        assert judged.verdict != "PASS" and judged.run == str(forged), judged
        first = judged.reasons[0]
        assert (first.code, first.step) == ("evidence.carried-invalid", "unit"), judged.reasons
        return
    if carry == "inputs-unchanged":
        world.repo.write("README.md", "another tree, the same verdict\n")
        world.repo.commit("another tree")
        recorded = world.run()
    else:
        recorded = world.run(targets=["lint"])
    assert recorded.doc["steps"]["unit"]["status"] != "carried", recorded.doc["steps"]["unit"]
    assert recorded.verdict != "PASS"
    assert world.gate(None).verdict != "PASS"


HIDE_THE_FAILING_RUN = {
    "its row deleted": "DELETE FROM runs WHERE commit_id=?",
    "its tree changed": "UPDATE runs SET tree='0000' WHERE commit_id=?",
    "its contract changed": "UPDATE runs SET contract='0000' WHERE commit_id=?",
}


@pytest.mark.parametrize("forgery", sorted(HIDE_THE_FAILING_RUN))
def test_attack_evidence_lookup_index_hides_the_failing_run_from_a_targeted_run(
    failing: tuple[World, str, Path], forgery: str
) -> None:
    """The agent hides the newer FAIL run from the lookup cache (its row deleted, or filed
    under another tree or contract), then asks the honest runner for `git audit run lint` only:
    the run carried `unit` from the older PASS run of the same tree, said PASS, and so did the
    gate, which accepts a carry from any earlier pass for the tree (before the fix). The run
    reads the runs between the source and the tip from the signed chain: the newer failure
    decides, nothing is carried."""
    world, passed, _ = failing
    failed = world.ref(RUNS)
    with sqlite3.connect(world.handle().state_dir / "index.sqlite") as db:
        assert db.execute(HIDE_THE_FAILING_RUN[forgery], (failed,)).rowcount == 1
    recorded = world.run(targets=["lint"])
    assert recorded.doc["steps"]["unit"]["status"] != "carried", recorded.doc["steps"]["unit"]
    assert recorded.doc["steps"]["unit"].get("carried_from") != passed
    assert recorded.verdict != "PASS"
    assert world.gate().verdict != "PASS"


def test_attack_evidence_watermark_file_forged(proven: World) -> None:
    """An unsigned plans commit seals a weak plan; the agent writes its id into watermarks.json,
    commits the weak plan and has the honest runner run it."""
    files = proven.plans_files()
    weak = plan(step("unit"))
    proven.write_plan(weak)
    (checked,) = check_worktree(proven.path, "default")
    record = json.loads(files["seals/default.json"])
    record.update(contract_digest=checked.digest, version=2)
    files["seals/default.json"] = dumps(record)
    files["plans/default.json"] = checked.file.data
    forged = proven.forge_plans(files, None)
    watermark.record(proven.handle().gitdir, {PLANS_REF: str(forged)})
    proven.repo.commit("weak plan")
    with pytest.raises(TrustError, match="not signed"):
        read_state(proven.handle())  # the tip's signature is checked even when it is the mark
    result = proven.gate()
    assert result.verdict == "FAIL"
    assert [r.code for r in result.reasons] == ["plans.untrusted"]


MARKS = ("by hand", "with the old tip's MAC", "with another ref's MAC", "with another repo's MAC")


def _mac_made_in(path: Path, ref: str, commit: str) -> str:
    """The MAC gitaudit gives a verified mark of *ref* at *commit* in the repository at *path*
    (*ref* moved there for the moment; the marks file and the ref put back as they were)."""
    handle = open_repo(path)
    marks = handle.state_dir / "watermarks.json"
    saved = marks.read_bytes()
    old = handle.git.references.get(ref)
    handle.git.references.create(ref, pygit2.Oid(hex=commit), force=True)
    watermark.record(handle.gitdir, {ref: commit}, "verified", handle.git)
    made = str(json.loads(marks.read_text()).get("macs", {}).get(ref, ""))
    marks.write_bytes(saved)
    if old is None:
        handle.git.references.delete(ref)
    else:
        handle.git.references.create(ref, old.target, force=True)
    return made


def _mark_verified(world: World, tmp_path: Path, ref: str, commit: str, how: str) -> None:
    """What an agent can write into watermarks.json: *ref* verified (and seen) at *commit*, the
    MAC left out, left as the genuine old tip's, or one gitaudit made for another ref or in a
    copy of the repository."""
    path = world.handle().state_dir / "watermarks.json"
    doc = json.loads(path.read_text())
    macs = doc.setdefault("macs", {})
    if how == "by hand":
        macs.pop(ref, None)
    elif how == "with another ref's MAC":
        macs[ref] = _mac_made_in(world.path, "refs/audit/scratch", commit)
    elif how == "with another repo's MAC":
        copy = tmp_path / "copy"
        shutil.copytree(world.path, copy, symlinks=True)
        macs[ref] = _mac_made_in(copy, ref, commit)
    doc["verified"][ref] = doc["seen"][ref] = commit
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("mark", MARKS)
def test_attack_evidence_watermark_hides_a_forged_interior_plans_commit(
    proven: World, tmp_path: Path, mark: str
) -> None:
    """Under the genuine root, an unsigned plans commit makes mallory a sealer and a runner; on it
    a commit mallory signs seals a weak plan, and the agent marks that tip verified in
    watermarks.json. Only the tip's signature was checked, against its parent's (unverified)
    trust set: status, verify, the commit-msg claim and pre-push passed mallory's evidence."""
    files = proven.plans_files()
    trust = read_state(proven.handle()).trust.added("mallory", proven.mallory.public_key, "sealer")
    files.update(trust.added("mallory", proven.mallory.public_key, "runner").files())
    unsigned = str(proven.forge_plans(files, None))[:12]
    tip = proven.forge_plans(_forge_weak_seal(proven), proven.mallory)
    _mark_verified(proven, tmp_path, PLANS_REF, str(tip), mark)
    proven.repo.commit("weak plan")
    with pytest.raises(TrustError, match=f"plans commit {unsigned}: .*not signed"):
        read_state(proven.handle())
    with pytest.raises(TrustError, match=f"plans commit {unsigned}"):
        proven.run(signer=proven.mallory)
    result = proven.gate()
    assert_plans_level(result, "plans.untrusted")
    assert f"plans commit {unsigned}" in result.reasons[0].message
    report = verify_all(proven.handle())
    assert not report.ok and any(unsigned in p for p in report.problems), report.problems
    assert proven.cli("status").code == 1


@pytest.mark.parametrize("mark", MARKS)
def test_attack_evidence_watermark_hides_a_forged_interior_run_commit(
    failing: tuple[World, str, Path], tmp_path: Path, mark: str
) -> None:
    """mallory slips an unsigned PASS forgery into a verified ledger, an honest run lands on top
    of it, and the agent marks that tip verified in watermarks.json: `git audit verify` resumed
    at the mark and reported nothing."""
    world, _, _ = failing
    assert verify_all(world.handle()).ok  # the genuine ledger, verified (and its tip marked)
    tip = world.ref(RUNS)
    assert tip is not None
    forged = str(world.forge_run(tip, edit=make_pass, signer=None))[:12]
    with honest_run_on_any_tip():  # as runs were signed before the tip check
        _mark_verified(world, tmp_path, RUNS, world.run().commit, mark)
    report = verify_all(world.handle())
    assert not report.ok and any(forged in p for p in report.problems), report.problems
    assert not verify_all(world.handle()).ok  # nothing was marked verified meanwhile


# --------------------------------------------------------------------- human attestations


def test_attack_evidence_timeout_reconciled_as_observed_pass(world: World) -> None:
    """`unit` is an ordinary (idempotent) test run. The agent makes it hang, gets `unknown`,
    changes the code, and 'reconciles' the step as observed passing."""
    world.seal(plan(step("unit", check("sleep", "30", timeout=0.5))))
    assert world.run().verdict == "UNKNOWN"
    world.repo.write("src.py", "broken = True\n")
    world.repo.commit("never tested")
    with pytest.raises(TrustError, match="needs a reconciler"):  # ci is a runner only
        world.run(targets=["unit"], reconcile={"unit": ("pass", "looked fine to me")})
    # and even a key that may reconcile cannot settle an idempotent step by its word
    trust_add(world.handle(), world.alice, world.ci.public_key, "reconciler", "ci")
    with pytest.raises(RunError, match="idempotent"):
        world.run(targets=["unit"], reconcile={"unit": ("pass", "looked fine to me")})
    assert_plan(world.gate(), "evidence.missing", "UNKNOWN")


FORGETTING = (
    "marks deleted",
    "marks emptied",
    "the marks of the PASS put back",
    "marks deleted, the ledger deleted, the PASS parked as a fetched one",
)


@pytest.mark.parametrize("forget", FORGETTING)
def test_attack_evidence_marks_forgotten_hide_a_rewind(
    world: World, tmp_path: Path, forget: str
) -> None:
    """A genuine PASS, then a genuine FAIL of the same tree, never pushed. The agent moves the
    runs ref back to the PASS and makes the marks file forget the FAIL run: deletes it, empties
    it, or puts back the copy it took when the PASS was judged (the verdict memo then also
    recognised the state it remembered the PASS in, and pre-push served it from there). The
    floors kept in the gitaudit home still name the FAIL run: the rewind is reported."""
    flag = tmp_path / "flag"
    world.seal(flagged(flag))
    world.repo.commit("the tree the runs judge")
    passed = world.run()
    assert passed.verdict == "PASS"
    assert pre_push(world.repo)[0] == 0  # judged, and remembered
    marks = world.handle().state_dir / "watermarks.json"
    saved = marks.read_bytes()
    flag.write_text("the unit tests fail now\n")
    failed = world.run()
    assert failed.verdict == "FAIL" and failed.tree == passed.tree
    world.set_ref(RUNS, passed.commit)
    if forget.startswith("marks deleted, the ledger deleted"):
        world.set_ref("refs/gitaudit/remotes/origin/audit/runs/default", passed.commit)
        world.repo.git("update-ref", "-d", RUNS)
        marks.unlink()
    elif forget == "marks deleted":
        marks.unlink()
    elif forget == "marks emptied":
        marks.write_text("{}")
    else:
        marks.write_bytes(saved)
    judged = assert_plan(world.gate(), "evidence.ledger", "FAIL")
    assert any(w in judged.reasons[0].message for w in ("moved backwards", "was deleted"))
    assert pre_push(world.repo)[:2] == (1, "full")


LINKED_WORKTREE = (
    "status in the linked worktree",
    "pre-push in the linked worktree",
    "a run in the linked worktree",
    "the failure judged in the linked worktree, the ref rewound in the main one",
)


@pytest.mark.parametrize("where", LINKED_WORKTREE)
def test_attack_evidence_rewind_through_a_linked_worktree(
    world: World, tmp_path: Path, where: str
) -> None:
    """A genuine PASS, then a genuine FAIL of the same tree; the agent adds a linked worktree
    (`git worktree add`) and moves the runs ref, which all worktrees share, back to the PASS.
    The marks and their floors were kept per git dir, and a linked worktree has its own: in the
    linked worktree status and pre-push said PASS while the main worktree reported the rewind,
    and the honest runner appended its next run there on the rewound ref; with the failure
    recorded and judged in the linked worktree, the main one said PASS (before the fix). The
    marks are the repository's, kept in its common dir: every worktree reports the rewind."""
    flag = tmp_path / "flag"
    world.seal(flagged(flag))
    passed = world.run()
    assert passed.verdict == "PASS"
    linked = GitRepo(tmp_path / "wt")
    world.repo.git("worktree", "add", "-q", str(linked.path), "HEAD")
    flag.write_text("the unit tests fail now\n")
    if where.startswith("the failure judged in the linked worktree"):
        failed = run_plan(open_repo(linked.path), "default", world.ci, jobs=1)
        assert failed.verdict == "FAIL" and failed.tree == passed.tree
        assert_plan(judge(open_repo(linked.path), "HEAD"), "step.failed", "FAIL")
        world.set_ref(RUNS, passed.commit)
        judged = assert_plan(world.gate(), "evidence.ledger", "FAIL")
        assert "moved backwards" in judged.reasons[0].message
        assert pre_push(world.repo)[:2] == (1, "full")
        return
    failed = world.run()
    assert failed.verdict == "FAIL" and failed.tree == passed.tree
    assert_plan(world.gate(), "step.failed", "FAIL")
    linked.git("update-ref", RUNS, passed.commit)
    if where == "status in the linked worktree":
        judged = assert_plan(judge(open_repo(linked.path), "HEAD"), "evidence.ledger", "FAIL")
        assert "moved backwards" in judged.reasons[0].message
        assert audit(linked.path, "status").code == 1
    elif where == "pre-push in the linked worktree":
        assert pre_push(linked)[:2] == (1, "full")
    else:
        flag.unlink()
        linked.write("more.txt", "more\n")
        linked.commit("more")
        with pytest.raises(LedgerError, match="moved backwards"):
            run_plan(open_repo(linked.path), "default", world.ci, jobs=1)
        assert world.ref(RUNS) == passed.commit  # nothing appended over the rewind


FORGED_TIPS = [
    "unsigned, on the last run",
    "signed by mallory, on the last run",
    "unsigned root, the ledger's first commit",
    "a snapshot ci signed, on the last run",
]


@pytest.mark.parametrize("forged", FORGED_TIPS)
def test_attack_evidence_honest_run_signs_on_a_forged_tip(world: World, forged: str) -> None:
    """The agent points the runs ref at a commit no runner signed (on the last genuine run, or
    as the ledger's first commit), then the honest runner runs: its signed run took the forgery
    into the chain as its parent, burying it under genuine evidence (`verify` and the server
    then refused the ledger for good, and a forged run.json sat in the signed history). The
    run refuses to sign on a tip no runner signed, and leaves the ref where it was."""
    world.seal(plan(step("unit", check("true"))))
    if forged != "unsigned root, the ledger's first commit":
        first = world.run()
        assert first.verdict == "PASS"
    else:
        first = None
    git = world.handle().git
    base = first.commit if first is not None else None
    files = world.run_files(base) if base else {"run.json": b"{}\n"}
    signer = world.mallory if "mallory" in forged else world.ci if "snapshot" in forged else None
    parents = [pygit2.Oid(hex=base)] if base else []
    namespace = SNAPSHOT_NAMESPACE if forged.startswith("a snapshot") else NAMESPACE
    tree = write_tree(git, files)
    oid = world.commit_object(git, tree, parents, "audit: forged\n", signer, namespace=namespace)
    world.set_ref(RUNS, oid)
    with pytest.raises(LedgerError, match="which no runner signed"):
        world.run()
    assert world.ref(RUNS) == str(oid)  # nothing appended on the forgery
    result = world.cli("run", "--key", str(world.keys["ci"]))
    assert result.code == 1 and "no runner signed" in result.err, (result.out, result.err)
    assert world.ref(RUNS) == str(oid)


def test_a_run_follows_a_run_signed_by_a_runner_retired_since(world: World) -> None:
    """Control: ci's run, then alice trusts a new runner and retires ci: the new runner's run
    is signed on ci's (a run then, a run still), and the gate judges by the new runner's."""
    world.seal(plan(step("unit", check("true"))))
    first = world.run()
    assert first.verdict == "PASS"
    second = runner(world, "ci2")
    trust_remove(world.handle(), world.alice, "ci")
    recorded = world.run(signer=second)
    assert recorded.verdict == "PASS"
    assert world.ref(f"{recorded.commit}^") == first.commit
    assert world.gate().verdict == "PASS"


# --------------------------------------------- a commit whose tree git would never write


def _unwritten_tree(world: World, kind: str) -> pygit2.Oid:
    """A commit on HEAD (proven: answer.txt holds 42) whose tree, made by hand, reads like
    HEAD's to some reader of git trees and is no tree git writes (``git fsck`` names it)."""
    git_ = world.handle().git
    head = git_.revparse_single("HEAD").peel(pygit2.Commit)
    top = [(b"%o" % e.filemode, e.raw_name or b"", e.id.raw) for e in head.tree]

    def write(entries: list[tuple[bytes, bytes, bytes]]) -> bytes:
        data = b"".join(m + b" " + n + b"\0" + i for m, n, i in entries)
        return git_.odb.write(ObjectType.TREE, data).raw

    wrong, weak = git_.create_blob(b"41\n").raw, git_.create_blob(b'{"steps": []}\n').raw
    at = next(k for k, e in enumerate(top) if e[1] == b"answer.txt")
    if kind in ("answer.txt twice, the failing one first", "answer.txt twice, the failing last"):
        top.insert(at + kind.endswith("last"), (b"100644", b"answer.txt", wrong))
    elif kind == "the plan twice":
        folder = git_[head.tree[".gitaudit/plans"].id]
        assert isinstance(folder, pygit2.Tree)
        plans = [(b"100644", b"default.json", weak)]
        plans += [(b"%o" % e.filemode, e.raw_name or b"", e.id.raw) for e in folder]
        top = [
            (m, n, write([(b"40000", b"plans", write(plans))]) if n == b".gitaudit" else i)
            for m, n, i in top
        ]
    elif kind == "the plan by its whole path":
        top.append((b"100644", b".gitaudit/plans/default.json", weak))
    elif kind == "out of order":
        top.reverse()
    elif kind == "odd modes":
        top = [
            (b"100664" if m == b"100644" else b"040000" if m == b"40000" else m, n, i)
            for m, n, i in top
        ]
    else:  # a .git folder
        hook = write([(b"100755", b"post-checkout", git_.create_blob(b"#!/bin/sh\n").raw)])
        top.insert(0, (b"40000", b".git", write([(b"40000", b"hooks", hook)])))
    who = pygit2.Signature("agent", "agent@example.test", 1700000000, 0)
    tree = pygit2.Oid(raw=write(top))
    return git_.create_commit(None, who, who, f"{kind}\n", tree, [head.id])


UNWRITTEN = [
    "answer.txt twice, the failing one first",
    "answer.txt twice, the failing last",
    "the plan twice",
    "the plan by its whole path",
    "out of order",
    "odd modes",
    "a .git folder",
]


@pytest.mark.parametrize("kind", UNWRITTEN)
def test_attack_evidence_a_tree_git_never_writes(world: World, kind: str, tmp_path: Path) -> None:
    """The agent makes by hand a commit whose tree git never writes, reading like the proven
    tree to one reader or another: answer.txt listed twice (the failing copy first or last),
    the plan listed twice or by its whole path (a weak one), entries out of order, odd modes
    (100664, 040000) or a `.git` folder; `receive.fsckObjects` is off
    by default. Evidence binds the tree id, and the runner's tree is always one git wrote: the
    gate finds no evidence for the commit, the server's `pre-receive` refuses it, and with the
    commit checked out the honest run records git's own tree of the files, never the
    commit's."""
    world.repo.write("answer.txt", "42\n")
    world.seal(
        plan(step("unit", check("grep", "-qx", "42", "answer.txt")), step("lint", check("true")))
    )
    assert world.run().verdict == "PASS"
    server = world.serve(tmp_path / "server.git")
    world.repo.git("push", "-q", "origin", f"{runs_ref('default')}:{runs_ref('default')}")
    oid = _unwritten_tree(world, kind)
    tree = str(world.handle().git[oid].peel(pygit2.Tree).id)
    world.set_ref("refs/heads/evil", oid)
    judged = only(world.gate(str(oid)))
    assert codes(judged) in (["evidence.missing"], ["plan.missing"]), codes(judged)
    pushed = subprocess.run(
        ["git", "push", "origin", "evil"],
        cwd=world.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert pushed.returncode != 0 and "pre-receive hook declined" in pushed.stderr
    assert git(server, "rev-parse", "-q", "--verify", "refs/heads/evil", check=False) == ""
    world.repo.git("checkout", "-q", "-f", "evil", check=False)  # git may refuse some
    with contextlib.suppress(GitAuditError):  # the weak plan checked out is refused
        assert world.run().doc["tree"] != tree
    assert only(world.gate(str(oid))).verdict != "PASS"


@pytest.mark.parametrize("recorded_by", ["the same linux runner", "another linux runner"])
def test_attack_evidence_labelled_step_blocked_by_a_broken_output_hides_behind_an_older_pass(
    world: World, tmp_path: Path, recorded_by: str
) -> None:
    """`deploy` must run on a linux runner (`runs_on`) and relies on build's output `bin`, whose
    check is flaky (it counts its executions in a file outside the repository and fails the
    fourth). A linux runner passed everything (bin checked after build and again before
    deploy); a second full run of the same tree checks bin after build (passes) and before
    deploy (fails): deploy is blocked by a broken output and the run FAILs. Unlabelled, such an
    entry is the step's newest outcome (a FAIL); for a step with `runs_on` the gate looked only
    for executed entries, skipped it and took the first run's pass: PASS (before the fix, both
    variants). The newest outcome by a runner with the label now decides for a labelled step
    too: `step.blocked`, FAIL."""
    count = tmp_path / "count"
    flaky = 'n=$(cat "$1" 2>/dev/null || echo 0); echo $((n + 1)) > "$1"; test "$n" -ne 3'
    out = [{"name": "bin", "verify": [check("sh", "-c", flaky, "sh", str(count))]}]
    deploy = step("deploy", deps=["build"], requires_outputs=[{"step": "build", "name": "bin"}])
    deploy["runs_on"] = ["linux"]
    world.seal(plan(step("build", outputs=out), deploy))
    builder = runner(world, "builder", frozenset({"linux"}))
    first = world.run(signer=builder, labels=["linux"])
    assert first.verdict == "PASS", first.doc["reasons"]
    assert world.gate().verdict == "PASS"
    second = runner(world, "builder2", frozenset({"linux"}))
    signer = builder if recorded_by == "the same linux runner" else second
    recorded = world.run(signer=signer, labels=["linux"], fresh=True)
    assert recorded.tree == first.tree and recorded.verdict == "FAIL", recorded.doc
    statuses = {sid: e["status"] for sid, e in recorded.doc["steps"].items()}
    assert statuses == {"build": "passed", "deploy": "blocked"}, statuses
    judged = assert_plan(world.gate(), "step.blocked", "FAIL")
    assert judged.reasons[0].step == "deploy"
    assert "upstream output build/bin no longer holds" in judged.reasons[0].message
    status = world.cli("status", "--json")
    assert status.code == 1 and status.json()["verdict"] == "FAIL", status.out


LEDGER_DELETIONS = (
    "the runs ref deleted",
    "the runs ref deleted, the marks file too",
    "the plans and runs refs deleted, the marks file too",
)


@pytest.mark.parametrize("deleted", LEDGER_DELETIONS)
def test_attack_evidence_verify_misses_a_ledger_deleted_behind_its_floor(
    proven: World, deleted: str
) -> None:
    """The agent deletes an audit ref gitaudit had marked (and the marks file, which anything in
    the work tree can delete). The gate says the ref was deleted (the mark, or the floor kept in
    the gitaudit home, names it), but `git audit verify` only looked for deleted refs among the
    marks file's verified marks: it said PASS and exited 0 (all 3, before the fix; a runs ref
    only ever gets a seen mark from a run and the gate, so it was missed with the marks file in
    place too; the gate said FAIL all along). `verify` now reports every audit ref deleted below
    any mark it holds (verified, seen, or the home's floor), as the gate does."""
    ref = PLANS_REF if "plans" in deleted else RUNS
    proven.repo.git("update-ref", "-d", RUNS)
    if ref == PLANS_REF:
        proven.repo.git("update-ref", "-d", PLANS_REF)
    if "marks file" in deleted:
        (proven.handle().state_dir / "watermarks.json").unlink()
    result = proven.cli("verify")
    assert result.code == 1 and f"{ref} was deleted" in result.out, result.out + result.err


FETCHED_COPY = "refs/gitaudit/remotes/origin/audit/runs/default"


def _failure_fetched(world: World, tmp_path: Path, before_fetch: Callable[[], None]) -> str:
    """`flagged` sealed and a genuine PASS of HEAD's tree on the plan's own ledger; another
    clone of the repository (ci's) then runs the same tree, which fails there now, and that
    ledger is fetched as a remote-tracking copy (after *before_fetch*). Returns the FAIL run."""
    flag = tmp_path / "flag"
    world.seal(flagged(flag))
    assert world.run().verdict == "PASS"
    other = tmp_path / "ci-clone"
    git(tmp_path, "clone", "-q", str(world.path), str(other))
    git(other, "fetch", "-q", "origin", "+refs/audit/*:refs/audit/*")
    git(other, "config", "audit.rootKey", world.repo.git("config", "audit.rootKey").strip())
    flag.write_text("the unit tests fail now\n")
    failed = run_plan(open_repo(other), "default", world.ci, jobs=1)
    assert failed.verdict == "FAIL"
    before_fetch()
    world.repo.git("fetch", "-q", str(other), f"+refs/audit/runs/default:{FETCHED_COPY}")
    return failed.commit


def _link_up(refs: Path) -> None:
    (refs / "a").mkdir()
    (refs / "a" / "up").symlink_to("..")


HIDERS: dict[str, Callable[[Path], None]] = {
    "a dangling link": lambda refs: (refs / "a").symlink_to("/nonexistent"),
    "a link to itself": lambda refs: (refs / "a").symlink_to("a"),
    "a link to a parent folder": _link_up,
    "a dangling link inside the copy's own folder": lambda refs: (
        refs / "gitaudit" / "remotes" / "origin" / "audit" / "aa"
    ).symlink_to("/nonexistent"),
}


@pytest.mark.parametrize("when", ["after the copy was judged", "before the fetch"])
@pytest.mark.parametrize("hider", list(HIDERS))
def test_attack_evidence_fetched_copy_hidden_from_libgit2s_listing(
    world: World, tmp_path: Path, hider: str, when: str
) -> None:
    """The plan's own ledger holds a PASS of the tree; ci's ledger, fetched as a remote-tracking
    copy (`refs/gitaudit/remotes/origin/audit/runs/default`), holds a newer FAIL of the same
    tree: FAIL. The agent puts, under `.git/refs/`, an entry that libgit2 cannot stat (a
    dangling link, a link loop, a link to a parent folder) and that sorts before the copy:
    libgit2's ref listing stops there without an error and leaves out every loose ref after it
    (git lists them all, and a lookup by name still finds them). The gate found the copies
    through that listing: it saw no copy, and said PASS, planted after the gate had judged the
    copy or before the copy was ever fetched (all 8 before the fix). The copies are now also
    found by a walk of the loose refs of gitaudit's own: FAIL."""
    refs = world.path / ".git" / "refs"

    def plant() -> None:
        HIDERS[hider](refs)

    if when == "before the fetch":
        (refs / "gitaudit" / "remotes" / "origin" / "audit").mkdir(parents=True)
        failed = _failure_fetched(world, tmp_path, plant)
    else:
        failed = _failure_fetched(world, tmp_path, lambda: None)
        assert_plan(world.gate(), "step.failed", "FAIL")
        plant()
    assert FETCHED_COPY not in list(world.handle().git.references)  # hidden from libgit2's list
    judged = assert_plan(world.gate(), "step.failed", "FAIL")
    assert judged.run == failed
    assert world.cli("status").code == 1


def _drop_packed_copy(world: World) -> None:
    world.repo.git("pack-refs", "--all")
    packed = world.path / ".git" / "packed-refs"
    lines = packed.read_text().splitlines(keepends=True)
    packed.write_text("".join(line for line in lines if FETCHED_COPY not in line))


DELETERS: dict[str, Callable[[World], object]] = {
    "git update-ref -d": lambda world: world.repo.git("update-ref", "-d", FETCHED_COPY),
    "its loose file removed": lambda world: (world.path / ".git" / FETCHED_COPY).unlink(),
    "its line dropped from packed-refs": _drop_packed_copy,
    "the remote's folder removed": lambda world: shutil.rmtree(
        world.path / ".git" / "refs" / "gitaudit" / "remotes" / "origin"
    ),
}


@pytest.mark.parametrize("deleter", list(DELETERS))
def test_attack_evidence_fetched_copy_deleted_after_it_was_judged(
    world: World, tmp_path: Path, deleter: str
) -> None:
    """The plan's own ledger holds a PASS of the tree; ci's ledger, fetched as a remote-tracking
    copy, holds a newer FAIL of the same tree, and the user's `git audit status` says FAIL (the
    gate marks the copy's tip as seen, in the marks file and in the gitaudit home). The agent
    deletes the copy (`update-ref -d`, its loose file, its line in packed-refs, the remote's
    folder): the gate read the copies that exist and checked the marks of those only, so the
    copy's FAIL vanished and `status` said PASS (all four before the fix). A copy a mark
    names is now read whether or not it exists: deleted, it is reported (`evidence.ledger`,
    with the `git update-ref` that restores it)."""
    _failure_fetched(world, tmp_path, lambda: None)
    assert_plan(world.gate(), "step.failed", "FAIL")
    DELETERS[deleter](world)
    assert world.ref(FETCHED_COPY) is None
    judged = assert_plan(world.gate(), "evidence.ledger", "FAIL")
    assert f"{FETCHED_COPY} was deleted" in judged.reasons[0].message
    assert world.cli("status").code == 1


@pytest.mark.parametrize("forged", [*FORGED_TIPS[:2], FORGED_TIPS[3], "moved back past a FAIL"])
def test_attack_evidence_honest_run_signs_on_a_tip_forged_while_it_runs(
    failing: tuple[World, str, Path], forged: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, but the runs ref is moved while the run's checks run (by a process the agent
    left running, after the run looked at the tip): the run signed on whatever tip it found when
    it appended, taking an unsigned forgery, mallory's commit or a snapshot ci signed into the
    signed chain as its parent, or, the ref moved back to the PASS run, dropping the newer FAIL
    run from under the new run (before the fix). The tip it appends to is now checked as the tip
    was before the checks ran: a one-line error, and nothing is appended."""
    world, passed, _flag = failing
    failed = world.ref(RUNS)
    assert failed is not None
    if forged == "moved back past a FAIL":
        target = passed
    else:
        git = world.handle().git
        by = {"mallory": world.mallory, "snapshot": world.ci}
        signer = next((key for word, key in by.items() if word in forged), None)
        namespace = SNAPSHOT_NAMESPACE if forged.startswith("a snapshot") else NAMESPACE
        tree = write_tree(git, world.run_files(failed))
        parents = [pygit2.Oid(hex=failed)]
        message = "audit: forged\n"
        oid = world.commit_object(git, tree, parents, message, signer, namespace=namespace)
        target = str(oid)
    world.repo.write("more.txt", "more\n")
    world.repo.commit("more")

    def moved_meanwhile(*args: Any, **kw: Any) -> pygit2.Oid:
        world.set_ref(RUNS, target)  # after the run looked at the tip, before it signs
        return append_run(*args, **kw)

    monkeypatch.setattr("gitaudit.run.recorder.append_run", moved_meanwhile)
    why = "while the checks ran" if forged.startswith("moved") else "which no runner signed"
    with pytest.raises(LedgerError, match=f"^{RUNS} .*{why}"):
        world.run()
    assert world.ref(RUNS) == target  # nothing appended on it
