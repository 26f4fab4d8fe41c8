"""The verdict memo: a PASS is re-served only in exactly the state it was judged in, only with
an authentic MAC, only until its evidence expires and only while its tools are on PATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gitaudit import secret
from gitaudit.gate import memo
from gitaudit.gate.judge import judge
from gitaudit.git.repo import open_repo
from tests.gitrepo import GitRepo, audit
from tests.run.conftest import Sealer, make_plan, run_step

ZERO = "0" * 40
# the hook in a fresh interpreter; prints whether the full gate (and so pygit2) was needed
PROBE = (
    "import sys\n"
    "from gitaudit.hooks.entry import main\n"
    "code = main(sys.argv[1:])\n"
    "print('full' if 'pygit2' in sys.modules else 'memo')\n"
    "sys.exit(code)\n"
)


def hook(repo: GitRepo, *args: str, stdin: str = "") -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=repo.path,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode, proc.stdout.strip(), proc.stderr


def pre_push(repo: GitRepo, rev: str = "HEAD") -> tuple[int, str, str]:
    sha = repo.git("rev-parse", rev).strip()
    return hook(
        repo, "pre-push", "origin", "x", stdin=f"refs/heads/main {sha} refs/heads/main {ZERO}\n"
    )


def memo_file(repo: GitRepo) -> Path:
    return repo.path / ".git" / "gitaudit" / "memo.json"


def entries(repo: GitRepo) -> list[dict[str, Any]]:
    return list(json.loads(memo_file(repo).read_text())["entries"])


@pytest.fixture
def passing(repo: GitRepo, sealed: Sealer) -> GitRepo:
    sealed(make_plan(run_step("a", "true")))
    assert audit(repo.path, "run").code == 0
    memo.forget(repo.path / ".git")  # the run refreshed it (see below): start without it
    return repo


def test_a_pass_is_remembered_and_served_without_the_full_gate(passing: GitRepo) -> None:
    assert not memo_file(passing).exists()
    code, path, _ = pre_push(passing)
    assert (code, path) == (0, "full")  # the first judgement is the full gate; it remembers
    assert [e["tree"] for e in entries(passing)] == [passing.head_tree()]
    assert pre_push(passing)[:2] == (0, "memo")
    # status and the real hook agree
    assert audit(passing.path, "status", "HEAD").code == 0


def test_a_failing_or_unknown_tree_is_never_remembered(passing: GitRepo) -> None:
    passing.write("new.txt", "untested\n")
    passing.commit("untested")
    for _ in range(2):
        code, path, err = pre_push(passing)
        assert (code, path) == (1, "full") and "UNKNOWN" in err
    assert not memo_file(passing).exists()


def test_a_forged_entry_is_ignored(passing: GitRepo) -> None:
    assert pre_push(passing)[:2] == (0, "full")
    genuine = entries(passing)[0]
    passing.write("new.txt", "untested\n")
    passing.commit("untested")
    forged = {**genuine, "tree": passing.head_tree()}  # same MAC, another tree
    parsed = memo._parse(forged)
    assert parsed is not None
    rekeyed = {**forged, "mac": memo._mac(os.urandom(32), parsed)}  # a MAC under another key
    for entry in (forged, rekeyed):
        memo_file(passing).write_text(
            json.dumps({"format": memo.FORMAT, "entries": [genuine, entry]})
        )
        code, path, err = pre_push(passing)
        assert (code, path) == (1, "full") and "UNKNOWN" in err


@pytest.mark.parametrize("marks", ["null", "[]", '"seen"', "7"])
def test_a_marks_file_that_is_not_an_object_is_no_traceback(passing: GitRepo, marks: str) -> None:
    """The marks file holds JSON that is not an object (anyone who writes .git can put it
    there): the gate reads no marks from it, as from a damaged file, and the memo, comparing
    the marks before and after the judgement, remembered nothing instead of raising a
    TypeError out of `git audit status` and the hooks."""
    (passing.path / ".git" / "gitaudit" / "watermarks.json").write_text(marks)
    judged = audit(passing.path, "status")
    assert judged.code == 0 and judged.out.startswith("PASS"), judged.out + judged.err
    code, _, err = pre_push(passing)
    assert code == 0 and "Traceback" not in err, err


@pytest.mark.parametrize("setting", ["core.ignorecase", "audit.commitMsg"])
def test_a_pass_is_not_remembered_under_settings_changed_while_it_was_judged(
    passing: GitRepo, setting: str
) -> None:
    """The state is taken before the gate judges and again before the entry is written, keyed
    by the second: a setting the gate reads (how claimed paths match, the commit-msg mode)
    changed in between had the PASS remembered under settings it was not judged with (only the
    refs and the marks were compared)."""
    found = memo.snapshot(passing.path)
    assert found is not None
    value = "true" if setting == "core.ignorecase" else "strict"
    passing.git("config", setting, value)  # meanwhile, while the gate judged
    kwargs: dict[str, Any] = dict(
        tree=passing.head_tree(), made=0.0, until=None, tools=(), protect=(), commit_msg="claims"
    )
    assert not memo.remember(found[0], runs=(("default", ZERO),), **kwargs)
    again = memo.snapshot(passing.path)
    assert again is not None and memo.lookup(again[0], passing.head_tree()) is None


def test_any_change_of_the_audit_refs_invalidates(passing: GitRepo) -> None:
    assert pre_push(passing)[:2] == (0, "full")
    assert pre_push(passing)[:2] == (0, "memo")
    passing.write("new.txt", "more\n")  # a run for another tree moves the ledger
    assert audit(passing.path, "run").code == 0
    assert pre_push(passing)[:2] == (0, "full")  # HEAD still PASSes, judged afresh
    assert pre_push(passing)[:2] == (0, "memo")


def test_a_rewound_ledger_is_judged_not_remembered(passing: GitRepo) -> None:
    """The marks are part of the state: rewinding the runs ref to the state a PASS was
    remembered in does not bring the PASS back."""
    first = passing.git("rev-parse", "refs/audit/runs/default").strip()
    assert pre_push(passing)[:2] == (0, "full")
    passing.write("new.txt", "more\n")
    passing.commit("more")
    assert audit(passing.path, "run").code == 0
    assert pre_push(passing)[:2] == (0, "memo")  # the run judged (and marked) the new tip
    passing.git("update-ref", "refs/audit/runs/default", first)
    code, path, err = pre_push(passing, "HEAD~1")
    assert (code, path) == (1, "full") and "moved backwards or was rewritten" in err


def test_the_clock_and_expiry_bound_an_entry(repo: GitRepo, sealed: Sealer) -> None:
    sealed(make_plan(run_step("a", "true", valid_for="1h")))
    assert audit(repo.path, "run").code == 0
    assert pre_push(repo)[:2] == (0, "memo")  # the run refreshed it
    (entry,) = entries(repo)
    assert entry["until"] is not None and 3500 < entry["until"] - entry["made"] <= 3600 + 300
    found = memo.snapshot(repo.path, revs=["HEAD"])
    assert found is not None
    snap, (tree,) = found
    assert entry["ref"] == ""  # no evidence rule for the pushed ref: as judged for no ref
    assert memo.lookup(snap, tree, entry["made"]) is not None
    assert memo.lookup(snap, tree, entry["made"], "refs/heads/main") is not None
    assert memo.lookup(snap, tree, entry["until"]) is None  # expired
    assert memo.lookup(snap, tree, entry["made"] - 1) is None  # the clock went back


def test_a_required_tool_that_left_path_is_judged_again(
    repo: GitRepo, sealed: Sealer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "frobnicate"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    plan = make_plan(run_step("a", "frobnicate"))
    plan["required_tools"] = ["frobnicate"]
    sealed(plan)
    assert audit(repo.path, "run").code == 0
    assert pre_push(repo)[:2] == (0, "memo")  # the run refreshed it
    tool.unlink()
    code, path, err = pre_push(repo)
    assert (code, path) == (1, "full") and "frobnicate" in err


def test_a_program_path_no_longer_offers_is_judged_again(
    repo: GitRepo, sealed: Sealer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PASS remembered for a run made here holds while PATH offers each program its checks
    started from the folder they found it in: without that folder on PATH, the full gate
    judges (and refuses: the run was made with another PATH); with it back (even after another
    `frobnicate`), it answers."""
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
        (folder / "frobnicate").write_text("#!/bin/sh\nexit 0\n")
        (folder / "frobnicate").chmod(0o755)
    honest = os.environ["PATH"]
    monkeypatch.setenv("PATH", f"{first}{os.pathsep}{honest}")
    sealed(make_plan(run_step("a", "frobnicate")))
    assert audit(repo.path, "run").code == 0
    assert pre_push(repo)[:2] == (0, "memo")
    (entry,) = entries(repo)
    frob = str((first / "frobnicate").resolve())
    assert entry["programs"] == [["frobnicate", str(first.resolve()), frob]]
    monkeypatch.setenv("PATH", f"{second}{os.pathsep}{honest}")
    code, path, err = pre_push(repo)
    assert (code, path) == (1, "full") and "which this PATH does not hold" in err
    monkeypatch.setenv("PATH", f"{second}{os.pathsep}{honest}{os.pathsep}{first}")
    assert pre_push(repo)[:2] == (0, "memo")  # offered from its folder, though not first


def test_a_filter_driver_the_global_configuration_no_longer_defines_is_judged_again(
    repo: GitRepo, sealed: Sealer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PASS remembered for a run made here whose checkout applied a declared content filter
    holds while the global git configuration defines that driver as the run recorded it: with
    another (another file named by GIT_CONFIG_GLOBAL, or the driver changed), the full gate
    judges (and refuses: the run's checkout was written by another driver); back, it answers."""
    repo.write(".gitattributes", "data filter=keep\n")
    repo.write("data", "x\n")
    repo.git("config", "--global", "filter.keep.smudge", "cat")
    repo.git("config", "--global", "filter.keep.clean", "cat")
    sealed(make_plan(run_step("a", "true")) | {"filters": ["keep"]})
    assert audit(repo.path, "run").code == 0
    assert pre_push(repo)[:2] == (0, "memo")
    (entry,) = entries(repo)
    assert entry["filters"] == [["keep.clean", "cat"], ["keep.smudge", "cat"]]
    other = tmp_path / "other.gitconfig"
    other.write_text('[filter "keep"]\n\tsmudge = sed s/x/y/\n\tclean = cat\n')
    honest = os.environ["GIT_CONFIG_GLOBAL"]
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(other))
    code, path, err = pre_push(repo)
    assert (code, path) == (1, "full") and "content filter driver keep.smudge=cat" in err
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", honest)
    assert pre_push(repo)[:2] == (0, "memo")


def test_a_key_that_is_not_private_authenticates_nothing(
    passing: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert pre_push(passing)[:2] == (0, "full")
    key = Path(os.environ["GITAUDIT_HOME"]) / secret.KEY_FILENAME
    assert key.stat().st_mode & 0o777 == 0o600
    key.chmod(0o644)
    assert pre_push(passing)[:2] == (0, "full")
    key.chmod(0o600)
    assert pre_push(passing)[:2] == (0, "memo")
    # a gitaudit home inside the work tree (keys are refused there) gets no memo either
    monkeypatch.setenv("GITAUDIT_HOME", str(passing.path / "home"))
    memo.forget(passing.path / ".git")
    assert pre_push(passing)[:2] == (0, "full")
    assert pre_push(passing)[:2] == (0, "full")
    assert not (passing.path / "home" / secret.KEY_FILENAME).exists()


@pytest.mark.parametrize("spoil", ["empty", "short", "shared", "link"])
def test_a_refused_key_is_said_once_with_its_fix(passing: GitRepo, spoil: str) -> None:
    """A key file the caches cannot trust (empty, not 32 bytes, readable by others, a link)
    turns them off: each command then says so once, naming the file and the fix, instead of
    only getting slower; the verdict is the same. An honest key says nothing."""
    key = Path(os.environ["GITAUDIT_HOME"]) / secret.KEY_FILENAME
    honest = audit(passing.path, "status")
    assert honest.code == 0 and "warning:" not in honest.err, honest.err
    if spoil == "empty":
        key.write_bytes(b"")
    elif spoil == "short":
        key.write_bytes(b"k" * 31)
    elif spoil == "shared":
        key.chmod(0o644)
    else:
        moved = key.with_name("elsewhere.key")
        key.rename(moved)
        key.symlink_to(moved)
    done = audit(passing.path, "status")
    assert done.code == 0, (done.out, done.err)
    said = [line for line in done.err.splitlines() if line.startswith("warning:")]
    assert said == [
        f"warning: {key} is not a private key (a regular file of 32 bytes, yours, mode 0600, "
        "not a link): gitaudit's caches are off and every command is slower "
        f"(fix: `rm {key}`; the next command makes a new one)"
    ], done.err
    key.unlink()
    assert audit(passing.path, "status").err.count("warning:") == 0
    assert key.stat().st_mode & 0o777 == 0o600  # made again


def test_nothing_is_remembered_when_the_refs_moved_during_the_judgement(
    passing: GitRepo,
) -> None:
    found = memo.snapshot(passing.path)
    assert found is not None
    before = found[0]
    passing.write("new.txt", "more\n")
    assert audit(passing.path, "run").code == 0  # the ledger moves meanwhile
    kwargs: dict[str, Any] = dict(
        tree=passing.head_tree(), made=0.0, until=None, tools=(), protect=(), commit_msg="claims"
    )
    assert not memo.remember(before, runs=(), **kwargs)
    now = memo.snapshot(passing.path)
    assert now is not None and memo.remember(now[0], runs=(), **kwargs)


def test_marks_may_only_move_to_the_current_tips(passing: GitRepo) -> None:
    found = memo.snapshot(passing.path)
    assert found is not None
    snap = found[0]
    tip = dict(snap.refs)["refs/audit/runs/default"]
    before = snap._replace(marks=b"")
    to_tip = json.dumps({"seen": {"refs/audit/runs/default": tip}}).encode()
    elsewhere = json.dumps({"seen": {"refs/audit/runs/default": "0" * 40}}).encode()
    assert memo._marks_moved_to_tips(before, snap._replace(marks=to_tip))
    assert not memo._marks_moved_to_tips(before, snap._replace(marks=elsewhere))


def test_commit_msg_is_served_from_the_memo_with_its_trailers(passing: GitRepo) -> None:
    message = passing.path / ".git" / "MSG"
    message.write_text("a commit\n")
    passing.git("add", "-A")
    code, path, _ = hook(passing, "commit-msg", str(message))
    assert (code, path) == (0, "full")
    message.write_text("a commit\n\nAudit-Claim: done\n")
    code, path, _ = hook(passing, "commit-msg", str(message))
    assert (code, path) == (0, "memo")
    text = message.read_text()
    run = passing.git("rev-parse", "refs/audit/runs/default").strip()
    assert "Audit-Verdict: PASS" in text and f"Audit-Run: {run}" in text
    passing.git("config", "audit.commitMsg", "off")  # below the policy's claims: no effect
    for served in ("full", "memo"):  # the configuration is part of the state: judged again
        message.write_text("plain\n\nAudit-Verdict: FAIL\nAudit-Run: forged\n")
        assert hook(passing, "commit-msg", str(message))[:2] == (0, served)
        assert message.read_text() == f"plain\n\nAudit-Verdict: PASS\nAudit-Run: {run}\n"


def test_the_gate_itself_never_reads_the_memo(passing: GitRepo) -> None:
    """The memo only serves hooks: status and the gate always judge (and explain)."""
    assert judge(open_repo(passing.path), "HEAD").verdict == "PASS"
    assert memo_file(passing).exists()
    passing.git("update-ref", "-d", "refs/audit/runs/default")
    assert judge(open_repo(passing.path), "HEAD").verdict != "PASS"


def test_a_memo_file_that_is_not_ours_is_ignored_and_replaced(passing: GitRepo) -> None:
    memo_file(passing).parent.mkdir(parents=True, exist_ok=True)
    for junk in (b"\x00not json", b"[]", b'{"format": 1, "entries": "x"}', b" " * (2 << 20)):
        memo_file(passing).write_bytes(junk)
        assert pre_push(passing)[:2] == (0, "full")
        assert pre_push(passing)[:2] == (0, "memo")  # the full gate wrote a fresh file


def test_a_changed_trust_anchor_invalidates(passing: GitRepo) -> None:
    """The anchor is part of the state: re-pinning it (even to the same key) is judged again."""
    from gitaudit.ledger import anchor

    handle = open_repo(passing.path)
    found = anchor.find(handle)
    assert found is not None
    snap = memo.snapshot(passing.path)
    assert snap is not None
    stored = b"\0".join(Path(f).read_bytes() for f in anchor.files(handle))
    assert snap[0].anchors == stored  # the fast path reads what the gate reads
    assert pre_push(passing)[:2] == (0, "full")
    assert pre_push(passing)[:2] == (0, "memo")
    doc = json.loads(Path(found.file).read_text())
    Path(found.file).write_text(json.dumps(doc))  # same pin, other bytes
    assert pre_push(passing)[:2] == (0, "full")
    assert pre_push(passing)[:2] == (0, "memo")


def test_a_passing_run_refreshes_the_memo_for_the_push_after_it(
    repo: GitRepo, sealed: Sealer
) -> None:
    """`git audit run` judges the tree it recorded (as a commit of it, as pre-push will) and
    the memo keeps the PASS: a push right after the run needs no full gate."""
    sealed(make_plan(run_step("a", "true")))
    assert not memo_file(repo).exists()
    assert audit(repo.path, "run").code == 0
    assert [e["tree"] for e in entries(repo)] == [repo.head_tree()]
    assert pre_push(repo)[:2] == (0, "memo")


def test_a_refreshed_memo_is_invalidated_by_a_moved_ref(repo: GitRepo, sealed: Sealer) -> None:
    sealed(make_plan(run_step("a", "true")))
    assert audit(repo.path, "run").code == 0
    tip = repo.git("rev-parse", "refs/audit/runs/default").strip()
    repo.git("update-ref", "refs/audit/runs/elsewhere", tip)  # any audit ref moving
    assert pre_push(repo)[:2] == (0, "full")
    assert pre_push(repo)[:2] == (0, "memo")  # judged afresh in the new state, remembered


def test_a_moved_remote_tracking_ledger_invalidates(repo: GitRepo, sealed: Sealer) -> None:
    """Fetched ledgers (refs/gitaudit/remotes/...) are evidence the gate reads (and checks for
    rewinds): a PASS is served only while they are exactly as they were judged."""
    sealed(make_plan(run_step("a", "true")))
    assert audit(repo.path, "run").code == 0
    assert pre_push(repo)[:2] == (0, "memo")
    tip = repo.git("rev-parse", "refs/audit/runs/default").strip()
    repo.git("update-ref", "refs/gitaudit/remotes/origin/audit/runs/default", tip)
    assert pre_push(repo)[:2] == (0, "full")
    assert pre_push(repo)[:2] == (0, "memo")


@pytest.mark.parametrize(
    "key",
    [
        "core.ignorecase",  # how claimed paths are matched
        "extensions.noop",  # the repository's format and extensions: whether libgit2 opens it
    ],
)
def test_a_changed_setting_the_gate_reads_invalidates(
    repo: GitRepo, sealed: Sealer, key: str
) -> None:
    """Settings that decide the gate's verdict are part of the state."""
    sealed(make_plan(run_step("a", "true")))
    assert audit(repo.path, "run").code == 0
    assert pre_push(repo)[:2] == (0, "memo")
    repo.git("config", key, "true")
    assert pre_push(repo)[:2] == (0, "full")


def test_a_run_that_does_not_pass_remembers_nothing(repo: GitRepo, sealed: Sealer) -> None:
    sealed(make_plan(run_step("a", "false")))
    assert audit(repo.path, "run").code == 1
    assert not memo_file(repo).exists()
    code, path, err = pre_push(repo)
    assert (code, path) == (1, "full") and "FAIL" in err


STATUS_PROBE = (
    "import sys\n"
    "from gitaudit.cli.entry import main\n"
    "try:\n"
    "    main(['status'])\n"
    "except SystemExit as exc:\n"
    "    code = exc.code\n"
    "sys.stderr.write('full' if 'pygit2' in sys.modules else 'memo')\n"
    "sys.exit(code)\n"
)


def status_probe(
    repo: GitRepo, probe: str = STATUS_PROBE, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """(exit code, stdout, what *probe* wrote on stderr) of a `status` run in a fresh process."""
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=repo.path,
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    return proc.returncode, proc.stdout, proc.stderr.strip()


def test_status_of_the_work_tree_is_served_from_the_memo_as_the_gate_prints_it(
    passing: GitRepo,
) -> None:
    full = status_probe(passing)
    assert full[0] == 0 and full[2] == "full"  # judged in full, remembered
    served = status_probe(passing)
    assert served == (0, full[1], "memo")  # the same lines, without pygit2
    passing.write("new.txt", "untested\n")  # another tree: judged in full, and explained
    code, out, path = status_probe(passing)
    assert (code, path) == (3, "full") and "UNKNOWN" in out


def test_status_is_not_served_from_an_entry_with_notes(
    passing: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PASS that relied on ignored paths (or live steps) came with notes: judging the work
    tree checks those files beyond the tree, so such an entry never answers `status`."""
    from gitaudit.cli import reading

    found = memo.snapshot(passing.path)
    assert found is not None
    kwargs: dict[str, Any] = dict(
        tree=passing.head_tree(), made=0.0, until=None, tools=(), protect=(), commit_msg="claims"
    )
    monkeypatch.chdir(passing.path)
    runs = (("default", "0" * 40),)
    assert memo.remember(found[0], runs=runs, notes=(("default", "a note"),), **kwargs)
    assert reading._remembered_status()[1] is False
    found = memo.snapshot(passing.path)
    assert found is not None
    assert memo.remember(found[0], runs=runs, **kwargs)
    assert reading._remembered_status()[1] is True


def test_an_entry_with_notes_never_answers_for_the_work_tree(passing: GitRepo) -> None:
    """Every reader that judges the work tree (`status`, the stop hook) asks the memo with
    ``work_tree``: an entry whose PASS came with notes answers only for the commit's tree (the
    hooks), never for the work tree, whose ignored files the state does not cover."""
    found = memo.snapshot(passing.path)
    assert found is not None
    tree = passing.head_tree()
    kwargs: dict[str, Any] = dict(
        tree=tree, made=0.0, until=None, tools=(), protect=(), commit_msg="claims"
    )
    runs = (("default", "0" * 40),)
    assert memo.remember(found[0], runs=runs, notes=(("default", "a note"),), **kwargs)
    snap = found[0]
    assert memo.lookup(snap, tree) is not None
    assert memo.lookup(snap, tree, work_tree=True) is None
    assert memo.remember(snap, runs=runs, **kwargs)
    assert memo.lookup(snap, tree, work_tree=True) is not None


def test_a_bare_status_served_from_the_memo_imports_no_grammar_and_no_dataclasses(
    passing: GitRepo,
) -> None:
    """The command loops and agents call most: a bare `status` the memo answers skips the
    grammar (and the `dataclasses` and `inspect` it brings), whose reading of a bare `status`
    is exactly the one the fast path takes."""
    from gitaudit.cli import fast, grammar

    assert grammar.FAST["status"].parse([]) == fast.PLAIN_STATUS
    probe = STATUS_PROBE.replace(
        "'full' if 'pygit2' in sys.modules else 'memo'",
        "' '.join(m for m in ('pygit2', 'gitaudit.cli.grammar', 'dataclasses') "
        "if m in sys.modules) or 'none'",
    )
    assert probe != STATUS_PROBE

    # the installed code's imports: under `make mutate` PYTHONPATH puts the instrumented copy
    # (which imports mutmut's trampolines, and `dataclasses` with them) first
    plain = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MUTANT_UNDER_TEST")}

    def loaded() -> tuple[int, str]:
        code, _, modules = status_probe(passing, probe, plain)
        return code, modules

    code, first = loaded()  # judged in full: everything is imported, and the PASS remembered
    assert code == 0 and "pygit2" in first and "dataclasses" in first
    assert loaded() == (0, "none")


def _shim_imports(repo: GitRepo, how: list[str], stdin: str) -> tuple[int, set[str]]:
    """(exit code, every module imported) of a pre-push run as *how* says, the installed
    code's imports (see above for PYTHONPATH)."""
    plain = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MUTANT_UNDER_TEST")}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-P", *how, "pre-push", "origin", "x"],
        cwd=repo.path,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        env=plain,
    )
    lines = [line for line in proc.stderr.splitlines() if line.startswith("import time:")]
    return proc.returncode, {line.rsplit("|", 1)[1].strip() for line in lines}


def test_the_shims_pre_push_from_the_memo_imports_neither_typing_nor_runpy(
    passing: GitRepo,
) -> None:
    """Every push and commit pays for what the memo's path imports: the shim calls the entry
    point with `-c` (runpy: about 2 ms), and nothing on that path imports typing (about 2.5 ms:
    gitaudit.named) or fnmatch (an entry without evidence rules matches every ref)."""
    from gitaudit.hooks.install import shim_text

    sha = passing.git("rev-parse", "HEAD").strip()
    stdin = f"refs/heads/main {sha} refs/heads/main {ZERO}\n"
    assert pre_push(passing)[:2] == (0, "full")  # remembered
    run = [line for line in shim_text().splitlines() if line.startswith("RUN=")]
    assert len(run) == 1 and run[0].startswith("RUN='") and run[0].endswith("'")
    code, modules = _shim_imports(passing, ["-c", run[0][5:-1]], stdin)
    assert code == 0 and "gitaudit.gate.memo" in modules
    assert not {"pygit2", "typing", "runpy", "fnmatch"} & modules
    # the control: by module name, runpy is there (the probe sees what is imported)
    code, modules = _shim_imports(passing, ["-m", "gitaudit.hooks"], stdin)
    assert code == 0 and "runpy" in modules and "pygit2" not in modules


ELSEWHERE = "[audit]\n\trootKey = SHA256:elsewhere\n"


@pytest.mark.parametrize(
    "variables",
    [
        {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "audit.x", "GIT_CONFIG_VALUE_0": "1"},
        {"GIT_CONFIG_PARAMETERS": "'audit.x'='1'"},
        {"GIT_CONFIG_GLOBAL": "elsewhere"},
        {"GIT_CONFIG_SYSTEM": "elsewhere", "GIT_CONFIG_NOSYSTEM": "0"},
    ],
    ids=["count", "parameters", "global", "system"],
)
def test_the_state_holds_the_configuration_as_libgit2_reads_it(
    passing: GitRepo, monkeypatch: pytest.MonkeyPatch, variables: dict[str, str]
) -> None:
    """The gate reads `audit.*` with libgit2, which takes nothing from variables and reads the
    user's and the system's files where they are by default: so does the state."""
    (passing.path.parent / "elsewhere").write_text(ELSEWHERE)
    monkeypatch.chdir(passing.path.parent)  # the file named relative to it
    before = memo.snapshot(passing.path)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    after = memo.snapshot(passing.path)
    assert before is not None and after is not None
    assert after[0].config == before[0].config and "audit.rootkey SHA256:" in after[0].config
    assert after[0].digest == before[0].digest


@pytest.mark.parametrize(
    ("condition", "state"),
    [("hasconfig:remote.*.url:example.test:*", False), ("gitdir:/nowhere/", True)],
)
def test_no_state_under_an_include_condition_libgit2_does_not_know(
    passing: GitRepo, condition: str, state: bool
) -> None:
    """git includes a file under `hasconfig:`, libgit2 (the gate) does not: the state cannot
    say what the gate reads, and there is none. A condition both know keeps it."""
    (passing.path.parent / "elsewhere").write_text(ELSEWHERE)
    passing.git("config", "remote.mirror.url", "example.test:mirror")
    passing.git("config", f"includeIf.{condition}.path", str(passing.path.parent / "elsewhere"))
    assert (memo.snapshot(passing.path) is not None) is state
