"""Attacks on incremental evidence: a step whose ``inputs`` are unchanged is carried, not run.

The agent keeps every file the globs match byte for byte and breaks what one of them points to:
a symlink inside the inputs whose target lives elsewhere in the tree. Evidence binds what ran,
so the step's input digest covers the content behind the link and the step runs again.
"""

from __future__ import annotations

import hashlib
import os
import zlib
from pathlib import Path
from typing import Any

import pytest

from gitaudit.places import checkouts_dir
from gitaudit.run.checkout import listing_digest
from gitaudit.run.recorder import RecordedRun
from tests.adversarial.conftest import World, assert_plan, check, edit_lookup_cache, plan, step
from tests.gitrepo import GitRepo

# variant -> (symlinks: path -> target, the file the check reads, the step's inputs)
VARIANTS: dict[str, tuple[dict[str, str], str, list[str]]] = {
    "a link to the file": ({"src/impl.txt": "../lib/impl.txt"}, "src/impl.txt", ["src/**"]),
    "a link to its folder": ({"src/lib": "../lib"}, "src/lib/impl.txt", ["src/**"]),
    "a chain of links": (
        {"src/impl.txt": "../mid/impl.txt", "mid/impl.txt": "../lib/impl.txt"},
        "src/impl.txt",
        ["src/**"],
    ),
    "a link deep in a subfolder": (
        {"src/x/y/impl.txt": "../../../lib/impl.txt"},
        "src/x/y/impl.txt",
        ["src/**"],
    ),
    "a glob through a linked folder": ({"src/lib": "../lib"}, "src/lib/impl.txt", ["src/lib/*"]),
}


def _world_with_links(world: World, variant: str) -> None:
    links, read, patterns = VARIANTS[variant]
    world.repo.write("lib/impl.txt", "works\n")
    for path, target in links.items():
        (world.path / path).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, world.path / path)
    unit: dict[str, Any] = step("unit", check("grep", "-q", "works", read), inputs=patterns)
    world.seal(plan(unit, step("lint")))
    assert world.run().verdict == "PASS"


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_attack_inputs_content_behind_a_symlink_broken(world: World, variant: str) -> None:
    """The file behind the link is broken; every path the globs match is unchanged."""
    _world_with_links(world, variant)
    world.repo.write("lib/impl.txt", "broken\n")
    world.repo.commit("break what the link points to")
    recorded = world.run()
    assert recorded.verdict == "FAIL", recorded.doc["steps"]["unit"]
    assert recorded.doc["steps"]["unit"]["status"] == "failed"
    assert_plan(world.gate(), "step.failed", "FAIL")


@pytest.mark.parametrize("variant", ["a link to the file", "a link to its folder"])
def test_attack_inputs_link_retargeted_at_a_copy(world: World, variant: str) -> None:
    """The link is pointed at another file (or folder) whose content is broken."""
    links, _read, _patterns = VARIANTS[variant]
    _world_with_links(world, variant)
    world.repo.write("copy/impl.txt", "broken\n")
    for path, target in links.items():
        os.unlink(world.path / path)
        os.symlink(target.replace("../lib", "../copy"), world.path / path)
    world.repo.commit("retarget")
    assert world.run().verdict == "FAIL"
    assert_plan(world.gate(), "step.failed", "FAIL")


# variant -> (the .gitattributes path, its line): each changes the bytes git writes for the
# file the check reads, without changing the file's blob
ATTRIBUTES: dict[str, tuple[str, str]] = {
    "line endings, in the root": (".gitattributes", "*.txt text eol=crlf\n"),
    "line endings, beside the file": ("src/.gitattributes", "impl.txt text eol=crlf\n"),
    "line endings, by a macro": (".gitattributes", "[attr]dos text eol=crlf\n*.txt dos\n"),
}


@pytest.mark.parametrize("variant", sorted(ATTRIBUTES))
def test_attack_inputs_attributes_outside_the_inputs_change_the_bytes(
    world: World, variant: str
) -> None:
    """The step's inputs are `src/**`; the agent adds a `.gitattributes` that rewrites how git
    checks out a file of them (CRLF line endings) while every blob the globs match stays the
    same. A checkout of the new tree holds other bytes, so the step runs again (and fails)
    instead of being carried."""
    world.repo.write("src/impl.txt", "works\n")
    reads = check(
        "python3", "-c", "import sys; sys.exit(open('src/impl.txt','rb').read() != b'works\\n')"
    )
    world.seal(plan(step("unit", reads, inputs=["src/**"]), step("lint")))
    assert world.run().verdict == "PASS"
    path, line = ATTRIBUTES[variant]
    world.repo.write(path, line)
    world.repo.git("add", path)  # only the attributes: every blob the globs match is kept
    world.repo.git("commit", "-q", "-m", "how git writes the file")
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]["unit"]
    assert recorded.verdict == "FAIL"
    assert_plan(world.gate(), "step.failed", "FAIL")


# ------------------------------------------------------------- the lookup index names the source


@pytest.mark.parametrize("forgery", ["a failed execution marked passed", "a pass given new inputs"])
def test_attack_inputs_index_names_a_carry_source_that_does_not_hold(
    world: World, forgery: str
) -> None:
    """The lookup cache (``.git/gitaudit/index.sqlite``) says which run a step with unchanged
    inputs carries; the agent edits it so that the run carries a step it should execute: the
    step's failed execution marked passed, or an older pass given the broken tree's input
    digest. Its tallies are believed only under the local key's MAC, so they are counted again
    from the chain; and the run reads the named run's signed record before it carries. The step
    is executed: FAIL (the gate always refused such a carry; the run itself said PASS and
    exited 0 before the fix)."""
    world.repo.write("src/impl.txt", "works\n")
    unit: dict[str, Any] = step(
        "unit", check("grep", "-q", "works", "src/impl.txt"), inputs=["src/**"]
    )
    world.seal(plan(unit))
    assert world.run().verdict == "PASS"
    world.repo.write("src/impl.txt", "broken\n")
    world.repo.commit("break the input")
    failed = world.run()
    assert failed.verdict == "FAIL"
    digest = failed.doc["steps"]["unit"]["input_digest"]

    def forge(doc: dict[str, Any]) -> None:
        executions = next(kept for sid, kept in doc["recent"] if sid == "unit")
        if forgery == "a failed execution marked passed":
            executions[0][0] = "passed"
        else:
            executions[:] = [["passed", digest, e[2]] for e in executions if e[0] == "passed"]

    edit_lookup_cache(world, forge)
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]["unit"]
    assert recorded.verdict == "FAIL"
    assert_plan(world.gate(), "step.failed", "FAIL")


def _unit(doc: dict[str, Any]) -> list[list[str]]:
    return next(kept for sid, kept in doc["recent"] if sid == "unit")


# variant -> (how the tallies are rewritten, SQL run on the cache)
FORGET_THE_NEWER_FAILURE: dict[str, tuple[Any, tuple[str, ...]]] = {
    "the failure removed": (lambda doc: _unit(doc).pop(0), ()),
    "the failure given other inputs": (
        lambda doc: _unit(doc)[0].__setitem__(1, "sha256:" + "0" * 64),
        (),
    ),
    "the tallies dropped, its run deleted": (
        None,
        ("DELETE FROM tallies", "DELETE FROM runs WHERE verdict='FAIL'"),
    ),
}


@pytest.mark.parametrize("forgery", sorted(FORGET_THE_NEWER_FAILURE))
def test_attack_inputs_index_forgets_a_newer_failure_with_the_same_inputs(
    world: World, forgery: str
) -> None:
    """unit declares src/** but also reads checks.txt: it passed, then (checks.txt changed, the
    inputs not) a targeted run executed it with the same input digest and it failed. The honest
    run executes it again: the newest execution with these inputs decides. The agent makes the
    lookup cache forget that failure; the run carried the older pass and said PASS, and the
    gate took it (before the fix). The run takes the newest executions of each step from the
    tallies of the signed chain, under the local key's MAC: unit runs, and fails."""
    world.repo.write("src/impl.txt", "code\n")
    world.repo.write("checks.txt", "ok\n")
    unit: dict[str, Any] = step("unit", check("grep", "-q", "ok", "checks.txt"), inputs=["src/**"])
    world.seal(plan(unit))
    passed = world.run()
    assert passed.verdict == "PASS"
    world.repo.write("checks.txt", "fails\n")
    world.repo.commit("break what unit reads, not its inputs")
    failed = world.run(targets=["unit"])
    assert failed.doc["steps"]["unit"]["status"] == "failed"
    digest = passed.doc["steps"]["unit"]["input_digest"]
    assert failed.doc["steps"]["unit"]["input_digest"] == digest
    rewrite, statements = FORGET_THE_NEWER_FAILURE[forgery]
    edit_lookup_cache(world, rewrite, *statements)
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]["unit"]
    assert recorded.verdict == "FAIL"
    assert_plan(world.gate(), "step.failed", "FAIL")


# what the first seal declares at plan level, and how the agent feeds the override through it
# to the check of the first run (the second seal declares none of it)
EXPOSED: dict[str, tuple[dict[str, Any], str]] = {
    "workspace-live": ({"workspace": "live"}, "test -f override"),
    "pass-env": ({"pass_env": ["OVERRIDE"]}, 'test -n "$OVERRIDE"'),
    "home-user": ({"home": "user"}, 'test -f "$HOME/override"'),
    "ignored-path": ({"ignored_paths": ["override"]}, "test -f override"),
}


@pytest.mark.parametrize("exposed", sorted(EXPOSED))
def test_attack_inputs_carried_across_a_reseal_that_hides_less(
    world: World, monkeypatch: pytest.MonkeyPatch, exposed: str
) -> None:
    """v1 of the plan lets the checks read beyond the tree (the live work tree, a variable,
    the user's HOME, an ignored path), and the agent puts an override there: unit passes
    although its input fails. v2 takes that away; the step's own contract is unchanged, so its
    input digest was too, and every later run carried the v1 pass (PASS, before the fix). The
    plan-level settings a step runs under are part of its input digest: unit runs again under
    v2, and fails."""
    fields, override = EXPOSED[exposed]
    world.repo.write("verdict", "broken\n")
    (world.path / ".git" / "info" / "exclude").write_text("override\n")
    world.repo.write("override", "")  # ignored: in the live work tree only
    monkeypatch.setenv("OVERRIDE", "1")
    with open(os.path.join(os.environ["HOME"], "override"), "w"):
        pass
    reads = check("sh", "-c", f"{override} || grep -qx ok verdict")
    unit = step("unit", reads, inputs=["verdict"])
    world.seal(plan(unit) | fields)
    assert world.run().verdict == "PASS"  # the override did it
    # v2: the checks read the tree alone (alice records it: a variable the checks no longer see
    # changes how they run, a weakening)
    weakens = exposed == "pass-env"
    world.seal(plan(unit), allow_weaken=weakens, reason="no override" if weakens else None)
    world.repo.write("README.md", "v2\n")
    world.repo.commit("plan v2")
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]["unit"]
    assert world.gate(None).verdict != "PASS"


# what the second seal requires (the first one required none, or only sh), and how the run
# under it is made: each carried unit's pass from the run that did not have the tool (before
# the fix), or ci signs such a carry
TOOL_REQUIRED: dict[str, tuple[list[str], str]] = {
    "a full run": ([], "run"),
    "another step run alone": ([], "lint alone"),
    "v1 required another tool": (["sh"], "run"),
    "ci signs the carry": ([], "signed"),
}


@pytest.mark.parametrize("how", sorted(TOOL_REQUIRED))
def test_attack_inputs_carried_across_a_reseal_that_requires_a_tool(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, how: str
) -> None:
    """unit's check runs `probetool` when there is one (a test that skips without its tool,
    as pytest's `skipif(shutil.which(...) is None)` does); the tool finds the code broken.
    The agent starts `git audit run` with a PATH without the tool: unit passes. The sealer
    sees it and reseals with `required_tools: [probetool]` (v2), unit itself unchanged: its
    input digest was unchanged too, so a v2 run, with the tool on PATH, carried the v1 pass
    (a full run, or lint run alone), the gate took it, and a carry ci signs too (PASS, before
    the fix). The required tools are part of every step's input digest: unit runs again under
    v2 and fails (or is not run), and the gate refuses the signed carry."""
    first_tools, made = TOOL_REQUIRED[how]
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "probetool").write_text("#!/bin/sh\necho 'the code is broken'\nexit 1\n")
    (tools / "probetool").chmod(0o755)
    world.repo.write("src/app.txt", "broken code\n")
    unit = step("unit", check("sh", "-c", "command -v probetool || exit 0; probetool"))
    unit["inputs"] = ["src/**"]
    first_plan = plan(unit, step("lint"))
    world.seal(first_plan | ({"required_tools": first_tools} if first_tools else {}))
    passed = world.run()  # the agent's PATH has no probetool: the check skips it
    assert passed.verdict == "PASS"
    world.seal(plan(unit, step("lint")) | {"required_tools": [*first_tools, "probetool"]})
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    recorded = world.run(targets=["lint"]) if made == "lint alone" else world.run()
    assert recorded.doc["steps"]["unit"]["status"] != "carried", recorded.doc["steps"]["unit"]
    if made == "signed":
        assert recorded.doc["steps"]["unit"]["status"] == "failed"
        before = passed.doc["steps"]["unit"]["input_digest"]

        def carry(doc: dict[str, Any]) -> None:
            doc.update(verdict="PASS", reasons=[])
            doc["steps"]["unit"].update(
                status="carried",
                carried_from=passed.commit,
                attempt=None,
                checks=[],
                input_digest=before,  # what the run wrote before the fix
            )

        world.forge_run(recorded.commit, edit=carry, signer=world.ci)
        judged = assert_plan(world.gate(None), "evidence.carried-invalid", "FAIL")
        assert judged.reasons[0].step == "unit"
        return
    assert world.gate(None).verdict != "PASS"


# ------------------------------------------------------------ a dependant of OR alternatives


@pytest.mark.parametrize("then", ["the alternatives targeted", "a full run after"])
def test_attack_inputs_carried_dependant_while_every_alternative_fails(
    world: World, then: str
) -> None:
    """`ship` needs `fast` or `thorough` (an any_of clause); all three declare src/**, and both
    alternatives also read checks.txt, outside their inputs. Everything passed; then checks.txt
    changed (no input did) and a targeted run executed both alternatives with the same input
    digests: both failed. ship's input digest (its inputs and theirs) was unchanged, so that
    run, and every full run after it, carried ship's pass from the first run beside two failed
    alternatives and said PASS, and the gate took it (before the fix): an unverified OR
    alternative is not reported by itself, and ship's entry was judged alone. A carried pass
    now waits for its prerequisites in the run, and is blocked when no alternative of a clause
    is proven there."""
    out = [{"name": "o", "verify": [{"type": "file_exists", "path": "README.md"}]}]
    reads = check("grep", "-q", "ok", "checks.txt")
    ship = step("ship", inputs=["src/**"], deps=[{"any_of": ["fast", "thorough"]}])
    ship["requires_outputs"] = [{"step": "fast", "name": "o"}, {"step": "thorough", "name": "o"}]
    alternatives = [step(s, reads, inputs=["src/**"], outputs=out) for s in ("fast", "thorough")]
    world.repo.write("src/app.txt", "code\n")
    world.repo.write("checks.txt", "ok\n")
    world.seal(plan(*alternatives, ship))
    first = world.run()
    assert first.verdict == "PASS"
    world.repo.write("checks.txt", "fails\n")
    world.repo.commit("break what the alternatives read, not their inputs")
    recorded = world.run(targets=["fast", "thorough"])
    if then == "a full run after":
        recorded = world.run()
    steps = recorded.doc["steps"]
    assert steps["ship"]["input_digest"] == first.doc["steps"]["ship"]["input_digest"]
    assert {sid: e["status"] for sid, e in steps.items()} == {
        "fast": "failed",
        "thorough": "failed",
        "ship": "blocked",
    }
    assert recorded.verdict != "PASS"
    assert_plan(world.gate(), "step.blocked", "UNKNOWN")


# ------------------------------------------------------------- a file name that forges lines

# variant -> (the inputs, the file beside src/impl.txt whose line the forged name takes over)
FORGED_LINES: dict[str, tuple[list[str], str]] = {
    "the root's .gitattributes": (["src/**"], ".gitattributes"),
    "a root file among the inputs": (["src/**", "tox.ini"], "tox.ini"),
}


@pytest.mark.parametrize("variant", sorted(FORGED_LINES))
def test_attack_inputs_file_name_with_a_line_break_forges_the_digest(
    world: World, variant: str
) -> None:
    """The input digest hashes one ``mode path blob`` line per covered file, and git allows a
    line break in a file name. unit passed with src/impl.txt and a second covered file (the
    root's .gitattributes, or tox.ini, which sort after it). The agent deletes both and adds one
    file in src/ named ``impl.txt <the passing blob>\\n100644 <the second file>`` holding the
    second file's bytes: its one line reads as the two lines of the passing tree, so the digest
    was unchanged and the pass was carried to a tree without src/impl.txt (PASS, and the gate
    took it, before the fix). A path that could read as more than one line is written quoted."""
    patterns, other = FORGED_LINES[variant]
    world.repo.write("src/impl.txt", "works\n")
    world.repo.write(other, "# nothing\n")
    unit: dict[str, Any] = step(
        "unit", check("grep", "-q", "works", "src/impl.txt"), inputs=patterns
    )
    world.seal(plan(unit))
    first = world.run()
    assert first.verdict == "PASS"
    works = world.repo.git("rev-parse", "HEAD:src/impl.txt").strip()
    (world.path / "src" / "impl.txt").unlink()
    (world.path / other).unlink()
    world.repo.write(f"src/impl.txt {works}\n100644 {other}", "# nothing\n")
    world.repo.commit("one file named like two lines")
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]["unit"]
    assert recorded.verdict == "FAIL"
    assert_plan(world.gate(), "step.failed", "FAIL")


# ------------------------------------------------------------------------------- submodules

# variant -> (the step's inputs, the file its check reads)
SUBMODULE: dict[str, tuple[list[str], str]] = {
    "the .gitmodules removed": (["src/**"], "src/lib/verdict"),
    "a glob naming a file inside it": (["src/lib/verdict"], "src/lib/verdict"),
    "a glob reaching inside it": (["src/lib/*"], "src/lib/verdict"),
    "a link in it leading back into the tree": (["src/**"], "src/lib/up/verdict"),
    "a link through it, back into the tree": (["src/**"], "src/verdict"),
}


@pytest.mark.parametrize("variant", sorted(SUBMODULE))
def test_attack_inputs_submodule_in_the_inputs(world: World, tmp_path: Path, variant: str) -> None:
    """unit reads a file of (or through) the submodule src/lib; its inputs cover the
    submodule's entry (its commit), or name a path inside it, which no entry of the tree
    matches. The agent breaks what the check reads without changing what the digest saw:
    deletes .gitmodules (the checkout then holds no files of the submodule), commits a broken
    verdict in the submodule (a glob inside it matched nothing), or breaks real/verdict, which
    a link inside the submodule (up -> ../../real) or a link through it (src/verdict ->
    lib/sub/../../../real/verdict) leads to. The pass was carried (PASS, and the gate took it,
    before the fix). Inputs that reach a submodule now depend on the whole tree."""
    patterns, read = SUBMODULE[variant]
    lib = GitRepo.create(tmp_path / "lib")
    lib.write("verdict", "ok\n")
    lib.write("sub/keep", "\n")
    os.symlink("../../real", lib.path / "up")
    lib.commit("v1")
    world.repo.git(
        "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib.path), "src/lib"
    )
    world.repo.write("real/verdict", "ok\n")
    os.symlink("lib/sub/../../../real/verdict", world.path / "src" / "verdict")
    world.seal(plan(step("unit", check("grep", "-qx", "ok", read), inputs=patterns)))
    assert world.run().verdict == "PASS"
    if variant == "the .gitmodules removed":
        world.repo.git("rm", "-q", ".gitmodules")
    elif read == "src/lib/verdict":
        inside = GitRepo(world.path / "src" / "lib")
        inside.write("verdict", "broken\n")
        inside.commit("v2")
    else:
        world.repo.write("real/verdict", "broken\n")
    world.repo.commit("break what unit reads")
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]["unit"]
    assert recorded.verdict == "FAIL"
    assert_plan(world.gate(), "step.failed", "FAIL")


# ---------------------------------------------------------------- a link out, and back in

# variant -> (the link: path -> target, "{checkout}" standing for the private checkout's
# absolute path; the inputs; the file the check reads)
BACK_IN: dict[str, tuple[tuple[str, str], list[str], str]] = {
    "up two, in by the checkout's folder name": (
        ("src/impl.txt", "../../tree/lib/impl.txt"),
        ["src/**"],
        "src/impl.txt",
    ),
    "up one from the root": (("impl.txt", "../tree/lib/impl.txt"), ["impl.txt"], "impl.txt"),
    "absolute, into the checkout": (
        ("src/impl.txt", "{checkout}/lib/impl.txt"),
        ["src/**"],
        "src/impl.txt",
    ),
    "a glob through a linked folder out": (
        ("vendor", "../tree/lib"),
        ["vendor/impl.txt"],
        "vendor/impl.txt",
    ),
}


@pytest.mark.parametrize("variant", sorted(BACK_IN))
def test_attack_inputs_link_out_of_the_tree_leads_back_in(world: World, variant: str) -> None:
    """A link whose target leaves the tree (``..`` above the root, or an absolute path) was
    covered by its own text only: what is outside the tree is no evidence. But the checks run
    in a private checkout at ``<slot>/tree``, so ``../tree/lib/impl.txt`` from the root (or the
    checkout's absolute path) leads back into the judged tree: the check read lib/impl.txt,
    which the digest did not cover. The agent breaks it; the pass was carried (PASS, and the
    gate took it, before the fix). A step whose links lead out of the tree depends on the
    whole tree."""
    (path, target), patterns, read = BACK_IN[variant]
    checkout = Path(checkouts_dir(world.handle().gitdir)) / "0" / "tree"
    world.repo.write("lib/impl.txt", "works\n")
    (world.path / path).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target.format(checkout=checkout), world.path / path)
    world.seal(plan(step("unit", check("grep", "-q", "works", read), inputs=patterns)))
    assert world.run().verdict == "PASS"
    world.repo.write("lib/impl.txt", "broken\n")
    world.repo.commit("break what the link leads back to")
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]["unit"]
    assert recorded.verdict == "FAIL"
    assert_plan(world.gate(), "step.failed", "FAIL")


def test_attack_inputs_dependant_carried_past_a_prerequisite_executed_again(world: World) -> None:
    """`fetch` (its evidence valid for a second) feeds `use`; neither's inputs change. Once
    fetch's evidence expired, a run executed fetch again, and whatever it made then (what it
    fetches is not in its inputs), `use` was carried from the run that saw what fetch made
    before (before the fix). A pass is carried only beside its prerequisites' own evidence:
    `use` executes again. (A run of `fetch` alone leaves `use` not run, saying why; the gate
    still counts use's earlier pass for the tree: a stated limit.)"""
    import time

    made = [{"name": "o", "verify": [{"type": "file_exists", "path": "f/a.txt"}]}]
    fetch = step("fetch", check("true"), inputs=["f/**"], outputs=made)
    fetch["valid_for"] = "1s"
    use = step("use", check("true"), inputs=["u/**"], deps=["fetch"])
    use["requires_outputs"] = [{"step": "fetch", "name": "o"}]
    world.repo.write("f/a.txt", "fetched from elsewhere\n")
    world.repo.write("u/b.txt", "uses it\n")
    world.seal(plan(fetch, use))
    assert world.run().verdict == "PASS"
    time.sleep(1.5)  # fetch's evidence expires
    alone = world.run(targets=["fetch"]).doc["steps"]
    assert alone["fetch"]["status"] == "passed" and alone["fetch"]["carried_from"] is None
    assert alone["use"]["status"] == "not-run", alone["use"]
    assert "its prerequisite fetch ran again" in alone["use"]["reason"]
    time.sleep(1.5)
    recorded = world.run()
    steps = recorded.doc["steps"]
    assert steps["fetch"]["status"] == "passed" and steps["fetch"]["carried_from"] is None
    assert steps["use"]["status"] == "passed" and steps["use"]["carried_from"] is None
    # (not the gate's verdict: fetch's evidence expires a second after the run's signed time,
    # in whole seconds, so a gate that judges later on a loaded machine says UNKNOWN)
    assert recorded.verdict == "PASS"


@pytest.mark.parametrize("how", ["inputs unchanged, a new tree", "a targeted run, this tree"])
def test_attack_inputs_carried_across_a_change_in_a_declared_ignored_path(
    world: World, how: str
) -> None:
    """The plan declares the ignored path `tools/` (a virtual environment, say) and `unit`
    reads it. After a pass, the agent breaks tools/verdict and then either commits an
    unrelated file (unit's inputs unchanged: its pass was carried onto the new tree) or runs
    another step alone (unit's pass was carried as verified earlier for the tree, and the run
    recorded the new listing, which the gate then compared): PASS both ways (before the fix).
    A pass is carried only from a run that listed every declared ignored path as it is now."""
    world.repo.write(".gitignore", "tools/\n")
    world.repo.write("tools/verdict", "ok\n")
    world.repo.write("src/app.txt", "code\n")
    inputs = {"inputs": ["src/**"]} if how.startswith("inputs") else {}
    unit = step("unit", check("grep", "-qx", "ok", "tools/verdict")) | inputs
    world.seal(plan(unit, step("lint")) | {"ignored_paths": ["tools"]})
    assert world.run().verdict == "PASS"
    world.repo.write("tools/verdict", "broken\n")
    if how.startswith("inputs"):
        world.repo.write("notes.txt", "unrelated\n")
        world.repo.commit("an unrelated change")
        recorded = world.run()
        assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]
    else:
        recorded = world.run(targets=["lint"])
        assert recorded.doc["steps"]["unit"]["status"] == "not-run", recorded.doc["steps"]
    assert world.gate(None).verdict != "PASS"


# whether unit, the live step, declares inputs (a targeted run carries its pass either way)
LIVE_CARRIED = {"with inputs": {"inputs": ["src/**"]}, "without inputs": {}}


@pytest.mark.parametrize("variant", sorted(LIVE_CARRIED))
def test_attack_inputs_carried_live_step_escapes_the_live_policy(
    world: World, variant: str
) -> None:
    """unit runs in the live work tree (`workspace: live`) and passed; the policy refuses live
    evidence, so the gate says FAIL. The agent runs lint alone on the same tree: the run
    carries unit's pass, and the gate looked for live steps among the steps that passed in
    the run, not those it carried: PASS, with no note of the live work tree (before the fix).
    A carried live step counts as live."""
    world.repo.write("src/app.txt", "code\n")
    unit = step("unit", check("true"), workspace="live") | LIVE_CARRIED[variant]
    world.seal(plan(unit, step("lint")))
    assert world.run().verdict == "PASS"
    refuse = world.cli(
        "trust", "policy", "--live-evidence", "refuse", "--key", str(world.keys["alice"])
    )
    assert refuse.code == 0, refuse.err
    assert_plan(world.gate(None), "evidence.live-refused", "FAIL")
    recorded = world.run(targets=["lint"])
    assert recorded.doc["steps"]["unit"]["status"] == "carried", recorded.doc["steps"]
    judged = assert_plan(world.gate(None), "evidence.live-refused", "FAIL")
    assert "unit" in judged.reasons[0].message


# where `workspace: live` is declared, and what becomes of the effect unit observes
LIVE_EFFECT: dict[str, tuple[str, str | None]] = {
    "a live step, its effect broken": ("step", "fails\n"),
    "a live step, its effect gone": ("step", None),
    "a live plan, its effect broken": ("plan", "fails\n"),
}


@pytest.mark.parametrize("variant", sorted(LIVE_EFFECT))
def test_attack_inputs_live_step_carried_past_its_effect(world: World, variant: str) -> None:
    """unit observes an effect outside the tree in the live work tree (`deployed.txt`, ignored,
    as a deployment's readback does) and declares the inputs it is made from. After a pass the
    agent breaks or removes the effect and commits an unrelated file: unit's inputs are
    unchanged, so its pass was carried onto the new tree (PASS, and the gate took it, before
    the fix), though what it observed is not in its input digest. A live step is not carried
    for unchanged inputs: it runs again, and fails."""
    where, effect = LIVE_EFFECT[variant]
    world.repo.write(".gitignore", "deployed.txt\n")
    world.repo.write("deployed.txt", "ok\n")
    world.repo.write("src/app.txt", "code\n")
    live = {"workspace": "live"}
    unit = step("unit", check("grep", "-qx", "ok", "deployed.txt"), inputs=["src/**"])
    world.seal(plan(unit | (live if where == "step" else {})) | (live if where == "plan" else {}))
    assert world.run().verdict == "PASS"
    if effect is None:
        (world.path / "deployed.txt").unlink()
    else:
        world.repo.write("deployed.txt", effect)
    world.repo.write("notes.txt", "unrelated\n")
    world.repo.commit("an unrelated change")
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]
    assert_plan(world.gate(None), "step.failed", "FAIL")


def test_attack_inputs_live_step_carried_for_unchanged_inputs_by_an_older_run(
    world: World,
) -> None:
    """What `git audit run` wrote before the fix (ci signs it): a live step carried onto a new
    tree for its unchanged inputs. The gate took it (PASS); it refuses such a carry now, as the
    run no longer makes one."""
    world.repo.write("src/app.txt", "code\n")
    unit = step("unit", check("true"), inputs=["src/**"], workspace="live")
    world.seal(plan(unit, step("lint")))
    passed = world.run()
    assert passed.verdict == "PASS"
    world.repo.write("notes.txt", "unrelated\n")
    world.repo.commit("an unrelated change")
    again = world.run()
    assert again.doc["steps"]["unit"]["status"] == "passed"  # executed, not carried

    def carry(doc: dict[str, Any]) -> None:
        doc["steps"]["unit"].update(
            status="carried", carried_from=passed.commit, attempt=None, checks=[]
        )

    world.forge_run(again.commit, edit=carry, signer=world.ci)
    judged = assert_plan(world.gate(None), "evidence.carried-invalid", "FAIL")
    assert judged.reasons[0].step == "unit"


# how unit was executed again on the new tree, with the same inputs, and failed
NEWER_FAILURE: dict[str, dict[str, Any]] = {
    "unit run alone": {"targets": ["unit"]},
    "every step run afresh": {"fresh": True},
}


def _passed_then_failed(world: World, failure: str) -> tuple[RecordedRun, RecordedRun]:
    """unit declares src/** but reads checks.txt: a PASS run, then checks.txt broken (unit's
    inputs not) and unit executed again with the same input digest (*failure*): it failed."""
    world.repo.write("src/impl.txt", "code\n")
    world.repo.write("checks.txt", "ok\n")
    unit: dict[str, Any] = step("unit", check("grep", "-q", "ok", "checks.txt"), inputs=["src/**"])
    world.seal(plan(unit, step("lint")))
    passed = world.run()
    assert passed.verdict == "PASS"
    world.repo.write("checks.txt", "fails\n")
    world.repo.commit("break what unit reads, not its inputs")
    failed = world.run(**NEWER_FAILURE[failure])
    assert failed.doc["steps"]["unit"]["status"] == "failed"
    digest = passed.doc["steps"]["unit"]["input_digest"]
    assert failed.doc["steps"]["unit"]["input_digest"] == digest
    return passed, failed


def _carry_unit(world: World, failed: RecordedRun, source: str, tree: str | None = None) -> None:
    """What a run prepared before *failed* was recorded appends onto it (ci signs it): unit
    carried from *source* for its unchanged inputs, every other step passed; for *tree* (else
    the failed run's)."""

    def carry(doc: dict[str, Any]) -> None:
        if tree is not None:
            doc["tree"] = doc["purity"]["before"] = doc["purity"]["after"] = tree
        doc["verdict"], doc["reasons"] = "PASS", []
        for entry in doc["steps"].values():
            entry["status"], entry["reason"] = "passed", ""
        doc["steps"]["unit"].update(status="carried", carried_from=source, attempt=None, checks=[])

    world.forge_run(failed.commit, edit=carry, signer=world.ci)


@pytest.mark.parametrize("failure", sorted(NEWER_FAILURE))
def test_attack_inputs_carried_over_a_newer_failure_on_the_tree(world: World, failure: str) -> None:
    """unit declares src/** but also reads checks.txt. It passed; checks.txt broke (its inputs
    did not) and a run executed unit on the new tree: it failed. A run prepared before that
    failure was recorded (concurrently), re-parented onto it, carries unit from the older pass
    because its inputs are unchanged (ci signs it): the gate checked a carry by inputs for the
    same input digest only, not for a newer execution on the tree, and said PASS (before the
    fix; a carry for the same tree was refused). The newest trusted execution of the step on
    the judged tree, between the source and the carrying run, decides for both."""
    passed, failed = _passed_then_failed(world, failure)
    _carry_unit(world, failed, passed.commit)
    judged = assert_plan(world.gate(), "evidence.carried-invalid", "FAIL")
    assert judged.reasons[0].step == "unit"


# what the tree the carrying run is for holds, after the failure on the tree before it
THIRD_TREE: dict[str, str] = {
    "a file outside the inputs added": "notes.txt",
    "checks.txt changed again": "checks.txt",
}


@pytest.mark.parametrize("third", sorted(THIRD_TREE))
@pytest.mark.parametrize("failure", sorted(NEWER_FAILURE))
def test_attack_inputs_carried_over_a_newer_failure_on_another_tree(
    world: World, failure: str, third: str
) -> None:
    """As above, but the carrying run is for a third tree, made after the failure: the pass on
    the first tree, the failure with the same input digest on the second, a carry from the
    first on the third. The gate looked for newer executions on the judged tree only, so the
    failure on the second tree did not count, and said PASS (before the fix). The newest
    trusted execution of the step with the claimed input digest, on any tree between the
    source and the carrying run, decides."""
    passed, failed = _passed_then_failed(world, failure)
    world.repo.write(THIRD_TREE[third], "fails again\n")
    world.repo.commit("a third tree")
    # prepared on the third tree before the failure was recorded, re-parented onto it
    _carry_unit(world, failed, passed.commit, world.repo.head_tree())
    judged = assert_plan(world.gate(), "evidence.carried-invalid", "FAIL")
    assert judged.reasons[0].step == "unit"


def _forge_object(world: World, oid: str, body: bytes) -> None:
    """A loose object under *oid* holding the tree *body* (git keeps an object that exists)."""
    stored = world.path / ".git" / "objects" / oid[:2] / oid[2:]
    stored.parent.mkdir(exist_ok=True)
    if stored.exists():
        stored.chmod(0o644)
    stored.write_bytes(zlib.compress(b"tree %d\0" % len(body) + body))


@pytest.mark.parametrize("command", ["run", "status"])
@pytest.mark.parametrize("forgery", ["the passing folder", "an empty folder"])
def test_attack_inputs_forged_tree_object_under_the_inputs(
    world: World, command: str, forgery: str
) -> None:
    """The agent writes a file into .git/objects under the name of a tree the inputs' globs
    read: src/ of the broken tree holding the entries of the passing src/ (so the digest would
    be the passing one), or src/ of a carried tree holding nothing. libgit2 hashes each object
    it reads and refused it, but as pygit2's GitError: `git audit run` and `git audit status`
    died with a traceback (before the fix; nothing passed). Now a one-line error names the tree
    and the fix."""
    world.repo.write("src/impl.txt", "works\n")
    unit = step("unit", check("grep", "-q", "works", "src/impl.txt"), inputs=["src/**"])
    world.seal(plan(unit, step("lint")))
    assert world.run().verdict == "PASS"
    git = world.handle().git
    passing = git.revparse_single("HEAD^{tree}")["src"]  # type: ignore[index]
    if forgery == "the passing folder":
        blob = hashlib.sha1(b"blob 7\0broken\n").hexdigest()
        body = b"100644 impl.txt\0" + bytes.fromhex(blob)
        broken = hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()
        _forge_object(world, broken, git.odb.read(passing.id)[1])
        world.repo.write("src/impl.txt", "broken\n")
        world.repo.commit("break unit's input; git keeps the forged src/")
    else:
        world.repo.write("notes.txt", "unrelated\n")
        world.repo.commit("an unrelated change")
        assert world.run().doc["steps"]["unit"]["status"] == "carried"
        _forge_object(world, str(passing.id), b"")
    args = ("run", "--key", str(world.keys["ci"])) if command == "run" else ("status",)
    result = world.cli(*args, process=True)
    assert result.code != 0, result.out
    assert "Traceback" not in result.err, result.err
    if command == "run" or forgery == "an empty folder":  # else no run of the tree to judge
        assert "does not hold what its name says" in result.err, result.err


@pytest.mark.parametrize("carry", ["for unchanged inputs", "for the same tree"])
def test_attack_inputs_gate_takes_a_carry_across_a_change_in_a_declared_ignored_path(
    world: World, carry: str
) -> None:
    """The plan declares the ignored path `tools/` and unit reads it. After a pass the agent
    breaks tools/verdict; a run signed by ci (what `git audit run` wrote before it compared the
    listings) carries unit's pass, onto a new tree for its unchanged inputs or on the same
    tree, and lists tools/ as it is now. The gate compared that listing with the work tree
    only, not with the listing of the run the pass came from: PASS (before the fix). A carried
    pass counts only from a run that listed every declared ignored path as the carrying run
    did."""
    world.repo.write(".gitignore", "tools/\n")
    world.repo.write("tools/verdict", "ok\n")
    world.repo.write("src/app.txt", "code\n")
    unit = step("unit", check("grep", "-qx", "ok", "tools/verdict"), inputs=["src/**"])
    world.seal(plan(unit, step("lint")) | {"ignored_paths": ["tools"]})
    passed = world.run()
    assert passed.verdict == "PASS"
    world.repo.write("tools/verdict", "broken\n")
    if carry == "for unchanged inputs":
        world.repo.write("notes.txt", "unrelated\n")
        world.repo.commit("an unrelated change")
    tree = world.repo.head_tree()
    files, digest = listing_digest(world.path / "tools")

    def carried(doc: dict[str, Any]) -> None:
        doc["tree"] = tree
        doc["workspace"]["ignored_paths"] = {"tools": {"files": files, "digest": digest}}
        doc["steps"]["unit"].update(
            status="carried", carried_from=passed.commit, attempt=None, checks=[]
        )

    world.forge_run(passed.commit, edit=carried, signer=world.ci)
    judged = assert_plan(world.gate(None), "evidence.carried-invalid", "FAIL")
    assert judged.reasons[0].step == "unit"


# glob -> (the file directly in its folder the check reads, a file in a subfolder beside it)
DIRECT_FILES: dict[str, tuple[str, str]] = {
    "src/**/*": ("src/impl.txt", "src/deep/more.txt"),
    "src/**/**": ("src/impl.txt", "src/deep/more.txt"),
    "**/*": ("impl.txt", "src/more.txt"),
    "**/**": ("impl.txt", "src/more.txt"),
    "./src/**/*": ("src/impl.txt", "src/deep/more.txt"),
    "src/***/*": ("src/impl.txt", "src/deep/more.txt"),
    "src**/*": ("src.txt", "src/more.txt"),
}


@pytest.mark.parametrize("glob", sorted(DIRECT_FILES))
def test_attack_inputs_file_beside_the_folders_a_double_star_glob_covers(
    world: World, glob: str
) -> None:
    """unit declares `src/**/*` (or `**/*`, `src/**/**`, `src**/*`): `**/` matches no folder
    too, so the glob covers `src/impl.txt` (`src.txt`) as well as everything in `src/`'s
    subfolders. The digest took
    the glob as covering folders whole (its head `src/**` matched the folders of `src/`, one
    line each) and left out the files directly in `src/`: the agent broke `src/impl.txt`, the
    digest stayed the same, `git audit run` carried unit's stale pass and the gate said PASS
    (before the fix). Such a glob is now listed file by file: unit runs again and fails."""
    read, beside = DIRECT_FILES[glob]
    world.repo.write(read, "works\n")
    world.repo.write(beside, "more\n")
    unit = step("unit", check("grep", "-qx", "works", read), inputs=[glob])
    world.seal(plan(unit, step("lint")))
    assert world.run().verdict == "PASS"
    world.repo.write(read, "broken\n")
    world.repo.commit("break the file directly in the folder")
    recorded = world.run()
    assert recorded.doc["steps"]["unit"]["status"] == "failed", recorded.doc["steps"]["unit"]
    assert recorded.verdict == "FAIL"
    assert_plan(world.gate(), "step.failed", "FAIL")
