"""Trust anchors: the pin of the root of trust, kept outside the repository.

``git config audit.rootKey`` lives in ``.git/config``, which whatever can write the work tree's
``.git/`` (an agent confined to the project directory) can rewrite: re-pin the root of trust to
its own key and fabricate a whole new ``refs/audit/plans``. A **trust anchor** is that pin kept in
the user's gitaudit home, keyed by repository:
``$GITAUDIT_HOME/anchors/<sha256 of the real path of the git common dir>.json``, and the same
document keyed by the main work tree (so a ``.git`` swapped for, or redirected to, another
repository is noticed too). Each names the repository (for people reading it) and the root key's
fingerprint.

``git audit init`` and ``git audit trust init`` write it (the human's set-up); ``git audit trust
anchor`` pins the current verified root after confirmation. When a repository has an anchor, the
gate pins the root of trust to it, and ``audit.rootKey`` must agree: missing or different is
``plans.anchor-mismatch`` (FAIL), whatever the plans ref says. Without one, ``audit.rootKey`` alone
is the pin, as before; that is also how a server works, whose configuration is its
administrator's.

With neither, the root is whatever the fetched plans ref names (trust on first use). A CI job
judges a fresh clone, which never has an anchor, and a host without ``pre-receive`` takes any
push to ``refs/audit/plans``: so in a CI job (:func:`ci_job`) an unpinned repository is refused
(``plans.unpinned``), and the job pins the root from its own configuration, as the GitHub Action
and the documented recipes do.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path

from gitaudit import places
from gitaudit.crypto.pubkey import PublicKey
from gitaudit.errors import GitAuditError, TrustError
from gitaudit.frozen import frozen
from gitaudit.git.repo import Repo
from gitaudit.places import anchor_path, inside

FORMAT = "gitaudit.anchor/1"
CODE = "plans.anchor-mismatch"


class AnchorError(TrustError):
    """The repository's trust anchor and ``audit.rootKey`` disagree, or the anchor cannot be
    trusted: the gate's reason is ``plans.anchor-mismatch``."""

    code = CODE


class UnpinnedError(AnchorError):
    """A CI job judges a repository whose root of trust nothing pins."""

    code = "plans.unpinned"


CI_VARIABLES = (
    "CI",
    "GITHUB_ACTIONS",
    "GITLAB_CI",
    "BUILDKITE",
    "CIRCLECI",
    "TF_BUILD",
    "JENKINS_URL",
    "TEAMCITY_VERSION",
    "BITBUCKET_BUILD_NUMBER",
    "CODEBUILD_BUILD_ID",
)
"""What CI systems set in every job (``CI`` by most of them)."""


def ci_job() -> str | None:
    """The first of :data:`CI_VARIABLES` set (not empty, ``0`` or ``false``), as ``NAME=value``:
    this process is a CI job."""
    for name in CI_VARIABLES:
        value = os.environ.get(name, "")
        if value.strip().lower() not in ("", "0", "false"):
            return f"{name}={value[:40]}"
    return None


@frozen
class Anchor:
    """One repository's anchor, as read from *file*."""

    file: str
    repository: str  # the real path of the git common dir
    worktree: str | None  # the real path of the main work tree, None for a bare repository
    root_key: str  # SHA256:... of the key that signs the root of refs/audit/plans

    def to_json(self) -> dict[str, object]:
        return {
            "format": FORMAT,
            "repository": self.repository,
            "worktree": self.worktree,
            "root_key": self.root_key,
        }


def common_dir(gitdir: Path) -> str:
    """:func:`gitaudit.places.common_dir`; AnchorError when ``commondir`` cannot be read."""
    try:
        return places.common_dir(gitdir)
    except OSError as exc:
        raise AnchorError(f"cannot read {gitdir / 'commondir'}: {exc.strerror}") from None


def files(repo: Repo) -> list[str]:
    """Where *repo*'s anchor is kept: by its common dir, and by the work tree whose ``.git`` led
    to it (``Repo.entered``: where the user is, not where that ``.git`` or ``core.worktree``
    says the work tree is)."""
    keys = [anchor_path(common_dir(repo.gitdir))]
    if repo.entered is not None:
        keys.append(anchor_path(repo.entered))
    return keys


def _gitfile_target(dot_git: str) -> str | None:
    """The real path a ``gitdir:`` file names (relative to its folder), None when *dot_git* is
    no such file."""
    try:
        with open(dot_git, encoding="utf-8") as handle:
            text = handle.read(4096)
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    target = text.removeprefix("gitdir:").strip()
    return os.path.realpath(os.path.join(os.path.dirname(dot_git), target))


def worktrees(repo: Repo) -> list[str]:
    """The real paths of every work tree of *repo*'s common dir as it is now: the main one (the
    folder whose ``.git`` folder it is) and each linked one (``<common>/worktrees/<name>``)
    whose ``.git`` file leads back to it. A linked worktree's ``.git`` file, and the
    ``commondir`` of its git dir, are as writable as the main ``.git``: each needs a key of
    its own, else one redirected to a fabricated repository finds no anchor at all."""
    here = common_dir(repo.gitdir)
    found: list[str] = []
    parent = os.path.dirname(here)
    if os.path.basename(here) == ".git" and os.path.realpath(os.path.join(parent, ".git")) == here:
        found.append(parent)
    linked = os.path.join(here, "worktrees")
    try:
        names = sorted(os.listdir(linked))
    except OSError:
        names = []
    for name in names:
        gitdir = os.path.realpath(os.path.join(linked, name))
        try:
            with open(os.path.join(gitdir, "gitdir"), encoding="utf-8") as handle:
                dot_git = handle.read(4096).strip()
            shared = places.common_dir(gitdir)
        except OSError:
            continue
        # only a work tree whose .git leads back here: never another folder of the user's
        if dot_git and _gitfile_target(dot_git) == gitdir and shared == here:
            found.append(os.path.realpath(os.path.dirname(dot_git)))
    return found


def find(repo: Repo) -> Anchor | None:
    """*repo*'s anchor, or None when it has none. AnchorError when an anchor exists but cannot
    be trusted, or names another repository (the ``.git`` of an anchored work tree now leads
    elsewhere)."""
    here = common_dir(repo.gitdir)
    _require_own_commondir(repo, here)
    by_repo, *by_tree = (_read(path, repo) for path in files(repo))
    if by_repo is not None and by_repo.repository != here:
        raise AnchorError(
            f"the trust anchor {by_repo.file} names the repository {by_repo.repository}, "
            f"not {here}",
            hint="remove it, then pin the root again: `git audit trust anchor`",
        )
    tree = by_tree[0] if by_tree else None
    if tree is not None and tree.repository != here:
        raise AnchorError(
            f"the work tree {repo.entered} is anchored to the repository {tree.repository}, but "
            f"git now reads {here}: its .git was replaced or redirected ({tree.file})",
            hint="restore the work tree's .git; if you moved the repository on purpose, pin its "
            "root again: `git audit trust anchor`",
        )
    return by_repo or tree


def _require_own_commondir(repo: Repo, here: str) -> None:
    """AnchorError when *repo*'s git dir is a linked worktree's of an anchored repository
    (``<repository>/worktrees/<name>``) whose ``commondir`` now leads elsewhere."""
    gitdir = os.path.realpath(repo.gitdir)
    folder = os.path.dirname(gitdir)
    if os.path.basename(folder) != "worktrees":
        return
    owner = os.path.dirname(folder)
    if owner == here:
        return
    theirs = _read(anchor_path(owner), repo)
    if theirs is not None and theirs.repository == owner:
        raise AnchorError(
            f"the worktree git dir {gitdir} belongs to the repository {owner}, anchored to "
            f"{theirs.root_key}, but its commondir leads to {here}: it was redirected",
            hint=f"restore {os.path.join(gitdir, 'commondir')} (it reads ../..)",
        )


def _read(path: str, repo: Repo) -> Anchor | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AnchorError(
            f"cannot read the trust anchor {path}: {exc.strerror or exc}",
            hint="it must be a regular file; pin the root again: `git audit trust anchor`",
        ) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        raw = handle.read(1 << 16)
    if repo.workdir is not None and inside(path, repo.workdir):
        raise AnchorError(
            f"the trust anchor {path} is inside the work tree, where anything that edits the "
            "work tree can rewrite it",
            hint="set GITAUDIT_HOME outside the repository, then `git audit trust anchor`",
        )
    owned = not hasattr(os, "getuid") or info.st_uid == os.getuid()
    if not stat.S_ISREG(info.st_mode) or info.st_mode & 0o022 or not owned:
        raise AnchorError(
            f"the trust anchor {path} is writable by others",
            hint=f"chmod 600 {path}, after checking its root_key",
        )
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} document")
        worktree = doc["worktree"]
        anchor = Anchor(
            file=path,
            repository=_text(doc["repository"]),
            worktree=None if worktree is None else _text(worktree),
            root_key=_text(doc["root_key"]),
        )
        if not anchor.root_key.startswith("SHA256:"):
            raise ValueError("root_key is not a SHA256: fingerprint")
    except (KeyError, TypeError, ValueError) as exc:
        raise AnchorError(
            f"the trust anchor {path} is malformed ({exc})",
            hint="remove it, then pin the root again: `git audit trust anchor`",
        ) from None
    return anchor


def _text(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError("expected a non-empty string")
    return value


def same_key(configured: str, fingerprint: str) -> bool:
    """Whether ``audit.rootKey`` (a ``SHA256:`` fingerprint or an OpenSSH public key line) names
    the key with *fingerprint*."""
    configured = configured.strip()
    if configured.startswith("SHA256:"):
        return configured == fingerprint
    try:
        return PublicKey.from_openssh(configured).fingerprint() == fingerprint
    except GitAuditError:
        return False


def pinned_root(repo: Repo) -> str | None:
    """The pin of the root of trust: the anchor's key when *repo* has an anchor (and then
    ``audit.rootKey`` must name the same key), else ``audit.rootKey`` (None: trust on first
    use, never in a CI job: :class:`UnpinnedError`). AnchorError when they disagree."""
    configured = repo.config("audit.rootKey")
    anchor = find(repo)
    if anchor is None:
        # an empty audit.rootKey pins nothing (`git config audit.rootKey "$GITAUDIT_ROOT_KEY"`
        # with the variable unset, as in a job for a fork's pull request): the callers take a
        # blank pin as none, so the root would be taken on first use all the same
        job = ci_job() if not (configured or "").strip() else None
        if job is not None:
            raise UnpinnedError(
                f"no root of trust is pinned ({'an empty' if configured is not None else 'no'} "
                f"audit.rootKey, no trust anchor) and this is a CI "
                f"job ({job}): the root would be whatever the fetched refs/audit/plans names",
                hint="pin it from the CI configuration: "
                '`git config audit.rootKey "$GITAUDIT_ROOT_KEY"` (docs/hooks-and-servers.md)',
            )
        return configured
    if configured is None:
        raise AnchorError(
            f"audit.rootKey is not set, but this repository is anchored to {anchor.root_key} "
            f"({anchor.file}): .git/config was changed",
            hint=f"restore the pin: `git config audit.rootKey {anchor.root_key}`",
        )
    if not same_key(configured, anchor.root_key):
        raise AnchorError(
            f"audit.rootKey ({configured.strip()[:60]}) disagrees with this repository's trust "
            f"anchor {anchor.root_key} ({anchor.file}): .git/config was changed",
            hint=f"restore the pin: `git config audit.rootKey {anchor.root_key}` (if you re-pinned "
            "on purpose, pin the new root: `git audit trust anchor`)",
        )
    _learn_worktree(repo, anchor)
    return anchor.root_key


def _learn_worktree(repo: Repo, found: Anchor) -> None:
    """Key *found* (the anchor of the repository the work tree *repo* was entered from leads
    to, just checked) by that work tree too, when it has no key of its own yet: a linked
    worktree added after the root was pinned, whose ``.git`` file or ``commondir`` could later
    be redirected to a fabricated repository (without the key nothing would notice). Best
    effort: a home this process cannot write keeps what it has."""
    if repo.entered is None:
        return
    path = anchor_path(repo.entered)
    if os.path.lexists(path) or (repo.workdir is not None and inside(path, repo.workdir)):
        return
    learned = Anchor(path, found.repository, os.path.realpath(repo.entered), found.root_key)
    data = (json.dumps(learned.to_json(), indent=2, sort_keys=True) + "\n").encode()
    with contextlib.suppress(OSError):
        _write_file(path, data)


def write(repo: Repo, root_key: str) -> Anchor:
    """Pin *repo*'s root of trust to *root_key* (a ``SHA256:`` fingerprint) in its anchor files.
    AnchorError when they cannot be written (the files stay as they were)."""
    here = common_dir(repo.gitdir)
    worktree = os.path.realpath(repo.entered) if repo.entered is not None else None
    paths = list(dict.fromkeys([*files(repo), *(anchor_path(w) for w in worktrees(repo))]))
    anchor = Anchor(paths[0], here, worktree, root_key)
    for path in paths:
        if repo.workdir is not None and inside(path, repo.workdir):
            raise AnchorError(
                f"the trust anchor would be inside the work tree ({path})",
                hint="set GITAUDIT_HOME outside the repository",
            )
    data = (json.dumps(anchor.to_json(), indent=2, sort_keys=True) + "\n").encode()
    try:
        for path in paths:
            _write_file(path, data)
    except OSError as exc:
        raise AnchorError(
            f"cannot write the trust anchor {exc.filename or paths[0]}: {exc.strerror or exc}",
            hint="make $GITAUDIT_HOME writable (or point GITAUDIT_HOME elsewhere) and retry",
        ) from None
    return anchor


def _write_file(path: str, data: bytes) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".anchor.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
