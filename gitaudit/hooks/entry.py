"""Git hooks: the lean entry point (``python -m gitaudit.hooks NAME ARGS``) and their logic.

This module must stay light: no typer, and everything heavier than the standard library is
imported inside the function that needs it, so a hook costs little more than interpreter start-up.

* ``pre-push`` (client): every pushed commit on a protected ref must PASS; deletions pass.
* ``commit-msg`` (client): links the commit to its evidence (``Audit-Run``/``Audit-Verdict``
  trailers) and blocks completion claims (or, in strict mode, any commit) without PASS.
* ``pre-receive`` (server): judges each pushed update with the server's already-accepted
  ``refs/audit/plans``; audit refs move fast-forward only, with signatures of the right role and
  no unrecorded weakening nor change short of its approvals; protected refs need PASS, using
  evidence on the server or in the push.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # not typing's: importing typing costs the memo's path about 3 ms
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import pygit2

    from gitaudit.gate import memo
    from gitaudit.gate.result import GateResult
    from gitaudit.git.repo import Repo
    from gitaudit.ledger.plansref import PlansState

ZERO = "0" * 40
# how pre-receive refuses an audit ref that is not at the old value the push gives (another push
# came first, or the pusher lied); gitaudit.ledger.sync reads it as a race to retry
MOVED = "the push says it was at"
_MIRRORS = "refs/gitaudit/"  # gitaudit.ledger.refs.MIRROR's parent (not imported: no pygit2 here)


def _err(text: str) -> None:
    # a ref name is any bytes git allows, read with surrogate escapes: shown, never a crash
    sys.stderr.write(text.encode("utf-8", "surrogateescape").decode("utf-8", "replace") + "\n")


def _explain(result: GateResult, what: str) -> None:
    from gitaudit.gate.render import render_gate

    _err(f"gitaudit: {what} is blocked: the gate says {result.verdict}")
    for line in render_gate(result):
        _err(f"gitaudit:   {line}")


def _why(exc: Exception) -> str:
    """One line for a plans ref that cannot be read: the reason code when it has one, the fix
    when there is one."""
    code = getattr(exc, "code", None)
    hint = getattr(exc, "hint", None)
    return f"{code + ': ' if code else ''}{exc}{f' (fix: {hint})' if hint else ''}"


def foreign_repository(found: str | os.PathLike[str]) -> str | None:
    """Why the repository at *found* (its git dir, as the hook found it from the folder it runs
    in) is not the one git runs the hook for (the ``GIT_DIR`` git gives every hook), or None.
    git runs ``git commit``'s hooks from the work tree ``core.worktree`` names, which anything
    that writes ``.git/config`` sets: pointed at another repository's folder, the hook found
    that repository, and judged the staged tree with its ledger, trust and memo."""
    given = os.environ.get("GIT_DIR")
    if not given or os.path.realpath(given) == os.path.realpath(os.fspath(found)):
        return None
    config = os.path.join(os.path.abspath(given), "config")
    return (
        f"git runs this hook for {os.path.abspath(given)}, but from {os.getcwd()}, a folder of "
        f"the repository {os.fspath(found)}: core.worktree in {config} (or GIT_WORK_TREE) "
        "points git at another folder; remove it (`git config --unset core.worktree`)"
    )


def _open_own_repo() -> Repo:
    """The repository the hook judges: the one found from the folder it runs in, which must be
    the one git runs it for (:func:`foreign_repository`)."""
    from gitaudit.errors import RepositoryError
    from gitaudit.git.repo import open_repo

    repo = open_repo()
    why = foreign_repository(repo.gitdir)
    if why is not None:
        raise RepositoryError(why)
    return repo


# ----------------------------------------------------------------------------------- pre-push


def _remembered(
    revs: Sequence[str], refs: Sequence[str] | None = None
) -> tuple[memo.Snapshot, list[memo.Entry | None]] | None:
    """The memo's PASS entries for *revs*, each judged for the matching ref of *refs* (none
    given: for no ref), None each where there is none; with the state."""
    from gitaudit.gate import memo

    found = memo.snapshot(revs=revs)
    if found is None or foreign_repository(found[0].gitdir) is not None:
        return None  # another repository's memo answers nothing: judged (and refused) in full
    snap, trees = found
    now = time.time()
    for_refs = list(refs) if refs is not None else [""] * len(trees)
    pairs = zip(trees, for_refs, strict=True)
    return snap, [memo.lookup(snap, tree, now, ref) for tree, ref in pairs]


def _pushed_updates(stdin: str) -> list[tuple[str, str, str]] | str:
    """(local ref, local sha, remote ref) of each pushed update the gate must consider:
    deletions pass, and the audit refs themselves are judged by the server; or why a line
    cannot be read. The local "ref" is what the pusher wrote before the colon, which may be any
    revision and hold spaces (``main^{/fix it}``, ``HEAD@{1 minute ago}``): the line is read
    from its end, where a ref name (no spaces) and two object ids stand."""
    import re

    oid = "[0-9a-f]{40}(?:[0-9a-f]{24})?"
    updates = []
    # git's lines end in \n and its fields in " " alone: a ref name may hold U+2028 or U+00A0
    for line in stdin.removesuffix("\n").split("\n") if stdin else []:
        parts = line.rsplit(" ", 3)
        if len(parts) != 4 or not all(re.fullmatch(oid, p) for p in parts[1::2]) or not parts[2]:
            return f"unreadable push line {line!r} (git writes '<local> <sha> <remote ref> <sha>')"
        local_ref, local_sha, remote_ref, _remote_sha = parts
        if local_sha == ZERO or remote_ref.startswith("refs/audit/"):
            continue
        updates.append((local_ref, local_sha, remote_ref))
    return updates


def pre_push(args: Sequence[str], stdin: str) -> int:
    """git pre-push: ``<local ref> <local sha> <remote ref> <remote sha>`` lines on stdin."""
    updates = _pushed_updates(stdin)
    if isinstance(updates, str):
        _err(f"gitaudit: pre-push failed closed: {updates}")
        return 1
    if not updates:
        return 0
    remembered = _remembered([sha for _, sha, _ in updates], [ref for _, _, ref in updates])
    if remembered is not None and all(remembered[1]):
        return 0  # every pushed tree was judged PASS in exactly this state (gitaudit.gate.memo)
    before = remembered[0] if remembered is not None else None

    from gitaudit.gate.judge import judge
    from gitaudit.ledger.plansref import read_state

    repo = _open_own_repo()
    try:
        state = read_state(repo)
        policy = state.policy
    except Exception as exc:  # a broken plans ref blocks protected pushes below
        state, policy = None, None
        broken = _why(exc)
    failed = False
    for local_ref, local_sha, remote_ref in updates:
        protected = policy.protects(remote_ref) if policy else remote_ref.startswith("refs/heads/")
        if not protected:
            continue
        if state is None:
            _err(f"gitaudit: push of {remote_ref} is blocked: {broken}")
            failed = True
            continue
        result = judge(repo, local_sha, state=state, before=before, for_ref=remote_ref)
        if result.verdict != "PASS":
            _explain(result, f"push of {local_ref} to {remote_ref} ({local_sha[:12]})")
            _err(
                "gitaudit:   (--no-verify does not help: the server's pre-receive hook judges too)"
            )
            failed = True
    return 1 if failed else 0


# --------------------------------------------------------------------------------- commit-msg

MODES = ("off", "claims", "strict")  # as gitaudit.ledger.trust.COMMIT_MSG_MODES, least strict first


def claims_completion(message: str, requirement_ids: set[str]) -> str | None:
    """The completion claim a commit message makes, if any (:mod:`gitaudit.hooks.message`)."""
    from gitaudit.hooks import message as messages

    return messages.claims_completion(message, requirement_ids)


def commit_mode(policy: str, configured: str | None) -> str:
    """The commit-msg mode: the sealed policy's ``commit_msg`` is a floor, and ``git config
    audit.commitMsg`` (which anyone who can write ``.git/config`` sets) may only make it
    stricter (strict > claims > off). An unknown configured value is ignored, with a warning."""
    mode = policy.strip().lower()
    mode = mode if mode in MODES else "claims"
    if configured is None:
        return mode
    wanted = configured.strip().lower()
    if wanted not in MODES:
        _err(f"gitaudit: audit.commitMsg={configured!r} is not off, claims or strict; ignored")
    elif MODES.index(wanted) > MODES.index(mode):
        return wanted
    return mode


def _staged_tree() -> str:
    """The tree being committed (git passes a temporary index in GIT_INDEX_FILE for
    ``commit -a`` and partial commits: the repository variables git set are passed on)."""
    from gitaudit.git.call import run_git

    given = {k: os.environ[k] for k in ("GIT_DIR", "GIT_INDEX_FILE") if k in os.environ}
    proc = run_git(["write-tree"], env=given, check=False)
    if proc.code != 0:
        raise RuntimeError(proc.err)
    return proc.out.strip()


def _own_trailers(path: str, verdict: str | None, runs: Sequence[str]) -> None:
    """Make the message's ``Audit-*`` trailers the hook's own: every hand-written one is removed
    (:func:`gitaudit.hooks.message.without_owned_trailers`); then, with a *verdict*,
    ``Audit-Verdict`` and one ``Audit-Run`` per run are added."""
    from gitaudit.git.call import run_git
    from gitaudit.hooks.message import without_owned_trailers

    with open(path, encoding="utf-8", errors="surrogateescape", newline="") as fh:
        text = fh.read()
    cleaned = without_owned_trailers(text)
    if cleaned != text:
        with open(path, "w", encoding="utf-8", errors="surrogateescape", newline="") as fh:
            fh.write(cleaned)
    if verdict is None:
        return
    cmd = ["interpret-trailers", "--in-place", "--if-exists", "add", "--if-missing", "add"]
    for trailer in [f"Audit-Verdict: {verdict}", *(f"Audit-Run: {r}" for r in runs)]:
        cmd += ["--trailer", trailer]
    # outside any repository: the repository's trailer.* settings (where, ifExists, commands)
    # have no say in what the hook writes
    run_git([*cmd, os.path.abspath(path)], cwd=os.path.abspath(os.sep), check=False)


def _configured_mode(config: str) -> str | None:
    """``audit.commitMsg`` from ``git config --get-regexp`` output (names come lower-cased)."""
    mode = None
    for line in config.splitlines():
        key, _, value = line.partition(" ")
        if key == "audit.commitmsg":
            mode = value  # the last one wins, as with git config --get
    return mode.strip().lower() if mode is not None else None


def commit_msg(args: Sequence[str], stdin: str) -> int:
    if not args:
        _err("gitaudit: commit-msg needs the message file")
        return 1
    path = os.path.abspath(args[0])
    try:
        tree: str | None = _staged_tree()
    except RuntimeError:
        tree = None  # explained below, unless commit-msg is off
    remembered = _remembered([tree]) if tree else None
    if remembered is not None:
        snap, (entry,) = remembered
        if entry is not None:  # the staged tree was judged PASS in exactly this state
            if commit_mode(entry.commit_msg, _configured_mode(snap.config)) != "off":
                _own_trailers(path, "PASS", [run for _, run in entry.runs])
            return 0
    return _judge_commit(path, tree, remembered[0] if remembered is not None else None)


def _judge_commit(path: str, tree: str | None, before: memo.Snapshot | None) -> int:
    from gitaudit.gate.judge import judge
    from gitaudit.ledger.plansref import read_state

    repo = _open_own_repo()
    try:
        state = read_state(repo)
    except Exception as exc:
        _err(f"gitaudit: commit-msg: {_why(exc)}")
        return 1
    mode = commit_mode(state.policy.commit_msg, repo.config("audit.commitMsg"))
    if mode == "off":
        return 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        message = fh.read()
    tree = tree or _staged_tree()
    result = judge(repo, None, state=state, tree=tree, before=before)
    runs = [p.run for p in result.plans if p.run]
    _own_trailers(path, result.verdict if result.verdict == "PASS" or runs else None, runs)
    if result.verdict == "PASS":
        return 0
    if mode == "strict":
        _explain(result, "this commit (audit.commitMsg=strict)")
        return 1
    claim = claims_completion(message, _requirement_ids(repo, state, tree))
    if claim is not None:
        _explain(result, f"this commit claims completion ({claim!r})")
        _err("gitaudit:   run `git audit run`, or drop the claim from the message")
        return 1
    return 0


def _requirement_ids(repo: Repo, state: PlansState, tree: str) -> set[str]:
    """The requirement ids a claim may name: those of every plan in *tree*, and those of every
    plan sealed as active and every sealed request. The sealed ones count whatever the commit
    does to its plan files: a plan file deleted, moved, broken or with a requirement renamed in
    the commit (the gate FAILs it) must not take the requirement out of the claim's reach."""
    from gitaudit.errors import GitAuditError
    from gitaudit.gate.assess import plan_files
    from gitaudit.ledger.plansref import sealed_contract
    from gitaudit.plan.catalog import check_file
    from gitaudit.plan.known_valid import KnownValid

    known = KnownValid(str(repo.gitdir), str(repo.workdir) if repo.workdir else None)
    ids: set[str] = set()
    for file in plan_files(repo, tree, None):
        checked = check_file(file, environment=False, known=known)
        if checked.plan is not None:
            ids |= {r.id for r in checked.plan.requirements}
    for name in state.active():
        try:
            sealed, _ = sealed_contract(state, name)
        except GitAuditError:  # a tampered plans ref: the gate has FAILed the commit already
            continue
        if sealed is not None and sealed.plan is not None:
            ids |= {r.id for r in sealed.plan.requirements}
    for name in state.requested():
        try:
            request = state.request(name)
        except GitAuditError:
            continue
        if request is not None:
            ids |= set(request.ids)
    return ids


# -------------------------------------------------------------------------------- pre-receive


def _ff_commits(git: pygit2.Repository, old: str, new: str) -> list[pygit2.Commit] | str:
    """The commits an update adds (oldest first), or why it is not a fast-forward."""
    import pygit2

    from gitaudit.errors import LedgerError
    from gitaudit.ledger import chain

    stop = None if old == ZERO else pygit2.Oid(hex=old)
    try:
        added, reached = chain.segment(git, pygit2.Oid(hex=new), stop, what="ref", linear=True)
    except LedgerError as exc:
        return exc.message.removeprefix("ref: ")
    if not reached:
        return "not a fast-forward (audit refs never move backwards)"
    added.reverse()
    return added


def _check_plans_update(repo: Repo, old: str, new: str) -> str | None:
    """Fast-forward only; every new commit signed by a sealer trusted by its parent (or by a
    planner there, within the planner's rules), starting from the server's accepted tip; no
    unrecorded or forbidden weakening (verify_chain). The first plans ref a server takes needs
    its pin: without one, its root would be whatever the first pusher signed (an agent's own
    key, with a ledger fabricated to match), and every later push is judged by it."""
    import pygit2

    from gitaudit.errors import GitAuditError
    from gitaudit.ledger.anchor import pinned_root
    from gitaudit.ledger.plansref import verify_chain

    added = _ff_commits(repo.git, old, new)
    if isinstance(added, str):
        return added
    try:
        pinned = pinned_root(repo)  # the server's audit.rootKey (or its own anchor)
        if old == ZERO and not (pinned or "").strip():
            return (
                "the server pins no root of trust, so the first pusher's key would become it; "
                "pin it first: `git config audit.rootKey SHA256:...` in the server repository "
                "(the key that created refs/audit/plans)"
            )
        verify_chain(
            repo.git,
            pygit2.Oid(hex=new),
            stop_at=None if old == ZERO else pygit2.Oid(hex=old),
            pinned_root=pinned,
        )
    except GitAuditError as exc:
        return exc.message
    return None


def _check_runs_update(repo: Repo, state: PlansState, plan: str, old: str, new: str) -> str | None:
    """Fast-forward only; every new commit signed by a runner trusted on the server, and a run
    of *plan*: a runner's key may sign other records too (agents records; plans commits, when
    it seals as well), and such a chain on a runs ref that has none yet would be what the
    plan's evidence must build on, for good (audit refs are never deleted)."""
    from gitaudit.crypto.commits import verify_commit
    from gitaudit.errors import GitAuditError
    from gitaudit.ledger.runs import foreign_entries, read_run

    added = _ff_commits(repo.git, old, new)
    if isinstance(added, str):
        return added
    runners = state.trust.with_role("runner")
    for commit in added:
        try:
            verify_commit(repo.git, commit.id, runners)
        except GitAuditError as exc:
            return f"{exc.message} (evidence must be signed by a runner trusted on the server)"
        short = str(commit.id)[:12]
        try:
            record = read_run(repo.git, commit.id)
        except GitAuditError as exc:
            return f"{short} is no run ({exc.message}): a runs ref holds runs of its plan only"
        extra = foreign_entries(commit.tree)
        if record.plan != plan or extra:
            what = f"holds {', '.join(extra)}" if extra else f"is a run of plan {record.plan!r}"
            return f"{short} {what}: refs/audit/runs/{plan} holds runs of plan {plan!r} only"
        lacking = _lacking(repo.git, commit.tree)
        if lacking is not None:
            return (
                f"{short} lacks {lacking} (the push did not bring every object of its runs): "
                "push the runs ref again from a complete clone"
            )
    return None


def _lacking(git: pygit2.Repository, tree: pygit2.Tree) -> str | None:
    """The first entry of run tree *tree* (its path and object id) whose object the repository
    does not hold, or None. git runs pre-receive for an update whose objects it found missing
    in a push that is not atomic, then drops that update alone: a branch judged with a run
    that never lands would be taken with no evidence on the server."""
    import pygit2

    folders: list[tuple[str, pygit2.Tree]] = [("", tree)]
    while folders:
        path, folder = folders.pop()
        for entry in folder:
            where = f"{path}{entry.name}"
            if entry.id not in git:
                return f"{where} ({entry.id})"
            if entry.type_str == "tree":
                sub = git[entry.id]
                if isinstance(sub, pygit2.Tree):
                    folders.append((f"{where}/", sub))
    return None


def _check_agents_update(repo: Repo, state: PlansState, old: str, new: str) -> str | None:
    """Fast-forward only; every new record verified from the server's accepted tip: signed by
    a runner or sealer of a plans commit the server holds, numbered and chained, a legal
    change of the registry (ledger/agents.py)."""
    import pygit2

    from gitaudit.errors import GitAuditError
    from gitaudit.ledger.agents import verify_segment

    added = _ff_commits(repo.git, old, new)
    if isinstance(added, str):
        return added
    try:
        verify_segment(
            repo.git, state, pygit2.Oid(hex=new), None if old == ZERO else pygit2.Oid(hex=old)
        )
    except GitAuditError as exc:
        return exc.message
    return None


def _check_audit_update(repo: Repo, state: PlansState, ref: str, old: str, new: str) -> str | None:
    """Why an update of an audit ref other than a runs ref is refused, or None."""
    if ref == "refs/audit/plans":
        return _check_plans_update(repo, old, new)
    if ref == "refs/audit/agents":
        if not state.exists:
            return "the server has no refs/audit/plans yet: push it first"
        return _check_agents_update(repo, state, old, new)
    if ref.startswith("refs/audit/proposals/"):  # changes awaiting k sealers' approvals
        from gitaudit.ledger.proposals import check_update

        return check_update(repo.git, state, ref, old, new)
    if ref.startswith("refs/audit/snapshots/"):
        return "snapshots hold untracked files: they stay in the repository they were taken in"
    return "unknown audit ref"


def _received(stdin: str) -> list[tuple[str, str, str]] | str:
    """The ``<old> <new> <ref>`` lines git gives pre-receive, or why one cannot be read. Lines
    end in ``\\n`` and fields in ``" "`` alone: a ref name may hold U+2028, U+2029 or U+0085,
    which :meth:`str.splitlines` takes for line ends (a prefix of the name was judged), and
    U+00A0 or U+3000, which :meth:`str.split` takes for spaces (the line was skipped)."""
    import re

    oid = "[0-9a-f]{40}(?:[0-9a-f]{24})?"
    updates = []
    for line in stdin.removesuffix("\n").split("\n") if stdin else []:
        parts = line.split(" ")
        if len(parts) != 3 or not all(re.fullmatch(oid, p) for p in parts[:2]) or not parts[2]:
            return f"unreadable update line {line!r} (git writes '<old> <new> <ref>')"
        updates.append((parts[0], parts[1], parts[2]))
    return updates


_NAMESPACES = "refs/namespaces/"  # where git keeps the refs of each namespace (git help namespaces)


def _namespaced() -> str | None:
    """Why a push is refused while ``GIT_NAMESPACE`` is set (a host serving several projects
    from one repository), or None. git gives the hook the names without the namespace and
    applies them below ``refs/namespaces/<ns>/``; pygit2, opened from git's environment,
    follows the variable for loose refs only and looks for packed ones in
    ``refs/namespaces/<ns>/packed-refs``, a file git never writes: after ``git gc`` the hook
    saw none of the namespace's refs (its policy read as the default, its evidence as absent),
    or only those written since. Nothing in a namespace can be judged reliably, so nothing in
    one is accepted (an empty value is no namespace, to git as to pygit2)."""
    namespace = os.environ.get("GIT_NAMESPACE")
    if not namespace:
        return None
    return (
        f"GIT_NAMESPACE is set ({namespace!r}): gitaudit cannot judge a push into a git "
        "namespace; serve each project from its own repository (unset GIT_NAMESPACE for "
        "receive-pack)"
    )


def pre_receive(args: Sequence[str], stdin: str) -> int:
    from gitaudit.errors import GitAuditError
    from gitaudit.git.repo import open_repo
    from gitaudit.ledger.plansref import read_state

    updates = _namespaced() or _received(stdin)
    if isinstance(updates, str):
        _err(f"gitaudit: pre-receive failed closed: {updates}")
        return 1
    repo = open_repo(from_env=True)
    try:
        state = read_state(repo, remember=False)
    except GitAuditError as exc:
        _err(f"gitaudit: the server's refs/audit/plans is not trustworthy: {exc.message}")
        return 1
    updates, aliases = _moved_refs(repo, updates)
    shown = aliases.get
    named = _refused_names(state, updates) + _read_first(repo, state, updates)
    for ref, why in named:
        _err(f"gitaudit: rejecting {shown(ref, ref)}: {why}")
    if named:
        return 1  # which update git would apply, or to which ref, is not what the hook read
    refused, pushed_runs = _audit_updates(repo, state, updates)
    for ref, why in refused:
        _err(f"gitaudit: rejecting {shown(ref, ref)}: {why}")
    if any(why.startswith(MOVED) for _, why in refused):
        return 1  # another push came first: `git audit push` fetches, replays and retries
    rejected = bool(refused)
    for _old, new, ref in updates:
        if ref.startswith(("refs/audit/", _MIRRORS)) or new == ZERO:
            continue
        if not (state.policy.protects(ref) if state.exists else ref.startswith("refs/heads/")):
            continue
        if not state.exists:
            rejected = True
            _err(
                f"gitaudit: rejecting {shown(ref, ref)}: the server has no refs/audit/plans: "
                "nothing can PASS"
            )
            continue
        if not _proven(repo, state, new, pushed_runs, ref, shown(ref, ref)):
            rejected = True
    return 1 if rejected else 0


def _proven(
    repo: Repo,
    state: PlansState,
    new: str,
    pushed_runs: dict[str, pygit2.Oid],
    ref: str,
    shown: str,
) -> bool:
    """Whether the protected *ref* may move to *new*: its tree PASSes for it, with the evidence
    on the server or pushed beside it, and what git serves as it is that tree (said when not)."""
    from gitaudit.gate.assess import assess

    result = assess(
        repo,
        new,
        state=state,
        pushed_runs=pushed_runs,
        check_tools=False,
        with_states=False,
        for_ref=ref,
    )
    if result.verdict != "PASS":
        _explain(_as_server(result, pushed_runs), f"update of {shown} to {new[:12]}")
        return False
    substituted = export_subst(repo.git, result.tree)
    if substituted is not None:
        _err(
            f"gitaudit: rejecting {shown}: {substituted} sets export-subst, so `git archive` of "
            "it writes text no tree pins into the proven files (the names of refs anyone may "
            "push later, through `$Format:%d$`; the commit message): remove export-subst from it"
        )
        return False
    return True


_ATTRIBUTES = ".gitattributes"


def export_subst(git: pygit2.Repository, tree: str) -> str | None:
    """The first ``.gitattributes`` of *tree* (its path) that sets ``export-subst`` (or defines
    a macro that does), or None. ``git archive`` writes such a file with its ``$Format:...$``
    placeholders expanded from outside the tree: the commit's message, and the names of the refs
    that point at the commit (``%d``, ``%D``) or at a commit below it (``%(describe)``), which
    any pusher may create after the tree was proven (a tag named
    ``v1"+__import__("os").system("...")+"`` in versioneer's ``git_refnames = "$Format:%d$"``).
    Read as a token of any line, set or given a value (git acts only on set; a file named
    ``export-subst`` counts too): never too few. Every ``.gitattributes`` blob counts, of any
    mode and in any letter case."""
    import re

    import pygit2

    from gitaudit import raw_trees

    width = len(tree) // 2
    entry, _whole = raw_trees.patterns(width)
    named = re.compile(rb"(?i)\.gitattributes\0")
    folders: list[tuple[str, pygit2.Oid]] = [("", pygit2.Oid(hex=tree))]
    while folders:
        path, oid = folders.pop()
        kind, body = git.odb.read(oid)  # read in C: about 25 ms less at 50,000 files
        listed = raw_trees.folders(body, width) if kind == pygit2.GIT_OBJECT_TREE else None
        if listed is None:  # no tree as git writes them: read entry by entry
            found = _export_subst_slowly(git, path, oid)
            if found is not None:
                return found
            continue
        folders += [
            (f"{path}{n.decode('utf-8', 'replace')}/", pygit2.Oid(raw=i)) for n, i in listed
        ]
        if named.search(body) is None:
            continue
        for mode, name, raw in entry.findall(body):
            if mode in (b"100644", b"100755", b"120000") and name.lower() == _ATTRIBUTES.encode():
                blob = git[pygit2.Oid(raw=raw)]
                if isinstance(blob, pygit2.Blob) and _sets_export_subst(blob.data):
                    return f"{path}{name.decode('utf-8', 'replace')}"
    return None


def _export_subst_slowly(git: pygit2.Repository, top: str, tree: pygit2.Oid) -> str | None:
    """:func:`export_subst` of a tree below *top* read entry by entry by libgit2 (one whose
    body is not as git writes them), blobs of any mode counted."""
    import pygit2

    folders: list[tuple[str, pygit2.Oid]] = [(top, tree)]
    while folders:
        path, oid = folders.pop()
        folder = git[oid]
        if not isinstance(folder, pygit2.Tree):
            return f"{path} (not a tree)"
        for item in folder:
            name = item.name or ""
            if item.type_str == "tree":
                folders.append((f"{path}{name}/", item.id))
            elif item.type_str == "blob" and name.lower() == _ATTRIBUTES:
                blob = git[item.id]
                if isinstance(blob, pygit2.Blob) and _sets_export_subst(blob.data):
                    return f"{path}{name}"
    return None


def _sets_export_subst(data: bytes) -> bool:
    tokens = data.replace(b"\t", b" ").replace(b"\r", b" ").replace(b"\n", b" ").split(b" ")
    return any(t.partition(b"=")[0] == b"export-subst" for t in tokens)


_SYMREF_DEPTH = 5  # how many refs git reads to the one it moves (refs.h: SYMREF_MAXDEPTH)


def _moved_refs(
    repo: Repo, updates: Sequence[tuple[str, str, str]]
) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """*updates* with each ref named as the ref git moves, and how each ref named otherwise is
    shown (``refs/heads/main (pushed as refs/heads/master)``). git gives pre-receive the name
    pushed, and moves the ref a symbolic ref of that name on the server points to (a
    ``refs/heads/master`` kept for ``refs/heads/main``): judged by the name pushed, main moved
    under another ref's policy, or under none. A name whose chain git would not follow to its
    end is kept (git refuses its update)."""
    moved: list[tuple[str, str, str]] = []
    aliases: dict[str, str] = {}
    for old, new, ref in updates:
        target = _moved_ref(repo, ref)
        if target != ref:
            aliases.setdefault(target, f"{target} (pushed as {ref})")
        moved.append((old, new, target))
    return moved, aliases


def _moved_ref(repo: Repo, ref: str) -> str:
    """The ref git moves when a push names *ref*: *ref*, or the ref at the end of the chain of
    symbolic refs on the server that starts at it."""
    from pygit2.enums import ReferenceType

    name = ref
    for _ in range(_SYMREF_DEPTH):
        try:
            found = repo.git.references.get(name)
        except UnicodeError:  # pygit2 cannot look up a name that is not UTF-8: list them all
            found = next((r for r in repo.git.references.iterator() if r.name == name), None)
        if found is None or found.type != ReferenceType.SYMBOLIC:
            return name
        name = str(found.target)
    return ref


_REPLACE = "refs/replace/"  # git reads the object such a ref names as another one


def _fold(name: str) -> str:
    """*name* as a file system that ignores case and Unicode normalisation sees it (the loose
    refs of macOS and Windows servers): ``refs/AUDIT/plans``, ``refs/headſ/main``."""
    import unicodedata

    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", name).casefold())


def _refused_names(
    state: PlansState, updates: Sequence[tuple[str, str, str]]
) -> list[tuple[str, str]]:
    """The updates refused for their ref's name alone, with why: a ref the push names twice (git
    gives the hook every line but applies only the first: the hook would judge with evidence
    that never lands), a replace ref (every git command on the server would read one object as
    another, a proven commit or tree as the pusher's), any ref below ``refs/namespaces/`` (a
    namespace serves ``refs/namespaces/x/refs/heads/main`` as its main, unjudged by that name;
    :func:`_namespaced`), and a case variant (:func:`_case_variant`)."""
    refused: list[tuple[str, str]] = []
    seen: dict[str, str] = {}
    policy = state.policy if state.exists else None
    patterns = (
        (*policy.protected_refs, *(r.pattern for r in policy.evidence))
        if policy is not None
        else ("refs/heads/*",)
    )
    for _old, new, ref in updates:
        folded = _fold(ref)
        why: str | None
        if folded in seen:
            first = seen[folded]
            also = "" if first == ref else f" (as {first!r} too: one ref where case is ignored)"
            why = f"the push names it twice{also}; push each ref once"
        elif ref.startswith(_REPLACE) and new != ZERO:
            why = (
                "a replace ref makes git on the server read one object as another (a proven "
                "commit or tree as an unproven one): the server takes none"
            )
        elif ref.startswith(_NAMESPACES):
            why = (
                "a git namespace's refs (its branches, its refs/audit/*) are served as that "
                "namespace's own, and gitaudit judges none: the server takes none"
            )
        else:
            why = _case_variant(ref, folded, patterns)
        seen.setdefault(folded, ref)
        if why is not None:
            refused.append((ref, why))
    return refused


# where git looks for a short name, in order, past the name as given (`git help revisions`;
# refs.c, ref_rev_parse_rules): a ref of an earlier form is what `git archive NAME` reads
_SHORT_FORMS = (
    "refs/{}",
    "refs/tags/{}",
    "refs/heads/{}",
    "refs/remotes/{}",
    "refs/remotes/{}/HEAD",
)


def _short_names(ref: str) -> list[tuple[int, str]]:
    """The short names git reads as *ref*, each with the place of its form in _SHORT_FORMS."""
    found = []
    for place, form in enumerate(_SHORT_FORMS):
        head, _, tail = form.partition("{}")
        if ref.startswith(head) and ref.endswith(tail) and len(ref) > len(head) + len(tail):
            found.append((place, ref[len(head) : len(ref) - len(tail)]))
    return found


def _read_first(
    repo: Repo, state: PlansState, updates: Sequence[tuple[str, str, str]]
) -> list[tuple[str, str]]:
    """The updates refused because git on the server would read an unprotected ref for a
    protected one: a tag ``main`` (or ``refs/release/1``) comes before the branch ``main``
    (``release/1``) in git's order for a short name, so a deploy's ``git archive main`` read the
    tag, unjudged, while the hook had proven the branch. Such a ref is refused beside a
    protected one of its short name (on the server or in the push), and a protected ref while
    such a ref stands before it (its fix: delete that ref, which anyone may, in a push of its
    own: a deletion in the same push clears nothing, since git may refuse it after the hook).
    The audit refs are never refused for a branch's name (a proven commit as
    ``refs/heads/audit/plans`` would have stopped the ledger): that branch is."""
    protects = state.policy.protects if state.exists else _heads
    pushed = {ref: new for _old, new, ref in updates}

    def present(name: str) -> bool:
        # a deletion in the same push does not count: git may still refuse it after the hook
        # (an old value that is not the server's, the server's current branch) and keep the ref
        if pushed.get(name, ZERO) != ZERO:
            return True
        try:
            return repo.git.references.get(name) is not None
        except UnicodeError:  # pygit2 cannot look up a name that is not UTF-8: list them all
            return name in set(repo.git.references)

    refused = []
    for _old, new, ref in updates:
        why = None if new == ZERO else _read_instead(ref, protects, present)
        if why is not None:
            refused.append((ref, why))
    return refused


def _read_instead(
    ref: str, protects: Callable[[str], bool], present: Callable[[str], bool]
) -> str | None:
    """Why *ref* is refused by :func:`_read_first`, or None."""
    guarded = protects(ref)
    for place, short in _short_names(ref):
        for other_place, form in enumerate(_SHORT_FORMS):
            other = form.format(short)
            if other == ref or guarded == protects(other) or not present(other):
                continue
            if other_place > place and not ref.startswith(("refs/audit/", _MIRRORS)):
                return (
                    f"git reads {short!r} as this ref before {other}, which the policy "
                    f"protects (`git archive {short}` on the server would read this ref, "
                    "unjudged): name it otherwise"
                )
            if other_place < place:
                return (
                    f"{other} stands before it: git reads {short!r} as that ref, unjudged, "
                    f"first; delete it (`git push <remote> :{other}`), then push again"
                )
    return None


def _heads(ref: str) -> bool:
    """What a server without refs/audit/plans protects."""
    return ref.startswith("refs/heads/")


def _case_variant(ref: str, folded: str, patterns: Sequence[str]) -> str | None:
    """Why *ref* is refused as an audit ref, a mirror, a replace ref, a namespace's ref or a ref
    a policy pattern matches, only when case is ignored: on a server whose file system ignores
    case it is that ref (``refs/AUDIT/runs/default`` would move the ledger unjudged,
    ``refs/Heads/main`` the protected branch); None when it is no such variant."""
    import fnmatch

    for prefix in ("refs/audit/", _MIRRORS, _REPLACE, _NAMESPACES):
        if folded.startswith(prefix) and not ref.startswith(prefix):
            return f"a case variant of {prefix}: name it {prefix}..."
    for pattern in patterns:
        if fnmatch.fnmatchcase(folded, _fold(pattern)) and not fnmatch.fnmatchcase(ref, pattern):
            return (
                f"the policy's {pattern!r} matches it only when case is ignored (where the "
                "file system ignores case, it is that ref): spell it as the policy does"
            )
    return None


def _audit_updates(
    repo: Repo, state: PlansState, updates: Sequence[tuple[str, str, str]]
) -> tuple[list[tuple[str, str]], dict[str, pygit2.Oid]]:
    """The pushed updates of audit refs (and of ``refs/gitaudit/``) that are refused, with why;
    and the accepted runs updates' new tips, by plan."""
    refused: list[tuple[str, str]] = []
    pushed_runs: dict[str, pygit2.Oid] = {}
    for old, new, ref in updates:
        why: str | None
        if ref.startswith(_MIRRORS):  # the gate reads them beside refs/audit/*: none on a server
            why = (
                f"{_MIRRORS} holds a clone's copies of its remotes' audit refs and a server "
                "keeps none: push refs/audit/* itself"
            )
        elif not ref.startswith("refs/audit/"):
            continue
        else:
            why = _stale(repo, ref, old) or _check_update(repo, state, ref, old, new, pushed_runs)
        if why:
            refused.append((ref, why))
    return refused, pushed_runs


def _check_update(
    repo: Repo,
    state: PlansState,
    ref: str,
    old: str,
    new: str,
    pushed_runs: dict[str, pygit2.Oid],
) -> str | None:
    """Why the update of audit ref *ref* from the value the server holds is refused, or None;
    an accepted runs update's new tip is added to *pushed_runs*."""
    import pygit2

    from gitaudit.plan.store import valid_name

    if new == ZERO and not ref.startswith("refs/audit/proposals/"):
        return "audit refs cannot be deleted"
    if not ref.startswith("refs/audit/runs/"):
        return _check_audit_update(repo, state, ref, old, new)
    if not valid_name(name := ref.removeprefix("refs/audit/runs/")):
        return (
            f"{name!r} is no plan name (letters, digits, '-' and '_'): evidence goes "
            "on refs/audit/runs/<plan>, push that ref"
        )
    if not state.exists:
        return "the server has no refs/audit/plans yet: push it first"
    why = _check_runs_update(repo, state, name, old, new)
    if why is None:
        pushed_runs[name] = pygit2.Oid(hex=new)
    return why


def _stale(repo: Repo, ref: str, old: str) -> str | None:
    """Why the old value of *ref* in the push is not what the server holds, or None. git gives
    the hook the old value the pusher sent, and checks it only when it moves the ref, after the
    hook: an update verified from an old value of the pusher's choosing was verified from a
    commit of its choice (and its runs were read as evidence, though that ref never moves)."""
    from gitaudit.errors import GitAuditError
    from gitaudit.ledger.refs import read_ref

    try:
        found = read_ref(repo.git, ref)
    except GitAuditError as exc:
        return f"the server cannot read it ({exc.message})"
    except UnicodeError:
        return "its name is not UTF-8: audit refs are named by gitaudit"
    held = str(found) if found is not None else ZERO
    if held == old:
        return None
    return (
        f"{MOVED} {old[:12]}, but the server holds {held[:12]} (every check starts from the "
        "old value: a push must give the real one): fetch, then push again"
    )


# evidence the server lacks, which the pusher may well have recorded: what to say instead of the
# client's "run it" hint
_ABSENT = ("evidence.missing", "evidence.stale-contract", "evidence.runner-label")


def _as_server(result: GateResult, pushed_runs: dict[str, pygit2.Oid]) -> GateResult:
    """*result* with the fixes a pusher needs: evidence the server does not have may exist in
    the pusher's clone, so the fix is to push it (with the branch, `git audit push`), and to
    record it first only when it does not exist."""
    from dataclasses import replace

    plans = []
    for plan in result.plans:
        reasons = tuple(
            replace(
                r,
                hint=(
                    "push your evidence with the branch: `git audit push` (it sends "
                    f"refs/audit/* too); if there is none yet, `git audit run --plan {plan.name}` "
                    "first"
                    if plan.name not in pushed_runs
                    else f"the pushed evidence is not for this tree: `git audit run --plan "
                    f"{plan.name}`, then `git audit push`"
                ),
            )
            if r.code in _ABSENT
            else r
            for r in plan.reasons
        )
        plans.append(replace(plan, reasons=reasons))
    return replace(result, plans=tuple(plans))


def pre_commit_framework(args: Sequence[str], stdin: str) -> int:
    """The pre-commit framework's pre-push stage: it passes no stdin, only the first pushed
    ref in ``PRE_COMMIT_*`` variables. That ref is judged as the pre-push hook would judge it;
    the audit refs (what `git audit push` sends beside the branch) are the server's to judge,
    and a run is never judged as if it were code. Without the variables, the work tree is."""
    remote_ref = os.environ.get("PRE_COMMIT_REMOTE_BRANCH", "")
    local_sha = os.environ.get("PRE_COMMIT_TO_REF", "")
    if remote_ref.startswith("refs/audit/"):
        return 0
    if not local_sha:
        from gitaudit.gate.judge import judge

        result = judge(_open_own_repo())
        if result.verdict != "PASS":
            _explain(result, "the push")
        return 0 if result.verdict == "PASS" else 1
    local_ref = os.environ.get("PRE_COMMIT_LOCAL_BRANCH", local_sha)
    # the remote's value is not judged, and pre-commit's FROM_REF may be no object id (`abc^`
    # for a new branch): zeros stand in for it
    line = f"{local_ref} {local_sha} {remote_ref or 'refs/heads/HEAD'} {ZERO}\n"
    return pre_push(args, line)


HANDLERS = {
    "pre-push": pre_push,
    "commit-msg": commit_msg,
    "pre-receive": pre_receive,
    "pre-commit-push": pre_commit_framework,
}


def _read_stdin() -> str:
    """Standard input as git wrote it: bytes, a ref name being any bytes git allows (not
    necessarily UTF-8, nor in the locale's encoding), kept by surrogate escapes."""
    raw = getattr(sys.stdin, "buffer", None)
    return raw.read().decode("utf-8", "surrogateescape") if raw is not None else sys.stdin.read()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in HANDLERS:
        _err(f"usage: python -m gitaudit.hooks {{{'|'.join(HANDLERS)}}} [ARGS]")
        return 2
    name, rest = args[0], args[1:]
    if argv is None:  # this process is the hook: its pygit2 skips the CA bundle
        from gitaudit.git import libgit2

        libgit2.install()
    stdin = "" if name in ("commit-msg", "pre-commit-push") else _read_stdin()
    try:
        return HANDLERS[name](rest, stdin)
    except Exception as exc:  # a hook must fail closed with one readable line
        from gitaudit.errors import GitAuditError

        if os.environ.get("GITAUDIT_DEBUG"):
            raise
        detail = exc.message if isinstance(exc, GitAuditError) else f"{type(exc).__name__}: {exc}"
        _err(f"gitaudit: {name} failed closed: {detail}")
        return 1


def run() -> None:
    """This process is the hook ``sys.argv`` names: :func:`main`, then the quick exit of
    :func:`gitaudit.shutdown.leave`. What the installed shims call
    (``python -P -c 'from gitaudit.hooks.entry import run; run()' NAME ARGS``)."""
    from gitaudit.shutdown import leave

    leave(main())


if __name__ == "__main__":
    sys.exit(main())
