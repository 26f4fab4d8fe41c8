"""Helpers for the scale-out benchmarks (bench_prereceive, bench_fetch, bench_runners).

* :func:`rounds` times callables interleaved and keeps every sample, so a benchmark can print the
  median beside the best and the worst (the machine is shared: one slow round says little, a slow
  median says more);
* :func:`append_run` writes one signed run commit for a given tree on top of a runs ref, as
  ``_ledger_util.generate_runs`` writes its runs: objects directly, the ref moved once by
  compare-and-swap (or not at all, for a push that is still to be judged);
* :func:`bare_server` builds a bare repository holding a big tree, a ledger of N runs grafted in
  from ``_ledger_util.ledger_fixture``, the sealed plan committed on top of the big tree, and the
  server's pre-receive hook.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ledger_util import GIT_AUDIT, PLAN, REF, ZERO, audit, ledger_fixture
from _util import CACHE_ROOT, git

if TYPE_CHECKING:
    from gitaudit.crypto.signers import Signer

SCALE_VERSION = "scale-v1"


@dataclass(frozen=True)
class Sample:
    median: float
    best: float
    worst: float

    def row(self, label: str, base: float | None = None, note: str = "") -> str:
        ratio = f"{self.median / base:6.2f}x" if base else "       "
        return (
            f"  {label:<46} median {self.median * 1000:8.1f} ms  {ratio}  "
            f"best {self.best * 1000:7.1f}  worst {self.worst * 1000:7.1f} ms  {note}"
        ).rstrip()


def sample(times: list[float]) -> Sample:
    return Sample(statistics.median(times), min(times), max(times))


def rounds(
    fns: Mapping[str, Callable[[], float | None]],
    count: int,
    warmup: int = 1,
    before: Callable[[int], None] | None = None,
) -> dict[str, Sample]:
    """Call every function in turn, *warmup* + *count* rounds; keep the timed rounds. A function
    may return its own measured seconds (for work it must set up untimed), else its wall time
    counts. *before* (untimed) runs at the start of each round."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(warmup + count):
        if before is not None:
            before(r)
        for name, fn in fns.items():
            start = time.perf_counter()
            own = fn()
            took = own if own is not None else time.perf_counter() - start
            if r >= warmup:
                times[name].append(took)
    return {name: sample(ts) for name, ts in times.items()}


def run_seconds(
    argv: list[str],
    cwd: Path,
    *,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    expect: int = 0,
) -> float:
    """Wall seconds of one subprocess; RuntimeError when its exit code is not *expect*."""
    start = time.perf_counter()
    proc = subprocess.run(
        argv,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    took = time.perf_counter() - start
    if proc.returncode != expect:
        raise RuntimeError(
            f"{' '.join(argv)} exited {proc.returncode} (expected {expect}):\n"
            f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )
    return took


def signer_of(fixture: Path) -> Signer:
    """The runner/sealer key of a ledger fixture (``<fixture>/home/gitaudit/keys/default``)."""
    from gitaudit.crypto.keystore import load_signer

    return load_signer(fixture / "home" / "gitaudit" / "keys" / "default")


def append_run(
    gitdir: Path, tree: str, signer: Signer, *, head: str | None = None, move: bool = True
) -> tuple[str, str]:
    """A PASS run of the plan for *tree* on top of ``refs/audit/runs/default`` of *gitdir*,
    copied from the tip's run (its evidence rewritten for *tree*), signed by *signer*. Returns
    (old tip, new commit); the ref moves to it when *move*."""
    import pygit2

    from gitaudit.crypto.commits import create_signed_commit
    from gitaudit.ledger.objects import dumps, read_files, write_tree
    from gitaudit.ledger.refs import cas_update, read_ref

    repo = pygit2.Repository(str(gitdir))
    tip = read_ref(repo, REF)
    assert tip is not None, f"{gitdir}: {REF} is empty"
    template = repo[tip].peel(pygit2.Commit)
    files = read_files(repo, template.tree)
    doc = json.loads(files["run.json"])
    old_tree = doc["tree"]
    doc["tree"] = tree
    doc["head"] = head or hashlib.sha1(f"head-{tree}".encode()).hexdigest()
    doc["purity"] = {"before": tree, "after": tree, "changed": []}
    files["run.json"] = dumps(doc)
    files["summary.md"] = files["summary.md"].decode().replace(old_tree, tree).encode()
    when = pygit2.Signature("Bench", "bench@example.test", int(time.time()), 0)
    commit = create_signed_commit(
        repo,
        tree=write_tree(repo, files),
        parents=[tip],
        message=(
            f"audit({PLAN}): PASS {tree[:12]} — 1/1 steps\n\nAudit-Plan: {PLAN}\n"
            f"Audit-Tree: {tree}\nAudit-Contract: {doc['contract_digest']}\nAudit-Verdict: PASS\n"
        ),
        signer=signer,
        author=when,
        committer=when,
    )
    if move:
        cas_update(repo, REF, commit, tip, "bench: one more run")
    return str(tip), str(commit)


def graft_packs(src_gitdir: Path, dst_gitdir: Path) -> None:
    """Copy the packs of *src_gitdir* into *dst_gitdir* and point its audit refs where the
    source's are."""
    for pack in (src_gitdir / "objects" / "pack").glob("pack-*"):
        shutil.copy2(pack, dst_gitdir / "objects" / "pack" / pack.name)
    for ref in ("refs/audit/plans", REF):
        git(dst_gitdir, "update-ref", ref, git(src_gitdir, "rev-parse", ref).strip())


@dataclass(frozen=True)
class Server:
    """A bare server with a big tree and a ledger, and one push of it waiting to be judged."""

    path: Path  # the bare repository (hooks/pre-receive installed)
    runs: int  # runs on its ledger
    stdin: str  # the pre-receive input of the push: the branch and one new run for its tree
    fixture: Path  # the ledger fixture it was grafted from (home/ holds the key)


def bare_server(big: Path, runs: int, distinct: int) -> Server:
    """Cached: a bare clone of the big repository *big* with the ledger of ``ledger_fixture(runs,
    distinct)``, its sealed plan committed on top of the big tree (commit C, not yet on any
    ref) and one run for C's tree on top of the ledger (not on the ref either): the objects of
    a push of ``main`` with its evidence, already received. ``stdin`` is that push's
    pre-receive input."""
    ledger = ledger_fixture(runs, distinct)
    path = CACHE_ROOT / f"{SCALE_VERSION}-server-{ledger.name}-{big.name}"
    done = path / "bench-complete.json"
    if done.exists():
        return Server(path / "server.git", runs, json.loads(done.read_text())["stdin"], ledger)
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    print(f"building the server fixture ({runs} runs) in {path} ...", file=sys.stderr)
    started = time.perf_counter()
    server = path / "server.git"
    git(path, "clone", "-q", "--bare", "--no-hardlinks", str(big), str(server))
    git(server, "config", "gc.auto", "0")
    src = ledger / "repo" / ".git"
    graft_packs(src, server)
    git(server, "config", "audit.rootKey", git(src, "config", "audit.rootKey").strip())
    # the push: C = the big tree plus the sealed plan file, then one run for C's tree
    plan = (ledger / "repo" / ".gitaudit" / "plans" / f"{PLAN}.json").read_bytes()
    blob = (
        subprocess.run(
            ["git", "hash-object", "-w", "--stdin"],
            cwd=server,
            input=plan,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )
    index = {**os.environ, "GIT_INDEX_FILE": str(path / "tmp-index")}
    base = git(server, "rev-parse", "refs/heads/main").strip()
    for argv in (
        ["read-tree", base],
        ["update-index", "--add", "--cacheinfo", f"100644,{blob},.gitaudit/plans/{PLAN}.json"],
    ):
        subprocess.run(["git", *argv], cwd=server, env=index, check=True)
    tree = subprocess.run(
        ["git", "write-tree"], cwd=server, env=index, capture_output=True, text=True, check=True
    ).stdout.strip()
    (path / "tmp-index").unlink()
    commit = git(server, "commit-tree", tree, "-p", base, "-m", "seal the plan").strip()
    old_runs, run = append_run(server, tree, signer_of(ledger), head=commit, move=False)
    stdin = f"{old_runs} {run} {REF}\n{base} {commit} refs/heads/main\n"
    git(server, "-c", "gc.auto=0", "repack", "-dq")  # the push's objects: one more pack
    done.write_text(json.dumps({"stdin": stdin, "tree": tree}))
    print(f"  built in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    return Server(server, runs, stdin, ledger)


def server_copy(server: Server, scratch: Path, *, evidence_first: bool = False) -> Server:
    """A copy of the cached *server* in *scratch*, with this environment's pre-receive hook
    (the cache is never written: the hook's lookup index goes to the copy). With
    *evidence_first* the pushed run is already on the server's runs ref (as after an earlier
    `git audit push --evidence-only`, a CI job's) and the push is the branch alone."""
    dst = scratch / f"server-{server.runs}{'-evidence-first' if evidence_first else ''}.git"
    subprocess.run(["cp", "-a", str(server.path), str(dst)], check=True)
    audit(dst, "hooks", "install", "--server")
    stdin = server.stdin
    if evidence_first:
        runs_line, branch_line = stdin.splitlines()
        old, new, ref = runs_line.split()
        git(dst, "update-ref", ref, new, old)
        stdin = branch_line + "\n"
    return Server(dst, server.runs, stdin, server.fixture)


def hook(server: Server) -> Callable[[], float]:
    """The server's installed pre-receive hook judging the push, as receive-pack runs it
    (``GIT_DIR`` set, the update lines on stdin); it must accept."""
    argv = [str(server.path / "hooks" / "pre-receive")]
    env = {"GIT_DIR": str(server.path)}
    return lambda: run_seconds(argv, server.path, stdin=server.stdin, env=env)


def index_files(gitdir: Path) -> list[Path]:
    return [p for p in (gitdir / "gitaudit").glob("index.sqlite*") if p.is_file()]


def du(path: Path) -> int:
    """Bytes under *path* (files only)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


__all__ = [
    "GIT_AUDIT",
    "ZERO",
    "Sample",
    "Server",
    "append_run",
    "bare_server",
    "du",
    "hook",
    "index_files",
    "rounds",
    "run_seconds",
    "sample",
    "server_copy",
    "signer_of",
]
