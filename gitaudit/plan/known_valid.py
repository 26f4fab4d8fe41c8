"""Plan files known to satisfy the schema: the schema check remembered, authenticated.

Checking a plan against the JSON Schema needs the compiled validator, whose import alone costs
about 7 ms of a pre-push hook's 50. Yet the gate judges the same plan bytes again and again (a
plan changes far less often than the code it plans). So each plan file found schema-valid
leaves a mark in ``<gitdir>/gitaudit/valid-plans``: HMAC-SHA256 under the local key
(:mod:`gitaudit.secret`) of the gitaudit version, the schema's SHA-256 and the file's SHA-256,
one per line, the newest :data:`KEPT`. A file whose mark is there skips the schema check and
nothing else: it is still parsed, built into the model and checked for every semantic rule.

A mark cannot be made without the key, and it names exactly one file under exactly one schema
and version: a rewritten list, a mark copied from another file, or one made by an older
gitaudit, matches nothing, and the file is checked in full (as it is when the list cannot be
read). Only the gate and ``run`` consult it (a run for its plan file and the sealed copy of
it); sealing, ``plan validate`` and ``plan lint`` always check.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass, field

from gitaudit import __version__, secret
from gitaudit.places import state_dir

FILENAME = "valid-plans"
FORMAT = b"gitaudit.valid-plan/1"
KEPT = 32  # marks kept (a mark is one line of 64 hex digits)


@dataclass
class KnownValid:
    """The marks of one repository (*gitdir*), read once; *workdir* locates the key's check
    (a key inside the work tree authenticates nothing)."""

    gitdir: str
    workdir: str | None
    _marks: list[str] | None = field(default=None, init=False, repr=False)

    def __contains__(self, data: object) -> bool:
        if not isinstance(data, bytes):
            return False
        key = secret.local_key(self.workdir, create=False)
        return key is not None and _mark(key, data) in self._read()

    def add(self, data: bytes) -> None:
        """Remember *data* as schema-valid (a cache: a write that fails is let go)."""
        key = secret.local_key(self.workdir, create=True)
        if key is None:
            return
        mark = _mark(key, data)
        kept = [m for m in self._read() if m != mark][-(KEPT - 1) :]
        marks = [*kept, mark]
        self._marks = marks
        with contextlib.suppress(OSError):
            _write(os.path.join(state_dir(self.gitdir), FILENAME), marks)

    def _read(self) -> list[str]:
        if self._marks is None:
            self._marks = _read(os.path.join(state_dir(self.gitdir), FILENAME))
        return self._marks


def _mark(key: bytes, data: bytes) -> str:
    from gitaudit.plan.load import schema_bytes

    schema = hashlib.sha256(schema_bytes()).hexdigest()
    plan = hashlib.sha256(data).hexdigest()
    payload = b"\0".join((FORMAT, __version__.encode(), schema.encode(), plan.encode()))
    return secret.mac(key, payload)


def _read(path: str) -> list[str]:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(KEPT * 65 + 1)
    except OSError:
        return []
    return [line for line in raw.decode("ascii", "replace").split("\n") if len(line) == 64]


def _write(path: str, marks: list[str]) -> None:
    import tempfile

    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".valid-plans.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write("".join(f"{m}\n" for m in marks))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
