"""The fingerprint's head start: git hashes the work tree while gitaudit is still importing.

``status``, ``run`` and the agent's stop hook judge the work tree as it is when they start, and
the ``git add -A`` that fingerprints it (:mod:`gitaudit.git.fingerprint`) is their longest
step, about one ``git status``. In the usual case it needs nothing but the repository's place,
gitaudit's kept index for it and the settings, found here with the standard library's ``os``
(a few milliseconds of imports, against about 30 for the fingerprint's module and what it
brings), so git starts hashing about as soon as the interpreter is up.

Nothing is trusted here. The kept index is copied as it is, its tag unchecked, and the
descriptor it was copied from stays open: the fingerprint checks the tag against that
descriptor, and that nothing wrote the file meanwhile, before it takes git's result; otherwise
it throws the result away and computes the fingerprint from the start. Only the usual case gets
a head start: HEAD is a commit, the repository's config names no content filter and includes
no other file, and a kept
index exists whose tag names the current version of the user's index. Anything else (the first
call, a new version of the user's index, new settings) is left to the fingerprint.
"""

from __future__ import annotations

import contextlib
import os

from gitaudit.git import index_files
from gitaudit.git.environment import CONFIG, as_it_is, git_env
from gitaudit.git.spawn import Process
from gitaudit.places import entered_worktree, fingerprint_dir, inside, sha256_hex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gitaudit.git.index_files import Tagged

LOCATE = ("rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir", "--show-toplevel")
"""Where the repository is: git dir, common dir, work tree (then HEAD's commit and tree)."""

# Settings forced on the git processes that touch a private index.  The split index would make
# git create `sharedindex.*` files in the user's git dir (and hide the true entry count); sparse
# checkout would make `add -A` refuse or skip paths outside the cone; the embedded-repo advice is
# noise on stderr.
INDEX_CONFIG: tuple[str, ...] = (
    "-c",
    "core.splitIndex=false",
    "-c",
    "core.sparseCheckout=false",
    "-c",
    "index.sparse=false",
    "-c",
    "advice.addEmbeddedRepo=false",
    "-c",
    "index.version=4",
)
ADD_ALL = ("add", "-A", "--verbose")
"""What the fingerprint asks of git: hash every change into the private index, and say which."""
ADD_ENV = {"LC_ALL": "C", "LANGUAGE": "C"}
"""git's report untranslated: the fingerprint reads it."""


def settings_signature(git_dir: str, common_dir: str) -> str:
    """Stat data of the files outside the work tree that change how git hashes files.

    Attributes and filters (``core.autocrlf``, ``filter.*.clean``, ``info/attributes``) decide the
    blob a file hashes to.  A kept result holds blobs hashed under the settings of its time, so it
    is only reused while none of these files changed.
    """
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    candidates = [
        os.path.join(common_dir, "config"),
        os.path.join(git_dir, "config.worktree"),
        os.path.join(common_dir, "info", "attributes"),
        os.environ.get("GIT_CONFIG_GLOBAL") or os.path.join(home, ".gitconfig"),
        os.path.join(xdg, "git", "config"),
        os.path.join(xdg, "git", "attributes"),
        os.environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig",
    ]
    parts = [os.environ.get("GIT_CONFIG_PARAMETERS", ""), os.environ.get("GIT_CONFIG_COUNT", "")]
    for path in candidates:
        try:
            st = os.stat(path)
        except OSError:
            parts.append("-")
            continue
        parts.append(f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}")
    return "|".join(parts)


def warm_path(private_dir: str, git_dir: str, common_dir: str) -> str:
    """The kept index for the current settings: named after their signature."""
    slot = sha256_hex(settings_signature(git_dir, common_dir).encode())
    return os.path.join(private_dir, f"{index_files.WARM_PREFIX}{slot[:32]}.index")


def temp_path(private_dir: str) -> str:
    """A new per-process private index name (:data:`index_files.TEMP_PREFIX`)."""
    name = f"{index_files.TEMP_PREFIX}{os.getpid()}-{os.urandom(6).hex()}.index"
    return os.path.join(private_dir, name)


def base_path(temp: str) -> str:
    """The second name of a private index's seed (the fingerprint's ``_copy_base``)."""
    return temp.removesuffix(".index") + "-base.index"


def user_index_identity(git_dir: str) -> str | None:
    """:func:`index_files.identity` of the user's index now; None when there is none."""
    try:
        fd = os.open(os.path.join(git_dir, "index"), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        return index_files.identity(fd, os.fstat(fd))
    finally:
        os.close(fd)


def may_name_filters(config: str) -> bool:
    """Whether the config file *config* may define a content filter: the word appears in it, or
    it includes other files (in any letter case; git decides, for the fingerprint)."""
    try:
        with open(config, "rb") as handle:
            text = handle.read().lower()
    except OSError:
        return False
    return b"filter" in text or b"include" in text


class Started:
    """A ``git add -A`` started on a copy of the kept index, not yet trusted."""

    __slots__ = (
        "before",
        "common_dir",
        "git_dir",
        "head",
        "head_tree",
        "identity",
        "kept",
        "outputs",
        "private_dir",
        "process",
        "settings",
        "start",
        "temp",
        "warm",
        "work_tree",
    )

    def __init__(self, start: str, where: list[str], private_dir: str, warm: str) -> None:
        self.start = start
        self.git_dir, self.common_dir, self.work_tree, self.head, self.head_tree = where
        self.settings = as_it_is(self.work_tree)
        self.private_dir = private_dir
        self.warm = warm
        self.temp = temp_path(private_dir)
        self.identity: str | None = None
        self.kept: Tagged | None = None
        self.before: tuple[int, int] | None = None
        self.outputs = (self.temp + "-out", self.temp + "-err")
        self.process: Process | None = None

    @property
    def base(self) -> str:
        return base_path(self.temp)

    def launch(self) -> bool:
        """Copy the kept index and start git on the copy; False (nothing left behind) when the
        kept index does not name the user's current index."""
        self.identity = user_index_identity(self.git_dir)
        self.kept = index_files.open_kept(self.warm)
        if self.kept is None or self.identity is None or self.kept.basis != self.identity:
            return False
        index_files.copy_open_file(self.kept.fd, self.kept.st, self.temp)
        os.link(self.temp, self.base)
        st = os.stat(self.temp)
        self.before = (st.st_ino, st.st_mtime_ns)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        out, err = (os.open(path, flags, 0o600) for path in self.outputs)
        try:
            env = {
                "GIT_DIR": self.git_dir,
                "GIT_WORK_TREE": self.work_tree,
                "GIT_INDEX_FILE": self.temp,
                **ADD_ENV,
            }
            argv = ["git", "-C", self.work_tree, *CONFIG, *INDEX_CONFIG, *self.settings, *ADD_ALL]
            self.process = Process(argv, env=git_env(env), stdout=out, stderr=err)
        finally:
            os.close(out)
            os.close(err)
        return True

    def finish(self) -> tuple[int, bytes, bytes]:
        """Wait for git: its exit code, report and messages."""
        assert self.process is not None
        code = self.process.wait()
        out, err = (_read(path) for path in self.outputs)
        return code, out, err

    def discard(self, *, keep_index: bool = False) -> None:
        """Stop git if it still runs and remove what the head start wrote (all of it, or all
        but the private index and its seed's second name, which the fingerprint takes on)."""
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            self.process.wait()
        if self.kept is not None:
            self.kept.close()
        names = [*self.outputs]
        if not keep_index:
            names += [self.temp, self.temp + ".lock", self.base]
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return b""


_STARTED: list[Started] = []  # at most one: taken by the fingerprint of its work tree


def launch(repo_path: str | os.PathLike[str]) -> bool:
    """Start fingerprinting the work tree containing *repo_path* now if this is the usual case
    (see the module docstring); whether git is hashing. Never raises: the fingerprint itself
    explains what is wrong."""
    try:
        start = os.path.realpath(os.fspath(repo_path))
        if not os.path.isdir(start):
            start = os.path.dirname(start)
        if any(s.start == start for s in _STARTED):
            return True
        started = _launch(start)
    except (OSError, ValueError):
        return False
    if started is None:
        return False
    if not _STARTED:
        import atexit

        atexit.register(_discard_at_exit)
    _STARTED[:] = [started]
    return True


def _launch(start: str) -> Started | None:
    from gitaudit.git.call import run_git

    proc = run_git([*LOCATE, "HEAD^{commit}", "HEAD^{tree}", "--"], cwd=start, check=False)
    where = proc.stdout.decode("utf-8", "surrogateescape").splitlines()
    if proc.code != 0 or len(where) < 5:
        return None
    git_dir, common_dir, work_tree = where[:3]
    private_dir = fingerprint_dir(git_dir)
    if (
        os.path.realpath(work_tree) != entered_worktree(start)
        or inside(private_dir, work_tree, git_dir, common_dir)
        or may_name_filters(os.path.join(common_dir, "config"))
        or may_name_filters(os.path.join(git_dir, "config.worktree"))
    ):
        return None
    started = Started(start, where[:5], private_dir, warm_path(private_dir, git_dir, common_dir))
    try:
        if started.launch():
            return started
    except BaseException:
        started.discard()
        raise
    started.discard()
    return None


def take(repo_path: str | os.PathLike[str]) -> Started | None:
    """The started fingerprint of the work tree containing *repo_path*, once; any other is
    discarded."""
    wanted = os.path.realpath(os.fspath(repo_path))
    if not os.path.isdir(wanted):
        wanted = os.path.dirname(wanted)
    found = None
    while _STARTED:
        started = _STARTED.pop()
        if wanted in (started.start, os.path.realpath(started.work_tree)):
            found = started
        else:
            started.discard()
    return found


def _discard_at_exit() -> None:
    """A head start nobody took (the command failed first) is stopped and removed: a command
    leaves nothing behind."""
    while _STARTED:
        _STARTED.pop().discard()
