"""Fixtures and worker processes for the fault tests.

Workers are plain functions run in their own interpreter (``python -c``, see :func:`spawn`) so
that concurrency is between real processes racing on one repository, as in production. They
inherit the hermetic environment of the test (HOME, GITAUDIT_HOME, git identity) through
``os.environ`` and print one JSON document on their last line of stdout.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import GitRepo, audit, forget_marks, git

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
SEED = 20261101
PLAN_NAME = "default"
RUNS_REF = f"refs/audit/runs/{PLAN_NAME}"


# ------------------------------------------------------------------------------------- plans


def step(sid: str, *argv: str) -> dict[str, Any]:
    return {
        "id": sid,
        "depends_on": [],
        "covers": ["R"],
        "verify": [{"type": "run", "argv": list(argv or ("true",))}],
    }


def tiny_plan(extra: Iterable[str] = ()) -> dict[str, Any]:
    """One `true` step (plus one `true` step per name in *extra*): evidence as cheap as it gets."""
    return {
        "task": "faults",
        "requirements": [{"id": "R", "description": "the tree is checked"}],
        "steps": [step("s"), *(step(x) for x in extra)],
    }


# ---------------------------------------------------------------------------------- processes


def env(**extra: str) -> dict[str, str]:
    """The hermetic environment, with the venv's bin first (hooks, `git audit`) and the project
    importable (workers import this module), before whatever the caller's PYTHONPATH holds."""
    bindir = str(Path(PY).parent)
    path = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    out = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "PYTHONPATH": path}
    out.update(extra)
    return out


def cli_argv(*args: str) -> list[str]:
    return [PY, "-m", "gitaudit", *args]


def spawn(func: str, *args: Any, cwd: Path | None = None) -> subprocess.Popen[str]:
    """Run ``tests.faults.conftest.<func>(*args)`` in a fresh interpreter."""
    code = (
        "import json, sys\n"
        f"from tests.faults.conftest import {func} as worker\n"
        "worker(*json.loads(sys.argv[1]))\n"
    )
    return subprocess.Popen(
        [PY, "-c", code, json.dumps(list(args))],
        cwd=cwd or ROOT,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def collect(procs: Sequence[subprocess.Popen[str]], timeout: float) -> list[Any]:
    """Wait for every worker (bounded); each must exit 0; return their JSON results."""
    deadline = time.monotonic() + timeout
    results = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise AssertionError(f"a worker did not finish within {timeout:.0f} s") from None
        assert proc.returncode == 0, f"worker failed ({proc.returncode}):\n{err[-4000:]}"
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def barrier(folder: str, me: str) -> None:
    """A real barrier between processes: say this worker is ready (``<folder>/ready.<me>``),
    then wait until the test lets every worker go at once (``<folder>/go``)."""
    where = Path(folder)
    (where / f"ready.{me}").touch()
    go = where / "go"
    while not go.exists():
        time.sleep(0.005)


def release(folder: Path, workers: Sequence[subprocess.Popen[str]], timeout: float) -> None:
    """Wait until every worker stands at :func:`barrier` (each one an interpreter that has
    imported what it needs), then let them all go. *timeout* is a hang guard."""
    deadline = time.monotonic() + timeout
    while len(list(folder.glob("ready.*"))) < len(workers):
        dead = [p for p in workers if p.poll() is not None]
        if dead:
            _out, err = dead[0].communicate()
            raise AssertionError(f"a worker died before the barrier:\n{err[-4000:]}")
        assert time.monotonic() < deadline, "the workers never all reached the barrier"
        time.sleep(0.01)
    (folder / "go").touch()


# --------------------------------------------------------------------------------------- git


def fsck(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "fsck", "--no-dangling", "--no-progress"],
        cwd=path,
        capture_output=True,
        text=True,
        check=False,
    )


def rev_parse(path: Path, rev: str) -> str | None:
    proc = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", rev],
        cwd=path,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() or None


def rev_list(path: Path, ref: str, *options: str) -> list[str]:
    return git(path, "rev-list", *options, ref).split()


def is_ancestor(path: Path, ancestor: str, descendant: str) -> bool:
    proc = subprocess.run(
        ["git", "merge-base", "--is-ancestor", ancestor, descendant],
        cwd=path,
        capture_output=True,
        check=False,
    )
    return proc.returncode == 0


def lock_files(gitdir: Path) -> list[Path]:
    return sorted(p for p in gitdir.rglob("*.lock") if p.is_file())


def age(paths: Iterable[Path], seconds: float = 60.0) -> None:
    """Pretend *seconds* have passed since the files were last written."""
    then = time.time() - seconds
    for path in paths:
        try:
            os.utime(path, (then, then))
        except FileNotFoundError:
            continue


def assert_one_line_errors(texts: Iterable[str]) -> None:
    for text in texts:
        assert "Traceback" not in text, text


def assert_ledger_sound(path: Path, ref: str = RUNS_REF) -> list[str]:
    """fsck clean, the ref linear, and a full `git audit verify` (no watermarks) verifying every
    commit on it. Returns the chain, newest first."""
    checked = fsck(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    chain = rev_list(path, ref)
    assert rev_list(path, ref, "--merges") == [], f"{ref} has merges"
    assert rev_list(path, ref, "--first-parent") == chain, f"{ref} is not linear"
    gitdir = Path(git(path, "rev-parse", "--absolute-git-dir").strip())
    forget_marks(gitdir)
    verified = audit(path, "verify", "--json")
    assert verified.code == 0, verified.out + verified.err
    doc = verified.json()
    assert doc["verdict"] == "PASS", doc
    assert doc["verified"][ref] == len(chain), doc
    return chain


# ---------------------------------------------------------------------------------- fixtures


def seal_repo(repo: GitRepo, plan: dict[str, Any] | None = None) -> GitRepo:
    """Write the plan, commit, and key + trust + seal through the real command line."""
    repo.write_plan(plan or tiny_plan())
    repo.commit("plan")
    for args in (["keys", "generate"], ["trust", "init"], ["plan", "seal"]):
        result = audit(repo.path, *args)
        assert result.code == 0, (args, result.out, result.err)
    return repo


@pytest.fixture
def tiny(repo: GitRepo) -> GitRepo:
    """A repository with a sealed one-step plan and a trusted sealer+runner key."""
    return seal_repo(repo)


@dataclass
class Served:
    """A client with a sealed tiny plan and a bare server running gitaudit's pre-receive hook."""

    client: GitRepo
    server: Path
    root_key: str

    def audit_push(self, cwd: Path | None = None, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            cli_argv("push", *args),
            cwd=cwd or self.client.path,
            capture_output=True,
            text=True,
            check=False,
            env=env(),
        )


def make_served(base: Path, files: Iterable[str] = ()) -> Served:
    server = base / "server.git"
    git(base, "init", "-q", "--bare", "-b", "main", str(server))
    client = GitRepo.create(base / "client")
    for name in files:
        client.write(name, "0\n")
    client.write_plan(tiny_plan())
    client.commit("tiny plan")
    client.git("remote", "add", "origin", str(server))
    for args in (["init"], ["plan", "seal", "-m", "initial"]):
        result = audit(client.path, *args)
        assert result.code == 0, (args, result.out, result.err)
    root_key = client.git("config", "audit.rootKey").strip()
    git(server, "config", "audit.rootKey", root_key)
    installed = audit(server, "hooks", "install", "--server")
    assert installed.code == 0, installed.err
    boot = subprocess.run(
        ["git", "push", "origin", "refs/audit/plans:refs/audit/plans"],
        cwd=client.path,
        capture_output=True,
        text=True,
        check=False,
        env=env(),
    )
    assert boot.returncode == 0, boot.stderr
    return Served(client, server, root_key)


@pytest.fixture
def served(tmp_path: Path) -> Served:
    return make_served(tmp_path)


# ----------------------------------------------------------------------------------- workers


def _open(path: str) -> tuple[Any, Any]:
    from gitaudit.cli.common import signer_for
    from gitaudit.git.repo import open_repo

    repo = open_repo(path)
    return repo, signer_for(repo, None)


def record_worker(path: str, runs: int, folder: str, me: str) -> None:
    """Record *runs* runs of the default plan, each through the real command line (`python -m
    gitaudit run --json`, as `git audit run` starts it), once every worker is at the barrier;
    print the commit ids each run reported."""
    barrier(folder, me)
    commits = []
    for _ in range(runs):
        proc = subprocess.run(
            cli_argv("run", "--json"), cwd=path, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        doc = json.loads(proc.stdout)
        assert doc["runs"][0]["verdict"] == "PASS", doc
        commits.append(doc["runs"][0]["commit"])
    print(json.dumps({"commits": commits}))


def seal_worker(path: str, me: int, versions: int, folder: str) -> None:
    """Seal *versions* versions of this worker's own plan ``own<me>`` and as many of the plan
    ``shared`` that every worker seals; each version a distinct contract (an extra step named
    after the worker and the version). Prints the contract digests sealed."""
    from gitaudit.ledger.seals import seal_plan
    from gitaudit.plan.catalog import check_file
    from gitaudit.plan.store import PlanFile

    repo, signer = _open(path)
    barrier(folder, str(me))
    sealed: dict[str, list[str]] = {"own": [], "shared": []}
    for v in range(versions):
        for kind, name in (("own", f"own{me}"), ("shared", "shared")):
            extra = [f"w{me}v{n}" for n in range(v + 1)] if kind == "own" else [f"w{me}v{v}"]
            data = (json.dumps(tiny_plan(extra), indent=2) + "\n").encode()
            checked = check_file(PlanFile(name, f"{name}.json", data), environment=False)
            outcome = seal_plan(
                repo, signer, checked, reason=f"worker {me} v{v}", allow_weaken=True
            )
            assert outcome.commit is not None, outcome.message
            sealed[kind].append(str(checked.digest))
    print(json.dumps(sealed))


RACE_MARKERS = re.compile(
    r"fetch first|non-fast-forward|failed to update ref|cannot lock ref|atomic|"
    r"incorrect old value|stale info|but expected|the push says it was at",
)
# pre-receive refuses an audit ref that moved since the server advertised it (another push came
# first) before judging anything else: a lost race, though the hook declined the push
HOOK_MOVED = "the push says it was at"


KINDS = ("pass", "unproven", "forged", "replayed")


def _forged_run(work: Path, kind: str, mallory: Any) -> str:
    """A run commit claiming PASS for HEAD's tree on top of the local runs ref, moved there:
    *forged*, the newest genuine run.json edited to this tree and signed by an untrusted key;
    *replayed*, the newest genuine run commit's own bytes (its runner's signature kept) put on
    the current tip with the tree edited, so the signature no longer matches."""
    import pygit2
    from pygit2.enums import ObjectType

    from gitaudit.crypto.commits import create_signed_commit
    from gitaudit.git.repo import open_repo
    from gitaudit.ledger.objects import dumps, read_files, write_tree

    git = open_repo(work).git
    tip = git.references[RUNS_REF].target
    genuine = git[tip].peel(pygit2.Commit)
    files = read_files(git, genuine.tree)
    doc = json.loads(files["run.json"])
    doc["tree"] = str(git.revparse_single("HEAD^{tree}").id)
    doc["verdict"], doc["reasons"] = "PASS", []
    files["run.json"] = dumps(doc)
    tree = write_tree(git, files)
    if kind == "forged":
        oid = create_signed_commit(
            git, tree=tree, parents=[tip], message="forged\n", signer=mallory
        )
    else:  # the genuine commit's bytes, signature header and all: another tree, on the tip
        _kind, raw = git.odb.read(tip)
        header, _, body = raw.partition(b"\n\n")
        lines = [ln for ln in header.split(b"\n") if not ln.startswith((b"tree ", b"parent "))]
        top = [f"tree {tree}".encode(), f"parent {tip}".encode()]
        oid = git.odb.write(ObjectType.COMMIT, b"\n".join(top + lines) + b"\n\n" + body)
    git.references.create(RUNS_REF, oid, force=True)
    return str(oid)


def load_client(
    path: str, client: int, pushes: int, kinds: list[str], folder: str, max_attempts: int
) -> None:
    """Push *pushes* commits of branch ``c<client>``, the k-th of kind ``kinds[k]``:

    * ``pass``: a run with fresh evidence, then `git audit push` (retrying a lost race on the
      shared runs ref); the server must accept it;
    * ``unproven``: `git push --no-verify` of the branch alone, no evidence;
    * ``forged``: the branch and the runs ref carrying a PASS run signed by an untrusted key;
    * ``replayed``: the branch and the runs ref carrying a genuine run's signed bytes replayed
      for this tree.

    The server must decline every push but ``pass``; a declined commit (and run) is then dropped
    locally. Prints one record per push."""
    from gitaudit.crypto.signers import Ed25519Signer
    from gitaudit.git.repo import open_repo
    from gitaudit.run.recorder import run_plan

    rng = random.Random(SEED * 100 + client)
    _repo, signer = _open(path)
    mallory = Ed25519Signer.generate("mallory")
    work = Path(path)
    barrier(folder, str(client))
    records = []
    for k in range(pushes):
        kind = kinds[k]
        (work / f"c{client}.txt").write_text(f"client {client} push {k}\n")
        # --no-verify: skip the commit-msg hook (one interpreter start each); pushes are measured
        git(work, "commit", "-q", "-a", "--no-verify", "-m", f"c{client}: push {k}")
        sha = git(work, "rev-parse", "HEAD").strip()
        started = time.monotonic()
        record: dict[str, Any] = {"client": client, "k": k, "sha": sha, "kind": kind}
        if kind == "pass":
            recorded = run_plan(open_repo(path), PLAN_NAME, signer, jobs=1)
            record.update(verdict=recorded.verdict, run=recorded.commit)
            attempts, accepted, races, err = 0, False, 0, ""
            while attempts < max_attempts:
                attempts += 1
                proc = subprocess.run(
                    cli_argv("push"), cwd=work, capture_output=True, text=True, check=False
                )
                if proc.returncode == 0:
                    accepted = True
                    break
                err = proc.stdout + proc.stderr
                declined = ("hook declined" in err and HOOK_MOVED not in err) or any(
                    w in err for w in ("is blocked", "Traceback")
                )
                if declined or not RACE_MARKERS.search(err):
                    break  # not a race: a wrong reject, reported below, never retried away
                races += 1
                # back off for about as long as a push takes (jittered, growing): the winner of
                # the race gets out of the way instead of all of them trying again at once
                time.sleep(rng.uniform(0.0, min(3.0, 0.5 * attempts)))
            record.update(accepted=accepted, attempts=attempts, races=races, error=err[-3000:])
        else:
            refs = [f"c{client}"] + ([RUNS_REF] if kind != "unproven" else [])
            attempts, races = 0, 0
            while True:
                attempts += 1
                if kind != "unproven":
                    # as an attacker would: build on the server's newest runs, so that only the
                    # hook, never git's fast-forward rule, stands between the forgery and the ref
                    git(work, "fetch", "-q", "origin", f"+{RUNS_REF}:{RUNS_REF}")
                    record["run"] = _forged_run(work, kind, mallory)
                proc = subprocess.run(
                    ["git", "push", "--no-verify", "--atomic", "origin", *refs],
                    cwd=work,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                declined = (
                    "pre-receive hook declined" in proc.stderr and HOOK_MOVED not in proc.stderr
                )
                lost_race = not declined and RACE_MARKERS.search(proc.stderr) is not None
                if proc.returncode == 0 or not lost_race or attempts >= max_attempts:
                    break
                races += 1  # another client moved the runs ref between our fetch and push
                time.sleep(rng.uniform(0.0, min(3.0, 0.5 * attempts)))
            record.update(
                accepted=proc.returncode == 0,
                declined_by_hook=declined,
                error=proc.stderr[-3000:],
                attempts=attempts,
                races=races,
            )
            if proc.returncode != 0:
                git(work, "reset", "-q", "--hard", "HEAD~1")
                git(work, "fetch", "-q", "origin", f"+{RUNS_REF}:{RUNS_REF}")
        record["seconds"] = round(time.monotonic() - started, 3)
        records.append(record)
    print(json.dumps(records))
