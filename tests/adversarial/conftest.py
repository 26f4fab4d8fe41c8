"""Builders for the attack catalogue: a trusted repository, genuine evidence, and forgeries.

The world every attack starts from:

* ``alice`` is the only **sealer** (``trust init --no-runner``), ``ci`` the only **runner**
  (added by alice), ``mallory`` is trusted by nobody. All three keys are real files under
  ``$GITAUDIT_HOME/keys`` (outside the work tree) so CLI calls can use them with ``--key``.
* Sealing and running go through the in-process APIs (``seal_plan``, ``run_plan``); the gate is
  ``gitaudit.gate.judge`` on a fresh ``open_repo`` (exactly what ``git audit status`` calls).
* Forgeries are built at the object level: re-signed or unsigned commits, raw commit bytes with a
  kept-but-stale signature, hand-made trees on ``refs/audit/plans``.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pygit2
import pytest
from pygit2.enums import ObjectType

from gitaudit.crypto.commits import NAMESPACE, create_signed_commit
from gitaudit.crypto.keystore import generate_key, load_signer
from gitaudit.crypto.signers import Ed25519Signer, Signer
from gitaudit.gate.judge import judge
from gitaudit.gate.result import GateResult, PlanVerdict
from gitaudit.git.fingerprint import workspace_fingerprint
from gitaudit.git.repo import Repo, open_repo
from gitaudit.ledger.objects import dumps, read_files, write_tree
from gitaudit.ledger.plansref import read_state
from gitaudit.ledger.protected import manifest, manifest_digest, manifest_path, protected_files
from gitaudit.ledger.refs import PLANS_REF, runs_ref
from gitaudit.ledger.seals import SealOutcome, seal_plan, trust_add, trust_init
from gitaudit.plan.catalog import check_worktree
from gitaudit.run.recorder import RecordedRun, run_plan
from tests.gitrepo import GitRepo, audit, git
from tests.reasons import assert_well_formed


@contextlib.contextmanager
def honest_run_on_any_tip() -> Iterator[None]:
    """An honest run as gitaudit made one before a run refused to sign on a tip no runner signed
    (``recorder._require_signed_tip``): ledgers written then may hold a forgery under genuine
    runs, and the gate, ``verify`` and the server must still see it."""
    from gitaudit.run import recorder

    with mock.patch.object(recorder, "_require_signed_tip", lambda *args: None):
        yield


# ------------------------------------------------------------------------------------ plans


def check(*argv: str, **extra: Any) -> dict[str, Any]:
    """A ``run`` check without a shell."""
    return {"type": "run", "argv": list(argv), **extra}


def step(
    sid: str,
    *checks: dict[str, Any],
    deps: list[str | dict[str, list[str]]] | None = None,
    covers: list[str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "id": sid,
        "depends_on": deps or [],
        "covers": covers or ["R"],
        "verify": list(checks) or [check("true")],
        **extra,
    }


def plan(*steps: dict[str, Any], task: str = "adversarial") -> dict[str, Any]:
    return {
        "task": task,
        "requirements": [{"id": "R", "description": "the thing works", "priority": "must"}],
        "steps": list(steps) or [step("unit")],
    }


STRICT = plan(step("unit", check("true")), step("lint", check("true")))
"""Two steps, both covering R: dropping either is a weakening."""


# ------------------------------------------------------------------------------------ world


@dataclass
class World:
    """One trusted repository and its three keys (see the module docstring)."""

    repo: GitRepo
    alice: Ed25519Signer
    ci: Ed25519Signer
    mallory: Ed25519Signer
    keys: Mapping[str, Path]

    @property
    def path(self) -> Path:
        return self.repo.path

    def handle(self) -> Repo:
        return open_repo(self.repo.path)

    # -- plans ---------------------------------------------------------------------------

    def write_plan(self, data: Mapping[str, Any], name: str = "default") -> None:
        self.repo.write_plan(data, name)

    def seal(
        self,
        data: Mapping[str, Any] | None = None,
        name: str = "default",
        *,
        commit: bool = True,
        reason: str | None = None,
        allow_weaken: bool = False,
    ) -> SealOutcome:
        """Write *data* (when given) as plan *name*, commit it, and seal it as alice."""
        if data is not None:
            self.write_plan(data, name)
        if commit:
            self.repo.commit(f"plan {name}")
        (checked,) = check_worktree(self.path, name)
        return seal_plan(
            self.handle(), self.alice, checked, reason=reason, allow_weaken=allow_weaken
        )

    def files_at(self, rev: str) -> dict[str, bytes]:
        """Every file of the commit *rev* (a plans or a run commit), as path -> bytes."""
        git = self.handle().git
        commit = git.revparse_single(rev).peel(pygit2.Commit)
        return read_files(git, commit.tree)

    def plans_files(self) -> dict[str, bytes]:
        return self.files_at(PLANS_REF)

    def forge_plans(self, files: Mapping[str, bytes], signer: Signer | None) -> pygit2.Oid:
        """A plans commit with *files* on top of the current tip (unsigned when signer is None),
        and move ``refs/audit/plans`` to it by hand."""
        git = self.handle().git
        tip = self.ref(PLANS_REF)
        parents = [pygit2.Oid(hex=tip)] if tip else []
        oid = self.commit_object(git, write_tree(git, files), parents, "plans: forged\n", signer)
        self.set_ref(PLANS_REF, oid)
        return oid

    def hand_made_seal_v2(
        self, name: str, change: str, *, bind_manifest: bool = True
    ) -> tuple[dict[str, bytes], dict[str, str]]:
        """The plans files with a seal v2 of plan *name* made by hand from its seal v1 (what a
        key holder can sign without ``plan seal`` and the rules it applies): the work tree's plan
        and its digest, *change* as the record's own word for it, and the manifest of the files
        that plan protects in the work tree bound (or, without *bind_manifest*, the manifest and
        its digest dropped). Returns the files and the protected files the manifest lists."""
        (checked,) = check_worktree(self.path, name)
        assert checked.plan is not None
        files = self.plans_files()
        v1 = json.loads(files[f"seals/{name}.json"])
        assert v1["version"] == 1, v1
        v2 = {
            **v1,
            "version": 2,
            "previous_digest": v1["contract_digest"],
            "contract_digest": checked.digest,
            "change": change,
        }
        tree = workspace_fingerprint(self.path).tree
        taken = protected_files(self.handle().git, tree, checked.plan)
        if bind_manifest:
            v2["protected_digest"] = manifest_digest(taken)
            files[manifest_path(name)] = manifest(taken)
        else:
            del v2["protected_digest"], files[manifest_path(name)]
        files[f"seals/{name}.json"] = dumps(v2)
        files[f"plans/{name}.json"] = checked.file.data
        return files, taken

    # -- evidence ------------------------------------------------------------------------

    def run(self, name: str = "default", signer: Signer | None = None, **kw: Any) -> RecordedRun:
        return run_plan(self.handle(), name, signer or self.ci, jobs=1, **kw)

    def run_files(self, rev: str) -> dict[str, bytes]:
        return self.files_at(rev)

    def forge_run(
        self,
        base: str,
        *,
        plan_name: str = "default",
        edit: Callable[[dict[str, Any]], None] | None = None,
        files: Mapping[str, bytes] | None = None,
        signer: Signer | None,
        parent: str | bool | None = True,
        when: int | None = None,
        move: bool = True,
    ) -> pygit2.Oid:
        """A run commit made from run commit *base*: its files (or *files*), run.json passed
        through *edit*, signed by *signer* (None: unsigned), committed on *parent* (True: the
        current tip of the plan's runs ref; None/False: a root) at time *when*."""
        git = self.handle().git
        content = dict(files) if files is not None else self.run_files(base)
        if edit is not None:
            doc = json.loads(content["run.json"])
            edit(doc)
            content["run.json"] = dumps(doc)
        if parent is True:
            parent = self.ref(runs_ref(plan_name))
        parents = [pygit2.Oid(hex=parent)] if isinstance(parent, str) else []
        oid = self.commit_object(
            git, write_tree(git, content), parents, "audit: forged\n", signer, when=when
        )
        if move:
            self.set_ref(runs_ref(plan_name), oid)
        return oid

    @staticmethod
    def commit_object(
        git: pygit2.Repository,
        tree: pygit2.Oid,
        parents: list[pygit2.Oid],
        message: str,
        signer: Signer | None,
        *,
        when: int | None = None,
        namespace: str = NAMESPACE,
    ) -> pygit2.Oid:
        who = pygit2.Signature("forger", "forger@example.test", int(when or time.time()), 0)
        if signer is None:
            return git.create_commit(None, who, who, message, tree, parents)
        return create_signed_commit(
            git,
            tree=tree,
            parents=parents,
            message=message,
            signer=signer,
            author=who,
            namespace=namespace,
        )

    def rewrite_raw(
        self, oid: str, transform: Callable[[bytes], bytes], *, plan_name: str = "default"
    ) -> pygit2.Oid:
        """Write transform(raw commit bytes) as a new commit object and point the runs ref at
        it (the original signature header is kept unless *transform* drops it)."""
        git = self.handle().git
        _kind, raw = git.odb.read(pygit2.Oid(hex=oid))
        new = git.odb.write(ObjectType.COMMIT, transform(raw))
        self.set_ref(runs_ref(plan_name), new)
        return new

    # -- refs and the gate ---------------------------------------------------------------

    def ref(self, name: str) -> str | None:
        out = self.repo.git("rev-parse", "--verify", "-q", name, check=False).strip()
        return out or None

    def set_ref(self, name: str, oid: pygit2.Oid | str) -> None:
        self.repo.git("update-ref", name, str(oid))

    def gate(self, rev: str | None = "HEAD", **kw: Any) -> GateResult:
        return assert_well_formed(judge(self.handle(), rev, **kw))

    def cli(self, *args: str, process: bool = False) -> Any:
        return audit(self.path, *args, process=process)

    # -- a server --------------------------------------------------------------------------

    def serve(self, server: Path) -> Path:
        """A bare repository at *server* with the server's pre-receive hook, the root key
        pinned and this world's plans ref pushed; the remote ``origin`` of this world, which
        signs (``git audit push``) with ci's key."""
        git(server.parent, "init", "-q", "--bare", "-b", "main", str(server))
        git(server, "config", "audit.rootKey", self.repo.git("config", "audit.rootKey").strip())
        installed = audit(server, "hooks", "install", "--server")
        assert installed.code == 0, installed.err
        self.repo.git("remote", "add", "origin", str(server))
        self.repo.git("config", "audit.signingKey", str(self.keys["ci"]))
        self.repo.git("push", "-q", "origin", f"{PLANS_REF}:{PLANS_REF}")
        return server


def only(result: GateResult, name: str = "default") -> PlanVerdict:
    """The verdict of plan *name* in *result*."""
    (found,) = [p for p in result.plans if p.name == name]
    return found


def codes(verdict: PlanVerdict) -> list[str]:
    return [r.code for r in verdict.reasons]


def assert_plan(result: GateResult, code: str, verdict: str, name: str = "default") -> PlanVerdict:
    """The gate's aggregate and plan *name* both say *verdict*, and *code* is the first reason."""
    judged = only(result, name)
    assert judged.verdict == verdict, judged
    assert judged.reasons and judged.reasons[0].code == code, judged.reasons
    assert result.verdict == verdict, result
    return judged


def assert_plans_level(result: GateResult, code: str) -> None:
    """A problem of refs/audit/plans itself: FAIL before any plan is judged."""
    assert result.verdict == "FAIL", result
    assert result.plans == ()
    assert [r.code for r in result.reasons] == [code], result.reasons


def edit_lookup_cache(
    world: World,
    tallies: Callable[[dict[str, Any]], None] | None = None,
    *statements: str,
) -> None:
    """What an agent can do to ``.git/gitaudit/index.sqlite``: rewrite the default ledger's
    tallies (their JSON body passed through *tallies*; the MAC, which it cannot compute, left as
    it was) and run SQL *statements*."""
    with contextlib.closing(sqlite3.connect(world.handle().state_dir / "index.sqlite")) as db:
        if tallies is not None:
            (body,) = db.execute("SELECT body FROM tallies WHERE plan='default'").fetchone()
            doc = json.loads(body)
            tallies(doc)
            db.execute("UPDATE tallies SET body=? WHERE plan='default'", (json.dumps(doc),))
        for statement in statements:
            db.execute(statement)
        db.commit()


def runner(world: World, name: str, labels: frozenset[str] = frozenset()) -> Ed25519Signer:
    """A second trusted runner (an agent's own key, another CI), added by alice."""
    signer = load_signer(generate_key(name).private_path)
    assert isinstance(signer, Ed25519Signer)
    trust_add(world.handle(), world.alice, signer.public_key, "runner", name, labels)
    return signer


@pytest.fixture
def world(repo: GitRepo) -> World:
    """alice seals (not a runner), ci runs; no plan sealed yet."""
    paths = {name: generate_key(name).private_path for name in ("alice", "ci", "mallory")}
    signers = {name: load_signer(path) for name, path in paths.items()}
    for signer in signers.values():
        assert isinstance(signer, Ed25519Signer)
    handle = open_repo(repo.path)
    trust_init(handle, signers["alice"], "alice", runner=False)
    trust_add(handle, signers["alice"], signers["ci"].public_key, "runner", "ci")
    state = read_state(handle)
    assert state.trust.with_role("runner") == [signers["ci"].public_key]
    return World(repo, signers["alice"], signers["ci"], signers["mallory"], paths)  # type: ignore[arg-type]


@pytest.fixture
def sealed(world: World) -> World:
    """The world with STRICT sealed as ``default`` and committed (no evidence yet)."""
    world.seal(STRICT)
    return world


@pytest.fixture
def proven(sealed: World) -> World:
    """The world with genuine PASS evidence by ci for HEAD's tree."""
    recorded = sealed.run()
    assert recorded.verdict == "PASS", recorded.doc
    assert sealed.gate().verdict == "PASS"
    return sealed
