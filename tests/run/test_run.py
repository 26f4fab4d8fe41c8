"""`git audit run` end to end: real processes, real git, signed evidence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitaudit.ledger.runs import read_run
from tests.ctrl_c import ctrl_c_once_the_check_runs
from tests.gitrepo import GitRepo, audit
from tests.run.conftest import Sealer, make_plan, run_step


def tip(repo: GitRepo, plan: str = "default") -> str:
    return repo.git("rev-parse", f"refs/audit/runs/{plan}").strip()


def run_json(repo: GitRepo, rev: str | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(repo.git("show", f"{rev or tip(repo)}:run.json"))
    return doc


def test_passing_run_records_a_signed_commit(repo: GitRepo, sealed: Sealer, tmp_path: Path) -> None:
    sealed(
        make_plan(
            run_step("build", "sh", "-c", "echo built", outputs={"artifact": "README.md"}),
            run_step("use", "cat", "README.md", deps=["build"], requires=[("build", "artifact")]),
        )
    )
    result = audit(repo.path, "run")
    assert result.code == 0, result.err
    assert "default: PASS — 2/2 steps verified" in result.out
    doc = run_json(repo)
    assert doc["verdict"] == "PASS" and doc["tree"] == repo.head_tree()
    [upstream] = doc["steps"]["use"]["upstream"]
    assert (upstream["step"], upstream["output"], upstream["passed"]) == ("build", "artifact", True)
    [rechecked] = upstream["checks"]  # the producer's output check, run again before `use`
    assert rechecked["type"] == "file_exists" and rechecked["outcome"] == "passed"
    message = repo.git("log", "-1", "--format=%B", "refs/audit/runs/default")
    assert message.startswith(f"audit(default): PASS {repo.head_tree()[:12]} — 2/2 steps")
    for trailer in (
        "Audit-Plan: default",
        f"Audit-Tree: {repo.head_tree()}",
        "Audit-Contract: sha256:",
        "Audit-Verdict: PASS",
    ):
        assert trailer in message
    files = repo.git("ls-tree", "-r", "--name-only", "refs/audit/runs/default").split()
    assert {
        "run.json",
        "summary.md",
        "steps/build/checks/0/stdout",
        "steps/build/outputs/artifact/0/result.json",
        "steps/use/upstream/build/artifact/0/result.json",
    } <= set(files)
    assert repo.git("show", "refs/audit/runs/default:steps/build/checks/0/stdout") == "built\n"
    assert "| build | passed |" in repo.git("show", "refs/audit/runs/default:summary.md")
    signers = tmp_path / "allowed"
    assert audit(repo.path, "trust", "export", str(signers)).code == 0
    verify = subprocess.run(
        [
            "git",
            "-c",
            "gpg.format=ssh",
            "-c",
            f"gpg.ssh.allowedSignersFile={signers}",
            "verify-commit",
            "refs/audit/runs/default",
        ],
        cwd=repo.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert verify.returncode == 0, verify.stderr


def test_a_large_runs_pack_survives_gits_own_maintenance(repo: GitRepo, sealed: Sealer) -> None:
    """A run of 40 steps writes its evidence as one pack (over 100 objects); git's own checks
    and maintenance accept it: fsck, a full repack and prune, after which everything stored
    still verifies and the gate still says PASS."""
    sealed(make_plan(*(run_step(f"s{n:02d}", "echo", f"step {n}") for n in range(40))))
    assert audit(repo.path, "run").code == 0
    packs = list((repo.path / ".git" / "objects" / "pack").glob("pack-*.idx"))
    assert len(packs) == 1, packs
    assert repo.git("show", f"{tip(repo)}:steps/s39/checks/0/stdout") == "step 39\n"
    repo.git("fsck", "--strict", "--no-dangling")
    repo.git("gc", "--prune=now", "--quiet")
    assert not list((repo.path / ".git" / "objects" / "pack").glob("tmp_*"))
    verified = audit(repo.path, "verify")
    assert verified.code == 0, verified.out + verified.err
    assert audit(repo.path, "status").code == 0
    assert audit(repo.path, "run").code == 0  # and the next run records on top of it


def test_run_refuses_when_the_plan_differs_from_its_seal(repo: GitRepo, sealed: Sealer) -> None:
    sealed(make_plan(run_step("a", "true")))
    plan = make_plan(run_step("a", "touch", "ran-anyway"))
    repo.write_plan(plan)
    result = audit(repo.path, "run")
    assert result.code == 1 and "differs from its seal v1" in result.err and "reseal" in result.err
    assert not (repo.path / "ran-anyway").exists()
    assert repo.git("for-each-ref", "refs/audit/runs/") == ""


def test_failure_blocks_dependants_and_counts_attempts(repo: GitRepo, sealed: Sealer) -> None:
    sealed(
        make_plan(
            run_step("a", "false", outputs={"o": "README.md"}, max_attempts=2),
            run_step("b", "true", deps=["a"], requires=[("a", "o")]),
        )
    )
    first = audit(repo.path, "run")
    assert first.code == 1 and "FAIL" in first.out
    doc = run_json(repo)
    assert doc["steps"]["a"]["status"] == "failed" and doc["steps"]["a"]["attempts_used"] == 1
    assert doc["steps"]["b"]["status"] == "blocked" and doc["steps"]["b"]["attempts_used"] == 0
    assert "exit code 1, expected 0" in doc["steps"]["a"]["reason"]
    assert audit(repo.path, "run").code == 1
    third = audit(repo.path, "run")
    doc = run_json(repo)
    assert third.code == 1 and doc["steps"]["a"]["status"] == "exhausted"
    assert "2 failed attempts" in doc["steps"]["a"]["reason"]
    forced = audit(repo.path, "run", "--force")
    doc = run_json(repo)
    assert forced.code == 1 and doc["forced"] is True and doc["steps"]["a"]["status"] == "failed"


def test_a_failed_step_names_its_first_three_failing_checks(repo: GitRepo, sealed: Sealer) -> None:
    """The reason is one line for the summary; every failing check is in `checks` anyway."""
    step = run_step("a", "true")
    step["verify"] = [{"type": "run", "argv": ["sh", "-c", f"exit {n}"]} for n in (1, 2, 3, 4)]
    sealed(make_plan(step))
    assert audit(repo.path, "run").code == 1
    entry = run_json(repo)["steps"]["a"]
    assert [c["exit_code"] for c in entry["checks"]] == [1, 2, 3, 4]
    reason = entry["reason"]
    assert reason.count("; ") == 2, reason
    assert all(f"exit code {n}, expected 0" in reason for n in (1, 2, 3)), reason
    assert "exit code 4" not in reason


def test_a_steps_duration_is_recorded_in_milliseconds(repo: GitRepo, sealed: Sealer) -> None:
    sealed(make_plan(run_step("nap", "sleep", "0.25")))
    assert audit(repo.path, "run").code == 0
    duration = run_json(repo)["steps"]["nap"]["duration"]
    assert isinstance(duration, float) and duration == round(duration, 3)
    assert duration >= 0.25  # it slept that long (not rounded down to whole seconds)


def test_each_step_sees_the_variables_its_plan_and_it_declare(
    repo: GitRepo, sealed: Sealer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Steps with different ``pass_env`` in one run: each check sees the plan's variables and
    its own step's, never another step's (the sandboxes are shared per ``pass_env``)."""
    for name in ("SHARED", "ONLY_A", "ONLY_B"):
        monkeypatch.setenv(name, name.lower())
    show = ("sh", "-c", 'echo "${SHARED-}:${ONLY_A-}:${ONLY_B-}"')
    doc = make_plan(
        run_step("a", *show, pass_env=["ONLY_A"]),
        run_step("b", *show, pass_env=["ONLY_B"]),
        run_step("c", *show),
        run_step("a2", *show, pass_env=["ONLY_A"]),
    )
    sealed({**doc, "pass_env": ["SHARED"]})
    assert audit(repo.path, "run", "--jobs", "1").code == 0
    seen = {
        sid: repo.git("show", f"{tip(repo)}:steps/{sid}/checks/0/stdout").strip()
        for sid in ("a", "b", "c", "a2")
    }
    assert seen == {
        "a": "shared:only_a:",
        "b": "shared::only_b",
        "c": "shared::",
        "a2": "shared:only_a:",
    }


def test_one_job_runs_one_step_at_a_time(repo: GitRepo, sealed: Sealer, tmp_path: Path) -> None:
    """`--jobs 1`: `b` (queued after `a`) starts only once `a` is over. `a` watches for `b` for a
    while (two seconds), so steps run side by side would fail it."""
    first = (
        f"i=0; while [ $i -lt 20 ]; do [ -e {tmp_path}/b-started ] && exit 1; "
        f"sleep 0.1; i=$((i + 1)); done; touch {tmp_path}/a-done"
    )
    second = f"touch {tmp_path}/b-started; test -e {tmp_path}/a-done"
    sealed(make_plan(run_step("a", "sh", "-c", first), run_step("b", "sh", "-c", second)))
    result = audit(repo.path, "run", "--jobs", "1")
    assert result.code == 0, result.out + result.err
    assert {s["status"] for s in run_json(repo)["steps"].values()} == {"passed"}


def test_a_blocked_step_does_not_hold_back_the_steps_after_it(
    repo: GitRepo, sealed: Sealer, tmp_path: Path
) -> None:
    """`b` is blocked (its prerequisite `x` is not run); `c`, after it in the plan, starts in the
    same pass, while `s` is still running: `s` waits for `c` to have run (half a minute at most)."""
    marker = tmp_path / "c-ran"
    waits = (
        f"i=0; while [ ! -e {marker} ]; do [ $i -gt 300 ] && exit 1; sleep 0.1; i=$((i + 1)); done"
    )
    sealed(
        make_plan(
            run_step("x", "true", outputs={"o": "README.md"}),
            run_step("s", "sh", "-c", waits),
            run_step("b", "true", deps=["x"], requires=[("x", "o")]),
            run_step("c", "touch", str(marker)),
        )
    )
    result = audit(repo.path, "run", "s", "b", "c", "--plan", "default", "--jobs", "2")
    doc = run_json(repo)
    statuses = {sid: entry["status"] for sid, entry in doc["steps"].items()}
    assert statuses == {"x": "not-run", "s": "passed", "b": "blocked", "c": "passed"}, result.out
    assert "prerequisite x is not verified" in doc["steps"]["b"]["reason"]


def test_timeout_is_unknown_and_exits_3(repo: GitRepo, sealed: Sealer) -> None:
    step = run_step("slow", "sleep", "30")
    step["verify"][0]["timeout"] = 0.5
    sealed(make_plan(step))
    result = audit(repo.path, "run")
    assert result.code == 3, result.out + result.err  # `sleep 30` not cut short would pass
    doc = run_json(repo)
    assert doc["verdict"] == "UNKNOWN" and doc["steps"]["slow"]["status"] == "unknown"
    assert doc["steps"]["slow"]["checks"][0]["timed_out"] is True


def test_bad_commands_are_failed_checks_not_crashes(repo: GitRepo, sealed: Sealer) -> None:
    repo.write("not-exec.sh", "#!/bin/sh\necho hi\n", mode=0o644)
    sealed(
        make_plan(
            run_step("missing", "definitely-not-a-command-xyz"),
            {
                "id": "denied",
                "depends_on": [],
                "covers": ["R"],
                "verify": [{"type": "exec", "path": "not-exec.sh"}],
            },
        )
    )
    result = audit(repo.path, "run")
    assert result.code == 1 and "Traceback" not in result.err
    doc = run_json(repo)
    assert "command not found" in doc["steps"]["missing"]["checks"][0]["message"]
    assert "not an executable file" in doc["steps"]["denied"]["checks"][0]["message"]


def test_output_is_bounded_and_bytes_are_kept(repo: GitRepo, sealed: Sealer) -> None:
    big = run_step(
        "big",
        "python3",
        "-c",
        "import sys; sys.stdout.write('x' * 3_000_000); "
        "sys.stderr.buffer.write(b'\\xff\\xfe bytes')",
    )
    big["verify"][0]["max_output_bytes"] = 1000
    sealed(make_plan(big))
    assert audit(repo.path, "run").code == 0
    check = run_json(repo)["steps"]["big"]["checks"][0]
    assert check["stdout_bytes"] == 3_000_000 and check["stdout_truncated"] is True
    stdout = subprocess.run(
        ["git", "cat-file", "blob", "refs/audit/runs/default:steps/big/checks/0/stdout"],
        cwd=repo.path,
        capture_output=True,
        check=True,
    ).stdout
    stderr = subprocess.run(
        ["git", "cat-file", "blob", "refs/audit/runs/default:steps/big/checks/0/stderr"],
        cwd=repo.path,
        capture_output=True,
        check=True,
    ).stdout
    assert len(stdout) == 1000 and stderr == b"\xff\xfe bytes"


def test_a_daemon_left_behind_is_killed(repo: GitRepo, sealed: Sealer, tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.pid"
    sealed(make_plan(run_step("d", "sh", "-c", f"sleep 300 & echo $! > {pidfile}")))
    assert audit(repo.path, "run").code == 0
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 30  # SIGKILL is sent before the run returns; it lands soon
    while (alive := _alive(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive
    assert run_json(repo)["steps"]["d"]["checks"][0]["leftovers_killed"] is True


def _alive(pid: int) -> bool:
    """Whether *pid* runs (a zombie waiting to be reaped has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_symlink_escape_is_rejected(repo: GitRepo, sealed: Sealer) -> None:
    os.symlink("/etc/hostname", repo.path / "escape")
    step = run_step("s", "true")
    step["verify"].append({"type": "file_exists", "path": "escape"})
    sealed(make_plan(step))
    assert audit(repo.path, "run").code == 1
    assert "escapes the workspace" in run_json(repo)["steps"]["s"]["checks"][1]["message"]


def test_a_check_that_modifies_the_workspace_fails_the_run(repo: GitRepo, sealed: Sealer) -> None:
    sealed(make_plan(run_step("dirty", "sh", "-c", "echo changed >> README.md; touch new-file")))
    result = audit(repo.path, "run")
    assert result.code == 1
    doc = run_json(repo)
    assert doc["verdict"] == "FAIL" and doc["purity"]["changed"] == ["README.md", "new-file"]
    assert "the workspace changed during the run" in doc["reasons"]


def test_upstream_output_is_rechecked_before_the_dependant(repo: GitRepo, sealed: Sealer) -> None:
    """In the live work tree (``workspace: live``), outputs persist between runs: the producer's
    evidence is carried, and its output is checked again before the dependant runs."""
    repo.write(".gitignore", "out.txt\n")
    sealed(
        make_plan(
            run_step("make", "touch", "out.txt", outputs={"out": "out.txt"}),
            run_step("use", "true", deps=["make"], requires=[("make", "out")]),
        )
        | {"workspace": "live"}
    )
    assert audit(repo.path, "run").code == 0
    (repo.path / "out.txt").unlink()  # the producer's evidence is carried, its output is gone
    result = audit(repo.path, "run", "use", "--plan", "default")
    doc = run_json(repo)
    assert result.code == 1
    assert doc["steps"]["make"]["status"] == "carried"
    assert doc["steps"]["use"]["status"] == "blocked"
    assert "upstream output make/out no longer holds" in doc["steps"]["use"]["reason"]
    assert doc["steps"]["use"]["attempts_used"] == 0


def test_in_the_checkout_a_producer_runs_again_for_its_dependant(
    repo: GitRepo, sealed: Sealer
) -> None:
    """Every run starts from the tree alone: the output of the last run is gone, so the producer
    of an output the targeted step requires is executed again (not carried) and the dependant
    sees its output."""
    repo.write(".gitignore", "out.txt\n")
    sealed(
        make_plan(
            run_step("make", "touch", "out.txt", outputs={"out": "out.txt"}),
            run_step("use", "test", "-f", "out.txt", deps=["make"], requires=[("make", "out")]),
        )
    )
    assert audit(repo.path, "run").code == 0
    assert not (repo.path / "out.txt").exists()  # produced in the checkout, not the work tree
    result = audit(repo.path, "run", "use", "--plan", "default")
    doc = run_json(repo)
    assert result.code == 0, result.out + result.err
    assert doc["steps"]["make"]["status"] == "passed"
    assert doc["steps"]["use"]["status"] == "passed"
    assert doc["targeted"] == ["use"]  # what was asked; the producer ran because it must


def test_targeted_run_carries_verified_steps(repo: GitRepo, sealed: Sealer) -> None:
    sealed(
        make_plan(
            run_step("a", "true", outputs={"o": "README.md"}),
            run_step("b", "true", deps=["a"], requires=[("a", "o")]),
        )
    )
    assert audit(repo.path, "run").code == 0
    first = tip(repo)
    result = audit(repo.path, "run", "b", "--plan", "default")
    assert result.code == 0, result.out + result.err
    doc = run_json(repo)
    assert doc["steps"]["a"]["status"] == "carried" and doc["steps"]["a"]["carried_from"] == first
    assert doc["steps"]["b"]["status"] == "passed" and doc["targeted"] == ["b"]


def test_targeted_run_without_evidence_blocks(repo: GitRepo, sealed: Sealer) -> None:
    sealed(
        make_plan(
            run_step("a", "true", outputs={"o": "README.md"}),
            run_step("b", "true", deps=["a"], requires=[("a", "o")]),
        )
    )
    result = audit(repo.path, "run", "b", "--plan", "default")
    doc = run_json(repo)
    assert (
        result.code == 3
        and doc["steps"]["a"]["status"] == "not-run"
        and doc["steps"]["b"]["status"] == "blocked"
    )


def test_unknown_step_is_a_usage_error(repo: GitRepo, sealed: Sealer) -> None:
    sealed(make_plan(run_step("a", "true")))
    result = audit(repo.path, "run", "zzz", "--plan", "default")
    assert result.code == 2 and "has no step zzz" in result.err


def test_eight_concurrent_runs_form_one_chain(repo: GitRepo, sealed: Sealer) -> None:
    sealed(make_plan(run_step("a", "true")))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "gitaudit", "run"],
            cwd=repo.path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(8)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    assert repo.git("rev-list", "--count", "refs/audit/runs/default").strip() == "8"
    assert repo.git("rev-list", "--min-parents=2", "refs/audit/runs/default").strip() == ""
    subprocess.run(["git", "fsck", "--no-progress"], cwd=repo.path, check=True, capture_output=True)


def test_ctrl_c_is_recorded_as_interrupted(repo: GitRepo, sealed: Sealer, tmp_path: Path) -> None:
    started = tmp_path / "started"  # written by the check itself, outside the checkout
    sealed(make_plan(run_step("long", "sh", "-c", f"touch '{started}'; exec sleep 60")))
    code, said = ctrl_c_once_the_check_runs(repo.path, started)
    assert code == 3, said
    doc = run_json(repo)
    assert doc["verdict"] == "INTERRUPTED" and doc["steps"]["long"]["status"] == "interrupted"


def test_sealer_only_key_cannot_record_evidence(repo: GitRepo, tmp_path: Path) -> None:
    repo.write_plan(make_plan(run_step("a", "true")))
    repo.commit("plan")
    assert audit(repo.path, "keys", "generate").code == 0
    assert audit(repo.path, "trust", "init", "--no-runner").code == 0
    assert audit(repo.path, "plan", "seal").code == 0
    result = audit(repo.path, "run")
    assert result.code == 1 and "is not a runner" in result.err


def test_log_and_show(repo: GitRepo, sealed: Sealer) -> None:
    sealed(make_plan(run_step("a", "echo", "hello")))
    audit(repo.path, "run")
    audit(repo.path, "run")
    log = audit(repo.path, "log", "--json").json()
    assert len(log) == 2 and log[0]["commit"] == tip(repo) and log[0]["verdict"] == "PASS"
    shown = audit(repo.path, "show", "latest")
    assert "# audit(default): PASS" in shown.out
    step = audit(repo.path, "show", tip(repo)[:10], "--step", "a")
    assert "hello" in step.out
    record = read_run(pygit2.Repository(str(repo.path)), tip(repo))
    assert record.verdict == "PASS"


def test_a_terminal_gets_the_live_progress_table(repo: GitRepo, sealed: Sealer) -> None:
    """On a TTY the run shows a live rich table; piped output gets plain lines (tested above)."""
    import pty

    sealed(make_plan(run_step("a", "true"), run_step("b", "true")))
    pid, fd = pty.fork()
    if pid == 0:  # the child: the real CLI on a pseudo-terminal
        try:
            os.chdir(repo.path)
            os.environ["COLUMNS"] = "100"
            os.execv(sys.executable, [sys.executable, "-m", "gitaudit", "run"])
        finally:  # never back into this copy of pytest, to go on as a second test session
            os._exit(127)
    chunks = []
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    _, status = os.waitpid(pid, 0)
    out = b"".join(chunks).decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, out
    assert "\x1b[?25l" in out  # rich's live display hides the cursor while it redraws
    assert "git audit run --plan" in out  # the table title
    assert "│" in out and "passed" in out and "seconds" in out
    assert "default: PASS — 2/2 steps verified" in out


def test_the_checks_see_the_work_tree_not_heads_tree(repo: GitRepo, sealed: Sealer) -> None:
    """The checkout of HEAD's tree starts while the work tree is fingerprinted (most runs are
    of HEAD's tree); when the work tree holds something else (an edit, a file deleted, a new
    file), the checks see exactly that, and the next run of HEAD's tree sees HEAD's again."""
    sealed(make_plan(run_step("state", "sh", "-c", 'test "$(cat state.txt)" = new')))
    repo.write("state.txt", "new\n")
    repo.commit("new state")
    ran = [audit(repo.path, "run")]  # HEAD's tree: new
    repo.write("state.txt", "old\n")
    ran.append(audit(repo.path, "run"))  # the work tree: old, uncommitted
    repo.git("checkout", "--", "state.txt")
    ran.append(audit(repo.path, "run"))  # HEAD's again
    (repo.path / "state.txt").unlink()
    ran.append(audit(repo.path, "run"))  # deleted: no file to read
    repo.git("checkout", "--", "state.txt")
    repo.write("extra.txt", "untracked\n")
    ran.append(audit(repo.path, "run"))  # HEAD's files and one more
    assert [r.code for r in ran] == [0, 1, 0, 1, 0], [r.out for r in ran]
    assert run_json(repo)["tree"] != repo.head_tree()
    assert all("changed during the run" not in r.out for r in ran)
