"""Validation problems: one record per violation, each with a stable code and a fix."""

from __future__ import annotations

from dataclasses import asdict
from typing import Literal

from gitaudit.frozen import frozen

Severity = Literal["error", "warning", "environment"]


@frozen
class Problem:
    """One thing wrong with a plan.

    ``code`` is stable (scripts and tests match on it); ``path`` is a JSON path into the plan file
    (``$.steps[2].verify[0]``); ``severity`` separates invalid plans (``error``), harmless oddities
    (``warning``) and problems of this machine rather than of the plan (``environment``).
    """

    plan: str
    source: str
    path: str
    code: str
    message: str
    hint: str
    severity: Severity = "error"

    def render(self) -> str:
        return f"{self.source}: {self.path}: {self.message} [{self.code}]"

    def to_json(self) -> dict[str, str]:
        return asdict(self)


@frozen
class ValidationReport:
    plan: str
    source: str
    problems: tuple[Problem, ...]

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "error")

    @property
    def warnings(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "warning")

    @property
    def environment(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "environment")

    @property
    def valid(self) -> bool:
        return not self.errors
