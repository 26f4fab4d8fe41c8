"""A process holding a secret keeps its memory to itself (:func:`gitaudit.secret.keep_private`).

Real processes, real signals: a child raises its own core-size limit as a check would raise its
parent's (``prlimit`` between processes of one user), then is sent ``SIGSEGV``. The kernel's
``core_pattern`` decides where a core goes; where it is a plain file name (``core``, relative to
the crashing process's folder) the control shows the file is written without the call.
"""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

PR_GET_DUMPABLE = 3
CHILD = """
import resource, sys, time
from gitaudit.secret import keep_private
if sys.argv[1] == "private":
    keep_private()
    keep_private()  # once is enough; twice is harmless
secret = b"SECRET-" + b"k" * 32  # what a key in memory would be
resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
print("ready", flush=True)
time.sleep(60)
"""


def _core_pattern() -> str:
    return Path("/proc/sys/kernel/core_pattern").read_text().strip()


def _dumpable_after(mode: str) -> int:
    code = (
        "import ctypes, sys\n"
        "from gitaudit.secret import keep_private\n"
        f"if {mode == 'private'!r}: keep_private()\n"
        f"print(ctypes.CDLL(None).prctl({PR_GET_DUMPABLE}, 0, 0, 0, 0))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout)


@pytest.mark.parametrize("mode", ["private", "control"])
def test_a_private_process_leaves_no_core_file(mode: str, tmp_path: Path) -> None:
    hard = resource.getrlimit(resource.RLIMIT_CORE)[1]
    if hard != resource.RLIM_INFINITY:  # the child could not raise it: nothing to show
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.RLIM_INFINITY))
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, mode], cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGSEGV)
    assert proc.wait(timeout=60) == -signal.SIGSEGV
    cores = [p.name for p in tmp_path.iterdir()]
    if mode == "private":
        assert cores == []
        assert _dumpable_after(mode) == 0
    elif _core_pattern() == "core":  # the control: the same crash writes the memory out
        assert any(name.startswith("core") for name in cores), cores
    else:  # cores go elsewhere here: the control shows the process could have dumped one
        assert _dumpable_after(mode) == 1


STEPS = {
    "a check starts": "from gitaudit.checks.process import run_bounded\n"
    "run_bounded(['true'], cwd=Path('.'))\n",
    "a signing key is read": "from gitaudit.crypto.keystore import generate_key, load_signer\n"
    "load_signer(generate_key('k', Path(sys.argv[1])).private_path)\n",
}


@pytest.mark.parametrize("step", sorted(STEPS))
def test_a_process_is_kept_private_once(step: str, tmp_path: Path) -> None:
    code = (
        "import ctypes, sys\n"
        "from pathlib import Path\n"
        "libc = ctypes.CDLL(None)\n"
        f"before = libc.prctl({PR_GET_DUMPABLE}, 0, 0, 0, 0)\n"
        f"{STEPS[step]}"
        f"print(before, libc.prctl({PR_GET_DUMPABLE}, 0, 0, 0, 0))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "0"]
