"""A rebuildable lookup index of run commits, so nothing walks the ledger linearly.

The ledger (``refs/audit/runs/<plan>``) is the truth; this SQLite file under
``<gitdir>/gitaudit/index.sqlite`` is a cache of it: for each run commit its position in the
chain, workspace tree, contract digest and verdict, and per ledger the tallies of its steps'
executions (:mod:`gitaudit.ledger.tallies`, under the local key's MAC: what decides which steps
a run executes is never taken from rows anyone can edit). :func:`sync` brings it up to date
incrementally (walking only commits newer than the indexed tip) and rebuilds a plan's rows from
scratch when the ref no longer descends from what was indexed. Deleting the file is always
safe.

Every function takes a ledger key: a plan name for the plan's own ledger, or the full name of a
remote-tracking copy of another clone's ledger (:func:`gitaudit.ledger.refs.ledger_ref`); the
``plan`` columns hold that key.
"""

from __future__ import annotations

import contextlib
import hmac
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pygit2

from gitaudit import secret
from gitaudit.errors import LedgerError
from gitaudit.frozen import frozen
from gitaudit.ledger import chain
from gitaudit.ledger.objects import blob_at, loads, tree_of
from gitaudit.ledger.records import lookup_keys
from gitaudit.ledger.refs import ledger_ref, read_ref
from gitaudit.ledger.tallies import Tallies
from gitaudit.ledger.tallies import mac as tallies_mac
from gitaudit.places import state_dir

FILENAME = "index.sqlite"
SCHEMA_VERSION = 4
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (plan TEXT PRIMARY KEY, tip TEXT NOT NULL, count INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    plan TEXT NOT NULL, seq INTEGER NOT NULL, commit_id TEXT NOT NULL, tree TEXT NOT NULL,
    contract TEXT NOT NULL, verdict TEXT NOT NULL, time INTEGER NOT NULL,
    PRIMARY KEY (plan, seq)
);
CREATE INDEX IF NOT EXISTS runs_by_tree ON runs (plan, tree, seq);
CREATE INDEX IF NOT EXISTS runs_by_commit ON runs (commit_id);
CREATE TABLE IF NOT EXISTS tallies (
    plan TEXT PRIMARY KEY, tip TEXT NOT NULL, body TEXT NOT NULL, mac TEXT NOT NULL
);
DROP TABLE IF EXISTS steps;
"""


@frozen
class IndexedRun:
    plan: str
    seq: int
    commit: str
    tree: str
    contract: str
    verdict: str
    time: int


_OID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def _path(gitdir: Path) -> Path:
    return Path(state_dir(gitdir)) / FILENAME


def _run_row(gitdir: Path, row: tuple[object, ...]) -> IndexedRun:
    """The run a row of the ``runs`` table names; LedgerError naming the file when the row is
    not one :func:`sync` writes (SQLite keeps whatever type a hand-made UPDATE puts in a
    column: a text ``seq``, a blob ``commit_id``)."""
    plan, seq, commit, tree, contract, verdict, time = row
    texts = (plan, tree, contract, verdict)
    if (
        isinstance(seq, int)
        and isinstance(time, int)
        and isinstance(commit, str)
        and _OID.fullmatch(commit)
        and all(isinstance(t, str) for t in texts)
    ):
        return IndexedRun(str(plan), seq, commit, str(tree), str(contract), str(verdict), time)
    path = _path(gitdir)
    raise LedgerError(
        f"the lookup cache {path} holds a malformed row of {plan!r} (run {commit!r:.50}): "
        "the cache was edited",
        hint=f"it is a cache of the signed ledger: delete it (`rm {path}*`), the next command "
        "rebuilds it",
    )


def _meta_row(row: tuple[object, ...] | None) -> tuple[str, int] | None:
    """The indexed tip and run count of a ``meta`` row; None (the ledger is indexed again)
    when there is none or it is not one :func:`sync` writes."""
    if row is None:
        return None
    tip, count = row
    if isinstance(tip, str) and _OID.fullmatch(tip) and isinstance(count, int) and count >= 0:
        return tip, count
    return None


BUSY_SECONDS = 30.0  # how long a connection waits for another process's lock


def _first(conn: sqlite3.Connection, statement: str) -> None:
    """*statement*, the connection's first: retried while SQLite answers busy for up to
    :data:`BUSY_SECONDS`. The busy timeout covers the locks of transactions, but not the moment
    another process rebuilds the write-ahead log's index as it opens the file (after the last
    connection closed it, or crashed): SQLite then answers ``SQLITE_BUSY`` at once. Eight
    concurrent runs, each opening and closing the cache several times, met it under load."""
    deadline = time.monotonic() + BUSY_SECONDS
    while True:
        try:
            conn.execute(statement)
            return
        except sqlite3.OperationalError as exc:
            busy = getattr(exc, "sqlite_errorname", "").startswith("SQLITE_BUSY")
            if not busy or time.monotonic() >= deadline:
                raise
        time.sleep(0.005)


@contextlib.contextmanager
def _db(gitdir: Path) -> Iterator[sqlite3.Connection]:
    path = _path(gitdir)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None)
    except sqlite3.OperationalError as exc:  # a folder or a dangling link there, say
        raise _named(exc, path) from exc
    try:
        _first(conn, "PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version in (2, 3):  # their runs rows are as they were: the steps rows became tallies
            conn.executescript(_SCHEMA)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        elif version != SCHEMA_VERSION:
            conn.executescript(
                "DROP TABLE IF EXISTS meta; DROP TABLE IF EXISTS runs; "
                "DROP TABLE IF EXISTS tallies;"
            )
            conn.executescript(_SCHEMA)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        yield conn
    except sqlite3.OperationalError as exc:  # locked, full, read-only: the file itself is fine
        raise _named(exc, path) from exc
    except sqlite3.DatabaseError as exc:  # not a database, or a damaged one
        raise LedgerError(
            f"the lookup cache {path} cannot be read: {exc}",
            hint=f"it is a cache of the signed ledger: delete it (`rm {path}*`), the next "
            "command rebuilds it",
        ) from None
    finally:
        conn.close()


def _named(exc: sqlite3.OperationalError, path: Path) -> sqlite3.OperationalError:
    """*exc* (still an OperationalError, which the callers that only warn expect) with the
    lookup cache's file named: SQLite's own text says only "database is locked"."""
    if str(path) in str(exc):
        return exc
    named = sqlite3.OperationalError(f"the lookup cache {path}: {exc}")
    named.sqlite_errorname = getattr(exc, "sqlite_errorname", "")
    return named


def _summary(
    repo: pygit2.Repository, commit: pygit2.Commit
) -> tuple[str, str, str, dict[str, tuple[str, str]]]:
    """(tree, contract, verdict, step -> (status, input digest)) from a run commit; an unreadable
    run.json gives placeholders (the gate and verify report it; the index only has to not
    crash)."""
    try:
        doc = loads(blob_at(repo, tree_of(commit, "run"), "run.json") or b"{}")
    except (ValueError, LedgerError):  # not JSON; its tree or run.json missing
        doc = None
    return lookup_keys(doc) or ("", "", "MALFORMED", {})


def sync(repo: pygit2.Repository, gitdir: Path, plan: str) -> str | None:
    """Index every run of *plan* up to the current tip of its ref; return the indexed tip.

    The ref is read inside the database's write lock, so a process holding an older view never
    "rebuilds" the index back to its older tip.
    """
    with _synced(repo, gitdir, plan) as view:
        return view.tip


@frozen
class _View:
    """The index of one ledger as of its tip, inside the write transaction that synced it: the
    number of runs indexed, and the tallies counted up to the tip (always there when asked
    for)."""

    conn: sqlite3.Connection
    tip: str | None
    count: int
    tallies: Tallies | None

    @property
    def counted(self) -> Tallies:
        assert self.tallies is not None, "the tallies were not asked for"
        return self.tallies


@contextlib.contextmanager
def _synced(
    repo: pygit2.Repository, gitdir: Path, plan: str, *, tallies: bool = False
) -> Iterator[_View]:
    """The index brought up to the ref's tip, held in one write transaction. Queries made on the
    connection see exactly that view. With *tallies*, the view's tallies are authenticated ones
    for the tip (counted again from the chain when the stored ones do not hold)."""
    with _db(gitdir) as conn:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield _sync_locked(conn, repo, plan, tallies)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def _sync_locked(
    conn: sqlite3.Connection, repo: pygit2.Repository, plan: str, need_tallies: bool
) -> _View:
    tip = read_ref(repo, ledger_ref(plan))
    row = _meta_row(conn.execute("SELECT tip, count FROM meta WHERE plan=?", (plan,)).fetchone())
    if tip is None:
        _clear(conn, plan)
        return _View(conn, None, 0, Tallies())  # no runs: nothing failed, nothing unsettled
    if row is not None and row[0] == str(tip) and not need_tallies:
        return _View(conn, str(tip), int(row[1]), None)
    key = secret.local_key(repo.workdir, create=False)
    kept = _kept_tallies(conn, key, plan, row[0] if row else None)
    if row is not None and row[0] == str(tip) and kept is not None:
        return _View(conn, str(tip), int(row[1]), kept)
    new: list[pygit2.Commit] = []
    # the tallies are counted from the chain when the kept ones do not hold: every run is read
    known = pygit2.Oid(hex=row[0]) if row and (kept is not None or not need_tallies) else None
    walked = chain.walk(repo, tip, stop=known, what=ledger_ref(plan))
    try:
        new.extend(walked)
        reached = known is not None and bool(new) and new[-1].parent_ids[:1] == [known]
    except LedgerError:  # not a commit: index what came before it, from scratch
        reached = False
    base = 0
    if row is not None and reached:
        base = int(row[1])
    else:
        _clear(conn, plan)  # the ref was rewritten: rebuild this plan's rows
        kept = Tallies()
    new.reverse()
    run_rows: list[tuple[str, int, str, str, str, str, int]] = []
    for offset, commit in enumerate(new, start=1):
        tree, contract, verdict, steps = _summary(repo, commit)
        run_rows.append(
            (plan, base + offset, str(commit.id), tree, contract, verdict, commit.commit_time)
        )
        if kept is not None:
            kept.add(str(commit.id), contract, steps)
    conn.executemany("INSERT INTO runs VALUES (?,?,?,?,?,?,?)", run_rows)
    conn.execute("INSERT OR REPLACE INTO meta VALUES (?,?,?)", (plan, str(tip), base + len(new)))
    _keep_tallies(conn, repo, key, plan, str(tip), kept)
    return _View(conn, str(tip), base + len(new), kept)


def _kept_tallies(
    conn: sqlite3.Connection, key: bytes | None, plan: str, tip: str | None
) -> Tallies | None:
    """The stored tallies of *plan* when they were counted up to *tip* and their MAC holds."""
    row = conn.execute("SELECT tip, body, mac FROM tallies WHERE plan=?", (plan,)).fetchone()
    if key is None or row is None or tip is None or row[0] != tip:
        return None
    if not hmac.compare_digest(str(row[2]), tallies_mac(key, plan, tip, str(row[1]))):
        return None
    return Tallies.load(str(row[1]))


def _keep_tallies(
    conn: sqlite3.Connection,
    repo: pygit2.Repository,
    key: bytes | None,
    plan: str,
    tip: str,
    kept: Tallies | None,
) -> None:
    """Store *kept*, the tallies up to *tip*, under the local key (made when there is none yet);
    without tallies or a key, drop the stored ones (the next question counts them again)."""
    key = key or (secret.local_key(repo.workdir, create=True) if kept is not None else None)
    if kept is None or key is None:
        conn.execute("DELETE FROM tallies WHERE plan=?", (plan,))
        return
    body = kept.dump()
    conn.execute(
        "INSERT OR REPLACE INTO tallies VALUES (?,?,?,?)",
        (plan, tip, body, tallies_mac(key, plan, tip, body)),
    )


def _clear(conn: sqlite3.Connection, plan: str) -> None:
    for table in ("meta", "runs", "tallies"):
        conn.execute(f"DELETE FROM {table} WHERE plan=?", (plan,))  # noqa: S608 (fixed names)


@frozen
class Lookup:
    """What the index says about one tree, from one consistent view of the ledger: the newest run
    for the tree under the contract asked for, the newest run for the tree under any contract,
    and the ledger tip both answers hold for."""

    run: IndexedRun | None
    any_contract: IndexedRun | None
    tip: str | None


_RUN_COLUMNS = "plan, seq, commit_id, tree, contract, verdict, time"


def lookup(repo: pygit2.Repository, gitdir: Path, plan: str, tree: str, contract: str) -> Lookup:
    """The newest runs of *plan* for *tree* (see :class:`Lookup`), even while runs are being
    appended by other processes: the sync and the queries share one transaction."""
    with _synced(repo, gitdir, plan) as view:
        conn, tip, count = view.conn, view.tip, view.count
        newest = conn.execute(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE plan=? AND tree=? AND seq <= ? "  # noqa: S608
            "ORDER BY seq DESC LIMIT 1",
            (plan, tree, count),
        ).fetchone()
        row = newest
        if newest is not None and newest[4] != contract:
            row = conn.execute(
                f"SELECT {_RUN_COLUMNS} FROM runs WHERE plan=? AND tree=? AND contract=? "  # noqa: S608
                "AND seq <= ? ORDER BY seq DESC LIMIT 1",
                (plan, tree, contract, count),
            ).fetchone()
    return Lookup(
        _run_row(gitdir, row) if row else None,
        _run_row(gitdir, newest) if newest else None,
        tip,
    )


def runs_for_tree(
    repo: pygit2.Repository, gitdir: Path, plan: str, tree: str, contract: str
) -> list[IndexedRun]:
    """Every run of *plan* for *tree* under *contract*, newest first, as the cache lists them
    (a row deleted here hides a run: what is taken from them is checked on the chain)."""
    sync(repo, gitdir, plan)
    with _db(gitdir) as conn:
        rows = conn.execute(
            f"SELECT {_RUN_COLUMNS} FROM runs "  # noqa: S608
            "WHERE plan=? AND tree=? AND contract=? ORDER BY seq DESC",
            (plan, tree, contract),
        ).fetchall()
    return [_run_row(gitdir, r) for r in rows]


def tallies(repo: pygit2.Repository, gitdir: Path, plan: str) -> Tallies:
    """The tallies of *plan*'s ledger up to its tip (:mod:`gitaudit.ledger.tallies`): failed
    attempts, unsettled outcomes and each step's newest executions, counted from the signed
    chain (kept under the local key's MAC, counted again when that does not hold)."""
    with _synced(repo, gitdir, plan, tallies=True) as view:
        return view.counted


def recent(repo: pygit2.Repository, gitdir: Path, plan: str, limit: int) -> list[IndexedRun]:
    """The newest *limit* runs of *plan*, newest first. LedgerError when the ref's tip is not a
    commit that can be read (missing, unparsable, a blob): the index holds nothing for such a
    tip, and an empty answer would read as "no runs recorded yet"."""
    tip = sync(repo, gitdir, plan)
    if tip is not None:
        next(chain.walk(repo, pygit2.Oid(hex=tip), what=ledger_ref(plan)))
    with _db(gitdir) as conn:
        rows = conn.execute(
            "SELECT plan, seq, commit_id, tree, contract, verdict, time FROM runs WHERE plan=? "
            "ORDER BY seq DESC LIMIT ?",
            (plan, limit),
        ).fetchall()
    return [_run_row(gitdir, r) for r in rows]


def is_earlier(
    repo: pygit2.Repository, gitdir: Path, plan: str, older: str, newer: str
) -> bool | None:
    """Whether run *older* comes before run *newer* on the ledger of *plan* (both on the current
    tip's chain); None when either is not indexed."""
    with _db(gitdir) as conn:
        rows = dict(
            conn.execute(
                "SELECT commit_id, seq FROM runs WHERE plan=? AND commit_id IN (?, ?)",
                (plan, older, newer),
            ).fetchall()
        )
    if older not in rows or newer not in rows:
        return None
    before, after = rows[older], rows[newer]
    if not isinstance(before, int) or not isinstance(after, int):
        return None  # not numbered as sync numbers runs: the caller asks git
    return before < after
