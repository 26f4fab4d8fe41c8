"""Benchmark: the agent stop hook on a PASS tree, against the pre-push hook.

Issue 13's number: the stop hook answers a PASS tree in <= 1.2x the pre-push hook's time. Both
are timed as their hosts run them, on the same repository (a sealed one-step plan, a passing
run recorded, the verdict remembered by ``git audit status`` as a user's or agent's last
judgement leaves it):

* the stop hook: the command line ``git audit agent install --host claude-code`` writes
  (``git-audit agent stop --host claude-code || exit 2``), run through ``sh -c`` in the work
  tree with a Claude Code ``Stop`` payload on stdin and ``CLAUDE_PROJECT_DIR`` set: the work
  tree's fingerprint (its head start: ``rev-parse`` and ``git add -A`` on a copy of the kept
  index, begun before the rest is imported) is HEAD's tree, and the remembered PASS answers
  (the memo's three git processes beside git's hashing);
* the pre-push hook: the installed shim ``.git/hooks/pre-push`` with the push line of HEAD on
  stdin: it resolves HEAD's tree and finds the same remembered PASS.

Rounds are interleaved (``_ledger_util.interleaved``) and the medians compared; the ratio is
the result. Printed for information: both through ``python -m`` without the shell, the stop
hook on a passing tree with uncommitted changes (the fingerprint writes and keeps a tree: more
git processes in a row), with the memo deleted (the full gate), a repeated stop on an unproven tree
(``stop_hook_active``: the remembered block), a first stop on it (the full gate), and the guard
for an ordinary edit and an ordinary shell command. A sanity check first makes sure the stop
hook blocks an unproven tree and allows the passing one without importing pygit2.

Run: ``.venv/bin/python benchmarks/bench_agent.py [--rounds R]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ledger_util import (
    PYTHON,
    ZERO,
    audit,
    bench_env,
    info_line,
    init_audited_repo,
    interleaved,
    plan_doc,
    run_steps,
    timed_run,
)
from _util import git

from gitaudit.agent.settings import hook_command

TARGET_RATIO = 1.2


def stop_payload(repo: Path, *, active: bool = False) -> str:
    return json.dumps(
        {
            "session_id": "5c9a6a1e-3f4b-4c8e-9d2a-7b1e0f6c2d41",
            "transcript_path": "/home/dev/.claude/projects/bench/5c9a6a1e.jsonl",
            "cwd": str(repo),
            "permission_mode": "default",
            "hook_event_name": "Stop",
            "stop_hook_active": active,
        }
    )


def tool_payload(repo: Path, name: str, tool_input: dict[str, object]) -> str:
    return json.dumps(
        {
            "session_id": "5c9a6a1e-3f4b-4c8e-9d2a-7b1e0f6c2d41",
            "transcript_path": "/home/dev/.claude/projects/bench/5c9a6a1e.jsonl",
            "cwd": str(repo),
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": name,
            "tool_input": tool_input,
            "tool_use_id": "toolu_01Bench",
        }
    )


def host(repo: Path, command: str, stdin: str, expect: int | None = 0) -> float:
    """Run *command* as Claude Code does: ``sh -c`` in the project, the payload on stdin."""
    return timed_run(["sh", "-c", command], repo, stdin=stdin, expect=expect)


def answer(repo: Path, command: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", command], cwd=repo, input=stdin, capture_output=True, text=True, check=False
    )


def imports_pygit2(repo: Path, stdin: str) -> bool:
    proc = subprocess.run(
        [PYTHON, "-X", "importtime", "-m", "gitaudit.agent", "stop", "--host", "claude-code"],
        cwd=repo,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    return any(line.rstrip().endswith("| pygit2") for line in proc.stderr.splitlines())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds (medians)")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="gitaudit-bench-agent-"))
    try:
        bench_env(scratch)
        bindir = str(Path(PYTHON).parent)
        os.environ["PATH"] = f"{bindir}:{os.environ['PATH']}"  # git-audit, as installed
        repo = scratch / "project"
        init_audited_repo(repo, plan_doc(run_steps(1, ["true"])))
        os.environ["CLAUDE_PROJECT_DIR"] = str(repo)
        stop_cmd = hook_command("stop")
        guard_cmd = hook_command("guard")
        payload = stop_payload(repo)

        blocked = answer(repo, stop_cmd, payload)  # nothing run yet: UNKNOWN
        if '"decision": "block"' not in blocked.stdout:
            raise RuntimeError(f"the stop hook did not block an unproven tree: {blocked}")
        audit(repo, "run", "--jobs", "1")
        audit(repo, "status")  # PASS, remembered
        allowed = answer(repo, stop_cmd, payload)
        if allowed.returncode != 0 or allowed.stdout.strip():
            raise RuntimeError(f"the stop hook did not allow a PASS tree: {allowed}")
        if imports_pygit2(repo, payload):
            raise RuntimeError("the stop hook did not use the verdict memo")
        push_line = (
            f"refs/heads/main {git(repo, 'rev-parse', 'HEAD').strip()} refs/heads/main {ZERO}\n"
        )
        shim = ["./.git/hooks/pre-push", "origin", "x"]
        timed_run(shim, repo, stdin=push_line)

        # an unproven copy for the blocking rows
        unproven = scratch / "unproven"
        init_audited_repo(unproven, plan_doc(run_steps(1, ["true"])))
        blocked_env = {"CLAUDE_PROJECT_DIR": str(unproven)}

        def in_unproven(active: bool, forget: bool = False) -> float:
            saved = os.environ["CLAUDE_PROJECT_DIR"]
            os.environ.update(blocked_env)
            try:
                if forget:
                    (unproven / ".git" / "gitaudit" / "agent-stop.json").unlink(missing_ok=True)
                return host(unproven, stop_cmd, stop_payload(unproven, active=active))
            finally:
                os.environ["CLAUDE_PROJECT_DIR"] = saved

        in_unproven(False)  # remembers the block

        # a passing work tree with uncommitted changes: the fingerprint path
        dirty = scratch / "dirty"
        init_audited_repo(dirty, plan_doc(run_steps(1, ["true"])))
        (dirty / "notes.txt").write_text("uncommitted\n")
        (dirty / "README").write_text("edited, not committed\n")
        audit(dirty, "run", "--jobs", "1")
        audit(dirty, "status")

        def in_dirty() -> float:
            saved = os.environ["CLAUDE_PROJECT_DIR"]
            os.environ["CLAUDE_PROJECT_DIR"] = str(dirty)
            try:
                return host(dirty, stop_cmd, stop_payload(dirty))
            finally:
                os.environ["CLAUDE_PROJECT_DIR"] = saved

        in_dirty()

        def cold() -> float:
            (repo / ".git" / "gitaudit" / "memo.json").unlink(missing_ok=True)
            return host(repo, stop_cmd, payload)

        edit = tool_payload(
            repo, "Edit", {"file_path": str(repo / "README"), "old_string": "a", "new_string": "b"}
        )
        shell = tool_payload(repo, "Bash", {"command": "git add -A && git commit -m 'fix'"})
        medians = interleaved(
            {
                "python": lambda: timed_run([PYTHON, "-c", "pass"], repo),
                "stop": lambda: host(repo, stop_cmd, payload),
                "pre-push": lambda: timed_run(shim, repo, stdin=push_line),
                "stop-module": lambda: timed_run(
                    [PYTHON, "-m", "gitaudit.agent", "stop", "--host", "claude-code"],
                    repo,
                    stdin=payload,
                ),
                "pre-push-module": lambda: timed_run(
                    [PYTHON, "-m", "gitaudit.hooks", "pre-push", "origin", "x"],
                    repo,
                    stdin=push_line,
                ),
                "dirty": in_dirty,
                "repeated-block": lambda: in_unproven(True),
                "first-block": lambda: in_unproven(False, forget=True),
                "guard-edit": lambda: host(repo, guard_cmd, edit),
                "guard-bash": lambda: host(repo, guard_cmd, shell),
                "cold": cold,
            },
            args.rounds,
        )
        # the cold rows deleted the memo; fill it again is not needed after the last round
        startup = medians["python"]
        ratio = medians["stop"] / medians["pre-push"]
        module_ratio = medians["stop-module"] / medians["pre-push-module"]
        print("agent stop hook vs pre-push, a PASS tree (median wall times, interleaved):")
        info_line("baseline: python -c pass (interpreter start-up)", startup)
        info_line("pre-push: installed shim .git/hooks/pre-push", medians["pre-push"], startup)
        info_line("stop: sh -c 'git-audit agent stop ... || exit 2'", medians["stop"], startup)
        info_line(
            "pre-push: python -m gitaudit.hooks pre-push", medians["pre-push-module"], startup
        )
        info_line("stop: python -m gitaudit.agent stop", medians["stop-module"], startup)
        print("\nfor information:")
        info_line("stop, PASS with uncommitted changes (fingerprint)", medians["dirty"], startup)
        info_line("stop, memo deleted (the full gate): PASS", medians["cold"], startup)
        info_line(
            "stop, unproven tree, first stop (the full gate)", medians["first-block"], startup
        )
        info_line(
            "stop, unproven tree, repeated stop (remembered)", medians["repeated-block"], startup
        )
        info_line("guard: an ordinary Edit", medians["guard-edit"], startup)
        info_line("guard: an ordinary Bash command", medians["guard-bash"], startup)
        ok = ratio <= TARGET_RATIO
        print(
            f"\nresult: stop / pre-push = {ratio:.2f}x (as installed; target <= {TARGET_RATIO}x)"
            f"  {'PASS' if ok else 'FAIL'}"
        )
        print(f"        python -m to python -m: {module_ratio:.2f}x (information)")
        return 0 if ok else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
