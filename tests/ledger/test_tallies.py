"""The tallies behind `git audit run`'s retry rules (failed attempts, unsettled outcomes) are
counted from the signed chain and believed only under the local key's MAC, for the tip they were
counted up to: rewritten, replayed on another tip, or kept without a key, they are counted
again, and the answer is the chain's."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pygit2
import pytest

from gitaudit.errors import LedgerError
from gitaudit.ledger import index
from gitaudit.ledger.records import RUN_FORMAT
from gitaudit.ledger.refs import runs_ref
from gitaudit.ledger.tallies import RECENT, Tallies
from tests.fuzz._support import commit_files

WHO = pygit2.Signature("t", "t@example.test", 1_700_000_000, 0)


def _append(repo: pygit2.Repository, steps: dict[str, str], plan: str = "default") -> str:
    """A run commit on top of the plan's ledger with *steps* (step -> status); its id."""
    ref = runs_ref(plan)
    parents = [repo.references[ref].target] if ref in repo.references else []
    doc = {
        "format": RUN_FORMAT,
        "plan": plan,
        "tree": f"tree-{len(parents)}",
        "contract_digest": "sha256:c",
        "verdict": "FAIL",
        "steps": {s: {"status": status, "input_digest": ""} for s, status in steps.items()},
    }
    tree = repo[commit_files(repo, {"run.json": json.dumps(doc).encode()})]
    assert isinstance(tree, pygit2.Commit)
    oid = repo.create_commit(None, WHO, WHO, "run", tree.tree_id, parents)
    repo.references.create(ref, oid, force=True)
    return str(oid)


@pytest.fixture
def ledger(tmp_path: Path) -> tuple[pygit2.Repository, Path]:
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    return repo, Path(repo.path)


def _db(gitdir: Path) -> sqlite3.Connection:
    return sqlite3.connect(gitdir / "gitaudit" / index.FILENAME, isolation_level=None)


def _answers(repo: pygit2.Repository, gitdir: Path) -> tuple[dict[str, int], dict[str, str]]:
    return (
        index.tallies(repo, gitdir, "default").failures("sha256:c"),
        index.tallies(repo, gitdir, "default").unsettled(),
    )


def test_tallies_round_trip_and_refuse_what_dump_does_not_write() -> None:
    tallies = Tallies()
    tallies.add(
        "c1", "sha256:c", {"a": ("failed", "d1"), "b": ("unknown", ""), "x": ("blocked", "")}
    )
    tallies.add("c2", "sha256:d", {"a": ("failed", "d2"), "b": ("passed", "")})
    tallies.add("c3", "sha256:c", {"a": ("interrupted", "d2")})
    assert Tallies.load(tallies.dump()) == tallies
    assert tallies.failures("sha256:c") == {"a": 1} and tallies.failures("sha256:d") == {"a": 1}
    assert tallies.failures("sha256:c", {"a": 1}) == {}
    assert tallies.unsettled() == {"a": "c3"}
    assert tallies.newest_with("a", "d1") == ("failed", "d1", "c1")
    assert tallies.newest_with("a", "d2") == ("interrupted", "d2", "c3")
    assert tallies.newest_with("b", "") == ("passed", "", "c2")
    assert tallies.newest_with("x", "") is None
    for text in ("", "[]", '{"failed": [[1]], "recent": []}', '{"failed": []}', "{"):
        assert Tallies.load(text) is None


def test_a_step_keeps_its_last_executions_with_inputs_and_its_newest_without() -> None:
    tallies = Tallies()
    for n in range(RECENT + 3):
        tallies.add(f"c{n}", "sha256:c", {"a": ("passed", f"d{n}"), "b": ("passed", "")})
    assert len(tallies.recent["a"]) == RECENT and tallies.recent["b"] == [
        ("passed", "", f"c{RECENT + 2}")
    ]
    assert tallies.newest_with("a", f"d{RECENT + 2}") == (
        "passed",
        f"d{RECENT + 2}",
        f"c{RECENT + 2}",
    )
    assert tallies.newest_with("a", "d3") == ("passed", "d3", "c3")
    assert tallies.newest_with("a", "d2") is None  # eight executions with other inputs since


def test_kept_tallies_grow_with_the_ledger_without_a_walk(
    ledger: tuple[pygit2.Repository, Path],
) -> None:
    """Once counted, the tallies are brought up to a newer tip from the runs newer than theirs:
    the rows already indexed are not rebuilt (a mark in them survives)."""
    repo, gitdir = ledger
    first = _append(repo, {"a": "failed", "b": "unknown"})
    assert _answers(repo, gitdir) == ({"a": 1}, {"b": first})
    with _db(gitdir) as db:
        db.execute("UPDATE runs SET tree='kept'")
    _append(repo, {"a": "failed", "b": "passed"})
    assert _answers(repo, gitdir) == ({"a": 2}, {})
    with _db(gitdir) as db:
        assert db.execute("SELECT tree FROM runs ORDER BY seq").fetchall() == [
            ("kept",),
            ("tree-1",),
        ]


FORGERIES = {
    "zeroed": """UPDATE tallies SET body='{"failed":[],"recent":[]}'""",
    "mac-garbled": "UPDATE tallies SET mac=substr(mac, 2) || '0'",
    "moved-to-another-tip": "UPDATE tallies SET tip=(SELECT commit_id FROM runs WHERE seq=1)",
    "dropped": "DELETE FROM tallies",
    "not-json": "UPDATE tallies SET body='not json'",
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_tallies_that_do_not_hold_are_counted_again(
    ledger: tuple[pygit2.Repository, Path], forgery: str
) -> None:
    """The tallies are rewritten to say nothing failed and nothing is unsettled (their MAC
    stale), moved to another tip, dropped or garbled: the answer is counted from the chain."""
    repo, gitdir = ledger
    _append(repo, {"a": "failed"})
    unsettled = _append(repo, {"a": "failed", "b": "unknown"})
    expected = ({"a": 2}, {"b": unsettled})
    assert _answers(repo, gitdir) == expected
    with _db(gitdir) as db:
        db.execute(FORGERIES[forgery])
    assert _answers(repo, gitdir) == expected


def test_without_a_private_key_the_chain_is_counted_every_time(
    ledger: tuple[pygit2.Repository, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key others may read authenticates nothing: no tallies are kept, and each question
    counts the chain (slower, never wrong)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "memo.key").write_bytes(b"k" * 32)
    (home / "memo.key").chmod(0o644)
    monkeypatch.setenv("GITAUDIT_HOME", str(home))
    repo, gitdir = ledger
    unsettled = _append(repo, {"a": "failed", "b": "interrupted"})
    assert _answers(repo, gitdir) == ({"a": 1}, {"b": unsettled})
    with _db(gitdir) as db:
        assert db.execute("SELECT COUNT(*) FROM tallies").fetchone() == (0,)
    assert _answers(repo, gitdir) == ({"a": 1}, {"b": unsettled})


def test_a_cache_that_is_not_a_database_is_named_with_its_fix(
    ledger: tuple[pygit2.Repository, Path],
) -> None:
    """The agent overwrites the cache with bytes that are no database: the questions fail
    closed with one line naming the file and how to rebuild it, and deleting it does."""
    repo, gitdir = ledger
    _append(repo, {"a": "failed"})
    path = gitdir / "gitaudit" / index.FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not a database, but long enough to be read as a header" * 4)
    with pytest.raises(LedgerError) as caught:
        index.tallies(repo, gitdir, "default")
    assert str(path) in str(caught.value) and "delete it" in str(caught.value.hint)
    for leftover in path.parent.glob(index.FILENAME + "*"):
        leftover.unlink()
    assert _answers(repo, gitdir) == ({"a": 1}, {})
