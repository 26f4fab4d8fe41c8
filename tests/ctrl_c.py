"""Ctrl-C sent to a real `git audit run` once a check has started, as a terminal sends it.

The run's test (tests/run/test_run.py) and the end-to-end one (tests/e2e/) stop the same real
process the same way, and each judges what the run left behind by its own means.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def _default_sigint() -> None:
    """In the child: SIGINT as a terminal delivers it. A shell without job control starts
    background jobs with SIGINT ignored, which Python then keeps ignoring."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ctrl_c_once_the_check_runs(path: Path, started: Path, step: str = "long") -> tuple[int, str]:
    """Start `git audit run` in *path*, wait until it says step *step* is running and its check
    has written *started* (outside the checkout: the check itself runs), send one SIGINT. The
    exit status and all the run wrote to stderr; the test fails if the run does not stop."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitaudit", "run"],
        cwd=path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_default_sigint,  # noqa: PLW1509 (only signal.signal, before exec)
    )
    assert proc.stderr is not None
    seen = b""
    deadline = time.monotonic() + 30
    while f"{step} running".encode() not in seen and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
    assert f"{step} running".encode() in seen, seen.decode()
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists(), seen.decode()
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail("SIGINT did not stop `git audit run`: " + (seen + err).decode())
    return proc.returncode, (seen + err).decode()
