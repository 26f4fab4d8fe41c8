"""Step states: the recognised values, those that keep a step out of every route, and how a
raw value is read. See :mod:`gitaudit.mission` for what each state means.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from gitaudit.plan.model import StepId

VERIFIED: Final = "verified"
FAILED: Final = "failed"
UNKNOWN: Final = "unknown"
EXHAUSTED: Final = "exhausted"
EXPIRED: Final = "expired"
PENDING: Final = "pending"

#: The recognised step states; anything else is read as ``pending``.
STATES: Final = (VERIFIED, FAILED, UNKNOWN, EXHAUSTED, EXPIRED, PENDING)
#: States that keep a non-verified step out of every route.
UNUSABLE: Final = frozenset({FAILED, UNKNOWN, EXHAUSTED})


def normalise_state(value: str | None) -> str:
    """The planning state of a raw state value: a recognised state, else ``pending``."""
    return value if value in STATES else PENDING


def _state_of(states: Mapping[StepId, str], sid: StepId) -> str:
    return normalise_state(states.get(sid))
