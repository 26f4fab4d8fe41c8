"""Controls of docs/threat-model.md at the unit level, on the ledger's own functions: the trust
anchor (:mod:`gitaudit.ledger.anchor`) and the planner's rules of the plans chain
(:func:`gitaudit.ledger.plansref.planner_problem`, :func:`gitaudit.ledger.plansref.verify_chain`,
:func:`gitaudit.ledger.plansref.read_state`).

The planner's changes are plans states built in memory from the files a plans commit would hold
(an unsigned commit that no ref points at), judged against the state before them: no command
runs, nothing is sealed. End to end (through ``plan seal``, ``status``, ``verify`` and the
server): ``tests/adversarial/test_request.py`` and ``tests/adversarial/test_anchors.py``.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitaudit.crypto.keystore import generate_key, load_signer
from gitaudit.crypto.signers import Signer
from gitaudit.errors import TrustError
from gitaudit.git.repo import open_repo
from gitaudit.ledger import anchor, watermark
from gitaudit.ledger.objects import dumps, write_tree
from gitaudit.ledger.plansref import PlansState, planner_problem, read_state, state_at, verify_chain
from gitaudit.ledger.protected import manifest, manifest_digest, manifest_path
from gitaudit.ledger.refs import PLANS_REF
from gitaudit.ledger.requests import record_path, request_path
from gitaudit.ledger.resets import resets_path
from gitaudit.ledger.seals import trust_add, trust_init
from gitaudit.ledger.trust import Policy, TrustedKey
from gitaudit.places import anchor_path
from gitaudit.plan.catalog import check_worktree
from gitaudit.plan.digest import sha256
from tests.adversarial.conftest import World, check, step
from tests.adversarial.conftest import world as world  # noqa: PLC0414 (re-exported fixture)
from tests.adversarial.test_attempts import reset_for
from tests.adversarial.test_request import PLAN, R1, REQUEST, Asked, answering, drop_r2
from tests.gitrepo import GitRepo

Files = dict[str, bytes]

# ------------------------------------------------------------------------------ trust anchors


def test_a_repinned_or_deleted_config_pin_is_refused(
    world: World,
) -> None:
    """trust init anchored alice's key outside the repository: audit.rootKey re-pinned to
    mallory's key, or deleted, is refused by the pin itself and by the plans reader, before any
    plans commit is read; without the anchor, .git/config alone would be believed."""
    alice = world.alice.public_key.fingerprint()
    mallory = world.mallory.public_key.fingerprint()
    assert anchor.pinned_root(world.handle()) == alice
    world.repo.git("config", "audit.rootKey", mallory)
    with pytest.raises(anchor.AnchorError, match="disagrees with this repository's trust anchor"):
        anchor.pinned_root(world.handle())
    with pytest.raises(anchor.AnchorError, match=re.escape(f"trust anchor {alice}")):
        read_state(world.handle())
    world.repo.git("config", "--unset", "audit.rootKey")
    with pytest.raises(anchor.AnchorError, match=r"audit\.rootKey is not set, but this repository"):
        anchor.pinned_root(world.handle())
    with pytest.raises(anchor.AnchorError, match="is not set"):
        read_state(world.handle())
    # the control: the same re-pin where no anchor was ever written is the pin
    for path in anchor.files(world.handle()):
        os.unlink(path)
    world.repo.git("config", "audit.rootKey", mallory)
    assert anchor.pinned_root(world.handle()) == mallory


def test_another_repositorys_anchor_does_not_apply(world: World, tmp_path: Path) -> None:
    """mallory's repository has an anchor of its own (her key); copied over this repository's
    anchor files it names another repository, and is refused."""
    other = GitRepo.create(tmp_path / "other")
    other.write("README.md", "other\n")
    other.commit("other")
    theirs_repo = open_repo(other.path)
    trust_init(theirs_repo, world.mallory, "mallory")
    theirs = anchor.find(theirs_repo)
    assert theirs is not None
    assert theirs.root_key == world.mallory.public_key.fingerprint()
    mine = anchor.files(world.handle())
    assert theirs.file not in mine  # anchors are per repository
    assert anchor.pinned_root(world.handle()) == world.alice.public_key.fingerprint()
    for path in mine:
        shutil.copyfile(theirs.file, path)
    world.repo.git("config", "audit.rootKey", theirs.root_key)
    with pytest.raises(anchor.AnchorError, match="names the repository") as caught:
        anchor.find(world.handle())
    assert str(other.path / ".git") in caught.value.message
    with pytest.raises(anchor.AnchorError, match="names the repository"):
        anchor.pinned_root(world.handle())


@pytest.mark.parametrize("how", ["gitfile", "commondir"])
def test_a_git_dir_swapped_or_redirected_is_noticed(world: World, how: str) -> None:
    """The work tree's `.git` made a `gitdir:` file to a copy (or `commondir` pointing at one)
    with mallory's pin: git reads another repository, which has no anchor; the anchor kept
    under the work tree's path names the real one."""
    mallory = world.mallory.public_key.fingerprint()
    dot_git = world.path / ".git"
    fake = world.path / ".cache" / "git"
    shutil.copytree(dot_git, fake)
    subprocess.run(["git", "config", "audit.rootKey", mallory], cwd=fake, check=True)
    if how == "gitfile":
        shutil.rmtree(dot_git)
        dot_git.write_text(f"gitdir: {fake}\n")
    else:
        (dot_git / "commondir").write_text(f"{fake}\n")
    handle = open_repo(world.path)
    assert handle.config("audit.rootKey") == mallory
    assert anchor.common_dir(handle.gitdir) == os.path.realpath(fake)
    with pytest.raises(anchor.AnchorError, match="was replaced or redirected") as caught:
        anchor.find(handle)
    assert f"git now reads {os.path.realpath(fake)}" in caught.value.message
    with pytest.raises(anchor.AnchorError, match="was replaced or redirected"):
        anchor.pinned_root(handle)


def test_every_work_tree_of_a_repository_is_keyed(world: World, tmp_path: Path) -> None:
    """`anchor.worktrees` lists the main work tree and each linked one whose `.git` leads back
    (never a folder a `gitdir` file merely names); pinning writes a key for each, a linked
    worktree added later is keyed by its first judgement, and a linked git dir whose
    `commondir` leaves the anchored repository is refused by name."""
    handle = world.handle()
    common = anchor.common_dir(handle.gitdir)
    wt = tmp_path / "wt"
    world.repo.git("worktree", "add", "-q", "--detach", str(wt), "HEAD")
    stray = tmp_path / "stray"
    stray.mkdir()
    (Path(common) / "worktrees" / "wt" / "gitdir").write_text(f"{stray / '.git'}\n")
    assert anchor.worktrees(handle) == [os.path.realpath(world.path)]
    (Path(common) / "worktrees" / "wt" / "gitdir").write_text(f"{wt / '.git'}\n")
    assert anchor.worktrees(handle) == [os.path.realpath(world.path), os.path.realpath(wt)]
    root = world.alice.public_key.fingerprint()
    written = anchor.write(handle, root)
    assert os.path.exists(anchor_path(wt)) and not os.path.exists(anchor_path(stray))
    os.unlink(anchor_path(wt))
    linked = open_repo(wt)
    assert anchor.pinned_root(linked) == root  # learned here
    learned = anchor.find(linked)
    assert learned is not None and learned.file == anchor_path(handle.gitdir)
    assert os.path.exists(anchor_path(wt))
    assert written.repository == common
    shutil.copytree(common, tmp_path / "elsewhere")
    (Path(common) / "worktrees" / "wt" / "commondir").write_text(f"{tmp_path / 'elsewhere'}\n")
    with pytest.raises(anchor.AnchorError, match="its commondir leads to"):
        anchor.find(open_repo(wt))


# ------------------------------------------------------------------------ the planner's rules


@pytest.fixture
def planned(world: World) -> Asked:
    """alice sealed the request (R1, R2, both must); the planner `agent` sealed PLAN for it."""
    generated = generate_key("agent")
    agent = load_signer(generated.private_path)
    trust_add(world.handle(), world.alice, agent.public_key, "planner", "agent")
    out = Asked(world, agent, generated.private_path)
    assert out.request(REQUEST).commit is not None
    assert out.seal(PLAN).commit is not None
    return out


def _state(world: World) -> PlansState:
    return read_state(world.handle(), remember=False)


def _candidate(world: World, files: Files) -> PlansState:
    """The plans state a commit holding *files* would have (parsed, not verified): an unsigned
    commit that no ref points at."""
    git = world.handle().git
    who = pygit2.Signature("planner", "planner@example.test", 1_800_000_000, 0)
    oid = git.create_commit(None, who, who, "candidate\n", write_tree(git, files), [])
    commit = git[oid]
    assert isinstance(commit, pygit2.Commit)
    return state_at(git, commit)


def _entry(world: World, signer: Signer) -> TrustedKey:
    found = _state(world).trust.find(signer.public_key)
    assert found is not None and not found.may("sealer") and found.may("planner")
    return found


def _sealed_by(
    world: World, signer: Signer, data: dict[str, Any], name: str = "default", **record: Any
) -> Files:
    """The plans files with *data* sealed as the next version of plan *name* in *signer*'s name
    (as `plan seal` writes a seal: contract digest, version, sealer), *record* on top."""
    world.write_plan(data, name)
    (checked,) = check_worktree(world.path, name)
    assert checked.digest is not None, checked.report
    files = dict(_state(world).files)
    doc = json.loads(files["seals/default.json"])
    if name != "default":
        doc.update(plan=name, version=0, previous_digest=None, change="initial")
        doc.pop("request_digest", None)
        files[manifest_path(name)] = files[manifest_path("default")]
    doc.update(
        {
            "sealer": {"name": "agent", "fingerprint": signer.public_key.fingerprint()},
            "contract_digest": checked.digest,
            "previous_digest": doc["contract_digest"] if name == "default" else None,
            "version": doc["version"] + 1,
            "change": "weakened",
            "weakened": True,
            "weakenings": ["(recorded)"],
            **record,
        }
    )
    files[f"seals/{name}.json"] = dumps(doc)
    files[f"plans/{name}.json"] = checked.file.data
    return files


def _judged(planned: Asked, files: Files) -> str | None:
    world = planned.world
    return planner_problem(_state(world), _candidate(world, files), _entry(world, planned.agent))


def _lowered() -> dict[str, Any]:
    data = copy.deepcopy(PLAN)
    data["requirements"][1]["priority"] = "should"
    return data


def _rewritten() -> dict[str, Any]:
    data = copy.deepcopy(PLAN)
    data["requirements"][0]["description"] = "the thing mostly works"
    return data


def _moved() -> dict[str, Any]:
    return answering(
        step("unit", check("true"), covers=["R1"]),
        step("lint", check("true"), covers=["R1"]),
        step("noop", check("true"), covers=["R2"]),
    )


def _weak_check() -> dict[str, Any]:
    data = copy.deepcopy(PLAN)
    data["steps"][1]["verify"] = [check("echo", "skipped")]
    return data


PLANNER_SEALS: list[tuple[Callable[[], dict[str, Any]], str]] = [
    (drop_r2, "planner 'agent' cannot drop request requirement R2: only a sealer changes"),
    (_lowered, "planner 'agent' cannot lower request requirement R2 (must -> should)"),
    (_rewritten, "planner 'agent' cannot rewrite request requirement R1"),
    (_moved, "planner 'agent' cannot weaken plan 'default' (step lint: no longer covers R2)"),
    (_weak_check, "planner 'agent' cannot weaken plan 'default' (step lint verify: check removed"),
]


@pytest.mark.parametrize(("plan", "words"), PLANNER_SEALS, ids=lambda v: getattr(v, "__name__", ""))
def test_a_planner_seal_must_keep_the_request(
    planned: Asked, plan: Callable[[], dict[str, Any]], words: str
) -> None:
    problem = _judged(planned, _sealed_by(planned.world, planned.agent, plan()))
    assert problem is not None and problem.startswith(words), problem


def test_a_planner_seal_keeping_the_request_is_allowed(planned: Asked) -> None:
    """The control: a check added, recorded as a strengthening."""
    grown = copy.deepcopy(PLAN)
    grown["steps"][0]["verify"].append(check("true", "again"))
    files = _sealed_by(
        planned.world, planned.agent, grown, change="strengthened", weakened=False, weakenings=[]
    )
    assert _judged(planned, files) is None


def test_a_planner_cannot_amend_a_protected_file(planned: Asked) -> None:
    """The plan runs tests/check.sh, so its seal protects it; the planner's next seal records
    another blob for it (an amendment)."""
    world = planned.world
    world.repo.write("tests/check.sh", "exit 1\n", mode=0o755)
    guarded = copy.deepcopy(PLAN)
    guarded["steps"][0]["verify"].append(check("sh", "tests/check.sh", expect_exit=1))
    assert planned.seal(guarded).commit is not None
    manifest = json.loads(_state(world).files[manifest_path("default")])
    assert "tests/check.sh" in manifest["files"]
    manifest["files"]["tests/check.sh"] = "100755 " + "0" * 40
    files = _sealed_by(world, planned.agent, guarded, change="neutral", weakened=False)
    files[manifest_path("default")] = dumps(manifest)
    doc = json.loads(files["seals/default.json"])
    doc.update(protected_digest=sha256(dumps(manifest)), amended={"changed": ["tests/check.sh"]})
    files["seals/default.json"] = dumps(doc)
    assert _judged(planned, files) == (
        "planner 'agent' cannot amend the protected files of plan 'default' "
        "(changed: tests/check.sh): only a sealer can"
    )


def _with_manifest(planned: Asked, data: dict[str, Any], listed: dict[str, str] | None) -> Files:
    """The planner's next seal of *data* (no weakening recorded) binding the manifest *listed*
    (None: none)."""
    files = _sealed_by(
        planned.world, planned.agent, data, change="neutral", weakened=False, weakenings=[]
    )
    doc = json.loads(files["seals/default.json"])
    if listed is None:
        doc.pop("protected_digest")
        del files[manifest_path("default")]
    else:
        files[manifest_path("default")] = manifest(listed)
        doc["protected_digest"] = manifest_digest(listed)
    files["seals/default.json"] = dumps(doc)
    return files


def test_a_planner_cannot_take_a_protected_file_into_the_manifest(planned: Asked) -> None:
    """A file the sealed plan protects, new to the manifest (the agent added it to the tree),
    is an amendment, as `plan seal` judges it; a file that enters with a check the planner's
    new contract adds is the contract's (a strengthening), and the planner may seal it."""
    world = planned.world
    guarded = {**copy.deepcopy(PLAN), "protect": ["tests/"]}
    world.repo.write("tests/test_it.py", "def test_it():\n    pass\n")
    assert planned.seal(guarded).commit is not None
    listed = _state(world).protected("default")
    assert listed is not None and list(listed) == ["tests/test_it.py"]
    added = {**listed, "tests/conftest.py": "100644 " + "1" * 40}
    assert _judged(planned, _with_manifest(planned, guarded, added)) == (
        "planner 'agent' cannot amend the protected files of plan 'default' "
        "(added: tests/conftest.py): only a sealer can"
    )
    grown = copy.deepcopy(guarded)
    grown["steps"][0]["verify"].append(check("sh", "more.sh"))
    entered = {**listed, "more.sh": "100644 " + "2" * 40}
    assert _judged(planned, _with_manifest(planned, grown, entered)) is None
    assert _judged(planned, _with_manifest(planned, grown, {**entered, **added})) == (
        "planner 'agent' cannot amend the protected files of plan 'default' "
        "(added: tests/conftest.py): only a sealer can"
    )


def test_a_planner_cannot_drop_the_manifest_even_an_empty_one(planned: Asked) -> None:
    """PLAN's checks run no file of the tree: its seal binds an empty manifest. A planner's
    seal binding none would stop the gate comparing protected files at all."""
    assert _state(planned.world).protected("default") == {}
    grown = copy.deepcopy(PLAN)
    grown["steps"][0]["verify"].append(check("true", "again"))
    assert _judged(planned, _with_manifest(planned, grown, None)) == (
        "planner 'agent' cannot drop the protected-files manifest of plan 'default' (seal v1 "
        "records one): only a sealer can amend protected files"
    )
    assert _judged(planned, _with_manifest(planned, grown, {})) is None


def test_a_planner_cannot_retire_the_plan(planned: Asked) -> None:
    files = dict(_state(planned.world).files)
    doc = json.loads(files["seals/default.json"])
    doc.update(version=doc["version"] + 1, change="retired", retired=True, weakened=True)
    files["seals/default.json"] = dumps(doc)
    del files["plans/default.json"]
    assert _judged(planned, files) == (
        "planner 'agent' cannot retire plan 'default': only a sealer can"
    )


def test_a_planner_cannot_seal_a_plan_nobody_asked_for(planned: Asked) -> None:
    files = _sealed_by(planned.world, planned.agent, PLAN, "extra", weakened=False, weakenings=[])
    problem = _judged(planned, files)
    assert problem is not None
    assert problem.startswith("planner 'agent' cannot seal plan 'extra' without a sealed request")


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda reqs: reqs.pop(), "cannot drop requirement R2"),
        (lambda reqs: reqs[0].update(description="mostly"), "cannot change requirement R1"),
        (lambda reqs: reqs.append({"id": "R3", "description": "mine"}), "cannot add requirement"),
    ],
)
def test_a_planner_keeps_a_single_file_plans_requirements(
    world: World, edit: Callable[[list[dict[str, Any]]], object], words: str
) -> None:
    """No request: the plan's requirements sealed by alice are the request."""
    generated = generate_key("agent")
    agent = load_signer(generated.private_path)
    trust_add(world.handle(), world.alice, agent.public_key, "planner", "agent")
    world.seal(PLAN)
    changed = copy.deepcopy(PLAN)
    edit(changed["requirements"])
    ids = [r["id"] for r in changed["requirements"]]
    for each in changed["steps"]:
        each["covers"] = ids
    files = _sealed_by(world, agent, changed)
    problem = planner_problem(_state(world), _candidate(world, files), _entry(world, agent))
    assert problem is not None and f"planner 'agent' {words}" in problem, problem
    assert "without a sealed request, the requirements of plan 'default' are the request" in (
        problem
    )


def _smaller_request(world: World, files: Files) -> None:
    smaller = dumps({"task": "make the thing", "requirements": [R1]})
    doc = json.loads(files[record_path("default")])
    doc.update(version=2, request_digest=sha256(smaller), change="weakened", weakened=True)
    files[request_path("default")] = smaller
    files[record_path("default")] = dumps(doc)


def _self_trusted(world: World, files: Files) -> None:
    agent = _state(world).trust.with_role("planner")
    (key,) = [k for k in agent if k != world.alice.public_key]
    files.update(_state(world).trust.added("agent", key, "sealer").files())


def _stricter_policy(world: World, files: Files) -> None:
    files["policy.json"] = dumps(Policy(allow_weaken=False).to_json())


def _reset(world: World, files: Files) -> None:
    files[resets_path("default")] = reset_for(world, "unit", failed=0)


@pytest.mark.parametrize(
    ("edit", "what"),
    [
        (_smaller_request, "the request"),
        (_self_trusted, "trust"),
        (_stricter_policy, "the policy"),
        (_reset, "the failed attempts of a step"),
    ],
)
def test_a_planner_cannot_change_request_trust_policy_resets(
    planned: Asked, edit: Callable[[World, Files], None], what: str
) -> None:
    files = dict(_state(planned.world).files)
    edit(planned.world, files)
    assert _judged(planned, files) == f"planner 'agent' cannot change {what}: only a sealer can"


# ------------------------------------------------------------ rules of the chain, not a command


def _forged(planned: Asked, files: Files) -> pygit2.Oid:
    """*files* committed on the plans ref by hand, signed with the planner's key."""
    return planned.world.forge_plans(files, planned.agent)


def test_the_chain_refuses_what_a_planner_signs_by_hand(planned: Asked) -> None:
    """Each hand-made, planner-signed plans commit is refused by verify_chain (what status,
    verify and the server's pre-receive each call) from the last verified tip."""
    world = planned.world
    git = world.handle().git
    alice = world.alice.public_key
    genuine = world.ref(PLANS_REF)
    assert genuine is not None
    grown = copy.deepcopy(PLAN)
    grown["steps"][0]["verify"].append(check("true", "again"))
    in_alices_name = _sealed_by(
        world,
        planned.agent,
        grown,
        sealer={"name": "alice", "fingerprint": alice.fingerprint()},
        change="strengthened",
        weakened=False,
        weakenings=[],
    )
    rewritten = dict(_state(world).files)
    _smaller_request(world, rewritten)
    sealer = dict(_state(world).files)
    _self_trusted(world, sealer)
    cases = [
        (_sealed_by(world, planned.agent, drop_r2()), "cannot drop request requirement R2"),
        (rewritten, "planner 'agent' cannot change the request"),
        (sealer, "planner 'agent' cannot change trust"),
        (in_alices_name, "signs seal v2 of plan 'default' in the name of 'alice'"),
    ]
    for files, words in cases:
        world.set_ref(PLANS_REF, genuine)
        tip = _forged(planned, files)
        with pytest.raises(TrustError, match=words):
            verify_chain(git, tip, stop_at=pygit2.Oid(hex=genuine), pinned_root=alice.fingerprint())
        with pytest.raises(TrustError, match=words):
            verify_chain(git, tip, pinned_root=alice.fingerprint())
    world.set_ref(PLANS_REF, genuine)
    assert verify_chain(git, pygit2.Oid(hex=genuine)).seal("default") is not None  # the control


def test_the_mark_never_vouches_for_a_planners_commit(planned: Asked) -> None:
    """The agent writes the verified mark on its own commit, then on a harmless planner commit
    on top of it: the reader verifies back to the last sealer's commit all the same."""
    world = planned.world
    bad = str(_forged(planned, _sealed_by(world, planned.agent, drop_r2())))
    watermark.record(world.handle().gitdir, {PLANS_REF: bad})
    with pytest.raises(TrustError, match="cannot drop request requirement R2"):
        read_state(world.handle())
    _forged(planned, dict(world.plans_files()))
    tip = str(world.ref(PLANS_REF))
    watermark.record(world.handle().gitdir, {PLANS_REF: tip})
    with pytest.raises(TrustError, match=f"plans commit {bad[:12]}: .*cannot drop request"):
        read_state(world.handle())
