"""The README's session transcript is real: re-run it and compare, modulo key- and clock-dependent
ids (commit ids, key fingerprints, durations, the home folder)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
MARK = "@@gitaudit-transcript@@"


def transcript() -> list[tuple[str, list[str]]]:
    text = README.read_text()
    block = text.split("```console\n", 1)[1].split("```", 1)[0]
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return steps


def normalise(line: str, home: str) -> str:
    line = line.replace(home, "~")
    line = re.sub(r"SHA256:[A-Za-z0-9+/]{43}", "SHA256:<key>", line)
    line = re.sub(r"\b(as|evidence) [0-9a-f]{12}\b", r"\1 <commit>", line)
    line = re.sub(r"\(\d+\.\ds\)", "(<secs>)", line)
    return line.rstrip()


def test_readme_transcript_is_real(tmp_path: Path, hermetic: Path) -> None:
    steps = transcript()
    assert len(steps) >= 8
    script = ["set +e"]
    for i, (cmd, _) in enumerate(steps):
        script.append(f"echo '{MARK} {i}'")
        script.append(f"{cmd} 2>&1")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONUNBUFFERED": "1",
    }
    proc = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    chunks = proc.stdout.split(f"{MARK} ")[1:]
    assert len(chunks) == len(steps), proc.stdout + proc.stderr
    home = str(hermetic)
    for (cmd, expected), chunk in zip(steps, chunks, strict=True):
        actual = chunk.split("\n", 1)[1].rstrip("\n").splitlines() if "\n" in chunk else []
        assert [normalise(a, home) for a in actual] == [normalise(e, "~") for e in expected], cmd
