"""The server's pre-receive rules for audit refs, at the unit level: the hook's function called
in-process on a repository (as git runs it: ``GIT_DIR`` set, the update lines on stdin).

End to end, through ``git push`` to a bare server: ``tests/adversarial/test_hooks.py``.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pygit2
import pytest

from gitaudit.crypto.commits import create_signed_commit
from gitaudit.crypto.signers import Ed25519Signer
from gitaudit.git.repo import open_repo
from gitaudit.hooks import entry
from gitaudit.ledger import anchor
from gitaudit.ledger.seals import trust_init
from gitaudit.places import marks_path
from tests.e2e.conftest import PLAN
from tests.gitrepo import GitRepo, audit
from tests.hooks.runs import run_tree

ZERO = "0" * 40
RUNS = "refs/audit/runs/default"
PLANS = "refs/audit/plans"


@dataclass
class Server:
    repo: GitRepo
    git: pygit2.Repository
    signer: Ed25519Signer  # sealer and runner

    def signed(self, parents: list[pygit2.Oid], message: str = "run\n") -> pygit2.Oid:
        tree = run_tree(self.git)
        return create_signed_commit(
            self.git, tree=tree, parents=parents, message=message, signer=self.signer
        )

    def unsigned(self, parents: list[pygit2.Oid]) -> pygit2.Oid:
        tree = self.git.revparse_single("HEAD^{tree}").id
        who = pygit2.Signature("forger", "forger@example.test")
        return self.git.create_commit(None, who, who, "all passed\n", tree, parents)


@pytest.fixture
def server(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> Server:
    """A repository whose refs/audit/plans is initialised by alice (sealer and runner), seen by
    the hook as git's environment names it."""
    signer = Ed25519Signer.generate("alice")
    handle = open_repo(repo.path)
    trust_init(handle, signer, "alice")
    monkeypatch.setenv("GIT_DIR", str(handle.gitdir))
    return Server(repo, handle.git, signer)


def receive(capsys: pytest.CaptureFixture[str], *lines: str) -> tuple[int, str]:
    capsys.readouterr()
    code = entry.pre_receive([], "".join(line + "\n" for line in lines))
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "ref",
    [
        "refs/audit/notes",
        "refs/audit/plans-v2",
        "refs/audit/plans/default",
        "refs/audit/runsx/default",
        "refs/audit/run/default",
        "refs/audit/RUNS/default",
    ],
)
def test_an_audit_ref_gitaudit_does_not_define_is_refused(
    server: Server, capsys: pytest.CaptureFixture[str], ref: str
) -> None:
    """A name in refs/audit/ that is neither the plans ref nor a runs ref is refused by name,
    even for a commit the runs ref itself would accept (every client fetches refs/audit/*)."""
    run = server.signed([])
    code, err = receive(capsys, f"{ZERO} {run} {ref}")
    assert code == 1
    assert f"gitaudit: rejecting {ref}: unknown audit ref" in err
    # the control: the same commit on a runs ref is accepted
    assert receive(capsys, f"{ZERO} {run} {RUNS}") == (0, "")


def test_an_unknown_audit_ref_is_refused_beside_an_accepted_update(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    run = server.signed([])
    code, err = receive(capsys, f"{ZERO} {run} {RUNS}", f"{ZERO} {run} refs/audit/notes")
    assert code == 1
    assert err.splitlines() == ["gitaudit: rejecting refs/audit/notes: unknown audit ref"]


def test_a_merge_on_the_runs_ref_is_refused(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    """A merge signed by a trusted runner whose second parent is an unsigned 'all passed'
    commit: its first-parent chain is all signed, so only the linearity rule refuses it."""
    honest = server.signed([])
    forgery = server.unsigned([honest])
    merge = server.signed([honest, forgery], "merge\n")
    code, err = receive(capsys, f"{ZERO} {merge} {RUNS}")
    assert code == 1
    assert f"gitaudit: rejecting {RUNS}: {str(merge)[:12]} is a merge; audit refs are linear" in err
    # as an update of an existing runs ref too
    server.repo.git("update-ref", RUNS, str(honest))
    code, err = receive(capsys, f"{honest} {merge} {RUNS}")
    assert code == 1
    assert f"{str(merge)[:12]} is a merge; audit refs are linear" in err
    # the control: the honest first parent alone is accepted
    server.repo.git("update-ref", "-d", RUNS)
    assert receive(capsys, f"{ZERO} {honest} {RUNS}") == (0, "")


def test_an_old_value_other_than_the_servers_is_refused(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    """git gives pre-receive the old value the pusher sent (it checks it only when it moves the
    ref, after the hook): an audit ref update is verified from it, so it must be what the
    server holds; the evidence it carries is not read."""
    first = server.signed([])
    second = server.signed([first])
    server.repo.git("update-ref", RUNS, str(second))
    for old, new in ((ZERO, first), (first, first), (str(server.unsigned([])), second)):
        code, err = receive(capsys, f"{old} {new} {RUNS}", f"{ZERO} {second} refs/heads/main")
        assert code == 1
        assert err.splitlines()[0] == (
            f"gitaudit: rejecting {RUNS}: the push says it was at {str(old)[:12]}, but the "
            f"server holds {str(second)[:12]} (every check starts from the old value: a push "
            "must give the real one): fetch, then push again"
        )
    # a name git allows but that is not UTF-8 (the hook reads its input with surrogate escapes)
    odd = "refs/audit/runs/d\udcffx"
    code, err = receive(capsys, f"{ZERO} {first} {odd}")
    assert code == 1
    assert err.splitlines() == [
        "gitaudit: rejecting refs/audit/runs/d\ufffdx: its name is not UTF-8: audit refs are "
        "named by gitaudit"
    ]
    # the control: from the value the server holds
    third = server.signed([second])
    assert receive(capsys, f"{second} {third} {RUNS}") == (0, "")


def test_a_merge_on_the_plans_ref_is_refused(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    tip = server.git.references[PLANS].target
    assert isinstance(tip, pygit2.Oid)
    side = server.signed([tip], "side\n")
    merge = server.signed([tip, side], "merge\n")
    code, err = receive(capsys, f"{tip} {merge} {PLANS}")
    assert code == 1
    assert f"gitaudit: rejecting {PLANS}: {str(merge)[:12]} is a merge; audit refs are linear" in (
        err
    )


def test_fast_forward_commits_of_an_update(server: Server) -> None:
    """``_ff_commits``: what an update adds, oldest first; why it is not a fast-forward."""
    first = server.signed([])
    second = server.signed([first])
    third = server.signed([second])
    added = entry._ff_commits(server.git, str(first), str(third))
    assert isinstance(added, list) and [c.id for c in added] == [second, third]
    from_zero = entry._ff_commits(server.git, ZERO, str(second))
    assert isinstance(from_zero, list) and [c.id for c in from_zero] == [first, second]
    assert entry._ff_commits(server.git, str(third), str(first)) == (
        "not a fast-forward (audit refs never move backwards)"
    )
    merge = server.signed([third, server.unsigned([first])], "merge\n")
    assert entry._ff_commits(server.git, str(third), str(merge)) == (
        f"{str(merge)[:12]} is a merge; audit refs are linear"
    )


def test_a_server_without_a_plans_ref_refuses_branches(
    repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook installed before refs/audit/plans was pushed: no branch update can PASS, so
    each is refused (other refs, a tag say, are not the gate's)."""
    handle = open_repo(repo.path)
    monkeypatch.setenv("GIT_DIR", str(handle.gitdir))
    head = repo.git("rev-parse", "HEAD").strip()
    code, err = receive(capsys, f"{ZERO} {head} refs/heads/main")
    assert code == 1
    assert err.splitlines() == [
        "gitaudit: rejecting refs/heads/main: the server has no refs/audit/plans: nothing can PASS"
    ]
    assert receive(capsys, f"{ZERO} {head} refs/tags/v1") == (0, "")


@pytest.mark.parametrize("pin", ["unset", "empty"])
def test_the_first_plans_ref_needs_the_servers_pin(
    server: Server, capsys: pytest.CaptureFixture[str], pin: str
) -> None:
    """Without `audit.rootKey` (or an anchor) the first pusher's key would become the root of
    trust: the first plans ref is refused, naming the fix; pinned, it is taken."""
    tip = server.repo.git("rev-parse", PLANS).strip()
    server.repo.git("update-ref", "-d", PLANS)
    handle = open_repo(server.repo.path)
    for path in anchor.files(handle):
        os.unlink(path)
    shutil.rmtree(handle.state_dir)  # the marks: a server that never held a plans ref
    Path(marks_path(handle.gitdir)).unlink(missing_ok=True)
    server.repo.git("config", "--unset", "audit.rootKey")
    if pin == "empty":
        server.repo.git("config", "audit.rootKey", "")
    code, err = receive(capsys, f"{ZERO} {tip} {PLANS}")
    assert code == 1
    assert err.splitlines() == [
        f"gitaudit: rejecting {PLANS}: the server pins no root of trust, so the first pusher's "
        "key would become it; pin it first: `git config audit.rootKey SHA256:...` in the server "
        "repository (the key that created refs/audit/plans)"
    ]
    server.repo.git("config", "audit.rootKey", server.signer.public_key.fingerprint())
    assert receive(capsys, f"{ZERO} {tip} {PLANS}") == (0, "")


def test_the_server_does_not_need_the_plans_tools(
    repo: GitRepo,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The plan requires a tool the runner had on its PATH; the server judges the evidence, it
    runs nothing, so the tool missing there is no reason to refuse."""
    tools = tmp_path / "tools"
    tools.mkdir()
    tool = tools / "greeter-lint"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    with_tool = f"{tools}{os.pathsep}{os.environ['PATH']}"
    greeter = json.loads(json.dumps(PLAN))
    greeter["required_tools"] = ["greeter-lint"]
    repo.write("greeting.txt", "hello world\n")
    repo.write_plan(greeter)
    repo.commit("greeter with a plan")
    for args in (["init"], ["plan", "seal", "-m", "initial"], ["run"]):
        result = audit(repo.path, *args, env={"PATH": with_tool})
        assert result.code == 0, (args, result.err)
    monkeypatch.setenv("GIT_DIR", str(open_repo(repo.path).gitdir))
    head = repo.git("rev-parse", "HEAD").strip()
    assert shutil.which("greeter-lint") is None
    assert receive(capsys, f"{ZERO} {head} refs/heads/main") == (0, "")


@pytest.mark.parametrize("name", ["default\u2028x", "x/y", "-x", "a.b"])
def test_a_runs_ref_that_names_no_plan_is_refused(
    server: Server, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """A runs ref is refs/audit/runs/<plan name>: a signed run under any other name is refused
    (names with U+2028 cut the hook's input in two before the fix: see tests/adversarial)."""
    run = server.signed([])
    ref = f"refs/audit/runs/{name}"
    code, err = receive(capsys, f"{ZERO} {run} {ref}")
    assert code == 1
    assert f"rejecting {ref}: {name!r} is no plan name" in err


@pytest.mark.parametrize(
    "stdin",
    [
        "garbage\n",
        f"{ZERO} {ZERO}\n",
        f"{ZERO} {'g' * 40} refs/heads/main\n",
        f"{ZERO} {ZERO} a b\n",
    ],
)
def test_an_unreadable_update_line_fails_closed(
    server: Server, capsys: pytest.CaptureFixture[str], stdin: str
) -> None:
    """A line that is not `<old> <new> <ref>` is never skipped: the whole push is refused."""
    capsys.readouterr()
    assert entry.pre_receive([], stdin) == 1
    err = capsys.readouterr().err
    assert err.startswith("gitaudit: pre-receive failed closed: unreadable update line ")
    assert err.count("\n") == 1


@pytest.mark.parametrize("namespace", ["x", "a/b", "/"])
def test_a_push_into_a_git_namespace_fails_closed(
    server: Server,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    namespace: str,
) -> None:
    """While GIT_NAMESPACE is set, every push is refused in one line naming the variable and
    the fix, even one the hook would accept (a tag); an empty value is no namespace."""
    head = server.repo.git("rev-parse", "HEAD").strip()
    monkeypatch.setenv("GIT_NAMESPACE", namespace)
    code, err = receive(capsys, f"{ZERO} {head} refs/tags/v1")
    assert code == 1
    assert err.splitlines() == [
        f"gitaudit: pre-receive failed closed: GIT_NAMESPACE is set ({namespace!r}): gitaudit "
        "cannot judge a push into a git namespace; serve each project from its own repository "
        "(unset GIT_NAMESPACE for receive-pack)"
    ]
    monkeypatch.setenv("GIT_NAMESPACE", "")
    assert receive(capsys, f"{ZERO} {head} refs/tags/v1") == (0, "")


@pytest.mark.parametrize(
    "ref",
    ["refs/namespaces/x/refs/heads/main", f"refs/namespaces/x/{RUNS}", "refs/namespaces/x/HEAD"],
)
def test_a_ref_below_refs_namespaces_is_refused(
    server: Server, capsys: pytest.CaptureFixture[str], ref: str
) -> None:
    """A namespace serves refs/namespaces/x/refs/heads/main as its main: any ref there, created
    or deleted, is refused by its name alone; a tag beside it is not the gate's."""
    head = server.repo.git("rev-parse", "HEAD").strip()
    for old, new in ((ZERO, head), (head, ZERO)):
        code, err = receive(capsys, f"{old} {new} {ref}")
        assert code == 1
        assert f"rejecting {ref}: a git namespace's refs" in err
    assert receive(capsys, f"{ZERO} {head} refs/tags/v1") == (0, "")


def test_the_short_names_git_reads_a_ref_by() -> None:
    """git's order for a short name: refs/NAME, refs/tags/NAME, refs/heads/NAME, then the
    remote-tracking forms; a full name is read as itself first (not one of these forms)."""
    assert entry._short_names("refs/tags/main") == [(0, "tags/main"), (1, "main")]
    assert entry._short_names("refs/heads/release/1") == [(0, "heads/release/1"), (2, "release/1")]
    assert entry._short_names("refs/remotes/origin/HEAD") == [
        (0, "remotes/origin/HEAD"),
        (3, "origin/HEAD"),
        (4, "origin"),
    ]
    assert entry._short_names("HEAD") == []


def test_a_ref_read_before_a_protected_one_is_refused(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tag main is read before the branch main: refused while the branch exists or is
    pushed beside it, and the branch refused while the tag stands; deleting the tag, and tags
    of no branch's name, are not the gate's."""
    head = server.repo.git("rev-parse", "HEAD").strip()
    server.repo.git("update-ref", "refs/tags/solo", head)
    code, err = receive(capsys, f"{ZERO} {head} refs/tags/main")
    assert code == 1, err
    assert "rejecting refs/tags/main: git reads 'main' as this ref before " in err
    assert "refs/heads/main" in err and "name it otherwise" in err
    code, err = receive(capsys, f"{ZERO} {head} refs/heads/solo")
    assert code == 1, err
    assert "rejecting refs/heads/solo: refs/tags/solo stands before it" in err
    assert "delete it (`git push <remote> :refs/tags/solo`)" in err
    code, err = receive(capsys, f"{head} {ZERO} refs/tags/solo")
    assert (code, err) == (0, "")
    assert receive(capsys, f"{ZERO} {head} refs/tags/v1") == (0, "")
    code, err = receive(capsys, f"{ZERO} {head} refs/heads/audit/plans")
    assert code == 1 and f"{PLANS} stands before it" in err, err
    # a name that is not UTF-8 (pygit2 looks up none such): found all the same
    server.repo.git("update-ref", "refs/heads/d\udcffx", head)
    code, err = receive(capsys, f"{ZERO} {head} refs/tags/d\udcffx")
    assert code == 1 and "before refs/heads/d" in err, err
    assert receive(capsys, f"{ZERO} {head} refs/tags/e\udcffx") == (0, "")


def test_an_update_is_judged_as_the_ref_git_moves(server: Server) -> None:
    """A symbolic ref on the server (and a chain of them) names the ref git moves when it is
    pushed; any other name, a dangling alias's target and a chain longer than git follows are
    kept as pushed."""
    head = server.repo.git("rev-parse", "HEAD").strip()
    server.repo.git("update-ref", "refs/heads/main", head)
    server.repo.git("symbolic-ref", "refs/heads/master", "refs/heads/main")
    server.repo.git("symbolic-ref", "refs/tags/latest", "refs/heads/master")
    server.repo.git("symbolic-ref", "refs/heads/next", "refs/heads/future")
    chain = [f"refs/heads/c{i}" for i in range(7)]
    for name, target in zip(chain, chain[1:], strict=False):  # noqa: RUF007 (as clear)
        server.repo.git("symbolic-ref", name, target)
    handle = open_repo(server.repo.path)
    pushed = ["refs/heads/master", "refs/tags/latest", "refs/heads/main", "refs/heads/next"]
    updates, aliases = entry._moved_refs(handle, [(ZERO, head, r) for r in [*pushed, chain[0]]])
    assert [ref for _, _, ref in updates] == [
        "refs/heads/main",
        "refs/heads/main",
        "refs/heads/main",
        "refs/heads/future",
        chain[0],
    ]
    assert aliases == {
        "refs/heads/main": "refs/heads/main (pushed as refs/heads/master)",
        "refs/heads/future": "refs/heads/future (pushed as refs/heads/next)",
    }


def test_a_push_through_a_symbolic_ref_is_judged_for_its_target(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unproven commit pushed as a tag that is a symbolic ref for the branch main is judged
    as main (and refused); the same commit as a plain tag is not the gate's."""
    head = server.repo.git("rev-parse", "HEAD").strip()
    server.repo.git("symbolic-ref", "refs/tags/latest", "refs/heads/main")
    code, err = receive(capsys, f"{ZERO} {head} refs/tags/latest")
    assert code == 1, err
    assert f"update of refs/heads/main (pushed as refs/tags/latest) to {head[:12]}" in err
    assert receive(capsys, f"{ZERO} {head} refs/tags/v1") == (0, "")


def test_a_deletion_in_the_same_push_does_not_clear_a_ref_read_first(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    """git may refuse a deletion after the hook (an old value that is not the server's, the
    server's current branch): a ref that stands in the way is judged as standing while the
    same push deletes it; deleted in a push of its own, it is gone."""
    head = server.repo.git("rev-parse", "HEAD").strip()
    server.repo.git("update-ref", "refs/tags/solo", head)
    code, err = receive(capsys, f"{head} {ZERO} refs/tags/solo", f"{ZERO} {head} refs/heads/solo")
    assert code == 1 and "rejecting refs/heads/solo: refs/tags/solo stands before it" in err, err
    server.repo.git("update-ref", "refs/heads/duo", head)
    code, err = receive(capsys, f"{head} {ZERO} refs/heads/duo", f"{ZERO} {head} refs/tags/duo")
    assert code == 1 and "rejecting refs/tags/duo: git reads 'duo' as this ref before" in err, err
    assert receive(capsys, f"{head} {ZERO} refs/tags/solo") == (0, "")


@pytest.mark.parametrize(
    ("files", "found"),
    [
        ({"_version.py": b'v = "$Format:%d$"\n'}, None),
        ({".gitattributes": b"*.py text eol=lf\n"}, None),
        ({".gitattributes": b"_version.py -export-subst\n"}, None),
        ({".gitattributes": b"_version.py !export-subst\n"}, None),
        ({".gitattributes": b"_version.py export-subst\n"}, ".gitattributes"),
        ({".gitattributes": b"_version.py\texport-subst=1\r\n"}, ".gitattributes"),
        ({".gitattributes": b"[attr]stamp export-subst\n_version.py stamp\n"}, ".gitattributes"),
        ({"pkg/sub/.gitattributes": b'"a b.py" export-subst\n'}, "pkg/sub/.gitattributes"),
        ({"pkg/.GitAttributes": b"* export-subst\n"}, "pkg/.GitAttributes"),
    ],
)
def test_a_tree_that_sets_export_subst_is_found(
    server: Server, files: dict[str, bytes], found: str | None
) -> None:
    """git archive expands `$Format:...$` in the files export-subst names, from outside the tree
    (the commit's message, the names of refs): such a tree is found, by the path of the
    attributes file, however the attribute is set; unset, or absent, it is not."""
    from gitaudit.ledger.objects import write_tree

    tree = write_tree(server.git, {"app.py": b"print(1)\n", **files})
    assert entry.export_subst(server.git, str(tree)) == found


def test_export_subst_is_found_past_entries_the_fast_reading_skips(server: Server) -> None:
    """Tree bodies are read in C as git writes them; a submodule named .gitattributes, a body
    with a mode git no longer writes (read entry by entry) and a clean folder before the one
    that sets it do not end the search."""
    r = server.repo
    attributes = r.git("hash-object", "-w", "--stdin", input=b"* export-subst\n").strip()
    plain = r.git("hash-object", "-w", "--stdin", input=b"x\n").strip()
    commit = r.git("rev-parse", "HEAD").strip()
    odd = r.git("mktree", input=f"100664 blob {plain}\tlegacy.txt\n".encode()).strip()
    late = r.git("mktree", input=f"100644 blob {attributes}\t.gitattributes\n".encode()).strip()
    listing = (
        f"160000 commit {commit}\t.gitattributes\n"
        f"040000 tree {odd}\ta-odd\n"
        f"040000 tree {late}\tz-late\n"
    )
    tree = r.git("mktree", "--missing", input=listing.encode()).strip()
    assert entry.export_subst(server.git, tree) == "z-late/.gitattributes"
    clean = r.git("mktree", "--missing", input="\n".join(listing.split("\n")[:2]).encode())
    assert entry.export_subst(server.git, clean.strip()) is None  # the gitlink and odd folder


def test_a_run_whose_objects_the_push_did_not_bring_is_refused(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    """git runs pre-receive for an update whose objects it found missing in a push that is not
    atomic, then drops that update alone: a run lacking a blob (its summary, a check's output)
    is refused, naming it, so no branch is judged with a run that never lands."""
    run_json = server.git[run_tree(server.git)]
    assert isinstance(run_json, pygit2.Tree)
    summary = pygit2.Oid(hex=server.repo.git("hash-object", "--stdin", input=b"# run\n").strip())
    assert summary not in server.git  # hashed, not written
    listing = f"100644 blob {run_json['run.json'].id}\trun.json\n"
    listing += f"100644 blob {summary}\tsummary.md\n"
    tree = server.repo.git("mktree", "--missing", input=listing.encode()).strip()
    run = create_signed_commit(
        server.git, tree=pygit2.Oid(hex=tree), parents=[], message="run\n", signer=server.signer
    )
    code, err = receive(capsys, f"{ZERO} {run} {RUNS}")
    assert code == 1
    assert f"{str(run)[:12]} lacks summary.md ({summary})" in err, err
    # the control: with the blob in the repository, the same run is accepted
    server.repo.git("hash-object", "-w", "--stdin", input=b"# run\n")
    assert receive(capsys, f"{ZERO} {run} {RUNS}") == (0, "")
