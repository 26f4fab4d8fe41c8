"""Sealing a plan's request, and its history: one signed commit on ``refs/audit/plans`` each.

Only a sealer seals a request (:func:`gitaudit.ledger.plansref.append` requires one). A change
is compared with the request sealed before (for a plan's first request: with the requirements
of the plan sealed before it, the single-file form), and a weakening is refused unless it is
recorded with a reason, exactly as for plans (:func:`gitaudit.ledger.seals.seal_plan`). Whether
the sealed plan answers the new request is reported, not required: a planner answers it next.
"""

from __future__ import annotations

from typing import Any

import pygit2

from gitaudit.crypto.signers import Signer
from gitaudit.frozen import frozen
from gitaudit.git.repo import Repo
from gitaudit.ledger import chain
from gitaudit.ledger.objects import dumps
from gitaudit.ledger.plansref import (
    PlansState,
    append,
    now_iso,
    read_state,
    sealed_contract,
    signer_name,
    state_at,
)
from gitaudit.ledger.refs import PLANS_REF
from gitaudit.ledger.requests import RequestRecord, record_path, request_path
from gitaudit.ledger.seals import _base_files, _check_weaken_allowed, _require_initialised
from gitaudit.plan.compare import Comparison
from gitaudit.plan.digest import sha256
from gitaudit.plan.request import Gap, Request, compare_requests, gaps, implicit, parse_request


@frozen
class RequestOutcome:
    plan: str
    commit: pygit2.Oid | None  # None: nothing to do
    record: RequestRecord | None
    comparison: Comparison | None
    gaps: tuple[Gap, ...]  # how the plan sealed now fails to answer the request
    planned: bool  # whether a plan is sealed as active for it
    message: str


def _previous(state: PlansState, name: str) -> Request | None:
    """What the request replaces: the sealed request, else the sealed plan's requirements."""
    sealed = state.request(name)
    if sealed is not None:
        return sealed
    checked, _ = sealed_contract(state, name)
    return implicit(checked.plan) if checked is not None and checked.plan is not None else None


def seal_request(
    repo: Repo,
    signer: Signer,
    name: str,
    data: bytes,
    *,
    source: str,
    reason: str | None = None,
    allow_weaken: bool = False,
) -> RequestOutcome:
    """Seal *data* (the bytes of *source*) as the request of plan *name*."""
    request = parse_request(data, name=name, source=source)
    outcome: dict[str, Any] = {}

    def build(state: PlansState) -> tuple[dict[str, bytes], str] | None:
        _require_initialised(state)
        old = state.requests.get(name)
        live = old is not None and not old.retired
        checked, _ = sealed_contract(state, name)
        plan = checked.plan if checked is not None else None
        outcome.update(
            gaps=gaps(request, plan) if plan is not None else (),
            planned=plan is not None,
            record=old,
            comparison=None,
        )
        if live and state.files.get(request_path(name)) == data:
            return None
        previous = _previous(state, name)
        comparison = compare_requests(previous, request) if previous is not None else None
        weakenings = [c.render() for c in comparison.weakenings] if comparison else []
        if weakenings:
            _check_weaken_allowed(state, f"request {name!r}", weakenings, allow_weaken, reason)
        change = "initial"
        if comparison is not None:
            change = (
                "weakened"
                if weakenings
                else "strengthened"
                if comparison.strengthenings
                else "neutral"
            )
        record = RequestRecord(
            plan=name,
            version=old.version + 1 if old is not None else 1,
            request_digest=sha256(data),
            previous_digest=old.request_digest if old is not None and live else None,
            sealed_at=now_iso(),
            sealer=signer_name(state, signer.public_key),
            sealer_fingerprint=signer.public_key.fingerprint(),
            reason=reason or "",
            change=change,
            weakened=bool(weakenings),
            weakenings=tuple(weakenings),
            strengthenings=tuple(c.render() for c in comparison.strengthenings)
            if comparison
            else (),
        )
        files = _base_files(state)
        files[request_path(name)] = data
        files[record_path(name)] = dumps(record.to_json())
        outcome.update(record=record, comparison=comparison)
        return files, _message(record, request, comparison)

    commit, _ = append(repo, signer, build)
    record = outcome.get("record")
    if commit is None:
        version = record.version if record else "?"
        msg = f"the request of plan {name!r} is already sealed as it is (v{version}); nothing to do"
    else:
        assert record is not None
        msg = (
            f"sealed the request of plan {name!r} v{record.version} ({record.change}) "
            f"as {str(commit)[:12]}"
        )
    return RequestOutcome(
        name,
        commit,
        record,
        outcome.get("comparison"),
        tuple(outcome.get("gaps", ())),
        bool(outcome.get("planned")),
        msg,
    )


def _message(record: RequestRecord, request: Request, comparison: Comparison | None) -> str:
    title = f"request({record.plan}): v{record.version} {record.change}" + (
        f" — {record.reason}" if record.reason else ""
    )
    lines = (
        [c.render() for c in comparison.changes]
        if comparison is not None
        else [f"{len(request.requirements)} requirements"]
    )
    trailers = {
        "Audit-Request": record.plan,
        "Audit-Request-Digest": record.request_digest,
        "Audit-Request-Version": str(record.version),
        "Audit-Weakened": "true" if record.weakened else "false",
    }
    return (
        f"{title}\n\n"
        + "\n".join(f"- {line}" for line in lines or ["no change to the requirements"])
        + "\n\n"
        + "\n".join(f"{k}: {v}" for k, v in trailers.items())
    )


@frozen
class RequestEntry:
    commit: str
    time: int
    record: RequestRecord
    request_data: bytes | None  # the sealed bytes (None once retired)
    position: int  # of the commit on the plans ref, 0 for the root


def request_history(repo: Repo, name: str | None = None) -> list[RequestEntry]:
    """Every sealed version of one plan's request (or of all), newest first, from the verified
    chain, each attributed to the commit that introduced it."""
    state = read_state(repo)
    commits = list(chain.walk(repo.git, state.tip, what=PLANS_REF))
    seen: set[tuple[str, int]] = set()
    out: list[RequestEntry] = []
    for position, commit in enumerate(reversed(commits)):
        at = state_at(repo.git, commit)
        for plan, record in sorted(at.requests.items()):
            key = (plan, record.version)
            if key in seen or (name is not None and plan != name):
                continue
            seen.add(key)
            data = at.files.get(request_path(plan))
            out.append(RequestEntry(str(commit.id), commit.commit_time, record, data, position))
    out.reverse()
    return out
