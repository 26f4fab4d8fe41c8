"""Attacks on the agent registry (refs/audit/agents) and on claims: forged, truncated,
reordered and rewritten records, claim-dodging spellings, impersonation."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitaudit.crypto.signers import Signer
from gitaudit.ledger.objects import dumps, read_files, write_tree
from gitaudit.ledger.refs import AGENTS_REF
from gitaudit.ledger.seals import set_policy, trust_add
from gitaudit.ledger.trust import Policy
from tests.adversarial.conftest import World, assert_plan, check, plan, step
from tests.adversarial.test_evidence import MARKS, _mark_verified
from tests.gitrepo import audit, forget_marks

TWO = plan(step("unit", check("true")), step("lint", check("true")))


def _cli(
    world: World, *args: str, key: str | None = "ci", env: dict[str, str] | None = None
) -> Any:
    keyed = ("--key", str(world.keys[key])) if key else ()
    return audit(world.path, *args, *keyed, env=env)


@pytest.fixture
def crew(world: World) -> World:
    """ann and bob, both agents of ci's key; ann claims unit and src/a.py, bob lint and
    src/b.py; the policy is parallel-strict."""
    world.repo.write("src/a.py", "a\n")
    world.repo.write("src/b.py", "b\n")
    world.seal(TWO)
    set_policy(
        world.handle(), world.alice, Policy(agents="parallel-strict"), allow_weaken=False, reason=""
    )
    for name in ("ann", "bob"):
        assert _cli(world, "agents", "register", name).code == 0
    assert _cli(world, "agents", "claim", "unit", "--paths", "src/a.py", "-a", "ann").code == 0
    assert _cli(world, "agents", "claim", "lint", "--paths", "src/b.py", "-a", "bob").code == 0
    return world


def _chain(world: World) -> list[pygit2.Commit]:
    git = world.handle().git
    out = []
    commit = git.revparse_single(AGENTS_REF).peel(pygit2.Commit)
    while True:
        out.append(commit)
        if not commit.parent_ids:
            return list(reversed(out))
        commit = git[commit.parent_ids[0]].peel(pygit2.Commit)


def _rebuild(
    world: World,
    signer: Signer | None,
    files: list[dict[str, bytes]],
    *,
    signers: Mapping[int, Signer | None] | None = None,
) -> None:
    """Write *files* as a fresh linear chain (each commit signed by *signer*, or by its own in
    *signers*: index -> signer) and point refs/audit/agents at it, as a fresh clone would
    receive it (no high-water marks here: they would report the rewrite before anything else)."""
    forget_marks(world.handle().gitdir)
    git = world.handle().git
    times = [c.commit_time for c in _chain(world)]  # the forger keeps the signed times
    parent: list[pygit2.Oid] = []
    for n, content in enumerate(files):
        prev = str(parent[0]) if parent else None
        # a careful forger links each record to its new parent (unless it is no JSON any more)
        with contextlib.suppress(ValueError):
            doc = json.loads(content["record.json"])
            doc["prev"] = prev
            content["record.json"] = dumps(doc)
        tree = write_tree(git, content)
        when = times[min(n, len(times) - 1)]
        by = (signers or {}).get(n, signer)
        oid = world.commit_object(git, tree, parent, "agents: forged\n", by, when=when)
        parent = [oid]
    world.set_ref(AGENTS_REF, parent[0])


def _files(world: World) -> list[dict[str, bytes]]:
    git = world.handle().git
    return [read_files(git, c.tree) for c in _chain(world)]


def _edit(content: dict[str, bytes], path: str, change: Callable[[dict[str, Any]], None]) -> None:
    doc = json.loads(content[path])
    change(doc)
    content[path] = dumps(doc)


def _registry_fails(world: World, fragment: str) -> None:
    judged = assert_plan(world.gate(), "agents.registry", "FAIL")
    assert fragment in judged.reasons[0].message, judged.reasons[0].message
    listed = _cli(world, "agents", "list", key=None)
    assert listed.code == 1 and fragment in listed.err


def _append(world: World, signer: Signer, **fields: Any) -> None:
    """A record on top of the registry, signed by *signer*, with *fields* over a release."""
    tip = _chain(world)[-1]
    files = _files(world)
    record = {
        "format": "gitaudit.agent-record/1",
        "seq": json.loads(files[-1]["record.json"])["seq"] + 1,
        "prev": str(tip.id),
        "trust": json.loads(files[-1]["record.json"])["trust"],
        "agent": "ann",
        "action": "release",
        "key": signer.public_key.fingerprint(),
        **fields,
    }
    state = json.loads(files[-1]["agents.json"])
    state["seq"] = record["seq"]
    state["agents"]["ann"].update(claim=None, heartbeat=int(tip.commit_time))
    content = {"record.json": dumps(record), "agents.json": dumps(state)}
    git = world.handle().git
    oid = world.commit_object(git, write_tree(git, content), [tip.id], "x\n", signer)
    world.set_ref(AGENTS_REF, oid)


def test_attack_agents_record_appended_by_an_untrusted_key(crew: World) -> None:
    """mallory appends a record releasing ann's claim, signed with his own key."""
    _append(crew, crew.mallory)
    _registry_fails(crew, "not signed by a trusted runner or sealer")


def test_attack_agents_record_unsigned(crew: World) -> None:
    """A record committed with plain git (no signature) on top of the registry."""
    files = _files(crew)
    tip = _chain(crew)[-1]
    git = crew.handle().git
    oid = crew.commit_object(git, write_tree(git, files[-1]), [tip.id], "x\n", None)
    crew.set_ref(AGENTS_REF, oid)
    _registry_fails(crew, "not signed")


def test_attack_agents_registry_truncated_at_the_tip(crew: World) -> None:
    """bob's claim is dropped by moving the ref back one record (to hide it from the gate)."""
    crew.gate()  # the registry is verified (and its tip marked) once
    crew.set_ref(AGENTS_REF, _chain(crew)[-2].id)
    _registry_fails(crew, "moved backwards or was rewritten")


def test_attack_agents_record_truncated_json(crew: World) -> None:
    """The newest record.json cut in half, re-signed by ci (a trusted key): malformed."""
    files = _files(crew)
    files[-1]["record.json"] = files[-1]["record.json"][:40]
    _rebuild(crew, crew.ci, files)
    _registry_fails(crew, "record.json is not valid JSON")


def test_attack_agents_records_reordered(crew: World) -> None:
    """The two claims swapped in order and the chain re-signed by ci: the sequence numbers
    and predecessors no longer follow."""
    files = _files(crew)
    files[2], files[3] = files[3], files[2]
    _rebuild(crew, crew.ci, files)
    _registry_fails(crew, "record #4 follows record #2")


def test_attack_agents_record_dropped_from_the_middle(crew: World) -> None:
    """ann's claim record removed from the middle, the rest re-signed by ci."""
    files = _files(crew)
    del files[2]
    _rebuild(crew, crew.ci, files)
    _registry_fails(crew, "record #4 follows record #2")


@pytest.mark.parametrize("mark", MARKS)
def test_attack_agents_record_in_the_middle_behind_a_written_mark(
    crew: World, tmp_path: Path, mark: str
) -> None:
    """bob's registration signed by mallory in a chain ci signed otherwise, and its tip marked
    verified in watermarks.json: only the tip and its parent were verified."""
    marks = crew.handle().state_dir / "watermarks.json"
    genuine = marks.read_bytes()  # the genuine tip's mark, and its MAC
    _rebuild(crew, crew.ci, _files(crew), signers={1: crew.mallory})
    marks.write_bytes(genuine)
    tip = crew.ref(AGENTS_REF)
    assert tip is not None
    _mark_verified(crew, tmp_path, AGENTS_REF, tip, mark)
    _registry_fails(crew, "not signed by a trusted runner or sealer")


def test_attack_agents_state_edited_beside_its_records(crew: World) -> None:
    """agents.json of the tip says ann holds nothing; its records say otherwise."""
    files = _files(crew)
    _edit(files[-1], "agents.json", lambda d: d["agents"]["ann"].update(claim=None))
    _rebuild(crew, crew.ci, files)
    _registry_fails(crew, "agents.json is not the registry its records make")


def test_attack_agents_record_for_another_agents_key(crew: World) -> None:
    """alice (a sealer, trusted) writes a record releasing ann's claim: ann is ci's agent."""
    _append(crew, crew.alice)
    _registry_fails(crew, "made with another agent's key")


def test_attack_agents_live_claim_taken_over_by_hand(crew: World) -> None:
    """bob's claim record rewritten to take unit from ann while her claim is live."""
    files = _files(crew)
    _edit(files[3], "record.json", lambda d: d.update(step="unit", takeover="ann"))
    _rebuild(crew, crew.ci, files)
    _registry_fails(crew, "step unit is claimed by claim #3 of agent ann")


def test_attack_agents_claim_spelled_to_dodge_by_hand(crew: World) -> None:
    """bob's claim rewritten to spell src/a.py as src/../src/a.py (so no overlap check would
    see it): a record must spell its paths canonically."""
    files = _files(crew)
    _edit(files[3], "record.json", lambda d: d.update(paths=["src/../src/a.py"]))
    _rebuild(crew, crew.ci, files)
    _registry_fails(crew, "spells 'src/a.py' as 'src/../src/a.py'")


@pytest.mark.parametrize(
    "spelling",
    ["./src/a.py", "src/../src/a.py", "src//a.py", "src/./a.py", "src", "src/*", "**/a.py", "*"],
)
def test_attack_agents_claim_dodging_spellings(crew: World, spelling: str) -> None:
    """carl tries to claim ann's src/a.py under another spelling in parallel-strict."""
    assert _cli(crew, "agents", "release", "-a", "bob").code == 0
    assert _cli(crew, "agents", "register", "carl").code == 0
    refused = _cli(crew, "agents", "claim", "lint", "--paths", spelling, "-a", "carl")
    assert refused.code == 1 and "their paths overlap" in refused.err, refused.err


def test_attack_agents_run_touching_a_claimed_path_under_strict(crew: World) -> None:
    """bob edits ann's src/a.py and runs: the evidence does not count while ann's claim is
    live, whoever's claim the run names."""
    crew.repo.write("src/a.py", "bob was here\n")
    crew.repo.commit("bob's change")
    ran = _cli(crew, "run", env={"GITAUDIT_AGENT": "bob"})
    assert ran.code == 0, ran.err
    judged = assert_plan(crew.gate(), "agents.conflict", "FAIL")
    assert "claim #4 of agent bob" in judged.reasons[0].message
    assert "claim #3 of agent ann" in judged.reasons[0].message


def _run_plain(world: World) -> Any:
    return _cli(world, "run")


def _run_as_bob_released(world: World) -> Any:
    assert _cli(world, "agents", "release", "-a", "bob").code == 0
    return _cli(world, "run", env={"GITAUDIT_AGENT": "bob"})


def _run_as_bob_claimed_again(world: World) -> Any:
    assert _cli(world, "agents", "release", "-a", "bob").code == 0
    claimed = _cli(world, "agents", "claim", "lint", "--paths", "src/b.py", "-a", "bob")
    assert claimed.code == 0, claimed.err
    return _cli(world, "run", env={"GITAUDIT_AGENT": "bob"})


# variant -> how the run is made after bob committed his edit of ann's src/a.py
DODGE_BASE: dict[str, Callable[[World], Any]] = {
    "the user's run, no agent (HEAD is its base)": _run_plain,
    "bob's run after releasing his claim (HEAD is its base)": _run_as_bob_released,
    "bob's run under a claim made after the edit (its base holds the edit)": (
        _run_as_bob_claimed_again
    ),
}


@pytest.mark.parametrize("how", sorted(DODGE_BASE))
def test_attack_agents_change_to_a_claimed_path_hidden_in_the_run_s_base(
    crew: World, how: str
) -> None:
    """bob edits ann's claimed src/a.py under parallel-strict and commits it, then the run is
    made so that its base already holds the edit: a run with no agent or no claim (its changes
    were those since HEAD), or one under a claim bob made again after the edit (its changes
    were those since that claim's base). No change was seen, and the gate said PASS while
    ann's claim was live (before the fix). Now the paths that differ between ann's claim's
    base and the tree the run proved count too: FAIL (`agents.conflict`), and once ann
    releases the same evidence counts."""
    crew.repo.write("src/a.py", "bob was here\n")
    crew.repo.commit("bob's change")
    ran = DODGE_BASE[how](crew)
    assert ran.code == 0, ran.err
    judged = assert_plan(crew.gate(), "agents.conflict", "FAIL")
    message = judged.reasons[0].message
    assert "changed src/a.py" in message and "claim #3 of agent ann" in message, message
    assert _cli(crew, "agents", "release", "-a", "ann").code == 0
    assert crew.gate().verdict == "PASS"


def _unpacked_and_deleted(world: World) -> None:
    world.repo.git("update-ref", "-d", AGENTS_REF)


def _pointed_nowhere(world: World) -> None:
    world.repo.git("symbolic-ref", AGENTS_REF, "refs/heads/nowhere")


def _deleted_from_packed_refs(world: World) -> None:
    world.repo.git("pack-refs", "--all")
    packed = world.path / ".git" / "packed-refs"
    kept = [line for line in packed.read_text().splitlines() if AGENTS_REF not in line]
    packed.write_text("\n".join(kept) + "\n")


DELETED = f"{AGENTS_REF} was deleted; it was verified at"
# variant -> (how the registry is hidden, what the refusal says)
HIDE_REGISTRY: dict[str, tuple[Callable[[World], None], str]] = {
    "deleted": (_unpacked_and_deleted, DELETED),
    "dropped from packed-refs": (_deleted_from_packed_refs, DELETED),
    "made a symbolic ref to nothing": (
        _pointed_nowhere,
        f"{AGENTS_REF} is a symbolic ref to refs/heads/nowhere, which does not exist",
    ),
}


@pytest.mark.parametrize("how", sorted(HIDE_REGISTRY))
def test_attack_agents_registry_deleted(crew: World, how: str) -> None:
    """bob edits ann's claimed src/a.py and runs under parallel-strict (FAIL), then deletes
    refs/audit/agents (by `git update-ref -d`, or its line dropped from packed-refs): the gate
    read a missing registry as no registry and took his evidence (PASS before the fix). The
    registry was verified here, and its high-water mark says it existed: the gate FAILs
    (`agents.registry`), and so do `agents list` and `agents register`. Made a symbolic ref to
    no branch, it crashed the gate with a traceback (before the fix): now a one-line refusal."""
    crew.repo.write("src/a.py", "bob was here\n")
    crew.repo.commit("bob's change")
    assert _cli(crew, "run", env={"GITAUDIT_AGENT": "bob"}).code == 0
    assert_plan(crew.gate(), "agents.conflict", "FAIL")
    hide, refusal = HIDE_REGISTRY[how]
    hide(crew)
    assert crew.ref(AGENTS_REF) is None
    _registry_fails(crew, refusal)
    register = _cli(crew, "agents", "register", "carl")
    assert register.code == 1 and len(register.err.splitlines()) == 2, register.err
    assert register.err.startswith(f"error: {refusal}"), register.err
    assert crew.ref(AGENTS_REF) is None


def test_attack_agents_run_impersonates_another_agent(crew: World) -> None:
    """mallory, now a trusted runner with his own key, edits ann's file and stamps his run as
    ann's (whose claim owns it): the stamp names an agent of another key."""
    trust_add(crew.handle(), crew.alice, crew.mallory.public_key, "runner", "mallory")
    crew.repo.write("src/a.py", "mallory was here\n")
    crew.repo.commit("mallory's change")
    ran = _cli(crew, "run", key="mallory", env={"GITAUDIT_AGENT": "ann"})
    assert ran.code == 0, ran.err
    judged = assert_plan(crew.gate(), "agents.impersonation", "FAIL")
    assert "names agent ann" in judged.reasons[0].message


def test_attack_agents_control_own_paths_count(crew: World) -> None:
    """Control: bob edits only his own src/b.py; his evidence counts."""
    crew.repo.write("src/b.py", "bob's own\n")
    crew.repo.commit("bob's change")
    assert _cli(crew, "run", env={"GITAUDIT_AGENT": "bob"}).code == 0
    assert crew.gate().verdict == "PASS"


def test_attack_agents_server_refuses_forged_records_and_snapshots(
    crew: World, tmp_path: Path
) -> None:
    """The server's pre-receive accepts the genuine registry (verified record by record), then
    refuses a record mallory signed on top, and any snapshot (they hold untracked files)."""
    crew.serve(tmp_path / "server.git")
    pushed = crew.repo.git("push", "origin", f"{AGENTS_REF}:{AGENTS_REF}", check=False)
    assert crew.repo.git("ls-remote", "origin", AGENTS_REF).strip(), pushed
    _append(crew, crew.mallory)
    proc = subprocess.run(
        ["git", "push", "origin", f"{AGENTS_REF}:{AGENTS_REF}"],
        cwd=crew.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0 and "not signed by a trusted runner or sealer" in proc.stderr
    assert _cli(crew, "snapshot", "mine").code == 0
    proc = subprocess.run(
        ["git", "push", "origin", "refs/audit/snapshots/mine:refs/audit/snapshots/mine"],
        cwd=crew.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0 and "snapshots hold untracked files" in proc.stderr
