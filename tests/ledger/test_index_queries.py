"""The lookup index's per-step questions (``gitaudit.ledger.index``, its tallies) answer as a
walk of the whole ledger would, newest run first: failed attempts per step, which steps' last
execution is unknown or interrupted, and which run's passing execution a step with given inputs
may carry (the newest execution with those inputs, when one of the last few executions of the
step had them).

The walk is the specification (it is what the index answered when it read every row); random
ledgers of statuses and input digests, real commits, compare the two."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pygit2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitaudit.ledger import index, tallies
from gitaudit.ledger.records import RUN_FORMAT
from gitaudit.ledger.refs import runs_ref
from tests.fuzz._support import bare_repo, commit_files

EXECUTED = ("passed", "failed", "unknown", "interrupted")
STATUSES = (*EXECUTED, "carried", "not_run", "blocked", "exhausted")
STEPS = ("a", "b", "c")
DIGESTS = ("sha256:1", "sha256:2")

Run = dict[str, tuple[str, str]]  # step -> (status, input digest)


def _ledger(repo: pygit2.Repository, plan: str, runs: list[Run]) -> list[str]:
    """Run commits for *runs*, oldest first, on the plan's ref; their ids."""
    who = pygit2.Signature("t", "t@example.test", 1_700_000_000, 0)
    parents: list[pygit2.Oid] = []
    ids: list[str] = []
    for n, run in enumerate(runs):
        doc = {
            "format": RUN_FORMAT,
            "plan": plan,
            "tree": f"tree-{n}",
            "contract_digest": "sha256:c",
            "verdict": "PASS",
            "steps": {s: {"status": st_, "input_digest": d} for s, (st_, d) in run.items()},
        }
        tree = repo[commit_files(repo, {"run.json": json.dumps(doc).encode()})]
        assert isinstance(tree, pygit2.Commit)
        oid = repo.create_commit(None, who, who, f"run {n}", tree.tree_id, parents)
        parents = [oid]
        ids.append(str(oid))
    repo.references.create(runs_ref(plan), parents[0], force=True)
    return ids


def _walked_unresolved(runs: list[Run], ids: list[str]) -> dict[str, str]:
    latest: dict[str, tuple[str, str]] = {}
    for run, commit in reversed(list(zip(runs, ids, strict=True))):
        for step, (status, _) in run.items():
            if status in EXECUTED:
                latest.setdefault(step, (status, commit))
    return {s: c for s, (st_, c) in latest.items() if st_ in ("unknown", "interrupted")}


def _walked_failures(runs: list[Run]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for run in runs:
        for step, (status, _) in run.items():
            if status == "failed":
                counts[step] = counts.get(step, 0) + 1
    return counts


def _walked_newest(
    runs: list[Run], ids: list[str], step: str, digest: str
) -> tuple[tuple[str, str, str] | None, int]:
    """The newest execution of *step* with *digest* (status, digest, commit), and how many
    executions of the step came after it."""
    later = 0
    for run, commit in reversed(list(zip(runs, ids, strict=True))):
        status, had = run.get(step, ("", ""))
        if status not in EXECUTED:
            continue
        if had == digest:
            return (status, had, commit), later
        later += 1
    return None, later


runs_strategy = st.lists(
    st.dictionaries(
        st.sampled_from(STEPS),
        st.tuples(st.sampled_from(STATUSES), st.sampled_from(DIGESTS)),
    ),
    min_size=1,
    max_size=16,
)


@settings(max_examples=150, deadline=None)
@given(runs=runs_strategy, wanted=st.dictionaries(st.sampled_from(STEPS), st.sampled_from(DIGESTS)))
def test_the_index_answers_as_a_walk_of_the_ledger(runs: list[Run], wanted: dict[str, str]) -> None:
    repo = bare_repo()
    plan = f"p{abs(hash((json.dumps(runs), json.dumps(wanted)))) % 10**12}"
    ids = _ledger(repo, plan, runs)
    gitdir = Path(repo.path)
    counted = index.tallies(repo, gitdir, plan)
    assert counted.unsettled() == _walked_unresolved(runs, ids)
    assert counted.failures("sha256:c") == _walked_failures(runs)
    assert counted.failures("sha256:other") == {}
    for step, digest in wanted.items():
        newest, later = _walked_newest(runs, ids, step, digest)
        if later < tallies.RECENT:
            assert counted.newest_with(step, digest) == newest
        else:  # ran with other inputs too often since: not known, so nothing is carried
            assert counted.newest_with(step, digest) is None


@pytest.mark.parametrize("version", [2, 3])
def test_an_older_index_is_brought_up_to_date_in_place(tmp_path: Path, version: int) -> None:
    """Versions 2 and 3 hold the same runs rows as version 4 (whose tallies replace their steps
    rows): such a file is brought up to date in place, its runs rows kept and nothing walked
    again until a question needs the tallies, which are counted from the chain. Any other
    version is dropped and rebuilt."""
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    gitdir = Path(repo.path)
    ids = _ledger(repo, "default", [{"a": ("unknown", "sha256:1")}])
    index.sync(repo, gitdir, "default")
    path = gitdir / "gitaudit" / index.FILENAME
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE tallies")
        conn.execute(  # what versions 2 and 3 kept per step
            "CREATE TABLE steps (plan TEXT NOT NULL, seq INTEGER NOT NULL, step TEXT NOT NULL, "
            "status TEXT NOT NULL, contract TEXT NOT NULL, input_digest TEXT NOT NULL)"
        )
        conn.execute("CREATE INDEX steps_by_step ON steps (plan, step, seq)")
        conn.execute(f"PRAGMA user_version={version}")
        conn.execute("UPDATE runs SET tree='kept'")  # a mark: a rebuild would write tree-0
    assert index.sync(repo, gitdir, "default") == ids[0]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == index.SCHEMA_VERSION
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "tallies" in names and "steps" not in names and "steps_by_step" not in names
        assert conn.execute("SELECT tree FROM runs").fetchall() == [("kept",)]
    assert index.tallies(repo, gitdir, "default").unsettled() == {"a": ids[0]}
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version=1")
    index.sync(repo, gitdir, "default")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT tree FROM runs").fetchall() == [("tree-0",)]


HAND_EDITS = {
    "commit id not hex": "UPDATE runs SET commit_id='zz'",
    "commit id a blob": "UPDATE runs SET commit_id=x'00ff'",
    "seq and time as text": "UPDATE runs SET seq='abc', time='x'",
    "tip not hex": "UPDATE meta SET tip='nothex'",
    "count as text": "UPDATE meta SET count='x'",
}


@pytest.mark.parametrize("edit", sorted(HAND_EDITS))
def test_a_hand_edited_row_is_a_one_line_error_or_rebuilt(tmp_path: Path, edit: str) -> None:
    """SQLite keeps whatever type an UPDATE puts in a column; the lookup cache is anyone's to
    edit. A meta row that is not one sync writes is indexed again; a run row names the file
    and the fix, and the gate turns that into a reason: never a traceback (`status`, `log`
    and `run` raised ValueError, TypeError or pygit2's InvalidError before)."""
    from tests.agent.host import run_passing, sealed_project
    from tests.gitrepo import audit

    repo = sealed_project(tmp_path / "project")
    run_passing(repo)
    db = repo.path / ".git" / "gitaudit" / index.FILENAME
    with sqlite3.connect(db) as conn:
        conn.execute(HAND_EDITS[edit])
    for args in (("status", "HEAD"), ("log",), ("run",)):
        done = audit(repo.path, *args)
        assert done.code in (0, 1, 2, 3), (args, done.code, done.err)
        assert "Traceback" not in done.err + done.out, (args, done.err)
        if done.code not in (0, 3):
            assert "lookup cache" in done.err + done.out and "rm " in done.err + done.out, (
                args,
                done.out,
                done.err,
            )


def test_a_busy_answer_to_the_first_statement_is_waited_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite answers SQLITE_BUSY at once, without its busy timeout, while another process
    rebuilds the write-ahead log's index on opening the cache: the first statement is tried
    again until the bound; anything else, or busy past the bound, is raised."""
    from gitaudit.ledger import index

    answers = ["busy", "busy", "ok"]

    class Flaky:
        def execute(self, statement: str) -> None:
            if answers.pop(0) == "busy":
                exc = sqlite3.OperationalError("database is locked")
                exc.sqlite_errorname = "SQLITE_BUSY_RECOVERY"
                raise exc

    index._first(Flaky(), "PRAGMA journal_mode=WAL")  # type: ignore[arg-type]
    assert answers == []
    monkeypatch.setattr(index, "BUSY_SECONDS", 0.0)
    answers[:] = ["busy", "ok"]
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        index._first(Flaky(), "PRAGMA journal_mode=WAL")  # type: ignore[arg-type]

    class Broken:
        def execute(self, statement: str) -> None:
            raise sqlite3.OperationalError("disk I/O error")

    with pytest.raises(sqlite3.OperationalError, match="disk"):
        index._first(Broken(), "PRAGMA journal_mode=WAL")  # type: ignore[arg-type]


def test_a_lookup_cache_sqlite_cannot_open_is_named_in_the_one_line_error(tmp_path: Path) -> None:
    """SQLite's own words for a file it cannot open or write ("unable to open database file",
    "database is locked", "disk I/O error") name no file: the error now names the lookup cache,
    and stays an OperationalError (the callers that only warn about the cache catch that)."""
    from tests.agent.host import run_passing, sealed_project
    from tests.gitrepo import audit

    repo = sealed_project(tmp_path / "project")
    run_passing(repo)
    db = repo.path / ".git" / "gitaudit" / index.FILENAME
    for leftover in db.parent.glob(index.FILENAME + "*"):
        leftover.unlink()
    db.mkdir()  # SQLite cannot open a folder
    with (
        pytest.raises(sqlite3.OperationalError, match=f"lookup cache {db}"),
        index._db(db.parent.parent),
    ):
        pass
    done = audit(repo.path, "log")
    assert done.code == 1, (done.code, done.out, done.err)
    assert "Traceback" not in done.err
    assert f"the lookup cache {db}" in done.err, done.err
