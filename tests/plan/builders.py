"""Small valid plans to mutate in tests."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def run_check(*argv: str) -> dict[str, Any]:
    return {"type": "run", "argv": list(argv) or ["true"]}


def two_step_plan() -> dict[str, Any]:
    """build -> use, tied by the output contract 'artifact'."""
    return copy.deepcopy(
        {
            "task": "build and use an artifact",
            "requirements": [
                {"id": "REQ-1", "description": "the artifact is built", "priority": "must"},
                {"id": "REQ-2", "description": "the artifact is used", "priority": "should"},
            ],
            "steps": [
                {
                    "id": "build",
                    "title": "build it",
                    "depends_on": [],
                    "covers": ["REQ-1"],
                    "verify": [run_check("true")],
                    "outputs": [
                        {"name": "artifact", "verify": [{"type": "file_exists", "path": "out/a"}]}
                    ],
                },
                {
                    "id": "use",
                    "title": "use it",
                    "depends_on": ["build"],
                    "requires_outputs": [{"step": "build", "name": "artifact"}],
                    "covers": ["REQ-2"],
                    "verify": [run_check("true")],
                },
            ],
        }
    )
