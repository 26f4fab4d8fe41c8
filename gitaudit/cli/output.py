"""Printing, without typer: used by the typer commands and by the fast path alike."""

from __future__ import annotations

import json
import sys

TYPE_CHECKING = False  # not typing's: the status fast path does without it (gitaudit.named)
if TYPE_CHECKING:
    from typing import Any


def emit_json(value: Any) -> None:
    """Payloads go to stdout, one JSON document, stable key order."""
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=False) + "\n")


def say(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def warn(text: str) -> None:
    sys.stderr.write(text + "\n")
