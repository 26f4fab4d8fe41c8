"""Unknown outcomes and reconciliation, incremental evidence, versioned proofs, and expiry."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from gitaudit.checks.environment import Sandbox
from gitaudit.plan.load import build_plan
from gitaudit.run.runner import RunRequest, execute
from gitaudit.verdict import StepStatus
from tests.gitrepo import GitRepo, audit
from tests.run.conftest import Sealer, make_plan, run_step


def run_doc(repo: GitRepo, plan: str = "default") -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(repo.git("show", f"refs/audit/runs/{plan}:run.json"))
    return doc


def canary(*, idempotent: bool) -> dict:  # type: ignore[type-arg]
    """A deployment: its effect (deployed.txt) lives outside the audited tree, in the live work
    tree, so the step runs there (``workspace: live``) and its readback observes it there."""
    step = run_step("canary", "sleep", "30", idempotent=idempotent, workspace="live")
    step["verify"][0]["timeout"] = 0.5
    step["readback"] = [{"type": "file_exists", "path": "deployed.txt"}]
    return step


def test_non_idempotent_timeout_must_be_reconciled_before_retrying(
    repo: GitRepo, sealed: Sealer
) -> None:
    repo.write(".gitignore", "deployed.txt\n")  # the effect lives outside the audited tree
    sealed(make_plan(canary(idempotent=False)))
    assert audit(repo.path, "run").code == 3
    assert run_doc(repo)["steps"]["canary"]["status"] == "unknown"
    again = audit(repo.path, "run")
    doc = run_doc(repo)
    assert again.code == 3
    assert "reconcile before retrying" in doc["steps"]["canary"]["reason"]
    assert doc["steps"]["canary"]["checks"] == []  # nothing was executed
    no_effect = audit(repo.path, "reconcile", "canary", "--readback")
    assert no_effect.code == 1 and "reconciled as failed" in no_effect.out
    # failed is a settled outcome: the step may run again (and times out again)
    assert audit(repo.path, "run").code == 3
    (repo.path / "deployed.txt").write_text("v1\n")
    observed = audit(repo.path, "reconcile", "canary", "--readback", "--note", "canary is live")
    assert "reconciled as passed" in observed.out
    doc = run_doc(repo)
    assert doc["steps"]["canary"]["reconciled"] == {"mode": "readback", "note": "canary is live"}


def test_idempotent_step_simply_runs_again(repo: GitRepo, sealed: Sealer) -> None:
    sealed(make_plan(canary(idempotent=True)))
    assert audit(repo.path, "run").code == 3
    assert audit(repo.path, "run").code == 3
    assert "reconcile" not in run_doc(repo)["steps"]["canary"]["reason"]
    assert run_doc(repo)["steps"]["canary"]["checks"]  # it ran


def test_reconcile_needs_an_unknown_outcome_and_one_mode(repo: GitRepo, sealed: Sealer) -> None:
    sealed(make_plan(run_step("a", "true", idempotent=False)))
    assert audit(repo.path, "run").code == 0
    nothing = audit(repo.path, "reconcile", "a", "--observed", "pass")
    assert nothing.code == 1 and "no unknown outcome to reconcile" in nothing.err
    both = audit(repo.path, "reconcile", "a", "--observed", "pass", "--readback")
    assert both.code == 2


def test_observed_pass_reconciles(repo: GitRepo, sealed: Sealer) -> None:
    sealed(make_plan(canary(idempotent=False)))
    audit(repo.path, "run")
    done = audit(
        repo.path, "reconcile", "canary", "--observed", "pass", "--note", "seen on the dashboard"
    )
    assert done.code == 0, done.out + done.err
    assert audit(repo.path, "status").code == 0


def inputs_plan(n: int) -> dict:  # type: ignore[type-arg]
    steps = [
        run_step(f"s{i}", "test", "-f", f"pkg{i}/src.txt", inputs=[f"pkg{i}/**"]) for i in range(n)
    ]
    steps.append(
        run_step(
            "all",
            "true",
            deps=[f"s{i}" for i in range(n)],
            outputs=None,
            requires=[(f"s{i}", "o") for i in range(n)],
            inputs=["pkg*/**"],
        )
    )
    for i, s in enumerate(steps[:n]):
        s["outputs"] = [
            {"name": "o", "verify": [{"type": "file_exists", "path": f"pkg{i}/src.txt"}]}
        ]
    return make_plan(*steps)


def rerun_after_changing_pkg1(repo: GitRepo, sealed: Sealer, n: int) -> str:
    """Seal :func:`inputs_plan` of *n* packages, run it, change ``pkg1`` (committed) and run
    again; the first run's commit."""
    for i in range(n):
        repo.write(f"pkg{i}/src.txt", f"{i}\n")
    sealed(inputs_plan(n))
    assert audit(repo.path, "run").code == 0
    first = repo.git("rev-parse", "refs/audit/runs/default").strip()
    repo.write("pkg1/src.txt", "changed\n")
    repo.commit("change pkg1")
    result = audit(repo.path, "run")
    assert result.code == 0, result.out + result.err
    return first


def test_unchanged_inputs_are_carried_and_the_gate_accepts_them(
    repo: GitRepo, sealed: Sealer
) -> None:
    first = rerun_after_changing_pkg1(repo, sealed, 3)
    doc = run_doc(repo)
    statuses = {sid: s["status"] for sid, s in doc["steps"].items()}
    assert statuses == {"s0": "carried", "s1": "passed", "s2": "carried", "all": "passed"}
    assert doc["steps"]["s0"]["carried_from"] == first
    status = audit(repo.path, "status")
    assert status.code == 0, status.out
    fresh = audit(repo.path, "run", "--fresh")
    assert fresh.code == 0 and all(s["status"] == "passed" for s in run_doc(repo)["steps"].values())


def test_a_live_step_is_not_carried_for_unchanged_inputs(repo: GitRepo, sealed: Sealer) -> None:
    """A `workspace: live` step observes the live work tree, which its input digest does not
    cover: it runs again when its inputs are unchanged; a checkout step beside it is carried."""
    repo.write("pkg/src.txt", "x\n")
    live = run_step("live", "true", inputs=["pkg/**"], workspace="live")
    sealed(make_plan(live, run_step("kept", "true", inputs=["pkg/**"])))
    assert audit(repo.path, "run").code == 0
    repo.write("notes.txt", "outside the inputs\n")
    repo.commit("notes")
    assert audit(repo.path, "run").code == 0
    steps = run_doc(repo)["steps"]
    assert (steps["live"]["status"], steps["kept"]["status"]) == ("passed", "carried")


def test_a_forged_carry_claim_is_not_accepted(repo: GitRepo, sealed: Sealer) -> None:
    """Evidence carried for inputs that differ from this tree's does not count."""
    for i in range(2):
        repo.write(f"pkg{i}/src.txt", f"{i}\n")
    sealed(inputs_plan(2))
    assert audit(repo.path, "run").code == 0
    repo.write("pkg0/src.txt", "edited but the claim says unchanged\n")
    from gitaudit.gate.judge import judge
    from gitaudit.git.repo import open_repo

    result = judge(open_repo(repo.path))
    assert result.verdict == "UNKNOWN"  # no evidence for the new tree at all


def test_versioned_proofs_keep_unchanged_steps_across_a_reseal(
    repo: GitRepo, sealed: Sealer
) -> None:
    for i in range(2):
        repo.write(f"pkg{i}/src.txt", f"{i}\n")
    sealed(inputs_plan(2))
    assert audit(repo.path, "run").code == 0
    plan = inputs_plan(2)
    # a program check goes after the sealed ones (an output listed last): one that ran before
    # them could write what they read (gitaudit/plan/compare.py)
    plan["steps"][1]["outputs"].append(
        {"name": "stronger", "verify": [{"type": "run", "argv": ["true", "stronger"]}]}
    )
    repo.write_plan(plan)
    repo.commit("strengthen s1")
    assert audit(repo.path, "plan", "seal").code == 0
    assert audit(repo.path, "run").code == 0
    statuses = {sid: s["status"] for sid, s in run_doc(repo)["steps"].items()}
    assert statuses["s0"] == "carried" and statuses["s1"] == "passed"
    assert audit(repo.path, "status").code == 0


def test_expired_evidence_is_unknown(repo: GitRepo, sealed: Sealer) -> None:
    sealed(make_plan(run_step("a", "true", valid_for="1s")))
    assert audit(repo.path, "run", env={"GIT_COMMITTER_DATE": "", "GIT_AUTHOR_DATE": ""}).code == 0
    time.sleep(2.2)
    status = audit(repo.path, "status")
    assert status.code == 3 and "expired at" in status.out


def test_reconcile_is_refused_for_idempotent_steps_and_on_another_tree(
    repo: GitRepo, sealed: Sealer
) -> None:
    sealed(make_plan(canary(idempotent=True)))
    assert audit(repo.path, "run").code == 3
    idem = audit(repo.path, "reconcile", "canary", "--observed", "pass")
    assert idem.code == 1 and "is idempotent: run it again" in idem.err
    repo2_plan = make_plan(canary(idempotent=False))
    repo.write_plan(repo2_plan)
    repo.commit("non-idempotent now")
    assert audit(repo.path, "plan", "seal", "--allow-weaken", "--reason", "test").code == 0
    assert audit(repo.path, "run").code == 3
    repo.write("elsewhere.txt", "another tree\n")
    other = audit(repo.path, "reconcile", "canary", "--observed", "pass")
    assert other.code == 1 and "was recorded for tree" in other.err
    # a run on this tree reports the outcome still unknown: that does not make it this tree's
    assert audit(repo.path, "run").code == 3
    assert run_doc(repo)["steps"]["canary"]["status"] == "unknown"
    again = audit(repo.path, "reconcile", "canary", "--observed", "pass")
    assert again.code == 1 and "was recorded for tree" in again.err


# links -> (symlinks to create, the path the check reads, the step's inputs)
LINKED: dict[str, tuple[dict[str, str], str, list[str]]] = {
    "file": ({"pkg/data.txt": "../real/data.txt"}, "pkg/data.txt", ["pkg/**"]),
    "folder": ({"pkg/lib": "../real"}, "pkg/lib/data.txt", ["pkg/**"]),
    "chain": (
        {"pkg/data.txt": "../mid/data.txt", "mid/data.txt": "../real/data.txt"},
        "pkg/data.txt",
        ["pkg/**"],
    ),
    "subfolder": ({"pkg/a/b/data.txt": "../../../real/data.txt"}, "pkg/a/b/data.txt", ["pkg/**"]),
    "through a linked folder": ({"pkg/lib": "../real"}, "pkg/lib/data.txt", ["pkg/lib/data.txt"]),
}


@pytest.mark.parametrize("variant", sorted(LINKED))
def test_a_change_behind_a_symlink_runs_the_step_again(
    repo: GitRepo, sealed: Sealer, variant: str
) -> None:
    links, read, patterns = LINKED[variant]
    repo.write("real/data.txt", "good\n")
    for path, target in links.items():
        (repo.path / path).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, repo.path / path)
    sealed(make_plan(run_step("s", "grep", "-q", "good", read, inputs=patterns)))
    assert audit(repo.path, "run").code == 0
    repo.write("elsewhere.txt", "not an input\n")
    repo.commit("unrelated")
    assert audit(repo.path, "run").code == 0
    assert run_doc(repo)["steps"]["s"]["status"] == "carried"
    repo.write("real/data.txt", "good, and changed\n")  # the link itself is untouched
    repo.commit("change behind the link")
    assert audit(repo.path, "run").code == 0
    assert run_doc(repo)["steps"]["s"]["status"] == "passed", variant
    assert audit(repo.path, "status").code == 0


def test_the_gate_checks_and_reads_a_carried_source_once_for_all_its_steps(
    repo: GitRepo, sealed: Sealer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four steps carried from one earlier run: the gate verifies that run's signature and reads
    its record once, and still judges each step by its own entry there."""
    from gitaudit.gate import evidence
    from gitaudit.gate.judge import judge
    from gitaudit.git.repo import open_repo

    first = rerun_after_changing_pkg1(repo, sealed, 5)
    carried = [s for s, e in run_doc(repo)["steps"].items() if e["status"] == "carried"]
    assert sorted(carried) == ["s0", "s2", "s3", "s4"]
    seen: list[str] = []
    from gitaudit.crypto.commits import verify_commit as real_verify
    from gitaudit.ledger.runs import read_run as real_read

    def read_run(git: Any, oid: Any, *rest: Any) -> Any:
        seen.append(str(oid))
        return real_read(git, oid, *rest)

    def verify_commit(git: Any, oid: Any, keys: Any) -> Any:
        seen.append(f"sig {oid}")
        return real_verify(git, oid, keys)

    monkeypatch.setattr(evidence, "read_run", read_run)
    monkeypatch.setattr(evidence, "verify_commit", verify_commit)
    result = judge(open_repo(repo.path), repo.head_tree())
    assert result.verdict == "PASS", result
    assert seen.count(first) == 1 and seen.count(f"sig {first}") == 1, seen


def slot_of(repo: GitRepo) -> tuple[Any, Any]:
    """The private checkout's slot the next run takes, and the work tree."""
    from gitaudit.git.repo import open_repo
    from gitaudit.run import checkout

    handle = open_repo(repo.path)
    assert handle.workdir is not None
    with checkout.acquire(handle.gitdir, handle.workdir) as slot:
        return slot, handle.workdir


def test_a_run_that_starts_no_check_keeps_the_checkout_clean(repo: GitRepo, sealed: Sealer) -> None:
    """Every step carried: no check reads the checkout, so no purity check is needed; the
    checkout stays marked clean (the next run updates it with a two-way merge) and the
    declared ignored path's link is gone, as after any run (the next one links it again)."""
    from gitaudit.run import checkout

    for i in range(2):
        repo.write(f"pkg{i}/src.txt", f"{i}\n")
    repo.write(".gitignore", "tools/\n")
    (repo.path / "tools").mkdir()
    (repo.path / "tools" / "lint").write_text("#!/bin/sh\n")
    plan = inputs_plan(2)
    plan["ignored_paths"] = ["tools"]
    plan["steps"][0]["verify"].append({"type": "run", "argv": ["test", "-f", "tools/lint"]})
    sealed(plan)
    assert audit(repo.path, "run").code == 0
    slot, workdir = slot_of(repo)
    (slot.root / "meta.json").write_text("{}")  # forgotten: the next run writes it afresh
    result = audit(repo.path, "run")  # nothing changed: every step carried
    assert result.code == 0, result.out + result.err
    doc = run_doc(repo)
    assert {e["status"] for e in doc["steps"].values()} == {"carried"}
    assert doc["workspace"]["fresh"] is True
    assert checkout._read_meta(slot, workdir).get("clean") is True
    assert not (slot.tree / "tools").exists()
    repo.write("pkg1/src.txt", "changed\n")
    repo.commit("change pkg1")
    result = audit(repo.path, "run")
    assert result.code == 0, result.out + result.err
    assert run_doc(repo)["workspace"]["fresh"] is False


def test_a_checkout_tampered_before_a_run_that_starts_no_check_fails_the_next_check(
    repo: GitRepo, sealed: Sealer
) -> None:
    """A file of the kept checkout edited between runs: a run that carries every step reads
    nothing there and passes; the next run that starts a check names the edit (impure)."""
    for i in range(2):
        repo.write(f"pkg{i}/src.txt", f"{i}\n")
    sealed(inputs_plan(2))
    assert audit(repo.path, "run").code == 0
    slot, _ = slot_of(repo)
    (slot.tree / "pkg0" / "src.txt").write_text("tampered\n")
    assert audit(repo.path, "run").code == 0
    assert {e["status"] for e in run_doc(repo)["steps"].values()} == {"carried"}
    repo.write("pkg1/src.txt", "changed\n")
    repo.commit("change pkg1")
    result = audit(repo.path, "run")
    assert result.code == 1, result.out + result.err
    doc = run_doc(repo)
    assert doc["verdict"] == "FAIL"
    assert "pkg0/src.txt" in json.dumps(doc["purity"]), doc["purity"]


@pytest.mark.parametrize("carry", ["inputs unchanged", "verified earlier for the tree"])
@pytest.mark.parametrize("alternative", ["false", "true"], ids=["both fail", "one passes"])
def test_a_carried_pass_counts_only_beside_a_proven_prerequisite(
    tmp_path: Path, carry: str, alternative: str
) -> None:
    """`ship` needs `fast` or `thorough`; its pass is carried (inputs unchanged, or verified
    earlier for the tree in a targeted run of the alternatives). It waits for them in the run:
    blocked when both fail (it was carried beside two failed alternatives, and the run said
    PASS, before the fix); when one passes, carried if verified earlier for the tree, and
    executed again if its inputs are unchanged (the prerequisite executed in this run may have
    made other outputs than the run the pass would be carried from saw)."""
    out = {"o": "README.md"}
    dependant = run_step("ship", "true", requires=[("fast", "o"), ("thorough", "o")])
    dependant["depends_on"] = [{"any_of": ["fast", "thorough"]}]
    doc = make_plan(
        run_step("fast", "false", outputs=out),
        run_step("thorough", alternative, outputs=out),
        dependant,
    )
    plan, problems = build_plan(doc, name="default", source="default.json")
    assert not problems, problems
    (tmp_path / "README.md").write_text("r\n")
    for folder in ("home", "tmp"):
        (tmp_path / folder).mkdir()
    source = "1" * 40
    outcome = execute(
        RunRequest(
            plan=plan,
            workspace=tmp_path,
            sandbox=Sandbox(home=tmp_path / "home", tmp=tmp_path / "tmp"),
            jobs=2,
            **(
                {"incremental": {"ship": source}}
                if carry == "inputs unchanged"
                else {"carried": {"ship": source}, "targets": frozenset({"fast", "thorough"})}
            ),
        )
    )
    ship = outcome.steps["ship"]
    if alternative == "true" and carry == "inputs unchanged":
        assert (ship.status, ship.carried_from) == (StepStatus.PASSED, None)
        assert ship.checks  # executed again
        return
    if alternative == "true":
        assert (ship.status, ship.carried_from) == (StepStatus.CARRIED, source)
    else:
        assert ship.status == StepStatus.BLOCKED and ship.carried_from is None
        assert ship.reason == "prerequisite any_of(fast, thorough) is not verified"
    assert ship.checks == ()  # its own check never ran


def test_a_dependant_executed_again_finds_its_carried_producers_outputs(
    repo: GitRepo, sealed: Sealer
) -> None:
    """`use` needs `build`'s ignored build/app and `fetch`'s evidence (valid for a second);
    no input changes. Once fetch's evidence expired, a run executed fetch again and so use
    again, while build's pass was carried for its unchanged inputs: build did not run, its
    output was missing from the fresh checkout, and use was blocked by a broken output, a FAIL
    for a tree that passes (before the fix). A producer of a step that will execute again
    executes too: PASS."""
    repo.write(".gitignore", "build/\n")
    for folder in ("b", "f", "u"):
        repo.write(f"{folder}/x.txt", f"{folder}\n")
    build = run_step("build", "sh", "-c", "mkdir -p build && echo ok > build/app", inputs=["b/**"])
    build["outputs"] = [{"name": "app", "verify": [{"type": "file_exists", "path": "build/app"}]}]
    fetch = run_step("fetch", "true", outputs={"o": "f/x.txt"}, inputs=["f/**"], valid_for="1s")
    use = run_step(
        "use",
        "grep",
        "-qx",
        "ok",
        "build/app",
        deps=["build", "fetch"],
        requires=[("build", "app"), ("fetch", "o")],
        inputs=["u/**"],
    )
    sealed(make_plan(build, fetch, use))
    assert audit(repo.path, "run").code == 0
    time.sleep(1.5)  # fetch's evidence expires
    again = audit(repo.path, "run")
    steps = run_doc(repo)["steps"]
    assert again.code == 0, steps
    assert steps["fetch"]["status"] == "passed" and steps["fetch"]["carried_from"] is None
    assert steps["use"]["status"] == "passed" and steps["use"]["carried_from"] is None
    assert steps["build"]["status"] == "passed" and steps["build"]["carried_from"] is None
    # a run of fetch alone leaves use not run (not executed: build is not needed there)
    time.sleep(1.5)
    audit(repo.path, "run", "fetch")
    alone = run_doc(repo)["steps"]
    assert alone["use"]["status"] == "not-run" and alone["build"]["status"] == "carried"


def test_which_carried_steps_execute_is_worked_out_once_a_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A step carried for unchanged inputs executes when a prerequisite does, so whether it does
    was asked of every path through its prerequisites: in a ladder of 60 steps (each after the
    two before it), all carried, that is about 10^12 questions, and a run that changed nothing
    never started. Each step's answer is now worked out once (and again only when a producer
    is taken out of the carried ones): plan.step is looked up a bounded number of times."""
    from gitaudit.plan.model import Plan
    from gitaudit.run.recorder import _producers_run

    steps = [
        run_step(f"s{i}", "true", deps=[f"s{j}" for j in (i - 1, i - 2) if j >= 0])
        for i in range(60)
    ]
    plan, problems = build_plan(make_plan(*steps), name="ladder", source="test")
    assert not problems
    looked_up = [0]
    real = Plan.step

    def counted(self: Plan, sid: str) -> Any:
        looked_up[0] += 1
        assert looked_up[0] <= 10_000, "asked along every path"  # fails fast, never hangs
        return real(self, sid)

    monkeypatch.setattr(Plan, "step", counted)
    incremental = {f"s{i}": "run" for i in range(60)}
    carried, still, wanted = _producers_run(plan, {}, incremental, [], lambda _output: True)
    assert (carried, still, wanted) == ({}, incremental, [])  # nothing executes: all carried
    assert looked_up[0] <= 60, looked_up[0]
