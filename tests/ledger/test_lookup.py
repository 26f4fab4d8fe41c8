"""``gitaudit.ledger.lookup.confirm``: the lookup cache's answer is checked against the ledger
itself. The cache is a file an agent can edit; the run it names must be for this tree and
contract, lie on the ledger's first-parent chain, and no newer run for the tree may exist.

End to end (the cache edited under a real ledger, judged by the gate and `git audit status`):
``tests/adversarial/test_evidence.py``.
"""

from __future__ import annotations

import json
import re

import pygit2
import pytest

from gitaudit import secret
from gitaudit.errors import LedgerError
from gitaudit.git.repo import Repo, open_repo
from gitaudit.ledger import lookup
from gitaudit.ledger.objects import dumps
from gitaudit.ledger.records import RUN_FORMAT, RunRecord, parse_run
from gitaudit.ledger.refs import ledger_ref
from gitaudit.verdict import StepStatus
from tests.gitrepo import GitRepo

TREE = "a" * 40
OTHER_TREE = "b" * 40
CONTRACT = "sha256:" + "c" * 64


def _run(git: pygit2.Repository, parent: pygit2.Oid | None, tree: str, contract: str) -> pygit2.Oid:
    """A ledger commit with the trailers a run commit carries (confirm reads nothing else)."""
    who = pygit2.Signature("runner", "runner@example.test", 1_700_000_000, 0)
    message = f"run\n\nAudit-Tree: {tree}\nAudit-Contract: {contract}\n"
    empty = git.TreeBuilder().write()
    return git.create_commit(None, who, who, message, empty, [parent] if parent else [])


def _record(commit: pygit2.Oid, tree: str = TREE, contract: str = CONTRACT) -> RunRecord:
    doc = {
        "format": RUN_FORMAT,
        "plan": "default",
        "verdict": "PASS",
        "contract_digest": contract,
        "tree": tree,
        "steps": {},
    }
    return parse_run(str(commit), 0, doc)


@pytest.fixture
def handle(repo: GitRepo) -> Repo:
    return open_repo(repo.path)


def _edited_hint(handle: Repo) -> str:
    cache = handle.gitdir / "gitaudit" / "index.sqlite"
    return f"the cache was edited; delete {cache} (it is rebuilt)"


def _confirm(handle: Repo, tip: pygit2.Oid, record: RunRecord) -> None:
    lookup.confirm(handle.git, handle.gitdir, tip, record, "default", TREE, CONTRACT)


def test_the_newest_run_for_the_tree_is_confirmed(handle: Repo) -> None:
    git = handle.git
    old = _run(git, None, TREE, "sha256:old")  # the same tree under an older contract
    run = _run(git, old, TREE, CONTRACT)
    other = _run(git, run, OTHER_TREE, CONTRACT)  # newer runs for other trees do not matter
    tip = _run(git, other, TREE, "sha256:new")
    _confirm(handle, run, _record(run))
    _confirm(handle, tip, _record(run))


def test_a_newer_run_for_the_tree_refuses_the_answer(handle: Repo) -> None:
    """The cache names an older PASS run; a newer run for the same tree and contract (its FAIL,
    say) lies between it and the tip."""
    git = handle.git
    passed = _run(git, None, TREE, CONTRACT)
    failed = _run(git, passed, TREE, CONTRACT)
    tip = _run(git, failed, OTHER_TREE, CONTRACT)
    with pytest.raises(LedgerError) as caught:
        _confirm(handle, tip, _record(passed))
    assert caught.value.message == (
        f"a newer run ({str(failed)[:12]}) than the one the lookup cache names exists for tree "
        f"{TREE[:12]}"
    )
    assert re.fullmatch(
        r"the cache was edited; delete .*index\.sqlite \(it is rebuilt\)", str(caught.value.hint)
    )
    _confirm(handle, tip, _record(failed))


@pytest.mark.parametrize(("tree", "contract"), [(OTHER_TREE, CONTRACT), (TREE, "sha256:x")])
def test_a_run_for_another_tree_or_contract_is_refused(
    handle: Repo, tree: str, contract: str
) -> None:
    run = _run(handle.git, None, tree, contract)
    with pytest.raises(LedgerError) as caught:
        _confirm(handle, run, _record(run, tree, contract))
    assert caught.value.message == (
        f"the lookup cache names run {str(run)[:12]}, which is not evidence for tree "
        f"{TREE[:12]} under this contract"
    )
    assert caught.value.hint == _edited_hint(handle)


def test_a_run_off_the_ledger_is_refused(handle: Repo) -> None:
    git = handle.git
    tip = _run(git, _run(git, None, OTHER_TREE, CONTRACT), OTHER_TREE, CONTRACT)
    stray = _run(git, None, TREE, CONTRACT)  # on no chain the tip reaches
    with pytest.raises(LedgerError) as caught:
        _confirm(handle, tip, _record(stray))
    assert caught.value.message == (
        f"run {str(stray)[:12]} named by the lookup cache is not on the ledger of 'default'"
    )


def test_deep_in_the_ledger_git_confirms(handle: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past WALK_IN_PYTHON commits, git's own search decides, with the same rules."""
    monkeypatch.setattr(lookup, "WALK_IN_PYTHON", 2)
    git = handle.git
    passed = _run(git, None, TREE, CONTRACT)
    tip = passed
    for _ in range(4):
        tip = _run(git, tip, OTHER_TREE, CONTRACT)
    _confirm(handle, tip, _record(passed))
    failed = _run(git, passed, TREE, CONTRACT)
    tip = failed
    for _ in range(4):
        tip = _run(git, tip, OTHER_TREE, CONTRACT)
    with pytest.raises(LedgerError) as caught:
        _confirm(handle, tip, _record(passed))
    assert caught.value.message == (
        f"run {str(passed)[:12]} named by the lookup cache is not the newest run of 'default' "
        f"for tree {TREE[:12]} (the newest is {str(failed)[:12]})"
    )
    assert "index.sqlite" in str(caught.value.hint)
    stray = _run(git, None, OTHER_TREE, CONTRACT)
    on_top = _run(git, stray, OTHER_TREE, CONTRACT)
    for _ in range(3):
        on_top = _run(git, on_top, OTHER_TREE, CONTRACT)
    with pytest.raises(LedgerError) as caught:
        _confirm(handle, on_top, _record(passed))
    assert caught.value.message.endswith("(it is not on the ledger's first-parent chain)")


# ------------------------------------------------------------------ find_run and every_run


def _recorded(git: pygit2.Repository, parent: pygit2.Oid | None, tree: str) -> pygit2.Oid:
    """A run commit as the recorder writes one: run.json in its tree, the trailers in its
    message (lookup reads both; signatures are the gate's business)."""
    doc = {
        "format": RUN_FORMAT,
        "plan": "default",
        "verdict": "PASS",
        "contract_digest": CONTRACT,
        "tree": tree,
        "steps": {},
    }
    builder = git.TreeBuilder()
    builder.insert("run.json", git.create_blob(dumps(doc)), pygit2.GIT_FILEMODE_BLOB)
    who = pygit2.Signature("runner", "runner@example.test", 1_700_000_000, 0)
    message = f"run\n\nAudit-Tree: {tree}\nAudit-Contract: {CONTRACT}\n"
    return git.create_commit(None, who, who, message, builder.write(), [parent] if parent else [])


@pytest.fixture
def ledger(handle: Repo) -> tuple[Repo, list[pygit2.Oid]]:
    """refs/audit/runs/default: a run for TREE, one for another tree, one for TREE again."""
    git = handle.git
    first = _recorded(git, None, TREE)
    other = _recorded(git, first, OTHER_TREE)
    last = _recorded(git, other, TREE)
    git.references.create(ledger_ref("default"), last)
    return handle, [first, other, last]


def _every(handle: Repo, tip: pygit2.Oid) -> list[str]:
    found = lookup.every_run(handle.git, handle.gitdir, "default", TREE, CONTRACT, tip)
    return [r.commit for r in found]


def test_every_run_for_the_tree_newest_first(ledger: tuple[Repo, list[pygit2.Oid]]) -> None:
    handle, (first, _, last) = ledger
    assert _every(handle, last) == [str(last), str(first)]
    git, gitdir = handle.git, handle.gitdir
    assert lookup.every_run(git, gitdir, "default", OTHER_TREE, "sha256:x", last) == []


def test_every_run_of_a_pushed_segment_then_of_the_ledger(
    ledger: tuple[Repo, list[pygit2.Oid]],
) -> None:
    """A push being received: its runs (not yet on the ref) first, then the ledger's own."""
    handle, (first, _, last) = ledger
    pushed = _recorded(handle.git, last, TREE)
    tip = _recorded(handle.git, pushed, OTHER_TREE)
    assert _every(handle, tip) == [str(pushed), str(last), str(first)]


def test_every_run_of_a_whole_pushed_ledger(handle: Repo) -> None:
    git = handle.git
    first = _recorded(git, None, TREE)
    tip = _recorded(git, first, OTHER_TREE)
    assert _every(handle, tip) == [str(first)]  # no ref yet: the pushed chain is all there is


@pytest.mark.parametrize("blind", ["i18n.logOutputEncoding", "i18n.commitEncoding", "shallow"])
def test_every_run_reads_the_messages_and_the_chain_as_stored(
    repo: GitRepo, ledger: tuple[Repo, list[pygit2.Oid]], blind: str
) -> None:
    """git's search matches the messages re-encoded into the log's output encoding, and stops at
    a commit the shallow file names: `UTF-16` in the repository's config matched nothing, and
    the shallow file hid the runs below it. The search reads them as stored."""
    handle, (first, other, last) = ledger
    if blind == "shallow":
        (handle.gitdir / "shallow").write_text(f"{other}\n")
    else:
        repo.git("config", blind, "UTF-16")
    assert _every(handle, last) == [str(last), str(first)]


def test_a_source_the_walk_never_reaches_is_not_proven(
    ledger: tuple[Repo, list[pygit2.Oid]],
) -> None:
    """A step sought down to a source that is not on the chain (or that a search stopping short
    never reached) has no known newest execution: UNKNOWN at its source, never "none newer"."""
    handle, (first, _, last) = ledger
    stray = str(_recorded(handle.git, first, TREE))  # a branch off the chain

    def newest(sources: dict[str, str]) -> dict[str, tuple[StepStatus, str]]:
        return lookup.newest_executions(
            handle.git, handle.gitdir, last, TREE, CONTRACT, [], sources
        )

    assert newest({"a": str(first)}) == {}  # reached: nothing newer
    assert newest({"a": str(first), "b": stray}) == {"b": (StepStatus.UNKNOWN, stray)}


@pytest.mark.parametrize("in_python", [True, False])
def test_a_source_of_another_tree_is_met_where_the_chain_has_it(
    ledger: tuple[Repo, list[pygit2.Oid]], monkeypatch: pytest.MonkeyPatch, in_python: bool
) -> None:
    """A pass carried for unchanged inputs names a source of another tree, whose trailers git's
    search for the tree's runs does not match: the walk meets it where the chain has it, read
    here or past the commits read here (then it was never met, and its step was unknown); a
    source of another tree that is not on the chain stays unknown."""
    handle, (_, other, last) = ledger
    if not in_python:
        monkeypatch.setattr(lookup, "WALK_IN_PYTHON", 0)  # git's search from the tip on
    stray = str(_recorded(handle.git, other, OTHER_TREE))  # a branch off the chain

    def newest(sources: dict[str, str]) -> dict[str, tuple[StepStatus, str]]:
        return lookup.newest_executions(
            handle.git, handle.gitdir, last, TREE, CONTRACT, [], sources
        )

    assert newest({"a": str(other)}) == {}
    assert newest({"a": str(other), "b": stray}) == {"b": (StepStatus.UNKNOWN, stray)}


def _find(handle: Repo, pushed: pygit2.Oid | None = None) -> tuple[str | None, str | None]:
    found = lookup.find_run(handle.git, handle.gitdir, "default", TREE, CONTRACT, pushed=pushed)
    record = found.record.commit if found.record is not None else None
    return record, str(found.tip) if found.tip is not None else None


def test_find_run_through_the_cache_confirmed(ledger: tuple[Repo, list[pygit2.Oid]]) -> None:
    handle, (_, _, last) = ledger
    assert _find(handle) == (str(last), str(last))


def test_find_run_in_a_pushed_segment_first(ledger: tuple[Repo, list[pygit2.Oid]]) -> None:
    """The newest run of a push being received is found in the push (its objects are not on
    any ref yet); a push without one is answered from the ledger, for the pushed tip."""
    handle, (_, _, last) = ledger
    pushed = _recorded(handle.git, last, TREE)
    tip = _recorded(handle.git, pushed, OTHER_TREE)
    assert _find(handle, tip) == (str(pushed), str(tip))
    elsewhere = _recorded(handle.git, last, OTHER_TREE)
    assert _find(handle, elsewhere) == (str(last), str(elsewhere))


def test_find_run_without_a_ledger(handle: Repo) -> None:
    assert _find(handle) == (None, None)
    first = _recorded(handle.git, None, TREE)
    assert _find(handle, first) == (str(first), str(first))  # the first push of a ledger


# ------------------------------------------------------- remembered confirmations (confirmed.json)


def _statements(handle: Repo) -> list[dict[str, str]]:
    doc = json.loads((handle.gitdir / "gitaudit" / lookup.CONFIRMED).read_text())
    assert doc["format"] == lookup.CONFIRMED_FORMAT
    statements: list[dict[str, str]] = doc["statements"]
    return statements


def test_a_confirmation_is_remembered_once_per_tree_and_contract(
    ledger: tuple[Repo, list[pygit2.Oid]],
) -> None:
    """Each confirmation is kept as one statement per (plan, tree, contract), authenticated by
    the local key; a later confirmation at a newer tip replaces it, and the reader returns
    it."""
    handle, (_, _, last) = ledger
    assert _find(handle) == (str(last), str(last))
    (first,) = _statements(handle)
    key = secret.local_key(str(handle.entered), create=False)
    assert key is not None
    statement = lookup._statement("default", TREE, CONTRACT, str(last), str(last))
    assert first == {
        "plan": "default",
        "tree": TREE,
        "contract": CONTRACT,
        "run": str(last),
        "through": str(last),
        "mac": secret.mac(key, statement),
    }
    newer = _recorded(handle.git, last, OTHER_TREE)
    handle.git.references.create(ledger_ref("default"), newer, force=True)
    assert _find(handle) == (str(last), str(newer))
    (second,) = _statements(handle)
    assert (second["run"], second["through"]) == (str(last), str(newer))
    assert lookup._read_confirmed(handle.gitdir) == [second]


def test_an_oversized_confirmation_file_is_not_read(handle: Repo) -> None:
    """confirmed.json is a file anyone who can write .git/ can write: past 1 MiB it is not
    parsed at all (nothing is confirmed from it; every confirmation walks)."""
    item = {"plan": "default", "tree": TREE, "contract": CONTRACT, "run": "r", "through": "t"}
    doc = {"format": lookup.CONFIRMED_FORMAT, "statements": [item]}
    path = handle.gitdir / "gitaudit" / lookup.CONFIRMED
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    assert lookup._read_confirmed(handle.gitdir) == [item]
    path.write_text(" " * (1 << 20) + json.dumps(doc))  # valid JSON, past the first MiB
    assert lookup._read_confirmed(handle.gitdir) == []
