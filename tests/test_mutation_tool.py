"""``mutation/run.py``'s phases: a phase over its time limit ends with every process it started
(mutmut forks workers, and a worker left behind went on testing mutants beside the next group)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from mutation.run import PhaseFailed, phase


def _running(marker: str) -> list[int]:
    """The processes running ``sleep <marker>`` (zombies have ended)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if argv[:2] == [b"sleep", marker.encode()] and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def test_a_phase_over_its_limit_ends_its_whole_process_group(tmp_path: Path) -> None:
    """The phase forks a worker (`sleep` with a marker of this test) and waits: at the limit the
    phase fails, and the worker, seen running before, is gone too."""
    marker = f"{300 + os.getpid() % 1000}.{time.monotonic_ns() % 10**6}"
    forks = (
        "import os, time\n"
        f"if os.fork() == 0:\n    os.execvp('sleep', ['sleep', {marker!r}])\n"
        "time.sleep(300)\n"
    )
    failed: list[BaseException] = []

    def run() -> None:
        try:
            phase(tmp_path, "slow", ["-c", forks], 10)
        except PhaseFailed as exc:
            failed.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 10
    while not _running(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    seen = _running(marker)
    thread.join()
    assert seen, "the worker never started"
    assert failed and "still running after 10 s" in str(failed[0])
    deadline = time.monotonic() + 30
    while _running(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _running(marker) == [], "the forked worker outlived its phase"
    assert (tmp_path / "slow.log").exists()


def test_a_phase_that_succeeds_returns_its_output(tmp_path: Path) -> None:
    assert phase(tmp_path, "quick", ["-c", "print('done')"], 60) == "done\n"
    assert (tmp_path / "quick.log").read_text() == "done\n"


def test_a_phase_that_fails_says_so_with_its_tail(tmp_path: Path) -> None:
    with pytest.raises(PhaseFailed, match="broken: exit 3"):
        phase(tmp_path, "broken", ["-c", "import sys; print('why'); sys.exit(3)"], 60)


def test_a_mutant_runs_its_fastest_tests_first() -> None:
    """mutmut stops a mutant's run at its first failing test: fastest first, a test the stats run
    never timed last, ties kept in their collected order."""
    from mutation.shim.mutate_plugin import fastest_first

    ids = ["e2e::slow", "unit::fast", "new::untimed", "unit::tie_a", "unit::tie_b"]
    durations = {"e2e::slow": 4.0, "unit::fast": 0.01, "unit::tie_a": 0.5, "unit::tie_b": 0.5}
    order = [ids[i] for i in fastest_first(ids, durations)]
    assert order == ["unit::fast", "unit::tie_a", "unit::tie_b", "e2e::slow", "new::untimed"]


def test_every_defence_of_make_mutate_defences_is_found_once_in_its_module() -> None:
    """`make mutate-defences` removes each defence by its exact code: a defence whose code was
    reworded since (found no more, or twice) would stop the run, so it is checked here, on every
    test run."""
    from mutation.defences import DEFENCES, ROOT

    for defence in DEFENCES:
        text = (ROOT / defence.path).read_text(encoding="utf-8")
        assert text.count(defence.present) == 1, (defence.name, defence.path)
        assert defence.removed != defence.present, defence.name
