"""Controls of docs/threat-model.md (*Evidence binds the tree*) end to end: ``git audit run`` and
``git audit status`` as processes (``python -m gitaudit``), real git, real signatures, and the
gate's verdict on what each run recorded.

At the unit level: ``tests/test_fingerprint.py`` and ``tests/run/test_run.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.ctrl_c import ctrl_c_once_the_check_runs
from tests.e2e.conftest import Setup
from tests.gitrepo import CliResult, GitRepo, audit


def _cli(repo: GitRepo, *args: str) -> CliResult:
    return audit(repo.path, *args, process=True)


def _status(repo: GitRepo, *args: str) -> tuple[int, str, list[str]]:
    """`git audit status --json`: exit code, verdict and the reason codes of plan default."""
    judged = _cli(repo, "status", "--json", *args)
    doc = judged.json()
    (plan,) = [p for p in doc["plans"] if p["name"] == "default"]
    return judged.code, doc["verdict"], [r["code"] for r in plan["reasons"]]


def _run_json(repo: GitRepo) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(repo.git("show", "refs/audit/runs/default:run.json"))
    return doc


def _steps(repo: GitRepo) -> dict[str, tuple[str, int]]:
    return {
        sid: (entry["status"], entry["attempts_used"])
        for sid, entry in _run_json(repo)["steps"].items()
    }


def _sealed(repo: GitRepo, steps: list[dict[str, Any]], **extra: Any) -> None:
    """A plan of *steps* committed, then `git audit init` and `plan seal` as processes."""
    plan = {
        "task": "controls",
        "requirements": [{"id": "R", "description": "it works", "priority": "must"}],
        "steps": steps,
        **extra,
    }
    repo.write_plan(plan)
    repo.commit("plan")
    for args in (["init"], ["plan", "seal", "-m", "initial"]):
        done = _cli(repo, *args)
        assert done.code == 0, (args, done.out, done.err)


def _step(sid: str, *argv: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": sid,
        "depends_on": [],
        "covers": ["R"],
        "verify": [{"type": "run", "argv": list(argv)}],
        **extra,
    }


def _output(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "verify": [{"type": "file_exists", "path": path}]}


# ---------------------------------------------------------------- the fingerprint, end to end


def test_status_sees_untracked_files_and_index_flagged_edits(setup: Setup) -> None:
    """After a passing run, the clean work tree is HEAD's tree (PASS); an untracked file, or an
    edit hidden from `git status` by assume-unchanged or skip-worktree, is another tree with no
    evidence: UNKNOWN, never the PASS of HEAD."""
    client = setup.client
    ran = _cli(client, "run")
    assert ran.code == 0, ran.out + ran.err
    assert _status(client) == (0, "PASS", [])
    assert _status(client, "HEAD") == (0, "PASS", [])
    client.write("notes.txt", "untracked, not ignored\n")
    assert client.git("status", "--porcelain").strip() == "?? notes.txt"
    assert _status(client) == (3, "UNKNOWN", ["evidence.missing"])
    (client.path / "notes.txt").unlink()
    assert _status(client) == (0, "PASS", [])
    greeting = client.path / "greeting.txt"
    for flag in ("assume-unchanged", "skip-worktree"):
        client.git("update-index", f"--{flag}", "greeting.txt")
        greeting.write_text("hello, hidden edit\n")
        assert client.git("status", "--porcelain") == ""  # git itself no longer looks
        assert _status(client) == (3, "UNKNOWN", ["evidence.missing"]), flag
        assert _status(client, "HEAD") == (0, "PASS", [])  # the commit itself is proven
        greeting.write_text("hello world\n")
        client.git("update-index", f"--no-{flag}", "greeting.txt")
    assert _status(client) == (0, "PASS", [])


# ---------------------------------------------------------------- runs that prove nothing


def test_a_gone_upstream_output_blocks_the_dependant(repo: GitRepo) -> None:
    """In the live work tree the producer's evidence is carried; its output, deleted since, is
    checked again right before the dependant runs: blocked, and the gate does not PASS."""
    repo.write(".gitignore", "out.txt\n")
    _sealed(
        repo,
        [
            _step("make", "touch", "out.txt", outputs=[_output("out", "out.txt")]),
            _step(
                "use",
                "true",
                depends_on=["make"],
                requires_outputs=[{"step": "make", "name": "out"}],
            ),
        ],
        workspace="live",
    )
    ran = _cli(repo, "run")
    assert ran.code == 0, ran.out + ran.err
    assert _status(repo) == (0, "PASS", [])
    (repo.path / "out.txt").unlink()
    again = _cli(repo, "run", "use", "--plan", "default")
    assert again.code == 1, again.out + again.err
    assert _steps(repo) == {"make": ("carried", 0), "use": ("blocked", 0)}
    reason = _run_json(repo)["steps"]["use"]["reason"]
    assert reason.startswith("upstream output make/out no longer holds"), reason
    code, verdict, codes = _status(repo)
    assert (code, verdict) == (1, "FAIL") and codes[0] == "step.blocked", codes


def test_failed_prerequisites_block_and_attempts_count(repo: GitRepo) -> None:
    _sealed(
        repo,
        [
            _step("a", "false", outputs=[_output("o", "README.md")], max_attempts=2),
            _step("b", "true", depends_on=["a"], requires_outputs=[{"step": "a", "name": "o"}]),
        ],
    )
    first = _cli(repo, "run")
    assert first.code == 1 and "FAIL" in first.out, first.out + first.err
    assert _steps(repo) == {"a": ("failed", 1), "b": ("blocked", 0)}
    assert _run_json(repo)["steps"]["b"]["reason"] == "prerequisite a is not verified"
    assert _cli(repo, "run").code == 1
    assert _steps(repo) == {"a": ("failed", 2), "b": ("blocked", 0)}
    third = _cli(repo, "run")
    assert third.code == 1
    assert _steps(repo)["a"][0] == "exhausted"
    assert "2 failed attempts" in _run_json(repo)["steps"]["a"]["reason"]
    code, verdict, codes = _status(repo)
    assert (code, verdict) == (1, "FAIL") and "step.exhausted" in codes, codes


def test_a_timeout_is_unknown_and_never_passes(repo: GitRepo) -> None:
    slow = _step("slow", "sleep", "30")
    slow["verify"][0]["timeout"] = 0.5
    _sealed(repo, [slow])
    ran = _cli(repo, "run")
    assert ran.code == 3, ran.out + ran.err  # `sleep 30` not cut short would pass
    doc = _run_json(repo)
    assert doc["verdict"] == "UNKNOWN" and doc["steps"]["slow"]["status"] == "unknown"
    assert doc["steps"]["slow"]["checks"][0]["timed_out"] is True
    code, verdict, _codes = _status(repo)
    assert (code, verdict) == (3, "UNKNOWN")


def test_a_targeted_run_without_evidence_blocks(repo: GitRepo) -> None:
    _sealed(
        repo,
        [
            _step("a", "true", outputs=[_output("o", "README.md")]),
            _step("b", "true", depends_on=["a"], requires_outputs=[{"step": "a", "name": "o"}]),
        ],
    )
    ran = _cli(repo, "run", "b", "--plan", "default")
    assert ran.code == 3, ran.out + ran.err
    assert _steps(repo) == {"a": ("not-run", 0), "b": ("blocked", 0)}
    code, verdict, _codes = _status(repo)
    assert (code, verdict) == (3, "UNKNOWN")
    assert _cli(repo, "run").code == 0  # the control: the whole plan proves the tree
    assert _status(repo) == (0, "PASS", [])


def test_ctrl_c_is_recorded_as_interrupted_and_never_passes(repo: GitRepo, tmp_path: Path) -> None:
    started = tmp_path / "started"  # written by the check itself, outside the checkout
    _sealed(repo, [_step("long", "sh", "-c", f"touch '{started}'; exec sleep 60")])
    code, said = ctrl_c_once_the_check_runs(repo.path, started)
    assert code == 3, said
    doc = _run_json(repo)
    assert doc["verdict"] == "INTERRUPTED" and doc["steps"]["long"]["status"] == "interrupted"
    code, verdict, _codes = _status(repo)
    assert (code, verdict) == (3, "UNKNOWN")
