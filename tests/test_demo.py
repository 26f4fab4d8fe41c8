"""`make demo` runs the whole job end to end; this re-runs it and checks what it shows."""

from __future__ import annotations

import subprocess
import sys


def test_demo_runs_end_to_end() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gitaudit.demo"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for expected in (
        "sealed plan 'app' v1 (initial)",
        "app: PASS — 2/2 steps verified",
        "PASS  tree",
        "refs/audit/runs/app: [new reference]",
        "app: FAIL — 1/2 steps verified",
        "gitaudit: push of refs/heads/main to refs/heads/main",
        "remote: gitaudit: update of refs/heads/main",
        "(pre-receive hook declined)",
        "demo complete",
    ):
        assert expected in out, expected
