"""Verified high-water marks: the last tip of each audit ref that gitaudit verified.

Kept in ``<common dir>/gitaudit/watermarks.json`` (:func:`gitaudit.places.shared_state_dir`):
the refs are the repository's, shared by its linked worktrees, and so are their marks. A ref
whose new tip does not descend from its mark was rewound, truncated or rewritten, which is a
FAIL. Marks only ever move forward; the file is
replaced atomically, so a crash leaves the old marks or the new ones, never a torn file. The
file is a cache of facts that can be re-established: deleting it means "trust nothing
incrementally", and the next verification starts from the roots.

Anything in the work tree can write the file, so a mark is trusted two ways. As a *floor* (a
ref below it was rewound) any mark counts: a written one can only make gitaudit refuse more. As
a *starting point* (everything up to it was verified: verification resumes there) only a
verified mark with its MAC under the local secret key (:mod:`gitaudit.secret`, beside the
signing keys, out of an agent's reach), bound to this repository, the ref and the commit, counts
(:func:`verified`): otherwise a hand-written mark on a forged commit deep in a chain vouched for
every commit below it. Without the key nothing is vouched for, and verification is only slower.

Deleting the file (or putting back an old copy) would forget how far a ref had got, so a ref
moved back past a run it held (a FAIL of a tree after its PASS, never pushed) would read as
never having held it. So every mark recorded against the ref it names is also kept as a floor
in the gitaudit home (:func:`gitaudit.places.marks_path`), which the agent cannot write and the
checks cannot open; a ref must descend from that floor too (``home`` in :data:`Marks`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hmac
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

import pygit2

from gitaudit import secret
from gitaudit.errors import LedgerError
from gitaudit.places import common_dir, marks_path, shared_state_dir

FILENAME = "watermarks.json"


def _path(gitdir: Path) -> Path:
    try:
        return Path(shared_state_dir(gitdir)) / FILENAME
    except OSError as exc:
        raise LedgerError(
            f"cannot read {gitdir / 'commondir'}: {exc.strerror or exc}",
            hint="restore it: it names the repository the worktree belongs to",
        ) from None


Kind = Literal["verified", "seen"]
_SECTIONS = ("verified", "seen", "macs")  # macs: ref -> the MAC of its verified mark


def _empty() -> dict[str, dict[str, str]]:
    return {section: {} for section in _SECTIONS}


def _sections(path: str | Path, sections: tuple[str, ...]) -> dict[str, dict[str, str]]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.loads(handle.read())
    except (OSError, ValueError):
        data = {}  # a missing or corrupt cache costs a re-verification
    if not isinstance(data, dict):
        data = {}
    out: dict[str, dict[str, str]] = {}
    for kind in sections:
        marks = data.get(kind, {})
        out[kind] = (
            {str(k): str(v) for k, v in marks.items() if isinstance(v, str)}
            if isinstance(marks, dict)
            else {}
        )
    return out


def _read(gitdir: Path) -> dict[str, dict[str, str]]:
    """The marks file's sections, and ``home``: the floors kept in the gitaudit home."""
    out = _sections(_path(gitdir), _SECTIONS)
    out["home"] = _sections(marks_path(gitdir), ("seen",))["seen"]
    return out


def load(gitdir: Path, kind: Kind = "verified") -> dict[str, str]:
    """The marks of one kind: ``verified`` (everything up to it was verified: `verify` resumes
    there) or ``seen`` (only the tip's own signature was checked: enough to catch a rewind)."""
    return _read(gitdir)[kind]


Marks = dict[str, dict[str, str]]  # kind -> ref -> commit id ("macs": ref -> MAC; "home": floors)


def _payload(gitdir: Path, ref: str, commit: str) -> bytes:
    return b"\0".join(
        (
            b"gitaudit.watermark/1",
            os.fsencode(common_dir(gitdir)),  # the repository's: a linked worktree's too
            ref.encode("utf-8", "surrogateescape"),
            commit.encode(),
        )
    )


def _key(repo: pygit2.Repository, *, create: bool) -> bytes | None:
    workdir = repo.workdir
    return secret.local_key(os.path.normpath(workdir) if workdir else None, create=create)


def verified(repo: pygit2.Repository, gitdir: Path, marks: Marks, ref: str) -> str | None:
    """The verified mark of *ref* in *marks* when this repository's gitaudit made it (its MAC
    under the local key holds for this repository, *ref* and the commit); None otherwise.

    Only such a mark may stand for "everything up to here was verified": one written by hand,
    or with the MAC of another ref, another commit or another repository's mark, is ignored, and
    the chain is verified from its root (:func:`check_forward` still takes it as a floor)."""
    mark = marks["verified"].get(ref)
    tag = marks.get("macs", {}).get(ref)
    if not mark or not tag:
        return None
    key = _key(repo, create=False)
    if key is None:
        return None
    expected = secret.mac(key, _payload(gitdir, ref, mark))
    return mark if hmac.compare_digest(tag, expected) else None


@contextlib.contextmanager
def view(gitdir: Path) -> Iterator[Marks]:
    """The marks, read under a shared lock that the caller holds while it reads the refs they
    guard. Marks only ever name a tip their ref had, and refs move forward, so a ref read after
    its marks descends from them; a deliberate rewrite (:func:`rewrite`, which holds the lock
    exclusively) is then seen either wholly or not at all. Without this, a run appended and
    marked between reading a ref and reading its marks looked like a rewind."""
    with _locked(gitdir, shared=True):
        yield _read(gitdir)


def marked(marks: Marks) -> set[str]:
    """The refs a mark names (verified, seen, or a floor in the gitaudit home)."""
    return {ref for kind in ("verified", "seen", "home") for ref in marks.get(kind, {})}


def check_forward(
    repo: pygit2.Repository,
    gitdir: Path,
    ref: str,
    tip: pygit2.Oid | None,
    marks: Marks | None = None,
) -> None:
    """LedgerError when *ref* is now behind (or beside) a tip verified or seen earlier (in
    *marks*, taken with :func:`view` before the ref was read; read now otherwise)."""
    marks = marks if marks is not None else _read(gitdir)
    found = (marks[k].get(ref) for k in ("verified", "seen", "home") if k in marks)
    for mark in dict.fromkeys(m for m in found if m):
        _forward_of(repo, gitdir, ref, tip, mark)


def _forward_of(
    repo: pygit2.Repository, gitdir: Path, ref: str, tip: pygit2.Oid | None, mark: str
) -> None:
    if tip is None:
        raise LedgerError(
            f"{ref} was deleted; it was verified at {mark[:12]}",
            hint=f"restore it (`git update-ref {ref} {mark}`) or fetch it from the remote (if "
            f"this was deliberate, delete {_path(gitdir)} and {marks_path(gitdir)}, then run "
            "`git audit verify`)",
        )
    if str(tip) == mark:
        return
    try:
        ahead = repo.descendant_of(tip, pygit2.Oid(hex=mark))
    except (KeyError, ValueError, pygit2.GitError):
        ahead = False
    if not ahead:
        raise LedgerError(
            f"{ref} moved backwards or was rewritten: it is at {str(tip)[:12]}, which does not "
            f"descend from the verified tip {mark[:12]}",
            hint=f"restore it with `git update-ref {ref} {mark}` (if this was deliberate, delete "
            f"{_path(gitdir)} and {marks_path(gitdir)}, then run `git audit verify`)",
        )


@contextlib.contextmanager
def _locked(gitdir: Path, *, shared: bool = False) -> Iterator[None]:
    """Serialise read-modify-write of the marks between processes (a hook of one push and the
    next command may both update them): without it an old view could be written back. Readers
    that must see marks and refs together take it shared (:func:`view`)."""
    path = _path(gitdir).with_suffix(".flock")  # an flock target, not a git-style lock file
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def record(
    gitdir: Path,
    marks: dict[str, str],
    kind: Kind = "verified",
    repo: pygit2.Repository | None = None,
) -> None:
    """Merge *marks* into the file (atomic replace); a verified mark is also a seen one.

    With *repo*, a mark is only recorded while its ref still points at it: a slow process (the
    hook of an interrupted push, say) must not write back a tip the ref has since left; and a
    verified mark gets its MAC under the local key (:func:`verified`). Without *repo* (or the
    key) a verified mark is a floor only, as one written by hand is."""
    kinds: tuple[Kind, ...] = ("verified", "seen") if kind == "verified" else ("seen",)
    macs: dict[str, str] = {}
    if kind == "verified" and repo is not None:
        key = _key(repo, create=True)
        if key is not None:
            macs = {r: secret.mac(key, _payload(gitdir, r, v)) for r, v in marks.items()}
    before = _read(gitdir)
    if (
        all(before[k].get(r) == v for k in kinds for r, v in marks.items())
        and all(before["macs"].get(r) == m for r, m in macs.items())
        and (repo is None or all(before["home"].get(r) == v for r, v in marks.items()))
    ):
        return  # nothing new: no write, no lock
    with _locked(gitdir):
        current = _read(gitdir)
        if repo is not None:
            marks = {
                r: v
                for r, v in marks.items()
                if _points_at(repo, r, v) and _forward(repo, current, r, v)
            }
        for k in kinds:
            current[k].update(marks)
        if kind == "verified":
            for ref in marks:
                current["macs"].pop(ref, None)
                if ref in macs:
                    current["macs"][ref] = macs[ref]
        _write(gitdir, current)
        if repo is not None and any(current["home"].get(r) != v for r, v in marks.items()):
            _write_home(gitdir, {**current["home"], **marks})


def _forward(repo: pygit2.Repository, current: Marks, ref: str, value: str) -> bool:
    """Whether *value* is, or descends from, every mark *current* holds for *ref*: a mark never
    moves back or sideways (a run appended on a rewound ref must not cover the rewind); only
    :func:`rewrite` lowers one."""
    for mark in {m for k in ("verified", "seen", "home") if (m := current[k].get(ref))} - {value}:
        try:
            if not repo.descendant_of(pygit2.Oid(hex=value), pygit2.Oid(hex=mark)):
                return False
        except (KeyError, ValueError, pygit2.GitError):
            return False
    return True


def _points_at(repo: pygit2.Repository, ref: str, value: str) -> bool:
    try:
        return str(repo.references[ref].resolve().target) == value
    except (KeyError, pygit2.GitError):
        return False


def _reset(gitdir: Path, ref: str, seen: str) -> None:
    current = _read(gitdir)
    current["verified"].pop(ref, None)
    current["macs"].pop(ref, None)
    current["seen"][ref] = seen
    _write(gitdir, current)
    _write_home(gitdir, {**current["home"], ref: seen})


def rewrite(gitdir: Path, ref: str, base: str, new: str, move: Callable[[], None]) -> None:
    """Deliberately move *ref* to *new*, which does not descend from its tip but, like the tip,
    from *base*: the marks are lowered to *base* first, *move* moves the ref, then *new* is
    marked. The marks lock is held throughout, so no other process can mark the old tip in
    between; a crash at any point leaves a mark both the old and the new chain descend from."""
    with _locked(gitdir):
        _reset(gitdir, ref, base)
        move()
        _reset(gitdir, ref, new)


def _write_home(gitdir: Path, floors: dict[str, str]) -> None:
    """Keep *floors* in the gitaudit home (best effort: a home that cannot be written leaves
    the marks file alone to tell a rewind)."""
    path = Path(marks_path(gitdir))
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _replace(path, {"seen": floors})
    except OSError:
        return


def _write(gitdir: Path, current: dict[str, dict[str, str]]) -> None:
    path = _path(gitdir)
    path.parent.mkdir(parents=True, exist_ok=True)
    _replace(path, {k: current[k] for k in _SECTIONS})


def _replace(path: Path, content: dict[str, dict[str, str]]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".watermarks.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(content, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
