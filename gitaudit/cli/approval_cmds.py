"""`git audit proposals` and `git audit approve`: plans changes that need k distinct sealers."""

from __future__ import annotations

from typing import Annotated

import typer

from gitaudit.cli.common import JsonOpt, KeyOpt, emit_json, repo_here, say, signer_for
from gitaudit.git.repo import Repo
from gitaudit.ledger.proposals import approve, changed_paths, find, list_proposals, prune

_NEXT = {
    "pending": "approve: `git audit approve {id}` (another sealer)",
    "ready": "apply: `git audit approve {id}`",
    "stale": "refs/audit/plans moved on: its approvals count for nothing; make the change again",
    "behind": "this clone's refs/audit/plans is behind it: `git audit sync` first",
    "applied": "applied in {applied}",
}


def proposals_cmd(
    proposal: Annotated[
        str | None, typer.Argument(help="A proposal id (or its prefix): show it in full.")
    ] = None,
    prune_refs: Annotated[
        bool,
        typer.Option("--prune", help="Delete this clone's proposals that are applied or stale."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """List the proposed plans changes (local and fetched): what each changes, its approvals
    (n of the k distinct sealers it needs) and its state: pending, ready, applied, stale or
    behind. With an id: that proposal, the plans files it changes and the next command."""
    repo = repo_here()
    if prune_refs:
        for pid in prune(repo):
            say(f"deleted refs/audit/proposals/{pid}")
    if proposal is not None:
        _show(repo, proposal, as_json)
        return
    views = list_proposals(repo)
    if as_json:
        emit_json({"proposals": [v.to_json() for v in views]})
        return
    if not views:
        say("no proposals")
        return
    for v in views:
        p = v.proposal
        say(
            f"{p.id}  {v.state:<8} {len(v.approvers)}/{v.required}  {p.summary}  "
            f"({', '.join(v.kinds)}; by {p.proposer})"
        )


def _show(repo: Repo, proposal: str, as_json: bool) -> None:
    view = find(repo, proposal)
    paths = changed_paths(repo, view)
    if as_json:
        emit_json({**view.to_json(), "message": view.proposal.message, "files": paths})
        return
    p = view.proposal
    say(f"proposal {p.id}: {p.summary}")
    say(f"  state      {view.state}")
    say(f"  kinds      {', '.join(view.kinds)}")
    if tuple(p.kinds) != view.kinds:
        say(f"  MISSTATED  its proposal.json says: {', '.join(p.kinds) or 'no weighed change'}")
    who = ", ".join(view.approvers) or "none"
    say(f"  approvals  {len(view.approvers)} of {view.required} ({who})")
    say(f"  proposed   {p.proposed_at} by {p.proposer} on plans commit {p.parent[:12]}")
    say(f"  from       {', '.join(view.sources)}")
    for kind, files in paths.items():
        for path in files:
            say(f"  {kind:<10} {path}")
    body = p.message.rstrip("\n").splitlines()[1:]
    while body and not body[0].strip():
        body.pop(0)
    for line in body:
        say(f"  | {line}" if line else "  |")
    for why in view.ignored:
        say(f"  ignored    {why}")
    say(f"next: {_NEXT[view.state].format(id=p.id, applied=(view.applied_in or '')[:12])}")


def approve_cmd(
    proposal: Annotated[str, typer.Argument(help="The proposal id (or its prefix).")],
    key: KeyOpt = None,
) -> None:
    """Approve a proposed plans change with your sealer key (a signature bound to its exact
    content and to the plans commit it changes); once it has the approvals it needs, apply it
    to refs/audit/plans. A stale proposal (refs/audit/plans moved since) is refused."""
    repo = repo_here()
    outcome = approve(repo, signer_for(repo, key), proposal)
    who = ", ".join(outcome.approvers)
    tally = f"{len(outcome.approvers)} of {outcome.required} ({who})"
    if outcome.already:
        say(f"proposal {outcome.id} was applied already, in {str(outcome.applied)[:12]}")
    elif outcome.applied is not None:
        say(f"approved {outcome.id}: {tally}")
        say(f"applied to refs/audit/plans as {outcome.applied[:12]}")
        say("next: share it: `git audit push`")
    else:
        more = outcome.required - len(outcome.approvers)
        say(f"approved {outcome.id}: {tally}; it needs {more} more")
        say(
            "next: share it (`git audit push`); another sealer runs "
            f"`git audit approve {outcome.id}`"
        )
