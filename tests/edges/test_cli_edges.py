"""Rough edges of the command line, each pinned: flags shown and parsed as flags, unknown plan
names answered with the known ones, `route` and `next` in the same words, a heartbeat without a
terminal, step titles in `show`."""

from __future__ import annotations

import pygit2
import pytest

from tests.gitrepo import GitRepo, audit
from tests.run.conftest import Sealer, make_plan, run_step


def test_help_shows_json_as_a_flag() -> None:
    from typer.testing import CliRunner

    from gitaudit.cli.app import app

    for command in (["status"], ["log"], ["run"], ["plan", "validate"]):
        shown = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
        line = next(x for x in shown.output.splitlines() if "--json" in x)
        assert "<bool>" not in line, line
        assert "<bool>" not in shown.output


@pytest.mark.parametrize("word", ["true", "false", "True", "1"])
def test_json_true_is_not_read_as_a_revision(repo: GitRepo, word: str) -> None:
    for command in (["status"], ["log"], ["run"]):
        result = audit(repo.path, *command, "--json", word)
        assert result.code == 2, result.out + result.err
        assert "--json is a flag and takes no value" in result.err
        assert "unknown revision" not in result.err


def test_a_revision_named_true_still_works_before_the_options(repo: GitRepo) -> None:
    repo.git("branch", "true")
    result = audit(repo.path, "status", "true", "--json")
    assert result.code in (1, 3) and result.json()["verdict"] in ("FAIL", "UNKNOWN")


@pytest.mark.parametrize(
    "command",
    [
        ["status", "--plan", "nosuch"],
        ["log", "--plan", "nosuch"],
        ["show", "--plan", "nosuch"],
        ["run", "--plan", "nosuch"],
        ["next", "--plan", "nosuch"],
        ["route", "--plan", "nosuch"],
        ["plan", "diff", "--plan", "nosuch"],
        ["plan", "history", "--plan", "nosuch"],
        ["plan", "validate", "--plan", "nosuch"],
        ["plan", "seal", "--plan", "nosuch"],
        ["attest", "--plan", "nosuch"],
    ],
)
def test_an_unknown_plan_name_lists_the_known_ones(
    repo: GitRepo, sealed: Sealer, command: list[str]
) -> None:
    sealed(make_plan(run_step("a", "true")), "app")
    result = audit(repo.path, *command)
    assert result.code == 2, (command, result.out, result.err)
    assert "'nosuch'" in result.err and "app" in result.err, result.err


def test_plan_diff_without_a_plan_acts_on_every_plan(repo: GitRepo, sealed: Sealer) -> None:
    sealed(make_plan(run_step("a", "true")), "app")
    sealed(make_plan(run_step("b", "true")), "docs")
    result = audit(repo.path, "plan", "diff")
    assert result.code == 0, result.err
    assert "app: sealed v1 -> working copy: no change" in result.out
    assert "docs: sealed v1 -> working copy: no change" in result.out
    assert "default" not in result.out + result.err


def _failing(repo: GitRepo, sealed: Sealer) -> None:
    sealed(
        make_plan(
            run_step("a", "false", outputs={"o": "README.md"}, max_attempts=2),
            run_step("b", "true", deps=["a"], requires=[("a", "o")]),
        )
    )
    assert audit(repo.path, "run").code == 1


def test_route_and_next_agree_that_a_failed_step_may_be_retried(
    repo: GitRepo, sealed: Sealer
) -> None:
    _failing(repo, sealed)
    nxt = audit(repo.path, "next")
    assert "retry     a (failed; attempts remain)" in nxt.out
    route = audit(repo.path, "route")
    assert "cannot be reached" not in route.out
    assert "needs a retry of a (failed; attempts remain)" in route.out.replace("need a", "needs a")
    assert "`git audit run a --plan default`" in route.out and "`git audit run a" in nxt.out
    doc = audit(repo.path, "route", "--json").json()["plans"][0]
    assert doc["viable"] is False and doc["viable_after_retry"] is True and doc["retry"] == ["a"]
    # once no attempt remains, both say so, with the same fix
    assert audit(repo.path, "run").code == 1
    nxt, route = audit(repo.path, "next"), audit(repo.path, "route")
    assert "exhausted a (no attempts remain)" in nxt.out
    assert "cannot be reached any more" in route.out and "exhausted: a (no attempts remain" in (
        route.out
    )
    assert "reset-attempts" in nxt.out and "reset-attempts" in route.out


def test_a_long_step_prints_a_heartbeat_without_a_terminal(repo: GitRepo, sealed: Sealer) -> None:
    # a step seven heartbeats long: at least one line is printed however the machine is loaded
    sealed(make_plan(run_step("slow", "sh", "-c", "sleep 1.5", title="Slow one")))
    result = audit(repo.path, "run", env={"GITAUDIT_PROGRESS_SECONDS": "0.2"}, process=True)
    assert result.code == 0, result.err
    beats = [line for line in result.err.splitlines() if line.startswith("  … slow running (")]
    assert beats, result.err
    quiet = audit(repo.path, "run", "--fresh", env={"GITAUDIT_PROGRESS_SECONDS": "0"}, process=True)
    assert "running (" not in quiet.err


def test_show_names_each_step_with_its_title(repo: GitRepo, sealed: Sealer) -> None:
    sealed(make_plan(run_step("build", "true", title="Build the wheel")))
    assert audit(repo.path, "run").code == 0
    shown = audit(repo.path, "show")
    assert "| build (Build the wheel) | passed |" in shown.out


@pytest.mark.parametrize("tip", ["blob", "missing"])
def test_log_names_a_runs_ref_whose_tip_is_not_a_readable_commit(
    repo: GitRepo, sealed: Sealer, tip: str
) -> None:
    """`git audit log` on a ledger whose tip is a blob or an object the repository lacks says
    so, naming the ref and the object (it said "no runs recorded yet" and exited 0)."""
    sealed(make_plan(run_step("a", "true")))
    assert audit(repo.path, "run").code == 0
    assert audit(repo.path, "log").out.count(" default ") == 1
    ref = "refs/audit/runs/default"
    if tip == "blob":
        target = repo.git("hash-object", "-w", "--stdin", input=b"not a run\n").strip()
        expected = f"{ref}: {target[:12]} is not a commit"
    else:
        target = "1234567890" * 4
        expected = f"{ref}: commit {target[:12]} is missing from the repository"
    (repo.path / ".git" / ref).write_text(target + "\n")
    shown = audit(repo.path, "log")
    assert shown.code == 1 and "no runs recorded" not in shown.out
    assert expected in shown.err and "hint:" in shown.err


REFUSED_CONFIG = {
    "extensions.objectFormat": ("extensions.objectformat", "sha256"),
    "extensions.refStorage": ("extensions.refstorage", "reftable"),
    "an unknown extension": ("extensions.nosuch", "yes"),
    "format version 2": ("core.repositoryformatversion", "2"),
    "a broken section header": None,
}


@pytest.mark.parametrize("case", sorted(REFUSED_CONFIG))
def test_a_repository_libgit2_refuses_to_open_is_named_in_one_line(
    repo: GitRepo, case: str
) -> None:
    """`.git/config` naming a format libgit2 does not read (SHA-256 objects, reftable refs, an
    unknown extension, format version 2) or not parsing at all: `status` died with pygit2's
    GitError and a traceback. One line names the repository and libgit2's reason, and the hint
    the file to fix."""
    config = repo.path / ".git" / "config"
    setting = REFUSED_CONFIG[case]
    if setting is None:
        config.write_text(config.read_text() + "[core\n")
    else:
        repo.git("config", "core.repositoryformatversion", "1")
        repo.git("config", *setting)
    result = audit(repo.path, "status")
    assert result.code == 1, result.out + result.err
    assert result.err.startswith(f"error: cannot open the repository at {repo.path}: ")
    assert f"hint: fix or remove that setting in {config} " in result.err
    assert len(result.err.strip().splitlines()) == 2, result.err


def _forged_tip(repo: GitRepo, run_json: tuple[int, str] | None) -> tuple[str, str]:
    """An unsigned commit on top of the default ledger (what anything that writes `.git/` can
    make) whose tree holds run.json as (mode, id) naming no object here, or, with None, whose
    own tree is missing. Returns the commit and the missing object."""
    git = pygit2.Repository(str(repo.path))
    ref = "refs/audit/runs/default"
    tip = git.references[ref].target
    if run_json is None:
        tree = missing = "3" * 40
    else:
        mode, missing = run_json
        raw = f"{mode:o} run.json\0".encode() + bytes.fromhex(missing)
        tree = str(git.odb.write(pygit2.enums.ObjectType.TREE, raw))
    who = "forger <f@example.test> 1700000000 +0000"
    body = f"tree {tree}\nparent {tip}\nauthor {who}\ncommitter {who}\n\nforged\n"
    commit = git.odb.write(pygit2.enums.ObjectType.COMMIT, body.encode())
    git.references.create(ref, commit, force=True)
    return str(commit), missing


@pytest.mark.parametrize("case", ["a gitlink", "a missing blob", "a missing tree"])
def test_a_runs_tip_whose_run_json_cannot_be_read_is_named_in_one_line(
    repo: GitRepo, sealed: Sealer, case: str
) -> None:
    """A forged runs tip whose run.json is a gitlink (mode 160000) or names a blob the
    repository lacks, or whose tree is missing: status, log, show and run died with KeyError
    (or pygit2's GitError "Unable to read tree") and a traceback. status fails the unsigned tip
    as before; log and show name the run or the object in one line; run does not crash."""
    sealed(make_plan(run_step("a", "true")))
    assert audit(repo.path, "run").code == 0
    entry = {"a gitlink": (0o160000, "1" * 40), "a missing blob": (0o100644, "2" * 40)}
    forged, missing = _forged_tip(repo, entry.get(case))
    status = audit(repo.path, "status")
    assert status.code == 1 and f"commit {forged} is not signed" in status.out, status
    expected = {
        "a gitlink": f"error: run {forged[:12]} has no run.json",
        "a missing blob": f"error: run.json ({missing}) in tree ",
        "a missing tree": f"error: run {forged[:12]}: its tree {missing} is missing",
    }[case]
    for command in (["log"], ["show", "latest"]):
        shown = audit(repo.path, *command)
        assert shown.code == 1 and shown.err.startswith(expected), (command, shown.err)
        assert len(shown.err.strip().splitlines()) <= 2, shown.err
    assert audit(repo.path, "run").code in (0, 1)  # an exception would propagate from here
