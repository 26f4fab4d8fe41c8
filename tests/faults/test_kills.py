"""SIGKILL inside the write windows of `git audit run`, `git audit plan seal` and `git audit push`.

A kill at a random instant mostly lands before anything is written (replayed with one seed, 21
of 26 run kills did, and none between the first object write and the ref update). So kills land
where they matter, on purpose:

* at gitaudit's pause points (:mod:`gitaudit.checkpoint`, armed through the environment of the
  command under test): a run's or a seal's objects written and its ref not moved; a run's ref
  moved and its seen mark and lookup cache not updated; a push's replays signed and no ref
  moved; a push done and nothing recorded after it;
* inside git's own ref update, while it holds the ref's lock: a ``reference-transaction`` hook
  (installed by the test in the repository, or on the server) waits in the ``prepared`` state.

Each point is killed two ways: the gitaudit process alone (its git children run on as orphans,
like after a crashed parent; a paused git is then let go) and its whole process group (git dies
too, and leaves its lock). What is found there is asserted exactly (which ref moved to which
commit, which lock is left and by whom), then that the next command recovers: it succeeds, the
ledger is linear, fsck-clean and verifies, nothing recorded is lost, and the lookup cache agrees.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitaudit import checkpoint
from gitaudit.git.repo import open_repo
from gitaudit.ledger import index
from gitaudit.ledger.refs import PLANS_REF
from gitaudit.ledger.seals import history
from tests.faults.conftest import (
    PLAN_NAME,
    RUNS_REF,
    Served,
    age,
    assert_ledger_sound,
    cli_argv,
    env,
    fsck,
    is_ancestor,
    lock_files,
    rev_parse,
    tiny_plan,
)
from tests.gitrepo import GitRepo, audit, git

LOCK_HELD = "its lock stays held"  # a fresh lock (< 10 s) left by a killed git is respected
GIT_PREPARED = "git.prepared"  # the reference-transaction hook's point
HANG_GUARD = 120.0  # seconds: only against a hang, never a measurement

# git's reference-transaction hook: in the "prepared" state git holds the locks of every ref of
# the transaction. For the audit refs matching PATTERN, say so and wait to be let go.
REF_HOOK = """#!/bin/sh
[ "$1" = prepared ] || exit 0
cat > "{dir}/refs.tmp"
grep -q " {pattern}" "{dir}/refs.tmp" || exit 0
mv "{dir}/refs.tmp" "{dir}/{point}.reached"
while [ ! -e "{dir}/{point}.go" ]; do sleep 0.02; done
"""


@dataclass
class Paused:
    """A command started with one pause point armed, and paused there."""

    proc: subprocess.Popen[bytes]
    point: str
    detail: str
    folder: Path

    def kill(self, group: bool) -> None:
        if group:
            os.killpg(self.proc.pid, signal.SIGKILL)
        else:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=HANG_GUARD)

    def release(self) -> None:
        (self.folder / f"{self.point}.go").touch()


def pause_at(
    argv: list[str], cwd: Path, point: str, folder: Path, path_first: Path | None = None
) -> Paused:
    """Start *argv* in its own process group with *point* armed (and *path_first* first on
    its PATH); return once it is paused there (the detail the point reported: the commit
    written, or git's ref updates)."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    armed = env(
        **{checkpoint.DIR_VARIABLE: str(folder), checkpoint.POINTS_VARIABLE: point},
    )
    if path_first is not None:
        armed["PATH"] = f"{path_first}{os.pathsep}{armed['PATH']}"
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=armed,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    marker = folder / f"{point}.reached"
    deadline = time.monotonic() + HANG_GUARD
    while not marker.exists():
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise AssertionError(f"{argv} ended ({proc.returncode}) before {point}:\n{err}")
        assert time.monotonic() < deadline, f"{point} was never reached"
        time.sleep(0.02)
    time.sleep(0.05)  # the marker is written in one call; let it be complete
    return Paused(proc, point, marker.read_text(), folder)


# gitaudit runs its own git with `core.hooksPath=/dev/null` (no hook of the repository's runs in
# it: gitaudit.git.environment.NO_HOOKS); the test's stand-in for a crash inside git's ref update
# is such a hook, so a `git` first on the command's PATH points that setting at the repository's
# hooks folder and runs the real git with everything else as given
HOOKS_SHIM = """#!{python}
import os, sys
given = [("core.hooksPath={hooks}" if a == "core.hooksPath=/dev/null" else a) for a in sys.argv]
os.execv({git!r}, [{git!r}, *given[1:]])
"""


@contextlib.contextmanager
def ref_hook(gitdir: Path, pattern: str, folder: Path) -> Iterator[Path]:
    """git's updates of refs matching *pattern* pause in the prepared state, holding the lock;
    yields a folder to put first on PATH, whose `git` runs that hook in gitaudit's git too."""
    hook = gitdir / "hooks" / "reference-transaction"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(REF_HOOK.format(dir=folder, pattern=pattern, point=GIT_PREPARED))
    hook.chmod(0o755)
    real = shutil.which("git")
    assert real is not None
    shim = folder.parent / f"{folder.name}-bin" / "git"
    shim.parent.mkdir(parents=True, exist_ok=True)
    shim.write_text(HOOKS_SHIM.format(python=sys.executable, hooks=hook.parent, git=real))
    shim.chmod(0o755)
    try:
        yield shim.parent
    finally:
        hook.unlink()


def gitdir_of(path: Path) -> Path:
    return Path(git(path, "rev-parse", "--absolute-git-dir").strip())


def wait_for_no_lock(lock: Path) -> None:
    """An orphaned git let go finishes its update and removes its lock."""
    deadline = time.monotonic() + HANG_GUARD
    while lock.exists():
        assert time.monotonic() < deadline, f"{lock} stayed"
        time.sleep(0.02)


def cat_type(path: Path, oid: str) -> str:
    return git(path, "cat-file", "-t", oid).strip()


def pause_and_kill(
    argv: list[str], cwd: Path, point: str, group: bool, folder: Path, gitdir: Path, ref: str
) -> str:
    """Run *argv* to *point*, kill it (*group* or the process alone), and return the commit it
    was writing. A git paused holding the lock of *ref* is let go after a process-only kill (it
    is an orphan now), and finishes."""
    if point == GIT_PREPARED:
        pattern = ref
        with ref_hook(gitdir, pattern, folder) as path_first:
            own = gitdir.resolve() == gitdir_of(cwd).resolve()  # not a server's receive-pack
            paused = pause_at(argv, cwd, point, folder, path_first if own else None)
            # git's own line: <old> <new> <ref>, and git's lock holds the new value
            (new,) = [u.split()[1] for u in paused.detail.splitlines() if u.endswith(f" {ref}")]
            lock = gitdir / f"{ref}.lock"
            assert lock.read_text().strip() == new, "git holds the ref's lock with our commit"
            paused.kill(group)
            if not group:
                paused.release()
                wait_for_no_lock(lock)
        return new
    paused = pause_at(argv, cwd, point, folder)
    written = paused.detail.split()[1]
    paused.kill(group)
    return written


RUN_POINTS = ["run.objects-written", "run.ref-moved", GIT_PREPARED]


@pytest.mark.slow
@pytest.mark.parametrize("group", [False, True], ids=["process", "group"])
@pytest.mark.parametrize("point", RUN_POINTS)
def test_sigkill_inside_the_run_write_window(
    tiny: GitRepo, tmp_path: Path, point: str, group: bool
) -> None:
    path = tiny.path
    gitdir = gitdir_of(path)
    first = audit(path, "run", "--json")
    assert first.code == 0, first.err
    before = rev_parse(path, RUNS_REF)
    assert before is not None and before == first.json()["runs"][0]["commit"]
    written = pause_and_kill(
        cli_argv("run", "--json"), path, point, group, tmp_path / "cp", gitdir, RUNS_REF
    )
    assert cat_type(path, written) == "commit"  # the objects were written before the kill
    moved = point == "run.ref-moved" or (point == GIT_PREPARED and not group)
    assert rev_parse(path, RUNS_REF) == (written if moved else before)
    assert is_ancestor(path, before, written)  # the new run was on top of the old tip
    lock = gitdir / f"{RUNS_REF}.lock"
    left = lock_files(gitdir)
    if point == GIT_PREPARED and group:
        assert left == [lock], left  # git died holding it: the only lock left, and git's own
    else:
        assert left == [], left
    checked = fsck(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    age(left)  # a minute passes: a lock of a killed git is stale by then
    ran = audit(path, "run", "--json")  # the next run recovers
    assert ran.code == 0, ran.out + ran.err
    newest = ran.json()["runs"][0]["commit"]
    assert lock_files(gitdir) == []
    verified = audit(path, "verify")  # the client's own marks: no false rewind
    assert verified.code == 0, verified.out + verified.err
    chain = assert_ledger_sound(path)
    assert chain == [newest, *([written] if moved else []), before]
    repo = open_repo(path)
    indexed = index.recent(repo.git, repo.gitdir, PLAN_NAME, 10_000)
    assert [r.commit for r in indexed] == chain
    assert audit(path, "status").code == 0


SEAL_POINTS = ["seal.objects-written", GIT_PREPARED]


@pytest.mark.slow
@pytest.mark.parametrize("group", [False, True], ids=["process", "group"])
@pytest.mark.parametrize("point", SEAL_POINTS)
def test_sigkill_inside_the_seal_write_window(
    tiny: GitRepo, tmp_path: Path, point: str, group: bool
) -> None:
    path = tiny.path
    gitdir = gitdir_of(path)
    before = rev_parse(path, PLANS_REF)
    assert before is not None
    tiny.write_plan(tiny_plan(["k1"]))  # stronger: a new version
    written = pause_and_kill(
        cli_argv("plan", "seal", "--plan", PLAN_NAME),
        path,
        point,
        group,
        tmp_path / "cp",
        gitdir,
        PLANS_REF,
    )
    assert cat_type(path, written) == "commit"
    moved = point == GIT_PREPARED and not group
    assert rev_parse(path, PLANS_REF) == (written if moved else before)
    left = lock_files(gitdir)
    lock = gitdir / f"{PLANS_REF}.lock"
    assert left == ([lock] if point == GIT_PREPARED and group else []), left
    checked = fsck(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    age(left)
    tiny.write_plan(tiny_plan(["k1", "k2"]))
    sealed = audit(path, "plan", "seal", "--plan", PLAN_NAME)  # the next seal recovers
    assert sealed.code == 0, sealed.out + sealed.err
    assert lock_files(gitdir) == []
    verified = audit(path, "verify")
    assert verified.code == 0, verified.out + verified.err
    chain = assert_ledger_sound(path, PLANS_REF)
    assert chain[1:] == ([written] if moved else []) + rev_parse_chain(path, before)
    versions = [e.record.version for e in reversed(history(open_repo(path), PLAN_NAME))]
    assert versions == list(range(1, len(versions) + 1))
    assert len(versions) == (3 if moved else 2)
    ran = audit(path, "run")  # and a run under the latest seal
    assert ran.code == 0, ran.out + ran.err


def rev_parse_chain(path: Path, tip: str) -> list[str]:
    return git(path, "rev-list", tip).split()


PUSH_POINTS = ["push.replayed", "push.pushed", GIT_PREPARED]


@pytest.mark.slow
@pytest.mark.parametrize("group", [False, True], ids=["process", "group"])
@pytest.mark.parametrize("point", PUSH_POINTS)
def test_sigkill_inside_the_push_write_window(
    served: Served, tmp_path: Path, point: str, group: bool
) -> None:
    """`git audit push` of a ledger that diverged from the server's (so it replays), killed at
    its pause points, or while the server's git holds the lock of the runs ref (a kill of the
    push's process group kills the server side of a file:// push too)."""
    client, _other = diverged(served, tmp_path)
    server = served.server
    local_before = rev_parse(client.path, RUNS_REF)
    server_before = rev_parse(server, RUNS_REF)
    assert local_before is not None and server_before is not None
    main_before = rev_parse(server, "refs/heads/main")
    head = client.git("rev-parse", "HEAD").strip()
    server_gitdir = Path(server)
    where = server_gitdir if point == GIT_PREPARED else gitdir_of(client.path)
    pause_and_kill(cli_argv("push"), client.path, point, group, tmp_path / "cp", where, RUNS_REF)
    server_moved = point == "push.pushed" or (point == GIT_PREPARED and not group)
    local_runs = rev_parse(client.path, RUNS_REF)
    if point == "push.replayed":
        assert local_runs == local_before  # signed replays written, no ref moved
    else:
        assert local_runs is not None and local_runs != local_before
        assert is_ancestor(client.path, server_before, local_runs)
    if server_moved:
        assert rev_parse(server, RUNS_REF) == local_runs
        assert rev_parse(server, "refs/heads/main") == head
    else:
        assert rev_parse(server, RUNS_REF) == server_before
        assert rev_parse(server, "refs/heads/main") == main_before
    for repo_path in (client.path, server):
        checked = fsck(repo_path)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    assert lock_files(gitdir_of(client.path)) == []
    server_locks = lock_files(server_gitdir)
    if point == GIT_PREPARED and group:
        # receive-pack died holding its locks: git never expires them, gitaudit cannot clear
        # them on the server; the next push says so in one line and moves nothing
        assert gitdir_of(server) / f"{RUNS_REF}.lock" in server_locks, server_locks
        blocked = served.audit_push()
        assert blocked.returncode != 0
        assert "Traceback" not in blocked.stderr
        assert ".lock" in blocked.stdout + blocked.stderr, blocked.stdout + blocked.stderr
        assert rev_parse(server, RUNS_REF) == server_before
        for lock in server_locks:  # what the server's administrator does
            lock.unlink()
    else:
        assert server_locks == []

    final = served.audit_push()  # the next push recovers
    assert final.returncode == 0, final.stdout + final.stderr
    assert rev_parse(server, "refs/heads/main") == head
    assert rev_parse(server, RUNS_REF) == rev_parse(client.path, RUNS_REF)
    assert_ledger_sound(server)
    assert audit(server, "status", "main").code == 0
    client_verify = audit(client.path, "verify")
    assert client_verify.code == 0, client_verify.out + client_verify.err
    assert_ledger_sound(client.path)


@pytest.mark.slow
def test_stale_lock_is_cleared_and_a_fresh_one_respected(tiny: GitRepo) -> None:
    """A lock younger than 10 s may belong to a live git: the run waits; it either gives up with
    one line and moves nothing, or proceeds only once the lock has become stale. A stale lock is
    removed and the run recorded."""
    path = tiny.path
    lock = gitdir_of(path) / f"{RUNS_REF}.lock"
    assert audit(path, "run").code == 0
    before = rev_parse(path, RUNS_REF)
    lock.write_text("0" * 40 + "\n")
    age([lock], 6.0)  # left 6 s ago: still fresh for 4 s
    written = lock.stat().st_mtime
    held = audit(path, "run")
    assert "Traceback" not in held.err
    if held.code == 0:  # it waited until the lock was stale (by its age), then cleared it
        assert not lock.exists()
        assert rev_parse(path, RUNS_REF) != before
    else:
        assert held.code == 1 and LOCK_HELD in held.err, held.out + held.err
        assert rev_parse(path, RUNS_REF) == before and lock.exists()
        assert lock.stat().st_mtime == written  # respected: left as it was
    print(f"fresh lock: run exit {held.code}", file=sys.stderr)
    lock.write_text("0" * 40 + "\n")
    age([lock], 11.0)
    ran = audit(path, "run", "--json")
    assert ran.code == 0, ran.err
    assert not lock.exists()
    assert ran.json()["runs"][0]["commit"] == rev_parse(path, RUNS_REF)


def diverged(served: Served, tmp_path: Path) -> tuple[GitRepo, GitRepo]:
    """(client, other): the client pushed a run; then another machine's run landed on the
    server while the client recorded one of its own, so the two ledgers diverge."""
    client = served.client
    assert audit(client.path, "run").code == 0
    assert served.audit_push().returncode == 0
    other = GitRepo(tmp_path / "other")
    git(tmp_path, "clone", "-q", str(served.server), str(other.path))
    git(other.path, "checkout", "-q", "-b", "other")
    git(other.path, "fetch", "-q", "origin", "refs/audit/*:refs/audit/*")
    other.write("other.txt", "theirs\n")
    other.commit("theirs")
    assert audit(other.path, "run").code == 0
    assert served.audit_push(other.path).returncode == 0
    client.write("mine.txt", "mine\n")
    client.commit("mine")
    assert audit(client.path, "run").code == 0
    return client, other


def test_sigkill_between_replay_and_watermark(served: Served, tmp_path: Path) -> None:
    client, other = diverged(served, tmp_path)
    assert audit(client.path, "verify").code == 0  # the local chain is verified: it has a mark
    # `git audit push`, killed right after the replayed chain replaced the local one
    code = (
        "import os, signal, sys\n"
        "import gitaudit.ledger.sync\n"
        "marks = gitaudit.ledger.sync.watermark\n"
        "real_record, real_reset = marks.record, marks._reset\n"
        "calls = []\n"
        "def die_if_runs(refs):\n"
        "    # the first mark update comes before the ref moves, the second after: die there\n"
        "    if any(str(ref).startswith('refs/audit/runs/') for ref in refs):\n"
        "        calls.append(refs)\n"
        "        if len(calls) == 2:\n"
        "            os.kill(os.getpid(), signal.SIGKILL)\n"
        "def record(gitdir, new, *args, **kwargs):\n"
        "    die_if_runs(new)\n"
        "    real_record(gitdir, new, *args, **kwargs)\n"
        "def reset(gitdir, ref, *args, **kwargs):\n"
        "    die_if_runs([ref])\n"
        "    real_reset(gitdir, ref, *args, **kwargs)\n"
        "marks.record, marks._reset = record, reset\n"
        "from gitaudit.cli.entry import main\n"
        "main(['push'])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=client.path,
        env=env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    theirs = rev_parse(other.path, RUNS_REF)
    assert theirs is not None and is_ancestor(client.path, theirs, RUNS_REF)  # it was replayed
    verified = audit(client.path, "verify")
    assert verified.code == 0, verified.out + verified.err
    status = audit(client.path, "status")
    assert status.code == 0, status.out


def test_stale_mirror_lock_does_not_block_push(served: Served, tmp_path: Path) -> None:
    client, _ = diverged(served, tmp_path)
    # what a `git audit push` killed inside its `git fetch` leaves behind, a minute ago
    lock = gitdir_of(client.path) / "refs/gitaudit/remotes/origin/audit/runs/default.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("0" * 40 + "\n")
    age([lock])
    pushed = served.audit_push()
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert not lock.exists()
