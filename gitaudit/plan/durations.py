"""Durations such as ``30m``, ``12h``, ``7d`` or ``1h30m`` (used by ``valid_for``)."""

from __future__ import annotations

import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_PART = re.compile(r"\s*(\d{1,12})\s*([smhdw])\s*")  # 12 digits: far beyond any real validity


def parse_duration(text: str) -> int | None:
    """Seconds in *text*, or None when it is not a duration (or is zero)."""
    pos, total = 0, 0
    while pos < len(text):
        m = _PART.match(text, pos)
        if not m:
            return None
        total += int(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return total or None
