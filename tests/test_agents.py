"""Agents side by side (docs/agents.md): the registry on refs/audit/agents, claims, the policy's
mode, the gate's view of runs that touch another agent's claimed paths, and `next`."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gitaudit.plan.globs import GlobError, canonical, matches, overlap, witness
from tests.gitrepo import GitRepo, audit

PLAN = {
    "task": "two steps side by side",
    "requirements": [{"id": "R", "description": "it works"}],
    "steps": [
        {"id": "unit", "covers": ["R"], "verify": [{"type": "run", "argv": ["true"]}]},
        {"id": "lint", "covers": ["R"], "verify": [{"type": "run", "argv": ["true"]}]},
    ],
}


@pytest.fixture
def team(repo: GitRepo) -> GitRepo:
    repo.write("src/a.py", "a = 1\n")
    repo.write("src/b.py", "b = 1\n")
    repo.write_plan(PLAN)
    repo.commit("two steps")
    for args in (["keys", "generate"], ["trust", "init"], ["plan", "seal"]):
        assert audit(repo.path, *args).code == 0
    for name in ("ann", "bob"):
        assert audit(repo.path, "agents", "register", name).code == 0
    return repo


def ok(repo: GitRepo, *args: str, env: dict[str, str] | None = None) -> str:
    result = audit(repo.path, *args, env=env)
    assert result.code == 0, result.out + result.err
    return result.out + result.err


def fails(repo: GitRepo, *args: str, code: int = 1) -> str:
    result = audit(repo.path, *args)
    assert result.code == code, result.out + result.err
    assert result.err.count("error:") == 1 and "Traceback" not in result.err
    return result.err


def test_register_claim_list_release_readable_with_plain_git(team: GitRepo) -> None:
    out = ok(team, "agents", "claim", "unit", "--paths", "src/../src/a.py", "--agent", "ann")
    assert "claim #3 of agent ann on step unit (default) and src/a.py" in out
    listed = audit(team.path, "agents", "list", "--json").json()
    assert listed["seq"] == 3 and listed["mode"] == "parallel-warn"
    ann = next(a for a in listed["agents"] if a["name"] == "ann")
    assert ann["claim"]["paths"] == ["src/a.py"] and ann["claim"]["live"] is True
    state = json.loads(team.git("show", "refs/audit/agents:agents.json"))
    assert state["agents"]["ann"]["claim"]["step"] == "unit"
    record = json.loads(team.git("show", "refs/audit/agents:record.json"))
    assert (record["seq"], record["action"]) == (3, "claim")
    assert record["prev"] == team.git("rev-parse", "refs/audit/agents~1").strip()
    assert "released claim #3" in ok(team, "agents", "release", "--agent", "ann")
    assert "nothing to do" in ok(team, "agents", "release", "--agent", "ann")


def test_one_line_errors_for_bad_input(team: GitRepo) -> None:
    assert "no agent named 'zed' is registered" in fails(team, "agents", "heartbeat", "-a", "zed")
    assert "is not a valid agent name" in fails(team, "agents", "register", "../x", code=2)
    assert "escapes the workspace" in fails(
        team, "agents", "claim", "unit", "--paths", "src/../../x", "-a", "ann", code=2
    )
    assert "absolute" in fails(
        team, "agents", "claim", "unit", "--paths", "/etc", "-a", "ann", code=2
    )
    assert "no plan has a step 'nope'" in fails(
        team, "agents", "claim", "nope", "-a", "ann", code=2
    )
    ok(team, "agents", "claim", "unit", "-a", "ann")
    err = fails(team, "agents", "claim", "unit", "-a", "bob")
    assert "claim #3 of agent ann on step unit (default) is live" in err
    assert "a step has one holder" in err


@pytest.mark.parametrize(
    "spelling", ["./src/a.py", "src//a.py", "src/./a.py", "src/../src/a.py", "src", "src/*.py"]
)
def test_strict_mode_refuses_every_spelling_of_a_claimed_path(team: GitRepo, spelling: str) -> None:
    ok(team, "trust", "policy", "--agents", "parallel-strict")
    ok(team, "agents", "claim", "unit", "--paths", "src/a.py", "-a", "ann")
    err = fails(team, "agents", "claim", "lint", "--paths", spelling, "-a", "bob")
    assert "their paths overlap" in err and "parallel-strict" in err
    ok(team, "agents", "claim", "lint", "--paths", "src/b.py", "-a", "bob")


def test_paths_are_relative_to_the_current_folder(team: GitRepo) -> None:
    result = audit(team.path / "src", "agents", "claim", "unit", "--paths", "a.py", "-a", "ann")
    assert result.code == 0 and "and src/a.py" in result.out


def test_warn_mode_allows_overlap_with_a_warning(team: GitRepo) -> None:
    ok(team, "agents", "claim", "unit", "--paths", "src", "-a", "ann")
    out = ok(team, "agents", "claim", "lint", "--paths", "./src/a.py", "-a", "bob")
    assert "warning: claim #3 of agent ann on step unit (default) and src overlaps" in out


def test_serial_mode_one_live_claim_at_a_time(team: GitRepo) -> None:
    ok(team, "trust", "policy", "--agents", "serial")
    ok(team, "agents", "claim", "unit", "-a", "ann")
    assert "serial" in fails(team, "agents", "claim", "lint", "-a", "bob")
    ok(team, "agents", "release", "-a", "ann")
    ok(team, "agents", "claim", "lint", "-a", "bob")


def test_relaxing_the_mode_is_a_weakening(team: GitRepo) -> None:
    ok(team, "trust", "policy", "--agents", "serial")
    err = fails(team, "trust", "policy", "--agents", "parallel-warn")
    assert "agents mode serial -> parallel-warn" in err


def test_a_stale_claim_is_taken_over_and_its_agent_told(team: GitRepo) -> None:
    ok(team, "agents", "register", "ann", "--lease", "1s")
    ok(team, "agents", "claim", "unit", "--paths", "src/a.py", "-a", "ann")
    time.sleep(2.1)  # the lease runs out (no timing is asserted)
    nxt = audit(team.path, "next", "--json").json()["plans"][0]
    assert nxt["claims"] == {"unit": {"agent": "ann", "live": False}}
    assert "stale claim of ann" in ok(team, "next")
    out = ok(team, "agents", "claim", "unit", "-a", "bob")
    assert "took over the stale claim #4 of agent ann" in out
    err = fails(team, "agents", "heartbeat", "-a", "ann")
    assert "stale claim #4 on step unit was taken over by agent bob" in err
    assert "released" in ok(team, "agents", "release", "-a", "ann")
    ok(team, "agents", "heartbeat", "-a", "ann")


def _touch_claimed_path_as_bob(team: GitRepo) -> None:
    ok(team, "agents", "claim", "unit", "--paths", "src/a.py", "-a", "ann")
    ok(team, "agents", "claim", "lint", "--paths", "src/b.py", "-a", "bob")
    team.write("src/a.py", "a = 2  # bob's edit\n")
    ok(team, "run", env={"GITAUDIT_AGENT": "bob"})


def test_strict_gate_does_not_count_a_run_touching_another_live_claim(team: GitRepo) -> None:
    ok(team, "trust", "policy", "--agents", "parallel-strict")
    _touch_claimed_path_as_bob(team)
    doc = json.loads(team.git("show", "refs/audit/runs/default:run.json"))
    assert doc["agent"]["name"] == "bob" and doc["agent"]["claim"]["step"] == "lint"
    status = audit(team.path, "status", "--json")
    assert status.code == 1
    (reason,) = status.json()["plans"][0]["reasons"]
    assert reason["code"] == "agents.conflict"
    assert "claim #4 of agent bob on step lint (default) and src/b.py" in reason["message"]
    assert "changed src/a.py, claimed by the live claim #3 of agent ann" in reason["message"]
    # once ann releases, the same evidence counts
    ok(team, "agents", "release", "-a", "ann")
    assert audit(team.path, "status").code == 0


def test_warn_gate_counts_with_a_warning_in_status_and_report(team: GitRepo) -> None:
    _touch_claimed_path_as_bob(team)
    status = audit(team.path, "status")
    assert status.code == 0
    assert "note: warning: run" in status.out and "claim #3 of agent ann" in status.out
    report = audit(team.path, "report")
    assert "claimed by the live claim #3 of agent ann" in report.out


def test_a_run_without_an_agent_is_judged_by_its_uncommitted_changes(team: GitRepo) -> None:
    ok(team, "trust", "policy", "--agents", "parallel-strict")
    ok(team, "agents", "claim", "unit", "--paths", "src/a.py", "-a", "ann")
    team.write("src/b.py", "b = 2\n")
    ok(team, "run")
    assert audit(team.path, "status").code == 0  # b.py is nobody's
    team.write("src/a.py", "a = 3\n")
    ok(team, "run")
    status = audit(team.path, "status", "--json").json()
    assert "(no agent) changed src/a.py" in status["plans"][0]["reasons"][0]["message"]


def test_a_committed_change_is_judged_against_the_other_claim_s_base(team: GitRepo) -> None:
    ok(team, "trust", "policy", "--agents", "parallel-strict")
    ok(team, "agents", "claim", "unit", "--paths", "src/a.py", "-a", "ann")
    team.write("src/b.py", "b = 2\n")
    team.commit("b.py is nobody's")
    ok(team, "run")
    assert audit(team.path, "status").code == 0  # control: a.py is as ann claimed it
    team.write("src/a.py", "a = 3\n")
    team.commit("a.py is ann's")
    ok(team, "run")
    status = audit(team.path, "status", "--json").json()
    assert "(no agent) changed src/a.py" in status["plans"][0]["reasons"][0]["message"]
    ok(team, "agents", "release", "-a", "ann")
    assert audit(team.path, "status").code == 0


def test_unknown_agent_in_the_environment_refuses_the_run(team: GitRepo) -> None:
    result = audit(team.path, "run", env={"GITAUDIT_AGENT": "zed"})
    assert result.code == 1 and "no agent named 'zed'" in result.err


# ------------------------------------------------------------------------------- globs


def test_canonical_spellings() -> None:
    assert canonical("src/../src/a.py") == canonical("./src/a.py") == "src/a.py"
    assert canonical("a.py", "src") == "src/a.py"
    assert canonical(".") == canonical("src/..") == "*"
    assert canonical("cafe\u0301.txt") == "caf\u00e9.txt"  # NFD spelled NFC
    for bad in ("", "/etc/passwd", "..", "../x", "src/../../x", ".git/config", "a/.GIT/x"):
        with pytest.raises(GlobError):
            canonical(bad)


def test_case_folds_where_the_file_system_ignores_case() -> None:
    assert not overlap("SRC/a.py", "src/*")
    assert overlap("SRC/a.py", "src/*", ignore_case=True)
    assert matches("src", "SRC/x", ignore_case=True)


ALPHABET = "ab/."
PIECES = st.sampled_from(["a", "b", "/", ".", "*", "?", "[ab]", "[!a]", "**/", "ab", ".."])


def is_path(word: str) -> bool:
    return bool(word) and all(p not in ("", ".", "..") for p in word.split("/"))


PATHS = [w for n in range(1, 7) for w in map("".join, itertools.product(ALPHABET, repeat=n))]
PATHS = [w for w in PATHS if is_path(w)]


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, min_size=1, max_size=5), st.lists(PIECES, min_size=1, max_size=5))
def test_overlap_is_exact(left: list[str], right: list[str]) -> None:
    """Sound: a witness is a path both globs match. Complete: when some path of up to six
    characters matches both, a witness is found."""
    try:
        a, b = canonical("".join(left)), canonical("".join(right))
    except GlobError:
        assume(False)
    found = witness(a, b)
    if found is not None:
        assert is_path(found) and matches(a, found) and matches(b, found), (a, b, found)
    if any(matches(a, w) and matches(b, w) for w in PATHS):
        assert found is not None, (a, b)


def test_snapshot_and_agents_refs_do_not_touch_the_users_index(
    team: GitRepo, tmp_path: Path
) -> None:
    before = (team.path / ".git" / "index").read_bytes()
    ok(team, "agents", "claim", "unit", "-a", "ann")
    ok(team, "snapshot", "here")
    assert (team.path / ".git" / "index").read_bytes() == before


def test_verify_checks_the_registry_and_passes_while_it_is_there(team: GitRepo) -> None:
    # registering marked refs/audit/agents verified; verify read only the plans and runs refs,
    # so it took the mark of a ref it never read for one whose ref was gone
    assert (
        json.loads((team.path / ".git" / "gitaudit" / "watermarks.json").read_text())["verified"][
            "refs/audit/agents"
        ]
        == team.git("rev-parse", "refs/audit/agents").strip()
    )
    report = audit(team.path, "verify", "--json")
    assert report.code == 0, report.out + report.err
    assert report.json()["problems"] == []
    assert report.json()["verified"]["refs/audit/agents"] == 0  # verified (and marked) already
    ok(team, "agents", "claim", "unit", "--agent", "ann")
    out = ok(team, "verify")
    assert "refs/audit/agents: 0 new" in out and "deleted" not in out


def test_verify_reports_the_registry_deleted_rewound_or_forged_after_its_mark(
    team: GitRepo,
) -> None:
    tip = team.git("rev-parse", "refs/audit/agents").strip()
    ok(team, "verify")
    team.git("update-ref", "-d", "refs/audit/agents")
    deleted = audit(team.path, "verify", "--json")
    assert deleted.code == 1
    problem = f"refs/audit/agents was deleted; it was verified at {tip[:12]}"
    assert deleted.json()["problems"] == [problem]
    team.git("update-ref", "refs/audit/agents", f"{tip}~1")
    rewound = audit(team.path, "verify")
    assert rewound.code == 1 and "refs/audit/agents moved backwards" in rewound.out
    forged = team.git(
        "commit-tree", f"{tip}^{{tree}}", "-p", tip, "-m", "unsigned", input=b""
    ).strip()
    team.git("update-ref", "refs/audit/agents", forged)
    found = audit(team.path, "verify")
    assert found.code == 1 and f"agents commit {forged[:12]}: not signed" in found.out, found.out
    team.git("update-ref", "refs/audit/agents", tip)
    assert audit(team.path, "verify").code == 0  # restored: nothing was marked meanwhile
