"""One error hierarchy for every expected failure, and the one place exit codes are decided.

Each error carries a one-line message (naming the file, JSON path or object id) and a hint (the
fix). The CLI catches :class:`GitAuditError` and prints ``error: <message>`` and ``hint: <hint>``
without a traceback; ``--debug`` shows it.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Process exit codes: the contract with hooks, CI jobs and scripts."""

    OK = 0  # success, or verdict PASS
    FAIL = 1  # error, or verdict FAIL
    USAGE = 2  # the command line is wrong
    UNKNOWN = 3  # verdict UNKNOWN: no fresh evidence


class GitAuditError(Exception):
    """Root of every expected failure. Never raised directly; use a domain subclass."""

    exit_code: ExitCode = ExitCode.FAIL

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(GitAuditError):
    """The command line names something that does not exist or combines options wrongly."""

    exit_code = ExitCode.USAGE


class RepositoryError(GitAuditError):
    """Not a git repository, or the repository cannot be read."""


class PlanError(GitAuditError):
    """A plan file is missing, unreadable or invalid."""


class KeyMaterialError(GitAuditError):
    """A signing key is missing, corrupt, in the wrong place, or of the wrong kind."""


class SignatureError(GitAuditError):
    """A signature is malformed, made by the wrong key, or does not cover the signed bytes."""


class TrustError(GitAuditError):
    """The trust set on refs/audit/plans is missing, broken, or does not allow an action."""


class SealError(GitAuditError):
    """A seal is missing, tampered, or the requested seal would weaken the contract."""


class LedgerError(GitAuditError):
    """An audit ref or one of its objects is malformed, rewound, or cannot be updated."""


class CheckError(GitAuditError):
    """A check cannot be started as declared (bad path, escaping cwd, missing checker)."""


class RunError(GitAuditError):
    """A run is refused before anything executes (plan differs from its seal, unknown step)."""


class HookError(GitAuditError):
    """Hook installation or execution failed."""
