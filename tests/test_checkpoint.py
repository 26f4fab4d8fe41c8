"""The fault tests' pause points are inert unless armed, and then they only pause."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from gitaudit import checkpoint


def test_unarmed_points_do_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(checkpoint.POINTS_VARIABLE, raising=False)
    monkeypatch.setenv(checkpoint.DIR_VARIABLE, str(tmp_path))
    checkpoint.reached("run.objects-written", "x")  # no points listed
    monkeypatch.setenv(checkpoint.POINTS_VARIABLE, "run.ref-moved")
    checkpoint.reached("run.objects-written", "x")  # another point listed
    monkeypatch.setenv(checkpoint.POINTS_VARIABLE, "run.objects-written")
    monkeypatch.setenv(checkpoint.DIR_VARIABLE, str(tmp_path / "missing"))
    checkpoint.reached("run.objects-written", "x")  # no such folder: nothing written anywhere
    assert list(tmp_path.iterdir()) == []


def test_an_armed_point_says_so_and_waits_to_be_let_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(checkpoint.DIR_VARIABLE, str(tmp_path))
    monkeypatch.setenv(checkpoint.POINTS_VARIABLE, "push.pushed,run.ref-moved")
    done = threading.Event()

    def reach() -> None:
        checkpoint.reached("run.ref-moved", "abc123")
        done.set()

    thread = threading.Thread(target=reach)
    thread.start()
    marker = tmp_path / "run.ref-moved.reached"
    while not marker.exists():
        assert thread.is_alive()
    assert not done.wait(0.2)  # paused
    (tmp_path / "run.ref-moved.go").touch()
    thread.join(timeout=60)
    assert done.is_set()
    assert marker.read_text().split() == [str(os.getpid()), "abc123"]


def test_every_point_in_the_code_is_declared() -> None:
    root = Path(checkpoint.__file__).parent
    used = set()
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        used |= {p for p in checkpoint.POINTS if f'checkpoint.reached("{p}"' in text}
    assert used == set(checkpoint.POINTS)
