"""Strategies and fixtures shared by the fuzz tests.

* JSON values that go further than ``st.recursive``: huge and non-finite numbers, lone surrogates,
  NUL, RTL marks, long strings and digit strings, and *raw fragments* spliced into the serialised
  text (``1e400``, 5000-digit integers, nesting thousands of levels deep, duplicate keys), which
  ``json.dumps`` cannot produce.
* :func:`mutate`: structured mutations of a JSON document driven by ``st.data()`` (replace, delete,
  duplicate, wrap, retype, grow, copy from elsewhere), so a genuine document can be damaged at any
  depth and still shrink to a readable counterexample.
* :func:`tolerating_known_bugs`: the only way a fuzz test lets an exception through unharmed is
  being a :class:`gitaudit.errors.GitAuditError`; anything else fails, unless it is one of the
  registered, reproduced bugs in :mod:`tests.fuzz.known_bugs`.
* :func:`signed_world` / :func:`gate_world`: small real repositories built once per session.
"""

from __future__ import annotations

import contextlib
import copy
import json
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pygit2
from hypothesis import event
from hypothesis import strategies as st

from gitaudit.errors import GitAuditError
from tests.fuzz.known_bugs import known_bug

if TYPE_CHECKING:
    from gitaudit.gate.result import GateResult

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
PLAN_FIXTURES = sorted([*FIXTURES.glob("plans/*.json"), *FIXTURES.glob("compat/*.json")])

# ----------------------------------------------------------------------------- known bugs


@contextlib.contextmanager
def tolerating_known_bugs(
    allowed: tuple[type[BaseException], ...] = (GitAuditError,),
) -> Iterator[None]:
    """Let *allowed* exceptions and registered known bugs pass; re-raise anything else."""
    try:
        yield
    except allowed:
        pass
    except Exception as exc:
        bug = known_bug(exc)
        if bug is None:
            raise
        event(f"known bug: {bug.name}")


# ----------------------------------------------------------------------------- JSON values

INTERESTING_INTS = [
    0,
    1,
    -1,
    2,
    255,
    2**31 - 1,
    2**31,
    2**32,
    2**53 - 1,
    2**53,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64,
    10**30,
    -(10**30),
]
INTERESTING_FLOATS = [0.0, -0.0, 0.5, 1.0, 2.0, 1e-300, 5e-324, 1e20, 1e300, 1.7976931348623157e308]
INTERESTING_STRINGS = [
    "",
    " ",
    "\x00",
    "\ud800",
    "\udc80",
    "a\ud800b",
    "\u202e",
    "\ufeff",
    "é",
    "😀",
    "a\nb",
    "x\n",
    "\t",
    "²",
    "٣",
    "1.5",
    "-1",
    "..",
    "../x",
    "/etc/passwd",
    "a/../../b",
    "\\",
    "[",
    "*",
    "**/",
    "pkg*/**",
    "(?P<",
    "(a+)+$",
    "30m",
    "1h30m",
    "0s",
    "sha256:" + "0" * 64,
]


def long_string(kind: int) -> str:
    """Long strings, built on demand so that strategy reprs stay short."""
    return ["x" * 10_000, "7" * 5_000, "9" * 4_301 + "d", "a/" * 2_000 + "b", "é" * 3_000][kind]


# raw JSON text spliced in place of a placeholder string after json.dumps
RAW_FRAGMENTS = [
    "1e400",
    "-1e400",
    "1e-400",
    "1" + "0" * 400,
    "1" + "0" * 5_000,
    "1.0",
    "1E2",
    "-0",
    "NaN",
    "Infinity",
    '{"a": 1, "a": 2}',
    '"\\ud800"',
    '"\\u0000"',
    "[" * 50 + "]" * 50,
    "[" * 990 + "]" * 990,
    "[" * 5_000 + "]" * 5_000,
    '{"a":' * 3_000 + "1" + "}" * 3_000,
]
_PLACEHOLDER = "\x00raw{}\x00"


def raw(index: int) -> str:
    """A placeholder that :func:`encode` replaces with ``RAW_FRAGMENTS[index]``."""
    return _PLACEHOLDER.format(index)


scalars: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-1000, max_value=1000),
    st.integers(),
    st.sampled_from(INTERESTING_INTS),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(INTERESTING_FLOATS),
    st.text(max_size=20),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=12),
    st.text(alphabet=st.characters(categories=["Cs", "Cc", "Nd", "No", "Zs"]), max_size=6),
    st.sampled_from(INTERESTING_STRINGS),
    st.integers(0, 4).map(long_string),
    st.integers(0, len(RAW_FRAGMENTS) - 1).map(raw),
)


def json_values(extra: Sequence[Any] = (), max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Arbitrary JSON (with placeholders), biased towards *extra* vocabulary."""
    leaf = st.one_of(scalars, st.sampled_from(list(extra))) if extra else scalars
    keys = st.one_of(st.text(max_size=8), st.sampled_from([k for k in extra if isinstance(k, str)]))
    if not any(isinstance(k, str) for k in extra):
        keys = st.text(max_size=8)
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)
        ),
        max_leaves=max_leaves,
    )


def encode(value: Any, data: st.DataObject | None = None) -> bytes:
    """Serialise *value* as JSON text (ASCII-escaped or raw UTF-8, compact or indented) and splice
    in the raw fragments."""
    ascii_only, indent = True, None
    if data is not None:
        ascii_only = data.draw(st.booleans(), label="ensure_ascii")
        indent = data.draw(st.sampled_from([None, 2]), label="indent")
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    for i, fragment in enumerate(RAW_FRAGMENTS):
        quoted = json.dumps(raw(i), ensure_ascii=ascii_only)
        text = text.replace(quoted, fragment)
    return text.encode("utf-8", "surrogatepass")


# ----------------------------------------------------------------------------- mutation

_OPS = ["replace", "replace", "delete", "duplicate", "wrap", "retype", "grow", "transplant"]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*prefix, i)))
    return out


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


def _retype(value: Any) -> list[Any]:
    return [
        str(value),
        [value],
        {"value": value},
        None,
        len(str(value)),
        -len(str(value)) - 1,
        float(len(str(value))) + 0.5,
        bool(value),
    ]


def _mutate_once(data: st.DataObject, root: Any, leaves: st.SearchStrategy[Any]) -> Any:
    paths = _paths(root)
    path = data.draw(st.sampled_from(paths), label="path")
    op = data.draw(st.sampled_from(_OPS), label="op")
    node = _get(root, path)
    if op == "replace":
        new = data.draw(leaves, label="value")
    elif op == "wrap":
        new = data.draw(st.sampled_from([[node], {"any_of": [node]}, [node, node]]))
    elif op == "retype":
        new = data.draw(st.sampled_from(_retype(node)))
    elif op == "transplant":
        new = copy.deepcopy(_get(root, data.draw(st.sampled_from(paths), label="from")))
    elif op == "grow" and isinstance(node, list):
        node.insert(data.draw(st.integers(0, len(node))), data.draw(leaves, label="value"))
        return root
    elif op == "grow" and isinstance(node, dict):
        names = leaves.filter(lambda v: isinstance(v, str))
        key = data.draw(st.one_of(st.text(max_size=12), names), label="key")
        node[key] = data.draw(leaves, label="value")
        return root
    elif op == "duplicate" and isinstance(node, list) and node:
        i = data.draw(st.integers(0, len(node) - 1))
        node.insert(data.draw(st.integers(0, len(node))), copy.deepcopy(node[i]))
        return root
    elif op == "delete" and path:
        parent = _get(root, path[:-1])
        del parent[path[-1]]
        return root
    else:
        new = data.draw(leaves, label="value")
    if not path:
        return new
    _get(root, path[:-1])[path[-1]] = new
    return root


def mutate(
    data: st.DataObject, doc: Any, leaves: st.SearchStrategy[Any], max_rounds: int = 4
) -> Any:
    """A copy of *doc* with 1..*max_rounds* structured mutations at random depths."""
    out = copy.deepcopy(doc)
    leaves = leaves.map(copy.deepcopy)  # never hand out (and then mutate) a shared vocabulary
    for _ in range(data.draw(st.integers(1, max_rounds), label="rounds")):
        out = _mutate_once(data, out, leaves)
    return out


# ----------------------------------------------------------------------------- repositories

SEED = bytes(range(32))  # a fixed Ed25519 seed: reproducible signatures


@cache
def scratch_dir() -> Path:
    """One temporary folder for the session's repositories (hypothesis reruns test bodies, so
    function-scoped fixtures cannot hold them)."""
    return Path(tempfile.mkdtemp(prefix="gitaudit-fuzz-"))


@cache
def bare_repo() -> pygit2.Repository:
    return pygit2.init_repository(str(scratch_dir() / "objects.git"), bare=True)


def commit_files(repo: pygit2.Repository, files: dict[str, bytes]) -> pygit2.Oid:
    """An unsigned commit holding *files* (no ref moves)."""
    from gitaudit.ledger.objects import write_tree

    tree = write_tree(repo, files)
    who = pygit2.Signature("fuzz", "fuzz@example.test", 1_700_000_000, 0)
    oid = repo.create_commit(None, who, who, "fuzz", tree, [])
    assert isinstance(oid, pygit2.Oid)
    return oid


@dataclass(frozen=True)
class GateWorld:
    """A repository with a sealed two-step plan, a genuine PASS run for an older tree, and a newer
    HEAD tree that only ``pkgb/`` distinguishes: step ``a`` may be carried, ``b`` must run."""

    path: Path
    plan: str
    genuine: pygit2.Oid  # the PASS run for the older tree
    genuine_doc: dict[str, Any]
    evidence_files: dict[str, bytes]  # the genuine run commit's tree
    tree: str  # HEAD's tree: the one judged
    contract: str
    digests: dict[str, str]  # input digests of the steps for ``tree``
    step_ids: tuple[str, ...]


GATE_PLAN: dict[str, Any] = {
    "task": "fuzz the gate",
    "requirements": [{"id": "R", "description": "both packages work"}],
    "steps": [
        {
            "id": "a",
            "depends_on": [],
            "covers": ["R"],
            "inputs": ["pkga/**"],
            "verify": [{"type": "run", "argv": ["true"]}],
            "outputs": [{"name": "o", "verify": [{"type": "file_exists", "path": "pkga/a.txt"}]}],
        },
        {
            "id": "b",
            "depends_on": ["a"],
            "requires_outputs": [{"step": "a", "name": "o"}],
            "covers": ["R"],
            "inputs": ["pkgb/**"],
            "valid_for": "30d",
            "verify": [{"type": "run", "argv": ["true"]}],
        },
    ],
}


@cache
def gate_world() -> GateWorld:
    """Built on first use, inside a test (so under the hermetic HOME of ``tests/conftest.py``)."""
    from gitaudit.crypto.signers import Ed25519Signer
    from gitaudit.git.repo import open_repo
    from gitaudit.ledger.seals import seal_plan, trust_init
    from gitaudit.plan.catalog import check_worktree
    from gitaudit.plan.inputs import input_digests
    from gitaudit.plan.load import load_plan
    from gitaudit.run.recorder import run_plan
    from tests.gitrepo import GitRepo

    repo = GitRepo.create(scratch_dir() / "gate")
    repo.write("pkga/a.txt", "a\n")
    repo.write("pkgb/b.txt", "b\n")
    repo.write_plan(GATE_PLAN)
    repo.commit("plan")
    handle = open_repo(repo.path)
    signer = gate_signer()
    assert isinstance(signer, Ed25519Signer)
    trust_init(handle, signer, "alice")
    (checked,) = check_worktree(repo.path, "default")
    seal_plan(handle, signer, checked)
    recorded = run_plan(handle, "default", signer, jobs=1)
    assert recorded.verdict == "PASS", recorded.doc["reasons"]
    genuine = pygit2.Oid(hex=recorded.commit)
    commit = handle.git[genuine]
    assert isinstance(commit, pygit2.Commit)
    from gitaudit.ledger.objects import read_files

    files = read_files(handle.git, commit.tree)
    repo.write("pkgb/b.txt", "b changed\n")
    repo.commit("change pkgb")
    tree = repo.head_tree()
    plan, _ = load_plan(json.dumps(GATE_PLAN).encode(), name="default", source="x")
    assert plan is not None
    return GateWorld(
        path=repo.path,
        plan="default",
        genuine=genuine,
        genuine_doc=json.loads(files["run.json"]),
        evidence_files=files,
        tree=tree,
        contract=str(recorded.doc["contract_digest"]),
        digests=input_digests(handle.git, plan, tree),
        step_ids=tuple(plan.step_ids),
    )


@cache
def gate_signer() -> Any:
    from gitaudit.crypto.signers import Ed25519Signer

    return Ed25519Signer(SEED, comment="fuzz")


def ideal_doc(world: GateWorld) -> dict[str, Any]:
    """A genuine-looking pass for the judged tree: ``a`` carried from the genuine run (its inputs
    did not change), ``b`` passed. Signed by the trusted runner, the gate must accept it."""
    doc = copy.deepcopy(world.genuine_doc)
    doc["tree"] = world.tree
    doc["purity"] = {"before": world.tree, "after": world.tree, "changed": []}
    for sid in world.step_ids:
        doc["steps"][sid]["input_digest"] = world.digests[sid]
    doc["steps"]["a"].update(status="carried", carried_from=str(world.genuine))
    return doc


def install_run(
    run_json: bytes, *, signed: bool = True, parent: pygit2.Oid | None = None
) -> pygit2.Oid:
    """Put a run commit holding *run_json* on top of *parent* (default: the genuine run) and move
    the gate world's ledger ref to it."""
    from gitaudit.crypto.commits import create_signed_commit
    from gitaudit.git.repo import open_repo
    from gitaudit.ledger.objects import write_tree
    from gitaudit.ledger.refs import runs_ref

    world = gate_world()
    git = open_repo(world.path).git
    tree = write_tree(git, {**world.evidence_files, "run.json": run_json})
    parents = [parent or world.genuine]
    if signed:
        oid = create_signed_commit(
            git, tree=tree, parents=parents, message="audit(default): fuzz", signer=gate_signer()
        )
    else:
        who = pygit2.Signature("mallory", "mallory@example.test", 1_700_000_000, 0)
        oid = git.create_commit(None, who, who, "audit(default): unsigned", tree, parents)
    git.references.create(runs_ref(world.plan), oid, force=True)
    return oid


def judge_gate(pushed: pygit2.Oid | None = None) -> GateResult:
    """``gate.assess`` of the gate world's HEAD (no marks remembered, no tool checks)."""
    from gitaudit.gate.assess import assess
    from gitaudit.git.repo import open_repo

    world = gate_world()
    return assess(
        open_repo(world.path),
        "HEAD",
        check_tools=False,
        with_states=False,
        pushed_runs={world.plan: pushed} if pushed is not None else None,
    )
