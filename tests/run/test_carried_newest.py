"""A carried step counts only while the newest execution of that step for the tree passed.

`git audit run b` carries `a` from the newest run for the tree in which `a` executed. A run
prepared before a concurrent run recorded `a` failing is re-parented onto it when both append
(the ledger stays linear), and would carry the older pass over the newer failure; so would a
run misled about the ledger. The gate reads the runs between the source and the carrying run
from the signed chain (past a few hundred commits, by git's own search) and refuses the carry
when the newest trusted execution of the step there did not pass."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
import pytest

from gitaudit.cli.context import signer_for
from gitaudit.gate.judge import judge
from gitaudit.git.repo import open_repo
from gitaudit.ledger import lookup
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.records import RunRecord
from gitaudit.ledger.runs import append_run, read_run
from gitaudit.verdict import StepStatus
from tests.gitrepo import GitRepo, audit
from tests.run.conftest import Sealer, make_plan, run_step

REF = "refs/audit/runs/default"


@pytest.fixture
def flag(tmp_path: Path) -> Path:
    return tmp_path / "flag"


@pytest.fixture
def passed_then_failed(repo: GitRepo, sealed: Sealer, flag: Path) -> str:
    """`a` fails while *flag* (outside the repository) exists; `b` always passes. A PASS run,
    then a run in which `a` failed, for the same tree. Returns the PASS run."""
    sealed(make_plan(run_step("a", "test", "!", "-e", str(flag)), run_step("b", "true")))
    assert audit(repo.path, "run").code == 0
    passed = repo.git("rev-parse", REF).strip()
    flag.write_text("a fails now\n")
    assert audit(repo.path, "run").code == 1
    return passed


def _append(repo: GitRepo, doc: dict[str, object], tree: str | None = None) -> str:
    """A runner-signed run commit holding *doc* (for *tree*, else the doc's own)."""
    handle = open_repo(repo.path)
    doc = {**doc, "tree": tree or doc["tree"]}
    message = (
        f"audit(default): PASS\n\nAudit-Tree: {doc['tree']}\n"
        f"Audit-Contract: {doc['contract_digest']}\n"
    )
    files = {"run.json": json.dumps(doc).encode()}
    return str(append_run(handle.git, "default", files, message, signer_for(handle, None)))


def _carrying_a_from(repo: GitRepo, source: str) -> str:
    """What a targeted `git audit run b` prepared before the failure was recorded appends: `a`
    carried from *source*, `b` passed."""
    doc = json.loads(repo.git("show", f"{source}:run.json"))
    doc["steps"]["a"].update(status="carried", carried_from=source, attempt=None, checks=[])
    return _append(repo, doc)


def _pad(repo: GitRepo, count: int) -> None:
    """*count* runs for other trees (none executes anything for this one)."""
    doc = json.loads(repo.git("show", f"{REF}:run.json"))
    for i in range(count):
        _append(repo, doc, tree=f"{i:040x}")


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The runs the lookup reads in whole from now on, in order."""
    read: list[str] = []

    def counted(git: pygit2.Repository, oid: pygit2.Oid | str) -> RunRecord:
        read.append(str(oid))
        return read_run(git, oid)

    monkeypatch.setattr(lookup, "read_run", counted)
    return read


def _judged(repo: GitRepo) -> tuple[str, list[str]]:
    result = judge(open_repo(repo.path), "HEAD")
    return result.verdict, [r.code for p in result.plans for r in p.reasons]


def test_a_pass_older_than_the_newest_failure_is_not_carried(
    repo: GitRepo, passed_then_failed: str
) -> None:
    _carrying_a_from(repo, passed_then_failed)
    assert _judged(repo) == ("FAIL", ["evidence.carried-invalid"])


def test_the_newest_failure_is_found_past_a_few_hundred_runs(
    repo: GitRepo, passed_then_failed: str
) -> None:
    """300 runs of other trees after the failure: git's search finds it."""
    _pad(repo, 300)
    _carrying_a_from(repo, passed_then_failed)
    assert _judged(repo) == ("FAIL", ["evidence.carried-invalid"])


def test_a_pass_after_the_failure_settles_it_again(
    repo: GitRepo, passed_then_failed: str, flag: Path
) -> None:
    """Control: `a` passed again after failing (the newest execution is a pass): the older
    pass may still be carried, and the carrying run counts."""
    flag.unlink()
    assert audit(repo.path, "run").code == 0
    _carrying_a_from(repo, passed_then_failed)
    assert _judged(repo) == ("PASS", [])


def test_an_honest_targeted_run_after_the_failure_does_not_carry(
    repo: GitRepo, passed_then_failed: str, flag: Path
) -> None:
    """Control: `git audit run b` after the failure executes nothing for `a` and carries
    nothing: `a` is not verified (the failure decides), b is."""
    result = audit(repo.path, "run", "b")
    doc = json.loads(repo.git("show", f"{REF}:run.json"))
    assert doc["steps"]["a"]["status"] != "carried" and doc["steps"]["b"]["status"] == "passed"
    assert result.code != 0
    assert _judged(repo)[0] == "FAIL"


def test_a_long_line_of_runs_carrying_a_step_is_not_read_run_by_run(
    repo: GitRepo, sealed: Sealer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twelve targeted runs of `a` on one tree each carry `b` from the first full run: finding
    b's newest execution reads the newest of them and the full run, not every run between (their
    folders for b are the same objects), so a targeted run does not cost more with every run
    before it on the tree."""
    sealed(make_plan(run_step("a", "true"), run_step("b", "true")))
    assert audit(repo.path, "run").code == 0
    full = repo.git("rev-parse", REF).strip()
    for _ in range(12):
        assert audit(repo.path, "run", "a").code == 0
    handle = open_repo(repo.path)
    doc = json.loads(repo.git("show", f"{REF}:run.json"))
    assert doc["steps"]["b"]["carried_from"] == full
    read = _count_reads(monkeypatch)
    newest = lookup.newest_executions(
        handle.git,
        handle.gitdir,
        pygit2.Oid(hex=repo.git("rev-parse", REF).strip()),
        doc["tree"],
        doc["contract_digest"],
        read_state(handle).trust.with_role("runner"),
        {"a": full, "b": full},
    )
    assert newest["b"] == (StepStatus.PASSED, full)
    assert newest["a"] == (StepStatus.PASSED, repo.git("rev-parse", REF).strip())
    assert len(read) == 2 and read[-1] == full, read


def test_a_step_is_sought_down_to_its_source_only(repo: GitRepo, passed_then_failed: str) -> None:
    """A run for another tree, named as the source of `a` (as a carry for unchanged inputs
    names one), ends the search for `a` there: the failure of `a` below it, on this tree, is
    neither read nor counted, and the walk does not go on to the root."""
    failed = repo.git("rev-parse", REF).strip()
    doc = json.loads(repo.git("show", f"{failed}:run.json"))
    elsewhere = _append(repo, doc, tree="0" * 40)
    handle = open_repo(repo.path)
    args = (doc["tree"], doc["contract_digest"], read_state(handle).trust.with_role("runner"))
    tip = pygit2.Oid(hex=elsewhere)
    assert lookup.newest_executions(handle.git, handle.gitdir, tip, *args, {"a": elsewhere}) == {}
    assert lookup.newest_executions(
        handle.git, handle.gitdir, tip, *args, {"a": passed_then_failed}
    ) == {"a": (StepStatus.FAILED, failed)}


@pytest.fixture
def carried_by_inputs(repo: GitRepo, sealed: Sealer) -> tuple[str, str]:
    """`a` declares inputs (`src`); a PASS run, then a commit outside them (so `a` has the same
    input digest on the new tree, HEAD's). Returns the PASS run and HEAD's tree."""
    repo.write("src/a.txt", "a\n")
    sealed(make_plan(run_step("a", "true", inputs=["src"]), run_step("b", "true")))
    assert audit(repo.path, "run").code == 0
    passed = repo.git("rev-parse", REF).strip()
    repo.write("notes.txt", "outside a's inputs\n")
    repo.commit("notes")
    return passed, repo.git("rev-parse", "HEAD^{tree}").strip()


@pytest.mark.parametrize("runs_between", [3, 300])
def test_a_pass_carried_for_unchanged_inputs_is_refused_past_a_newer_failure(
    repo: GitRepo, carried_by_inputs: tuple[str, str], runs_between: int
) -> None:
    """A run of HEAD's tree in which `a` failed, then runs of other trees (past a few hundred,
    git's search finds the failure and places the source of another tree after it), then a
    run of HEAD's tree carrying `a` from the older pass for its unchanged inputs: refused."""
    passed, tree = carried_by_inputs
    doc = json.loads(repo.git("show", f"{passed}:run.json"))
    failing = json.loads(json.dumps(doc))
    failing["steps"]["a"]["status"] = "failed"
    _append(repo, failing, tree=tree)
    _pad(repo, runs_between)
    doc["steps"]["a"].update(status="carried", carried_from=passed, attempt=None, checks=[])
    _append(repo, doc, tree=tree)
    assert _judged(repo) == ("FAIL", ["evidence.carried-invalid"])


@pytest.mark.parametrize("runs_between", [3, 300])
def test_a_pass_carried_for_unchanged_inputs_from_deep_in_the_ledger_counts(
    repo: GitRepo, carried_by_inputs: tuple[str, str], runs_between: int
) -> None:
    """Control: the source of a pass carried for unchanged inputs (a run of another tree) lies
    past a few hundred runs of other trees: git's search does not list it, and it is placed
    where the chain has it, so the carry counts (it is not reported unknown)."""
    passed, tree = carried_by_inputs
    _pad(repo, runs_between)
    doc = json.loads(repo.git("show", f"{passed}:run.json"))
    doc["steps"]["a"].update(status="carried", carried_from=passed, attempt=None, checks=[])
    _append(repo, doc, tree=tree)
    assert _judged(repo) == ("PASS", [])


@pytest.mark.parametrize("runs_between", [3, 300])
def test_a_pass_carried_for_unchanged_inputs_is_refused_past_a_failure_on_another_tree(
    repo: GitRepo, carried_by_inputs: tuple[str, str], runs_between: int
) -> None:
    """A run of a third tree in which `a`, with the same input digest, failed; then runs of
    other trees; then a run of HEAD's tree carrying `a` from the older pass: the newest
    execution with those inputs failed, so the carry is refused (it was taken before: the gate
    looked for newer executions on HEAD's tree only)."""
    passed, tree = carried_by_inputs
    doc = json.loads(repo.git("show", f"{passed}:run.json"))
    failing = json.loads(json.dumps(doc))
    failing["steps"]["a"]["status"] = "failed"
    _append(repo, failing, tree="f" * 40)
    _pad(repo, runs_between)
    doc["steps"]["a"].update(status="carried", carried_from=passed, attempt=None, checks=[])
    _append(repo, doc, tree=tree)
    assert _judged(repo) == ("FAIL", ["evidence.carried-invalid"])


@pytest.mark.parametrize("between", ["a pass with other inputs", "a failure with other inputs"])
def test_a_pass_carried_for_unchanged_inputs_past_other_executions_counts(
    repo: GitRepo, carried_by_inputs: tuple[str, str], between: str
) -> None:
    """Control: executions of `a` with other input digests between the source and the carrying
    run decide nothing for these inputs; a failure with the same digest below a newer pass with
    it is settled by that pass."""
    passed, tree = carried_by_inputs
    doc = json.loads(repo.git("show", f"{passed}:run.json"))
    other = json.loads(json.dumps(doc))
    other["steps"]["a"]["input_digest"] = "sha256:" + "0" * 64
    if between == "a failure with other inputs":
        other["steps"]["a"]["status"] = "failed"
    _append(repo, other, tree="e" * 40)
    failing = json.loads(json.dumps(doc))
    failing["steps"]["a"]["status"] = "failed"
    _append(repo, failing, tree="f" * 40)
    _append(repo, doc, tree="d" * 40)  # a newer pass with the same inputs
    doc["steps"]["a"].update(status="carried", carried_from=passed, attempt=None, checks=[])
    _append(repo, doc, tree=tree)
    assert _judged(repo) == ("PASS", [])


def test_a_line_of_runs_carrying_for_unchanged_inputs_is_not_read_run_by_run(
    repo: GitRepo, carried_by_inputs: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six commits outside `a`'s inputs, each run: every run carries `a` from the first pass.
    The newest execution of `a` with its inputs is found by reading the newest carrying run
    (whose folder for `a` the five below share) and not one run more: the source itself ends
    the walk unread."""
    passed, _tree = carried_by_inputs
    for i in range(6):
        repo.write("notes.txt", f"note {i}\n")
        repo.commit(f"note {i}")
        assert audit(repo.path, "run").code == 0
    handle = open_repo(repo.path)
    tip = repo.git("rev-parse", REF).strip()
    doc = json.loads(repo.git("show", f"{tip}:run.json"))
    assert doc["steps"]["a"]["carried_from"] == passed
    read = _count_reads(monkeypatch)
    sought = {"a": (doc["steps"]["a"]["input_digest"], passed)}
    runners = read_state(handle).trust.with_role("runner")
    assert lookup.newest_with_inputs(handle.git, pygit2.Oid(hex=tip), sought, runners) == {}
    assert read == [tip], read
    assert _judged(repo) == ("PASS", [])
