"""Sealed requests on ``refs/audit/plans``: ``requests/<plan>.json`` and its record.

``requests/<name>.json`` holds the exact bytes of ``.gitaudit/requests/<name>.json`` as a sealer
sealed them (:mod:`gitaudit.plan.request`); ``request-seals/<name>.json`` is the record that
binds them by digest and says who sealed which version, why, and what it weakened. Only a sealer
changes either; the rules a changed request must keep (a new version, weakenings recorded, none
where the policy forbids them) are checked here for every plans commit, wherever the chain is
read (see :func:`gitaudit.ledger.plansref.transition_problem`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gitaudit.errors import GitAuditError, SealError
from gitaudit.frozen import frozen
from gitaudit.ledger.objects import loads
from gitaudit.plan.digest import sha256
from gitaudit.plan.request import Request, compare_requests, parse_request

REQUEST_SEAL_FORMAT = "gitaudit.request-seal/1"


def request_path(name: str) -> str:
    return f"requests/{name}.json"


def record_path(name: str) -> str:
    return f"request-seals/{name}.json"


@frozen
class RequestRecord:
    """``request-seals/<name>.json``: the current seal of one plan's request."""

    plan: str
    version: int
    request_digest: str  # sha256 of requests/<name>.json (for a retired request: the last one)
    previous_digest: str | None
    sealed_at: str
    sealer: str
    sealer_fingerprint: str
    reason: str
    change: str  # initial | strengthened | weakened | neutral | retired
    weakened: bool = False
    weakenings: tuple[str, ...] = ()
    strengthenings: tuple[str, ...] = ()
    retired: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "format": REQUEST_SEAL_FORMAT,
            "plan": self.plan,
            "version": self.version,
            "request_digest": self.request_digest,
            "previous_digest": self.previous_digest,
            "sealed_at": self.sealed_at,
            "sealer": {"name": self.sealer, "fingerprint": self.sealer_fingerprint},
            "reason": self.reason,
            "change": self.change,
            "weakened": self.weakened,
            "weakenings": list(self.weakenings),
            "strengthenings": list(self.strengthenings),
            "retired": self.retired,
        }

    @classmethod
    def from_json(cls, doc: Any, where: str) -> RequestRecord:
        try:
            if not isinstance(doc, dict) or doc.get("format") != REQUEST_SEAL_FORMAT:
                raise ValueError(f"not a {REQUEST_SEAL_FORMAT} record")
            previous = doc["previous_digest"]
            sealer = doc["sealer"]
            version = doc["version"]
            if not isinstance(version, int) or isinstance(version, bool) or version < 1:
                raise TypeError("version must be a positive integer")
            flags = (doc["weakened"], doc["retired"])
            if not all(isinstance(f, bool) for f in flags):
                raise TypeError("weakened and retired must be true or false")
            return cls(
                plan=_str(doc["plan"]),
                version=version,
                request_digest=_str(doc["request_digest"]),
                previous_digest=None if previous is None else _str(previous),
                sealed_at=_str(doc["sealed_at"]),
                sealer=_str(sealer["name"]),
                sealer_fingerprint=_str(sealer["fingerprint"]),
                reason=_str(doc["reason"]),
                change=_str(doc["change"]),
                weakened=flags[0],
                weakenings=tuple(_str(x) for x in doc["weakenings"]),
                strengthenings=tuple(_str(x) for x in doc["strengthenings"]),
                retired=flags[1],
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SealError(
                f"{where}: malformed request record ({exc})",
                hint="request records are written by `git audit request seal`; restore the "
                "plans ref",
            ) from None


def retire_request(
    record: RequestRecord, when: str, sealer: tuple[str, str], reason: str
) -> RequestRecord:
    """The record retiring the request of *record* (its bytes leave the plans tree)."""
    return RequestRecord(
        plan=record.plan,
        version=record.version + 1,
        request_digest=record.request_digest,
        previous_digest=record.request_digest,
        sealed_at=when,
        sealer=sealer[0],
        sealer_fingerprint=sealer[1],
        reason=reason,
        change="retired",
        weakened=True,
        weakenings=("request retired",),
        retired=True,
    )


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {type(v).__name__}")
    return v


def parse_records(files: Mapping[str, bytes], where: str) -> dict[str, RequestRecord]:
    """The request records of one plans tree, each checked against the request bytes it binds
    (present, hashing to its digest and a valid request while active; absent once retired);
    SealError naming the file otherwise."""
    records: dict[str, RequestRecord] = {}
    for path, data in files.items():
        if not (path.startswith("request-seals/") and path.endswith(".json")):
            continue
        name = path[len("request-seals/") : -len(".json")]
        try:
            doc = loads(data)
        except ValueError as exc:
            raise SealError(f"{where}: {path} is not valid JSON ({exc})") from None
        record = RequestRecord.from_json(doc, f"{where}: {path}")
        if record.plan != name:
            raise SealError(
                f"{where}: {path} is a request record for {record.plan!r}, not {name!r}"
            )
        records[name] = record
        _check_binding(files, record, where)
    for path in files:
        if path.startswith("requests/") and path.endswith(".json"):
            name = path[len("requests/") : -len(".json")]
            if name not in records:
                raise SealError(f"{where}: {path} has no request record ({record_path(name)})")
    return records


def _check_binding(files: Mapping[str, bytes], record: RequestRecord, where: str) -> None:
    path = request_path(record.plan)
    data = files.get(path)
    if record.retired:
        if data is not None:
            raise SealError(f"{where}: {path} is present, but its request is retired")
        return
    if data is None or sha256(data) != record.request_digest:
        raise SealError(
            f"{where}: {path} is not the request v{record.version} of plan {record.plan!r} binds",
            hint="restore refs/audit/plans from a good copy",
        )
    try:
        parse_request(data, name=record.plan, source=f"{where}: {path}")
    except GitAuditError as exc:
        raise SealError(exc.message, hint=exc.hint) from None


def sealed_request(
    files: Mapping[str, bytes], records: Mapping[str, RequestRecord], name: str
) -> Request | None:
    """The active sealed request of plan *name* (None: none, or retired). The files were
    checked when the state was read (:func:`parse_records`)."""
    record = records.get(name)
    data = files.get(request_path(name))
    if record is None or record.retired or data is None:
        return None
    return parse_request(data, name=name, source=f"refs/audit/plans:{request_path(name)}")


def transition_problem(
    before: tuple[Mapping[str, bytes], Mapping[str, RequestRecord]],
    after: tuple[Mapping[str, bytes], Mapping[str, RequestRecord]],
    implicit: Mapping[str, Request],
    allow_weaken: bool,
    where: str,
) -> str | None:
    """Why the requests of *after* (files, records) cannot follow those of *before*: a record
    deleted, changed without a new version, or moved back; a weakening not recorded as one, or
    made while the policy (*allow_weaken* of the parent) forbids weakening. A first request is
    compared with *implicit*: the requirements of the plan sealed before it (single-file
    form)."""
    old_files, old_records = before
    new_files, new_records = after
    for name in sorted(set(old_records) | set(new_records)):
        old, new = old_records.get(name), new_records.get(name)
        if new is None:
            return f"{where} deletes the request record of plan {name!r}"
        if old is not None and new.version == old.version:
            if new != old:
                return f"{where} changes request v{new.version} of {name!r} without a new version"
            continue
        if old is not None and new.version < old.version:
            return (
                f"{where} moves the request of {name!r} back from v{old.version} to v{new.version}"
            )
        previous = sealed_request(old_files, old_records, name) or implicit.get(name)
        current = sealed_request(new_files, new_records, name)
        weakened = new.retired or (
            previous is not None
            and current is not None
            and compare_requests(previous, current).weakened
        )
        if weakened and not new.weakened:
            return f"{where}: request v{new.version} of {name!r} weakens it without recording it"
        if weakened and not allow_weaken:
            return f"{where}: request v{new.version} of {name!r} weakens it; policy forbids it"
    return None
