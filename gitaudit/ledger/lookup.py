"""The newest run of a plan for a tree: the lookup cache's answer, confirmed by the signed chain.

The SQLite cache (:mod:`gitaudit.ledger.index`) is a file in the repository, not evidence: a
process that can write ``.git/`` can edit it. So its answer is confirmed here before anyone
relies on it. The run must be for this tree and contract (its ``run.json`` is signed), lie on the
ledger's first-parent chain, and be the newest run for that tree: no commit between the tip and
the run may carry the tree's and contract's trailers. The check reads one object per newer run,
and past a few hundred, only their raw bytes as libgit2 reads them (each hashed against its id:
git's own log search read a forged object under a run's name, without its trailers).

**Confirmations are remembered, authenticated.** A run deep in a long ledger would cost that walk
on every judgement. So each confirmation is kept in ``<gitdir>/gitaudit/confirmed.json`` as the
statement "run R is the newest run of (plan, tree, contract) on the first-parent chain of commit
C" (C: the tip it was confirmed at), with an HMAC under the local key (:mod:`gitaudit.secret`,
kept beside the signing keys: a process that can write ``.git/`` cannot forge one). A commit's
first-parent chain is fixed by its id, so the statement stays true forever; the next
confirmation walks from the tip only down to C, checking the newer commits for the trailers as
before. A stale statement (a newer run appeared after C) is caught by that walk; a statement for
another chain never meets C, and the full confirmation runs. Without a private key nothing is
remembered and every confirmation walks.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pygit2

from gitaudit import secret
from gitaudit.crypto.commits import verify_commit
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.errors import GitAuditError, LedgerError
from gitaudit.frozen import frozen
from gitaudit.ledger import chain, index
from gitaudit.ledger.objects import commit_of
from gitaudit.ledger.records import RunRecord
from gitaudit.ledger.refs import ledger_ref, read_ref
from gitaudit.ledger.runs import read_run
from gitaudit.places import state_dir
from gitaudit.verdict import RAN as EXECUTED
from gitaudit.verdict import StepStatus

WALK_IN_PYTHON = 256
CONFIRMED = "confirmed.json"
CONFIRMED_FORMAT = 1
MAX_CONFIRMED = 256  # statements kept (the newest)


@frozen
class Found:
    """The run found (None: no run of the plan for this tree under this contract), the ledger
    tip the answer holds for (None: the plan has no ledger) and, when no run was found, the
    newest run for the tree under another contract, from the same view (None: there is none)."""

    record: RunRecord | None
    tip: pygit2.Oid | None
    other_contract: str | None = None


def find_run(
    repo: pygit2.Repository,
    gitdir: Path,
    plan: str,
    tree: str,
    contract: str,
    *,
    pushed: pygit2.Oid | None = None,
    ledger: str | None = None,
) -> Found:
    """The newest run of *plan* for *tree* under *contract*: among the runs of a push being
    received first (*pushed*, the pushed tip, which descends from the current ref), then on the
    ledger itself through the lookup cache, whose answer is confirmed. *ledger* names another
    copy of the plan's ledger (a remote-tracking one) to search instead of the plan's own."""
    key = ledger or plan
    if pushed is not None:
        for commit in chain.walk(repo, pushed, stop=read_ref(repo, ledger_ref(key)), what=key):
            record = read_run(repo, commit.id)
            if record.tree == tree and record.contract == contract:
                return Found(record, pushed)
    answer = index.lookup(repo, gitdir, key, tree, contract)
    if answer.tip is None:
        return Found(None, pushed)
    tip = pygit2.Oid(hex=answer.tip)  # the view the index answered from, not a later re-read
    if answer.run is None:
        other = answer.any_contract.commit if answer.any_contract else None
        return Found(None, pushed or tip, other)
    record = read_run(repo, answer.run.commit)
    confirm(repo, gitdir, tip, record, key, tree, contract)
    return Found(record, pushed or tip)


def every_run(
    repo: pygit2.Repository,
    gitdir: Path,
    key: str,
    tree: str,
    contract: str,
    tip: pygit2.Oid,
) -> list[RunRecord]:
    """Every run on the first-parent chain of *tip* (a tip of the ledger *key*, or a pushed tip
    descending from it) for *tree* under *contract*, newest first, read from the signed chain
    itself and not from the cache. A pushed segment is walked here (its objects are visible only
    to this process); the rest in one walk over the raw objects."""
    out: list[RunRecord] = []
    current = read_ref(repo, ledger_ref(key))
    start = tip
    if tip != current:  # a pushed segment (or a whole pushed ledger)
        for commit in chain.walk(repo, tip, stop=current, what=key):
            record = read_run(repo, commit.id)
            if record.tree == tree and record.contract == contract:
                out.append(record)
        if current is None:
            return out
        start = current
    found = _git_runs_for(repo, start, tree, contract)
    if found is None:
        raise LedgerError(f"{ledger_ref(key)}: cannot list its runs for tree {tree[:12]}")
    for line in found:
        record = read_run(repo, line)
        if record.tree == tree and record.contract == contract:
            out.append(record)
    return out


def newest_executions(
    repo: pygit2.Repository,
    gitdir: Path,
    start: pygit2.Oid | None,
    tree: str,
    contract: str,
    runners: Sequence[PublicKey],
    sources: Mapping[str, str],
) -> dict[str, tuple[StepStatus, str]]:
    """For each step of *sources* (step -> the run whose pass it carries), its newest execution
    (status, run) among the runs for *tree* under *contract* on the first-parent chain from
    *start* (inclusive) down to its source, that a runner signed; a step executed in none of them
    is absent. Read from the signed chain in one walk, which stops once every step is found or
    past its source; a run whose folders of the steps still sought (``steps/<id>``) are the very
    objects of a run already read is not read again, so a long line of runs that carry those
    steps costs a look at one tree each. The runs are those whose message carries the tree's and
    contract's trailers, and the sources (read whatever their message says). A pass in a run that
    does not count as a whole (:attr:`RunRecord.sound`: it changed its workspace, say) is reported
    as :attr:`StepStatus.FAILED`, the verdict of that run. A step whose source the walk never
    reached (not on this chain, or git's search stopped short of it) is reported as
    :attr:`StepStatus.UNKNOWN` at its source: a run the walk did not see is no proof that nothing
    newer failed, so its pass is not carried (fail closed)."""
    sought = set(sources)
    found: dict[str, tuple[StepStatus, str]] = {}
    seen: dict[str, pygit2.Oid | None] = {}
    for commit in _runs_for(repo, gitdir, start, tree, contract, set(sources.values())):
        if not sought:
            break
        folders = _step_folders(commit)
        same = folders is not None and all(s in seen and seen[s] == folders.get(s) for s in sought)
        record = None if same else read_run(repo, commit.id)
        if record is not None and record.tree == tree and record.contract == contract:
            executed = {
                sid: entry.status if record.sound else _unsound(entry.status)
                for sid, entry in record.steps.items()
                if sid in sought and entry.status in EXECUTED
            }
            if not executed or _signed(repo, commit.id, runners):
                for sid, status in executed.items():
                    found[sid] = (status, record.commit)
                    sought.discard(sid)
                if folders is not None:
                    seen.update({sid: folders.get(sid) for sid in sought})
        sought -= {sid for sid in sought if sources[sid] == str(commit.id)}  # past its source
    for sid in sought:  # the walk ended above its source: nothing shows what happened between
        found[sid] = (StepStatus.UNKNOWN, sources[sid])
    return found


def newest_with_inputs(
    repo: pygit2.Repository,
    start: pygit2.Oid | None,
    sought: Mapping[str, tuple[str, str]],
    runners: Sequence[PublicKey],
) -> dict[str, tuple[StepStatus, str]]:
    """For each step of *sought* (step -> (input digest, the run whose pass it carries)), its
    newest execution with that input digest, on any tree, among the runs a runner signed on the
    first-parent chain from *start* (inclusive) down to its source (exclusive); a step with
    none is absent. :func:`newest_executions` looks at the runs for one tree: a step carried
    because its inputs are unchanged is proven by the newest execution with those inputs, which
    may be on another tree (the step reads more than it declares, and failed there).

    One walk for every step; a run whose folders of the steps still sought (``steps/<id>``) are
    the very objects of the run read last is not read (a line of runs that carry the steps
    shares them), so the walk costs a look at one tree per run. A pass in a run that does not
    count as a whole is reported as :attr:`StepStatus.FAILED`; a step whose source the walk
    never reached is reported as :attr:`StepStatus.UNKNOWN` at its source (fail closed)."""
    left = dict(sought)
    found: dict[str, tuple[StepStatus, str]] = {}
    seen: dict[str, pygit2.Oid | None] = {}
    for commit in chain.walk(repo, start, what="runs"):
        if not left:
            break
        run = str(commit.id)
        for sid in [sid for sid, (_, source) in left.items() if source == run]:
            del left[sid]  # at its source: nothing newer with these inputs
        folders = _step_folders(commit) or {}
        if all(folders.get(sid) is not None and seen.get(sid) == folders[sid] for sid in left):
            continue  # the same entries as the run read last for every step sought
        seen.update({sid: folders.get(sid) for sid in left})
        record = read_run(repo, commit.id)
        executed = {
            sid: entry.status if record.sound else _unsound(entry.status)
            for sid, entry in record.steps.items()
            if sid in left and entry.status in EXECUTED and entry.input_digest == left[sid][0]
        }
        if not executed:
            continue
        if _signed(repo, commit.id, runners):
            for sid, status in executed.items():
                found[sid] = (status, run)
                del left[sid]
        else:  # counts for nothing: a signed run below with the same folders is read
            for sid in executed:
                seen.pop(sid, None)
    for sid, (_, source) in left.items():  # the walk ended above its source
        found[sid] = (StepStatus.UNKNOWN, source)
    return found


def _unsound(status: StepStatus) -> StepStatus:
    return StepStatus.FAILED if status == StepStatus.PASSED else status


def _signed(repo: pygit2.Repository, commit: pygit2.Oid, runners: Sequence[PublicKey]) -> bool:
    try:
        verify_commit(repo, commit, runners)
    except GitAuditError:
        return False  # a run without a runner's signature counts for nothing
    return True


def _step_folders(commit: pygit2.Commit) -> dict[str, pygit2.Oid] | None:
    """The ids of a run commit's step folders (``steps/<id>``); None when it has none."""
    try:
        folder = commit.tree["steps"]
    except KeyError:
        return None
    if not isinstance(folder, pygit2.Tree):
        return None
    return {entry.name or "": entry.id for entry in folder}


def _runs_for(
    repo: pygit2.Repository,
    gitdir: Path,
    start: pygit2.Oid | None,
    tree: str,
    contract: str,
    named: set[str],
) -> Iterator[pygit2.Commit]:
    """The commits carrying the trailers of *tree* and *contract* (or *named*) on the
    first-parent chain from *start* down, newest first: a few hundred commits read here, the
    rest found in their raw objects (by their trailers)."""
    trailers = f"Audit-Tree: {tree}\nAudit-Contract: {contract}\n"
    named = set(named)
    for walked, commit in enumerate(chain.walk(repo, start)):
        if walked == WALK_IN_PYTHON:
            found = _git_runs_for(repo, commit.id, tree, contract)
            if found is None:
                raise LedgerError(f"cannot list the runs for tree {tree[:12]}")
            for line in _with_named(repo, gitdir, commit.id, found, named):
                yield commit_of(repo, pygit2.Oid(hex=line), "run")
            return
        if trailers in commit.message or str(commit.id) in named:
            yield commit
        named.discard(str(commit.id))  # met: the raw part of the walk need not place it


def _with_named(
    repo: pygit2.Repository, gitdir: Path, start: pygit2.Oid, found: list[str], named: set[str]
) -> list[str]:
    """*found* (the runs the raw search listed on the first-parent chain of *start*, newest
    first) with each run of *named* that it does not list put where the chain has it, after the
    runs newer than it: a source of another tree (a pass carried for unchanged inputs) carries
    other trailers, and a walk that never met it would report its step unknown. A named run
    that is not on the first-parent chain of *start* is left out (the walk never meets it)."""
    listed = set(found)
    places: list[tuple[int, str]] = []
    for run in sorted(named - listed):
        newer = _first_parents_since(repo, start, run)
        if newer is not None:
            places.append((sum(1 for line in found if line in newer), run))
    out = list(found)
    for at, run in sorted(places, reverse=True):
        out.insert(at, run)
    return out


def _first_parents_since(repo: pygit2.Repository, start: pygit2.Oid, run: str) -> set[str] | None:
    """The commits of the first-parent chain of *start* newer than *run*, read as libgit2 reads
    them (each object hashed against its id: git's walk read a forged one, whose parent could
    skip a run); None when *run* is not on that chain."""
    newer: set[str] = set()
    for oid in chain.walk_ids(repo, start, what="runs"):
        if str(oid) == run:
            return newer
        newer.add(str(oid))
    return None


def _edited(gitdir: Path) -> str:
    cache = os.path.join(state_dir(gitdir), index.FILENAME)
    return f"the cache was edited; delete {cache} (it is rebuilt)"


def confirm(
    repo: pygit2.Repository,
    gitdir: Path,
    tip: pygit2.Oid,
    record: RunRecord,
    plan: str,
    tree: str,
    contract: str,
) -> None:
    """LedgerError unless *record* is the newest run for *tree* and *contract* on the
    first-parent chain of *tip*."""
    if record.tree != tree or record.contract != contract:
        raise LedgerError(
            f"the lookup cache names run {record.commit[:12]}, which is not evidence for tree "
            f"{tree[:12]} under this contract",
            hint=_edited(gitdir),
        )
    marker = f"Audit-Tree: {tree}\nAudit-Contract: {contract}\n"
    key = secret.local_key(repo.workdir, create=repo.workdir is not None)
    through = _confirmed_through(gitdir, key, plan, tree, contract, record.commit)
    for walked, commit in enumerate(chain.walk(repo, tip, what=plan)):
        if str(commit.id) in (record.commit, through):
            break  # the run itself, or the tip it was confirmed newest at, with nothing newer
        if walked == WALK_IN_PYTHON:
            _confirm_with_git(repo, gitdir, commit.id, record.commit, plan, tree, contract)
            break
        if marker in commit.message:
            raise LedgerError(
                f"a newer run ({str(commit.id)[:12]}) than the one the lookup cache names exists "
                f"for tree {tree[:12]}",
                hint=_edited(gitdir),
            )
    else:
        raise LedgerError(
            f"run {record.commit[:12]} named by the lookup cache is not on the ledger of {plan!r}",
            hint=_edited(gitdir),
        )
    if str(tip) != through:
        _remember_confirmed(gitdir, key, plan, tree, contract, record.commit, str(tip))


def _statement(plan: str, tree: str, contract: str, run: str, through: str) -> bytes:
    doc = {
        "what": "gitaudit newest run",
        "plan": plan,
        "tree": tree,
        "contract": contract,
        "run": run,
        "through": through,
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _confirmed_path(gitdir: Path) -> str:
    return os.path.join(state_dir(gitdir), CONFIRMED)


def _read_confirmed(gitdir: Path) -> list[dict[str, str]]:
    try:
        with open(_confirmed_path(gitdir), "rb") as handle:
            data = json.loads(handle.read(1 << 20))
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict) or data.get("format") != CONFIRMED_FORMAT:
        return []
    items = data.get("statements")
    if not isinstance(items, list):
        return []
    return [i for i in items if isinstance(i, dict) and all(isinstance(v, str) for v in i.values())]


def _confirmed_through(
    gitdir: Path, key: bytes | None, plan: str, tree: str, contract: str, run: str
) -> str | None:
    """The tip at which *run* was confirmed the newest run of (plan, tree, contract), from an
    authenticated statement; None when there is none."""
    if key is None:
        return None
    for item in reversed(_read_confirmed(gitdir)):
        if (item.get("plan"), item.get("tree"), item.get("contract"), item.get("run")) != (
            plan,
            tree,
            contract,
            run,
        ):
            continue
        through = item.get("through", "")
        mac = secret.mac(key, _statement(plan, tree, contract, run, through))
        if hmac.compare_digest(item.get("mac", ""), mac):
            return through
    return None


def _remember_confirmed(
    gitdir: Path, key: bytes | None, plan: str, tree: str, contract: str, run: str, through: str
) -> None:
    """Keep the statement that *run* is the newest of (plan, tree, contract) on the chain of
    *through* (best effort: it is a cache)."""
    if key is None:
        return
    item = {
        "plan": plan,
        "tree": tree,
        "contract": contract,
        "run": run,
        "through": through,
        "mac": secret.mac(key, _statement(plan, tree, contract, run, through)),
    }
    same = (plan, tree, contract)
    kept = [
        i
        for i in _read_confirmed(gitdir)
        if (i.get("plan"), i.get("tree"), i.get("contract")) != same
    ]
    doc = {"format": CONFIRMED_FORMAT, "statements": [*kept[-(MAX_CONFIRMED - 1) :], item]}
    path = _confirmed_path(gitdir)
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".confirmed.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(doc, handle, sort_keys=True)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def _confirm_with_git(
    repo: pygit2.Repository,
    gitdir: Path,
    newest: pygit2.Oid,
    run: str,
    plan: str,
    tree: str,
    contract: str,
) -> None:
    """The same confirmation for a run deep in the ledger, in one walk over the raw objects: the
    newest commit on the first-parent chain of *newest* carrying both trailers of this tree and
    contract must be *run* itself (so *run* is on the chain, and nothing newer is)."""
    found = _git_runs_for(repo, newest, tree, contract, first=True)
    newest_run = found[0] if found else ""
    if newest_run != run:
        detail = (
            f"the newest is {newest_run[:12]}"
            if newest_run
            else "it is not on the ledger's first-parent chain"
        )
        raise LedgerError(
            f"run {run[:12]} named by the lookup cache is not the newest run of {plan!r} for "
            f"tree {tree[:12]} ({detail})",
            hint=_edited(gitdir),
        )


def _git_runs_for(
    repo: pygit2.Repository, start: pygit2.Oid, tree: str, contract: str, *, first: bool = False
) -> list[str]:
    """The ids of the commits carrying the trailers of *tree* and *contract* on the first-parent
    chain of *start*, newest first (only the newest when *first*), in one walk over the raw
    objects as libgit2 reads them (:func:`chain.walk_raw`), which hashes each against its id.
    git's own search (``rev-list --grep``) checked no object's id: a commit object the agent
    wrote under a newer run's name, without its trailers, hid that run from the search."""
    wanted = (f"Audit-Tree: {tree}".encode(), f"Audit-Contract: {contract}".encode())
    found: list[str] = []
    for oid, raw in chain.walk_raw(repo, start, what="runs"):
        body = raw.find(b"\n\n")
        message = raw[body + 2 :] if body >= 0 else b""
        if all(part in message for part in wanted):
            found.append(str(oid))
            if first:
                break
    return found
