"""Helpers for the ledger, run, gate, verify and hook benchmarks.

* :func:`bench_env` makes the process hermetic (``_util.hermetic_env`` plus ``GITAUDIT_HOME``).
* :func:`init_audited_repo` does what a user does: ``git audit init``, write the plan, ``plan
  seal``, commit the plan.
* :func:`generate_runs` appends thousands of signed run commits in-process: one evidence tree per
  distinct (fake) workspace tree id, commits signed with the fixture's runner key and chained by
  parent, the ref moved once by compare-and-swap at the end.
* :func:`ledger_fixture` and :func:`status_fixture` cache the big fixtures under
  ``/tmp/gitaudit-bench-cache`` (keyed by :data:`LEDGER_VERSION`); :func:`checkout_fixture`
  copies one into a scratch directory and points the environment at the copy.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import CACHE_ROOT, Stat, big_repo, copy_repo, git, hermetic_env, interleaved, spread

__all__ = ["Stat", "interleaved"]  # re-exported for the benchmarks

# Bump when the fixture layout or the generator changes: old caches are then ignored.
LEDGER_VERSION = "ledger-v1"
RUNS = 20_000
DISTINCT_TREES = 4_000
PLAN = "default"
REF = f"refs/audit/runs/{PLAN}"

PYTHON = sys.executable
GIT_AUDIT = str(Path(sys.executable).with_name("git-audit"))
ZERO = "0" * 40


# ------------------------------------------------------------------------------ environment


def bench_env(root: Path) -> Path:
    """Hermetic HOME under *root*; gitaudit keys under ``<root>/home/gitaudit``. Returns HOME."""
    home = root / "home"
    for var in [v for v in os.environ if v.startswith("GITAUDIT_")]:
        del os.environ[var]
    hermetic_env(home)
    os.environ["GITAUDIT_HOME"] = str(home / "gitaudit")
    # An installed package has its bytecode compiled; a sandbox with PYTHONDONTWRITEBYTECODE
    # would make every measured process compile gitaudit from source (~+150 ms). Cache the
    # bytecode outside the source tree instead.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(CACHE_ROOT / "pycache")
    return home


def audit(repo: Path, *args: str, check: bool = True, stdin: str | None = None) -> str:
    """Run ``git-audit ARGS`` in *repo*; return stdout (RuntimeError on failure when *check*)."""
    proc = subprocess.run(
        [GIT_AUDIT, *args], cwd=repo, capture_output=True, text=True, input=stdin, check=False
    )
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"git audit {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
        )
    return proc.stdout


def plan_doc(steps: Sequence[dict[str, Any]], task: str = "benchmark plan") -> dict[str, Any]:
    """A plan with one must requirement, covered by every step."""
    return {
        "task": task,
        "requirements": [{"id": "REQ-001", "description": "the benchmark passes"}],
        "steps": [{"depends_on": [], "covers": ["REQ-001"], **s} for s in steps],
    }


def run_steps(n: int, argv: Sequence[str]) -> list[dict[str, Any]]:
    """*n* independent steps, each with the one behavioural check *argv* and no outputs."""
    return [{"id": f"s{i:03d}", "verify": [{"type": "run", "argv": list(argv)}]} for i in range(n)]


def init_audited_repo(repo: Path, doc: dict[str, Any], *, fresh: bool = True) -> None:
    """``git audit init`` in *repo* (created with one commit when *fresh*), write the plan
    *doc*, seal it and commit it (``--no-verify``: the commit-msg hook is not measured here)."""
    if fresh:
        repo.mkdir(parents=True)
        git(repo, "init", "-q", "-b", "main")
        (repo / "README").write_text("benchmark fixture\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "initial")
    audit(repo, "init")
    (repo / ".gitaudit" / "plans" / f"{PLAN}.json").write_text(json.dumps(doc, indent=2) + "\n")
    audit(repo, "plan", "seal")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", "seal the benchmark plan")


# ------------------------------------------------------------------------------ generation


def fake_tree_id(i: int) -> str:
    return hashlib.sha1(f"gitaudit-bench-tree-{i}".encode()).hexdigest()


def generate_runs(repo_path: Path, count: int, distinct: int, *, seed: int = 0) -> list[str]:
    """Append *count* signed run commits to ``refs/audit/runs/default`` of *repo_path*.

    The newest existing run is the template (a real ``git audit run``): for each of *distinct*
    fake workspace tree ids its evidence tree is rewritten (``run.json``, ``summary.md``) and
    stored once; the commits pick trees so that every id is used and the rest at random.
    Returns the tree ids in use.
    """
    import pygit2

    from gitaudit.crypto.commits import create_signed_commit
    from gitaudit.crypto.keystore import keys_dir, load_signer
    from gitaudit.git.repo import open_repo
    from gitaudit.ledger.objects import dumps, read_files, write_tree
    from gitaudit.ledger.refs import cas_update, read_ref

    repo = open_repo(repo_path)
    signer = load_signer(keys_dir() / "default")
    tip = read_ref(repo.git, REF)
    if tip is None:
        raise RuntimeError(f"{REF} is empty: record one real run first (the template)")
    template = repo.git[tip]
    assert isinstance(template, pygit2.Commit)
    files = read_files(repo.git, template.tree)
    doc = json.loads(files["run.json"])
    real_tree = doc["tree"]
    summary = files["summary.md"].decode()
    trees: list[pygit2.Oid] = []
    ids: list[str] = []
    for i in range(distinct):
        tid = fake_tree_id(i)
        doc["tree"] = tid
        doc["head"] = hashlib.sha1(f"head-{i}".encode()).hexdigest()
        doc["purity"] = {"before": tid, "after": tid, "changed": []}
        files["run.json"] = dumps(doc)
        files["summary.md"] = summary.replace(real_tree, tid).encode()
        trees.append(write_tree(repo.git, files))
        ids.append(tid)
    rng = random.Random(seed)
    picks = list(range(distinct)) + [rng.randrange(distinct) for _ in range(count - distinct)]
    rng.shuffle(picks)
    digest = doc["contract_digest"]
    start = int(time.time()) - count - 3600
    parent = tip
    for n, pick in enumerate(picks):
        when = pygit2.Signature("Bench", "bench@example.test", start + n, 0)
        tid = ids[pick]
        message = (
            f"audit({PLAN}): PASS {tid[:12]} — 1/1 steps\n\n"
            f"Audit-Plan: {PLAN}\nAudit-Tree: {tid}\n"
            f"Audit-Contract: {digest}\nAudit-Verdict: PASS\n"
        )
        parent = create_signed_commit(
            repo.git,
            tree=trees[pick],
            parents=[parent],
            message=message,
            signer=signer,
            author=when,
            committer=when,
        )
    cas_update(repo.git, REF, parent, tip, f"bench: {count} generated runs")
    return ids


# ------------------------------------------------------------------------------ fixtures


def _ledger_key() -> str:
    """The cache key: this generator's version and the run record format it copies."""
    from gitaudit.ledger.records import RUN_FORMAT

    return f"{LEDGER_VERSION}-{RUN_FORMAT.replace('/', '_').replace('.', '_')}"


def _fresh(path: Path) -> bool:
    return (path / "complete").exists()


def ledger_fixture(runs: int = RUNS, distinct: int = DISTINCT_TREES) -> Path:
    """A cached directory holding ``home/`` (with the runner/sealer key) and ``repo/``: a small
    repository whose plan (one step, ``true``) is sealed, with one real passing run for HEAD's
    tree followed by *runs* generated runs over *distinct* fake tree ids, all packed.
    ``tree_ids.json`` lists the fake ids and ``head_tree`` holds HEAD's tree."""
    path = CACHE_ROOT / f"{_ledger_key()}-{runs}-{distinct}"
    if _fresh(path):
        return path
    if path.exists():
        shutil.rmtree(path)
    # Loose-object writes cost ~1.5 ms each on a journaling disk and ~0.1 ms on tmpfs: build
    # in /dev/shm when there is one, then keep only the packed result in the cache.
    shm = Path("/dev/shm")
    build = Path(
        tempfile.mkdtemp(prefix="gitaudit-ledger-", dir=shm if os.access(shm, os.W_OK) else None)
    )
    saved = dict(os.environ)
    try:
        print(f"building the ledger fixture ({runs} runs) for {path} ...", file=sys.stderr)
        started = time.perf_counter()
        bench_env(build)
        repo = build / "repo"
        init_audited_repo(repo, plan_doc(run_steps(1, ["true"])))
        audit(repo, "run", "--jobs", "1")
        ids = generate_runs(repo, runs, distinct)
        git(repo, "-c", "gc.auto=0", "repack", "-adq")
        git(repo, "prune-packed")
        # the fixture starts without a lookup index; benchmarks decide what is warm
        for name in ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm"):
            (repo / ".git" / "gitaudit" / name).unlink(missing_ok=True)
        (build / "tree_ids.json").write_text(json.dumps(ids))
        (build / "head_tree").write_text(git(repo, "rev-parse", "HEAD^{tree}").strip() + "\n")
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", str(build), str(path)], check=True)
        print(f"  built in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        (path / "complete").write_text("ok\n")
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(build, ignore_errors=True)
    return path


def status_fixture(files: int = 50_000, runs: int = RUNS, distinct: int = DISTINCT_TREES) -> Path:
    """A cached directory with ``home/`` and ``repo/``: the *files*-file repository of
    ``_util.big_repo`` with the one-step plan sealed and committed, a real passing ``git audit
    run`` for HEAD, then *runs* generated runs of other trees on top of it, all packed: HEAD's
    run lies *runs* commits deep, the worst case for the gate's lookup (``runs=0``: the 1-run
    ledger). ``head_tree`` holds HEAD's tree."""
    source = big_repo(files)  # built in the caller's environment, as bench_fingerprint does
    path = CACHE_ROOT / f"status-{_ledger_key()}-{runs}-{distinct}-{source.name}"
    if _fresh(path):
        return path
    if path.exists():
        shutil.rmtree(path)
    shm = Path("/dev/shm")
    build = Path(
        tempfile.mkdtemp(prefix="gitaudit-status-", dir=shm if os.access(shm, os.W_OK) else None)
    )
    saved = dict(os.environ)
    try:
        print(f"building the status fixture ({files} files, {runs} runs) ...", file=sys.stderr)
        started = time.perf_counter()
        bench_env(build)
        repo = copy_repo(source, build / "repo")
        init_audited_repo(repo, plan_doc(run_steps(1, ["true"])), fresh=False)
        audit(repo, "run", "--jobs", "1")
        if runs:
            generate_runs(repo, runs, min(distinct, runs))
        git(repo, "-c", "gc.auto=0", "repack", "-adq")
        git(repo, "prune-packed")
        for name in ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm", "memo.json"):
            (repo / ".git" / "gitaudit" / name).unlink(missing_ok=True)
        (build / "head_tree").write_text(git(repo, "rev-parse", "HEAD^{tree}").strip() + "\n")
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", str(build), str(path)], check=True)
        print(f"  built in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        (path / "complete").write_text("ok\n")
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(build, ignore_errors=True)
    return path


def plan_fixture(label: str, doc: dict[str, Any], files: int = 50_000) -> Path:
    """A cached directory with ``home/`` and ``repo/``: the *files*-file repository of
    ``_util.big_repo`` with the plan *doc* sealed and committed and one real ``git audit run``
    recorded for HEAD (its verdict whatever the plan gives)."""
    source = big_repo(files)
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:12]
    path = CACHE_ROOT / f"plan-{label}-{digest}-{_ledger_key()}-{source.name}"
    if _fresh(path):
        return path
    if path.exists():
        shutil.rmtree(path)
    shm = Path("/dev/shm")
    build = Path(
        tempfile.mkdtemp(prefix="gitaudit-plan-", dir=shm if os.access(shm, os.W_OK) else None)
    )
    saved = dict(os.environ)
    try:
        print(f"building the {label} fixture ({files} files) ...", file=sys.stderr)
        started = time.perf_counter()
        bench_env(build)
        repo = copy_repo(source, build / "repo")
        init_audited_repo(repo, doc, fresh=False)
        audit(repo, "run", check=False)
        git(repo, "-c", "gc.auto=0", "repack", "-adq")
        git(repo, "prune-packed")
        for name in ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm", "memo.json"):
            (repo / ".git" / "gitaudit" / name).unlink(missing_ok=True)
        (build / "head_tree").write_text(git(repo, "rev-parse", "HEAD^{tree}").strip() + "\n")
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", str(build), str(path)], check=True)
        print(f"  built in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        (path / "complete").write_text("ok\n")
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(build, ignore_errors=True)
    return path


def checkout_fixture(fixture: Path, scratch: Path, *, link_worktree: bool = False) -> Path:
    """Copy *fixture* (``home/`` and ``repo/``) into *scratch*, make the environment point at the
    copy and return the copied repository.

    With *link_worktree* the work tree files are hard links to the cached ones (same inodes, so
    git's stat data stays valid, and 50,000 files take seconds instead of a minute) and only
    ``.git`` is copied: for benchmarks that never write the work tree.
    """
    scratch.mkdir(parents=True, exist_ok=True)
    for part in ("home", "repo"):
        shutil.rmtree(scratch / part, ignore_errors=True)
    subprocess.run(["cp", "-a", str(fixture / "home"), str(scratch / "home")], check=True)
    src, dst = fixture / "repo", scratch / "repo"
    if link_worktree:
        subprocess.run(["cp", "-al", str(src), str(dst)], check=True)
        shutil.rmtree(dst / ".git")
        subprocess.run(["cp", "-a", str(src / ".git"), str(dst / ".git")], check=True)
    else:
        subprocess.run(["cp", "-a", str(src), str(dst)], check=True)
    bench_env(scratch)
    if link_worktree and git(dst, "status", "--porcelain", "--untracked-files=no").strip():
        # a file written through a link changes the cached fixture itself: every later copy
        # would judge another tree than HEAD's (a run would prove the edit, not the commit)
        raise RuntimeError(
            f"the cached fixture {fixture} has tracked files changed (something wrote through a "
            f"hard link of a copy); delete it and run again to rebuild it"
        )
    return dst


# ------------------------------------------------------------------------------ timing


def timed_run(
    argv: Sequence[str],
    cwd: Path,
    *,
    stdin: str | None = None,
    expect: int | None = 0,
    env: Mapping[str, str] | None = None,
) -> float:
    """Wall seconds of one subprocess; RuntimeError when its exit code is not *expect*."""
    start = time.perf_counter()
    proc = subprocess.run(
        list(argv),
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        env=None if env is None else dict(env),
    )
    elapsed = time.perf_counter() - start
    if expect is not None and proc.returncode != expect:
        raise RuntimeError(
            f"{' '.join(argv)} exited {proc.returncode} (expected {expect}):\n"
            f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )
    return elapsed


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


def verdict_line(label: str, value: float, target: float, baseline: float | None = None) -> bool:
    """Print one result row (median value with its [min-max] spread, ratio to the baseline,
    target, PASS/FAIL); True on PASS."""
    ok = value <= target
    ratio = f"{value / baseline:6.2f}x baseline" if baseline else " " * 17
    print(
        f"  {label:<52} {ms(value)} {spread(value):>13}  {ratio}  target <= "
        f"{ms(target).strip():>10}  {'PASS' if ok else 'FAIL'}"
    )
    return ok


def info_line(label: str, value: float, baseline: float | None = None, note: str = "") -> None:
    ratio = f"{value / baseline:6.2f}x baseline" if baseline else " " * 17
    print(f"  {label:<52} {ms(value)} {spread(value):>13}  {ratio}  {note}".rstrip())


# Read at import: bench_env() clears GITAUDIT_* from the environment.
QUICK = os.environ.get("GITAUDIT_BENCH_QUICK", "") not in ("", "0")


def quick() -> bool:
    """Smaller sizes for a quick look (``GITAUDIT_BENCH_QUICK=1``); defaults are the real ones."""
    return QUICK


def finish(results: Sequence[bool]) -> int:
    ok = all(results)
    print(f"\n{'PASS' if ok else 'FAIL'} ({sum(results)}/{len(results)} targets met)")
    return 0 if ok else 1
