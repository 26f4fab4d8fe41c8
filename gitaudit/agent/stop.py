"""The stop hook: may the agent stop? Only when the gate says PASS for the work tree.

The answer comes, fastest first, from:

1. the verdict memo (:mod:`gitaudit.gate.memo`): the work tree's tree id (its fingerprint,
   :mod:`gitaudit.agent.worktree`) and the memo's state, from git processes run side by side,
   find a PASS remembered for exactly this tree and state, without importing pygit2;
2. on a repeated stop (``stop_hook_active``: the host is continuing because this hook blocked),
   the block it gave last time, when neither the tree nor the state has moved since (an agent
   that stops again without doing anything gets the same answer, cheaply); a block is never
   remembered as anything but a block;
3. the gate itself (:func:`gitaudit.gate.judge.judge` on the work tree), whose PASS fills the
   memo and whose reasons, with the fix of each, become the block's reason.

Anything that goes wrong on the way raises, and the entry point turns it into a block.
"""

from __future__ import annotations

import json
import os
import time

from gitaudit.agent import payload as payloads
from gitaudit.agent.hosts import ALLOW, Answer

TYPE_CHECKING = False  # not typing's: the agent hooks do without typing (gitaudit.named)
if TYPE_CHECKING:
    from typing import Any

    from gitaudit.gate import memo
    from gitaudit.gate.result import GateResult

BLOCKS_FILE = "agent-stop.json"  # in the repository's state dir: the last block, authenticated
BLOCK_TTL = 300.0  # seconds a remembered block may be re-served on a repeated stop
FORMAT = 1


def decide(raw: bytes) -> Answer:
    """The stop hook's decision for the host payload *raw*."""
    doc = payloads.load(raw)
    repeated = payloads.field(doc, "stop_hook_active", bool) is True
    root = payloads.project_dir()
    from gitaudit.agent import worktree

    tree, snap = worktree.state(root)
    if snap is not None:
        from gitaudit.gate import memo

        if memo.lookup(snap, tree, work_tree=True) is not None:
            return ALLOW  # judged PASS for exactly this tree and state, relying on no more
        if repeated:
            again = remembered_block(snap, tree)
            if again is not None:
                return Answer(False, again)
    return judged(root, snap)


def judged(root: str, before: memo.Snapshot | None) -> Answer:
    """The gate's verdict for the work tree at *root*: allow on PASS, else block with why."""
    from gitaudit.gate.judge import judge
    from gitaudit.git.repo import open_repo
    from gitaudit.verdict import Verdict

    result = judge(open_repo(root), before=before)
    if result.verdict == Verdict.PASS:
        return ALLOW
    reason = explain(result)
    if before is not None:
        remember_block(before, result.tree, reason)
    return Answer(False, reason)


def explain(result: GateResult) -> str:
    """The block's reason for the agent: the verdict, each reason with its fix, the next
    command."""
    from gitaudit.gate.render import render_gate

    fixes = [r.hint for r in result.reasons] + [
        r.hint for p in result.plans if p.verdict != "PASS" for r in p.reasons
    ]
    lines = [
        f"gitaudit: the gate says {result.verdict} for the work tree, so the work is not done: "
        "you may not stop yet.",
        *render_gate(result),
    ]
    if fixes:
        lines.append(f"Next: {fixes[0]}")
    lines.append(
        "Then stop again (`git audit status` shows the verdict). Do not edit the plan, the "
        "checks' files or .git to get past this: the seal, the guard and the server's gate all "
        "judge again."
    )
    return "\n".join(lines)


# ------------------------------------------------------------------------ the remembered block


def _blocks_path(gitdir: str) -> str:
    from gitaudit.places import state_dir

    return os.path.join(state_dir(gitdir), BLOCKS_FILE)


def _payload(entry: dict[str, Any]) -> bytes:
    fields = {k: entry[k] for k in ("format", "state", "tree", "made", "reason")}
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


def remember_block(snap: memo.Snapshot, tree: str, reason: str) -> None:
    """Keep the block just given for a repeated stop in the same state (best effort)."""
    from gitaudit import secret

    key = secret.local_key(snap.workdir, create=True)
    if key is None:
        return
    entry: dict[str, Any] = {
        "format": FORMAT,
        "state": snap.digest,
        "tree": tree,
        "made": time.time(),
        "reason": reason,
    }
    entry["mac"] = secret.mac(key, _payload(entry))
    path = _blocks_path(snap.gitdir)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(entry, handle)
        os.replace(tmp, path)
    except OSError:
        return


def remembered_block(snap: memo.Snapshot, tree: str) -> str | None:
    """The reason of the last block, when it was given for *tree* in the state *snap* less than
    :data:`BLOCK_TTL` ago and its MAC holds; None otherwise (the gate answers)."""
    import hmac

    from gitaudit import secret

    try:
        with open(_blocks_path(snap.gitdir), encoding="utf-8") as handle:
            entry = json.load(handle)
        if entry.get("format") != FORMAT or entry["state"] != snap.digest:
            return None
        if entry["tree"] != tree or not 0 <= time.time() - float(entry["made"]) < BLOCK_TTL:
            return None
        key = secret.local_key(snap.workdir, create=False)
        if key is None or not hmac.compare_digest(
            str(entry["mac"]), secret.mac(key, _payload(entry))
        ):
            return None
        return str(entry["reason"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
