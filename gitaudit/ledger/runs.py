"""Run commits on ``refs/audit/runs/<plan>``: their tree layout, writing, and reading.

A run commit's tree holds ``run.json`` (the record the gate reads), ``summary.md`` (for reviewers)
and, under ``steps/<id>/``, every check's ``result.json``, ``stdout`` and ``stderr``: the step's
own checks (``checks/<n>/``), its output contracts (``outputs/<name>/<n>/``) and the upstream
output contracts re-executed before it (``upstream/<step>/<name>/<n>/``). The commit is signed by
a runner key and appended by compare-and-swap; a writer that loses the race re-parents the same
tree on the new tip, so concurrent runs form one linear chain and none is lost.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pygit2

from gitaudit import checkpoint
from gitaudit.crypto.commits import SNAPSHOT_HINT, create_signed_commit, snapshot_refusal
from gitaudit.errors import LedgerError
from gitaudit.ledger.objects import (
    blob_at,
    commit_of,
    dumps,
    dumps_text,
    loads,
    tree_of,
    write_tree,
)
from gitaudit.ledger.records import RunRecord, parse_run
from gitaudit.ledger.refs import RefConflict, cas_update, read_ref, runs_ref

if TYPE_CHECKING:  # annotations only: the gate reads runs without the check runner
    from gitaudit.checks.execute import CheckResult
    from gitaudit.crypto.signers import Signer

MAX_RETRIES = 200
RUN_FILES = {"run.json": "blob", "summary.md": "blob", "steps": "tree"}
"""What the top of a run commit's tree may hold (``steps`` a folder, the others files)."""


def foreign_entries(tree: pygit2.Tree) -> list[str]:
    """The entries at the top of *tree* that no run commit holds (folders with a final ``/``):
    a run's tree is nothing else, so a commit with more is no run to sign again."""
    return sorted(
        f"{entry.name}/" if entry.type_str == "tree" else str(entry.name)
        for entry in tree
        if RUN_FILES.get(str(entry.name)) != entry.type_str
    )


def _check_files(prefix: str, results: Iterable[CheckResult]) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for n, result in enumerate(results):
        base = f"{prefix}/{n}"
        files[f"{base}/result.json"] = dumps(result.to_json())
        files[f"{base}/stdout"] = result.stdout
        files[f"{base}/stderr"] = result.stderr
    return files


def evidence_files(
    run_json: Mapping[str, Any],
    summary_md: str,
    step_results: Mapping[
        str,
        tuple[
            Iterable[CheckResult],
            Mapping[str, Iterable[CheckResult]],
            Iterable[tuple[str, str, Iterable[CheckResult]]],
        ],
    ],
) -> dict[str, bytes]:
    """The complete file map of a run commit's tree."""
    steps = run_json["steps"]
    texts = {sid: dumps_text(entry) for sid, entry in steps.items()}
    files = {"run.json": _run_json(run_json, texts), "summary.md": summary_md.encode()}
    for sid, (checks, outputs, upstream) in step_results.items():
        root = f"steps/{sid}"
        files[f"{root}/result.json"] = (texts[sid] + "\n").encode()
        files.update(_check_files(f"{root}/checks", checks))
        for name, results in outputs.items():
            files.update(_check_files(f"{root}/outputs/{name}", results))
        for up_step, up_name, results in upstream:
            files.update(_check_files(f"{root}/upstream/{up_step}/{up_name}", results))
    return files


def _run_json(run_json: Mapping[str, Any], texts: Mapping[str, str]) -> bytes:
    """``dumps(run_json)``, with each step's entry the text its ``result.json`` holds, indented
    one level deeper (JSON text holds no line break but between tokens), rather than written
    twice: the same bytes in half the time. The entries go where a mark no value holds stands."""
    if not texts:
        return dumps(run_json)
    mark = json.dumps(f"\0{secrets.token_hex(16)}\0")
    body = dumps_text({**run_json, "steps": json.loads(mark)})
    if body.count(mark) != 1:  # cannot happen: the mark is new; written the long way then
        return dumps(run_json)
    entries = ",\n".join(
        f"    {json.dumps(sid, ensure_ascii=False)}: " + texts[sid].replace("\n", _DEEPER)
        for sid in sorted(texts)
    )
    return (body.replace(mark, "{\n" + entries + "\n  }") + "\n").encode()


_DEEPER = "\n    "  # a step's entry in run.json: two levels deeper than in its result.json


TipCheck = Callable[[pygit2.Oid | None], None]
"""What a writer requires of the tip it is about to sign on (raises when it may not)."""


def append_run(
    repo: pygit2.Repository,
    plan: str,
    files: Mapping[str, bytes],
    message: str,
    signer: Signer,
    *,
    check_tip: TipCheck | None = None,
) -> pygit2.Oid:
    """Write the tree, sign a commit on the current tip, and move the ref by compare-and-swap.
    Each tip read (the first, and the new one after a lost race) is handed to *check_tip*
    before anything is signed on it."""
    try:
        tree = write_tree(repo, files)
    except (OSError, pygit2.GitError) as exc:
        raise LedgerError(
            f"cannot write the evidence of plan {plan!r}: {exc}; nothing was recorded",
            hint="free disk space or fix the repository's permissions, then run again",
        ) from exc
    ref = runs_ref(plan)
    for _ in range(MAX_RETRIES):
        tip = read_ref(repo, ref)
        if tip is not None:
            commit_of(repo, tip, ref)
        if check_tip is not None:
            check_tip(tip)
        commit = create_signed_commit(
            repo, tree=tree, parents=[tip] if tip else [], message=message, signer=signer
        )
        checkpoint.reached("run.objects-written", str(commit))
        try:
            cas_update(repo, ref, commit, tip, f"gitaudit: {message.splitlines()[0]}")
        except RefConflict:
            continue
        checkpoint.reached("run.ref-moved", str(commit))
        return commit
    raise LedgerError(f"{ref} kept moving while recording; gave up after {MAX_RETRIES} attempts")


def read_run(repo: pygit2.Repository, oid: pygit2.Oid | str, what: str = "run") -> RunRecord:
    """The typed record of a run commit (:mod:`gitaudit.ledger.records`); LedgerError naming the
    commit (and the JSON path) when it is malformed."""
    commit = commit_of(repo, oid if isinstance(oid, pygit2.Oid) else pygit2.Oid(hex=oid), what)
    return run_of(repo, commit, tree_of(commit, what), what)


def run_of(
    repo: pygit2.Repository, commit: pygit2.Commit, tree: pygit2.Tree, what: str = "run"
) -> RunRecord:
    """:func:`read_run` of a commit already looked up, and its tree (``commit.tree``); a
    work-tree snapshot (an older gitaudit signed them like runs) is never read as one."""
    refusal = snapshot_refusal(commit.message, str(commit.id)[:12], "a run")
    if refusal is not None:
        raise LedgerError(f"{what}: {refusal}", hint=SNAPSHOT_HINT)
    raw = blob_at(repo, tree, "run.json")
    if raw is None:
        raise LedgerError(f"{what} {str(commit.id)[:12]} has no run.json")
    try:
        doc = loads(raw)
    except ValueError as exc:
        raise LedgerError(
            f"{what} {str(commit.id)[:12]}: run.json is not valid JSON ({exc})"
        ) from None
    return parse_run(str(commit.id), commit.commit_time, doc)


def resolve_run(
    repo: pygit2.Repository, plan: str | None, spec: str, plans: Iterable[str]
) -> pygit2.Oid:
    """RUN as a commit id, a unique prefix, or ``latest`` (of *plan*, or of the only plan)."""
    if spec == "latest":
        names = [plan] if plan else list(plans)
        tips = [(n, read_ref(repo, runs_ref(n))) for n in names]
        tips = [(n, t) for n, t in tips if t is not None]
        if not tips:
            raise LedgerError("no runs recorded yet", hint="run `git audit run`")
        if len(tips) > 1:
            newest = max(tips, key=lambda nt: commit_of(repo, nt[1], "run").commit_time)  # type: ignore[arg-type]
            return newest[1]  # type: ignore[return-value]
        return tips[0][1]  # type: ignore[return-value]
    try:
        obj = repo.revparse_single(spec)
    except (KeyError, ValueError, pygit2.GitError):
        raise LedgerError(f"no run commit {spec!r}", hint="see `git audit log`") from None
    return obj.id
