"""Shared benchmark helpers: a hermetic git environment, big cached repositories, and timing.

Benchmarks must measure the code against real git on a realistically large tree, and must do it in
the same run as the git baseline they are compared with (machines differ by an order of magnitude,
so only ratios measured side by side mean anything).  Building a 50,000-file repository takes a
while, so the pristine repository is cached under the system temp directory and copied (with
``cp -a``, which keeps mtimes so the copied index stays valid) for each run.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

CACHE_ROOT = Path(tempfile.gettempdir()) / "gitaudit-bench-cache"
_LAYOUT_VERSION = 2


def hermetic_env(home: Path) -> None:
    """Point this process (and the git it runs) at a throwaway HOME and a pinned identity.

    The user's global git config could enable fsmonitor, untracked cache or hooks and skew the
    numbers either way; benchmarks measure stock git.
    """
    home.mkdir(parents=True, exist_ok=True)
    for var in [v for v in os.environ if v.startswith("GIT_")]:
        del os.environ[var]
    os.environ.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
            "GIT_AUTHOR_NAME": "Bench",
            "GIT_AUTHOR_EMAIL": "bench@example.test",
            "GIT_COMMITTER_NAME": "Bench",
            "GIT_COMMITTER_EMAIL": "bench@example.test",
            "LC_ALL": "C",
        }
    )
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")


def git(cwd: Path, *args: str) -> str:
    """Run git in *cwd*, failing loudly; return stdout."""
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def big_repo(files: int = 50_000, dirs: int = 400) -> Path:
    """Return a cached, committed repository of *files* small files spread over *dirs* directories.

    The directory tree is two levels deep (``dNN/sMM/``) like a real source tree, with a few
    ignored build products and an executable script per top-level directory.  Built once and kept
    under the temp dir; call :func:`copy_repo` before mutating it.
    """
    path = CACHE_ROOT / f"repo-v{_LAYOUT_VERSION}-{files}-{dirs}"
    if (path / ".git" / "gitaudit-bench-complete").exists():
        return path
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    top = max(1, int(dirs**0.5))
    per_dir = max(1, files // dirs)
    written = 0
    for d in range(dirs):
        sub = path / f"d{d % top:02d}" / f"s{d // top:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        count = per_dir if d < dirs - 1 else files - written
        for f in range(count):
            (sub / f"file{f:04d}.txt").write_text(f"dir {d} file {f}\n" * (1 + f % 7))
        written += count
    (path / ".gitignore").write_text("*.o\nbuild/\n")
    git(path, "add", "-A")
    # No background `gc --auto` racing with later copies; pack synchronously like a real clone.
    git(path, "-c", "gc.auto=0", "commit", "-q", "-m", "big")
    git(path, "gc", "-q")
    # A later `git status` refreshes racily-clean entries, as on any developer machine.
    time.sleep(1.1)
    git(path, "status", "--porcelain")
    (path / ".git" / "gitaudit-bench-complete").write_text("ok\n")
    return path


def copy_repo(src: Path, dst: Path) -> Path:
    """Copy a repository preserving mtimes (so stat data in its index still matches)."""
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)
    return dst


class Stat(float):
    """A median in seconds that also carries its spread: the fastest and the slowest round.

    It is a float (the median), so ratios and targets compute as before; printing it with
    :func:`spread` shows the rounds it summarises."""

    lo: float
    hi: float
    rounds: tuple[float, ...]

    def __new__(cls, times: Sequence[float]) -> Stat:
        if not times:
            raise ValueError("no timed rounds")
        stat = super().__new__(cls, statistics.median(times))
        stat.lo, stat.hi, stat.rounds = min(times), max(times), tuple(times)
        return stat


def spread(value: float) -> str:
    """``[min-max]`` of a :class:`Stat`'s rounds in ms (empty for a plain float)."""
    if isinstance(value, Stat) and len(value.rounds) > 1:
        return f"[{value.lo * 1000:.0f}-{value.hi * 1000:.0f}]"
    return ""


def interleaved(
    fns: Mapping[str, Callable[[], object]], rounds: int, warmup: int = 1
) -> dict[str, Stat]:
    """Median (with spread) seconds of each callable, calling them in turn for *rounds* rounds
    (after *warmup* untimed rounds), so that load from other processes hits all of them alike.

    A callable may prepare its own state untimed and return the seconds it measured itself (a
    float); otherwise its whole call is timed."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(warmup + rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            got = fn()
            elapsed = time.perf_counter() - start
            if r >= warmup:
                times[name].append(got if isinstance(got, float) else elapsed)
    return {name: Stat(ts) for name, ts in times.items()}


def median_time(fn: Callable[[], object], runs: int = 5) -> float:
    """Median wall time of *fn* in seconds over *runs* calls (one untimed warm-up first)."""
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_once(fn: Callable[[], object]) -> float:
    """Wall time of one call of *fn* in seconds."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start
