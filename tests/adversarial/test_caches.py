"""Attacks on the caches the gate trusts: the verdict memo, the schema-valid marks, the
fingerprint's kept index and the ledger's lookup cache (class "caches").

Each cache is state the agent can write or influence; a cache may only ever answer what the full
judgement would answer in the same state, so each attack changes what the full gate reads and
leaves the cache's key as it was.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from gitaudit.errors import RepositoryError
from tests.adversarial.conftest import World, check, plan, step
from tests.agent.host import run_hook, stop
from tests.gitrepo import GitRepo, audit

IGNORED_PLAN = {
    "task": "the greeting reads its tool's verdict",
    "requirements": [{"id": "R", "description": "the tool says ok", "priority": "must"}],
    "ignored_paths": ["tools"],
    "steps": [
        {
            "id": "unit",
            "depends_on": [],
            "covers": ["R"],
            "verify": [{"type": "run", "argv": ["grep", "-qx", "ok", "tools/verdict"]}],
        }
    ],
}


CHANGED = "the declared ignored path 'tools' changed since the run that proved plan 'default'"


def _ignored_project(path: Path) -> GitRepo:
    repo = GitRepo.create(path)
    repo.write(".gitignore", "tools/\n")
    repo.write("tools/verdict", "ok\n")
    repo.write("app.py", "x = 1\n")
    repo.commit("app")
    done = audit(repo.path, "init")
    assert done.code == 0, done.out + done.err
    repo.write_plan(IGNORED_PLAN)
    done = audit(repo.path, "plan", "seal", "--reason", "first version")
    assert done.code == 0, done.out + done.err
    repo.git("add", "-A")
    repo.git("commit", "-q", "--no-verify", "-m", "plan")
    return repo


@pytest.mark.parametrize("remembered_by", ["run", "status", "push-judgement"])
def test_attack_caches_memo_serves_the_stop_hook_a_pass_relying_on_ignored_paths(
    tmp_path: Path, remembered_by: str
) -> None:
    """The run that proved the tree read the declared ignored path tools/verdict; a PASS is
    remembered (by the run itself, by `status`, or judged for a push of HEAD). The agent then
    changes tools/verdict, which the tree and the memo's state do not cover, and stops: the
    stop hook took the remembered PASS (all three allowed the stop before the fix); the full
    gate says UNKNOWN, and so does the hook now."""
    repo = _ignored_project(tmp_path / "project")
    ran = audit(repo.path, "run")
    assert ran.code == 0, ran.out + ran.err
    if remembered_by == "status":
        assert audit(repo.path, "status").code == 0
    elif remembered_by == "push-judgement":
        assert audit(repo.path, "status", "--for", "refs/heads/main", "HEAD").code == 0
    repo.write("tools/verdict", "changed\n")  # what the run relied on, outside the tree
    run = run_hook(repo.path, "stop", stop(repo.path))
    assert run.blocked, run.stdout + run.stderr
    assert CHANGED in run.reason
    judged = audit(repo.path, "status")
    assert judged.code == 3 and judged.out.startswith("UNKNOWN") and CHANGED in judged.out


NO_EVIDENCE = "not targeted and no evidence for this tree"
UNIT_READS_SRC = plan(
    step("unit", check("grep", "-q", "good", "src.py")), step("lint", check("true"))
)


@pytest.mark.parametrize("filed", ["a run of the older tree", "a run of another plan"])
def test_attack_caches_lookup_rows_make_a_targeted_run_carry_a_foreign_pass(
    world: World, filed: str
) -> None:
    """unit passed on an older tree; the agent commits src.py that unit fails on, then files
    a row in the lookup cache listing, for the new tree under plan default's contract, a run
    in which unit passed: default's run of the older tree, or a run of plan other (whose unit
    is `true`) for the new tree. The honest runner's `git audit run lint` took the row's run
    as this tree's own and signed unit as carried from it: PASS (the gate then said FAIL,
    evidence.carried-invalid; both variants). The run now reads the signed record and keeps
    only this plan's runs of this tree and contract: unit is not carried (not targeted, no
    evidence for this tree), and the run and the gate say UNKNOWN."""
    world.repo.write("src.py", "good = True\n")
    world.seal(UNIT_READS_SRC)
    older = world.run()
    assert older.verdict == "PASS"
    world.repo.write("src.py", "bad = True\n")
    world.repo.commit("unit fails on this tree")
    tree = world.repo.head_tree()
    source = older.commit
    if filed == "a run of another plan":
        world.seal(plan(step("unit"), step("lint")), "other")
        tree = world.repo.head_tree()
        other = world.run("other")
        assert other.verdict == "PASS" and other.tree == tree
        source = other.commit
    with sqlite3.connect(world.handle().state_dir / "index.sqlite") as db:
        plan_name, seq, _, _, contract, _, when = db.execute(
            "SELECT * FROM runs WHERE plan='default' ORDER BY seq DESC"
        ).fetchone()
        db.execute(
            "INSERT INTO runs VALUES (?,?,?,?,?,?,?)",
            (plan_name, -seq, source, tree, contract, "PASS", when),
        )
    recorded = world.run(targets=["lint"])
    unit = recorded.doc["steps"]["unit"]
    assert (unit["status"], unit["reason"]) == ("not-run", NO_EVIDENCE), unit
    assert recorded.verdict == "UNKNOWN"
    judged = world.gate()
    assert judged.verdict == "UNKNOWN"
    (default,) = [p for p in judged.plans if p.name == "default"]
    assert [r.code for r in default.reasons] == ["step.not-run"]


BOGUS = "SHA256:" + "A" * 43  # a root key that is no key of this repository
Change = Callable[[World, str], dict[str, str]]  # (world, pinned key) -> variables for git


def _root_keys(world: World, *values: str) -> None:
    """Make ``audit.rootKey`` in .git/config the values *values*, in order (none: unset)."""
    world.repo.git("config", "--unset-all", "audit.rootKey", check=False)
    for value in values:
        world.repo.git("config", "--add", "audit.rootKey", value)


def _config_file(world: World, name: str, *values: str) -> str:
    """A configuration file beside the repository setting ``audit.rootKey`` to *values*."""
    path = world.path.parent / name
    path.write_text("[audit]\n" + "".join(f"\trootKey = {v}\n" for v in values))
    return str(path)


def _by_variable(variables: dict[str, str]) -> tuple[Change, Change]:
    """Judged with *variables* set to add BOGUS after the pin (the gate's libgit2 never reads
    them), then BOGUS written after the pin in .git/config, which git prints alike."""

    def judged(world: World, key: str) -> dict[str, str]:
        return variables

    def typed(world: World, key: str) -> dict[str, str]:
        _root_keys(world, key, BOGUS)
        return {}

    return judged, typed


def _global_file(variable: str, nosystem: dict[str, str]) -> tuple[Change, Change]:
    """Judged with BOGUS then the pin in .git/config; then both moved to a file named by
    *variable*, which git reads as the user's (or the system's) configuration and libgit2 does
    not: .git/config pins nothing."""

    def judged(world: World, key: str) -> dict[str, str]:
        _root_keys(world, BOGUS, key)
        return {}

    def moved(world: World, key: str) -> dict[str, str]:
        _root_keys(world)
        return {variable: _config_file(world, "elsewhere", BOGUS, key), **nosystem}

    return judged, moved


def _hasconfig() -> tuple[Change, Change]:
    """Judged with BOGUS then the pin in .git/config; then the pin moved to a file .git/config
    includes under a condition git knows and libgit2 does not (``hasconfig:``)."""

    def judged(world: World, key: str) -> dict[str, str]:
        _root_keys(world, BOGUS, key)
        return {}

    def included(world: World, key: str) -> dict[str, str]:
        _root_keys(world, BOGUS)
        world.repo.git("config", "remote.mirror.url", "example.test:mirror")
        condition = "includeIf.hasconfig:remote.*.url:example.test:*.path"
        world.repo.git("config", condition, _config_file(world, "included", key))
        return {}

    return judged, included


CONFIG_VIEWS = {
    "GIT_CONFIG_COUNT": _by_variable(
        {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "audit.rootKey", "GIT_CONFIG_VALUE_0": BOGUS}
    ),
    "GIT_CONFIG_PARAMETERS": _by_variable({"GIT_CONFIG_PARAMETERS": f"'audit.rootkey'='{BOGUS}'"}),
    "GIT_CONFIG_GLOBAL": _global_file("GIT_CONFIG_GLOBAL", {}),
    "GIT_CONFIG_SYSTEM": _global_file("GIT_CONFIG_SYSTEM", {"GIT_CONFIG_NOSYSTEM": "0"}),
    "includeIf hasconfig": _hasconfig(),
}


@pytest.mark.parametrize("view", sorted(CONFIG_VIEWS))
def test_attack_caches_memo_keys_the_configuration_git_reads_not_the_gates(
    proven: World, view: str
) -> None:
    """The memo's state holds the configuration as `git config` prints it; the gate reads it
    with libgit2, which takes nothing from variables, reads the user's and system's files where
    they are by default, and includes no file under ``hasconfig:``. The agent has the work tree
    judged PASS with a configuration in which git prints `rootKey = BOGUS` then the pin while
    the gate reads the pin, then changes it so that git prints the same two lines while the
    gate reads BOGUS, or no pin at all: the full gate says FAIL (the trust anchor disagrees),
    and the stop hook took the remembered PASS (every variant) before the fix. The state now
    reads the configuration where libgit2 does, and a condition libgit2 does not know leaves
    no state: the stop hook judges in full and blocks."""
    judged, changed = CONFIG_VIEWS[view]
    key = proven.repo.git("config", "audit.rootKey").strip()
    remembered = audit(proven.path, "status", env=judged(proven, key))
    assert remembered.code == 0 and remembered.out.startswith("PASS"), remembered.out
    env = changed(proven, key)
    assert proven.gate(None).verdict == "FAIL"  # what the full gate says now (libgit2's view)
    run = run_hook(proven.path, "stop", stop(proven.path), env=env)
    assert run.blocked, run.stdout + run.stderr
    assert "plans.anchor-mismatch" in run.reason or "trust anchor" in run.reason, run.reason


@pytest.mark.parametrize("extension", ["partialClone", "noop-v1"])
def test_attack_caches_memo_serves_a_repository_the_gate_cannot_open(
    proven: World, extension: str
) -> None:
    """A PASS of the work tree is remembered; the agent then sets a repository extension that
    git reads on and libgit2 refuses (format version 1). The gate cannot open the repository
    and judges nothing (a one-line refusal naming the setting), and the stop hook took the
    remembered PASS (both variants) before the fix: the state did not hold the repository's
    format. It does now, and the stop hook blocks with the refusal."""
    assert audit(proven.path, "status").out.startswith("PASS")
    proven.repo.git("config", "core.repositoryformatversion", "1")
    proven.repo.git("config", f"extensions.{extension}", "origin")
    with pytest.raises(RepositoryError, match="unsupported extension"):
        proven.gate(None)
    run = run_hook(proven.path, "stop", stop(proven.path))
    assert run.blocked, run.stdout + run.stderr
    assert "cannot open the repository" in run.reason, run.reason


# A check (a test of the agent's) writes the private git dir of its checkout, which the run
# reads and writes again, unfenced, after the checks: a program git starts, or a link the run
# writes through. $GITDIR is the checkout's git dir, $KEY the runner's key, $LOOT where the
# agent picks it up, $G the user's ~/.gitconfig, $X the folder of the global attributes.
_STEAL = (
    'printf "#!/bin/sh\\ncp %s %s\\n" "$KEY" "$LOOT" > "$TMPDIR/steal"; chmod +x "$TMPDIR/steal"; '
)
SLOT_GIT_DIR = {
    "fsmonitor program, index rewritten": _STEAL
    + 'git config core.fsmonitor "$TMPDIR/steal" && git read-tree HEAD',
    "fsmonitor program in a config file a link names, index rewritten": _STEAL
    + 'printf "[core]\\n\\tfsmonitor = %s\\n" "$TMPDIR/steal" > "$TMPDIR/cfg"; '
    + 'ln -sf "$TMPDIR/cfg" "$GITDIR/config" && git read-tree HEAD',
    "config a link to ~/.gitconfig": 'ln -sf "$G" "$GITDIR/config"',
    "info a link to the global git folder": 'rm -rf "$GITDIR/info" && ln -s "$X" "$GITDIR/info"',
}


@pytest.mark.parametrize("variant", sorted(SLOT_GIT_DIR))
def test_attack_caches_check_leaves_the_slot_git_dir_to_the_run(
    world: World, tmp_path: Path, variant: str
) -> None:
    """The checks may write their checkout's private git dir (its ``.git`` file leads there),
    which is made anew before the next update. But the run itself reads and writes it after
    the checks, outside the fence: its purity check writes the dir's settings again (through a
    link a check left: ``config`` leading to the user's ``~/.gitconfig``, which then held
    ``hooksPath = /dev/null``; ``info`` leading to ``~/.config/git``, whose ``attributes`` it
    deleted), and the clean-up ran ``git clean`` there with the settings a check wrote
    whenever the check had rewritten the index (which skipped that rewrite): a
    ``core.fsmonitor`` program the check left in its ``TMPDIR`` ran unfenced and copied the
    runner's signing key where the agent reads it. All four got through before the fix. The
    settings are now written as new files (a link is removed, never followed) into a folder of
    the slot's own before any git runs there after the checks: nothing outside the slot is
    written, no program of a check's runs, and the key stays where it is."""
    home = Path(os.environ["HOME"])
    gitconfig = home / ".gitconfig"
    gitconfig.write_text("[user]\n\tname = u\n")
    xdg = home / ".config" / "git"
    xdg.mkdir(parents=True, exist_ok=True)
    (xdg / "attributes").write_text("*.bin -text\n")
    before = {p: p.read_bytes() for p in (gitconfig, xdg / "attributes")}
    loot = tmp_path / "loot"
    env = {"KEY": str(world.keys["ci"]), "LOOT": str(loot), "G": str(gitconfig), "X": str(xdg)}
    script = 'GITDIR="$(git rev-parse --absolute-git-dir)"; ' + SLOT_GIT_DIR[variant]
    world.seal(plan(step("unit", check("sh", "-c", script, env=env))))
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "passed", recorded.doc["steps"]["unit"]
    assert not loot.exists(), "the runner's key was copied out"
    assert {p: p.read_bytes() for p in before if p.exists()} == before
    assert all(p.exists() for p in before)


_HIDE_A_DELETION = r"""set -e
G="$(git rev-parse --absolute-git-dir)"
rm tests/fails.sh
export GIT_INDEX_FILE="$TMPDIR/index"
git read-tree HEAD && git add -A
NOW="$(git write-tree)"
unset GIT_INDEX_FILE
T="$(git rev-parse 'HEAD^{tree}')"
if [ "$STORE" = alternate ]; then
  S="$TMPDIR/store"; mkdir -p "$S"
  { echo "$S"; cat "$G/objects/info/alternates"; } > "$TMPDIR/alternates"
  mv "$TMPDIR/alternates" "$G/objects/info/alternates"
else
  S="$G/objects"
fi
D="$S/$(echo "$T" | cut -c1-2)"; mkdir -p "$D"
git cat-file tree "$NOW" | python3 -c 'import sys, zlib
d = sys.stdin.buffer.read()
sys.stdout.buffer.write(zlib.compress(b"tree %d\0" % len(d) + d))' > "$D/$(echo "$T" | cut -c3-)"
"""


@pytest.mark.parametrize("store", ["loose object", "alternate"])
def test_attack_caches_check_forges_the_judged_tree_in_the_slot_s_store(
    world: World, store: str
) -> None:
    """The purity check named what the steps changed in the checkout by ``git diff-tree`` of
    the judged tree and the tree the checkout now holds, reading the objects through the
    private git dir, which a check can write. The agent's step ``prep`` (a script of the tree)
    deletes the tracked ``tests/fails.sh`` that the sealed ``unit``, run after it, runs, and writes
    under the judged tree's id (a loose object in the private git dir, or in a store it puts
    first in ``objects/info/alternates``) the tree the checkout now holds: the diff named
    nothing, the run was pure, ``unit`` passed without the failing test and the gate said PASS
    (both before the fix; a deleted file has no stamp to betray it). A checkout whose tree is
    not the judged tree is now impure whatever the diff names: the run FAILs."""
    world.repo.write("tests/ok.sh", "exit 0\n")
    world.repo.write("tests/fails.sh", "exit 1\n")
    world.repo.write("prep.sh", _HIDE_A_DELETION)
    every = 'for f in tests/*.sh; do sh "$f" || exit 1; done'
    env = {"STORE": "alternate" if store == "alternate" else "loose"}
    world.seal(
        plan(
            step("prep", check("sh", "prep.sh", env=env)),
            step("unit", check("sh", "-c", every)),
        )
    )
    recorded = world.run()
    assert recorded.doc["steps"]["prep"]["status"] == "passed", recorded.doc["steps"]["prep"]
    assert recorded.doc["purity"]["changed"], recorded.doc["purity"]
    assert recorded.verdict == "FAIL"
    assert world.gate().verdict != "PASS"
