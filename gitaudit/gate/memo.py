"""The verdict memo: PASS verdicts of the gate, remembered so that a hook re-judging a tree the
gate has already judged costs three git calls instead of a full assessment.

Standard library only, and light (no pygit2, no dataclasses, no pathlib): the hooks' fast path
imports this module alone.

A verdict of the gate is a deterministic function of its inputs: the judged tree (content
addressed), every ref under ``refs/audit/`` (the seals, the ledgers, the agent registry:
immutable objects by id) and under ``refs/gitaudit/`` (the remote-tracking copies of other
clones' ledgers, whose evidence counts), the high-water marks file, the ``audit.*``
configuration (the pinned root key, the commit-msg mode) and ``core.ignorecase`` (how claimed
paths are matched) as the gate's libgit2 reads them (:data:`CONFIG`), the repository's trust
anchor (:mod:`gitaudit.ledger.anchor`), the gitaudit version, the clock (evidence expiry) and
the required tools on PATH. An entry records one PASS under a digest of all of them but the
clock and the tools, with the earliest expiry of the evidence it relied on and the tools it
needed. A lookup recomputes the digest from the repository as it is now, checks the clock and
resolves the tools again; anything else is a miss, and the full gate runs (and explains). Only
PASS is remembered: FAIL and UNKNOWN are always judged and explained afresh.

Entries live in ``<gitdir>/gitaudit/memo.json``; each is authenticated with HMAC-SHA256 under a
random key kept beside the signing keys (:mod:`gitaudit.secret`: ``$GITAUDIT_HOME/memo.key``,
mode 0600, never inside a work tree), so the file is a cache that cannot be forged: whoever could
forge an entry could as well read the signing keys and sign evidence.
"""

from __future__ import annotations

import contextlib
import os
import time

from gitaudit import __version__
from gitaudit.git.call import start_git
from gitaudit.git.environment import config_as_libgit2
from gitaudit.named import NamedTuple
from gitaudit.places import (
    anchor_path,
    entered_worktree,
    marks_path,
    shared_state_dir,
    state_dir,
)

TYPE_CHECKING = False  # not typing's: the hooks' fast path does without it (gitaudit.named)
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from gitaudit.git.spawn import Process

# json, hashlib, hmac and gitaudit.secret are imported by snapshot() while its git processes
# run: imported here, they would delay the start of git by their import time (about 4 ms)

# 2: entries carry the notes of the PASS; 3: the state covers refs/gitaudit/; 4: entries carry
# the ref judged for and the policy's evidence rule patterns; 5: entries carry the programs the
# checks of runs made here ran (gitaudit.ledger.programs); 6: the configuration as libgit2 reads
# it, with the conditions of the files it includes and the repository's format and extensions;
# 7: entries carry the content filter drivers of runs made here (gitaudit.ledger.programs)
FORMAT = 7
FILENAME = "memo.json"
MAX_ENTRIES = 64
MAX_BYTES = 1 << 20
MIRRORS = "refs/gitaudit/"  # gitaudit.ledger.refs.MIRROR's parent (not imported: no pygit2 here)
# The configuration the gate reads (with libgit2), and the conditions under which a configuration
# file includes another. The state takes it as `git config` prints it, with git told to read it
# where libgit2 does (gitaudit.git.environment.config_as_libgit2): a value only git reads (set by
# a variable, in a file GIT_CONFIG_GLOBAL names) would stand in the state for one the gate reads.
# Judged with `rootKey = X` then `rootKey = K` in .git/config (the gate reads K), the same two
# lines printed with X alone in .git/config (the gate reads X) and K in a file only git read
# named the state a PASS was remembered in. An included file is read by both, but only under a
# condition both know: a state with a condition libgit2 does not (`hasconfig:`) is none. The
# repository's format and extensions decide whether libgit2 opens it at all (it refuses
# `extensions.partialClone`, which git reads on): the gate then judges nothing, and says so.
CONFIG = r"^(audit\.|core\.ignorecase$|core\.repositoryformatversion$|extensions\.|includeif\.)"
LIBGIT2_CONDITIONS = ("gitdir:", "gitdir/i:", "onbranch:")  # libgit2 1.9's config_file.c


class Snapshot(NamedTuple):
    """Everything a verdict depends on besides the tree, the clock and the tools."""

    gitdir: str
    workdir: str
    refs: tuple[tuple[str, str], ...]  # (refname, object id) under refs/audit/, refs/gitaudit/
    config: str  # the audit.* configuration and core.ignorecase, as git prints them
    marks: bytes  # the high-water marks file, as stored
    anchors: bytes = b""  # the trust anchor files (by common dir, by work tree), as stored
    entered: str | None = None  # the work tree the anchor is looked up by
    common: str = ""  # the common dir (the anchor's key), as git printed it
    floors: bytes = b""  # the marks' floors in the gitaudit home, as stored

    @property
    def entered_is_git_work_tree(self) -> bool:
        """Whether git's work tree is the folder whose ``.git`` was entered: ``core.worktree``
        (or a ``.git`` leading elsewhere) would have git, and a fingerprint taken where git
        says, read another folder, such as a clean copy of a proven tree
        (:func:`gitaudit.places.require_entered`)."""
        return self.entered is not None and os.path.realpath(self.workdir) == self.entered

    @property
    def located(self) -> tuple[str, str, str]:
        """Where git found the repository: git dir, work tree, common dir (see snapshot)."""
        return self.gitdir, self.workdir, self.common

    @property
    def digest(self) -> str:
        import hashlib
        import json

        doc = {
            "format": FORMAT,
            "version": __version__,
            "refs": [list(r) for r in self.refs],
            "config": self.config,
            "marks": hashlib.sha256(self.marks).hexdigest(),
            "floors": hashlib.sha256(self.floors).hexdigest(),
            "anchors": hashlib.sha256(self.anchors).hexdigest(),
        }
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


class Entry(NamedTuple):
    """One remembered PASS."""

    state: str  # Snapshot.digest
    tree: str
    made: float  # when the gate judged
    until: float | None  # the earliest expiry of the evidence relied on
    tools: tuple[str, ...]  # required tools, resolved again on every lookup
    protect: tuple[str, ...]  # the policy's protected ref patterns (hooks need them)
    commit_msg: str  # the policy's default commit-msg mode
    runs: tuple[tuple[str, str], ...]  # (plan, run commit) judged, for commit trailers
    ref: str = ""  # the ref judged for, when an evidence rule applied to it; "" otherwise
    rules: tuple[str, ...] = ()  # the policy's evidence rule patterns (refs judged apart)
    # (plan, note) the PASS came with: evidence from the live work tree, or relying on ignored
    # paths, which a judgement of the work tree (`status`) checks beyond the tree
    notes: tuple[tuple[str, str], ...] = ()
    # (program, folder, executable) the checks of runs made here started by name: PATH must
    # still offer each (gitaudit.pathsearch), asked on every lookup
    programs: tuple[tuple[str, str | None, str | None], ...] = ()
    path: tuple[str, ...] = ()  # the folders of their checks' PATH: PATH must still hold each
    # (NAME.KEY, value) of the content filter drivers their checkouts applied: the global git
    # configuration must still define each so, asked on every lookup
    filters: tuple[tuple[str, str], ...] = ()

    def payload(self) -> bytes:
        import json

        doc = {
            "state": self.state,
            "tree": self.tree,
            "made": self.made,
            "until": self.until,
            "tools": list(self.tools),
            "protect": list(self.protect),
            "commit_msg": self.commit_msg,
            "runs": [list(r) for r in self.runs],
            "ref": self.ref,
            "rules": list(self.rules),
            "notes": [list(n) for n in self.notes],
            "programs": [list(p) for p in self.programs],
            "path": list(self.path),
            "filters": [list(f) for f in self.filters],
        }
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    def holds(self, now: float, repository: Sequence[str] = ()) -> bool:
        """Still PASS at *now*: the clock has not gone back past the judgement, no evidence has
        expired, every required tool is still on PATH, and PATH (cleaned for *repository*, as
        the checks' is) still holds the folders of the checks' PATH of runs made here and offers
        each program they started, and the global git configuration still defines the content
        filter drivers their checkouts applied."""
        if now < self.made or (self.until is not None and now >= self.until):
            return False
        if self.programs or self.path:
            from gitaudit.pathsearch import offered

            if not offered(self.programs, self.path, repository):
                return False
        if self.filters:
            from gitaudit.git.config_paths import filter_drivers

            names = {key.rpartition(".")[0] for key, _ in self.filters}
            if sorted(filter_drivers(names).items()) != sorted(self.filters):
                return False
        if not self.tools:
            return True
        import shutil

        return all(shutil.which(tool) is not None for tool in self.tools)


def snapshot(
    cwd: str | os.PathLike[str] | None = None,
    *,
    gitdir: str | os.PathLike[str] | None = None,
    revs: Sequence[str] = (),
    entered: str | None = None,
    located: tuple[str, str, str] | None = None,
) -> tuple[Snapshot, list[str]] | None:
    """The repository's current :class:`Snapshot` (discovered from *cwd*, as the gate does, or
    at *gitdir*) and the tree ids of *revs*; None when git cannot answer or the repository has
    no work tree. Three git processes, run side by side; two when *located* (git dir, work tree,
    common dir, as ``git rev-parse --path-format=absolute`` printed them for *cwd*: the
    fingerprint's head start asks git that) is given and no *revs*. The trust anchor is looked
    up as the gate does (:func:`gitaudit.ledger.anchor.files`): by the common dir, and by the
    work tree *entered* (default: the one entered from *cwd*)."""
    cwd = os.fspath(cwd) if cwd is not None else None
    if entered is None and gitdir is None:
        entered = entered_worktree(cwd or os.getcwd())
    lines = list(located) if located is not None and not revs else None
    locate = [
        "rev-parse",
        "--absolute-git-dir",
        "--show-toplevel",  # fails in a bare repository: no memo there
        "--path-format=absolute",
        "--git-common-dir",
        *(f"{r}^{{tree}}" for r in revs),
    ]
    asked = start_git(locate, cwd=cwd, git_dir=gitdir) if lines is None else None
    listed = start_git(
        ["for-each-ref", "--format=%(refname) %(objectname)", "refs/audit/", MIRRORS],
        cwd=cwd,
        git_dir=gitdir,
    )
    configured = start_git(
        ["config", "--get-regexp", CONFIG], cwd=cwd, git_dir=gitdir, environment=config_as_libgit2()
    )
    _while_git_runs()
    if asked is not None:
        out, code = _answer(asked)
        lines = out.split("\n")[:-1] if code == 0 else None  # at "\n" alone: see below
    refs_out, refs_code = _answer(listed)
    config, config_code = _answer(configured)
    if lines is None or refs_code != 0 or config_code not in (0, 1):
        return None
    if len(lines) != 3 + len(revs) or not _read_as_libgit2(config):
        return None
    refs = []
    # one line a ref, cut at "\n" alone: a ref name may hold U+2028 (and other characters that
    # str.splitlines cuts at), and read as two refs, a crafted name made one of them any ref
    # at any commit, so a deleted runs ref could be listed as the remembered state lists it
    for line in refs_out.split("\n")[:-1]:
        name, _, oid = line.rpartition(" ")
        refs.append((name, oid))
    found, workdir, common = lines[0], lines[1], lines[2]
    try:
        marks = _contents(os.path.join(shared_state_dir(found), "watermarks.json"))
        floors = _contents(marks_path(found))  # kept in the gitaudit home
        keyed = (common, entered) if entered is not None else (common,)
        anchors = b"\0".join(_contents(anchor_path(where)) for where in keyed)
    except OSError:
        return None
    snap = Snapshot(
        found, workdir, tuple(sorted(refs)), config, marks, anchors, entered, common, floors
    )
    return snap, lines[3:]


def _read_as_libgit2(config: str) -> bool:
    """Whether libgit2 includes every file git included for *config* (see :data:`CONFIG`): a
    line that begins an ``includeIf`` of another condition (a value holding a line break may
    read as one too: then there is no state either, which is only slower)."""
    for line in config.split("\n"):
        if line.startswith("includeif."):
            condition = line.removeprefix("includeif.")
            if not condition.startswith(LIBGIT2_CONDITIONS):
                return False
    return True


def _while_git_runs() -> None:
    """Import what reading the answers and the memo takes, while git works on them (imported
    at the top of this module, they would hold back the start of git instead)."""
    import hashlib  # noqa: F401
    import hmac  # noqa: F401
    import json  # noqa: F401

    from gitaudit import secret  # noqa: F401


def _answer(process: Process) -> tuple[str, int | None]:
    """What a git process printed, and its exit code."""
    return process.communicate()[0].decode("utf-8", "surrogateescape"), process.returncode


def _contents(path: str) -> bytes:
    """The bytes of the file at *path*; empty when there is none."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return b""


def _mac(key: bytes, entry: Entry) -> str:
    from gitaudit import secret

    return secret.mac(key, entry.payload())


# --------------------------------------------------------------------------------- the file


def _path(gitdir: str) -> str:
    return os.path.join(state_dir(gitdir), FILENAME)


def _entries(gitdir: str) -> list[dict[str, object]]:
    import json

    try:
        with open(_path(gitdir), "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            return []  # not written by us (64 entries take a few kB): ignored, then replaced
        data = json.loads(raw)
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return []
    entries = data.get("entries")
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def _parse(raw: Mapping[str, object]) -> Entry | None:
    try:
        until = raw["until"]
        return Entry(
            state=str(raw["state"]),
            tree=str(raw["tree"]),
            made=float(raw["made"]),  # type: ignore[arg-type]
            until=None if until is None else float(until),  # type: ignore[arg-type]
            tools=tuple(str(t) for t in raw["tools"]),  # type: ignore[attr-defined]
            protect=tuple(str(p) for p in raw["protect"]),  # type: ignore[attr-defined]
            commit_msg=str(raw["commit_msg"]),
            runs=tuple((str(p), str(r)) for p, r in raw["runs"]),  # type: ignore[attr-defined]
            ref=str(raw["ref"]),
            rules=tuple(str(p) for p in raw["rules"]),  # type: ignore[attr-defined]
            notes=tuple((str(p), str(n)) for p, n in raw["notes"]),  # type: ignore[attr-defined]
            programs=tuple(
                (str(p), None if f is None else str(f), None if e is None else str(e))
                for p, f, e in raw["programs"]  # type: ignore[attr-defined]
            ),
            path=tuple(str(f) for f in raw["path"]),  # type: ignore[attr-defined]
            filters=tuple((str(k), str(v)) for k, v in raw["filters"]),  # type: ignore[attr-defined]
        )
    except (KeyError, TypeError, ValueError):
        return None


def lookup(
    snap: Snapshot,
    tree: str,
    now: float | None = None,
    ref: str = "",
    *,
    work_tree: bool = False,
) -> Entry | None:
    """The remembered PASS of *tree* for *ref* ("" for no ref) in the state *snap*, if it holds
    now; None otherwise. A PASS judged for no ref answers for a ref only when no evidence rule
    of the policy matches it (the same state: the same policy). With *work_tree* (the work tree
    is judged, *tree* its fingerprint: `status`, the stop hook) an entry with notes never
    answers: its PASS relied on what the work tree holds beyond the tree (declared ignored
    paths), which the full gate checks again and the state does not cover; nor does one when
    git's work tree is not the folder entered (:attr:`Snapshot.entered_is_git_work_tree`): the
    full gate refuses to judge that."""
    if work_tree and not snap.entered_is_git_work_tree:
        return None
    raw = [e for e in _entries(snap.gitdir) if e.get("tree") == tree and e.get("ref") in (ref, "")]
    if not raw:
        return None
    import hmac

    from gitaudit import secret

    key = secret.local_key(snap.workdir, create=False)
    if key is None:
        return None
    state = snap.digest
    now = time.time() if now is None else now
    for item in raw:
        entry = _parse(item)
        if entry is None or entry.state != state or not _answers(entry, ref):
            continue
        if work_tree and entry.notes:
            continue
        if not hmac.compare_digest(str(item.get("mac", "")), _mac(key, entry)):
            continue
        if entry.holds(now, (snap.workdir, snap.gitdir)):
            return entry
    return None


def _answers(entry: Entry, ref: str) -> bool:
    if entry.ref == ref:
        return True
    if entry.ref != "":
        return False
    if not entry.rules:
        return True
    import fnmatch

    return not any(fnmatch.fnmatchcase(ref, p) for p in entry.rules)


def remember(
    before: Snapshot,
    *,
    tree: str,
    made: float,
    until: float | None,
    tools: Iterable[str],
    protect: Iterable[str],
    commit_msg: str,
    runs: Iterable[tuple[str, str]],
    ref: str = "",
    rules: Iterable[str] = (),
    notes: Iterable[tuple[str, str]] = (),
    programs: Iterable[tuple[str, str | None, str | None]] = (),
    path: Iterable[str] = (),
    filters: Iterable[tuple[str, str]] = (),
) -> bool:
    """Record a PASS judged in the state *before*. The state is taken again now: the refs, the
    configuration and the trust anchors must not have changed meanwhile, and the marks may only
    have moved to the refs' current tips (the gate's own "seen" records), which leaves the
    verdict unchanged; the entry is keyed by the state as it is now, which is what the next
    lookup will see. Best effort: False when nothing was recorded."""
    # where the repository is was asked just before: only its state is taken again
    located = before.located if before.common else None
    again = snapshot(gitdir=before.gitdir, entered=before.entered, located=located)
    if again is None:
        return False
    after = again[0]
    if (after.refs, after.config, after.anchors) != (before.refs, before.config, before.anchors):
        return False  # the gate judged another state than the one the entry would be keyed by
    if not _marks_moved_to_tips(before, after):
        return False
    import json

    from gitaudit import secret

    key = secret.local_key(after.workdir, create=True)
    if key is None:
        return False
    entry = Entry(
        state=after.digest,
        tree=tree,
        made=float(made),  # floats both ways: the MAC covers the JSON text
        until=None if until is None else float(until),
        tools=tuple(sorted(set(tools))),
        protect=tuple(protect),
        commit_msg=commit_msg,
        runs=tuple(sorted(runs)),
        ref=ref,
        rules=tuple(sorted(rules)),
        notes=tuple(notes),
        programs=tuple(sorted(programs, key=str)),
        path=tuple(sorted(set(path))),
        filters=tuple(sorted(set(filters))),
    )
    doc = json.loads(entry.payload())
    doc["mac"] = _mac(key, entry)
    others = [
        e
        for e in _entries(after.gitdir)
        if e.get("state") == entry.state and (e.get("tree"), e.get("ref")) != (tree, ref)
    ]
    kept = [*others[-(MAX_ENTRIES - 1) :], doc]
    try:
        _write(after.gitdir, {"format": FORMAT, "entries": kept})
    except OSError:
        return False
    return True


def _marks_moved_to_tips(before: Snapshot, after: Snapshot) -> bool:
    """Whether the marks and their floors changed only to name the refs' current tips."""
    return all(
        _moved_to_tips(was, now, dict(after.refs))
        for was, now in ((before.marks, after.marks), (before.floors, after.floors))
    )


def _moved_to_tips(before: bytes, after: bytes, tips: Mapping[str, str]) -> bool:
    if before == after:
        return True
    import json

    try:
        old = json.loads(before) if before else {}
        new = json.loads(after)
    except ValueError:
        return False
    if not isinstance(old, dict) or not isinstance(new, dict):
        return False  # not marks as gitaudit writes them: nothing is remembered
    for kind in set(old) | set(new):
        was, now = old.get(kind, {}), new.get(kind, {})
        if not isinstance(was, dict) or not isinstance(now, dict):
            return False
        for ref in set(was) | set(now):
            if was.get(ref) != now.get(ref) and now.get(ref) != tips.get(ref):
                return False
    return True


def _write(gitdir: str, doc: Mapping[str, object]) -> None:
    import json
    import tempfile

    path = _path(gitdir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".memo.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(doc, handle, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def forget(gitdir: str | os.PathLike[str]) -> None:
    """Drop every remembered verdict (they are only a cache)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_path(os.fspath(gitdir)))
