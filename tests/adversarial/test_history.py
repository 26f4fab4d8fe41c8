"""Attacks on what the gate reads as history: replace refs, grafts, the shallow file and the
commit-graph, all of which an agent can write into ``.git/``.

What was measured (pygit2 1.21 on libgit2 1.9, git 2.39): libgit2 never honours
``refs/replace/*``, but applies ``info/grafts`` and ``shallow`` to every commit it parses
(``parent_ids``, ``walk``, ``descendant_of``, ``merge_base``, ``revparse_single``); git honours all
four unless told not to, and a hand-made ``objects/info/commit-graph`` lies to ``rev-list`` about
parents. gitaudit reads objects through :class:`gitaudit.git.repo.StoredHistory` (an in-memory
libgit2 repository over the real object and ref databases: no grafts, no shallow file) and runs
git with ``GIT_NO_REPLACE_OBJECTS=1``, an empty graft file and ``core.commitGraph=false``. Each
test below asserts the verdict the real objects give, through ``status``, the hooks (with the
verdict memo) and the deep-ledger confirmation.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import struct
import zlib
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitaudit.ledger.objects import write_tree
from gitaudit.ledger.refs import PLANS_REF, runs_ref
from gitaudit.ledger.runs import append_run
from gitaudit.ledger.seals import trust_remove
from tests.adversarial.conftest import World, assert_plan, assert_plans_level, check, plan, step
from tests.adversarial.test_evidence import failing as failing  # noqa: PLC0414 (fixture)
from tests.adversarial.test_evidence import make_pass
from tests.adversarial.test_seals import _forge_weak_seal
from tests.gitrepo import forget_marks
from tests.run.test_memo import pre_push

RUNS = runs_ref("default")


def _graft(world: World, *lines: tuple[str, ...]) -> None:
    """Write ``.git/info/grafts``: each line a commit and the parents git and libgit2 should
    pretend it has."""
    info = world.path / ".git" / "info"
    info.mkdir(exist_ok=True)
    (info / "grafts").write_text("".join(" ".join(line) + "\n" for line in lines))


def _forget_index(world: World) -> None:
    """The lookup cache is rebuildable: an agent may delete it so it is rebuilt under its graft."""
    for leftover in (world.handle().state_dir).glob("index.sqlite*"):
        leftover.unlink()


def _run_on_another_tree(world: World) -> str:
    """A genuine run for another tree on top of the ledger (the tip a graft can reparent)."""
    world.repo.write("other.txt", "another tree\n")
    world.repo.commit("another tree")
    return world.run().commit


def _pad(world: World, count: int) -> list[str]:
    """*count* runner-signed run commits for made-up trees on top of the ledger."""
    handle = world.handle()
    doc = json.loads(world.files_at(RUNS)["run.json"])
    out = []
    for i in range(count):
        doc["tree"] = f"{i:040x}"
        message = (
            f"audit(default): PASS\n\nAudit-Tree: {doc['tree']}\n"
            f"Audit-Contract: {doc['contract_digest']}\n"
        )
        files = {"run.json": json.dumps(doc).encode()}
        out.append(str(append_run(handle.git, "default", files, message, world.ci)))
    return out


def _poison_index(world: World, hide: str) -> None:
    """The cache forgets the FAIL run (what test_deep_ledger shows the confirmation catches)."""
    db = sqlite3.connect(world.handle().state_dir / "index.sqlite")
    db.execute("UPDATE runs SET tree='x' WHERE commit_id=?", (hide,))
    db.commit()
    db.close()


def _forge_commit_graph(world: World, child: str, parent: str) -> None:
    """Write a commit-graph in which *child*'s first parent is *parent*, with a valid checksum."""
    world.repo.git("commit-graph", "write", "--reachable")
    path = world.path / ".git" / "objects" / "info" / "commit-graph"
    data = bytearray(path.read_bytes())
    chunks = {}
    for i in range(data[6] + 1):
        cid, off = struct.unpack(">4sQ", data[8 + 12 * i : 20 + 12 * i])
        chunks[cid] = off
    lookup, commits = chunks[b"OIDL"], chunks[b"CDAT"]
    oids = [
        bytes(data[lookup + 20 * i : lookup + 20 * i + 20]) for i in range((commits - lookup) // 20)
    ]
    row = oids.index(bytes.fromhex(child))
    struct.pack_into(">I", data, commits + 36 * row + 20, oids.index(bytes.fromhex(parent)))
    data[-20:] = hashlib.sha1(bytes(data[:-20])).digest()
    path.chmod(0o644)
    path.write_bytes(bytes(data))


# ---------------------------------------------------------------------------- replace refs


def test_attack_history_replace_ref_swaps_the_failing_run_for_the_passing_one(
    failing: tuple[World, str, Path],
) -> None:
    """`git replace FAIL PASS`: plain git now shows the PASS run wherever the FAIL run is."""
    world, passed, _ = failing
    failed = world.ref(RUNS)
    assert failed is not None
    world.repo.git("replace", failed, passed)
    assert json.loads(world.repo.git("show", f"{RUNS}:run.json"))["verdict"] == "PASS"
    _forget_index(world)
    assert_plan(world.gate(), "step.failed", "FAIL")
    assert world.cli("status", "HEAD").code == 1
    assert pre_push(world.repo)[0] == 1


def test_attack_history_replace_ref_swaps_the_judged_commit(proven: World) -> None:
    """An unproven commit B is replaced by the proven A: git now says B's tree is A's."""
    proven_commit = proven.repo.git("rev-parse", "HEAD").strip()
    assert pre_push(proven.repo)[:2] == (0, "memo")  # A's PASS is remembered
    proven.repo.write("src.py", "x = 1\n")
    unproven = proven.repo.commit("unproven")
    proven.repo.git("replace", unproven, proven_commit)
    assert proven.repo.git("rev-parse", f"{unproven}^{{tree}}") == proven.repo.git(
        "rev-parse", f"{proven_commit}^{{tree}}"
    )
    assert_plan(proven.gate(unproven), "evidence.missing", "UNKNOWN")
    for _ in range(2):  # neither the memo nor the full gate serve A's PASS for B
        code, path, err = pre_push(proven.repo, unproven)
        assert (code, path) == (1, "full") and "UNKNOWN" in err
    assert proven.cli("status", unproven).code == 3


def test_attack_history_replace_ref_swaps_the_plans_tip(proven: World) -> None:
    """mallory's weak seal replaces the plans tip for plain git; the weak plan is committed."""
    tip = proven.ref(PLANS_REF)
    assert tip is not None
    git = proven.handle().git
    weak = proven.commit_object(
        git,
        write_tree(git, _forge_weak_seal(proven)),
        [pygit2.Oid(hex=tip)],
        "plans: weak\n",
        proven.mallory,
    )
    proven.repo.git("replace", tip, str(weak))
    proven.repo.commit("weak plan")
    assert_plan(proven.gate(), "plan.differs-from-seal", "FAIL")


# ---------------------------------------------------------------------------------- grafts


def test_attack_history_graft_hides_a_newer_failing_run(failing: tuple[World, str, Path]) -> None:
    """PASS, then FAIL for the same tree, then a run for another tree X. A graft makes X's parent
    the PASS run, and the lookup cache is rebuilt under it: the FAIL run is out of every walk."""
    world, passed, _ = failing
    failed = world.ref(RUNS)
    assert failed is not None
    top = _run_on_another_tree(world)
    _graft(world, (top, passed))
    _forget_index(world)
    assert_plan(world.gate("HEAD~1"), "step.failed", "FAIL")
    assert world.cli("status", "HEAD~1").code == 1
    for _ in range(2):  # nothing is remembered, so the hook judges in full both times
        code, path, _err = pre_push(world.repo, "HEAD~1")
        assert (code, path) == (1, "full")


def test_attack_history_graft_hides_a_failing_run_deep_in_the_ledger(
    failing: tuple[World, str, Path],
) -> None:
    """300 runs on top of the FAIL run, the cache told to forget it, and a graft close to the
    tip pointing at the PASS run: the confirmation walk must not reach the PASS run early."""
    world, passed, _ = failing
    failed = world.ref(RUNS)
    assert failed is not None
    pads = _pad(world, 300)
    world.gate()  # index the pads
    _poison_index(world, failed)
    _graft(world, (pads[-10], passed))
    judged = assert_plan(world.gate(), "evidence.ledger", "FAIL")
    assert f"the newest is {failed[:12]}" in judged.reasons[0].message
    assert pre_push(world.repo)[0] == 1


def test_attack_history_commit_graph_hides_a_failing_run_deep_in_the_ledger(
    failing: tuple[World, str, Path],
) -> None:
    """The same, past the 256 commits walked in Python: git's own search confirms, and a
    hand-made commit-graph makes the oldest pad's parent the PASS run for git."""
    world, passed, _ = failing
    failed = world.ref(RUNS)
    assert failed is not None
    pads = _pad(world, 300)
    world.gate()
    _poison_index(world, failed)
    _forge_commit_graph(world, pads[0], passed)
    fooled = world.repo.git("rev-list", "--first-parent", pads[0]).split()
    assert fooled[1] == passed  # plain git believes the graph
    judged = assert_plan(world.gate(), "evidence.ledger", "FAIL")
    assert f"the newest is {failed[:12]}" in judged.reasons[0].message


def test_attack_history_graft_makes_a_rewound_plans_ref_look_forward(proven: World) -> None:
    """ci's key is removed (it leaked); the plans ref is set back to the commit before the
    removal, and a graft makes that commit a child of the removal, so the rewind looks like a
    fast-forward whose change (ci trusted again) only a sealer could have signed."""
    removal = str(trust_remove(proven.handle(), proven.alice, "ci"))
    assert_plan(proven.gate(), "evidence.untrusted", "FAIL")
    before = proven.repo.git("rev-parse", f"{removal}~1").strip()
    proven.set_ref(PLANS_REF, before)
    _graft(proven, (before, removal), (removal,))  # and no cycle: the removal has no parent
    result = proven.gate()
    assert_plans_level(result, "plans.untrusted")
    assert "moved backwards or was rewritten" in result.reasons[0].message


# --------------------------------------------------------------------------------- shallow


@pytest.mark.parametrize("cut", ["top", "failed"])
def test_attack_history_shallow_file_cuts_the_runs_ledger(
    failing: tuple[World, str, Path], cut: str
) -> None:
    """`.git/shallow` makes a ledger commit look parentless (for git and for libgit2): the runs
    below it vanish from every walk. The gate reads the stored parents all the same."""
    world, _passed, _ = failing
    failed = world.ref(RUNS)
    assert failed is not None
    top = _run_on_another_tree(world)
    (world.path / ".git" / "shallow").write_text(f"{top if cut == 'top' else failed}\n")
    _forget_index(world)
    assert_plan(world.gate("HEAD~1"), "step.failed", "FAIL")


# What blinds git's search of a ledger's messages (`rev-list --grep`, past the 256 commits read
# in Python): git matches the messages re-encoded into the log's output encoding, and stops at
# any commit the shallow file names.
SEARCH_BLINDS = (
    "i18n.logOutputEncoding",
    "i18n.commitEncoding",
    "GIT_CONFIG_PARAMETERS",
    "shallow",
)


@pytest.mark.parametrize("route", ["targeted run", "ci-signed carry"])
@pytest.mark.parametrize("blind", SEARCH_BLINDS)
def test_attack_history_search_blinded_carries_a_pass_over_a_deep_failure(
    failing: tuple[World, str, Path], monkeypatch: pytest.MonkeyPatch, blind: str, route: str
) -> None:
    """PASS, then FAIL of `unit` for the same tree, 300 runs of other trees on top, the FAIL's
    row deleted from the lookup cache. The newest execution of a carried step is sought down to
    its source, past 256 commits by git's search, which the agent blinds through ``.git/`` (or
    the environment): `UTF-16` as the log's or the commits' encoding (no message matches), or the
    shallow file (git stops walking there). The search found nothing, which read as "no newer
    execution": the honest runner asked for `git audit run lint` carried `unit` from the PASS run
    and said PASS, as did the gate, which also accepted a ci-signed run carrying it (before the
    fix). git now searches the messages and the chain as stored, and a source the walk never
    reached proves nothing: the pass is not carried."""
    world, passed, _ = failing
    failed = world.ref(RUNS)
    pads = _pad(world, 300)
    world.gate()  # index them
    with sqlite3.connect(world.handle().state_dir / "index.sqlite") as db:
        assert db.execute("DELETE FROM runs WHERE commit_id=?", (failed,)).rowcount == 1
    if blind == "shallow":
        (world.path / ".git" / "shallow").write_text(pads[20] + "\n")
    elif blind == "GIT_CONFIG_PARAMETERS":
        monkeypatch.setenv(blind, "'i18n.logoutputencoding'='UTF-16'")
    else:
        world.repo.git("config", blind, "UTF-16")
    if route == "ci-signed carry":

        def carry(doc: dict[str, Any]) -> None:
            make_pass(doc)
            doc["steps"]["unit"].update(status="carried", carried_from=passed)

        forged = world.forge_run(passed, edit=carry, signer=world.ci)
        judged = assert_plan(world.gate(), "evidence.carried-invalid", "FAIL")
        assert judged.run == str(forged) and judged.reasons[0].step == "unit"
        return
    recorded = world.run(targets=["lint"])
    assert recorded.doc["steps"]["unit"]["status"] != "carried", recorded.doc["steps"]["unit"]
    assert recorded.verdict != "PASS"
    assert world.gate().verdict != "PASS"


@pytest.mark.parametrize("namespace", ["refs/audit/", "refs/gitaudit/"])
def test_attack_history_ref_names_with_line_separators_replay_a_remembered_state(
    world: World, tmp_path: Path, namespace: str
) -> None:
    """The verdict memo re-serves a PASS only in the state it was judged in, and the audit refs
    are part of that state, read from ``git for-each-ref`` one line a ref. git allows U+2028 in
    a ref name; Python's ``str.splitlines`` cuts there, so a ref named ``<x>\\u2028refs/audit/
    runs/default`` read as two refs, the second one ``refs/audit/runs/default``. The agent
    planted such a ref before the PASS was remembered (its second half naming a harmless ref);
    after ci's run FAILed the same tree, it deleted the runs ref, made the harmless ref real,
    planted a twin whose second half is the runs ref at the passing run, and put the marks file
    back: the listing read as the remembered one, and the memo served the PASS."""
    flag = tmp_path / "flag"
    flag.write_text("pass\n")
    world.seal(plan(step("unit", check("grep", "-qx", "pass", str(flag)))))
    assert world.run().verdict == "PASS"
    git = world.repo.git
    passed = git("rev-parse", runs_ref("default")).strip()
    sep = "\u2028"
    git("update-ref", f"{namespace}h{sep}refs/audit/dummy", passed)
    assert pre_push(world.repo)[:2] == (0, "full")
    assert pre_push(world.repo)[:2] == (0, "memo")
    marks = world.path / ".git" / "gitaudit" / "watermarks.json"
    remembered = marks.read_bytes()
    flag.write_text("fail\n")
    assert world.run().verdict == "FAIL"
    assert pre_push(world.repo)[0] == 1
    git("update-ref", "-d", runs_ref("default"))
    git("update-ref", "-d", f"{namespace}h{sep}refs/audit/dummy")
    git("update-ref", "refs/audit/dummy", passed)
    git("update-ref", f"{namespace}h{sep}{runs_ref('default')}", passed)
    marks.write_bytes(remembered)
    code, path, err = pre_push(world.repo)
    assert code != 0, (path, err)
    assert path == "full"


_PLANTED_WORKER = """import json, sys
read = sys.stdin.buffer.readline
read()
while line := read():
    start, commits = json.loads(line)
    sys.stdout.write(json.dumps([start, None]) + "\\n")
    sys.stdout.flush()
"""


def test_attack_history_verify_workers_import_a_planted_gitaudit(
    proven: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`git audit verify` hands shares of a long runs ledger to worker processes started as
    `python -c ...`, in the folder it is run from: the work tree, which Python put first on
    the workers' path. An untracked `gitaudit/` package there whose worker finds nothing wrong
    made verify report a ledger with mallory's commit on top as sound (before the fix); the
    workers now run `python -P`."""
    from gitaudit.ledger import verify, workers

    base = proven.ref(runs_ref("default"))
    assert base is not None
    for n in range(3):  # genuine runs of ci's, for other trees

        def other_tree(doc: dict[str, Any], n: int = n) -> None:
            doc["tree"] = f"{n:040x}"

        proven.forge_run(base, signer=proven.ci, edit=other_tree)
    forged = proven.forge_run(base, signer=proven.mallory)
    planted = proven.path / "gitaudit"
    for folder in (planted, planted / "git", planted / "ledger"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text("")
    (planted / "git" / "libgit2.py").write_text("def install():\n    pass\n")
    (planted / "ledger" / "run_shares.py").write_text(_PLANTED_WORKER)
    monkeypatch.chdir(proven.path)
    monkeypatch.setattr(verify, "PARALLEL_FROM", 2)
    monkeypatch.setattr(verify, "CHUNK", 1)
    monkeypatch.setattr(workers, "jobs", lambda: 2)
    forget_marks(proven.handle().gitdir)
    report = verify.verify_all(proven.handle(), remember=False)
    assert not report.ok, report
    assert any(str(forged)[:12] in p and "untrusted key" in p for p in report.problems), report


# ------------------------------------------------------------------ forged objects


def _forge_loose(world: World, oid: str, raw: bytes, where: str) -> None:
    """Write *raw* as a commit object under the name *oid*: the loose file rewritten, or in an
    object folder of the agent's named first in ``objects/info/alternates``."""
    objects = world.path / ".git" / "objects"
    data = zlib.compress(b"commit %d\x00" % len(raw) + raw)
    if where == "alternate":
        store = world.path / ".git" / "forged-objects"
        (store / "info").mkdir(parents=True, exist_ok=True)
        (objects / "info").mkdir(exist_ok=True)
        (objects / "info" / "alternates").write_text(f"{store}\n")
        loose = objects / oid[:2] / oid[2:]
        if loose.exists():  # git reads the repository's own loose object first
            loose.chmod(0o644)
            loose.unlink()
        target = store / oid[:2] / oid[2:]
    else:
        target = objects / oid[:2] / oid[2:]
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        target.chmod(0o644)
    target.write_bytes(data)


@pytest.mark.parametrize("where", ["loose", "alternate"])
def test_attack_history_forged_object_blinds_the_deep_search(
    failing: tuple[World, str, Path], where: str
) -> None:
    """PASS, then FAIL of the same tree, 300 runs on top, the FAIL's row hidden in the lookup
    cache. Past the 256 commits walked in Python the confirmation asked `git rev-list --grep`,
    which checks no object's id on read: the agent writes, under the FAIL run's id, a commit
    with the same tree and parent and no trailers (the loose file rewritten, or in a store of
    its own named in `objects/info/alternates`). git found the older PASS run newest and the
    gate said PASS (both before the fix). The deep search now reads the raw objects through
    libgit2, which hashes each against its id: the forged commit is named, FAIL."""
    world, _passed, _ = failing
    failed = world.ref(RUNS)
    assert failed is not None
    _pad(world, 300)
    world.gate()
    _poison_index(world, failed)
    stored = world.handle().git.odb.read(failed)[1]
    head, _, _message = stored.partition(b"\n\n")
    forged = b"\n".join(
        line for line in head.split(b"\n") if line.startswith((b"tree ", b"parent "))
    )
    forged += b"\nauthor a <a@a> 1 +0000\ncommitter a <a@a> 1 +0000\n\nnothing here\n"
    _forge_loose(world, failed, forged, where)
    out = world.repo.git("log", "-1", "--format=%B", failed)
    assert "Audit-Tree" not in out  # plain git reads the forgery
    judged = assert_plan(world.gate(), "evidence.ledger", "FAIL")
    assert failed[:12] in judged.reasons[0].message
    assert "cannot be read" in judged.reasons[0].message
    assert pre_push(world.repo)[0] == 1
